//! Self-heal: a turn that ended on an API error is tried again, a bounded number of times with
//! exponential backoff, each time as a guarded send into an empty composer (issue 44 item 3).
//!
//! [`RetryMachine`] is pure: inputs and the time go in, [`RetryAction`]s come out. It never
//! sleeps and does no I/O; the daemon feeds it the pane's turn events and screen evidence,
//! ticks it, and carries out its actions (the guarded send, the events, the flag in `top`).
//!
//! The rules it keeps:
//! - Only a turn the adapter classes as a transient API failure starts it; the classing (which
//!   `stop-failure` error, which error row) is the adapter's data, not this module's.
//! - A retry is sent only when the delay has passed and the latest evidence shows the composer
//!   empty; it is sent as a guarded send that expects that evidence's revision, so a pane that
//!   changed since refuses it ([`RetryInput::SendConflict`]) and nothing is typed.
//! - A person's input, or a new turn the retry did not start, cancels it at once.
//! - After the last attempt fails, the pane is flagged and nothing more is sent.

/// How many retries, and how far apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryConfig {
    /// Retries after the failed turn (0 turns self-heal off: a failure is flagged at once).
    pub attempts: u32,
    /// The delay before the first retry, in milliseconds.
    pub first_delay_ms: u64,
    /// Each later delay is the one before times this.
    pub factor: u32,
    /// No delay is longer than this.
    pub max_delay_ms: u64,
    /// The text each retry submits.
    pub prompt: String,
}

impl Default for RetryConfig {
    /// Three retries 5, 10 and 20 s after the failure: enough for a brief overload, short
    /// enough that a person watching is not kept waiting (harnesses retry on their own first).
    fn default() -> Self {
        RetryConfig {
            attempts: 3,
            first_delay_ms: 5_000,
            factor: 2,
            max_delay_ms: 60_000,
            prompt: "The last request failed on an API error. Please continue.".to_string(),
        }
    }
}

impl RetryConfig {
    /// The delay before retry `attempt` (1-based): the first delay, multiplied by the factor
    /// for each attempt before it, never over the maximum.
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        let mut delay = self.first_delay_ms;
        for _ in 1..attempt {
            delay = delay.saturating_mul(u64::from(self.factor));
            if delay >= self.max_delay_ms {
                break;
            }
        }
        delay.min(self.max_delay_ms)
    }
}

/// What the pane's screen proves about its composer, at one revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Composer {
    /// The pane revision the evidence was read at.
    pub revision: u64,
    /// Whether the composer was empty (no draft a send would mix into).
    pub empty: bool,
}

impl Composer {
    /// The revision a guarded send may expect, given the latest `evidence` and the revision of
    /// the last refused send (spec §3): only a composer seen empty, at a revision newer than any
    /// refusal, is written to. Both machines (retry and park) send by this one rule.
    pub(crate) fn writable(evidence: Option<Composer>, refused_at: Option<u64>) -> Option<u64> {
        let composer = evidence?;
        let fresh = refused_at.is_none_or(|refused| composer.revision > refused);
        (composer.empty && fresh).then_some(composer.revision)
    }
}

/// What happens to the pane, as the retry machine hears it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryInput {
    /// A turn ended on an API error the adapter classes as transient (`detail` for the event).
    TurnFailed {
        /// The error, as the harness named it.
        detail: String,
    },
    /// The screen's latest evidence about the composer.
    Evidence(Composer),
    /// A person typed into the pane (an attached client's keys, not a transaction).
    HumanInput,
    /// A turn started.
    TurnStarted,
    /// A turn ended without an error.
    TurnSucceeded,
    /// The guarded send of a retry was written.
    Sent,
    /// The guarded send found the pane changed since the revision it expected and wrote
    /// nothing.
    SendConflict,
}

/// What the daemon should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryAction {
    /// Retry `attempt` of `of` will be due at `due_ms` (an event for `events` and `ding status`).
    Scheduled {
        /// The 1-based attempt.
        attempt: u32,
        /// How many attempts there are.
        of: u32,
        /// When it is due, in the machine's clock.
        due_ms: u64,
    },
    /// Send `text` as a guarded send that expects the pane at `expect_revision`.
    Send {
        /// The 1-based attempt this send is.
        attempt: u32,
        /// The text to submit.
        text: String,
        /// The revision the composer was seen empty at.
        expect_revision: u64,
    },
    /// The pending retry is dropped.
    Cancelled {
        /// Why: `"human-input"` or `"new-turn"`.
        reason: &'static str,
    },
    /// A retried turn completed: the pane healed after `attempts` retries.
    Healed {
        /// The retries it took.
        attempts: u32,
    },
    /// Every attempt failed: flag the pane (in `top`, and as a question where that channel
    /// exists); nothing more is sent.
    Flagged {
        /// The retries made.
        attempts: u32,
        /// The last error.
        detail: String,
    },
}

/// Where the machine is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryState {
    /// No failed turn to heal.
    Idle,
    /// Waiting out the delay before `attempt`.
    Backoff {
        /// The 1-based attempt.
        attempt: u32,
        /// When it is due.
        due_ms: u64,
    },
    /// The delay has passed; waiting for the composer to be seen empty.
    Due {
        /// The 1-based attempt.
        attempt: u32,
    },
    /// The send was issued and its outcome is awaited.
    Sending {
        /// The 1-based attempt.
        attempt: u32,
        /// The revision it expected.
        revision: u64,
    },
    /// The retried turn was written; waiting for it to start and end.
    Running {
        /// The 1-based attempt.
        attempt: u32,
    },
    /// Every attempt failed; the pane is flagged until a turn succeeds or a person acts.
    Flagged,
}

