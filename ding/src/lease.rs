//! The lease state machine of the rich policy (spec §7.4), pure and clock-injected.
//!
//! A **lease** is DING's permission to attempt one guarded send. It exists only after an
//! `activity` event with `state:"idle"` and `composer:"empty"` whose identity matches the pane's
//! current session, incarnation and generation. It is anchored at the time the event was
//! received, lasts `min(validForMs, max_lease_ms)`, and ends at the first of: expiry, any newer
//! input of any kind, or [`LeaseMachine::take_lease`], which consumes it. Everything else is a
//! hold with a [`HoldReason`], and a hold sends nothing.
//!
//! The machine does no I/O and reads no clock: the engine passes `now_ms` from one monotonic
//! millisecond clock (any origin) to every call. It is fed [`LeaseInput`]s as things happen and
//! asked [`LeaseMachine::take_lease`] when it has an unread, unowned message to announce. The
//! returned [`Expect`] is exactly the `expect` object of the guarded send (spec §3): the
//! protocol's own type, naming every field of the [`Identity`] the adapter judged, so a pane
//! that changed in any way since then turns the send into a conflict.
//!
//! A send that submitted a notice starts a turn the adapter may not have seen yet: between the
//! Enter and the harness showing it is busy, its screen can look idle with an empty composer
//! (seen on a real harness in the A/B evaluation: a second notice typed in that moment was
//! taken as a steer and cut the first one's answer off). After [`LeaseInput::Submitted`], an idle report gives a lease only once
//! the idle has lasted `submit_settle_ms` since the last sign of that turn (a turn-start hook,
//! an `active` or `child` report), or, when no sign of a turn came at all, `submit_unseen_ms`
//! since the submit; until then the hold is [`HoldReason::Submitted`]. The harness's own
//! turn-stop ([`LeaseInput::TurnEnded`]) ends that wait at once.
//!
//! A person's input is a submit belfry did not make ([`LeaseInput::Typed`]): right after a
//! person pressed Enter, the harness still looks as idle as before, with a composer that has
//! just emptied, until its prompt-submit hook shows the turn (seen with two real harnesses: a
//! notice typed in that moment joined the person's prompt). So typing ends the idle the last
//! report described, and the same wait follows, held as [`HoldReason::Typed`]. The harness's
//! turn-stop ends it only once a sign of a turn came after the typing: a stop of the turn that
//! was running while the person typed ahead says nothing of the turn their Enter queued.
//!
//! A clear ([`LeaseInput::Clear`]: the harness's session-start hook says a fresh conversation
//! began in the same process) is the harness's answer to the last submit, typically the
//! person's own `/clear` or `/new`: it signs that submit as taken, so the wait after it is the
//! settle time from the clear, not `submit_unseen_ms` for a turn that will never show.
//!
//! The harness's own program status (OSC 7501, [`LeaseInput::ProgramStatus`]) vetoes: while it
//! says `working` or `blocked`, every idle report is held as [`HoldReason::Working`] or
//! [`HoldReason::Blocked`], and its start is a sign of a turn. Its `idle` lifts the veto only;
//! the adapter, which sees the same status in the snapshot it judges, is what reports idle.
//!
//! Silence is a hold too: when the last thing heard from the adapter is older than
//! `event_timeout_ms`, the machine reports [`HoldReason::Timeout`] instead of the stale reason.
//! Adapters are expected to repeat their activity at least that often.

use belfry_proto::{Expect, Identity};
use serde::Serialize;

use crate::hold::HoldReason;
use crate::names::SessionName;
use crate::protocol::{ActivityState, AdapterEvent, ComposerState, EventBody, EventHeader};

/// The default cap on a lease's life, in milliseconds (spec §7.4: `max-lease-ms`, default 1000).
pub const DEFAULT_MAX_LEASE_MS: u64 = 1000;

/// The default silence, in milliseconds, after which the adapter counts as timed out.
pub const DEFAULT_EVENT_TIMEOUT_MS: u64 = 15_000;

/// After a submitted notice, how long (ms) the idle must have lasted since the last sign of the
/// turn it started before it gives a lease again.
pub const DEFAULT_SUBMIT_SETTLE_MS: u64 = 1000;

/// After a submitted notice that no sign of a turn followed, how long (ms) from the submit
/// before an idle report gives a lease again: the harness took the input without starting a
/// turn (or the signs were lost), and mail must not wait for ever.
pub const DEFAULT_SUBMIT_UNSEEN_MS: u64 = 10_000;

