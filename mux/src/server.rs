//! The control-plane daemon (`belfry server`): its socket, the op dispatch, the event bus and
//! the monitors that watch every pane host (spec §6).

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, Notify};

use belfry_proto::event::{Event, HookSeen, Lifecycle};
use belfry_proto::limits::{
    DEFAULT_SCROLLBACK, DEFAULT_SCROLLBACK_BYTES, DEFAULT_SIZE, EVENT_HISTORY, MAX_SCROLLBACK,
    MAX_SCROLLBACK_BYTES,
};
use belfry_proto::reply::{self, Listing, PaneRecord, Reply};
use belfry_proto::request::{self, Op, Spawn};
use belfry_proto::spec::LaunchSpec;
use belfry_proto::{ErrorCode, PaneEnv, Request, SessionName, Side, Size};
use belfry_transport::listener::Listener;
use belfry_transport::paths;
use belfry_transport::retry::{poll_until, Backoff};
use belfry_transport::wire;

use crate::deadline;
use crate::ding::{DingEngine, DingMsg, PaneInfo};
use crate::handoff;
use crate::registry::{self, PaneEntry, Registry};
use crate::Error;

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
    config: DaemonConfig,
    registry: Registry,
    bus: broadcast::Sender<Value>,
    /// The last [`EVENT_HISTORY`] bus events but revisions, each with the Unix time in
    /// ms it was published: the recent past a subscriber asks for with `history`. Memory only;
    /// a restarted daemon starts it empty. Its lock is held across each publish, so a
    /// subscriber that takes its receiver and its snapshot under the lock misses nothing
    /// between them and hears nothing twice.
    history: parking_lot::Mutex<std::collections::VecDeque<(u64, Value)>>,
    shutdown: Notify,
    ding: DingEngine,
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

/// The lock file a daemon holds in its state and runtime directories.
const DIR_LOCK: &str = "daemon.lock";

/// Opens (creating it if missing) the lock file at `path`.
fn open_lock(path: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| Error::Io {
            what: "cannot open daemon lock",
            path: path.to_path_buf(),
            source,
        })
}

