//! `belfry up` of `examples/belfry.kdl` launches its agents, the toy mail agent among them, with
//! the real binary and daemon. The example and its charter are copied into the test's own
//! directory (so no pane runs in the source tree). With every harness it names replaced by a
//! stub on `PATH` that only waits, all of them launch; with no harness on `PATH` at all, as on
//! a newcomer's machine, the mail agent launches and the others are skipped with a line each.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use belfry_tests::{bin_dir, Env};
use serde_json::Value;

/// The program of every `command` line of the example except the shell's.
fn harness_programs(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("command \""))
        .filter_map(|rest| rest.split('"').next())
        .filter(|program| *program != "sh" && !program.starts_with('$'))
        .map(str::to_string)
        .collect()
}

#[test]
fn belfry_up_of_the_example_launches_every_agent_when_its_harnesses_are_installed() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let source = std::fs::read_to_string(examples.join("belfry.kdl")).unwrap();
    let stubs = tempfile::tempdir().unwrap();
    for program in harness_programs(&source) {
        let stub = stubs.path().join(&program);
        std::fs::write(&stub, "#!/bin/sh\nexec sleep 600\n").unwrap();
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}:{}",
        stubs.path().display(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = Env::with_vars(&[("PATH", &path)]);
    let project = env.path("project");
    std::fs::create_dir_all(project.join("charters")).unwrap();
    std::fs::write(project.join("belfry.kdl"), &source).unwrap();
    for charter in std::fs::read_dir(examples.join("charters"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(
            charter.path(),
            project.join("charters").join(charter.file_name()),
        )
        .unwrap();
    }

    let file = project.join("belfry.kdl").display().to_string();
    let out = env.ok(&["up", &file, "--json"]);
    let actions: Value = serde_json::from_str(&out).unwrap();
    assert!(
        actions.as_array().is_some_and(|a| !a.is_empty()),
        "{actions}"
    );
    env.wait_screen("mail", "waiting for notices");
    let listing: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    for name in ["mail", "coder", "reviewer"] {
        let pane = listing
            .as_array()
            .and_then(|panes| panes.iter().find(|pane| pane["session"] == name))
            .unwrap_or_else(|| panic!("{name} is not listed: {listing}"));
        assert!(pane["exited"].is_null(), "{pane}");
    }
    env.ok(&["down", &file]);
}

/// The example copied into a fresh project directory of `env`, with its charters and hook
/// scripts; returns the copy of `belfry.kdl`.
fn example_project(env: &Env) -> String {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let project = env.path("project");
    for dir in ["charters", "scripts"] {
        std::fs::create_dir_all(project.join(dir)).unwrap();
        for file in std::fs::read_dir(examples.join(dir)).unwrap().flatten() {
            std::fs::copy(file.path(), project.join(dir).join(file.file_name())).unwrap();
        }
    }
    for file in ["belfry.kdl", "belfry-hooks.kdl"] {
        std::fs::copy(examples.join(file), project.join(file)).unwrap();
    }
    project.join("belfry.kdl").display().to_string()
}

#[test]
fn up_of_the_example_without_any_harness_launches_the_mail_agent_and_skips_the_rest_saying_so() {
    // A PATH with belfry and the system's tools and no harness: a newcomer's machine.
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir().display());
    let env = Env::with_vars(&[("PATH", &path)]);
    let file = example_project(&env);
    let out = env.run(&["up", &file]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].starts_with("launch  mail: sha256:"), "{stdout}");
    assert!(
        lines[1]
            .starts_with("skip    coder: its harness \"claude\" (adapter claude) is not installed"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with(
            "skip    reviewer: its harness \"codex\" (adapter codex) is not installed"
        ),
        "{stdout}"
    );
    // Nothing about the skipped agents' hooks buries those lines.
    assert!(
        !stderr.contains("coder") && !stderr.contains("reviewer"),
        "{stderr}"
    );
    env.wait_screen("mail", "waiting for notices");
    let listing: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|pane| pane["session"].as_str())
        .collect();
    assert_eq!(names, ["mail"], "{listing}");

    // The dry run says the same, and a second `up` adopts the one and skips the others again.
    let dry = env.ok(&["up", "--dry-run", &file]);
    assert!(
        dry.starts_with("would launch mail\nwould skip coder: its harness \"claude\""),
        "{dry}"
    );
    let again = env.ok(&["up", &file]);
    assert!(again.starts_with("adopt   mail:"), "{again}");
    assert_eq!(env.ok(&["down", &file]), "stopped mail\n");
}

