//! Applying `belfry up` and `belfry down` (spec §11) through a daemon client: read the running
//! panes, plan, check every agent to be launched, then launch, replace or stop.
//!
//! All or nothing, for what can be known before anything runs: every agent to be launched is
//! checked first ([`crate::preflight`]), and if any check fails nothing is launched or killed
//! ([`Error::Preflight`]). What only the daemon can refuse (a pane that appeared meanwhile, an
//! adapter declaration that takes no charter) fails the run part-way; the panes launched in
//! that run are then stopped again, and [`Error::Launch`] says which and how each kill went. A
//! replaced pane cannot be brought back: it is left to the next `belfry up`.

use std::collections::BTreeMap;

use belfry_proto::reply::{Killed, Listing, Reply};
use belfry_proto::{request, SessionName};
use serde_json::Value;

use super::{plan, plan_down, Action, Declarations, DriftPolicy, RunningPane};
use crate::client::Client;
use crate::preflight::{self, Prepared};
use crate::Error;

/// What `belfry up` did: one action per declared agent, in file order, all of them carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Applied {
    /// The plan that was carried out.
    pub actions: Vec<Action>,
}

/// `belfry up`: launches missing agents, adopts running ones with the declared generation and
/// reports drift, relaunching drifted panes only under [`DriftPolicy::Replace`] (spec §11).
///
/// `base_env` is the environment every launched pane starts from (the caller's); it is not part
/// of the generation.
pub fn up(
    client: &mut Client,
    decls: &Declarations,
    drift: DriftPolicy,
    base_env: &BTreeMap<String, String>,
) -> Result<Applied, Error> {
    let running = running_panes(client)?;
    let actions = skip_missing_harnesses(plan(decls, &running, drift), decls, base_env);
    let to_launch: Vec<&str> = actions
        .iter()
        .filter(|action| matches!(action, Action::Launch { .. } | Action::Replace { .. }))
        .map(Action::name)
        .collect();
    let prepared = preflight::prepare(decls, &to_launch, base_env).map_err(Error::Preflight)?;
    let mut launched: Vec<&str> = Vec::new();
    for ready in &prepared {
        let name = ready.agent.name.as_str();
        let replacing = actions
            .iter()
            .any(|action| matches!(action, Action::Replace { name: n, .. } if n == name));
        if let Err(err) = launch_one(client, ready, replacing, base_env) {
            return Err(Error::Launch {
                agent: name.to_owned(),
                source: Box::new(err),
                stopped: stop_launched(client, &launched),
            });
        }
        if !replacing {
            launched.push(name);
        }
    }
    Ok(Applied { actions })
}

/// Turns the launch or relaunch of each agent whose harness is not installed here
/// ([`preflight::missing_harness`]) into [`Action::Skip`]: `belfry up` of a file declaring
/// several harnesses launches the agents this machine can run instead of none. A running
/// pane is never touched for it (adopt and drift stay as they are).
fn skip_missing_harnesses(
    actions: Vec<Action>,
    decls: &Declarations,
    base_env: &BTreeMap<String, String>,
) -> Vec<Action> {
    actions
        .into_iter()
        .map(|action| {
            if !matches!(action, Action::Launch { .. } | Action::Replace { .. }) {
                return action;
            }
            let Some(agent) = decls.get(action.name()) else {
                return action;
            };
            match (
                preflight::missing_harness(agent, base_env),
                agent.adapter.clone(),
            ) {
                (Some(program), Some(adapter)) => Action::Skip {
                    name: agent.name.clone(),
                    program,
                    adapter,
                },
                _ => action,
            }
        })
        .collect()
}

