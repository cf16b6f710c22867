//! The lease state machine (spec §7.4): one fresh idle-and-empty event, one lease, one send.

use std::collections::BTreeSet;

use belfry_ding::protocol::{ActivityState, ComposerState, EventBody, EventHeader};
use belfry_ding::{
    AdapterEvent, EventValidator, HoldReason, LeaseConfig, LeaseInput, LeaseMachine, LeaseState,
    MessageName, PaneIdentity, ProgramTurn, SessionName,
};
use belfry_proto::{Expect, Identity};
use proptest::prelude::*;

const CONFIG: LeaseConfig = LeaseConfig {
    max_lease_ms: 1000,
    event_timeout_ms: 5000,
    submit_settle_ms: 1000,
    submit_unseen_ms: 10_000,
};

fn identity() -> PaneIdentity {
    PaneIdentity {
        session: SessionName::parse("worker").unwrap(),
        incarnation: "inc-1".to_owned(),
        generation: "sha256:gen-1".to_owned(),
    }
}

fn header(identity: &PaneIdentity, sequence: u64) -> EventHeader {
    EventHeader {
        session: identity.session.clone(),
        incarnation: identity.incarnation.clone(),
        generation: identity.generation.clone(),
        sequence,
    }
}

fn activity(
    identity: &PaneIdentity,
    state: ActivityState,
    composer: ComposerState,
    valid_for_ms: Option<u64>,
    revision: Option<u64>,
) -> AdapterEvent {
    AdapterEvent {
        header: header(identity, 1),
        body: EventBody::Activity {
            state,
            composer,
            valid_for_ms,
            revision,
            reason: None,
        },
    }
}

fn idle(identity: &PaneIdentity, revision: u64) -> AdapterEvent {
    activity(
        identity,
        ActivityState::Idle,
        ComposerState::Empty,
        Some(250),
        Some(revision),
    )
}

fn feed(machine: &mut LeaseMachine, event: &AdapterEvent, now_ms: u64) {
    machine.apply(
        LeaseInput::Event {
            event,
            pane_revision: 99,
        },
        now_ms,
    );
}

fn leased_machine(now_ms: u64) -> LeaseMachine {
    let mut machine = LeaseMachine::new(CONFIG, identity());
    feed(&mut machine, &idle(&identity(), 42), now_ms);
    assert!(matches!(machine.state(now_ms), LeaseState::Leased { .. }));
    machine
}

#[test]
fn fresh_idle_empty_event_makes_one_lease_for_one_send() {
    let mut machine = leased_machine(1_000);
    assert_eq!(
        machine.state(1_100),
        LeaseState::Leased {
            revision: 42,
            expires_at_ms: 1_250
        }
    );
    let expectation = machine.take_lease(1_100).unwrap();
    assert_eq!(
        expectation,
        Expect::exactly(&Identity {
            incarnation: "inc-1".to_owned(),
            generation: "sha256:gen-1".to_owned(),
            revision: 42,
        })
    );
    assert_eq!(
        serde_json::to_string(&expectation).unwrap(),
        r#"{"incarnation":"inc-1","generation":"sha256:gen-1","revision":42}"#
    );
    assert_eq!(machine.take_lease(1_100), Err(HoldReason::Stale));
    assert_eq!(machine.state(1_100), LeaseState::Held(HoldReason::Stale));
}

#[test]
fn lease_is_anchored_at_receipt_and_capped() {
    let identity = identity();
    for (valid_for_ms, expected_lifetime) in [(Some(250), 250), (Some(60_000), 1000), (None, 1000)]
    {
        let mut machine = LeaseMachine::new(CONFIG, identity.clone());
        let event = activity(
            &identity,
            ActivityState::Idle,
            ComposerState::Empty,
            valid_for_ms,
            None,
        );
        feed(&mut machine, &event, 10_000);
        assert_eq!(
            machine.state(10_000 + expected_lifetime - 1),
            LeaseState::Leased {
                revision: 99,
                expires_at_ms: 10_000 + expected_lifetime
            },
            "{valid_for_ms:?}"
        );
        assert_eq!(
            machine.state(10_000 + expected_lifetime),
            LeaseState::Held(HoldReason::Stale)
        );
        assert_eq!(
            machine.take_lease(10_000 + expected_lifetime),
            Err(HoldReason::Stale)
        );
    }
}

#[test]
fn zero_validity_or_a_clock_running_backwards_is_no_lease() {
    let identity = identity();
    let mut machine = LeaseMachine::new(CONFIG, identity.clone());
    let event = activity(
        &identity,
        ActivityState::Idle,
        ComposerState::Empty,
        Some(0),
        None,
    );
    feed(&mut machine, &event, 100);
    assert_eq!(machine.take_lease(100), Err(HoldReason::Stale));

    let mut machine = leased_machine(5_000);
    assert_eq!(machine.take_lease(4_999), Err(HoldReason::Stale));
}

