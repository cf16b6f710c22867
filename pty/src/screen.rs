//! The pane's screen model: an alacritty_terminal grid fed with every output chunk, plus what
//! belfry needs from it: plain and SGR lines, cells, modes, a full redraw for attaching clients,
//! and the answers to the program's terminal queries (SPEC §4, §5).

use std::sync::Arc;

use alacritty_terminal::event::{Event, EventListener, WindowSize};
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::{Config, TermMode};
use alacritty_terminal::vte::ansi::{self, Color, CursorShape, NamedColor, Rgb};
use alacritty_terminal::Term;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

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
}

impl EventListener for Listener {
    fn send_event(&self, event: Event) {
        let mut raised = self.raised.lock();
        match event {
            Event::PtyWrite(text) => raised.answers.push(text.into_bytes()),
            Event::ColorRequest(index, format) => raised
                .answers
                .push(format(default_color(index)).into_bytes()),
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

/// Terminal modes a snapshot reports.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Modes {
    pub alternate_screen: bool,
    pub bracketed_paste: bool,
    pub application_cursor: bool,
    pub mouse: bool,
    pub focus_events: bool,
}

/// The screen model of one pane.
pub struct Screen {
    term: Term<Listener>,
    parser: ansi::Processor,
    listener: Listener,
    title: String,
}

impl Screen {
    /// A blank screen of `rows` × `cols` keeping `scrollback` lines of history.
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Screen {
        let listener = Listener::default();
        let (rows, cols) = (usize::from(rows.max(1)), usize::from(cols.max(1)));
        *listener.size.lock() = (rows, cols);
        let config = Config {
            scrolling_history: scrollback,
            ..Config::default()
        };
        let term = Term::new(config, &TermSize { lines: rows, cols }, listener.clone());
        Screen {
            term,
            parser: ansi::Processor::new(),
            listener,
            title: String::new(),
        }
    }

    /// Feeds program output into the model. Returns the answers owed to terminal queries found
    /// in it (the caller decides whether the pane host or an attached terminal answers).
    pub fn apply(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.parser.advance(&mut self.term, bytes);
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

    pub fn resize(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = (usize::from(rows.max(1)), usize::from(cols.max(1)));
        *self.listener.size.lock() = (rows, cols);
        self.term.resize(TermSize { lines: rows, cols });
    }

    /// Clears the visible screen and the history, keeping modes.
    pub fn clear(&mut self) {
        self.parser.advance(&mut self.term, b"\x1b[H\x1b[2J\x1b[3J");
        self.listener.raised.lock().answers.clear();
    }

    pub fn title(&self) -> &str {
        &self.title
    }

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
    pub fn cursor(&self) -> (usize, usize, bool) {
        let point = self.term.grid().cursor.point;
        let visible = self.term.mode().contains(TermMode::SHOW_CURSOR);
        (point.line.0.max(0) as usize, point.column.0, visible)
    }

    /// Lines of history above the screen.
    pub fn history_len(&self) -> usize {
        self.term.grid().history_size()
    }

    /// The visible screen as plain text, trailing blanks trimmed.
    pub fn lines(&self) -> Vec<String> {
        (0..self.rows())
            .map(|r| self.line_text(Line(r as i32)))
            .collect()
    }

    /// The visible screen rendered with SGR attributes, one string per row.
    pub fn ansi_lines(&self) -> Vec<String> {
        (0..self.rows())
            .map(|r| {
                let mut out = Vec::new();
                self.render_row(Line(r as i32), &mut out);
                out.extend_from_slice(b"\x1b[0m");
                String::from_utf8_lossy(&out).into_owned()
            })
            .collect()
    }

    /// History and screen together, numbered from the oldest history line (0).
    pub fn scrollback(&self, start: usize, count: usize) -> (usize, Vec<String>) {
        let history = self.history_len();
        let total = history + self.rows();
        let end = start.saturating_add(count).min(total);
        let lines = (start.min(total)..end)
            .map(|i| self.line_text(Line(i as i32 - history as i32)))
            .collect();
        (total, lines)
    }

    fn line_text(&self, line: Line) -> String {
        let row = &self.term.grid()[line];
        let mut text = String::with_capacity(self.cols());
        for col in 0..self.cols() {
            let cell = &row[Column(col)];
            if cell
                .flags
                .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
            {
                continue;
            }
            text.push(cell.c);
            if let Some(extra) = cell.zerowidth() {
                text.extend(extra);
            }
        }
        let trimmed = text.trim_end_matches(' ').len();
        text.truncate(trimmed);
        text
    }

    /// Per-row runs of equally styled text, for adapters that judge attributes.
    pub fn cells(&self) -> Value {
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
                        Some((text, s)) if *s == style => text.push(cell.c),
                        _ => {
                            if let Some((text, s)) = current.take() {
                                runs.push(run_json(text, s));
                            }
                            current = Some((cell.c.to_string(), style));
                        }
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

    /// A full redraw that puts a fresh terminal into the state of this model: screen contents
    /// with attributes, modes (alternate screen, bracketed paste, cursor keys, mouse, focus,
    /// cursor style and visibility), title and cursor position. Built from the model, not a
    /// replay of the output.
    pub fn redraw(&self) -> Vec<u8> {
        let mode = *self.term.mode();
        let mut out: Vec<u8> = Vec::with_capacity(self.rows() * (self.cols() + 16) + 128);
        out.extend_from_slice(b"\x1b[0m");
        out.extend_from_slice(if mode.contains(TermMode::ALT_SCREEN) {
            b"\x1b[?1049h"
        } else {
            b"\x1b[?1049l"
        });
        out.extend_from_slice(b"\x1b[r\x1b[?25l\x1b[H\x1b[2J");
        for r in 0..self.rows() {
            out.extend_from_slice(format!("\x1b[{};1H", r + 1).as_bytes());
            self.render_row(Line(r as i32), &mut out);
            out.extend_from_slice(b"\x1b[0m");
        }
        let set = |out: &mut Vec<u8>, on: bool, code: &str| {
            out.extend_from_slice(format!("\x1b[?{code}{}", if on { 'h' } else { 'l' }).as_bytes())
        };
        set(&mut out, mode.contains(TermMode::BRACKETED_PASTE), "2004");
        set(&mut out, mode.contains(TermMode::APP_CURSOR), "1");
        set(
            &mut out,
            mode.contains(TermMode::MOUSE_REPORT_CLICK),
            "1000",
        );
        set(&mut out, mode.contains(TermMode::MOUSE_DRAG), "1002");
        set(&mut out, mode.contains(TermMode::MOUSE_MOTION), "1003");
        set(&mut out, mode.contains(TermMode::SGR_MOUSE), "1006");
        set(&mut out, mode.contains(TermMode::FOCUS_IN_OUT), "1004");
        out.extend_from_slice(if mode.contains(TermMode::APP_KEYPAD) {
            b"\x1b="
        } else {
            b"\x1b>"
        });
        let style = self.term.cursor_style();
        let shape = match style.shape {
            CursorShape::Block | CursorShape::HollowBlock | CursorShape::Hidden => 1,
            CursorShape::Underline => 3,
            CursorShape::Beam => 5,
        } + u8::from(!style.blinking);
        out.extend_from_slice(format!("\x1b[{shape} q").as_bytes());
        let title: String = self.title.chars().filter(|c| !c.is_control()).collect();
        out.extend_from_slice(format!("\x1b]2;{title}\x07").as_bytes());
        let (row, col, visible) = self.cursor();
        out.extend_from_slice(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
        set(&mut out, visible, "25");
        out
    }

    fn render_row(&self, line: Line, out: &mut Vec<u8>) {
        let row = &self.term.grid()[line];
        let mut last_sgr: Option<String> = None;
        // Stop at the last non-blank cell so a redraw does not paint trailing default blanks.
        let mut end = self.cols();
        while end > 0 {
            let cell = &row[Column(end - 1)];
            if cell.c == ' ' && cell_style(cell) == cell_style(&Cell::default()) {
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
            let mut buf = [0u8; 4];
            out.extend_from_slice(cell.c.encode_utf8(&mut buf).as_bytes());
            if let Some(extra) = cell.zerowidth() {
                for ch in extra {
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
            }
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
    Value::Object(style)
}

const FLAG_NAMES: &[(Flags, &str)] = &[
    (Flags::BOLD, "bold"),
    (Flags::DIM, "dim"),
    (Flags::ITALIC, "italic"),
    (Flags::UNDERLINE, "underline"),
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
    push_color(&mut params, cell.fg, 30, 90, 38);
    push_color(&mut params, cell.bg, 40, 100, 48);
    format!("\x1b[{}m", params.join(";"))
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
    fn redraw_reproduces_the_screen() {
        let mut s = Screen::new(4, 10, 0);
        s.apply(b"\x1b[?1049h\x1b[2;3H\x1b[7mX\x1b[0m y\x1b[?1h");
        let mut copy = Screen::new(4, 10, 0);
        copy.apply(&s.redraw());
        assert_eq!(copy.lines(), s.lines());
        assert_eq!(copy.modes(), s.modes());
        assert_eq!(copy.cursor(), s.cursor());
        assert_eq!(copy.ansi_lines(), s.ansi_lines());
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
