//! spec §3: compare-and-send. A mismatch writes zero bytes; a match writes the whole
//! transaction with no other sender's bytes interleaved.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use belfry_tests::{eventually, read_or_empty, recorder_bin, Conn, Env};
use serde_json::{json, Value};

fn recorder(env: &Env, session: &str, extra: &[&str]) -> std::path::PathBuf {
    let log = env.path(&format!("{session}.log"));
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    let mut argv = vec![rec.as_str(), "--log", log_s.as_str()];
    argv.extend_from_slice(extra);
    // A noisy recorder prints READY and then a tick every millisecond, which scrolls READY
    // off the screen within 24 ms: a wait that starts later would never see it. Its ticks
    // start only once it is ready, and stay.
    let ready = if extra.contains(&"--noisy") {
        "tick"
    } else {
        "READY"
    };
    env.spawn(session, "24x80", &argv, Some(ready));
    log
}

#[test]
fn conflict_writes_zero_bytes() {
    let env = Env::new();
    let log = recorder(&env, "rec", &[]);
    let snap = env.snapshot("rec");
    let identity = json!({
        "incarnation": snap["incarnation"], "generation": snap["generation"], "revision": snap["revision"],
    });
    let stale = {
        let mut e = identity.clone();
        e["revision"] = json!(snap["revision"].as_u64().unwrap() - 1);
        e
    };
    let wrong_incarnation = {
        let mut e = identity.clone();
        e["incarnation"] = json!("0".repeat(32));
        e
    };
    let wrong_generation = {
        let mut e = identity.clone();
        e["generation"] = json!(format!("sha256:{}", "0".repeat(64)));
        e
    };
    let mut conn = env.conn();
    for (what, expect) in [
        ("stale revision", stale),
        ("wrong incarnation", wrong_incarnation),
        ("wrong generation", wrong_generation),
    ] {
        let reply = conn.request(json!({"op":"send","session":"rec","expect":expect,
            "input":[{"paste":"SHOULD-NOT-ARRIVE"},{"delay_ms":10},{"key":"Enter"}]}));
        assert_eq!(reply["ok"], true, "{what}: {reply}");
        assert_eq!(reply["result"], "conflict", "{what}: {reply}");
        assert_eq!(
            reply["actual"]["revision"], snap["revision"],
            "{what}: {reply}"
        );
        assert_eq!(
            reply["actual"]["incarnation"], snap["incarnation"],
            "{what}"
        );
    }
    // Give any stray byte time to arrive before checking that none did.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read_or_empty(&log), b"", "a conflict wrote bytes");
    assert_eq!(
        env.revision("rec"),
        snap["revision"].as_u64().unwrap(),
        "a conflict moved the revision"
    );

    // The CLI maps a conflict to exit code 3 and writes nothing either.
    let stale_rev = (snap["revision"].as_u64().unwrap() - 1).to_string();
    let out = env.run(&[
        "send",
        "rec",
        "--expect-revision",
        &stale_rev,
        "--text",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(3));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(read_or_empty(&log), b"");

    // The matching expectation writes the whole transaction.
    let reply = conn.request(json!({"op":"send","session":"rec","expect":identity,
        "input":[{"text":"abc"},{"delay_ms":5},{"key":"Enter"},{"key":"C-c"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(reply["revision"].as_u64().unwrap() >= snap["revision"].as_u64().unwrap() + 3);
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            == b"abc\r\x03"),
        "log: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
}

#[test]
fn bracketed_paste_framed_only_when_enabled() {
    let env = Env::new();
    let plain = recorder(&env, "plain", &[]);
    let framed = recorder(&env, "framed", &["--bracketed"]);
    assert_eq!(env.snapshot("plain")["modes"]["bracketed_paste"], false);
    assert_eq!(env.snapshot("framed")["modes"]["bracketed_paste"], true);
    let mut conn = env.conn();
    for session in ["plain", "framed"] {
        let reply =
            conn.request(json!({"op":"send","session":session,"input":[{"paste":"hello world"}]}));
        assert_eq!(reply["result"], "sent", "{reply}");
    }
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&plain)
        == b"hello world"));
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&framed)
            == b"\x1b[200~hello world\x1b[201~"),
        "framed log: {:?}",
        String::from_utf8_lossy(&read_or_empty(&framed))
    );

    // A paste that could end the frame is refused before anything is written.
    let before = env.revision("framed");
    let reply = conn.request(json!({"op":"send","session":"framed",
        "input":[{"text":"first"},{"paste":"evil\u{1b}[201~\rrm -rf"}]}));
    assert_eq!(reply["ok"], false, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("paste contains ESC"), "{message}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read_or_empty(&framed), b"\x1b[200~hello world\x1b[201~");
    assert_eq!(env.revision("framed"), before);
}

#[test]
fn send_to_exited_pane_is_a_conflict() {
    let env = Env::new();
    env.spawn("gone", "24x80", &["sh", "-c", "exit 7"], None);
    let mut conn = env.conn();
    let reply = conn.request(json!({"op":"wait","session":"gone","exit":true,"timeout_ms":10000}));
    assert_eq!(reply["ok"], true, "{reply}");
    let reply = conn.request(json!({"op":"send","session":"gone","input":[{"text":"x"}]}));
    assert_eq!(reply["result"], "conflict", "{reply}");
    assert_eq!(reply["exited"], true, "{reply}");
    assert_eq!(env.snapshot("gone")["exited"]["code"], 7);
}

/// Runs `rounds` rounds of 32 concurrent guarded sends with the same expected revision.
/// Returns the winners' payloads in order and the per-round winner counts.
fn contention(env: &Env, session: &str, rounds: usize) -> (Vec<String>, Vec<usize>) {
    const SENDERS: usize = 32;
    let barrier = Arc::new(Barrier::new(SENDERS + 1));
    let round_expect: Arc<parking_lot_free::Slot> = Arc::new(parking_lot_free::Slot::default());
    let (results_tx, results_rx) = std::sync::mpsc::channel::<(usize, usize, bool)>();
    let mut threads = Vec::new();
    for sender in 0..SENDERS {
        let barrier = Arc::clone(&barrier);
        let expect = Arc::clone(&round_expect);
        let results = results_tx.clone();
        let socket = env.socket();
        let session = session.to_string();
        threads.push(std::thread::spawn(move || {
            let mut conn = Conn::open(&socket).expect("connect");
            for round in 0..rounds {
                barrier.wait();
                let expected = expect.get();
                let payload = format!("<s{sender:02}r{round:03}:{}>", "x".repeat(40));
                let reply = conn.request(json!({"op":"send","session":session,
                    "expect":{"revision":expected},
                    "input":[{"paste":payload},{"delay_ms":1},{"key":"Enter"}]}));
                assert_eq!(reply["ok"], true, "{reply}");
                let won = reply["result"] == "sent";
                results.send((round, sender, won)).expect("report");
                barrier.wait();
            }
        }));
    }
    let mut winners = Vec::new();
    let mut per_round = Vec::new();
    let mut conn = env.conn();
    for round in 0..rounds {
        let snap = conn.request(json!({"op":"snapshot","session":session}));
        round_expect.set(snap["revision"].as_u64().unwrap());
        barrier.wait();
        barrier.wait();
        let mut won = 0;
        for _ in 0..SENDERS {
            let (r, sender, w) = results_rx.recv().expect("result");
            assert_eq!(r, round);
            if w {
                won += 1;
                winners.push(format!("<s{sender:02}r{round:03}:{}>\r", "x".repeat(40)));
            }
        }
        per_round.push(won);
    }
    for t in threads {
        t.join().expect("sender thread");
    }
    (winners, per_round)
}

/// A tiny shared u64 (std only).
mod parking_lot_free {
    use std::sync::atomic::{AtomicU64, Ordering};
    #[derive(Default)]
    pub struct Slot(AtomicU64);
    impl Slot {
        pub fn get(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
        pub fn set(&self, v: u64) {
            self.0.store(v, Ordering::SeqCst)
        }
    }
}

fn assert_log_is_exactly(log: &std::path::Path, winners: &[String]) {
    let expected: String = winners.concat();
    assert!(
        eventually(Duration::from_secs(10), || read_or_empty(log).len()
            >= expected.len()),
        "recorder got {} bytes, expected {}",
        read_or_empty(log).len(),
        expected.len()
    );
    std::thread::sleep(Duration::from_millis(200));
    let got = String::from_utf8(read_or_empty(log)).expect("utf8 log");
    assert_eq!(
        got, expected,
        "the recorder must hold exactly the winners' payloads, in order"
    );
}

#[test]
fn contention_quiet_pane_exactly_one_winner_per_round() {
    let env = Env::new();
    let log = recorder(&env, "quiet", &[]);
    let (winners, per_round) = contention(&env, "quiet", 200);
    assert!(
        per_round.iter().all(|&w| w == 1),
        "winners per round: {per_round:?}"
    );
    assert_log_is_exactly(&log, &winners);
}

#[test]
fn contention_noisy_pane_at_most_one_winner_per_round() {
    let env = Env::new();
    let log = recorder(&env, "noisy", &["--noisy"]);
    let (winners, per_round) = contention(&env, "noisy", 200);
    assert!(
        per_round.iter().all(|&w| w <= 1),
        "winners per round: {per_round:?}"
    );
    eprintln!("noisy pane: {} of 200 rounds had a winner", winners.len());
    assert_log_is_exactly(&log, &winners);
    let _ = Value::Null;
}

/// A send queued behind another transaction is dropped, writing nothing, if its requester is
/// gone by the time it would start (a killed daemon must not leave a backlog of pastes).
#[test]
fn a_queued_send_whose_requester_left_writes_nothing() {
    let env = Env::new();
    let log = recorder(&env, "rec", &[]);
    let socket = env.pane_socket("rec");
    let holder = std::thread::spawn({
        let socket = socket.clone();
        move || {
            let mut conn = Conn::open(&socket).unwrap();
            conn.request(
                json!({"op":"send","input":[{"text":"first"},{"delay_ms":1500},{"text":"-end"}]}),
            )
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    {
        let mut leaver = Conn::open(&socket).unwrap();
        leaver.send_raw(b"{\"id\":1,\"op\":\"send\",\"input\":[{\"text\":\"LEFT-BEHIND\"}]}\n");
    }
    let reply = holder.join().unwrap();
    assert_eq!(reply["result"], "sent");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        read_or_empty(&log),
        b"first-end",
        "the abandoned send wrote bytes"
    );
}

/// `belfry send` writes to the pane host itself (hello and send in one write), so a stopped
/// daemon does not hold it up, a guard still refuses a stale revision with zero bytes, and the
/// JSON answer is the one the daemon's path gives. A send that names a protocol the pane host
/// does not speak is refused before its op is read, even pipelined behind a hello: nothing is
/// written.
#[test]
fn send_goes_to_the_pane_host_itself_and_a_foreign_protocol_writes_nothing() {
    use belfry_tests::Stopped;
    use std::time::Instant;
    let env = Env::new();
    let log = recorder(&env, "d", &[]);
    let revision = env.revision("d");
    let daemon = env.daemon_pid();
    {
        let _stopped = Stopped::new(daemon);
        let started = Instant::now();
        let out = env.run(&[
            "send",
            "d",
            "--expect-revision",
            &revision.to_string(),
            "--text",
            "direct-one",
            "--json",
        ]);
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let reply: Value = serde_json::from_slice(&out.stdout).expect("send --json is JSON");
        assert_eq!(reply["ok"], true, "{reply}");
        assert_eq!(reply["result"], "sent", "{reply}");
        assert!(reply["id"].is_u64(), "{reply}");
        assert!(
            took < Duration::from_secs(3),
            "send took {took:?} with the daemon stopped"
        );
        let stale = env.run(&[
            "send",
            "d",
            "--expect-revision",
            &revision.to_string(),
            "--text",
            "never-one",
        ]);
        assert_eq!(stale.status.code(), Some(3), "a conflict exits 3");
    }
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).contains("direct-one")
    }));

    let mut conn = Conn::open(&env.pane_socket("d")).unwrap();
    let before = env.revision("d");
    let lines = format!(
        "{}\n{}\n",
        json!({"id":1,"op":"hello","versions":[99]}),
        json!({"id":2,"op":"send","protocol":99,"input":[{"text":"never-two"}]})
    );
    conn.send_raw(lines.as_bytes());
    let hello = conn.read().expect("hello reply");
    assert_eq!(hello["error"]["code"], "unsupported-version", "{hello}");
    let send = conn.read().expect("send reply");
    assert_eq!(send["id"], 2, "{send}");
    assert_eq!(send["error"]["code"], "unsupported-version", "{send}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(env.revision("d"), before, "nothing moved the pane");
    let written = String::from_utf8_lossy(&read_or_empty(&log)).to_string();
    assert!(!written.contains("never"), "{written}");
}
