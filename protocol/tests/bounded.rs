//! Declared lengths are never trusted: every string, byte string and map of every message that
//! crosses a trust boundary is given a declared length of 2^44 bytes, and decoding must fail
//! with an error instead of allocating 16 TiB (which aborts the process).

use jqjail_protocol::worker::{Outcome, Reply, WorkerError};
use jqjail_protocol::{
    Args, Encoding, ErrorCode, Hello, HideCutRequest, HidePut, HideRef, HideSearchRequest, Input,
    Lang, LimitOverrides, OnOversize, Request, Response, RunRequest, Tail,
};
use std::collections::BTreeMap;

/// The marker every string field of the samples holds; its bincode form is a one-byte length
/// (4) and the four letters.
const MARK: &str = "MARK";

/// bincode's varint for 2^44: the u64 marker 0xFD and eight little-endian bytes.
fn huge_len() -> Vec<u8> {
    let mut v = vec![0xFD];
    v.extend_from_slice(&(1u64 << 44).to_le_bytes());
    v
}

/// Every encoding of `message` with one marked length replaced by 2^44, with and without the
/// bytes that followed it.
fn mutants(body: &[u8]) -> Vec<Vec<u8>> {
    let needle = [&[MARK.len() as u8][..], MARK.as_bytes()].concat();
    let mut out = Vec::new();
    for at in 0..body.len().saturating_sub(needle.len() - 1) {
        if body[at..].starts_with(&needle) {
            let mut long = body[..at].to_vec();
            long.extend(huge_len());
            out.push(long.clone());
            long.extend_from_slice(&body[at + 1..]);
            out.push(long);
        }
    }
    out
}

fn requests() -> Vec<Request<'static>> {
    let meta: BTreeMap<String, String> = [(MARK.to_string(), MARK.to_string())].into();
    vec![
        Request::Hello(Hello {
            protocol: 2,
            client: MARK.into(),
        }),
        Request::Run(RunRequest {
            filter: MARK.into(),
            lang: Lang::Jq,
            limits: LimitOverrides::default(),
            on_oversize: OnOversize::Error,
            input: Input::Inline(Tail::from(MARK)),
            args: Args {
                named: [(MARK.to_string(), MARK.to_string())].into(),
                positional: vec![MARK.into()],
            },
            outputs: Default::default(),
        }),
        Request::Run(RunRequest {
            filter: MARK.into(),
            lang: Lang::Path,
            limits: LimitOverrides::default(),
            on_oversize: OnOversize::Hide,
            input: Input::Hide(MARK.into()),
            args: Args::default(),
            outputs: Default::default(),
        }),
        Request::HidePut(HidePut {
            kind: MARK.into(),
            source: MARK.into(),
            meta,
            content: Tail::from(MARK),
        }),
        Request::HideGet(HideRef { id: MARK.into() }),
        Request::HideCut(HideCutRequest {
            id: MARK.into(),
            page: 1,
            page_size: None,
            hint: false,
        }),
        Request::HideSearch(HideSearchRequest {
            id: MARK.into(),
            query: MARK.into(),
            ignore_case: false,
            page_size: None,
            max_matches: None,
        }),
        Request::HideDelete(HideRef { id: MARK.into() }),
    ]
}

#[test]
fn a_huge_declared_length_in_any_request_field_is_an_error() {
    let mut tried = 0;
    for request in requests() {
        let body = Encoding::Bincode.encode(&request).unwrap();
        let cases = mutants(&body);
        assert!(!cases.is_empty(), "no marked field in {request:?}");
        for case in cases {
            assert!(
                Encoding::Bincode.decode::<Request<'_>>(&case).is_err(),
                "{request:?} with a 2^44 length decoded"
            );
            tried += 1;
        }
    }
    // Hello 1, run 1 + 3 (its arguments' name, value, positional value) + 2, put 4, get, cut,
    // search 2, delete: each with and without what followed the length. (Inputs and
    // contents are tails: a length, not a string.)
    assert_eq!(tried, 2 * 16);
}

#[test]
fn a_huge_tail_length_decodes_as_a_number_and_allocates_nothing() {
    // The server reads a tail only after checking its length against the input limit.
    let mut body = vec![0x01, 0x01, b'.', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00];
    body.extend(huge_len());
    body.extend([0x00, 0x00, 0x00]); // no arguments, collapsed outputs
    let request = Encoding::Bincode.decode::<Request<'_>>(&body).unwrap();
    assert_eq!(request.tail().map(Tail::len), Some(1 << 44));
}

