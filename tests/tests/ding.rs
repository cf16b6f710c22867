//! spec §7: DING end to end. A real pane runs the recorder (which logs every byte it reads); a
//! real adapter process replays a fixture of protocol v1 events; the real daemon decides.
//! Fresh idle sends exactly one notice; every other case writes zero bytes and keeps the
//! message unread, FIFO intact.

use std::time::Duration;

use belfry_tests::{
    adapter_bin, epoch_secs, eventually, fixture, read_or_empty, recorder_bin, Env,
};
use serde_json::{json, Value};

const RICH: &str = "turn-boundary+fresh-idle";

/// A pane under the rich policy whose adapter replays `fixtures/ding/<case>.jsonl`.
fn rich_pane(env: &Env, case: &str, program_flags: &[&str]) -> std::path::PathBuf {
    rich_pane_with(env, case, &[], program_flags)
}

/// [`rich_pane`] with `new_flags` given to `belfry new` (such as `--adapter NAME`).
fn rich_pane_with(
    env: &Env,
    case: &str,
    new_flags: &[&str],
    program_flags: &[&str],
) -> std::path::PathBuf {
    let log = env.path("pane.log");
    let (rec, adapter) = (
        recorder_bin().display().to_string(),
        adapter_bin().display().to_string(),
    );
    let fixture_path = fixture(&format!("ding/{case}.jsonl")).display().to_string();
    let log_s = log.display().to_string();
    let mut args = vec![
        "new",
        "agent",
        "--size",
        "24x100",
        "--ding-delivery",
        RICH,
        "--ding-adapter",
        &adapter,
        "--ding-adapter",
        &fixture_path,
    ];
    args.extend_from_slice(new_flags);
    args.extend_from_slice(&["--", &rec, "--log", &log_s]);
    args.extend_from_slice(program_flags);
    env.ok(&args);
    env.wait_screen("agent", "READY");
    log
}

/// A pane declared an agent with the aggressive policy running the recorder; returns its byte
/// log. With `wait_ready` false, the caller watches the log itself (a backlog may arrive at once).
fn aggressive_pane(env: &Env, flags: &[&str], wait_ready: bool) -> std::path::PathBuf {
    let log = env.path("pane.log");
    let (rec, log_s) = (
        recorder_bin().display().to_string(),
        log.display().to_string(),
    );
    let mut args = vec![
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--",
        &rec,
        "--log",
        &log_s,
    ];
    args.extend_from_slice(flags);
    env.ok(&args);
    if wait_ready {
        env.wait_screen("agent", "READY");
    }
    log
}

fn post(env: &Env, subject: &str) -> String {
    // `--create`: some tests post before the pane starts (a backlog found at start-up).
    let mut cmd = env.cmd(&[
        "inbox",
        "post",
        "agent",
        "--create",
        "--from",
        "lead",
        "--subject",
        subject,
    ]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("inbox post");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"please look at the failing test\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "inbox post failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn status(env: &Env) -> Value {
    let out = env.ok(&["ding", "status", "agent", "--json"]);
    serde_json::from_str(&out).expect("ding status --json")
}

fn message_states(env: &Env) -> Vec<String> {
    status(env)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["state"].as_str().unwrap_or("").to_string())
        .collect()
}

fn unread(env: &Env) -> Vec<String> {
    let out = env.ok(&["inbox", "ls", "agent", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    list.iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect()
}

/// Posts two messages and proves the case holds them: the expected hold reason (when given),
/// zero bytes in the pane, both still unread in FIFO order.
fn assert_held(env: &Env, log: &std::path::Path, reason: Option<&str>) {
    let first = post(env, "first");
    let second = post(env, "second");
    if let Some(reason) = reason {
        let want = format!("held:{reason}");
        let ok = eventually(Duration::from_secs(5), || {
            message_states(env).iter().all(|s| *s == want)
        });
        assert!(ok, "expected {want}, status: {}", status(env));
    } else {
        let ok = eventually(Duration::from_secs(5), || {
            message_states(env).iter().all(|s| s.starts_with("held:"))
        });
        assert!(ok, "expected a hold, status: {}", status(env));
    }
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        read_or_empty(log),
        b"",
        "a held case wrote bytes into the pane; status: {}",
        status(env)
    );
    assert_eq!(
        unread(env),
        vec![first, second],
        "messages must stay unread, FIFO"
    );
    assert_eq!(status(env)["counters"]["sends"], 0);
}

#[test]
fn fresh_idle_sends_exactly_one_notice() {
    let env = Env::new();
    let log = rich_pane(&env, "fresh-idle", &[]);
    let name = post(&env, "fix the build");
    let id = &name[name.len() - 9..name.len() - 3];
    let expected =
        format!("[DING] new message: [id:{id}] fix the build (from lead); check your inbox\r");
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            == expected.as_bytes()),
        "pane got {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        read_or_empty(&log),
        expected.as_bytes(),
        "exactly one notice"
    );
    let st = status(&env);
    assert_eq!(st["counters"]["sends"], 1, "{st}");
    assert_eq!(message_states(&env), vec!["staged"]);
    assert_eq!(
        unread(&env),
        vec![name],
        "a notice does not read the message"
    );
}

