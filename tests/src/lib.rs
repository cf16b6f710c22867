//! Shared helpers for belfry's integration tests.
//!
//! Every test gets its own [`Env`]: a temporary runtime directory, state directory and log
//! directory, so tests never share a daemon. Commands run the real `belfry` binary; the daemon
//! is started on demand by the first command, exactly as for a user, and tests speak NDJSON to
//! its real socket through [`Conn`]. Dropping an `Env` stops the daemon and every pane host it
//! started.

pub mod live;
pub mod projection_live;
pub mod sshd;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The directory holding the workspace's built binaries.
pub fn bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("BELFRY_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        });
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    target.join(profile)
}

/// The `belfry` binary under test.
pub fn belfry_bin() -> PathBuf {
    let path = bin_dir().join("belfry");
    assert!(
        path.exists(),
        "{} does not exist: build the binaries first (cargo build --workspace --bins)",
        path.display()
    );
    path
}

/// Copies the executable `from` to `to` with `cp`, so this process never holds the copy open
/// for writing. A test that wrote the copy itself could not reliably run it: a child forked
/// meanwhile by another test thread inherits the open descriptor and keeps it until it execs,
/// and running the copy in that moment fails with ETXTBSY ("Text file busy").
pub fn copy_executable(from: &Path, to: &Path) {
    let out = Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .output()
        .unwrap_or_else(|err| panic!("run cp: {err}"));
    assert!(
        out.status.success(),
        "cp {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The recorder test program.
pub fn recorder_bin() -> PathBuf {
    bin_dir().join("belfry-test-recorder")
}

/// The fixture-replaying DING adapter.
pub fn adapter_bin() -> PathBuf {
    bin_dir().join("belfry-test-adapter")
}

/// The tick printer that timestamps each tick after its write returned.
pub fn ticker_bin() -> PathBuf {
    bin_dir().join("belfry-test-ticker")
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock `belfry-test-ticker` stamps its ticks with.
pub fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// A file under `tests/fixtures/`.
pub fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path)
}

/// Makes `dir` a folder of harness stand-ins: for every adapter whose matrix says how to ask
/// its harness its version (`adapters/*/matrix.json` `detect`) and which version it was
/// verified with, an executable of the asked name that prints that version. With the folder on
/// `PATH`, `belfry hooks` detects every harness at an admitted version, as on a machine with
/// the pinned harnesses installed, so `status` can say `installed` (issue 41 item 6: an
/// undetected version is `unverified`). Returns `dir`.
pub fn admitted_harnesses(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    let adapters = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    let entries =
        std::fs::read_dir(&adapters).unwrap_or_else(|err| panic!("{}: {err}", adapters.display()));
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("matrix.json")) else {
            continue;
        };
        let matrix: Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{}: {err}", entry.path().display()));
        let (Some(program), Some(version)) = (
            matrix["detect"][0].as_str(),
            matrix["verified_with"].as_str(),
        ) else {
            continue;
        };
        let path = dir.join(program);
        // Written beside and renamed over: a stand-in another `belfry` is running at this
        // moment (two applies started at once, each making the folder) cannot be opened for
        // writing (ETXTBSY), but it can be replaced.
        let fresh = dir.join(format!(".{program}.{}", std::process::id()));
        std::fs::write(&fresh, format!("#!/bin/sh\necho '{version}'\n"))
            .unwrap_or_else(|err| panic!("{}: {err}", fresh.display()));
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|err| panic!("{}: {err}", fresh.display()));
        std::fs::rename(&fresh, &path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    }
    dir.to_path_buf()
}

