//! Message files: optional YAML-style front matter followed by a markdown body (spec §7.1).
//!
//! ```text
//! ---
//! from: planner
//! subject: review the parser
//! in-reply-to: 1785070000000-abc123.md
//! tags: [review, parser]
//! priority: high
//! ---
//! The body, in markdown.
//! ```
//!
//! The reader is deliberately lenient: the inbox is the authority, so a message whose front
//! matter is odd must still be listed, noticed and read. An opening `---` without a closing one
//! means the file has no front matter (all of it is body); lines inside the block that are not
//! `key: value` are skipped; unknown keys are kept, one line each, and written back unchanged.
//! The writer quotes any value that a YAML reader could take for something other than the same
//! one-line string, so [`parse`] of [`render`] gives back what was rendered.

use serde::Serialize;

use crate::names::MessageName;

const FENCE: &str = "---";

/// The known front matter fields, plus unknown ones kept verbatim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FrontMatter {
    /// Who sent the message.
    pub from: Option<String>,
    /// One-line summary, shown in the notice.
    pub subject: Option<String>,
    /// The message this one answers, usually a message file name.
    #[serde(rename = "in-reply-to")]
    pub in_reply_to: Option<String>,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// Free-form priority word.
    pub priority: Option<String>,
    /// Keys this crate does not know, with their one-line values as written, in file order.
    pub extra: Vec<(String, String)>,
}

impl FrontMatter {
    /// Whether no field is set; such front matter is not written at all.
    pub fn is_empty(&self) -> bool {
        self.from.is_none()
            && self.subject.is_none()
            && self.in_reply_to.is_none()
            && self.tags.is_empty()
            && self.priority.is_none()
            && self.extra.is_empty()
    }
}

/// Whether a message is still unread (`new/`) or already archived (`archive/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageStatus {
    /// In `new/`.
    Unread,
    /// In `archive/`: a durable receipt.
    Archived,
}

/// A message read from an inbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    /// Its file name.
    pub name: MessageName,
    /// Where it was found.
    pub status: MessageStatus,
    /// Its parsed front matter.
    pub front_matter: FrontMatter,
    /// Everything after the front matter.
    pub body: String,
}

/// Splits message text into front matter and body.
pub fn parse(text: &str) -> (FrontMatter, &str) {
    let Some(after_open) = strip_fence_line(text) else {
        return (FrontMatter::default(), text);
    };
    let mut offset = 0;
    for line in after_open.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == FENCE {
            let block = &after_open[..offset];
            let body = &after_open[offset + line.len()..];
            return (parse_block(block), body);
        }
        offset += line.len();
    }
    (FrontMatter::default(), text)
}

/// Writes front matter (omitted when empty) followed by the body.
pub fn render(front_matter: &FrontMatter, body: &str) -> String {
    if front_matter.is_empty() {
        if strip_fence_line(body).is_none() {
            return body.to_owned();
        }
        // A body that itself opens with a fence gets an empty block in front of it, so that it
        // is not read back as front matter.
        return format!("---\n---\n{body}");
    }
    let mut text = String::from("---\n");
    let mut field = |key: &str, value: &str| {
        text.push_str(key);
        text.push_str(": ");
        text.push_str(value);
        text.push('\n');
    };
    if let Some(from) = &front_matter.from {
        field("from", &render_scalar(from));
    }
    if let Some(subject) = &front_matter.subject {
        field("subject", &render_scalar(subject));
    }
    if let Some(in_reply_to) = &front_matter.in_reply_to {
        field("in-reply-to", &render_scalar(in_reply_to));
    }
    if !front_matter.tags.is_empty() {
        let tags: Vec<String> = front_matter
            .tags
            .iter()
            .map(|tag| render_scalar(tag))
            .collect();
        field("tags", &format!("[{}]", tags.join(", ")));
    }
    if let Some(priority) = &front_matter.priority {
        field("priority", &render_scalar(priority));
    }
    for (key, value) in &front_matter.extra {
        // An unknown key is written back only if it reads back as the same key. Its value is
        // written as it was read (verbatim, control characters and all: quoting it would
        // read back as a different value), unless it holds a line feed, which no value read
        // from a file does: that one is quoted, so that it cannot end its line.
        if is_known_key(key) || !is_key(key) {
            continue;
        }
        if value.contains('\n') {
            field(key, &quote(value));
        } else {
            field(key, value.trim());
        }
    }
    text.push_str("---\n");
    text.push_str(body);
    text
}

fn strip_fence_line(text: &str) -> Option<&str> {
    text.strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
}

