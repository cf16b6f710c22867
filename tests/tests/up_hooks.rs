//! spec §9 and §11: an agent declared to run under a canonical hook (`hooks "NAME"` in
//! belfry.kdl) is launched only when that hook targets its harness and, where it enforces, is
//! exact there; otherwise `belfry up` refuses before anything starts, naming the agent, the
//! hook, the harness and the matrix cell.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use belfry_tests::Env;

const HOOKS: &str = r#"
hook "no-force-push" {
  event "before-tool"
  intent "enforce"
  select tool="shell"
  command "scripts/guard.sh"
  targets "claude" "codex"
}
"#;

/// A project folder with the canonical hooks file, its guard script and `belfry.kdl`.
fn project(env: &Env, declarations: &str) -> std::path::PathBuf {
    let dir = env.path("project");
    std::fs::create_dir_all(dir.join("scripts")).expect("mkdir");
    std::fs::write(dir.join("belfry-hooks.kdl"), HOOKS).expect("write hooks");
    let guard = dir.join("scripts/guard.sh");
    std::fs::write(&guard, "#!/bin/sh\nexit 0\n").expect("write guard");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let file = dir.join("belfry.kdl");
    std::fs::write(&file, declarations).expect("write belfry.kdl");
    file
}

fn up(env: &Env, file: &Path) -> (bool, String) {
    let out = env.run(&["up", &file.display().to_string()]);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn an_agent_whose_enforce_hook_is_lossy_on_its_harness_is_refused_before_anything_launches() {
    let env = Env::new();
    let file = project(
        &env,
        r#"
agent "guarded" { command "sh" "-c" "sleep 600"; adapter "claude"; hooks "no-force-push"; }
agent "unguarded" { command "sh" "-c" "sleep 600"; adapter "codex"; hooks "no-force-push"; }
agent "typo" { command "sh" "-c" "sleep 600"; adapter "claude"; hooks "no-forcepush"; }
"#,
    );
    let (ok, text) = up(&env, &file);
    assert!(!ok, "up launched: {text}");
    assert!(text.contains("nothing was launched"), "{text}");
    assert!(
        text.contains("agent \"unguarded\" must run under hook \"no-force-push\" on codex")
            && text.contains("before-tool.deny is lossy"),
        "{text}"
    );
    assert!(
        text.contains("agent \"typo\"") && text.contains("declares no hook named \"no-forcepush\""),
        "{text}"
    );
    assert!(!text.contains("agent \"guarded\""), "{text}");
    let listing = env.ok(&["ls"]);
    assert!(!listing.contains("guarded"), "a pane started: {listing}");
}

#[test]
fn an_agent_whose_enforce_hook_is_exact_on_its_harness_launches() {
    let env = Env::new();
    let file = project(
        &env,
        r#"agent "guarded" { command "sh" "-c" "echo UP; sleep 600"; adapter "claude"; hooks "no-force-push"; }"#,
    );
    let (ok, text) = up(&env, &file);
    assert!(ok, "up refused: {text}");
    env.wait_screen("guarded", "UP");
    env.ok(&["down", &file.display().to_string()]);
}

/// The observing hooks the rich policy's activity adapter learns Claude Code's turns from:
/// the example's own file.
const RICH_HOOKS: &str = include_str!("../../examples/claude/belfry-hooks.kdl");

/// An environment with a home of its own, and a project folder holding `hooks` as its
/// canonical hook file; `apply` projects it for the harnesses it targets. The folder is
/// trusted as the user would have (Claude Code runs no project hook in a folder whose trust
/// dialog was not accepted: its `~/.claude.json` records the answer).
fn rich_project(hooks: &str, apply: bool) -> (Env, std::path::PathBuf) {
    let mut env = Env::new();
    let home = env.path("home");
    std::fs::create_dir_all(&home).expect("mkdir home");
    env.extra = vec![
        ("HOME".into(), home.display().to_string()),
        (
            "PATH".into(),
            belfry_tests::path_with(&belfry_tests::admitted_harnesses(&env.path("harnesses"))),
        ),
    ];
    let dir = env.path("project");
    std::fs::create_dir_all(&dir).expect("mkdir project");
    std::fs::write(dir.join("belfry-hooks.kdl"), hooks).expect("write hooks");
    let dir = dir.canonicalize().expect("canonical project path");
    std::fs::write(
        home.join(".claude.json"),
        serde_json::json!({"projects": {dir.display().to_string(): {"hasTrustDialogAccepted": true}}})
            .to_string(),
    )
    .expect("write ~/.claude.json");
    if apply {
        env.ok(&["hooks", "--dir", &dir.display().to_string(), "apply"]);
    }
    (env, dir)
}

/// `belfry new SESSION --adapter ADAPTER --cwd DIR [extra…] -- sleep 600`.
fn new_agent(
    env: &Env,
    session: &str,
    adapter: &str,
    dir: &Path,
    extra: &[&str],
) -> std::process::Output {
    let cwd = dir.display().to_string();
    let mut args = vec!["new", session, "--adapter", adapter, "--cwd", &cwd];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sleep", "600"]);
    env.run(&args)
}

fn policy(env: &Env, session: &str) -> serde_json::Value {
    let out = env.ok(&["ding", "status", session, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out).expect("ding status --json");
    status["policy"].clone()
}

/// spec §7.4 and the A/B evaluation (docs/evaluation.md): an agent declared with an adapter
/// that ships an activity executable, and no DING policy of its own, gets the rich policy
/// when belfry's hooks that executable reads are applied where the agent runs, through
/// `belfry new` and `belfry up` alike; a policy the user names wins.
#[test]
fn with_the_activity_adapters_hooks_applied_a_declared_agent_defaults_to_the_rich_policy() {
    let (env, dir) = rich_project(RICH_HOOKS, true);
    let out = new_agent(&env, "agent", "claude", &dir, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("stays aggressive"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rich = policy(&env, "agent");
    assert_eq!(rich["delivery"], "turn-boundary+fresh-idle", "{rich}");
    let command: Vec<&str> = rich["adapter_command"]
        .as_array()
        .expect("an adapter command")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert!(command[0].ends_with("/belfry-adapter"), "{command:?}");
    assert_eq!(command[1..], ["--provider", "claude"]);

    let out = new_agent(
        &env,
        "plain",
        "claude",
        &dir,
        &["--ding-delivery", "aggressive"],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(policy(&env, "plain")["delivery"], "aggressive");

    let file = dir.join("belfry.kdl");
    std::fs::write(
        &file,
        r#"agent "declared" { command "sleep" "600"; adapter "claude"; }"#,
    )
    .expect("write belfry.kdl");
    let (ok, text) = up(&env, &file);
    assert!(ok, "up refused: {text}");
    assert_eq!(
        policy(&env, "declared")["delivery"],
        "turn-boundary+fresh-idle"
    );

    // Pi too (its A/B runs met the conditions): its hooks are an extension in the project.
    // Pi 1.x (the version found here) loads it only in a trusted project: untrusted, the
    // default stays aggressive; `apply --trust` records the trust Pi reads, and it is rich.
    let (env, dir) = rich_project(include_str!("../../examples/pi/belfry-hooks.kdl"), true);
    assert!(dir.join(".pi/extensions/belfry.ts").is_file());
    let out = new_agent(&env, "pi-untrusted", "pi", &dir, &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(policy(&env, "pi-untrusted")["delivery"], "aggressive");
    env.ok(&[
        "hooks",
        "--dir",
        &dir.display().to_string(),
        "apply",
        "--trust",
    ]);
    let out = new_agent(&env, "pi", "pi", &dir, &[]);
    assert!(out.status.success(), "{out:?}");
    let rich = policy(&env, "pi");
    assert_eq!(rich["delivery"], "turn-boundary+fresh-idle", "{rich}");
    assert_eq!(rich["adapter_command"][2], "pi", "{rich}");

    // Gemini CLI too (its 100-message A/B rerun met the conditions): its hooks are written into
    // the project's .gemini/settings.json, which Gemini CLI reads only in a folder the user
    // trusted; untrusted, the default stays aggressive and says so.
    let (env, dir) = rich_project(include_str!("../../examples/gemini/belfry-hooks.kdl"), true);
    assert!(dir.join(".gemini/settings.json").is_file());
    let out = new_agent(&env, "untrusted", "gemini", &dir, &[]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("not trusted by gemini"), "{stderr}");
    assert_eq!(policy(&env, "untrusted")["delivery"], "aggressive");
    let gemini_home = env.path("home").join(".gemini");
    std::fs::create_dir_all(&gemini_home).expect("mkdir ~/.gemini");
    std::fs::write(
        gemini_home.join("trustedFolders.json"),
        serde_json::json!({dir.display().to_string(): "TRUST_FOLDER"}).to_string(),
    )
    .expect("write ~/.gemini/trustedFolders.json");
    let out = new_agent(&env, "gemini", "gemini", &dir, &[]);
    assert!(out.status.success(), "{out:?}");
    let rich = policy(&env, "gemini");
    assert_eq!(rich["delivery"], "turn-boundary+fresh-idle", "{rich}");
    assert_eq!(rich["adapter_command"][2], "gemini", "{rich}");
}

/// Without those hooks the activity adapter would never see a turn end and would hold every
/// notice, so the default stays aggressive, and `belfry new` says why and what fixes it: hooks
/// not applied at all, or applied without the turn-stop hook.
#[test]
fn without_the_activity_adapters_hooks_the_default_stays_aggressive_and_says_why() {
    let (env, dir) = rich_project(RICH_HOOKS, false);
    let out = new_agent(&env, "agent", "claude", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("agent: DING delivery stays aggressive")
            && stderr.contains("belfry hooks")
            && stderr.contains("apply"),
        "{stderr}"
    );
    assert_eq!(policy(&env, "agent")["delivery"], "aggressive");

    let without_stop: String = RICH_HOOKS
        .split("hook \"")
        .filter(|hook| !hook.starts_with("turn-ended"))
        .collect::<Vec<_>>()
        .join("hook \"");
    assert!(!without_stop.contains("turn-stop"), "{without_stop}");
    let (env, dir) = rich_project(&without_stop, true);
    let out = new_agent(&env, "agent", "claude", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("projects no exact claude hook on turn-stop"),
        "{stderr}"
    );
    assert_eq!(policy(&env, "agent")["delivery"], "aggressive");

    // An adapter that ships no activity executable says nothing: aggressive is its only
    // default.
    let out = new_agent(&env, "other", "opencode", &dir, &[]);
    assert!(String::from_utf8_lossy(&out.stderr).is_empty(), "{out:?}");
    assert_eq!(policy(&env, "other")["delivery"], "aggressive");
}

/// Issue 41 item 6: the rich default is chosen only on hooks verified for the harness that
/// runs: with the hooks applied but the harness answering a version outside the admitted range,
/// or none, `belfry new` keeps the aggressive default and says which version and why.
#[test]
fn on_an_unadmitted_or_undetected_harness_the_rich_default_is_not_chosen_and_new_says_why() {
    let (env, dir) = rich_project(RICH_HOOKS, true);
    // A Claude Code the matrix does not admit, first on the pane's PATH.
    let newer = env.path("newer");
    std::fs::create_dir_all(&newer).expect("mkdir");
    let claude = newer.join("claude");
    std::fs::write(&claude, "#!/bin/sh\necho '9.0.0 (Claude Code)'\n").expect("write claude");
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        newer.display(),
        belfry_tests::path_with(&env.path("harnesses"))
    );
    let mut command = env.cmd(&[
        "new",
        "agent",
        "--adapter",
        "claude",
        "--cwd",
        &dir.display().to_string(),
        "--",
        "sleep",
        "600",
    ]);
    let out = command.env("PATH", &path).output().expect("belfry new");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("agent: DING delivery stays aggressive")
            && stderr.contains("Claude Code 9.0.0 runs here, outside the admitted range"),
        "{stderr}"
    );
    assert_eq!(policy(&env, "agent")["delivery"], "aggressive");
    // `ding status` says it too, for as long as the pane runs.
    let status = env.ok(&["ding", "status", "agent"]);
    assert!(
        status.contains("  rich:       not the default here: ")
            && status.contains("Claude Code 9.0.0 runs here, outside the admitted range"),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).expect("json");
    assert_eq!(json["rich_default"]["chosen"], false, "{json}");

    // No Claude Code answers at all.
    let mut command = env.cmd(&[
        "new",
        "other",
        "--adapter",
        "claude",
        "--cwd",
        &dir.display().to_string(),
        "--",
        "sleep",
        "600",
    ]);
    let bare = format!("{}:/usr/bin:/bin", belfry_tests::bin_dir().display());
    let out = command.env("PATH", &bare).output().expect("belfry new");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("other: DING delivery stays aggressive")
            && stderr.contains("no Claude Code version was detected"),
        "{stderr}"
    );
    assert_eq!(policy(&env, "other")["delivery"], "aggressive");
}
