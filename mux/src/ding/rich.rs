//! The rich DING policy (spec §7.4): the adapter sidecar and delivery under a lease.
//!
//! The worker starts the pane's adapter as a process group of its own, reads its protocol v1
//! events line by line (bounded), validates each, records turn boundaries and receipts, and
//! feeds the lease machine; it restarts an adapter that ends, with backoff, and replaces one
//! whose program was restarted under it. A notice is sent only when the lease machine grants a
//! lease, as a guarded send expecting what the adapter judged. A file of its own because the
//! adapter process and the lease are what the rich policy adds to the aggressive one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use belfry_ding::lease::LeaseConfig;
use belfry_ding::protocol::{EventBody, EventValidator};
use belfry_ding::status::{AdapterProcessState, LastEvent};
use belfry_ding::{HoldReason, LeaseInput, LeaseState};
use belfry_proto::reply::Sent;
use belfry_proto::request as req;
use belfry_proto::Request;
use tokio::io::BufReader;
use tokio::sync::mpsc;

use super::worker::Worker;
use super::{unix_ms, DingMsg, PaneInfo};
use crate::adapter_group::{AdapterGroup, GroupOwner};
use crate::adapter_lines::{AdapterLine, BoundedLines, MAX_LINE};
use crate::adapters::Adapters;
use crate::registry;

/// How long a killed or exited adapter gets to be reaped before the worker moves on.
const ADAPTER_REAP: Duration = Duration::from_secs(2);

/// How an adapter process ended, for the restart bookkeeping.
enum AdapterEnd {
    /// It closed its stdout or exited: the lease machine sees `adapter-error`.
    Exited,
    /// The worker killed it for a line over [`MAX_LINE`]; the `malformed` hold stands.
    KilledForOverlongLine,
}

/// The lease tunables: the defaults of spec §7.4, overridable for the daemon with
/// `BELFRY_DING_MAX_LEASE_MS`, `BELFRY_DING_EVENT_TIMEOUT_MS`, `BELFRY_DING_SUBMIT_SETTLE_MS`
/// and `BELFRY_DING_SUBMIT_UNSEEN_MS`.
pub(super) fn lease_config() -> LeaseConfig {
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let mut config = LeaseConfig::default();
    if let Some(ms) = knob("BELFRY_DING_MAX_LEASE_MS") {
        config.max_lease_ms = ms;
    }
    if let Some(ms) = knob("BELFRY_DING_EVENT_TIMEOUT_MS") {
        config.event_timeout_ms = ms;
    }
    if let Some(ms) = knob("BELFRY_DING_SUBMIT_SETTLE_MS") {
        config.submit_settle_ms = ms;
    }
    if let Some(ms) = knob("BELFRY_DING_SUBMIT_UNSEEN_MS") {
        config.submit_unseen_ms = ms;
    }
    config
}

impl Worker {
    fn note_hold(&mut self, reason: HoldReason) {
        if self.last_hold != Some(reason) {
            self.counters.record_hold(reason);
            self.last_hold = Some(reason);
        }
    }

