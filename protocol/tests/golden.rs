//! Golden bytes: the exact encodings PROTOCOL.md documents. A change here is a protocol
//! change and needs a new protocol version.

use jqjail_protocol::{
    Args, Cost, Encoding, ErrorCode, ErrorReply, Hello, HelloReply, HideCut, HideCutRequest,
    HideListReply, HideListRequest, HideMatch, HidePut, HideSearchReply, Input, Lang,
    LimitOverrides, Limits, OnOversize, Request, Response, RunReply, RunRequest, Tail,
};

fn both(value_bincode: &[u8], value_json: &str, check: impl Fn(Encoding, &[u8])) {
    check(Encoding::Bincode, value_bincode);
    check(Encoding::Json, value_json.as_bytes());
}

/// Checks a request with a tail: its frame is `golden` and the tail is sent raw after it; the
/// frame decodes to the request with the tail pending, and filling it gives the request back.
fn request_with_tail(enc: Encoding, msg: &Request<'_>, golden: &[u8], tail: &[u8]) {
    assert_eq!(enc.encode(msg).unwrap(), golden, "{enc:?}");
    assert_eq!(msg.tail().unwrap().as_bytes(), tail);
    let mut got = enc.decode::<Request<'_>>(golden).unwrap();
    let pending = got.tail_mut().unwrap();
    assert!(!pending.is_filled() || tail.is_empty());
    pending.fill(tail.to_vec()).unwrap();
    assert_eq!(&got, msg);
}

/// As [`request_with_tail`], for a response.
fn response_with_tail(enc: Encoding, msg: &Response, golden: &[u8], tail: &[u8]) {
    assert_eq!(enc.encode(msg).unwrap(), golden, "{enc:?}");
    assert_eq!(msg.tail().unwrap().as_bytes(), tail);
    let mut got = enc.decode::<Response>(golden).unwrap();
    got.tail_mut().unwrap().fill(tail.to_vec()).unwrap();
    assert_eq!(&got, msg);
}

#[test]
fn hello() {
    let msg = Request::Hello(Hello {
        protocol: 2,
        client: "c".into(),
    });
    both(
        &[0x00, 0x02, 0x01, b'c'],
        r#"{"hello":{"protocol":2,"client":"c"}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&msg).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Request<'_>>(golden).unwrap(), msg);
        },
    );
}

#[test]
fn run_request() {
    let input = br#"{"a":1}"#;
    let msg = Request::Run(RunRequest {
        filter: ".a".into(),
        input: Input::Inline(Tail::from(&input[..])),
        lang: Lang::Jq,
        limits: LimitOverrides {
            max_output_bytes: None,
            timeout_ms: Some(300),
            max_depth: None,
        },
        on_oversize: OnOversize::Error,
        args: Args::default(),
        outputs: Default::default(),
    });
    // variant 1, filter ".a", lang Jq, three options: None, Some(300 as varint 0xfb 0x2c 0x01),
    // None; on_oversize Error (0); then Input::Inline (0) with a tail of 7 bytes. The 7 bytes
    // follow the frame, raw.
    // Then the arguments: a map of none, a list of none; then the outputs' form (collapsed).
    let bincode = [
        0x01, 0x02, b'.', b'a', 0x00, 0x00, 0x01, 0xfb, 0x2c, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00,
        0x00, 0x00,
    ];
    both(
        &bincode,
        r#"{"run":{"filter":".a","lang":"jq","limits":{"max_output_bytes":null,"timeout_ms":300,"max_depth":null},"on_oversize":"error","input":{"inline":7},"args":{"named":{},"positional":[]},"outputs":"collapsed"}}"#,
        |enc, golden| request_with_tail(enc, &msg, golden, input),
    );
}

/// A run over a stream of values for `input` and `inputs`: `Input::Values` is variant 2, its
/// tail's length then `null_input`; older clients, which never send it, are unaffected.
#[test]
fn run_request_over_values() {
    let input = b"1 2";
    let msg = Request::Run(RunRequest {
        filter: ".".into(),
        input: Input::Values {
            values: Tail::from(&input[..]),
            null_input: true,
        },
        lang: Lang::Jq,
        limits: LimitOverrides::default(),
        on_oversize: OnOversize::Error,
        args: Args::default(),
        outputs: Default::default(),
    });
    // variant 1, filter ".", lang Jq, three None limits, on_oversize Error; then
    // Input::Values (2): a tail of 3 bytes, null_input true; no arguments; collapsed.
    let bincode = [
        0x01, 0x01, b'.', 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x01, 0x00, 0x00, 0x00,
    ];
    both(
        &bincode,
        r#"{"run":{"filter":".","lang":"jq","limits":{"max_output_bytes":null,"timeout_ms":null,"max_depth":null},"on_oversize":"error","input":{"values":{"values":3,"null_input":true}},"args":{"named":{},"positional":[]},"outputs":"collapsed"}}"#,
        |enc, golden| request_with_tail(enc, &msg, golden, input),
    );
}

