//! The `spawn` op: a request validated into a launch spec, the name reserved, the adapter's
//! declaration applied (charter, turn boundary, launch arguments), the pane host launched and
//! probed, then registered with its DING worker, its lifecycle event and its monitor. A file
//! of its own because it is the longest op and the only one that starts a process.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use belfry_proto::event::{Event, Lifecycle};
use belfry_proto::limits::{
    DEFAULT_SCROLLBACK, DEFAULT_SCROLLBACK_BYTES, DEFAULT_SIZE, MAX_SCROLLBACK,
    MAX_SCROLLBACK_BYTES,
};
use belfry_proto::reply::{self, ErrorBody};
use belfry_proto::request::Spawn;
use belfry_proto::spec::LaunchSpec;
use belfry_proto::{ErrorCode, Size};
use belfry_transport::paths;
use serde_json::Value;

use super::events::publish;
use super::hosts::{
    adopt_when_it_answers, host_lifecycle, load_declaration, monitor, start_ding, HostRecord,
};
use super::{unadopted_message, Daemon};
use crate::registry;

/// Builds and validates a launch spec from a spawn request.
pub fn spec_from_request(op: &Spawn) -> Result<LaunchSpec, crate::Error> {
    spec_of(op).map_err(|reason| crate::Error::InvalidSpawn { reason })
}

fn spec_of(op: &Spawn) -> Result<LaunchSpec, String> {
    let argv = op.argv.clone();
    if argv.is_empty() || argv[0].is_empty() {
        return Err("field \"argv\" must name a program".into());
    }
    let size = Size::new(
        op.rows.unwrap_or(u64::from(DEFAULT_SIZE.rows())),
        op.cols.unwrap_or(u64::from(DEFAULT_SIZE.cols())),
    )
    .map_err(|err| err.to_string())?;
    if let Some(cwd) = &op.cwd {
        if !Path::new(cwd).is_dir() {
            return Err(format!("cwd {cwd:?} is not a directory"));
        }
    }
    let mut ding_policy = op.ding_policy.clone();
    let adapter_command = op.adapter_command.clone();
    if let Some(token) = &ding_policy {
        belfry_ding::DeliveryPolicy::from_token(token, adapter_command.clone().unwrap_or_default())
            .map_err(|err| format!("ding_policy {token:?}: {err}"))?;
    } else if adapter_command.is_some() {
        return Err("adapter_command given without a ding_policy".into());
    }
    let adapter = op.adapter.as_ref().map(|name| name.as_str().to_string());
    // spec §7.3: naming the harness's adapter declares the pane an agent, whose default is
    // aggressive delivery. The token is written into the spec so that the policy, which is
    // part of the generation, is the same as a declared agent's with the same adapter.
    if ding_policy.is_none() && adapter.is_some() {
        ding_policy = Some(belfry_ding::policy::AGGRESSIVE_POLICY_TOKEN.to_string());
    }
    Ok(LaunchSpec {
        session: op.session.as_str().to_string(),
        argv,
        cwd: op.cwd.clone(),
        env: op.env.clone(),
        base_env: op.base_env.clone(),
        term: op.term.clone(),
        ding_policy,
        adapter_command,
        rows: size.rows(),
        cols: size.cols(),
        size_policy: op.size_policy.unwrap_or_default(),
        scrollback: op
            .scrollback
            .unwrap_or(DEFAULT_SCROLLBACK)
            .min(MAX_SCROLLBACK) as usize,
        scrollback_bytes: op
            .scrollback_bytes
            .unwrap_or(DEFAULT_SCROLLBACK_BYTES)
            .min(MAX_SCROLLBACK_BYTES) as usize,
        extra_args: Vec::new(),
        extra_env: BTreeMap::new(),
        adapter,
    })
}

/// `spawn`: a pane host started for the request, answered with its `info` record, or the
/// reason none was. Its phases, each a function: the name reserved, the room for a pane and the
/// socket checked, the adapter's declaration applied to the spec, the pane host launched, its
/// first answer awaited, and the pane registered and announced.
pub(super) async fn spawn(daemon: &Arc<Daemon>, id: &Value, op: &Spawn) -> Value {
    match spawned(daemon, op).await {
        // The name's reservation is held until the pane is announced (registered).
        Ok((_reservation, entry, info)) => announce(daemon, id, &entry, info),
        Err(err) => reply::error_with(id, err),
    }
}

