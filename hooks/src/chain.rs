//! The handler chain: runs the selected handlers in order and folds their answers into one
//! [`Outcome`] (SPEC §8).
//!
//! A handler answers in one of three ways:
//! - exit 0, with nothing, plain text (its context) or a JSON object
//!   `{"decision"?: "allow"|"deny", "reason"?: str, "context"?: str}` on stdout;
//! - exit 2: an explicit refusal. It is always a deny, whatever the handler's failure mode, and
//!   its stderr is the reason;
//! - anything else (another exit code, a signal, a timeout, a spawn failure, stdout that opens
//!   like a JSON object but is not one): a failure, judged by the handler's `failure` mode.
//!
//! The first deny ends the chain: later handlers do not run. The contexts of the handlers that
//! ran, the denying one included, are joined in order with `\n`. A handler that fails open adds
//! a note to the reason and no context, and the chain goes on, so that one broken handler
//! cannot switch off the guards after it.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::handlers::{FailureMode, Handler};
use crate::outcome::{Decision, Outcome};
use crate::process::{self, ProcessEnd};

/// The exit code that means "refused" (SPEC §8).
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
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Answer::Allow {
            reason: String::new(),
            context: String::new(),
        };
    }
    // Text that opens like an object was meant as a JSON answer; reading a broken one as
    // context would hide a deny the handler tried to give.
    if !trimmed.starts_with('{') {
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
        Err(err) => Answer::Failed {
            problem: format!(
                "printed malformed JSON ({err}); expected {{\"decision\"?,\"reason\"?,\"context\"?}}"
            ),
        },
    }
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

    #[test]
    fn broken_or_unknown_json_answer_is_a_failure() {
        for stdout in [
            r#"{"decision":"deny""#,
            r#"{"decision":"block"}"#,
            r#"{"reason":5}"#,
        ] {
            let answer = interpret_stdout(&handler(), stdout.as_bytes());
            assert!(
                matches!(&answer, Answer::Failed { problem } if problem.contains("malformed JSON")),
                "{stdout}: {answer:?}"
            );
        }
    }

    #[test]
    fn long_stderr_is_cut_on_a_char_boundary() {
        let stderr = "é".repeat(NOTE_STDERR_LIMIT);
        let note = with_stderr("failed".to_string(), stderr.as_bytes());
        assert!(note.ends_with("…)"), "{note}");
        assert!(note.len() < stderr.len());
    }
}
