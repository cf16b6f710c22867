//! The engine's errors: a grammar that cannot be read, a screen that is not a snapshot, a
//! provider no grammar exists for, and the adapter's talk with the daemon.

/// What went wrong, naming the input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A grammar file that does not parse or compile; `origin` is `path[:line:col]`.
    #[error("screen grammar {origin}: {reason}")]
    Grammar {
        /// Where the grammar came from.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No grammar for the provider.
    #[error("no screen grammar named {name:?}; there are: {known}")]
    UnknownProvider {
        /// The name asked for.
        name: String,
        /// The names there are, comma-separated.
        known: String,
    },
    /// A snapshot that is not what `belfry peek --json` gives.
    #[error("not a pane snapshot: {reason}")]
    Screen {
        /// What is wrong with it.
        reason: String,
    },
    /// The daemon could not be reached or answered badly.
    #[error("daemon: {reason}")]
    Daemon {
        /// What happened.
        reason: String,
    },
}

/// The engine's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
