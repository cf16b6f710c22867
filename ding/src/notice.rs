//! Notice lines: the one line DING pastes to tell an agent about mail (spec §7.2).
//!
//! A notice carries text chosen by whoever posted the message (subject and sender), and it is
//! pasted into a terminal. So before anything else it is made inert: every control character
//! (C0, DEL, C1 including the one-byte CSI `\u{9b}`, and ESC) and every run of whitespace becomes
//! one space, invisible format characters that reorder or hide text become a space too, and each
//! field is cut to a bounded number of characters. What is left cannot end a bracketed-paste
//! frame (`ESC[201~`), press Return, or move the cursor; it can only be read.

use crate::message::FrontMatter;
use crate::names::MessageName;

/// The most characters of a subject a notice shows.
pub const MAX_SUBJECT_CHARS: usize = 120;

/// The most characters of a sender a notice shows.
pub const MAX_FROM_CHARS: usize = 64;

/// Shown when a message has no subject (or only whitespace and control characters).
pub const NO_SUBJECT: &str = "(no subject)";

/// Shown when a message names no sender.
pub const UNKNOWN_SENDER: &str = "unknown sender";

/// How many ids a recovery notice lists before it says "and N more".
pub const MAX_RECOVERY_IDS: usize = 10;

const ELLIPSIS: char = '\u{2026}';

/// What every DING notice (one message's, or a backlog's recovery notice) begins with.
pub const NOTICE_PREFIX: &str = "[DING] ";

/// Whether `text` (a submitted prompt, say) carries a DING notice: belfry typed it, or a
/// turn-stop continuation's reason became it (spec §7.5: only a prompt without one is a turn
/// the user started).
pub fn carries_notice(text: &str) -> bool {
    text.contains(NOTICE_PREFIX)
}

/// The notice for one unread message:
/// `[DING] new message: [id:<rand6>] <subject> (from <from>); check your inbox`.
pub fn notice_line(name: &MessageName, front_matter: &FrontMatter) -> String {
    format!(
        "{NOTICE_PREFIX}new message: [id:{}] {} (from {}); check your inbox",
        name.id(),
        display_subject(front_matter),
        display_sender(front_matter)
    )
}

/// The subject as notices and status show it: sanitised, bounded, or [`NO_SUBJECT`].
pub fn display_subject(front_matter: &FrontMatter) -> String {
    field_or(
        front_matter.subject.as_deref(),
        MAX_SUBJECT_CHARS,
        NO_SUBJECT,
    )
}

/// The sender as notices and status show it: sanitised, bounded, or [`UNKNOWN_SENDER`].
pub fn display_sender(front_matter: &FrontMatter) -> String {
    field_or(front_matter.from.as_deref(), MAX_FROM_CHARS, UNKNOWN_SENDER)
}

/// The one notice for a backlog of unread messages found at start-up (spec §7.2).
///
/// `count` is the size of the whole backlog and `names` the messages to list (at most
/// [`MAX_RECOVERY_IDS`] are shown); a `count` smaller than `names.len()` is raised to it.
pub fn recovery_notice(count: usize, names: &[MessageName]) -> String {
    let count = count.max(names.len());
    let noun = if count == 1 { "message" } else { "messages" };
    let mut line = format!("{NOTICE_PREFIX}{count} unread {noun} waiting:");
    for name in names.iter().take(MAX_RECOVERY_IDS) {
        line.push_str(" [id:");
        line.push_str(name.id());
        line.push(']');
    }
    let listed = names.len().min(MAX_RECOVERY_IDS);
    if count > listed {
        let more = count - listed;
        if listed == 0 {
            line.push_str(&format!(" {more} not listed"));
        } else {
            line.push_str(&format!(" and {more} more"));
        }
    }
    line.push_str("; check your inbox");
    line
}

