//! spec §7.3, §12: a daemon killed while a staged notice's send is outstanding must neither
//! strand the message (staged forever, never announced) nor paste it twice. The pane host's
//! transaction journal tells the next daemon which it is: a send that was still waiting for the
//! input lock was never written and is announced again, exactly once; a send whose paste had
//! started is never pasted again.

use std::time::{Duration, Instant};

use belfry_tests::{eventually, pid_alive, read_or_empty, recorder_bin, Env};
use serde_json::Value;

fn aggressive_pane(env: &Env) -> std::path::PathBuf {
    env.recorder_pane("agent", &["--ding-delivery", "aggressive"])
}

fn post(env: &Env, subject: &str) -> String {
    let body = env.path("body.md");
    std::fs::write(&body, "please look\n").unwrap();
    // `--create`: some tests post before any pane of that name ran.
    let out = env.ok(&[
        "inbox",
        "post",
        "agent",
        "--create",
        "--from",
        "lead",
        "--subject",
        subject,
        &body.display().to_string(),
    ]);
    out.trim().to_string()
}

/// The ownership record of `name`, read from the file (the worker may be busy sending and
/// unable to answer `ding status`).
fn record(env: &Env, name: &str) -> Value {
    let path = env.state().join("ding/agent/ownership.json");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let file: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    file["messages"][name].clone()
}

fn kill_daemon(env: &Env) {
    let daemon = env.daemon_pid();
    // SAFETY: kill(2) on the test's own daemon; it touches no memory.
    unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(5), || !pid_alive(daemon)));
}

fn notices_for(log: &std::path::Path, name: &str) -> usize {
    let id = &name[name.len() - 9..name.len() - 3];
    String::from_utf8_lossy(&read_or_empty(log))
        .matches(&format!("[DING] new message: [id:{id}]"))
        .count()
}

#[test]
fn a_notice_stranded_behind_a_long_transaction_by_a_daemon_kill_is_announced_once_by_the_next_daemon(
) {
    let env = Env::new();
    let log = aggressive_pane(&env);
    // Another client holds the input lock for 4 s (paste, pause, Enter).
    let mut long = env
        .cmd(&[
            "send",
            "agent",
            "--paste",
            "HOLD",
            "--delay-ms",
            "2000",
            "--delay-ms",
            "2000",
            "--key",
            "Enter",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).contains("HOLD")
    }));
    let held_since = Instant::now();
    let name = post(&env, "behind the lock");
    // The worker stages the notice and its send waits behind the long transaction.
    assert!(
        eventually(Duration::from_secs(3), || record(&env, &name)["state"]
            == "staged"),
        "not staged: {}",
        record(&env, &name)
    );
    assert!(
        record(&env, &name)["txn"].is_string(),
        "{}",
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        held_since.elapsed() < Duration::from_millis(3000),
        "the long transaction ended too soon for this test; the machine is too slow"
    );
    kill_daemon(&env);
    assert_eq!(notices_for(&log, &name), 0, "nothing was written yet");

    // The next daemon asks the pane host, learns the send never started, and announces the
    // message once, after the long transaction has ended.
    env.start_daemon();
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log, &name) == 1
            && read_or_empty(&log).ends_with(b"\r")),
        "the stranded notice was not announced again: {:?}; record {}",
        String::from_utf8_lossy(&read_or_empty(&log)),
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(notices_for(&log, &name), 1, "announced twice");
    let got = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    assert!(got.starts_with("HOLD\r"), "the notice interleaved: {got:?}");
    assert_eq!(record(&env, &name)["state"], "staged");
    assert!(
        record(&env, &name)["txn"].is_null(),
        "{}",
        record(&env, &name)
    );
    let _ = long.wait();
}

#[test]
fn a_notice_whose_paste_started_before_a_daemon_kill_is_never_pasted_again() {
    let env = Env::new();
    let log = aggressive_pane(&env);
    let name = post(&env, "mid transaction");
    // Kill the daemon while the notice is in its 500 ms pause between paste and Enter.
    let start = Instant::now();
    while notices_for(&log, &name) == 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "no notice");
        std::thread::sleep(Duration::from_millis(2));
    }
    kill_daemon(&env);
    env.start_daemon();
    // The transaction runs to its end (Enter), and the next daemon never pastes it again.
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        .ends_with(b"\r")));
    assert!(
        eventually(Duration::from_secs(5), || record(&env, &name)["txn"]
            .is_null()),
        "the next daemon did not learn the send was written: {}",
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(notices_for(&log, &name), 1, "pasted twice");
    assert_eq!(record(&env, &name)["state"], "staged");
    let status: Value =
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).unwrap();
    assert_eq!(status["messages"][0]["state"], "staged", "{status}");
}

