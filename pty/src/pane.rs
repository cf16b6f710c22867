//! One pane: the PTY master, the child, the screen model, the revision and the guarded write
//! (spec §2, §3).
//!
//! Two locks, always taken in this order:
//! 1. `input` (async): held for a whole input transaction, including its delays, so no other
//!    writer (attached keyboards, DING, query answers) interleaves bytes with it.
//! 2. `state` (sync, never held across an await): the screen model, the revision and the client
//!    list. Every output chunk is read from the master *and* applied and counted while holding
//!    it, so no output is ever "taken but not yet applied" when a guarded send compares.
//!
//! Nothing holds `input` without a deadline: every write of a transaction waits for the master
//! at most until the transaction's deadline, and restart and kill never take `input` at all;
//! they bump the abort epoch (under `state`), which ends the transaction in flight before its
//! next byte. (`restart_lock` only keeps two restarts apart; it is never taken with `input`.)

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::unix::AsyncFd;
use tokio::sync::{broadcast, mpsc, watch, Notify};

use crate::input::{encode_paste, Step, DEFAULT_TIMEOUT_MS};
use crate::retry::{poll_until, Backoff};
use crate::screen::{PenOnlyRun, Screen};
use crate::spec::{new_incarnation, LaunchSpec, SizePolicy};
use crate::wire::{Frame, PenOnly};

use belfry_proto::event::{Event, Lifecycle};
use belfry_proto::Control;
/// How a child ended, what a guarded send expects (spec §3; absent fields are not compared)
/// and the pane's identity at one instant: the protocol's types.
pub use belfry_proto::{ExitStatus, Expect, Identity};

/// The outcome of a send. A conflict wrote zero bytes.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    Sent {
        revision: u64,
    },
    Conflict {
        actual: Identity,
        exited: bool,
    },
    /// The requester went away while the send waited for the input lock; nothing was written.
    Abandoned,
}

/// Why an input transaction ended early. Every variant but `InputBusy` may follow written
/// bytes; `written` says how many, so a caller never mistakes a partial write for none.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(
        "could not start within {} ms: the input lock stayed busy (another transaction or a \
         restart is still running); nothing was written",
        waited.as_millis()
    )]
    InputBusy { waited: Duration },
    #[error(
        "the program did not read its input within {} ms: {written} bytes written, stopped in \
         step {} of {steps}",
        timeout.as_millis(),
        step + 1
    )]
    TimedOut {
        written: usize,
        step: usize,
        steps: usize,
        timeout: Duration,
    },
    #[error("aborted by {by}: {written} bytes written, stopped in step {} of {steps}", step + 1)]
    Aborted {
        written: usize,
        step: usize,
        steps: usize,
        by: &'static str,
    },
    #[error("write to the PTY failed after {written} bytes: {source}")]
    Io {
        written: usize,
        source: std::io::Error,
    },
}

impl WriteError {
    /// How many bytes of the transaction reached the PTY before it ended.
    pub fn written(&self) -> usize {
        match self {
            WriteError::InputBusy { .. } => 0,
            WriteError::TimedOut { written, .. }
            | WriteError::Aborted { written, .. }
            | WriteError::Io { written, .. } => *written,
        }
    }
}

pub use belfry_transport::deadline::lock_wait;

/// The refusal of a transaction that would start after the pane host began stopping its child:
/// nothing was written.
fn stopped(by: &'static str, steps: usize) -> WriteError {
    WriteError::Aborted {
        written: 0,
        step: 0,
        steps,
        by,
    }
}

/// What the compare of a send decided.
enum Start {
    /// A restart is replacing the child: wait for it, then compare again.
    Restarting,
    /// Zero bytes written.
    Conflict(SendOutcome),
    /// The transaction runs; the first step's bytes and how many of them the PTY took at once.
    Started(Transaction, Option<(Vec<u8>, usize)>),
}

/// The bookkeeping of one running transaction.
struct Transaction {
    written: usize,
    step: usize,
    steps: usize,
    write_timeout: Duration,
    /// When the writes must be done by; moved later by each delay step.
    deadline: tokio::time::Instant,
    /// The abort epoch when the transaction started.
    epoch: u64,
    abort: watch::Receiver<(u64, &'static str)>,
}

impl Transaction {
    fn timed_out(&self) -> WriteError {
        WriteError::TimedOut {
            written: self.written,
            step: self.step,
            steps: self.steps,
            timeout: self.write_timeout,
        }
    }

    fn aborted(&self) -> WriteError {
        WriteError::Aborted {
            written: self.written,
            step: self.step,
            steps: self.steps,
            by: self.abort.borrow().1,
        }
    }

    fn io(&self, source: std::io::Error) -> WriteError {
        WriteError::Io {
            written: self.written,
            source,
        }
    }
}

/// One attached client as the pane sees it.
pub struct ClientSlot {
    pub id: u64,
    pub read_only: bool,
    pub size: (u16, u16),
    pub last_active: Instant,
    tx: mpsc::Sender<Frame>,
    /// The output bytes in `tx`'s queue (the receiving [`ClientQueue`] takes them off).
    queued: Arc<AtomicUsize>,
    /// Notified when the queue goes down to [`CLIENT_WAIT_AT`] bytes, or the client's
    /// [`ClientQueue`] is dropped (it has gone).
    room: Arc<Notify>,
    /// How much longer the reader may wait for this client to take its output.
    patience: Patience,
    lagged: Arc<AtomicBool>,
    wake: Arc<Notify>,
    /// The client's terminal is smaller than the pane: it is sent redraws of the part around
    /// the cursor ([`Screen::cropped_redraw`]) instead of the pane's output, which would
    /// draw past its edges.
    cropped: bool,
    /// Controls broadcast while the client lagged or its queue was full (the program's exit
    /// among them): unlike output, which a redraw replaces, they are sent after that redraw
    /// ([`Pane::resync`]), so a client that fell behind still learns that the program ended.
    missed: Vec<Frame>,
    /// Output bytes not queued because the client lagged (a cropped client's aside: it is
    /// shown the model, not the output), which the next resynchronisation reports.
    dropped: usize,
    /// The reader stopped waiting for this client because its patience was spent; the next
    /// resynchronisation says so.
    held_in_vain: bool,
    /// What the log has said, and not yet said, of this client's falling behind.
    lag_log: LagLog,
}

impl ClientSlot {
    /// Whether the reader waits for this client before it reads more output
    /// ([`CLIENT_WAIT_AT`]): a writable client, not lagging, with more than that queued.
    fn waited_for(&self) -> bool {
        !self.read_only
            && !self.lagged.load(Ordering::Relaxed)
            && self.queued.load(Ordering::Relaxed) > CLIENT_WAIT_AT
    }

    /// Whether this client's terminal is smaller than `pane` in either direction.
    fn smaller_than(&self, pane: (u16, u16)) -> bool {
        self.size.0 < pane.0 || self.size.1 < pane.1
    }
}

/// How often the pane host's log speaks of one attach client falling behind: the first time at
/// once, then at most once per this window, each line summing up the resynchronisations since
/// the one before, and a last line when the client leaves. A terminal slower than the program
/// for good falls behind again and again for as long as the program prints without pause
/// (once a second or so with one that takes 6 MB a second, a line each time before).
const LAG_LOG_WINDOW: Duration = Duration::from_secs(10);

/// One client's falling behind as the log has told it ([`LAG_LOG_WINDOW`]): when it last said
/// something, and what happened since that it has not said yet.
#[derive(Default)]
struct LagLog {
    logged_at: Option<Instant>,
    /// Resynchronisations since `logged_at`, ...
    times: u64,
    /// ... the output bytes their redraws replaced, ...
    bytes: u64,
    /// ... and how many of them came after the program was held for the client in vain.
    held: u64,
}

impl LagLog {
    /// One resynchronisation that replaced `bytes` output bytes: `Some` with what the log says
    /// of the ones since the last line (empty when there were none) when this one is logged,
    /// `None` when it is counted for a later line.
    fn resynchronised(&mut self, bytes: usize, held: bool, now: Instant) -> Option<String> {
        let due = self
            .logged_at
            .is_none_or(|at| now.saturating_duration_since(at) >= LAG_LOG_WINDOW);
        if !due {
            self.times += 1;
            self.bytes += bytes as u64;
            self.held += u64::from(held);
            return None;
        }
        self.logged_at = Some(now);
        Some(self.take_summary("; before this, since the last line about it,"))
    }

    /// What the log has not said yet, after `lead` (empty when nothing is left to say).
    fn take_summary(&mut self, lead: &str) -> String {
        if self.times == 0 {
            return String::new();
        }
        let held = match self.held {
            0 => String::new(),
            held => format!(
                ", {held} of them after the program had been held for it as long as its \
                 patience lasted"
            ),
        };
        let times = match self.times {
            1 => "1 more time".to_owned(),
            times => format!("{times} more times"),
        };
        let summary = format!(
            "{lead} it fell behind {times} and redraws replaced {} output bytes{held}",
            self.bytes
        );
        (self.times, self.bytes, self.held) = (0, 0, 0);
        summary
    }
}

/// Logs what [`LagLog`] has not said yet of a client that is leaving.
fn log_unsaid_lag(slot: &mut ClientSlot) {
    let unsaid = slot
        .lag_log
        .take_summary(", and since the last line about it,");
    if !unsaid.is_empty() {
        tracing::warn!("attach client {} left{unsaid}", slot.id);
    }
}

/// At most this many controls are kept for a client while it lags; only a handful ever come
/// (an exit, a detach), and past the bound further ones are dropped.
const MAX_MISSED_CONTROLS: usize = 64;

/// The receiving side of an attached client.
pub struct ClientHandle {
    pub id: u64,
    pub rx: ClientQueue,
    pub lagged: Arc<AtomicBool>,
    pub wake: Arc<Notify>,
}

/// The frames waiting for one attached client, with a count of the output bytes among them
/// (what [`CLIENT_QUEUE_BYTES`] bounds).
pub struct ClientQueue {
    rx: mpsc::Receiver<Frame>,
    queued: Arc<AtomicUsize>,
    room: Arc<Notify>,
}

impl Drop for ClientQueue {
    /// A reader waiting for this client to take its output stops waiting.
    fn drop(&mut self) {
        self.room.notify_one();
    }
}

impl ClientQueue {
    /// The next frame; `None` once the pane has let the client go.
    pub async fn recv(&mut self) -> Option<Frame> {
        let frame = self.rx.recv().await;
        self.taken(frame.as_ref());
        frame
    }

