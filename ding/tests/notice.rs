//! Notice lines are inert whatever a message's subject and sender hold (spec §7.2).

use belfry_ding::notice::{
    notice_line, recovery_notice, sanitize_field, MAX_FROM_CHARS, MAX_SUBJECT_CHARS,
};
use belfry_ding::{FrontMatter, MessageName};
use proptest::prelude::*;

const PASTE_END: &str = "\x1b[201~";

fn name() -> MessageName {
    MessageName::parse("1785070000000-k3x9q2.md").unwrap()
}

fn notice(subject: &str, from: &str) -> String {
    let front_matter = FrontMatter {
        subject: Some(subject.to_owned()),
        from: Some(from.to_owned()),
        ..FrontMatter::default()
    };
    notice_line(&name(), &front_matter)
}

fn assert_inert(line: &str) {
    assert!(!line.contains(PASTE_END), "{line:?}");
    assert!(!line.chars().any(char::is_control), "{line:?}");
    assert!(
        !line.contains('\x1b') && !line.contains('\u{9b}'),
        "{line:?}"
    );
}

#[test]
fn paste_terminator_in_subject_cannot_end_the_frame() {
    let line = notice(&format!("hi{PASTE_END}\rrm -rf ~\r"), "mallory");
    assert_inert(&line);
    assert_eq!(
        line,
        "[DING] new message: [id:k3x9q2] hi [201~ rm -rf ~ (from mallory); check your inbox"
    );
}

#[test]
fn one_byte_csi_and_other_c1_controls_are_removed() {
    let line = notice("a\u{9b}201~b\u{85}c\u{90}d", "x\u{9d}y");
    assert_inert(&line);
    assert_eq!(
        line,
        "[DING] new message: [id:k3x9q2] a 201~b c d (from x y); check your inbox"
    );
}

#[test]
fn newlines_and_whitespace_runs_collapse_to_one_space() {
    let line = notice(
        "\n\n  first\r\n\tsecond \u{2028} third  \n",
        "  team\nlead\r ",
    );
    assert_inert(&line);
    assert_eq!(
        line,
        "[DING] new message: [id:k3x9q2] first second third (from team lead); check your inbox"
    );
}

#[test]
fn delete_and_escape_alone_become_spaces() {
    assert_eq!(sanitize_field("a\x7fb\x1bc\x00d", 64), "a b c d");
}

#[test]
fn fields_are_bounded_with_an_ellipsis() {
    let line = notice(&"s".repeat(1000), &"f".repeat(1000));
    let expected_subject = format!("{}\u{2026}", "s".repeat(MAX_SUBJECT_CHARS - 1));
    let expected_from = format!("{}\u{2026}", "f".repeat(MAX_FROM_CHARS - 1));
    assert_eq!(
        line,
        format!(
            "[DING] new message: [id:k3x9q2] {expected_subject} (from {expected_from}); \
             check your inbox"
        )
    );
}

#[test]
fn recovery_notice_lists_ids_on_one_line() {
    let names = [
        MessageName::parse("1785070000000-aaaaaa.md").unwrap(),
        MessageName::parse("1785070000001-bbbbbb.md").unwrap(),
    ];
    let line = recovery_notice(2, &names);
    assert_eq!(
        line,
        "[DING] 2 unread messages waiting: [id:aaaaaa] [id:bbbbbb]; check your inbox"
    );
    assert_inert(&line);
}

proptest! {
    #[test]
    fn notices_are_inert_for_any_subject_and_sender(
        subject in any::<String>(),
        from in any::<String>(),
        // Bias some inputs towards the characters that matter.
        spliced in proptest::sample::select(vec![PASTE_END, "\u{9b}201~", "\r", "\n", "\x1b", "\u{85}"]),
    ) {
        let subject = format!("{subject}{spliced}{subject}");
        let line = notice(&subject, &format!("{spliced}{from}"));
        prop_assert!(!line.contains(PASTE_END));
        prop_assert!(!line.contains('\x1b'));
        prop_assert!(!line.chars().any(char::is_control));
        prop_assert!(!line.contains("  "), "no whitespace runs: {:?}", line);
        prop_assert!(line.starts_with("[DING] new message: [id:k3x9q2] "));
        prop_assert!(line.ends_with("; check your inbox"));
    }

    #[test]
    fn sanitized_fields_respect_the_bound(text in any::<String>(), max_chars in 0usize..200) {
        let clean = sanitize_field(&text, max_chars);
        prop_assert!(clean.chars().count() <= max_chars);
        prop_assert!(!clean.starts_with(' ') && !clean.ends_with(' '));
        prop_assert!(!clean.chars().any(|c| c.is_control() || (c.is_whitespace() && c != ' ')));
    }
}
