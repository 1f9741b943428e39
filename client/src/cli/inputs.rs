//! Reading the input files (or stdin) as one stream, within the daemon's input limit.

use crate::ErrorCode;
use jqjail_protocol::limits::grouped;
use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

/// Inputs read without the daemon's limit in hand: regular files of at most this many bytes
/// in all (a tail this small is read whole by the daemon).
const SMALL_FILES: u64 = 256 * 1024;

/// `Some(SMALL_FILES)` when every input is a regular file and they hold at most that many
/// bytes: then a read that finds more (a file grew) can be done again. Never with stdin (`-`,
/// whatever a file of that name holds), which cannot be read twice.
pub(super) fn small_files(files: &[OsString]) -> Option<u64> {
    let mut total = 0u64;
    for file in files {
        if file == "-" {
            return None;
        }
        let meta = std::fs::metadata(file).ok().filter(|m| m.is_file())?;
        total = total.saturating_add(meta.len());
    }
    (!files.is_empty() && total <= SMALL_FILES).then_some(SMALL_FILES)
}

/// Reads the input files one after another (stdin if there are none, and for `-`) as one
/// stream, as jq does, refusing more than `max` bytes in all without reading past it.
pub(super) fn read_inputs(files: &[OsString], max: u64) -> Result<Vec<u8>, (&'static str, String)> {
    let stdin = [OsString::from("-")];
    let files = if files.is_empty() { &stdin[..] } else { files };
    let too_large = |len: u64| {
        let what = match files.len() {
            1 => "input is".to_string(),
            n => format!("the {n} inputs are"),
        };
        (
            ErrorCode::InputTooLarge.as_str(),
            format!(
                "{what} {} bytes, over the daemon's {}-byte limit",
                grouped(len),
                grouped(max)
            ),
        )
    };
    let mut bytes = Vec::new();
    for file in files {
        let room = (max + 1).saturating_sub(bytes.len() as u64);
        let read = if file == "-" {
            std::io::stdin().lock().take(room).read_to_end(&mut bytes)
        } else {
            let path = Path::new(file);
            let f = std::fs::File::open(path).map_err(|e| {
                (
                    "INPUT_UNREADABLE",
                    format!("cannot open {}: {e}", path.display()),
                )
            })?;
            if let Ok(meta) = f.metadata() {
                if meta.len() > max {
                    return Err(too_large(meta.len()));
                }
                // Room for the whole file and the byte that shows it grew: one read, not a
                // series of doubling ones (`Take` hides the size from `read_to_end`).
                bytes.reserve(meta.len().saturating_add(1).min(room) as usize);
            }
            f.take(room).read_to_end(&mut bytes)
        };
        read.map_err(|e| ("INPUT_UNREADABLE", format!("reading the input: {e}")))?;
        if bytes.len() as u64 > max {
            return Err(too_large(bytes.len() as u64));
        }
    }
    Ok(bytes)
}