    /// The output bytes queued.
    pub fn bytes(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// The next frame if one is queued.
    pub fn try_recv(&mut self) -> Option<Frame> {
        let frame = self.rx.try_recv().ok();
        self.taken(frame.as_ref());
        frame
    }

    fn taken(&self, frame: Option<&Frame>) {
        if let Some(Frame::Data(bytes, _)) = frame {
            let before = self.queued.fetch_sub(bytes.len(), Ordering::Relaxed);
            if before > CLIENT_WAIT_AT && before - bytes.len() <= CLIENT_WAIT_AT {
                self.room.notify_one();
            }
        }
    }
}

/// How long the reader may still wait for one client: [`PATIENCE_MAX`] at first, less what
/// it waited, and back again at [`PATIENCE_REFILL`] of the time that passes.
#[derive(Clone, Copy)]
struct Patience {
    left: Duration,
    at: Instant,
}

impl Patience {
    fn new(now: Instant) -> Self {
        Patience {
            left: PATIENCE_MAX,
            at: now,
        }
    }

    /// What is left at `now`.
    fn left(&mut self, now: Instant) -> Duration {
        let refill = now
            .saturating_duration_since(self.at)
            .mul_f64(PATIENCE_REFILL);
        self.left = (self.left + refill).min(PATIENCE_MAX);
        self.at = self.at.max(now);
        self.left
    }

    /// The reader waited `waited` for the client, up to `now`.
    fn spend(&mut self, waited: Duration, now: Instant) {
        self.left(now);
        self.left = self.left.saturating_sub(waited);
    }
}

/// How long after the program's last query attached terminals' answers are routed from one
/// client (spec §4). A terminal answers within milliseconds, a remote one within a round
/// trip; a program that waited longer has given up on the answer.
const ANSWER_WINDOW: Duration = Duration::from_secs(3);

/// Whether input could submit what the program's input line holds: it has an Enter (CR) or a
/// line feed in it.
fn could_submit(bytes: &[u8]) -> bool {
    memchr::memchr2(b'\r', b'\n', bytes).is_some()
}

/// Whether a send step could submit (see [`could_submit`]); a key is judged by its bytes.
fn step_could_submit(step: &Step) -> bool {
    match step {
        Step::Raw(bytes) => could_submit(bytes),
        Step::Paste(text) => could_submit(text.as_bytes()),
        Step::Key(key) => could_submit(&key.encode(false)),
        Step::DelayMs(_) => false,
    }
}

/// The least time between two `typed` lifecycle events of one pane: a person's keystrokes
/// are announced at most ten times a second, so a client pouring input in cannot flood the
/// event stream. Whoever waits on them (the DING worker, spec §7.4) counts its wait from the
/// latest, so one announced up to this much late costs nothing it would notice.
const TYPED_EVENT_EVERY: Duration = Duration::from_millis(100);

/// Output bytes queued for one client before it is considered lagging and resynchronised by a
/// redraw (the pane host's log says how many bytes the redraw replaced). What a client that is
/// not waited for ([`CLIENT_WAIT_AT`]) may pin: as much as 256 full turns of the reader, the
/// most the bound of 256 chunks before it let a client pin (chunks are often far shorter than
/// a turn, so a count bounded the time a client could fall behind, not what it held).
pub const CLIENT_QUEUE_BYTES: usize = 256 * OUTPUT_TURN;

/// Output bytes queued for one writable client past which the reader waits for it before it
/// reads the program's next output, so the program prints at the pace of the terminal of the
/// person at its keyboard, as it would in a terminal of its own, and that terminal gets every
/// byte. A terminal that falls behind for a moment (a scheduler's hiccup, the terminal
/// emulator busy) is waited for: with `belfry attach` of a program printing 100 MB of styled
/// text as fast as it can, a queue bounded at 256 chunks resynchronised 4 attaches in 24 on an
/// idle 2-core machine, 1.5–4.1 MB of queued output replaced by a redraw each time; waited
/// for, 0 in 24, in the same time (`docs/performance.md`). The wait is bounded by the client's
/// [`Patience`]: a terminal that takes nothing (a frozen window, a stopped client) holds the
/// program up for [`PATIENCE_MAX`] once, and one slower than the program for good for at most
/// [`PATIENCE_REFILL`] of the time; a client whose patience is spent is resynchronised by a
/// redraw, as one whose queue reaches [`CLIENT_QUEUE_BYTES`] is. A read-only client (a
/// watcher) is never waited for.
pub const CLIENT_WAIT_AT: usize = 1 << 20;

/// The longest the reader waits for one client at once.
const PATIENCE_MAX: Duration = Duration::from_secs(1);

/// The share of the time that passes by which a client's patience grows back.
const PATIENCE_REFILL: f64 = 0.5;

/// A client whose patience is down to less than this (the runtime's timer's resolution) is
/// resynchronised instead of waited for.
const PATIENCE_LEAST: Duration = Duration::from_millis(2);

/// Chunks queued for one client before it is considered lagging: the bound that holds when
/// the program prints in small pieces (a chunk is what one turn of the reader read, up to
/// [`OUTPUT_TURN`]).
const CLIENT_QUEUE: usize = 4096;

/// The most output one turn of the reader applies to the screen model before it lets requests
/// and attach streams run (issue 13, target 4). The model takes ~10 ns a byte on an idle
/// machine, so 32 KiB is ~0.3 ms of waiting for a `peek` or `send` that arrives mid-turn (the
/// 256 KiB turns before cost ~2.5 ms); the extra yield and poll per turn cost a few µs. Lines
/// the model skips the grid for cost far less, and for them 32 KiB also beat 16 and 64 KiB
/// turns on attached throughput (`docs/performance.md`, section 1 of the analysis).
pub const OUTPUT_TURN: usize = 32 * 1024;

/// Everything behind the state lock.
pub struct PaneState {
    pub screen: Screen,
    pub revision: u64,
    pub incarnation: String,
    pub child_pid: u32,
    pub exited: Option<ExitStatus>,
    /// The exit event of the running incarnation, once it exited: a subscriber that arrives
    /// after it (the daemon's monitor of a program that ended at once) is told it first.
    pub exit_event: Option<Event>,
    pub last_change: Instant,
    pub size: (u16, u16),
    clients: Vec<ClientSlot>,
    next_client_id: u64,
    /// Set (never cleared) by `kill` or SIGTERM, naming which: the pane host is ending its
    /// child, so no transaction may start any more. Aborting only the one in flight would let
    /// the next queued one write into the dying child and report it written.
    stopping: Option<&'static str>,
    /// When the program last sent a terminal query the model knows, so attached clients'
    /// answers to it are routed from one client only ([`Pane::client_input`]).
    last_query: Option<Instant>,
    /// When the last `typed` lifecycle event was sent ([`Pane::client_input`]).
    last_typed_event: Option<Instant>,
    /// What the program reported of itself through OSC 7501.
    pub status: crate::program_status::Records,
}

impl PaneState {
    fn bump(&mut self, revision_tx: &watch::Sender<u64>) {
        self.revision += 1;
        self.last_change = Instant::now();
        revision_tx.send_replace(self.revision);
    }

    pub fn clients_len(&self) -> usize {
        self.clients.len()
    }

    fn writable_clients(&self) -> usize {
        self.clients.iter().filter(|c| !c.read_only).count()
    }

