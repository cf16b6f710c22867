//! What the client wrote to the outer terminal, and the undo of it: the [`Record`] shared
//! with the panic hook (the modes the output turned on, the title saved, the rows a message
//! covers, a view's screen, the pane host's own undo bytes), and [`restore_terminal`], which
//! puts the terminal back on every way out. A file of its own because every way out reads
//! it, the session loop, the chooser and the panic hook alike.

use std::io::Write;
use std::sync::{Arc, Mutex};

use belfry_pty::restore::{self, Outer};

use super::{terminal_size, VIEW_SCREEN_OFF};

/// What was written to the outer terminal, shared with the panic hook: what the client wrote
/// itself, and, while the pane host writes the pane's output to the terminal (the terminal was
/// handed over), the bytes the pane host gave to undo what it wrote.
#[derive(Default)]
pub(super) struct Record {
    /// What the client itself wrote.
    pub(super) local: Outer,
    /// The pane host writes to the terminal.
    pub(super) handed: bool,
    /// The pane host's undo bytes, once it sent them (on detach, before the program's exit).
    pub(super) host_undo: Option<Vec<u8>>,
    /// The terminal's title was pushed on its title stack at attach ([`TITLE_PUSH`]): it is
    /// popped back on the way out, whatever titles the pane set meanwhile.
    pub(super) title_saved: bool,
    /// How many of the terminal's last rows hold a line of the client's own that nothing
    /// will paint over: a message not yet redrawn away, or the crop line of a client shown
    /// the part of a larger pane. They are erased on the way out.
    pub(super) cover_rows: u16,
    /// A view (history, chooser) is open on the terminal's alternate screen
    /// ([`VIEW_SCREEN_ON`]); the way out leaves that screen first.
    pub(super) view_screen: bool,
    /// Whether the client was shown the cropped view of a larger pane, when it asked on its
    /// way out (`None`: not asked yet).
    pub(super) cropped: Option<bool>,
}

/// Saves the outer terminal's window and icon titles on its title stack (xterm's window
/// operation 22), before the pane's redraw or output may set its own.
pub(super) const TITLE_PUSH: &[u8] = b"\x1b[22;0t";

/// Puts back the titles [`TITLE_PUSH`] saved (window operation 23).
pub(super) const TITLE_POP: &[u8] = b"\x1b[23;0t";

impl Record {
    pub(super) fn observe(&mut self, bytes: &[u8]) {
        self.local.observe(bytes);
    }

    /// The bytes that undo the modes the writes left on. A pane host that wrote to the
    /// terminal and ended without saying what to undo (it was killed) gets every mode reset.
    pub(super) fn undo_modes(&mut self) -> Vec<u8> {
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

pub(super) type SharedOuter = Arc<Mutex<Record>>;

/// Puts the terminal back the way a shell expects it: cooked mode, and every mode the pane's
/// output turned on in it reset (see [`restore`]).
pub(super) fn restore_terminal(raw: bool, outer: &SharedOuter) {
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
