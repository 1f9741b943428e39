//! Weighs handing a worker its input as a sealed memfd against copying it into a fresh
//! buffer, in-process: `memfd_probe FILE FILTER N` runs FILTER over FILE N times each way,
//! alternating, and prints the medians of
//! - a fresh zeroed buffer, the input copied in, then the evaluation (a worker's read, less
//!   the sockets);
//! - a memfd written and sealed (the client's part), mapped read-only (the worker's), then the
//!   evaluation from the mapping.
//!
//! Run it with `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, as the workers are. glibc 2.36 heeds
//! that in only some processes (see `jqjail_worker::alloc::advise_huge_pages`): the probe says
//! which kind it ran in; compare runs of one kind.

mod shared;

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Instant;

/// A read-only shared mapping, unmapped when the evaluation's `Bytes` let it go.
struct Mapping {
    at: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone.
unsafe impl Send for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `at` is a live mapping of `len` readable bytes until `drop`.
        unsafe { std::slice::from_raw_parts(self.at, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this value owns; nothing borrows it any more.
        unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(filter), Some(n)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: memfd_probe FILE FILTER N");
        std::process::exit(2);
    };
    let src = std::fs::read(file).expect("readable FILE");
    let n: usize = n.parse().expect("N is a number");
    let engine = jqjail_worker::Engine::new();
    let job = shared::job(filter, src.len());
    let (mut copied, mut mapped, mut written) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        engine.prepare();
        let t = Instant::now();
        let mut buffer = vec![0u8; src.len()];
        buffer.copy_from_slice(&src);
        let input = jqjail_worker::Bytes::from(buffer);
        let _ = jqjail_worker::evaluate(&engine, &job, &input);
        drop(input);
        copied.push(t.elapsed().as_secs_f64() * 1e3);

        engine.prepare();
        let t = Instant::now();
        // SAFETY: memfd_create takes a NUL-terminated name and returns a new descriptor or -1.
        let fd = unsafe {
            libc::memfd_create(
                c"input".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mut memfd = unsafe { std::fs::File::from_raw_fd(fd) };
        memfd.write_all(&src).expect("writing the memfd");
        let seals =
            libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on a descriptor this process owns.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) }, 0);
        written.push(t.elapsed().as_secs_f64() * 1e3);
        // SAFETY: a read-only shared mapping of the sealed memfd at an address the kernel
        // chooses; it touches no existing memory.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                src.len(),
                libc::PROT_READ,
                libc::MAP_SHARED,
                memfd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(
            at,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        let input = jqjail_worker::Bytes::from_owner(Mapping {
            at: at as *const u8,
            len: src.len(),
        });
        let _ = jqjail_worker::evaluate(&engine, &job, &input);
        drop((input, memfd));
        mapped.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "glibc advised its heap into huge pages: {}",
        jqjail_worker::alloc::heap_advised()
    );
    println!(
        "copied into a fresh buffer, then evaluated: {:.2} ms; memfd: {:.2} ms in all, of which written and sealed {:.2} ms",
        median(&mut copied),
        median(&mut mapped),
        median(&mut written)
    );
}
