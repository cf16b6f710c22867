//! spec §7.5 (issue 9 item 6): a message becomes hook-owned only when the dispatcher's answer
//! carries its notice in a form the harness accepts for that event. Proven per adapter dialect
//! with the real `belfry` binary inside a real pane and the real daemon: at an event where the
//! dialect carries no context, after a deny, and past the dialect's context cap, nothing is
//! claimed; at the declared turn boundary the notice is in the rendered answer and the message is
//! hook-owned.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use belfry_tests::{adapter_bin, fixture, recorder_bin, Env};
use serde_json::{json, Value};

fn adapters_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The pane's own environment, as a hook inside it sees it.
fn pane_env(env: &Env, session: &str) -> Vec<(String, String)> {
    let snap = env.snapshot(session);
    let text = |key: &str| snap[key].as_str().unwrap_or_default().to_string();
    vec![
        ("BELFRY_SESSION".into(), session.into()),
        ("BELFRY_SOCKET".into(), env.socket().display().to_string()),
        ("BELFRY_INCARNATION".into(), text("incarnation")),
        ("BELFRY_GENERATION".into(), text("generation")),
        (
            "BELFRY_INBOX".into(),
            env.state()
                .join("inbox")
                .join(session)
                .display()
                .to_string(),
        ),
    ]
}

/// A pane under the rich DING policy whose adapter never reports idle, so no notice is ever
/// typed: only the turn boundary can deliver.
fn silent_rich_pane(env: &Env) {
    let log = env.path("pane.log").display().to_string();
    let (rec, adapter) = (
        recorder_bin().display().to_string(),
        adapter_bin().display().to_string(),
    );
    let silent = fixture("ding/silent.jsonl").display().to_string();
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "turn-boundary+fresh-idle",
        "--ding-adapter",
        &adapter,
        "--ding-adapter",
        &silent,
        "--",
        &rec,
        "--log",
        &log,
    ]);
    env.wait_screen("agent", "READY");
}

/// Posts a message; returns its 6-character id.
fn post(env: &Env, subject: &str) -> String {
    let body = fixture("ding/silent.jsonl").display().to_string();
    let name = env
        .ok(&[
            "inbox",
            "post",
            "agent",
            "--from",
            "lead",
            "--subject",
            subject,
            &body,
        ])
        .trim()
        .to_string();
    name[name.len() - 9..name.len() - 3].to_string()
}

/// How many messages are hook-owned, and how many in all.
fn owned(env: &Env) -> (usize, usize) {
    let status: Value =
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).expect("status");
    let messages = status["messages"].as_array().cloned().unwrap_or_default();
    let owned = messages
        .iter()
        .filter(|m| m["state"] == "hook-owned")
        .count();
    (owned, messages.len())
}

struct Run {
    stdout: String,
    code: Option<i32>,
}

