//! Issue 9 items 2 and 3, live: the real Claude Code 2.1.328 (`claude -p`) runs the real
//! `belfry dispatch --native claude` as its hooks, inside a loopback-only network namespace
//! (`unshare -n`) against the project's scripted model server (Anthropic Messages) on 127.0.0.1. Proven: a
//! prompt-submit context reaches the model (the request carries it inline, cut to the 10,000
//! characters Claude Code takes inline); a `shell`-class guard
//! matches Claude Code's `Bash` and its deny blocks the call (the command's side effect never
//! happens, and the model sees the refusal as the tool result).
//!
//! Gated: it needs `unshare -n`, the pinned Claude Code that `scripts/install-harnesses` puts
//! in `target/harnesses` (`tests/harnesses.json`; or `$BELFRY_CLAUDE_BIN`) and the project's
//! scripted model server (`belfry-model-server`, or `$BELFRY_MODEL_SERVER`). Run it with
//! `cargo test -p belfry-tests --test dispatch_live_claude -- --ignored`. A missing
//! prerequisite fails the test with the reason; it is never skipped silently.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use belfry_tests::belfry_bin;
use belfry_tests::projection_live::{harness_bin, model_server, offline_run, OfflineRun};
use serde_json::{json, Value};

const CLAUDE_VERSION: &str = "2.1.337 (Claude Code)";
const CONTEXT_MARK: &str = "BELFRY-CTX-7731 repo uses trunk-based flow";
const DENY_MARK: &str = "BELFRY-DENY no force push";
const PROMPT: &str = "push the branch";

/// The scripted model: the prompt gets one shell (`Bash`) call that would leave a side
/// effect, then a text answer; everything else the fallback.
fn script(marker: &Path) -> Value {
    json!({
        "turns": [{
            "match": PROMPT,
            "tool": { "command": format!("touch {}", marker.display()) },
            "then": { "text": "done" },
        }],
        "fallback": { "text": "done" },
    })
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[test]
#[ignore = "needs unshare -n, scripts/install-harnesses and belfry-model-server; run with --ignored"]
fn claude_code_blocks_on_the_deny_and_delivers_the_context() {
    let claude = harness_bin(
        "claude",
        "BELFRY_CLAUDE_BIN",
        "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    );
    let version = Command::new(&claude)
        .arg("--version")
        .output()
        .expect("claude --version");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert_eq!(version, CLAUDE_VERSION, "the pinned harness version");

    let dir = tempfile::tempdir().expect("run dir");
    let d = dir.path();
    for sub in ["home", "work"] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    let key = "sk-ant-test-0123456789abcdefghijklmnop";
    // Onboarding done, the folder trusted and the key approved: print mode asks nothing.
    let state = json!({"hasCompletedOnboarding": true,
        "projects": {d.join("work").display().to_string(): {"hasTrustDialogAccepted": true}},
        "customApiKeyResponses": {"approved": [&key[key.len() - 20..]]}});
    write(&d.join("home/.claude.json"), &state.to_string());
    let belfry_hooks = d.join("belfry-hooks.json");
    let hooks = json!({"version": 1, "events": {
        // The context is longer than Claude Code takes inline (10,000 chars; 10,001 and more are
        // replaced by a file reference and a 2 KB preview): the dialect cuts it to the cap.
        "prompt-submit": [{"handlers": [{"argv": ["/bin/sh", "-c",
            format!("echo {CONTEXT_MARK}; head -c 11000 /dev/zero | tr '\\0' y")]}]}],
        "before-tool": [{"matcher": "shell", "handlers": [{"intent": "enforce",
            "argv": ["/bin/sh", "-c", format!("echo {DENY_MARK} >&2; exit 2")]}]}]
    }});
    write(&belfry_hooks, &hooks.to_string());
    std::fs::set_permissions(&belfry_hooks, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let log = d.join("dispatch.log");
    let entry = |event: &str| {
        json!([{"matcher": "*", "hooks": [{"type": "command", "timeout": 30, "command": format!(
            "{} dispatch --native claude --event {event} --hooks-file {} | tee -a {}",
            belfry_bin().display(), belfry_hooks.display(), log.display())}]}])
    };
    let settings = json!({"hooks": {
        "UserPromptSubmit": entry("prompt-submit"),
        "PreToolUse": entry("before-tool")
    }});
    write(&d.join("settings.json"), &settings.to_string());
    write(
        &d.join("script.json"),
        &script(&d.join("work/side-effect")).to_string(),
    );
    let output = offline_run(
        &OfflineRun {
            server: &model_server(),
            base: d,
            cwd: &d.join("work"),
            home: &d.join("home"),
            script: &d.join("script.json"),
            requests: &d.join("requests.jsonl"),
        },
        "",
        &format!(
            "ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT timeout 90 {} -p '{PROMPT}' --settings {} --allowedTools Bash",
            claude.display(),
            d.join("settings.json").display()
        ),
        &[
            ("ANTHROPIC_API_KEY", key.to_string()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ],
    );
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let report = format!(
        "{version}\nout:\n{}\nerr:\n{}\ndispatch.log:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        read("dispatch.log")
    );
    assert!(output.status.success(), "{report}");
    // The server logs each request with its body: the bodies are what the model was sent.
    let requests: Vec<Value> = read("requests.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|request| request["body"].clone())
        .collect();
    let with_tools: Vec<&Value> = requests
        .iter()
        .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert!(
        with_tools.len() >= 2,
        "{version}: {} turns\n{report}",
        with_tools.len()
    );

    // The context reached the model with the prompt, inline: cut to the cap, not persisted.
    let first = with_tools[0].to_string();
    assert!(
        first.contains(CONTEXT_MARK),
        "{version}: the first request lacks the context\n{report}"
    );
    assert!(
        first.contains("yyyy\u{2026}"),
        "{version}: the cut context is not inline\n{report}"
    );
    assert!(
        !first.contains("Output too large"),
        "{version}: the context went past the inline cap\n{report}"
    );
    // The deny blocked the Bash call: no side effect, and the refusal is the tool result.
    assert!(
        !d.join("work/side-effect").exists(),
        "{version}: the denied command ran\n{report}"
    );
    let refusal = with_tools.iter().skip(1).any(|request| {
        request["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|message| {
                message["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|block| {
                        block["type"] == "tool_result"
                            && block["is_error"] == true
                            && block.to_string().contains(DENY_MARK)
                    })
            })
    });
    assert!(
        refusal,
        "{version}: the model never saw the refusal\n{report}"
    );
}
