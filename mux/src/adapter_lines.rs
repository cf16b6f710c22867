//! Bounded reading of an adapter sidecar's stdout, one protocol v1 event per line (spec §7.4).
//!
//! An adapter is a program we do not control. One that prints without ever writing a newline
//! would make an unbounded line reader buffer forever (one took the daemon to 1.4 GiB), so a
//! line is capped at the wire protocol's [`MAX_LINE`] (1 MiB): past that the reader stops
//! buffering and reports [`AdapterLine::TooLong`], and the engine holds as `malformed` and
//! restarts the adapter with backoff.
//!
//! [`BoundedLines::next_line`] is cancel safe, because the engine reads the adapter inside a
//! `select!` with its message channel and timers: the partial line lives in the reader, not in
//! the future, and bytes are consumed from the buffered reader only after they were copied.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub use belfry_transport::wire::MAX_LINE;

/// One result of reading the adapter's stdout.
#[derive(Debug, PartialEq, Eq)]
pub enum AdapterLine {
    /// A complete line, without its newline (or the unterminated tail before end of file).
    Text(Vec<u8>),
    /// The line grew past [`MAX_LINE`] bytes without a newline; what was read is discarded.
    TooLong,
    /// The adapter closed its stdout.
    Eof,
}

/// A line reader that never holds more than [`MAX_LINE`] bytes of one line.
pub struct BoundedLines<R> {
    reader: R,
    partial: Vec<u8>,
    limit: usize,
    /// True after [`AdapterLine::TooLong`] until that line's newline: its tail is skipped,
    /// never taken for a line of its own.
    discarding: bool,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// Reads lines of at most [`MAX_LINE`] bytes from `reader`.
    pub fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE)
    }

    /// Reads lines of at most `limit` bytes (for tests of the limit itself).
    pub fn with_limit(reader: R, limit: usize) -> Self {
        BoundedLines {
            reader,
            partial: Vec::new(),
            limit,
            discarding: false,
        }
    }

    /// The next line. An over-long line is reported once, as soon as it passes the limit.
    /// Cancel safe: a cancelled call loses no byte.
    pub async fn next_line(&mut self) -> std::io::Result<AdapterLine> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                if self.partial.is_empty() {
                    return Ok(AdapterLine::Eof);
                }
                return Ok(AdapterLine::Text(std::mem::take(&mut self.partial)));
            }
            // From here to `consume` nothing awaits, so a cancellation cannot split the copy
            // from the consume.
            let newline = available.iter().position(|&byte| byte == b'\n');
            let take = newline.unwrap_or(available.len());
            let consumed = newline.map_or(take, |at| at + 1);
            if self.discarding {
                self.reader.consume(consumed);
                self.discarding = newline.is_none();
                continue;
            }
            if self.partial.len() + take > self.limit {
                self.reader.consume(consumed);
                self.partial = Vec::new();
                self.discarding = newline.is_none();
                return Ok(AdapterLine::TooLong);
            }
            self.partial.extend_from_slice(&available[..take]);
            self.reader.consume(consumed);
            if newline.is_some() {
                let mut line = std::mem::take(&mut self.partial);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(AdapterLine::Text(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], limit: usize) -> Vec<AdapterLine> {
        let reader = tokio::io::BufReader::with_capacity(4, input);
        let mut lines = BoundedLines::with_limit(reader, limit);
        let mut out = Vec::new();
        loop {
            let line = lines.next_line().await.unwrap();
            let end = line == AdapterLine::Eof;
            out.push(line);
            if end {
                return out;
            }
        }
    }

    fn text(s: &str) -> AdapterLine {
        AdapterLine::Text(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_split_across_buffer_fills_are_joined() {
        assert_eq!(
            all(b"abcdefgh\nij\r\nkl", 100).await,
            vec![text("abcdefgh"), text("ij"), text("kl"), AdapterLine::Eof]
        );
    }

    #[tokio::test]
    async fn an_over_long_line_is_reported_once_and_its_tail_skipped() {
        let mut input = vec![b'x'; 50];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(
            all(&input, 10).await,
            vec![AdapterLine::TooLong, text("ok"), AdapterLine::Eof]
        );
    }

    #[tokio::test]
    async fn an_endless_line_is_reported_before_it_ends() {
        // A reader that never ends the line: TooLong must come without waiting for a newline.
        let endless = tokio::io::repeat(b'x');
        let mut lines = BoundedLines::with_limit(tokio::io::BufReader::new(endless), 1000);
        assert_eq!(lines.next_line().await.unwrap(), AdapterLine::TooLong);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_kept() {
        assert_eq!(
            all(b"0123456789\n", 10).await,
            vec![text("0123456789"), AdapterLine::Eof]
        );
    }
}
