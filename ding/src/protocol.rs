//! Adapter protocol v1: parsing and validating the NDJSON events an activity adapter writes
//! (spec §7.4).
//!
//! ```json
//! {"v":1,"kind":"activity","session":"worker","incarnation":"…","generation":"sha256:…",
//!  "sequence":7,"state":"idle","composer":"empty","validForMs":250,"revision":42}
//! {"v":1,"kind":"turn-boundary", …header…, "sequence":8, "messages":["1785070000000-abc123.md"]}
//! {"v":1,"kind":"receipt", …header…, "sequence":9, "message":"1785070000000-abc123.md",
//!  "state":"accepted"}
//! ```
//!
//! [`parse_event`] checks one line on its own; [`EventValidator`] adds the per-process rule that
//! sequence numbers strictly increase. Every rejection is an [`Error::AdapterEvent`] carrying the
//! [`HoldReason`] it maps to, so the caller feeds the reason straight to the lease machine: a bad
//! line is never ignored, it is a hold (fail closed).
//!
//! Identity (session, incarnation, generation) is *syntax* here; whether it matches the pane is
//! decided by the lease machine, which knows the pane's current identity.
//! Fields this version does not define are ignored, so adapters may add diagnostics.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::hold::HoldReason;
use crate::names::{MessageName, SessionName};
use crate::notice::sanitize_field;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// The longest event line accepted, 64 KiB; a longer line is malformed. A turn-boundary event
/// naming a thousand messages still fits in half of it.
pub const MAX_EVENT_LINE_BYTES: usize = 64 * 1024;

/// How much of a rejected line an error keeps.
const LINE_EXCERPT_CHARS: usize = 200;

/// The longest incarnation or generation accepted.
const MAX_IDENTITY_BYTES: usize = 256;

/// How much of the adapter's opaque `reason` is kept for status and logs.
const MAX_REASON_CHARS: usize = 200;

/// The fields every event carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventHeader {
    /// The pane the adapter speaks about.
    pub session: SessionName,
    /// The pane process incarnation the adapter observed.
    pub incarnation: String,
    /// The pane launch generation the adapter observed.
    pub generation: String,
    /// Strictly increasing per adapter process.
    pub sequence: u64,
}

/// `activity.state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActivityState {
    /// Waiting for input.
    Idle,
    /// Working on a turn.
    Active,
    /// A child command runs in the foreground.
    Child,
    /// The adapter cannot tell.
    Unknown,
}

/// `activity.composer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ComposerState {
    /// Provably empty.
    Empty,
    /// Holds a draft.
    Nonempty,
    /// The adapter cannot tell.
    Unknown,
}

/// `receipt.state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiptState {
    /// The harness took the notice as input; the only state that marks it delivered.
    Accepted,
    /// The notice is retained somewhere harmless.
    RetainedSafe,
    /// The notice is retained and blocks something.
    RetainedBlocked,
    /// The notice did not stay.
    NotRetained,
    /// The adapter cannot prove anything.
    Unproven,
}

/// The kind-specific part of an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EventBody {
    /// What the harness is doing and whether its composer is empty.
    Activity {
        /// `state`.
        state: ActivityState,
        /// `composer`.
        composer: ComposerState,
        /// `validForMs`, if given.
        valid_for_ms: Option<u64>,
        /// `revision`: the snapshot revision the adapter judged, if given.
        revision: Option<u64>,
        /// `reason`: the adapter's opaque diagnostic, sanitised and bounded.
        reason: Option<String>,
    },
    /// Messages a provider hook injected into the harness's next context (spec §7.5).
    TurnBoundary {
        /// The names that are well-formed message names.
        messages: Vec<MessageName>,
        /// Names outside the message grammar (without path separators); they cannot be unread,
        /// so they are ignored, and kept (sanitised) so the caller can log them.
        unrecognized: Vec<String>,
    },
    /// What happened to a staged notice.
    Receipt {
        /// The message whose notice it is.
        message: MessageName,
        /// What happened.
        state: ReceiptState,
    },
}

/// One valid protocol v1 event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AdapterEvent {
    /// The common fields.
    pub header: EventHeader,
    /// The kind-specific fields.
    pub body: EventBody,
}