/// The daemon log's "notice sent" lines, as epoch seconds.
fn notices_sent_at(env: &Env) -> Vec<f64> {
    let log = env.path("xdg-state").join("belfry/log/daemon.log");
    String::from_utf8_lossy(&read_or_empty(&log))
        .lines()
        .filter(|line| line.contains("notice sent:"))
        .filter_map(|line| epoch_secs(line.split_whitespace().next()?))
        .collect()
}

/// spec §7.4 (`submitted`): the Codex collision of the A/B evaluation, on the daemon's path.
/// Right after a guarded send submitted a notice, an idle harness's screen still looks idle
/// with an empty composer, and the adapter (here: one that repeats "idle, empty" every 300 ms
/// and never shows a turn) reports so. Such a report gives no lease until the submit's turn
/// has settled: with no sign of a turn at all, `submit_unseen_ms` (3 s here) after the
/// submit. Before the fix the second notice went out at the next report, ~300 ms later.
#[test]
fn after_a_submitted_notice_an_idle_report_waits_for_the_turn_to_settle() {
    let env = Env::with_vars(&[("BELFRY_DING_SUBMIT_UNSEEN_MS", "3000")]);
    let log = rich_pane(&env, "idle-repeating", &[]);
    let notices = || {
        String::from_utf8_lossy(&read_or_empty(&log))
            .matches("[DING] new message")
            .count()
    };
    post(&env, "first");
    assert!(
        eventually(Duration::from_secs(10), || notices() == 1
            && read_or_empty(&log).ends_with(b"\r")),
        "first notice: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    post(&env, "second");
    assert!(
        eventually(Duration::from_secs(15), || notices() == 2),
        "the second notice never came: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    // The daemon logs a send once its reply is in, after the pane has read the notice.
    assert!(
        eventually(Duration::from_secs(5), || notices_sent_at(&env).len() == 2),
        "daemon log notices: {:?}",
        notices_sent_at(&env)
    );
    let sent = notices_sent_at(&env);
    // Both stamps come from the daemon: the second lease is granted no sooner than 3 s after
    // the first send's reply, which is logged before the gate starts.
    let gap = sent[1] - sent[0];
    assert!(
        gap >= 3.0,
        "the second notice went {gap:.3} s after the first: a screen that looked idle right \
         after a submit gave a lease"
    );
    assert_eq!(status(&env)["counters"]["sends"], 2);
}

/// A held case: the fixture's adapter session must hold both messages with the reason. The
/// event timeout (after which a silent adapter's pane is held as `timeout`) is a minute, so that
/// no other case's reason can turn into `timeout` while a loaded machine is still posting and
/// asking; the timeout case itself runs with 400 ms.
macro_rules! held_case {
    ($test:ident, $case:literal, $reason:expr) => {
        held_case!($test, $case, $reason, "60000");
    };
    ($test:ident, $case:literal, $reason:expr, $event_timeout_ms:literal) => {
        #[test]
        fn $test() {
            let env = Env::with_vars(&[("BELFRY_DING_EVENT_TIMEOUT_MS", $event_timeout_ms)]);
            let log = rich_pane(&env, $case, &[]);
            assert_held(&env, &log, $reason);
        }
    };
}

held_case!(active_holds, "active", Some("active"));
held_case!(child_holds, "child", Some("child"));
held_case!(unknown_activity_holds, "unknown", Some("unknown"));
held_case!(
    composer_nonempty_holds,
    "composer-nonempty",
    Some("composer-nonempty")
);
held_case!(
    composer_unknown_holds,
    "composer-unknown",
    Some("composer-unknown")
);
held_case!(malformed_holds, "malformed", Some("malformed"));
held_case!(timeout_holds, "timeout", Some("timeout"), "400");
held_case!(adapter_error_holds, "adapter-error", None);
held_case!(adapter_eof_holds, "eof", None);
held_case!(
    incarnation_mismatch_holds,
    "incarnation-mismatch",
    Some("incarnation-mismatch")
);
held_case!(
    generation_change_holds,
    "generation-mismatch",
    Some("generation-mismatch")
);
held_case!(
    out_of_order_sequence_holds,
    "out-of-order",
    Some("out-of-order")
);
held_case!(
    unsupported_version_holds,
    "unsupported-version",
    Some("unsupported-version")
);
held_case!(unknown_kind_holds, "unknown-kind", Some("unknown-kind"));

#[test]
fn stale_lease_holds() {
    let env = Env::new();
    let log = rich_pane(&env, "stale", &[]);
    assert!(eventually(Duration::from_secs(5), || !status(&env)
        ["last_event"]
        .is_null()));
    std::thread::sleep(Duration::from_millis(300));
    assert_held(&env, &log, Some("stale"));
}

#[test]
fn unreachable_adapter_holds() {
    let env = Env::new();
    let log = env.path("pane.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        RICH,
        "--ding-adapter",
        "/nonexistent/belfry-adapter",
        "--",
        &rec,
        "--log",
        &log_s,
    ]);
    env.wait_screen("agent", "READY");
    assert_held(&env, &log, Some("unreachable"));
    assert_eq!(status(&env)["adapter"]["state"], "failed");
}

/// A lease is taken, then the harness's hook calls `belfry dispatch` inside the pane with a
/// lifecycle event, before any mail arrives.
fn lifecycle_case(case: &str, event: &str, stdin: Value, reason: &str) {
    let env = Env::with_vars(&[("BELFRY_DING_MAX_LEASE_MS", "60000")]);
    lifecycle_case_in(&env, &[], case, event, stdin, reason);
}

/// [`lifecycle_case`] in `env`, with `new_flags` given to `belfry new`.
fn lifecycle_case_in(
    env: &Env,
    new_flags: &[&str],
    case: &str,
    event: &str,
    stdin: Value,
    reason: &str,
) {
    let log = rich_pane_with(env, case, new_flags, &[]);
    assert!(
        eventually(Duration::from_secs(5), || status(env)["lease"]["state"]
            == "leased"),
        "{}",
        status(env)
    );
    let snap = env.snapshot("agent");
    let mut cmd = env.cmd(&["dispatch", "--event", event]);
    cmd.env("BELFRY_SESSION", "agent")
        .env("BELFRY_SOCKET", env.socket())
        .env("BELFRY_INCARNATION", snap["incarnation"].as_str().unwrap())
        .env("BELFRY_GENERATION", snap["generation"].as_str().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.to_string().as_bytes())
        .unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    // The hook returned only once the worker had applied it: the lease is gone already, with
    // no waiting, as it must be before the harness goes on to compact or clear.
    let lease = status(env)["lease"].clone();
    assert_eq!(
        lease["state"], "held",
        "right after the hook returned: {lease}"
    );
    assert_held(env, &log, Some(reason));
}

#[test]
fn compaction_invalidates_the_lease() {
    let stdin =
        json!({"hook_event_name": "pre_compact", "session_id": "s", "cwd": "/", "trigger": "auto"});
    lifecycle_case("compaction", "pre-compact", stdin, "compaction");
}

/// A harness that reports a compaction only as a `source` of another event, in a word of its
/// own: the word is in its adapter declaration (`compaction_events`), not in the DING engine.
#[test]
fn a_compaction_source_from_the_adapter_declaration_invalidates_the_lease() {
    let adapters = fixture("adapters").display().to_string();
    let env = Env::with_vars(&[
        ("BELFRY_DING_MAX_LEASE_MS", "60000"),
        ("BELFRY_ADAPTERS", &adapters),
    ]);
    let stdin = json!({"hook_event_name": "session_start", "session_id": "s", "cwd": "/",
                       "source": "context-squeezed"});
    lifecycle_case_in(
        &env,
        &["--adapter", "fixture-compacting-harness"],
        "compaction",
        "session-start",
        stdin,
        "compaction",
    );
}

/// A turn that starts (prompt-submit or before-tool, seen through dispatch) ends the idle
/// lease at once: a notice must not go in the moment between the turn's start and the
/// adapter's own `active`.
#[test]
fn a_turn_that_starts_ends_the_idle_lease_before_the_adapter_says_so() {
    let stdin = json!({"hook_event_name": "user_prompt_submit", "session_id": "s", "cwd": "/",
                       "prompt": "go on"});
    lifecycle_case("compaction", "prompt-submit", stdin, "active");
    let stdin = json!({"hook_event_name": "pre_tool_use", "session_id": "s", "cwd": "/",
                       "tool_name": "shell", "tool_input": {"command": "true"}});
    lifecycle_case("compaction", "before-tool", stdin, "active");
}

#[test]
fn clear_invalidates_the_lease() {
    let stdin = json!({"hook_event_name": "session_start", "session_id": "s", "cwd": "/", "source": "clear"});
    lifecycle_case("clear", "session-start", stdin, "clear");
}

#[test]
fn daemon_crash_invalidates_the_lease() {
    let env = Env::with_vars(&[("BELFRY_DING_MAX_LEASE_MS", "60000")]);
    let log = rich_pane(&env, "crash", &[]);
    assert!(eventually(Duration::from_secs(5), || status(&env)["lease"]
        ["state"]
        == "leased"));
    let daemon = env.daemon_pid();
    // SAFETY: kill(2) on the test's own daemon; it touches no memory.
    unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(5), || {
        !belfry_tests::pid_alive(daemon)
    }));
    env.start_daemon();
    assert_held(&env, &log, Some("crash"));
}

