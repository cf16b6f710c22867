//! Nothing waits forever on another process. A stopped (SIGSTOP) daemon or pane host turns
//! every command that needs it into a clear error naming the unresponsive process within the
//! op's deadline (`peek` and `send` need no daemon: they are answered by the pane host);
//! a pane host that misses the adoption probe is listed as `unresponsive` and adopted as soon
//! as it answers; a send whose requester went away is never written later.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use belfry_tests::{eventually, pid_alive, read_or_empty, recorder_bin, signal, Env, Stopped};
use serde_json::Value;

/// A finished command with how long it took.
struct Timed {
    args: Vec<String>,
    output: Output,
    took: Duration,
}

impl Timed {
    fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Asserts the command failed with exit 2 within `limit`, its message naming `pid` as a
    /// process that did not answer.
    fn assert_unanswered(&self, pid: u32, limit: Duration) {
        let args = &self.args;
        assert!(
            self.took < limit,
            "belfry {args:?} took {:?} (limit {limit:?})",
            self.took
        );
        assert_eq!(self.code(), Some(2), "belfry {args:?}: {}", self.stderr());
        let stderr = self.stderr();
        assert!(
            stderr.contains(&format!("pid {pid}")) && stderr.contains("did not answer"),
            "belfry {args:?} does not name pid {pid} as unresponsive: {stderr}"
        );
    }
}

