//! `mux::Error`: the one error type of this crate's public functions.
//!
//! Every public function of `belfry-mux` outside the daemon's request handlers returns this
//! type: the client talking to the daemon ([`crate::client`]), the daemon starting
//! ([`crate::server::run`]), reading `belfry.kdl` ([`crate::declare::load`]) and applying its
//! plan ([`crate::declare::up`], [`crate::declare::down`]), and reading an adapter's `declaration.json`
//! ([`crate::adapters`]). Each variant carries what its message needs, and each message
//! names the thing at fault and, where there is one, the fix; the CLI prints them as they are
//! and maps them to its exit codes.
//!
//! Two kinds of problem stay their own types because they are lists of findings rather than one
//! failure: [`crate::declare::Problem`] (what is wrong with a valid KDL file, carried by
//! [`Error::InvalidDeclaration`]) and [`crate::preflight::LaunchError`] (every agent that cannot
//! be launched, carried by [`Error::Preflight`]). The daemon's calls to its pane hosts keep
//! [`crate::registry::PaneError`], which maps each failure to a wire error code for the reply.

use std::path::PathBuf;

use crate::declare::{Location, Problem};
use crate::preflight::LaunchError;

/// What went wrong in `belfry-mux`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Talking to the daemon (or a pane host) over its socket.
    /// The one client of belfry's sockets failed: unreachable, closed, a bad reply, a
    /// deadline passed, or a server of another uid.
    #[error(transparent)]
    Client(#[from] belfry_transport::client::ClientError),
    /// Another machine could not be reached over ssh, or its belfry did not answer
    /// (spec §6.2).
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// The daemon could not be started on demand.
    #[error("cannot start the belfry daemon ({exe}): {reason}")]
    Start {
        /// The executable run as `belfry server`.
        exe: PathBuf,
        /// Why it did not come up.
        reason: String,
    },
    /// A spawn request the daemon cannot turn into a launch spec (no program, a cwd that is
    /// not a directory, an unknown DING policy, a size out of range).
    #[error("{reason}")]
    InvalidSpawn {
        /// What is wrong, naming the field.
        reason: String,
    },
    /// The daemon answered with an error reply; `message` is its own words.
    #[error("{message}")]
    Refused {
        /// The reply's error code (`not-found`, `invalid`, …).
        code: String,
        /// The reply's message.
        message: String,
    },

    // Starting the daemon.
    /// Another daemon already listens on the socket.
    #[error("another belfry daemon already serves {0}")]
    AlreadyRunning(PathBuf),
    /// Another daemon holds the lock of a directory this one would share.
    #[error(
        "another belfry daemon ({holder}) already uses the {what} {dir} (it holds {lock}); \
         stop it, or give this daemon its own BELFRY_STATE and BELFRY_RUNTIME_DIR"
    )]
    DirInUse {
        /// Which directory (`state directory`, `runtime directory`).
        what: &'static str,
        /// The directory.
        dir: PathBuf,
        /// Its lock file.
        lock: PathBuf,
        /// Who holds the lock, as its record says.
        holder: String,
    },
    /// A runtime path or directory check of `belfry-transport` failed.
    #[error(transparent)]
    Transport(#[from] belfry_transport::Error),
    /// A file or directory the daemon needs could not be made or used.
    #[error("{what} {path}: {source}")]
    Io {
        /// What the path is and what was done to it.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },

    // Reading `belfry.kdl` (spec §11).
    /// The declaration file could not be read (or is not UTF-8).
    #[error("cannot read declarations {}: {source}", file.display())]
    ReadDeclarations {
        /// The file, as named.
        file: PathBuf,
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// The declaration file is not KDL v2.
    #[error("{at}: not valid KDL v2: {message}")]
    KdlSyntax {
        /// Where the first syntax error is.
        at: Location,
        /// The parser's message, with its help if it had one.
        message: String,
    },
    /// The declaration file is KDL but not a valid declaration.
    #[error("{at}: {problem}")]
    InvalidDeclaration {
        /// The node or value at fault.
        at: Location,
        /// What is wrong with it (boxed: it is the largest part of the error).
        problem: Box<Problem>,
    },

    // Applying `belfry up` (spec §11).
    /// Some agents to be launched failed their checks; nothing was launched.
    #[error("{}", preflight_lines(.0))]
    Preflight(Vec<LaunchError>),
    /// The daemon refused to launch (or replace) an agent after the checks passed.
    #[error("{agent}: {source}")]
    Launch {
        /// The agent.
        agent: String,
        /// What the daemon said.
        source: Box<Error>,
        /// The panes this run had launched and tried to stop again (spec §11 all or
        /// nothing), each with the outcome of its kill.
        stopped: Vec<(String, Result<(), Box<Error>>)>,
    },

    /// A request could not be encoded as JSON (a launch spec that does not serialize).
    #[error("cannot encode the {op} request: {reason}")]
    EncodeRequest {
        /// The request's op.
        op: &'static str,
        /// What the encoder said.
        reason: String,
    },

    // Reading an adapter's `declaration.json`.
    /// The adapter declaration could not be read.
    #[error("adapter declaration {}: {source}", path.display())]
    ReadAdapterDeclaration {
        /// The file.
        path: PathBuf,
        /// What the read said.
        source: std::io::Error,
    },
    /// The adapter declaration is not the JSON the daemon reads.
    #[error("adapter declaration {} is invalid: {reason}", path.display())]
    InvalidAdapterDeclaration {
        /// The file.
        path: PathBuf,
        /// What the JSON parser said.
        reason: String,
    },
    /// No adapter of this name exists where the adapters are looked for.
    #[error("no adapter named {name:?} in {place} (adapters there: {})", if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    UnknownAdapter {
        /// The name asked for.
        name: String,
        /// Where the adapters were looked for (a directory, or the built-in table).
        place: String,
        /// The adapters that exist there.
        known: Vec<String>,
    },
    /// A DING adapter program under `$BELFRY_ADAPTERS` while the adapters come only from the
    /// table built into the binary, which holds declarations, not programs.
    #[error("adapter program {program:?} names $BELFRY_ADAPTERS, but no adapters directory was found and a program cannot be built into the binary: set BELFRY_ADAPTERS to the folder holding it")]
    EmbeddedAdapterProgram {
        /// The program as declared.
        program: String,
    },
}

impl Error {
    /// Where in the declaration file the error is, if it is about the file's text.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::KdlSyntax { at, .. } | Error::InvalidDeclaration { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The validation problem, if the declaration file is KDL but not a valid declaration.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::InvalidDeclaration { problem, .. } => Some(problem),
            _ => None,
        }
    }

    /// The daemon's error code, if this is an error reply.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Refused { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// One line per failed check.
fn preflight_lines(errors: &[LaunchError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
