//! The control-plane daemon (`belfry server`): its socket, the op dispatch, the event bus and
//! the monitors that watch every pane host (SPEC §6).

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, Notify};

use belfry_pty::paths;
use belfry_pty::spec::{LaunchSpec, SizePolicy};
use belfry_pty::wire::{self, code};

use crate::ding::{DingEngine, DingMsg, PaneInfo};
use crate::registry::{self, PaneEntry, Registry};
use belfry_hooks::pane_link::TURN_BOUNDARY_ENV;

/// Where the daemon lives and what it starts pane hosts with.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub runtime: PathBuf,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    /// The `belfry` executable, run as `belfry pane-host` for new panes.
    pub exe: PathBuf,
    /// Where adapter sidecars' stderr goes.
    pub log_dir: PathBuf,
}

/// Errors starting the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("another belfry daemon already serves {0}")]
    AlreadyRunning(PathBuf),
    #[error(transparent)]
    Pane(#[from] belfry_pty::Error),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

struct Daemon {
    config: DaemonConfig,
    registry: Registry,
    bus: broadcast::Sender<Value>,
    shutdown: Notify,
    ding: DingEngine,
}

/// Runs the daemon in the foreground until `shutdown`.
pub fn run(config: DaemonConfig) -> Result<(), DaemonError> {
    // Two workers: a DING worker's durable file work (fsync before every send, SPEC §7.3)
    // blocks the thread it runs on, and must not stall every other request meanwhile.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| DaemonError::Io {
            what: "cannot start the async runtime",
            path: PathBuf::new(),
            source,
        })?;
    runtime.block_on(serve(config))
}

async fn serve(config: DaemonConfig) -> Result<(), DaemonError> {
    paths::ensure_private_dir(&config.runtime)?;
    paths::ensure_private_dir(&paths::panes_dir(&config.runtime))?;
    // A socket outside the runtime directory ($BELFRY_SOCKET) gets its directory created if
    // missing, but an existing directory is never re-moded: it may be /tmp.
    if let Some(parent) = config.socket.parent() {
        if !parent.exists() {
            paths::ensure_private_dir(parent)?;
        }
    }
    // One daemon per socket: the lock is held for the daemon's lifetime and released by the
    // kernel however it dies, so a `kill -9` never leaves a stale lock behind.
    let lock_path = lock_path(&config.socket);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| DaemonError::Io {
            what: "cannot open daemon lock",
            path: lock_path.clone(),
            source,
        })?;
    // A daemon that was just killed may still hold the lock for a moment while its last
    // threads exit; wait that out before concluding another daemon is running.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while rustix::fs::flock(
        lock.as_fd(),
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    )
    .is_err()
    {
        if std::time::Instant::now() >= deadline {
            return Err(DaemonError::AlreadyRunning(config.socket.clone()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = std::fs::remove_file(&config.socket);
    let listener = UnixListener::bind(&config.socket).map_err(|source| DaemonError::Io {
        what: "cannot bind daemon socket",
        path: config.socket.clone(),
        source,
    })?;
    paths::make_socket_private(&config.socket)?;
    let (bus, _) = broadcast::channel(4096);
    let daemon = Arc::new(Daemon {
        config,
        registry: Registry::default(),
        bus,
        shutdown: Notify::new(),
        ding: DingEngine::default(),
    });
    adopt_existing(&daemon).await;
    tracing::info!("daemon serving on {}", daemon.config.socket.display());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => { tokio::spawn(serve_connection(Arc::clone(&daemon), stream)); }
                Err(err) => tracing::warn!("accept failed: {err}"),
            },
            _ = term.recv() => break,
            _ = daemon.shutdown.notified() => break,
        }
    }
    let _ = std::fs::remove_file(&daemon.config.socket);
    drop(lock);
    tracing::info!("daemon exiting");
    Ok(())
}

impl From<std::io::Error> for DaemonError {
    fn from(source: std::io::Error) -> Self {
        DaemonError::Io {
            what: "daemon I/O",
            path: PathBuf::new(),
            source,
        }
    }
}

fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    socket.with_file_name(name)
}