#[test]
fn conflict_holds_then_delivers_on_the_next_lease() {
    let env = Env::new();
    let log = rich_pane(&env, "conflict", &["--print-on-resize"]);
    let name = post(&env, "after the conflict");
    let id = &name[name.len() - 9..name.len() - 3];
    let expected =
        format!("[DING] new message: [id:{id}] after the conflict (from lead); check your inbox\r");
    assert!(
        eventually(Duration::from_secs(8), || read_or_empty(&log)
            == expected.as_bytes()),
        "pane got {:?}; status {}",
        String::from_utf8_lossy(&read_or_empty(&log)),
        status(&env)
    );
    let st = status(&env);
    assert_eq!(st["counters"]["conflicts"], 1, "{st}");
    assert_eq!(st["counters"]["sends"], 1, "{st}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        read_or_empty(&log),
        expected.as_bytes(),
        "the conflict wrote nothing, the lease after it wrote once"
    );
}

#[test]
fn turn_boundary_makes_messages_hook_owned_and_archive_releases_them() {
    let env = Env::new();
    let log = rich_pane(&env, "turn-boundary", &[]);
    let first = post(&env, "one");
    assert!(
        eventually(Duration::from_secs(5), || message_states(&env)
            == vec!["hook-owned"]),
        "{}",
        status(&env)
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        read_or_empty(&log),
        b"",
        "hook-owned messages get no PTY input"
    );
    env.ok(&["inbox", "archive", &first, "--session", "agent"]);
    assert!(eventually(Duration::from_secs(5), || status(&env)
        ["messages"]
        .as_array()
        .unwrap()
        .is_empty()));
    let owned: Value = serde_json::from_slice(
        &std::fs::read(env.state().join("ding/agent/ownership.json")).unwrap(),
    )
    .unwrap();
    assert!(
        owned.to_string().find(&first).is_none(),
        "archiving must clear ownership: {owned}"
    );
}

