//! Whether the screen model's escape-sequence parser is at rest: in its ground state with no
//! character half-read, where the next printable ASCII byte is printed as it is. The parser
//! (vte 0.15, inside `alacritty_terminal`) does not say; [`Follower`] is fed the same bytes in
//! the same order and moves between the same states, without any of the parser's actions.
//! The screen uses it to find runs of plain lines it can store without the core (see
//! `Screen::advance`).
//!
//! The states and their transitions are vte's: a sequence's kind (escape, CSI, DCS, OSC,
//! SOS/PM/APC) and how far into it the parser is. What the parser collects (parameters,
//! intermediates, an OSC's text) changes no state and is not kept. In the ground state only
//! `ESC` leads anywhere, so the follower jumps from one `ESC` to the next; a character whose
//! bytes are split between chunks ends at the first byte below 0x80, so a parser in the ground
//! state whose last byte was ASCII holds no part of one.

/// The parser's states, as vte names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Ground,
    Escape,
    EscapeIntermediate,
    CsiEntry,
    CsiParam,
    CsiIntermediate,
    CsiIgnore,
    DcsEntry,
    DcsParam,
    DcsIntermediate,
    DcsIgnore,
    DcsPassthrough,
    OscString,
    SosPmApcString,
}

/// Follows the parser's state over the bytes it is fed.
#[derive(Debug, Clone)]
pub struct Follower {
    state: State,
    /// The last byte fed: a line feed before any.
    last: u8,
}

impl Default for Follower {
    fn default() -> Follower {
        Follower {
            state: State::Ground,
            last: b'\n',
        }
    }
}

impl Follower {
    /// Follows the parser over `bytes`.
    pub fn advance(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            if self.state == State::Ground {
                match memchr::memchr(0x1b, &bytes[at..]) {
                    Some(esc) => {
                        self.state = State::Escape;
                        at += esc + 1;
                    }
                    None => break,
                }
            } else {
                self.state = next(self.state, bytes[at]);
                at += 1;
            }
        }
        if let Some(&last) = bytes.last() {
            self.last = last;
        }
    }

    /// Follows the parser over lines of printable ASCII, each ended by `\r\n`, given from a
    /// rest: they leave it at rest.
    pub fn passed_plain_lines(&mut self) {
        debug_assert!(self.at_rest());
        self.last = b'\n';
    }

    /// Whether the parser is in its ground state with no character half-read.
    pub fn at_rest(&self) -> bool {
        self.state == State::Ground && self.last < 0x80
    }
}

/// C0 controls a sequence executes without leaving its state (`CAN`, `SUB` and `ESC` are not
/// among them).
fn executed(byte: u8) -> bool {
    matches!(byte, 0x00..=0x17 | 0x19 | 0x1c..=0x1f)
}

/// What any state but the ground and the strings' own does with a byte it has no rule for:
/// `CAN` and `SUB` end the sequence, `ESC` starts another, the rest change nothing.
fn anywhere(state: State, byte: u8) -> State {
    match byte {
        0x18 | 0x1a => State::Ground,
        0x1b => State::Escape,
        _ => state,
    }
}

