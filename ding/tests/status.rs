//! `belfry ding status` output, as snapshots (spec §7.4: a permanently held agent is visible).

use belfry_ding::ownership::DeliveryState;
use belfry_ding::policy::RICH_POLICY_TOKEN;
use belfry_ding::presence::{Presence, PresenceState};
use belfry_ding::protocol::parse_event;
use belfry_ding::status::{
    AdapterProcessState, Counters, DingStatus, LastEvent, LeaseStatus, MessageState, MessageStatus,
};
use belfry_ding::{DeliveryPolicy, FrontMatter, HoldReason, LeaseState, MessageName, SessionName};

fn front_matter(subject: Option<&str>, from: Option<&str>) -> FrontMatter {
    FrontMatter {
        subject: subject.map(str::to_owned),
        from: from.map(str::to_owned),
        ..FrontMatter::default()
    }
}

fn held_agent() -> DingStatus {
    let lease = LeaseStatus::from_state(LeaseState::Held(HoldReason::ComposerNonempty), 0);
    let event = parse_event(
        r#"{"v":1,"kind":"activity","session":"worker","incarnation":"9f","generation":"sha256:ab","sequence":8,"state":"idle","composer":"nonempty","validForMs":250,"revision":42,"reason":"draft\u001b[201~ seen"}"#,
    )
    .unwrap();
    let mut counters = Counters::default();
    counters.record_send();
    counters.record_conflict();
    counters.record_hold(HoldReason::ComposerNonempty);
    counters.record_hold(HoldReason::ComposerNonempty);
    counters.record_hold(HoldReason::Active);
    let message = |name: &str, subject, from, delivery| {
        MessageStatus::new(
            MessageName::parse(name).unwrap(),
            &front_matter(subject, from),
            MessageState::derive(delivery, lease),
        )
    };
    DingStatus {
        session: SessionName::parse("worker").unwrap(),
        policy: DeliveryPolicy::from_token(
            RICH_POLICY_TOKEN,
            vec![
                "/opt/adapters/belfry-adapter-x".into(),
                "--mode".into(),
                "a b".into(),
            ],
        )
        .unwrap(),
        adapter: AdapterProcessState::Running { pid: 4242 },
        presence: Some(Presence {
            state: PresenceState::Busy,
            since_unix_ms: 1_785_069_000_000,
        }),
        last_event: Some(LastEvent::accepted(&event, 1_785_070_000_500)),
        lease,
        not_ready: None,
        messages: vec![
            message(
                "1785070000000-abc123.md",
                Some("review the parser"),
                Some("planner"),
                DeliveryState::Pending,
            ),
            message(
                "1785070000100-def456.md",
                Some("evil\x1b[201~\rsubject\n"),
                None,
                DeliveryState::Staged,
            ),
            message(
                "1785070000200-ghi789.md",
                None,
                Some("ci"),
                DeliveryState::HookOwned,
            ),
            message(
                "1785070000300-jkl012.md",
                Some("done"),
                Some("ci"),
                DeliveryState::Delivered,
            ),
        ],
        counters,
    }
}

fn idle_aggressive_agent() -> DingStatus {
    DingStatus {
        session: SessionName::parse("solo").unwrap(),
        policy: DeliveryPolicy::Aggressive,
        adapter: AdapterProcessState::NotConfigured,
        presence: None,
        last_event: None,
        lease: LeaseStatus::NotApplicable,
        not_ready: None,
        messages: vec![MessageStatus::new(
            MessageName::parse("1785070000000-abc123.md").unwrap(),
            &FrontMatter::default(),
            MessageState::derive(DeliveryState::Pending, LeaseStatus::NotApplicable),
        )],
        counters: Counters::default(),
    }
}

#[test]
fn held_agent_status_text() {
    insta::assert_snapshot!(held_agent().render_text());
}

#[test]
fn held_agent_status_json() {
    insta::assert_json_snapshot!(held_agent());
}

#[test]
fn aggressive_agent_status_text() {
    insta::assert_snapshot!(idle_aggressive_agent().render_text());
}

#[test]
fn a_pane_not_declared_an_agent_says_why_nothing_is_typed() {
    let mut status = idle_aggressive_agent();
    status.policy = DeliveryPolicy::Undeclared;
    let text = status.render_text();
    assert!(
        text.contains("  policy:     none (not declared an agent)\n"),
        "{text}"
    );
    assert!(
        text.contains("  lease:      not applicable (none policy)\n"),
        "{text}"
    );
    assert!(text.contains("1785070000000-abc123.md  pending"), "{text}");
}

#[test]
fn message_states_render_as_the_spec_words() {
    let held = LeaseStatus::Held {
        reason: HoldReason::Stale,
    };
    let leased = LeaseStatus::from_state(
        LeaseState::Leased {
            revision: 3,
            expires_at_ms: 1_500,
        },
        1_000,
    );
    assert_eq!(
        leased,
        LeaseStatus::Leased {
            revision: 3,
            expires_in_ms: 500
        }
    );
    let cases = [
        (DeliveryState::Pending, held, "held:stale"),
        (DeliveryState::Pending, leased, "pending"),
        (DeliveryState::Staged, held, "staged"),
        (DeliveryState::HookOwned, held, "hook-owned"),
        (DeliveryState::Delivered, held, "delivered"),
    ];
    for (delivery, lease, expected) in cases {
        let state = MessageState::derive(delivery, lease);
        assert_eq!(state.to_string(), expected);
        assert_eq!(
            serde_json::to_string(&state).unwrap(),
            format!("\"{expected}\"")
        );
    }
}

#[test]
fn adapter_backoff_and_rejections_are_described() {
    let mut status = idle_aggressive_agent();
    status.policy = DeliveryPolicy::from_token(RICH_POLICY_TOKEN, vec!["adapter".into()]).unwrap();
    status.adapter = AdapterProcessState::Backoff {
        exit_code: Some(1),
        signal: None,
        retry_in_ms: 2000,
        restarts: 3,
    };
    status.last_event = Some(LastEvent::rejected(HoldReason::OutOfOrder, 5));
    status.lease = LeaseStatus::Held {
        reason: HoldReason::AdapterError,
    };
    let text = status.render_text();
    assert!(
        text.contains("  adapter:    exited with code 1; restart 3 in 2000 ms: adapter\n"),
        "{text}"
    );
    assert!(
        text.contains("  last event: rejected at 5: held as out-of-order\n"),
        "{text}"
    );
    assert!(
        text.contains("  lease:      held: adapter-error\n"),
        "{text}"
    );
}

#[test]
fn a_readiness_hold_says_why_and_is_absent_once_ready() {
    let mut status = idle_aggressive_agent();
    let ready = status.render_text();
    assert!(!ready.contains("  input:"), "{ready}");
    let json = serde_json::to_value(&status).unwrap();
    assert!(json.get("not_ready").is_none(), "{json}");

    status.not_ready = Some("its screen does not show (?m)^READY yet\u{1b}[2J".into());
    let held = status.render_text();
    assert!(
        held.contains(
            "  input:      held until the program is ready: its screen does not show (?m)^READY yet"
        ),
        "{held}"
    );
    // The reason is data the pane produced: no escape byte of it reaches the terminal.
    assert!(!held.contains('\u{1b}'), "{held:?}");
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(
        json["not_ready"],
        "its screen does not show (?m)^READY yet\u{1b}[2J"
    );
}
