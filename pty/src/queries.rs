//! The terminal queries the emulator core does not answer, found in program output so the
//! screen model can answer them while no terminal is attached (spec §4): XTVERSION
//! (`CSI > 0 q`, `CSI > q`) and XTGETTCAP (`DCS + q NAME;NAME… ST`). The core parses both
//! and drops them without a word, so they are found here, byte by byte, across chunk
//! boundaries, before the core sees the chunk.
//!
//! The same scan finds the program status protocol's strings (`ESC ] 7501 ; … BEL/ST`,
//! [`crate::program_status`]): its query and its reports, which the core drops too (an OSC it
//! does not know). They ride on this scan rather than a second one so the output is looked at
//! once: a chunk without `ESC ]` costs the one vectorised search it cost before, for three
//! bytes instead of two.

/// A query found in the output, with the answer it is owed.
#[derive(Debug, PartialEq, Eq)]
pub enum Query {
    /// XTVERSION: the terminal's name and version.
    Version,
    /// XTGETTCAP with how many capability names it asked for.
    Termcap(usize),
    /// An OSC 7501 string: the protocol's query or a report (answered, or recorded, by the
    /// pane, not by [`Query::answers`]).
    Status(StatusString),
}

/// An OSC 7501 string as the scan found it.
#[derive(Debug, PartialEq, Eq)]
pub enum StatusString {
    /// `ESC ] 7501 ; BODY` and its terminator, the body whole.
    Whole {
        body: Vec<u8>,
        terminator: Terminator,
    },
    /// Longer than the protocol's limit ([`MAX_STATUS_SEQUENCE`]): dropped unread.
    Oversized,
    /// Cut off by CAN, SUB or an `ESC` that starts no ST: dropped.
    Cancelled,
}

/// How an OSC string ended; an answer to a query ends the way the query did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminator {
    /// `BEL` (0x07).
    Bel,
    /// `ESC \`.
    St,
}

impl Terminator {
    /// The terminator's bytes.
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Terminator::Bel => b"\x07",
            Terminator::St => b"\x1b\\",
        }
    }

    fn len(self) -> usize {
        self.bytes().len()
    }
}

/// The longest OSC 7501 string the protocol allows, `ESC ] 7501 ;` and terminator included
/// (revision 0.4, "Limits": 4096 bytes). A longer one is dropped whole.
pub const MAX_STATUS_SEQUENCE: usize = 4096;

/// `7501;`: the OSC's number and separator, what follows `ESC ]`.
const STATUS_PREFIX: &[u8] = b"7501;";

/// The most body bytes kept: one past what can still fit with the shortest terminator, so a
/// body that reaches it is known to be too long.
const MAX_STATUS_BODY: usize = MAX_STATUS_SEQUENCE - 2 - STATUS_PREFIX.len() - 1 + 1;

impl Query {
    /// The answers, in order: `DCS > | belfry VERSION ST` for XTVERSION; for XTGETTCAP one
    /// "not supported" (`DCS 0 + r ST`) per name, since the model has no terminfo entry to
    /// report from and a program then falls back to its own defaults.
    pub fn answers(&self) -> Vec<Vec<u8>> {
        match self {
            Query::Version => {
                vec![format!("\x1bP>|belfry {}\x1b\\", env!("CARGO_PKG_VERSION")).into_bytes()]
            }
            Query::Termcap(names) => vec![b"\x1bP0+r\x1b\\".to_vec(); (*names).max(1)],
            Query::Status(_) => Vec::new(),
        }
    }
}

/// The longest DCS body looked at; anything longer is no query of ours and is dropped from the
/// scan (the core still parses it). A CSI needs no bound: nothing of its parameters is kept
/// but how far they match XTVERSION's.
const MAX_DCS: usize = 4096;

#[derive(Default)]
enum State {
    #[default]
    Ground,
    Escape,
    /// Inside a CSI: how far its parameter and intermediate bytes so far match XTVERSION's
    /// (`>`, `>0`). Nothing else of them is kept: SGR-heavy output opens a CSI every few
    /// bytes, and copying or allocating for each cost more than the scan.
    Csi(CsiPrefix),
    Dcs(Vec<u8>),
    /// An `ESC` inside a DCS body: `\` ends the string.
    DcsEscape(Vec<u8>),
    /// After `ESC ]`: how many bytes of `7501;` matched so far. Any other OSC goes back to
    /// the ground state at its first byte that differs, as every OSC did before.
    Osc(usize),
    /// Inside an OSC 7501 string: the body so far (at most [`MAX_STATUS_BODY`] bytes).
    Status(Vec<u8>),
    /// An `ESC` inside an OSC 7501 string: `\` ends it.
    StatusEscape(Vec<u8>),
}

/// How far a CSI's parameter bytes match XTVERSION's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CsiPrefix {
    Empty,
    Gt,
    GtZero,
    Other,
}

