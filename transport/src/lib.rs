//! `belfry-transport`: how belfry's processes find and talk to each other, apart from what a
//! pane is. The daemon, `belfry dispatch`, the hooks, the activity adapter and every CLI command
//! that is not an attach need only this crate, not the terminal model or the PTY (the crate
//! graph in `docs/architecture.md` is checked against the Cargo files).
//!
//! - [`wire`]: the NDJSON protocol and attach frames, one line per request and reply.
//! - [`client`] and [`deadline`]: the one blocking client of belfry's sockets (connect with the
//!   peer-uid check, hello, a request with its op's deadline, a typed reply), and how long
//!   each op may take at each hop.
//! - [`listener`]: the accept loop the daemon and the pane host share (connection cap, back-off
//!   when out of file descriptors).
//! - [`fdpass`]: descriptors passed over a Unix socket (an attach client's terminal, a
//!   connection the daemon hands to a pane host for `bind`).
//! - [`paths`]: where sockets, records, logs and state live, and the checks that they are
//!   private and served by this user.
//! - [`retry`]: the one pause schedule and bounded poll every retry loop uses.
//! - [`signals`]: the signal state a started program gets, and what a server unblocks.
//! - [`error`]: the error all of these return.

pub mod client;
pub mod deadline;
pub mod error;
pub mod fdpass;
pub mod listener;
pub mod paths;
pub mod retry;
pub mod signals;
pub mod wire;

pub use error::{Error, Result};
