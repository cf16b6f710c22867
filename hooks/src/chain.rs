//! The handler chain: runs the selected handlers in order and folds their answers into one
//! [`Outcome`] (spec §8).
//!
//! A handler answers in one of three ways:
//! - exit 0, with nothing, plain text (its context) or a JSON object
//!   `{"decision"?: "allow"|"deny", "reason"?: str, "context"?: str}` on stdout;
//! - exit 2: an explicit refusal. It is always a deny, whatever the handler's failure mode, and
//!   its stderr is the reason;
//! - anything else (another exit code, a signal, a timeout, a spawn failure): a failure, judged
//!   by the handler's `failure` mode.
//!
//! Stdout that looks like a decision but is not a valid one (it opens like a JSON object, or it
//! names `"decision"`, and does not parse as the answer above) is a failure too, with one
//! stricter rule, because the handler may have been trying to deny: it denies when the handler
//! is `enforce`, is `failure: closed`, or its text says `deny` anywhere. Only an `observe` or
//! `enrich` handler that fails open and never wrote `deny` is skipped with a note. So a broken
//! answer can never turn a deny into an allow. A UTF-8 byte-order mark before the answer is
//! removed first: it is an encoding artefact, not part of the text.
//!
//! The first deny ends the chain: later handlers do not run. The contexts of the handlers that
//! ran, the denying one included, are joined in order with `\n`. A handler that fails open adds
//! a note to the reason and no context, and the chain goes on, so that one broken handler
//! cannot switch off the guards after it.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::handlers::{FailureMode, Handler, Intent};
use crate::outcome::{Decision, Outcome};
use crate::process::{self, ProcessEnd};

/// The exit code that means "refused" (spec §8).
pub const REFUSAL_EXIT_CODE: i32 = 2;

/// The environment variable that tells a handler which semantic event it runs for.
pub const EVENT_ENV: &str = "BELFRY_HOOK_EVENT";

/// The longest piece of a failing handler's stderr quoted in a fail-open note.
const NOTE_STDERR_LIMIT: usize = 1000;

/// One handler's answer, before the chain combines it with the others.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Allow { reason: String, context: String },
    Deny { reason: String, context: String },
    Failed { problem: String },
}

/// The UTF-8 byte-order mark some tools write before their output.
const BYTE_ORDER_MARK: char = '\u{feff}';

/// The JSON a handler may print on exit 0. Unknown fields are ignored: a handler may print
/// more than belfry reads.
#[derive(Deserialize)]
struct HandlerJson {
    #[serde(default)]
    decision: Option<Decision>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    context: Option<String>,
}

/// Runs `handlers` in order for `event`, each with `stdin` (the hook's original bytes).
pub(crate) fn run_chain<'a>(
    handlers: impl Iterator<Item = &'a Handler>,
    event: &str,
    stdin: &[u8],
) -> Outcome {
    let stdin: Arc<[u8]> = Arc::from(stdin);
    let mut contexts: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for handler in handlers {
        let end = process::run(
            &handler.argv,
            Arc::clone(&stdin),
            &[(EVENT_ENV, event)],
            Duration::from_millis(handler.timeout_ms),
        );
        match interpret(handler, end) {
            Answer::Allow { reason, context } => {
                push_non_empty(&mut contexts, context);
                push_non_empty(&mut notes, reason);
            }
            Answer::Deny { reason, context } => {
                push_non_empty(&mut contexts, context);
                return Outcome {
                    decision: Decision::Deny,
                    reason,
                    context: contexts.join("\n"),
                };
            }
            Answer::Failed { problem } => match handler.failure {
                FailureMode::Open => notes.push(format!(
                    "belfry dispatch: handler `{}` {problem}; it fails open, so it was skipped",
                    handler.display_name()
                )),
                // A guard declared fail-closed could not vouch for the action; letting it
                // through would turn every crash of the guard into a bypass.
                FailureMode::Closed => {
                    return Outcome {
                        decision: Decision::Deny,
                        reason: format!(
                            "belfry dispatch: handler `{}` {problem}; it fails closed, so the \
                             action is denied",
                            handler.display_name()
                        ),
                        context: contexts.join("\n"),
                    }
                }
            },
        }
    }
    Outcome {
        decision: Decision::Allow,
        reason: notes.join("\n"),
        context: contexts.join("\n"),
    }
}

fn push_non_empty(list: &mut Vec<String>, text: String) {
    if !text.is_empty() {
        list.push(text);
    }
}

