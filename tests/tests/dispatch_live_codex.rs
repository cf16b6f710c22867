//! Issue 9 items 2 and 3, live: the real Codex pinned in `tests/harnesses.json` (`codex exec`)
//! runs the real `belfry dispatch --native codex` as its hooks, inside a loopback-only network namespace
//! (`unshare -n`) against the project's scripted model server (OpenAI Responses) on 127.0.0.1. Proven: a
//! prompt-submit context reaches the model (as a developer message in the next request); a
//! `shell`-class guard matches Codex's `Bash` and its deny blocks the shell call (the command's
//! side effect never happens, and the model sees the refusal in the next request).
//!
//! Gated: it needs `unshare -n`, the pinned Codex that `scripts/install-harnesses` puts in
//! `target/harnesses` (`tests/harnesses.json`; or `$BELFRY_CODEX_BIN`) and the project's
//! scripted model server (`belfry-model-server`, or `$BELFRY_MODEL_SERVER`). Run it with
//! `cargo test -p belfry-tests --test dispatch_live_codex -- --ignored`. A missing
//! prerequisite fails the test with the reason; it is never skipped silently.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use belfry_tests::belfry_bin;
use belfry_tests::projection_live::{
    harness_bin, model_server, offline_run, pinned_version, OfflineRun,
};
use serde_json::{json, Value};

const CONTEXT_MARK: &str = "BELFRY-CTX-7731 repo uses trunk-based flow";
const DENY_MARK: &str = "BELFRY-DENY no force push";
const PROMPT: &str = "push the branch";

/// The scripted model: the prompt gets one shell (`exec_command`) call that would leave a
/// side effect, then a text answer; everything else (the title request too) a text answer.
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
fn codex_blocks_on_the_deny_and_delivers_the_context() {
    let codex = harness_bin(
        "codex",
        "BELFRY_CODEX_BIN",
        "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    );
    let version = Command::new(&codex)
        .arg("--version")
        .output()
        .expect("codex --version");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert_eq!(
        version,
        format!("codex-cli {}", pinned_version("codex")),
        "the pinned harness version"
    );

    let dir = tempfile::tempdir().expect("run dir");
    let d = dir.path();
    for sub in ["home/codex", "work"] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    let belfry_hooks = d.join("belfry-hooks.json");
    let hooks = json!({"version": 1, "events": {
        "prompt-submit": [{"handlers": [{"argv": ["/bin/sh", "-c", format!("echo {CONTEXT_MARK}")]}]}],
        "before-tool": [{"matcher": "shell", "handlers": [{"intent": "enforce",
            "argv": ["/bin/sh", "-c", format!("echo {DENY_MARK} >&2; exit 2")]}]}]
    }});
    write(&belfry_hooks, &hooks.to_string());
    std::fs::set_permissions(&belfry_hooks, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let log = d.join("dispatch.log");
    let entry = |event: &str| {
        json!([{"hooks": [{"type": "command", "timeout": 30, "command": format!(
            "{} dispatch --native codex --event {event} --hooks-file {} | tee -a {}",
            belfry_bin().display(), belfry_hooks.display(), log.display())}]}])
    };
    let codex_hooks = json!({"hooks": {
        "UserPromptSubmit": entry("prompt-submit"),
        "PreToolUse": entry("before-tool")
    }});
    write(&d.join("home/codex/hooks.json"), &codex_hooks.to_string());
    write(
        &d.join("home/codex/config.toml"),
        "model = \"mock-model\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\
         [model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:PORT/v1\"\n\
         env_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\n\
         stream_max_retries = 0\n[analytics]\nenabled = false\n",
    );
    write(
        &d.join("script.json"),
        &script(&d.join("work/side-effect")).to_string(),
    );
    let config = d.join("home/codex/config.toml");
    let output = offline_run(
        &OfflineRun {
            server: &model_server(),
            base: d,
            cwd: &d.join("work"),
            home: &d.join("home"),
            script: &d.join("script.json"),
            requests: &d.join("requests.jsonl"),
        },
        // The provider's port is known once the server listens.
        &format!(
            "sed -i \"s/127.0.0.1:PORT/127.0.0.1:$PORT/\" {}",
            config.display()
        ),
        &format!(
            "timeout 90 {} exec --skip-git-repo-check --dangerously-bypass-hook-trust \
             --dangerously-bypass-approvals-and-sandbox '{PROMPT}'",
            codex.display()
        ),
        &[
            ("CODEX_HOME", d.join("home/codex").display().to_string()),
            ("MOCK_API_KEY", "x".into()),
            ("SHELL", "/bin/sh".into()),
        ],
    );
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report = format!(
        "{version}\nexec.out:\n{}\nexec.err:\n{stderr}\ndispatch.log:\n{}",
        String::from_utf8_lossy(&output.stdout),
        read("dispatch.log")
    );
    assert!(output.status.success(), "{report}");
    // The server logs each request with its kind and body; the model's turns are the requests
    // it answered from the script (the title request, which offers no tools, is not one).
    let requests: Vec<Value> = read("requests.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|request| request["kind"] == "turn" || request["kind"] == "tool-result")
        .map(|request| request["body"].clone())
        .collect();
    assert!(
        requests.len() >= 2,
        "{version}: the model was asked {} times\n{report}",
        requests.len()
    );

    // The context reached the model as a developer message.
    let developer_context = requests[0]["input"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|item| item["role"] == "developer" && item.to_string().contains(CONTEXT_MARK));
    assert!(
        developer_context,
        "{version}: no developer message with the context\n{report}"
    );

    // The deny blocked the shell call: no side effect, and the refusal is in the next request.
    assert!(
        !d.join("work/side-effect").exists(),
        "{version}: the denied command ran\n{report}"
    );
    let refusal = requests.iter().skip(1).any(|request| {
        request["input"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|item| {
                item["type"] == "function_call_output" && item.to_string().contains(DENY_MARK)
            })
    });
    assert!(
        refusal,
        "{version}: the model never saw the refusal\n{report}"
    );
    assert!(
        stderr.contains("PreToolUse Blocked"),
        "{version}: Codex did not report the hook as blocking\n{report}"
    );
}
