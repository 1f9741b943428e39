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
//! dropped and the code stays as it was. Nor is it tried where the administrator turned
//! transparent huge pages off (which `MADV_COLLAPSE` would override), where the process may not
//! make written memory executable (systemd's `MemoryDenyWriteExecute=`, which the jqjail
//! unit sets, and so it passes `--code-pages file`), or while the process has more than one
//! thread.
//!
//! What it costs: the moved code is anonymous memory, charged to the zygote (4 to 6 MiB of
//! jqjaild's), which can be swapped but not dropped, and each worker's resident size counts
//! it whole. perf cannot name code in anonymous memory, and uprobes (bpftrace, `perf probe`)
//! on the executable do not reach it: profile with `--code-pages file`.

use jqjail_protocol::worker::EXIT_SETUP;
use std::io::{BufRead, BufReader};

/// What [`move_code_to_huge_pages`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Moved {
    /// The code's bytes in `[start, start + len)` are now in huge pages.
    Yes {
        /// The first address moved (aligned to a huge page).
        start: usize,
        /// How many bytes moved (a multiple of a huge page).
        len: usize,
    },
    /// Nothing moved, and why: the code is as it was.
    No(String),
}

/// Moves the part of the mapping that holds this function's code that is aligned to huge
/// pages into transparent huge pages. Does nothing while the process has more than one
/// thread (another thread running the code being moved would find it unmapped for the
/// duration of one `mremap`), but checks that only at the start: call it only where no
/// thread can be started meanwhile.
pub fn move_code_to_huge_pages() -> Moved {
    let here = move_code_to_huge_pages as fn() -> Moved as usize;
    let (huge, (start, end)) = match huge_page_size().and_then(|huge| {
        one_thread()?;
        Ok((huge, code_mapping(here)?))
    }) {
        Ok(found) => found,
        Err(why) => return Moved::No(why),
    };
    let aligned = start.next_multiple_of(huge);
    let aligned_end = end / huge * huge;
    if aligned_end <= aligned {
        return Moved::No(format!(
            "the code ({} KiB) holds no aligned huge page of {} KiB",
            (end - start) >> 10,
            huge >> 10
        ));
    }
    let len = aligned_end - aligned;
    // SAFETY: `[aligned, aligned + len)` lies within the process's own code mapping (from
    // /proc/self/maps), which stays mapped and readable, and the process has one thread;
    // `copy_to_huge_pages` maps its own region and either moves it over that range with
    // identical bytes or unmaps it.
    match unsafe { copy_to_huge_pages(aligned, len, huge) } {
        Ok(()) => Moved::Yes {
            start: aligned,
            len,
        },
        Err(why) => Moved::No(why),
    }
}

/// The size of a transparent huge page, unless the administrator or this process turned
/// them off.
fn huge_page_size() -> Result<usize, String> {
    const THP: &str = "/sys/kernel/mm/transparent_hugepage";
    let read = |name: &str| {
        std::fs::read_to_string(format!("{THP}/{name}"))
            .map_err(|e| format!("no transparent huge pages here ({THP}/{name}: {e})"))
    };
    if read("enabled")?.contains("[never]") {
        return Err(format!(
            "transparent huge pages are off ({THP}/enabled is never)"
        ));
    }
    // SAFETY: PR_GET_THP_DISABLE reads a flag of this process.
    if unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) } == 1 {
        return Err("transparent huge pages are off for this process (PR_SET_THP_DISABLE)".into());
    }
    let size = read("hpage_pmd_size")?;
    match size.trim().parse::<usize>() {
        Ok(huge) if huge.is_power_of_two() && huge >= 64 << 10 => Ok(huge),
        _ => Err(format!("unreadable {THP}/hpage_pmd_size: {size:?}")),
    }
}

/// `Ok` when this process has one thread, by `/proc/self/status`.
fn one_thread() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    match status.lines().find_map(|l| l.strip_prefix("Threads:")) {
        Some(n) if n.trim() == "1" => Ok(()),
        n => Err(format!(
            "the process has {} threads, not one",
            n.unwrap_or("?").trim()
        )),
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
fn anon_huge_kib(start: usize, lines: impl Iterator<Item = String>) -> Option<usize> {
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

/// Copies `[at, at + len)` (aligned to huge pages of `huge` bytes) into fresh anonymous huge
/// pages and moves them over it, read and execute.
///
/// # Safety
/// `[at, at + len)` must be mapped readable and executable, and no other thread may run
/// code in it during the call.
unsafe fn copy_to_huge_pages(at: usize, len: usize, huge: usize) -> Result<(), String> {
    // An aligned region: mapped with a huge page of slack, then trimmed.
    // SAFETY: a new anonymous private mapping at an address the kernel chooses.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len + huge,
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
    let copy = raw.next_multiple_of(huge);
    // SAFETY: both trimmed pieces are parts of the mapping just made, outside `[copy, copy +
    // len)`; either may be empty, which munmap refuses harmlessly.
    unsafe {
        libc::munmap(raw as *mut libc::c_void, copy - raw);
        libc::munmap(
            (copy + len) as *mut libc::c_void,
            raw + len + huge - (copy + len),
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
        let error = std::io::Error::last_os_error();
        let why = match error.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => format!(
                "memory once writable may not become executable here (systemd's MemoryDenyWriteExecute=, or PR_SET_MDWE): mprotect: {error}"
            ),
            _ => format!("mprotect: {error}"),
        };
        return drop_copy(why);
    }
    // SAFETY: replaces `[at, at + len)` with a mapping of the same bytes and protection in
    // one call; the caller promises no other thread runs there meanwhile, and this thread
    // returns into identical code. Should the call fail (out of memory for the page tables),
    // the kernel may have unmapped the range before it gave up: nothing is left to return
    // to, so the process ends (or faults, if this very code was in the range), and the
    // supervisor starts another zygote.
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
        let error = std::io::Error::last_os_error();
        crate::say!(
            "jqjail zygote: moving the code into huge pages failed halfway: mremap: {error}"
        );
        // SAFETY: _exit ends the process at once; it holds nothing to flush.
        unsafe { libc::_exit(EXIT_SETUP) }
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
