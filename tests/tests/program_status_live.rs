//! Issue 40, live: the real harnesses report their own state through OSC 7501 program status
//! in a belfry pane, and belfry shows it. Each harness runs in a pane inside a loopback-only
//! network namespace against the scripted model server, at the pinned version and at the
//! newest one installed (one test body, the version its parameter):
//!
//! - the pane host answers the harness's start-up probe: a harness that reports only after
//!   the terminal answered (Claude Code) reports at all, and its first record is there before
//!   any prompt;
//! - around a turn the harness reports `working`, then a rest state when the turn ends (Claude
//!   Code says `done`, Codex `idle`), each arriving as a `program-status` event with its old
//!   and new record and the revision it arrived at, and shown by `peek --json`;
//! - on a permission dialog it reports `blocked` with kind `permission`, and leaves it when
//!   the dialog is approved.
//!
//! Gated (`#[ignore]`): it needs the harnesses (`BELFRY_HARNESS_DIR`) and the privilege to make
//! a network namespace. Run with `BELFRY_HARNESS_DIR=/work/harnesses cargo test -p belfry-tests
//! --test program_status_live -- --ignored --test-threads=1 --nocapture`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use belfry_tests::live::{Live, LiveOptions, Profile};
use serde_json::{json, Value};

/// The scripted turns: a streamed answer paced so a turn lasts about three seconds, and a
/// shell command the harness asks permission for.
fn script(profile: &Profile) -> Value {
    let words: Vec<String> = (0..30).map(|w| format!("word{w}")).collect();
    let command = "touch dialog.ran && echo DIALOG-RAN";
    let dialog_tool = match profile.raw["tool_dialogs"].get("dialog_tool") {
        Some(template) => fill_command(template, command),
        None => json!({"command": command}),
    };
    json!({
        "turns": [
            {"match": "STATUS-TURN", "text": format!("{} TURN-ENDED", words.join(" ")), "delay_ms": 100},
            {"match": "STATUS-DIALOG", "tool": dialog_tool, "then": {"text": "DIALOG-ENDED"}},
        ],
        "fallback": {"text": "OK"}
    })
}