impl CsiPrefix {
    fn then(self, byte: u8) -> CsiPrefix {
        match (self, byte) {
            (CsiPrefix::Empty, b'>') => CsiPrefix::Gt,
            (CsiPrefix::Gt, b'0') => CsiPrefix::GtZero,
            _ => CsiPrefix::Other,
        }
    }
}

/// Whether `bytes` hold the start of a query: `ESC [ >` (XTVERSION; its `>` must be the
/// CSI's first parameter byte), `ESC P` (a DCS, which XTGETTCAP is) or `ESC ] 7501 ;`. It
/// looks for the rarer byte of the first two (`>`, `P`) with a vectorised search and then at
/// the bytes before it: in output that colours every word that costs less than stepping from
/// one ESC to the next, and less than searching for the pairs, whose ESC and `[` are
/// everywhere in such output. The OSC is looked for whole, with a second vectorised search:
/// `]` is common in text and `ESC ]` in hyperlinks (OSC 8) and prompts (OSC 133), and
/// stopping at each cost a third of the scan's speed on such output.
fn may_start_a_query(bytes: &[u8]) -> bool {
    memchr::memchr2_iter(b'>', b'P', bytes).any(|at| match bytes[at] {
        b'>' => at >= 2 && bytes[at - 2..at] == *b"\x1b[",
        _ => at >= 1 && bytes[at - 1] == 0x1b,
    }) || may_start_a_status_string(bytes)
}

/// `ESC ] 7501 ;`, what starts an OSC 7501 string.
const STATUS_START: &[u8] = b"\x1b]7501;";

/// Whether `bytes` hold `ESC ] 7501 ;`, or end with the start of it (the rest may come in the
/// next read).
fn may_start_a_status_string(bytes: &[u8]) -> bool {
    // Searched for without its `ESC ]`: the searcher keys on the bytes it deems rarest, which
    // would be those two, common in output with hyperlinks.
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(&STATUS_START[2..]));
    if FINDER
        .find_iter(bytes)
        .any(|at| at >= 2 && bytes[at - 2..at] == STATUS_START[..2])
    {
        return true;
    }
    let tail = &bytes[bytes.len().saturating_sub(STATUS_START.len() - 1)..];
    memchr::memrchr(0x1b, tail).is_some_and(|at| STATUS_START.starts_with(&tail[at..]))
}

/// Where an OSC 7501 body's run of plain bytes ends: at the first byte that ends or cancels
/// the string (`BEL`, `ESC`, `CAN`, `SUB`), or at the end of `bytes`.
fn status_body_run(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|b| matches!(b, 0x07 | 0x1b | 0x18 | 0x1a))
        .unwrap_or(bytes.len())
}

/// The string a terminator ends, or [`StatusString::Oversized`] when the whole sequence is
/// longer than the protocol allows.
fn status_string(body: Vec<u8>, terminator: Terminator) -> StatusString {
    if 2 + STATUS_PREFIX.len() + body.len() + terminator.len() > MAX_STATUS_SEQUENCE {
        StatusString::Oversized
    } else {
        StatusString::Whole { body, terminator }
    }
}

/// Follows program output far enough to find the queries of [`Query`].
#[derive(Default)]
pub struct Scanner {
    state: State,
}

