//! Events: what `subscribe` streams carry and the daemon's bus publishes (spec §6.1).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::identity::ExitStatus;
use crate::program_status::{StatusCause, StatusRecord};

/// One event, tagged on the wire by its `event` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// The pane's revision moved (coalesced to the latest).
    Revision {
        /// The pane.
        session: String,
        /// Its revision now.
        revision: u64,
    },
    /// The program ended.
    Exit {
        /// The pane.
        session: String,
        /// The incarnation that ended.
        incarnation: String,
        /// The revision at the end.
        revision: u64,
        /// The exit code, if it exited.
        code: Option<i32>,
        /// The signal, if a signal ended it.
        signal: Option<i32>,
    },
    /// Something happened to the pane as a whole.
    Lifecycle(Lifecycle),
    /// A hook event `belfry dispatch` saw inside the pane.
    Hook(HookSeen),
    /// Something the pane's DING worker did.
    Ding {
        /// The pane.
        session: String,
        /// What (`turn-boundary`, …).
        what: String,
        /// Its outcome, as the DING engine reports it.
        #[serde(default)]
        #[cfg_attr(test, arbitrary(with = crate::wire_properties::arbitrary_json))]
        outcome: Value,
    },
    /// A program status record of the pane changed (OSC 7501): reported, cleared, evicted,
    /// or ended with its program.
    #[serde(rename = "program-status")]
    ProgramStatus {
        /// The pane.
        session: String,
        /// The record's id; absent for the root record.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The record before; absent when the report made it.
        #[serde(default)]
        old: Option<StatusRecord>,
        /// The record after; absent when it was removed.
        #[serde(default)]
        new: Option<StatusRecord>,
        /// Why it changed.
        cause: StatusCause,
        /// The pane's revision at the change.
        revision: u64,
    },
    /// The subscriber fell behind and missed events.
    Lagged {
        /// The pane, on a pane host's stream.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
        /// How many.
        missed: u64,
    },
}

impl Event {
    /// The pane the event is about, if any.
    pub fn session(&self) -> Option<&str> {
        match self {
            Event::Revision { session, .. }
            | Event::Exit { session, .. }
            | Event::Ding { session, .. }
            | Event::ProgramStatus { session, .. } => Some(session),
            Event::Lifecycle(lifecycle) => Some(&lifecycle.session),
            Event::Hook(hook) => Some(&hook.session),
            Event::Lagged { session, .. } => session.as_deref(),
        }
    }

    /// The event's kind, its `event` field on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Revision { .. } => "revision",
            Event::Exit { .. } => "exit",
            Event::Lifecycle(_) => "lifecycle",
            Event::Hook(_) => "hook",
            Event::Ding { .. } => "ding",
            Event::ProgramStatus { .. } => "program-status",
            Event::Lagged { .. } => "lagged",
        }
    }

    /// The exit of `session`'s `incarnation`.
    pub fn exit(session: &str, incarnation: &str, revision: u64, status: ExitStatus) -> Event {
        Event::Exit {
            session: session.to_string(),
            incarnation: incarnation.to_string(),
            revision,
            code: status.code,
            signal: status.signal,
        }
    }

    /// The event as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// An event the daemon kept, as a subscriber that asked for the recent past receives it: the
/// event's own fields, marked `history: true`, with the Unix time in ms it was published.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Kept {
    /// The event as it was published.
    #[serde(flatten)]
    pub event: Event,
    /// Always true: the event is from the kept past, not live.
    pub history: bool,
    /// When it was published (Unix time in ms).
    pub at_ms: u64,
}

impl Kept {
    /// `event`, published at `at_ms`, as a subscriber's history gives it.
    pub fn at(event: Event, at_ms: u64) -> Kept {
        Kept {
            event,
            history: true,
            at_ms,
        }
    }

    /// The kept event as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A lifecycle event: `spawned`, `adopted`, `killed`, `lost`, `restart`, …
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Lifecycle {
    /// The pane.
    pub session: String,
    /// What happened.
    pub what: String,
    /// The pane host's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The incarnation after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// The generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// The revision after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Why, for `lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `typed`: whether the input holds an Enter (a CR or a line feed), so it may submit
    /// what the program's input line holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit: Option<bool>,
}

impl Lifecycle {
    /// `what` happened to `session`, with no other field.
    pub fn new(session: &str, what: &str) -> Lifecycle {
        Lifecycle {
            session: session.to_string(),
            what: what.to_string(),
            pid: None,
            incarnation: None,
            generation: None,
            revision: None,
            reason: None,
            submit: None,
        }
    }
}

/// A hook event as the bus carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct HookSeen {
    /// The pane.
    pub session: String,
    /// The canonical hook event name.
    pub hook: String,
    /// Where the event came from, as the harness said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The tool of a tool event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The harness's own name for the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_event_name: Option<String>,
    /// The incarnation the event was seen in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// At a prompt submit: who wrote the prompt (`user` or `belfry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<crate::request::PromptOrigin>,
    /// At a prompt submit: the unread messages whose exact notice the prompt carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_keep_their_wire_shape() {
        let event = Event::Revision {
            session: "w".into(),
            revision: 5,
        };
        assert_eq!(
            event.to_value(),
            json!({"event": "revision", "session": "w", "revision": 5})
        );
        let lost: Event = serde_json::from_value(
            json!({"event": "lifecycle", "session": "w", "what": "lost", "pid": 9}),
        )
        .unwrap();
        assert_eq!(lost.session(), Some("w"));
        assert_eq!(lost.kind(), "lifecycle");
        assert_eq!(event.to_value()["event"], event.kind());
        assert!(matches!(
            lost,
            Event::Lifecycle(Lifecycle { pid: Some(9), .. })
        ));
    }
}
