//! A pane's program starts with every signal at its default action and none blocked, whatever
//! the process that started belfry ignored or blocked. A signal ignored before an exec stays
//! ignored after it, so a daemon started under `nohup` (SIGHUP ignored) used to hand that on
//! through its pane hosts to every program: the hang-up that ends a pane did not end them, and
//! each `kill` waited out the grace period before its SIGKILL.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use belfry_tests::{eventually, Env};
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

#[test]
fn a_panes_program_gets_default_signals_though_belfry_was_started_ignoring_them() {
    let env = Env::new();
    let mut new = env.cmd(&[
        "new",
        "sig",
        "--size",
        "24x80",
        "--json",
        "--",
        "sh",
        "-c",
        "grep -E '^Sig(Ign|Blk)' /proc/self/status; exec sleep 100000",
    ]);
    // SAFETY: the closure runs in the child between fork and exec and calls only signal(2)
    // and sigprocmask(2), async-signal-safe, on locals; it allocates nothing.
    unsafe {
        new.pre_exec(|| {
            for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGUSR1] {
                libc::signal(signal, libc::SIG_IGN);
            }
            let mut blocked: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut blocked);
            libc::sigaddset(&mut blocked, libc::SIGUSR2);
            libc::sigprocmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
            Ok(())
        });
    }
    let out = new.output().expect("run belfry new");
    assert!(
        out.status.success(),
        "belfry new: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The daemon `new` started on demand inherited what the command ignored, as the pane host
    // did: the program below had all of it to inherit.
    let daemon = env.daemon_pid();
    assert_ne!(
        signal_mask(daemon, "SigIgn") & bit(libc::SIGHUP),
        0,
        "the daemon was to start with SIGHUP ignored"
    );
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
