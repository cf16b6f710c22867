//! The pane host process (`belfry pane-host`): one pane, served on its own socket
//! (spec §6.0). It outlives the daemon; the daemon finds it again through its record file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use belfry_proto::event::Event;
use belfry_proto::reply::{self, ErrorBody};
use belfry_proto::request::{self as req, Op};
use belfry_proto::{ErrorCode, Side};
use serde_json::{json, Value};
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};

use crate::listener::Listener;
use crate::pane::Pane;
use crate::paths;
use crate::txn::TxnJournal;
use crate::wire::{self, Conn};
pub use belfry_proto::limits::MAX_WAIT_MS;
use belfry_proto::spec::LaunchSpec;

mod attach;
mod ops;

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
                attach::attach(&ctx, &request.id, &op, reader, writer).await;
                return;
            }
            Op::Subscribe(op) => {
                ops::subscribe(&ctx, &request.id, &op, reader, writer).await;
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
        let Some(outcome) = ops::handle(&ctx, &request.op, &gone).await else {
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
