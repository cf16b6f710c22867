//! The data model of `belfry ding status SESSION [--json]` (spec §7.4).
//!
//! The engine fills a [`DingStatus`] from its live pieces (policy, adapter process, lease
//! machine, ownership store, inbox); the CLI prints it as JSON (`serde`) or as text
//! ([`DingStatus::render_text`]). It reads back (`Deserialize`) into the same types, so the
//! daemon's `ding.status` answer is written and read through one model. A permanently held agent must be visible here, so every unread
//! message is listed with its state, and a pending message under a held lease shows the reason.
//!
//! All text that came from a message or an adapter is passed through
//! [`crate::notice::sanitize_field`] before it is stored here, so the text rendering is safe to
//! print to a terminal.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hold::{HoldReason, UnknownHoldReason};
use crate::lease::LeaseState;
use crate::message::FrontMatter;
use crate::names::{MessageName, SessionName};
use crate::notice::{display_sender, display_subject, sanitize_field};
use crate::ownership::DeliveryState;
use crate::policy::DeliveryPolicy;
use crate::presence::Presence;
use crate::protocol::{ActivityState, AdapterEvent, ComposerState, EventBody, ReceiptState};

/// Everything `belfry ding status` shows for one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DingStatus {
    /// The session.
    pub session: SessionName,
    /// The delivery policy.
    pub policy: DeliveryPolicy,
    /// The adapter sidecar's process state.
    pub adapter: AdapterProcessState,
    /// The agent's declared presence, if any.
    pub presence: Option<Presence>,
    /// The last line read from the adapter, accepted or not.
    pub last_event: Option<LastEvent>,
    /// The lease, under the rich policy.
    pub lease: LeaseStatus,
    /// Why notices wait because the pane's program does not accept input yet (its adapter's
    /// readiness rule, spec §10), while they do; absent once it is ready or without a rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_ready: Option<String>,
    /// Every unread message, FIFO.
    pub messages: Vec<MessageStatus>,
    /// Counters since the engine started.
    pub counters: Counters,
}

/// The adapter sidecar's process state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum AdapterProcessState {
    /// The policy has no adapter.
    NotConfigured,
    /// Started, not yet heard from.
    Starting {
        /// Its process id.
        pid: u32,
    },
    /// Running.
    Running {
        /// Its process id.
        pid: u32,
    },
    /// Exited; will be restarted after a backoff.
    Backoff {
        /// Its exit code, if it exited normally.
        exit_code: Option<i32>,
        /// The signal that ended it, if any.
        signal: Option<i32>,
        /// How long until the next start.
        retry_in_ms: u64,
        /// How many times it has been restarted.
        restarts: u32,
    },
    /// Could not be started.
    Failed {
        /// Why, as the operating system said it.
        error: String,
    },
}

/// The last line read from the adapter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastEvent {
    /// `activity`, `turn-boundary`, `receipt`, or `rejected`.
    pub kind: String,
    /// Its sequence number, when it was valid.
    pub sequence: Option<u64>,
    /// When it was received.
    pub received_at_unix_ms: u64,
    /// A one-line, terminal-safe summary.
    pub summary: String,
}

impl LastEvent {
    /// Summarises a valid event.
    pub fn accepted(event: &AdapterEvent, received_at_unix_ms: u64) -> Self {
        LastEvent {
            kind: event.kind().to_owned(),
            sequence: Some(event.header.sequence),
            received_at_unix_ms,
            summary: summarize(&event.body),
        }
    }

    /// Summarises a rejected line.
    pub fn rejected(reason: HoldReason, received_at_unix_ms: u64) -> Self {
        LastEvent {
            kind: "rejected".to_owned(),
            sequence: None,
            received_at_unix_ms,
            summary: format!("held as {reason}"),
        }
    }
}

