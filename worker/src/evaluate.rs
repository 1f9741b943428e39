//! The evaluation of one job, in-process: compile, check and parse the input, run the filter,
//! write the output. What a worker does between reading its job and replying, and what tests
//! and the benchmark call to evaluate exactly as a worker does.

use crate::engine::{Engine, EvalError, RunInput};
use crate::json::ScanError;
use crate::value::{self, Refusal};
use bytes::Bytes;
use jqjail_protocol::worker::{Inputs, Job};
use jqjail_protocol::{ErrorCode, Lang};

/// Compiles, checks the input, parses it and runs the filter: the whole evaluation of one job.
/// Public so that tests and the benchmark evaluate in-process exactly as a worker does.
///
/// The parsed input shares `input`'s bytes (see [`crate::value`]).
///
/// The parsed input is deliberately never freed: a worker exits right after replying, and
/// freeing a parsed 20 MiB document costs about 300 ms with glibc malloc (measured on this
/// project's machine). A long-lived caller leaks each input's parsed form.
pub fn evaluate(engine: &Engine, job: &Job, input: &Bytes) -> Result<String, EvalError> {
    evaluate_with(engine, job, input, std::mem::forget)
}

/// [`evaluate`], handing the parsed input to `keep` instead of leaking it: the benchmark
/// frees it after its timer stops, so that its floor neither pays for the free nor grows.
pub fn evaluate_with(
    engine: &Engine,
    job: &Job,
    input: &Bytes,
    keep: impl FnOnce(jaq_json::Val),
) -> Result<String, EvalError> {
    if let Inputs::Values { null_input } = job.inputs {
        return evaluate_values(engine, job, input, null_input, keep);
    }
    match job.lang {
        Lang::Jq if job.args.is_empty() => {
            let filter = engine.compile(&job.filter)?;
            let value = parse_input(input, job.max_depth)?;
            // The run gets a reference-counted handle; the original keeps the document alive
            // past the end of the run, so that nothing frees it.
            let result = engine.run_with(
                &filter,
                RunInput::One(value.clone()),
                crate::engine::no_args(),
                Vec::new(),
                job.outputs,
                job.max_output_bytes,
            );
            keep(value);
            result
        }
        Lang::Jq => {
            let names: Vec<&str> = job.args.named.names().collect();
            let filter = engine.compile_with(&job.filter, &names)?;
            // The input first: its parse takes the worker's arena, which is for the input.
            let value = parse_input(input, job.max_depth)?;
            let (args, named) = parse_args(&job.args, job.max_depth)?;
            let result = engine.run_with(
                &filter,
                RunInput::One(value.clone()),
                args,
                named,
                job.outputs,
                job.max_output_bytes,
            );
            keep(value);
            result
        }
        Lang::Path if !job.args.is_empty() => Err(EvalError {
            code: ErrorCode::InvalidRequest,
            message: "the path language has no variables; arguments are for jq filters".into(),
            limit: None,
            actual: None,
        }),
        Lang::Shape => {
            if !job.filter.trim().is_empty() {
                return Err(EvalError {
                    code: ErrorCode::InvalidRequest,
                    message: "a shape request takes no filter; send an empty one".to_string(),
                    limit: None,
                    actual: None,
                });
            }
            let value = parse_input(input, job.max_depth)?;
            // In lines mode the newline counts against the output limit too.
            let newline = usize::from(job.outputs == jqjail_protocol::Outputs::Lines);
            let bound = crate::shape::MAX_SHAPE_BYTES
                .min((job.max_output_bytes as usize).saturating_sub(newline));
            let summary = crate::shape::summarize(&value, bound);
            keep(value);
            let summary = summary.ok_or_else(|| EvalError {
                code: ErrorCode::OutputTooLarge,
                message: format!(
                    "even the shortest shape summary is over the {}-byte output limit",
                    job.max_output_bytes
                ),
                limit: Some(job.max_output_bytes),
                actual: None,
            })?;
            Ok(match job.outputs {
                jqjail_protocol::Outputs::Collapsed => summary,
                jqjail_protocol::Outputs::Lines => summary + "\n",
            })
        }
        Lang::Path => {
            let query = crate::path::parse(&job.filter)?;
            let value = parse_input(input, job.max_depth.min(crate::path::MAX_INPUT_DEPTH))?;
            let answer = crate::path::evaluate(&query, &value);
            keep(value);
            let answer = answer?;
            crate::engine::render(answer, job.outputs, job.max_output_bytes)
        }
    }
}

