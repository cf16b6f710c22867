//! spec §8, §10: `belfry dispatch --native NAME` for every adapter dialect, through the real
//! binary. Golden renderings (insta) of allow / context / deny on every event each adapter
//! declares; each rendering checked against the contract excerpt the adapter ships in
//! `adapters/<name>/fixtures/contract/` (taken from the pinned harness version); the context
//! cap; and a `--native` name with no dialect, which is an error, never a silent allow.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use belfry_tests::belfry_bin;
use serde_json::{json, Map, Value};

/// The dialects the adapters ship, by folder.
const DIALECTS: [&str; 5] = ["claude", "codex", "gemini", "opencode", "pi"];

const CONTEXT_TEXT: &str = "repo uses trunk-based flow";
const DENY_REASON: &str = "no force push to main";

fn adapters_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn declaration(name: &str) -> Value {
    read_json(&adapters_dir().join(name).join("declaration.json"))
}

fn dialect_data(name: &str) -> Value {
    read_json(&adapters_dir().join(name).join("dialect.json"))
}

/// The adapter's native shell tool: the first entry its tool map classes as `shell`.
fn shell_tool(name: &str) -> String {
    declaration(name)["tool_classes"]
        .as_object()
        .and_then(|map| map.iter().find(|(_, class)| *class == "shell"))
        .map(|(native, _)| native.clone())
        .unwrap_or_else(|| panic!("{name}: no shell tool in tool_classes"))
}

/// A temporary directory with a hooks file for one event whose handler answers `script`.
struct Hooks {
    dir: tempfile::TempDir,
}

