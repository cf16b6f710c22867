//! spec §8 dispatch contract, with real handler processes (small `/bin/sh` scripts run by argv).

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use belfry_hooks::{run_dispatch, DispatchOptions};
use common::{dispatch, handler, neutral, options, Fixture, TOOL_STDIN};
use serde_json::json;

#[test]
fn no_handlers_for_event_or_tool_allows_silently() {
    let fixture = Fixture::new();
    let marker = fixture.path("ran");
    let argv = fixture.script("mark.sh", &format!("touch {}\n", marker.display()));
    let hooks = fixture.hooks_file(&json!({
        "version": 1,
        "events": {"before-tool": [{"matcher": "edit|write", "handlers": [{"argv": argv}]}]}
    }));
    for event in ["before-tool", "after-tool"] {
        let answer = neutral(&dispatch(event, &hooks, TOOL_STDIN));
        assert_eq!(answer.decision, "allow");
        assert_eq!(answer.reason, "");
        assert_eq!(answer.context, "");
    }
    assert!(!marker.exists(), "a handler ran although no group matched");
}

#[test]
fn silent_handler_allows() {
    let fixture = Fixture::new();
    let argv = fixture.script("ok.sh", "exit 0\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(
        (
            answer.decision.as_str(),
            answer.reason.as_str(),
            answer.context.as_str()
        ),
        ("allow", "", "")
    );
}

#[test]
fn contexts_of_plain_text_and_json_handlers_join_in_order() {
    let fixture = Fixture::new();
    let text = fixture.script("text.sh", "printf 'first line\\nsecond line\\n'\n");
    let json_answer = fixture.script(
        "json.sh",
        r#"echo '{"decision":"allow","reason":"looked fine","context":"from json"}'"#,
    );
    let hooks = fixture.hooks_for(
        "before-tool",
        vec![
            handler(text, 5000, "open"),
            handler(json_answer, 5000, "open"),
        ],
    );
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert_eq!(answer.context, "first line\nsecond line\nfrom json");
    assert_eq!(answer.reason, "looked fine");
}

#[test]
fn refusal_exit_2_denies_with_stderr_reason_even_when_failing_open() {
    let fixture = Fixture::new();
    let argv = fixture.script(
        "refuse.sh",
        "echo 'force push is not allowed' >&2\nexit 2\n",
    );
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "deny");
    assert_eq!(answer.reason, "force push is not allowed");
}

#[test]
fn refusal_after_context_denies_with_that_reason_and_stops_the_chain() {
    let fixture = Fixture::new();
    let context = fixture.script("context.sh", "echo 'repo uses trunk-based flow'\n");
    let refuse = fixture.script("refuse.sh", "echo 'not on main' >&2\nexit 2\n");
    let later_marker = fixture.path("later-ran");
    let later = fixture.script("later.sh", &format!("touch {}\n", later_marker.display()));
    let hooks = fixture.hooks_for(
        "before-tool",
        vec![
            handler(context, 5000, "open"),
            handler(refuse, 5000, "open"),
            handler(later, 5000, "open"),
        ],
    );
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "deny");
    assert_eq!(answer.reason, "not on main");
    assert_eq!(answer.context, "repo uses trunk-based flow");
    assert!(!later_marker.exists(), "a handler after the deny ran");
}

#[test]
fn json_deny_on_exit_0_is_a_deny() {
    let fixture = Fixture::new();
    let argv = fixture.script(
        "deny.sh",
        r#"echo '{"decision":"deny","reason":"outside the sandbox","context":"see policy"}'"#,
    );
    let later_marker = fixture.path("later-ran");
    let later = fixture.script("later.sh", &format!("touch {}\n", later_marker.display()));
    let hooks = fixture.hooks_for(
        "before-tool",
        vec![handler(argv, 5000, "open"), handler(later, 5000, "closed")],
    );
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "deny");
    assert_eq!(answer.reason, "outside the sandbox");
    assert_eq!(answer.context, "see policy");
    assert!(!later_marker.exists());
}

