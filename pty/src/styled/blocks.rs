//! The question the screen asks of every line while a program prints — is it a styled line,
//! and how many characters does it print — answered 64 bytes at a time, for the lines whose
//! answer does not need their parameters' values: those whose last sequence is a reset
//! (`ESC[m`, `ESC[0m`), and those with no sequence at all. The careful reader
//! ([`super::line`]) answers every other line, and every line whose segments are wanted.
//!
//! Each block of 64 bytes is classed into one bit per byte and class (unprintable, `ESC`, `[`,
//! a parameter byte — a digit or `;` —, `m`, `5` and `8`), sixteen bytes at a time with SSE2
//! on x86_64. Where every sequence's parameters end then follows from the classes without a
//! loop over its bytes: adding a one at each sequence's first parameter byte to the bits of
//! the parameter bytes carries through that run of them and stops at the first other byte,
//! the sequence's final byte, which must be `m`. A sequence cut by the end of a block carries
//! into the next one.
//!
//! The answer is the careful reader's exactly (`tests::blocks_answer_as_the_careful_reader`):
//! a sequence is read when it is `ESC [`, digits and `;`, then `m`, as the careful reader
//! reads it; the line ends at its first byte that is neither printable nor such a sequence,
//! which must begin `\r\n`; after a reset the pen is the default one whatever came before; and
//! the underline colour (`58`), the one attribute the careful reader refuses, cannot hide in
//! parameters that never hold a `5` followed by an `8`.

