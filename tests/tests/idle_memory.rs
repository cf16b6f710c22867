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
