//! Reading a pane: `belfry peek` (its screen, as text, ANSI, cells or JSON) and `belfry wait`
//! (until a condition holds, with what is said when it does not in time).

use std::io::Write;

use anyhow::Result;
use serde_json::{json, Value};

use belfry_proto::program_status::ProgramState;
use belfry_proto::reply::{self as body, Screen, Waited};
use belfry_proto::request as op;
use belfry_proto::{ErrorBody, ErrorCode};
use belfry_transport::paths;

use super::args::WaitArgs;
use super::{ask, print_json, refusal};
use crate::direct;
use crate::exit::{EXIT_OK, EXIT_TIMEOUT};
use crate::remote::{self, Place};

pub(super) fn peek(
    name: &str,
    ansi: bool,
    json: bool,
    scrollback: Option<u64>,
    cells: bool,
) -> Result<i32> {
    let (place, session) = remote::place_of(name)?;
    let snapshot = op::Snapshot {
        session: Some(session.clone()),
        cells: Some(cells),
        ansi: Some(ansi),
        scrollback,
    };
    let screen: Screen = match &place {
        Place::Remote(remote) => ask(&mut remote.daemon()?, snapshot)?,
        Place::Local => {
            paths::private_runtime_dir()?;
            let socket = paths::daemon_socket();
            let runtime = paths::runtime_dir();
            match direct::quick_snapshot(&runtime, &snapshot, &session)? {
                Some(screen) => {
                    if !direct::daemon_runs(&socket) {
                        eprintln!("belfry: {}", direct::no_daemon_note(&socket));
                    }
                    screen
                }
                None => match direct::running_daemon(&socket)? {
                    Some(mut client) => ask(&mut client, snapshot)?,
                    None => {
                        // On stderr, so the screen (or its JSON) on stdout is the same data
                        // either way.
                        eprintln!("belfry: {}", direct::no_daemon_note(&socket));
                        direct::snapshot(&runtime, snapshot, &session)?
                    }
                },
            }
        }
    };
    if json {
        // The snapshot as the pane host gave it, plus the token `belfry send --expect` takes
        // back: this snapshot's identity, whole.
        let mut shown = serde_json::to_value(&screen)?;
        shown["expect"] = Value::String(belfry_proto::expect_token::encode(&screen.identity()));
        print_json(&shown);
        return Ok(EXIT_OK);
    }
    // One write for the whole screen (and its history), not one per line: stdout's own
    // buffer flushes at every newline, which was 2001 system calls for 2000 lines of history.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    for line in screen.scrollback.iter().flatten() {
        writeln!(out, "{line}")?;
    }
    let lines = if ansi {
        screen.ansi.unwrap_or_default()
    } else {
        screen.lines
    };
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// `belfry wait NAME …`: waits for the pane's revision, exit, screen regex, quiet or
/// status, up to the timeout.
pub(super) fn wait(args: WaitArgs) -> Result<i32> {
    let WaitArgs {
        name,
        revision,
        exit,
        regex,
        quiet_ms,
        status,
        timeout_ms,
        json,
    } = args;
    let args_name = name.clone();
    let (place, name) = remote::place_of(&name)?;
    let wait = op::Wait {
        session: Some(name),
        revision,
        exit: exit.then_some(true),
        regex,
        quiet_ms,
        // clap lets only the five words through.
        status: status.as_deref().and_then(ProgramState::parse),
        timeout_ms: Some(timeout_ms),
    };
    let waited: Waited = match place.daemon()?.call(wait)?.into_result() {
        Ok(waited) => waited,
        Err(err) => return wait_failed(&args_name, timeout_ms, json, err),
    };
    if json {
        print_json(&waited.state);
    } else {
        println!("revision {}", waited.state.revision);
    }
    Ok(EXIT_OK)
}

/// What `belfry wait` says when the wait was refused or ran out. Running out is not an error
/// of the command line: a line for a person ("wait timed out … with the conditions not met", the pane's
/// revision and whether its program runs), with `--json` the state as JSON on stdout, and exit
/// [`EXIT_TIMEOUT`]. Any other refusal is an error as usual.
pub(super) fn wait_failed(
    name: &str,
    timeout_ms: u64,
    json_out: bool,
    err: ErrorBody,
) -> Result<i32> {
    // The pane host's timeout reply: "wait timed out after N ms; state {…}".
    let state = (err.code == ErrorCode::Timeout)
        .then(|| err.message.strip_prefix("wait timed out"))
        .flatten()
        .and_then(|rest| rest.split_once("; state "))
        .and_then(|(_, state)| serde_json::from_str::<body::WaitState>(state).ok());
    let Some(state) = state else {
        return Err(refusal(err));
    };
    if json_out {
        print_json(&json!({"result": "timeout", "state": state}));
    }
    let program = match state.exited {
        None => "its program runs".to_string(),
        Some(status) => match (status.code, status.signal) {
            (Some(code), _) => format!("its program exited with code {code}"),
            (None, Some(signal)) => format!("its program was killed by signal {signal}"),
            _ => "its program exited".to_string(),
        },
    };
    eprintln!(
        "belfry: {name}: wait timed out after {timeout_ms} ms (--timeout-ms) with the \
         conditions not met; now at revision {}, {program}",
        state.revision
    );
    Ok(EXIT_TIMEOUT)
}