/// Opens (creating it if missing) the lock file `path` names inside the directory `dir` was
/// opened as, never through a link.
fn open_lock_in(dir: &std::os::fd::OwnedFd, path: &Path) -> Result<std::fs::File, Error> {
    use rustix::fs::{Mode, OFlags};
    let name = path.file_name().unwrap_or_default();
    rustix::fs::openat(
        dir,
        name,
        OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map(std::fs::File::from)
    .map_err(|errno| Error::Io {
        what: "cannot open daemon lock",
        path: path.to_path_buf(),
        source: errno.into(),
    })
}

/// Takes an exclusive `flock` on `file` (the lock at `path`) and writes our pid into it.
/// `Ok(Err(holder))` when another process keeps it: `holder` names the pid written in the file.
///
/// A daemon that was just killed may still hold its locks for a moment while its last threads
/// exit, so a held lock is retried for 2 s before it counts as taken.
async fn take_lock(
    file: std::fs::File,
    path: &Path,
) -> Result<Result<std::fs::File, String>, Error> {
    use std::io::Write as _;
    let locked = || {
        rustix::fs::flock(
            file.as_fd(),
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        )
        .ok()
    };
    let tick = Backoff::constant(Duration::from_millis(10));
    if poll_until(Duration::from_secs(2), tick, locked)
        .await
        .is_none()
    {
        // Read through the handle, not the path, which may name another file by now.
        let mut pid = String::new();
        let _ = std::io::Read::read_to_string(&mut &file, &mut pid);
        let holder = match pid.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "a process whose pid the lock does not record".to_string(),
        };
        return Ok(Err(holder));
    }
    let write_pid = || -> std::io::Result<()> {
        file.set_len(0)?;
        (&file).write_all(format!("{}\n", std::process::id()).as_bytes())
    };
    write_pid().map_err(|source| Error::Io {
        what: "cannot write the daemon pid into",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Ok(file))
}

async fn adopt_existing(daemon: &Arc<Daemon>) {
    // Before any adapter is started again: what the adapters of a killed daemon left running
    // is ended first (see `crate::adapter_group`).
    crate::adapter_group::sweep_leftover_groups(&belfry_transport::paths::panes_dir(
        &daemon.config.runtime,
    ));
    let found = registry::discover(&daemon.config.runtime).await;
    for session in found.lost {
        publish(
            daemon,
            Event::Lifecycle(Lifecycle {
                reason: Some("pane host was gone when the daemon started".into()),
                ..Lifecycle::new(&session, "lost")
            }),
        );
    }
    for (entry, info) in found.live {
        adopt(daemon, entry, &info);
    }
    for entry in found.stalled {
        daemon.registry.insert_unadopted(entry.clone());
        tokio::spawn(adopt_when_it_answers(Arc::clone(daemon), entry));
    }
}

/// Takes over a pane host that answered the probe (spec §6.0): registry, DING worker, monitor.
fn adopt(daemon: &Arc<Daemon>, entry: PaneEntry, info: &Value) {
    tracing::info!(
        session = entry.session,
        pid = entry.pid,
        "adopted pane host"
    );
    let host = HostRecord::read(&entry, info);
    publish(
        daemon,
        Event::Lifecycle(Lifecycle {
            pid: Some(entry.pid),
            incarnation: host.record.incarnation.clone(),
            revision: host.record.revision,
            ..Lifecycle::new(&entry.session, "adopted")
        }),
    );
    daemon.registry.insert(entry.clone());
    start_ding(daemon, &entry, &host, true);
    tokio::spawn(monitor(
        Arc::clone(daemon),
        entry,
        registry::ExitSoFar::Skip,
    ));
}

/// Waits (bounded) for process `pid` to be gone; `None` if it still lives at the deadline.
async fn pid_gone(pid: u32, within: Duration) -> Option<()> {
    let tick = Backoff::constant(Duration::from_millis(10));
    poll_until(within, tick, || (!registry::pid_alive(pid)).then_some(())).await
}

/// How often an unadopted pane host is probed again.
const ADOPTION_RETRY: Duration = Duration::from_millis(250);

/// A pane host that was alive but did not answer at daemon start or at its spawn (stopped,
/// too slow for the probe, at its connection cap, or its socket unusable for now) is probed
/// again until it answers, then adopted like the others; only when its process dies is its
/// record removed and it reported lost. It is never silently orphaned while it lives.
async fn adopt_when_it_answers(daemon: Arc<Daemon>, entry: PaneEntry) {
    let mut retry = Backoff::constant(ADOPTION_RETRY);
    let probed = loop {
        retry.sleep().await;
        if !registry::pid_alive(entry.pid) {
            break registry::Probe::Unreachable;
        }
        match registry::probe_status(&entry.socket).await {
            answered @ registry::Probe::Answered(_) => break answered,
            foreign @ registry::Probe::Foreign => break foreign,
            registry::Probe::Silent | registry::Probe::Unreachable => continue,
        }
    };
    if let registry::Probe::Answered(info) = probed {
        // Inserted into the registry before it leaves the unadopted set, so its name is never
        // free in between.
        adopt(&daemon, entry.clone(), &info);
        daemon
            .registry
            .remove_unadopted_if_pid(&entry.session, entry.pid);
        return;
    }
    // Its process is dead: it will never answer. Its files go only with its process, as for a
    // monitored pane.
    if daemon
        .registry
        .remove_unadopted_if_pid(&entry.session, entry.pid)
    {
        if !registry::pid_alive(entry.pid) {
            registry::remove_files(&daemon.config.runtime, &entry.session);
        }
        publish(
            &daemon,
            Event::Lifecycle(Lifecycle {
                pid: Some(entry.pid),
                reason: Some(
                    if matches!(probed, registry::Probe::Foreign) {
                        "its socket is served by another uid"
                    } else {
                        "pane host went away before it answered the daemon"
                    }
                    .into(),
                ),
                ..Lifecycle::new(&entry.session, "lost")
            }),
        );
    }
}

/// The declaration of the adapter named `adapter`, from the adapters directory or the table
/// built into the binary.
fn load_declaration(
    daemon: &Daemon,
    adapter: &str,
) -> Result<crate::lifecycle::AdapterDeclaration, String> {
    crate::adapters::Adapters::locate(&daemon.config.exe)
        .declaration(adapter)
        .map_err(|err| err.to_string())
}

/// What the daemon reads of a pane host's `info` record: the record and its launch spec.
struct HostRecord {
    record: PaneRecord,
    spec: Option<LaunchSpec>,
}

impl HostRecord {
    /// Reads an `info` reply; a reply that is not a record gives an empty one (logged), so a
    /// pane host of an older build is still adopted and served.
    fn read(entry: &PaneEntry, info: &Value) -> HostRecord {
        let record = match Reply::<PaneRecord>::read(info) {
            Ok(Reply::Ok(record)) => record,
            other => {
                tracing::warn!(
                    session = entry.session,
                    "info reply is not a record: {other:?}"
                );
                unlisted(entry, "unreachable", "no record".into())
            }
        };
        let spec = record
            .spec
            .as_ref()
            .and_then(|spec| belfry_proto::de::from_value::<LaunchSpec>(spec).ok());
        HostRecord { record, spec }
    }

    fn adapter(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|spec| spec.adapter.as_deref())
    }
}

/// Fires `event` through dispatch if the pane's adapter declares it as host lifecycle.
fn host_lifecycle(daemon: &Daemon, entry: &PaneEntry, host: &HostRecord, event: &str) {
    let (Some(adapter), Some(spec)) = (host.adapter(), host.spec.clone()) else {
        return;
    };
    let declaration = match load_declaration(daemon, adapter) {
        Ok(declaration) => declaration,
        Err(err) => {
            tracing::warn!(session = entry.session, "{err}");
            return;
        }
    };
    if !declaration.host_lifecycle.iter().any(|e| e == event) {
        return;
    }
    let pane_env = PaneEnv {
        session: entry.session.clone(),
        socket: daemon.config.socket.clone(),
        incarnation: host.record.incarnation.clone(),
        generation: host.record.generation.clone(),
        inbox: Some(daemon.config.state_dir.join("inbox").join(&entry.session)),
        ..PaneEnv::default()
    };
    let exe = daemon.config.exe.clone();
    let event = event.to_string();
    tokio::spawn(async move {
        crate::lifecycle::fire(&exe, &event, &spec, &pane_env).await;
    });
}