async fn adopt_existing(daemon: &Arc<Daemon>) {
    let (live, lost) = registry::discover(&daemon.config.runtime).await;
    for session in lost {
        publish(
            daemon,
            json!({"event":"lifecycle","session":session,"what":"lost",
                               "reason":"pane host was gone when the daemon started"}),
        );
    }
    for (entry, info) in live {
        tracing::info!(
            session = entry.session,
            pid = entry.pid,
            "adopted pane host"
        );
        publish(
            daemon,
            json!({"event":"lifecycle","session":entry.session,"what":"adopted",
            "pid":entry.pid,"incarnation":info.get("incarnation"),"revision":info.get("revision")}),
        );
        daemon.registry.insert(entry.clone());
        start_ding(daemon, &entry, &info, true);
        tokio::spawn(monitor(Arc::clone(daemon), entry));
    }
}

/// The declaration of the adapter named `adapter`, from the adapters directory.
fn load_declaration(
    daemon: &Daemon,
    adapter: &str,
) -> Result<crate::lifecycle::Declaration, String> {
    let dir = crate::lifecycle::adapters_dir(&daemon.config.exe)
        .ok_or("no adapters directory (set BELFRY_ADAPTERS)")?;
    crate::lifecycle::load(&dir, adapter)
}

/// Fires `event` through dispatch if the pane's adapter declares it as host lifecycle.
fn host_lifecycle(daemon: &Daemon, entry: &PaneEntry, info: &Value, event: &str) {
    let spec = info["spec"].clone();
    let Some(adapter) = spec["adapter"].as_str() else {
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
    let pane_env = vec![
        (
            "BELFRY_SOCKET".to_string(),
            daemon.config.socket.display().to_string(),
        ),
        ("BELFRY_SESSION".to_string(), entry.session.clone()),
        (
            "BELFRY_INCARNATION".to_string(),
            info["incarnation"].as_str().unwrap_or_default().to_string(),
        ),
        (
            "BELFRY_GENERATION".to_string(),
            info["generation"].as_str().unwrap_or_default().to_string(),
        ),
        (
            "BELFRY_INBOX".to_string(),
            daemon
                .config
                .state_dir
                .join("inbox")
                .join(&entry.session)
                .display()
                .to_string(),
        ),
    ];
    let exe = daemon.config.exe.clone();
    let event = event.to_string();
    tokio::spawn(async move {
        crate::lifecycle::fire(&exe, &event, &spec, &pane_env).await;
    });
}

/// Starts the DING worker of a pane from its pane host's record.
fn start_ding(daemon: &Daemon, entry: &PaneEntry, info: &Value, adopted: bool) {
    let spec = &info["spec"];
    let info = PaneInfo {
        session: entry.session.clone(),
        socket: entry.socket.clone(),
        incarnation: info["incarnation"].as_str().unwrap_or_default().to_string(),
        generation: info["generation"].as_str().unwrap_or_default().to_string(),
        ding_policy: spec["ding_policy"].as_str().map(str::to_string),
        agent_adapter: spec["adapter"].as_str().map(str::to_string),
        pane_host: format!(
            "{}-{}",
            info["pid"].as_u64().unwrap_or(0),
            info["started_at"].as_u64().unwrap_or(0)
        ),
        adapter_command: spec["adapter_command"].as_array().map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        }),
        adopted,
    };
    daemon.ding.start(
        info,
        daemon.config.state_dir.clone(),
        daemon.config.log_dir.clone(),
    );
}

fn publish(daemon: &Daemon, event: Value) {
    let _ = daemon.bus.send(event);
}

