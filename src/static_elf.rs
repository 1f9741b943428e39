//! What keeps an ELF executable from being static: a program interpreter, or a shared
//! library it needs. Read by `build.rs` (of the program it links to try a static link) and
//! by the tests (of the `jqjail` CLI), each through `#[path]`; nothing else uses it.
//!
//! Only 64-bit little-endian files are read, the only kind `build.rs` links static. Every
//! offset comes from the file, so each is bounds-checked: a short or odd file is an error,
//! not a panic.

/// `p_type` of the segment that names the program interpreter.
const PT_INTERP: u64 = 3;
/// `p_type` of the dynamic section's segment.
const PT_DYNAMIC: u64 = 2;
/// `d_tag` of a needed shared library.
const DT_NEEDED: u64 = 1;
/// `d_tag` of the dynamic section's end.
const DT_NULL: u64 = 0;
/// The size of an ELF64 program header.
const PROGRAM_HEADER_BYTES: usize = 56;

/// The parts of `elf` that make it load shared code, named for a message (empty for a static
/// executable), or why it cannot be read.
pub(crate) fn dynamic_parts(elf: &[u8]) -> Result<Vec<String>, String> {
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not a 64-bit little-endian ELF file".to_owned());
    }
    let short = || "the file ends inside its own headers".to_owned();
    let int = |at: usize, len: usize| -> Result<u64, String> {
        let bytes = elf
            .get(at..at.checked_add(len).ok_or_else(short)?)
            .ok_or_else(short)?;
        let mut word = [0u8; 8];
        word[..len].copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    };
    let offset = |at: usize, len: usize| -> Result<usize, String> {
        usize::try_from(int(at, len)?).map_err(|_| short())
    };
    // The ELF64 header: e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38.
    let (table, entry, count) = (offset(0x20, 8)?, offset(0x36, 2)?, offset(0x38, 2)?);
    if entry != PROGRAM_HEADER_BYTES {
        return Err(format!(
            "program headers of {entry} bytes, not {PROGRAM_HEADER_BYTES}"
        ));
    }
    let mut parts = Vec::new();
    for index in 0..count {
        // A program header: p_type at 0, p_offset at 8, p_filesz at 0x20. `index * entry`
        // is under 2^22 and `header` is within the file once its type is read.
        let header = table.checked_add(index * entry).ok_or_else(short)?;
        match int(header, 4)? {
            PT_INTERP => parts.push("a program interpreter".to_owned()),
            PT_DYNAMIC => {
                let (start, len) = (offset(header + 8, 8)?, offset(header + 0x20, 8)?);
                // Entries of 16 bytes: d_tag, then d_val.
                let mut needed = 0;
                for at in (start..start.saturating_add(len)).step_by(16) {
                    match int(at, 8)? {
                        DT_NULL => break,
                        DT_NEEDED => needed += 1,
                        _ => {}
                    }
                }
                match needed {
                    0 => {}
                    1 => parts.push("a needed shared library".to_owned()),
                    n => parts.push(format!("{n} needed shared libraries")),
                }
            }
            _ => {}
        }
    }
    Ok(parts)
}
