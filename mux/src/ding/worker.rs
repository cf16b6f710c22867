//! The DING worker of one pane: its state (`Worker`, the one struct every other file of the
//! engine adds an `impl` block to), its start, and what every policy does alike.
//!
//! `run_worker` opens the inbox and the ownership store, resolves notices a previous daemon
//! left staged, then runs the loop of the pane's policy: the aggressive loop here, the rich one
//! in `rich.rs`, and for a pane with no policy (or an invalid one) only `handle_common`, which
//! applies the server's messages (pane events, hook events, claims, status) to the state.
//! Readiness (spec §10) lives here too, since both delivering loops ask it before a notice.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use belfry_ding::presence::Presence;
use belfry_ding::protocol::EventValidator;
use belfry_ding::status::{AdapterProcessState, Counters, LastEvent};
use belfry_ding::watch::ScanCache;
use belfry_ding::{
    DeliveryPolicy, HoldReason, Inbox, LeaseInput, LeaseMachine, OwnershipStore, PaneIdentity,
    ProgramTurn, SessionName,
};
use belfry_proto::reply::Sent;
use belfry_proto::request as req;
use belfry_proto::{Event, Expect, Request};
use tokio::sync::mpsc;

use super::claims::TurnClaims;
use super::rich::lease_config;
use super::transaction::UNRESOLVED_RECHECK;
use super::wake::{InboxRegistration, Wake};
use super::{unix_ms, DingMsg, PaneInfo};
use crate::registry;

/// How fresh a `dnd` declaration must be to defer delivery.
const DND_MAX_AGE: Duration = Duration::from_secs(30 * 60);

/// The worker's own monotonic clock, in milliseconds, for the lease machine.
pub(super) struct Clock(Instant);

