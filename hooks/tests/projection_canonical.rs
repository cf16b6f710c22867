//! The canonical hook file (spec §9): every invalid file of the fixture set gets its precise
//! error (`FILE:LINE:COL: problem`), and a valid file lowers and compiles to the hooks file
//! dispatch reads. The target names here are made up; the real adapters are tested in
//! `tests/tests/hooks_projection.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use belfry_hooks::canonical::{self, compile, Scope};

fn known() -> BTreeSet<String> {
    ["alpha", "beta"].iter().map(|s| s.to_string()).collect()
}

fn fixture(name: &str) -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/canonical/invalid")
        .join(format!("{name}.kdl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{name}: {err}"));
    (PathBuf::from(format!("{name}.kdl")), text)
}

fn error_of(name: &str) -> String {
    let (path, text) = fixture(name);
    match canonical::parse(&text, &path, Scope::Project, &known()) {
        Ok(file) => panic!("{name}: parsed, expected an error: {file:?}"),
        Err(err) => err.to_string(),
    }
}

macro_rules! invalid {
    ($($name:ident => $expected:expr;)*) => {
        $(
            #[test]
            fn $name() {
                assert_eq!(error_of(stringify!($name)), $expected);
            }
        )*
        #[test]
        fn every_fixture_has_a_test() {
            let names: BTreeSet<&str> = [$(stringify!($name)),*].into_iter().collect();
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/canonical/invalid");
            let mut files = BTreeSet::new();
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("{err}")) {
                let entry = entry.unwrap_or_else(|err| panic!("{err}"));
                let name = entry.file_name().to_string_lossy().trim_end_matches(".kdl").to_string();
                files.insert(name);
            }
            let tested: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
            assert_eq!(files, tested);
        }
    };
}

