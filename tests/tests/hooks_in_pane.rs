//! spec §7.5, §8: `belfry dispatch` inside a pane. Turn-boundary notices are claimed through
//! the daemon (hook-owned, never typed), lifecycle events reach the bus, and the host fires the
//! lifecycle events a harness cannot fire, exactly once each.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use belfry_tests::{adapter_bin, eventually, fixture, read_or_empty, recorder_bin, Conn, Env};
use serde_json::{json, Value};

/// The pane's own environment, as a hook inside it sees it.
fn pane_env(env: &Env, session: &str, socket: &std::path::Path) -> Vec<(String, String)> {
    let snap = env.snapshot(session);
    vec![
        ("BELFRY_SESSION".into(), session.into()),
        ("BELFRY_SOCKET".into(), socket.display().to_string()),
        (
            "BELFRY_INCARNATION".into(),
            snap["incarnation"].as_str().unwrap().into(),
        ),
        (
            "BELFRY_GENERATION".into(),
            snap["generation"].as_str().unwrap().into(),
        ),
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

fn dispatch(env: &Env, extra: &[(String, String)], args: &[&str], stdin: &Value) -> Value {
    let mut full = vec!["dispatch"];
    full.extend_from_slice(args);
    let mut cmd = env.cmd(&full);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("dispatch");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice(&out.stdout).expect("dispatch prints one JSON object")
}

fn silent_rich_pane(env: &Env) -> std::path::PathBuf {
    let log = env.path("pane.log");
    let (rec, adapter) = (
        recorder_bin().display().to_string(),
        adapter_bin().display().to_string(),
    );
    let silent = fixture("ding/silent.jsonl").display().to_string();
    let log_s = log.display().to_string();
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
        &log_s,
    ]);
    env.wait_screen("agent", "READY");
    log
}

fn post(env: &Env, subject: &str) -> String {
    let body = fixture("ding/silent.jsonl").display().to_string();
    env.ok(&[
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
    .to_string()
}

fn states(env: &Env) -> Vec<String> {
    let st: Value = serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).unwrap();
    st["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["state"].as_str().unwrap().to_string())
        .collect()
}

const STOP: &str =
    r#"{"hook_event_name":"turn_stop","session_id":"s1","cwd":"/","transcript_path":null}"#;

#[test]
fn turn_boundary_dispatch_claims_unread_messages_without_pty_bytes() {
    let env = Env::new();
    let log = silent_rich_pane(&env);
    let first = post(&env, "first task");
    let second = post(&env, "second task");
    let vars = pane_env(&env, "agent", &env.socket());
    let stdin: Value = serde_json::from_str(STOP).unwrap();
    let answer = dispatch(
        &env,
        &vars,
        &["--event", "turn-stop", "--turn-boundary"],
        &stdin,
    );
    assert_eq!(answer["decision"], "allow", "{answer}");
    let context = answer["context"].as_str().unwrap();
    for (name, subject) in [(&first, "first task"), (&second, "second task")] {
        let id = &name[name.len() - 9..name.len() - 3];
        assert!(
            context.contains(&format!(
                "[DING] new message: [id:{id}] {subject} (from lead)"
            )),
            "{context}"
        );
    }
    assert_eq!(states(&env), vec!["hook-owned", "hook-owned"]);
    // Owned by the hook: the next turn boundary does not announce them again.
    let again = dispatch(
        &env,
        &vars,
        &["--event", "turn-stop", "--turn-boundary"],
        &stdin,
    );
    assert_eq!(again["context"], "", "{again}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        read_or_empty(&log),
        b"",
        "turn-boundary delivery typed into the pane"
    );
    // A non-boundary event adds nothing.
    let third = post(&env, "third");
    let other = dispatch(&env, &vars, &["--event", "before-tool"], &stdin);
    assert_eq!(other["context"], "");
    assert!(
        states(&env).contains(&"held:unreachable".to_string())
            || states(&env).iter().any(|s| s.starts_with("held:")),
        "{third}"
    );
}

#[test]
fn turn_boundary_without_a_daemon_returns_context_and_owns_nothing() {
    let env = Env::new();
    let _log = silent_rich_pane(&env);
    let name = post(&env, "offline");
    let mut vars = pane_env(&env, "agent", &env.socket());
    vars[1].1 = env.path("no-daemon.sock").display().to_string();
    let stdin: Value = serde_json::from_str(STOP).unwrap();
    let answer = dispatch(
        &env,
        &vars,
        &["--event", "turn-stop", "--turn-boundary"],
        &stdin,
    );
    let id = &name[name.len() - 9..name.len() - 3];
    assert!(
        answer["context"]
            .as_str()
            .unwrap()
            .contains(&format!("[id:{id}]")),
        "{answer}"
    );
    assert!(
        states(&env).iter().all(|s| s.starts_with("held:")),
        "nothing may be marked owned: {:?}",
        states(&env)
    );
}

#[test]
fn dispatch_in_a_pane_publishes_hook_events() {
    let env = Env::new();
    let _log = silent_rich_pane(&env);
    let mut events = Conn::open(&env.socket()).unwrap();
    assert_eq!(events.request(json!({"op":"subscribe"}))["ok"], true);
    let vars = pane_env(&env, "agent", &env.socket());
    let stdin = json!({"hook_event_name":"pre_compact","session_id":"s1","cwd":"/","transcript_path":null,"source":"auto"});
    dispatch(&env, &vars, &["--event", "pre-compact"], &stdin);
    let event = loop {
        let e = events.read().expect("event");
        if e["event"] == "hook" {
            break e;
        }
    };
    assert_eq!(event["session"], "agent");
    assert_eq!(event["hook"], "pre-compact");
    assert_eq!(event["hook_event_name"], "pre_compact");
}

fn hooks_file(env: &Env, marker: &std::path::Path) -> std::path::PathBuf {
    let append = |what: &str| json!({"handlers": [{"argv": ["sh", "-c", format!("echo {what} >> {}", marker.display())]}]});
    let file = json!({"version": 1, "events": {
        "session-start": [append("session-start")],
        "session-end": [append("session-end")],
    }});
    let path = env.path("hooks.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

#[test]
fn host_fires_session_start_and_end_exactly_once() {
    let adapters = fixture("adapters").display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters)]);
    let marker = env.path("lifecycle.log");
    let hooks = hooks_file(&env, &marker);
    let hooks_env = format!("BELFRY_HOOKS_FILE={}", hooks.display());
    env.ok(&[
        "new",
        "h",
        "--adapter",
        "fixture-harness",
        "--env",
        &hooks_env,
        "--",
        "sh",
        "-c",
        "echo up; sleep 1; exit 0",
    ]);
    assert!(
        eventually(Duration::from_secs(10), || String::from_utf8_lossy(
            &read_or_empty(&marker)
        )
        .contains("session-end")),
        "marker: {:?}",
        String::from_utf8_lossy(&read_or_empty(&marker))
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&marker)),
        "session-start\nsession-end\n"
    );
    // A pane without a host-lifecycle adapter fires nothing.
    let marker2 = env.path("none.log");
    let hooks2 = hooks_file(&env, &marker2);
    let hooks_env2 = format!("BELFRY_HOOKS_FILE={}", hooks2.display());
    env.ok(&[
        "new",
        "plain",
        "--env",
        &hooks_env2,
        "--",
        "sh",
        "-c",
        "exit 0",
    ]);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(read_or_empty(&marker2), b"");
}

