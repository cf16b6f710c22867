//! What the model is drawn as: the attach redraw (the whole screen, or the part of it a smaller
//! terminal holds, with the modes, pen, charsets and scroll region restored) and the cells a
//! snapshot reports, with the SGR and JSON spellings of a cell's style. A file of its own
//! because it only reads the model.

use std::borrow::Borrow;

use alacritty_terminal::grid::{Cursor, Dimensions, Row};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::{
    CharsetIndex, Color, CursorShape, NamedColor, StandardCharset,
};
use serde_json::{json, Value};

use super::{shown_char, Screen};

impl Screen {
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
        self.window_redraw(rows, cols, false)
    }

    /// [`Self::cropped_redraw`], or with `status_line` the redraw for a client that draws a
    /// status line of its own on its terminal's last row: `rows` are then the rows above it,
    /// every one of them the pane's, and the terminal's last row is never written (no crop
    /// line, no erasing), so the client's status line stays. When the window is the whole pane
    /// its coordinates are the pane's, so the program's mouse modes are set as they are.
    pub fn window_redraw(&mut self, rows: u16, cols: u16, status_line: bool) -> Vec<u8> {
        self.end_turn();
        let (pane_rows, pane_cols) = (self.rows(), self.cols());
        let shown_rows = if status_line {
            usize::from(rows.max(1))
        } else {
            usize::from(rows.max(2)) - 1
        };
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
        let window_rows = if status_line {
            usize::from(rows.max(1))
        } else {
            usize::from(rows.max(2)) - 1
        };
        for r in shown_rows..window_rows {
            out.extend_from_slice(format!("\x1b[{};1H\x1b[K", r + 1).as_bytes());
        }
        let whole = top == 0 && left == 0 && shown_rows == pane_rows && shown_cols == pane_cols;
        if !status_line {
            self.crop_note(rows, cols, (top, left), (shown_rows, shown_cols), &mut out);
        }
        let mode = *self.term.mode();
        let set = |out: &mut Vec<u8>, on: bool, code: &str| {
            out.extend_from_slice(format!("\x1b[?{code}{}", if on { 'h' } else { 'l' }).as_bytes())
        };
        set(&mut out, mode.contains(TermMode::BRACKETED_PASTE), "2004");
        set(&mut out, mode.contains(TermMode::APP_CURSOR), "1");
        if status_line && whole {
            // The client's coordinates are the pane's: a click reaches the program as it
            // expects, as with a client that follows the output.
            self.mouse_modes(&mut out);
        } else {
            // Every mouse mode is turned off, not just left unset: this client may have
            // followed the output (or a full redraw) with a mouse mode on before it became the
            // smaller one, and the program turning it off reaches it only through these
            // redraws. Left on, a click would type its report into whatever reads the keys
            // next.
            out.extend_from_slice(CROPPED_MOUSE_OFF);
        }
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

    /// The crop line on a cropped client's last row: what part of the pane is shown.
    fn crop_note(
        &self,
        rows: u16,
        cols: u16,
        (top, left): (usize, usize),
        (shown_rows, shown_cols): (usize, usize),
        out: &mut Vec<u8>,
    ) {
        let (pane_rows, pane_cols) = (self.rows(), self.cols());
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
pub(super) fn render_row(row: &Row<Cell>, cols: usize, out: &mut Vec<u8>) {
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
}
