//! The daemon's registry of pane hosts: adoption at start, launching new ones, the per-pane
//! monitor that notices exits and deaths (spec §6.0), and the connections the daemon keeps
//! open to pane hosts for the requests it forwards or makes.
//!
//! A pane host serves any number of requests on one connection, one after another, so the
//! daemon keeps each connection after its reply and takes it for the next request to the same
//! pane host (see [`pane_call`]). A request in flight owns its connection: two at once use two
//! connections, so a `peek` never waits behind a long `wait` or a send queued for the input
//! lock, and a request that times out or is abandoned closes its connection, which is how the
//! pane host learns that its requester left.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use belfry_proto::reply::{Announced, ErrorBody, PaneRecord, Reply};
use belfry_proto::request::{self, Request};
use belfry_proto::spec::LaunchSpec;
use belfry_proto::ErrorCode;
use belfry_transport::paths;

use crate::deadline;

/// What the daemon knows about one live pane host.
#[derive(Debug, Clone)]
pub struct PaneEntry {
    pub session: String,
    pub socket: PathBuf,
    pub pid: u32,
}

/// Every pane host the daemon serves, by session name.
///
/// The maps are never locked together: a pane moves from `unadopted` to `panes` by being
/// inserted into `panes` first, so a lookup never misses it in between.
#[derive(Default)]
pub struct Registry {
    panes: Mutex<BTreeMap<String, PaneEntry>>,
    /// Panes a `kill` is ending. They stay listed and served until their pane host has taken
    /// the kill, and their monitor does not report their exit as a loss.
    killing: Mutex<BTreeSet<String>>,
    /// Pane hosts alive at daemon start that did not answer the adoption probe (stopped or
    /// overloaded). They are retried in the background and listed as `unresponsive`
    /// meanwhile; their names stay taken.
    unadopted: Mutex<BTreeMap<String, PaneEntry>>,
    /// Names whose spawn is under way: taken before the pane host is launched, so that of two
    /// concurrent spawns of one name exactly one launches and the other is told `exists`.
    spawning: Mutex<BTreeSet<String>>,
}

/// A name held for a spawn under way; dropping it releases the name (the pane, if the spawn
/// succeeded, is in the registry by then).
#[must_use = "the name is released when the reservation is dropped"]
pub struct SpawnReservation<'a> {
    registry: &'a Registry,
    session: String,
}

/// Why a name could not be reserved for a spawn.
#[derive(Debug)]
pub enum Taken {
    /// Another spawn of the name is under way.
    Spawning,
    /// A pane host of that name is in the registry.
    Pane,
    /// A pane host of that name is alive but not adopted yet (listed `unresponsive`).
    Unadopted(PaneEntry),
}

impl Drop for SpawnReservation<'_> {
    fn drop(&mut self) {
        self.registry.spawning.lock().remove(&self.session);
    }
}

