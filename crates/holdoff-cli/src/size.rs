//! Sizes on the command line: `512MiB`, `1GB`, `64k`, or plain bytes (`1048576`).
//!
//! Units, in any case: `k`/`kb` (1,000), `kib` (1,024), `m`/`mb`, `mib`, `g`/`gb`, `gib`;
//! a bare number is bytes. Whole numbers only: a size is counted in bytes.

// Not a crate (checked with bytesize 2.7 and parse-size 1.1): both read `1.5GB` and `10 MB`,
// which we refuse; bytesize turns `99999999999999GiB` into `u64::MAX` rather than an error;
// parse-size also reads ` 1`, `1_000`, `1e3` and `1T`. Refusing those first would take the
// same unit table as parsing them.

/// Parses a size in bytes; the error is a complete message for the user.
pub(crate) fn parse(input: &str) -> Result<u64, String> {
    let invalid =
        || format!("invalid size `{input}`: expected e.g. 512MiB, 1GB or 1048576 (bytes)");
    let digits = input.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = input.split_at(digits);
    let number: u64 = number.parse().map_err(|_| invalid())?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return Err(invalid()),
    };
    let bytes = number
        .checked_mul(scale)
        .ok_or_else(|| format!("invalid size `{input}`: too large"))?;
    if bytes == 0 {
        return Err(format!("invalid size `{input}`: must be more than 0 bytes"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reads_units_in_any_case() {
        assert_eq!(parse("1048576"), Ok(1_048_576));
        assert_eq!(parse("512MiB"), Ok(512 << 20));
        assert_eq!(parse("1GB"), Ok(1_000_000_000));
        assert_eq!(parse("64k"), Ok(64_000));
        assert_eq!(parse("2gib"), Ok(2 << 30));
    }

    #[test]
    fn says_what_is_wrong() {
        assert_eq!(
            parse("1.5GB").unwrap_err(),
            "invalid size `1.5GB`: expected e.g. 512MiB, 1GB or 1048576 (bytes)"
        );
        assert!(parse("").is_err());
        assert!(parse("10 MB").is_err());
        assert!(parse("0").unwrap_err().contains("more than 0"));
        assert!(
            parse("99999999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
