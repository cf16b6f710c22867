//! Styled lines: printable ASCII and SGR sequences (`ESC [ params m`), ended by `\r\n`, that
//! leave the pen as they found it, the default one. The screen stores the rows of such lines
//! in history without the terminal core when later lines scroll them off at once (see
//! `Screen::advance`), so this module reads them exactly as the core would: the parameters as
//! vte 0.15 parses them (its parameter limit, saturating values, a colour's parameters taken
//! from the same list) and applied to the pen as alacritty_terminal 0.26 applies them.
//!
//! Only what can be read that way without the core is read: sequences of digits and `;`
//! (no sub-parameters, no private markers or intermediates), and every attribute except the
//! underline colour (`58`), which the core keeps outside the cell's colours. A line holding
//! anything else, or that leaves the pen changed, is not a styled line; it goes to the core.

mod blocks;

use alacritty_terminal::term::cell::Flags;
use alacritty_terminal::vte::ansi::{Color, NamedColor, Rgb};

/// vte's limit on the parameters of one sequence: a sequence with more is ignored whole.
const MAX_PARAMS: usize = 32;

/// A one in every byte of a word, and the high bit of every byte: for reading eight bytes at
/// once.
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = ONES * 0x80;

/// What a cell takes from the cursor besides its character: colours and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pen {
    pub fg: Color,
    pub bg: Color,
    pub flags: Flags,
}

impl Pen {
    /// The pen a reset leaves: the terminal's own colours, no flags.
    pub const DEFAULT: Pen = Pen {
        fg: Color::Named(NamedColor::Foreground),
        bg: Color::Named(NamedColor::Background),
        flags: Flags::empty(),
    };
}

const NORMAL: [NamedColor; 8] = [
    NamedColor::Black,
    NamedColor::Red,
    NamedColor::Green,
    NamedColor::Yellow,
    NamedColor::Blue,
    NamedColor::Magenta,
    NamedColor::Cyan,
    NamedColor::White,
];

const BRIGHT: [NamedColor; 8] = [
    NamedColor::BrightBlack,
    NamedColor::BrightRed,
    NamedColor::BrightGreen,
    NamedColor::BrightYellow,
    NamedColor::BrightBlue,
    NamedColor::BrightMagenta,
    NamedColor::BrightCyan,
    NamedColor::BrightWhite,
];

/// What reading a sequence or a line found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scan {
    /// One this module reads, of this many bytes (for a line, those before its `\r\n`),
    /// printing this many characters (none for a sequence).
    Read(usize, usize),
    /// The bytes end before it does, with nothing yet that rules it out.
    Cut,
    /// Not one this module reads.
    Not,
}

/// Reads the SGR sequence `bytes` starts with (`bytes[0]` is ESC) and applies it to `pen`.
/// When it is not one this module reads, or is cut off by the end of `bytes`, `pen` may have
/// changed and must not be used.
fn sgr(bytes: &[u8], pen: &mut Pen) -> Scan {
    match bytes.get(1) {
        Some(b'[') => {}
        Some(_) => return Scan::Not,
        None => return Scan::Cut,
    }
    // A reset, half of what a program colouring words writes, needs no list.
    match bytes.get(2..4) {
        Some([b'm', _]) => {
            *pen = Pen::DEFAULT;
            return Scan::Read(3, 0);
        }
        Some(b"0m") => {
            *pen = Pen::DEFAULT;
            return Scan::Read(4, 0);
        }
        _ => {}
    }
    let mut params = Params {
        values: [0; MAX_PARAMS],
        len: 0,
    };
    // Eight bytes at a time while eight are left: the first byte of a word that is neither a
    // digit nor `;` ends the sequence (an `m`) or rules it out, and each `;` before it ends a
    // parameter, whose digits are then read on their own. Where a parameter starts is known
    // before its digits are read, so the next one does not wait for them.
    let mut start = 2;
    let mut word_at = 2;
    while let Some(word) = word_from(bytes, word_at) {
        let (digits, semicolons) = digits_and_semicolons(word);
        let stop = !(digits | semicolons) & HIGH;
        let mut ends = semicolons & stop.wrapping_sub(1) & !stop;
        while ends != 0 {
            let end = word_at + (ends.trailing_zeros() / 8) as usize;
            params.push(value(bytes, start, end));
            start = end + 1;
            ends &= ends - 1;
        }
        if stop != 0 {
            let end = word_at + (stop.trailing_zeros() / 8) as usize;
            if bytes[end] != b'm' {
                return Scan::Not;
            }
            params.push(value(bytes, start, end));
            return params.finish(pen, end + 1);
        }
        word_at += 8;
    }
    // The last bytes one at a time, from the start of the parameter being read.
    loop {
        let (value, end) = long_param(bytes, start);
        let Some(&byte) = bytes.get(end) else {
            return Scan::Cut;
        };
        if byte != b';' && byte != b'm' {
            return Scan::Not;
        }
        params.push(value);
        start = end + 1;
        if byte == b'm' {
            return params.finish(pen, start);
        }
    }
}