fn parse_block(block: &str) -> FrontMatter {
    let mut front_matter = FrontMatter::default();
    let mut lines = block
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .peekable();
    while let Some(line) = lines.next() {
        let Some((key, value)) = split_key_value(line) else {
            continue;
        };
        match key {
            "from" => front_matter.from = parse_optional_scalar(value),
            "subject" => front_matter.subject = parse_optional_scalar(value),
            "in-reply-to" => front_matter.in_reply_to = parse_optional_scalar(value),
            "priority" => front_matter.priority = parse_optional_scalar(value),
            "tags" if value.is_empty() => {
                // Block style: the items follow as `- item` lines.
                let mut tags = Vec::new();
                while let Some(item) = lines.peek().and_then(|next| block_item(next)) {
                    tags.extend(parse_optional_scalar(item));
                    lines.next();
                }
                front_matter.tags = tags;
            }
            "tags" => front_matter.tags = parse_tags(value),
            _ => front_matter.extra.push((key.to_owned(), value.to_owned())),
        }
    }
    front_matter
}

fn split_key_value(line: &str) -> Option<(&str, &str)> {
    if line.starts_with([' ', '\t', '#']) {
        return None;
    }
    let (key, value) = line.split_once(':')?;
    if !is_key(key) {
        return None;
    }
    if !(value.is_empty() || value.starts_with([' ', '\t'])) {
        return None;
    }
    Some((key, value.trim()))
}

fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_'))
}

fn is_known_key(key: &str) -> bool {
    matches!(
        key,
        "from" | "subject" | "in-reply-to" | "tags" | "priority"
    )
}

fn block_item(line: &str) -> Option<&str> {
    let item = line.trim_start().strip_prefix('-')?;
    (item.is_empty() || item.starts_with([' ', '\t'])).then(|| item.trim())
}

fn parse_optional_scalar(value: &str) -> Option<String> {
    let scalar = parse_scalar(value);
    (!scalar.is_empty()).then_some(scalar)
}

fn parse_scalar(value: &str) -> String {
    let value = value.trim();
    if value.starts_with('"') {
        if let Ok(text) = serde_json::from_str::<String>(value) {
            return text;
        }
        return value.to_owned();
    }
    if value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'') {
        return value[1..value.len() - 1].replace("''", "'");
    }
    match value.find(" #") {
        Some(comment) => value[..comment].trim_end().to_owned(),
        None => value.to_owned(),
    }
}

/// Parses a flow sequence `[a, "b, c", 'd']`; anything else is one tag.
fn parse_tags(value: &str) -> Vec<String> {
    let Some(inner) = value.strip_prefix('[') else {
        return parse_optional_scalar(value).into_iter().collect();
    };
    let mut tags = Vec::new();
    let mut rest = inner;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with(']') {
            break;
        }
        let (item, after) = split_flow_item(rest);
        tags.extend(parse_optional_scalar(item));
        rest = after.trim_start();
        match rest.strip_prefix(',') {
            Some(after_comma) => rest = after_comma,
            None => break,
        }
    }
    tags
}

/// Splits one item off the front of a flow sequence's remaining text.
fn split_flow_item(rest: &str) -> (&str, &str) {
    let bytes = rest.as_bytes();
    let end = match bytes.first() {
        Some(b'"') => closing_quote(bytes, b'"', Escape::Backslash),
        Some(b'\'') => closing_quote(bytes, b'\'', Escape::Doubled),
        _ => None,
    };
    match end {
        Some(end) => rest.split_at(end + 1),
        None => {
            let end = rest.find([',', ']']).unwrap_or(rest.len());
            rest.split_at(end)
        }
    }
}

#[derive(Clone, Copy)]
enum Escape {
    Backslash,
    Doubled,
}

/// Index of the quote closing the quoted string that opens `bytes`.
fn closing_quote(bytes: &[u8], quote: u8, escape: Escape) -> Option<usize> {
    let mut index = 1;
    while index < bytes.len() {
        let byte = bytes[index];
        match escape {
            Escape::Backslash if byte == b'\\' => index += 2,
            Escape::Doubled if byte == quote && bytes.get(index + 1) == Some(&quote) => index += 2,
            _ if byte == quote => return Some(index),
            _ => index += 1,
        }
    }
    None
}

fn render_scalar(value: &str) -> String {
    if needs_quotes(value) {
        quote(value)
    } else {
        value.to_owned()
    }
}

fn quote(value: &str) -> String {
    // JSON string syntax is valid YAML double-quoted syntax for every string serde_json writes.
    serde_json::Value::String(value.to_owned()).to_string()
}

