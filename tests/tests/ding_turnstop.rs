//! spec §7.5 (issue 10 item 3a): delivery at the turn stop, without PTY input. With the real
//! `belfry dispatch` inside a real pane and the real daemon: a turn stop with unread mail is
//! answered in the harness's own "continue, because" form with the notice as the reason, and
//! the message becomes hook-owned; past the pane's cap of consecutive continuations the stop is
//! allowed and the mail waits for the next tier (the idle lease's guarded send); a prompt the
//! user wrote resets the cap and one carrying a belfry notice does not; a dispatch that could
//! not write its answer owns nothing, and a reservation nobody confirms lapses. Receipts: a
//! prompt-submit whose prompt carries the exact notice DING typed marks the message delivered.
//!
//! The `live_*` tests (gated, `--ignored`) run the real Claude Code 2.1.328 and Codex 0.169.0
//! in a loopback-only network namespace (`unshare -rn`) against a scripted model, with their
//! `Stop` hook calling the real dispatch in the identity of a real pane: mail posted during a
//! turn reaches the model at the stop, and Codex, which has no cap of its own, stops at
//! belfry's. They take the harness from `$BELFRY_HARNESS_PKGS/<unpacked npm package>` or `npm
//! pack` the pinned version:
//! `cargo test -p belfry-tests --test ding_turnstop -- --ignored live_`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use belfry_tests::{adapter_bin, eventually, fixture, read_or_empty, recorder_bin, Conn, Env};
use serde_json::{json, Value};

const RICH: &str = "turn-boundary+fresh-idle";

fn adapters_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters")
}

/// The `continue_events.turn-stop.rendering` of an adapter's dialect: the form under test.
fn continuation_form(name: &str) -> Value {
    let path = adapters_dir().join(name).join("dialect.json");
    let text = std::fs::read_to_string(&path).expect("dialect");
    let dialect: Value = serde_json::from_str(&text).expect("dialect JSON");
    dialect["continue_events"]["turn-stop"]["rendering"]["stdout"]["json"].clone()
}

/// A pane under the rich policy whose adapter replays `fixtures/ding/<case>.jsonl`; returns the
/// log of everything typed into the program.
fn rich_pane(env: &Env, case: &str) -> std::path::PathBuf {
    let log = env.path("pane.log");
    let (rec, adapter) = (
        recorder_bin().display().to_string(),
        adapter_bin().display().to_string(),
    );
    let case = fixture(&format!("ding/{case}.jsonl")).display().to_string();
    let log_s = log.display().to_string();
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        RICH,
        "--ding-adapter",
        &adapter,
        "--ding-adapter",
        &case,
        "--",
        &rec,
        "--log",
        &log_s,
    ]);
    env.wait_screen("agent", "READY");
    log
}

/// The pane's own environment, as a hook inside it sees it, with the turn-boundary events an
/// adapter declaration would give it.
fn pane_env(env: &Env) -> Vec<(String, String)> {
    let snap = env.snapshot("agent");
    let text = |key: &str| snap[key].as_str().unwrap_or_default().to_string();
    vec![
        ("BELFRY_SESSION".into(), "agent".into()),
        ("BELFRY_SOCKET".into(), env.socket().display().to_string()),
        ("BELFRY_INCARNATION".into(), text("incarnation")),
        ("BELFRY_GENERATION".into(), text("generation")),
        (
            "BELFRY_INBOX".into(),
            env.state().join("inbox/agent").display().to_string(),
        ),
        ("BELFRY_TURN_BOUNDARY_EVENTS".into(), "prompt-submit".into()),
    ]
}

fn post(env: &Env, subject: &str) -> String {
    env.post_mail("agent", "lead", subject, "details\n")
}

fn id_of(name: &str) -> &str {
    &name[name.len() - 9..name.len() - 3]
}

fn notice(name: &str, subject: &str) -> String {
    format!(
        "[DING] new message: [id:{}] {subject} (from lead); check your inbox",
        id_of(name)
    )
}

/// Every unread message's state in `ding status`, by name.
fn states(env: &Env) -> Vec<(String, String)> {
    let status: Value =
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).expect("status");
    status["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_string(),
                m["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Asserts that `name` is unread and nobody owns it: `held:<reason>` under these adapters.
fn assert_free(env: &Env, name: &str, why: &str) {
    let state = state_of(env, name);
    assert!(state.starts_with("held:"), "{name} is {state}: {why}");
}

fn state_of(env: &Env, name: &str) -> String {
    states(env)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, state)| state)
        .unwrap_or_else(|| "not unread".to_string())
}

