//! A JSON-with-comments reader that keeps byte spans, so that the merge engine can change one
//! array element of a settings file and leave every other byte — comments, key order,
//! spacing, unrelated fields — as it was (spec §9: merges preserve unmanaged native hooks and
//! unrelated fields byte for byte).
//!
//! It reads JSON plus `//` and `/* */` comments and trailing commas, which is what the
//! harnesses' settings readers accept. It does not build values: it records where each value
//! is, and [`Node::value`] parses one span with `serde_json` when the content is needed.

use serde_json::Value;

/// One value in the text, with its span and, for containers, its children.
#[derive(Debug, Clone)]
pub struct Node {
    /// Byte range of the value itself.
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    /// Members in text order: the key (unescaped) and the value.
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Scalar,
}

/// Where a text is not the JSON(C) it should be: a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// The deepest nesting read; settings files nest a handful of levels.
const MAX_DEPTH: usize = 128;

/// Parses `text`: one value, surrounded by whitespace and comments only.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut reader = Reader {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    reader.skip_trivia()?;
    let node = reader.value(0)?;
    reader.skip_trivia()?;
    if reader.at < reader.bytes.len() {
        return Err(reader.error("unexpected text after the value"));
    }
    Ok(node)
}

impl Node {
    /// The member `key` of an object node.
    pub fn member(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Object(members) => members
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, node)| node),
            _ => None,
        }
    }

    /// The elements of an array node.
    pub fn elements(&self) -> &[Node] {
        match &self.kind {
            Kind::Array(elements) => elements,
            _ => &[],
        }
    }

    pub fn is_object(&self) -> bool {
        matches!(self.kind, Kind::Object(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self.kind, Kind::Array(_))
    }

    /// The value of this span, comments removed.
    pub fn value(&self, text: &str) -> Option<Value> {
        let span = text.get(self.start..self.end)?;
        serde_json::from_str(&strip_comments(span)).ok()
    }
}

/// The text with comments replaced by spaces and trailing commas removed, for `serde_json`.
pub fn strip_comments(text: &str) -> String {
    strip(text, TrailingCommas::Remove)
}

/// The text with comments replaced by spaces, trailing commas kept: what a reader that
/// strips comments and then parses strict JSON sees.
pub fn strip_comments_only(text: &str) -> String {
    strip(text, TrailingCommas::Keep)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TrailingCommas {
    Remove,
    Keep,
}

fn strip(text: &str, commas: TrailingCommas) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                let start = at;
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at = (at + 1).min(bytes.len());
                out.extend_from_slice(&bytes[start..at]);
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                while at < bytes.len() && bytes[at] != b'\n' {
                    out.push(b' ');
                    at += 1;
                }
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let end = text[at + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |i| at + 2 + i + 2);
                out.extend(std::iter::repeat_n(b' ', end - at));
                at = end;
            }
            b',' if commas == TrailingCommas::Keep => {
                out.push(b',');
                at += 1;
            }
            b',' => {
                // A comma followed only by trivia and a closer is a trailing comma.
                let rest = String::from_utf8_lossy(&bytes[at + 1..]).into_owned();
                let next = strip_leading_trivia(&rest);
                if next.starts_with(']') || next.starts_with('}') {
                    out.push(b' ');
                } else {
                    out.push(b',');
                }
                at += 1;
            }
            byte => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