    fn broadcast(&mut self, frame: &Frame) {
        let control = matches!(frame, Frame::Control(_));
        for client in &mut self.clients {
            if client.lagged.load(Ordering::Relaxed) {
                match frame {
                    Frame::Control(_) if client.missed.len() < MAX_MISSED_CONTROLS => {
                        client.missed.push(frame.clone());
                    }
                    Frame::Data(bytes, _) if !client.cropped => client.dropped += bytes.len(),
                    _ => {}
                }
                continue;
            }
            if client.cropped && matches!(frame, Frame::Data(..)) {
                // A cropped client is shown the model, not the output: a fresh cropped
                // redraw follows (see `Pane::resync`).
                client.lagged.store(true, Ordering::Relaxed);
                client.wake.notify_one();
                continue;
            }
            // Counted before the send, so the receiver never takes off what was not added.
            let bytes = match frame {
                Frame::Data(bytes, _) => bytes.len(),
                Frame::Control(_) => 0,
            };
            let before = client.queued.fetch_add(bytes, Ordering::Relaxed);
            if before + bytes > CLIENT_QUEUE_BYTES || client.tx.try_send(frame.clone()).is_err() {
                client.queued.fetch_sub(bytes, Ordering::Relaxed);
                // The client cannot keep up: drop its queue and resynchronise it with a redraw.
                if control {
                    client.missed.push(frame.clone());
                }
                client.lagged.store(true, Ordering::Relaxed);
                client.wake.notify_one();
            }
        }
    }
}

/// A pane: its PTY, child and model. Shared by every connection of the pane host.
pub struct Pane {
    pub spec: LaunchSpec,
    pub generation: String,
    pub state: Mutex<PaneState>,
    pub input: tokio::sync::Mutex<()>,
    /// The abort epoch and who bumped it last. Bumped (under the state lock) by restart and
    /// kill; a transaction that started under an older epoch writes no further byte.
    abort: watch::Sender<(u64, &'static str)>,
    /// True while a restart replaces the child (set and cleared under the state lock).
    restarting: watch::Sender<bool>,
    /// Serialises restarts with each other (never with input).
    restart_lock: tokio::sync::Mutex<()>,
    master: AsyncFd<OwnedFd>,
    pts: pty_process::Pts,
    pub revision_tx: watch::Sender<u64>,
    pub events: broadcast::Sender<Event>,
    answers: mpsc::UnboundedSender<Vec<u8>>,
    /// Extra environment for the child (BELFRY_* variables), set by the host.
    child_env: Vec<(String, String)>,
    /// Woken when an output chunk leaves a synchronized update pending in the model, so
    /// [`Pane::end_stalled_frames`] starts its timer.
    sync_pending: Notify,
    /// Woken by the first output or request after a release ([`Pane::note_activity`]); the
    /// time of the last, in milliseconds since `born`; whether the releasing task is woken.
    activity: Notify,
    activity_at: AtomicU64,
    release_armed: AtomicBool,
    born: Instant,
}

/// Channels the host drives after constructing a pane.
pub struct PaneTasks {
    pub answers: mpsc::UnboundedReceiver<Vec<u8>>,
    pub child: tokio::process::Child,
}

impl Pane {
    /// Opens a PTY and starts the child. Must run inside a tokio runtime.
    pub fn start(
        spec: LaunchSpec,
        child_env: Vec<(String, String)>,
    ) -> crate::Result<(Arc<Pane>, PaneTasks)> {
        let (pty, pts) = pty_process::open().map_err(|err| io_err("cannot open a PTY", err))?;
        let size = (spec.rows.max(1), spec.cols.max(1));
        pty.resize(pty_process::Size::new(size.0, size.1))
            .map_err(|err| io_err("cannot size the PTY", err))?;
        let master: OwnedFd = pty.into();
        // Every read and write of the master happens under the state lock and must never block
        // there (drain_pending reads until EAGAIN, write_locked writes until EAGAIN), so the
        // descriptor is made non-blocking here rather than trusting the PTY library to do it.
        let flags = rustix::fs::fcntl_getfl(&master).map_err(|err| crate::Error::Io(err.into()))?;
        rustix::fs::fcntl_setfl(&master, flags | rustix::fs::OFlags::NONBLOCK)
            .map_err(|err| crate::Error::Io(err.into()))?;
        // SAFETY: `master` is an `OwnedFd` moved into the `AsyncFd`, so the descriptor stays
        // open and refers to the same PTY for as long as the registration lives.
        let master = unsafe { AsyncFd::register(master) }
            .map_err(|err| crate::Error::Io(std::io::Error::other(err.to_string())))?;
        let incarnation = new_incarnation();
        let generation = spec.generation();
        let first_revision = first_revision();
        let (revision_tx, _) = watch::channel(first_revision);
        // Only exits and lifecycle events (restarts) travel here, a handful in a pane's life,
        // and a subscriber that falls behind is told how many it missed. tokio allocates and
        // initialises every slot up front (about 184 bytes each), so 1024 slots cost each
        // pane host 184 KiB of private memory for nothing; 64 cost 12 KiB.
        let (events, _) = broadcast::channel(EVENTS_CAPACITY);
        let (answers_tx, answers_rx) = mpsc::unbounded_channel();
        let screen =
            Screen::with_history_cap(size.0, size.1, spec.scrollback, spec.scrollback_bytes);
        let state = PaneState {
            screen,
            revision: first_revision,
            incarnation: incarnation.clone(),
            child_pid: 0,
            exited: None,
            exit_event: None,
            last_change: Instant::now(),
            size,
            clients: Vec::new(),
            next_client_id: 1,
            stopping: None,
            last_query: None,
            last_typed_event: None,
            status: Default::default(),
        };
        let pane = Pane {
            spec,
            generation,
            state: Mutex::new(state),
            input: tokio::sync::Mutex::new(()),
            abort: watch::channel((0, "nothing")).0,
            restarting: watch::channel(false).0,
            restart_lock: tokio::sync::Mutex::new(()),
            master,
            pts,
            revision_tx,
            events,
            answers: answers_tx,
            child_env,
            sync_pending: Notify::new(),
            activity: Notify::new(),
            activity_at: AtomicU64::new(0),
            release_armed: AtomicBool::new(false),
            born: Instant::now(),
        };
        // Start-up is activity too: what it mapped is let go of once the pane is quiet.
        pane.note_activity();
        let child = pane.spawn_child(&incarnation)?;
        pane.state.lock().child_pid = child.id().unwrap_or(0);
        Ok((
            Arc::new(pane),
            PaneTasks {
                answers: answers_rx,
                child,
            },
        ))
    }

    fn spawn_child(&self, incarnation: &str) -> crate::Result<tokio::process::Child> {
        let argv = &self.spec.argv;
        let Some(program) = argv.first() else {
            return Err(crate::Error::invalid(
                "empty command: give at least a program name",
            ));
        };
        let mut cmd = pty_process::Command::new(program)
            .args(&argv[1..])
            .args(&self.spec.extra_args);
        if !self.spec.base_env.is_empty() {
            cmd = cmd.env_clear().envs(&self.spec.base_env);
        }
        cmd = cmd
            .env(
                "TERM",
                pane_term(&self.spec.base_env, self.spec.term.as_deref()),
            )
            .envs(&self.spec.env)
            .envs(&self.spec.extra_env);
        for (key, value) in &self.child_env {
            cmd = cmd.env(key, value);
        }
        cmd = cmd
            .env(belfry_proto::env::INCARNATION, incarnation)
            .env(belfry_proto::env::GENERATION, &self.generation);
        if let Some(cwd) = &self.spec.cwd {
            cmd = cmd.current_dir(cwd);
        }
        // The program starts with every signal at its default action and none blocked,
        // whatever the process that started belfry ignored: a signal ignored before an exec
        // stays ignored after it (`nohup` ignores SIGHUP), and a pane program ignoring SIGHUP
        // would outlive the hang-up that ends a pane until the SIGKILL after the grace
        // period, as tmux's panes reset theirs.
        // SAFETY: `default_signals` runs in the child between fork and exec; it makes only
        // raw system calls (rt_sigaction, rt_sigprocmask), async-signal-safe, and allocates
        // nothing.
        let mut cmd = unsafe { cmd.pre_exec(default_signals) };
        // The pane host's own pty_process::Command is not kill_on_drop: the host decides.
        cmd.spawn_borrowed(&self.pts)
            .map_err(|err| crate::Error::Spawn {
                argv: argv.clone(),
                source: match err {
                    pty_process::Error::Io(io) => io,
                    other => std::io::Error::other(other.to_string()),
                },
            })
    }

    /// The current identity.
    pub fn identity(&self) -> Identity {
        let st = self.state.lock();
        self.identity_of(&st)
    }

    fn identity_of(&self, st: &PaneState) -> Identity {
        Identity {
            incarnation: st.incarnation.clone(),
            generation: self.generation.clone(),
            revision: st.revision,
        }
    }

