//! The error of belfry's process and socket plumbing, shared by the pane host (`belfry-pty`),
//! which re-exports it as its own.

use std::path::PathBuf;

/// What can go wrong in a pane host or while talking to one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    InvalidSessionName(#[from] belfry_proto::name::InvalidName),
    #[error("invalid input: {reason}")]
    InvalidInput { reason: String },
    #[error("cannot spawn {argv:?}: {source}")]
    Spawn {
        argv: Vec<String>,
        source: std::io::Error,
    },
    #[error("{what} {path}: {source}")]
    Path {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("directory {path} is not safe to use: {reason}")]
    UnsafeDir { path: PathBuf, reason: String },
    #[error(
        "refusing to talk to {path}: the process serving it runs as uid {uid}, not as uid {ours} \
         or root (another user may have planted it)"
    )]
    UntrustedServer { path: PathBuf, uid: u32, ours: u32 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Builds an `InvalidInput` from anything printable.
    pub fn invalid(reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
