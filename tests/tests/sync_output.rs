//! Synchronized output (`?2026h`): the model holds a frame back until the program ends it, and
//! the pane host applies a frame the program never ends once the emulator's timeout passes, so
//! `peek`, `wait` and the attach redraw are not frozen by it.

use std::time::{Duration, Instant};

use belfry_tests::Env;

#[test]
fn an_unended_synchronized_frame_is_shown_by_peek_and_wait_after_the_timeout() {
    let env = Env::new();
    env.spawn(
        "sync",
        "10x40",
        &[
            "sh",
            "-c",
            "printf 'before\\r\\n'; sleep 0.3; printf '\\033[?2026hframe-body'; sleep 600",
        ],
        Some("before"),
    );
    let started = Instant::now();
    // The program writes nothing after the unended frame: only the pane host's timer can
    // apply it. A `wait` wakes only when the revision moves (or at its 15 s timeout), so its
    // matching within seconds also proves that applying the frame moved the revision.
    env.wait_screen("sync", "frame-body");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the frame took {:?} to show",
        started.elapsed()
    );
    assert_eq!(env.lines("sync")[..2], ["before", "frame-body"]);
}
