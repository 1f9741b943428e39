//! Links the `jqjail` command line static (a static PIE) where the builder has glibc's static
//! libraries, and leaves every other program of this package (`jqjaild`, `jqjail-mcp`, the
//! tests) linked as rustc links them.
//!
//! Why: loading `libc.so.6` is most of what separates a dynamic program's start from a static
//! one's (`/bin/true` 0.46 ms against 0.26 ms for a static C program that returns 0,
//! `hyperfine -N` on this project's 2-core VM), and the CLI is started for every filter an
//! agent runs. BENCHMARKS.md, "A static CLI", has the measurements.
//!
//! How, since stable cargo cannot set `-C target-feature=+crt-static` for one binary (the
//! target-wide flag also applies to proc macros, which cannot be static, unless every build
//! names `--target`): rustc links the CLI as a PIE and asks for std's libraries as shared
//! ones (`-Bdynamic -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`). A linker looks for a
//! library directory by directory, and takes `libX.a` from the first directory that has no
//! `libX.so`. So the CLI's link alone gets a first search directory holding links to glibc's
//! static archives under those names, and `-static-pie`. `libgcc_s` has no archive: an empty
//! one stands in for it, and the unwinder comes from `libgcc_eh.a` instead, as in a
//! `crt-static` build, named after rustc's libraries with the rest of that build's tail.
//! Were a library ever asked for that the directory lacks, the linker would take it shared,
//! and the program would crash as it started: every test of the CLI would fail,
//! and `tests/it/cli.rs` checks that it has no program interpreter.
//!
//! Where the static archives are missing (no `libc.a` beside the C compiler, as on a system
//! without glibc's static package), or when cross-compiling, the CLI is linked as before
//! and the build says so once, as a warning.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// The libraries std asks rustc to link on a glibc target, each taken from its static
/// archive. `gcc_s` is not among them: it has no archive (see the module's comment).
const STD_LIBRARIES: [&str; 6] = ["c", "m", "rt", "pthread", "dl", "util"];

/// What an archive with no members is: the magic line alone.
const EMPTY_ARCHIVE: &[u8] = b"!<arch>\n";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(jqjail_static_cli)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    match static_cli() {
        Ok(search_dir) => {
            println!("cargo::rustc-cfg=jqjail_static_cli");
            for arg in [
                "-static-pie".to_owned(),
                format!("-L{}", search_dir.display()),
                // After the libraries rustc names, for linkers that resolve in order; lld
                // does not need it.
                "-lgcc_eh".to_owned(),
                "-lgcc".to_owned(),
                "-lc".to_owned(),
            ] {
                println!("cargo::rustc-link-arg-bin=jqjail={arg}");
            }
        }
        Err(Skip::Quietly) => {}
        Err(Skip::Because(reason)) => {
            println!("cargo::warning=the jqjail command line is linked dynamically: {reason}");
        }
    }
}

/// Why the CLI is not linked static.
enum Skip {
    /// Not a glibc target: static linking is not this script's business there.
    Quietly,
    /// A glibc target that lacks what a static link needs.
    Because(String),
}

/// Prepares the static link: finds glibc's static archives where the C compiler that links
/// for rustc finds them, and links them into a fresh search directory with the stand-in for
/// `libgcc_s.a`. Returns that directory.
fn static_cli() -> Result<PathBuf, Skip> {
    let cfg = |name: &str| env::var(format!("CARGO_CFG_TARGET_{name}")).unwrap_or_default();
    if cfg("OS") != "linux" || cfg("ENV") != "gnu" {
        return Err(Skip::Quietly);
    }
    if env::var("TARGET").ok() != env::var("HOST").ok() {
        return Err(Skip::Because(
            "cross-compiling, and the host's C compiler cannot tell where the target's static \
             glibc is"
                .to_owned(),
        ));
    }
    // rustc links through `cc` unless a linker is configured, which cargo passes on here.
    let linker = env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_owned());
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let search_dir = out_dir.join("static-cli");
    let cannot_write = |error: std::io::Error| {
        Skip::Because(format!("cannot write {}: {error}", search_dir.display()))
    };
    // Fresh each time, so that nothing from an earlier build (another compiler's archives)
    // is left to be found.
    match fs::remove_dir_all(&search_dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(cannot_write(error));
        }
        _ => {}
    }
    fs::create_dir_all(&search_dir).map_err(cannot_write)?;
    for name in STD_LIBRARIES.iter().chain(&["gcc_eh", "gcc"]) {
        let archive = format!("lib{name}.a");
        let Some(found) = find(&linker, &archive) else {
            return Err(Skip::Because(format!(
                "`{linker} -print-file-name={archive}` finds no {archive} (glibc's static \
                 libraries: libc6-dev on Debian, glibc-static on Fedora)"
            )));
        };
        if STD_LIBRARIES.contains(name) {
            std::os::unix::fs::symlink(&found, search_dir.join(&archive)).map_err(cannot_write)?;
        }
    }
    fs::write(search_dir.join("libgcc_s.a"), EMPTY_ARCHIVE).map_err(cannot_write)?;
    Ok(search_dir)
}

/// Where `linker` finds `archive` on its library path, if it does. A compiler that does not
/// find a file prints its name back unchanged, not a path to it.
fn find(linker: &str, archive: &str) -> Option<PathBuf> {
    let output = Command::new(linker)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .ok()?;
    let printed = String::from_utf8(output.stdout).ok()?;
    let path = PathBuf::from(printed.trim());
    (output.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
