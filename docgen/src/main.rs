//! `jqjail-docgen [DIR]`: writes jqjail's man pages and shell completions, generated from the
//! clap definitions of `jqjail`, `jqjail-mcp` and `jqjaild` and from the shipped configuration
//! file, into DIR (default `packaging/`, where the Debian package and the install by hand take
//! them from). The test in `tests/` fails when the files there are not what this writes.

use std::path::{Path, PathBuf};

mod pages;

fn main() -> std::process::ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("packaging"), PathBuf::from);
    match write_all(&dir) {
        Ok(n) => {
            println!("wrote {n} files under {}", dir.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jqjail-docgen: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn write_all(dir: &Path) -> std::io::Result<usize> {
    let files = pages::all(&std::fs::read_to_string(pages::config_path())?)?;
    for (rel, bytes) in &files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("a file under the directory"))?;
        std::fs::write(path, bytes)?;
    }
    Ok(files.len())
}

#[cfg(test)]
mod tests {
    /// The committed man pages and completions are what the clap definitions give now: a
    /// changed flag fails here until `cargo run -p jqjail-docgen` writes them again.
    #[test]
    fn the_committed_pages_and_completions_are_current() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging");
        let config = std::fs::read_to_string(super::pages::config_path()).unwrap();
        let files = super::pages::all(&config).unwrap();
        assert!(files.len() >= 13, "{}", files.len());
        // No two generated files share a path (one would overwrite the other).
        let mut paths: Vec<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
        paths.sort_unstable();
        let before = paths.len();
        paths.dedup();
        assert_eq!(paths.len(), before, "two generated files share a path");
        for (rel, bytes) in files {
            let committed = std::fs::read(root.join(&rel)).unwrap_or_default();
            if committed != bytes {
                // What it should be, beside the target directory's other files, to compare.
                let fresh = std::env::temp_dir().join("jqjail-docgen-fresh").join(&rel);
                let _ = std::fs::create_dir_all(fresh.parent().unwrap());
                let _ = std::fs::write(&fresh, &bytes);
            }
            assert!(
                committed == bytes,
                "packaging/{rel} is not what the clap definitions give; regenerate: cargo run -p jqjail-docgen"
            );
        }
    }
}
