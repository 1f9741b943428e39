//! `jqjail hide put|get|cut|jump|ends|search|list|rm|usage`: the hide store from a shell.
//!
//! Every subcommand but `get` prints one JSON value on stdout; `get` writes the hide's raw
//! bytes. A search that finds nothing prints its (empty) result and exits with status 1, like
//! grep, so scripts can branch on it.

use super::inputs::read_inputs;
use super::run::write_out;
use super::{Exit, Handshake, connected, failed, report};
use clap::{Parser, Subcommand};
use jqjail_protocol::hide::{PageAt, Pages};
use jqjail_protocol::{HideEnds, HideEndsRequest, HidePageRequest, HideSearchRequest};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// jqjail hide: keep oversized outputs in the daemon's hide store and read them page by page.
#[derive(Debug, Parser)]
#[command(name = "jqjail hide")]
pub(super) struct HideArgs {
    /// The daemon's socket (default as for running a filter).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    op: Op,
}

#[derive(Debug, Subcommand)]
enum Op {
    /// Store FILE (or stdin) as a hide; prints its entry.
    Put {
        /// Where it came from (its letters and digits start the ID).
        #[arg(long, default_value = "")]
        source: String,
        /// What kind of content it is.
        #[arg(long, default_value = "cli")]
        kind: String,
        /// A `key=value` pair to keep with it (repeatable).
        #[arg(long = "meta", value_parser = key_value)]
        meta: Vec<(String, String)>,
        /// The file; standard input if absent or `-`.
        file: Option<PathBuf>,
    },
    /// Write a hide's bytes to stdout.
    Get {
        /// The hide's ID.
        id: String,
    },
    /// Print one page of a hide.
    Cut {
        /// The hide's ID.
        id: String,
        /// The page, from 1.
        page: u64,
        /// Bytes per page (64 to 1048576; default 16384).
        #[arg(long)]
        page_size: Option<u64>,
        /// Add the reflection hint for a model.
        #[arg(long)]
        hint: bool,
        /// JSON pages: pages end between values and name the paths they hold (a hide that is
        /// not one JSON value is cut in bytes, and the answer says why).
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON page holding the value at PATH.
    Jump {
        /// The hide's ID.
        id: String,
        /// The value's path: `$[130].labels`, `.[130].labels` or `[130,"labels"]`.
        path: String,
        /// Bytes per page (64 to 1048576; default 16384).
        #[arg(long)]
        page_size: Option<u64>,
        /// Add the reflection hint for a model.
        #[arg(long)]
        hint: bool,
    },
    /// Print a hide's head and tail: its beginning and its end, each half the page size, and
    /// what lies between them.
    Ends {
        /// The hide's ID.
        id: String,
        /// Bytes of both ends together (128 to 1048576; default 16384).
        #[arg(long)]
        page_size: Option<u64>,
        /// Add the reflection hint for a model.
        #[arg(long)]
        hint: bool,
    },
    /// Find every occurrence of QUERY; exit status 1 when there is none.
    Search {
        /// The hide's ID.
        id: String,
        /// The text to find, literally.
        query: String,
        /// Match regardless of case.
        #[arg(long, short = 'i')]
        ignore_case: bool,
        /// The page size the reported pages refer to (default 16384).
        #[arg(long)]
        page_size: Option<u64>,
        /// Report at most this many matches (default 100, at most 10000).
        #[arg(long)]
        max_matches: Option<u32>,
    },
    /// List this user's hides, newest first.
    List,
    /// Delete a hide.
    Rm {
        /// The hide's ID.
        id: String,
    },
    /// Bytes and hides held, and the quota.
    Usage,
}

fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{text}` is not key=value"))
}

pub(super) fn main(args: HideArgs) -> Exit {
    let mut client = match connected(args.socket.as_deref(), Handshake::Awaited) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let printed = match args.op {
        Op::Put {
            source,
            kind,
            meta,
            file,
        } => {
            let files: Vec<_> = file.iter().map(|f| f.clone().into_os_string()).collect();
            let content = match read_inputs(&files, client.limits().max_input_bytes) {
                Ok(bytes) => bytes,
                Err((code, message)) => {
                    report(code, &message);
                    return Exit::Input;
                }
            };
            let meta: BTreeMap<String, String> = meta.into_iter().collect();
            client.hide_put(&kind, &source, &content, &meta).map(|put| {
                let mut v = json!(put.entry);
                v["created"] = json!(put.created);
                v["evicted"] = json!(put.evicted);
                print_json(&v)
            })
        }
        Op::Get { id } => client
            .hide_get(&id)
            .map(|got| write_out(got.content.as_bytes())),
        Op::Cut {
            id,
            page,
            page_size,
            hint,
            json,
        } => match json {
            false => client
                .hide_cut(&id, page, page_size, hint)
                .map(|cut| print_page(&cut, cut.content.as_bytes(), &id)),
            true => client
                .hide_page(page_request(&id, PageAt::Page(page), page_size, hint))
                .map(|p| print_page(&p, p.content.as_bytes(), &id)),
        },
        Op::Jump {
            id,
            path,
            page_size,
            hint,
        } => client
            .hide_page(page_request(&id, PageAt::Path(path), page_size, hint))
            .map(|p| print_page(&p, p.content.as_bytes(), &id)),
        Op::Ends {
            id,
            page_size,
            hint,
        } => client
            .hide_ends(HideEndsRequest {
                id: id.clone(),
                page_size,
                hint,
                max_path_bytes: None,
            })
            .map(|ends| match ends_json(&ends) {
                Some(v) => print_json(&v),
                None => {
                    report(
                        "NOT_TEXT",
                        &format!("an end of {id} is not UTF-8 text; use `jqjail hide get`"),
                    );
                    Exit::Input
                }
            }),
        Op::Search {
            id,
            query,
            ignore_case,
            page_size,
            max_matches,
        } => client
            .hide_search(HideSearchRequest {
                id,
                query,
                ignore_case,
                page_size,
                max_matches,
            })
            .map(|found| {
                let none = found.matches.is_empty();
                let mut v = json!(found);
                v["found"] = json!(!none);
                match print_json(&v) {
                    Exit::Success if none => Exit::NoMatch,
                    other => other,
                }
            }),
        Op::List => client
            .hide_list()
            .map(|entries| print_json(&json!(entries))),
        Op::Rm { id } => client.hide_delete(&id).map(|e| print_json(&json!(e))),
        Op::Usage => client.hide_usage().map(|u| print_json(&json!(u))),
    };
    printed.unwrap_or_else(failed)
}

fn page_request(id: &str, at: PageAt, page_size: Option<u64>, hint: bool) -> HidePageRequest {
    HidePageRequest {
        id: id.into(),
        at,
        page_size,
        hint,
        pages: Pages::Json,
        max_path_bytes: None,
    }
}

/// Prints a page (a `hide_cut` or a `hide_page`, whose bytes are `content`), or says it is
/// not text.
fn print_page(page: &impl serde::Serialize, content: &[u8], id: &str) -> Exit {
    match page_json(page, content) {
        Some(v) => print_json(&v),
        None => {
            report(
                "NOT_TEXT",
                &format!("a page of {id} is not UTF-8 text; use `jqjail hide get`"),
            );
            Exit::Input
        }
    }
}

/// A page as the CLI prints it: its fields, with `content` the page's text (the protocol
/// sends it as the message's tail) and `preface` only when asked for; `None` for a page that is
/// not UTF-8 text.
pub(super) fn page_json(page: &impl serde::Serialize, content: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(content).ok()?;
    let mut v = serde_json::to_value(page).ok()?;
    let fields = v.as_object_mut()?;
    fields.remove("content_bytes");
    fields.insert("content".into(), Value::String(text.to_string()));
    if fields.get("preface").is_some_and(Value::is_null) {
        fields.remove("preface");
    }
    Some(v)
}

/// A head and tail as the CLI prints it: its fields, each end with its `content` as text.
fn ends_json(ends: &HideEnds) -> Option<Value> {
    let bytes = ends.content.as_bytes();
    let head = (ends.head.length as usize).min(bytes.len());
    let (head_text, tail_text) = (
        std::str::from_utf8(&bytes[..head]).ok()?,
        std::str::from_utf8(&bytes[head..]).ok()?,
    );
    let mut v = serde_json::to_value(ends).ok()?;
    let fields = v.as_object_mut()?;
    fields.remove("content_bytes");
    if fields.get("preface").is_some_and(Value::is_null) {
        fields.remove("preface");
    }
    fields
        .get_mut("head")?
        .as_object_mut()?
        .insert("content".into(), json!(head_text));
    if let Some(tail) = fields.get_mut("tail").and_then(Value::as_object_mut) {
        tail.insert("content".into(), json!(tail_text));
    }
    Some(v)
}

fn print_json(value: &Value) -> Exit {
    let mut text = serde_json::to_string(value).unwrap_or_default();
    text.push('\n');
    write_out(text.as_bytes())
}