/// The parameters of a sequence as vte collects them: at most [`MAX_PARAMS`], and a sequence
/// with more is ignored whole. vte sets its ignoring flag at a digit or a separator that finds
/// the list full; a digit there is always followed by a separator or the final byte (else the
/// sequence is cut off or not one read here, and the flag does not matter), so counting the
/// parameters as they end decides the same.
struct Params {
    values: [u16; MAX_PARAMS],
    /// How many ended, counting past the limit.
    len: usize,
}

impl Params {
    fn push(&mut self, value: u16) {
        if let Some(slot) = self.values.get_mut(self.len) {
            *slot = value;
        }
        self.len += 1;
    }

    /// Applies the sequence, `len` bytes long, to `pen`.
    fn finish(&self, pen: &mut Pen, len: usize) -> Scan {
        // vte hands a sequence past its limit to the core as ignored: no effect.
        if self.len <= MAX_PARAMS && apply(&self.values[..self.len], pen).is_none() {
            return Scan::Not;
        }
        Scan::Read(len, 0)
    }
}

/// The eight bytes from `at` in `bytes` as one word, the first in its lowest bits, when eight
/// are there.
fn word_from(bytes: &[u8], at: usize) -> Option<u64> {
    let word = bytes.get(at..)?.first_chunk::<8>()?;
    Some(u64::from_le_bytes(*word))
}

/// The high bit of each byte of `word` that is a digit, and of each that is `;`. Each byte is
/// classed on its own: its low seven bits plus `0x80 - n` reach `0x80` when they are `n` or
/// more and never carry out of the byte, and they equal `;` when their difference from it
/// plus `0x7f` stays under `0x80`; a byte with its high bit set is neither.
fn digits_and_semicolons(word: u64) -> (u64, u64) {
    let low = word & !HIGH;
    let ascii = !word & HIGH;
    let at_least = |n: u8| (low + ONES * u64::from(0x80 - n)) & HIGH;
    let digits = at_least(b'0') & !at_least(b':') & ascii;
    let apart = low ^ (ONES * u64::from(b';'));
    let semicolons = !((apart + ONES * 0x7f) | apart) & HIGH & ascii;
    (digits, semicolons)
}

/// The value of the parameter whose digits (nothing else) are `bytes[start..end]`: four or
/// fewer with eight bytes there to read are read as one word, the rest one at a time.
fn value(bytes: &[u8], start: usize, end: usize) -> u16 {
    let digits = end - start;
    match word_from(bytes, start) {
        Some(word) if digits <= 4 => four_digits(word, digits),
        _ => long_param(bytes, start).0,
    }
}

/// The value of the first `digits` bytes of `word` (four at most, all digits, the first in
/// the lowest byte). Subtracting `'0'` from each byte leaves the digits as their values, and
/// none of them borrows (the bytes above them may, which do not count). They are moved to the
/// top of the low four bytes, leading zeros below them, and combined in pairs.
fn four_digits(word: u64, digits: usize) -> u16 {
    let values = word.wrapping_sub(ONES * u64::from(b'0'));
    let kept = values & ((1u64 << (8 * digits)) - 1);
    let padded = kept << (8 * (4 - digits));
    // Each byte becomes ten times itself plus the next: bytes 0 and 2 hold the two pairs.
    let pairs = padded * 10 + (padded >> 8);
    ((pairs & 0xff) * 100 + ((pairs >> 16) & 0xff)) as u16
}

