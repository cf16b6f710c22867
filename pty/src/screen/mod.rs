//! The pane's screen model: an alacritty_terminal grid fed with every output chunk, plus what
//! belfry needs from it: plain and SGR lines, cells, modes, a full redraw for attaching clients,
//! and the answers to the program's terminal queries (spec §4, §5).
//!
//! The history above the screen is not left in the core's grid, which spends 24 bytes on every
//! cell: once the pane is quiet (or sooner, when the rows waiting in the core would outgrow the
//! byte cap) the rows that scrolled into the core's history move into a compact [`History`]
//! (see [`crate::history`]), all but the newest, which the core keeps. Everything
//! that reads history (`history_len`, `scrollback`) reads the compact rows first and the core's
//! after them, so what a reader sees is the same as if the core had kept every row. A
//! resize gives every compact row back to the core first, so the core's reflow and its pulling
//! of history rows into a taller screen work on them exactly as before, and takes them back
//! after.
//!
//! The map: this file holds the [`Screen`], its construction, the entry points that apply
//! output (guarded against a panic of the core) and what readers read (lines, modes, cursor,
//! history). Its other parts are files of their own, each adding to `impl Screen`:
//! - `runs`: runs of plain and styled lines stored without the core's grid, and the tail of a
//!   run held back for the next bytes.
//! - `compact`: rows moved between the core's history and the compact [`History`].
//! - `render`: the attach redraw (whole or cropped) and the cells a snapshot reports.
//! - `colors`: the colours attached terminals report, and the answers given with them.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use alacritty_terminal::event::{Event, EventListener, WindowSize};
use alacritty_terminal::grid::{Dimensions, Row};
use alacritty_terminal::index::Line;
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::{Config, TermMode};
use alacritty_terminal::vte::ansi::{self, Rgb};
use alacritty_terminal::Term;
use parking_lot::Mutex;

use crate::ground::Follower;
use crate::history::{History, DEFAULT_MAX_BYTES};
use crate::queries::{Query, Scanner, StatusString};
use crate::tracker::{Tracked, Tracker};

mod colors;
mod compact;
mod render;
mod runs;

use colors::default_color;
use render::render_row;
use runs::RunLine;

pub use colors::color_answers;
pub use render::REDRAW_START;
pub use runs::PenOnlyRun;

/// Events the model raises while parsing: answers owed to the program and title changes.
#[derive(Default)]
struct Raised {
    answers: Vec<Vec<u8>>,
    title: Option<Option<String>>,
}

/// Collects what the terminal core raises while a chunk is parsed.
#[derive(Clone, Default)]
pub struct Listener {
    raised: Arc<Mutex<Raised>>,
    size: Arc<Mutex<(usize, usize)>>,
    /// Colours an attached terminal reported (OSC 4/10/11/12 answers), by the core's colour
    /// index; a query asked while no client is attached is answered with these when known.
    colors: Arc<Mutex<std::collections::HashMap<usize, Rgb>>>,
}

impl EventListener for Listener {
    fn send_event(&self, event: Event) {
        let mut raised = self.raised.lock();
        match event {
            Event::PtyWrite(text) => raised.answers.push(text.into_bytes()),
            Event::ColorRequest(index, format) => {
                let color = self
                    .colors
                    .lock()
                    .get(&index)
                    .copied()
                    .unwrap_or_else(|| default_color(index));
                raised.answers.push(format(color).into_bytes())
            }
            Event::TextAreaSizeRequest(format) => {
                let (lines, cols) = *self.size.lock();
                let size = WindowSize {
                    num_lines: lines as u16,
                    num_cols: cols as u16,
                    cell_width: 8,
                    cell_height: 16,
                };
                raised.answers.push(format(size).into_bytes());
            }
            Event::Title(title) => raised.title = Some(Some(title)),
            Event::ResetTitle => raised.title = Some(None),
            _ => {}
        }
    }
}

struct TermSize {
    lines: usize,
    cols: usize,
}

impl Dimensions for TermSize {
    fn total_lines(&self) -> usize {
        self.lines
    }
    fn screen_lines(&self) -> usize {
        self.lines
    }
    fn columns(&self) -> usize {
        self.cols
    }
}

/// Terminal modes a snapshot reports: the protocol's type.
pub use belfry_proto::reply::Modes;