impl Registry {
    /// Holds `session` for a spawn, unless a pane of that name exists (adopted or not) or is
    /// being spawned.
    ///
    /// The checks and the hold happen under the `spawning` lock, which is always taken before
    /// the `unadopted` and `panes` locks, so no two spawns can both pass them. `unadopted` is
    /// checked before `panes`: an adoption inserts into `panes` before it leaves `unadopted`,
    /// so in this order the pane is seen in one map or the other, never missed in between.
    pub fn reserve(&self, session: &str) -> Result<SpawnReservation<'_>, Taken> {
        let mut spawning = self.spawning.lock();
        if spawning.contains(session) {
            return Err(Taken::Spawning);
        }
        if let Some(entry) = self.unadopted.lock().get(session) {
            return Err(Taken::Unadopted(entry.clone()));
        }
        if self.panes.lock().contains_key(session) {
            return Err(Taken::Pane);
        }
        spawning.insert(session.to_string());
        Ok(SpawnReservation {
            registry: self,
            session: session.to_string(),
        })
    }

    pub fn get(&self, session: &str) -> Option<PaneEntry> {
        self.panes.lock().get(session).cloned()
    }

    pub fn insert(&self, entry: PaneEntry) {
        self.panes.lock().insert(entry.session.clone(), entry);
    }

    pub fn remove(&self, session: &str) -> Option<PaneEntry> {
        let entry = self.panes.lock().remove(session);
        if let Some(entry) = &entry {
            forget_connections(&entry.socket);
        }
        entry
    }

    /// Removes `session` only if it is still the pane host with `pid` and no kill is ending it
    /// (the kill removes it itself, and reports it killed rather than lost).
    pub fn remove_if_pid(&self, session: &str, pid: u32) -> bool {
        if self.killing.lock().contains(session) {
            return false;
        }
        let mut panes = self.panes.lock();
        if let Some(entry) = panes.get(session).filter(|e| e.pid == pid) {
            forget_connections(&entry.socket);
            panes.remove(session);
            return true;
        }
        false
    }

    pub fn all(&self) -> Vec<PaneEntry> {
        self.panes.lock().values().cloned().collect()
    }

    /// Marks `session` as being killed; false if a kill is already ending it.
    pub fn begin_kill(&self, session: &str) -> bool {
        self.killing.lock().insert(session.to_string())
    }

    pub fn end_kill(&self, session: &str) {
        self.killing.lock().remove(session);
    }

    pub fn insert_unadopted(&self, entry: PaneEntry) {
        self.unadopted.lock().insert(entry.session.clone(), entry);
    }

    pub fn unadopted(&self, session: &str) -> Option<PaneEntry> {
        self.unadopted.lock().get(session).cloned()
    }

    /// Forgets an unadopted pane host (adopted or found dead), if it is still the one with `pid`.
    pub fn remove_unadopted_if_pid(&self, session: &str, pid: u32) -> bool {
        let mut unadopted = self.unadopted.lock();
        if unadopted.get(session).is_some_and(|e| e.pid == pid) {
            unadopted.remove(session);
            return true;
        }
        false
    }

    pub fn all_unadopted(&self) -> Vec<PaneEntry> {
        self.unadopted.lock().values().cloned().collect()
    }
}

/// Why a request to a pane host failed.
#[derive(Debug)]
pub enum PaneError {
    /// Nothing accepts connections on the socket (missing, refused): the request was never
    /// sent, so nothing of it can have reached the pane.
    Unreachable(String),
    /// The pane host broke the connection or answered garbage after the request was sent.
    Failed(String),
    /// The socket is served by another uid (spec §6.1): nothing was sent, and it is never a
    /// pane host of ours, however alive the recorded pid.
    Foreign(String),
    /// The pane host's listen backlog is full (connect `EAGAIN`): it is alive but stopped or
    /// overloaded, so it counts as unresponsive, never as gone.
    Busy(String),
    /// The pane host took the request but did not answer within its deadline (it may be
    /// stopped or hung). Dropping the connection tells it the requester left, so a send still
    /// queued behind another transaction is abandoned, not written later.
    TimedOut { op: String, after: Duration },
}

impl PaneError {
    /// The wire error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            PaneError::Unreachable(_) | PaneError::Failed(_) | PaneError::Busy(_) => {
                ErrorCode::Unavailable
            }
            PaneError::Foreign(_) => ErrorCode::Forbidden,
            PaneError::TimedOut { .. } => ErrorCode::Timeout,
        }
    }

    /// The failure as a message naming the pane and its pane host process.
    pub fn describe(&self, entry: &PaneEntry) -> String {
        match self {
            PaneError::Unreachable(message)
            | PaneError::Failed(message)
            | PaneError::Foreign(message) => {
                format!("{message} (pane {:?}, pid {})", entry.session, entry.pid)
            }
            PaneError::Busy(message) => format!(
                "{message} (pane {:?}, pid {}); it may be stopped or overloaded (`kill -CONT {}` \
                 resumes a stopped process)",
                entry.session, entry.pid, entry.pid
            ),
            PaneError::TimedOut { op, after } => format!(
                "pane host of {:?} (pid {}) did not answer {op:?} within {} s; it may be stopped \
                 or hung (`kill -CONT {}` resumes a stopped process)",
                entry.session,
                entry.pid,
                after.as_secs(),
                entry.pid
            ),
        }
    }
}