/// Watches one pane host: forwards its exit and lifecycle events to the bus and reports the
/// pane host's death (SPEC §12: `kill -9` of a pane host is reported on the bus).
async fn monitor(daemon: Arc<Daemon>, entry: PaneEntry) {
    // A subscription that cannot be opened is retried while the pane host lives: a transient
    // failure must not report a live pane as lost.
    let mut attempts = 0;
    let subscription = loop {
        match registry::subscribe(&entry.socket, false).await {
            Ok(subscription) => break Ok(subscription),
            Err(err) if attempts < 20 && registry::pid_alive(entry.pid) => {
                attempts += 1;
                tracing::debug!(session = entry.session, "monitor retry: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => break Err(err),
        }
    };
    match subscription {
        Ok((mut lines, _writer)) => {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(event) = serde_json::from_str::<Value>(&line) {
                    let kind = event["event"].as_str().unwrap_or_default();
                    let restarted = kind == "lifecycle" && event["what"] == "restart";
                    if kind == "exit" || restarted {
                        let what = if restarted {
                            "session-start"
                        } else {
                            "session-end"
                        };
                        let request = json!({"id": 0, "op": "info"});
                        if let Ok(info) = registry::pane_request(&entry.socket, &request).await {
                            host_lifecycle(&daemon, &entry, &info, what);
                        }
                    }
                    daemon
                        .ding
                        .tell(&entry.session, DingMsg::Pane(event.clone()));
                    publish(&daemon, event);
                }
            }
        }
        Err(err) => tracing::warn!(session = entry.session, "cannot monitor pane host: {err}"),
    }
    // The subscription ended. If the registry still lists this pane host, it died on its own.
    if daemon.registry.remove_if_pid(&entry.session, entry.pid) {
        daemon.ding.stop(&entry.session);
        for _ in 0..50 {
            if !registry::pid_alive(entry.pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if !registry::pid_alive(entry.pid) {
            let _ = std::fs::remove_file(&entry.socket);
            let _ =
                std::fs::remove_file(paths::pane_record(&daemon.config.runtime, &entry.session));
        }
        tracing::warn!(session = entry.session, pid = entry.pid, "pane host lost");
        publish(
            &daemon,
            json!({"event":"lifecycle","session":entry.session,"what":"lost",
                                "pid":entry.pid,"reason":"pane host exited or was killed"}),
        );
    }
}

async fn serve_connection(daemon: Arc<Daemon>, stream: UnixStream) {
    let Some((mut reader, mut writer)) = wire::accept_peer(stream).await else {
        return;
    };
    loop {
        let Some(request) = wire::next_request(&mut reader, &mut writer).await else {
            return;
        };
        if request.op == "subscribe" {
            subscribe(&daemon, request, reader, writer).await;
            return;
        }
        let reply = handle(&daemon, &request).await;
        if wire::write_json(&mut writer, &reply).await.is_err() {
            return;
        }
        if request.op == "shutdown" && reply.get("ok") == Some(&Value::Bool(true)) {
            daemon.shutdown.notify_one();
            return;
        }
    }
}

/// Ops the daemon forwards unchanged to the pane host.
const FORWARDED: &[&str] = &[
    "send",
    "snapshot",
    "scrollback",
    "resize",
    "clear",
    "restart",
    "detach",
    "wait",
    "info",
];

async fn handle(daemon: &Arc<Daemon>, request: &wire::Request) -> Value {
    let id = &request.id;
    let body = &request.body;
    let op = request.op.as_str();
    if FORWARDED.contains(&op) {
        return forward(daemon, request).await;
    }
    let result = match op {
        "hello" => {
            return match wire::negotiate(body) {
                Ok(version) => wire::ok_reply(
                    id,
                    json!({"version": version, "role": "daemon", "build": env!("CARGO_PKG_VERSION"),
                           "pid": std::process::id()}),
                ),
                Err(message) => wire::error_reply(id, code::UNSUPPORTED_VERSION, message),
            }
        }
        "spawn" => return spawn(daemon, id, body).await,
        "list" => Ok(list(daemon).await),
        "kill" => return kill(daemon, id, body).await,
        "attach" => {
            return match pane_for(daemon, id, body) {
                Ok(entry) => wire::ok_reply(
                    id,
                    json!({"session": entry.session, "socket": entry.socket}),
                ),
                Err(reply) => reply,
            }
        }
        "shutdown" => shutdown(daemon, body).await,
        "ding.status" => return ding_status(daemon, id, body).await,
        "ding.nudge" => return ding_nudge(daemon, id, body),
        "ding.turn-boundary" => return ding_turn_boundary(daemon, id, body).await,
        "hook" => return hook_event(daemon, id, body),
        other => {
            return wire::error_reply(
                id,
                code::UNKNOWN_OP,
                format!(
                    "unknown op {other:?} (known: hello, spawn, list, kill, restart, resize, send, \
                     snapshot, scrollback, clear, attach, detach, subscribe, wait, info, shutdown, \
                     ding.status, ding.nudge, ding.turn-boundary, hook)"
                ),
            )
        }
    };
    match result {
        Ok(fields) => wire::ok_reply(id, fields),
        Err(message) => wire::error_reply(id, code::INVALID, message),
    }
}

/// Resolves the `session` field of a request to a live pane, or an error reply.
fn pane_for(daemon: &Daemon, id: &Value, body: &Map<String, Value>) -> Result<PaneEntry, Value> {
    let session =
        wire::get_str(body, "session").map_err(|m| wire::error_reply(id, code::INVALID, m))?;
    paths::validate_session_name(session)
        .map_err(|err| wire::error_reply(id, code::INVALID, err.to_string()))?;
    daemon
        .registry
        .get(session)
        .ok_or_else(|| wire::error_reply(id, code::NOT_FOUND, format!("no pane named {session:?}")))
}

async fn forward(daemon: &Daemon, request: &wire::Request) -> Value {
    let entry = match pane_for(daemon, &request.id, &request.body) {
        Ok(entry) => entry,
        Err(reply) => return reply,
    };
    let mut body = request.body.clone();
    body.insert("id".into(), request.id.clone());
    match registry::pane_request(&entry.socket, &Value::Object(body)).await {
        Ok(reply) => reply,
        Err(message) => wire::error_reply(&request.id, code::UNAVAILABLE, message),
    }
}

fn string_map(body: &Map<String, Value>, field: &str) -> Result<BTreeMap<String, String>, String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(format!("field \"{field}.{k}\" must be a string")),
            })
            .collect(),
        Some(_) => Err(format!("field {field:?} must be an object of strings")),
    }
}

