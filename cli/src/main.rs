//! The `belfry` binary: argument parsing and output formatting. Everything it does lives in
//! the library crates (`belfry-pty`, `belfry-mux`, `belfry-ding`, `belfry-hooks`).
//!
//! Exit codes: 0 ok, 1 not found, 2 error, 3 guarded-send conflict.

mod attach;
mod commands;

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = commands::main();
    ExitCode::from(code.clamp(0, 255) as u8)
}
