//! `bind` (docs/protocol.md, "bind"): the daemon hands a client's connection to the pane's
//! host. These tests prove that the pane host serves the connection afterwards (its pid
//! answers, the daemon no longer holds it, it outlives the daemon), that a refused or failed
//! bind leaves the connection with the daemon, serving on, and that a pane host refuses a
//! hand-over that does not carry a connection.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use belfry_tests::{eventually, send_descriptors, signal, socket_inodes, Conn, Env, Stopped};
use serde_json::{json, Value};

#[test]
fn a_bound_connection_is_served_by_the_pane_host_and_outlives_the_daemon() {
    let env = Env::new();
    env.spawn("b", "24x80", &["cat"], None);
    let host = env.pane_host_pid("b");
    let daemon = env.daemon_pid();
    let mut conn = env.conn();
    let daemon_before = socket_inodes(daemon);
    let bound = conn.request(json!({"op":"bind","session":"b"}));
    assert_eq!(bound["ok"], true, "{bound}");
    assert_eq!(bound["role"], "pane-host", "{bound}");
    assert_eq!(bound["pid"], host, "{bound}");
    assert_eq!(bound["session"], "b", "{bound}");

    // A guarded send on the bound connection is the pane host's: it knows the revision.
    let revision = conn.request(json!({"op":"info","session":"b"}))["revision"]
        .as_u64()
        .expect("revision");
    let sent = conn.request(json!({"op":"send","session":"b",
        "expect":{"revision":revision},"input":[{"text":"bound-one\r"}]}));
    assert_eq!(sent["result"], "sent", "{sent}");
    let stale = conn.request(json!({"op":"send","session":"b",
        "expect":{"revision":revision},"input":[{"text":"never\r"}]}));
    assert_eq!(stale["result"], "conflict", "{stale}");

    // The daemon's ops are not served here any more: this is a pane host's connection.
    let list = conn.request(json!({"op":"list"}));
    assert_eq!(list["error"]["code"], "unknown-op", "{list}");
    assert!(
        list["error"]["message"]
            .as_str()
            .unwrap()
            .contains("for a pane host"),
        "{list}"
    );
    let other = conn.request(json!({"op":"snapshot","session":"other"}));
    assert_eq!(other["error"]["code"], "not-found", "{other}");

    // The server's end of the connection left the daemon for the pane host: a socket the
    // daemon held before the bind is gone from it and held by the pane host. The daemon
    // closes its copy when it reads the pane host's `adopted`, which the pane host writes
    // before it answers the bind, so the close may trail the reply by a moment (docs/
    // protocol.md, "adopt"); it must come, within the deadline.
    let mut seen = (Default::default(), Default::default());
    let moved = eventually(Duration::from_secs(5), || {
        let daemon_after = socket_inodes(daemon);
        let host_sockets = socket_inodes(host);
        let moved = daemon_before
            .difference(&daemon_after)
            .filter(|inode| host_sockets.contains(*inode))
            .count();
        seen = (daemon_after, host_sockets);
        moved == 1
    });
    assert!(
        moved,
        "daemon before {daemon_before:?}, after {:?}, pane host {:?}",
        seen.0, seen.1
    );

    // The daemon dies; the bound connection serves on.
    signal(daemon, libc::SIGKILL);
    assert!(eventually(Duration::from_secs(5), || {
        !belfry_tests::pid_alive(daemon)
    }));
    let revision = conn.request(json!({"op":"info","session":"b"}))["revision"]
        .as_u64()
        .expect("revision after the daemon died");
    let sent = conn.request(json!({"op":"send","session":"b",
        "expect":{"revision":revision},"input":[{"text":"bound-two\r"}]}));
    assert_eq!(sent["result"], "sent", "{sent}");
    assert!(eventually(Duration::from_secs(5), || {
        let snap = conn.request(json!({"op":"snapshot","session":"b"}));
        let text = snap["lines"].to_string();
        text.contains("bound-one") && text.contains("bound-two")
    }));
}

