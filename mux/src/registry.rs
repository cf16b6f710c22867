//! The daemon's registry of pane hosts: adoption at start, launching new ones, and the
//! per-pane monitor that notices exits and deaths (SPEC §6.0).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use belfry_pty::paths;
use belfry_pty::spec::LaunchSpec;
use belfry_pty::wire::{self, PROTOCOL_VERSION};

/// What the daemon knows about one live pane host.
#[derive(Debug, Clone)]
pub struct PaneEntry {
    pub session: String,
    pub socket: PathBuf,
    pub pid: u32,
}

/// Every pane host the daemon serves, by session name.
#[derive(Default)]
pub struct Registry {
    panes: Mutex<BTreeMap<String, PaneEntry>>,
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

impl Drop for SpawnReservation<'_> {
    fn drop(&mut self) {
        self.registry.spawning.lock().remove(&self.session);
    }
}

impl Registry {
    /// Holds `session` for a spawn, unless a pane of that name exists or is being spawned.
    ///
    /// The check and the hold happen under the `spawning` lock, which is always taken before
    /// the `panes` lock, so no two spawns can both pass the check.
    pub fn reserve(&self, session: &str) -> Option<SpawnReservation<'_>> {
        let mut spawning = self.spawning.lock();
        if spawning.contains(session) || self.panes.lock().contains_key(session) {
            return None;
        }
        spawning.insert(session.to_string());
        Some(SpawnReservation {
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
        self.panes.lock().remove(session)
    }

    /// Removes `session` only if it is still the pane host with `pid`.
    pub fn remove_if_pid(&self, session: &str, pid: u32) -> bool {
        let mut panes = self.panes.lock();
        if panes.get(session).is_some_and(|e| e.pid == pid) {
            panes.remove(session);
            return true;
        }
        false
    }

    pub fn all(&self) -> Vec<PaneEntry> {
        self.panes.lock().values().cloned().collect()
    }
}

/// Sends one request to a pane host over a fresh connection and returns its reply.
pub async fn pane_request(socket: &Path, request: &Value) -> Result<Value, String> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|err| format!("pane host at {} is not reachable: {err}", socket.display()))?;
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut line = serde_json::to_vec(request).map_err(|err| err.to_string())?;
    line.push(b'\n');
    writer
        .write_all(&line)
        .await
        .map_err(|err| format!("pane host at {} failed: {err}", socket.display()))?;
    let mut reply = String::new();
    let n = reader
        .read_line(&mut reply)
        .await
        .map_err(|err| format!("pane host at {} failed: {err}", socket.display()))?;
    if n == 0 {
        return Err(format!(
            "pane host at {} closed without a reply",
            socket.display()
        ));
    }
    serde_json::from_str(&reply).map_err(|err| format!("pane host reply is not JSON: {err}"))
}

/// Says hello to a pane host and reads its record; `None` if it does not answer properly.
pub async fn probe(socket: &Path) -> Option<Value> {
    let hello = json!({"id": 0, "op": "hello", "versions": [PROTOCOL_VERSION]});
    let reply = tokio::time::timeout(Duration::from_secs(2), pane_request(socket, &hello))
        .await
        .ok()?
        .ok()?;
    if reply.get("ok") != Some(&Value::Bool(true)) {
        return None;
    }
    let info = json!({"id": 0, "op": "info"});
    let reply = tokio::time::timeout(Duration::from_secs(2), pane_request(socket, &info))
        .await
        .ok()?
        .ok()?;
    (reply.get("ok") == Some(&Value::Bool(true))).then_some(reply)
}

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

/// Finds the pane hosts left by an earlier daemon. Live ones are returned for adoption; the
/// records of dead ones are removed and reported.
pub async fn discover(runtime: &Path) -> (Vec<(PaneEntry, Value)>, Vec<String>) {
    let dir = paths::panes_dir(runtime);
    let mut live = Vec::new();
    let mut lost = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (live, lost);
    };
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
        let record: Option<Value> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let pid = record
            .as_ref()
            .and_then(|r| r.get("pid"))
            .and_then(Value::as_u64)
            .unwrap_or(0) as u32;
        match probe(&socket).await {
            Some(info) => {
                let pid = info
                    .get("pid")
                    .and_then(Value::as_u64)
                    .unwrap_or(pid as u64) as u32;
                live.push((
                    PaneEntry {
                        session,
                        socket,
                        pid,
                    },
                    info,
                ));
            }
            None if pid != 0 && pid_alive(pid) => {
                tracing::warn!(
                    session,
                    pid,
                    "pane host alive but not answering; not adopted"
                );
            }
            None => {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_file(&socket);
                lost.push(session);
            }
        }
    }
    (live, lost)
}

/// Launches a pane host for `spec` and waits for it to announce itself.
pub async fn launch(
    exe: &Path,
    runtime: &Path,
    daemon_socket: &Path,
    state_dir: &Path,
    spec: &LaunchSpec,
) -> Result<PaneEntry, String> {
    let spec_json = serde_json::to_string(spec).map_err(|err| err.to_string())?;
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
    // own session and process group so it survives the daemon (SPEC §6.0).
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
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
    let announced: Value = serde_json::from_str(&line)
        .map_err(|err| format!("pane host start-up line is not JSON: {err}"))?;
    if let Some(error) = announced.get("error").and_then(Value::as_str) {
        return Err(error.to_string());
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
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|err| format!("pane host at {} is not reachable: {err}", socket.display()))?;
    let (reader, mut writer) = stream.into_split();
    let request = json!({"id": 0, "op": "subscribe", "revisions": revisions});
    wire::write_json(&mut writer, &request)
        .await
        .map_err(|err| err.to_string())?;
    let mut lines = BufReader::new(reader).lines();
    match lines.next_line().await {
        Ok(Some(_reply)) => Ok((lines, writer)),
        Ok(None) => Err("pane host closed the subscription".into()),
        Err(err) => Err(err.to_string()),
    }
}
