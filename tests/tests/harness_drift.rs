//! `scripts/harness-drift` compares every adapter's admitted range (`matrix.json`) with the
//! newest version of its npm package and of the packages a new major moved to
//! (`live.json` `successor_packages`), and lists the harnesses with no adapter
//! (`adapters/candidates.json`). These tests run the real script on the repository's real
//! adapter data, with the registry's answers given in a file (`--versions`), so a version
//! outside a range, a successor package and a registry that did not answer are each seen.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Every adapter with a live profile: (name, package, admitted min, admitted below, successors).
fn adapters() -> Vec<(String, String, String, String, Vec<String>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root().join("adapters"))
        .expect("adapters/")
        .flatten()
    {
        let live = entry.path().join("live.json");
        let matrix = entry.path().join("matrix.json");
        if !live.is_file() || !matrix.is_file() {
            continue;
        }
        let live = read_json(&live);
        let matrix = read_json(&matrix);
        // `admitted` is one span or a list of them (majors side by side): the first one here.
        let first = match &matrix["admitted"] {
            Value::Array(spans) => spans.first().cloned().unwrap_or(Value::Null),
            span => span.clone(),
        };
        let successors = live["successor_packages"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|entry| entry["package"].as_str().expect("package").to_string())
                    .collect()
            })
            .unwrap_or_default();
        found.push((
            entry.file_name().to_string_lossy().into_owned(),
            live["package"]
                .as_str()
                .expect("live.json package")
                .to_string(),
            first["min"].as_str().expect("admitted.min").to_string(),
            first["below"].as_str().expect("admitted.below").to_string(),
            successors,
        ));
    }
    found.sort();
    found
}

fn run(versions: &Value, check: bool) -> (Output, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("versions.json");
    std::fs::write(&file, versions.to_string()).expect("write versions");
    let mut command = Command::new(root().join("scripts/harness-drift"));
    command.arg("--versions").arg(&file);
    if check {
        command.arg("--check");
    }
    let output = command.output().expect("run scripts/harness-drift");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output, stdout)
}

/// The line the script printed for `package`.
fn line_for<'a>(stdout: &'a str, package: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.split_whitespace().any(|word| word == package))
        .unwrap_or_else(|| panic!("no line for {package} in:\n{stdout}"))
}

#[test]
fn a_newest_version_inside_every_range_is_admitted_and_successors_are_not() {
    let adapters = adapters();
    assert!(
        adapters.len() >= 5,
        "adapters with a live profile: {adapters:?}"
    );
    let mut versions = serde_json::Map::new();
    for (_, package, min, _, successors) in &adapters {
        versions.insert(package.clone(), Value::String(min.clone()));
        for successor in successors {
            versions.insert(successor.clone(), Value::String("99.0.0".into()));
        }
    }
    let candidates = read_json(&root().join("adapters/candidates.json"));
    for (name, entry) in candidates.as_object().expect("candidates object") {
        if !name.starts_with('_') {
            let package = entry["package"].as_str().expect("candidate package");
            versions.insert(package.to_string(), Value::String("0.1.0".into()));
        }
    }
    let (output, stdout) = run(&Value::Object(versions), false);
    assert!(
        output.status.success(),
        "exit {:?}:\n{stdout}",
        output.status
    );
    for (name, package, min, below, successors) in &adapters {
        let line = line_for(&stdout, package);
        assert!(
            line.contains(" admitted ") && line.contains(&format!("[{min}, {below})")),
            "{name}: {line}"
        );
        for successor in successors {
            let line = line_for(&stdout, successor);
            assert!(
                line.contains("NOT ADMITTED") && line.contains("newest 99.0.0"),
                "{name}'s successor {successor}: {line}"
            );
        }
    }
    for (name, entry) in candidates.as_object().expect("candidates object") {
        if !name.starts_with('_') {
            let line = line_for(&stdout, entry["package"].as_str().expect("package"));
            assert!(line.contains("NO ADAPTER"), "{name}: {line}");
        }
    }
}

#[test]
fn a_version_past_a_range_or_unanswered_is_drift_and_check_fails_on_it() {
    let adapters = adapters();
    let (name, package, _, below, _) = adapters.first().expect("an adapter").clone();
    // The first adapter's newest is its range's exclusive end; every other package is absent,
    // as if the registry had not answered for it.
    let versions = serde_json::json!({ package.clone(): below.clone() });
    let (output, stdout) = run(&versions, false);
    assert!(
        output.status.success(),
        "information only without --check:\n{stdout}"
    );
    let line = line_for(&stdout, &package);
    assert!(
        line.contains("NOT ADMITTED") && line.contains(&format!("newest {below} is outside")),
        "{name}: {line}"
    );
    let (_, other_package, _, _, _) = adapters.last().expect("a second adapter").clone();
    assert!(
        line_for(&stdout, &other_package).contains("unknown"),
        "an unanswered package is unknown:\n{stdout}"
    );
    let (output, stdout) = run(&versions, true);
    assert_eq!(
        output.status.code(),
        Some(1),
        "--check fails on drift:\n{stdout}"
    );
}

/// Issue 41: OpenCode's matrix admits 1.x and 2.x side by side (a list of spans). A newest
/// version inside either span is admitted, and says the version that span was verified with;
/// one between the spans is not, and the line names both.
#[test]
fn a_version_in_either_admitted_span_is_admitted_and_one_between_is_not() {
    let (output, stdout) = run(
        &serde_json::json!({"opencode-ai": "1.18.33", "@opencode/cli": "2.2.7"}),
        false,
    );
    assert!(output.status.success(), "{stdout}");
    let old = line_for(&stdout, "opencode-ai");
    assert!(
        old.contains(" admitted ") && old.contains("inside [1.18.33, 1.19.0)"),
        "{old}"
    );
    let new = line_for(&stdout, "@opencode/cli");
    assert!(
        new.contains(" admitted ")
            && new.contains("inside [2.2.5, 2.3.0)")
            && new.contains("but verified with 2.2.5 only"),
        "{new}"
    );
    let (_, stdout) = run(&serde_json::json!({"@opencode/cli": "2.0.0"}), false);
    let between = line_for(&stdout, "@opencode/cli");
    assert!(
        between.contains("NOT ADMITTED")
            && between.contains("outside [1.18.33, 1.19.0) and [2.2.5, 2.3.0)"),
        "{between}"
    );
}
