//! `attach`: a connection turned into a stream of frames, or a client's terminal handed to the
//! pane host. Its three sides run at once: the output side (the client's queue of frames,
//! paced to what its terminal takes, resynchronised by a redraw when it falls behind), the
//! input side (the client's frames) and, for a handed-over keyboard, the keyboard's reader.
//! A file of its own because it is the pane host's one long-lived stream with state of its own
//! (`Pace`, `Out`, `Held`).

use std::sync::Arc;

use belfry_proto::reply;
use belfry_proto::request as req;
use belfry_proto::{Control, ErrorCode};
use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;

use crate::pane::{ClientHandle, Pane};
use crate::wire::{self, Frame};

use super::HostContext;

/// The pause after a redraw sent to resynchronise a client (see `attach`).
const RESYNC_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// `attach`: switch the connection to frames; the first data frame is a full redraw. A client
/// that asks for it hands its terminal over instead (see [`crate::terminal`]): the pane host
/// then writes the redraw and the output to that terminal, and the connection carries only
/// control frames towards the client.
///
/// In phases: the request is checked, the client registered and answered, its terminal taken
/// when it hands it over, the redraw sent; then its three sides run until one ends
/// ([`serve_output`], [`read_input`], [`read_keyboard`]), and the client is let go.
pub(super) async fn attach(
    ctx: &HostContext,
    id: &Value,
    op: &req::Attach,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    // A mistyped or null read_only never turns into a writable client: the field is strict.
    let read_only = op.read_only.unwrap_or(false);
    let handover = op.terminal == Some(true);
    // A watching client types nothing into the pane: its keys stay its own.
    let keyboard_prefix = op.keyboard.filter(|_| handover && !read_only);
    let size = match requested_size(op) {
        Ok(size) => size,
        Err(message) => {
            let reply = reply::error(id, ErrorCode::Invalid, message);
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        }
    };
    let pane = &ctx.pane;
    let (redraw, mut handle) = pane.attach(read_only, size, op.status == Some(true));
    let client = handle.id;
    let reply = reply::ok(
        id,
        &reply::Attached {
            attached: true,
            client,
            read_only,
            identity: pane.identity(),
            terminal: handover,
            keyboard: keyboard_prefix.is_some(),
            status: true,
        },
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        pane.detach(client);
        return;
    }
    let mut out = Out::Frames;
    let mut keyboard = None;
    if handover {
        match take_terminal(&reader, client, keyboard_prefix).await {
            Ok((terminal, keys)) => {
                out = terminal;
                keyboard = keys;
            }
            Err(()) => {
                pane.detach(client);
                return;
            }
        }
    }
    if out
        .send(
            &mut writer,
            &mut vec![Frame::Data(redraw.into(), wire::PenOnly::NONE)],
        )
        .await
        .is_err()
    {
        pane.detach(client);
        return;
    }
    let exited = pane.exited();
    if let Some(exit) = exited {
        // The program already ended: show its last screen, then say so.
        let _ = out
            .send(
                &mut writer,
                &mut vec![Frame::Control(Control::Exited(exit))],
            )
            .await;
        pane.detach(client);
        return;
    }
    // The input side's requests to the output side: a redraw (after the client drew over the
    // pane), a pause or its end (a client whose terminal the pane host writes), a detach.
    let (requests_tx, mut requests) = tokio::sync::mpsc::unbounded_channel::<Ask>();
    // Whether the pane host reads the client's keyboard now: the client gives it the turn,
    // the keyboard's reader gives it back with keys the client must see.
    // The receiver exists from the start: a turn given before the keyboard's reader first
    // runs (the control can be in the first read of the connection) is kept, not lost.
    let (keyboard_turn, mut turn) = tokio::sync::watch::channel(false);
    tokio::select! {
        _ = serve_output(pane, &mut handle, &mut out, &mut writer, &mut requests) => {}
        _ = read_input(pane, client, read_only, &mut reader, &requests_tx, &keyboard_turn) => {}
        _ = read_keyboard(pane, client, keyboard, &mut turn, &requests_tx, &keyboard_turn) => {}
    }
    pane.detach(client);
}

