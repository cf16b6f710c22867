//! Issue #7 item 5 (revision ABA): an expectation read from one pane host can never be
//! satisfied by another pane host that took the same name and declaration.

use std::time::Duration;

use belfry_tests::{eventually, pid_alive, read_or_empty, recorder_bin, Env};
use serde_json::Value;

fn peek_json(env: &Env, session: &str) -> Value {
    serde_json::from_str(&env.ok(&["peek", session, "--json"])).expect("peek --json is JSON")
}

/// Kills `session` and waits until its pane host is gone and its name is free.
fn kill_and_wait(env: &Env, session: &str, host_pid: u32) {
    env.ok(&["kill", session]);
    assert!(
        eventually(Duration::from_secs(10), || !pid_alive(host_pid)),
        "pane host {host_pid} still alive after kill"
    );
}

#[test]
fn stale_expectations_never_match_a_recreated_pane_of_the_same_name() {
    let env = Env::new();
    let log = env.path("rec.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    let argv = [rec.as_str(), "--log", log_s.as_str()];

    let first = env.spawn("rec", "24x80", &argv, Some("READY"));
    let old = peek_json(&env, "rec");
    let old_revision = old["revision"].as_u64().expect("revision");
    let old_token = old["expect"]
        .as_str()
        .expect("peek --json prints an expect token")
        .to_string();
    let host_pid = first["pid"].as_u64().expect("pane host pid") as u32;
    kill_and_wait(&env, "rec", host_pid);

    env.spawn("rec", "24x80", &argv, Some("READY"));
    let new = peek_json(&env, "rec");
    assert_eq!(
        new["generation"], old["generation"],
        "same declaration, same generation"
    );
    assert_ne!(new["incarnation"], old["incarnation"]);
    assert!(
        new["revision"].as_u64().unwrap() > old_revision,
        "the new pane host starts above every revision the old one reached: old {old_revision}, new {}",
        new["revision"]
    );

    let before = read_or_empty(&log).len();
    let by_revision = env.run(&[
        "send",
        "rec",
        "--expect-revision",
        &old_revision.to_string(),
        "--text",
        "STALE-REVISION",
    ]);
    assert_eq!(
        by_revision.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&by_revision.stderr)
    );
    let by_token = env.run(&[
        "send",
        "rec",
        "--expect",
        &old_token,
        "--text",
        "STALE-TOKEN",
    ]);
    assert_eq!(
        by_token.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&by_token.stderr)
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        read_or_empty(&log).len(),
        before,
        "a stale expectation wrote bytes"
    );

    // The token the new pane host's snapshot printed is the one that wins.
    let token = new["expect"].as_str().expect("expect token");
    env.ok(&["send", "rec", "--expect", token, "--text", "FRESH-TOKEN"]);
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).contains("FRESH-TOKEN")
    }));
}

#[test]
fn a_malformed_expect_token_is_refused_before_anything_is_sent() {
    let env = Env::new();
    let log = env.path("rec.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.spawn("rec", "24x80", &[&rec, "--log", &log_s], Some("READY"));
    let revision = env.revision("rec");
    let out = env.run(&["send", "rec", "--expect", "42.not-hex.zz", "--text", "NOPE"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--expect token \"42.not-hex.zz\""),
        "{stderr}"
    );
    assert!(stderr.contains("incarnation"), "{stderr}");
    assert_eq!(env.revision("rec"), revision);
    assert!(!String::from_utf8_lossy(&read_or_empty(&log)).contains("NOPE"));
}
