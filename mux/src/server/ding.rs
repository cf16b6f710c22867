//! The DING ops (`ding-status`, `ding-nudge`, `ding-turn-boundary`) and `hook`: each reaches a
//! pane's DING worker (`crate::ding`) through its channel and answers with what the worker
//! says. A file of its own because these are the daemon's doors into the DING engine.

use std::time::Duration;

use belfry_proto::event::{Event, HookSeen};
use belfry_proto::reply::{Claimed, ErrorBody, Nudged, Published};
use belfry_proto::request;
use belfry_proto::{ErrorCode, SessionName};
use serde_json::Value;

use super::events::publish;
use super::{pane_for, Daemon};
use crate::ding::{DingMsg, DingReply};

/// How long a hook event waits for the pane's DING worker to have applied it before it is
/// answered anyway (a worker in the middle of a notice's transaction reads it after that).
const HOOK_APPLIED_WITHIN: Duration = Duration::from_secs(2);

fn ding_session(daemon: &Daemon, session: Option<&SessionName>) -> Result<String, ErrorBody> {
    pane_for(daemon, session).map(|entry| entry.session)
}

pub(super) async fn ding_status(
    daemon: &Daemon,
    session: Option<&SessionName>,
) -> Result<DingReply, ErrorBody> {
    let session = ding_session(daemon, session)?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    if !daemon.ding.tell(&session, DingMsg::Status(tx)) {
        return Err(ErrorBody::new(
            ErrorCode::Unavailable,
            format!("no DING worker for {session:?}"),
        ));
    }
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(status)) => Ok(status),
        _ => Err(ErrorBody::new(
            ErrorCode::Unavailable,
            format!("DING worker for {session:?} did not answer"),
        )),
    }
}

pub(super) fn ding_nudge(
    daemon: &Daemon,
    session: Option<&SessionName>,
) -> Result<Nudged, ErrorBody> {
    let session = ding_session(daemon, session)?;
    let nudged = daemon.ding.tell(&session, DingMsg::Nudge);
    Ok(Nudged { nudged })
}

/// spec §7.5: `belfry dispatch` at a turn boundary claims unread messages for the hook.
pub(super) async fn ding_turn_boundary(
    daemon: &Daemon,
    op: &request::DingTurnBoundary,
) -> Result<Claimed, ErrorBody> {
    let session = ding_session(daemon, op.session.as_ref())?;
    let claim = op.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    if !daemon
        .ding
        .tell(&session, DingMsg::TurnBoundary { claim, reply: tx })
    {
        return Err(ErrorBody::new(
            ErrorCode::Unavailable,
            format!("no DING worker for {session:?}"),
        ));
    }
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(Ok(outcome))) => {
            publish(
                daemon,
                Event::Ding {
                    session: session.clone(),
                    what: "turn-boundary".into(),
                    outcome: serde_json::to_value(&outcome).unwrap_or(Value::Null),
                },
            );
            Ok(outcome)
        }
        Ok(Ok(Err(message))) => Err(ErrorBody::new(
            ErrorCode::Invalid,
            format!("turn-boundary event refused: {message}"),
        )),
        _ => Err(ErrorBody::new(
            ErrorCode::Unavailable,
            format!("DING worker for {session:?} did not answer"),
        )),
    }
}

/// A hook event seen by `belfry dispatch` inside a pane: published on the bus and given to the
/// pane's DING worker (compaction and clear invalidate leases). Answered once the worker has
/// applied it (within [`HOOK_APPLIED_WITHIN`]): the harness runs its hook before it compacts
/// or clears, so the lease is gone before it does, and mail posted after the hook returned is
/// never delivered under the old lease.
pub(super) async fn hook_event(
    daemon: &Daemon,
    op: &request::Hook,
) -> Result<Published, ErrorBody> {
    let session = ding_session(daemon, op.session.as_ref())?;
    let seen = HookSeen {
        session: session.clone(),
        hook: op.hook.clone(),
        source: op.source.clone(),
        tool_name: op.tool_name.clone(),
        hook_event_name: op.hook_event_name.clone(),
        incarnation: op.incarnation.clone(),
        prompt: op.prompt,
        notices: op.notices.clone(),
    };
    let (applied, applied_rx) = tokio::sync::oneshot::channel();
    // With no worker to tell, the message and its sender are dropped and the wait ends at once.
    daemon.ding.tell(
        &session,
        DingMsg::Hook {
            event: seen.clone(),
            applied,
        },
    );
    publish(daemon, Event::Hook(seen));
    if tokio::time::timeout(HOOK_APPLIED_WITHIN, applied_rx)
        .await
        .is_err()
    {
        tracing::warn!(
            session,
            "the DING worker did not apply a hook event within {} s; answered anyway",
            HOOK_APPLIED_WITHIN.as_secs()
        );
    }
    Ok(Published { published: true })
}
