//! Validated names: sessions and message files.
//!
//! Both are newtypes whose only constructors validate, so a path built from one can never climb
//! out of its directory (spec §7.1: nothing with `/`, `..`, or outside the grammar is ever opened).
//! The session name is the protocol's own ([`belfry_proto::SessionName`], re-exported here): one
//! grammar for the socket, the runtime directory and the inbox. The message name is DING's.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use belfry_proto::name::{SessionName, MAX_SESSION_NAME_LEN};

use crate::error::{Error, Result};

/// Length of the random part of a message name.
pub const MESSAGE_ID_LEN: usize = 6;

/// The longest decimal timestamp accepted in a message name: every `u64` fits in 20 digits, and
/// 19 digits reach the year 316 million, so the parse can never overflow.
const MAX_TIMESTAMP_DIGITS: usize = 19;

const MESSAGE_SUFFIX: &str = ".md";

/// A message file name: `<unix-ms>-<rand6>.md` (spec §7.1).
///
/// `<unix-ms>` is a decimal millisecond timestamp without leading zeros, `<rand6>` is six
/// characters of `[0-9a-z]`. Because the timestamp has no leading zeros, the text and the parsed
/// parts determine each other, so ordering by `(unix_ms, id)` is a total order consistent with
/// equality. For timestamps of equal width (every name written between 2001 and 2286) it is
/// exactly filename order, the inbox's FIFO (spec §7.1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MessageName {
    text: String,
    unix_ms: u64,
}

impl MessageName {
    /// Validates `name` against the grammar.
    pub fn parse(name: &str) -> Result<Self> {
        match parse_message_name(name) {
            Some(unix_ms) => Ok(MessageName {
                text: name.to_owned(),
                unix_ms,
            }),
            None => Err(Error::InvalidMessageName {
                name: name.to_owned(),
            }),
        }
    }

    /// A new name for a message posted at `unix_ms`, with a random id from the OS.
    pub fn generate(unix_ms: u64) -> Result<Self> {
        let id = random_id()?;
        Ok(MessageName {
            text: format!("{unix_ms}-{id}{MESSAGE_SUFFIX}"),
            unix_ms,
        })
    }

    /// The file name; safe to use as one path component.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The timestamp part.
    pub fn unix_ms(&self) -> u64 {
        self.unix_ms
    }

    /// The `<rand6>` part, the id a notice shows (`[id:<rand6>]`, spec §7.2).
    pub fn id(&self) -> &str {
        let end = self.text.len() - MESSAGE_SUFFIX.len();
        &self.text[end - MESSAGE_ID_LEN..end]
    }
}

impl Ord for MessageName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.unix_ms
            .cmp(&other.unix_ms)
            .then_with(|| self.id().cmp(other.id()))
    }
}

impl PartialOrd for MessageName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for MessageName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.text)
    }
}

impl TryFrom<String> for MessageName {
    type Error = Error;

    fn try_from(name: String) -> Result<Self> {
        MessageName::parse(&name)
    }
}

impl From<MessageName> for String {
    fn from(name: MessageName) -> String {
        name.text
    }
}

/// Returns the timestamp of a well-formed name, `None` for anything else.
fn parse_message_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(MESSAGE_SUFFIX)?;
    let (timestamp, id) = stem.split_once('-')?;
    let timestamp_ok = !timestamp.is_empty()
        && timestamp.len() <= MAX_TIMESTAMP_DIGITS
        && timestamp.bytes().all(|byte| byte.is_ascii_digit())
        && (timestamp == "0" || !timestamp.starts_with('0'));
    let id_ok = id.len() == MESSAGE_ID_LEN && id.bytes().all(is_id_byte);
    if timestamp_ok && id_ok {
        timestamp.parse().ok()
    } else {
        None
    }
}

fn is_id_byte(byte: u8) -> bool {
    byte.is_ascii_digit() || byte.is_ascii_lowercase()
}

