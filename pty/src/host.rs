//! The pane host process (`belfry pane-host`): one pane, served on its own socket
//! (SPEC §6.0). It outlives the daemon; the daemon finds it again through its record file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};

use crate::input::{parse_steps, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS};
use crate::listener::Listener;
use crate::pane::{Expect, Pane, SendOutcome, WriteError};
use crate::paths;
use crate::spec::LaunchSpec;
use crate::txn::{self, StartRefused, TxnEnd, TxnJournal};
use crate::wire::{self, code, Frame};

/// Most connections a pane host serves at once (attach clients, subscriptions, the daemon's
/// forwarded requests); one more gets a `busy` reply. Well under the usual 1024-descriptor
/// limit, so a flood of clients cannot starve the PTY and the log of descriptors.
pub const MAX_CONNECTIONS: usize = 128;

/// The longest `wait` a request may ask for, in `timeout_ms` and in `quiet_ms` (24 hours).
/// Larger values are refused as `invalid` rather than waited on: a deadline past what an
/// `Instant` can hold would otherwise panic, and nothing waits forever.
pub const MAX_WAIT_MS: u64 = 24 * 60 * 60 * 1000;

/// What a pane host needs to start.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub spec: LaunchSpec,
    pub runtime: PathBuf,
    pub daemon_socket: PathBuf,
    pub state_dir: PathBuf,
}

/// Runs a pane host to completion. Prints one JSON line on stdout once it is serving
/// (`{"ready":true,…}`) or has failed (`{"error":…}`), then stops using stdout.
pub fn run(config: HostConfig) -> crate::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(config))
}

fn announce(value: &Value) {
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
    // Stop holding the spawner's pipe open: from here on stdout goes nowhere.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
}

async fn serve(config: HostConfig) -> crate::Result<()> {
    let session = config.spec.session.clone();
    paths::validate_session_name(&session)?;
    let panes_dir = paths::panes_dir(&config.runtime);
    paths::ensure_private_dir(&config.runtime)?;
    paths::ensure_private_dir(&panes_dir)?;
    let socket = paths::pane_socket(&config.runtime, &session);
    let record = paths::pane_record(&config.runtime, &session);

    let mut listener = match bind(&socket).await {
        Ok(listener) => Listener::new(listener, &socket, MAX_CONNECTIONS),
        Err(err) => {
            announce(&json!({"error": err.to_string()}));
            return Err(err);
        }
    };
    let inbox = config.state_dir.join("inbox").join(&session);
    let child_env = vec![
        (
            "BELFRY_SOCKET".to_string(),
            config.daemon_socket.display().to_string(),
        ),
        ("BELFRY_SESSION".to_string(), session.clone()),
        ("BELFRY_INBOX".to_string(), inbox.display().to_string()),
        (
            "BELFRY_HOOK_CONTEXT".to_string(),
            panes_dir
                .join(format!("{session}.context"))
                .display()
                .to_string(),
        ),
    ];
    let (pane, tasks) = match Pane::start(config.spec.clone(), child_env) {
        Ok(started) => started,
        Err(err) => {
            let _ = std::fs::remove_file(&socket);
            announce(&json!({"error": err.to_string()}));
            return Err(err);
        }
    };
    let started_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let ctx = Arc::new(HostContext {
        pane: Arc::clone(&pane),
        socket: socket.clone(),
        record: record.clone(),
        started_at,
        shutdown: tokio::sync::Notify::new(),
        txns: TxnJournal::default(),
    });
    ctx.write_record()?;
    let incarnation = pane.identity().incarnation;
    tokio::spawn(Arc::clone(&pane).read_output());
    tokio::spawn(Arc::clone(&pane).end_stalled_frames());
    tokio::spawn(Arc::clone(&pane).answer_queries(tasks.answers));
    tokio::spawn(Arc::clone(&pane).watch_child(tasks.child, incarnation));
    {
        let ctx = Arc::clone(&ctx);
        let mut events = pane.events.subscribe();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if event.get("what").and_then(Value::as_str) == Some("restart") {
                    let _ = ctx.write_record();
                }
            }
        });
    }
    announce(&json!({"ready": true, "pid": std::process::id(), "socket": socket}));
    tracing::info!(session, "pane host serving on {}", socket.display());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let ctx = Arc::clone(&ctx);
                tokio::spawn(async move {
                    // The permit counts the connection against the cap for as long as it lives.
                    let _permit = accepted.permit;
                    serve_connection(ctx, accepted.stream).await;
                });
            }
            _ = term.recv() => {
                // SIGTERM ends input the way `kill` does: the transaction in flight writes no
                // further byte and none starts while the child is being stopped.
                ctx.pane.stop_input("SIGTERM");
                break;
            }
            _ = ctx.shutdown.notified() => break,
        }
    }
    ctx.pane.stop_child().await;
    ctx.remove_files();
    tracing::info!(session, "pane host exiting");
    Ok(())
}