impl Hooks {
    fn new() -> Hooks {
        Hooks {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Writes the hooks file: one match-all group for `event` running `script` with `/bin/sh`.
    fn file(&self, event: &str, script: &str) -> PathBuf {
        let handler = self.dir.path().join("handler.sh");
        std::fs::write(&handler, script).expect("write handler");
        let path = self.dir.path().join("hooks.json");
        let hooks = json!({"version": 1, "events": {event: [{"matcher": "*", "handlers": [
            {"argv": ["/bin/sh", handler.display().to_string()], "timeout_ms": 5000,
             "intent": "enforce"}]}]}});
        std::fs::write(&path, hooks.to_string()).expect("write hooks");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        path
    }
}

/// What one dispatch wrote and exited with.
struct Run {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

impl Run {
    /// The golden form: stdout as JSON when it is JSON, else as text.
    fn golden(&self) -> Value {
        let stdout = match serde_json::from_str::<Value>(&self.stdout) {
            Ok(value) => value,
            Err(_) => Value::String(self.stdout.clone()),
        };
        json!({"exit": self.code, "stdout": stdout, "stderr": self.stderr})
    }

    fn stdout_json(&self) -> Option<Value> {
        if self.stdout.is_empty() {
            return None;
        }
        // Nothing but one JSON object and its newline (Codex reads stdout whole).
        assert!(
            self.stdout.ends_with('\n') && self.stdout.trim_end().lines().count() == 1,
            "stdout is not exactly one JSON line: {:?}",
            self.stdout
        );
        Some(serde_json::from_str(&self.stdout).expect("stdout is JSON"))
    }
}

/// `belfry dispatch --native NAME --event EVENT` outside any pane, with `stdin`.
fn dispatch(name: &str, event: &str, hooks: Option<&Path>, stdin: &Value) -> Run {
    let mut cmd = Command::new(belfry_bin());
    cmd.args(["dispatch", "--native", name, "--event", event]);
    if let Some(hooks) = hooks {
        cmd.arg("--hooks-file").arg(hooks);
    }
    let mut child = cmd
        .env_remove("BELFRY_HOOKS_FILE")
        .env_remove("BELFRY_SESSION")
        .env_remove("BELFRY_SOCKET")
        .env_remove("BELFRY_DIALECTS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start belfry dispatch");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.to_string().as_bytes())
        .expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("dispatch output");
    Run {
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
        code: out.status.code(),
    }
}

/// The three answers every event is rendered for.
const CASES: [(&str, &str); 3] = [
    ("allow", "exit 0\n"),
    ("context", "echo 'repo uses trunk-based flow'\n"),
    ("deny", "echo 'no force push to main' >&2\nexit 2\n"),
];

/// The hook stdin a harness sends for `event`: its own event name and, for tool events, its
/// own shell tool.
fn stdin_for(name: &str, native_event: &str, semantic: &str) -> Value {
    let mut stdin = json!({"hook_event_name": native_event, "session_id": "s1", "cwd": "/tmp"});
    if semantic == "before-tool" || semantic == "after-tool" {
        stdin["tool_name"] = Value::String(shell_tool(name));
        stdin["tool_input"] = json!({"command": "git push --force"});
    }
    stdin
}

/// Every (semantic event, native event, case) rendering of one dialect.
fn renderings(name: &str) -> BTreeMap<String, BTreeMap<String, Run>> {
    let decl = declaration(name);
    let events = decl["events"].as_object().expect("events").clone();
    let hooks = Hooks::new();
    let mut all = BTreeMap::new();
    for (semantic, native) in &events {
        let native = native.as_str().unwrap_or_default();
        let stdin = stdin_for(name, native, semantic);
        let mut cases = BTreeMap::new();
        for (case, script) in CASES {
            let file = hooks.file(semantic, script);
            cases.insert(
                case.to_string(),
                dispatch(name, semantic, Some(&file), &stdin),
            );
        }
        all.insert(semantic.clone(), cases);
    }
    all
}

fn golden(all: &BTreeMap<String, BTreeMap<String, Run>>) -> Value {
    let mut out = Map::new();
    for (event, cases) in all {
        let mut by_case = Map::new();
        for (case, run) in cases {
            by_case.insert(case.clone(), run.golden());
        }
        out.insert(event.clone(), Value::Object(by_case));
    }
    Value::Object(out)
}

/// Checks shared by every dialect: the blocking events really deny, the others never do, a
/// context appears exactly on the events the dialect lists, and nothing leaks to stderr.
fn check_common(name: &str, all: &BTreeMap<String, BTreeMap<String, Run>>) {
    let data = dialect_data(name);
    let blocking: Vec<&str> = data["blocking_events"]
        .as_array()
        .expect("blocking_events")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let context_events = data["context_events"].as_object().expect("context_events");
    for (event, cases) in all {
        for (case, run) in cases {
            let at = format!("{name} {event} {case}");
            let mentions_reason =
                run.stdout.contains(DENY_REASON) || run.stderr.contains(DENY_REASON);
            if case == "deny" && blocking.contains(&event.as_str()) {
                // A deny is never rendered like an allow (Pi's compaction cancel has no reason
                // field; every other blocking event carries the reason).
                assert_ne!(run.golden(), cases["allow"].golden(), "{at}");
                let has_reason_field = !(name == "pi" && event == "pre-compact");
                assert_eq!(mentions_reason, has_reason_field, "{at}: {}", run.golden());
            } else {
                assert!(!mentions_reason, "{at}: {}", run.golden());
                assert_eq!(
                    run.code,
                    Some(0),
                    "{at}: an allow exits 0: {}",
                    run.golden()
                );
                assert_eq!(run.stderr, "", "{at}");
            }
            if case == "context" {
                assert_eq!(
                    run.stdout.contains(CONTEXT_TEXT),
                    context_events.contains_key(event),
                    "{at}: context must appear exactly where the dialect carries it: {}",
                    run.golden()
                );
            }
        }
    }
}

fn native_event(name: &str, semantic: &str) -> String {
    declaration(name)["events"][semantic]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn claude_renderings_match_the_pinned_schema() {
    let all = renderings("claude");
    check_common("claude", &all);
    let contract = read_json(&adapters_dir().join("claude/fixtures/contract/hook-output.json"));
    let top = contract["top_level"].as_object().expect("top_level");
    let specific = contract["hook_specific_output"]
        .as_object()
        .expect("specific");
    for (event, cases) in &all {
        let native = native_event("claude", event);
        for (case, run) in cases {
            let at = format!("claude {event} {case}");
            let Some(output) = run.stdout_json() else {
                continue;
            };
            let object = output.as_object().expect("an object");
            for key in object.keys() {
                assert!(top.contains_key(key), "{at}: unknown top-level field {key}");
            }
            if let Some(decision) = object.get("decision") {
                assert_eq!(decision, "block", "{at}");
                assert!(object
                    .get("reason")
                    .and_then(Value::as_str)
                    .is_some_and(|r| !r.is_empty()));
            }
            if let Some(hso) = object.get("hookSpecificOutput") {
                let allowed = specific
                    .get(&native)
                    .and_then(Value::as_object)
                    .unwrap_or_else(|| panic!("{at}: {native} takes no hookSpecificOutput"));
                assert_eq!(
                    hso["hookEventName"],
                    native.as_str(),
                    "{at}: event mismatch is dropped"
                );
                for key in hso.as_object().expect("object").keys() {
                    assert!(
                        key == "hookEventName" || allowed.contains_key(key),
                        "{at}: {key}"
                    );
                }
            }
        }
    }
    // PreToolUse denies through permissionDecision, with the reason.
    let deny = all["before-tool"]["deny"].stdout_json().expect("json");
    assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(
        deny["hookSpecificOutput"]["permissionDecisionReason"],
        DENY_REASON
    );
    insta::assert_json_snapshot!("claude", golden(&all));
}

/// A minimal draft-07 check of the subset the pinned Codex schemas use: type, enum, const,
/// properties, required, additionalProperties false, allOf with local $ref.
fn schema_errors(schema: &Value, root: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(all_of) = schema["allOf"].as_array() {
        for part in all_of {
            schema_errors(part, root, value, at, errors);
        }
    }
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/definitions/");
        schema_errors(&root["definitions"][name], root, value, at, errors);
    }
    if value.is_null() && schema.get("default").is_some_and(Value::is_null) {
        return;
    }
    if let Some(constant) = schema.get("const") {
        if value != constant {
            errors.push(format!("{at}: {value} is not {constant}"));
        }
    }
    if let Some(options) = schema["enum"].as_array() {
        if !options.contains(value) {
            errors.push(format!("{at}: {value} not in {options:?}"));
        }
    }
    let type_ok = |name: &str| match name {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        _ => true,
    };
    match &schema["type"] {
        Value::String(name) if !type_ok(name) => errors.push(format!("{at}: not a {name}")),
        Value::Array(names) if !names.iter().filter_map(Value::as_str).any(type_ok) => {
            errors.push(format!("{at}: not any of {names:?}"))
        }
        _ => {}
    }
    if let Some(object) = value.as_object() {
        let properties = schema["properties"].as_object();
        for required in schema["required"].as_array().into_iter().flatten() {
            if let Some(key) = required.as_str() {
                if !object.contains_key(key) {
                    errors.push(format!("{at}: missing {key}"));
                }
            }
        }
        for (key, member) in object {
            match properties.and_then(|p| p.get(key)) {
                Some(sub) => schema_errors(sub, root, member, &format!("{at}.{key}"), errors),
                None if schema["additionalProperties"] == false => {
                    errors.push(format!("{at}: unknown field {key}"))
                }
                None => {}
            }
        }
    }
}

/// `PreToolUse` → `pre-tool-use`.
fn kebab(native: &str) -> String {
    let mut out = String::new();
    for (i, ch) in native.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

#[test]
fn codex_renderings_validate_against_the_pinned_schemas() {
    let all = renderings("codex");
    check_common("codex", &all);
    let contract =
        read_json(&adapters_dir().join("codex/fixtures/contract/hook-output-schemas.json"));
    for (event, cases) in &all {
        let native = native_event("codex", event);
        let schema = &contract["schemas"][format!("{}.command.output", kebab(&native))];
        for (case, run) in cases {
            let at = format!("codex {event} {case}");
            let Some(output) = run.stdout_json() else {
                continue;
            };
            assert!(
                !schema.is_null(),
                "{at}: {native} has no output schema, so no output"
            );
            let mut errors = Vec::new();
            schema_errors(schema, schema, &output, "$", &mut errors);
            assert!(
                errors.is_empty(),
                "{at}: {output} violates the schema: {errors:?}"
            );
        }
    }
    // "allow" without updatedInput is unsupported: an allow at before-tool never says "allow".
    assert_eq!(all["before-tool"]["allow"].stdout, "", "before-tool allow");
    let context = all["before-tool"]["context"].stdout_json().expect("json");
    assert_eq!(
        context["hookSpecificOutput"].get("permissionDecision"),
        None
    );
    let deny = all["before-tool"]["deny"].stdout_json().expect("json");
    assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(
        deny["hookSpecificOutput"]["permissionDecisionReason"],
        DENY_REASON
    );
    insta::assert_json_snapshot!("codex", golden(&all));
}

#[test]
fn gemini_always_prints_one_json_object_and_exits_0() {
    let all = renderings("gemini");
    check_common("gemini", &all);
    for (event, cases) in &all {
        for (case, run) in cases {
            let at = format!("gemini {event} {case}");
            // Empty stdout would make Gemini CLI parse stderr; a non-zero exit other than 1
            // would be a deny.
            let output = run
                .stdout_json()
                .unwrap_or_else(|| panic!("{at}: empty stdout"));
            assert!(output.is_object(), "{at}");
            assert_eq!(run.code, Some(0), "{at}");
            let decision = output["decision"].as_str().unwrap_or_default();
            assert!(decision == "allow" || decision == "deny", "{at}: {output}");
        }
    }
    let deny = all["before-tool"]["deny"].stdout_json().expect("json");
    assert_eq!(deny, json!({"decision": "deny", "reason": DENY_REASON}));
    insta::assert_json_snapshot!("gemini", golden(&all));
}

#[test]
fn shim_contracts_are_one_versioned_object_with_at_most_one_action() {
    for name in ["opencode", "pi"] {
        let all = renderings(name);
        check_common(name, &all);
        for (event, cases) in &all {
            for (case, run) in cases {
                let at = format!("{name} {event} {case}");
                let output = run
                    .stdout_json()
                    .unwrap_or_else(|| panic!("{at}: empty stdout"));
                assert_eq!(output["belfry_shim"], 1, "{at}: {output}");
                assert!(
                    output.as_object().is_some_and(|o| o.len() <= 2),
                    "{at}: {output}"
                );
                assert_eq!(run.code, Some(0), "{at}");
            }
        }
        insta::assert_json_snapshot!(name, golden(&all));
    }
}

#[test]
fn context_over_the_harness_cap_is_cut_to_it() {
    let hooks = Hooks::new();
    let long = "x".repeat(12_000);
    let file = hooks.file("prompt-submit", &format!("printf '%s' '{long}'\n"));
    let stdin = json!({"hook_event_name": "UserPromptSubmit", "prompt": "hi"});
    let run = dispatch("claude", "prompt-submit", Some(&file), &stdin);
    let output = run.stdout_json().expect("json");
    let context = output["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("context");
    assert_eq!(
        context.encode_utf16().count(),
        10_000,
        "cut to the documented cap"
    );
    assert!(context.ends_with('\u{2026}'));
}

#[test]
fn native_name_without_a_dialect_is_an_error_listing_those_that_exist() {
    let run = dispatch(
        "no-such-harness",
        "before-tool",
        None,
        &json!({"tool_name": "x"}),
    );
    assert_eq!(run.code, Some(1), "never a silent allow");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("dialect \"no-such-harness\" not found"),
        "{}",
        run.stderr
    );
    for name in DIALECTS.iter().chain(&["test"]) {
        assert!(
            run.stderr.contains(name),
            "{name} not listed: {}",
            run.stderr
        );
    }
}

#[test]
fn every_adapter_with_a_declaration_ships_a_dialect_with_provenance() {
    for name in DIALECTS {
        let data = dialect_data(name);
        let provenance = &data["provenance"];
        assert!(
            provenance["harness_version"]
                .as_str()
                .is_some_and(|v| !v.is_empty()),
            "{name}"
        );
        assert!(
            provenance["sources"]
                .as_array()
                .is_some_and(|s| !s.is_empty()),
            "{name}"
        );
        let fixtures = adapters_dir().join(name).join("fixtures/contract");
        let entries = std::fs::read_dir(&fixtures).map(|e| e.count()).unwrap_or(0);
        assert!(
            entries > 0,
            "{name}: no contract excerpt in {}",
            fixtures.display()
        );
        // Every event the dialect names is an event the adapter declares or the host fires.
        let decl = declaration(name);
        let declared = |event: &str| {
            decl["events"].get(event).is_some()
                || decl["host_lifecycle"]
                    .as_array()
                    .is_some_and(|h| h.iter().any(|e| e == event))
        };
        for event in data["blocking_events"].as_array().into_iter().flatten() {
            assert!(
                declared(event.as_str().unwrap_or_default()),
                "{name}: {event}"
            );
        }
        for event in data["context_events"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            assert!(declared(event), "{name}: {event}");
        }
    }
}

/// Every `"BELFRY_…"` string literal in the core crates' sources.
fn belfry_variables() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names = std::collections::BTreeSet::new();
    let mut stack: Vec<PathBuf> = ["proto", "hooks", "mux", "cli", "ding", "pty"]
        .iter()
        .map(|crate_dir| root.join(crate_dir).join("src"))
        .collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read_dir").flatten() {
                stack.push(entry.path());
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("source");
            for piece in text.split('"').skip(1).step_by(2) {
                if piece.starts_with("BELFRY_")
                    && piece.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                {
                    names.insert(piece.to_string());
                }
            }
        }
    }
    names.into_iter().collect()
}

#[test]
fn no_belfry_variable_is_named_the_way_gemini_strips_from_hooks() {
    let contract = read_json(&adapters_dir().join("gemini/fixtures/contract/hook-output.json"));
    let patterns: Vec<String> = contract["environment"]["redacted_name_patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let names = belfry_variables();
    assert!(
        names.iter().any(|n| n == "BELFRY_HOOK_CONTEXT"),
        "{names:?}"
    );
    for name in &names {
        for pattern in &patterns {
            assert!(
                !name.contains(pattern.as_str()),
                "{name} contains {pattern}: Gemini CLI would strip it from a hook's environment"
            );
        }
    }
}
