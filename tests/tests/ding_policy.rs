//! spec §7.3: automatic delivery is only for panes declared as agents. A plain `belfry new`
//! pane (here a real interactive `bash`) gets delivery `none`: posting to it types nothing, so a
//! hostile subject can never run as a command, and its mail stays unread in the inbox. A pane
//! started with `--ding-delivery aggressive` or `--adapter`, and an agent declared in
//! `belfry.kdl` without a `ding {}` block, get the aggressive notice.

use std::time::Duration;

use belfry_tests::{eventually, read_or_empty, recorder_bin, Env};
use serde_json::Value;

fn post(env: &Env, session: &str, subject: &str) -> String {
    let body = env.path("body.md");
    std::fs::write(&body, "please look\n").unwrap();
    let out = env.ok(&[
        "inbox",
        "post",
        session,
        "--from",
        "lead",
        "--subject",
        subject,
        &body.display().to_string(),
    ]);
    out.trim().to_string()
}

fn unread(env: &Env, session: &str) -> Vec<String> {
    let out = env.ok(&["inbox", "ls", session, "--json"]);
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    list.iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_shell_pane_not_declared_an_agent_receives_zero_bytes_and_keeps_its_mail() {
    let env = Env::new();
    let pwned = env.path("PWNED");
    env.spawn(
        "shell",
        "24x120",
        &["env", "PS1=READY> ", "bash", "--norc", "--noprofile", "-i"],
        Some("READY>"),
    );
    // Let the prompt settle, then take the revision: any byte written to the PTY (and any
    // echo of it) moves it (spec §2).
    std::thread::sleep(Duration::from_millis(300));
    let before = env.revision("shell");
    let hostile = format!("x; touch {} #", pwned.display());
    let names = vec![
        post(&env, "shell", "first"),
        post(&env, "shell", &hostile),
        post(&env, "shell", "third (with parentheses)"),
    ];
    // Aggressive delivery would have pasted, waited 500 ms and pressed Enter well within this.
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(
        env.revision("shell"),
        before,
        "bytes reached a pane that is not an agent; screen: {:?}",
        env.lines("shell")
    );
    assert!(!pwned.exists(), "a message subject ran as a shell command");
    let screen = env.lines("shell").join("\n");
    assert!(!screen.contains("DING"), "{screen}");

    let text = env.ok(&["ding", "status", "shell"]);
    assert!(
        text.contains("policy:     none (not declared an agent)"),
        "{text}"
    );
    let status: Value =
        serde_json::from_str(&env.ok(&["ding", "status", "shell", "--json"])).unwrap();
    assert_eq!(status["policy"]["delivery"], "none", "{status}");
    assert_eq!(status["counters"]["sends"], 0, "{status}");
    assert_eq!(unread(&env, "shell"), names, "mail stays unread, FIFO");
    assert!(!pwned.exists());
}

#[test]
fn ding_delivery_aggressive_is_accepted_and_delivers() {
    let env = Env::new();
    let log = env.recorder_pane("agent", &["--ding-delivery", "aggressive"]);
    let name = post(&env, "agent", "hello");
    let id = &name[name.len() - 9..name.len() - 3];
    let want = format!("[DING] new message: [id:{id}] hello (from lead); check your inbox\r");
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            == want.as_bytes()),
        "{:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    let text = env.ok(&["ding", "status", "agent"]);
    assert!(text.contains("policy:     aggressive\n"), "{text}");
}

#[test]
fn an_adapter_name_declares_an_agent_with_aggressive_delivery() {
    // The adapter must exist (an unknown name is refused at the CLI): an empty declaration
    // in an adapters directory of the test's own.
    let adapters = tempfile::tempdir().unwrap();
    std::fs::create_dir(adapters.path().join("some-harness")).unwrap();
    std::fs::write(adapters.path().join("some-harness/declaration.json"), "{}").unwrap();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters.path().display().to_string())]);
    let log = env.recorder_pane("agent", &["--adapter", "some-harness"]);
    let _ = post(&env, "agent", "hello");
    assert!(
        eventually(Duration::from_secs(5), || String::from_utf8_lossy(
            &read_or_empty(&log)
        )
        .contains("[DING] new message:")),
        "no notice for a pane started with --adapter"
    );
}

#[test]
fn an_unknown_delivery_token_is_refused_by_name() {
    let env = Env::new();
    let out = env.run(&[
        "new",
        "agent",
        "--ding-delivery",
        "loud",
        "--",
        "sleep",
        "600",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown DING delivery policy \"loud\""),
        "{stderr}"
    );
    let out = env.run(&[
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--ding-adapter",
        "/bin/true",
        "--",
        "sleep",
        "600",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("runs no adapter"), "{stderr}");
}

#[test]
fn a_declared_agent_without_a_ding_block_still_gets_aggressive_delivery() {
    let env = Env::new();
    let log = env.path("agent.log");
    let file = env.path("belfry.kdl");
    std::fs::write(
        &file,
        format!(
            "agent \"agent\" {{\n  command \"{}\" \"--log\" \"{}\"\n}}\n",
            recorder_bin().display(),
            log.display()
        ),
    )
    .unwrap();
    env.ok(&["up", &file.display().to_string()]);
    env.wait_screen("agent", "READY");
    let name = post(&env, "agent", "declared");
    let id = &name[name.len() - 9..name.len() - 3];
    let want = format!("[DING] new message: [id:{id}] declared (from lead); check your inbox\r");
    assert!(
        eventually(Duration::from_secs(5), || read_or_empty(&log)
            == want.as_bytes()),
        "{:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    let text = env.ok(&["ding", "status", "agent"]);
    assert!(text.contains("policy:     aggressive\n"), "{text}");
}
