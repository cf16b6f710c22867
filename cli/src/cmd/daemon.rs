//! The processes that serve this machine: `belfry server` (the daemon), `belfry pane-host`
//! (one pane's host), and `belfry shutdown`, which stops the daemon and can end the panes
//! without it.

use std::path::PathBuf;

use anyhow::{anyhow, Result};

use belfry_mux::client::{Client, ClientError};
use belfry_proto::reply as body;
use belfry_proto::request as op;
use belfry_proto::SessionName;
use belfry_transport::paths;

use super::ls::escape_for_terminal;
use super::{ask, host_exe, without_repeats};
use crate::direct;
use crate::exit::{EXIT_ERROR, EXIT_OK};
use crate::remote::{self, Place};

/// `belfry server`: the control-plane daemon, in the foreground.
pub(super) fn server() -> Result<i32> {
    crate::logging::init_logging("daemon.log");
    let config = belfry_mux::server::DaemonConfig {
        runtime: paths::runtime_dir(),
        socket: paths::daemon_socket(),
        state_dir: paths::state_dir(),
        exe: host_exe()?,
        log_dir: paths::log_dir(),
    };
    belfry_mux::server::run(config)?;
    Ok(EXIT_OK)
}

/// `belfry pane-host`: one pane's host process, started by the daemon.
pub(super) fn pane_host(runtime: PathBuf, daemon_socket: PathBuf, state: PathBuf) -> Result<i32> {
    crate::pane_host::serve(runtime, daemon_socket, state).map_err(|err| anyhow!(err))?;
    Ok(EXIT_OK)
}

/// `belfry shutdown [--kill-panes]`: stops the daemon (and with `--kill-panes` the panes, even
/// with no daemon running).
pub(super) fn shutdown(kill_panes: bool) -> Result<i32> {
    let socket = paths::daemon_socket();
    let place = remote::default_place()?;
    let mut client = match &place {
        // Over ssh the far side's proxy starts a daemon to bridge to, and this stops it.
        Place::Remote(remote) => remote.daemon()?,
        Place::Local => match Client::connect(&socket) {
            Ok(client) => client,
            Err(ClientError::Connect { .. }) if kill_panes => {
                return kill_panes_without_daemon(&socket);
            }
            Err(ClientError::Connect { .. }) => {
                println!("no daemon running at {}", socket.display());
                return Ok(EXIT_OK);
            }
            Err(err) => return Err(err.into()),
        },
    };
    let shutdown = op::Shutdown {
        kill_panes: Some(kill_panes),
    };
    let stopped: body::Shutdown = ask(&mut client, shutdown)?;
    if stopped.killed.is_empty() {
        println!("daemon stopped; the panes keep running");
    } else {
        println!("daemon stopped; ended panes: {}", stopped.killed.join(", "));
    }
    Ok(EXIT_OK)
}

/// `belfry shutdown --kill-panes` with no daemon running: the panes still run (each pane host
/// outlives the daemon), so each is ended through its own pane host, as the daemon would have
/// ended it. A pane host that does not answer is named, with what to do, and the exit is 2.
pub(super) fn kill_panes_without_daemon(socket: &std::path::Path) -> Result<i32> {
    let runtime = paths::runtime_dir();
    let mut ended = Vec::new();
    let mut left = Vec::new();
    for pane in direct::list(&runtime) {
        if let Some(error) = &pane.error {
            left.push(format!("{}: {}", pane.session, escape_for_terminal(error)));
            continue;
        }
        let Ok(name) = SessionName::parse(&pane.session) else {
            continue;
        };
        match direct::kill(&runtime, &name) {
            Ok(true) => ended.push(pane.session.clone()),
            Ok(false) => left.push(format!("{}: its pane host did not answer", pane.session)),
            Err(err) => left.push(format!("{}: {}", pane.session, without_repeats(&err))),
        }
    }
    // A pane host answers its kill before it is gone: the command returns once each ended
    // one has taken its socket away (within a bound), so a `belfry ls` right after lists none.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ended
        .iter()
        .any(|name| paths::pane_socket(&runtime, name).exists())
        && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if ended.is_empty() && left.is_empty() {
        println!("no daemon running at {}; no panes", socket.display());
    } else if !ended.is_empty() {
        println!(
            "no daemon running at {}; ended panes through their pane hosts: {}",
            socket.display(),
            ended.join(", ")
        );
    }
    for line in &left {
        eprintln!("belfry: not ended: {line} (`belfry ls` shows it; `belfry kill NAME` retries)");
    }
    Ok(if left.is_empty() { EXIT_OK } else { EXIT_ERROR })
}
