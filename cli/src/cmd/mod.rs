//! Subcommands and how their results are printed, one file per command family, as a thin
//! `main` that only parses and dispatches: [`args`] is the grammar, [`hot`] the short parse
//! of the hot subcommands (run many times a minute); [`daemon`] the processes serving this
//! machine; [`new`] and [`attach`] start and join panes; [`pane`] the one-line commands on one
//! pane; [`send`], [`peek`] (and `wait`) and [`events`] write and read a pane; [`ls`] lists
//! panes and starts the live view; [`ding`] is the agent-mail plumbing; [`up`] the
//! declaration files; [`man`] the pages and completions. This file holds `main`, the
//! dispatch, and the helpers they all share (asking the daemon, printing JSON, the not-found
//! error).
//!
//! Every request is a typed op of `belfry_proto` and every reply is read into the body type of
//! that op ([`Client::call`]), so a field the daemon renamed or dropped is an error naming it,
//! never a silent `null`. `--json` output prints those bodies through a JSON value: the same
//! fields in the same (sorted) order as the daemon's own reply.

mod args;
mod attach;
mod daemon;
mod ding;
mod events;
mod hot;
mod ls;
mod man;
mod new;
mod pane;
mod peek;
mod send;
mod up;

pub use args::subcommand_name;
pub(crate) use ls::escape_for_terminal;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use belfry_mux::client::Client;
use belfry_proto::reply as body;
use belfry_proto::{ErrorBody, ErrorCode, Op};
use belfry_transport::paths;

use crate::exit::{EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK};
use crate::remote::{self, Place};
use args::{Cli, Command, DingAction, InboxArgs, PeekArgs, SpoolAction};
use hot::{parse_hot, with_program_tip};

/// Parses arguments, runs the command and returns the exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (cli, matches) = match parse_hot(&args) {
        Some(parsed) => parsed,
        None => {
            let matches = match Cli::command().try_get_matches_from(&args) {
                Ok(matches) => matches,
                Err(err) => with_program_tip(err, &args).exit(),
            };
            match Cli::from_arg_matches(&matches) {
                Ok(cli) => (cli, matches),
                Err(err) => err.exit(),
            }
        }
    };
    match run(cli, &matches) {
        Ok(code) => code,
        Err(err) => {
            if let Some(not_found) = err.downcast_ref::<NotFound>() {
                eprintln!("belfry: {}", not_found.0);
                return EXIT_NOT_FOUND;
            }
            eprintln!("belfry: {}", without_repeats(&err));
            EXIT_ERROR
        }
    }
}

/// An error and its causes, `message: cause: cause`, leaving out a cause whose words the
/// message already carries: many errors end with their source's text (`cannot read
/// declarations belfry.kdl: No such file or directory (os error 2)`), and saying it twice
/// reads as two failures.
fn without_repeats(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// An error that maps to exit code 1.
#[derive(Debug)]
pub(crate) struct NotFound(pub(crate) String);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

pub(crate) fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("cannot find the belfry executable")
}

/// The name of the executable the daemon and the pane hosts run when it is installed beside
/// `belfry`.
const HOST_EXE: &str = "belfry-host";

/// The executable that runs the daemon and the pane hosts: [`HOST_EXE`] beside this one when
/// it is there, else this one. `scripts/install --static` builds `belfry` as a fixed-address executable,
/// which starts each command sooner (no relocations to apply), and `belfry-host` from the same
/// source as a position-independent one, so the long-running processes that read terminal
/// output and socket input keep address-space randomisation (docs/decisions.md).
pub(crate) fn host_exe() -> Result<PathBuf> {
    let exe = exe()?;
    Ok(paths::runnable_beside(&exe, HOST_EXE).unwrap_or(exe))
}

/// Replaces this process with [`HOST_EXE`] beside it, with the same arguments and environment,
/// when there is one; returns when there is not, or when the exec failed (this executable does
/// the same work). For the subcommands that stay up reading terminal output or another
/// machine's bytes, so that they too run position-independent.
pub fn become_host_exe() {
    use std::os::unix::process::CommandExt;
    if let Some(host) = exe()
        .ok()
        .and_then(|exe| paths::runnable_beside(&exe, HOST_EXE))
    {
        // `exec` returns only when it failed.
        let _ = std::process::Command::new(&host)
            .args(std::env::args_os().skip(1))
            .exec();
    }
}

/// Connects to the daemon, starting it if needed. The runtime directory is checked first
/// (created 0700, or refused when another uid owns it or it is open to others, spec §6.1), and
/// the client checks the server's uid on the socket itself.
pub(crate) fn daemon() -> Result<Client> {
    paths::private_runtime_dir()?;
    Ok(belfry_mux::client::connect_or_start(
        &paths::daemon_socket(),
        &host_exe()?,
    )?)
}

/// Sends a typed op and reads its reply body; an error reply becomes an error (not-found →
/// exit 1).
pub(crate) fn ask<T: DeserializeOwned>(client: &mut Client, op: impl Into<Op>) -> Result<T> {
    client.call(op)?.into_result().map_err(refusal)
}

