//! OSC 7501, the Program Status Protocol: the pane host answers the program's query once,
//! attached or not, keeps the program's reports per id with the revision they arrived at,
//! and `peek --json`, `events`, `ls` and `wait --status` show them. The program here is a
//! small python3 script on a real PTY that writes the query and the reports it is told to.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use belfry_tests::Env;
use serde_json::Value;

/// The program: probes at start (the 7501 query, then DA1 as a sentinel, printing every
/// answer that arrives within half a second after the sentinel's), then takes one command a
/// line: `st BODY` / `bel BODY` write `ESC ] 7501 ; BODY` ended by ST / BEL, `split BODY`
/// writes it three bytes a write, `mixed BODY` writes it between styled text, `probe` probes
/// again. Each command ends with `DONE N` on the screen, after what it wrote.
const PROGRAM: &str = r#"
import os, sys, termios, tty, time, select
fd = 0
tty.setraw(fd)
def out(b): os.write(1, b)
def probe(tag):
    out(b"\x1b]7501;?\x1b\\\x1b[c")
    got = b""
    end = time.time() + 5
    while not got.endswith(b"c") and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r: got += os.read(fd, 64)
    end = time.time() + 0.5
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r: got += os.read(fd, 64)
    out(tag + b":" + got.replace(b"\x1b", b"ESC").replace(b"\x07", b"BEL") + b"\r\n")
probe(b"PROBE0")
out(b"READY\r\n")
line = b""
n = 0
while True:
    c = os.read(fd, 1)
    if not c: break
    if c not in b"\r\n":
        line += c
        continue
    if not line: continue
    cmd, _, arg = line.decode().partition(" ")
    line = b""
    n += 1
    seq = b"\x1b]7501;" + arg.encode()
    if cmd == "st": out(seq + b"\x1b\\")
    elif cmd == "bel": out(seq + b"\x07")
    elif cmd == "split":
        whole = seq + b"\x1b\\"
        for i in range(0, len(whole), 3):
            out(whole[i:i+3])
            time.sleep(0.01)
    elif cmd == "mixed": out(b"text \x1b[1mbold\x1b[0m " + seq + b"\x1b\\" + b" more\r\n")
    elif cmd == "probe": probe(b"PROBE%d" % n)
    elif cmd == "exit": sys.exit(0)
    out(b"DONE %d\r\n" % n)
"#;

/// What the probe prints when exactly one answer to each query arrived, the status query's
/// first.
const ONE_ANSWER_EACH: &str = "ESC]7501;?ESC\\ESC[?6c";

/// Starts pane `name` running [`PROGRAM`] and waits for its `READY`.
fn status_pane(env: &Env, name: &str) {
    let script = env.path("status.py");
    std::fs::write(&script, PROGRAM).expect("write the program");
    let script = script.display().to_string();
    env.spawn(name, "24x100", &["python3", &script], Some("READY"));
}

/// Sends one command line to the program and waits until it says it is done with it.
fn command(env: &Env, name: &str, done: usize, line: &str) {
    env.ok(&["send", name, "--text", line, "--key", "Enter"]);
    env.wait_screen(name, &format!("DONE {done}\\b"));
}

/// The snapshot's program status.
fn status(env: &Env, name: &str) -> Value {
    let out = env.ok(&["peek", name, "--json"]);
    let screen: Value = serde_json::from_str(&out).expect("peek --json prints JSON");
    let mut status = screen["program_status"].clone();
    status["snapshot_revision"] = screen["revision"].clone();
    status["lines"] = screen["lines"].clone();
    status
}

