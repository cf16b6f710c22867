//! DING for belfry: the durable inbox and everything that decides when an agent is told about
//! its mail (spec §7).
//!
//! This crate is the pure-library half of DING. It owns files (the inbox, presence and the
//! ownership state) and decisions (notices, policies, adapter events, leases), but it runs no
//! processes, talks to no socket and touches no PTY. The daemon's DING engine (in `mux`) wires
//! these pieces to panes: it runs the adapter sidecar, feeds its lines through [`protocol`] into
//! a [`lease::LeaseMachine`], and issues the guarded sends the lease allows. Nothing in here
//! knows any harness by name; provider knowledge lives in adapters, behind protocol v1.
//!
//! # Where to start
//!
//! * [`inbox`] is the authority (spec §7.1). [`inbox::Inbox`] posts, lists (FIFO), reads and
//!   archives messages under `<state>/inbox/<session>/{tmp,new,archive}`. Names are the
//!   validated newtypes of [`names`]; file contents are parsed and written by [`message`].
//!   [`presence`] stores the agent's `busy | available | dnd` beside them.
//! * [`notice`] turns a message into the one inert line that is pasted (spec §7.2).
//! * [`policy`] says how notices travel: aggressive (paste, 500 ms, Enter) by default, or the
//!   rich `turn-boundary+fresh-idle` policy with an opaque adapter command (spec §7.3, §7.4).
//! * [`protocol`] validates the adapter's NDJSON events; every rejection carries a
//!   [`hold::HoldReason`].
//! * [`lease`] is the rich policy's state machine: one fresh idle-and-empty activity event
//!   makes one lease, and one lease allows one guarded send.
//! * [`ownership`] records, durably, which unread messages DING or a hook already owns, so no
//!   notice is pasted twice.
//! * [`status`] is the data model of `belfry ding status`.
//! * [`spend`] reads what a pane's agent spends (tokens, cost) and its usage window from the
//!   files its adapter declares; [`park`] warns near the limit, parks the pane at it and
//!   resumes it once at the reset; [`retry`] retries a turn that failed on an API error with
//!   bounded backoff (issue 44). Both machines are pure: time is passed in, actions come out.
//!
//! # How the engine uses it (rich policy)
//!
//! 1. On every adapter line: [`protocol::EventValidator::validate`]; feed the event (or the
//!    rejection's reason) to [`lease::LeaseMachine::apply`]. A turn-boundary event goes to
//!    [`ownership::OwnershipStore::record_turn_boundary`], a receipt to
//!    [`ownership::OwnershipStore::record_receipt`].
//! 2. When there is a pending message ([`ownership::OwnershipStore::pending`] of
//!    [`inbox::Inbox::list_unread`]): [`lease::LeaseMachine::take_lease`]; on a lease,
//!    [`ownership::OwnershipStore::stage`] the message, then send
//!    [`policy::notice_transaction`] with the lease's [`belfry_proto::Expect`] as `expect`.
//!    A conflict goes back as [`lease::LeaseInput::SendConflict`] and
//!    [`ownership::OwnershipStore::release_unsent`].
//! 3. After archives: [`ownership::OwnershipStore::reconcile`] with the unread list.
//!
//! The aggressive policy is step 2 without the lease: stage, then send without `expect`, unless
//! the agent's [`presence::Presence`] is a fresh `dnd`.
//!
//! Errors are one enum, [`Error`], whose messages name the input and the problem.

#![warn(missing_docs)]

pub mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod hold;
pub mod inbox;
pub mod lease;
pub mod message;
pub mod names;
pub mod notice;
pub mod ownership;
pub mod park;
pub mod policy;
pub mod presence;
pub mod protocol;
pub mod retry;
pub mod spend;
pub mod status;
pub mod watch;

mod durable;

pub use error::{Error, Result};
pub use hold::HoldReason;
pub use inbox::Inbox;
pub use lease::{LeaseConfig, LeaseInput, LeaseMachine, LeaseState, PaneIdentity, ProgramTurn};
pub use message::{FrontMatter, Message, MessageStatus};
pub use names::{MessageName, SessionName};
pub use ownership::{DeliveryState, OwnershipStore};
pub use policy::{DeliveryPolicy, Step};
pub use protocol::{AdapterEvent, EventValidator};
