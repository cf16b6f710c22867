//! The pane crate's error type: the one of the process and socket plumbing it is built on
//! (`belfry_transport::Error`), so a path, a spawn or an untrusted server reads the same from
//! the pane host, the daemon and the CLI.

pub use belfry_transport::error::{Error, Result};