#[test]
fn a_txn_query_fences_a_send_that_has_not_started_and_names_bad_input() {
    let env = Env::new();
    let log = aggressive_pane(&env);
    let mut pane = belfry_tests::Conn::open(&env.pane_socket("agent")).unwrap();
    let send = |pane: &mut belfry_tests::Conn, txn: &str| {
        pane.request(serde_json::json!({"op": "send", "txn": txn, "input": [{"text": "x"}]}))
    };
    // Asked about before it started, a transaction never starts.
    let reply = pane.request(serde_json::json!({"op": "txn", "txn": "t-1"}));
    assert_eq!(reply["state"], "never-written", "{reply}");
    let reply = send(&mut pane, "t-1");
    assert_eq!(reply["ok"], false, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing was written"),
        "{reply}"
    );
    // A started one is written, and once settled it is forgotten.
    let reply = send(&mut pane, "t-2");
    assert_eq!(reply["result"], "sent", "{reply}");
    let reply = pane.request(serde_json::json!({"op": "txn", "txn": "t-2"}));
    assert_eq!(reply["state"], "written", "{reply}");
    let reply = pane.request(serde_json::json!({"op": "txn", "txn": "t-2", "settle": true}));
    assert_eq!(reply["settled"], true, "{reply}");
    assert!(eventually(Duration::from_secs(2), || read_or_empty(&log) == b"x"));
    for (request, needle) in [
        (serde_json::json!({"op": "txn"}), "missing field \"txn\""),
        (serde_json::json!({"op": "txn", "txn": "a/b"}), "must match"),
        (serde_json::json!({"op": "txn", "txn": 7}), "txn"),
        (
            serde_json::json!({"op": "send", "txn": "", "input": [{"text": "y"}]}),
            "must match",
        ),
    ] {
        let reply = pane.request(request.clone());
        assert_eq!(reply["ok"], false, "{request}: {reply}");
        assert!(
            reply["error"]["message"].as_str().unwrap().contains(needle),
            "{request}: {reply}"
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read_or_empty(&log), b"x", "bad input wrote bytes");
}

#[test]
fn a_txn_query_naming_an_earlier_pane_host_of_the_socket_answers_unknown_and_fences_nothing() {
    // Socket paths are reused: a pane host killed mid-send is followed by a new one bound under
    // the same path. A query about the dead one's transaction reaching the new one must not be
    // answered `never-written` (the notice would be announced twice), nor fence or settle.
    let env = Env::new();
    let log = aggressive_pane(&env);
    let mut pane = belfry_tests::Conn::open(&env.pane_socket("agent")).unwrap();
    let info = pane.request(serde_json::json!({"op": "info"}));
    let me = format!("{}-{}", info["pid"], info["started_at"]);
    let earlier = format!("{}-{}", info["pid"], 1);
    let reply = pane.request(serde_json::json!({"op": "txn", "txn": "t-old", "host": earlier}));
    assert_eq!(reply["state"], "unknown", "{reply}");
    let reply = pane
        .request(serde_json::json!({"op": "txn", "txn": "t-old", "host": earlier, "settle": true}));
    assert_eq!(reply["settled"], false, "{reply}");
    // Nothing was fenced: this pane host's own send with that id is written, and a query
    // naming this pane host answers from its journal.
    let reply =
        pane.request(serde_json::json!({"op": "send", "txn": "t-old", "input": [{"text": "z"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    let reply = pane.request(serde_json::json!({"op": "txn", "txn": "t-old", "host": me}));
    assert_eq!(reply["state"], "written", "{reply}");
    let reply = pane.request(serde_json::json!({"op": "txn", "txn": "t-new", "host": me}));
    assert_eq!(reply["state"], "never-written", "{reply}");
    assert!(eventually(Duration::from_secs(2), || read_or_empty(&log) == b"z"));
}

/// `ding status --json` of pane `agent`.
fn status(env: &Env) -> Value {
    serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).unwrap()
}

#[test]
fn a_notice_staged_for_a_pane_host_that_is_gone_is_told_once_to_the_next_and_status_says_why() {
    // A notice staged for a send to an earlier pane host of this name (dead, with its PTY and
    // its program): no journal can say whether a byte reached that program, but that program
    // is gone, so the message is owed to the one running now (issue 39, item 10). Before, it
    // stayed staged for good and nobody was ever told.
    let env = Env::new();
    let name = post(&env, "sent to a dead pane host");
    let dir = env.state().join("ding/agent");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ownership.json"),
        serde_json::json!({"version": 1, "session": "agent", "messages": {
            &name: {"state": "staged", "since_unix_ms": 1, "txn": "ding-1-1-1.1-1"}}})
        .to_string(),
    )
    .unwrap();
    let log = aggressive_pane(&env);
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log, &name) == 1),
        "the message was never told to the running program: {}",
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(notices_for(&log, &name), 1, "told twice");
    let st = status(&env);
    assert_eq!(st["messages"][0]["state"], "staged", "{st}");
    let why = st["messages"][0]["sent_again"].as_str().unwrap_or("");
    assert!(why.contains("pane host its notice went to is gone"), "{st}");
    let text = env.ok(&["ding", "status", "agent"]);
    assert!(text.contains("sent again: the pane host"), "{text}");
}

/// Waits until the first program has the notice's paste of `name` and not its Enter (the
/// transaction's 500 ms pause), within 5 s.
fn wait_for_paste_before_enter(log: &std::path::Path, name: &str) {
    let start = Instant::now();
    while notices_for(log, name) == 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "no notice");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_notice_cut_off_by_a_restart_is_told_again_to_the_restarted_program() {
    // spec §7.3 / issue 39, item 10: `belfry restart` during a notice's 500 ms pause aborts its
    // transaction after the paste ("N bytes written, stopped in step 2 of 3"). The old program
    // had the paste and never its Enter, and is gone: the new one is told, once, and status
    // says why. Before, the notice stayed staged for good.
    let env = Env::new();
    let log = aggressive_pane(&env);
    let name = post(&env, "cut off by a restart");
    wait_for_paste_before_enter(&log, &name);
    env.ok(&["restart", "agent"]);
    let first = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    assert!(
        !first.contains('\r'),
        "the Enter came before the restart; nothing was cut off: {first:?}"
    );
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log, &name) == 2
            && read_or_empty(&log).ends_with(b"\r")),
        "the restarted program was never told: {:?}; record {}",
        String::from_utf8_lossy(&read_or_empty(&log)),
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(notices_for(&log, &name), 2, "told the new program twice");
    let st = status(&env);
    assert_eq!(st["messages"][0]["state"], "staged", "{st}");
    let why = st["messages"][0]["sent_again"].as_str().unwrap_or("");
    assert!(why.contains("cut off part-way"), "{st}");
    assert_eq!(st["counters"]["sends"], 1, "{st}");
}

