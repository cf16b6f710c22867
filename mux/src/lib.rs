//! `belfry-mux`: the control-plane daemon.
//!
//! The daemon (`belfry server`) ties the pane hosts together. It never touches a PTY: every
//! pane lives in its own pane host process (`belfry-pty`), which the daemon launches detached,
//! finds again through `<runtime>/panes/<session>.json` when it starts, and talks to over the
//! pane's socket. The daemon can therefore crash, be killed or be upgraded while every agent
//! keeps running; the next daemon adopts the same pane hosts (spec §6.0).
//!
//! Where to start reading:
//! - [`server`]: the daemon socket, the op dispatch, the event bus and the pane monitors; a
//!   folder whose `mod.rs` is the connection loop and the dispatch, with one file per op family.
//! - [`registry`]: the set of live pane hosts, adoption at start and launching new ones.
//! - [`ding`]: the DING engine, one worker per pane delivering inbox notices (spec §7), a folder
//!   with one file per concern of the worker (wake-ups, transactions, the rich lease, claims);
//!   [`adapter_group`] runs its adapter sidecars as process groups that end with them, and
//!   [`adapter_lines`] is the bounded reader of their output.
//! - [`adapters`]: where adapter data comes from (a directory, or the declarations built into
//!   the binary by `build.rs`), for declarations and DING adapter programs alike.
//! - [`lifecycle`]: adapter declarations (`adapters/<name>/declaration.json`, read as
//!   [`lifecycle::AdapterDeclaration`]) and the lifecycle events the host fires for a harness.
//! - [`client`]: the blocking client the CLI uses, which also starts the daemon on demand.
//! - [`remote`]: reaching another machine's belfry through `ssh … belfry proxy` (spec §6.2):
//!   hosts, the `hosts` aliases of the user's config, the ssh process and its failures.
//! - [`Error`] (`error.rs`): the one error type of every public function outside the
//!   daemon's request handlers; each message names what failed and on what.
//! - [`deadline`]: how long every request may take, at the daemon and at its clients.
//! - [`declare`]: `belfry.kdl` declarations, a folder: `declare/mod.rs` holds the typed
//!   declarations and the public face, `declare/lower.rs` lowers KDL to them,
//!   `declare/plan.rs` computes what `belfry up` and `belfry down` would do against the
//!   running panes, `declare/apply.rs` carries it out through the client ([`declare::up`],
//!   [`declare::down`]), and `declare/error.rs` says what is wrong with a rejected file.
//!   [`kdl_depth`] guards its parser against nesting that would overflow the stack;
//!   [`preflight`] checks every agent `belfry up` is about to launch before it launches any.
//! - [`doctor`]: the checks of `belfry doctor` that need only the core's knowledge of a pane
//!   (its adapter, its DING adapter executable, its program on `PATH`, its readiness).

pub mod adapter_group;
pub mod adapter_lines;
pub mod adapters;
pub mod client;
pub use belfry_transport::deadline;
pub mod declare;
pub mod descriptors;
pub mod ding;
pub mod doctor;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod handoff;
pub mod kdl_depth;
pub mod lifecycle;
pub mod preflight;
pub mod registry;
pub mod remote;
pub mod server;

pub use error::Error;