/// Like [`ask`], for a command that prints the whole reply: the body with the reply's `id`
/// and `ok`, as the daemon sent them.
fn ask_whole<T: Serialize + DeserializeOwned>(
    client: &mut Client,
    op: impl Into<Op>,
) -> Result<(Value, T)> {
    let (id, reply) = client.call_numbered(op)?;
    let body = reply.into_result().map_err(refusal)?;
    Ok((body::ok(&Value::from(id), &body), body))
}

/// The error a refused request is: not-found maps to exit 1, anything else to exit 2.
pub(crate) fn refusal(err: ErrorBody) -> anyhow::Error {
    if err.code == ErrorCode::NotFound {
        NotFound(err.message).into()
    } else {
        anyhow!("{}", err.message)
    }
}

/// Prints `value` as pretty JSON. It goes through a JSON value first, so the keys are in the
/// same (sorted) order whatever type holds them.
fn print_json(value: &impl Serialize) {
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    );
}

/// Runs the parsed command: where it goes (`--host`), then the command family's code.
fn run(cli: Cli, matches: &ArgMatches) -> Result<i32> {
    let local_only = cli.command.local_only();
    if let Some(name) = local_only {
        if matches.value_source("host") == Some(clap::parser::ValueSource::CommandLine) {
            bail!("--host does not apply to `belfry {name}`: it works on this machine only");
        }
    }
    crate::remote::init(
        cli.global.host.clone().filter(|_| local_only.is_none()),
        cli.global.ssh_command.as_deref(),
        cli.global.connect_timeout,
    )?;
    match cli.command {
        Command::Proxy { pane } => crate::proxy::run(pane.as_deref()),
        Command::Server => daemon::server(),
        Command::PaneHost {
            runtime,
            daemon_socket,
            state,
        } => daemon::pane_host(runtime, daemon_socket, state),
        Command::New(args) => new::new(args),
        Command::Run(args) => new::run(args),
        Command::Ls {
            watch: true,
            interval_ms,
            ..
        }
        | Command::Top { interval_ms } => ls::live(interval_ms),
        Command::Ls {
            json, all_hosts, ..
        } => ls::ls(json, all_hosts),
        Command::Attach {
            name,
            read_only,
            detach_key,
        } => attach::run(name, read_only, detach_key),
        Command::Detach { name } => pane::detach(&name),
        Command::Kill { name } => pane::kill(&name),
        Command::Restart { name, json } => pane::restart(&name, json),
        Command::Resize { name, size } => pane::resize(&name, &size),
        Command::Clear { name } => pane::clear(&name),
        Command::Send(args) => {
            let sub = matches
                .subcommand_matches("send")
                .ok_or_else(|| anyhow!("no send args"))?;
            send::send(&args, sub)
        }
        Command::Peek(PeekArgs {
            name,
            ansi,
            json,
            scrollback,
            cells,
        }) => peek::peek(&name, ansi, json, scrollback, cells),
        Command::Wait(args) => peek::wait(args),
        Command::Events {
            name,
            json,
            history,
            since,
        } => events::events(name, json, history, since),
        Command::Shutdown { kill_panes } => daemon::shutdown(kill_panes),
        Command::Dispatch(args) => Ok(ding::dispatch(args)),
        Command::Hooks { scope, action } => crate::hooks::run(scope, action),
        Command::Spool {
            action: SpoolAction::Drain { path },
        } => ding::spool_drain(path),
        Command::Inbox(InboxArgs { action }) => match remote::inbox_elsewhere(&action)? {
            Some(code) => Ok(code),
            None => crate::inbox::run(action),
        },
        Command::Presence {
            state,
            session,
            session_flag,
        } => match remote::presence_elsewhere(&state, &session, &session_flag)? {
            Some(code) => Ok(code),
            None => crate::inbox::presence(&state, session, session_flag),
        },
        Command::Ding {
            action: DingAction::Status { session, json },
        } => ding::status(session, json),
        Command::Up {
            file,
            dry_run: true,
            ..
        } => up::up_dry_run(file),
        Command::Up {
            file,
            replace,
            json,
            ..
        } => up::up(file, replace, json),
        Command::Down { file } => up::down(file),
        Command::Doctor(args) => crate::doctor::run(args),
        Command::Logs { name, follow } => match remote::logs_elsewhere(name.as_deref(), follow)? {
            Some(code) => Ok(code),
            None => crate::logs::run(name.as_deref(), follow),
        },
        Command::Completions { shell } => man::completions(shell),
        Command::CompletePanes { words } => {
            Ok(crate::completions::complete_panes(Cli::command(), &words))
        }
        Command::Man { dir: None } => man::page(),
        Command::Man { dir: Some(dir) } => man::man_pages(&dir),
    }
}

/// Asks `op` of the daemon at `place` and prints one line describing its answer.
fn simple<T: DeserializeOwned>(
    place: &Place,
    op: impl Into<Op>,
    describe: impl Fn(T) -> String,
) -> Result<i32> {
    let answer: T = ask(&mut place.daemon()?, op)?;
    println!("{}", describe(answer));
    Ok(EXIT_OK)
}
