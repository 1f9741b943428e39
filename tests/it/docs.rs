//! The documents' numbers and lists, read from the code (issue 39): a README or ARCHITECTURE
//! sentence that goes stale fails here, not in a user's hands.

use crate::util::repo_file;
use jqjail_client::ErrorCode;
use jqjail_client::cli::Exit;

fn read(doc: &str) -> String {
    std::fs::read_to_string(repo_file(doc)).unwrap()
}

/// The cells of the README table row whose first cell is `first`.
fn row<'a>(text: &'a str, first: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(str::trim)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells[0] == first)
        .unwrap_or_else(|| panic!("no table row starting {first:?}"))
}

/// The backquoted words of `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The repository's tracked files matching `patterns` (`git ls-files`), or `None` after a loud
/// skip where git cannot list them (not installed, or a copy of the sources without `.git`).
fn tracked(patterns: &[&str]) -> Option<Vec<String>> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo_file(""))
        .arg("ls-files")
        .args(patterns)
        .output();
    match out {
        Ok(out) if out.status.success() => Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(String::from)
                .collect(),
        ),
        Ok(out) => {
            crate::util::skip(&format!(
                "git cannot list this checkout's files (not a git repository?): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            None
        }
        Err(e) => {
            crate::util::skip(&format!(
                "git could not be run, to list the repository's files: {e}"
            ));
            None
        }
    }
}

#[test]
fn the_exit_status_table_is_the_cli_s() {
    let readme = read("README.md");
    for code in ErrorCode::ALL {
        let status = u8::from(Exit::of(code)).to_string();
        let cells = row(&readme, &status);
        let name = code.to_string();
        if status == "9" {
            assert_eq!(cells[2], "every other code", "exit status 9");
            continue;
        }
        assert!(
            quoted(cells[2]).contains(&name.as_str()),
            "{name} exits {status}, which the README's table does not say: {cells:?}"
        );
    }
    // And no code is listed under a status it does not exit with.
    for status in ["3", "4", "5", "6", "7", "8", "10"] {
        for name in quoted(row(&readme, status)[2]) {
            let Some(code) = ErrorCode::ALL.into_iter().find(|c| c.to_string() == name) else {
                assert_eq!(name, "UNAVAILABLE", "{name} is no error code");
                continue;
            };
            assert_eq!(u8::from(Exit::of(code)).to_string(), status, "{name}");
        }
    }
}

#[test]
fn the_tool_list_is_the_cli_s() {
    let readme = read("README.md");
    let at = readme
        .find("`jqjail tools [openai|anthropic]` prints the tool definitions for")
        .expect("the README's sentence on `jqjail tools`");
    let sentence = &readme[at..at + readme[at..].find(" as JSON Schema").unwrap()];
    let named: Vec<&str> = quoted(sentence).into_iter().skip(1).collect();
    let tools: Vec<&str> = jqjail_client::tools::list().iter().map(|t| t.0).collect();
    assert_eq!(
        named, tools,
        "README names other tools than `jqjail tools` prints"
    );
}

/// `jqjail mcp --help` names every tool it serves.
#[test]
fn the_mcp_help_names_every_tool() {
    let about = jqjail_client::mcp::command()
        .get_about()
        .map(ToString::to_string)
        .unwrap_or_default();
    for tool in jqjail_client::tools::Tool::ALL {
        assert!(
            about.contains(tool.name()),
            "{about:?} does not name {}",
            tool.name()
        );
    }
}

#[test]
fn the_binaries_named_are_the_package_s() {
    let manifest = read("Cargo.toml");
    let shipped: Vec<&str> = manifest
        .lines()
        .filter(|l| l.contains("\"usr/bin/\""))
        .filter_map(|l| l.split("\"target/release/").nth(1)?.split('"').next())
        .collect();
    let readme = read("README.md");
    let at = readme
        .find("its three binaries (")
        .expect("the package's binaries");
    let list = &readme[at..at + readme[at..].find(')').unwrap()];
    assert_eq!(shipped.len(), 3, "the README says three: {shipped:?}");
    let (mut named, mut shipped) = (quoted(list), shipped);
    named.sort_unstable();
    shipped.sort_unstable();
    assert_eq!(named, shipped);
}

