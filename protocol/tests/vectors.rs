//! The language-neutral conformance vectors (`protocol/vectors/messages.json`): one example of
//! every request and response, as its JSON frame body, its bincode body and its tail. This
//! test builds them from the protocol's own types and fails when the file differs, so the
//! file is always what the daemon speaks; the Python, Go and TypeScript clients' tests read
//! the same file. After a deliberate change, `JQJAIL_BLESS=1 cargo test -p jqjail-protocol
//! --test vectors` rewrites it.

use jqjail_protocol::hide::{
    ArrayPlace, ElementsLeftOut, End, HideEnds, HideEndsRequest, JsonPlace, LeftOut, PageAt, Pages,
};
use jqjail_protocol::{
    Args, Cost, Encoding, ErrorCode, ErrorReply, Hello, HelloReply, HiddenReply, HideContent,
    HideCut, HideCutRequest, HideEntry, HideListReply, HideListRequest, HideMatch, HidePage,
    HidePageRequest, HidePut, HidePutReply, HideRef, HideSearchReply, HideSearchRequest,
    HideUsageReply, Input, Lang, LimitOverrides, Limits, OnOversize, Outputs, Request, Response,
    RunReply, RunRequest, StatsReply, Tail,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One vector: the frame in both encodings (body only, and the JSON one with its length
/// prefix), and the tail that follows it.
fn vector(name: &str, json_body: Vec<u8>, bincode_body: Vec<u8>, tail: &[u8]) -> Value {
    let mut framed = (json_body.len() as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(&json_body);
    json!({
        "name": name,
        "json": String::from_utf8(json_body).unwrap(),
        "json_frame_hex": hex(&framed),
        "bincode_hex": hex(&bincode_body),
        "tail_hex": hex(tail),
    })
}

/// One vector of `msg`, whose tail is `tail`: checked to decode back to `msg` in both
/// encodings (`decodes_back` decodes a body, fills its pending tail and compares).
fn message<M: serde::Serialize>(
    name: &str,
    msg: &M,
    tail: Option<&Tail<'_>>,
    decodes_back: impl Fn(Encoding, &[u8], Vec<u8>),
) -> Value {
    let tail = tail.map(|t| t.as_bytes().to_vec()).unwrap_or_default();
    let (j, b) = (
        Encoding::Json.encode(msg).unwrap(),
        Encoding::Bincode.encode(msg).unwrap(),
    );
    for (enc, body) in [(Encoding::Json, &j), (Encoding::Bincode, &b)] {
        decodes_back(enc, body, tail.clone());
    }
    vector(name, j, b, &tail)
}

/// Fills a decoded message's pending tail with `tail`, which must be its announced length.
fn fill(name: &str, pending: Option<&mut Tail<'_>>, tail: Vec<u8>) {
    if let Some(pending) = pending {
        assert_eq!(pending.len(), tail.len() as u64, "{name}");
        pending.fill(tail).unwrap();
    }
}

fn request(name: &str, msg: Request<'_>) -> Value {
    message(name, &msg, msg.tail(), |enc, body, tail| {
        let mut got = enc.decode::<Request<'_>>(body).unwrap();
        fill(name, got.tail_mut(), tail);
        assert_eq!(got, msg, "{name} in {enc:?}");
    })
}

fn response(name: &str, msg: Response) -> Value {
    message(name, &msg, msg.tail(), |enc, body, tail| {
        let mut got = enc.decode::<Response>(body).unwrap();
        fill(name, got.tail_mut(), tail);
        assert_eq!(got, msg, "{name} in {enc:?}");
    })
}

fn run(filter: &str, input: Input<'static>) -> RunRequest<'static> {
    RunRequest {
        filter: filter.into(),
        lang: Lang::Jq,
        limits: LimitOverrides::default(),
        on_oversize: OnOversize::Error,
        input,
        args: Args::default(),
        outputs: Outputs::Collapsed,
    }
}

fn cost() -> Cost {
    Cost {
        wall_us: 1500,
        cpu_us: 900,
        peak_rss_bytes: 4_194_304,
        input_bytes: 7,
        output_bytes: 1,
    }
}

fn entry() -> HideEntry {
    HideEntry {
        id: "github-1a2b3c4d".into(),
        kind: "tool_output".into(),
        source: "GitHub".into(),
        size: 200,
        sha256: "1a2b3c4d".to_string() + &"0".repeat(56),
        meta: BTreeMap::from([
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), "1".to_string()),
        ]),
        created_ms: 1_780_000_000_000,
    }
}

fn cut(page: &'static [u8], preface: Option<&str>) -> HideCut {
    HideCut {
        hide_id: "github-1a2b3c4d".into(),
        page: 2,
        total_pages: 4,
        page_size: 64,
        offset: 64,
        size: 200,
        content: Tail::from(page),
        preface: preface.map(str::to_string),
    }
}

fn requests() -> Vec<Value> {
    let mut with_everything = run(
        ".items[] | $x",
        Input::Inline(Tail::from(&br#"{"items":[1]}"#[..])),
    );
    with_everything.limits = LimitOverrides {
        max_output_bytes: Some(1000),
        timeout_ms: Some(300),
        max_depth: Some(64),
    };
    with_everything.on_oversize = OnOversize::Hide;
    with_everything.outputs = Outputs::Lines;
    with_everything.args = Args {
        named: [("x".to_string(), "\"text\"".to_string())]
            .into_iter()
            .collect(),
        positional: vec!["42".into()],
    };
    let mut path = run(
        "items[*].name",
        Input::Inline(Tail::from(&br#"{"items":[]}"#[..])),
    );
    path.lang = Lang::Path;
    let mut shape = run("", Input::Hide("github-1a2b3c4d".into()));
    shape.lang = Lang::Shape;
    vec![
        request(
            "hello",
            Request::Hello(Hello {
                protocol: jqjail_protocol::PROTOCOL_VERSION,
                client: "my-agent/2.3".into(),
            }),
        ),
        request(
            "run inline",
            Request::Run(run(".a", Input::Inline(Tail::from(&br#"{"a":1}"#[..])))),
        ),
        request("run with every field", Request::Run(with_everything)),
        request(
            "run over a hide",
            Request::Run(run("length", Input::Hide("github-1a2b3c4d".into()))),
        ),
        request(
            "run over values",
            Request::Run(run(
                "[inputs]",
                Input::Values {
                    values: Tail::from(&b"1 2\n{\"a\":3}"[..]),
                    null_input: true,
                },
            )),
        ),
        request("run in the path language", Request::Run(path)),
        request("shape of a hide", Request::Run(shape)),
        request("stats", Request::Stats),
        request(
            "hide_put",
            Request::HidePut(HidePut {
                kind: "tool_output".into(),
                source: "GitHub".into(),
                meta: BTreeMap::from([("turn".to_string(), "7".to_string())]),
                content: Tail::from(&b"[{\"id\":1}]"[..]),
            }),
        ),
        request(
            "hide_put of bytes that are not UTF-8",
            Request::HidePut(HidePut {
                kind: String::new(),
                source: "bin".into(),
                meta: BTreeMap::new(),
                content: Tail::from(&[0xff, 0xfe, 0x00][..]),
            }),
        ),
        request(
            "hide_get",
            Request::HideGet(HideRef {
                id: "github-1a2b3c4d".into(),
            }),
        ),
        request(
            "hide_cut",
            Request::HideCut(HideCutRequest {
                id: "github-1a2b3c4d".into(),
                page: 2,
                page_size: Some(64),
                hint: true,
            }),
        ),
        request(
            "hide_page by number",
            Request::HidePage(HidePageRequest {
                id: "github-1a2b3c4d".into(),
                at: PageAt::Page(2),
                page_size: Some(600),
                hint: true,
                pages: Pages::Json,
                max_path_bytes: None,
            }),
        ),
        request(
            "hide_page by path",
            Request::HidePage(HidePageRequest {
                id: "github-1a2b3c4d".into(),
                at: PageAt::Path("$[17].labels".into()),
                page_size: None,
                hint: false,
                pages: Pages::Json,
                max_path_bytes: None,
            }),
        ),
        request(
            "hide_page by offset",
            Request::HidePage(HidePageRequest {
                id: "github-1a2b3c4d".into(),
                at: PageAt::Offset(70),
                page_size: Some(64),
                hint: false,
                pages: Pages::Json,
                max_path_bytes: None,
            }),
        ),
        request(
            "hide_ends",
            Request::HideEnds(HideEndsRequest {
                id: "github-1a2b3c4d".into(),
                page_size: Some(1200),
                hint: true,
                max_path_bytes: Some(64),
            }),
        ),
        request(
            "hide_page in bytes",
            Request::HidePage(HidePageRequest {
                id: "github-1a2b3c4d".into(),
                at: PageAt::Page(1),
                page_size: None,
                hint: false,
                pages: Pages::Bytes,
                max_path_bytes: None,
            }),
        ),
        request(
            "hide_search",
            Request::HideSearch(HideSearchRequest {
                id: "github-1a2b3c4d".into(),
                query: "needle".into(),
                ignore_case: true,
                page_size: None,
                max_matches: Some(10),
            }),
        ),
        request(
            "hide_list",
            Request::HideList(HideListRequest {
                offset: 100,
                limit: Some(50),
            }),
        ),
        request(
            "hide_delete",
            Request::HideDelete(HideRef {
                id: "github-1a2b3c4d".into(),
            }),
        ),
        request("hide_usage", Request::HideUsage),
    ]
}

fn responses() -> Vec<Value> {
    vec![
        response(
            "hello",
            Response::Hello(HelloReply {
                protocol: jqjail_protocol::PROTOCOL_VERSION,
                server: "jqjaild/0.1.0".into(),
                limits: Limits::default(),
            }),
        ),
        response(
            "run",
            Response::Run(RunReply {
                output: Tail::from(&b"1"[..]).into_owned(),
                cost: cost(),
            }),
        ),
        response(
            "run with lines",
            Response::Run(RunReply {
                output: Tail::from(&b"1\n\"a\\nb\"\n"[..]).into_owned(),
                cost: cost(),
            }),
        ),
        response(
            "error",
            Response::Error(ErrorReply {
                code: ErrorCode::Timeout,
                message: "the filter ran for 200 ms, over the 200 ms limit".into(),
                limit: Some(200),
                actual: Some(200),
                detail: None,
                cost: Some(cost()),
            }),
        ),
        response(
            "error without numbers",
            Response::Error(ErrorReply::new(
                ErrorCode::CompileError,
                "undefined filter: nope/0",
            )),
        ),
        response(
            "stats",
            Response::Stats(StatsReply {
                uptime_ms: 60_000,
                outcomes: vec![("OK".into(), 10), ("TIMEOUT".into(), 1)],
                latency: jqjail_protocol::Latency {
                    count: 11,
                    p50_us: 900,
                    p90_us: 2000,
                    p99_us: 200_000,
                },
                running: 1,
                waiting: 0,
                connections: 2,
                workers_started: 12,
                worker_start_failures: 0,
                tenants: vec![jqjail_protocol::TenantStats {
                    name: "uid-1000".into(),
                    requests: 11,
                    errors: 1,
                }],
            }),
        ),
        response(
            "hide_put",
            Response::HidePut(HidePutReply {
                entry: entry(),
                created: true,
                evicted: vec!["old-00000000".into()],
            }),
        ),
        response(
            "hide_content",
            Response::HideContent(HideContent {
                entry: HideEntry { size: 3, ..entry() },
                content: Tail::from(&[0xff, 0xfe, 0x00][..]).into_owned(),
            }),
        ),
        response(
            "hide_cut",
            Response::HideCut(cut(
                b"abababab",
                Some("[HIDE id=github-1a2b3c4d page=2/4 bytes=200] …"),
            )),
        ),
        response(
            "hide_page",
            Response::HidePage(HidePage {
                hide_id: "github-1a2b3c4d".into(),
                page: 2,
                total_pages: 14,
                page_size: 600,
                offset: 599,
                size: 7800,
                pages: Pages::Json,
                json: Some(JsonPlace {
                    first: "$[1].url".into(),
                    last: "$[1].labels[0]".into(),
                    array: Some(ArrayPlace {
                        path: "$".into(),
                        length: 20,
                    }),
                    depth: 2,
                    starts_in_string: None,
                    ends_in_string: Some(12),
                }),
                not_json: None,
                content: Tail::from(&b"\"url\": \"https://x\", \"labels\": [{\"name\": \"bug "[..])
                    .into_owned(),
                preface: Some("[HIDE id=github-1a2b3c4d page=2/14 bytes=7800 pages=json] …".into()),
            }),
        ),
        response(
            "hide_page of text",
            Response::HidePage(HidePage {
                hide_id: "notes-0a1b2c3d".into(),
                page: 1,
                total_pages: 2,
                page_size: 64,
                offset: 0,
                size: 100,
                pages: Pages::Bytes,
                json: None,
                not_json: Some("not one JSON value at byte 0: expected a value".into()),
                content: Tail::from(&b"plain text"[..]).into_owned(),
                preface: None,
            }),
        ),
        response(
            "hide_ends",
            Response::HideEnds(Box::new(HideEnds {
                hide_id: "github-1a2b3c4d".into(),
                size: 13661,
                page_size: 1200,
                pages: Pages::Json,
                head: End {
                    offset: 0,
                    length: 7,
                    json: Some(JsonPlace {
                        first: "$".into(),
                        last: "$[0].id".into(),
                        array: None,
                        depth: 0,
                        starts_in_string: None,
                        ends_in_string: None,
                    }),
                },
                tail: Some(End {
                    offset: 13656,
                    length: 5,
                    json: Some(JsonPlace {
                        first: "$[19].n".into(),
                        last: "$".into(),
                        array: Some(ArrayPlace {
                            path: "$".into(),
                            length: 20,
                        }),
                        depth: 2,
                        starts_in_string: None,
                        ends_in_string: None,
                    }),
                }),
                left_out: Some(LeftOut {
                    offset: 7,
                    bytes: 13649,
                    first: Some("$[0].id".into()),
                    last: Some("$[19].n".into()),
                    elements: Some(ElementsLeftOut {
                        array: "$".into(),
                        from: 0,
                        to: 19,
                        length: Some(20),
                    }),
                }),
                not_json: None,
                content: Tail::from(&b"[{\"id\"7}]\n"[..]).into_owned(),
                preface: Some(
                    "[HIDE id=github-1a2b3c4d head and tail, bytes=13661 pages=json] …".into(),
                ),
            })),
        ),
        response(
            "hide_search",
            Response::HideSearch(HideSearchReply {
                hide_id: "github-1a2b3c4d".into(),
                matches: vec![
                    HideMatch { page: 1, offset: 1 },
                    HideMatch {
                        page: 2,
                        offset: 70,
                    },
                ],
                truncated: true,
                total_pages: 4,
                page_size: 64,
            }),
        ),
        response(
            "hide_list",
            Response::HideList(HideListReply {
                entries: vec![entry()],
                total: 3,
                next: Some(1),
            }),
        ),
        response(
            "hide_list, last page",
            Response::HideList(HideListReply {
                entries: vec![],
                total: 0,
                next: None,
            }),
        ),
        response("hide_entry", Response::HideEntry(entry())),
        response(
            "hide_usage",
            Response::HideUsage(HideUsageReply {
                entries: 1,
                bytes: 216,
                quota_bytes: 1 << 30,
                max_age_secs: 604_800,
            }),
        ),
        response(
            "hidden",
            Response::Hidden(HiddenReply {
                entry: entry(),
                first: HideCut {
                    page: 1,
                    offset: 0,
                    ..cut(
                        b"[0,1,2,",
                        Some("[HIDE id=github-1a2b3c4d page=1/4 bytes=200] …"),
                    )
                },
                cost: cost(),
            }),
        ),
    ]
}

#[test]
fn the_vectors_file_is_what_the_protocol_speaks() {
    let vectors = json!({
        "about": "jqjail protocol v4 conformance vectors, generated by protocol/tests/vectors.rs from \
                  the protocol's own types (PROTOCOL.md). Each vector: `json` is the JSON frame body, \
                  `json_frame_hex` the same with its 4-byte little-endian length prefix, `bincode_hex` \
                  the bincode frame body, `tail_hex` the raw bytes that follow the frame (empty: none). \
                  The JSON texts are byte-exact as the daemon writes them; a client may write its \
                  requests with other whitespace or field order, but must decode these.",
        "protocol": 3,
        "requests": requests(),
        "responses": responses(),
    });
    let text = serde_json::to_string_pretty(&vectors).unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/messages.json");
    if std::env::var_os("JQJAIL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "{} is not what the protocol speaks; if the change is deliberate (and PROTOCOL.md says \
         so), rewrite it with JQJAIL_BLESS=1 cargo test -p jqjail-protocol --test vectors",
        path.display()
    );
}