struct Run {
    stdout: String,
    code: Option<i32>,
}

/// `belfry dispatch --native NAME --event EVENT` inside the pane, its stdout to `stdout` (a
/// pipe when `None`).
fn dispatch_to(
    env: &Env,
    name: &str,
    event: &str,
    stdin: &Value,
    stdout: Option<std::fs::File>,
) -> Run {
    let mut cmd = env.cmd(&["dispatch", "--native", name, "--event", event]);
    for (key, value) in pane_env(env) {
        cmd.env(key, value);
    }
    cmd.env_remove("BELFRY_HOOKS_FILE")
        .env_remove("BELFRY_DIALECTS")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    match stdout {
        Some(file) => cmd.stdout(Stdio::from(file)),
        None => cmd.stdout(Stdio::piped()),
    };
    let mut child = cmd.spawn().expect("dispatch");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.to_string().as_bytes())
        .expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("dispatch output");
    Run {
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        code: out.status.code(),
    }
}

fn dispatch(env: &Env, name: &str, event: &str, stdin: &Value) -> Run {
    dispatch_to(env, name, event, stdin, None)
}

/// A turn stop of `name` (its native event `native`).
fn stop(env: &Env, name: &str, native: &str) -> Run {
    let stdin = json!({"hook_event_name": native, "session_id": "s1", "cwd": "/",
        "stop_hook_active": false});
    dispatch(env, name, "turn-stop", &stdin)
}

/// Whether `run` continued the turn in the dialect's form, with `notice` in the reason.
fn continued_with(name: &str, run: &Run, notice: &str) -> bool {
    let Ok(answer) = serde_json::from_str::<Value>(&run.stdout) else {
        return false;
    };
    let form = continuation_form(name);
    answer["decision"] == form["decision"]
        && answer["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains(notice))
}

/// A prompt submit in the pane with `prompt`, waited for until the daemon's bus has it: the
/// DING worker has been told by then, before any later request of the test.
fn prompt_submit(env: &Env, name: &str, native: &str, prompt: &str) {
    let mut events = Conn::open(&env.socket()).expect("connect");
    assert_eq!(
        events.request(json!({"op": "subscribe", "session": "agent"}))["ok"],
        true
    );
    let stdin = json!({"hook_event_name": native, "session_id": "s1", "cwd": "/",
        "prompt": prompt});
    // Not a turn boundary here, so the prompt claims nothing itself: only what it tells the
    // worker is under test.
    let mut cmd = env.cmd(&["dispatch", "--native", name, "--event", "prompt-submit"]);
    for (key, value) in pane_env(env) {
        if key != "BELFRY_TURN_BOUNDARY_EVENTS" {
            cmd.env(key, value);
        }
    }
    let mut child = cmd
        .env_remove("BELFRY_HOOKS_FILE")
        .env_remove("BELFRY_TURN_BOUNDARY_EVENTS")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("dispatch");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.to_string().as_bytes())
        .expect("stdin");
    drop(input);
    assert!(child.wait().expect("dispatch").success());
    loop {
        let event = events
            .read()
            .expect("the bus closed before the prompt submit");
        if event["event"] == "hook" && event["hook"] == "prompt-submit" {
            return;
        }
    }
}

fn prove_stop_continues(name: &str, native: &str) {
    let env = Env::new();
    let log = rich_pane(&env, "silent");
    let first = post(&env, "review PR 12");

    let run = stop(&env, name, native);
    assert_eq!(run.code, Some(0), "{name}");
    assert!(
        continued_with(name, &run, &notice(&first, "review PR 12")),
        "{name}: the stop was not continued with the notice: {}",
        run.stdout
    );
    assert_eq!(state_of(&env, &first), "hook-owned", "{name}");
    // The turn boundary typed nothing.
    assert!(read_or_empty(&log).is_empty(), "{name}: PTY input");

    // Nothing unread that nobody owns: the stop is allowed, in the dialect's allow form.
    let run = stop(&env, name, native);
    assert!(
        !run.stdout.contains("[DING]") && !continued_with(name, &run, "[DING]"),
        "{name}: continued without new mail: {}",
        run.stdout
    );
}

