//! spec §7.1, §12 end to end: the real `belfry` binary, and the real daemon with a real pane,
//! never follow a link planted in the state directory, and reading an inbox that does not exist
//! creates nothing.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use belfry_tests::{eventually, fixture, read_or_empty, Env};

/// A name for planted entries: valid grammar, so only its kind can keep it out.
const PLANTED_LINK: &str = "1785070000000-link00.md";
const PLANTED_HARD: &str = "1785070000000-hard00.md";

/// `outside/` (mode 0755) holding a message-shaped file (mode 0644) with a recognisable subject.
fn outside(env: &Env) -> PathBuf {
    let dir = env.path("outside");
    fs::create_dir(&dir).unwrap();
    let file = dir.join("secret.md");
    fs::write(
        &file,
        "---\nsubject: outside-secret\n---\nnot for the pane\n",
    )
    .unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Every entry under `root` with its mode and contents.
fn snapshot(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut entries = BTreeMap::new();
    let mode = |path: &Path| fs::symlink_metadata(path).unwrap().mode() & 0o7777;
    entries.insert(".".to_owned(), (mode(root), Vec::new()));
    for entry in fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        let key = path.file_name().unwrap().to_string_lossy().into_owned();
        entries.insert(key, (mode(&path), fs::read(&path).unwrap_or_default()));
    }
    entries
}

fn post(env: &Env, session: &str, subject: &str) -> std::process::Output {
    let mut child = env
        // `--create`: these tests post to inboxes no pane has.
        .cmd(&["inbox", "post", session, "--create", "--subject", subject])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inbox post");
    use std::io::Write;
    // A post that is refused (a linked state directory) may exit before it reads its body:
    // the write then meets a closed pipe, which is the refusal's doing, not an error here.
    match child.stdin.take().unwrap().write_all(b"body\n") {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

#[test]
fn inbox_ls_read_and_archive_of_an_unknown_session_create_nothing() {
    let env = Env::new();
    assert_eq!(env.ok(&["inbox", "ls", "ghost"]), "");
    assert_eq!(env.ok(&["inbox", "ls", "ghost", "--json"]).trim(), "[]");
    for args in [
        vec!["inbox", "read", "--session", "ghost"],
        vec![
            "inbox",
            "read",
            "1785070000000-abc123.md",
            "--session",
            "ghost",
        ],
        vec![
            "inbox",
            "archive",
            "1785070000000-abc123.md",
            "--session",
            "ghost",
        ],
    ] {
        let out = env.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(
            stderr.contains("inbox \"ghost\" does not exist"),
            "{args:?}: {stderr}"
        );
    }
    assert!(
        !env.state().exists(),
        "reading an unknown inbox created the state directory"
    );

    // With a state directory that holds other inboxes, still nothing appears.
    assert!(post(&env, "known", "hello").status.success());
    let inboxes = env.state().join("inbox");
    let before = snapshot(&inboxes);
    let _ = env.run(&["inbox", "read", "--session", "ghost"]);
    let _ = env.run(&["inbox", "ls", "ghost"]);
    assert_eq!(snapshot(&inboxes), before);
    assert!(!inboxes.join("ghost").exists());
}

#[test]
fn a_symlinked_state_directory_is_refused_by_every_inbox_command() {
    let env = Env::new();
    let outside = outside(&env);
    symlink(&outside, env.state()).unwrap();
    let before = snapshot(&outside);
    let state = env.state().display().to_string();
    let outputs = [
        post(&env, "agent", "hello"),
        env.run(&["inbox", "ls", "agent"]),
        env.run(&["inbox", "read", "--session", "agent"]),
        env.run(&["presence", "busy", "--session", "agent"]),
    ];
    for out in outputs {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!("refusing {state}: it is a symbolic link")),
            "{stderr}"
        );
    }
    assert_eq!(snapshot(&outside), before, "the link's target changed");
}

