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
//!
//! Both locks and everything behind them are private to this module: the pane host asks the
//! pane for what it wants (a snapshot, a page of history, whether a `wait` is met, the record
//! it writes) and each answer is read under the state lock at one instant.
//!
//! The map: this file holds the [`Pane`] and its state, start-up, and what the pane host reads
//! of them. Each part of a pane's work is a file of its own, every one adding to `impl Pane`:
//! - `output`: the reader of the program's output, the end of stalled synchronized updates,
//!   and letting memory go once the pane is quiet.
//! - `send`: the guarded write of spec §3 and every other input transaction.
//! - `clients`: attached clients: their queues, falling behind and resynchronising, the size
//!   policy and query answers from one client only.
//! - `lifecycle`: the child: spawning it, its exit, stop, restart, resize and clear.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use std::os::fd::OwnedFd;
use tokio::io::unix::AsyncFd;
use tokio::sync::{broadcast, mpsc, watch, Notify};

use crate::screen::Screen;
use crate::spec::{new_incarnation, LaunchSpec};

use crate::screen_regex::ScreenRegex;
use belfry_proto::event::Event;
use belfry_proto::program_status::{ProgramState, StatusRecord};
use belfry_proto::reply;
/// How a child ended, what a guarded send expects (spec §3; absent fields are not compared)
/// and the pane's identity at one instant: the protocol's types.
pub use belfry_proto::{ExitStatus, Expect, Identity};

mod clients;
mod lifecycle;
mod output;
mod send;

use clients::ClientSlot;
pub use clients::{ClientHandle, ClientQueue, CLIENT_QUEUE_BYTES, CLIENT_WAIT_AT};
pub use output::OUTPUT_TURN;
pub use send::{SendOutcome, WriteError};

pub use belfry_transport::deadline::lock_wait;

/// Everything behind the state lock. Private to this module: the pane host reads it through
/// [`Pane`]'s methods, each of which takes the lock once.
struct PaneState {
    screen: Screen,
    revision: u64,
    incarnation: String,
    child_pid: u32,
    exited: Option<ExitStatus>,
    /// The exit event of the running incarnation, once it exited: a subscriber that arrives
    /// after it (the daemon's monitor of a program that ended at once) is told it first.
    exit_event: Option<Event>,
    last_change: Instant,
    size: (u16, u16),
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
    status: crate::program_status::Records,
}

impl PaneState {
    fn bump(&mut self, revision_tx: &watch::Sender<u64>) {
        self.revision += 1;
        self.last_change = Instant::now();
        revision_tx.send_replace(self.revision);
    }

    fn writable_clients(&self) -> usize {
        self.clients.iter().filter(|c| !c.read_only).count()
    }
}

/// A pane: its PTY, child and model. Shared by every connection of the pane host.
pub struct Pane {
    spec: LaunchSpec,
    generation: String,
    state: Mutex<PaneState>,
    input: tokio::sync::Mutex<()>,
    /// The abort epoch and who bumped it last. Bumped (under the state lock) by restart and
    /// kill; a transaction that started under an older epoch writes no further byte.
    abort: watch::Sender<(u64, &'static str)>,
    /// True while a restart replaces the child (set and cleared under the state lock).
    restarting: watch::Sender<bool>,
    /// Serialises restarts with each other (never with input).
    restart_lock: tokio::sync::Mutex<()>,
    master: AsyncFd<OwnedFd>,
    pts: pty_process::Pts,
    revision_tx: watch::Sender<u64>,
    events: broadcast::Sender<Event>,
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
}

/// What the pane host's record file (`<session>.json`) says of the pane's state, read at one
/// instant ([`Pane::recorded`]).
pub struct Recorded {
    pub child_pid: u32,
    pub incarnation: String,
    pub revision: u64,
    pub exited: Option<ExitStatus>,
    pub size: (u16, u16),
    pub clients: usize,
    pub title: String,
    pub program_status: Option<StatusRecord>,
}

/// What a `wait` waits for, every given condition at once ([`Pane::wait_check`]).
pub(crate) struct WaitFor<'a> {
    /// The revision reached.
    pub revision: Option<u64>,
    /// The program exited.
    pub exit: bool,
    /// The record the pane is shown by is in this state.
    pub status: Option<ProgramState>,
    /// The screen's text matches.
    pub regex: Option<&'a mut ScreenRegex>,
    /// Nothing changed for this long.
    pub quiet: Option<Duration>,
}