fn summarize(body: &EventBody) -> String {
    match body {
        EventBody::Activity {
            state,
            composer,
            valid_for_ms,
            revision,
            reason,
        } => {
            let mut parts = vec![
                activity_word(*state).to_owned(),
                format!("composer {}", composer_word(*composer)),
            ];
            parts.extend(revision.map(|revision| format!("revision {revision}")));
            parts.extend(valid_for_ms.map(|valid_for_ms| format!("valid {valid_for_ms} ms")));
            let mut summary = parts.join(", ");
            if let Some(reason) = reason {
                summary.push_str(&format!(" ({})", sanitize_field(reason, 80)));
            }
            summary
        }
        EventBody::TurnBoundary {
            messages,
            unrecognized,
        } => {
            let mut summary = format!("{} message(s)", messages.len());
            if !unrecognized.is_empty() {
                summary.push_str(&format!(", {} unrecognized name(s)", unrecognized.len()));
            }
            summary
        }
        EventBody::Receipt { message, state } => {
            format!("{message} {}", receipt_word(*state))
        }
    }
}

fn activity_word(state: ActivityState) -> &'static str {
    match state {
        ActivityState::Idle => "idle",
        ActivityState::Active => "active",
        ActivityState::Child => "child",
        ActivityState::Unknown => "unknown",
    }
}

fn composer_word(composer: ComposerState) -> &'static str {
    match composer {
        ComposerState::Empty => "empty",
        ComposerState::Nonempty => "nonempty",
        ComposerState::Unknown => "unknown",
    }
}

fn receipt_word(state: ReceiptState) -> &'static str {
    match state {
        ReceiptState::Accepted => "accepted",
        ReceiptState::RetainedSafe => "retained-safe",
        ReceiptState::RetainedBlocked => "retained-blocked",
        ReceiptState::NotRetained => "not-retained",
        ReceiptState::Unproven => "unproven",
    }
}

/// The lease as status shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum LeaseStatus {
    /// The aggressive policy has no leases.
    NotApplicable,
    /// A lease is held.
    Leased {
        /// The revision the send will expect.
        revision: u64,
        /// How long it has left.
        expires_in_ms: u64,
    },
    /// Held.
    Held {
        /// Why.
        reason: HoldReason,
    },
}

impl LeaseStatus {
    /// Converts the lease machine's state at `now_ms` (the engine's monotonic clock).
    pub fn from_state(state: LeaseState, now_ms: u64) -> Self {
        match state {
            LeaseState::Leased {
                revision,
                expires_at_ms,
            } => LeaseStatus::Leased {
                revision,
                expires_in_ms: expires_at_ms.saturating_sub(now_ms),
            },
            LeaseState::Held(reason) => LeaseStatus::Held { reason },
        }
    }
}

/// One unread message's state as status shows it: `pending`, `held:<reason>`, `staged`,
/// `hook-owned` or `delivered`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageState {
    /// Unowned, and nothing stops its notice.
    Pending,
    /// Unowned, and the lease is held for this reason.
    Held(HoldReason),
    /// Its notice is owned by DING.
    Staged,
    /// A turn-boundary hook owns it.
    HookOwned,
    /// Its notice was accepted.
    Delivered,
}

impl MessageState {
    /// Derives the shown state from the stored one and the lease: a pending message under a
    /// held lease is `held:<reason>` (spec §7.4: held reasons are derived, never stored).
    pub fn derive(delivery: DeliveryState, lease: LeaseStatus) -> Self {
        match (delivery, lease) {
            (DeliveryState::Pending, LeaseStatus::Held { reason }) => MessageState::Held(reason),
            (DeliveryState::Pending, _) => MessageState::Pending,
            (DeliveryState::Staged, _) => MessageState::Staged,
            (DeliveryState::HookOwned, _) => MessageState::HookOwned,
            (DeliveryState::Delivered, _) => MessageState::Delivered,
        }
    }
}

impl fmt::Display for MessageState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageState::Pending => formatter.write_str("pending"),
            MessageState::Held(reason) => write!(formatter, "held:{reason}"),
            MessageState::Staged => formatter.write_str("staged"),
            MessageState::HookOwned => formatter.write_str("hook-owned"),
            MessageState::Delivered => formatter.write_str("delivered"),
        }
    }
}

