//! What `sent` promises when a pane host dies: the pane's terminal took the bytes, not that the
//! program read them. A pane host killed while its program has input unread takes that input
//! with it (the kernel discards a terminal's unread input when it hangs up), so a send answered
//! `sent` a moment before the kill can be lost with the pane. The soak test's one exception to
//! "every winning payload stands once" rests on this.

use std::time::Duration;

use belfry_tests::{eventually, pid_alive, read_or_empty, Env};
use serde_json::json;

#[test]
fn a_sent_payload_the_program_had_not_read_is_lost_with_its_killed_pane_host() {
    let env = Env::new();
    let (log, stall) = env.stalled_recorder("p");

    // The program is not reading: a guarded send is taken by the terminal and answered `sent`.
    let snap = env.snapshot("p");
    let child = snap["child_pid"].as_u64().expect("child_pid") as u32;
    let reply = env.conn().request(json!({"op":"send","session":"p",
        "expect":{"incarnation":snap["incarnation"],"revision":snap["revision"]},
        "input":[{"text":"<UNREAD>"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");

    let host = env.pane_host_pid("p");
    // SAFETY: kill(2) on this test's own pane host; it touches no memory.
    unsafe { libc::kill(host as i32, libc::SIGKILL) };
    assert!(
        eventually(Duration::from_secs(10), || !pid_alive(host)
            && !pid_alive(child)),
        "the pane host {host} or its program {child} outlived the kill"
    );
    std::fs::remove_file(&stall).unwrap();
    let read = read_or_empty(&log);
    assert!(
        !String::from_utf8_lossy(&read).contains("<UNREAD>"),
        "the program read input its hung-up terminal had: {:?}",
        String::from_utf8_lossy(&read)
    );
}

/// The same steps with the program reading: the bytes reach it before the kill. (Without this,
/// the test above would pass for a send that never wrote anything.)
#[test]
fn a_sent_payload_the_program_read_before_the_kill_stands() {
    let env = Env::new();
    let log = env.recorder_pane("p", &[]);
    let snap = env.snapshot("p");
    let reply = env.conn().request(json!({"op":"send","session":"p",
        "expect":{"incarnation":snap["incarnation"],"revision":snap["revision"]},
        "input":[{"text":"<READ>"}]}));
    assert_eq!(reply["result"], "sent", "{reply}");
    assert!(
        eventually(Duration::from_secs(10), || {
            String::from_utf8_lossy(&read_or_empty(&log)).contains("<READ>")
        }),
        "the program never read the payload"
    );
    let host = env.pane_host_pid("p");
    // SAFETY: kill(2) on this test's own pane host; it touches no memory.
    unsafe { libc::kill(host as i32, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(10), || !pid_alive(host)));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&log))
            .matches("<READ>")
            .count(),
        1
    );
}