#[test]
fn the_exact_eleven_byte_hello_of_the_report_is_an_error() {
    let mut frame = vec![0x00, 0x01];
    frame.extend(huge_len());
    assert_eq!(frame.len(), 11);
    assert!(Encoding::Bincode.decode::<Request<'_>>(&frame).is_err());
}

#[test]
fn a_worker_reply_claiming_a_huge_output_is_an_error() {
    for reply in [
        Reply {
            outcome: Outcome::Output(MARK.into()),
            cpu_us: 1,
            peak_rss_bytes: 2,
        },
        Reply {
            outcome: Outcome::Error(WorkerError {
                code: ErrorCode::RuntimeError,
                message: MARK.into(),
                limit: None,
                actual: None,
            }),
            cpu_us: 1,
            peak_rss_bytes: 2,
        },
    ] {
        let body = Encoding::Bincode.encode(&reply).unwrap();
        for case in mutants(&body) {
            assert!(Encoding::Bincode.decode::<Reply>(&case).is_err());
        }
    }
}

#[test]
fn a_response_claiming_a_huge_string_is_an_error() {
    // What a client reads from a daemon it has not yet verified, or a hostile one.
    let reply = Response::Error(jqjail_protocol::ErrorReply::new(
        ErrorCode::InvalidRequest,
        MARK,
    ));
    let body = Encoding::Bincode.encode(&reply).unwrap();
    let cases = mutants(&body);
    assert_eq!(cases.len(), 2);
    for case in cases {
        assert!(Encoding::Bincode.decode::<Response>(&case).is_err());
    }
}

#[test]
fn huge_sequence_lengths_are_errors_too() {
    // A stats reply's outcome list and a hide list declare element counts, not byte counts.
    for variant in [3u8, 8] {
        let mut body = vec![variant, 0];
        body.extend(huge_len());
        assert!(Encoding::Bincode.decode::<Response>(&body).is_err());
    }
}

#[test]
fn a_put_never_holds_more_than_sixty_five_meta_pairs() {
    // bincode: variant 3 (hide_put), kind "", source "", then a map declaring `declared`
    // pairs (varint 0xFC + u32), of which 1,000 follow, each two short strings.
    let put = |declared: u32| {
        let mut body = vec![3u8, 0, 0, 0xFC];
        body.extend_from_slice(&declared.to_le_bytes());
        for i in 0..1000u32 {
            body.extend_from_slice(&[4]);
            body.extend_from_slice(format!("{i:04}").as_bytes());
            body.extend_from_slice(&[0]);
        }
        body.extend_from_slice(&[0]); // content: an empty tail
        body
    };
    // A million declared and a thousand sent: the bytes run out, the map never grew.
    assert!(
        Encoding::Bincode
            .decode::<Request<'_>>(&put(1 << 20))
            .is_err()
    );
    // A thousand sent: the request decodes with the first 65, enough to refuse it (as
    // `INVALID_REQUEST`, keeping the connection) for naming more than 64.
    let meta_len = |r: Request<'_>| match r {
        Request::HidePut(p) => p.meta.len(),
        other => panic!("{other:?}"),
    };
    let decoded = Encoding::Bincode.decode::<Request<'_>>(&put(1000)).unwrap();
    assert_eq!(meta_len(decoded), 65);
    // JSON alike.
    let put_with = |n: usize| {
        let pairs: Vec<String> = (0..n).map(|i| format!(r#""k{i}":"v""#)).collect();
        format!(
            r#"{{"hide_put":{{"meta":{{{}}},"content_bytes":0}}}}"#,
            pairs.join(",")
        )
    };
    let json_len = |n: usize| {
        let text = put_with(n);
        meta_len(
            Encoding::Json
                .decode::<Request<'_>>(text.as_bytes())
                .unwrap(),
        )
    };
    assert_eq!(json_len(64), 64);
    assert_eq!(json_len(65), 65);
    assert_eq!(json_len(1000), 65);
    // A key given twice does not decode (a map would keep one, and hide the count).
    let twice = r#"{"hide_put":{"meta":{"a":"1","a":"2"},"content_bytes":0}}"#;
    let e = Encoding::Json
        .decode::<Request<'_>>(twice.as_bytes())
        .unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
}
