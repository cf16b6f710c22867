//! Entry points for the coverage-guided fuzz targets in `fuzz/` (feature `fuzzing`; never in a
//! release build). Each reads what a user or a harness may have written by hand, and panics
//! only where belfry would answer it wrongly.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use crate::canonical::{self, compile, Scope, SEMANTIC_EVENTS};
use crate::dispatch::{run_dispatch, DispatchOptions};
use crate::handlers::HooksFile;
use crate::native::Dialect;
use crate::project::jsonc;
use crate::project::merge::{Created, GroupShape, Merge, WantedGroup};

/// A harness's settings file, read and merged as `belfry hooks apply` merges it.
///
/// - What `serde_json` reads, the JSON(C) reader reads too, to the same value (JSONC is a
///   superset of JSON).
/// - A merge that succeeds leaves a file that reads, with exactly the groups wanted placed.
/// - Started from a file with no group of belfry's, the merge undone gives back every byte.
///
/// Says which of these checks the input reached.
pub fn settings_merge(data: &[u8]) -> MergeChecks {
    let mut checks = MergeChecks::default();
    let Ok(text) = std::str::from_utf8(data) else {
        return checks;
    };
    if let Ok(expected) = serde_json::from_str::<Value>(text) {
        checks.read_as_json = true;
        let read = jsonc::parse(text)
            .unwrap_or_else(|err| panic!("JSON that serde_json reads is refused: {err}"));
        assert_eq!(
            read.value(text),
            Some(expected),
            "the JSON(C) reader's value"
        );
    }
    let wanted: Vec<WantedGroup> = ["Ev", "New"]
        .iter()
        .map(|event| WantedGroup {
            native_event: event.to_string(),
            value: json!({"hooks": [{"type": "command", "command": COMMAND}]}),
            is_async: false,
        })
        .collect();
    let before = Merge::new(
        Some(text),
        "hooks",
        "t",
        "command",
        None,
        Created::default(),
    );
    let mut merge = before;
    if merge.set_groups(&wanted).is_err() {
        return checks;
    }
    checks.merged = true;
    let applied = merge.text.clone();
    if let Err(err) = jsonc::parse(&applied) {
        panic!("the merged file does not read: {err}\n{applied}");
    }
    let placed = merge.placed().map(|placed| placed.len()).ok();
    assert_eq!(placed, Some(wanted.len()), "groups placed in\n{applied}");
    let shapes = wanted
        .iter()
        .map(|group| GroupShape {
            native_event: group.native_event.clone(),
            is_async: false,
            value: group.value.clone(),
            timeout_field: None,
            command: COMMAND.to_string(),
        })
        .collect();
    let mut undo = Merge::new(
        Some(&applied),
        "hooks",
        "t",
        "command",
        None,
        merge.created.clone(),
    )
    .owning(&merge.owned, shapes, false);
    if let Err(err) = undo.set_groups(&[]) {
        panic!("the merge cannot be undone: {err}\n{applied}");
    }
    assert_eq!(undo.text, text, "undone, from\n{applied}");
    checks.undone = true;
    checks
}

/// Which checks of [`settings_merge`] an input reached.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MergeChecks {
    /// `serde_json` read it, and the JSON(C) reader gave the same value.
    pub read_as_json: bool,
    /// The merge succeeded and its result was checked.
    pub merged: bool,
    /// The merge was undone to the original bytes.
    pub undone: bool,
}

/// The managed command the merge writes (the install record, not this command, says which
/// groups are belfry's).
const COMMAND: &str = "belfry dispatch --event e --native t --hooks-file /x";