fn string_list(body: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("field {field:?} must be an array of strings"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(format!("field {field:?} must be an array of strings")),
    }
}

/// Builds and validates a launch spec from a spawn request.
pub fn spec_from_request(body: &Map<String, Value>) -> Result<LaunchSpec, String> {
    let session = wire::get_str(body, "session")?;
    paths::validate_session_name(session).map_err(|err| err.to_string())?;
    let argv = string_list(body, "argv")?.ok_or("missing field \"argv\"")?;
    if argv.is_empty() || argv[0].is_empty() {
        return Err("field \"argv\" must name a program".into());
    }
    let rows = wire::opt_u64(body, "rows")?.unwrap_or(24);
    let cols = wire::opt_u64(body, "cols")?.unwrap_or(80);
    if !(1..=1000).contains(&rows) || !(1..=1000).contains(&cols) {
        return Err(format!(
            "size {rows}x{cols} is out of range (1..=1000 rows and columns)"
        ));
    }
    let size_policy = match wire::opt_str(body, "size_policy")? {
        None | Some("latest") => SizePolicy::Latest,
        Some("smallest") => SizePolicy::Smallest,
        Some(other) => return Err(format!("size_policy {other:?} is not latest or smallest")),
    };
    let cwd = wire::opt_str(body, "cwd")?.map(str::to_string);
    if let Some(cwd) = &cwd {
        if !Path::new(cwd).is_dir() {
            return Err(format!("cwd {cwd:?} is not a directory"));
        }
    }
    let mut ding_policy = wire::opt_str(body, "ding_policy")?.map(str::to_string);
    let adapter_command = string_list(body, "adapter_command")?;
    if let Some(token) = &ding_policy {
        belfry_ding::DeliveryPolicy::from_token(token, adapter_command.clone().unwrap_or_default())
            .map_err(|err| format!("ding_policy {token:?}: {err}"))?;
    } else if adapter_command.is_some() {
        return Err("adapter_command given without a ding_policy".into());
    }
    let adapter = match wire::opt_str(body, "adapter")? {
        Some(name) => {
            paths::validate_session_name(name)
                .map_err(|_| format!("adapter name {name:?} must match [A-Za-z0-9._-]{{1,64}}"))?;
            Some(name.to_string())
        }
        None => None,
    };
    // SPEC §7.3: naming the harness's adapter declares the pane an agent, whose default is
    // aggressive delivery. The token is written into the spec so that the policy, which is
    // part of the generation, is the same as a declared agent's with the same adapter.
    if ding_policy.is_none() && adapter.is_some() {
        ding_policy = Some(belfry_ding::policy::AGGRESSIVE_POLICY_TOKEN.to_string());
    }
    Ok(LaunchSpec {
        session: session.to_string(),
        argv,
        cwd,
        env: string_map(body, "env")?,
        base_env: string_map(body, "base_env")?,
        ding_policy,
        adapter_command,
        rows: rows as u16,
        cols: cols as u16,
        size_policy,
        scrollback: wire::opt_u64(body, "scrollback")?
            .unwrap_or(2000)
            .min(1_000_000) as usize,
        extra_args: Vec::new(),
        extra_env: BTreeMap::new(),
        adapter,
    })
}

