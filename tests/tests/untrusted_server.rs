//! spec §6.1: a client trusts neither a socket path nor the directory holding it. The runtime
//! directory must be ours and 0700, and every connection checks the server's uid
//! (`SO_PEERCRED`) before writing a byte: the CLI to the daemon, the CLI to a pane host
//! (attach), and the daemon to the pane hosts it adopts. Each test plants a real listener run
//! as `nobody` (via `setpriv`) that records how many bytes every connection brought, and shows
//! that belfry refuses it by path and owner and that it received nothing.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use belfry_tests::Env;

const NOBODY: u32 = 65534;

/// Binds `argv[1]` (mode 0777), prints READY, then for every connection appends the number of
/// bytes it received (until EOF or 2 s of silence) as one line to `argv[2]`.
const LISTENER: &str = r#"
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o777)
s.listen(64)
print("READY", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    n = 0
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            n += len(d)
    except OSError:
        pass
    with open(log, "a") as f:
        f.write("%d\n" % n)
    c.close()
"#;

/// A Python interpreter `nobody` can run: a per-user shim (pyenv under /root) on `PATH` is not
/// reachable for another uid, so the system one is preferred.
fn python_for_nobody() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A listener owned by `nobody`, killed when dropped.
struct PlantedListener {
    child: Child,
    log: PathBuf,
}

impl PlantedListener {
    /// Starts the listener on `socket`; its directory must be writable by `nobody`. `None`
    /// when `setpriv` or `python3` cannot run as `nobody` here.
    fn start(socket: &Path, log: &Path) -> Option<PlantedListener> {
        let mut child = Command::new("setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                python_for_nobody(),
                "-c",
                LISTENER,
            ])
            .arg(socket)
            .arg(log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut ready = String::new();
        let stdout = child.stdout.take()?;
        let _ = BufReader::new(stdout).read_line(&mut ready);
        if ready.trim() != "READY" {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        Some(PlantedListener {
            child,
            log: log.to_path_buf(),
        })
    }

    /// The bytes each connection brought, once the listener has finished with them.
    fn bytes_per_connection(&self) -> Vec<u64> {
        // A connection the client just closed is read to EOF at once; give it that moment.
        std::thread::sleep(Duration::from_millis(300));
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| line.trim().parse().expect("listener log line"))
            .collect()
    }
}

impl Drop for PlantedListener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory owned by `nobody`, mode 0755, inside `parent` (which is opened to 0755 so that
/// `nobody` can reach it).
fn nobody_dir(parent: &Path, name: &str) -> PathBuf {
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

fn is_root() -> bool {
    // SAFETY: getuid(2) cannot fail and touches no memory.
    unsafe { libc::getuid() == 0 }
}

/// Skips (returns `None`) unless the test can create files for another uid and run as it.
fn planted(socket: &Path, log: &Path) -> Option<PlantedListener> {
    if !is_root() {
        eprintln!("SKIP: not root, cannot plant a listener as another uid");
        return None;
    }
    let listener = PlantedListener::start(socket, log);
    if listener.is_none() {
        eprintln!("SKIP: setpriv/python3 as nobody unavailable");
    }
    listener
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn cli_refuses_a_runtime_dir_owned_by_another_uid_and_sends_it_nothing() {
    if !is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    let env = Env::new();
    // Another user got there first: the runtime directory (here BELFRY_RUNTIME_DIR, standing for
    // /tmp/belfry-$UID) is theirs, with their daemon-looking listener at default.sock.
    let runtime = nobody_dir(env.dir.path(), "run");
    assert_eq!(runtime, env.runtime());
    let Some(listener) = planted(&env.socket(), &runtime.join("bytes.log")) else {
        return;
    };
    let mut cmd = env.cmd(&["new", "w", "--", "sleep", "600"]);
    cmd.env("PLANTED_TEST_TOKEN", "secret-that-must-not-leave");
    let out = cmd.output().unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&runtime.display().to_string()), "{stderr}");
    assert!(
        stderr.contains(&format!("owned by uid {NOBODY}")),
        "{stderr}"
    );
    assert!(
        listener.bytes_per_connection().is_empty(),
        "the planted listener was contacted"
    );
    // Refused, not repaired: the directory is left exactly as its owner made it.
    let meta = std::fs::metadata(&runtime).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), NOBODY);
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
}

