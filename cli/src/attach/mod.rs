//! `belfry attach`: the interactive client (spec §5). Raw mode via crossterm, a full redraw
//! from the pane host, live output, keystrokes as input, and a detach key. The local terminal
//! is restored on every way out: detach, pane exit, error, SIGTERM, SIGHUP and panic.
//!
//! This module is `run`, the attach from start to end across the panes the user moves to,
//! and the chooser shown before any pane; [`session`] is one attach, the loop and its
//! `Session` state with a method per input; [`handshake`] connects and makes the handshake;
//! [`terminal`] is the outer terminal the session writes (a trait, so the session is tested
//! without one) and the keyboard it reads; [`record`] records what was written and undoes it
//! on every way out. [`keys`] finds the detach key and the other prefix bindings in every
//! keyboard encoding, [`views`] draws the pane chooser and the history view,
//! `belfry_pty::restore` records what the output turned on in the terminal and undoes exactly
//! that (here for what the client writes; the pane host's terminal writer for the output it
//! writes to a terminal the client handed over, `belfry_pty::terminal`), and
//! [`nesting`] refuses an attach that would show a pane inside itself. docs/attach.md describes
//! the whole for users.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use tokio::net::UnixStream;

use belfry_proto::reply::Screen;
use belfry_proto::request as op;
use belfry_proto::ExitStatus;
use belfry_pty::restore::{self};

pub mod config;
mod copy;
mod handshake;
mod nesting;
mod record;
mod session;
mod status;
mod terminal;
mod views;

pub use belfry_cli::keys::DetachKey;
use belfry_cli::keys::{self, ViewKey, ViewKeys};
pub use nesting::refuse_cycle;
pub use views::PaneEntry;
use views::{Chooser, History, Outcome};

use record::{restore_terminal, Record, SharedOuter};
use status::show_message;
use terminal::{read_keys, write_terminal, Keyboard, Stdout};

/// What the client needs to move between panes while attached (`prefix s`, `n`, `p`).
pub trait Panes {
    /// Every pane, in name order.
    fn list(&self) -> Result<Vec<PaneEntry>>;
    /// The pane host serving `name`; an error when there is none, or when attaching to it
    /// from here would show a pane inside itself.
    fn socket(&self, name: &str) -> Result<Endpoint>;
    /// What the status line says of pane `name` after its name: its program's state and its
    /// unread mail; by default the chooser's words for it.
    fn status_words(&self, name: &str) -> Result<String> {
        let entries = self.list()?;
        Ok(entries
            .into_iter()
            .find(|entry| entry.name == name)
            .map(|entry| entry.detail)
            .unwrap_or_default())
    }
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

/// The environment variable that sets how long the start of an escape sequence (a lone
/// Escape) waits for its rest, in milliseconds.
const ESCAPE_TIME_VAR: &str = "BELFRY_ESCAPE_TIME_MS";

/// The longest escape time [`ESCAPE_TIME_VAR`] may set (ten times tmux's default of 500 ms):
/// past that a lone Escape would seem lost.
const ESCAPE_TIME_MAX_MS: u64 = 5000;

/// The key bindings this process uses, set from the config file when `run` starts.
static KEY_BINDINGS: std::sync::OnceLock<belfry_cli::bindings::Bindings> =
    std::sync::OnceLock::new();

/// The keys after the prefix and what they do: the config file's, else tmux's.
fn key_bindings() -> belfry_cli::bindings::Bindings {
    KEY_BINDINGS.get().cloned().unwrap_or_default()
}

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
    let status_line = std::cell::Cell::new(set_escape_time()?);
    let paste_buffer = std::cell::RefCell::new(String::new());
    let seen = std::cell::RefCell::new(std::collections::HashMap::new());
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
            let code = no_pane_chosen(left);
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
        let target = session::Target {
            socket: &socket,
            session: &session,
            read_only,
            detach,
            size: terminal_size().or(size),
            interactive,
            panes,
            note: note.take(),
            carried: std::mem::take(&mut carried),
            status_line: &status_line,
            paste_buffer: &paste_buffer,
            seen: &seen,
        };
        let ended = runtime.block_on(session::attach(target, Stdout, &outer, &mut keyboard));
        match ended {
            Ok(Ended::Switch(name, next, keys)) => {
                undo_for_switch(&outer);
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
    let code = say_how_it_ended(session, &socket, ended);
    end_run(runtime, keyboard);
    Ok(code)
}

/// Sets this process's escape time (the variable wins over the config file's `escape-time`)
/// and says whether the status line starts on (the file's `status`, kept across pane
/// switches as `prefix S` leaves it).
fn set_escape_time() -> Result<bool> {
    // The variable is judged before the file is read: a bad value is named as the
    // variable's, whatever the file holds.
    let from_variable = std::env::var_os(ESCAPE_TIME_VAR)
        .filter(|v| !v.is_empty())
        .map(|value| escape_time_from(Some(&value)))
        .transpose()?;
    let config = config::AttachConfig::load()?;
    let escape = from_variable.unwrap_or(config.escape_time.unwrap_or(keys::ESCAPE_TIME));
    // Set once per process; a second run (none today) keeps the first value.
    let _ = ESCAPE_TIME.set(escape);
    let _ = KEY_BINDINGS.set(config::bindings(&config));
    Ok(config.status.unwrap_or(false))
}

/// Says why the chooser shown first attached nowhere; the exit code.
fn no_pane_chosen(left: Result<Chosen>) -> i32 {
    match left {
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
    }
}

/// Turns off what the pane left turned on in the terminal, before the next pane's redraw
/// turns on what that one uses, and starts a new record for it.
fn undo_for_switch(outer: &SharedOuter) {
    let undo = match outer.lock() {
        Ok(mut outer) => {
            let undo = outer.undo_modes();
            *outer = Record::default();
            undo
        }
        Err(_) => restore::RESET_ALL.to_vec(),
    };
    let _ = write_terminal(&undo, &SharedOuter::default());
}

/// Says on stderr how the attach ended, once the terminal is restored; the exit code.
fn say_how_it_ended(session: &str, socket: &Endpoint, ended: Result<Ended>) -> i32 {
    match ended {
        Ok(Ended::Detached) => {
            eprintln!("[detached from {session}]");
            0
        }
        Ok(Ended::Exited(status)) => {
            eprintln!("[{}]", exit_line(session, &status));
            0
        }
        Ok(Ended::Closed) => {
            match socket {
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
    }
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
            Some(message) => show_message(message, &screen, &mut Stdout),
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
                    Outcome::Stay | Outcome::Copy(_) => {}
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

    /// The view drawn at the terminal's size, `(rows, cols)`.
    fn render(&mut self, (rows, cols): (u16, u16)) -> Vec<u8> {
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
/// Whether the pane's program asked for bracketed paste, from a snapshot of its model.
fn bracketed_paste(socket: &Endpoint) -> Result<bool> {
    let mut client = match socket {
        Endpoint::Socket(socket) => {
            belfry_transport::client::Client::connect_within(socket, HISTORY_DEADLINE)?
        }
        Endpoint::Remote(remote, session) => remote.pane(session)?,
    };
    let screen: Screen = client
        .call::<Screen>(op::Snapshot::default())?
        .into_result()
        .map_err(|err| anyhow!("the pane host refused: {}", err.message))?;
    Ok(screen.modes.bracketed_paste)
}

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

#[cfg(test)]
mod tests {
    use super::escape_time_from;
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
}
