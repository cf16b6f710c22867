//! The protocol's numbers: versions, line and frame limits, the pane size range and the bounds
//! of the durations a request may carry. Each is defined here once.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// The oldest protocol version this build still accepts (a newer daemon adopts older panes).
pub const MIN_PROTOCOL_VERSION: u64 = 1;
/// Longest accepted request line, newline excluded.
pub const MAX_LINE: usize = 1024 * 1024;
/// Largest attach frame payload accepted.
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

/// The smallest and largest pane dimension, rows and columns alike (spec §5).
pub const MIN_DIMENSION: u16 = 1;
/// See [`MIN_DIMENSION`].
pub const MAX_DIMENSION: u16 = 1000;
/// A pane's size when none is given.
pub const DEFAULT_SIZE: Size = Size { rows: 24, cols: 80 };

/// The scrollback lines a pane keeps when none is given, and the most it may keep.
pub const DEFAULT_SCROLLBACK: u64 = 2000;
/// See [`DEFAULT_SCROLLBACK`].
pub const MAX_SCROLLBACK: u64 = 1_000_000;

/// The bytes a pane's history may take when none is given (encoded compactly: about a byte a
/// cell of plain text), and the most it may be given. The line cap applies as well.
pub const DEFAULT_SCROLLBACK_BYTES: u64 = 4 * 1024 * 1024;
/// See [`DEFAULT_SCROLLBACK_BYTES`].
pub const MAX_SCROLLBACK_BYTES: u64 = 1024 * 1024 * 1024;

/// How long a send's writes may wait in total for the program to read, when not given, and the
/// longest a request may ask for (spec §3).
pub const DEFAULT_SEND_TIMEOUT_MS: u64 = 5000;
/// See [`DEFAULT_SEND_TIMEOUT_MS`].
pub const MAX_SEND_TIMEOUT_MS: u64 = 60_000;
/// The longest `timeout_ms` or `quiet_ms` a `wait` may ask for (24 hours).
pub const MAX_WAIT_MS: u64 = 24 * 60 * 60 * 1000;
/// A `wait`'s timeout when none is given.
pub const DEFAULT_WAIT_MS: u64 = 30_000;

/// The most bytes one send may write.
pub const MAX_SEND_BYTES: usize = 64 * 1024;
/// The longest one delay step of a send may be, and all its delay steps together.
pub const MAX_DELAY_STEP_MS: u64 = 2000;
/// See [`MAX_DELAY_STEP_MS`].
pub const MAX_DELAY_TOTAL_MS: u64 = 5000;
/// How many bus events (revisions aside) the daemon keeps for a subscriber's `history`: the
/// recent past `belfry events` shows first. About 1 MiB at most, in memory only.
pub const EVENT_HISTORY: usize = 1000;

/// A pane's size in character cells; both dimensions are within
/// [`MIN_DIMENSION`]`..=`[`MAX_DIMENSION`] (the only constructor checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawSize")]
pub struct Size {
    rows: u16,
    cols: u16,
}

/// A size as it arrives, before its range is checked.
#[derive(Deserialize)]
struct RawSize {
    rows: u64,
    cols: u64,
}

impl TryFrom<RawSize> for Size {
    type Error = SizeError;

    fn try_from(raw: RawSize) -> Result<Self, SizeError> {
        Size::new(raw.rows, raw.cols)
    }
}

/// A size outside the allowed range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError {
    /// The rows given.
    pub rows: u64,
    /// The columns given.
    pub cols: u64,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "size {}x{} is out of range ({MIN_DIMENSION}..={MAX_DIMENSION} rows and columns)",
            self.rows, self.cols
        )
    }
}

impl std::error::Error for SizeError {}

impl Size {
    /// A size, if both dimensions are in range.
    pub fn new(rows: u64, cols: u64) -> Result<Size, SizeError> {
        let range = u64::from(MIN_DIMENSION)..=u64::from(MAX_DIMENSION);
        if range.contains(&rows) && range.contains(&cols) {
            // Both fit in u16: MAX_DIMENSION is a u16.
            Ok(Size {
                rows: rows as u16,
                cols: cols as u16,
            })
        } else {
            Err(SizeError { rows, cols })
        }
    }

    /// Rows.
    pub const fn rows(self) -> u16 {
        self.rows
    }

    /// Columns.
    pub const fn cols(self) -> u16 {
        self.cols
    }

    /// `(rows, cols)`.
    pub fn pair(self) -> (u16, u16) {
        (self.rows, self.cols)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_outside_the_range_are_refused_naming_both_dimensions() {
        assert_eq!(Size::new(24, 80).map(Size::pair), Ok((24, 80)));
        assert_eq!(Size::new(1000, 1).map(Size::pair), Ok((1000, 1)));
        for (rows, cols) in [(0, 80), (24, 0), (1001, 80), (24, u64::MAX)] {
            let err = Size::new(rows, cols).unwrap_err().to_string();
            assert!(err.contains(&format!("{rows}x{cols}")), "{err}");
            assert!(err.contains("1..=1000"), "{err}");
        }
    }
}
