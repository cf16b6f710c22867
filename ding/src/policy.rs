//! Delivery policies and the notice transaction (spec §7.3, §7.4).
//!
//! Automatic delivery is only for panes declared as agents (spec §7.3). A pane that was not
//! declared an agent (a plain `belfry new NAME -- CMD`) gets [`DeliveryPolicy::Undeclared`]:
//! nothing is ever typed into it, because a shell would run the notice as a command; its mail
//! stays durable in the inbox. An agent without a `ding {}` block, or a pane started with
//! `--adapter` or `--ding-delivery aggressive`, gets [`DeliveryPolicy::Aggressive`]: each notice
//! is pasted, followed by a 500 ms pause and Enter, as one bounded transaction. The rich policy is
//! selected by the generic token `turn-boundary+fresh-idle` together with an opaque adapter
//! command. No token selects a provider and the command is never inspected: it is run as argv,
//! and the rich policy never falls back to aggressive delivery.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// The rich policy's token.
pub const RICH_POLICY_TOKEN: &str = "turn-boundary+fresh-idle";

/// The aggressive policy's token, the default of an agent declared without a `ding {}` block.
pub const AGGRESSIVE_POLICY_TOKEN: &str = "aggressive";

/// The pause between pasting a notice and pressing Enter (spec §7.3), so that the program reads
/// Enter as a keystroke of its own rather than as the tail of the pasted text.
pub const NOTICE_ENTER_DELAY_MS: u64 = 500;

/// How DING delivers notices to one pane.
///
/// It reads (`Deserialize`) as `belfry ding status --json` writes it, so a status is read through
/// the type it was written with; a policy a person declares is read by [`DeliveryPolicy::from_token`],
/// which checks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "delivery", rename_all = "kebab-case")]
pub enum DeliveryPolicy {
    /// The pane was not declared an agent: no automatic input, ever. Mail stays in the inbox.
    #[serde(rename = "none")]
    Undeclared,
    /// An agent with no `ding {}` block: paste, pause, Enter, as soon as a message is unread.
    Aggressive,
    /// `delivery "turn-boundary+fresh-idle"`: hook-owned turn-boundary delivery, and PTY
    /// delivery only under a fresh idle lease from the adapter.
    #[serde(rename = "turn-boundary+fresh-idle")]
    Rich {
        /// The adapter's argv, run without a shell.
        adapter_command: Vec<String>,
    },
}

impl DeliveryPolicy {
    /// Validates a declared `delivery` token and adapter command: `aggressive` (which runs no
    /// adapter, so a command with it is refused rather than silently ignored) or the rich token
    /// (which needs one).
    pub fn from_token(token: &str, adapter_command: Vec<String>) -> Result<Self> {
        if token == AGGRESSIVE_POLICY_TOKEN {
            if !adapter_command.is_empty() {
                return Err(Error::AdapterWithoutRichPolicy {
                    token: token.to_owned(),
                });
            }
            return Ok(DeliveryPolicy::Aggressive);
        }
        if token != RICH_POLICY_TOKEN {
            return Err(Error::UnknownDeliveryPolicy {
                token: token.to_owned(),
            });
        }
        let program_named = adapter_command
            .first()
            .is_some_and(|program| !program.trim().is_empty());
        if !program_named {
            return Err(Error::MissingAdapterCommand {
                token: token.to_owned(),
            });
        }
        Ok(DeliveryPolicy::Rich { adapter_command })
    }

    /// The policy of a pane from what its launch spec declares (spec §7.3): a policy token
    /// (validated by [`DeliveryPolicy::from_token`]), else an adapter name, which declares the
    /// pane an agent with the default aggressive delivery, else nothing: not an agent.
    pub fn for_pane(
        token: Option<&str>,
        adapter_command: Vec<String>,
        agent_adapter: Option<&str>,
    ) -> Result<Self> {
        match (token, agent_adapter) {
            (Some(token), _) => DeliveryPolicy::from_token(token, adapter_command),
            (None, Some(_)) => DeliveryPolicy::from_token(AGGRESSIVE_POLICY_TOKEN, adapter_command),
            (None, None) => Ok(DeliveryPolicy::Undeclared),
        }
    }

    /// `"none"`, `"aggressive"` or the rich token, for status and logs.
    pub fn token(&self) -> &'static str {
        match self {
            DeliveryPolicy::Undeclared => "none",
            DeliveryPolicy::Aggressive => AGGRESSIVE_POLICY_TOKEN,
            DeliveryPolicy::Rich { .. } => RICH_POLICY_TOKEN,
        }
    }

    /// The adapter's argv, if the policy has one.
    pub fn adapter_command(&self) -> Option<&[String]> {
        match self {
            DeliveryPolicy::Undeclared | DeliveryPolicy::Aggressive => None,
            DeliveryPolicy::Rich { adapter_command } => Some(adapter_command),
        }
    }
}

/// One step of an input transaction, mapped by the engine onto the pane's send steps (spec §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Text pasted (bracketed when the program enabled bracketed paste).
    Paste(String),
    /// A pause, in milliseconds.
    DelayMs(u64),
    /// A named key, such as `Enter`.
    Key(String),
}

