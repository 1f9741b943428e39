//! A client in the test itself that follows PROTOCOL.md with nothing but a socket and
//! serde_json: proof that a non-Rust client can talk to the daemon, tails included.

use crate::util::Daemon;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

/// Sends one request frame, then its tail (empty for requests without one).
fn send_with(s: &mut UnixStream, v: &Value, tail: &[u8]) {
    let body = serde_json::to_vec(v).unwrap();
    s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
    s.write_all(&body).unwrap();
    s.write_all(tail).unwrap();
}

fn send(s: &mut UnixStream, v: &Value) {
    send_with(s, v, b"");
}

/// The length of the tail that follows a response frame, as PROTOCOL.md lists them.
fn tail_len(v: &Value) -> u64 {
    let at = |ptr: &str| v.pointer(ptr).and_then(Value::as_u64);
    at("/run/output_bytes")
        .or_else(|| at("/hide_content/content_bytes"))
        .or_else(|| at("/hide_cut/content_bytes"))
        .or_else(|| at("/hidden/first/content_bytes"))
        .unwrap_or(0)
}

/// Reads one response frame and its tail.
fn recv_with(s: &mut UnixStream) -> (Value, Vec<u8>) {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    let mut tail = vec![0u8; tail_len(&v) as usize];
    s.read_exact(&mut tail).unwrap();
    (v, tail)
}

fn recv(s: &mut UnixStream) -> Value {
    let (v, tail) = recv_with(s);
    assert!(tail.is_empty(), "unexpected tail after {v}");
    v
}

/// Runs `filter` over `input` sent as the request's tail; returns the reply and its tail.
fn run(s: &mut UnixStream, request: Value, input: &[u8]) -> (Value, String) {
    send_with(s, &request, input);
    let (v, tail) = recv_with(s);
    (v, String::from_utf8(tail).unwrap())
}

#[test]
fn raw_json_client_completes_a_run() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(
        &mut s,
        &json!({"hello": {"protocol": 2, "client": "raw-json-test"}}),
    );
    let hello = recv(&mut s);
    assert_eq!(hello["hello"]["protocol"], 2);
    assert_eq!(hello["hello"]["limits"]["max_output_bytes"], 100000);

    // The input travels raw after the frame: no escaping, whatever it holds.
    let input = br#"{"items":[{"name":"a"},{"name":"b \"quoted\""}]}"#;
    let (reply, output) = run(
        &mut s,
        json!({"run": {"filter": ".items[].name", "input": {"inline": input.len()}}}),
        input,
    );
    assert_eq!(output, r#"["a","b \"quoted\""]"#);
    assert_eq!(reply["run"]["output_bytes"], output.len());
    assert!(reply["run"]["cost"]["wall_us"].as_u64().unwrap() > 0);

    // Optional fields: lang and limits.
    let (reply, _) = run(
        &mut s,
        json!({"run": {"filter": "def f: f; f", "input": {"inline": 4}, "lang": "jq",
                        "limits": {"timeout_ms": 200}}}),
        b"null",
    );
    assert_eq!(reply["error"]["code"], "TIMEOUT");
    assert_eq!(reply["error"]["limit"], 200);

    // Pipelined: two requests and their tails written before either answer is read are
    // answered in order.
    send_with(
        &mut s,
        &json!({"run": {"filter": ".[0]", "input": {"inline": 5}}}),
        b"[1,2]",
    );
    send_with(
        &mut s,
        &json!({"run": {"filter": ".[1]", "input": {"inline": 5}}}),
        b"[1,2]",
    );
    assert_eq!(recv_with(&mut s).1, b"1");
    assert_eq!(recv_with(&mut s).1, b"2");

    // A request that does not decode is answered, and the connection is closed: whether a
    // tail followed it cannot be known.
    send(&mut s, &json!({"run": {"filter": 5}}));
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "PROTOCOL_ERROR");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("connection is closed")
    );
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

#[test]
fn the_first_message_must_be_hello() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(
        &mut s,
        &json!({"run": {"filter": ".", "input": {"hide": "x"}}}),
    );
    assert_eq!(recv(&mut s)["error"]["code"], "PROTOCOL_ERROR");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "connection closed after the refusal");
}

#[test]
fn unsupported_versions_are_refused() {
    let d = Daemon::start();
    for old in [0, 1] {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        send(&mut s, &json!({"hello": {"protocol": old}}));
        let reply = recv(&mut s);
        assert_eq!(reply["error"]["code"], "UNSUPPORTED_VERSION", "{reply}");
    }
}

