//! A live pane host is never taken for a gone one because it is overloaded or stopped: at its
//! connection cap (`busy`) or with a full listen backlog (connect `EAGAIN`) it is listed
//! `unresponsive`, keeps its name and its socket, and is adopted once it can answer.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use belfry_tests::{eventually, pid_alive, read_or_empty, recorder_bin, signal, Env, Stopped};
use serde_json::Value;

fn kill_daemon(env: &Env) {
    let daemon = env.daemon_pid();
    signal(daemon, libc::SIGKILL);
    assert!(eventually(Duration::from_secs(5), || !pid_alive(daemon)));
}

fn recorder(env: &Env, session: &str) -> (std::path::PathBuf, Value) {
    let log = env.path(&format!("{session}.log"));
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    let info = env.spawn(session, "24x80", &[&rec, "--log", &log_s], Some("READY"));
    (log, info)
}

fn listed(env: &Env, session: &str) -> Option<Value> {
    let out = env.ok(&["ls", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&out).expect("ls --json");
    list.into_iter().find(|p| p["session"] == session)
}

/// One request (`op` alone) on a fresh connection: the reply, or `Null` if the connection
/// broke (a pane host refusing `busy` may close it before it reads the request).
fn request(socket: &Path, op: &str) -> Value {
    let Ok(stream) = UnixStream::connect(socket) else {
        return Value::Null;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if (&stream)
        .write_all(format!("{{\"id\":1,\"op\":\"{op}\"}}\n").as_bytes())
        .is_err()
    {
        return Value::Null;
    }
    let mut line = String::new();
    let _ = BufReader::new(&stream).read_line(&mut line);
    serde_json::from_str(&line).unwrap_or(Value::Null)
}

/// A `hello` on a fresh connection: the connection and its reply.
fn hello(socket: &Path) -> (UnixStream, Value) {
    ask(socket, "hello")
}

fn ask(socket: &Path, op: &str) -> (UnixStream, Value) {
    let stream = UnixStream::connect(socket).expect("connect to the pane host");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    // A pane host refusing `busy` may close the connection before it reads the request: the
    // write then fails, but its reply is still there to read.
    let _ = (&stream).write_all(format!("{{\"id\":1,\"op\":\"{op}\"}}\n").as_bytes());
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .expect("a reply within 5 s");
    (stream, serde_json::from_str(&line).expect("reply is JSON"))
}

/// Opens answered connections until the pane host refuses one `busy`; returns those held.
fn fill_to_the_cap(socket: &Path) -> Vec<UnixStream> {
    let mut held = Vec::new();
    loop {
        let (stream, reply) = hello(socket);
        if reply["ok"] != true {
            assert_eq!(reply["error"]["code"], "busy", "{reply}");
            return held;
        }
        held.push(stream);
        assert!(held.len() <= 4096, "no connection cap");
    }
}

/// Fills the listen backlog of a stopped pane host with non-blocking connects until the
/// kernel answers `EAGAIN`; returns the queued connections.
fn fill_the_backlog(socket: &Path) -> Vec<OwnedFd> {
    let path = socket.as_os_str().as_encoded_bytes();
    // SAFETY: a zeroed sockaddr_un is a valid value; the path is copied in within its bounds.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(path.len() < addr.sun_path.len(), "socket path too long");
    for (dst, src) in addr.sun_path.iter_mut().zip(path) {
        *dst = *src as libc::c_char;
    }
    let mut queued = Vec::new();
    loop {
        // SAFETY: socket(2) allocates a new descriptor, owned at once below. CLOEXEC: the
        // belfry processes this test starts (a daemon among them) must not hold it open.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: fd was just returned by socket(2) and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: addr is a valid sockaddr_un whose size is passed with it.
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            assert_eq!(err.raw_os_error(), Some(libc::EAGAIN), "connect: {err}");
            return queued;
        }
        queued.push(fd);
        assert!(queued.len() <= 8192, "the backlog never filled");
    }
}

#[test]
fn a_pane_host_at_its_connection_cap_is_listed_unresponsive_then_adopted_once_they_close() {
    let env = Env::new();
    let (log, pane) = recorder(&env, "capped");
    let pane_host = pane["pid"].as_u64().unwrap() as u32;
    kill_daemon(&env);
    // Every connection slot is held, so the next daemon's adoption probe is answered `busy`.
    let held = fill_to_the_cap(&env.pane_socket("capped"));
    // `ls` does not start a daemon: the next one is started here.
    env.start_daemon();

    let entry = listed(&env, "capped").expect("a pane host at its cap is listed, not lost");
    assert_eq!(entry["state"], "unresponsive", "{entry}");
    assert_eq!(entry["pid"], pane_host);
    let again = env.run(&["new", "capped", "--", "sh"]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");

    drop(held);
    assert!(
        eventually(Duration::from_secs(10), || listed(&env, "capped")
            .is_some_and(|p| p["error"].is_null())),
        "the pane host was never adopted once its connections closed: {:?}",
        listed(&env, "capped")
    );
    let adopted = listed(&env, "capped").unwrap();
    assert_eq!(adopted["pid"], pane_host);
    assert_eq!(adopted["incarnation"], pane["incarnation"]);
    env.ok(&["send", "capped", "--text", "adopted"]);
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log) == b"adopted"));
}

