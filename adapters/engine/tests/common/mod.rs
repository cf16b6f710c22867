//! What the engine's fixture-driven tests share: where the adapters' captured screens are and
//! how one is read. A key names an adapter and its screens folder: `claude` reads
//! `adapters/claude/fixtures/screens`, `pi@screens-1` the second pinned major's folder.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use belfry_adapter_engine::Screen;
use serde_json::Value;

/// A fixture key's adapter and fixtures folder: `pi@screens-1` is the adapter `pi` with
/// the screens of its second pinned major; a plain name uses `fixtures/screens`.
pub fn split(key: &str) -> (&str, &str) {
    key.split_once('@').unwrap_or((key, "screens"))
}

pub fn adapters_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The states `index.json` says were captured for `key` (`claude`, or `pi@screens-1` for a second major's folder).
pub fn captured(key: &str) -> Vec<String> {
    let (provider, dir) = split(key);
    let index = read_json(
        &adapters_dir()
            .join(provider)
            .join("fixtures")
            .join(dir)
            .join("index.json"),
    );
    index["captured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["state"].as_str().unwrap().to_string())
        .collect()
}

/// A fixture of `key` (`claude`, or `pi@screens-1` for a second major's folder); a state named `screens-1/<state>` (as a grammar's
/// `proved_by` names one of the second major's screens) is read from that folder.
pub fn fixture(key: &str, state: &str) -> Screen {
    let (provider, dir) = split(key);
    let (dir, state) = state.split_once('/').unwrap_or((dir, state));
    let path = adapters_dir()
        .join(provider)
        .join("fixtures")
        .join(dir)
        .join(format!("{state}.json"));
    Screen::from_value(&read_json(&path)["peek"]).unwrap()
}
