//! The pane's history in a compact form: the rows that scrolled off the top of the screen,
//! each kept as its text plus runs of attributes, bounded by a line cap and a byte cap.
//!
//! alacritty_terminal keeps every history cell as a 24-byte `Cell` whatever it holds, so 2000
//! lines of 80 columns cost 3.84 MB. [`crate::screen::Screen`] moves the rows that entered the
//! core's history into a [`History`] once the pane is quiet (or when the rows waiting in the
//! core would outgrow the byte cap) and drops them from the core, so an idle pane's core holds
//! only its screen and one history row. A row is expanded back into cells only when something
//! reads it:
//! `scrollback` and `peek --scrollback` (its text), and a resize, which gives the rows back to
//! the core so its reflow treats them exactly as it always did.
//!
//! The encoding is lossless: [`History::row`] returns a row equal to the one pushed (every
//! cell's character, colours, flags including the wrap and wide-character flags, zero-width
//! characters, underline colour and hyperlink). One row is:
//!
//! ```text
//! width      varint   the row's length in cells
//! cells      varint   how many cells are stored; the cells after them are default blanks
//! text       varint byte length, then UTF-8: one character per stored cell
//! runs       until `cells` are covered: varint count, then a style
//! style      one byte saying which parts follow (FG, BG, FLAGS, EXTRA), then those parts
//! ```
//!
//! A decoded row counts its stored cells as written (the core's private "occupied" count, up
//! to which its next reset clears the row); the cells after them are default blanks, which a
//! reset leaves as they are. The screen keeps every row's count covering its cells after a
//! resize (see `Screen::resize`), so no row holds cells a reset would skip, and a row's
//! occupied count is therefore not needed to reproduce what the core shows.
//!
//! A colour is a tag byte (named, indexed, RGB) and its value; the extra part (rare) holds the
//! zero-width characters, the underline colour and the hyperlink (id and URI). Plain text costs
//! its own bytes plus about five bytes a row; the row index costs eight more.
//!
//! Rows live back to back in one byte ring (`VecDeque<u8>`), with the ring offset of each row
//! beside it, so dropping the oldest row is popping bytes from the front: there is no
//! allocation per row and nothing to fragment the heap.
//!
//! Lines of plain or styled text that the screen stores without the core
//! ([`History::push_line`]) wait as the bytes they arrived as, and are encoded into rows only
//! when something reads the history, the pane goes quiet, or their bytes pass the byte cap:
//! while a program prints without pause, most of its lines are dropped by the line cap before
//! anyone could read them, and are never encoded.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use alacritty_terminal::grid::Row;
use alacritty_terminal::index::Column;
use alacritty_terminal::term::cell::{Cell, CellExtra, Flags, Hyperlink};
use alacritty_terminal::vte::ansi::{Color, NamedColor, Rgb};

use crate::styled::{self, Pen, Segment};

/// The byte cap when a launch spec gives none (the protocol's default, 4 MiB): about 2000
/// lines of 200 columns of heavily styled text, or 100 000 lines of short plain ones.
pub const DEFAULT_MAX_BYTES: usize = belfry_proto::limits::DEFAULT_SCROLLBACK_BYTES as usize;

/// What one row's entry in the index costs, counted against the byte cap with the row's bytes.
const INDEX_BYTES: usize = std::mem::size_of::<u64>();

/// The most a row of a plain line costs beyond its characters, its index entry included: the
/// row's header and run of `encode_plain` (at most five varints of at most 10 bytes, three
/// bytes besides) and [`INDEX_BYTES`].
const PLAIN_ROW_BOUND: usize = 5 * 10 + 3 + INDEX_BYTES;

/// Which parts of a style follow its header byte.
const HAS_FG: u8 = 1;
const HAS_BG: u8 = 2;
const HAS_FLAGS: u8 = 4;
const HAS_EXTRA: u8 = 8;

/// Colour tags.
const COLOR_NAMED: u8 = 0;
const COLOR_INDEXED: u8 = 1;
const COLOR_RGB: u8 = 2;
/// The underline colour's tag when the cell has none.
const COLOR_NONE: u8 = 3;

/// The history of one pane: rows oldest first, at most `max_lines` of them and at most
/// `max_bytes` of encoded bytes (index included). Pushing past either cap drops the oldest
/// rows first.
#[derive(Debug, Clone)]
pub struct History {
    bytes: VecDeque<u8>,
    /// Where each row starts, as an absolute offset: `starts[i] - dropped` indexes `bytes`.
    starts: VecDeque<u64>,
    /// Bytes dropped from the front so far: the absolute offset of `bytes[0]`.
    dropped: u64,
    max_lines: usize,
    max_bytes: usize,
    /// One row's encoding is built here and then copied into the ring in one go: pushing
    /// byte by byte into a `VecDeque` costs a capacity and wrap check per byte.
    scratch: Vec<u8>,
    /// Lines kept as they arrived, newer than every encoded row, whose rows are encoded only
    /// when something needs them ([`History::push_line`]); their bytes back to back, and how
    /// many rows they still hold.
    awaiting: VecDeque<Awaiting>,
    awaiting_bytes: VecDeque<u8>,
    awaiting_rows: usize,
    /// At least what the awaiting rows will cost when encoded (index included), of those
    /// whose cost is known before ([`Awaiting::bound`]); and how many awaiting lines' is not.
    awaiting_bound: usize,
    awaiting_unbounded: usize,
    /// Room for cutting an awaiting styled line into rows.
    segments: Vec<Segment>,
    row_scratch: styled::RowScratch,
    /// Tests only: rows of awaiting styled lines encoded that a line wrapped into and that
    /// the core would have cleared with a colour.
    #[cfg(test)]
    filled_wrap_rows: usize,
}

/// What waits in `awaiting_bytes`, oldest first (see [`History::push_line`]).
#[derive(Debug, Clone)]
enum Awaiting {
    /// A plain or styled line kept as it arrived.
    Line(AwaitingLine),
    /// A row pushed after such lines, encoded already: `len` bytes.
    Row { len: usize },
}

#[derive(Debug, Clone)]
struct AwaitingLine {
    /// Its bytes, its `\r\n` included.
    len: usize,
    /// The characters it prints, and how many of its first rows the line cap dropped.
    printed: usize,
    dropped: usize,
    /// The number from the top of the screen of the row its first row was written on; a row
    /// numbered `screen_rows` or more was scrolled in.
    first_row: usize,
    screen_rows: usize,
    cols: usize,
}

impl Awaiting {
    /// Its bytes in `awaiting_bytes`.
    fn len(&self) -> usize {
        match self {
            Awaiting::Line(line) => line.len,
            Awaiting::Row { len } => *len,
        }
    }

    /// At most what its rows cost when encoded, their index entries included, when that is
    /// known before: for a row, its bytes; for a plain line (one byte a character), its
    /// characters and [`PLAIN_ROW_BOUND`] a row. `None` for a styled line.
    fn bound(&self) -> Option<usize> {
        match self {
            Awaiting::Line(line) if line.len == line.printed + 2 => {
                Some(line.len + rows_of(line.printed, line.cols) * PLAIN_ROW_BOUND)
            }
            Awaiting::Line(_) => None,
            Awaiting::Row { len } => Some(len + INDEX_BYTES),
        }
    }

    /// The rows it still holds.
    fn rows(&self) -> usize {
        match self {
            Awaiting::Line(line) => rows_of(line.printed, line.cols) - line.dropped,
            Awaiting::Row { .. } => 1,
        }
    }
}