impl std::fmt::Display for PaneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PaneError::Unreachable(message)
            | PaneError::Failed(message)
            | PaneError::Busy(message)
            | PaneError::Foreign(message) => f.write_str(message),
            PaneError::TimedOut { op, after } => write!(
                f,
                "pane host did not answer {op:?} within {} s",
                after.as_secs()
            ),
        }
    }
}

/// Sends one request to a pane host over a fresh connection and returns its reply, within the
/// op's deadline ([`deadline::pane_reply`]).
pub(crate) async fn pane_request(socket: &Path, request: &Request) -> Result<Value, String> {
    pane_call(socket, request).await.map_err(|err| match err {
        PaneError::Unreachable(message)
        | PaneError::Failed(message)
        | PaneError::Busy(message)
        | PaneError::Foreign(message) => message,
        timed_out => format!("{timed_out} (socket {})", socket.display()),
    })
}

/// [`pane_request`] with the failure kept typed, for callers that report it to a client.
pub async fn pane_call(socket: &Path, request: &Request) -> Result<Value, PaneError> {
    let reply = pane_forward(socket, request, &request.to_line()).await?;
    serde_json::from_slice(&reply)
        .map_err(|err| PaneError::Failed(format!("pane host reply is not JSON: {err}")))
}

/// Forwards a client's request to a pane host as the client wrote it, and returns the pane
/// host's reply line as it came (newline included), within the op's deadline
/// ([`deadline::pane_reply`]).
///
/// The daemon only routes a pane op (issue 13, target 3): `request` is the parse of `line`,
/// which the daemon needed to validate the request and find the pane, and serialising it again
/// would give the pane host the same request at a cost. The reply is read only as far as
/// deciding whether its connection can be kept ([`reusable_after`]); the client gets its bytes.
/// `line` is one request without its newline, as `wire::read_line` gives it, or with it.
pub async fn pane_forward(
    socket: &Path,
    request: &Request,
    line: &[u8],
) -> Result<Vec<u8>, PaneError> {
    let within = deadline::pane_reply(&request.op);
    match tokio::time::timeout(within, exchange(socket, request, line)).await {
        Ok(reply) => reply,
        Err(_) => Err(PaneError::TimedOut {
            op: request.op.name().to_string(),
            after: within,
        }),
    }
}

/// [`pane_request`] with the reply read as `T`: a refusal or a reply that is not a `T` is an
/// error saying so.
pub(crate) async fn pane_ask<T: serde::de::DeserializeOwned>(
    socket: &Path,
    request: &Request,
) -> Result<T, String> {
    let reply = pane_request(socket, request).await?;
    match Reply::<T>::read(&reply) {
        Ok(Reply::Ok(body)) => Ok(body),
        Ok(Reply::Err(err)) => Err(format!(
            "pane host at {} refused {:?}: {err}",
            socket.display(),
            request.op.name()
        )),
        Err(err) => Err(format!(
            "pane host at {} answered {:?} with a bad reply: {err}",
            socket.display(),
            request.op.name()
        )),
    }
}

/// One request line (`request` is its parse) and one reply line, with no deadline of its own:
/// on a kept connection to the pane host when there is one, else on a new one, which is kept
/// after its reply.
async fn exchange(socket: &Path, request: &Request, line: &[u8]) -> Result<Vec<u8>, PaneError> {
    let owned;
    let line = if line.ends_with(b"\n") {
        line
    } else {
        owned = [line, b"\n"].concat();
        &owned[..]
    };
    let socket_id = socket_identity(socket);
    while let Some(mut kept) = take_kept(socket, socket_id) {
        // A kept connection the pane host closed while it sat idle (a pane host that ended,
        // a kill that closed it) refuses the write: nothing was sent on it, so the request
        // goes on another connection. Once the line is written, its outcome is this
        // connection's, whatever it is.
        if kept.peer_gone() || kept.writer.write_all(line).await.is_err() {
            continue;
        }
        let (reply, head) = kept.read_reply(socket).await.map_err(PaneError::Failed)?;
        if reusable_after(request, &head) {
            keep(socket, kept);
        }
        return Ok(reply);
    }
    let stream = connect(socket).await?;
    let (reader, writer) = stream.into_split();
    let mut fresh = PaneConnection {
        reader: BufReader::new(reader),
        writer,
        socket_id,
    };
    let written = fresh.writer.write_all(line).await;
    let reply = fresh.read_reply(socket).await;
    // A pane host at its connection cap sends its `busy` refusal as soon as it accepts, then
    // closes without reading, so the write may fail (`EPIPE`) with the refusal already
    // waiting to be read: a complete reply line wins over the write error.
    let reply = match (written, reply) {
        (_, Ok(reply)) => reply,
        (Err(err), Err(_)) => {
            return Err(PaneError::Failed(format!(
                "pane host at {} failed: {err}",
                socket.display()
            )))
        }
        (Ok(()), Err(err)) => return Err(PaneError::Failed(err)),
    };
    let (reply, head) = reply;
    if reusable_after(request, &head) {
        keep(socket, fresh);
    }
    Ok(reply)
}