async fn spawn(daemon: &Arc<Daemon>, id: &Value, body: &Map<String, Value>) -> Value {
    let mut spec = match spec_from_request(body) {
        Ok(spec) => spec,
        Err(message) => return wire::error_reply(id, code::INVALID, message),
    };
    if daemon.registry.get(&spec.session).is_some() {
        return wire::error_reply(
            id,
            code::EXISTS,
            format!("a pane named {:?} already exists", spec.session),
        );
    }
    // The adapter's declaration is read once per spawn, for the charter and the turn boundary.
    let declaration = spec
        .adapter
        .as_deref()
        .map(|adapter| load_declaration(daemon, adapter));
    match wire::opt_str(body, "charter") {
        Ok(Some(text)) => {
            if let Err(message) = place_charter(daemon, &mut spec, declaration.as_ref(), text) {
                return wire::error_reply(id, code::INVALID, message);
            }
        }
        Ok(None) => {}
        Err(message) => return wire::error_reply(id, code::INVALID, message),
    }
    // SPEC §7.5: the adapter declares which event is the harness's turn boundary; dispatch
    // inside the pane reads it from the environment (outside the generation).
    if let Some(Ok(crate::lifecycle::Declaration {
        turn_boundary: Some(event),
        ..
    })) = &declaration
    {
        spec.extra_env
            .insert(TURN_BOUNDARY_ENV.to_string(), event.clone());
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
            // Nothing of a failed launch stays behind, the charter included.
            let _ = std::fs::remove_dir_all(config.runtime.join("run").join(&spec.session));
            return wire::error_reply(id, code::INVALID, message);
        }
    };
    let Some(info) = registry::probe(&entry.socket).await else {
        return wire::error_reply(
            id,
            code::UNAVAILABLE,
            format!(
                "pane host for {:?} started but does not answer",
                spec.session
            ),
        );
    };
    daemon.registry.insert(entry.clone());
    start_ding(daemon, &entry, &info, false);
    host_lifecycle(daemon, &entry, &info, "session-start");
    tokio::spawn(monitor(Arc::clone(daemon), entry.clone()));
    publish(
        daemon,
        json!({"event":"lifecycle","session":entry.session,"what":"spawned",
        "pid":entry.pid,"incarnation":info.get("incarnation"),"generation":info.get("generation")}),
    );
    let mut reply = info;
    if let Value::Object(map) = &mut reply {
        map.insert("id".into(), id.clone());
    }
    reply
}

