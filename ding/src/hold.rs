//! Hold reasons: why DING is not sending right now.
//!
//! spec §7.4: everything that is not a fresh lease is a hold with a named reason, and sends
//! nothing. The tokens are part of the user-visible surface (`belfry ding status`, logs, the
//! event bus), so they are spelled exactly as the spec lists them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why delivery is held. [`HoldReason::as_str`] gives the spec's kebab-case token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldReason {
    /// The adapter reports the harness is working on a turn.
    Active,
    /// The adapter reports a child command running in the foreground.
    Child,
    /// The adapter reports it cannot tell the harness's activity.
    Unknown,
    /// The composer holds a draft; pasting would mix into it.
    ComposerNonempty,
    /// The adapter cannot tell whether the composer is empty.
    ComposerUnknown,
    /// The last idle evidence is no longer fresh (expired, consumed or superseded).
    Stale,
    /// No adapter is running, or it has not reported yet.
    Unreachable,
    /// The adapter sent something that is not a valid protocol v1 event.
    Malformed,
    /// The adapter has been silent for longer than the configured timeout.
    Timeout,
    /// The adapter exited, closed its output, or failed.
    AdapterError,
    /// The event (or lease) belongs to another process incarnation of the pane.
    IncarnationMismatch,
    /// The event (or lease) belongs to another launch generation of the pane.
    GenerationMismatch,
    /// The harness compacted its context (lifecycle event from dispatch).
    Compaction,
    /// The harness cleared its context (lifecycle event from dispatch).
    Clear,
    /// The pane or the daemon went away since the last evidence.
    Crash,
    /// The adapter speaks a protocol version this build does not.
    UnsupportedVersion,
    /// The adapter sent an event kind protocol v1 does not define.
    UnknownKind,
    /// The adapter's sequence number did not increase.
    OutOfOrder,
    /// The guarded send found the pane changed and wrote nothing.
    Conflict,
    /// DING submitted a notice (or a turn-stop continued on mail) and the turn that started
    /// has not settled: an idle-looking screen right after a submit proves nothing.
    Submitted,
    /// A person typed into the pane (an attached client's keystrokes, not a transaction)
    /// since the last idle report: the harness may be taking their Enter as a turn it does not
    /// show yet, so no idle counts until it shows one (or long enough passes without).
    Typed,
    /// The harness's own program status (OSC 7501) says it is working.
    Working,
    /// The harness's own program status says it waits for a person (a permission, a
    /// question, credentials).
    Blocked,
}

impl HoldReason {
    /// Every reason, in the order spec §7.4 lists them.
    pub const ALL: [HoldReason; 23] = [
        HoldReason::Active,
        HoldReason::Child,
        HoldReason::Unknown,
        HoldReason::ComposerNonempty,
        HoldReason::ComposerUnknown,
        HoldReason::Stale,
        HoldReason::Unreachable,
        HoldReason::Malformed,
        HoldReason::Timeout,
        HoldReason::AdapterError,
        HoldReason::IncarnationMismatch,
        HoldReason::GenerationMismatch,
        HoldReason::Compaction,
        HoldReason::Clear,
        HoldReason::Crash,
        HoldReason::UnsupportedVersion,
        HoldReason::UnknownKind,
        HoldReason::OutOfOrder,
        HoldReason::Conflict,
        HoldReason::Submitted,
        HoldReason::Typed,
        HoldReason::Working,
        HoldReason::Blocked,
    ];

    /// The spec's token for this reason (`"composer-nonempty"`, `"out-of-order"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HoldReason::Active => "active",
            HoldReason::Child => "child",
            HoldReason::Unknown => "unknown",
            HoldReason::ComposerNonempty => "composer-nonempty",
            HoldReason::ComposerUnknown => "composer-unknown",
            HoldReason::Stale => "stale",
            HoldReason::Unreachable => "unreachable",
            HoldReason::Malformed => "malformed",
            HoldReason::Timeout => "timeout",
            HoldReason::AdapterError => "adapter-error",
            HoldReason::IncarnationMismatch => "incarnation-mismatch",
            HoldReason::GenerationMismatch => "generation-mismatch",
            HoldReason::Compaction => "compaction",
            HoldReason::Clear => "clear",
            HoldReason::Crash => "crash",
            HoldReason::UnsupportedVersion => "unsupported-version",
            HoldReason::UnknownKind => "unknown-kind",
            HoldReason::OutOfOrder => "out-of-order",
            HoldReason::Conflict => "conflict",
            HoldReason::Submitted => "submitted",
            HoldReason::Typed => "typed",
            HoldReason::Working => "working",
            HoldReason::Blocked => "blocked",
        }
    }
}

impl fmt::Display for HoldReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The token given to [`HoldReason::from_str`] is not a hold reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{token:?} is not a DING hold reason")]
pub struct UnknownHoldReason {
    /// The rejected token.
    pub token: String,
}

impl FromStr for HoldReason {
    type Err = UnknownHoldReason;

    fn from_str(token: &str) -> Result<Self, Self::Err> {
        HoldReason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == token)
            .ok_or_else(|| UnknownHoldReason {
                token: token.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_exactly_the_spec_list() {
        let tokens: Vec<&str> = HoldReason::ALL
            .iter()
            .map(|reason| reason.as_str())
            .collect();
        assert_eq!(
            tokens.join(", "),
            "active, child, unknown, composer-nonempty, composer-unknown, stale, unreachable, \
             malformed, timeout, adapter-error, incarnation-mismatch, generation-mismatch, \
             compaction, clear, crash, unsupported-version, unknown-kind, out-of-order, conflict, submitted, \
             typed, working, blocked"
        );
    }

    #[test]
    fn tokens_round_trip_through_text_and_json() {
        for reason in HoldReason::ALL {
            assert_eq!(reason.as_str().parse::<HoldReason>().unwrap(), reason);
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            assert_eq!(reason.to_string(), reason.as_str());
        }
        assert_eq!(
            "idle".parse::<HoldReason>().unwrap_err().to_string(),
            "\"idle\" is not a DING hold reason"
        );
    }
}