#[test]
fn cli_refuses_a_runtime_dir_of_ours_that_is_open_to_others() {
    let env = Env::new();
    std::fs::create_dir(env.runtime()).unwrap();
    std::fs::set_permissions(env.runtime(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = env.run(&["ls"]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&env.runtime().display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains("mode is 755, not 700"), "{stderr}");
    assert!(!env.socket().exists(), "a daemon was started anyway");
    assert_eq!(
        std::fs::metadata(env.runtime())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755,
        "belfry re-moded a directory it did not create"
    );
}

#[test]
fn cli_creates_a_missing_runtime_dir_0700() {
    let env = Env::new();
    assert!(!env.runtime().exists());
    env.ok(&["ls"]);
    assert_eq!(
        std::fs::metadata(env.runtime())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
}

#[test]
fn cli_refuses_a_daemon_socket_served_by_another_uid_and_sends_it_nothing() {
    if !is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    let elsewhere = tempfile::Builder::new()
        .prefix("belfry-planted-")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = nobody_dir(elsewhere.path(), "evil");
    let socket = dir.join("daemon.sock");
    let Some(listener) = planted(&socket, &dir.join("bytes.log")) else {
        return;
    };
    let env = Env::with_vars(&[("BELFRY_SOCKET", &socket.display().to_string())]);
    let mut cmd = env.cmd(&["new", "w", "--", "sleep", "600"]);
    cmd.env("PLANTED_TEST_TOKEN", "secret-that-must-not-leave");
    let out = cmd.output().unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&socket.display().to_string()), "{stderr}");
    assert!(stderr.contains(&format!("uid {NOBODY}")), "{stderr}");
    let connections = listener.bytes_per_connection();
    assert!(!connections.is_empty(), "the CLI never connected");
    assert!(
        connections.iter().all(|&bytes| bytes == 0),
        "the planted daemon received bytes: {connections:?}"
    );
}

/// Plants a `nobody` listener under the name of a pane socket inside our own (0700) runtime
/// directory: bound where `nobody` may write, then renamed into place (as root), the way a
/// socket outlives a directory swap. Returns the listener.
fn plant_pane_socket(env: &Env, elsewhere: &Path, session: &str) -> Option<PlantedListener> {
    let dir = nobody_dir(elsewhere, "evil");
    let bound = dir.join("pane.sock");
    let listener = planted(&bound, &dir.join("bytes.log"))?;
    std::fs::rename(&bound, env.pane_socket(session)).unwrap();
    Some(listener)
}

#[test]
fn attach_refuses_a_pane_socket_served_by_another_uid_and_sends_it_nothing() {
    if !is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    let env = Env::new();
    env.start_daemon();
    let elsewhere = tempfile::Builder::new()
        .prefix("belfry-planted-")
        .tempdir_in("/tmp")
        .unwrap();
    let Some(listener) = plant_pane_socket(&env, elsewhere.path(), "w") else {
        return;
    };
    let out = env
        .cmd(&["attach", "w"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&env.pane_socket("w").display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("uid {NOBODY}")), "{stderr}");
    let connections = listener.bytes_per_connection();
    assert_eq!(
        connections,
        vec![0],
        "attach must connect once and write nothing"
    );
}

#[test]
fn daemon_does_not_adopt_a_pane_socket_served_by_another_uid() {
    if !is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    let env = Env::new();
    let panes = env.runtime().join("panes");
    std::fs::create_dir_all(&panes).unwrap();
    for dir in [env.runtime(), panes.clone()] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let elsewhere = tempfile::Builder::new()
        .prefix("belfry-planted-")
        .tempdir_in("/tmp")
        .unwrap();
    let Some(listener) = plant_pane_socket(&env, elsewhere.path(), "evil") else {
        return;
    };
    let record = serde_json::json!({"session": "evil", "pid": listener.child.id()});
    std::fs::write(panes.join("evil.json"), record.to_string()).unwrap();
    // The daemon starts and runs adoption over everything in panes/.
    env.start_daemon();
    let listed = env.ok(&["ls", "--json"]);
    assert!(!listed.contains("evil"), "adopted a planted pane: {listed}");
    let connections = listener.bytes_per_connection();
    assert!(!connections.is_empty(), "the daemon never probed the pane");
    assert!(
        connections.iter().all(|&bytes| bytes == 0),
        "the planted pane host received bytes: {connections:?}"
    );
}

#[test]
fn dispatch_sends_nothing_to_a_daemon_socket_served_by_another_uid() {
    if !is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    let elsewhere = tempfile::Builder::new()
        .prefix("belfry-planted-")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = nobody_dir(elsewhere.path(), "evil");
    let socket = dir.join("daemon.sock");
    let Some(listener) = planted(&socket, &dir.join("bytes.log")) else {
        return;
    };
    let env = Env::new();
    let mut child = env
        .cmd(&["dispatch", "--event", "session-start"])
        .env("BELFRY_SESSION", "w")
        .env("BELFRY_SOCKET", &socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"hook_event_name":"SessionStart","session_id":"s1"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // Fail-open as always: the hook's answer does not depend on the daemon.
    assert_eq!(out.status.code(), Some(0));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["decision"], "allow", "{answer}");
    let connections = listener.bytes_per_connection();
    assert!(!connections.is_empty(), "dispatch never tried the daemon");
    assert!(
        connections.iter().all(|&bytes| bytes == 0),
        "the planted daemon received the hook event: {connections:?}"
    );
}

/// Removes a directory tree when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn default_runtime_dir_planted_at_tmp_belfry_uid_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    // The victim is a uid with no runtime directory settings at all, so the CLI falls back to
    // /tmp/belfry-$UID. `nobody` created that directory first and listens in it.
    const VICTIM: u32 = 65533;
    let runtime = PathBuf::from(format!("/tmp/belfry-{VICTIM}"));
    let _ = std::fs::remove_dir_all(&runtime);
    let _cleanup = RemoveOnDrop(runtime.clone());
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&runtime, Some(NOBODY), Some(NOBODY)).unwrap();
    let Some(listener) = planted(&runtime.join("default.sock"), &runtime.join("bytes.log")) else {
        return;
    };
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={VICTIM}"),
            &format!("--regid={VICTIM}"),
            "--clear-groups",
            "env",
            "-i",
            "HOME=/nonexistent",
            "PATH=/usr/bin:/bin",
            "PLANTED_TEST_TOKEN=secret-that-must-not-leave",
        ])
        .arg(belfry_tests::belfry_bin())
        .args(["new", "w", "--", "sleep", "600"])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("directory {} is not safe", runtime.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("owned by uid {NOBODY}, not by uid {VICTIM}")),
        "{stderr}"
    );
    assert!(
        listener.bytes_per_connection().is_empty(),
        "the planted listener was contacted"
    );
}