#[test]
fn json_run_request_with_optional_fields_left_out() {
    let text = br#"{"run":{"filter":".","input":{"inline":3}}}"#;
    let msg: Request<'_> = Encoding::Json.decode(text).unwrap();
    assert_eq!(
        msg,
        Request::Run(RunRequest {
            filter: ".".into(),
            input: Input::Inline(Tail::pending(3)),
            lang: Lang::Jq,
            limits: LimitOverrides::default(),
            on_oversize: OnOversize::Error,
            args: Args::default(),
            outputs: Default::default(),
        })
    );
}

#[test]
fn a_tail_can_be_as_long_as_a_u64_says_and_the_frame_stays_small() {
    // The frame names the length; nothing is allocated for it by decoding.
    let msg = Request::Run(RunRequest {
        filter: ".".into(),
        input: Input::Inline(Tail::pending(u64::MAX)),
        lang: Lang::Jq,
        limits: LimitOverrides::default(),
        on_oversize: OnOversize::Error,
        args: Args::default(),
        outputs: Default::default(),
    });
    for enc in [Encoding::Bincode, Encoding::Json] {
        let body = enc.encode(&msg).unwrap();
        assert!(body.len() < 240, "{enc:?}: {} bytes", body.len());
        let got = enc.decode::<Request<'_>>(&body).unwrap();
        assert_eq!(got.tail().unwrap().len(), u64::MAX);
    }
}

#[test]
fn hello_reply() {
    let msg = Response::Hello(HelloReply {
        protocol: 2,
        server: "s".into(),
        limits: Limits::default(),
    });
    let bincode = [
        0x00, 0x02, 0x01, b's', // variant, protocol, server
        0xfc, 0x00, 0x00, 0x40, 0x01, // max_input_bytes 20971520 (u32 marker 0xfc)
        0xfc, 0x00, 0x00, 0x01, 0x00, // max_filter_bytes 65536
        0xfb, 0xe8, 0x03, // max_depth 1000 (u16 marker 0xfb)
        0xfc, 0xa0, 0x86, 0x01, 0x00, // max_output_bytes 100000
        0xfb, 0x88, 0x13, // timeout_ms 5000
        0xfc, 0x00, 0x00, 0x00, 0x10, // max_heap_bytes 268435456
    ];
    both(
        &bincode,
        r#"{"hello":{"protocol":2,"server":"s","limits":{"max_input_bytes":20971520,"max_filter_bytes":65536,"max_depth":1000,"max_output_bytes":100000,"timeout_ms":5000,"max_heap_bytes":268435456}}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&msg).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Response>(golden).unwrap(), msg);
        },
    );
}

#[test]
fn run_reply() {
    let msg = Response::Run(RunReply {
        output: "42".into(),
        cost: Cost {
            wall_us: 900,
            cpu_us: 250,
            peak_rss_bytes: 0,
            input_bytes: 7,
            output_bytes: 2,
        },
    });
    // variant 1, a tail of 2 bytes, the cost; then "42" raw after the frame.
    both(
        &[0x01, 0x02, 0xfb, 0x84, 0x03, 0xfa, 0x00, 0x07, 0x02],
        r#"{"run":{"output_bytes":2,"cost":{"wall_us":900,"cpu_us":250,"peak_rss_bytes":0,"input_bytes":7,"output_bytes":2}}}"#,
        |enc, golden| response_with_tail(enc, &msg, golden, b"42"),
    );
}