impl Serialize for MessageState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl FromStr for MessageState {
    type Err = UnknownHoldReason;

    /// Reads the words [`MessageState`]'s `Display` writes; a word that is none of them is
    /// named in the error.
    fn from_str(word: &str) -> Result<Self, Self::Err> {
        Ok(match word {
            "pending" => MessageState::Pending,
            "staged" => MessageState::Staged,
            "hook-owned" => MessageState::HookOwned,
            "delivered" => MessageState::Delivered,
            other => match other.strip_prefix("held:") {
                Some(reason) => MessageState::Held(reason.parse()?),
                None => {
                    return Err(UnknownHoldReason {
                        token: other.to_owned(),
                    })
                }
            },
        })
    }
}

impl<'de> Deserialize<'de> for MessageState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = String::deserialize(deserializer)?;
        word.parse().map_err(serde::de::Error::custom)
    }
}

/// One unread message in the status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageStatus {
    /// Its file name.
    pub name: MessageName,
    /// Its subject, sanitised (or the placeholder).
    pub subject: String,
    /// Its sender, sanitised (or the placeholder).
    pub from: String,
    /// Its state.
    pub state: MessageState,
    /// Why its notice is told again, when the program an earlier one was meant for went away
    /// before it saw it whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_again: Option<String>,
}

impl MessageStatus {
    /// Builds the entry, sanitising the fields that came from the message.
    pub fn new(name: MessageName, front_matter: &FrontMatter, state: MessageState) -> Self {
        MessageStatus {
            name,
            subject: display_subject(front_matter),
            from: display_sender(front_matter),
            state,
            sent_again: None,
        }
    }
}

/// What DING has done since the engine started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Guarded (or aggressive) sends that wrote their transaction.
    pub sends: u64,
    /// Guarded sends that found the pane changed and wrote nothing.
    pub conflicts: u64,
    /// Delivery attempts held, per reason.
    pub holds: BTreeMap<HoldReason, u64>,
}

impl Counters {
    /// Counts a send that was written.
    pub fn record_send(&mut self) {
        self.sends += 1;
    }

    /// Counts a conflict; it is a hold as well.
    pub fn record_conflict(&mut self) {
        self.conflicts += 1;
        self.record_hold(HoldReason::Conflict);
    }

    /// Counts a delivery attempt held for `reason`.
    pub fn record_hold(&mut self, reason: HoldReason) {
        *self.holds.entry(reason).or_default() += 1;
    }
}

impl DingStatus {
    /// The human-readable form, one fact per line (the same text as `Display`).
    pub fn render_text(&self) -> String {
        self.to_string()
    }

    fn adapter_line(&self) -> String {
        let state = match &self.adapter {
            AdapterProcessState::NotConfigured => return "not configured".to_owned(),
            AdapterProcessState::Starting { pid } => format!("starting (pid {pid})"),
            AdapterProcessState::Running { pid } => format!("running (pid {pid})"),
            AdapterProcessState::Backoff {
                exit_code,
                signal,
                retry_in_ms,
                restarts,
            } => {
                let ended = match (exit_code, signal) {
                    (_, Some(signal)) => format!("killed by signal {signal}"),
                    (Some(code), None) => format!("exited with code {code}"),
                    (None, None) => "exited".to_owned(),
                };
                format!("{ended}; restart {restarts} in {retry_in_ms} ms")
            }
            AdapterProcessState::Failed { error } => {
                format!("failed to start: {}", sanitize_field(error, 200))
            }
        };
        match self.policy.adapter_command() {
            Some(command) => format!("{state}: {}", render_argv(command)),
            None => state,
        }
    }

