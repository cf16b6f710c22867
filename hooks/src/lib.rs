//! `belfry-hooks`: the one provider-neutral hook dispatcher (spec §8).
//!
//! Every harness's native hooks call `belfry dispatch --event EVENT`. The dispatcher reads one
//! JSON object in the common hook shape from stdin, runs the user's handlers for that event
//! from the hooks file (`$BELFRY_HOOKS_FILE`, compiled by `belfry hooks`, spec §9), and answers
//! with exactly one neutral JSON object `{"decision","reason","context"}` and exit 0 — or, with
//! `--native DIALECT`, in a harness's own output contract described by dialect data. Nothing in
//! this crate knows any particular harness: harness literals arrive as data.
//!
//! A run flows one way through flat modules, each named for what it owns:
//! [`dispatch`] is the run itself and the place to start reading; it parses stdin, loads the
//! hooks file through [`handlers`] (the JSON schema, validation and the ownership/mode check of
//! `permissions`), selects groups with [`matcher`], and hands the handlers to `chain`, which
//! runs each one through `process` (argv only, a deadline, the process group killed on
//! timeout) and folds the answers into an [`Outcome`]. Between selecting and running,
//! [`session`] decides which groups fire (read-once guards, the ledger of [`once`]) and adds
//! what belfry tells the model itself: the guard brief ([`brief`]) and the project memory
//! ([`memory`]). [`spool`] appends the context for the
//! host to drain later, and [`native`] renders the outcome for a dialect. [`error`] holds the
//! one error enum.
//!
//! Two modules serve `belfry hooks` (spec §9) rather than a dispatch: [`canonical`] reads
//! the canonical hook file (`belfry-hooks.kdl`, the user's `hooks.kdl`) and compiles it into
//! the hooks file above, and [`project`] projects it into each harness's native config from
//! adapter data built into the binary (`build.rs`), with plan, apply, status and uninstall.
//! Dispatch never calls them.
//!
//! The rule that shapes the whole crate is fail-open: this code sits in front of every tool
//! call, so a problem in the dispatcher or in the hook configuration must never block the
//! agent. Every internal error becomes `allow` with the error in `reason`. The only denies are
//! a handler's explicit refusal (exit 2, always honoured), a handler's JSON `deny`, and the
//! failure of a handler that declared itself fail-closed. The second rule is speed: with no
//! handlers a run is a JSON parse and an environment lookup, with no threads and no runtime.
//!
//! # API for the CLI
//!
//! `belfry dispatch --event E [--hooks-file P] [--spool] [--native D] [--turn-boundary]` is
//! one call to [`run_hook`], which owns the order of the steps (read stdin, run the handlers,
//! reserve inbox notices at a turn boundary or a continuable turn stop, write the answer
//! through the CLI's writer, confirm or release the reservation by whether the write worked,
//! forward the event to the pane's daemon); the CLI exits with its code. The steps themselves, for a caller that is
//! not in a pane:
//!
//! ```no_run
//! use std::io::Write;
//! use belfry_hooks::{run_dispatch, DispatchOptions};
//!
//! use belfry_hooks::{read_hook_stdin, run_dispatch_without_input, stdin_deadline};
//!
//! let opts = DispatchOptions { event: "before-tool".into(), ..DispatchOptions::default() };
//! // A deadline and a size cap: a harness that never closes stdin gets a fail-open answer.
//! let output = match read_hook_stdin(std::io::stdin(), belfry_hooks::STDIN_CAP_BYTES, stdin_deadline()) {
//!     Ok(stdin) => run_dispatch(&opts, &stdin),
//!     Err(err) => run_dispatch_without_input(&opts, &err),
//! };
//! let _ = std::io::stdout().write_all(&output.stdout);
//! let _ = std::io::stderr().write_all(&output.stderr);
//! std::process::exit(output.exit_code);
//! ```
//!
//! `belfry spool drain`: print [`spool_drain`]'s string as is (it is empty, or ends in a
//! newline). Its error is for the CLI to report with a non-zero exit.
//!
//! Environment fallbacks: [`HOOKS_FILE_ENV`], [`HOOK_CONTEXT_ENV`], [`DIALECTS_ENV`], and
//! [`DISPATCH_LOG_ENV`], which [`call_log`] appends one line per run to. Handlers
//! see [`EVENT_ENV`] set to the semantic event. The formats are documented in `docs/hooks.md`.

pub mod brief;
pub mod call_log;
pub mod canonical;
mod chain;
pub mod dispatch;
pub mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod handlers;
pub mod matcher;
pub mod memory;
pub mod native;
pub mod once;
mod outcome;
pub mod pane_link;
mod permissions;
mod process;
pub mod project;
pub mod session;
pub mod spool;

pub use call_log::DISPATCH_LOG_ENV;
pub use chain::{EVENT_ENV, REFUSAL_EXIT_CODE};
pub use dispatch::{
    read_hook_stdin, run_dispatch, run_dispatch_claiming, run_dispatch_without_input,
    stdin_deadline, ClaimNotices, DispatchOptions, DispatchOutput, DIALECTS_ENV,
    DIALECT_ERROR_EXIT_CODE, HANDLER_INPUT_MEMBER, HOOKS_FILE_ENV, HOOK_CONTEXT_ENV,
    STDIN_CAP_BYTES, STDIN_DEADLINE, STDIN_DEADLINE_ENV,
};
pub use error::Error;
pub use outcome::{Decision, Outcome};
pub use pane_link::run_hook;
pub use spool::{spool_append, spool_drain, GUIDANCE_HEADER};