#[test]
fn revision_at_receipt_is_used_when_the_event_names_none() {
    let identity = identity();
    let mut machine = LeaseMachine::new(CONFIG, identity.clone());
    let event = activity(
        &identity,
        ActivityState::Idle,
        ComposerState::Empty,
        None,
        None,
    );
    machine.apply(
        LeaseInput::Event {
            event: &event,
            pane_revision: 7,
        },
        0,
    );
    assert_eq!(machine.take_lease(1).unwrap().revision, Some(7));
}

/// Drives a leased machine with one input and returns the resulting hold.
fn hold_after(input: impl FnOnce(&mut LeaseMachine, u64), at_ms: u64) -> HoldReason {
    let mut machine = leased_machine(1_000);
    input(&mut machine, 1_000);
    let LeaseState::Held(reason) = machine.state(at_ms) else {
        panic!("a lease survived an invalidating input");
    };
    assert_eq!(machine.take_lease(at_ms), Err(reason));
    reason
}

#[test]
fn every_spec_hold_reason_is_reachable_and_sends_nothing() {
    let me = identity();
    let mut reached = BTreeSet::new();
    let mut expect = |reason: HoldReason, actual: HoldReason| {
        assert_eq!(actual, reason);
        reached.insert(actual);
    };
    let activity_hold = |state, composer| {
        let event = activity(&me, state, composer, Some(250), Some(1));
        hold_after(|machine, now| feed(machine, &event, now), 1_000)
    };
    use ActivityState as A;
    use ComposerState as C;
    expect(HoldReason::Active, activity_hold(A::Active, C::Empty));
    expect(HoldReason::Child, activity_hold(A::Child, C::Empty));
    expect(HoldReason::Unknown, activity_hold(A::Unknown, C::Empty));
    expect(
        HoldReason::ComposerNonempty,
        activity_hold(A::Idle, C::Nonempty),
    );
    expect(
        HoldReason::ComposerUnknown,
        activity_hold(A::Idle, C::Unknown),
    );
    expect(HoldReason::Stale, hold_after(|_, _| {}, 1_250));

    let turn_boundary = AdapterEvent {
        header: header(&me, 2),
        body: EventBody::TurnBoundary {
            messages: vec![MessageName::parse("1785070000000-abc123.md").unwrap()],
            unrecognized: Vec::new(),
        },
    };
    expect(
        HoldReason::Stale,
        hold_after(|machine, now| feed(machine, &turn_boundary, now), 1_000),
    );
    expect(
        HoldReason::Unreachable,
        hold_after(
            |machine, now| machine.apply(LeaseInput::AdapterUnreachable, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Unreachable,
        hold_after(
            |machine, now| machine.apply(LeaseInput::AdapterStarted, now),
            1_000,
        ),
    );
    for rejected in [
        HoldReason::Malformed,
        HoldReason::UnsupportedVersion,
        HoldReason::UnknownKind,
        HoldReason::OutOfOrder,
    ] {
        expect(
            rejected,
            hold_after(
                |machine, now| machine.apply(LeaseInput::EventRejected(rejected), now),
                1_000,
            ),
        );
    }
    expect(
        HoldReason::Timeout,
        hold_after(
            |machine, now| machine.apply(LeaseInput::AdapterStarted, now),
            6_000,
        ),
    );
    expect(
        HoldReason::AdapterError,
        hold_after(
            |machine, now| machine.apply(LeaseInput::AdapterExited, now),
            1_000,
        ),
    );
    expect(
        HoldReason::AdapterError,
        hold_after(
            |machine, now| machine.apply(LeaseInput::AdapterError, now),
            1_000,
        ),
    );

    let mut other_incarnation = me.clone();
    other_incarnation.incarnation = "inc-2".to_owned();
    let mut other_generation = me.clone();
    other_generation.generation = "sha256:gen-2".to_owned();
    let mut other_session = me.clone();
    other_session.session = SessionName::parse("reviewer").unwrap();
    for (stranger, reason) in [
        (&other_incarnation, HoldReason::IncarnationMismatch),
        (&other_session, HoldReason::IncarnationMismatch),
        (&other_generation, HoldReason::GenerationMismatch),
    ] {
        let event = idle(stranger, 5);
        expect(
            reason,
            hold_after(|machine, now| feed(machine, &event, now), 1_000),
        );
    }
    expect(
        HoldReason::IncarnationMismatch,
        hold_after(
            |machine, now| machine.apply(LeaseInput::PaneRestarted(&other_incarnation), now),
            1_000,
        ),
    );
    expect(
        HoldReason::GenerationMismatch,
        hold_after(
            |machine, now| machine.apply(LeaseInput::PaneRestarted(&other_generation), now),
            1_000,
        ),
    );
    expect(
        HoldReason::Compaction,
        hold_after(
            |machine, now| machine.apply(LeaseInput::Compaction, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Clear,
        hold_after(|machine, now| machine.apply(LeaseInput::Clear, now), 1_000),
    );
    // A turn that starts ends the idle lease at once (the hook, before the adapter's `active`).
    expect(
        HoldReason::Active,
        hold_after(
            |machine, now| machine.apply(LeaseInput::TurnStarted, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Crash,
        hold_after(
            |machine, now| machine.apply(LeaseInput::PaneExited, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Crash,
        hold_after(
            |machine, now| machine.apply(LeaseInput::DaemonRestarted, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Conflict,
        hold_after(
            |machine, now| machine.apply(LeaseInput::SendConflict, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Submitted,
        hold_after(
            |machine, now| machine.apply(LeaseInput::Submitted, now),
            1_000,
        ),
    );

    expect(
        HoldReason::Typed,
        hold_after(
            |machine, now| machine.apply(LeaseInput::Typed { submit: true }, now),
            1_000,
        ),
    );
    expect(
        HoldReason::Working,
        hold_after(
            |machine, now| machine.apply(LeaseInput::ProgramStatus(ProgramTurn::Working), now),
            1_000,
        ),
    );
    expect(
        HoldReason::Blocked,
        hold_after(
            |machine, now| machine.apply(LeaseInput::ProgramStatus(ProgramTurn::Blocked), now),
            1_000,
        ),
    );

    let all: BTreeSet<HoldReason> = HoldReason::ALL.into_iter().collect();
    assert_eq!(reached, all, "every reason in spec §7.4 has a path");
}

fn active(identity: &PaneIdentity) -> AdapterEvent {
    activity(
        identity,
        ActivityState::Active,
        ComposerState::Empty,
        None,
        None,
    )
}

/// The collision of the A/B evaluation (docs/evaluation.md): after a notice was submitted, the
/// screen looked idle with an empty composer before the harness showed the turn, and a second
/// notice typed then was taken as a steer. After a submit, an idle report leases only once the idle has
/// lasted `submit_settle_ms` past the turn's last sign.
#[test]
fn after_a_submit_idle_leases_only_once_the_turn_it_started_has_settled() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    assert!(machine.take_lease(1_000).is_ok());
    machine.apply(LeaseInput::Submitted, 1_010);
    assert_eq!(
        machine.state(1_010),
        LeaseState::Held(HoldReason::Submitted)
    );
    // The screen right after the Enter: idle, empty. No lease.
    feed(&mut machine, &idle(&me, 43), 1_300);
    assert_eq!(
        machine.state(1_300),
        LeaseState::Held(HoldReason::Submitted)
    );
    assert_eq!(machine.take_lease(1_300), Err(HoldReason::Submitted));
    // The prompt-submit hook, then the adapter's own view of the turn.
    machine.apply(LeaseInput::TurnStarted, 1_500);
    assert_eq!(machine.state(1_500), LeaseState::Held(HoldReason::Active));
    feed(&mut machine, &active(&me), 4_000);
    assert_eq!(machine.state(4_000), LeaseState::Held(HoldReason::Active));
    // The turn ended: idle, but not yet for the settle time since the last sign.
    feed(&mut machine, &idle(&me, 50), 4_300);
    assert_eq!(
        machine.state(4_300),
        LeaseState::Held(HoldReason::Submitted)
    );
    feed(&mut machine, &idle(&me, 50), 4_999);
    assert_eq!(
        machine.state(4_999),
        LeaseState::Held(HoldReason::Submitted)
    );
    // Settled: the next idle report leases, and the one after it too (the gate is gone).
    feed(&mut machine, &idle(&me, 50), 5_000);
    assert!(matches!(
        machine.state(5_000),
        LeaseState::Leased { revision: 50, .. }
    ));
    assert!(machine.take_lease(5_000).is_ok());
    feed(&mut machine, &idle(&me, 51), 5_100);
    assert!(matches!(
        machine.state(5_100),
        LeaseState::Leased { revision: 51, .. }
    ));
}

/// Issue 39, item 9 (seen with two real harnesses): a person pressed Enter on a draft, and until the
/// harness's prompt-submit hook showed the turn, the adapter still reported the idle from
/// before with a composer that had just emptied. A person's input ends that idle (even a lease
/// already granted) and no idle report leases until the harness has shown a turn and it has
/// settled; a turn-stop of a turn that started before the typing does not end the wait.
#[test]
fn a_persons_input_ends_the_idle_until_the_harness_shows_a_turn() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    machine.apply(LeaseInput::Typed { submit: true }, 1_010);
    assert_eq!(machine.state(1_010), LeaseState::Held(HoldReason::Typed));
    assert_eq!(machine.take_lease(1_010), Err(HoldReason::Typed));
    // The adapter still sees the idle screen, the composer just emptied by the Enter.
    for at in [1_100, 1_400, 1_700, 2_000] {
        feed(&mut machine, &idle(&me, 43), at);
        assert_eq!(
            machine.state(at),
            LeaseState::Held(HoldReason::Typed),
            "at {at}"
        );
    }
    // A stop of the turn that ran while the person typed ahead is no sign of theirs.
    machine.apply(LeaseInput::TurnEnded, 2_100);
    feed(&mut machine, &idle(&me, 43), 2_200);
    assert_eq!(machine.state(2_200), LeaseState::Held(HoldReason::Typed));
    // Their turn shows (the prompt-submit hook), runs, and ends.
    machine.apply(LeaseInput::TurnStarted, 2_300);
    assert_eq!(machine.state(2_300), LeaseState::Held(HoldReason::Active));
    feed(&mut machine, &active(&me), 3_000);
    feed(&mut machine, &idle(&me, 60), 3_200);
    assert_eq!(machine.state(3_200), LeaseState::Held(HoldReason::Typed));
    machine.apply(LeaseInput::TurnEnded, 3_300);
    feed(&mut machine, &idle(&me, 61), 3_310);
    assert!(matches!(
        machine.state(3_310),
        LeaseState::Leased { revision: 61, .. }
    ));
}

/// Typing that starts no turn (a draft written and erased) holds mail for `submit_unseen_ms`
/// from the last keystroke, then idle leases again: mail never waits for a turn that will not
/// come.
#[test]
fn typing_that_starts_no_turn_holds_idle_for_the_unseen_time_after_the_last_keystroke() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    machine.apply(LeaseInput::Typed { submit: true }, 1_000);
    machine.apply(LeaseInput::Typed { submit: true }, 4_000);
    feed(&mut machine, &idle(&me, 43), 13_999);
    assert_eq!(machine.state(13_999), LeaseState::Held(HoldReason::Typed));
    feed(&mut machine, &idle(&me, 43), 14_000);
    assert!(matches!(machine.state(14_000), LeaseState::Leased { .. }));
}

/// Typing without an Enter (a draft written, or erased) submits nothing: it holds idle only for
/// the settle time after the last keystroke (the harness may not have drawn it yet), not for a
/// turn; an Enter after it, or before it with its turn not yet shown, still waits for the turn.
#[test]
fn typing_without_an_enter_holds_idle_only_for_the_settle_time() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    machine.apply(LeaseInput::Typed { submit: false }, 1_000);
    feed(&mut machine, &idle(&me, 43), 1_999);
    assert_eq!(machine.state(1_999), LeaseState::Held(HoldReason::Typed));
    feed(&mut machine, &idle(&me, 43), 2_000);
    assert!(matches!(machine.state(2_000), LeaseState::Leased { .. }));

    // An Enter, then more typing before its turn shows: the wait is still the submit's.
    machine.apply(LeaseInput::Typed { submit: true }, 3_000);
    machine.apply(LeaseInput::Typed { submit: false }, 3_100);
    feed(&mut machine, &idle(&me, 44), 5_000);
    assert_eq!(machine.state(5_000), LeaseState::Held(HoldReason::Typed));
    feed(&mut machine, &idle(&me, 44), 13_100);
    assert!(matches!(machine.state(13_100), LeaseState::Leased { .. }));
}

/// The harness's own turn-stop ends the wait at once: the turn the submit started is over.
#[test]
fn a_turn_stop_after_a_submit_lets_the_next_idle_lease_at_once() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    assert!(machine.take_lease(1_000).is_ok());
    machine.apply(LeaseInput::Submitted, 1_000);
    machine.apply(LeaseInput::TurnStarted, 1_200);
    feed(&mut machine, &idle(&me, 43), 2_000);
    assert_eq!(
        machine.state(2_000),
        LeaseState::Held(HoldReason::Submitted)
    );
    machine.apply(LeaseInput::TurnEnded, 2_010);
    assert_eq!(
        machine.state(2_010),
        LeaseState::Held(HoldReason::Submitted)
    );
    // 820 ms after the turn's last sign, short of the settle time: the stop is what lets it.
    feed(&mut machine, &idle(&me, 44), 2_020);
    assert!(matches!(
        machine.state(2_020),
        LeaseState::Leased { revision: 44, .. }
    ));
    // A turn-stop ends a lease too: none outlives a turn boundary.
    machine.apply(LeaseInput::TurnEnded, 2_030);
    assert_eq!(machine.state(2_030), LeaseState::Held(HoldReason::Stale));
}

/// A person's `/new` or `/clear` (an Enter that starts no turn) that the harness answers with
/// a clear (its session-start hook) holds idle for the settle time from the clear, not for
/// `submit_unseen_ms`: mail reaches a freshly cleared harness in about a second (live, one
/// harness's `/new` held the notice 10.3 s before this).
#[test]
fn a_clear_after_a_persons_submit_lets_idle_lease_after_the_settle_time() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    machine.apply(LeaseInput::Typed { submit: true }, 1_000);
    machine.apply(LeaseInput::Clear, 1_300);
    assert_eq!(machine.state(1_300), LeaseState::Held(HoldReason::Clear));
    feed(&mut machine, &idle(&me, 43), 2_299);
    assert_eq!(machine.state(2_299), LeaseState::Held(HoldReason::Typed));
    feed(&mut machine, &idle(&me, 43), 2_300);
    assert!(matches!(
        machine.state(2_300),
        LeaseState::Leased { revision: 43, .. }
    ));
}

/// A submit no sign of a turn followed (the harness took the input and started nothing, or
/// its hooks are not applied) holds idle for `submit_unseen_ms`, then leases again: mail
/// never waits for a turn that will not come.
#[test]
fn a_submit_no_turn_followed_holds_idle_for_the_unseen_time_only() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    assert!(machine.take_lease(1_000).is_ok());
    machine.apply(LeaseInput::Submitted, 1_000);
    for at in [1_300, 2_500, 6_000, 10_999] {
        feed(&mut machine, &idle(&me, 43), at);
        assert_eq!(
            machine.state(at),
            LeaseState::Held(HoldReason::Submitted),
            "at {at}"
        );
    }
    feed(&mut machine, &idle(&me, 43), 11_000);
    assert!(matches!(machine.state(11_000), LeaseState::Leased { .. }));
}

/// Another process's `active` is no sign of the turn this pane's submit started, and a pane
/// restart ends the gate: the new process never saw the submit.
#[test]
fn only_the_panes_own_process_signs_the_submitted_turn_and_a_restart_ends_the_gate() {
    let me = identity();
    let stranger = PaneIdentity {
        incarnation: "inc-other".to_owned(),
        ..identity()
    };
    let mut machine = leased_machine(1_000);
    assert!(machine.take_lease(1_000).is_ok());
    machine.apply(LeaseInput::Submitted, 1_000);
    feed(&mut machine, &active(&stranger), 1_200);
    // Had the stranger's report counted, 1 s of idle would lease at 2_200.
    feed(&mut machine, &idle(&me, 43), 2_300);
    assert_eq!(
        machine.state(2_300),
        LeaseState::Held(HoldReason::Submitted)
    );

    let restarted = PaneIdentity {
        incarnation: "inc-2".to_owned(),
        ..identity()
    };
    machine.apply(LeaseInput::PaneRestarted(&restarted), 2_400);
    feed(&mut machine, &idle(&restarted, 7), 2_500);
    assert!(matches!(
        machine.state(2_500),
        LeaseState::Leased { revision: 7, .. }
    ));
}

#[test]
fn new_and_restarted_daemons_start_held() {
    let machine = LeaseMachine::new(CONFIG, identity());
    assert_eq!(machine.state(0), LeaseState::Held(HoldReason::Unreachable));
    let mut machine = LeaseMachine::after_daemon_restart(CONFIG, identity());
    assert_eq!(machine.state(0), LeaseState::Held(HoldReason::Crash));
    // Holds that are not about the adapter's silence do not turn into timeouts.
    assert_eq!(
        machine.state(1_000_000),
        LeaseState::Held(HoldReason::Crash)
    );
    feed(&mut machine, &idle(&identity(), 3), 10);
    assert_eq!(machine.take_lease(10).unwrap().revision, Some(3));
}

#[test]
fn an_exited_pane_takes_no_lease_until_it_restarts() {
    let me = identity();
    let mut machine = LeaseMachine::new(CONFIG, me.clone());
    machine.apply(LeaseInput::PaneExited, 0);
    feed(&mut machine, &idle(&me, 1), 1);
    assert_eq!(machine.take_lease(1), Err(HoldReason::Crash));

    let mut restarted = me.clone();
    restarted.incarnation = "inc-2".to_owned();
    machine.apply(LeaseInput::PaneRestarted(&restarted), 2);
    assert_eq!(machine.identity(), &restarted);
    feed(&mut machine, &idle(&me, 1), 3);
    assert_eq!(machine.take_lease(3), Err(HoldReason::IncarnationMismatch));
    feed(&mut machine, &idle(&restarted, 8), 4);
    assert_eq!(
        machine.take_lease(4).unwrap().incarnation.as_deref(),
        Some("inc-2")
    );
}

#[test]
fn silence_turns_adapter_holds_into_timeouts() {
    let mut machine = leased_machine(0);
    let event = activity(
        &identity(),
        ActivityState::Active,
        ComposerState::Empty,
        None,
        None,
    );
    feed(&mut machine, &event, 100);
    assert_eq!(machine.state(5_099), LeaseState::Held(HoldReason::Active));
    assert_eq!(machine.state(5_100), LeaseState::Held(HoldReason::Timeout));
    assert_eq!(machine.last_adapter_input_ms(), Some(100));
}

#[test]
fn a_timeout_shorter_than_the_lease_ends_it() {
    let config = LeaseConfig {
        event_timeout_ms: 100,
        ..CONFIG
    };
    let mut machine = LeaseMachine::new(config, identity());
    let event = activity(
        &identity(),
        ActivityState::Idle,
        ComposerState::Empty,
        None,
        None,
    );
    feed(&mut machine, &event, 0);
    assert!(matches!(machine.state(99), LeaseState::Leased { .. }));
    assert_eq!(machine.take_lease(100), Err(HoldReason::Timeout));
}

#[test]
fn validator_rejections_feed_the_machine() {
    let mut validator = EventValidator::new();
    let mut machine = LeaseMachine::new(CONFIG, identity());
    let line = |sequence: u64| {
        format!(
            r#"{{"v":1,"kind":"activity","session":"worker","incarnation":"inc-1","generation":"sha256:gen-1","sequence":{sequence},"state":"idle","composer":"empty","revision":12}}"#
        )
    };
    let mut deliver =
        |text: &str, machine: &mut LeaseMachine, now: u64| match validator.validate(text) {
            Ok(event) => machine.apply(
                LeaseInput::Event {
                    event: &event,
                    pane_revision: 0,
                },
                now,
            ),
            Err(err) => machine.apply(
                LeaseInput::EventRejected(err.hold_reason().unwrap_or(HoldReason::Malformed)),
                now,
            ),
        };
    deliver(&line(1), &mut machine, 0);
    assert!(matches!(
        machine.state(0),
        LeaseState::Leased { revision: 12, .. }
    ));
    deliver(&line(1), &mut machine, 1);
    assert_eq!(machine.take_lease(1), Err(HoldReason::OutOfOrder));
    deliver("{\"v\":1", &mut machine, 2);
    assert_eq!(machine.take_lease(2), Err(HoldReason::Malformed));
    deliver(&line(2), &mut machine, 3);
    assert_eq!(machine.take_lease(3).unwrap().revision, Some(12));
}

// ---------------------------------------------------------------------------------------------
// Properties, checked against a small reference model.

#[derive(Clone, Debug)]
enum Who {
    Me,
    OtherIncarnation,
    OtherGeneration,
    OtherSession,
}

#[derive(Clone, Debug)]
enum Op {
    Activity {
        state: ActivityState,
        composer: ComposerState,
        valid_for_ms: Option<u64>,
        revision: Option<u64>,
        who: Who,
    },
    TurnBoundary,
    Rejected(HoldReason),
    AdapterStarted,
    AdapterExited,
    AdapterError,
    AdapterUnreachable,
    PaneRestarted {
        new_generation: bool,
    },
    PaneExited,
    Compaction,
    Clear,
    TurnStarted,
    DaemonRestarted,
    SendConflict,
    Submitted,
    TurnEnded,
    Take,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let state = prop_oneof![
        4 => Just(ActivityState::Idle),
        1 => Just(ActivityState::Active),
        1 => Just(ActivityState::Child),
        1 => Just(ActivityState::Unknown),
    ];
    let composer = prop_oneof![
        4 => Just(ComposerState::Empty),
        1 => Just(ComposerState::Nonempty),
        1 => Just(ComposerState::Unknown),
    ];
    let who = prop_oneof![
        6 => Just(Who::Me),
        1 => Just(Who::OtherIncarnation),
        1 => Just(Who::OtherGeneration),
        1 => Just(Who::OtherSession),
    ];
    let activity = (
        state,
        composer,
        proptest::option::of(0u64..2000),
        proptest::option::of(0u64..100),
        who,
    )
        .prop_map(
            |(state, composer, valid_for_ms, revision, who)| Op::Activity {
                state,
                composer,
                valid_for_ms,
                revision,
                who,
            },
        );
    prop_oneof![
        8 => activity,
        6 => Just(Op::Take),
        6 => (0u64..1500).prop_map(Op::Advance),
        1 => Just(Op::TurnBoundary),
        1 => proptest::sample::select(HoldReason::ALL.to_vec()).prop_map(Op::Rejected),
        1 => Just(Op::AdapterStarted),
        1 => Just(Op::AdapterExited),
        1 => Just(Op::AdapterError),
        1 => Just(Op::AdapterUnreachable),
        1 => any::<bool>().prop_map(|new_generation| Op::PaneRestarted { new_generation }),
        1 => Just(Op::PaneExited),
        1 => Just(Op::Compaction),
        1 => Just(Op::Clear),
        1 => Just(Op::TurnStarted),
        1 => Just(Op::DaemonRestarted),
        1 => Just(Op::SendConflict),
        2 => Just(Op::Submitted),
        1 => Just(Op::TurnEnded),
    ]
}

/// What the reference model believes is leased.
#[derive(Clone, Debug)]
struct ModelLease {
    expectation: Expect,
    anchored_at_ms: u64,
    expires_at_ms: u64,
}

struct Model {
    identity: PaneIdentity,
    restarts: u32,
    exited: bool,
    lease: Option<ModelLease>,
    last_heard_ms: Option<u64>,
    /// After a submit: since when the turn's settling counts, and whether a sign of it came.
    after_submit: Option<(u64, bool)>,
}

impl Model {
    fn valid_lease(&self, now_ms: u64) -> Option<&ModelLease> {
        let timed_out = self
            .last_heard_ms
            .is_some_and(|heard| now_ms - heard >= CONFIG.event_timeout_ms);
        self.lease.as_ref().filter(|lease| {
            !timed_out && now_ms >= lease.anchored_at_ms && now_ms < lease.expires_at_ms
        })
    }
}

fn stranger(identity: &PaneIdentity, who: &Who) -> PaneIdentity {
    let mut other = identity.clone();
    match who {
        Who::Me => {}
        Who::OtherIncarnation => other.incarnation.push_str("-other"),
        Who::OtherGeneration => other.generation.push_str("-other"),
        Who::OtherSession => other.session = SessionName::parse("someone-else").unwrap(),
    }
    other
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The machine grants exactly the leases the model grants, so: no lease without a fresh,
    /// matching idle-and-empty event; no lease after any invalidating input; one send per lease.
    #[test]
    fn machine_matches_the_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        let mut machine = LeaseMachine::new(CONFIG, identity());
        let mut model = Model {
            identity: identity(),
            restarts: 0,
            exited: false,
            lease: None,
            last_heard_ms: None,
            after_submit: None,
        };
        let mut now_ms = 0u64;
        let mut sends_from_current_lease = 0u32;
        for op in ops {
            let leased_before = model.valid_lease(now_ms).is_some();
            prop_assert_eq!(
                matches!(machine.state(now_ms), LeaseState::Leased { .. }),
                leased_before
            );
            match op {
                Op::Advance(ms) => now_ms += ms,
                Op::Take => {
                    let expected = model.valid_lease(now_ms).map(|lease| lease.expectation.clone());
                    let taken = machine.take_lease(now_ms);
                    prop_assert_eq!(taken.as_ref().ok(), expected.as_ref());
                    if taken.is_ok() {
                        sends_from_current_lease += 1;
                        prop_assert!(sends_from_current_lease <= 1, "two sends from one lease");
                        model.lease = None;
                    }
                    prop_assert!(machine.take_lease(now_ms).is_err(), "a lease survived its send");
                }
                Op::Activity { state, composer, valid_for_ms, revision, who } => {
                    let speaker = stranger(&model.identity, &who);
                    let event = activity(&speaker, state, composer, valid_for_ms, revision);
                    machine.apply(LeaseInput::Event { event: &event, pane_revision: 77 }, now_ms);
                    model.last_heard_ms = Some(now_ms);
                    sends_from_current_lease = 0;
                    let lifetime = valid_for_ms.unwrap_or(CONFIG.max_lease_ms).min(CONFIG.max_lease_ms);
                    let own = matches!(who, Who::Me) && !model.exited;
                    if own && matches!(state, ActivityState::Active | ActivityState::Child) {
                        if let Some(after) = &mut model.after_submit {
                            *after = (now_ms, true);
                        }
                    }
                    let mut qualifies = own
                        && state == ActivityState::Idle
                        && composer == ComposerState::Empty
                        && lifetime > 0;
                    if let (true, Some((since, turn_seen))) = (qualifies, model.after_submit) {
                        let needed = if turn_seen { CONFIG.submit_settle_ms } else { CONFIG.submit_unseen_ms };
                        if now_ms - since < needed {
                            qualifies = false;
                        } else {
                            model.after_submit = None;
                        }
                    }
                    model.lease = qualifies.then(|| ModelLease {
                        expectation: Expect::exactly(&Identity {
                            incarnation: speaker.incarnation.clone(),
                            generation: speaker.generation.clone(),
                            revision: revision.unwrap_or(77),
                        }),
                        anchored_at_ms: now_ms,
                        expires_at_ms: now_ms + lifetime,
                    });
                }
                other => {
                    model.lease = None;
                    let turn_boundary;
                    let restarted;
                    let input = match other {
                        Op::TurnBoundary => {
                            turn_boundary = AdapterEvent {
                                header: header(&model.identity, 1),
                                body: EventBody::TurnBoundary { messages: Vec::new(), unrecognized: Vec::new() },
                            };
                            model.last_heard_ms = Some(now_ms);
                            LeaseInput::Event { event: &turn_boundary, pane_revision: 0 }
                        }
                        Op::Rejected(reason) => {
                            model.last_heard_ms = Some(now_ms);
                            LeaseInput::EventRejected(reason)
                        }
                        Op::AdapterStarted => {
                            model.last_heard_ms = Some(now_ms);
                            LeaseInput::AdapterStarted
                        }
                        Op::AdapterExited => LeaseInput::AdapterExited,
                        Op::AdapterError => LeaseInput::AdapterError,
                        Op::AdapterUnreachable => LeaseInput::AdapterUnreachable,
                        Op::PaneRestarted { new_generation } => {
                            model.restarts += 1;
                            model.identity.incarnation = format!("inc-r{}", model.restarts);
                            if new_generation {
                                model.identity.generation = format!("sha256:gen-r{}", model.restarts);
                            }
                            model.exited = false;
                            model.after_submit = None;
                            restarted = model.identity.clone();
                            LeaseInput::PaneRestarted(&restarted)
                        }
                        Op::PaneExited => {
                            model.exited = true;
                            LeaseInput::PaneExited
                        }
                        Op::Compaction => LeaseInput::Compaction,
                        Op::Clear => {
                            // A clear is the harness saying what the input was: a sign, as
                            // a turn's start is.
                            if let Some(after) = &mut model.after_submit {
                                *after = (now_ms, true);
                            }
                            LeaseInput::Clear
                        }
                        Op::TurnStarted => {
                            if let Some(after) = &mut model.after_submit {
                                *after = (now_ms, true);
                            }
                            LeaseInput::TurnStarted
                        }
                        Op::DaemonRestarted => {
                            model.after_submit = None;
                            LeaseInput::DaemonRestarted
                        }
                        Op::SendConflict => LeaseInput::SendConflict,
                        Op::Submitted => {
                            model.after_submit = Some((now_ms, false));
                            LeaseInput::Submitted
                        }
                        Op::TurnEnded => {
                            model.after_submit = None;
                            LeaseInput::TurnEnded
                        }
                        Op::Activity { .. } | Op::Take | Op::Advance(_) => unreachable!(),
                    };
                    machine.apply(input, now_ms);
                    // spec §7.4: every input other than a qualifying activity ends the lease.
                    prop_assert!(matches!(machine.state(now_ms), LeaseState::Held(_)));
                    prop_assert!(machine.take_lease(now_ms).is_err());
                }
            }
        }
    }

    /// Whatever happened before, a lease is only ever taken right after a qualifying event and
    /// only once.
    #[test]
    fn takes_never_outnumber_qualifying_events(ops in proptest::collection::vec(op(), 1..80)) {
        let mut machine = LeaseMachine::new(CONFIG, identity());
        let mut now_ms = 0u64;
        let mut qualifying_events = 0u32;
        let mut takes = 0u32;
        for op in ops {
            match op {
                Op::Advance(ms) => now_ms += ms,
                Op::Take => {
                    if machine.take_lease(now_ms).is_ok() {
                        takes += 1;
                    }
                }
                Op::Activity { state, composer, valid_for_ms, revision, who } => {
                    let speaker = stranger(machine.identity(), &who);
                    let event = activity(&speaker, state, composer, valid_for_ms, revision);
                    if matches!(who, Who::Me) && state == ActivityState::Idle && composer == ComposerState::Empty {
                        qualifying_events += 1;
                    }
                    machine.apply(LeaseInput::Event { event: &event, pane_revision: 1 }, now_ms);
                }
                // Every other input is some invalidation; which one does not matter here.
                _ => machine.apply(LeaseInput::Compaction, now_ms),
            }
            prop_assert!(takes <= qualifying_events);
        }
    }
}

/// Issue 40 item 3: while the harness's own program status says `working` or `blocked`, no idle
/// report leases (held as the status), however often it comes; its `idle` lifts the veto and
/// the next idle report leases; a restarted program starts with no veto.
#[test]
fn a_working_or_blocked_program_status_holds_every_idle_until_it_rests() {
    let me = identity();
    for (turn, hold) in [
        (ProgramTurn::Working, HoldReason::Working),
        (ProgramTurn::Blocked, HoldReason::Blocked),
    ] {
        let mut machine = LeaseMachine::new(CONFIG, me.clone());
        machine.apply(LeaseInput::ProgramStatus(turn), 1_000);
        for at in [1_100, 1_200, 1_300] {
            feed(&mut machine, &idle(&me, at), at);
            assert_eq!(
                machine.state(at),
                LeaseState::Held(hold),
                "{turn:?} at {at}"
            );
            assert_eq!(machine.take_lease(at), Err(hold));
        }
        machine.apply(LeaseInput::ProgramStatus(ProgramTurn::Rest), 1_400);
        assert_eq!(
            machine.state(1_400),
            LeaseState::Held(hold),
            "the rest itself grants nothing"
        );
        feed(&mut machine, &idle(&me, 77), 1_500);
        assert!(matches!(
            machine.state(1_500),
            LeaseState::Leased { revision: 77, .. }
        ));
        // A program restarted under the veto has said nothing yet.
        machine.apply(LeaseInput::ProgramStatus(turn), 1_600);
        let next = PaneIdentity {
            incarnation: "inc-2".to_owned(),
            ..me.clone()
        };
        machine.apply(LeaseInput::PaneRestarted(&next), 1_700);
        feed(&mut machine, &idle(&next, 80), 1_800);
        assert!(matches!(machine.state(1_800), LeaseState::Leased { .. }));
    }
}

/// A program's `working` is a sign of the turn a submit started: after it rests, an idle leases
/// after the settle time, not the unseen time.
#[test]
fn a_program_working_after_a_submit_signs_its_turn() {
    let me = identity();
    let mut machine = leased_machine(1_000);
    machine.apply(LeaseInput::Submitted, 1_000);
    machine.apply(LeaseInput::ProgramStatus(ProgramTurn::Working), 1_200);
    machine.apply(LeaseInput::ProgramStatus(ProgramTurn::Rest), 1_500);
    feed(&mut machine, &idle(&me, 50), 2_000);
    assert_eq!(
        machine.state(2_000),
        LeaseState::Held(HoldReason::Submitted)
    );
    feed(&mut machine, &idle(&me, 51), 2_300);
    assert!(matches!(machine.state(2_300), LeaseState::Leased { .. }));
}
