//! The opaque `--expect` token: one string carrying everything a guarded send compares.
//!
//! Issue #7 item 5 (revision ABA): a pane killed and created again under the same name and
//! declaration has the same generation, so an expectation of revision alone could match a
//! different pane host. The token names the incarnation too, which is random per pane-host
//! start, so a token read from one pane host can never be satisfied by another. `belfry peek
//! --json` prints it as `expect`; `belfry send --expect TOKEN` passes it back. Its spelling,
//! `<revision>.<incarnation>.<generation digest>`, is not a contract: only this module reads it.

use crate::identity::{Expect, Identity};

/// Renders the token for the identity a snapshot showed.
pub fn encode(identity: &Identity) -> String {
    let digest = identity
        .generation
        .strip_prefix("sha256:")
        .unwrap_or(&identity.generation);
    format!("{}.{}.{}", identity.revision, identity.incarnation, digest)
}

/// Reads a token back into the full expectation (every field present).
pub fn decode(token: &str) -> Result<Expect, String> {
    let bad = |why: &str| {
        format!("--expect token {token:?} is not one `belfry peek --json` printed: {why}")
    };
    let mut parts = token.split('.');
    let (Some(revision), Some(incarnation), Some(digest), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("it must have three parts separated by '.'"));
    };
    let revision: u64 = revision
        .parse()
        .map_err(|_| bad("the revision is not a number"))?;
    let is_hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_hex(incarnation, 32) {
        return Err(bad("the incarnation is not 32 hex digits"));
    }
    if !is_hex(digest, 64) {
        return Err(bad("the generation is not 64 hex digits"));
    }
    Ok(Expect {
        incarnation: Some(incarnation.to_string()),
        generation: Some(format!("sha256:{digest}")),
        revision: Some(revision),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            incarnation: "0123456789abcdef0123456789abcdef".into(),
            generation: format!("sha256:{}", "ab".repeat(32)),
            revision: 1_796_000_000_000_042,
        }
    }

    #[test]
    fn token_round_trips_every_field() {
        let id = identity();
        let expect = decode(&encode(&id)).unwrap();
        assert_eq!(expect.incarnation.as_deref(), Some(id.incarnation.as_str()));
        assert_eq!(expect.generation.as_deref(), Some(id.generation.as_str()));
        assert_eq!(expect.revision, Some(id.revision));
    }

    #[test]
    fn malformed_tokens_are_refused_with_the_reason() {
        let good = encode(&identity());
        for (token, why) in [
            ("", "three parts"),
            ("42", "three parts"),
            (&good.replacen('.', ".x.", 1) as &str, "three parts"),
            (&good.replacen("1796", "x796", 1), "revision"),
            (&good.replacen("0123", "zz23", 1), "incarnation"),
            (&good[..good.len() - 1], "generation"),
        ] {
            let err = decode(token).unwrap_err();
            assert!(err.contains(why), "{token:?}: {err}");
        }
    }
}