    pub(super) async fn run_rich(
        &mut self,
        command: Vec<String>,
        rx: &mut mpsc::UnboundedReceiver<DingMsg>,
    ) {
        let mut backoff = Duration::from_millis(100);
        let mut restarts = 0u32;
        loop {
            let started = Instant::now();
            // spec §7.4: sequences increase per adapter process, and a new process counts
            // from its own start, so each one gets a validator of its own. One kept across
            // processes held every event of a restarted adapter `out-of-order` until it passed
            // the old one's count: for about as long as the old one had run.
            self.validator = EventValidator::new();
            self.adapter_outdated = false;
            let mut adapter = self.spawn_adapter(&command);
            let mut lines = adapter
                .as_mut()
                .and_then(|group| group.child_mut().stdout.take())
                .map(|out| BoundedLines::new(BufReader::new(out)));
            if adapter.is_some() {
                // After a daemon restart the crash hold stands until the adapter speaks; a
                // merely started adapter proves nothing about the pane.
                if !(self.info.adopted && restarts == 0) {
                    self.apply(LeaseInput::AdapterStarted);
                }
            } else {
                self.apply(LeaseInput::AdapterUnreachable);
            }
            // Serve until the adapter ends, or the pane's program is replaced under it.
            let mut replaced = false;
            loop {
                self.deliver_rich().await;
                let look_again_at = self.look_again_at();
                let line = tokio::select! {
                    msg = rx.recv() => {
                        match msg {
                            Some(msg) => self.handle_common(msg).await,
                            None => return,
                        }
                        if self.adapter_outdated && adapter.is_some() {
                            self.replace_adapter(adapter.as_mut()).await;
                            replaced = true;
                            break;
                        }
                        continue;
                    }
                    line = async {
                        match &mut lines {
                            Some(lines) => lines.next_line().await,
                            None => std::future::pending().await,
                        }
                    }, if lines.is_some() => line,
                    // Leases come with adapter events and posts with nudges or inbox wake-ups,
                    // each of which delivers at once; the tick only catches what neither
                    // announced.
                    _ = tokio::time::sleep_until(look_again_at) => continue,
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(started + backoff)), if lines.is_none() => break,
                };
                let end = match line {
                    Ok(AdapterLine::Text(bytes)) => {
                        match String::from_utf8(bytes) {
                            Ok(line) => self.adapter_line(&line).await,
                            Err(_) => self.reject_line(HoldReason::Malformed, "it is not UTF-8"),
                        }
                        continue;
                    }
                    Ok(AdapterLine::TooLong) => {
                        // spec §7.4: an event that cannot be read is `malformed`. An adapter
                        // that prints a line this long is broken, and reading on would only
                        // skip its output, so it is killed and restarted with backoff.
                        self.reject_line(
                            HoldReason::Malformed,
                            &format!("a line exceeds {MAX_LINE} bytes; restarting the adapter"),
                        );
                        // The whole group goes in `adapter_ended` (`AdapterGroup::end`).
                        AdapterEnd::KilledForOverlongLine
                    }
                    Ok(AdapterLine::Eof) | Err(_) => AdapterEnd::Exited,
                };
                lines = None;
                if started.elapsed() > Duration::from_secs(10) {
                    backoff = Duration::from_millis(100);
                }
                restarts += 1;
                self.adapter_ended(adapter.as_mut(), end, backoff, restarts)
                    .await;
                tracing::info!(
                    session = self.info.session,
                    "adapter ended (restart {restarts}); starting it again in {} ms",
                    backoff.as_millis()
                );
                break;
            }
            if replaced {
                // A replacement is no failure of the adapter: it starts again at once.
                continue;
            }
            // Back off before restarting, still serving messages (everything stays held).
            let until = Instant::now() + backoff;
            while Instant::now() < until {
                tokio::select! {
                    msg = rx.recv() => match msg { Some(msg) => self.handle_common(msg).await, None => return },
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(until)) => {}
                }
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    fn spawn_adapter(&mut self, command: &[String]) -> Option<AdapterGroup> {
        let (program, args) = command.split_first()?;
        let program = match Adapters::of_this_binary().program(program) {
            Ok(program) => program,
            Err(err) => {
                tracing::error!(session = self.info.session, "cannot start adapter: {err}");
                self.adapter_state = AdapterProcessState::Failed {
                    error: err.to_string(),
                };
                return None;
            }
        };
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(
                self.log_dir
                    .join(format!("adapter-{}.log", self.info.session)),
            )
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null());
        // argv only, never a shell (spec §12).
        let mut cmd = tokio::process::Command::new(&program);
        // SAFETY: prctl(PR_SET_PDEATHSIG) and `default_signals` (rt_sigaction and
        // rt_sigprocmask) are async-signal-safe and allocate nothing. The adapter then ends
        // with the daemon (a runtime worker thread, which lives as long as the daemon, forked
        // it), so a killed daemon leaves no orphan adapter behind; and it starts with every
        // signal at its default action and none blocked, as a pane's program does, not with
        // the signals the daemon was started ignoring (`nohup`: SIGHUP).
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                belfry_transport::signals::default_signals()
            });
        }
        let pane_env = belfry_proto::PaneEnv {
            session: self.info.session.clone(),
            socket: daemon_socket_for(&self.info),
            incarnation: Some(self.info.incarnation.clone()),
            generation: Some(self.info.generation.clone()),
            pane_socket: Some(self.info.socket.clone()),
            state: Some(self.state_dir.clone()),
            ..belfry_proto::PaneEnv::default()
        };
        cmd.args(args)
            .envs(pane_env.vars())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        // The adapter leads a process group of its own, which ends with it (see
        // `crate::adapter_group`); the record sits beside the pane's socket.
        let owner = GroupOwner {
            session: self.info.session.clone(),
            incarnation: self.info.incarnation.clone(),
        };
        let panes_dir = self.info.socket.parent().unwrap_or(Path::new("."));
        match AdapterGroup::spawn(&mut cmd, panes_dir, &owner) {
            Ok(mut group) => {
                self.adapter_state = AdapterProcessState::Starting {
                    pid: group.child_mut().id().unwrap_or(0),
                };
                Some(group)
            }
            Err(err) => {
                tracing::error!(
                    session = self.info.session,
                    "cannot start adapter {program}: {err}"
                );
                self.adapter_state = AdapterProcessState::Failed {
                    error: format!("{program}: {err}"),
                };
                None
            }
        }
    }

    /// Ends the adapter of a program that was restarted (its whole process group, reaped
    /// within [`ADAPTER_REAP`]), so the caller starts a new one at once. spec §7.4: the adapter
    /// gets the pane's identity in its environment, and one that takes it from there would
    /// otherwise speak of the old incarnation for good (`incarnation-mismatch`).
    async fn replace_adapter(&mut self, adapter: Option<&mut AdapterGroup>) {
        if let Some(group) = adapter {
            let _ = tokio::time::timeout(ADAPTER_REAP, group.end()).await;
        }
        tracing::info!(
            session = self.info.session,
            incarnation = self.info.incarnation,
            "the program restarted; starting its adapter again for the new incarnation"
        );
    }

    /// Records that the adapter process ended, reaping it within [`ADAPTER_REAP`].
    async fn adapter_ended(
        &mut self,
        adapter: Option<&mut AdapterGroup>,
        end: AdapterEnd,
        backoff: Duration,
        restarts: u32,
    ) {
        use std::os::unix::process::ExitStatusExt;
        if let AdapterEnd::Exited = end {
            self.apply(LeaseInput::AdapterExited);
        }
        // Ends what is left of the adapter's process group (all of it, for an adapter killed
        // for an over-long line), then reaps the adapter.
        let status = match adapter {
            Some(group) => tokio::time::timeout(ADAPTER_REAP, group.end())
                .await
                .ok()
                .flatten(),
            None => None,
        };
        self.adapter_state = AdapterProcessState::Backoff {
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            retry_in_ms: backoff.as_millis() as u64,
            restarts,
        };
    }

    /// An adapter line that is not an event at all: held as `reason`, and logged.
    fn reject_line(&mut self, reason: HoldReason, why: &str) {
        tracing::warn!(
            session = self.info.session,
            "adapter output rejected as {reason}: {why}"
        );
        self.last_event = Some(LastEvent::rejected(reason, unix_ms()));
        self.apply(LeaseInput::EventRejected(reason));
    }

    async fn pane_revision(&self) -> u64 {
        let request = Request::new(0, req::Info::default());
        match registry::pane_ask::<belfry_proto::reply::PaneRecord>(&self.info.socket, &request)
            .await
        {
            Ok(record) => record.revision.unwrap_or(0),
            Err(_) => 0,
        }
    }

    async fn adapter_line(&mut self, line: &str) {
        if let AdapterProcessState::Starting { pid } = self.adapter_state {
            self.adapter_state = AdapterProcessState::Running { pid };
        }
        let received = unix_ms();
        match self.validator.validate(line) {
            Ok(event) => {
                self.last_event = Some(LastEvent::accepted(&event, received));
                let pane_revision = match &event.body {
                    EventBody::Activity { revision: None, .. } => self.pane_revision().await,
                    _ => 0,
                };
                match &event.body {
                    EventBody::TurnBoundary {
                        messages,
                        unrecognized,
                    } => {
                        for name in unrecognized {
                            tracing::warn!(
                                session = self.info.session,
                                "turn-boundary names no message: {name:?}"
                            );
                        }
                        let unread = self.unread_reconciled();
                        match self
                            .ownership
                            .record_turn_boundary(messages, &unread, received)
                        {
                            Ok(outcome) => {
                                for name in outcome.not_unread {
                                    tracing::warn!(
                                        session = self.info.session,
                                        "turn-boundary names {name} which is not unread; ignored"
                                    );
                                }
                            }
                            Err(err) => tracing::error!(
                                session = self.info.session,
                                "cannot record turn boundary: {err}"
                            ),
                        }
                    }
                    EventBody::Receipt { message, state } => {
                        if let Err(err) = self.ownership.record_receipt(message, *state, received) {
                            tracing::error!(
                                session = self.info.session,
                                "cannot record receipt: {err}"
                            );
                        }
                    }
                    EventBody::Activity { .. } => {}
                }
                let now = self.clock.now();
                self.lease.apply(
                    LeaseInput::Event {
                        event: &event,
                        pane_revision,
                    },
                    now,
                );
            }
            Err(err) => {
                let reason = err.hold_reason().unwrap_or(HoldReason::Malformed);
                tracing::warn!(session = self.info.session, "adapter event rejected: {err}");
                self.last_event = Some(LastEvent::rejected(reason, received));
                self.apply(LeaseInput::EventRejected(reason));
            }
        }
    }

    async fn deliver_rich(&mut self) {
        self.recheck_unresolved().await;
        // Most looks find the lease held (the agent is busy) with the same mail waiting: they
        // only note the hold, without copying the list of unread names.
        if !self.has_pending() {
            return;
        }
        let now = self.clock.now();
        if let LeaseState::Held(reason) = self.lease.state(now) {
            self.note_hold(reason);
            return;
        }
        let pending = self.pending();
        if pending.is_empty() || self.input_ended || !self.ready_for_input().await {
            return;
        }
        match self.lease.take_lease(now) {
            Err(reason) => self.note_hold(reason),
            Ok(expect) => {
                self.last_hold = None;
                let (names, notice) = self.next_notice(&pending);
                match self.stage_and_send(&names, &notice, Some(expect)).await {
                    Some(Sent::Conflict { .. }) => {
                        self.apply(LeaseInput::SendConflict);
                        self.note_hold(HoldReason::Conflict);
                    }
                    // Written, perhaps written (a lost reply, a refusal part-way), or not
                    // sent at all. Only a conflict proves zero bytes; after anything else the
                    // harness may be starting the turn the notice's Enter submitted, so the
                    // next idle-looking screen must settle first (spec §7.4, `submitted`).
                    _ => self.apply(LeaseInput::Submitted),
                }
            }
        }
    }
}

fn daemon_socket_for(_info: &PaneInfo) -> PathBuf {
    belfry_transport::paths::daemon_socket()
}