#[test]
fn a_notice_whose_pane_host_was_killed_mid_paste_is_told_to_the_next_pane_of_the_name() {
    // Issue 39, item 10 (4 of 3,422 in a soak): the pane host `kill -9`'d in the 500 ms between
    // a notice's paste and its Enter. Its program is gone; a pane created again under the
    // name is told about the message, once.
    let env = Env::new();
    let log = aggressive_pane(&env);
    let name = post(&env, "pane host killed mid paste");
    wait_for_paste_before_enter(&log, &name);
    let host = env.pane_host_pid("agent");
    // SAFETY: kill(2) on this test's own pane host; it touches no memory.
    unsafe { libc::kill(host as i32, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(5), || !pid_alive(host)));
    assert!(
        !String::from_utf8_lossy(&read_or_empty(&log)).contains('\r'),
        "the Enter came before the kill"
    );
    assert!(
        eventually(Duration::from_secs(10), || env
            .run(&["ls", "--json"])
            .status
            .success()
            && !String::from_utf8_lossy(&env.run(&["ls", "--json"]).stdout)
                .contains("\"agent\"")),
        "the killed pane is still listed"
    );
    let log2 = env.path("pane2.log");
    let (rec, log2_s) = (
        recorder_bin().display().to_string(),
        log2.display().to_string(),
    );
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--",
        &rec,
        "--log",
        &log2_s,
    ]);
    assert!(
        eventually(Duration::from_secs(15), || notices_for(&log2, &name) == 1),
        "the next pane was never told: {:?}; record {}",
        String::from_utf8_lossy(&read_or_empty(&log2)),
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(notices_for(&log2, &name), 1, "told twice");
    let st = status(&env);
    let why = st["messages"][0]["sent_again"].as_str().unwrap_or("");
    assert!(why.contains("pane host its notice went to is gone"), "{st}");
}

