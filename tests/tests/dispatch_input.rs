//! spec §8, §12: `belfry dispatch` answers, within a deadline, whatever its inputs do: a hooks
//! file that is a FIFO, a harness that never closes stdin, stdin without end. Each case is the
//! real binary with real pipes; each answer is the fail-open `allow` naming the problem.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use belfry_tests::belfry_bin;
use serde_json::Value;

/// A dispatch that is not done by then has hung.
const HUNG: Duration = Duration::from_secs(10);

/// Runs `belfry dispatch --event before-tool` with `extra` arguments and `stdin_deadline_ms`,
/// lets `feed` drive its stdin, and returns the answer and how long the run took. Kills the
/// dispatch and fails the test if it runs past [`HUNG`].
fn dispatch_with(
    extra: &[&str],
    stdin_deadline_ms: u64,
    feed: impl FnOnce(std::process::ChildStdin) -> Option<std::process::ChildStdin>,
) -> (Value, Duration) {
    let started = Instant::now();
    let mut child = Command::new(belfry_bin())
        .args(["dispatch", "--event", "before-tool"])
        .args(extra)
        .env_remove("BELFRY_HOOKS_FILE")
        .env_remove("BELFRY_PANE_SOCKET")
        .env(
            "BELFRY_DISPATCH_STDIN_TIMEOUT_MS",
            stdin_deadline_ms.to_string(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start belfry dispatch");
    // The writer end is kept alive (when `feed` returns it) until the dispatch has answered.
    let kept_stdin = child.stdin.take().and_then(feed);
    let finished = loop {
        if let Some(status) = child.try_wait().expect("wait for dispatch") {
            break Some(status);
        }
        if started.elapsed() > HUNG {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    if finished.is_none() {
        let _ = child.kill();
    }
    let output = child.wait_with_output().expect("collect dispatch output");
    drop(kept_stdin);
    assert!(finished.is_some(), "belfry dispatch hung for {elapsed:?}");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answer: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("stdout is not one JSON object ({err}): {output:?}"));
    (answer, elapsed)
}

fn reason(answer: &Value) -> &str {
    answer["reason"].as_str().unwrap_or_default()
}

#[test]
fn fifo_hooks_file_fails_open_within_a_deadline_and_names_the_file_as_not_regular() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("hooks.json");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let fifo_arg = fifo.display().to_string();
    // Nobody ever opens the FIFO for writing: a blocking open would wait forever.
    let (answer, elapsed) = dispatch_with(&["--hooks-file", &fifo_arg], 5000, |mut stdin| {
        stdin.write_all(br#"{"tool_name":"shell"}"#).unwrap();
        None
    });
    assert_eq!(answer["decision"], "allow", "{answer}");
    assert!(reason(&answer).contains(&fifo_arg), "{answer}");
    assert!(
        reason(&answer).contains("not a regular file (it is a FIFO)"),
        "{answer}"
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
}

#[test]
fn stdin_held_open_by_the_harness_fails_open_when_the_deadline_passes() {
    let (answer, elapsed) = dispatch_with(&[], 500, |mut stdin| {
        // A whole hook JSON, but the writer never closes the pipe.
        stdin.write_all(br#"{"tool_name":"shell"}"#).unwrap();
        Some(stdin)
    });
    assert_eq!(answer["decision"], "allow", "{answer}");
    assert!(
        reason(&answer).contains("hook stdin was not closed within 500 ms"),
        "{answer}"
    );
    assert!(elapsed >= Duration::from_millis(500), "took {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
}

#[test]
fn stdin_over_the_size_cap_fails_open_without_reading_it_all() {
    // `belfry_hooks::STDIN_CAP_BYTES`.
    let cap: usize = 32 << 20;
    let (answer, _) = dispatch_with(&[], 20_000, |mut stdin| {
        // More than the cap, as fast as the pipe takes it; the dispatch stops reading at the
        // cap and answers, so the rest of the write fails with a broken pipe.
        let chunk = vec![b' '; 1 << 20];
        let mut written = 0;
        while written <= cap {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            written += chunk.len();
        }
        None
    });
    assert_eq!(answer["decision"], "allow", "{answer}");
    assert!(
        reason(&answer).contains(&format!("hook stdin is larger than {cap} bytes")),
        "{answer}"
    );
}
