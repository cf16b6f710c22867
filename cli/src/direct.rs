//! Commands answered by the pane hosts themselves. `belfry peek` always asks the pane's host
//! first, in one round trip ([`quick_snapshot`]), since a read needs no daemon in its path;
//! with no daemon running, `belfry ls` (and `peek` of a pane whose host does not answer) ask
//! the pane hosts (each serves its own socket under the runtime directory's `panes/`, spec
//! §6.0) instead of starting a daemon behind the user's back, and say that no daemon runs.
//! Nothing here changes anything: a record whose pane host is gone is listed as unreachable
//! and left for the next daemon to clean up, as its start-up discovery does.

use std::path::{Path, PathBuf};

use anyhow::Result;
use belfry_mux::client::{Client, ClientError};
use belfry_proto::reply::{PaneRecord, Screen};
use belfry_proto::request as op;
use belfry_proto::{ErrorCode, Reply, SessionName};
use belfry_transport::deadline::PANE_QUICK;
use belfry_transport::paths;
use serde_json::Value;

use crate::cmd::NotFound;

/// Connects to the daemon if one answers at `socket`; `None` when nothing listens there (no
/// socket, or a stale one), which is when the commands of this module answer by themselves.
pub(crate) fn running_daemon(socket: &Path) -> Result<Option<Client>> {
    match Client::connect(socket) {
        Ok(client) => Ok(Some(client)),
        Err(ClientError::Connect { .. }) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Whether a daemon serves `socket` (running, starting or stopped), for the note of a command
/// that needed no daemon to answer: it holds an exclusive lock on the socket's lock file for its
/// whole life ([`paths::daemon_lock`]), so a shared one is refused. Asked of the lock rather
/// than the socket, so no daemon is woken to accept a connection nobody uses.
pub(crate) fn daemon_runs(socket: &Path) -> bool {
    let Ok(lock) = std::fs::File::open(paths::daemon_lock(socket)) else {
        return false;
    };
    // Granted (no daemon), the shared lock is released when `lock` closes, at once; a daemon
    // starting meanwhile retries its own for two seconds.
    matches!(
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockShared),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

/// The line that marks an answer given without a daemon.
pub(crate) fn no_daemon_note(socket: &Path) -> String {
    format!(
        "no daemon running at {} (not started by a read-only command): \
         the pane hosts were asked directly",
        socket.display()
    )
}

/// Every pane host with a record under `<runtime>/panes/`, asked for its `info` one by one
/// within [`PANE_QUICK`] each; one that does not answer is listed with `state` and `error`, as
/// the daemon's own listing shows it. A record whose socket refuses the connection and whose
/// process is gone is left out: the next daemon finds it lost and removes it, so it is not a
/// pane. Sorted by name.
pub(crate) fn list(runtime: &Path) -> Vec<PaneRecord> {
    let Ok(entries) = std::fs::read_dir(paths::panes_dir(runtime)) else {
        return Vec::new();
    };
    let mut panes: Vec<PaneRecord> = entries
        .flatten()
        .filter_map(|entry| record_session(&entry.path()))
        .filter_map(|session| ask_info(runtime, &session))
        .collect();
    panes.sort_by(|a, b| a.session.cmp(&b.session));
    panes
}

/// The session a pane record file names (`<session>.json`), if it is one.
fn record_session(path: &Path) -> Option<String> {
    if path.extension().and_then(|e| e.to_str()) != Some("json") {
        return None;
    }
    let session = path.file_stem()?.to_str()?.to_string();
    paths::validate_session_name(&session).ok()?;
    Some(session)
}

fn ask_info(runtime: &Path, session: &str) -> Option<PaneRecord> {
    let socket = paths::pane_socket(runtime, session);
    let answer = Client::connect_within(&socket, PANE_QUICK)
        .and_then(|mut client| client.call::<PaneRecord>(op::Info::default()));
    let (state, error) = match answer {
        Ok(Reply::Ok(mut record)) => {
            record.spec = None;
            return Some(record);
        }
        // A pane host at its connection cap answers `busy`, which the daemon lists as
        // unresponsive too.
        Ok(Reply::Err(err)) if err.code == ErrorCode::Busy => ("unresponsive", err.message),
        Ok(Reply::Err(err)) => ("unreachable", err.message),
        Err(err @ ClientError::Timeout { .. }) => ("unresponsive", err.to_string()),
        Err(err @ ClientError::Connect { .. }) => {
            let pid = recorded_pid(runtime, session);
            if pid == 0 || !belfry_mux::registry::pid_alive(pid) {
                return None;
            }
            ("unreachable", err.to_string())
        }
        // A socket served by another uid is never a pane of ours: not listed, as the daemon
        // never adopts or lists one (spec §6.1).
        Err(ClientError::Untrusted(_)) => return None,
        Err(err) => ("unreachable", err.to_string()),
    };
    Some(unanswered(runtime, session, state, error))
}

/// The pane host's pid as its record gives it, 0 when the record does not say.
fn recorded_pid(runtime: &Path, session: &str) -> u32 {
    std::fs::read(paths::pane_record(runtime, session))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|record| record.get("pid").and_then(Value::as_u64))
        .and_then(|pid| u32::try_from(pid).ok())
        .unwrap_or(0)
}

/// A listing entry for a pane host that did not answer, with the pid its record gives.
fn unanswered(runtime: &Path, session: &str, state: &str, error: String) -> PaneRecord {
    PaneRecord::unanswered(session, recorded_pid(runtime, session), state, error)
}

/// A pane's screen asked of its pane host directly. A name with no pane host socket is not
/// found (exit 1), naming where it was looked for.
pub(crate) fn snapshot(
    runtime: &Path,
    request: op::Snapshot,
    name: &SessionName,
) -> Result<Screen> {
    let socket: PathBuf = paths::pane_socket(runtime, name.as_str());
    if !socket.exists() {
        return Err(NotFound(format!(
            "no pane named \"{name}\": no daemon is running and no pane host serves {}",
            socket.display()
        ))
        .into());
    }
    let mut client = Client::connect_within(&socket, PANE_QUICK)?;
    client
        .call::<Screen>(request)?
        .into_result()
        .map_err(crate::cmd::refusal)
}

/// A pane's screen asked of its pane host directly, whether a daemon runs or not: a `peek`
/// needs no daemon in its path, and the hello and the request go in one write
/// ([`Client::connect_and_ask`]): one round trip to a pane host that may be busy with its
/// program's output, where the daemon's path takes two more hops. `None` when no pane host
/// answers at the pane's socket (no socket, or a stale one): the caller asks the daemon, which
/// names what became of the pane.
pub(crate) fn quick_snapshot(
    runtime: &Path,
    request: &op::Snapshot,
    name: &SessionName,
) -> Result<Option<Screen>> {
    let request = belfry_proto::Request::new(2, request.clone());
    Ok(ask_pane_host(runtime, name, &request, PANE_QUICK)?.map(|(_, screen)| screen))
}

/// A send written to the pane's host directly, as [`quick_snapshot`] reads. The reply whole
/// (as the daemon's path prints it) and its body; `None` when no pane host answers at the
/// pane's socket: the caller sends through the daemon, which names what became of the pane.
pub(crate) fn quick_send(
    runtime: &Path,
    send: &op::Send,
    name: &SessionName,
) -> Result<Option<(Value, belfry_proto::reply::Sent)>> {
    let request = belfry_proto::Request::new(2, send.clone());
    // What the daemon would give the pane host for this send: with no daemon in between,
    // there is nobody to report a silent pane host sooner.
    let within = belfry_transport::deadline::pane_reply(&request.op);
    Ok(ask_pane_host(runtime, name, &request, within)?
        .map(|(id, sent)| (belfry_proto::reply::ok(&id, &sent), sent)))
}

/// Ends the pane `name` through its own pane host (the `kill` op the daemon would send it):
/// `true` once it said so, `false` when no pane host answers there. For `belfry shutdown
/// --kill-panes` with no daemon running, whose panes would otherwise keep running.
pub(crate) fn kill(runtime: &Path, name: &SessionName) -> Result<bool> {
    let request = belfry_proto::Request::new(2, op::Kill::of(name.clone()));
    let within = belfry_transport::deadline::pane_reply(&request.op);
    Ok(ask_pane_host::<belfry_proto::reply::Killed>(runtime, name, &request, within)?.is_some())
}

/// `request` asked of the pane host at `name`'s socket in one round trip, within `within`:
/// the reply's `id` and its body, a refusal as the error it is, or `None` when no pane host
/// answers there.
fn ask_pane_host<T: serde::de::DeserializeOwned>(
    runtime: &Path,
    name: &SessionName,
    request: &belfry_proto::Request,
    within: std::time::Duration,
) -> Result<Option<(Value, T)>> {
    let socket: PathBuf = paths::pane_socket(runtime, name.as_str());
    if !socket.exists() {
        return Ok(None);
    }
    let reply = match Client::connect_and_ask(&socket, within, request.to_value()) {
        Ok((_, reply)) => reply,
        Err(ClientError::Connect { .. }) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let body = Reply::<T>::read(&reply)
        .map_err(|err| {
            anyhow::anyhow!(
                "{}: bad {} reply: {err}",
                socket.display(),
                request.op.name()
            )
        })?
        .into_result()
        .map_err(crate::cmd::refusal)?;
    Ok(Some((
        reply.get("id").cloned().unwrap_or(Value::Null),
        body,
    )))
}