/// Whether the pane host serves on after answering `request` with `reply`: it closes the
/// connection after a refusal at its connection cap or of an over-long line, and after a kill
/// it carried out.
fn reusable_after(request: &Request, reply: &ReplyHead) -> bool {
    !matches!(request.op, request::Op::Kill(_))
        && !matches!(reply.code(), Some(ErrorCode::Busy | ErrorCode::TooLong))
}

/// What the daemon reads of a reply line it passes on: whether it is an error, and its code.
/// Every other field is skipped unread, so a `peek` of a large screen is not built into a
/// JSON tree only to be written out again.
#[derive(serde::Deserialize)]
struct ReplyHead {
    #[serde(default)]
    ok: Option<bool>,
    #[serde(default)]
    error: Option<Value>,
}

impl ReplyHead {
    /// The reply's error code, if it is an error reply whose `error` is an error body (read as
    /// [`error_code`] reads it). The body stays a JSON value until here so that a reply whose
    /// `error` is not a body is still passed on, as any other reply is.
    fn code(&self) -> Option<ErrorCode> {
        let body = self.error.as_ref().filter(|_| self.ok == Some(false))?;
        belfry_proto::de::from_value::<ErrorBody>(body)
            .ok()
            .map(|body| body.code)
    }
}

/// How many idle connections the daemon keeps per pane host: enough for the requests that
/// overlap in practice (a DING worker's send beside a client's peek and an adapter's
/// snapshot), far below the pane host's connection cap.
const KEPT_PER_PANE_HOST: usize = 4;

/// Idle connections to pane hosts, by socket path.
///
/// They live here, beside the only code that talks to pane hosts, rather than in each
/// [`PaneEntry`], because requests reach pane hosts by socket path from everywhere in the
/// daemon (forwarding, DING workers, probes, kills). Entries go when their pane leaves the
/// registry ([`forget_connections`]); a connection whose pane host ended while it was kept is
/// found closed when it is next taken.
static KEPT: std::sync::LazyLock<Mutex<HashMap<PathBuf, Vec<PaneConnection>>>> =
    std::sync::LazyLock::new(Mutex::default);

/// An open connection to a pane host, checked as ours when it was made.
struct PaneConnection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// The socket file it was made through (device, inode): a pane host bound anew under the
    /// same path is another pane host, which this connection does not reach.
    socket_id: Option<(u64, u64)>,
}

impl PaneConnection {
    /// Reads one reply line (newline included) and what the daemon needs to know of it.
    async fn read_reply(&mut self, socket: &Path) -> Result<(Vec<u8>, ReplyHead), String> {
        let mut reply = Vec::new();
        let n = self
            .reader
            .read_until(b'\n', &mut reply)
            .await
            .map_err(|err| format!("pane host at {} failed: {err}", socket.display()))?;
        if n == 0 || !reply.ends_with(b"\n") {
            return Err(format!(
                "pane host at {} closed without a reply",
                socket.display()
            ));
        }
        let head = serde_json::from_slice(&reply)
            .map_err(|err| format!("pane host reply is not a JSON object: {err}"))?;
        Ok((reply, head))
    }