#[test]
fn an_oversized_frame_is_refused_before_allocation() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    recv(&mut s);
    // Announce max + 1 bytes and send none of them: the answer must come anyway.
    let max = jqjail_protocol::MAX_FRAME_BYTES;
    s.write_all(&((max + 1) as u32).to_le_bytes()).unwrap();
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "FRAME_TOO_LARGE");
    assert_eq!(reply["error"]["limit"], max);
}

#[test]
fn a_tail_over_the_input_limit_is_answered_before_it_is_sent() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    recv(&mut s);
    // 2^40 bytes announced, none sent yet: the answer comes at once. The daemon then skips
    // what comes of the tail, so a client that sends it stays in step.
    send(
        &mut s,
        &json!({"run": {"filter": ".", "input": {"inline": 1u64 << 40}}}),
    );
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "INPUT_TOO_LARGE", "{reply}");
    assert_eq!(reply["error"]["actual"], 1u64 << 40);
    let over = d.client().limits().max_input_bytes + 1;
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    recv(&mut s);
    send_with(
        &mut s,
        &json!({"hide_put": {"content_bytes": over}}),
        &vec![b'x'; over as usize],
    );
    assert_eq!(recv(&mut s)["error"]["code"], "INPUT_TOO_LARGE");
    let (_, out) = run(
        &mut s,
        json!({"run": {"filter": ".", "input": {"inline": 1}}}),
        b"7",
    );
    assert_eq!(out, "7");
}

#[test]
fn raw_json_client_uses_the_hide_store() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    assert_eq!(recv(&mut s)["hello"]["protocol"], 2);
    let content = "ab".repeat(100);
    send_with(
        &mut s,
        &json!({"hide_put": {"source": "Tool X", "meta": {"turn": "7"}, "content_bytes": content.len()}}),
        content.as_bytes(),
    );
    let put = recv(&mut s);
    let id = put["hide_put"]["entry"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("toolx-"), "{put}");
    assert_eq!(put["hide_put"]["entry"]["meta"]["turn"], "7");
    send(
        &mut s,
        &json!({"hide_cut": {"id": id, "page": 4, "page_size": 64, "hint": true}}),
    );
    let (cut, page) = recv_with(&mut s);
    assert_eq!(page, b"abababab");
    assert_eq!(cut["hide_cut"]["total_pages"], 4);
    assert!(
        cut["hide_cut"]["preface"]
            .as_str()
            .unwrap()
            .contains("page 4 of 4")
    );
    send(
        &mut s,
        &json!({"hide_search": {"id": id, "query": "ba", "max_matches": 2}}),
    );
    let found = recv(&mut s);
    assert_eq!(
        found["hide_search"]["matches"],
        json!([{"page": 1, "offset": 1}, {"page": 1, "offset": 3}])
    );
    assert_eq!(found["hide_search"]["truncated"], true);
    send(
        &mut s,
        &json!({"run": {"filter": "length", "input": {"hide": id}}}),
    );
    let run = recv(&mut s);
    assert_eq!(run["error"]["code"], "INVALID_JSON", "{run}");
    send(&mut s, &json!({"hide_list": {}}));
    let list = recv(&mut s);
    assert_eq!(list["hide_list"]["entries"][0]["id"], id.as_str());
    assert_eq!(list["hide_list"]["total"], 1);
    assert_eq!(list["hide_list"]["next"], Value::Null);
    send(&mut s, &json!({"hide_get": {"id": id}}));
    let (got, whole) = recv_with(&mut s);
    assert_eq!(got["hide_content"]["content_bytes"], 200);
    assert_eq!(whole, content.as_bytes());
    send(&mut s, &json!({"hide_get": {"id": "nope-00000000"}}));
    assert_eq!(recv(&mut s)["error"]["code"], "NOT_FOUND");
}

#[test]
fn binary_hide_content_travels_in_json_too() {
    let d = Daemon::start();
    let id = d
        .client()
        .hide_put("k", "bin", &[0xff, 0xfe, 0x00], &Default::default())
        .unwrap()
        .entry
        .id;
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    recv(&mut s);
    send(&mut s, &json!({"hide_get": {"id": id}}));
    let (reply, content) = recv_with(&mut s);
    assert_eq!(reply["hide_content"]["entry"]["size"], 3, "{reply}");
    assert_eq!(content, [0xff, 0xfe, 0x00]);
    // The connection still serves.
    send(&mut s, &json!("hide_usage"));
    assert_eq!(recv(&mut s)["hide_usage"]["entries"], 1);
}