/// The parameter that starts at `at` in `bytes`, a digit at a time: its value, saturating at
/// `u16::MAX` as vte's does (held wider and capped at each digit, which gives the same value
/// without an overflow check), and where its digits end.
fn long_param(bytes: &[u8], mut at: usize) -> (u16, usize) {
    let mut value: u32 = 0;
    while let Some(digit) = bytes
        .get(at)
        .map(|byte| byte.wrapping_sub(b'0'))
        .filter(|digit| *digit < 10)
    {
        value = (value * 10 + u32::from(digit)).min(u32::from(u16::MAX));
        at += 1;
    }
    (value as u16, at)
}

/// Applies SGR parameters to `pen` as the core would; `None` for the underline colour.
fn apply(params: &[u16], pen: &mut Pen) -> Option<()> {
    let mut params = params.iter().copied();
    while let Some(param) = params.next() {
        match param {
            0 => *pen = Pen::DEFAULT,
            1 => pen.flags.insert(Flags::BOLD),
            2 => pen.flags.insert(Flags::DIM),
            3 => pen.flags.insert(Flags::ITALIC),
            4 => {
                pen.flags.remove(Flags::ALL_UNDERLINES);
                pen.flags.insert(Flags::UNDERLINE);
            }
            7 => pen.flags.insert(Flags::INVERSE),
            8 => pen.flags.insert(Flags::HIDDEN),
            9 => pen.flags.insert(Flags::STRIKEOUT),
            21 => pen.flags.remove(Flags::BOLD),
            22 => pen.flags.remove(Flags::BOLD | Flags::DIM),
            23 => pen.flags.remove(Flags::ITALIC),
            24 => pen.flags.remove(Flags::ALL_UNDERLINES),
            27 => pen.flags.remove(Flags::INVERSE),
            28 => pen.flags.remove(Flags::HIDDEN),
            29 => pen.flags.remove(Flags::STRIKEOUT),
            30..=37 => pen.fg = Color::Named(NORMAL[usize::from(param - 30)]),
            38 => {
                if let Some(color) = color(&mut params) {
                    pen.fg = color;
                }
            }
            39 => pen.fg = Color::Named(NamedColor::Foreground),
            40..=47 => pen.bg = Color::Named(NORMAL[usize::from(param - 40)]),
            48 => {
                if let Some(color) = color(&mut params) {
                    pen.bg = color;
                }
            }
            49 => pen.bg = Color::Named(NamedColor::Background),
            // The underline colour lives in the cell's extra part, not in a pen.
            58 => return None,
            // Clearing an underline colour the pen cannot have: nothing changes.
            59 => {}
            90..=97 => pen.fg = Color::Named(BRIGHT[usize::from(param - 90)]),
            100..=107 => pen.bg = Color::Named(BRIGHT[usize::from(param - 100)]),
            // Blinking (5, 6, 25) and unknown attributes: the core changes nothing.
            _ => {}
        }
    }
    Some(())
}

/// A colour's parameters after `38` or `48`, taken from the same list as vte takes them: the
/// parameters read before one that does not fit are used up even when no colour results.
fn color(params: &mut impl Iterator<Item = u16>) -> Option<Color> {
    match params.next() {
        Some(2) => Some(Color::Spec(Rgb {
            r: u8::try_from(params.next()?).ok()?,
            g: u8::try_from(params.next()?).ok()?,
            b: u8::try_from(params.next()?).ok()?,
        })),
        Some(5) => Some(Color::Indexed(u8::try_from(params.next()?).ok()?)),
        _ => None,
    }
}

/// Characters of a styled line drawn with one pen: `len` bytes from `at` (an offset in the
/// bytes [`line`] was given, plus its `base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub at: usize,
    pub len: usize,
    pub pen: Pen,
}