/// Binds the pane socket. A live socket of the same name is an error; a stale one is replaced.
///
/// Stale means the connect was refused (or the path vanished): a pane host that is stopped,
/// or at its connection cap with a full backlog, still owns its socket, and unlinking it would
/// leave that pane host and its program unreachable by any path.
async fn bind(socket: &Path) -> crate::Result<UnixListener> {
    if socket.exists() {
        if paths::socket_may_be_served(socket).await {
            return Err(crate::Error::invalid(format!(
                "a pane host is already serving {}",
                socket.display()
            )));
        }
        let _ = std::fs::remove_file(socket);
    }
    let listener = UnixListener::bind(socket).map_err(|source| crate::Error::Path {
        what: "cannot bind pane socket",
        path: socket.to_path_buf(),
        source,
    })?;
    paths::make_socket_private(socket)?;
    Ok(listener)
}

struct HostContext {
    pane: Arc<Pane>,
    socket: PathBuf,
    record: PathBuf,
    started_at: u64,
    shutdown: tokio::sync::Notify,
    /// What became of each send that carried a `txn` id (see [`crate::txn`]).
    txns: TxnJournal,
}

impl HostContext {
    fn record_json(&self) -> Value {
        let st = self.pane.state.lock();
        let mut record = json!({
            "session": self.pane.spec.session,
            "pid": std::process::id(),
            "child_pid": st.child_pid,
            "incarnation": st.incarnation,
            "generation": self.pane.generation,
            "argv": self.pane.spec.argv,
            "cwd": self.pane.spec.cwd,
            "started_at": self.started_at,
            "socket": self.socket,
            "protocol": wire::PROTOCOL_VERSION,
            "build": env!("CARGO_PKG_VERSION"),
            "spec": self.pane.spec,
        });
        record["revision"] = json!(st.revision);
        record["exited"] = json!(st.exited);
        record["size"] = json!({"rows": st.size.0, "cols": st.size.1});
        record["clients"] = json!(st.clients_len());
        record["title"] = json!(st.screen.title());
        record
    }

    /// Writes `<session>.json` atomically (temp file, then rename).
    fn write_record(&self) -> crate::Result<()> {
        let tmp = self.record.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(&self.record_json())
            .map_err(|err| crate::Error::invalid(err.to_string()))?;
        // 0600: the record holds the launch spec and its environment.
        let write = || -> std::io::Result<()> {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&bytes)
        };
        write().map_err(|source| crate::Error::Path {
            what: "cannot write pane record",
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, &self.record).map_err(|source| crate::Error::Path {
            what: "cannot write pane record",
            path: self.record.clone(),
            source,
        })?;
        Ok(())
    }

    fn remove_files(&self) {
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.record);
    }
}

