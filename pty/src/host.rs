//! The pane host process (`belfry pane-host`): one pane, served on its own socket
//! (spec §6.0). It outlives the daemon; the daemon finds it again through its record file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use belfry_proto::event::Event;
use belfry_proto::reply::{self, ErrorBody};
use belfry_proto::request::{self as req, Op};
use belfry_proto::{Control, ErrorCode, Side};
use serde_json::{json, Value};
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};

use crate::input::parse_steps;
use crate::listener::Listener;
use crate::pane::{Expect, Pane, SendOutcome, WaitFor, WriteError};
use crate::paths;
use crate::txn::{self, StartRefused, TxnEnd, TxnJournal};
use crate::wire::{self, Conn, Frame};
pub use belfry_proto::limits::MAX_WAIT_MS;
use belfry_proto::request::send_timeout;
use belfry_proto::spec::LaunchSpec;

/// Most connections a pane host serves at once (attach clients, subscriptions, the daemon's
/// forwarded requests); one more gets a `busy` reply. Well under the usual 1024-descriptor
/// limit, so a flood of clients cannot starve the PTY and the log of descriptors.
pub const MAX_CONNECTIONS: usize = 128;

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
    crate::pane::unblock_signals();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(config))
}

/// The `PATH` the pane's program gets: the directory of this executable first, then the `PATH`
/// the program would have had without it. The program (and its hooks) run `belfry inbox read`
/// and the like by name, and must reach the same `belfry` that started the pane rather than
/// whatever another `PATH` entry holds, or nothing at all when belfry was never installed.
/// `None` (leave `PATH` as the spec has it) when this executable cannot be found.
fn child_path(spec: &LaunchSpec) -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let bin_dir = exe.parent()?.to_str()?.to_string();
    // The same precedence the child's environment is built with in `Pane::spawn_child`: the
    // launch's extra variables, then its declared ones, then the base environment it starts
    // from (or this process's own when there is none).
    let inherited = spec
        .extra_env
        .get("PATH")
        .or_else(|| spec.env.get("PATH"))
        .cloned()
        .or_else(|| {
            if spec.base_env.is_empty() {
                std::env::var("PATH").ok()
            } else {
                spec.base_env.get("PATH").cloned()
            }
        });
    Some(prepend_path_entry(&bin_dir, inherited.as_deref()))
}

/// `dir` in front of `path`, with any later copy of `dir` dropped so a pane started from a pane
/// does not grow its `PATH` by one entry per level. Other entries, empty ones included (they mean the working directory), are kept as they are.
fn prepend_path_entry(dir: &str, path: Option<&str>) -> String {
    let rest = path
        .filter(|path| !path.is_empty())
        .into_iter()
        .flat_map(|path| path.split(':'))
        .filter(|entry| *entry != dir);
    std::iter::once(dir)
        .chain(rest)
        .collect::<Vec<_>>()
        .join(":")
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
    let child_env = belfry_proto::PaneEnv {
        session: session.clone(),
        socket: config.daemon_socket.clone(),
        inbox: Some(inbox),
        hook_context: Some(panes_dir.join(format!("{session}.context"))),
        ..belfry_proto::PaneEnv::default()
    }
    .vars()
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .chain(child_path(&config.spec).map(|path| ("PATH".to_string(), path)))
    .collect();
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
    tokio::spawn(Arc::clone(&pane).release_program_pages());
    tokio::spawn(Arc::clone(&pane).answer_queries(tasks.answers));
    tokio::spawn(Arc::clone(&pane).watch_child(tasks.child, incarnation));
    {
        let ctx = Arc::clone(&ctx);
        let mut events = pane.subscribe_events();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if matches!(&event, Event::Lifecycle(lifecycle) if lifecycle.what == "restart") {
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
    ctx.pane.log_unsaid_lag_of_every_client();
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
    /// A request that names a pane must name this one.
    fn check_session(&self, op: &Op) -> Result<(), ErrorBody> {
        match op.session() {
            Some(session) if *session != *self.pane.spec().session => Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "this pane host serves {:?}, not {:?}",
                    self.pane.spec().session,
                    session.as_str()
                ),
            )),
            _ => Ok(()),
        }
    }

    fn record_json(&self) -> Value {
        let st = self.pane.recorded();
        let spec = self.pane.spec();
        let mut record = json!({
            "session": spec.session,
            "pid": std::process::id(),
            "child_pid": st.child_pid,
            "incarnation": st.incarnation,
            "generation": self.pane.generation(),
            "argv": spec.argv,
            "cwd": spec.cwd,
            "started_at": self.started_at,
            "socket": self.socket,
            "protocol": wire::PROTOCOL_VERSION,
            "build": env!("CARGO_PKG_VERSION"),
            "spec": spec,
        });
        record["revision"] = json!(st.revision);
        record["exited"] = json!(st.exited);
        record["size"] = json!({"rows": st.size.0, "cols": st.size.1});
        record["clients"] = json!(st.clients);
        record["title"] = json!(st.title);
        if let Some(summary) = st.program_status {
            record["program_status"] = json!(summary);
        }
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
    let Some((reader, writer)) = wire::accept_peer(stream).await else {
        return;
    };
    serve_requests(ctx, reader, writer).await;
}