/// Where the rows that scroll off the top of the screen are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HistoryStore {
    /// Moved into the compact [`History`] after every chunk (what a pane does).
    Compact,
    /// Left in the core's grid, as before the compact store existed: the reference the
    /// property tests compare the compact store against.
    #[cfg(any(test, feature = "fuzzing"))]
    Core,
}

/// The screen model of one pane.
pub struct Screen {
    term: Term<Listener>,
    parser: ansi::Processor,
    listener: Listener,
    title: String,
    tracked: Tracked,
    queries: Scanner,
    /// The OSC 7501 strings found since the pane last took them ([`Screen::take_status`]).
    status_strings: Vec<StatusString>,
    /// Where the parser stands, so runs of plain lines can skip the core.
    follower: Follower,
    /// The lines of a run of plain or styled lines being looked at, kept for its room.
    plain: Vec<RunLine>,
    /// A run's tail held back by [`Screen::apply_deferring`] until the next bytes or
    /// [`Screen::end_turn`] (with the start of a line cut off after it), and the rows above
    /// the cursor that stand in for rows already stored (the screen is blank meanwhile); and
    /// room to join the tail to the next bytes.
    deferred: Vec<u8>,
    placeholders: usize,
    joined: Vec<u8>,
    /// While an `apply` call runs: where the bytes being advanced start in the call's bytes
    /// (negative for a held tail joined in front of them) and the call's length.
    reading: Option<(isize, usize)>,
    /// Of the bytes the last `apply` call was given, the ranges [`Screen::pen_only`] reports.
    pen_only: Vec<Range<isize>>,
    /// Tests only: rows stored without the core, and of them rows of styled lines.
    #[cfg(test)]
    rows_skipped: usize,
    #[cfg(test)]
    styled_rows_skipped: usize,
    /// Tests only: tails held back and later scrolled off by the next bytes' lines.
    #[cfg(test)]
    held_tails_skipped: usize,
    history: History,
    /// The line cap: history lines kept, compact and core together.
    scrollback: usize,
    store: HistoryStore,
    /// The program cleared the primary screen's history since the compact rows were last
    /// brought up to date (set by the tracker).
    history_cleared: bool,
    /// The core's grid may hold rows it allocated for history beyond the screen (it keeps up
    /// to 1000 of them after its history is cleared); [`Screen::release_spare_rows`] frees
    /// them.
    spare_rows: bool,
    /// Tests only: a byte that makes the next chunk holding it panic inside the model, the
    /// way a bug of the terminal core on some input would.
    #[cfg(test)]
    pub(crate) panic_on: Option<u8>,
    /// Tests only: the next resize panics inside the model.
    #[cfg(test)]
    panic_resizing: bool,
}

/// The model is never narrower than two columns, whatever the PTY's size: the terminal core
/// cannot place a wide character in a one-column grid (it panics, which would end the pane host
/// and its program), and a program in a one-column PTY wraps its own output anyway.
const MIN_MODEL_COLS: u16 = 2;

/// The most bytes of a run's tail [`Screen::apply_deferring`] holds back.
const MAX_DEFERRED: usize = 64 * 1024;

impl Screen {
    /// A blank screen of `rows` × `cols` keeping `scrollback` lines of history, in at most
    /// the default byte cap ([`DEFAULT_MAX_BYTES`]).
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Screen {
        Screen::with_history_cap(rows, cols, scrollback, DEFAULT_MAX_BYTES)
    }

    /// A blank screen of `rows` × `cols` keeping at most `scrollback` lines of history and at
    /// most `max_bytes` bytes of them (the oldest lines go first when either cap is reached).
    pub fn with_history_cap(rows: u16, cols: u16, scrollback: usize, max_bytes: usize) -> Screen {
        Screen::build(rows, cols, scrollback, max_bytes, HistoryStore::Compact)
    }

