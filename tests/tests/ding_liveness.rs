//! spec §7.4: the rich policy never holds mail for nothing. A real pane runs the recorder (which
//! logs every byte it reads); a real adapter process replays a fixture; the real daemon decides.
//!
//! - Sequences are per adapter process: a new adapter process (after a `kill -9` of the old
//!   one, or a restart of the program) is heard from its first event, however far the old one
//!   had counted.
//! - A restart of the program replaces its adapter, which gets the new incarnation in its
//!   environment.

use std::time::{Duration, Instant};

use belfry_tests::{adapter_bin, eventually, fixture, read_or_empty, recorder_bin, Env};
use serde_json::Value;

const RICH: &str = "turn-boundary+fresh-idle";

/// A pane `agent` under the rich policy whose adapter replays `fixtures/ding/<case>.jsonl`;
/// returns the recorder's byte log.
fn rich_pane(env: &Env, case: &str) -> std::path::PathBuf {
    let log = env.path("pane.log");
    let (rec, adapter) = (
        recorder_bin().display().to_string(),
        adapter_bin().display().to_string(),
    );
    let fixture_path = fixture(&format!("ding/{case}.jsonl")).display().to_string();
    let log_s = log.display().to_string();
    env.ok(&[
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
        "--",
        &rec,
        "--log",
        &log_s,
    ]);
    env.wait_screen("agent", "READY");
    log
}

fn status(env: &Env) -> Value {
    env.ding_status("agent")
}

fn post(env: &Env, subject: &str) -> String {
    env.post_mail("agent", "lead", subject, "please look\n")
}

fn notices_for(log: &std::path::Path, name: &str) -> usize {
    let id = &name[name.len() - 9..name.len() - 3];
    String::from_utf8_lossy(&read_or_empty(log))
        .matches(&format!("[DING] new message: [id:{id}]"))
        .count()
}

/// The pid of the pane's adapter process, once it runs (or has at least started).
fn adapter_pid(env: &Env) -> Option<u32> {
    let adapter = &status(env)["adapter"];
    match adapter["state"].as_str() {
        Some("running" | "starting") => adapter["pid"].as_u64().map(|pid| pid as u32),
        _ => None,
    }
}

/// Waits until the first adapter process has sent its 5,000 `active` events and the worker
/// has taken them all, and posts one message, held `active`. Returns the message's name and
/// the adapter's pid.
fn after_5000_events(env: &Env) -> (String, u32) {
    assert!(
        eventually(Duration::from_secs(60), || status(env)["last_event"]
            ["sequence"]
            == 5000),
        "the adapter's 5,000 events never arrived: {}",
        status(env)
    );
    let name = post(env, "after a long run");
    assert!(
        eventually(Duration::from_secs(5), || status(env)["messages"][0]
            ["state"]
            == "held:active"),
        "{}",
        status(env)
    );
    let pid = adapter_pid(env).expect("the first adapter runs");
    (name, pid)
}

/// Lets the new adapter process report idle, and proves the notice is typed within 2 s of it.
fn told_within_2_s_of_the_next_idle(env: &Env, log: &std::path::Path, name: &str) {
    let idle_at = Instant::now();
    std::fs::write(env.state().join("idle-now"), b"").unwrap();
    let told = eventually(Duration::from_secs(5), || notices_for(log, name) == 1);
    let took = idle_at.elapsed();
    eprintln!(
        "notice {} ms after the new adapter's first idle report",
        took.as_millis()
    );
    assert!(
        told,
        "no notice 5 s after the new adapter process reported idle; status: {}",
        status(env)
    );
    assert!(
        took < Duration::from_secs(2),
        "the notice came {took:?} after the idle report"
    );
    let st = status(env);
    assert_eq!(st["counters"]["sends"], 1, "{st}");
    assert!(
        st["counters"]["holds"].get("out-of-order").is_none(),
        "a new adapter process was held out-of-order: {st}"
    );
}

/// spec §7.4, sequences per adapter process: the adapter sent 5,000 events, was `kill -9`'d,
/// and its replacement counts from 1. Before, the worker kept one validator for its life and
/// held every event of the new process `out-of-order` until it passed 5000.
#[test]
fn an_adapter_killed_after_5000_events_is_heard_from_its_replacements_first_event() {
    let env = Env::new();
    let log = rich_pane(&env, "long-run-then-rerun");
    let (name, old) = after_5000_events(&env);
    // SAFETY: kill(2) on the test's own adapter process; it touches no memory.
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    assert!(
        eventually(Duration::from_secs(10), || adapter_pid(&env)
            .is_some_and(|pid| pid != old)),
        "the adapter was not started again: {}",
        status(&env)
    );
    told_within_2_s_of_the_next_idle(&env, &log, &name);
}

