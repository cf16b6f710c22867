//! The ops over the panes that are: `list` (every pane host asked at once), `kill` (a pane
//! host asked to end and waited for) and `shutdown` (the daemon, and with `kill_panes` every
//! pane first). A file of their own because each answers from the registry and the pane hosts
//! without starting anything.

use std::sync::Arc;
use std::time::Duration;

use belfry_proto::event::{Event, Lifecycle};
use belfry_proto::reply::{ErrorBody, Killed, Listing, PaneRecord, Reply, Shutdown};
use belfry_proto::request;
use belfry_proto::{ErrorCode, Request, SessionName};
use belfry_transport::retry::Backoff;
use serde_json::Value;

use super::events::publish;
use super::hosts::pid_gone;
use super::{pane_for, unadopted_message, Daemon};
use crate::deadline;
use crate::registry::{self, PaneEntry};

/// How often a kill refused `busy` is asked again.
const KILL_BUSY_RETRY: Duration = Duration::from_millis(100);

/// `list`: every pane host is asked at once, each within its own deadline, so one stopped pane
/// host costs the listing one deadline and is listed as an error entry while the others are
/// listed normally.
pub(super) async fn list(daemon: &Daemon) -> Listing {
    let asks: Vec<_> = daemon
        .registry
        .all()
        .into_iter()
        .map(|entry| {
            tokio::spawn(async move {
                let request = Request::new(0, request::Info::default());
                let reply = registry::pane_call(&entry.socket, &request).await;
                (entry, reply)
            })
        })
        .collect();
    let mut panes = Vec::new();
    for ask in asks {
        let Ok((entry, reply)) = ask.await else {
            continue;
        };
        match reply {
            Ok(info) => match Reply::<PaneRecord>::read(&info) {
                Ok(Reply::Ok(mut record)) => {
                    record.spec = None;
                    panes.push(record);
                }
                Ok(Reply::Err(err)) => panes.push(unlisted(&entry, "unreachable", err.to_string())),
                Err(err) => panes.push(unlisted(
                    &entry,
                    "unreachable",
                    format!("pane host answered info with a bad reply: {err}"),
                )),
            },
            Err(err) => {
                let state = match err {
                    registry::PaneError::TimedOut { .. } | registry::PaneError::Busy(_) => {
                        "unresponsive"
                    }
                    registry::PaneError::Unreachable(_) | registry::PaneError::Failed(_) => {
                        "unreachable"
                    }
                    registry::PaneError::Foreign(_) => "foreign",
                };
                panes.push(unlisted(&entry, state, err.describe(&entry)));
            }
        }
    }
    for entry in daemon.registry.all_unadopted() {
        panes.push(unlisted(&entry, "unresponsive", unadopted_message(&entry)));
    }
    panes.sort_by(|a, b| a.session.cmp(&b.session));
    Listing { panes }
}

/// A listing entry for a pane host that could not be asked.
pub(super) fn unlisted(entry: &PaneEntry, state: &str, error: String) -> PaneRecord {
    PaneRecord::unanswered(&entry.session, entry.pid, state, error)
}

pub(super) async fn kill(
    daemon: &Arc<Daemon>,
    session: Option<&SessionName>,
) -> Result<Killed, ErrorBody> {
    let entry = pane_for(daemon, session)?;
    match kill_entry(daemon, &entry).await {
        Ok(()) => Ok(Killed {
            killed: entry.session,
        }),
        Err(err) => Err(ErrorBody::new(err.code(), err.describe(&entry))),
    }
}

/// Ends one pane: asks its pane host to kill the child and exit, waits (bounded) for it to go.
///
/// The pane stays registered (listed, served, its name taken) until its pane host takes the
/// kill. One that does not (stopped, hung, unreachable) and is still alive keeps its place and
/// its DING worker, and the failure is returned: the daemon never forgets a pane host it could
/// not end.
async fn kill_entry(daemon: &Daemon, entry: &PaneEntry) -> Result<(), registry::PaneError> {
    if !daemon.registry.begin_kill(&entry.session) {
        return Err(registry::PaneError::Failed(format!(
            "pane {:?} is already being killed",
            entry.session
        )));
    }
    let request = Request::new(0, request::Kill::default());
    // A pane host at its connection cap (`busy`, or a full backlog) is alive and will take
    // the kill once a connection frees: it is asked again until the kill's own reply deadline
    // (which leaves the rest of `deadline::KILL` for its exit), never refused at the first try.
    let asked = tokio::time::timeout(deadline::PANE_QUICK, async {
        let mut retry = Backoff::constant(KILL_BUSY_RETRY);
        loop {
            match registry::pane_call(&entry.socket, &request).await {
                Ok(reply) if registry::error_code(&reply) == Some(ErrorCode::Busy) => {}
                Err(registry::PaneError::Busy(_)) => {}
                other => return other,
            }
            retry.sleep().await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        Err(registry::PaneError::TimedOut {
            op: "kill".into(),
            after: deadline::PANE_QUICK,
        })
    });
    let answered = asked.and_then(|reply| match reply.get("ok") {
        Some(Value::Bool(true)) => Ok(reply),
        _ => Err(registry::PaneError::Failed(format!(
            "pane host refused the kill: {reply}"
        ))),
    });
    if let Err(err) = answered {
        if registry::pid_alive(entry.pid) {
            daemon.registry.end_kill(&entry.session);
            return Err(err);
        }
    }
    // Out of the registry before the kill mark goes, so its monitor reports the exit as a
    // kill, not a loss.
    daemon.registry.remove(&entry.session);
    daemon.registry.end_kill(&entry.session);
    daemon.ding.stop(&entry.session);
    let _ = pid_gone(entry.pid, Duration::from_secs(4)).await;
    publish(
        daemon,
        Event::Lifecycle(Lifecycle {
            pid: Some(entry.pid),
            ..Lifecycle::new(&entry.session, "killed")
        }),
    );
    Ok(())
}

/// `shutdown`: stops the daemon; with `kill_panes`, first ends every pane host, all at once so
/// one stuck pane host costs one deadline. If any pane host could not be ended, the reply is an
/// error naming it and the daemon keeps running, so the caller can resume or kill it and retry.
pub(super) async fn shutdown(
    daemon: &Arc<Daemon>,
    kill_panes: bool,
) -> Result<Shutdown, ErrorBody> {
    let mut killed = Vec::new();
    let mut failed = Vec::new();
    if kill_panes {
        let kills: Vec<_> = daemon
            .registry
            .all()
            .into_iter()
            .map(|entry| {
                let daemon = Arc::clone(daemon);
                tokio::spawn(async move {
                    let result = kill_entry(&daemon, &entry).await;
                    (entry, result)
                })
            })
            .collect();
        for kill in kills {
            match kill.await {
                Ok((entry, Ok(()))) => killed.push(entry.session),
                Ok((entry, Err(err))) => failed.push(err.describe(&entry)),
                Err(err) => failed.push(format!("a kill task failed: {err}")),
            }
        }
        for entry in daemon.registry.all_unadopted() {
            failed.push(unadopted_message(&entry));
        }
    }
    if !failed.is_empty() {
        return Err(ErrorBody::new(
            ErrorCode::Unavailable,
            format!(
                "could not end every pane, so the daemon keeps running (killed: {killed:?}): {}",
                failed.join("; ")
            ),
        ));
    }
    Ok(Shutdown {
        shutdown: true,
        killed,
    })
}
