//! Links the `jqjail` command line static (a static PIE) where the builder has glibc's static
//! libraries. Every other program of this package (`jqjaild`, `jqjail-mcp`, the integration
//! tests) is linked as rustc links it; so is the CLI's own unit-test harness, except that it
//! is static too (cargo gives a binary's link arguments to its test build as well).
//!
//! Why: loading `libc.so.6` is most of what separates a dynamic program's start from a static
//! one's, and the CLI is started for every filter an agent runs. BENCHMARKS.md, "A static
//! CLI", has the measurements (`jqjail --version` 0.30–0.33 ms static against 0.49–0.50 ms
//! dynamic, `/bin/true` 0.34–0.38 ms, under `hyperfine -N`).
//!
//! How, since stable cargo cannot set `-C target-feature=+crt-static` for one binary (the
//! target-wide flag also applies to proc macros, which cannot be static, unless every build
//! names `--target`): rustc links the CLI as a PIE and asks for std's libraries as shared
//! ones (`-Bdynamic -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`). A linker looks for each
//! library directory by directory, and takes it from the first directory that holds either
//! `libX.so` or `libX.a`. So the CLI's link alone gets a search directory holding links to
//! glibc's static archives under those names, searched before the C compiler's own
//! directories, and `-static-pie`. (No earlier `-L` of rustc's, the toolchain's or a
//! dependency's, may hold one of those libraries as a `.so`; none does.) `libgcc_s` has no
//! archive: an empty one stands in for it, and the unwinder comes from `libgcc_eh.a` instead,
//! as in a `crt-static` build, named after rustc's libraries with the rest of that build's
//! tail.
//!
//! Before it commits to that, it has rustc link a small Rust program the same way (the same
//! rustc, target, RUSTFLAGS and linker, and these link arguments), one that panics and
//! catches the panic, and reads the result (`src/static_elf.rs`): no program interpreter, no
//! needed library, and it runs and unwinds. Where that fails, where the static archives are
//! missing (as on a system without glibc's static package), or when cross-compiling, the CLI
//! is linked dynamically as rustc links it, and the build says why in a warning. The test
//! `cli::the_cli_is_linked_static_where_the_builder_has_glibcs_static_archives` reads the CLI
//! the same way.

#[path = "src/static_elf.rs"]
mod static_elf;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries std asks rustc to link on a glibc target, each taken from its static
/// archive. `gcc_s` is not among them: it has no archive (see the module's comment).
const STD_LIBRARIES: [&str; 6] = ["c", "m", "rt", "pthread", "dl", "util"];

/// What an archive with no members is: the magic line alone.
const EMPTY_ARCHIVE: &[u8] = b"!<arch>\n";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(jqjail_static_cli)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/static_elf.rs");
    println!("cargo::rerun-if-env-changed=RUSTFLAGS");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    // The linker cargo hands rustc, when it comes from the environment. (One configured in
    // a cargo config file is not tracked: change it with `cargo clean -p jqjail`.)
    let target = env::var("TARGET").unwrap_or_default();
    println!(
        "cargo::rerun-if-env-changed=CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    match plan() {
        Plan::Static(search_dir) => {
            println!("cargo::rustc-cfg=jqjail_static_cli");
            for arg in link_args(&search_dir) {
                println!("cargo::rustc-link-arg-bin=jqjail={arg}");
            }
        }
        Plan::StaticByRustc => println!("cargo::rustc-cfg=jqjail_static_cli"),
        Plan::Dynamic(None) => {}
        Plan::Dynamic(Some(reason)) => {
            println!("cargo::warning=the jqjail command line is linked dynamically: {reason}");
        }
    }
}

/// How the CLI is linked.
enum Plan {
    /// Static, with this directory searched first for std's libraries.
    Static(PathBuf),
    /// Static already: RUSTFLAGS hold `+crt-static` for the whole build.
    StaticByRustc,
    /// As rustc links it, with the reason when this target could have had a static CLI.
    Dynamic(Option<String>),
}

fn plan() -> Plan {
    let cfg = |name: &str| env::var(format!("CARGO_CFG_TARGET_{name}")).unwrap_or_default();
    if cfg("OS") != "linux" || cfg("ENV") != "gnu" {
        return Plan::Dynamic(None);
    }
    if cfg("FEATURE")
        .split(',')
        .any(|feature| feature == "crt-static")
    {
        return Plan::StaticByRustc;
    }
    if cfg("POINTER_WIDTH") != "64" || cfg("ENDIAN") != "little" {
        return Plan::Dynamic(Some(
            "only 64-bit little-endian targets are linked static".to_owned(),
        ));
    }
    match prepare() {
        Ok(search_dir) => Plan::Static(search_dir),
        Err(reason) => Plan::Dynamic(Some(reason)),
    }
}

