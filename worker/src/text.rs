//! The zygote's machine code in transparent huge pages.
//!
//! A worker is a fork of the zygote. The executable's code is a private file mapping with no
//! anonymous pages, so a fork copies none of its page-table entries: each worker faults in
//! the code it runs, 16 pages at a time (the kernel's fault-around), and tears those entries
//! down again at its exit. This kernel cannot hold a file's pages as huge pages
//! (`CONFIG_READ_ONLY_THP_FOR_FS`), so the zygote copies the 2 MiB-aligned part of its code
//! into anonymous huge pages and moves them over the file mapping, at the same addresses,
//! with the same bytes and the same protection (read and execute; never writable and
//! executable at once). A fork then copies one page-table entry per 2 MiB, and the worker
//! neither faults in nor tears down the pages it covers.
//!
//! Only huge pages pay: the same code copied into small anonymous pages would make every
//! fork copy an entry for each of them. So the move is made only once every page of the copy
//! is known to be huge (`AnonHugePages` in `/proc/self/smaps`), and otherwise the copy is
//! dropped and the code stays as it was.

use std::io::{BufRead, BufReader};

const HUGE_PAGE: usize = 2 << 20;

/// What [`move_code_to_huge_pages`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Moved {
    /// The code's bytes in `[start, start + len)` are now in huge pages.
    Yes {
        /// The first address moved (2 MiB-aligned).
        start: usize,
        /// How many bytes moved (a multiple of 2 MiB).
        len: usize,
    },
    /// Nothing moved, and why: the code is as it was.
    No(String),
}

/// Moves the 2 MiB-aligned part of the mapping that holds this function's code into
/// transparent huge pages. Call it only while the process has one thread: another thread
/// running the code being moved would see it unmapped for the duration of one `mremap`.
pub fn move_code_to_huge_pages() -> Moved {
    let here = move_code_to_huge_pages as fn() -> Moved as usize;
    let (start, end) = match code_mapping(here) {
        Ok(range) => range,
        Err(why) => return Moved::No(why),
    };
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let aligned_end = end / HUGE_PAGE * HUGE_PAGE;
    if aligned_end <= aligned {
        return Moved::No(format!(
            "the code ({} KiB) holds no aligned 2 MiB",
            (end - start) >> 10
        ));
    }
    let len = aligned_end - aligned;
    // SAFETY: `[aligned, aligned + len)` lies within the process's own code mapping (from
    // /proc/self/maps), which stays mapped and readable; `copy_to_huge_pages` maps its own
    // region and either moves it over that range with identical bytes or unmaps it.
    match unsafe { copy_to_huge_pages(aligned, len) } {
        Ok(()) => Moved::Yes {
            start: aligned,
            len,
        },
        Err(why) => Moved::No(why),
    }
}

/// The executable mapping of `/proc/self/maps` that holds `address`.
fn code_mapping(address: usize) -> Result<(usize, usize), String> {
    let maps = std::fs::File::open("/proc/self/maps")
        .map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    let mut lines = BufReader::new(maps).lines();
    let found = mapping_holding(
        address,
        std::iter::from_fn(|| lines.next().and_then(Result::ok)),
    );
    match found {
        Some((lo, hi, perms)) if perms.starts_with("r-xp") => Ok((lo, hi)),
        Some((_, _, perms)) => Err(format!("the code's mapping is {perms}, not r-xp")),
        None => Err("the code's mapping is not in /proc/self/maps".to_string()),
    }
}

/// A mapping's first line in `/proc/PID/maps` or `smaps` (`START-END PERMS …`): its range
/// and permissions; `None` for any other line.
fn mapping_header(line: &str) -> Option<(usize, usize, &str)> {
    let mut fields = line.split_ascii_whitespace();
    let (lo, hi) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let lo = usize::from_str_radix(lo, 16).ok()?;
    let hi = usize::from_str_radix(hi, 16).ok()?;
    (lo < hi && perms.len() == 4).then_some((lo, hi, perms))
}

/// The range and permissions of the mapping among `lines` (of `/proc/PID/maps`) that holds
/// `address`.
fn mapping_holding(
    address: usize,
    lines: impl Iterator<Item = String>,
) -> Option<(usize, usize, String)> {
    lines.into_iter().find_map(|line| {
        let (lo, hi, perms) = mapping_header(&line)?;
        (lo..hi)
            .contains(&address)
            .then(|| (lo, hi, perms.to_string()))
    })
}

/// `AnonHugePages` of the mapping among `lines` (of `/proc/PID/smaps`) that starts at
/// `start`, in KiB.
pub fn anon_huge_kib(start: usize, lines: impl Iterator<Item = String>) -> Option<usize> {
    let mut inside = false;
    for line in lines {
        if let Some((lo, _, _)) = mapping_header(&line) {
            inside = lo == start;
        } else if inside && let Some(kib) = line.strip_prefix("AnonHugePages:") {
            return kib.trim().strip_suffix("kB")?.trim().parse().ok();
        }
    }
    None
}

