//! `belfry-pty`: one pane and the pane host process that serves it.
//!
//! A pane is a PTY, the child program running on it, a screen model fed with every byte the
//! program writes, and a monotonic **revision** that moves on every input write, output chunk,
//! resize, restart, exit and clear (spec §2). The pane host (`belfry-pane`, or `belfry pane-host`) owns exactly
//! one pane and serves it on `<runtime>/panes/<session>.sock`; it is started detached so it
//! survives the control-plane daemon (spec §6.0).
//!
//! Where to start reading:
//! - [`pane`]: the [`pane::Pane`] type, its two locks and the guarded write of spec §3
//!   ([`pane::Pane::send`]). This is the only path to PTY input.
//! - [`screen`]: the alacritty_terminal model, snapshots, the attach redraw and query answers.
//!   `tracker` (private) sits between its parser and the terminal core and records the state
//!   the core keeps to itself (scroll region, active character set) so the redraw can restore it;
//!   `queries` (private) finds the queries the core drops (XTVERSION, XTGETTCAP, and the
//!   program status protocol's OSC 7501 strings).
//! - [`program_status`]: OSC 7501 as a terminal speaks it: the query's answer, the reports
//!   read, and the records kept per id.
//! - [`history`]: the rows above the screen, kept compact (text plus attribute runs) under a
//!   line cap and a byte cap, and expanded only when read.
//! - `answers` (private): finds attached terminals' answers in their input, so a query is
//!   answered by one client only.
//! - [`host`]: the pane host's socket server (snapshot, send, attach, subscribe, wait, …);
//!   `screen_regex` (private) compiles and matches `wait`'s screen regexes.
//! - `belfry-transport` (not this crate): the NDJSON protocol and attach frames, the client,
//!   the accept loop, descriptor passing, paths, retries and deadlines the pane host uses.
//! - [`terminal`]: an attach client's terminal handed to the pane host, written by a thread of
//!   its own (`belfry_transport::fdpass` carries the descriptors, and a client's connection the
//!   daemon hands to a pane host for `bind`); [`restore`] records what the bytes written to a terminal turned on in it and
//!   the bytes that undo exactly that.
//! - [`input`]: the bounded input transport (text, bytes, paste, keys, delays).
//! - [`txn`]: the journal that tells a restarted daemon whether a send was ever written.

mod answers;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod ground;
pub mod history;
pub mod host;
pub mod input;
pub mod pane;
mod program_pages;
pub mod program_status;
mod queries;
pub mod restore;
pub mod screen;
mod screen_regex;
mod styled;
pub mod terminal;
#[cfg(test)]
mod test_rng;
mod tracker;
pub mod txn;

pub use error::{Error, Result};

// The plumbing this crate is built on, named here as the crate's own modules are so the pane
// host reads `crate::wire`; its one home is `belfry-transport` (and the launch spec's
// `belfry-proto`).
pub(crate) use belfry_proto::spec;
pub(crate) use belfry_transport::{fdpass, listener, paths, retry, wire};

/// Compiles a `wait` screen regex as the pane host will, for a client to refuse a pattern
/// before sending it, naming its own option: `Err` says what is wrong in the `regex` crate's
/// words.
pub fn check_screen_regex(pattern: &str) -> std::result::Result<(), String> {
    screen_regex::ScreenRegex::new(pattern).map(drop)
}