/// The retry state machine of one pane.
#[derive(Clone, Debug)]
pub struct RetryMachine {
    config: RetryConfig,
    state: RetryState,
    /// The latest composer evidence, kept across states: a send needs it.
    evidence: Option<Composer>,
    /// The revision of a send that conflicted: only newer evidence may be sent at.
    conflicted_at: Option<u64>,
    last_detail: String,
}

impl RetryMachine {
    /// A machine with nothing to heal.
    pub fn new(config: RetryConfig) -> RetryMachine {
        RetryMachine {
            config,
            state: RetryState::Idle,
            evidence: None,
            conflicted_at: None,
            last_detail: String::new(),
        }
    }

    /// Where the machine is.
    pub fn state(&self) -> &RetryState {
        &self.state
    }

    /// Takes one input at `now_ms` and gives the actions it leads to.
    pub fn apply(&mut self, input: RetryInput, now_ms: u64) -> Vec<RetryAction> {
        let mut actions = Vec::new();
        match input {
            RetryInput::TurnFailed { detail } => {
                self.last_detail = detail;
                let next = match self.state {
                    RetryState::Running { attempt } | RetryState::Sending { attempt, .. } => {
                        attempt + 1
                    }
                    // A failure while waiting is the same failure seen again: keep the wait.
                    RetryState::Backoff { .. } | RetryState::Due { .. } => return actions,
                    RetryState::Idle | RetryState::Flagged => 1,
                };
                self.schedule(next, now_ms, &mut actions);
            }
            RetryInput::Evidence(composer) => {
                self.evidence = Some(composer);
            }
            RetryInput::HumanInput => {
                // A person acting takes the pane over: a pending retry would type into what
                // they are doing, and a flag has been seen.
                if self.is_pending() {
                    actions.push(RetryAction::Cancelled {
                        reason: "human-input",
                    });
                }
                self.reset();
            }
            RetryInput::TurnStarted => match self.state {
                // The turn the retry submitted.
                RetryState::Sending { attempt, .. } | RetryState::Running { attempt } => {
                    self.state = RetryState::Running { attempt };
                }
                RetryState::Backoff { .. } | RetryState::Due { .. } => {
                    actions.push(RetryAction::Cancelled { reason: "new-turn" });
                    self.reset();
                }
                RetryState::Idle | RetryState::Flagged => self.reset(),
            },
            RetryInput::TurnSucceeded => {
                if let RetryState::Running { attempt } | RetryState::Sending { attempt, .. } =
                    self.state
                {
                    actions.push(RetryAction::Healed { attempts: attempt });
                }
                self.reset();
            }
            RetryInput::Sent => {
                if let RetryState::Sending { attempt, .. } = self.state {
                    self.state = RetryState::Running { attempt };
                }
            }
            RetryInput::SendConflict => {
                if let RetryState::Sending { attempt, revision } = self.state {
                    // Nothing was typed; try again only at evidence newer than the refusal.
                    self.conflicted_at = Some(revision);
                    self.state = RetryState::Due { attempt };
                }
            }
        }
        self.advance(now_ms, &mut actions);
        actions
    }

    /// Lets time pass: a delay that ended makes its retry due.
    pub fn tick(&mut self, now_ms: u64) -> Vec<RetryAction> {
        let mut actions = Vec::new();
        self.advance(now_ms, &mut actions);
        actions
    }

    /// Whether a retry is waiting or being sent (a flag or a running retried turn is not
    /// pending: nothing more would be typed).
    fn is_pending(&self) -> bool {
        matches!(
            self.state,
            RetryState::Backoff { .. } | RetryState::Due { .. } | RetryState::Sending { .. }
        )
    }

    fn reset(&mut self) {
        self.state = RetryState::Idle;
        self.conflicted_at = None;
    }

    fn schedule(&mut self, attempt: u32, now_ms: u64, actions: &mut Vec<RetryAction>) {
        if attempt > self.config.attempts {
            self.state = RetryState::Flagged;
            actions.push(RetryAction::Flagged {
                attempts: attempt - 1,
                detail: self.last_detail.clone(),
            });
            return;
        }
        let due_ms = now_ms.saturating_add(self.config.delay_ms(attempt));
        self.state = RetryState::Backoff { attempt, due_ms };
        // Evidence from before the failure says nothing about the composer after it.
        self.evidence = None;
        self.conflicted_at = None;
        actions.push(RetryAction::Scheduled {
            attempt,
            of: self.config.attempts,
            due_ms,
        });
    }

    fn advance(&mut self, now_ms: u64, actions: &mut Vec<RetryAction>) {
        if let RetryState::Backoff { attempt, due_ms } = self.state {
            if now_ms >= due_ms {
                self.state = RetryState::Due { attempt };
            }
        }
        let RetryState::Due { attempt } = self.state else {
            return;
        };
        // The send expects exactly the revision its evidence was read at.
        if let Some(revision) = Composer::writable(self.evidence, self.conflicted_at) {
            self.state = RetryState::Sending { attempt, revision };
            actions.push(RetryAction::Send {
                attempt,
                text: self.config.prompt.clone(),
                expect_revision: revision,
            });
        }
    }
}
