//! A JSON-with-comments reader that keeps byte spans, so that the merge engine can change one
//! array element of a settings file and leave every other byte — comments, key order,
//! spacing, unrelated fields — as it was (spec §9: merges preserve unmanaged native hooks and
//! unrelated fields byte for byte).
//!
//! The text is read by `jsonc-parser` (the parser of the dprint formatter), set to JSON plus
//! `//` and `/* */` comments and trailing commas, which is what the harnesses' settings
//! readers accept, and nothing looser. Its syntax tree gives the byte range of every value and
//! member; this module keeps those ranges as [`Node`]s, which the merge engine splices at.
//! Reading is one pass over the text, whatever its size or its number of commas (issue 39:
//! the hand-written stripper this replaces copied the rest of the text at every comma).

use jsonc_parser::ast;
use jsonc_parser::{CollectOptions, ParseOptions};
use serde_json::Value;

/// One value in the text, with its span and, for containers, its children.
#[derive(Debug, Clone)]
pub struct Node {
    /// Byte range of the value itself.
    pub start: usize,
    pub end: usize,
    /// Where the member that holds this value starts (its key) when the value is a member of
    /// an object; the value's own start otherwise.
    pub member_start: usize,
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

/// What a reader of JSON accepts beyond strict JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leniency {
    /// `//` and `/* */` comments and trailing commas (the settings files belfry edits).
    CommentsAndTrailingCommas,
    /// Comments, but no trailing commas: a reader that strips comments and then parses
    /// strict JSON.
    CommentsOnly,
}

fn options(leniency: Leniency) -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: leniency == Leniency::CommentsAndTrailingCommas,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

fn syntax_tree(text: &str, leniency: Leniency) -> Result<ast::Value<'_>, SyntaxError> {
    let parsed = jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &options(leniency))
        .map_err(|err| SyntaxError {
        line: err.line_display(),
        column: err.column_display(),
        message: err.kind().to_string(),
    })?;
    parsed.value.ok_or_else(|| SyntaxError {
        line: 1,
        column: 1,
        message: "the text holds no JSON value".to_string(),
    })
}

/// Parses `text`: one value, surrounded by whitespace and comments only.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let tree = syntax_tree(text, Leniency::CommentsAndTrailingCommas)?;
    let mut problem = None;
    let node = node(&tree, None, text, &mut problem);
    match problem {
        Some(problem) => Err(problem),
        None => Ok(node),
    }
}

/// The value of `text` as a reader with `leniency` sees it, or why it cannot read it.
pub fn parse_value(text: &str, leniency: Leniency) -> Result<Value, SyntaxError> {
    // Most of these files are strict JSON (a harness writes its own state files so), which
    // `serde_json` reads straight to a value several times faster than a syntax tree is
    // built and converted; JSON is a subset of both dialects, read to the same value
    // (`json_reads_as_serde_json_reads_it`). Anything else is read by the JSONC parser.
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Ok(value);
    }
    let tree = syntax_tree(text, leniency)?;
    match out_of_range(&tree) {
        Some(at) => Err(error_at(text, at, "a number out of range")),
        None => Ok(Value::from(tree)),
    }
}

/// Where the first number `serde_json` cannot hold is, if any: one walk, nothing built.
fn out_of_range(value: &ast::Value<'_>) -> Option<usize> {
    match value {
        ast::Value::Object(object) => object
            .properties
            .iter()
            .find_map(|property| out_of_range(&property.value)),
        ast::Value::Array(array) => array.elements.iter().find_map(out_of_range),
        ast::Value::NumberLit(number) => number
            .value
            .parse::<serde_json::Number>()
            .is_err()
            .then_some(number.range.start),
        _ => None,
    }
}

/// The node of one syntax-tree value. A number `serde_json` cannot hold (`1e400`) is a
/// problem here, as it is to a strict reader, rather than a string in the value.
fn node(
    value: &ast::Value<'_>,
    member_start: Option<usize>,
    text: &str,
    problem: &mut Option<SyntaxError>,
) -> Node {
    let range = value_range(value);
    let kind = match value {
        ast::Value::Object(object) => Kind::Object(
            object
                .properties
                .iter()
                .map(|property| {
                    (
                        property.name.as_str().to_string(),
                        node(&property.value, Some(property.range.start), text, problem),
                    )
                })
                .collect(),
        ),
        ast::Value::Array(array) => Kind::Array(
            array
                .elements
                .iter()
                .map(|element| node(element, None, text, problem))
                .collect(),
        ),
        ast::Value::NumberLit(number) => {
            if problem.is_none() && number.value.parse::<serde_json::Number>().is_err() {
                *problem = Some(error_at(text, range.start, "a number out of range"));
            }
            Kind::Scalar
        }
        _ => Kind::Scalar,
    };
    Node {
        start: range.start,
        end: range.end,
        member_start: member_start.unwrap_or(range.start),
        kind,
    }
}

