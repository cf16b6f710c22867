//! Real-screen fixtures (issue 10, item 4): each real harness, in a belfry pane against the
//! scripted model server inside a loopback-only namespace, is driven through the states an
//! activity adapter must tell apart, and each state's screen is captured with
//! `belfry peek --json --cells` into `adapters/<name>/fixtures/screens/<state>.json`, naming the
//! harness and its version. `index.json` beside them lists the states captured and, for each
//! one not captured, why.
//!
//! The states, in the order one run reaches them: `idle-empty` (ready, empty composer),
//! `paste-before-enter` (a bracketed paste not yet submitted), `after-submit` (Enter pressed a
//! moment ago), `streaming` (the scripted answer arriving a word every 300 ms), `idle-answered`
//! (the turn over), `permission-dialog` (a shell command awaiting approval, where the harness
//! asks), `tool-running` (the approved command running), `api-error` (the model API answered
//! 400), `queued-message` (a prompt submitted while a turn streams), `after-interrupt` (the
//! profile's interrupt keys pressed then), `draft` (text typed, not submitted).
//!
//! Gated like the smoke tests, and not run by CI: it rewrites the fixtures in the source tree.
//! Regenerate them with
//! `cargo test -p belfry-tests --test live_screens -- --ignored --test-threads=1 --nocapture`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use belfry_tests::live::{workspace, Live, LiveOptions, Pin, Profile};
use serde_json::{json, Value};

/// The streamed answer: paragraphs, because a harness may draw a paragraph only once it ends.
const STREAMED: &str = "streaming words arrive\n\none at a time\n\nso that the screen shows\n\n\
                        a turn in progress\n\nfor several seconds\n\nbefore it ends\n\n\
                        LIVE-STREAM-END";

/// The scripted shell command: it marks its start in the work directory, then runs long enough
/// to be seen running.
const TOOL_COMMAND: &str = "touch tool-started; sleep 6; echo slept";

/// The slow answer a second prompt is queued behind; its first words appear nowhere earlier.
const STREAMED_SLOWLY: &str =
    "slowly arriving words\n\nof a long answer\n\nthat a queued message\n\n\
                               waits behind\n\nuntil it ends\n\nor is interrupted\n\nLIVE-LONG-END";

/// The message of the scripted API error (a 400: no harness retries it).
const API_ERROR: &str = "LIVE-API-ERROR scripted by the test";

/// The fixtures one run writes, and what it could not capture.
struct Capture<'a> {
    live: &'a Live,
    dir: PathBuf,
    captured: Vec<Value>,
    missing: Vec<Value>,
}

impl Capture<'_> {
    fn take(&mut self, state: &str, description: &str) {
        let peek = self.live.peek_cells();
        let fixture = json!({
            "harness": self.live.profile.raw["harness"],
            "harness_version": self.live.pin.version,
            "package": self.live.pin.package,
            "state": state,
            "description": description,
            "captured_by": "tests/tests/live_screens.rs (belfry peek --json --cells, loopback-only namespace, tools/model-server)",
            "size": "40x120",
            "peek": peek,
        });
        let path = self.dir.join(format!("{state}.json"));
        let text = serde_json::to_string_pretty(&fixture).expect("JSON") + "\n";
        std::fs::write(&path, text)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
        eprintln!("live {}: captured {state}", self.live.label());
        self.captured
            .push(json!({"state": state, "description": description}));
    }

    fn miss(&mut self, state: &str, reason: &str) {
        eprintln!("live {}: NOT captured {state}: {reason}", self.live.label());
        self.missing.push(json!({"state": state, "reason": reason}));
    }

    fn write_index(&self) {
        let index = json!({
            "harness": self.live.profile.raw["harness"],
            "harness_version": self.live.pin.version,
            "captured": self.captured,
            "not_captured": self.missing,
        });
        let path = self.dir.join("index.json");
        let text = serde_json::to_string_pretty(&index).expect("JSON") + "\n";
        std::fs::write(&path, text)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    }
}