    /// A screen whose history stays in the core's grid: the reference model of the tests.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn with_core_history(rows: u16, cols: u16, scrollback: usize) -> Screen {
        Screen::build(rows, cols, scrollback, usize::MAX, HistoryStore::Core)
    }

    fn build(
        rows: u16,
        cols: u16,
        scrollback: usize,
        max_bytes: usize,
        store: HistoryStore,
    ) -> Screen {
        let listener = Listener::default();
        let (rows, cols) = (
            usize::from(rows.max(1)),
            usize::from(cols.max(MIN_MODEL_COLS)),
        );
        *listener.size.lock() = (rows, cols);
        // kitty_keyboard: the core keeps the program's kitty keyboard flags and answers
        // `CSI ? u` with them (`CSI ? flags u`, 0 when none were pushed). The core keeps the
        // whole line cap of history too: rows scrolled off during one chunk wait there until
        // the chunk is applied, so a chunk that scrolls more rows than that loses exactly the
        // rows a core keeping all history would lose.
        let config = Config {
            scrolling_history: scrollback,
            kitty_keyboard: true,
            ..Config::default()
        };
        let term = Term::new(config, &TermSize { lines: rows, cols }, listener.clone());
        Screen {
            term,
            parser: ansi::Processor::new(),
            listener,
            title: String::new(),
            tracked: Tracked::default(),
            queries: Scanner::default(),
            status_strings: Vec::new(),
            follower: Follower::default(),
            plain: Vec::new(),
            deferred: Vec::new(),
            placeholders: 0,
            joined: Vec::new(),
            reading: None,
            pen_only: Vec::new(),
            #[cfg(test)]
            rows_skipped: 0,
            #[cfg(test)]
            styled_rows_skipped: 0,
            #[cfg(test)]
            held_tails_skipped: 0,
            // The core keeps the newest history row itself (see `absorb_history`), so the
            // compact store holds one line fewer than the cap.
            history: History::new(scrollback.saturating_sub(1), max_bytes),
            scrollback,
            store,
            history_cleared: false,
            spare_rows: false,
            #[cfg(test)]
            panic_on: None,
            #[cfg(test)]
            panic_resizing: false,
        }
    }

    /// Feeds program output into the model. Returns the answers owed to terminal queries found
    /// in it (the caller decides whether the pane host or an attached terminal answers).
    ///
    /// It never panics. The terminal core is third-party code fed whatever the program
    /// prints; a panic inside it (one did, for a wide character in a one-column grid) would
    /// otherwise end the pane host's output task, leaving a frozen screen and a program
    /// blocked on a full PTY. The model is then started again blank at the same size and
    /// caps, and says so in the log: the chunk and the history before it are lost from
    /// `peek`, `scrollback` and a redraw, nothing else is.
    pub fn apply(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.apply_guarded(bytes, false)
    }

    /// [`Screen::apply`], except that the screen may hold back the last screenful of a run
    /// of plain or styled lines that ends `bytes`, so that the lines of the next bytes can
    /// scroll it into history without the core. The pane host's reader applies every read
    /// this way. What is held back is never seen: every reader of the screen (`lines`,
    /// `cursor`, `scrollback`, `redraw`, ...) and every other change (`apply`, `resize`,
    /// `clear`, the release of spare rows) first gives it to the core ([`Screen::end_turn`]),
    /// which is why those readers take `&mut self`. A program printing without pause thus
    /// puts only the last screenful before someone looks through the core, not the last
    /// screenful of every read.
    pub fn apply_deferring(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.apply_guarded(bytes, true)
    }

    /// Gives the core what [`Screen::apply_deferring`] held back, so that the screen is up to
    /// date. The history's waiting lines stay as they came: only a reader of the history
    /// ([`Screen::end_turn_with_history`]) pays for encoding them.
    pub fn end_turn(&mut self) {
        if !self.deferred.is_empty() {
            self.guarded(format_args!("ending a turn"), |screen| {
                screen.advance(&[], false);
                screen.settle_history();
            });
        }
    }

    /// [`Screen::end_turn`], and the lines the history keeps as they came encoded, so that the
    /// screen and its history are up to date: for what reads the history (`history_len`,
    /// `scrollback`) and for the release of memory once the pane is quiet.
    pub fn end_turn_with_history(&mut self) {
        self.end_turn();
        self.history.encode_awaiting();
    }

    /// Of the bytes the last [`Screen::apply`] or [`Screen::apply_deferring`] was given, the
    /// ranges the model read as (the end of) a run of whole plain or styled lines, in order
    /// and apart (the first starts before them, at a negative offset, when its run began in
    /// the bytes of calls before, held back): printable ASCII and SGR sequences of digits and
    /// `;`, each line ended by `\r\n`. So every `ESC` in a range begins such an SGR, ended
    /// within it, and it holds no other control but `CR` and `LF`: written to a terminal at
    /// rest, it changes nothing but the pen ([`crate::restore::Outer::observe_output`] relies
    /// on it).
    pub fn pen_only(&self) -> &[Range<isize>] {
        &self.pen_only
    }

    /// The OSC 7501 strings (program status queries and reports) the output applied since the
    /// last call held, in order. The model keeps nothing of them: the pane does.
    pub fn take_status(&mut self) -> Vec<StatusString> {
        std::mem::take(&mut self.status_strings)
    }

    /// Whether [`Screen::apply_deferring`] holds bytes back for the next read.
    pub(crate) fn holds_output(&self) -> bool {
        !self.deferred.is_empty()
    }

    fn apply_guarded(&mut self, bytes: &[u8], defer: bool) -> Vec<Vec<u8>> {
        let len = bytes.len();
        self.guarded(format_args!("on a {len}-byte output chunk"), |screen| {
            screen.apply_unguarded(bytes, defer)
        })
        .unwrap_or_default()
    }

    /// Runs `work` on the model; when the core panics in it (`doing` says what the model was
    /// doing; formatted only then), the model starts again blank at the same size and says so
    /// in the log.
    fn guarded<T>(
        &mut self,
        doing: std::fmt::Arguments<'_>,
        work: impl FnOnce(&mut Screen) -> T,
    ) -> Option<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(self))) {
            Ok(done) => Some(done),
            Err(_) => {
                // The panic hook has logged the panic's own message already.
                tracing::error!(
                    "the screen model panicked {doing}; it starts again blank at {}x{}, \
                     without the history before it",
                    self.rows(),
                    self.cols()
                );
                *self = self.blank_like();
                None
            }
        }
    }

    /// A blank model of the same size, caps and history store.
    fn blank_like(&self) -> Screen {
        let (rows, cols) = (self.rows(), self.cols());
        Screen::build(
            u16::try_from(rows).unwrap_or(u16::MAX),
            u16::try_from(cols).unwrap_or(u16::MAX),
            self.scrollback,
            self.history.max_bytes(),
            self.store,
        )
    }

    fn apply_unguarded(&mut self, bytes: &[u8], defer: bool) -> Vec<Vec<u8>> {
        #[cfg(test)]
        if let Some(byte) = self.panic_on {
            assert!(
                !bytes.contains(&byte),
                "test: the model panics on {byte:#04x}"
            );
        }
        self.end_expired_sync();
        self.pen_only.clear();
        // The queries the core drops (crate::queries) are answered here. The chunk is fed to
        // the core up to the end of each, so the answers keep the order of the queries: a
        // program that sends XTVERSION and then DA1 as a sentinel gets them in that order.
        let mut answers = Vec::new();
        let mut start = 0;
        while let Some((at, query)) = self.queries.find(&bytes[start..]) {
            let end = start + at;
            self.reading = Some((start as isize, bytes.len()));
            self.advance(&bytes[start..=end], false);
            answers.append(&mut self.take_raised());
            match query {
                // The protocol's query is answered in order with the others (a program that
                // sends DA1 after it as a sentinel must get this answer first); whether the
                // pane host or a terminal answers is the pane's choice, as for every query.
                Query::Status(found) => {
                    answers.extend(crate::program_status::answer_to(&found));
                    self.status_strings.push(found);
                }
                query => answers.extend(query.answers()),
            }
            start = end + 1;
        }
        self.reading = Some((start as isize, bytes.len()));
        self.advance(&bytes[start..], defer);
        self.reading = None;
        answers.append(&mut self.take_raised());
        self.settle_history();
        answers
    }

    /// When the synchronized update (`?2026h`) the program started must end at the latest,
    /// `None` when none is pending. The parser holds a frame's bytes back until the program
    /// ends it; the pane host calls [`Screen::flush_expired_sync`] at this instant so a
    /// program that never ends its frame cannot freeze the model (and so `peek`, `wait` and
    /// the redraw) for good.
    pub fn sync_deadline(&self) -> Option<Instant> {
        self.parser.sync_timeout().sync_timeout()
    }

    /// Ends a synchronized update whose deadline has passed and applies the bytes it held, as
    /// the emulator does when its timer fires. Returns the answers owed to queries in those
    /// bytes, or `None` when no frame had expired (nothing changed).
    pub fn flush_expired_sync(&mut self) -> Option<Vec<Vec<u8>>> {
        self.end_turn();
        self.end_expired_sync().then(|| self.take_raised())
    }

    fn end_expired_sync(&mut self) -> bool {
        let expired = self
            .sync_deadline()
            .is_some_and(|deadline| deadline <= Instant::now());
        if expired {
            let mut tracker = Tracker {
                term: &mut self.term,
                tracked: &mut self.tracked,
                history_cleared: &mut self.history_cleared,
            };
            self.parser.stop_sync(&mut tracker);
            self.settle_history();
        }
        expired
    }

    fn take_raised(&mut self) -> Vec<Vec<u8>> {
        let mut raised = self.listener.raised.lock();
        if let Some(title) = raised.title.take() {
            self.title = title.unwrap_or_default();
        }
        std::mem::take(&mut raised.answers)
    }

    pub fn rows(&self) -> usize {
        self.term.screen_lines()
    }

    pub fn cols(&self) -> usize {
        self.term.columns()
    }

    /// Resizes the model; like [`Screen::apply`] it never panics: a panic inside the core
    /// starts the model again blank at the new size.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.end_turn();
        let resized = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.resize_unguarded(rows, cols)
        }));
        if resized.is_err() {
            tracing::error!(
                "the screen model panicked resizing to {rows}x{cols}; it starts again blank, \
                 without the history before it"
            );
            *self = Screen::build(
                rows,
                cols,
                self.scrollback,
                self.history.max_bytes(),
                self.store,
            );
        }
    }

    fn resize_unguarded(&mut self, rows: u16, cols: u16) {
        #[cfg(test)]
        assert!(!self.panic_resizing, "test: the model panics resizing");
        let (rows, cols) = (
            usize::from(rows.max(1)),
            usize::from(cols.max(MIN_MODEL_COLS)),
        );
        *self.listener.size.lock() = (rows, cols);
        if (rows, cols) != (self.rows(), self.cols()) {
            self.restore_history();
            self.term.resize(TermSize { lines: rows, cols });
            if self.term.mode().contains(TermMode::ALT_SCREEN) {
                self.on_primary(Screen::mark_rows_written);
            } else {
                self.mark_rows_written();
            }
            self.absorb_history();
            // The core resets its scroll region on a resize; so does the record of it. A
            // resize to the size the screen has changes nothing in the core, the region
            // included.
            self.tracked.reset_scroll_region();
        }
    }

    /// Clears the visible screen and the history, keeping modes.
    pub fn clear(&mut self) {
        self.advance(b"\x1b[H\x1b[2J\x1b[3J", false);
        self.settle_history();
        self.listener.raised.lock().answers.clear();
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    /// The modes the program set. Held-back output ([`Screen::apply_deferring`]) is lines of
    /// text and SGR sequences, which set no mode, so this needs no `&mut self`.
    pub fn modes(&self) -> Modes {
        let mode = self.term.mode();
        Modes {
            alternate_screen: mode.contains(TermMode::ALT_SCREEN),
            bracketed_paste: mode.contains(TermMode::BRACKETED_PASTE),
            application_cursor: mode.contains(TermMode::APP_CURSOR),
            mouse: mode.intersects(TermMode::MOUSE_MODE),
            focus_events: mode.contains(TermMode::FOCUS_IN_OUT),
        }
    }

    /// Cursor `(row, col, visible)`, zero based.
    pub fn cursor(&mut self) -> (usize, usize, bool) {
        self.end_turn();
        let point = self.term.grid().cursor.point;
        let visible = self.term.mode().contains(TermMode::SHOW_CURSOR);
        (point.line.0.max(0) as usize, point.column.0, visible)
    }

    /// Lines of history above the screen: none in the alternate screen, whose grid has no
    /// history (the primary screen's stays for when the program leaves it).
    pub fn history_len(&mut self) -> usize {
        self.end_turn_with_history();
        self.compact_len() + self.term.grid().history_size()
    }

    /// [`Screen::history_len`] for a reader of the count alone (a snapshot's `history`): the
    /// lines the history keeps as they came are encoded only when the byte cap may drop some
    /// of them, which only encoding tells. A pane printing plain lines without pause has up to
    /// the line cap of them waiting at each snapshot, and a request waits while they are
    /// encoded under the state lock.
    pub fn history_count(&mut self) -> usize {
        self.end_turn();
        let compact = if self.term.mode().contains(TermMode::ALT_SCREEN) {
            Some(0)
        } else {
            self.history.settled_len()
        };
        match compact {
            Some(compact) => compact + self.term.grid().history_size(),
            None => self.history_len(),
        }
    }

    /// Tests only: every history row, oldest first, with all its cells and flags.
    #[cfg(test)]
    pub(crate) fn history_rows(&mut self) -> Vec<Row<Cell>> {
        let history = self.history_len();
        (0..history)
            .map(|i| {
                if i < self.compact_len() {
                    self.history.row(i).unwrap_or_else(|| Row::new(1))
                } else {
                    self.term.grid()[Line(i as i32 - history as i32)].clone()
                }
            })
            .collect()
    }

    /// Tests only: rows stored without the core so far.
    #[cfg(test)]
    pub(crate) fn rows_skipped(&self) -> usize {
        self.rows_skipped
    }

    /// Tests only: tails held back by [`Screen::apply_deferring`] that the next bytes'
    /// lines scrolled off without the core.
    #[cfg(test)]
    pub(crate) fn held_tails_skipped(&self) -> usize {
        self.held_tails_skipped
    }

    /// Tests only: of [`Screen::rows_skipped`], rows of styled lines, and rows a styled line
    /// wrapped into that the core would have cleared with a colour.
    #[cfg(test)]
    pub(crate) fn styled_rows_skipped(&self) -> (usize, usize) {
        (self.styled_rows_skipped, self.history.filled_wrap_rows())
    }

    /// Compact history rows in front of the core's grid: the primary screen's, so none while
    /// the alternate screen is shown.
    fn compact_len(&self) -> usize {
        if self.term.mode().contains(TermMode::ALT_SCREEN) {
            0
        } else {
            self.history.len()
        }
    }

    /// The visible screen as plain text, trailing blanks trimmed.
    pub fn lines(&mut self) -> Vec<String> {
        self.end_turn();
        (0..self.rows())
            .map(|r| self.line_text(Line(r as i32)))
            .collect()
    }

    /// The visible screen rendered with SGR attributes, one string per row.
    pub fn ansi_lines(&mut self) -> Vec<String> {
        self.end_turn();
        (0..self.rows())
            .map(|r| {
                let mut out = Vec::new();
                render_row(&self.term.grid()[Line(r as i32)], self.cols(), &mut out);
                out.extend_from_slice(b"\x1b[0m");
                String::from_utf8_lossy(&out).into_owned()
            })
            .collect()
    }

    /// History and screen together, numbered from the oldest history line (0).
    pub fn scrollback(&mut self, start: usize, count: usize) -> (usize, Vec<String>) {
        // `history_len` brings the screen and its history up to date first.
        let history = self.history_len();
        let compact = self.compact_len();
        let total = history + self.rows();
        let end = start.saturating_add(count).min(total);
        let lines = (start.min(total)..end)
            .map(|i| {
                if i < compact {
                    let row = self.history.row(i);
                    row.map(|row| row_text(&row)).unwrap_or_default()
                } else {
                    self.line_text(Line(i as i32 - history as i32))
                }
            })
            .collect();
        (total, lines)
    }

    fn line_text(&self, line: Line) -> String {
        row_text(&self.term.grid()[line])
    }

    /// Runs `f` with the primary grid active while the alternate screen is shown, and puts
    /// the alternate screen back as it was after (see [`Screen::primary_screen`] for why this
    /// leaves the model unchanged).
    fn on_primary<T>(&mut self, f: impl FnOnce(&mut Screen) -> T) -> T {
        let lines = self.rows();
        let grid = self.term.grid();
        let alt_rows: Vec<Row<Cell>> = (0..lines).map(|r| grid[Line(r as i32)].clone()).collect();
        let alt_cursor = grid.cursor.clone();
        let alt_saved = grid.saved_cursor.clone();
        self.term.swap_alt();
        let result = f(self);
        self.term.swap_alt();
        let grid = self.term.grid_mut();
        for (r, row) in alt_rows.into_iter().enumerate() {
            grid[Line(r as i32)] = row;
        }
        grid.cursor = alt_cursor;
        grid.saved_cursor = alt_saved;
        result
    }
}