    /// Reads and applies everything the master has for us. Runs until the pane host ends.
    ///
    /// Once the pane has been quiet for [`RELEASE_AFTER`] after output that scrolled, the memory
    /// the screen model needed only while output was arriving is freed (see
    /// [`Pane::release_spare_memory`]).
    pub async fn read_output(self: Arc<Self>) {
        let mut buf = vec![0u8; OUTPUT_TURN];
        // What the model read as plain or styled lines in a turn, for attached clients.
        let mut pen_only = PenOnlyRun::default();
        loop {
            let (spare, behind) = {
                let st = self.state.lock();
                let behind = st.clients.iter().any(ClientSlot::waited_for);
                (st.screen.has_spare_rows(), behind)
            };
            if behind {
                self.wait_for_slow_clients().await;
                continue;
            }
            let readable = if spare {
                match tokio::time::timeout(RELEASE_AFTER, self.master.readable()).await {
                    Ok(readable) => readable,
                    Err(_quiet) => {
                        self.release_spare_memory();
                        continue;
                    }
                }
            } else {
                self.master.readable().await
            };
            let mut guard = match readable {
                Ok(guard) => guard,
                Err(err) => {
                    tracing::error!("PTY master not readable: {err}");
                    return;
                }
            };
            // At most [`OUTPUT_TURN`] bytes per turn, so a request or an attach stream waits
            // behind at most that much screen-model work. A read returns what the terminal
            // layer holds at that moment (4 KiB at a time while a program prints fast), so a
            // turn reads again until it has its fill or nothing is left: attached clients are
            // then woken once per turn for everything it read, not once per 4 KiB. Each read
            // is applied to the model as it comes, so the program can refill the terminal
            // layer meanwhile. The model may hold back the last screenful of plain or styled
            // lines a read ends with (`Screen::apply_deferring`) for the next reads' lines to
            // scroll off without the grid, across turns: whoever reads the screen next (a
            // request, a redraw, the release of spare memory once the pane is quiet) gives it
            // to the grid first. So while a program prints without pause, only the screenful
            // in front of a reader goes through the grid, not the last one of every turn.
            let result = guard.try_io(|fd| {
                let mut st = self.state.lock();
                let mut answers = Vec::new();
                let mut total = 0;
                pen_only.clear();
                while total < OUTPUT_TURN {
                    match rustix::io::read(fd.get_ref(), &mut buf[total..OUTPUT_TURN]) {
                        Ok(0) => break,
                        Ok(n) => {
                            answers.append(&mut st.screen.apply_deferring(&buf[total..total + n]));
                            pen_only.applied(&st.screen, n);
                            total += n;
                        }
                        Err(rustix::io::Errno::INTR) => {}
                        // Nothing more right now (or an error): what this turn read is done;
                        // a turn that read nothing reports the error itself.
                        Err(_) if total > 0 => break,
                        Err(err) => return Err(std::io::Error::from(err)),
                    }
                }
                if total > 0 {
                    self.after_output(&mut st, &buf[..total], &pen_only, answers);
                }
                Ok(total)
            });
            match result {
                Ok(Ok(0)) => {
                    // EOF on a master only happens when no slave is open; ours stays open.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                // A turn done: the master may still be readable, and `readable()` would return
                // at once without ever giving the thread away, starving peek, send and attached
                // clients while a program prints non-stop. Yield to them first: the runtime
                // polls for I/O before it resumes a yielded task, so a request that arrived
                // during this turn is served before the next one.
                Ok(Ok(_)) => {
                    self.note_activity();
                    tokio::task::yield_now().await;
                }
                Err(_would_block) => {}
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(Err(err)) => {
                    tracing::error!("PTY read failed: {err}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// Waits, before the program's next output is read, while a writable client has more than
    /// [`CLIENT_WAIT_AT`] bytes of output to take, for as long as its [`Patience`] lasts. A
    /// client that lags is not waited for: a redraw replaces what it missed.
    async fn wait_for_slow_clients(&self) {
        loop {
            let behind = {
                let mut st = self.state.lock();
                let now = Instant::now();
                st.clients.iter_mut().find_map(|client| {
                    if !client.waited_for() {
                        return None;
                    }
                    let left = client.patience.left(now);
                    if left < PATIENCE_LEAST {
                        // Its patience is spent: resynchronised rather than waited for (the
                        // resynchronisation's log line says so).
                        client.held_in_vain = true;
                        client.lagged.store(true, Ordering::Relaxed);
                        client.wake.notify_one();
                        return None;
                    }
                    Some((client.id, Arc::clone(&client.room), left))
                })
            };
            let Some((id, room, left)) = behind else {
                return;
            };
            let started = Instant::now();
            let _ = tokio::time::timeout(left, room.notified()).await;
            let now = Instant::now();
            let mut st = self.state.lock();
            if let Some(client) = st.clients.iter_mut().find(|c| c.id == id) {
                client.patience.spend(now.duration_since(started), now);
            }
        }
    }

    /// Output was read or a request answered: the program's pages are let go of once the pane
    /// host has been quiet for a moment ([`Pane::release_program_pages`]).
    pub fn note_activity(&self) {
        let now = self.born.elapsed().as_millis() as u64;
        self.activity_at.store(now, Ordering::Relaxed);
        // Only the first activity after a release wakes the releasing task: a flood's reader
        // turns cost a clock read and a store each, not a wake-up.
        if !self.release_armed.load(Ordering::Acquire)
            && !self.release_armed.swap(true, Ordering::AcqRel)
        {
            self.activity.notify_one();
        }
    }

    /// Lets go of the program's pages ([`crate::program_pages`]) once the pane host has been
    /// quiet for [`RELEASE_AFTER`] after start-up or any activity ([`Pane::note_activity`]),
    /// so an idle pane host's resident size is what it holds itself. Runs until the pane host
    /// ends; waits without waking up while nothing happens.
    pub async fn release_program_pages(self: Arc<Self>) {
        loop {
            self.activity.notified().await;
            loop {
                let now = self.born.elapsed().as_millis() as u64;
                let quiet = now.saturating_sub(self.activity_at.load(Ordering::Relaxed));
                let quiet = Duration::from_millis(quiet);
                if quiet >= RELEASE_AFTER {
                    break;
                }
                tokio::time::sleep(RELEASE_AFTER - quiet).await;
            }
            // Disarmed first: activity from here on wakes this task again (what it maps after
            // the release is let go of after its own quiet moment).
            self.release_armed.store(false, Ordering::Release);
            crate::program_pages::release();
        }
    }

    /// Frees the rows the screen model's grid allocated for history beyond the screen and
    /// hands the freed heap back to the system, so an idle pane host holds only its screen and
    /// its compact history.
    ///
    /// This runs once the pane has been quiet for [`RELEASE_AFTER`], as the release of the
    /// program's pages does ([`Pane::release_program_pages`]), and maps again the code it
    /// runs; so it counts as activity, and the program's pages are let go of after it, by that
    /// task, whose own way back to waiting maps little. Whichever of the two came second used
    /// to decide what an idle pane host kept mapped: in some runs about half of them kept
    /// ~0.6 MiB more of the program after output.
    fn release_spare_memory(&self) {
        let released = self.state.lock().screen.release_spare_rows();
        // Outside the state lock: trimming walks the whole heap.
        if released {
            trim_heap();
        }
        self.note_activity();
    }

    /// Output just applied to the model (a turn of the reader, or what a send drained): the
    /// revision, attached clients, query answers.
    /// `pen_only`: what the model read of `bytes` as whole plain or styled lines.
    fn after_output(
        &self,
        st: &mut PaneState,
        bytes: &[u8],
        pen_only: &PenOnlyRun,
        answers: Vec<Vec<u8>>,
    ) {
        st.bump(&self.revision_tx);
        self.take_program_status(st);
        if !st.clients.is_empty() {
            st.broadcast(&Frame::Data(
                Arc::from(bytes),
                PenOnly::of(pen_only.ranges()),
            ));
        }
        if st.screen.sync_deadline().is_some() {
            self.sync_pending.notify_one();
        }
        self.answer_when_detached(st, answers);
    }

    /// The OSC 7501 strings the output just applied held: the records they change, stamped
    /// with the revision the output moved the pane to, and a `program-status` event for each
    /// change.
    fn take_program_status(&self, st: &mut PaneState) {
        let found = st.screen.take_status();
        if found.is_empty() {
            return;
        }
        let now = unix_ms();
        let mut changes = Vec::new();
        for string in found {
            st.status
                .take(string, st.revision, &st.incarnation, now, &mut changes);
        }
        self.publish_status_changes(st.revision, changes);
    }

    fn publish_status_changes(&self, revision: u64, changes: Vec<crate::program_status::Change>) {
        for change in changes {
            let _ = self.events.send(Event::ProgramStatus {
                session: self.spec.session.clone(),
                id: change.id,
                old: change.old,
                new: change.new,
                cause: change.cause,
                revision,
            });
        }
    }

    /// spec §4: while no writable client is attached the pane host answers queries itself;
    /// otherwise the attached terminals see the query and one of them answers (see
    /// [`Pane::client_input`]). Never both.
    ///
    /// The program status query (OSC 7501) is the exception: the pane host answers it always,
    /// since it keeps the records whatever terminal is attached, and an attached terminal's
    /// own answer is taken out of its input ([`Pane::client_input`]).
    fn answer_when_detached(&self, st: &mut PaneState, answers: Vec<Vec<u8>>) {
        let detached = st.writable_clients() == 0;
        let mut terminal_queries = false;
        for answer in answers {
            let ours = answer.starts_with(crate::program_status::ANSWER_PREFIX);
            terminal_queries |= !ours;
            if detached || ours {
                let _ = self.answers.send(answer);
            }
        }
        if terminal_queries {
            st.last_query = Some(Instant::now());
        }
    }

    /// Ends synchronized updates (`?2026h`) the program started and did not end in time.
    /// The model holds a frame's bytes back until its end; a program that never sends it
    /// (crashed mid-frame, or simply buggy) would otherwise freeze `peek`, `wait` and the
    /// redraw. When the emulator's deadline passes, the held bytes are applied, as a terminal
    /// does, and the revision moves because what the pane shows changed (spec §2). Runs until
    /// the pane host ends.
    pub async fn end_stalled_frames(self: Arc<Self>) {
        loop {
            let deadline = self.state.lock().screen.sync_deadline();
            match deadline {
                Some(deadline) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
                    let mut st = self.state.lock();
                    if let Some(answers) = st.screen.flush_expired_sync() {
                        st.bump(&self.revision_tx);
                        self.answer_when_detached(&mut st, answers);
                    }
                }
                None => self.sync_pending.notified().await,
            }
        }
    }

    /// Reads whatever output is pending in the PTY right now, under the state lock
    /// (spec §3 step 1). Bounded: a program that never stops writing cannot starve the send.
    ///
    /// "Pending" is whatever a non-blocking `read(2)` returns before `EAGAIN`, not what
    /// `FIONREAD` reports: `FIONREAD` counts only the line discipline's buffer, while bytes the
    /// program has finished writing can still sit in the tty flip buffer until a kernel worker
    /// moves them. A read on the master flushes that work first (Linux `n_tty_read` calls
    /// `tty_buffer_flush_work` before deciding there is no input), so only `EAGAIN` proves that
    /// nothing written so far is left unread.
    fn drain_pending(&self, st: &mut PaneState) {
        let mut buf = [0u8; 16 * 1024];
        for _ in 0..64 {
            match rustix::io::read(self.master.get_ref(), &mut buf[..]) {
                Ok(0) => return,
                Ok(n) => {
                    let answers = st.screen.apply(&buf[..n]);
                    let mut pen_only = PenOnlyRun::default();
                    pen_only.applied(&st.screen, n);
                    self.after_output(st, &buf[..n], &pen_only, answers);
                }
                Err(rustix::io::Errno::INTR) => continue,
                // EAGAIN: nothing left. EIO: no slave is open (the child and all its
                // descendants are gone), so nothing can be pending either.
                Err(_) => return,
            }
        }
    }

    /// The guarded write of spec §3: compare under the input lock, then either zero bytes and
    /// a conflict, or the whole transaction with no other input interleaved.
    ///
    /// Bounded: the wait for the input lock (and for a restart in progress) and the writes each
    /// have a deadline derived from `write_timeout` (see [`lock_wait`]), and a restart or kill
    /// aborts the transaction at once. On expiry or abort the error says how many bytes were
    /// written, and the input lock is released.
    ///
    /// With `announce`, a transaction that writes anything is announced as input from outside
    /// the program (the lifecycle event `typed`, see [`Pane::announce_typing`]) after its
    /// compare and before its first byte; the DING worker's own notices are not.
    pub async fn send(
        &self,
        expect: &Expect,
        steps: &[Step],
        requester_gone: &(dyn Fn() -> bool + Sync),
        write_timeout: Duration,
        announce: bool,
    ) -> Result<SendOutcome, WriteError> {
        let (_input, deadline) = self.take_input(write_timeout).await?;
        let (mut txn, first_write) = loop {
            // A request queued behind another transaction (or a restart) whose sender has
            // since gone (a killed daemon, a closed CLI) is dropped before a byte is written.
            if requester_gone() {
                return Ok(SendOutcome::Abandoned);
            }
            match self.compare_and_start(expect, steps, write_timeout, announce)? {
                Start::Restarting => self.wait_restart(deadline, write_timeout).await?,
                Start::Conflict(outcome) => return Ok(outcome),
                Start::Started(txn, first_write) => break (txn, first_write),
            }
        };
        let mut rest = steps;
        if let Some((bytes, written)) = first_write {
            self.write_bounded(&bytes[written..], &mut txn).await?;
            rest = &steps[1..];
            txn.step = 1;
        }
        for step in rest {
            match step {
                Step::DelayMs(ms) => self.delay(Duration::from_millis(*ms), &mut txn).await?,
                _ => {
                    let bytes = {
                        let st = self.state.lock();
                        encode_step(&st.screen, step)
                    };
                    self.write_bounded(&bytes, &mut txn).await?;
                }
            }
            txn.step += 1;
        }
        let revision = self.state.lock().revision;
        Ok(SendOutcome::Sent { revision })
    }

    /// spec §3 steps 1–3 and the start of step 4, all under the state lock: drain, compare,
    /// and on a match write the first step's bytes as far as the PTY takes them at once.
    fn compare_and_start(
        &self,
        expect: &Expect,
        steps: &[Step],
        write_timeout: Duration,
        announce: bool,
    ) -> Result<Start, WriteError> {
        let mut st = self.state.lock();
        // A kill publishes `stopping` under this lock, so a transaction queued behind the one
        // it aborted is refused here, before the compare and its first byte.
        if let Some(by) = st.stopping {
            return Err(stopped(by, steps.len()));
        }
        // A restart publishes `restarting` under this lock, so checking it here (not only
        // before taking the input lock) is what keeps a transaction from starting on a child
        // that is being stopped.
        if *self.restarting.borrow() {
            return Ok(Start::Restarting);
        }
        if reads_screen_first(expect, steps) {
            self.drain_pending(&mut st);
        }
        let actual = self.identity_of(&st);
        let exited = st.exited.is_some();
        if exited || !expect.is_met_by(&actual) {
            return Ok(Start::Conflict(SendOutcome::Conflict { actual, exited }));
        }
        // The transaction starts here: a restart or kill that comes later bumps the abort
        // epoch under this same lock, so it is always seen.
        let mut txn = self.begin(steps.len(), write_timeout);
        // Input from outside the program is announced before its first byte, as a person's
        // keystrokes are: a supervisor's draft and Enter start a turn the harness may not show
        // yet, exactly like a person's (spec §7.4). A conflict wrote nothing and says nothing.
        if announce && steps.iter().any(|step| !matches!(step, Step::DelayMs(_))) {
            self.announce_typing(&mut st, steps.iter().any(step_could_submit));
        }
        // The first bytes go out under the same lock as the compare, so nothing the program
        // prints can land between the two.
        let first_write = match steps.first() {
            Some(step @ (Step::Raw(_) | Step::Paste(_) | Step::Key(_))) => {
                let bytes = encode_step(&st.screen, step);
                let written = self.write_locked(&mut st, &bytes, &mut txn)?;
                Some((bytes, written))
            }
            _ => None,
        };
        Ok(Start::Started(txn, first_write))
    }

    /// Takes the input lock, waiting at most [`lock_wait`]`(write_timeout)`. Returns the guard
    /// and the deadline, which also bounds waiting out a restart in progress.
    async fn take_input(
        &self,
        write_timeout: Duration,
    ) -> Result<(tokio::sync::MutexGuard<'_, ()>, tokio::time::Instant), WriteError> {
        let waited = lock_wait(write_timeout);
        let deadline = tokio::time::Instant::now() + waited;
        let guard = tokio::time::timeout_at(deadline, self.input.lock())
            .await
            .map_err(|_| WriteError::InputBusy { waited })?;
        Ok((guard, deadline))
    }

    /// Waits until no restart is in progress, at most until `deadline`. A transaction never
    /// starts while the old child is being stopped, so none straddles a restart.
    async fn wait_restart(
        &self,
        deadline: tokio::time::Instant,
        write_timeout: Duration,
    ) -> Result<(), WriteError> {
        let busy = || WriteError::InputBusy {
            waited: lock_wait(write_timeout),
        };
        let mut restarting = self.restarting.subscribe();
        let done = tokio::time::timeout_at(deadline, restarting.wait_for(|busy| !*busy))
            .await
            .map(|waited| waited.is_ok());
        match done {
            Ok(true) => Ok(()),
            _ => Err(busy()),
        }
    }

    /// Starts a transaction's bookkeeping. Called under the state lock, after the checks that
    /// allow it to write.
    fn begin(&self, steps: usize, write_timeout: Duration) -> Transaction {
        let mut abort = self.abort.subscribe();
        let epoch = abort.borrow_and_update().0;
        Transaction {
            written: 0,
            step: 0,
            steps,
            write_timeout,
            deadline: tokio::time::Instant::now() + write_timeout,
            epoch,
            abort,
        }
    }

    /// True if a restart or kill began after the transaction of `epoch` started. Checked under
    /// the state lock before every write, because the abort is published under it.
    fn aborted_since(&self, epoch: u64) -> bool {
        self.abort.borrow().0 != epoch
    }

    /// Ends input for good, because the pane host is stopping its child (`kill`, SIGTERM): the
    /// transaction in flight writes no further byte, and every later one (queued sends,
    /// attached keystrokes, query answers) is refused with `written: 0` before its compare.
    pub fn stop_input(&self, by: &'static str) {
        let mut st = self.state.lock();
        st.stopping = Some(by);
        self.abort_locked(&st, by);
    }

    /// Ends every input transaction now: its next write is refused and its waits return at
    /// once. Restart and kill call it instead of waiting for the input lock. The caller holds
    /// the state lock (the guard proves it): publishing under that lock is what lets writers
    /// check it race-free before each write.
    fn abort_locked(&self, _st: &PaneState, by: &'static str) {
        self.abort.send_modify(|(epoch, reason)| {
            *epoch += 1;
            *reason = by;
        });
    }

    /// A delay step: the input lock stays held; an abort ends it early. The write deadline
    /// moves by the delay, which is the transaction's own time, not the program's.
    async fn delay(&self, length: Duration, txn: &mut Transaction) -> Result<(), WriteError> {
        tokio::select! {
            () = tokio::time::sleep(length) => {}
            _ = txn.abort.changed() => return Err(txn.aborted()),
        }
        txn.deadline += length;
        Ok(())
    }

    /// Writes as much as the PTY takes without blocking; each successful write moves the
    /// revision. Every byte the PTY takes is counted in `txn.written` at once, so an error
    /// after a partial write reports the bytes that did reach the PTY, never zero (a caller
    /// treats zero as "never written" and may send it again).
    fn write_locked(
        &self,
        st: &mut PaneState,
        bytes: &[u8],
        txn: &mut Transaction,
    ) -> Result<usize, WriteError> {
        let mut written = 0;
        while written < bytes.len() {
            match rustix::io::write(self.master.get_ref(), &bytes[written..]) {
                Ok(n) => {
                    written += n;
                    txn.written += n;
                    st.bump(&self.revision_tx);
                }
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(txn.io(err.into())),
            }
        }
        Ok(written)
    }

    /// Writes all bytes, waiting for the PTY to drain when it is full, but never past the
    /// transaction's deadline and never after an abort. The caller holds the input lock.
    async fn write_bounded(
        &self,
        mut bytes: &[u8],
        txn: &mut Transaction,
    ) -> Result<(), WriteError> {
        while !bytes.is_empty() {
            let deadline = txn.deadline;
            let mut guard = tokio::select! {
                ready = self.master.writable() => ready.map_err(|err| txn.io(err))?,
                () = tokio::time::sleep_until(deadline) => return Err(txn.timed_out()),
                _ = txn.abort.changed() => return Err(txn.aborted()),
            };
            let epoch = txn.epoch;
            let result = guard.try_io(|fd| {
                let mut st = self.state.lock();
                if self.aborted_since(epoch) {
                    return Ok(None);
                }
                let n = rustix::io::write(fd.get_ref(), bytes).map_err(std::io::Error::from)?;
                st.bump(&self.revision_tx);
                Ok(Some(n))
            });
            match result {
                Ok(Ok(Some(n))) => {
                    txn.written += n;
                    bytes = &bytes[n..];
                }
                Ok(Ok(None)) => return Err(txn.aborted()),
                Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(Err(err)) => return Err(txn.io(err)),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// Writes unguarded input (attached keyboards, query answers) under the input lock, with
    /// the default deadline: a program that stops reading makes these bytes time out (and the
    /// caller drop them) instead of holding the lock.
    pub async fn write_input(&self, bytes: &[u8]) -> Result<(), WriteError> {
        let write_timeout = Duration::from_millis(DEFAULT_TIMEOUT_MS);
        let (_input, deadline) = self.take_input(write_timeout).await?;
        let mut txn = loop {
            {
                let st = self.state.lock();
                if let Some(by) = st.stopping {
                    return Err(stopped(by, 1));
                }
                if !*self.restarting.borrow() {
                    break self.begin(1, write_timeout);
                }
            }
            self.wait_restart(deadline, write_timeout).await?;
        };
        self.write_bounded(bytes, &mut txn).await
    }

    /// Writes the query answers the model produced while no writable client was attached.
    pub async fn answer_queries(self: Arc<Self>, mut answers: mpsc::UnboundedReceiver<Vec<u8>>) {
        while let Some(answer) = answers.recv().await {
            if let Err(err) = self.write_input(&answer).await {
                tracing::warn!("cannot answer a terminal query: {err}");
            }
        }
    }

    /// Waits for the child to end and records it. Stale waits (after a restart) are ignored.
    pub async fn watch_child(
        self: Arc<Self>,
        mut child: tokio::process::Child,
        incarnation: String,
    ) {
        let status = child.wait().await;
        let exit = match status {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                ExitStatus {
                    code: status.code(),
                    signal: status.signal(),
                }
            }
            Err(err) => {
                tracing::error!("cannot wait for the child: {err}");
                ExitStatus {
                    code: None,
                    signal: None,
                }
            }
        };
        let event = {
            let mut st = self.state.lock();
            if st.incarnation != incarnation {
                return;
            }
            self.drain_pending(&mut st);
            st.exited = Some(exit);
            st.bump(&self.revision_tx);
            st.broadcast(&Frame::Control(Control::Exited(exit)));
            let mut ended = Vec::new();
            st.status.exited(&mut ended);
            let event = Event::exit(&self.spec.session, &incarnation, st.revision, exit);
            st.exit_event = Some(event.clone());
            (event, ended, st.revision)
        };
        let (event, ended, revision) = event;
        tracing::info!("child exited: {event:?}");
        let _ = self.events.send(event);
        self.publish_status_changes(revision, ended);
    }

    /// Ends the current child (SIGHUP to its process group, SIGKILL after a grace period).
    pub async fn stop_child(&self) {
        let pid = {
            let st = self.state.lock();
            if st.exited.is_some() {
                return;
            }
            st.child_pid
        };
        let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
            return;
        };
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::HUP);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::HUP);
        let exited = || self.state.lock().exited.map(|_| ());
        let tick = Backoff::constant(Duration::from_millis(10));
        if poll_until(Duration::from_millis(1500), tick.clone(), exited)
            .await
            .is_some()
        {
            return;
        }
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        let _ = poll_until(Duration::from_millis(2000), tick, exited).await;
    }

    /// Restarts the child: a new process, a new incarnation, the revision continuing.
    ///
    /// It never waits for the input lock: a transaction in flight (perhaps stuck on a program
    /// that stopped reading) is aborted, and transactions that start meanwhile wait for the
    /// restart to finish, so none straddles it. Input the old child never read is discarded
    /// before the new child starts, so it cannot receive bytes meant for its predecessor.
    pub async fn restart(self: &Arc<Self>) -> crate::Result<Identity> {
        let _one_at_a_time = self.restart_lock.lock().await;
        {
            let st = self.state.lock();
            self.restarting.send_replace(true);
            self.abort_locked(&st, "restart");
        }
        let started = self.replace_child().await;
        let identity = {
            let mut st = self.state.lock();
            self.restarting.send_replace(false);
            let (child, incarnation) = started?;
            st.incarnation = incarnation.clone();
            st.child_pid = child.id().unwrap_or(0);
            st.exited = None;
            st.exit_event = None;
            st.bump(&self.revision_tx);
            // A new program has reported nothing yet: what the old one said, even its `done`
            // or `error`, is not said of this one.
            let mut forgotten = Vec::new();
            st.status.restarted(&mut forgotten);
            let identity = self.identity_of(&st);
            tokio::spawn(Arc::clone(self).watch_child(child, incarnation));
            (identity, forgotten)
        };
        let (identity, forgotten) = identity;
        let _ = self.events.send(Event::Lifecycle(Lifecycle {
            incarnation: Some(identity.incarnation.clone()),
            revision: Some(identity.revision),
            ..Lifecycle::new(&self.spec.session, "restart")
        }));
        self.publish_status_changes(identity.revision, forgotten);
        Ok(identity)
    }

    /// Stops the current child, discards its unread input and starts the new one.
    async fn replace_child(&self) -> crate::Result<(tokio::process::Child, String)> {
        self.stop_child().await;
        // TCIFLUSH on the slave drops what was written to the PTY but not yet read by the old
        // child (an aborted paste, for example): its flip buffer and line discipline buffer.
        rustix::termios::tcflush(&self.pts, rustix::termios::QueueSelector::IFlush)
            .map_err(|err| crate::Error::Io(err.into()))?;
        let incarnation = new_incarnation();
        let child = self.spawn_child(&incarnation)?;
        Ok((child, incarnation))
    }

    /// Resizes the PTY and the model; the revision moves.
    pub fn resize(&self, rows: u16, cols: u16) -> crate::Result<u64> {
        let mut st = self.state.lock();
        self.resize_locked(&mut st, rows, cols)?;
        Ok(st.revision)
    }

    fn resize_locked(&self, st: &mut PaneState, rows: u16, cols: u16) -> crate::Result<()> {
        belfry_proto::Size::new(u64::from(rows), u64::from(cols))
            .map_err(|err| crate::Error::invalid(err.to_string()))?;
        let winsize = rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(self.master.get_ref(), winsize)
            .map_err(|err| crate::Error::Io(err.into()))?;
        st.screen.resize(rows, cols);
        st.size = (rows, cols);
        st.bump(&self.revision_tx);
        update_cropping(st);
        Ok(())
    }

    /// Clears the screen model and its history; the revision moves.
    pub fn clear(&self) -> u64 {
        let mut st = self.state.lock();
        st.screen.clear();
        st.bump(&self.revision_tx);
        st.broadcast(&Frame::data(b"\x1b[H\x1b[2J\x1b[3J"));
        st.revision
    }

    /// The foreground process group of the PTY and whether it is the child itself.
    pub fn foreground(&self, child_pid: u32) -> Option<belfry_proto::reply::Foreground> {
        let pgid = rustix::termios::tcgetpgrp(self.master.get_ref().as_fd()).ok()?;
        let pgid = pgid.as_raw_nonzero().get();
        Some(belfry_proto::reply::Foreground {
            pgid,
            is_leader: pgid as u32 == child_pid,
        })
    }

    /// Registers an attached client and returns its first frame (a full redraw) with the
    /// receiving handle. Done under the state lock so no chunk is missed or duplicated.
    pub fn attach(&self, read_only: bool, size: Option<(u16, u16)>) -> (Vec<u8>, ClientHandle) {
        let mut st = self.state.lock();
        let id = st.next_client_id;
        st.next_client_id += 1;
        let current_size = st.size;
        let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let room = Arc::new(Notify::new());
        let lagged = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Notify::new());
        st.clients.push(ClientSlot {
            id,
            read_only,
            size: size.unwrap_or(current_size),
            last_active: Instant::now(),
            tx,
            queued: Arc::clone(&queued),
            room: Arc::clone(&room),
            patience: Patience::new(Instant::now()),
            lagged: Arc::clone(&lagged),
            wake: Arc::clone(&wake),
            cropped: false,
            missed: Vec::new(),
            dropped: 0,
            held_in_vain: false,
            lag_log: LagLog::default(),
        });
        if !read_only {
            self.apply_size_policy(&mut st);
        }
        update_cropping(&mut st);
        let redraw = redraw_for(&mut st, id);
        (
            redraw,
            ClientHandle {
                id,
                rx: ClientQueue { rx, queued, room },
                lagged,
                wake,
            },
        )
    }

    /// Resynchronises a client (one that lagged, or one that asked for a redraw): empties its
    /// queue and returns a fresh redraw, both under the state lock, followed by the control
    /// frames (`exited`, `detach`) that were in the queue, which the redraw does not stand for.
    ///
    /// `taken` are frames already taken off the queue and not sent (a batch the client's
    /// output side found it lagging with): they count as the queue's, and are emptied first.
    ///
    /// Output bytes a client misses this way are never dropped silently: the pane host's log
    /// says how many output bytes the redraw replaced: those it empties from the queue and those
    /// not queued while the client was marked lagging.
    pub fn resync(&self, handle: &mut ClientHandle, taken: &mut Vec<Frame>) -> Vec<Frame> {
        let mut st = self.state.lock();
        let mut controls = Vec::new();
        let mut skipped = 0usize;
        let queue = std::iter::from_fn(|| handle.rx.try_recv());
        for frame in taken.drain(..).chain(queue) {
            match frame {
                Frame::Control(_) => controls.push(frame),
                Frame::Data(bytes, _) => skipped += bytes.len(),
            }
        }
        // Then the controls that found the client lagging, newest last; taken under the same
        // lock that clears `lagged`, so none falls between the two.
        if let Some(slot) = st.clients.iter_mut().find(|c| c.id == handle.id) {
            controls.append(&mut slot.missed);
            let dropped = std::mem::take(&mut slot.dropped);
            let held = std::mem::take(&mut slot.held_in_vain);
            let bytes = skipped + dropped;
            if bytes > 0 {
                if let Some(before) = slot.lag_log.resynchronised(bytes, held, Instant::now()) {
                    let held = if held {
                        format!(
                            " (it stayed more than {CLIENT_WAIT_AT} bytes behind while the \
                             program was held for it, as long as its patience lasted)"
                        )
                    } else {
                        String::new()
                    };
                    tracing::warn!(
                        "attach client {} fell behind{held}: {bytes} output bytes ({skipped} \
                         queued, {dropped} while it lagged) were replaced by a redraw of the \
                         screen{before}",
                        handle.id,
                    );
                }
            }
        }
        handle.lagged.store(false, Ordering::Relaxed);
        let mut frames = vec![Frame::Data(
            redraw_for(&mut st, handle.id).into(),
            PenOnly::NONE,
        )];
        frames.append(&mut controls);
        frames
    }

    pub fn detach(&self, id: u64) {
        let mut st = self.state.lock();
        if let Some(slot) = st.clients.iter_mut().find(|c| c.id == id) {
            log_unsaid_lag(slot);
        }
        st.clients.retain(|c| c.id != id);
        self.apply_size_policy(&mut st);
        update_cropping(&mut st);
    }

    /// The size of client `id`'s terminal (the pane's when it is not attached).
    pub fn client_size(&self, id: u64) -> (u16, u16) {
        let st = self.state.lock();
        st.clients
            .iter()
            .find(|c| c.id == id)
            .map_or(st.size, |c| c.size)
    }

    /// Asks every attached client to detach (`belfry detach NAME`). Returns how many.
    pub fn detach_all(&self) -> usize {
        let mut st = self.state.lock();
        let n = st.clients.len();
        st.broadcast(&Frame::Control(Control::Detach {
            reason: Some("requested".into()),
        }));
        st.clients.iter_mut().for_each(log_unsaid_lag);
        st.clients.clear();
        n
    }

    pub fn client_count(&self) -> usize {
        self.state.lock().clients.len()
    }

    /// The pane host is ending with clients attached: what the log has not said yet of their
    /// falling behind is said now, as when a client leaves ([`LagLog`]).
    pub fn log_unsaid_lag_of_every_client(&self) {
        self.state
            .lock()
            .clients
            .iter_mut()
            .for_each(log_unsaid_lag);
    }

    /// What a writable client's input frame writes to the pane. spec §4 (one answer per
    /// query): for a while after the program sent a query, every attached terminal's answer
    /// to it arrives, and only the most recently active writable client's are kept; the
    /// others lose their answers and keep their keystrokes. Answers alone do not make a
    /// client active (they are its terminal's, not the user's); keystrokes do.
    pub fn client_input(&self, id: u64, bytes: Vec<u8>) -> Vec<u8> {
        let mut st = self.state.lock();
        let mut bytes = bytes;
        if bytes.windows(2).any(|w| w == b"\x1b]") {
            // A terminal's colour answers teach the pane its real colours (see
            // `Screen::learn_colors`).
            st.screen.learn_colors(&bytes);
            // The pane host answers the program status query itself, attached or not: a
            // terminal that speaks the protocol too would be a second answer.
            bytes = crate::answers::without_status_answers(bytes);
        }
        let answering = st.last_query.is_some_and(|at| at.elapsed() < ANSWER_WINDOW);
        let (input, keystrokes) = if answering {
            let (others, keystrokes) = crate::answers::without_answers(&bytes);
            let answerer = st
                .clients
                .iter()
                .filter(|c| !c.read_only)
                .max_by_key(|c| c.last_active)
                .map(|c| c.id);
            if answerer == Some(id) {
                (bytes, keystrokes)
            } else {
                (others, keystrokes)
            }
        } else {
            (bytes, true)
        };
        if keystrokes {
            self.client_activity_locked(&mut st, id, None);
            if !input.is_empty() {
                self.announce_typing(&mut st, could_submit(&input));
            }
        }
        input
    }

    /// Tells the pane's subscribers that input from outside the program is about to be
    /// written (a lifecycle event `typed`, with `submit` saying whether it holds an Enter): an
    /// attached client's keystrokes, or a `send` that is not a DING notice. Input without an
    /// Enter is announced at most once per [`TYPED_EVENT_EVERY`] (the harness may not have
    /// drawn it yet, so its composer can look empty for a moment); one with an Enter always, as
    /// a submit must never be lost in the rate limit. spec §7.4: a
    /// harness that just took a person's (or a supervisor's) Enter can look idle with an empty
    /// composer until it shows the turn that Enter started, and the DING worker must not take
    /// that for an idle it may type a notice into. A notice is DING's own submit, which its
    /// worker holds for already; announcing it would only hold the notices after it.
    fn announce_typing(&self, st: &mut PaneState, submit: bool) {
        let now = Instant::now();
        if !submit
            && st
                .last_typed_event
                .is_some_and(|at| now.duration_since(at) < TYPED_EVENT_EVERY)
        {
            return;
        }
        st.last_typed_event = Some(now);
        let _ = self.events.send(Event::Lifecycle(Lifecycle {
            incarnation: Some(st.incarnation.clone()),
            revision: Some(st.revision),
            submit: Some(submit),
            ..Lifecycle::new(&self.spec.session, "typed")
        }));
    }

    /// Colour answers a client's terminal gave to the client's own query on attach: learned,
    /// never written to the program (which did not ask).
    pub fn learn_colors(&self, answers: &[u8]) {
        self.state.lock().screen.learn_colors(answers);
    }

    /// A client resized its terminal or typed: it becomes the most recently active one.
    pub fn client_activity(&self, id: u64, size: Option<(u16, u16)>) {
        let mut st = self.state.lock();
        self.client_activity_locked(&mut st, id, size);
    }

    fn client_activity_locked(&self, st: &mut PaneState, id: u64, size: Option<(u16, u16)>) {
        let mut changed = false;
        let current_size = st.size;
        if let Some(client) = st.clients.iter_mut().find(|c| c.id == id) {
            client.last_active = Instant::now();
            if let Some(size) = size {
                changed = client.size != size;
                client.size = size;
            }
            changed |= !client.read_only && client.size != current_size;
        }
        if changed {
            self.apply_size_policy(st);
        }
        update_cropping(st);
    }

    fn apply_size_policy(&self, st: &mut PaneState) {
        let writable = st.clients.iter().filter(|c| !c.read_only);
        let target = match self.spec.size_policy {
            SizePolicy::Latest => writable.max_by_key(|c| c.last_active).map(|c| c.size),
            SizePolicy::Smallest => writable
                .map(|c| c.size)
                .reduce(|a, b| (a.0.min(b.0), a.1.min(b.1))),
        };
        if let Some((rows, cols)) = target {
            if (rows, cols) != st.size {
                if let Err(err) = self.resize_locked(st, rows, cols) {
                    tracing::warn!("cannot apply client size {rows}x{cols}: {err}");
                }
            }
        }
    }
}

/// Marks each client cropped or not for the pane's size now. A client that changes between
/// the two is resynchronised: a cropped redraw replaces the output it was following, or a full
/// redraw the cropped view it was shown.
fn update_cropping(st: &mut PaneState) {
    let size = st.size;
    for client in &mut st.clients {
        let cropped = client.smaller_than(size);
        if cropped != client.cropped {
            client.cropped = cropped;
            client.lagged.store(true, Ordering::Relaxed);
            client.wake.notify_one();
        }
    }
}

/// The redraw client `id` is shown: the whole model, or the part of it a cropped client's
/// terminal holds.
fn redraw_for(st: &mut PaneState, id: u64) -> Vec<u8> {
    match st.clients.iter().find(|c| c.id == id) {
        Some(client) if client.cropped => {
            let (rows, cols) = client.size;
            st.screen.cropped_redraw(rows, cols)
        }
        _ => st.screen.redraw(),
    }
}

/// Whether a send must read the output still pending on the PTY before it compares and writes.
///
/// A guarded send must (spec §3 step 1: the comparison is with everything the program printed
/// so far), and so must one whose steps are encoded from the screen's modes (a paste framed
/// iff bracketed paste is on, keys in application cursor mode), which output still pending
/// may change. An unguarded send of text and bytes compares nothing and writes the same bytes
/// whatever is pending, so it does not wait for that output to go through the screen model:
/// on a pane printing non-stop that can be hundreds of KiB (the kernel's PTY buffer).
fn reads_screen_first(expect: &Expect, steps: &[Step]) -> bool {
    !expect.is_empty()
        || steps
            .iter()
            .any(|step| matches!(step, Step::Paste(_) | Step::Key(_)))
}

fn encode_step(screen: &Screen, step: &Step) -> Vec<u8> {
    match step {
        Step::Raw(bytes) => bytes.clone(),
        Step::Paste(text) => encode_paste(text, screen.modes().bracketed_paste),
        Step::Key(key) => key.encode(screen.modes().application_cursor),
        Step::DelayMs(_) => Vec::new(),
    }
}

/// The `TERM` the child starts with (before the declared `env`, which may override it): the
/// spawning client's own `TERM` when it names a terminal the screen model and the attach
/// redraw speak (the xterm, tmux and screen families), so the keys an attached terminal of that
/// kind sends (Home, End, function keys) are the ones the program's terminfo expects; else
/// `xterm-256color`, what the model emulates. A client on the Linux console or a terminal with
/// its own key encodings gets `xterm-256color` and may set `--env TERM=…` (docs/attach.md).
///
/// A pane started from another machine has no `base_env`; the client's `TERM` comes as `term`
/// instead (issue 46: such panes always got `xterm-256color`, so Home and End did nothing in
/// `less` in a remote pane started from tmux).
fn pane_term<'a>(
    base_env: &'a std::collections::BTreeMap<String, String>,
    term: Option<&'a str>,
) -> &'a str {
    match base_env.get("TERM").map(String::as_str).or(term) {
        Some(term)
            if ["xterm", "tmux", "screen"].iter().any(|family| {
                term.strip_prefix(family).is_some_and(|rest| {
                    rest.is_empty()
                        || (rest.starts_with(['-', '.'])
                            && rest
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-.+_".contains(&b)))
                })
            }) =>
        {
            term
        }
        _ => "xterm-256color",
    }
}

/// Slots of a pane's `events` channel (see `Pane::start`).
const EVENTS_CAPACITY: usize = 64;

/// How long a pane must be quiet before the screen model's spare rows are freed: long enough
/// that a program printing in bursts does not pay for allocating them again after every burst.
const RELEASE_AFTER: Duration = Duration::from_millis(200);

/// Returns the free pages of the heap to the system. glibc keeps freed memory in its arenas
/// (and only trims the top of the heap on its own), so the rows a scroll allocated would stay
/// resident after they are freed; `malloc_trim` releases every free page, wherever it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: `malloc_trim` only walks and trims glibc's own arenas, under their locks; it
    // touches no memory the program owns and is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

fn io_err(what: &str, err: pty_process::Error) -> crate::Error {
    crate::Error::Io(std::io::Error::other(format!("{what}: {err}")))
}

/// The revision a new pane host starts from: the wall clock in microseconds since the Unix
/// epoch.
///
/// Issue #7 item 5 (revision ABA): a pane killed and created again under the same name and
/// declaration keeps its generation, so if every pane host started at 0 a guarded send with a
/// revision read from the old pane host could win on the new one. Starting from the clock puts
/// the new pane host above every revision the old one reached, unless the old one averaged more
/// than one event per microsecond over its whole life (each event is at least one syscall) or
/// the clock was set back by more than that life. Microseconds stay below 2^53 until the year
/// 2255, so JSON readers that hold numbers as doubles read revisions exactly. The `--expect`
/// token (incarnation included) closes the window completely; see `docs/decisions.md`.
/// The wall clock in unix ms, for when a program status record entered its state.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn first_revision() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
        .unwrap_or(0)
}

pub use belfry_transport::signals::{default_signals, unblock_signals};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_falling_behind_is_logged_at_most_once_a_window_and_nothing_goes_unsaid() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let window = LAG_LOG_WINDOW.as_millis() as u64;
        let mut log = LagLog::default();
        // The first time is logged at once, with nothing before it.
        assert_eq!(log.resynchronised(100, true, t0).as_deref(), Some(""));
        // Within the window: counted, not logged.
        assert_eq!(log.resynchronised(200, true, at(5)), None);
        assert_eq!(log.resynchronised(300, false, at(window - 1)), None);
        // The first one after the window is logged, with the two before it.
        let line = log.resynchronised(400, false, at(window)).unwrap();
        assert!(
            line.contains("it fell behind 2 more times and redraws replaced 500 output bytes, 1 of them after"),
            "{line}"
        );
        // Said once: the next window starts empty, and a client that leaves with nothing
        // unsaid adds no line.
        assert_eq!(log.resynchronised(1, false, at(window + 1)), None);
        let last = log.take_summary(",");
        assert_eq!(
            last,
            ", it fell behind 1 more time and redraws replaced 1 output bytes"
        );
        assert_eq!(log.take_summary(","), "");
        // A window of nothing but falling behind, one every 10 ms, is one line.
        let mut slow = LagLog::default();
        let lines = (0..window / 10)
            .filter_map(|i| slow.resynchronised(1 << 20, true, at(i * 10)))
            .count();
        assert_eq!(lines, 1);
        assert!(slow
            .take_summary(",")
            .contains(&format!("{} more times", window / 10 - 1)));
    }

