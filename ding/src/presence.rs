//! Presence: what an agent says about its own availability (spec §7.3).
//!
//! An agent declares `busy`, `available` or `dnd` (`belfry presence`). The declaration is stored
//! with its time as `presence.json` in the session's inbox directory, beside `tmp/`, `new/` and
//! `archive/`, and replaced atomically. Only a *fresh* `dnd` defers delivery: a `dnd` that is
//! older than the allowed age has expired, so an agent that crashed while in `dnd` does not stop
//! its mail forever. `busy` and `available` are informational and never defer anything.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::durable::BoundedRead;
use crate::error::{Error, Result};
use crate::inbox::Inbox;

/// File name of the presence record inside the inbox directory.
pub const PRESENCE_FILE: &str = "presence.json";

/// How long a `dnd` defers delivery unless the engine is configured otherwise. An agent that
/// needs longer declares `dnd` again.
pub const DEFAULT_DND_MAX_AGE: Duration = Duration::from_secs(30 * 60);

/// The presence record is a few dozen bytes; anything past this is not ours.
const MAX_PRESENCE_BYTES: u64 = 4096;

/// The declared state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PresenceState {
    /// Working; delivery continues.
    Busy,
    /// Waiting for work; delivery continues.
    Available,
    /// Do not disturb; delivery is deferred while the declaration is fresh.
    Dnd,
}

impl PresenceState {
    /// `"busy"`, `"available"` or `"dnd"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PresenceState::Busy => "busy",
            PresenceState::Available => "available",
            PresenceState::Dnd => "dnd",
        }
    }
}

impl fmt::Display for PresenceState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl FromStr for PresenceState {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        match value {
            "busy" => Ok(PresenceState::Busy),
            "available" => Ok(PresenceState::Available),
            "dnd" => Ok(PresenceState::Dnd),
            _ => Err(Error::InvalidPresence {
                value: value.to_owned(),
            }),
        }
    }
}

/// A presence declaration and when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// What was declared.
    pub state: PresenceState,
    /// When, in milliseconds since the Unix epoch.
    pub since_unix_ms: u64,
}

impl Presence {
    /// Whether this is a `dnd` declared at most `max_age` before `now_unix_ms`.
    ///
    /// A declaration stamped in the future (the clock was set back) counts as age zero: it was
    /// made, and the agent meant it.
    pub fn is_fresh_dnd(&self, now_unix_ms: u64, max_age: Duration) -> bool {
        let age_ms = now_unix_ms.saturating_sub(self.since_unix_ms);
        let max_age_ms = u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX);
        self.state == PresenceState::Dnd && age_ms <= max_age_ms
    }

    /// Reads the session's presence; `None` if none was ever declared.
    pub fn load(inbox: &Inbox) -> Result<Option<Presence>> {
        let path = inbox.dir().join(PRESENCE_FILE);
        let bytes = match inbox
            .session_dir()
            .read_file(PRESENCE_FILE, MAX_PRESENCE_BYTES)
        {
            Ok(BoundedRead::Bytes(bytes)) => bytes,
            Ok(BoundedRead::TooLarge) => {
                return Err(Error::CorruptPresence {
                    path,
                    reason: format!("larger than {MAX_PRESENCE_BYTES} bytes"),
                })
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(Error::io("read presence", path, err)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| Error::CorruptPresence {
                path,
                reason: err.to_string(),
            })
    }

    /// Replaces the session's presence atomically and durably.
    pub fn store(&self, inbox: &Inbox) -> Result<()> {
        let mut bytes = serde_json::to_vec(self).map_err(|err| Error::CorruptPresence {
            path: inbox.dir().join(PRESENCE_FILE),
            reason: err.to_string(),
        })?;
        bytes.push(b'\n');
        inbox.session_dir().atomic_replace(PRESENCE_FILE, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE_MS: u64 = 60_000;

    #[test]
    fn only_a_fresh_dnd_defers() {
        let max_age = Duration::from_secs(60);
        let dnd = Presence {
            state: PresenceState::Dnd,
            since_unix_ms: 10 * MINUTE_MS,
        };
        assert!(dnd.is_fresh_dnd(10 * MINUTE_MS, max_age));
        assert!(dnd.is_fresh_dnd(11 * MINUTE_MS, max_age));
        assert!(!dnd.is_fresh_dnd(11 * MINUTE_MS + 1, max_age));
        assert!(
            dnd.is_fresh_dnd(MINUTE_MS, max_age),
            "future stamp is fresh"
        );
        for state in [PresenceState::Busy, PresenceState::Available] {
            let presence = Presence {
                state,
                since_unix_ms: 10 * MINUTE_MS,
            };
            assert!(!presence.is_fresh_dnd(10 * MINUTE_MS, max_age));
        }
    }

    #[test]
    fn store_then_load_round_trips() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        assert_eq!(Presence::load(&inbox).unwrap(), None);
        let presence = Presence {
            state: PresenceState::Dnd,
            since_unix_ms: 1_785_070_000_000,
        };
        presence.store(&inbox).unwrap();
        assert_eq!(Presence::load(&inbox).unwrap(), Some(presence));
        let text = std::fs::read_to_string(inbox.dir().join(PRESENCE_FILE)).unwrap();
        assert_eq!(
            text,
            "{\"state\":\"dnd\",\"since_unix_ms\":1785070000000}\n"
        );
    }

    #[test]
    fn corrupt_presence_is_a_clear_error() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        std::fs::write(inbox.dir().join(PRESENCE_FILE), "{\"state\":\"asleep\"}").unwrap();
        let err = Presence::load(&inbox).unwrap_err();
        assert!(err.to_string().starts_with("presence file "), "{err}");
        assert!(err.to_string().contains("asleep"), "{err}");
    }

    #[test]
    fn presence_words_parse() {
        assert_eq!("dnd".parse::<PresenceState>().unwrap(), PresenceState::Dnd);
        assert_eq!(
            "away".parse::<PresenceState>().unwrap_err().to_string(),
            "presence \"away\" is not busy, available or dnd"
        );
    }
}
