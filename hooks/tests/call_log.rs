//! The dispatch call log (`$BELFRY_DISPATCH_LOG`): one whole JSON line per run, naming the
//! event, the dialect, the harness's event and tool, how many handlers ran and the answer,
//! with real handler processes; and a log that cannot be written never changes the answer.

mod common;

use std::fs;
use std::path::Path;

use belfry_hooks::{run_dispatch, Decision, DispatchOptions};
use common::{handler, options, Fixture, TOOL_STDIN};
use serde_json::Value;

fn logged(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line:?}: {err}")))
        .collect()
}

#[test]
fn each_run_appends_one_line_with_the_event_the_tool_and_the_answer() {
    let fixture = Fixture::new();
    let log = fixture.path("calls.ndjson");
    let argv = fixture.script("refuse.sh", "echo 'no force push' >&2\nexit 2\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let opts = DispatchOptions {
        call_log: Some(log.clone()),
        ..options("before-tool", &hooks)
    };
    let denied = run_dispatch(&opts, TOOL_STDIN);
    assert_eq!(denied.outcome.decision, Decision::Deny);
    let opts = DispatchOptions {
        event: "after-tool".into(),
        ..opts
    };
    let allowed = run_dispatch(&opts, TOOL_STDIN);
    assert_eq!(allowed.outcome.decision, Decision::Allow);

    let lines = logged(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let first = &lines[0];
    assert_eq!(first["event"], "before-tool");
    assert_eq!(first["native"], Value::Null);
    assert_eq!(first["hook_event_name"], "BeforeTool");
    assert_eq!(first["tool_name"], "shell");
    assert_eq!(first["tool_class"], "shell");
    assert_eq!(first["handlers"], 1);
    assert_eq!(first["decision"], "deny");
    assert_eq!(first["reason"], "no force push");
    assert_eq!(first["exit_code"], 0);
    assert_eq!(first["pid"], std::process::id());
    assert!(first["ms"].as_u64().is_some_and(|ms| ms > 0), "{first}");
    // No handler is registered for after-tool: the call is logged all the same, with none run.
    assert_eq!(lines[1]["event"], "after-tool");
    assert_eq!(lines[1]["handlers"], 0);
    assert_eq!(lines[1]["decision"], "allow");
}

#[test]
fn a_dialect_that_does_not_exist_is_logged_with_its_exit_code() {
    let fixture = Fixture::new();
    let log = fixture.path("calls.ndjson");
    let dialects = fixture.path("dialects");
    fs::create_dir(&dialects).unwrap_or_else(|err| panic!("{err}"));
    let hooks = fixture.hooks_for("before-tool", Vec::new());
    let opts = DispatchOptions {
        native: Some("no-such-dialect".into()),
        dialects_dir: Some(dialects),
        call_log: Some(log.clone()),
        ..options("before-tool", &hooks)
    };
    let output = run_dispatch(&opts, TOOL_STDIN);
    assert_ne!(output.exit_code, 0);
    let lines = logged(&log);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["native"], "no-such-dialect");
    assert_eq!(lines[0]["exit_code"], output.exit_code);
    assert!(
        lines[0]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("no-such-dialect")),
        "{}",
        lines[0]
    );
}

#[test]
fn concurrent_runs_append_whole_lines() {
    let fixture = Fixture::new();
    let log = fixture.path("calls.ndjson");
    let argv = fixture.script("ok.sh", "cat >/dev/null\nexit 0\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let runs = 12;
    std::thread::scope(|scope| {
        for _ in 0..runs {
            scope.spawn(|| {
                let opts = DispatchOptions {
                    call_log: Some(log.clone()),
                    ..options("before-tool", &hooks)
                };
                let _ = run_dispatch(&opts, TOOL_STDIN);
            });
        }
    });
    let lines = logged(&log);
    assert_eq!(lines.len(), runs, "{lines:?}");
    assert!(lines.iter().all(|line| line["handlers"] == 1), "{lines:?}");
}

#[test]
fn a_log_that_cannot_be_written_leaves_the_answer_alone() {
    let fixture = Fixture::new();
    let argv = fixture.script("context.sh", "cat >/dev/null\necho 'mind the tests'\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let plain = run_dispatch(&options("before-tool", &hooks), TOOL_STDIN);
    let opts = DispatchOptions {
        call_log: Some(fixture.path("no-such-dir/calls.ndjson")),
        ..options("before-tool", &hooks)
    };
    let logged_nowhere = run_dispatch(&opts, TOOL_STDIN);
    assert_eq!(logged_nowhere, plain);
    assert_eq!(plain.outcome.context, "mind the tests");
}

#[test]
fn a_symlink_at_the_log_path_is_not_followed() {
    let fixture = Fixture::new();
    let victim = fixture.path("victim.txt");
    fs::write(&victim, "keep me\n").unwrap_or_else(|err| panic!("{err}"));
    let log = fixture.path("calls.ndjson");
    std::os::unix::fs::symlink(&victim, &log).unwrap_or_else(|err| panic!("{err}"));
    let hooks = fixture.hooks_for("before-tool", Vec::new());
    let opts = DispatchOptions {
        call_log: Some(log),
        ..options("before-tool", &hooks)
    };
    let output = run_dispatch(&opts, TOOL_STDIN);
    assert_eq!(output.outcome.decision, Decision::Allow);
    assert_eq!(fs::read_to_string(&victim).unwrap_or_default(), "keep me\n");
}

#[test]
fn a_new_log_is_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Fixture::new();
    let log = fixture.path("calls.ndjson");
    let hooks = fixture.hooks_for("before-tool", Vec::new());
    let opts = DispatchOptions {
        call_log: Some(log.clone()),
        ..options("before-tool", &hooks)
    };
    let _ = run_dispatch(&opts, TOOL_STDIN);
    let mode = fs::metadata(&log)
        .unwrap_or_else(|err| panic!("{err}"))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}