/// Polls until `check` holds or `limit` passes.
fn until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn capture_screens(name: &str) {
    let pin = Pin::load(name);
    let profile = Profile::for_pin(&pin);
    // The tool call: the shell command in whichever shell tool the harness offers, or the
    // profile's own call where only a particular one raises an approval dialog.
    let tool = match &profile.raw["capture_tool"] {
        Value::Null => json!({"command": TOOL_COMMAND}),
        call => json!({"name": call["name"], "input": call["input"]}),
    };
    let script = json!({"turns": [
        {"match": "LIVE-STREAM", "text": STREAMED, "delay_ms": 300},
        {"match": "LIVE-SLEEP", "tool": tool, "then": {"text": "LIVE-SLEEP-DONE"}},
        {"match": "LIVE-ERROR", "error": {"status": 400, "message": API_ERROR}},
        {"match": "LIVE-QUEUED", "text": "LIVE-QUEUED-ANSWER"},
        {"match": "LIVE-LONG", "text": STREAMED_SLOWLY, "delay_ms": 600}
    ]});
    // Environment that makes the harness ask before a shell command, where it does not by
    // default.
    let extra_env: Vec<(String, String)> = profile.raw["capture_env"]
        .as_object()
        .map(|vars| {
            vars.iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let live = Live::start(
        name,
        LiveOptions {
            script,
            extra_env,
            ..LiveOptions::default()
        },
    );
    let label = live.label();
    // A pin of a second major (profile `live-N.json`) keeps its screens in `screens-N`.
    let screens = match pin
        .profile
        .strip_prefix("live-")
        .and_then(|p| p.strip_suffix(".json"))
    {
        Some(major) => format!("fixtures/screens-{major}"),
        None => "fixtures/screens".to_string(),
    };
    let dir = workspace()
        .join("adapters")
        .join(&pin.adapter)
        .join(screens);
    std::fs::create_dir_all(&dir).expect("fixtures dir");
    let mut capture = Capture {
        live: &live,
        dir,
        captured: Vec::new(),
        missing: Vec::new(),
    };

    live.wait_ready();
    capture.take("idle-empty", "ready, the composer empty");

    live.guarded_send(&["--paste", "LIVE-STREAM please stream an answer"]);
    assert!(
        live.wait("LIVE-STREAM please", Some(500), 10_000),
        "live {label}: the paste never showed in the composer\n{}",
        live.screen()
    );
    capture.take(
        "paste-before-enter",
        "a bracketed paste in the composer, Enter not yet pressed",
    );

    live.guarded_send(&["--key", "Enter"]);
    std::thread::sleep(Duration::from_millis(300));
    capture.take(
        "after-submit",
        "300 ms after Enter submitted the pasted prompt",
    );

    if live.wait("streaming words", None, 30_000) && !live.wait("LIVE-STREAM-END", None, 1) {
        capture.take(
            "streaming",
            "the scripted answer arriving, one word every 300 ms",
        );
    } else {
        capture.miss(
            "streaming",
            "the answer's first words did not show while it was still streaming",
        );
    }
    assert!(
        live.wait("LIVE-STREAM-END", Some(1000), 60_000),
        "live {label}: the streamed answer never finished on screen\n{}",
        live.screen()
    );
    capture.take(
        "idle-answered",
        "the turn over, the answer on screen, the composer empty",
    );

    live.submit("LIVE-SLEEP please run the command");
    let started = live.work.join("tool-started");
    let dialog = live.profile.dialog_regex();
    let mut dialog_seen = false;
    let ran = until(Duration::from_secs(45), || {
        if started.exists() {
            return true;
        }
        if let Some(regex) = &dialog {
            if !dialog_seen && live.wait(regex, None, 1) {
                dialog_seen = true;
                // Let the dialog finish drawing before the capture.
                live.wait(regex, Some(500), 5_000);
                capture.take(
                    "permission-dialog",
                    "a scripted shell command awaiting the user's approval",
                );
                let keys = live.profile.dialog_approve_keys();
                let mut steps: Vec<&str> = Vec::new();
                for key in &keys {
                    steps.extend(["--key", key.as_str()]);
                }
                live.guarded_send(&steps);
            }
        }
        false
    });
    if !dialog_seen {
        let reason = live.profile.raw["no_dialog"]
            .as_str()
            .unwrap_or("the harness ran the command without asking")
            .to_string();
        capture.miss("permission-dialog", &reason);
    }
    if ran {
        std::thread::sleep(Duration::from_millis(1000));
        capture.take(
            "tool-running",
            "the scripted shell command (sleep 6) running",
        );
    } else {
        capture.miss(
            "tool-running",
            &format!(
                "the scripted command never started\nscreen:\n{}",
                live.screen()
            ),
        );
    }
    let done = live.wait("LIVE-SLEEP-DONE", Some(1000), 60_000);
    if !done {
        capture.miss(
            "draft",
            "the tool turn never finished, so no idle composer to type a draft into",
        );
        capture.write_index();
        panic!(
            "live {label}: the tool turn never finished\n{}",
            live.screen()
        );
    }

    later_states(&live, &mut capture);

    live.guarded_send(&["--text", "a human draft LIVE-DRAFT"]);
    assert!(
        live.wait("LIVE-DRAFT", Some(500), 10_000),
        "live {label}: the typed draft never showed\n{}",
        live.screen()
    );
    capture.take(
        "draft",
        "text typed into the composer after the interrupt, not submitted (a harness that put \
         the interrupted queued message back into the composer holds both)",
    );
    capture.write_index();
    println!(
        "live {label}: captured {} screens, {} not captured",
        capture.captured.len(),
        capture.missing.len()
    );
}

/// The states after the tool turn: an API error, a message queued while a turn streams, and
/// the screen after an interrupt (the profile's `interrupt` keys). None of them fails the run:
/// a state not reached is recorded with the reason, and the run goes on to the draft.
fn later_states(live: &Live, capture: &mut Capture) {
    let interrupt: Vec<String> = live.profile.raw["interrupt"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_else(|| vec!["--key".into(), "Escape".into()]);
    let interrupt: Vec<&str> = interrupt.iter().map(String::as_str).collect();

    live.submit("LIVE-ERROR please fail");
    // No quiet period: a harness that retries keeps a spinner going under the message.
    if live.wait("LIVE-API-ERROR", None, 30_000) {
        std::thread::sleep(Duration::from_millis(700));
        capture.take(
            "api-error",
            "the model API answered 400 with a scripted message",
        );
    } else {
        capture.miss(
            "api-error",
            "the scripted API error's message never showed on the screen within 30 s",
        );
    }
    // Back to an idle composer before the next prompt; a harness still retrying is
    // interrupted.
    if !live.wait(&live.profile.ready_regex(), Some(1000), 15_000) {
        live.guarded_send(&interrupt);
        live.wait(&live.profile.ready_regex(), Some(1000), 30_000);
    }

    live.submit("LIVE-LONG please stream slowly");
    if !live.wait("slowly arriving", None, 30_000) {
        capture.miss("queued-message", "the slow answer never started streaming");
        capture.miss("after-interrupt", "the slow answer never started streaming");
        return;
    }
    live.submit("LIVE-QUEUED a message typed while the turn runs");
    std::thread::sleep(Duration::from_millis(700));
    capture.take(
        "queued-message",
        "a second prompt pasted and submitted while the first answer streams",
    );
    live.guarded_send(&interrupt);
    live.wait(".", Some(1500), 10_000);
    capture.take(
        "after-interrupt",
        "after the interrupt keys, pressed while the slow answer streamed with a queued message",
    );
    // Whatever the harness does with the queued message, let it settle into an idle composer.
    live.wait(&live.profile.ready_regex(), Some(2000), 60_000);
}

#[test]
#[ignore = "live: rewrites adapters/claude/fixtures/screens (run with --ignored)"]
fn claude_screens() {
    capture_screens("claude");
}

#[test]
#[ignore = "live: rewrites adapters/codex/fixtures/screens (run with --ignored)"]
fn codex_screens() {
    capture_screens("codex");
}

#[test]
#[ignore = "live: rewrites adapters/opencode/fixtures/screens (run with --ignored)"]
fn opencode_screens() {
    capture_screens("opencode");
}

#[test]
#[ignore = "live: rewrites adapters/opencode/fixtures/screens-2 (run with --ignored)"]
fn opencode2_screens() {
    capture_screens("opencode2");
}

#[test]
#[ignore = "live: rewrites adapters/pi/fixtures/screens (run with --ignored)"]
fn pi_screens() {
    capture_screens("pi");
}

#[test]
#[ignore = "live: rewrites adapters/pi/fixtures/screens-1 (run with --ignored)"]
fn pi1_screens() {
    capture_screens("pi1");
}

#[test]
#[ignore = "live: rewrites adapters/gemini/fixtures/screens (run with --ignored)"]
fn gemini_screens() {
    capture_screens("gemini");
}

#[test]
#[ignore = "live: rewrites adapters/qwen/fixtures/screens (run with --ignored)"]
fn qwen_screens() {
    capture_screens("qwen");
}