#[test]
fn the_limits_table_is_the_defaults() {
    let cfg = jqjail_supervisor::Config::default();
    let readme = read("README.md");
    let number = |cell: &str| -> u64 {
        let digits: String = cell
            .split_whitespace()
            .next()
            .unwrap()
            .chars()
            .filter(|c| *c != ',')
            .collect();
        let n: u64 = digits.parse().unwrap_or_else(|_| panic!("{cell}"));
        match cell
            .split_whitespace()
            .nth(1)
            .map(|u| u.trim_matches(|c: char| !c.is_alphanumeric()))
        {
            Some("MiB") => n << 20,
            Some("KiB") => n << 10,
            Some("s") => n * 1000,
            _ => n,
        }
    };
    let l = &cfg.limits;
    for (limit, value) in [
        ("input size", l.max_input_bytes),
        ("filter length", l.max_filter_bytes),
        ("input nesting depth", u64::from(l.max_depth)),
        ("output size", l.max_output_bytes),
        ("wall time", l.timeout_ms),
        ("heap", l.max_heap_bytes),
        ("stack", cfg.stack_bytes),
    ] {
        assert_eq!(
            number(row(&readme, limit)[1]),
            value,
            "the README's {limit}"
        );
    }
}

#[test]
fn architecture_s_decoding_bounds_are_the_code_s() {
    let arch = read("ARCHITECTURE.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let claim = format!(
        "at most {} times the body",
        jqjail_protocol::codec::CLAIM_FACTOR
    );
    assert!(arch.contains(&claim), "ARCHITECTURE does not say {claim:?}");
    let meta = format!(
        "keeps at most {} pairs as it decodes",
        jqjail_protocol::hide::MAX_META_PAIRS + 1
    );
    assert!(arch.contains(&meta), "ARCHITECTURE does not say {meta:?}");
}

/// PROTOCOL's error-code table is the enum's: every code, at its bincode index, in order.
#[test]
fn protocol_s_error_codes_are_the_code_s() {
    let protocol = read("PROTOCOL.md");
    let table: Vec<(String, String)> = protocol
        .split("## Error codes")
        .nth(1)
        .expect("PROTOCOL has an error-code section")
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0].to_string(), cells[1].trim_matches('`').to_string())
        })
        .take_while(|(index, _)| index.parse::<usize>().is_ok())
        .collect();
    let code: Vec<(String, String)> = ErrorCode::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| (i.to_string(), c.as_str().to_string()))
        .collect();
    assert_eq!(table, code, "PROTOCOL's error codes against ErrorCode::ALL");
}

/// The worker's system-call count, where ARCHITECTURE states it, is the allowlist's.
#[test]
fn the_seccomp_count_is_the_allowlist_s() {
    let arch = read("ARCHITECTURE.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let n = jqjail_worker::seccomp::allowlist(1).len();
    for claim in [
        format!("system-call allowlist ({n} calls"),
        format!("only the {n} calls of `worker/src/seccomp.rs`"),
    ] {
        assert!(arch.contains(&claim), "ARCHITECTURE does not say {claim:?}");
    }
}

/// No document, comment or script points at a file outside the repository: a user's clone has
/// nothing beside it. (The words are built here so this file does not match itself.)
#[test]
fn nothing_points_outside_the_repository() {
    let Some(files) = tracked(&[]) else {
        return;
    };
    let outside = [
        ["../", "shared"].concat(),
        ["SPEC", " §"].concat(),
        ["STYLE", " §"].concat(),
        ["research", "/"].concat(),
    ];
    let mut found = Vec::new();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(repo_file(path)) else {
            continue; // binary
        };
        for (n, line) in text.lines().enumerate() {
            if outside.iter().any(|o| line.contains(o.as_str())) {
                found.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references outside the repository:\n{}",
        found.join("\n")
    );
}

/// No file of the request path (`supervisor/src/server/`) imports a file that imports it back,
/// through any chain: its modules' `super::` paths form no cycle.
#[test]
fn the_request_path_s_imports_go_one_way() {
    use std::collections::{BTreeMap, BTreeSet};
    let root = repo_file("supervisor/src/server");
    // Each file as its module path under `server` ("" is server/mod.rs).
    let mut files = BTreeMap::new();
    for dir in ["", "handlers"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".rs") else {
                continue;
            };
            let module: Vec<String> = [dir, stem]
                .into_iter()
                .filter(|p| !p.is_empty() && *p != "mod")
                .map(String::from)
                .collect();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            // An inline test module's `super` is the file itself: left out.
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            files.insert(module, code.to_string());
        }
    }
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (module, text) in &files {
        let mut add = |target: Vec<String>| {
            if files.contains_key(&target) && &target != module {
                edges.entry(module.clone()).or_default().insert(target);
            }
        };
        // `super::…`: each `super` climbs one level from the module's parent.
        for (at, _) in text.match_indices("super::") {
            if text[..at].ends_with("super::") {
                continue; // counted from the first `super`
            }
            let mut base = module.clone();
            base.pop();
            let mut rest = &text[at + "super::".len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let name = ident(rest);
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                base.push(name);
            }
            add(base);
        }
        // `use child::…`: a module's own children.
        for line in text.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("use ") {
                let mut child = module.clone();
                child.push(ident(rest));
                add(child);
            }
        }
    }
    // Depth-first: a path back to a module on the stack is a cycle.
    fn visit(
        m: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        stack: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) {
        if done.contains(m) {
            return;
        }
        assert!(!stack.contains(m), "an import cycle: {stack:?} -> {m:?}");
        stack.push(m.clone());
        for next in edges.get(m).into_iter().flatten() {
            visit(next, edges, stack, done);
        }
        stack.pop();
        done.insert(m.clone());
    }
    let mut done = BTreeSet::new();
    for m in files.keys() {
        visit(m, &edges, &mut Vec::new(), &mut done);
    }
    assert!(edges.len() >= 8, "the imports were not read: {edges:?}");
}

