//! Requests: one enum of every op ([`Op`]), tagged on the wire by its `op` field, and the
//! [`Request`] envelope that carries the `id` a reply echoes (spec §6.1).
//!
//! A line is parsed once, at the socket it arrives on, by [`Request::parse`]; what cannot be
//! parsed becomes a [`BadRequest`] whose message names the field and the problem. The daemon
//! forwards pane ops to the pane host by serializing the typed request again
//! ([`Request::to_line`]), and the pane host parses it once more at its own socket.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::code::ErrorCode;
use crate::de::{self, FieldError};
use crate::identity::Expect;
use crate::name::SessionName;

/// A parsed request: the id its reply echoes and the op with its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Any JSON value the requester chose; `null` when it gave none.
    pub id: Value,
    /// What is asked.
    pub op: Op,
}

/// Why a line is not a request; carries the id when one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest {
    /// The request's id, or `null`.
    pub id: Value,
    /// [`ErrorCode::Malformed`], [`ErrorCode::UnknownOp`] or [`ErrorCode::Invalid`].
    pub code: ErrorCode,
    /// What is wrong, naming the field.
    pub message: String,
}

impl Request {
    /// A request with `id`.
    pub fn new(id: impl Into<Value>, op: impl Into<Op>) -> Request {
        Request {
            id: id.into(),
            op: op.into(),
        }
    }

    /// Parses one request line (without its newline).
    pub fn parse(line: &[u8]) -> Result<Request, BadRequest> {
        Request::parse_at(line, None)
    }

    /// Parses one request line as `side` serves it: an op of the protocol that `side` does not
    /// serve is `unknown-op`, whatever its fields, and the message lists what `side` serves.
    pub fn parse_at(line: &[u8], side: Option<Side>) -> Result<Request, BadRequest> {
        let value: Value = serde_json::from_slice(line).map_err(|err| BadRequest {
            id: Value::Null,
            code: ErrorCode::Malformed,
            message: format!("malformed JSON: {err}"),
        })?;
        Request::from_value_at(&value, side)
    }

    /// Parses a request from a JSON value.
    pub fn from_value(value: &Value) -> Result<Request, BadRequest> {
        Request::from_value_at(value, None)
    }

    /// Parses a request from a JSON value as `side` serves it (see [`Request::parse_at`]).
    pub fn from_value_at(value: &Value, side: Option<Side>) -> Result<Request, BadRequest> {
        let Value::Object(body) = value else {
            return Err(BadRequest {
                id: Value::Null,
                code: ErrorCode::Malformed,
                message: "a request must be a JSON object".into(),
            });
        };
        let id = body.get("id").cloned().unwrap_or(Value::Null);
        let invalid = |message: String| BadRequest {
            id: id.clone(),
            code: ErrorCode::Invalid,
            message,
        };
        // A request may name the protocol version it is written in, so that one sent before the
        // hello's answer was seen (a read pipelined behind the hello, a send) is refused, not
        // carried out, by a server that does not speak it.
        if let Some(version) = body.get("protocol") {
            use crate::limits::{MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};
            match version.as_u64() {
                Some(v) if (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&v) => {}
                _ => {
                    return Err(BadRequest {
                        id: id.clone(),
                        code: ErrorCode::UnsupportedVersion,
                        message: format!(
                            "request written in protocol {version}; this server speaks \
                             {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}"
                        ),
                    })
                }
            }
        }
        let name = match body.get("op") {
            Some(Value::String(name)) => name,
            Some(_) => return Err(invalid("field \"op\" must be a string".into())),
            None => return Err(invalid("missing field \"op\"".into())),
        };
        let unknown = || {
            let known: Vec<&str> = Op::NAMES
                .iter()
                .copied()
                .filter(|op| side.is_none_or(|side| side.serves(op)))
                .collect();
            let at = match side {
                Some(Side::PaneHost) => " for a pane host",
                Some(Side::Daemon) | None => "",
            };
            BadRequest {
                id: id.clone(),
                code: ErrorCode::UnknownOp,
                message: format!("unknown op {name:?}{at} (known: {})", known.join(", ")),
            }
        };
        if side.is_some_and(|side| !side.serves(name)) {
            return Err(unknown());
        }
        match Op::decode(name, value) {
            Some(Ok(op)) => Ok(Request { id, op }),
            Some(Err(err)) => Err(invalid(err.to_string())),
            None => Err(unknown()),
        }
    }

