//! The real-screen fixtures stay true to their pins: every `adapters/<name>/fixtures/screens/`
//! file names the harness version `tests/harnesses.json` pins (a version bump without a new
//! capture fails here), holds the state its file is named after and a real screen, and the
//! folder's `index.json` lists exactly the states present, with a reason for each one missing.
//! Runs in the normal suite: it reads files only.

use std::collections::BTreeSet;

use belfry_tests::live::{workspace, Pin};
use serde_json::Value;

/// The states `tests/tests/live_screens.rs` captures.
const STATES: &[&str] = &[
    "idle-empty",
    "paste-before-enter",
    "after-submit",
    "streaming",
    "idle-answered",
    "permission-dialog",
    "tool-running",
    "api-error",
    "queued-message",
    "after-interrupt",
    "draft",
];

/// States captured beyond [`STATES`] by a harness's own live test.
const EXTRA_STATES: &[&str] = &["confirm-dialog"];

fn read(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn screen_fixtures_name_the_pinned_version_and_their_state() {
    let mut checked = 0;
    for name in [
        "claude",
        "codex",
        "opencode",
        "pi",
        "gemini",
        "pi1",
        "qwen",
        "opencode2",
    ] {
        let pin = Pin::load(name);
        // A pin of a second major (profile `live-N.json`) keeps its screens in `screens-N`.
        let screens = match pin
            .profile
            .strip_prefix("live-")
            .and_then(|p| p.strip_suffix(".json"))
        {
            Some(major) => format!("fixtures/screens-{major}"),
            None => "fixtures/screens".to_string(),
        };
        let dir = workspace()
            .join("adapters")
            .join(&pin.adapter)
            .join(screens);
        let index = read(&dir.join("index.json"));
        assert_eq!(
            index["harness_version"],
            pin.version.as_str(),
            "{name}: index.json"
        );
        let listed: BTreeSet<String> = index["captured"]
            .as_array()
            .expect("captured list")
            .iter()
            .map(|entry| entry["state"].as_str().expect("state").to_string())
            .collect();
        let missing: BTreeSet<String> = index["not_captured"]
            .as_array()
            .expect("not_captured list")
            .iter()
            .map(|entry| {
                let reason = entry["reason"].as_str().unwrap_or("");
                assert!(
                    !reason.is_empty(),
                    "{name}: a state not captured gives no reason"
                );
                entry["state"].as_str().expect("state").to_string()
            })
            .collect();
        let all: BTreeSet<String> = STATES.iter().map(|state| state.to_string()).collect();
        // States a harness has beyond the common ones (Pi 1.x's extension confirm dialog,
        // tests/tests/pi_status_live.rs), each a fixture of its own.
        let extra: BTreeSet<String> = listed
            .iter()
            .filter(|state| EXTRA_STATES.contains(&state.as_str()))
            .cloned()
            .collect();
        assert_eq!(
            listed.union(&missing).cloned().collect::<BTreeSet<_>>(),
            all.union(&extra).cloned().collect::<BTreeSet<_>>(),
            "{name}: index.json accounts for every state exactly"
        );
        assert!(
            listed.is_disjoint(&missing),
            "{name}: a state both captured and missing"
        );
        for state in &listed {
            let fixture = read(&dir.join(format!("{state}.json")));
            assert_eq!(fixture["state"], state.as_str(), "{name}/{state}");
            assert_eq!(
                fixture["harness_version"],
                pin.version.as_str(),
                "{name}/{state}"
            );
            let lines = fixture["peek"]["lines"].as_array().expect("peek lines");
            assert_eq!(lines.len(), 40, "{name}/{state}: a 40-row screen");
            assert!(
                lines
                    .iter()
                    .any(|line| !line.as_str().unwrap_or("").trim().is_empty()),
                "{name}/{state}: the screen is blank"
            );
            assert!(fixture["peek"]["cells"].is_array(), "{name}/{state}: cells");
            checked += 1;
        }
        for state in &missing {
            assert!(
                !dir.join(format!("{state}.json")).exists(),
                "{name}/{state}: listed as not captured, but a fixture exists"
            );
        }
    }
    assert!(checked >= 35, "only {checked} fixtures checked");
}