#[test]
fn crash_fails_open_with_a_note_and_the_chain_goes_on() {
    let fixture = Fixture::new();
    let crash = fixture.script("crash.sh", "echo 'segfault-ish' >&2\nexit 1\n");
    let after = fixture.script("after.sh", "echo 'still here'\n");
    let hooks = fixture.hooks_for(
        "before-tool",
        vec![handler(crash, 5000, "open"), handler(after, 5000, "open")],
    );
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert_eq!(answer.context, "still here");
    assert!(answer.reason.contains("crash.sh"), "{}", answer.reason);
    assert!(
        answer.reason.contains("exited with status 1"),
        "{}",
        answer.reason
    );
    assert!(answer.reason.contains("segfault-ish"), "{}", answer.reason);
}

#[test]
fn killed_by_signal_fails_open() {
    let fixture = Fixture::new();
    let argv = fixture.script("kill.sh", "kill -9 $$\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert!(
        answer.reason.contains("killed by signal 9"),
        "{}",
        answer.reason
    );
}

#[test]
fn timeout_fails_open_and_kills_the_process_group() {
    let fixture = Fixture::new();
    let pid_file = fixture.path("grandchild.pid");
    let argv = fixture.script(
        "slow.sh",
        &format!("sleep 30 &\necho $! > {}\nwait\n", pid_file.display()),
    );
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 300, "open")]);
    let started = Instant::now();
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer.decision, "allow");
    assert!(
        answer.reason.contains("timed out after 300 ms"),
        "{}",
        answer.reason
    );
    let grandchild: u32 = fs::read_to_string(&pid_file)
        .expect("the handler wrote its child's pid")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        wait_until_gone(grandchild, Duration::from_secs(3)),
        "the handler's background child {grandchild} survived the timeout"
    );
}

/// True once `/proc/<pid>` is gone or a zombie (dead, waiting for init to reap it).
fn wait_until_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                let state = stat
                    .rsplit(") ")
                    .next()
                    .and_then(|rest| rest.chars().next());
                if state == Some('Z') {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn background_child_holding_stdout_does_not_hang_dispatch() {
    let fixture = Fixture::new();
    // The handler answers and exits, but its background child keeps stdout open.
    let argv = fixture.script("linger.sh", "echo 'answer given'\nsleep 30 &\nexit 0\n");
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 400, "closed")]);
    let started = Instant::now();
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer.decision, "allow", "{}", answer.reason);
    assert_eq!(answer.context, "answer given");
}

#[test]
fn failure_closed_turns_crash_timeout_spawn_and_bad_json_into_deny() {
    let fixture = Fixture::new();
    let cases = [
        (
            fixture.script("crash.sh", "exit 7\n"),
            5000,
            "exited with status 7",
        ),
        (
            fixture.script("slow.sh", "sleep 30\n"),
            200,
            "timed out after 200 ms",
        ),
        (
            vec![fixture.path("missing-program").display().to_string()],
            5000,
            "could not be started",
        ),
        (
            fixture.script("badjson.sh", "echo '{\"decision\": \"deny\"'\n"),
            5000,
            "malformed JSON",
        ),
    ];
    for (argv, timeout_ms, problem) in cases {
        let hooks = fixture.hooks_for("before-tool", vec![handler(argv, timeout_ms, "closed")]);
        let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
        assert_eq!(answer.decision, "deny", "{problem}: {}", answer.reason);
        assert!(
            answer.reason.contains(problem),
            "{problem}: {}",
            answer.reason
        );
        assert!(answer.reason.contains("fails closed"), "{}", answer.reason);
    }
}

#[test]
fn spawn_failure_and_bad_json_fail_open_by_default() {
    let fixture = Fixture::new();
    let missing = vec![fixture.path("missing-program").display().to_string()];
    let bad_json = fixture.script("badjson.sh", "echo '{not json'\n");
    let hooks = fixture.hooks_file(&json!({
        "version": 1,
        "events": {"before-tool": [{"handlers": [{"argv": missing}, {"argv": bad_json}]}]}
    }));
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert!(
        answer.reason.contains("could not be started"),
        "{}",
        answer.reason
    );
    assert!(
        answer.reason.contains("malformed JSON"),
        "{}",
        answer.reason
    );
    assert_eq!(answer.context, "");
}