/// The notice transaction of spec §7.3: paste the notice, wait 500 ms, press Enter; then, when
/// `settle_ms` is not zero, wait that long still holding the pane's input. A harness may take
/// the Enter late and submit with it the keys that arrive right after (a human's typing, which
/// waits behind the transaction for the input lock); its adapter declares how long it needs.
///
/// The notice must come from [`crate::notice`], which guarantees it holds no control
/// characters; the pane also rejects any that could end the paste frame.
pub fn notice_transaction(notice: &str, settle_ms: u64) -> Vec<Step> {
    let mut steps = vec![
        Step::Paste(notice.to_owned()),
        Step::DelayMs(NOTICE_ENTER_DELAY_MS),
        Step::Key("Enter".to_owned()),
    ];
    if settle_ms > 0 {
        steps.push(Step::DelayMs(settle_ms));
    }
    steps
}

/// The `input` array of a send request:
/// `[{"paste":"…"},{"delay_ms":500},{"key":"Enter"}]`.
pub fn to_wire_steps(steps: &[Step]) -> Value {
    Value::Array(
        steps
            .iter()
            .map(|step| match step {
                Step::Paste(text) => json!({ "paste": text }),
                Step::DelayMs(delay) => json!({ "delay_ms": delay }),
                Step::Key(key) => json!({ "key": key }),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pane_not_declared_an_agent_gets_no_delivery() {
        let policy = DeliveryPolicy::for_pane(None, vec![], None).unwrap();
        assert_eq!(policy, DeliveryPolicy::Undeclared);
        assert_eq!(policy.token(), "none");
        assert_eq!(policy.adapter_command(), None);
    }

    #[test]
    fn an_agent_adapter_alone_declares_the_default_aggressive_delivery() {
        let policy = DeliveryPolicy::for_pane(None, vec![], Some("some-harness")).unwrap();
        assert_eq!(policy, DeliveryPolicy::Aggressive);
        assert_eq!(policy.token(), "aggressive");
    }

    #[test]
    fn the_aggressive_token_is_accepted_and_refuses_an_adapter_command() {
        assert_eq!(
            DeliveryPolicy::from_token("aggressive", vec![]).unwrap(),
            DeliveryPolicy::Aggressive
        );
        let err =
            DeliveryPolicy::from_token("aggressive", vec!["/opt/adapter".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "DING delivery \"aggressive\" runs no adapter: remove the adapter command, or use \
             delivery \"turn-boundary+fresh-idle\""
        );
    }

    #[test]
    fn the_rich_token_needs_a_command() {
        let policy =
            DeliveryPolicy::from_token(RICH_POLICY_TOKEN, vec!["/opt/adapter".into(), "-v".into()])
                .unwrap();
        assert_eq!(policy.token(), RICH_POLICY_TOKEN);
        assert_eq!(
            policy.adapter_command(),
            Some(&["/opt/adapter".to_owned(), "-v".to_owned()][..])
        );
        for command in [
            vec![],
            vec![String::new()],
            vec!["  ".to_owned(), "x".to_owned()],
        ] {
            let err = DeliveryPolicy::from_token(RICH_POLICY_TOKEN, command).unwrap_err();
            assert_eq!(
                err.to_string(),
                "DING delivery \"turn-boundary+fresh-idle\" needs a non-empty adapter command: \
                 add `adapter { command \"PATH\" }` to the ding block"
            );
        }
    }

    #[test]
    fn unknown_tokens_are_named() {
        for token in [
            "none",
            "fresh-idle",
            "",
            "AGGRESSIVE",
            "TURN-BOUNDARY+FRESH-IDLE",
        ] {
            let err = DeliveryPolicy::from_token(token, vec!["/opt/adapter".into()]).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("unknown DING delivery policy {token:?}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn notice_transaction_maps_to_the_wire_shape() {
        let steps = notice_transaction("[DING] hello", 0);
        assert_eq!(
            to_wire_steps(&steps).to_string(),
            r#"[{"paste":"[DING] hello"},{"delay_ms":500},{"key":"Enter"}]"#
        );
        // A harness that takes the Enter late: the input stays held after it.
        let steps = notice_transaction("[DING] hello", 300);
        assert_eq!(
            to_wire_steps(&steps).to_string(),
            r#"[{"paste":"[DING] hello"},{"delay_ms":500},{"key":"Enter"},{"delay_ms":300}]"#
        );
    }

    #[test]
    fn policies_serialize_with_their_token() {
        let rich = DeliveryPolicy::from_token(RICH_POLICY_TOKEN, vec!["a".into()]).unwrap();
        assert_eq!(
            serde_json::to_string(&rich).unwrap(),
            r#"{"delivery":"turn-boundary+fresh-idle","adapter_command":["a"]}"#
        );
        assert_eq!(
            serde_json::to_string(&DeliveryPolicy::Aggressive).unwrap(),
            r#"{"delivery":"aggressive"}"#
        );
        assert_eq!(
            serde_json::to_string(&DeliveryPolicy::Undeclared).unwrap(),
            r#"{"delivery":"none"}"#
        );
    }
}
