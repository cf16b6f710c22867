//! spec §6.0, §12: the control plane can die without killing a single agent. A new daemon
//! adopts the same pane hosts (same PIDs, incarnations, revisions continuing); an attached
//! client keeps working throughout; guarded sends keep their exact meaning.

use std::collections::BTreeMap;
use std::time::Duration;

use belfry_tests::{eventually, pid_alive, read_or_empty, recorder_bin, Conn, Env};
use serde_json::{json, Value};

fn panes(env: &Env) -> BTreeMap<String, Value> {
    let out = env.ok(&["ls", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&out).expect("ls --json");
    list.into_iter()
        .map(|p| (p["session"].as_str().unwrap().to_string(), p))
        .collect()
}

fn kill9(pid: u32) {
    // SAFETY: kill(2) on a pid this test owns; it touches no memory.
    let rc = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 {pid}");
}

#[test]
fn daemon_kill_9_loses_no_pane() {
    let env = Env::new();
    let rec = recorder_bin().display().to_string();
    let log = env.path("quiet.log");
    let log_s = log.display().to_string();
    env.ok(&[
        "new",
        "shell",
        "--size",
        "24x80",
        "--env",
        "PS1=shell$ ",
        "--",
        "sh",
        "-i",
    ]);
    env.spawn("noisy", "24x80", &[&rec, "--noisy"], Some("tick"));
    env.spawn("quiet", "24x80", &[&rec, "--log", &log_s], Some("READY"));
    env.wait_screen("shell", "shell\\$");
    // The attached client: `belfry attach shell` running in a fourth pane.
    env.spawn(
        "viewer",
        "24x80",
        &[
            "sh",
            "-c",
            "\"$BELFRY_BIN\" attach shell; echo ATTACH-EXIT=$?; sleep 600",
        ],
        None,
    );
    env.wait_screen("viewer", "shell\\$");

    let before = panes(&env);
    let quiet_rev = before["quiet"]["revision"].as_u64().unwrap();
    let noisy_rev = before["noisy"]["revision"].as_u64().unwrap();
    let quiet_inc = before["quiet"]["incarnation"].clone();
    let old_daemon = env.daemon_pid();

    kill9(old_daemon);
    assert!(eventually(Duration::from_secs(5), || !pid_alive(
        old_daemon
    )));

    // With no daemon at all, the attached client still works: type into the viewer through
    // its own pane host socket, and the keystrokes reach the shell through the attach stream.
    let mut viewer = Conn::open(&env.pane_socket("viewer")).expect("viewer pane host");
    let reply = viewer
        .request(json!({"op":"send","input":[{"text":"echo during-$((6*7))"},{"key":"Enter"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    let mut shell = Conn::open(&env.pane_socket("shell")).expect("shell pane host");
    let reply = shell.request(json!({"op":"wait","regex":"during-42","timeout_ms":10000}));
    assert_eq!(
        reply["ok"], true,
        "attached client stopped working while the daemon was dead: {reply}"
    );

    // The next CLI command starts a new daemon, which adopts every pane host.
    let after = panes(&env);
    let new_daemon = env.daemon_pid();
    assert_ne!(new_daemon, old_daemon);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (name, old) in &before {
        let new = &after[name];
        assert_eq!(new["pid"], old["pid"], "{name}: pane host pid");
        assert_eq!(new["child_pid"], old["child_pid"], "{name}: child pid");
        assert_eq!(
            new["incarnation"], old["incarnation"],
            "{name}: incarnation"
        );
        assert_eq!(new["generation"], old["generation"], "{name}: generation");
        assert!(
            new["revision"].as_u64() >= old["revision"].as_u64(),
            "{name}: revision went back"
        );
    }
    assert!(
        after["noisy"]["revision"].as_u64().unwrap() > noisy_rev,
        "noisy pane stopped"
    );

    // Guarded sends with revisions read before the kill behave exactly as spec §3 says.
    let mut conn = env.conn();
    let reply = conn.request(json!({"op":"send","session":"noisy","expect":{"revision":noisy_rev},"input":[{"text":"x"}]}));
    assert_eq!(reply["result"], "conflict", "{reply}");
    let reply = conn.request(json!({"op":"send","session":"quiet",
        "expect":{"revision":quiet_rev,"incarnation":quiet_inc},"input":[{"text":"after-restart"}]}));
    assert_eq!(
        reply["result"], "sent",
        "quiet pane did not move, so its old revision still holds: {reply}"
    );
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        == b"after-restart"));
    let reply = conn.request(json!({"op":"send","session":"quiet","expect":{"revision":quiet_rev},"input":[{"text":"stale"}]}));
    assert_eq!(reply["result"], "conflict", "{reply}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read_or_empty(&log), b"after-restart");

    // The viewer never noticed: it is still attached.
    assert_eq!(env.snapshot("shell")["clients"], 1);
    assert!(!env.lines("viewer").join("\n").contains("ATTACH-EXIT"));
}

#[test]
fn shutdown_keeps_panes_and_kill_panes_ends_them() {
    let env = Env::new();
    env.spawn("a", "24x80", &["sleep", "600"], None);
    env.spawn("b", "24x80", &["sleep", "600"], None);
    let before = panes(&env);
    let pids: Vec<u32> = before
        .values()
        .flat_map(|p| {
            [
                p["pid"].as_u64().unwrap() as u32,
                p["child_pid"].as_u64().unwrap() as u32,
            ]
        })
        .collect();
    let daemon = env.daemon_pid();
    env.ok(&["shutdown"]);
    assert!(eventually(Duration::from_secs(5), || !pid_alive(daemon)));
    assert!(
        pids.iter().all(|&p| pid_alive(p)),
        "shutdown without --kill-panes ended a pane"
    );
    let after = panes(&env);
    assert_eq!(after.len(), 2);
    // `ls` asked the pane hosts without starting a daemon; one is needed to end them.
    env.start_daemon();
    env.ok(&["shutdown", "--kill-panes"]);
    assert!(
        eventually(Duration::from_secs(5), || pids
            .iter()
            .all(|&p| !pid_alive(p))),
        "--kill-panes left processes"
    );
}

#[test]
fn pane_host_kill_9_ends_only_that_pane_and_is_reported() {
    let env = Env::new();
    env.spawn("doomed", "24x80", &["sleep", "600"], None);
    env.spawn("survivor", "24x80", &["sleep", "600"], None);
    let before = panes(&env);
    let mut events = env.conn();
    let reply = events.request(json!({"op":"subscribe"}));
    assert_eq!(reply["ok"], true);
    let host = before["doomed"]["pid"].as_u64().unwrap() as u32;
    let child = before["doomed"]["child_pid"].as_u64().unwrap() as u32;
    kill9(host);
    let lost = loop {
        let event = events.read().expect("event stream");
        if event["event"] == "lifecycle" && event["what"] == "lost" {
            break event;
        }
    };
    assert_eq!(lost["session"], "doomed", "{lost}");
    // The child loses its terminal (hangup) and ends with its pane.
    assert!(
        eventually(Duration::from_secs(5), || !pid_alive(child)),
        "child of the killed pane host lives on"
    );
    let after = panes(&env);
    assert_eq!(after.keys().collect::<Vec<_>>(), vec!["survivor"]);
    assert_eq!(
        after["survivor"]["child_pid"],
        before["survivor"]["child_pid"]
    );
    assert!(pid_alive(
        after["survivor"]["child_pid"].as_u64().unwrap() as u32
    ));
}

#[test]
fn a_second_daemon_on_the_same_socket_refuses_to_start() {
    let env = Env::new();
    let first = env.daemon_pid();
    let out = env.run(&["server"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("another belfry daemon already serves"),
        "{stderr}"
    );
    assert_eq!(env.daemon_pid(), first, "the running daemon was disturbed");
}