async fn serve_connection(ctx: Arc<HostContext>, stream: UnixStream) {
    let Some((mut reader, mut writer)) = wire::accept_peer(stream).await else {
        return;
    };
    loop {
        let Some(request) = wire::next_request(&mut reader, &mut writer).await else {
            return;
        };
        match request.op.as_str() {
            "attach" => {
                attach(&ctx, request, reader, writer).await;
                return;
            }
            "subscribe" => {
                subscribe(&ctx, request, reader, writer).await;
                return;
            }
            _ => {}
        }
        let gone = || peer_gone(&writer);
        let reply = handle(&ctx, &request, &gone).await;
        if reply.is_null() {
            return;
        }
        let written = wire::write_json(&mut writer, &reply).await.is_ok();
        // A kill that was carried out ends the pane host even if its reply could not be
        // delivered: its input is stopped for good, so serving on would leave a pane that
        // refuses every send.
        if request.op == "kill" && reply.get("ok") == Some(&Value::Bool(true)) {
            ctx.shutdown.notify_one();
            return;
        }
        if !written {
            return;
        }
    }
}

/// Answers one request (every op except the streaming ones).
/// True once the peer has closed the connection (hang-up or read side shut down).
fn peer_gone(writer: &OwnedWriteHalf) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let stream: &tokio::net::UnixStream = writer.as_ref();
    let mut fds = [PollFd::new(stream, PollFlags::RDHUP)];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        _ => false,
    }
}

/// Answers one request (every op except the streaming ones). `Null` means "no reply: the
/// requester is gone".
async fn handle(
    ctx: &HostContext,
    request: &wire::Request,
    gone: &(dyn Fn() -> bool + Sync),
) -> Value {
    let id = &request.id;
    let body = &request.body;
    // The session check guards against a request meant for another pane: a `session` that is
    // null or not a string is refused, never skipped.
    let session = match wire::strict_str(body, "session", "session") {
        Ok(session) => session,
        Err(message) => return wire::error_reply(id, code::INVALID, message),
    };
    if let Some(session) = session {
        if session != ctx.pane.spec.session {
            return wire::error_reply(
                id,
                code::NOT_FOUND,
                format!(
                    "this pane host serves {:?}, not {session:?}",
                    ctx.pane.spec.session
                ),
            );
        }
    }
    let result = match request.op.as_str() {
        "hello" => {
            return match wire::negotiate(body) {
                Ok(version) => wire::ok_reply(
                    id,
                    json!({"version": version, "role": "pane-host", "build": env!("CARGO_PKG_VERSION"),
                           "session": ctx.pane.spec.session}),
                ),
                Err(message) => wire::error_reply(id, code::UNSUPPORTED_VERSION, message),
            }
        }
        "info" => Ok(ctx.record_json()),
        "snapshot" => snapshot(ctx, body),
        "scrollback" => scrollback(ctx, body),
        "send" => match send(ctx, id, body, gone).await {
            Ok(Value::Null) => return Value::Null,
            Ok(fields) => Ok(fields),
            Err(reply) => return reply,
        },
        "txn" => txn_op(ctx, body),
        "resize" => resize(ctx, body),
        "clear" => Ok(json!({"revision": ctx.pane.clear()})),
        "restart" => ctx
            .pane
            .restart()
            .await
            .map(|identity| json!({"identity": identity}))
            .map_err(|err| err.to_string()),
        "kill" => {
            // A kill whose requester has already gone (a daemon that gave up on a stopped pane
            // host, a killed CLI) is not carried out: nobody would learn of it, and the
            // stopping state below cannot be undone.
            if gone() {
                return Value::Null;
            }
            // Kill never waits for the input lock: a transaction in flight writes no further
            // byte, every later one is refused with nothing written, and the pane host stops
            // serving once the reply is out.
            ctx.pane.stop_input("kill");
            Ok(json!({"killed": ctx.pane.spec.session}))
        }
        "detach" => Ok(json!({"detached": ctx.pane.detach_all()})),
        "wait" => return wait(ctx, id, body).await,
        other => {
            return wire::error_reply(
                id,
                code::UNKNOWN_OP,
                format!("unknown op {other:?} for a pane host"),
            )
        }
    };
    match result {
        Ok(fields) => wire::ok_reply(id, fields),
        Err(message) => wire::error_reply(id, code::INVALID, message),
    }
}