    /// The request as a JSON object: the op's fields, `op` and `id`.
    pub fn to_value(&self) -> Value {
        let mut value =
            serde_json::to_value(&self.op).unwrap_or_else(|_| Value::Object(Map::new()));
        if let Value::Object(map) = &mut value {
            map.insert("id".into(), self.id.clone());
        }
        value
    }

    /// The request as one line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&self.to_value()).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

impl Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

/// Which server a request line arrived at: each serves a part of [`Op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The daemon: every op but `txn` and `adopt`, which only a pane's own socket answers.
    Daemon,
    /// A pane host: the ops about its one pane.
    PaneHost,
}

impl Side {
    /// The ops a pane host serves, in the order of the [`Op`] table.
    pub fn pane_host_ops() -> impl Iterator<Item = &'static str> {
        Op::SERVED
            .iter()
            .filter(|(_, served)| served.by_pane_host())
            .map(|(name, _)| *name)
    }

    /// True if this side serves the op named `op`.
    pub fn serves(self, op: &str) -> bool {
        let Some((_, served)) = Op::SERVED.iter().find(|(name, _)| *name == op) else {
            return false;
        };
        match self {
            Side::Daemon => served.by_daemon(),
            Side::PaneHost => served.by_pane_host(),
        }
    }
}

/// Who serves an op, the last column of the [`Op`] table: the one place that says which ops
/// the daemon answers, which it forwards to the pane's host, and which only a pane host's own
/// socket answers, so [`Side::serves`], [`Side::pane_host_ops`] and [`Op::is_pane_op`] cannot
/// disagree with each other or with the list of ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The daemon answers it; a pane host does not serve it.
    Daemon,
    /// Each side answers it itself (about the daemon, or about the pane host's one pane).
    Both,
    /// The daemon passes it unchanged to the pane's host, which answers it.
    Forwarded,
    /// Only a pane's own socket answers it.
    PaneHost,
}

impl Served {
    /// Whether a request line for the op is served at the daemon's socket (answered there or
    /// forwarded).
    pub fn by_daemon(self) -> bool {
        !matches!(self, Served::PaneHost)
    }

    /// Whether a pane host serves the op at its own socket.
    pub fn by_pane_host(self) -> bool {
        !matches!(self, Served::Daemon)
    }
}

/// Declares [`Op`] from one list of `"wire-name" => Variant(FieldsType) @ Served`, so the names
/// that parse, serialize and appear in error messages, and who serves each op ([`Served`]),
/// can never disagree.
macro_rules! ops {
    ($($(#[$doc:meta])* $name:literal => $variant:ident($ty:ty) @ $served:ident,)*) => {
        /// Every op of the protocol. The daemon serves some, forwards the pane ops to the pane
        /// host, and the pane host serves those; each side answers an op it does not serve with
        /// `unknown-op`.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[cfg_attr(test, derive(arbitrary::Arbitrary))]
        #[serde(tag = "op")]
        pub enum Op {
            $($(#[$doc])* #[serde(rename = $name)] $variant($ty),)*
        }

        impl Op {
            /// The wire names of every op.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// Every op's wire name and who serves it, in the table's order.
            pub const SERVED: &'static [(&'static str, Served)] = &[$(($name, Served::$served)),*];

            /// This op's wire name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Op::$variant(_) => $name,)*
                }
            }

            /// Who serves this op.
            pub fn served(&self) -> Served {
                match self {
                    $(Op::$variant(_) => Served::$served,)*
                }
            }

            /// The op named `name` with its fields read from `body`; `None` for an unknown name.
            fn decode(name: &str, body: &Value) -> Option<Result<Op, FieldError>> {
                match name {
                    $($name => Some(de::from_value::<$ty>(body).map(Op::$variant)),)*
                    _ => None,
                }
            }
        }

        $(impl From<$ty> for Op {
            fn from(fields: $ty) -> Op {
                Op::$variant(fields)
            }
        })*
    };
}