/// A jq run over a stream of values that `input` and `inputs` read: each value parsed as
/// strictly as a single input (one parse arena for them all), the filter run once on `null`
/// (`null_input`) or once per value left unread.
fn evaluate_values(
    engine: &Engine,
    job: &Job,
    input: &Bytes,
    null_input: bool,
    keep: impl FnOnce(jaq_json::Val),
) -> Result<String, EvalError> {
    if job.lang != Lang::Jq {
        return Err(EvalError {
            code: ErrorCode::InvalidRequest,
            message: format!(
                "a stream of input values is for jq filters, not for the {:?} language",
                job.lang
            )
            .to_lowercase(),
            limit: None,
            actual: None,
        });
    }
    let names: Vec<&str> = job.args.named.names().collect();
    let filter = engine.compile_with(&job.filter, &names)?;
    let values = crate::alloc::with_parse_arena(input.len(), || {
        jqjail_protocol::values::split_values(input)
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                parse_input(&input.slice_ref(piece), job.max_depth).map_err(|e| EvalError {
                    message: format!("input value {}: {}", i + 1, e.message),
                    ..e
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    let (args, named) = parse_args(&job.args, job.max_depth)?;
    let result = engine.run_with(
        &filter,
        RunInput::Values {
            values: values.clone(),
            null_input,
        },
        args,
        named,
        job.outputs,
        job.max_output_bytes,
    );
    keep(jaq_json::Val::Arr(values.into()));
    result
}

/// Parses a run's arguments as strictly as an input: `$ARGS` and the named values in name
/// order. A value that is not exactly one JSON text is refused naming the argument.
fn parse_args(
    args: &jqjail_protocol::Args,
    max_depth: u32,
) -> Result<(jaq_json::Val, Vec<jaq_json::Val>), EvalError> {
    let parse = |what: String, text: &str| {
        parse_input(&Bytes::copy_from_slice(text.as_bytes()), max_depth).map_err(|e| EvalError {
            message: format!("{what} is not one JSON value: {}", e.message),
            ..e
        })
    };
    let mut named = Vec::with_capacity(args.named.len());
    let mut map = Vec::with_capacity(args.named.len());
    for (name, text) in args.named.iter() {
        let value = parse(format!("argument `${name}`"), text)?;
        map.push((jaq_json::Val::from(name.to_owned()), value.clone()));
        named.push(value);
    }
    let positional = args
        .positional
        .iter()
        .enumerate()
        .map(|(i, text)| parse(format!("positional argument {}", i + 1), text))
        .collect::<Result<Vec<_>, _>>()?;
    let all = jaq_json::Val::obj(
        [
            (
                jaq_json::Val::from("positional".to_string()),
                jaq_json::Val::Arr(positional.into()),
            ),
            (
                jaq_json::Val::from("named".to_string()),
                jaq_json::Val::obj(map.into_iter().collect()),
            ),
        ]
        .into_iter()
        .collect(),
    );
    Ok((all, named))
}

/// Checks the input strictly (UTF-8, RFC 8259, depth) and parses it into a jaq value.
fn parse_input(input: &Bytes, max_depth: u32) -> Result<jaq_json::Val, EvalError> {
    // jq reads past a UTF-8 byte order mark at the start, as editors on some systems write.
    let input = &match input.strip_prefix(b"\xEF\xBB\xBF") {
        Some(_) => input.slice(3..),
        None => input.clone(),
    };
    let parsed = crate::alloc::with_parse_arena(input.len(), || value::parse(input, max_depth));
    parsed.map_err(|refusal| match refusal {
        Refusal::Scan(e) => {
            let (code, limit, actual) = match e {
                ScanError::TooDeep { limit, .. } => (
                    ErrorCode::InputTooDeep,
                    Some(u64::from(limit)),
                    Some(u64::from(limit) + 1),
                ),
                _ => (ErrorCode::InvalidJson, None, None),
            };
            EvalError {
                code,
                message: e.describe(input),
                limit,
                actual,
            }
        }
        Refusal::Jaq(e) => EvalError {
            code: ErrorCode::InvalidJson,
            message: format!("input is not valid JSON: {e}"),
            limit: None,
            actual: None,
        },
    })
}