/// Tunables of the lease machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LeaseConfig {
    /// The longest a lease lasts, whatever the adapter's `validForMs` says.
    pub max_lease_ms: u64,
    /// Adapter silence after which holds read [`HoldReason::Timeout`].
    pub event_timeout_ms: u64,
    /// After a submit, the idle needed since the last sign of its turn.
    pub submit_settle_ms: u64,
    /// After a submit no sign of a turn followed, the time needed since the submit.
    pub submit_unseen_ms: u64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            max_lease_ms: DEFAULT_MAX_LEASE_MS,
            event_timeout_ms: DEFAULT_EVENT_TIMEOUT_MS,
            submit_settle_ms: DEFAULT_SUBMIT_SETTLE_MS,
            submit_unseen_ms: DEFAULT_SUBMIT_UNSEEN_MS,
        }
    }
}

/// Who the pane is right now (spec §2): the fields an adapter event must name. Unlike the
/// protocol's [`Identity`] it has no revision, which moves with every byte of I/O and is judged
/// per event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PaneIdentity {
    /// The pane's session name.
    pub session: SessionName,
    /// The current process incarnation.
    pub incarnation: String,
    /// The current launch generation.
    pub generation: String,
}

/// What the machine says at a given moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// A lease is held; one send may be attempted before `expires_at_ms`.
    Leased {
        /// The revision the send will expect.
        revision: u64,
        /// When the lease lapses, on the engine's clock.
        expires_at_ms: u64,
    },
    /// No lease, for this reason.
    Held(HoldReason),
}

/// Everything that can happen to the machine.
#[derive(Clone, Copy, Debug)]
pub enum LeaseInput<'a> {
    /// A valid adapter (or turn-boundary) event, and the pane's revision when it was received.
    Event {
        /// The validated event.
        event: &'a AdapterEvent,
        /// The pane's revision at receipt, used when the event names none.
        pane_revision: u64,
    },
    /// A line the protocol validator rejected, with its reason.
    EventRejected(HoldReason),
    /// A new adapter process was started; it has not spoken yet.
    AdapterStarted,
    /// The adapter closed its output or exited.
    AdapterExited,
    /// The adapter could not be started, or reading it failed.
    AdapterError,
    /// No adapter is running or reachable.
    AdapterUnreachable,
    /// The pane restarted; this is its new identity.
    PaneRestarted(&'a PaneIdentity),
    /// The pane's process exited; nothing is leased until it restarts.
    PaneExited,
    /// The harness compacted its context (lifecycle event).
    Compaction,
    /// The harness cleared its context (lifecycle event).
    Clear,
    /// The harness started a turn (a prompt-submit or before-tool hook, seen through
    /// dispatch): it is busy now, whatever its adapter last said. The adapter reports `active`
    /// too, but only once it has seen the same hook; until then an idle lease would outlive
    /// the turn's start.
    TurnStarted,
    /// The daemon restarted and cannot trust anything it did not see.
    DaemonRestarted,
    /// A guarded send found the pane changed and wrote nothing.
    SendConflict,
    /// DING wrote (or may have written) a notice and its Enter, or a turn-stop hook was
    /// answered with mail to continue on: the harness is starting a turn it may not show yet.
    Submitted,
    /// The harness's turn-stop hook (one belfry did not continue): whatever turn a submit
    /// started has ended, so the next idle report needs no settling.
    TurnEnded,
    /// Input from outside the program (a person's keystrokes, a supervisor's send): the idle
    /// the last report described is over. With `submit` (the input held an Enter) the next
    /// idle counts only as after a submit; without, only once the harness has had the settle
    /// time to draw what was typed (its composer can look empty until it has).
    Typed {
        /// Whether the input held an Enter (a CR or a line feed).
        submit: bool,
    },
    /// What the current program's own status (OSC 7501) now says of its turn.
    ProgramStatus(ProgramTurn),
}

/// The program's own status, as the lease machine reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramTurn {
    /// Nothing busy: `idle`, `done`, `error`, or no record at all.
    Rest,
    /// A record says `working`.
    Working,
    /// A record says `blocked`: it waits for a person.
    Blocked,
}

