//! `belfry attach`: the interactive client (spec §5). Raw mode via crossterm, a full redraw
//! from the pane host, live output, keystrokes as input, and a detach key. The local terminal
//! is restored on every way out: detach, pane exit, error, SIGTERM, SIGHUP and panic.
//!
//! This module is the session loop; [`keys`] finds the detach key and the other prefix bindings
//! in every keyboard encoding, [`views`] draws the pane chooser and the history view,
//! `belfry_pty::restore` records what the output turned on in the terminal and undoes exactly
//! that (here for what the client writes; the pane host's terminal writer for the output it
//! writes to a terminal the client handed over, `belfry_pty::terminal`), and
//! [`nesting`] refuses an attach that would show a pane inside itself. docs/attach.md describes
//! the whole for users.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use belfry_proto::reply::{Attached, Hello, Screen};
use belfry_proto::request as op;
use belfry_proto::{Control, ExitStatus, Reply, Request, Size};
use belfry_pty::restore::{self, Outer};
use belfry_transport::wire::{Frame, FrameReader, PROTOCOL_VERSION};

pub mod config;
mod nesting;
mod views;

pub use belfry_cli::keys::DetachKey;
use belfry_cli::keys::{self, Action, Binding, KeyFilter, ViewKey, ViewKeys, ViewRead};
pub use nesting::refuse_cycle;
pub use views::PaneEntry;
use views::{Chooser, History, Outcome};

/// What the client needs to move between panes while attached (`prefix s`, `n`, `p`).
pub trait Panes {
    /// Every pane, in name order.
    fn list(&self) -> Result<Vec<PaneEntry>>;
    /// The pane host serving `name`; an error when there is none, or when attaching to it
    /// from here would show a pane inside itself.
    fn socket(&self, name: &str) -> Result<Endpoint>;
}

/// Where the pane host of an attach is: a socket of this machine, or a pane of another one
/// reached through `ssh … belfry proxy --pane NAME` (spec §6.2), whose bytes (the NDJSON
/// handshake, then the frames) travel unchanged.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A pane host socket here.
    Socket(PathBuf),
    /// A pane on another machine.
    Remote(Box<crate::remote::Remote>, belfry_proto::SessionName),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Socket(path) => write!(f, "{}", path.display()),
            Endpoint::Remote(remote, session) => write!(f, "{}:{session} over ssh", remote.label),
        }
    }
}

/// An open attach connection: the stream, the pane host's pid when the kernel said it, and
/// the ssh process of a remote one (ended when this is dropped).
struct Link {
    stream: UnixStream,
    pid: Option<i32>,
    ssh: Option<belfry_mux::remote::SshChild>,
}

impl Endpoint {
    async fn connect(&self) -> Result<Link> {
        match self {
            Endpoint::Socket(socket) => {
                let stream = UnixStream::connect(socket)
                    .await
                    .with_context(|| format!("cannot connect to {}", socket.display()))?;
                // spec §6.1: keystrokes go only to a pane host of our own uid (or root).
                belfry_transport::paths::check_server(socket, &stream)?;
                let pid = stream.peer_cred().ok().and_then(|cred| cred.pid());
                Ok(Link {
                    stream,
                    pid,
                    ssh: None,
                })
            }
            Endpoint::Remote(remote, session) => {
                // The far side's `belfry proxy` checks the pane host's owner (spec §6.1).
                let far = belfry_mux::remote::Far::Pane(session.clone());
                let args = belfry_mux::remote::proxy_args(&far);
                let (stream, ssh) = belfry_mux::remote::open(&remote.host, &remote.ssh, &args)?;
                stream.set_nonblocking(true)?;
                Ok(Link {
                    stream: UnixStream::from_std(stream)?,
                    pid: None,
                    ssh: Some(ssh),
                })
            }
        }
    }

    /// How long the handshake may take: a remote one includes ssh's connect and login.
    fn handshake_deadline(&self) -> std::time::Duration {
        match self {
            Endpoint::Socket(_) => ATTACH_HANDSHAKE,
            Endpoint::Remote(remote, _) => ATTACH_HANDSHAKE + remote.ssh.connect_timeout,
        }
    }
}

/// What was written to the outer terminal, shared with the panic hook: what the client wrote
/// itself, and, while the pane host writes the pane's output to the terminal (the terminal was
/// handed over), the bytes the pane host gave to undo what it wrote.
#[derive(Default)]
struct Record {
    /// What the client itself wrote.
    local: Outer,
    /// The pane host writes to the terminal.
    handed: bool,
    /// The pane host's undo bytes, once it sent them (on detach, before the program's exit).
    host_undo: Option<Vec<u8>>,
    /// The terminal's title was pushed on its title stack at attach ([`TITLE_PUSH`]): it is
    /// popped back on the way out, whatever titles the pane set meanwhile.
    title_saved: bool,
    /// How many of the terminal's last rows hold a line of the client's own that nothing
    /// will paint over: a message not yet redrawn away, or the crop line of a client shown
    /// the part of a larger pane. They are erased on the way out.
    cover_rows: u16,
    /// A view (history, chooser) is open on the terminal's alternate screen
    /// ([`VIEW_SCREEN_ON`]); the way out leaves that screen first.
    view_screen: bool,
    /// Whether the client was shown the cropped view of a larger pane, when it asked on its
    /// way out (`None`: not asked yet).
    cropped: Option<bool>,
}

/// Saves the outer terminal's window and icon titles on its title stack (xterm's window
/// operation 22), before the pane's redraw or output may set its own.
const TITLE_PUSH: &[u8] = b"\x1b[22;0t";

/// Puts back the titles [`TITLE_PUSH`] saved (window operation 23).
const TITLE_POP: &[u8] = b"\x1b[23;0t";

impl Record {
    fn observe(&mut self, bytes: &[u8]) {
        self.local.observe(bytes);
    }

    /// The bytes that undo the modes the writes left on. A pane host that wrote to the
    /// terminal and ended without saying what to undo (it was killed) gets every mode reset.
    fn undo_modes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if std::mem::take(&mut self.view_screen) {
            out.extend_from_slice(VIEW_SCREEN_OFF);
        }
        out.extend_from_slice(&self.title_back());
        out.extend_from_slice(&restore::undo(&self.local.modes()));
        if self.handed {
            match self.host_undo.take() {
                Some(host) => out.extend_from_slice(&host),
                None => out.extend_from_slice(restore::RESET_ALL),
            }
        }
        out
    }

    /// [`TITLE_POP`] when the title was saved (once), else nothing.
    fn title_back(&mut self) -> Vec<u8> {
        if std::mem::take(&mut self.title_saved) {
            TITLE_POP.to_vec()
        } else {
            Vec::new()
        }
    }

    /// [`Record::undo_modes`] and a line break, for the shell that gets the terminal back;
    /// nothing when nothing was written.
    fn undo(&mut self) -> Vec<u8> {
        if !self.handed && self.local.undo().is_empty() {
            return self.title_back();
        }
        let mut out = self.undo_modes();
        out.extend_from_slice(&self.uncover());
        out.extend_from_slice(b"\r\n");
        out
    }

    /// Erases the last rows [`Record::cover_rows`] counts, the cursor and pen put back.
    fn uncover(&mut self) -> Vec<u8> {
        let cover = std::mem::take(&mut self.cover_rows);
        if cover == 0 {
            return Vec::new();
        }
        let (rows, _) = terminal_size().unwrap_or((24, 80));
        let mut out = b"\x1b7\x1b[0m".to_vec();
        for row in rows.saturating_sub(cover).saturating_add(1)..=rows {
            out.extend_from_slice(format!("\x1b[{row};1H\x1b[2K").as_bytes());
        }
        out.extend_from_slice(b"\x1b8");
        out
    }
}

