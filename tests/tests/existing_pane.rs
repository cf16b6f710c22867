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

#[test]
fn run_of_a_pane_whose_program_exited_restarts_it_and_attaches() {
    let env = Env::new();
    // The first run exits with 3; the restarted one stays.
    let marker = env.path("ran-once");
    let program = format!(
        "if [ -e '{0}' ]; then echo again; sleep 600; else touch '{0}'; echo started; exit 3; fi",
        marker.display()
    );
    let first = env.spawn("inner", "24x80", &["sh", "-c", &program], Some("started"));
    assert!(
        eventually(Duration::from_secs(10), || !env.snapshot("inner")["exited"]
            .is_null()),
        "the program did not exit"
    );
    let script = "\"$BELFRY_BIN\" run inner -- sh -c 'echo second; sleep 600'; sleep 600";
    env.spawn("outer", "24x80", &["sh", "-c", script], None);
    // The pane's own program again (a new incarnation), not the command given to run.
    assert!(
        eventually(Duration::from_secs(10), || {
            let snapshot = env.snapshot("inner");
            snapshot["incarnation"] != first["incarnation"]
        }),
        "run did not restart the exited program"
    );
    // The client says so over the last line of the redrawn pane.
    env.wait_screen("outer", "inner's program exited with code 3: restarted it");
    env.wait_screen("outer", "again");
    assert!(!env.lines("inner").join("\n").contains("second"));
    assert_eq!(env.snapshot("inner")["clients"], 1);
}
