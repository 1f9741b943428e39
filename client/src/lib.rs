//! The jqjail client library: connect to a `jqjaild` socket, run filters, get typed errors.
//! Blocking ([`Client`]) and async ([`AsyncClient`], tokio) flavours speak the same bincode
//! encoding of the protocol.
//!
//! The library never starts a daemon; the `jqjail` command line does that ([`cli`], feature
//! `cli`), because it knows where the daemon's executable is.

mod asynchronous;
mod blocking;
#[cfg(feature = "cli")]
pub mod cli;
pub mod discover;
pub mod hide_buffer;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod paths;
pub mod tools;
pub mod trust;

pub use asynchronous::AsyncClient;
pub use blocking::Client;
pub use hide_buffer::HideBuffer;
pub use jqjail_protocol::hide::{
    ArrayPlace, ElementsLeftOut, End, HideEnds, HideEndsRequest, JsonPlace, LeftOut, PageAt, Pages,
};
pub use jqjail_protocol::{
    Args, Cost, ErrorCode, ErrorReply, HiddenReply, HideContent, HideCut, HideEntry, HideListReply,
    HideMatch, HidePage, HidePageRequest, HidePutReply, HideSearchReply, HideSearchRequest,
    HideUsageReply, Lang, LimitOverrides, Limits, OnOversize, Outputs, StatsReply, Tail,
};

use jqjail_protocol::{
    CodecError, Encoding, FrameError, Hello, HelloReply, PROTOCOL_VERSION, Request, Response,
};
use std::path::PathBuf;

/// The client name sent in the handshake.
pub const CLIENT_NAME: &str = concat!("jqjail-client/", env!("CARGO_PKG_VERSION"));

pub use jqjail_protocol::frame::MAX_RESPONSE_FRAME_BYTES;

/// A successful run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReply {
    /// The answer as JSON text: one output → that value, several → an array, none → `null`.
    pub output: String,
    /// What the run cost.
    pub cost: Cost,
}

/// Anything that can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon answers at this path.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The process listening on the socket is not one this client trusts with its data;
    /// nothing was sent.
    #[error(
        "refusing the daemon at {path}: it is run by uid {uid}, not by this user, root or a uid of ${env} (trusted: {trusted:?}); another user may have put that socket there",
        env = trust::DAEMON_UIDS_ENV
    )]
    Untrusted {
        /// The socket path.
        path: PathBuf,
        /// The uid that listens on it.
        uid: u32,
        /// The uids this client trusts.
        trusted: Vec<u32>,
    },
    /// The connection failed mid-exchange.
    #[error("connection to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    /// The daemon sent something this client does not understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The daemon answered with an error: the request was understood and failed.
    #[error("{0}")]
    Server(Box<ErrorReply>),
    /// The handshake failed: the daemon refused the connection (its answer is inside), or it
    /// broke. Only a handshake read with a client's first call answers so; `Client::connect`
    /// returns the inner error itself.
    #[error("{0}")]
    Handshake(Box<ClientError>),
    /// No daemon could be found or started ([`Client::connect_default`]): the message names
    /// where it looked and what to do.
    #[error("no jqjail daemon: {0}")]
    Unavailable(String),
    /// A [`HideBuffer`] was asked for its latest hide before one was stored or loaded.
    #[error("no hide has been stored in or loaded into this buffer")]
    NoHide,
}

impl ClientError {
    /// The stable code of a server error, `None` for connection and protocol failures.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(e) => Some(e.code),
            ClientError::Handshake(e) => e.code(),
            _ => None,
        }
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Io(io) => ClientError::Io(io),
            FrameError::Closed => ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )),
            other => ClientError::Protocol(other.to_string()),
        }
    }
}

impl From<CodecError> for ClientError {
    fn from(e: CodecError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

/// Per-request options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Limits tighter than the server's.
    pub limits: LimitOverrides,
    /// The filter's language (jq by default).
    pub lang: Lang,
    /// What to do with output over the output limit (fail, by default).
    pub on_oversize: OnOversize,
    /// The answer's form: collapsed (the default) or one output per line.
    pub outputs: Outputs,
}

fn hello() -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        client: CLIENT_NAME.to_string(),
    }
}

/// What a client knows of the server before the handshake completes.
fn no_server_yet() -> HelloReply {
    HelloReply {
        protocol: 0,
        server: String::new(),
        limits: Limits::default(),
    }
}

