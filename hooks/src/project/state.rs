//! The install state (spec §9), kept in the user's belfry directory
//! ([`super::Context::state_path`]): which project, which canonical file was
//! projected (path and sha256), and per target the adapter data and harness versions, every
//! managed artifact with its digest (compiled hooks files, generated files, the managed groups
//! of a settings file with what apply had to create, trust entries with the exact text
//! appended), and how the target settled. Uninstall removes what this records and nothing
//! else; drift is a recorded digest that no longer matches.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::merge::{Created, PlacedGroup};

/// The only state format this belfry reads and writes.
pub const STATE_VERSION: u32 = 1;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    pub scope: String,
    pub belfry_version: String,
    pub canonical_path: String,
    pub canonical_sha256: String,
    /// The canonical project directory the state belongs to (empty for the user scope): a
    /// state found under another project's key is not acted on.
    #[serde(default)]
    pub project_dir: String,
    /// Directories made to hold this state and its lock, removed by the last uninstall when
    /// empty.
    #[serde(default)]
    pub created_dirs: Vec<String>,
    #[serde(default)]
    pub targets: BTreeMap<String, TargetState>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetState {
    /// `sha256:` of the adapter's projection data this apply used.
    pub adapter_data: String,
    /// The harness version the adapter's matrix was verified with.
    pub harness_verified_with: Option<String>,
    /// The harness version found on this machine, when it was detected.
    pub harness_detected: Option<String>,
    /// `settled`, or `failed: <reason>`.
    pub settlement: String,
    #[serde(default)]
    pub files: Vec<FileRecord>,
    #[serde(default)]
    pub settings: Option<SettingsRecord>,
    #[serde(default)]
    pub trust: Vec<TrustRecord>,
    #[serde(default)]
    pub created_dirs: Vec<String>,
}

impl TargetState {
    /// A target with nothing managed any more (all its hooks left the canonical file).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.settings.is_none() && self.trust.is_empty()
    }
}

/// A file belfry owns whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecord {
    pub path: String,
    pub digest: String,
}

/// The managed part of a settings file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsRecord {
    pub path: String,
    pub hooks_key: String,
    pub groups: Vec<PlacedGroup>,
    pub created: Created,
}

/// A trust entry apply wrote, with the exact text it appended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    pub file: String,
    pub key: String,
    pub hash: String,
    pub appended: String,
    /// The trust file did not exist before this entry was written.
    #[serde(default)]
    pub created_file: bool,
    /// A folder-trust entry of a JSON map (`key` is the project's path); `None` for a hook
    /// trust entry of a TOML file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<FolderRecord>,
}

/// What apply wrote into a harness's folder-trust map, and what was there before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderRecord {
    /// The level written at the key.
    pub value: serde_json::Value,
    /// The key's level before (`None`: no entry).
    pub before: Option<serde_json::Value>,
    /// The whole file before (`None`: there was none).
    pub text_before: Option<String>,
    /// `sha256` of the text apply left.
    pub digest_after: String,
}

impl State {
    /// The state at `path`, `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<State>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("cannot read it: {err}")),
        };
        let state: State = serde_json::from_str(&text).map_err(|err| {
            format!("it is not a belfry hooks state ({err}); remove it to start over")
        })?;
        if state.version != STATE_VERSION {
            return Err(format!(
                "version {} is not supported (this belfry reads version {STATE_VERSION})",
                state.version
            ));
        }
        Ok(Some(state))
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let mut text = serde_json::to_string_pretty(self).map_err(|err| err.to_string())?;
        text.push('\n');
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
        }
        super::write::replace_file(path, text.as_bytes(), Some(0o600))
    }
}