type SharedOuter = Arc<Mutex<Record>>;

/// Puts the terminal back the way a shell expects it: cooked mode, and every mode the pane's
/// output turned on in it reset (see [`restore`]).
fn restore_terminal(raw: bool, outer: &SharedOuter) {
    if raw {
        let _ = crossterm::terminal::disable_raw_mode();
    }
    // A record poisoned or held by a panicking write is not trusted: everything is reset.
    let undo = match outer.try_lock() {
        Ok(mut outer) => outer.undo(),
        Err(_) => restore::RESET_ALL.to_vec(),
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(&undo);
    let _ = out.flush();
}

/// The environment variable that sets how long the start of an escape sequence (a lone
/// Escape) waits for its rest, in milliseconds.
const ESCAPE_TIME_VAR: &str = "BELFRY_ESCAPE_TIME_MS";

/// The longest escape time [`ESCAPE_TIME_VAR`] may set (ten times tmux's default of 500 ms):
/// past that a lone Escape would seem lost.
const ESCAPE_TIME_MAX_MS: u64 = 5000;

/// The escape time this process uses, set from [`ESCAPE_TIME_VAR`] when `run` starts.
static ESCAPE_TIME: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// How long the start of an escape sequence waits for its rest: [`ESCAPE_TIME_VAR`], else
/// `keys::ESCAPE_TIME` (25 ms).
fn escape_time() -> std::time::Duration {
    ESCAPE_TIME.get().copied().unwrap_or(keys::ESCAPE_TIME)
}

/// The escape time `value` (of [`ESCAPE_TIME_VAR`]) asks for: the default when unset or
/// empty, an error naming the variable and the value when it is not a whole number of
/// milliseconds from 0 to [`ESCAPE_TIME_MAX_MS`].
fn escape_time_from(value: Option<&std::ffi::OsStr>) -> Result<std::time::Duration> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(keys::ESCAPE_TIME);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(ms) if ms <= ESCAPE_TIME_MAX_MS => Ok(std::time::Duration::from_millis(ms)),
        _ => bail!(
            "{ESCAPE_TIME_VAR}={text:?} is not a whole number of milliseconds from 0 to \
             {ESCAPE_TIME_MAX_MS}"
        ),
    }
}

/// How an attach session ended.
pub enum Ended {
    Detached,
    Exited(ExitStatus),
    Closed,
    Signal(&'static str),
    /// The user chose another pane: attach to it, served there, with the keys typed after
    /// the choice in the same read (they are for that pane).
    Switch(String, Endpoint, Vec<u8>),
}

/// Attaches to the pane host at `target` (its endpoint and the pane's name) until detach,
/// exit or a signal, moving to the panes the user switches to on the way. With no target
/// (`belfry attach` with no name and several panes to attach to), the pane chooser comes
/// first, on its own; leaving it attaches nowhere.
pub fn run(
    target: Option<(&Endpoint, &str)>,
    read_only: bool,
    detach: DetachKey,
    panes: &dyn Panes,
    note: Option<String>,
) -> Result<i32> {
    // The variable wins over the config file's `escape-time`; the file is read only without it.
    let escape = match std::env::var_os(ESCAPE_TIME_VAR).filter(|v| !v.is_empty()) {
        Some(value) => escape_time_from(Some(&value))?,
        None => config::AttachConfig::load()?
            .escape_time
            .unwrap_or(keys::ESCAPE_TIME),
    };
    // Set once per process; a second run (none today) keeps the first value.
    let _ = ESCAPE_TIME.set(escape);
    let interactive = rustix::termios::isatty(std::io::stdin());
    // Without a terminal on stdin the client refuses after the hello (below), so it never
    // sends a size that would resize the pane.
    let size = if interactive { terminal_size() } else { None };
    let outer = SharedOuter::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if interactive {
        crossterm::terminal::enable_raw_mode().context("cannot put the terminal in raw mode")?;
        let previous = std::panic::take_hook();
        let outer = Arc::clone(&outer);
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal(true, &outer);
            previous(info);
        }));
    }
    // One reader of the terminal for the whole run, read on the runtime itself (no thread
    // and channel between a keystroke and the socket): a pane switch must not leave a reader
    // behind that would take the next keystroke for the pane left.
    let mut keyboard = if interactive {
        let _context = runtime.enter();
        Some(Keyboard::open().context("cannot read the terminal's input")?)
    } else {
        None
    };
    let chosen = match target {
        Some((socket, session)) => Ok(Chosen::Pane(
            session.to_string(),
            socket.clone(),
            Vec::new(),
        )),
        None if interactive => runtime.block_on(choose_first(panes, &mut keyboard)),
        None => Err(anyhow!("choosing a pane needs a terminal")),
    };
    let (mut socket, mut session, mut carried) = match chosen {
        Ok(Chosen::Pane(session, socket, keys)) => (socket, session, keys),
        left => {
            restore_terminal(interactive, &outer);
            let code = match left {
                Err(err) => {
                    eprintln!("belfry attach: {err:#}");
                    2
                }
                Ok(left) => {
                    match left {
                        Chosen::Left(Some(signal)) => eprintln!("[no pane chosen: {signal}]"),
                        _ => eprintln!("[no pane chosen]"),
                    }
                    0
                }
            };
            end_run(runtime, keyboard);
            return Ok(code);
        }
    };
    // tmux takes C-b for itself before belfry sees it: say once, over the pane, how to reach
    // belfry through it and how to move belfry's prefix.
    let mut note = note.or_else(|| {
        (interactive && !read_only && std::env::var_os("TMUX").is_some())
            .then(|| tmux_prefix_note(detach))
            .flatten()
    });
    let ended = loop {
        let ended = runtime.block_on(session_loop(
            &socket,
            &session,
            read_only,
            detach,
            terminal_size().or(size),
            interactive,
            &outer,
            panes,
            &mut keyboard,
            note.take(),
            std::mem::take(&mut carried),
        ));
        match ended {
            Ok(Ended::Switch(name, next, keys)) => {
                // What this pane turned on in the terminal is turned off before the next
                // pane's redraw turns on what that one uses.
                let undo = match outer.lock() {
                    Ok(mut outer) => {
                        let undo = outer.undo_modes();
                        *outer = Record::default();
                        undo
                    }
                    Err(_) => restore::RESET_ALL.to_vec(),
                };
                let _ = write_terminal(&undo, &SharedOuter::default());
                (socket, session, carried) = (next, name, keys);
            }
            ended => break ended,
        }
    };
    let session = session.as_str();
    // A client shown the cropped view of a larger pane has the crop line on its last row,
    // which nothing paints over once it leaves.
    if let (true, Endpoint::Socket(path)) = (interactive, &socket) {
        let asked = outer.lock().ok().and_then(|outer| outer.cropped);
        if asked.unwrap_or_else(|| shown_cropped(path)) {
            if let Ok(mut outer) = outer.lock() {
                outer.cover_rows = outer.cover_rows.max(1);
            }
        }
    }
    restore_terminal(interactive, &outer);
    let code = match ended {
        Ok(Ended::Detached) => {
            eprintln!("[detached from {session}]");
            0
        }
        Ok(Ended::Exited(status)) => {
            eprintln!("[{}]", exit_line(session, &status));
            0
        }
        Ok(Ended::Closed) => {
            match &socket {
                // The ssh connection ended (or the far pane host): the pane itself runs on.
                Endpoint::Remote(remote, _) => eprintln!(
                    "[{session}: the connection to {} closed; the pane keeps running there]",
                    remote.label
                ),
                Endpoint::Socket(_) => eprintln!("[{session}: pane host closed the connection]"),
            }
            0
        }
        Ok(Ended::Signal(name)) => {
            eprintln!("[detached from {session}: {name}]");
            0
        }
        Ok(Ended::Switch(..)) => 0,
        Err(err) => {
            eprintln!("belfry attach {session}: {err:#}");
            2
        }
    };
    end_run(runtime, keyboard);
    Ok(code)
}