/// Serves the requests of one connection, in order, until it ends or turns into a stream.
async fn serve_requests(
    ctx: Arc<HostContext>,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    loop {
        let Some(request) = wire::next_request(&mut reader, &mut writer, Side::PaneHost).await
        else {
            return;
        };
        // The session check guards against a request meant for another pane, streams too.
        if let Err(err) = ctx.check_session(&request.op) {
            if wire::write_json(&mut writer, &reply::error_with(&request.id, err))
                .await
                .is_err()
            {
                return;
            }
            continue;
        }
        match request.op {
            Op::Attach(op) => {
                attach(&ctx, &request.id, &op, reader, writer).await;
                return;
            }
            Op::Subscribe(op) => {
                subscribe(&ctx, &request.id, &op, reader, writer).await;
                return;
            }
            Op::Adopt(op) => {
                // The client's connection takes the place of the daemon's in this task, and
                // its permit under the connection cap with it.
                match adopt(&ctx, &request.id, &op, reader, writer).await {
                    Some((client_reader, client_writer)) => {
                        (reader, writer) = (client_reader, client_writer);
                        continue;
                    }
                    None => return,
                }
            }
            _ => {}
        }
        let gone = || peer_gone(&writer);
        let Some(outcome) = handle(&ctx, &request.op, &gone).await else {
            return;
        };
        let killed = matches!(request.op, Op::Kill(_)) && outcome.is_ok();
        let written = wire::write_json(&mut writer, &reply::answer(&request.id, outcome))
            .await
            .is_ok();
        // A kill that was carried out ends the pane host even if its reply could not be
        // delivered: its input is stopped for good, so serving on would leave a pane that
        // refuses every send.
        if killed {
            ctx.shutdown.notify_one();
            return;
        }
        if !written {
            return;
        }
    }
}

/// How long a pane host that agreed to adopt a connection waits for its descriptor (the
/// daemon sends it as soon as it reads the agreement).
const ADOPT_DEADLINE: Duration = Duration::from_secs(2);

/// `adopt`: the daemon hands this pane host a client's connection that asked to `bind` to the
/// pane (issue 13, target 3), so the client's later requests reach the pane host without the
/// daemon's hop and its connection outlives the daemon.
///
/// On the daemon's own connection: the agreement (`{"ready":true}`), the descriptor with one
/// byte, then `{"adopted":true}` once the pane host holds it. On the client's connection the
/// pane host then answers the client's `bind` and serves it as any connection of its own.
/// Nothing is written to the client's connection before `adopted` went to the daemon, and a
/// failure before then leaves it untouched: the daemon answers the `bind` itself and keeps
/// serving the client. The client's connection, returned, takes the place of the daemon's in
/// the task that served it, and its place under the connection cap.
async fn adopt(
    ctx: &Arc<HostContext>,
    id: &Value,
    op: &req::Adopt,
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) -> Option<Conn> {
    let refuse = |message: String| reply::error(id, ErrorCode::Invalid, message);
    if !reader.buffer().is_empty() {
        // The descriptor rides on the byte after the agreement: one already read with the
        // request would have been closed.
        let message = "adopt must be the last thing sent before its answer".to_string();
        let _ = wire::write_json(&mut writer, &refuse(message)).await;
        return None;
    }
    wire::write_json(&mut writer, &reply::ok(id, &json!({"ready": true})))
        .await
        .ok()?;
    let stream: &UnixStream = reader.get_ref().as_ref();
    let taken = match tokio::time::timeout(
        ADOPT_DEADLINE,
        crate::fdpass::receive(stream, 1, "hand-over byte"),
    )
    .await
    {
        Ok(Ok(fds)) => adopted_stream(fds),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!(
            "no connection within {} ms",
            ADOPT_DEADLINE.as_millis()
        )),
    };
    let client = match taken {
        Ok(client) => client,
        Err(message) => {
            tracing::warn!("adopt refused: {message}");
            let _ = wire::write_json(&mut writer, &refuse(message)).await;
            return None;
        }
    };
    // A write that fails means the daemon gave up waiting: it ends the client's connection
    // itself.
    wire::write_json(&mut writer, &reply::ok(id, &json!({"adopted": true})))
        .await
        .ok()?;
    drop((reader, writer));
    let (reader, mut writer) = wire::accept_peer(client).await?;
    let bound = belfry_proto::reply::Bound {
        session: ctx.pane.spec().session.to_string(),
        role: "pane-host".into(),
        pid: std::process::id(),
        socket: ctx.socket.display().to_string(),
    };
    wire::write_json(&mut writer, &reply::ok(&op.bind_id, &bound))
        .await
        .ok()?;
    tracing::info!("serving a client's connection the daemon handed over");
    Some((reader, writer))
}

/// The one descriptor an `adopt` carried, as a connection to serve: it must be a Unix stream
/// socket (its peer is checked as any client's when it is served).
fn adopted_stream(fds: Vec<std::os::fd::OwnedFd>) -> Result<UnixStream, String> {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let Some(fd) = fds.into_iter().next() else {
        return Err("no descriptor".into());
    };
    let domain = sockopt::socket_domain(&fd);
    let kind = sockopt::socket_type(&fd);
    if !matches!(
        (domain, kind),
        (Ok(AddressFamily::UNIX), Ok(SocketType::STREAM))
    ) {
        return Err("the descriptor handed over is not a Unix stream socket".into());
    }
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream
        .set_nonblocking(true)
        .and_then(|()| UnixStream::from_std(stream))
        .map_err(|err| format!("cannot serve the connection handed over: {err}"))
}

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

/// What a handler answers: the reply's body, or the error it carries.
type Answer = Result<Value, ErrorBody>;

/// A typed reply body as the value a reply carries.
fn body(fields: impl serde::Serialize) -> Answer {
    serde_json::to_value(fields)
        .map_err(|err| ErrorBody::new(ErrorCode::Internal, format!("cannot encode reply: {err}")))
}

