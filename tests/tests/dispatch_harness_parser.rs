//! Issue 9 item 2, with the harness's own code: Gemini CLI 0.61.0's hook runner and aggregator
//! (the `HookRunner` / `HookAggregator` its bundle exports) run the real `belfry dispatch
//! --native gemini` as a command hook and judge its answer, exactly as Gemini CLI does before a
//! tool call or a turn: the deny blocks with the handler's reason, a context arrives (escaped the
//! way Gemini CLI escapes it), and a tool of another class is not selected.
//!
//! Gated: it needs `node` and the `@google/gemini-cli@0.61.0` package. Run it with
//! `cargo test -p belfry-tests --test dispatch_harness_parser -- --ignored`; it uses
//! `$BELFRY_HARNESS_PKGS/google-gemini-cli-0.61.0` when set, else `npm pack`s the pinned version
//! into a temporary directory (so the registry must be reachable). A missing prerequisite fails
//! the test with the reason; it is never skipped silently.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use belfry_tests::belfry_bin;
use serde_json::{json, Value};

const GEMINI_CLI: &str = "@google/gemini-cli@0.61.0";

/// The unpacked package directory (`…/package`).
fn gemini_package(scratch: &Path) -> PathBuf {
    belfry_tests::npm_package(GEMINI_CLI, "google-gemini-cli-0.61.0", scratch)
}

/// The bundle chunk that exports the hook runner (its name is a build hash).
fn hook_chunk(package: &Path) -> PathBuf {
    let bundle = package.join("bundle");
    let mut chunks: Vec<PathBuf> = std::fs::read_dir(&bundle)
        .unwrap_or_else(|e| panic!("{}: {e}", bundle.display()))
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("chunk-") && n.ends_with(".js"))
        })
        .filter(|path| {
            std::fs::read_to_string(path).is_ok_and(|text| {
                text.contains("var HookRunner = class") && text.contains("  HookAggregator,\n")
            })
        })
        .collect();
    chunks.sort();
    chunks
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no chunk of {} exports HookRunner", bundle.display()))
}

/// Runs each case through Gemini CLI's runner and aggregator; one JSON line per case.
const PROBE: &str = r#"
const [bundle, belfry, hooks, casesJson] = process.argv.slice(2);
const m = await import(bundle);
const config = { isTrustedFolder: () => true, sanitizationConfig: {},
                 storage: { getPlansDir: () => "/tmp" } };
const runner = new m.HookRunner(config);
const aggregator = new m.HookAggregator();
for (const c of JSON.parse(casesJson)) {
  const hook = { type: "command", timeout: 10000,
    command: `${belfry} dispatch --native gemini --event ${c.event} --hooks-file ${hooks}` };
  const input = { session_id: "s1", cwd: "/tmp", hook_event_name: c.native, ...c.input };
  const result = await runner.executeCommandHook(hook, c.native, input, Date.now());
  const out = aggregator.aggregateResults([result], c.native).finalOutput;
  console.log(JSON.stringify({ name: c.name, exitCode: result.exitCode ?? null,
    success: result.success, blocked: out ? out.isBlockingDecision() : null,
    reason: out && out.isBlockingDecision() ? out.getEffectiveReason() : null,
    context: out ? (out.getAdditionalContext() ?? null) : null }));
}
process.exit(0);
"#;

#[test]
#[ignore = "needs node and @google/gemini-cli@0.61.0 (npm); run with --ignored"]
fn gemini_cli_judges_the_rendered_answers_as_belfry_means_them() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let package = gemini_package(scratch.path());
    let chunk = hook_chunk(&package);
    let hooks = scratch.path().join("hooks.json");
    let refuse = json!({"argv": ["/bin/sh", "-c", "echo 'no force push' >&2; exit 2"]});
    let enrich = json!({"argv": ["/bin/sh", "-c", "echo 'repo uses <trunk> flow'"]});
    let file = json!({"version": 1, "events": {
        "before-tool": [{"matcher": "shell", "handlers": [refuse]}],
        "after-tool": [{"matcher": "any", "handlers": [enrich]}],
        "prompt-submit": [{"handlers": [enrich]}],
        "turn-stop": [{"handlers": [refuse]}],
        "session-start": [{"handlers": [enrich]}]
    }});
    std::fs::write(&hooks, file.to_string()).expect("hooks");
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let probe = scratch.path().join("probe.mjs");
    std::fs::write(&probe, PROBE).expect("probe");
    let cases = json!([
        {"name": "shell denied", "event": "before-tool", "native": "BeforeTool",
         "input": {"tool_name": "run_shell_command", "tool_input": {"command": "git push -f"}}},
        {"name": "read not selected", "event": "before-tool", "native": "BeforeTool",
         "input": {"tool_name": "read_file", "tool_input": {"file_path": "x"}}},
        {"name": "tool result context", "event": "after-tool", "native": "AfterTool",
         "input": {"tool_name": "read_file", "tool_input": {}, "tool_response": {}}},
        {"name": "prompt context", "event": "prompt-submit", "native": "BeforeAgent",
         "input": {"prompt": "hi"}},
        {"name": "turn retried", "event": "turn-stop", "native": "AfterAgent",
         "input": {"prompt": "hi", "prompt_response": "done", "stop_hook_active": false}},
        {"name": "session context", "event": "session-start", "native": "SessionStart",
         "input": {"source": "startup"}}
    ]);
    let out = Command::new("node")
        .arg(&probe)
        .arg(&chunk)
        .arg(belfry_bin())
        .arg(&hooks)
        .arg(cases.to_string())
        .env_remove("BELFRY_SESSION")
        .env_remove("BELFRY_HOOKS_FILE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).expect("probe line"))
        .collect();
    let by_name = |name: &str| {
        results
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no result for {name}: {stdout}"))
    };
    let escaped = "repo uses &lt;trunk&gt; flow";
    let expected = [
        (
            "shell denied",
            json!(true),
            json!("no force push"),
            Value::Null,
        ),
        ("read not selected", json!(false), Value::Null, Value::Null),
        (
            "tool result context",
            json!(false),
            Value::Null,
            json!(escaped),
        ),
        ("prompt context", json!(false), Value::Null, json!(escaped)),
        (
            "turn retried",
            json!(true),
            json!("no force push"),
            Value::Null,
        ),
        ("session context", json!(false), Value::Null, json!(escaped)),
    ];
    for (name, blocked, reason, context) in expected {
        let result = by_name(name);
        // Exit 0 every time: Gemini CLI reads any other code but 1 as a deny.
        assert_eq!(result["exitCode"], 0, "{name}: {result}");
        assert_eq!(result["success"], true, "{name}: {result}");
        assert_eq!(result["blocked"], blocked, "{name}: {result}");
        assert_eq!(result["reason"], reason, "{name}: {result}");
        assert_eq!(result["context"], context, "{name}: {result}");
    }
}