invalid! {
    async_enforce =>
        "async_enforce.kdl:5:3: `async #true` is for intent \"observe\" only: a harness that does not wait for a hook never sees its deny or context";
    async_not_bool =>
        "async_not_bool.kdl:5:9: the value of `async` must be #true or #false, found \"yes\"";
    bad_failure =>
        "bad_failure.kdl:4:11: failure \"shut\" is not one of: open, closed";
    bad_once =>
        "bad_once.kdl:3:8: once \"turn\" is not one of: session, context";
    bad_hook_name =>
        "bad_hook_name.kdl:1:6: hook name \"no force\" is invalid: use 1 to 64 characters of [A-Za-z0-9._-]";
    bad_intent =>
        "bad_intent.kdl:3:10: intent \"block\" is not one of: observe, enrich, enforce";
    bad_tool_class =>
        "bad_tool_class.kdl:3:10: tool class \"bash\" is not one of: shell, edit, read, web, mcp, any";
    command_not_string =>
        "command_not_string.kdl:3:19: argument 2 of `command` must be a string, found 5";
    deny_at_session_start =>
        "deny_at_session_start.kdl:3:3: effect \"deny\" does not exist at event \"session-start\"; it does at: before-tool, after-tool, prompt-submit, turn-stop, subagent-stop, pre-compact";
    duplicate_hook =>
        "duplicate_hook.kdl:6:6: hook \"a\" is defined twice in this file (first on line 1); a hook's name is its identity";
    duplicate_target =>
        "duplicate_target.kdl:4:19: target \"alpha\" is given twice";
    empty_reason =>
        "empty_reason.kdl:1:58: the value of `reason` is empty";
    empty_program =>
        "empty_program.kdl:3:11: the program of `command` is empty";
    empty_targets =>
        "empty_targets.kdl:4:3: `targets` (name at least one adapter) is empty";
    enforce_without_deny =>
        "enforce_without_deny.kdl:5:3: intent \"enforce\" must list effect \"deny\": an enforcer's purpose is to refuse";
    enrich_denies =>
        "enrich_denies.kdl:5:3: intent \"enrich\" may not deny: use intent \"enforce\" for a hook that refuses";
    field_with_block =>
        "field_with_block.kdl:2:25: `event` takes values, not a `{ … }` block: event \"before-tool\"";
    memory_append_command =>
        "memory_append_command.kdl:1:27: `append` in `memory` needs a `file` memory to append to (a `command` memory has no file)";
    memory_twice =>
        "memory_twice.kdl:2:1: `memory` is given twice in the top level (first on line 1); keep one";
    memory_two_sources =>
        "memory_two_sources.kdl:3:3: `memory` takes exactly one source, `file \"PATH\"` or `command \"PROGRAM\" …`: memory { file \"NOTES.md\" }";
    memory_unknown_node =>
        "memory_unknown_node.kdl:2:3: unknown node `path` in memory; expected one of: file, command, append";
    missing_command =>
        "missing_command.kdl:1:1: hook \"a\" has no `command`: command \"PROGRAM\" \"ARG\"…";
    missing_event =>
        "missing_event.kdl:1:1: hook \"a\" has no `event`: event \"before-tool\"";
    missing_targets =>
        "missing_targets.kdl:1:1: hook \"a\" has no `targets`: targets \"ADAPTER\" \"ADAPTER\"…";
    native_two_targets =>
        "native_two_targets.kdl:3:3: `select native=` makes a hook target-specific: give exactly one target, found 2";
    observe_with_effect =>
        "observe_with_effect.kdl:5:3: intent \"observe\" may have no effects: an observer neither denies nor adds context";
    repeated_field =>
        "repeated_field.kdl:3:3: `event` is given twice in hook \"a\" (first on line 2); keep one";
    rewrite =>
        "rewrite.kdl:5:18: effect \"rewrite\" is not carried by belfry dispatch yet (its answer has a decision, a reason and a context, no new tool input); remove it";
    select_on_prompt =>
        "select_on_prompt.kdl:3:3: `select` applies to tool events (before-tool, after-tool) only; event \"prompt-submit\" has no tool to select";
    select_unknown_property =>
        "select_unknown_property.kdl:3:10: `select` has no property `name`: select tool=\"shell\" (or select native=\"ExactToolName\")";
    syntax_error =>
        "syntax_error.kdl:2:9: not valid KDL v2: Unexpected newline in single-line quoted string (You can make a string multi-line by wrapping it in '\"\"\"', with a newline immediately after the opening quotes.)";
    timeout_not_integer =>
        "timeout_not_integer.kdl:4:14: the value of `timeout-ms` must be an integer (milliseconds), found \"5s\"";
    timeout_zero =>
        "timeout_zero.kdl:4:14: timeout-ms 0 is out of range 1..=600000";
    unknown_effect =>
        "unknown_effect.kdl:5:18: effect \"block\" is not one of: deny, context, rewrite";
    unknown_event =>
        "unknown_event.kdl:2:9: event \"pre-tool\" is not one of: session-start, session-end, prompt-submit, before-tool, after-tool, turn-stop, stop-failure, pre-compact, subagent-start, subagent-stop, notification, interrupt";
    unknown_field =>
        "unknown_field.kdl:3:3: unknown node `comand` in hook \"a\"; expected one of: event, intent, select, command, command-windows, timeout-ms, async, failure, effects, targets, once, reason";
    unknown_target =>
        "unknown_target.kdl:4:19: target \"gamma\" is not a known adapter; known: alpha, beta";
    unknown_top_node =>
        "unknown_top_node.kdl:1:1: unknown node `hooks` in the top level; expected one of: hook, memory";
}

const VALID: &str = r#"
// A guard, an enricher and an observer.
hook "no-force-push" {
  event "before-tool"
  intent "enforce"
  select tool="shell|edit"
  command "scripts/guard.sh" "--strict"
  command-windows "scripts\\guard.cmd"
  timeout-ms 5000
  failure "closed"
  targets "alpha" "beta"
}
hook "notes" {
  event "prompt-submit"
  command "add-notes"
  targets "beta"
}
hook "log" {
  event "after-tool"
  intent "observe"
  select native="Shell"
  command "log-call"
  async #true
  targets "alpha"
}
"#;

