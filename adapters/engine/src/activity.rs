//! What the activity adapter says about a pane (spec §7.4): the turn state from the harness's
//! own lifecycle hooks as `belfry dispatch` forwards them, `child` from the pane's foreground
//! process group, and the composer from the screen, as one protocol v1 `activity` event.
//!
//! The screen never makes a pane idle: only a turn-stop hook does, and a prompt submit or a
//! tool event makes it active again. Until the first such event, and after the harness is
//! restarted, the state is `unknown`, so no fresh-idle lease can be granted on a guess.

use serde_json::{json, Value};

use crate::classify::{Composer, EmptyBy, Verdict};

/// The turn state the hooks have shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// No hook has said yet (or the harness restarted since).
    Unknown,
    /// The last turn ended and no new one began.
    Idle,
    /// A turn is running.
    Active,
}

impl Turn {
    /// The state after the semantic hook event `hook` (spec §9's event names).
    pub fn after(self, hook: &str) -> Turn {
        match hook {
            "turn-stop" => Turn::Idle,
            "prompt-submit" | "before-tool" | "after-tool" | "pre-compact" | "subagent-start" => {
                Turn::Active
            }
            // A session starting or ending, or a turn ending in an error, says nothing
            // reliable about whether the harness now waits for input.
            "session-start" | "session-end" | "stop-failure" => Turn::Unknown,
            _ => self,
        }
    }
}

/// The pane identity and state a snapshot shows beside its screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneSeen {
    /// The pane's session name.
    pub session: String,
    /// The program incarnation.
    pub incarnation: String,
    /// The launch generation.
    pub generation: String,
    /// The snapshot's revision.
    pub revision: u64,
    /// Whether the program leads the foreground process group (false: a child runs there).
    pub program_in_foreground: bool,
}

impl PaneSeen {
    /// Reads the identity fields of a snapshot body.
    pub fn from_snapshot(snapshot: &Value) -> Option<PaneSeen> {
        Some(PaneSeen {
            session: snapshot["session"].as_str()?.to_string(),
            incarnation: snapshot["incarnation"].as_str()?.to_string(),
            generation: snapshot["generation"].as_str()?.to_string(),
            revision: snapshot["revision"].as_u64()?,
            // A snapshot without the field proves no child, and none is claimed.
            program_in_foreground: snapshot["foreground"]["is_leader"]
                .as_bool()
                .unwrap_or(true),
        })
    }
}

/// One protocol v1 `activity` event line (without the newline).
pub fn activity_event(
    pane: &PaneSeen,
    sequence: u64,
    turn: Turn,
    verdict: &Verdict,
    valid_for_ms: u64,
) -> Value {
    let state = if !pane.program_in_foreground {
        "child"
    } else {
        match turn {
            Turn::Unknown => "unknown",
            Turn::Idle => "idle",
            Turn::Active => "active",
        }
    };
    let (composer, reason) = match &verdict.composer {
        Composer::Empty(EmptyBy::Blank) => ("empty", "composer blank".to_string()),
        Composer::Empty(EmptyBy::Placeholder(index)) => {
            ("empty", format!("composer shows placeholder {index}"))
        }
        Composer::Nonempty => ("nonempty", "composer holds text".to_string()),
        Composer::Unknown(why) => ("unknown", why.to_string()),
    };
    json!({
        "v": 1,
        "kind": "activity",
        "session": pane.session,
        "incarnation": pane.incarnation,
        "generation": pane.generation,
        "sequence": sequence,
        "state": state,
        "composer": composer,
        "validForMs": valid_for_ms,
        "revision": pane.revision,
        "reason": format!("turn {turn:?}; {reason}").to_lowercase(),
    })
}