/// The size the client's terminal gives the pane, when it gives one: `Err` says what is wrong
/// with the request's `rows` and `cols`.
fn requested_size(op: &req::Attach) -> Result<Option<(u16, u16)>, String> {
    match (op.rows, op.cols) {
        (Some(rows), Some(cols)) => match belfry_proto::Size::new(rows, cols) {
            Ok(size) => Ok(Some(size.pair())),
            Err(err) => Err(format!("attach {err}")),
        },
        (None, None) => Ok(None),
        _ => Err("attach rows and cols must be given together".into()),
    }
}

/// Takes over the client's terminal (and its keyboard, when `keyboard_prefix` is given) for
/// the pane host to write. `Err` when the hand-over failed, which is logged here.
async fn take_terminal(
    reader: &BufReader<tokio::net::unix::OwnedReadHalf>,
    client: u64,
    keyboard_prefix: Option<u8>,
) -> Result<(Out, Option<crate::terminal::Keyboard>), ()> {
    let mut keyboard = None;
    let stream = reader.get_ref().as_ref();
    let buffered = !reader.buffer().is_empty();
    let taken = crate::terminal::take(stream, buffered, client, keyboard_prefix.is_some())
        .await
        .and_then(|(terminal, keys)| {
            if let (Some(fd), Some(prefix)) = (keys, keyboard_prefix) {
                keyboard = Some(crate::terminal::Keyboard::new(fd, prefix)?);
            }
            Ok(terminal)
        });
    match taken {
        Ok(terminal) => Ok((
            Out::Terminal {
                terminal,
                paused: false,
                held: Held::default(),
            },
            keyboard,
        )),
        Err(err) => {
            tracing::warn!("attach client {client}: terminal hand-over failed: {err}");
            Err(())
        }
    }
}