fn snapshot(ctx: &HostContext, body: &Map<String, Value>) -> Result<Value, String> {
    let want_cells = wire::opt_bool(body, "cells")?.unwrap_or(false);
    let want_ansi = wire::opt_bool(body, "ansi")?.unwrap_or(false);
    let scrollback = wire::opt_u64(body, "scrollback")?;
    let st = ctx.pane.state.lock();
    let (row, col, visible) = st.screen.cursor();
    let mut out = json!({
        "session": ctx.pane.spec.session,
        "incarnation": st.incarnation,
        "generation": ctx.pane.generation,
        "revision": st.revision,
        "size": {"rows": st.size.0, "cols": st.size.1},
        "cursor": {"row": row, "col": col, "visible": visible},
        "modes": st.screen.modes(),
        "title": st.screen.title(),
        "lines": st.screen.lines(),
        "foreground": ctx.pane.foreground(st.child_pid),
        "exited": st.exited,
        "child_pid": st.child_pid,
        "pid": std::process::id(),
        "clients": st.clients_len(),
        "history": st.screen.history_len(),
    });
    if want_ansi {
        out["ansi"] = json!(st.screen.ansi_lines());
    }
    if want_cells {
        out["cells"] = st.screen.cells();
    }
    if let Some(n) = scrollback {
        let history = st.screen.history_len();
        let n = (n as usize).min(history);
        let (_, lines) = st.screen.scrollback(history - n, n);
        out["scrollback"] = json!(lines);
    }
    Ok(out)
}

fn scrollback(ctx: &HostContext, body: &Map<String, Value>) -> Result<Value, String> {
    let start = wire::opt_u64(body, "start")?.unwrap_or(0) as usize;
    let count = wire::opt_u64(body, "count")?.unwrap_or(u64::from(u32::MAX)) as usize;
    let st = ctx.pane.state.lock();
    let (total, lines) = st.screen.scrollback(start, count.min(100_000));
    Ok(
        json!({"revision": st.revision, "total": total, "history": st.screen.history_len(),
              "start": start, "lines": lines}),
    )
}

/// Parses the `expect` object of a send (SPEC §3). A field that is present must hold a value:
/// `"revision":null` is refused rather than read as "absent", which would turn a guarded send
/// into an unguarded one.
pub fn parse_expect(body: &Map<String, Value>) -> Result<Expect, String> {
    let Some(expect) = body.get("expect") else {
        return Ok(Expect::default());
    };
    let Value::Object(expect) = expect else {
        return Err("field \"expect\" must be an object".into());
    };
    for key in expect.keys() {
        if !matches!(key.as_str(), "incarnation" | "generation" | "revision") {
            return Err(format!(
                "unknown field \"expect.{key}\" (expected incarnation, generation, revision)"
            ));
        }
    }
    Ok(Expect {
        incarnation: wire::strict_str(expect, "incarnation", "expect.incarnation")?
            .map(str::to_string),
        generation: wire::strict_str(expect, "generation", "expect.generation")?
            .map(str::to_string),
        revision: wire::strict_u64(expect, "revision", "expect.revision")?,
    })
}

/// Checks the fields of a send that guard or bound it, without touching the pane. The daemon
/// runs it before forwarding, so a malformed guard never leaves the daemon.
pub fn check_send_request(body: &Map<String, Value>) -> Result<(), String> {
    parse_expect(body)?;
    parse_send_timeout(body)?;
    Ok(())
}