#[test]
fn turn_boundary_with_a_path_is_invalid() {
    let env = Env::new();
    let log = rich_pane(&env, "turn-boundary-path", &[]);
    let _ = post(&env, "one");
    assert!(
        eventually(Duration::from_secs(5), || status(&env)["last_event"]
            ["kind"]
            == "rejected"),
        "{}",
        status(&env)
    );
    assert_eq!(message_states(&env), vec!["held:malformed"]);
    assert_eq!(read_or_empty(&log), b"");
}

#[test]
fn accepted_receipt_marks_delivered_and_staged_survives_daemon_kill() {
    let env = Env::new();
    let log = rich_pane(&env, "receipt", &[]);
    let name = post(&env, "receipt me");
    assert!(eventually(Duration::from_secs(5), || message_states(&env)
        == vec!["staged"]));
    // Kill the daemon with the notice staged: the new daemon must not paste it again.
    let daemon = env.daemon_pid();
    // SAFETY: kill(2) on the test's own daemon.
    unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(5), || {
        !belfry_tests::pid_alive(daemon)
    }));
    env.start_daemon();
    let pasted = read_or_empty(&log);
    assert_eq!(
        String::from_utf8_lossy(&pasted).matches("[DING]").count(),
        1
    );
    // The restarted adapter replays its fixture: its receipt marks the notice delivered.
    assert!(
        eventually(Duration::from_secs(8), || message_states(&env)
            == vec!["delivered"]),
        "{}",
        status(&env)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&log))
            .matches("[DING]")
            .count(),
        1,
        "pasted twice"
    );
    env.ok(&["inbox", "archive", &name, "--session", "agent"]);
    assert!(eventually(Duration::from_secs(5), || status(&env)
        ["messages"]
        .as_array()
        .unwrap()
        .is_empty()));
}