/// A cell's character as a terminal shows it. The core keeps a tab's `\t` in the first cell it
/// crossed (for copying); the screen shows a blank there, and so do we.
fn shown_char(cell: &Cell) -> char {
    if cell.c == '\t' {
        ' '
    } else {
        cell.c
    }
}

/// A row as plain text: each cell's character (a wide character once, its zero-width
/// characters after it), trailing blanks trimmed.
fn row_text(row: &Row<Cell>) -> String {
    let mut text = String::with_capacity(row.len());
    for cell in row {
        if cell
            .flags
            .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
        {
            continue;
        }
        text.push(shown_char(cell));
        if let Some(extra) = cell.zerowidth() {
            text.extend(extra);
        }
    }
    let trimmed = text.trim_end_matches(' ').len();
    text.truncate(trimmed);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_modes_and_cursor() {
        let mut s = Screen::new(5, 20, 100);
        s.apply(b"hello\r\n\x1b[1;31mred\x1b[0m\x1b[?2004h\x1b]2;T\x07");
        assert_eq!(s.lines()[0], "hello");
        assert_eq!(s.lines()[1], "red");
        assert!(s.modes().bracketed_paste);
        assert_eq!(s.title(), "T");
        assert_eq!(s.cursor(), (1, 3, true));
        assert!(s.ansi_lines()[1].contains("\x1b[0;1;31mred"));
    }

    #[test]
    fn queries_are_answered_by_the_model() {
        let mut s = Screen::new(5, 20, 100);
        let answers = s.apply(b"ab\x1b[6n\x1b[c");
        assert_eq!(answers, vec![b"\x1b[1;3R".to_vec(), b"\x1b[?6c".to_vec()]);
    }

    #[test]
    fn program_status_strings_never_reach_the_screen_and_the_query_is_answered_in_order() {
        let mut s = Screen::new(4, 40, 10);
        let answers = s.apply(
            b"a\x1b]7501;state=working:msg=aGk=\x1b\\b\x1b]7501;?\x07\x1b[c\x1b]7501;state=x:\x18c",
        );
        assert_eq!(
            answers,
            vec![b"\x1b]7501;?\x07".to_vec(), b"\x1b[?6c".to_vec()]
        );
        assert_eq!(s.lines()[0].trim_end(), "abc");
        assert_eq!(s.take_status().len(), 3);
        assert!(s.take_status().is_empty());
    }

    #[test]
    fn xtversion_kitty_keyboard_and_xtgettcap_are_answered_in_order() {
        let mut s = Screen::new(5, 20, 100);
        let version = format!("\x1bP>|belfry {}\x1b\\", env!("CARGO_PKG_VERSION"));
        // XTVERSION then DA1 as a sentinel, the way programs probe: answered in that order.
        let answers = s.apply(b"\x1b[>0q\x1b[c\x1b[>q");
        assert_eq!(
            answers,
            vec![
                version.clone().into_bytes(),
                b"\x1b[?6c".to_vec(),
                version.into_bytes()
            ]
        );
        // The kitty keyboard flags: 0 until the program pushes some, then the pushed ones.
        assert_eq!(s.apply(b"\x1b[?u"), vec![b"\x1b[?0u".to_vec()]);
        assert_eq!(s.apply(b"\x1b[>5u\x1b[?u"), vec![b"\x1b[?5u".to_vec()]);
        assert_eq!(s.apply(b"\x1b[<u\x1b[?u"), vec![b"\x1b[?0u".to_vec()]);
        // XTGETTCAP: "not supported" for every name asked, even split across chunks.
        assert_eq!(
            s.apply(b"\x1bP+q544e;636f6c6f7273\x1b\\"),
            vec![b"\x1bP0+r\x1b\\".to_vec(); 2]
        );
        assert!(s.apply(b"\x1bP+q54").is_empty());
        assert_eq!(s.apply(b"4e\x1b\\"), vec![b"\x1bP0+r\x1b\\".to_vec()]);
        // None of it shows on the screen.
        assert_eq!(s.lines()[0], "");
    }
    #[test]
    fn an_unended_synchronized_update_is_applied_after_the_timeout() {
        let mut model = Screen::new(3, 20, 0);
        model.apply(b"\x1b[?2026hframe");
        // The frame is held back while the update is pending.
        assert_eq!(model.lines()[0], "");
        let deadline = model
            .sync_deadline()
            .expect("a pending synchronized update");
        assert!(
            model.flush_expired_sync().is_none(),
            "flushed before its deadline"
        );
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(model.flush_expired_sync().is_some());
        assert_eq!(model.lines()[0], "frame");
        assert_eq!(model.sync_deadline(), None);
        // An expired frame is also applied before the next output is.
        model.apply(b"\r\n\x1b[?2026hsecond");
        let deadline = model.sync_deadline().expect("a second pending update");
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        std::thread::sleep(std::time::Duration::from_millis(5));
        model.apply(b"!");
        assert_eq!(model.lines()[1], "second!");
    }

    #[test]
    fn scrollback_counts_from_the_oldest_line() {
        let mut s = Screen::new(2, 10, 100);
        s.apply(b"a\r\nb\r\nc\r\nd");
        let (total, lines) = s.scrollback(0, 10);
        assert_eq!(total, 4);
        assert_eq!(lines, vec!["a", "b", "c", "d"]);
    }
}

