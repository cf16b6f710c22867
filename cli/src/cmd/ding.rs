//! The agent-mail plumbing commands: `belfry dispatch` (a harness hook's entry point),
//! `belfry spool drain` and `belfry ding status`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, Result};

use belfry_proto::reply::DingState;
use belfry_proto::request as op;
use belfry_transport::paths;

use super::args::DispatchArgs;
use super::{ask, print_json, NotFound};
use crate::direct;
use crate::exit::EXIT_OK;
use crate::remote::{self, Place};

/// `belfry dispatch`: fail-open by construction; whatever happens, one answer and exit 0
/// (or the native dialect's exit code).
pub(super) fn dispatch(args: DispatchArgs) -> i32 {
    let options = belfry_hooks::DispatchOptions {
        event: args.event,
        hooks_file: args.hooks_file,
        spool: args.spool,
        spool_path: None,
        native: args.native,
        dialects_dir: args.dialects,
        extra_context: Vec::new(),
        // The call log is named by $BELFRY_DISPATCH_LOG only: a projected entry's command
        // must stay byte-stable, so no flag could be added to it.
        call_log: None,
    };
    // spec §7.5: the turn-boundary notices become hook-owned only if this write succeeds, so
    // the answer is written (and flushed) inside the run, which learns whether it was.
    let mut deliver = |output: &belfry_hooks::DispatchOutput| -> std::io::Result<()> {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&output.stdout)?;
        stdout.flush()?;
        let _ = std::io::stderr().write_all(&output.stderr);
        Ok(())
    };
    let output = belfry_hooks::run_hook(options, args.turn_boundary, &mut deliver);
    output.exit_code
}

/// `belfry spool drain`: prints and empties the hook spool at `path`, or at the hook
/// context's spool.
pub(super) fn spool_drain(path: Option<PathBuf>) -> Result<i32> {
    let path = match path {
        Some(path) => path,
        None => std::env::var_os(belfry_hooks::HOOK_CONTEXT_ENV)
            .map(PathBuf::from)
            .ok_or_else(|| {
                anyhow!(
                    "no spool: give --path or set {}",
                    belfry_hooks::HOOK_CONTEXT_ENV
                )
            })?,
    };
    print!("{}", belfry_hooks::spool_drain(&path)?);
    Ok(EXIT_OK)
}

/// `belfry ding status`: the daemon's DING state of one pane, for a person or as JSON.
pub(super) fn status(session: Option<String>, json: bool) -> Result<i32> {
    let (place, name) = remote::place_of(&crate::inbox::one_session(session, None)?)?;
    let socket = paths::daemon_socket();
    // DING state (policy, adapter, lease, holds) lives in the daemon alone, so with no
    // daemon there is nothing to show, and a read-only command does not start one
    // here (over ssh the far side's proxy bridges to its daemon, started on demand).
    let running = match &place {
        Place::Remote(remote) => Some(remote.daemon()?),
        Place::Local => {
            paths::private_runtime_dir()?;
            direct::running_daemon(&socket)?
        }
    };
    let Some(mut client) = running else {
        return Err(NotFound(format!(
            "no daemon running at {}: DING status is kept by the daemon, and \
             `belfry ding status` does not start one (`belfry inbox ls {name}` lists \
             the mail without it)",
            socket.display()
        ))
        .into());
    };
    let mut state: DingState = ask(&mut client, op::DingStatus::of(name.clone()))?;
    if matches!(place, Place::Local) {
        crate::doctor::explain_ding_status(name.as_str(), &mut state.status);
    }
    if json {
        print_json(&state.status);
    } else {
        for line in crate::human::ding_status_lines(&state, crate::human::now_unix_ms()) {
            println!("{line}");
        }
    }
    Ok(EXIT_OK)
}
