//! One handler per request kind. `answer` takes the turns the kind costs ([`Costs`]), then
//! dispatches with an exhaustive match: a new kind of request does not compile until it has a
//! handler here (and its costs in `tenant.rs`).

mod head;
mod hides;
mod run;
mod stats;

pub(crate) use head::check_head;

use super::reply::{Reply, Session, error};
use super::shared::Shared;
use run::{RunParts, Source, run_and_record};

use crate::arriving::Arriving;
use crate::config::TenantOf;
use crate::pool::JobInput;
use crate::tenant::Costs;
use jqjail_protocol::{ErrorCode, ErrorReply, Input, Request};
use std::time::Instant;

/// Answers one request of a tenant, its tail (if any) in hand: one handler per kind of
/// request. The turns its kind costs ([`Costs`]: a large answer, the supervisor's CPU) are
/// taken first, waiting at most the frame timeout, and held until the answer is written.
pub(crate) async fn answer(
    request: Request<'_>,
    session: &Session,
    tenant: &TenantOf,
    shared: &Shared,
) -> Reply {
    let by = Instant::now() + shared.cfg.frame_timeout;
    let taken = match shared
        .admission
        .turns(session.uid, Costs::of(&request), by)
        .await
    {
        Ok(taken) => taken,
        Err(e) => return error(*e),
    };
    let mut reply = answer_kind(request, session, tenant, shared, by).await;
    // The CPU, search and store turns go once the work is done: a client that does not read its
    // answer holds only the large-answer turn, and the memory, until the write times out.
    drop(taken.supervisor_cpu);
    drop(taken.search);
    drop(taken.store);
    reply.turns.extend(taken.large_answer);
    reply
}

async fn answer_kind(
    request: Request<'_>,
    session: &Session,
    tenant: &TenantOf,
    shared: &Shared,
    by: Instant,
) -> Reply {
    match request {
        Request::Run(run) => {
            let (parts, input) = RunParts::of(run);
            let source = match &input {
                Input::Inline(text) | Input::Values { values: text, .. } => {
                    Source::Input(JobInput::Bytes(text.as_bytes()))
                }
                Input::Hide(id) => Source::Hide(id),
            };
            run_and_record(parts, source, shared, tenant, session.uid)
                .await
                .into()
        }
        Request::Stats => stats::handle(session, tenant, shared),
        Request::Hello(_) => error(ErrorReply::new(
            ErrorCode::ProtocolError,
            "hello was already exchanged on this connection",
        )),
        // Its search turn is held; its store read turn is taken for the hide's opening only.
        Request::HideSearch(r) => match shared.store.get() {
            Ok(store) => {
                let payer = (&shared.admission, session.uid);
                hides::search(r, store, tenant, &shared.bulk, payer, by).await
            }
            Err(e) => error(*e),
        },
        request @ (Request::HidePut(_)
        | Request::HideGet(_)
        | Request::HideCut(_)
        | Request::HidePage(_)
        | Request::HideEnds(_)
        | Request::HideList(_)
        | Request::HideDelete(_)
        | Request::HideUsage) => match shared.store.get() {
            Ok(store) => hides::handle(request, &store, tenant),
            Err(e) => error(*e),
        },
    }
}

/// Serves a request whose tail is still arriving, passing the tail on as it comes: a run's
/// input to its worker (in one of the tenant's upload turns), a put's content to the store's
/// temp file. What was not taken of the tail is left for the caller to skip.
pub(crate) async fn streamed(
    request: Request<'_>,
    tail: &mut Arriving<'_>,
    session: &Session,
    tenant: &TenantOf,
    shared: &Shared,
) -> Reply {
    match request {
        Request::Run(run) => {
            // The run takes a worker while its input arrives (and an evaluation slot only
            // once all but its last byte came): a tenant has only so many such turns, so its
            // stalled uploads cannot hold every worker the daemon will start.
            // Waited for no longer than leaves the tail its time at the pace.
            let by = tail
                .arrive_by()
                .checked_sub(crate::pace::allowance(tail.len()))
                .unwrap_or_else(Instant::now);
            let _turn = match shared.admission.upload(&tenant.name, by).await {
                Ok(turn) => turn,
                Err(e) => return error(*e),
            };
            let (parts, _pending) = RunParts::of(run);
            let source = Source::Input(JobInput::Stream(tail));
            run_and_record(parts, source, shared, tenant, session.uid)
                .await
                .into()
        }
        Request::HidePut(put) => {
            let store = match shared.store.get() {
                Ok(store) => store,
                Err(e) => return error(*e),
            };
            hides::put_streamed(
                put,
                tail,
                &store,
                tenant,
                (&shared.admission, session.uid),
                shared.cfg.frame_timeout,
            )
            .await
            .into()
        }
        _ => error(ErrorReply::new(
            ErrorCode::Internal,
            "a request kind without a tail had one",
        )),
    }
}