#[test]
fn aggressive_policy_types_paste_delay_enter() {
    let env = Env::new();
    let log = aggressive_pane(&env, &["--bracketed"], true);
    let name = post(&env, "aggressive");
    let id = &name[name.len() - 9..name.len() - 3];
    let paste = format!(
        "\x1b[200~[DING] new message: [id:{id}] aggressive (from lead); check your inbox\x1b[201~"
    );
    // The paste arrives first, the Enter only after the 500 ms pause.
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        == paste.as_bytes()));
    let pasted_at = std::time::Instant::now();
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        .ends_with(b"\r")));
    let gap = pasted_at.elapsed();
    assert!(
        gap >= Duration::from_millis(350),
        "Enter came {gap:?} after the paste"
    );
    assert_eq!(read_or_empty(&log), format!("{paste}\r").as_bytes());
}

#[test]
fn hostile_subject_and_sender_cannot_escape_the_paste_frame() {
    let env = Env::new();
    let log = aggressive_pane(&env, &["--bracketed"], true);
    let out = env.ok(&[
        "inbox",
        "post",
        "agent",
        "--from",
        "evil\x1b[201~\rrm -rf /\n",
        "--subject",
        "hi\u{9b}201~\x1b[201~\r\nsecond line",
        &fixture("ding/fresh-idle.jsonl").display().to_string(),
    ]);
    assert!(out.trim().ends_with(".md"));
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        .ends_with(b"\r")));
    let got = read_or_empty(&log);
    assert!(got.starts_with(b"\x1b[200~"), "{got:?}");
    let inner = &got[6..got.len() - 7];
    assert_eq!(&got[got.len() - 7..], b"\x1b[201~\r");
    assert!(
        inner.iter().all(|&b| b >= 0x20 && b != 0x7f),
        "control bytes inside the frame: {:?}",
        String::from_utf8_lossy(inner)
    );
    let text = String::from_utf8_lossy(inner);
    assert!(!text.contains('\u{9b}'), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&got).matches("\x1b[201~").count(),
        1,
        "exactly one frame end"
    );
}

