//! Program status: what a pane's program says of itself through OSC 7501 (the Program Status
//! Protocol, revision 0.4), as the pane host keeps it and `peek`, `ls`, `wait` and `events`
//! show it. The pane host parses the reports (`belfry_pty::program_status`); these are the
//! records on the wire.

use serde::{Deserialize, Serialize};

/// A record's state. `clear` is not one: it removes records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum ProgramState {
    /// At rest, waiting for the user's next instruction.
    Idle,
    /// Running.
    Working,
    /// Cannot go on until a person acts; the record's `kind` says what for.
    Blocked,
    /// Finished; the result is there to see.
    Done,
    /// Failed and stopped.
    Error,
}

impl ProgramState {
    /// Every state, in the order the spec lists them.
    pub const ALL: [ProgramState; 5] = [
        ProgramState::Idle,
        ProgramState::Working,
        ProgramState::Blocked,
        ProgramState::Done,
        ProgramState::Error,
    ];

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            ProgramState::Idle => "idle",
            ProgramState::Working => "working",
            ProgramState::Blocked => "blocked",
            ProgramState::Done => "done",
            ProgramState::Error => "error",
        }
    }

    /// The state a wire word names, if any.
    pub fn parse(word: &str) -> Option<ProgramState> {
        ProgramState::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// How much the state asks for a person's attention, most first: a pane shows the most
    /// urgent of its records ([`summary`]).
    fn urgency(self) -> u8 {
        match self {
            ProgramState::Blocked => 4,
            ProgramState::Error => 3,
            ProgramState::Working => 2,
            ProgramState::Done => 1,
            ProgramState::Idle => 0,
        }
    }
}

/// What a `blocked` record waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum BlockedKind {
    /// Approval of an action.
    Permission,
    /// An answer to a question.
    Question,
    /// Credentials.
    Auth,
}

impl BlockedKind {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedKind::Permission => "permission",
            BlockedKind::Question => "question",
            BlockedKind::Auth => "auth",
        }
    }

    /// The kind a wire word names, if any.
    pub fn parse(word: &str) -> Option<BlockedKind> {
        [
            BlockedKind::Permission,
            BlockedKind::Question,
            BlockedKind::Auth,
        ]
        .into_iter()
        .find(|k| k.as_str() == word)
    }
}

/// One record: the last report the program made for its id, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct StatusRecord {
    /// The record's id (`/`-separated segments); absent for the root record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The state.
    pub state: ProgramState,
    /// With `blocked`: what it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<BlockedKind>,
    /// The program's name, as it reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The message, decoded (UTF-8 without control characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// The title, decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Progress in percent; absent when indeterminate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<u8>,
    /// The pane's revision after the output chunk the last report arrived in.
    pub revision: u64,
    /// When the record entered its state (unix ms): a report that keeps the state (progress,
    /// a new message) keeps this too, so "working for 3 min" counts from the first.
    pub since: u64,
    /// The incarnation of the program that reported it.
    pub incarnation: String,
}

impl StatusRecord {
    /// The state in words a person reads: `working`, `needs you: permission`, `done`, ….
    pub fn words(&self) -> String {
        match (self.state, self.kind) {
            (ProgramState::Blocked, Some(kind)) => format!("needs you: {}", kind.as_str()),
            (ProgramState::Blocked, None) => "needs you".to_string(),
            (state, _) => state.as_str().to_string(),
        }
    }

    /// The same record with the fields a report carries equal to `other`'s: whether a report
    /// changed anything a reader sees (revision and times aside).
    pub fn same_report(&self, other: &StatusRecord) -> bool {
        (
            &self.id,
            self.state,
            self.kind,
            &self.app,
            &self.msg,
            &self.title,
            self.progress,
        ) == (
            &other.id,
            other.state,
            other.kind,
            &other.app,
            &other.msg,
            &other.title,
            other.progress,
        )
    }
}

/// The pane's program status: its records, oldest report first, and the reports dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct ProgramStatus {
    /// Every record the pane host keeps.
    pub records: Vec<StatusRecord>,
    /// Reports dropped as malformed (unknown state, bad id, bad text, …) since the pane host
    /// started.
    #[serde(default)]
    pub malformed: u64,
    /// Reports dropped as longer than the protocol allows.
    #[serde(default)]
    pub oversized: u64,
    /// Queries the pane host answered.
    #[serde(default)]
    pub queries: u64,
}

impl ProgramStatus {
    /// The record the pane is shown by ([`summary`]).
    pub fn summary(&self) -> Option<&StatusRecord> {
        summary(&self.records)
    }
}

/// The record a pane is shown by: the most urgent state among its records (blocked, then
/// error, working, done, idle), the latest report among equals. A sub-task blocked on a
/// permission makes the whole pane need a person, whatever the root record says.
pub fn summary(records: &[StatusRecord]) -> Option<&StatusRecord> {
    records
        .iter()
        .max_by_key(|record| (record.state.urgency(), record.revision))
}

/// Why a record changed, in a `program-status` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum StatusCause {
    /// The program reported it.
    Report,
    /// The program cleared it (or an ancestor).
    Clear,
    /// Evicted: the program reported more records than the pane host keeps.
    Evicted,
    /// The program exited: `working`, `blocked` and `idle` end with it.
    Exit,
    /// The program was restarted: a new program starts with no records.
    Restart,
}