ops! {
    /// Version negotiation.
    "hello" => Hello(Hello) @ Both,
    /// Start a pane (daemon).
    "spawn" => Spawn(Spawn) @ Daemon,
    /// Every pane and its state (daemon).
    "list" => List(List) @ Daemon,
    /// End a pane: its program and its pane host.
    "kill" => Kill(Kill) @ Both,
    /// Where to attach (daemon); switch the connection to frames (pane host).
    "attach" => Attach(Attach) @ Both,
    /// Stop the daemon, optionally ending every pane first (daemon).
    "shutdown" => Shutdown(Shutdown) @ Daemon,
    /// A pane's DING state (daemon).
    "ding.status" => DingStatus(DingStatus) @ Daemon,
    /// Wake a pane's DING worker (daemon).
    "ding.nudge" => DingNudge(DingNudge) @ Daemon,
    /// `belfry dispatch` at a turn boundary claims unread messages (daemon, spec §7.5).
    "ding.turn-boundary" => DingTurnBoundary(DingTurnBoundary) @ Daemon,
    /// A hook event seen by `belfry dispatch` inside a pane (daemon).
    "hook" => Hook(Hook) @ Daemon,
    /// A guarded write (spec §3).
    "send" => Send(Send) @ Forwarded,
    /// The screen and the pane's identity.
    "snapshot" => Snapshot(Snapshot) @ Forwarded,
    /// Lines of history.
    "scrollback" => Scrollback(Scrollback) @ Forwarded,
    /// Change the pane's size.
    "resize" => Resize(Resize) @ Forwarded,
    /// Clear the screen model and history.
    "clear" => Clear(Clear) @ Forwarded,
    /// End the program and start it again (a new incarnation).
    "restart" => Restart(Restart) @ Forwarded,
    /// Detach every attached client.
    "detach" => Detach(Detach) @ Forwarded,
    /// Until conditions hold or a timeout passes.
    "wait" => Wait(Wait) @ Forwarded,
    /// The pane host's record.
    "info" => Info(Info) @ Forwarded,
    /// A stream of events.
    "subscribe" => Subscribe(Subscribe) @ Both,
    /// What became of a transaction.
    "txn" => Txn(Txn) @ PaneHost,
    /// Hand this connection to the pane's host (daemon).
    "bind" => Bind(Bind) @ Daemon,
    /// Take over a client's connection that the daemon hands over (pane host).
    "adopt" => Adopt(Adopt) @ PaneHost,
}

impl Op {
    /// The pane this op is about, if it names one.
    pub fn session(&self) -> Option<&SessionName> {
        match self {
            Op::Hello(_) | Op::List(_) | Op::Shutdown(_) | Op::Adopt(_) => None,
            Op::Spawn(op) => Some(&op.session),
            Op::Kill(op) => op.session.as_ref(),
            Op::Attach(op) => op.session.as_ref(),
            Op::DingStatus(op) => op.session.as_ref(),
            Op::DingNudge(op) => op.session.as_ref(),
            Op::DingTurnBoundary(op) => op.session.as_ref(),
            Op::Hook(op) => op.session.as_ref(),
            Op::Send(op) => op.session.as_ref(),
            Op::Snapshot(op) => op.session.as_ref(),
            Op::Scrollback(op) => op.session.as_ref(),
            Op::Resize(op) => op.session.as_ref(),
            Op::Clear(op) => op.session.as_ref(),
            Op::Restart(op) => op.session.as_ref(),
            Op::Detach(op) => op.session.as_ref(),
            Op::Wait(op) => op.session.as_ref(),
            Op::Info(op) => op.session.as_ref(),
            Op::Subscribe(op) => op.session.as_ref(),
            Op::Txn(op) => op.session.as_ref(),
            Op::Bind(op) => op.session.as_ref(),
        }
    }

    /// True for the ops the daemon forwards unchanged to the pane's host (`txn` is not one:
    /// only the pane's own socket answers it).
    pub fn is_pane_op(&self) -> bool {
        self.served() == Served::Forwarded
    }
}

