//! `belfry new` and `belfry run`: starting a pane (here or on another host), its default DING
//! policy, and what is said when the name is taken.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

use belfry_proto::reply::{self as body, PaneRecord, Restarted, Screen};
use belfry_proto::request as op;
use belfry_proto::{ErrorBody, ErrorCode, SessionName};

use super::args::{NewArgs, RunArgs};
use super::attach::{attach_cmd, attach_socket, local_cwd, AttachPanes};
use super::pane::parse_size;
use super::{ask, print_json, refusal};
use crate::attach::{self, DetachKey};
use crate::exit::EXIT_OK;
use crate::remote::{self, Place};

/// `belfry new NAME -- CMD…`: starts a pane, refusing a command line without the program.
pub(super) fn new(args: NewArgs) -> Result<i32> {
    if args.command.is_empty() {
        bail!(
            "`belfry new {}` needs the program to run, after `--`: `belfry new {} -- \
             CMD ARG…` (`belfry run {}` starts your shell and attaches)",
            args.name,
            args.name,
            args.name
        );
    }
    new_pane(&args, None)
}

/// `belfry run NAME [-- CMD…]`: starts the pane (or finds it) and attaches.
pub(super) fn run(mut args: RunArgs) -> Result<i32> {
    // `belfry run NAME` alone: the pane is attached to if it exists (the command is
    // never used then), else it runs the user's shell, as a terminal would.
    let given = !args.new.command.is_empty();
    if !given {
        args.new.command = vec![login_shell()];
    }
    let detach_key = attach::config::detach_key_spec(args.detach_key.as_deref())?;
    new_pane(&args.new, Some((&detach_key, given)))
}

/// Starts a pane; with `attach_with` (a detach key, and whether a command was given) attaches
/// to it after, as `belfry run` does.
pub(super) fn new_pane(args: &NewArgs, attach_with: Option<(&str, bool)>) -> Result<i32> {
    let (place, name) = remote::place_of(&args.name)?;
    // A bad detach key is refused before the pane is started.
    if let Some((detach_key, _)) = attach_with {
        DetachKey::parse(detach_key)?;
    }
    let mut env = BTreeMap::new();
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {kv:?} is not K=V"))?;
        if k.is_empty() {
            bail!("--env {kv:?} has an empty name");
        }
        env.insert(k.to_string(), v.to_string());
    }
    // The terminal's own size is passed on as it is (0x0 taken as 24x80): the daemon judges it
    // like any other.
    let (rows, cols) = match &args.size {
        Some(size) => parse_size(size)?.pair(),
        None => attach::terminal_size().unwrap_or((24, 80)),
    };
    let cwd = match (&place, &args.cwd) {
        // A remote pane's directory is on that machine: `--cwd` goes there as written (its
        // daemon refuses one that is not a directory), and without it the pane starts where
        // the far daemon runs, not in this machine's current directory.
        (Place::Remote(_), Some(cwd)) => Some(
            cwd.to_str()
                .ok_or_else(|| anyhow!("--cwd {}: the path is not UTF-8", cwd.display()))?
                .to_string(),
        ),
        (Place::Remote(_), None) => None,
        (Place::Local, cwd) => Some(local_cwd(cwd.as_deref())?),
    };
    let size_policy = match args.size_policy.as_str() {
        "latest" => op::SizePolicy::Latest,
        "smallest" => op::SizePolicy::Smallest,
        other => bail!("size_policy {other:?} is not latest or smallest"),
    };
    let adapter =
        match &args.adapter {
            Some(adapter) => Some(SessionName::parse(adapter).map_err(|_| {
                anyhow!("adapter name {adapter:?} must match [A-Za-z0-9._-]{{1,64}}")
            })?),
            None => None,
        };
    // An adapter that exists nowhere is refused here, before any pane starts, rather than
    // found missing by the daemon later (in its log only). The lookup is the daemon's own;
    // a remote daemon has its own adapters and judges the name itself.
    if let (Some(adapter), Place::Local) = (&adapter, &place) {
        belfry_mux::adapters::Adapters::of_this_binary().require(adapter.as_str())?;
    }
    // This machine's environment (its PATH, HOME, …) means nothing on another one: a remote
    // pane starts from the far daemon's, as a pane started there would.
    let base_env: BTreeMap<String, String> = match place {
        Place::Local => std::env::vars().collect(),
        Place::Remote(_) => BTreeMap::new(),
    };
    let mut ding_policy = args.ding_delivery.clone();
    let mut adapter_command = (!args.ding_adapter.is_empty()).then(|| args.ding_adapter.clone());
    if let (Some(adapter), Place::Local, None, None) =
        (&adapter, &place, &ding_policy, &adapter_command)
    {
        let dir = PathBuf::from(cwd.clone().unwrap_or_default());
        let mut pane_env = base_env.clone();
        pane_env.extend(env.clone());
        if let Some(command) = default_policy(&args.name, adapter.as_str(), &dir, &pane_env) {
            ding_policy = Some(belfry_ding::policy::RICH_POLICY_TOKEN.to_string());
            adapter_command = Some(command);
        }
    }
    // A remote pane gets this terminal's type, as a local one gets it from `base_env`.
    let term = match place {
        Place::Local => None,
        Place::Remote(_) => std::env::var("TERM").ok(),
    };
    // The user's config may set how much history a new pane keeps.
    let scrollback = attach::config::AttachConfig::load()?.history_limit;
    let spawn = op::Spawn {
        cwd,
        env,
        base_env,
        term,
        scrollback,
        rows: Some(rows.into()),
        cols: Some(cols.into()),
        size_policy: Some(size_policy),
        ding_policy,
        adapter_command,
        adapter,
        ..op::Spawn::new(name, args.command.clone())
    };
    let mut client = place.daemon()?;
    let (id, reply) = client.call_numbered(spawn)?;
    drop(client);
    let pane: PaneRecord = match reply.into_result() {
        Ok(pane) => pane,
        Err(err) if err.code == ErrorCode::Exists => {
            return pane_exists(&args.name, &err, attach_with);
        }
        Err(err) => return Err(refusal(err)),
    };
    let whole = body::ok(&Value::from(id), &pane);
    if args.json {
        print_json(&whole);
    } else if attach_with.is_none() {
        println!(
            "{}: pid {} incarnation {} revision {}",
            args.name,
            pane.child_pid
                .map_or_else(|| "-".into(), |pid| pid.to_string()),
            pane.incarnation.as_deref().unwrap_or("-"),
            pane.revision.map_or_else(|| "-".into(), |r| r.to_string())
        );
    }
    if let Some((detach_key, _)) = attach_with {
        return attach_cmd(&args.name, false, DetachKey::parse(detach_key)?);
    }
    Ok(EXIT_OK)
}

