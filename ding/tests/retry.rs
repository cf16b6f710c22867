//! The self-heal retry machine, driven by a clock the test holds (milliseconds passed in; no
//! sleeps): every transition, including a person typing during the backoff cancelling the
//! retry so nothing is typed into their draft.

use belfry_ding::retry::{
    Composer, RetryAction, RetryConfig, RetryInput, RetryMachine, RetryState,
};

fn config() -> RetryConfig {
    RetryConfig {
        attempts: 3,
        first_delay_ms: 1_000,
        factor: 2,
        max_delay_ms: 3_000,
        prompt: "RETRY".into(),
    }
}

fn failed() -> RetryInput {
    RetryInput::TurnFailed {
        detail: "overloaded".into(),
    }
}

fn empty(revision: u64) -> RetryInput {
    RetryInput::Evidence(Composer {
        revision,
        empty: true,
    })
}

fn send(attempt: u32, revision: u64) -> Vec<RetryAction> {
    vec![RetryAction::Send {
        attempt,
        text: "RETRY".into(),
        expect_revision: revision,
    }]
}

#[test]
fn the_delays_double_and_stop_at_the_maximum() {
    let config = config();
    assert_eq!(
        (1..=4).map(|n| config.delay_ms(n)).collect::<Vec<_>>(),
        [1_000, 2_000, 3_000, 3_000]
    );
    let default = RetryConfig::default();
    assert_eq!(
        (default.attempts, default.delay_ms(1), default.delay_ms(3)),
        (3, 5_000, 20_000)
    );
}

#[test]
fn a_failed_turn_is_retried_after_its_delay_into_an_empty_composer_and_heals() {
    let mut machine = RetryMachine::new(config());
    assert_eq!(
        machine.apply(failed(), 10_000),
        [RetryAction::Scheduled {
            attempt: 1,
            of: 3,
            due_ms: 11_000
        }]
    );
    // The composer is seen empty during the wait, but nothing is sent before the delay ends.
    assert_eq!(machine.apply(empty(7), 10_500), []);
    assert_eq!(machine.tick(10_999), []);
    assert_eq!(
        machine.state(),
        &RetryState::Backoff {
            attempt: 1,
            due_ms: 11_000
        }
    );
    assert_eq!(machine.tick(11_000), send(1, 7));
    assert_eq!(
        machine.state(),
        &RetryState::Sending {
            attempt: 1,
            revision: 7
        }
    );
    // The same evidence again sends nothing more: one send per attempt.
    assert_eq!(machine.apply(empty(7), 11_001), []);
    assert_eq!(machine.apply(RetryInput::Sent, 11_002), []);
    assert_eq!(machine.state(), &RetryState::Running { attempt: 1 });
    assert_eq!(machine.apply(RetryInput::TurnStarted, 11_100), []);
    assert_eq!(machine.state(), &RetryState::Running { attempt: 1 });
    assert_eq!(
        machine.apply(RetryInput::TurnSucceeded, 12_000),
        [RetryAction::Healed { attempts: 1 }]
    );
    assert_eq!(machine.state(), &RetryState::Idle);
    assert_eq!(machine.tick(100_000), []);
}

#[test]
fn each_failed_retry_waits_longer_and_after_the_last_the_pane_is_flagged() {
    let mut machine = RetryMachine::new(config());
    let mut now = 0;
    let mut revision = 1;
    for (attempt, delay) in [(1, 1_000), (2, 2_000), (3, 3_000)] {
        assert_eq!(
            machine.apply(failed(), now),
            [RetryAction::Scheduled {
                attempt,
                of: 3,
                due_ms: now + delay
            }]
        );
        // Evidence from before the failure was dropped: the send waits for new evidence.
        assert_eq!(machine.tick(now + delay), []);
        assert_eq!(machine.state(), &RetryState::Due { attempt });
        revision += 1;
        assert_eq!(
            machine.apply(empty(revision), now + delay),
            send(attempt, revision)
        );
        assert_eq!(machine.apply(RetryInput::Sent, now + delay), []);
        assert_eq!(machine.apply(RetryInput::TurnStarted, now + delay + 10), []);
        now += delay + 500;
    }
    assert_eq!(
        machine.apply(failed(), now),
        [RetryAction::Flagged {
            attempts: 3,
            detail: "overloaded".into()
        }]
    );
    assert_eq!(machine.state(), &RetryState::Flagged);
    // Flagged: nothing is ever sent, whatever the composer shows.
    assert_eq!(machine.apply(empty(revision + 1), now + 60_000), []);
    assert_eq!(machine.tick(now + 600_000), []);
    // A turn that succeeds (a person took over) clears the flag.
    assert_eq!(machine.apply(RetryInput::TurnStarted, now + 700_000), []);
    assert_eq!(machine.apply(RetryInput::TurnSucceeded, now + 701_000), []);
    assert_eq!(machine.state(), &RetryState::Idle);
}

