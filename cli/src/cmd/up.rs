//! `belfry up` and `belfry down`: a declaration file's agents started (or planned with
//! `--dry-run`) and stopped, and the daemon's declare errors said with their causes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde_json::json;

use belfry_mux::Error as MuxError;

use super::new::default_policy;
use super::{daemon, print_json, NotFound};
use crate::exit::{EXIT_ERROR, EXIT_OK};
use crate::remote::{self, Place};

/// The declarations of `belfry up` and `belfry down` (`command`): FILE, else ./belfry.kdl.
/// Without FILE and with no ./belfry.kdl the error says which directory was looked in and
/// how to name a file, rather than only that a file is missing.
pub(super) fn declarations(
    file: Option<PathBuf>,
    command: &str,
) -> Result<belfry_mux::declare::Declarations> {
    let path = match file {
        Some(file) => file,
        None => {
            let path = PathBuf::from("belfry.kdl");
            if !path.exists() {
                let here = std::env::current_dir()
                    .map(|dir| dir.display().to_string())
                    .unwrap_or_else(|_| ".".to_string());
                bail!(
                    "`belfry {command}` with no FILE reads ./belfry.kdl, and {here} has none: \
                     name the declarations file (`belfry {command} FILE`), or run it where \
                     belfry.kdl is (the repository's examples/belfry.kdl is a commented one)"
                );
            }
            path
        }
    };
    Ok(belfry_mux::declare::load(&path)?)
}

/// `belfry up` (spec §11): planning and applying live in `belfry_mux::declare::up`; this
/// prints what it did, or why nothing (or only part) was done.
pub(super) fn up(file: Option<PathBuf>, replace: bool, json_out: bool) -> Result<i32> {
    use belfry_mux::declare::{report, DriftPolicy};
    let path = file.clone().unwrap_or_else(|| PathBuf::from("belfry.kdl"));
    let mut all = declarations(file, if replace { "up --replace" } else { "up" })?;
    crate::hooks::refuse_unguarded_agents(&all, &path)?;
    crate::charter_brief::brief_into_charters(
        &mut all,
        &path,
        &belfry_transport::paths::state_dir(),
    )?;
    default_policies(&mut all);
    let drift = if replace {
        DriftPolicy::Replace
    } else {
        DriftPolicy::Report
    };
    // One plan per machine (spec §6.2): this one's agents through the local daemon, each
    // `host`'s through its own. A remote pane starts from the far daemon's environment, not
    // this machine's.
    let mut actions = Vec::new();
    for (host, decls) in all.by_host() {
        let (mut client, base_env) = match host_or_default(host.as_deref())? {
            Place::Local => (daemon()?, std::env::vars().collect()),
            Place::Remote(remote) => (remote.daemon()?, BTreeMap::new()),
        };
        match belfry_mux::declare::up(&mut client, &decls, drift, &base_env) {
            Ok(applied) => actions.extend(applied.actions),
            Err(err) => return up_failed(err),
        }
    }
    if json_out {
        print_json(&json!(actions));
    } else {
        print!("{}", report(&actions));
    }
    Ok(EXIT_OK)
}

/// The default DING policy of each agent of this machine declared with an adapter and no
/// `ding` block ([`default_policy`]); the agents of another machine are that machine's to
/// judge, and keep the aggressive default.
pub(super) fn default_policies(all: &mut belfry_mux::declare::Declarations) {
    let base_env: BTreeMap<String, String> = std::env::vars().collect();
    for agent in all.agents.iter_mut() {
        let Some(adapter) = agent.adapter.clone() else {
            continue;
        };
        // An agent whose harness is not installed is skipped by `up` with its own line; a
        // word about its hooks would only bury that.
        if belfry_mux::preflight::missing_harness(agent, &base_env).is_some() {
            continue;
        }
        if agent.ding_declared || agent.host.is_some() {
            continue;
        }
        let Some(dir) = agent.cwd.clone() else {
            continue;
        };
        let mut env = base_env.clone();
        env.extend(agent.env.clone());
        if let Some(adapter_command) = default_policy(&agent.name, &adapter, &dir, &env) {
            agent.ding = belfry_ding::DeliveryPolicy::Rich { adapter_command };
        }
    }
}