/// The state after `byte` in `state` (never the ground state: it is followed in bulk).
fn next(state: State, byte: u8) -> State {
    use State::*;
    match state {
        Ground => match byte {
            0x1b => Escape,
            _ => Ground,
        },
        Escape => match byte {
            b if executed(b) => Escape,
            0x20..=0x2f => EscapeIntermediate,
            0x50 => DcsEntry,
            0x58 | 0x5e | 0x5f => SosPmApcString,
            0x5b => CsiEntry,
            0x5d => OscString,
            0x30..=0x7e => Ground,
            0x18 | 0x1a => Ground,
            _ => Escape,
        },
        EscapeIntermediate => match byte {
            b if executed(b) => state,
            0x20..=0x2f | 0x7f => state,
            0x30..=0x7e => Ground,
            _ => anywhere(state, byte),
        },
        CsiEntry => match byte {
            b if executed(b) => state,
            0x20..=0x2f => CsiIntermediate,
            0x30..=0x3f => CsiParam,
            0x40..=0x7e => Ground,
            _ => anywhere(state, byte),
        },
        CsiParam => match byte {
            b if executed(b) => state,
            0x20..=0x2f => CsiIntermediate,
            0x30..=0x3b | 0x7f => state,
            0x3c..=0x3f => CsiIgnore,
            0x40..=0x7e => Ground,
            _ => anywhere(state, byte),
        },
        CsiIntermediate => match byte {
            b if executed(b) => state,
            0x20..=0x2f => state,
            0x30..=0x3f => CsiIgnore,
            0x40..=0x7e => Ground,
            _ => anywhere(state, byte),
        },
        CsiIgnore => match byte {
            b if executed(b) => state,
            0x20..=0x3f | 0x7f => state,
            0x40..=0x7e => Ground,
            _ => anywhere(state, byte),
        },
        DcsEntry => match byte {
            b if executed(b) => state,
            0x20..=0x2f => DcsIntermediate,
            0x30..=0x3f => DcsParam,
            0x40..=0x7e => DcsPassthrough,
            0x7f => state,
            _ => anywhere(state, byte),
        },
        DcsParam => match byte {
            b if executed(b) => state,
            0x20..=0x2f => DcsIntermediate,
            0x30..=0x3b | 0x7f => state,
            0x3c..=0x3f => DcsIgnore,
            0x40..=0x7e => DcsPassthrough,
            _ => anywhere(state, byte),
        },
        DcsIntermediate => match byte {
            b if executed(b) => state,
            0x20..=0x2f | 0x7f => state,
            0x30..=0x3f => DcsIgnore,
            0x40..=0x7e => DcsPassthrough,
            _ => anywhere(state, byte),
        },
        DcsIgnore | SosPmApcString => anywhere(state, byte),
        DcsPassthrough => match byte {
            0x18 | 0x1a | 0x9c => Ground,
            0x1b => Escape,
            _ => state,
        },
        OscString => match byte {
            0x07 | 0x18 | 0x1a => Ground,
            0x1b => Escape,
            _ => state,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::Follower;
    use alacritty_terminal::vte::{Params, Parser, Perform};

    /// Records what the parser does with the byte fed after a prefix.
    #[derive(Default)]
    struct Seen(Vec<String>);

    impl Perform for Seen {
        fn print(&mut self, c: char) {
            self.0.push(format!("print {c:?}"));
        }
        fn execute(&mut self, byte: u8) {
            self.0.push(format!("execute {byte:#x}"));
        }
        fn hook(&mut self, _: &Params, _: &[u8], _: bool, action: char) {
            self.0.push(format!("hook {action:?}"));
        }
        fn put(&mut self, byte: u8) {
            self.0.push(format!("put {byte:#x}"));
        }
        fn unhook(&mut self) {
            self.0.push("unhook".into());
        }
        fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
            self.0.push("osc".into());
        }
        fn csi_dispatch(&mut self, _: &Params, _: &[u8], _: bool, action: char) {
            self.0.push(format!("csi {action:?}"));
        }
        fn esc_dispatch(&mut self, _: &[u8], _: bool, byte: u8) {
            self.0.push(format!("esc {byte:#x}"));
        }
    }

    /// Whether vte prints `Z` and nothing else when fed it after `prefix` (in `chunks`): at
    /// rest, as the follower means it.
    fn vte_at_rest(chunks: &[&[u8]]) -> bool {
        let mut parser = Parser::new();
        let mut seen = Seen::default();
        for chunk in chunks {
            parser.advance(&mut seen, chunk);
        }
        seen.0.clear();
        parser.advance(&mut seen, b"Z");
        seen.0 == ["print 'Z'"]
    }

    use crate::test_rng::Rng;

    /// Bytes that move vte between its states, and some that do not.
    const PIECES: &[&[u8]] = &[
        b"\x1b",
        b"[",
        b"]",
        b"P",
        b"X",
        b"^",
        b"_",
        b"\\",
        b"\x07",
        b"\x18",
        b"\x1a",
        b"\x9c",
        b"0",
        b"1;2",
        b":",
        b"?",
        b">",
        b" ",
        b"!",
        b"m",
        b"q",
        b"A",
        b"\r\n",
        b"\n",
        b"\x7f",
        b"text",
        b"\xc3",
        b"\xa9",
        b"\xe2\x82",
        b"\xac",
        b"\xf0\x9f\x98",
        b"\x80",
        b"\x00",
        b"(",
        b"#",
        b"8",
        b"~",
    ];

    /// The follower says "at rest" exactly where vte prints the next ASCII letter as it is,
    /// after any mix of sequences split anywhere between chunks. Where the last byte was not
    /// ASCII the follower says "not at rest" even when vte is (a whole character ended
    /// there); it never says "at rest" where vte is not.
    #[test]
    fn the_follower_is_at_rest_exactly_where_vte_prints_the_next_letter() {
        let seed = std::env::var("BELFRY_PTY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x9e37_79b9_7f4a_7c15_u64);
        let mut rng = Rng(seed | 1);
        let (mut rests, mut restless) = (0, 0);
        for case in 0..3000 {
            let mut stream = Vec::new();
            for _ in 0..1 + rng.next() % 12 {
                stream.extend_from_slice(PIECES[(rng.next() % PIECES.len() as u64) as usize]);
            }
            let cut = (rng.next() % (stream.len() as u64 + 1)) as usize;
            let (first, second) = stream.split_at(cut);
            let mut follower = Follower::default();
            follower.advance(first);
            follower.advance(second);
            let vte = vte_at_rest(&[first, second]);
            let ascii_last = stream.last().is_none_or(|&b| b < 0x80);
            if ascii_last {
                assert_eq!(
                    follower.at_rest(),
                    vte,
                    "seed {seed} case {case}: {:?} cut at {cut}",
                    String::from_utf8_lossy(&stream)
                );
            } else {
                assert!(!follower.at_rest(), "seed {seed} case {case}: {stream:?}");
            }
            if vte {
                rests += 1;
            } else {
                restless += 1;
            }
        }
        // Both answers must be common, or the test proves little.
        assert!(
            rests > 300 && restless > 300,
            "{rests} at rest, {restless} not"
        );
    }
}
