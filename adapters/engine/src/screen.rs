//! A pane's screen as `belfry peek --json --cells` (the daemon's `snapshot` reply) gives it:
//! rows of text, the terminal cursor, and each row's cells as styled runs. The classifier works
//! on characters with their style, so this module flattens the runs once.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The terminal cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Cursor {
    /// Its row, 0 at the top.
    pub row: usize,
    /// Its column.
    pub col: usize,
    /// Whether the program shows it.
    pub visible: bool,
}

/// One run of cells with the same attributes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Run {
    /// The run's characters.
    pub text: String,
    /// Its attributes (`fg`, `bg`, `bold`, `dim`, `inverse`, …); absent ones are off.
    #[serde(flatten)]
    pub style: Map<String, Value>,
}

/// The parts of a snapshot the classifier reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Screen {
    /// Every row's text.
    pub lines: Vec<String>,
    /// The terminal cursor.
    pub cursor: Cursor,
    /// Every row's cells, when the snapshot was asked for them.
    #[serde(default)]
    pub cells: Option<Vec<Vec<Run>>>,
}

/// One character with the attributes of its cell.
#[derive(Debug, Clone, PartialEq)]
pub struct StyledChar {
    /// The character.
    pub ch: char,
    /// Its cell's attributes.
    pub style: Map<String, Value>,
}

impl Screen {
    /// Reads a snapshot body (`belfry peek --json` output, or a fixture's `peek`).
    pub fn from_value(value: &Value) -> Result<Screen> {
        Screen::deserialize(value).map_err(|err| Error::Screen {
            reason: err.to_string(),
        })
    }

    /// Row `row` as styled characters: from the cells when present (checked against the
    /// row's text), else the text with no attributes.
    pub fn styled_row(&self, row: usize) -> Result<Vec<StyledChar>> {
        let text = self.lines.get(row).map(String::as_str).unwrap_or("");
        let Some(cells) = self.cells.as_ref().and_then(|cells| cells.get(row)) else {
            return Ok(text
                .chars()
                .map(|ch| StyledChar {
                    ch,
                    style: Map::new(),
                })
                .collect());
        };
        let chars: Vec<StyledChar> = cells
            .iter()
            .flat_map(|run| {
                run.text.chars().map(|ch| StyledChar {
                    ch,
                    style: run.style.clone(),
                })
            })
            .collect();
        // The cells and the text are two views of one grid; if they disagree the snapshot is
        // not what this classifier understands, and guessing which is right could call a
        // draft empty.
        let from_cells: String = chars.iter().map(|c| c.ch).collect();
        if from_cells.trim_end() != text.trim_end() {
            return Err(Error::Screen {
                reason: format!("row {row}: its cells do not spell its text"),
            });
        }
        Ok(chars)
    }

    /// Whether the snapshot carries cell attributes.
    pub fn has_cells(&self) -> bool {
        self.cells.is_some()
    }
}

/// Whether `style` has every attribute `want` names: a boolean attribute absent from the cell
/// is off, any other absent attribute matches nothing.
pub fn style_matches(style: &Map<String, Value>, want: &Map<String, Value>) -> bool {
    want.iter().all(|(key, wanted)| match style.get(key) {
        Some(have) => have == wanted,
        None => wanted == &Value::Bool(false),
    })
}