#[test]
fn malformed_stdin_fails_open_without_running_handlers() {
    let fixture = Fixture::new();
    let marker = fixture.path("ran");
    let argv = fixture.script(
        "refuse.sh",
        &format!("touch {}\nexit 2\n", marker.display()),
    );
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "closed")]);
    for stdin in [&b""[..], b"not json", b"[1,2]", b"{\"a\":1} trailing"] {
        let answer = neutral(&dispatch("before-tool", &hooks, stdin));
        assert_eq!(answer.decision, "allow", "{stdin:?}");
        assert_eq!(answer.context, "");
        assert!(
            answer.reason.contains("hook stdin is not one JSON object"),
            "{}",
            answer.reason
        );
    }
    assert!(!marker.exists());
}

#[test]
fn missing_or_invalid_hooks_file_fails_open_naming_the_file() {
    let fixture = Fixture::new();
    let missing = fixture.path("nope.json");
    let answer = neutral(&dispatch("before-tool", &missing, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert!(
        answer.reason.contains(&missing.display().to_string()),
        "{}",
        answer.reason
    );
    assert!(
        answer.reason.contains("cannot read hooks file"),
        "{}",
        answer.reason
    );

    let invalid = fixture.path("invalid.json");
    fs::write(
        &invalid,
        br#"{"version":1,"events":{"before-tool":[{"handlers":[{"argv":[]}]}]}}"#,
    )
    .expect("write");
    fs::set_permissions(&invalid, fs::Permissions::from_mode(0o600)).expect("chmod");
    let answer = neutral(&dispatch("before-tool", &invalid, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert!(answer.reason.contains("argv is empty"), "{}", answer.reason);
    assert!(answer.reason.contains("docs/hooks.md"), "{}", answer.reason);
}

#[test]
fn world_writable_hooks_file_is_not_run_and_reason_gives_the_fix() {
    let fixture = Fixture::new();
    let marker = fixture.path("ran");
    let argv = fixture.script("mark.sh", &format!("touch {}\n", marker.display()));
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "closed")]);
    fs::set_permissions(&hooks, fs::Permissions::from_mode(0o666)).expect("chmod");
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert!(
        !marker.exists(),
        "a handler from an insecure hooks file ran"
    );
    let path = hooks.display().to_string();
    assert!(answer.reason.contains(&path), "{}", answer.reason);
    assert!(
        answer
            .reason
            .contains("group- or world-writable (mode 0666)"),
        "{}",
        answer.reason
    );
    assert!(
        answer.reason.contains(&format!("chmod go-w {path}")),
        "{}",
        answer.reason
    );
}

#[test]
fn handler_receives_original_stdin_bytes_and_event_env() {
    let fixture = Fixture::new();
    let captured = fixture.path("stdin.json");
    let event_file = fixture.path("event");
    let argv = fixture.script(
        "capture.sh",
        &format!(
            "cat > {}\nprintf '%s' \"$BELFRY_HOOK_EVENT\" > {}\n",
            captured.display(),
            event_file.display()
        ),
    );
    let hooks = fixture.hooks_for("after-tool", vec![handler(argv, 5000, "open")]);
    // Odd spacing, key order and an unknown field must all reach the handler untouched; the
    // only change is the tool's class, spliced in as the first member.
    let stdin = b"{ \"tool_name\" : \"shell\",\n  \"zeta\": {\"x\": [1, 2.50]}, \"tool_response\": \"ok\" }";
    let answer = neutral(&dispatch("after-tool", &hooks, stdin));
    assert_eq!(answer.decision, "allow");
    let mut expected = b"{\"belfry\":{\"tool_class\":\"shell\"},".to_vec();
    expected.extend_from_slice(&stdin[1..]);
    assert_eq!(fs::read(&captured).expect("captured stdin"), expected);
    assert_eq!(
        fs::read_to_string(&event_file).expect("event"),
        "after-tool"
    );
}

#[test]
fn handler_that_ignores_large_stdin_does_not_block() {
    let fixture = Fixture::new();
    let argv = fixture.script("ignore.sh", "echo 'did not read'\n");
    let hooks = fixture.hooks_for("after-tool", vec![handler(argv, 5000, "closed")]);
    let big = format!(
        r#"{{"tool_name":"shell","tool_response":"{}"}}"#,
        "x".repeat(4 << 20)
    );
    let answer = neutral(&dispatch("after-tool", &hooks, big.as_bytes()));
    assert_eq!(answer.decision, "allow", "{}", answer.reason);
    assert_eq!(answer.context, "did not read");
}

#[test]
fn matcher_selects_groups_by_tool_name() {
    let fixture = Fixture::new();
    let shell = fixture.script("shell.sh", "echo shell-guard\n");
    let edit = fixture.script("edit.sh", "echo edit-guard\n");
    let any = fixture.script("any.sh", "echo any\n");
    let hooks = fixture.hooks_file(&json!({
        "version": 1,
        "events": {"before-tool": [
            {"matcher": "shell|exec", "handlers": [{"argv": shell}]},
            {"matcher": "edit", "handlers": [{"argv": edit}]},
            {"handlers": [{"argv": any}]}
        ]}
    }));
    let context_for = |tool: &str| {
        let stdin = format!(r#"{{"tool_name":"{tool}"}}"#);
        neutral(&dispatch("before-tool", &hooks, stdin.as_bytes())).context
    };
    assert_eq!(context_for("shell"), "shell-guard\nany");
    assert_eq!(context_for("exec"), "shell-guard\nany");
    assert_eq!(context_for("edit"), "edit-guard\nany");
    assert_eq!(context_for("Shell"), "any");
}

#[test]
fn empty_event_fails_open() {
    let fixture = Fixture::new();
    let hooks = fixture.hooks_for("before-tool", vec![]);
    let opts = DispatchOptions {
        event: String::new(),
        ..options("", &hooks)
    };
    let answer = neutral(&run_dispatch(&opts, TOOL_STDIN));
    assert_eq!(answer.decision, "allow");
    assert!(
        answer.reason.contains("--event is empty"),
        "{}",
        answer.reason
    );
}

#[test]
fn handler_printing_a_byte_order_mark_before_a_json_deny_denies() {
    let fixture = Fixture::new();
    let argv = fixture.script(
        "bom.sh",
        "printf '\\357\\273\\277{\"decision\":\"deny\",\"reason\":\"no force push\"}\\n'\n",
    );
    let hooks = fixture.hooks_for("before-tool", vec![handler(argv, 5000, "open")]);
    let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
    assert_eq!(answer.decision, "deny", "{answer:?}");
    assert_eq!(answer.reason, "no force push");
    assert_eq!(answer.context, "");
}

#[test]
fn malformed_decision_never_allows_for_an_enforcing_or_deny_naming_handler() {
    let fixture = Fixture::new();
    let enrich = |argv: Vec<String>| json!({ "argv": argv, "timeout_ms": 5000, "intent": "enrich", "failure": "open" });
    let cases = [
        // An enforcing guard that fails open still cannot allow with a broken answer.
        handler(
            fixture.script("maybe.sh", "echo '{\"decision\":\"maybe\"}'\n"),
            5000,
            "open",
        ),
        // A truncated deny from a fail-open enricher is read as the deny it tried to give.
        enrich(fixture.script("cut.sh", "printf '{\"decision\":\"deny\"'\n")),
        // Two answers, the second a deny: not one object, so it is broken, and it names deny.
        enrich(fixture.script(
            "two.sh",
            "echo '{\"decision\":\"allow\"}'; echo '{\"decision\":\"deny\"}'\n",
        )),
    ];
    for case in cases {
        let hooks = fixture.hooks_for("before-tool", vec![case.clone()]);
        let answer = neutral(&dispatch("before-tool", &hooks, TOOL_STDIN));
        assert_eq!(answer.decision, "deny", "{case}: {answer:?}");
        assert!(answer.reason.contains("malformed JSON"), "{answer:?}");
    }
}

#[test]
fn stdin_that_trickles_without_end_cannot_extend_the_deadline() {
    // A real pipe whose writer sends a byte every 50 ms and never closes.
    let mut writer = std::process::Command::new("/bin/sh")
        .args(["-c", "while :; do printf x; sleep 0.05; done"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the trickling writer");
    let pipe = writer.stdout.take().expect("writer stdout");
    let started = Instant::now();
    let result = belfry_hooks::read_hook_stdin(pipe, 1 << 20, Duration::from_millis(400));
    let elapsed = started.elapsed();
    let _ = writer.kill();
    let _ = writer.wait();
    let message = result.err().map(|err| err.to_string()).unwrap_or_default();
    assert!(
        message.contains("hook stdin was not closed within 400 ms"),
        "{message}"
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}
