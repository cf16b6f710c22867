//! The group matcher (`hooks/src/matcher.rs`): a table of cases and properties over generated
//! tool names.

use belfry_hooks::matcher::Matcher;
use proptest::prelude::*;

#[test]
fn matcher_table() {
    // (matcher, tool_name, selected)
    let table: &[(&str, Option<&str>, bool)] = &[
        ("", Some("shell"), true),
        ("", None, true),
        ("*", Some("anything"), true),
        ("*", None, true),
        ("shell", Some("shell"), true),
        ("shell", Some("Shell"), false),
        ("shell", Some("shell2"), false),
        ("shell", Some("she"), false),
        ("shell", None, false),
        ("shell|edit", Some("edit"), true),
        ("shell|edit", Some("shell|edit"), false),
        (" shell | edit ", Some("edit"), true),
        ("web.fetch|read", Some("webxfetch"), false),
        ("web.fetch|read", Some("web.fetch"), true),
        ("a*", Some("abc"), false),
        ("a*", Some("a*"), true),
        ("shell|*", Some("edit"), true),
    ];
    for &(text, tool, selected) in table {
        let matcher = Matcher::parse(text).unwrap_or_else(|err| panic!("{text:?}: {err}"));
        assert_eq!(
            matcher.matches(tool),
            selected,
            "matcher {text:?} on {tool:?}"
        );
    }
}

fn tool_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_.-]{0,11}"
}

proptest! {
    #[test]
    fn alternation_selects_exactly_its_names(
        names in proptest::collection::vec(tool_name(), 1..6),
        other in tool_name(),
    ) {
        let matcher = Matcher::parse(&names.join("|")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for name in &names {
            prop_assert!(matcher.matches(Some(name)));
        }
        prop_assert_eq!(matcher.matches(Some(&other)), names.contains(&other));
        prop_assert!(!matcher.matches(None));
    }

    #[test]
    fn star_anywhere_selects_everything(
        names in proptest::collection::vec(tool_name(), 0..4),
        star_at in 0usize..4,
        tool in proptest::option::of(tool_name()),
    ) {
        let mut alternatives = names.clone();
        alternatives.insert(star_at.min(names.len()), "*".to_string());
        let matcher = Matcher::parse(&alternatives.join("|")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&matcher, &Matcher::All);
        prop_assert!(matcher.matches(tool.as_deref()));
    }

    #[test]
    fn parse_never_panics_and_empty_alternatives_are_errors(text in ".{0,40}") {
        let parsed = Matcher::parse(&text);
        let has_empty_alternative = !text.trim().is_empty()
            && text.split('|').any(|alternative| alternative.trim().is_empty());
        let has_star = text.split('|').any(|alternative| alternative.trim() == "*");
        if has_empty_alternative && !has_star {
            prop_assert!(parsed.is_err());
        }
        if !has_empty_alternative {
            prop_assert!(parsed.is_ok());
        }
    }
}