    /// True once the pane host has closed its end (checked without blocking).
    fn peer_gone(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let stream: &UnixStream = self.writer.as_ref();
        let mut fds = [PollFd::new(stream, PollFlags::RDHUP | PollFlags::IN)];
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // Readable while idle means the pane host closed it or wrote something unasked for;
        // either way the connection is not one to send a request on.
        match poll(&mut fds, Some(&zero)) {
            Ok(0) => false,
            Ok(_) | Err(_) => true,
        }
    }
}

/// The identity of the socket file at `socket`, or `None` if there is none.
fn socket_identity(socket: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(socket)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// A kept connection to the pane host now bound at `socket`, if there is one.
fn take_kept(socket: &Path, socket_id: Option<(u64, u64)>) -> Option<PaneConnection> {
    let mut kept = KEPT.lock();
    let list = kept.get_mut(socket)?;
    while let Some(connection) = list.pop() {
        if socket_id.is_some() && connection.socket_id == socket_id {
            return Some(connection);
        }
    }
    kept.remove(socket);
    None
}

/// Keeps a connection whose reply was read in full, for the next request.
fn keep(socket: &Path, connection: PaneConnection) {
    let mut kept = KEPT.lock();
    let list = kept.entry(socket.to_path_buf()).or_default();
    if list.len() < KEPT_PER_PANE_HOST {
        list.push(connection);
    }
}

/// Closes the kept connections to the pane host at `socket` (its pane left the registry).
pub fn forget_connections(socket: &Path) {
    let gone = KEPT.lock().remove(socket);
    drop(gone);
}

/// What a probe of a pane host's socket found.
#[derive(Debug)]
pub enum Probe {
    /// It answered `hello` and `info`: the `info` reply, as the pane host wrote it (a spawn
    /// passes it on as its answer; the daemon reads it as a [`PaneRecord`]).
    Answered(Value),
    /// Something listens on the socket but did not answer in time, answered `busy` (its
    /// connection cap) or has a full listen backlog: a pane host that is stopped or too busy
    /// (only a pane host binds that path).
    Silent,
    /// Nothing usable listens there (refused, missing, closed, or a refusing reply).
    Unreachable,
    /// Another uid serves the socket: never adopted, listed or retried (spec §6.1).
    Foreign,
}

/// How long each step of a probe may take.
const PROBE_STEP: Duration = Duration::from_secs(2);

/// Connects to a pane host socket and checks, before anything is written, that the pane host
/// runs as our uid or root (spec §6.1): a socket planted under the pane's name by another user
/// must never receive a request, let alone a launch spec or input.
///
/// The connect is non-blocking: a pane host whose listen backlog is full (stopped, or
/// overloaded) fails it at once with `EAGAIN`, which is [`PaneError::Busy`]: that pane host is
/// alive and still owns its socket.
pub(crate) async fn connect(socket: &Path) -> Result<UnixStream, PaneError> {
    let stream = UnixStream::connect(socket).await.map_err(|err| {
        let message = format!("pane host at {} is not reachable: {err}", socket.display());
        if err.kind() == std::io::ErrorKind::WouldBlock {
            PaneError::Busy(message)
        } else {
            PaneError::Unreachable(message)
        }
    })?;
    paths::check_server(socket, &stream).map_err(|err| PaneError::Foreign(err.to_string()))?;
    Ok(stream)
}

/// Says hello to a pane host and reads its record; `None` if it does not answer properly.
pub async fn probe(socket: &Path) -> Option<Value> {
    match probe_status(socket).await {
        Probe::Answered(info) => Some(info),
        Probe::Silent | Probe::Unreachable | Probe::Foreign => None,
    }
}

/// Says hello to a pane host and reads its record, telling a silent pane host from a missing
/// one.
pub async fn probe_status(socket: &Path) -> Probe {
    let hello = Request::new(0, request::Hello::ours());
    let info = Request::new(0, request::Info::default());
    let mut reply = Value::Null;
    for request in [hello, info] {
        reply = match tokio::time::timeout(PROBE_STEP, pane_call(socket, &request)).await {
            Ok(Ok(reply)) if reply.get("ok") == Some(&Value::Bool(true)) => reply,
            // At its connection cap a live pane host refuses with `busy`: it is alive and
            // owns its socket, so it is retried like a silent one, never dropped.
            Ok(Ok(reply)) if error_code(&reply) == Some(ErrorCode::Busy) => return Probe::Silent,
            Ok(Ok(_)) | Ok(Err(PaneError::Unreachable(_) | PaneError::Failed(_))) => {
                return Probe::Unreachable
            }
            Ok(Err(PaneError::Foreign(_))) => return Probe::Foreign,
            Ok(Err(PaneError::Busy(_) | PaneError::TimedOut { .. })) | Err(_) => {
                return Probe::Silent
            }
        };
    }
    Probe::Answered(reply)
}

/// The `error.code` of a refusing reply, if it has one.
pub use belfry_proto::reply::error_code;

/// True if a process with this pid exists.
/// A zombie (exited, not yet reaped by its parent) is not alive.
pub fn pid_alive(pid: u32) -> bool {
    let exists = match rustix::process::Pid::from_raw(pid as i32) {
        Some(pid) => rustix::process::test_kill_process(pid).is_ok(),
        None => false,
    };
    exists && !is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    // /proc/PID/stat: "pid (comm) S ..."; comm may hold spaces and parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// What the daemon found in the pane records at start.
#[derive(Default)]
pub struct Discovered {
    /// Pane hosts that answered the probe, with their `info`: adopted at once.
    pub live: Vec<(PaneEntry, Value)>,
    /// Pane hosts whose process is alive but that did not answer: retried in the background.
    pub stalled: Vec<PaneEntry>,
    /// Sessions whose pane host is gone; their records were removed.
    pub lost: Vec<String>,
}

/// Finds the pane hosts left by an earlier daemon. Every record is probed at once, so a few
/// stopped pane hosts cost the daemon's start one probe deadline, not one each.
pub async fn discover(runtime: &Path) -> Discovered {
    let dir = paths::panes_dir(runtime);
    let mut found = Discovered::default();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return found;
    };
    let mut probes = tokio::task::JoinSet::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Some(session) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if paths::validate_session_name(&session).is_err() {
            continue;
        }
        let socket = paths::pane_socket(runtime, &session);
        // The record file is the pane host's `info` record, written at each change.
        let pid = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<PaneRecord>(&bytes).ok())
            .map_or(0, |record| record.pid);
        probes.spawn(async move {
            let probed = probe_status(&socket).await;
            (
                path,
                PaneEntry {
                    session,
                    socket,
                    pid,
                },
                probed,
            )
        });
    }
    while let Some(probed) = probes.join_next().await {
        let Ok((path, mut entry, probed)) = probed else {
            continue;
        };
        let alive = entry.pid != 0 && pid_alive(entry.pid);
        match probed {
            Probe::Answered(info) => {
                if let Ok(Reply::Ok(record)) = Reply::<PaneRecord>::read(&info) {
                    entry.pid = record.pid;
                }
                found.live.push((entry, info));
            }
            Probe::Silent if alive => {
                tracing::warn!(
                    session = entry.session,
                    pid = entry.pid,
                    "pane host alive but not answering; retrying adoption in the background"
                );
                found.stalled.push(entry);
            }
            Probe::Unreachable if alive => {
                // Its process lives but its socket is unusable for now. It is kept unadopted
                // (listed `unresponsive`, its name taken) and retried until it answers or its
                // process dies, so a live pane host is never orphaned; if the pid was reused by
                // another process, it is dropped when that process ends.
                tracing::warn!(
                    session = entry.session,
                    pid = entry.pid,
                    "pane host pid alive but its socket is unusable; retrying adoption"
                );
                found.stalled.push(entry);
            }
            Probe::Foreign => {
                // Its record and socket are left as they are: they are not ours to remove.
                tracing::warn!(
                    session = entry.session,
                    socket = %entry.socket.display(),
                    "not adopted: the socket is served by another uid"
                );
            }
            Probe::Silent | Probe::Unreachable => {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_file(&entry.socket);
                found.lost.push(entry.session);
            }
        }
    }
    found
}