impl AdapterEvent {
    /// The event's `kind` token.
    pub fn kind(&self) -> &'static str {
        match self.body {
            EventBody::Activity { .. } => "activity",
            EventBody::TurnBoundary { .. } => "turn-boundary",
            EventBody::Receipt { .. } => "receipt",
        }
    }
}

/// Validates a stream of events from one adapter process: each line must be a valid event and
/// its sequence must be greater than that of the last accepted event.
///
/// Create a new validator for every adapter process: sequences restart with the process. Keep
/// one per event source: turn-boundary events reported by `belfry dispatch` (spec §7.5) number
/// their own sequence, so they get their own validator.
#[derive(Clone, Debug, Default)]
pub struct EventValidator {
    last_sequence: Option<u64>,
}

impl EventValidator {
    /// A validator that has seen nothing yet.
    pub fn new() -> Self {
        EventValidator::default()
    }

    /// The sequence of the last accepted event.
    pub fn last_sequence(&self) -> Option<u64> {
        self.last_sequence
    }

    /// Parses and validates one line (without its newline). A rejected line leaves the
    /// validator unchanged.
    pub fn validate(&mut self, line: &str) -> Result<AdapterEvent> {
        let event = parse_event(line)?;
        let sequence = event.header.sequence;
        if let Some(last) = self.last_sequence {
            if sequence <= last {
                return Err(rejection(
                    line,
                    HoldReason::OutOfOrder,
                    format!("sequence {sequence} is not greater than the previous {last}"),
                ));
            }
        }
        self.last_sequence = Some(sequence);
        Ok(event)
    }
}

/// Parses and validates one line on its own (everything but the sequence order).
pub fn parse_event(line: &str) -> Result<AdapterEvent> {
    let malformed = |detail: String| rejection(line, HoldReason::Malformed, detail);
    if line.len() > MAX_EVENT_LINE_BYTES {
        return Err(malformed(format!(
            "the line is {} bytes; the limit is {MAX_EVENT_LINE_BYTES}",
            line.len()
        )));
    }
    let value: Value =
        serde_json::from_str(line).map_err(|err| malformed(format!("not JSON: {err}")))?;
    let Value::Object(object) = value else {
        return Err(malformed("not a JSON object".to_owned()));
    };
    let fields = Fields { object: &object };
    let version = fields.u64("v").map_err(malformed)?;
    if version != PROTOCOL_VERSION {
        return Err(rejection(
            line,
            HoldReason::UnsupportedVersion,
            format!("protocol version {version} is not supported (this build speaks {PROTOCOL_VERSION})"),
        ));
    }
    let kind = fields.string("kind").map_err(malformed)?;
    if !matches!(kind, "activity" | "turn-boundary" | "receipt") {
        return Err(rejection(
            line,
            HoldReason::UnknownKind,
            format!(
                "kind {:?} is not one of activity, turn-boundary, receipt",
                sanitize_field(kind, 64)
            ),
        ));
    }
    let header = parse_header(&fields).map_err(malformed)?;
    let body = match kind {
        "activity" => parse_activity(&fields),
        "turn-boundary" => parse_turn_boundary(&fields),
        _ => parse_receipt(&fields),
    }
    .map_err(malformed)?;
    Ok(AdapterEvent { header, body })
}

fn parse_header(fields: &Fields<'_>) -> Result<EventHeader, String> {
    let session = fields.string("session")?;
    let session = SessionName::parse(session).map_err(|_| {
        format!(
            "session {:?} is not a session name",
            sanitize_field(session, 80)
        )
    })?;
    Ok(EventHeader {
        session,
        incarnation: fields.identity("incarnation")?,
        generation: fields.identity("generation")?,
        sequence: fields.u64("sequence")?,
    })
}

