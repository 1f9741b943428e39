//! One line to stderr in one `write(2)`.
//!
//! The zygote's stderr is the daemon's own, which the daemon's log lines share. `eprintln!`
//! writes each piece of its format on its own, so a line of the zygote could be cut in two by
//! one of the daemon's (seen in a test under load: "the code stays in the executable's pages:"
//! then the daemon's "worker zygote started", then the reason). [`say!`](crate::say!) formats
//! the whole line on the stack first: no allocation (a zygote between forks allocates
//! nothing), and a line of at most [`LINE_BYTES`] is atomic on a pipe (PIPE_BUF is 4 KiB).

use std::fmt::{self, Write as _};
use std::os::fd::{AsRawFd, BorrowedFd};

/// The longest line written, its newline included; a longer one is cut and ends in `…`.
pub const LINE_BYTES: usize = 1024;

/// Writes `format!(...)` and a newline to stderr in one write. Errors are ignored, as
/// `eprintln!`'s are not: there is nowhere else to say them.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        // SAFETY: fd 2 is open for the life of the process (0, 1 and 2 are never closed).
        $crate::say::line(unsafe { ::std::os::fd::BorrowedFd::borrow_raw(2) }, format_args!($($arg)*))
    };
}

/// Writes `args` and a newline to `fd` in one `write(2)`, and another only for what the kernel
/// did not take (never on a pipe, for a line this short).
pub fn line(fd: BorrowedFd<'_>, args: fmt::Arguments<'_>) {
    const MORE: &str = "…";
    let mut buf = [0u8; LINE_BYTES];
    let mut text = Cut {
        buf: &mut buf[..LINE_BYTES - MORE.len() - 1],
        len: 0,
    };
    let whole = text.write_fmt(args).is_ok();
    let mut len = text.len;
    if !whole {
        buf[len..len + MORE.len()].copy_from_slice(MORE.as_bytes());
        len += MORE.len();
    }
    buf[len] = b'\n';
    len += 1;
    let mut rest = &buf[..len];
    while !rest.is_empty() {
        // SAFETY: `rest` is a live buffer of `rest.len()` bytes; write(2) only reads it.
        let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(0) => return,
            Ok(n) => rest = &rest[n..],
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
            }
            Err(_) => return,
        }
    }
}

/// A writer into a fixed buffer that keeps what fits, cut at a character's boundary, and
/// fails once something did not fit.
struct Cut<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl fmt::Write for Cut<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let take = if s.len() <= room {
            s.len()
        } else {
            (0..=room)
                .rev()
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(0)
        };
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take == s.len() {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    /// What each call wrote, one datagram a `write`: a line in two writes is two datagrams.
    fn said(args: &[fmt::Arguments<'_>]) -> Vec<Vec<u8>> {
        let (r, w) = UnixDatagram::pair().unwrap();
        for a in args {
            line(w.as_fd(), *a);
        }
        r.set_nonblocking(true).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 2 * LINE_BYTES];
        while let Ok(n) = r.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    #[test]
    fn a_line_of_many_pieces_is_one_write_with_its_newline() {
        let why = "mprotect: Operation not permitted";
        let got = said(&[format_args!(
            "jqjail zygote: the code stays: {why}; {} {}",
            1, 'x'
        )]);
        assert_eq!(
            got,
            [b"jqjail zygote: the code stays: mprotect: Operation not permitted; 1 x\n".to_vec()]
        );
    }

    #[test]
    fn a_long_line_is_cut_at_a_character_and_says_so() {
        let long = "é".repeat(LINE_BYTES);
        let got = said(&[format_args!("a{long}")]);
        assert_eq!(got.len(), 1, "one write");
        assert!(got[0].len() <= LINE_BYTES, "{}", got[0].len());
        let text = String::from_utf8(got[0].clone()).expect("cut at a character's boundary");
        assert!(text.starts_with("aé"));
        assert!(text.ends_with("é…\n"), "{text:?}");
    }

    #[test]
    fn a_line_that_fits_exactly_is_not_cut() {
        let fits = "x".repeat(LINE_BYTES - "…".len() - 1);
        let got = said(&[format_args!("{fits}")]);
        assert_eq!(got, [format!("{fits}\n").into_bytes()]);
    }
}
