//! Attached clients as the pane sees them: each one's queue of frames, how the reader waits for
//! a slow one and resynchronises one that fell behind (and what the log says of it), the size
//! policy, cropping for a terminal smaller than the pane, and the routing of terminal answers
//! from one client only (spec §4). A file of its own because it is the pane's side of the
//! attach path, apart from the program's output and input.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Notify};

use super::output::OUTPUT_TURN;
use super::send::could_submit;
use super::{Pane, PaneState};
use crate::spec::SizePolicy;
use crate::wire::{Frame, PenOnly};
use belfry_proto::event::{Event, Lifecycle};
use belfry_proto::Control;

/// One attached client as the pane sees it.
pub(super) struct ClientSlot {
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
    /// The client draws a status line on its terminal's last row; `size` is the rows above
    /// it. Such a client is always shown the model ([`Screen::window_redraw`]), painted in
    /// those rows: the pane's output, written as it is, could scroll over the status line.
    status_line: bool,
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
    pub(super) fn waited_for(&self) -> bool {
        !self.read_only
            && !self.lagged.load(Ordering::Relaxed)
            && self.queued.load(Ordering::Relaxed) > CLIENT_WAIT_AT
    }

    /// Whether this client's terminal is smaller than `pane` in either direction.
    fn smaller_than(&self, pane: (u16, u16)) -> bool {
        self.size.0 < pane.0 || self.size.1 < pane.1
    }

    /// Whether this client is shown redraws of the model rather than the output: it is
    /// smaller than the pane, or it keeps a status line under it.
    fn shown_model(&self, pane: (u16, u16)) -> bool {
        self.status_line || self.smaller_than(pane)
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

impl PaneState {
    pub(super) fn broadcast(&mut self, frame: &Frame) {
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

impl Pane {
    /// Waits, before the program's next output is read, while a writable client has more than
    /// [`CLIENT_WAIT_AT`] bytes of output to take, for as long as its [`Patience`] lasts. A
    /// client that lags is not waited for: a redraw replaces what it missed.
    pub(super) async fn wait_for_slow_clients(&self) {
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

    /// Registers an attached client and returns its first frame (a full redraw) with the
    /// receiving handle. Done under the state lock so no chunk is missed or duplicated.
    pub fn attach(
        &self,
        read_only: bool,
        size: Option<(u16, u16)>,
        status_line: bool,
    ) -> (Vec<u8>, ClientHandle) {
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
            status_line,
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
    pub(super) fn announce_typing(&self, st: &mut PaneState, submit: bool) {
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

    /// Client `id` starts or stops drawing a status line under the pane: it is shown the model
    /// from now on, or the output again after one full redraw. Its size comes with it, in the
    /// [`Pane::client_activity`] that follows.
    pub fn client_status_line(&self, id: u64, on: bool) {
        let mut st = self.state.lock();
        if let Some(client) = st.clients.iter_mut().find(|c| c.id == id) {
            client.status_line = on;
        }
        update_cropping(&mut st);
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
pub(super) fn update_cropping(st: &mut PaneState) {
    let size = st.size;
    for client in &mut st.clients {
        let cropped = client.shown_model(size);
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
            st.screen.window_redraw(rows, cols, client.status_line)
        }
        _ => st.screen.redraw(),
    }
}

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
}
