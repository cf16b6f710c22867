//! One attach, from the connection to its end: [`attach`] connects and makes the handshake
//! ([`handshake`]), then runs the loop, which waits for the next [`Input`] (a frame from the
//! pane host, keys from the terminal, a resize, a timer running out, a signal) and hands it to
//! the [`Session`], the state of the attach with a method per input. The session writes the
//! outer terminal through a [`Terminal`], so its logic is unit-tested over a recording
//! terminal and a socket pair that plays the pane host (the tests below), without a PTY.

use anyhow::{anyhow, Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use belfry_cli::keys::{Action, Binding, KeyFilter, ViewKeys, ViewRead};
use belfry_proto::{Control, Size};
use belfry_transport::wire::{Frame, FrameReader};

use super::copy::{kept, osc52, paste_bytes};
use super::handshake::{handshake, pane_rows, Connected};
use super::record::{SharedOuter, TITLE_PUSH};
use super::status::{show_message, StatusLine};
use super::terminal::{read_keys, take_color_answers, Keyboard, Terminal};
use super::views::{mark_activity, Chooser, History, Outcome};
use super::{
    bracketed_paste, escape_time, history_lines, key_bindings, neighbour, read_only_note,
    shown_cropped, DetachKey, Ended, Endpoint, Panes, View, VIEW_SCREEN_ON,
};

/// The client's questions to its terminal on attach: the foreground and background colours.
const COLOR_QUERIES: &[u8] = b"\x1b]10;?\x1b\\\x1b]11;?\x1b\\";

/// How long after attaching the terminal's answers to [`COLOR_QUERIES`] are looked for in
/// its input: a terminal answers within milliseconds, a remote one within a round trip.
const COLOR_ANSWER_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a message stays on the last line unless a key is typed first.
pub(super) const MESSAGE_TIME: std::time::Duration = std::time::Duration::from_secs(3);

/// How long a client whose write found the pane host gone reads what the host sent last.
const LAST_WORD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the client waits for the pane host to confirm a pause (its terminal writer
/// finishing the write in progress) before it draws all the same.
const PAUSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a leaving client whose terminal the pane host writes waits for the bytes that
/// undo what the pane host wrote; without them every mode is reset.
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What an attach is given by `run`: where the pane is, how the client behaves, and what it
/// carries over from the pane it left.
pub(super) struct Target<'a> {
    pub(super) socket: &'a Endpoint,
    pub(super) session: &'a str,
    pub(super) read_only: bool,
    pub(super) detach: DetachKey,
    pub(super) size: Option<(u16, u16)>,
    pub(super) interactive: bool,
    pub(super) panes: &'a dyn Panes,
    /// A note to show over the pane once it is drawn.
    pub(super) note: Option<String>,
    /// Keys typed after a switch to this pane, in the same read: they are this pane's.
    pub(super) carried: Vec<u8>,
    /// Whether the status line is drawn under the pane; `prefix S` turns it on and off, and
    /// the pane switched to keeps what it was.
    pub(super) status_line: &'a std::cell::Cell<bool>,
    /// The paste buffer: what copy mode copied last, kept across pane switches.
    pub(super) paste_buffer: &'a std::cell::RefCell<String>,
    /// Each pane's revision when this client last looked at it (the chooser's activity mark).
    pub(super) seen: &'a std::cell::RefCell<std::collections::HashMap<String, u64>>,
}

/// Attaches to the pane of `target` until detach, exit, a signal or a switch to another pane.
pub(super) async fn attach<T: Terminal>(
    target: Target<'_>,
    terminal: T,
    outer: &SharedOuter,
    keyboard: &mut Option<Keyboard>,
) -> Result<Ended> {
    let mut note = target.note.clone();
    // A watcher is told, over the pane, that its keys go nowhere (the line above it scrolls
    // away under the redraw).
    if target.read_only && note.is_none() {
        note = Some(read_only_note(target.session, target.detach));
    }
    let mut connected = handshake(&target, keyboard.as_ref()).await?;
    let handed_terminal = connected.terminal.take();
    let mut session = Session::new(&target, connected, terminal, outer, note);
    session.start()?;
    // The attach asked for a row less for a status line a pane host that predates it will not
    // keep free: the pane gets the whole terminal back, and no line is drawn.
    if target.status_line.get() && !session.status.known() {
        session.send_size().await?;
    }
    session.hand_over(handed_terminal, keyboard.as_ref())?;
    use tokio::signal::unix::{signal, SignalKind};
    let mut winch = signal(SignalKind::window_change())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    if let Some(ended) = session.show_note_over_handed().await? {
        return Ok(ended);
    }
    // The pane host may close the connection right after a last frame (a detach, the
    // program's end) while this client writes to it: the write fails, and what the host said
    // last is still to be read.
    let ended = async {
        loop {
            session.give_keyboard().await?;
            // Keys read but not yet taken are taken before the keyboard is read again.
            if !session.carried.is_empty() {
                let keys = std::mem::take(&mut session.carried);
                if let Some(ended) = session.on_keys(Some(keys)).await? {
                    return Ok(ended);
                }
                continue;
            }
            let input = session
                .next_input(keyboard, &mut winch, &mut term, &mut hup)
                .await?;
            if let Some(ended) = session.on_input(input).await? {
                return Ok::<_, anyhow::Error>(ended);
            }
        }
    }
    .await;
    match ended {
        Err(err) if host_hung_up(&err) => match session.last_word().await {
            Some(ended) => Ok(ended),
            None => Err(err),
        },
        ended => ended,
    }
}

/// What the attach loop waits for, one at a time.
pub(super) enum Input {
    /// A frame from the pane host, or `None` when it closed the connection.
    Frame(Option<Frame>),
    /// Keystrokes from the terminal, or `None` when it gives no more.
    Keys(Option<Vec<u8>>),
    /// The time for the terminal's colour answers is over.
    ColorsOver,
    /// The terminal changed size.
    Resize,
    /// The start of an escape sequence waited its escape time for its rest.
    EscapeTime,
    /// A message has been shown long enough.
    MessageTime,
    /// A signal that ends the attach (its name).
    Signal(&'static str),
    /// The status line's words are due to be asked for again.
    StatusTime,
}

/// The state of one attach: the connection to the pane host, the terminal, and what the
/// client is in the middle of (a view open, a message shown, keys half-typed, the keyboard
/// lent to the pane host).
pub(super) struct Session<'a, T: Terminal> {
    socket: &'a Endpoint,
    session: &'a str,
    read_only: bool,
    detach: DetachKey,
    panes: &'a dyn Panes,
    outer: &'a SharedOuter,
    terminal: T,
    /// The ssh process of a remote pane, ended when the session is dropped.
    _ssh: Option<belfry_mux::remote::SshChild>,
    reader: FrameReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// Whether the pane host writes the pane's output to the terminal itself.
    handed: bool,
    /// Whether the pane host takes the keyboard as well.
    keyboard_handed: bool,
    filter: KeyFilter,
    stdin_open: bool,
    /// A note for the user, shown over the pane once its redraw is drawn.
    note: Option<String>,
    /// While a message covers the last line: when the pane host is asked to redraw it away.
    message_until: Option<tokio::time::Instant>,
    /// While the start of an escape sequence waits for its rest: when it is taken as it is.
    partial_until: Option<tokio::time::Instant>,
    /// The chooser or the history view, while one is open over the pane, and the keys it
    /// reads (an escape sequence cut off by a read waits for its rest, as in the filter).
    view: Option<View>,
    view_keys: ViewKeys,
    /// Keys read but not yet taken: those typed after a binding, a view's last key or a
    /// switch to this pane, in the same read. They are taken before the keyboard is read again.
    carried: Vec<u8>,
    /// Whether the pane host has stopped writing to the terminal for this client to draw.
    paused: bool,
    /// Whether the pane host reads the keyboard now (it gives it back with the keys of a
    /// read this client must filter); the client reads it only while not.
    host_reads: bool,
    /// While the terminal's colour answers may still come (they are taken out of the keys):
    /// the keyboard stays here until both came or the time for them is over.
    colors_asked: bool,
    colors_until: tokio::time::Instant,
    colors_seen: [bool; 2],
    /// The status line under the pane, when it is on.
    status: StatusLine<'a>,
    paste_buffer: &'a std::cell::RefCell<String>,
    seen: &'a std::cell::RefCell<std::collections::HashMap<String, u64>>,
}

impl<'a, T: Terminal> Session<'a, T> {
    /// The session of an attach whose handshake is done.
    pub(super) fn new(
        target: &Target<'a>,
        connected: Connected,
        terminal: T,
        outer: &'a SharedOuter,
        note: Option<String>,
    ) -> Session<'a, T> {
        Session {
            socket: target.socket,
            session: target.session,
            read_only: target.read_only,
            detach: target.detach,
            panes: target.panes,
            outer,
            terminal,
            _ssh: connected.ssh,
            reader: connected.reader,
            writer: connected.writer,
            handed: connected.handed,
            keyboard_handed: connected.keyboard_handed,
            filter: KeyFilter::with_bindings(target.detach, key_bindings()),
            stdin_open: connected.keyboard,
            note,
            message_until: None,
            partial_until: None,
            view: None,
            view_keys: ViewKeys::default(),
            carried: target.carried.clone(),
            paused: false,
            host_reads: false,
            colors_asked: connected.keyboard_handed,
            colors_until: tokio::time::Instant::now(),
            colors_seen: [false, false],
            status: StatusLine::new(target.status_line, connected.status_known),
            paste_buffer: target.paste_buffer,
            seen: target.seen,
        }
    }

    /// What the client writes once attached, before any frame: where the user is, the
    /// terminal's title saved, and the questions for its colours.
    fn start(&mut self) -> Result<()> {
        // spec §5: a one-line note of where the user is and how to leave, written before the
        // redraw arrives so it never lands in the pane's screen or its model.
        let watching = if self.read_only { ", read-only" } else { "" };
        let (session, detach) = (self.session, self.detach);
        self.draw(format!("[attached to {session}{watching}: {detach} detaches]\r\n").as_bytes())?;
        // The terminal's own title is saved before the pane may set one, and put back on the
        // way out (`Record::undo`): attaching and detaching leave it as it was.
        self.draw(TITLE_PUSH)?;
        if let Ok(mut outer) = self.outer.lock() {
            outer.title_saved = true;
        }
        // The terminal's own colours, for the pane host to answer the program's colour queries
        // with while no client is attached (a program started detached otherwise sees a fixed
        // black and white). A terminal that does not answer is not waited for.
        self.draw(COLOR_QUERIES)?;
        self.colors_until = tokio::time::Instant::now() + COLOR_ANSWER_TIME;
        Ok(())
    }

    /// Sends the pane host the terminal (and the keyboard, when it takes that too) once it
    /// took them: from here on the pane host writes to the terminal; this process writes to
    /// it only while the pane host has paused (a message, a view).
    fn hand_over(
        &mut self,
        terminal: Option<std::os::fd::OwnedFd>,
        keyboard: Option<&Keyboard>,
    ) -> Result<()> {
        let (true, Some(terminal)) = (self.handed, terminal) else {
            return Ok(());
        };
        if let Ok(mut outer) = self.outer.lock() {
            outer.handed = true;
        }
        use std::os::fd::AsFd;
        let mut fds = vec![terminal.as_fd()];
        if let (true, Some(keyboard)) = (self.keyboard_handed, keyboard) {
            fds.push(keyboard.fd.get_ref().as_fd());
        }
        belfry_pty::terminal::send(self.writer.as_ref(), &fds)
            .context("cannot hand the terminal to the pane host")?;
        Ok(())
    }

    /// A note over a pane whose host writes the terminal is drawn at once (the pane host
    /// paused for it); with frames it waits for the first output (see [`Self::on_frame`]).
    async fn show_note_over_handed(&mut self) -> Result<Option<Ended>> {
        if !self.handed {
            return Ok(None);
        }
        let Some(note) = self.note.take() else {
            return Ok(None);
        };
        if let Some(ended) = self.message_over_pane(true, &note).await? {
            return Ok(Some(ended));
        }
        self.message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
        Ok(None)
    }

    /// Lends the keyboard to the pane host whenever no key is this client's: no view, no
    /// message to clear at the next key, no keystroke or binding half-typed, and the
    /// terminal's colour answers in.
    async fn give_keyboard(&mut self) -> Result<()> {
        if self.keyboard_handed
            && !self.host_reads
            && self.stdin_open
            && !self.colors_asked
            && self.view.is_none()
            && self.message_until.is_none()
            && !self.filter.holds_keys()
            && self.carried.is_empty()
        {
            self.writer
                .write_all(&Frame::Control(Control::Keyboard).encode())
                .await?;
            self.host_reads = true;
        }
        Ok(())
    }

    /// Waits for the next input: a frame, keys (while the keyboard is this client's), a
    /// signal, or a timer of the session's running out. The frame reader is cancel-safe, so
    /// a frame read half-way when another input comes first is kept.
    async fn next_input(
        &mut self,
        keyboard: &mut Option<Keyboard>,
        winch: &mut tokio::signal::unix::Signal,
        term: &mut tokio::signal::unix::Signal,
        hup: &mut tokio::signal::unix::Signal,
    ) -> Result<Input> {
        let (colors_asked, colors_until) = (self.colors_asked, self.colors_until);
        let colors_in = async move {
            if colors_asked {
                tokio::time::sleep_until(colors_until).await
            } else {
                std::future::pending().await
            }
        };
        let clear_message = until(self.message_until);
        let flush_partial = until(self.partial_until);
        let status_due = until(self.status.until);
        let reads_keys = self.stdin_open && !self.host_reads;
        Ok(tokio::select! {
            frame = self.reader.read() => Input::Frame(frame?),
            keys = read_keys(keyboard), if reads_keys => Input::Keys(keys),
            _ = colors_in => Input::ColorsOver,
            _ = winch.recv() => Input::Resize,
            _ = flush_partial => Input::EscapeTime,
            _ = clear_message => Input::MessageTime,
            _ = status_due => Input::StatusTime,
            _ = term.recv() => Input::Signal("SIGTERM"),
            _ = hup.recv() => Input::Signal("SIGHUP"),
        })
    }

    /// Takes one input; `Some` when it ends the attach.
    pub(super) async fn on_input(&mut self, input: Input) -> Result<Option<Ended>> {
        match input {
            Input::Frame(frame) => self.on_frame(frame).await,
            Input::Keys(keys) => self.on_keys(keys).await,
            Input::ColorsOver => {
                self.colors_asked = false;
                Ok(None)
            }
            Input::Resize => self.on_resize().await.map(|()| None),
            Input::EscapeTime => self.on_escape_time().await,
            Input::MessageTime => self.on_message_time().await.map(|()| None),
            Input::Signal(name) => {
                self.leave().await;
                Ok(Some(Ended::Signal(name)))
            }
            Input::StatusTime => self.draw_status().await,
        }
    }

    /// A frame from the pane host: output to draw, or a control.
    async fn on_frame(&mut self, frame: Option<Frame>) -> Result<Option<Ended>> {
        match frame {
            // While a view is open the pane's output is not drawn; closing the view asks
            // for a redraw of all of it.
            Some(Frame::Data(bytes, _)) => {
                if self.view.is_none() {
                    self.write_output(&bytes)?;
                    // A note for the user goes over the last line once the redraw is drawn.
                    if let Some(note) = self.note.take() {
                        self.show_message(&note)?;
                        self.message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
                    }
                }
            }
            Some(Frame::Control(control)) => match control {
                Control::Exited(status) => return Ok(Some(Ended::Exited(status))),
                Control::Detach { .. } => return Ok(Some(Ended::Detached)),
                Control::Restore(undo) => keep_undo(self.outer, undo),
                // The keyboard is this client's again: with keys to filter, or none when
                // the pane host could not read it (this client then finds out why, and
                // keeps it).
                Control::Keys(keys) => {
                    self.host_reads = false;
                    if keys.is_empty() {
                        // Not offered again: this client reads it from now on.
                        self.keyboard_handed = false;
                    } else {
                        return self.on_keys(Some(keys)).await;
                    }
                }
                // An answer to a pause that came after its wait ended.
                Control::Paused => {}
                // Only a client sends these.
                Control::Redraw
                | Control::Colors(_)
                | Control::Resize(_)
                | Control::Pause(_)
                | Control::Keyboard
                | Control::Status(_) => {}
            },
            None => return Ok(Some(Ended::Closed)),
        }
        Ok(None)
    }

    /// The terminal changed size: the pane is asked to take it, and an open view is drawn
    /// again at the new size.
    async fn on_resize(&mut self) -> Result<()> {
        // A terminal larger than a pane can be says nothing: the pane keeps its size.
        self.send_size().await?;
        self.render_view()?;
        self.status.due_now();
        Ok(())
    }

    /// Tells the pane host the rows and columns the pane has here: the terminal's, less the
    /// status line's row while it is on.
    async fn send_size(&mut self) -> Result<()> {
        let status_line = self.status.is_on();
        if let Some(size) = self.terminal.size().and_then(|(rows, cols)| {
            Size::new(pane_rows(rows, status_line).into(), cols.into()).ok()
        }) {
            self.writer
                .write_all(&Frame::Control(Control::Resize(size)).encode())
                .await?;
        }
        Ok(())
    }

    /// Draws the status line on the terminal's last row when its words changed (or something
    /// drew over it), pausing a pane host that writes the terminal so the two never write at
    /// once; not while a view or a message covers the row. `Some` when the attach ended
    /// during the pause.
    async fn draw_status(&mut self) -> Result<Option<Ended>> {
        let covered = self.view.is_some() || self.message_until.is_some();
        let size = self.terminal.size().unwrap_or((24, 80));
        let (panes, session) = (self.panes, self.session);
        let words = || panes.status_words(session).ok();
        let Some(bytes) = self.status.due(session, words, covered, size) else {
            return Ok(None);
        };
        let pause_first = self.handed && !self.paused;
        if pause_first {
            if let Some(ended) = self.pause().await? {
                return Ok(Some(ended));
            }
        }
        self.draw(&bytes)?;
        if let Ok(mut outer) = self.outer.lock() {
            // Erased on the way out, with the terminal's other borrowed rows.
            outer.cover_rows = outer.cover_rows.max(1);
        }
        if pause_first {
            self.writer
                .write_all(&Frame::Control(Control::Pause(false)).encode())
                .await?;
        }
        Ok(None)
    }

    /// `prefix ]`: the paste buffer typed into the pane, as keys typed here are (a watcher's
    /// go nowhere), between the bracketed paste markers when the program asked for them.
    async fn paste(&mut self) -> Result<Option<Ended>> {
        let text = self.paste_buffer.borrow().clone();
        if text.is_empty() {
            let note = format!(
                "nothing to paste: {} [ opens the history, v selects, y copies",
                DetachKey {
                    prefix: self.detach.prefix,
                    then: None
                }
            );
            return self.message_with_pause(&note).await;
        }
        if self.read_only {
            let note = read_only_note(self.session, self.detach);
            return self.message_with_pause(&note).await;
        }
        // A pane whose modes cannot be asked for gets the text unbracketed, as typed.
        let bracketed = bracketed_paste(self.socket).unwrap_or(false);
        let bytes = paste_bytes(&text, bracketed);
        belfry_transport::wire::write_frames(&mut self.writer, &[Frame::data(&bytes)]).await?;
        Ok(None)
    }

    /// `prefix S`: the status line on or off. The pane host is told first, then given the
    /// pane's new rows: turned off, it sends a full redraw, which paints the whole terminal
    /// again; turned on, it paints the rows above the line, and the line is drawn.
    async fn toggle_status(&mut self) -> Result<Option<Ended>> {
        if !self.status.known() {
            let note = format!(
                "the pane host of {} predates the status line; a pane started since has it",
                self.session
            );
            return self.message_with_pause(&note).await;
        }
        let on = self.status.toggle();
        self.writer
            .write_all(&Frame::Control(Control::Status(on)).encode())
            .await?;
        self.send_size().await?;
        if !on {
            if let Ok(mut outer) = self.outer.lock() {
                outer.cover_rows = 0;
            }
        }
        Ok(None)
    }

    /// The start of an escape sequence waited long enough: it is taken as it is (a lone
    /// Escape).
    async fn on_escape_time(&mut self) -> Result<Option<Ended>> {
        self.partial_until = None;
        if self.view.is_some() {
            let read = self.view_keys.flush();
            self.on_view_read(read).await
        } else {
            let mut out = Vec::new();
            let action = self.filter.flush(&mut out);
            self.on_filtered(out, action).await
        }
    }

    /// A message was shown long enough: the pane (or the open view) is drawn over it.
    async fn on_message_time(&mut self) -> Result<()> {
        self.message_until = None;
        if self.render_view()? {
            if let Ok(mut outer) = self.outer.lock() {
                outer.cover_rows = 0;
            }
        } else {
            self.ask_redraw().await?;
        }
        Ok(())
    }

    /// Keystrokes, read here or given back by the pane host (`None`: the keyboard gives no
    /// more): for the open view, or through the key filter for the pane and the bindings.
    pub(super) async fn on_keys(&mut self, keys: Option<Vec<u8>>) -> Result<Option<Ended>> {
        let Some(keys) = keys else {
            // The terminal stopped giving input: keep showing output until the pane ends.
            self.stdin_open = false;
            return Ok(None);
        };
        if self.view.is_some() {
            let read = self.view_keys.feed(&keys);
            self.partial_until = self
                .view_keys
                .has_partial()
                .then(|| tokio::time::Instant::now() + escape_time());
            return self.on_view_read(read).await;
        }
        let keys = if tokio::time::Instant::now() < self.colors_until {
            let keys = self.take_colors(&keys).await?;
            if keys.is_empty() {
                return Ok(None);
            }
            keys
        } else {
            keys
        };
        if self.message_until.take().is_some() {
            self.ask_redraw().await?;
        }
        let mut out = Vec::with_capacity(keys.len());
        let action = self.filter.feed(&keys, &mut out);
        self.partial_until = self
            .filter
            .has_partial()
            .then(|| tokio::time::Instant::now() + escape_time());
        self.on_filtered(out, action).await
    }

    /// The terminal's colour answers taken out of `keys` and sent to the pane host; the
    /// keystrokes left.
    async fn take_colors(&mut self, keys: &[u8]) -> Result<Vec<u8>> {
        let (keys, answers) = take_color_answers(keys);
        // Both answers in: the window closes (and the keyboard may go).
        for (at, query) in [&b"\x1b]10;"[..], b"\x1b]11;"].iter().enumerate() {
            self.colors_seen[at] |= answers.windows(query.len()).any(|w| w == *query);
        }
        if self.colors_seen == [true, true] {
            self.colors_asked = false;
        }
        if !answers.is_empty() {
            let colors = Control::Colors(String::from_utf8_lossy(&answers).into());
            self.writer
                .write_all(&Frame::Control(colors).encode())
                .await?;
        }
        Ok(keys)
    }

    /// Keys for the open view: it stays, closes (the keys after the one that closed it go
    /// to the pane), or switches to another pane.
    async fn on_view_read(&mut self, read: ViewRead) -> Result<Option<Ended>> {
        if read.is_empty() {
            return Ok(None);
        }
        self.message_until = None;
        let Some(open) = self.view.as_mut() else {
            return Ok(None);
        };
        // The keys after the one that closes the view are not the view's: they go to
        // the pane (or the pane switched to), as if typed a moment later.
        let mut outcome = Outcome::Stay;
        let mut rest = Vec::new();
        for (index, key) in read.keys().enumerate() {
            outcome = open.key(key);
            if outcome != Outcome::Stay {
                rest = self.view_keys.leave(&read, index);
                break;
            }
        }
        if let Outcome::Copy(text) = &outcome {
            // Copied while the view is still drawn (the pane host paused): to the outer
            // terminal's clipboard, and to the buffer `prefix ]` pastes.
            let text = kept(text.clone());
            self.terminal.write(&osc52(&text))?;
            *self.paste_buffer.borrow_mut() = text;
        }
        match outcome {
            Outcome::Stay => {
                self.render_view()?;
            }
            Outcome::Leave | Outcome::Copy(_) => {
                self.view = None;
                self.view_keys = ViewKeys::default();
                self.partial_until = None;
                // The redraw also ends the pane host's pause, and leaves the view's
                // alternate screen.
                self.paused = false;
                self.ask_redraw().await?;
                self.carried = rest;
            }
            Outcome::Switch(name) => match self.panes.socket(&name) {
                Ok(next) => {
                    self.leave().await;
                    return Ok(Some(Ended::Switch(name, next, rest)));
                }
                Err(err) => {
                    self.render_view()?;
                    self.show_message(&format!("cannot attach to {name}: {err:#}"))?;
                    // The view stays open: the keys after Enter are its own.
                    self.partial_until = None;
                    self.carried = rest;
                }
            },
        }
        Ok(None)
    }

    /// What the key filter made of a read: the bytes for the pane, and the client's own
    /// action (detach, a message, a binding).
    async fn on_filtered(&mut self, out: Vec<u8>, action: Action) -> Result<Option<Ended>> {
        if !out.is_empty() && !self.read_only {
            belfry_transport::wire::write_frames(&mut self.writer, &[Frame::data(&out)]).await?;
        }
        // Typing into a watcher says again why nothing happens. A read that starts with an
        // Escape may be the terminal answering a query, which nobody typed: no note.
        if self.read_only && out.first().is_some_and(|&b| b != 0x1b) && self.message_until.is_none()
        {
            let note = read_only_note(self.session, self.detach);
            if let Some(ended) = self.message_with_pause(&note).await? {
                return Ok(Some(ended));
            }
        }
        match action {
            Action::None => Ok(None),
            Action::Detach => {
                self.leave().await;
                Ok(Some(Ended::Detached))
            }
            Action::Show(message) => self.message_with_pause(&message).await,
            Action::Bound(binding) => self.on_binding(binding).await,
        }
    }

    /// A binding typed: the next or previous pane, the chooser, or the history view.
    async fn on_binding(&mut self, binding: Binding) -> Result<Option<Ended>> {
        // What was typed after the binding in the same read: the view's keys, the
        // next pane's, or (when the binding fails) the pane's.
        let rest = self.filter.after_binding();
        let session = self.session;
        let opened = match binding {
            Binding::StatusLine => {
                self.carried = rest;
                return self.toggle_status().await;
            }
            Binding::Paste => {
                self.carried = rest;
                return self.paste().await;
            }
            Binding::NextPane | Binding::PreviousPane => {
                let next = binding == Binding::NextPane;
                match neighbour(self.panes, session, next) {
                    Ok(Some(name)) => match self.panes.socket(&name) {
                        Ok(next) => {
                            self.leave().await;
                            return Ok(Some(Ended::Switch(name, next, rest)));
                        }
                        Err(err) => Err(anyhow!("cannot attach to {name}: {err:#}")),
                    },
                    Ok(None) => Err(anyhow!("{session} is the only pane")),
                    Err(err) => Err(err),
                }
            }
            Binding::ChoosePane => self.panes.list().map(|mut entries| {
                mark_activity(&mut entries, session, &mut self.seen.borrow_mut());
                View::Chooser(Chooser::new(entries, session))
            }),
            Binding::History => history_lines(self.socket).map(|lines| {
                let (rows, _) = self.terminal.size().unwrap_or((24, 80));
                View::History(History::new(lines, rows))
            }),
        };
        match opened {
            Ok(open) => {
                // The pane host stops writing to the terminal while the view is open.
                if self.handed && !self.paused {
                    if let Some(ended) = self.pause().await? {
                        return Ok(Some(ended));
                    }
                    self.paused = true;
                }
                // Not recorded as the pane's: the record keeps `view_screen`.
                self.terminal.write(VIEW_SCREEN_ON)?;
                if let Ok(mut outer) = self.outer.lock() {
                    outer.view_screen = true;
                    // The view covers every row; leaving it redraws them all.
                    outer.cover_rows = 0;
                }
                self.view = Some(open);
                self.render_view()?;
                self.carried = rest;
                Ok(None)
            }
            Err(err) => {
                let message = format!("{err:#}");
                if let Some(ended) = self.message_with_pause(&message).await? {
                    return Ok(Some(ended));
                }
                self.carried = rest;
                Ok(None)
            }
        }
    }

    /// Draws the open view at the terminal's size; `false` when none is open.
    fn render_view(&mut self) -> std::io::Result<bool> {
        let size = self.terminal.size().unwrap_or((24, 80));
        let Some(open) = self.view.as_mut() else {
            return Ok(false);
        };
        let frame = open.render(size);
        self.draw(&frame)?;
        Ok(true)
    }

    /// Shows `message` over the pane (pausing a pane host that writes the terminal and has
    /// not paused for a view) until [`MESSAGE_TIME`] or the next key.
    async fn message_with_pause(&mut self, message: &str) -> Result<Option<Ended>> {
        let pause_first = self.handed && !self.paused;
        if let Some(ended) = self.message_over_pane(pause_first, message).await? {
            return Ok(Some(ended));
        }
        self.message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
        Ok(None)
    }

    /// Writes `bytes` to the terminal, recorded so the way out can undo what they turned on.
    fn draw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if let Ok(mut outer) = self.outer.lock() {
            outer.observe(bytes);
        }
        self.terminal.write(bytes)
    }

    /// Writes a data frame's bytes and every whole data frame already in the read buffer
    /// after it to the terminal in one vectored write, straight from the buffer: a pane
    /// printing fast costs the client one system call per batch, not one per chunk.
    fn write_output(&mut self, first: &[u8]) -> std::io::Result<()> {
        let buffered = self.reader.buffered();
        let mut parts = vec![first];
        let mut used = 0;
        while parts.len() < 1024 {
            match Frame::buffered_data(&buffered[used..]) {
                Some((payload, n)) => {
                    parts.push(payload);
                    used += n;
                }
                None => break,
            }
        }
        if let Ok(mut outer) = self.outer.lock() {
            for part in &parts {
                outer.observe(part);
            }
        }
        self.terminal.write_parts(&parts)?;
        self.reader.consume(used);
        Ok(())
    }

    /// Draws `message` over the terminal's last lines (see [`show_message`]).
    fn show_message(&mut self, message: &str) -> std::io::Result<()> {
        show_message(message, self.outer, &mut self.terminal)
    }

    /// What a pane host that closed the connection said last: its detach or the program's
    /// end, or the end of the connection; `None` when nothing ends the attach in time.
    async fn last_word(&mut self) -> Option<Ended> {
        let until = tokio::time::Instant::now() + LAST_WORD_WAIT;
        loop {
            let frame = tokio::time::timeout_at(until, self.reader.read())
                .await
                .ok()?;
            match frame.map(|frame| self.end_in(frame)) {
                Ok(Ok(Some(ended))) => return Some(ended),
                // Output for a terminal that may be gone too: shown if it could be.
                Ok(Ok(None) | Err(_)) => {}
                Err(_) => return Some(Ended::Closed),
            }
        }
    }

    /// Asks the pane host to stop writing to the terminal and waits until it has, so what
    /// the client draws next is not cut into by the pane's output. `Some` when the attach
    /// ended meanwhile (the program exited, the pane host closed).
    async fn pause(&mut self) -> Result<Option<Ended>> {
        self.writer
            .write_all(&Frame::Control(Control::Pause(true)).encode())
            .await?;
        let until = tokio::time::Instant::now() + PAUSE_WAIT;
        loop {
            let Ok(frame) = tokio::time::timeout_at(until, self.reader.read()).await else {
                return Ok(None);
            };
            match frame? {
                Some(Frame::Control(Control::Paused)) => return Ok(None),
                frame => {
                    if let Some(ended) = self.end_in(frame)? {
                        return Ok(Some(ended));
                    }
                }
            }
        }
    }

    /// A frame read while the client waits for one in particular: the end of the attach it
    /// says (the program's end, a detach, the end of the connection), or `None` once its
    /// output and undo bytes are taken care of.
    fn end_in(&mut self, frame: Option<Frame>) -> std::io::Result<Option<Ended>> {
        match frame {
            Some(Frame::Control(Control::Restore(undo))) => keep_undo(self.outer, undo),
            Some(Frame::Control(Control::Exited(status))) => {
                return Ok(Some(Ended::Exited(status)))
            }
            Some(Frame::Control(Control::Detach { .. })) => return Ok(Some(Ended::Detached)),
            Some(Frame::Control(_)) => {}
            Some(Frame::Data(bytes, _)) => self.draw(&bytes)?,
            None => return Ok(Some(Ended::Closed)),
        }
        Ok(None)
    }

    /// Draws `message` over the terminal's last line (see [`show_message`]). With
    /// `pause_first` (the pane host writes the terminal and has not paused for a view), the
    /// pane host is paused for the drawing and then goes on writing the output without a
    /// redraw, so the message stays until the next redraw. `Some` when the attach ended
    /// during the pause.
    async fn message_over_pane(
        &mut self,
        pause_first: bool,
        message: &str,
    ) -> Result<Option<Ended>> {
        if !pause_first {
            self.show_message(message)?;
            return Ok(None);
        }
        if let Some(ended) = self.pause().await? {
            return Ok(Some(ended));
        }
        self.show_message(message)?;
        self.writer
            .write_all(&Frame::Control(Control::Pause(false)).encode())
            .await?;
        Ok(None)
    }

    /// Tells the pane host this client is leaving; when the pane host writes the terminal,
    /// waits (at most [`LEAVE_WAIT`]) for the bytes that undo what it wrote.
    async fn leave(&mut self) {
        // Whether this client is shown the cropped view is asked while it is still attached:
        // once it has left, the pane may take another client's larger size.
        if let Endpoint::Socket(path) = self.socket {
            let cropped = shown_cropped(path);
            if let Ok(mut outer) = self.outer.lock() {
                outer.cropped = Some(cropped);
            }
        }
        let detach = Frame::Control(Control::Detach { reason: None }).encode();
        if self.writer.write_all(&detach).await.is_err() || !self.handed {
            return;
        }
        let until = tokio::time::Instant::now() + LEAVE_WAIT;
        while let Ok(Ok(Some(frame))) = tokio::time::timeout_at(until, self.reader.read()).await {
            if let Frame::Control(Control::Restore(undo)) = frame {
                keep_undo(self.outer, undo);
                return;
            }
        }
    }

    /// Asks the pane host for a redraw, which paints over whatever the client drew (a
    /// message).
    async fn ask_redraw(&mut self) -> std::io::Result<()> {
        self.writer
            .write_all(&Frame::Control(Control::Redraw).encode())
            .await?;
        if let Ok(mut outer) = self.outer.lock() {
            outer.cover_rows = 0;
            outer.view_screen = false;
        }
        // The pane's redraw leaves the status line's row as it is: what covered it is
        // covered again by the line.
        self.status.due_now();
        Ok(())
    }
}