/// Runs every command at once (each deadline is seconds long) and returns them as they were
/// given, each with its own time.
fn run_all(env: &Env, commands: &[&[&str]]) -> Vec<Timed> {
    let running: Vec<_> = commands
        .iter()
        .map(|args| {
            let child = env
                .cmd(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start belfry");
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let started = Instant::now();
            std::thread::spawn(move || {
                let output = child.wait_with_output().expect("belfry output");
                Timed {
                    args,
                    output,
                    took: started.elapsed(),
                }
            })
        })
        .collect();
    running
        .into_iter()
        .map(|waiter| waiter.join().expect("waiter thread"))
        .collect()
}

fn recorder(env: &Env, session: &str) -> (std::path::PathBuf, Value) {
    let log = env.path(&format!("{session}.log"));
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    let info = env.spawn(session, "24x80", &[&rec, "--log", &log_s], Some("READY"));
    (log, info)
}

fn panes(env: &Env) -> BTreeMap<String, Value> {
    let out = env.ok(&["ls", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&out).expect("ls --json");
    list.into_iter()
        .map(|p| (p["session"].as_str().unwrap().to_string(), p))
        .collect()
}

/// The CLI waits 10 s for a daemon's hello; a little slack for a loaded machine.
const HELLO_LIMIT: Duration = Duration::from_secs(14);

#[test]
fn a_stopped_daemon_makes_each_command_that_needs_it_fail_naming_the_daemon() {
    let env = Env::new();
    let (log, pane) = recorder(&env, "rec");
    let pane_host = pane["pid"].as_u64().unwrap() as u32;
    let daemon = env.daemon_pid();
    let stopped = Stopped::new(daemon);

    let results = run_all(
        &env,
        &[
            &["ls"],
            &["kill", "rec"],
            &["shutdown", "--kill-panes"],
            // Answered by the pane host, with no daemon in their path.
            &["peek", "rec"],
            &["send", "rec", "--text", "WHILE-STOPPED"],
            // To a session with no pane (`--create`: a name nothing knows yet), so no DING
            // notice reaches the recorder afterwards.
            &[
                "inbox",
                "post",
                "elsewhere",
                "--create",
                "--subject",
                "hi",
                "/dev/null",
            ],
        ],
    );
    let (daemon_commands, direct) = results.split_at(3);
    for command in daemon_commands {
        command.assert_unanswered(daemon, HELLO_LIMIT);
    }
    let (peek, send, post) = (&direct[0], &direct[1], &direct[2]);
    for command in [peek, send] {
        assert_eq!(
            command.code(),
            Some(0),
            "belfry {:?}: {}",
            command.args,
            command.stderr()
        );
        assert!(
            command.took < Duration::from_secs(5),
            "belfry {:?} took {:?} with the daemon stopped",
            command.args,
            command.took
        );
    }
    assert!(peek.stdout().contains("READY"), "{}", peek.stdout());
    // Posting needs no daemon: the message is on disk, and the nudge gives up after 1 s.
    assert!(
        post.took < Duration::from_secs(5),
        "inbox post took {:?}",
        post.took
    );
    assert_eq!(post.code(), Some(0), "inbox post: {}", post.stderr());
    let name = post.stdout().trim().to_string();
    assert!(
        env.state()
            .join("inbox")
            .join("elsewhere")
            .join("new")
            .join(&name)
            .exists(),
        "posted message {name:?} is not in the inbox"
    );
    assert!(
        post.stderr().contains(&format!("pid {daemon}")),
        "inbox post does not say the daemon did not answer: {}",
        post.stderr()
    );

    // Once the daemon runs again, nothing those commands asked for happens late: the pane was
    // not killed, it holds only the send its pane host answered, and the daemon still serves.
    drop(stopped);
    std::thread::sleep(Duration::from_millis(500));
    assert!(pid_alive(pane_host), "the pane was killed after the fact");
    assert_eq!(panes(&env)["rec"]["pid"], pane["pid"]);
    assert_eq!(read_or_empty(&log), b"WHILE-STOPPED", "the pane's input");
}

#[test]
fn a_stopped_pane_host_is_listed_as_unresponsive_and_times_out_clearly() {
    let env = Env::new();
    let (_, awake) = recorder(&env, "awake");
    let (log, asleep) = recorder(&env, "asleep");
    let pane_host = asleep["pid"].as_u64().unwrap() as u32;
    let stopped = Stopped::new(pane_host);

    // `ls` asks every pane host at once, each within 5 s.
    let started = Instant::now();
    let listed = panes(&env);
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "ls took {:?}",
        started.elapsed()
    );
    assert_eq!(listed["awake"]["incarnation"], awake["incarnation"]);
    assert!(listed["awake"]["error"].is_null(), "{}", listed["awake"]);
    let entry = &listed["asleep"];
    assert_eq!(entry["state"], "unresponsive", "{entry}");
    assert_eq!(entry["pid"], pane_host);
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("pid {pane_host}")) && error.contains("did not answer"),
        "{entry}"
    );
    let table = env.ok(&["ls"]);
    assert!(
        table
            .lines()
            .any(|line| line.starts_with("asleep") && line.contains("unresponsive")),
        "{table}"
    );

    // Ops on the stopped pane fail naming its pane host; the daemon itself keeps answering.
    let results = run_all(
        &env,
        &[
            &["peek", "asleep"],
            &["send", "asleep", "--text", "TOO-LATE"],
            &["kill", "asleep"],
            &["attach", "asleep"],
        ],
    );
    results[0].assert_unanswered(pane_host, Duration::from_secs(9));
    // A send's deadline covers what the pane host may legitimately spend on it with the
    // default 5 s write timeout: 5 s + a lock wait of 10 s + 5 s of writes = 20 s (`peek` and
    // `send` wait for the pane host themselves, with no daemon in between).
    results[1].assert_unanswered(pane_host, Duration::from_secs(24));
    results[2].assert_unanswered(pane_host, Duration::from_secs(9));
    results[3].assert_unanswered(pane_host, HELLO_LIMIT);
    env.ok(&["peek", "awake"]);

    // The clients (and the daemon, for `kill`) gave up on them and closed their connections, so
    // when the pane host runs again it finds their requesters gone: the send is not written and
    // the pane was not forgotten.
    drop(stopped);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(read_or_empty(&log), b"", "the timed-out send was written");
    let listed = panes(&env);
    assert_eq!(listed["asleep"]["incarnation"], asleep["incarnation"]);
    env.ok(&["send", "asleep", "--text", "awake-now"]);
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        == b"awake-now"));
}

