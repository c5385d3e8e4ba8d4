//! Reading a file a configuration names, or the configuration itself, without trusting it:
//! a regular file, read whole within a size limit. A named pipe would block the read, and a
//! device such as `/dev/zero` never ends.

use std::fs::{self, File};
use std::io::Read;
use std::path::Path;

/// The most a data file (errors, mocks, `@file` body) or a configuration file may hold: each
/// is read whole, and a body is kept in memory.
pub const MAX_DATA_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads `file` whole, if it is a regular file of at most [`MAX_DATA_FILE_BYTES`]; the error,
/// a message fit after the key path, calls it `name` (`the errors file errors.json`).
///
/// A named pipe would block the open until something writes to it, and a device such as
/// `/dev/zero` never ends: the type is checked before the file is opened, and again on the
/// opened file, and no more than the limit is read whatever size the file claims.
pub(crate) fn read_regular(file: &Path, name: &str) -> Result<Vec<u8>, String> {
    let cannot = |err: std::io::Error| format!("cannot read {name}: {err}");
    let not_regular =
        |kind: &str| format!("{name} is {kind}, not a regular file: name a regular file");
    let too_large = || {
        format!(
            "{name} is larger than {} MiB, the most holdoff reads from one: make it smaller",
            MAX_DATA_FILE_BYTES / (1024 * 1024)
        )
    };
    let before = fs::metadata(file).map_err(cannot)?;
    if !before.is_file() {
        return Err(not_regular(file_kind(&before)));
    }
    if before.len() > MAX_DATA_FILE_BYTES {
        return Err(too_large());
    }
    let opened = File::open(file).map_err(cannot)?;
    let metadata = opened.metadata().map_err(cannot)?;
    if !metadata.is_file() {
        return Err(not_regular(file_kind(&metadata)));
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_DATA_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if u64::try_from(bytes.len()).map_or(true, |read| read > MAX_DATA_FILE_BYTES) {
        return Err(too_large());
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, in words.
fn file_kind(metadata: &fs::Metadata) -> &'static str {
    let kind = metadata.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    "of another kind"
}