/// Closes the keyboard's descriptor (and puts stdin's flags back) on the runtime, then ends
/// the runtime.
fn end_run(runtime: tokio::runtime::Runtime, keyboard: Option<Keyboard>) {
    {
        let _context = runtime.enter();
        drop(keyboard);
    }
    runtime.shutdown_background();
}

/// What the chooser shown before any pane is attached ended with.
enum Chosen {
    /// The pane chosen, where it is served, and the keys typed after Enter in the same read
    /// (they are for it).
    Pane(String, Endpoint, Vec<u8>),
    /// The user left it (`q`, Escape), or a signal ended it (its name).
    Left(Option<&'static str>),
}

/// The pane chooser on its own, on the terminal's alternate screen, before any pane is
/// attached: `belfry attach` with no name and several panes to attach to. The keys are read
/// as the chooser reads them while attached; a pane that cannot be attached to from here
/// (the terminal's own) says why and the chooser stays.
async fn choose_first(panes: &dyn Panes, keyboard: &mut Option<Keyboard>) -> Result<Chosen> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut winch = signal(SignalKind::window_change())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut chooser = Chooser::new(panes.list()?, "");
    let mut keys = ViewKeys::default();
    let mut partial_until: Option<tokio::time::Instant> = None;
    let mut message: Option<String> = None;
    let screen = SharedOuter::default();
    write_terminal(ALTERNATE_SCREEN_ON, &screen)?;
    let draw = |chooser: &Chooser, message: &Option<String>| -> std::io::Result<()> {
        let (rows, cols) = terminal_size().unwrap_or((24, 80));
        write_terminal(&chooser.render(rows, cols), &screen)?;
        match message {
            Some(message) => show_message(message, &screen),
            None => Ok(()),
        }
    };
    let chosen = async {
        loop {
            draw(&chooser, &message)?;
            let flush_partial = async {
                match partial_until {
                    Some(when) => tokio::time::sleep_until(when).await,
                    None => std::future::pending().await,
                }
            };
            let read = tokio::select! {
                typed = read_keys(keyboard) => match typed {
                    Some(typed) => keys.feed(&typed),
                    // The terminal gives no more input: nothing can be chosen.
                    None => return Ok(Chosen::Left(None)),
                },
                _ = flush_partial => keys.flush(),
                _ = winch.recv() => continue,
                _ = term.recv() => return Ok(Chosen::Left(Some("SIGTERM"))),
                _ = hup.recv() => return Ok(Chosen::Left(Some("SIGHUP"))),
            };
            partial_until = keys
                .has_partial()
                .then(|| tokio::time::Instant::now() + escape_time());
            message = None;
            for (index, key) in read.keys().enumerate() {
                // Ctrl-C leaves too: nothing is attached yet that it could be meant for.
                if key == ViewKey::Byte(0x03) {
                    return Ok(Chosen::Left(None));
                }
                match chooser.key(key) {
                    Outcome::Stay => {}
                    Outcome::Leave => return Ok(Chosen::Left(None)),
                    Outcome::Switch(name) => match panes.socket(&name) {
                        Ok(socket) => {
                            let rest = keys.leave(&read, index);
                            return Ok(Chosen::Pane(name, socket, rest));
                        }
                        Err(err) => {
                            message = Some(format!("cannot attach to {name}: {err:#}"));
                            break;
                        }
                    },
                }
            }
        }
    }
    .await;
    // The chooser's screen goes; the pane's redraw (or the shell) draws on the main one.
    write_terminal(ALTERNATE_SCREEN_OFF, &screen)?;
    chosen
}

/// A view over the pane goes on the terminal's alternate screen (saving the cursor), so its
/// frames never scroll into the terminal's own history and the way out finds the pane's
/// screen under it; every mouse mode and focus events go off while it is open (a click or a
/// change of focus would otherwise arrive as keys the view cannot read, starting with an
/// Escape that closes it). Leaving a view needs no `VIEW_SCREEN_OFF`: the pane's redraw that
/// follows starts on the primary screen (`REDRAW_START`) and turns on the modes the pane has.
const VIEW_SCREEN_ON: &[u8] = b"\x1b[?1049h\x1b[?1003l\x1b[?1002l\x1b[?1000l\x1b[?1006l\
    \x1b[?1015l\x1b[?1005l\x1b[?1004l";
const VIEW_SCREEN_OFF: &[u8] = b"\x1b[?1049l";

/// The terminal's alternate screen, on (with the cursor hidden) and off (the cursor shown).
const ALTERNATE_SCREEN_ON: &[u8] = b"\x1b[?1049h\x1b[?25l";
const ALTERNATE_SCREEN_OFF: &[u8] = b"\x1b[0m\x1b[?1049l\x1b[?25h";

/// This terminal's size as `(rows, cols)`; `None` when it cannot be read. A terminal that
/// reports 0 rows or columns (a serial line or a freshly made PTY nobody sized) is taken as
/// 24x80, the size the help promises, rather than sent on as an out-of-range size.
pub fn terminal_size() -> Option<(u16, u16)> {
    let (cols, rows) = crossterm::terminal::size().ok()?;
    if rows == 0 || cols == 0 {
        return Some((24, 80));
    }
    Some((rows, cols))
}

/// How the pane's program ended, in words: `NAME exited with code N`, `NAME killed by signal
/// SIGNAME`, or the pane host's status as it came when it is neither.
fn exit_line(session: &str, status: &ExitStatus) -> String {
    match status {
        ExitStatus {
            code: Some(code), ..
        } => format!("{session} exited with code {code}"),
        ExitStatus {
            signal: Some(signal),
            ..
        } => format!("{session} killed by signal {}", signal_name(*signal)),
        ExitStatus { .. } => format!("{session} exited"),
    }
}

/// The usual name of a signal number (`SIGKILL`), or the number for the rare ones.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => return signal.to_string(),
    };
    name.to_string()
}

/// How long attaching may wait for the pane host's hello and attach replies.
const ATTACH_HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

/// A view of the client's own open over the pane.
enum View {
    Chooser(Chooser),
    History(History),
}

impl View {
    fn key(&mut self, key: ViewKey) -> Outcome {
        match self {
            View::Chooser(chooser) => chooser.key(key),
            View::History(history) => history.key(key),
        }
    }

    fn render(&mut self) -> Vec<u8> {
        let (rows, cols) = terminal_size().unwrap_or((24, 80));
        match self {
            View::Chooser(chooser) => chooser.render(rows, cols),
            View::History(history) => {
                history.resize(rows);
                history.render(cols)
            }
        }
    }
}