#[test]
fn claude_stop_with_unread_mail_continues_with_the_notice() {
    prove_stop_continues("claude", "Stop");
}

#[test]
fn codex_stop_with_unread_mail_continues_with_the_notice() {
    prove_stop_continues("codex", "Stop");
}

#[test]
fn gemini_after_agent_with_unread_mail_continues_with_the_notice() {
    prove_stop_continues("gemini", "AfterAgent");
}

/// OpenCode's `session.idle` and Pi's `agent_end` shims cannot continue a turn (their
/// matrices: `turn-stop.deny` unsupported), so a stop there claims nothing.
#[test]
fn shim_stops_that_cannot_continue_claim_nothing() {
    let env = Env::new();
    rich_pane(&env, "silent");
    let first = post(&env, "review PR 12");
    for (name, native) in [("opencode", "event:session.idle"), ("pi", "agent_end")] {
        let run = stop(&env, name, native);
        assert!(!run.stdout.contains("[DING]"), "{name}: {}", run.stdout);
        assert_free(&env, &first, name);
    }
}

#[test]
fn past_the_cap_the_stop_is_allowed_and_the_idle_lease_delivers_later() {
    let env = Env::with_vars(&[("BELFRY_DING_MAX_CONTINUATIONS", "2")]);
    let log = rich_pane(&env, "idle-on-file");
    for subject in ["one", "two"] {
        let name = post(&env, subject);
        let run = stop(&env, "claude", "Stop");
        assert!(
            continued_with("claude", &run, &notice(&name, subject)),
            "continuation {subject}: {}",
            run.stdout
        );
        assert_eq!(state_of(&env, &name), "hook-owned");
    }
    let third = post(&env, "three");
    let run = stop(&env, "claude", "Stop");
    assert_eq!(run.code, Some(0));
    assert_eq!(run.stdout, "", "past the cap, Claude's allow is no output");
    assert!(
        state_of(&env, &third).starts_with("held:"),
        "{}",
        state_of(&env, &third)
    );
    assert!(read_or_empty(&log).is_empty(), "typed before any lease");

    // The next tier: an idle lease with the composer empty sends the notice, once.
    std::fs::write(env.state().join("go-idle"), b"1").expect("go-idle");
    let expected = format!("{}\r", notice(&third, "three"));
    assert!(
        eventually(Duration::from_secs(10), || read_or_empty(&log)
            == expected.as_bytes()),
        "pane got {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    assert_eq!(state_of(&env, &third), "staged");
}

#[test]
fn a_prompt_the_user_wrote_resets_the_cap_and_a_belfry_prompt_does_not() {
    let env = Env::with_vars(&[("BELFRY_DING_MAX_CONTINUATIONS", "1")]);
    rich_pane(&env, "silent");
    let first = post(&env, "one");
    assert!(continued_with(
        "claude",
        &stop(&env, "claude", "Stop"),
        &notice(&first, "one")
    ));
    let second = post(&env, "two");
    assert_eq!(stop(&env, "claude", "Stop").stdout, "", "the cap of 1");

    // A prompt carrying a belfry notice (a continuation's reason, or a notice DING typed) is
    // not a turn the user started.
    prompt_submit(&env, "claude", "UserPromptSubmit", &notice(&first, "one"));
    assert_eq!(
        stop(&env, "claude", "Stop").stdout,
        "",
        "reset by a belfry prompt"
    );
    assert_free(&env, &second, "free");

    prompt_submit(&env, "claude", "UserPromptSubmit", "now fix the flaky test");
    let run = stop(&env, "claude", "Stop");
    assert!(
        continued_with("claude", &run, &notice(&second, "two")),
        "the user's prompt did not reset the cap: {}",
        run.stdout
    );
    assert_eq!(state_of(&env, &second), "hook-owned");
}

#[test]
fn a_dispatch_that_cannot_write_its_answer_owns_nothing() {
    // Reservations that never lapse within the test: only the release can free the message.
    let env = Env::with_vars(&[("BELFRY_DING_CLAIM_TIMEOUT_MS", "600000")]);
    rich_pane(&env, "silent");
    let first = post(&env, "one");
    let full = OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let stdin = json!({"hook_event_name": "Stop", "session_id": "s1", "cwd": "/"});
    let run = dispatch_to(&env, "claude", "turn-stop", &stdin, Some(full));
    assert_eq!(run.code, Some(0));
    assert_free(&env, &first, "owned unwritten");
    // The same at a prompt submit, the context form of the turn boundary.
    let full = OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let stdin = json!({"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": "/",
        "prompt": "go"});
    dispatch_to(&env, "claude", "prompt-submit", &stdin, Some(full));
    assert_free(&env, &first, "owned unwritten");
    // Released, not merely lapsed: the next dispatch that writes its answer gets it.
    let run = stop(&env, "claude", "Stop");
    assert!(
        continued_with("claude", &run, &notice(&first, "one")),
        "{}",
        run.stdout
    );
    assert_eq!(state_of(&env, &first), "hook-owned");
}

#[test]
fn a_reservation_nobody_confirms_lapses() {
    let env = Env::with_vars(&[("BELFRY_DING_CLAIM_TIMEOUT_MS", "400")]);
    rich_pane(&env, "silent");
    let first = post(&env, "one");
    let snap = env.snapshot("agent");
    let event = json!({"v": 1, "kind": "turn-boundary", "session": "agent",
        "incarnation": snap["incarnation"], "generation": snap["generation"], "sequence": 1,
        "messages": [first]});
    let reserve = json!({"op": "ding.turn-boundary", "session": "agent", "event": event,
        "step": "reserve", "purpose": "continuation"});
    let mut conn = Conn::open(&env.socket()).expect("connect");
    let reply = conn.request(reserve.clone());
    assert_eq!(reply["reserved"], json!([first]), "{reply}");
    assert!(reply["claim"].is_string(), "{reply}");
    // Held for that dispatch: neither owned nor offered to another.
    assert_free(&env, &first, "free");
    let again = conn.request(reserve.clone());
    assert_eq!(again["reserved"], Value::Null, "{again}");
    assert_eq!(again["refused"], json!([first]), "{again}");
    // Its dispatch died without confirming: after the deadline the message is free again.
    std::thread::sleep(Duration::from_millis(600));
    let later = conn.request(reserve);
    assert_eq!(later["reserved"], json!([first]), "{later}");
    assert_free(&env, &first, "never confirmed");
}

#[test]
fn a_prompt_carrying_the_typed_notice_is_its_accepted_receipt() {
    let env = Env::new();
    let log = rich_pane(&env, "fresh-idle");
    let name = post(&env, "fix the build");
    let typed = notice(&name, "fix the build");
    assert!(
        eventually(Duration::from_secs(10), || read_or_empty(&log)
            == format!("{typed}\r").as_bytes()),
        "pane got {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    assert_eq!(state_of(&env, &name), "staged");
    // A prompt without that exact notice proves nothing: the honest lesser state stays.
    let other = notice(&name, "something else");
    prompt_submit(&env, "claude", "UserPromptSubmit", &other);
    prompt_submit(&env, "claude", "UserPromptSubmit", "fix the build");
    assert_eq!(state_of(&env, &name), "staged");
    // The harness submitted the typed notice as a prompt: accepted.
    prompt_submit(&env, "codex", "UserPromptSubmit", &typed);
    assert_eq!(state_of(&env, &name), "delivered");
}

/// The scripted model of the live test: logs every request; at the first streamed turn it posts
/// a message to the pane's inbox (mail arriving mid-turn) and answers with text, so the turn
/// ends; every request is answered "done".
const LIVE_SERVER: &str = r#"
import json, sys, subprocess, http.server
port, log, belfry, body_file, posted = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
state = {"posted": False}
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
        if body.get("stream") and body.get("tools") and not state["posted"]:
            state["posted"] = True
            name = subprocess.run([belfry, "inbox", "post", "agent", "--from", "lead",
                                   "--subject", "rebase onto main", body_file],
                                  capture_output=True, text=True).stdout.strip()
            with open(posted, "w") as f: f.write(name)
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 1, "output_tokens": 1}}
        if not body.get("stream"):
            data = json.dumps({**message, "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}).encode()
            kind = "application/json"
        else:
            data = sse([{"type": "message_start", "message": message},
                        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}},
                        {"type": "content_block_stop", "index": 0},
                        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
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
const LIVE_RUN: &str = r#"
set -u
dir=$1; claude=$2; key=$3; belfry=$4
ip link set lo up 2>/dev/null || true
python3 "$dir/server.py" 18433 "$dir/requests.jsonl" "$belfry" "$dir/body.md" "$dir/posted" & server=$!
for _ in $(seq 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18433), 0.2)' 2>/dev/null && break
  sleep 0.1
done
cd "$dir/work"
HOME="$dir/home" ANTHROPIC_BASE_URL=http://127.0.0.1:18433 ANTHROPIC_API_KEY="$key" \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
  timeout 90 "$claude" -p "tidy the readme" --settings "$dir/settings.json" \
  > "$dir/out.txt" 2> "$dir/err.txt"
echo "exit=$?" >> "$dir/out.txt"
kill $server
"#;

/// Live (issue 10 item 3a): the real Claude Code 2.1.328 in print mode, its `Stop` hook the
/// real `belfry dispatch --native claude --event turn-stop` in a real pane's identity, against a
/// scripted model in a loopback-only network namespace. A message posted while the model
/// answers the first turn reaches the model at the turn stop: the request after the stop
/// carries the notice, the message is hook-owned, and nothing was typed into the pane.
#[test]
#[ignore = "needs unshare -rn, python3 and @anthropic-ai/claude-code 2.1.328 (npm); run with --ignored"]
fn live_claude_mail_posted_mid_turn_reaches_the_model_at_the_stop() {
    const CLAUDE: &str = "@anthropic-ai/claude-code-linux-x64@2.1.328";
    let scratch = tempfile::tempdir().expect("tempdir");
    let claude = belfry_tests::npm_package(
        CLAUDE,
        "anthropic-ai-claude-code-linux-x64-2.1.328",
        scratch.path(),
    )
    .join("claude");
    let env = Env::new();
    let log = rich_pane(&env, "silent");

    let dir = tempfile::tempdir().expect("run dir");
    let d = dir.path();
    for sub in ["home", "work"] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    let key = "sk-ant-test-0123456789abcdefghijklmnop";
    let state = json!({"hasCompletedOnboarding": true,
        "projects": {d.join("work").display().to_string(): {"hasTrustDialogAccepted": true}},
        "customApiKeyResponses": {"approved": [&key[key.len() - 20..]]}});
    std::fs::write(d.join("home/.claude.json"), state.to_string()).expect("state");
    let dispatch_log = d.join("dispatch.log");
    let command = format!(
        "{} dispatch --native claude --event turn-stop | tee -a {}",
        belfry_tests::belfry_bin().display(),
        dispatch_log.display()
    );
    let settings = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "timeout": 30, "command": command}]}]}});
    std::fs::write(d.join("settings.json"), settings.to_string()).expect("settings");
    std::fs::write(d.join("server.py"), LIVE_SERVER).expect("server");
    std::fs::write(d.join("run.sh"), LIVE_RUN).expect("run");
    std::fs::write(d.join("body.md"), "please rebase\n").expect("body");

    let mut unshare = Command::new("unshare");
    unshare
        .args(["-rn", "bash"])
        .arg(d.join("run.sh"))
        .arg(d)
        .arg(&claude)
        .arg(key)
        .arg(belfry_tests::belfry_bin());
    for (name, value) in env.vars().into_iter().chain(pane_env(&env)) {
        unshare.env(name, value);
    }
    let status = unshare
        .env_remove("BELFRY_HOOKS_FILE")
        .status()
        .unwrap_or_else(|e| panic!("cannot run unshare -rn: {e}"));
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let report = format!(
        "out:\n{}\nerr:\n{}\ndispatch.log:\n{}",
        read("out.txt"),
        read("err.txt"),
        read("dispatch.log")
    );
    assert!(status.success(), "{report}");
    assert!(read("out.txt").contains("exit=0"), "{report}");
    let posted = read("posted");
    assert!(
        posted.ends_with(".md"),
        "the server posted nothing\n{report}"
    );
    let tag = format!("[id:{}]", id_of(&posted));
    let requests: Vec<String> = read("requests.jsonl").lines().map(str::to_string).collect();
    let posted_at = requests
        .iter()
        .position(|r| r.contains("\"stream\": true") && r.contains("\"tools\""))
        .expect("a streamed turn");
    assert!(
        !requests[posted_at].contains(&tag),
        "the notice was in the request before it was posted\n{report}"
    );
    let reached = requests[posted_at + 1..]
        .iter()
        .position(|r| r.contains(&tag))
        .map(|at| at + posted_at + 1);
    eprintln!(
        "{} requests; posted during request {posted_at}; {tag} first in request {reached:?}; \
         dispatch answered:\n{}",
        requests.len(),
        read("dispatch.log")
    );
    assert!(
        reached.is_some(),
        "no request after the stop carries {tag}\n{report}\nrequests: {}",
        requests.len()
    );
    assert_eq!(state_of(&env, &posted), "hook-owned", "{report}");
    assert!(read_or_empty(&log).is_empty(), "PTY input: {report}");
}

