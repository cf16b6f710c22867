//! The exit codes of `belfry`, documented in its man page and README (ripgrep's 0, 1, 2, and
//! ours: 3 for a guarded send that found the pane changed, 4 for a `wait` whose conditions did
//! not hold in time). Every command returns one of these;
//! `cmd::main` maps errors to them.

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the named pane (or thing) does not exist.
pub const EXIT_NOT_FOUND: i32 = 1;
/// Exit code: any other error.
pub const EXIT_ERROR: i32 = 2;
/// Exit code: a guarded send found the pane changed and wrote nothing.
pub const EXIT_CONFLICT: i32 = 3;
/// Exit code: `belfry wait` gave up at its timeout, the conditions not met; apart from 2 so a
/// script tells "not yet" from "wrong".
pub const EXIT_TIMEOUT: i32 = 4;