#[test]
fn a_pane_host_that_misses_adoption_is_listed_unresponsive_then_adopted() {
    let env = Env::new();
    let (log, pane) = recorder(&env, "slow");
    let pane_host = pane["pid"].as_u64().unwrap() as u32;
    let stopped = Stopped::new(pane_host);
    let old_daemon = env.daemon_pid();
    signal(old_daemon, libc::SIGKILL);
    assert!(eventually(Duration::from_secs(5), || !pid_alive(
        old_daemon
    )));

    // The next command starts a new daemon, whose adoption probe the stopped pane host misses.
    let listed = panes(&env);
    let entry = &listed["slow"];
    assert_eq!(entry["state"], "unresponsive", "{entry}");
    assert_eq!(entry["pid"], pane_host);
    let peek = env.run(&["peek", "slow"]);
    assert_eq!(peek.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&peek.stderr);
    assert!(stderr.contains(&format!("pid {pane_host}")), "{stderr}");
    // Its name stays taken.
    let again = env.run(&["new", "slow", "--", "sh"]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");

    // Resumed, it is adopted: the same pane host and incarnation, and usable.
    drop(stopped);
    assert!(
        eventually(Duration::from_secs(10), || panes(&env)["slow"]["error"]
            .is_null()),
        "the resumed pane host was never adopted: {:?}",
        panes(&env)["slow"]
    );
    let adopted = &panes(&env)["slow"];
    assert_eq!(adopted["pid"], pane["pid"]);
    assert_eq!(adopted["incarnation"], pane["incarnation"]);
    env.ok(&["send", "slow", "--text", "adopted"]);
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log) == b"adopted"));
}

#[test]
fn a_queued_send_whose_cli_was_killed_or_interrupted_is_never_written() {
    let env = Env::new();
    let (log, _) = recorder(&env, "rec");
    // The holder's transaction keeps the pane's input lock for 2 s.
    let holder = env
        .cmd(&[
            "send",
            "rec",
            "--text",
            "first",
            "--delay-ms",
            "2000",
            "--text=-end",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("holder send");
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log) == b"first"),
        "the holder's transaction did not start"
    );
    let queued = |text: &str| {
        let mut send = env.cmd(&["send", "rec", "--text", text]);
        send.stdout(Stdio::null()).stderr(Stdio::null());
        // SIGINT at its default action, as for a command a user runs at a terminal: a suite
        // run in the background of a shell without job control inherits it ignored, and a
        // send that ignores it rightly waits and writes (which this test once took for a bug).
        // SAFETY: signal(2) is async-signal-safe and allocates nothing.
        unsafe {
            send.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        send.spawn().expect("queued send")
    };
    let mut killed = queued("KILLED");
    let mut interrupted = queued("INTERRUPTED");
    // Long enough for both to be forwarded and waiting at the pane host's input lock.
    std::thread::sleep(Duration::from_millis(600));
    signal(killed.id(), libc::SIGKILL);
    signal(interrupted.id(), libc::SIGINT);
    assert!(!killed.wait().unwrap().success());
    assert!(!interrupted.wait().unwrap().success());

    let holder = holder.wait_with_output().expect("holder");
    assert!(holder.status.success());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        read_or_empty(&log),
        b"first-end",
        "an abandoned send was written through the daemon"
    );
}

#[test]
fn a_requester_that_only_half_closes_still_gets_its_reply_and_its_send() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let (log, _) = recorder(&env, "rec");
    // A client that writes its request and shuts down its writing side (as `nc -N` does) is
    // still there to read the reply: it is not a requester that left.
    let mut stream = std::os::unix::net::UnixStream::connect(env.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .write_all(b"{\"id\":1,\"op\":\"send\",\"session\":\"rec\",\"input\":[{\"delay_ms\":300},{\"text\":\"half\"}]}\n")
        .unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply).unwrap();
    let reply: Value = serde_json::from_str(&reply).expect("a reply line");
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log) == b"half"));
}

#[test]
fn an_unadopted_pane_host_that_dies_is_reported_lost_and_frees_its_name() {
    let env = Env::new();
    let (_, pane) = recorder(&env, "gone");
    let pane_host = pane["pid"].as_u64().unwrap() as u32;
    let stopped = Stopped::new(pane_host);
    let old_daemon = env.daemon_pid();
    signal(old_daemon, libc::SIGKILL);
    assert!(eventually(Duration::from_secs(5), || !pid_alive(
        old_daemon
    )));
    // `ls` does not start a daemon: the next one is started here, and finds the pane host
    // stopped.
    env.start_daemon();
    assert_eq!(panes(&env)["gone"]["state"], "unresponsive");

    signal(pane_host, libc::SIGKILL);
    drop(stopped);
    assert!(
        eventually(Duration::from_secs(10), || !panes(&env)
            .contains_key("gone")),
        "a dead unadopted pane host is still listed"
    );
    assert!(
        !env.pane_socket("gone").exists(),
        "its socket was left behind"
    );
    env.ok(&["new", "gone", "--", "sleep", "600"]);
}