fn value_range(value: &ast::Value<'_>) -> jsonc_parser::common::Range {
    match value {
        ast::Value::StringLit(lit) => lit.range,
        ast::Value::NumberLit(lit) => lit.range,
        ast::Value::BooleanLit(lit) => lit.range,
        ast::Value::Object(object) => object.range,
        ast::Value::Array(array) => array.range,
        ast::Value::NullKeyword(keyword) => keyword.range,
    }
}

/// A problem at byte `at` of `text`, with its 1-based line and column (computed once, for
/// the error only).
fn error_at(text: &str, at: usize, message: &str) -> SyntaxError {
    let before = text.get(..at).unwrap_or(text);
    SyntaxError {
        line: before.matches('\n').count() + 1,
        column: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
        message: message.to_string(),
    }
}

impl Node {
    /// The member `key` of an object node (the first, where a key is repeated).
    pub fn member(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Object(members) => members
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, node)| node),
            _ => None,
        }
    }

    /// How many members of an object node are named `key`.
    pub fn member_count(&self, key: &str) -> usize {
        match &self.kind {
            Kind::Object(members) => members.iter().filter(|(name, _)| name == key).count(),
            _ => 0,
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
        parse_value(span, Leniency::CommentsAndTrailingCommas).ok()
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
        assert_eq!(&text[a.member_start..a.start], "\"a\": ");
        assert_eq!(
            root.value(text),
            Some(serde_json::json!({"a": [1, {"b": "c"}], "d": true}))
        );
    }

    #[test]
    fn errors_name_line_and_column() {
        let err = parse("{\n  \"a\": tru\n}").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("2:8: Unexpected word"));
        let err = parse("{\"a\": 1} x").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("1:10: Text cannot contain more than one JSON value")
        );
        let err = parse("{\"a\": 1e400}").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("1:7: a number out of range"));
        assert!(parse("").is_err());
        assert!(parse("// only a comment\n").is_err());
    }

    #[test]
    fn only_comments_and_trailing_commas_are_read_beyond_json() {
        for loose in [
            "{a: 1}", "{'a': 1}", "[0x10]", "[+1]", "[.5]", "[NaN]", "[1 2]",
        ] {
            assert!(parse(loose).is_err(), "{loose} was read");
        }
        assert!(parse_value("[1,]", Leniency::CommentsOnly).is_err());
        assert_eq!(
            parse_value("/* c */ [1] // d", Leniency::CommentsOnly).ok(),
            Some(serde_json::json!([1]))
        );
    }

    /// Issue 39: a 2.5 MB file of many small members (a harness's own state file holds one
    /// per project and per tip) read whole, its value and every span. The stripper this
    /// replaced copied the rest of the text at each of its ~200 000 commas (57 s for `belfry
    /// new`); one pass reads it in milliseconds, so this test finishes at once.
    #[test]
    fn a_file_of_megabytes_with_many_commas_is_read_in_one_pass() {
        let mut text = String::from("{\n  // a harness's own state\n  \"projects\": {\n");
        let mut n = 0;
        while text.len() < 2_500_000 {
            text.push_str(&format!(
                "    \"/home/u/p{n}\": {{\"a\": [1, 2, 3, 4, 5], \"b\": \"x, y\", }},\n"
            ));
            n += 1;
        }
        text.push_str("    \"/home/u/last\": {\"hasTrustDialogAccepted\": true}\n  }\n}\n");
        let root = parse(&text).unwrap_or_else(|err| panic!("{err}"));
        let projects = root.member("projects").unwrap_or_else(|| panic!("none"));
        assert!(matches!(&projects.kind, Kind::Object(m) if m.len() == n + 1));
        let value = root.value(&text).unwrap_or_else(|| panic!("no value"));
        assert_eq!(
            value.pointer("/projects/~1home~1u~1last/hasTrustDialogAccepted"),
            Some(&Value::Bool(true))
        );
        assert_eq!(
            value.pointer("/projects/~1home~1u~1p7/b"),
            Some(&Value::from("x, y"))
        );
    }

    proptest::proptest! {
        /// Whatever the text (brackets, strings, escapes, comments, a multi-byte character),
        /// reading it ends in spans or an error with a place, never a panic, and an accepted
        /// document's root span holds a value.
        #[test]
        fn any_text_reads_or_fails_cleanly(text in "[{}\\[\\],:\"a-c0-9 /*\n\\\\é-]{0,40}") {
            if let Ok(root) = parse(&text) {
                proptest::prop_assert!(root.value(&text).is_some(), "{:?}", text);
            }
            let _ = parse_value(&text, Leniency::CommentsOnly);
        }

        /// What `serde_json` reads, this reads to the same value.
        #[test]
        fn json_reads_as_serde_json_reads_it(text in "[{}\\[\\],:\"a-c0-9 .eE+\n\\\\é-]{0,30}") {
            if let Ok(expected) = serde_json::from_str::<Value>(&text) {
                let read = parse(&text).ok().and_then(|root| root.value(&text));
                proptest::prop_assert_eq!(read, Some(expected), "{:?}", text);
            }
        }
    }
}