/// Forgets a pane host that died before it was adopted: its record and socket are removed.
pub fn remove_files(runtime: &Path, session: &str) {
    let _ = std::fs::remove_file(paths::pane_record(runtime, session));
    let _ = std::fs::remove_file(paths::pane_socket(runtime, session));
}

/// The executable of the pane host alone, which the daemon runs for each pane when it is
/// installed beside the daemon's executable: a pane then maps only the pages of its own code,
/// not the whole program's (docs/decisions.md).
pub const PANE_EXE: &str = "belfry-pane";

/// Launches a pane host for `spec` and waits for it to announce itself: [`PANE_EXE`] when it
/// is beside `exe`, else `exe pane-host` (the same code in the whole program).
pub async fn launch(
    exe: &Path,
    runtime: &Path,
    daemon_socket: &Path,
    state_dir: &Path,
    spec: &LaunchSpec,
) -> Result<PaneEntry, String> {
    let spec_json = serde_json::to_string(spec).map_err(|err| err.to_string())?;
    let beside = paths::runnable_beside(exe, PANE_EXE);
    let exe = beside.as_deref().unwrap_or(exe);
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("pane-host")
        .arg("--runtime")
        .arg(runtime)
        .arg("--daemon-socket")
        .arg(daemon_socket)
        .arg("--state")
        .arg(state_dir)
        // The spec (with the client's environment, which may hold secrets) goes through a pipe:
        // a command line is readable by every user in /proc/PID/cmdline.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(false);
    // SAFETY: setsid() is async-signal-safe and allocates nothing; it gives the pane host its
    // own session and process group so it survives the daemon (spec §6.0). Restoring the
    // descriptor limit reads an atomic and makes one system call, as `pre_exec` requires; the
    // pane host and its program get the soft limit the daemon was started with.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            crate::descriptors::restore_for_child()
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|err| format!("cannot start pane host {}: {err}", exe.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt as _;
        stdin
            .write_all(spec_json.as_bytes())
            .await
            .map_err(|err| format!("cannot hand the launch spec to the pane host: {err}"))?;
    }
    let stdout = child.stdout.take().ok_or("pane host has no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let announced = tokio::time::timeout(Duration::from_secs(15), lines.next_line()).await;
    let pid = child.id().unwrap_or(0);
    // Reap the pane host whenever it ends, so it never lingers as a zombie of this daemon.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let line = match announced {
        Ok(Ok(Some(line))) => line,
        Ok(Ok(None)) => return Err("pane host exited before it was ready".into()),
        Ok(Err(err)) => return Err(format!("cannot read pane host start-up: {err}")),
        Err(_) => return Err("pane host did not become ready within 15 s".into()),
    };
    let announced: Announced = serde_json::from_str(&line)
        .map_err(|err| format!("pane host start-up line is not JSON: {err}"))?;
    if let Some(error) = announced.error {
        return Err(error);
    }
    Ok(PaneEntry {
        session: spec.session.clone(),
        socket: paths::pane_socket(runtime, &spec.session),
        pid,
    })
}

