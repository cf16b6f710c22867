//! spec §7.4: the adapter's `activity` events are valid protocol v1 as the daemon reads them
//! (`belfry_ding::protocol::parse_event`), carry the snapshot's identity and revision, and
//! become idle only through a turn-stop hook, never through the screen.

use std::path::Path;

use belfry_adapter_engine::activity::{
    activity_event, FreshStart, PaneSeen, ProgramView, Turn, TurnSources,
};
use belfry_adapter_engine::{classify, embedded, Screen};
use belfry_ding::protocol::{parse_event, ActivityState, ComposerState, EventBody};
use serde_json::Value;

fn fixture(provider: &str, state: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(provider)
        .join(format!("fixtures/screens/{state}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn events_from_real_snapshots_parse_as_protocol_v1() {
    let cases = [
        ("claude", "idle-empty", ComposerState::Empty),
        ("codex", "draft", ComposerState::Nonempty),
        ("opencode", "permission-dialog", ComposerState::Unknown),
        ("pi", "paste-before-enter", ComposerState::Nonempty),
        ("gemini", "idle-answered", ComposerState::Empty),
        ("qwen", "after-interrupt", ComposerState::Nonempty),
    ];
    for (sequence, (provider, state, composer)) in cases.into_iter().enumerate() {
        let peek = &fixture(provider, state)["peek"];
        let pane = PaneSeen::from_snapshot(peek).unwrap();
        let verdict = classify(
            &embedded::grammar(provider).unwrap(),
            &Screen::from_value(peek).unwrap(),
        );
        let line = activity_event(
            &pane,
            sequence as u64 + 1,
            Turn::Idle,
            "test",
            &verdict,
            750,
        )
        .to_string();
        let event =
            parse_event(&line).unwrap_or_else(|e| panic!("{provider}/{state}: {e}: {line}"));
        assert_eq!(
            event.header.session.as_str(),
            peek["session"].as_str().unwrap()
        );
        assert_eq!(
            event.header.incarnation,
            peek["incarnation"].as_str().unwrap()
        );
        assert_eq!(
            event.header.generation,
            peek["generation"].as_str().unwrap()
        );
        let EventBody::Activity {
            state: got,
            composer: seen,
            valid_for_ms,
            revision,
            reason,
        } = event.body
        else {
            panic!("{provider}/{state}: not an activity event: {line}");
        };
        assert_eq!(got, ActivityState::Idle);
        assert_eq!(seen, composer, "{provider}/{state}");
        assert_eq!(valid_for_ms, Some(750));
        assert_eq!(revision, peek["revision"].as_u64());
        assert!(reason.is_some_and(|r| !r.is_empty()));
    }
}

#[test]
fn only_a_turn_stop_makes_the_turn_idle() {
    let mut turn = Turn::Unknown;
    for hook in [
        "session-start",
        "notification",
        "after-tool",
        "prompt-submit",
        "before-tool",
    ] {
        turn = turn.after(hook);
        assert_ne!(turn, Turn::Idle, "after {hook}");
    }
    assert_eq!(turn, Turn::Active);
    assert_eq!(turn.after("turn-stop"), Turn::Idle);
    assert_eq!(Turn::Idle.after("prompt-submit"), Turn::Active);
    assert_eq!(Turn::Idle.after("before-tool"), Turn::Active);
    assert_eq!(Turn::Idle.after("stop-failure"), Turn::Unknown);
    assert_eq!(Turn::Idle.after("notification"), Turn::Idle);
}

/// An interrupted turn fires no turn-stop (Claude Code's and Codex's Escape): the harness's
/// `interrupt` is its word that the turn ended.
#[test]
fn an_interrupt_ends_the_turn() {
    assert_eq!(Turn::Active.after("interrupt"), Turn::Idle);
    assert_eq!(Turn::Unknown.after("interrupt"), Turn::Idle);
    let mut sources = TurnSources::new();
    sources.hook("prompt-submit");
    sources.hook("interrupt");
    assert_eq!(sources.turn().0, Turn::Idle);
}

#[test]
fn a_child_in_the_foreground_is_child() {
    let mut peek = fixture("claude", "idle-empty")["peek"].clone();
    peek["foreground"]["is_leader"] = Value::Bool(false);
    let pane = PaneSeen::from_snapshot(&peek).unwrap();
    let verdict = classify(
        &embedded::grammar("claude").unwrap(),
        &Screen::from_value(&peek).unwrap(),
    );
    let line = activity_event(&pane, 1, Turn::Idle, "test", &verdict, 500).to_string();
    let EventBody::Activity { state, .. } = parse_event(&line).unwrap().body else {
        panic!("not activity");
    };
    assert_eq!(state, ActivityState::Child);
}

fn program(state: &str, since: u64) -> Option<ProgramView> {
    Some(ProgramView {
        state: state.to_string(),
        kind: (state == "blocked").then(|| "permission".to_string()),
        since,
    })
}

/// Issue 40 item 3: a harness that reports `idle` of itself is idle with no hook ever fired
/// (a fresh start), `working` and `blocked` are active whatever the hooks said, and `done` or
/// `error` leave the hooks to say.
#[test]
fn a_program_status_idle_is_a_turn_state_like_a_turn_stop() {
    let mut sources = TurnSources::new();
    sources.next_look();
    sources.program(None);
    assert_eq!(sources.turn().0, Turn::Unknown, "nothing said yet");
    sources.program(program("idle", 1));
    assert_eq!(sources.turn().0, Turn::Idle, "a fresh start reported idle");
    sources.next_look();
    sources.program(program("working", 2));
    let (turn, why) = sources.turn();
    assert_eq!(turn, Turn::Active);
    assert!(why.contains("working"), "{why}");
    sources.hook("turn-stop");
    assert_eq!(
        sources.turn().0,
        Turn::Active,
        "working outweighs a turn-stop"
    );
    sources.next_look();
    sources.program(program("blocked", 3));
    let (turn, why) = sources.turn();
    assert_eq!(turn, Turn::Active);
    assert!(why.contains("blocked (permission)"), "{why}");
    sources.next_look();
    sources.program(program("done", 4));
    assert_eq!(
        sources.turn().0,
        Turn::Idle,
        "done leaves it to the turn-stop hook"
    );
    sources.next_look();
    sources.program(program("error", 5));
    sources.hook("prompt-submit");
    assert_eq!(sources.turn().0, Turn::Active);
}

/// The later statement wins, and two first seen in one look resolve to busy: a prompt submit
/// seen after the program's idle makes it active until the program speaks again.
#[test]
fn a_turn_start_hook_after_a_program_idle_is_active_until_the_program_speaks_again() {
    let mut sources = TurnSources::new();
    sources.next_look();
    sources.program(program("idle", 1));
    sources.next_look();
    sources.hook("prompt-submit");
    sources.program(program("idle", 1));
    assert_eq!(sources.turn().0, Turn::Active, "the hook is newer");
    sources.next_look();
    sources.program(program("idle", 1));
    assert_eq!(
        sources.turn().0,
        Turn::Active,
        "the same idle is no new statement"
    );
    sources.next_look();
    sources.hook("before-tool");
    sources.program(program("idle", 9));
    assert_eq!(sources.turn().0, Turn::Active, "one look: busy wins");
    sources.next_look();
    sources.program(program("idle", 10));
    assert_eq!(sources.turn().0, Turn::Idle, "a newer idle");
    sources.next_look();
    sources.hook("session-start");
    assert_eq!(
        sources.turn().0,
        Turn::Idle,
        "an unknown hook is no turn start"
    );
}

/// Issue 40 item 4: a busy row on the screen makes the event `active` whatever the turn said,
/// and never makes a pane idle.
#[test]
fn a_busy_screen_row_vetoes_an_idle_turn() {
    let peek = fixture("claude", "streaming")["peek"].clone();
    let pane = PaneSeen::from_snapshot(&peek).unwrap();
    let grammar = embedded::grammar("claude").unwrap();
    let verdict = classify(&grammar, &Screen::from_value(&peek).unwrap());
    assert_eq!(verdict.busy.as_deref(), Some("esc-to-interrupt"));
    for turn in [Turn::Idle, Turn::Unknown, Turn::Active] {
        let line = activity_event(&pane, 1, turn, "test", &verdict, 500).to_string();
        let EventBody::Activity { state, reason, .. } = parse_event(&line).unwrap().body else {
            panic!("not activity");
        };
        assert_eq!(state, ActivityState::Active, "{turn:?}");
        assert!(reason.unwrap().contains("busy row"));
    }
    let idle = fixture("claude", "idle-empty")["peek"].clone();
    let verdict = classify(&grammar, &Screen::from_value(&idle).unwrap());
    assert_eq!(verdict.busy, None);
    let line = activity_event(&pane, 1, Turn::Unknown, "test", &verdict, 500).to_string();
    let EventBody::Activity { state, .. } = parse_event(&line).unwrap().body else {
        panic!("not activity");
    };
    assert_eq!(
        state,
        ActivityState::Unknown,
        "the screen never grants an idle"
    );
}

/// The activity event's state for `turn` (after a declared fresh start is settled with the
/// screen, as `belfry-adapter` does) on `provider`'s fixture `state`, via the daemon's parser.
fn fresh_event_state(
    provider: &str,
    state: &str,
    peek: &Value,
    sources: &TurnSources,
) -> ActivityState {
    let fresh = embedded::fresh_start(provider)
        .unwrap()
        .unwrap_or_else(|| panic!("{provider} declares a fresh start"));
    let pane = PaneSeen::from_snapshot(peek).unwrap();
    let screen = Screen::from_value(peek).unwrap();
    let verdict = classify(&embedded::grammar(provider).unwrap(), &screen);
    let (turn, why) = match sources.turn() {
        (Turn::Fresh, _) => fresh.settle(&screen.lines, &verdict),
        other => other,
    };
    let line = activity_event(&pane, 1, turn, &why, &verdict, 500).to_string();
    let EventBody::Activity { state: got, .. } = parse_event(&line)
        .unwrap_or_else(|e| panic!("{provider}/{state}: {e}: {line}"))
        .body
    else {
        panic!("{provider}/{state}: not activity: {line}");
    };
    got
}

fn declared_sources(provider: &str) -> Vec<String> {
    embedded::fresh_start(provider)
        .unwrap()
        .map_or(Vec::new(), |fresh| fresh.sources)
}

/// Issue 40: a harness with no program status says it waits for input only by a session start
/// whose source its adapter declares (`fresh_start` in declaration.json). With the declared
/// ready screen and a provably empty composer that start is idle, as a turn-stop is; on any
/// other screen it proves nothing.
#[test]
fn a_declared_session_start_is_idle_only_on_the_ready_screen_with_an_empty_composer() {
    for provider in ["gemini", "pi"] {
        for source in ["startup", "clear"] {
            let mut sources = TurnSources::with_fresh_start(&declared_sources(provider));
            sources.next_look();
            sources.hook_with_source("session-start", Some(source));
            assert_eq!(sources.turn().0, Turn::Fresh, "{provider} {source}");
            let idle = &fixture(provider, "idle-empty")["peek"];
            assert_eq!(
                fresh_event_state(provider, "idle-empty", idle, &sources),
                ActivityState::Idle,
                "{provider} {source}"
            );
            // A draft in the composer: not provably empty, so unknown (not idle).
            let draft = &fixture(provider, "draft")["peek"];
            assert_eq!(
                fresh_event_state(provider, "draft", draft, &sources),
                ActivityState::Unknown,
                "{provider} {source}"
            );
            // The ready screen not (yet) drawn: the same start proves nothing.
            let mut blank = idle.clone();
            let rows = blank["lines"].as_array().unwrap().len();
            blank["lines"] = Value::Array(vec![Value::String(String::new()); rows]);
            blank.as_object_mut().unwrap().remove("cells");
            assert_eq!(
                fresh_event_state(provider, "blank", &blank, &sources),
                ActivityState::Unknown,
                "{provider} {source}"
            );
        }
    }
}

/// The screen may veto a fresh start as any idle: a busy row keeps the pane active.
#[test]
fn a_busy_screen_vetoes_a_declared_fresh_start() {
    let mut sources = TurnSources::with_fresh_start(&declared_sources("gemini"));
    sources.hook_with_source("session-start", Some("startup"));
    let running = &fixture("gemini", "tool-running")["peek"];
    assert_eq!(
        fresh_event_state("gemini", "tool-running", running, &sources),
        ActivityState::Active
    );
}

/// A later prompt submit or tool event voids a fresh start; a session start that arrives
/// while a turn is seen running (a harness started with a prompt) grants nothing; a source
/// the adapter does not declare, or no source, stays unknown; and an adapter that declares no
/// fresh start reads every session start as unknown, as before.
#[test]
fn a_fresh_start_is_voided_by_a_turn_and_never_granted_by_an_undeclared_source() {
    let declared = declared_sources("pi");
    assert_eq!(declared, ["startup", "clear"]);
    for later in ["prompt-submit", "before-tool", "after-tool"] {
        let mut sources = TurnSources::with_fresh_start(&declared);
        sources.hook_with_source("session-start", Some("startup"));
        sources.next_look();
        sources.hook(later);
        assert_eq!(sources.turn().0, Turn::Active, "after {later}");
    }
    let mut sources = TurnSources::with_fresh_start(&declared);
    sources.hook("prompt-submit");
    sources.hook_with_source("session-start", Some("startup"));
    // The start says nothing of the running turn: unknown, as every session start was before.
    assert_eq!(sources.turn().0, Turn::Unknown, "a turn already running");
    sources.hook("turn-stop");
    sources.hook_with_source("session-start", Some("clear"));
    assert_eq!(
        sources.turn().0,
        Turn::Fresh,
        "a clear after the turn ended"
    );
    for source in [
        Some("resume"),
        Some("reload"),
        Some("fork"),
        Some("belfry-host"),
        None,
    ] {
        let mut sources = TurnSources::with_fresh_start(&declared);
        sources.hook_with_source("session-start", source);
        assert_eq!(sources.turn().0, Turn::Unknown, "{source:?}");
    }
    for provider in ["claude", "codex", "opencode", "qwen"] {
        assert!(
            embedded::fresh_start(provider).unwrap().is_none(),
            "{provider} declares a fresh start nobody proved"
        );
        let mut sources = TurnSources::with_fresh_start(&declared_sources(provider));
        sources.hook_with_source("session-start", Some("startup"));
        assert_eq!(sources.turn().0, Turn::Unknown, "{provider}");
    }
}

/// A `fresh_start` that cannot be checked is an error naming the declaration, never half-read.
#[test]
fn a_fresh_start_declaration_that_cannot_be_checked_is_refused_with_its_origin() {
    let ok = r#"{"readiness": {"screen": "ready"}, "fresh_start": {"sources": ["startup"],
        "prompt_args": {"flags": ["-i"], "positional": false}}}"#;
    let fresh = FreshStart::from_declaration("x.json", ok).unwrap().unwrap();
    assert!(fresh.counts(Some("startup")) && !fresh.counts(Some("clear")) && !fresh.counts(None));
    assert!(
        FreshStart::from_declaration("x.json", r#"{"readiness": {}}"#)
            .unwrap()
            .is_none()
    );
    for bad in [
        r#"{"fresh_start": {"sources": ["startup"]}}"#,
        r#"{"readiness": {"screen": "("}, "fresh_start": {"sources": ["startup"]}}"#,
        r#"{"readiness": {"screen": "r"}, "fresh_start": {"sources": []}}"#,
        r#"{"readiness": {"screen": "r"}, "fresh_start": {"sources": [1]}}"#,
        r#"{"readiness": {"screen": "r"}, "fresh_start": {}}"#,
        r#"{"readiness": {"screen": "r"}, "fresh_start": {"sources": ["clear"], "prompt_args": {"flags": [1], "positional": true}}}"#,
        r#"{"readiness": {"screen": "r"}, "fresh_start": {"sources": ["clear"], "prompt_args": {"positional": "yes"}}}"#,
        "not json",
    ] {
        let err = FreshStart::from_declaration("x.json", bad)
            .err()
            .unwrap_or_else(|| panic!("accepted {bad}"));
        assert!(err.to_string().contains("x.json"), "{err}");
    }
}

/// A program started with a prompt runs that turn from its start, and its `startup` session
/// start may reach belfry before the prompt's own submit (Gemini CLI 0.61.0 with `-i`, live:
/// 186 ms before): then `startup` is no fresh start, nor when the arguments are not known; a
/// `clear` still is. Each adapter's `prompt_args` say how its harness takes a prompt.
#[test]
fn a_program_started_with_a_prompt_has_no_startup_fresh_start() {
    let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    let gemini = embedded::fresh_start("gemini").unwrap().unwrap();
    let pi = embedded::fresh_start("pi").unwrap().unwrap();
    for (fresh, quiet, prompted) in [
        (&gemini, vec![], vec!["-i", "do it"]),
        (
            &gemini,
            vec!["-m", "a-model"],
            vec!["--prompt-interactive=do it"],
        ),
        (&gemini, vec!["--yolo"], vec!["do it"]),
        (&gemini, vec!["-e", "ext"], vec!["-m", "x", "do it"]),
        (
            &pi,
            vec!["--offline", "--provider", "mock", "--model", "m"],
            vec!["--model", "m", "do it"],
        ),
        (
            &pi,
            vec!["--append-system-prompt", "charter.md"],
            vec!["@task.md"],
        ),
        (&pi, vec!["-e", "ext.ts"], vec!["--", "-starts-with-a-dash"]),
    ] {
        assert_eq!(
            fresh.sources_for(Some(&args(&quiet))),
            ["startup", "clear"],
            "{quiet:?}"
        );
        assert_eq!(
            fresh.sources_for(Some(&args(&prompted))),
            ["clear"],
            "{prompted:?}"
        );
        assert_eq!(fresh.sources_for(None), ["clear"], "arguments not known");
    }
    // A `startup` fresh start must say how a prompt is given.
    let missing = r#"{"readiness": {"screen": "r"}, "fresh_start": {"sources": ["startup"]}}"#;
    assert!(FreshStart::from_declaration("x.json", missing).is_err());
    let clear_only = r#"{"readiness": {"screen": "r"}, "fresh_start": {"sources": ["clear"]}}"#;
    assert!(FreshStart::from_declaration("x.json", clear_only)
        .unwrap()
        .is_some());
}
