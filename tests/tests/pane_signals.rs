//! A pane's program starts with every signal at its default action and none blocked, whatever
//! the process that started belfry ignored or blocked. A signal ignored before an exec stays
//! ignored after it, so a daemon started under `nohup` (SIGHUP ignored) used to hand that on
//! through its pane hosts to every program: the hang-up that ends a pane did not end them, and
//! each `kill` waited out the grace period before its SIGKILL. The DING adapters the daemon
//! starts get the same start.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use belfry_tests::{eventually, pid_alive, Env};
use serde_json::{json, Value};

/// The mask on the line of `lines` that starts `field:` (a `Sig…` line of /proc/PID/status,
/// as the file holds it or as a pane shows it).
fn mask_in<'a>(mut lines: impl Iterator<Item = &'a str>, field: &str) -> Option<u64> {
    let hex = lines.find_map(|line| line.strip_prefix(&format!("{field}:")))?;
    Some(u64::from_str_radix(hex.trim(), 16).expect("hex mask"))
}

/// The `Sig…` line of `/proc/PID/status` named `field`, as a mask.
fn signal_mask(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    mask_in(status.lines(), field).unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn bit(signal: libc::c_int) -> u64 {
    1 << (signal - 1)
}

/// Makes `cmd` start ignoring SIGHUP, SIGINT, SIGTERM and SIGUSR1 and blocking SIGUSR2 and
/// `also_blocked`, as a process started under `nohup`, or by a parent that ignores or blocks
/// them, would.
fn ignoring_and_blocking(cmd: &mut std::process::Command, also_blocked: Option<libc::c_int>) {
    // SAFETY: the closure runs in the child between fork and exec and calls only signal(2)
    // and sigprocmask(2), async-signal-safe, on locals; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGUSR1] {
                libc::signal(signal, libc::SIG_IGN);
            }
            let mut blocked: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut blocked);
            libc::sigaddset(&mut blocked, libc::SIGUSR2);
            if let Some(signal) = also_blocked {
                libc::sigaddset(&mut blocked, signal);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// Runs `belfry ARGS` (a `new`) started ignoring and blocking as [`ignoring_and_blocking`]
/// says, and returns the pid of the daemon it started on demand, which inherited that: SIGHUP
/// is asserted ignored in it, so whatever the daemon starts had it all to inherit.
fn new_ignoring(env: &Env, args: &[&str], also_blocked: Option<libc::c_int>) -> u32 {
    let mut new = env.cmd(args);
    ignoring_and_blocking(&mut new, also_blocked);
    let out = new.output().expect("run belfry new");
    assert!(
        out.status.success(),
        "belfry new: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let daemon = env.daemon_pid();
    assert_ne!(
        signal_mask(daemon, "SigIgn") & bit(libc::SIGHUP),
        0,
        "the daemon was to start with SIGHUP ignored"
    );
    daemon
}

#[test]
fn a_panes_program_gets_default_signals_though_belfry_was_started_ignoring_them() {
    let env = Env::new();
    new_ignoring(
        &env,
        &[
            "new",
            "sig",
            "--size",
            "24x80",
            "--json",
            "--",
            "sh",
            "-c",
            "grep -E '^Sig(Ign|Blk)' /proc/self/status; exec sleep 100000",
        ],
        None,
    );

    // The daemon `new` started on demand inherited what the command ignored (asserted by
    // `new_ignoring`), as the pane host did: the program below had all of it to inherit.
    let host = env.pane_host_pid("sig");
    assert_ne!(signal_mask(host, "SigIgn") & bit(libc::SIGHUP), 0);

    // The program saw every signal at its default action and none blocked.
    env.wait_screen("sig", r"SigIgn:\s+[0-9a-f]+");
    let lines = env.snapshot("sig")["lines"].clone();
    let mask = |field: &str| {
        let shown = lines
            .as_array()
            .expect("lines")
            .iter()
            .filter_map(Value::as_str);
        mask_in(shown, field).unwrap_or_else(|| panic!("no {field} on the screen: {lines}"))
    };
    assert_eq!(mask("SigIgn"), 0, "signals the pane's program ignored");
    assert_eq!(mask("SigBlk"), 0, "signals the pane's program blocked");

    // And a hang-up ends it, by that signal.
    let mut conn = env.conn();
    let info = conn.request(json!({"op":"info","session":"sig"}));
    let child = info["child_pid"].as_u64().expect("child_pid") as i32;
    assert_eq!(
        signal_mask(child as u32, "SigIgn"),
        0,
        "sleep's dispositions"
    );
    // SAFETY: kill(2) with a pid read from the pane host and a valid signal number.
    assert_eq!(unsafe { libc::kill(child, libc::SIGHUP) }, 0);
    let mut last = json!(null);
    let ended = eventually(Duration::from_secs(5), || {
        last = conn.request(json!({"op":"info","session":"sig"}));
        last["exited"]["signal"] == libc::SIGHUP
    });
    assert!(ended, "SIGHUP did not end the pane's program: {last}");
}

/// The same for a DING adapter the daemon starts: it gets every signal at its default action
/// and none blocked (before, it inherited the signals the daemon was started ignoring: SigIgn
/// 0x80000203 here), and it still ends when the daemon is killed (its death signal, SIGTERM),
/// though the daemon was started with SIGTERM blocked.
#[test]
fn an_adapter_gets_default_signals_and_ends_with_a_daemon_started_ignoring_them() {
    let env = Env::new();
    let seen = env.path("adapter-signals");
    let script = format!(
        "grep -E '^Sig(Ign|Blk)' /proc/self/status > {0}.tmp; echo \"Pid: $$\" >> {0}.tmp; \
         mv {0}.tmp {0}; exec sleep 100000",
        seen.display()
    );
    let adapter_script = format!("--ding-adapter={script}");
    let daemon = new_ignoring(
        &env,
        &[
            "new",
            "ad",
            "--ding-delivery",
            "turn-boundary+fresh-idle",
            "--ding-adapter",
            "sh",
            "--ding-adapter=-c",
            &adapter_script,
            "--",
            "sleep",
            "100000",
        ],
        Some(libc::SIGTERM),
    );
    // The daemon inherited what `new` ignored (asserted by `new_ignoring`), so its adapters had
    // it to inherit; what `new` blocked the daemon unblocks for itself (the test below).
    assert!(
        eventually(Duration::from_secs(10), || seen.exists()),
        "the adapter never started"
    );
    let report = std::fs::read_to_string(&seen).expect("the adapter's report");
    assert_eq!(mask_in(report.lines(), "SigIgn"), Some(0), "{report}");
    assert_eq!(mask_in(report.lines(), "SigBlk"), Some(0), "{report}");
    let adapter: u32 = report
        .lines()
        .find_map(|line| line.strip_prefix("Pid: "))
        .and_then(|pid| pid.trim().parse().ok())
        .expect("the adapter's pid");
    assert!(pid_alive(adapter));

    // SAFETY: kill(2) on this test's own daemon.
    unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    assert!(
        eventually(Duration::from_secs(10), || !pid_alive(adapter)),
        "the adapter {adapter} outlived the daemon"
    );
    env.start_daemon();
    env.shutdown();
}

/// A daemon and a pane host started by a `belfry` that had SIGTERM (and SIGUSR2) blocked
/// unblock every signal as they start, so each still ends on SIGTERM, its shutdown signal:
/// before, both kept the block (the daemon's SigBlk held SIGTERM, and its pane hosts inherited
/// it) and a `kill` of either stayed pending.
#[test]
fn a_daemon_and_a_pane_host_started_with_sigterm_blocked_still_end_on_sigterm() {
    let env = Env::new();
    let daemon = new_ignoring(
        &env,
        &["new", "held", "--", "sleep", "100000"],
        Some(libc::SIGTERM),
    );
    let host = env.pane_host_pid("held");
    for (what, pid) in [("daemon", daemon), ("pane host", host)] {
        assert_eq!(
            signal_mask(pid, "SigBlk"),
            0,
            "the {what}'s blocked signals"
        );
    }
    let child = env.snapshot("held")["child_pid"]
        .as_u64()
        .expect("the snapshot has the program's pid") as u32;

    // SAFETY: kill(2) on this test's own pane host.
    unsafe { libc::kill(host as i32, libc::SIGTERM) };
    assert!(
        eventually(Duration::from_secs(10), || !pid_alive(host)),
        "the pane host {host} outlived its SIGTERM"
    );
    assert!(
        eventually(Duration::from_secs(10), || !pid_alive(child)),
        "the pane's program {child} outlived its pane host"
    );
    // SAFETY: kill(2) on this test's own daemon.
    unsafe { libc::kill(daemon as i32, libc::SIGTERM) };
    assert!(
        eventually(Duration::from_secs(10), || !pid_alive(daemon)),
        "the daemon {daemon} outlived its SIGTERM"
    );
}