/// Finds glibc's static archives where the C compiler that links for rustc finds them, links
/// them into a fresh search directory with the stand-in for `libgcc_s.a`, and tries a static
/// link of a Rust program through it. Returns the directory, or why the CLI stays dynamic.
fn prepare() -> Result<PathBuf, String> {
    if env::var("TARGET").ok() != env::var("HOST").ok() {
        return Err("cross-compiling, and a static link is tried by running its result".into());
    }
    let rustflags: Vec<String> = env::var("CARGO_ENCODED_RUSTFLAGS")
        .unwrap_or_default()
        .split('\x1f')
        .filter(|flag| !flag.is_empty())
        .map(str::to_owned)
        .collect();
    let linker = linker(&rustflags);
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("cargo sets no OUT_DIR")?);
    let search_dir = out_dir.join("static-cli");
    let cannot = |what: &str, path: &Path, error: std::io::Error| {
        format!("cannot {what} {}: {error}", path.display())
    };
    // Fresh each time, so that nothing from an earlier build (another compiler's archives)
    // is left to be found.
    match fs::remove_dir_all(&search_dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(cannot("remove", &search_dir, error));
        }
        _ => {}
    }
    fs::create_dir_all(&search_dir).map_err(|e| cannot("create", &search_dir, e))?;
    for name in STD_LIBRARIES.iter().chain(&["gcc_eh", "gcc"]) {
        let archive = format!("lib{name}.a");
        let found = find(&linker, &archive).ok_or_else(|| {
            format!(
                "`{linker} -print-file-name={archive}` finds no {archive} (glibc's static \
                 libraries: libc6-dev on Debian, glibc-static on Fedora; after installing \
                 them, `cargo clean -p jqjail` links it static)"
            )
        })?;
        // A new compiler or C library must make this script run again, or the links would
        // dangle and the linker would take the shared library after all.
        println!("cargo::rerun-if-changed={}", found.display());
        if STD_LIBRARIES.contains(name) {
            let link = search_dir.join(&archive);
            std::os::unix::fs::symlink(&found, &link).map_err(|e| cannot("link", &link, e))?;
        }
    }
    let stand_in = search_dir.join("libgcc_s.a");
    fs::write(&stand_in, EMPTY_ARCHIVE).map_err(|e| cannot("write", &stand_in, e))?;
    try_static_link(&rustflags, &search_dir, &out_dir)?;
    Ok(search_dir)
}

/// Where `linker` finds `archive` on its library path, with every link in the path resolved,
/// if it does. A compiler that does not find a file prints its name back unchanged, not a
/// path to it.
fn find(linker: &str, archive: &str) -> Option<PathBuf> {
    let output = Command::new(linker)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .ok()?;
    let printed = String::from_utf8(output.stdout).ok()?;
    let path = Path::new(printed.trim());
    if !output.status.success() || !path.is_absolute() {
        return None;
    }
    fs::canonicalize(path).ok().filter(|path| path.is_file())
}

/// The link arguments that make the CLI static, after rustc's own.
fn link_args(search_dir: &Path) -> Vec<String> {
    let mut args = vec![
        "-static-pie".to_owned(),
        format!("-L{}", search_dir.display()),
    ];
    // What a `crt-static` build links after std's libraries: the unwinder in place of
    // libgcc_s, and libc again for linkers that resolve in one pass (lld does not need it).
    args.extend(["-lgcc_eh", "-lgcc", "-lc"].map(str::to_owned));
    args
}

/// The C compiler rustc links through: the one cargo configured, else one RUSTFLAGS name,
/// else `cc`.
fn linker(rustflags: &[String]) -> String {
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        return linker;
    }
    // The last one counts, as in rustc.
    let mut named = None;
    let mut flags = rustflags.iter();
    while let Some(flag) = flags.next() {
        let value = match flag.strip_prefix("-C") {
            Some("") => flags.next().map(String::as_str),
            other => other,
        };
        if let Some(linker) = value.and_then(|value| value.strip_prefix("linker=")) {
            named = Some(linker.to_owned());
        }
    }
    named.unwrap_or_else(|| "cc".to_owned())
}

/// A program that unwinds a panic and catches it, as the CLI's `main` may: it exits 0 only
/// if the unwinder linked in works.
const TRIAL_PROGRAM: &str = r#"fn main() {
    std::panic::set_hook(Box::new(|_| {}));
    let caught = std::panic::catch_unwind(|| {
        if std::env::args().count() < 1000 {
            panic!("unwound");
        }
    });
    std::process::exit(if caught.is_err() { 0 } else { 1 });
}
"#;

/// Has rustc link [`TRIAL_PROGRAM`] as cargo has it link the CLI (the same rustc, target,
/// RUSTFLAGS and linker, then [`link_args`]), then reads and runs the result.
fn try_static_link(rustflags: &[String], search_dir: &Path, out_dir: &Path) -> Result<(), String> {
    let source = out_dir.join("static-cli-trial.rs");
    let program = out_dir.join("static-cli-trial");
    fs::write(&source, TRIAL_PROGRAM)
        .map_err(|e| format!("cannot write {}: {e}", source.display()))?;
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").unwrap_or_default();
    let mut command = Command::new(&rustc);
    command
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "bin",
            "--target",
            &target,
        ])
        .args(rustflags)
        .arg("-o")
        .arg(&program)
        .arg(&source);
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        command.arg("-C").arg(format!("linker={linker}"));
    }
    for arg in link_args(search_dir) {
        command.arg("-C").arg(format!("link-arg={arg}"));
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.to_string_lossy()))?;
    if !output.status.success() {
        return Err(format!(
            "a static link of a Rust program failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let elf = fs::read(&program).map_err(|e| format!("cannot read {}: {e}", program.display()))?;
    let parts = static_elf::dynamic_parts(&elf)?;
    if !parts.is_empty() {
        return Err(format!(
            "a Rust program linked this way still has {}",
            parts.join(" and ")
        ));
    }
    let status = Command::new(&program)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if !status.success() {
        return Err(format!(
            "a Rust program linked this way, which unwinds a panic, ended with {status}"
        ));
    }
    Ok(())
}