/// Declares an op whose only field is the pane it is about. `session` is strict: a request
/// that names its pane as `null` is refused, never taken as "any pane".
macro_rules! session_only {
    ($($(#[$doc:meta])* $name:ident,)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[cfg_attr(test, derive(arbitrary::Arbitrary))]
        pub struct $name {
            /// The pane (required by the daemon; checked by the pane host when given).
            #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "de::present")]
            pub session: Option<SessionName>,
        }

        impl $name {
            /// The op about `session`.
            pub fn of(session: SessionName) -> $name {
                $name { session: Some(session) }
            }
        }
    )*};
}

session_only! {
    /// `kill`.
    Kill,
    /// `ding.status`.
    DingStatus,
    /// `ding.nudge`.
    DingNudge,
    /// `clear`.
    Clear,
    /// `restart`.
    Restart,
    /// `detach`.
    Detach,
    /// `info`.
    Info,
    /// `bind`: after its reply the connection is served by the pane's host (issue 13,
    /// target 3).
    Bind,
}

/// `adopt`, which the daemon sends a pane host on a connection of its own to hand it a
/// client's connection that asked to `bind`: the pane host agrees, takes the descriptor (one
/// byte with `SCM_RIGHTS`), answers the client's `bind` on it and serves it from then on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Adopt {
    /// The `id` of the client's `bind`, which the pane host's answer on the client's
    /// connection carries.
    #[serde(default)]
    #[cfg_attr(test, arbitrary(with = arbitrary_json))]
    pub bind_id: Value,
}

/// `hello`: the versions the requester speaks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Hello {
    /// Every version the requester speaks. Entries that are not versions (a newer client's
    /// non-integer values) are ignored, not refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "versions_of"
    )]
    pub versions: Option<Vec<u64>>,
    /// The one version an older requester speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

impl Hello {
    /// The versions this build speaks.
    pub fn ours() -> Hello {
        Hello {
            versions: Some(
                (crate::limits::MIN_PROTOCOL_VERSION..=crate::limits::PROTOCOL_VERSION).collect(),
            ),
            version: None,
        }
    }

    /// The highest version both sides speak.
    pub fn negotiate(&self) -> Result<u64, String> {
        use crate::limits::{MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};
        let offered = match (&self.versions, self.version) {
            (Some(versions), _) => versions.clone(),
            (None, Some(version)) => vec![version],
            (None, None) => vec![PROTOCOL_VERSION],
        };
        offered
            .into_iter()
            .filter(|v| (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(v))
            .max()
            .ok_or_else(|| {
                format!(
                    "no common protocol version: this side speaks \
                     {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}"
                )
            })
    }
}

/// The integer entries of `hello`'s `versions` array; an array is still required.
fn versions_of<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<u64>>, D::Error> {
    let items = Option::<Vec<Value>>::deserialize(deserializer)?;
    Ok(items.map(|items| items.iter().filter_map(Value::as_u64).collect()))
}

/// Which attached client decides the pane size (spec §5).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum SizePolicy {
    /// The most recently active writable client (tmux's `latest`).
    #[default]
    Latest,
    /// The smallest of the writable clients.
    Smallest,
}

/// `spawn`: what the new pane runs (spec §2). The daemon checks what a type cannot (a program
/// to run, a cwd that exists, a policy it knows) and builds the pane's launch spec from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Spawn {
    /// The new pane's name.
    pub session: SessionName,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The program's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Declared environment: part of the generation.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "de::null_is_default"
    )]
    pub env: BTreeMap<String, String>,
    /// The requester's environment: not part of the generation.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "de::null_is_default"
    )]
    pub base_env: BTreeMap<String, String>,
    /// The requester's terminal type (its `TERM`), for a pane that starts from the daemon's
    /// environment (`base_env` empty: a pane on another machine): the child's `TERM` when
    /// `base_env` has none and it names a terminal the screen model renders. Not part of the
    /// generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<String>,
    /// Initial rows (default 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Initial columns (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u64>,
    /// Which attached client decides the size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_policy: Option<SizePolicy>,
    /// Scrollback lines kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u64>,
    /// The most bytes the scrollback may take; the oldest lines go first past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback_bytes: Option<u64>,
    /// The DING delivery policy token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ding_policy: Option<String>,
    /// The DING adapter command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_command: Option<Vec<String>>,
    /// The adapter (a directory under the adapters directory) that describes the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<SessionName>,
    /// A charter (system prompt) placed the way the adapter declares (spec §11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charter: Option<String>,
}