/// A `PATH` with `first` in front of belfry's own binaries and this process's `PATH`.
pub fn path_with(first: &Path) -> String {
    format!(
        "{}:{}:{}",
        first.display(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// One isolated belfry installation: runtime, state and logs in a temporary directory.
pub struct Env {
    pub dir: tempfile::TempDir,
    /// Extra environment for every belfry process of this test (and so for its daemon).
    pub extra: Vec<(String, String)>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Env {
        Env::with_vars(&[])
    }

    /// An environment whose belfry processes (the daemon included) also get `vars`.
    pub fn with_vars(vars: &[(&str, &str)]) -> Env {
        let dir = tempfile::Builder::new()
            .prefix("belfry-test-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let extra = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env { dir, extra }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Where the daemon and the pane hosts of this environment log.
    pub fn log_dir(&self) -> PathBuf {
        self.path("xdg-state").join("belfry").join("log")
    }

    pub fn runtime(&self) -> PathBuf {
        self.path("run")
    }

    pub fn socket(&self) -> PathBuf {
        self.runtime().join("default.sock")
    }

    pub fn pane_socket(&self, session: &str) -> PathBuf {
        self.runtime().join("panes").join(format!("{session}.sock"))
    }

    /// The environment every belfry process of this test runs with.
    /// The pid of `session`'s pane host, from its record.
    pub fn pane_host_pid(&self, session: &str) -> u32 {
        let record = std::fs::read_to_string(self.runtime().join(format!("panes/{session}.json")))
            .expect("pane record");
        let record: Value = serde_json::from_str(&record).expect("pane record is JSON");
        record["pid"].as_u64().expect("pane record pid") as u32
    }

    pub fn vars(&self) -> Vec<(String, String)> {
        let p = |n: &str| self.path(n).display().to_string();
        let mut vars = vec![
            ("BELFRY_RUNTIME_DIR".into(), p("run")),
            ("BELFRY_STATE".into(), p("state")),
            ("XDG_STATE_HOME".into(), p("xdg-state")),
            ("XDG_CONFIG_HOME".into(), p("xdg-config")),
            ("BELFRY_BIN".into(), belfry_bin().display().to_string()),
            (
                "PATH".into(),
                format!(
                    "{}:{}",
                    bin_dir().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
        ];
        vars.extend(self.extra.iter().cloned());
        vars
    }

    /// The state directory (inboxes, DING ownership).
    pub fn state(&self) -> PathBuf {
        self.path("state")
    }

    /// The arguments the daemon starts a pane host with, for this environment's directories:
    /// `--runtime DIR --daemon-socket PATH --state DIR`.
    pub fn pane_host_args(&self) -> Vec<String> {
        [
            ("--runtime", self.runtime()),
            ("--daemon-socket", self.socket()),
            ("--state", self.state()),
        ]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
    }

    /// A `belfry` command with this environment.
    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_of(&belfry_bin(), args)
    }

    /// `program ARGS` (a `belfry` other than the one under test, such as a copy) with this
    /// environment.
    pub fn cmd_of(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_remove("BELFRY_SOCKET")
            .env_remove("BELFRY_SESSION");
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `belfry ARGS` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run belfry")
    }

    /// Runs `belfry ARGS`, asserting success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "belfry {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `belfry inbox post SESSION --from FROM --subject SUBJECT` with `body` (a file it
    /// writes), asserting success; returns the message's file name.
    pub fn post_mail(&self, session: &str, from: &str, subject: &str, body: &str) -> String {
        let file = self.path(&format!("body-{}.md", monotonic_ns()));
        std::fs::write(&file, body).expect("write the message body");
        let posted = self.ok(&[
            "inbox",
            "post",
            session,
            "--from",
            from,
            "--subject",
            subject,
            &file.display().to_string(),
        ]);
        posted.trim().to_string()
    }

    /// `belfry ding status SESSION --json`, parsed.
    pub fn ding_status(&self, session: &str) -> Value {
        let out = self.ok(&["ding", "status", session, "--json"]);
        serde_json::from_str(&out).expect("ding status --json")
    }

    /// The state of each unread message of `session`, as `ding status` gives it.
    pub fn mail_states(&self, session: &str) -> Vec<String> {
        self.ding_status(session)["messages"]
            .as_array()
            .expect("ding status messages")
            .iter()
            .map(|m| m["state"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Waits (8 s at most) until every unread message of `session` is in state `want`.
    pub fn wait_for_mail_state(&self, session: &str, want: &str) {
        let ok = eventually(Duration::from_secs(8), || {
            let got = self.mail_states(session);
            !got.is_empty() && got.iter().all(|s| s == want)
        });
        assert!(ok, "expected {want}; status: {}", self.ding_status(session));
    }

    /// Starts a detached pane running `argv` at `rows`x`cols` and waits until its screen
    /// matches `ready` (a regex), if given.
    pub fn spawn(&self, session: &str, size: &str, argv: &[&str], ready: Option<&str>) -> Value {
        let mut args = vec!["new", session, "--size", size, "--json", "--"];
        args.extend_from_slice(argv);
        let out = self.ok(&args);
        let info: Value = serde_json::from_str(&out).expect("new --json prints JSON");
        if let Some(ready) = ready {
            self.wait_screen(session, ready);
        }
        info
    }

    /// Starts pane `session` running the test recorder (logging every byte it receives to
    /// `<session>.log` in this environment, so one environment can hold several), with
    /// `flags` before the `--`, and waits for its `READY`. Returns the log's path.
    pub fn recorder_pane(&self, session: &str, flags: &[&str]) -> PathBuf {
        let log = self.path(&format!("{session}.log"));
        let (rec, log_s) = (
            recorder_bin().display().to_string(),
            log.display().to_string(),
        );
        let mut args = vec!["new", session];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", &rec, "--log", &log_s]);
        self.ok(&args);
        self.wait_screen(session, "READY");
        log
    }

    /// Starts pane `session` running the recorder, logging to `<session>.log`, that does not
    /// read its input while the stall file `<session>.stall` exists (it is created here, so the
    /// program starts stalled), and waits for its `READY`. Returns the log's and the stall
    /// file's paths.
    pub fn stalled_recorder(&self, session: &str) -> (PathBuf, PathBuf) {
        let log = self.path(&format!("{session}.log"));
        let stall = self.path(&format!("{session}.stall"));
        std::fs::write(&stall, b"").expect("create the stall file");
        let rec = recorder_bin().display().to_string();
        let (log_s, stall_s) = (log.display().to_string(), stall.display().to_string());
        self.spawn(
            session,
            "24x80",
            &[&rec, "--log", &log_s, "--stall-while", &stall_s],
            Some("READY"),
        );
        (log, stall)
    }

    /// Types a cursor key into `session` cut across two writes 5 ms apart, as ssh or a slow
    /// terminal may deliver it: `ESC [`, then `last` (`A` up, `B` down).
    pub fn type_cut_arrow(&self, session: &str, last: &str) {
        self.ok(&[
            "send",
            session,
            "--key",
            "Escape",
            "--text",
            "[",
            "--delay-ms",
            "5",
            "--text",
            last,
        ]);
    }

    /// Waits until the pane's screen matches `regex` (15 s), and returns the reply.
    pub fn wait_screen(&self, session: &str, regex: &str) -> Value {
        let mut conn = self.conn();
        let reply =
            conn.request(json!({"op":"wait","session":session,"regex":regex,"timeout_ms":15000}));
        assert_eq!(
            reply["ok"],
            true,
            "waiting for {regex:?} on {session}: {reply}\nscreen: {:?}",
            self.lines(session)
        );
        reply
    }

    /// The pane's snapshot.
    pub fn snapshot(&self, session: &str) -> Value {
        let reply = self
            .conn()
            .request(json!({"op":"snapshot","session":session}));
        assert_eq!(reply["ok"], true, "snapshot {session}: {reply}");
        reply
    }

    pub fn revision(&self, session: &str) -> u64 {
        self.snapshot(session)["revision"]
            .as_u64()
            .expect("revision")
    }

    pub fn lines(&self, session: &str) -> Vec<String> {
        let reply = self
            .conn()
            .request(json!({"op":"snapshot","session":session}));
        reply["lines"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A connection to the daemon, started here if none answers. Retried for a while: a
    /// daemon killed a moment ago may still be on its way out, and a new one takes a moment to
    /// serve.
    pub fn conn(&self) -> Conn {
        let start = Instant::now();
        let mut started: Option<Instant> = None;
        loop {
            // A connection is not a daemon: a daemon just killed can still hold its listening
            // socket while its last threads exit (its main thread already a zombie), and the
            // kernel takes the connection into the backlog. Only a daemon that answers `hello`
            // is one, as the CLI's own client requires.
            if let Ok(mut conn) = Conn::open(&self.socket()) {
                if conn.answers_hello() {
                    return conn;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "no daemon at {}",
                self.socket().display()
            );
            // One start at a time: a second daemon would only lose the race for the lock.
            if started.is_none_or(|at| at.elapsed() > Duration::from_secs(3)) {
                self.spawn_daemon();
                started = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Makes sure this environment's daemon runs, and waits until it answers. The read-only
    /// commands (`ls`, `peek`, `ding status`) do not start one, so a test that needs a daemon
    /// back after killing one asks for it here.
    pub fn start_daemon(&self) {
        drop(self.conn());
    }

    /// Starts `belfry server` in the background with this environment, as the CLI does on
    /// demand. Through `sh … &` so the daemon is not this test's child and is reaped by init
    /// when it ends, not left a zombie that would still look alive.
    fn spawn_daemon(&self) {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("\"$0\" server </dev/null >/dev/null 2>&1 &")
            .arg(belfry_bin())
            .env_remove("BELFRY_SOCKET")
            .env_remove("BELFRY_SESSION");
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        let _ = cmd.status();
    }

    /// The daemon's pid, from a `hello`.
    ///
    /// Retried: right after a `kill -9` the dying daemon's socket may still take a connection
    /// for a moment (its last thread has not exited yet) and then close it unanswered, so
    /// both the write of the `hello` (`BrokenPipe`) and the read of its reply (EOF) may fail.
    pub fn daemon_pid(&self) -> u32 {
        for _ in 0..100 {
            let mut conn = self.conn();
            if conn.try_send_raw(b"{\"id\":1,\"op\":\"hello\"}\n").is_ok() {
                if let Some(reply) = conn.read() {
                    return reply["pid"].as_u64().expect("daemon pid") as u32;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no daemon answered hello");
    }

    /// Stops the daemon and every pane it knows about.
    pub fn shutdown(&self) {
        let _ = self.cmd(&["shutdown", "--kill-panes"]).output();
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // With BELFRY_TEST_KEEP=DIR, keep a copy of the whole environment (logs, state,
            // records) for a post-mortem; the temporary directory itself is removed.
            if let Some(keep) = std::env::var_os("BELFRY_TEST_KEEP") {
                let dest = PathBuf::from(keep).join(
                    self.dir
                        .path()
                        .file_name()
                        .unwrap_or_else(|| std::ffi::OsStr::new("env")),
                );
                let _ = std::fs::create_dir_all(&dest);
                let _ = Command::new("cp")
                    .arg("-a")
                    .arg(format!("{}/.", self.dir.path().display()))
                    .arg(&dest)
                    .status();
                eprintln!(
                    "--- kept a copy of the test environment in {}",
                    dest.display()
                );
            }
            // Show what the daemon and pane hosts logged, to explain the failure.
            if let Ok(entries) = std::fs::read_dir(self.log_dir()) {
                for entry in entries.flatten() {
                    let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(25).collect();
                    eprintln!("--- {} (last lines) ---", entry.path().display());
                    for line in tail.iter().rev() {
                        eprintln!("{line}");
                    }
                }
            }
        }
        self.shutdown();
        // Pane hosts the daemon no longer knew about (for example after a test killed it).
        if let Ok(entries) = std::fs::read_dir(self.runtime().join("panes")) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    continue;
                }
                if let Ok(bytes) = std::fs::read(&path) {
                    if let Ok(record) = serde_json::from_slice::<Value>(&bytes) {
                        for key in ["pid", "child_pid"] {
                            if let Some(pid) = record[key].as_i64() {
                                // SAFETY: kill(2) with a pid read from our own record file;
                                // it touches no memory.
                                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A raw NDJSON connection (to the daemon or a pane host).
pub struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl Conn {
    pub fn open(path: &Path) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let writer = stream.try_clone()?;
        Ok(Conn {
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
        })
    }

    /// Sends a request (adding an id) and reads the reply.
    pub fn request(&mut self, mut request: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        request["id"] = json!(id);
        self.send_raw(format!("{request}\n").as_bytes());
        let reply = self.read().expect("reply");
        assert_eq!(reply["id"], json!(id), "reply id mismatch: {reply}");
        reply
    }

    /// True if the server answers a `hello` (within the connection's read timeout).
    fn answers_hello(&mut self) -> bool {
        let hello = format!("{}\n", json!({"id": 0, "op": "hello"}));
        self.try_send_raw(hello.as_bytes()).is_ok()
            && self.read().is_some_and(|reply| reply["ok"] == true)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write request");
    }

    /// Like `send_raw`, for a peer that may be going away: the write error is returned.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// The connection's socket (to pass descriptors on it, see [`send_descriptors`]).
    pub fn stream(&self) -> &UnixStream {
        &self.writer
    }

    /// Reads one JSON line; `None` at EOF.
    pub fn read(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            // A line cut short by the peer's death (no newline before EOF) is no reply.
            Ok(_) if !line.ends_with('\n') => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("reply is JSON")),
        }
    }
}

/// The socket inodes a process holds open (`socket:[N]`, as `/proc/PID/fd` names them).
pub fn socket_inodes(pid: u32) -> std::collections::BTreeSet<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return std::collections::BTreeSet::new();
    };
    dir.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.starts_with("socket:"))
        .collect()
}

/// Sends the byte `T` with `fds` attached (`SCM_RIGHTS`) on `stream`: what an attach client
/// that hands over its terminal (and keyboard) sends after the pane host agreed, written here
/// by hand so a test can send what no client would (a file, the wrong count).
pub fn send_descriptors(
    stream: &std::os::unix::net::UnixStream,
    fds: &[std::os::fd::BorrowedFd<'_>],
) {
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut ancillary = rustix::net::SendAncillaryBuffer::new(&mut space);
    assert!(ancillary.push(rustix::net::SendAncillaryMessage::ScmRights(fds)));
    rustix::net::sendmsg(
        stream,
        &[std::io::IoSlice::new(b"T")],
        &mut ancillary,
        rustix::net::SendFlags::empty(),
    )
    .unwrap();
}

/// Polls `check` until it returns true or `limit` passes.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `RssFile`, ...); `None` when the process or
/// the field is not there.
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// True if a process with this pid exists (and is not a zombie).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    if !zombie {
        return true;
    }
    // A multi-threaded process killed by a signal turns zombie at its leader first, while its
    // other threads are still exiting and still hold its files (a daemon's listening socket
    // among them: a connect then is queued and reset, not refused). It is gone only once
    // its leader is the last task left.
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| tasks.count() > 1)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (the daemon and pane logs' UTC stamp, a line's first word)
/// as seconds since the epoch.
pub fn epoch_secs(stamp: &str) -> Option<f64> {
    let (date, time) = stamp.strip_suffix('Z')?.split_once('T')?;
    let mut ymd = date.split('-').map(|n| n.parse::<i64>().ok());
    let (y, m, d) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let mut hms = time.split(':');
    let (h, min) = (
        hms.next()?.parse::<f64>().ok()?,
        hms.next()?.parse::<f64>().ok()?,
    );
    let sec = hms.next()?.parse::<f64>().ok()?;
    // Days from the civil date (proleptic Gregorian), the usual era arithmetic.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + min * 60.0 + sec)
}

/// A shell command that waits until `path` exists: a script's gate, opened by the test
/// creating the file once it has seen what it waits for.
pub fn wait_for_file(path: &Path) -> String {
    format!("while [ ! -e '{}' ]; do sleep 0.05; done", path.display())
}

/// Reads a file that may not exist yet.
pub fn read_or_empty(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

/// Sends `signal` to a pid this test started (a daemon, pane host or CLI of its own `Env`).
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a pid this test started; it touches no memory.
    let rc = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(rc, 0, "kill -{signal} {pid}");
}

/// The one-letter state of a process from /proc/PID/stat (`T` when stopped).
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// A process held stopped by SIGSTOP for as long as this lives; SIGCONT on drop, so a failing
/// test never leaves a stopped process behind for its `Env` to trip over.
pub struct Stopped(pub u32);

impl Stopped {
    pub fn new(pid: u32) -> Stopped {
        signal(pid, libc::SIGSTOP);
        assert!(
            eventually(Duration::from_secs(5), || process_state(pid) == Some('T')),
            "pid {pid} did not stop"
        );
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid this guard stopped; it touches no memory.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// The unpacked npm package `spec` (`name@version`, its `package/` directory): fetched with
/// `npm pack` into `scratch` and unpacked there, or, with `$BELFRY_HARNESS_PKGS` set, taken
/// from `$BELFRY_HARNESS_PKGS/<unpacked>/package` where an earlier run left it. For the gated
/// tests that run one file of a harness's package rather than the installed harness.
pub fn npm_package(spec: &str, unpacked: &str, scratch: &Path) -> PathBuf {
    if let Ok(dir) = std::env::var("BELFRY_HARNESS_PKGS") {
        let path = Path::new(&dir).join(unpacked).join("package");
        assert!(path.is_dir(), "{} does not exist", path.display());
        return path;
    }
    let pack = Command::new("npm")
        .args(["pack", spec, "--silent"])
        .current_dir(scratch)
        .output()
        .unwrap_or_else(|e| panic!("cannot run npm to fetch {spec}: {e}"));
    assert!(
        pack.status.success(),
        "npm pack {spec} failed: {}",
        String::from_utf8_lossy(&pack.stderr)
    );
    let tarball = String::from_utf8_lossy(&pack.stdout).trim().to_string();
    let untar = Command::new("tar")
        .args(["-xzf", &tarball])
        .current_dir(scratch)
        .status()
        .expect("run tar");
    assert!(untar.success(), "cannot unpack {tarball}");
    scratch.join("package")
}

/// A small deterministic generator for the randomised tests (the soak, DING durability):
/// xorshift, no dependency, the same sequence for the same seed, so a failure is reproduced
/// from the seed it prints.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 for `n` = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}
