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
//!
//! This file is the engine's public face: what the server tells a worker ([`DingMsg`]), what a
//! worker knows of its pane ([`PaneInfo`]), and the set of workers ([`DingEngine`]). One
//! `Worker` runs per pane; its state is one struct, and each concern of it is a file holding
//! the `impl Worker` block of that concern:
//! - `worker.rs`: the worker's state, its start (`run_worker`), the aggressive loop, the
//!   messages every policy handles alike (pane events, hook events), and readiness.
//! - `wake.rs`: when the worker looks at its inbox: the daemon's one inotify watcher and its
//!   wake-ups, the polls that back them, and listing the inbox with its ownership reconciled.
//! - `transaction.rs`: a notice from its text to its durable outcome: staging it, sending it
//!   under a transaction id, and resolving sends whose outcome was lost through the pane
//!   host's journal.
//! - `rich.rs`: the rich policy: the adapter sidecar (started, read, restarted with backoff),
//!   its events fed to the lease machine, and delivery under a lease.
//! - `claims.rs`: the turn-boundary path of `belfry dispatch` (spec §7.5): reservations,
//!   confirms, and the cap of continuations.
//! - `status.rs`: `belfry ding status` of one pane.

mod claims;
mod rich;
mod status;
mod transaction;
mod wake;
mod worker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use belfry_proto::event::HookSeen;
use belfry_proto::reply::{Claimed, DingState};

/// `ding.status`'s answer as the daemon writes it: the typed status model, `None` (`null` on
/// the wire) when the pane's policy is invalid.
pub(crate) type DingReply = DingState<Option<belfry_ding::status::DingStatus>>;
use belfry_proto::request as req;
use belfry_proto::Event;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use self::wake::{InboxWakeups, Wake};
use self::worker::run_worker;
use crate::lifecycle::{HookSource, Readiness};

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
    Status(oneshot::Sender<DingReply>),
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

fn unix_ms() -> u64 {
    belfry_ding::inbox::now_unix_ms()
}
