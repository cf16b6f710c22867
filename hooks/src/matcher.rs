//! Which handler groups apply to a hook: the group `matcher` against the hook's tool.
//!
//! The syntax is deliberately not a regular expression. A matcher is a `|`-separated list of
//! alternatives, each one of:
//! - a canonical tool class (`shell`, `edit`, `read`, `web`, `mcp`, …), compared exactly and
//!   case-sensitively with the hook's tool class;
//! - `any`, the class of every tool: it selects every hook that names a tool;
//! - `native:<ExactName>`, the escape hatch of spec §9, compared exactly with the harness's own
//!   `tool_name`;
//! - `*` (alone or as one alternative): everything, with or without a tool.
//!
//! An empty string or an absent matcher match everything too. Matchers are written by
//! `belfry hooks` from canonical selectors (spec §9), so exact names are all they need, and a
//! file read on every tool call is not the place to compile regexes. Where the class comes from
//! (a dialect's tool map, or the `tool_name` itself without `--native`) is the caller's
//! business: see [`ToolRef`].

use crate::error::Error;

/// The prefix of a native-name alternative.
pub const NATIVE_PREFIX: &str = "native:";

/// The class alternative that selects every hook naming a tool.
pub const ANY_TOOL_CLASS: &str = "any";

/// A parsed group matcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matcher {
    /// Matches every hook, with or without a tool.
    All,
    /// Matches a hook whose tool equals one of these alternatives.
    Alternatives(Vec<Alternative>),
}

/// One alternative of a matcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alternative {
    /// A canonical tool class (`any` included).
    Class(String),
    /// `native:<name>`: the harness's own tool name, exactly.
    Native(String),
}

/// The tool a hook is about, as the matcher sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolRef<'a> {
    /// The stdin's `tool_name`, as the harness wrote it.
    pub native_name: Option<&'a str>,
    /// The canonical class of that tool; `None` when the hook names no tool or the dialect's
    /// tool map does not know it (then only `*`, `any` and `native:` alternatives can match).
    pub class: Option<&'a str>,
}

impl Matcher {
    /// Parses `a|b|c`. Whitespace around an alternative is ignored; an empty alternative
    /// (`a||b`, a trailing `|`) or an empty `native:` name is an error because it usually
    /// means a name was lost.
    pub fn parse(text: &str) -> Result<Matcher, Error> {
        if text.trim().is_empty() {
            return Ok(Matcher::All);
        }
        let invalid = |reason: &str| Error::InvalidMatcher {
            matcher: text.to_string(),
            reason: reason.to_string(),
        };
        let mut alternatives = Vec::new();
        for alternative in text.split('|') {
            let name = alternative.trim();
            if name.is_empty() {
                return Err(invalid(
                    "it has an empty alternative; write names separated by '|', or '*' for \
                     every tool",
                ));
            }
            if name == "*" {
                return Ok(Matcher::All);
            }
            match name.strip_prefix(NATIVE_PREFIX) {
                Some("") => {
                    return Err(invalid(
                        "`native:` is not followed by a tool name; write native:<ExactName>",
                    ))
                }
                Some(native) => alternatives.push(Alternative::Native(native.to_string())),
                None => alternatives.push(Alternative::Class(name.to_string())),
            }
        }
        Ok(Matcher::Alternatives(alternatives))
    }

    /// Whether a hook about `tool` is selected. A hook without a tool (a lifecycle event such
    /// as session-start) is selected only by a match-all matcher.
    pub fn matches(&self, tool: ToolRef<'_>) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Alternatives(alternatives) => {
                alternatives.iter().any(|alternative| match alternative {
                    Alternative::Native(name) => tool.native_name == Some(name.as_str()),
                    Alternative::Class(class) if class == ANY_TOOL_CLASS => {
                        tool.native_name.is_some()
                    }
                    Alternative::Class(class) => tool.class == Some(class.as_str()),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_star_match_everything() {
        for text in ["", "  ", "*", "shell|*"] {
            let matcher = Matcher::parse(text).unwrap_or_else(|err| panic!("{text:?}: {err}"));
            assert_eq!(matcher, Matcher::All, "{text:?}");
            assert!(matcher.matches(ToolRef::default()));
            assert!(matcher.matches(ToolRef {
                native_name: Some("anything"),
                class: None,
            }));
        }
    }

    #[test]
    fn empty_alternative_is_refused_with_the_matcher_named() {
        for text in ["shell||edit", "shell|", "|shell", " | "] {
            let err = Matcher::parse(text).err();
            let message = err.map(|err| err.to_string()).unwrap_or_default();
            assert!(message.contains("empty alternative"), "{text:?}: {message}");
        }
    }

    #[test]
    fn empty_native_name_is_refused() {
        let message = Matcher::parse("shell|native:")
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(message.contains("native:<ExactName>"), "{message}");
    }
}
