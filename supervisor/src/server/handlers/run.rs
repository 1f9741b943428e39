//! `run`: a filter over an inline input, a stream of values or a hide, in a worker.

use super::super::shared::Shared;

use crate::arriving::Arriving;
use crate::config::TenantOf;
use crate::explain::Context;
use crate::pool::{JobInput, OutputGate, SlotWhen};
use jqjail_protocol::limits::grouped;
use jqjail_protocol::worker::Job;
use jqjail_protocol::{
    Cost, ErrorCode, ErrorReply, HiddenReply, Input, OnOversize, Response, RunReply,
};
use std::time::{Duration, Instant};
/// A run request without its input.
pub(crate) struct RunParts {
    filter: String,
    lang: jqjail_protocol::Lang,
    limits: jqjail_protocol::LimitOverrides,
    on_oversize: OnOversize,
    args: jqjail_protocol::Args,
    outputs: jqjail_protocol::Outputs,
    inputs: jqjail_protocol::worker::Inputs,
}

impl RunParts {
    /// The run's parts, and its input apart.
    pub(crate) fn of(run: jqjail_protocol::RunRequest<'_>) -> (RunParts, Input<'_>) {
        let inputs = match run.input {
            Input::Values { null_input, .. } => {
                jqjail_protocol::worker::Inputs::Values { null_input }
            }
            Input::Inline(_) | Input::Hide(_) => jqjail_protocol::worker::Inputs::One,
        };
        let parts = RunParts {
            filter: run.filter,
            lang: run.lang,
            limits: run.limits,
            on_oversize: run.on_oversize,
            args: run.args,
            outputs: run.outputs,
            inputs,
        };
        (parts, run.input)
    }
}

/// Why a run's arguments are refused, if they are: a bad name, or any argument for the path
/// language (it has no variables). Their values are the worker's to parse.
pub(crate) fn args_problem(
    lang: jqjail_protocol::Lang,
    args: &jqjail_protocol::Args,
) -> Option<ErrorReply> {
    if args.is_empty() {
        return None;
    }
    match lang {
        jqjail_protocol::Lang::Jq => {}
        jqjail_protocol::Lang::Path => {
            return Some(ErrorReply::new(
                ErrorCode::InvalidRequest,
                "the path language has no variables; named and positional arguments are for jq filters",
            ));
        }
        jqjail_protocol::Lang::Shape => {
            return Some(ErrorReply::new(
                ErrorCode::InvalidRequest,
                "a shape request takes no arguments",
            ));
        }
    }
    let problem = args
        .named
        .names()
        .find_map(jqjail_protocol::message::arg_name_problem)?;
    Some(ErrorReply::new(ErrorCode::InvalidRequest, problem))
}

/// Where a run's input comes from.
pub(crate) enum Source<'a, 'b> {
    Input(JobInput<'a, 'b>),
    Hide(&'a str),
}

/// Runs for `tenant` (a connection of `uid`) and counts the outcome.
pub(crate) async fn run_and_record(
    parts: RunParts,
    source: Source<'_, '_>,
    shared: &Shared,
    tenant: &TenantOf,
    uid: u32,
) -> Response {
    let start = Instant::now();
    let lang = parts.lang;
    let response = handle_run(parts, source, shared, tenant, uid).await;
    let error = match &response {
        Response::Error(e) => Some(e.code),
        _ => None,
    };
    shared.stats.record(
        &tenant.name,
        lang,
        error,
        start.elapsed().as_micros() as u64,
    );
    response
}

pub(crate) fn input_too_large(len: u64, limit: u64) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::InputTooLarge,
        format!(
            "input is {} bytes, over the {}-byte limit; narrow the tool call that produced it",
            grouped(len),
            grouped(limit)
        ),
    )
    .with_limit(limit, len)
}

pub(crate) fn filter_too_long(len: u64, limit: u64) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::FilterTooLong,
        format!(
            "filter is {} bytes, over the {}-byte limit",
            grouped(len),
            grouped(limit)
        ),
    )
    .with_limit(limit, len)
}

pub(crate) async fn handle_run(
    run: RunParts,
    source: Source<'_, '_>,
    shared: &Shared,
    tenant: &TenantOf,
    uid: u32,
) -> Response {
    let start = Instant::now();
    match source {
        Source::Input(mut input) => {
            // A client's tail still arriving is an upload; bytes in hand are not.
            let slot = match input {
                JobInput::Stream(_) => SlotWhen::AfterUpload,
                JobInput::Bytes(_) => SlotWhen::Before,
            };
            run_input(run, &mut input, slot, shared, tenant, uid, start).await
        }
        // A hide is read off the disk as the worker takes it, like a streamed inline input.
        Source::Hide(id) => {
            let by = start + shared.cfg.frame_timeout;
            let payer = (&shared.admission, uid);
            let opened = match shared.store.get() {
                Ok(store) => super::hides::open_input(&store, tenant, id, payer, by).await,
                Err(e) => Err(e),
            };
            match opened {
                Ok((len, file)) => {
                    let mut file = tokio::fs::File::from_std(file);
                    let mut arriving = Arriving::new(&mut file, len, by);
                    let mut input = JobInput::Stream(&mut arriving);
                    run_input(
                        run,
                        &mut input,
                        SlotWhen::Before,
                        shared,
                        tenant,
                        uid,
                        start,
                    )
                    .await
                }
                Err(e) => Response::Error(*e),
            }
        }
    }
}

