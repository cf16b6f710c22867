//! The pane hosts the daemon takes care of (spec §6.0): adopted at start (or once a stalled one
//! answers), each with its DING worker, its host-fired lifecycle events and a monitor that
//! republishes its events on the bus and reports its death. A file of its own because this is
//! the daemon's side of every pane host's life, apart from any client's op.

use std::sync::Arc;
use std::time::Duration;

use belfry_proto::event::{Event, Lifecycle};
use belfry_proto::reply::{PaneRecord, Reply};
use belfry_proto::request;
use belfry_proto::spec::LaunchSpec;
use belfry_proto::{PaneEnv, Request};
use belfry_transport::paths;
use belfry_transport::retry::{poll_until, Backoff};
use serde_json::Value;

use super::events::publish;
use super::panes::unlisted;
use super::Daemon;
use crate::ding::{DingMsg, PaneInfo};
use crate::registry::{self, PaneEntry};

/// How often an unadopted pane host is probed again.
const ADOPTION_RETRY: Duration = Duration::from_millis(250);

/// The first pause between a monitor's subscribe attempts; it doubles up to
/// [`MONITOR_RETRY_MAX`].
const MONITOR_RETRY_FIRST: Duration = Duration::from_millis(50);

const MONITOR_RETRY_MAX: Duration = Duration::from_secs(2);

/// How long one subscribe attempt of a monitor may wait for the pane host's reply.
const MONITOR_SUBSCRIBE_STEP: Duration = Duration::from_secs(5);

pub(super) async fn adopt_existing(daemon: &Arc<Daemon>) {
    // Before any adapter is started again: what the adapters of a killed daemon left running
    // is ended first (see `crate::adapter_group`).
    crate::adapter_group::sweep_leftover_groups(&belfry_transport::paths::panes_dir(
        &daemon.config.runtime,
    ));
    let found = registry::discover(&daemon.config.runtime).await;
    for session in found.lost {
        publish(
            daemon,
            Event::Lifecycle(Lifecycle {
                reason: Some("pane host was gone when the daemon started".into()),
                ..Lifecycle::new(&session, "lost")
            }),
        );
    }
    for (entry, info) in found.live {
        adopt(daemon, entry, &info);
    }
    for entry in found.stalled {
        daemon.registry.insert_unadopted(entry.clone());
        tokio::spawn(adopt_when_it_answers(Arc::clone(daemon), entry));
    }
}

/// Takes over a pane host that answered the probe (spec §6.0): registry, DING worker, monitor.
fn adopt(daemon: &Arc<Daemon>, entry: PaneEntry, info: &Value) {
    tracing::info!(
        session = entry.session,
        pid = entry.pid,
        "adopted pane host"
    );
    let host = HostRecord::read(&entry, info);
    publish(
        daemon,
        Event::Lifecycle(Lifecycle {
            pid: Some(entry.pid),
            incarnation: host.record.incarnation.clone(),
            revision: host.record.revision,
            ..Lifecycle::new(&entry.session, "adopted")
        }),
    );
    daemon.registry.insert(entry.clone());
    start_ding(daemon, &entry, &host, true);
    tokio::spawn(monitor(
        Arc::clone(daemon),
        entry,
        registry::ExitSoFar::Skip,
    ));
}

/// Waits (bounded) for process `pid` to be gone; `None` if it still lives at the deadline.
pub(super) async fn pid_gone(pid: u32, within: Duration) -> Option<()> {
    let tick = Backoff::constant(Duration::from_millis(10));
    poll_until(within, tick, || (!registry::pid_alive(pid)).then_some(())).await
}

/// A pane host that was alive but did not answer at daemon start or at its spawn (stopped,
/// too slow for the probe, at its connection cap, or its socket unusable for now) is probed
/// again until it answers, then adopted like the others; only when its process dies is its
/// record removed and it reported lost. It is never silently orphaned while it lives.
pub(super) async fn adopt_when_it_answers(daemon: Arc<Daemon>, entry: PaneEntry) {
    let mut retry = Backoff::constant(ADOPTION_RETRY);
    let probed = loop {
        retry.sleep().await;
        if !registry::pid_alive(entry.pid) {
            break registry::Probe::Unreachable;
        }
        match registry::probe_status(&entry.socket).await {
            answered @ registry::Probe::Answered(_) => break answered,
            foreign @ registry::Probe::Foreign => break foreign,
            registry::Probe::Silent | registry::Probe::Unreachable => continue,
        }
    };
    if let registry::Probe::Answered(info) = probed {
        // Inserted into the registry before it leaves the unadopted set, so its name is never
        // free in between.
        adopt(&daemon, entry.clone(), &info);
        daemon
            .registry
            .remove_unadopted_if_pid(&entry.session, entry.pid);
        return;
    }
    // Its process is dead: it will never answer. Its files go only with its process, as for a
    // monitored pane.
    if daemon
        .registry
        .remove_unadopted_if_pid(&entry.session, entry.pid)
    {
        if !registry::pid_alive(entry.pid) {
            registry::remove_files(&daemon.config.runtime, &entry.session);
        }
        publish(
            &daemon,
            Event::Lifecycle(Lifecycle {
                pid: Some(entry.pid),
                reason: Some(
                    if matches!(probed, registry::Probe::Foreign) {
                        "its socket is served by another uid"
                    } else {
                        "pane host went away before it answered the daemon"
                    }
                    .into(),
                ),
                ..Lifecycle::new(&entry.session, "lost")
            }),
        );
    }
}

