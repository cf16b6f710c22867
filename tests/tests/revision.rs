//! spec §2: the revision moves on every input write, output chunk, resize, restart, exit and
//! clear, and never moves backwards.

use std::time::Duration;

use belfry_tests::{eventually, recorder_bin, Conn, Env};
use serde_json::{json, Value};

#[test]
fn revision_moves_on_every_event_and_never_backwards() {
    let env = Env::new();
    let log = env.path("rec.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.spawn(
        "rec",
        "24x80",
        &[&rec, "--log", &log_s, "--echo", "--exit-on-eot"],
        Some("READY"),
    );

    // A subscriber watches every revision event while the table runs.
    let mut events = Conn::open(&env.socket()).expect("connect");
    let reply = events.request(json!({"op":"subscribe","session":"rec"}));
    assert_eq!(reply["ok"], true, "{reply}");
    let watcher = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while let Some(event) = events.read() {
            if event["event"] == "revision" {
                seen.push(event["revision"].as_u64().unwrap());
            }
            if event["event"] == "exit" {
                break;
            }
        }
        seen
    });

    let mut conn = env.conn();
    // Each row performs one event and returns the revision right after it: the send reply for
    // the input write (before any echo is read), a snapshot for the others.
    type Action<'a> = Box<dyn Fn(&mut Conn) -> u64 + 'a>;
    let snap_rev = |c: &mut Conn| -> u64 {
        let r = c.request(json!({"op":"snapshot","session":"rec"}));
        r["revision"].as_u64().unwrap()
    };
    let ok = |r: Value, what: &str| assert_eq!(r["ok"], true, "{what}: {r}");
    let table: Vec<(&str, Action)> = vec![
        (
            "input write",
            Box::new(|c: &mut Conn| {
                let r = c.request(json!({"op":"send","session":"rec","input":[{"text":"z"}]}));
                r["revision"].as_u64().expect("sent revision")
            }),
        ),
        (
            "output chunk",
            Box::new(|c: &mut Conn| {
                ok(c.request(json!({"op":"wait","session":"rec","regex":"READY\\s*\\n?z","timeout_ms":5000})), "echo");
                snap_rev(c)
            }),
        ),
        (
            "resize",
            Box::new(|c: &mut Conn| {
                ok(
                    c.request(json!({"op":"resize","session":"rec","rows":30,"cols":100})),
                    "resize",
                );
                snap_rev(c)
            }),
        ),
        (
            "clear",
            Box::new(|c: &mut Conn| {
                ok(c.request(json!({"op":"clear","session":"rec"})), "clear");
                snap_rev(c)
            }),
        ),
        (
            "restart",
            Box::new(|c: &mut Conn| {
                let r = c.request(json!({"op":"restart","session":"rec"}));
                r["identity"]["revision"]
                    .as_u64()
                    .expect("restart revision")
            }),
        ),
        (
            "exit",
            Box::new(|c: &mut Conn| {
                ok(
                    c.request(
                        json!({"op":"wait","session":"rec","regex":"READY","timeout_ms":5000}),
                    ),
                    "ready",
                );
                ok(
                    c.request(json!({"op":"send","session":"rec","input":[{"key":"C-d"}]})),
                    "eot",
                );
                let before_exit = snap_rev(c);
                let r =
                    c.request(json!({"op":"wait","session":"rec","exit":true,"timeout_ms":5000}));
                ok(r.clone(), "exit");
                let after = snap_rev(c);
                assert!(
                    after > before_exit || r["state"]["revision"].as_u64().unwrap() >= before_exit
                );
                after
            }),
        ),
    ];
    let mut last = env.revision("rec");
    for (what, action) in &table {
        let now = action(&mut conn);
        assert!(now > last, "{what}: revision {last} -> {now} did not move");
        last = now;
    }
    let before = env.revision("rec");
    assert!(env.snapshot("rec")["exited"].is_object());
    let seen = watcher.join().expect("watcher");
    // Revision events are coalesced to the latest value, so there may be fewer events than
    // changes, but each one is newer than the last and none is ahead of the pane.
    assert!(!seen.is_empty(), "no revision events");
    assert!(*seen.last().unwrap() <= before);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "revision went backwards or repeated: {seen:?}"
    );
    assert_eq!(env.revision("rec"), before);
}

#[test]
fn output_chunks_each_move_the_revision() {
    let env = Env::new();
    let log = env.path("rec.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.spawn(
        "rec",
        "24x80",
        &[&rec, "--log", &log_s, "--echo"],
        Some("READY"),
    );
    let mut conn = env.conn();
    let sent = conn.request(json!({"op":"send","session":"rec","input":[{"text":"echo-me"}]}));
    let after_write = sent["revision"].as_u64().unwrap();
    // The echo is program output: it must move the revision past the write's.
    assert!(eventually(Duration::from_secs(5), || env
        .lines("rec")
        .iter()
        .any(|l| l.contains("echo-me"))));
    assert!(env.revision("rec") > after_write);
}

#[test]
fn restart_keeps_revision_and_changes_incarnation() {
    let env = Env::new();
    env.spawn(
        "sh",
        "24x80",
        &["sh", "-c", "echo started; sleep 600"],
        Some("started"),
    );
    let before = env.snapshot("sh");
    let out = env.ok(&["restart", "sh", "--json"]);
    let after: Value = serde_json::from_str(&out).unwrap();
    assert_ne!(after["incarnation"], before["incarnation"]);
    assert_eq!(after["generation"], before["generation"]);
    assert!(after["revision"].as_u64().unwrap() > before["revision"].as_u64().unwrap());
    assert_ne!(env.snapshot("sh")["child_pid"], before["child_pid"]);
}
