//! Learning which system call killed a worker: the kernel logs every seccomp kill as an audit
//! record (`type=1326 … pid=N … syscall=M`) in its message buffer. Reading `/dev/kmsg` needs
//! root or CAP_SYSLOG and an unrestricted `dmesg`; where it cannot be read, the syscall stays
//! unnamed and the error says so.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

/// Most kernel records read while looking (the buffer holds a few thousand at most).
const MAX_RECORDS: usize = 16_384;

/// The system call number that seccomp killed process `pid` for, if the kernel log says.
pub fn seccomp_syscall(pid: i32) -> Option<i64> {
    let mut kmsg = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
        .ok()?;
    let mut found = None;
    let mut record = vec![0u8; 8192];
    for _ in 0..MAX_RECORDS {
        match kmsg.read(&mut record) {
            Ok(0) => break,
            Ok(n) => {
                if let Some(nr) = parse(&String::from_utf8_lossy(&record[..n]), pid) {
                    found = Some(nr);
                }
            }
            // EPIPE: a record was overwritten while reading; the next read continues.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(_) => break,
        }
    }
    found
}

/// The syscall number in a seccomp audit record about `pid`.
fn parse(record: &str, pid: i32) -> Option<i64> {
    if !record.contains("type=1326") {
        return None;
    }
    let field = |name: &str| {
        record
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .map(str::to_owned)
    };
    if field("pid=")? != pid.to_string() {
        return None;
    }
    field("syscall=")?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_audit_record() {
        let line = "5,3354,2549867420,-;audit: type=1326 audit(1796016909.019:3354): auid=4294967295 uid=0 gid=0 ses=4294967295 pid=2683 comm=\"jqjaild\" exe=\"/x/jqjaild\" sig=31 arch=c000003e syscall=257 compat=0 ip=0x7f0e9bdc3f60 code=0x80000000";
        assert_eq!(super::parse(line, 2683), Some(257));
        assert_eq!(super::parse(line, 2684), None);
        assert_eq!(
            super::parse("6,1,1,-;something else pid=2683 syscall=1", 2683),
            None
        );
    }
}
