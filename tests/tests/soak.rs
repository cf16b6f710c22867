//! Issue #7 acceptance: the soak test. For `BELFRY_SOAK_SECS` seconds (default 600) it runs
//! concurrent guarded senders through the daemon, a human-like typist in a real attached client,
//! DING posts, and chaos: random `kill -9` of the daemon and of pane hosts, and `SIGSTOP` /
//! `SIGCONT` of either. It ends with:
//! - no transaction torn: every winning payload stands whole, exactly once, in what the program
//!   read; every losing payload is absent; a payload whose reply was lost to a daemon death
//!   stands whole at most once; every notice stands whole;
//! - every posted message announced whole (with its Enter) at most once to each program (a
//!   notice whose program was killed before its send's end was learned is told again to the
//!   next program of the pane), and every one never announced shown by
//!   `ding status` with a state (nothing lost, nothing left `pending` once things settle);
//! - every CLI call and every request answered within its deadline;
//! - no process spinning at the end, and the RSS of every process bounded throughout.
//!
//! It is `#[ignore]`d (it takes minutes); `.ci/run` runs it with `--ignored`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use belfry_tests::{belfry_bin, eventually, pid_alive, read_or_empty, recorder_bin, Env, Rng};
use serde_json::{json, Value};

/// Every CLI call must return within this (the daemon is stopped for at most 3 s at a time).
const CLI_DEADLINE: Duration = Duration::from_secs(20);
/// Every request on a raw connection must be answered within this.
const REQUEST_DEADLINE: Duration = Duration::from_secs(20);
/// RSS bounds for the whole run.
const MAX_DAEMON_RSS_KIB: u64 = 256 * 1024;
const MAX_PANE_HOST_RSS_KIB: u64 = 128 * 1024;
/// At the end, with the load stopped, no process may use more than this share of one core.
const MAX_IDLE_CPU_PERCENT: f64 = 10.0;

const AGENTS: [&str; 2] = ["a", "b"];

/// Everything the workers saw, for the checks at the end.
#[derive(Default)]
struct Record {
    /// Sends that replied `sent`.
    winners: Vec<Won>,
    /// Payloads whose send replied `conflict`.
    losers: Vec<(String, String)>,
    /// Payloads whose reply never came (the daemon died or the connection broke).
    unknown: Vec<(String, String)>,
    /// Message names posted, per agent.
    posted: Vec<(String, String)>,
    /// Calls that missed their deadline, with what they were.
    late: Vec<String>,
    /// Max RSS seen (KiB), per role.
    max_daemon_rss: u64,
    max_pane_rss: u64,
    chaos: BTreeMap<&'static str, usize>,
    /// When the chaos killed a pane host (`kill -9`), per agent.
    pane_kills: Vec<(String, Instant)>,
}

/// A guarded send that replied `sent`: which pane incarnation took it, and when the request
/// went out and the reply came back.
struct Won {
    session: String,
    payload: String,
    incarnation: String,
    sent_at: Instant,
    replied_at: Instant,
}