/// The pane after (or before) `current` in name order, round the end; `None` when there is
/// no other.
fn neighbour(panes: &dyn Panes, current: &str, next: bool) -> Result<Option<String>> {
    let names: Vec<String> = panes.list()?.into_iter().map(|entry| entry.name).collect();
    if names.iter().all(|name| name == current) {
        return Ok(None);
    }
    let at = names.iter().position(|name| name == current);
    let index = match (at, next) {
        (Some(at), true) => (at + 1) % names.len(),
        (Some(at), false) => (at + names.len() - 1) % names.len(),
        // The pane is gone from the listing: its neighbours by name still make sense.
        (None, true) => names.iter().position(|n| n.as_str() > current).unwrap_or(0),
        (None, false) => names
            .iter()
            .rposition(|n| n.as_str() < current)
            .unwrap_or(names.len() - 1),
    };
    Ok(names.get(index).cloned())
}

/// How long asking the pane host for its history may take.
const HISTORY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

/// The most history lines the history view asks for (the pane keeps fewer by default).
const HISTORY_LINES: u64 = 100_000;

/// The pane's scrollback and then its screen, as text, asked of its pane host.
fn history_lines(socket: &Endpoint) -> Result<Vec<String>> {
    let mut client = match socket {
        Endpoint::Socket(socket) => {
            belfry_transport::client::Client::connect_within(socket, HISTORY_DEADLINE)?
        }
        Endpoint::Remote(remote, session) => remote.pane(session)?,
    };
    let screen: Screen = client
        .call::<Screen>(op::Snapshot {
            scrollback: Some(HISTORY_LINES),
            ..op::Snapshot::default()
        })?
        .into_result()
        .map_err(|err| anyhow!("the pane host refused: {}", err.message))?;
    let mut lines = screen.scrollback.unwrap_or_default();
    lines.extend(screen.lines);
    Ok(lines)
}