    fn counters_line(&self) -> String {
        let holds = if self.counters.holds.is_empty() {
            "none".to_owned()
        } else {
            self.counters
                .holds
                .iter()
                .map(|(reason, count)| format!("{reason} {count}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "sends {}, conflicts {}, holds: {holds}",
            self.counters.sends, self.counters.conflicts
        )
    }
}

impl fmt::Display for DingStatus {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(formatter, "ding status for {}", self.session)?;
        writeln!(formatter, "  policy:     {}", policy_words(&self.policy))?;
        writeln!(formatter, "  adapter:    {}", self.adapter_line())?;
        if let Some(presence) = &self.presence {
            writeln!(
                formatter,
                "  presence:   {} since {}",
                presence.state, presence.since_unix_ms
            )?;
        }
        match &self.last_event {
            Some(event) => {
                let sequence = event
                    .sequence
                    .map_or_else(String::new, |sequence| format!("#{sequence} "));
                writeln!(
                    formatter,
                    "  last event: {sequence}{} at {}: {}",
                    event.kind, event.received_at_unix_ms, event.summary
                )?;
            }
            None => writeln!(formatter, "  last event: none")?,
        }
        writeln!(
            formatter,
            "  lease:      {}",
            lease_words(&self.policy, self.lease)
        )?;
        if let Some(reason) = &self.not_ready {
            writeln!(
                formatter,
                "  input:      held until the program is ready: {}",
                sanitize_field(reason, 200)
            )?;
        }
        writeln!(formatter, "  messages:   {} unread", self.messages.len())?;
        for message in &self.messages {
            writeln!(
                formatter,
                "    {}  {}  {} (from {})",
                message.name, message.state, message.subject, message.from
            )?;
            if let Some(why) = &message.sent_again {
                writeln!(formatter, "      {}", sanitize_field(why, 300))?;
            }
        }
        writeln!(formatter, "  counters:   {}", self.counters_line())
    }
}

/// The policy token, and for a pane that gets no delivery, why (spec §7.3): its mail is not
/// lost, it waits in the inbox because nothing may be typed into a pane that is not an agent.
fn policy_words(policy: &DeliveryPolicy) -> String {
    match policy {
        DeliveryPolicy::Undeclared => "none (not declared an agent)".to_owned(),
        other => other.token().to_owned(),
    }
}

fn lease_words(policy: &DeliveryPolicy, lease: LeaseStatus) -> String {
    match lease {
        LeaseStatus::NotApplicable => format!("not applicable ({} policy)", policy.token()),
        LeaseStatus::Leased {
            revision,
            expires_in_ms,
        } => format!("leased at revision {revision}, {expires_in_ms} ms left"),
        LeaseStatus::Held { reason } => format!("held: {reason}"),
    }
}

/// Shows an argv the way a reader would type it, with empty or spaced arguments quoted.
fn render_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|arg| {
            let clean = sanitize_field(arg, 200);
            if arg.is_empty() || arg.contains(char::is_whitespace) {
                format!("{clean:?}")
            } else {
                clean
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presence::PresenceState;
    use proptest::prelude::*;

    fn hold_reason() -> impl Strategy<Value = HoldReason> {
        prop::sample::select(HoldReason::ALL.to_vec())
    }

    fn policy() -> impl Strategy<Value = DeliveryPolicy> {
        prop_oneof![
            Just(DeliveryPolicy::Undeclared),
            Just(DeliveryPolicy::Aggressive),
            prop::collection::vec(".{0,12}", 1..4)
                .prop_map(|adapter_command| DeliveryPolicy::Rich { adapter_command }),
        ]
    }

    fn adapter() -> impl Strategy<Value = AdapterProcessState> {
        prop_oneof![
            Just(AdapterProcessState::NotConfigured),
            any::<u32>().prop_map(|pid| AdapterProcessState::Starting { pid }),
            any::<u32>().prop_map(|pid| AdapterProcessState::Running { pid }),
            (
                any::<Option<i32>>(),
                any::<Option<i32>>(),
                any::<u64>(),
                any::<u32>()
            )
                .prop_map(|(exit_code, signal, retry_in_ms, restarts)| {
                    AdapterProcessState::Backoff {
                        exit_code,
                        signal,
                        retry_in_ms,
                        restarts,
                    }
                }),
            ".{0,20}".prop_map(|error| AdapterProcessState::Failed { error }),
        ]
    }

    fn lease() -> impl Strategy<Value = LeaseStatus> {
        prop_oneof![
            Just(LeaseStatus::NotApplicable),
            (any::<u64>(), any::<u64>()).prop_map(|(revision, expires_in_ms)| {
                LeaseStatus::Leased {
                    revision,
                    expires_in_ms,
                }
            }),
            hold_reason().prop_map(|reason| LeaseStatus::Held { reason }),
        ]
    }

    fn message() -> impl Strategy<Value = MessageStatus> {
        let state = prop_oneof![
            Just(MessageState::Pending),
            hold_reason().prop_map(MessageState::Held),
            Just(MessageState::Staged),
            Just(MessageState::HookOwned),
            Just(MessageState::Delivered),
        ];
        (
            1_700_000_000_000u64..1_900_000_000_000,
            "[a-z0-9]{6}",
            ".{0,20}",
            ".{0,20}",
            state,
            proptest::option::of(".{0,20}"),
        )
            .prop_map(
                |(at, tail, subject, from, state, sent_again)| MessageStatus {
                    name: MessageName::parse(&format!("{at}-{tail}.md")).expect("a message name"),
                    subject,
                    from,
                    state,
                    sent_again,
                },
            )
    }

    fn status() -> impl Strategy<Value = DingStatus> {
        let presence = proptest::option::of(
            (
                prop::sample::select(vec![
                    PresenceState::Busy,
                    PresenceState::Available,
                    PresenceState::Dnd,
                ]),
                any::<u64>(),
            )
                .prop_map(|(state, since_unix_ms)| Presence {
                    state,
                    since_unix_ms,
                }),
        );
        let last_event = proptest::option::of(
            (".{0,12}", any::<Option<u64>>(), any::<u64>(), ".{0,20}").prop_map(
                |(kind, sequence, received_at_unix_ms, summary)| LastEvent {
                    kind,
                    sequence,
                    received_at_unix_ms,
                    summary,
                },
            ),
        );
        let counters = (
            any::<u64>(),
            any::<u64>(),
            prop::collection::btree_map(hold_reason(), any::<u64>(), 0..4),
        )
            .prop_map(|(sends, conflicts, holds)| Counters {
                sends,
                conflicts,
                holds,
            });
        (
            "[a-z][a-z0-9-]{0,10}",
            policy(),
            adapter(),
            presence,
            last_event,
            lease(),
            proptest::option::of(".{0,20}"),
            prop::collection::vec(message(), 0..4),
            counters,
        )
            .prop_map(
                |(
                    session,
                    policy,
                    adapter,
                    presence,
                    last_event,
                    lease,
                    not_ready,
                    messages,
                    counters,
                )| {
                    DingStatus {
                        session: SessionName::parse(&session).expect("a session name"),
                        policy,
                        adapter,
                        presence,
                        last_event,
                        lease,
                        not_ready,
                        messages,
                        counters,
                    }
                },
            )
    }

    proptest! {
        /// The daemon writes the status as JSON and a reader reads it back into the same model:
        /// every status comes back equal, and its JSON the same.
        #[test]
        fn a_ding_status_round_trips_through_json(status in status()) {
            let json = serde_json::to_value(&status).expect("a status serializes");
            let read: DingStatus = serde_json::from_value(json.clone()).expect("it reads back");
            prop_assert_eq!(&read, &status);
            prop_assert_eq!(serde_json::to_value(&read).expect("again"), json);
        }
    }

    #[test]
    fn a_message_state_that_is_not_one_is_named() {
        let err =
            serde_json::from_value::<MessageState>(serde_json::json!("held:nonsense")).unwrap_err();
        assert!(
            err.to_string()
                .contains("\"nonsense\" is not a DING hold reason"),
            "{err}"
        );
        let err = serde_json::from_value::<MessageState>(serde_json::json!("parked")).unwrap_err();
        assert!(err.to_string().contains("\"parked\""), "{err}");
    }
}
