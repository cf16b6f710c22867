//! The screen grammar: one harness's composer and dialogs described as data
//! (`adapters/<name>/screen.json`), parsed and compiled here. Nothing in this module knows any
//! harness; every fact comes from the file, each rule naming the fixtures that proved it.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::question::{Choose, Kind, QuestionRule};

/// The grammar file format this build reads.
pub const SCHEMA: u64 = 1;

/// A compiled screen grammar.
#[derive(Debug, Clone)]
pub struct Grammar {
    /// Where the grammar came from (a path or `built-in NAME`), named in errors.
    pub origin: String,
    /// The harness it describes, as its authors name it.
    pub harness: String,
    /// The harness versions it was derived from.
    pub harness_versions: VersionRange,
    /// How the lowest live composer is found and judged.
    pub composer: ComposerRules,
    /// Screens that are a dialog, whatever else they show.
    pub modals: Vec<Modal>,
    /// Rows that mean a turn is running, whatever a hook or a program status said last: the
    /// screen may veto an idle, never grant one.
    pub busy: Vec<Modal>,
    /// How the dialogs read as operator questions: their title, options and the keys that
    /// choose each.
    pub questions: Vec<QuestionRule>,
}

/// The harness versions a grammar was derived from (inclusive).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionRange {
    /// The oldest version the fixtures came from.
    pub min: String,
    /// The newest version the fixtures came from.
    pub max: String,
}

/// How the composer's rows are found.
#[derive(Debug, Clone)]
pub enum Frame {
    /// A box: the lowest row matching `bottom` closes it; its body is the rows above, up to the
    /// nearest row matching `top`, or the run of rows matching `row` when there is no top.
    Box {
        /// The closing row.
        bottom: Regex,
        /// The opening row, if the box has one.
        top: Option<Regex>,
        /// What every body row matches, for a box without an opening row.
        row: Option<Regex>,
        /// Stripped from the start of every body row (a left bar).
        margin: Option<Regex>,
        /// Body rows at the bottom that show status, not input.
        trailer_rows: usize,
    },
    /// A line: the lowest row starting with the prompt, continued by rows matching
    /// `continuation` until one does not.
    PromptLine {
        /// A row that continues the input (a soft-wrapped or further line).
        continuation: Regex,
    },
}

/// Everything about the composer.
#[derive(Debug, Clone)]
pub struct ComposerRules {
    /// Where its rows are.
    pub frame: Frame,
    /// The most body rows a composer may have; a taller one is not understood.
    pub max_body_rows: usize,
    /// What the first body row starts with (stripped), if anything.
    pub prompt: Option<Regex>,
    /// The terminal cursor must be on a body row.
    pub cursor_row_in_body: bool,
    /// The terminal cursor must be shown (`Some(true)`), hidden (`Some(false)`), or either.
    pub cursor_visible: Option<bool>,
    /// The style of the cell the harness draws as its own cursor: such a cell matches any
    /// placeholder style (it may cover the placeholder's first letter).
    pub fake_cursor: Option<Map<String, Value>>,
    /// A body with nothing but white space is empty.
    pub blank_is_empty: bool,
    /// Text that, drawn in its style, means the composer is empty.
    pub placeholders: Vec<Placeholder>,
}

/// Placeholder text of an empty composer.
#[derive(Debug, Clone)]
pub struct Placeholder {
    /// Matches the whole body text (rows joined by one space, ends trimmed).
    pub regex: Regex,
    /// Every visible character of the body has these cell attributes.
    pub style: Map<String, Value>,
    /// The fixtures that proved it.
    pub proved_by: Vec<String>,
}

