//! The group matcher (`hooks/src/matcher.rs`): a table of cases and properties over generated
//! tool names and classes.

use belfry_hooks::matcher::{Matcher, ToolRef};
use proptest::prelude::*;

/// A hook about a tool whose class is `class` and whose native name is `native`.
fn tool<'a>(native: &'a str, class: Option<&'a str>) -> ToolRef<'a> {
    ToolRef {
        native_name: Some(native),
        class,
    }
}

/// A hook in the common shape (no `--native`): the name is the class.
fn common(name: &str) -> ToolRef<'_> {
    tool(name, Some(name))
}

#[test]
fn matcher_table() {
    let none = ToolRef::default();
    // (matcher, tool, selected)
    let table: &[(&str, ToolRef, bool)] = &[
        ("", common("shell"), true),
        ("", none, true),
        ("*", common("anything"), true),
        ("*", none, true),
        ("shell", common("shell"), true),
        ("shell", common("Shell"), false),
        ("shell", common("shell2"), false),
        ("shell", common("she"), false),
        ("shell", none, false),
        ("shell|edit", common("edit"), true),
        ("shell|edit", common("shell|edit"), false),
        (" shell | edit ", common("edit"), true),
        ("web.fetch|read", common("webxfetch"), false),
        ("web.fetch|read", common("web.fetch"), true),
        ("a*", common("abc"), false),
        ("a*", common("a*"), true),
        ("shell|*", common("edit"), true),
        // A dialect's tool map gave the class: the native name itself is not a class.
        ("shell", tool("Bash", Some("shell")), true),
        ("Bash", tool("Bash", Some("shell")), false),
        ("edit|shell", tool("run_shell_command", Some("shell")), true),
        // The escape hatch names the native tool exactly, whatever its class.
        ("native:Bash", tool("Bash", Some("shell")), true),
        ("native:Bash", tool("bash", Some("shell")), false),
        ("native:Bash", common("Bash"), true),
        ("native:shell", common("shell"), true),
        ("edit|native:Bash", tool("Bash", Some("shell")), true),
        ("native:Bash", none, false),
        // A tool the map does not know has no class: only `*`, `any` and `native:` select it.
        ("shell", tool("mystery", None), false),
        ("native:mystery", tool("mystery", None), true),
        // `any` is the class of every tool, and of no lifecycle hook.
        ("any", tool("mystery", None), true),
        ("any", common("shell"), true),
        ("any", none, false),
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
    "[a-z][a-z0-9_.-]{0,11}".prop_filter("`any` matches every tool", |name| name != "any")
}

proptest! {
    #[test]
    fn alternation_selects_exactly_its_classes(
        names in proptest::collection::vec(tool_name(), 1..6),
        other in tool_name(),
    ) {
        let matcher = Matcher::parse(&names.join("|")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for name in &names {
            prop_assert!(matcher.matches(common(name)));
        }
        prop_assert_eq!(matcher.matches(common(&other)), names.contains(&other));
        prop_assert!(!matcher.matches(ToolRef::default()));
    }

    #[test]
    fn native_alternatives_select_exactly_their_names_whatever_the_class(
        names in proptest::collection::vec(tool_name(), 1..6),
        other in tool_name(),
        class in tool_name(),
    ) {
        let text = names.iter().map(|n| format!("native:{n}")).collect::<Vec<_>>().join("|");
        let matcher = Matcher::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for name in &names {
            prop_assert!(matcher.matches(tool(name, Some(&class))));
        }
        prop_assert_eq!(matcher.matches(tool(&other, Some(&class))), names.contains(&other));
    }

    #[test]
    fn star_anywhere_selects_everything(
        names in proptest::collection::vec(tool_name(), 0..4),
        star_at in 0usize..4,
        name in proptest::option::of(tool_name()),
    ) {
        let mut alternatives = names.clone();
        alternatives.insert(star_at.min(names.len()), "*".to_string());
        let matcher = Matcher::parse(&alternatives.join("|")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&matcher, &Matcher::All);
        let hook = name.as_deref().map(common).unwrap_or_default();
        prop_assert!(matcher.matches(hook));
    }

    #[test]
    fn parse_never_panics_and_empty_alternatives_are_errors(text in ".{0,40}") {
        let parsed = Matcher::parse(&text);
        let has_empty_alternative = !text.trim().is_empty()
            && text.split('|').any(|alternative| {
                let alternative = alternative.trim();
                alternative.is_empty() || alternative == "native:"
            });
        let has_star = text.split('|').any(|alternative| alternative.trim() == "*");
        if has_empty_alternative && !has_star {
            prop_assert!(parsed.is_err());
        }
        if !has_empty_alternative {
            prop_assert!(parsed.is_ok());
        }
    }
}