/// Starts the DING worker of a pane from its pane host's record.
fn start_ding(daemon: &Daemon, entry: &PaneEntry, host: &HostRecord, adopted: bool) {
    let (compaction_events, readiness, notice_settle_ms) =
        match host.adapter().map(|a| load_declaration(daemon, a)) {
            Some(Ok(declaration)) => (
                declaration.compaction_events,
                declaration.readiness,
                // A send takes no delay step longer than this; a declaration asking for more
                // gets the longest.
                declaration.notice_settle.map_or(0, |settle| {
                    settle.ms.min(belfry_proto::limits::MAX_DELAY_STEP_MS)
                }),
            ),
            Some(Err(err)) => {
                tracing::warn!(session = entry.session, "{err}");
                (Vec::new(), None, 0)
            }
            None => (Vec::new(), None, 0),
        };
    let spec = host.spec.as_ref();
    let info = PaneInfo {
        session: entry.session.clone(),
        socket: entry.socket.clone(),
        incarnation: host.record.incarnation.clone().unwrap_or_default(),
        generation: host.record.generation.clone().unwrap_or_default(),
        ding_policy: spec.and_then(|spec| spec.ding_policy.clone()),
        agent_adapter: host.adapter().map(str::to_string),
        pane_host: format!(
            "{}-{}",
            host.record.pid,
            host.record.started_at.unwrap_or(0)
        ),
        adapter_command: spec.and_then(|spec| spec.adapter_command.clone()),
        adopted,
        compaction_events,
        readiness,
        notice_settle_ms,
    };
    // The inbox exists before `new` replies, so a tool that posts by hand (a file renamed
    // into `new/`) right after the pane starts finds the directories; the worker opens the
    // same inbox again when it starts, and says so if it cannot.
    if let Err(err) = belfry_ding::Inbox::open(&daemon.config.state_dir, &entry.session) {
        tracing::warn!(session = entry.session, "inbox not made: {err}");
    }
    daemon.ding.start(
        info,
        daemon.config.state_dir.clone(),
        daemon.config.log_dir.clone(),
    );
}

fn publish(daemon: &Daemon, event: impl Into<BusEvent>) {
    let event = event.into().0;
    let mut history = daemon.history.lock();
    // Revisions come many a second from a busy pane and would push every other event out.
    if event.get("event").and_then(Value::as_str) != Some("revision") {
        if history.len() >= EVENT_HISTORY {
            history.pop_front();
        }
        history.push_back((unix_ms(), event.clone()));
    }
    let _ = daemon.bus.send(event);
}

/// The Unix time in ms (0 for a clock before 1970).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// A receiver of the bus and the kept events `op` asks for (its `history` and `since_ms`,
/// of its session when it names one), oldest first, each marked `history: true` with its
/// `at_ms`: taken under the history lock, so the receiver carries exactly what came after.
fn subscribe_with_history(
    daemon: &Daemon,
    op: &request::Subscribe,
) -> (broadcast::Receiver<Value>, Vec<Value>) {
    let history = daemon.history.lock();
    let bus = daemon.bus.subscribe();
    if op.history.is_none() && op.since_ms.is_none() {
        return (bus, Vec::new());
    }
    let most = op.history.map_or(usize::MAX, |n| n as usize);
    let since = op.since_ms.unwrap_or(0);
    let session = op.session.as_ref().map(|s| s.as_str());
    let mut past: Vec<Value> = history
        .iter()
        .rev()
        .filter(|(at, event)| {
            *at >= since
                && session.is_none_or(|s| event.get("session").and_then(Value::as_str) == Some(s))
        })
        .take(most)
        .map(|(at, event)| {
            let mut event = event.clone();
            if let Some(fields) = event.as_object_mut() {
                fields.insert("history".into(), Value::Bool(true));
                fields.insert("at_ms".into(), Value::from(*at));
            }
            event
        })
        .collect();
    drop(history);
    past.reverse();
    (bus, past)
}

/// An event as the bus carries it (JSON, as subscribers receive it).
struct BusEvent(Value);

impl From<Event> for BusEvent {
    fn from(event: Event) -> BusEvent {
        BusEvent(event.to_value())
    }
}

impl From<Value> for BusEvent {
    fn from(event: Value) -> BusEvent {
        BusEvent(event)
    }
}

/// The first pause between a monitor's subscribe attempts; it doubles up to
/// [`MONITOR_RETRY_MAX`].
const MONITOR_RETRY_FIRST: Duration = Duration::from_millis(50);
const MONITOR_RETRY_MAX: Duration = Duration::from_secs(2);
/// How long one subscribe attempt of a monitor may wait for the pane host's reply.
const MONITOR_SUBSCRIBE_STEP: Duration = Duration::from_secs(5);