/// Every `file.rs::name` the documents cite names something in a file of that name (issue 39:
/// ARCHITECTURE cited `cli.rs::split_values` after it had moved).
#[test]
fn the_code_the_documents_cite_exists() {
    let Some(files) = tracked(&["*.rs"]) else {
        return;
    };
    assert!(files.len() > 50, "git listed {} Rust files", files.len());
    let mut stale = Vec::new();
    for doc in [
        "README.md",
        "ARCHITECTURE.md",
        "PROTOCOL.md",
        "RELIABILITY.md",
        "BENCHMARKS.md",
    ] {
        for cited in quoted(&read(doc)) {
            let Some((path, name)) = cited.split_once(".rs::") else {
                continue;
            };
            let path = format!("{path}.rs");
            // `max_*_frame_bytes` stands for several: its part before the `*` is a prefix.
            let glob = name.contains('*');
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let found = files
                .iter()
                .filter(|f| {
                    f.ends_with(&path)
                        && (f.len() == path.len() || f.ends_with(&format!("/{path}")))
                })
                .any(|f| {
                    let text = std::fs::read_to_string(repo_file(f)).unwrap_or_default();
                    // Defined there, not only mentioned (a `use` of it elsewhere would be).
                    text.match_indices(name.as_str()).any(|(at, _)| {
                        let before = text[..at].trim_end_matches(|c: char| c.is_ascii_whitespace());
                        let defines = [
                            "fn", "const", "static", "struct", "enum", "type", "trait", "mod",
                        ]
                        .iter()
                        .any(|k| {
                            before.ends_with(k)
                                && !before[..before.len() - k.len()]
                                    .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                        });
                        let after = text[at + name.len()..].chars().next();
                        defines
                            && (glob
                                || !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_'))
                    })
                });
            if !found {
                stale.push(format!("{doc}: `{cited}`"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "cited code that is not there:\n{}",
        stale.join("\n")
    );
}

/// The false claims issue 39's review found, as they were worded, stay gone from the documents
/// and the code's comments (the numbers among them are checked against the code above).
#[test]
fn the_false_claims_found_stay_gone() {
    let Some(files) = tracked(&["*.md", "*.rs"]) else {
        return;
    };
    // Built from parts, so that this file does not match itself.
    let claims = [
        ["Not yet: a container", " image"].concat(),
        ["both binaries in", " /usr/bin"].concat(),
        ["past two at", " once"].concat(),
        ["switch to", " nobody"].concat(),
        ["mcp_", "executable"].concat(),
        ["server::", "check_head"].concat(),
        ["store, when the daemon", " has one"].concat(),
        ["refused at its 65th", " pair"].concat(),
        ["holds an evaluation", " slot"].concat(),
    ];
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(repo_file(path)).unwrap_or_default();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for claim in &claims {
            if text.contains(claim.as_str()) {
                found.push(format!("{path}: {claim:?}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "false claims came back:\n{}",
        found.join("\n")
    );
}
