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
//! a network namespace. Run with `BELFRY_HARNESS_DIR=DIR cargo test -p belfry-tests
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
        .cmd(&["events", &live.session, "--json", "--history", "0"])
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

/// The last six characters of a posted message's name before its extension: the id a notice
/// carries as `[id:…]`.
fn id_of(name: &str) -> String {
    let name = name.trim();
    name[name.len() - 9..name.len() - 3].to_string()
}

/// Starts `name` at `version` declared with its adapter and belfry's hooks applied in the work
/// directory (the rich DING policy is then the default), with a model that answers a notice.
fn start_rich(name: &str, version: &str) -> Live {
    let root = tempfile::tempdir().expect("temp dir");
    let work = root.path().join("work");
    let home = root.path().join("home");
    std::fs::create_dir_all(&work).expect("work");
    std::fs::create_dir_all(&home).expect("home");
    let (work_c, home_c, adapter) = (work.clone(), home.clone(), name.to_string());
    let apply_hooks = move || {
        let kdl = belfry_tests::live::workspace()
            .join("examples")
            .join(&adapter)
            .join("belfry-hooks.kdl");
        std::fs::copy(&kdl, work_c.join("belfry-hooks.kdl")).expect("copy the hooks file");
        let apply = std::process::Command::new(belfry_tests::belfry_bin())
            .args(["hooks", "--dir"])
            .arg(&work_c)
            .args(["apply", "--trust"])
            .current_dir(&work_c)
            .env("HOME", &home_c)
            .env("CODEX_HOME", home_c.join(".codex"))
            .env("XDG_CONFIG_HOME", home_c.join(".config"))
            .env("BELFRY_HOOKS_DETECT", "0")
            .output()
            .expect("belfry hooks apply");
        assert!(
            apply.status.success(),
            "belfry hooks apply: {}{}",
            String::from_utf8_lossy(&apply.stdout),
            String::from_utf8_lossy(&apply.stderr)
        );
    };
    let path = format!(
        "{}:{}",
        belfry_tests::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let live = Live::start(
        name,
        LiveOptions {
            script: json!({"turns": [], "fallback": {"text": "NOTICE-READ"}}),
            extra_env: vec![("PATH".to_string(), path)],
            work: Some(work),
            home: Some(home),
            prepare: Some(&apply_hooks),
            // The rich policy as the A/B evaluation's rich arm declares it: the hooks are
            // applied with the test's own HOME, whose state directory the pane's daemon does
            // not read, so the policy is named rather than left to the default.
            new_args: vec![
                "--adapter".into(),
                name.into(),
                "--ding-delivery".into(),
                "turn-boundary+fresh-idle".into(),
                "--ding-adapter".into(),
                belfry_tests::bin_dir()
                    .join("belfry-adapter")
                    .display()
                    .to_string(),
                "--ding-adapter=--provider".into(),
                "--ding-adapter".into(),
                name.into(),
            ],
            version: Some(version.to_string()),
            ..LiveOptions::default()
        },
    );
    // The temporary directory lives as long as the run's own (the Live's environment).
    std::mem::forget(root);
    live
}

/// Posts a message to the pane, sitting idle with an empty composer, and returns how long it
/// took until the model server saw the notice (its `[id:…]`), or `None` within `limit`.
fn post_and_time(live: &Live, subject: &str, limit: Duration) -> (Option<u64>, String) {
    let name = live.env.post_mail(
        &live.session,
        "lead",
        subject,
        "A task for you; nothing to do.\n",
    );
    let id = id_of(&name);
    let posted = Instant::now();
    let needle = format!("[id:{id}]");
    let seen_before = live.server.requests().len();
    while posted.elapsed() < limit {
        let requests = live.server.requests();
        if requests
            .iter()
            .skip(seen_before)
            .any(|request| request["body"].to_string().contains(&needle))
        {
            return (Some(posted.elapsed().as_millis() as u64), name);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (None, name)
}

/// Waits until the harness is ready again and has gone quiet: a composer that is empty and a
/// program at rest, as a person would leave it.
fn settle(live: &Live) {
    live.wait_ready();
    std::thread::sleep(Duration::from_secs(2));
}

/// Issue 40: a rich-policy agent that was just started, restarted or cleared, sitting idle
/// with an empty composer, gets a posted message within 3 s with no human input.
///
/// `clear_limit` is the limit after a `/clear`: 3 s where the harness says what the person's
/// Enter was (a session-start hook with source `clear`); where it says nothing, DING waits the
/// lease's unseen-submit time (10 s from the person's Enter) for a turn that never comes, and
/// the limit says so.
fn mail_reaches_a_fresh_idle_agent(
    name: &str,
    version: &str,
    clear: &[&str],
    clear_limit: Duration,
) {
    const LIMIT: Duration = Duration::from_secs(3);
    let mut live = start_rich(name, version);
    live.session = name.to_string();
    let label = live.label();
    settle(&live);
    let status = live.env.ding_status(&live.session);
    assert_eq!(
        status["policy"]["delivery"]
            .as_str()
            .or(status["policy"].as_str())
            .map(|p| p.contains("fresh-idle")),
        Some(true),
        "live {label}: not the rich policy: {status}"
    );
    let mut measured = Vec::new();
    for moment in ["started", "restarted", "cleared"] {
        match moment {
            "restarted" => {
                live.env.ok(&["restart", &live.session]);
                settle(&live);
            }
            "cleared" => {
                let mut steps: Vec<&str> = Vec::new();
                for step in clear {
                    steps.push(step);
                }
                live.guarded_send(&steps);
                // The cleared screen draws its composer again.
                std::thread::sleep(Duration::from_secs(2));
                settle(&live);
            }
            _ => {}
        }
        let (record, _) = root_record(&live);
        println!(
            "live {label}: {moment}: before the post the program reports {} and DING's lease is {}",
            record["state"],
            live.env.ding_status(&live.session)["lease"]
        );
        let (took, message) =
            post_and_time(&live, &format!("fresh-{moment}"), Duration::from_secs(20));
        let status = live.env.ding_status(&live.session);
        println!(
            "live {label}: mail to a {moment} idle agent: {} (message {message}); lease {}",
            took.map_or("not within 20 s".to_string(), |ms| format!("{ms} ms")),
            status["lease"]
        );
        measured.push((moment, took));
        // Let the notice's turn end before the next step.
        live.wait("NOTICE-READ", None, 30_000);
        std::thread::sleep(Duration::from_secs(2));
    }
    for (moment, took) in &measured {
        let limit = if *moment == "cleared" {
            clear_limit
        } else {
            LIMIT
        };
        assert!(
            took.is_some_and(|ms| ms <= limit.as_millis() as u64),
            "live {label}: mail to a {moment} idle agent took {took:?} (limit {limit:?}); all: {measured:?}\nscreen:\n{}",
            live.screen()
        );
    }
}

#[test]
#[ignore = "live: needs Claude Code (pinned and newest) installed and a network namespace"]
fn mail_reaches_a_fresh_idle_claude_code_within_3_s() {
    for version in versions("claude") {
        mail_reaches_a_fresh_idle_agent(
            "claude",
            &version,
            &["--text", "/clear", "--delay-ms", "300", "--key", "Enter"],
            Duration::from_secs(3),
        );
    }
}

#[test]
#[ignore = "live: needs Codex (pinned and newest) installed and a network namespace"]
fn mail_reaches_a_fresh_idle_codex_within_3_s() {
    for version in versions("codex") {
        // Codex fires no session-start hook on `/clear` (its SessionStart fires at a thread's
        // first prompt): the person's Enter waits the 10 s unseen-submit time. The post comes
        // about 4 s after the Enter, so the notice lands about 6 s after it.
        mail_reaches_a_fresh_idle_agent(
            "codex",
            &version,
            &["--text", "/clear", "--delay-ms", "300", "--key", "Enter"],
            Duration::from_secs(9),
        );
    }
}
