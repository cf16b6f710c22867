//! spec §6.1, §12: bad requests get an error naming the problem, the connection stays usable
//! (except for an oversize line, which closes it), and no pane is affected.

use std::time::Duration;

use belfry_tests::{eventually, read_or_empty, recorder_bin, Conn, Env};
use serde_json::json;

#[test]
fn bad_requests_get_clear_errors_and_nothing_changes() {
    let env = Env::new();
    let log = env.path("rec.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.spawn("rec", "24x80", &[&rec, "--log", &log_s], Some("READY"));
    let before = env.snapshot("rec");
    let mut conn = env.conn();

    let cases: Vec<(&str, String, &str)> = vec![
        (
            "malformed JSON",
            "{\"op\": \"list\"".into(),
            "malformed JSON",
        ),
        ("not an object", "[1,2]".into(), "JSON object"),
        ("missing op", r#"{"id":1}"#.into(), "missing field \"op\""),
        (
            "unknown op",
            r#"{"id":1,"op":"frobnicate"}"#.into(),
            "unknown op \"frobnicate\"",
        ),
        (
            "missing session",
            r#"{"id":1,"op":"send","input":[]}"#.into(),
            "missing field \"session\"",
        ),
        (
            "invalid session name",
            r#"{"id":1,"op":"snapshot","session":"../etc"}"#.into(),
            "invalid session name",
        ),
        (
            "unknown session",
            r#"{"id":1,"op":"snapshot","session":"nope"}"#.into(),
            "no pane named \"nope\"",
        ),
        (
            "missing input",
            r#"{"id":1,"op":"send","session":"rec"}"#.into(),
            "missing field \"input\"",
        ),
        (
            "unknown key",
            r#"{"id":1,"op":"send","session":"rec","input":[{"text":"a"},{"key":"Hyper-X"}]}"#
                .into(),
            "unknown key name \"Hyper-X\"",
        ),
        (
            "send over 64 KiB",
            json!({"id":1,"op":"send","session":"rec","input":[{"text":"y".repeat(70_000)}]})
                .to_string(),
            "65536-byte limit",
        ),
        (
            "delay over limit",
            r#"{"id":1,"op":"send","session":"rec","input":[{"text":"a"},{"delay_ms":9000}]}"#
                .into(),
            "delay_ms 9000 exceeds",
        ),
        (
            "bad expect",
            r#"{"id":1,"op":"send","session":"rec","expect":{"revison":3},"input":[{"text":"a"}]}"#
                .into(),
            "expect.revison",
        ),
        (
            "bad spawn argv",
            r#"{"id":1,"op":"spawn","session":"x","argv":[]}"#.into(),
            "argv",
        ),
        (
            "bad size",
            r#"{"id":1,"op":"resize","session":"rec","rows":0,"cols":10}"#.into(),
            "out of range",
        ),
        (
            "bad regex",
            r#"{"id":1,"op":"wait","session":"rec","regex":"(","timeout_ms":10}"#.into(),
            "not a valid regex",
        ),
        (
            "regex past the compile size limit",
            r#"{"id":1,"op":"wait","session":"rec","regex":"(?:a{1000}){1000}","timeout_ms":10}"#
                .into(),
            "not a valid regex",
        ),
    ];
    for (what, line, needle) in &cases {
        conn.send_raw(format!("{line}\n").as_bytes());
        let reply = conn
            .read()
            .unwrap_or_else(|| panic!("{what}: connection closed"));
        assert_eq!(reply["ok"], false, "{what}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(needle),
            "{what}: error {message:?} does not name {needle:?}"
        );
        // The same connection still serves.
        let list = conn.request(json!({"op":"list"}));
        assert_eq!(
            list["ok"], true,
            "{what}: connection unusable after the error"
        );
    }

    // An oversize line is an error and closes the connection; the daemon keeps serving.
    let mut big = Conn::open(&env.socket()).unwrap();
    let mut line = vec![b' '; 1024 * 1024 + 100];
    line.push(b'\n');
    big.send_raw(&line);
    let reply = big.read().expect("error reply before close");
    assert_eq!(reply["error"]["code"], "line-too-long", "{reply}");
    assert!(
        big.read().is_none(),
        "connection must be closed after an oversize line"
    );

    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        read_or_empty(&log),
        b"",
        "a rejected request wrote to the pane"
    );
    let after = env.snapshot("rec");
    assert_eq!(after["revision"], before["revision"]);
    assert_eq!(after["incarnation"], before["incarnation"]);
    assert_eq!(
        env.conn().request(json!({"op":"list"}))["panes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn cli_bad_arguments_name_the_problem() {
    let env = Env::new();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["new", "bad/name", "--", "true"],
            2,
            "invalid session name",
        ),
        (
            &["new", "ok", "--size", "0x9", "--", "true"],
            2,
            "out of range",
        ),
        (
            &["new", "ok", "--size", "big", "--", "true"],
            2,
            "ROWSxCOLS",
        ),
        (&["new", "ok", "--env", "NOEQUALS", "--", "true"], 2, "K=V"),
        (&["peek", "missing"], 1, "no pane named"),
        (&["send", "missing", "--text", "x"], 1, "no pane named"),
        (&["send", "missing"], 2, "nothing to send"),
        (&["attach", "missing"], 1, "no pane named"),
        (
            &["new", "nocmd", "--", "/nonexistent/program"],
            2,
            "cannot spawn",
        ),
    ];
    for (args, code, needle) in cases {
        let out = env.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "belfry {args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "belfry {args:?}: {stderr:?} does not name {needle:?}"
        );
    }
    // Nothing was left behind by the failed spawns.
    let ls = env.ok(&["ls", "--json"]);
    assert_eq!(ls.trim(), "[]");
}

