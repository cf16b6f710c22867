//! Replies: the envelope every answer shares and the typed bodies of the ops' answers.
//!
//! A reply is `{"id":…,"ok":true,…fields}` or `{"id":…,"ok":false,"error":{"code":…,
//! "message":…}}` (spec §6.1). Servers build one with [`ok`] or [`error`]; clients read one with
//! [`Reply::read`] into the body type of the op they asked.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::code::ErrorCode;
use crate::de::{self, FieldError};
use crate::identity::{ExitStatus, Identity};
use crate::limits::Size;

/// The `error` of a failed reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct ErrorBody {
    /// Why, as a code.
    pub code: ErrorCode,
    /// Why, for a person.
    pub message: String,
    /// Bytes of a send that reached the PTY before it ended early (spec §3): a caller never
    /// takes a partial write for "nothing written".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
}

impl ErrorBody {
    /// An error of `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code,
            message: message.into(),
            written: None,
        }
    }

    /// An `invalid` error: the request itself is wrong.
    pub fn invalid(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorCode::Invalid, message)
    }
}

impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A reply read by a client: the op's body, or the error the server gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply<T> {
    /// `ok: true`, with the op's fields.
    Ok(T),
    /// `ok: false`.
    Err(ErrorBody),
}

impl<T: DeserializeOwned> Reply<T> {
    /// Reads a reply; the error names what in it is not what the protocol says.
    pub fn read(reply: &Value) -> Result<Reply<T>, FieldError> {
        match reply.get("ok") {
            Some(Value::Bool(true)) => de::from_value(reply).map(Reply::Ok),
            Some(Value::Bool(false)) => match reply.get("error") {
                Some(body) => de::from_value(body)
                    .map(Reply::Err)
                    .map_err(|err| err.under_key("error")),
                None => Err(FieldError::refused("missing field \"error\"")),
            },
            _ => Err(FieldError::refused(
                "a reply must carry \"ok\": true or false",
            )),
        }
    }

    /// The body, or the error as `Err`.
    pub fn into_result(self) -> Result<T, ErrorBody> {
        match self {
            Reply::Ok(body) => Ok(body),
            Reply::Err(err) => Err(err),
        }
    }
}

/// The reply to a request: `body`'s fields, or the error.
pub fn answer<T: Serialize>(id: &Value, outcome: Result<T, ErrorBody>) -> Value {
    match outcome {
        Ok(body) => ok(id, &body),
        Err(err) => error_with(id, err),
    }
}

/// A successful reply: `body`'s fields with `id` and `ok: true`.
pub fn ok(id: &Value, body: &impl Serialize) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), id.clone());
    out.insert("ok".into(), Value::Bool(true));
    if let Ok(Value::Object(fields)) = serde_json::to_value(body) {
        out.extend(fields);
    }
    Value::Object(out)
}

/// An error reply.
pub fn error(id: &Value, code: ErrorCode, message: impl Into<String>) -> Value {
    error_with(
        id,
        ErrorBody {
            code,
            message: message.into(),
            written: None,
        },
    )
}

/// An error reply with a full body.
pub fn error_with(id: &Value, body: ErrorBody) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), id.clone());
    out.insert("ok".into(), Value::Bool(false));
    out.insert(
        "error".into(),
        serde_json::to_value(body).unwrap_or(Value::Null),
    );
    Value::Object(out)
}

/// The error code of a reply, if it is an error.
pub fn error_code(reply: &Value) -> Option<ErrorCode> {
    match Reply::<Value>::read(reply) {
        Ok(Reply::Err(err)) => Some(err.code),
        _ => None,
    }
}

/// `hello`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Hello {
    /// The version both sides speak.
    pub version: u64,
    /// `daemon` or `pane-host`.
    pub role: String,
    /// The server's build.
    pub build: String,
    /// The daemon's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The pane host's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// A pane as `info`, `spawn` and `list` describe it. In a listing, a pane host that did not