/// The phases of [`spawn`] up to the pane host's first answer: the name's reservation, the
/// entry and the `info` reply, or the error the spawn's reply carries.
async fn spawned<'d>(
    daemon: &'d Arc<Daemon>,
    op: &Spawn,
) -> Result<(registry::SpawnReservation<'d>, registry::PaneEntry, Value), ErrorBody> {
    let mut spec = spec_from_request(op).map_err(|err| ErrorBody::invalid(err.to_string()))?;
    // Held until this spawn is answered: a concurrent spawn of the same name is `exists`,
    // never a second pane host that then fails to bind the socket.
    let reservation = reserve_name(daemon, &spec)?;
    let socket = paths::pane_socket(&daemon.config.runtime, &spec.session);
    check_room(daemon, &spec, &socket).await?;
    apply_declaration(daemon, op, &mut spec)?;
    let entry = launch(daemon, &spec, &socket).await?;
    let info = first_answer(daemon, &spec, &entry).await?;
    Ok((reservation, entry, info))
}

/// Reserves the spec's session name for this spawn: `exists` when a pane (adopted or not) or
/// another spawn has it.
fn reserve_name<'d>(
    daemon: &'d Daemon,
    spec: &LaunchSpec,
) -> Result<registry::SpawnReservation<'d>, ErrorBody> {
    match daemon.registry.reserve(&spec.session) {
        Ok(reservation) => Ok(reservation),
        Err(registry::Taken::Unadopted(entry)) => Err(ErrorBody::new(
            ErrorCode::Exists,
            format!(
                "a pane named {:?} already exists: {}",
                spec.session,
                unadopted_message(&entry)
            ),
        )),
        Err(registry::Taken::Spawning | registry::Taken::Pane) => Err(ErrorBody::new(
            ErrorCode::Exists,
            format!("a pane named {:?} already exists", spec.session),
        )),
    }
}

/// Refuses, before anything is started, a pane the daemon has no descriptors left for, or
/// whose socket a pane host the daemon does not know of may still serve.
async fn check_room(daemon: &Daemon, spec: &LaunchSpec, socket: &Path) -> Result<(), ErrorBody> {
    // A pane that would leave the daemon too few descriptors is refused here, before anything
    // is started, saying how many fit: not half-way with "Too many open files".
    let running = (daemon.registry.all().len() + daemon.registry.all_unadopted().len()) as u64;
    if let Err(message) = crate::descriptors::check_room_for_a_pane(&spec.session, running) {
        tracing::warn!("{message}");
        return Err(ErrorBody::new(ErrorCode::Unavailable, message));
    }
    // A pane host the daemon does not know of (its record lost) may still serve the name's
    // socket. Nothing of this spawn may touch its files (the charter is written below), and
    // its socket is never taken over.
    if paths::socket_may_be_served(socket).await {
        return Err(ErrorBody::new(
            ErrorCode::Exists,
            format!(
                "a pane named {:?} already exists: a pane host is already serving {}",
                spec.session,
                socket.display()
            ),
        ));
    }
    Ok(())
}