/// What the pane host reads of a pane: each method takes the state lock once, so what it
/// returns is the pane at one instant, and no caller outside this module holds the lock.
impl Pane {
    /// The launch spec the pane was started from.
    pub fn spec(&self) -> &LaunchSpec {
        &self.spec
    }

    /// The generation of the launch spec (spec §2).
    pub fn generation(&self) -> &str {
        &self.generation
    }

    /// A receiver of the pane's events from now on: exits, lifecycle and program status.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// A receiver woken whenever the revision moves.
    pub fn watch_revision(&self) -> watch::Receiver<u64> {
        self.revision_tx.subscribe()
    }

    /// How the running incarnation's program ended, if it did.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.state.lock().exited
    }

    /// The exit event of the running incarnation, once it exited (for a subscriber that asks
    /// for the exit so far).
    pub fn exit_event(&self) -> Option<Event> {
        self.state.lock().exit_event.clone()
    }

    /// The state the pane host's record file carries.
    pub fn recorded(&self) -> Recorded {
        let st = self.state.lock();
        Recorded {
            child_pid: st.child_pid,
            incarnation: st.incarnation.clone(),
            revision: st.revision,
            exited: st.exited,
            size: st.size,
            clients: st.clients.len(),
            title: st.screen.title().to_string(),
            program_status: st.status.summary().cloned(),
        }
    }

    /// The `snapshot` reply: the screen and the pane's identity and state, with the last
    /// `scrollback` history lines and the ANSI lines and cells when asked for. `Err` says why
    /// the pane's size cannot be told.
    pub fn screen(
        &self,
        scrollback: Option<u64>,
        ansi: bool,
        cells: bool,
    ) -> Result<reply::Screen, String> {
        let mut st = self.state.lock();
        let (row, col, visible) = st.screen.cursor();
        let size = belfry_proto::Size::new(u64::from(st.size.0), u64::from(st.size.1))
            .map_err(|err| err.to_string())?;
        let scrollback = scrollback.map(|n| {
            let history = st.screen.history_len();
            let n = usize::try_from(n).unwrap_or(usize::MAX).min(history);
            st.screen.scrollback(history - n, n).1
        });
        Ok(reply::Screen {
            session: self.spec.session.clone(),
            incarnation: st.incarnation.clone(),
            generation: self.generation.clone(),
            revision: st.revision,
            size,
            cursor: reply::Cursor { row, col, visible },
            modes: st.screen.modes(),
            title: st.screen.title().to_string(),
            lines: st.screen.lines(),
            foreground: self.foreground(st.child_pid),
            exited: st.exited,
            child_pid: st.child_pid,
            pid: std::process::id(),
            clients: st.clients.len(),
            history: st.screen.history_count(),
            ansi: ansi.then(|| st.screen.ansi_lines()),
            cells: cells.then(|| st.screen.cells()),
            scrollback,
            program_status: st.status.status(),
        })
    }

    /// The `scrollback` reply: `count` history lines from `start` (0 is the oldest).
    pub fn history(&self, start: usize, count: usize) -> reply::History {
        let mut st = self.state.lock();
        let (total, lines) = st.screen.scrollback(start, count);
        reply::History {
            revision: st.revision,
            total,
            history: st.screen.history_len(),
            start,
            lines,
        }
    }

    /// Whether every condition of a `wait` holds now, when the quiet condition (if any) will
    /// hold at the earliest, and the state the answer reports.
    pub(crate) fn wait_check(
        &self,
        want: &mut WaitFor<'_>,
    ) -> (bool, Option<Instant>, reply::WaitState) {
        let mut st = self.state.lock();
        let mut met = want.revision.is_none_or(|r| st.revision >= r);
        met &= !want.exit || st.exited.is_some();
        // The record the pane is shown by, as `ls` shows it. Every change to the records
        // comes with output or an exit or restart, which move the revision and wake this.
        met &= want
            .status
            .is_none_or(|s| st.status.summary().is_some_and(|r| r.state == s));
        if let Some(regex) = &mut want.regex {
            met &= regex.is_match(&st.screen.lines().join("\n"));
        }
        let quiet_until = want.quiet.and_then(|q| st.last_change.checked_add(q));
        if let Some(until) = quiet_until {
            met &= Instant::now() >= until;
        }
        let state = reply::WaitState {
            revision: st.revision,
            incarnation: st.incarnation.clone(),
            exited: st.exited,
        };
        (met, quiet_until, state)
    }
}

/// Slots of a pane's `events` channel (see `Pane::start`).
const EVENTS_CAPACITY: usize = 64;

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
fn first_revision() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
        .unwrap_or(0)
}

pub use belfry_transport::signals::{default_signals, unblock_signals};
