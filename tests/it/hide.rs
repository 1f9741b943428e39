//! The hide store through the real daemon: round trips, pages, search, filtering by ID,
//! oversized outputs kept as hides, the HideBuffer, retention and the `jqjail hide` CLI.

use crate::util::{CLI, Daemon};
use jqjail_client::{
    Answer, ClientError, ErrorCode, HideBuffer, HidePageRequest, HideSearchRequest, OnOversize,
    PageAt, Pages, RunOptions, Source,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

fn code(e: ClientError) -> ErrorCode {
    e.code()
        .unwrap_or_else(|| panic!("not a server error: {e}"))
}

fn search(id: &str, query: &str, page_size: u64) -> HideSearchRequest {
    HideSearchRequest {
        id: id.into(),
        query: query.into(),
        ignore_case: false,
        page_size: Some(page_size),
        max_matches: None,
    }
}

/// An array of GitHub-issue-like objects of at most `bytes` bytes; the first has id 0.
fn issues(bytes: usize) -> String {
    let mut out = String::from("[");
    for i in 0.. {
        let item = format!(
            r#"{{"id":{i},"title":"issue number {i} — ünïcode","labels":["bug","p{}"],"body":"{}"}}"#,
            i % 4,
            "lorem ipsum ".repeat(8)
        );
        if out.len() + item.len() + 2 > bytes {
            break;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out.push(']');
    out
}

#[test]
fn put_get_round_trips_exactly_through_the_socket() {
    let d = Daemon::start();
    let mut c = d.client();
    let binary: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    let big = issues(20 << 20);
    for content in [&b""[..], &binary, big.as_bytes()] {
        let put = c
            .hide_put("k", "Test Source", content, &BTreeMap::new())
            .unwrap();
        assert!(put.created);
        assert!(put.entry.id.starts_with("testsource-"), "{}", put.entry.id);
        let got = c.hide_get(&put.entry.id).unwrap();
        assert_eq!(got.entry, put.entry);
        assert!(
            got.content.as_bytes() == content,
            "{} bytes differ",
            content.len()
        );
    }
    // The same content again: the same ID, not a second hide.
    let again = c
        .hide_put("k", "Test Source", &binary, &BTreeMap::new())
        .unwrap();
    assert!(!again.created);
    assert_eq!(c.hide_list().unwrap().len(), 3);
    let usage = c.hide_usage().unwrap();
    assert_eq!(usage.entries, 3);
    // Content, and each hide's labels: kind `k` and source `Test Source`.
    let labels = ("k".len() + "Test Source".len()) as u64;
    assert_eq!(usage.bytes, (binary.len() + big.len()) as u64 + 3 * labels);
}

#[test]
fn pages_search_and_explicit_errors() {
    let d = Daemon::start();
    let mut c = d.client();
    // 1,000 bytes; "NEEDLE" straddles the boundary between pages 2 and 3 at page size 100.
    let mut text = "é".repeat(95) + &"x".repeat(8); // 198 bytes
    text.push_str("NEEDLE");
    text.push_str(&"y".repeat(1000 - text.len()));
    let id = c
        .hide_put("k", "s", text.as_bytes(), &BTreeMap::new())
        .unwrap()
        .entry
        .id;
    let first = c.hide_cut(&id, 1, Some(100), false).unwrap();
    assert_eq!(first.content.as_bytes().len(), 100);
    assert!(first.preface.is_none());
    let mut all = Vec::new();
    for page in 1..=first.total_pages {
        let cut = c.hide_cut(&id, page, Some(100), false).unwrap();
        assert_eq!(cut.total_pages, first.total_pages);
        assert!(std::str::from_utf8(cut.content.as_bytes()).is_ok());
        all.extend_from_slice(cut.content.as_bytes());
    }
    assert_eq!(all, text.as_bytes());
    assert_eq!(first.total_pages, 10);

    let found = c.hide_search(search(&id, "NEEDLE", 100)).unwrap();
    assert_eq!(found.matches.len(), 1);
    assert_eq!(found.matches[0].offset, 198);
    assert_eq!(
        found.matches[0].page, 2,
        "a match is on the page its first byte is on"
    );
    let miss = c.hide_search(search(&id, "needle", 100)).unwrap();
    assert!(miss.matches.is_empty(), "a miss is not-found, never page 1");
    let folded = c
        .hide_search(HideSearchRequest {
            ignore_case: true,
            ..search(&id, "needle", 100)
        })
        .unwrap();
    assert_eq!(folded.matches.len(), 1);
    // A search's arguments are refused before its hide is looked up: the same answer for a
    // hide that exists and one that does not.
    for hide in [id.as_str(), "s-00000000"] {
        for bad in [search(hide, "", 100), search(hide, "x", 10)] {
            let e = c.hide_search(bad).unwrap_err();
            assert_eq!(code(e), ErrorCode::InvalidRequest, "{hide}");
        }
        let e = c
            .hide_search(HideSearchRequest {
                max_matches: Some(0),
                ..search(hide, "x", 100)
            })
            .unwrap_err();
        assert_eq!(code(e), ErrorCode::InvalidRequest, "{hide}");
    }

    let e = c.hide_cut(&id, 11, Some(100), false).unwrap_err();
    assert_eq!(code(e), ErrorCode::PageOutOfRange);
    let e = c.hide_cut(&id, 0, Some(100), false).unwrap_err();
    assert_eq!(code(e), ErrorCode::PageOutOfRange);
    let e = c.hide_cut(&id, 1, Some(10), false).unwrap_err();
    assert_eq!(code(e), ErrorCode::InvalidRequest);
    for bad in ["s-00000000", "../../etc/passwd", ""] {
        let e = c.hide_cut(bad, 1, None, false).unwrap_err();
        assert_eq!(code(e), ErrorCode::NotFound, "{bad}");
    }
    let deleted = c.hide_delete(&id).unwrap();
    assert_eq!(deleted.id, id);
    assert_eq!(code(c.hide_get(&id).unwrap_err()), ErrorCode::NotFound);
}

#[test]
fn a_filter_over_a_20_mib_hide_by_id() {
    let d = Daemon::start();
    let mut c = d.client();
    let big = issues(20 << 20);
    let id = c
        .hide_put("k", "github", big.as_bytes(), &BTreeMap::new())
        .unwrap()
        .entry
        .id;
    let opts = RunOptions::default();
    let filter = ".[0].id, (map(select(.labels[1] == \"p3\")) | length)";
    let started = Instant::now();
    let by_id = c.run_hide(filter, &id, &opts).unwrap();
    let by_id_time = started.elapsed();
    let started = Instant::now();
    let inline = c.run(filter, big.as_bytes(), &opts).unwrap();
    let inline_time = started.elapsed();
    assert_eq!(by_id.output, inline.output);
    assert!(by_id.output.starts_with("[0,"), "{}", by_id.output);
    assert_eq!(by_id.cost.input_bytes, big.len() as u64);
    eprintln!(
        "20 MiB filter: by hide ID {by_id_time:?}, inline {inline_time:?} (debug build; see the note for release numbers)"
    );
    let e = c.run_hide(".", "github-00000000", &opts).unwrap_err();
    assert_eq!(code(e), ErrorCode::NotFound);
}

#[test]
fn oversized_output_is_kept_as_a_hide_when_asked() {
    let d = Daemon::start();
    let mut c = d.client();
    let filter = "[range(40000)]";
    let expected = format!(
        "[{}]",
        (0..40000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    assert!(expected.len() > 100_000);
    let plain = c.run(filter, b"null", &RunOptions::default()).unwrap_err();
    assert_eq!(code(plain), ErrorCode::OutputTooLarge);
    let opts = RunOptions {
        on_oversize: OnOversize::Hide,
        ..Default::default()
    };
    let Answer::Hidden(hidden) = c
        .run_answer(filter, Source::Inline(b"null"), &opts)
        .unwrap()
    else {
        panic!("expected the output to be kept as a hide");
    };
    assert_eq!(hidden.entry.size, expected.len() as u64);
    assert_eq!(hidden.first.page, 1);
    assert!(
        hidden
            .first
            .preface
            .as_deref()
            .unwrap()
            .contains("Summarise")
    );
    assert!(
        expected
            .as_bytes()
            .starts_with(hidden.first.content.as_bytes())
    );
    assert_eq!(
        c.hide_get(&hidden.entry.id).unwrap().content.as_bytes(),
        expected.as_bytes()
    );
    assert_eq!(hidden.entry.meta["filter"], filter);
    // In lines mode the hide holds what the same run answers collapsed: one value as itself
    // (not an array of one), several as an array.
    let lines = RunOptions {
        outputs: jqjail_protocol::Outputs::Lines,
        ..opts
    };
    let Answer::Hidden(hidden) = c
        .run_answer(filter, Source::Inline(b"null"), &lines)
        .unwrap()
    else {
        panic!("expected the lines to be kept as a hide");
    };
    assert_eq!(
        c.hide_get(&hidden.entry.id).unwrap().content.as_bytes(),
        expected.as_bytes()
    );
    let Answer::Hidden(hidden) = c
        .run_answer(&format!("{filter}, 7"), Source::Inline(b"null"), &lines)
        .unwrap()
    else {
        panic!("expected the lines to be kept as a hide");
    };
    assert_eq!(
        c.hide_get(&hidden.entry.id).unwrap().content.as_bytes(),
        format!("[{expected},7]").as_bytes()
    );
    // A small output is an ordinary answer even when hides are allowed.
    let Answer::Output(small) = c.run_answer("1+1", Source::Inline(b"null"), &opts).unwrap() else {
        panic!("a small output is not hidden");
    };
    assert_eq!(small.output, "2");
    // Beyond the hide size (the input limit) it is still an error, naming that limit.
    let huge = c
        .run_answer("[range(3000000)]", Source::Inline(b"null"), &opts)
        .unwrap_err();
    let ClientError::Server(e) = huge else {
        panic!()
    };
    assert_eq!(e.code, ErrorCode::OutputTooLarge);
    assert_eq!(e.limit, Some(20 << 20));
}

#[test]
fn hide_buffer_pages_with_a_per_turn_cursor() {
    let d = Daemon::start();
    let mut c = d.client();
    let text: String = (0..50).map(|i| format!("row {i:02}\n")).collect(); // 350 bytes
    let mut buffer = HideBuffer::new(&mut c, 100);
    assert!(!buffer.needs_paging());
    let entry = buffer.store("search_tool", text.as_bytes()).unwrap();
    assert!(buffer.needs_paging());
    let first = buffer.first_cut().unwrap();
    assert!(first.preface.is_some());
    assert_eq!(first.total_pages, 4);
    assert_eq!(
        buffer.next(None).unwrap().page,
        2,
        "next follows the last page served"
    );
    assert_eq!(buffer.next(None).unwrap().page, 3);
    let jumped = buffer.call_tool("hide_jump", &serde_json::json!({"page": 1}));
    assert!(
        jumped.contains("[HIDE id=") && jumped.contains("row 00"),
        "{jumped}"
    );
    let next = buffer.call_tool("hide_next", &serde_json::json!({}));
    assert!(next.contains("page=2/4"), "{next}");
    let found = buffer.call_tool("hide_search", &serde_json::json!({"query": "row 42"}));
    assert!(found.contains("on page 3"), "{found}"); // offset 294
    let missing = buffer.call_tool("hide_search", &serde_json::json!({"query": "row 99"}));
    assert!(missing.starts_with("Not found"), "{missing}");
    let past = buffer.call_tool("hide_jump", &serde_json::json!({"page": 9}));
    assert!(past.starts_with("error: PAGE_OUT_OF_RANGE"), "{past}");
    assert_eq!(
        buffer
            .search(&entry.id, "ROW 07", true)
            .unwrap()
            .unwrap()
            .page,
        1
    );
    drop(buffer);
    // Loading the persisted hide into a fresh buffer reproduces it.
    let mut loaded = HideBuffer::load(&mut c, &entry.id, 100).unwrap();
    assert!(loaded.needs_paging());
    assert_eq!(
        loaded.get(&entry.id).unwrap().content.as_bytes(),
        text.as_bytes()
    );
    let mut pages = Vec::new();
    for page in 1..=4 {
        pages.extend_from_slice(loaded.cut(&entry.id, page).unwrap().content.as_bytes());
    }
    assert_eq!(pages, text.as_bytes());

    // A JSON hide: pages end between values, headers name the paths, a path finds its page,
    // and a search leads to the JSON page holding the match.
    let doc = issues(3000);
    let mut buffer = HideBuffer::new(&mut c, 400);
    let entry = buffer.store("github", doc.as_bytes()).unwrap();
    let first = buffer.call_tool("hide_next", &serde_json::json!({}));
    assert!(
        first.contains("page=1/") && first.contains(" · $ … $["),
        "{first}"
    );
    let second = buffer.call_tool("hide_next", &serde_json::json!({}));
    assert!(
        second.contains(" · $[") && second.contains(" · in $ ("),
        "{second}"
    );
    let jumped = buffer.call_tool("hide_jump", &serde_json::json!({"path": ".[5].labels"}));
    let fifth = doc.find(r#"{"id":5,"#).unwrap();
    let value = fifth + doc[fifth..].find(r#""labels":"#).unwrap() + r#""labels":"#.len();
    let page = buffer.jump(&entry.id, "$[5].labels").unwrap();
    assert!(
        page.offset as usize <= value
            && value < (page.offset as usize + page.content.as_bytes().len())
    );
    assert!(jumped.contains(&format!("page={}/", page.page)), "{jumped}");
    let found = buffer
        .search(&entry.id, "issue number 7 ", false)
        .unwrap()
        .unwrap();
    let at = doc.find("issue number 7 ").unwrap();
    assert!(
        found.offset as usize <= at && at < found.offset as usize + found.content.as_bytes().len()
    );
    assert_eq!(found.pages, jqjail_client::Pages::Json);
    let neither = buffer.call_tool("hide_jump", &serde_json::json!({}));
    assert!(neither.contains("`page` or a string `path`"), "{neither}");
}

#[test]
fn retention_quota_refuses_or_evicts_by_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    std::fs::write(
        &config,
        "[store]\nquota_bytes = 1000\non_full = \"refuse\"\n",
    )
    .unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    let mut c = d.client();
    c.hide_put("k", "a", &[b'a'; 600], &BTreeMap::new())
        .unwrap();
    let e = c
        .hide_put("k", "b", &[b'b'; 600], &BTreeMap::new())
        .unwrap_err();
    let ClientError::Server(e) = e else { panic!() };
    assert_eq!(e.code, ErrorCode::QuotaExceeded);
    assert_eq!(e.limit, Some(1000));
    assert!(e.message.contains("1000-byte hide quota"), "{}", e.message);
    // A large (streamed) put over the whole quota is refused before it is written, and the
    // connection reads past its content and keeps serving.
    let e = c
        .hide_put("k", "big", &vec![b'x'; 300 << 10], &BTreeMap::new())
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::QuotaExceeded);
    // The content and the labels (`k`, `a`).
    assert_eq!(c.hide_usage().unwrap().bytes, 602);
    drop(d);

    std::fs::write(
        &config,
        "[store]\nquota_bytes = 1000\non_full = \"evict\"\n",
    )
    .unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    let mut c = d.client();
    let a = c
        .hide_put("k", "a", &[b'a'; 600], &BTreeMap::new())
        .unwrap();
    let b = c
        .hide_put("k", "b", &[b'b'; 600], &BTreeMap::new())
        .unwrap();
    assert_eq!(b.evicted, std::slice::from_ref(&a.entry.id));
    assert_eq!(
        code(c.hide_get(&a.entry.id).unwrap_err()),
        ErrorCode::NotFound
    );
    assert_eq!(c.hide_usage().unwrap().quota_bytes, 1000);
}

#[test]
fn refuses_a_store_other_users_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(crate::util::DAEMON)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mode is 755"), "{err}");
}

fn cli(d: &Daemon, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(CLI)
        .arg("hide")
        .arg("--socket")
        .arg(&d.socket)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_hide_command_line() {
    let d = Daemon::start();
    let doc = br#"[{"id":1,"title":"first"},{"id":2,"title":"second"},{"id":3,"title":"the third of three"}]"#;
    let put = json(&cli(
        &d,
        &["put", "--source", "GitHub", "--meta", "repo=x/y"],
        doc,
    ));
    let id = put["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("github-"));
    assert_eq!(put["size"], doc.len());
    assert_eq!(put["meta"]["repo"], "x/y");
    let got = cli(&d, &["get", &id], b"");
    assert_eq!(got.stdout, doc);
    let cut = json(&cli(
        &d,
        &["cut", &id, "2", "--page-size", "64", "--hint"],
        b"",
    ));
    assert_eq!(cut["page"], 2);
    assert_eq!(cut["total_pages"], 1 + (doc.len() as u64 - 1) / 64);
    // The page's text itself (a tail on the wire), not its length.
    let offset = cut["offset"].as_u64().unwrap() as usize;
    let text = cut["content"].as_str().expect("the page's content");
    assert_eq!(text.as_bytes(), &doc[offset..offset + text.len()]);
    assert!(
        !text.is_empty() && cut.get("content_bytes").is_none(),
        "{cut}"
    );
    assert!(cut["preface"].as_str().unwrap().contains("page 2 of"));
    let found = json(&cli(&d, &["search", &id, "second"], b""));
    let at = doc.windows(6).position(|w| w == b"second").unwrap();
    assert_eq!(found["matches"][0]["offset"], at);
    assert_eq!(found["matches"][0]["page"], 1);
    assert_eq!(found["found"], true);
    let miss = cli(&d, &["search", &id, "fourth"], b"");
    assert_eq!(miss.status.code(), Some(1), "no match exits 1");
    let list = json(&cli(&d, &["list"], b""));
    assert_eq!(list[0]["id"], id.as_str());
    // `jqjail --hide ID FILTER` filters the hide.
    let out = Command::new(CLI)
        .arg("--socket")
        .arg(&d.socket)
        .args(["-c", "--hide", &id, "map(.title)"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "[\"first\",\"second\",\"the third of three\"]\n"
    );
    let plain = json(&cli(&d, &["cut", &id, "1"], b""));
    assert!(plain.get("preface").is_none(), "{plain}");
    // JSON pages: `cut --json` pages between values and names the paths; `jump` goes to one.
    let page = json(&cli(
        &d,
        &["cut", &id, "2", "--json", "--page-size", "64"],
        b"",
    ));
    assert_eq!(
        (&page["pages"], &page["json"]["first"]),
        (&json!("json"), &json!("$[2].title")),
        "{page}"
    );
    assert_eq!(page["content"], r#""title":"the third of three"}]"#);
    let jumped = json(&cli(
        &d,
        &["jump", &id, ".[1].title", "--page-size", "64", "--hint"],
        b"",
    ));
    assert_eq!(jumped["page"], 1, "{jumped}");
    assert!(
        jumped["preface"]
            .as_str()
            .unwrap()
            .contains("It holds $ through $[2].id"),
        "{jumped}"
    );
    let nowhere = cli(&d, &["jump", &id, "$[7]"], b"");
    assert!(!nowhere.status.success());
    assert!(
        String::from_utf8_lossy(&nowhere.stderr).contains("NOT_FOUND"),
        "{nowhere:?}"
    );
    // An output kept as a hide prints its first page as text, says on stderr where the rest
    // is, and the hide holds the outputs as one JSON value (an array), as a collapsed run
    // answers them.
    let kept = Command::new(CLI)
        .arg("--socket")
        .arg(&d.socket)
        .args([
            "-n",
            "--max-output",
            "50",
            "--on-oversize",
            "hide",
            "range(30)",
        ])
        .output()
        .unwrap();
    let page = String::from_utf8(kept.stdout).unwrap();
    assert!(page.starts_with("[0,1,2,3"), "{page}");
    // Not the answer but its first page: the output limit's status (6).
    assert_eq!(kept.status.code(), Some(6));
    let note = String::from_utf8(kept.stderr).unwrap();
    let hide = note
        .split_whitespace()
        .skip_while(|w| *w != "hide")
        .nth(1)
        .unwrap()
        .trim_end_matches(';');
    assert!(note.contains("page 1 of 1 "), "{note}");
    assert!(note.contains("`jqjail --hide "), "{note}");
    assert!(!note.contains("hide cut"), "one page has no page 2: {note}");
    let out = Command::new(CLI)
        .arg("--socket")
        .arg(&d.socket)
        .args(["--hide", hide, "length"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "30\n");
    let rm = json(&cli(&d, &["rm", &id], b""));
    assert_eq!(rm["id"], id.as_str());
    let gone = cli(&d, &["cut", &id, "1"], b"");
    assert_eq!(gone.status.code(), Some(10));
    assert!(String::from_utf8_lossy(&gone.stderr).starts_with("jqjail: NOT_FOUND:"));
}

#[test]
fn large_puts_stream_to_disk_and_a_stalled_one_leaves_nothing() {
    let d = Daemon::start();
    let mut c = d.client();
    let big = issues(20 << 20);
    let mut ids = Vec::new();
    for source in ["a", "b", "c"] {
        ids.push(
            c.hide_put("k", source, big.as_bytes(), &BTreeMap::new())
                .unwrap()
                .entry,
        );
    }
    // Three 20 MiB puts; the daemon never held one whole.
    let peak = crate::util::peak_rss(d.pid());
    assert!(peak < 16 << 20, "daemon peak RSS {peak} bytes");
    assert_eq!(
        c.run_hide("length", &ids[2].id, &RunOptions::default())
            .unwrap()
            .output,
        c.run("length", big.as_bytes(), &RunOptions::default())
            .unwrap()
            .output
    );
    assert_eq!(ids[0].size, big.len() as u64);

    // A put that stalls half-way is cut off at the frame timeout and leaves no trace.
    drop(d);
    let (d, _config) = crate::util::with_frame_timeout(300);
    let frame = crate::util::put_frame("stall", 10 << 20);
    crate::util::assert_cut_off_when_stalled(&d, &frame, 1 << 20);
    assert!(d.client().hide_list().unwrap().is_empty());
    let tmp = std::fs::read_dir(d.store().join("tmp")).unwrap().count();
    assert_eq!(tmp, 0, "the abandoned put's temp file is gone");
}

#[test]
fn a_reload_applies_a_new_age_limit_to_idle_tenants_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jqjaild.toml");
    std::fs::write(&config, "[store]\nmax_age_secs = 3600\n").unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()], &[]);
    let mut c = d.client();
    c.hide_put("k", "old", b"[1]", &BTreeMap::new()).unwrap();
    // The hide must be older than the new limit of one second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&config, "[store]\nmax_age_secs = 1\n").unwrap();
    crate::util::signal(d.pid(), libc::SIGHUP);
    assert!(crate::util::wait_until(
        std::time::Duration::from_secs(5),
        || c.hide_list().unwrap().is_empty()
    ));
    assert!(crate::util::wait_until(
        std::time::Duration::from_secs(5),
        || d.log().contains("hides past the age limit deleted")
    ));
}

fn json_page(id: &str, at: PageAt, page_size: u64, pages: Pages) -> HidePageRequest {
    HidePageRequest {
        id: id.into(),
        at,
        page_size: Some(page_size),
        hint: true,
        pages,
        max_path_bytes: None,
    }
}

/// Issue 37's first done-when, through the daemon: `examples/issues.json` in 600-byte JSON
/// pages; every page starts and ends between values and names its first and last paths as
/// the store's layout does (which is property-tested against an independent reader); a page by
/// path holds the value; text falls back to byte pages and says so; byte pages stay.
#[test]
fn json_pages_name_their_paths_and_a_path_finds_its_page() {
    use jqjail_store::json_page::{JsonLayout, find, parse_path, render};
    let d = Daemon::start();
    let mut c = d.client();
    let doc = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/issues.json")).unwrap();
    let id = c
        .hide_put("k", "gh", &doc, &BTreeMap::new())
        .unwrap()
        .entry
        .id;
    let layout = JsonLayout::new(&doc, 600).unwrap();
    let mut all = Vec::new();
    for (n, want) in layout.pages().iter().enumerate() {
        let page = c
            .hide_page(json_page(&id, PageAt::Page(n as u64 + 1), 600, Pages::Json))
            .unwrap();
        assert_eq!(page.pages, Pages::Json);
        assert_eq!(page.total_pages, layout.total_pages());
        let place = page.json.as_ref().unwrap();
        assert_eq!(place.first, render(&want.first), "page {}", n + 1);
        assert_eq!(place.last, render(&want.last), "page {}", n + 1);
        let preface = page.preface.as_deref().unwrap();
        assert!(
            preface.contains(&format!("It holds {} through {}", place.first, place.last)),
            "{preface}"
        );
        if let Some(array) = &place.array {
            assert!(preface.contains(&format!("an array of {} elements", array.length)));
        }
        all.extend_from_slice(page.content.as_bytes());
    }
    assert_eq!(all, doc, "the pages are the document");
    let second = c
        .hide_page(json_page(&id, PageAt::Page(2), 600, Pages::Json))
        .unwrap();
    let array = second.json.unwrap().array.unwrap();
    assert_eq!(
        (array.path.as_str(), array.length),
        ("$", 20),
        "the example's 20 issues"
    );

    for path in ["$[17].labels[0].name", ".[19].user.login", "[3,\"title\"]"] {
        let page = c
            .hide_page(json_page(&id, PageAt::Path(path.into()), 600, Pages::Json))
            .unwrap();
        let at = find(&doc, &parse_path(path).unwrap()).unwrap();
        let end = page.offset + page.content.as_bytes().len() as u64;
        assert!(
            page.offset <= at && at < end,
            "{path}: {at} not in {}..{end}",
            page.offset
        );
    }
    let e = c
        .hide_page(json_page(
            &id,
            PageAt::Path("$[20]".into()),
            600,
            Pages::Json,
        ))
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::NotFound);
    for bad in ["$[-1]", ".a[", &"x".repeat(5000)] {
        let e = c
            .hide_page(json_page(&id, PageAt::Path(bad.into()), 600, Pages::Json))
            .unwrap_err();
        assert_eq!(code(e), ErrorCode::InvalidRequest, "{bad}");
    }
    let e = c
        .hide_page(json_page(&id, PageAt::Page(10_000), 600, Pages::Json))
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::PageOutOfRange);

    // By offset, in both kinds of page: the page holding that byte.
    for pages in [Pages::Json, Pages::Bytes] {
        for offset in [0, 1234, doc.len() as u64 - 1] {
            let page = c
                .hide_page(json_page(&id, PageAt::Offset(offset), 600, pages))
                .unwrap();
            let end = page.offset + page.content.as_bytes().len() as u64;
            assert!(page.offset <= offset && offset < end, "{pages:?} {offset}");
        }
        let e = c
            .hide_page(json_page(&id, PageAt::Offset(doc.len() as u64), 600, pages))
            .unwrap_err();
        assert_eq!(code(e), ErrorCode::InvalidRequest);
    }
    // Byte pages are hide_cut's.
    let bytes = c
        .hide_page(json_page(&id, PageAt::Page(2), 600, Pages::Bytes))
        .unwrap();
    let cut = c.hide_cut(&id, 2, Some(600), false).unwrap();
    assert_eq!((bytes.pages, bytes.json), (Pages::Bytes, None));
    assert_eq!(bytes.content.as_bytes(), cut.content.as_bytes());
    // Text: byte pages, saying why.
    let text = c
        .hide_put(
            "k",
            "txt",
            "plain text, ".repeat(100).as_bytes(),
            &BTreeMap::new(),
        )
        .unwrap()
        .entry
        .id;
    let page = c
        .hide_page(json_page(&text, PageAt::Page(1), 64, Pages::Json))
        .unwrap();
    assert_eq!(page.pages, Pages::Bytes);
    assert!(page.not_json.unwrap().contains("not one JSON value"));
    assert!(page.preface.unwrap().contains("byte windows"));
}

/// Issue 37: a hide's head and tail (protocol 4's `hide_ends`): its beginning and its end, each
/// a JSON page at half the page size, and what lies between them, named by bytes, paths and the
/// elements of one array; the three are the hide, byte for byte. A hide that fits half a page
/// is all head; one that is not JSON is cut in bytes and says so.
#[test]
fn head_and_tail_show_both_ends_and_name_what_lies_between() {
    use jqjail_client::{HideEndsRequest, hide_buffer::format_ends};
    use jqjail_store::json_page::{JsonLayout, render};
    let d = Daemon::start();
    let mut c = d.client();
    let doc = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/issues.json")).unwrap();
    let id = c
        .hide_put("k", "gh", &doc, &BTreeMap::new())
        .unwrap()
        .entry
        .id;
    let ends = |c: &mut jqjail_client::Client, id: &str, page_size| {
        c.hide_ends(HideEndsRequest {
            id: id.into(),
            page_size: Some(page_size),
            hint: true,
            max_path_bytes: None,
        })
    };
    for page_size in [128, 600, 1200, 4096] {
        let e = ends(&mut c, &id, page_size).unwrap();
        let layout = JsonLayout::new(&doc, page_size / 2).unwrap();
        let pages = layout.pages();
        let (head, tail, left) = (
            &e.head,
            e.tail.as_ref().unwrap(),
            e.left_out.as_ref().unwrap(),
        );
        let bytes = e.content.as_bytes();
        let h = head.length as usize;
        // Head, what is left out and tail are the document, in order.
        assert_eq!(head.offset, 0);
        assert_eq!(&bytes[..h], &doc[..h]);
        assert_eq!(left.offset, head.length);
        assert_eq!(tail.offset, left.offset + left.bytes);
        assert_eq!(tail.offset + tail.length, doc.len() as u64);
        assert_eq!(&bytes[h..], &doc[tail.offset as usize..]);
        assert!(head.length + tail.length <= page_size, "{page_size}");
        // Each end is the JSON page at half the size, named as that page is.
        let (first, last) = (&pages[0], pages.last().unwrap());
        assert_eq!(head.json.as_ref().unwrap().last, render(&first.last));
        assert_eq!(tail.json.as_ref().unwrap().first, render(&last.first));
        assert_eq!(left.first.as_deref(), Some(&*render(&pages[1].first)));
        let before_tail = &pages[pages.len() - 2];
        assert_eq!(left.last.as_deref(), Some(&*render(&before_tail.last)));
        let el = left.elements.as_ref().unwrap();
        assert_eq!(
            (el.array.as_str(), el.length),
            ("$", Some(20)),
            "{page_size}"
        );
        assert!(el.from <= el.to && el.to <= 19, "{el:?}");
        let preface = e.preface.as_deref().unwrap();
        assert!(
            preface.contains(&format!("Left out between them: {} bytes", left.bytes))
                && preface.contains("it has 20 elements"),
            "{preface}"
        );
        let shown = format_ends(&e);
        assert!(
            shown.contains(&format!(
                "[HIDE id={id} head: bytes 0..{h} of {}",
                doc.len()
            )) && shown.contains(&format!(
                "[… left out: bytes {}..{}",
                left.offset, tail.offset
            )) && shown.contains(&format!("elements {} to {} of $", el.from, el.to)),
            "{shown}"
        );
    }
    // All of it fits half a page: all head.
    let e = ends(&mut c, &id, 32_768).unwrap();
    assert_eq!(
        (e.head.length, e.tail.is_none(), e.left_out.is_none()),
        (doc.len() as u64, true, true)
    );
    // Not JSON: byte ends, saying why.
    let text = "word ".repeat(1000);
    let tid = c
        .hide_put("k", "text", text.as_bytes(), &BTreeMap::new())
        .unwrap()
        .entry
        .id;
    let e = ends(&mut c, &tid, 1000).unwrap();
    assert_eq!(e.pages, Pages::Bytes);
    assert!(e.not_json.is_some() && e.head.json.is_none());
    let left = e.left_out.unwrap();
    assert_eq!(
        e.head.length + left.bytes + e.tail.unwrap().length,
        text.len() as u64
    );
    assert!(left.first.is_none() && left.elements.is_none());
    // A size too small for two ends names the limit and the value.
    let err = ends(&mut c, &id, 100).unwrap_err().to_string();
    assert!(
        err.contains("INVALID_REQUEST") && err.contains("page_size is 100") && err.contains("128"),
        "{err}"
    );
    let err = ends(&mut c, "nosuch-0123abcd", 1000)
        .unwrap_err()
        .to_string();
    assert!(err.contains("NOT_FOUND"), "{err}");
    // A key given twice names two arrays with one path: elements are said only where they
    // hold of one array (an attacker's review got "elements 17 to 13 of $.a; it has 1000").
    for doc in [
        format!(
            "{{\"a\":{:?},\"a\":{:?}}}",
            (0..1000).collect::<Vec<_>>(),
            (0..20).collect::<Vec<_>>()
        ),
        format!(
            "{{\"a\":{:?},\"a\":{:?}}}",
            (0..20).collect::<Vec<_>>(),
            (0..1000).collect::<Vec<_>>()
        ),
    ] {
        let dup = c
            .hide_put("k", "dup", doc.as_bytes(), &BTreeMap::new())
            .unwrap()
            .entry
            .id;
        let e = ends(&mut c, &dup, 128).unwrap();
        if let Some(el) = e.left_out.as_ref().and_then(|l| l.elements.as_ref()) {
            assert!(
                el.from <= el.to && el.length.is_none_or(|n| el.to < n),
                "{el:?}"
            );
        }
    }
    // `jqjail hide ends`: each end's text with its fields.
    let printed = json(&cli(
        &d,
        &["ends", &id, "--page-size", "600", "--hint"],
        b"",
    ));
    let (head, tail) = (&printed["head"], &printed["tail"]);
    let text = String::from_utf8(doc.clone()).unwrap();
    let head_text = head["content"].as_str().unwrap();
    let tail_text = tail["content"].as_str().unwrap();
    assert!(
        text.starts_with(head_text) && text.ends_with(tail_text),
        "{printed}"
    );
    assert_eq!(
        head_text.len() as u64
            + printed["left_out"]["bytes"].as_u64().unwrap()
            + tail_text.len() as u64,
        doc.len() as u64
    );
    assert!(
        printed["preface"]
            .as_str()
            .unwrap()
            .contains("Left out between them")
    );
}