/// A run's answer when its output may be kept as a hide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The output, within the output limit.
    Output(RunReply),
    /// The output was over the limit and is stored as a hide; here is its first page.
    Hidden(Box<HiddenReply>),
}

/// Where a run's input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// JSON text sent with the request.
    Inline(&'a [u8]),
    /// A hide of this tenant, read by the daemon off its disk.
    Hide(&'a str),
    /// Zero or more JSON texts sent with the request, read by `input` and `inputs`: the
    /// filter runs once on `null` (`null_input`, jq's `-n`), else once per value they left
    /// unread.
    Values {
        /// The texts.
        values: &'a [u8],
        /// jq's `-n`.
        null_input: bool,
    },
}

/// One request (its tail, if any, borrowed from the caller's buffer) and the answer it
/// expects; shared by both clients.
pub(crate) struct Call<'a, T> {
    pub(crate) request: Request<'a>,
    pub(crate) expect: Expect<T>,
}

impl<T> Call<'_, T> {
    /// The request's whole frame (prefix and body), and the tail to send after it.
    pub(crate) fn encode(&self) -> Result<(Vec<u8>, &[u8]), ClientError> {
        let body = Encoding::Bincode.encode(&self.request)?;
        let mut frame = jqjail_protocol::frame::prefix(body.len())?.to_vec();
        frame.extend_from_slice(&body);
        Ok((frame, self.request.tail().map_or(&[][..], Tail::as_bytes)))
    }
}

/// How to pick an answer out of a response.
pub(crate) struct Expect<T> {
    pick: fn(Response) -> Result<T, Box<Response>>,
    what: &'static str,
}

impl<T> Expect<T> {
    pub(crate) fn answer(&self, response: Response) -> Result<T, ClientError> {
        match (self.pick)(response).map_err(|r| *r) {
            Ok(t) => Ok(t),
            Err(Response::Error(e)) => Err(ClientError::Server(Box::new(e))),
            Err(other) => Err(ClientError::Protocol(format!(
                "expected {}, got {other:?}",
                self.what
            ))),
        }
    }
}

/// The longest response tail a client accepts, whatever the daemon's hello says: 1 GiB.
pub const MAX_RESPONSE_TAIL_BYTES: u64 = 1 << 30;

/// The longest response tail a client accepts from a server with `limits`: a hide (at most
/// the input limit) or a run's output (at most the output limit), and never more than
/// [`MAX_RESPONSE_TAIL_BYTES`]. Checked before reading; the tail is then read as it comes, so
/// a daemon that claims more than it sends does not make the client allocate the claim.
pub(crate) fn max_tail(limits: &Limits) -> u64 {
    limits
        .max_input_bytes
        .max(limits.max_output_bytes)
        .min(MAX_RESPONSE_TAIL_BYTES)
}

/// Bytes a tail's buffer starts with; it grows as the bytes come.
pub(crate) const TAIL_FIRST_CHUNK: u64 = 1 << 20;

/// A full listing holds at most this many hides (the store's per-tenant cap); a daemon whose
/// pages go on past it, or go backwards, is not followed.
pub(crate) const MAX_LISTED: usize = 10_000;

/// The offset of the page after one that ended at `next`, or `None` after the last; a page
/// that does not move forward, or points past the total, is the daemon's fault.
pub(crate) fn next_page(
    at: u64,
    page: &HideListReply,
    listed: usize,
) -> Result<Option<u64>, ClientError> {
    match page.next {
        None => Ok(None),
        Some(next) if next > at && next <= page.total && listed < MAX_LISTED => Ok(Some(next)),
        Some(next) => Err(ClientError::Protocol(format!(
            "the daemon's list page from {at} points to {next} of {} after {listed} hides",
            page.total
        ))),
    }
}

/// Decodes a response frame; returns it and the length of the tail that follows it, checked
/// against `max_tail`.
pub(crate) fn decode_response(frame: &[u8], max_tail: u64) -> Result<(Response, u64), ClientError> {
    let response: Response = Encoding::Bincode.decode(frame)?;
    let len = response.tail().map_or(0, Tail::len);
    if len > max_tail {
        return Err(ClientError::Protocol(format!(
            "the daemon announced a tail of {len} bytes, over the {max_tail} bytes its limits allow"
        )));
    }
    Ok((response, len))
}

/// Puts the tail read after a response's frame in place.
pub(crate) fn fill(mut response: Response, bytes: Vec<u8>) -> Response {
    if let Some(tail) = response.tail_mut() {
        // Cannot fail: the caller read exactly the announced length.
        let _ = tail.fill(bytes);
    }
    response
}

