//! `belfry attach` and the attach of `belfry run`: finding the pane's socket (here or through
//! ssh) and the panes the chooser offers, then handing over to the attach client
//! (`crate::attach`).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};

use belfry_proto::reply::{AttachTarget, Listing, PaneRecord};
use belfry_proto::request as op;
use belfry_proto::SessionName;
use belfry_transport::paths;

use super::{ask, daemon};
use crate::attach::{self, DetachKey, Endpoint};
use crate::direct;
use crate::remote::{self, Place};

/// `belfry attach [NAME]`: attaches to the pane, or with no name to one the user picks.
pub(super) fn run(
    name: Option<String>,
    read_only: bool,
    detach_key: Option<String>,
) -> Result<i32> {
    match name {
        Some(name) => {
            let detach_key = attach::config::detach_key_spec(detach_key.as_deref())?;
            attach_cmd(&name, read_only, DetachKey::parse(&detach_key)?)
        }
        None => attach_unnamed(
            read_only,
            &attach::config::detach_key_spec(detach_key.as_deref())?,
        ),
    }
}

pub(super) fn attach_cmd(name: &str, read_only: bool, key: DetachKey) -> Result<i32> {
    let socket = attach_socket(name)?;
    let (place, _) = remote::place_of(name)?;
    attach::run(
        Some((&socket, name)),
        read_only,
        key,
        &AttachPanes { place },
        None,
    )
}

/// `belfry attach` with no name: the only pane (of the `--host` machine, else this one) that
/// can be attached from here, leaving out the pane this terminal is and any that already
/// shows it. Several, on a terminal: the pane chooser first. None, or several with no
/// terminal: an error saying what there is and what to do.
pub(super) fn attach_unnamed(read_only: bool, detach_key: &str) -> Result<i32> {
    let key = DetachKey::parse(detach_key)?;
    let place = remote::default_place()?;
    let local = place.remote().is_none();
    let panes = AttachPanes { place };
    // The names only: the chooser's unread counts would read every pane's inbox.
    let names: Vec<String> = panes
        .listing()?
        .into_iter()
        .map(|pane| pane.session)
        .filter(|name| !local || attach::refuse_cycle(name).is_ok())
        .collect();
    match names.as_slice() {
        [] => bail!("no pane to attach to; `belfry run NAME -- CMD` starts one and attaches to it"),
        [one] => attach_cmd(one, read_only, key),
        _ if rustix::termios::isatty(std::io::stdin()) => {
            attach::run(None, read_only, key, &panes, None)
        }
        several => bail!(
            "{} panes to attach to ({}): name one, `belfry attach NAME`",
            several.len(),
            several.join(", ")
        ),
    }
}

/// The pane host to attach to for `name` (an address: `NAME` or `HOST:NAME`), refusing a
/// pane that would show itself. Attach talks to the pane host directly, so a human stays
/// attached while the daemon restarts (spec §6.0). The daemon is asked only when the socket is
/// not where expected. A remote pane's host is reached through `belfry proxy --pane` there,
/// which does the same on its machine.
pub(super) fn attach_socket(name: &str) -> Result<Endpoint> {
    let (place, session) = remote::place_of(name)?;
    if let Place::Remote(remote) = place {
        return Ok(Endpoint::Remote(remote, session));
    }
    let name = session.as_str();
    attach::refuse_cycle(name)?;
    let socket = paths::pane_socket(&paths::private_runtime_dir()?, name);
    if socket.exists() {
        return Ok(Endpoint::Socket(socket));
    }
    let attach = op::Attach {
        session: Some(session),
        ..op::Attach::default()
    };
    let target: AttachTarget = ask(&mut daemon()?, attach)?;
    Ok(Endpoint::Socket(PathBuf::from(target.socket)))
}

/// The panes an attached client can move to: the daemon's listing, or the pane hosts asked
/// directly when no daemon runs (moving between panes never starts one). For a remote pane,
/// the panes of its machine.
pub(super) struct AttachPanes {
    pub(super) place: Place,
}

