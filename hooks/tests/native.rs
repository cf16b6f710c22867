//! SPEC §8 `--native DIALECT`, against the built-in `test` dialect (`hooks/dialects/test.json`)
//! and dialect files in a dialects directory.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use belfry_hooks::{run_dispatch, Decision, DispatchOptions, DispatchOutput};
use common::{handler, options, Fixture};
use serde_json::{json, Value};

const STDIN: &[u8] = br#"{"hook_event_name":"PreThing","tool_name":"shell","tool_input":{}}"#;

/// A fixture whose handler refuses (exit 2) or adds context, and an empty dialects directory
/// so that only the built-in dialect can answer.
struct NativeFixture {
    fixture: Fixture,
    dialects_dir: PathBuf,
}

impl NativeFixture {
    fn new() -> NativeFixture {
        let fixture = Fixture::new();
        let dialects_dir = fixture.path("dialects");
        fs::create_dir(&dialects_dir).expect("mkdir");
        NativeFixture {
            fixture,
            dialects_dir,
        }
    }

    fn run(&self, event: &str, script: &str, dialect: &str) -> DispatchOutput {
        let argv = self.fixture.script("handler.sh", script);
        let hooks = self
            .fixture
            .hooks_for(event, vec![handler(argv, 5000, "open")]);
        let opts = DispatchOptions {
            native: Some(dialect.to_string()),
            dialects_dir: Some(self.dialects_dir.clone()),
            ..options(event, &hooks)
        };
        run_dispatch(&opts, STDIN)
    }
}

const REFUSE: &str = "echo 'blocked by policy' >&2\nexit 2\n";
const CONTEXT: &str = "echo 'mind the style guide'\n";

fn stdout_json(output: &DispatchOutput) -> Value {
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON value")
}

#[test]
fn deny_renders_as_json_on_stdout_where_the_event_says_so() {
    let native = NativeFixture::new();
    let output = native.run("before-tool", REFUSE, "test");
    assert_eq!(output.exit_code, 0);
    assert!(output.stderr.is_empty());
    assert_eq!(
        stdout_json(&output),
        json!({"verdict": "block", "why": "blocked by policy", "output": {"for": "PreThing"}})
    );
    assert_eq!(output.outcome.decision, Decision::Deny);
}

#[test]
fn deny_renders_as_exit_2_and_stderr_by_default() {
    let native = NativeFixture::new();
    let output = native.run("prompt-submit", REFUSE, "test");
    assert_eq!(output.exit_code, 2);
    assert_eq!(output.stderr, b"blocked by policy\n");
    assert!(output.stdout.is_empty());
}

#[test]
fn context_goes_to_the_json_field_or_plain_stdout() {
    let native = NativeFixture::new();
    let output = native.run("before-tool", CONTEXT, "test");
    assert_eq!(output.exit_code, 0);
    assert_eq!(
        stdout_json(&output),
        json!({"verdict": "pass", "output": {"for": "PreThing", "extra_context": "mind the style guide"}})
    );
    let output = native.run("prompt-submit", CONTEXT, "test");
    assert_eq!(output.exit_code, 0);
    assert_eq!(output.stdout, b"mind the style guide\n");
    assert!(output.stderr.is_empty());
}

#[test]
fn silent_allow_leaves_optional_fields_out() {
    let native = NativeFixture::new();
    let output = native.run("before-tool", "exit 0\n", "test");
    assert_eq!(
        stdout_json(&output),
        json!({"verdict": "pass", "output": {"for": "PreThing"}})
    );
    let output = native.run("prompt-submit", "exit 0\n", "test");
    assert!(output.stdout.is_empty() && output.stderr.is_empty());
    assert_eq!(output.exit_code, 0);
}

#[test]
fn deny_on_non_blocking_event_degrades_to_allow_with_a_note() {
    let native = NativeFixture::new();
    let output = native.run("after-tool", REFUSE, "test");
    assert_eq!(output.exit_code, 0);
    assert_eq!(output.outcome.decision, Decision::Allow);
    assert_eq!(stdout_json(&output), json!({"output": {}}));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("deny degraded to allow"), "{stderr}");
    assert!(
        stderr.contains("cannot block event \"after-tool\""),
        "{stderr}"
    );
    assert!(stderr.contains("blocked by policy"), "{stderr}");
}

#[test]
fn unknown_dialect_fails_open_with_empty_stdout() {
    let native = NativeFixture::new();
    let output = native.run("before-tool", REFUSE, "no-such-dialect");
    assert_eq!(output.exit_code, 0);
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("dialect \"no-such-dialect\" not found"),
        "{stderr}"
    );
    assert_eq!(output.outcome.decision, Decision::Allow);
}

#[test]
fn dialect_file_in_the_directory_is_used_and_must_be_secure() {
    let native = NativeFixture::new();
    let path = native.dialects_dir.join("plain.json");
    let dialect = json!({
        "version": 1,
        "blocking_events": ["before-tool"],
        "default": {
            "allow": {"exit_code": 0, "stdout": {"text": "[$event] $context"}},
            "deny": {"exit_code": 3, "stdout": {"json": {"d": "$decision", "r": "$reason"}}}
        }
    });
    fs::write(&path, dialect.to_string()).expect("write dialect");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
    let output = native.run("before-tool", REFUSE, "plain");
    assert_eq!(output.exit_code, 3);
    assert_eq!(
        stdout_json(&output),
        json!({"d": "deny", "r": "blocked by policy"})
    );
    let output = native.run("before-tool", CONTEXT, "plain");
    assert_eq!(output.stdout, b"[before-tool] mind the style guide\n");

    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
    let output = native.run("before-tool", REFUSE, "plain");
    assert_eq!(output.exit_code, 0);
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("chmod go-w {}", path.display())),
        "{stderr}"
    );
}

#[test]
fn malformed_stdin_in_native_mode_is_a_rendered_allow() {
    let native = NativeFixture::new();
    let hooks = native.fixture.hooks_for("before-tool", vec![]);
    let opts = DispatchOptions {
        native: Some("test".to_string()),
        dialects_dir: Some(native.dialects_dir.clone()),
        ..options("before-tool", &hooks)
    };
    let output = run_dispatch(&opts, b"not json");
    assert_eq!(output.exit_code, 0);
    let rendered = stdout_json(&output);
    assert_eq!(rendered["verdict"], "pass");
    let note = rendered["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("hook stdin is not one JSON object"),
        "{rendered}"
    );
}