pub(crate) async fn run_input(
    run: RunParts,
    input: &mut JobInput<'_, '_>,
    slot: SlotWhen,
    shared: &Shared,
    tenant: &TenantOf,
    uid: u32,
    start: Instant,
) -> Response {
    let limits = &shared.cfg.limits;
    // A run with an inline input was checked at its head (`check_head`); one over a hide was
    // not.
    let filter_len = run.filter.len() as u64;
    if filter_len > limits.max_filter_bytes {
        return Response::Error(filter_too_long(filter_len, limits.max_filter_bytes));
    }
    if let Some(refused) = args_problem(run.lang, &run.args) {
        return Response::Error(refused);
    }
    // Output over the limit is kept as a hide (up to the input limit, the size of a hide).
    let keep = match run.on_oversize {
        OnOversize::Error => None,
        OnOversize::Hide => Some((&*shared.store, run.filter.clone())),
    };
    let input_len = input.len();
    // A hide stored under a larger limit than the one now in force.
    if input_len > limits.max_input_bytes {
        return Response::Error(input_too_large(input_len, limits.max_input_bytes));
    }
    let effective = match limits.tightened(&run.limits) {
        Ok(l) => l,
        Err(e) => {
            return Response::Error(
                ErrorReply::new(ErrorCode::InvalidRequest, e.to_string())
                    .with_limit(e.allowed, e.requested),
            );
        }
    };
    let outputs = run.outputs;
    let job = Job {
        args: run.args,
        outputs,
        inputs: run.inputs,
        filter: run.filter,
        lang: run.lang,
        input_bytes: input_len,
        max_depth: effective.max_depth,
        max_output_bytes: match keep {
            // A hide holds at most `max_input_bytes`. Lines are kept collapsed, which is up to
            // one byte longer than they are (two brackets for the last newline), so their
            // worker stops one byte sooner and every hide stays filterable by its ID.
            Some(_) => effective.max_output_bytes.max(match outputs {
                jqjail_protocol::Outputs::Lines => limits.max_input_bytes.saturating_sub(1),
                jqjail_protocol::Outputs::Collapsed => limits.max_input_bytes,
            }),
            None => effective.max_output_bytes,
        },
    };
    let ctx = Context {
        killed_for_timeout: false,
        stopped_from_outside: false,
        timeout_ms: effective.timeout_ms,
        heap_bytes: limits.max_heap_bytes,
        cpu_seconds: shared.cfg.cpu_seconds,
        cgroup_bytes: shared.cgroup_bytes,
    };
    let deadline = start + Duration::from_millis(effective.timeout_ms);
    // A reply too large for the request's own limit is an output to keep: read in a
    // large-output turn, held until it is stored.
    let mut gate = keep.as_ref().map(|_| OutputGate {
        above: effective.max_output_bytes,
        payer: (&shared.admission, uid),
        held: None,
    });
    let outcome = shared
        .pool
        .execute(&job, input, deadline, ctx, tenant, slot, gate.as_mut())
        .await;
    let mut cost = Cost {
        wall_us: start.elapsed().as_micros() as u64,
        cpu_us: outcome.cpu.as_micros() as u64,
        peak_rss_bytes: outcome.peak_rss_bytes,
        input_bytes: input_len,
        output_bytes: 0,
    };
    match outcome.result {
        Ok(output) if output.len() as u64 > effective.max_output_bytes => {
            // The pool refuses a worker's output over the job's limit, which is the request's
            // own limit unless the output is to be kept.
            let Some((store, filter)) = keep else {
                let e = ErrorReply::new(
                    ErrorCode::WorkerCrashed,
                    "the worker answered more than the output limit",
                );
                return Response::Error(e);
            };
            cost.output_bytes = output.len() as u64;
            let lines = outputs == jqjail_protocol::Outputs::Lines;
            let payer = (&shared.admission, uid);
            // Within the run's own deadline, but a second at least, however late it finished.
            let by = deadline.max(Instant::now() + Duration::from_secs(1));
            let kept = match store.get() {
                Ok(store) => {
                    super::hides::keep_output(&store, tenant, &filter, &output, lines, payer, by)
                        .await
                }
                Err(e) => Err(e),
            };
            drop(output);
            drop(gate);
            match kept {
                Ok((entry, first)) => Response::Hidden(HiddenReply { entry, first, cost }),
                Err(mut e) => {
                    e.cost = Some(cost);
                    Response::Error(*e)
                }
            }
        }
        Ok(output) => {
            cost.output_bytes = output.len() as u64;
            tracing::debug!(
                wall_us = cost.wall_us,
                cpu_us = cost.cpu_us,
                input_bytes = input_len,
                output_bytes = cost.output_bytes,
                "run ok"
            );
            Response::Run(RunReply {
                output: output.into(),
                cost,
            })
        }
        Err(mut e) => {
            // A tenant can fail runs at will: logged at info at most once a second.
            match shared.failed_run_log.allow() {
                Some(held_back) => {
                    tracing::info!(tenant = %tenant.name, code = %e.code, wall_us = cost.wall_us, cpu_us = cost.cpu_us, peak_rss_bytes = cost.peak_rss_bytes, held_back, "run failed")
                }
                None => tracing::debug!(tenant = %tenant.name, code = %e.code, "run failed"),
            }
            e.cost = Some(cost);
            Response::Error(e)
        }
    }
}