#[test]
fn error_reply() {
    let msg = Response::Error(ErrorReply::new(ErrorCode::Timeout, "late").with_limit(200, 200));
    both(
        &[
            0x02, 0x04, 0x04, b'l', b'a', b't', b'e', 0x01, 0xc8, 0x01, 0xc8, 0x00, 0x00,
        ],
        r#"{"error":{"code":"TIMEOUT","message":"late","limit":200,"actual":200,"detail":null,"cost":null}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&msg).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Response>(golden).unwrap(), msg);
        },
    );
    // JSON readers may omit the optional fields.
    let short: Response = Encoding::Json
        .decode(br#"{"error":{"code":"TIMEOUT","message":"late"}}"#)
        .unwrap();
    assert_eq!(
        short,
        Response::Error(ErrorReply::new(ErrorCode::Timeout, "late"))
    );
}

#[test]
fn encodings_are_told_apart_by_the_first_byte() {
    let hello = Request::Hello(Hello {
        protocol: 2,
        client: String::new(),
    });
    for enc in [Encoding::Bincode, Encoding::Json] {
        assert_eq!(Encoding::detect(&enc.encode(&hello).unwrap()), enc);
    }
}

#[test]
fn trailing_bytes_are_refused() {
    let mut body = Encoding::Bincode
        .encode(&Request::Hello(Hello {
            protocol: 2,
            client: String::new(),
        }))
        .unwrap();
    body.push(0);
    assert!(Encoding::Bincode.decode::<Request<'_>>(&body).is_err());
}

#[test]
fn run_over_a_hide() {
    let msg = Request::Run(RunRequest {
        filter: ".".into(),
        input: Input::Hide("gh-0123abcd".into()),
        lang: Lang::Jq,
        limits: LimitOverrides::default(),
        on_oversize: OnOversize::Hide,
        args: Args {
            named: [("n".to_string(), "1".to_string())].into(),
            positional: vec![r#""p""#.into()],
        },
        outputs: Default::default(),
    });
    let mut bincode = vec![0x01, 0x01, b'.', 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x0b];
    bincode.extend_from_slice(b"gh-0123abcd");
    // One named argument `n` = `1`, one positional `"p"`.
    bincode.extend_from_slice(&[0x01, 0x01, b'n', 0x01, b'1', 0x01, 0x03, b'"', b'p', b'"']);
    bincode.push(0x00); // outputs: collapsed
    both(
        &bincode,
        r#"{"run":{"filter":".","lang":"jq","limits":{"max_output_bytes":null,"timeout_ms":null,"max_depth":null},"on_oversize":"hide","input":{"hide":"gh-0123abcd"},"args":{"named":{"n":"1"},"positional":["\"p\""]},"outputs":"collapsed"}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&msg).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Request<'_>>(golden).unwrap(), msg);
        },
    );
}

#[test]
fn hide_put() {
    let msg = Request::HidePut(HidePut {
        kind: "k".into(),
        source: "gh".into(),
        meta: [("a".to_string(), "b".to_string())].into(),
        content: Tail::from("[1]"),
    });
    // variant 3; kind, source; a map of one pair; a tail of 3 bytes, sent after the frame.
    let bincode = [
        0x03, 0x01, b'k', 0x02, b'g', b'h', 0x01, 0x01, b'a', 0x01, b'b', 0x03,
    ];
    both(
        &bincode,
        r#"{"hide_put":{"kind":"k","source":"gh","meta":{"a":"b"},"content_bytes":3}}"#,
        |enc, golden| request_with_tail(enc, &msg, golden, b"[1]"),
    );
    // JSON clients may leave out everything but the content's length.
    let short: Request<'_> = Encoding::Json
        .decode(br#"{"hide_put":{"content_bytes":1}}"#)
        .unwrap();
    assert!(matches!(short, Request::HidePut(p) if p.source.is_empty() && p.meta.is_empty()));
}

#[test]
fn hide_cut_request_and_reply() {
    let msg = Request::HideCut(HideCutRequest {
        id: "gh-0123abcd".into(),
        page: 2,
        page_size: Some(64),
        hint: true,
    });
    let mut bincode = vec![0x05, 0x0b];
    bincode.extend_from_slice(b"gh-0123abcd");
    bincode.extend_from_slice(&[0x02, 0x01, 0x40, 0x01]);
    both(
        &bincode,
        r#"{"hide_cut":{"id":"gh-0123abcd","page":2,"page_size":64,"hint":true}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&msg).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Request<'_>>(golden).unwrap(), msg);
        },
    );
    let reply = Response::HideCut(HideCut {
        hide_id: "h-0123abcd".into(),
        page: 1,
        total_pages: 2,
        page_size: 64,
        offset: 0,
        size: 70,
        content: Tail::from(b"ab".to_vec()),
        preface: None,
    });
    let mut bincode = vec![0x06, 0x0a];
    bincode.extend_from_slice(b"h-0123abcd");
    bincode.extend_from_slice(&[0x01, 0x02, 0x40, 0x00, 0x46, 0x02, 0x00]);
    both(
        &bincode,
        r#"{"hide_cut":{"hide_id":"h-0123abcd","page":1,"total_pages":2,"page_size":64,"offset":0,"size":70,"content_bytes":2,"preface":null}}"#,
        |enc, golden| response_with_tail(enc, &reply, golden, b"ab"),
    );
}

#[test]
fn hide_search_reply() {
    let reply = Response::HideSearch(HideSearchReply {
        hide_id: "h-0123abcd".into(),
        matches: vec![HideMatch {
            page: 3,
            offset: 200,
        }],
        truncated: false,
        total_pages: 4,
        page_size: 64,
    });
    let mut bincode = vec![0x07, 0x0a];
    bincode.extend_from_slice(b"h-0123abcd");
    bincode.extend_from_slice(&[0x01, 0x03, 0xc8, 0x00, 0x04, 0x40]);
    both(
        &bincode,
        r#"{"hide_search":{"hide_id":"h-0123abcd","matches":[{"page":3,"offset":200}],"truncated":false,"total_pages":4,"page_size":64}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&reply).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Response>(golden).unwrap(), reply);
        },
    );
}