/// The rows a line printing `printed` characters takes in `cols` columns, from the start of a
/// row: one for each `cols` characters begun, and one for an empty line.
pub(crate) fn rows_of(printed: usize, cols: usize) -> usize {
    let cols = cols.max(1);
    // Most lines take one row or two: counted without a division, which costs more than all
    // the rest of this line's bookkeeping (the screen and the history count each line's rows
    // several times).
    if printed <= cols.saturating_mul(2) {
        1 + usize::from(printed > cols)
    } else {
        printed.div_ceil(cols)
    }
}

impl History {
    /// An empty history keeping at most `max_lines` rows and `max_bytes` bytes.
    pub fn new(max_lines: usize, max_bytes: usize) -> History {
        History {
            bytes: VecDeque::new(),
            starts: VecDeque::new(),
            dropped: 0,
            max_lines,
            max_bytes,
            scratch: Vec::new(),
            awaiting: VecDeque::new(),
            awaiting_bytes: VecDeque::new(),
            awaiting_rows: 0,
            awaiting_bound: 0,
            awaiting_unbounded: 0,
            segments: Vec::new(),
            row_scratch: styled::RowScratch::default(),
            #[cfg(test)]
            filled_wrap_rows: 0,
        }
    }

    /// Rows held, those of lines still awaiting their encoding included. Until
    /// [`History::encode_awaiting`], the byte cap may still drop some of those.
    pub fn len(&self) -> usize {
        self.starts.len() + self.awaiting_rows
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`History::len`] when it is what [`History::encode_awaiting`] would leave, so that a
    /// reader of the count alone need not encode: when nothing awaits, or when every awaiting
    /// row's cost is known and all of them together with the encoded rows fit the byte cap
    /// (the line cap is applied as they come). `None` when only encoding tells.
    pub fn settled_len(&self) -> Option<usize> {
        let fits = self.awaiting_unbounded == 0
            && self.bytes().saturating_add(self.awaiting_bound) <= self.max_bytes;
        (self.awaiting.is_empty() || fits).then(|| self.len())
    }

    /// Counts `awaiting` in (`grew`) or out of what [`History::settled_len`] knows.
    fn count_awaiting(&mut self, awaiting: &Awaiting, grew: bool) {
        match (awaiting.bound(), grew) {
            (Some(bound), true) => self.awaiting_bound += bound,
            (Some(bound), false) => self.awaiting_bound -= bound,
            (None, true) => self.awaiting_unbounded += 1,
            (None, false) => self.awaiting_unbounded -= 1,
        }
    }

    /// Tests only: rows of lines still awaiting their encoding.
    #[cfg(test)]
    pub(crate) fn awaiting_rows(&self) -> usize {
        self.awaiting_rows
    }

    /// Bytes counted against the byte cap: the encoded rows and their index entries (lines
    /// awaiting their encoding not included).
    pub fn bytes(&self) -> usize {
        self.bytes.len() + INDEX_BYTES * self.starts.len()
    }

    /// The byte cap.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Drops every row and gives the memory back.
    pub fn clear(&mut self) {
        self.dropped += self.bytes.len() as u64;
        self.bytes = VecDeque::new();
        self.starts = VecDeque::new();
        self.awaiting = VecDeque::new();
        self.awaiting_bytes = VecDeque::new();
        self.awaiting_rows = 0;
        self.awaiting_bound = 0;
        self.awaiting_unbounded = 0;
    }

    /// Appends `row` as the newest row, then drops the oldest rows while either cap is
    /// exceeded. A row larger than the byte cap on its own is not kept at all.
    pub fn push(&mut self, row: &Row<Cell>) {
        if self.awaiting.is_empty() {
            self.append(|out| encode_row(row, out));
            return;
        }
        // Behind lines that await their encoding: it waits with them, encoded.
        if self.max_lines == 0 {
            return;
        }
        self.scratch.clear();
        encode_row(row, &mut self.scratch);
        let awaiting = Awaiting::Row {
            len: self.scratch.len(),
        };
        self.count_awaiting(&awaiting, true);
        self.awaiting.push_back(awaiting);
        self.awaiting_bytes.extend(&self.scratch);
        self.awaiting_rows += 1;
        self.after_awaiting_grew();
    }

    /// The line cap drops the oldest rows at once; lines whose bytes pass the byte cap are
    /// encoded (which applies the byte cap).
    fn after_awaiting_grew(&mut self) {
        self.drop_oldest(self.len().saturating_sub(self.max_lines));
        if self.awaiting_bytes.len() > self.max_bytes {
            self.encode_awaiting();
        }
    }

    /// Appends the rows of a plain or styled line (see `crate::styled::line`; `line` ends
    /// with its `\r\n`, and prints `printed` characters) written from the start of row
    /// `first_row` of a screen of `screen_rows` x `cols`, as the newest rows: the bytes
    /// [`History::push`] stores for the rows the core would have scrolled into its history
    /// for the line, without building them (a row the line wraps into that the core scrolls
    /// in is cleared with the pen's background of that moment).
    ///
    /// The line is kept as it came and its rows are encoded only when something needs them
    /// ([`History::encode_awaiting`]): a pane printing without pause has lines scroll through
    /// a history of a few thousand rows long before anybody reads one, and the line cap
    /// drops those without their rows ever being built. The byte cap is applied when they
    /// are encoded, which drops the same rows it would have dropped one by one: in both cases
    /// what is kept is the longest run of newest rows within both caps. The lines waiting
    /// are encoded as soon as their bytes pass the byte cap, so they never hold more.
    pub(crate) fn push_line(
        &mut self,
        line: &[u8],
        printed: usize,
        first_row: usize,
        screen_rows: usize,
        cols: usize,
    ) {
        if self.max_lines == 0 {
            return;
        }
        let awaiting = Awaiting::Line(AwaitingLine {
            len: line.len(),
            printed,
            dropped: 0,
            first_row,
            screen_rows,
            cols,
        });
        self.awaiting_rows += awaiting.rows();
        self.count_awaiting(&awaiting, true);
        self.awaiting.push_back(awaiting);
        self.awaiting_bytes.extend(line);
        self.after_awaiting_grew();
    }

    /// Encodes the rows of the lines [`History::push_line`] kept, oldest first, applying
    /// both caps as each is appended.
    pub fn encode_awaiting(&mut self) {
        if self.awaiting.is_empty() {
            return;
        }
        let mut lines = std::mem::take(&mut self.awaiting);
        let mut bytes = std::mem::take(&mut self.awaiting_bytes);
        self.awaiting_rows = 0;
        self.awaiting_bound = 0;
        self.awaiting_unbounded = 0;
        let mut at = 0;
        let all = bytes.make_contiguous();
        for awaiting in &lines {
            let text = &all[at..at + awaiting.len()];
            at += awaiting.len();
            match awaiting {
                Awaiting::Line(line) => self.encode_line(text, line),
                Awaiting::Row { .. } => self.append(|out| out.extend_from_slice(text)),
            }
        }
        // The room is kept for the next lines; `shrink_to_fit` gives it back.
        lines.clear();
        bytes.clear();
        self.awaiting = lines;
        self.awaiting_bytes = bytes;
    }