/// Makes untrusted text safe and short for one line: control, format and whitespace characters
/// become single spaces, the ends are trimmed, and text longer than `max_chars` characters is
/// cut (on a character boundary) to `max_chars - 1` characters plus an ellipsis.
pub fn sanitize_field(text: &str, max_chars: usize) -> String {
    let mut clean = String::with_capacity(text.len().min(max_chars * 4));
    let mut pending_space = false;
    for c in text.chars() {
        if is_separator_like(c) {
            pending_space = true;
            continue;
        }
        if pending_space && !clean.is_empty() {
            clean.push(' ');
        }
        pending_space = false;
        clean.push(c);
    }
    truncate_chars(clean, max_chars)
}

fn field_or(value: Option<&str>, max_chars: usize, placeholder: &str) -> String {
    let clean = sanitize_field(value.unwrap_or_default(), max_chars);
    if clean.is_empty() {
        placeholder.to_owned()
    } else {
        clean
    }
}

fn truncate_chars(text: String, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text;
    }
    if max_chars == 0 {
        return String::new();
    }
    let mut cut: String = text.chars().take(max_chars - 1).collect();
    let kept = cut.trim_end().len();
    cut.truncate(kept);
    cut.push(ELLIPSIS);
    cut
}

/// Characters that must not reach a terminal as themselves.
///
/// `char::is_control` covers C0, DEL and C1 (so ESC and the one-byte CSI `\u{9b}`);
/// `char::is_whitespace` covers tabs, line breaks and the Unicode line and paragraph separators.
/// The explicit ranges are invisible format characters (zero-width spaces and joiners,
/// bidirectional embeddings, overrides and isolates, the byte-order mark, interlinear
/// annotations) that can make a subject display as something other than what it says.
fn is_separator_like(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(
            c,
            '\u{ad}'
                | '\u{61c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> MessageName {
        MessageName::parse("1785070000000-abc123.md").unwrap()
    }

    fn front_matter(subject: Option<&str>, from: Option<&str>) -> FrontMatter {
        FrontMatter {
            subject: subject.map(str::to_owned),
            from: from.map(str::to_owned),
            ..FrontMatter::default()
        }
    }

    #[test]
    fn notice_has_the_spec_shape() {
        let line = notice_line(
            &name(),
            &front_matter(Some("review the parser"), Some("planner")),
        );
        assert_eq!(
            line,
            "[DING] new message: [id:abc123] review the parser (from planner); check your inbox"
        );
    }

    #[test]
    fn missing_fields_get_placeholders() {
        let line = notice_line(&name(), &front_matter(None, Some(" \x1b\r\n ")));
        assert_eq!(
            line,
            "[DING] new message: [id:abc123] (no subject) (from unknown sender); check your inbox"
        );
    }

    #[test]
    fn long_fields_are_cut_on_char_boundaries() {
        let subject = "é".repeat(300);
        let clean = sanitize_field(&subject, MAX_SUBJECT_CHARS);
        assert_eq!(clean.chars().count(), MAX_SUBJECT_CHARS);
        assert!(clean.ends_with(ELLIPSIS));
        assert_eq!(sanitize_field("abcdef", 4), "abc\u{2026}");
        assert_eq!(sanitize_field("ab   cdef", 4), "ab\u{2026}");
        assert_eq!(sanitize_field("abcd", 4), "abcd");
        assert_eq!(sanitize_field("abcd", 0), "");
    }

    #[test]
    fn bidi_and_zero_width_characters_become_spaces() {
        assert_eq!(sanitize_field("a\u{202e}b\u{200b}c\u{feff}", 64), "a b c");
    }

    #[test]
    fn recovery_notice_is_one_bounded_line() {
        let names: Vec<MessageName> = (0..12)
            .map(|index| {
                MessageName::parse(&format!("17850700000{index:02}-abc{index:03}.md")).unwrap()
            })
            .collect();
        assert_eq!(
            recovery_notice(1, &names[..1]),
            "[DING] 1 unread message waiting: [id:abc000]; check your inbox"
        );
        let line = recovery_notice(12, &names);
        assert!(line.starts_with("[DING] 12 unread messages waiting: [id:abc000] [id:abc001]"));
        assert!(
            line.ends_with("[id:abc009] and 2 more; check your inbox"),
            "{line}"
        );
        assert_eq!(
            recovery_notice(3, &[]),
            "[DING] 3 unread messages waiting: 3 not listed; check your inbox"
        );
    }
}