/// SPEC §11: writes `<runtime>/run/<session>/system-prompt.md` and hands it to the program the
/// way the pane's adapter declaration says. A charter for a harness that declares no way to take
/// one is an error, never silently dropped.
fn place_charter(
    daemon: &Daemon,
    spec: &mut LaunchSpec,
    declaration: Option<&Result<crate::lifecycle::Declaration, String>>,
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

async fn list(daemon: &Daemon) -> Value {
    let mut panes = Vec::new();
    for entry in daemon.registry.all() {
        let request = json!({"id": 0, "op": "info"});
        match registry::pane_request(&entry.socket, &request).await {
            Ok(mut info) => {
                if let Value::Object(map) = &mut info {
                    map.remove("id");
                    map.remove("ok");
                    map.remove("spec");
                }
                panes.push(info);
            }
            Err(err) => panes.push(json!({"session": entry.session, "pid": entry.pid,
                                          "error": err})),
        }
    }
    json!({"panes": panes})
}

async fn kill(daemon: &Arc<Daemon>, id: &Value, body: &Map<String, Value>) -> Value {
    let entry = match pane_for(daemon, id, body) {
        Ok(entry) => entry,
        Err(reply) => return reply,
    };
    kill_entry(daemon, &entry).await;
    wire::ok_reply(id, json!({"killed": entry.session}))
}

async fn kill_entry(daemon: &Daemon, entry: &PaneEntry) {
    daemon.registry.remove(&entry.session);
    daemon.ding.stop(&entry.session);
    let request = json!({"id": 0, "op": "kill"});
    let _ = registry::pane_request(&entry.socket, &request).await;
    for _ in 0..400 {
        if !registry::pid_alive(entry.pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    publish(
        daemon,
        json!({"event":"lifecycle","session":entry.session,"what":"killed",
                           "pid":entry.pid}),
    );
}

async fn shutdown(daemon: &Daemon, body: &Map<String, Value>) -> Result<Value, String> {
    let kill_panes = wire::opt_bool(body, "kill_panes")?.unwrap_or(false);
    let mut killed = Vec::new();
    if kill_panes {
        for entry in daemon.registry.all() {
            kill_entry(daemon, &entry).await;
            killed.push(entry.session);
        }
    }
    Ok(json!({"shutdown": true, "killed": killed}))
}

/// `subscribe`: the bus (lifecycle, exit, hook events), optionally filtered to one session;
/// with a session, also that pane's revision events.
async fn subscribe(
    daemon: &Arc<Daemon>,
    request: wire::Request,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let session = match wire::opt_str(&request.body, "session") {
        Ok(session) => session.map(str::to_string),
        Err(message) => {
            let _ = wire::write_json(
                &mut writer,
                &wire::error_reply(&request.id, code::INVALID, message),
            )
            .await;
            return;
        }
    };
    let mut bus = daemon.bus.subscribe();
    let mut pane_lines = None;
    if let Some(session) = &session {
        let Some(entry) = daemon.registry.get(session) else {
            let reply = wire::error_reply(
                &request.id,
                code::NOT_FOUND,
                format!("no pane named {session:?}"),
            );
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        };
        match registry::subscribe(&entry.socket, true).await {
            Ok((lines, pane_writer)) => pane_lines = Some((lines, pane_writer)),
            Err(message) => {
                let _ = wire::write_json(
                    &mut writer,
                    &wire::error_reply(&request.id, code::UNAVAILABLE, message),
                )
                .await;
                return;
            }
        }
    }
    let reply = wire::ok_reply(&request.id, json!({"subscribed": true, "session": session}));
    if wire::write_json(&mut writer, &reply).await.is_err() {
        return;
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
                Err(broadcast::error::RecvError::Lagged(n)) => json!({"event":"lagged","missed":n}),
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

fn ding_session(daemon: &Daemon, id: &Value, body: &Map<String, Value>) -> Result<String, Value> {
    pane_for(daemon, id, body).map(|entry| entry.session)
}

async fn ding_status(daemon: &Daemon, id: &Value, body: &Map<String, Value>) -> Value {
    let session = match ding_session(daemon, id, body) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if !daemon.ding.tell(&session, DingMsg::Status(tx)) {
        return wire::error_reply(
            id,
            code::UNAVAILABLE,
            format!("no DING worker for {session:?}"),
        );
    }
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(status)) => wire::ok_reply(id, status),
        _ => wire::error_reply(
            id,
            code::UNAVAILABLE,
            format!("DING worker for {session:?} did not answer"),
        ),
    }
}

fn ding_nudge(daemon: &Daemon, id: &Value, body: &Map<String, Value>) -> Value {
    match ding_session(daemon, id, body) {
        Ok(session) => {
            let told = daemon.ding.tell(&session, DingMsg::Nudge);
            wire::ok_reply(id, json!({"nudged": told}))
        }
        Err(reply) => reply,
    }
}

/// SPEC §7.5: `belfry dispatch` at a turn boundary claims unread messages for the hook.
async fn ding_turn_boundary(daemon: &Daemon, id: &Value, body: &Map<String, Value>) -> Value {
    let session = match ding_session(daemon, id, body) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    let Some(event) = body.get("event").cloned() else {
        return wire::error_reply(
            id,
            code::INVALID,
            "missing field \"event\" (a protocol v1 turn-boundary event)",
        );
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if !daemon
        .ding
        .tell(&session, DingMsg::TurnBoundary { event, reply: tx })
    {
        return wire::error_reply(
            id,
            code::UNAVAILABLE,
            format!("no DING worker for {session:?}"),
        );
    }
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(Ok(outcome))) => {
            publish(
                daemon,
                json!({"event":"ding","session":session,"what":"turn-boundary","outcome":outcome}),
            );
            wire::ok_reply(id, outcome)
        }
        Ok(Ok(Err(message))) => wire::error_reply(
            id,
            code::INVALID,
            format!("turn-boundary event refused: {message}"),
        ),
        _ => wire::error_reply(
            id,
            code::UNAVAILABLE,
            format!("DING worker for {session:?} did not answer"),
        ),
    }
}

/// A hook event seen by `belfry dispatch` inside a pane: published on the bus and given to the
/// pane's DING worker (compaction and clear invalidate leases).
fn hook_event(daemon: &Daemon, id: &Value, body: &Map<String, Value>) -> Value {
    let session = match ding_session(daemon, id, body) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    let hook = match wire::get_str(body, "hook") {
        Ok(hook) => hook.to_string(),
        Err(message) => return wire::error_reply(id, code::INVALID, message),
    };
    let mut event = json!({"event": "hook", "session": session, "hook": hook});
    for field in ["source", "tool_name", "hook_event_name", "incarnation"] {
        if let Some(value) = body.get(field).and_then(Value::as_str) {
            event[field] = json!(value);
        }
    }
    daemon.ding.tell(&session, DingMsg::Hook(event.clone()));
    publish(daemon, event);
    wire::ok_reply(id, json!({"published": true}))
}