#[test]
fn attach_with_a_mistyped_field_is_refused_not_made_writable() {
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);
    let mut conn = Conn::open(&env.pane_socket("w")).unwrap();
    let reply = conn.request(json!({"op":"attach","read_only":"yes"}));
    assert_eq!(reply["ok"], false, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("read_only"),
        "{reply}"
    );
    assert_eq!(env.snapshot("w")["clients"], 0);
}

#[test]
fn hello_without_a_common_version_is_unsupported_and_the_connection_stays_usable() {
    let env = Env::new();
    let mut conn = env.conn();
    let reply = conn.request(json!({"op":"hello","versions":[99]}));
    assert_eq!(reply["error"]["code"], "unsupported-version", "{reply}");
    let reply = conn.request(json!({"op":"hello","versions":[1]}));
    assert_eq!(reply["version"], 1, "{reply}");
}

/// spec §3: a field present in `expect` is compared; `null` is not "absent". A null guard is an
/// `invalid` error naming the field, on the daemon and on the pane host, and nothing is written.
#[test]
fn null_expect_fields_are_invalid_and_write_nothing() {
    let env = Env::new();
    let log = env.path("rec.log");
    let rec = recorder_bin().display().to_string();
    let log_s = log.display().to_string();
    env.spawn("rec", "24x80", &[&rec, "--log", &log_s], Some("READY"));
    let before = env.snapshot("rec");
    let mut daemon = env.conn();
    let mut host = Conn::open(&env.pane_socket("rec")).unwrap();
    for field in ["revision", "incarnation", "generation"] {
        let mut expect = json!({
            "incarnation": before["incarnation"],
            "generation": before["generation"],
            "revision": before["revision"],
        });
        expect[field] = serde_json::Value::Null;
        let request = json!({"op":"send","session":"rec","expect":expect,
                             "input":[{"text":"NULL-GUARD"},{"key":"Enter"}]});
        for (via, conn) in [("daemon", &mut daemon), ("pane host", &mut host)] {
            let reply = conn.request(request.clone());
            assert_eq!(reply["ok"], false, "{via}, null {field}: {reply}");
            assert_eq!(reply["error"]["code"], "invalid", "{via}: {reply}");
            let message = reply["error"]["message"].as_str().unwrap_or("");
            assert!(
                message.contains(&format!("\"expect.{field}\" is null")),
                "{via}: {message:?} does not name expect.{field}"
            );
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read_or_empty(&log), b"", "a null guard let bytes through");
    let after = env.snapshot("rec");
    assert_eq!(after["revision"], before["revision"], "the revision moved");
}

/// The daemon refuses a null guard itself, before forwarding: with the pane host stopped
/// (SIGSTOP), a forwarded request could not be answered, but the refusal comes at once.
#[test]
fn daemon_refuses_a_null_expect_without_forwarding_it() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);
    let host_pid = env.snapshot("w")["pid"].as_u64().unwrap() as i32;
    // SAFETY: kill(2) on the pane host this test started; it touches no memory.
    assert_eq!(unsafe { libc::kill(host_pid, libc::SIGSTOP) }, 0);
    let stream = std::os::unix::net::UnixStream::connect(env.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let request = json!({"id":1,"op":"send","session":"w","expect":{"revision":null},
                         "input":[{"text":"x"}]});
    writer.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut line = String::new();
    let read = BufReader::new(stream).read_line(&mut line);
    // SAFETY: as above; resume the pane host before asserting so the Env can clean up.
    unsafe { libc::kill(host_pid, libc::SIGCONT) };
    assert!(read.is_ok(), "the daemon did not answer at once: {read:?}");
    let reply: serde_json::Value = serde_json::from_str(&line).expect("reply is JSON");
    assert_eq!(reply["error"]["code"], "invalid", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"expect.revision\" is null"),
        "{reply}"
    );
}

