//! `belfry top` (and `belfry ls --watch`, the same view): a live, full-screen view of every
//! pane, for a person watching a fleet of agents.
//!
//! The view subscribes to the daemon's event stream and asks again what an event changed (a
//! pane came or went: the listing; a hook or DING event: that pane's DING status), so it
//! follows the fleet as events arrive. A slow tick (`--interval-ms`, 1 s by default) asks for
//! everything again: it is what moves the ages and the revision rates, and it catches what the
//! stream does not carry (revisions, new mail, adapter lines). [`fleet`] folds those answers
//! into the view's state and [`render`] turns the state into a fixed-size frame; this module is
//! the loop, the threads that feed it, and the terminal.
//!
//! Four threads feed one channel: the event stream, the keyboard, signals (SIGTERM, SIGHUP,
//! SIGINT end the view; SIGWINCH redraws it at the new size), and the loop's own tick. Attach
//! leaves the view, runs `belfry attach` as a child on this terminal, and comes back when it
//! detaches; the keyboard thread is paused first (and says so) so the two never read the same
//! keystrokes. The terminal is restored on every way out: `q`, a signal, an error and a panic.

mod fleet;
mod render;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use belfry_cli::keys::{ViewKey, ViewKeys, ViewRead, ESCAPE_TIME};
use crossterm::style::{Attribute, Print, SetAttribute};
use crossterm::{cursor::MoveTo, queue};
use serde_json::Value;

use belfry_mux::client::Client;
use belfry_proto::reply::{DingState, Killed, Listing, Restarted, Screen, Subscribed};
use belfry_proto::request as op;
use belfry_proto::{ErrorCode, SessionName};
use belfry_transport::paths;

use crate::direct;
use crate::exit::EXIT_OK;
use crate::human;
use fleet::{Fleet, Refresh};
use render::{Confirm, Line, Overlay, Style, Ui};

/// What reaches the loop.
enum Msg {
    /// An event from the daemon's stream.
    Event(Value),
    /// The stream is (again) subscribed.
    Subscribed,
    /// The stream ended or could not be opened; it is tried again every second.
    StreamLost(String),
    /// A key, as read from the terminal.
    Key(ViewKey),
    /// Stdin was closed: no key will come, so the view ends.
    KeyboardGone,
    /// The terminal changed size.
    Resized,
    /// A signal that ends the view.
    Signal(&'static str),
}

/// The keys the view knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Up,
    Down,
    Attach,
    Peek,
    Ding,
    /// `/`: type a filter on the panes' names.
    Filter,
    /// `K`: end the selected pane, once confirmed.
    Kill,
    /// `R`: restart the selected pane's program, once confirmed.
    Restart,
    Quit,
    /// Escape, or any other key: closes what is shown over the list.
    Other,
}

/// What the loop tells the keyboard thread.
enum Control {
    /// Stop reading stdin, and say so on the channel given, before a child takes the terminal.
    Pause(Sender<()>),
    Resume,
}

/// How long the loop waits for the keyboard thread to stop reading before an attach.
const PAUSE_WITHIN: Duration = Duration::from_secs(2);

/// How long the keyboard thread waits for input before it looks at its control channel.
const KEY_POLL_MS: i32 = 100;

/// Runs the view until `q` or a signal; `interval` is the slow tick.
pub(crate) fn run(interval: Duration) -> Result<i32> {
    if !rustix::termios::isatty(std::io::stdin()) || !rustix::termios::isatty(std::io::stdout()) {
        bail!(
            "belfry top needs a terminal on stdin and stdout; for a program, `belfry ls --json` \
             lists the panes and `belfry events --json` streams what happens to them"
        );
    }
    paths::private_runtime_dir()?;
    let socket = paths::daemon_socket();
    // The view lives on the daemon's event stream, so it needs a daemon; when none runs it
    // starts one, and says so, rather than doing it behind the user's back.
    let mut ui = Ui {
        own: std::env::var("BELFRY_SESSION").ok(),
        ..Ui::default()
    };
    if direct::running_daemon(&socket)?.is_none() {
        ui.status = format!("no daemon was running: started one at {}", socket.display());
    }
    let client = crate::cmd::daemon()?;
    let (tx, rx) = mpsc::channel();
    spawn_stream(socket.clone(), tx.clone());
    let keyboard = spawn_keyboard(tx.clone());
    spawn_signals(tx);
    let mut view = View {
        socket,
        client: Some(client),
        fleet: Fleet::default(),
        ui,
        interval,
        keyboard,
    };
    let mut terminal = Terminal::enter()?;
    let outcome = view.session_loop(&rx, &mut terminal);
    terminal.leave();
    if let Some(signal) = outcome? {
        eprintln!("belfry top: ended by {signal}");
    }
    Ok(EXIT_OK)
}

