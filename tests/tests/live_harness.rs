//! Live smoke tests: each real harness, at its pinned version, starts in a belfry pane inside a
//! loopback-only network namespace, becomes ready by its profile's rule, takes a prompt through
//! a guarded bracketed paste and Enter, and shows the scripted model's answer on the pane's
//! screen; the model server's log shows the prompt reached the model. Plus the proof that the
//! namespace reaches nothing outside.
//!
//! Gated: `#[ignore]`, because they need the harnesses (`scripts/install-harnesses`, which
//! needs the npm registry) and the privilege to make a network namespace (root, or
//! `scripts/netns-run`). Run them with
//! `cargo test -p belfry-tests --test live_harness -- --ignored --test-threads=1 --nocapture`.
//! A harness that cannot run here fails its test with the reason; none is skipped silently.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use belfry_tests::live::{enter_loopback_namespace, links, Live, LiveOptions, ModelServer};
use belfry_tests::Env;
use serde_json::json;

/// An address outside this machine that any connected host could reach (a public resolver),
/// and the first non-loopback IPv4 address of this host as seen before entering the namespace.
fn outside_addresses() -> Vec<SocketAddr> {
    let mut addresses: Vec<SocketAddr> = vec!["1.1.1.1:443".parse().expect("address")];
    let out = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show", "scope", "global"])
        .output();
    if let Ok(out) = out {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(address) = text
            .split_whitespace()
            .skip_while(|word| *word != "inet")
            .nth(1)
            .and_then(|cidr| cidr.split('/').next())
        {
            if let Ok(ip) = address.parse::<std::net::IpAddr>() {
                addresses.push(SocketAddr::new(ip, 22));
            }
        }
    }
    addresses
}

#[test]
#[ignore = "live: needs the privilege to make a network namespace (root or scripts/netns-run); run with --ignored"]
fn loopback_namespace_reaches_only_loopback() {
    let outside = outside_addresses();
    let how = enter_loopback_namespace().unwrap_or_else(|reason| panic!("{reason}"));
    assert_eq!(links().expect("ip -o link"), vec!["lo".to_string()]);
    for address in &outside {
        let result = TcpStream::connect_timeout(address, Duration::from_secs(2));
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{address} is reachable from inside the namespace ({how})"));
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ENETUNREACH),
            "connecting to {address} from inside failed, but not as unreachable: {err}"
        );
    }
    // Loopback works inside: the model server and belfry's daemon are both reachable.
    let env = Env::new();
    let server = ModelServer::start(env.dir.path(), &json!({"turns": []}));
    TcpStream::connect(("127.0.0.1", server.port)).expect("the model server on 127.0.0.1");
    env.ok(&[
        "new",
        "probe",
        "--size",
        "10x80",
        "--",
        "sh",
        "-c",
        "ip -o link show; echo END-OF-LINKS; sleep 30",
    ]);
    // ip may write a line at a time: the marker after it says every line is on the screen.
    env.wait_screen("probe", "END-OF-LINKS");
    let lines = env.lines("probe");
    let interfaces: Vec<&String> = lines.iter().filter(|line| line.contains(": <")).collect();
    assert_eq!(interfaces.len(), 1, "a pane inside sees only lo: {lines:?}");
    eprintln!(
        "loopback-only namespace ({how}): {} outside addresses unreachable ({outside:?}), 127.0.0.1 reachable, a pane sees only lo",
        outside.len()
    );
}

