//! The benchmark's smoke mode runs in `cargo test`, so the benchmark cannot rot: it starts a
//! real daemon, measures a few iterations of every part, and writes its JSON.

// The workspace's one loud skip: stderr, `$JQJAIL_SKIP_LOG`, a failure under
// `JQJAIL_TEST_STRICT=1`. `skip_unreachable` is the end-to-end tests' alone.
#[path = "../../tests/it/skip.rs"]
#[allow(dead_code, unreachable_pub)]
mod skip;
use skip::skip;

#[test]
fn smoke_run_completes_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_jqjail-bench"))
        .arg("--smoke")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("### Latency per request"), "{stdout}");
    assert!(stdout.contains("### Targets"), "{stdout}");
    let results: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let cells = results["cells"].as_array().unwrap();
    // The benchmark times the `jqjail` built beside it; `cargo test --workspace` builds it, a
    // test of this package alone may not.
    let cli_built = std::path::Path::new(env!("CARGO_BIN_EXE_jqjail-bench"))
        .with_file_name("jqjail")
        .is_file();
    if !cli_built {
        skip("the jqjail CLI is not built beside the benchmark, so its column is not checked");
    }
    assert_eq!(cells.len(), 12);
    for cell in cells {
        // Every cell got an answer from the daemon, the same kind the in-process floor gets.
        assert!(
            cell["jqjail"]["median_ms"].as_f64().unwrap() > 0.0,
            "{cell}"
        );
        assert!(
            cell["outcome"].as_str().unwrap().ends_with("output bytes"),
            "{cell}"
        );
        // jqjail's own CLI answered every run (a failed run is marked `failed`, not timed).
        if cli_built {
            assert!(
                cell["clis"]["jqjail CLI"]["median_ms"].as_f64().is_some(),
                "{cell}"
            );
        }
    }
    assert_eq!(results["memory_limit"][0]["code"], "MEMORY_LIMIT");
    // The model reader (issue 37): on JSON pages, every answer is right, each page read alone
    // from the path it names (a check of the daemon's page labels against a walk of the whole
    // document); on byte pages, most cannot be given.
    assert!(stdout.contains("### What a reader knows"), "{stdout}");
    let rows = results["reader"].as_array().unwrap();
    assert_eq!(rows.len(), 12, "{rows:?}");
    for row in rows {
        let wrong = |q: &str| row[q]["wrong"].as_u64().unwrap();
        match row["shown"].as_str().unwrap() {
            "byte pages" => assert!(wrong("length") > 0, "{row}"),
            shown => {
                assert_eq!(
                    (wrong("owner"), wrong("length"), wrong("value")),
                    (0, 0, 0),
                    "{row}"
                );
                // Head and tail: the main array's length is known from the first answer.
                if shown.starts_with("head and tail") {
                    assert_eq!(row["length"]["pages"], row["length"]["asked"], "{row}");
                }
            }
        }
    }
}