/// One bit per byte of a block and class, the block's first byte in the lowest bit: what
/// every block needs, and what only a block with a sequence in it does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ends {
    /// Outside printable ASCII (`0x20..=0x7e`).
    unprintable: u64,
    esc: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Params {
    open: u64,
    /// A digit or `;`.
    param: u64,
    m: u64,
    five: u64,
    eight: u64,
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn ends(block: &[u8; 64]) -> Ends {
    // SAFETY: the build enables SSE2 (the `cfg` above; every x86_64 target does), so the
    // CPU running this has it.
    unsafe { sse2::ends(block) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn params(block: &[u8; 64]) -> Params {
    // SAFETY: as in `ends`.
    unsafe { sse2::params(block) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_loadu_si128,
        _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };

    use super::{Ends, Params};

    /// The block's four quarters of 16 bytes.
    #[target_feature(enable = "sse2")]
    fn quarters(block: &[u8; 64]) -> [__m128i; 4] {
        // SAFETY: each pointer is to 16 of the block's bytes (`i * 16 + 16 <= 64`), and an
        // unaligned load reads exactly those 16, with no alignment required.
        std::array::from_fn(|i| unsafe { _mm_loadu_si128(block[i * 16..].as_ptr().cast()) })
    }

    /// The bits of the four quarters' bytes that `test` marks.
    #[target_feature(enable = "sse2")]
    fn bits(quarters: &[__m128i; 4], test: impl Fn(__m128i) -> __m128i) -> u64 {
        let mut bits = 0;
        for (i, &quarter) in quarters.iter().enumerate() {
            bits |= u64::from(_mm_movemask_epi8(test(quarter)) as u16) << (16 * i);
        }
        bits
    }

    #[target_feature(enable = "sse2")]
    fn eq(v: __m128i, byte: u8) -> __m128i {
        _mm_cmpeq_epi8(v, _mm_set1_epi8(byte as i8))
    }

    /// Bytes from `low` to `high`, both below 0x80 (signed comparisons: bytes from 0x80 up
    /// are negative, so below `low`).
    #[target_feature(enable = "sse2")]
    fn within(v: __m128i, low: u8, high: u8) -> __m128i {
        _mm_and_si128(
            _mm_cmpgt_epi8(v, _mm_set1_epi8(low as i8 - 1)),
            _mm_cmplt_epi8(v, _mm_set1_epi8(high as i8 + 1)),
        )
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn ends(block: &[u8; 64]) -> Ends {
        let quarters = quarters(block);
        Ends {
            unprintable: !bits(&quarters, |v| within(v, 0x20, 0x7e)),
            esc: bits(&quarters, |v| eq(v, 0x1b)),
        }
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn params(block: &[u8; 64]) -> Params {
        let quarters = quarters(block);
        Params {
            open: bits(&quarters, |v| eq(v, b'[')),
            param: bits(&quarters, |v| {
                _mm_or_si128(within(v, b'0', b'9'), eq(v, b';'))
            }),
            m: bits(&quarters, |v| eq(v, b'm')),
            five: bits(&quarters, |v| eq(v, b'5')),
            eight: bits(&quarters, |v| eq(v, b'8')),
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn ends(block: &[u8; 64]) -> Ends {
    ends_bytes(block)
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn params(block: &[u8; 64]) -> Params {
    params_bytes(block)
}

/// The bits of `block`'s bytes that `test` marks, a byte at a time.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn bits_bytes(block: &[u8; 64], test: impl Fn(u8) -> bool) -> u64 {
    block
        .iter()
        .enumerate()
        .filter(|(_, &byte)| test(byte))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// [`ends`] a byte at a time: the reference the SSE2 version is tested against, and the
/// version used where there is no SSE2.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn ends_bytes(block: &[u8; 64]) -> Ends {
    Ends {
        unprintable: bits_bytes(block, |b| !(0x20..=0x7e).contains(&b)),
        esc: bits_bytes(block, |b| b == 0x1b),
    }
}

/// [`params`] a byte at a time, as [`ends_bytes`].
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn params_bytes(block: &[u8; 64]) -> Params {
    Params {
        open: bits_bytes(block, |b| b == b'['),
        param: bits_bytes(block, |b| b.is_ascii_digit() || b == b';'),
        m: bits_bytes(block, |b| b == b'm'),
        five: bits_bytes(block, |b| b == b'5'),
        eight: bits_bytes(block, |b| b == b'8'),
    }
}

/// What the blocks read so far hand on to the next.
#[derive(Default)]
struct Carry {
    /// The last block's `ESC` bits: one in its last two bytes puts a `[` or a sequence's
    /// first parameter byte in this block.
    esc: u64,
    /// A sequence's parameters ran to the last block's end.
    params: bool,
    /// The last block ended with a `5` inside a sequence's parameters.
    five: bool,
}

/// The line `bytes` starts with, when the blocks can answer for it: the length of its text
/// (everything before its `\r\n`) and the characters it prints. `None` leaves the answer to
/// the careful reader: a line holding anything else, a sequence the careful reader might
/// refuse or whose effect on the pen counts, or bytes that end before the line does.
pub(super) fn line(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut carry = Carry::default();
    // Bytes of sequences so far, and where the last sequence began.
    let mut sequence_bytes = 0;
    let mut last_esc = None;
    let mut at = 0;
    let mut last = [0u8; 64];
    while at < bytes.len() {
        let (block, valid) = match bytes[at..].first_chunk::<64>() {
            Some(block) => (block, !0),
            None => {
                // The last bytes, zeros after them.
                let rest = &bytes[at..];
                last[..rest.len()].copy_from_slice(rest);
                (&last, (1u64 << rest.len()) - 1)
            }
        };
        let ends = ends(block);
        let ends_line = (ends.unprintable & !ends.esc) | !valid;
        // The bits before the line's end, when it is in this block.
        let before = match ends_line {
            0 => !0,
            ends => (ends - 1) & !ends,
        };
        if ends.esc != 0 || carry.esc != 0 || carry.params {
            let read = sequences(block, ends.esc, &carry, before)?;
            let esc = ends.esc & before;
            sequence_bytes += read.bytes;
            if esc != 0 {
                last_esc = Some(at + 63 - esc.leading_zeros() as usize);
            }
            carry = read.carry;
        }
        if ends_line != 0 {
            let end = at + ends_line.trailing_zeros() as usize;
            return line_end(bytes, end, last_esc).then(|| (end, end - sequence_bytes));
        }
        at += 64;
    }
    None
}

/// What [`sequences`] read of a block.
struct Read {
    /// Bytes of sequences before the line's end.
    bytes: usize,
    carry: Carry,
}

/// Reads the sequences of `block`, whose `ESC` bits are `esc`, up to the line's end (the
/// first bit not in `before`); `None` when one of them is not read here.
fn sequences(block: &[u8; 64], esc: u64, carry: &Carry, before: u64) -> Option<Read> {
    let classes = params(block);
    // The line's end is read too: a sequence must end before it.
    let upto = before | (before.wrapping_add(1) & !before);
    let opens = (esc << 1) | (carry.esc >> 63);
    let starts = (esc << 2) | (carry.esc >> 62);
    if opens & !classes.open & upto != 0 {
        return None;
    }
    // Each run of parameter bytes that a start begins (or the last block's run goes on into)
    // is cleared by the carry of the addition, which stops at the byte after it.
    let (sum, over) = classes.param.overflowing_add(starts);
    let (sum, over_again) = sum.overflowing_add(u64::from(carry.params));
    let params = classes.param & !sum;
    let finals = sum & !classes.param;
    if finals & !classes.m & upto != 0 {
        return None;
    }
    let (five, eight) = (classes.five & params, classes.eight & params);
    if ((five << 1) | u64::from(carry.five)) & eight & upto != 0 {
        return None;
    }
    Some(Read {
        bytes: ((esc | opens | params | finals) & before).count_ones() as usize,
        carry: Carry {
            esc,
            params: over || over_again,
            five: five >> 63 != 0,
        },
    })
}

/// Whether the line ends at `end` with `\r\n` and the default pen: after its last sequence,
/// begun at `last_esc`, when that is a reset, or with no sequence at all.
fn line_end(bytes: &[u8], end: usize, last_esc: Option<usize>) -> bool {
    let pen_default = last_esc.is_none_or(|esc| {
        let sequence = &bytes[esc..];
        sequence.starts_with(b"\x1b[m") || sequence.starts_with(b"\x1b[0m")
    });
    pen_default && bytes.get(end..end + 2) == Some(&b"\r\n"[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rng::Rng;

    /// One piece of a line: text, a sequence of some kind, or a byte that ends a line.
    fn piece(rng: &mut Rng, out: &mut Vec<u8>) {
        const SEQUENCES: &[&[u8]] = &[
            b"\x1b[m",
            b"\x1b[0m",
            b"\x1b[00m",
            b"\x1b[0;m",
            b"\x1b[;m",
            b"\x1b[31m",
            b"\x1b[1;4;38;5;158;48;5;53m",
            b"\x1b[38;2;158;58;255m",
            b"\x1b[58;5;3m",
            b"\x1b[0;58;2;1;2;3m",
            b"\x1b[59m",
            b"\x1b[39m",
            b"\x1b[22;49m",
            b"\x1b[99999999m",
            b"\x1b[K",
            b"\x1b[2J",
            b"\x1b[?1m",
            b"\x1b[4:3m",
            b"\x1b]0;t\x07",
            b"\x1bM",
            b"\x1b",
            b"\x1b[",
            b"\x1b[1;",
        ];
        match rng.index(10) {
            0..=3 => {
                let most = if rng.index(4) == 0 { 140 } else { 12 };
                let len = rng.index(most);
                out.extend((0..len).map(|_| b' ' + rng.index(95) as u8));
            }
            4..=7 => out.extend_from_slice(SEQUENCES[rng.index(SEQUENCES.len())]),
            8 => {
                // Many parameters: past vte's limit of 32 or not.
                out.extend_from_slice(b"\x1b[");
                for i in 0..rng.index(40) {
                    if i > 0 {
                        out.push(b';');
                    }
                    out.extend_from_slice(rng.index(300).to_string().as_bytes());
                }
                out.push(b'm');
            }
            _ => out.push([b'\r', b'\n', b'\t', 0x7f, 0x80, 0xff, 0][rng.index(7)]),
        }
    }

    #[test]
    fn blocks_answer_as_the_careful_reader() {
        let mut rng = Rng(0x0b10_c4ed);
        let mut answered = 0;
        for case in 0..4000 {
            let mut bytes = Vec::new();
            for _ in 0..rng.index(30) {
                piece(&mut rng, &mut bytes);
            }
            if rng.index(2) == 0 {
                bytes.extend_from_slice(if rng.index(2) == 0 {
                    b"\x1b[0m"
                } else {
                    b"\x1b[m"
                });
            }
            bytes.extend_from_slice(b"\r\n");
            for _ in 0..rng.index(3) {
                piece(&mut rng, &mut bytes);
            }
            // Every cut, so that each sequence meets a block's end and the bytes' end
            // everywhere.
            for end in 0..=bytes.len() {
                let cut = &bytes[..end];
                let mut segments = Vec::new();
                let careful = super::super::line(cut, 0, Some(&mut segments));
                let fast = super::super::line(cut, 0, None);
                assert_eq!(
                    fast,
                    careful,
                    "case {case}: {:?}",
                    String::from_utf8_lossy(cut)
                );
                if let Some((len, printed)) = line(cut) {
                    assert_eq!(
                        super::super::Scan::Read(len, printed),
                        careful,
                        "case {case}"
                    );
                    answered += 1;
                }
            }
        }
        assert!(
            answered > 2_000,
            "the blocks answered only {answered} times"
        );
    }

    #[test]
    fn blocks_answer_for_lines_ending_in_a_reset_and_leave_the_rest() {
        assert_eq!(line(b"\x1b[31mab\x1b[0mc\r\n"), Some((12, 3)));
        assert_eq!(
            line(b"\x1b[1;4;38;5;243;48;5;188m-->\x1b[m\r\n"),
            Some((30, 3))
        );
        let long = [&b"\x1b[7;96m"[..], &[b'x'; 130], b"\x1b[m\r\n"].concat();
        assert_eq!(line(&long), Some((long.len() - 2, 130)));
        assert_eq!(line(b"ab\r\n"), Some((2, 2)));
        // The careful reader's: a pen the line may leave changed, a parameter that may be
        // the underline colour, a cut line.
        assert_eq!(line(b"\x1b[31mab\x1b[39m\r\n"), None);
        assert_eq!(line(b"\x1b[38;5;158mab\x1b[0m\r\n"), None);
        assert_eq!(line(b"\x1b[31mab\x1b[0m"), None);
        // Not styled lines.
        assert_eq!(line(b"\x1b[31mab\x1b[K\x1b[0m\r\n"), None);
        assert_eq!(line(b"a\tb\r\n"), None);
    }

    #[test]
    fn the_sse2_classes_are_the_byte_at_a_time_classes() {
        let mut rng = Rng(0x5eed_c1a5);
        let alphabet = b"\x1b[m;0123456789 \r\nab\x7f\x80\xff\x00\x1f\x20\x7e58:?";
        for _ in 0..20_000 {
            let mut block = [0u8; 64];
            for byte in &mut block {
                *byte = if rng.index(4) == 0 {
                    rng.next() as u8
                } else {
                    alphabet[rng.index(alphabet.len())]
                };
            }
            assert_eq!(ends(&block), ends_bytes(&block), "{block:02x?}");
            assert_eq!(params(&block), params_bytes(&block), "{block:02x?}");
        }
    }
}
