//! The pane host puts the directory of its own executable first on the `PATH` of the program it
//! starts, so a program inside a pane runs `belfry …` by name and reaches the same `belfry`
//! that started the pane, even when the user's `PATH` has no belfry on it at all.

use belfry_tests::{bin_dir, Env};

/// A `PATH` with the system's programs and no belfry: what a user who never installed it has.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

#[test]
fn a_panes_program_runs_belfry_by_name_without_it_on_the_users_path() {
    let env = Env::new();
    let script = "belfry --version; belfry inbox ls >/dev/null && echo INBOX-LS=ok; \
                  echo \"FIRST=${PATH%%:*}\"; sleep 600";
    let out = env
        .cmd(&["new", "agent", "--", "sh", "-c", script])
        .env("PATH", SYSTEM_PATH)
        .output()
        .expect("run belfry new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // FIRST= is the script's last line: once it shows, everything before it has.
    env.wait_screen("agent", "FIRST=/");
    let screen = env.lines("agent").join("\n");
    assert!(screen.contains("INBOX-LS=ok"), "{screen}");
    let version = format!("belfry {}", env!("CARGO_PKG_VERSION"));
    assert!(screen.contains(&version), "{screen}");
    // The pane host's own directory, as the kernel names it (symbolic links resolved).
    let bin_dir = bin_dir().canonicalize().expect("the binaries' directory");
    let first = format!("FIRST={}", bin_dir.display());
    assert!(screen.contains(&first), "{screen}");
    env.shutdown();
}