/// Sleeps until `when`, or forever when there is no such time.
async fn until(when: Option<tokio::time::Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when).await,
        None => std::future::pending().await,
    }
}

/// Whether `err` is a write to a pane host that had closed the connection.
fn host_hung_up(err: &anyhow::Error) -> bool {
    err.downcast_ref::<std::io::Error>().is_some_and(|err| {
        matches!(
            err.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        )
    })
}

/// Keeps the pane host's undo bytes for the terminal's restore.
fn keep_undo(outer: &SharedOuter, undo: String) {
    if let Ok(mut outer) = outer.lock() {
        outer.host_undo = Some(undo.into_bytes());
    }
}

#[cfg(test)]
mod tests {
    //! The session's logic over a recording terminal and a socket pair whose far end plays
    //! the pane host: what reaches the pane, what is drawn, and how the attach ends.

    use std::time::Duration;

    use anyhow::{anyhow, Result};
    use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
    use tokio::net::UnixStream;

    use belfry_proto::{Control, Size};
    use belfry_transport::wire::{Frame, FrameReader};

    use super::super::handshake::Connected;
    use super::super::record::SharedOuter;
    use super::super::terminal::{Terminal, READ_BUFFER};
    use super::super::views::PaneEntry;
    use super::super::{DetachKey, Ended, Endpoint, Panes};
    use super::{take_color_answers, Input, Session, Target};

