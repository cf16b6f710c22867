//! The terminal queries the emulator core does not answer, found in program output so the
//! screen model can answer them while no terminal is attached (spec §4): XTVERSION
//! (`CSI > 0 q`, `CSI > q`) and XTGETTCAP (`DCS + q NAME;NAME… ST`). The core parses both
//! and drops them without a word, so they are found here, byte by byte, across chunk
//! boundaries, before the core sees the chunk.

/// A query found in the output, with the answer it is owed.
#[derive(Debug, PartialEq, Eq)]
pub enum Query {
    /// XTVERSION: the terminal's name and version.
    Version,
    /// XTGETTCAP with how many capability names it asked for.
    Termcap(usize),
}

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
        }
    }
}

/// The longest CSI parameter string and DCS body looked at; anything longer is no query of
/// ours and is dropped from the scan (the core still parses it).
const MAX_CSI: usize = 32;
const MAX_DCS: usize = 4096;

#[derive(Default)]
enum State {
    #[default]
    Ground,
    Escape,
    Csi(Vec<u8>),
    Dcs(Vec<u8>),
    /// An `ESC` inside a DCS body: `\` ends the string.
    DcsEscape(Vec<u8>),
}

/// Follows program output far enough to find the queries of [`Query`].
#[derive(Default)]
pub struct Scanner {
    state: State,
}

impl Scanner {
    /// Takes one byte of output; returns the query it completes, if any.
    pub fn feed(&mut self, byte: u8) -> Option<Query> {
        let state = std::mem::take(&mut self.state);
        let (next, query) = match (state, byte) {
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
            (State::Escape, b'[') => (State::Csi(Vec::new()), None),
            (State::Escape, b'P') => (State::Dcs(Vec::new()), None),
            (State::Csi(mut params), 0x20..=0x3f) if params.len() < MAX_CSI => {
                params.push(byte);
                (State::Csi(params), None)
            }
            (State::Csi(params), b'q') => {
                let query = matches!(params.as_slice(), b">" | b">0").then_some(Query::Version);
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

    fn scan(chunks: &[&[u8]]) -> Vec<Query> {
        let mut scanner = Scanner::default();
        chunks
            .iter()
            .flat_map(|chunk| chunk.iter())
            .filter_map(|&b| scanner.feed(b))
            .collect()
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
