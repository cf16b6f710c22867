//! The turn-boundary path of `belfry dispatch` (spec §7.5): messages a hook hands to the
//! harness itself instead of a typed notice.
//!
//! A claim's event is validated like an adapter's, then its step applied: a `reserve` holds
//! the claimable messages for one dispatch ([`TurnClaims`], in memory), a `confirm` makes them
//! hook-owned, a `release` lets them go; an older dispatcher's claim owns them at once. Turn
//! continuations count towards a cap, which a prompt the user wrote resets. A file of its own
//! because this state and its rules are apart from notice delivery.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use belfry_ding::protocol::EventBody;
use belfry_ding::{HoldReason, LeaseInput, MessageName};
use belfry_proto::event::HookSeen;
use belfry_proto::reply::Claimed;
use belfry_proto::request as req;

use super::unix_ms;
use super::worker::Worker;

/// How long a turn-boundary reservation holds its messages for a dispatch that has not yet
/// confirmed or released them: far longer than writing one answer takes, and short enough that
/// a dispatch killed by its harness's hook timeout delays the mail only a little (the messages
/// are pending again after it). `BELFRY_DING_CLAIM_TIMEOUT_MS` overrides it.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(5);

/// The default cap of consecutive belfry-caused turn-stop continuations of one pane (spec
/// §7.5); `BELFRY_DING_MAX_CONTINUATIONS` overrides it.
const MAX_CONTINUATIONS: u32 = 3;

/// The turn-boundary tunables: how long a reservation holds, and the continuation cap.
fn claim_config() -> (Duration, u32) {
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let timeout = knob("BELFRY_DING_CLAIM_TIMEOUT_MS").map_or(CLAIM_TIMEOUT, Duration::from_millis);
    let cap = knob("BELFRY_DING_MAX_CONTINUATIONS")
        .and_then(|cap| u32::try_from(cap).ok())
        .unwrap_or(MAX_CONTINUATIONS);
    (timeout, cap)
}

/// What the worker keeps for the turn-boundary path (spec §7.5). In memory on purpose: a
/// reservation lives for one dispatch, and the continuation count for one stretch of turns; a
/// restarted daemon starts both afresh (a reservation's messages are pending again, and the
/// count starts at zero, allowing at most one more cap's worth of continuations).
pub(super) struct TurnClaims {
    /// Reservations of dispatches that have not yet confirmed or released them, by claim id.
    reserved: HashMap<String, Reservation>,
    /// Where the next claim id counts from.
    next_claim: u64,
    /// How long a reservation holds.
    timeout: Duration,
    /// Consecutive belfry-caused continuations since the last turn the user started.
    continuations: u32,
    /// The most of those in a row.
    max_continuations: u32,
    /// Continuations confirmed whose stop the dispatch has not forwarded yet: `belfry
    /// dispatch` confirms a claim before it forwards the hook event, so the `turn-stop` that
    /// follows a continuation is the stop that was continued, not the end of a turn.
    pub(super) continued_stops: u32,
}

/// Messages held for one dispatch until it has written its answer.
struct Reservation {
    names: Vec<MessageName>,
    until: Instant,
}

impl TurnClaims {
    pub(super) fn new() -> TurnClaims {
        let (timeout, max_continuations) = claim_config();
        TurnClaims {
            reserved: HashMap::new(),
            next_claim: 1,
            timeout,
            continuations: 0,
            max_continuations,
            continued_stops: 0,
        }
    }

    /// Drops lapsed reservations (their dispatch never settled them) and returns every message
    /// still held.
    pub(super) fn held(&mut self) -> HashSet<MessageName> {
        let now = Instant::now();
        self.reserved
            .retain(|_, reservation| reservation.until > now);
        self.reserved
            .values()
            .flat_map(|reservation| reservation.names.iter().cloned())
            .collect()
    }
}

impl Worker {
    /// A prompt submitted in the pane (spec §7.4, §7.5): a prompt the user wrote ends the run
    /// of belfry-caused continuations, and a prompt carrying the exact notice DING typed for a
    /// staged message is that notice's `accepted` receipt (the harness took it as a prompt).
    pub(super) fn prompt_submitted(&mut self, event: &HookSeen) {
        if event.prompt == Some(req::PromptOrigin::User) {
            self.turns.continuations = 0;
        }
        for name in &event.notices {
            let Ok(name) = MessageName::parse(name) else {
                continue;
            };
            let outcome = self.ownership.record_receipt(
                &name,
                belfry_ding::protocol::ReceiptState::Accepted,
                unix_ms(),
            );
            match outcome {
                Ok(outcome) => tracing::info!(
                    session = self.info.session,
                    "prompt submit carries the notice of {name}: {outcome:?}"
                ),
                Err(err) => tracing::warn!(
                    session = self.info.session,
                    "cannot record the receipt of {name}: {err}"
                ),
            }
        }
    }