/// spec §7.4 (the adapter's environment names the incarnation) and INVARIANT 61: `belfry
/// restart` ends the adapter's process group and starts a new adapter with the new
/// incarnation, which is heard from its first event. Before, the old adapter went on with the
/// old `BELFRY_INCARNATION`, and an adapter that reads its identity from there was held
/// `incarnation-mismatch` for good.
#[test]
fn a_restarted_program_gets_a_new_adapter_that_is_heard_at_its_next_idle() {
    let env = Env::new();
    let log = rich_pane(&env, "long-run-then-rerun");
    let (name, old) = after_5000_events(&env);
    let before = env.snapshot("agent")["incarnation"].clone();
    env.ok(&["restart", "agent"]);
    let after = env.snapshot("agent")["incarnation"].clone();
    assert_ne!(before, after, "restart gives a new incarnation");
    assert!(
        eventually(Duration::from_secs(10), || adapter_pid(&env)
            .is_some_and(|pid| pid != old)),
        "restart did not replace the adapter: {}",
        status(&env)
    );
    assert!(
        eventually(Duration::from_secs(5), || !belfry_tests::pid_alive(old)),
        "the old adapter outlived the restart"
    );
    env.wait_screen("agent", "READY");
    told_within_2_s_of_the_next_idle(&env, &log, &name);
}

/// spec §7.4, a person's input (issue 39, item 9): a person at an attached terminal types a
/// draft and presses Enter, and mail is posted right after. The adapter goes on reporting the
/// idle from before with the composer empty (the harness took the Enter and shows no turn
/// yet), which before gave a lease: the notice was typed ~300 ms after the post, into the
/// turn the person's Enter had started. Now nothing is typed until the harness shows the
/// turn (here: the adapter reports `active`) and it has settled; then the notice comes.
#[test]
fn a_notice_is_never_typed_between_a_persons_enter_and_the_turn_it_starts() {
    let env = Env::with_vars(&[("BELFRY_DING_SUBMIT_UNSEEN_MS", "60000")]);
    let log = rich_pane(&env, "idle-until-turn-shown");
    // A real client: `belfry attach agent` in a terminal of its own (another pane).
    env.spawn(
        "human",
        "24x100",
        &["sh", "-c", "\"$BELFRY_BIN\" attach agent; sleep 600"],
        None,
    );
    env.wait_screen("human", "READY");
    env.ok(&["send", "human", "--text", "my draft", "--key", "Enter"]);
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            .ends_with(b"my draft\r")),
        "the person's draft never reached the program: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    let name = post(&env, "while you were typing");
    let held = eventually(Duration::from_secs(5), || {
        status(&env)["messages"][0]["state"] == "held:typed"
    });
    assert!(held, "{}", status(&env));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&log)),
        "my draft\r",
        "a notice was typed before the harness showed the turn of the person's Enter; status: {}",
        status(&env)
    );
    // The harness shows the turn, which then ends: the notice follows, once.
    std::fs::write(env.state().join("turn-shown"), b"").unwrap();
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log, &name) == 1),
        "no notice after the turn: {}",
        status(&env)
    );
    let text = String::from_utf8_lossy(&read_or_empty(&log)).to_string();
    assert!(
        text.starts_with("my draft\r[DING] new message:"),
        "{text:?}"
    );
    assert_eq!(status(&env)["counters"]["sends"], 1);
}

