//! spec §8 `--spool` and `belfry spool drain`: line shape, mode, locking under concurrent
//! writers (threads and processes), drain-and-truncate, and refusal of unsafe spools.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::thread;

use belfry_hooks::{run_dispatch, spool_append, spool_drain, DispatchOptions, Error};
use common::{handler, neutral, options, Fixture, TOOL_STDIN};
use serde_json::Value;

const WRITERS: usize = 8;
const LINES_PER_WRITER: usize = 500;
const WRITER_ENV: &str = "BELFRY_TEST_SPOOL_WRITER";

fn spool_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .expect("read spool")
        .lines()
        .map(|line| serde_json::from_str(line).expect("every spool line is whole JSON"))
        .collect()
}

#[test]
fn dispatch_spool_appends_one_line_per_context_with_mode_0600() {
    let fixture = Fixture::new();
    let argv = fixture.script("context.sh", "printf 'use the staging db\\nnot prod\\n'\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let spool = fixture.path("hook-context.jsonl");
    let opts = DispatchOptions {
        spool: true,
        spool_path: Some(spool.clone()),
        ..options("before-tool", &hooks)
    };
    for _ in 0..2 {
        let answer = neutral(&run_dispatch(&opts, TOOL_STDIN));
        assert_eq!(answer.context, "use the staging db\nnot prod");
        assert_eq!(answer.reason, "");
    }
    let lines = spool_lines(&spool);
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(
            line,
            &serde_json::json!({"event": "before-tool", "text": "use the staging db\nnot prod"})
        );
        assert_eq!(line.as_object().map(|o| o.len()), Some(2));
    }
    let mode = fs::metadata(&spool)
        .expect("spool exists")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn dispatch_without_context_spools_nothing() {
    let fixture = Fixture::new();
    let argv = fixture.script("silent.sh", "exit 0\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let spool = fixture.path("hook-context.jsonl");
    let opts = DispatchOptions {
        spool: true,
        spool_path: Some(spool.clone()),
        ..options("before-tool", &hooks)
    };
    let answer = neutral(&run_dispatch(&opts, TOOL_STDIN));
    assert_eq!(
        (answer.decision.as_str(), answer.reason.as_str()),
        ("allow", "")
    );
    assert!(!spool.exists(), "an empty context created the spool");
}

#[test]
fn concurrent_writer_threads_leave_whole_lines_and_drain_empties() {
    let fixture = Fixture::new();
    let spool = fixture.path("hook-context.jsonl");
    thread::scope(|scope| {
        for writer in 0..WRITERS {
            let spool = &spool;
            scope.spawn(move || {
                for line in 0..LINES_PER_WRITER {
                    spool_append(spool, "after-tool", &format!("thread {writer} line {line}"))
                        .expect("append");
                }
            });
        }
    });
    let lines = spool_lines(&spool);
    assert_eq!(lines.len(), WRITERS * LINES_PER_WRITER);
    let distinct: BTreeSet<&str> = lines.iter().filter_map(|l| l["text"].as_str()).collect();
    assert_eq!(distinct.len(), WRITERS * LINES_PER_WRITER);

    let block = spool_drain(&spool).expect("drain");
    assert!(
        block.starts_with("Platform guidance:\n"),
        "{}",
        &block[..40]
    );
    assert_eq!(block.matches("thread ").count(), WRITERS * LINES_PER_WRITER);
    assert_eq!(fs::metadata(&spool).expect("spool kept").len(), 0);
    assert_eq!(spool_drain(&spool).expect("second drain"), "");
}

/// In the parent run this test appends its own lines and checks them; when started as a child
/// of `concurrent_writer_processes_leave_whole_lines` it is one of the competing writers.
#[test]
fn spool_writer_appends_whole_lines() {
    let standalone = std::env::var_os(WRITER_ENV).is_none();
    let fixture = Fixture::new();
    let spool = match std::env::var_os(WRITER_ENV) {
        Some(path) => path.into(),
        None => fixture.path("hook-context.jsonl"),
    };
    let pid = std::process::id();
    for line in 0..LINES_PER_WRITER {
        spool_append(&spool, "after-tool", &format!("process {pid} line {line}")).expect("append");
    }
    if standalone {
        assert_eq!(spool_lines(&spool).len(), LINES_PER_WRITER);
    }
}

#[test]
fn concurrent_writer_processes_leave_whole_lines() {
    let fixture = Fixture::new();
    let spool = fixture.path("hook-context.jsonl");
    let test_binary = std::env::current_exe().expect("test binary path");
    let children: Vec<_> = (0..WRITERS)
        .map(|_| {
            Command::new(&test_binary)
                .args([
                    "--exact",
                    "spool_writer_appends_whole_lines",
                    "--test-threads=1",
                ])
                .env(WRITER_ENV, &spool)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("start writer process")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("writer exit").success());
    }
    let lines = spool_lines(&spool);
    assert_eq!(lines.len(), WRITERS * LINES_PER_WRITER);
    let writers: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l["text"].as_str()?.split(" line ").next())
        .collect();
    assert_eq!(writers.len(), WRITERS);
    let block = spool_drain(&spool).expect("drain");
    assert_eq!(
        block.matches("process ").count(),
        WRITERS * LINES_PER_WRITER
    );
    assert_eq!(fs::metadata(&spool).expect("spool kept").len(), 0);
}

#[test]
fn drain_formats_one_block_in_spool_order() {
    let fixture = Fixture::new();
    let spool = fixture.path("hook-context.jsonl");
    spool_append(&spool, "before-tool", "first").expect("append");
    spool_append(&spool, "prompt-submit", "second\nwith two lines").expect("append");
    spool_append(&spool, "after-tool", "").expect("append nothing");
    assert_eq!(
        spool_drain(&spool).expect("drain"),
        "Platform guidance:\nfirst\n\nsecond\nwith two lines\n"
    );
}

#[test]
fn empty_or_missing_spool_drains_to_nothing() {
    let fixture = Fixture::new();
    let missing = fixture.path("never-written.jsonl");
    assert_eq!(spool_drain(&missing).expect("missing spool"), "");
    assert!(!missing.exists(), "drain created the spool");
    let empty = fixture.path("empty.jsonl");
    fs::write(&empty, b"").expect("write");
    fs::set_permissions(&empty, fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(spool_drain(&empty).expect("empty spool"), "");
}

#[test]
fn writable_by_others_spool_is_refused_for_append_and_drain() {
    let fixture = Fixture::new();
    let spool = fixture.path("hook-context.jsonl");
    spool_append(&spool, "before-tool", "kept").expect("append");
    fs::set_permissions(&spool, fs::Permissions::from_mode(0o666)).expect("chmod");
    let append = spool_append(&spool, "before-tool", "injected");
    assert!(
        matches!(append, Err(Error::SpoolInsecure { .. })),
        "{append:?}"
    );
    let drain = spool_drain(&spool);
    let message = drain
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        message.contains(&format!("chmod go-w {}", spool.display())),
        "{message}"
    );
    assert_eq!(
        spool_lines(&spool).len(),
        1,
        "a refused drain changed the spool"
    );
}

#[test]
fn symlinked_spool_is_not_followed() {
    let fixture = Fixture::new();
    let target = fixture.path("dotfile");
    fs::write(&target, b"precious\n").expect("write");
    let spool = fixture.path("hook-context.jsonl");
    std::os::unix::fs::symlink(&target, &spool).expect("symlink");
    assert!(spool_append(&spool, "before-tool", "text").is_err());
    assert!(spool_drain(&spool).is_err());
    assert_eq!(fs::read(&target).expect("target"), b"precious\n");
}

#[test]
fn spool_failure_is_noted_and_dispatch_still_answers() {
    let fixture = Fixture::new();
    let argv = fixture.script("context.sh", "echo ctx\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let opts = DispatchOptions {
        spool: true,
        spool_path: Some(fixture.path("no-such-dir/spool.jsonl")),
        ..options("before-tool", &hooks)
    };
    let answer = neutral(&run_dispatch(&opts, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert_eq!(answer.context, "ctx");
    assert!(
        answer.reason.contains("context not spooled"),
        "{}",
        answer.reason
    );
}