type Shared = Arc<Mutex<Record>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Record> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `belfry ARGS` with a watchdog: a call still running at the deadline is killed and
/// recorded as late.
fn cli(
    env: &Env,
    shared: &Shared,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Option<std::process::Output> {
    let mut cmd = env.cmd(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().ok()?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(bytes);
    }
    // Both pipes are read while the command runs: a reply larger than a pipe buffer (a
    // `ding status --json` of a thousand messages) would otherwise block the command on its
    // write, and it would look hung.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > CLI_DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                lock(shared).late.push(format!("belfry {args:?}"));
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return None,
        }
    };
    Some(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// One request on a fresh daemon connection, with a deadline. `Err` when the daemon was not
/// there or went away; `Ok(None)` for a request that missed its deadline.
fn request(socket: &Path, request: &Value) -> Result<Option<Value>, String> {
    let stream = UnixStream::connect(socket).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(REQUEST_DEADLINE))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(REQUEST_DEADLINE))
        .map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    writer
        .write_all(format!("{request}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    match BufReader::new(stream).read_line(&mut line) {
        Ok(0) => Err("connection closed".into()),
        Ok(_) if !line.ends_with('\n') => Err("reply cut short".into()),
        Ok(_) => serde_json::from_str(&line)
            .map(Some)
            .map_err(|e| e.to_string()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// How long after its reply a winning send's pane host may be killed with the send still
/// unread by the program: the program is blocked reading, so it reads within milliseconds even
/// on a loaded machine.
const UNREAD_LIMIT: Duration = Duration::from_secs(2);

/// Why a winning send that never reached the program is not a lost write. `sent` means the pane
/// host wrote the bytes into the pane's terminal; a pane host killed before its program read
/// them takes them with it (the kernel discards a terminal's unread input when it hangs up). So
/// a winner may be missing only if a `kill -9` of its pane host came after the send (within
/// `UNREAD_LIMIT` of the reply) and no later send into the same pane incarnation reached the
/// program (the terminal is first in, first out: a later write read means this one was read).
/// Returns how long after the reply the kill came, or what rules it out.
fn unread_when_its_pane_was_killed(won: &Won, rec: &Record, log: &str) -> Result<Duration, String> {
    let kill = rec
        .pane_kills
        .iter()
        .filter(|(session, at)| *session == won.session && *at >= won.sent_at)
        .map(|(_, at)| *at)
        .min()
        .ok_or("no kill of its pane host came after the send")?;
    let after = kill.saturating_duration_since(won.replied_at);
    if after > UNREAD_LIMIT {
        return Err(format!(
            "its pane host was killed {after:?} after the reply, long after its program would have read it"
        ));
    }
    if let Some(later) = rec.winners.iter().find(|w| {
        w.session == won.session
            && w.incarnation == won.incarnation
            && w.sent_at > won.replied_at
            && log.contains(w.payload.as_str())
    }) {
        return Err(format!(
            "{} was sent into the same pane incarnation after it and was read",
            later.payload
        ));
    }
    Ok(after)
}

fn pane_record(env: &Env, session: &str) -> Option<Value> {
    let path = env.runtime().join("panes").join(format!("{session}.json"));
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn pane_host_pid(env: &Env, session: &str) -> Option<u32> {
    pane_record(env, session)?["pid"].as_u64().map(|p| p as u32)
}

/// The daemon's pid from its lock/record, without starting one.
fn daemon_pid_if_running(env: &Env) -> Option<u32> {
    let reply = request(&env.socket(), &json!({"id":1,"op":"hello"})).ok()??;
    reply["pid"].as_u64().map(|p| p as u32)
}

fn rss_kib(pid: u32) -> Option<u64> {
    belfry_tests::status_kb(pid, "VmRSS")
}

/// utime + stime in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn log_path(env: &Env, session: &str) -> PathBuf {
    env.path(&format!("{session}.log"))
}

/// Creates (or creates again, after a chaos kill) an agent pane running the recorder.
fn create_agent(env: &Env, shared: &Shared, session: &str) {
    let rec = recorder_bin().display().to_string();
    let log = log_path(env, session).display().to_string();
    for _ in 0..50 {
        if let Some(out) = cli(
            env,
            shared,
            &[
                "new",
                session,
                "--ding-delivery",
                "aggressive",
                "--",
                &rec,
                "--mark-start",
                "--log",
                &log,
            ],
            None,
        ) {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.success() || stderr.contains("already exists") {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("could not create agent pane {session}");
}

fn guarded_sender(env: &Env, shared: Shared, stop: Arc<AtomicBool>, index: usize, seed: u64) {
    let socket = env.socket();
    let mut rng = Rng(seed);
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let session = AGENTS[rng.below(AGENTS.len() as u64) as usize];
        let snap = match request(&socket, &json!({"id":1,"op":"snapshot","session":session})) {
            Ok(Some(s)) if s["ok"] == true => s,
            Ok(None) => {
                lock(&shared).late.push(format!("snapshot {session}"));
                continue;
            }
            _ => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        n += 1;
        let payload = format!(
            "<G{index}-{n}:{}>",
            "x".repeat(16 + rng.below(200) as usize)
        );
        let send = json!({"id":2,"op":"send","session":session,
            "expect":{"incarnation":snap["incarnation"],"generation":snap["generation"],
                      "revision":snap["revision"]},
            "input":[{"text":payload}]});
        let sent_at = Instant::now();
        let outcome = request(&socket, &send);
        let replied_at = Instant::now();
        let mut rec = lock(&shared);
        match outcome {
            Ok(Some(reply)) if reply["result"] == "sent" => rec.winners.push(Won {
                session: session.into(),
                payload,
                incarnation: snap["incarnation"].as_str().unwrap_or("").into(),
                sent_at,
                replied_at,
            }),
            Ok(Some(reply)) if reply["result"] == "conflict" => {
                rec.losers.push((session.into(), payload))
            }
            Ok(Some(_)) | Err(_) => rec.unknown.push((session.into(), payload)),
            Ok(None) => {
                rec.late.push(format!("send {session}"));
                rec.unknown.push((session.into(), payload));
            }
        }
    }
}

fn poster(env: &Env, shared: Shared, stop: Arc<AtomicBool>, seed: u64) {
    let mut rng = Rng(seed);
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let session = AGENTS[rng.below(AGENTS.len() as u64) as usize];
        let subject = format!("soak {n}");
        let body = format!("body {n}\n");
        let out = cli(
            env,
            &shared,
            &[
                "inbox",
                "post",
                session,
                "--from",
                "soak",
                "--subject",
                &subject,
                "-",
            ],
            Some(body.as_bytes()),
        );
        match out {
            Some(out) if out.status.success() => {
                let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
                lock(&shared).posted.push((session.into(), name));
            }
            Some(out) => panic!(
                "inbox post failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            None => {}
        }
        std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
    }
}

/// Types into the attached client of pane `a` (the `term` pane runs `belfry attach a` in a
/// loop), the way a person would: short bursts of lowercase letters.
fn typist(env: &Env, shared: Shared, stop: Arc<AtomicBool>, seed: u64) {
    let mut rng = Rng(seed);
    while !stop.load(Ordering::SeqCst) {
        let word: String = (0..1 + rng.below(8))
            .map(|i| (b'k' + (i as u8 % 8)) as char)
            .collect();
        let _ = cli(env, &shared, &["send", "term", "--text", &word], None);
        std::thread::sleep(Duration::from_millis(50 + rng.below(300)));
    }
}

fn chaos(env: &Env, shared: Shared, stop: Arc<AtomicBool>, seed: u64) {
    let mut rng = Rng(seed);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(2000 + rng.below(6000)));
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let action = rng.below(5);
        let pause = Duration::from_millis(500 + rng.below(2500));
        let session = AGENTS[rng.below(AGENTS.len() as u64) as usize];
        let what: &'static str = match action {
            0 | 1 => {
                let Some(pid) = daemon_pid_if_running(env) else {
                    continue;
                };
                // SAFETY: kill(2) on this test's own daemon; it touches no memory.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                eventually(Duration::from_secs(5), || !pid_alive(pid));
                "kill -9 daemon"
            }
            2 => {
                let Some(pid) = pane_host_pid(env, session) else {
                    continue;
                };
                // SAFETY: kill(2) on this test's own pane host; it touches no memory.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                lock(&shared)
                    .pane_kills
                    .push((session.to_string(), Instant::now()));
                eventually(Duration::from_secs(5), || !pid_alive(pid));
                create_agent(env, &shared, session);
                "kill -9 pane host"
            }
            3 => {
                let Some(pid) = daemon_pid_if_running(env) else {
                    continue;
                };
                // SAFETY: kill(2) on this test's own daemon; it touches no memory.
                unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
                std::thread::sleep(pause);
                // SAFETY: as above.
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
                "SIGSTOP daemon"
            }
            _ => {
                let Some(pid) = pane_host_pid(env, session) else {
                    continue;
                };
                // SAFETY: kill(2) on this test's own pane host; it touches no memory.
                unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
                std::thread::sleep(pause);
                // SAFETY: as above.
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
                "SIGSTOP pane host"
            }
        };
        *lock(&shared).chaos.entry(what).or_default() += 1;
    }
}

fn sample_rss(env: &Env, shared: &Shared) {
    let daemon = daemon_pid_if_running(env).and_then(rss_kib).unwrap_or(0);
    let panes = AGENTS
        .iter()
        .chain(["term"].iter())
        .filter_map(|s| pane_host_pid(env, s).and_then(rss_kib))
        .max()
        .unwrap_or(0);
    let mut rec = lock(shared);
    rec.max_daemon_rss = rec.max_daemon_rss.max(daemon);
    rec.max_pane_rss = rec.max_pane_rss.max(panes);
}

#[test]
#[ignore = "minutes long; .ci/run runs it with --ignored"]
fn soak_chaos_loses_nothing_tears_nothing_and_nothing_hangs() {
    let secs: u64 = std::env::var("BELFRY_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("soak: {secs} s, seed {seed}");
    let env = Env::new();
    let shared: Shared = Arc::default();
    for session in AGENTS {
        create_agent(&env, &shared, session);
        env.wait_screen(session, "READY");
    }
    let attach_loop = format!(
        "while true; do \"{}\" attach a; sleep 0.2; done",
        belfry_bin().display()
    );
    env.ok(&["new", "term", "--", "sh", "-c", &attach_loop]);

    let stop = Arc::new(AtomicBool::new(false));
    let mut rng = Rng(seed);
    let seeds: [u64; 6] = std::array::from_fn(|_| rng.next_u64());
    let env = &env;
    std::thread::scope(|scope| {
        for (index, &seed) in seeds.iter().enumerate().take(3) {
            let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
            scope.spawn(move || guarded_sender(env, shared, stop, index, seed));
        }
        let (sh, st) = (Arc::clone(&shared), Arc::clone(&stop));
        scope.spawn(move || poster(env, sh, st, seeds[3]));
        let (sh, st) = (Arc::clone(&shared), Arc::clone(&stop));
        scope.spawn(move || typist(env, sh, st, seeds[4]));
        let (sh, st) = (Arc::clone(&shared), Arc::clone(&stop));
        scope.spawn(move || chaos(env, sh, st, seeds[5]));
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(secs) {
            sample_rss(env, &shared);
            std::thread::sleep(Duration::from_secs(1));
        }
        stop.store(true, Ordering::SeqCst);
    });

    // Settle: one live daemon, every agent present, nothing left pending.
    for session in AGENTS {
        if pane_host_pid(env, session).is_none_or(|pid| !pid_alive(pid)) {
            create_agent(env, &shared, session);
        }
    }
    env.start_daemon();
    let settled = eventually(Duration::from_secs(60), || {
        AGENTS.iter().all(|session| {
            let Some(out) = cli(env, &shared, &["ding", "status", session, "--json"], None) else {
                return false;
            };
            let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            status["messages"]
                .as_array()
                .is_some_and(|m| m.iter().all(|m| m["state"] != "pending"))
        })
    });
    if !settled {
        // Say what did not settle before the assertion below fails.
        for session in AGENTS {
            let out = env.run(&["ding", "status", session]);
            eprintln!(
                "soak: ding status {session} (exit {:?}):\n{}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = env.run(&["ls"]);
        eprintln!(
            "soak: ls:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::thread::sleep(Duration::from_millis(1500));
    sample_rss(env, &shared);

    let rec = lock(&shared);
    eprintln!(
        "soak: {} winners, {} conflicts, {} unknown, {} posted, chaos {:?}, max RSS daemon {} KiB, pane host {} KiB",
        rec.winners.len(),
        rec.losers.len(),
        rec.unknown.len(),
        rec.posted.len(),
        rec.chaos,
        rec.max_daemon_rss,
        rec.max_pane_rss
    );
    assert!(
        settled,
        "messages still pending a minute after the chaos stopped"
    );
    assert!(
        rec.late.is_empty(),
        "calls missed their deadline: {:?}",
        rec.late
    );
    assert!(
        rec.winners.len() > 100,
        "too few winning sends to mean anything: {}",
        rec.winners.len()
    );
    assert!(rec.posted.len() > 20, "too few posts: {}", rec.posted.len());
    assert!(
        rec.max_daemon_rss < MAX_DAEMON_RSS_KIB,
        "daemon RSS {} KiB",
        rec.max_daemon_rss
    );
    assert!(
        rec.max_pane_rss < MAX_PANE_HOST_RSS_KIB,
        "pane host RSS {} KiB",
        rec.max_pane_rss
    );

    // No transaction torn or duplicated.
    let logs: BTreeMap<&str, String> = AGENTS
        .iter()
        .map(|s| {
            (
                *s,
                String::from_utf8_lossy(&read_or_empty(&log_path(env, s))).into_owned(),
            )
        })
        .collect();
    let mut lost_with_their_pane = Vec::new();
    for won in &rec.winners {
        let (session, payload) = (&won.session, &won.payload);
        let log = &logs[session.as_str()];
        let n = log.matches(payload.as_str()).count();
        if n == 0 {
            match unread_when_its_pane_was_killed(won, &rec, log) {
                Ok(after) => {
                    lost_with_their_pane.push(after);
                    continue;
                }
                Err(why) => {
                    panic!("winning payload {payload} stands 0 times in {session}'s input: {why}")
                }
            }
        }
        assert_eq!(
            n, 1,
            "winning payload {payload} stands {n} times in {session}'s input"
        );
    }
    eprintln!(
        "soak: {} winning sends unread when their pane host was killed (killed {:?} after the reply)",
        lost_with_their_pane.len(),
        lost_with_their_pane
    );
    for (session, payload) in &rec.losers {
        assert!(
            !logs[session.as_str()].contains(payload.as_str()),
            "conflict wrote {payload}"
        );
    }
    for (session, payload) in &rec.unknown {
        let n = logs[session.as_str()].matches(payload.as_str()).count();
        assert!(
            n <= 1,
            "payload {payload} with a lost reply stands {n} times"
        );
    }
    for (session, log) in &logs {
        let starts = log.matches("<G").count();
        let whole = rec
            .winners
            .iter()
            .map(|w| (&w.session, &w.payload))
            .chain(rec.unknown.iter().map(|(s, p)| (s, p)))
            .filter(|(s, p)| *s == session && log.contains(p.as_str()))
            .count();
        assert_eq!(
            starts, whole,
            "{session}: a guarded payload was torn or interleaved"
        );
        let notices = log.matches("[DING]").count();
        let whole_notices = log.matches("; check your inbox").count();
        assert_eq!(notices, whole_notices, "{session}: a notice was torn");
    }

    // Every message announced whole (its notice and then its Enter) at most once to each
    // program, and nothing of it after that in the same program; the rest shown with a state.
    // A notice is owed to a program, not to a pane name (INVARIANT 195): one whose pane host
    // was killed before its send's end was learned, or that was cut off between paste and
    // Enter, is told again to the next program of the pane, which never saw it.
    let mut announced: BTreeMap<String, usize> = BTreeMap::new();
    let mut announced_whole: BTreeMap<String, usize> = BTreeMap::new();
    let mut after_whole = Vec::new();
    let mut programs = 0;
    for log in logs.values() {
        for program in log.split("\x1erecorder-start\x1e") {
            programs += 1;
            let mut whole_here: BTreeMap<String, usize> = BTreeMap::new();
            for notice in program.split("[DING] ").skip(1) {
                let submitted = notice
                    .split_once("; check your inbox")
                    .is_some_and(|(_, after)| after.starts_with('\r'));
                let text = notice.split("; check your inbox").next().unwrap_or("");
                for part in text.split("[id:").skip(1) {
                    let id: String = part.chars().take(6).collect();
                    if whole_here.contains_key(&id) {
                        after_whole.push(id.clone());
                    }
                    *announced.entry(id.clone()).or_default() += 1;
                    if submitted {
                        *whole_here.entry(id.clone()).or_default() += 1;
                        *announced_whole.entry(id).or_default() += 1;
                    }
                }
            }
        }
    }
    assert!(
        after_whole.is_empty(),
        "announced to one program again after a whole announcement: {after_whole:?}"
    );
    eprintln!(
        "soak: {} programs; {} messages announced whole to more than one of them",
        programs,
        announced_whole.values().filter(|&&n| n > 1).count()
    );
    eprintln!(
        "soak: {} notices cut off by a kill between paste and Enter",
        announced
            .iter()
            .filter(|(id, &n)| n > announced_whole.get(*id).copied().unwrap_or(0))
            .count()
    );
    // Messages a recovery notice counted without naming them ("and N more", "N not listed").
    let counted_unnamed: usize = logs
        .values()
        .flat_map(|log| {
            log.split("[DING] ").skip(1).filter_map(|notice| {
                let notice = notice.split("; check your inbox").next()?;
                let words: Vec<&str> = notice.split_whitespace().collect();
                words.windows(2).find_map(|w| match w {
                    ["and", n] | [n, "not"] => n.parse::<usize>().ok(),
                    _ => None,
                })
            })
        })
        .sum();
    let pane_kills = rec.chaos.get("kill -9 pane host").copied().unwrap_or(0);
    let mut staged_unnamed = 0;
    for session in AGENTS {
        let out = env.ok(&["ding", "status", session, "--json"]);
        let status: Value = serde_json::from_str(&out).expect("ding status --json");
        let states: BTreeMap<String, String> = status["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .map(|m| {
                        (
                            m["name"].as_str().unwrap_or("").to_string(),
                            m["state"].to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (s, name) in rec.posted.iter().filter(|(s, _)| s == session) {
            assert!(
                env.state()
                    .join("inbox")
                    .join(s)
                    .join("new")
                    .join(name)
                    .exists(),
                "message {name} lost"
            );
            assert!(
                states.contains_key(name),
                "message {name} missing from ding status: {out}"
            );
            let id = name
                .trim_end_matches(".md")
                .rsplit('-')
                .next()
                .unwrap_or("");
            if states[name] == "\"staged\"" && !announced.contains_key(id) {
                staged_unnamed += 1;
            }
        }
    }
    // A staged notice that never reached the program, and is not counted by a recovery
    // notice, is one whose fate only a pane host that has since died could tell: the worker
    // that sent it ended (its daemon was killed, or its pane host) with that transaction
    // unresolved, and the pane host died before any daemon could ask. A worker has at most one
    // notice transaction outstanding, so each worker lifetime leaves at most one: at most one
    // per pane-host kill and one per agent per daemon kill. Anything beyond that was stranded
    // (staged, never written, never announced again), the bug this check exists for.
    let daemon_kills = rec.chaos.get("kill -9 daemon").copied().unwrap_or(0);
    let bound = counted_unnamed + pane_kills + AGENTS.len() * daemon_kills;
    eprintln!(
        "soak: {staged_unnamed} staged messages not named in any notice (at most {bound}: \
         {counted_unnamed} counted unnamed by recovery notices, {pane_kills} pane host kills, \
         {daemon_kills} daemon kills)"
    );
    assert!(
        staged_unnamed <= bound,
        "{staged_unnamed} staged notices were never written (stranded); at most {bound} can be explained"
    );

    // Nothing spins once the load stops.
    let pids: Vec<(String, u32)> = AGENTS
        .iter()
        .chain(["term"].iter())
        .filter_map(|s| pane_host_pid(env, s).map(|p| (format!("pane host {s}"), p)))
        .chain(daemon_pid_if_running(env).map(|p| ("daemon".to_string(), p)))
        .collect();
    let before: Vec<Option<u64>> = pids.iter().map(|(_, p)| cpu_ticks(*p)).collect();
    let window = Duration::from_secs(3);
    std::thread::sleep(window);
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    for ((what, pid), before) in pids.iter().zip(before) {
        if let (Some(a), Some(b)) = (before, cpu_ticks(*pid)) {
            let percent = (b - a) as f64 / hz / window.as_secs_f64() * 100.0;
            assert!(
                percent < MAX_IDLE_CPU_PERCENT,
                "{what} ({pid}) uses {percent:.1}% of a core at idle"
            );
        }
    }
}

/// The rule above, on made-up records: it excuses only the unread tail of a killed pane.
#[test]
fn a_missing_winner_is_excused_only_as_the_unread_tail_of_a_killed_pane() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let won = |payload: &str, incarnation: &str, sent: u64| Won {
        session: "b".into(),
        payload: payload.into(),
        incarnation: incarnation.into(),
        sent_at: ms(sent),
        replied_at: ms(sent + 2),
    };
    let mut rec = Record {
        winners: vec![
            won("<W1>", "i1", 10),
            won("<W2>", "i1", 20),
            won("<W3>", "i2", 40),
        ],
        ..Record::default()
    };
    // No kill at all: a lost write.
    assert!(unread_when_its_pane_was_killed(&rec.winners[1], &rec, "<W1>").is_err());
    // A kill of the other agent's pane host does not count.
    rec.pane_kills.push(("a".into(), ms(23)));
    assert!(unread_when_its_pane_was_killed(&rec.winners[1], &rec, "<W1>").is_err());
    // Killed 1 ms after the reply, nothing later read: excused.
    rec.pane_kills.push(("b".into(), ms(23)));
    assert_eq!(
        unread_when_its_pane_was_killed(&rec.winners[1], &rec, "<W1><W3>"),
        Ok(Duration::from_millis(1))
    );
    // W1 is missing but W2, sent into the same incarnation after it, was read: not excused.
    assert!(unread_when_its_pane_was_killed(&rec.winners[0], &rec, "<W2>").is_err());
    // A kill long after the reply does not excuse W3.
    rec.pane_kills.push(("b".into(), ms(42 + 3000)));
    assert!(unread_when_its_pane_was_killed(&rec.winners[2], &rec, "<W1><W2>").is_err());
}