/// `belfry up --dry-run`: every check `belfry up` makes before it launches anything (spec §11:
/// each agent's `cwd`, program and charter, [`preflight::prepare`]), on every agent of this
/// machine, with no daemon asked and nothing launched. Returns what `belfry up` would do of
/// each with no pane running: [`Action::Launch`], or [`Action::Skip`] for an agent whose
/// harness is not installed here.
pub fn dry_run(
    decls: &Declarations,
    base_env: &BTreeMap<String, String>,
) -> Result<Vec<Action>, Error> {
    let actions = skip_missing_harnesses(plan(decls, &[], DriftPolicy::Report), decls, base_env);
    let names: Vec<&str> = actions
        .iter()
        .filter(|action| matches!(action, Action::Launch { .. }))
        .map(Action::name)
        .collect();
    preflight::prepare(decls, &names, base_env).map_err(Error::Preflight)?;
    Ok(actions)
}

/// `belfry down`: stops the declared agents that have a pane, exited or not, in file order,
/// calling `stopped` after each; undeclared panes are left alone.
pub fn down(
    client: &mut Client,
    decls: &Declarations,
    mut stopped: impl FnMut(&str),
) -> Result<(), Error> {
    let running = running_panes(client)?;
    for name in plan_down(decls, &running) {
        kill(client, &name)?;
        stopped(&name);
    }
    Ok(())
}

/// The panes the daemon lists, as far as reconciliation needs to know them.
pub fn running_panes(client: &mut Client) -> Result<Vec<RunningPane>, Error> {
    let listing: Listing = ask(client, request::List::default())?;
    Ok(listing
        .panes
        .into_iter()
        .map(|pane| RunningPane {
            session: pane.session,
            generation: pane.generation.unwrap_or_default(),
            exited: matches!(pane.exited, Some(Some(_))),
        })
        .collect())
}

/// Spawns one checked agent, killing its old pane first when it is being replaced.
fn launch_one(
    client: &mut Client,
    ready: &Prepared<'_>,
    replacing: bool,
    base_env: &BTreeMap<String, String>,
) -> Result<(), Error> {
    let name = &ready.agent.name;
    if replacing {
        kill(client, name)?;
    }
    let spec = ready.agent.launch_spec();
    let session = SessionName::parse(&spec.session).map_err(|err| Error::EncodeRequest {
        op: "spawn",
        reason: err.to_string(),
    })?;
    let adapter = match &spec.adapter {
        Some(adapter) => Some(
            SessionName::parse(adapter).map_err(|err| Error::EncodeRequest {
                op: "spawn",
                reason: format!("adapter: {err}"),
            })?,
        ),
        None => None,
    };
    let spawn = request::Spawn {
        cwd: spec.cwd,
        env: spec.env,
        base_env: base_env.clone(),
        rows: Some(u64::from(spec.rows)),
        cols: Some(u64::from(spec.cols)),
        size_policy: Some(spec.size_policy),
        scrollback: Some(spec.scrollback as u64),
        scrollback_bytes: Some(spec.scrollback_bytes as u64),
        ding_policy: spec.ding_policy,
        adapter_command: spec.adapter_command,
        adapter,
        charter: ready.charter_text.clone(),
        ..request::Spawn::new(session, spec.argv)
    };
    ask::<Value>(client, spawn)?;
    Ok(())
}

/// Undoes the launches of a run that failed part-way (spec §11 all or nothing), returning how
/// each kill went.
fn stop_launched(client: &mut Client, launched: &[&str]) -> Vec<(String, Result<(), Box<Error>>)> {
    launched
        .iter()
        .map(|name| ((*name).to_owned(), kill(client, name).map_err(Box::new)))
        .collect()
}

fn kill(client: &mut Client, session: &str) -> Result<(), Error> {
    let session = SessionName::parse(session).map_err(|err| Error::EncodeRequest {
        op: "kill",
        reason: err.to_string(),
    })?;
    ask::<Killed>(client, request::Kill::of(session)).map(drop)
}

/// Sends a typed op and reads its reply body; an error reply is [`Error::Refused`].
fn ask<T: serde::de::DeserializeOwned>(
    client: &mut Client,
    op: impl Into<request::Op>,
) -> Result<T, Error> {
    match client.call(op)? {
        Reply::Ok(body) => Ok(body),
        Reply::Err(err) => Err(Error::Refused {
            code: err.code.as_str().to_string(),
            message: err.message,
        }),
    }
}