/// Answers one request (every op except the streaming ones). `None` means "no reply: the
/// requester is gone".
async fn handle(ctx: &HostContext, op: &Op, gone: &(dyn Fn() -> bool + Sync)) -> Option<Answer> {
    ctx.pane.note_activity();
    let answer = match op {
        Op::Hello(hello) => match hello.negotiate() {
            Ok(version) => body(reply::Hello {
                version,
                role: "pane-host".into(),
                build: env!("CARGO_PKG_VERSION").into(),
                pid: None,
                session: Some(ctx.pane.spec().session.clone()),
            }),
            Err(message) => Err(ErrorBody::new(ErrorCode::UnsupportedVersion, message)),
        },
        Op::Info(_) => Ok(ctx.record_json()),
        Op::Snapshot(op) => snapshot(ctx, op).and_then(body),
        Op::Scrollback(op) => body(scrollback(ctx, op)),
        Op::Send(op) => send(ctx, op, gone).await?.and_then(body),
        Op::Txn(op) => txn_op(ctx, op).and_then(body),
        Op::Resize(op) => resize(ctx, op).and_then(body),
        Op::Clear(_) => body(reply::Cleared {
            revision: ctx.pane.clear(),
        }),
        Op::Restart(_) => match ctx.pane.restart().await {
            Ok(identity) => body(reply::Restarted { identity }),
            Err(err) => Err(ErrorBody::invalid(err.to_string())),
        },
        Op::Kill(_) => {
            // A kill whose requester has already gone (a daemon that gave up on a stopped pane
            // host, a killed CLI) is not carried out: nobody would learn of it, and the
            // stopping state below cannot be undone.
            if gone() {
                return None;
            }
            // Kill never waits for the input lock: a transaction in flight writes no further
            // byte, every later one is refused with nothing written, and the pane host stops
            // serving once the reply is out.
            ctx.pane.stop_input("kill");
            body(reply::Killed {
                killed: ctx.pane.spec().session.clone(),
            })
        }
        Op::Detach(_) => body(reply::Detached {
            detached: ctx.pane.detach_all(),
        }),
        Op::Wait(op) => wait(ctx, op).await.and_then(body),
        other => Err(ErrorBody::new(
            ErrorCode::UnknownOp,
            format!("unknown op {:?} for a pane host", other.name()),
        )),
    };
    Some(answer)
}

fn snapshot(ctx: &HostContext, op: &req::Snapshot) -> Result<reply::Screen, ErrorBody> {
    ctx.pane
        .screen(
            op.scrollback,
            op.ansi.unwrap_or(false),
            op.cells.unwrap_or(false),
        )
        .map_err(|err| ErrorBody::new(ErrorCode::Internal, err))
}

fn scrollback(ctx: &HostContext, op: &req::Scrollback) -> reply::History {
    let start = usize::try_from(op.start.unwrap_or(0)).unwrap_or(usize::MAX);
    let count = op.count.map_or(u32::MAX as usize, |n| {
        usize::try_from(n).unwrap_or(usize::MAX)
    });
    ctx.pane.history(start, count.min(100_000))
}

/// The send op. `None` means "no reply: the requester is gone"; an error's code depends on how
/// the transaction failed.
async fn send(
    ctx: &HostContext,
    op: &req::Send,
    gone: &(dyn Fn() -> bool + Sync),
) -> Option<Result<reply::Sent, ErrorBody>> {
    let parsed = send_timeout(op).and_then(|timeout| {
        let steps = parse_steps(&op.input).map_err(|err| err.to_string())?;
        Ok((timeout, steps))
    });
    let (write_timeout, steps) = match parsed {
        Ok(parsed) => parsed,
        Err(message) => return Some(Err(ErrorBody::invalid(message))),
    };
    let expect = op.expect.clone().unwrap_or_default();
    let send = Send {
        expect: &expect,
        steps: &steps,
        write_timeout,
        announce: op.notice != Some(true),
    };
    if let Some(txn) = &op.txn {
        return send_in_transaction(ctx, txn, send, gone).await;
    }
    match ctx
        .pane
        .send(&expect, &steps, gone, write_timeout, send.announce)
        .await
    {
        Ok(SendOutcome::Abandoned) => None,
        Ok(SendOutcome::Sent { revision }) => Some(Ok(reply::Sent::Sent {
            revision,
            txn: None,
        })),
        Ok(SendOutcome::Conflict { actual, exited }) => Some(Ok(reply::Sent::Conflict {
            actual,
            exited,
            txn: None,
        })),
        Err(err) => Some(Err(write_error(&err))),
    }
}

/// The error of a transaction that ended early. It carries `written`, the bytes that reached
/// the PTY, so a caller never takes a partial write for "nothing written".
fn write_error(err: &WriteError) -> ErrorBody {
    let (code, message) = match err {
        WriteError::InputBusy { .. } | WriteError::TimedOut { .. } => {
            (ErrorCode::Timeout, format!("send timed out: {err}"))
        }
        WriteError::Aborted { .. } => (ErrorCode::Aborted, format!("send {err}")),
        WriteError::Io { .. } => (ErrorCode::Invalid, err.to_string()),
    };
    ErrorBody {
        code,
        message,
        written: Some(err.written() as u64),
    }
}

/// One guarded send's parsed request: what it expects, what it writes, and its write timeout.
#[derive(Clone, Copy)]
struct Send<'a> {
    expect: &'a Expect,
    steps: &'a [crate::input::Step],
    write_timeout: Duration,
    /// Whether the pane announces it as input from outside the program (every send but a
    /// DING notice, see [`crate::pane::Pane::send`]).
    announce: bool,
}

