//! No silent surprises (issue 47, item 5 and parts of 6), with the real binary, the real daemon
//! and a fresh environment: a misspelt recipient is refused with the near name and nothing is
//! posted, `--create` posts anyway; `inbox post` on a terminal says what it waits for; the man
//! page says where the sockets, the state and the logs are and which variables move them.

use std::io::Write;
use std::process::Stdio;

use belfry_tests::Env;

fn post(env: &Env, args: &[&str]) -> std::process::Output {
    let mut all = vec!["inbox", "post"];
    all.extend_from_slice(args);
    let mut child = env
        .cmd(&all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inbox post");
    // The body may not be read at all (a refused name): a closed pipe is then fine.
    let _ = child.stdin.take().expect("stdin").write_all(b"the body\n");
    child.wait_with_output().expect("inbox post output")
}

#[test]
fn a_misspelt_recipient_is_refused_with_the_near_name_and_nothing_is_posted() {
    let env = Env::new();
    env.spawn("worker2", "24x80", &["sleep", "600"], None);
    let out = post(&env, &["wrker2", "--from", "lead", "--subject", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no pane, inbox or declared agent is named wrker2 (did you mean worker2?)")
            && stderr.contains("nothing was posted")
            && stderr.contains("--create"),
        "{stderr}"
    );
    assert!(
        !env.state().join("inbox/wrker2").exists(),
        "a refused post made an inbox"
    );

    // The pane's own name posts, and so does a new name with --create; after that, the name
    // has an inbox and is known.
    let out = post(&env, &["worker2", "--from", "lead"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = post(&env, &["later", "--create"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = post(&env, &["later"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = env.ok(&["inbox", "ls", "later", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");

    // An agent of ./belfry.kdl is known before it runs.
    let project = env.path("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::write(
        project.join("belfry.kdl"),
        "agent \"reviewer\" { command \"sh\"; }\n",
    )
    .expect("write belfry.kdl");
    let mut cmd = env.cmd(&["inbox", "post", "reviewer", "-"]);
    let out = cmd
        .current_dir(&project)
        .stdin(Stdio::null())
        .output()
        .expect("post to a declared agent");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.ok(&["shutdown", "--kill-panes"]);
}

#[test]
fn inbox_post_on_a_terminal_says_what_it_waits_for() {
    let env = Env::new();
    env.spawn("worker", "24x80", &["sleep", "600"], None);
    env.spawn(
        "outer",
        "24x100",
        &[
            "sh",
            "-c",
            "belfry inbox post worker --subject typed; echo posted-$?; sleep 600",
        ],
        None,
    );
    env.wait_screen("outer", "type the message to worker, then Ctrl-D");
    env.ok(&[
        "send",
        "outer",
        "--text",
        "typed by hand",
        "--key",
        "Enter",
        "--key",
        "C-d",
    ]);
    env.wait_screen("outer", "posted-0");
    let listed = env.ok(&["inbox", "ls", "worker"]);
    assert!(listed.contains("typed"), "{listed}");
    env.ok(&["shutdown", "--kill-panes"]);
}

#[test]
fn the_man_page_says_where_things_live_and_which_variables_move_them() {
    let env = Env::new();
    let page = env.ok(&["man"]);
    let files = page.find(".SH FILES").expect("a FILES section");
    let environment = page
        .find(".SH ENVIRONMENT")
        .expect("an ENVIRONMENT section");
    assert!(files < environment);
    for needle in [
        "default.sock",
        "/tmp/belfry\\-",
        "inbox/",
        "daemon.log",
        "config.kdl",
    ] {
        assert!(
            page[files..environment].contains(needle),
            "FILES lacks {needle}"
        );
    }
    for variable in [
        "BELFRY_RUNTIME_DIR",
        "BELFRY_SOCKET",
        "BELFRY_STATE",
        "XDG_STATE_HOME",
        "BELFRY_SESSION",
    ] {
        assert!(
            page[environment..].contains(variable),
            "ENVIRONMENT lacks {variable}"
        );
    }
    let dir = env.path("man1");
    env.ok(&["man", "--dir", &dir.display().to_string()]);
    let written = std::fs::read_to_string(dir.join("belfry.1")).expect("belfry.1");
    assert!(written.contains(".SH FILES") && written.contains(".SH ENVIRONMENT"));
    // The page still renders: man reads it without a warning about the added roff.
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok()
    {
        let out = std::process::Command::new("man")
            .args(["-l", "-Tutf8"])
            .arg(dir.join("belfry.1"))
            .env("MANWIDTH", "100")
            .output()
            .expect("man -l");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("BELFRY_RUNTIME_DIR"), "{text}");
    }
}

#[test]
fn a_wait_that_times_out_says_so_in_words_and_exits_4() {
    let env = Env::new();
    env.spawn("p", "24x80", &["sleep", "600"], None);
    let out = env.run(&["wait", "p", "--regex", "never", "--timeout-ms", "300"]);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("belfry: p: wait timed out after 300 ms (--timeout-ms) with the conditions not met; now at revision ")
            && stderr.trim_end().ends_with("its program runs")
            && !stderr.contains('{'),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // --json: the state for a program, on stdout, and the same exit code.
    let out = env.run(&["wait", "p", "--exit", "--timeout-ms", "200", "--json"]);
    assert_eq!(out.status.code(), Some(4));
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(state["result"], "timeout", "{state}");
    assert!(state["state"]["revision"].is_u64(), "{state}");
    assert!(state["state"]["exited"].is_null(), "{state}");
    // A usage error is still 2, and a pane that does not exist still 1.
    let out = env.run(&["wait", "p", "--timeout-ms", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(&["wait", "nope", "--exit", "--timeout-ms", "200"]);
    assert_eq!(out.status.code(), Some(1));
    env.ok(&["shutdown", "--kill-panes"]);
}

#[test]
fn shutdown_kill_panes_with_no_daemon_ends_the_panes_through_their_pane_hosts() {
    let env = Env::new();
    let first = env.spawn("a", "24x80", &["sleep", "600"], None);
    let second = env.spawn("b", "24x80", &["sleep", "600"], None);
    let programs: Vec<u32> = [&first, &second]
        .iter()
        .map(|pane| pane["child_pid"].as_u64().expect("child_pid") as u32)
        .collect();
    assert_eq!(
        env.ok(&["shutdown"]).trim(),
        "daemon stopped; the panes keep running"
    );
    assert!(programs.iter().all(|pid| belfry_tests::pid_alive(*pid)));
    let said = env.ok(&["shutdown", "--kill-panes"]);
    assert!(
        said.contains("no daemon running at")
            && said.contains("ended panes through their pane hosts: a, b"),
        "{said}"
    );
    assert!(
        belfry_tests::eventually(std::time::Duration::from_secs(10), || programs
            .iter()
            .all(|pid| !belfry_tests::pid_alive(*pid))),
        "a program outlived shutdown --kill-panes"
    );
    assert!(env.ok(&["ls"]).contains("no panes"));
}

#[test]
fn ding_status_says_what_each_message_state_shown_means() {
    let env = Env::new();
    env.ok(&[
        "new",
        "agent",
        "--ding-delivery",
        "aggressive",
        "--",
        "sh",
        "-c",
        "exec cat >/dev/null",
    ]);
    let out = post(&env, &["agent", "--from", "lead", "--subject", "look"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut shown = String::new();
    let staged = belfry_tests::eventually(std::time::Duration::from_secs(10), || {
        shown = env.ok(&["ding", "status", "agent"]);
        shown.contains("  staged  ")
    });
    assert!(staged, "{shown}");
    assert!(
        shown.contains(
            "(staged: its notice was typed into the pane once; unread until the agent reads it)"
        ),
        "{shown}"
    );
    assert!(
        !shown.contains("pending:"),
        "a state not shown is explained: {shown}"
    );
    env.ok(&["shutdown", "--kill-panes"]);
}
