//! belfry's activity-adapter engine (spec §7.4, §10): the composer guard read from a pane's
//! screen, driven entirely by per-harness data.
//!
//! A harness's screen grammar (`adapters/<name>/screen.json`, built in by `build.rs`) says where
//! its lowest live composer is (a box between rules, a barred box, or a prompt line), what an
//! empty one shows (blank, or a placeholder in a given style), and which rows mean a dialog.
//! [`grammar`] parses and compiles that file, [`screen`] reads a `belfry peek --json --cells`
//! snapshot, and [`classify`] judges the composer `Empty`, `Nonempty` or `Unknown(reason)`,
//! `Empty` only on a positive proof. [`activity`] combines that with the turn state the
//! harness's hooks report into a protocol v1 `activity` event; the `belfry-adapter` executable
//! (`src/bin/belfry-adapter.rs`) does the talking to the daemon.
//!
//! Nothing here names a harness: every fact comes from the grammar files, each rule naming the
//! real-screen fixtures that proved it (`adapters/<name>/fixtures/screens/`).

pub mod activity;
pub mod classify;
pub mod embedded;
pub mod error;
pub mod grammar;
pub mod question;
pub mod screen;

pub use classify::{classify, Composer, EmptyBy, UnknownReason, Verdict};
pub use error::{Error, Result};
pub use grammar::Grammar;
pub use question::Question;
pub use screen::Screen;
