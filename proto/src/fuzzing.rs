//! Entry point for the coverage-guided fuzz target `request_line` in `fuzz/` (feature
//! `fuzzing`; never in a release build).

use crate::request::Request;

/// One request line as a client may send it. It is read as a request or refused with a
/// reason, and what is read, written back as a line, reads as the same request: the daemon
/// forwards a request to a pane host by writing it again. Returns whether it was read.
pub fn request_line(data: &[u8]) -> bool {
    let Ok(request) = Request::parse(data) else {
        return false;
    };
    assert_reads_back(&request, "");
    true
}

/// Panics unless `request`, written as a line, reads back as itself (`context` starts the
/// message). Shared with the property test of every request.
pub(crate) fn assert_reads_back(request: &Request, context: &str) {
    let line = request.to_line();
    let shown = String::from_utf8_lossy(&line);
    let again = Request::parse(&line[..line.len() - 1]).unwrap_or_else(|err| {
        panic!(
            "{context}written back as {shown} it is refused: {}",
            err.message
        )
    });
    assert_eq!(&again, request, "{context}written back as {shown}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_is_read_and_written_back_or_refused() {
        assert!(request_line(
            br#"{"id": 1, "op": "snapshot", "session": "w"}"#
        ));
        assert!(request_line(
            br#"{"id": "x", "op": "send", "session": "w", "expect": {"revision": 3}, "input": [{"text": "hi"}, {"key": "Enter"}, {"delay_ms": 5}]}"#
        ));
        assert!(!request_line(br#"{"id": 1, "op": "no-such-op"}"#));
    }

    /// Found by the fuzzer: a number read without correct rounding (`3.6666e64` as
    /// `3.6665999999999997e64`) came back as another number, so the id a reply echoes was
    /// not the id the client sent.
    #[test]
    fn a_numeric_id_is_echoed_as_sent() {
        assert!(request_line(br#"{"id":3.6666e64,"op":"hello"}"#));
        let request = Request::parse(br#"{"id":3.6666e64,"op":"hello"}"#).map(|r| r.id);
        assert_eq!(request.ok(), Some(serde_json::json!(3.6666e64)));
        assert!(!request_line(b"\xff"));
    }
}