impl Scanner {
    /// Scans `bytes` up to the first query they complete: its index in `bytes` (the byte that
    /// ends it) and the query, or `None` when none ends in them. The state carries over to
    /// the next call, so a query split across chunks is found in the chunk that ends it.
    ///
    /// The same as [`Scanner::feed`] on every byte in turn, but between sequences (the
    /// ground state, where only `ESC` changes anything) it jumps to the next `ESC` without
    /// looking at the bytes before it, which is most of any output, and it passes over the
    /// parameters of a CSI that can no longer be a query. The first time it is between
    /// sequences it looks ahead for the start of a query ([`may_start_a_query`]); when the
    /// rest holds none it goes straight to the rest's last `ESC`.
    pub fn find(&mut self, bytes: &[u8]) -> Option<(usize, Query)> {
        let mut at = 0;
        let mut looked_ahead = false;
        while at < bytes.len() {
            match self.state {
                State::Ground => {
                    if !looked_ahead {
                        looked_ahead = true;
                        if !may_start_a_query(&bytes[at..]) {
                            // No query starts in the rest, nor is one open here: only the
                            // state after the rest's last ESC matters, and an ESC puts every
                            // state but a DCS body (none is open) in the same one.
                            at += memchr::memrchr(0x1b, &bytes[at..])?;
                        }
                    }
                    at += memchr::memchr(0x1b, &bytes[at..])?;
                    // `ESC [` and a parameter byte other than `>`: a CSI that is no query
                    // from its first byte (an SGR, most often), as feeding the three would
                    // find.
                    if bytes.get(at + 1) == Some(&b'[')
                        && bytes
                            .get(at + 2)
                            .is_some_and(|&b| (0x20..=0x3f).contains(&b) && b != b'>')
                    {
                        self.state = State::Csi(CsiPrefix::Other);
                        at += 3;
                        continue;
                    }
                }
                // A CSI that is no query any more (most are, from their first byte): its
                // parameter bytes change nothing, and the byte that ends it, unless it starts
                // or cancels a sequence, ends it without a query.
                State::Csi(CsiPrefix::Other) => {
                    let rest = &bytes[at..];
                    at += rest
                        .iter()
                        .position(|b| !(0x20..=0x3f).contains(b))
                        .unwrap_or(rest.len());
                    match bytes.get(at) {
                        None => return None,
                        Some(0x1b | 0x18 | 0x1a) => {}
                        Some(_) => {
                            self.state = State::Ground;
                            at += 1;
                            continue;
                        }
                    }
                }
                // An OSC 7501 body: its plain bytes are kept in one step, up to the limit
                // (past it only the terminator matters).
                State::Status(ref mut body) => {
                    let rest = &bytes[at..];
                    let run = status_body_run(rest);
                    let room = MAX_STATUS_BODY - body.len();
                    body.extend_from_slice(&rest[..run.min(room)]);
                    at += run;
                    if at == bytes.len() {
                        return None;
                    }
                }
                _ => {}
            }
            if let Some(query) = self.feed(bytes[at]) {
                return Some((at, query));
            }
            at += 1;
        }
        None
    }