/// Opens a long-lived subscription to a pane host; returns the line reader positioned after
/// the subscribe reply.
pub async fn subscribe(
    socket: &Path,
    revisions: bool,
) -> Result<
    (
        tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
        tokio::net::unix::OwnedWriteHalf,
    ),
    String,
> {
    subscribe_from(socket, revisions, ExitSoFar::Skip).await
}

/// Whether a subscription is first told an exit that came before it (see
/// [`request::Subscribe::exit_so_far`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitSoFar {
    /// Only what happens from now on.
    Skip,
    /// The running program's exit first, when it has already happened.
    Tell,
}

/// [`subscribe`], saying whether an exit that came before the subscription is told first.
pub async fn subscribe_from(
    socket: &Path,
    revisions: bool,
    exit_so_far: ExitSoFar,
) -> Result<
    (
        tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
        tokio::net::unix::OwnedWriteHalf,
    ),
    String,
> {
    let stream = connect(socket).await.map_err(|err| err.to_string())?;
    let (reader, mut writer) = stream.into_split();
    let request = Request::new(
        0,
        request::Subscribe {
            session: None,
            revisions: Some(revisions),
            exit_so_far: (exit_so_far == ExitSoFar::Tell).then_some(true),
            ..request::Subscribe::default()
        },
    );
    writer
        .write_all(&request.to_line())
        .await
        .map_err(|err| err.to_string())?;
    let mut lines = BufReader::new(reader).lines();
    match lines.next_line().await {
        // Only an `ok` reply is a subscription: a refusal (`busy` at the connection cap) is
        // followed by the pane host closing the connection, which must not read as its death.
        Ok(Some(reply)) => match serde_json::from_str::<Value>(&reply) {
            Ok(reply) if reply.get("ok") == Some(&Value::Bool(true)) => Ok((lines, writer)),
            Ok(reply) => Err(format!(
                "pane host at {} refused the subscription: {reply}",
                socket.display()
            )),
            Err(err) => Err(format!("pane host subscribe reply is not JSON: {err}")),
        },
        Ok(None) => Err("pane host closed the subscription".into()),
        Err(err) => Err(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    /// A listener that answers its first connection's first line with `reply`, then closes
    /// the connection, as a pane host at its connection cap does.
    async fn answer_once(reply: Value) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("w.sock");
        let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
        tokio::spawn(async move {
            if let Ok((mut stream, _)) = listener.accept().await {
                let mut line = serde_json::to_vec(&reply).unwrap_or_default();
                line.push(b'\n');
                let _ = stream.write_all(&line).await;
                let mut rest = [0u8; 256];
                let _ =
                    tokio::time::timeout(Duration::from_millis(200), stream.read(&mut rest)).await;
            }
        });
        (dir, socket)
    }

    #[tokio::test]
    async fn subscribe_answered_busy_is_an_error_not_a_subscription() {
        let busy = json!({"ok": false, "id": null,
                          "error": {"code": "busy", "message": "128 connections, its limit"}});
        let (_dir, socket) = answer_once(busy).await;
        let subscribed = tokio::time::timeout(Duration::from_secs(5), subscribe(&socket, false))
            .await
            .expect("subscribe answers within 5 s");
        let Err(err) = subscribed else {
            panic!("a busy refusal was taken for a subscription");
        };
        assert!(
            err.contains("refused the subscription") && err.contains("busy"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn subscribe_answered_ok_is_a_subscription() {
        let (_dir, socket) = answer_once(json!({"ok": true, "id": 0})).await;
        let subscribed = tokio::time::timeout(Duration::from_secs(5), subscribe(&socket, false))
            .await
            .expect("subscribe answers within 5 s");
        assert!(subscribed.is_ok());
    }

    #[tokio::test]
    async fn a_probe_answered_busy_is_silent_not_unreachable() {
        let busy = json!({"ok": false, "id": null,
                          "error": {"code": "busy", "message": "128 connections, its limit"}});
        let (_dir, socket) = answer_once(busy).await;
        assert!(matches!(probe_status(&socket).await, Probe::Silent));
    }

    /// The daemon finds a pane host's pid in its record file, which is the pane host's `info`
    /// record (read through [`PaneRecord`] since the record stopped being read by key): a live
    /// process whose socket does not answer is kept, under that pid, for adoption later.
    #[tokio::test]
    async fn discovery_reads_a_pane_host_pid_from_its_record_file() {
        let runtime = tempfile::tempdir().expect("temp dir");
        let panes = paths::panes_dir(runtime.path());
        std::fs::create_dir_all(&panes).expect("panes dir");
        let pid = std::process::id();
        let record = json!({"session": "w", "pid": pid, "child_pid": pid, "incarnation": "i",
            "generation": "sha256:g", "argv": ["sh"], "cwd": "/tmp", "started_at": 1,
            "socket": panes.join("w.sock"), "protocol": 1, "build": "0.1.0",
            "spec": {"session": "w", "argv": ["sh"]}, "revision": 3, "exited": null,
            "size": {"rows": 5, "cols": 30}, "clients": 0, "title": ""});
        std::fs::write(
            panes.join("w.json"),
            serde_json::to_vec_pretty(&record).expect("record"),
        )
        .expect("write record");
        let found = discover(runtime.path()).await;
        let pids: Vec<(String, u32)> = found
            .stalled
            .iter()
            .map(|entry| (entry.session.clone(), entry.pid))
            .collect();
        assert_eq!(pids, vec![("w".to_string(), pid)]);
        assert!(found.live.is_empty() && found.lost.is_empty());
    }
}