/// The loop's state: its own connection for questions, the fleet and the view.
struct View {
    socket: PathBuf,
    /// `None` after an error, until the next question connects again.
    client: Option<Client>,
    fleet: Fleet,
    ui: Ui,
    interval: Duration,
    keyboard: Sender<Control>,
}

impl View {
    /// Draws and answers messages until `q` (`Ok(None)`) or a signal (`Ok(Some(name))`).
    fn session_loop(
        &mut self,
        rx: &Receiver<Msg>,
        terminal: &mut Terminal,
    ) -> Result<Option<&'static str>> {
        self.refresh_everything();
        terminal.draw(self.frame())?;
        let mut next_tick = Instant::now() + self.interval;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let mut messages = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(msg) => messages.push(msg),
                Err(RecvTimeoutError::Timeout) => {
                    self.refresh_everything();
                    next_tick = Instant::now() + self.interval;
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
            // Whatever else has arrived is taken in the same pass, so a burst of events asks
            // once and draws once.
            messages.extend(rx.try_iter());
            let mut refresh = Vec::new();
            for msg in messages {
                match msg {
                    Msg::Event(event) => {
                        refresh.push(self.fleet.note_event(&event, human::now_unix_ms()));
                    }
                    Msg::Subscribed => {
                        self.ui.status.clear();
                        refresh.push(Refresh::Everything);
                    }
                    Msg::StreamLost(why) => self.ui.status = format!("event stream: {why}"),
                    Msg::Resized => terminal.clear()?,
                    Msg::Signal(name) => return Ok(Some(name)),
                    Msg::KeyboardGone => return Ok(None),
                    Msg::Key(key) => {
                        if self.key(key, terminal)? {
                            return Ok(None);
                        }
                    }
                }
            }
            self.refresh(&refresh);
            terminal.draw(self.frame())?;
        }
    }

    fn frame(&mut self) -> Vec<Line> {
        let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
        let now = human::now_unix_ms();
        render::frame(
            &self.fleet,
            &mut self.ui,
            now,
            &human::clock(now, now),
            usize::from(cols.max(1)),
            usize::from(rows.max(1)),
        )
    }

    /// Does what `key` asks; true when it ends the view.
    fn key(&mut self, key: ViewKey, terminal: &mut Terminal) -> Result<bool> {
        if self.ui.overlay.is_some() {
            // Any key closes what is shown over the list.
            self.ui.overlay = None;
            return Ok(false);
        }
        if key == ViewKey::Byte(0x03) {
            return Ok(true);
        }
        // `y` carries out the action asked for; any other key keeps the pane as it is.
        if let Some((action, name)) = self.ui.confirm.take() {
            if key == ViewKey::Byte(b'y') {
                self.carry_out(action, &name);
            } else {
                self.ui.status = format!("{name} left as it is");
            }
            return Ok(false);
        }
        // A paste is text for the filter, and starts one, as in the attach client's chooser.
        if self.ui.typing || matches!(key, ViewKey::Pasted(_)) {
            self.ui.typing = true;
            self.ui.filter_key(key);
            return Ok(false);
        }
        // Escape drops a filter kept before it ends the view.
        if key == ViewKey::Byte(0x1b) && !self.ui.filter.is_empty() {
            self.ui.filter.clear();
            return Ok(false);
        }
        let selected = self.ui.selected.clone();
        match (key_of(key), selected) {
            (Key::Quit, _) => return Ok(true),
            (Key::Up, _) => self.ui.move_selection(&self.fleet, -1),
            (Key::Down, _) => self.ui.move_selection(&self.fleet, 1),
            (Key::Filter, _) => self.ui.typing = true,
            (Key::Kill, Some(name)) => self.ui.confirm = Some((Confirm::Kill, name)),
            (Key::Restart, Some(name)) => self.ui.confirm = Some((Confirm::Restart, name)),
            (Key::Attach, Some(name)) => self.attach(&name, terminal)?,
            (Key::Peek, Some(name)) => self.peek(&name),
            (Key::Ding, Some(name)) => self.ding_status(&name),
            _ => {}
        }
        Ok(false)
    }

    /// Leaves the view for `belfry attach NAME` on this terminal and comes back when it ends.
    fn attach(&mut self, name: &str, terminal: &mut Terminal) -> Result<()> {
        let (ack_tx, ack_rx) = mpsc::channel();
        if self.keyboard.send(Control::Pause(ack_tx)).is_err()
            || ack_rx.recv_timeout(PAUSE_WITHIN).is_err()
        {
            self.ui.status = "cannot attach: the keyboard reader did not pause".into();
            return Ok(());
        }
        terminal.leave();
        let status = std::process::Command::new(crate::cmd::exe()?)
            .args(["attach", name])
            .status();
        let _ = self.keyboard.send(Control::Resume);
        terminal.resume()?;
        self.ui.status = match status {
            Ok(status) if status.success() => format!("back from {name}"),
            Ok(status) => format!("attach {name} failed ({status}); its message is above the view"),
            Err(err) => format!("cannot run belfry attach {name}: {err}"),
        };
        self.refresh(&[Refresh::Listing(name.to_string())]);
        Ok(())
    }

    /// Ends the pane `name` or restarts its program, as confirmed, and says how it went.
    fn carry_out(&mut self, action: Confirm, name: &str) {
        let Ok(session) = SessionName::parse(name) else {
            return;
        };
        self.ui.status = match action {
            Confirm::Kill => match self.ask::<Killed>(op::Kill::of(session)) {
                Ok(_) => format!("killed {name}"),
                Err(err) => format!("kill {name}: {err}"),
            },
            Confirm::Restart => match self.ask::<Restarted>(op::Restart::of(session)) {
                Ok(restarted) => format!(
                    "restarted {name}: incarnation {}",
                    restarted.identity.incarnation
                ),
                Err(err) => format!("restart {name}: {err}"),
            },
        };
        self.refresh(&[Refresh::Listing(name.to_string())]);
    }

    fn peek(&mut self, name: &str) {
        let Ok(session) = SessionName::parse(name) else {
            return;
        };
        let snapshot = op::Snapshot {
            session: Some(session),
            ..op::Snapshot::default()
        };
        match self.ask::<Screen>(snapshot) {
            Ok(screen) => {
                self.ui.overlay = Some(Overlay {
                    title: format!("peek {name}  revision {}  {}", screen.revision, screen.size),
                    lines: screen.lines,
                });
            }
            Err(err) => self.ui.status = format!("peek {name}: {err}"),
        }
    }

    fn ding_status(&mut self, name: &str) {
        let Ok(session) = SessionName::parse(name) else {
            return;
        };
        match self.ask::<DingState>(op::DingStatus::of(session)) {
            Ok(state) => {
                let now = human::now_unix_ms();
                self.ui.overlay = Some(Overlay {
                    title: format!("ding status {name}"),
                    lines: crate::human::ding_status_lines(&state, now),
                });
            }
            Err(err) => self.ui.status = format!("ding status {name}: {err}"),
        }
    }

    /// Asks again what `refresh` names, each thing once.
    fn refresh(&mut self, refresh: &[Refresh]) {
        if refresh.contains(&Refresh::Everything) {
            self.refresh_everything();
            return;
        }
        let listing = refresh.iter().any(|r| matches!(r, Refresh::Listing(_)));
        if listing {
            self.refresh_listing();
        }
        let mut asked = Vec::new();
        for item in refresh {
            if let Refresh::Listing(name) | Refresh::Ding(name) = item {
                if !asked.contains(name) {
                    self.refresh_ding(name);
                    asked.push(name.clone());
                }
            }
        }
    }

    fn refresh_everything(&mut self) {
        self.refresh_listing();
        let names: Vec<String> = self.fleet.names().map(str::to_string).collect();
        for name in names {
            self.refresh_ding(&name);
        }
    }

    fn refresh_listing(&mut self) {
        match self.ask::<Listing>(op::List {}) {
            Ok(listing) => self
                .fleet
                .update_listing(listing.panes, human::now_unix_ms()),
            Err(err) => self.ui.status = format!("listing: {err}"),
        }
    }

    fn refresh_ding(&mut self, name: &str) {
        let Ok(session) = SessionName::parse(name) else {
            return;
        };
        match self.ask::<DingState>(op::DingStatus::of(session)) {
            Ok(state) => self.fleet.update_ding(name, Some(state.status)),
            // A pane with no DING worker (its host did not answer the daemon yet) has no mail
            // state to show; anything else is news.
            Err(err) => {
                self.fleet.update_ding(name, None);
                if !matches!(
                    err,
                    Asked::Refused(ErrorCode::Unavailable | ErrorCode::NotFound, _)
                ) {
                    self.ui.status = format!("ding status {name}: {err}");
                }
            }
        }
    }

    /// Asks the daemon `op` on the view's own connection, connecting again (never starting a
    /// daemon) after an error.
    fn ask<T: serde::de::DeserializeOwned>(
        &mut self,
        op: impl Into<belfry_proto::Op>,
    ) -> std::result::Result<T, Asked> {
        let mut client = match self.client.take() {
            Some(client) => client,
            None => Client::connect(&self.socket).map_err(|err| Asked::Failed(err.to_string()))?,
        };
        match client.call::<T>(op) {
            Ok(reply) => {
                self.client = Some(client);
                reply
                    .into_result()
                    .map_err(|err| Asked::Refused(err.code, err.message))
            }
            Err(err) => Err(Asked::Failed(err.to_string())),
        }
    }
}

