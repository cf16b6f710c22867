//! Issue 9 items 2 and 3, live: the real Codex 0.169.0 (`codex exec`) runs the real
//! `belfry dispatch --native codex` as its hooks, inside a loopback-only network namespace
//! (`unshare -rn`) against a scripted OpenAI Responses server on 127.0.0.1. Proven: a
//! prompt-submit context reaches the model (as a developer message in the next request); a
//! `shell`-class guard matches Codex's `Bash` and its deny blocks the shell call (the command's
//! side effect never happens, and the model sees the refusal in the next request).
//!
//! Gated: it needs `unshare -rn`, `python3` and the `@openai/codex@0.169.0-linux-x64` package.
//! Run it with `cargo test -p belfry-tests --test dispatch_live_codex -- --ignored`; it uses
//! `$BELFRY_HARNESS_PKGS/openai-codex-0.169.0-linux-x64` when set, else `npm pack`s the pinned
//! version (about 170 MB) into a temporary directory. A missing prerequisite fails the test
//! with the reason; it is never skipped silently.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use belfry_tests::belfry_bin;
use serde_json::{json, Value};

const CODEX: &str = "@openai/codex@0.169.0-linux-x64";
const CODEX_VERSION: &str = "codex-cli 0.169.0";
const CONTEXT_MARK: &str = "BELFRY-CTX-7731 repo uses trunk-based flow";
const DENY_MARK: &str = "BELFRY-DENY no force push";

fn codex_binary(scratch: &Path) -> PathBuf {
    let package = belfry_tests::npm_package(CODEX, "openai-codex-0.169.0-linux-x64", scratch);
    let path = package.join("vendor/x86_64-unknown-linux-musl/bin/codex");
    assert!(path.is_file(), "{} does not exist", path.display());
    path
}

/// The scripted model: logs every request; the first turn asks for one `exec_command` call
/// that would leave a side effect, every later request (and the title request, which asks for
/// structured output) gets a plain text answer.
const SERVER: &str = r#"
import json, sys, http.server
port, log, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
turns = {"n": 0}
def sse(events):
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        with open(log, "a") as f: f.write(json.dumps(body) + "\n")
        structured = bool(body.get("text", {}).get("format"))
        if not structured: turns["n"] += 1
        rid = "resp_%d" % turns["n"]
        if turns["n"] == 1 and not structured:
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
                    "arguments": json.dumps({"cmd": "touch " + marker})}
        else:
            item = {"type": "message", "role": "assistant", "id": "msg_" + rid,
                    "content": [{"type": "output_text", "text": "done"}]}
        usage = {"input_tokens": 1, "input_tokens_details": None, "output_tokens": 1,
                 "output_tokens_details": None, "total_tokens": 2}
        data = sse([{"type": "response.created", "response": {"id": rid}},
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                    {"type": "response.completed", "response": {"id": rid, "usage": usage}}])
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

/// Inside the namespace: loopback up, the server, one `codex exec`, the server stopped.
const RUN: &str = r#"
set -u
dir=$1; codex=$2
ip link set lo up 2>/dev/null || true
python3 "$dir/server.py" 18431 "$dir/requests.jsonl" "$dir/work/side-effect" & server=$!
for _ in $(seq 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18431), 0.2)' 2>/dev/null && break
  sleep 0.1
done
cd "$dir/work"
HOME="$dir/home" CODEX_HOME="$dir/home/codex" MOCK_API_KEY=x SHELL=/bin/sh \
  timeout 90 "$codex" exec --skip-git-repo-check --dangerously-bypass-hook-trust \
  --dangerously-bypass-approvals-and-sandbox "push the branch" > "$dir/exec.out" 2> "$dir/exec.err"
echo "exit=$?" >> "$dir/exec.out"
kill $server
"#;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[test]
#[ignore = "needs unshare -rn, python3 and @openai/codex@0.169.0 (npm); run with --ignored"]
fn codex_blocks_on_the_deny_and_delivers_the_context() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let codex = codex_binary(scratch.path());
    let version = Command::new(&codex)
        .arg("--version")
        .output()
        .expect("codex --version");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert_eq!(version, CODEX_VERSION, "the pinned harness version");

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
         [model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:18431/v1\"\n\
         env_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\n\
         stream_max_retries = 0\n[analytics]\nenabled = false\n",
    );
    write(&d.join("server.py"), SERVER);
    write(&d.join("run.sh"), RUN);
    let status = Command::new("unshare")
        .args(["-rn", "bash"])
        .arg(d.join("run.sh"))
        .arg(d)
        .arg(&codex)
        .env_remove("BELFRY_SESSION")
        .env_remove("BELFRY_HOOKS_FILE")
        .status()
        .unwrap_or_else(|e| panic!("cannot run unshare -rn: {e}"));
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let report = format!(
        "{version}\nexec.out:\n{}\nexec.err:\n{}\ndispatch.log:\n{}",
        read("exec.out"),
        read("exec.err"),
        read("dispatch.log")
    );
    assert!(status.success(), "{report}");
    let requests: Vec<Value> = read("requests.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
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
        read("exec.err").contains("PreToolUse Blocked"),
        "{version}: Codex did not report the hook as blocking\n{report}"
    );
}