/// The `timeout_ms` of a send: how long its writes may wait, in total, for the program to read
/// (delay steps not counted). Default [`DEFAULT_TIMEOUT_MS`], at most [`MAX_TIMEOUT_MS`].
pub fn parse_send_timeout(body: &Map<String, Value>) -> Result<Duration, String> {
    let ms = wire::strict_u64(body, "timeout_ms", "timeout_ms")?.unwrap_or(DEFAULT_TIMEOUT_MS);
    if !(1..=MAX_TIMEOUT_MS).contains(&ms) {
        return Err(format!(
            "field \"timeout_ms\" is {ms}: a send's timeout must be 1..={MAX_TIMEOUT_MS} ms"
        ));
    }
    Ok(Duration::from_millis(ms))
}

/// The send op. `Ok(Null)` means "no reply: the requester is gone"; `Err` is a finished error
/// reply (its code depends on how the transaction failed).
async fn send(
    ctx: &HostContext,
    id: &Value,
    body: &Map<String, Value>,
    gone: &(dyn Fn() -> bool + Sync),
) -> Result<Value, Value> {
    let invalid = |message: String| wire::error_reply(id, code::INVALID, message);
    let expect = parse_expect(body).map_err(invalid)?;
    let write_timeout = parse_send_timeout(body).map_err(invalid)?;
    let input = body
        .get("input")
        .ok_or_else(|| invalid("missing field \"input\"".into()))?;
    let steps = parse_steps(input).map_err(|err| invalid(err.to_string()))?;
    if let Some(txn) = wire::opt_str(body, "txn").map_err(invalid)? {
        let send = Send {
            expect: &expect,
            steps: &steps,
            write_timeout,
        };
        return send_in_transaction(ctx, id, txn, send, gone).await;
    }
    match ctx.pane.send(&expect, &steps, gone, write_timeout).await {
        Ok(SendOutcome::Abandoned) => Ok(Value::Null),
        Ok(SendOutcome::Sent { revision }) => Ok(json!({"result": "sent", "revision": revision})),
        Ok(SendOutcome::Conflict { actual, exited }) => {
            let mut out = json!({"result": "conflict", "actual": actual});
            if exited {
                out["exited"] = json!(true);
            }
            Ok(out)
        }
        Err(err) => Err(write_error_reply(id, &err)),
    }
}

/// The error reply of a transaction that ended early. It carries `written`, the bytes that
/// reached the PTY, so a caller never takes a partial write for "nothing written".
fn write_error_reply(id: &Value, err: &WriteError) -> Value {
    let (code, message) = match err {
        WriteError::InputBusy { .. } | WriteError::TimedOut { .. } => {
            (code::TIMEOUT, format!("send timed out: {err}"))
        }
        WriteError::Aborted { .. } => (code::ABORTED, format!("send {err}")),
        WriteError::Io { .. } => (code::INVALID, err.to_string()),
    };
    let mut reply = wire::error_reply(id, code, message);
    reply["error"]["written"] = json!(err.written());
    reply
}

/// One guarded send's parsed request: what it expects, what it writes, and its write timeout.
#[derive(Clone, Copy)]
struct Send<'a> {
    expect: &'a Expect,
    steps: &'a [crate::input::Step],
    write_timeout: Duration,
}

