//! spec §9: a degradation key leaves the capability matrix only with a test that proves the
//! loss is gone. `scripts/check-degradation-keys.sh` (run by `.ci/run`) is the check; here it
//! runs on a copy of the repository's matrices in which one lossy cell became exact.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A copy of the script, every `adapters/*/matrix.json` and the key list, in a fresh folder.
fn copy_of_the_matrices() -> tempfile::TempDir {
    let root = repository();
    let copy = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(copy.path().join("scripts")).expect("mkdir");
    std::fs::copy(
        root.join("scripts/check-degradation-keys.sh"),
        copy.path().join("scripts/check-degradation-keys.sh"),
    )
    .expect("copy the script");
    for entry in std::fs::read_dir(root.join("adapters"))
        .expect("adapters/")
        .flatten()
    {
        let matrix = entry.path().join("matrix.json");
        if matrix.is_file() {
            let dir = copy.path().join("adapters").join(entry.file_name());
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::copy(&matrix, dir.join("matrix.json")).expect("copy a matrix");
        }
    }
    std::fs::copy(
        root.join("adapters/degradation-keys.txt"),
        copy.path().join("adapters/degradation-keys.txt"),
    )
    .expect("copy the key list");
    copy
}

fn check(dir: &Path) -> (bool, String) {
    let out = Command::new("bash")
        .arg(dir.join("scripts/check-degradation-keys.sh"))
        .output()
        .expect("run the check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_key_dropped_from_the_matrix_fails_the_check_until_a_test_closes_it() {
    let copy = copy_of_the_matrices();
    let (ok, text) = check(copy.path());
    assert!(ok, "the repository's own matrices fail the check: {text}");

    // Make the first lossy cell of the first matrix that has one exact: its key is dropped.
    let mut dropped = None;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(copy.path().join("adapters"))
        .expect("adapters/")
        .flatten()
        .map(|entry| entry.path().join("matrix.json"))
        .filter(|path| path.is_file())
        .collect();
    dirs.sort();
    for path in dirs {
        let mut matrix: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let Some(cells) = matrix["cells"].as_object_mut() else {
            continue;
        };
        let lossy = cells
            .iter()
            .find(|(_, cell)| cell["status"] == "lossy")
            .map(|(feature, cell)| (feature.clone(), cell["key"].as_str().map(String::from)));
        if let Some((feature, Some(key))) = lossy {
            cells.insert(feature, serde_json::json!({"status": "exact"}));
            std::fs::write(&path, serde_json::to_string_pretty(&matrix).expect("json"))
                .expect("write");
            dropped = Some(key);
            break;
        }
    }
    let key = dropped.expect("some matrix has a lossy cell with a key");
    let (ok, text) = check(copy.path());
    assert!(!ok, "dropping {key} passed the check: {text}");
    assert!(
        text.contains(&key),
        "the failure does not name {key}: {text}"
    );

    // A test that closes it lets the key go: the check names the test and asks for the key's
    // line to be taken off the list, and passes once it is.
    let test = format!("test_closes_{}", key.replace(['-', ':'], "_"));
    std::fs::write(
        copy.path().join("closes.rs"),
        format!("#[test]\nfn {test}() {{}}\n"),
    )
    .expect("write the closing test");
    let (_, text) = check(copy.path());
    assert!(
        text.contains(&test),
        "the check does not name {test}: {text}"
    );
    let list = copy.path().join("adapters/degradation-keys.txt");
    let kept: String = std::fs::read_to_string(&list)
        .expect("read the list")
        .lines()
        .filter(|line| line.trim() != key)
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&list, kept).expect("write the list");
    let (ok, text) = check(copy.path());
    assert!(ok, "{test} did not close {key}: {text}");
}