/// The declaration of the adapter named `adapter`, from the adapters directory or the table
/// built into the binary.
pub(super) fn load_declaration(
    daemon: &Daemon,
    adapter: &str,
) -> Result<crate::lifecycle::AdapterDeclaration, String> {
    crate::adapters::Adapters::locate(&daemon.config.exe)
        .declaration(adapter)
        .map_err(|err| err.to_string())
}

/// What the daemon reads of a pane host's `info` record: the record and its launch spec.
pub(super) struct HostRecord {
    pub(super) record: PaneRecord,
    pub(super) spec: Option<LaunchSpec>,
}

impl HostRecord {
    /// Reads an `info` reply; a reply that is not a record gives an empty one (logged), so a
    /// pane host of an older build is still adopted and served.
    pub(super) fn read(entry: &PaneEntry, info: &Value) -> HostRecord {
        let record = match Reply::<PaneRecord>::read(info) {
            Ok(Reply::Ok(record)) => record,
            other => {
                tracing::warn!(
                    session = entry.session,
                    "info reply is not a record: {other:?}"
                );
                unlisted(entry, "unreachable", "no record".into())
            }
        };
        let spec = record
            .spec
            .as_ref()
            .and_then(|spec| belfry_proto::de::from_value::<LaunchSpec>(spec).ok());
        HostRecord { record, spec }
    }

    pub(super) fn adapter(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|spec| spec.adapter.as_deref())
    }
}

/// Fires `event` through dispatch if the pane's adapter declares it as host lifecycle.
pub(super) fn host_lifecycle(daemon: &Daemon, entry: &PaneEntry, host: &HostRecord, event: &str) {
    let (Some(adapter), Some(spec)) = (host.adapter(), host.spec.clone()) else {
        return;
    };
    let declaration = match load_declaration(daemon, adapter) {
        Ok(declaration) => declaration,
        Err(err) => {
            tracing::warn!(session = entry.session, "{err}");
            return;
        }
    };
    if !declaration.host_lifecycle.iter().any(|e| e == event) {
        return;
    }
    let pane_env = PaneEnv {
        session: entry.session.clone(),
        socket: daemon.config.socket.clone(),
        incarnation: host.record.incarnation.clone(),
        generation: host.record.generation.clone(),
        inbox: Some(daemon.config.state_dir.join("inbox").join(&entry.session)),
        ..PaneEnv::default()
    };
    let exe = daemon.config.exe.clone();
    let event = event.to_string();
    tokio::spawn(async move {
        crate::lifecycle::fire(&exe, &event, &spec, &pane_env).await;
    });
}

/// Starts the DING worker of a pane from its pane host's record.
pub(super) fn start_ding(daemon: &Daemon, entry: &PaneEntry, host: &HostRecord, adopted: bool) {
    let (compaction_events, readiness, notice_settle_ms) =
        match host.adapter().map(|a| load_declaration(daemon, a)) {
            Some(Ok(declaration)) => (
                declaration.compaction_events,
                declaration.readiness,
                // A send takes no delay step longer than this; a declaration asking for more
                // gets the longest.
                declaration.notice_settle.map_or(0, |settle| {
                    settle.ms.min(belfry_proto::limits::MAX_DELAY_STEP_MS)
                }),
            ),
            Some(Err(err)) => {
                tracing::warn!(session = entry.session, "{err}");
                (Vec::new(), None, 0)
            }
            None => (Vec::new(), None, 0),
        };
    let spec = host.spec.as_ref();
    let info = PaneInfo {
        session: entry.session.clone(),
        socket: entry.socket.clone(),
        incarnation: host.record.incarnation.clone().unwrap_or_default(),
        generation: host.record.generation.clone().unwrap_or_default(),
        ding_policy: spec.and_then(|spec| spec.ding_policy.clone()),
        agent_adapter: host.adapter().map(str::to_string),
        pane_host: format!(
            "{}-{}",
            host.record.pid,
            host.record.started_at.unwrap_or(0)
        ),
        adapter_command: spec.and_then(|spec| spec.adapter_command.clone()),
        adopted,
        compaction_events,
        readiness,
        notice_settle_ms,
    };
    // The inbox exists before `new` replies, so a tool that posts by hand (a file renamed
    // into `new/`) right after the pane starts finds the directories; the worker opens the
    // same inbox again when it starts, and says so if it cannot.
    if let Err(err) = belfry_ding::Inbox::open(&daemon.config.state_dir, &entry.session) {
        tracing::warn!(session = entry.session, "inbox not made: {err}");
    }
    daemon.ding.start(
        info,
        daemon.config.state_dir.clone(),
        daemon.config.log_dir.clone(),
    );
}

