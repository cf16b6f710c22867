//! spec §7.4 and §12: an adapter is a program we do not control. One that prints without a
//! newline must not grow the daemon without bound: its line is capped at the protocol's 1 MiB,
//! held as `malformed`, and the adapter is killed and restarted with backoff.

use std::time::Duration;

use belfry_tests::{epoch_secs, eventually, read_or_empty, recorder_bin, Env};
use serde_json::Value;

/// A python3 adapter that records its pid and start time (wall clock, as the daemon's log
/// stamps its lines) in a marker file, then prints `total_mib` MiB without a newline, then
/// sleeps. The total is finite so that, without the cap, the test fails by growth instead of
/// exhausting the machine.
const FLOOD: &str = "import os, sys, time; \
    marker = open(sys.argv[1], 'a'); \
    marker.write('%d %f\\n' % (os.getpid(), time.time())); \
    marker.close(); \
    [sys.stdout.buffer.write(b'x' * (1 << 20)) or sys.stdout.buffer.flush() \
     for _ in range(int(sys.argv[2]))]; \
    time.sleep(600)";

fn rss_kib(pid: u32) -> u64 {
    belfry_tests::status_kb(pid, "VmRSS").expect("VmRSS in /proc/PID/status")
}

/// The daemon's "starting it again in N ms" lines: when each was logged (seconds since the
/// epoch) and the pause it names.
fn restart_lines(log: &std::path::Path) -> Vec<(f64, u64)> {
    String::from_utf8_lossy(&read_or_empty(log))
        .lines()
        .filter(|line| line.contains("starting it again in"))
        .filter_map(|line| {
            let at = epoch_secs(line.split_whitespace().next()?)?;
            let ms = line.split("starting it again in ").nth(1)?;
            Some((at, ms.split(' ').next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_log_stamp_reads_as_epoch_seconds() {
    assert_eq!(epoch_secs("1970-01-01T00:00:01.500000Z"), Some(1.5));
    assert_eq!(epoch_secs("2000-03-01T00:00:00Z"), Some(951_868_800.0));
    assert_eq!(
        epoch_secs("2026-12-01T21:39:26.000000Z"),
        Some(1_796_161_166.0)
    );
}

fn starts(marker: &std::path::Path) -> Vec<(u32, f64)> {
    String::from_utf8_lossy(&read_or_empty(marker))
        .lines()
        .filter_map(|line| {
            let (pid, at) = line.split_once(' ')?;
            Some((pid.parse().ok()?, at.parse().ok()?))
        })
        .collect()
}

#[test]
fn an_adapter_line_without_a_newline_is_capped_held_as_malformed_and_restarted_with_backoff() {
    let env = Env::new();
    let marker = env.path("adapter-starts");
    let log = env.path("pane.log");
    let (rec, log_s, marker_s) = (
        recorder_bin().display().to_string(),
        log.display().to_string(),
        marker.display().to_string(),
    );
    // The daemon exists before the pane, so its resident size can be measured before any
    // adapter output.
    env.start_daemon();
    let daemon = env.daemon_pid();
    let before = rss_kib(daemon);
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "turn-boundary+fresh-idle",
        "--ding-adapter",
        "python3",
        "--ding-adapter=-c",
        "--ding-adapter",
        FLOOD,
        "--ding-adapter",
        &marker_s,
        "--ding-adapter",
        "160",
        "--",
        &rec,
        "--log",
        &log_s,
    ]);
    env.wait_screen("agent", "READY");
    let body = env.path("body.md");
    std::fs::write(&body, "hello\n").unwrap();
    env.ok(&[
        "inbox",
        "post",
        "agent",
        "--subject",
        "held",
        &body.display().to_string(),
    ]);

    let status = || -> Value {
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).unwrap()
    };
    assert!(
        eventually(Duration::from_secs(10), || {
            let status = status();
            status["messages"][0]["state"] == "held:malformed"
                && status["last_event"]["kind"] == "rejected"
        }),
        "{}",
        status()
    );

    // Restarted, each time a new process, with growing pauses (100 ms doubling).
    assert!(
        eventually(Duration::from_secs(15), || starts(&marker).len() >= 4),
        "adapter starts: {:?}",
        starts(&marker)
    );
    let seen = starts(&marker);
    let mut pids: Vec<u32> = seen.iter().map(|(pid, _)| *pid).collect();
    pids.dedup();
    assert_eq!(pids.len(), seen.len(), "every start is a new process");
    // The pauses the daemon chose double, and each next start came no sooner than its pause
    // after the daemon ended the adapter. (The time between two starts is mostly the time the
    // flood takes to cross the cap, which load stretches by seconds; only a lower bound on the
    // pause itself is independent of load.)
    let restarts = restart_lines(&env.path("xdg-state").join("belfry/log/daemon.log"));
    assert!(restarts.len() >= 3, "daemon log restarts: {restarts:?}");
    let pauses: Vec<u64> = restarts.iter().map(|(_, ms)| *ms).collect();
    assert!(
        pauses.windows(2).take(2).all(|w| w[1] > w[0]) && pauses[0] >= 100,
        "the restart backoff must grow from 100 ms: {pauses:?}"
    );
    for (index, (ended_at, ms)) in restarts.iter().take(3).enumerate() {
        let next_start = seen[index + 1].1;
        assert!(
            next_start - ended_at >= *ms as f64 / 1000.0 - 0.002,
            "restart {} came {:.3} s after the adapter ended, before its {ms} ms pause \
             (starts {seen:?}, restarts {restarts:?})",
            index + 1,
            next_start - ended_at
        );
    }

    let grown_mib = rss_kib(daemon).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 100,
        "the daemon grew by {grown_mib} MiB reading an adapter's over-long lines"
    );
    let status = status();
    assert_eq!(status["counters"]["sends"], 0, "{status}");
    assert_eq!(read_or_empty(&log), b"", "a held pane got bytes");
    let text = env.ok(&["ding", "status", "agent"]);
    assert!(
        text.contains("held as malformed") || text.contains("held:malformed"),
        "{text}"
    );
}