/// `belfry up --dry-run`: the checks of `belfry up` with nothing launched. An agent of another
/// machine is only listed: its files are that machine's to check.
pub(super) fn up_dry_run(file: Option<PathBuf>) -> Result<i32> {
    let path = file.clone().unwrap_or_else(|| PathBuf::from("belfry.kdl"));
    let all = declarations(file, "up --dry-run")?;
    crate::hooks::refuse_unguarded_agents(&all, &path)?;
    for (host, decls) in all.by_host() {
        match host {
            None => match belfry_mux::declare::dry_run(&decls, &std::env::vars().collect()) {
                Ok(actions) => {
                    for action in actions {
                        match action {
                            belfry_mux::declare::Action::Skip { .. } => {
                                println!(
                                    "would {}",
                                    action.to_string().replacen("skip    ", "skip ", 1)
                                )
                            }
                            other => println!("would launch {}", other.name()),
                        }
                    }
                }
                Err(err) => return up_failed(err),
            },
            Some(host) => {
                for agent in &decls.agents {
                    println!("would launch {} on {host} (not checked here)", agent.name);
                }
            }
        }
    }
    Ok(EXIT_OK)
}

/// The place of a declared agent's `host`, or the command's own (`--host`) without one.
pub(super) fn host_or_default(host: Option<&str>) -> Result<Place> {
    match host {
        Some(host) => remote::host_place(host),
        None => remote::default_place(),
    }
}

/// What `belfry up` says when one machine's plan fails: that plan's own undo (spec §11); the
/// machines done before it keep what they launched.
pub(super) fn up_failed(err: MuxError) -> Result<i32> {
    match err {
        MuxError::Preflight(errors) => {
            for error in &errors {
                eprintln!("belfry: {error}");
            }
            eprintln!("belfry up: nothing was launched");
            Ok(EXIT_ERROR)
        }
        MuxError::Launch {
            agent,
            source,
            stopped,
        } => {
            eprintln!("belfry up: {agent}: {}", chain(&source));
            for (name, outcome) in &stopped {
                match outcome {
                    Ok(()) => eprintln!("belfry up: stopped {name}, launched by this run"),
                    Err(err) => eprintln!(
                        "belfry up: cannot stop {name}, launched by this run: {}",
                        chain(err)
                    ),
                }
            }
            if stopped.is_empty() {
                eprintln!("belfry up: nothing else was launched");
            }
            Ok(EXIT_ERROR)
        }
        err => Err(mux_error(err)),
    }
}

pub(super) fn down(file: Option<PathBuf>) -> Result<i32> {
    let all = declarations(file, "down")?;
    for (host, decls) in all.by_host() {
        let place = host_or_default(host.as_deref())?;
        let mut client = place.daemon()?;
        let prefix = host.map(|host| format!("{host}:")).unwrap_or_default();
        belfry_mux::declare::down(&mut client, &decls, |name| {
            println!("stopped {prefix}{name}")
        })
        .map_err(mux_error)?;
    }
    Ok(EXIT_OK)
}

/// A daemon's `not-found` reply exits 1, like every other command's; anything else is an error.
pub(super) fn mux_error(err: MuxError) -> anyhow::Error {
    match err {
        MuxError::Refused { code, message } if code == "not-found" => NotFound(message).into(),
        other => other.into(),
    }
}

/// An error and its causes, as `{:#}` shows an `anyhow::Error`: `message: cause: cause`.
/// As in [`without_repeats`], a cause the text already carries is left out.
pub(super) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let words = next.to_string();
        if !text.contains(&words) {
            text.push_str(&format!(": {words}"));
        }
        cause = next.source();
    }
    text
}
