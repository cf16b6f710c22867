//! Which handler groups apply to a hook: the group `matcher` against the hook's `tool_name`.
//!
//! The syntax is deliberately not a regular expression: a matcher is a `|`-separated list of
//! exact, case-sensitive tool names (`shell|edit`), and `*` (alone or as one alternative), an
//! empty string or an absent matcher match everything. Matchers are written by `belfry hooks`
//! from canonical tool classes (SPEC §9), so exact names are all they need, and a file read on
//! every tool call is not the place to compile regexes.

use crate::error::Error;

/// A parsed group matcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matcher {
    /// Matches every hook, with or without a `tool_name`.
    All,
    /// Matches a hook whose `tool_name` equals one of these names exactly.
    ToolNames(Vec<String>),
}

impl Matcher {
    /// Parses `a|b|c`. Whitespace around an alternative is ignored; an empty alternative
    /// (`a||b`, a trailing `|`) is an error because it usually means a name was lost.
    pub fn parse(text: &str) -> Result<Matcher, Error> {
        if text.trim().is_empty() {
            return Ok(Matcher::All);
        }
        let mut names = Vec::new();
        for alternative in text.split('|') {
            let name = alternative.trim();
            if name.is_empty() {
                return Err(Error::InvalidMatcher {
                    matcher: text.to_string(),
                    reason: "it has an empty alternative; write names separated by '|', \
                             or '*' for every tool"
                        .to_string(),
                });
            }
            if name == "*" {
                return Ok(Matcher::All);
            }
            names.push(name.to_string());
        }
        Ok(Matcher::ToolNames(names))
    }

    /// Whether a hook with this `tool_name` is selected. A hook without a tool name (a
    /// lifecycle event such as session-start) is selected only by a match-all matcher.
    pub fn matches(&self, tool_name: Option<&str>) -> bool {
        match self {
            Matcher::All => true,
            Matcher::ToolNames(names) => {
                tool_name.is_some_and(|tool| names.iter().any(|name| name == tool))
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
            assert!(matcher.matches(None));
            assert!(matcher.matches(Some("anything")));
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
}
