//! The control-plane daemon (`belfry server`): its socket, the op dispatch, the event bus and
//! the monitors that watch every pane host (spec §6).
//!
//! This file holds the daemon's state ([`DaemonConfig`], `Daemon`), its start (`run`, `serve`:
//! the locks, the socket, adoption, the accept loop), each client connection's loop
//! (`serve_connection`: a subscribe becomes a stream, a `bind` hands the connection to the pane
//! host, a pane op is forwarded, any other op is answered by `handle`), and `handle`, the
//! dispatch of the ops the daemon answers itself: each handler returns its op's reply type
//! from `belfry_proto::reply` or an `ErrorBody`, and `handle` puts the envelope with the
//! request's id around it. Each op family is a file, as mini-redis's `cmd/`:
//! - `spawn.rs`: `spawn`, from the request's launch spec to an adopted pane host, and its
//!   charter.
//! - `panes.rs`: `list`, `kill` and `shutdown`, the ops over the panes that are.
//! - `forward.rs`: the pane ops (`send`, `wait`, `peek`, …) passed to the pane's host as the
//!   client wrote them, abandoned when the requester hangs up.
//! - `events.rs`: the event bus, its kept history, and `subscribe`.
//! - `ding.rs`: the DING ops (`ding-status`, `ding-nudge`, `ding-turn-boundary`) and `hook`,
//!   which reach a pane's DING worker (`crate::ding`).
//! - `hosts.rs`: the pane hosts the daemon adopts at start and watches (their monitors, their
//!   DING workers and host lifecycle events).
//! - `lock.rs`: the locks that keep one daemon per socket, runtime and state directory.

mod ding;
mod events;
mod forward;
mod hosts;
mod lock;
mod panes;
mod spawn;

use std::path::PathBuf;
use std::sync::Arc;

use belfry_proto::reply::{self, ErrorBody};
use belfry_proto::request::Op;
use belfry_proto::{ErrorCode, Request, SessionName, Side};
use belfry_transport::listener::Listener;
use belfry_transport::paths;
use belfry_transport::wire;
use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, Notify};

use self::ding::{ding_nudge, ding_status, ding_turn_boundary, hook_event};
use self::events::subscribe;
use self::forward::{forward, requester_hung_up, write_line};
use self::hosts::adopt_existing;
use self::lock::{open_lock, open_lock_in, take_lock, DIR_LOCK};
use self::panes::{kill, list, shutdown};
use self::spawn::spawn;
use crate::ding::DingEngine;
use crate::handoff;
use crate::registry::{PaneEntry, Registry};
use crate::Error;

pub use self::spawn::spec_from_request;

/// Most client connections the daemon serves at once (CLI commands, subscriptions, adapter
/// sidecars, `belfry dispatch`); one more gets a `busy` reply. Its own connections to pane
/// hosts do not count.
pub const MAX_CONNECTIONS: usize = 512;

/// Where the daemon lives and what it starts pane hosts with.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub runtime: PathBuf,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    /// The daemon's executable: new panes run `belfry-pane` beside it, or it as `belfry
    /// pane-host` when there is none (`registry::launch`).
    pub exe: PathBuf,
    /// Where adapter sidecars' stderr goes.
    pub log_dir: PathBuf,
}

struct Daemon {
    pub(super) config: DaemonConfig,
    pub(super) registry: Registry,
    pub(super) bus: broadcast::Sender<belfry_proto::Event>,
    /// The last [`EVENT_HISTORY`] bus events but revisions, each with the Unix time in
    /// ms it was published: the recent past a subscriber asks for with `history`. Memory only;
    /// a restarted daemon starts it empty. Its lock is held across each publish, so a
    /// subscriber that takes its receiver and its snapshot under the lock misses nothing
    /// between them and hears nothing twice.
    pub(super) history: parking_lot::Mutex<std::collections::VecDeque<(u64, belfry_proto::Event)>>,
    pub(super) shutdown: Notify,
    pub(super) ding: DingEngine,
}