fn parse_activity(fields: &Fields<'_>) -> Result<EventBody, String> {
    let state = match fields.string("state")? {
        "idle" => ActivityState::Idle,
        "active" => ActivityState::Active,
        "child" => ActivityState::Child,
        "unknown" => ActivityState::Unknown,
        other => return Err(not_one_of("state", other, "idle, active, child, unknown")),
    };
    let composer = match fields.string("composer")? {
        "empty" => ComposerState::Empty,
        "nonempty" => ComposerState::Nonempty,
        "unknown" => ComposerState::Unknown,
        other => return Err(not_one_of("composer", other, "empty, nonempty, unknown")),
    };
    let reason = match fields.object.get("reason") {
        Some(Value::String(reason)) => Some(sanitize_field(reason, MAX_REASON_CHARS)),
        _ => None,
    };
    Ok(EventBody::Activity {
        state,
        composer,
        valid_for_ms: fields.optional_u64("validForMs")?,
        revision: fields.optional_u64("revision")?,
        reason,
    })
}

fn parse_turn_boundary(fields: &Fields<'_>) -> Result<EventBody, String> {
    let Some(Value::Array(items)) = fields.object.get("messages") else {
        return Err("field \"messages\" must be an array of message file names".to_owned());
    };
    let mut messages = Vec::with_capacity(items.len());
    let mut unrecognized = Vec::new();
    for item in items {
        let Value::String(name) = item else {
            return Err("field \"messages\" must contain only strings".to_owned());
        };
        // spec §7.4: a name with a path separator invalidates the whole event.
        if has_path_syntax(name) {
            return Err(format!(
                "message name {:?} contains a path separator or \"..\"",
                sanitize_field(name, 80)
            ));
        }
        match MessageName::parse(name) {
            Ok(message) => messages.push(message),
            Err(_) => unrecognized.push(sanitize_field(name, 80)),
        }
    }
    Ok(EventBody::TurnBoundary {
        messages,
        unrecognized,
    })
}

fn parse_receipt(fields: &Fields<'_>) -> Result<EventBody, String> {
    let name = fields.string("message")?;
    let message = MessageName::parse(name).map_err(|_| {
        format!(
            "field \"message\" {:?} is not a message file name (<unix-ms>-<rand6>.md)",
            sanitize_field(name, 80)
        )
    })?;
    let state = match fields.string("state")? {
        "accepted" => ReceiptState::Accepted,
        "retained-safe" => ReceiptState::RetainedSafe,
        "retained-blocked" => ReceiptState::RetainedBlocked,
        "not-retained" => ReceiptState::NotRetained,
        "unproven" => ReceiptState::Unproven,
        other => {
            return Err(not_one_of(
                "state",
                other,
                "accepted, retained-safe, retained-blocked, not-retained, unproven",
            ))
        }
    };
    Ok(EventBody::Receipt { message, state })
}

/// Whether a name could address anything but one file in one directory.
fn has_path_syntax(name: &str) -> bool {
    name.contains(['/', '\\', '\0']) || name.contains("..")
}

fn not_one_of(field: &str, value: &str, allowed: &str) -> String {
    format!(
        "field {field:?} is {:?}, not one of {allowed}",
        sanitize_field(value, 64)
    )
}

fn rejection(line: &str, reason: HoldReason, detail: String) -> Error {
    Error::AdapterEvent {
        line: line.chars().take(LINE_EXCERPT_CHARS).collect(),
        reason,
        detail,
    }
}