#[test]
fn a_person_typing_during_the_backoff_cancels_the_retry_and_nothing_is_typed() {
    let mut machine = RetryMachine::new(config());
    machine.apply(failed(), 0);
    machine.apply(empty(3), 100);
    assert_eq!(
        machine.apply(RetryInput::HumanInput, 400),
        [RetryAction::Cancelled {
            reason: "human-input"
        }]
    );
    assert_eq!(machine.state(), &RetryState::Idle);
    // The delay passes and the composer is seen empty again: no retry is sent.
    assert_eq!(machine.tick(5_000), []);
    assert_eq!(machine.apply(empty(4), 5_001), []);

    // Typing once the retry is due (the composer not yet seen empty) cancels it too.
    machine.apply(failed(), 10_000);
    assert_eq!(machine.tick(11_000), []);
    assert_eq!(machine.state(), &RetryState::Due { attempt: 1 });
    assert_eq!(
        machine.apply(RetryInput::HumanInput, 11_001),
        [RetryAction::Cancelled {
            reason: "human-input"
        }]
    );
    assert_eq!(machine.apply(empty(9), 11_002), []);
}

#[test]
fn a_new_turn_during_the_backoff_cancels_the_retry() {
    let mut machine = RetryMachine::new(config());
    machine.apply(failed(), 0);
    assert_eq!(
        machine.apply(RetryInput::TurnStarted, 500),
        [RetryAction::Cancelled { reason: "new-turn" }]
    );
    assert_eq!(machine.state(), &RetryState::Idle);
    assert_eq!(machine.apply(empty(2), 2_000), []);
    // A failure seen again while waiting keeps the wait it started (no second schedule).
    machine.apply(failed(), 3_000);
    assert_eq!(machine.apply(failed(), 3_500), []);
    assert_eq!(
        machine.state(),
        &RetryState::Backoff {
            attempt: 1,
            due_ms: 4_000
        }
    );
}

#[test]
fn a_draft_holds_the_retry_until_the_composer_is_seen_empty() {
    let mut machine = RetryMachine::new(config());
    machine.apply(failed(), 0);
    let draft = RetryInput::Evidence(Composer {
        revision: 5,
        empty: false,
    });
    assert_eq!(machine.apply(draft, 1_500), []);
    assert_eq!(machine.tick(2_000), []);
    assert_eq!(machine.state(), &RetryState::Due { attempt: 1 });
    assert_eq!(machine.apply(empty(6), 2_100), send(1, 6));
}

#[test]
fn a_refused_send_is_tried_again_only_at_newer_evidence() {
    let mut machine = RetryMachine::new(config());
    machine.apply(failed(), 0);
    machine.apply(empty(7), 10);
    assert_eq!(machine.tick(1_000), send(1, 7));
    assert_eq!(machine.apply(RetryInput::SendConflict, 1_001), []);
    assert_eq!(machine.state(), &RetryState::Due { attempt: 1 });
    // The refused revision is never sent at again.
    assert_eq!(machine.apply(empty(7), 1_002), []);
    assert_eq!(machine.apply(empty(8), 1_003), send(1, 8));
}

#[test]
fn no_attempts_flags_a_failure_at_once() {
    let mut machine = RetryMachine::new(RetryConfig {
        attempts: 0,
        ..config()
    });
    assert_eq!(
        machine.apply(failed(), 0),
        [RetryAction::Flagged {
            attempts: 0,
            detail: "overloaded".into()
        }]
    );
    // A person acting on a flagged pane clears it without a cancel (nothing was pending).
    assert_eq!(machine.apply(RetryInput::HumanInput, 1), []);
    assert_eq!(machine.state(), &RetryState::Idle);
}