/// Why a question got no answer.
#[derive(Debug)]
enum Asked {
    /// The daemon refused it.
    Refused(ErrorCode, String),
    /// The daemon could not be asked.
    Failed(String),
}

impl std::fmt::Display for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Asked::Refused(_, message) | Asked::Failed(message) => f.write_str(message),
        }
    }
}

/// The daemon's event stream, every pane's, on a connection of its own; when it ends (the
/// daemon restarted) it is opened again every second, without starting a daemon.
fn spawn_stream(socket: PathBuf, tx: Sender<Msg>) {
    std::thread::spawn(move || loop {
        let lost = match subscribe(&socket) {
            Ok(mut client) => {
                if tx.send(Msg::Subscribed).is_err() {
                    return;
                }
                loop {
                    match client.read_event() {
                        Ok(event) => {
                            if tx.send(Msg::Event(event)).is_err() {
                                return;
                            }
                        }
                        Err(err) => break err.to_string(),
                    }
                }
            }
            Err(err) => format!("{err:#}"),
        };
        if tx.send(Msg::StreamLost(lost)).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    });
}

fn subscribe(socket: &Path) -> Result<Client> {
    let mut client = Client::connect(socket)?;
    let subscribe = op::Subscribe {
        session: None,
        revisions: None,
        exit_so_far: None,
        ..op::Subscribe::default()
    };
    client
        .call::<Subscribed>(subscribe)?
        .into_result()
        .map_err(crate::cmd::refusal)?;
    Ok(client)
}

