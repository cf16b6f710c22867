//! The error codes of error replies (`{"ok":false,"error":{"code":…,"message":…}}`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a request failed, as a machine-readable code. Unknown codes from a newer peer are kept
/// as [`ErrorCode::Other`], never refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A field is missing, null where it guards something, of the wrong type or out of range.
    Invalid,
    /// No pane of that name (or a pane host asked about another pane).
    NotFound,
    /// A pane of that name already exists.
    Exists,
    /// The op is not one this side serves.
    UnknownOp,
    /// The line is not a JSON object.
    Malformed,
    /// The line exceeds [`crate::limits::MAX_LINE`]; the connection is closed.
    TooLong,
    /// No protocol version both sides speak.
    UnsupportedVersion,
    /// Something inside failed that the request could not have avoided.
    Internal,
    /// The pane or worker exists but cannot serve now (stopped, unadopted, gone).
    Unavailable,
    /// A deadline passed.
    Timeout,
    /// A send whose transaction a restart or kill ended; the error carries `written`.
    Aborted,
    /// The peer is not allowed (another uid).
    Forbidden,
    /// The socket already serves as many connections as it allows; this one is closed.
    Busy,
    /// A code this build does not know.
    Other(String),
}

impl ErrorCode {
    /// Every code this build knows, with its wire text.
    const KNOWN: [(ErrorCode, &'static str); 13] = [
        (ErrorCode::Invalid, "invalid"),
        (ErrorCode::NotFound, "not-found"),
        (ErrorCode::Exists, "exists"),
        (ErrorCode::UnknownOp, "unknown-op"),
        (ErrorCode::Malformed, "malformed"),
        (ErrorCode::TooLong, "line-too-long"),
        (ErrorCode::UnsupportedVersion, "unsupported-version"),
        (ErrorCode::Internal, "internal"),
        (ErrorCode::Unavailable, "unavailable"),
        (ErrorCode::Timeout, "timeout"),
        (ErrorCode::Aborted, "aborted"),
        (ErrorCode::Forbidden, "forbidden"),
        (ErrorCode::Busy, "busy"),
    ];

    /// The code's wire text.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Other(text) => text,
            known => Self::KNOWN
                .iter()
                .find(|(code, _)| code == known)
                .map_or("internal", |(_, text)| text),
        }
    }

    /// The code a wire text names.
    pub fn from_wire(text: &str) -> ErrorCode {
        Self::KNOWN
            .iter()
            .find(|(_, known)| *known == text)
            .map_or_else(
                || ErrorCode::Other(text.to_string()),
                |(code, _)| code.clone(),
            )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(ErrorCode::from_wire(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_code_round_trips_through_its_wire_text() {
        for (code, text) in ErrorCode::KNOWN {
            assert_eq!(code.as_str(), text);
            assert_eq!(ErrorCode::from_wire(text), code);
        }
        assert_eq!(
            ErrorCode::from_wire("newer"),
            ErrorCode::Other("newer".into())
        );
    }
}