/// Whether a plain (unquoted) scalar could read back as something else.
fn needs_quotes(value: &str) -> bool {
    const INDICATORS: &[char] = &[
        '"', '\'', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`', ',', '?', ':',
        '-',
    ];
    const NON_STRINGS: &[&str] = &[
        "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n",
    ];
    let Some(first) = value.chars().next() else {
        return true;
    };
    INDICATORS.contains(&first)
        || value.starts_with(char::is_whitespace)
        || value.ends_with(char::is_whitespace)
        || value.ends_with(':')
        || value.contains(": ")
        || value.contains(" #")
        || value.contains([',', '[', ']', '{', '}'])
        || value.chars().any(|c| c.is_control() || is_line_break(c))
        || NON_STRINGS.contains(&value.to_ascii_lowercase().as_str())
        || value.parse::<f64>().is_ok()
}

/// Unicode line and paragraph separators, which some YAML readers treat as line breaks.
fn is_line_break(c: char) -> bool {
    matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FrontMatter {
        FrontMatter {
            from: Some("planner".into()),
            subject: Some("review: the parser, please".into()),
            in_reply_to: Some("1785070000000-abc123.md".into()),
            tags: vec!["review".into(), "a, b".into()],
            priority: Some("high".into()),
            extra: vec![("x-trace".into(), "t-1".into())],
        }
    }

    #[test]
    fn renders_the_documented_shape() {
        let text = render(&sample(), "Body line.\n");
        assert_eq!(
            text,
            "---\nfrom: planner\nsubject: \"review: the parser, please\"\n\
             in-reply-to: 1785070000000-abc123.md\ntags: [review, \"a, b\"]\n\
             priority: high\nx-trace: t-1\n---\nBody line.\n"
        );
        let (front_matter, body) = parse(&text);
        assert_eq!(front_matter, sample());
        assert_eq!(body, "Body line.\n");
    }

    #[test]
    fn empty_front_matter_is_not_written() {
        assert_eq!(
            render(&FrontMatter::default(), "just a body"),
            "just a body"
        );
        let (front_matter, body) = parse("just a body");
        assert!(front_matter.is_empty());
        assert_eq!(body, "just a body");
    }

    #[test]
    fn a_body_that_opens_with_a_fence_survives_without_front_matter() {
        let body = "---\nnot: front matter\n---\ntext";
        let text = render(&FrontMatter::default(), body);
        let (front_matter, parsed_body) = parse(&text);
        assert!(front_matter.is_empty());
        assert_eq!(parsed_body, body);
    }

    #[test]
    fn unterminated_front_matter_is_all_body() {
        let text = "---\nfrom: x\nno closing fence\n";
        let (front_matter, body) = parse(text);
        assert!(front_matter.is_empty());
        assert_eq!(body, text);
    }

    #[test]
    fn reads_hand_written_front_matter_leniently() {
        let text = "---\r\nfrom: 'o''neil'\r\nsubject: hello # a comment\r\nnot a field\r\n\
                    tags:\r\n  - one\r\n  - \"two\"\r\n# comment\r\npriority:\r\n---\r\nbody";
        let (front_matter, body) = parse(text);
        assert_eq!(front_matter.from.as_deref(), Some("o'neil"));
        assert_eq!(front_matter.subject.as_deref(), Some("hello"));
        assert_eq!(front_matter.tags, ["one", "two"]);
        assert_eq!(front_matter.priority, None);
        assert_eq!(body, "body");
    }

    #[test]
    fn flow_tags_accept_quotes_and_single_values() {
        assert_eq!(
            parse_tags("[a, 'b, c', \"d\\\"e\" , ]"),
            ["a", "b, c", "d\"e"]
        );
        assert_eq!(parse_tags("solo"), ["solo"]);
        assert_eq!(parse_tags("[]"), Vec::<String>::new());
        assert_eq!(parse_tags("[unterminated"), ["unterminated"]);
    }

    #[test]
    fn values_that_yaml_would_retype_are_quoted() {
        for value in [
            "true", "null", "42", "1e3", "- item", "", " padded", "a: b", "#x",
        ] {
            assert!(render_scalar(value).starts_with('"'), "{value:?}");
            assert_eq!(parse_scalar(&render_scalar(value)), value);
        }
        assert_eq!(render_scalar("plain words"), "plain words");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn field() -> impl Strategy<Value = Option<String>> {
            proptest::option::of("\\PC{1,20}|[\\x00-\\x7f]{1,20}")
        }

        proptest! {
            #[test]
            fn render_then_parse_round_trips(
                from in field(),
                subject in field(),
                in_reply_to in field(),
                priority in field(),
                tags in proptest::collection::vec("\\PC{1,12}|[\\x00-\\x7f]{1,12}", 0..4),
                body in "\\PC{0,40}|[\\x00-\\x7f]{0,40}",
            ) {
                let front_matter = FrontMatter { from, subject, in_reply_to, tags, priority, extra: Vec::new() };
                let text = render(&front_matter, &body);
                let (parsed, parsed_body) = parse(&text);
                prop_assert_eq!(parsed, front_matter);
                prop_assert_eq!(parsed_body, body.as_str());
            }

            #[test]
            fn parse_never_panics(text in "\\PC{0,200}|[\\x00-\\x7f]{0,200}") {
                let (_, body) = parse(&text);
                prop_assert!(text.ends_with(body));
            }
        }
    }
}
