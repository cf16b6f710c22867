//! A name that is taken: `belfry run NAME` attaches to the pane there, as tmux's `new -A` does,
//! leaving it as it is; `belfry new NAME` refuses and says how to get to it. The attach client
//! runs inside another belfry pane (a real PTY), as in `attach.rs`.

use std::time::Duration;

use belfry_tests::{eventually, Env};

#[test]
fn run_of_an_existing_pane_attaches_to_it_instead_of_starting_another() {
    let env = Env::new();
    let inner = env.spawn(
        "inner",
        "24x80",
        &["sh", "-c", "echo waiting; sleep 600"],
        Some("waiting"),
    );
    let script = "\"$BELFRY_BIN\" run inner -- sh -c 'echo second; sleep 600'; \
                  echo \"RUN-EXIT=$?\"; sleep 600";
    env.spawn("outer", "24x80", &["sh", "-c", script], None);
    env.wait_screen("outer", "waiting");
    assert!(
        eventually(Duration::from_secs(5), || env.snapshot("inner")["clients"]
            == 1),
        "run did not attach to the existing pane"
    );
    // The same pane, untouched: its program was not replaced by the second command.
    let again = env.snapshot("inner");
    assert_eq!(again["incarnation"], inner["incarnation"], "{again}");
    assert!(!env.lines("inner").join("\n").contains("second"));

    let out = env.ok(&["detach", "inner"]);
    assert!(out.contains("detached 1 client"), "{out}");
    env.wait_screen("outer", "RUN-EXIT=0");
}

#[test]
fn new_of_an_existing_pane_refuses_and_says_how_to_get_to_it() {
    let env = Env::new();
    env.ok(&["new", "agent", "--", "sleep", "600"]);
    let out = env.run(&["new", "agent", "--", "sleep", "600"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a pane named \"agent\" already exists"),
        "{stderr}"
    );
    assert!(stderr.contains("`belfry attach agent`"), "{stderr}");
}
