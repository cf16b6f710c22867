//! [`SessionName`], the one validator of the names that become path components: session names
//! and adapter names (spec §2, §7.1).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest session name (spec §2).
pub const MAX_SESSION_NAME_LEN: usize = 64;

/// A pane's session name: `[A-Za-z0-9._-]{1,64}`, and not `.` or `..` (spec §2). The only
/// constructors validate, so a path built from one can never climb out of its directory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionName(String);

/// A name outside the session-name grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidName {
    /// The rejected name, as given.
    pub name: String,
}

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid session name {:?}: must match [A-Za-z0-9._-]{{1,{MAX_SESSION_NAME_LEN}}} and \
             not be \".\" or \"..\"",
            self.name
        )
    }
}

impl std::error::Error for InvalidName {}

impl SessionName {
    /// Validates `name`.
    pub fn parse(name: &str) -> Result<SessionName, InvalidName> {
        if Self::is_valid(name) {
            Ok(SessionName(name.to_owned()))
        } else {
            Err(InvalidName {
                name: name.to_owned(),
            })
        }
    }

    /// True if `name` is in the grammar.
    pub fn is_valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_SESSION_NAME_LEN
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
            && name != "."
            && name != ".."
    }

    /// The name as text; safe to use as one path component.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SessionName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SessionName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for SessionName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SessionName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl TryFrom<String> for SessionName {
    type Error = InvalidName;

    fn try_from(name: String) -> Result<Self, InvalidName> {
        if Self::is_valid(&name) {
            Ok(SessionName(name))
        } else {
            Err(InvalidName { name })
        }
    }
}

impl std::str::FromStr for SessionName {
    type Err = InvalidName;

    fn from_str(name: &str) -> Result<Self, InvalidName> {
        SessionName::parse(name)
    }
}

impl From<SessionName> for String {
    fn from(name: SessionName) -> String {
        name.0
    }
}

#[cfg(test)]
impl<'a> arbitrary::Arbitrary<'a> for SessionName {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        const CHARS: &[u8] = b"abcXYZ019._-";
        let len = u.int_in_range(1..=12)?;
        let mut name = String::with_capacity(len);
        for _ in 0..len {
            name.push(char::from(*u.choose(CHARS)?));
        }
        Ok(SessionName::parse(&name).unwrap_or_else(|_| SessionName("a".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_outside_the_grammar_are_refused_and_named() {
        for good in ["a", "agent-1", "A.b_c", &"x".repeat(64)] {
            assert_eq!(
                SessionName::parse(good).map(String::from),
                Ok(good.to_string())
            );
        }
        for bad in ["", ".", "..", "../etc", "a/b", "a b", "é", &"x".repeat(65)] {
            let err = SessionName::parse(bad).unwrap_err().to_string();
            assert!(err.contains("invalid session name"), "{err}");
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let err = serde_json::from_str::<SessionName>("\"a/b\"").unwrap_err();
        assert!(err.to_string().contains("invalid session name"), "{err}");
    }
}