/// A submit whose turn has not been seen to settle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AfterSubmit {
    /// The submit, or the last sign of its turn since.
    since_ms: u64,
    /// Whether a sign of the turn (a turn-start hook, `active`, `child`) came since the submit.
    turn_seen: bool,
    /// Who submitted: [`HoldReason::Submitted`] for belfry, [`HoldReason::Typed`] for a person.
    hold: HoldReason,
    /// Whether the input may have submitted (it held an Enter); typing without one starts no
    /// turn, so it waits only the settle time.
    submit: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Current {
    Leased {
        /// The identity the adapter judged (its revision, or the pane's at receipt).
        judged: Identity,
        anchored_at_ms: u64,
        expires_at_ms: u64,
    },
    /// A hold caused by what the adapter said (or did not say); subject to the timeout.
    AdapterHold(HoldReason),
    /// A hold caused by something else; it stands until the adapter speaks again.
    Hold(HoldReason),
}

/// The lease state machine of one pane.
#[derive(Clone, Debug)]
pub struct LeaseMachine {
    config: LeaseConfig,
    identity: PaneIdentity,
    current: Current,
    last_adapter_input_ms: Option<u64>,
    pane_exited: bool,
    after_submit: Option<AfterSubmit>,
    /// The veto of the program's own status: `working` or `blocked` while it says so.
    program_busy: Option<HoldReason>,
}

impl LeaseMachine {
    /// A machine for a pane whose adapter has not reported yet: held as `unreachable`.
    pub fn new(config: LeaseConfig, identity: PaneIdentity) -> Self {
        LeaseMachine::held(config, identity, HoldReason::Unreachable)
    }

    /// A machine for a pane adopted by a restarted daemon: held as `crash` until the adapter
    /// speaks again (spec §6.0: a new daemon invalidates every lease it did not see start).
    pub fn after_daemon_restart(config: LeaseConfig, identity: PaneIdentity) -> Self {
        LeaseMachine::held(config, identity, HoldReason::Crash)
    }

    fn held(config: LeaseConfig, identity: PaneIdentity, reason: HoldReason) -> Self {
        LeaseMachine {
            config,
            identity,
            current: Current::Hold(reason),
            last_adapter_input_ms: None,
            pane_exited: false,
            after_submit: None,
            program_busy: None,
        }
    }

    /// The pane identity events are checked against.
    pub fn identity(&self) -> &PaneIdentity {
        &self.identity
    }

    /// The machine's tunables.
    pub fn config(&self) -> LeaseConfig {
        self.config
    }

    /// When the adapter was last heard from (a valid or rejected line, or its start).
    pub fn last_adapter_input_ms(&self) -> Option<u64> {
        self.last_adapter_input_ms
    }

