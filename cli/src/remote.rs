//! Where a command goes: this machine, or another one through `ssh … belfry proxy`
//! (spec §6.2).
//!
//! `--host [user@]box[:port]` (or `BELFRY_HOST`) sends every command to that machine;
//! `box:worker` wherever a pane name is accepted sends that one command to `box`, whatever
//! `--host` says. A host is a `hosts` alias of the user's config
//! (`$XDG_CONFIG_HOME/belfry/config.kdl`, see [`belfry_mux::remote::HostsConfig`]) or an ssh
//! destination itself. A pane name never holds a colon, so no name that works today changes
//! meaning. The resolution happens here once per command; the transport is
//! [`belfry_mux::remote`].

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use belfry_mux::client::Client;
use belfry_mux::remote::{self, Far, Host, HostsConfig, Ssh};
use belfry_proto::SessionName;

/// Another machine: how to reach it, and what the user called it.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The ssh destination.
    pub host: Host,
    /// How ssh is run.
    pub ssh: Ssh,
    /// The alias or host as the user wrote it, for messages and `ls --all-hosts`.
    pub label: String,
}

impl Remote {
    /// A client of the daemon there (started there on demand by `belfry proxy`).
    pub fn daemon(&self) -> Result<Client> {
        Ok(remote::connect(&self.host, &self.ssh, &Far::Daemon)?)
    }

    /// A client of the pane host of `session` there.
    pub fn pane(&self, session: &SessionName) -> Result<Client> {
        Ok(remote::connect(
            &self.host,
            &self.ssh,
            &Far::Pane(session.clone()),
        )?)
    }

    /// Runs `belfry ARGS` there with this terminal's stdio (or `input` on its stdin).
    pub fn exec(&self, args: &[&str], input: Option<&[u8]>) -> Result<i32> {
        Ok(remote::exec(&self.host, &self.ssh, args, input)?)
    }
}

/// Where one command goes.
#[derive(Debug, Clone)]
pub enum Place {
    /// This machine's daemon and pane hosts.
    Local,
    /// Another machine's.
    Remote(Box<Remote>),
}

impl Place {
    /// A client of the daemon: this machine's (started on demand), or the remote one.
    pub fn daemon(&self) -> Result<Client> {
        match self {
            Place::Local => crate::cmd::daemon(),
            Place::Remote(remote) => remote.daemon(),
        }
    }

    /// The remote machine, if this is one.
    pub fn remote(&self) -> Option<&Remote> {
        match self {
            Place::Local => None,
            Place::Remote(remote) => Some(remote),
        }
    }
}

/// The global options, read once per command.
struct Settings {
    /// `--host` or `BELFRY_HOST`.
    host: Option<String>,
    ssh: Ssh,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Records the global options. `host` is `--host` (or `BELFRY_HOST`).
pub fn init(
    host: Option<String>,
    ssh_command: Option<&str>,
    connect_timeout_s: Option<f64>,
) -> Result<()> {
    let mut ssh = Ssh::default();
    if let Some(command) = ssh_command {
        ssh.argv = Ssh::parse_command(command)?;
    }
    if let Some(secs) = connect_timeout_s {
        if !(secs.is_finite() && (0.1..=600.0).contains(&secs)) {
            bail!("--connect-timeout {secs} is not 0.1..=600 seconds");
        }
        ssh.connect_timeout = Duration::from_secs_f64(secs);
    }
    let host = host.filter(|host| !host.is_empty());
    let _ = SETTINGS.set(Settings { host, ssh });
    Ok(())
}

fn settings() -> &'static Settings {
    SETTINGS.get_or_init(|| Settings {
        host: None,
        ssh: Ssh::default(),
    })
}

/// The place `--host` names, or this machine.
pub fn default_place() -> Result<Place> {
    match &settings().host {
        None => Ok(Place::Local),
        Some(given) => host_place(given),
    }
}

/// The place a host (an alias or `[user@]box[:port]`) names.
pub fn host_place(given: &str) -> Result<Place> {
    let config = HostsConfig::load()?;
    let host = config.resolve(given)?;
    Ok(Place::Remote(Box::new(Remote {
        host,
        ssh: settings().ssh.clone(),
        label: given.to_owned(),
    })))
}

/// A pane address: `NAME` (on the `--host` machine, else this one) or `HOST:NAME`. The host
/// part is everything before the last colon, so `me@box:2222:worker` works too.
pub fn place_of(address: &str) -> Result<(Place, SessionName)> {
    match address.rsplit_once(':') {
        None => Ok((default_place()?, SessionName::parse(address)?)),
        Some((host, name)) => {
            if host.is_empty() {
                bail!("pane address {address:?} has an empty host before ':' (HOST:NAME)");
            }
            let session = SessionName::parse(name)
                .map_err(|err| anyhow!("pane address {address:?}: {err}"))?;
            Ok((host_place(host)?, session))
        }
    }
}

/// Every host of the user's config, in file order.
pub fn configured_hosts() -> Result<Vec<Remote>> {
    let config = HostsConfig::load()?;
    Ok(config
        .hosts
        .into_iter()
        .map(|(alias, host)| Remote {
            host,
            ssh: settings().ssh.clone(),
            label: alias,
        })
        .collect())
}

