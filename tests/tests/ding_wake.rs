//! DING workers wake on inbox changes (spec §7.1): a post made by another tool, a plain rename
//! into `new/` with no nudge, is announced at once, not at the worker's next look. The worker
//! looks on its own only every few seconds (the safety poll), so each notice here must arrive
//! well inside that period, several times in a row.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use belfry_tests::{eventually, read_or_empty, Env};

/// How soon a hand-made post must be announced: far below the worker's 5 s safety poll, far
/// above what the wake-up takes (a few milliseconds), for a loaded machine.
const ANNOUNCED_WITHIN: Duration = Duration::from_millis(1500);

/// How many posts in a row must each be announced that soon; a safety poll that happened to
/// fall inside the window of all of them is very unlikely.
const ROUNDS: usize = 4;

fn aggressive_pane(env: &Env) -> PathBuf {
    env.recorder_pane("agent", &["--ding-delivery", "aggressive"])
}

fn inbox(env: &Env) -> PathBuf {
    env.state().join("inbox/agent")
}

/// Posts the way another tool would: the file written in `tmp/`, then renamed into `new/`,
/// and nothing told to the daemon. Returns the message's name.
fn post_by_hand(inbox: &Path, round: usize) -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let name = format!("{now_ms}-hand{round:02}.md");
    let tmp = inbox.join("tmp").join(&name);
    std::fs::write(&tmp, format!("---\nsubject: by hand {round}\n---\nbody\n")).unwrap();
    std::fs::rename(&tmp, inbox.join("new").join(&name)).unwrap();
    name
}

fn notices_for(log: &Path, name: &str) -> usize {
    let id = &name[name.len() - 9..name.len() - 3];
    String::from_utf8_lossy(&read_or_empty(log))
        .matches(&format!("[DING] new message: [id:{id}]"))
        .count()
}

/// Posts `ROUNDS` messages by hand, one after another's notice has ended, and checks that
/// each was announced within [`ANNOUNCED_WITHIN`].
fn assert_announced_at_once(env: &Env, log: &Path) {
    for round in 0..ROUNDS {
        let posted = Instant::now();
        let name = post_by_hand(&inbox(env), round);
        assert!(
            eventually(ANNOUNCED_WITHIN, || notices_for(log, &name) == 1),
            "round {round}: a post without a nudge was not announced within {ANNOUNCED_WITHIN:?} \
             (pane read {:?})",
            String::from_utf8_lossy(&read_or_empty(log))
        );
        let took = posted.elapsed();
        // The notice's Enter comes 500 ms after its paste; the next post waits for it.
        assert!(
            eventually(Duration::from_secs(5), || read_or_empty(log)
                .ends_with(b"\r")),
            "round {round}: the notice never ended with Enter"
        );
        eprintln!("round {round}: announced after {took:?}");
    }
}

/// A tool that posts by hand right after `belfry new` returns finds the inbox made: the daemon
/// makes it before it replies, not when the pane's worker first runs.
#[test]
fn the_inbox_exists_when_new_returns() {
    let env = Env::new();
    for round in 0..10 {
        let session = format!("fresh{round}");
        env.ok(&["new", &session, "--", "sleep", "30"]);
        let dir = env.state().join("inbox").join(&session);
        for sub in ["tmp", "new", "archive"] {
            assert!(
                dir.join(sub).is_dir(),
                "{session}: {sub}/ missing when `new` returned"
            );
        }
    }
}

#[test]
fn a_post_made_without_a_nudge_is_announced_at_once() {
    let env = Env::new();
    let log = aggressive_pane(&env);
    assert_announced_at_once(&env, &log);
}

#[test]
fn an_inbox_removed_and_made_again_is_watched_again() {
    let env = Env::new();
    let log = aggressive_pane(&env);
    let name = post_by_hand(&inbox(&env), 99);
    assert!(eventually(ANNOUNCED_WITHIN, || notices_for(&log, &name) == 1));
    assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
        .ends_with(b"\r")));
    std::fs::remove_dir_all(inbox(&env)).unwrap();
    // The removal wakes the worker, which opens (and so makes) the inbox again and watches
    // the new directories.
    assert!(
        eventually(Duration::from_secs(3), || inbox(&env).join("new").is_dir()
            && inbox(&env).join("tmp").is_dir()),
        "the worker did not make the removed inbox again"
    );
    assert_announced_at_once(&env, &log);
}
