//! spec §7.4: the adapter's `activity` events are valid protocol v1 as the daemon reads them
//! (`belfry_ding::protocol::parse_event`), carry the snapshot's identity and revision, and
//! become idle only through a turn-stop hook, never through the screen.

use std::path::Path;

use belfry_adapter_engine::activity::{activity_event, PaneSeen, Turn};
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
    ];
    for (sequence, (provider, state, composer)) in cases.into_iter().enumerate() {
        let peek = &fixture(provider, state)["peek"];
        let pane = PaneSeen::from_snapshot(peek).unwrap();
        let verdict = classify(
            &embedded::grammar(provider).unwrap(),
            &Screen::from_value(peek).unwrap(),
        );
        let line =
            activity_event(&pane, sequence as u64 + 1, Turn::Idle, &verdict, 750).to_string();
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

#[test]
fn a_child_in_the_foreground_is_child() {
    let mut peek = fixture("claude", "idle-empty")["peek"].clone();
    peek["foreground"]["is_leader"] = Value::Bool(false);
    let pane = PaneSeen::from_snapshot(&peek).unwrap();
    let verdict = classify(
        &embedded::grammar("claude").unwrap(),
        &Screen::from_value(&peek).unwrap(),
    );
    let line = activity_event(&pane, 1, Turn::Idle, &verdict, 500).to_string();
    let EventBody::Activity { state, .. } = parse_event(&line).unwrap().body else {
        panic!("not activity");
    };
    assert_eq!(state, ActivityState::Child);
}
