//! spec §6.2: every command over SSH. A real OpenSSH server (`belfry_tests::sshd`) on
//! 127.0.0.1 serves a "far" belfry installation; the "near" one reaches it only through
//! `belfry --host box …` (or `box:NAME`), which runs `ssh -F CONFIG -T box belfry proxy`.
//! Each test has its own far and near runtime, state and log directories, and its own sshd.
//! What the near side does is checked on the far side directly (its own socket), so a test
//! proves the op reached the far panes, not only that something answered.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use belfry_tests::sshd::{free_port, FarBelfry, Sshd};
use belfry_tests::{eventually, read_or_empty, recorder_bin, Env};
use serde_json::Value;

/// The near side's `belfry ARGS`, through the test's sshd to `box`.
fn over(near: &Env, sshd: &Sshd, args: &[&str]) -> std::process::Command {
    let ssh = sshd.ssh_command();
    let mut all = vec!["--ssh-command", ssh.as_str()];
    all.extend_from_slice(args);
    near.cmd(&all)
}

/// Runs it, asserting success; returns stdout.
fn over_ok(near: &Env, sshd: &Sshd, args: &[&str]) -> String {
    let out = over(near, sshd, args).output().expect("run belfry");
    assert!(
        out.status.success(),
        "belfry {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A far and a near installation and the sshd between them.
fn setup() -> (Env, Env, Sshd) {
    let far = Env::new();
    let near = Env::new();
    let sshd = Sshd::start(&far, FarBelfry::Installed);
    (far, near, sshd)
}

#[test]
fn ls_new_peek_guarded_send_and_wait_work_over_ssh() {
    let (far, near, sshd) = setup();
    let out = over_ok(&near, &sshd, &["--host", "box", "ls"]);
    assert_eq!(out.trim(), "no panes", "{out}");

    let out = over_ok(
        &near,
        &sshd,
        &[
            "--host",
            "box",
            "new",
            "worker",
            "--size",
            "10x40",
            "--",
            "sh",
            "-c",
            "echo ready; exec cat",
        ],
    );
    assert!(out.starts_with("worker: pid "), "{out}");
    // The pane is the far machine's: its own daemon lists it, the near one has none.
    far.wait_screen("worker", "ready");
    assert!(!near.socket().exists(), "the near side started a daemon");
    let listed = over_ok(&near, &sshd, &["--host", "box", "ls"]);
    assert!(
        listed.contains("worker") && listed.contains("10x40"),
        "{listed}"
    );

    // peek --json over ssh is the far pane's snapshot, with its expect token.
    let peeked: Value =
        serde_json::from_str(&over_ok(&near, &sshd, &["peek", "box:worker", "--json"])).unwrap();
    let direct = far.snapshot("worker");
    assert_eq!(peeked["revision"], direct["revision"]);
    assert_eq!(peeked["incarnation"], direct["incarnation"]);
    assert_eq!(peeked["lines"], direct["lines"]);
    let token = peeked["expect"].as_str().expect("expect token").to_owned();

    // A guarded send that wins: its bytes reach the far pane.
    let out = over_ok(
        &near,
        &sshd,
        &[
            "send",
            "box:worker",
            "--expect",
            &token,
            "--text",
            "typed-over-ssh",
            "--key",
            "Enter",
        ],
    );
    assert!(out.starts_with("sent (revision "), "{out}");
    far.wait_screen("worker", "typed-over-ssh");

    // The same token again is stale: a conflict, exit 3, and zero bytes written (the far
    // pane's revision and screen do not move).
    let before = far.snapshot("worker");
    let out = over(
        &near,
        &sshd,
        &[
            "send",
            "box:worker",
            "--expect",
            &token,
            "--text",
            "MUST-NOT-APPEAR",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing was written"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(300));
    let after = far.snapshot("worker");
    assert_eq!(
        after["revision"], before["revision"],
        "a conflict moved the revision"
    );
    assert_eq!(after["lines"], before["lines"]);
    assert!(!format!("{}", after["lines"]).contains("MUST-NOT-APPEAR"));

    // wait over ssh: for a screen regex the far pane only shows later.
    let waiting = over(
        &near,
        &sshd,
        &[
            "wait",
            "box:worker",
            "--regex",
            "late-line",
            "--timeout-ms",
            "20000",
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    far.ok(&["send", "worker", "--text", "late-line", "--key", "Enter"]);
    let out = waiting.wait_with_output().unwrap();
    assert!(out.status.success());
    let state: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(state["revision"].as_u64().unwrap() > after["revision"].as_u64().unwrap());
}

#[test]
fn events_stream_over_ssh_and_an_inbox_post_is_delivered_by_the_far_ding() {
    let (far, near, sshd) = setup();
    let log = far.path("agent.log");
    far.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--",
        &recorder_bin().display().to_string(),
        "--log",
        &log.display().to_string(),
        "--bracketed",
    ]);
    far.wait_screen("agent", "READY");

    // events over ssh: the far pane's revision events, as the far daemon sends them.
    let mut events = over(&near, &sshd, &["events", "box:agent", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    let stdout = events.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });

    // inbox post over ssh: the message lands in the far inbox, and the far DING engine
    // types its notice into the far pane.
    let mut post = over(
        &near,
        &sshd,
        &[
            "inbox",
            "post",
            "box:agent",
            "--from",
            "lead",
            "--subject",
            "over-ssh",
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    post.stdin
        .take()
        .unwrap()
        .write_all(b"please look at the failing test\n")
        .unwrap();
    let out = post.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "inbox post: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(name.ends_with(".md"), "{name}");
    let id = &name[name.len() - 9..name.len() - 3];
    let paste = format!(
        "\x1b[200~[DING] new message: [id:{id}] over-ssh (from lead); check your inbox\x1b[201~\r"
    );
    assert!(
        eventually(Duration::from_secs(10), || read_or_empty(&log)
            == paste.as_bytes()),
        "the far pane got {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    // The body is the far inbox's file, read back over ssh.
    let listed = over_ok(&near, &sshd, &["inbox", "ls", "box:agent", "--json"]);
    assert!(listed.contains(&name), "{listed}");

    // The notice moved the far pane's revision: the event stream over ssh saw it.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(line) => {
                let event: Value = serde_json::from_str(&line).unwrap();
                seen.push(line);
                if event["event"] == "revision" && event["session"] == "agent" {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let _ = events.kill();
    let _ = events.wait();
    assert!(
        found,
        "no revision event of the far pane over ssh: {seen:?}"
    );
}

/// Starts a near pane whose program is `belfry --ssh-command … attach ARGS`, followed by a
/// report of how it ended and whether the terminal was left cooked.
fn attach_client(near: &Env, sshd: &Sshd, outer: &str, args: &str) {
    let script = format!(
        "\"$BELFRY_BIN\" --ssh-command '{}' attach {args}; echo \"ATTACH-EXIT=$?\"; \
         if stty -a | grep -q -- '-icanon'; then echo TTY-RAW; else echo TTY-COOKED; fi; sleep 600",
        sshd.ssh_command()
    );
    near.spawn(outer, "24x80", &["sh", "-c", &script], None);
}

/// The pid of the first child of `pid`, once it has one.
fn first_child(pid: u64) -> u64 {
    let mut found = 0;
    assert!(eventually(Duration::from_secs(10), || {
        found = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        found != 0
    }));
    found
}

#[test]
fn attach_over_ssh_types_detaches_and_reattach_redraws_what_peek_shows() {
    let (far, near, sshd) = setup();
    far.ok(&[
        "new",
        "inner",
        "--size",
        "10x40",
        "--env",
        "PS1=inner$ ",
        "--",
        "sh",
        "-i",
    ]);
    far.wait_screen("inner", "inner\\$");
    attach_client(&near, &sshd, "outer", "box:inner");
    near.wait_screen("outer", "inner\\$");
    assert!(eventually(Duration::from_secs(10), || far
        .snapshot("inner")["clients"]
        == 1));
    // The attached client's size reached the far pane (policy latest).
    assert!(eventually(Duration::from_secs(5), || far.snapshot("inner")
        ["size"]["rows"]
        == 24));

    near.ok(&[
        "send",
        "outer",
        "--text",
        "echo hi-$((40+2))",
        "--key",
        "Enter",
    ]);
    far.wait_screen("inner", "hi-42");
    near.wait_screen("outer", "hi-42");

    // A resize of the local terminal reaches the far pane (SIGWINCH, then a resize frame over
    // ssh).
    near.ok(&["resize", "outer", "30x100"]);
    assert!(
        eventually(Duration::from_secs(10), || {
            let size = &far.snapshot("inner")["size"];
            size["rows"] == 30 && size["cols"] == 100
        }),
        "the far pane is {}",
        far.snapshot("inner")["size"]
    );

    // The detach key ends the client, exit 0, terminal cooked; the far pane runs on.
    near.ok(&["send", "outer", "--key", "C-b", "--text", "d"]);
    near.wait_screen("outer", "ATTACH-EXIT=0");
    near.wait_screen("outer", "TTY-(RAW|COOKED)");
    let text = near.lines("outer").join("\n");
    assert!(text.contains("TTY-COOKED"), "terminal left raw:\n{text}");
    assert!(text.contains("[detached from box:inner]"), "{text}");
    assert!(eventually(Duration::from_secs(10), || far
        .snapshot("inner")["clients"]
        == 0));
    assert!(far.snapshot("inner")["exited"].is_null());

    // Re-attach: the redraw over ssh is exactly what peek shows on the far side.
    attach_client(&near, &sshd, "again", "box:inner");
    let same = eventually(Duration::from_secs(15), || {
        near.lines("again") == far.lines("inner")
    });
    assert!(
        same,
        "the re-attached client shows\n{:#?}\nbut the far pane shows\n{:#?}",
        near.lines("again"),
        far.lines("inner")
    );
    assert_eq!(
        near.snapshot("again")["cursor"],
        far.snapshot("inner")["cursor"]
    );
    near.ok(&["send", "again", "--key", "C-b", "--text", "d"]);
    near.wait_screen("again", "ATTACH-EXIT=0");
}

#[test]
fn ssh_killed_mid_attach_restores_the_terminal_and_the_far_pane_keeps_running() {
    let (far, near, sshd) = setup();
    far.ok(&[
        "new",
        "inner",
        "--",
        "sh",
        "-c",
        "printf '\\033[?1049h\\033[?2004hfull screen'; exec sleep 600",
    ]);
    far.wait_screen("inner", "full screen");
    attach_client(&near, &sshd, "outer", "box:inner");
    near.wait_screen("outer", "full screen");
    assert_eq!(near.snapshot("outer")["modes"]["alternate_screen"], true);
    let shell = near.snapshot("outer")["child_pid"].as_u64().unwrap();
    let client = first_child(shell);
    let ssh = first_child(client);
    let comm = std::fs::read_to_string(format!("/proc/{ssh}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "ssh", "the attach client's child is not ssh");
    // SAFETY: kill(2) on the ssh process this test's attach client started.
    unsafe { libc::kill(ssh as i32, libc::SIGKILL) };
    near.wait_screen("outer", "TTY-(RAW|COOKED)");
    let text = near.lines("outer").join("\n");
    assert!(text.contains("TTY-COOKED"), "terminal left raw:\n{text}");
    assert!(
        text.contains("[box:inner: the connection to box closed; the pane keeps running there]"),
        "{text}"
    );
    assert!(text.contains("ATTACH-EXIT=0"), "{text}");
    let snap = near.snapshot("outer");
    assert_eq!(snap["modes"]["alternate_screen"], false);
    assert_eq!(snap["modes"]["bracketed_paste"], false);
    // The far pane never noticed more than a client leaving.
    assert!(eventually(Duration::from_secs(10), || far
        .snapshot("inner")["clients"]
        == 0));
    let inner = far.snapshot("inner");
    assert!(inner["exited"].is_null(), "{inner}");
    assert!(far.lines("inner").join("\n").contains("full screen"));
}

#[test]
fn up_and_down_launch_and_stop_an_agent_declared_on_another_host() {
    let (far, near, sshd) = setup();
    let config_dir = near.path("xdg-config").join("belfry");
    std::fs::create_dir_all(&config_dir).unwrap();
    // The alias `far` names the ssh config's `box`.
    std::fs::write(
        config_dir.join("config.kdl"),
        "hosts {\n    far \"box\"\n}\n",
    )
    .unwrap();
    let decl = near.path("belfry.kdl");
    std::fs::write(
        &decl,
        "agent \"remote-worker\" {\n    host \"far\"\n    cwd \"/tmp\"\n    \
         command \"sh\" \"-c\" \"echo remote-up; exec sleep 600\"\n}\n\
         agent \"local-worker\" {\n    command \"sh\" \"-c\" \"echo local-up; exec sleep 600\"\n}\n",
    )
    .unwrap();
    let decl = decl.display().to_string();
    let out = over_ok(&near, &sshd, &["up", &decl]);
    assert!(out.contains("launch  remote-worker"), "{out}");
    assert!(out.contains("launch  local-worker"), "{out}");
    far.wait_screen("remote-worker", "remote-up");
    near.wait_screen("local-worker", "local-up");
    let far_panes = far.ok(&["ls", "--json"]);
    assert!(far_panes.contains("remote-worker") && !far_panes.contains("local-worker"));
    let near_panes = near.ok(&["ls", "--json"]);
    assert!(near_panes.contains("local-worker") && !near_panes.contains("remote-worker"));
    let pid = far.snapshot("remote-worker")["child_pid"].clone();

    // A second `up` adopts the far pane: same declaration, same process.
    let out = over_ok(&near, &sshd, &["up", &decl]);
    assert!(out.contains("adopt   remote-worker"), "{out}");
    assert_eq!(far.snapshot("remote-worker")["child_pid"], pid);

    let out = over_ok(&near, &sshd, &["down", &decl]);
    assert!(out.contains("stopped far:remote-worker"), "{out}");
    assert!(out.contains("stopped local-worker"), "{out}");
    let far_panes = far.ok(&["ls", "--json"]);
    assert!(!far_panes.contains("remote-worker"), "{far_panes}");
}

#[test]
fn ls_all_hosts_merges_every_host_and_names_the_unreachable_one() {
    let (far, near, sshd) = setup();
    far.ok(&["new", "there", "--", "sh", "-c", "exec sleep 600"]);
    near.ok(&["new", "here", "--", "sh", "-c", "exec sleep 600"]);
    let closed = free_port();
    let config_dir = near.path("xdg-config").join("belfry");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.kdl"),
        format!("hosts {{\n    far \"box\"\n    dead \"127.0.0.1:{closed}\"\n}}\n"),
    )
    .unwrap();
    let out = over(&near, &sshd, &["ls", "--all-hosts"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("here "), "{stdout}");
    assert!(stdout.contains("far:there "), "{stdout}");
    assert!(
        stdout.contains("dead: cannot reach 127.0.0.1:") && stdout.contains("refused"),
        "{stdout}"
    );
    let out = over(&near, &sshd, &["ls", "--all-hosts", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = listed.as_array().unwrap();
    let names: Vec<&str> = listed
        .iter()
        .filter_map(|p| p["session"].as_str())
        .collect();
    assert!(
        names.contains(&"here") && names.contains(&"far:there"),
        "{names:?}"
    );
    assert!(listed
        .iter()
        .any(|p| p["host"] == "dead" && p["error"].is_string()));
    // With `--host far`, far is the machine listed first; its alias is not asked again.
    let out = over(&near, &sshd, &["--host", "far", "ls", "--all-hosts"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("far:there ").count(), 1, "{stdout}");
}

#[test]
fn an_unreachable_host_fails_within_the_connect_timeout_and_says_why() {
    let near = Env::new();
    // Nothing listens: ssh itself fails at once.
    let closed = free_port();
    let host = format!("127.0.0.1:{closed}");
    let started = Instant::now();
    let out = near.cmd(&["--host", &host, "ls"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot reach {host} over ssh")) && stderr.contains("refused"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // Something listens and never speaks: the connect timeout ends the wait.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    let held = std::thread::spawn(move || {
        let mut streams = Vec::new();
        silent.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < until {
            if let Ok((stream, _)) = silent.accept() {
                streams.push(stream);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let started = Instant::now();
    let out = near
        .cmd(&["--host", &host, "--connect-timeout", "2", "ls"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&host), "{stderr}");
    assert!(
        stderr.contains("did not answer within 2 s") || stderr.contains("timed out"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(8), "took {took:?}: {stderr}");
    assert!(took >= Duration::from_secs(1), "took {took:?}: {stderr}");
    drop(held);
}

#[test]
fn a_host_without_belfry_says_belfry_is_not_installed_there() {
    let far = Env::new();
    let near = Env::new();
    let sshd = Sshd::start(&far, FarBelfry::Missing);
    let out = over(&near, &sshd, &["--host", "box", "ls"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("belfry is not installed on box"),
        "{stderr}"
    );
    // The same for a command that runs belfry there directly.
    let out = over(&near, &sshd, &["inbox", "ls", "box:w"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("belfry is not installed on box"),
        "{stderr}"
    );
}

#[test]
fn proxy_bridges_stdin_to_the_daemon_and_a_pane_host_unchanged() {
    let env = Env::new();
    env.spawn(
        "p",
        "5x20",
        &["sh", "-c", "echo proxied; exec sleep 600"],
        Some("proxied"),
    );
    let run = |args: &[&str], input: &str| -> Vec<Value> {
        let mut child = env
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };
    let replies = run(
        &["proxy"],
        "{\"id\":1,\"op\":\"hello\"}\n{\"id\":2,\"op\":\"list\"}\n",
    );
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0]["role"], "daemon");
    assert_eq!(replies[1]["id"], 2);
    assert_eq!(replies[1]["panes"][0]["session"], "p");
    let replies = run(
        &["proxy", "--pane", "p"],
        "{\"id\":7,\"op\":\"hello\"}\n{\"id\":8,\"op\":\"snapshot\"}\n",
    );
    assert_eq!(replies[0]["role"], "pane-host");
    assert_eq!(replies[0]["session"], "p");
    assert_eq!(replies[1]["lines"][0], "proxied");
    // A pane that does not exist is refused before anything is bridged.
    let out = env.run(&["proxy", "--pane", "nope"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 39: shell metacharacters in a host's box part reached ssh. Every spelling of a host
/// (`--host`, a `HOST:NAME` address, a `host` in `belfry.kdl`) is checked against
/// `[user@]box[:port]` first: ssh (here a stand-in that records its argv) never runs, the
/// shell never runs what the host holds, and the error names the host.
#[test]
fn a_host_with_shell_metacharacters_is_refused_before_ssh_runs() {
    use std::os::unix::fs::PermissionsExt;
    let near = Env::new();
    let ran = near.path("ssh-ran");
    let planted = near.path("planted");
    let ssh = near.path("fake-ssh");
    std::fs::write(
        &ssh,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 255\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ssh = ssh.display().to_string();
    // No spaces in most of them: the check before this one refused spaces already.
    let touch = format!("touch${{IFS}}{}", planted.display());
    let hosts = [
        format!("a;{touch}"),
        format!("-oProxyCommand={touch}"),
        format!("me@$({touch})"),
        format!("`{touch}`"),
        format!("box|{touch}"),
        "box&&id".to_owned(),
        "'box'".to_owned(),
        "box other".to_owned(),
        "box\nother".to_owned(),
        "box:+22".to_owned(),
    ];
    for host in &hosts {
        let address = format!("{host}:worker");
        let host_flag = format!("--host={host}");
        for args in [
            vec!["--ssh-command", &ssh, &host_flag, "ls"],
            vec!["--ssh-command", &ssh, "peek", "--", &address],
        ] {
            let out = near.cmd(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("host {host:?} is not [user@]box[:port]")),
                "{args:?}: {stderr}"
            );
        }
        let file = near.path("belfry.kdl");
        let kdl = format!(
            "agent \"w\" {{\n    command \"true\"\n    host {}\n}}\n",
            serde_json::to_string(host).unwrap()
        );
        std::fs::write(&file, kdl).unwrap();
        let file = file.display().to_string();
        let out = near
            .cmd(&["--ssh-command", &ssh, "up", &file, "--dry-run"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains(&format!("{file}:3:")), "{host:?}: {stderr}");
    }
    assert!(
        !ran.exists(),
        "ssh ran: {}",
        String::from_utf8_lossy(&read_or_empty(&ran))
    );
    assert!(!planted.exists(), "a host's shell command ran");
}

/// Issue 46, defect 5: a remote pane gets the `TERM` of the terminal it was started from (the
/// far daemon's environment has none), as a local pane does: the xterm, tmux and screen
/// families as they are, anything else `xterm-256color`. Before, every remote pane got
/// `xterm-256color`, so Home and End did nothing in `less` in a remote pane started from tmux.
#[test]
fn a_remote_pane_gets_the_terminal_type_of_the_client_that_started_it() {
    let (far, near, sshd) = setup();
    for (session, client_term, expected) in [
        ("in-tmux", "tmux-256color", "tmux-256color"),
        ("on-console", "linux", "xterm-256color"),
    ] {
        let out = over(
            &near,
            &sshd,
            &[
                "--host",
                "box",
                "new",
                session,
                "--size",
                "24x80",
                "--",
                "sh",
                "-c",
                "echo \"TERM=$TERM.\"; sleep 600",
            ],
        )
        .env("TERM", client_term)
        .output()
        .expect("run belfry");
        assert!(out.status.success(), "belfry new {session}: {out:?}");
        far.wait_screen(
            session,
            &format!("^TERM={}\\.", expected.replace('.', "\\.")),
        );
    }
}

/// Issue 46, defect 5: ssh is never let ask for a password on the user's terminal. It runs in
/// batch mode and without a controlling terminal, so a host that wants a password fails at
/// once, in words, and the terminal keeps its echo. Before, ssh prompted on the terminal, was
/// killed at the connect timeout (`did not answer within 10.092637359 s`) and left echo off.
#[test]
fn ssh_that_would_ask_for_a_password_fails_at_once_and_leaves_the_terminal_alone() {
    let (_far, near, sshd) = setup();
    let script = format!(
        "\"$BELFRY_BIN\" --ssh-command '{}' --connect-timeout 6 --host pwbox ls; \
         echo \"EXIT=$?\"; stty -a | tr ' ' '\\n' | grep -x -e echo -e -echo; sleep 600",
        sshd.ssh_command()
    );
    let started = Instant::now();
    near.spawn("outer", "24x160", &["sh", "-c", &script], None);
    near.wait_screen("outer", "EXIT=");
    let took = started.elapsed();
    assert!(
        eventually(Duration::from_secs(10), || near
            .lines("outer")
            .iter()
            .any(|line| line == "echo" || line == "-echo")),
        "stty said nothing: {:?}",
        near.lines("outer")
    );
    let screen = near.lines("outer").join("\n");
    assert!(screen.contains("EXIT=2"), "{screen}");
    assert!(
        screen.contains("cannot reach pwbox over ssh") && screen.contains("Permission denied"),
        "not ssh's own failure in words:\n{screen}"
    );
    assert!(
        !screen.contains("password:"),
        "ssh asked for a password on the terminal:\n{screen}"
    );
    assert!(
        near.lines("outer").iter().any(|line| line == "echo"),
        "the terminal was left with echo off:\n{screen}"
    );
    assert!(
        took < Duration::from_secs(5),
        "took {took:?}, the connect timeout's time:\n{screen}"
    );
}
