//! `belfry run` and `belfry new` as the README writes them, with the real binary and daemon:
//! `belfry run NAME` alone starts the user's shell (or attaches when NAME exists), a command
//! given for an existing pane is said not to run, a program given without `--` gets a tip that
//! says where it goes, and every usage line says `belfry`, whichever executable prints it.

use std::time::Duration;

use belfry_tests::{belfry_bin, copy_executable, eventually, Env};
use serde_json::Value;

fn pane_argv(env: &Env, name: &str) -> Option<Value> {
    let listing: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).ok()?;
    listing
        .as_array()?
        .iter()
        .find(|pane| pane["session"] == name)
        .map(|pane| pane["argv"].clone())
}

#[test]
fn belfry_run_with_no_command_starts_the_users_shell_and_attaches() {
    let env = Env::with_vars(&[("SHELL", "/bin/sh")]);
    // `belfry run` attaches, so it gets a terminal: an outer pane running the line as written.
    env.spawn(
        "outer",
        "24x80",
        &["sh", "-c", "belfry run agent; sleep 600"],
        None,
    );
    assert!(
        eventually(Duration::from_secs(15), || pane_argv(&env, "agent")
            .is_some()),
        "`belfry run agent` started no pane: {:?}",
        env.lines("outer")
    );
    assert_eq!(
        pane_argv(&env, "agent"),
        Some(serde_json::json!(["/bin/sh"]))
    );
    // Attached: what the agent's shell prints reaches the outer terminal.
    env.ok(&[
        "send",
        "agent",
        "--text",
        "echo attached-$((6*7))",
        "--key",
        "Enter",
    ]);
    env.wait_screen("outer", "attached-42");
    env.ok(&["shutdown", "--kill-panes"]);
}

#[test]
fn belfry_run_of_a_pane_that_exists_says_the_command_given_was_not_run() {
    let env = Env::new();
    env.spawn("agent", "24x80", &["sh"], None);
    env.spawn(
        "outer",
        "24x80",
        &["sh", "-c", "belfry run agent -- sleep 99; sleep 600"],
        None,
    );
    env.wait_screen("outer", "the command given was not run");
    assert_eq!(pane_argv(&env, "agent"), Some(serde_json::json!(["sh"])));
    env.ok(&["shutdown", "--kill-panes"]);
}

#[test]
fn a_program_given_without_the_double_dash_gets_a_tip_saying_where_it_goes() {
    let env = Env::new();
    let out = env.run(&["new", "worker", "--size", "30x100", "sh", "-c", "echo hi"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "tip: the program goes after `--`: belfry new worker --size 30x100 -- sh -c 'echo hi'"
        ),
        "{stderr}"
    );
    let out = env.run(&["new", "worker"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`belfry new worker` needs the program to run, after `--`"),
        "{stderr}"
    );
    assert!(!env.socket().exists(), "a refused line started a daemon");
}

#[test]
fn usage_lines_say_belfry_when_the_host_build_prints_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = dir.path().join("belfry-host");
    copy_executable(&belfry_bin(), &host);
    let out = std::process::Command::new(&host)
        .args(["run", "--help"])
        .output()
        .expect("belfry-host run --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Usage: belfry run "), "{help}");
    assert!(!help.contains("belfry-host"), "{help}");
}