fn interpret(handler: &Handler, end: ProcessEnd) -> Answer {
    match end {
        ProcessEnd::Finished {
            status,
            stdout,
            stderr,
        } => match status.code() {
            Some(0) => interpret_stdout(handler, &stdout),
            Some(REFUSAL_EXIT_CODE) => Answer::Deny {
                reason: refusal_reason(handler, &stderr),
                context: String::new(),
            },
            Some(code) => Answer::Failed {
                problem: with_stderr(format!("exited with status {code}"), &stderr),
            },
            None => Answer::Failed {
                problem: with_stderr(describe_signal(status), &stderr),
            },
        },
        ProcessEnd::TimedOut { stderr } => Answer::Failed {
            problem: with_stderr(
                format!(
                    "timed out after {} ms and was killed with its process group",
                    handler.timeout_ms
                ),
                &stderr,
            ),
        },
        ProcessEnd::SpawnFailed(err) => Answer::Failed {
            problem: format!("could not be started: {err}"),
        },
        ProcessEnd::WaitFailed(err) => Answer::Failed {
            problem: format!("ended but its exit status could not be read: {err}"),
        },
    }
}

fn interpret_stdout(handler: &Handler, stdout: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(stdout);
    let text = text.trim_start_matches(BYTE_ORDER_MARK);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Answer::Allow {
            reason: String::new(),
            context: String::new(),
        };
    }
    // Text that opens like an object, or names a decision, was meant as a JSON answer; reading
    // a broken one as context would hide a deny the handler tried to give.
    if !looks_like_a_decision(trimmed) {
        return Answer::Allow {
            reason: String::new(),
            context: text.trim_end().trim_start_matches(['\n', '\r']).to_string(),
        };
    }
    match serde_json::from_str::<HandlerJson>(trimmed) {
        Ok(answer) => {
            let context = answer.context.unwrap_or_default();
            let reason = answer.reason.unwrap_or_default();
            match answer.decision {
                Some(Decision::Deny) => Answer::Deny {
                    reason: non_empty_or(reason, || {
                        format!(
                            "handler `{}` denied without giving a reason",
                            handler.display_name()
                        )
                    }),
                    context,
                },
                Some(Decision::Allow) | None => Answer::Allow { reason, context },
            }
        }
        Err(err) => malformed_answer(handler, trimmed, &err),
    }
}

/// True for stdout that was meant as a JSON answer rather than as plain context.
fn looks_like_a_decision(trimmed: &str) -> bool {
    trimmed.starts_with('{') || trimmed.contains("\"decision\"")
}

/// A decision-shaped answer that does not parse. See the module comment: it is a deny unless
/// the handler can neither enforce nor fail closed and its text never says `deny`. A
/// fail-closed handler's broken answer is left to the chain as a failure, which denies it.
fn malformed_answer(handler: &Handler, trimmed: &str, err: &serde_json::Error) -> Answer {
    let problem = format!(
        "printed malformed JSON ({err}); expected one JSON object \
         {{\"decision\"?: \"allow\"|\"deny\", \"reason\"?: string, \"context\"?: string}}"
    );
    if handler.failure == FailureMode::Closed {
        return Answer::Failed { problem };
    }
    let may_have_meant_deny = trimmed.to_ascii_lowercase().contains("deny");
    if handler.intent == Intent::Enforce || may_have_meant_deny {
        return Answer::Deny {
            reason: format!(
                "belfry dispatch: handler `{}` {problem}; a broken answer never allows, so \
                 the action is denied",
                handler.display_name()
            ),
            context: String::new(),
        };
    }
    Answer::Failed { problem }
}

fn refusal_reason(handler: &Handler, stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr).trim().to_string();
    non_empty_or(text, || {
        format!(
            "handler `{}` refused (exit {REFUSAL_EXIT_CODE}) without giving a reason",
            handler.display_name()
        )
    })
}

fn non_empty_or(text: String, fallback: impl FnOnce() -> String) -> String {
    if text.is_empty() {
        fallback()
    } else {
        text
    }
}

fn describe_signal(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(signal) => format!("was killed by signal {signal}"),
        None => format!("ended with {status}"),
    }
}