/// Copies `[at, at + len)` (2 MiB-aligned) into fresh anonymous huge pages and moves them
/// over it, read and execute.
///
/// # Safety
/// `[at, at + len)` must be mapped readable and executable, and no other thread may run
/// code in it during the call.
unsafe fn copy_to_huge_pages(at: usize, len: usize) -> Result<(), String> {
    // An aligned region: mapped with a huge page of slack, then trimmed.
    // SAFETY: a new anonymous private mapping at an address the kernel chooses.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len + HUGE_PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let raw = raw as usize;
    let copy = raw.next_multiple_of(HUGE_PAGE);
    // SAFETY: both trimmed pieces are parts of the mapping just made, outside `[copy, copy +
    // len)`; either may be empty, which munmap refuses harmlessly.
    unsafe {
        libc::munmap(raw as *mut libc::c_void, copy - raw);
        libc::munmap(
            (copy + len) as *mut libc::c_void,
            raw + len + HUGE_PAGE - (copy + len),
        );
    }
    let drop_copy = |why: String| {
        // SAFETY: the copy is ours and nothing points into it.
        unsafe { libc::munmap(copy as *mut libc::c_void, len) };
        Err(why)
    };
    // SAFETY: advice on our own mapping.
    if unsafe { libc::madvise(copy as *mut libc::c_void, len, libc::MADV_HUGEPAGE) } != 0 {
        return drop_copy(format!(
            "madvise(MADV_HUGEPAGE): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the source is readable (the caller's promise) and the destination is our own
    // writable mapping of the same length; they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(at as *const u8, copy as *mut u8, len) };
    if !matches!(huge_kib(copy), Ok(kib) if kib >= len >> 10) {
        // A huge page was not free at the first touch: ask the kernel to collapse the
        // region now (Linux 6.1+), and look again.
        // SAFETY: advice on our own mapping.
        unsafe { libc::madvise(copy as *mut libc::c_void, len, libc::MADV_COLLAPSE) };
        match huge_kib(copy) {
            Ok(kib) if kib >= len >> 10 => {}
            Ok(kib) => {
                return drop_copy(format!(
                    "{kib} KiB of the {} KiB copy are huge pages",
                    len >> 10
                ));
            }
            Err(why) => return drop_copy(why),
        }
    }
    // SAFETY: our own mapping; it becomes read and execute, never writable again.
    if unsafe {
        libc::mprotect(
            copy as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_EXEC,
        )
    } != 0
    {
        return drop_copy(format!("mprotect: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: replaces `[at, at + len)` with a mapping of the same bytes and protection in
    // one call; the caller promises no other thread runs there meanwhile, and this thread
    // returns into identical code.
    let moved = unsafe {
        libc::mremap(
            copy as *mut libc::c_void,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            at as *mut libc::c_void,
        )
    };
    if moved == libc::MAP_FAILED {
        return drop_copy(format!("mremap: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `AnonHugePages` of this process's mapping that starts at `start`, in KiB.
fn huge_kib(start: usize) -> Result<usize, String> {
    let smaps = std::fs::File::open("/proc/self/smaps")
        .map_err(|e| format!("cannot read /proc/self/smaps: {e}"))?;
    let mut lines = BufReader::new(smaps).lines();
    anon_huge_kib(
        start,
        std::iter::from_fn(|| lines.next().and_then(Result::ok)),
    )
    .ok_or_else(|| "the copy has no AnonHugePages in /proc/self/smaps".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5600b97d4000-5600b9800000 r-xp 00212000 fe:00 5312617                    /usr/sbin/jqjaild
Size:                176 kB
AnonHugePages:         0 kB
5600b9800000-5600b9e00000 r-xp 00000000 00:00 0 
Size:               6144 kB
Anonymous:          6144 kB
AnonHugePages:      6144 kB
VmFlags: rd ex mr mw me ac hg
5600b9e00000-5600b9f3d000 r-xp 0083e000 fe:00 5312617                    /usr/sbin/jqjaild
Size:               1268 kB
AnonHugePages:         0 kB
";

    fn lines(text: &str) -> impl Iterator<Item = String> + '_ {
        text.lines().map(str::to_string)
    }

    #[test]
    fn the_mapping_holding_an_address_is_found_by_its_header_alone() {
        assert_eq!(
            mapping_holding(0x5600b9800123, lines(SMAPS)),
            Some((0x5600b9800000, 0x5600b9e00000, "r-xp".to_string()))
        );
        // The last byte of a mapping is in it; its end is the next one's.
        assert_eq!(
            mapping_holding(0x5600b97fffff, lines(SMAPS)).map(|m| m.0),
            Some(0x5600b97d4000)
        );
        assert_eq!(mapping_holding(0x1000, lines(SMAPS)), None);
    }

    #[test]
    fn huge_pages_are_read_from_the_mapping_that_starts_there_only() {
        assert_eq!(anon_huge_kib(0x5600b9800000, lines(SMAPS)), Some(6144));
        assert_eq!(anon_huge_kib(0x5600b9e00000, lines(SMAPS)), Some(0));
        // An address inside a mapping is not its start.
        assert_eq!(anon_huge_kib(0x5600b9801000, lines(SMAPS)), None);
        assert_eq!(
            anon_huge_kib(
                0x5600b9800000,
                lines("5600b9800000-5600b9e00000 r-xp 0 0:0 0\nAnonHugePages: lots\n")
            ),
            None
        );
    }

    #[test]
    fn lines_that_are_not_headers_are_not_taken_for_one() {
        for line in [
            "AnonHugePages:      6144 kB",
            "VmFlags: rd ex mr mw me ac",
            "5600b9e00000-5600b9800000 r-xp 0 0:0 0",
            "zz-5600b9800000 r-xp 0 0:0 0",
            "5600b9800000-5600b9e00000",
        ] {
            assert_eq!(mapping_header(line), None, "{line}");
        }
    }
}
