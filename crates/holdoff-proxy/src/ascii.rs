//! The hot path's text writers, in one place: each writes exactly what std's `Display` writes,
//! without the formatting machinery, which cost more per request than the work around it (see
//! `docs/performance.md`, "Hot path"). Each has a test that compares it with std's over its
//! whole range or a sweep of it.

use std::fmt;
use std::net::Ipv4Addr;

/// `n` in decimal, as `u32`'s `Display` writes it.
pub(crate) fn u32_text(mut n: u32, buf: &mut [u8; 10]) -> &str {
    let mut start = buf.len();
    loop {
        start -= 1;
        // A digit: `n % 10` is below 10.
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[start..]).unwrap_or_default()
}

/// `ip` in dotted decimal, as `Ipv4Addr`'s `Display` writes it (four integers padded through
/// the formatter cost more than the judge's lookup).
pub(crate) fn ipv4_text(ip: Ipv4Addr, buf: &mut [u8; 15]) -> &str {
    let mut len = 0;
    for (index, octet) in ip.octets().into_iter().enumerate() {
        if index > 0 {
            buf[len] = b'.';
            len += 1;
        }
        let digits = [octet / 100, octet / 10 % 10, octet % 10];
        let skip = match octet {
            0..=9 => 2,
            10..=99 => 1,
            _ => 0,
        };
        for digit in &digits[skip..] {
            buf[len] = b'0' + digit;
            len += 1;
        }
    }
    // Only ASCII digits and dots were written.
    std::str::from_utf8(&buf[..len]).unwrap_or_default()
}

/// Text written in pieces: on the stack up to [`InlineText::INLINE`] bytes (a URL of a usual
/// length), on the heap past that. The judge writes a window key's parts into one, then hashes
/// it in one call: piece by piece, the text went through the formatter and the hasher once per
/// piece.
pub(crate) struct InlineText {
    inline: [u8; InlineText::INLINE],
    len: usize,
    spilled: Vec<u8>,
}

impl InlineText {
    pub(crate) const INLINE: usize = 256;

    pub(crate) fn new() -> InlineText {
        InlineText {
            inline: [0; InlineText::INLINE],
            len: 0,
            spilled: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.spilled.is_empty() {
            if let Some(room) = self.inline.get_mut(self.len..self.len + bytes.len()) {
                room.copy_from_slice(bytes);
                self.len += bytes.len();
                return;
            }
            self.spilled.reserve(self.len + bytes.len());
            self.spilled.extend_from_slice(&self.inline[..self.len]);
        }
        self.spilled.extend_from_slice(bytes);
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        if self.spilled.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }
}

impl fmt::Write for InlineText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_u32_edge_and_every_port_displays_as_std_does() {
        let edges = [9, 10, 99, 100, 4242, 4_194_304, u32::MAX - 1, u32::MAX];
        for n in (0..=u32::from(u16::MAX)).chain(edges) {
            assert_eq!(u32_text(n, &mut [0; 10]), n.to_string());
        }
    }

    #[test]
    fn every_ipv4_octet_in_every_position_displays_as_std_does() {
        for octet in 0..=255u8 {
            let ip = Ipv4Addr::new(octet, 255 - octet, octet / 2, octet.wrapping_mul(7));
            assert_eq!(ipv4_text(ip, &mut [0; 15]), ip.to_string());
        }
        for ip in [
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::BROADCAST,
        ] {
            assert_eq!(ipv4_text(ip, &mut [0; 15]), ip.to_string());
        }
    }

    #[test]
    fn inline_text_holds_what_was_written_on_either_side_of_its_inline_room() {
        use std::fmt::Write as _;
        for pieces in [1, 15, 16, 17, 40] {
            let mut text = InlineText::new();
            let mut want = String::new();
            for i in 0..pieces {
                let piece = format!("piece-{i:08}|");
                write!(text, "{piece}").unwrap();
                want.push_str(&piece);
            }
            assert_eq!(text.as_bytes(), want.as_bytes(), "{pieces} pieces");
        }
    }
}