/// answer has only `session`, `pid`, `state` and `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct PaneRecord {
    /// The pane's name.
    pub session: String,
    /// The pane host's pid.
    pub pid: u32,
    /// Why the pane host could not be asked: `unresponsive`, `unreachable`, `foreign`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// What went wrong asking it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The program's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_pid: Option<u32>,
    /// The process incarnation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// The launch generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// The program and its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The program's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// When the pane host started (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    /// The pane host's socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// The protocol version the pane host speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u64>,
    /// The pane host's build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The launch spec (left out of listings), passed on as the pane host wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, arbitrary(with = crate::wire_properties::arbitrary_some_json))]
    pub spec: Option<Value>,
    /// The I/O revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// How the program ended (`Some(Some(..))`), or that it runs (`Some(None)`, `null` on the
    /// wire). Absent (`None`) only in a listing's entry for a pane host that did not answer,
    /// which says nothing about the program.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub exited: Option<Option<ExitStatus>>,
    /// The pane's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// Attached clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<usize>,
    /// The window title the program set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The record the program's status is shown by (OSC 7501), if it reported any
    /// ([`crate::program_status::summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_status: Option<crate::program_status::StatusRecord>,
}

impl PaneRecord {
    /// A listing entry for a pane host that could not be asked: its name, its pid, why
    /// (`unresponsive`, `unreachable`, `foreign`) and what went wrong asking it.
    pub fn unanswered(session: &str, pid: u32, state: &str, error: String) -> PaneRecord {
        PaneRecord {
            session: session.to_string(),
            pid,
            state: Some(state.to_string()),
            error: Some(error),
            child_pid: None,
            incarnation: None,
            generation: None,
            argv: None,
            cwd: None,
            started_at: None,
            socket: None,
            protocol: None,
            build: None,
            spec: None,
            revision: None,
            exited: None,
            size: None,
            clients: None,
            title: None,
            program_status: None,
        }
    }

    /// The pane's identity, if the record carries one.
    pub fn identity(&self) -> Option<Identity> {
        Some(Identity {
            incarnation: self.incarnation.clone()?,
            generation: self.generation.clone()?,
            revision: self.revision?,
        })
    }
}

/// The one line a pane host writes on its standard output when it starts (not a reply: no
/// request asked for it): ready, with where it serves, or why it could not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Announced {
    /// True once it serves its socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The pane host's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Why it could not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `list`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Listing {
    /// Every pane, by name.
    pub panes: Vec<PaneRecord>,
}

/// The daemon's `attach` answer: where the pane host serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct AttachTarget {
    /// The pane.
    pub session: String,
    /// The pane host's socket.
    pub socket: String,
}

/// The answer to `bind`, written by the pane host on the connection it took over: from this
/// line on the pane host serves the connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Bound {
    /// The pane.
    pub session: String,
    /// Always `pane-host`: who serves the connection now.
    pub role: String,
    /// The pane host's pid.
    pub pid: u32,
    /// The pane host's socket (where a new connection reaches it directly).
    pub socket: String,
}

/// The pane host's `attach` answer; frames follow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Attached {
    /// Always true.
    pub attached: bool,
    /// This client's id.
    pub client: u64,
    /// Whether it only watches.
    pub read_only: bool,
    /// The pane's identity when it attached.
    pub identity: Identity,
    /// The pane host takes the client's terminal (the request asked for it): the client
    /// sends the descriptor next, and the pane host writes the output to it. Absent from a
    /// pane host that predates the hand-over, which sends the output in frames.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    /// The pane host also takes the client's keyboard (the request gave its prefix): the
    /// client sends the keyboard's descriptor with the terminal's. Absent from a pane host
    /// that predates it, which gets every keystroke in frames.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keyboard: bool,
    /// The pane host knows the status line (the request's `status`, the `status` control).
    /// Absent from a pane host that predates it, which would write a status-line client the
    /// raw output over its line: such a client draws none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub status: bool,
}

/// `kill`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Killed {
    /// The pane ended.
    pub killed: String,
}

/// `shutdown`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Shutdown {
    /// Always true.
    pub shutdown: bool,
    /// The panes ended first.
    pub killed: Vec<String>,
}

