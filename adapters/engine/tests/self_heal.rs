//! Each adapter's `self_heal` declaration against the real screens captured from its harness
//! (`adapters/<name>/fixtures/screens*/`): the error row it declares for a turn that ended on an
//! API error is on the `api-error` screen and on none of the screens without an error, and the
//! stop-failure classes it declares are the harness's own event, each error in one class only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

/// The states captured before the `api-error` one, in the order of the folder's `index.json`:
/// the screens without an error. (The states captured after it were taken in the same session,
/// with the error row still in the scrollback, so they prove nothing either way.)
fn clean_states(screens: &Path) -> Vec<String> {
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(screens.join("index.json")).unwrap())
            .unwrap();
    index["captured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["state"].as_str().unwrap().to_string())
        .take_while(|state| state != "api-error")
        .collect()
}

fn adapters_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn screen_text(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let fixture: Value = serde_json::from_str(&text).unwrap();
    let lines = fixture["peek"]["lines"].as_array()?;
    Some(
        lines
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn each_declared_error_row_is_on_the_api_error_screen_and_on_no_clean_screen() {
    let mut proved = Vec::new();
    for name in ["claude", "codex", "gemini", "opencode", "pi", "qwen"] {
        let dir = adapters_dir().join(name);
        let declaration: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("declaration.json")).unwrap())
                .unwrap();
        let heal = &declaration["self_heal"];
        assert!(heal.is_object(), "{name} declares no self_heal section");
        let Some(pattern) = heal["error_row"].as_str() else {
            // No row: the harness must then fire a stop-failure event.
            assert!(
                heal["stop_failure"].is_object(),
                "{name}: neither an error row nor a stop-failure event"
            );
            continue;
        };
        let row = Regex::new(pattern).unwrap_or_else(|err| panic!("{name}: {err}"));
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir.join("fixtures"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.file_name()
                    .is_some_and(|file| file.to_string_lossy().starts_with("screens"))
            })
            .collect();
        dirs.sort();
        for screens in dirs {
            let label = format!("{name}/{}", screens.file_name().unwrap().to_string_lossy());
            let error = screen_text(&screens.join("api-error.json"))
                .unwrap_or_else(|| panic!("{label}: no api-error screen"));
            assert!(row.is_match(&error), "{label}: {pattern} not on:\n{error}");
            let clean = clean_states(&screens);
            assert!(clean.len() >= 5, "{label}: {clean:?}");
            for clean in &clean {
                if let Some(text) = screen_text(&screens.join(format!("{clean}.json"))) {
                    assert!(
                        !row.is_match(&text),
                        "{label}/{clean}: {pattern} on a screen without an error:\n{text}"
                    );
                }
            }
            proved.push(label);
        }
    }
    assert_eq!(
        proved,
        [
            "claude/screens",
            "codex/screens",
            "gemini/screens",
            "pi/screens",
            "pi/screens-1",
            "qwen/screens"
        ]
    );
}

#[test]
fn each_declared_stop_failure_is_the_harness_event_and_classes_its_errors_once() {
    for name in ["claude", "codex", "gemini", "opencode", "pi", "qwen"] {
        let declaration: Value = serde_json::from_str(
            &std::fs::read_to_string(adapters_dir().join(name).join("declaration.json")).unwrap(),
        )
        .unwrap();
        let heal = &declaration["self_heal"];
        let Some(stop) = heal["stop_failure"].as_object() else {
            assert!(
                heal["unsupported"]
                    .as_str()
                    .is_some_and(|why| !why.is_empty()),
                "{name}: no stop-failure and no reason why"
            );
            assert!(declaration["events"]["stop-failure"].is_null(), "{name}");
            continue;
        };
        assert_eq!(stop["event"], "stop-failure", "{name}");
        assert!(
            declaration["events"]["stop-failure"].is_string(),
            "{name}: the event map has no stop-failure"
        );
        let mut seen = BTreeSet::new();
        for class in ["retry", "quota", "never"] {
            for error in stop
                .get(class)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let error = error.as_str().unwrap();
                assert!(
                    seen.insert(error.to_string()),
                    "{name}: {error} in two classes"
                );
            }
        }
    }
}

#[test]
fn each_captured_stop_failure_falls_in_the_class_its_adapter_declares() {
    let mut checked = Vec::new();
    for name in ["claude", "codex", "gemini", "opencode", "pi", "qwen"] {
        let dir = adapters_dir().join(name);
        let Ok(entries) = std::fs::read_dir(dir.join("fixtures/self-heal")) else {
            continue;
        };
        let declaration: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("declaration.json")).unwrap())
                .unwrap();
        let stop = &declaration["self_heal"]["stop_failure"];
        let field = stop["field"].as_str().expect("a stop_failure with a field");
        let mut paths: Vec<PathBuf> = entries.map(|entry| entry.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            let fixture: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let class = fixture["class"].as_str().unwrap();
            let error = fixture["payload"]
                .pointer(field)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{}: no {field}", path.display()));
            let listed = stop[class]
                .as_array()
                .is_some_and(|errors| errors.iter().any(|listed| listed == error));
            assert!(
                listed,
                "{}: {error} is not in the {class} class",
                path.display()
            );
            checked.push(format!("{name}: {error} -> {class}"));
        }
    }
    assert_eq!(
        checked,
        [
            "claude: rate_limit -> quota",
            "claude: server_error -> retry",
            "qwen: invalid_request -> never"
        ]
    );
}