/// Watches one pane host: forwards its exit and lifecycle events to the bus and reports the
/// pane host's death (spec §12: `kill -9` of a pane host is reported on the bus).
///
/// `exit_so_far`: a pane the daemon just spawned asks for the exit of a program that ended
/// before the subscription (`belfry new X -- true`), which no bus subscriber heard otherwise;
/// an adopted pane's exit was published (or not) by the daemon that ran then.
pub(super) async fn monitor(
    daemon: Arc<Daemon>,
    entry: PaneEntry,
    exit_so_far: registry::ExitSoFar,
) {
    // A subscription that cannot be opened (refused `busy` at the connection cap, a full
    // backlog, a stopped pane host) is retried, with back-off, for as long as the pane host
    // lives and is still this registry's pane: a live pane is never reported lost.
    let mut retry = Backoff::doubling(MONITOR_RETRY_FIRST, MONITOR_RETRY_MAX);
    let subscription = loop {
        let attempt = tokio::time::timeout(
            MONITOR_SUBSCRIBE_STEP,
            registry::subscribe_from(&entry.socket, false, exit_so_far),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no subscribe reply within {} s",
                MONITOR_SUBSCRIBE_STEP.as_secs()
            ))
        });
        match attempt {
            Ok(subscription) => break Ok(subscription),
            Err(err) if registry::pid_alive(entry.pid) => {
                if daemon
                    .registry
                    .get(&entry.session)
                    .is_none_or(|e| e.pid != entry.pid)
                {
                    // Killed or replaced meanwhile: whoever removed it reports it.
                    return;
                }
                tracing::debug!(session = entry.session, "monitor retry: {err}");
                retry.sleep().await;
            }
            Err(err) => break Err(err),
        }
    };
    match subscription {
        Ok((mut lines, _writer)) => {
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str::<Value>(&line)
                    .map_err(|err| err.to_string())
                    .and_then(|value| {
                        belfry_proto::de::from_value::<Event>(&value).map_err(|err| err.to_string())
                    });
                let event = match event {
                    Ok(event) => event,
                    Err(err) => {
                        tracing::warn!(
                            session = entry.session,
                            "pane host event not understood: {err}"
                        );
                        continue;
                    }
                };
                let restarted =
                    matches!(&event, Event::Lifecycle(lifecycle) if lifecycle.what == "restart");
                if matches!(event, Event::Exit { .. }) || restarted {
                    let what = if restarted {
                        "session-start"
                    } else {
                        "session-end"
                    };
                    let request = Request::new(0, request::Info::default());
                    if let Ok(info) = registry::pane_request(&entry.socket, &request).await {
                        host_lifecycle(&daemon, &entry, &HostRecord::read(&entry, &info), what);
                    }
                }
                // A person's typing (`typed`, at most ten a second) is for the pane's DING
                // worker alone: the bus would only wake every `belfry top` with it.
                let typed =
                    matches!(&event, Event::Lifecycle(lifecycle) if lifecycle.what == "typed");
                daemon
                    .ding
                    .tell(&entry.session, DingMsg::Pane(event.clone()));
                if !typed {
                    publish(&daemon, event);
                }
            }
        }
        Err(err) => tracing::warn!(session = entry.session, "cannot monitor pane host: {err}"),
    }
    // The subscription ended. If the registry still lists this pane host, it died on its own.
    if daemon.registry.remove_if_pid(&entry.session, entry.pid) {
        daemon.ding.stop(&entry.session);
        let _ = pid_gone(entry.pid, Duration::from_millis(500)).await;
        if !registry::pid_alive(entry.pid) {
            let _ = std::fs::remove_file(&entry.socket);
            let _ =
                std::fs::remove_file(paths::pane_record(&daemon.config.runtime, &entry.session));
        }
        tracing::warn!(session = entry.session, pid = entry.pid, "pane host lost");
        publish(
            &daemon,
            Event::Lifecycle(Lifecycle {
                pid: Some(entry.pid),
                reason: Some("pane host exited or was killed".into()),
                ..Lifecycle::new(&entry.session, "lost")
            }),
        );
    }
}