#[test]
fn binary_content_travels_in_both_encodings() {
    let reply = Response::HideCut(HideCut {
        hide_id: "h-0123abcd".into(),
        page: 1,
        total_pages: 1,
        page_size: 64,
        offset: 0,
        size: 1,
        content: Tail::from(vec![0xff]),
        preface: None,
    });
    for enc in [Encoding::Bincode, Encoding::Json] {
        let frame = enc.encode(&reply).unwrap();
        response_with_tail(enc, &reply, &frame, &[0xff]);
    }
}

#[test]
fn hide_list_pages() {
    let msg = Request::HideList(HideListRequest {
        offset: 100,
        limit: Some(50),
    });
    both(
        &[0x07, 0x64, 0x01, 0x32],
        r#"{"hide_list":{"offset":100,"limit":50}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&msg).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Request<'_>>(golden).unwrap(), msg);
        },
    );
    // JSON clients may leave both out: the first page of 100.
    let first: Request<'_> = Encoding::Json.decode(br#"{"hide_list":{}}"#).unwrap();
    assert_eq!(first, Request::HideList(HideListRequest::default()));
    let reply = Response::HideList(HideListReply {
        entries: Vec::new(),
        total: 150,
        next: Some(150),
    });
    both(
        &[0x08, 0x00, 0x96, 0x01, 0x96],
        r#"{"hide_list":{"entries":[],"total":150,"next":150}}"#,
        |enc, golden| {
            assert_eq!(enc.encode(&reply).unwrap(), golden, "{enc:?}");
            assert_eq!(enc.decode::<Response>(golden).unwrap(), reply);
        },
    );
}

#[test]
fn named_arguments_keep_their_order_and_a_name_given_twice_is_refused() {
    let text = br#"{"run":{"filter":".","input":{"inline":1},"args":{"named":{"z":"1","a":"2"}}}}"#;
    let Request::Run(run) = Encoding::Json.decode::<Request<'_>>(text).unwrap() else {
        panic!("not a run");
    };
    assert_eq!(run.args.named.names().collect::<Vec<_>>(), ["z", "a"]);
    // In bincode the order is the order of the pairs on the wire, too.
    let bytes = Encoding::Bincode
        .encode(&Request::Run(run.clone()))
        .unwrap();
    let Request::Run(again) = Encoding::Bincode.decode::<Request<'_>>(&bytes).unwrap() else {
        panic!("not a run");
    };
    assert_eq!(again.args.named, run.args.named);

    let twice =
        br#"{"run":{"filter":".","input":{"inline":1},"args":{"named":{"a":"1","a":"2"}}}}"#;
    let err = Encoding::Json.decode::<Request<'_>>(twice).unwrap_err();
    assert!(err.to_string().contains("`a` is given twice"), "{err}");
}

#[test]
fn the_shape_language_is_index_2_and_named_shape() {
    assert_eq!(Encoding::Bincode.encode(&Lang::Shape).unwrap(), [0x02]);
    assert_eq!(Encoding::Json.encode(&Lang::Shape).unwrap(), br#""shape""#);
}
