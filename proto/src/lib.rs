//! belfry's wire vocabulary, defined once (spec §6.1).
//!
//! Every process that speaks belfry's NDJSON protocol — the daemon, the pane hosts, the CLI,
//! `belfry dispatch`, the tests and the benches — uses these types, so a request is parsed once
//! at the socket it arrives on and handed inward as a typed value. The crate does no I/O: it
//! depends on serde alone, and reading and writing lines is the callers' business (`pty::wire`).
//!
//! - [`request`]: [`Request`], one enum of every op, tagged by `op`, and [`BadRequest`], the
//!   named error a line that is not a valid request gets.
//! - [`reply`]: the reply envelope (`ok`, `error`) and the typed bodies of replies.
//! - [`attach`]: [`Control`], the control messages of an attach stream.
//! - [`event`]: the events of `subscribe` streams and the daemon's bus.
//! - [`identity`]: what a guarded send expects ([`Expect`]) and what a pane is ([`Identity`]).
//! - [`name`]: [`SessionName`], the one validator of session (and adapter) names.
//! - [`program_status`]: the OSC 7501 records a pane's program reports of itself.
//! - [`code`]: the error codes of error replies.
//! - [`limits`]: protocol versions, line and frame limits, the pane size range, deadlines.
//! - [`env`]: [`PaneEnv`], the `BELFRY_*` environment contract between a pane and its program.
//! - [`de`]: the deserializer that turns a JSON value into a typed request with errors that
//!   name the field and the problem.

pub mod attach;
pub mod code;
pub mod de;
pub mod env;
pub mod event;
pub mod expect_token;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod identity;
pub mod limits;
pub mod name;
pub mod program_status;
pub mod reply;
pub mod request;
pub mod spec;
pub mod txn;

pub use attach::Control;
pub use code::ErrorCode;
pub use env::PaneEnv;
pub use event::Event;
pub use identity::{ExitStatus, Expect, Identity};
pub use limits::Size;
pub use name::SessionName;
pub use reply::{ErrorBody, Reply};
pub use request::{BadRequest, Op, Request, Side};

#[cfg(test)]
mod properties;
#[cfg(test)]
mod wire_properties;