/// The place and pane of an optional address (`None`: the `--host` machine, no pane).
fn place_of_optional(address: Option<&str>) -> Result<(Place, Option<String>)> {
    match address {
        Some(address) if address.contains(':') => {
            let (place, session) = place_of(address)?;
            Ok((place, Some(session.as_str().to_owned())))
        }
        Some(address) => Ok((default_place()?, Some(address.to_owned()))),
        None => Ok((default_place()?, None)),
    }
}

/// Pushes `--flag value` when there is a value.
fn push_option(args: &mut Vec<String>, flag: &str, value: &Option<String>) {
    if let Some(value) = value {
        args.push(flag.to_owned());
        args.push(value.clone());
    }
}

/// `belfry inbox …` for a pane of another machine: its inbox is that machine's files
/// (spec §7.1), so belfry there does the command (and nudges its own daemon), run over ssh.
/// A message body is read here (a FILE is this machine's) and handed over on stdin. `None`
/// when the command is for this machine.
pub fn inbox_elsewhere(command: &crate::inbox::InboxCommand) -> Result<Option<i32>> {
    use crate::inbox::InboxCommand;
    let mut args: Vec<String> = vec!["inbox".into()];
    let (place, input) = match command {
        InboxCommand::Post {
            session,
            from,
            subject,
            file,
            json,
            create,
        } => {
            let (place, session) = place_of_optional(Some(session))?;
            if place.remote().is_none() {
                return Ok(None);
            }
            let body = match file.as_deref() {
                Some(path) if path.as_os_str() != "-" => std::fs::read(path)
                    .map_err(|err| anyhow!("cannot read message file {}: {err}", path.display()))?,
                _ => {
                    let mut body = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut body)
                        .map_err(|err| anyhow!("cannot read the message from stdin: {err}"))?;
                    body
                }
            };
            args.push("post".into());
            args.extend(session);
            push_option(&mut args, "--from", from);
            push_option(&mut args, "--subject", subject);
            if *json {
                args.push("--json".into());
            }
            // The far machine knows its own panes: it judges the name, and `--create` with it.
            if *create {
                args.push("--create".into());
            }
            args.push("-".into());
            (place, Some(body))
        }
        InboxCommand::Ls { session, json } => {
            let (place, session) = place_of_optional(session.as_deref())?;
            args.push("ls".into());
            args.extend(session);
            if *json {
                args.push("--json".into());
            }
            (place, None)
        }
        InboxCommand::Read {
            first,
            second,
            session_flag,
            json,
            raw,
        } => {
            let (place, first, session_flag) = split_pair(first, session_flag)?;
            args.push("read".into());
            args.extend(first);
            args.extend(second.clone());
            push_option(&mut args, "--session", &session_flag);
            if *json {
                args.push("--json".into());
            }
            if *raw {
                args.push("--raw".into());
            }
            (place, None)
        }
        InboxCommand::Archive {
            first,
            second,
            session_flag,
        } => {
            let (place, first, session_flag) = split_pair(&Some(first.clone()), session_flag)?;
            args.push("archive".into());
            args.extend(first);
            args.extend(second.clone());
            push_option(&mut args, "--session", &session_flag);
            (place, None)
        }
    };
    let Some(remote) = place.remote() else {
        return Ok(None);
    };
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    remote.exec(&words, input.as_deref()).map(Some)
}

/// The place of a command with a positional session (or message name) and a `--session`
/// flag, each possibly `HOST:NAME`, with the host parts taken off.
fn split_pair(
    first: &Option<String>,
    flag: &Option<String>,
) -> Result<(Place, Option<String>, Option<String>)> {
    let (from_flag, flag) = place_of_optional(flag.as_deref())?;
    // A message name (`<ms>-<rand>.md`) holds no colon, so a colon is a host.
    let (from_first, first) = place_of_optional(first.as_deref())?;
    let place = match (
        first.is_some() && from_first.remote().is_some(),
        flag.is_some(),
    ) {
        (true, _) => from_first,
        (false, true) => from_flag,
        (false, false) => from_first,
    };
    Ok((place, first, flag))
}

/// `belfry presence` for a pane of another machine (its presence is a file there).
pub fn presence_elsewhere(
    state: &str,
    session: &Option<String>,
    session_flag: &Option<String>,
) -> Result<Option<i32>> {
    let (place, session, session_flag) = split_pair(session, session_flag)?;
    let Some(remote) = place.remote() else {
        return Ok(None);
    };
    let mut args = vec!["presence".to_owned(), state.to_owned()];
    args.extend(session);
    push_option(&mut args, "--session", &session_flag);
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    remote.exec(&words, None).map(Some)
}

/// `belfry logs` of another machine (its log files).
pub fn logs_elsewhere(name: Option<&str>, follow: bool) -> Result<Option<i32>> {
    let (place, name) = place_of_optional(name)?;
    let Some(remote) = place.remote() else {
        return Ok(None);
    };
    let mut args = vec!["logs".to_owned()];
    args.extend(name);
    if follow {
        args.push("--follow".into());
    }
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    remote.exec(&words, None).map(Some)
}