/// Runs the daemon in the foreground until `shutdown`.
pub fn run(config: DaemonConfig) -> Result<(), Error> {
    // Before the runtime's threads exist, which inherit the mask: a daemon started with
    // SIGTERM blocked would never see its shutdown signal (nor would its pane hosts).
    belfry_transport::signals::unblock_signals();
    // Before anything is opened: every pane costs the daemon descriptors, and the soft limit a
    // session starts with (often 1024) would stop it near 140 panes (see `crate::descriptors`).
    let limits = crate::descriptors::raise_soft_limit();
    // Two workers: a DING worker's durable file work (fsync before every send, spec §7.3)
    // blocks the thread it runs on, and must not stall every other request meanwhile.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "cannot start the async runtime",
            path: PathBuf::new(),
            source,
        })?;
    // A daemon started on demand has no terminal: its log is where a client that saw it exit
    // at start points the user.
    runtime
        .block_on(serve(config, limits))
        .inspect_err(|err| tracing::error!("daemon stopped: {err}"))
}

async fn serve(config: DaemonConfig, limits: crate::descriptors::Limits) -> Result<(), Error> {
    paths::ensure_private_dir(&config.runtime)?;
    paths::ensure_private_dir(&paths::panes_dir(&config.runtime))?;
    // A socket outside the runtime directory ($BELFRY_SOCKET) gets its directory created if
    // missing, but an existing directory is never re-moded: it may be /tmp.
    if let Some(parent) = config.socket.parent() {
        if !parent.exists() {
            paths::ensure_private_dir(parent)?;
        }
    }
    // One daemon per socket, per runtime directory and per state directory. Each lock is held
    // for the daemon's lifetime and released by the kernel however it dies, so a `kill -9`
    // never leaves a stale lock behind. They are all taken before anything is bound, removed
    // or adopted, so a refused daemon leaves no trace.
    let socket_lock_path = paths::daemon_lock(&config.socket);
    let socket_lock = take_lock(open_lock(&socket_lock_path)?, &socket_lock_path)
        .await?
        .map_err(|_| Error::AlreadyRunning(config.socket.clone()))?;
    // Two daemons over one state directory would each run a DING worker for every pane and
    // paste every notice twice; over one runtime directory they would both adopt every pane
    // host and fire its lifecycle events twice. So the lock is per directory, not per socket.
    // The state directory is opened without following a link, and its lock taken through that
    // handle: a `BELFRY_STATE` that is a link is refused before anything is written.
    let state_dir = paths::open_state_dir(&config.state_dir)?;
    let state_lock = config.state_dir.join(DIR_LOCK);
    let runtime_lock = config.runtime.join(DIR_LOCK);
    let mut dir_locks = Vec::new();
    for (what, dir, lock, file) in [
        (
            "state directory",
            &config.state_dir,
            &state_lock,
            open_lock_in(&state_dir, &state_lock)?,
        ),
        (
            "runtime directory",
            &config.runtime,
            &runtime_lock,
            open_lock(&runtime_lock)?,
        ),
    ] {
        let held = take_lock(file, lock)
            .await?
            .map_err(|holder| Error::DirInUse {
                what,
                dir: dir.clone(),
                lock: lock.clone(),
                holder,
            })?;
        dir_locks.push(held);
    }
    let _ = std::fs::remove_file(&config.socket);
    let listener = UnixListener::bind(&config.socket).map_err(|source| Error::Io {
        what: "cannot bind daemon socket",
        path: config.socket.clone(),
        source,
    })?;
    paths::make_socket_private(&config.socket)?;
    let mut listener = Listener::new(listener, &config.socket, MAX_CONNECTIONS);
    let (bus, _) = broadcast::channel(4096);
    let daemon = Arc::new(Daemon {
        config,
        registry: Registry::default(),
        bus,
        history: parking_lot::Mutex::new(std::collections::VecDeque::new()),
        shutdown: Notify::new(),
        ding: DingEngine::default(),
    });
    tracing::info!(
        "{}",
        limits.describe(crate::descriptors::open_now().unwrap_or(0))
    );
    adopt_existing(&daemon).await;
    tracing::info!("daemon serving on {}", daemon.config.socket.display());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| Error::Io {
            what: "daemon I/O",
            path: PathBuf::new(),
            source,
        })?;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let daemon = Arc::clone(&daemon);
                tokio::spawn(async move {
                    // The permit counts the connection against the cap for as long as it lives.
                    let _permit = accepted.permit;
                    serve_connection(daemon, accepted.stream).await;
                });
            }
            _ = term.recv() => break,
            _ = daemon.shutdown.notified() => break,
        }
    }
    let _ = std::fs::remove_file(&daemon.config.socket);
    drop(dir_locks);
    drop(socket_lock);
    tracing::info!("daemon exiting");
    Ok(())
}

