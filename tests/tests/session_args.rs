//! One rule for the session of every inbox, presence and ding command: a positional argument,
//! optional, defaulting to `$BELFRY_SESSION` inside a pane (`inbox post` alone requires it: it
//! names the recipient). The older `--session S` spelling keeps working where it existed.

use std::io::Write;
use std::process::{Output, Stdio};

use belfry_tests::Env;
use serde_json::Value;

/// `belfry ARGS`, as a program inside the pane `session` runs it (`$BELFRY_SESSION` set).
fn in_pane(env: &Env, session: &str, args: &[&str]) -> Output {
    env.cmd(args)
        .env("BELFRY_SESSION", session)
        .output()
        .expect("run belfry")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn post(env: &Env, to: &str, subject: &str) -> String {
    let mut child = env
        // `--create`: these tests post to inboxes no pane has.
        .cmd(&[
            "inbox",
            "post",
            to,
            "--create",
            "--subject",
            subject,
            "--json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run belfry inbox post");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"body\n")
        .expect("write body");
    let out = child.wait_with_output().expect("post output");
    assert!(out.status.success());
    let posted: Value = serde_json::from_slice(&out.stdout).expect("post --json");
    posted["name"].as_str().expect("a name").to_string()
}

fn unread(env: &Env) -> usize {
    let listed: Value = serde_json::from_str(&env.ok(&["inbox", "ls", "agent", "--json"]))
        .expect("inbox ls --json");
    listed.as_array().map_or(0, Vec::len)
}

#[test]
fn read_and_archive_take_the_session_positionally_by_flag_or_from_the_pane() {
    let env = Env::new();
    let names: Vec<String> = (0..6)
        .map(|i| post(&env, "agent", &format!("m{i}")))
        .collect();

    // Listing: positional, and from the pane.
    assert!(env.ok(&["inbox", "ls", "agent"]).contains(&names[0]));
    assert!(ok(in_pane(&env, "agent", &["inbox", "ls"])).contains(&names[0]));

    // Reading: SESSION NAME, a lone NAME inside the pane, the older NAME --session, SESSION
    // alone (the oldest), and nothing at all inside the pane.
    let read = env.ok(&["inbox", "read", "agent", &names[3]]);
    assert!(read.contains("Subject: m3"), "{read}");
    let read = ok(in_pane(&env, "agent", &["inbox", "read", &names[4]]));
    assert!(read.contains("Subject: m4"), "{read}");
    let read = env.ok(&["inbox", "read", &names[5], "--session", "agent"]);
    assert!(read.contains("Subject: m5"), "{read}");
    let read = env.ok(&["inbox", "read", "agent"]);
    assert!(read.contains("Subject: m0"), "{read}");
    let read = ok(in_pane(&env, "agent", &["inbox", "read"]));
    assert!(read.contains("Subject: m1"), "{read}");
    assert_eq!(unread(&env), 1);

    // Archiving: SESSION NAME and the older NAME --session; a lone NAME inside the pane.
    let last = post(&env, "agent", "m6");
    env.ok(&["inbox", "archive", "agent", &names[2]]);
    let other = post(&env, "agent", "m7");
    env.ok(&["inbox", "archive", &last, "--session", "agent"]);
    ok(in_pane(&env, "agent", &["inbox", "archive", &other]));
    assert_eq!(unread(&env), 0);

    // The session given twice, differently, is refused by name.
    let out = env.run(&["inbox", "read", "agent", &names[0], "--session", "other"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("given twice"), "{stderr}");
}

#[test]
fn presence_and_ding_status_take_the_session_positionally_by_flag_or_from_the_pane() {
    let env = Env::new();
    env.ok(&["new", "agent", "--", "sleep", "600"]);
    assert_eq!(env.ok(&["presence", "dnd", "agent"]), "agent: dnd\n");
    assert_eq!(
        env.ok(&["presence", "busy", "--session", "agent"]),
        "agent: busy\n"
    );
    assert_eq!(
        ok(in_pane(&env, "agent", &["presence", "available"])),
        "agent: available\n"
    );
    let out = env.run(&["presence", "dnd", "agent", "--session", "other"]);
    assert_eq!(out.status.code(), Some(2));

    let named: Value =
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).expect("JSON");
    let from_pane: Value =
        serde_json::from_str(&ok(in_pane(&env, "agent", &["ding", "status", "--json"])))
            .expect("JSON");
    assert_eq!(named["session"], "agent", "{named}");
    assert_eq!(from_pane["session"], named["session"], "{from_pane}");

    // Outside a pane, a command that needs a session and got none says how to give one.
    let out = env.run(&["ding", "status"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no session"), "{stderr}");
    env.shutdown();
}