/// `belfry events NAME --json`, its events arriving on a channel.
fn events(env: &Env, name: &str) -> (Child, Receiver<Value>) {
    let mut child = env
        .cmd(&["events", name, "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start belfry events");
    let stdout = child.stdout.take().expect("events stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// The `program-status` events that arrive within `window`, or until `enough` of them.
fn status_events(rx: &Receiver<Value>, enough: usize, window: Duration) -> Vec<Value> {
    let until = Instant::now() + window;
    let mut seen = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(event) if event["event"] == "program-status" => {
                seen.push(event);
                if seen.len() >= enough {
                    break;
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    seen
}

#[test]
fn a_detached_pane_answers_the_program_status_query_once_and_before_the_sentinel() {
    let env = Env::new();
    status_pane(&env, "probe");
    let lines = env.lines("probe");
    let expected = format!("PROBE0:{ONE_ANSWER_EACH}");
    assert!(lines.iter().any(|l| l == &expected), "screen: {lines:?}");
    assert_eq!(status(&env, "probe")["queries"], 1);
}

/// An attached terminal that speaks the protocol too (here the outer pane host, which plays
/// the attach client's terminal) answers the query as well; the pane host keeps its own answer
/// and takes the terminal's out, so the program still gets one.
#[test]
fn an_attached_pane_answers_the_program_status_query_once() {
    let env = Env::new();
    status_pane(&env, "inner");
    env.spawn(
        "outer",
        "24x100",
        &["sh", "-c", "\"$BELFRY_BIN\" attach inner; sleep 600"],
        None,
    );
    env.wait_screen("outer", "READY");
    env.ok(&["send", "inner", "--text", "probe", "--key", "Enter"]);
    env.wait_screen("inner", "DONE 1");
    let lines = env.lines("inner");
    let expected = format!("PROBE1:{ONE_ANSWER_EACH}");
    assert!(
        lines.iter().any(|l| l == &expected),
        "attached, the query was not answered exactly once: {lines:?}"
    );
    // The outer terminal saw the query too and answered it: that answer was taken out.
    assert!(status(&env, "outer")["queries"].as_u64() >= Some(1));
    // A report reaches the attached terminal as the program wrote it: the outer pane host,
    // which speaks the protocol, keeps it too.
    command(&env, "inner", 2, "st state=working:app=inner");
    env.ok(&[
        "wait",
        "outer",
        "--status",
        "working",
        "--timeout-ms",
        "10000",
    ]);
    assert_eq!(status(&env, "outer")["records"][0]["app"], "inner");
}

#[test]
fn reports_reach_peek_events_ls_and_wait_with_their_revisions() {
    let env = Env::new();
    status_pane(&env, "agent");
    let (mut watcher, rx) = events(&env, "agent");
    // The subscription is in place once an event of the pane arrives: the program's echo-less
    // input moves no revision, so a report is what the first one is about.
    let message = "d29ya2luZyBvbiBpdA=="; // "working on it"
    let mut seen = Vec::new();
    let mut n = 0;
    for attempt in 1..=20 {
        n = attempt;
        command(
            &env,
            "agent",
            n,
            &format!("st state=working:app=tool:progress={attempt}:msg={message}"),
        );
        if attempt == 1 {
            let snap = status(&env, "agent");
            let record = &snap["records"][0];
            assert_eq!(record["state"], "working", "{snap}");
            assert_eq!(record["app"], "tool");
            assert_eq!(record["msg"], "working on it");
            assert!(
                record.get("id").is_none(),
                "the root record has no id: {record}"
            );
            let revision = record["revision"].as_u64().expect("a revision");
            assert!(revision <= snap["snapshot_revision"].as_u64().expect("revision"));
            assert!(
                snap["lines"].as_array().into_iter().flatten().all(|l| {
                    // The probe's line prints the answers it got, which name 7501.
                    let l = l.as_str().unwrap_or_default();
                    l.starts_with("PROBE") || (!l.contains("7501") && !l.contains("state="))
                }),
                "a report reached the screen: {snap}"
            );
        }
        seen = status_events(&rx, 1, Duration::from_millis(300));
        if !seen.is_empty() {
            break;
        }
    }
    // The first event the subscriber saw is the root record's; it may have been reported
    // before, with other progress.
    let first = seen.first().expect("a program-status event arrives");
    assert_eq!(first["new"]["state"], "working", "{first}");
    assert_eq!(first["cause"], "report");

    // A blocked sub-record, split across many reads and ended by BEL: the pane needs a
    // person, whatever the root says.
    n += 1;
    command(
        &env,
        "agent",
        n,
        "split id=build/test:state=blocked:kind=permission:app=tool",
    );
    env.ok(&[
        "wait",
        "agent",
        "--status",
        "blocked",
        "--timeout-ms",
        "10000",
    ]);
    let blocked = status_events(&rx, 1, Duration::from_secs(5));
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0]["id"], "build/test");
    assert!(blocked[0]["old"].is_null(), "{}", blocked[0]);
    assert_eq!(blocked[0]["new"]["kind"], "permission");
    let ls = env.ok(&["ls"]);
    assert!(ls.contains("needs you: permission"), "ls: {ls}");
    assert!(
        ls.lines().next().unwrap_or_default().contains("STATUS"),
        "ls: {ls}"
    );
    let listing: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).expect("JSON");
    assert_eq!(
        listing[0]["program_status"]["state"], "blocked",
        "{listing}"
    );

    // Interleaved with other output, and a malformed one: the bad report is counted and
    // dropped, the other output shows.
    command(&env, "agent", n + 1, "mixed id=build:state=clear");
    command(&env, "agent", n + 2, "bel state=sleeping");
    let snap = status(&env, "agent");
    assert_eq!(snap["records"].as_array().map(Vec::len), Some(1), "{snap}");
    assert_eq!(snap["malformed"], 1, "{snap}");
    let lines: Vec<&str> = snap["lines"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        lines.iter().any(|l| l.trim_end() == "text bold  more"),
        "{lines:?}"
    );
    let cleared = status_events(&rx, 1, Duration::from_secs(5));
    assert_eq!(cleared[0]["cause"], "clear", "{cleared:?}");
    assert_eq!(cleared[0]["old"]["state"], "blocked");
    assert!(cleared[0]["new"].is_null());

    // Idle, then the program exits: idle ends with it, and `wait --status idle` no longer
    // holds.
    command(&env, "agent", n + 3, "st state=idle:app=tool");
    env.ok(&["wait", "agent", "--status", "idle", "--timeout-ms", "10000"]);
    let idle = status_events(&rx, 1, Duration::from_secs(5));
    assert_eq!(idle[0]["old"]["state"], "working", "{idle:?}");
    assert_eq!(idle[0]["new"]["state"], "idle", "{idle:?}");
    assert!(env.ok(&["ls"]).contains("idle"));
    env.ok(&["send", "agent", "--text", "exit", "--key", "Enter"]);
    env.ok(&["wait", "agent", "--exit", "--timeout-ms", "10000"]);
    let ended = status_events(&rx, 1, Duration::from_secs(5));
    assert!(
        ended
            .iter()
            .any(|e| e["cause"] == "exit" && e["old"]["state"] == "idle"),
        "{ended:?}"
    );
    assert_eq!(status(&env, "agent")["records"], serde_json::json!([]));
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn wait_for_a_status_never_reported_times_out_in_time() {
    let env = Env::new();
    status_pane(&env, "quiet");
    let started = Instant::now();
    let out = env.run(&["wait", "quiet", "--status", "done", "--timeout-ms", "500"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("timed out"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let bad = env.run(&["wait", "quiet", "--status", "asleep"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("asleep"));
}

/// A restart starts a new program: even `done` is not said of it.
#[test]
fn done_outlasts_the_program_until_the_pane_restarts() {
    let env = Env::new();
    status_pane(&env, "job");
    command(&env, "job", 1, "st state=done:msg=T0s=");
    env.ok(&["send", "job", "--text", "exit", "--key", "Enter"]);
    env.ok(&["wait", "job", "--exit", "--timeout-ms", "10000"]);
    let snap = status(&env, "job");
    assert_eq!(snap["records"][0]["state"], "done", "{snap}");
    assert_eq!(snap["records"][0]["msg"], "OK");
    env.ok(&["wait", "job", "--status", "done", "--timeout-ms", "1000"]);
    env.ok(&["restart", "job"]);
    env.wait_screen("job", "READY");
    assert_eq!(status(&env, "job")["records"], serde_json::json!([]));
}
