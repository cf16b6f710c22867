//! Issue 41: DING on a real OpenCode of each admitted major (pins `opencode`: 1.18.33,
//! `opencode2`: `@opencode/cli` 2.2.5), under the rich policy the A/B evaluation's rich arm
//! uses (`turn-boundary+fresh-idle`, the activity adapter `belfry-adapter --provider opencode`,
//! the example hook file applied): a message posted while the pane is idle with an empty
//! composer reaches the model as a notice; a message posted while the human has a draft in
//! the composer never touches the draft (the screen keeps it, the model never sees it, no
//! notice is typed into it) and reaches the model only after the human submitted the draft.
//!
//! Each run is one real harness in one belfry pane inside a loopback-only network namespace
//! against the scripted model server (`tests/src/live.rs`). Gated (`#[ignore]`): run with
//! `BELFRY_HARNESS_DIR=… cargo test -p belfry-tests --test ding_opencode_live -- --ignored
//! --test-threads=1 --nocapture`.

use std::time::{Duration, Instant};

use belfry_tests::bin_dir;
use belfry_tests::live::{Live, LiveOptions, Pin};
use serde_json::json;

/// The rich policy's token (as in tests/tests/ab_eval.rs).
const RICH: &str = "turn-boundary+fresh-idle";

/// The text of the model requests so far that carry a DING notice.
fn notices_seen(live: &Live) -> Vec<String> {
    live.server
        .turns()
        .iter()
        .filter_map(|turn| turn["last_user_text"].as_str().map(String::from))
        .filter(|text| text.contains("[DING]"))
        .collect()
}

/// Waits up to `limit` for `check`, looking every 250 ms.
fn until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    check()
}

