//! The README's quick start, followed as a new user would in a fresh `HOME`: its commands are
//! read from the README's first `sh` block under "## Quick start" and run as written, so the
//! README and this test cannot drift apart. Afterwards `belfry` is on the `PATH` the install
//! script asked for, and inside the pane the quick start opened `belfry inbox ls` and
//! `belfry inbox read` work by name.
//!
//! Two things differ from a person at a terminal, both said where they happen: the install
//! script is given `--debug` and the workspace's target directory (cargo's unoptimized
//! profile, which reuses the test build instead of an optimized build of the whole
//! workspace), and `belfry run`, which attaches, runs inside an outer pane, which gives it
//! the terminal it needs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use belfry_tests::{eventually, Env};
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lines of the first `sh` code block after the README's "## Quick start" heading.
fn quick_start_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let section = readme
        .split_once("## Quick start")
        .map(|(_, rest)| rest)
        .expect("a Quick start section");
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("an sh block in the Quick start");
    block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// A user's shell: a fresh `HOME`, the test environment's belfry directories, and `path`.
fn shell(env: &Env, home: &Path, path: &str, line: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(line).current_dir(repo_root());
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    cmd.env_remove("BELFRY_BIN")
        .env_remove("BELFRY_SOCKET")
        .env_remove("BELFRY_SESSION")
        .env("HOME", home)
        .env("SHELL", "/bin/sh")
        .env("PATH", path);
    cmd
}

fn succeeded(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_readme_quick_start_installs_belfry_on_path_and_works_inside_its_pane() {
    let env = Env::new();
    let home = env.path("home");
    let prefix = env.path("prefix");
    std::fs::create_dir_all(&home).expect("a fresh HOME");
    let real_home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let commands = quick_start_commands();
    let [install, run] = commands.as_slice() else {
        panic!("the quick start is two commands, install and run: {commands:?}");
    };
    assert!(install.starts_with("scripts/install"), "{install}");
    assert!(run.starts_with("belfry run agent"), "{run}");

    // The install, with the user's own PATH (where cargo is) and toolchain.
    let user_path = std::env::var("PATH").unwrap_or_default();
    let mut cmd = shell(&env, &home, &user_path, &format!("{install} --debug"));
    // The workspace's own target directory, which the suite's build has filled: `cargo
    // install --debug` of the same packages finds every artifact there and compiles nothing
    // (the same binary, so the suite's copy is not replaced), where a fresh directory took
    // about four minutes of a 2-core CI run for a build the suite had already done.
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target"));
    cmd.env("PREFIX", &prefix)
        .env("CARGO_TARGET_DIR", &target)
        .env(
            "CARGO_HOME",
            std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{real_home}/.cargo")),
        )
        .env(
            "RUSTUP_HOME",
            std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{real_home}/.rustup")),
        );
    let said = succeeded(
        cmd.output().expect("run scripts/install"),
        "scripts/install",
    );
    // The target directory is kept: the same install again compiles nothing.
    let again = cmd.output().expect("run scripts/install again");
    let rebuilt = String::from_utf8_lossy(&again.stderr).into_owned();
    succeeded(again, "scripts/install, again");
    assert!(
        !rebuilt.contains("Compiling"),
        "a reinstall with nothing changed compiled again: {rebuilt}"
    );
    let bin = prefix.join("bin");
    let asked = format!("export PATH=\"{}:$PATH\"", bin.display());
    assert!(
        said.contains(&asked),
        "the script did not say {asked:?}: {said}"
    );

    // The PATH it asked for, over a system PATH that has no belfry and no cargo.
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let found = succeeded(
        shell(&env, &home, &path, "command -v belfry")
            .output()
            .expect("sh"),
        "command -v belfry",
    );
    assert_eq!(found.trim(), bin.join("belfry").display().to_string());
    // The rich DING policy's activity adapter is installed beside it, where the default
    // policy of a Claude Code or Codex agent looks for it.
    assert!(
        bin.join("belfry-adapter").is_file(),
        "scripts/install did not install belfry-adapter: {said}"
    );

    // `belfry run` attaches, so it gets a terminal: an outer pane running the line as written.
    let outer = format!("belfry new outer -- sh -c '{run}; sleep 600'");
    succeeded(
        shell(&env, &home, &path, &outer)
            .stdin(Stdio::null())
            .output()
            .expect("sh"),
        "belfry new outer",
    );
    let listed = || {
        let out = shell(&env, &home, &path, "belfry ls --json")
            .output()
            .ok()?;
        let panes: Value = serde_json::from_slice(&out.stdout).ok()?;
        panes
            .as_array()?
            .iter()
            .any(|pane| pane["session"] == "agent")
            .then_some(())
    };
    assert!(
        eventually(Duration::from_secs(15), || listed().is_some()),
        "the quick start's `belfry run agent` made no pane"
    );

    // Mail for the agent, then its shell reads it by name, as the README says it can.
    succeeded(
        shell(
            &env,
            &home,
            &path,
            "echo 'the body' | belfry inbox post agent --from lead --subject quick-start-mail",
        )
        .output()
        .expect("sh"),
        "belfry inbox post",
    );
    let typed = "belfry inbox ls | sed 's/^/LISTED /'; belfry inbox read";
    succeeded(
        shell(
            &env,
            &home,
            &path,
            &format!("belfry send agent --text \"{typed}\" --key Enter"),
        )
        .output()
        .expect("sh"),
        "belfry send",
    );
    let waited = shell(
        &env,
        &home,
        &path,
        "belfry wait agent --regex 'Subject: quick-start-mail' --timeout-ms 15000",
    )
    .output()
    .expect("sh");
    let screen = shell(&env, &home, &path, "belfry peek agent")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        waited.status.success(),
        "inbox read did not work in the pane:\n{screen}"
    );
    // A listed message's name starts with its Unix time in milliseconds; the typed command
    // line itself also shows "LISTED ", but never followed by a digit.
    let listed_a_message = screen
        .match_indices("LISTED ")
        .any(|(at, _)| screen[at + 7..].starts_with(|c: char| c.is_ascii_digit()));
    assert!(
        listed_a_message,
        "inbox ls did not work in the pane:\n{screen}"
    );
    assert!(!screen.contains("not found"), "{screen}");
    env.shutdown();
}