/// `send`'s answer: written, or not written because the pane was not what was expected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum Sent {
    /// Every byte was written.
    Sent {
        /// The revision after the write.
        revision: u64,
        /// The transaction, if the send carried one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        txn: Option<String>,
    },
    /// Zero bytes were written.
    Conflict {
        /// What the pane is.
        actual: Identity,
        /// The program has exited.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exited: bool,
        /// The transaction, if the send carried one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        txn: Option<String>,
    },
}

/// A cursor position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Cursor {
    /// Row, from 0.
    pub row: usize,
    /// Column, from 0.
    pub col: usize,
    /// Shown or hidden.
    pub visible: bool,
}

/// Terminal modes a snapshot reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Modes {
    /// The program is on the alternate screen.
    pub alternate_screen: bool,
    /// The program asked for bracketed paste.
    pub bracketed_paste: bool,
    /// The program asked for application cursor keys.
    pub application_cursor: bool,
    /// The program asked for mouse reports.
    pub mouse: bool,
    /// The program asked for focus events.
    pub focus_events: bool,
}

/// The PTY's foreground process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Foreground {
    /// The group.
    pub pgid: i32,
    /// True if it is the program's own group.
    pub is_leader: bool,
}

/// `snapshot`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Screen {
    /// The pane.
    pub session: String,
    /// The process incarnation.
    pub incarnation: String,
    /// The launch generation.
    pub generation: String,
    /// The I/O revision.
    pub revision: u64,
    /// The size.
    pub size: Size,
    /// The cursor.
    pub cursor: Cursor,
    /// The modes.
    pub modes: Modes,
    /// The window title.
    pub title: String,
    /// The visible lines.
    pub lines: Vec<String>,
    /// The PTY's foreground group.
    pub foreground: Option<Foreground>,
    /// How the program ended, if it has.
    pub exited: Option<ExitStatus>,
    /// The program's pid.
    pub child_pid: u32,
    /// The pane host's pid.
    pub pid: u32,
    /// Attached clients.
    pub clients: usize,
    /// Lines of history.
    pub history: usize,
    /// Each visible line with its SGR sequences, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ansi: Option<Vec<String>>,
    /// Every cell, when asked: the pane host's grid, passed on untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, arbitrary(with = crate::wire_properties::arbitrary_some_json))]
    pub cells: Option<Value>,
    /// The last lines of history, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<Vec<String>>,
    /// The program's status records (OSC 7501) at this snapshot's revision.
    #[serde(default)]
    pub program_status: crate::program_status::ProgramStatus,
}

impl Screen {
    /// The pane's identity at the snapshot.
    pub fn identity(&self) -> Identity {
        Identity {
            incarnation: self.incarnation.clone(),
            generation: self.generation.clone(),
            revision: self.revision,
        }
    }
}

/// `scrollback`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct History {
    /// The revision.
    pub revision: u64,
    /// Lines in the range asked.
    pub total: usize,
    /// Lines of history.
    pub history: usize,
    /// The first line given.
    pub start: usize,
    /// The lines.
    pub lines: Vec<String>,
}

/// `resize`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Resized {
    /// The revision after it.
    pub revision: u64,
    /// The new size.
    pub size: Size,
}

/// `clear`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Cleared {
    /// The revision after it.
    pub revision: u64,
}

/// `restart`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Restarted {
    /// The new identity.
    pub identity: Identity,
}

/// `detach`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Detached {
    /// Clients detached.
    pub detached: usize,
}

/// The state a `wait` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct WaitState {
    /// The revision.
    pub revision: u64,
    /// The incarnation.
    pub incarnation: String,
    /// How the program ended, if it has.
    pub exited: Option<ExitStatus>,
}

/// `wait`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Waited {
    /// Always `matched`.
    pub result: String,
    /// The state when every condition held.
    pub state: WaitState,
}

/// `txn`'s answer: its state, or whether it was settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct TxnState {
    /// The transaction.
    pub txn: String,
    /// `never-written`, `running`, `written` or `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Whether a settle forgot it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<bool>,
}