impl Spawn {
    /// A spawn of `argv` as `session`, every other field at its default.
    pub fn new(session: SessionName, argv: Vec<String>) -> Spawn {
        Spawn {
            session,
            argv,
            cwd: None,
            env: BTreeMap::new(),
            base_env: BTreeMap::new(),
            term: None,
            rows: None,
            cols: None,
            size_policy: None,
            scrollback: None,
            scrollback_bytes: None,
            ding_policy: None,
            adapter_command: None,
            adapter: None,
            charter: None,
        }
    }
}

/// `list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct List {}

/// `attach`. `read_only` is strict: a mistyped or null `read_only` never becomes a writable
/// client.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Attach {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// A client that only watches.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub read_only: Option<bool>,
    /// The client's rows (with `cols`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// The client's columns (with `rows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u64>,
    /// The client hands its terminal to the pane host: once the reply says `terminal: true`,
    /// the client sends its terminal's descriptor (`SCM_RIGHTS`, with one byte) and the pane
    /// host writes the redraw and the pane's output to it itself (docs/protocol.md, "Attach").
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub terminal: Option<bool>,
    /// With `terminal`: the client hands its keyboard too, and this is the byte its own
    /// bindings start with (its prefix, or its one detach key). Once the reply says
    /// `keyboard: true`, the client sends the keyboard's descriptor beside the terminal's, and
    /// the pane host reads keystrokes from it while the client lets it (`{"keyboard":true}`),
    /// giving back every read that holds this byte or an escape (`{"keys":[…]}`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub keyboard: Option<u8>,
    /// The client draws a status line on its terminal's last row: `rows` are the rows left to
    /// the pane, and the pane host shows this client the pane from its model, painted in place
    /// in those rows ([`crate::Control::Status`] turns it on and off later).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub status: Option<bool>,
}

/// `shutdown`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Shutdown {
    /// End every pane first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_panes: Option<bool>,
}

/// `ding.turn-boundary`: a protocol v1 turn-boundary event, checked by the pane's DING worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct DingTurnBoundary {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// The event, validated by the DING adapter protocol (spec §7.4).
    #[cfg_attr(test, arbitrary(with = arbitrary_json))]
    pub event: Value,
    /// Which step of a claim this is (spec §7.5: a message becomes hook-owned only once the
    /// answer carrying its notice was written). Absent: owned at once, as older dispatchers ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<ClaimStep>,
    /// The reservation a `confirm` or `release` settles, as the `reserve` answer named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// What the notices are for. Absent: context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<ClaimPurpose>,
}

/// The steps of a turn-boundary claim (spec §7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum ClaimStep {
    /// Hold the named messages for this dispatch: no PTY input, not offered to another hook,
    /// until it confirms or releases them, or the reservation's deadline passes.
    Reserve,
    /// The answer carrying the notices was written: the reserved messages become hook-owned.
    Confirm,
    /// The answer was not written: the reserved messages are pending again.
    Release,
}

/// What a turn-boundary claim's notices are for (spec §7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum ClaimPurpose {
    /// They join the context of the prompt being sent.
    Context,
    /// They are the reason the agent continues its turn at a turn stop: capped per pane.
    Continuation,
}

/// `hook`: what `belfry dispatch` saw, published on the bus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Hook {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// The canonical hook event name.
    pub hook: String,
    /// Where the event came from (a session start's source), as the harness said.
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
    /// At a prompt submit: who wrote the prompt, as far as dispatch can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptOrigin>,
    /// At a prompt submit: the unread messages whose exact notice line the prompt carries
    /// (spec §7.4 receipts: the harness accepted the notice DING typed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// Who wrote a submitted prompt (spec §7.5: the continuation cap resets on a turn the user
