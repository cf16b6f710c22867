//! The bounded input transport of a send (spec §3): text, bytes, paste, named keys and delays.

use base64::Engine as _;
use belfry_proto::request::InputStep;

use crate::error::{Error, Result};

/// The limits of one send, defined by the protocol. `DEFAULT_TIMEOUT_MS` is also the deadline
/// of attached keystrokes and query answers.
pub use belfry_proto::limits::{
    DEFAULT_SEND_TIMEOUT_MS as DEFAULT_TIMEOUT_MS, MAX_DELAY_STEP_MS, MAX_DELAY_TOTAL_MS,
    MAX_SEND_BYTES as MAX_BYTES, MAX_SEND_TIMEOUT_MS as MAX_TIMEOUT_MS,
};

/// One step of an input transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Bytes written raw (from `text` or `bytes`).
    Raw(Vec<u8>),
    /// Text pasted: framed with `ESC[200~ … ESC[201~` iff the program enabled mode 2004.
    Paste(String),
    /// A named key, encoded when written (arrow keys depend on application cursor mode).
    Key(Key),
    /// A pause while the input lock is held.
    DelayMs(u64),
}

/// Named keys a send may press.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Enter,
    Tab,
    Escape,
    Backspace,
    Space,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Insert,
    Delete,
    Ctrl(u8),
    F(u8),
}

impl Key {
    /// Parses a key name: Enter, Tab, Escape, Backspace, Space, Up/Down/Left/Right, Home, End,
    /// PageUp, PageDown, Insert, Delete, C-a…C-z, F1…F12.
    pub fn parse(name: &str) -> Result<Key> {
        let key = match name {
            "Enter" => Key::Enter,
            "Tab" => Key::Tab,
            "Escape" | "Esc" => Key::Escape,
            "Backspace" | "BSpace" => Key::Backspace,
            "Space" => Key::Space,
            "Up" => Key::Up,
            "Down" => Key::Down,
            "Left" => Key::Left,
            "Right" => Key::Right,
            "Home" => Key::Home,
            "End" => Key::End,
            "PageUp" => Key::PageUp,
            "PageDown" => Key::PageDown,
            "Insert" => Key::Insert,
            "Delete" => Key::Delete,
            _ => {
                if let Some(letter) = name.strip_prefix("C-") {
                    let bytes = letter.as_bytes();
                    if bytes.len() == 1 && bytes[0].is_ascii_alphabetic() {
                        return Ok(Key::Ctrl(bytes[0].to_ascii_lowercase()));
                    }
                }
                if let Some(num) = name.strip_prefix('F') {
                    if let Ok(n) = num.parse::<u8>() {
                        if (1..=12).contains(&n) {
                            return Ok(Key::F(n));
                        }
                    }
                }
                return Err(Error::invalid(format!(
                    "unknown key name {name:?}: expected Enter, Tab, Escape, Backspace, Space, \
                     Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, C-a…C-z \
                     or F1…F12"
                )));
            }
        };
        Ok(key)
    }

    /// The bytes a terminal sends for this key.
    pub fn encode(self, application_cursor: bool) -> Vec<u8> {
        let arrow = |c: u8| {
            if application_cursor {
                vec![0x1b, b'O', c]
            } else {
                vec![0x1b, b'[', c]
            }
        };
        match self {
            Key::Enter => b"\r".to_vec(),
            Key::Tab => b"\t".to_vec(),
            Key::Escape => b"\x1b".to_vec(),
            Key::Backspace => b"\x7f".to_vec(),
            Key::Space => b" ".to_vec(),
            Key::Up => arrow(b'A'),
            Key::Down => arrow(b'B'),
            Key::Right => arrow(b'C'),
            Key::Left => arrow(b'D'),
            Key::Home => arrow(b'H'),
            Key::End => arrow(b'F'),
            Key::PageUp => b"\x1b[5~".to_vec(),
            Key::PageDown => b"\x1b[6~".to_vec(),
            Key::Insert => b"\x1b[2~".to_vec(),
            Key::Delete => b"\x1b[3~".to_vec(),
            Key::Ctrl(letter) => vec![letter - b'a' + 1],
            Key::F(n) => match n {
                1 => b"\x1bOP".to_vec(),
                2 => b"\x1bOQ".to_vec(),
                3 => b"\x1bOR".to_vec(),
                4 => b"\x1bOS".to_vec(),
                _ => {
                    let code = [15, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)];
                    format!("\x1b[{code}~").into_bytes()
                }
            },
        }
    }
}