/// A send that carries a transaction id: the same guarded send, with its fate recorded in the
/// journal so that a later requester can learn whether it was ever written (see [`crate::txn`]).
///
/// The journal's gate runs where the pane checks for a departed requester: under the input
/// lock, after the wait and before the compare and the first byte. A transaction fenced by a
/// query while it waited is dropped there, exactly like one whose requester has gone.
async fn send_in_transaction(
    ctx: &HostContext,
    id: &Value,
    txn: &str,
    send: Send<'_>,
    gone: &(dyn Fn() -> bool + Sync),
) -> Result<Value, Value> {
    let invalid = |message: String| wire::error_reply(id, code::INVALID, message);
    txn::validate_txn_id(txn).map_err(invalid)?;
    if ctx.txns.is_known(txn) {
        return Err(invalid(format!(
            "transaction id {txn:?} was already used (or fenced by a txn query); nothing was written"
        )));
    }
    let refused = parking_lot::Mutex::new(None);
    // The pane asks again after waiting out a restart; the journal entry is taken only once.
    let started = std::sync::atomic::AtomicBool::new(false);
    let gate = || {
        if gone() {
            return true;
        }
        if started.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        match ctx.txns.start(txn) {
            Ok(()) => {
                started.store(true, std::sync::atomic::Ordering::SeqCst);
                false
            }
            Err(reason) => {
                *refused.lock() = Some(reason);
                true
            }
        }
    };
    let outcome = ctx
        .pane
        .send(send.expect, send.steps, &gate, send.write_timeout)
        .await;
    let end = match &outcome {
        Ok(SendOutcome::Sent { .. }) => TxnEnd::Sent,
        Ok(SendOutcome::Conflict { .. } | SendOutcome::Abandoned) => TxnEnd::NotWritten,
        // A transaction that ended early says how many bytes reached the PTY: none means it
        // was never written, any means it may be on screen and must never be written again.
        Err(err) if err.written() == 0 => TxnEnd::NotWritten,
        Err(_) => TxnEnd::Failed,
    };
    ctx.txns.end(txn, end);
    match outcome {
        Ok(SendOutcome::Abandoned) => match *refused.lock() {
            None => Ok(Value::Null),
            Some(StartRefused::Fenced) => Err(invalid(format!(
                "transaction {txn:?} was fenced by a txn query while it waited; nothing was written"
            ))),
            Some(StartRefused::Reused) => Err(invalid(format!(
                "transaction id {txn:?} was already used; nothing was written"
            ))),
        },
        Ok(SendOutcome::Sent { revision }) => {
            Ok(json!({"result": "sent", "revision": revision, "txn": txn}))
        }
        Ok(SendOutcome::Conflict { actual, exited }) => {
            let mut out = json!({"result": "conflict", "actual": actual, "txn": txn});
            if exited {
                out["exited"] = json!(true);
            }
            Ok(out)
        }
        Err(err) => Err(write_error_reply(id, &err)),
    }
}

/// `txn`: what became of a transaction (`state`: never-written, running, written, unknown),
/// fencing one that has not started; with `"settle": true`, forget an ended one whose outcome
/// the requester has recorded.
fn txn_op(ctx: &HostContext, body: &Map<String, Value>) -> Result<Value, String> {
    let txn = wire::opt_str(body, "txn")?.ok_or("missing field \"txn\"")?;
    txn::validate_txn_id(txn)?;
    if wire::opt_bool(body, "settle")?.unwrap_or(false) {
        return Ok(json!({"txn": txn, "settled": ctx.txns.settle(txn)}));
    }
    Ok(json!({"txn": txn, "state": ctx.txns.query(txn).as_str()}))
}

fn resize(ctx: &HostContext, body: &Map<String, Value>) -> Result<Value, String> {
    let rows = wire::opt_u64(body, "rows")?.ok_or("missing field \"rows\"")?;
    let cols = wire::opt_u64(body, "cols")?.ok_or("missing field \"cols\"")?;
    let (rows, cols) = (
        u16::try_from(rows).map_err(|_| format!("rows {rows} is out of range"))?,
        u16::try_from(cols).map_err(|_| format!("cols {cols} is out of range"))?,
    );
    let revision = ctx.pane.resize(rows, cols).map_err(|err| err.to_string())?;
    Ok(json!({"revision": revision, "size": {"rows": rows, "cols": cols}}))
}