/// Watches one pane host: forwards its exit and lifecycle events to the bus and reports the
/// pane host's death (spec §12: `kill -9` of a pane host is reported on the bus).
///
/// `exit_so_far`: a pane the daemon just spawned asks for the exit of a program that ended
/// before the subscription (`belfry new X -- true`), which no bus subscriber heard otherwise;
/// an adopted pane's exit was published (or not) by the daemon that ran then.
async fn monitor(daemon: Arc<Daemon>, entry: PaneEntry, exit_so_far: registry::ExitSoFar) {
    // A subscription that cannot be opened (refused `busy` at the connection cap, a full
    // backlog, a stopped pane host) is retried, with back-off, for as long as the pane host
    // lives and is still this registry's pane: a live pane is never reported lost.
    let mut retry = Backoff::doubling(MONITOR_RETRY_FIRST, MONITOR_RETRY_MAX);
    let subscription = loop {
        let attempt = tokio::time::timeout(
            MONITOR_SUBSCRIBE_STEP,
            registry::subscribe_from(&entry.socket, false, exit_so_far),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no subscribe reply within {} s",
                MONITOR_SUBSCRIBE_STEP.as_secs()
            ))
        });
        match attempt {
            Ok(subscription) => break Ok(subscription),
            Err(err) if registry::pid_alive(entry.pid) => {
                if daemon
                    .registry
                    .get(&entry.session)
                    .is_none_or(|e| e.pid != entry.pid)
                {
                    // Killed or replaced meanwhile: whoever removed it reports it.
                    return;
                }
                tracing::debug!(session = entry.session, "monitor retry: {err}");
                retry.sleep().await;
            }
            Err(err) => break Err(err),
        }
    };
    match subscription {
        Ok((mut lines, _writer)) => {
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str::<Value>(&line)
                    .map_err(|err| err.to_string())
                    .and_then(|value| {
                        belfry_proto::de::from_value::<Event>(&value).map_err(|err| err.to_string())
                    });
                let event = match event {
                    Ok(event) => event,
                    Err(err) => {
                        tracing::warn!(
                            session = entry.session,
                            "pane host event not understood: {err}"
                        );
                        continue;
                    }
                };
                let restarted =
                    matches!(&event, Event::Lifecycle(lifecycle) if lifecycle.what == "restart");
                if matches!(event, Event::Exit { .. }) || restarted {
                    let what = if restarted {
                        "session-start"
                    } else {
                        "session-end"
                    };
                    let request = Request::new(0, request::Info::default());
                    if let Ok(info) = registry::pane_request(&entry.socket, &request).await {
                        host_lifecycle(&daemon, &entry, &HostRecord::read(&entry, &info), what);
                    }
                }
                // A person's typing (`typed`, at most ten a second) is for the pane's DING
                // worker alone: the bus would only wake every `belfry top` with it.
                let typed =
                    matches!(&event, Event::Lifecycle(lifecycle) if lifecycle.what == "typed");
                daemon
                    .ding
                    .tell(&entry.session, DingMsg::Pane(event.clone()));
                if !typed {
                    publish(&daemon, event);
                }
            }
        }
        Err(err) => tracing::warn!(session = entry.session, "cannot monitor pane host: {err}"),
    }
    // The subscription ended. If the registry still lists this pane host, it died on its own.
    if daemon.registry.remove_if_pid(&entry.session, entry.pid) {
        daemon.ding.stop(&entry.session);
        let _ = pid_gone(entry.pid, Duration::from_millis(500)).await;
        if !registry::pid_alive(entry.pid) {
            let _ = std::fs::remove_file(&entry.socket);
            let _ =
                std::fs::remove_file(paths::pane_record(&daemon.config.runtime, &entry.session));
        }
        tracing::warn!(session = entry.session, pid = entry.pid, "pane host lost");
        publish(
            &daemon,
            Event::Lifecycle(Lifecycle {
                pid: Some(entry.pid),
                reason: Some("pane host exited or was killed".into()),
                ..Lifecycle::new(&entry.session, "lost")
            }),
        );
    }
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
            let reply = match pane_for(&daemon, &request.id, op.session.as_ref()) {
                Ok(entry) => match handoff::bind(&entry, &request.id, reader, writer).await {
                    handoff::Bound::Handed | handoff::Bound::Ended => return,
                    handoff::Bound::Kept(kept_reader, kept_writer, reply) => {
                        (reader, writer) = (kept_reader, kept_writer);
                        reply
                    }
                },
                Err(reply) => reply,
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

/// Writes a reply line that is already serialised (a pane host's, passed on as it came).
async fn write_line(writer: &mut OwnedWriteHalf, line: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    writer.write_all(line).await?;
    writer.flush().await
}

/// Resolves once the peer of `reader` has closed its connection entirely (not merely shut down
/// its writing side, as a client that sends one request and then half-closes does: it still
/// waits for the reply).
///
/// The common case costs nothing: with no further request pending, the read side becomes ready
/// exactly when the peer hangs up. A pipelined next request (left unread for the connection's
/// loop) or a half-close makes the read side stay ready, so the hang-up is then polled for.
async fn requester_hung_up(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) {
    use tokio::io::AsyncBufReadExt;
    let _ = reader.fill_buf().await;
    loop {
        if peer_hung_up(reader.get_ref().as_ref()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True once the peer of `stream` has closed its end (POLLHUP: both directions are shut).
fn peer_hung_up(stream: &UnixStream) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(stream, PollFlags::empty())];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(n) if n > 0 => fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR),
        _ => false,
    }
}

