//! spec §7.4, §10: an adapter sidecar's own children end with it — when its pane is killed,
//! and when the daemon is killed outright (the next daemon ends what the adapter left).
//! Real daemon, real pane, a real adapter (`sh`) that starts a real grandchild (`sleep`).

use std::time::Duration;

use belfry_tests::{eventually, pid_alive, Env};

const RICH: &str = "turn-boundary+fresh-idle";

/// Starts pane `name` whose adapter starts a `sleep` in the background, writes its pid and
/// then stays (as `sleep` too); returns the grandchild's pid.
fn pane_with_adapter_grandchild(env: &Env, name: &str) -> u32 {
    let pid_file = env.path(&format!("{name}-grandchild.pid"));
    let script = env.path(&format!("{name}-adapter.sh"));
    std::fs::write(
        &script,
        format!(
            "sleep 600 & echo $! > {}.tmp && mv {0}.tmp {0}\nexec sleep 600\n",
            pid_file.display()
        ),
    )
    .unwrap();
    let script = script.display().to_string();
    env.ok(&[
        "new",
        name,
        "--ding-delivery",
        RICH,
        "--ding-adapter",
        "sh",
        "--ding-adapter",
        &script,
        "--",
        "sleep",
        "600",
    ]);
    assert!(
        eventually(Duration::from_secs(10), || pid_file.exists()),
        "the adapter never started its child"
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid_alive(pid), "the adapter's child is not running");
    pid
}

#[test]
fn adapter_grandchild_is_gone_after_the_pane_is_killed() {
    let env = Env::new();
    let grandchild = pane_with_adapter_grandchild(&env, "grouped");
    env.ok(&["kill", "grouped"]);
    assert!(
        eventually(Duration::from_secs(5), || !pid_alive(grandchild)),
        "the adapter's child {grandchild} outlived the pane"
    );
}

#[test]
fn adapter_grandchild_is_gone_after_the_daemon_is_killed_and_the_next_one_starts() {
    let env = Env::new();
    let grandchild = pane_with_adapter_grandchild(&env, "orphaned");
    let daemon = env.daemon_pid();
    // SAFETY: kill(2) on the test's own daemon; it touches no memory.
    unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(5), || !pid_alive(daemon)));
    // The next daemon (started by this command) ends the group before it adopts the pane.
    env.start_daemon();
    assert!(
        eventually(Duration::from_secs(5), || !pid_alive(grandchild)),
        "the adapter's child {grandchild} outlived the killed daemon and its successor"
    );
    // The adopted pane's adapter runs again, as a new group with a new child.
    let pid_file = env.path("orphaned-grandchild.pid");
    assert!(
        eventually(Duration::from_secs(10), || {
            std::fs::read_to_string(&pid_file).is_ok_and(|pid| pid.trim() != grandchild.to_string())
        }),
        "the adopted pane's adapter was not restarted"
    );
}
