//! What the live tests of `belfry hooks` (`tests/tests/hooks_*_live.rs`) share: finding the
//! installed harness and the scripted model server, the guarded project every one of them
//! applies (a force-push guard and a notes enricher), the model's script that asks for the
//! forbidden command, and `belfry hooks apply` itself.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::belfry_bin;

/// `$variable`, else `default`; fails the test, naming both, when nothing is there.
pub fn found(variable: &str, default: PathBuf, what: &str) -> PathBuf {
    let path = std::env::var(variable)
        .map(PathBuf::from)
        .unwrap_or(default);
    assert!(
        path.exists(),
        "{what} is not at {} (set {variable}): this live test cannot run here",
        path.display()
    );
    path
}

/// Cargo's target directory (where `scripts/install-harnesses` puts the harnesses).
pub fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Writes `text` to `path` (making its directory), executable when asked.
pub fn write(path: &Path, text: &str, executable: bool) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|err| panic!("{err}"));
    }
    std::fs::write(path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    if executable {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
    }
}

/// The canonical hooks of the project every projection live test applies, for `target`: an
/// enforce guard that refuses a force push before the shell tool runs it (exit 2 and the
/// reason), and an enricher whose context, `note`, must reach the model.
pub fn guarded_project(project: &Path, target: &str, note: &str) {
    write(
        &project.join("scripts/guard.sh"),
        "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in *--force*) echo \"force push refused by the belfry guard\" >&2; exit 2;; esac\nexit 0\n",
        true,
    );
    write(
        &project.join("scripts/notes.sh"),
        &format!("#!/bin/sh\ncat >/dev/null\necho \"{note}: run the tests with nice\"\n"),
        true,
    );
    write(
        &project.join("belfry-hooks.kdl"),
        &format!(
            "hook \"no-force-push\" {{ event \"before-tool\"; intent \"enforce\"; select tool=\"shell\"; command \"scripts/guard.sh\"; failure \"closed\"; targets \"{target}\" }}\n\
             hook \"notes\" {{ event \"prompt-submit\"; command \"scripts/notes.sh\"; targets \"{target}\" }}\n"
        ),
        false,
    );
}

/// The model's script: a prompt with "push it" gets one shell call that would touch `marker`
/// and force-push, then a text answer; anything else the fallback.
pub fn force_push_script(path: &Path, marker: &Path) {
    write(
        path,
        &serde_json::json!({
            "turns": [{
                "match": "push it",
                "tool": { "command": format!("touch {} && echo git push --force origin main", marker.display()) },
                "then": { "text": "DONE-AFTER-TOOL" },
            }],
            "fallback": { "text": "FALLBACK" },
        })
        .to_string(),
        false,
    );
}

/// `belfry hooks apply` in `project`, with `home` as `HOME`; fails the test if it fails.
pub fn apply(project: &Path, home: &Path) {
    let apply = Command::new(belfry_bin())
        .args(["hooks", "apply"])
        .current_dir(project)
        .env("HOME", home)
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stdout)
    );
}

/// The verdict every guarded run must reach, for the harness named `label`: it ended well and
/// answered after the tool; the refused command's side effect (`marker`) never happened; the
/// first request the model server logged (`requests`) carried the enricher's `note`; and some
/// request carried the guard's refusal.
pub fn assert_guarded_run(
    label: &str,
    output: &std::process::Output,
    marker: &Path,
    requests: &Path,
    note: &str,
) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{label}: {stdout}\n{stderr}");
    assert!(
        stdout.contains("DONE-AFTER-TOOL"),
        "{label}: {stdout}\n{stderr}"
    );
    assert!(
        !marker.exists(),
        "{label} ran the force push the guard refused"
    );
    let log = std::fs::read_to_string(requests).unwrap_or_default();
    let bodies: Vec<String> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|request| request["body"].to_string())
        .collect();
    assert!(
        bodies.first().is_some_and(|body| body.contains(note)),
        "{label}: the enrich hook's context did not reach the model: {log}"
    );
    assert!(
        bodies
            .iter()
            .any(|body| body.contains("force push refused by the belfry guard")),
        "{label}: the model never saw the refusal: {log}"
    );
}