#[test]
fn a_valid_file_lowers_with_defaults_and_identity() {
    let file = canonical::parse(
        VALID,
        Path::new("belfry-hooks.kdl"),
        Scope::Project,
        &known(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(file.hooks.len(), 3);
    let guard = &file.hooks[0];
    assert_eq!(guard.id.to_string(), "project hook \"no-force-push\"");
    assert_eq!(guard.at.line, 3);
    assert_eq!(guard.selector.matcher(), "shell|edit");
    assert_eq!(
        guard.command_windows.as_deref(),
        Some(&["scripts\\guard.cmd".to_string()][..])
    );
    let effects: Vec<&str> = guard.effects.iter().map(|e| e.as_str()).collect();
    assert_eq!(effects, ["deny"]);
    let notes = &file.hooks[1];
    assert_eq!(notes.intent, canonical::Intent::Enrich);
    assert_eq!(notes.timeout_ms, canonical::DEFAULT_TIMEOUT_MS);
    assert_eq!(notes.selector.matcher(), "*");
    assert_eq!(file.hooks[2].selector.matcher(), "native:Shell");
    assert!(file.hooks[2].is_async);
    assert!(file.sha256.starts_with("sha256:") && file.sha256.len() == 71);
}

#[test]
fn one_name_in_the_project_and_the_user_file_is_two_hooks() {
    let text = "hook \"a\" { event \"prompt-submit\"; command \"x\"; targets \"alpha\" }\n";
    let project = canonical::parse(text, Path::new("p.kdl"), Scope::Project, &known());
    let user = canonical::parse(text, Path::new("u.kdl"), Scope::User, &known());
    let (project, user) = match (project, user) {
        (Ok(project), Ok(user)) => (project, user),
        other => panic!("{other:?}"),
    };
    assert_ne!(project.hooks[0].id, user.hooks[0].id);
    assert_eq!(user.hooks[0].id.to_string(), "user hook \"a\"");
}

#[test]
fn compiles_to_the_hooks_file_dispatch_reads() {
    let file = canonical::parse(
        VALID,
        Path::new("belfry-hooks.kdl"),
        Scope::Project,
        &known(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let hooks: Vec<_> = file.hooks.iter().collect();
    for platform in [compile::Platform::Unix, compile::Platform::Windows] {
        let value = compile::hooks_file(&hooks, platform);
        let bytes = compile::to_file_bytes(&value);
        // The dispatcher's own loader accepts what the compiler writes.
        let loaded = belfry_hooks::handlers::HooksFile::parse(Path::new("hooks.json"), &bytes)
            .unwrap_or_else(|err| panic!("{err}"));
        let argv: Vec<String> = loaded.events["before-tool"][0].handlers[0].argv.clone();
        match platform {
            compile::Platform::Unix => assert_eq!(argv, ["scripts/guard.sh", "--strict"]),
            compile::Platform::Windows => assert_eq!(argv, ["scripts\\guard.cmd"]),
        }
    }
    insta::assert_json_snapshot!(compile::hooks_file(&hooks, compile::Platform::Unix));
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let text = format!("hook \"a\" {}{}", "{ x ".repeat(300), "}".repeat(300));
    let err = canonical::parse(&text, Path::new("deep.kdl"), Scope::Project, &known())
        .err()
        .map(|err| err.to_string())
        .unwrap_or_default();
    assert!(
        err.starts_with("deep.kdl:1:") && err.contains("too deeply"),
        "{err}"
    );
}

#[test]
fn a_once_hook_compiles_to_a_group_dispatch_reads_with_its_ledger_name() {
    let text = r#"
hook "read-docs" { event "before-tool"; select tool="edit"; once "context"; command "show-docs"; targets "alpha" }
hook "plain" { event "before-tool"; command "p"; targets "alpha" }
memory { file "notes/NOTES.md"; append "note-turn" "--short"; }
"#;
    let file = canonical::parse(
        text,
        Path::new("/p/belfry-hooks.kdl"),
        Scope::Project,
        &known(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(file.hooks[0].once, Some(canonical::Once::Context));
    assert_eq!(file.hooks[1].once, None);
    let memory = file.memory.as_ref().unwrap_or_else(|| panic!("no memory"));
    assert_eq!(
        memory.source,
        canonical::MemorySource::File(PathBuf::from("/p/notes/NOTES.md"))
    );
    assert_eq!(
        memory.append,
        Some(vec!["note-turn".to_owned(), "--short".to_owned()])
    );
    let hooks: Vec<_> = file.hooks.iter().collect();
    let bytes = compile::to_file_bytes(&compile::hooks_file(&hooks, compile::Platform::Unix));
    let loaded = belfry_hooks::handlers::HooksFile::parse(Path::new("hooks.json"), &bytes)
        .unwrap_or_else(|err| panic!("{err}"));
    let groups = &loaded.events["before-tool"];
    let once = groups[0].once.as_ref().unwrap_or_else(|| panic!("no once"));
    assert_eq!(once.name, "project/read-docs");
    assert_eq!(once.scope, canonical::Once::Context);
    assert_eq!(groups[1].once, None);
    // A compiled file with a scope dispatch does not know is refused, naming the value.
    let bad = br#"{"version":1,"events":{"before-tool":[{"handlers":[{"argv":["x"]}],"once":{"name":"project/x","scope":"turn"}}]}}"#;
    let err = belfry_hooks::handlers::HooksFile::parse(Path::new("hooks.json"), bad)
        .err()
        .map(|err| err.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("once scope \"turn\" is not one of: session, context"),
        "{err}"
    );
}