#[cfg(test)]
mod narrow_tests {
    use super::*;

    #[test]
    fn a_wide_character_in_a_one_column_pane_does_not_panic() {
        let mut screen = Screen::new(4, 1, 10);
        screen.apply("漢字\r\n".as_bytes());
        assert!(
            screen.lines().concat().contains('漢'),
            "{:?}",
            screen.lines()
        );
        let mut screen = Screen::new(4, 3, 10);
        screen.resize(4, 1);
        screen.apply("漢字".as_bytes());
        assert!(
            screen.lines().concat().contains('字'),
            "{:?}",
            screen.lines()
        );
    }

    /// A panic inside the model (injected here; the terminal core had one for a wide
    /// character in a one-column grid) leaves a working blank model of the same size, not a
    /// frozen one, and the next output shows; a panic while resizing leaves one blank at the
    /// new size.
    #[test]
    fn a_panic_inside_the_model_starts_it_again_blank_at_the_same_size() {
        let mut screen = Screen::new(5, 30, 100);
        screen.apply(b"before the panic\r\n");
        screen.panic_on = Some(0x07);
        assert_eq!(
            screen.apply(b"bell \x07 and a query \x1b[c"),
            Vec::<Vec<u8>>::new()
        );
        assert_eq!((screen.rows(), screen.cols()), (5, 30));
        assert!(
            !screen.lines().concat().contains("before"),
            "the model was not started again: {:?}",
            screen.lines()
        );
        screen.apply(b"after the panic");
        assert!(
            screen.lines().concat().contains("after the panic"),
            "{:?}",
            screen.lines()
        );
        // The new model answers queries again.
        assert!(!screen.apply(b"\x1b[c").is_empty());

        screen.panic_resizing = true;
        screen.resize(7, 40);
        assert_eq!((screen.rows(), screen.cols()), (7, 40));
        assert!(!screen.panic_resizing, "the model was not started again");
        screen.apply(b"after the resize");
        assert!(
            screen.lines().concat().contains("after the resize"),
            "{:?}",
            screen.lines()
        );
    }