/// spec §7.4, input from a supervisor (issue 39, item 9): a supervising program types a draft
/// and its Enter with `belfry send`, as most belfry users drive their agents, and mail is
/// posted right after. It is the same race as a person's Enter: the adapter goes on reporting
/// the idle from before with the composer empty until the harness shows the turn. Before, a
/// send was not announced as input at all, and the message was never held `typed` (this test
/// failed there): the idle reports kept giving leases. Now the pane host announces the send
/// (`typed`) and nothing is typed until the harness shows the turn and it has settled.
#[test]
fn a_notice_is_never_typed_between_a_supervisors_send_and_the_turn_it_starts() {
    let env = Env::with_vars(&[("BELFRY_DING_SUBMIT_UNSEEN_MS", "60000")]);
    let log = rich_pane(&env, "idle-until-turn-shown");
    env.ok(&["send", "agent", "--text", "my draft", "--key", "Enter"]);
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            .ends_with(b"my draft\r")),
        "the supervisor's draft never reached the program: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    let name = post(&env, "while you were sending");
    let held = eventually(Duration::from_secs(5), || {
        status(&env)["messages"][0]["state"] == "held:typed"
    });
    assert!(held, "{}", status(&env));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&log)),
        "my draft\r",
        "a notice was typed before the harness showed the turn of the supervisor's Enter; \
         status: {}",
        status(&env)
    );
    std::fs::write(env.state().join("turn-shown"), b"").unwrap();
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log, &name) == 1),
        "no notice after the turn: {}",
        status(&env)
    );
    let text = String::from_utf8_lossy(&read_or_empty(&log)).to_string();
    assert!(
        text.starts_with("my draft\r[DING] new message:"),
        "{text:?}"
    );
    assert_eq!(status(&env)["counters"]["sends"], 1);
}

/// The next event on a pane host subscription within `limit`, if any.
fn next_event(events: &mut belfry_tests::Conn, limit: Duration) -> Option<Value> {
    events
        .stream()
        .set_read_timeout(Some(limit))
        .expect("read timeout");
    events.read()
}

/// Whether a `typed` lifecycle event arrives on `events` within `limit` (revision events are
/// skipped).
fn typed_within(events: &mut belfry_tests::Conn, limit: Duration) -> Option<Value> {
    let until = Instant::now() + limit;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match next_event(events, left) {
            Some(event) if event["event"] == "lifecycle" && event["what"] == "typed" => {
                return Some(event)
            }
            Some(_) => {}
            None => return None,
        }
    }
    None
}

/// spec §7.4 and docs/protocol.md (`send`, field `notice`): the pane host announces every send
/// that writes something as input from outside the program (the lifecycle event `typed`,
/// with the revision before its first byte), except a DING notice, which its worker marks
/// `"notice": true`: a notice announced as typing would hold the notices after it as a
/// person's draft does. A conflict writes nothing and announces nothing; `"notice": null` is
/// refused, naming the field.
#[test]
fn a_send_is_announced_as_input_and_a_notice_transaction_is_not() {
    let env = Env::new();
    let log = env.recorder_pane("p", &[]);
    let mut events = belfry_tests::Conn::open(&env.pane_socket("p")).expect("pane host");
    assert_eq!(
        events.request(serde_json::json!({"op": "subscribe"}))["ok"],
        true
    );
    let mut conn = belfry_tests::Conn::open(&env.pane_socket("p")).expect("pane host");
    let notice = conn.request(serde_json::json!({"op": "send", "notice": true,
        "input": [{"paste": "[DING] a notice"}, {"key": "Enter"}]}));
    assert_eq!(notice["result"], "sent", "{notice}");
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            .ends_with(b"[DING] a notice\r")),
        "{:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    let typed = typed_within(&mut events, Duration::from_millis(1500));
    assert!(
        typed.is_none(),
        "a notice was announced as typing: {typed:?}"
    );
    // A conflict: nothing written, nothing announced (past the 100 ms between two events).
    std::thread::sleep(Duration::from_millis(200));
    let conflict = conn.request(serde_json::json!({"op": "send", "expect": {"revision": 1},
        "input": [{"text": "never"}]}));
    assert_eq!(conflict["result"], "conflict", "{conflict}");
    let typed = typed_within(&mut events, Duration::from_millis(1000));
    assert!(
        typed.is_none(),
        "a conflict was announced as typing: {typed:?}"
    );
    let before = env.revision("p");
    let sent = conn.request(serde_json::json!({"op": "send",
        "input": [{"text": "draft"}, {"key": "Enter"}]}));
    assert_eq!(sent["result"], "sent", "{sent}");
    let typed = typed_within(&mut events, Duration::from_secs(5))
        .expect("a send that is not a notice was not announced as typing");
    assert_eq!(typed["session"], "p", "{typed}");
    assert!(
        typed["revision"].as_u64().is_some_and(|r| r >= before),
        "{typed} (revision before the send: {before})"
    );
    let refused = conn.request(serde_json::json!({"op": "send", "notice": null,
        "input": [{"text": "x"}]}));
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"notice\"")),
        "{refused}"
    );
}
