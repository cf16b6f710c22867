//! A scan of KDL text for nesting depth, run before the KDL parser sees the text.
//!
//! The `kdl` parser recurses once per `{ … }` block and once per nested `/* … */` comment, and
//! it does so even inside a `/-` (slashdash) comment, which it parses before discarding. Some
//! 2000 levels, 12 KB of text, overflow the main thread's stack and the process aborts with
//! SIGABRT instead of reporting an error (spec §12: bad input gets a clear error, never a
//! crash). A declaration needs three levels (`agent { ding { adapter { … } } }`), so this scan
//! refuses anything deeper than [`MAX_NESTING`], long before any stack is at risk.
//!
//! The scan is a small lexer that knows just enough of KDL v2 to find the braces and comment
//! openers that count: it skips quoted strings (with `\` escapes), multi-line `"""` strings, raw
//! strings (`#"…"#`, `##"…"##`, `#"""…"""#`) and `//` comments, so a `{` inside a string is
//! text, not nesting.
//!
//! The scan errs on the side of counting. The parser recovers from errors and goes on parsing
//! after them, so a string that is not closed (or a one-line string that meets a line break)
//! does not hide what follows from its recursion: the scan then treats the opening quote as
//! ordinary text and counts the braces after it.
//!
//! That lexing is still a model of the parser's, and the parser's error recovery can read the
//! inside of a string it rejects (an invalid escape, a forbidden code point) as code. So the
//! depth scan gives the clear message, and a second, cruder bound makes the guarantee: the text
//! may hold at most [`MAX_OPENERS`] `{` and `/*` in all, counted everywhere, strings and
//! comments included. No reading of the text can nest deeper than it has openers, and the
//! caller parses on a thread whose stack, [`PARSER_STACK_BYTES`], holds that many levels with
//! room to spare (a level costs about 7 KB in a debug build, less in a release build).

/// The most `{` and `/*` a declaration file may hold, wherever they are. A hundred agents
/// with `env` and `ding` blocks use about 400.
pub const MAX_OPENERS: usize = 2048;

/// The stack of the thread that parses a declaration file: room for [`MAX_OPENERS`] levels
/// of the parser's recursion, twice over in a debug build.
pub const PARSER_STACK_BYTES: usize = 32 << 20;

/// Where the text holds its `MAX_OPENERS + 1`-th opener, if it holds that many.
pub fn check_openers(source: &str, limit: usize) -> Result<(), usize> {
    let bytes = source.as_bytes();
    let mut openers = 0usize;
    for at in 0..bytes.len() {
        let opens = bytes[at] == b'{' || bytes[at..].starts_with(b"/*");
        if opens {
            openers += 1;
            if openers > limit {
                return Err(at);
            }
        }
    }
    Ok(())
}

/// The deepest nesting of `{ … }` blocks, or of `/* … */` comments inside one another, that a
/// declaration file may have.
pub const MAX_NESTING: usize = 32;

/// Where the text first nests deeper than [`MAX_NESTING`]: the byte offset of the opener
/// (`{` or `/*`) that goes one level too deep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// Byte offset of the opener.
    pub offset: usize,
    /// What nests: blocks or comments.
    pub what: Nesting,
}

/// Which kind of nesting went too deep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// `{ … }` child blocks.
    Blocks,
    /// `/* … */` comments inside one another.
    Comments,
}

/// Scans `source` and returns where it first nests deeper than `limit`, if it does.
pub fn check_nesting(source: &str, limit: usize) -> Result<(), TooDeep> {
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    let mut at = 0usize;
    while at < bytes.len() {
        at = match bytes[at] {
            b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(TooDeep {
                        offset: at,
                        what: Nesting::Blocks,
                    });
                }
                at + 1
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                at + 1
            }
            // A string that does not end is not skipped (see the module comment).
            b'"' => skip_quoted(bytes, at).unwrap_or(at + 1),
            b'#' => skip_raw(bytes, at).unwrap_or(at + 1),
            b'/' if bytes.get(at + 1) == Some(&b'/') => skip_line(bytes, at),
            b'/' if bytes.get(at + 1) == Some(&b'*') => skip_block_comment(bytes, at, limit)?,
            _ => at + 1,
        };
    }
    Ok(())
}

/// Past a `"…"` or `"""…"""` string starting at `at`; `None` if it never ends, or if a
/// one-line string meets a line break.
fn skip_quoted(bytes: &[u8], at: usize) -> Option<usize> {
    let multi_line = bytes[at..].starts_with(b"\"\"\"");
    let (mut i, closer): (usize, &[u8]) = if multi_line {
        (at + 3, b"\"\"\"")
    } else {
        (at + 1, b"\"")
    };
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            // An escape takes the next byte with it, whatever it is (`\"`, `\\`, or the first
            // byte of a whitespace escape), so an escaped quote never ends the string.
            i += 2;
        } else if bytes[i..].starts_with(closer) {
            return Some(i + closer.len());
        } else if !multi_line && line_break_at(bytes, i) {
            return None;
        } else {
            i += 1;
        }
    }
    None
}

