//! The part of the command line that reads what belfry does not control and has no state of
//! its own: [`keys`], the keystrokes an attached client reads from its terminal, split into what
//! goes to the pane and the client's own bindings. The `belfry` and `belfry-pane` binaries hold
//! the rest; this library exists so that a fuzz target ([`fuzzing`], feature `fuzzing`) can
//! call the same code the attach client runs.

pub mod bindings;
pub mod keys;

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
