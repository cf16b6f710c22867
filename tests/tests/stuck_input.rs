//! A program that stops reading its input must not wedge the pane: every write of an input
//! transaction has a deadline, the error says how many bytes were written, the input lock is
//! released, and restart and kill never wait for it.

use std::time::{Duration, Instant};

use belfry_tests::{eventually, pid_alive, read_or_empty, Conn, Env};
use serde_json::{json, Value};

/// The largest paste one request may carry (64 KiB including bracketed-paste framing).
fn big_paste() -> String {
    "x".repeat(64 * 1024 - 12)
}

/// Pastes 64 KiB at a time until a paste does not complete: the PTY's input buffer holds some
/// KiB, and a kernel with a bigger one could take a whole paste. Returns the reply and how long
/// it took.
fn paste_until_stuck(conn: &mut Conn, timeout_ms: u64) -> (Value, Duration) {
    for _ in 0..4 {
        let started = Instant::now();
        let reply = conn
            .request(json!({"op":"send","timeout_ms":timeout_ms,"input":[{"paste":big_paste()}]}));
        if reply["result"] != "sent" {
            return (reply, started.elapsed());
        }
    }
    panic!("four 64 KiB pastes to a program that reads nothing all completed");
}

/// Fills the PTY until it takes nothing more. A paste that does not complete is not proof: on a
/// loaded machine the kernel can be slow to move input from its flip buffers to the line
/// discipline, so a paste can time out while room is still to come, and a later small write then
/// goes through. Full is two pastes in a row that write zero bytes within their deadline.
fn fill_until_full(conn: &mut Conn) {
    let _ = paste_until_stuck(conn, 300);
    let mut empty = 0;
    for _ in 0..40 {
        let reply =
            conn.request(json!({"op":"send","timeout_ms":300,"input":[{"paste":big_paste()}]}));
        assert_eq!(reply["error"]["code"], "timeout", "{reply}");
        if reply["error"]["written"] == 0 {
            empty += 1;
            if empty == 2 {
                return;
            }
        } else {
            empty = 0;
        }
    }
    panic!("the PTY kept taking input from a program that reads nothing");
}

/// Starts a paste with a long deadline on its own connection and returns once it is blocked.
fn stuck_paste_in_flight(env: &Env, session: &str) -> std::thread::JoinHandle<Option<Value>> {
    let mut filler = Conn::open(&env.pane_socket(session)).unwrap();
    fill_until_full(&mut filler);
    let socket = env.pane_socket(session);
    let handle = std::thread::spawn(move || {
        let mut conn = Conn::open(&socket).unwrap();
        conn.send_raw(
            format!(
                "{}\n",
                json!({"id":1,"op":"send","timeout_ms":60_000,"input":[{"paste":big_paste()}]})
            )
            .as_bytes(),
        );
        conn.read()
    });
    // Let it take the input lock and block on the full PTY.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!handle.is_finished(), "the paste did not block");
    handle
}