    #[test]
    fn only_readers_of_the_history_encode_the_lines_waiting_in_it() {
        // Plain lines printed in turns skip the grid and wait in the history as they came.
        // Reading the screen alone (what `wait --regex` does on every revision) leaves them
        // waiting; reading the history encodes them, and the history then reads the same as a
        // core that kept every row.
        let mut screen = Screen::new(5, 20, 1000);
        let mut core = Screen::with_core_history(5, 20, 1000);
        let output: Vec<u8> = (0..200)
            .flat_map(|i| format!("line {i}\r\n").into_bytes())
            .collect();
        for read in output.chunks(700) {
            screen.apply_deferring(read);
        }
        core.apply(&output);
        let waiting = screen.history.awaiting_rows();
        assert!(waiting > 100, "only {waiting} rows waited");
        assert_eq!(screen.lines(), core.lines());
        assert_eq!(screen.cursor(), core.cursor());
        assert_eq!(screen.cells(), core.cells());
        let _ = screen.redraw();
        assert_eq!(
            screen.history.awaiting_rows(),
            waiting,
            "a screen reader encoded history"
        );
        // Counting the history (a snapshot's `history`) encodes nothing while the lines
        // waiting fit the byte cap whatever they encode to, and counts what encoding leaves.
        assert_eq!(screen.history_count(), core.history_len());
        assert_eq!(screen.history.awaiting_rows(), waiting, "counting encoded");
        assert_eq!(screen.history_len(), core.history_len());
        assert_eq!(screen.history.awaiting_rows(), 0);
        assert_eq!(screen.scrollback(0, 300), core.scrollback(0, 300));
        // Under a byte cap those lines may pass, only encoding tells the count: it encodes.
        let mut capped = Screen::with_history_cap(5, 20, 1000, 2000);
        for read in output.chunks(700) {
            capped.apply_deferring(read);
        }
        assert!(capped.history.awaiting_rows() > 0);
        let counted = capped.history_count();
        assert_eq!(
            capped.history.awaiting_rows(),
            0,
            "a count that may bind did not encode"
        );
        assert_eq!(counted, capped.history_len());
        assert!(
            counted < core.history_len(),
            "the byte cap did not bind: {counted}"
        );
    }
}