#[allow(clippy::too_many_arguments)]
async fn session_loop(
    socket: &Endpoint,
    session: &str,
    read_only: bool,
    detach: DetachKey,
    size: Option<(u16, u16)>,
    interactive: bool,
    outer: &SharedOuter,
    panes: &dyn Panes,
    keyboard: &mut Option<Keyboard>,
    mut note: Option<String>,
    carried: Vec<u8>,
) -> Result<Ended> {
    // A watcher is told, over the pane, that its keys go nowhere (the line above it scrolls
    // away under the redraw).
    if read_only && note.is_none() {
        note = Some(read_only_note(session, detach));
    }
    let Link {
        stream,
        pid: pane_host_pid,
        mut ssh,
    } = socket.connect().await?;
    let (reader, mut writer) = stream.into_split();
    // For the handshake's lines; the frames after them are read by a `FrameReader`.
    let mut reader = BufReader::new(reader);
    let hello = op::Hello {
        versions: Some(vec![PROTOCOL_VERSION]),
        version: None,
    };
    // A local pane host is handed this terminal and writes the pane's output to it itself
    // (`belfry_pty::terminal`); a remote one sends it in frames.
    let terminal = match socket {
        Endpoint::Socket(_) if interactive => output_terminal(),
        _ => None,
    };
    // The pane host may read the keyboard too, and give the client only the reads its own
    // keys may be in; a watching client sends no keys.
    let offer_keyboard =
        terminal.is_some() && !read_only && keyboard.is_some() && keyboard_handover();
    let attach = op::Attach {
        session: None,
        read_only: Some(read_only),
        rows: size.map(|(rows, _)| rows.into()),
        cols: size.map(|(_, cols)| cols.into()),
        terminal: terminal.is_some().then_some(true),
        keyboard: offer_keyboard.then_some(detach.prefix),
    };
    // The handshake has a deadline: a stopped or hung pane host is an error naming it, not a
    // terminal that silently hangs. Once attached, a quiet pane may stay quiet for hours.
    let handshake = async {
        let _: Hello = exchange(&mut reader, &mut writer, &Request::new(0, hello)).await?;
        if !interactive {
            // Attaching puts stdin in raw mode and reads keystrokes from it; from a pipe or
            // /dev/null it would only wait for the pane to end. Refused before the attach
            // request, so the pane gains no client and keeps its size.
            bail!(
                "stdin is not a terminal: attach reads keystrokes from a terminal; run it in \
                 one, or use `belfry peek` and `belfry send` from a script"
            );
        }
        let attached: Attached =
            exchange(&mut reader, &mut writer, &Request::new(1, attach)).await?;
        anyhow::Ok((attached.terminal, attached.keyboard))
    };
    let handshake_deadline = socket.handshake_deadline();
    let mut handed = false;
    // Whether the pane host takes the keyboard as well.
    let mut keyboard_handed = false;
    match tokio::time::timeout(handshake_deadline, handshake).await {
        // A remote handshake that failed because ssh did says what ssh said.
        Ok(Err(err)) => match ssh.as_mut() {
            Some(ssh) if err.is::<NoReply>() => return Err(ssh.failure(None).into()),
            _ => return Err(err),
        },
        Ok(Ok((taken, keys))) => {
            handed = taken && terminal.is_some();
            keyboard_handed = handed && keys && offer_keyboard;
        }
        Err(_) if ssh.is_some() => {
            if let Some(ssh) = ssh.as_mut() {
                return Err(ssh.failure(Some(handshake_deadline)).into());
            }
        }
        Err(_) => {
            bail!(
            "the pane host{} serving {} did not answer the attach handshake within {} s; it may \
             be stopped or hung",
            pane_host_pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
            socket,
            handshake_deadline.as_secs()
        )
        }
    }

    // From here on the stream is frames, read by a reader that is cancel-safe: the loop below
    // waits for frames, keys, signals and timers at once, and a frame read half-way when one
    // of those comes first is kept, not lost. What the handshake's reader read past its last
    // line is the start of the frames.
    let mut reader = {
        let buffered = reader.buffer().to_vec();
        FrameReader::new(reader.into_inner(), &buffered, READ_BUFFER)
    };

    // spec §5: a one-line note of where the user is and how to leave, written before the
    // redraw arrives so it never lands in the pane's screen or its model.
    let watching = if read_only { ", read-only" } else { "" };
    write_terminal(
        format!("[attached to {session}{watching}: {detach} detaches]\r\n").as_bytes(),
        outer,
    )?;
    // The terminal's own title is saved before the pane may set one, and put back on the
    // way out (`Record::undo`): attaching and detaching leave it as it was.
    write_terminal(TITLE_PUSH, outer)?;
    if let Ok(mut outer) = outer.lock() {
        outer.title_saved = true;
    }
    // The terminal's own colours, for the pane host to answer the program's colour queries
    // with while no client is attached (a program started detached otherwise sees a fixed
    // black and white). A terminal that does not answer is not waited for.
    write_terminal(COLOR_QUERIES, outer)?;
    let colors_until = tokio::time::Instant::now() + COLOR_ANSWER_TIME;
    if let (true, Some(terminal)) = (handed, terminal) {
        // From here on the pane host writes to the terminal; this process writes to it only
        // while the pane host has paused (a message, a view).
        if let Ok(mut outer) = outer.lock() {
            outer.handed = true;
        }
        use std::os::fd::AsFd;
        let mut fds = vec![terminal.as_fd()];
        if let (true, Some(keyboard)) = (keyboard_handed, keyboard.as_ref()) {
            fds.push(keyboard.fd.get_ref().as_fd());
        }
        belfry_pty::terminal::send(writer.as_ref(), &fds)
            .context("cannot hand the terminal to the pane host")?;
        drop(terminal);
    }

    use tokio::signal::unix::{signal, SignalKind};
    let mut winch = signal(SignalKind::window_change())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut filter = KeyFilter::new(detach);
    let mut stdin_open = keyboard.is_some();
    // While a message covers the last line: when the pane host is asked to redraw it away.
    let mut message_until: Option<tokio::time::Instant> = None;
    // While the start of an escape sequence waits for its rest: when it is taken as it is.
    let mut partial_until: Option<tokio::time::Instant> = None;
    // The chooser or the history view, while one is open over the pane, and the keys it
    // reads (an escape sequence cut off by a read waits for its rest, as in the filter).
    let mut view: Option<View> = None;
    let mut view_keys = ViewKeys::default();
    // Keys read but not yet taken: those typed after a binding, a view's last key or a
    // switch to this pane, in the same read. They are taken before the keyboard is read again.
    let mut carried = carried;
    // Whether the pane host has stopped writing to the terminal for this client to draw.
    let mut paused = false;
    // Whether the pane host reads the keyboard now (it gives it back with the keys of a
    // read this client must filter); the client reads it only while not.
    let mut host_reads = false;
    // While the terminal's colour answers may still come (they are taken out of the keys):
    // the keyboard stays here until both came or the time for them is over.
    let mut colors_asked = keyboard_handed;
    let mut colors_seen = [false, false];
    if handed {
        if let Some(note) = note.take() {
            if let Some(ended) =
                message_over_pane(&mut reader, &mut writer, outer, true, &note).await?
            {
                return Ok(ended);
            }
            message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
        }
    }
    // The pane host may close the connection right after a last frame (a detach, the
    // program's end) while this client writes to it: the write fails, and what the host said
    // last is still to be read.
    let ended = async {
        loop {
            // The keyboard goes to the pane host whenever no key is this client's: no view, no
            // message to clear at the next key, no keystroke or binding half-typed, and the
            // terminal's colour answers in.
            if keyboard_handed
                && !host_reads
                && stdin_open
                && !colors_asked
                && view.is_none()
                && message_until.is_none()
                && !filter.holds_keys()
                && carried.is_empty()
            {
                writer
                    .write_all(&Frame::Control(Control::Keyboard).encode())
                    .await?;
                host_reads = true;
            }
            let mut keyed: Option<(Vec<u8>, Action)> = None;
            // Keys for the open view: from a read, or a cut-off sequence taken as it is.
            let mut viewed: Option<ViewRead> = None;
            // Keystrokes read here or given back by the pane host, and `None` when the keyboard
            // gives no more.
            let mut typed: Option<Option<Vec<u8>>> = None;
            if !carried.is_empty() {
                typed = Some(Some(std::mem::take(&mut carried)));
            } else {
                let colors_in = async {
                    if colors_asked {
                        tokio::time::sleep_until(colors_until).await
                    } else {
                        std::future::pending().await
                    }
                };
                let clear_message = async {
                    match message_until {
                        Some(when) => tokio::time::sleep_until(when).await,
                        None => std::future::pending().await,
                    }
                };
                let flush_partial = async {
                    match partial_until {
                        Some(when) => tokio::time::sleep_until(when).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    frame = reader.read() => match frame? {
                        // While a view is open the pane's output is not drawn; closing the view asks
                        // for a redraw of all of it.
                        Some(Frame::Data(bytes, _)) => if view.is_none() {
                            write_output(&bytes, &mut reader, outer)?;
                            // A note for the user goes over the last line once the redraw is drawn.
                            if let Some(note) = note.take() {
                                show_message(&note, outer)?;
                                message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
                            }
                        },
                        Some(Frame::Control(control)) => match control {
                            Control::Exited(status) => return Ok::<_, anyhow::Error>(Ended::Exited(status)),
                            Control::Detach { .. } => return Ok(Ended::Detached),
                            Control::Restore(undo) => keep_undo(outer, undo),
                            // The keyboard is this client's again: with keys to filter, or none when
                            // the pane host could not read it (this client then finds out why, and
                            // keeps it).
                            Control::Keys(keys) => {
                                host_reads = false;
                                if keys.is_empty() {
                                    // Not offered again: this client reads it from now on.
                                    keyboard_handed = false;
                                } else {
                                    typed = Some(Some(keys));
                                }
                            }
                            // An answer to a pause that came after its wait ended.
                            Control::Paused => {}
                            // Only a client sends these.
                            Control::Redraw
                            | Control::Colors(_)
                            | Control::Resize(_)
                            | Control::Pause(_)
                            | Control::Keyboard => {}
                        },
                        None => return Ok(Ended::Closed),
                    },
                    keys = read_keys(keyboard), if stdin_open && !host_reads => typed = Some(keys),
                    _ = colors_in => colors_asked = false,
                    _ = winch.recv() => {
                        // A terminal larger than a pane can be says nothing: the pane keeps its size.
                        if let Some(size) = terminal_size().and_then(|(rows, cols)| Size::new(rows.into(), cols.into()).ok()) {
                            writer.write_all(&Frame::Control(Control::Resize(size)).encode()).await?;
                        }
                        if let Some(open) = view.as_mut() {
                            write_terminal(&open.render(), outer)?;
                        }
                    }
                    _ = flush_partial => {
                        partial_until = None;
                        if view.is_some() {
                            viewed = Some(view_keys.flush());
                        } else {
                            let mut out = Vec::new();
                            let action = filter.flush(&mut out);
                            keyed = Some((out, action));
                        }
                    }
                    _ = clear_message => {
                        message_until = None;
                        match view.as_mut() {
                            Some(open) => {
                                write_terminal(&open.render(), outer)?;
                                if let Ok(mut outer) = outer.lock() {
                                    outer.cover_rows = 0;
                                }
                            }
                            None => ask_redraw(&mut writer, outer).await?,
                        }
                    }
                    _ = term.recv() => {
                        leave(&mut reader, &mut writer, outer, handed, socket).await;
                        return Ok(Ended::Signal("SIGTERM"));
                    }
                    _ = hup.recv() => {
                        leave(&mut reader, &mut writer, outer, handed, socket).await;
                        return Ok(Ended::Signal("SIGHUP"));
                    }
                }
            }
            if let Some(keys) = typed {
                match keys {
                    Some(keys) if view.is_some() => {
                        viewed = Some(view_keys.feed(&keys));
                        partial_until = view_keys
                            .has_partial()
                            .then(|| tokio::time::Instant::now() + escape_time());
                    }
                    Some(keys) => {
                        let keys = if tokio::time::Instant::now() < colors_until {
                            let (keys, answers) = take_color_answers(&keys);
                            // Both answers in: the window closes (and the keyboard may go).
                            for (at, query) in [&b"\x1b]10;"[..], b"\x1b]11;"].iter().enumerate() {
                                colors_seen[at] |= answers.windows(query.len()).any(|w| w == *query);
                            }
                            if colors_seen == [true, true] {
                                colors_asked = false;
                            }
                            if !answers.is_empty() {
                                let colors = Control::Colors(String::from_utf8_lossy(&answers).into());
                                writer.write_all(&Frame::Control(colors).encode()).await?;
                            }
                            if keys.is_empty() {
                                continue;
                            }
                            keys
                        } else {
                            keys
                        };
                        if message_until.take().is_some() {
                            ask_redraw(&mut writer, outer).await?;
                        }
                        let mut out = Vec::with_capacity(keys.len());
                        let action = filter.feed(&keys, &mut out);
                        partial_until = filter
                            .has_partial()
                            .then(|| tokio::time::Instant::now() + escape_time());
                        keyed = Some((out, action));
                    }
                    // The terminal stopped giving input: keep showing output until the pane ends.
                    None => stdin_open = false,
                }
            }
            if let Some(read) = viewed {
                if read.is_empty() {
                    continue;
                }
                message_until = None;
                let Some(open) = view.as_mut() else { continue };
                // The keys after the one that closes the view are not the view's: they go to
                // the pane (or the pane switched to), as if typed a moment later.
                let mut outcome = Outcome::Stay;
                let mut rest = Vec::new();
                for (index, key) in read.keys().enumerate() {
                    outcome = open.key(key);
                    if outcome != Outcome::Stay {
                        rest = view_keys.leave(&read, index);
                        break;
                    }
                }
                match outcome {
                    Outcome::Stay => write_terminal(&open.render(), outer)?,
                    Outcome::Leave => {
                        view = None;
                        view_keys = ViewKeys::default();
                        partial_until = None;
                        // The redraw also ends the pane host's pause, and leaves the view's
                        // alternate screen.
                        paused = false;
                        ask_redraw(&mut writer, outer).await?;
                        carried = rest;
                    }
                    Outcome::Switch(name) => match panes.socket(&name) {
                        Ok(next) => {
                            leave(&mut reader, &mut writer, outer, handed, socket).await;
                            return Ok(Ended::Switch(name, next, rest));
                        }
                        Err(err) => {
                            write_terminal(&open.render(), outer)?;
                            show_message(&format!("cannot attach to {name}: {err:#}"), outer)?;
                            // The view stays open: the keys after Enter are its own.
                            partial_until = None;
                            carried = rest;
                        }
                    },
                }
                continue;
            }
            let Some((out, action)) = keyed else {
                continue;
            };
            if !out.is_empty() && !read_only {
                belfry_transport::wire::write_frames(&mut writer, &[Frame::data(&out)]).await?;
            }
            // Typing into a watcher says again why nothing happens. A read that starts with an
            // Escape may be the terminal answering a query, which nobody typed: no note.
            if read_only && out.first().is_some_and(|&b| b != 0x1b) && message_until.is_none() {
                let pause_first = handed && !paused;
                let note = read_only_note(session, detach);
                if let Some(ended) =
                    message_over_pane(&mut reader, &mut writer, outer, pause_first, &note).await?
                {
                    return Ok(ended);
                }
                message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
            }
            match action {
                Action::None => {}
                Action::Detach => {
                    leave(&mut reader, &mut writer, outer, handed, socket).await;
                    return Ok(Ended::Detached);
                }
                Action::Show(message) => {
                    let pause_first = handed && !paused;
                    if let Some(ended) =
                        message_over_pane(&mut reader, &mut writer, outer, pause_first, &message)
                            .await?
                    {
                        return Ok(ended);
                    }
                    message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
                }
                Action::Bound(binding) => {
                    // What was typed after the binding in the same read: the view's keys, the
                    // next pane's, or (when the binding fails) the pane's.
                    let rest = filter.after_binding();
                    let opened = match binding {
                        Binding::NextPane | Binding::PreviousPane => {
                            let next = binding == Binding::NextPane;
                            match neighbour(panes, session, next) {
                                Ok(Some(name)) => match panes.socket(&name) {
                                    Ok(next) => {
                                        leave(&mut reader, &mut writer, outer, handed, socket).await;
                                        return Ok(Ended::Switch(name, next, rest));
                                    }
                                    Err(err) => Err(anyhow!("cannot attach to {name}: {err:#}")),
                                },
                                Ok(None) => Err(anyhow!("{session} is the only pane")),
                                Err(err) => Err(err),
                            }
                        }
                        Binding::ChoosePane => panes
                            .list()
                            .map(|entries| View::Chooser(Chooser::new(entries, session))),
                        Binding::History => history_lines(socket).map(|lines| {
                            let (rows, _) = terminal_size().unwrap_or((24, 80));
                            View::History(History::new(lines, rows))
                        }),
                    };
                    match opened {
                        Ok(mut open) => {
                            // The pane host stops writing to the terminal while the view is open.
                            if handed && !paused {
                                if let Some(ended) = pause(&mut reader, &mut writer, outer).await? {
                                    return Ok(ended);
                                }
                                paused = true;
                            }
                            // Not recorded as the pane's: the record keeps `view_screen`.
                            write_terminal(VIEW_SCREEN_ON, &SharedOuter::default())?;
                            if let Ok(mut outer) = outer.lock() {
                                outer.view_screen = true;
                                // The view covers every row; leaving it redraws them all.
                                outer.cover_rows = 0;
                            }
                            write_terminal(&open.render(), outer)?;
                            view = Some(open);
                            carried = rest;
                        }
                        Err(err) => {
                            let pause_first = handed && !paused;
                            let message = format!("{err:#}");
                            if let Some(ended) = message_over_pane(
                                &mut reader,
                                &mut writer,
                                outer,
                                pause_first,
                                &message,
                            )
                            .await?
                            {
                                return Ok(ended);
                            }
                            message_until = Some(tokio::time::Instant::now() + MESSAGE_TIME);
                            carried = rest;
                        }
                    }
                }
            }
        }
    }
    .await;
    match ended {
        Err(err) if host_hung_up(&err) => match last_word(&mut reader, outer).await {
            Some(ended) => Ok(ended),
            None => Err(err),
        },
        ended => ended,
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

/// How long a client whose write found the pane host gone reads what the host sent last.
const LAST_WORD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a pane host that closed the connection said last: its detach or the program's end,
/// or the end of the connection; `None` when nothing ends the attach in time.
async fn last_word(
    reader: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    outer: &SharedOuter,
) -> Option<Ended> {
    let until = tokio::time::Instant::now() + LAST_WORD_WAIT;
    loop {
        let frame = tokio::time::timeout_at(until, reader.read()).await.ok()?;
        match frame.map(|frame| end_in(frame, outer)) {
            Ok(Ok(Some(ended))) => return Some(ended),
            // Output for a terminal that may be gone too: shown if it could be.
            Ok(Ok(None) | Err(_)) => {}
            Err(_) => return Some(Ended::Closed),
        }
    }
}

/// How long the client waits for the pane host to confirm a pause (its terminal writer
/// finishing the write in progress) before it draws all the same.
const PAUSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a leaving client whose terminal the pane host writes waits for the bytes that
/// undo what the pane host wrote; without them every mode is reset.
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Keeps the pane host's undo bytes for the terminal's restore.
fn keep_undo(outer: &SharedOuter, undo: String) {
    if let Ok(mut outer) = outer.lock() {
        outer.host_undo = Some(undo.into_bytes());
    }
}

/// Asks the pane host to stop writing to the terminal and waits until it has, so what the
/// client draws next is not cut into by the pane's output. `Some` when the attach ended
/// meanwhile (the program exited, the pane host closed).
async fn pause(
    reader: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    outer: &SharedOuter,
) -> Result<Option<Ended>> {
    writer
        .write_all(&Frame::Control(Control::Pause(true)).encode())
        .await?;
    let until = tokio::time::Instant::now() + PAUSE_WAIT;
    loop {
        let Ok(frame) = tokio::time::timeout_at(until, reader.read()).await else {
            return Ok(None);
        };
        match frame? {
            Some(Frame::Control(Control::Paused)) => return Ok(None),
            frame => {
                if let Some(ended) = end_in(frame, outer)? {
                    return Ok(Some(ended));
                }
            }
        }
    }
}

/// A frame read while the client waits for one in particular: the end of the attach it
/// says (the program's end, a detach, the end of the connection), or `None` once its
/// output and undo bytes are taken care of.
fn end_in(frame: Option<Frame>, outer: &SharedOuter) -> std::io::Result<Option<Ended>> {
    match frame {
        Some(Frame::Control(Control::Restore(undo))) => keep_undo(outer, undo),
        Some(Frame::Control(Control::Exited(status))) => return Ok(Some(Ended::Exited(status))),
        Some(Frame::Control(Control::Detach { .. })) => return Ok(Some(Ended::Detached)),
        Some(Frame::Control(_)) => {}
        Some(Frame::Data(bytes, _)) => write_terminal(&bytes, outer)?,
        None => return Ok(Some(Ended::Closed)),
    }
    Ok(None)
}

/// Draws `message` over the terminal's last line (see [`show_message`]). With `pause_first`
/// (the pane host writes the terminal and has not paused for a view), the pane host is paused
/// for the drawing and then goes on writing the output without a redraw, so the message stays
/// until the next redraw. `Some` when the attach ended during the pause.
async fn message_over_pane(
    reader: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    outer: &SharedOuter,
    pause_first: bool,
    message: &str,
) -> Result<Option<Ended>> {
    if !pause_first {
        show_message(message, outer)?;
        return Ok(None);
    }
    if let Some(ended) = pause(reader, writer, outer).await? {
        return Ok(Some(ended));
    }
    show_message(message, outer)?;
    writer
        .write_all(&Frame::Control(Control::Pause(false)).encode())
        .await?;
    Ok(None)
}

/// Tells the pane host this client is leaving; when the pane host writes the terminal, waits
/// (at most [`LEAVE_WAIT`]) for the bytes that undo what it wrote.
async fn leave(
    reader: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    outer: &SharedOuter,
    handed: bool,
    socket: &Endpoint,
) {
    // Whether this client is shown the cropped view is asked while it is still attached:
    // once it has left, the pane may take another client's larger size.
    if let Endpoint::Socket(path) = socket {
        let cropped = shown_cropped(path);
        if let Ok(mut outer) = outer.lock() {
            outer.cropped = Some(cropped);
        }
    }
    let detach = Frame::Control(Control::Detach { reason: None }).encode();
    if writer.write_all(&detach).await.is_err() || !handed {
        return;
    }
    let until = tokio::time::Instant::now() + LEAVE_WAIT;
    while let Ok(Ok(Some(frame))) = tokio::time::timeout_at(until, reader.read()).await {
        if let Frame::Control(Control::Restore(undo)) = frame {
            keep_undo(outer, undo);
            return;
        }
    }
}

/// The terminal the pane host is handed on attach: the terminal on stdout opened again as a
/// new open file description (`/proc/self/fd/1`), non-blocking, so the pane host's writes
/// never change the flags of the descriptor the shell shares. `None` (the output then comes
/// in frames) when stdout is not a terminal, cannot be opened again, or
/// `BELFRY_ATTACH_HANDOVER=0` asks for frames.
fn output_terminal() -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    if std::env::var_os("BELFRY_ATTACH_HANDOVER").is_some_and(|v| v == "0") {
        return None;
    }
    if !rustix::termios::isatty(rustix::stdio::stdout()) {
        return None;
    }
    let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    rustix::fs::open("/proc/self/fd/1", flags, Mode::empty()).ok()
}

/// The client's questions to its terminal on attach: the foreground and background colours.
const COLOR_QUERIES: &[u8] = b"\x1b]10;?\x1b\\\x1b]11;?\x1b\\";

/// How long after attaching the terminal's answers to [`COLOR_QUERIES`] are looked for in
/// its input: a terminal answers within milliseconds, a remote one within a round trip.
const COLOR_ANSWER_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Splits the terminal's OSC 10 and 11 answers (`ESC ] 10 ; … BEL/ST`) out of `input`: the
/// rest is keystrokes.
fn take_color_answers(input: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut rest, mut answers) = (Vec::with_capacity(input.len()), Vec::new());
    let mut i = 0;
    while i < input.len() {
        let tail = &input[i..];
        if tail.starts_with(b"\x1b]10;") || tail.starts_with(b"\x1b]11;") {
            let end = tail
                .iter()
                .enumerate()
                .skip(2)
                .find_map(|(at, &b)| match b {
                    0x07 => Some(at + 1),
                    0x1b if tail.get(at + 1) == Some(&b'\\') => Some(at + 2),
                    _ => None,
                });
            if let Some(end) = end {
                answers.extend_from_slice(&tail[..end]);
                i += end;
                continue;
            }
        }
        rest.push(input[i]);
        i += 1;
    }
    (rest, answers)
}

/// How long a message stays on the last line unless a key is typed first.
const MESSAGE_TIME: std::time::Duration = std::time::Duration::from_secs(3);

/// Writes `message` over the outer terminal's last lines, in reverse video, on as many
/// lines as its width needs (at most the terminal's rows), and puts the cursor and pen back
/// (DECSC/DECRC). The lines it covers are the pane's: the pane host's redraw (asked for on
/// the next key or after [`MESSAGE_TIME`]) paints them back, and the saved cursor with it;
/// until then they are erased on the way out ([`Record::cover_rows`]).
fn show_message(message: &str, outer: &SharedOuter) -> std::io::Result<()> {
    let (rows, cols) = terminal_size().unwrap_or((24, 80));
    let chars: Vec<char> = message.chars().collect();
    let lines: Vec<String> = chars
        .chunks(usize::from(cols.max(1)))
        .take(usize::from(rows))
        .map(|line| line.iter().collect())
        .collect();
    let count = u16::try_from(lines.len()).unwrap_or(rows).max(1);
    let mut out = String::from("\x1b7");
    for (at, text) in (rows - count + 1..).zip(&lines) {
        out.push_str(&format!("\x1b[{at};1H\x1b[0m\x1b[2K\x1b[7m{text}\x1b[0m"));
    }
    out.push_str("\x1b8");
    write_terminal(out.as_bytes(), outer)?;
    if let Ok(mut outer) = outer.lock() {
        outer.cover_rows = outer.cover_rows.max(count);
    }
    Ok(())
}

/// What a client inside tmux (`$TMUX` set) says once when belfry's prefix is tmux's default,
/// C-b; none for another prefix.
fn tmux_prefix_note(detach: DetachKey) -> Option<String> {
    (detach.prefix == 0x02).then(|| {
        let then = detach.then.map_or(String::new(), |key| {
            format!(
                " {}",
                DetachKey {
                    prefix: key,
                    then: None
                }
            )
        });
        format!(
            "inside tmux, C-b is tmux's prefix too: C-b C-b{then} detaches from belfry; or move \
             belfry's: --detach-key 'C-a{then}' or BELFRY_DETACH='C-a{then}'"
        )
    })
}

/// What a read-only client says over the pane on attach and when typed into.
fn read_only_note(session: &str, detach: DetachKey) -> String {
    format!("read-only: nothing typed here reaches {session}; {detach} detaches")
}

/// Asks the pane host for a redraw, which paints over whatever the client drew (a message).
async fn ask_redraw(
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    outer: &SharedOuter,
) -> std::io::Result<()> {
    writer
        .write_all(&Frame::Control(Control::Redraw).encode())
        .await?;
    if let Ok(mut outer) = outer.lock() {
        outer.cover_rows = 0;
        outer.view_screen = false;
    }
    Ok(())
}

/// Whether the pane served at `socket` is larger than this terminal in either direction, so
/// the client was shown its cropped view, whose last line says so; `false` when the pane
/// host does not answer within a moment.
fn shown_cropped(socket: &std::path::Path) -> bool {
    let Some((rows, cols)) = terminal_size() else {
        return false;
    };
    let ask = || -> Result<Screen> {
        let mut client = belfry_transport::client::Client::connect_within(socket, CROP_ASK)?;
        client
            .call::<Screen>(op::Snapshot::default())?
            .into_result()
            .map_err(|err| anyhow!("the pane host refused: {}", err.message))
    };
    ask().is_ok_and(|screen| screen.size.rows() > rows || screen.size.cols() > cols)
}

/// How long a leaving client asks its pane host for the pane's size.
const CROP_ASK: std::time::Duration = std::time::Duration::from_millis(500);

/// The pane host (or the ssh connection to it) gave no reply to a handshake request: the
/// connection failed, as opposed to a reply that refused.
#[derive(Debug)]
struct NoReply {
    op: &'static str,
    reason: String,
}

impl std::fmt::Display for NoReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no reply from the pane host to {:?}: {}",
            self.op, self.reason
        )
    }
}