/// The calls both clients make, built once.
/// What a daemon's head and tail must be before it is trusted: the head from byte 0, the
/// tail to the hide's end, what is left out between them, both ends the content, and the
/// elements left out in order and in their array.
pub(crate) fn check_ends(e: &HideEnds) -> Result<(), String> {
    let content = e.content.as_bytes().len() as u64;
    let tail = e.tail.as_ref().map_or(0, |t| t.length);
    let left = e.left_out.as_ref().map_or(0, |l| l.bytes);
    let sum = [e.head.length, left, tail]
        .into_iter()
        .try_fold(0u64, |a, b| a.checked_add(b));
    let fits = e.head.offset == 0
        && e.head.length.checked_add(tail) == Some(content)
        && sum == Some(e.size)
        && e.left_out
            .as_ref()
            .is_none_or(|l| l.offset == e.head.length)
        && e.tail
            .as_ref()
            .is_none_or(|t| t.offset == e.head.length + left)
        && (e.tail.is_some() || e.left_out.is_none())
        && e.left_out
            .as_ref()
            .and_then(|l| l.elements.as_ref())
            .is_none_or(|el| el.from <= el.to && el.length.is_none_or(|n| el.to < n));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "the daemon's head and tail of {} do not make the hide (head {:?}, left out {:?}, tail {:?}, {content} bytes of content, size {})",
            e.hide_id, e.head, e.left_out, e.tail, e.size
        ))
    }
}

pub(crate) mod calls {
    use super::*;
    use jqjail_protocol::{HideCutRequest, HideListRequest, HidePut, HideRef, Input, RunRequest};
    use std::collections::BTreeMap;

    macro_rules! pick {
        ($variant:path) => {
            |r| match r {
                $variant(x) => Ok(x),
                other => Err(Box::new(other)),
            }
        };
    }

    pub(crate) fn hello() -> Call<'static, HelloReply> {
        Call {
            request: Request::Hello(super::hello()),
            expect: Expect {
                pick: pick!(Response::Hello),
                what: "hello",
            },
        }
    }

    pub(crate) fn stats() -> Call<'static, StatsReply> {
        Call {
            request: Request::Stats,
            expect: Expect {
                pick: pick!(Response::Stats),
                what: "stats",
            },
        }
    }

    /// A run; an inline input is the request's tail, sent from the caller's buffer.
    /// A shape request: a run in the `shape` language, with no filter.
    pub(crate) fn shape(source: Source<'_>) -> Call<'_, Answer> {
        let options = RunOptions {
            lang: Lang::Shape,
            ..RunOptions::default()
        };
        run("", source, &options, &Args::default())
    }

    pub(crate) fn run<'a>(
        filter: &str,
        source: Source<'a>,
        options: &RunOptions,
        args: &Args,
    ) -> Call<'a, Answer> {
        Call {
            request: Request::Run(RunRequest {
                filter: filter.into(),
                lang: options.lang,
                limits: options.limits,
                on_oversize: options.on_oversize,
                args: args.clone(),
                outputs: options.outputs,
                input: match source {
                    Source::Inline(input) => Input::Inline(Tail::from(input)),
                    Source::Hide(id) => Input::Hide(id.into()),
                    Source::Values { values, null_input } => Input::Values {
                        values: Tail::from(values),
                        null_input,
                    },
                },
            }),
            expect: Expect {
                pick: |r| match r {
                    // A run's output is JSON text; anything else is the daemon's fault.
                    Response::Run(x) => match String::from_utf8(x.output.into_bytes()) {
                        Ok(output) => Ok(Answer::Output(RunReply {
                            output,
                            cost: x.cost,
                        })),
                        Err(e) => Err(Box::new(Response::Error(ErrorReply::new(
                            ErrorCode::Internal,
                            format!("the daemon's output is not UTF-8 ({e})"),
                        )))),
                    },
                    Response::Hidden(x) => Ok(Answer::Hidden(Box::new(x))),
                    other => Err(Box::new(other)),
                },
                what: "a run result",
            },
        }
    }

    /// A put; the content is the request's tail, sent from the caller's buffer.
    pub(crate) fn put<'a>(
        kind: &str,
        source: &str,
        content: &'a [u8],
        meta: &BTreeMap<String, String>,
    ) -> Call<'a, HidePutReply> {
        Call {
            request: Request::HidePut(HidePut {
                kind: kind.into(),
                source: source.into(),
                meta: meta.clone(),
                content: Tail::from(content),
            }),
            expect: Expect {
                pick: pick!(Response::HidePut),
                what: "a stored hide",
            },
        }
    }

    pub(crate) fn get(id: &str) -> Call<'static, HideContent> {
        Call {
            request: Request::HideGet(HideRef { id: id.into() }),
            expect: Expect {
                pick: pick!(Response::HideContent),
                what: "a hide's content",
            },
        }
    }

    pub(crate) fn cut(
        id: &str,
        page: u64,
        page_size: Option<u64>,
        hint: bool,
    ) -> Call<'static, HideCut> {
        Call {
            request: Request::HideCut(HideCutRequest {
                id: id.into(),
                page,
                page_size,
                hint,
            }),
            expect: Expect {
                pick: pick!(Response::HideCut),
                what: "a page",
            },
        }
    }

    pub(crate) fn page(request: HidePageRequest) -> Call<'static, HidePage> {
        Call {
            request: Request::HidePage(request),
            expect: Expect {
                pick: pick!(Response::HidePage),
                what: "a page",
            },
        }
    }

    pub(crate) fn ends(request: HideEndsRequest) -> Call<'static, Box<HideEnds>> {
        Call {
            request: Request::HideEnds(request),
            expect: Expect {
                pick: pick!(Response::HideEnds),
                what: "a head and tail",
            },
        }
    }

    pub(crate) fn search(request: HideSearchRequest) -> Call<'static, HideSearchReply> {
        Call {
            request: Request::HideSearch(request),
            expect: Expect {
                pick: pick!(Response::HideSearch),
                what: "search results",
            },
        }
    }

    pub(crate) fn list(offset: u64, limit: Option<u32>) -> Call<'static, HideListReply> {
        Call {
            request: Request::HideList(HideListRequest { offset, limit }),
            expect: Expect {
                pick: pick!(Response::HideList),
                what: "a list of hides",
            },
        }
    }

    pub(crate) fn delete(id: &str) -> Call<'static, HideEntry> {
        Call {
            request: Request::HideDelete(HideRef { id: id.into() }),
            expect: Expect {
                pick: pick!(Response::HideEntry),
                what: "the deleted hide",
            },
        }
    }

    pub(crate) fn usage() -> Call<'static, HideUsageReply> {
        Call {
            request: Request::HideUsage,
            expect: Expect {
                pick: pick!(Response::HideUsage),
                what: "hide usage",
            },
        }
    }
}