/// Answers one request the daemon serves itself (pane ops are [`forward`]ed).
async fn handle(daemon: &Arc<Daemon>, request: &Request) -> Value {
    let id = &request.id;
    match &request.op {
        Op::Hello(hello) => match hello.negotiate() {
            Ok(version) => reply::ok(
                id,
                &belfry_proto::reply::Hello {
                    version,
                    role: "daemon".into(),
                    build: env!("CARGO_PKG_VERSION").into(),
                    pid: Some(std::process::id()),
                    session: None,
                },
            ),
            Err(message) => reply::error(id, ErrorCode::UnsupportedVersion, message),
        },
        Op::Spawn(op) => spawn(daemon, id, op).await,
        Op::List(_) => reply::ok(id, &list(daemon).await),
        Op::Kill(op) => kill(daemon, id, op.session.as_ref()).await,
        Op::Attach(op) => match pane_for(daemon, id, op.session.as_ref()) {
            Ok(entry) => reply::ok(
                id,
                &belfry_proto::reply::AttachTarget {
                    session: entry.session,
                    socket: entry.socket.display().to_string(),
                },
            ),
            Err(reply) => reply,
        },
        Op::Shutdown(op) => shutdown(daemon, id, op.kill_panes.unwrap_or(false)).await,
        Op::DingStatus(op) => ding_status(daemon, id, op.session.as_ref()).await,
        Op::DingNudge(op) => ding_nudge(daemon, id, op.session.as_ref()),
        Op::DingTurnBoundary(op) => ding_turn_boundary(daemon, id, op).await,
        Op::Hook(op) => hook_event(daemon, id, op).await,
        // Served by the connection loop before it gets here.
        Op::Subscribe(_) => reply::error(id, ErrorCode::Internal, "subscribe is a stream"),
        other => reply::error(
            id,
            ErrorCode::UnknownOp,
            format!("unknown op {:?} for the daemon", other.name()),
        ),
    }
}