#[test]
fn a_new_pane_never_takes_over_the_socket_of_a_stopped_pane_host_with_a_full_backlog() {
    let env = Env::new();
    let (log, pane) = recorder(&env, "held");
    let pane_host = pane["pid"].as_u64().unwrap() as u32;
    let socket = env.pane_socket("held");
    let inode = std::fs::metadata(&socket).expect("pane socket").ino();
    let record: Value =
        serde_json::from_slice(&std::fs::read(env.runtime().join("panes/held.json")).unwrap())
            .expect("pane record");
    kill_daemon(&env);
    let stopped = Stopped::new(pane_host);
    let queued = fill_the_backlog(&socket);

    // The new daemon's probe meets the full backlog: the pane stays listed and its name taken.
    let entry = listed(&env, "held").expect("a stopped pane host with a full backlog is listed");
    assert_eq!(entry["state"], "unresponsive", "{entry}");
    let again = env.run(&["new", "held", "--", "sh"]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");

    // A pane host started for the name by hand refuses to bind over the live one.
    let args = env.pane_host_args();
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.insert(0, "pane-host");
    let mut second = env
        .cmd(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a second pane host");
    let spec = serde_json::to_vec(&record["spec"]).unwrap();
    second.stdin.take().unwrap().write_all(&spec).unwrap();
    let mut announced = String::new();
    BufReader::new(second.stdout.take().unwrap())
        .read_line(&mut announced)
        .expect("the second pane host's start-up line");
    assert!(
        announced.contains("already serving"),
        "a second pane host took the name: {announced}"
    );
    assert!(eventually(Duration::from_secs(5), || second
        .try_wait()
        .ok()
        .flatten()
        .is_some()));

    // The old pane host still owns its socket and answers once resumed.
    assert_eq!(
        std::fs::metadata(&socket).expect("pane socket").ino(),
        inode
    );
    drop(queued);
    drop(stopped);
    // The closed connections left in its backlog are accepted and refused `busy` first.
    assert!(
        eventually(Duration::from_secs(10), || request(&socket, "info")["pid"]
            == pane_host),
        "the resumed pane host does not answer on its socket"
    );
    assert!(
        eventually(Duration::from_secs(10), || listed(&env, "held")
            .is_some_and(|p| p["error"].is_null())),
        "the resumed pane host was never adopted"
    );
    env.ok(&["send", "held", "--text", "mine"]);
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log) == b"mine"));
}

#[test]
fn a_kill_of_a_pane_host_at_its_connection_cap_is_retried_until_a_connection_frees() {
    let env = Env::new();
    let (_, pane) = recorder(&env, "full");
    let pane_host = pane["pid"].as_u64().unwrap() as u32;
    let held = fill_to_the_cap(&env.pane_socket("full"));

    let kill = env
        .cmd(&["kill", "full"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start belfry kill");
    // The kill meets the cap first, then a free connection well within its deadline.
    std::thread::sleep(Duration::from_millis(1000));
    drop(held);
    let killed = kill.wait_with_output().expect("belfry kill output");
    assert_eq!(
        killed.status.code(),
        Some(0),
        "kill of a pane host at its cap failed: {}",
        String::from_utf8_lossy(&killed.stderr)
    );
    assert!(eventually(Duration::from_secs(5), || !pid_alive(pane_host)));
    assert!(listed(&env, "full").is_none());
}
