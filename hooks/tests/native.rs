//! spec §8 `--native DIALECT`, against the built-in `test` dialect (`hooks/dialects/test.json`)
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
fn unknown_dialect_is_an_error_naming_it_and_the_dialects_that_exist() {
    let native = NativeFixture::new();
    let marker = native.fixture.path("ran");
    let script = format!(
        "touch {}\necho 'blocked by policy' >&2\nexit 2\n",
        marker.display()
    );
    let output = native.run("before-tool", &script, "no-such-dialect");
    assert_eq!(output.exit_code, 1, "never a silent allow");
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("dialect \"no-such-dialect\" not found"),
        "{stderr}"
    );
    assert!(stderr.contains("the dialects that exist: "), "{stderr}");
    // Every dialect that exists is listed: the adapters' embedded ones and `test`.
    for name in belfry_hooks::native::Dialect::available(None) {
        assert!(stderr.contains(&name), "{name} missing from {stderr}");
    }
    assert!(stderr.contains("test"), "{stderr}");
    assert!(
        !marker.exists(),
        "a handler ran for a dialect that cannot answer"
    );
}

#[test]
fn dialect_file_in_the_directory_is_used_and_must_be_secure() {
    let native = NativeFixture::new();
    let path = native.dialects_dir.join("plain.json");
    let dialect = json!({
        "version": 1,
        "blocking_events": ["before-tool"],
        "context_events": {"before-tool": {}},
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
    assert_eq!(
        output.exit_code, 1,
        "a dialect that cannot be used is an error"
    );
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

#[test]
fn context_is_left_out_where_the_dialect_carries_none() {
    let native = NativeFixture::new();
    // `turn-stop` is not in the test dialect's context_events.
    let output = native.run("turn-stop", CONTEXT, "test");
    assert_eq!(output.exit_code, 0);
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
    assert_eq!(output.outcome.context, "");
    assert!(
        output.outcome.reason.contains(
            "context not delivered: dialect \"test\" carries no context on event \"turn-stop\""
        ),
        "{}",
        output.outcome.reason
    );
}

#[test]
fn context_over_the_cap_is_cut_to_it_with_a_mark() {
    let native = NativeFixture::new();
    // The test dialect takes at most 60 UTF-16 code units on prompt-submit.
    let script = format!("printf '%s' '{}'\n", "é".repeat(100));
    let output = native.run("prompt-submit", &script, "test");
    let text = String::from_utf8(output.stdout.clone()).expect("utf-8");
    let line = text.trim_end_matches('\n');
    assert_eq!(line.encode_utf16().count(), 60, "{line}");
    assert!(line.ends_with('\u{2026}'), "{line}");
    assert_eq!(output.outcome.context, line);
    assert!(
        output.outcome.reason.contains("context cut"),
        "{}",
        output.outcome.reason
    );
}

#[test]
fn a_conditional_object_appears_only_with_its_value() {
    let native = NativeFixture::new();
    let output = native.run("session-start", CONTEXT, "test");
    assert_eq!(
        stdout_json(&output),
        json!({"ok": true, "extra": {"text": "mind the style guide"}})
    );
    let output = native.run("session-start", "exit 0\n", "test");
    assert_eq!(stdout_json(&output), json!({"ok": true}));
}

/// A hooks file whose groups select by class, by native name and by `any`; each handler
/// prints its label and the `belfry` member of its stdin.
fn class_hooks(fixture: &Fixture) -> PathBuf {
    let labelled = |label: &str| {
        let argv = fixture.script(
            &format!("{label}.sh"),
            &format!("printf '{label}:'\nsed -n 's/.*\\(\"belfry\":{{[^}}]*}}\\).*/\\1/p'\n"),
        );
        handler(argv, 5000, "open")
    };
    fixture.hooks_file(&json!({
        "version": 1,
        "events": {"before-tool": [
            {"matcher": "shell", "handlers": [labelled("shell")]},
            {"matcher": "native:Sh", "handlers": [labelled("native")]},
            {"matcher": "mcp|edit", "handlers": [labelled("mcp-or-edit")]},
            {"matcher": "any", "handlers": [labelled("any")]}
        ]}
    }))
}

fn class_run(
    fixture: &Fixture,
    hooks: &std::path::Path,
    native: Option<&str>,
    tool: &str,
) -> String {
    let opts = DispatchOptions {
        native: native.map(str::to_string),
        dialects_dir: Some(fixture.path("no-dialects")),
        ..options("before-tool", hooks)
    };
    let stdin = format!(r#"{{"hook_event_name":"PreThing","tool_name":"{tool}","n":1.50}}"#);
    run_dispatch(&opts, stdin.as_bytes()).outcome.context
}

#[test]
fn the_dialect_tool_map_gives_the_class_the_matchers_select_on() {
    let fixture = Fixture::new();
    let hooks = class_hooks(&fixture);
    let run = |native, tool| class_run(&fixture, &hooks, native, tool);
    assert_eq!(
        run(Some("test"), "Sh"),
        "shell:\"belfry\":{\"tool_class\":\"shell\"}\nnative:\"belfry\":{\"tool_class\":\"shell\"}\nany:\"belfry\":{\"tool_class\":\"shell\"}"
    );
    // Another native spelling of the same class: the class groups, not the native one.
    assert_eq!(
        run(Some("test"), "sh"),
        "shell:\"belfry\":{\"tool_class\":\"shell\"}\nany:\"belfry\":{\"tool_class\":\"shell\"}"
    );
    // A `prefix*` pattern of the map.
    assert_eq!(
        run(Some("test"), "ext__server__tool"),
        "mcp-or-edit:\"belfry\":{\"tool_class\":\"mcp\"}\nany:\"belfry\":{\"tool_class\":\"mcp\"}"
    );
    // A tool the map does not know: no class (null), so only `any` selects it.
    assert_eq!(
        run(Some("test"), "mystery"),
        "any:\"belfry\":{\"tool_class\":null}"
    );
    // Without --native the tool_name is the class.
    assert_eq!(
        run(None, "edit"),
        "mcp-or-edit:\"belfry\":{\"tool_class\":\"edit\"}\nany:\"belfry\":{\"tool_class\":\"edit\"}"
    );
    assert_eq!(
        run(None, "Sh"),
        "native:\"belfry\":{\"tool_class\":\"Sh\"}\nany:\"belfry\":{\"tool_class\":\"Sh\"}"
    );
}

#[test]
fn handlers_get_the_harness_bytes_with_only_the_class_added() {
    let fixture = Fixture::new();
    // Prefixed so that the chain reads it as plain context, not as a JSON answer.
    let argv = fixture.script("cat.sh", "sed 's/^/seen:/'\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let opts = DispatchOptions {
        native: Some("test".to_string()),
        dialects_dir: Some(fixture.path("no-dialects")),
        ..options("before-tool", &hooks)
    };
    let stdin = br#" {"tool_name":"Sh","z":1.50,"a":{"k":[1e2]}}"#;
    let seen = run_dispatch(&opts, stdin).outcome.context;
    assert!(
        seen.contains(
            r#"{"belfry":{"tool_class":"shell"},"tool_name":"Sh","z":1.50,"a":{"k":[1e2]}}"#
        ),
        "{seen}"
    );
    // A stdin that already has a `belfry` member is passed on untouched.
    let stdin = br#"{"belfry":{"mine":true},"tool_name":"Sh"}"#;
    let seen = run_dispatch(&opts, stdin).outcome.context;
    assert!(
        seen.contains(r#"{"belfry":{"mine":true},"tool_name":"Sh"}"#),
        "{seen}"
    );
}
