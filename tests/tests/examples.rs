//! Every per-harness example (`examples/<harness>/belfry.kdl`) passes every check `belfry up`
//! makes before it launches anything (`belfry up --dry-run`: the file parses, each agent's
//! program resolves, its hooks are guarded), names an adapter there is and the rich DING
//! policy with the activity adapter, and its hook file plans without a refusal. The harness
//! programs are small real programs on PATH named like the harness (the check is that the
//! program resolves, not what it does), so the installed harnesses are not needed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use belfry_tests::{bin_dir, Env};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The per-harness example folders: each holding a `belfry.kdl`.
fn harness_examples() -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(examples())
        .expect("examples/")
        .flatten()
        .filter(|entry| entry.path().join("belfry.kdl").is_file())
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_harness_example_passes_up_dry_run_with_the_rich_policy() {
    let examples = harness_examples();
    let names: Vec<&str> = examples.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["claude", "codex", "gemini", "opencode", "pi"]);
    let mut env = Env::new();
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    for name in &names {
        let program = bin.join(name);
        std::fs::write(&program, "#!/bin/sh\nexit 0\n").expect("write program");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.extra = vec![
        ("PATH".into(), path),
        ("BELFRY_HOOKS_DETECT".into(), "0".into()),
    ];
    for (name, dir) in &examples {
        let file = dir.join("belfry.kdl");
        let text = std::fs::read_to_string(&file).expect("read example");
        assert!(
            text.contains(&format!("adapter \"{name}\""))
                && text.contains("delivery \"turn-boundary+fresh-idle\"")
                && text.contains(&format!(
                    "command \"belfry-adapter\" \"--provider\" \"{name}\""
                )),
            "{name}: not the adapter with the rich policy"
        );
        let out = env.run(&["up", "--dry-run", &file.display().to_string()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: up --dry-run refused it:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout, format!("would launch {name}\n"), "{name}");
        let plan = env.run(&["hooks", "--dir", &dir.display().to_string(), "plan"]);
        let plan_text = String::from_utf8_lossy(&plan.stdout);
        assert_eq!(
            plan.status.code(),
            Some(0),
            "{name}: hooks plan:\n{plan_text}"
        );
        assert!(
            plan_text.contains(&format!("target {name} ")),
            "{name}: its hooks do not target it:\n{plan_text}"
        );
    }
}

#[test]
fn up_dry_run_refuses_a_program_that_is_not_there_and_launches_nothing() {
    let env = Env::new();
    let file = env.path("belfry.kdl");
    std::fs::write(&file, "agent \"a\" { command \"no-such-program-here\"; }\n").expect("write");
    let out = env.run(&["up", "--dry-run", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("belfry.kdl:1:")
            && stderr.contains("\"no-such-program-here\" is not found on PATH"),
        "{stderr}"
    );
    assert!(!env.socket().exists(), "a dry run started a daemon");
}

/// The example hook file (`examples/belfry-hooks.kdl`), applied as is in a project with its
/// scripts beside it, lets an ordinary shell call run and refuses a force push: its guard
/// exists, where a missing guard failed closed and refused every shell call.
#[test]
fn the_example_hook_file_applied_as_is_refuses_only_a_force_push() {
    let env = Env::new();
    let project = env.path("project");
    std::fs::create_dir_all(project.join("scripts")).expect("mkdir");
    std::fs::copy(
        examples().join("belfry-hooks.kdl"),
        project.join("belfry-hooks.kdl"),
    )
    .expect("copy the hook file");
    for script in std::fs::read_dir(examples().join("scripts"))
        .expect("examples/scripts")
        .flatten()
    {
        std::fs::copy(
            script.path(),
            project.join("scripts").join(script.file_name()),
        )
        .expect("copy a script");
    }
    let dir = project.display().to_string();
    let applied = env.run(&["hooks", "--dir", &dir, "apply"]);
    assert_eq!(applied.status.code(), Some(0));
    let said = String::from_utf8_lossy(&applied.stdout);
    // apply names the files it wrote, and warns of nothing: every handler is there.
    assert!(
        said.contains(&format!(
            "claude: settled: wrote {}",
            project.join(".belfry/hooks/claude.json").display()
        )) && said.contains(&project.join(".claude/settings.json").display().to_string()),
        "{said}"
    );
    assert!(
        applied.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let compiled = project.join(".belfry/hooks/claude.json");
    assert!(compiled.is_file(), "apply wrote no {}", compiled.display());
    let ask = |command: &str| -> serde_json::Value {
        let mut cmd = env.cmd(&[
            "dispatch",
            "--event",
            "before-tool",
            "--hooks-file",
            &compiled.display().to_string(),
        ]);
        cmd.current_dir(&project)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("dispatch");
        let input = serde_json::json!({"tool_name": "shell", "tool_input": {"command": command}});
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin
                .write_all(input.to_string().as_bytes())
                .expect("write the hook JSON");
        }
        let out = child.wait_with_output().expect("dispatch output");
        serde_json::from_slice(&out.stdout).expect("one JSON answer")
    };
    let plain = ask("ls -la");
    assert_eq!(plain["decision"], "allow", "{plain}");
    let force = ask("git push --force origin main");
    assert_eq!(force["decision"], "deny", "{force}");
    assert!(
        force["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("force pushes are refused")),
        "{force}"
    );
}

/// The example hook file without the scripts it names: `plan`, `apply` and `status` each warn
/// that the fail-closed guard cannot start and so refuses every call it selects, naming the
/// file, line and the program's path; before, all three said nothing.
#[test]
fn a_hook_whose_program_is_missing_is_warned_of_by_plan_apply_and_status() {
    let env = Env::new();
    let project = env.path("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::copy(
        examples().join("belfry-hooks.kdl"),
        project.join("belfry-hooks.kdl"),
    )
    .expect("copy the hook file");
    let dir = project.display().to_string();
    let guard = project
        .join("scripts/no-force-push.sh")
        .display()
        .to_string();
    for command in ["plan", "apply", "status"] {
        let out = env.run(&["hooks", "--dir", &dir, command]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("warning: project hook \"no-force-push\" (")
                && stderr.contains("belfry-hooks.kdl:")
                && stderr.contains(&format!("its program {guard} does not exist"))
                && stderr.contains("it fails closed: every call it selects is refused"),
            "{command}: {stderr}"
        );
        assert!(
            stderr.contains("project hook \"audit\"")
                && stderr.contains("each call notes the failure and goes on"),
            "{command}: {stderr}"
        );
    }
}