    /// A terminal that keeps what was written to it, of a size the test sets.
    struct Recording {
        written: Vec<u8>,
        size: Option<(u16, u16)>,
    }

    impl Recording {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.written).into_owned()
        }
    }

    impl Terminal for Recording {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            self.written.extend_from_slice(bytes);
            Ok(())
        }

        fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
            parts
                .iter()
                .for_each(|part| self.written.extend_from_slice(part));
            Ok(())
        }

        fn size(&self) -> Option<(u16, u16)> {
            self.size
        }
    }

    /// The pane list of a client attached to the only pane there is.
    struct OnePane;

    impl Panes for OnePane {
        fn list(&self) -> Result<Vec<PaneEntry>> {
            Ok(Vec::new())
        }

        fn socket(&self, name: &str) -> Result<Endpoint> {
            Err(anyhow!("no pane {name}"))
        }
    }

    /// A pane host socket nobody listens on: leaving asks it whether the view was cropped,
    /// and finds no answer at once.
    fn nowhere() -> Endpoint {
        Endpoint::Socket("/nonexistent/belfry-session-test.sock".into())
    }

    fn target<'a>(socket: &'a Endpoint, read_only: bool) -> Target<'a> {
        Target {
            socket,
            session: "work",
            read_only,
            detach: DetachKey::parse("C-b d").expect("a valid detach key"),
            size: Some((24, 80)),
            interactive: true,
            panes: &OnePane,
            note: None,
            carried: Vec::new(),
            // Each test's own switch, off as the config leaves it.
            status_line: Box::leak(Box::new(std::cell::Cell::new(false))),
            paste_buffer: Box::leak(Box::default()),
            seen: Box::leak(Box::default()),
        }
    }

    /// A session past its handshake, with frames (the terminal not handed over), and the
    /// pane host's end of the connection.
    fn attached<'a>(
        target: &Target<'a>,
        outer: &'a SharedOuter,
        size: Option<(u16, u16)>,
    ) -> (
        Session<'a, Recording>,
        FrameReader<OwnedReadHalf>,
        OwnedWriteHalf,
    ) {
        let (client, host) = UnixStream::pair().expect("a socket pair");
        let (reader, writer) = client.into_split();
        let connected = Connected {
            reader: FrameReader::new(reader, &[], READ_BUFFER),
            writer,
            handed: false,
            keyboard_handed: false,
            terminal: None,
            keyboard: true,
            status_known: true,
            ssh: None,
        };
        let terminal = Recording {
            written: Vec::new(),
            size,
        };
        let session = Session::new(target, connected, terminal, outer, None);
        // The pane host's write half is kept open (returned) so the session's reads wait.
        let (read, write) = host.into_split();
        (session, FrameReader::new(read, &[], READ_BUFFER), write)
    }

    /// The next frame the pane host reads, within 5 s.
    async fn next_frame(host: &mut FrameReader<OwnedReadHalf>) -> Frame {
        tokio::time::timeout(Duration::from_secs(5), host.read())
            .await
            .expect("a frame within 5 s")
            .expect("a readable stream")
            .expect("a frame, not the end of the connection")
    }

    /// Whether the pane host reads no frame for 200 ms.
    async fn quiet(host: &mut FrameReader<OwnedReadHalf>) -> bool {
        tokio::time::timeout(Duration::from_millis(200), host.read())
            .await
            .is_err()
    }

    #[tokio::test]
    async fn the_detach_key_leaves_the_pane_and_tells_its_host_even_split_across_reads() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((24, 80)));
        // Typed keys before the prefix reach the pane; the prefix alone is held.
        let ended = session
            .on_keys(Some(b"ls\x02".to_vec()))
            .await
            .expect("keys taken");
        assert!(ended.is_none());
        assert_eq!(next_frame(&mut host).await, Frame::data(b"ls"));
        assert!(quiet(&mut host).await, "the prefix alone reached the pane");
        // The key after the prefix, in the next read, detaches.
        let ended = session
            .on_keys(Some(b"d".to_vec()))
            .await
            .expect("keys taken");
        assert!(matches!(ended, Some(Ended::Detached)));
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Detach { reason: None })
        );
    }

    #[tokio::test]
    async fn a_lone_escape_reaches_the_pane_only_once_its_escape_time_is_over() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((24, 80)));
        let before = tokio::time::Instant::now();
        let ended = session
            .on_keys(Some(b"\x1b".to_vec()))
            .await
            .expect("keys taken");
        assert!(ended.is_none());
        // The Escape may start a sequence: it waits for its rest, for the escape time.
        let until = session
            .partial_until
            .expect("the Escape waits for its rest");
        assert!(until <= before + Duration::from_millis(25) + Duration::from_millis(50));
        assert!(
            quiet(&mut host).await,
            "the lone Escape went before its time"
        );
        let ended = session
            .on_input(Input::EscapeTime)
            .await
            .expect("time taken");
        assert!(ended.is_none());
        assert!(session.partial_until.is_none());
        assert_eq!(next_frame(&mut host).await, Frame::data(b"\x1b"));
    }

    #[tokio::test]
    async fn a_read_only_client_sends_no_keys_and_says_why_over_the_pane() {
        let socket = nowhere();
        let target = target(&socket, true);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((24, 80)));
        let ended = session
            .on_keys(Some(b"rm -rf /\r".to_vec()))
            .await
            .expect("keys taken");
        assert!(ended.is_none());
        assert!(quiet(&mut host).await, "a watcher's keys reached the pane");
        let text = session.terminal.text();
        assert!(
            text.contains("\x1b[7mread-only: nothing typed here reaches work; C-b d detaches"),
            "no note over the pane: {text:?}"
        );
        assert!(session.message_until.is_some());
        assert_eq!(outer.lock().map(|outer| outer.cover_rows).ok(), Some(1));
        // The detach key still detaches a watcher.
        let ended = session
            .on_keys(Some(b"\x02d".to_vec()))
            .await
            .expect("keys taken");
        assert!(matches!(ended, Some(Ended::Detached)));
        assert_eq!(next_frame(&mut host).await, Frame::Control(Control::Redraw));
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Detach { reason: None })
        );
    }

    #[tokio::test]
    async fn a_resize_asks_the_pane_for_the_terminals_size_unless_no_pane_can_be_that_large() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((30, 100)));
        let ended = session.on_input(Input::Resize).await.expect("resize taken");
        assert!(ended.is_none());
        let size = Size::new(30, 100).expect("a valid size");
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Resize(size))
        );
        session.terminal.size = Some((30, 5000));
        session.on_input(Input::Resize).await.expect("resize taken");
        assert!(quiet(&mut host).await, "an impossible size was sent");
    }

    #[tokio::test]
    async fn the_status_line_key_gives_the_pane_a_row_less_and_draws_the_line_on_the_last_row() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((24, 80)));
        let ended = session
            .on_keys(Some(b"\x02S".to_vec()))
            .await
            .expect("keys taken");
        assert!(ended.is_none());
        // The pane host is told, then given the rows above the line.
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Status(true))
        );
        let rows_left = Size::new(23, 80).expect("a valid size");
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Resize(rows_left))
        );
        assert!(session.status.until.is_some(), "the line is not due");
        session
            .on_input(Input::StatusTime)
            .await
            .expect("status drawn");
        let text = session.terminal.text();
        assert!(
            text.contains("\x1b7\x1b[24;1H\x1b[0m\x1b[7m[work]"),
            "no status line on row 24: {text:?}"
        );
        // Drawn once: the same words are not drawn again at the next turn.
        let drawn = session.terminal.written.len();
        session
            .on_input(Input::StatusTime)
            .await
            .expect("status drawn");
        assert_eq!(session.terminal.written.len(), drawn);
        // A resize keeps the row for the line.
        session.terminal.size = Some((30, 100));
        session.on_input(Input::Resize).await.expect("resize taken");
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Resize(Size::new(29, 100).expect("a valid size")))
        );
        // Off again: the pane host is told and the pane gets every row back.
        session
            .on_keys(Some(b"\x02S".to_vec()))
            .await
            .expect("keys taken");
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Status(false))
        );
        assert_eq!(
            next_frame(&mut host).await,
            Frame::Control(Control::Resize(Size::new(30, 100).expect("a valid size")))
        );
        assert!(session.status.until.is_none());
    }

    /// A pane host that predates the status line (its attach reply has no `status`) would
    /// write the raw output over the line: the key says so and changes nothing.
    #[tokio::test]
    async fn a_pane_host_that_predates_the_status_line_gets_no_status_line() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((24, 80)));
        session.status = super::super::status::StatusLine::new(target.status_line, false);
        session
            .on_keys(Some(b"\x02S".to_vec()))
            .await
            .expect("keys taken");
        assert!(
            quiet(&mut host).await,
            "the pane host was told of a status line"
        );
        assert!(!target.status_line.get() && session.status.until.is_none());
        assert!(
            session.terminal.text().contains("predates the status line"),
            "{:?}",
            session.terminal.text()
        );
    }

    #[tokio::test]
    async fn the_paste_key_types_the_buffer_into_the_pane_and_says_when_it_is_empty() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, mut host, _keep) = attached(&target, &outer, Some((24, 80)));
        session
            .on_keys(Some(b"\x02]".to_vec()))
            .await
            .expect("keys taken");
        assert!(
            session
                .terminal
                .text()
                .contains("nothing to paste: C-b [ opens the history"),
            "{:?}",
            session.terminal.text()
        );
        assert!(quiet(&mut host).await, "an empty buffer typed something");
        // Lines end in Enter; a pane whose modes cannot be asked gets no markers.
        *target.paste_buffer.borrow_mut() = "ls\nexit".into();
        session
            .on_keys(Some(b"\x02]".to_vec()))
            .await
            .expect("keys taken");
        // The key that ends the message first asks the pane for a redraw.
        assert_eq!(next_frame(&mut host).await, Frame::Control(Control::Redraw));
        assert_eq!(next_frame(&mut host).await, Frame::data(b"ls\rexit"));
    }

    #[tokio::test]
    async fn the_pane_hosts_end_of_the_connection_ends_the_attach_as_closed() {
        let socket = nowhere();
        let target = target(&socket, false);
        let outer = SharedOuter::default();
        let (mut session, host, keep) = attached(&target, &outer, Some((24, 80)));
        drop((host, keep));
        let frame = session.reader.read().await.expect("a readable stream");
        let ended = session
            .on_input(Input::Frame(frame))
            .await
            .expect("frame taken");
        assert!(matches!(ended, Some(Ended::Closed)));
    }

    #[test]
    fn colour_answers_are_taken_out_of_the_keys() {
        let (keys, answers) = take_color_answers(
            b"a\x1b]10;rgb:ffff/ffff/ffff\x1b\\b\x1b]11;rgb:28/2c/34\x07c\x1b]12;x\x07",
        );
        assert_eq!(keys, b"abc\x1b]12;x\x07".to_vec());
        assert_eq!(
            answers,
            b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\\x1b]11;rgb:28/2c/34\x07".to_vec()
        );
        // An answer cut off by the end of the read is left as it is.
        assert_eq!(
            take_color_answers(b"\x1b]11;rgb:28"),
            (b"\x1b]11;rgb:28".to_vec(), Vec::new())
        );
    }
}
