//! The quota park/resume machine, driven by a clock the test holds (milliseconds passed in; no
//! sleeps): the warning once per window, the park at the limit (with a stated reset or
//! without), the one guarded resume prompt at the reset and every way it waits or is not
//! needed.

use belfry_ding::park::{ParkAction, ParkConfig, ParkInput, ParkMachine, ParkState};
use belfry_ding::retry::Composer;

fn config() -> ParkConfig {
    ParkConfig {
        warn_at: 0.8,
        park_at: 1.0,
        resume_margin_ms: 1_000,
        unknown_reset_wait_ms: 60_000,
        prompt: "RESUME".into(),
    }
}

fn usage(used: f64, resets_at_ms: u64) -> ParkInput {
    ParkInput::Usage {
        used,
        limit: 100.0,
        resets_at_ms,
    }
}

fn composer(revision: u64, empty: bool) -> ParkInput {
    ParkInput::Evidence(Composer { revision, empty })
}

fn resume(revision: u64) -> Vec<ParkAction> {
    vec![ParkAction::Resume {
        text: "RESUME".into(),
        expect_revision: revision,
    }]
}

#[test]
fn a_filling_window_warns_once_per_window() {
    let mut machine = ParkMachine::new(config());
    assert_eq!(machine.apply(usage(50.0, 500_000), 0), []);
    assert_eq!(
        machine.apply(usage(80.0, 500_000), 10),
        [ParkAction::Warn {
            share: 0.8,
            resets_at_ms: 500_000
        }]
    );
    assert_eq!(machine.apply(usage(95.0, 500_000), 20), []);
    // The next window warns again.
    assert_eq!(machine.apply(usage(10.0, 900_000), 600_000), []);
    assert_eq!(
        machine.apply(usage(85.0, 900_000), 600_010),
        [ParkAction::Warn {
            share: 0.85,
            resets_at_ms: 900_000
        }]
    );
    assert_eq!(machine.state(), &ParkState::Running);
}

#[test]
fn at_the_limit_the_pane_is_parked_and_resumed_once_after_the_reset() {
    let mut machine = ParkMachine::new(config());
    assert_eq!(
        machine.apply(usage(100.0, 50_000), 0),
        [ParkAction::Park {
            until_ms: 51_000,
            reset_known: true
        }]
    );
    // Parked: an empty composer before the reset gets nothing.
    assert_eq!(machine.apply(composer(4, true), 10_000), []);
    assert_eq!(machine.tick(50_999), []);
    assert_eq!(machine.state(), &ParkState::Parked { until_ms: 51_000 });
    assert_eq!(machine.tick(51_000), resume(4));
    assert_eq!(machine.state(), &ParkState::Sending { revision: 4 });
    assert_eq!(machine.apply(ParkInput::Sent, 51_001), [ParkAction::Unpark]);
    assert_eq!(machine.state(), &ParkState::Running);
    // One prompt only: more evidence and time send nothing.
    assert_eq!(machine.apply(composer(5, true), 51_002), []);
    assert_eq!(machine.tick(200_000), []);
}

#[test]
fn a_turn_that_hit_the_limit_parks_until_the_stated_reset_or_a_wait_when_none_is_stated() {
    let mut machine = ParkMachine::new(config());
    assert_eq!(
        machine.apply(
            ParkInput::LimitHit {
                resets_at_ms: Some(30_000)
            },
            1_000
        ),
        [ParkAction::Park {
            until_ms: 31_000,
            reset_known: true
        }]
    );
    let mut unknown = ParkMachine::new(config());
    assert_eq!(
        unknown.apply(ParkInput::LimitHit { resets_at_ms: None }, 1_000),
        [ParkAction::Park {
            until_ms: 61_000,
            reset_known: false
        }]
    );
    assert_eq!(unknown.apply(composer(2, true), 60_999), []);
    assert_eq!(unknown.tick(61_000), resume(2));
}

#[test]
fn the_resume_waits_for_an_empty_composer_and_a_refused_send_for_newer_evidence() {
    let mut machine = ParkMachine::new(config());
    machine.apply(usage(100.0, 10_000), 0);
    assert_eq!(machine.apply(composer(3, false), 10_500), []);
    assert_eq!(machine.tick(11_000), []);
    assert_eq!(machine.state(), &ParkState::Resuming);
    assert_eq!(machine.apply(composer(4, true), 11_100), resume(4));
    assert_eq!(machine.apply(ParkInput::SendConflict, 11_101), []);
    assert_eq!(machine.state(), &ParkState::Resuming);
    assert_eq!(machine.apply(composer(4, true), 11_102), []);
    assert_eq!(machine.apply(composer(6, true), 11_103), resume(6));
}

#[test]
fn a_turn_someone_else_starts_after_the_reset_makes_the_prompt_unneeded() {
    let mut machine = ParkMachine::new(config());
    machine.apply(usage(100.0, 10_000), 0);
    // A turn while parked (a person's) does not lift the park before the reset.
    assert_eq!(machine.apply(ParkInput::TurnStarted, 5_000), []);
    assert_eq!(machine.tick(11_000), []);
    assert_eq!(
        machine.apply(ParkInput::TurnStarted, 11_500),
        [ParkAction::Unpark]
    );
    assert_eq!(machine.apply(composer(9, true), 11_600), []);
    assert_eq!(machine.state(), &ParkState::Running);
}

#[test]
fn a_window_that_rolls_over_early_ends_the_park_and_a_later_reset_moves_it() {
    let mut machine = ParkMachine::new(config());
    machine.apply(usage(100.0, 100_000), 0);
    assert_eq!(
        machine.apply(usage(100.0, 200_000), 1_000),
        [ParkAction::Park {
            until_ms: 201_000,
            reset_known: true
        }]
    );
    // An earlier reset never shortens the wait.
    assert_eq!(machine.apply(usage(100.0, 150_000), 2_000), []);
    assert_eq!(machine.state(), &ParkState::Parked { until_ms: 201_000 });
    machine.apply(composer(2, true), 2_500);
    assert_eq!(machine.apply(usage(3.0, 400_000), 3_000), resume(2));
}

#[test]
fn a_reading_without_a_usable_limit_is_ignored() {
    let mut machine = ParkMachine::new(config());
    let zero = ParkInput::Usage {
        used: 5.0,
        limit: 0.0,
        resets_at_ms: 1_000,
    };
    assert_eq!(machine.apply(zero, 0), []);
    assert_eq!(machine.apply(usage(f64::NAN, 1_000), 0), []);
    // A reading at the limit whose reset has already passed (stale) neither parks nor warns.
    assert_eq!(machine.apply(usage(100.0, 1_000), 5_000), []);
    assert_eq!(machine.state(), &ParkState::Running);
}