impl Clock {
    pub(super) fn now(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

/// The state of one pane's DING worker. Each file of `ding/` holds the `impl Worker` block
/// of one concern; the fields are the engine's, read and changed by all of them.
pub(super) struct Worker {
    pub(super) info: PaneInfo,
    pub(super) state_dir: PathBuf,
    pub(super) log_dir: PathBuf,
    pub(super) inbox: Inbox,
    pub(super) ownership: OwnershipStore,
    pub(super) policy: Result<DeliveryPolicy, String>,
    pub(super) lease: LeaseMachine,
    /// The validator of the running adapter process's events; a new process gets a new one.
    pub(super) validator: EventValidator,
    /// Set when the pane's program restarted under a running adapter, which must be replaced.
    pub(super) adapter_outdated: bool,
    pub(super) clock: Clock,
    pub(super) counters: Counters,
    pub(super) last_event: Option<LastEvent>,
    /// The turn-boundary path's state (spec §7.5).
    pub(super) turns: TurnClaims,
    pub(super) adapter_state: AdapterProcessState,
    pub(super) last_hold: Option<HoldReason>,
    /// The program takes no more notices until a restart's lifecycle event says a new one
    /// runs: it exited (the pane host's event, or a conflict of a send said so), or its pane
    /// host refused a notice with nothing written because a kill or a restart had begun
    /// (`aborted`, `written: 0`). A killed pane host sends no such event and is soon gone (the
    /// next pane of the name has a worker of its own); a notice sent to it again could meet its
    /// exit, get no answer, and stay staged without proof either way.
    pub(super) input_ended: bool,
    pub(super) first_pass: bool,
    /// Refused entries of `new/` already logged, so each is logged once, not every poll.
    pub(super) refused_logged: HashSet<PathBuf>,
    /// When to ask again about unresolved transactions (see [`Worker::recheck_unresolved`]).
    pub(super) next_recheck: Instant,
    /// The inbox's last listing, reused while the inbox cannot have changed.
    pub(super) scans: ScanCache,
    /// When the removal of the inbox was first seen, while it is not opened again yet.
    pub(super) removal_seen: Option<Instant>,
    pub(super) wake: Wake,
    /// The watch on the inbox; without one the worker looks every [`POLL`].
    pub(super) watch: Option<InboxRegistration>,
    /// Whether the pane's program was seen accepting input (by the adapter's readiness rule);
    /// once seen, it stays so until the program restarts.
    pub(super) ready: bool,
    /// The program's last restart: the pane's revision then, and when (unix ms). A restarted
    /// program is judged ready again, by its age since the restart and by a screen it drew
    /// since (the old program's screen stays up until the new one draws).
    restarted: Option<(u64, u64)>,
    /// Why the pane was last found not ready, logged once per reason.
    pub(super) not_ready_logged: Option<String>,
    /// The current program's own status records (OSC 7501), by record id, as the pane host's
    /// `program-status` events told them: while one says `working` or `blocked`, no idle
    /// report leases (the veto of [`LeaseInput::ProgramStatus`]).
    program_records: HashMap<Option<String>, belfry_proto::program_status::StatusRecord>,
    /// What those records last told the lease machine.
    program_turn: ProgramTurn,
}

pub(super) async fn run_worker(
    info: PaneInfo,
    state_dir: PathBuf,
    log_dir: PathBuf,
    wake: Wake,
    mut rx: mpsc::UnboundedReceiver<DingMsg>,
) -> Result<(), String> {
    let session = SessionName::parse(&info.session).map_err(|e| e.to_string())?;
    let inbox = Inbox::open_session(&state_dir, session.clone()).map_err(|e| e.to_string())?;
    let ownership = match OwnershipStore::open(&state_dir, &session) {
        Ok(store) => store,
        Err(err) => {
            // A corrupt state file is set aside, never deleted; messages are in the inbox.
            tracing::error!(session = info.session, "ownership state unreadable: {err}");
            belfry_ding::ownership::quarantine(&state_dir, &session, unix_ms())
                .map_err(|e| e.to_string())?;
            OwnershipStore::open(&state_dir, &session).map_err(|e| e.to_string())?
        }
    };
    // spec §7.3: only a pane declared an agent gets automatic input; the spec of any other
    // (a plain `belfry new`) has neither a policy token nor an adapter name.
    let policy = DeliveryPolicy::for_pane(
        info.ding_policy.as_deref(),
        info.adapter_command.clone().unwrap_or_default(),
        info.agent_adapter.as_deref(),
    )
    .map_err(|e| e.to_string());
    let identity = PaneIdentity {
        session,
        incarnation: info.incarnation.clone(),
        generation: info.generation.clone(),
    };
    let config = lease_config();
    let lease = if info.adopted {
        LeaseMachine::after_daemon_restart(config, identity)
    } else {
        LeaseMachine::new(config, identity)
    };
    let mut worker = Worker {
        info,
        state_dir,
        log_dir,
        inbox,
        ownership,
        policy,
        lease,
        validator: EventValidator::new(),
        adapter_outdated: false,
        clock: Clock(Instant::now()),
        counters: Counters::default(),
        last_event: None,
        turns: TurnClaims::new(),
        adapter_state: AdapterProcessState::NotConfigured,
        last_hold: None,
        input_ended: false,
        first_pass: true,
        refused_logged: HashSet::new(),
        next_recheck: Instant::now() + UNRESOLVED_RECHECK,
        scans: ScanCache::default(),
        removal_seen: None,
        wake,
        watch: None,
        ready: false,
        restarted: None,
        not_ready_logged: None,
        program_records: HashMap::new(),
        program_turn: ProgramTurn::Rest,
    };
    worker.watch_inbox();
    // spec §7.3 and §12: a daemon killed while a notice's send was outstanding left it staged;
    // the pane host knows whether it was ever written. Ask before announcing anything.
    worker.resolve_stranded().await;
    match worker.policy.clone() {
        Ok(DeliveryPolicy::Rich { adapter_command }) => {
            worker.run_rich(adapter_command, &mut rx).await
        }
        Ok(DeliveryPolicy::Aggressive) => worker.run_aggressive(&mut rx).await,
        Ok(DeliveryPolicy::Undeclared) => {
            // Not an agent: mail stays durable in the inbox and nothing is typed, ever; the
            // worker only answers status and keeps ownership records reconciled.
            while let Some(msg) = rx.recv().await {
                worker.handle_common(msg).await;
            }
        }
        Err(reason) => {
            // An invalid policy holds everything: the rich policy never degrades to aggressive.
            tracing::error!(
                session = worker.info.session,
                "invalid DING policy: {reason}"
            );
            while let Some(msg) = rx.recv().await {
                worker.handle_common(msg).await;
            }
        }
    }
    Ok(())
}

impl Worker {
    async fn run_aggressive(&mut self, rx: &mut mpsc::UnboundedReceiver<DingMsg>) {
        loop {
            self.deliver_aggressive().await;
            let look_again_at = self.look_again_at();
            let msg = tokio::select! {
                msg = rx.recv() => match msg { Some(msg) => Some(msg), None => return },
                _ = tokio::time::sleep_until(look_again_at) => None,
            };
            if let Some(msg) = msg {
                self.handle_common(msg).await;
            }
        }
    }

    async fn deliver_aggressive(&mut self) {
        self.recheck_unresolved().await;
        if self.input_ended {
            return;
        }
        if !self.has_pending() || !self.ready_for_input().await {
            return;
        }
        if let Ok(Some(presence)) = Presence::load(&self.inbox) {
            if presence.is_fresh_dnd(unix_ms(), DND_MAX_AGE) {
                return;
            }
        }
        let pending = self.pending();
        if pending.is_empty() {
            return;
        }
        let (names, notice) = self.next_notice(&pending);
        // The notice is for this worker's pane host and program only: if another pane host
        // now serves the name, or the program restarted unseen, nothing is written.
        let expect = Expect {
            incarnation: Some(self.info.incarnation.clone()),
            ..Expect::default()
        };
        if let Some(Sent::Conflict { exited: true, .. }) =
            self.stage_and_send(&names, &notice, Some(expect)).await
        {
            self.input_ended = true;
        }
    }

    pub(super) fn apply(&mut self, input: LeaseInput<'_>) {
        let now = self.clock.now();
        self.lease.apply(input, now);
    }

    /// spec §10: whether the pane's program accepts input by its adapter's readiness rule
    /// (ready without a rule). The pane host is asked for its start time and screen; a pane
    /// host that does not answer is not ready, so nothing is typed into it. Each new reason
    /// the pane is not ready is logged once.
    pub(super) async fn ready_for_input(&mut self) -> bool {
        let Some(rule) = self.info.readiness.clone() else {
            return true;
        };
        if self.ready {
            return true;
        }
        let info = Request::new(0, req::Info::default());
        let snapshot = Request::new(0, req::Snapshot::default());
        let record =
            registry::pane_ask::<belfry_proto::reply::PaneRecord>(&self.info.socket, &info).await;
        let screen =
            registry::pane_ask::<belfry_proto::reply::Screen>(&self.info.socket, &snapshot).await;
        let reason = match (record, screen) {
            (Ok(record), Ok(screen)) => match self.restarted {
                Some((revision, _)) if record.revision.unwrap_or(0) <= revision => Some(
                    "it restarted and has drawn nothing since; the screen is the old program's"
                        .to_string(),
                ),
                Some((_, at)) => {
                    rule.not_ready(unix_ms().saturating_sub(at), &screen.lines.join("\n"))
                }
                None => {
                    let age_ms = record
                        .started_at
                        .map(|started| unix_ms().saturating_sub(started))
                        .unwrap_or(0);
                    rule.not_ready(age_ms, &screen.lines.join("\n"))
                }
            },
            (Err(err), _) | (_, Err(err)) => Some(format!("the pane host did not answer: {err}")),
        };
        match reason {
            None => {
                self.ready = true;
                if self.not_ready_logged.take().is_some() {
                    tracing::info!(session = self.info.session, "ready for input; delivering");
                }
                true
            }
            Some(reason) => {
                if self.not_ready_logged.as_deref() != Some(reason.as_str()) {
                    tracing::info!(
                        session = self.info.session,
                        "holding notices: the harness does not accept input yet: {reason}"
                    );
                    self.not_ready_logged = Some(reason);
                }
                false
            }
        }
    }

    /// Messages every policy handles the same way.
    pub(super) async fn handle_common(&mut self, msg: DingMsg) {
        match msg {
            DingMsg::Nudge => {}
            // The next look lists the inbox afresh: the change may be one its stamps miss.
            DingMsg::InboxChanged => self.scans.forget(),
            DingMsg::Pane(event) => match event {
                Event::Exit { .. } => {
                    self.input_ended = true;
                    self.apply(LeaseInput::PaneExited);
                }
                // spec §7.4: a person's keystrokes end the idle the last report described.
                Event::Lifecycle(lifecycle) if lifecycle.what == "typed" => {
                    // A pane host that does not say whether the input held an Enter is taken
                    // to have submitted: the longer hold.
                    let submit = lifecycle.submit != Some(false);
                    self.apply(LeaseInput::Typed { submit });
                }
                Event::Lifecycle(lifecycle) if lifecycle.what == "restart" => {
                    self.input_ended = false;
                    // spec §10: a new program accepts no input before its own start-up.
                    self.ready = false;
                    self.restarted = Some((lifecycle.revision.unwrap_or(0), unix_ms()));
                    if let Some(incarnation) = lifecycle.incarnation {
                        self.info.incarnation = incarnation;
                    }
                    // A new program has reported nothing of itself.
                    self.program_records.clear();
                    self.program_turn = ProgramTurn::Rest;
                    // The adapter was started with the old incarnation in its environment:
                    // the rich path replaces it (see `Worker::replace_adapter`).
                    self.adapter_outdated = true;
                    let identity = PaneIdentity {
                        session: self.lease.identity().session.clone(),
                        incarnation: self.info.incarnation.clone(),
                        generation: self.info.generation.clone(),
                    };
                    self.apply(LeaseInput::PaneRestarted(&identity));
                    // A notice the old program saw only part of is owed to the new one.
                    self.requeue_stranded();
                }
                Event::ProgramStatus { id, new, .. } => self.program_status(id, new),
                _ => {}
            },
            DingMsg::Hook { event, applied } => {
                let hook = event.hook.as_str();
                let source = event.source.as_deref().unwrap_or("");
                // spec §7.4: a compaction invalidates the lease. `pre-compact` is the semantic
                // event; a harness that also (or only) reports it as another event's `source`
                // says so in its adapter declaration.
                let compacted = hook == "pre-compact"
                    || self
                        .info
                        .compaction_events
                        .iter()
                        .any(|event| event.matches(hook, source));
                if compacted {
                    self.apply(LeaseInput::Compaction);
                } else if hook == "session-start" && source == "clear" {
                    self.apply(LeaseInput::Clear);
                } else if hook == "prompt-submit" || hook == "before-tool" {
                    // A turn started: the lease ends at once, not when the adapter has seen
                    // the same hook and reported `active` (spec §7.4, one lease per idle).
                    self.apply(LeaseInput::TurnStarted);
                }
                if hook == "interrupt" && matches!(source, "" | "user") {
                    // An interrupt a person made (a harness that says who stopped the turn
                    // says `user`; one that does not say is taken to be a person, the
                    // longer-held reading) is their presence: the same signal as their
                    // keystrokes, without an Enter (spec §7.4). Mail waits the settle time
                    // rather than landing on the composer they are about to type into.
                    self.apply(LeaseInput::Typed { submit: false });
                }
                if hook == "turn-stop" {
                    if self.turns.continued_stops > 0 {
                        self.turns.continued_stops -= 1;
                    } else {
                        // The harness says its turn ended: a notice's turn has settled.
                        self.apply(LeaseInput::TurnEnded);
                    }
                }
                if hook == "prompt-submit" {
                    self.prompt_submitted(&event);
                }
                let _ = applied.send(());
            }
            DingMsg::TurnBoundary { claim, reply } => {
                let _ = reply.send(self.turn_boundary(&claim));
            }
            DingMsg::Status(reply) => {
                let _ = reply.send(self.status());
            }
        }
    }

    /// A program status record changed (issue 40): the veto of `working` and `blocked` follows
    /// the current program's records. Only a record of the current incarnation counts; the
    /// adapter, which reads the same records in the snapshot it judges, is what reports idle.
    fn program_status(
        &mut self,
        id: Option<String>,
        new: Option<belfry_proto::program_status::StatusRecord>,
    ) {
        use belfry_proto::program_status::ProgramState;
        match new {
            Some(record) if record.incarnation == self.info.incarnation => {
                self.program_records.insert(id, record);
            }
            Some(_) => return,
            None => {
                self.program_records.remove(&id);
            }
        }
        let states = || self.program_records.values().map(|record| record.state);
        let turn = if states().any(|state| state == ProgramState::Blocked) {
            ProgramTurn::Blocked
        } else if states().any(|state| state == ProgramState::Working) {
            ProgramTurn::Working
        } else {
            ProgramTurn::Rest
        };
        if turn != self.program_turn {
            self.program_turn = turn;
            self.apply(LeaseInput::ProgramStatus(turn));
        }
    }
}