/// The answer of a plain run: an output, or (only when asked for) a hide.
pub(crate) fn only_output(answer: Answer) -> Result<RunReply, ClientError> {
    match answer {
        Answer::Output(reply) => Ok(reply),
        Answer::Hidden(h) => Err(ClientError::Protocol(format!(
            "the output was kept as hide {}; call run_answer to receive hides",
            h.entry.id
        ))),
    }
}

#[cfg(test)]
mod ends_tests {
    use super::*;

    fn ends() -> HideEnds {
        HideEnds {
            hide_id: "x-00000000".into(),
            size: 100,
            page_size: 40,
            pages: Pages::Bytes,
            head: End {
                offset: 0,
                length: 20,
                json: None,
            },
            tail: Some(End {
                offset: 80,
                length: 20,
                json: None,
            }),
            left_out: Some(LeftOut {
                offset: 20,
                bytes: 60,
                first: None,
                last: None,
                elements: None,
            }),
            not_json: None,
            content: Tail::from(vec![b'a'; 40]),
            preface: None,
        }
    }

    /// A lying daemon's head and tail is refused, never sliced or summed past its bounds
    /// (an attacker's review found the client trusted every field).
    #[test]
    fn a_head_and_tail_that_does_not_make_the_hide_is_refused() {
        assert!(check_ends(&ends()).is_ok());
        let lies: [fn(&mut HideEnds); 7] = [
            |e| e.head.length = 41,
            |e| e.head.offset = 1,
            |e| e.tail.as_mut().unwrap().offset = u64::MAX,
            |e| e.left_out.as_mut().unwrap().bytes = u64::MAX,
            |e| e.size = 99,
            |e| e.tail = None,
            |e| {
                e.left_out.as_mut().unwrap().elements = Some(ElementsLeftOut {
                    array: "$".into(),
                    from: 5,
                    to: 3,
                    length: None,
                })
            },
        ];
        for (n, lie) in lies.into_iter().enumerate() {
            let mut e = ends();
            lie(&mut e);
            assert!(check_ends(&e).is_err(), "lie {n} was taken");
        }
    }
}