#[test]
fn a_pane_host_that_does_not_answer_holds_no_worker_and_its_notice_is_announced_once_it_wakes() {
    let env = Env::with_vars(&[("BELFRY_DING_SEND_TIMEOUT_MS", "800")]);
    let log = aggressive_pane(&env);
    let record_path = env.runtime().join("panes/agent.json");
    let pane_record: Value =
        serde_json::from_str(&std::fs::read_to_string(record_path).unwrap()).unwrap();
    let host = pane_record["pid"].as_i64().unwrap() as i32;
    /// Wakes the pane host however the test ends, before the environment is torn down.
    struct Wake(i32);
    impl Drop for Wake {
        fn drop(&mut self) {
            // SAFETY: kill(2) on this test's own pane host; it touches no memory.
            unsafe { libc::kill(self.0, libc::SIGCONT) };
        }
    }
    let wake = Wake(host);
    // SAFETY: kill(2) on this test's own pane host; it touches no memory.
    unsafe { libc::kill(host, libc::SIGSTOP) };
    let name = post(&env, "while the pane host sleeps");
    assert!(
        eventually(Duration::from_secs(3), || record(&env, &name)["txn"]
            .is_string()),
        "not staged: {}",
        record(&env, &name)
    );
    // The send has a deadline and the txn query one of its own: the worker answers status
    // again while the pane host is still stopped.
    std::thread::sleep(Duration::from_millis(3500));
    let mut status = env
        .cmd(&["ding", "status", "agent", "--json"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let answered = eventually(
        Duration::from_secs(5),
        || matches!(status.try_wait(), Ok(Some(exit)) if exit.success()),
    );
    if !answered {
        let _ = status.kill();
        let _ = status.wait();
    }
    assert!(
        answered,
        "the worker hung on a pane host that does not answer"
    );
    assert_eq!(notices_for(&log, &name), 0);
    drop(wake);
    // The queued send finds its requester gone and writes nothing; the worker's next check
    // learns that and announces the message once.
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log, &name) == 1
            && read_or_empty(&log).ends_with(b"\r")),
        "not announced after the pane host woke: {:?}; record {}",
        String::from_utf8_lossy(&read_or_empty(&log)),
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(notices_for(&log, &name), 1, "announced twice");
    assert!(
        record(&env, &name)["txn"].is_null(),
        "{}",
        record(&env, &name)
    );
}

/// spec §7.3: a notice queued behind a long transaction when the pane is killed is refused by
/// the stopping pane host with nothing written, so it is released rather than recorded as
/// written; a pane re-created under the same name is told about the message, once.
#[test]
fn a_notice_queued_when_its_pane_is_killed_is_not_recorded_written_and_reaches_the_next_pane() {
    let env = Env::new();
    let log = aggressive_pane(&env);
    let mut long = env
        .cmd(&[
            "send",
            "agent",
            "--paste",
            "HOLD",
            "--delay-ms",
            "2000",
            "--delay-ms",
            "2000",
            "--key",
            "Enter",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).contains("HOLD")
    }));
    let name = post(&env, "queued at kill");
    assert!(
        eventually(Duration::from_secs(3), || record(&env, &name)["state"]
            == "staged"),
        "not staged: {}",
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(200));
    env.ok(&["kill", "agent"]);
    let _ = long.wait();
    assert_eq!(
        notices_for(&log, &name),
        0,
        "the queued notice reached the killed pane"
    );

    // The same name again: the message was never written, so the new pane is told about it.
    let log2 = env.path("pane2.log");
    let (rec, log2_s) = (
        recorder_bin().display().to_string(),
        log2.display().to_string(),
    );
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--",
        &rec,
        "--log",
        &log2_s,
    ]);
    assert!(
        eventually(Duration::from_secs(10), || notices_for(&log2, &name) == 1),
        "the re-created pane was never told: {:?}; record {}",
        String::from_utf8_lossy(&read_or_empty(&log2)),
        record(&env, &name)
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(notices_for(&log2, &name), 1, "announced twice");
    // The killed pane host said it was stopping: no notice went to it again, where one that
    // met its exit would have had no answer, and stayed staged without proof either way.
    let daemon_log = std::fs::read_to_string(env.log_dir().join("daemon.log")).unwrap_or_default();
    let said = |what: &str| daemon_log.matches(what).count();
    assert_eq!(
        (said("notice not written"), said("notice sent")),
        (1, 1),
        "one refusal by the killed pane host, one notice to the next:\n{daemon_log}"
    );
    for after in [
        "notice not sent",
        "notice refused",
        "notice transport failed",
    ] {
        assert_eq!(said(after), 0, "{after}:\n{daemon_log}");
    }
    assert_eq!(notices_for(&log, &name), 0);
}
