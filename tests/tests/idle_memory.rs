//! An idle pane host lets go of its program's pages: once its pane has been quiet for a moment
//! after output, the executable's pages it mapped while busy are no longer counted in its
//! resident size (they stay in the page cache, shared), and the pane goes on working.

use std::time::{Duration, Instant};

use belfry_tests::{eventually, Env};

/// A `kB` field of `/proc/PID/status`.
fn status_kb(pid: u32, field: &str) -> u64 {
    belfry_tests::status_kb(pid, field)
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[test]
fn a_quiet_pane_host_lets_go_of_the_program_pages_it_mapped_while_busy() {
    let env = Env::new();
    // Once told to, prints without pause for two seconds, then nothing.
    env.spawn(
        "busy",
        "24x80",
        &[
            "sh",
            "-c",
            "echo READY; read -r _; timeout 2 sh -c 'while :; do echo a line of output; done'; \
             echo QUIET; exec cat",
        ],
        Some("READY"),
    );
    let host = env.pane_host_pid("busy");
    env.ok(&["send", "busy", "--key", "Enter"]);
    let start = Instant::now();
    // While it prints: the most of the program it has mapped, sampled to the end of the
    // burst (each sample after output the pane host has just read).
    let mut busy = 0;
    while start.elapsed() < Duration::from_millis(1700) {
        busy = busy.max(status_kb(host, "RssFile"));
        std::thread::sleep(Duration::from_millis(50));
    }
    env.wait_screen("busy", "QUIET");
    // Quiet: within a few seconds the pane host holds less of its program than while busy.
    let mut quiet = 0;
    let released = eventually(Duration::from_secs(10), || {
        quiet = status_kb(host, "RssFile");
        quiet < busy
    });
    assert!(
        released,
        "RssFile {quiet} kB quiet, {busy} kB at most while busy"
    );
    // And works as before: the screen, a send and its echo.
    let screen = env.ok(&["peek", "busy"]);
    assert!(screen.contains("QUIET"), "{screen}");
    env.ok(&[
        "send",
        "busy",
        "--text",
        "after the release",
        "--key",
        "Enter",
    ]);
    env.wait_screen("busy", "after the release");
}

/// What an idle pane host keeps mapped of its program does not depend on whether its pane
/// printed: a pane host that printed a line, and one that printed 2000 (its screen model's
/// spare rows freed when the pane went quiet), hold no more of it once quiet than one whose
/// program printed nothing, within a quarter (what the pane host runs after letting go, on its
/// way back to waiting: 5–17 % in the debug build). Freeing the spare rows ran code after the
/// program's pages were let go of, in about half of the pane hosts, which then kept ~0.6 MiB
/// more mapped for as long as they stayed idle (1.52 and 1.35 MiB against 0.90 in the release
/// build; 36–45 % more in the debug build).
#[test]
fn a_quiet_pane_host_keeps_as_little_of_the_program_after_output_as_without() {
    let env = Env::new();
    env.spawn("silent", "24x80", &["sleep", "1000000"], None);
    env.spawn(
        "line",
        "24x80",
        &["sh", "-c", "sleep 0.5; echo one line; exec sleep 1000000"],
        None,
    );
    env.spawn(
        "lines",
        "24x80",
        &["sh", "-c", "sleep 0.5; seq 2000; exec sleep 1000000"],
        None,
    );
    env.wait_screen("line", "one line");
    env.wait_screen("lines", "2000");
    let hosts: Vec<(&str, u32)> = ["silent", "line", "lines"]
        .iter()
        .map(|name| (*name, env.pane_host_pid(name)))
        .collect();
    // Quiet for well over the moment after which an idle pane host lets go of memory.
    std::thread::sleep(Duration::from_secs(2));
    let held: Vec<(&str, u64)> = hosts
        .iter()
        .map(|(name, pid)| (*name, status_kb(*pid, "RssFile")))
        .collect();
    let silent = held[0].1;
    for (name, kb) in &held[1..] {
        assert!(
            *kb <= silent + silent / 4,
            "pane {name}'s host keeps {kb} kB of the program mapped while quiet, one that \
             printed nothing {silent} kB: {held:?}"
        );
    }
}