#[test]
fn a_symlinked_new_directory_is_refused_and_its_target_is_not_listed_moved_or_chmoded() {
    let env = Env::new();
    assert!(post(&env, "agent", "real").status.success());
    let outside = outside(&env);
    fs::rename(outside.join("secret.md"), outside.join(PLANTED_LINK)).unwrap();
    let new = env.state().join("inbox/agent/new");
    fs::remove_dir_all(&new).unwrap();
    symlink(&outside, &new).unwrap();
    let before = snapshot(&outside);
    for args in [
        vec!["inbox", "ls", "agent"],
        vec!["inbox", "read", "--session", "agent"],
        vec!["inbox", "read", PLANTED_LINK, "--session", "agent"],
        vec!["inbox", "archive", PLANTED_LINK, "--session", "agent"],
    ] {
        let out = env.run(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(!stdout.contains("outside-secret"), "{args:?}: {stdout}");
        assert!(
            stderr.contains(&format!(
                "refusing {}: it is a symbolic link",
                new.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(snapshot(&outside), before, "the link's target changed");
}

/// A pane declared an agent (by its adapter) under the default aggressive policy, running the
/// recorder, which logs every byte the pane receives.
fn aggressive_pane(env: &Env) -> PathBuf {
    env.recorder_pane("agent", &["--adapter", "fixture-harness"])
}

#[test]
fn a_symlinked_or_hard_linked_message_is_never_pasted_listed_or_moved() {
    let adapters = fixture("adapters").display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters)]);
    let log = aggressive_pane(&env);
    let outside = outside(&env);
    let secret = outside.join("secret.md");
    let new = env.state().join("inbox/agent/new");
    assert!(eventually(Duration::from_secs(5), || new.is_dir()));
    symlink(&secret, new.join(PLANTED_LINK)).unwrap();
    fs::hard_link(&secret, new.join(PLANTED_HARD)).unwrap();
    let before = snapshot(&outside);

    // The worker polls every 200 ms; give it several passes over the planted entries, then
    // post a real message, whose notice proves the worker was delivering all along.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&log)),
        "",
        "a notice was pasted for a planted entry"
    );
    let posted = post(&env, "agent", "real-message");
    assert!(posted.status.success());
    let name = String::from_utf8(posted.stdout).unwrap().trim().to_owned();
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).contains("real-message")
    }));
    std::thread::sleep(Duration::from_millis(600));
    let pasted = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    assert_eq!(pasted.matches("[DING]").count(), 1, "{pasted:?}");
    for planted in ["link00", "hard00", "outside-secret"] {
        assert!(
            !pasted.contains(planted),
            "{planted} reached the pane: {pasted:?}"
        );
    }

    // The daemon says why it skips them.
    let daemon_log = env.path("xdg-state/belfry/log/daemon.log");
    for planted in [PLANTED_LINK, PLANTED_HARD] {
        assert!(
            eventually(Duration::from_secs(5), || {
                let text = String::from_utf8_lossy(&read_or_empty(&daemon_log)).into_owned();
                text.lines()
                    .any(|line| line.contains("skipping") && line.contains(planted))
            }),
            "no log line about {planted}"
        );
    }

    // The CLI does not list them, says why, and will not read or archive them.
    let out = env.run(&["inbox", "ls", "agent"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&name) && !stdout.contains("1785070000000-"),
        "{stdout}"
    );
    assert!(stderr.contains("it is a symbolic link"), "{stderr}");
    assert!(stderr.contains("more than one hard link"), "{stderr}");
    for planted in [PLANTED_LINK, PLANTED_HARD] {
        for verb in ["read", "archive"] {
            let out = env.run(&["inbox", verb, planted, "--session", "agent"]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_ne!(out.status.code(), Some(0), "{verb} {planted}");
            assert!(
                !stdout.contains("outside-secret"),
                "{verb} {planted}: {stdout}"
            );
        }
        assert!(
            fs::symlink_metadata(new.join(planted)).is_ok(),
            "{planted} moved"
        );
        assert!(!env
            .state()
            .join("inbox/agent/archive")
            .join(planted)
            .exists());
    }
    assert_eq!(snapshot(&outside), before, "the outside file changed");
}

/// The daemon's DING worker works on the inbox directories it opened; when the inbox is removed
/// and a post creates it again, the worker must open the new one, or the message is never
/// announced.
#[test]
fn a_removed_and_recreated_inbox_is_watched_again_by_the_daemon() {
    let adapters = fixture("adapters").display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters)]);
    let log = aggressive_pane(&env);
    let inbox = env.state().join("inbox/agent");
    assert!(eventually(Duration::from_secs(5), || inbox
        .join("new")
        .is_dir()));
    std::thread::sleep(Duration::from_millis(300));
    fs::remove_dir_all(&inbox).unwrap();
    assert!(post(&env, "agent", "after-removal").status.success());
    assert!(
        eventually(Duration::from_secs(5), || {
            String::from_utf8_lossy(&read_or_empty(&log)).contains("after-removal")
        }),
        "pane got {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
}

/// spec §7.3: a message whose notice was pasted keeps its ownership record while a second hard
/// link to it (a `cp -al` backup, say) makes the inbox refuse it, so once the extra link is
/// removed it is listed again as already announced and never gets a second notice.
#[test]
fn a_staged_message_keeps_its_record_while_hard_linked_and_is_never_announced_twice() {
    let adapters = fixture("adapters").display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters)]);
    let log = aggressive_pane(&env);
    let posted = post(&env, "agent", "linked-once");
    assert!(posted.status.success());
    let name = String::from_utf8(posted.stdout).unwrap().trim().to_owned();
    let notices = || {
        String::from_utf8_lossy(&read_or_empty(&log))
            .matches("linked-once")
            .count()
    };
    assert!(
        eventually(Duration::from_secs(5), || notices() == 1),
        "the first notice never came"
    );
    let ownership = env.state().join("ding/agent/ownership.json");
    let recorded = || String::from_utf8_lossy(&read_or_empty(&ownership)).contains(&name);
    assert!(eventually(Duration::from_secs(5), recorded), "no record");

    // A backup's hard link: the worker refuses the file for several polls (200 ms each).
    let backup = env.path("backup.md");
    fs::hard_link(env.state().join("inbox/agent/new").join(&name), &backup).unwrap();
    let daemon_log = env.path("xdg-state/belfry/log/daemon.log");
    assert!(
        eventually(Duration::from_secs(5), || {
            String::from_utf8_lossy(&read_or_empty(&daemon_log))
                .lines()
                .any(|line| line.contains("skipping") && line.contains(&name))
        }),
        "the worker never refused the hard-linked message"
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        recorded(),
        "the record was dropped while the message was refused"
    );

    // The backup goes away: the message is listed again, still owned, and not announced again.
    fs::remove_file(&backup).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        notices(),
        1,
        "a second notice was pasted: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    assert!(recorded(), "the record is gone");
}
