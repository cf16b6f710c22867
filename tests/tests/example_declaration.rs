//! `belfry up` of `examples/belfry.kdl` launches its agents, the shell agent among them, with
//! the real binary and daemon. The example and its charter are copied into the test's own
//! directory (so no pane runs in the source tree), and every harness it names is replaced by a
//! stub on `PATH` that only waits, so no real harness ever starts.

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
fn belfry_up_of_the_example_launches_its_shell_agent() {
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
    env.wait_screen("shell", "shell\\$");
    let listing: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    let shell = listing
        .as_array()
        .and_then(|panes| panes.iter().find(|pane| pane["session"] == "shell"))
        .expect("the shell agent is listed");
    assert_eq!(shell["argv"], serde_json::json!(["sh", "-i"]), "{shell}");
    assert!(shell["exited"].is_null(), "{shell}");
    env.ok(&["down", &file]);
}