/// Every adapter declaration in the repo (and the test fixture's): the events the host fires
/// and the events the harness fires natively are disjoint, so no event fires twice.
#[test]
fn host_lifecycle_and_native_events_are_disjoint_for_every_declaration() {
    const SEMANTIC: &[&str] = &[
        "session-start",
        "session-end",
        "prompt-submit",
        "before-tool",
        "after-tool",
        "turn-stop",
        "stop-failure",
        "pre-compact",
        "subagent-start",
        "subagent-stop",
        "notification",
        "interrupt",
    ];
    let roots = [
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters"),
        fixture("adapters"),
    ];
    let mut checked = Vec::new();
    for root in &roots {
        for entry in std::fs::read_dir(root).unwrap().flatten() {
            let path = entry.path().join("declaration.json");
            if !path.exists() {
                continue;
            }
            let decl: Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let native: BTreeSet<&str> = decl["events"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let host: BTreeSet<&str> = decl["host_lifecycle"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            for event in native.iter().chain(host.iter()) {
                assert!(
                    SEMANTIC.contains(event),
                    "{}: {event:?} is not a semantic event",
                    path.display()
                );
            }
            let both: Vec<_> = native.intersection(&host).collect();
            assert!(
                both.is_empty(),
                "{}: {both:?} would fire twice (natively and by the host)",
                path.display()
            );
            if let Some(tb) = decl["turn_boundary"].as_str() {
                assert!(
                    native.contains(tb) || host.contains(tb),
                    "{}: turn boundary {tb:?} never fires",
                    path.display()
                );
            }
            checked.push(path);
        }
    }
    assert!(checked.len() >= 6, "found only {checked:?}");
}

#[test]
fn the_declared_turn_boundary_reaches_the_pane_environment() {
    let adapters = fixture("adapters").display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters)]);
    env.ok(&[
        "new",
        "h",
        "--adapter",
        "fixture-harness",
        "--",
        "sleep",
        "600",
    ]);
    let child = env.snapshot("h")["child_pid"].as_u64().unwrap();
    let environ =
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{child}/environ")).unwrap())
            .into_owned();
    assert!(
        environ
            .split('\0')
            .any(|kv| kv == "BELFRY_TURN_BOUNDARY_EVENTS=turn-stop"),
        "{environ}"
    );
    // And it stays outside the generation: the same argv and the same policy without an
    // adapter is the same. (An adapter name declares an agent whose default delivery is
    // aggressive, spec §7.3, so the comparison pane declares that policy explicitly.)
    env.ok(&[
        "new",
        "plain",
        "--ding-delivery",
        "aggressive",
        "--",
        "sleep",
        "600",
    ]);
    assert_eq!(
        env.snapshot("h")["generation"],
        env.snapshot("plain")["generation"]
    );
}