async fn serve_connection(daemon: Arc<Daemon>, stream: UnixStream) {
    let Some((mut reader, mut writer)) = wire::accept_peer(stream).await else {
        return;
    };
    loop {
        let Some((request, line)) = next_request(&mut reader, &mut writer).await else {
            return;
        };
        if let Op::Subscribe(op) = &request.op {
            subscribe(&daemon, &request.id, op, reader, writer).await;
            return;
        }
        if let Op::Bind(op) = &request.op {
            let reply = match pane_for(&daemon, op.session.as_ref()) {
                Ok(entry) => match handoff::bind(&entry, &request.id, reader, writer).await {
                    handoff::Bound::Handed | handoff::Bound::Ended => return,
                    handoff::Bound::Kept(kept_reader, kept_writer, reply) => {
                        (reader, writer) = (kept_reader, kept_writer);
                        reply
                    }
                },
                Err(err) => reply::error_with(&request.id, err),
            };
            if wire::write_json(&mut writer, &reply).await.is_err() {
                return;
            }
            continue;
        }
        if request.op.is_pane_op() {
            // A forwarded request is abandoned as soon as its requester hangs up: dropping the
            // pane connection lets the pane host see the requester gone, so a send still queued
            // behind another transaction writes nothing (spec §3). `biased` checks the requester
            // first, so a request whose sender is already gone is never forwarded at all.
            let reply = tokio::select! {
                biased;
                () = requester_hung_up(&mut reader) => {
                    tracing::info!(op = request.op.name(), "requester hung up; forwarded request abandoned");
                    return;
                }
                reply = forward(&daemon, &request, &line) => reply,
            };
            let written = match reply {
                Ok(bytes) => write_line(&mut writer, &bytes).await,
                Err(reply) => wire::write_json(&mut writer, &reply).await,
            };
            if written.is_err() {
                return;
            }
            continue;
        }
        let reply = handle(&daemon, &request).await;
        if wire::write_json(&mut writer, &reply).await.is_err() {
            return;
        }
        if matches!(request.op, Op::Shutdown(_)) && reply.get("ok") == Some(&Value::Bool(true)) {
            daemon.shutdown.notify_one();
            return;
        }
    }
}