/// What a JSON value is, for a message naming a field of the wrong type.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a negative or fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Typed access to an event's fields, with messages naming the field.
struct Fields<'a> {
    object: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Result<&'a Value, String> {
        self.object
            .get(key)
            .ok_or_else(|| format!("required field {key:?} is missing"))
    }

    fn string(&self, key: &str) -> Result<&'a str, String> {
        self.get(key)?
            .as_str()
            .ok_or_else(|| format!("field {key:?} must be a string"))
    }

    fn u64(&self, key: &str) -> Result<u64, String> {
        self.get(key)?
            .as_u64()
            .ok_or_else(|| format!("field {key:?} must be a non-negative integer"))
    }

    /// A non-negative integer, or `None` when the field is absent. A `null` is refused like
    /// any other non-integer: an adapter that writes `"revision": null` has a bug or lost
    /// track of the screen, and reading it as "not given" would let a notice be typed on the
    /// strength of an event that does not say which screen it judged (fail closed).
    fn optional_u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.object.get(key) {
            None => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                format!(
                    "field {key:?} must be a non-negative integer or left out, not {}",
                    json_kind(value)
                )
            }),
        }
    }

    /// A non-empty, bounded string without control characters.
    fn identity(&self, key: &str) -> Result<String, String> {
        let value = self.string(key)?;
        if value.is_empty()
            || value.len() > MAX_IDENTITY_BYTES
            || value.chars().any(char::is_control)
        {
            return Err(format!(
                "field {key:?} must be 1 to {MAX_IDENTITY_BYTES} bytes without control characters"
            ));
        }
        Ok(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTIVITY: &str = r#"{"v":1,"kind":"activity","session":"worker","incarnation":"9f","generation":"sha256:ab","sequence":7,"state":"idle","composer":"empty","validForMs":250,"revision":42,"reason":"x\u001b[201~y"}"#;

    #[test]
    fn parses_the_spec_activity_example() {
        let event = parse_event(ACTIVITY).unwrap();
        assert_eq!(event.kind(), "activity");
        assert_eq!(event.header.session.as_str(), "worker");
        assert_eq!(event.header.sequence, 7);
        assert_eq!(
            event.body,
            EventBody::Activity {
                state: ActivityState::Idle,
                composer: ComposerState::Empty,
                valid_for_ms: Some(250),
                revision: Some(42),
                reason: Some("x [201~y".to_owned()),
            }
        );
    }

    #[test]
    fn rejected_lines_do_not_move_the_sequence() {
        let mut validator = EventValidator::new();
        validator.validate(ACTIVITY).unwrap();
        let malformed = ACTIVITY
            .replace("\"idle\"", "\"sleeping\"")
            .replace(":7,", ":8,");
        assert!(validator.validate(&malformed).is_err());
        assert_eq!(validator.last_sequence(), Some(7));
        let next = ACTIVITY.replace(":7,", ":8,");
        assert_eq!(validator.validate(&next).unwrap().header.sequence, 8);
    }

    #[test]
    fn error_message_names_the_problem_and_the_line() {
        let err = parse_event(r#"{"v":1,"kind":"activity"}"#).unwrap_err();
        assert_eq!(err.hold_reason(), Some(HoldReason::Malformed));
        assert_eq!(
            err.to_string(),
            "adapter event held as malformed: required field \"session\" is missing \
             (line: \"{\\\"v\\\":1,\\\"kind\\\":\\\"activity\\\"}\")"
        );
    }

    /// Issue 39: `"revision": null` was read as no revision given, and a notice was typed on
    /// the strength of an event that did not say which screen it judged.
    #[test]
    fn a_null_revision_or_valid_for_is_a_malformed_event_not_an_absent_field() {
        for (field, value) in [("revision", "42"), ("validForMs", "250")] {
            let null = ACTIVITY.replace(
                &format!("\"{field}\":{value}"),
                &format!("\"{field}\":null"),
            );
            assert_ne!(null, ACTIVITY);
            let err = parse_event(&null).unwrap_err();
            assert_eq!(err.hold_reason(), Some(HoldReason::Malformed), "{err}");
            assert!(
                err.to_string().contains(&format!(
                    "field \"{field}\" must be a non-negative integer or left out, not null"
                )),
                "{err}"
            );
            let absent = ACTIVITY.replace(&format!(",\"{field}\":{value}"), "");
            assert_ne!(absent, ACTIVITY);
            assert!(parse_event(&absent).is_ok(), "{absent}");
        }
    }

    #[test]
    fn long_lines_are_malformed_and_the_excerpt_is_bounded() {
        let line = format!("{{\"pad\":\"{}\"}}", "x".repeat(MAX_EVENT_LINE_BYTES));
        let err = parse_event(&line).unwrap_err();
        assert_eq!(err.hold_reason(), Some(HoldReason::Malformed));
        match err {
            Error::AdapterEvent { line, .. } => {
                assert_eq!(line.chars().count(), LINE_EXCERPT_CHARS)
            }
            other => panic!("unexpected error {other}"),
        }
    }
}
