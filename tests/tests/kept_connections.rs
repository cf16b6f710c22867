//! The daemon keeps its connections to pane hosts (docs/decisions.md, "Kept connections to
//! pane hosts"): a request takes an idle connection or makes one and gives it back after its
//! reply. These tests prove what must not change with it: nothing waits behind a long `wait`,
//! a pane made again under its name is reached (not the old pane host through a kept
//! connection), and the kept connections are real ones that end with the daemon.

use std::time::{Duration, Instant};

use belfry_tests::{eventually, socket_inodes, Env};
use serde_json::json;

#[test]
fn a_snapshot_never_waits_behind_a_long_wait_on_the_same_pane() {
    let env = Env::new();
    env.spawn("p", "24x80", &["sleep", "100000"], None);
    let mut waiting = env.conn();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let reply = waiting
            .request(json!({"op":"wait","session":"p","regex":"never-printed","timeout_ms":4000}));
        (started.elapsed(), reply)
    });
    // Let the wait reach the pane host and hold its connection there.
    std::thread::sleep(Duration::from_millis(300));
    let mut conn = env.conn();
    for i in 0..10 {
        let started = Instant::now();
        let reply = conn.request(json!({"op":"snapshot","session":"p"}));
        assert_eq!(reply["ok"], true, "snapshot {i}: {reply}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "snapshot {i} took {:?} beside a wait",
            started.elapsed()
        );
    }
    let (took, reply) = waiter.join().unwrap();
    assert!(
        took >= Duration::from_secs(3),
        "the wait ended early: {reply}"
    );
}

#[test]
fn a_pane_made_again_under_its_name_is_reached_not_the_old_pane_host() {
    let env = Env::new();
    env.spawn(
        "p",
        "24x80",
        &["sh", "-c", "echo FIRST; exec sleep 100000"],
        Some("FIRST"),
    );
    let first = env.snapshot("p");
    // Several requests, so the daemon has connections to the first pane host kept.
    for _ in 0..5 {
        env.snapshot("p");
    }
    env.ok(&["kill", "p"]);
    env.spawn(
        "p",
        "24x80",
        &["sh", "-c", "echo SECOND; exec sleep 100000"],
        Some("SECOND"),
    );
    for _ in 0..5 {
        let again = env.snapshot("p");
        assert_ne!(again["incarnation"], first["incarnation"], "{again}");
        assert!(
            again["lines"]
                .as_array()
                .unwrap()
                .iter()
                .any(|line| line.as_str() == Some("SECOND")),
            "{again}"
        );
    }
}

#[test]
fn kept_connections_are_real_and_end_with_the_daemon() {
    let env = Env::new();
    env.spawn("p", "24x80", &["sleep", "100000"], None);
    let host = env.pane_host_pid("p");
    for _ in 0..20 {
        env.snapshot("p");
    }
    let before = socket_inodes(host);
    // The same connections served every request: none was made or closed for them.
    for _ in 0..20 {
        env.snapshot("p");
    }
    assert_eq!(socket_inodes(host), before);
    let daemon = env.daemon_pid();
    let killed = std::process::Command::new("kill")
        .args(["-9", &daemon.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The daemon's monitor subscription and at least one kept connection close with it.
    assert!(
        eventually(Duration::from_secs(5), || before
            .difference(&socket_inodes(host))
            .count()
            >= 2),
        "the pane host's sockets before {before:?}, after {:?}",
        socket_inodes(host)
    );
}
