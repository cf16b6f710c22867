//! spec §7.1, §7.3, §12: 200 trials of `kill -9` on the daemon at random moments while
//! messages are being posted and delivered. No message is lost, no partial file is ever in
//! `new/`, and no notice is pasted twice.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use belfry_tests::{eventually, pid_alive, read_or_empty, recorder_bin, Env, Rng};
use serde_json::json;

#[test]
fn kill_9_during_posting_and_delivery_loses_nothing_and_never_pastes_twice() {
    let env = Env::new();
    let log = env.path("pane.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--",
        &rec,
        "--log",
        &log_s,
    ]);
    env.wait_screen("agent", "READY");
    let pane_pid = env
        .conn()
        .request(json!({"op":"snapshot","session":"agent"}))["child_pid"]
        .clone();

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);

    // A poster keeps posting through every daemon death (posting never needs the daemon).
    let stop = Arc::new(AtomicBool::new(false));
    let posted = Arc::new(parking_free::Names::default());
    let poster = {
        let stop = Arc::clone(&stop);
        let posted = Arc::clone(&posted);
        let vars = env.vars();
        let bin = belfry_tests::belfry_bin();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let mut cmd = std::process::Command::new(&bin);
                cmd.args([
                    "inbox",
                    "post",
                    "agent",
                    "--from",
                    "poster",
                    "--subject",
                    &format!("message {n}"),
                    "-",
                ]);
                for (k, v) in &vars {
                    cmd.env(k, v);
                }
                cmd.stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped());
                let mut child = cmd.spawn().expect("post");
                use std::io::Write;
                let _ = child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(format!("body of message {n}\n").as_bytes());
                let out = child.wait_with_output().expect("post");
                assert!(
                    out.status.success(),
                    "post failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                posted.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    };

    let start = Instant::now();
    for trial in 0..200 {
        let daemon = env.daemon_pid();
        std::thread::sleep(Duration::from_millis(rng.next_u64() % 40));
        // SAFETY: kill(2) on this test's own daemon; it touches no memory.
        let rc = unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
        assert_eq!(rc, 0, "trial {trial}: kill -9 {daemon}");
        assert!(
            eventually(Duration::from_secs(5), || !pid_alive(daemon)),
            "trial {trial}"
        );
    }
    stop.store(true, Ordering::SeqCst);
    poster.join().expect("poster");
    eprintln!(
        "200 trials in {:?}, {} messages posted",
        start.elapsed(),
        posted.len()
    );

    // A last daemon delivers whatever is still pending, then everything is checked.
    env.start_daemon();
    let inbox = env.state().join("inbox/agent");
    assert!(
        eventually(Duration::from_secs(30), || {
            let st: serde_json::Value =
                serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).unwrap();
            st["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["state"] != "pending")
        }),
        "messages still pending after the last restart"
    );
    std::thread::sleep(Duration::from_millis(800));

    // No message lost: every posted name is unread in new/ and parses whole.
    let names = posted.all();
    assert!(names.len() >= 50, "only {} messages posted", names.len());
    for name in &names {
        let path = inbox.join("new").join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("message {name} lost"));
        assert!(
            text.contains("body of message "),
            "{name} is partial: {text:?}"
        );
        assert!(
            text.trim_end().ends_with(|c: char| c.is_ascii_digit()),
            "{name} is partial: {text:?}"
        );
    }
    let in_new = std::fs::read_dir(inbox.join("new")).unwrap().count();
    assert_eq!(
        in_new,
        names.len(),
        "new/ holds something that was never posted whole"
    );

    // No notice pasted twice: every message id appears at most once in what the pane read.
    let pasted = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for part in pasted.split("[id:").skip(1) {
        *seen.entry(part.chars().take(6).collect()).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "pasted more than once: {twice:?}");
    let notices = pasted.matches("[DING]").count();
    eprintln!(
        "{notices} notices pasted for {} messages, {} ids named",
        names.len(),
        seen.len()
    );
    assert!(notices > 0, "nothing was ever delivered");
    // No message stranded: a notice staged when its daemon died is resolved by the next
    // daemon, which asks the pane host: announced again if it was never written, staged for
    // good if it was. Either way no staged record is left with an unresolved transaction.
    let ownership = env.state().join("ding/agent/ownership.json");
    let unresolved = || -> Vec<String> {
        let text = std::fs::read_to_string(&ownership).unwrap_or_default();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        file["messages"]
            .as_object()
            .map(|messages| {
                messages
                    .iter()
                    .filter(|(_, record)| record["txn"].is_string())
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        eventually(Duration::from_secs(15), || unresolved().is_empty()),
        "staged notices whose send was never resolved: {:?}",
        unresolved()
    );
    assert_eq!(
        env.conn()
            .request(json!({"op":"snapshot","session":"agent"}))["child_pid"],
        pane_pid,
        "the agent was restarted"
    );
}

mod parking_free {
    use std::sync::Mutex;
    #[derive(Default)]
    pub struct Names(Mutex<Vec<String>>);
    impl Names {
        pub fn push(&self, name: String) {
            self.0.lock().unwrap().push(name);
        }
        pub fn len(&self) -> usize {
            self.0.lock().unwrap().len()
        }
        pub fn all(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }
}
