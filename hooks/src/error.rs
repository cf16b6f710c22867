//! The crate's one error type.
//!
//! Every variant names the input that failed and, where there is one, the fix. `run_dispatch`
//! never returns these: it turns them into an `allow` whose reason is the error's text
//! (spec §8, fail-open), so the text is written for the person who reads that reason.

use std::path::PathBuf;

/// What went wrong while loading hook configuration, running the spool or rendering a dialect.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The hook's standard input was not one JSON object.
    #[error("hook stdin is not one JSON object ({reason}); expected the common hook shape, e.g. {{\"hook_event_name\":…,\"tool_name\":…}}")]
    InvalidStdin { reason: String },

    /// The harness did not close the hook's stdin in time (spec §8: nothing waits forever).
    #[error("hook stdin was not closed within {waited_ms} ms; no handler ran (the harness must write the hook JSON and close stdin)")]
    StdinNotClosed { waited_ms: u128 },

    /// The hook's stdin is larger than any hook JSON dispatch accepts.
    #[error("hook stdin is larger than {cap} bytes; no handler ran")]
    StdinTooLarge { cap: usize },

    /// Reading the hook's stdin failed.
    #[error("cannot read hook stdin: {source}")]
    StdinRead {
        #[source]
        source: std::io::Error,
    },

    /// The hooks file could not be opened or read.
    #[error("cannot read hooks file {path}: {source}")]
    HooksFileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The hooks file is owned by someone else or writable by others, so it is not run.
    #[error("hooks file {path} {problem}; no handler ran. Fix: {fix}")]
    HooksFileInsecure {
        path: PathBuf,
        problem: String,
        fix: String,
    },

    /// The hooks file is not valid JSON in the documented schema (`docs/hooks.md`).
    #[error("hooks file {path} is invalid: {reason} (schema: docs/hooks.md)")]
    HooksFileInvalid { path: PathBuf, reason: String },

    /// A group's `matcher` is not a valid alternation.
    #[error("matcher {matcher:?} is invalid: {reason}")]
    InvalidMatcher { matcher: String, reason: String },

    /// A dialect name that cannot be a file name (it would escape the dialects directory).
    #[error("dialect name {name:?} is invalid: use lowercase letters, digits, '-' and '_'")]
    InvalidDialectName { name: String },

    /// No dialect data of that name in the dialects directory, the adapters built into the
    /// binary or the crate.
    #[error("dialect {name:?} not found (looked in {searched} and the built-in dialects); the dialects that exist: {available}")]
    DialectNotFound {
        name: String,
        searched: String,
        available: String,
    },

    /// A dialect file exists but cannot be read.
    #[error("cannot read dialect file {path}: {source}")]
    DialectRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A dialect file is owned by someone else or writable by others. Dialect data decides how
    /// a deny reaches the harness, so a file others can change could turn denies into allows.
    #[error("dialect file {path} {problem}; it is not used. Fix: {fix}")]
    DialectInsecure {
        path: PathBuf,
        problem: String,
        fix: String,
    },

    /// Dialect data is not valid JSON in the documented format (`docs/hooks.md`).
    #[error("dialect {name:?} is invalid: {reason} (format: docs/hooks.md)")]
    DialectInvalid { name: String, reason: String },

    /// `--spool` was asked for but no spool path was given or set in `$BELFRY_HOOK_CONTEXT`.
    #[error("--spool given but no spool path: set BELFRY_HOOK_CONTEXT or pass a spool path")]
    SpoolNotConfigured,

    /// The spool could not be opened, locked, read, written or truncated.
    #[error("spool {path}: {action} failed: {source}")]
    SpoolIo {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// The spool is owned by someone else or readable/writable by others (spec §12).
    #[error("spool {path} {problem}; refusing to use it. Fix: {fix}")]
    SpoolInsecure {
        path: PathBuf,
        problem: String,
        fix: String,
    },
}