#[test]
fn hides_are_listed_a_page_at_a_time() {
    let d = Daemon::start();
    let mut c = d.client();
    for i in 0..5 {
        c.hide_put(
            "k",
            "paged",
            format!("[{i}]").as_bytes(),
            &Default::default(),
        )
        .unwrap();
    }
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    recv(&mut s);
    let mut seen = Vec::new();
    let mut offset = json!(0);
    while !offset.is_null() {
        send(
            &mut s,
            &json!({"hide_list": {"offset": offset, "limit": 2}}),
        );
        let page = recv(&mut s);
        assert_eq!(page["hide_list"]["total"], 5);
        for e in page["hide_list"]["entries"].as_array().unwrap() {
            seen.push(e["id"].as_str().unwrap().to_string());
        }
        offset = page["hide_list"]["next"].clone();
    }
    assert_eq!(seen.len(), 5);
    seen.dedup();
    assert_eq!(seen.len(), 5, "no hide listed twice");
    assert_eq!(
        seen,
        c.hide_list()
            .unwrap()
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>()
    );
    send(&mut s, &json!({"hide_list": {"limit": 0}}));
    assert_eq!(recv(&mut s)["error"]["code"], "INVALID_REQUEST");
}

#[test]
fn a_put_with_too_many_meta_pairs_is_refused_and_the_connection_kept() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 2}}));
    recv(&mut s);
    let meta: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    // Refused for its head, before the tail: the tail is skipped and the connection kept.
    send_with(
        &mut s,
        &json!({"hide_put": {"source": "m", "meta": meta, "content_bytes": 3}}),
        b"[1]",
    );
    let refused = recv(&mut s);
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than 64 meta pairs"),
        "{refused}"
    );
    send(&mut s, &json!("hide_usage"));
    assert_eq!(recv(&mut s)["hide_usage"]["entries"], 0);
}

#[test]
fn an_oversized_json_hello_is_refused_in_json() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    // A hello padded past the 4,096-byte first frame: its first byte says JSON.
    let padded = format!(
        r#"{{"hello":{{"protocol":2,"client":"{}"}}}}"#,
        "x".repeat(5000)
    );
    s.write_all(&(padded.len() as u32).to_le_bytes()).unwrap();
    s.write_all(padded.as_bytes()).unwrap();
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "FRAME_TOO_LARGE", "{reply}");
    assert_eq!(reply["error"]["limit"], 4096);
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// The language-neutral error exchanges (`protocol/vectors/exchanges.json`), which every
/// client's tests replay against the real daemon, replayed here with serde_json alone.
#[test]
fn the_conformance_exchanges_hold() {
    let text =
        std::fs::read_to_string(crate::util::repo_file("protocol/vectors/exchanges.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let d = Daemon::start();
    let exchanges = doc["exchanges"].as_array().unwrap();
    assert!(exchanges.len() >= 10);
    for ex in exchanges {
        let name = ex["name"].as_str().unwrap();
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        if ex["hello"].as_bool().unwrap() {
            send(&mut s, &json!({"hello": {"protocol": 2}}));
            assert!(recv(&mut s).get("hello").is_some(), "{name}");
        }
        for step in ex["steps"].as_array().unwrap() {
            if let Some(frame) = step.get("send") {
                send_with(&mut s, frame, &unhex(step["tail_hex"].as_str().unwrap()));
                continue;
            }
            let want = &step["expect"];
            let (got, tail) = recv_with(&mut s);
            let kind = want["response"].as_str().unwrap();
            let body = got
                .get(kind)
                .unwrap_or_else(|| panic!("{name}: expected {kind}, got {got}"));
            if let Some(code) = want.get("code") {
                assert_eq!(&body["code"], code, "{name}: {got}");
            }
            if let Some(codes) = want.get("code_one_of") {
                assert!(
                    codes.as_array().unwrap().contains(&body["code"]),
                    "{name}: {got}"
                );
            }
            for field in ["limit", "actual"] {
                if let Some(v) = want.get(field) {
                    assert_eq!(&body[field], v, "{name}: {got}");
                }
            }
            if let Some(t) = want.get("tail_hex") {
                assert_eq!(tail, unhex(t.as_str().unwrap()), "{name}");
            }
        }
        if ex["closed"].as_bool().unwrap() {
            // End of file, or a reset when the daemon closed with bytes of ours unread.
            let mut rest = Vec::new();
            match s.read_to_end(&mut rest) {
                Ok(n) => assert_eq!(n, 0, "{name}: not closed"),
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{name}"),
            }
        }
    }
}