    #[test]
    fn a_clients_patience_is_spent_by_waiting_and_grows_back_with_half_the_time() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut patience = Patience::new(t0);
        assert_eq!(patience.left(t0), PATIENCE_MAX);
        // Never more than the most, however long nothing was waited for.
        assert_eq!(patience.left(at(5_000)), PATIENCE_MAX);
        // A terminal that took nothing: waited for the whole of it.
        patience.spend(PATIENCE_MAX, at(6_000));
        assert_eq!(patience.left(at(6_000)), Duration::ZERO);
        assert!(patience.left(at(6_001)) < PATIENCE_LEAST);
        // Half of the time that passes comes back.
        assert_eq!(patience.left(at(6_400)), Duration::from_millis(200));
        patience.spend(Duration::from_millis(150), at(6_400));
        assert_eq!(patience.left(at(6_400)), Duration::from_millis(50));
        assert_eq!(
            patience.left(at(8_400)),
            Duration::from_millis(1_050).min(PATIENCE_MAX)
        );
        // A clock read out of order takes nothing back.
        assert_eq!(patience.left(at(8_000)), PATIENCE_MAX);
        // A client slower than the program for good, waited for in every turn: its patience
        // grows back by half of all the time that passes, so it holds the program up for half
        // of it once the first second is spent.
        let mut slow = Patience::new(t0);
        let (mut waited, mut now) = (Duration::ZERO, t0);
        for _ in 0..10_000 {
            now += Duration::from_millis(1);
            let left = slow.left(now);
            if left < PATIENCE_LEAST {
                continue;
            }
            let wait = left.min(Duration::from_millis(1));
            now += wait;
            waited += wait;
            slow.spend(wait, now);
        }
        let share = waited.as_secs_f64() / now.duration_since(t0).as_secs_f64();
        assert!(
            (0.45..=0.51).contains(&share),
            "waited {share:.3} of the time"
        );
    }