    /// Appends the rows of one awaiting line, but the first `dropped`.
    fn encode_line(&mut self, text: &[u8], line: &AwaitingLine) {
        let cols = line.cols;
        let mut segments = std::mem::take(&mut self.segments);
        segments.clear();
        let printed = match styled::line(text, 0, Some(&mut segments)) {
            styled::Scan::Read(_, printed) => printed,
            // `push_line` is given only lines `styled::line` read.
            _ => {
                debug_assert!(false, "an awaiting line no longer reads as one");
                self.segments = segments;
                return;
            }
        };
        debug_assert_eq!(printed, line.printed);
        let text = &text[..text.len() - 2];
        if segments.is_empty() {
            // Plain text (or a styled line that prints nothing): its rows are cut from it.
            if text.is_empty() || printed == 0 {
                if line.dropped == 0 {
                    self.append(|out| encode_plain(b"", cols, false, out));
                }
            } else {
                let mut pieces = text.chunks(cols).skip(line.dropped).peekable();
                while let Some(piece) = pieces.next() {
                    let wrapped = pieces.peek().is_some();
                    self.append(|out| encode_plain(piece, cols, wrapped, out));
                }
            }
        } else {
            let mut scratch = std::mem::take(&mut self.row_scratch);
            let mut row = line.first_row;
            styled::rows(text, &segments, cols, &mut scratch, |parts| {
                let skip = row - line.first_row < line.dropped;
                let fill = match parts.wrap_bg {
                    Some(bg) if row >= line.screen_rows => bg,
                    _ => Pen::DEFAULT.bg,
                };
                row += 1;
                if skip {
                    return;
                }
                self.append(|out| {
                    encode_styled(parts.text, parts.runs, cols, parts.wrapped, fill, out)
                });
                #[cfg(test)]
                {
                    self.filled_wrap_rows += usize::from(fill != Pen::DEFAULT.bg);
                }
            });
            self.row_scratch = scratch;
        }
        self.segments = segments;
    }

    /// Tests only: see the field.
    #[cfg(test)]
    pub(crate) fn filled_wrap_rows(&self) -> usize {
        self.filled_wrap_rows
    }

    /// Appends the row `encode` writes as the newest row, then drops the oldest rows while
    /// either cap is exceeded.
    fn append(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        if self.max_lines == 0 {
            return;
        }
        self.starts
            .push_back(self.dropped + self.bytes.len() as u64);
        self.scratch.clear();
        encode(&mut self.scratch);
        self.bytes.extend(&self.scratch);
        while self.starts.len() > self.max_lines || self.bytes() > self.max_bytes {
            self.pop_oldest();
        }
    }

    /// Drops the `count` oldest rows (all of them if there are fewer): encoded rows first,
    /// then the rows of awaiting lines, which then need never be encoded.
    pub fn drop_oldest(&mut self, count: usize) {
        let mut count = count.min(self.len());
        while count > 0 && !self.starts.is_empty() {
            self.pop_oldest();
            count -= 1;
        }
        while count > 0 {
            let Some(front) = self.awaiting.front_mut() else {
                break;
            };
            let left = front.rows();
            if count < left {
                // Only a line holds more than one row.
                if let Awaiting::Line(line) = front {
                    line.dropped += count;
                }
                self.awaiting_rows -= count;
                break;
            }
            let len = front.len();
            if let Some(front) = self.awaiting.pop_front() {
                self.count_awaiting(&front, false);
            }
            self.awaiting_bytes.drain(..len);
            self.awaiting_rows -= left;
            count -= left;
        }
    }

    fn pop_oldest(&mut self) {
        if self.starts.pop_front().is_none() {
            return;
        }
        let end = self.starts.front().map_or(self.bytes.len(), |start| {
            usize::try_from(start - self.dropped).unwrap_or(self.bytes.len())
        });
        self.bytes.drain(..end);
        self.dropped += end as u64;
    }

    /// Releases the spare capacity the ring grew to while it filled. The contents are copied
    /// into fresh allocations of their exact size rather than shrunk in place: the ring grew
    /// while the grid's rows were still allocated below it, and once those are freed a fresh
    /// allocation can take their place, so the top of the heap can be given back.
    pub fn shrink_to_fit(&mut self) {
        self.encode_awaiting();
        self.awaiting = VecDeque::new();
        self.awaiting_bytes = VecDeque::new();
        self.segments = Vec::new();
        self.row_scratch = styled::RowScratch::default();
        self.bytes = VecDeque::from(self.bytes.iter().copied().collect::<Vec<u8>>());
        self.starts = VecDeque::from(self.starts.iter().copied().collect::<Vec<u64>>());
        self.scratch = Vec::new();
    }

    /// Row `index` (0 is the oldest), expanded back into cells; `None` past the end. Rows
    /// of lines awaiting their encoding are past it: [`History::encode_awaiting`] first.
    pub fn row(&self, index: usize) -> Option<Row<Cell>> {
        debug_assert!(
            self.awaiting.is_empty(),
            "a row was read with lines awaiting"
        );
        let encoded = self.encoded(index)?;
        // The bytes were written by `encode_row`; a decoding failure would be a bug here, and
        // is shown as a blank row rather than taking the pane host down.
        Some(decode_row(&encoded).unwrap_or_else(|| Row::new(1)))
    }

    /// The encoded bytes of row `index`, borrowed when they do not wrap around the ring.
    fn encoded(&self, index: usize) -> Option<Cow<'_, [u8]>> {
        let start = usize::try_from(self.starts.get(index)? - self.dropped).ok()?;
        let end = match self.starts.get(index + 1) {
            Some(next) => usize::try_from(next - self.dropped).ok()?,
            None => self.bytes.len(),
        };
        let (front, back) = self.bytes.as_slices();
        if end <= front.len() {
            Some(Cow::Borrowed(&front[start..end]))
        } else if start >= front.len() {
            Some(Cow::Borrowed(&back[start - front.len()..end - front.len()]))
        } else {
            Some(Cow::Owned(self.bytes.range(start..end).copied().collect()))
        }
    }
}

/// The parts of a cell that runs share: everything but its character.
#[derive(PartialEq)]
struct Style<'a> {
    fg: Color,
    bg: Color,
    flags: Flags,
    extra: Option<&'a Arc<CellExtra>>,
}