/// started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum PromptOrigin {
    /// No belfry notice in it: a turn the user (or their tooling) started.
    User,
    /// It carries a belfry notice: DING typed it, or a continuation's reason became it.
    Belfry,
}

/// One step of a send's input. Each is an object of one key: `{"text":…}`, `{"bytes":…}`
/// (base64), `{"paste":…}`, `{"key":…}` or `{"delay_ms":…}`. The pane host checks key names
/// and limits (spec §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum InputStep {
    /// Text written as it is.
    Text(String),
    /// Raw bytes, base64-encoded.
    Bytes(String),
    /// Text pasted (bracketed when the program asked for it).
    Paste(String),
    /// A named key (`Enter`, `C-c`, …).
    Key(String),
    /// A pause between steps.
    DelayMs(u64),
}

/// `send`: a guarded write (spec §3). `expect` and `timeout_ms` are strict: a `null` guard is
/// refused, never read as "no guard".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Send {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// What the pane must still be; absent fields are not compared.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub expect: Option<Expect>,
    /// What to write.
    pub input: Vec<InputStep>,
    /// A transaction id whose fate the pane host records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn: Option<String>,
    /// The send is a DING notice transaction. Every other send is input from outside the
    /// program (a person, a supervisor), which the pane host announces as `typed` so the
    /// pane's DING worker does not take the idle before it for one it may type into (spec
    /// §7.4); a notice must not hold the notices after it. Strict: `null` is refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub notice: Option<bool>,
    /// How long the writes may wait in total for the program to read.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub timeout_ms: Option<u64>,
}

/// The `timeout_ms` of a send: how long its writes may wait, in total, for the program to read
/// (delay steps not counted). Default [`crate::limits::DEFAULT_SEND_TIMEOUT_MS`], at most [`crate::limits::MAX_SEND_TIMEOUT_MS`].
/// The daemon checks it too before forwarding, so a malformed bound never leaves the daemon.
pub fn send_timeout(op: &Send) -> Result<std::time::Duration, String> {
    let ms = op
        .timeout_ms
        .unwrap_or(crate::limits::DEFAULT_SEND_TIMEOUT_MS);
    let max = crate::limits::MAX_SEND_TIMEOUT_MS;
    if !(1..=max).contains(&ms) {
        return Err(format!(
            "field \"timeout_ms\" is {ms}: a send's timeout must be 1..={max} ms"
        ));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// `snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Snapshot {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// Every cell with its attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<bool>,
    /// Each line with its SGR sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ansi: Option<bool>,
    /// The last N lines of history too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u64>,
}

/// `scrollback`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Scrollback {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// The first history line (0 is the oldest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// How many lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// `resize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Resize {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// New rows.
    pub rows: u64,
    /// New columns.
    pub cols: u64,
}

/// `wait`: until every given condition holds, or the timeout passes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Wait {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// The revision is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The program has exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<bool>,
    /// The screen matches this regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Nothing changed for this many ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_ms: Option<u64>,
    /// The program reports this state (OSC 7501): the record the pane is shown by
    /// ([`crate::program_status::summary`]) is in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::program_status::ProgramState>,
    /// Give up after this many ms (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `subscribe`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Subscribe {
    /// Only this pane's events (and its revisions); every pane's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionName>,
    /// Revision events too (pane host; default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<bool>,
    /// With true, an exit of the running program that came before the subscription is sent
    /// first, once (pane host; default false): the daemon's monitor of a program that ended
    /// before the monitor subscribed still hears of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_so_far: Option<bool>,
    /// The daemon first sends up to this many of the events it kept (its last
    /// [`crate::limits::EVENT_HISTORY`] bus events, revisions aside; none kept across a
    /// restart), oldest first, each with `history: true` and `at_ms`, the Unix time in ms it
    /// happened; then the live stream, with no event missed or sent twice between the two
    /// (daemon; default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<u32>,
    /// Only kept events that happened at or after this Unix time in ms (daemon; with
    /// `history`, both bounds hold; alone, every kept event since then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
}

