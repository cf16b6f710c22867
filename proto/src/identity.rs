//! What a pane is at one instant ([`Identity`]) and what a guarded send expects of it
//! ([`Expect`], spec §3).

use serde::{Deserialize, Serialize};

/// The identity fields a guarded send may expect (spec §3). Absent fields are not compared.
///
/// Every field is strict: `"revision": null` is a bad request naming `expect.revision`, never
/// read as "absent", which would turn a guarded send into an unguarded one; and a field this
/// build does not know (`"revison"`) is refused for the same reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The process incarnation the sender saw.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::de::present"
    )]
    pub incarnation: Option<String>,
    /// The launch generation the sender saw.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::de::present"
    )]
    pub generation: Option<String>,
    /// The I/O revision the sender saw.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::de::present"
    )]
    pub revision: Option<u64>,
}

impl Expect {
    /// True if nothing is expected (an unguarded send).
    pub fn is_empty(&self) -> bool {
        self.incarnation.is_none() && self.generation.is_none() && self.revision.is_none()
    }

    /// Expects exactly `identity`.
    pub fn exactly(identity: &Identity) -> Expect {
        Expect {
            incarnation: Some(identity.incarnation.clone()),
            generation: Some(identity.generation.clone()),
            revision: Some(identity.revision),
        }
    }

    /// True if `identity` meets every expected field.
    pub fn is_met_by(&self, identity: &Identity) -> bool {
        self.incarnation
            .as_ref()
            .is_none_or(|i| *i == identity.incarnation)
            && self
                .generation
                .as_ref()
                .is_none_or(|g| *g == identity.generation)
            && self.revision.is_none_or(|r| r == identity.revision)
    }
}

/// The pane's identity at one instant: which process (incarnation), which launch spec
/// (generation) and how far its I/O has gone (revision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct Identity {
    /// The current process incarnation.
    pub incarnation: String,
    /// The current launch generation.
    pub generation: String,
    /// The current I/O revision.
    pub revision: u64,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub struct ExitStatus {
    /// The exit code, if it exited.
    pub code: Option<i32>,
    /// The signal, if a signal ended it.
    pub signal: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expect_is_met_only_by_the_fields_it_names() {
        let identity = Identity {
            incarnation: "i".into(),
            generation: "g".into(),
            revision: 7,
        };
        assert!(Expect::default().is_met_by(&identity));
        assert!(Expect::exactly(&identity).is_met_by(&identity));
        let stale = Expect {
            revision: Some(6),
            ..Expect::default()
        };
        assert!(!stale.is_met_by(&identity));
    }
}