#[test]
fn the_example_mail_agent_prints_its_mail_and_never_runs_a_notice_as_a_command() {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir().display());
    let env = Env::with_vars(&[("PATH", &path)]);
    let file = example_project(&env);
    env.ok(&["up", &file]);
    env.wait_screen("mail", "waiting for notices");
    // A subject that a shell reading the notice as a command would run.
    let planted = env.path("planted");
    let subject = format!(
        "hello $(touch {}) `touch {}`",
        planted.display(),
        planted.display()
    );
    let mut post = env.cmd(&[
        "inbox",
        "post",
        "mail",
        "--from",
        "lead",
        "--subject",
        &subject,
    ]);
    post.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = post.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"the body of the first letter\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The notice is typed, the loop reads it as data and prints the message with
    // `belfry inbox read`.
    env.wait_screen("mail", "the body of the first letter");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !planted.exists(),
        "the notice ran as a command: {:?}",
        env.lines("mail")
    );
    env.ok(&["down", &file]);
}

#[test]
fn up_and_down_with_no_file_and_no_belfry_kdl_say_where_they_looked_and_how_to_name_one() {
    let env = Env::new();
    let empty = env.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for (args, said) in [
        (&["up", "--replace"][..], "belfry up --replace"),
        (&["down"][..], "belfry down"),
        (&["up", "--dry-run"][..], "belfry up --dry-run"),
    ] {
        let out = env.cmd(args).current_dir(&empty).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "`{said}` with no FILE reads ./belfry.kdl, and {} has none",
                empty.display()
            )) && stderr.contains(&format!("`{said} FILE`")),
            "{args:?}: {stderr}"
        );
    }
    assert!(!env.socket().exists(), "a refused line started a daemon");
}

/// The README's "Hooks and declarations" block, each line run as written by `sh` in a checkout
/// (a copy of `examples/` under a fresh directory) on a machine with no harness on PATH: every
/// line exits 0, `up` launches the mail agent and skips the harness agents, `down` stops it.
#[test]
fn the_readmes_declaration_lines_run_as_written_without_any_harness() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .expect("README.md");
    let section = readme
        .split("## Hooks and declarations")
        .nth(1)
        .expect("the README's Hooks and declarations section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("its first sh block");
    // Each command line without its comment; a line that is only a comment continues the one
    // above.
    let lines: Vec<&str> = block
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .map(|line| line.split("   #").next().unwrap_or(line).trim_end())
        .filter(|line| !line.is_empty())
        .collect();
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("belfry up --replace examples/belfry.kdl")),
        "{lines:?}"
    );

    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir().display());
    let env = Env::with_vars(&[("PATH", &path)]);
    let checkout = env.path("checkout");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for dir in ["", "charters", "scripts"] {
        std::fs::create_dir_all(checkout.join("examples").join(dir)).unwrap();
    }
    for file in ["belfry.kdl", "belfry-hooks.kdl"] {
        std::fs::copy(examples.join(file), checkout.join("examples").join(file)).unwrap();
    }
    for dir in ["charters", "scripts"] {
        for file in std::fs::read_dir(examples.join(dir)).unwrap().flatten() {
            std::fs::copy(
                file.path(),
                checkout.join("examples").join(dir).join(file.file_name()),
            )
            .unwrap();
        }
    }
    let mut said = Vec::new();
    for line in &lines {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", line]).current_dir(&checkout);
        for (key, value) in env.vars() {
            cmd.env(key, value);
        }
        let out = cmd
            .env_remove("BELFRY_SOCKET")
            .env_remove("BELFRY_SESSION")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{line}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        said.push(stdout);
    }
    let up = &said[1];
    assert!(
        up.contains("launch  mail:")
            && up.contains("skip    coder:")
            && up.contains("skip    reviewer:"),
        "{up}"
    );
    assert!(said[2].contains("adopt   mail:"), "{}", said[2]);
    assert_eq!(said[3], "stopped mail\n");
}
