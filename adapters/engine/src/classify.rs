//! The composer guard (spec §7.4): judges the lowest live composer on a screen by a grammar.
//!
//! The rule is one-sided on purpose. `Empty` needs a positive proof: a frame found where the
//! grammar says, the terminal cursor in it, and a body that is blank (where the grammar allows
//! that) or exactly a placeholder drawn in the placeholder's style. Any text that is not such a
//! placeholder is `Nonempty` (a draft, a paste not yet submitted), and anything else, every
//! dialog signature first of all, is `Unknown` with the reason. A screen never proves a pane
//! idle: a composer can be empty while a turn or a tool runs.

use std::fmt;

use crate::grammar::{Frame, Grammar};
use crate::screen::{style_matches, Screen, StyledChar};

/// The composer's state as the screen shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Composer {
    /// Positively recognised empty.
    Empty(EmptyBy),
    /// Holds text that is not a placeholder.
    Nonempty,
    /// Not understood.
    Unknown(UnknownReason),
}

/// Which rule proved a composer empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmptyBy {
    /// The body is blank and the grammar says a blank body is empty.
    Blank,
    /// The body is the placeholder with this index in the grammar.
    Placeholder(usize),
}

/// Why a composer is not understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownReason {
    /// A dialog signature matched a row.
    Modal {
        /// The signature's name.
        name: String,
        /// The row it matched.
        row: usize,
    },
    /// No row is where the grammar says the composer is.
    NoComposer,
    /// The composer's first row does not start with the prompt.
    PromptMissing {
        /// That row.
        row: usize,
    },
    /// More body rows than the grammar allows.
    TooTall {
        /// How many were found before giving up.
        rows: usize,
    },
    /// The terminal cursor is not on the composer.
    CursorOutside {
        /// Its row.
        row: usize,
    },
    /// The cursor's visibility is not the composer's.
    CursorVisibility {
        /// Whether it is shown.
        visible: bool,
    },
    /// A blank body, which the grammar does not say is empty.
    BlankNotUnderstood,
    /// The body reads as a placeholder, but the snapshot has no cell attributes to prove it.
    NoCells,
    /// The snapshot is inconsistent.
    BadScreen(String),
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnknownReason::Modal { name, row } => write!(f, "modal {name} on row {row}"),
            UnknownReason::NoComposer => f.write_str("no composer where the grammar puts it"),
            UnknownReason::PromptMissing { row } => {
                write!(f, "composer row {row} does not start with the prompt")
            }
            UnknownReason::TooTall { rows } => write!(f, "composer taller than {rows} rows"),
            UnknownReason::CursorOutside { row } => {
                write!(f, "the cursor (row {row}) is not on the composer")
            }
            UnknownReason::CursorVisibility { visible } => {
                let shown = if *visible { "shown" } else { "hidden" };
                write!(
                    f,
                    "the cursor is {shown}, unlike on this harness's composer"
                )
            }
            UnknownReason::BlankNotUnderstood => {
                f.write_str("a blank composer, which this grammar does not know as empty")
            }
            UnknownReason::NoCells => {
                f.write_str("placeholder-like text but no cell attributes to prove it")
            }
            UnknownReason::BadScreen(reason) => write!(f, "unreadable screen: {reason}"),
        }
    }
}

/// One body row of a found composer: the screen row and the first character of input on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyRow {
    /// The screen row.
    pub row: usize,
    /// The index (in characters) where input starts, after margin and prompt.
    pub start: usize,
}

/// A judgement with the rows it looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The composer's state.
    pub composer: Composer,
    /// The composer's body rows, when one was found.
    pub body: Vec<BodyRow>,
    /// The rows the composer's frame spans (body and borders), when one was found.
    pub frame_rows: Option<(usize, usize)>,
    /// The busy rule a row of the screen matched, if any: a turn runs, whatever the composer.
    pub busy: Option<String>,
}

impl Verdict {
    fn unknown(reason: UnknownReason) -> Verdict {
        Verdict {
            composer: Composer::Unknown(reason),
            body: Vec::new(),
            frame_rows: None,
            busy: None,
        }
    }
}

/// Judges the lowest live composer on `screen` by `grammar`.
pub fn classify(grammar: &Grammar, screen: &Screen) -> Verdict {
    let mut verdict = classify_composer(grammar, screen);
    // spec §7.4: the screen may veto an idle, never grant one. Looked for on every screen,
    // the composer's verdict whatever it is.
    verdict.busy = grammar.busy_line(&screen.lines).map(str::to_owned);
    verdict
}

/// The composer's verdict alone.
fn classify_composer(grammar: &Grammar, screen: &Screen) -> Verdict {
    // spec §7.4: a dialog is never a composer, whatever else the screen shows, so its
    // signatures are looked for first and anywhere.
    for (row, line) in screen.lines.iter().enumerate() {
        if let Some(modal) = grammar.modals.iter().find(|m| m.regex.is_match(line)) {
            return Verdict::unknown(UnknownReason::Modal {
                name: modal.name.clone(),
                row,
            });
        }
    }
    let (rows, frame_rows) = match find_rows(grammar, screen) {
        Ok(found) => found,
        Err(reason) => return Verdict::unknown(reason),
    };
    let rules = &grammar.composer;
    if rules.cursor_row_in_body && !rows.contains(&screen.cursor.row) {
        return Verdict::unknown(UnknownReason::CursorOutside {
            row: screen.cursor.row,
        });
    }
    if let Some(visible) = rules.cursor_visible {
        if screen.cursor.visible != visible {
            return Verdict::unknown(UnknownReason::CursorVisibility {
                visible: screen.cursor.visible,
            });
        }
    }
    let (body, chars) = match body_chars(grammar, screen, &rows) {
        Ok(found) => found,
        Err(reason) => return Verdict::unknown(reason),
    };
    Verdict {
        composer: judge_body(grammar, screen, &chars),
        body,
        frame_rows: Some(frame_rows),
        busy: None,
    }
}