/// `template` with every `{command}` in its strings replaced by `command`.
fn fill_command(template: &Value, command: &str) -> Value {
    match template {
        Value::String(text) => Value::String(text.replace("{command}", command)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| fill_command(v, command)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| (key.clone(), fill_command(v, command)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The profile's extra arguments that make the dialog command ask while a plain one runs.
fn dialog_args(profile: &Profile) -> Vec<String> {
    profile.raw["tool_dialogs"]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// `belfry events NAME --json`, its `program-status` events arriving on a channel.
fn status_events(live: &Live) -> (Child, Receiver<Value>) {
    let mut child = live
        .env
        .cmd(&["events", &live.session, "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start belfry events");
    let stdout = child.stdout.take().expect("events stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if event["event"] == "program-status" && tx.send(event).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// One event as a line of the report: `old -> new (kind) @revision`.
fn said(event: &Value) -> String {
    let state = |record: &Value| match (record["state"].as_str(), record["kind"].as_str()) {
        (Some(state), Some(kind)) => format!("{state}:{kind}"),
        (Some(state), None) => state.to_string(),
        _ => "-".to_string(),
    };
    format!(
        "{} -> {} @{}",
        state(&event["old"]),
        state(&event["new"]),
        event["revision"]
    )
}

/// Collects events until one satisfies `done` or `timeout` passes; returns them all and
/// whether `done` held.
fn collect_until(
    rx: &Receiver<Value>,
    seen: &mut Vec<Value>,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> bool {
    let until = Instant::now() + timeout;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(event) => {
                let hit = done(&event);
                seen.push(event);
                if hit {
                    return true;
                }
            }
            Err(_) => return false,
        }
    }
    false
}

/// The root record of the pane's snapshot (`peek --json`), with the snapshot's revision.
fn root_record(live: &Live) -> (Value, u64) {
    let snapshot = live.peek_json();
    let record = snapshot["program_status"]["records"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|record| record.get("id").is_none())
        .cloned()
        .unwrap_or(Value::Null);
    (record, snapshot["revision"].as_u64().unwrap_or(0))
}

fn state_of(event: &Value) -> Option<&str> {
    event["new"]["state"].as_str()
}

/// The acceptance for `name` at `version`: the probe answered, `working` then a rest state
/// around a turn, `blocked:permission` on a dialog; each in `events` and `peek --json` with
/// revisions.
fn program_status_live(name: &str, version: &str) {
    let profile = Profile::load(name);
    let mut live = Live::start(
        name,
        LiveOptions {
            script: script(&profile),
            extra_args: dialog_args(&profile),
            version: Some(version.to_string()),
            ..LiveOptions::default()
        },
    );
    live.session = name.to_string();
    let label = live.label();
    let (mut events, rx) = status_events(&live);
    let ready = live.wait_ready();
    // The probe: a harness that reports only after the terminal answered has a record as soon
    // as it is ready, before any prompt.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut first, mut first_at) = root_record(&live);
    while first.is_null() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        (first, first_at) = root_record(&live);
    }
    let snapshot = live.peek_json();
    let queries = snapshot["program_status"]["queries"].clone();
    println!(
        "live {label}: ready after {} ms; status queries answered {queries}; the first record \
         {first} (snapshot revision {first_at})",
        ready.as_millis()
    );
    assert!(
        !first.is_null(),
        "live {label}: no program status record within 10 s of readiness (queries answered: \
         {queries})\nscreen:\n{}",
        live.screen()
    );
    assert!(
        first["revision"].as_u64().unwrap_or(u64::MAX) <= first_at,
        "{first}"
    );

    // A turn: working, then a rest state once the answer is on the screen.
    let mut seen: Vec<Value> = Vec::new();
    while rx.try_recv().map(|event| seen.push(event)).is_ok() {}
    let before_turn = seen.len();
    let submitted = live.submit("STATUS-TURN please answer");
    assert_eq!(submitted["result"], "sent", "{submitted}");
    let working = collect_until(&rx, &mut seen, Duration::from_secs(30), |event| {
        state_of(event) == Some("working")
    });
    assert!(
        working,
        "live {label}: no `working` report after the prompt; events: {:?}\nscreen:\n{}",
        seen.iter().map(said).collect::<Vec<_>>(),
        live.screen()
    );
    let (during, during_at) = root_record(&live);
    let ended = live.wait("TURN-ENDED", None, 60_000);
    assert!(
        ended,
        "live {label}: the turn never ended\n{}",
        live.screen()
    );
    let rested = collect_until(&rx, &mut seen, Duration::from_secs(30), |event| {
        matches!(state_of(event), Some("idle" | "done"))
    });
    let turn: Vec<String> = seen[before_turn..].iter().map(said).collect();
    assert!(
        rested,
        "live {label}: no rest state after the turn; events {turn:?}\nscreen:\n{}",
        live.screen()
    );
    std::thread::sleep(Duration::from_millis(500));
    let (after, after_at) = root_record(&live);
    println!(
        "live {label}: around the turn: {turn:?}; peek during the turn {} (revision {}, \
         snapshot {during_at}); after {} (revision {}, snapshot {after_at})",
        during["state"], during["revision"], after["state"], after["revision"]
    );
    let revisions: Vec<u64> = seen[before_turn..]
        .iter()
        .filter_map(|event| event["revision"].as_u64())
        .collect();
    assert!(
        revisions.windows(2).all(|pair| pair[0] <= pair[1]),
        "revisions go back: {revisions:?}"
    );
    assert!(
        matches!(after["state"].as_str(), Some("idle" | "done")),
        "live {label}: peek --json after the turn: {after}"
    );

    // A permission dialog: blocked with kind permission, until it is approved.
    let before_dialog = seen.len();
    let submitted = live.submit("STATUS-DIALOG please run it");
    assert_eq!(submitted["result"], "sent", "{submitted}");
    let blocked = collect_until(&rx, &mut seen, Duration::from_secs(60), |event| {
        state_of(event) == Some("blocked")
    });
    let dialog_events: Vec<String> = seen[before_dialog..].iter().map(said).collect();
    assert!(
        blocked,
        "live {label}: no `blocked` report on the dialog; events {dialog_events:?}\nscreen:\n{}",
        live.screen()
    );
    let event = seen.last().cloned().unwrap_or(Value::Null);
    assert_eq!(event["new"]["kind"], "permission", "live {label}: {event}");
    let (record, record_at) = root_record(&live);
    assert_eq!(
        record["state"], "blocked",
        "live {label}: peek --json: {record}"
    );
    assert_eq!(record["kind"], "permission", "live {label}: {record}");
    // The report comes as the dialog opens; its drawing may follow a moment later.
    if let Some(dialog) = live.profile.dialog_regex() {
        assert!(
            live.wait(&dialog, None, 10_000),
            "live {label}: blocked, but no dialog on the screen:\n{}",
            live.screen()
        );
    }
    let approved = live.wait_approving("DIALOG-ENDED", 90_000);
    assert_eq!(
        approved.map(|n| n >= 1),
        Some(true),
        "live {label}: the dialog was not approved and answered\n{}",
        live.screen()
    );
    let left = collect_until(&rx, &mut seen, Duration::from_secs(30), |event| {
        matches!(state_of(event), Some("idle" | "done"))
    });
    let dialog_events: Vec<String> = seen[before_dialog..].iter().map(said).collect();
    assert!(
        left,
        "live {label}: still not at rest after the approved dialog: {dialog_events:?}"
    );
    assert!(
        live.work.join("dialog.ran").exists(),
        "the approved command never ran"
    );
    println!(
        "live {label}: around the dialog: {dialog_events:?}; peek --json while it showed: \
         blocked:{} at revision {} (snapshot {record_at})",
        record["kind"], record["revision"]
    );
    let _ = events.kill();
    let _ = events.wait();
}

/// The newest release of each harness checked here (installed beside the pin by `.ci/run`):
/// the test runs the pinned version (`tests/harnesses.json`) and this one, once when the pin
/// has moved to it.
const NEWEST: [(&str, &str); 2] = [("claude", "2.1.337"), ("codex", "0.171.0")];

/// The pinned version of `name` and its newest, each once.
fn versions(name: &str) -> Vec<String> {
    let mut versions = vec![belfry_tests::live::Pin::load(name).version];
    for (harness, newest) in NEWEST {
        if harness == name && !versions.iter().any(|v| v == newest) {
            versions.push(newest.to_string());
        }
    }
    versions
}

#[test]
#[ignore = "live: needs Claude Code (pinned and newest) installed and a network namespace"]
fn claude_code_reports_its_state_in_a_belfry_pane() {
    for version in versions("claude") {
        program_status_live("claude", &version);
    }
}

#[test]
#[ignore = "live: needs Codex (pinned and newest) installed and a network namespace"]
fn codex_reports_its_state_in_a_belfry_pane() {
    for version in versions("codex") {
        program_status_live("codex", &version);
    }
}