/// A dialog signature: any screen row matching it makes the composer unknown.
#[derive(Debug, Clone)]
pub struct Modal {
    /// A short name, given as the reason.
    pub name: String,
    /// Matches one row.
    pub regex: Regex,
    /// The fixtures that proved it.
    pub proved_by: Vec<String>,
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrammarFile {
    schema: u64,
    harness: String,
    harness_versions: VersionRange,
    #[allow(dead_code)]
    derived_from: String,
    composer: ComposerFile,
    modals: Vec<ModalFile>,
    #[serde(default)]
    busy: Vec<ModalFile>,
    #[serde(default)]
    questions: Vec<QuestionFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuestionFile {
    name: String,
    kind: String,
    start: String,
    skip: Option<String>,
    margin: Option<String>,
    title: Option<String>,
    option: String,
    selected: Option<String>,
    choose: ChooseFile,
    #[serde(default)]
    answers: BTreeMap<String, String>,
    #[serde(default)]
    free_text: bool,
    #[allow(dead_code)]
    why: String,
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChooseFile {
    by: String,
    #[serde(default)]
    names: BTreeMap<String, String>,
    up: Option<String>,
    down: Option<String>,
    confirm: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ComposerFile {
    frame: FrameFile,
    prompt: Option<RegexRule>,
    cursor: CursorRule,
    fake_cursor: Option<StyleRule>,
    blank_is_empty: BoolRule,
    placeholders: Vec<PlaceholderFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameFile {
    kind: String,
    bottom: Option<String>,
    top: Option<String>,
    row: Option<String>,
    margin: Option<String>,
    continuation: Option<String>,
    #[serde(default)]
    trailer_rows: usize,
    max_body_rows: usize,
    #[allow(dead_code)]
    why: String,
    #[allow(dead_code)]
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegexRule {
    regex: String,
    #[allow(dead_code)]
    why: String,
    #[allow(dead_code)]
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CursorRule {
    row_in_body: bool,
    visible: Option<bool>,
    #[allow(dead_code)]
    why: String,
    #[allow(dead_code)]
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleRule {
    style: Map<String, Value>,
    #[allow(dead_code)]
    why: String,
    #[allow(dead_code)]
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoolRule {
    value: bool,
    #[allow(dead_code)]
    why: String,
    #[allow(dead_code)]
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaceholderFile {
    regex: String,
    style: Map<String, Value>,
    #[allow(dead_code)]
    why: String,
    proved_by: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModalFile {
    name: String,
    regex: String,
    #[allow(dead_code)]
    why: String,
    proved_by: Vec<String>,
}

impl Grammar {
    /// Parses and compiles a grammar; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Grammar> {
        let file: GrammarFile = serde_json::from_str(text).map_err(|err| Error::Grammar {
            origin: format!("{origin}:{}:{}", err.line(), err.column()),
            reason: err.to_string(),
        })?;
        let bad = |reason: String| Error::Grammar {
            origin: origin.to_string(),
            reason,
        };
        if file.schema != SCHEMA {
            return Err(bad(format!(
                "schema {} is not the one this build reads ({SCHEMA})",
                file.schema
            )));
        }
        let regex = |field: &str, pattern: &str| {
            Regex::new(pattern).map_err(|err| bad(format!("{field} {pattern:?}: {err}")))
        };
        let optional = |field: &str, pattern: &Option<String>| {
            pattern.as_deref().map(|p| regex(field, p)).transpose()
        };
        let composer = &file.composer;
        let frame = &composer.frame;
        let frame_rules = match frame.kind.as_str() {
            "box" => {
                let Some(bottom) = &frame.bottom else {
                    return Err(bad("a box frame needs `bottom`".to_string()));
                };
                if frame.top.is_none() == frame.row.is_none() {
                    return Err(bad(
                        "a box frame needs exactly one of `top` and `row`".to_string()
                    ));
                }
                Frame::Box {
                    bottom: regex("composer.frame.bottom", bottom)?,
                    top: optional("composer.frame.top", &frame.top)?,
                    row: optional("composer.frame.row", &frame.row)?,
                    margin: optional("composer.frame.margin", &frame.margin)?,
                    trailer_rows: frame.trailer_rows,
                }
            }
            "prompt-line" => {
                let Some(continuation) = &frame.continuation else {
                    return Err(bad("a prompt-line frame needs `continuation`".to_string()));
                };
                if composer.prompt.is_none() {
                    return Err(bad(
                        "a prompt-line frame needs `composer.prompt`, its anchor".to_string(),
                    ));
                }
                Frame::PromptLine {
                    continuation: regex("composer.frame.continuation", continuation)?,
                }
            }
            other => {
                return Err(bad(format!(
                    "composer.frame.kind {other:?} is neither \"box\" nor \"prompt-line\""
                )))
            }
        };
        if frame.max_body_rows == 0 {
            return Err(bad("composer.frame.max_body_rows is 0".to_string()));
        }
        let placeholders = composer
            .placeholders
            .iter()
            .map(|p| {
                Ok(Placeholder {
                    regex: regex("composer.placeholders[].regex", &p.regex)?,
                    style: p.style.clone(),
                    proved_by: p.proved_by.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let signatures = |list: &[ModalFile], field: &str| {
            list.iter()
                .map(|m| {
                    Ok(Modal {
                        name: m.name.clone(),
                        regex: regex(field, &m.regex)?,
                        proved_by: m.proved_by.clone(),
                    })
                })
                .collect::<Result<Vec<_>>>()
        };
        let modals = signatures(&file.modals, "modals[].regex")?;
        let busy = signatures(&file.busy, "busy[].regex")?;
        let questions = file
            .questions
            .iter()
            .map(|q| question_rule(q, &regex, &bad))
            .collect::<Result<Vec<_>>>()?;
        Ok(Grammar {
            origin: origin.to_string(),
            harness: file.harness,
            harness_versions: file.harness_versions,
            composer: ComposerRules {
                frame: frame_rules,
                max_body_rows: frame.max_body_rows,
                prompt: composer
                    .prompt
                    .as_ref()
                    .map(|p| regex("composer.prompt.regex", &p.regex))
                    .transpose()?,
                cursor_row_in_body: composer.cursor.row_in_body,
                cursor_visible: composer.cursor.visible,
                fake_cursor: composer.fake_cursor.as_ref().map(|f| f.style.clone()),
                blank_is_empty: composer.blank_is_empty.value,
                placeholders,
            },
            modals,
            busy,
            questions,
        })
    }

    /// The operator question `screen` shows, if a dialog signature of this grammar is on it and
    /// a question rule reads it. The signature first: an option-shaped row in the transcript
    /// (a numbered list the model wrote) is never a question while no dialog shows.
    pub fn question(&self, screen: &crate::screen::Screen) -> Option<crate::question::Question> {
        let dialog = screen
            .lines
            .iter()
            .any(|line| self.modals.iter().any(|m| m.regex.is_match(line)));
        if !dialog {
            return None;
        }
        crate::question::read(&self.questions, screen)
    }

    /// The name of the first busy rule a row of `lines` matches: the screen shows a running
    /// turn. One regex per row per rule, so it costs about what the dialog search does.
    pub fn busy_line(&self, lines: &[String]) -> Option<&str> {
        lines.iter().find_map(|line| {
            self.busy
                .iter()
                .find(|rule| rule.regex.is_match(line))
                .map(|rule| rule.name.as_str())
        })
    }
}

/// Compiles one `questions[]` entry; `regex` compiles a field, `bad` names the grammar.
fn question_rule(
    file: &QuestionFile,
    regex: &dyn Fn(&str, &str) -> Result<Regex>,
    bad: &dyn Fn(String) -> Error,
) -> Result<QuestionRule> {
    let field = |name: &str| format!("questions[{}].{name}", file.name);
    let optional = |name: &str, pattern: &Option<String>| {
        pattern
            .as_deref()
            .map(|p| regex(&field(name), p))
            .transpose()
    };
    let Some(kind) = Kind::parse(&file.kind) else {
        return Err(bad(format!(
            "{} {:?} is none of permission, choice, question, auth",
            field("kind"),
            file.kind
        )));
    };
    let option = regex(&field("option"), &file.option)?;
    if !option.capture_names().any(|name| name == Some("label")) {
        return Err(bad(format!(
            "{} has no (?P<label>…) group: an option needs its label",
            field("option")
        )));
    }
    let choose = &file.choose;
    let choose = match choose.by.as_str() {
        "number" => Choose::Number,
        "shortcut" => {
            if !option.capture_names().any(|name| name == Some("key")) {
                return Err(bad(format!(
                    "{} chooses by shortcut but has no (?P<key>…) group",
                    field("option")
                )));
            }
            Choose::Shortcut {
                names: choose.names.clone().into_iter().collect(),
            }
        }
        "arrows" => match (&choose.up, &choose.down, &choose.confirm) {
            (Some(up), Some(down), Some(confirm)) => Choose::Arrows {
                up: up.clone(),
                down: down.clone(),
                confirm: confirm.clone(),
            },
            _ => {
                return Err(bad(format!(
                    "{} by arrows needs up, down and confirm",
                    field("choose")
                )))
            }
        },
        other => {
            return Err(bad(format!(
                "{} {other:?} is none of number, shortcut, arrows",
                field("choose.by")
            )))
        }
    };
    let answers = file
        .answers
        .iter()
        .map(|(answer, pattern)| Ok((answer.clone(), regex(&field("answers"), pattern)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(QuestionRule {
        name: file.name.clone(),
        kind,
        start: regex(&field("start"), &file.start)?,
        skip: optional("skip", &file.skip)?,
        margin: optional("margin", &file.margin)?,
        title: optional("title", &file.title)?,
        option,
        selected: optional("selected", &file.selected)?,
        choose,
        answers,
        free_text: file.free_text,
        proved_by: file.proved_by.clone(),
    })
}