impl<'a> Style<'a> {
    fn of(cell: &'a Cell) -> Style<'a> {
        Style {
            fg: cell.fg,
            bg: cell.bg,
            flags: cell.flags,
            extra: cell.extra.as_ref(),
        }
    }
}

/// Whether `cell` equals `Cell::default()`, field by field with the cheap tests first.
pub(crate) fn is_default_blank(cell: &Cell) -> bool {
    cell.c == ' '
        && cell.flags.is_empty()
        && cell.extra.is_none()
        && cell.fg == Color::Named(NamedColor::Foreground)
        && cell.bg == Color::Named(NamedColor::Background)
}

/// Appends the encoding of `row` (see the module header) to `out`.
fn encode_row(row: &Row<Cell>, out: &mut Vec<u8>) {
    let width = row.len();
    // Trailing cells equal to a default blank are not stored: decoding fills them in.
    let mut cells = width;
    while cells > 0 && is_default_blank(&row[Column(cells - 1)]) {
        cells -= 1;
    }
    push_varint(out, width as u64);
    push_varint(out, cells as u64);
    let text_len: usize = (0..cells).map(|c| row[Column(c)].c.len_utf8()).sum();
    push_varint(out, text_len as u64);
    let mut buf = [0u8; 4];
    for c in 0..cells {
        let ch = row[Column(c)].c;
        if ch.is_ascii() {
            out.push(ch as u8);
        } else {
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
    }
    let mut c = 0;
    while c < cells {
        let style = Style::of(&row[Column(c)]);
        let mut count = 1;
        while c + count < cells && Style::of(&row[Column(c + count)]) == style {
            count += 1;
        }
        push_varint(out, count as u64);
        push_style(out, &style);
        c += count;
    }
}

/// Appends the encoding of a row of a plain line (see [`History::push_line`]) to `out`:
/// `text` (printable ASCII) written from the row's start with the default pen in `width`
/// columns, the last cell marked as wrapped when `wrapped` (then `text` fills the row). What
/// [`encode_styled`] writes for it with the default pen and fill, without walking pens (plain
/// lines are the bulk of most output).
fn encode_plain(text: &[u8], width: usize, wrapped: bool, out: &mut Vec<u8>) {
    // Trailing spaces with the default pen are default blanks, not stored; the marked
    // last cell of a wrapped row is stored whatever it holds.
    let cells = if wrapped {
        width
    } else {
        text.len() - text.iter().rev().take_while(|&&b| b == b' ').count()
    };
    push_varint(out, width as u64);
    push_varint(out, cells as u64);
    push_varint(out, cells as u64);
    out.extend_from_slice(&text[..cells]);
    let plain = cells - usize::from(wrapped);
    if plain > 0 {
        push_varint(out, plain as u64);
        out.push(0);
    }
    if wrapped {
        push_varint(out, 1);
        out.push(HAS_FLAGS);
        push_varint(out, u64::from(Flags::WRAPLINE.bits()));
    }
}

/// Appends the encoding of a row of a styled line (see [`History::push_line`]) to `out`:
/// `text` written from the row's start with the pens of `runs`, the last cell marked as
/// wrapped when `wrapped` (then `text` fills the row), and the cells after `text` blanks of
/// background `fill` (the colour the core cleared the row with). The bytes `encode_row`
/// writes for that row.
fn encode_styled(
    text: &[u8],
    runs: &[(usize, Pen)],
    width: usize,
    wrapped: bool,
    fill: Color,
    out: &mut Vec<u8>,
) {
    let fill_pen = Pen {
        bg: fill,
        ..Pen::DEFAULT
    };
    // Trailing default blanks are not stored: the fill when it is the default, and then
    // spaces of the default pen (a wrapped row's marked last cell is never one).
    let cells = if fill_pen != Pen::DEFAULT {
        width
    } else if wrapped {
        text.len()
    } else {
        let mut cells = text.len();
        let mut pens = runs
            .iter()
            .rev()
            .flat_map(|&(n, pen)| std::iter::repeat_n(pen, n));
        while cells > 0 && text[cells - 1] == b' ' && pens.next() == Some(Pen::DEFAULT) {
            cells -= 1;
        }
        cells
    };
    push_varint(out, width as u64);
    push_varint(out, cells as u64);
    push_varint(out, cells as u64);
    let shown = cells.min(text.len());
    out.extend_from_slice(&text[..shown]);
    out.extend(std::iter::repeat_n(b' ', cells - shown));
    // The runs, cut to the stored cells, then the fill; neighbours with the same style
    // merged as `encode_row` merges them.
    let mut pending: Option<(usize, Pen)> = None;
    let mut flush = |out: &mut Vec<u8>, run: (usize, Pen)| match &mut pending {
        Some((count, pen)) if *pen == run.1 => *count += run.0,
        _ => {
            if let Some((count, pen)) = pending.replace(run) {
                push_pen_run(out, count, pen);
            }
        }
    };
    let mut left = shown;
    for &(count, pen) in runs {
        let count = count.min(left);
        if count == 0 {
            break;
        }
        left -= count;
        if wrapped && left == 0 {
            let mut last = pen;
            last.flags.insert(Flags::WRAPLINE);
            if count > 1 {
                flush(out, (count - 1, pen));
            }
            flush(out, (1, last));
        } else {
            flush(out, (count, pen));
        }
    }
    if cells > shown {
        flush(out, (cells - shown, fill_pen));
    }
    if let Some((count, pen)) = pending {
        push_pen_run(out, count, pen);
    }
}

/// One run of `count` cells drawn with `pen` (see [`encode_styled`]).
fn push_pen_run(out: &mut Vec<u8>, count: usize, pen: Pen) {
    push_varint(out, count as u64);
    push_style(
        out,
        &Style {
            fg: pen.fg,
            bg: pen.bg,
            flags: pen.flags,
            extra: None,
        },
    );
}

fn push_style(out: &mut Vec<u8>, style: &Style<'_>) {
    let default_fg = Color::Named(NamedColor::Foreground);
    let default_bg = Color::Named(NamedColor::Background);
    let mut header = 0;
    if style.fg != default_fg {
        header |= HAS_FG;
    }
    if style.bg != default_bg {
        header |= HAS_BG;
    }
    if !style.flags.is_empty() {
        header |= HAS_FLAGS;
    }
    if style.extra.is_some() {
        header |= HAS_EXTRA;
    }
    out.push(header);
    if header & HAS_FG != 0 {
        push_color(out, style.fg);
    }
    if header & HAS_BG != 0 {
        push_color(out, style.bg);
    }
    if header & HAS_FLAGS != 0 {
        push_varint(out, u64::from(style.flags.bits()));
    }
    if let Some(extra) = style.extra {
        push_extra(out, extra);
    }
}

/// The extra part through the cell's public accessors: zero-width characters, underline
/// colour, hyperlink.
fn push_extra(out: &mut Vec<u8>, extra: &Arc<CellExtra>) {
    let probe = Cell {
        extra: Some(extra.clone()),
        ..Cell::default()
    };
    let zerowidth: String = probe.zerowidth().unwrap_or_default().iter().collect();
    push_str(out, &zerowidth);
    match probe.underline_color() {
        Some(color) => push_color(out, color),
        None => out.push(COLOR_NONE),
    }
    match probe.hyperlink() {
        Some(link) => {
            out.push(1);
            push_str(out, link.id());
            push_str(out, link.uri());
        }
        None => out.push(0),
    }
}

fn push_color(out: &mut Vec<u8>, color: Color) {
    match color {
        Color::Named(named) => {
            out.push(COLOR_NAMED);
            push_varint(out, named as u64);
        }
        Color::Indexed(i) => {
            out.push(COLOR_INDEXED);
            out.push(i);
        }
        Color::Spec(rgb) => {
            out.push(COLOR_RGB);
            out.extend_from_slice(&[rgb.r, rgb.g, rgb.b]);
        }
    }
}

fn push_str(out: &mut Vec<u8>, text: &str) {
    push_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// LEB128: seven bits a byte, low bits first, the top bit set on every byte but the last.
fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// Reads what `encode_row` wrote.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(first)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }

    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if len > self.bytes.len() {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Some(taken)
    }

    fn str(&mut self) -> Option<&'a str> {
        let len = self.len()?;
        std::str::from_utf8(self.take(len)?).ok()
    }

    fn color(&mut self) -> Option<Option<Color>> {
        Some(match self.byte()? {
            COLOR_NAMED => Some(Color::Named(named_color(self.varint()?)?)),
            COLOR_INDEXED => Some(Color::Indexed(self.byte()?)),
            COLOR_RGB => {
                let rgb = self.take(3)?;
                Some(Color::Spec(Rgb {
                    r: rgb[0],
                    g: rgb[1],
                    b: rgb[2],
                }))
            }
            COLOR_NONE => None,
            _ => return None,
        })
    }
}

fn decode_row(bytes: &[u8]) -> Option<Row<Cell>> {
    let mut reader = Reader { bytes };
    let width = reader.len()?;
    let cells = reader.len()?;
    if width == 0 || cells > width {
        return None;
    }
    let text = reader.str()?;
    let mut row = vec![Cell::default(); width];
    let mut chars = text.chars();
    let mut c = 0;
    while c < cells {
        let count = reader.len()?;
        if count == 0 || c + count > cells {
            return None;
        }
        let template = read_style(&mut reader)?;
        for cell in &mut row[c..c + count] {
            *cell = template.clone();
            cell.c = chars.next()?;
        }
        c += count;
    }
    Some(Row::from_vec(row, cells))
}

/// A cell with the style that follows (its character still the default blank).
fn read_style(reader: &mut Reader<'_>) -> Option<Cell> {
    let header = reader.byte()?;
    let mut cell = Cell::default();
    if header & HAS_FG != 0 {
        cell.fg = reader.color()??;
    }
    if header & HAS_BG != 0 {
        cell.bg = reader.color()??;
    }
    if header & HAS_FLAGS != 0 {
        cell.flags = Flags::from_bits_retain(u16::try_from(reader.varint()?).ok()?);
    }
    if header & HAS_EXTRA != 0 {
        // An extra part that is present but empty is possible in the core (clearing a wide
        // character empties its zero-width list and keeps the allocation), so it is rebuilt
        // from an empty one rather than through setters that would drop it.
        cell.extra = Some(Arc::new(CellExtra::default()));
        for ch in reader.str()?.chars() {
            cell.push_zerowidth(ch);
        }
        if let Some(color) = reader.color()? {
            cell.set_underline_color(Some(color));
        }
        if reader.byte()? == 1 {
            let id = reader.str()?;
            let uri = reader.str()?;
            cell.set_hyperlink(Some(Hyperlink::new(Some(id), uri.to_owned())));
        }
    }
    Some(cell)
}

/// The named colour with this discriminant.
fn named_color(value: u64) -> Option<NamedColor> {
    use NamedColor::*;
    const ALL: [NamedColor; 29] = [
        Black,
        Red,
        Green,
        Yellow,
        Blue,
        Magenta,
        Cyan,
        White,
        BrightBlack,
        BrightRed,
        BrightGreen,
        BrightYellow,
        BrightBlue,
        BrightMagenta,
        BrightCyan,
        BrightWhite,
        Foreground,
        Background,
        Cursor,
        DimBlack,
        DimRed,
        DimGreen,
        DimYellow,
        DimBlue,
        DimMagenta,
        DimCyan,
        DimWhite,
        BrightForeground,
        DimForeground,
    ];
    ALL.into_iter().find(|named| *named as u64 == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_of(text: &str, width: usize) -> Row<Cell> {
        let mut row: Row<Cell> = Row::new(width);
        for (i, ch) in text.chars().enumerate() {
            row[Column(i)].c = ch;
        }
        row
    }

    #[test]
    fn a_lines_rows_are_one_for_each_row_of_characters_begun_and_one_when_empty() {
        for cols in [0, 1, 2, 3, 79, 80, 81, 200] {
            for printed in 0..1000 {
                assert_eq!(
                    rows_of(printed, cols),
                    printed.div_ceil(cols.max(1)).max(1),
                    "{printed} characters in {cols} columns"
                );
            }
        }
        assert_eq!(rows_of(usize::MAX, usize::MAX), 1);
        assert_eq!(rows_of(usize::MAX, 2), usize::MAX / 2 + 1);
    }

    #[test]
    fn a_plain_row_encodes_as_a_styled_row_with_the_default_pen() {
        for (text, wrapped) in [
            (&b""[..], false),
            (b"ab  ", false),
            (b"abcd", true),
            (b"  ", false),
        ] {
            let (mut plain, mut styled) = (Vec::new(), Vec::new());
            encode_plain(text, 4, wrapped, &mut plain);
            let runs = [(text.len(), Pen::DEFAULT)];
            encode_styled(text, &runs, 4, wrapped, Pen::DEFAULT.bg, &mut styled);
            assert_eq!(plain, styled, "{text:?}");
        }
    }

    #[test]
    fn plain_text_costs_its_bytes_and_a_few_more() {
        let mut history = History::new(100, DEFAULT_MAX_BYTES);
        history.push(&row_of("hello world", 80));
        // width, cells, text length, 11 bytes of text, one run (count, header).
        assert_eq!(history.bytes(), 3 + 11 + 2 + INDEX_BYTES);
        assert_eq!(history.row(0), Some(row_of("hello world", 80)));
        assert_eq!(history.row(1), None);
    }

    #[test]
    fn every_attribute_survives_the_round_trip() {
        let mut row = row_of("ab\u{4e16} xyz", 12);
        row[Column(0)].fg = Color::Named(NamedColor::Red);
        row[Column(0)].bg = Color::Spec(Rgb { r: 1, g: 2, b: 3 });
        row[Column(1)].fg = Color::Indexed(200);
        row[Column(1)].flags = Flags::BOLD | Flags::UNDERCURL | Flags::INVERSE;
        row[Column(1)].set_underline_color(Some(Color::Spec(Rgb { r: 9, g: 8, b: 7 })));
        row[Column(2)].flags = Flags::WIDE_CHAR;
        row[Column(2)].push_zerowidth('\u{301}');
        row[Column(3)].c = ' ';
        row[Column(3)].flags = Flags::WIDE_CHAR_SPACER;
        for col in 4..8 {
            row[Column(col)].set_hyperlink(Some(Hyperlink::new(
                Some("7_alacritty"),
                "https://x/".into(),
            )));
        }
        row[Column(9)].bg = Color::Named(NamedColor::DimForeground);
        row[Column(11)].flags = Flags::WRAPLINE | Flags::LEADING_WIDE_CHAR_SPACER;
        // An extra part that is present but empty, as clearing a wide character leaves it.
        row[Column(10)].push_zerowidth('\u{300}');
        row[Column(10)].clear_wide();
        assert!(row[Column(10)].extra.is_some());
        let mut history = History::new(10, DEFAULT_MAX_BYTES);
        history.push(&row);
        assert_eq!(history.row(0), Some(row));
    }

    #[test]
    fn the_line_cap_drops_the_oldest_rows_first() {
        let mut history = History::new(3, DEFAULT_MAX_BYTES);
        for i in 0..10 {
            history.push(&row_of(&format!("line {i}"), 20));
        }
        assert_eq!(history.len(), 3);
        let kept: Vec<_> = (0..3).map(|i| history.row(i)).collect();
        assert_eq!(
            kept,
            (7..10)
                .map(|i| Some(row_of(&format!("line {i}"), 20)))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_byte_cap_drops_the_oldest_rows_first_and_holds() {
        let row = row_of(&"x".repeat(50), 80);
        let one = {
            let mut h = History::new(10, DEFAULT_MAX_BYTES);
            h.push(&row);
            h.bytes()
        };
        let mut history = History::new(1000, 10 * one + one / 2);
        for i in 0..100 {
            history.push(&row_of(&format!("{i:050}"), 80));
            assert!(history.bytes() <= 10 * one + one / 2);
        }
        assert_eq!(history.len(), 10);
        assert_eq!(history.row(0), Some(row_of(&format!("{:050}", 90), 80)));
        assert_eq!(history.row(9), Some(row_of(&format!("{:050}", 99), 80)));
        // A row bigger than the whole cap is not kept, and takes nothing else with it but
        // what it must.
        let mut tiny = History::new(10, 4);
        tiny.push(&row);
        assert!(tiny.is_empty());
        assert_eq!(tiny.bytes(), 0);
    }

    /// Lines kept as they came ([`History::push_line`]) and encoded only when read must be
    /// kept exactly as the same lines encoded one by one, whatever the caps: lines the line
    /// cap drops whole or in part before they are encoded, rows pushed behind waiting lines,
    /// and a byte cap applied only when the waiting lines are encoded. The waiting lines
    /// never hold more than the byte cap.
    #[test]
    fn lines_kept_as_they_came_read_as_the_same_lines_encoded_one_by_one() {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let (screen_rows, cols) = (5, 12);
        let mut settled_counts = 0;
        for case in 0..60 {
            let max_lines = 1 + next(40) as usize;
            let max_bytes = [200, 600, 2000, DEFAULT_MAX_BYTES][next(4) as usize];
            let (mut lazy, mut eager) = (
                History::new(max_lines, max_bytes),
                History::new(max_lines, max_bytes),
            );
            for i in 0..150 {
                if next(8) == 0 {
                    let row = row_of(&format!("row {i}"), cols);
                    lazy.push(&row);
                    eager.push(&row);
                } else {
                    let word = "w".repeat(next(30) as usize);
                    let line = match next(3) {
                        0 => format!("{i} {word}\r\n"),
                        1 => format!("{i} \x1b[1;3{}m{word}\x1b[0m.\r\n", next(8)),
                        _ => format!("\x1b[4{}m{i} {word}\x1b[m\r\n", next(8)),
                    };
                    let styled::Scan::Read(_, printed) = styled::line(line.as_bytes(), 0, None)
                    else {
                        panic!("{line:?} is not a styled line");
                    };
                    let first_row = next(2 * screen_rows as u64) as usize;
                    for history in [&mut lazy, &mut eager] {
                        history.push_line(line.as_bytes(), printed, first_row, screen_rows, cols);
                    }
                    eager.encode_awaiting();
                }
                assert!(
                    lazy.awaiting_bytes.len() <= max_bytes,
                    "case {case}: {} bytes wait",
                    lazy.awaiting_bytes.len()
                );
                assert_eq!(
                    lazy.awaiting_rows,
                    lazy.awaiting.iter().map(Awaiting::rows).sum::<usize>(),
                    "case {case}: rows counted as waiting, line {i}"
                );
                // Before they are encoded the rows of waiting lines count as held: exactly
                // when the byte cap cannot bind, at least as many rows when it can.
                if max_bytes == DEFAULT_MAX_BYTES {
                    assert_eq!(lazy.len(), eager.len(), "case {case}: rows held, line {i}");
                } else {
                    assert!(
                        lazy.len() >= eager.len(),
                        "case {case}: rows held, line {i}"
                    );
                }
                // The count a snapshot reads without encoding is the one encoding leaves.
                if let Some(settled) = lazy.settled_len() {
                    let mut encoded = lazy.clone();
                    encoded.encode_awaiting();
                    assert_eq!(
                        settled,
                        encoded.len(),
                        "case {case}: settled count, line {i}"
                    );
                    settled_counts += usize::from(!lazy.awaiting.is_empty());
                }
                if next(10) == 0 {
                    lazy.encode_awaiting();
                }
            }
            lazy.encode_awaiting();
            let context = format!("case {case} ({max_lines} lines, {max_bytes} bytes)");
            assert_eq!(lazy.len(), eager.len(), "{context}");
            assert_eq!(lazy.bytes(), eager.bytes(), "{context}");
            for i in 0..eager.len() {
                assert_eq!(lazy.row(i), eager.row(i), "{context}: row {i}");
            }
        }
        assert!(
            settled_counts > 100,
            "the count was known without encoding {settled_counts} times"
        );
    }

    #[test]
    fn rows_that_wrap_around_the_ring_read_back_whole() {
        let mut history = History::new(4, DEFAULT_MAX_BYTES);
        for i in 0..1000 {
            history.push(&row_of(&format!("row {i} {}", "y".repeat(i % 37)), 60));
            let last = history.len() - 1;
            assert_eq!(
                history.row(last),
                Some(row_of(&format!("row {i} {}", "y".repeat(i % 37)), 60))
            );
        }
        history.clear();
        assert!(history.is_empty());
        history.push(&row_of("again", 10));
        assert_eq!(history.row(0), Some(row_of("again", 10)));
    }

    #[test]
    fn every_named_colour_is_found_again() {
        for value in 0..300u64 {
            if let Some(named) = named_color(value) {
                assert_eq!(named as u64, value);
            }
        }
        assert_eq!(named_color(256), Some(NamedColor::Foreground));
        assert_eq!(named_color(268), Some(NamedColor::DimForeground));
        assert_eq!(named_color(16), None);
    }

    #[test]
    fn corrupt_bytes_decode_to_none_not_a_panic() {
        let mut out = Vec::new();
        encode_row(&row_of("abc", 5), &mut out);
        let bytes = out;
        for cut in 0..bytes.len() {
            assert!(decode_row(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        assert!(decode_row(&[0xff; 12]).is_none());
    }
}

/// The compact store against the core's own history: random output (text, SGR, wide and
/// combining characters, hyperlinks, wrapping, erases, scrolling, scroll regions, the
/// alternate screen, history clears, resets) and random resizes, fed to a screen that keeps
/// its history compact and to one that leaves it in the core. Every read must agree: the
/// screen's text, SGR lines and cells, the cursor, the history length, the whole scrollback and
/// the redraw's bytes. Each run draws fresh cases from a seed it prints on failure; replay one
/// with `BELFRY_PTY_SEED`.
#[cfg(test)]
mod properties {
    use crate::screen::Screen;

    /// Cases, and output steps per case.
    const CASES: usize = 80;
    const STEPS: usize = 60;

    use crate::test_rng::Rng;

    impl Rng {
        fn seeded() -> (Rng, u64) {
            let seed = std::env::var("BELFRY_PTY_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(1, |d| d.as_nanos() as u64)
                        | 1
                });
            (Rng(seed), seed)
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len() as u64) as usize]
        }
    }

    const SGR: &[&str] = &[
        "0",
        "1",
        "2",
        "3",
        "4",
        "4:2",
        "4:3",
        "4:5",
        "5",
        "7",
        "8",
        "9",
        "22",
        "24",
        "27",
        "31",
        "42",
        "93",
        "104",
        "39",
        "49",
        "38;5;200",
        "48;5;17",
        "38;2;10;20;30",
        "48;2;1;2;3",
        "58;2;9;8;7",
        "58;5;3",
        "59",
    ];
    const TEXT: &[&str] = &[
        "hello",
        "x",
        "a b c",
        "0123456789",
        "\u{4e16}\u{754c}",
        "\u{1f600}",
        "e\u{301}",
        "\u{4e16}a\u{4e16}",
        "\t",
        "tab\tstop",
        "    ",
        "=",
        "\u{2500}",
    ];
    const CONTROL: &[&str] = &[
        "\r\n", "\r\n", "\r\n", "\n", "\r", "\x08", "\x1b[K", "\x1b[1K", "\x1b[2K", "\x1b[J",
        "\x1b[1J", "\x1b[2J", "\x1b[3X", "\x1b[2@", "\x1b[2P", "\x1b[A", "\x1b[2B", "\x1b[5C",
        "\x1b[3D", "\x1b[H", "\x1b[2S", "\x1b[T", "\x1bM", "\x1bD", "\x1bE", "\x1b7", "\x1b8",
        "\x1b[L", "\x1b[M", "\x1b[r", "\x1b[?6h", "\x1b[?6l", "\x1b[2b",
    ];
    const RARE: &[&str] = &[
        "\x1b[3J",
        "\x1b[?1049h",
        "\x1b[?1049l",
        "\x1b[?1049l",
        "\x1b[?47h",
        "\x1b[?47l",
        "\x1b[?7l",
        "\x1b[?7h",
        "\x1bc",
        "\x1b[?2004h",
        "\x1b(0",
        "\x1b(B",
        "\x1b[4h",
        "\x1b[4l",
    ];

    /// One burst of program output.
    fn output(rng: &mut Rng, rows: u64, cols: u64) -> Vec<u8> {
        let mut out = String::new();
        for _ in 0..1 + rng.below(40) {
            match rng.below(100) {
                0..=39 => out.push_str(rng.pick(TEXT)),
                40..=44 => {
                    // A long line, so it wraps.
                    let word = rng.pick(TEXT);
                    for _ in 0..rng.below(3 * cols) {
                        out.push_str(word);
                    }
                }
                45..=59 => out.push_str(&format!("\x1b[{}m", rng.pick(SGR))),
                60..=84 => out.push_str(rng.pick(CONTROL)),
                85..=88 => {
                    let (row, col) = (1 + rng.below(rows + 2), 1 + rng.below(cols + 2));
                    out.push_str(&format!("\x1b[{row};{col}H"));
                }
                89..=90 => {
                    let top = 1 + rng.below(rows);
                    let bottom = top + rng.below(rows);
                    out.push_str(&format!("\x1b[{top};{bottom}r"));
                }
                91..=94 => {
                    let id = rng.below(3);
                    let link = match id {
                        0 => format!("\x1b]8;;https://example.com/{}\x1b\\", rng.below(9)),
                        _ => format!("\x1b]8;id=l{id};file:///tmp/{}\x07", rng.below(9)),
                    };
                    out.push_str(&link);
                    out.push_str(rng.pick(TEXT));
                    out.push_str("\x1b]8;;\x1b\\");
                }
                95..=96 => {
                    for _ in 0..rng.below(2 * rows) {
                        out.push_str("line\r\n");
                    }
                }
                97..=98 => {
                    // Sometimes inside a sequence the lines do not end: they are its text (or
                    // its parameters' end), not lines on the screen.
                    let open = rng.below(2) == 0;
                    if open {
                        out.push_str(
                            rng.pick(&["\x1b]2;", "\x1bP", "\x1b_", "\x1b[", "\x1b[?1", "\x1b"]),
                        );
                    }
                    let styled = rng.below(2) == 0;
                    out.push_str(&plain_lines(rng, rows, cols, styled));
                    if open {
                        out.push_str(rng.pick(&["\x07", "\x1b\\", "m"]));
                    }
                }
                _ => out.push_str(rng.pick(RARE)),
            }
        }
        out.into_bytes()
    }

    /// A run of plain lines long enough to scroll through the screen (the screen stores the
    /// rows of such runs without the core): empty ones, ones that fill a row exactly or wrap
    /// by one character, long ones, ones ending in spaces; with `styled`, two in three are
    /// styled lines instead (see [`styled_line`]).
    fn plain_lines(rng: &mut Rng, rows: u64, cols: u64, styled: bool) -> String {
        let mut out = String::new();
        for n in 0..rows + rng.below(4 * rows + 2) {
            if styled && rng.below(3) > 0 {
                out.push_str(&styled_line(rng, cols, n));
                out.push_str("\r\n");
                continue;
            }
            let len = match rng.below(8) {
                0 => 0,
                1 => cols,
                2 => cols + 1,
                3 => cols.saturating_sub(1),
                4 => 2 * cols + rng.below(cols),
                _ => rng.below(cols + 1),
            };
            let mut line: String = (0..len)
                .map(|i| char::from(b'!' + ((n * 7 + i) % 94) as u8))
                .collect();
            if rng.below(6) == 0 {
                line.push_str("   ");
            }
            out.push_str(&line);
            out.push_str("\r\n");
        }
        out
    }

    /// SGR sequences inside a styled line: every attribute, colours that do not fit, unknown
    /// ones, and some the screen leaves to the core (an underline colour, a sub-parameter, a
    /// private marker).
    const LINE_SGR: &[&str] = &[
        "1",
        "2",
        "3",
        "4",
        "5",
        "7",
        "8",
        "9",
        "21",
        "31",
        "42",
        "93",
        "104",
        "38;5;200",
        "48;5;17",
        "48;5;17",
        "38;2;10;20;30",
        "48;2;1;2;3",
        "1;4;38;5;9;48;5;250",
        "38;5;300;1",
        "48;2;1;999;3;7",
        "38;5",
        "48",
        "59",
        "66",
        "99999999",
        "58;5;3",
        "4:3",
        "?5",
        "",
    ];
    /// What ends a styled word: resets of every kind, and some that leave the pen changed.
    const LINE_RESET: &[&str] = &[
        "0",
        "",
        "0;0",
        "22;23;24;27;28;29;39;49",
        "39;49;21;2;22",
        "49",
        "0;1",
    ];

    /// A line of words in colours and attributes (each word maybe ended by a reset), some
    /// long enough to wrap with a coloured background.
    fn styled_line(rng: &mut Rng, cols: u64, n: u64) -> String {
        let mut out = String::new();
        for word in 0..rng.below(6) {
            match rng.below(12) {
                0 => out.push_str(&format!(
                    "\x1b[{}1m",
                    "0;".repeat(31 + rng.below(3) as usize)
                )),
                1..=7 => out.push_str(&format!("\x1b[{}m", rng.pick(LINE_SGR))),
                // A background colour, which a row the word wraps into takes to its end.
                8..=9 => out.push_str(&format!("\x1b[4{}m", rng.below(8))),
                _ => {}
            }
            let len = match rng.below(4) {
                0 => cols + rng.below(cols),
                _ => rng.below(cols / 2 + 2),
            };
            out.extend((0..len).map(|i| char::from(b'!' + ((n * 7 + i + word) % 94) as u8)));
            if rng.below(4) == 0 {
                out.push_str("  ");
            }
            if rng.below(6) > 0 {
                out.push_str(&format!("\x1b[{}m", rng.pick(LINE_RESET)));
            }
        }
        out
    }

    /// Feeds `bytes` to both models in the same random pieces (a sequence or a line can be
    /// split anywhere between chunks) and compares the answers. Half the time the compact
    /// model is fed as the pane host's reader feeds it, holding tails back between pieces
    /// (`Screen::apply_deferring`), and then three times in four past the end of `bytes`, until a
    /// reader or the next bytes end the turn.
    fn feed_both(
        rng: &mut Rng,
        compact: &mut Screen,
        core: &mut Screen,
        bytes: &[u8],
        context: &str,
    ) {
        let turn = rng.below(2) == 0;
        feed_both_as(rng, compact, core, bytes, context, turn);
    }

    fn feed_both_as(
        rng: &mut Rng,
        compact: &mut Screen,
        core: &mut Screen,
        bytes: &[u8],
        context: &str,
        turn: bool,
    ) {
        let mut at = 0;
        while at < bytes.len() {
            let left = (bytes.len() - at) as u64;
            let end = match rng.below(4) {
                0 => at + 1 + rng.below(left) as usize,
                // The reader's turns read the output in pieces: many end inside a run.
                1 | 2 if turn => at + 1 + rng.below(left.min(120)) as usize,
                _ => bytes.len(),
            };
            let piece = &bytes[at..end];
            let core_answers = core.apply(piece);
            let answers = if turn {
                compact.apply_deferring(piece)
            } else {
                compact.apply(piece)
            };
            assert_eq!(
                answers,
                core_answers,
                "{context}: answers to {:?}",
                String::from_utf8_lossy(piece)
            );
            at = end;
        }
        if !turn || rng.below(4) == 0 {
            compact.end_turn();
        }
    }

    /// Reads the screen of both with one reader picked at random, the first to see a tail
    /// the compact model holds back: each must give it to the core before it reads.
    fn first_reader_agrees(rng: &mut Rng, compact: &mut Screen, core: &mut Screen, context: &str) {
        match rng.below(8) {
            0 => assert_eq!(compact.lines(), core.lines(), "{context}: lines first"),
            1 => assert_eq!(compact.cursor(), core.cursor(), "{context}: cursor first"),
            2 => assert_eq!(
                compact.history_len(),
                core.history_len(),
                "{context}: history first"
            ),
            3 => assert_eq!(
                compact.scrollback(0, usize::MAX),
                core.scrollback(0, usize::MAX),
                "{context}: scrollback first"
            ),
            4 => assert_eq!(compact.cells(), core.cells(), "{context}: cells first"),
            7 => assert_eq!(
                compact.history_count(),
                core.history_len(),
                "{context}: history counted first"
            ),
            5 => assert_eq!(
                compact.ansi_lines(),
                core.ansi_lines(),
                "{context}: ansi first"
            ),
            _ => assert_eq!(compact.redraw(), core.redraw(), "{context}: redraw first"),
        }
    }

    /// A row's cells as text, every field shown, except the number the core puts in front of
    /// the id it makes up for a hyperlink given none (`N_alacritty`): it counts such links in
    /// the whole process, so two models fed the same output get different ones.
    fn cells(row: &alacritty_terminal::grid::Row<alacritty_terminal::term::cell::Cell>) -> String {
        let shown = format!("{:?}", row.into_iter().collect::<Vec<_>>());
        let mut parts: Vec<&str> = shown.split("_alacritty").collect();
        let last = parts.pop().unwrap_or_default();
        let mut out = String::new();
        for part in parts {
            out.push_str(part.trim_end_matches(|c: char| c.is_ascii_digit()));
            out.push_str("N_alacritty");
        }
        out.push_str(last);
        out
    }

    /// Every reader ([`crate::fuzzing::assert_agree`]), and every history row cell by cell.
    fn assert_agree(compact: &mut Screen, core: &mut Screen, context: &str) {
        crate::fuzzing::assert_agree(compact, core, context);
        let (ours, theirs) = (compact.history_rows(), core.history_rows());
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(cells(a), cells(b), "{context}: history row {i}");
        }
    }

    #[test]
    fn compact_history_reads_the_same_as_the_cores_own() {
        let (mut rng, seed) = Rng::seeded();
        let (mut held, mut skipped, mut styled_skipped, mut filled_skipped) = (0, 0, 0, 0);
        for case in 0..CASES {
            let (mut rows, mut cols) = (2 + rng.below(10), 2 + rng.below(30));
            let cap = rng.below(120) as usize;
            let mut compact = Screen::new(rows as u16, cols as u16, cap);
            let mut core = Screen::with_core_history(rows as u16, cols as u16, cap);
            for step in 0..STEPS {
                let context =
                    format!("seed {seed} case {case} step {step} ({rows}x{cols}, cap {cap})");
                match rng.below(20) {
                    0 => {
                        // Two columns at least: with one, the core itself panics on a wide
                        // character (alacritty_terminal 0.26 indexes past the row).
                        rows = 1 + rng.below(12);
                        cols = 2 + rng.below(39);
                        compact.resize(rows as u16, cols as u16);
                        core.resize(rows as u16, cols as u16);
                    }
                    1 => {
                        compact.release_spare_rows();
                    }
                    2 if rng.below(10) == 0 => {
                        compact.clear();
                        core.clear();
                    }
                    _ => {
                        let bytes = output(&mut rng, rows, cols);
                        feed_both(&mut rng, &mut compact, &mut core, &bytes, &context);
                    }
                }
                assert_agree(&mut compact, &mut core, &context);
                held = held.max(compact.history_len());
            }
            skipped += compact.rows_skipped();
            let (rows, filled) = compact.styled_rows_skipped();
            styled_skipped += rows;
            filled_skipped += filled;
        }
        // Runs of plain lines must have skipped the core, or the comparison proves nothing
        // of that path.
        assert!(
            skipped >= 200,
            "seed {seed}: only {skipped} rows were stored without the core"
        );
        assert!(
            styled_skipped >= 100 && filled_skipped >= 8,
            "seed {seed}: only {styled_skipped} rows of styled lines were stored without the \
             core, {filled_skipped} of them cleared with a colour"
        );
        // The generator must reach the line cap and fill history, or the test proves little.
        assert!(
            held >= 100,
            "seed {seed}: history never grew past {held} lines"
        );
    }

    /// The pane host's reader applies every read with `Screen::apply_deferring`, so the last
    /// screenful of a run that ends a read is held back until the next reads' lines scroll
    /// it off, or a reader of the screen gives it to the core. Output that is mostly runs of
    /// plain and styled lines, read in small pieces, must read the same as the core's
    /// whenever it is read, whichever reader comes first, and whether the tail was held
    /// across one batch of output or several.
    #[test]
    fn held_tails_read_the_same_as_the_cores_own() {
        let (mut rng, seed) = Rng::seeded();
        let (mut held_skipped, mut read_held) = (0, 0);
        for case in 0..40 {
            let (rows, cols) = (1 + rng.below(8), 2 + rng.below(30));
            let cap = rng.below(150) as usize;
            let mut compact = Screen::new(rows as u16, cols as u16, cap);
            let mut core = Screen::with_core_history(rows as u16, cols as u16, cap);
            for step in 0..30 {
                let context =
                    format!("seed {seed} case {case} step {step} ({rows}x{cols}, cap {cap})");
                let mut bytes = Vec::new();
                let batches = 1 + rng.below(4);
                for batch in 0..batches {
                    // The last batch is lines, so that a tail may be held at its end.
                    if rng.below(4) == 0 && batch + 1 < batches {
                        bytes.extend(output(&mut rng, rows, cols));
                    } else {
                        let styled = rng.below(2) == 0;
                        bytes.extend(plain_lines(&mut rng, rows, cols, styled).into_bytes());
                    }
                }
                feed_both_as(&mut rng, &mut compact, &mut core, &bytes, &context, true);
                // Half the time nobody looks: a held tail stays held into the next batch.
                if rng.below(2) == 0 {
                    if compact.holds_output() {
                        read_held += 1;
                        first_reader_agrees(&mut rng, &mut compact, &mut core, &context);
                        assert!(
                            !compact.holds_output(),
                            "{context}: a reader left a tail held"
                        );
                    }
                    assert_agree(&mut compact, &mut core, &context);
                }
            }
            assert_agree(
                &mut compact,
                &mut core,
                &format!("seed {seed} case {case} end"),
            );
            held_skipped += compact.held_tails_skipped();
        }
        assert!(
            held_skipped >= 40,
            "seed {seed}: only {held_skipped} held tails were scrolled off without the core"
        );
        assert!(
            read_held >= 25,
            "seed {seed}: a reader came first to only {read_held} held tails"
        );
    }
}
