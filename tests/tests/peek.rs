//! spec §4: `peek` and the scrollback op read the screen and its history from the model.

use belfry_tests::Env;
use serde_json::{json, Value};

#[test]
fn peek_shows_the_screen_history_by_range_and_attributes() {
    let env = Env::new();
    env.spawn(
        "s",
        "10x40",
        &[
            "sh",
            "-c",
            "seq 1 100; printf '\\033[1;32mgreen\\033[0m'; sleep 600",
        ],
        Some("green"),
    );
    let screen = env.ok(&["peek", "s"]);
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(lines[0], "92");
    assert_eq!(lines[9], "green");

    let with_history = env.ok(&["peek", "s", "--scrollback", "5"]);
    let first: Vec<&str> = with_history.lines().take(6).collect();
    assert_eq!(first, vec!["87", "88", "89", "90", "91", "92"]);

    let ansi = env.ok(&["peek", "s", "--ansi"]);
    assert!(
        ansi.lines().nth(9).unwrap().contains("\u{1b}[0;1;32mgreen"),
        "{ansi:?}"
    );

    let json_out: Value =
        serde_json::from_str(&env.ok(&["peek", "s", "--json", "--cells"])).unwrap();
    assert_eq!(json_out["size"], json!({"rows": 10, "cols": 40}));
    assert_eq!(
        json_out["cursor"],
        json!({"row": 9, "col": 5, "visible": true})
    );
    let green_run = &json_out["cells"][9][0];
    assert_eq!(green_run["text"], "green");
    assert_eq!(green_run["bold"], true);
    assert_eq!(green_run["fg"], 2);

    // The scrollback op reads any range, numbered from the oldest line.
    let reply = env
        .conn()
        .request(json!({"op":"scrollback","session":"s","start":0,"count":3}));
    assert_eq!(reply["lines"], json!(["1", "2", "3"]));
    assert_eq!(reply["total"], 101);
}

/// `peek` asks the pane host itself, in one round trip (hello and snapshot in one write),
/// whether a daemon runs or not: a stopped daemon does not hold it up, and with the daemon
/// running there is no note about it. A pane host that is not there (a stale socket file) is
/// left to the daemon, which names the pane as not found.
#[test]
fn peek_asks_the_pane_host_itself_and_needs_no_daemon_in_its_path() {
    use belfry_tests::Stopped;
    use std::time::{Duration, Instant};
    let env = Env::new();
    env.spawn(
        "q",
        "5x40",
        &["sh", "-c", "echo quick-peek; sleep 600"],
        Some("quick-peek"),
    );
    let out = env.run(&["peek", "q"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("quick-peek"));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "no note with a daemon running"
    );

    let daemon = env.daemon_pid();
    {
        let _stopped = Stopped::new(daemon);
        let started = Instant::now();
        let out = env.run(&["peek", "q", "--json"]);
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let screen: Value = serde_json::from_slice(&out.stdout).expect("peek --json is JSON");
        assert!(
            screen["lines"].to_string().contains("quick-peek"),
            "{screen}"
        );
        assert!(screen["expect"].is_string(), "{screen}");
        // Through the daemon this would wait for the client's 10 s deadline.
        assert!(
            took < Duration::from_secs(3),
            "peek took {took:?} with the daemon stopped"
        );
        // A stopped daemon still runs: no note. Whether it runs was asked of its lock, not its
        // socket: nothing waits in the stopped daemon's accept queue for it to wake to.
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
        assert_eq!(
            accept_queue(&env.socket()),
            0,
            "peek connected to the daemon"
        );
    }

    // A socket file with no pane host behind it: the daemon answers.
    let stale = env.pane_socket("gone");
    let listener = std::os::unix::net::UnixListener::bind(&stale).unwrap();
    drop(listener);
    let out = env.run(&["peek", "gone"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no pane named \"gone\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How many connections wait in the accept queue of the listening socket at `path` (the
/// Recv-Q `ss` shows for a listening socket).
fn accept_queue(path: &std::path::Path) -> usize {
    let out = std::process::Command::new("ss")
        .args(["-xlnH"])
        .output()
        .expect("ss (iproute2) runs");
    let listing = String::from_utf8_lossy(&out.stdout);
    let path = path.to_string_lossy();
    let line = listing
        .lines()
        .find(|line| line.split_whitespace().nth(4) == Some(path.as_ref()))
        .unwrap_or_else(|| panic!("no listening socket at {path} in:\n{listing}"));
    line.split_whitespace()
        .nth(2)
        .and_then(|queue| queue.parse().ok())
        .unwrap_or_else(|| panic!("no queue length in {line:?}"))
}