/// A send that carries a transaction id: the same guarded send, with its fate recorded in the
/// journal so that a later requester can learn whether it was ever written (see [`crate::txn`]).
///
/// The journal's gate runs where the pane checks for a departed requester: under the input
/// lock, after the wait and before the compare and the first byte. A transaction fenced by a
/// query while it waited is dropped there, exactly like one whose requester has gone.
async fn send_in_transaction(
    ctx: &HostContext,
    txn: &str,
    send: Send<'_>,
    gone: &(dyn Fn() -> bool + Sync),
) -> Option<Result<reply::Sent, ErrorBody>> {
    if let Err(message) = txn::validate_txn_id(txn) {
        return Some(Err(ErrorBody::invalid(message)));
    }
    if ctx.txns.is_known(txn) {
        return Some(Err(ErrorBody::invalid(format!(
            "transaction id {txn:?} was already used (or fenced by a txn query); nothing was written"
        ))));
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
        .send(
            send.expect,
            send.steps,
            &gate,
            send.write_timeout,
            send.announce,
        )
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
    let refused = *refused.lock();
    let named = txn;
    let txn = Some(txn.to_string());
    Some(match outcome {
        Ok(SendOutcome::Abandoned) => match refused {
            None => return None,
            Some(StartRefused::Fenced) => Err(ErrorBody::invalid(format!(
                "transaction {named:?} was fenced by a txn query while it waited; nothing was \
                 written"
            ))),
            Some(StartRefused::Reused) => Err(ErrorBody::invalid(format!(
                "transaction id {named:?} was already used; nothing was written"
            ))),
        },
        Ok(SendOutcome::Sent { revision }) => Ok(reply::Sent::Sent { revision, txn }),
        Ok(SendOutcome::Conflict { actual, exited }) => Ok(reply::Sent::Conflict {
            actual,
            exited,
            txn,
        }),
        Err(err) => Err(write_error(&err)),
    })
}

/// `txn`: what became of a transaction (`state`: never-written, running, written, unknown),
/// fencing one that has not started; with `"settle": true`, forget an ended one whose outcome
/// the requester has recorded.
fn txn_op(ctx: &HostContext, op: &req::Txn) -> Result<reply::TxnState, ErrorBody> {
    txn::validate_txn_id(&op.txn).map_err(ErrorBody::invalid)?;
    let me = format!("{}-{}", std::process::id(), ctx.started_at);
    if op.host.as_deref().is_some_and(|host| host != me) {
        // The socket path was bound again: the transaction went to an earlier pane host,
        // whose journal died with it. Nothing here may fence, settle or vouch for it.
        let settle = op.settle.unwrap_or(false);
        return Ok(reply::TxnState {
            txn: op.txn.clone(),
            state: (!settle).then(|| txn::TxnState::Unknown.as_str().to_string()),
            settled: settle.then_some(false),
        });
    }
    if op.settle.unwrap_or(false) {
        return Ok(reply::TxnState {
            txn: op.txn.clone(),
            state: None,
            settled: Some(ctx.txns.settle(&op.txn)),
        });
    }
    Ok(reply::TxnState {
        txn: op.txn.clone(),
        state: Some(ctx.txns.query(&op.txn).as_str().to_string()),
        settled: None,
    })
}

fn resize(ctx: &HostContext, op: &req::Resize) -> Result<reply::Resized, ErrorBody> {
    let size = belfry_proto::Size::new(op.rows, op.cols)
        .map_err(|err| ErrorBody::invalid(err.to_string()))?;
    let revision = ctx
        .pane
        .resize(size.rows(), size.cols())
        .map_err(|err| ErrorBody::invalid(err.to_string()))?;
    Ok(reply::Resized { revision, size })
}

/// `wait`: until every given condition holds (revision reached, exited, screen regex, quiet for
/// N ms), or the timeout (default 30 s) passes.
async fn wait(ctx: &HostContext, op: &req::Wait) -> Result<reply::Waited, ErrorBody> {
    let parsed = (|| -> Result<_, String> {
        let regex = match &op.regex {
            Some(pattern) => Some(
                crate::screen_regex::ScreenRegex::new(pattern)
                    .map_err(|err| format!("field \"regex\" is not a valid regex: {err}"))?,
            ),
            None => None,
        };
        let quiet = wait_ms(op.quiet_ms, "quiet_ms")?.map(Duration::from_millis);
        let timeout = Duration::from_millis(
            wait_ms(op.timeout_ms, "timeout_ms")?.unwrap_or(belfry_proto::limits::DEFAULT_WAIT_MS),
        );
        let exit = op.exit.unwrap_or(false);
        if op.revision.is_none()
            && !exit
            && regex.is_none()
            && quiet.is_none()
            && op.status.is_none()
        {
            return Err(
                "wait needs at least one of revision, exit, regex, quiet_ms, status".into(),
            );
        }
        Ok((op.revision, exit, regex, quiet, timeout))
    })();
    let (revision, exit, mut regex, quiet, timeout) = parsed.map_err(ErrorBody::invalid)?;
    let status = op.status;
    // Both durations are at most MAX_WAIT_MS, so this and `last_change + q` below cannot
    // overflow; the checked add keeps even a clock near its end from panicking.
    let Some(deadline) = Instant::now().checked_add(timeout) else {
        return Err(ErrorBody::invalid(format!(
            "field \"timeout_ms\" {} is too far in the future",
            timeout.as_millis()
        )));
    };
    let mut changes = ctx.pane.watch_revision();
    loop {
        let (met, quiet_until, identity) = ctx.pane.wait_check(&mut WaitFor {
            revision,
            exit,
            status,
            regex: regex.as_mut(),
            quiet,
        });
        if met {
            return Ok(reply::Waited {
                result: "matched".into(),
                state: identity,
            });
        }
        let now = Instant::now();
        if now >= deadline {
            let state = serde_json::to_string(&identity).unwrap_or_default();
            return Err(ErrorBody::new(
                ErrorCode::Timeout,
                format!(
                    "wait timed out after {} ms; state {state}",
                    timeout.as_millis()
                ),
            ));
        }
        let wake_at = quiet_until.map_or(deadline, |q| q.max(now).min(deadline));
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake_at)) => {}
        }
    }
}