/// Reads keystrokes from stdin (raw bytes, so nothing is read ahead into a buffer a child
/// could not see), pausing on [`Control::Pause`]. An escape sequence cut off by the end of a
/// read waits up to [`ESCAPE_TIME`] for its rest, so an arrow key that arrives in two reads is
/// one key, not an Escape that ends the view.
fn spawn_keyboard(tx: Sender<Msg>) -> Sender<Control> {
    let (control_tx, control_rx) = mpsc::channel::<Control>();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 64];
        let mut reader = ViewKeys::default();
        let send = |read: ViewRead| read.keys().all(|key| tx.send(Msg::Key(key)).is_ok());
        loop {
            match control_rx.try_recv() {
                Ok(Control::Pause(ack)) => {
                    // The terminal goes to a child: a key half read is not this view's.
                    reader = ViewKeys::default();
                    let _ = ack.send(());
                    // Until resumed; the loop gone ends the thread.
                    loop {
                        match control_rx.recv() {
                            Ok(Control::Resume) => break,
                            Ok(Control::Pause(ack)) => {
                                let _ = ack.send(());
                            }
                            Err(_) => return,
                        }
                    }
                }
                Ok(Control::Resume) | Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
            let wait = if reader.has_partial() {
                i32::try_from(ESCAPE_TIME.as_millis()).unwrap_or(KEY_POLL_MS)
            } else {
                KEY_POLL_MS
            };
            if !stdin_readable(wait) {
                // No rest came: the start of a sequence is the keys it is (a lone Escape).
                if reader.has_partial() && !send(reader.flush()) {
                    return;
                }
                continue;
            }
            // SAFETY: read(2) into a live buffer of the length given, on fd 0.
            let read = unsafe { libc::read(0, buffer.as_mut_ptr().cast(), buffer.len()) };
            let Ok(read) = usize::try_from(read) else {
                continue;
            };
            if read == 0 {
                // Stdin closed: nothing more will come, so the view ends.
                let _ = tx.send(Msg::KeyboardGone);
                return;
            }
            if !send(reader.feed(&buffer[..read])) {
                return;
            }
        }
    });
    control_tx
}