impl std::error::Error for NoReply {}

/// One request of the attach handshake and its reply, read as `T`.
async fn exchange<T: DeserializeOwned>(
    reader: &mut (impl AsyncBufRead + Unpin),
    writer: &mut (impl AsyncWrite + Unpin),
    request: &Request,
) -> Result<T> {
    let no_reply = |reason: String| NoReply {
        op: request.op.name(),
        reason,
    };
    writer
        .write_all(&request.to_line())
        .await
        .map_err(|err| no_reply(err.to_string()))?;
    let mut line = String::new();
    match reader.read_line(&mut line).await {
        Ok(0) => return Err(no_reply("the connection closed".to_owned()).into()),
        Ok(_) => {}
        Err(err) => return Err(no_reply(err.to_string()).into()),
    }
    let reply: Value =
        serde_json::from_str(&line).map_err(|err| anyhow!("pane host reply is not JSON: {err}"))?;
    match Reply::<T>::read(&reply) {
        Ok(Reply::Ok(body)) => Ok(body),
        // The message is shown as JSON text, quoted, as it always has been.
        Ok(Reply::Err(err)) => bail!("pane host refused: {}", Value::from(err.message)),
        Err(err) => bail!(
            "pane host reply to {:?} is not what the protocol says: {err}",
            request.op.name()
        ),
    }
}