fn post(live: &Live, subject: &str) {
    let body = live.work.join("../ding-body.md");
    std::fs::write(&body, "A message for the live DING test; nothing to do.\n")
        .unwrap_or_else(|err| panic!("{err}"));
    let out = live.env.run(&[
        "inbox",
        "post",
        &live.session,
        "--from",
        "lead",
        "--subject",
        subject,
        &body.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "inbox post: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn notice_waits_for_idle_and_never_touches_a_draft(key: &'static str) {
    let pin = Pin::load(key);
    let adapter = pin.adapter.clone();
    let script = json!({"turns": [
        {"match": "[DING]", "text": "NOTICE-SEEN"},
        {"match": "LIVE-FIRST", "text": "FIRST-DONE"},
        {"match": "LIVE-DRAFT", "text": "DRAFT-DONE"}
    ]});
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let (work, home) = (root.path().join("work"), root.path().join("home"));
    std::fs::create_dir_all(&work).unwrap_or_else(|err| panic!("{err}"));
    std::fs::create_dir_all(&home).unwrap_or_else(|err| panic!("{err}"));
    let (work_c, home_c, adapter_c) = (work.clone(), home.clone(), adapter.clone());
    let apply_hooks = move || {
        let kdl = belfry_tests::live::workspace()
            .join("examples")
            .join(&adapter_c)
            .join("belfry-hooks.kdl");
        std::fs::copy(&kdl, work_c.join("belfry-hooks.kdl")).expect("copy the hooks file");
        let apply = std::process::Command::new(belfry_tests::belfry_bin())
            .args(["hooks", "--dir"])
            .arg(&work_c)
            .args(["apply", "--trust"])
            .current_dir(&work_c)
            .env("HOME", &home_c)
            .env("XDG_CONFIG_HOME", home_c.join(".config"))
            .env("BELFRY_HOOKS_DETECT", "0")
            .output()
            .expect("belfry hooks apply");
        assert!(
            apply.status.success(),
            "belfry hooks apply: {}",
            String::from_utf8_lossy(&apply.stdout)
        );
    };
    let adapter_bin = bin_dir().join("belfry-adapter");
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let live = Live::start(
        key,
        LiveOptions {
            script,
            extra_env: vec![
                ("PATH".into(), path),
                (
                    "BELFRY_DISPATCH_LOG".into(),
                    root.path().join("dispatch.ndjson").display().to_string(),
                ),
            ],
            work: Some(work),
            home: Some(home),
            prepare: Some(&apply_hooks),
            new_args: vec![
                "--adapter".into(),
                adapter.clone(),
                "--ding-delivery".into(),
                RICH.into(),
                "--ding-adapter".into(),
                adapter_bin.display().to_string(),
                "--ding-adapter=--provider".into(),
                "--ding-adapter".into(),
                adapter,
            ],
            ..LiveOptions::default()
        },
    );
    let label = live.label();
    live.wait_ready();
    // With a plugin loaded, a prompt submitted on the first placeholder frame was lost 2 times
    // in 2 runs on 2.2.5 (the composer kept it; no hook, no model request in 60 s); 10 s later
    // it went through. The human starts when the TUI has settled.
    std::thread::sleep(Duration::from_secs(10));
    // A first human turn, so the pane has been through a real turn stop.
    live.submit("LIVE-FIRST please answer");
    assert!(
        live.wait("FIRST-DONE", Some(1000), 60_000),
        "live {label}: the first turn never ended\n{}\ndispatch calls:\n{}",
        live.screen(),
        std::fs::read_to_string(root.path().join("dispatch.ndjson")).unwrap_or_default()
    );

    // Idle, composer empty: the notice reaches the model.
    let posted = Instant::now();
    post(&live, "idle-001");
    let reached = until(Duration::from_secs(60), || !notices_seen(&live).is_empty());
    assert!(
        reached,
        "live {label}: a message posted to an idle pane never reached the model\n{}",
        live.screen()
    );
    let idle_ms = posted.elapsed().as_millis();
    assert!(
        live.wait("NOTICE-SEEN", Some(1000), 60_000),
        "live {label}: the notice's turn never ended\n{}",
        live.screen()
    );
    let seen_before = notices_seen(&live).len();
    let ding_rows = |screen: &str| screen.lines().filter(|l| l.contains("[DING]")).count();
    let rows_before = ding_rows(&live.screen());

    // A draft in the composer: the notice waits, and the draft is never touched.
    let draft = "LIVE-DRAFT a note the human is still writing";
    let out = live
        .env
        .run(&["send", live.session.as_str(), "--text", draft]);
    assert!(out.status.success(), "live {label}: typing the draft");
    assert!(
        live.wait("LIVE-DRAFT a note", Some(500), 10_000),
        "live {label}: the draft never showed\n{}",
        live.screen()
    );
    post(&live, "draft-002");
    std::thread::sleep(Duration::from_secs(15));
    let screen = live.screen();
    assert!(
        screen
            .lines()
            .any(|line| line.trim_start_matches([' ', '┃']).trim_end() == draft)
            && ding_rows(&screen) == rows_before,
        "live {label}: the draft was touched while a notice waited\n{screen}"
    );
    assert_eq!(
        notices_seen(&live).len(),
        seen_before,
        "live {label}: a notice reached the model while the human's draft was in the composer"
    );
    assert!(
        !live.server.turns().iter().any(|turn| turn["last_user_text"]
            .as_str()
            .is_some_and(|text| text.contains("LIVE-DRAFT"))),
        "live {label}: the draft reached the model, though the human never submitted it"
    );

    // The human submits the draft; the waiting notice follows on its own.
    let out = live
        .env
        .run(&["send", live.session.as_str(), "--key", "Enter"]);
    assert!(out.status.success(), "live {label}: submitting the draft");
    let after = until(Duration::from_secs(90), || {
        notices_seen(&live).len() > seen_before
    });
    assert!(
        after,
        "live {label}: the notice that waited behind the draft never reached the model\n{}",
        live.screen()
    );
    let merged = live.server.turns().iter().any(|turn| {
        turn["last_user_text"]
            .as_str()
            .is_some_and(|text| text.contains("LIVE-DRAFT") && text.contains("[DING]"))
    });
    println!(
        "live {label}: an idle pane's notice reached the model {idle_ms} ms after the post; \
         a notice posted over a draft waited 15 s without touching it and followed the \
         submitted draft{}; {} model requests",
        if merged {
            " (its context rode the draft's own prompt: the prompt-submit hook)"
        } else {
            ""
        },
        live.server.requests().len()
    );
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn opencode2_a_notice_reaches_an_idle_pane_and_never_a_draft() {
    notice_waits_for_idle_and_never_touches_a_draft("opencode2");
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn opencode_a_notice_reaches_an_idle_pane_and_never_a_draft() {
    notice_waits_for_idle_and_never_touches_a_draft("opencode");
}