    /// Feeds one input. Every input ends the current lease, if any; only a qualifying activity
    /// event starts a new one.
    pub fn apply(&mut self, input: LeaseInput<'_>, now_ms: u64) {
        self.current = match input {
            LeaseInput::Event {
                event,
                pane_revision,
            } => {
                self.last_adapter_input_ms = Some(now_ms);
                let judged = self.judge_event(event, pane_revision, now_ms);
                self.after_submit_gate(event, judged, now_ms)
            }
            LeaseInput::EventRejected(reason) => {
                self.last_adapter_input_ms = Some(now_ms);
                Current::AdapterHold(reason)
            }
            LeaseInput::AdapterStarted => {
                self.last_adapter_input_ms = Some(now_ms);
                Current::AdapterHold(HoldReason::Unreachable)
            }
            LeaseInput::AdapterExited | LeaseInput::AdapterError => {
                Current::Hold(HoldReason::AdapterError)
            }
            LeaseInput::AdapterUnreachable => Current::Hold(HoldReason::Unreachable),
            LeaseInput::PaneRestarted(identity) => {
                let reason = if identity.generation != self.identity.generation {
                    HoldReason::GenerationMismatch
                } else {
                    HoldReason::IncarnationMismatch
                };
                self.identity = identity.clone();
                self.pane_exited = false;
                // A new program has reported nothing.
                self.program_busy = None;
                // A new process starts no turn belfry submitted to the old one.
                self.after_submit = None;
                Current::Hold(reason)
            }
            LeaseInput::PaneExited => {
                self.pane_exited = true;
                Current::Hold(HoldReason::Crash)
            }
            LeaseInput::Compaction => Current::Hold(HoldReason::Compaction),
            LeaseInput::Clear => {
                // The harness says the input it just took was a clear (its session-start hook
                // with source `clear`): that input's outcome is known, and no model turn follows
                // a clear. A person's Enter that typed it waits no longer for a turn that will
                // not come; the settle time counts from here (seen live: mail to a harness
                // just cleared waited the 10 s unseen time without it).
                self.turn_sign(now_ms);
                Current::Hold(HoldReason::Clear)
            }
            LeaseInput::TurnStarted => {
                self.turn_sign(now_ms);
                Current::Hold(HoldReason::Active)
            }
            LeaseInput::DaemonRestarted => {
                self.after_submit = None;
                Current::Hold(HoldReason::Crash)
            }
            LeaseInput::SendConflict => Current::Hold(HoldReason::Conflict),
            LeaseInput::TurnEnded => {
                // A person's input waits for a sign of its own turn first (see the module).
                let typed_unseen = self
                    .after_submit
                    .is_some_and(|after| after.hold == HoldReason::Typed && !after.turn_seen);
                if !typed_unseen {
                    self.after_submit = None;
                }
                match &self.current {
                    // No lease outlives a turn boundary.
                    Current::Leased { .. } => Current::AdapterHold(HoldReason::Stale),
                    other => other.clone(),
                }
            }
            LeaseInput::Submitted => self.submitted(HoldReason::Submitted, true, now_ms),
            LeaseInput::Typed { submit } => {
                // Text typed after an Enter whose turn has not shown does not shorten its wait.
                let pending_submit = self.after_submit.is_some_and(|after| {
                    after.hold == HoldReason::Typed && after.submit && !after.turn_seen
                });
                self.submitted(HoldReason::Typed, submit || pending_submit, now_ms)
            }
            LeaseInput::ProgramStatus(turn) => {
                let busy = match turn {
                    ProgramTurn::Rest => None,
                    ProgramTurn::Working => Some(HoldReason::Working),
                    ProgramTurn::Blocked => Some(HoldReason::Blocked),
                };
                if busy.is_some() && self.program_busy.is_none() {
                    // The program says its turn runs: the settle time of a submit counts
                    // from here.
                    self.turn_sign(now_ms);
                }
                self.program_busy = busy;
                match (&self.current, busy) {
                    (_, Some(reason)) => Current::AdapterHold(reason),
                    // An idle lifts the veto only; the next idle report leases.
                    (Current::Leased { .. }, None) => Current::AdapterHold(HoldReason::Stale),
                    (other, None) => other.clone(),
                }
            }
        };
    }

    /// Input went in that may start a turn not shown yet; `hold` says whose.
    fn submitted(&mut self, hold: HoldReason, submit: bool, now_ms: u64) -> Current {
        self.after_submit = Some(AfterSubmit {
            since_ms: now_ms,
            turn_seen: false,
            hold,
            submit,
        });
        Current::AdapterHold(hold)
    }

    /// A sign that the turn a submit started is running: the settle time counts from here.
    fn turn_sign(&mut self, now_ms: u64) {
        if let Some(after) = &mut self.after_submit {
            after.since_ms = now_ms;
            after.turn_seen = true;
        }
    }

    /// What an event's verdict becomes while a submitted notice's turn has not settled: a
    /// lease only once the idle has lasted long enough (see the module's text).
    fn after_submit_gate(&mut self, event: &AdapterEvent, judged: Current, now_ms: u64) -> Current {
        if self.after_submit.is_none() {
            return judged;
        }
        // Only this pane's own process can show the turn's signs.
        let own = !self.pane_exited && self.identity_mismatch(&event.header).is_none();
        if let EventBody::Activity { state, .. } = &event.body {
            if own && matches!(state, ActivityState::Active | ActivityState::Child) {
                self.turn_sign(now_ms);
            }
        }
        let (Current::Leased { .. }, Some(after)) = (&judged, self.after_submit) else {
            return judged;
        };
        let needed = if after.turn_seen || !after.submit {
            self.config.submit_settle_ms
        } else {
            self.config.submit_unseen_ms
        };
        if now_ms.saturating_sub(after.since_ms) < needed {
            return Current::AdapterHold(after.hold);
        }
        self.after_submit = None;
        judged
    }