/// Whether stdin has input within `timeout_ms`.
fn stdin_readable(timeout_ms: i32) -> bool {
    let mut fd = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one live pollfd.
    let ready = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
    ready > 0 && fd.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

/// The view's key for a key read from the terminal (in any encoding, [`ViewKeys`]).
fn key_of(key: ViewKey) -> Key {
    match key {
        ViewKey::Byte(b'q' | 0x03 | 0x1b) => Key::Quit,
        ViewKey::Byte(b'k') | ViewKey::Up => Key::Up,
        ViewKey::Byte(b'j') | ViewKey::Down => Key::Down,
        ViewKey::Byte(b'\r' | b'\n' | b'a') => Key::Attach,
        ViewKey::Byte(b'p') => Key::Peek,
        ViewKey::Byte(b'd') => Key::Ding,
        ViewKey::Byte(b'/') => Key::Filter,
        ViewKey::Byte(b'K') => Key::Kill,
        ViewKey::Byte(b'R') => Key::Restart,
        // A paste is text, and this view reads no text: never a key that quits or attaches.
        ViewKey::Pasted(_) => Key::Other,
        _ => Key::Other,
    }
}

/// SIGTERM, SIGHUP and SIGINT end the view (so the terminal is restored); SIGWINCH redraws it.
fn spawn_signals(tx: Sender<Msg>) {
    std::thread::spawn(move || {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let (Ok(mut term), Ok(mut hup), Ok(mut int), Ok(mut winch)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
                signal(SignalKind::interrupt()),
                signal(SignalKind::window_change()),
            ) else {
                return;
            };
            loop {
                let msg = tokio::select! {
                    _ = term.recv() => Msg::Signal("SIGTERM"),
                    _ = hup.recv() => Msg::Signal("SIGHUP"),
                    _ = int.recv() => Msg::Signal("SIGINT"),
                    _ = winch.recv() => Msg::Resized,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
    });
}

/// Turns the view on in the terminal: raw mode, the alternate screen, no cursor and no
/// autowrap (a line of wide characters that comes out longer than the terminal is cut at
/// the edge instead of pushing the frame down).
const ENTER: &[u8] = b"\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[2J";
/// Turns it off again: autowrap and the cursor back on, the main screen back.
const LEAVE: &[u8] = b"\x1b[0m\x1b[?7h\x1b[?25h\x1b[?1049l";

/// The terminal while the view is on it; dropping it (or a panic) restores it.
struct Terminal {
    on: bool,
}

impl Terminal {
    fn enter() -> Result<Terminal> {
        let mut terminal = Terminal { on: false };
        terminal.resume()?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        Ok(terminal)
    }

    /// Puts the view (back) on the terminal.
    fn resume(&mut self) -> Result<()> {
        crossterm::terminal::enable_raw_mode().context("cannot put the terminal in raw mode")?;
        self.on = true;
        let mut out = std::io::stdout().lock();
        out.write_all(ENTER)?;
        out.flush()?;
        Ok(())
    }

    fn leave(&mut self) {
        if std::mem::take(&mut self.on) {
            restore();
        }
    }

    fn clear(&mut self) -> Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(b"\x1b[2J")?;
        Ok(())
    }

    /// Writes `frame` over the previous one, line by line.
    fn draw(&mut self, frame: Vec<Line>) -> Result<()> {
        let mut out = std::io::stdout().lock();
        for (row, line) in frame.iter().enumerate() {
            let row = u16::try_from(row).unwrap_or(u16::MAX);
            queue!(out, MoveTo(0, row))?;
            match line.style {
                Style::Plain => {}
                Style::Heading => queue!(out, SetAttribute(Attribute::Bold))?,
                Style::Selected => queue!(out, SetAttribute(Attribute::Reverse))?,
            }
            queue!(out, Print(&line.text), SetAttribute(Attribute::Reset))?;
        }
        out.flush()?;
        Ok(())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.leave();
    }
}

/// The terminal as a shell expects it.
fn restore() {
    let mut out = std::io::stdout();
    let _ = out.write_all(LEAVE);
    let _ = out.flush();
    let _ = crossterm::terminal::disable_raw_mode();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of `reads`, each read as the keyboard thread reads it, then the flush.
    fn keys_of(reads: &[&[u8]]) -> Vec<Key> {
        let mut reader = ViewKeys::default();
        let mut keys: Vec<Key> = Vec::new();
        for read in reads {
            keys.extend(reader.feed(read).keys().map(key_of));
        }
        keys.extend(reader.flush().keys().map(key_of));
        keys
    }

    fn keys(bytes: &[u8]) -> Vec<Key> {
        keys_of(&[bytes])
    }

    #[test]
    fn an_arrow_key_cut_across_reads_is_one_key() {
        assert_eq!(keys_of(&[b"j\x1b[", b"A"]), [Key::Down, Key::Up]);
        assert_eq!(keys_of(&[b"\x1bO", b"B"]), [Key::Down]);
        // A lone Escape, with nothing after it: the view ends.
        assert_eq!(keys_of(&[b"j\x1b"]), [Key::Down, Key::Quit]);
    }

    #[test]
    fn raw_input_becomes_keys() {
        assert_eq!(
            keys(b"jk\x1b[A\x1b[B\x1bOA\rpdq"),
            [
                Key::Down,
                Key::Up,
                Key::Up,
                Key::Down,
                Key::Up,
                Key::Attach,
                Key::Peek,
                Key::Ding,
                Key::Quit
            ]
        );
        // An unknown sequence is one key, not a burst of letters that would act.
        assert_eq!(keys(b"\x1b[15~"), [Key::Other]);
        assert_eq!(keys(b"\x1b"), [Key::Quit]);
        assert_eq!(keys(b"\x03"), [Key::Quit]);
        assert_eq!(keys(b"/"), [Key::Filter]);
        // A paste is no key here: its `q` does not quit, its line break does not attach.
        assert_eq!(keys(b"\x1b[200~q\r\x1b[201~"), [Key::Other, Key::Other]);
    }
}