/// Whether the pane host may read the keyboard as well as write the terminal (the default);
/// `BELFRY_ATTACH_INPUT=0` keeps every keystroke in this client.
fn keyboard_handover() -> bool {
    std::env::var_os("BELFRY_ATTACH_INPUT").is_none_or(|v| v != "0")
}

/// Capacity of the attach stream's frame reader: several batches of a pane host's output, so
/// the frames a pane host writes in one batch arrive in one read and go to the terminal in one
/// write (see `write_output`).
const READ_BUFFER: usize = 256 * 1024;

/// The terminal's input, read on the runtime. The terminal is opened again
/// (`/proc/self/fd/0`) as a new open file description, so it can be non-blocking without
/// changing the descriptor the shell shares; where that is impossible, stdin itself is made
/// non-blocking and its flags are put back when the keyboard is dropped.
struct Keyboard {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    /// stdin's flags before they were changed (only when stdin itself is read).
    restore: Option<rustix::fs::OFlags>,
    buf: Box<[u8; 4096]>,
}

impl Keyboard {
    /// Must run inside the runtime (the descriptor is registered with its reactor).
    fn open() -> std::io::Result<Keyboard> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let (fd, restore) = match rustix::fs::open("/proc/self/fd/0", flags, Mode::empty()) {
            Ok(fd) => (fd, None),
            Err(_) => {
                let stdin = rustix::stdio::stdin();
                let before = rustix::fs::fcntl_getfl(stdin)?;
                let fd = rustix::io::fcntl_dupfd_cloexec(stdin, 3)?;
                rustix::fs::fcntl_setfl(&fd, before | OFlags::NONBLOCK)?;
                (fd, Some(before))
            }
        };
        let fd = belfry_pty::terminal::register_reader(fd)?;
        Ok(Keyboard {
            fd,
            restore,
            buf: Box::new([0; 4096]),
        })
    }

    /// The next keystrokes; `None` once the terminal gives no more input. Cancel-safe: the
    /// read happens only after readiness, inside one poll.
    async fn read(&mut self) -> Option<Vec<u8>> {
        let n = belfry_pty::terminal::read_ready(&self.fd, &mut self.buf[..]).await?;
        Some(self.buf[..n].to_vec())
    }
}