/// `subscribe`'s first answer; events follow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Subscribed {
    /// Always true.
    pub subscribed: bool,
    /// The pane (daemon).
    #[serde(default)]
    pub session: Option<String>,
    /// The pane's identity (pane host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
}

/// `hook`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Published {
    /// Always true.
    pub published: bool,
}

/// `ding.nudge`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Nudged {
    /// Whether a worker was told.
    pub nudged: bool,
}

/// `ding.turn-boundary`'s answer: which of the messages the event named the hook now owns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Claimed {
    /// The messages that were unread and unowned, now owned by the hook.
    pub hook_owned: Vec<String>,
    /// The rest: already staged or owned, or no longer unread.
    pub refused: Vec<String>,
    /// A `reserve`'s messages, held for the dispatch until it confirms or releases them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved: Vec<String>,
    /// The reservation to name in the `confirm` or `release`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// A continuation refused as a whole: `capped` when the pane already had its cap of
    /// consecutive belfry-caused continuations (the mail waits for the next tier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// `ding.status`'s answer, over the status body `S`.
///
/// The status model is DING's (`belfry_ding::status::DingStatus`: the engine fills it from its
/// own types, the hold reasons, the delivery policy, the presence), and DING depends on this
/// crate, so this crate cannot name it. The daemon writes the typed model
/// (`DingState<Option<DingStatus>>`), and a reader reads it back into the same type; a reader
/// that has not moved to it yet reads the default, a JSON value. The bytes are the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DingState<S = Value> {
    /// The status model of `belfry ding status --json`, or `null` when the pane's policy is
    /// invalid.
    pub status: S,
    /// The same status as text, for a person.
    pub text: String,
    /// Why the policy is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_read_as_bodies_or_errors() {
        let reply = ok(&json!(3), &Killed { killed: "w".into() });
        assert_eq!(reply, json!({"id": 3, "ok": true, "killed": "w"}));
        assert_eq!(
            Reply::<Killed>::read(&reply).unwrap(),
            Reply::Ok(Killed { killed: "w".into() })
        );
        let reply = error(&json!(3), ErrorCode::NotFound, "no pane named \"w\"");
        let Reply::Err(err) = Reply::<Killed>::read(&reply).unwrap() else {
            panic!("not an error: {reply}");
        };
        assert_eq!(err.code, ErrorCode::NotFound);
        assert_eq!(error_code(&reply), Some(ErrorCode::NotFound));
        let err = Reply::<Killed>::read(&json!({"ok": true})).unwrap_err();
        assert_eq!(err.to_string(), "missing field \"killed\"");
    }

    #[test]
    fn a_send_reply_is_sent_or_conflict() {
        let sent: Sent = serde_json::from_value(json!({"result": "sent", "revision": 4})).unwrap();
        assert_eq!(
            sent,
            Sent::Sent {
                revision: 4,
                txn: None
            }
        );
        let conflict = Sent::Conflict {
            actual: Identity {
                incarnation: "i".into(),
                generation: "g".into(),
                revision: 9,
            },
            exited: false,
            txn: Some("t".into()),
        };
        let value = serde_json::to_value(&conflict).unwrap();
        assert_eq!(value["result"], "conflict");
        assert!(value.get("exited").is_none());
        assert_eq!(serde_json::from_value::<Sent>(value).unwrap(), conflict);
    }

    #[test]
    fn a_listing_keeps_running_and_unanswered_panes_apart() {
        let listing = json!({"panes": [
            {"session": "a", "pid": 1, "child_pid": 2, "exited": null},
            {"session": "b", "pid": 3, "child_pid": 4, "exited": {"code": 0, "signal": null}},
            {"session": "c", "pid": 5, "state": "unresponsive", "error": "no answer"},
        ]});
        let read: Listing = de::from_value(&listing).unwrap();
        assert_eq!(read.panes[0].exited, Some(None));
        assert_eq!(read.panes[2].exited, None);
        assert_eq!(serde_json::to_value(&read).unwrap(), listing);
    }
}