/// Resolves the `session` of a request to a live pane, or an error reply.
fn pane_for(
    daemon: &Daemon,
    id: &Value,
    session: Option<&SessionName>,
) -> Result<PaneEntry, Value> {
    let session =
        session.ok_or_else(|| reply::error(id, ErrorCode::Invalid, "missing field \"session\""))?;
    let session = session.as_str();
    if let Some(entry) = daemon.registry.get(session) {
        return Ok(entry);
    }
    match daemon.registry.unadopted(session) {
        Some(entry) => Err(reply::error(
            id,
            ErrorCode::Unavailable,
            unadopted_message(&entry),
        )),
        None => Err(reply::error(
            id,
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

/// Forwards a pane op (`Op::is_pane_op`) to the pane's host: `line` as the client wrote it
/// (`request` is its parse), and the pane host's reply line back as it came. The daemon's own
/// answer (the pane is unknown, its host failed, the request is invalid) is a reply value.
async fn forward(daemon: &Daemon, request: &Request, line: &[u8]) -> Result<Vec<u8>, Value> {
    if let Op::Send(send) = &request.op {
        // spec §3: a malformed bound (`timeout_ms` out of range) is refused here, before the
        // request leaves the daemon; a null guard never parsed at all.
        if let Err(message) = belfry_proto::request::send_timeout(send) {
            return Err(reply::error(&request.id, ErrorCode::Invalid, message));
        }
    }
    let entry = pane_for(daemon, &request.id, request.op.session())?;
    registry::pane_forward(&entry.socket, request, line)
        .await
        .map_err(|err| reply::error(&request.id, err.code(), err.describe(&entry)))
}

/// Builds and validates a launch spec from a spawn request.
pub fn spec_from_request(op: &Spawn) -> Result<LaunchSpec, crate::Error> {
    spec_of(op).map_err(|reason| crate::Error::InvalidSpawn { reason })
}

fn spec_of(op: &Spawn) -> Result<LaunchSpec, String> {
    let argv = op.argv.clone();
    if argv.is_empty() || argv[0].is_empty() {
        return Err("field \"argv\" must name a program".into());
    }
    let size = Size::new(
        op.rows.unwrap_or(u64::from(DEFAULT_SIZE.rows())),
        op.cols.unwrap_or(u64::from(DEFAULT_SIZE.cols())),
    )
    .map_err(|err| err.to_string())?;
    if let Some(cwd) = &op.cwd {
        if !Path::new(cwd).is_dir() {
            return Err(format!("cwd {cwd:?} is not a directory"));
        }
    }
    let mut ding_policy = op.ding_policy.clone();
    let adapter_command = op.adapter_command.clone();
    if let Some(token) = &ding_policy {
        belfry_ding::DeliveryPolicy::from_token(token, adapter_command.clone().unwrap_or_default())
            .map_err(|err| format!("ding_policy {token:?}: {err}"))?;
    } else if adapter_command.is_some() {
        return Err("adapter_command given without a ding_policy".into());
    }
    let adapter = op.adapter.as_ref().map(|name| name.as_str().to_string());
    // spec §7.3: naming the harness's adapter declares the pane an agent, whose default is
    // aggressive delivery. The token is written into the spec so that the policy, which is
    // part of the generation, is the same as a declared agent's with the same adapter.
    if ding_policy.is_none() && adapter.is_some() {
        ding_policy = Some(belfry_ding::policy::AGGRESSIVE_POLICY_TOKEN.to_string());
    }
    Ok(LaunchSpec {
        session: op.session.as_str().to_string(),
        argv,
        cwd: op.cwd.clone(),
        env: op.env.clone(),
        base_env: op.base_env.clone(),
        term: op.term.clone(),
        ding_policy,
        adapter_command,
        rows: size.rows(),
        cols: size.cols(),
        size_policy: op.size_policy.unwrap_or_default(),
        scrollback: op
            .scrollback
            .unwrap_or(DEFAULT_SCROLLBACK)
            .min(MAX_SCROLLBACK) as usize,
        scrollback_bytes: op
            .scrollback_bytes
            .unwrap_or(DEFAULT_SCROLLBACK_BYTES)
            .min(MAX_SCROLLBACK_BYTES) as usize,
        extra_args: Vec::new(),
        extra_env: BTreeMap::new(),
        adapter,
    })
}

async fn spawn(daemon: &Arc<Daemon>, id: &Value, op: &Spawn) -> Value {
    let mut spec = match spec_from_request(op) {
        Ok(spec) => spec,
        Err(err) => return reply::error(id, ErrorCode::Invalid, err.to_string()),
    };
    // Held until this spawn is answered: a concurrent spawn of the same name is `exists`,
    // never a second pane host that then fails to bind the socket.
    let _reservation = match daemon.registry.reserve(&spec.session) {
        Ok(reservation) => reservation,
        Err(registry::Taken::Unadopted(entry)) => {
            return reply::error(
                id,
                ErrorCode::Exists,
                format!(
                    "a pane named {:?} already exists: {}",
                    spec.session,
                    unadopted_message(&entry)
                ),
            )
        }
        Err(registry::Taken::Spawning | registry::Taken::Pane) => {
            return reply::error(
                id,
                ErrorCode::Exists,
                format!("a pane named {:?} already exists", spec.session),
            )
        }
    };
    // A pane that would leave the daemon too few descriptors is refused here, before anything
    // is started, saying how many fit: not half-way with "Too many open files".
    let running = (daemon.registry.all().len() + daemon.registry.all_unadopted().len()) as u64;
    if let Err(message) = crate::descriptors::check_room_for_a_pane(&spec.session, running) {
        tracing::warn!("{message}");
        return reply::error(id, ErrorCode::Unavailable, message);
    }
    // A pane host the daemon does not know of (its record lost) may still serve the name's
    // socket. Nothing of this spawn may touch its files (the charter is written below), and
    // its socket is never taken over.
    let socket = paths::pane_socket(&daemon.config.runtime, &spec.session);
    if paths::socket_may_be_served(&socket).await {
        return reply::error(
            id,
            ErrorCode::Exists,
            format!(
                "a pane named {:?} already exists: a pane host is already serving {}",
                spec.session,
                socket.display()
            ),
        );
    }
    // The adapter's declaration is read once per spawn, for the charter and the turn boundary.
    let declaration = spec
        .adapter
        .as_deref()
        .map(|adapter| load_declaration(daemon, adapter));
    if let Some(text) = &op.charter {
        if let Err(message) = place_charter(daemon, &mut spec, declaration.as_ref(), text) {
            return reply::error(id, ErrorCode::Invalid, message);
        }
    }
    // spec §7.5: the adapter declares which event is the harness's turn boundary; dispatch
    // inside the pane reads it from the environment (outside the generation).
    if let Some(Ok(crate::lifecycle::AdapterDeclaration {
        turn_boundary: Some(event),
        ..
    })) = &declaration
    {
        spec.extra_env.insert(
            belfry_proto::env::TURN_BOUNDARY_EVENTS.to_string(),
            event.clone(),
        );
    }
    // spec §10: what the harness needs on its command line and in its environment under
    // belfry (for example one process per pane, so each pane's tools and hooks keep that
    // pane's identity) is the adapter's data.
    if let Some(Ok(crate::lifecycle::AdapterDeclaration {
        launch: Some(launch),
        ..
    })) = &declaration
    {
        spec.extra_args.extend(launch.args.iter().cloned());
        spec.extra_env
            .extend(launch.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let config = &daemon.config;
    let entry = match registry::launch(
        &config.exe,
        &config.runtime,
        &config.socket,
        &config.state_dir,
        &spec,
    )
    .await
    {
        Ok(entry) => entry,
        Err(message) => {
            // Nothing of a failed launch stays behind, the charter included, unless a pane
            // host of that name has come to serve the socket meanwhile: the run directory is
            // then its own.
            if !paths::socket_may_be_served(&socket).await {
                let _ = std::fs::remove_dir_all(config.runtime.join("run").join(&spec.session));
            }
            return reply::error(id, ErrorCode::Invalid, message);
        }
    };
    let info = match registry::probe_status(&entry.socket).await {
        registry::Probe::Answered(info) => info,
        _ if registry::pid_alive(entry.pid) => {
            // Started but too slow to answer (a loaded machine): its program runs, so it is
            // kept unadopted (listed `unresponsive`, its name taken) and adopted once it
            // answers, never left running where nothing can see or reach it.
            daemon.registry.insert_unadopted(entry.clone());
            tokio::spawn(adopt_when_it_answers(Arc::clone(daemon), entry.clone()));
            return reply::error(
                id,
                ErrorCode::Unavailable,
                format!(
                    "pane host for {:?} (pid {}) started but does not answer yet; it is listed \
                     as unresponsive and adopted once it answers",
                    spec.session, entry.pid
                ),
            );
        }
        _ => {
            // It died right after it announced itself; it removes its own files on a clean
            // exit, and what a crash left behind goes here.
            registry::remove_files(&config.runtime, &spec.session);
            let _ = std::fs::remove_dir_all(config.runtime.join("run").join(&spec.session));
            return reply::error(
                id,
                ErrorCode::Unavailable,
                format!(
                    "pane host for {:?} (pid {}) exited right after it started",
                    spec.session, entry.pid
                ),
            );
        }
    };
    daemon.registry.insert(entry.clone());
    // The record is read once, for the DING worker, the lifecycle event and the bus.
    let host = HostRecord::read(&entry, &info);
    start_ding(daemon, &entry, &host, false);
    host_lifecycle(daemon, &entry, &host, "session-start");
    // `spawned` is on the bus before the monitor can publish the program's exit.
    publish(
        daemon,
        Event::Lifecycle(Lifecycle {
            pid: Some(entry.pid),
            incarnation: host.record.incarnation.clone(),
            generation: host.record.generation.clone(),
            ..Lifecycle::new(&entry.session, "spawned")
        }),
    );
    tokio::spawn(monitor(
        Arc::clone(daemon),
        entry.clone(),
        registry::ExitSoFar::Tell,
    ));
    let mut reply = info;
    if let Value::Object(map) = &mut reply {
        map.insert("id".into(), id.clone());
    }
    reply
}

/// spec §11: writes `<runtime>/run/<session>/system-prompt.md` and hands it to the program the
/// way the pane's adapter declaration says. A charter for a harness that declares no way to take
/// one is an error, never silently dropped.
fn place_charter(
    daemon: &Daemon,
    spec: &mut LaunchSpec,
    declaration: Option<&Result<crate::lifecycle::AdapterDeclaration, String>>,
    text: &str,
) -> Result<(), String> {
    use crate::lifecycle::CharterPlacement;
    let declaration = declaration
        .ok_or("a charter needs an adapter that says how the harness takes it (adapter \"NAME\")")?
        .as_ref()
        .map_err(String::clone)?;
    let adapter = spec.adapter.as_deref().unwrap_or_default();
    let placement = declaration
        .charter
        .clone()
        .ok_or_else(|| format!("adapter {adapter:?} declares no charter placement"))?;
    let run_dir = daemon.config.runtime.join("run").join(&spec.session);
    paths::ensure_private_dir(&run_dir).map_err(|err| err.to_string())?;
    let path = run_dir.join("system-prompt.md");
    std::fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    let path_text = path.display().to_string();
    match placement {
        CharterPlacement::Flag(flag) => spec.extra_args.extend([flag, path_text]),
        CharterPlacement::Env(var) => {
            spec.extra_env.insert(var, path_text);
        }
        CharterPlacement::File(relative) => {
            let cwd = spec.cwd.clone().ok_or("a file charter needs a cwd")?;
            let target = Path::new(&cwd).join(&relative);
            if target.exists() {
                return Err(format!(
                    "charter target {} already exists; belfry does not overwrite it",
                    target.display()
                ));
            }
            std::fs::write(&target, text)
                .map_err(|err| format!("cannot write {}: {err}", target.display()))?;
        }
    }
    Ok(())
}

/// `list`: every pane host is asked at once, each within its own deadline, so one stopped pane
/// host costs the listing one deadline and is listed as an error entry while the others are
/// listed normally.
async fn list(daemon: &Daemon) -> Listing {
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
fn unlisted(entry: &PaneEntry, state: &str, error: String) -> PaneRecord {
    PaneRecord::unanswered(&entry.session, entry.pid, state, error)
}

async fn kill(daemon: &Arc<Daemon>, id: &Value, session: Option<&SessionName>) -> Value {
    let entry = match pane_for(daemon, id, session) {
        Ok(entry) => entry,
        Err(reply) => return reply,
    };
    match kill_entry(daemon, &entry).await {
        Ok(()) => reply::ok(
            id,
            &belfry_proto::reply::Killed {
                killed: entry.session,
            },
        ),
        Err(err) => reply::error(id, err.code(), err.describe(&entry)),
    }
}

/// How often a kill refused `busy` is asked again.
const KILL_BUSY_RETRY: Duration = Duration::from_millis(100);

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
async fn shutdown(daemon: &Arc<Daemon>, id: &Value, kill_panes: bool) -> Value {
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
        return reply::error(
            id,
            ErrorCode::Unavailable,
            format!(
                "could not end every pane, so the daemon keeps running (killed: {killed:?}): {}",
                failed.join("; ")
            ),
        );
    }
    reply::ok(
        id,
        &belfry_proto::reply::Shutdown {
            shutdown: true,
            killed,
        },
    )
}

/// `subscribe`: the bus (lifecycle, exit, hook events), optionally filtered to one session;
/// with a session, also that pane's revision events.
async fn subscribe(
    daemon: &Arc<Daemon>,
    id: &Value,
    op: &request::Subscribe,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let session = op.session.as_ref().map(|s| s.as_str().to_string());
    let (mut bus, past) = subscribe_with_history(daemon, op);
    let mut pane_lines = None;
    if let Some(session) = &session {
        let Some(entry) = daemon.registry.get(session) else {
            let reply = reply::error(
                id,
                ErrorCode::NotFound,
                format!("no pane named {session:?}"),
            );
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        };
        // The pane host's subscribe reply is awaited within the quick deadline: a stopped pane
        // host makes this an error naming it, not a hang.
        let subscribed = tokio::time::timeout(
            crate::deadline::PANE_QUICK,
            registry::subscribe(&entry.socket, true),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "pane host of {session:?} (pid {}) did not answer \"subscribe\" within {} s; it \
                 may be stopped or hung",
                entry.pid,
                crate::deadline::PANE_QUICK.as_secs()
            ))
        });
        match subscribed {
            Ok((lines, pane_writer)) => pane_lines = Some((lines, pane_writer)),
            Err(message) => {
                let _ = wire::write_json(
                    &mut writer,
                    &reply::error(id, ErrorCode::Unavailable, message),
                )
                .await;
                return;
            }
        }
    }
    let reply = reply::ok(
        id,
        &belfry_proto::reply::Subscribed {
            subscribed: true,
            session: session.clone(),
            identity: None,
        },
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        return;
    }
    for event in &past {
        if wire::write_json(&mut writer, event).await.is_err() {
            return;
        }
    }
    let mut sink = Vec::new();
    loop {
        let event = tokio::select! {
            event = bus.recv() => match event {
                Ok(event) => {
                    let matches = session.as_deref().is_none_or(|s| event.get("session").and_then(Value::as_str) == Some(s));
                    // Revision events reach a session subscriber through its own pane stream.
                    let is_revision = event.get("event").and_then(Value::as_str) == Some("revision");
                    if !matches || (is_revision && session.is_some()) { continue; }
                    event
                }
                Err(broadcast::error::RecvError::Lagged(n)) => Event::Lagged { session: None, missed: n }.to_value(),
                Err(_) => return,
            },
            line = async {
                match &mut pane_lines {
                    Some((lines, _)) => lines.next_line().await,
                    None => std::future::pending().await,
                }
            } => match line {
                Ok(Some(line)) => match serde_json::from_str::<Value>(&line) {
                    // Exit and lifecycle already arrive through the bus.
                    Ok(event) if event.get("event").and_then(Value::as_str) == Some("revision") => event,
                    _ => continue,
                },
                _ => { pane_lines = None; continue; }
            },
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut sink) => {
                match read { Ok(0) | Err(_) => return, Ok(_) => { sink.clear(); continue; } }
            }
        };
        if wire::write_json(&mut writer, &event).await.is_err() {
            return;
        }
    }
}

fn ding_session(
    daemon: &Daemon,
    id: &Value,
    session: Option<&SessionName>,
) -> Result<String, Value> {
    pane_for(daemon, id, session).map(|entry| entry.session)
}

async fn ding_status(daemon: &Daemon, id: &Value, session: Option<&SessionName>) -> Value {
    let session = match ding_session(daemon, id, session) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if !daemon.ding.tell(&session, DingMsg::Status(tx)) {
        return reply::error(
            id,
            ErrorCode::Unavailable,
            format!("no DING worker for {session:?}"),
        );
    }
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(status)) => reply::ok(id, &status),
        _ => reply::error(
            id,
            ErrorCode::Unavailable,
            format!("DING worker for {session:?} did not answer"),
        ),
    }
}