/// A canonical hooks file (`belfry-hooks.kdl`), as `belfry hooks` reads it: it is read or
/// refused with an error, and what it reads compiles into the hooks file `belfry dispatch`
/// reads back. Returns how many hooks were read and compiled (none when it was refused).
pub fn canonical_file(data: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(data) else {
        return 0;
    };
    let targets: BTreeSet<String> = ["alpha", "beta"].iter().map(|t| t.to_string()).collect();
    let path = Path::new("/project/belfry-hooks.kdl");
    let Ok(file) = canonical::parse(text, path, Scope::Project, &targets) else {
        return 0;
    };
    let hooks: Vec<&canonical::CanonicalHook> = file.hooks.iter().collect();
    for platform in [compile::Platform::Unix, compile::Platform::Windows] {
        let compiled = compile::hooks_file_at(&hooks, platform, Path::new("/project"));
        let bytes = compile::to_file_bytes(&compiled);
        if let Err(err) = HooksFile::parse(Path::new("/compiled.json"), &bytes) {
            panic!(
                "a compiled hooks file does not read back: {err}\n{}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    hooks.len()
}

/// What a harness writes on a hook's stdin, given to `belfry dispatch` for one semantic event
/// in one dialect (both picked by the first byte; the rest is the stdin), with no hooks file:
/// the answer is rendered, never a panic (spec §8: dispatch fails open). Returns the dialect.
pub fn dispatch_stdin(data: &[u8]) -> Option<String> {
    let (&pick, stdin) = data.split_first()?;
    let dialects = Dialect::available(None);
    let mut native = dialects
        .get(usize::from(pick >> 4) % (dialects.len() + 1))
        .cloned();
    let event = SEMANTIC_EVENTS[usize::from(pick & 0x0f) % SEMANTIC_EVENTS.len()];
    if native.is_none() {
        native = Some(String::new());
    }
    let opts = DispatchOptions {
        event: event.to_string(),
        native: native.clone().filter(|name| !name.is_empty()),
        // No hooks file and no call log: nothing is run or written, whatever the environment.
        hooks_file: Some(std::path::PathBuf::new()),
        call_log: Some(std::path::PathBuf::new()),
        ..DispatchOptions::default()
    };
    let _answer = run_dispatch(&opts, stdin);
    native
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzz targets' entry points on inputs that reach every check, and on inputs they
    /// must turn away without a panic.
    #[test]
    fn the_settings_merge_target_reaches_every_check() {
        let kept =
            "// c\n{\n  \"a\": [1, 2,], /* kept */\n  \"hooks\": {\"Ev\": [{\"hooks\": []}]}\n}\n";
        assert_eq!(
            settings_merge(kept.as_bytes()),
            MergeChecks {
                read_as_json: false,
                merged: true,
                undone: true
            }
        );
        assert_eq!(
            settings_merge(b"{\"x\": {\"y\": [null, 1.5e3, \"\\u00e9\"]}}"),
            MergeChecks {
                read_as_json: true,
                merged: true,
                undone: true
            }
        );
        // Not an object, not JSON, not UTF-8: refused before any merge.
        for refused in [&b"[1]"[..], b"{", b"\xff{}"] {
            assert!(!settings_merge(refused).merged, "{refused:?}");
        }
    }

    #[test]
    fn the_dispatch_target_reaches_every_dialect() {
        let dialects = Dialect::available(None);
        assert!(dialects.len() >= 2, "{dialects:?}");
        for (i, name) in dialects.iter().enumerate() {
            let pick = (i as u8) << 4;
            let stdin = br#"{"tool_name": "x", "tool_input": {"command": "ls"}}"#;
            let data: Vec<u8> = std::iter::once(pick).chain(stdin.iter().copied()).collect();
            assert_eq!(dispatch_stdin(&data).as_ref(), Some(name));
        }
        assert_eq!(dispatch_stdin(b""), None);
    }

    #[test]
    fn the_canonical_file_target_compiles_what_it_reads() {
        let text = "hook \"guard\" {\n  event \"before-tool\"\n  intent \"enforce\"\n  \
                    select tool=\"shell\"\n  command \"scripts/guard.sh\" \"--strict\"\n  \
                    failure \"closed\"\n  targets \"alpha\"\n}\n\
                    hook \"notes\" {\n  event \"prompt-submit\"\n  intent \"enrich\"\n  \
                    command \"cat\" \"notes.md\"\n  targets \"alpha\" \"beta\"\n}\n";
        assert_eq!(canonical_file(text.as_bytes()), 2);
        assert_eq!(canonical_file(b"hook \"x\" { event \"nope\" }"), 0);
        assert_eq!(canonical_file(b"\xff"), 0);
    }
}
