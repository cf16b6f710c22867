//! Entry points for the coverage-guided fuzz targets in `fuzz/` (feature `fuzzing`; never in a
//! release build): what another tool or a person wrote into an inbox, and what an adapter
//! wrote on its event stream.

use crate::message;
use crate::protocol;

/// A message file's text, as any writer may have left it. What it reads as (front matter and
/// body), written back by belfry and read again, is the same message: an inbox that rewrites
/// a message (a reply's quote, an archive's copy) loses or changes no field.
///
/// Returns whether the text had front matter.
pub fn message_text(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let (front_matter, body) = message::parse(text);
    let rendered = message::render(&front_matter, body);
    let (again, again_body) = message::parse(&rendered);
    assert_eq!(again, front_matter, "front matter, rendered as\n{rendered}");
    assert_eq!(again_body, body, "body, rendered as\n{rendered}");
    !front_matter.is_empty()
}

/// One line of an adapter's event stream: read as one valid event or refused with a reason,
/// never a panic. Returns whether it was read as an event.
pub fn adapter_event(data: &[u8]) -> bool {
    let Ok(line) = std::str::from_utf8(data) else {
        return false;
    };
    protocol::parse_event(line).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_with_every_field_reads_the_same_written_back() {
        let text = "---\nfrom: a\nsubject: \"quoted: yes\"\nin-reply-to: m1\ntags: [x, y]\n\
                    priority: high\nmood: calm\n---\nbody line\n---\nnot front matter\n";
        assert!(message_text(text.as_bytes()));
        assert!(!message_text(b"no front matter\n---\n"));
        assert!(!message_text(b"\xff"));
    }

    /// Found by the fuzzer: an unknown key whose value held control characters was written
    /// back quoted, and read back as the quoted text, a different value.
    #[test]
    fn an_unknown_keys_value_with_control_characters_reads_the_same_written_back() {
        assert!(message_text(
            b"---\nfrom: a\nbrom: b\r\x10-\x00?-\x00\x00m\n---\nbody\n"
        ));
        assert!(message_text(b"---\nx-tab: a\tb\x1b[31m\n---\n"));
    }

    #[test]
    fn an_adapter_line_is_an_event_or_refused() {
        let event =
            "{\"v\": 1, \"kind\": \"activity\", \"session\": \"w\", \"incarnation\": \"i\", \
                     \"generation\": \"sha256:0\", \"sequence\": 1, \"state\": \"idle\", \
                     \"composer\": \"empty\", \"validForMs\": 5000, \"revision\": 7}";
        assert!(adapter_event(event.as_bytes()));
        assert!(!adapter_event(b"{\"v\":1}"));
        assert!(!adapter_event(b"not json"));
        assert!(!adapter_event(b"\xff"));
    }
}