/// KDL v2 line breaks: CR, LF, form feed, NEL (U+0085), LS (U+2028) and PS (U+2029).
fn line_break_at(bytes: &[u8], at: usize) -> bool {
    let rest = &bytes[at..];
    matches!(rest.first(), Some(b'\r' | b'\n' | b'\x0c'))
        || rest.starts_with("\u{85}".as_bytes())
        || rest.starts_with("\u{2028}".as_bytes())
        || rest.starts_with("\u{2029}".as_bytes())
}

/// Past a raw string (`#"…"#`, `##"""…"""##`, …) starting at `at`, or past the `#`s of a
/// keyword such as `#true`; `None` if a raw string never ends, or if a one-line raw string
/// meets a line break.
fn skip_raw(bytes: &[u8], at: usize) -> Option<usize> {
    let hashes = bytes[at..].iter().take_while(|&&b| b == b'#').count();
    let open = at + hashes;
    if bytes.get(open) != Some(&b'"') {
        return Some(open);
    }
    let quotes = if bytes[open..].starts_with(b"\"\"\"") {
        3
    } else {
        1
    };
    let mut closer = vec![b'"'; quotes];
    closer.extend(std::iter::repeat_n(b'#', hashes));
    let body = open + quotes;
    let end = bytes
        .get(body..)?
        .windows(closer.len())
        .position(|window| window == closer.as_slice())
        .map(|found| body + found)?;
    if quotes == 1 && (body..end).any(|i| line_break_at(bytes, i)) {
        return None;
    }
    Some(end + closer.len())
}

/// Past a `//` comment: to the end of its line.
fn skip_line(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |newline| at + newline + 1)
}

/// Past a `/* … */` comment starting at `at`, which may hold comments of its own. An
/// unterminated comment is not skipped: the scan goes on after its `/*`.
fn skip_block_comment(bytes: &[u8], at: usize, limit: usize) -> Result<usize, TooDeep> {
    let mut depth = 0usize;
    let mut i = at;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"/*") {
            depth += 1;
            if depth > limit {
                return Err(TooDeep {
                    offset: i,
                    what: Nesting::Comments,
                });
            }
            i += 2;
        } else if bytes[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Ok(i);
            }
        } else {
            i += 1;
        }
    }
    Ok(at + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(depth: usize) -> String {
        format!("{}{}", "a {".repeat(depth), "}".repeat(depth))
    }

    #[test]
    fn nesting_up_to_the_limit_passes_and_one_more_is_refused_at_its_opener() {
        assert_eq!(check_nesting(&blocks(4), 4), Ok(()));
        let deep = blocks(5);
        assert_eq!(
            check_nesting(&deep, 4),
            Err(TooDeep {
                offset: deep.find("a {a {a {a {a {").map_or(0, |start| start + 14),
                what: Nesting::Blocks
            })
        );
    }

    #[test]
    fn openers_count_everywhere_up_to_the_limit() {
        assert_eq!(check_openers("a \"{\" /* {} */ b {}", 4), Ok(()));
        assert_eq!(check_openers("a \"{\" /* {} */ b {}", 3), Err(17));
    }

    #[test]
    fn siblings_do_not_add_up() {
        let wide = "a { b {} }\n".repeat(100);
        assert_eq!(check_nesting(&wide, 2), Ok(()));
    }

    #[test]
    fn braces_inside_strings_and_line_comments_are_text() {
        for text in [
            r#"a "{{{{{{" "\"{{{{{""#,
            "a \"\"\"\n{{{{{{\n\"\"\"",
            r###"a #"{{{{{"{{"# ##"""{{{{{"#"""##"###,
            "a // {{{{{{{\nb",
            "a #true {}",
        ] {
            assert_eq!(check_nesting(text, 1), Ok(()), "{text}");
        }
    }

    #[test]
    fn slashdashed_blocks_and_nested_comments_count() {
        assert!(check_nesting(&format!("/-{}", blocks(3)), 2).is_err());
        let comments = format!("{}{}", "/*".repeat(3), "*/".repeat(3));
        assert_eq!(check_nesting(&comments, 3), Ok(()));
        assert_eq!(
            check_nesting(&comments, 2),
            Err(TooDeep {
                offset: 4,
                what: Nesting::Comments
            })
        );
        // A `{` inside a comment is text.
        assert_eq!(check_nesting("/* {{{{ */ a", 1), Ok(()));
    }

    #[test]
    fn unterminated_strings_and_comments_hide_no_braces() {
        for text in [
            "a \"{{{{",
            "a #\"{{{{",
            "/* /* {{{{",
            "a \"\n{{{{\"",
            "a #\"\n{{{{\"#",
            "a \"\"\"\n{{{{",
        ] {
            assert!(check_nesting(text, 1).is_err(), "{text:?}");
        }
    }
}
