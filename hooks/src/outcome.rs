//! The neutral answer of a dispatch (spec §8): a decision, a reason and a context.

use serde::{Deserialize, Serialize};

/// Whether the action the hook asked about may go ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    /// The wire spelling: `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

/// The result of running a hook's handlers, before any dialect renders it.
///
/// Serialized, this is exactly the neutral stdout object
/// `{"decision":"allow"|"deny","reason":str,"context":str}`, fields in that order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[must_use = "an outcome may carry a deny"]
pub struct Outcome {
    pub decision: Decision,
    /// Why: a refusal's reason, or notes about handlers that failed open. Empty when there is
    /// nothing to say.
    pub reason: String,
    /// Text for the model: the contexts of the handlers that ran, joined in order with `\n`.
    pub context: String,
}

impl Outcome {
    /// `allow` with nothing to say: no handler ran or none had anything to add.
    pub fn allow_silently() -> Outcome {
        Outcome {
            decision: Decision::Allow,
            reason: String::new(),
            context: String::new(),
        }
    }

    /// spec §8 fail-open: an internal error becomes `allow` with empty context and the error in
    /// the reason.
    pub fn fail_open(error: &dyn std::fmt::Display) -> Outcome {
        Outcome {
            decision: Decision::Allow,
            reason: format!("belfry dispatch: {error}"),
            context: String::new(),
        }
    }

    /// The neutral stdout: one JSON object and a newline.
    pub fn to_neutral_json_line(&self) -> Vec<u8> {
        // Serializing three strings and a unit enum cannot fail; the fallback keeps the
        // one-object contract even if it somehow did.
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| {
            br#"{"decision":"allow","reason":"belfry dispatch: cannot serialize outcome","context":""}"#
                .to_vec()
        });
        line.push(b'\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_json_has_three_fields_in_order() {
        let outcome = Outcome {
            decision: Decision::Deny,
            reason: "no \"force\"".to_string(),
            context: "a\nb".to_string(),
        };
        assert_eq!(
            outcome.to_neutral_json_line(),
            b"{\"decision\":\"deny\",\"reason\":\"no \\\"force\\\"\",\"context\":\"a\\nb\"}\n"
        );
    }
}
