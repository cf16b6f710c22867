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

use std::borrow::Borrow;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use alacritty_terminal::event::{Event, EventListener, WindowSize};
use alacritty_terminal::grid::{Cursor, Dimensions, Row};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::{Config, TermMode};
use alacritty_terminal::vte::ansi::{
    self, CharsetIndex, Color, CursorShape, NamedColor, Rgb, StandardCharset,
};
use alacritty_terminal::Term;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::ground::Follower;
use crate::history::rows_of;
use crate::history::{is_default_blank, History, DEFAULT_MAX_BYTES};
use crate::queries::{Query, Scanner, StatusString};
use crate::styled;
use crate::tracker::{Tracked, Tracker};

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

/// The colour a query is answered with: xterm's defaults, light text on black.
fn default_color(index: usize) -> Rgb {
    const BASE: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    let (r, g, b) = match index {
        0..=15 => BASE[index],
        16..=231 => {
            let i = index - 16;
            let level = |v: usize| if v == 0 { 0 } else { (55 + v * 40) as u8 };
            (level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        232..=255 => {
            let v = (8 + (index - 232) * 10) as u8;
            (v, v, v)
        }
        257 => (0, 0, 0),
        _ => (229, 229, 229),
    };
    Rgb { r, g, b }
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

/// The colours an OSC colour answer reports (`ESC ] 10 ; rgb:… ST`, `ESC ] 4 ; N ; rgb:… ST`,
/// for OSC 10, 11, 12 and 4), as the terminal core's colour index (foreground 256, background
/// 257, cursor 258, palette 0-255) and the colour. Anything else in `bytes` is skipped.
pub fn color_answers(bytes: &[u8]) -> Vec<(usize, Rgb)> {
    let mut found = Vec::new();
    let text = String::from_utf8_lossy(bytes);
    for part in text.split("\x1b]").skip(1) {
        let body = part.split(['\x07', '\x1b']).next().unwrap_or_default();
        let fields: Vec<&str> = body.split(';').collect();
        let (index, spec) = match fields.as_slice() {
            ["10", spec] => (256, *spec),
            ["11", spec] => (257, *spec),
            ["12", spec] => (258, *spec),
            ["4", n, spec] => match n.parse::<usize>() {
                Ok(n) if n < 256 => (n, *spec),
                _ => continue,
            },
            _ => continue,
        };
        if let Some(rgb) = parse_rgb(spec) {
            found.push((index, rgb));
        }
    }
    found
}

/// `rgb:R/G/B` with 1 to 4 hex digits a component (X11's colour syntax, as terminals answer),
/// scaled to 8 bits.
fn parse_rgb(spec: &str) -> Option<Rgb> {
    let parts: Vec<&str> = spec.strip_prefix("rgb:")?.split('/').collect();
    let [r, g, b] = parts.as_slice() else {
        return None;
    };
    let component = |hex: &str| -> Option<u8> {
        if hex.is_empty() || hex.len() > 4 {
            return None;
        }
        let value = u32::from_str_radix(hex, 16).ok()?;
        let max = (1u32 << (4 * hex.len())) - 1;
        u8::try_from((value * 255 + max / 2) / max).ok()
    };
    Some(Rgb {
        r: component(r)?,
        g: component(g)?,
        b: component(b)?,
    })
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

/// What [`Screen::skip_lines`] did with a run.
enum Skipped {
    /// Nothing: the core is not in its plain state there.
    Not,
    /// Fed the core the run up to here (its first line, or all of it).
    Fed(usize),
    /// Stored the rows before the tail, which is to be held back.
    Held,
}

/// A run found by [`run_lines`]: its length, and whether the bytes after it may be the start
/// of one more of its lines, cut off by their end.
struct Run {
    len: usize,
    cut: bool,
}

/// One line of a run (see [`run_lines`]).
#[derive(Debug, Clone)]
struct RunLine {
    /// Where the line starts in the run, and where its text ends (its `\r\n` follows).
    start: usize,
    end: usize,
    /// The characters it prints.
    printed: usize,
}

/// Finds the lines that `bytes` starts with that are plain (printable ASCII, `0x20..=0x7e`)
/// or styled (the same with SGR sequences that leave the pen as they found it, see
/// [`styled::line`]), each ended by `\r\n`: they go in `lines`, and the length of all of
/// them (with their line ends) is returned with whether the rest of `bytes` may begin one
/// more.
fn run_lines(bytes: &[u8], lines: &mut Vec<RunLine>) -> Run {
    lines.clear();
    more_run_lines(bytes, lines)
}

/// [`run_lines`] for a run whose first lines are in `lines` already: the lines after them
/// are found and added.
fn more_run_lines(bytes: &[u8], lines: &mut Vec<RunLine>) -> Run {
    let mut start = lines.last().map_or(0, |line| line.end + 2);
    loop {
        let (len, printed) = match styled::line(&bytes[start..], start, None) {
            styled::Scan::Read(len, printed) => (len, printed),
            scan => {
                return Run {
                    len: start,
                    cut: scan == styled::Scan::Cut,
                }
            }
        };
        lines.push(RunLine {
            start,
            end: start + len,
            printed,
        });
        start += len + 2;
    }
}

/// Adds `new` to `ranges` (ranges of the same bytes holding only whole plain or styled
/// lines, or the end of such a run; see [`Screen::pen_only`]), which are in order: joined to
/// the last when they overlap or touch (a run's `ESC`s each begin an SGR ended inside it, so
/// their union's do too), after it when it comes after it; one before it is left out, so
/// the ranges stay in order.
fn add_pen_only(ranges: &mut Vec<Range<isize>>, new: Range<isize>) {
    if new.is_empty() {
        return;
    }
    match ranges.last_mut() {
        Some(last) if new.start <= last.end && last.start <= new.end => {
            *last = last.start.min(new.start)..last.end.max(new.end);
        }
        Some(last) if new.end < last.start => {}
        _ => ranges.push(new),
    }
}

/// The [`Screen::pen_only`] ranges of consecutive `apply` calls joined, for their bytes
/// handed on as one piece (a turn of the pane host's reader).
#[derive(Debug, Default)]
pub struct PenOnlyRun {
    ranges: Vec<Range<isize>>,
    len: usize,
}

impl PenOnlyRun {
    /// Notes the ranges of the call `screen` just made on the next `n` bytes.
    pub fn applied(&mut self, screen: &Screen, n: usize) {
        let at = self.len as isize;
        for range in screen.pen_only() {
            add_pen_only(&mut self.ranges, range.start + at..range.end + at);
        }
        self.len += n;
    }

    /// The joined ranges, in the bytes of the calls noted, in order (a run begun before them
    /// starts at their start).
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.ranges
            .iter()
            .map(|r| r.start.max(0) as usize..r.end.max(0) as usize)
            .filter(|r| !r.is_empty())
    }

    /// Starts again with no calls noted, keeping the room.
    pub fn clear(&mut self) {
        self.ranges.clear();
        self.len = 0;
    }
}

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

    /// Feeds `bytes` to the core, except the lines of a run of plain or styled lines that
    /// would only scroll through the screen into history: those go to the compact history at
    /// once.
    ///
    /// A pane printing a long listing or a log makes the core write every character of every
    /// line into a row and, one screenful later, clear that row again as it scrolls into
    /// history (its oldest history row, long out of the cache, is reused for the new line).
    /// Lines of printable ASCII, each ended by `\r\n`, arriving while the parser is at rest
    /// and the core is in its plain state ([`Screen::plain_state`]: default pen, whole-screen
    /// scrolling, autowrap, no insert mode, the cursor at the start of a row with only blank
    /// rows from it down) become rows the same way whatever else is on the screen: a line of
    /// `n` characters fills `n / cols` rows marked as wrapped and one more that is not. So do
    /// styled lines, the same with SGR sequences that leave the pen as they found it
    /// ([`styled::line`]); a row one wraps into that the core scrolls in is cleared with the
    /// pen's background of that moment. So when the run's last `rows` rows or more come from
    /// its later lines (the tail), every row before the tail — the screen's rows above the
    /// cursor, then the earlier lines' rows — ends in history, in that order; they are stored
    /// there directly, the screen is blanked, the cursor goes to the row the core's would be
    /// on, and only the tail goes to the core, which scrolls the rest of the way as it would
    /// have. What every reader sees is the same as if the core had been fed everything
    /// (`history::properties` compares them on random output).
    ///
    /// With `defer`, a tail that ends `bytes` is held back instead (see
    /// [`Screen::apply_deferring`]): the lines of the next bytes may scroll it off too.
    fn advance(&mut self, bytes: &[u8], defer: bool) {
        if self.store != HistoryStore::Compact {
            self.feed(bytes);
            return;
        }
        if !self.deferred.is_empty() {
            // The held tail comes first: it and the lines after it are one run, whose first
            // lines (the tail's) were read already.
            let mut joined = std::mem::take(&mut self.joined);
            joined.clear();
            if let Some((at, _)) = &mut self.reading {
                *at -= self.deferred.len() as isize;
            }
            joined.append(&mut self.deferred);
            joined.extend_from_slice(bytes);
            self.advance_from(&joined, defer, true);
            self.joined = joined;
            return;
        }
        self.advance_from(bytes, defer, false);
    }

    /// [`Screen::advance`] on `bytes`, which start with a held tail whose lines are the
    /// first of `self.plain` when `resume`.
    fn advance_from(&mut self, bytes: &[u8], defer: bool, resume: bool) {
        // bytes[..fed] went to the core or history; the follower has seen bytes[..at].
        let (mut fed, mut at) = (0, 0);
        while at < bytes.len() {
            if self.follower.at_rest() {
                let Run { len: run, cut } = if resume && at == 0 {
                    more_run_lines(bytes, &mut self.plain)
                } else {
                    run_lines(&bytes[at..], &mut self.plain)
                };
                if run > 0 {
                    self.note_pen_only(at, at + run);
                    // A tail is held back only when nothing but the start of one more line
                    // comes after it, and not without bound.
                    let hold = defer
                        && (at + run == bytes.len() || cut)
                        && bytes.len() - at <= MAX_DEFERRED;
                    let held = if let Some(tail) = self.tail_start() {
                        self.feed(&bytes[fed..at]);
                        match self.skip_lines(&bytes[at..at + run], tail, hold) {
                            Skipped::Not => {
                                fed = at;
                                None
                            }
                            Skipped::Fed(to) => {
                                fed = at + to;
                                None
                            }
                            Skipped::Held => Some(tail),
                        }
                    } else if self.placeholders > 0 {
                        // A held tail that the lines after it cannot scroll off yet: held
                        // longer, or given to the core now.
                        if hold {
                            Some(0)
                        } else {
                            let rows = self.run_rows(0);
                            self.feed_tail(&bytes[at..at + run], rows);
                            fed = at + run;
                            None
                        }
                    } else if hold {
                        // A run too short to fill the screen (a read holds less than a
                        // screenful when lines are long or the pane is large) is held whole:
                        // with the next reads' lines it may be long enough to skip. Given to
                        // the core now, it would leave the core inside the next read's first
                        // line, and no run after it could be skipped either.
                        self.feed(&bytes[fed..at]);
                        Some(0)
                    } else {
                        None
                    };
                    self.follower.passed_plain_lines();
                    if let Some(tail) = held {
                        // The rest is seen again with the next bytes, the tail's lines as
                        // read now.
                        self.deferred
                            .extend_from_slice(&bytes[at + self.plain[tail].start..]);
                        self.keep_lines_from(tail);
                        return;
                    }
                    at += run;
                    continue;
                }
            }
            debug_assert_eq!(self.placeholders, 0, "a held tail is always a run's start");
            // The next place a run can start: after the next line feed.
            let next = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n + 1);
            self.follower.advance(&bytes[at..next]);
            at = next;
        }
        self.feed(&bytes[fed..]);
    }

    /// Notes that `bytes[start..end]` of those being advanced are whole plain or styled lines
    /// (see [`Screen::pen_only`]).
    fn note_pen_only(&mut self, start: usize, end: usize) {
        let Some((at, len)) = self.reading else {
            return;
        };
        // Where they are in the bytes of the `apply` call, before them for a held tail.
        let start = at + start as isize;
        let end = (at + end as isize).min(len as isize);
        add_pen_only(&mut self.pen_only, start..end);
    }

    /// Keeps the lines of the run in `self.plain` from line `from` on, as the lines of a run
    /// starting with the first of them.
    fn keep_lines_from(&mut self, from: usize) {
        let base = self.plain[from].start;
        self.plain.drain(..from);
        for line in &mut self.plain {
            line.start -= base;
            line.end -= base;
        }
    }

    /// The rows the lines of the run in `self.plain` from line `from` on take.
    fn run_rows(&self, from: usize) -> usize {
        let cols = self.cols();
        self.plain[from..]
            .iter()
            .map(|line| rows_of(line.printed, cols))
            .sum()
    }

    /// Feeds a run's tail of `tail_rows` rows to the core, which fills the screen or more,
    /// with the screen blank and the cursor on the row the core's would be on
    /// (`self.placeholders` of them above it, see [`Screen::skip_lines`]). The core scrolls
    /// every row it would have, those blank rows into its history first: they are dropped.
    fn feed_tail(&mut self, tail: &[u8], tail_rows: usize) {
        let above = std::mem::take(&mut self.placeholders);
        self.feed(tail);
        let scrolls = (above + tail_rows + 1).saturating_sub(self.rows());
        let grid = self.term.grid_mut();
        let held = grid.history_size();
        // The core drops its oldest rows at its limit: the blank ones first.
        let blanks = held
            .saturating_sub(scrolls.saturating_sub(above))
            .min(above);
        if blanks > 0 {
            grid.update_history(held - blanks);
            grid.update_history(self.scrollback);
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut tracker = Tracker {
            term: &mut self.term,
            tracked: &mut self.tracked,
            history_cleared: &mut self.history_cleared,
        };
        self.parser.advance(&mut tracker, bytes);
    }

    /// The first line of the run in `self.plain` whose rows and those after it fill the
    /// screen, when there are lines before it to skip and the tail shows the run's last
    /// printed character (the parser keeps it for `CSI b`, repeat).
    fn tail_start(&self) -> Option<usize> {
        let (rows, cols) = (self.rows(), self.cols());
        let mut filled = 0;
        let mut start = self.plain.len();
        while filled < rows {
            start = start.checked_sub(1)?;
            filled += rows_of(self.plain[start].printed, cols);
        }
        if start == 0 {
            return None;
        }
        let tail_prints = self.plain[start..].iter().any(|line| line.printed > 0);
        let skipped_print = self.plain[..start].iter().any(|line| line.printed > 0);
        (tail_prints || !skipped_print).then_some(start)
    }

    /// Stores the rows of the lines of the run `run` before line `tail` (see
    /// [`Screen::advance`]) and feeds the tail to the core, or, with `hold`, leaves the tail
    /// to be held back. Nothing is stored when the core is not in its plain state at the
    /// run's first line nor after it (a run's first line can be the end of one begun before);
    /// the first line is fed to the core in the second case.
    fn skip_lines(&mut self, run: &[u8], tail: usize, hold: bool) -> Skipped {
        let mut first = 0;
        if !self.plain_state() {
            // The first line may be the rest of one begun earlier: try once after it.
            if tail < 2 {
                return Skipped::Not;
            }
            self.feed(&run[..self.plain[1].start]);
            if !self.plain_state() {
                return Skipped::Fed(self.plain[1].start);
            }
            first = 1;
        }
        // A history the program cleared earlier in the chunk goes before rows join it.
        if std::mem::take(&mut self.history_cleared) {
            self.history.clear();
        }
        self.move_all_core_rows();
        // The compact store grows here, and the grid may have grown row buffers for the
        // rows it scrolled: both are given back once the pane is quiet.
        self.spare_rows = true;
        let (rows, cols) = (self.rows(), self.cols());
        let grid = self.term.grid_mut();
        let cursor = grid.cursor.point.line.0.max(0) as usize;
        // Rows standing in for rows already stored (above a held tail) are not stored again.
        let stored = std::mem::take(&mut self.placeholders);
        #[cfg(test)]
        {
            self.held_tails_skipped += usize::from(stored > 0);
        }
        for line in 0..cursor {
            if line >= stored {
                self.history.push(&grid[Line(line as i32)]);
            }
            grid[Line(line as i32)].reset(&Cell::default());
        }
        // The skipped rows, numbered down from the screen's top as the core would write them
        // (from the cursor's row on): a row the core scrolls in (numbered `rows` or more) is
        // cleared with the pen's background, which matters for a row a styled line wraps into.
        // The history keeps each line as it came until its rows are needed.
        let mut row = cursor;
        for line in &self.plain[first..tail] {
            self.history.push_line(
                &run[line.start..line.end + 2],
                line.printed,
                row,
                rows,
                cols,
            );
            row += rows_of(line.printed, cols);
            #[cfg(test)]
            if line.end - line.start != line.printed {
                self.styled_rows_skipped += rows_of(line.printed, cols);
            }
        }
        #[cfg(test)]
        {
            self.rows_skipped += row - cursor;
        }
        // The tail goes to the core from the row the core's cursor would be on, every row
        // above it blank (see `feed_tail`), now or, held back, with the lines after it.
        let above = row.min(rows.saturating_sub(1));
        self.term.grid_mut().cursor.point.line = Line(above as i32);
        self.placeholders = above;
        let start = self.plain[tail].start;
        if hold {
            return Skipped::Held;
        }
        let tail_rows = self.run_rows(tail);
        self.feed_tail(&run[start..], tail_rows);
        Skipped::Fed(run.len())
    }

    /// Whether the core is where a plain or styled line ended by `\r\n` makes rows that
    /// depend on nothing but its bytes: the primary screen at the bottom of its history, no
    /// synchronized update holding bytes, whole-screen scrolling, autowrap on, insert mode
    /// off, a default pen and an ASCII character set, the cursor at the start of a row with
    /// no wrap pending, and that row and every one below it blank.
    fn plain_state(&self) -> bool {
        let mode = *self.term.mode();
        if mode.contains(TermMode::ALT_SCREEN)
            || mode.contains(TermMode::INSERT)
            || !mode.contains(TermMode::LINE_WRAP)
            || self.tracked.scroll_region.is_some()
            || self.sync_deadline().is_some()
        {
            return false;
        }
        let grid = self.term.grid();
        let cursor = &grid.cursor;
        if grid.display_offset() != 0
            || cursor.input_needs_wrap
            || cursor.point.column.0 != 0
            || cursor.template != Cell::default()
            || cursor.charsets[self.tracked.active_charset] != StandardCharset::Ascii
        {
            return false;
        }
        let from = cursor.point.line.0;
        (from..grid.screen_lines() as i32)
            .all(|line| grid[Line(line)].into_iter().all(is_default_blank))
    }

    /// Brings the compact rows up to date after a chunk, normally without encoding anything:
    /// drops them all if the program cleared the history, and drops the oldest of them while
    /// the compact rows and the core's together exceed the line cap (the core drops its own).
    /// Rows scrolled off stay in the core while output arrives, so a pane that prints
    /// non-stop pays nothing for them but what the core always cost, and rows pushed past the
    /// cap are never encoded at all; [`Screen::release_spare_rows`] moves them once the pane
    /// is quiet. Only when the rows waiting in the core would take more than the byte cap at
    /// 24 bytes a cell are they moved at once, so history never holds more than about twice
    /// the byte cap whatever the line cap and however long the output lasts.
    fn settle_history(&mut self) {
        if std::mem::take(&mut self.history_cleared) {
            self.history.clear();
        }
        if self.store != HistoryStore::Compact || self.term.mode().contains(TermMode::ALT_SCREEN) {
            return;
        }
        let core = self.term.grid().history_size();
        if core > 1 {
            self.spare_rows = true;
        }
        let excess = (self.history.len() + core).saturating_sub(self.scrollback);
        self.history.drop_oldest(excess);
        let row_bytes = self.cols() * std::mem::size_of::<Cell>();
        if core.saturating_mul(row_bytes) > self.history.max_bytes() {
            self.move_core_rows();
        }
    }

    /// Moves the rows that entered the core's history into the compact store, all but the
    /// newest, and drops them from the core. In the alternate screen the primary grid (and
    /// its history) is out of reach and cannot gain rows from output, so nothing moves until
    /// the program leaves it.
    ///
    /// The newest row stays because whether the core has any history at all changes what it
    /// does: erasing the whole screen (`CSI 2 J`) scrolls an empty screen's first line into
    /// history only when there is none.
    fn absorb_history(&mut self) {
        self.settle_history();
        self.move_core_rows();
    }

    /// Moves every row of the core's history into the compact store, the newest too: the
    /// tail of a run of plain lines (see [`Screen::advance`]) gives the core a newest row
    /// again at once.
    fn move_all_core_rows(&mut self) {
        let grid = self.term.grid_mut();
        let core = grid.history_size();
        if core == 0 {
            return;
        }
        for back in (1..=core).rev() {
            self.history.push(&grid[Line(-(back as i32))]);
        }
        grid.update_history(0);
        grid.update_history(self.scrollback);
        self.spare_rows = true;
    }

    fn move_core_rows(&mut self) {
        if self.store != HistoryStore::Compact || self.term.mode().contains(TermMode::ALT_SCREEN) {
            return;
        }
        let grid = self.term.grid_mut();
        let core = grid.history_size();
        if core <= 1 {
            return;
        }
        for back in (2..=core).rev() {
            self.history.push(&grid[Line(-(back as i32))]);
        }
        // Dropping the oldest rows of the core's history without touching the newest: lower
        // its limit to one line and put the limit back.
        grid.update_history(1);
        grid.update_history(self.scrollback);
        self.spare_rows = true;
    }

    /// Gives every compact row back to the core's primary grid as history, oldest first, in
    /// front of any rows the core still holds, so that a resize reflows them as the core
    /// always has. The compact store is empty afterwards; [`Screen::absorb_history`] takes
    /// the rows back.
    fn restore_history(&mut self) {
        self.history.encode_awaiting();
        if self.history.is_empty() {
            return;
        }
        if self.term.mode().contains(TermMode::ALT_SCREEN) {
            self.on_primary(Screen::restore_into_active_grid);
        } else {
            self.restore_into_active_grid();
        }
    }

    fn restore_into_active_grid(&mut self) {
        let grid = self.term.grid_mut();
        let lines = grid.screen_lines();
        let core = grid.history_size();
        // Never more than the line cap, which the core would have kept.
        let skip = (self.history.len() + core).saturating_sub(self.scrollback);
        let mut rows: Vec<Row<Cell>> = (skip..self.history.len())
            .filter_map(|i| self.history.row(i))
            .collect();
        rows.extend(
            (1..=core)
                .rev()
                .map(|back| grid[Line(-(back as i32))].clone()),
        );
        let added = rows.len() - core;
        rows.extend((0..lines).map(|r| grid[Line(r as i32)].clone()));
        // The core's one public way to grow its history is to scroll the whole screen up; the
        // rows it scrolls in are then overwritten with the history and the screen as they
        // were. The cursor does not move.
        let whole = Line(0)..Line(lines as i32);
        let mut left = added;
        while left > 0 {
            let step = left.min(lines);
            grid.scroll_up::<Color>(&whole, step);
            left -= step;
        }
        let top = -(grid.history_size() as i32);
        for (i, row) in rows.into_iter().enumerate() {
            grid[Line(top + i as i32)] = row;
        }
        self.history.clear();
        self.spare_rows = true;
    }

    /// Counts every cell of the active grid's rows (screen and history) as written.
    ///
    /// The core remembers per row how many cells were written since its last reset, and a
    /// reset clears only those when the pen's background matches the row's last cell. Widening
    /// a row appends blank cells after that count without moving it, so a row erased with a
    /// coloured background and then widened keeps coloured cells a later erase skips; which
    /// of them reappear on new lines then depends on which of its buffers the core happens to
    /// reuse, and that differs once history rows live outside the core. Counting every cell
    /// after a resize makes the next reset clear the whole row, as a terminal clears it.
    fn mark_rows_written(&mut self) {
        let grid = self.term.grid_mut();
        let top = -(grid.history_size() as i32);
        for line in top..grid.screen_lines() as i32 {
            let row = &mut grid[Line(line)];
            let width = row.len();
            let _ = &mut row[..Column(width)];
        }
    }

    /// Moves the rows waiting in the core's history into the compact store (see
    /// [`Screen::settle_history`]) and frees what the history needed only while output was
    /// arriving: those rows, the rows the core's grid allocated beyond the screen and the
    /// compact store's spare capacity. The pane host calls
    /// this once the pane has been quiet for a moment, so a pane that prints non-stop does not
    /// pay for allocating those rows again after every chunk. Returns whether anything was
    /// freed (the caller may then return freed memory to the system).
    pub fn release_spare_rows(&mut self) -> bool {
        self.end_turn_with_history();
        if !std::mem::take(&mut self.spare_rows) {
            return false;
        }
        if self.term.mode().contains(TermMode::ALT_SCREEN) {
            // The primary grid's spare rows stay until the program leaves the alternate
            // screen; the next chunk after that sets the flag again.
            self.spare_rows = true;
            return false;
        }
        self.absorb_history();
        self.spare_rows = false;
        let grid = self.term.grid_mut();
        grid.truncate();
        // Truncating keeps the capacity of the grid's row index, which grew with the history
        // (32 bytes a row); a clone holds exactly the rows in use, and is otherwise the same
        // grid (rows with their cells and counts, cursors, limits).
        let compact = grid.clone();
        *grid = compact;
        self.history.shrink_to_fit();
        true
    }

    /// Whether [`Screen::release_spare_rows`] has anything to do: memory to free, or held
    /// output to give to the core first (which leaves rows to free).
    pub fn has_spare_rows(&self) -> bool {
        self.holds_output() || (self.spare_rows && !self.term.mode().contains(TermMode::ALT_SCREEN))
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

    /// Per-row runs of equally styled text, for adapters that judge attributes.
    pub fn cells(&mut self) -> Value {
        self.end_turn();
        let rows: Vec<Value> = (0..self.rows())
            .map(|r| {
                let row = &self.term.grid()[Line(r as i32)];
                let mut runs: Vec<Value> = Vec::new();
                let mut current: Option<(String, Value)> = None;
                for col in 0..self.cols() {
                    let cell = &row[Column(col)];
                    if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
                        continue;
                    }
                    let style = cell_style(cell);
                    match &mut current {
                        Some((text, s)) if *s == style => text.push(shown_char(cell)),
                        _ => {
                            if let Some((text, s)) = current.take() {
                                runs.push(run_json(text, s));
                            }
                            current = Some((shown_char(cell).to_string(), style));
                        }
                    }
                    // The cell's zero-width characters follow its character, as in the row's
                    // text, so the two views of one row spell the same string.
                    if let (Some(extra), Some((text, _))) = (cell.zerowidth(), &mut current) {
                        text.extend(extra);
                    }
                }
                if let Some((text, s)) = current.take() {
                    runs.push(run_json(text, s));
                }
                Value::Array(runs)
            })
            .collect();
        Value::Array(rows)
    }

    /// Remembers the colours an attached terminal reported (see [`color_answers`]), to answer
    /// the program's colour queries with them while no client is attached.
    pub fn learn_colors(&mut self, bytes: &[u8]) {
        let answers = color_answers(bytes);
        if !answers.is_empty() {
            self.listener.colors.lock().extend(answers);
        }
    }

    /// A full redraw that puts a fresh terminal into the state of this model (spec §5): the
    /// primary screen, and over it the alternate screen when the program is in one, each with
    /// its attributes and saved cursor; the scroll region, origin mode and autowrap; the modes
    /// that are on (bracketed paste, cursor keys, the one mouse tracking mode and its
    /// encodings, focus, keypad); cursor style, title, character sets, the cursor with its
    /// pen and pending wrap, and cursor visibility. Built from the model, not a replay of the
    /// output.
    ///
    /// It takes `&mut self` only to read the primary screen under the alternate one (see
    /// [`Screen::primary_screen`]); the model is the same afterwards.
    pub fn redraw(&mut self) -> Vec<u8> {
        self.end_turn();
        let mode = *self.term.mode();
        let cols = self.cols();
        let mut out: Vec<u8> = Vec::with_capacity(2 * self.rows() * (cols + 16) + 256);
        out.extend_from_slice(REDRAW_START);
        if mode.contains(TermMode::ALT_SCREEN) {
            // Paint the primary screen first so that when the program leaves the alternate
            // screen the terminal shows the pane's primary screen, not its own stale one, with
            // the cursor where the model puts it. `?1049h` saves that cursor (with its pen and
            // character sets, which leaving restores, as the model does) and switches; the
            // alternate screen is then painted from the known start again.
            let (rows, cursor) = self.primary_screen();
            paint(&rows, cols, &mut out);
            place_cursor(&cursor, &rows, cols, 0, &mut out);
            out.extend_from_slice(b"\x1b[?1049h\x1b[0m\x1b(B\x1b)B\x1b*B\x1b+B\x1b[H\x1b[2J");
        }
        let grid = self.term.grid();
        let rows: Vec<&Row<Cell>> = (0..self.rows()).map(|r| &grid[Line(r as i32)]).collect();
        paint(&rows, cols, &mut out);
        // The cursor `DECRC` of this screen returns to (`DECSC` also saves pen and charsets).
        place_cursor(&grid.saved_cursor, &rows, cols, 0, &mut out);
        out.extend_from_slice(b"\x1b7\x1b[0m\x1b(B\x1b)B\x1b*B\x1b+B");
        // Setting the scroll region and origin mode both home the cursor, so they come before
        // the cursor is placed.
        let mut origin_top = 0;
        if let Some((top, bottom)) = self.tracked.scroll_region {
            out.extend_from_slice(format!("\x1b[{};{}r", top + 1, bottom).as_bytes());
            if mode.contains(TermMode::ORIGIN) {
                origin_top = top;
            }
        }
        let set = |out: &mut Vec<u8>, on: bool, code: &str| {
            out.extend_from_slice(format!("\x1b[?{code}{}", if on { 'h' } else { 'l' }).as_bytes())
        };
        if mode.contains(TermMode::ORIGIN) {
            set(&mut out, true, "6");
        }
        if !mode.contains(TermMode::LINE_WRAP) {
            set(&mut out, false, "7");
        }
        set(&mut out, mode.contains(TermMode::BRACKETED_PASTE), "2004");
        set(&mut out, mode.contains(TermMode::APP_CURSOR), "1");
        self.mouse_modes(&mut out);
        set(&mut out, mode.contains(TermMode::FOCUS_IN_OUT), "1004");
        out.extend_from_slice(if mode.contains(TermMode::APP_KEYPAD) {
            b"\x1b="
        } else {
            b"\x1b>"
        });
        // The cursor shape and the title only when the program set them: the outer terminal
        // keeps its own otherwise (a shell that never set a title must not blank the
        // window's), and the client puts the title back on detach.
        if self.tracked.cursor_style_set {
            let style = self.term.cursor_style();
            let shape = match style.shape {
                CursorShape::Block | CursorShape::HollowBlock | CursorShape::Hidden => 1,
                CursorShape::Underline => 3,
                CursorShape::Beam => 5,
            } + u8::from(!style.blinking);
            out.extend_from_slice(format!("\x1b[{shape} q").as_bytes());
        }
        let title: String = self.title.chars().filter(|c| !c.is_control()).collect();
        if !title.is_empty() {
            out.extend_from_slice(format!("\x1b]2;{title}\x07").as_bytes());
        }
        let grid = self.term.grid();
        let rows: Vec<&Row<Cell>> = (0..self.rows()).map(|r| &grid[Line(r as i32)]).collect();
        place_cursor(&grid.cursor, &rows, cols, origin_top, &mut out);
        // The character set slot in use last: ASCII was in every slot while the screens were
        // painted, so the cells' characters were drawn as stored.
        out.extend_from_slice(match self.tracked.active_charset {
            CharsetIndex::G0 => b"\x0f",
            CharsetIndex::G1 => b"\x0e",
            CharsetIndex::G2 => b"\x1bn",
            CharsetIndex::G3 => b"\x1bo",
        });
        set(&mut out, mode.contains(TermMode::SHOW_CURSOR), "25");
        out
    }

    /// A redraw for a client whose terminal is smaller than the pane (`rows` x `cols`, at
    /// least one of them smaller): the part of the screen around the cursor, as tmux shows a
    /// smaller client, and on the last row a line saying what is shown. Only the screen the
    /// program is on is painted, in place, and every mouse mode is turned off (the client's
    /// coordinates are not the pane's); the keyboard modes are set, so keys still reach the
    /// program as it expects.
    /// Such a client gets one of these instead of the pane's output after every change.
    pub fn cropped_redraw(&mut self, rows: u16, cols: u16) -> Vec<u8> {
        self.end_turn();
        let (pane_rows, pane_cols) = (self.rows(), self.cols());
        let shown_rows = usize::from(rows.max(2)) - 1;
        let shown_rows = shown_rows.min(pane_rows);
        let shown_cols = usize::from(cols.max(1)).min(pane_cols);
        let grid = self.term.grid();
        let cursor = grid.cursor.point;
        let (cursor_row, cursor_col) = (cursor.line.0.max(0) as usize, cursor.column.0);
        // The window keeps the cursor in view, as near the top left as it can be.
        let top = (cursor_row + 1)
            .saturating_sub(shown_rows)
            .min(pane_rows - shown_rows);
        let left = (cursor_col + 1)
            .saturating_sub(shown_cols)
            .min(pane_cols - shown_cols);
        let mut out = Vec::with_capacity(2 * shown_rows * (shown_cols + 16) + 256);
        // Painted in place, each row erased to its end after its cells and the rows between
        // the window and the crop line erased: a cleared screen (`ED 2`) would push every
        // frame (one per change) into the outer terminal's own history (tmux's
        // scroll-on-clear, kitty, alacritty).
        out.extend_from_slice(CROPPED_START);
        for r in 0..shown_rows {
            out.extend_from_slice(format!("\x1b[{};1H", r + 1).as_bytes());
            render_cells(&grid[Line((top + r) as i32)], left, shown_cols, &mut out);
            out.extend_from_slice(b"\x1b[0m\x1b[K");
        }
        for r in shown_rows..usize::from(rows.max(2)) - 1 {
            out.extend_from_slice(format!("\x1b[{};1H\x1b[K", r + 1).as_bytes());
        }
        let note = format!(
            "[pane {pane_rows}x{pane_cols}, this terminal {rows}x{cols}: rows {}-{} and columns \
             {}-{} shown]",
            top + 1,
            top + shown_rows,
            left + 1,
            left + shown_cols
        );
        let note: String = note.chars().take(usize::from(cols.max(1))).collect();
        out.extend_from_slice(
            format!(
                "\x1b[{};1H\x1b[K\x1b[7m{note}\x1b[0m",
                usize::from(rows.max(2))
            )
            .as_bytes(),
        );
        let mode = *self.term.mode();
        let set = |out: &mut Vec<u8>, on: bool, code: &str| {
            out.extend_from_slice(format!("\x1b[?{code}{}", if on { 'h' } else { 'l' }).as_bytes())
        };
        set(&mut out, mode.contains(TermMode::BRACKETED_PASTE), "2004");
        set(&mut out, mode.contains(TermMode::APP_CURSOR), "1");
        // Every mouse mode is turned off, not just left unset: this client may have followed
        // the output (or a full redraw) with a mouse mode on before it became the smaller
        // one, and the program turning it off reaches it only through these redraws. Left
        // on, a click would type its report into whatever reads the keys next.
        out.extend_from_slice(CROPPED_MOUSE_OFF);
        set(&mut out, mode.contains(TermMode::FOCUS_IN_OUT), "1004");
        out.extend_from_slice(if mode.contains(TermMode::APP_KEYPAD) {
            b"\x1b="
        } else {
            b"\x1b>"
        });
        out.extend_from_slice(sgr_for(&grid.cursor.template).as_bytes());
        out.extend_from_slice(
            format!("\x1b[{};{}H", cursor_row - top + 1, cursor_col - left + 1).as_bytes(),
        );
        set(&mut out, mode.contains(TermMode::SHOW_CURSOR), "25");
        out
    }

    /// The mouse modes that are on, and only those. Resetting any of `?1000`, `?1002` or
    /// `?1003` turns all mouse tracking off in xterm and tmux, so the tracking mode that is on
    /// is set alone (the model keeps at most one); the encodings that are off are reset before
    /// the one that is on is set, because resetting an encoding may clear the others.
    fn mouse_modes(&self, out: &mut Vec<u8>) {
        let mode = *self.term.mode();
        let tracking = [
            (TermMode::MOUSE_REPORT_CLICK, "1000"),
            (TermMode::MOUSE_DRAG, "1002"),
            (TermMode::MOUSE_MOTION, "1003"),
        ];
        match tracking.iter().find(|(flag, _)| mode.contains(*flag)) {
            Some((_, code)) => out.extend_from_slice(format!("\x1b[?{code}h").as_bytes()),
            None => out.extend_from_slice(b"\x1b[?1000l"),
        }
        let encodings = [
            (mode.contains(TermMode::SGR_MOUSE), "1006"),
            (mode.contains(TermMode::UTF8_MOUSE), "1005"),
            (self.tracked.urxvt_mouse, "1015"),
        ];
        for (on, code) in encodings.iter().filter(|(on, _)| !on) {
            out.extend_from_slice(
                format!("\x1b[?{code}{}", if *on { 'h' } else { 'l' }).as_bytes(),
            );
        }
        for (_, code) in encodings.iter().filter(|(on, _)| *on) {
            out.extend_from_slice(format!("\x1b[?{code}h").as_bytes());
        }
    }

    /// The primary screen's visible rows and cursor while the alternate screen is active.
    ///
    /// alacritty_terminal keeps the inactive grid private; `swap_alt` is its one public door.
    /// Swapping to the primary screen changes nothing but which grid is active; swapping back
    /// clears the alternate grid, moves its cursor and sets the primary's saved cursor to its
    /// cursor. The alternate grid (no history: the core gives it none) and its cursors are
    /// therefore copied first and put back after. The primary's saved cursor equals its
    /// cursor while the alternate screen is active (entering it set them equal, and output
    /// cannot move either until it is left), so the model is unchanged; the one exception is a
    /// resize in the alternate screen, whose reflow moves the primary's cursor but only clamps
    /// its saved cursor, which the swap back then sets to the moved cursor.
    fn primary_screen(&mut self) -> (Vec<Row<Cell>>, Cursor<Cell>) {
        self.on_primary(|screen| {
            let grid = screen.term.grid();
            let rows = (0..grid.screen_lines())
                .map(|r| grid[Line(r as i32)].clone())
                .collect();
            (rows, grid.cursor.clone())
        })
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

/// A cropped redraw's start: [`REDRAW_START`] without its clear, the window painted in place.
const CROPPED_START: &[u8] =
    b"\x1b[0m\x1b[?1049l\x1b[r\x1b[?6l\x1b[?7h\x1b(B\x1b)B\x1b*B\x1b+B\x0f\x1b[?25l";

/// What a cropped redraw turns off: every mouse tracking mode and every mouse encoding.
const CROPPED_MOUSE_OFF: &[u8] =
    b"\x1b[?1003l\x1b[?1002l\x1b[?1000l\x1b[?1006l\x1b[?1015l\x1b[?1005l";

/// Every redraw starts with these bytes (a known starting point: attributes reset, the primary
/// screen, whole-screen scrolling, absolute cursor addressing, autowrap, ASCII in every
/// character set slot and G0 active, cursor hidden, screen cleared), so a reader of an attach
/// stream can tell a redraw from program output.
pub const REDRAW_START: &[u8] =
    b"\x1b[0m\x1b[?1049l\x1b[r\x1b[?6l\x1b[?7h\x1b(B\x1b)B\x1b*B\x1b+B\x0f\x1b[?25l\x1b[H\x1b[2J";

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

/// Paints rows top to bottom on a cleared screen, each with its attributes.
fn paint<R: Borrow<Row<Cell>>>(rows: &[R], cols: usize, out: &mut Vec<u8>) {
    for (r, row) in rows.iter().enumerate() {
        out.extend_from_slice(format!("\x1b[{};1H", r + 1).as_bytes());
        render_row(row.borrow(), cols, out);
        out.extend_from_slice(b"\x1b[0m");
    }
}

/// Puts the terminal's cursor where `cursor` is, with its pending wrap, character sets and
/// pen. `origin_top` is the scroll region's top when origin mode makes positions relative to
/// it. A pending wrap (the cursor after a character in the last column) cannot be set by a
/// cursor movement, so the last column's character is printed again, which sets it.
fn place_cursor<R: Borrow<Row<Cell>>>(
    cursor: &Cursor<Cell>,
    rows: &[R],
    cols: usize,
    origin_top: usize,
    out: &mut Vec<u8>,
) {
    let row = cursor.point.line.0.max(0) as usize;
    let col = cursor.point.column.0;
    let screen_row = row.saturating_sub(origin_top) + 1;
    let wrap_cell = rows
        .get(row)
        .filter(|_| cursor.input_needs_wrap && cols > 0 && col + 1 == cols)
        .map(|cells| {
            let cells: &Row<Cell> = cells.borrow();
            let last = &cells[Column(cols - 1)];
            if last.flags.contains(Flags::WIDE_CHAR_SPACER) && cols > 1 {
                (cols - 2, &cells[Column(cols - 2)])
            } else {
                (cols - 1, last)
            }
        });
    match wrap_cell {
        Some((at, cell)) => {
            out.extend_from_slice(format!("\x1b[{screen_row};{}H", at + 1).as_bytes());
            out.extend_from_slice(sgr_for(cell).as_bytes());
            push_cell_text(cell, out);
        }
        None => out.extend_from_slice(format!("\x1b[{screen_row};{}H", col + 1).as_bytes()),
    }
    for (index, designator) in [
        (CharsetIndex::G0, '('),
        (CharsetIndex::G1, ')'),
        (CharsetIndex::G2, '*'),
        (CharsetIndex::G3, '+'),
    ] {
        if cursor.charsets[index] == StandardCharset::SpecialCharacterAndLineDrawing {
            out.extend_from_slice(format!("\x1b{designator}0").as_bytes());
        }
    }
    out.extend_from_slice(sgr_for(&cursor.template).as_bytes());
}

fn push_cell_text(cell: &Cell, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(shown_char(cell).encode_utf8(&mut buf).as_bytes());
    if let Some(extra) = cell.zerowidth() {
        for ch in extra {
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// One row with SGR attributes, up to its last cell that is not a default blank.
fn render_row(row: &Row<Cell>, cols: usize, out: &mut Vec<u8>) {
    let mut last_sgr: Option<String> = None;
    // Stop at the last non-blank cell so a redraw does not paint trailing default blanks.
    let mut end = cols;
    while end > 0 {
        let cell = &row[Column(end - 1)];
        if shown_char(cell) == ' ' && cell_style(cell) == cell_style(&Cell::default()) {
            end -= 1;
        } else {
            break;
        }
    }
    for col in 0..end {
        let cell = &row[Column(col)];
        if cell
            .flags
            .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
        {
            continue;
        }
        let sgr = sgr_for(cell);
        if last_sgr.as_deref() != Some(sgr.as_str()) {
            out.extend_from_slice(sgr.as_bytes());
            last_sgr = Some(sgr);
        }
        push_cell_text(cell, out);
    }
}

/// Renders `width` cells of `row` from column `left`: a wide character cut by either edge is
/// shown as a blank, so nothing is drawn outside the window.
fn render_cells(row: &Row<Cell>, left: usize, width: usize, out: &mut Vec<u8>) {
    let mut last_sgr: Option<String> = None;
    for col in left..left + width {
        let cell = &row[Column(col)];
        let sgr = sgr_for(cell);
        if last_sgr.as_deref() != Some(sgr.as_str()) {
            out.extend_from_slice(sgr.as_bytes());
            last_sgr = Some(sgr);
        }
        let spacer = cell
            .flags
            .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER);
        let cut_wide = cell.flags.contains(Flags::WIDE_CHAR) && col + 1 == left + width;
        if (spacer && col == left) || cut_wide {
            out.push(b' ');
        } else if !spacer {
            push_cell_text(cell, out);
        }
    }
}

fn run_json(text: String, style: Value) -> Value {
    let mut obj = json!({ "text": text });
    if let (Value::Object(map), Value::Object(style)) = (&mut obj, style) {
        map.extend(style);
    }
    obj
}

fn cell_style(cell: &Cell) -> Value {
    let mut style = serde_json::Map::new();
    if let Some(fg) = color_json(cell.fg) {
        style.insert("fg".into(), fg);
    }
    if let Some(bg) = color_json(cell.bg) {
        style.insert("bg".into(), bg);
    }
    for (flag, name) in FLAG_NAMES {
        if cell.flags.contains(*flag) {
            style.insert((*name).into(), Value::Bool(true));
        }
    }
    if cell.flags.intersects(Flags::ALL_UNDERLINES) {
        style.insert("underline".into(), Value::Bool(true));
    }
    if let Some((_, name)) = UNDERLINE_STYLES
        .iter()
        .find(|(flag, _, _)| cell.flags.contains(*flag))
        .map(|(_, code, name)| (code, name))
    {
        style.insert("underline_style".into(), json!(name));
    }
    if let Some(color) = cell.underline_color().and_then(color_json) {
        style.insert("underline_color".into(), color);
    }
    Value::Object(style)
}

/// Underline styles other than the single line: the flag, its SGR (`4:n`) and the name a
/// snapshot's `cells` give it.
const UNDERLINE_STYLES: &[(Flags, &str, &str)] = &[
    (Flags::DOUBLE_UNDERLINE, "4:2", "double"),
    (Flags::UNDERCURL, "4:3", "curly"),
    (Flags::DOTTED_UNDERLINE, "4:4", "dotted"),
    (Flags::DASHED_UNDERLINE, "4:5", "dashed"),
];

const FLAG_NAMES: &[(Flags, &str)] = &[
    (Flags::BOLD, "bold"),
    (Flags::DIM, "dim"),
    (Flags::ITALIC, "italic"),
    (Flags::INVERSE, "inverse"),
    (Flags::HIDDEN, "hidden"),
    (Flags::STRIKEOUT, "strikeout"),
];

fn color_json(color: Color) -> Option<Value> {
    match color {
        Color::Named(named) => named_index(named).map(|i| json!(i)),
        Color::Indexed(i) => Some(json!(i)),
        Color::Spec(rgb) => Some(json!(format!("#{:02x}{:02x}{:02x}", rgb.r, rgb.g, rgb.b))),
    }
}

/// The palette index of a named colour, `None` for the default foreground/background.
fn named_index(named: NamedColor) -> Option<u8> {
    let n = named as usize;
    if n < 16 {
        return Some(n as u8);
    }
    match named {
        NamedColor::DimBlack => Some(0),
        NamedColor::DimRed => Some(1),
        NamedColor::DimGreen => Some(2),
        NamedColor::DimYellow => Some(3),
        NamedColor::DimBlue => Some(4),
        NamedColor::DimMagenta => Some(5),
        NamedColor::DimCyan => Some(6),
        NamedColor::DimWhite => Some(7),
        _ => None,
    }
}

fn sgr_for(cell: &Cell) -> String {
    let mut params: Vec<String> = vec!["0".into()];
    let flags = cell.flags;
    for (flag, code) in [
        (Flags::BOLD, "1"),
        (Flags::DIM, "2"),
        (Flags::ITALIC, "3"),
        (Flags::UNDERLINE, "4"),
        (Flags::INVERSE, "7"),
        (Flags::HIDDEN, "8"),
        (Flags::STRIKEOUT, "9"),
    ] {
        if flags.contains(flag) {
            params.push(code.into());
        }
    }
    // A styled underline is written with its sub-parameter; a terminal that does not know it
    // shows a single underline, where a bare `4` would lose the style for every terminal.
    for (flag, code, _) in UNDERLINE_STYLES {
        if flags.contains(*flag) {
            params.push((*code).into());
        }
    }
    push_color(&mut params, cell.fg, 30, 90, 38);
    push_color(&mut params, cell.bg, 40, 100, 48);
    if let Some(color) = cell.underline_color() {
        push_underline_color(&mut params, color);
    }
    format!("\x1b[{}m", params.join(";"))
}

/// `SGR 58`, which has no short forms: named colours are written as their palette index.
fn push_underline_color(params: &mut Vec<String>, color: Color) {
    match color {
        Color::Named(named) => {
            if let Some(i) = named_index(named) {
                params.push(format!("58;5;{i}"));
            }
        }
        Color::Indexed(i) => params.push(format!("58;5;{i}")),
        Color::Spec(rgb) => params.push(format!("58;2;{};{};{}", rgb.r, rgb.g, rgb.b)),
    }
}

fn push_color(params: &mut Vec<String>, color: Color, base: u8, bright: u8, extended: u8) {
    match color {
        Color::Named(named) => match named_index(named) {
            Some(i) if i < 8 => params.push((base + i).to_string()),
            Some(i) => params.push((bright + i - 8).to_string()),
            None => {}
        },
        Color::Indexed(i) => params.push(format!("{extended};5;{i}")),
        Color::Spec(rgb) => params.push(format!("{extended};2;{};{};{}", rgb.r, rgb.g, rgb.b)),
    }
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
    fn redraw_reproduces_the_screen() {
        let mut s = Screen::new(4, 10, 0);
        s.apply(b"\x1b[?1049h\x1b[2;3H\x1b[7mX\x1b[0m y\x1b[?1h");
        let mut copy = Screen::new(4, 10, 0);
        let redraw = s.redraw();
        copy.apply(&redraw);
        assert_eq!(copy.lines(), s.lines());
        assert_eq!(copy.modes(), s.modes());
        assert_eq!(copy.cursor(), s.cursor());
        assert_eq!(copy.ansi_lines(), s.ansi_lines());
    }

    /// Builds the redraw of `model`, feeds it to a fresh model of the same size and checks
    /// that the copy is in the same state: lines, attributes, cursor (with pending wrap),
    /// saved cursor, modes, scroll region and character sets. Returns the copy.
    fn copy_through_redraw(model: &mut Screen) -> Screen {
        let before = model.lines();
        let redraw = model.redraw();
        assert_eq!(
            model.lines(),
            before,
            "building the redraw changed the model"
        );
        let mut copy = Screen::new(model.rows() as u16, model.cols() as u16, 0);
        copy.apply(&redraw);
        assert_same(model, &mut copy);
        copy
    }

    fn assert_same(model: &mut Screen, copy: &mut Screen) {
        assert_eq!(copy.lines(), model.lines(), "lines");
        assert_eq!(copy.ansi_lines(), model.ansi_lines(), "attributes");
        assert_eq!(copy.cells(), model.cells(), "cells");
        assert_eq!(copy.cursor(), model.cursor(), "cursor");
        let (grid, copy_grid) = (model.term.grid(), copy.term.grid());
        assert_eq!(
            copy_grid.cursor.input_needs_wrap, grid.cursor.input_needs_wrap,
            "pending wrap"
        );
        assert_eq!(copy_grid.cursor.charsets, grid.cursor.charsets, "charsets");
        assert_eq!(copy_grid.cursor.template, grid.cursor.template, "pen");
        assert_eq!(
            copy_grid.saved_cursor.point, grid.saved_cursor.point,
            "saved cursor"
        );
        assert_eq!(copy.term.mode(), model.term.mode(), "modes");
        assert_eq!(copy.tracked, model.tracked, "scroll region, charset, 1015");
    }

    /// Feeds the same bytes to both and checks they stay the same.
    fn feed_both(model: &mut Screen, copy: &mut Screen, bytes: &[u8]) {
        model.apply(bytes);
        copy.apply(bytes);
        assert_same(model, copy);
    }

    #[test]
    fn redraw_paints_the_primary_screen_under_the_alternate_one() {
        let mut model = Screen::new(6, 20, 100);
        model.apply(b"$ vim notes\r\n\x1b[1;32mprimary\x1b[0m line\r\n$ ");
        model.apply(b"\x1b[?1049h\x1b[H\x1b[2J\x1b[7m~ alt ~\x1b[0m\x1b[4;5H");
        let mut copy = copy_through_redraw(&mut model);
        assert_eq!(copy.lines()[0], "~ alt ~");
        // The program quits: both leave the alternate screen and must show the same primary
        // screen with the cursor where the prompt left it.
        feed_both(&mut model, &mut copy, b"\x1b[?1049l");
        assert_eq!(copy.lines()[..3], ["$ vim notes", "primary line", "$"]);
        assert_eq!(copy.cursor(), (2, 2, true));
        // The model itself still had its alternate screen after the redraw was built.
        let mut again = Screen::new(6, 20, 100);
        again.apply(b"\x1b[?1049h\x1b[7m~ alt ~");
        let _ = again.redraw();
        assert_eq!(again.lines()[0], "~ alt ~");
    }

    #[test]
    fn the_primary_cursor_pen_and_charsets_do_not_leak_into_the_alternate_screen() {
        let mut model = Screen::new(4, 20, 0);
        // The primary cursor has the line-drawing set in G0 and a red pen; the alternate
        // screen (whose cursor inherits both) goes back to ASCII and the default pen.
        model.apply(b"$ \x1b(0\x1b[31m\x1b[?1049h\x1b(B\x1b[0mqqq");
        let mut copy = copy_through_redraw(&mut model);
        assert_eq!(copy.lines()[0], "  qqq");
        // Leaving the alternate screen brings back the primary cursor's pen and charsets.
        feed_both(&mut model, &mut copy, b"\x1b[?1049lq");
        assert_eq!(copy.lines()[0], "$ \u{2500}");
    }

    #[test]
    fn redraw_sets_only_the_mouse_mode_that_is_on_with_its_encoding() {
        let mut model = Screen::new(4, 20, 0);
        model.apply(b"\x1b[?1002h\x1b[?1006h\x1b[?1015h");
        let redraw = model.redraw();
        let text = String::from_utf8_lossy(&redraw);
        // Resetting any tracking mode turns all tracking off in xterm and tmux.
        for off in ["?1000l", "?1003l", "?1002l", "?1006l", "?1015l"] {
            assert!(!text.contains(off), "redraw resets {off}: {text:?}");
        }
        assert!(text.contains("\x1b[?1002h") && text.contains("\x1b[?1006h"));
        assert!(text.contains("\x1b[?1015h"));
        let copy = copy_through_redraw(&mut model);
        assert!(copy
            .term
            .mode()
            .contains(TermMode::MOUSE_DRAG | TermMode::SGR_MOUSE));
        assert!(copy.tracked.urxvt_mouse);
    }

    /// A zero-width character (a program may print U+200B after its drawn cursor) is in the
    /// cells' text where it is in the row's text, so the two views spell the same row.
    #[test]
    fn cells_spell_a_rows_zero_width_characters_as_its_text_does() {
        let mut model = Screen::new(3, 20, 0);
        model.apply("> draft\x1b[7m \x1b[0m\u{200b}end".as_bytes());
        assert_eq!(model.lines()[0], "> draft \u{200b}end");
        let cells = model.cells();
        let spelled: String = cells[0]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|run| run["text"].as_str())
            .collect();
        assert_eq!(spelled.trim_end(), model.lines()[0]);
    }

    #[test]
    fn tabs_are_rendered_as_blank_cells_not_tab_characters() {
        let mut model = Screen::new(3, 20, 0);
        model.apply(b"a\tb\r\n\x1b[4mx\ty");
        assert_eq!(model.lines()[0], "a       b");
        assert_eq!(model.lines()[1], "x       y");
        assert!(!model.ansi_lines().concat().contains('\t'));
        assert!(!model.cells().to_string().contains("\\t"));
        assert!(!model.redraw().contains(&b'\t'));
        copy_through_redraw(&mut model);
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
    fn redraw_restores_the_scroll_region_and_origin_mode() {
        let mut model = Screen::new(6, 20, 0);
        model.apply(b"\x1b[1;1Hheader\x1b[6;1Hfooter\x1b[2;5r\x1b[5;1Hbody");
        let mut copy = copy_through_redraw(&mut model);
        assert_eq!(copy.tracked.scroll_region, Some((1, 5)));
        // Later output scrolls only the region: header and footer stay put in both.
        feed_both(&mut model, &mut copy, b"\r\none\r\ntwo\r\nthree\r\nfour");
        assert_eq!(copy.lines()[0], "header");
        assert_eq!(copy.lines()[5], "footer");
        // Origin mode: positions are relative to the region's top.
        model.apply(b"\x1b[?6h\x1b[2;3H");
        let mut copy = copy_through_redraw(&mut model);
        feed_both(&mut model, &mut copy, b"X\x1b[1;1HY");
        assert_eq!(copy.lines()[1].chars().next(), Some('Y'));
    }

    #[test]
    fn a_resize_to_the_same_size_keeps_the_scroll_region() {
        // The core keeps its region when the size does not change: the record must too, or
        // the redraw drops the region and lines fed at the bottom are taken for scrolling
        // into history (the history property test found it).
        let mut model = Screen::new(6, 20, 100);
        model.apply(b"header\x1b[6;1Hfooter\x1b[2;5r\x1b[5;1H");
        model.resize(6, 20);
        assert_eq!(model.tracked.scroll_region, Some((1, 5)));
        let mut copy = copy_through_redraw(&mut model);
        let lines: Vec<u8> = (0..40)
            .flat_map(|n| format!("{n}\r\n").into_bytes())
            .collect();
        feed_both(&mut model, &mut copy, &lines);
        for screen in [&mut model, &mut copy] {
            assert_eq!(screen.lines()[0], "header");
            assert_eq!(screen.lines()[5], "footer");
            assert_eq!(screen.history_len(), 0);
        }
        // A resize that changes the size resets the region in both.
        model.resize(7, 20);
        assert_eq!(model.tracked.scroll_region, None);
    }

    #[test]
    fn redraw_restores_a_pending_wrap_after_a_full_width_line() {
        let mut model = Screen::new(4, 10, 0);
        model.apply(b"0123456789");
        assert!(model.term.grid().cursor.input_needs_wrap);
        let mut copy = copy_through_redraw(&mut model);
        // The next character goes to the next line in both, not over the last column.
        feed_both(&mut model, &mut copy, b"X");
        assert_eq!(copy.lines()[..2], ["0123456789", "X"]);
        // The same with a wide character ending in the last column.
        let mut model = Screen::new(4, 10, 0);
        model.apply("12345678\u{4e16}".as_bytes());
        let mut copy = copy_through_redraw(&mut model);
        feed_both(&mut model, &mut copy, b"Y");
        assert_eq!(copy.lines()[1], "Y");
    }

    #[test]
    fn redraw_restores_the_saved_cursor_and_the_pen() {
        let mut model = Screen::new(5, 20, 0);
        model.apply(b"\x1b[3;4H\x1b[1;31m\x1b7\x1b[0m\x1b[1;1Htop\x1b[4;38;5;200m");
        let mut copy = copy_through_redraw(&mut model);
        feed_both(&mut model, &mut copy, b"pen\x1b8saved");
        assert_eq!(copy.lines()[2], "   saved");
    }

    #[test]
    fn redraw_keeps_underline_styles_underline_colour_and_charsets() {
        let mut model = Screen::new(4, 30, 0);
        model.apply(b"\x1b[4:2md\x1b[4:3;58;2;1;2;3mc\x1b[4:4;58;5;9mo\x1b[4:5ma\x1b[0m");
        let run = &model.cells()[0][1];
        assert_eq!(run["underline_style"], "curly");
        assert_eq!(run["underline_color"], "#010203");
        assert!(model.ansi_lines()[0].contains("4:3"));
        let mut copy = copy_through_redraw(&mut model);
        // The line-drawing set designated into G1 and shifted in stays in use.
        feed_both(&mut model, &mut copy, b"\r\n\x1b)0\x0eqx");
        assert_eq!(copy.lines()[1], "\u{2500}\u{2502}");
        let mut copy = copy_through_redraw(&mut model);
        feed_both(&mut model, &mut copy, b"q\x0fq");
        assert_eq!(copy.lines()[1], "\u{2500}\u{2502}\u{2500}q");
    }

    #[test]
    fn colour_answers_are_read_in_every_form_terminals_send() {
        let answers = color_answers(
            b"x\x1b]11;rgb:2828/2c2c/3434\x1b\\\x1b]10;rgb:ff/80/0\x07\x1b]4;1;rgb:cd/00/00\x1b\\\x1b]11;?\x07\x1b]10;bad\x07",
        );
        assert_eq!(
            answers,
            vec![
                (
                    257,
                    Rgb {
                        r: 0x28,
                        g: 0x2c,
                        b: 0x34
                    }
                ),
                (
                    256,
                    Rgb {
                        r: 0xff,
                        g: 0x80,
                        b: 0
                    }
                ),
                (
                    1,
                    Rgb {
                        r: 0xcd,
                        g: 0,
                        b: 0
                    }
                ),
            ]
        );
        // Once learned, the program's query is answered with the terminal's colour.
        let mut s = Screen::new(2, 10, 0);
        assert_eq!(
            s.apply(b"\x1b]11;?\x1b\\"),
            vec![b"\x1b]11;rgb:0000/0000/0000\x1b\\".to_vec()]
        );
        s.learn_colors(b"\x1b]11;rgb:2828/2c2c/3434\x1b\\");
        assert_eq!(
            s.apply(b"\x1b]11;?\x1b\\"),
            vec![b"\x1b]11;rgb:2828/2c2c/3434\x1b\\".to_vec()]
        );
    }

    #[test]
    fn history_rows_are_reflowed_by_a_resize_as_the_core_reflows_them() {
        // Rows that went to the compact store are given back to the core for a resize, so a
        // wrapped line in history is re-wrapped to the new width exactly as if the core had
        // kept it, and a taller screen pulls history rows back into view.
        let mut compact = Screen::new(3, 10, 100);
        let mut core = Screen::with_core_history(3, 10, 100);
        let output = b"first\r\n0123456789abcdefghij\x1b[1;31mKLMNO\x1b[0m\r\nx\r\ny\r\nz";
        compact.apply(output);
        core.apply(output);
        assert_eq!(compact.history_len(), 4);
        assert_eq!(
            compact.scrollback(0, 3).1,
            ["first", "0123456789", "abcdefghij"]
        );
        for (rows, cols) in [(3, 25), (6, 25), (2, 4), (8, 10)] {
            compact.resize(rows, cols);
            core.resize(rows, cols);
            assert_eq!(compact.scrollback(0, 100), core.scrollback(0, 100));
            assert_eq!(compact.ansi_lines(), core.ansi_lines());
            assert_eq!(compact.cursor(), core.cursor());
        }
        compact.resize(4, 25);
        assert_eq!(
            compact.scrollback(0, 100).1,
            ["first", "0123456789abcdefghijKLMNO", "x", "y", "z"]
        );
    }

    #[test]
    fn the_byte_cap_bounds_the_history_and_drops_the_oldest_lines() {
        let mut screen = Screen::with_history_cap(2, 40, 10_000, 4096);
        for i in 0..2000 {
            screen.apply(format!("line {i:04} {}\r\n", "=".repeat(20)).as_bytes());
        }
        let held = screen.history_len();
        assert!(held < 2000 && held > 50, "held {held} lines");
        assert!(screen.history.bytes() <= 4096);
        let (total, lines) = screen.scrollback(0, 1);
        assert_eq!(total, held + 2);
        // The screen shows the last line printed (1999) and an empty line; the oldest line
        // kept is the one `held` lines before it.
        assert_eq!(
            lines[0],
            format!("line {:04} {}", 1999 - held, "=".repeat(20))
        );
        // The line cap still applies below the byte cap.
        let mut screen = Screen::with_history_cap(2, 40, 30, 1 << 20);
        for i in 0..100 {
            screen.apply(format!("{i}\r\n").as_bytes());
        }
        assert_eq!(screen.history_len(), 30);
        assert_eq!(screen.scrollback(0, 1).1, ["69"]);
    }

    #[test]
    fn clearing_the_history_drops_the_compact_rows_too() {
        let mut screen = Screen::new(2, 10, 100);
        screen.apply(b"a\r\nb\r\nc\r\nd\r\n");
        assert_eq!(screen.history_len(), 3);
        // In the alternate screen `CSI 3 J` clears the alternate grid's history only.
        screen.apply(b"\x1b[?1049h\x1b[3J\x1b[?1049l");
        assert_eq!(screen.history_len(), 3);
        screen.apply(b"\x1b[3J");
        assert_eq!(screen.history_len(), 0);
        screen.apply(b"e\r\nf\r\ng\r\n\x1bc");
        assert_eq!(screen.history_len(), 0);
        assert_eq!(screen.scrollback(0, 10).1, ["", ""]);
    }

    /// A 4x10 compact model and one that keeps history in the core, 300 lines each, both fed
    /// `text` in pieces of 997 bytes (lines split between them).
    fn fed_in_pieces(text: &str) -> (Screen, Screen) {
        let (mut compact, mut core) = (
            Screen::new(4, 10, 300),
            Screen::with_core_history(4, 10, 300),
        );
        for piece in text.as_bytes().chunks(997) {
            compact.apply(piece);
            core.apply(piece);
        }
        (compact, core)
    }

    #[test]
    fn plain_lines_skip_the_core_and_read_the_same() {
        // A listing split mid-line between chunks, wrapped and full-width lines among them.
        let mut text = String::new();
        for n in 0..500 {
            let line = "x".repeat(n % 23);
            text.push_str(&format!("{n} {line}\r\n"));
        }
        let (mut compact, mut core) = fed_in_pieces(&text);
        assert!(compact.rows_skipped() > 800, "{}", compact.rows_skipped());
        assert_eq!(compact.history_len(), core.history_len());
        assert_eq!(
            compact.scrollback(0, usize::MAX),
            core.scrollback(0, usize::MAX)
        );
        assert_eq!(compact.redraw(), core.redraw());
    }

    #[test]
    fn rows_stored_without_the_core_are_given_back_when_the_pane_is_quiet() {
        // `seq 2000` read as the pane host reads it: nearly every row skips the core, and the
        // memory that took (the compact store's growth, the grid's row buffers for the rows
        // it scrolled) must still be released once the pane is quiet. It was not: an idle
        // pane host kept 2.1 MiB private instead of 0.95 (the memory bench, target 1).
        // The last screenful is still held back for more lines when the output stops; the
        // release gives it to the core first.
        let mut s = Screen::new(24, 80, 2000);
        let text: String = (1..=2000).map(|n| format!("{n}\r\n")).collect();
        for read in text.as_bytes().chunks(4096) {
            s.apply_deferring(read);
        }
        assert!(s.holds_output());
        assert!(s.has_spare_rows());
        assert!(s.release_spare_rows());
        assert!(!s.holds_output());
        assert!(s.rows_skipped() > 1900, "{}", s.rows_skipped());
        assert!(!s.has_spare_rows());
        assert_eq!(s.history_len(), 1977);
        assert_eq!(s.lines()[22], "2000");
    }

    #[test]
    fn reads_holding_less_than_a_screenful_still_skip_the_core() {
        // Long coloured lines closed the way chalk closes them, read 1000 bytes at a time
        // by a 24-row model: no read holds a screenful of rows, so each read's lines are
        // held for the next reads'. Given to the core instead, a read's lines left the core
        // inside the next read's first line, and not one row was stored without it.
        let mut text = String::new();
        for n in 0..600 {
            let word = "x".repeat(60 + n % 50);
            text.push_str(&format!(
                "{n} \x1b[1;3{}m{word}\x1b[22;39m \x1b[4mend\x1b[24m\r\n",
                n % 8
            ));
        }
        let (mut compact, mut core) = (
            Screen::new(24, 80, 2000),
            Screen::with_core_history(24, 80, 2000),
        );
        for read in text.as_bytes().chunks(1000) {
            compact.apply_deferring(read);
            core.apply(read);
        }
        assert!(compact.rows_skipped() > 1000, "{}", compact.rows_skipped());
        assert_eq!(compact.history_len(), core.history_len());
        assert!(compact.history_rows() == core.history_rows());
        assert_eq!(compact.ansi_lines(), core.ansi_lines());
        assert_eq!(compact.redraw(), core.redraw());
    }

    #[test]
    fn styled_lines_skip_the_core_and_keep_their_colours() {
        // Coloured words, some on a background that goes on past a wrap: the core clears the
        // row it scrolls in for the wrap with that background.
        let mut text = String::new();
        for n in 0..500 {
            let word = "x".repeat(n % 23);
            text.push_str(&format!(
                "{n} \x1b[1;38;5;{}m{word}\x1b[0m \x1b[48;2;{};0;9m{word}\x1b[m.\r\n",
                n % 256,
                n % 200
            ));
        }
        let (mut compact, mut core) = fed_in_pieces(&text);
        assert_eq!(compact.history_len(), core.history_len());
        assert!(compact.history_rows() == core.history_rows());
        assert_eq!(compact.ansi_lines(), core.ansi_lines());
        assert_eq!(compact.redraw(), core.redraw());
        // Counted once the history was read: rows are encoded only then, and only the 300
        // the line cap keeps (92 of them filled with a colour).
        let (styled, filled) = compact.styled_rows_skipped();
        assert!(styled > 1000 && filled > 50, "{styled} {filled}");
    }

    #[test]
    fn the_character_a_repeat_repeats_is_the_last_one_printed_even_in_skipped_lines() {
        // `CSI b` repeats the last character printed: here one in a line the screen could
        // store without the core, were the lines after it not all empty.
        let output = b"abc\r\n\r\n\r\n\r\n\r\n\r\n\x1b[2b";
        let (mut compact, mut core) = (
            Screen::new(3, 10, 100),
            Screen::with_core_history(3, 10, 100),
        );
        compact.apply(output);
        core.apply(output);
        assert_eq!(core.lines().last().map(String::as_str), Some("cc"));
        assert_eq!(compact.lines(), core.lines());
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
