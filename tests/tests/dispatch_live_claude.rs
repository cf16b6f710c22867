//! Issue 9 items 2 and 3, live: the real Claude Code 2.1.328 (`claude -p`) runs the real
//! `belfry dispatch --native claude` as its hooks, inside a loopback-only network namespace
//! (`unshare -rn`) against a scripted Anthropic Messages server on 127.0.0.1. Proven: a
//! prompt-submit context reaches the model (the request carries it inline, cut to the 10,000
//! characters Claude Code takes inline); a `shell`-class guard
//! matches Claude Code's `Bash` and its deny blocks the call (the command's side effect never
//! happens, and the model sees the refusal as the tool result).
//!
//! Gated: it needs `unshare -rn`, `python3` and `@anthropic-ai/claude-code-linux-x64@2.1.328`.
//! Run it with `cargo test -p belfry-tests --test dispatch_live_claude -- --ignored`; it uses
//! `$BELFRY_HARNESS_PKGS/anthropic-ai-claude-code-linux-x64-2.1.328` when set, else `npm pack`s
//! the pinned version (about 170 MB). A missing prerequisite fails the test with the reason; it
//! is never skipped silently.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use belfry_tests::belfry_bin;
use serde_json::{json, Value};

const CLAUDE: &str = "@anthropic-ai/claude-code-linux-x64@2.1.328";
const CLAUDE_VERSION: &str = "2.1.328 (Claude Code)";
const CONTEXT_MARK: &str = "BELFRY-CTX-7731 repo uses trunk-based flow";
const DENY_MARK: &str = "BELFRY-DENY no force push";

fn claude_binary(scratch: &Path) -> PathBuf {
    let package = belfry_tests::npm_package(
        CLAUDE,
        "anthropic-ai-claude-code-linux-x64-2.1.328",
        scratch,
    );
    let path = package.join("claude");
    assert!(path.is_file(), "{} does not exist", path.display());
    path
}

/// The scripted model: logs every request; the first request that offers the `Bash` tool gets
/// one `Bash` call that would leave a side effect, every other request a text answer.
const SERVER: &str = r#"
import json, sys, http.server
port, log, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
state = {"tool_sent": False}
def sse(events):
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        self.send_response(404); self.end_headers()
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        try: body = json.loads(raw or b"{}")
        except ValueError: body = {}
        with open(log, "a") as f: f.write(json.dumps(body) + "\n")
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 1, "output_tokens": 1}}
        if not body.get("stream"):
            data = json.dumps({**message, "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}).encode()
            kind = "application/json"
        else:
            if "Bash" in [t.get("name") for t in body.get("tools", [])] and not state["tool_sent"]:
                state["tool_sent"] = True
                block = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
                delta = {"type": "input_json_delta",
                         "partial_json": json.dumps({"command": "touch " + marker, "description": "touch"})}
                stop = "tool_use"
            else:
                block, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": "done"}, "end_turn"
            data = sse([{"type": "message_start", "message": message},
                        {"type": "content_block_start", "index": 0, "content_block": block},
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                        {"type": "content_block_stop", "index": 0},
                        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                         "usage": {"output_tokens": 1}},
                        {"type": "message_stop"}])
            kind = "text/event-stream"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

/// Inside the namespace: loopback up, the server, one `claude -p`, the server stopped.
const RUN: &str = r#"
set -u
dir=$1; claude=$2; key=$3
ip link set lo up 2>/dev/null || true
python3 "$dir/server.py" 18432 "$dir/requests.jsonl" "$dir/work/side-effect" & server=$!
for _ in $(seq 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18432), 0.2)' 2>/dev/null && break
  sleep 0.1
done
cd "$dir/work"
HOME="$dir/home" ANTHROPIC_BASE_URL=http://127.0.0.1:18432 ANTHROPIC_API_KEY="$key" \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
  timeout 90 "$claude" -p "push the branch" --settings "$dir/settings.json" --allowedTools Bash \
  > "$dir/out.txt" 2> "$dir/err.txt"
echo "exit=$?" >> "$dir/out.txt"
kill $server
"#;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[test]
#[ignore = "needs unshare -rn, python3 and @anthropic-ai/claude-code 2.1.328 (npm); run with --ignored"]
fn claude_code_blocks_on_the_deny_and_delivers_the_context() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let claude = claude_binary(scratch.path());
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
    write(&d.join("server.py"), SERVER);
    write(&d.join("run.sh"), RUN);
    let status = Command::new("unshare")
        .args(["-rn", "bash"])
        .arg(d.join("run.sh"))
        .arg(d)
        .arg(&claude)
        .arg(key)
        .env_remove("BELFRY_SESSION")
        .env_remove("BELFRY_HOOKS_FILE")
        .status()
        .unwrap_or_else(|e| panic!("cannot run unshare -rn: {e}"));
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let report = format!(
        "{version}\nout:\n{}\nerr:\n{}\ndispatch.log:\n{}",
        read("out.txt"),
        read("err.txt"),
        read("dispatch.log")
    );
    assert!(status.success(), "{report}");
    let requests: Vec<Value> = read("requests.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
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
