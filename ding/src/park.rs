//! Quota: warn as a pane nears its usage limit, park it at the limit, resume it once at the
//! reset (issue 44 item 2).
//!
//! [`ParkMachine`] is pure: usage readings, turn events, screen evidence and the time go in,
//! [`ParkAction`]s come out. It never sleeps and does no I/O. The daemon feeds it the pane's
//! [`crate::spend::Quota`] readings and the turns that failed on a rate limit, ticks it, and
//! carries out its actions: the warning event, the DING hold `quota` (no notice is pasted into
//! a parked pane), and the one guarded resume prompt.
//!
//! The rules it keeps:
//! - A warning is given once per usage window, when the used share first reaches the threshold.
//! - At the limit (a reading at or over the park threshold, or a turn that failed on a rate
//!   limit) the pane is parked until the reset; a limit whose reset the harness does not say
//!   parks for a configured wait instead, and says the reset is not known.
//! - At the reset (plus a small margin for clocks that disagree) one resume prompt is sent, as
//!   a guarded send at a revision where the composer was seen empty; a refused send waits for
//!   newer evidence, and a turn someone else starts first makes the prompt unneeded.

use crate::retry::Composer;

/// When to warn and park, and what to say at the reset.
#[derive(Clone, Debug, PartialEq)]
pub struct ParkConfig {
    /// Warn when the used share of the window reaches this fraction (0.8 = 80 %).
    pub warn_at: f64,
    /// Park when the used share reaches this fraction (1.0 = at the limit).
    pub park_at: f64,
    /// Milliseconds after the stated reset before resuming, for clocks that disagree.
    pub resume_margin_ms: u64,
    /// How long to park when a limit is hit and the harness states no reset time.
    pub unknown_reset_wait_ms: u64,
    /// The text of the resume prompt.
    pub prompt: String,
}

impl Default for ParkConfig {
    fn default() -> Self {
        ParkConfig {
            warn_at: 0.8,
            park_at: 1.0,
            resume_margin_ms: 5_000,
            unknown_reset_wait_ms: 15 * 60 * 1000,
            prompt: "The usage limit has reset. Please continue where you left off.".to_string(),
        }
    }
}

/// What the park machine hears.
#[derive(Clone, Debug, PartialEq)]
pub enum ParkInput {
    /// A reading of the usage window: `used` of `limit`, resetting at `resets_at_ms`.
    Usage {
        /// How much is used.
        used: f64,
        /// The limit, in the unit of `used`.
        limit: f64,
        /// When the window resets, in the machine's clock (milliseconds).
        resets_at_ms: u64,
    },
    /// A turn ended on a rate limit; the reset, when the harness says it.
    LimitHit {
        /// When the limit resets, if stated.
        resets_at_ms: Option<u64>,
    },
    /// The screen's latest evidence about the composer.
    Evidence(Composer),
    /// A turn started (someone submitted, or the resume prompt did).
    TurnStarted,
    /// The guarded send of the resume prompt was written.
    Sent,
    /// The guarded send found the pane changed and wrote nothing.
    SendConflict,
}

/// What the daemon should do.
#[derive(Clone, Debug, PartialEq)]
pub enum ParkAction {
    /// The window is filling: emit a warning event.
    Warn {
        /// The used share, 0.0 to 1.0 and over.
        share: f64,
        /// When the window resets.
        resets_at_ms: u64,
    },
    /// Park the pane: DING holds its mail with reason `quota` until `until_ms`; `top` shows it.
    Park {
        /// When the machine will try to resume.
        until_ms: u64,
        /// Whether the harness stated the reset (otherwise the configured wait is used).
        reset_known: bool,
    },
    /// Send the resume prompt as a guarded send expecting `expect_revision`.
    Resume {
        /// The prompt.
        text: String,
        /// The revision the composer was seen empty at.
        expect_revision: u64,
    },
    /// Lift the `quota` hold: the pane was resumed (by the prompt, or by a turn someone else
    /// started after the reset).
    Unpark,
}

/// Where the machine is.
#[derive(Clone, Debug, PartialEq)]
pub enum ParkState {
    /// Under the limit.
    Running,
    /// Parked until `until_ms`.
    Parked {
        /// When the machine tries to resume.
        until_ms: u64,
    },
    /// The reset has passed; waiting for the composer to be seen empty.
    Resuming,
    /// The resume prompt's send was issued at `revision`.
    Sending {
        /// The revision the send expected.
        revision: u64,
    },
}

/// The quota park/resume machine of one pane.
#[derive(Clone, Debug)]
pub struct ParkMachine {
    config: ParkConfig,
    state: ParkState,
    evidence: Option<Composer>,
    conflicted_at: Option<u64>,
    /// The reset of the window a warning was given for: one warning per window.
    warned_for: Option<u64>,
}