    /// Takes one byte of output; returns the query it completes, if any.
    pub fn feed(&mut self, byte: u8) -> Option<Query> {
        let state = std::mem::take(&mut self.state);
        let (next, query) = match (state, byte) {
            // An OSC 7501 string ends at BEL or ST; CAN, SUB, and an ESC that starts no ST,
            // cut it off (the ESC then starts the next sequence, as in any OSC).
            (State::Status(body), 0x07) => (
                State::Ground,
                Some(Query::Status(status_string(body, Terminator::Bel))),
            ),
            (State::Status(body), 0x1b) => (State::StatusEscape(body), None),
            (State::StatusEscape(body), b'\\') => (
                State::Ground,
                Some(Query::Status(status_string(body, Terminator::St))),
            ),
            (State::StatusEscape(_), _) => {
                let mut after = Scanner {
                    state: State::Escape,
                };
                // The byte after the ESC is read as the start of a sequence; it cannot
                // complete a query by itself.
                let _ = after.feed(byte);
                self.state = after.state;
                return Some(Query::Status(StatusString::Cancelled));
            }
            (State::Status(_), 0x18 | 0x1a) => {
                (State::Ground, Some(Query::Status(StatusString::Cancelled)))
            }
            (State::Status(mut body), _) => {
                if body.len() < MAX_STATUS_BODY {
                    body.push(byte);
                }
                (State::Status(body), None)
            }
            // ESC starts a new sequence from anywhere but a DCS body; CAN and SUB cancel.
            (State::Dcs(body), 0x1b) => (State::DcsEscape(body), None),
            (State::DcsEscape(body), b'\\') => {
                let query = body
                    .strip_prefix(b"+q")
                    .map(|names| Query::Termcap(names.split(|&b| b == b';').count()));
                (State::Ground, query)
            }
            (_, 0x1b) => (State::Escape, None),
            (_, 0x18 | 0x1a) => (State::Ground, None),
            (State::Escape, b'[') => (State::Csi(CsiPrefix::Empty), None),
            (State::Escape, b'P') => (State::Dcs(Vec::new()), None),
            (State::Escape, b']') => (State::Osc(0), None),
            (State::Osc(matched), _) if STATUS_PREFIX.get(matched) == Some(&byte) => {
                if matched + 1 == STATUS_PREFIX.len() {
                    (State::Status(Vec::new()), None)
                } else {
                    (State::Osc(matched + 1), None)
                }
            }
            (State::Csi(prefix), 0x20..=0x3f) => (State::Csi(prefix.then(byte)), None),
            (State::Csi(prefix), b'q') => {
                let query =
                    matches!(prefix, CsiPrefix::Gt | CsiPrefix::GtZero).then_some(Query::Version);
                (State::Ground, query)
            }
            (State::Dcs(mut body), _) if body.len() < MAX_DCS => {
                body.push(byte);
                (State::Dcs(body), None)
            }
            _ => (State::Ground, None),
        };
        self.state = next;
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queries in `chunks` and where each ends (chunk, index), as the screen model finds
    /// them: [`Scanner::find`] over each chunk, again after every query.
    fn found(chunks: &[&[u8]]) -> Vec<(usize, usize, Query)> {
        let mut scanner = Scanner::default();
        let mut out = Vec::new();
        for (c, chunk) in chunks.iter().enumerate() {
            let mut start = 0;
            while let Some((at, query)) = scanner.find(&chunk[start..]) {
                out.push((c, start + at, query));
                start += at + 1;
            }
        }
        out
    }

    /// The same, one byte at a time through [`Scanner::feed`]: the reference.
    fn fed(chunks: &[&[u8]]) -> Vec<(usize, usize, Query)> {
        let mut scanner = Scanner::default();
        let mut out = Vec::new();
        for (c, chunk) in chunks.iter().enumerate() {
            for (i, &byte) in chunk.iter().enumerate() {
                if let Some(query) = scanner.feed(byte) {
                    out.push((c, i, query));
                }
            }
        }
        out
    }

    fn scan(chunks: &[&[u8]]) -> Vec<Query> {
        found(chunks).into_iter().map(|(_, _, q)| q).collect()
    }

    /// `find`'s jump over the ground state finds exactly what byte-by-byte feeding finds, at
    /// the same places, however the output is cut into chunks: streams drawn from the bytes
    /// the scanner tells apart (and long CSI and DCS strings past its limits), cut at random.
    #[test]
    fn find_agrees_with_feeding_every_byte() {
        const PIECES: &[&[u8]] = &[
            b"\x1b",
            b"[",
            b"P",
            b">",
            b"0",
            b"q",
            b"+q",
            b";",
            b"\\",
            b"\x18",
            b"\x1a",
            b"a",
            b"1",
            b" ",
            b"m",
            b"\x9b",
            b"\x1b[>0q",
            b"\x1b[>q",
            b"\x1bP+q54;52\x1b\\",
            b"text\n",
            b"\x1b[1;38;5;208m",
            b"\x1b[0m",
            b"]",
            b"\x07",
            b"7501;",
            b"\x1b]",
            b"\x1b]7501;state=idle\x07",
            b"\x1b]7501;?\x1b\\",
            b"\x1b]0;title\x07",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut queries = 0;
        for case in 0..2000 {
            let mut stream = Vec::new();
            for _ in 0..(next() % 200) {
                let piece = PIECES[(next() % PIECES.len() as u64) as usize];
                stream.extend_from_slice(piece);
            }
            if case % 50 == 0 {
                // A long CSI (no query, however long) and a DCS past its limit.
                stream.extend_from_slice(b"\x1b[");
                stream.extend(std::iter::repeat_n(b'>', 35));
                stream.extend_from_slice(b"q\x1bP+q");
                stream.extend(std::iter::repeat_n(b'a', MAX_DCS + 3));
                stream.extend_from_slice(b"\x1b\\\x1b[>q");
                // An OSC 7501 string past its limit.
                stream.extend_from_slice(b"\x1b]7501;");
                stream.extend(std::iter::repeat_n(b'a', MAX_STATUS_SEQUENCE));
                stream.extend_from_slice(b"\x07");
            }
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut rest = stream.as_slice();
            while !rest.is_empty() {
                let cut = 1 + (next() as usize % rest.len().min(40));
                let (chunk, tail) = rest.split_at(cut);
                chunks.push(chunk);
                rest = tail;
            }
            let reference = fed(&chunks);
            queries += reference.len();
            assert_eq!(found(&chunks), reference, "case {case}: {stream:?}");
        }
        assert!(queries > 1000, "the streams held only {queries} queries");
    }

    #[test]
    fn the_look_ahead_finds_a_status_string_whole_or_cut_at_the_end() {
        assert!(may_start_a_query(b"ab\x1b]7501;state=idle\x07"));
        for cut in 1..STATUS_START.len() {
            let mut bytes = b"text \x1b]8;;x\x1b\\ ".to_vec();
            bytes.extend_from_slice(&STATUS_START[..cut]);
            assert!(may_start_a_query(&bytes), "cut after {cut} bytes");
        }
        assert!(!may_start_a_query(
            b"[x] \x1b]8;;http://x/7501;\x1b\\ \x1b]0;t\x07 7501;"
        ));
    }

    #[test]
    fn finds_xtversion_and_xtgettcap_across_chunks() {
        assert_eq!(
            scan(&[b"a\x1b[>0q", b"\x1b[>q"]),
            [Query::Version, Query::Version]
        );
        assert_eq!(scan(&[b"\x1b[", b">", b"0q"]), [Query::Version]);
        assert_eq!(
            scan(&[b"\x1bP+q544e;", b"524742\x1b", b"\\"]),
            [Query::Termcap(2)]
        );
        // Not queries: the cursor style, another DCS, a cancelled sequence, plain text.
        assert!(scan(&[b"\x1b[2 q\x1b[>1q\x1bP=1s\x1b\\\x1b[>\x180q>0q"]).is_empty());
    }
}
