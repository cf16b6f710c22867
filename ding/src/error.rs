//! The crate's one error type.
//!
//! Every variant names what failed and on which input, so the binary can show it as is (spec §12:
//! a clear error naming the input and the problem).

use std::io;
use std::path::PathBuf;

use crate::hold::HoldReason;

/// Everything that can go wrong in `belfry-ding`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A session name outside `[A-Za-z0-9._-]{1,64}`, or `.`/`..`.
    #[error(
        "session name {name:?} is invalid: use 1 to 64 characters of [A-Za-z0-9._-], \
         and not \".\" or \"..\""
    )]
    InvalidSessionName {
        /// The rejected name, as given.
        name: String,
    },

    /// A message name outside the `<unix-ms>-<rand6>.md` grammar.
    #[error("inbox name {name:?} is not a message file name (<unix-ms>-<rand6>.md)")]
    InvalidMessageName {
        /// The rejected name, as given.
        name: String,
    },

    /// A well-formed message name that is neither unread nor archived.
    #[error("inbox {session:?} has no message {name:?} (neither unread nor archived)")]
    MessageNotFound {
        /// The inbox's session.
        session: String,
        /// The message that was asked for.
        name: String,
    },

    /// A message larger than [`crate::inbox::MAX_MESSAGE_BYTES`].
    #[error("message {name:?} in inbox {session:?} is larger than the limit of {limit} bytes")]
    MessageTooLarge {
        /// The inbox's session.
        session: String,
        /// The message (or `"(new message)"` when posting).
        name: String,
        /// The limit in bytes.
        limit: u64,
    },

    /// Every attempt to pick an unused message name collided.
    #[error(
        "could not pick an unused message name in inbox {session:?} after {attempts} attempts"
    )]
    NameExhausted {
        /// The inbox's session.
        session: String,
        /// How many names were tried.
        attempts: u32,
    },

    /// The operating system's random source failed.
    #[error("the system random source failed: {reason}")]
    Random {
        /// What the random source reported.
        reason: String,
    },

    /// A path in the state directory that belfry will not use: a symbolic link, another
    /// user's directory, a file where a directory belongs, a hard-linked message file.
    #[error("refusing {path}: {reason}")]
    RefusedPath {
        /// The refused path.
        path: PathBuf,
        /// Why, as a clause ("it is a symbolic link, …").
        reason: String,
    },

    /// An inbox that does not exist, asked for by a command that only reads or moves messages.
    #[error(
        "inbox {session:?} does not exist ({path}): nothing has been posted to it yet; \
         nothing was created"
    )]
    NoInbox {
        /// The session asked for.
        session: String,
        /// The inbox directory that is missing.
        path: PathBuf,
    },

    /// A filesystem operation failed.
    #[error("failed to {action} {path}: {source}")]
    Io {
        /// What was being done, as a verb phrase ("create directory").
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// An adapter event line that fails protocol v1 validation (spec §7.4).
    #[error("adapter event held as {reason}: {detail} (line: {line:?})")]
    AdapterEvent {
        /// The offending line, cut to a bounded excerpt.
        line: String,
        /// The hold reason the line maps to.
        reason: HoldReason,
        /// What exactly is wrong with it.
        detail: String,
    },

    /// A `delivery` token that is not a known policy (spec §7.4).
    #[error(
        "unknown DING delivery policy {token:?}: the policy tokens are \"aggressive\" and \
         \"turn-boundary+fresh-idle\""
    )]
    UnknownDeliveryPolicy {
        /// The rejected token.
        token: String,
    },

    /// An adapter command with a policy that runs no adapter (it would be silently ignored).
    #[error(
        "DING delivery {token:?} runs no adapter: remove the adapter command, or use \
         delivery \"turn-boundary+fresh-idle\""
    )]
    AdapterWithoutRichPolicy {
        /// The policy token that runs no adapter.
        token: String,
    },

    /// The rich policy without an adapter command (spec §7.4).
    #[error(
        "DING delivery {token:?} needs a non-empty adapter command: \
         add `adapter {{ command \"PATH\" }}` to the ding block"
    )]
    MissingAdapterCommand {
        /// The policy token that needs the command.
        token: String,
    },

    /// A DING ownership state file that cannot be understood.
    #[error(
        "DING ownership state {path} is unreadable: {reason}; move it aside to start over \
         (no message is lost: the inbox is the authority)"
    )]
    CorruptOwnershipState {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A presence file that cannot be understood.
    #[error("presence file {path} is unreadable: {reason}; set presence again to replace it")]
    CorruptPresence {
        /// The presence file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// An adapter's `spend` or `quota` section that cannot be understood.
    #[error("the {section} section of adapter {adapter:?}'s declaration is invalid: {problem}")]
    MeterDeclaration {
        /// The adapter whose declaration it is.
        adapter: String,
        /// `spend` or `quota`.
        section: &'static str,
        /// What is wrong with it.
        problem: String,
    },

    /// A harness's usage file (a transcript, a session file, a saved status line) that cannot
    /// be read as its adapter declares it.
    #[error("usage file {path}{}: {problem}", line.map(|line| format!(" line {line}")).unwrap_or_default())]
    MeterFile {
        /// The file.
        path: PathBuf,
        /// The 1-based line of a JSONL file, when one line is at fault.
        line: Option<u64>,
        /// What is wrong with it.
        problem: String,
    },

    /// A presence word other than `busy`, `available` or `dnd`.
    #[error("presence {value:?} is not busy, available or dnd")]
    InvalidPresence {
        /// The rejected word.
        value: String,
    },
}

impl Error {
    /// The hold reason carried by an [`Error::AdapterEvent`], `None` for every other variant.
    pub fn hold_reason(&self) -> Option<HoldReason> {
        match self {
            Error::AdapterEvent { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// A session name the protocol's validator refused, as DING names it: DING's messages have
/// always said "session name … is invalid", and its callers match on the variant.
impl From<belfry_proto::name::InvalidName> for Error {
    fn from(err: belfry_proto::name::InvalidName) -> Self {
        Error::InvalidSessionName { name: err.name }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
