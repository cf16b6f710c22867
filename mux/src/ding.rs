//! The daemon's DING engine (spec §7): one worker task per pane that tells the agent about new
//! inbox mail, under the pane's delivery policy, through the pane's guarded send.
//!
//! The worker is the only writer of its session's ownership file, so every decision about a
//! message (stage, release, hook-own, receipt) is made in one place, in order. Everything it
//! decides is durable before it acts: a notice is staged on disk before the transaction that
//! pastes it starts, and a staged notice is never pasted again (spec §7.3).
//!
//! - No policy (a pane not declared an agent, spec §7.3): nothing is ever typed; mail stays in
//!   the inbox and `ding status` says why.
//! - Aggressive policy (an agent with no `ding {}` block): each unread, unowned message becomes
//!   one notice, pasted with a 500 ms pause and Enter, unless the agent declared a fresh `dnd`.
//! - Rich policy (`turn-boundary+fresh-idle`): the worker runs the adapter sidecar, validates
//!   its protocol v1 events, and sends only with a lease, as a guarded send expecting the exact
//!   identity and revision the adapter judged. It never falls back to aggressive delivery.
//!
//! Every notice send carries a transaction id, staged with the notice. A worker that never
//! learned the outcome of a send (its daemon was killed, the connection broke) asks the pane
//! host's journal at its next start (`belfry_pty::txn`): a notice certainly never written is
//! announced again, once; one that may have been written stays staged.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use belfry_proto::reply::{Claimed, DingState};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::unix::AsyncFd;
use tokio::io::BufReader;
use tokio::sync::{mpsc, oneshot};

use belfry_ding::inbox::{RefusedEntry, UnreadScan};
use belfry_ding::lease::LeaseConfig;
use belfry_ding::notice::{notice_line, recovery_notice};
use belfry_ding::ownership::StageOutcome;
use belfry_ding::policy::{notice_transaction, Step};
use belfry_ding::presence::Presence;
use belfry_ding::protocol::{EventBody, EventValidator};
use belfry_ding::status::{
    AdapterProcessState, Counters, DingStatus, LastEvent, LeaseStatus, MessageState, MessageStatus,
};
use belfry_ding::watch::{InboxWatch, InboxWatcher, ScanCache, Scanned};
use belfry_ding::{
    DeliveryPolicy, HoldReason, Inbox, LeaseInput, LeaseMachine, LeaseState, MessageName,
    OwnershipStore, PaneIdentity, ProgramTurn, SessionName,
};
use belfry_proto::event::HookSeen;
use belfry_proto::reply::{Reply, Sent};
use belfry_proto::request::{self as req, InputStep};
use belfry_proto::{ErrorCode, Event, Expect, Request};

use crate::adapter_group::{AdapterGroup, GroupOwner};
use crate::adapters::Adapters;
use belfry_proto::txn::TxnState;
use belfry_transport::retry::Backoff;

use crate::adapter_lines::{AdapterLine, BoundedLines, MAX_LINE};
use crate::lifecycle::{HookSource, Readiness};
use crate::registry::{self, PaneError};

