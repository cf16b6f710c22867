//! The rows that scrolled off the screen moved between the core's grid and the compact
//! [`History`]: taken from the core once the pane is quiet (or sooner, past the byte cap),
//! given back to it for a resize, and the core's spare rows freed. A file of its own because
//! it is the one place both stores of the history are touched together.

use alacritty_terminal::grid::{Dimensions, Row};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::Cell;
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::Color;

use super::{HistoryStore, Screen};

impl Screen {
    /// Brings the compact rows up to date after a chunk, normally without encoding anything:
    /// drops them all if the program cleared the history, and drops the oldest of them while
    /// the compact rows and the core's together exceed the line cap (the core drops its own).
    /// Rows scrolled off stay in the core while output arrives, so a pane that prints
    /// non-stop pays nothing for them but what the core always cost, and rows pushed past the
    /// cap are never encoded at all; [`Screen::release_spare_rows`] moves them once the pane
    /// is quiet. Only when the rows waiting in the core would take more than the byte cap at
    /// 24 bytes a cell are they moved at once, so history never holds more than about twice
    /// the byte cap whatever the line cap and however long the output lasts.
    pub(super) fn settle_history(&mut self) {
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
    pub(super) fn absorb_history(&mut self) {
        self.settle_history();
        self.move_core_rows();
    }

    /// Moves every row of the core's history into the compact store, the newest too: the
    /// tail of a run of plain lines (see [`Screen::advance`]) gives the core a newest row
    /// again at once.
    pub(super) fn move_all_core_rows(&mut self) {
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
    pub(super) fn restore_history(&mut self) {
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
    pub(super) fn mark_rows_written(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