/// The scripted Responses model of the Codex live test: logs every request; at the first turn
/// (not the title request, which asks for structured output) it posts a message to the pane's
/// inbox, and every request is answered with the text "done".
const LIVE_CODEX_SERVER: &str = r#"
import json, sys, subprocess, http.server
port, log, belfry, body_file, posted, every = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6] == "every"
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
        if (turns["n"] == 1 or every) and not structured:
            name = subprocess.run([belfry, "inbox", "post", "agent", "--from", "lead",
                                   "--subject", "rebase onto main", body_file],
                                  capture_output=True, text=True).stdout.strip()
            with open(posted, "a") as f: f.write(name + "\n")
        rid = "resp_%d" % turns["n"]
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
const LIVE_CODEX_RUN: &str = r#"
set -u
dir=$1; codex=$2; belfry=$3; posting=$4
ip link set lo up 2>/dev/null || true
python3 "$dir/server.py" 18434 "$dir/requests.jsonl" "$belfry" "$dir/body.md" "$dir/posted" "$posting" & server=$!
for _ in $(seq 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18434), 0.2)' 2>/dev/null && break
  sleep 0.1
done
cd "$dir/work"
HOME="$dir/home" CODEX_HOME="$dir/home/codex" MOCK_API_KEY=x SHELL=/bin/sh \
  timeout 90 "$codex" exec --skip-git-repo-check --dangerously-bypass-hook-trust \
  --dangerously-bypass-approvals-and-sandbox "tidy the readme" > "$dir/out.txt" 2> "$dir/err.txt"