/// `wait`: until every given condition holds (revision reached, exited, screen regex, quiet for
/// N ms), or the timeout (default 30 s) passes.
async fn wait(ctx: &HostContext, id: &Value, body: &Map<String, Value>) -> Value {
    let parsed = (|| -> Result<_, String> {
        let revision = wire::opt_u64(body, "revision")?;
        let exit = wire::opt_bool(body, "exit")?.unwrap_or(false);
        let regex = match wire::opt_str(body, "regex")? {
            Some(pattern) => Some(
                regex::Regex::new(pattern)
                    .map_err(|err| format!("field \"regex\" is not a valid regex: {err}"))?,
            ),
            None => None,
        };
        let quiet = wait_ms(body, "quiet_ms")?.map(Duration::from_millis);
        let timeout = Duration::from_millis(wait_ms(body, "timeout_ms")?.unwrap_or(30_000));
        if revision.is_none() && !exit && regex.is_none() && quiet.is_none() {
            return Err("wait needs at least one of revision, exit, regex, quiet_ms".into());
        }
        Ok((revision, exit, regex, quiet, timeout))
    })();
    let (revision, exit, regex, quiet, timeout) = match parsed {
        Ok(parsed) => parsed,
        Err(message) => return wire::error_reply(id, code::INVALID, message),
    };
    // Both durations are at most MAX_WAIT_MS, so this and `last_change + q` below cannot
    // overflow; the checked add keeps even a clock near its end from panicking.
    let Some(deadline) = Instant::now().checked_add(timeout) else {
        return wire::error_reply(
            id,
            code::INVALID,
            format!(
                "field \"timeout_ms\" {} is too far in the future",
                timeout.as_millis()
            ),
        );
    };
    let mut changes = ctx.pane.revision_tx.subscribe();
    loop {
        let (met, quiet_until, identity) = {
            let st = ctx.pane.state.lock();
            let mut met = revision.is_none_or(|r| st.revision >= r);
            met &= !exit || st.exited.is_some();
            if let Some(regex) = &regex {
                met &= regex.is_match(&st.screen.lines().join("\n"));
            }
            let quiet_until = quiet.and_then(|q| st.last_change.checked_add(q));
            if let Some(until) = quiet_until {
                met &= Instant::now() >= until;
            }
            (
                met,
                quiet_until,
                json!({"revision": st.revision, "incarnation": st.incarnation,
                                      "exited": st.exited}),
            )
        };
        if met {
            return wire::ok_reply(id, json!({"result": "matched", "state": identity}));
        }
        let now = Instant::now();
        if now >= deadline {
            return wire::error_reply(
                id,
                code::TIMEOUT,
                format!(
                    "wait timed out after {} ms; state {identity}",
                    timeout.as_millis()
                ),
            );
        }
        let wake_at = quiet_until.map_or(deadline, |q| q.max(now).min(deadline));
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake_at)) => {}
        }
    }
}

/// A `wait` duration field in ms: absent, or 0..=[`MAX_WAIT_MS`].
fn wait_ms(body: &Map<String, Value>, field: &str) -> Result<Option<u64>, String> {
    match wire::opt_u64(body, field)? {
        Some(ms) if ms > MAX_WAIT_MS => Err(format!(
            "field \"{field}\" is {ms} ms, above the maximum of {MAX_WAIT_MS} ms (24 hours)"
        )),
        ms => Ok(ms),
    }
}