/// The styled line `bytes` starts with, if it does: the length of its text (everything before
/// its `\r\n`) and how many characters it prints ([`Scan::Cut`] when `bytes` may be the
/// start of one). A line of plain text is a styled line too. With `segments`, the line's
/// characters are appended to it as they are drawn, at offsets from `base`, when it holds a
/// sequence (nothing is appended for a plain line, or when `bytes` does not start with a
/// styled line).
pub(crate) fn line(bytes: &[u8], base: usize, mut segments: Option<&mut Vec<Segment>>) -> Scan {
    if segments.is_none() {
        // A plain line is found by its first text run; a line with a sequence in it is read
        // by blocks when they can answer for it, and by the careful reader below otherwise.
        let text = printable_end(bytes, 0);
        match bytes.get(text..) {
            Some([b'\r', b'\n', ..]) => return Scan::Read(text, text),
            Some([0x1b, ..]) => {
                if let Some((len, printed)) = blocks::line(bytes) {
                    return Scan::Read(len, printed);
                }
            }
            _ => {}
        }
    }
    let mut pen = Pen::DEFAULT;
    let (mut at, mut printed) = (0, 0);
    let kept = segments.as_ref().map_or(0, |segments| segments.len());
    let mut styled = false;
    loop {
        let text = printable_end(bytes, at);
        if text > at {
            if let Some(segments) = segments.as_deref_mut() {
                segments.push(Segment {
                    at: base + at,
                    len: text - at,
                    pen,
                });
            }
            printed += text - at;
            at = text;
        }
        let read = match bytes.get(at..) {
            Some([0x1b, ..]) => sgr(&bytes[at..], &mut pen),
            Some([b'\r', b'\n', ..]) if pen == Pen::DEFAULT => {
                if let Some(segments) = segments.as_deref_mut().filter(|_| !styled) {
                    segments.truncate(kept);
                }
                return Scan::Read(at, printed);
            }
            Some([] | [b'\r']) | None => Scan::Cut,
            Some(_) => Scan::Not,
        };
        match read {
            Scan::Read(len, _) => {
                at += len;
                styled = true;
            }
            cut_or_not => {
                if let Some(segments) = segments {
                    segments.truncate(kept);
                }
                return cut_or_not;
            }
        }
    }
}

/// Where the printable ASCII (`0x20..=0x7e`) that starts at `at` in `bytes` ends: eight
/// bytes at a time while eight are left, then one at a time.
fn printable_end(bytes: &[u8], mut at: usize) -> usize {
    while let Some(word) = word_from(bytes, at) {
        let found = unprintable(word);
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while bytes.get(at).is_some_and(|&b| (0x20..=0x7e).contains(&b)) {
        at += 1;
    }
    at
}

/// The bytes of `word` (eight, the first in its lowest bits) that are not printable ASCII:
/// the high bit of the first such byte is set, and none below it (those above it may be set
/// whatever their byte). Below that first byte no byte borrows or carries into the next: each
/// is `0x20..=0x7e`, so subtracting `0x20` and adding 1 stay inside it. The byte itself is
/// flagged by the subtraction when it is under `0x20` (it wraps to `0xe0` or more while its
/// own high bit is clear), by the addition when it is `0x7f`, and by its own high bit above.
fn unprintable(word: u64) -> u64 {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let delete = word.wrapping_add(ONES);
    (below_space | delete | word) & HIGH
}

/// One row of a styled line, as [`rows`] hands it out.
pub(crate) struct RowParts<'a> {
    /// The row's characters, from its first cell.
    pub text: &'a [u8],
    /// The pens of `text`'s cells: counts covering `text`, no two neighbours equal.
    pub runs: &'a [(usize, Pen)],
    /// The line goes on in the next row.
    pub wrapped: bool,
    /// For a row the line wrapped into, the pen's background when it did (the colour the core
    /// clears a row with when it scrolls one in); `None` for the line's first row.
    pub wrap_bg: Option<Color>,
}

/// Scratch space for [`rows`], kept by its caller so that a run of lines allocates nothing.
#[derive(Debug, Default, Clone)]
pub(crate) struct RowScratch {
    text: Vec<u8>,
    runs: Vec<(usize, Pen)>,
}