/// `belfry dispatch --native NAME --event EVENT --turn-boundary` inside the pane.
fn dispatch(env: &Env, name: &str, event: &str, hooks: Option<&Path>, stdin: &Value) -> Run {
    let mut cmd = env.cmd(&[
        "dispatch",
        "--native",
        name,
        "--event",
        event,
        "--turn-boundary",
    ]);
    for (key, value) in pane_env(env, "agent") {
        cmd.env(key, value);
    }
    if let Some(hooks) = hooks {
        cmd.arg("--hooks-file").arg(hooks);
    }
    cmd.env_remove("BELFRY_HOOKS_FILE")
        .env_remove("BELFRY_DIALECTS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
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

/// A hooks file for `event` whose one handler runs `script`.
fn hooks_file(env: &Env, event: &str, script: &str) -> PathBuf {
    let handler = env.path(&format!("{event}.sh"));
    std::fs::write(&handler, script).expect("handler");
    let path = env.path(&format!("{event}-hooks.json"));
    let hooks = json!({"version": 1, "events": {event: [{"handlers": [
        {"argv": ["/bin/sh", handler.display().to_string()], "intent": "enforce"}]}]}});
    std::fs::write(&path, hooks.to_string()).expect("hooks");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

fn notice(id: &str, subject: &str) -> String {
    format!("[DING] new message: [id:{id}] {subject} (from lead)")
}

fn prove(name: &str) {
    let decl = read_json(&adapters_dir().join(name).join("declaration.json"));
    let dialect = read_json(&adapters_dir().join(name).join("dialect.json"));
    let carries = dialect["context_events"]
        .as_object()
        .expect("context_events");
    let boundary = decl["turn_boundary"].as_str().expect("turn_boundary");
    let boundary_native = decl["events"][boundary].as_str().unwrap_or_default();
    assert!(
        carries.contains_key(boundary),
        "{name}: the declared turn boundary {boundary} must carry context"
    );
    // An event this harness fires but on which the dialect carries no context.
    let silent_event = decl["events"]
        .as_object()
        .and_then(|events| events.keys().find(|e| !carries.contains_key(*e)).cloned())
        .expect("an event without context");
    let silent_native = decl["events"][&silent_event].as_str().unwrap_or_default();

    let env = Env::new();
    silent_rich_pane(&env);
    let first = post(&env, "first task");

    // 1. No context on this event: the notice could not reach the model, so nothing is owned.
    let stdin = json!({"hook_event_name": silent_native, "session_id": "s1", "cwd": "/"});
    let run = dispatch(&env, name, &silent_event, None, &stdin);
    assert!(
        !run.stdout.contains("[DING]"),
        "{name} {silent_event}: {}",
        run.stdout
    );
    assert_eq!(
        owned(&env),
        (0, 1),
        "{name}: claimed at {silent_event}, which carries no context"
    );

    // 2. A deny at the boundary carries no notice: nothing is owned.
    let stdin = json!({"hook_event_name": boundary_native, "session_id": "s1", "cwd": "/",
        "prompt": "go"});
    let refuse = hooks_file(&env, boundary, "echo 'not now' >&2\nexit 2\n");
    let run = dispatch(&env, name, boundary, Some(&refuse), &stdin);
    assert!(
        !run.stdout.contains("[DING]"),
        "{name} deny: {}",
        run.stdout
    );
    assert_eq!(owned(&env), (0, 1), "{name}: claimed for a deny");

    // 3. Past the cap (where the dialect has one): a notice that would be cut is not claimed.
    if let Some(cap) = carries[boundary]["max_chars"].as_u64() {
        let fill = "x".repeat(usize::try_from(cap).unwrap_or(0) - 20);
        let full = hooks_file(&env, boundary, &format!("printf '%s' '{fill}'\n"));
        let run = dispatch(&env, name, boundary, Some(&full), &stdin);
        assert!(!run.stdout.contains("[DING]"), "{name} cap");
        assert!(
            run.stdout.contains(&fill),
            "{name}: the handler's context is delivered"
        );
        assert_eq!(owned(&env), (0, 1), "{name}: claimed a notice past the cap");
    }

    // 4. At the boundary with room: the notice is in the rendered answer, and owned.
    let run = dispatch(&env, name, boundary, None, &stdin);
    assert_eq!(run.code, Some(0), "{name}");
    assert!(
        run.stdout.contains(&notice(&first, "first task")),
        "{name}: the notice is not in the answer: {}",
        run.stdout
    );
    assert_eq!(owned(&env), (1, 1), "{name}: delivered but not owned");
    // The rendered answer is in the harness's form: one JSON value with the notice inside.
    let rendered: Value = serde_json::from_str(&run.stdout).expect("one JSON value");
    assert!(rendered.to_string().contains(&first), "{rendered}");

    // Owned: the next boundary does not announce it again; a new message is announced alone.
    let second = post(&env, "second task");
    let run = dispatch(&env, name, boundary, None, &stdin);
    assert!(!run.stdout.contains(&first), "{name}: announced twice");
    assert!(
        run.stdout.contains(&notice(&second, "second task")),
        "{}",
        run.stdout
    );
    assert_eq!(owned(&env), (2, 2));
}

#[test]
fn claude_claims_only_what_its_answer_delivers() {
    prove("claude");
}

#[test]
fn codex_claims_only_what_its_answer_delivers() {
    prove("codex");
}

#[test]
fn gemini_claims_only_what_its_answer_delivers() {
    prove("gemini");
}

#[test]
fn opencode_shim_claims_only_what_its_answer_delivers() {
    prove("opencode");
}

#[test]
fn pi_shim_claims_only_what_its_answer_delivers() {
    prove("pi");
}
