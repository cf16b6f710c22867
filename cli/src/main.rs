//! The `belfry` binary: argument parsing and output formatting. Everything it does lives in
//! the library crates (`belfry-pty`, `belfry-mux`, `belfry-ding`, `belfry-hooks`): `belfry up`
//! and `down` call `belfry_mux::declare`, `belfry dispatch` calls `belfry_hooks::run_hook`, `belfry hooks` calls `belfry_hooks::project`.
//!
//! `cmd` parses the arguments and runs each command, one file per command family; `attach` is the interactive attach
//! loop; `inbox` is `belfry inbox …` and `belfry presence`; `logs` is
//! `belfry logs`; `direct` answers `ls` and `peek` from the pane hosts when no daemon runs;
//! `remote` says where a command goes (`--host`, `box:worker`) and `proxy` is the far end
//! of that, `belfry proxy`, bridging stdio to this machine's sockets;
//! `doctor` is `belfry doctor`, what is missing for each pane;
//! `top` is the live view of `belfry top` and `ls --watch`; `human` says times and durations
//! the way a person reads them; [`exit`] holds the exit codes: 0 ok, 1 not found, 2 error,
//! 3 guarded-send conflict, 4 wait timed out.

mod attach;
mod charter_brief;
mod cmd;
mod completions;
mod direct;
mod doctor;
mod exit;
mod harness_version;
mod hook_programs;
mod hooks;
mod human;
mod inbox;
mod logging;
mod logs;
mod pane_host;
mod proxy;
mod remote;
mod top;

use std::process::ExitCode;

/// The subcommands that stay up reading terminal output (a pane's, or a pane's through an
/// attached client) or another machine's bytes for as long as they run. They run as
/// `belfry-host` when the install put it beside `belfry`: the same source built
/// position-independent, so address-space randomisation holds for them, while the short
/// commands run the fixed-address `belfry`, which starts sooner (docs/decisions.md).
const LONG_RUNNING: [&str; 6] = ["server", "pane-host", "attach", "run", "proxy", "top"];

fn main() -> ExitCode {
    let first = cmd::subcommand_name(std::env::args().skip(1));
    if LONG_RUNNING.contains(&first.as_str()) {
        cmd::become_host_exe();
    }
    if !matches!(
        first.as_str(),
        "server" | "pane-host" | "attach" | "run" | "dispatch" | "proxy"
    ) {
        // Printing commands die quietly when their reader goes away (`belfry ls | head`), as
        // other Unix tools do. Long-running processes keep Rust's default (EPIPE as an error).
        // SAFETY: signal(2) with SIG_DFL at start-up, before any thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let code = cmd::main();
    ExitCode::from(code.clamp(0, 255) as u8)
}
