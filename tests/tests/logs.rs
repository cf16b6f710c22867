//! `belfry logs [NAME] [--follow]`: the daemon's log and a pane host's log, read from the log
//! directory (`$XDG_STATE_HOME/belfry/log`), a name without a log answered with where it was
//! looked for, and `--follow` printing what is appended, as `tail -f` does.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use belfry_tests::{eventually, read_or_empty, Env};

fn log_dir(env: &Env) -> PathBuf {
    env.path("xdg-state").join("belfry").join("log")
}

#[test]
fn logs_prints_the_daemons_log_and_a_pane_hosts_log() {
    let env = Env::new();
    env.ok(&["new", "agent", "--", "sleep", "600"]);
    let daemon_log = log_dir(&env).join("daemon.log");
    assert!(
        eventually(Duration::from_secs(5), || !read_or_empty(&daemon_log)
            .is_empty()),
        "the daemon wrote no log"
    );
    // The log only grows, so what was printed is where the file starts.
    let printed = env.ok(&["logs"]);
    assert!(!printed.is_empty());
    assert!(read_or_empty(&daemon_log).starts_with(printed.as_bytes()));

    // A pane host's log, written here by hand so its content is known whatever it logs.
    let pane_log = log_dir(&env).join("pane-agent.log");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&pane_log)
        .unwrap()
        .write_all(b"a line of the pane host\n")
        .unwrap();
    let printed = env.ok(&["logs", "agent"]);
    assert!(printed.ends_with("a line of the pane host\n"), "{printed}");
    assert!(read_or_empty(&pane_log).starts_with(printed.as_bytes()));
}

#[test]
fn logs_of_a_name_without_a_log_says_where_it_looked() {
    let env = Env::new();
    let out = env.run(&["logs", "nobody"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let looked = log_dir(&env).join("pane-nobody.log");
    assert!(stderr.contains(&looked.display().to_string()), "{stderr}");

    let out = env.run(&["logs", "../daemon"]);
    assert_eq!(out.status.code(), Some(2), "a path is not a pane name");
}

#[test]
fn logs_follow_prints_what_is_appended_until_interrupted() {
    let env = Env::new();
    let dir = log_dir(&env);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("pane-agent.log");
    std::fs::write(&log, "before\n").unwrap();

    let mut child = env
        .cmd(&["logs", "agent", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || rx.recv_timeout(Duration::from_secs(5));
    assert_eq!(next().as_deref(), Ok("before"));

    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(b"after\n").unwrap();
    assert_eq!(next().as_deref(), Ok("after"));

    // Truncated (rotated in place), the log is read again from its start.
    std::fs::write(&log, "fresh\n").unwrap();
    assert_eq!(next().as_deref(), Ok("fresh"));

    assert_eq!(child.try_wait().unwrap(), None, "--follow ended by itself");
    child.kill().unwrap();
    child.wait().unwrap();
}