    #[test]
    fn only_an_unguarded_send_of_raw_bytes_skips_the_pending_output() {
        let raw = [Step::Raw(b"x".to_vec()), Step::DelayMs(10)];
        let unguarded = Expect::default();
        let guarded = Expect {
            revision: Some(7),
            ..Expect::default()
        };
        // spec §3 step 1: a compare-and-send always reads the pending output first.
        assert!(reads_screen_first(&guarded, &raw));
        assert!(reads_screen_first(&guarded, &[]));
        // Steps encoded from the screen's modes need them current, guarded or not.
        assert!(reads_screen_first(&unguarded, &[Step::Paste("p".into())]));
        assert!(reads_screen_first(
            &unguarded,
            &[Step::Raw(b"x".to_vec()), Step::Key(crate::input::Key::Up)]
        ));
        assert!(!reads_screen_first(&unguarded, &raw));
    }

    #[test]
    fn the_panes_term_follows_the_clients_when_the_model_speaks_it() {
        let term = |value: Option<&str>| {
            let env = value
                .map(|v| [("TERM".to_string(), v.to_string())].into())
                .unwrap_or_default();
            pane_term(&env, None).to_string()
        };
        for kept in [
            "xterm",
            "xterm-256color",
            "xterm-kitty",
            "tmux-256color",
            "screen",
            "screen.xterm-256color",
        ] {
            assert_eq!(term(Some(kept)), kept);
        }
        for replaced in [
            None,
            Some("linux"),
            Some("dumb"),
            Some("vt100"),
            Some("xtermx"),
            Some(""),
        ] {
            assert_eq!(term(replaced), "xterm-256color", "{replaced:?}");
        }
    }
}

#[cfg(test)]
mod submit_tests {
    use super::*;
    use crate::input::Key;

    #[test]
    fn only_input_with_an_enter_could_submit() {
        assert!(could_submit(b"draft\r"));
        assert!(could_submit(b"a\nb"));
        assert!(!could_submit(b"my draft"));
        assert!(!could_submit(b"\x7f\x7f\x1b[A"));
        assert!(step_could_submit(&Step::Key(Key::Enter)));
        assert!(step_could_submit(&Step::Key(Key::Ctrl(b'm'))));
        assert!(step_could_submit(&Step::Key(Key::Ctrl(b'j'))));
        assert!(!step_could_submit(&Step::Key(Key::Backspace)));
        assert!(!step_could_submit(&Step::Paste("no newline".into())));
        assert!(step_could_submit(&Step::Paste("two\nlines".into())));
        assert!(!step_could_submit(&Step::DelayMs(500)));
    }
}