/// Guards outside `expect` are strict too: a null `read_only` never makes a writable client,
/// and a null or non-string `session` is refused by the pane host instead of skipping its check.
#[test]
fn null_read_only_and_session_are_refused_by_the_pane_host() {
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);
    let mut conn = Conn::open(&env.pane_socket("w")).unwrap();
    let reply = conn.request(json!({"op":"attach","read_only":null}));
    assert_eq!(reply["ok"], false, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"read_only\" is null"),
        "{reply}"
    );
    assert_eq!(env.snapshot("w")["clients"], 0);
    let mut conn = Conn::open(&env.pane_socket("w")).unwrap();
    for session in [serde_json::Value::Null, json!(7)] {
        let reply = conn.request(json!({"op":"send","session":session,"input":[{"text":"x"}]}));
        assert_eq!(
            reply["error"]["code"], "invalid",
            "session {session}: {reply}"
        );
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("\"session\""),
            "{reply}"
        );
    }
}

/// A `wait` for longer than the stated maximum (24 hours), down to `u64::MAX` ms, is refused as
/// `invalid` naming the field, by the pane host directly and through the daemon; the pane host
/// does not panic (its connection answers and stays usable) and a bounded wait still works.
#[test]
fn wait_with_a_huge_timeout_or_quiet_is_invalid_and_never_panics() {
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);
    let mut direct = Conn::open(&env.pane_socket("w")).unwrap();
    let mut daemon = env.conn();
    for (field, ms) in [
        ("timeout_ms", u64::MAX),
        ("timeout_ms", 86_400_001),
        ("quiet_ms", u64::MAX),
    ] {
        let mut request = json!({"op":"wait","session":"w","regex":"never"});
        request[field] = json!(ms);
        if field == "quiet_ms" {
            request["timeout_ms"] = json!(100);
        }
        for (via, conn) in [("pane host", &mut direct), ("daemon", &mut daemon)] {
            let reply = conn.request(request.clone());
            assert_eq!(
                reply["error"]["code"], "invalid",
                "{via} {field}={ms}: {reply}"
            );
            let message = reply["error"]["message"].as_str().unwrap_or("");
            assert!(
                message.contains(&format!("\"{field}\"")) && message.contains("86400000"),
                "{via} {field}={ms}: {reply}"
            );
        }
    }
    // The maximum itself is accepted; the same connection still answers a bounded wait.
    let reply =
        direct.request(json!({"op":"wait","exit":false,"revision":0,"timeout_ms":86_400_000}));
    assert_eq!(reply["result"], "matched", "{reply}");
    let reply = direct.request(json!({"op":"wait","regex":"never","timeout_ms":50}));
    assert_eq!(reply["error"]["code"], "timeout", "{reply}");
}