#[test]
fn stuck_paste_times_out_with_bytes_written_and_frees_the_input_lock() {
    let env = Env::new();
    let (log, stall) = env.stalled_recorder("rec");
    let mut conn = Conn::open(&env.pane_socket("rec")).unwrap();
    let (reply, took) = paste_until_stuck(&mut conn, 1000);
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["error"]["code"], "timeout", "{reply}");
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_secs(4),
        "the timeout took {took:?}, not about 1 s"
    );
    let written = reply["error"]["written"].as_u64().expect("written") as usize;
    assert!(written < big_paste().len() + 12, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{written} bytes written")) && message.contains("1000 ms"),
        "the message does not say what was written: {message}"
    );

    // The lock is free: a send from another connection gets it at once.
    let mut other = Conn::open(&env.pane_socket("rec")).unwrap();
    let started = Instant::now();
    let reply = other.request(json!({"op":"send","input":[]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // Once the program reads again, a later send goes through after what was written.
    std::fs::remove_file(&stall).unwrap();
    let reply = other.request(json!({"op":"send","input":[{"text":"AFTER"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(
        eventually(Duration::from_secs(10), || read_or_empty(&log)
            .ends_with(b"AFTER")),
        "the later send never arrived"
    );
}

#[test]
fn restart_aborts_a_stuck_transaction_at_once_and_the_new_child_gets_none_of_it() {
    let env = Env::new();
    let (log, stall) = env.stalled_recorder("rec");
    let before = env.snapshot("rec");
    let stuck = stuck_paste_in_flight(&env, "rec");

    let started = Instant::now();
    let reply = env.conn().request(json!({"op":"restart","session":"rec"}));
    let took = started.elapsed();
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(took < Duration::from_secs(5), "restart took {took:?}");
    assert_ne!(reply["identity"]["incarnation"], before["incarnation"]);

    let aborted = stuck.join().unwrap().expect("the stuck send got a reply");
    assert_eq!(aborted["error"]["code"], "aborted", "{aborted}");
    assert!(
        aborted["error"]["message"]
            .as_str()
            .unwrap()
            .contains("aborted by restart"),
        "{aborted}"
    );
    assert!(aborted["error"]["written"].is_u64(), "{aborted}");

    // The new child reads again: it gets exactly what is sent to it, none of the old paste.
    env.wait_screen("rec", "READY");
    std::fs::remove_file(&stall).unwrap();
    let reply = env
        .conn()
        .request(json!({"op":"send","session":"rec","input":[{"text":"NEW"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log) == b"NEW"),
        "the new child read {} bytes, not just \"NEW\"",
        read_or_empty(&log).len()
    );
}

#[test]
fn kill_ends_a_pane_with_a_stuck_transaction_promptly() {
    let env = Env::new();
    let _ = env.stalled_recorder("rec");
    let host_pid = env.snapshot("rec")["pid"].as_u64().unwrap() as u32;
    let stuck = stuck_paste_in_flight(&env, "rec");
    let started = Instant::now();
    let reply = env.conn().request(json!({"op":"kill","session":"rec"}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(
        eventually(Duration::from_secs(5), || !pid_alive(host_pid)),
        "the pane host is still running"
    );
    assert!(started.elapsed() < Duration::from_secs(6));
    // The stuck send ends too: aborted, or its connection closed with the pane host.
    if let Some(reply) = stuck.join().unwrap() {
        assert_eq!(reply["error"]["code"], "aborted", "{reply}");
    }
}

/// Queues a guarded send with a transaction id behind the stuck paste, on its own connection,
/// and returns once it is waiting for the input lock.
fn guarded_send_queued(env: &Env, session: &str) -> std::thread::JoinHandle<Option<Value>> {
    let incarnation = env.snapshot(session)["incarnation"].clone();
    let socket = env.pane_socket(session);
    let handle = std::thread::spawn(move || {
        let mut conn = Conn::open(&socket).unwrap();
        conn.send_raw(
            format!(
                "{}\n",
                json!({"id":2,"op":"send","timeout_ms":20_000,"txn":"queued-1",
                       "expect":{"incarnation":incarnation},"input":[{"text":"QUEUED"}]})
            )
            .as_bytes(),
        );
        conn.read()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!handle.is_finished(), "the queued send did not wait");
    handle
}

/// The queued send was refused before its compare: `aborted`, nothing written, naming who.
fn assert_refused_unwritten(reply: &Value, by: &str) {
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["error"]["code"], "aborted", "{reply}");
    assert_eq!(reply["error"]["written"], 0, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("aborted by {by}")),
        "{reply}"
    );
}

#[test]
fn kill_refuses_a_send_queued_behind_a_stuck_paste_with_nothing_written() {
    let env = Env::new();
    let (log, stall) = env.stalled_recorder("rec");
    let host_pid = env.snapshot("rec")["pid"].as_u64().unwrap() as u32;
    let stuck = stuck_paste_in_flight(&env, "rec");
    let queued = guarded_send_queued(&env, "rec");
    let reply = env.conn().request(json!({"op":"kill","session":"rec"}));
    assert_eq!(reply["ok"], true, "{reply}");
    // The child may read again while it is being stopped: it must still get none of the
    // queued send.
    std::fs::remove_file(&stall).unwrap();
    let refused = queued.join().unwrap().expect("the queued send got a reply");
    assert_refused_unwritten(&refused, "kill");
    assert!(
        eventually(Duration::from_secs(6), || !pid_alive(host_pid)),
        "the pane host is still running"
    );
    if let Some(reply) = stuck.join().unwrap() {
        assert_eq!(reply["error"]["code"], "aborted", "{reply}");
    }
    assert!(
        !read_or_empty(&log).windows(6).any(|w| w == b"QUEUED"),
        "the queued send reached the dying child"
    );
}

#[test]
fn sigterm_aborts_a_stuck_paste_and_refuses_the_send_queued_behind_it() {
    let env = Env::new();
    let (log, stall) = env.stalled_recorder("rec");
    let host_pid = env.snapshot("rec")["pid"].as_u64().unwrap() as u32;
    let stuck = stuck_paste_in_flight(&env, "rec");
    let queued = guarded_send_queued(&env, "rec");
    // SAFETY: kill(2) only sends a signal; the pid is the pane host this test started.
    assert_eq!(unsafe { libc::kill(host_pid as i32, libc::SIGTERM) }, 0);
    std::fs::remove_file(&stall).unwrap();
    let aborted = stuck.join().unwrap().expect("the stuck paste got a reply");
    assert_eq!(aborted["error"]["code"], "aborted", "{aborted}");
    assert!(
        aborted["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("aborted by SIGTERM"),
        "{aborted}"
    );
    let refused = queued.join().unwrap().expect("the queued send got a reply");
    assert_refused_unwritten(&refused, "SIGTERM");
    assert!(
        eventually(Duration::from_secs(6), || !pid_alive(host_pid)),
        "the pane host is still running"
    );
    assert!(
        !read_or_empty(&log).windows(6).any(|w| w == b"QUEUED"),
        "the queued send reached the dying child"
    );
}

#[test]
fn a_stuck_keystroke_write_releases_the_input_lock() {
    let env = Env::new();
    let _ = env.stalled_recorder("rec");
    let mut filler = Conn::open(&env.pane_socket("rec")).unwrap();
    fill_until_full(&mut filler);
    // An attached keyboard types into the full PTY: the write blocks, holding the input lock.
    let mut keyboard = Conn::open(&env.pane_socket("rec")).unwrap();
    let reply = keyboard.request(json!({"op":"attach"}));
    assert_eq!(reply["attached"], true, "{reply}");
    let keys = b"typed while the program is not reading";
    let mut frame = vec![1u8];
    frame.extend_from_slice(&(keys.len() as u32).to_be_bytes());
    frame.extend_from_slice(keys);
    keyboard.send_raw(&frame);
    std::thread::sleep(Duration::from_millis(200));
    // A send queued behind it gets the lock once the keystroke write's deadline (5 s) passes.
    let started = Instant::now();
    let reply = Conn::open(&env.pane_socket("rec"))
        .unwrap()
        .request(json!({"op":"send","input":[]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the send waited {:?} for the input lock",
        started.elapsed()
    );
}

#[test]
fn send_timeout_out_of_range_or_null_is_invalid() {
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);
    let mut daemon = env.conn();
    let mut host = Conn::open(&env.pane_socket("w")).unwrap();
    for (timeout, needle) in [
        (json!(0), "1..=60000"),
        (json!(60_001), "1..=60000"),
        (Value::Null, "\"timeout_ms\" is null"),
        (json!("5s"), "non-negative integer"),
    ] {
        let request = json!({"op":"send","session":"w","timeout_ms":timeout,"input":[]});
        for conn in [&mut daemon, &mut host] {
            let reply = conn.request(request.clone());
            assert_eq!(reply["error"]["code"], "invalid", "{timeout}: {reply}");
            let message = reply["error"]["message"].as_str().unwrap();
            assert!(message.contains(needle), "{timeout}: {message}");
        }
    }
}

#[test]
fn cli_send_timeout_reports_the_bytes_written() {
    let env = Env::new();
    let _ = env.stalled_recorder("rec");
    let mut filler = Conn::open(&env.pane_socket("rec")).unwrap();
    fill_until_full(&mut filler);
    let started = Instant::now();
    let out = env.run(&["send", "rec", "--timeout-ms", "500", "--text", "stuck"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("timed out") && stderr.contains("0 bytes written"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_send_queued_behind_a_stuck_transaction_gives_up_and_never_writes() {
    let env = Env::new();
    let (log, stall) = env.stalled_recorder("rec");
    let stuck = stuck_paste_in_flight(&env, "rec");
    // The queued send waits for the input lock at most its timeout_ms + 5 s.
    let started = Instant::now();
    let reply = Conn::open(&env.pane_socket("rec"))
        .unwrap()
        .request(json!({"op":"send","timeout_ms":100,"input":[{"text":"QUEUED"}]}));
    let took = started.elapsed();
    assert_eq!(reply["error"]["code"], "timeout", "{reply}");
    assert_eq!(reply["error"]["written"], 0, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing was written"),
        "{reply}"
    );
    assert!(
        took >= Duration::from_millis(5100) && took < Duration::from_secs(9),
        "the queued send gave up after {took:?}, not about 5.1 s"
    );
    // Once the program reads again the stuck paste completes; the given-up send never follows.
    std::fs::remove_file(&stall).unwrap();
    let finished = stuck.join().unwrap().expect("the stuck send got a reply");
    assert_eq!(finished["result"], "sent", "{finished}");
    std::thread::sleep(Duration::from_millis(300));
    let read = read_or_empty(&log);
    assert!(
        !read.windows(6).any(|w| w == b"QUEUED"),
        "the send that gave up was written anyway"
    );
}