fn with_stderr(problem: String, stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() {
        return problem;
    }
    let mut end = text.len().min(NOTE_STDERR_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let ellipsis = if end < text.len() { "…" } else { "" };
    format!("{problem} (stderr: {}{ellipsis})", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::Intent;

    fn handler() -> Handler {
        Handler {
            argv: vec!["guard".to_string()],
            timeout_ms: 100,
            intent: Intent::Enforce,
            failure: FailureMode::Open,
        }
    }

    #[test]
    fn stdout_forms_map_to_answers() {
        let cases: [(&str, Answer); 6] = [
            (
                "",
                Answer::Allow {
                    reason: String::new(),
                    context: String::new(),
                },
            ),
            (
                "\nremember the style guide\n",
                Answer::Allow {
                    reason: String::new(),
                    context: "remember the style guide".to_string(),
                },
            ),
            (
                r#"{"context":"c","extra":1}"#,
                Answer::Allow {
                    reason: String::new(),
                    context: "c".to_string(),
                },
            ),
            (
                r#"{"decision":"deny","reason":"no","context":"c"}"#,
                Answer::Deny {
                    reason: "no".to_string(),
                    context: "c".to_string(),
                },
            ),
            (
                r#"{"decision":"deny"}"#,
                Answer::Deny {
                    reason: "handler `guard` denied without giving a reason".to_string(),
                    context: String::new(),
                },
            ),
            (
                "[1, 2]",
                Answer::Allow {
                    reason: String::new(),
                    context: "[1, 2]".to_string(),
                },
            ),
        ];
        for (stdout, expected) in cases {
            assert_eq!(
                interpret_stdout(&handler(), stdout.as_bytes()),
                expected,
                "{stdout:?}"
            );
        }
    }

    fn enrich_open() -> Handler {
        Handler {
            intent: Intent::Enrich,
            ..handler()
        }
    }

    #[test]
    fn broken_or_unknown_json_answer_of_an_enforcing_handler_denies() {
        for stdout in [
            r#"{"decision":"deny""#,
            r#"{"decision":"block"}"#,
            r#"{"decision":"maybe"}"#,
            r#"{"reason":5}"#,
            r#"{"decision":"allow"} {"decision":"deny"}"#,
            "note: {\"decision\":\"allow\"",
        ] {
            let answer = interpret_stdout(&handler(), stdout.as_bytes());
            assert!(
                matches!(&answer, Answer::Deny { reason, .. } if reason.contains("malformed JSON")),
                "{stdout}: {answer:?}"
            );
        }
    }

    #[test]
    fn broken_answer_that_says_deny_denies_even_for_a_fail_open_enricher() {
        for stdout in [r#"{"decision":"deny""#, r#"{"decision":"DENY"}"#] {
            let answer = interpret_stdout(&enrich_open(), stdout.as_bytes());
            assert!(
                matches!(&answer, Answer::Deny { .. }),
                "{stdout}: {answer:?}"
            );
        }
    }

    #[test]
    fn broken_answer_of_a_fail_closed_enricher_is_its_failure() {
        let closed = Handler {
            failure: FailureMode::Closed,
            ..enrich_open()
        };
        let answer = interpret_stdout(&closed, br#"{"decision":"maybe"}"#);
        // A failure of a fail-closed handler is a deny in the chain (the integration test
        // `failure_closed_turns_crash_timeout_spawn_and_bad_json_into_deny` runs it).
        assert!(matches!(&answer, Answer::Failed { .. }), "{answer:?}");
    }

    #[test]
    fn broken_answer_without_deny_of_a_fail_open_enricher_is_a_failure() {
        let answer = interpret_stdout(&enrich_open(), br#"{"context": 5}"#);
        assert!(
            matches!(&answer, Answer::Failed { problem } if problem.contains("malformed JSON")),
            "{answer:?}"
        );
    }

    #[test]
    fn byte_order_mark_before_a_json_deny_is_removed_and_the_answer_denies() {
        let stdout = "\u{feff}{\"decision\":\"deny\",\"reason\":\"no\"}\n";
        assert_eq!(
            interpret_stdout(&enrich_open(), stdout.as_bytes()),
            Answer::Deny {
                reason: "no".to_string(),
                context: String::new(),
            }
        );
        let context = interpret_stdout(&enrich_open(), "\u{feff}plain words".as_bytes());
        assert_eq!(
            context,
            Answer::Allow {
                reason: String::new(),
                context: "plain words".to_string(),
            }
        );
    }

    #[test]
    fn long_stderr_is_cut_on_a_char_boundary() {
        let stderr = "é".repeat(NOTE_STDERR_LIMIT);
        let note = with_stderr("failed".to_string(), stderr.as_bytes());
        assert!(note.ends_with("…)"), "{note}");
        assert!(note.len() < stderr.len());
    }
}