const ID_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// Six uniformly random characters of `[0-9a-z]`.
fn random_id() -> Result<String> {
    // Bytes at or above 252 (= 7 × 36) are rejected so that every character is equally likely.
    const ACCEPT_BELOW: u8 = 252;
    let mut id = String::with_capacity(MESSAGE_ID_LEN);
    let mut pool = [0u8; 16];
    while id.len() < MESSAGE_ID_LEN {
        getrandom::fill(&mut pool).map_err(|err| Error::Random {
            reason: err.to_string(),
        })?;
        for byte in pool.iter().copied().filter(|byte| *byte < ACCEPT_BELOW) {
            if id.len() == MESSAGE_ID_LEN {
                break;
            }
            id.push(char::from(ID_ALPHABET[usize::from(byte % 36)]));
        }
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_follow_the_grammar() {
        for good in ["worker", "a", "A.b_c-9", &"x".repeat(64)] {
            assert_eq!(SessionName::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", ".", "..", "a/b", "a b", "é", &"x".repeat(65), "a\0b"] {
            // DING's API reports the protocol's rejection as its own named error.
            let err = Error::from(SessionName::parse(bad).unwrap_err());
            assert!(
                matches!(err, Error::InvalidSessionName { ref name } if name == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn message_names_follow_the_grammar() {
        let name = MessageName::parse("1785070000000-abc123.md").unwrap();
        assert_eq!(name.unix_ms(), 1_785_070_000_000);
        assert_eq!(name.id(), "abc123");
        assert_eq!(name.as_str(), "1785070000000-abc123.md");
        for bad in [
            "../x",
            "a/b.md",
            "123-ABCDEF.md",
            "x.md",
            "",
            "1785070000000-abc123",
            "1785070000000-abc123.md/",
            "1785070000000-abc12.md",
            "1785070000000-abc1234.md",
            "01785070000000-abc123.md",
            "-abc123.md",
            "1785070000000_abc123.md",
            "99999999999999999999-abc123.md",
            "1785070000000-abc123.md.tmp",
            "..1785070000000-abc123.md",
        ] {
            let err = MessageName::parse(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("inbox name {bad:?} is not a message file name (<unix-ms>-<rand6>.md)")
            );
        }
    }

    #[test]
    fn message_names_order_by_time_then_id() {
        let mut names: Vec<MessageName> = [
            "1785070000001-aaaaaa.md",
            "1785070000000-zzzzzz.md",
            "1785070000000-000000.md",
            "9-aaaaaa.md",
        ]
        .iter()
        .map(|text| MessageName::parse(text).unwrap())
        .collect();
        names.sort();
        let texts: Vec<&str> = names.iter().map(MessageName::as_str).collect();
        assert_eq!(
            texts,
            [
                "9-aaaaaa.md",
                "1785070000000-000000.md",
                "1785070000000-zzzzzz.md",
                "1785070000001-aaaaaa.md",
            ]
        );
    }

    #[test]
    fn generated_names_parse_back() {
        for _ in 0..100 {
            let name = MessageName::generate(1_785_070_000_000).unwrap();
            let parsed = MessageName::parse(name.as_str()).unwrap();
            assert_eq!(parsed, name);
            assert_eq!(parsed.unix_ms(), 1_785_070_000_000);
        }
    }

    #[test]
    fn names_deserialize_only_when_valid() {
        let good: MessageName = serde_json::from_str("\"1785070000000-abc123.md\"").unwrap();
        assert_eq!(good.id(), "abc123");
        assert!(serde_json::from_str::<MessageName>("\"../x\"").is_err());
        assert!(serde_json::from_str::<SessionName>("\"..\"").is_err());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn parse_accepts_exactly_the_grammar(text in "\\PC{0,40}") {
                let expected = parse_message_name(&text).is_some();
                prop_assert_eq!(MessageName::parse(&text).is_ok(), expected);
                if let Ok(name) = MessageName::parse(&text) {
                    prop_assert_eq!(name.as_str(), text.as_str());
                    prop_assert!(!text.contains('/'));
                    prop_assert!(!text.contains(".."));
                }
            }

            #[test]
            fn grammar_names_round_trip(unix_ms in 0u64..10_000_000_000_000, id in "[0-9a-z]{6}") {
                let text = format!("{unix_ms}-{id}.md");
                let name = MessageName::parse(&text).unwrap();
                prop_assert_eq!(name.unix_ms(), unix_ms);
                prop_assert_eq!(name.id(), id.as_str());
            }

            #[test]
            fn names_with_separators_are_rejected(prefix in "[0-9a-z.-]{0,10}", suffix in "[0-9a-z.-]{0,10}") {
                for separator in ["/", "\\", "\0", ".."] {
                    let text = format!("{prefix}{separator}{suffix}");
                    prop_assert!(MessageName::parse(&text).is_err());
                }
            }
        }
    }
}