impl ParkMachine {
    /// A machine for a pane under its limit.
    pub fn new(config: ParkConfig) -> ParkMachine {
        ParkMachine {
            config,
            state: ParkState::Running,
            evidence: None,
            conflicted_at: None,
            warned_for: None,
        }
    }

    /// Where the machine is.
    pub fn state(&self) -> &ParkState {
        &self.state
    }

    /// Takes one input at `now_ms` and gives the actions it leads to.
    pub fn apply(&mut self, input: ParkInput, now_ms: u64) -> Vec<ParkAction> {
        let mut actions = Vec::new();
        match input {
            ParkInput::Usage {
                used,
                limit,
                resets_at_ms,
            } => self.usage(used, limit, resets_at_ms, now_ms, &mut actions),
            ParkInput::LimitHit { resets_at_ms } => {
                let until_ms = match resets_at_ms {
                    Some(reset) => reset.saturating_add(self.config.resume_margin_ms),
                    None => now_ms.saturating_add(self.config.unknown_reset_wait_ms),
                };
                self.park(until_ms, resets_at_ms.is_some(), &mut actions);
            }
            ParkInput::Evidence(composer) => self.evidence = Some(composer),
            ParkInput::TurnStarted => {
                // After the reset, a turn someone else started resumes the pane as well as the
                // prompt would: the prompt is not sent on top of it.
                if matches!(self.state, ParkState::Resuming | ParkState::Sending { .. }) {
                    self.state = ParkState::Running;
                    actions.push(ParkAction::Unpark);
                }
            }
            ParkInput::Sent => {
                if let ParkState::Sending { .. } = self.state {
                    self.state = ParkState::Running;
                    actions.push(ParkAction::Unpark);
                }
            }
            ParkInput::SendConflict => {
                if let ParkState::Sending { revision } = self.state {
                    self.conflicted_at = Some(revision);
                    self.state = ParkState::Resuming;
                }
            }
        }
        self.advance(now_ms, &mut actions);
        actions
    }

    /// Lets time pass: at the reset the pane starts resuming.
    pub fn tick(&mut self, now_ms: u64) -> Vec<ParkAction> {
        let mut actions = Vec::new();
        self.advance(now_ms, &mut actions);
        actions
    }

    fn usage(
        &mut self,
        used: f64,
        limit: f64,
        resets_at_ms: u64,
        now_ms: u64,
        actions: &mut Vec<ParkAction>,
    ) {
        // A limit of zero or less, a number that is not finite, or a window whose reset has
        // passed (a stale reading: that window is over) says nothing usable.
        if !limit.is_finite() || limit <= 0.0 || !used.is_finite() || resets_at_ms <= now_ms {
            return;
        }
        let share = used / limit;
        match self.state {
            ParkState::Running => {
                if share >= self.config.park_at {
                    let until_ms = resets_at_ms.saturating_add(self.config.resume_margin_ms);
                    self.park(until_ms, true, actions);
                } else if share >= self.config.warn_at && self.warned_for != Some(resets_at_ms) {
                    self.warned_for = Some(resets_at_ms);
                    actions.push(ParkAction::Warn {
                        share,
                        resets_at_ms,
                    });
                }
            }
            // A window already under the threshold again (it rolled over early) ends the wait.
            ParkState::Parked { .. } if share < self.config.park_at => {
                self.state = ParkState::Resuming;
            }
            // A later reset than the one parked for moves the wait.
            ParkState::Parked { until_ms } => {
                let later = resets_at_ms.saturating_add(self.config.resume_margin_ms);
                if later > until_ms {
                    self.park(later, true, actions);
                }
            }
            ParkState::Resuming | ParkState::Sending { .. } => {}
        }
    }

    fn park(&mut self, until_ms: u64, reset_known: bool, actions: &mut Vec<ParkAction>) {
        if let ParkState::Parked { until_ms: already } = self.state {
            if already >= until_ms {
                return;
            }
        }
        self.state = ParkState::Parked { until_ms };
        // Evidence from before the park says nothing about the composer at the reset.
        self.evidence = None;
        self.conflicted_at = None;
        actions.push(ParkAction::Park {
            until_ms,
            reset_known,
        });
    }

    fn advance(&mut self, now_ms: u64, actions: &mut Vec<ParkAction>) {
        if let ParkState::Parked { until_ms } = self.state {
            if now_ms >= until_ms {
                self.state = ParkState::Resuming;
            }
        }
        if self.state != ParkState::Resuming {
            return;
        }
        // One prompt, at the revision its evidence was read at (the rule both machines share).
        if let Some(revision) = Composer::writable(self.evidence, self.conflicted_at) {
            self.state = ParkState::Sending { revision };
            actions.push(ParkAction::Resume {
                text: self.config.prompt.clone(),
                expect_revision: revision,
            });
        }
    }
}