echo "exit=$?" >> "$dir/out.txt"
kill $server
"#;

/// What one live Codex run left: the pane's environment, the run directory, everything typed
/// into the pane, the names the server posted, and the turn requests (the title request left
/// out).
struct CodexRun {
    env: Env,
    dir: tempfile::TempDir,
    typed: Vec<u8>,
    posted: Vec<String>,
    turns: Vec<String>,
    report: String,
}

/// Runs the real Codex 0.169.0 (`codex exec`) once, its `Stop` hook the real `belfry dispatch
/// --native codex --event turn-stop` in a real pane's identity (daemon variables `vars`), against
/// the scripted Responses model in a loopback-only network namespace; `posting` is `first`
/// (one message during the first turn) or `every` (one during every turn).
fn run_live_codex(vars: &[(&str, &str)], posting: &str) -> CodexRun {
    const CODEX: &str = "@openai/codex@0.169.0-linux-x64";
    let scratch = tempfile::tempdir().expect("tempdir");
    let codex = belfry_tests::npm_package(CODEX, "openai-codex-0.169.0-linux-x64", scratch.path())
        .join("vendor/x86_64-unknown-linux-musl/bin/codex");
    let env = Env::with_vars(vars);
    let log = rich_pane(&env, "silent");

    let dir = tempfile::tempdir().expect("run dir");
    let d = dir.path();
    for sub in ["home/codex", "work"] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    let command = format!(
        "{} dispatch --native codex --event turn-stop | tee -a {}",
        belfry_tests::belfry_bin().display(),
        d.join("dispatch.log").display()
    );
    let hooks = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "timeout": 30, "command": command}]}]}});
    std::fs::write(d.join("home/codex/hooks.json"), hooks.to_string()).expect("hooks");
    std::fs::write(
        d.join("home/codex/config.toml"),
        "model = \"mock-model\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\
         [model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:18434/v1\"\n\
         env_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\n\
         stream_max_retries = 0\n[analytics]\nenabled = false\n",
    )
    .expect("config");
    std::fs::write(d.join("server.py"), LIVE_CODEX_SERVER).expect("server");
    std::fs::write(d.join("run.sh"), LIVE_CODEX_RUN).expect("run");
    std::fs::write(d.join("body.md"), "please rebase\n").expect("body");

    let mut unshare = Command::new("unshare");
    unshare
        .args(["-rn", "bash"])
        .arg(d.join("run.sh"))
        .arg(d)
        .arg(&codex)
        .arg(belfry_tests::belfry_bin())
        .arg(posting);
    for (name, value) in env.vars().into_iter().chain(pane_env(&env)) {
        unshare.env(name, value);
    }
    let status = unshare
        .env_remove("BELFRY_HOOKS_FILE")
        .status()
        .unwrap_or_else(|e| panic!("cannot run unshare -rn: {e}"));
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let report = format!(
        "out:\n{}\nerr:\n{}\ndispatch.log:\n{}",
        read("out.txt"),
        read("err.txt"),
        read("dispatch.log")
    );
    assert!(status.success(), "{report}");
    assert!(read("out.txt").contains("exit=0"), "{report}");
    let posted: Vec<String> = read("posted").lines().map(str::to_string).collect();
    assert!(
        !posted.is_empty() && posted.iter().all(|name| name.ends_with(".md")),
        "the server posted nothing\n{report}"
    );
    let turns: Vec<String> = read("requests.jsonl")
        .lines()
        .filter(|r| !r.contains("\"format\""))
        .map(str::to_string)
        .collect();
    let typed = read_or_empty(&log);
    CodexRun {
        env,
        dir,
        typed,
        posted,
        turns,
        report,
    }
}

