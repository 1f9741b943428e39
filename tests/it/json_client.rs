//! A client in the test itself that follows PROTOCOL.md with nothing but a socket and
//! serde_json: proof that a non-Rust client can talk to the daemon.

use crate::util::Daemon;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

fn send(s: &mut UnixStream, v: &Value) {
    let body = serde_json::to_vec(v).unwrap();
    s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
    s.write_all(&body).unwrap();
}

fn recv(s: &mut UnixStream) -> Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn raw_json_client_completes_a_run() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(
        &mut s,
        &json!({"hello": {"protocol": 1, "client": "raw-json-test"}}),
    );
    let hello = recv(&mut s);
    assert_eq!(hello["hello"]["protocol"], 1);
    assert_eq!(hello["hello"]["limits"]["max_output_bytes"], 100000);

    let input = r#"{"items":[{"name":"a"},{"name":"b \"quoted\""}]}"#;
    send(
        &mut s,
        &json!({"run": {"filter": ".items[].name", "input": {"inline": input}}}),
    );
    let reply = recv(&mut s);
    assert_eq!(reply["run"]["output"], r#"["a","b \"quoted\""]"#);
    assert!(reply["run"]["cost"]["wall_us"].as_u64().unwrap() > 0);

    // Optional fields: lang and limits.
    send(
        &mut s,
        &json!({"run": {"filter": "def f: f; f", "input": {"inline": "null"}, "lang": "jq",
                        "limits": {"timeout_ms": 200}}}),
    );
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "TIMEOUT");
    assert_eq!(reply["error"]["limit"], 200);

    // A malformed request is answered, and the connection stays usable.
    send(&mut s, &json!({"run": {"filter": 5}}));
    assert_eq!(recv(&mut s)["error"]["code"], "PROTOCOL_ERROR");
    send(
        &mut s,
        &json!({"run": {"filter": ".", "input": {"inline": "[1]"}}}),
    );
    assert_eq!(recv(&mut s)["run"]["output"], "[1]");
}

#[test]
fn the_first_message_must_be_hello() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(
        &mut s,
        &json!({"run": {"filter": ".", "input": {"inline": "1"}}}),
    );
    assert_eq!(recv(&mut s)["error"]["code"], "PROTOCOL_ERROR");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "connection closed after the refusal");
}

#[test]
fn unsupported_versions_are_refused() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 0}}));
    assert_eq!(recv(&mut s)["error"]["code"], "UNSUPPORTED_VERSION");
}

#[test]
fn an_oversized_frame_is_refused_before_allocation() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 1}}));
    recv(&mut s);
    // Announce max + 1 bytes and send none of them: the answer must come anyway.
    let max = jqjail_protocol::MAX_FRAME_BYTES;
    s.write_all(&((max + 1) as u32).to_le_bytes()).unwrap();
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "FRAME_TOO_LARGE");
    assert_eq!(reply["error"]["limit"], max);
}

#[test]
fn raw_json_client_uses_the_hide_store() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 1}}));
    assert_eq!(recv(&mut s)["hello"]["protocol"], 1);
    let content = "ab".repeat(100);
    send(
        &mut s,
        &json!({"hide_put": {"source": "Tool X", "meta": {"turn": "7"}, "content": content}}),
    );
    let put = recv(&mut s);
    let id = put["hide_put"]["entry"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("toolx-"), "{put}");
    assert_eq!(put["hide_put"]["entry"]["meta"]["turn"], "7");
    send(
        &mut s,
        &json!({"hide_cut": {"id": id, "page": 4, "page_size": 64, "hint": true}}),
    );
    let cut = recv(&mut s);
    assert_eq!(cut["hide_cut"]["content"], "abababab");
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
    send(&mut s, &json!("hide_list"));
    assert_eq!(recv(&mut s)["hide_list"]["entries"][0]["id"], id.as_str());
    send(&mut s, &json!({"hide_get": {"id": "nope-00000000"}}));
    assert_eq!(recv(&mut s)["error"]["code"], "NOT_FOUND");
}

#[test]
fn binary_hide_content_gets_an_answer_in_json_too() {
    let d = Daemon::start();
    let id = d
        .client()
        .hide_put("k", "bin", &[0xff, 0xfe, 0x00], &Default::default())
        .unwrap()
        .entry
        .id;
    let mut s = UnixStream::connect(&d.socket).unwrap();
    send(&mut s, &json!({"hello": {"protocol": 1}}));
    recv(&mut s);
    send(&mut s, &json!({"hide_get": {"id": id}}));
    let reply = recv(&mut s);
    assert_eq!(reply["error"]["code"], "INVALID_REQUEST", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not UTF-8")
    );
    // The connection still serves.
    send(&mut s, &json!("hide_usage"));
    assert_eq!(recv(&mut s)["hide_usage"]["entries"], 1);
}