impl Drop for Keyboard {
    fn drop(&mut self) {
        if let Some(flags) = self.restore {
            let _ = rustix::fs::fcntl_setfl(rustix::stdio::stdin(), flags);
        }
    }
}

/// The next keystrokes of the keyboard, or never when there is none.
async fn read_keys(keyboard: &mut Option<Keyboard>) -> Option<Vec<u8>> {
    match keyboard.as_mut() {
        Some(keyboard) => keyboard.read().await,
        None => std::future::pending().await,
    }
}

/// Writes a data frame's bytes and every whole data frame already in the read buffer after
/// it to the terminal in one vectored write, straight from the buffer: a pane printing fast
/// costs the client one system call per batch, not one per chunk.
fn write_output(
    first: &[u8],
    reader: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    outer: &SharedOuter,
) -> std::io::Result<()> {
    let buffered = reader.buffered();
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
    write_terminal_parts(&parts, outer)?;
    reader.consume(used);
    Ok(())
}

/// Writes `parts` to the terminal in order, in as few `writev(2)` calls as it takes.
fn write_terminal_parts(parts: &[&[u8]], outer: &SharedOuter) -> std::io::Result<()> {
    if let Ok(mut outer) = outer.lock() {
        for part in parts {
            outer.observe(part);
        }
    }
    let mut slices = belfry_pty::terminal::io_slices(parts.iter().copied());
    let mut rest = &mut slices[..];
    belfry_pty::terminal::writev_some(rustix::stdio::stdout(), &mut rest)?;
    if !rest.is_empty() {
        // stdout is blocking; only a descriptor some other program made non-blocking stops here.
        return Err(std::io::ErrorKind::WouldBlock.into());
    }
    Ok(())
}

/// Writes pane output straight to the terminal: one `write(2)` per chunk where the terminal
/// takes it, with no line buffering (std's stdout would split every chunk at its last newline)
/// and no blocking-pool hop.
fn write_terminal(mut bytes: &[u8], outer: &SharedOuter) -> std::io::Result<()> {
    if let Ok(mut outer) = outer.lock() {
        outer.observe(bytes);
    }
    let stdout = rustix::stdio::stdout();
    while !bytes.is_empty() {
        match rustix::io::write(stdout, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{escape_time_from, take_color_answers};
    use std::ffi::OsStr;
    use std::time::Duration;

    #[test]
    fn the_escape_time_is_read_from_its_variable_and_bad_values_are_named() {
        assert_eq!(escape_time_from(None).ok(), Some(Duration::from_millis(25)));
        assert_eq!(
            escape_time_from(Some(OsStr::new(""))).ok(),
            Some(Duration::from_millis(25))
        );
        assert_eq!(
            escape_time_from(Some(OsStr::new("10"))).ok(),
            Some(Duration::from_millis(10))
        );
        assert_eq!(
            escape_time_from(Some(OsStr::new("0"))).ok(),
            Some(Duration::ZERO)
        );
        for bad in ["-1", "ten", "2.5", "5001", "99999999999999999999"] {
            let err = escape_time_from(Some(OsStr::new(bad)))
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains(&format!("BELFRY_ESCAPE_TIME_MS={bad:?}")),
                "{err}"
            );
        }
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