/// Live (issue 10 item 3a): with the real Codex 0.169.0, a message posted during the first turn
/// reaches the model in the request after the stop, without PTY input.
#[test]
#[ignore = "needs unshare -rn, python3 and @openai/codex@0.169.0 (npm); run with --ignored"]
fn live_codex_mail_posted_mid_turn_reaches_the_model_at_the_stop() {
    let run = run_live_codex(&[], "first");
    let (turns, report) = (&run.turns, &run.report);
    let tag = format!("[id:{}]", id_of(&run.posted[0]));
    assert!(!turns.is_empty(), "no turn\n{report}");
    assert!(
        !turns[0].contains(&tag),
        "the notice was in the request before it was posted\n{report}"
    );
    let reached = turns[1..]
        .iter()
        .position(|r| r.contains(&tag))
        .map(|at| at + 1);
    eprintln!(
        "{} turn requests; posted during the first; {tag} first in turn request {reached:?}; \
         dispatch answered:\n{}",
        turns.len(),
        std::fs::read_to_string(run.dir.path().join("dispatch.log")).unwrap_or_default()
    );
    assert!(
        reached.is_some(),
        "no request after the stop carries {tag}\n{report}"
    );
    assert_eq!(state_of(&run.env, &run.posted[0]), "hook-owned", "{report}");
    assert!(run.typed.is_empty(), "PTY input: {report}");
}