/// Issue 13, target 2: a client that asks to hand its terminal over and then sends no
/// descriptor, or one that is not a terminal, is let go with the reason in the pane host's
/// log; the pane keeps running with no client, and a `terminal` field of the wrong type is
/// refused by name.
#[test]
fn a_terminal_hand_over_without_a_terminal_is_refused_and_leaves_the_pane_alone() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsFd;
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);

    for (field, bad) in [
        ("terminal", json!("yes")),
        ("terminal", json!(null)),
        ("keyboard", json!("C-b")),
        ("keyboard", json!(300)),
        ("keyboard", json!(null)),
    ] {
        let mut conn = Conn::open(&env.pane_socket("w")).unwrap();
        let reply = conn.request(json!({"op":"attach","terminal":true, field: bad}));
        assert_eq!(reply["ok"], false, "{reply}");
        assert!(
            reply["error"]["message"].as_str().unwrap().contains(field),
            "{reply}"
        );
    }
    assert!(eventually(Duration::from_secs(5), || env.snapshot("w")
        ["clients"]
        == 0));

    // A watching client's keys are its own: the pane host does not take its keyboard.
    let mut conn = Conn::open(&env.pane_socket("w")).unwrap();
    let reply = conn.request(json!({"op":"attach","terminal":true,"keyboard":2,"read_only":true}));
    assert_eq!(reply["terminal"], true, "{reply}");
    assert!(reply.get("keyboard").is_none(), "{reply}");
    drop(conn);
    assert!(eventually(Duration::from_secs(5), || env.snapshot("w")
        ["clients"]
        == 0));

    // Attaches asking for the hand-over; returns the connection once the pane host agreed.
    let agree = |keyboard: bool| {
        let stream = std::os::unix::net::UnixStream::connect(env.pane_socket("w")).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request = json!({"id":1,"op":"attach","terminal":true,"rows":24,"cols":80});
        if keyboard {
            request["keyboard"] = json!(2);
        }
        (&stream)
            .write_all(format!("{request}\n").as_bytes())
            .unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(reply["terminal"], true, "{reply}");
        assert_eq!(reply.get("keyboard").is_some(), keyboard, "{reply}");
        assert_eq!(env.snapshot("w")["clients"], 1);
        (stream, reader)
    };
    // Ends when the pane host closes the connection (EOF), never with frames.
    let closed = |mut reader: BufReader<std::os::unix::net::UnixStream>| {
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut rest).expect("closed, not timed out");
        assert!(rest.is_empty(), "the pane host wrote {rest:?}");
    };

    // A byte with no descriptor.
    let (stream, reader) = agree(false);
    (&stream).write_all(b"T").unwrap();
    closed(reader);

    // Descriptors that are not terminals: one, where one is asked for; one, where the
    // keyboard makes two; two.
    let file = std::fs::File::create(env.path("not-a-terminal")).unwrap();
    for (keyboard, sent) in [(false, 1), (true, 1), (true, 2)] {
        let (stream, reader) = agree(keyboard);
        let fds = vec![file.as_fd(); sent];
        belfry_tests::send_descriptors(&stream, &fds);
        closed(reader);
    }
    assert_eq!(
        std::fs::metadata(env.path("not-a-terminal")).unwrap().len(),
        0,
        "the pane host wrote to a descriptor that is not a terminal"
    );

    assert!(eventually(Duration::from_secs(5), || env.snapshot("w")
        ["clients"]
        == 0));
    assert!(env.snapshot("w")["exited"].is_null());
    let log = env.ok(&["logs", "w"]);
    assert!(log.contains("sent 0 descriptors"), "{log}");
    assert!(
        log.contains("sent 1 descriptors with its terminal byte, not 2"),
        "{log}"
    );
    assert!(log.contains("not a terminal"), "{log}");
}
