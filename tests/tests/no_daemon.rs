//! Read-only commands never start a daemon behind the user's back: with none running,
//! `belfry ls` and `belfry peek` ask the pane hosts directly and say so, and `belfry ding
//! status` (DING state lives in the daemon alone) says there is no daemon.

use std::time::Duration;

use belfry_tests::{eventually, pid_alive, Conn, Env};
use serde_json::Value;

/// A pane running, then the daemon stopped with the pane kept.
fn pane_without_daemon() -> Env {
    let env = Env::new();
    env.spawn(
        "agent",
        "5x40",
        &["sh", "-c", "echo ready-now; sleep 600"],
        Some("ready-now"),
    );
    let daemon = env.daemon_pid();
    env.ok(&["shutdown"]);
    assert!(eventually(Duration::from_secs(5), || !pid_alive(daemon)));
    env
}

fn assert_no_daemon(env: &Env) {
    assert!(
        Conn::open(&env.socket()).is_err(),
        "a daemon answers at {}",
        env.socket().display()
    );
}

#[test]
fn ls_after_shutdown_lists_the_panes_from_their_hosts_and_starts_no_daemon() {
    let env = pane_without_daemon();

    let table = env.ok(&["ls"]);
    let mut lines = table.lines();
    let note = lines.next().unwrap_or_default();
    assert!(note.starts_with("no daemon running at "), "{table}");
    assert!(note.contains("asked directly"), "{table}");
    assert!(
        lines.next().unwrap_or_default().starts_with("NAME"),
        "{table}"
    );
    let row = lines.next().unwrap_or_default();
    assert!(row.starts_with("agent "), "{table}");
    assert!(row.contains("running"), "{table}");
    assert_no_daemon(&env);

    let out = env.run(&["ls", "--json"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no daemon running at "), "{stderr}");
    let panes: Value = serde_json::from_slice(&out.stdout).expect("ls --json is JSON");
    assert_eq!(panes[0]["session"], "agent", "{panes}");
    assert_eq!(panes[0]["exited"], Value::Null, "{panes}");
    assert!(panes[0]["revision"].is_u64(), "{panes}");
    assert!(
        panes[0].get("spec").is_none(),
        "a listing leaves the spec out"
    );
    assert_no_daemon(&env);
    env.shutdown();
}

#[test]
fn peek_and_ding_status_with_no_daemon_say_so_and_start_none() {
    let env = pane_without_daemon();

    let out = env.run(&["peek", "agent"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no daemon running at "), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ready-now"));
    let out = env.run(&["peek", "agent", "--json"]);
    let screen: Value = serde_json::from_slice(&out.stdout).expect("peek --json is JSON");
    assert!(screen["expect"].is_string(), "{screen}");

    let out = env.run(&["peek", "nobody"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no pane named \"nobody\""), "{stderr}");

    let out = env.run(&["ding", "status", "agent"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no daemon running at "), "{stderr}");
    assert_no_daemon(&env);

    // A daemon started later adopts the pane, and `ls` asks it again.
    env.start_daemon();
    let table = env.ok(&["ls"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("agent "), "{table}");
    env.shutdown();
}