/// Parses and bounds-checks the `input` array of a send request. Nothing is written unless the
/// whole array is valid.
pub fn parse_steps(input: &[InputStep]) -> Result<Vec<Step>> {
    let mut steps = Vec::with_capacity(input.len());
    let mut total_bytes = 0usize;
    let mut total_delay = 0u64;
    for (index, item) in input.iter().enumerate() {
        let step = match item {
            InputStep::Text(text) => Step::Raw(text.as_bytes().to_vec()),
            InputStep::Bytes(b64) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|err| {
                        Error::invalid(format!("input step {index}: bytes is not base64: {err}"))
                    })?;
                Step::Raw(bytes)
            }
            InputStep::Paste(text) => {
                check_paste(index, text)?;
                Step::Paste(text.clone())
            }
            InputStep::Key(name) => Step::Key(Key::parse(name).map_err(|err| match err {
                Error::InvalidInput { reason } => {
                    Error::invalid(format!("input step {index}: {reason}"))
                }
                other => other,
            })?),
            InputStep::DelayMs(ms) => {
                let ms = *ms;
                if ms > MAX_DELAY_STEP_MS {
                    return Err(Error::invalid(format!(
                        "input step {index}: delay_ms {ms} exceeds {MAX_DELAY_STEP_MS}"
                    )));
                }
                total_delay += ms;
                Step::DelayMs(ms)
            }
        };
        total_bytes += match &step {
            Step::Raw(bytes) => bytes.len(),
            // Framing adds 12 bytes at most.
            Step::Paste(text) => text.len() + 12,
            Step::Key(_) => 8,
            Step::DelayMs(_) => 0,
        };
        steps.push(step);
    }
    if total_bytes > MAX_BYTES {
        return Err(Error::invalid(format!(
            "input of {total_bytes} bytes exceeds the {MAX_BYTES}-byte limit per request"
        )));
    }
    if total_delay > MAX_DELAY_TOTAL_MS {
        return Err(Error::invalid(format!(
            "input delays total {total_delay} ms, over the {MAX_DELAY_TOTAL_MS} ms limit per request"
        )));
    }
    Ok(steps)
}

/// A paste may not contain characters that could end (or forge) the bracketed-paste frame.
fn check_paste(index: usize, text: &str) -> Result<()> {
    for (offset, ch) in text.char_indices() {
        let name = match ch {
            '\u{1b}' => "ESC (0x1b)",
            '\u{9b}' => "CSI (U+009B)",
            '\u{0}' => "NUL",
            _ => continue,
        };
        return Err(Error::invalid(format!(
            "input step {index}: paste contains {name} at byte {offset}; a paste may not contain \
             control characters that could end the bracketed-paste frame"
        )));
    }
    Ok(())
}

/// Encodes a paste step for the pane's current mode.
pub fn encode_paste(text: &str, bracketed: bool) -> Vec<u8> {
    if bracketed {
        let mut out = Vec::with_capacity(text.len() + 12);
        out.extend_from_slice(b"\x1b[200~");
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\x1b[201~");
        out
    } else {
        text.as_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Steps as they arrive: typed by the protocol first, then checked here.
    fn steps(input: Value) -> Result<Vec<Step>> {
        let typed: Vec<InputStep> =
            belfry_proto::de::from_value(&input).map_err(|err| Error::invalid(err.to_string()))?;
        parse_steps(&typed)
    }

    #[test]
    fn keys() {
        assert_eq!(Key::parse("Enter").unwrap().encode(false), b"\r");
        assert_eq!(Key::parse("C-c").unwrap().encode(false), b"\x03");
        assert_eq!(Key::parse("Up").unwrap().encode(true), b"\x1bOA");
        assert_eq!(Key::parse("F5").unwrap().encode(false), b"\x1b[15~");
        assert_eq!(Key::parse("F12").unwrap().encode(false), b"\x1b[24~");
        let err = Key::parse("Hyper").unwrap_err().to_string();
        assert!(err.contains("unknown key name \"Hyper\""), "{err}");
        assert!(Key::parse("F13").is_err());
        assert!(Key::parse("C-1").is_err());
    }

    #[test]
    fn limits() {
        let big = "x".repeat(MAX_BYTES + 1);
        let err = steps(json!([{"text": big}])).unwrap_err().to_string();
        assert!(err.contains("65536-byte limit"), "{err}");
        let err = steps(json!([{"delay_ms": 2001}])).unwrap_err().to_string();
        assert!(err.contains("2000"), "{err}");
        let err = steps(json!([{"delay_ms": 2000},{"delay_ms": 2000},{"delay_ms": 1001}]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("5000"), "{err}");
        let err = steps(json!([{"paste": "a\u{1b}[201~b"}]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ESC"), "{err}");
        let err = steps(json!([{"shout": "x"}])).unwrap_err().to_string();
        assert!(err.contains("\"shout\" is not one of text"), "{err}");
        let ok =
            steps(json!([{"paste":"hi"},{"delay_ms":5},{"key":"Enter"},{"bytes":"AAE="}])).unwrap();
        assert_eq!(ok.len(), 4);
        assert_eq!(ok[3], Step::Raw(vec![0, 1]));
    }

    #[test]
    fn paste_framing() {
        assert_eq!(encode_paste("a", true), b"\x1b[200~a\x1b[201~");
        assert_eq!(encode_paste("a", false), b"a");
    }
}