/// `txn`: what became of a transaction; with `settle`, forget an ended one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Txn {
    /// The pane.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::present"
    )]
    pub session: Option<SessionName>,
    /// The transaction id.
    pub txn: String,
    /// Forget an ended transaction whose outcome the requester has recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<bool>,
    /// The pane host the transaction was sent to (`<pid>-<started_at>`, as its record
    /// says). Socket paths are reused: a pane host bound later under the same path never saw
    /// the transaction, so it answers `unknown` rather than fencing an id it cannot vouch for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Small JSON values for the property test (no floats: they need not round-trip exactly).
#[cfg(test)]
fn arbitrary_json(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<u32>()?),
        3 => Value::String(u.arbitrary()?),
        4 => Value::Array(vec![Value::String(u.arbitrary()?)]),
        _ => {
            let mut map = Map::new();
            map.insert(u.arbitrary()?, Value::from(u.arbitrary::<i32>()?));
            Value::Object(map)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bad(line: Value) -> BadRequest {
        Request::from_value(&line).unwrap_err()
    }

    #[test]
    fn bad_requests_are_named() {
        assert_eq!(Request::parse(b"{").unwrap_err().code, ErrorCode::Malformed);
        assert!(bad(json!([1])).message.contains("JSON object"));
        let err = bad(json!({"id": 7}));
        assert_eq!(
            (err.id, err.message.as_str()),
            (json!(7), "missing field \"op\"")
        );
        let err = bad(json!({"id": 1, "op": "frobnicate"}));
        assert_eq!(err.code, ErrorCode::UnknownOp);
        assert!(
            err.message.contains("unknown op \"frobnicate\""),
            "{}",
            err.message
        );
        let err = bad(json!({"op": "send", "session": "rec"}));
        assert_eq!(err.message, "missing field \"input\"");
        let err = bad(json!({"op": "snapshot", "session": "../etc"}));
        assert!(
            err.message.contains("invalid session name"),
            "{}",
            err.message
        );
        let err = bad(json!({"op": "send", "session": "r", "expect": {"revison": 3}, "input": []}));
        assert!(
            err.message.contains("\"expect.revison\""),
            "{}",
            err.message
        );
        let err = bad(json!({"op": "send", "expect": {"revision": null}, "input": []}));
        assert!(
            err.message.contains("\"expect.revision\" is null"),
            "{}",
            err.message
        );
        let err = bad(json!({"op": "attach", "read_only": null}));
        assert!(
            err.message.contains("\"read_only\" is null"),
            "{}",
            err.message
        );
        let err = bad(json!({"op": "send", "input": [{"text": "a"}, {"key": 5}]}));
        assert_eq!(err.message, "field \"input[1].key\" must be a string");
    }

    #[test]
    fn each_side_refuses_the_ops_it_does_not_serve_before_reading_their_fields() {
        let host =
            Request::parse_at(br#"{"id":3,"op":"spawn"}"#, Some(Side::PaneHost)).unwrap_err();
        assert_eq!(host.code, ErrorCode::UnknownOp);
        assert!(
            host.message
                .starts_with("unknown op \"spawn\" for a pane host (known: hello"),
            "{}",
            host.message
        );
        let daemon =
            Request::parse_at(br#"{"op":"txn","txn":"t"}"#, Some(Side::Daemon)).unwrap_err();
        assert_eq!(daemon.code, ErrorCode::UnknownOp);
        assert!(!daemon.message.contains("txn,"), "{}", daemon.message);
        assert!(Request::parse_at(br#"{"op":"txn","txn":"t"}"#, Some(Side::PaneHost)).is_ok());
        for name in Op::NAMES {
            assert!(
                Side::Daemon.serves(name) || Side::PaneHost.serves(name),
                "{name} is served nowhere"
            );
        }
    }

    #[test]
    fn a_request_in_a_protocol_the_server_does_not_speak_is_refused_before_its_op() {
        let err = Request::parse_at(
            br#"{"id":4,"op":"send","protocol":99,"input":[{"text":"x"}]}"#,
            Some(Side::PaneHost),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::UnsupportedVersion);
        assert_eq!(err.id, json!(4));
        assert!(err.message.contains("protocol 99"), "{}", err.message);
        let err = Request::parse_at(br#"{"op":"nonsense","protocol":"1"}"#, None).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnsupportedVersion);
        let ok = Request::parse_at(
            br#"{"id":5,"op":"send","protocol":1,"input":[{"text":"x"}]}"#,
            Some(Side::PaneHost),
        )
        .unwrap();
        assert!(matches!(ok.op, Op::Send(_)));
    }

    #[test]
    fn hello_picks_the_highest_common_version() {
        let offer = |versions: Vec<u64>| Hello {
            versions: Some(versions),
            version: None,
        };
        assert_eq!(offer(vec![1, 99]).negotiate(), Ok(1));
        assert!(offer(vec![99])
            .negotiate()
            .unwrap_err()
            .contains("no common protocol version"));
        assert_eq!(
            Hello::default().negotiate(),
            Ok(crate::limits::PROTOCOL_VERSION)
        );
        assert_eq!(
            Hello::ours().negotiate(),
            Ok(crate::limits::PROTOCOL_VERSION)
        );
    }

    #[test]
    fn a_send_reads_as_typed_steps() {
        let request = Request::from_value(&json!({"id": "a", "op": "send", "session": "w",
            "expect": {"revision": 3},
            "input": [{"text": "hi"}, {"key": "Enter"}, {"delay_ms": 5}]}))
        .unwrap();
        let Op::Send(send) = &request.op else {
            panic!("not a send: {request:?}");
        };
        assert_eq!(send.expect.as_ref().and_then(|e| e.revision), Some(3));
        assert_eq!(
            send.input,
            vec![
                InputStep::Text("hi".into()),
                InputStep::Key("Enter".into()),
                InputStep::DelayMs(5)
            ]
        );
        assert_eq!(request.to_value()["op"], "send");
    }

    /// The op lists were written out by hand before the table said who serves each op; the
    /// lists the table derives are exactly those.
    #[test]
    fn the_op_lists_derived_from_the_table_are_the_lists_written_out_before() {
        let pane_host_before = [
            "hello",
            "info",
            "snapshot",
            "scrollback",
            "send",
            "txn",
            "resize",
            "clear",
            "restart",
            "kill",
            "detach",
            "wait",
            "attach",
            "subscribe",
            "adopt",
        ];
        let mut derived: Vec<&str> = Side::pane_host_ops().collect();
        let mut before = pane_host_before.to_vec();
        derived.sort_unstable();
        before.sort_unstable();
        assert_eq!(derived, before);
        for name in Op::NAMES {
            assert_eq!(
                Side::Daemon.serves(name),
                *name != "txn" && *name != "adopt",
                "{name} at the daemon"
            );
            assert_eq!(
                Side::PaneHost.serves(name),
                pane_host_before.contains(name),
                "{name} at a pane host"
            );
        }
        assert!(!Side::Daemon.serves("nonsense") && !Side::PaneHost.serves("nonsense"));
        let forwarded_before = [
            "send",
            "snapshot",
            "scrollback",
            "resize",
            "clear",
            "restart",
            "detach",
            "wait",
            "info",
        ];
        // Each op, read from the fewest fields it needs, answers is_pane_op as the old list did.
        let fields = [
            json!({}),
            json!({"session": "w", "argv": ["x"]}),
            json!({"input": [{"text": "x"}]}),
            json!({"txn": "t"}),
            json!({"hook": "stop"}),
            json!({"event": {}}),
            json!({"rows": 24, "cols": 80}),
        ];
        for name in Op::NAMES {
            let op = fields
                .iter()
                .find_map(|fields| {
                    let mut request = fields.clone();
                    request["op"] = json!(name);
                    Request::from_value(&request).ok()
                })
                .unwrap_or_else(|| panic!("no request of {name} was read"))
                .op;
            assert_eq!(op.is_pane_op(), forwarded_before.contains(name), "{name}");
        }
    }
}