    fn judge_event(&self, event: &AdapterEvent, pane_revision: u64, now_ms: u64) -> Current {
        if self.pane_exited {
            // An exited pane takes no input; only a restart (new identity) can lift this.
            return Current::Hold(HoldReason::Crash);
        }
        if let Some(mismatch) = self.identity_mismatch(&event.header) {
            return Current::AdapterHold(mismatch);
        }
        if let Some(reason) = self.program_busy {
            // The program's own word outweighs any report of idle.
            return Current::AdapterHold(reason);
        }
        let EventBody::Activity {
            state,
            composer,
            valid_for_ms,
            revision,
            ..
        } = &event.body
        else {
            // A turn-boundary or receipt is newer than the last activity, which it supersedes.
            return Current::AdapterHold(HoldReason::Stale);
        };
        if let Some(reason) = activity_hold(*state, *composer) {
            return Current::AdapterHold(reason);
        }
        let lifetime_ms = valid_for_ms
            .unwrap_or(self.config.max_lease_ms)
            .min(self.config.max_lease_ms);
        if lifetime_ms == 0 {
            return Current::AdapterHold(HoldReason::Stale);
        }
        Current::Leased {
            judged: Identity {
                incarnation: event.header.incarnation.clone(),
                generation: event.header.generation.clone(),
                revision: revision.unwrap_or(pane_revision),
            },
            anchored_at_ms: now_ms,
            expires_at_ms: now_ms.saturating_add(lifetime_ms),
        }
    }

    /// Compares an event's identity with the pane's. A different session name is reported as an
    /// incarnation mismatch: the event describes some other pane process, never this one.
    fn identity_mismatch(&self, header: &EventHeader) -> Option<HoldReason> {
        if header.session != self.identity.session
            || header.incarnation != self.identity.incarnation
        {
            Some(HoldReason::IncarnationMismatch)
        } else if header.generation != self.identity.generation {
            Some(HoldReason::GenerationMismatch)
        } else {
            None
        }
    }

    /// The state at `now_ms`.
    pub fn state(&self, now_ms: u64) -> LeaseState {
        match &self.current {
            Current::Leased {
                judged,
                anchored_at_ms,
                expires_at_ms,
            } => {
                if self.timed_out(now_ms) {
                    LeaseState::Held(HoldReason::Timeout)
                } else if now_ms < *anchored_at_ms || now_ms >= *expires_at_ms {
                    // A clock that runs backwards is a bug somewhere; fail closed.
                    LeaseState::Held(HoldReason::Stale)
                } else {
                    LeaseState::Leased {
                        revision: judged.revision,
                        expires_at_ms: *expires_at_ms,
                    }
                }
            }
            Current::AdapterHold(_) if self.timed_out(now_ms) => {
                LeaseState::Held(HoldReason::Timeout)
            }
            Current::AdapterHold(reason) | Current::Hold(reason) => LeaseState::Held(*reason),
        }
    }

    /// Consumes the lease, returning what the one send it authorizes must expect: exactly the
    /// identity the adapter judged. spec §7.4: one lease authorizes at most one guarded send, so
    /// a second call without a new qualifying event is a hold (`stale`).
    #[must_use = "a lease was consumed; use its expectation for the guarded send"]
    pub fn take_lease(&mut self, now_ms: u64) -> Result<Expect, HoldReason> {
        match self.state(now_ms) {
            LeaseState::Held(reason) => Err(reason),
            LeaseState::Leased { .. } => {
                let consumed =
                    std::mem::replace(&mut self.current, Current::AdapterHold(HoldReason::Stale));
                match consumed {
                    Current::Leased { judged, .. } => Ok(Expect::exactly(&judged)),
                    // state() reported a lease, so the current state was one.
                    _ => Err(HoldReason::Stale),
                }
            }
        }
    }

    fn timed_out(&self, now_ms: u64) -> bool {
        self.last_adapter_input_ms
            .is_some_and(|heard| now_ms.saturating_sub(heard) >= self.config.event_timeout_ms)
    }
}

/// The hold an activity report implies, `None` for idle with an empty composer.
fn activity_hold(state: ActivityState, composer: ComposerState) -> Option<HoldReason> {
    match (state, composer) {
        (ActivityState::Idle, ComposerState::Empty) => None,
        (ActivityState::Idle, ComposerState::Nonempty) => Some(HoldReason::ComposerNonempty),
        (ActivityState::Idle, ComposerState::Unknown) => Some(HoldReason::ComposerUnknown),
        (ActivityState::Active, _) => Some(HoldReason::Active),
        (ActivityState::Child, _) => Some(HoldReason::Child),
        (ActivityState::Unknown, _) => Some(HoldReason::Unknown),
    }
}
