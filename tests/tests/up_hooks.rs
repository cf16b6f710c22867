//! spec §9 and §11: an agent declared to run under a canonical hook (`hooks "NAME"` in
//! belfry.kdl) is launched only when that hook targets its harness and, where it enforces, is
//! exact there; otherwise `belfry up` refuses before anything starts, naming the agent, the
//! hook, the harness and the matrix cell.

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