fn strip_leading_trivia(text: &str) -> &str {
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        if let Some(after) = trimmed.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = trimmed.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            return trimmed;
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn error(&self, message: &str) -> SyntaxError {
        let before = &self.text[..self.at.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        SyntaxError {
            line,
            column,
            message: message.to_string(),
        }
    }

    fn skip_trivia(&mut self) -> Result<(), SyntaxError> {
        loop {
            while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
                self.at += 1;
            }
            if self.bytes[self.at..].starts_with(b"//") {
                while self.at < self.bytes.len() && self.bytes[self.at] != b'\n' {
                    self.at += 1;
                }
            } else if self.bytes[self.at..].starts_with(b"/*") {
                match self.text[self.at + 2..].find("*/") {
                    Some(offset) => self.at += 2 + offset + 2,
                    None => return Err(self.error("a /* comment is not closed")),
                }
            } else {
                return Ok(());
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let start = self.at;
        match self.bytes.get(self.at) {
            Some(b'{') => self.object(start, depth),
            Some(b'[') => self.array(start, depth),
            Some(b'"') => {
                self.string()?;
                Ok(Node {
                    start,
                    end: self.at,
                    kind: Kind::Scalar,
                })
            }
            Some(_) => {
                while self.at < self.bytes.len()
                    && !matches!(self.bytes[self.at], b',' | b']' | b'}' | b'/')
                    && !self.bytes[self.at].is_ascii_whitespace()
                {
                    self.at += 1;
                }
                let word = &self.text[start..self.at];
                if word.is_empty() || serde_json::from_str::<Value>(word).is_err() {
                    self.at = start;
                    return Err(self.error("expected a JSON value"));
                }
                Ok(Node {
                    start,
                    end: self.at,
                    kind: Kind::Scalar,
                })
            }
            None => Err(self.error("expected a value, found the end of the text")),
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.at;
        self.at += 1;
        while self.at < self.bytes.len() && self.bytes[self.at] != b'"' {
            if self.bytes[self.at] == b'\n' {
                return Err(self.error("a string is not closed on its line"));
            }
            self.at += if self.bytes[self.at] == b'\\' { 2 } else { 1 };
        }
        if self.at >= self.bytes.len() {
            self.at = start;
            return Err(self.error("a string is not closed"));
        }
        self.at += 1;
        match serde_json::from_str::<String>(&self.text[start..self.at]) {
            Ok(text) => Ok(text),
            Err(_) => {
                self.at = start;
                Err(self.error("invalid string escape"))
            }
        }
    }

    fn object(&mut self, start: usize, depth: usize) -> Result<Node, SyntaxError> {
        self.at += 1;
        let mut members = Vec::new();
        loop {
            self.skip_trivia()?;
            match self.bytes.get(self.at) {
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Node {
                        start,
                        end: self.at,
                        kind: Kind::Object(members),
                    });
                }
                Some(b'"') => {}
                _ => return Err(self.error("expected a key in quotes or `}`")),
            }
            let key = self.string()?;
            self.skip_trivia()?;
            if self.bytes.get(self.at) != Some(&b':') {
                return Err(self.error("expected `:` after a key"));
            }
            self.at += 1;
            self.skip_trivia()?;
            let value = self.value(depth + 1)?;
            members.push((key, value));
            self.skip_trivia()?;
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self, start: usize, depth: usize) -> Result<Node, SyntaxError> {
        self.at += 1;
        let mut elements = Vec::new();
        loop {
            self.skip_trivia()?;
            if self.bytes.get(self.at) == Some(&b']') {
                self.at += 1;
                return Ok(Node {
                    start,
                    end: self.at,
                    kind: Kind::Array(elements),
                });
            }
            elements.push(self.value(depth + 1)?);
            self.skip_trivia()?;
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {}
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_values_and_comments_are_trivia() {
        let text = "// top\n{ \"a\": [1, /* x */ {\"b\": \"c\"},], \"d\": true, }\n";
        let root = parse(text).unwrap_or_else(|err| panic!("{err}"));
        let a = root.member("a").unwrap_or_else(|| panic!("no a"));
        assert_eq!(a.elements().len(), 2);
        let second = &a.elements()[1];
        assert_eq!(&text[second.start..second.end], "{\"b\": \"c\"}");
        assert_eq!(
            root.value(text),
            Some(serde_json::json!({"a": [1, {"b": "c"}], "d": true}))
        );
    }

    #[test]
    fn errors_name_line_and_column() {
        let err = parse("{\n  \"a\": tru\n}").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("2:8: expected a JSON value"));
        let err = parse("{\"a\": 1} x").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("1:10: unexpected text after the value")
        );
    }

    proptest::proptest! {
        /// Whatever the text (brackets, strings, escapes, comments, a multi-byte character),
        /// reading it ends in spans or an error with a place, never a panic, and an accepted
        /// document's root span holds a value `serde_json` reads.
        #[test]
        fn any_text_reads_or_fails_cleanly(text in "[{}\\[\\],:\"a-c0-9 /*\n\\\\é-]{0,40}") {
            if let Ok(root) = parse(&text) {
                proptest::prop_assert!(root.value(&text).is_some(), "{:?}", text);
            }
            let _ = strip_comments(&text);
            let _ = strip_comments_only(&text);
        }
    }
}