    /// A turn-boundary claim from `belfry dispatch`: its event validated exactly like an
    /// adapter's (except for the adapter's sequence, which it does not share), then the step it
    /// asks for (spec §7.5). Without a step (an older dispatcher) the messages are owned at
    /// once; a `reserve` holds them for the dispatch until its `confirm` (they become
    /// hook-owned) or `release`, or until the reservation lapses.
    pub(super) fn turn_boundary(
        &mut self,
        claim: &req::DingTurnBoundary,
    ) -> Result<Claimed, String> {
        let line = claim.event.to_string();
        let parsed = belfry_ding::protocol::parse_event(&line).map_err(|e| e.to_string())?;
        let EventBody::TurnBoundary { messages, .. } = &parsed.body else {
            return Err(format!(
                "expected a turn-boundary event, got {}",
                parsed.kind()
            ));
        };
        if parsed.header.session.as_str() != self.info.session {
            return Err(format!(
                "event names session {:?}, not {:?}",
                parsed.header.session.as_str(),
                self.info.session
            ));
        }
        if parsed.header.incarnation != self.info.incarnation {
            return Err(HoldReason::IncarnationMismatch.as_str().to_string());
        }
        if parsed.header.generation != self.info.generation {
            return Err(HoldReason::GenerationMismatch.as_str().to_string());
        }
        let purpose = claim.purpose.unwrap_or(req::ClaimPurpose::Context);
        match claim.step {
            None => self.own_at_once(messages),
            Some(req::ClaimStep::Reserve) => Ok(self.reserve(messages, purpose)),
            Some(req::ClaimStep::Confirm) => {
                self.confirm(messages, claim.claim.as_deref(), purpose)
            }
            Some(req::ClaimStep::Release) => {
                if let Some(id) = &claim.claim {
                    self.turns.reserved.remove(id);
                }
                Ok(claimed(&[], messages))
            }
        }
    }

    /// The named messages nobody owns and no dispatch holds, in the event's order.
    fn claimable(&mut self, messages: &[MessageName]) -> Vec<MessageName> {
        // Only messages nobody owns yet may be claimed by the hook: a staged notice already
        // went (or is going) through the PTY.
        let pending = self.pending();
        messages
            .iter()
            .filter(|m| pending.contains(m))
            .cloned()
            .collect()
    }

    /// The one-step claim of dispatchers that do not reserve: owned at once.
    fn own_at_once(&mut self, messages: &[MessageName]) -> Result<Claimed, String> {
        let claimable = self.claimable(messages);
        let unread = self.unread_reconciled();
        let outcome = self
            .ownership
            .record_turn_boundary(&claimable, &unread, unix_ms())
            .map_err(|e| e.to_string())?;
        let refused: Vec<MessageName> = messages
            .iter()
            .filter(|m| !claimable.contains(m))
            .cloned()
            .collect();
        Ok(claimed(&outcome.hook_owned, &refused))
    }

    /// Holds the claimable messages for one dispatch. A continuation past the pane's cap is
    /// refused as a whole (`held: capped`): the turn stops, and the mail waits for the next
    /// tier (spec §7.5).
    fn reserve(&mut self, messages: &[MessageName], purpose: req::ClaimPurpose) -> Claimed {
        if purpose == req::ClaimPurpose::Continuation
            && self.turns.continuations >= self.turns.max_continuations
        {
            tracing::info!(
                session = self.info.session,
                "turn-stop continuation refused: {} in a row already (the cap)",
                self.turns.continuations
            );
            return Claimed {
                held: Some("capped".into()),
                ..claimed(&[], messages)
            };
        }
        let claimable = self.claimable(messages);
        let refused: Vec<MessageName> = messages
            .iter()
            .filter(|m| !claimable.contains(m))
            .cloned()
            .collect();
        if claimable.is_empty() {
            return claimed(&[], &refused);
        }
        let id = format!("claim-{}", self.turns.next_claim);
        self.turns.next_claim += 1;
        let until = Instant::now() + self.turns.timeout;
        self.turns.reserved.insert(
            id.clone(),
            Reservation {
                names: claimable.clone(),
                until,
            },
        );
        Claimed {
            reserved: names(&claimable),
            claim: Some(id),
            ..claimed(&[], &refused)
        }
    }

    /// The dispatch wrote its answer: the messages it reserved (and names again) become
    /// hook-owned, and a continuation counts towards the cap. A reservation that lapsed before
    /// the confirm came still gives the hook the messages nobody took meanwhile: the harness has
    /// their notices.
    fn confirm(
        &mut self,
        messages: &[MessageName],
        claim: Option<&str>,
        purpose: req::ClaimPurpose,
    ) -> Result<Claimed, String> {
        let id = claim.ok_or("a confirm must name the claim its reserve answered")?;
        let names: Vec<MessageName> = match self.turns.reserved.remove(id) {
            Some(reservation) => messages
                .iter()
                .filter(|m| reservation.names.contains(m))
                .cloned()
                .collect(),
            None => {
                tracing::warn!(
                    session = self.info.session,
                    "turn-boundary {id} confirmed after it lapsed"
                );
                self.claimable(messages)
            }
        };
        let unread = self.unread_reconciled();
        let outcome = self
            .ownership
            .record_turn_boundary(&names, &unread, unix_ms())
            .map_err(|e| e.to_string())?;
        if purpose == req::ClaimPurpose::Continuation && !outcome.hook_owned.is_empty() {
            self.turns.continuations += 1;
            self.turns.continued_stops += 1;
            // The harness goes on with its turn instead of stopping, which its screen may
            // not show yet.
            self.apply(LeaseInput::Submitted);
        }
        let refused: Vec<MessageName> = messages
            .iter()
            .filter(|m| !names.contains(m))
            .cloned()
            .collect();
        Ok(claimed(&outcome.hook_owned, &refused))
    }
}

/// A claim's answer: `hook_owned` now owned by the hook, `refused` the rest.
fn claimed(hook_owned: &[MessageName], refused: &[MessageName]) -> Claimed {
    Claimed {
        hook_owned: names(hook_owned),
        refused: names(refused),
        reserved: Vec::new(),
        claim: None,
        held: None,
    }
}

/// Message names as the wire spells them.
fn names(messages: &[MessageName]) -> Vec<String> {
    messages.iter().map(|m| m.as_str().to_owned()).collect()
}