/// How fresh a `dnd` declaration must be to defer delivery.
const DND_MAX_AGE: Duration = Duration::from_secs(30 * 60);
/// How often a worker whose inbox is not watched (see [`InboxWakeups`]) looks at it without a
/// nudge: other tools may post without one.
const POLL: Duration = Duration::from_millis(200);
/// How often a worker whose inbox is watched looks at it anyway. inotify is only a wake-up and
/// the inbox on disk the truth (spec §7.1): this catches what no event announced (a dnd that
/// went stale, a filesystem whose changes inotify does not see) at a cost that is nothing at
/// idle.
const SAFETY_POLL: Duration = Duration::from_secs(5);
/// How long a killed or exited adapter gets to be reaped before the worker moves on.
const ADAPTER_REAP: Duration = Duration::from_secs(2);
/// The deadline of one transaction query to the pane host.
const TXN_QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the worker waits for a transaction that is still being written to end (a notice
/// transaction takes about 500 ms; another client's may hold the input lock longer).
const TXN_RUNNING_WAIT: Duration = Duration::from_secs(10);
/// How often a live worker asks again about staged notices whose send it could not resolve.
const UNRESOLVED_RECHECK: Duration = Duration::from_secs(2);

/// How long after a removal of the inbox was first seen the worker waits before it opens (and
/// makes) the inbox again: long enough for an `rm -r` of it to finish.
const REMOVAL_SETTLE: Duration = Duration::from_millis(500);
/// The default deadline of a notice send (queueing behind other transactions included);
/// `BELFRY_DING_SEND_TIMEOUT_MS` overrides it.
const NOTICE_SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a turn-boundary reservation holds its messages for a dispatch that has not yet
/// confirmed or released them: far longer than writing one answer takes, and short enough that
/// a dispatch killed by its harness's hook timeout delays the mail only a little (the messages
/// are pending again after it). `BELFRY_DING_CLAIM_TIMEOUT_MS` overrides it.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(5);
/// The default cap of consecutive belfry-caused turn-stop continuations of one pane (spec
/// §7.5); `BELFRY_DING_MAX_CONTINUATIONS` overrides it.
const MAX_CONTINUATIONS: u32 = 3;

/// How an adapter process ended, for the restart bookkeeping.
enum AdapterEnd {
    /// It closed its stdout or exited: the lease machine sees `adapter-error`.
    Exited,
    /// The worker killed it for a line over [`MAX_LINE`]; the `malformed` hold stands.
    KilledForOverlongLine,
}

/// What a worker is told.
pub enum DingMsg {
    /// Something may have been posted or archived: look now.
    Nudge,
    /// The inbox's watch saw a change (or the watcher lost events): list it afresh now.
    InboxChanged,
    /// An event from the pane host (exit, lifecycle restart).
    Pane(Event),
    /// A hook event forwarded by `belfry dispatch` inside the pane; `applied` is told once
    /// the worker's state holds it, so the hook does not return before, say, a compaction
    /// has invalidated the lease.
    Hook {
        event: HookSeen,
        applied: oneshot::Sender<()>,
    },
    /// A turn-boundary claim from `belfry dispatch` (spec §7.5): the op as it arrived.
    TurnBoundary {
        claim: req::DingTurnBoundary,
        reply: oneshot::Sender<Result<Claimed, String>>,
    },
    /// `belfry ding status`.
    Status(oneshot::Sender<DingState>),
}

/// Everything a worker needs to know about its pane.
#[derive(Clone, Debug)]
pub struct PaneInfo {
    pub session: String,
    pub socket: PathBuf,
    pub incarnation: String,
    pub generation: String,
    pub ding_policy: Option<String>,
    /// The harness adapter's name from the launch spec: naming one declares an agent.
    pub agent_adapter: Option<String>,
    /// The pane host process (`<pid>-<started_at>`), whose journal knows this pane's
    /// transactions; another pane host of the same name knows nothing of them.
    pub pane_host: String,
    pub adapter_command: Option<Vec<String>>,
    /// True when the pane was adopted by a restarted daemon (every lease starts invalid).
    pub adopted: bool,
    /// The hook events that mean the harness compacted its context besides `pre-compact`,
    /// from the declaration of the pane's adapter (empty without one).
    pub compaction_events: Vec<HookSource>,
    /// The adapter's readiness rule (spec §10), if its declaration has one: no notice is sent
    /// before the pane's program accepts input, because a keystroke sent earlier is lost.
    pub readiness: Option<Readiness>,
    /// How long each notice's transaction keeps the pane's input after its Enter (0: not at
    /// all), from the adapter's declaration.
    pub notice_settle_ms: u64,
}

/// The workers' channels, by session.
type Workers = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<DingMsg>>>>;

/// The set of DING workers, by session.
#[derive(Default)]
pub struct DingEngine {
    workers: Workers,
    /// One slot per session, held by its worker for the worker's whole life.
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The daemon's inotify instance, which wakes the workers when their inboxes change.
    wakeups: Arc<InboxWakeups>,
}

/// The daemon's one [`InboxWatcher`] and the task that turns its events into
/// [`DingMsg::InboxChanged`] for the worker whose inbox changed. It is made with the first
/// worker; a daemon that cannot make one (or whose watcher fails later) leaves its workers on
/// the [`POLL`] timer.
#[derive(Default)]
struct InboxWakeups {
    watcher: std::sync::OnceLock<Option<Arc<InboxWatcher>>>,
    /// The session each watch descriptor belongs to.
    sessions: Arc<Mutex<HashMap<i32, String>>>,
    /// Set when reading the watcher failed: no wake-up comes any more.
    failed: Arc<std::sync::atomic::AtomicBool>,
}

/// A worker's watch on its inbox, removed when it is dropped.
struct InboxRegistration {
    watcher: Arc<InboxWatcher>,
    watch: InboxWatch,
    sessions: Arc<Mutex<HashMap<i32, String>>>,
}

impl Drop for InboxRegistration {
    fn drop(&mut self) {
        let mut sessions = self.sessions.lock();
        for descriptor in self.watch.descriptors() {
            sessions.remove(descriptor);
        }
        self.watcher.unwatch(&self.watch);
    }
}

/// The watcher's descriptor, for [`AsyncFd`] (which wants an owner of a raw descriptor).
struct WatcherFd(Arc<InboxWatcher>);

impl std::os::fd::AsRawFd for WatcherFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

impl InboxWakeups {
    /// Watches `inbox` for its worker; `None` (and a log line) when it cannot be watched, and
    /// the worker then polls.
    fn watch(&self, inbox: &Inbox, workers: &Workers) -> Option<InboxRegistration> {
        let watcher = self.watcher(workers)?;
        if self.failed.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let session = inbox.session().to_string();
        match watcher.watch(inbox) {
            Ok(watch) => {
                let mut sessions = self.sessions.lock();
                for &descriptor in watch.descriptors() {
                    sessions.insert(descriptor, session.clone());
                }
                drop(sessions);
                Some(InboxRegistration {
                    watcher,
                    watch,
                    sessions: Arc::clone(&self.sessions),
                })
            }
            Err(err) => {
                tracing::warn!(
                    session,
                    "cannot watch the inbox ({err}); looking at it every {POLL:?} instead"
                );
                None
            }
        }
    }

    /// Whether wake-ups still come.
    fn working(&self) -> bool {
        !self.failed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The watcher, made (with its reading task) on first use.
    fn watcher(&self, workers: &Workers) -> Option<Arc<InboxWatcher>> {
        self.watcher
            .get_or_init(|| {
                let watcher = match InboxWatcher::new() {
                    Ok(watcher) => Arc::new(watcher),
                    Err(err) => {
                        tracing::warn!("no inbox watcher ({err}); DING workers poll instead");
                        return None;
                    }
                };
                // SAFETY: the descriptor is owned by the watcher, which `WatcherFd` keeps alive
                // (an `Arc`) for as long as the `AsyncFd` exists, and nothing closes or
                // replaces it meanwhile.
                let registered = unsafe {
                    AsyncFd::register_with_interest(
                        WatcherFd(Arc::clone(&watcher)),
                        tokio::io::Interest::READABLE,
                    )
                };
                let readable = match registered {
                    Ok(readable) => readable,
                    Err(err) => {
                        tracing::warn!(
                            "cannot wait on the inbox watcher ({err}); DING workers poll instead"
                        );
                        return None;
                    }
                };
                tokio::spawn(forward_wakes(
                    readable,
                    Arc::clone(&self.sessions),
                    Arc::clone(workers),
                    Arc::clone(&self.failed),
                ));
                Some(watcher)
            })
            .clone()
    }
}

/// Reads the watcher's events as they come and tells each worker whose inbox changed, once
/// per read however many events it had; after an overflow, every worker. A read that fails
/// ends the task and sets `failed`, and the workers poll from then on.
async fn forward_wakes(
    readable: AsyncFd<WatcherFd>,
    sessions: Arc<Mutex<HashMap<i32, String>>>,
    workers: Workers,
    failed: Arc<std::sync::atomic::AtomicBool>,
) {
    loop {
        let mut ready = match readable.readable().await {
            Ok(ready) => ready,
            Err(err) => {
                tracing::error!("inbox watcher failed ({err}); DING workers poll instead");
                break;
            }
        };
        let wakes = match readable.get_ref().0.read() {
            Ok(wakes) => wakes,
            Err(err) => {
                tracing::error!("inbox watcher failed ({err}); DING workers poll instead");
                break;
            }
        };
        if wakes.is_empty() {
            ready.clear_ready();
            continue;
        }
        let woken: HashSet<String> = if wakes.overflowed {
            tracing::warn!("inbox watcher lost events; every DING worker looks again");
            workers.lock().keys().cloned().collect()
        } else {
            let sessions = sessions.lock();
            wakes
                .changed
                .iter()
                .filter_map(|descriptor| sessions.get(descriptor).cloned())
                .collect()
        };
        let workers = workers.lock();
        for session in woken {
            if let Some(tx) = workers.get(&session) {
                let _ = tx.send(DingMsg::InboxChanged);
            }
        }
    }
    failed.store(true, std::sync::atomic::Ordering::Relaxed);
    // Wake every worker so each notices at once that it must poll.
    for tx in workers.lock().values() {
        let _ = tx.send(DingMsg::InboxChanged);
    }
}

impl DingEngine {
    /// Starts the worker of a pane (replacing any previous one).
    ///
    /// spec §7.3 (never pasted twice): a replaced worker ends only when it next reads its
    /// closed channel, which can be after a notice it was already sending. Each worker keeps
    /// its own copy of the session's ownership records, so two at once (a pane killed and
    /// created again under its name, faster than the old worker noticed) would each stage and
    /// paste the same message. The new worker therefore waits for the session's slot, which
    /// the old one holds until it has ended; messages for it queue meanwhile.
    pub fn start(&self, info: PaneInfo, state_dir: PathBuf, log_dir: PathBuf) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.workers.lock().insert(info.session.clone(), tx);
        let slot = Arc::clone(self.slots.lock().entry(info.session.clone()).or_default());
        let wake = Wake {
            wakeups: Arc::clone(&self.wakeups),
            workers: Arc::clone(&self.workers),
        };
        tokio::spawn(async move {
            let _slot = slot.lock_owned().await;
            let session = info.session.clone();
            if let Err(err) = run_worker(info, state_dir, log_dir, wake, rx).await {
                tracing::error!(session, "DING worker stopped: {err}");
            }
        });
    }

    /// Stops the worker of a pane (its channel closes; the worker ends and kills its adapter).
    pub fn stop(&self, session: &str) {
        self.workers.lock().remove(session);
    }

    /// Sends a message to a session's worker; false if there is none.
    pub fn tell(&self, session: &str, msg: DingMsg) -> bool {
        match self.workers.lock().get(session) {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }
}

/// The lease tunables: the defaults of spec §7.4, overridable for the daemon with
/// `BELFRY_DING_MAX_LEASE_MS`, `BELFRY_DING_EVENT_TIMEOUT_MS`, `BELFRY_DING_SUBMIT_SETTLE_MS`
/// and `BELFRY_DING_SUBMIT_UNSEEN_MS`.
fn lease_config() -> LeaseConfig {
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

/// The deadline of a notice send: nothing waits forever (a stopped pane host would otherwise
/// hold the worker). A send past it is resolved through the pane host's journal like any send
/// whose reply was lost.
fn notice_send_timeout() -> Duration {
    std::env::var("BELFRY_DING_SEND_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(NOTICE_SEND_TIMEOUT, Duration::from_millis)
}

/// The turn-boundary tunables: how long a reservation holds, and the continuation cap.
fn claim_config() -> (Duration, u32) {
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let timeout = knob("BELFRY_DING_CLAIM_TIMEOUT_MS").map_or(CLAIM_TIMEOUT, Duration::from_millis);
    let cap = knob("BELFRY_DING_MAX_CONTINUATIONS")
        .and_then(|cap| u32::try_from(cap).ok())
        .unwrap_or(MAX_CONTINUATIONS);
    (timeout, cap)
}

fn unix_ms() -> u64 {
    belfry_ding::inbox::now_unix_ms()
}

/// The next safety poll: the next multiple of [`SAFETY_POLL`] since the daemon's first call.
/// Every watched worker looks at the same instants, so an idle daemon wakes once per period
/// for all its workers rather than once per worker.
fn next_safety_poll() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    let periods = epoch.elapsed().as_nanos() / SAFETY_POLL.as_nanos() + 1;
    u32::try_from(periods)
        .ok()
        .and_then(|periods| epoch.checked_add(SAFETY_POLL * periods))
        .unwrap_or_else(|| Instant::now() + SAFETY_POLL)
}

/// What a worker needs to have its inbox watched.
struct Wake {
    wakeups: Arc<InboxWakeups>,
    workers: Workers,
}

/// The worker's own monotonic clock, in milliseconds, for the lease machine.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

/// What the worker keeps for the turn-boundary path (spec §7.5). In memory on purpose: a
/// reservation lives for one dispatch, and the continuation count for one stretch of turns; a
/// restarted daemon starts both afresh (a reservation's messages are pending again, and the
/// count starts at zero, allowing at most one more cap's worth of continuations).
struct TurnClaims {
    /// Reservations of dispatches that have not yet confirmed or released them, by claim id.
    reserved: HashMap<String, Reservation>,
    /// Where the next claim id counts from.
    next_claim: u64,
    /// How long a reservation holds.
    timeout: Duration,
    /// Consecutive belfry-caused continuations since the last turn the user started.
    continuations: u32,
    /// The most of those in a row.
    max_continuations: u32,
    /// Continuations confirmed whose stop the dispatch has not forwarded yet: `belfry
    /// dispatch` confirms a claim before it forwards the hook event, so the `turn-stop` that
    /// follows a continuation is the stop that was continued, not the end of a turn.
    continued_stops: u32,
}

/// Messages held for one dispatch until it has written its answer.
struct Reservation {
    names: Vec<MessageName>,
    until: Instant,
}

impl TurnClaims {
    fn new() -> TurnClaims {
        let (timeout, max_continuations) = claim_config();
        TurnClaims {
            reserved: HashMap::new(),
            next_claim: 1,
            timeout,
            continuations: 0,
            max_continuations,
            continued_stops: 0,
        }
    }

    /// Drops lapsed reservations (their dispatch never settled them) and returns every message
    /// still held.
    fn held(&mut self) -> HashSet<MessageName> {
        let now = Instant::now();
        self.reserved
            .retain(|_, reservation| reservation.until > now);
        self.reserved
            .values()
            .flat_map(|reservation| reservation.names.iter().cloned())
            .collect()
    }
}

struct Worker {
    info: PaneInfo,
    state_dir: PathBuf,
    log_dir: PathBuf,
    inbox: Inbox,
    ownership: OwnershipStore,
    policy: Result<DeliveryPolicy, String>,
    lease: LeaseMachine,
    /// The validator of the running adapter process's events; a new process gets a new one.
    validator: EventValidator,
    /// Set when the pane's program restarted under a running adapter, which must be replaced.
    adapter_outdated: bool,
    clock: Clock,
    counters: Counters,
    last_event: Option<LastEvent>,
    /// The turn-boundary path's state (spec §7.5).
    turns: TurnClaims,
    adapter_state: AdapterProcessState,
    last_hold: Option<HoldReason>,
    /// The program takes no more notices until a restart's lifecycle event says a new one
    /// runs: it exited (the pane host's event, or a conflict of a send said so), or its pane
    /// host refused a notice with nothing written because a kill or a restart had begun
    /// (`aborted`, `written: 0`). A killed pane host sends no such event and is soon gone (the
    /// next pane of the name has a worker of its own); a notice sent to it again could meet its
    /// exit, get no answer, and stay staged without proof either way.
    input_ended: bool,
    first_pass: bool,
    /// Refused entries of `new/` already logged, so each is logged once, not every poll.
    refused_logged: HashSet<PathBuf>,
    /// When to ask again about unresolved transactions (see [`Worker::recheck_unresolved`]).
    next_recheck: Instant,
    /// The inbox's last listing, reused while the inbox cannot have changed.
    scans: ScanCache,
    /// When the removal of the inbox was first seen, while it is not opened again yet.
    removal_seen: Option<Instant>,
    wake: Wake,
    /// The watch on the inbox; without one the worker looks every [`POLL`].
    watch: Option<InboxRegistration>,
    /// Whether the pane's program was seen accepting input (by the adapter's readiness rule);
    /// once seen, it stays so until the program restarts.
    ready: bool,
    /// The program's last restart: the pane's revision then, and when (unix ms). A restarted
    /// program is judged ready again, by its age since the restart and by a screen it drew
    /// since (the old program's screen stays up until the new one draws).
    restarted: Option<(u64, u64)>,
    /// Why the pane was last found not ready, logged once per reason.
    not_ready_logged: Option<String>,
    /// The current program's own status records (OSC 7501), by record id, as the pane host's
    /// `program-status` events told them: while one says `working` or `blocked`, no idle
    /// report leases (the veto of [`LeaseInput::ProgramStatus`]).
    program_records: HashMap<Option<String>, belfry_proto::program_status::StatusRecord>,
    /// What those records last told the lease machine.
    program_turn: ProgramTurn,
}

/// What the worker did with a staged notice whose send outcome it did not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolution {
    /// The pane host proved nothing was written: released, to be announced again.
    Released,
    /// It was (or may have been) written: staged for good.
    Written,
    /// No proof either way: left staged with its transaction, for a later daemon to ask.
    Unresolved,
}

async fn run_worker(
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
    /// Lists the inbox and releases the ownership of messages that are really gone (archived
    /// or deleted), returning the unread ones. A failed scan releases nothing: "cannot list"
    /// is not "archived", and dropping staged or delivered records then would announce every
    /// message again (spec §7.3). Refused but present files keep their records too. None are
    /// returned when the inbox cannot be listed (nothing is announced then). The inbox is
    /// listed again only when it may have changed (see [`ScanCache`]); one unchanged since its
    /// last listing has nothing new to log or release.
    fn unread_reconciled(&mut self) -> Vec<MessageName> {
        self.reopen_removed_inbox();
        let scan = match self.scans.scan(&self.inbox) {
            Ok(Scanned::Unchanged(scan)) => return scan.unread.clone(),
            Ok(Scanned::Fresh(scan)) => scan.clone(),
            Err(err) => {
                tracing::warn!(session = self.info.session, "cannot list inbox: {err}");
                return Vec::new();
            }
        };
        self.reconcile_listing(scan)
    }

    /// Whether an unread message has no owner yet: [`Worker::pending`] without the copy of
    /// the unread names when the inbox is unchanged since its last listing (an agent busy for
    /// long keeps a thousand there, and every look of its worker would copy them all).
    fn has_pending(&mut self) -> bool {
        self.reopen_removed_inbox();
        let scan = match self.scans.scan(&self.inbox) {
            Ok(Scanned::Unchanged(scan)) => {
                return !self.ownership.pending(&scan.unread).is_empty()
            }
            Ok(Scanned::Fresh(scan)) => scan.clone(),
            Err(err) => {
                tracing::warn!(session = self.info.session, "cannot list inbox: {err}");
                return false;
            }
        };
        let unread = self.reconcile_listing(scan);
        !self.ownership.pending(&unread).is_empty()
    }

    /// Logs and reconciles a fresh listing (see [`Worker::unread_reconciled`]); the unread
    /// messages.
    fn reconcile_listing(&mut self, scan: UnreadScan) -> Vec<MessageName> {
        self.log_refused(scan.refused);
        let mut present = scan.unread.clone();
        present.extend(scan.held);
        if let Err(err) = self.ownership.reconcile(&present) {
            tracing::warn!(
                session = self.info.session,
                "cannot reconcile ownership: {err}"
            );
            // Look again next time, and try again then.
            self.scans.forget();
        }
        scan.unread
    }

    /// Watches the inbox the worker has open (replacing any earlier watch), and lists it with
    /// the cache that fits: a watched inbox is listed afresh on every wake-up.
    fn watch_inbox(&mut self) {
        self.watch = None;
        self.watch = self.wake.wakeups.watch(&self.inbox, &self.wake.workers);
        self.scans = if self.watch.is_some() {
            ScanCache::watched()
        } else {
            ScanCache::default()
        };
    }

    /// When the worker looks at the inbox anyway if no message came: at the next safety poll
    /// when wake-ups come, after the plain poll when they do not. While a staged notice's
    /// outcome is unknown it looks at least every [`UNRESOLVED_RECHECK`], to ask again.
    fn look_again_at(&mut self) -> tokio::time::Instant {
        if self.watch.is_some() && !self.wake.wakeups.working() {
            self.watch_inbox();
        }
        let now = Instant::now();
        let look = if self.watch.is_some() {
            next_safety_poll()
        } else {
            now + POLL
        };
        let look = if self.ownership.unresolved_transactions().is_empty() {
            look
        } else {
            look.min(now + UNRESOLVED_RECHECK)
        };
        // A removed inbox is opened again once its removal has settled.
        let look = match self.removal_seen {
            Some(seen) => look.min(seen + REMOVAL_SETTLE),
            None => look,
        };
        tokio::time::Instant::from_std(look)
    }

    /// The inbox works on the directory handles it opened; after someone removed the inbox
    /// (and perhaps a post created it again), open it again by its path.
    ///
    /// Not at the first sign of the removal: `rm -r` takes the inbox's children first and its
    /// own directory last, and the first removal already wakes the worker (inotify). Making a
    /// directory again in between would make that `rm` fail with "Directory not empty", so the
    /// inbox is opened again (and made, if no post made it meanwhile) only once
    /// [`REMOVAL_SETTLE`] has passed since the removal was first seen.
    fn reopen_removed_inbox(&mut self) {
        if !self.inbox.is_removed() {
            self.removal_seen = None;
            return;
        }
        let seen = *self.removal_seen.get_or_insert_with(Instant::now);
        if seen.elapsed() < REMOVAL_SETTLE {
            return;
        }
        match Inbox::open_session(&self.state_dir, self.inbox.session().clone()) {
            Ok(inbox) => {
                self.removal_seen = None;
                tracing::info!(
                    session = self.info.session,
                    "inbox directory was removed; opened it again"
                );
                self.inbox = inbox;
                self.watch_inbox();
            }
            Err(err) => {
                tracing::warn!(session = self.info.session, "cannot reopen inbox: {err}");
            }
        }
    }

    /// Logs, once per entry, why a file with a message name in `new/` is not a message (a
    /// link, a hard-linked file): it is never read, noticed or moved, and the log says so.
    fn log_refused(&mut self, refused: Vec<RefusedEntry>) {
        self.refused_logged
            .retain(|path| refused.iter().any(|entry| entry.path == *path));
        for entry in refused {
            if self.refused_logged.insert(entry.path.clone()) {
                tracing::warn!(
                    session = self.info.session,
                    "skipping {}: {}",
                    entry.path.display(),
                    entry.reason
                );
            }
        }
    }

    /// Unread messages nobody owns yet and no dispatch holds, FIFO. Ownership of archived
    /// messages is released.
    fn pending(&mut self) -> Vec<MessageName> {
        let unread = self.unread_reconciled();
        let held = self.turns.held();
        self.ownership
            .pending(&unread)
            .into_iter()
            .filter(|name| !held.contains(*name))
            .cloned()
            .collect()
    }

    fn note_hold(&mut self, reason: HoldReason) {
        if self.last_hold != Some(reason) {
            self.counters.record_hold(reason);
            self.last_hold = Some(reason);
        }
    }

    /// Builds the notice for the next delivery: the first pass of a worker turns a backlog of
    /// several messages into one recovery notice (spec §7.2).
    fn next_notice(&mut self, pending: &[MessageName]) -> (Vec<MessageName>, String) {
        let backlog = self.first_pass && pending.len() > 1;
        self.first_pass = false;
        if backlog {
            return (pending.to_vec(), recovery_notice(pending.len(), pending));
        }
        let name = pending[0].clone();
        let front = self
            .inbox
            .read(&name)
            .map(|m| m.front_matter)
            .unwrap_or_default();
        let line = notice_line(&name, &front);
        (vec![name], line)
    }

    /// A transaction id no other send to this pane host has used: this daemon's pid and
    /// start time (a later daemon differs in one or the other), a daemon-wide sequence number
    /// (so a restarted worker never reuses one), and, after a dot, the pane host it is sent
    /// to, whose journal alone can answer for it.
    fn next_txn(&self) -> String {
        static DAEMON_START_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let start = *DAEMON_START_MS.get_or_init(unix_ms);
        let sequence = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!(
            "ding-{}-{start}-{sequence}.{}",
            std::process::id(),
            self.info.pane_host
        )
    }

    /// Whether `txn` was sent to the pane host this worker talks to.
    fn sent_to_this_pane_host(&self, txn: &str) -> bool {
        txn.rsplit_once('.')
            .is_some_and(|(_, host)| host == self.info.pane_host)
    }

    /// Makes pending again every staged notice whose program is gone before it saw the
    /// notice whole, noting why for `ding status` (issue 39: such a notice stayed staged for
    /// good). Two cases: its send went to another pane host of this name, which is gone and
    /// its program with it, and nobody learned how the send ended; or its send was cut off
    /// part-way and the program it was addressed to has been replaced. A notice written to its
    /// end, or one whose program still runs, stays staged: never pasted twice to one program.
    fn requeue_stranded(&mut self) {
        for notice in self.ownership.staged() {
            let why = match (&notice.txn, &notice.incarnation) {
                (Some(txn), _) if !self.sent_to_this_pane_host(txn) => format!(
                    "sent again: the pane host its notice went to is gone, with the program \
                     that may have seen part of it, and how the send ended was never learned \
                     (transaction {txn})"
                ),
                (_, Some(incarnation))
                    if notice.cut_off && *incarnation != self.info.incarnation =>
                {
                    format!(
                        "sent again: its notice was cut off part-way, and the program that saw \
                     the part (incarnation {incarnation}) is gone"
                    )
                }
                _ => continue,
            };
            match self
                .ownership
                .requeue(std::slice::from_ref(&notice.name), &why)
            {
                Ok(()) => tracing::info!(session = self.info.session, "{}: {why}", notice.name),
                Err(err) => tracing::error!(
                    session = self.info.session,
                    "cannot make {} pending again: {err}",
                    notice.name
                ),
            }
        }
    }

    /// Asks the pane host about every staged notice whose send outcome is not recorded.
    async fn resolve_stranded(&mut self) {
        self.requeue_stranded();
        for (txn, names) in self.ownership.unresolved_transactions() {
            let resolution = self
                .resolve_transaction(&txn, &names, TXN_RUNNING_WAIT)
                .await;
            tracing::info!(
                session = self.info.session,
                "staged notice of transaction {txn} ({} message(s)): {resolution:?}",
                names.len()
            );
        }
    }

    /// Every [`UNRESOLVED_RECHECK`], asks once more about the staged notices sent to this
    /// pane host whose outcome is still unknown (a pane host that did not answer in time, a
    /// transaction that was still running), so a notice that turns out never written is not
    /// stranded until the next daemon.
    async fn recheck_unresolved(&mut self) {
        if Instant::now() < self.next_recheck {
            return;
        }
        self.next_recheck = Instant::now() + UNRESOLVED_RECHECK;
        for (txn, names) in self.ownership.unresolved_transactions() {
            if self.sent_to_this_pane_host(&txn) {
                let resolution = self.resolve_transaction(&txn, &names, Duration::ZERO).await;
                if resolution != Resolution::Unresolved {
                    tracing::info!(
                        session = self.info.session,
                        "staged notice of transaction {txn}: {resolution:?}"
                    );
                }
            }
        }
    }

    /// Learns from the pane host what became of transaction `txn`, and records it: released
    /// only on proof that nothing was written (the query fences a send that has not started,
    /// so it never starts afterwards); a notice that may have been written is never pasted
    /// again. A transaction still running is asked about again for up to `running_wait`.
    async fn resolve_transaction(
        &mut self,
        txn: &str,
        names: &[MessageName],
        running_wait: Duration,
    ) -> Resolution {
        if !self.sent_to_this_pane_host(txn) {
            // The pane host it went to is gone, and with it the only record of whether a byte
            // reached its program: without proof, the notice stays staged.
            return Resolution::Unresolved;
        }
        let give_up = Instant::now() + running_wait;
        let mut retry = Backoff::constant(Duration::from_millis(50));
        loop {
            let state = self.query_transaction(txn).await;
            let resolution = match state {
                Some(TxnState::NeverWritten) => match self.ownership.release_unsent(names) {
                    Ok(()) => Resolution::Released,
                    Err(err) => {
                        tracing::error!(
                            session = self.info.session,
                            "cannot release notice: {err}"
                        );
                        Resolution::Unresolved
                    }
                },
                Some(TxnState::Written) => match self.ownership.confirm_written(names) {
                    Ok(()) => Resolution::Written,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot record notice: {err}");
                        Resolution::Unresolved
                    }
                },
                Some(TxnState::Running) if Instant::now() < give_up => {
                    retry.sleep().await;
                    continue;
                }
                Some(TxnState::Running | TxnState::Unknown) | None => Resolution::Unresolved,
            };
            if resolution != Resolution::Unresolved {
                self.settle_transaction(txn).await;
            }
            return resolution;
        }
    }

    async fn query_transaction(&self, txn: &str) -> Option<TxnState> {
        let request = Request::new(
            0,
            req::Txn {
                session: None,
                txn: txn.to_string(),
                settle: None,
                host: Some(self.info.pane_host.clone()),
            },
        );
        let reply = tokio::time::timeout(
            TXN_QUERY_TIMEOUT,
            registry::pane_ask::<belfry_proto::reply::TxnState>(&self.info.socket, &request),
        )
        .await;
        match reply {
            Ok(Ok(reply)) => {
                let state = reply.state.as_deref().and_then(TxnState::parse);
                if state.is_none() {
                    tracing::warn!(session = self.info.session, "txn {txn}: {reply:?}");
                }
                state
            }
            Ok(Err(err)) => {
                tracing::warn!(session = self.info.session, "txn {txn}: {err}");
                None
            }
            Err(_) => {
                tracing::warn!(session = self.info.session, "txn {txn}: no answer in time");
                None
            }
        }
    }

    /// Lets the pane host forget a transaction whose outcome is now durable here; best
    /// effort (a journal entry left behind only takes room).
    async fn settle_transaction(&self, txn: &str) {
        let request = Request::new(
            0,
            req::Txn {
                session: None,
                txn: txn.to_string(),
                settle: Some(true),
                host: Some(self.info.pane_host.clone()),
            },
        );
        let _ = tokio::time::timeout(
            TXN_QUERY_TIMEOUT,
            registry::pane_request(&self.info.socket, &request),
        )
        .await;
    }

    /// Stages the names durably, with the id of the transaction that carries the notice, then
    /// runs the notice transaction. Returns the send reply.
    async fn stage_and_send(
        &mut self,
        names: &[MessageName],
        notice: &str,
        expect: Option<Expect>,
    ) -> Option<Sent> {
        let txn = self.next_txn();
        let incarnation = self.info.incarnation.clone();
        // The revision the guarded send was judged at goes into the log line of a notice sent,
        // so what the program reported of itself then can be looked up (docs/evaluation.md).
        let judged_revision = expect.as_ref().and_then(|expect| expect.revision);
        match self
            .ownership
            .stage_for(names, Some(&txn), Some(&incarnation), unix_ms())
        {
            Ok(StageOutcome::Staged) => {}
            Ok(StageOutcome::AlreadyOwned { .. }) => return None,
            Err(err) => {
                tracing::error!(session = self.info.session, "cannot stage notice: {err}");
                return None;
            }
        }
        let request = Request::new(
            0,
            req::Send {
                session: None,
                expect,
                input: wire_steps(&notice_transaction(notice, self.info.notice_settle_ms)),
                txn: Some(txn.clone()),
                // Marked as DING's own, so the pane host does not announce it as a person's
                // or a supervisor's input (`typed`), which would hold the next notice behind it.
                notice: Some(true),
                timeout_ms: None,
            },
        );
        let reply = match tokio::time::timeout(
            notice_send_timeout(),
            registry::pane_call(&self.info.socket, &request),
        )
        .await
        {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(
                err @ (PaneError::Unreachable(_) | PaneError::Busy(_) | PaneError::Foreign(_)),
            )) => {
                // The request was never sent (no connection, or one refused before a byte was
                // written), so no pane host can have written the notice: it may be sent again.
                // A pane killed while its worker was busy leaves wake-ups queued that try it.
                tracing::warn!(session = self.info.session, "notice not sent: {err}");
                if let Err(err) = self.ownership.release_unsent(names) {
                    tracing::error!(session = self.info.session, "cannot release notice: {err}");
                }
                return None;
            }
            Ok(Err(err)) => Err(err.to_string()),
            Err(_) => Err("no reply before the notice send deadline".to_string()),
        }
        .map(|reply| (Reply::<Sent>::read(&reply), reply));
        match reply {
            Ok((Ok(Reply::Ok(sent @ Sent::Sent { .. })), _)) => {
                self.counters.record_send();
                tracing::info!(
                    session = self.info.session,
                    judged_revision,
                    "notice sent: {notice}"
                );
                // Written: staged for good. Recorded before the pane host may forget it.
                match self.ownership.confirm_written(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot record notice: {err}")
                    }
                }
                Some(sent)
            }
            Ok((Ok(Reply::Ok(conflict @ Sent::Conflict { .. })), _)) => {
                // A conflict wrote zero bytes: the notice may be sent again later.
                self.counters.record_conflict();
                match self.ownership.release_unsent(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot release notice: {err}")
                    }
                }
                Some(conflict)
            }
            Ok((Ok(Reply::Err(err)), reply)) if err.written == Some(0) => {
                // The pane host itself says no byte of the transaction reached the PTY (a send
                // refused because it is stopping, or that never got the input lock): the
                // notice may be sent again. This is the journal's own answer, given in the
                // reply because a stopping pane host answers no later `txn` query.
                tracing::warn!(session = self.info.session, "notice not written: {reply}");
                if err.code == ErrorCode::Aborted {
                    self.input_ended = true;
                }
                match self.ownership.release_unsent(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot release notice: {err}")
                    }
                }
                None
            }
            Ok((Ok(Reply::Err(err)), reply)) if err.written.is_some_and(|written| written > 0) => {
                // The pane host says the transaction stopped part-way (a restart aborted it
                // after the paste, the program stopped reading): the program has part of the
                // notice and no Enter. It stays staged while that program runs, and is owed
                // to the next one if it goes (`Worker::requeue_stranded`).
                tracing::warn!(session = self.info.session, "notice cut off: {reply}");
                match self.ownership.confirm_cut_off(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot record notice: {err}")
                    }
                }
                None
            }
            Ok((_, reply)) => {
                // An error reply: refused before anything was written, or a write that failed
                // part-way. Only the pane host's journal can tell which.
                tracing::error!(session = self.info.session, "notice refused: {reply}");
                let resolution = self
                    .resolve_transaction(&txn, names, TXN_RUNNING_WAIT)
                    .await;
                tracing::info!(
                    session = self.info.session,
                    "refused notice: {resolution:?}"
                );
                None
            }
            Err(err) => {
                // Unknown whether bytes reached the pane: ask the pane host; without proof
                // that nothing was written, stay staged and never paste twice.
                let resolution = self
                    .resolve_transaction(&txn, names, TXN_RUNNING_WAIT)
                    .await;
                tracing::error!(
                    session = self.info.session,
                    "notice transport failed ({err}); {resolution:?}"
                );
                None
            }
        }
    }

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

    async fn run_rich(&mut self, command: Vec<String>, rx: &mut mpsc::UnboundedReceiver<DingMsg>) {
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

    fn apply(&mut self, input: LeaseInput<'_>) {
        let now = self.clock.now();
        self.lease.apply(input, now);
    }

    /// spec §10: whether the pane's program accepts input by its adapter's readiness rule
    /// (ready without a rule). The pane host is asked for its start time and screen; a pane
    /// host that does not answer is not ready, so nothing is typed into it. Each new reason
    /// the pane is not ready is logged once.
    async fn ready_for_input(&mut self) -> bool {
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

    /// Messages every policy handles the same way.
    async fn handle_common(&mut self, msg: DingMsg) {
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

    /// A prompt submitted in the pane (spec §7.4, §7.5): a prompt the user wrote ends the run
    /// of belfry-caused continuations, and a prompt carrying the exact notice DING typed for a
    /// staged message is that notice's `accepted` receipt (the harness took it as a prompt).
    fn prompt_submitted(&mut self, event: &HookSeen) {
        if event.prompt == Some(req::PromptOrigin::User) {
            self.turns.continuations = 0;
        }
        for name in &event.notices {
            let Ok(name) = MessageName::parse(name) else {
                continue;
            };
            let outcome = self.ownership.record_receipt(
                &name,
                belfry_ding::protocol::ReceiptState::Accepted,
                unix_ms(),
            );
            match outcome {
                Ok(outcome) => tracing::info!(
                    session = self.info.session,
                    "prompt submit carries the notice of {name}: {outcome:?}"
                ),
                Err(err) => tracing::warn!(
                    session = self.info.session,
                    "cannot record the receipt of {name}: {err}"
                ),
            }
        }
    }

    /// A turn-boundary claim from `belfry dispatch`: its event validated exactly like an
    /// adapter's (except for the adapter's sequence, which it does not share), then the step it
    /// asks for (spec §7.5). Without a step (an older dispatcher) the messages are owned at
    /// once; a `reserve` holds them for the dispatch until its `confirm` (they become
    /// hook-owned) or `release`, or until the reservation lapses.
    fn turn_boundary(&mut self, claim: &req::DingTurnBoundary) -> Result<Claimed, String> {
        let line = claim.event.to_string();
        let parsed = belfry_ding::protocol::parse_event(&line).map_err(|e| e.to_string())?;
        let EventBody::TurnBoundary { messages, .. } = &parsed.body else {
            return Err(format!(
                "expected a turn-boundary event, got {}",
                parsed.kind()
            ));
        };
        if parsed.header.session.as_str() != self.info.session {
            return Err(format!(
                "event names session {:?}, not {:?}",
                parsed.header.session.as_str(),
                self.info.session
            ));
        }
        if parsed.header.incarnation != self.info.incarnation {
            return Err(HoldReason::IncarnationMismatch.as_str().to_string());
        }
        if parsed.header.generation != self.info.generation {
            return Err(HoldReason::GenerationMismatch.as_str().to_string());
        }
        let purpose = claim.purpose.unwrap_or(req::ClaimPurpose::Context);
        match claim.step {
            None => self.own_at_once(messages),
            Some(req::ClaimStep::Reserve) => Ok(self.reserve(messages, purpose)),
            Some(req::ClaimStep::Confirm) => {
                self.confirm(messages, claim.claim.as_deref(), purpose)
            }
            Some(req::ClaimStep::Release) => {
                if let Some(id) = &claim.claim {
                    self.turns.reserved.remove(id);
                }
                Ok(claimed(&[], messages))
            }
        }
    }

    /// The named messages nobody owns and no dispatch holds, in the event's order.
    fn claimable(&mut self, messages: &[MessageName]) -> Vec<MessageName> {
        // Only messages nobody owns yet may be claimed by the hook: a staged notice already
        // went (or is going) through the PTY.
        let pending = self.pending();
        messages
            .iter()
            .filter(|m| pending.contains(m))
            .cloned()
            .collect()
    }

    /// The one-step claim of dispatchers that do not reserve: owned at once.
    fn own_at_once(&mut self, messages: &[MessageName]) -> Result<Claimed, String> {
        let claimable = self.claimable(messages);
        let unread = self.unread_reconciled();
        let outcome = self
            .ownership
            .record_turn_boundary(&claimable, &unread, unix_ms())
            .map_err(|e| e.to_string())?;
        let refused: Vec<MessageName> = messages
            .iter()
            .filter(|m| !claimable.contains(m))
            .cloned()
            .collect();
        Ok(claimed(&outcome.hook_owned, &refused))
    }

    /// Holds the claimable messages for one dispatch. A continuation past the pane's cap is
    /// refused as a whole (`held: capped`): the turn stops, and the mail waits for the next
    /// tier (spec §7.5).
    fn reserve(&mut self, messages: &[MessageName], purpose: req::ClaimPurpose) -> Claimed {
        if purpose == req::ClaimPurpose::Continuation
            && self.turns.continuations >= self.turns.max_continuations
        {
            tracing::info!(
                session = self.info.session,
                "turn-stop continuation refused: {} in a row already (the cap)",
                self.turns.continuations
            );
            return Claimed {
                held: Some("capped".into()),
                ..claimed(&[], messages)
            };
        }
        let claimable = self.claimable(messages);
        let refused: Vec<MessageName> = messages
            .iter()
            .filter(|m| !claimable.contains(m))
            .cloned()
            .collect();
        if claimable.is_empty() {
            return claimed(&[], &refused);
        }
        let id = format!("claim-{}", self.turns.next_claim);
        self.turns.next_claim += 1;
        let until = Instant::now() + self.turns.timeout;
        self.turns.reserved.insert(
            id.clone(),
            Reservation {
                names: claimable.clone(),
                until,
            },
        );
        Claimed {
            reserved: names(&claimable),
            claim: Some(id),
            ..claimed(&[], &refused)
        }
    }

    /// The dispatch wrote its answer: the messages it reserved (and names again) become
    /// hook-owned, and a continuation counts towards the cap. A reservation that lapsed before
    /// the confirm came still gives the hook the messages nobody took meanwhile: the harness has
    /// their notices.
    fn confirm(
        &mut self,
        messages: &[MessageName],
        claim: Option<&str>,
        purpose: req::ClaimPurpose,
    ) -> Result<Claimed, String> {
        let id = claim.ok_or("a confirm must name the claim its reserve answered")?;
        let names: Vec<MessageName> = match self.turns.reserved.remove(id) {
            Some(reservation) => messages
                .iter()
                .filter(|m| reservation.names.contains(m))
                .cloned()
                .collect(),
            None => {
                tracing::warn!(
                    session = self.info.session,
                    "turn-boundary {id} confirmed after it lapsed"
                );
                self.claimable(messages)
            }
        };
        let unread = self.unread_reconciled();
        let outcome = self
            .ownership
            .record_turn_boundary(&names, &unread, unix_ms())
            .map_err(|e| e.to_string())?;
        if purpose == req::ClaimPurpose::Continuation && !outcome.hook_owned.is_empty() {
            self.turns.continuations += 1;
            self.turns.continued_stops += 1;
            // The harness goes on with its turn instead of stopping, which its screen may
            // not show yet.
            self.apply(LeaseInput::Submitted);
        }
        let refused: Vec<MessageName> = messages
            .iter()
            .filter(|m| !names.contains(m))
            .cloned()
            .collect();
        Ok(claimed(&outcome.hook_owned, &refused))
    }

    fn status(&mut self) -> DingState {
        let now = self.clock.now();
        let lease = match self.policy {
            Ok(DeliveryPolicy::Aggressive | DeliveryPolicy::Undeclared) => {
                LeaseStatus::NotApplicable
            }
            _ => LeaseStatus::from_state(self.lease.state(now), now),
        };
        let unread = self.unread_reconciled();
        let messages = unread
            .iter()
            .map(|name| {
                let front = self
                    .inbox
                    .read(name)
                    .map(|m| m.front_matter)
                    .unwrap_or_default();
                let state = MessageState::derive(self.ownership.state_of(name), lease);
                let mut status = MessageStatus::new(name.clone(), &front, state);
                status.sent_again = self.ownership.sent_again_because(name).map(str::to_owned);
                status
            })
            .collect();
        let presence = Presence::load(&self.inbox).ok().flatten();
        match &self.policy {
            Ok(policy) => {
                let status = DingStatus {
                    session: self.lease.identity().session.clone(),
                    policy: policy.clone(),
                    adapter: self.adapter_state.clone(),
                    presence,
                    last_event: self.last_event.clone(),
                    lease,
                    not_ready: if self.ready {
                        None
                    } else {
                        self.not_ready_logged.clone()
                    },
                    messages,
                    counters: self.counters.clone(),
                };
                DingState {
                    text: status.render_text(),
                    // A status of strings and numbers always serializes; `null` would say
                    // "invalid policy" to a reader, so a failure is logged and says so too.
                    status: serde_json::to_value(&status).unwrap_or_else(|err| {
                        tracing::error!(
                            "DING status of {} did not serialize: {err}",
                            status.session
                        );
                        Value::Null
                    }),
                    error: None,
                }
            }
            Err(reason) => DingState {
                status: Value::Null,
                text: format!("invalid DING policy: {reason}; every message is held"),
                error: Some(reason.clone()),
            },
        }
    }
}

/// A DING transaction's steps as the protocol's input steps.
fn wire_steps(steps: &[Step]) -> Vec<InputStep> {
    steps
        .iter()
        .map(|step| match step {
            Step::Paste(text) => InputStep::Paste(text.clone()),
            Step::DelayMs(ms) => InputStep::DelayMs(*ms),
            Step::Key(key) => InputStep::Key(key.clone()),
        })
        .collect()
}

fn daemon_socket_for(_info: &PaneInfo) -> PathBuf {
    belfry_transport::paths::daemon_socket()
}

/// A claim's answer: `hook_owned` now owned by the hook, `refused` the rest.
fn claimed(hook_owned: &[MessageName], refused: &[MessageName]) -> Claimed {
    Claimed {
        hook_owned: names(hook_owned),
        refused: names(refused),
        reserved: Vec::new(),
        claim: None,
        held: None,
    }
}

/// Message names as the wire spells them.
fn names(messages: &[MessageName]) -> Vec<String> {
    messages.iter().map(|m| m.as_str().to_owned()).collect()
}
