//! Runs of plain and styled lines: the lines a chunk of output starts with that print
//! printable text with the pen as they found it go straight into the compact history, without
//! the core's grid, when the parser is at rest there; the last screenful of a read may be held
//! back for the next read's lines to scroll off. A file of its own because it is the fast path
//! of output, with its own bookkeeping (`Run`, `RunLine`, [`PenOnlyRun`]).

use std::ops::Range;

use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::Line;
use alacritty_terminal::term::cell::Cell;
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::StandardCharset;

use crate::history::is_default_blank;
use crate::history::rows_of;
use crate::styled;
use crate::tracker::Tracker;

use super::{HistoryStore, Screen, MAX_DEFERRED};

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
pub(super) struct RunLine {
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
    pub(super) fn advance(&mut self, bytes: &[u8], defer: bool) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