/// The program `belfry run NAME` starts without a command: the user's shell (`$SHELL`), else
/// `sh`.
pub(super) fn login_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|shell| !shell.trim().is_empty())
        .unwrap_or_else(|| "sh".to_string())
}

/// The DING policy of an agent declared with `adapter` and none of its own (spec §7.4, §7.3):
/// the rich policy's activity command where it can work ([`crate::hooks::rich_default`]),
/// else `None`, the aggressive default. An adapter that ships an activity executable but
/// cannot use it here says why on stderr, with the fix.
pub(crate) fn default_policy(
    agent: &str,
    adapter: &str,
    dir: &std::path::Path,
    env: &BTreeMap<String, String>,
) -> Option<Vec<String>> {
    match crate::hooks::rich_default(adapter, dir, env) {
        Ok(command) => {
            crate::doctor::say_first_turn_wait(agent, adapter);
            Some(command)
        }
        Err(None) => None,
        Err(Some(reason)) => {
            eprintln!("belfry: {agent}: DING delivery stays aggressive: {reason}");
            None
        }
    }
}

/// A spawn of a name that is taken. `belfry run` attaches to the pane there, as tmux's
/// `new -A` does (its command and options are not applied to it), restarting its own program
/// first when that has exited; `belfry new` refuses, saying how to get to the pane.
pub(super) fn pane_exists(
    name: &str,
    err: &ErrorBody,
    attach_with: Option<(&str, bool)>,
) -> Result<i32> {
    if let Some((detach_key, command_given)) = attach_with {
        let key = DetachKey::parse(detach_key)?;
        let (place, session) = remote::place_of(name)?;
        let snapshot = op::Snapshot {
            session: Some(session.clone()),
            ..op::Snapshot::default()
        };
        let screen: Screen = ask(&mut place.daemon()?, snapshot)?;
        let mut note = None;
        if let Some(status) = &screen.exited {
            let _: Restarted = ask(&mut place.daemon()?, op::Restart::of(session))?;
            let how = match (status.code, status.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                _ => "had exited".to_string(),
            };
            note = Some(format!(
                "{name}'s program {how}: restarted it (its own command, not the one given)"
            ));
        } else if command_given {
            // The pane runs its own program; the one given is not run, and saying so keeps a
            // changed command from looking applied (`belfry kill NAME` first starts it anew).
            note = Some(format!(
                "{name} exists: attached to it; the command given was not run (`belfry kill \
                 {name}` first to start it anew)"
            ));
        }
        let socket = attach_socket(name)?;
        return attach::run(
            Some((&socket, name)),
            false,
            key,
            &AttachPanes { place },
            note,
        );
    }
    bail!(
        "{}; `belfry attach {name}` attaches to it (`belfry run {name} -- CMD` attaches, or \
         starts it when it is gone)",
        err.message
    )
}
