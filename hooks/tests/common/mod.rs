//! Shared fixtures for the integration tests: a temporary directory holding real handler
//! scripts and hooks files, and a checker for the neutral stdout contract.

#![allow(dead_code)] // Each test binary uses a different subset of these helpers.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use belfry_hooks::{run_dispatch, DispatchOptions, DispatchOutput};
use serde_json::{json, Value};
use tempfile::TempDir;

pub struct Fixture {
    pub dir: TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("create temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a `/bin/sh` script and returns the argv that runs it.
    pub fn script(&self, name: &str, body: &str) -> Vec<String> {
        let path = self.path(name);
        fs::write(&path, body).expect("write script");
        vec!["/bin/sh".to_string(), path.display().to_string()]
    }

    /// Writes a hooks file (mode 0600) and returns its path.
    pub fn hooks_file(&self, contents: &Value) -> PathBuf {
        let path = self.path("hooks.json");
        fs::write(&path, serde_json::to_vec_pretty(contents).expect("encode")).expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        path
    }

    /// A hooks file with one match-all group of `handlers` for `event`.
    pub fn hooks_for(&self, event: &str, handlers: Vec<Value>) -> PathBuf {
        self.hooks_file(&json!({
            "version": 1,
            "events": { event: [ { "matcher": "*", "handlers": handlers } ] }
        }))
    }

    /// Whether a handler left its marker file.
    pub fn marker_exists(&self, name: &str) -> bool {
        self.path(name).exists()
    }
}

/// A handler entry running `argv` with a timeout and failure mode.
pub fn handler(argv: Vec<String>, timeout_ms: u64, failure: &str) -> Value {
    json!({ "argv": argv, "timeout_ms": timeout_ms, "intent": "enforce", "failure": failure })
}

pub fn options(event: &str, hooks_file: &Path) -> DispatchOptions {
    DispatchOptions {
        event: event.to_string(),
        hooks_file: Some(hooks_file.to_path_buf()),
        ..DispatchOptions::default()
    }
}

pub const TOOL_STDIN: &[u8] = br#"{"hook_event_name":"BeforeTool","session_id":"s1","cwd":"/tmp","tool_name":"shell","tool_input":{"command":"ls"}}"#;

pub fn dispatch(event: &str, hooks_file: &Path, stdin: &[u8]) -> DispatchOutput {
    run_dispatch(&options(event, hooks_file), stdin)
}

/// The neutral answer as parsed from stdout.
#[derive(Debug)]
pub struct Neutral {
    pub decision: String,
    pub reason: String,
    pub context: String,
}

/// Asserts the spec §8 stdout contract: exit 0, nothing on stderr, and stdout exactly one JSON
/// object with exactly the string fields decision (allow|deny), reason and context.
pub fn neutral(output: &DispatchOutput) -> Neutral {
    assert_eq!(output.exit_code, 0, "neutral dispatch must exit 0");
    assert!(
        output.stderr.is_empty(),
        "stderr: {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stdout.ends_with(b"}\n"),
        "stdout: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    let mut stream = serde_json::Deserializer::from_slice(&output.stdout).into_iter::<Value>();
    let value = stream.next().expect("one JSON value").expect("valid JSON");
    assert!(
        stream.next().is_none(),
        "more than one JSON value on stdout"
    );
    let object = value.as_object().expect("a JSON object");
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["context", "decision", "reason"]);
    let field = |name: &str| object[name].as_str().expect("string field").to_string();
    let answer = Neutral {
        decision: field("decision"),
        reason: field("reason"),
        context: field("context"),
    };
    assert!(
        answer.decision == "allow" || answer.decision == "deny",
        "{answer:?}"
    );
    assert_eq!(answer.decision, output.outcome.decision.as_str());
    assert_eq!(answer.reason, output.outcome.reason);
    assert_eq!(answer.context, output.outcome.context);
    answer
}