#[test]
fn a_refused_bind_leaves_the_connection_with_the_daemon() {
    let env = Env::new();
    env.spawn("r", "24x80", &["cat"], None);
    let mut conn = env.conn();
    let missing = conn.request(json!({"op":"bind","session":"nope"}));
    assert_eq!(missing["error"]["code"], "not-found", "{missing}");
    let unnamed = conn.request(json!({"op":"bind"}));
    assert_eq!(unnamed["error"]["code"], "invalid", "{unnamed}");
    let list = conn.request(json!({"op":"list"}));
    assert_eq!(
        list["ok"], true,
        "the daemon serves on after a refused bind: {list}"
    );

    // A bind with a request behind it in the same write: the daemon has read that request
    // already, so it keeps the connection and answers both, in order.
    conn.send_raw(
        format!(
            "{}\n{}\n",
            json!({"id":"b1","op":"bind","session":"r"}),
            json!({"id":"l1","op":"list"})
        )
        .as_bytes(),
    );
    let bind = conn.read().expect("bind reply");
    assert_eq!(bind["id"], "b1", "{bind}");
    assert_eq!(bind["error"]["code"], "invalid", "{bind}");
    assert!(
        bind["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bind must be the last request sent before its answer"),
        "{bind}"
    );
    let list = conn.read().expect("list reply");
    assert_eq!(list["id"], "l1", "{list}");
    assert_eq!(list["ok"], true, "{list}");
}

#[test]
fn a_stopped_pane_host_fails_the_bind_within_its_deadline_and_the_daemon_serves_on() {
    let env = Env::new();
    env.spawn("s", "24x80", &["cat"], None);
    let host = env.pane_host_pid("s");
    let mut conn = env.conn();
    {
        let _stopped = Stopped::new(host);
        let started = Instant::now();
        let bind = conn.request(json!({"op":"bind","session":"s"}));
        let took = started.elapsed();
        assert_eq!(bind["error"]["code"], "timeout", "{bind}");
        assert!(
            bind["error"]["message"].as_str().unwrap().contains("adopt"),
            "{bind}"
        );
        assert!(took < Duration::from_secs(6), "the bind took {took:?}");
        let list = conn.request(json!({"op":"list"}));
        assert_eq!(list["ok"], true, "{list}");
    }
    // Resumed, the pane host finds the daemon gone from the hand-over and serves as before;
    // the connection, still the daemon's, reaches it by forwarding, and a new bind succeeds.
    let snap = conn.request(json!({"op":"snapshot","session":"s"}));
    assert_eq!(snap["ok"], true, "{snap}");
    let bind = conn.request(json!({"op":"bind","session":"s"}));
    assert_eq!(bind["pid"], host, "{bind}");
}

#[test]
fn a_pane_host_refuses_a_hand_over_without_a_connection_and_serves_on() {
    let env = Env::new();
    env.spawn("h", "24x80", &["cat"], None);
    let mut conn = Conn::open(&env.pane_socket("h")).unwrap();
    conn.send_raw(format!("{}\n", json!({"id":7,"op":"adopt","bind_id":"x"})).as_bytes());
    let ready = conn.read().expect("ready");
    assert_eq!(ready["ready"], true, "{ready}");
    // A file, not a socket.
    let file = std::fs::File::open("/dev/null").unwrap();
    send_descriptors(conn.stream(), &[file.as_fd()]);
    let refused = conn.read().expect("refusal");
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a Unix stream socket"),
        "{refused}"
    );
    // The daemon does not serve `adopt`; the pane host serves on.
    let mut daemon = env.conn();
    let adopt = daemon.request(json!({"op":"adopt","bind_id":1}));
    assert_eq!(adopt["error"]["code"], "unknown-op", "{adopt}");
    assert_eq!(env.snapshot("h")["ok"], true);
}

#[test]
fn a_connection_through_belfry_proxy_binds_like_a_local_one() {
    // `belfry proxy` is the far end of `belfry --host`: a remote supervisor that binds gets
    // the proxy's connection handed to the pane host, with no daemon hop on that machine.
    use std::process::Stdio;
    let env = Env::new();
    env.spawn("p", "24x80", &["cat"], None);
    let host = env.pane_host_pid("p");
    let mut proxy = env
        .cmd(&["proxy"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = proxy.stdin.take().unwrap();
    let mut stdout = BufReader::new(proxy.stdout.take().unwrap());
    let mut ask = |request: Value| {
        stdin.write_all(format!("{request}\n").as_bytes()).unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let bound = ask(json!({"id":1,"op":"bind","session":"p"}));
    assert_eq!(bound["pid"], host, "{bound}");
    let info = ask(json!({"id":2,"op":"info"}));
    let revision = info["revision"].as_u64().expect("revision");
    let sent = ask(json!({"id":3,"op":"send","expect":{"revision":revision},
        "input":[{"text":"through-the-proxy\r"}]}));
    assert_eq!(sent["result"], "sent", "{sent}");
    drop(stdin);
    let status = proxy.wait().unwrap();
    assert!(status.success(), "{status}");
}