/// A `wait` duration field in ms: absent, or 0..=[`MAX_WAIT_MS`].
fn wait_ms(ms: Option<u64>, field: &str) -> Result<Option<u64>, String> {
    match ms {
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
    id: &Value,
    op: &req::Subscribe,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let revisions = op.revisions.unwrap_or(true);
    let mut events = ctx.pane.subscribe_events();
    let mut changes = ctx.pane.watch_revision();
    // Read after the broadcast is subscribed to: an exit that happens in between is both here
    // and on the broadcast, and the broadcast's copy is skipped by its incarnation below.
    let exit_so_far = if op.exit_so_far == Some(true) {
        ctx.pane.exit_event()
    } else {
        None
    };
    let reply = reply::ok(
        id,
        &reply::Subscribed {
            subscribed: true,
            session: None,
            identity: Some(ctx.pane.identity()),
        },
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        return;
    }
    let session = ctx.pane.spec().session.clone();
    let told_exit = match &exit_so_far {
        Some(event @ Event::Exit { incarnation, .. }) => {
            if wire::write_json(&mut writer, &event.to_value())
                .await
                .is_err()
            {
                return;
            }
            Some(incarnation.clone())
        }
        _ => None,
    };
    let mut sink = Vec::new();
    loop {
        let event = tokio::select! {
            changed = changes.changed(), if revisions => {
                if changed.is_err() { return; }
                let revision = *changes.borrow_and_update();
                Event::Revision { session: session.clone(), revision }
            }
            event = events.recv() => match event {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    Event::Lagged { session: Some(session.clone()), missed: n }
                }
                Err(_) => return,
            },
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut sink) => {
                // The subscriber speaks no more requests; EOF ends the stream.
                match read { Ok(0) | Err(_) => return, Ok(_) => { sink.clear(); continue; } }
            }
        };
        if let (Event::Exit { incarnation, .. }, Some(told)) = (&event, &told_exit) {
            if incarnation == told {
                // Sent first already: every exit is told once.
                continue;
            }
        }
        if wire::write_json(&mut writer, &event.to_value())
            .await
            .is_err()
        {
            return;
        }
        if revisions {
            // Coalesce bursts: at most one revision event per millisecond per subscriber.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The pause after a redraw sent to resynchronise a client (see `attach`).
const RESYNC_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// `attach`: switch the connection to frames; the first data frame is a full redraw. A client
/// that asks for it hands its terminal over instead (see [`crate::terminal`]): the pane host
/// then writes the redraw and the output to that terminal, and the connection carries only
/// control frames towards the client.
async fn attach(
    ctx: &HostContext,
    id: &Value,
    op: &req::Attach,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    // A mistyped or null read_only never turns into a writable client: the field is strict.
    let read_only = op.read_only.unwrap_or(false);
    let handover = op.terminal == Some(true);
    // A watching client types nothing into the pane: its keys stay its own.
    let keyboard_prefix = op.keyboard.filter(|_| handover && !read_only);
    let size = match (op.rows, op.cols) {
        (Some(rows), Some(cols)) => match belfry_proto::Size::new(rows, cols) {
            Ok(size) => Some(size.pair()),
            Err(err) => {
                let reply = reply::error(id, ErrorCode::Invalid, format!("attach {err}"));
                let _ = wire::write_json(&mut writer, &reply).await;
                return;
            }
        },
        (None, None) => None,
        _ => {
            let reply = reply::error(
                id,
                ErrorCode::Invalid,
                "attach rows and cols must be given together",
            );
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        }
    };
    let pane = &ctx.pane;
    let (redraw, mut handle) = pane.attach(read_only, size);
    let client = handle.id;
    let reply = reply::ok(
        id,
        &reply::Attached {
            attached: true,
            client,
            read_only,
            identity: pane.identity(),
            terminal: handover,
            keyboard: keyboard_prefix.is_some(),
        },
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        pane.detach(client);
        return;
    }
    let mut out = Out::Frames;
    let mut keyboard = None;
    if handover {
        let stream = reader.get_ref().as_ref();
        let buffered = !reader.buffer().is_empty();
        let taken = crate::terminal::take(stream, buffered, client, keyboard_prefix.is_some())
            .await
            .and_then(|(terminal, keys)| {
                if let (Some(fd), Some(prefix)) = (keys, keyboard_prefix) {
                    keyboard = Some(crate::terminal::Keyboard::new(fd, prefix)?);
                }
                Ok(terminal)
            });
        match taken {
            Ok(terminal) => {
                out = Out::Terminal {
                    terminal,
                    paused: false,
                    held: Held::default(),
                }
            }
            Err(err) => {
                tracing::warn!("attach client {client}: terminal hand-over failed: {err}");
                pane.detach(client);
                return;
            }
        }
    }
    if out
        .send(
            &mut writer,
            &mut vec![Frame::Data(redraw.into(), wire::PenOnly::NONE)],
        )
        .await
        .is_err()
    {
        pane.detach(client);
        return;
    }
    let exited = pane.exited();
    if let Some(exit) = exited {
        // The program already ended: show its last screen, then say so.
        let _ = out
            .send(
                &mut writer,
                &mut vec![Frame::Control(Control::Exited(exit))],
            )
            .await;
        pane.detach(client);
        return;
    }
    // The input side's requests to the output side: a redraw (after the client drew over the
    // pane), a pause or its end (a client whose terminal the pane host writes), a detach.
    let (requests_tx, mut requests) = tokio::sync::mpsc::unbounded_channel::<Ask>();
    // Whether the pane host reads the client's keyboard now: the client gives it the turn,
    // the keyboard's reader gives it back with keys the client must see.
    // The receiver exists from the start: a turn given before the keyboard's reader first
    // runs (the control can be in the first read of the connection) is kept, not lost.
    let (keyboard_turn, mut turn) = tokio::sync::watch::channel(false);
    let output = async {
        // The frames of one write: whatever the queue holds when the first arrives (up to
        // one vectored write's worth), so a client that fell a little behind catches up in
        // a few system calls rather than one per chunk.
        let mut batch = Vec::with_capacity(wire::MAX_BATCH);
        let mut pace = Pace::default();
        // When a client whose terminal fell behind is sent its redraw: once the terminal has
        // taken what it already holds (`Pace::behind`), so the redraw shows the screen as it
        // is then, not as it was when the terminal fell behind.
        let mut resync_at: Option<tokio::time::Instant> = None;
        loop {
            // A terminal the pane host writes: while the writer has more than a few screens
            // the terminal has not taken, the output waits in the pane's queue, where a redraw
            // replaces it if the terminal stays behind (`Pace`).
            let (full, behind, backlog) = match &out {
                Out::Terminal { terminal, .. } if resync_at.is_none() => {
                    let (rows, cols) = pane.client_size(client);
                    let budget = usize::from(rows) * usize::from(cols) * TERMINAL_SCREENS;
                    let unwritten = terminal.unwritten();
                    let behind = pace.behind(
                        terminal.taken(),
                        unwritten + handle.rx.bytes(),
                        &terminal.backlog(),
                        std::time::Instant::now(),
                    );
                    (unwritten > budget, behind, Some(terminal.backlog()))
                }
                _ => (false, None, None),
            };
            if let Some(wait) = behind {
                // What is on its way to the terminal is dropped now and the pane queues no
                // more for it (nor holds the program for it): a redraw replaces all of it.
                out.drop_unwritten();
                handle
                    .lagged
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                resync_at = Some(tokio::time::Instant::now() + wait);
            }
            let progressed = async {
                match backlog {
                    Some(backlog) if full => {
                        let _ = tokio::time::timeout(PACE_CHECK, backlog.progressed()).await;
                    }
                    _ => std::future::pending().await,
                }
            };
            let drained = async {
                match resync_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            // Whether the client fell behind (`Pane::broadcast`, the reader's patience with
            // it spent, its terminal behind for longer than `TERMINAL_BEHIND`) and is to be
            // sent a redraw now.
            let fell_behind = tokio::select! {
                _ = drained => true,
                _ = progressed => false,
                frame = handle.rx.recv(), if !full && resync_at.is_none() => {
                    let Some(frame) = frame else { return };
                    batch.push(frame);
                    while batch.len() < wire::MAX_BATCH {
                        match handle.rx.try_recv() {
                            Some(frame) => batch.push(frame),
                            None => break,
                        }
                    }
                    // A client found behind is not sent this batch and the rest of its queue
                    // (at a slow client's pace, seconds of output it would see only to have
                    // it drawn over): the redraw replaces them now.
                    let behind = handle.lagged.load(std::sync::atomic::Ordering::Relaxed);
                    if !behind && out.send(&mut writer, &mut batch).await.is_err() {
                        return;
                    }
                    behind
                }
                _ = handle.wake.notified() => {
                    resync_at.is_none()
                        && handle.lagged.load(std::sync::atomic::Ordering::Relaxed)
                }
                ask = requests.recv() => {
                    let Some(ask) = ask else { return };
                    match out.ask(&mut writer, ask).await {
                        Ok(Some(resync)) => {
                            if resync {
                                out.drop_unwritten();
                                pace.resynchronised(out.taken());
                                resync_at = None;
                                let mut frames = pane.resync(&mut handle, &mut batch);
                                if out.send(&mut writer, &mut frames).await.is_err() {
                                    return;
                                }
                            }
                        }
                        // The client left.
                        Ok(None) | Err(_) => return,
                    }
                    false
                }
            };
            if fell_behind {
                // What the terminal's writer has not written yet goes too: the redraw shows
                // the screen now, not the output on its way to it.
                out.drop_unwritten();
                pace.resynchronised(out.taken());
                resync_at = None;
                let mut frames = pane.resync(&mut handle, &mut batch);
                if out.send(&mut writer, &mut frames).await.is_err() {
                    return;
                }
                // A client shown redraws (a cropped one, after every change) gets at most
                // about a hundred a second; changes meanwhile make one more.
                tokio::time::sleep(RESYNC_PAUSE).await;
            }
        }
    };
    let input = async {
        loop {
            match Frame::read(&mut reader).await {
                Ok(Some(Frame::Data(bytes, _))) => {
                    if read_only {
                        continue;
                    }
                    let bytes = pane.client_input(client, bytes.to_vec());
                    if bytes.is_empty() {
                        continue;
                    }
                    if let Err(err) = pane.write_input(&bytes).await {
                        tracing::warn!("attached input not written: {err}");
                    }
                }
                // A resize out of range never arrives here (`Frame::read` passes it over): the
                // client's terminal is what it is, and the pane keeps its size.
                Ok(Some(Frame::Control(control))) => match control {
                    Control::Detach { .. } => {
                        // The output side answers a client whose terminal it writes with the
                        // bytes that undo what it wrote, and then ends the attach. Reading
                        // goes on, so the client's going away ends it too (a terminal that
                        // takes nothing can hold the output side up).
                        if requests_tx.send(Ask::Detach).is_err() {
                            return;
                        }
                    }
                    Control::Colors(answers) => pane.learn_colors(answers.as_bytes()),
                    Control::Redraw => {
                        let _ = requests_tx.send(Ask::Redraw);
                    }
                    Control::Pause(on) => {
                        let _ = requests_tx.send(if on { Ask::Pause } else { Ask::Resume });
                    }
                    Control::Resize(size) => pane.client_activity(client, Some(size.pair())),
                    // After the keys it gave back (sent before this, so written first).
                    Control::Keyboard => {
                        keyboard_turn.send_replace(true);
                    }
                    // Only a pane host sends these.
                    Control::Exited(_)
                    | Control::Paused
                    | Control::Restore(_)
                    | Control::Keys(_) => {}
                },
                Ok(None) | Err(_) => return,
            }
        }
    };
    // The client's keyboard, read here while it is this side's turn (see
    // `crate::terminal::Keyboard`).
    let keys = async {
        let Some(mut keyboard) = keyboard else {
            return std::future::pending().await;
        };
        loop {
            if turn.wait_for(|ours| *ours).await.is_err() {
                return std::future::pending().await;
            }
            match keyboard.read().await {
                crate::terminal::KeyRead::Pane(bytes) => {
                    let bytes = pane.client_input(client, bytes);
                    if !bytes.is_empty() {
                        if let Err(err) = pane.write_input(&bytes).await {
                            tracing::warn!("attached input not written: {err}");
                        }
                    }
                }
                crate::terminal::KeyRead::Client(bytes) => {
                    keyboard_turn.send_replace(false);
                    let _ = requests_tx.send(Ask::Keys(bytes));
                }
                crate::terminal::KeyRead::Gone => {
                    keyboard_turn.send_replace(false);
                    let _ = requests_tx.send(Ask::Keys(Vec::new()));
                    return std::future::pending().await;
                }
            }
        }
    };
    tokio::select! {
        _ = output => {}
        _ = input => {}
        _ = keys => {}
    }
    pane.detach(client);
}

/// How many screens' worth of output (of the client's size, a byte a cell) the pane host hands
/// the writer of a client's terminal before that terminal has taken them; more waits in the
/// pane's queue, where a redraw can replace it.
const TERMINAL_SCREENS: usize = 2;

/// How long the output a client's terminal has not taken may wait before the client counts as
/// behind and is sent a redraw of the screen instead (issue 46: through a 20 kB/s link,
/// `seq 1 200000` took 60–90 s to reach the prompt, replayed whole). A terminal that takes a
/// megabyte in a few milliseconds never waits this long: it gets every byte.
const TERMINAL_BEHIND: std::time::Duration = std::time::Duration::from_millis(250);

/// How often the output side looks again at a terminal whose writer is full.
const PACE_CHECK: std::time::Duration = std::time::Duration::from_millis(20);

/// The longest a client whose terminal fell behind waits for its redraw (see [`Pace`]).
const DRAIN_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a client's terminal keeps up: the oldest output it has not taken (in the writer or
/// in the pane's queue) has waited less than [`TERMINAL_BEHIND`]. Measured by marks: the
/// bytes the terminal must have taken for all the output waiting at a moment to be written;
/// once taken, the next mark is set.
///
/// A terminal behind a slow link also holds output of its own that the pane host cannot see
/// or take back: what the kernel's buffers took (a pseudo-terminal takes about 20 KB before a
/// write waits, a second at 20 kB/s). A redraw written at once would arrive only after all of
/// that, showing the screen as it was when it was made; so the redraw is made once the
/// terminal has likely passed on what it holds: what it took from when nothing waited until a
/// write first found it full (it has been full since), at the rate it took output since.
#[derive(Default)]
struct Pace {
    /// When the mark was set, what the terminal had taken then, and what it must take.
    mark: Option<(std::time::Instant, u64, u64)>,
    /// What the terminal had taken when it was last seen with nothing waiting.
    idle_taken: u64,
}

impl Pace {
    /// Whether the terminal is behind, given what it has `taken` so far and the output bytes
    /// `waiting` for it now: `Some` with how long to let it pass on what it holds before its
    /// redraw is made.
    fn behind(
        &mut self,
        taken: u64,
        waiting: usize,
        backlog: &crate::terminal::Backlog,
        now: std::time::Instant,
    ) -> Option<std::time::Duration> {
        if waiting == 0 {
            // Nothing waits: a write that finds the terminal full from now on starts a new
            // measure of what it holds.
            self.idle_taken = taken;
            backlog.full_since(true);
        }
        match self.mark {
            Some((_, _, target)) if taken >= target => self.mark = None,
            Some((at, at_taken, _)) if now.saturating_duration_since(at) > TERMINAL_BEHIND => {
                // What it holds: what it took from when nothing waited until it was first
                // found full; the rate: what it took since, over the time since.
                let (since, since_taken) = backlog.full_since(true).unwrap_or((at, at_taken));
                let holds = since_taken.saturating_sub(self.idle_taken) as f64;
                let span = now.saturating_duration_since(since).as_secs_f64();
                let rate = taken.saturating_sub(since_taken) as f64 / span.max(1e-3);
                let wait = if rate > 0.0 {
                    std::time::Duration::from_secs_f64((holds / rate).min(60.0))
                } else {
                    DRAIN_WAIT_MAX
                };
                return Some(wait.min(DRAIN_WAIT_MAX));
            }
            _ => {}
        }
        if self.mark.is_none() && waiting > 0 {
            self.mark = Some((now, taken, taken + waiting as u64));
        }
        None
    }

    /// The client was sent a redraw, with the terminal at `taken`: what waited before is
    /// gone.
    fn resynchronised(&mut self, taken: u64) {
        *self = Pace {
            idle_taken: taken,
            ..Pace::default()
        };
    }
}

/// What an attach connection's input side asks of its output side.
enum Ask {
    Redraw,
    Pause,
    Resume,
    Detach,
    /// Give the client these keys, and the keyboard with them.
    Keys(Vec<u8>),
}

/// Where an attach connection's output goes.
enum Out {
    /// In frames on the connection.
    Frames,
    /// Data to the client's terminal, written by its own thread; controls on the connection.
    Terminal {
        terminal: crate::terminal::TerminalWriter,
        /// The client draws over the pane: output is not written meanwhile.
        paused: bool,
        /// The output that came while paused, written when the pause ends.
        held: Held,
    },
}

/// The output a paused client's terminal did not get. A pause for a message over the last
/// line lasts a moment: what came meanwhile is written after it, as it would have been had
/// the message been drawn a moment earlier, so the message stays. A redraw instead would
/// erase it (a pane that printed during the pause cleared the note `run` shows over a
/// restarted pane). Past [`HELD_MAX`] bytes (a long pause: a view open over the pane) only
/// that output was missed is kept, and going on needs a redraw.
#[derive(Default)]
struct Held {
    chunks: Vec<crate::terminal::Chunk>,
    bytes: usize,
    missed: bool,
}

/// The most output kept for a paused client's terminal.
const HELD_MAX: usize = 64 * 1024;

impl Held {
    fn keep(&mut self, chunk: crate::terminal::Chunk) {
        if self.missed {
            return;
        }
        self.bytes += chunk.0.len();
        if self.bytes > HELD_MAX {
            *self = Held {
                missed: true,
                ..Held::default()
            };
        } else {
            self.chunks.push(chunk);
        }
    }
}

impl Out {
    /// What the terminal has taken so far (0 for a client sent frames).
    fn taken(&self) -> u64 {
        match self {
            Out::Terminal { terminal, .. } => terminal.taken(),
            Out::Frames => 0,
        }
    }

    /// Drops what the terminal's writer has not written yet (a redraw follows).
    fn drop_unwritten(&self) {
        if let Out::Terminal { terminal, .. } = self {
            terminal.drop_unwritten();
        }
    }

    /// Sends `frames` in order, leaving the vector empty (its room is kept for the next
    /// batch). Nothing after a control that ends the stream (a detach) is sent; an error when
    /// the client is gone or the stream ended.
    async fn send(
        &mut self,
        writer: &mut OwnedWriteHalf,
        frames: &mut Vec<Frame>,
    ) -> Result<(), ()> {
        // Nothing after the last frame (exited, detach) is written.
        let last = frames
            .iter()
            .position(|f| matches!(f, Frame::Control(c) if c.is_last()));
        if let Some(at) = last {
            frames.truncate(at + 1);
        }
        match self {
            Out::Frames => {
                let written = wire::write_frames(writer, frames).await;
                frames.clear();
                written.map_err(|_| ())?;
            }
            Out::Terminal {
                terminal,
                paused,
                held,
            } => {
                let mut chunks = Vec::new();
                for frame in frames.drain(..) {
                    match frame {
                        Frame::Data(bytes, pen_only) if *paused => held.keep((bytes, pen_only)),
                        Frame::Data(bytes, pen_only) => chunks.push((bytes, pen_only)),
                        Frame::Control(control) => {
                            if !chunks.is_empty() {
                                terminal.write(std::mem::take(&mut chunks)).await?;
                            }
                            // The client restores its terminal when the stream ends or the
                            // program exits: the undo goes first, after the last write.
                            if matches!(control, Control::Exited(_)) || control.is_last() {
                                let undo = Control::Restore(terminal.undo().await);
                                wire::write_frames(writer, &[Frame::Control(undo)])
                                    .await
                                    .map_err(|_| ())?;
                            }
                            wire::write_frames(writer, &[Frame::Control(control)])
                                .await
                                .map_err(|_| ())?;
                        }
                    }
                }
                if !chunks.is_empty() {
                    terminal.write(chunks).await?;
                }
            }
        }
        if last.is_some() {
            return Err(());
        }
        Ok(())
    }

    /// Serves one of the input side's requests. `Some(true)` when the client is to be sent a
    /// fresh redraw, `None` when the attach ends.
    async fn ask(&mut self, writer: &mut OwnedWriteHalf, ask: Ask) -> Result<Option<bool>, ()> {
        match (&mut *self, ask) {
            (_, Ask::Keys(keys)) => {
                wire::write_frames(writer, &[Frame::Control(Control::Keys(keys))])
                    .await
                    .map_err(|_| ())?;
                Ok(Some(false))
            }
            (out, Ask::Redraw) => {
                if let Out::Terminal { paused, held, .. } = out {
                    // The redraw shows all of it.
                    (*paused, *held) = (false, Held::default());
                }
                Ok(Some(true))
            }
            (Out::Frames, Ask::Detach) => Ok(None),
            // Only a client whose terminal the pane host writes pauses.
            (Out::Frames, Ask::Pause | Ask::Resume) => Ok(Some(false)),
            (
                Out::Terminal {
                    terminal, paused, ..
                },
                Ask::Pause,
            ) => {
                *paused = true;
                terminal.flush().await;
                wire::write_frames(writer, &[Frame::Control(Control::Paused)])
                    .await
                    .map_err(|_| ())?;
                Ok(Some(false))
            }
            (
                Out::Terminal {
                    terminal,
                    paused,
                    held,
                },
                Ask::Resume,
            ) => {
                *paused = false;
                let held = std::mem::take(held);
                if held.missed {
                    return Ok(Some(true));
                }
                if !held.chunks.is_empty() {
                    terminal.write(held.chunks).await?;
                }
                Ok(Some(false))
            }
            (Out::Terminal { terminal, .. }, Ask::Detach) => {
                let undo = Control::Restore(terminal.undo().await);
                let _ = wire::write_frames(writer, &[Frame::Control(undo)]).await;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prepend_path_entry;

    #[test]
    fn the_executables_directory_goes_first_once() {
        assert_eq!(prepend_path_entry("/b", None), "/b");
        assert_eq!(prepend_path_entry("/b", Some("")), "/b");
        assert_eq!(
            prepend_path_entry("/b", Some("/usr/bin:/bin")),
            "/b:/usr/bin:/bin"
        );
        assert_eq!(
            prepend_path_entry("/b", Some("/usr/bin:/b:/bin")),
            "/b:/usr/bin:/bin"
        );
        assert_eq!(prepend_path_entry("/b", Some("/b")), "/b");
    }
}