impl AttachPanes {
    /// Every pane of the place, in name order: the daemon's listing, or the pane hosts asked
    /// directly when no daemon runs here.
    fn listing(&self) -> Result<Vec<PaneRecord>> {
        let socket = paths::daemon_socket();
        let mut panes = match self.place.remote() {
            Some(remote) => ask::<Listing>(&mut remote.daemon()?, op::List {})?.panes,
            None => match direct::running_daemon(&socket)? {
                Some(mut client) => ask::<Listing>(&mut client, op::List {})?.panes,
                None => direct::list(&paths::runtime_dir()),
            },
        };
        panes.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(panes)
    }
}

impl attach::Panes for AttachPanes {
    fn list(&self) -> Result<Vec<attach::PaneEntry>> {
        let remote = self.place.remote();
        let panes = self.listing()?;
        let state = paths::state_dir();
        Ok(panes
            .into_iter()
            .map(|pane| {
                // Another machine's inboxes are its files: not counted from here.
                let unread = match remote {
                    Some(_) => 0,
                    None => belfry_ding::Inbox::open_existing(&state, &pane.session)
                        .and_then(|inbox| inbox.list_unread())
                        .map(|unread| unread.len())
                        .unwrap_or(0),
                };
                attach::PaneEntry {
                    detail: chooser_detail(&pane, unread),
                    revision: pane.revision,
                    active: false,
                    name: pane.session,
                }
            })
            .collect())
    }

    fn status_words(&self, name: &str) -> Result<String> {
        let panes = self.listing()?;
        let Some(pane) = panes.into_iter().find(|pane| pane.session == name) else {
            return Ok(String::new());
        };
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        // The program's state as `belfry ls` says it, else whether it runs.
        let mut words = match (&pane.program_status, pane.exited.flatten()) {
            (Some(record), _) => crate::human::status_words(record, now_ms),
            (None, Some(_)) => "exited".to_string(),
            (None, None) => "running".to_string(),
        };
        if self.place.remote().is_none() {
            let unread = belfry_ding::Inbox::open_existing(&paths::state_dir(), name)
                .and_then(|inbox| inbox.list_unread())
                .map(|unread| unread.len())
                .unwrap_or(0);
            if unread > 0 {
                words.push_str(&format!(", {unread} unread"));
            }
        }
        Ok(words)
    }

    fn socket(&self, name: &str) -> Result<Endpoint> {
        match self.place.remote() {
            Some(remote) => Ok(Endpoint::Remote(
                Box::new(remote.clone()),
                SessionName::parse(name)?,
            )),
            None => attach_socket(name),
        }
    }
}

/// A local pane's working directory: `--cwd`, else this one, with its links resolved as
/// `belfry.kdl` resolves an agent's.
pub(super) fn local_cwd(cwd: Option<&std::path::Path>) -> Result<String> {
    let cwd = match cwd {
        Some(cwd) => cwd.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = std::fs::canonicalize(&cwd)
        .with_context(|| format!("--cwd {}: no such directory", cwd.display()))?;
    Ok(cwd
        .to_str()
        .ok_or_else(|| anyhow!("--cwd {}: the path is not UTF-8", cwd.display()))?
        .to_string())
}

/// A pane's line in the chooser after its name: its state, revision and unread mail.
pub(super) fn chooser_detail(pane: &PaneRecord, unread: usize) -> String {
    let state = match (&pane.state, &pane.exited) {
        (Some(state), _) => state.clone(),
        (None, Some(Some(status))) => match (status.code, status.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            _ => "exited".to_string(),
        },
        (None, _) => "running".to_string(),
    };
    let mut detail = state;
    if let Some(revision) = pane.revision {
        detail.push_str(&format!(", revision {revision}"));
    }
    if unread > 0 {
        detail.push_str(&format!(", {unread} unread"));
    }
    detail
}
