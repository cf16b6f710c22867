//! The launch spec and the pane identity derived from it (spec §2).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Everything that defines what a pane runs. Its canonical JSON hashes to the generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LaunchSpec {
    pub session: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Declared environment: part of the generation.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Environment inherited from the client that asked for the pane: not part of the
    /// generation, so the same declaration from two shells is the same generation.
    #[serde(default)]
    pub base_env: BTreeMap<String, String>,
    /// The requesting client's terminal type, for a child whose `base_env` has no `TERM` (a
    /// pane started from another machine, whose environment means nothing here): not part of
    /// the generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<String>,
    /// The DING delivery policy token, if declared.
    #[serde(default)]
    pub ding_policy: Option<String>,
    /// The DING adapter command, if declared.
    #[serde(default)]
    pub adapter_command: Option<Vec<String>>,
    /// Initial size.
    #[serde(default = "default_rows")]
    pub rows: u16,
    #[serde(default = "default_cols")]
    pub cols: u16,
    /// Pane size policy for attached clients.
    #[serde(default)]
    pub size_policy: SizePolicy,
    /// The adapter (an opaque name of a directory under the adapters directory) whose
    /// declaration says which lifecycle events the host fires for this harness. Not part of
    /// the generation: it changes no byte the program sees.
    #[serde(default)]
    pub adapter: Option<String>,
    /// Arguments appended to `argv` when the program starts (how the charter reaches it).
    /// Not part of the generation: the same declaration with a charter is the same program.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Environment added when the program starts (how the charter reaches it). Not part of
    /// the generation.
    #[serde(default)]
    pub extra_env: BTreeMap<String, String>,
    /// Scrollback lines kept by the screen model.
    #[serde(default = "default_scrollback")]
    pub scrollback: usize,
    /// The most bytes the screen model's compact history may take (the pane host's compact history);
    /// the oldest lines go first past it, as past the line cap.
    #[serde(default = "default_scrollback_bytes")]
    pub scrollback_bytes: usize,
}

fn default_rows() -> u16 {
    24
}
fn default_cols() -> u16 {
    80
}
fn default_scrollback() -> usize {
    2000
}
fn default_scrollback_bytes() -> usize {
    crate::limits::DEFAULT_SCROLLBACK_BYTES as usize
}

/// Which attached client decides the pane size (spec §5): the protocol's type.
pub use crate::request::SizePolicy;

impl LaunchSpec {
    /// `sha256:<hex>` of the canonical launch spec: argv, cwd, declared env, DING policy and
    /// adapter command. Same declaration, same generation.
    pub fn generation(&self) -> String {
        #[derive(Serialize)]
        struct Canonical<'a> {
            argv: &'a [String],
            cwd: &'a Option<String>,
            env: &'a BTreeMap<String, String>,
            ding_policy: &'a Option<String>,
            adapter_command: &'a Option<Vec<String>>,
        }
        let canonical = Canonical {
            argv: &self.argv,
            cwd: &self.cwd,
            env: &self.env,
            ding_policy: &self.ding_policy,
            adapter_command: &self.adapter_command,
        };
        // Serializing plain strings and maps cannot fail; an empty fallback would still hash.
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        let digest = Sha256::digest(&bytes);
        let mut hex = String::with_capacity(64);
        for byte in digest {
            hex.push_str(&format!("{byte:02x}"));
        }
        format!("sha256:{hex}")
    }
}

/// A fresh random 128-bit incarnation, hex encoded.
pub fn new_incarnation() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Fall back to time and pid: still unique per process start on this machine.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mixed = nanos ^ (u128::from(std::process::id()) << 96);
        bytes = mixed.to_be_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LaunchSpec {
        serde_json::from_value(serde_json::json!({"session":"w","argv":["sh"]})).unwrap()
    }

    #[test]
    fn generation_ignores_base_env_and_size() {
        let a = spec();
        let mut b = spec();
        b.base_env.insert("PATH".into(), "/x".into());
        b.rows = 50;
        assert_eq!(a.generation(), b.generation());
        let mut c = spec();
        c.env.insert("K".into(), "V".into());
        assert_ne!(a.generation(), c.generation());
        let mut d = spec();
        d.adapter_command = Some(vec!["x".into()]);
        assert_ne!(a.generation(), d.generation());
        assert!(a.generation().starts_with("sha256:"));
        assert_eq!(a.generation().len(), 7 + 64);
    }

    #[test]
    fn incarnations_differ() {
        let a = new_incarnation();
        assert_eq!(a.len(), 32);
        assert_ne!(a, new_incarnation());
    }
}