fn ding_nudge(daemon: &Daemon, id: &Value, session: Option<&SessionName>) -> Value {
    match ding_session(daemon, id, session) {
        Ok(session) => {
            let nudged = daemon.ding.tell(&session, DingMsg::Nudge);
            reply::ok(id, &belfry_proto::reply::Nudged { nudged })
        }
        Err(reply) => reply,
    }
}

/// spec §7.5: `belfry dispatch` at a turn boundary claims unread messages for the hook.
async fn ding_turn_boundary(daemon: &Daemon, id: &Value, op: &request::DingTurnBoundary) -> Value {
    let session = match ding_session(daemon, id, op.session.as_ref()) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    let claim = op.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    if !daemon
        .ding
        .tell(&session, DingMsg::TurnBoundary { claim, reply: tx })
    {
        return reply::error(
            id,
            ErrorCode::Unavailable,
            format!("no DING worker for {session:?}"),
        );
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
            reply::ok(id, &outcome)
        }
        Ok(Ok(Err(message))) => reply::error(
            id,
            ErrorCode::Invalid,
            format!("turn-boundary event refused: {message}"),
        ),
        _ => reply::error(
            id,
            ErrorCode::Unavailable,
            format!("DING worker for {session:?} did not answer"),
        ),
    }
}

/// How long a hook event waits for the pane's DING worker to have applied it before it is
/// answered anyway (a worker in the middle of a notice's transaction reads it after that).
const HOOK_APPLIED_WITHIN: Duration = Duration::from_secs(2);

/// A hook event seen by `belfry dispatch` inside a pane: published on the bus and given to the
/// pane's DING worker (compaction and clear invalidate leases). Answered once the worker has
/// applied it (within [`HOOK_APPLIED_WITHIN`]): the harness runs its hook before it compacts
/// or clears, so the lease is gone before it does, and mail posted after the hook returned is
/// never delivered under the old lease.
async fn hook_event(daemon: &Daemon, id: &Value, op: &request::Hook) -> Value {
    let session = match ding_session(daemon, id, op.session.as_ref()) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
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
    publish(daemon, Event::Hook(seen).to_value());
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
    reply::ok(id, &belfry_proto::reply::Published { published: true })
}