/// The composer's body rows (top to bottom) and the rows its frame spans.
fn find_rows(
    grammar: &Grammar,
    screen: &Screen,
) -> Result<(Vec<usize>, (usize, usize)), UnknownReason> {
    let lines = &screen.lines;
    let max = grammar.composer.max_body_rows;
    match &grammar.composer.frame {
        Frame::Box {
            bottom,
            top,
            row,
            trailer_rows,
            ..
        } => {
            let bottom_row = lines
                .iter()
                .rposition(|line| bottom.is_match(line))
                .ok_or(UnknownReason::NoComposer)?;
            let mut body = Vec::new();
            let mut first = bottom_row;
            let mut closed = false;
            for r in (0..bottom_row).rev() {
                let line = &lines[r];
                if let Some(top) = top {
                    if top.is_match(line) {
                        first = r;
                        closed = true;
                        break;
                    }
                } else if !row.as_ref().is_some_and(|row| row.is_match(line)) {
                    closed = true;
                    break;
                }
                body.push(r);
                first = r;
                if body.len() > max + trailer_rows {
                    return Err(UnknownReason::TooTall { rows: max });
                }
            }
            // A box whose opening row never came is not a box (the top of the screen cut it,
            // or this is not the composer).
            if top.is_some() && !closed {
                return Err(UnknownReason::NoComposer);
            }
            body.reverse();
            body.truncate(body.len().saturating_sub(*trailer_rows));
            if body.is_empty() {
                return Err(UnknownReason::NoComposer);
            }
            Ok((body, (first, bottom_row)))
        }
        Frame::PromptLine { continuation } => {
            let Some(prompt) = &grammar.composer.prompt else {
                return Err(UnknownReason::NoComposer);
            };
            let anchor = lines
                .iter()
                .rposition(|line| prompt.is_match(line))
                .ok_or(UnknownReason::NoComposer)?;
            let mut body = vec![anchor];
            for (r, line) in lines.iter().enumerate().skip(anchor + 1) {
                if !continuation.is_match(line) {
                    break;
                }
                body.push(r);
                if body.len() > max {
                    return Err(UnknownReason::TooTall { rows: max });
                }
            }
            let last = body[body.len() - 1];
            Ok((body, (anchor, last)))
        }
    }
}

/// The input characters of each body row, after margin and prompt.
fn body_chars(
    grammar: &Grammar,
    screen: &Screen,
    rows: &[usize],
) -> Result<(Vec<BodyRow>, Vec<Vec<StyledChar>>), UnknownReason> {
    let margin = match &grammar.composer.frame {
        Frame::Box { margin, .. } => margin.as_ref(),
        Frame::PromptLine { .. } => None,
    };
    let mut body = Vec::new();
    let mut chars = Vec::new();
    for (index, &row) in rows.iter().enumerate() {
        let styled = screen
            .styled_row(row)
            .map_err(|err| UnknownReason::BadScreen(err.to_string()))?;
        let text: String = styled.iter().map(|c| c.ch).collect();
        let mut start = margin
            .and_then(|m| m.find(&text))
            .filter(|m| m.start() == 0)
            .map_or(0, |m| text[..m.end()].chars().count());
        if index == 0 {
            if let Some(prompt) = &grammar.composer.prompt {
                let rest: String = text.chars().skip(start).collect();
                match prompt.find(&rest).filter(|m| m.start() == 0) {
                    Some(m) => start += rest[..m.end()].chars().count(),
                    None => return Err(UnknownReason::PromptMissing { row }),
                }
            }
        }
        body.push(BodyRow { row, start });
        chars.push(styled.into_iter().skip(start).collect());
    }
    Ok((body, chars))
}

/// Empty, nonempty or unknown, from the body's characters.
fn judge_body(grammar: &Grammar, screen: &Screen, rows: &[Vec<StyledChar>]) -> Composer {
    let rules = &grammar.composer;
    let text = rows
        .iter()
        .map(|row| row.iter().map(|c| c.ch).collect::<String>())
        .map(|row| row.trim().to_string())
        .filter(|row| !row.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() {
        return if rules.blank_is_empty {
            Composer::Empty(EmptyBy::Blank)
        } else {
            Composer::Unknown(UnknownReason::BlankNotUnderstood)
        };
    }
    for (index, placeholder) in rules.placeholders.iter().enumerate() {
        let whole = placeholder
            .regex
            .find(&text)
            .is_some_and(|m| m.start() == 0 && m.end() == text.len());
        if !whole {
            continue;
        }
        if !screen.has_cells() {
            return Composer::Unknown(UnknownReason::NoCells);
        }
        // Text a human typed can spell the placeholder; only its style tells them apart.
        // The harness's own cursor cell may cover a letter of it, but at least one letter
        // must show the placeholder's style itself.
        let visible = || rows.iter().flatten().filter(|c| !c.ch.is_whitespace());
        let in_style = |c: &StyledChar| style_matches(&c.style, &placeholder.style);
        let is_cursor = |c: &StyledChar| {
            rules
                .fake_cursor
                .as_ref()
                .is_some_and(|cursor| style_matches(&c.style, cursor))
        };
        if visible().all(|c| in_style(c) || is_cursor(c)) && visible().any(in_style) {
            return Composer::Empty(EmptyBy::Placeholder(index));
        }
    }
    Composer::Nonempty
}