/// Cuts a styled line, given as its [`Segment`]s in `bytes`, into rows of `cols` cells and
/// hands each to `emit`, first to last.
pub(crate) fn rows(
    bytes: &[u8],
    segments: &[Segment],
    cols: usize,
    scratch: &mut RowScratch,
    mut emit: impl FnMut(&RowParts<'_>),
) {
    let cols = cols.max(1);
    let (text, runs) = (&mut scratch.text, &mut scratch.runs);
    text.clear();
    runs.clear();
    let mut wrap_bg = None;
    for segment in segments {
        let mut chars = &bytes[segment.at..segment.at + segment.len];
        while !chars.is_empty() {
            if text.len() == cols {
                // The core wraps when a character comes with the row full, with the pen of
                // that moment.
                emit(&RowParts {
                    text,
                    runs,
                    wrapped: true,
                    wrap_bg,
                });
                text.clear();
                runs.clear();
                wrap_bg = Some(segment.pen.bg);
            }
            let take = chars.len().min(cols - text.len());
            text.extend_from_slice(&chars[..take]);
            match runs.last_mut() {
                Some((count, last)) if *last == segment.pen => *count += take,
                _ => runs.push((take, segment.pen)),
            }
            chars = &chars[take..];
        }
    }
    emit(&RowParts {
        text,
        runs,
        wrapped: false,
        wrap_bg,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_leave_the_pen_changed_or_hold_other_sequences_are_not_styled() {
        let line = |bytes: &[u8]| {
            let mut segments = Vec::new();
            let found = line(bytes, 0, Some(&mut segments));
            if !matches!(found, Scan::Read(..)) {
                assert!(segments.is_empty());
            }
            assert_eq!(line(bytes, 0, None), found, "without segments");
            found
        };
        assert_eq!(line(b"abc\r\n"), Scan::Read(3, 3));
        assert_eq!(line(b"\x1b[1;31mab\x1b[0mc\r\nrest"), Scan::Read(14, 3));
        assert_eq!(line(b"\x1b[31mab\x1b[mc\r\n"), Scan::Read(11, 3));
        assert_eq!(line(b"\x1b[31mab\r\n"), Scan::Not, "the pen is left red");
        assert_eq!(
            line(b"\x1b[4:3mab\x1b[0m\r\n"),
            Scan::Not,
            "a sub-parameter"
        );
        assert_eq!(
            line(b"\x1b[58;5;3mab\x1b[0m\r\n"),
            Scan::Not,
            "an underline colour"
        );
        assert_eq!(line(b"\x1b[?1mab\r\n"), Scan::Not, "a private marker");
        assert_eq!(line(b"\x1b[2Jab\r\n"), Scan::Not, "another sequence");
        assert_eq!(line(b"ab\n"), Scan::Not);
        assert_eq!(line(b"a\tb\r\n"), Scan::Not);
        for cut in [&b"ab\x1b[3"[..], b"ab\x1b", b"ab\x1b[31mc", b"ab\r", b""] {
            assert_eq!(line(cut), Scan::Cut, "{cut:?}");
        }
    }

    #[test]
    fn printable_runs_end_at_the_first_byte_outside_printable_ascii() {
        // Every byte value at every place of a word and of the bytes after the last whole
        // word, from several starts, with printable bytes before it and bytes of every kind
        // (borrowing, carrying, high) after it.
        let after: [u8; 6] = [0x00, 0xff, 0x7f, 0x1f, 0x80, 0x20];
        for len in 1..21 {
            for place in 0..len {
                for value in 0..=255u8 {
                    let mut bytes: Vec<u8> = (0..len).map(|i| b' ' + (i * 13 % 95) as u8).collect();
                    bytes[place] = value;
                    for (i, byte) in bytes[place + 1..].iter_mut().enumerate() {
                        *byte = after[(i + usize::from(value)) % after.len()];
                    }
                    for start in [0, place / 2, place] {
                        let expected = bytes[start..]
                            .iter()
                            .position(|b| !(0x20..=0x7e).contains(b))
                            .map_or(len, |n| start + n);
                        assert_eq!(
                            printable_end(&bytes, start),
                            expected,
                            "{bytes:02x?} from {start}"
                        );
                    }
                }
            }
        }
        assert_eq!(printable_end(b"", 0), 0);
        assert_eq!(printable_end(b"abc", 3), 3);
    }

    #[test]
    fn bytes_read_a_word_at_a_time_are_classed_as_one_at_a_time() {
        // Every byte value at every place of a word, beside bytes of every kind.
        let fills: [u8; 8] = [0x00, 0xff, b'0', b'9', b';', b':', 0x7f, 0x80];
        for place in 0..8 {
            for value in 0..=255u8 {
                for fill in fills {
                    let mut word = [fill; 8];
                    word[place] = value;
                    word[(place + 3) % 8] = fills[usize::from(value) % 8];
                    let (digits, semicolons) = digits_and_semicolons(u64::from_le_bytes(word));
                    for (i, byte) in word.iter().enumerate() {
                        let bit = 0x80u64 << (8 * i);
                        assert_eq!(
                            digits & bit != 0,
                            byte.is_ascii_digit(),
                            "{word:02x?} at {i}"
                        );
                        assert_eq!(semicolons & bit != 0, *byte == b';', "{word:02x?} at {i}");
                    }
                    assert_eq!((digits | semicolons) & !HIGH, 0);
                }
            }
        }
    }

    #[test]
    fn parameters_read_a_word_at_a_time_are_read_as_one_digit_at_a_time() {
        // Every parameter of up to four digits, with leading zeros, and some longer, with
        // bytes of every kind after them: read eight bytes at once where it can be, and a
        // digit at a time where it cannot, the value is the same.
        let after: [u8; 5] = [0x00, 0xff, b'9', b';', 0x2f];
        let mut checked = 0;
        for digits in 0..7u32 {
            let values: Vec<u32> = match digits {
                0 => vec![0],
                1..=4 => (0..10u32.pow(digits)).collect(),
                _ => (0..10u32.pow(digits)).step_by(997).collect(),
            };
            for number in values {
                for end in [b';', b'm', 0x00, 0xff] {
                    let mut bytes = match digits {
                        0 => Vec::new(),
                        _ => format!("{number:0width$}", width = digits as usize).into_bytes(),
                    };
                    bytes.push(end);
                    let short = bytes.len();
                    bytes.extend(after.iter().cycle().skip(number as usize % 5).take(8));
                    let slow = long_param(&bytes, 0);
                    assert_eq!(slow.1, digits as usize, "{bytes:?}");
                    assert_eq!(u32::from(slow.0), number.min(65535), "{bytes:?}");
                    assert_eq!(value(&bytes, 0, slow.1), slow.0, "{bytes:?}");
                    assert_eq!(value(&bytes[..short], 0, slow.1), slow.0, "{bytes:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 40_000, "{checked}");
    }

    /// Reads an SGR sequence one byte at a time, collecting its parameters as vte does before
    /// applying them: the reading [`sgr`] had before it read words, kept as its reference.
    fn sgr_a_byte_at_a_time(bytes: &[u8], pen: &mut Pen) -> Scan {
        match bytes.get(1) {
            Some(b'[') => {}
            Some(_) => return Scan::Not,
            None => return Scan::Cut,
        }
        let mut values = Vec::new();
        let mut current: u32 = 0;
        for (at, &byte) in bytes.iter().enumerate().skip(2) {
            match byte {
                b'0'..=b'9' => {
                    current = (current * 10 + u32::from(byte - b'0')).min(u32::from(u16::MAX));
                }
                b';' | b'm' => {
                    values.push(current as u16);
                    current = 0;
                    if byte == b'm' {
                        if values.len() <= MAX_PARAMS && apply(&values, pen).is_none() {
                            return Scan::Not;
                        }
                        return Scan::Read(at + 1, 0);
                    }
                }
                _ => return Scan::Not,
            }
        }
        Scan::Cut
    }

    #[test]
    fn sequences_read_a_word_at_a_time_are_read_as_one_byte_at_a_time() {
        const PARAMS: &[&[u8]] = &[
            b"",
            b"0",
            b"1",
            b"4",
            b"7",
            b"22",
            b"31",
            b"38",
            b"48",
            b"5",
            b"2",
            b"58",
            b"255",
            b"256",
            b"300",
            b"0000",
            b"00001",
            b"9999",
            b"65535",
            b"65536",
            b"99999999",
        ];
        const ENDS: &[&[u8]] = &[b"m", b"m", b"m", b"m", b":", b"?", b"J", b"\x1b", b"\xc3"];
        const AFTER: &[u8] = b"ab \x1b[0m\r\n\x00\xff9;m";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let reds = Pen {
            fg: Color::Named(NamedColor::Red),
            bg: Color::Indexed(3),
            flags: Flags::BOLD,
        };
        let mut read = 0;
        for _ in 0..20_000 {
            let mut bytes = b"\x1b[".to_vec();
            let count = match next(8) {
                0 => 30 + next(6),
                _ => 1 + next(9),
            };
            for i in 0..count {
                if i > 0 {
                    bytes.push(b';');
                }
                bytes.extend_from_slice(PARAMS[next(PARAMS.len())]);
            }
            bytes.extend_from_slice(ENDS[next(ENDS.len())]);
            let skip = next(AFTER.len());
            bytes.extend_from_slice(&AFTER[skip..]);
            for len in 0..=bytes.len() {
                let start = if next(2) == 0 { Pen::DEFAULT } else { reds };
                let (mut got, mut want) = (start, start);
                let found = sgr(&bytes[..len], &mut got);
                assert_eq!(
                    found,
                    sgr_a_byte_at_a_time(&bytes[..len], &mut want),
                    "{:?}",
                    String::from_utf8_lossy(&bytes[..len])
                );
                if let Scan::Read(..) = found {
                    assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&bytes[..len]));
                    read += 1;
                }
            }
        }
        assert!(read > 20_000, "{read} sequences read");
    }

    #[test]
    fn parameters_are_read_as_vte_reads_them() {
        let mut pen = Pen::DEFAULT;
        // A colour that does not fit uses up what it read: `300` goes, `1` is still applied.
        assert_eq!(sgr(b"\x1b[38;5;300;1m", &mut pen), Scan::Read(13, 0));
        assert_eq!(pen.fg, Pen::DEFAULT.fg);
        assert!(pen.flags.contains(Flags::BOLD));
        // Values saturate.
        let mut pen = Pen::DEFAULT;
        sgr(b"\x1b[48;5;99999999m", &mut pen);
        assert_eq!(pen.bg, Pen::DEFAULT.bg);
        // More than 32 parameters: the whole sequence is ignored.
        let mut pen = Pen::DEFAULT;
        let long = format!("\x1b[{}1m", "0;".repeat(32));
        assert_eq!(sgr(long.as_bytes(), &mut pen), Scan::Read(long.len(), 0));
        assert_eq!(pen, Pen::DEFAULT);
        // ... the 33rd counted whether it has digits or is empty.
        let empty_last = format!("\x1b[1;{}m", "0;".repeat(31));
        assert_eq!(
            sgr(empty_last.as_bytes(), &mut pen),
            Scan::Read(empty_last.len(), 0)
        );
        assert_eq!(pen, Pen::DEFAULT);
        let fits = format!("\x1b[{}1m", "0;".repeat(31));
        sgr(fits.as_bytes(), &mut pen);
        assert!(pen.flags.contains(Flags::BOLD));
    }

    #[test]
    fn rows_wrap_with_the_pen_of_the_character_that_wraps() {
        let bytes = b"ab\x1b[41mcd\x1b[0me\r\n";
        let mut segments = Vec::new();
        assert_eq!(line(bytes, 0, Some(&mut segments)), Scan::Read(14, 5));
        let mut got = Vec::new();
        rows(bytes, &segments, 3, &mut RowScratch::default(), |row| {
            got.push((
                row.text.to_vec(),
                row.runs.to_vec(),
                row.wrapped,
                row.wrap_bg,
            ))
        });
        let red = Pen {
            bg: Color::Named(NamedColor::Red),
            ..Pen::DEFAULT
        };
        assert_eq!(
            got,
            vec![
                (
                    b"abc".to_vec(),
                    vec![(2, Pen::DEFAULT), (1, red)],
                    true,
                    None
                ),
                (
                    b"de".to_vec(),
                    vec![(1, red), (1, Pen::DEFAULT)],
                    false,
                    Some(red.bg)
                ),
            ]
        );
    }
}