/// The output side: the client's queue written to it in batches, the input side's requests
/// answered, and a redraw sent whenever the client fell behind. Returns when the client is
/// gone or its queue closed.
async fn serve_output(
    pane: &Pane,
    handle: &mut ClientHandle,
    out: &mut Out,
    writer: &mut OwnedWriteHalf,
    requests: &mut tokio::sync::mpsc::UnboundedReceiver<Ask>,
) {
    // The frames of one write: whatever the queue holds when the first arrives (up to
    // one vectored write's worth), so a client that fell a little behind catches up in
    // a few system calls rather than one per chunk.
    let mut batch = Vec::with_capacity(wire::MAX_BATCH);
    let mut pace = Pace::default();
    // When a client whose terminal fell behind is sent its redraw: once the terminal has
    // taken what it already holds (`Pace::behind`), so the redraw shows the screen as it
    // is then, not as it was when the terminal fell behind.
    let mut resync_at: Option<tokio::time::Instant> = None;
    loop {
        // A terminal the pane host writes: while the writer has more than a few screens
        // the terminal has not taken, the output waits in the pane's queue, where a redraw
        // replaces it if the terminal stays behind (`Pace`).
        let (full, backlog) = pace_terminal(pane, handle, out, &mut pace, &mut resync_at);
        let progressed = async {
            match backlog {
                Some(backlog) if full => {
                    let _ = tokio::time::timeout(PACE_CHECK, backlog.progressed()).await;
                }
                _ => std::future::pending().await,
            }
        };
        let drained = async {
            match resync_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        // Whether the client fell behind (`Pane::broadcast`, the reader's patience with
        // it spent, its terminal behind for longer than `TERMINAL_BEHIND`) and is to be
        // sent a redraw now.
        let fell_behind = tokio::select! {
            _ = drained => true,
            _ = progressed => false,
            frame = handle.rx.recv(), if !full && resync_at.is_none() => {
                let Some(frame) = frame else { return };
                batch.push(frame);
                while batch.len() < wire::MAX_BATCH {
                    match handle.rx.try_recv() {
                        Some(frame) => batch.push(frame),
                        None => break,
                    }
                }
                // A client found behind is not sent this batch and the rest of its queue
                // (at a slow client's pace, seconds of output it would see only to have
                // it drawn over): the redraw replaces them now.
                let behind = handle.lagged.load(std::sync::atomic::Ordering::Relaxed);
                if !behind && out.send(writer, &mut batch).await.is_err() {
                    return;
                }
                behind
            }
            _ = handle.wake.notified() => {
                resync_at.is_none()
                    && handle.lagged.load(std::sync::atomic::Ordering::Relaxed)
            }
            ask = requests.recv() => {
                let Some(ask) = ask else { return };
                match out.ask(writer, ask).await {
                    Ok(Some(resync)) => {
                        if resync {
                            resync_at = None;
                            if resync_client(pane, handle, out, writer, &mut pace, &mut batch)
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                    // The client left.
                    Ok(None) | Err(_) => return,
                }
                false
            }
        };
        if fell_behind {
            // What the terminal's writer has not written yet goes too: the redraw shows
            // the screen now, not the output on its way to it.
            resync_at = None;
            if resync_client(pane, handle, out, writer, &mut pace, &mut batch)
                .await
                .is_err()
            {
                return;
            }
            // A client shown redraws (a cropped one, after every change) gets at most
            // about a hundred a second; changes meanwhile make one more.
            tokio::time::sleep(RESYNC_PAUSE).await;
        }
    }
}

/// For a client whose terminal the pane host writes: whether the writer holds more than
/// [`TERMINAL_SCREENS`] screens the terminal has not taken (then the output waits in the pane's
/// queue) and the backlog to wait on for progress. A terminal behind for longer than `Pace`
/// allows has what is on its way to it dropped and is marked lagging, to be sent a redraw at
/// `resync_at`.
fn pace_terminal(
    pane: &Pane,
    handle: &ClientHandle,
    out: &Out,
    pace: &mut Pace,
    resync_at: &mut Option<tokio::time::Instant>,
) -> (bool, Option<Arc<crate::terminal::Backlog>>) {
    let (full, behind, backlog) = match out {
        Out::Terminal { terminal, .. } if resync_at.is_none() => {
            let (rows, cols) = pane.client_size(handle.id);
            let budget = usize::from(rows) * usize::from(cols) * TERMINAL_SCREENS;
            let unwritten = terminal.unwritten();
            let behind = pace.behind(
                terminal.taken(),
                unwritten + handle.rx.bytes(),
                &terminal.backlog(),
                std::time::Instant::now(),
            );
            (unwritten > budget, behind, Some(terminal.backlog()))
        }
        _ => (false, None, None),
    };
    if let Some(wait) = behind {
        // What is on its way to the terminal is dropped now and the pane queues no
        // more for it (nor holds the program for it): a redraw replaces all of it.
        out.drop_unwritten();
        handle
            .lagged
            .store(true, std::sync::atomic::Ordering::Relaxed);
        *resync_at = Some(tokio::time::Instant::now() + wait);
    }
    (full, backlog)
}

/// Resynchronises the client: what its terminal's writer has not written yet is dropped, so
/// the redraw shows the screen now, not the output on its way to it; then the redraw and the
/// controls it missed are sent. `Err` when the client is gone.
async fn resync_client(
    pane: &Pane,
    handle: &mut ClientHandle,
    out: &mut Out,
    writer: &mut OwnedWriteHalf,
    pace: &mut Pace,
    batch: &mut Vec<Frame>,
) -> Result<(), ()> {
    out.drop_unwritten();
    pace.resynchronised(out.taken());
    let mut frames = pane.resync(handle, batch);
    out.send(writer, &mut frames).await.map_err(drop)
}

/// The input side: the client's frames, its keystrokes written to the pane and its controls
/// (detach, redraw, pause, resize, the keyboard's turn) acted on or handed to the output side.
async fn read_input(
    pane: &Pane,
    client: u64,
    read_only: bool,
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    requests_tx: &tokio::sync::mpsc::UnboundedSender<Ask>,
    keyboard_turn: &tokio::sync::watch::Sender<bool>,
) {
    loop {
        match Frame::read(reader).await {
            Ok(Some(Frame::Data(bytes, _))) => {
                if read_only {
                    continue;
                }
                let bytes = pane.client_input(client, bytes.to_vec());
                if bytes.is_empty() {
                    continue;
                }
                if let Err(err) = pane.write_input(&bytes).await {
                    tracing::warn!("attached input not written: {err}");
                }
            }
            // A resize out of range never arrives here (`Frame::read` passes it over): the
            // client's terminal is what it is, and the pane keeps its size.
            Ok(Some(Frame::Control(control))) => match control {
                Control::Detach { .. } => {
                    // The output side answers a client whose terminal it writes with the
                    // bytes that undo what it wrote, and then ends the attach. Reading
                    // goes on, so the client's going away ends it too (a terminal that
                    // takes nothing can hold the output side up).
                    if requests_tx.send(Ask::Detach).is_err() {
                        return;
                    }
                }
                Control::Colors(answers) => pane.learn_colors(answers.as_bytes()),
                Control::Redraw => {
                    let _ = requests_tx.send(Ask::Redraw);
                }
                Control::Pause(on) => {
                    let _ = requests_tx.send(if on { Ask::Pause } else { Ask::Resume });
                }
                Control::Resize(size) => pane.client_activity(client, Some(size.pair())),
                Control::Status(on) => pane.client_status_line(client, on),
                // After the keys it gave back (sent before this, so written first).
                Control::Keyboard => {
                    keyboard_turn.send_replace(true);
                }
                // Only a pane host sends these.
                Control::Exited(_) | Control::Paused | Control::Restore(_) | Control::Keys(_) => {}
            },
            Ok(None) | Err(_) => return,
        }
    }
}

/// The client's keyboard, read here while it is this side's turn (see
/// `crate::terminal::Keyboard`); pending for ever when the client handed over no keyboard.
async fn read_keyboard(
    pane: &Pane,
    client: u64,
    keyboard: Option<crate::terminal::Keyboard>,
    turn: &mut tokio::sync::watch::Receiver<bool>,
    requests_tx: &tokio::sync::mpsc::UnboundedSender<Ask>,
    keyboard_turn: &tokio::sync::watch::Sender<bool>,
) {
    let Some(mut keyboard) = keyboard else {
        return std::future::pending().await;
    };
    loop {
        if turn.wait_for(|ours| *ours).await.is_err() {
            return std::future::pending().await;
        }
        match keyboard.read().await {
            crate::terminal::KeyRead::Pane(bytes) => {
                let bytes = pane.client_input(client, bytes);
                if !bytes.is_empty() {
                    if let Err(err) = pane.write_input(&bytes).await {
                        tracing::warn!("attached input not written: {err}");
                    }
                }
            }
            crate::terminal::KeyRead::Client(bytes) => {
                keyboard_turn.send_replace(false);
                let _ = requests_tx.send(Ask::Keys(bytes));
            }
            crate::terminal::KeyRead::Gone => {
                keyboard_turn.send_replace(false);
                let _ = requests_tx.send(Ask::Keys(Vec::new()));
                return std::future::pending().await;
            }
        }
    }
}

/// How many screens' worth of output (of the client's size, a byte a cell) the pane host hands
/// the writer of a client's terminal before that terminal has taken them; more waits in the
/// pane's queue, where a redraw can replace it.
const TERMINAL_SCREENS: usize = 2;

/// How long the output a client's terminal has not taken may wait before the client counts as
/// behind and is sent a redraw of the screen instead (issue 46: through a 20 kB/s link,
/// `seq 1 200000` took 60–90 s to reach the prompt, replayed whole). A terminal that takes a
/// megabyte in a few milliseconds never waits this long: it gets every byte.
const TERMINAL_BEHIND: std::time::Duration = std::time::Duration::from_millis(250);

/// How often the output side looks again at a terminal whose writer is full.
const PACE_CHECK: std::time::Duration = std::time::Duration::from_millis(20);

/// The longest a client whose terminal fell behind waits for its redraw (see [`Pace`]).
const DRAIN_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a client's terminal keeps up: the oldest output it has not taken (in the writer or
/// in the pane's queue) has waited less than [`TERMINAL_BEHIND`]. Measured by marks: the
/// bytes the terminal must have taken for all the output waiting at a moment to be written;
/// once taken, the next mark is set.
///
/// A terminal behind a slow link also holds output of its own that the pane host cannot see
/// or take back: what the kernel's buffers took (a pseudo-terminal takes about 20 KB before a
/// write waits, a second at 20 kB/s). A redraw written at once would arrive only after all of
/// that, showing the screen as it was when it was made; so the redraw is made once the
/// terminal has likely passed on what it holds: what it took from when nothing waited until a
/// write first found it full (it has been full since), at the rate it took output since.
#[derive(Default)]
struct Pace {
    /// When the mark was set, what the terminal had taken then, and what it must take.
    mark: Option<(std::time::Instant, u64, u64)>,
    /// What the terminal had taken when it was last seen with nothing waiting.
    idle_taken: u64,
}

impl Pace {
    /// Whether the terminal is behind, given what it has `taken` so far and the output bytes
    /// `waiting` for it now: `Some` with how long to let it pass on what it holds before its
    /// redraw is made.
    fn behind(
        &mut self,
        taken: u64,
        waiting: usize,
        backlog: &crate::terminal::Backlog,
        now: std::time::Instant,
    ) -> Option<std::time::Duration> {
        if waiting == 0 {
            // Nothing waits: a write that finds the terminal full from now on starts a new
            // measure of what it holds.
            self.idle_taken = taken;
            backlog.full_since(true);
        }
        match self.mark {
            Some((_, _, target)) if taken >= target => self.mark = None,
            Some((at, at_taken, _)) if now.saturating_duration_since(at) > TERMINAL_BEHIND => {
                // What it holds: what it took from when nothing waited until it was first
                // found full; the rate: what it took since, over the time since.
                let (since, since_taken) = backlog.full_since(true).unwrap_or((at, at_taken));
                let holds = since_taken.saturating_sub(self.idle_taken) as f64;
                let span = now.saturating_duration_since(since).as_secs_f64();
                let rate = taken.saturating_sub(since_taken) as f64 / span.max(1e-3);
                let wait = if rate > 0.0 {
                    std::time::Duration::from_secs_f64((holds / rate).min(60.0))
                } else {
                    DRAIN_WAIT_MAX
                };
                return Some(wait.min(DRAIN_WAIT_MAX));
            }
            _ => {}
        }
        if self.mark.is_none() && waiting > 0 {
            self.mark = Some((now, taken, taken + waiting as u64));
        }
        None
    }

    /// The client was sent a redraw, with the terminal at `taken`: what waited before is
    /// gone.
    fn resynchronised(&mut self, taken: u64) {
        *self = Pace {
            idle_taken: taken,
            ..Pace::default()
        };
    }
}

/// What an attach connection's input side asks of its output side.
enum Ask {
    Redraw,
    Pause,
    Resume,
    Detach,
    /// Give the client these keys, and the keyboard with them.
    Keys(Vec<u8>),
}

/// Where an attach connection's output goes.
enum Out {
    /// In frames on the connection.
    Frames,
    /// Data to the client's terminal, written by its own thread; controls on the connection.
    Terminal {
        terminal: crate::terminal::TerminalWriter,
        /// The client draws over the pane: output is not written meanwhile.
        paused: bool,
        /// The output that came while paused, written when the pause ends.
        held: Held,
    },
}

/// The output a paused client's terminal did not get. A pause for a message over the last
/// line lasts a moment: what came meanwhile is written after it, as it would have been had
/// the message been drawn a moment earlier, so the message stays. A redraw instead would
/// erase it (a pane that printed during the pause cleared the note `run` shows over a
/// restarted pane). Past [`HELD_MAX`] bytes (a long pause: a view open over the pane) only
/// that output was missed is kept, and going on needs a redraw.
#[derive(Default)]
struct Held {
    chunks: Vec<crate::terminal::Chunk>,
    bytes: usize,
    missed: bool,
}

/// The most output kept for a paused client's terminal.
const HELD_MAX: usize = 64 * 1024;

impl Held {
    fn keep(&mut self, chunk: crate::terminal::Chunk) {
        if self.missed {
            return;
        }
        self.bytes += chunk.0.len();
        if self.bytes > HELD_MAX {
            *self = Held {
                missed: true,
                ..Held::default()
            };
        } else {
            self.chunks.push(chunk);
        }
    }
}

impl Out {
    /// What the terminal has taken so far (0 for a client sent frames).
    fn taken(&self) -> u64 {
        match self {
            Out::Terminal { terminal, .. } => terminal.taken(),
            Out::Frames => 0,
        }
    }

    /// Drops what the terminal's writer has not written yet (a redraw follows).
    fn drop_unwritten(&self) {
        if let Out::Terminal { terminal, .. } = self {
            terminal.drop_unwritten();
        }
    }

    /// Sends `frames` in order, leaving the vector empty (its room is kept for the next
    /// batch). Nothing after a control that ends the stream (a detach) is sent; an error when
    /// the client is gone or the stream ended.
    async fn send(
        &mut self,
        writer: &mut OwnedWriteHalf,
        frames: &mut Vec<Frame>,
    ) -> Result<(), ()> {
        // Nothing after the last frame (exited, detach) is written.
        let last = frames
            .iter()
            .position(|f| matches!(f, Frame::Control(c) if c.is_last()));
        if let Some(at) = last {
            frames.truncate(at + 1);
        }
        match self {
            Out::Frames => {
                let written = wire::write_frames(writer, frames).await;
                frames.clear();
                written.map_err(|_| ())?;
            }
            Out::Terminal {
                terminal,
                paused,
                held,
            } => {
                let mut chunks = Vec::new();
                for frame in frames.drain(..) {
                    match frame {
                        Frame::Data(bytes, pen_only) if *paused => held.keep((bytes, pen_only)),
                        Frame::Data(bytes, pen_only) => chunks.push((bytes, pen_only)),
                        Frame::Control(control) => {
                            if !chunks.is_empty() {
                                terminal.write(std::mem::take(&mut chunks)).await?;
                            }
                            // The client restores its terminal when the stream ends or the
                            // program exits: the undo goes first, after the last write.
                            if matches!(control, Control::Exited(_)) || control.is_last() {
                                let undo = Control::Restore(terminal.undo().await);
                                wire::write_frames(writer, &[Frame::Control(undo)])
                                    .await
                                    .map_err(|_| ())?;
                            }
                            wire::write_frames(writer, &[Frame::Control(control)])
                                .await
                                .map_err(|_| ())?;
                        }
                    }
                }
                if !chunks.is_empty() {
                    terminal.write(chunks).await?;
                }
            }
        }
        if last.is_some() {
            return Err(());
        }
        Ok(())
    }

    /// Serves one of the input side's requests. `Some(true)` when the client is to be sent a
    /// fresh redraw, `None` when the attach ends.
    async fn ask(&mut self, writer: &mut OwnedWriteHalf, ask: Ask) -> Result<Option<bool>, ()> {
        match (&mut *self, ask) {
            (_, Ask::Keys(keys)) => {
                wire::write_frames(writer, &[Frame::Control(Control::Keys(keys))])
                    .await
                    .map_err(|_| ())?;
                Ok(Some(false))
            }
            (out, Ask::Redraw) => {
                if let Out::Terminal { paused, held, .. } = out {
                    // The redraw shows all of it.
                    (*paused, *held) = (false, Held::default());
                }
                Ok(Some(true))
            }
            (Out::Frames, Ask::Detach) => Ok(None),
            // Only a client whose terminal the pane host writes pauses.
            (Out::Frames, Ask::Pause | Ask::Resume) => Ok(Some(false)),
            (
                Out::Terminal {
                    terminal, paused, ..
                },
                Ask::Pause,
            ) => {
                *paused = true;
                terminal.flush().await;
                wire::write_frames(writer, &[Frame::Control(Control::Paused)])
                    .await
                    .map_err(|_| ())?;
                Ok(Some(false))
            }
            (
                Out::Terminal {
                    terminal,
                    paused,
                    held,
                },
                Ask::Resume,
            ) => {
                *paused = false;
                let held = std::mem::take(held);
                if held.missed {
                    return Ok(Some(true));
                }
                if !held.chunks.is_empty() {
                    terminal.write(held.chunks).await?;
                }
                Ok(Some(false))
            }
            (Out::Terminal { terminal, .. }, Ask::Detach) => {
                let undo = Control::Restore(terminal.undo().await);
                let _ = wire::write_frames(writer, &[Frame::Control(undo)]).await;
                Ok(None)
            }
        }
    }
}
