//! The dispatch call log: one JSON line per `belfry dispatch` run, appended to the file
//! `$BELFRY_DISPATCH_LOG` names (or [`DispatchOptions::call_log`]), so that a person or a test
//! can see which native hooks a harness really called, with what, and what belfry answered.
//!
//! A projection (spec §9) is only worth what the harness does with it: a matrix cell called
//! exact claims that the harness calls `belfry dispatch` for that event, and this log is the
//! evidence. It is off unless the variable is set, costs one environment lookup when it is
//! off, and is written after the answer is decided, so it never changes the answer. A log
//! that cannot be written is skipped: it is a diagnostic, and a diagnostic must not fail the
//! hook in front of a tool call (spec §8 fail-open).
//!
//! Each line is one `write(2)` on a file opened with `O_APPEND`, so the lines of hooks the
//! harness runs concurrently never interleave. The file is created 0600 and opened with
//! `O_NOFOLLOW`: a symlink planted at the path cannot redirect the appends into another file.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use crate::dispatch::{DispatchOptions, DispatchOutput};

/// Names the call log when [`DispatchOptions::call_log`] is `None`. Its name holds none of the
/// words (`KEY`, `TOKEN`, `AUTH`, `SECRET`, …) that some harnesses strip from a hook's
/// environment, so it reaches a projected `belfry dispatch` through every harness.
pub const DISPATCH_LOG_ENV: &str = "BELFRY_DISPATCH_LOG";

/// The most characters of the reason a log line keeps: enough to recognise a refusal, short
/// enough that a line stays one small atomic append.
pub const LOGGED_REASON_CHARS: usize = 200;

/// What dispatch learnt about the call before answering it.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallFacts {
    /// The harness's own event name from stdin (`hook_event_name`), if it gave one.
    pub hook_event_name: Option<String>,
    /// The tool the hook is about (`tool_name`), as the harness named it.
    pub tool_name: Option<String>,
    /// That tool's canonical class, as the dialect's tool map (or the common shape) says.
    pub tool_class: Option<String>,
    /// How many handlers of the hooks file ran.
    pub handlers: usize,
}

/// One line of the log. The fields are documented in `docs/hooks.md` (The dispatch call log).
#[derive(Serialize)]
struct CallLine<'a> {
    /// Unix time in milliseconds when the answer was decided.
    ms: u128,
    pid: u32,
    event: &'a str,
    native: Option<&'a str>,
    hook_event_name: Option<&'a str>,
    tool_name: Option<&'a str>,
    tool_class: Option<&'a str>,
    handlers: usize,
    decision: &'a str,
    reason: String,
    exit_code: i32,
}

/// The log's path: [`DispatchOptions::call_log`], else a non-empty [`DISPATCH_LOG_ENV`].
pub(crate) fn call_log_path(
    opts: &DispatchOptions,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    opts.call_log.clone().or_else(|| {
        env(DISPATCH_LOG_ENV)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    })
}

/// Appends the line for one answered call to `path`; a failure is dropped (module comment).
pub(crate) fn log_call(
    path: &Path,
    opts: &DispatchOptions,
    facts: &CallFacts,
    output: &DispatchOutput,
) {
    let line = CallLine {
        ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis()),
        pid: std::process::id(),
        event: &opts.event,
        native: opts.native.as_deref(),
        hook_event_name: facts.hook_event_name.as_deref(),
        tool_name: facts.tool_name.as_deref(),
        tool_class: facts.tool_class.as_deref(),
        handlers: facts.handlers,
        decision: output.outcome.decision.as_str(),
        reason: output
            .outcome
            .reason
            .chars()
            .take(LOGGED_REASON_CHARS)
            .collect(),
        exit_code: output.exit_code,
    };
    let Ok(mut bytes) = serde_json::to_vec(&line) else {
        return;
    };
    bytes.push(b'\n');
    let flags =
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)) else {
        return;
    };
    // One write of the whole line (module comment: appends of hooks run at once stay whole).
    let _ = std::fs::File::from(fd).write_all(&bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_wins_over_the_variable_and_an_empty_variable_is_off() {
        let set = |name: &str| (name == DISPATCH_LOG_ENV).then(|| OsString::from("/tmp/env.log"));
        let empty = |name: &str| (name == DISPATCH_LOG_ENV).then(OsString::new);
        let mut opts = DispatchOptions::default();
        assert_eq!(
            call_log_path(&opts, &set),
            Some(PathBuf::from("/tmp/env.log"))
        );
        assert_eq!(call_log_path(&opts, &empty), None);
        opts.call_log = Some(PathBuf::from("/tmp/option.log"));
        assert_eq!(
            call_log_path(&opts, &set),
            Some(PathBuf::from("/tmp/option.log"))
        );
    }
}