/// Live: Codex puts no cap on Stop continuations, so mail arriving during every turn would keep
/// it going for ever; belfry's cap (2 here) ends it. Exactly one first turn and two
/// continuations reach the model, then the stop is allowed; the last message waits unowned.
#[test]
#[ignore = "needs unshare -rn, python3 and @openai/codex@0.169.0 (npm); run with --ignored"]
fn live_codex_mail_during_every_turn_stops_at_the_cap() {
    let run = run_live_codex(&[("BELFRY_DING_MAX_CONTINUATIONS", "2")], "every");
    let report = &run.report;
    eprintln!(
        "{} turn requests, {} messages posted; dispatch answered:\n{}",
        run.turns.len(),
        run.posted.len(),
        std::fs::read_to_string(run.dir.path().join("dispatch.log")).unwrap_or_default()
    );
    assert_eq!(
        run.turns.len(),
        3,
        "one turn and two continuations\n{report}"
    );
    assert_eq!(run.posted.len(), 3, "{report}");
    for (turn, name) in run.posted.iter().enumerate().take(2) {
        let tag = format!("[id:{}]", id_of(name));
        assert!(run.turns[turn + 1].contains(&tag), "{tag}\n{report}");
        assert_eq!(state_of(&run.env, name), "hook-owned", "{report}");
    }
    assert_free(&run.env, &run.posted[2], "past the cap");
    assert!(run.typed.is_empty(), "PTY input: {report}");
}
