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

use alacritty_terminal::term::cell::Flags;
use alacritty_terminal::vte::ansi::{Color, NamedColor, Rgb};

/// vte's limit on the parameters of one sequence: a sequence with more is ignored whole.
const MAX_PARAMS: usize = 32;

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
    // The parameters as vte collects them: at most MAX_PARAMS, and a sequence with more is
    // ignored whole. vte sets its ignoring flag at a digit or a separator that finds the list
    // full; a digit there is always followed by a separator or the final byte (else the
    // sequence is cut off or not one read here, and the flag does not matter), so checking at
    // the separators alone decides the same. A value saturates at u16::MAX as vte's does: held
    // wider and capped at each digit, which gives the same value without an overflow check.
    let mut values = [0u16; MAX_PARAMS];
    let mut len = 0;
    let mut current: u32 = 0;
    let mut ignoring = false;
    for (at, &byte) in bytes.iter().enumerate().skip(2) {
        match byte {
            b'0'..=b'9' => {
                current = (current * 10 + u32::from(byte - b'0')).min(u32::from(u16::MAX));
            }
            b';' | b'm' => {
                match values.get_mut(len) {
                    Some(slot) => {
                        *slot = current as u16;
                        len += 1;
                        current = 0;
                    }
                    None => ignoring = true,
                }
                if byte == b'm' {
                    // vte hands a sequence past its limit to the core as ignored: no effect.
                    if !ignoring && apply(&values[..len], pen).is_none() {
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
    let mut pen = Pen::DEFAULT;
    let (mut at, mut printed) = (0, 0);
    let kept = segments.as_ref().map_or(0, |segments| segments.len());
    let mut styled = false;
    loop {
        let text = bytes[at..]
            .iter()
            .position(|&b| !(0x20..=0x7e).contains(&b))
            .map_or(bytes.len(), |n| at + n);
        if let Some(segments) = segments.as_deref_mut().filter(|_| text > at) {
            segments.push(Segment {
                at: base + at,
                len: text - at,
                pen,
            });
        }
        printed += text - at;
        at = text;
        let read = match (bytes.get(at), bytes.get(at + 1)) {
            (Some(0x1b), _) => sgr(&bytes[at..], &mut pen),
            (Some(b'\r'), Some(b'\n')) if pen == Pen::DEFAULT => {
                if let Some(segments) = segments.as_deref_mut().filter(|_| !styled) {
                    segments.truncate(kept);
                }
                return Scan::Read(at, printed);
            }
            (None, _) | (Some(b'\r'), None) => Scan::Cut,
            _ => Scan::Not,
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