/// `subscribe`: a stream of events — revision (coalesced to the latest), exit and lifecycle —
/// until the client closes the connection.
async fn subscribe(
    ctx: &HostContext,
    request: wire::Request,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let revisions = match wire::opt_bool(&request.body, "revisions") {
        Ok(revisions) => revisions.unwrap_or(true),
        Err(message) => {
            let reply = wire::error_reply(&request.id, code::INVALID, message);
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        }
    };
    let mut events = ctx.pane.events.subscribe();
    let mut changes = ctx.pane.revision_tx.subscribe();
    let identity = ctx.pane.identity();
    let reply = wire::ok_reply(
        &request.id,
        json!({"subscribed": true, "identity": identity}),
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        return;
    }
    let session = ctx.pane.spec.session.clone();
    let mut sink = Vec::new();
    loop {
        let event = tokio::select! {
            changed = changes.changed(), if revisions => {
                if changed.is_err() { return; }
                let revision = *changes.borrow_and_update();
                json!({"event": "revision", "session": session, "revision": revision})
            }
            event = events.recv() => match event {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    json!({"event": "lagged", "session": session, "missed": n})
                }
                Err(_) => return,
            },
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut sink) => {
                // The subscriber speaks no more requests; EOF ends the stream.
                match read { Ok(0) | Err(_) => return, Ok(_) => { sink.clear(); continue; } }
            }
        };
        if wire::write_json(&mut writer, &event).await.is_err() {
            return;
        }
        if revisions {
            // Coalesce bursts: at most one revision event per millisecond per subscriber.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// `attach`: switch the connection to frames; the first data frame is a full redraw.
async fn attach(
    ctx: &HostContext,
    request: wire::Request,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let body = &request.body;
    // A mistyped or null read_only must never turn into a writable client: every field is
    // strict.
    let fields = (|| -> Result<_, String> {
        Ok((
            wire::strict_bool(body, "read_only", "read_only")?.unwrap_or(false),
            wire::opt_u64(body, "rows")?,
            wire::opt_u64(body, "cols")?,
        ))
    })();
    let (read_only, rows, cols) = match fields {
        Ok(fields) => fields,
        Err(message) => {
            let reply = wire::error_reply(&request.id, code::INVALID, message);
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        }
    };
    let size = match (rows, cols) {
        (Some(r), Some(c)) if (1..=1000).contains(&r) && (1..=1000).contains(&c) => {
            Some((r as u16, c as u16))
        }
        (None, None) => None,
        _ => {
            let reply = wire::error_reply(
                &request.id,
                code::INVALID,
                "attach rows and cols must both be 1..=1000",
            );
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        }
    };
    let pane = &ctx.pane;
    let (redraw, mut handle) = pane.attach(read_only, size);
    let client = handle.id;
    let reply = wire::ok_reply(
        &request.id,
        json!({"attached": true, "client": client, "read_only": read_only,
               "identity": pane.identity()}),
    );
    if wire::write_json(&mut writer, &reply).await.is_err()
        || writer
            .write_all(&Frame::Data(redraw).encode())
            .await
            .is_err()
    {
        pane.detach(client);
        return;
    }
    let exited = pane.state.lock().exited;
    if let Some(exit) = exited {
        // The program already ended: show its last screen, then say so.
        let _ = writer
            .write_all(&Frame::Control(json!({"exited": exit})).encode())
            .await;
        pane.detach(client);
        return;
    }
    let output = async {
        loop {
            tokio::select! {
                frame = handle.rx.recv() => {
                    let Some(frame) = frame else { return };
                    let last = matches!(&frame, Frame::Control(v) if v.get("detach").is_some());
                    if writer.write_all(&frame.encode()).await.is_err() || last {
                        return;
                    }
                }
                _ = handle.wake.notified() => {
                    if handle.lagged.load(std::sync::atomic::Ordering::Relaxed) {
                        let redraw = pane.resync(&mut handle);
                        if writer.write_all(&Frame::Data(redraw).encode()).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    };
    let input = async {
        loop {
            match Frame::read(&mut reader).await {
                Ok(Some(Frame::Data(bytes))) => {
                    if read_only {
                        continue;
                    }
                    pane.client_activity(client, None);
                    if let Err(err) = pane.write_input(&bytes).await {
                        tracing::warn!("attached input not written: {err}");
                    }
                }
                Ok(Some(Frame::Control(control))) => {
                    if control.get("detach").is_some() {
                        return;
                    }
                    if let Some(size) = control.get("resize") {
                        let rows = size.get("rows").and_then(Value::as_u64).unwrap_or(0);
                        let cols = size.get("cols").and_then(Value::as_u64).unwrap_or(0);
                        if (1..=1000).contains(&rows) && (1..=1000).contains(&cols) {
                            pane.client_activity(client, Some((rows as u16, cols as u16)));
                        }
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
    };
    tokio::select! {
        _ = output => {}
        _ = input => {}
    }
    pane.detach(client);
}