/// Reads the next well-formed request of a client connection, and the line it came in.
///
/// The same reading as `wire::next_request` (blank lines skipped; a malformed line answered
/// with an error and the connection kept; an over-long line answered and the connection
/// ended; an op the daemon does not serve is `unknown-op`), except that the line is kept: a
/// pane op is forwarded as the client wrote it ([`forward`]).
async fn next_request(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: &mut OwnedWriteHalf,
) -> Option<(Request, Vec<u8>)> {
    loop {
        let line = match wire::read_line(reader).await {
            Ok(wire::Line::Text(line)) => line,
            Ok(wire::Line::Eof) | Err(_) => return None,
            Ok(wire::Line::TooLong) => {
                let reply = reply::error(
                    &Value::Null,
                    ErrorCode::TooLong,
                    format!("request line exceeds {} bytes; closing", wire::MAX_LINE),
                );
                let _ = wire::write_json(writer, &reply).await;
                return None;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Request::parse_at(&line, Some(Side::Daemon)) {
            Ok(request) => return Some((request, line)),
            Err(bad) => {
                let reply = reply::error(&bad.id, bad.code, bad.message);
                wire::write_json(writer, &reply).await.ok()?;
            }
        }
    }
}

/// Answers one request the daemon serves itself (pane ops are [`forward`]ed). Each op's
/// handler answers its own reply type or an [`ErrorBody`]; the envelope around it, with the
/// request's id, is made here once.
async fn handle(daemon: &Arc<Daemon>, request: &Request) -> Value {
    let id = &request.id;
    match &request.op {
        Op::Hello(hello) => reply::answer(
            id,
            hello
                .negotiate()
                .map(|version| belfry_proto::reply::Hello {
                    version,
                    role: "daemon".into(),
                    build: env!("CARGO_PKG_VERSION").into(),
                    pid: Some(std::process::id()),
                    session: None,
                })
                .map_err(|message| ErrorBody::new(ErrorCode::UnsupportedVersion, message)),
        ),
        Op::Spawn(op) => spawn(daemon, id, op).await,
        Op::List(_) => reply::ok(id, &list(daemon).await),
        Op::Kill(op) => reply::answer(id, kill(daemon, op.session.as_ref()).await),
        Op::Attach(op) => reply::answer(
            id,
            pane_for(daemon, op.session.as_ref()).map(|entry| belfry_proto::reply::AttachTarget {
                session: entry.session,
                socket: entry.socket.display().to_string(),
            }),
        ),
        Op::Shutdown(op) => {
            reply::answer(id, shutdown(daemon, op.kill_panes.unwrap_or(false)).await)
        }
        Op::DingStatus(op) => reply::answer(id, ding_status(daemon, op.session.as_ref()).await),
        Op::DingNudge(op) => reply::answer(id, ding_nudge(daemon, op.session.as_ref())),
        Op::DingTurnBoundary(op) => reply::answer(id, ding_turn_boundary(daemon, op).await),
        Op::Hook(op) => reply::answer(id, hook_event(daemon, op).await),
        // Served by the connection loop before it gets here.
        Op::Subscribe(_) => reply::error(id, ErrorCode::Internal, "subscribe is a stream"),
        other => reply::error(
            id,
            ErrorCode::UnknownOp,
            format!("unknown op {:?} for the daemon", other.name()),
        ),
    }
}

/// Resolves the `session` of a request to a live pane, or the error its reply carries.
fn pane_for(daemon: &Daemon, session: Option<&SessionName>) -> Result<PaneEntry, ErrorBody> {
    let session =
        session.ok_or_else(|| ErrorBody::new(ErrorCode::Invalid, "missing field \"session\""))?;
    let session = session.as_str();
    if let Some(entry) = daemon.registry.get(session) {
        return Ok(entry);
    }
    match daemon.registry.unadopted(session) {
        Some(entry) => Err(ErrorBody::new(
            ErrorCode::Unavailable,
            unadopted_message(&entry),
        )),
        None => Err(ErrorBody::new(
            ErrorCode::NotFound,
            format!("no pane named {session:?}"),
        )),
    }
}

/// Why a pane that exists cannot be served yet: its pane host did not answer the daemon.
fn unadopted_message(entry: &PaneEntry) -> String {
    format!(
        "pane host of {:?} (pid {}) is alive but has not answered the daemon since it started; \
         it may be stopped (`kill -CONT {}` resumes it) and is adopted as soon as it answers",
        entry.session, entry.pid, entry.pid
    )
}