/// The smoke test of one harness: ready, prompt, answer on screen, prompt in the model's log;
/// then a scripted shell tool call that really runs (its side effect is on disk) and whose
/// output reaches the model (the server sees it in the next request).
fn answers_a_prompt(name: &str) {
    let prompt_marker = format!("LIVE-PROMPT-{name}");
    let answer = format!("LIVE-ANSWER-{name} from the scripted model");
    let tool_marker = format!("LIVE-TOOL-{name}");
    let tool_output = format!("LIVE-TOOL-OUTPUT-{name}");
    let tool_done = format!("LIVE-TOOL-DONE-{name}");
    let script = json!({"turns": [
        {"match": prompt_marker, "text": answer},
        {"match": tool_marker,
         "tool": {"command": format!("echo {tool_output} > tool-output.txt; cat tool-output.txt")},
         "then": {"text": tool_done}}
    ]});
    let live = Live::start(
        name,
        LiveOptions {
            script,
            ..LiveOptions::default()
        },
    );
    let label = live.label();
    let ready_after = live.wait_ready();
    let sent_at = Instant::now();
    let result = live.submit(&format!("{prompt_marker} please answer"));
    assert_eq!(result["result"], "sent", "live {label}: {result}");
    let shown = live.wait(&format!("LIVE-ANSWER-{name}"), None, 60_000);
    assert!(
        shown,
        "live {label}: the scripted answer never showed on the screen\nscreen:\n{}",
        live.screen()
    );
    let answered_after = sent_at.elapsed();
    let turns = live.server.turns();
    let saw_prompt = turns.iter().any(|turn| {
        turn["last_user_text"]
            .as_str()
            .is_some_and(|text| text.contains(&prompt_marker))
    });
    assert!(
        saw_prompt,
        "live {label}: the model server never saw the prompt; turns: {turns:?}"
    );
    let api = turns[0]["api"].as_str().unwrap_or("?").to_string();

    let tool_sent_at = Instant::now();
    live.submit(&format!("{tool_marker} please run the command"));
    let approved = live.wait_approving(&tool_done, 90_000);
    assert!(
        approved.is_some(),
        "live {label}: the tool turn never finished (no {tool_done:?} on screen)\nscreen:\n{}",
        live.screen()
    );
    let tool_after = tool_sent_at.elapsed();
    let written = std::fs::read_to_string(live.work.join("tool-output.txt")).unwrap_or_default();
    assert_eq!(
        written.trim(),
        tool_output,
        "live {label}: the scripted shell command did not run in the work directory"
    );
    let results: Vec<_> = live
        .server
        .requests()
        .into_iter()
        .filter(|request| request["kind"] == "tool-result")
        .collect();
    assert!(
        results
            .iter()
            .any(|request| request["body"].to_string().contains(&tool_output)),
        "live {label}: no request after the tool call carried its output; tool-result requests: {results:?}"
    );
    assert_eq!(
        Some(api.as_str()),
        live.profile.raw["wire_api"].as_str(),
        "live {label}: the harness spoke another API than its profile says"
    );
    println!(
        "live {label}: ready after {} ms, answer on screen {} ms after the send; shell tool ran \
         and its output reached the model, {} ms ({} approval dialogs); {} requests to the model \
         server ({} model turns, {api}); {} s in all",
        ready_after.as_millis(),
        answered_after.as_millis(),
        tool_after.as_millis(),
        approved.unwrap_or(0),
        live.server.requests().len(),
        live.server.turns().len(),
        live.started.elapsed().as_secs()
    );
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn claude_answers_a_prompt_in_a_pane() {
    answers_a_prompt("claude");
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn codex_answers_a_prompt_in_a_pane() {
    answers_a_prompt("codex");
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn opencode_answers_a_prompt_in_a_pane() {
    answers_a_prompt("opencode");
}

/// OpenCode 2.x (`@opencode/cli`, pin `opencode2`, profile adapters/opencode/live-2.json):
/// readiness, an answer and a shell tool call offline, through its private server.
#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn opencode2_answers_a_prompt_in_a_pane() {
    answers_a_prompt("opencode2");
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn pi_answers_a_prompt_in_a_pane() {
    answers_a_prompt("pi");
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn gemini_answers_a_prompt_in_a_pane() {
    answers_a_prompt("gemini");
}

#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn qwen_answers_a_prompt_in_a_pane() {
    answers_a_prompt("qwen");
}

/// The canonical hooks the rich policy reads (`adapters/qwen/declaration.json`'s
/// `activity.needs_hooks`): a prompt submitted, a tool about to run, a turn ended.
const QWEN_TURN_HOOKS: &str = "hook \"turn-started\" { event \"prompt-submit\"; intent \"observe\"; command \"true\"; targets \"qwen\" }\n\
hook \"tool-started\" { event \"before-tool\"; intent \"observe\"; command \"true\"; targets \"qwen\" }\n\
hook \"turn-ended\" { event \"turn-stop\"; intent \"observe\"; command \"true\"; targets \"qwen\" }\n";

/// The `[DING]` notice line of the message `name` (`inbox post`'s answer).
fn notice_of(name: &str) -> String {
    let id = &name[name.len() - 9..name.len() - 3];
    format!("[DING] new message: [id:{id}]")
}

/// spec §7.4, live, Qwen Code 0.24.4 under the rich policy (`turn-boundary+fresh-idle` with
/// `belfry-adapter --provider qwen` and belfry's turn hooks applied): a message posted while
/// the pane is idle with an empty composer is typed in as a notice and reaches the model; a
/// message posted while a human's draft stands in the composer is never typed into it (the
/// draft stays as typed, the model hears nothing) until the draft is gone, and then it is.
#[test]
#[ignore = "live: needs scripts/install-harnesses and a network namespace (run with --ignored)"]
fn qwen_gets_a_notice_when_idle_and_none_into_a_draft() {
    let root = tempfile::tempdir().expect("temp dir");
    let work = root.path().join("work");
    let home = root.path().join("home");
    std::fs::create_dir_all(&work).expect("work");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(work.join("belfry-hooks.kdl"), QWEN_TURN_HOOKS).expect("hooks file");
    let (work_c, home_c) = (work.clone(), home.clone());
    let apply = move || {
        let out = std::process::Command::new(belfry_tests::belfry_bin())
            .args(["hooks", "--dir"])
            .arg(&work_c)
            .arg("apply")
            .current_dir(&work_c)
            .env("HOME", &home_c)
            .env("XDG_CONFIG_HOME", home_c.join(".config"))
            .env("BELFRY_HOOKS_DETECT", "0")
            .output()
            .expect("belfry hooks apply");
        assert!(
            out.status.success(),
            "belfry hooks apply: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let adapter = belfry_tests::bin_dir().join("belfry-adapter");
    let path = format!(
        "{}:{}",
        belfry_tests::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = json!({"turns": [{"match": "LIVE-HELLO", "text": "LIVE-HELLO-ANSWER"},
        {"match": "[DING]", "text": "LIVE-NOTICE-READ"}]});
    let live = Live::start(
        "qwen",
        LiveOptions {
            script,
            extra_env: vec![("PATH".to_string(), path)],
            work: Some(work.clone()),
            home: Some(home.clone()),
            prepare: Some(&apply),
            new_args: vec![
                "--adapter".into(),
                "qwen".into(),
                "--ding-delivery".into(),
                "turn-boundary+fresh-idle".into(),
                "--ding-adapter".into(),
                adapter.display().to_string(),
                "--ding-adapter=--provider".into(),
                "--ding-adapter".into(),
                "qwen".into(),
            ],
            ..LiveOptions::default()
        },
    );
    let label = live.label();
    live.wait_ready();
    // One turn, so the turn-stop hook has told the adapter the agent is idle.
    live.submit("LIVE-HELLO please answer");
    assert!(
        live.wait("LIVE-HELLO-ANSWER", Some(2000), 60_000),
        "live {label}: the first answer never showed\n{}",
        live.screen()
    );
    let heard = |notice: &str| {
        live.server.turns().iter().any(|turn| {
            turn["last_user_text"]
                .as_str()
                .is_some_and(|text| text.contains(notice))
        })
    };

    let idle_posted = Instant::now();
    let first = live
        .env
        .post_mail("qwen", "lead", "while idle", "please look\n");
    let first_notice = notice_of(&first);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !heard(&first_notice) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        heard(&first_notice),
        "live {label}: the notice posted while idle never reached the model\nstatus: {}\nscreen:\n{}",
        live.env.ding_status("qwen"),
        live.screen()
    );
    let idle_after = idle_posted.elapsed();
    assert!(
        live.wait("LIVE-NOTICE-READ", Some(2000), 60_000),
        "live {label}: the notice's turn never ended\n{}",
        live.screen()
    );

    live.guarded_send(&["--text", "a human draft LIVE-DRAFT"]);
    assert!(
        live.wait("LIVE-DRAFT", Some(500), 10_000),
        "live {label}: the draft never showed\n{}",
        live.screen()
    );
    let second = live
        .env
        .post_mail("qwen", "lead", "over a draft", "please look\n");
    let second_notice = notice_of(&second);
    let held_for = Duration::from_secs(10);
    std::thread::sleep(held_for);
    let screen = live.screen();
    let composer = screen
        .lines()
        .find(|line| line.starts_with("> ") && line.contains("LIVE-DRAFT"))
        .unwrap_or_else(|| panic!("live {label}: the draft left the composer\n{screen}"));
    assert!(
        !composer.contains("[DING]") && !heard(&second_notice),
        "live {label}: the notice was typed into the draft: {composer:?}\n{screen}"
    );
    // The human clears the draft (Escape twice, as the composer's hint says); the notice then
    // goes in.
    live.guarded_send(&["--key", "Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    live.guarded_send(&["--key", "Escape"]);
    let cleared = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !heard(&second_notice) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let cleared_after = cleared.elapsed();
    assert!(
        heard(&second_notice),
        "live {label}: the held notice never went in after the draft was cleared\nstatus: {}\nscreen:\n{}",
        live.env.ding_status("qwen"),
        live.screen()
    );
    println!(
        "live {label} (rich policy): the notice posted while idle reached the model {} ms later; \
         over a draft none was typed for {} s (the draft intact); after the draft was cleared the \
         held notice reached the model {} ms later",
        idle_after.as_millis(),
        held_for.as_secs(),
        cleared_after.as_millis()
    );
}