#[test]
fn fresh_dnd_defers_aggressive_delivery() {
    let env = Env::new();
    let log = aggressive_pane(&env, &[], true);
    env.ok(&["presence", "dnd", "--session", "agent"]);
    let _ = post(&env, "later");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(read_or_empty(&log), b"", "dnd must defer delivery");
    env.ok(&["presence", "busy", "--session", "agent"]);
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).contains("[DING]")
    }));
}

#[test]
fn inbox_bad_input_is_refused_and_changes_nothing() {
    let env = Env::new();
    env.ok(&[
        "inbox",
        "post",
        "agent",
        "--create",
        "--subject",
        "keep",
        &fixture("ding/silent.jsonl").display().to_string(),
    ]);
    let before = env.ok(&["inbox", "ls", "agent", "--json"]);
    for (args, needle) in [
        (
            vec!["inbox", "read", "../x", "--session", "agent"],
            "is not a message file name",
        ),
        (
            vec!["inbox", "archive", "a/b.md", "--session", "agent"],
            "is not a message file name",
        ),
        (
            vec![
                "inbox",
                "read",
                "1796012997611-zzzzzz.md",
                "--session",
                "agent",
            ],
            "1796012997611-zzzzzz.md",
        ),
        (vec!["inbox", "ls", "../etc"], "session"),
        (
            vec!["presence", "sleepy", "--session", "agent"],
            "not busy, available or dnd",
        ),
    ] {
        let out = env.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert_eq!(
        env.ok(&["inbox", "ls", "agent", "--json"]),
        before,
        "a refused command changed the inbox"
    );
}

#[test]
fn backlog_at_start_becomes_one_recovery_notice() {
    let env = Env::new();
    let names: Vec<String> = (0..3)
        .map(|i| post(&env, &format!("waiting {i}")))
        .collect();
    let log = aggressive_pane(&env, &[], false);
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        .ends_with(b"\r")));
    std::thread::sleep(Duration::from_millis(700));
    let got = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    assert_eq!(
        got.matches("[DING]").count(),
        1,
        "one recovery notice, not one per message: {got}"
    );
    assert!(
        got.starts_with("[DING] 3 unread messages waiting:"),
        "{got}"
    );
    for name in &names {
        let id = &name[name.len() - 9..name.len() - 3];
        assert!(got.contains(&format!("[id:{id}]")), "{got}");
    }
    assert_eq!(message_states(&env), vec!["staged", "staged", "staged"]);
}

#[test]
fn archiving_a_staged_notice_releases_its_ownership() {
    let env = Env::new();
    let log = aggressive_pane(&env, &[], true);
    let name = post(&env, "to be archived");
    assert!(eventually(Duration::from_secs(5), || message_states(&env)
        == vec!["staged"]));
    let ownership = env.state().join("ding/agent/ownership.json");
    assert!(std::fs::read_to_string(&ownership).unwrap().contains(&name));
    env.ok(&["inbox", "read", &name, "--session", "agent"]);
    assert!(
        eventually(Duration::from_secs(5), || !std::fs::read_to_string(
            &ownership
        )
        .unwrap()
        .contains(&name)),
        "archived message still owned: {}",
        std::fs::read_to_string(&ownership).unwrap()
    );
    assert!(env.state().join("inbox/agent/archive").join(&name).exists());
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&log))
            .matches("[DING]")
            .count(),
        1
    );
}
