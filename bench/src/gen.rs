//! Deterministic test data: plain text and SGR-heavy text, from a fixed-seed generator, so
//! every run and every machine reads the same bytes.

use std::io::{self, BufWriter, Write};
use std::path::Path;

/// xorshift64*: small, fast and deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "the",
    "pane",
    "host",
    "revision",
    "guarded",
    "send",
    "output",
    "terminal",
    "screen",
    "model",
    "scrollback",
    "fn",
    "let",
    "mut",
    "impl",
    "struct",
    "return",
    "Ok(())",
    "Err(err)",
    "self.state",
    "lock()",
    "0x7f3a",
    "1234",
    "42",
    "src/main.rs:118:9",
    "warning:",
    "error[E0308]:",
    "-->",
    "|",
    "=",
    "compiling",
    "finished",
    "test",
    "passed",
    "failed",
    "ok",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "with",
    "for",
    "on",
    "as",
    "by",
    "Lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet,",
    "consectetur",
    "adipiscing",
    "elit.",
    "{",
    "}",
    "(",
    ");",
    "[INFO]",
    "[DEBUG]",
    "2024-01-01T00:00:00Z",
    "http://localhost:8080/",
];

/// The kinds of data set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Sgr,
}

fn sgr(rng: &mut Rng, out: &mut Vec<u8>) {
    match rng.below(6) {
        0 => write!(out, "\x1b[{};3{}m", rng.below(2), rng.below(8)),
        1 => write!(out, "\x1b[38;5;{}m", rng.below(256)),
        2 => write!(
            out,
            "\x1b[38;2;{};{};{}m",
            rng.below(256),
            rng.below(256),
            rng.below(256)
        ),
        3 => write!(
            out,
            "\x1b[1;4;38;5;{};48;5;{}m",
            rng.below(256),
            rng.below(256)
        ),
        4 => write!(out, "\x1b[7;9{}m", rng.below(8)),
        _ => write!(
            out,
            "\x1b[3;48;2;{};{};{}m",
            rng.below(256),
            rng.below(256),
            rng.below(256)
        ),
    }
    .expect("writing to a Vec cannot fail");
}

/// One line (with its `\n`). Plain lines are 0–110 characters (some wrap at 80 columns);
/// SGR lines colour every word and reset after it, about half their bytes being escapes.
pub fn line(rng: &mut Rng, kind: Kind, out: &mut Vec<u8>) {
    let words = rng.below(17);
    let mut width = 0;
    if rng.below(4) == 0 {
        let indent = rng.below(9) as usize;
        out.extend(std::iter::repeat_n(b' ', indent));
        width += indent;
    }
    for i in 0..words {
        let word = WORDS[rng.below(WORDS.len() as u64) as usize];
        if width + word.len() + 1 > 110 {
            break;
        }
        if i > 0 {
            out.push(b' ');
            width += 1;
        }
        if kind == Kind::Sgr {
            sgr(rng, out);
            out.extend_from_slice(word.as_bytes());
            out.extend_from_slice(if rng.below(2) == 0 {
                b"\x1b[0m"
            } else {
                b"\x1b[m"
            });
        } else {
            out.extend_from_slice(word.as_bytes());
        }
        width += word.len();
    }
    out.push(b'\n');
}

/// Writes about `bytes` bytes (never more) of `kind` to `path`, ending at a line boundary.
pub fn generate(kind: Kind, bytes: u64, path: &Path) -> io::Result<u64> {
    let seed = match kind {
        Kind::Plain => 0x0062_656c_6672_7931,
        Kind::Sgr => 0x0062_656c_6672_7932,
    };
    let mut rng = Rng::new(seed);
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut written = 0u64;
    let mut buf = Vec::with_capacity(4096);
    // Bounded: each line adds at least one byte.
    for _ in 0..bytes {
        buf.clear();
        line(&mut rng, kind, &mut buf);
        if written + buf.len() as u64 > bytes {
            break;
        }
        out.write_all(&buf)?;
        written += buf.len() as u64;
    }
    out.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_bounded() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let (mut ra, mut rb) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            line(&mut ra, Kind::Sgr, &mut a);
            line(&mut rb, Kind::Sgr, &mut b);
        }
        assert_eq!(a, b);
        let escapes = a.iter().filter(|&&c| c == 0x1b).count();
        assert!(escapes > 100, "SGR data must be escape-heavy");
    }
}