/// Applies what the pane's adapter declares to the spec: its charter placement, its turn
/// boundary event and its launch arguments and environment.
fn apply_declaration(daemon: &Daemon, op: &Spawn, spec: &mut LaunchSpec) -> Result<(), ErrorBody> {
    // The adapter's declaration is read once per spawn, for the charter and the turn boundary.
    let declaration = spec
        .adapter
        .as_deref()
        .map(|adapter| load_declaration(daemon, adapter));
    if let Some(text) = &op.charter {
        if let Err(message) = place_charter(daemon, spec, declaration.as_ref(), text) {
            return Err(ErrorBody::invalid(message));
        }
    }
    // spec §7.5: the adapter declares which event is the harness's turn boundary; dispatch
    // inside the pane reads it from the environment (outside the generation).
    if let Some(Ok(crate::lifecycle::AdapterDeclaration {
        turn_boundary: Some(event),
        ..
    })) = &declaration
    {
        spec.extra_env.insert(
            belfry_proto::env::TURN_BOUNDARY_EVENTS.to_string(),
            event.clone(),
        );
    }
    // spec §10: what the harness needs on its command line and in its environment under
    // belfry (for example one process per pane, so each pane's tools and hooks keep that
    // pane's identity) is the adapter's data.
    if let Some(Ok(crate::lifecycle::AdapterDeclaration {
        launch: Some(launch),
        ..
    })) = &declaration
    {
        spec.extra_args.extend(launch.args.iter().cloned());
        spec.extra_env
            .extend(launch.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Ok(())
}

/// Launches the pane host; a launch that fails leaves nothing of the spawn behind.
async fn launch(
    daemon: &Daemon,
    spec: &LaunchSpec,
    socket: &Path,
) -> Result<registry::PaneEntry, ErrorBody> {
    let config = &daemon.config;
    match registry::launch(
        &config.exe,
        &config.runtime,
        &config.socket,
        &config.state_dir,
        spec,
    )
    .await
    {
        Ok(entry) => Ok(entry),
        Err(message) => {
            // Nothing of a failed launch stays behind, the charter included, unless a pane
            // host of that name has come to serve the socket meanwhile: the run directory is
            // then its own.
            if !paths::socket_may_be_served(socket).await {
                let _ = std::fs::remove_dir_all(config.runtime.join("run").join(&spec.session));
            }
            Err(ErrorBody::invalid(message))
        }
    }
}

/// The new pane host's `info` record, from its first probe. One that is alive but does not
/// answer yet is kept unadopted and adopted once it answers; one that died is cleaned up.
async fn first_answer(
    daemon: &Arc<Daemon>,
    spec: &LaunchSpec,
    entry: &registry::PaneEntry,
) -> Result<Value, ErrorBody> {
    let config = &daemon.config;
    match registry::probe_status(&entry.socket).await {
        registry::Probe::Answered(info) => Ok(info),
        _ if registry::pid_alive(entry.pid) => {
            // Started but too slow to answer (a loaded machine): its program runs, so it is
            // kept unadopted (listed `unresponsive`, its name taken) and adopted once it
            // answers, never left running where nothing can see or reach it.
            daemon.registry.insert_unadopted(entry.clone());
            tokio::spawn(adopt_when_it_answers(Arc::clone(daemon), entry.clone()));
            Err(ErrorBody::new(
                ErrorCode::Unavailable,
                format!(
                    "pane host for {:?} (pid {}) started but does not answer yet; it is listed \
                     as unresponsive and adopted once it answers",
                    spec.session, entry.pid
                ),
            ))
        }
        _ => {
            // It died right after it announced itself; it removes its own files on a clean
            // exit, and what a crash left behind goes here.
            registry::remove_files(&config.runtime, &spec.session);
            let _ = std::fs::remove_dir_all(config.runtime.join("run").join(&spec.session));
            Err(ErrorBody::new(
                ErrorCode::Unavailable,
                format!(
                    "pane host for {:?} (pid {}) exited right after it started",
                    spec.session, entry.pid
                ),
            ))
        }
    }
}

/// Registers the answered pane host, starts its DING worker, fires its `session-start`,
/// publishes `spawned` and starts its monitor; the reply is its `info` record.
fn announce(daemon: &Arc<Daemon>, id: &Value, entry: &registry::PaneEntry, info: Value) -> Value {
    daemon.registry.insert(entry.clone());
    // The record is read once, for the DING worker, the lifecycle event and the bus.
    let host = HostRecord::read(entry, &info);
    start_ding(daemon, entry, &host, false);
    host_lifecycle(daemon, entry, &host, "session-start");
    // `spawned` is on the bus before the monitor can publish the program's exit.
    publish(
        daemon,
        Event::Lifecycle(Lifecycle {
            pid: Some(entry.pid),
            incarnation: host.record.incarnation.clone(),
            generation: host.record.generation.clone(),
            ..Lifecycle::new(&entry.session, "spawned")
        }),
    );
    tokio::spawn(monitor(
        Arc::clone(daemon),
        entry.clone(),
        registry::ExitSoFar::Tell,
    ));
    let mut reply = info;
    if let Value::Object(map) = &mut reply {
        map.insert("id".into(), id.clone());
    }
    reply
}

/// spec §11: writes `<runtime>/run/<session>/system-prompt.md` and hands it to the program the
/// way the pane's adapter declaration says. A charter for a harness that declares no way to take
/// one is an error, never silently dropped.
fn place_charter(
    daemon: &Daemon,
    spec: &mut LaunchSpec,
    declaration: Option<&Result<crate::lifecycle::AdapterDeclaration, String>>,
    text: &str,
) -> Result<(), String> {
    use crate::lifecycle::CharterPlacement;
    let declaration = declaration
        .ok_or("a charter needs an adapter that says how the harness takes it (adapter \"NAME\")")?
        .as_ref()
        .map_err(String::clone)?;
    let adapter = spec.adapter.as_deref().unwrap_or_default();
    let placement = declaration
        .charter
        .clone()
        .ok_or_else(|| format!("adapter {adapter:?} declares no charter placement"))?;
    let run_dir = daemon.config.runtime.join("run").join(&spec.session);
    paths::ensure_private_dir(&run_dir).map_err(|err| err.to_string())?;
    let path = run_dir.join("system-prompt.md");
    std::fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    let path_text = path.display().to_string();
    match placement {
        CharterPlacement::Flag(flag) => spec.extra_args.extend([flag, path_text]),
        CharterPlacement::Env(var) => {
            spec.extra_env.insert(var, path_text);
        }
        CharterPlacement::File(relative) => {
            let cwd = spec.cwd.clone().ok_or("a file charter needs a cwd")?;
            let target = Path::new(&cwd).join(&relative);
            if target.exists() {
                return Err(format!(
                    "charter target {} already exists; belfry does not overwrite it",
                    target.display()
                ));
            }
            std::fs::write(&target, text)
                .map_err(|err| format!("cannot write {}: {err}", target.display()))?;
        }
    }
    Ok(())
}
