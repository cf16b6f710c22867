//! The operator question a screen shows (spec §14, the operator-question channel): a dialog
//! the harness stopped on to ask a person something — a permission, a choice, a question, a
//! sign-in — read into its kind, its title and text, and its options, each with the keys that
//! choose it.
//!
//! Everything about a harness's dialogs is data: the grammar's `questions` rules say where a
//! dialog starts, what an option row looks like, which option is selected, and how an option
//! is chosen (its number typed, its shortcut typed, or the arrows moved from the selection and
//! confirmed). This module names no harness. A screen that matches no rule has no question;
//! a rule whose options cannot all be given keys (no selection shown where the arrows need
//! one) still yields the question, with those options unanswerable, so a person is told it
//! exists and answers it by hand.
//!
//! Reading a question never proves the harness is blocked: that is the program status's or a
//! hook's word. The screen gives only what the dialog says and how to answer it; the answer
//! itself is a compare-and-send at the revision the question was read from (spec §3).

use belfry_proto::request::InputStep;
use regex::Regex;
use serde::Serialize;

use crate::screen::Screen;

/// What a dialog asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Leave to run a tool, edit a file, reach a host.
    Permission,
    /// A pick among options that grant nothing.
    Choice,
    /// A question the model asked, answered in words or by an option.
    Question,
    /// A sign-in or a key to enter.
    Auth,
}

impl Kind {
    /// The kind named `name` in a grammar file.
    pub fn parse(name: &str) -> Option<Kind> {
        match name {
            "permission" => Some(Kind::Permission),
            "choice" => Some(Kind::Choice),
            "question" => Some(Kind::Question),
            "auth" => Some(Kind::Auth),
            _ => None,
        }
    }
}

/// How an option is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choose {
    /// Its number, typed: the dialog picks and confirms it at once.
    Number,
    /// The shortcut its row shows (the option regex's `key` group), typed; shortcuts named in
    /// `names` are sent as that named key (`esc` → `Escape`).
    Shortcut {
        /// A shortcut as shown → the named key sent for it.
        names: Vec<(String, String)>,
    },
    /// The arrows moved from the selected option to it, then the confirm key.
    Arrows {
        /// The key that moves the selection up (`Up`, or `Left` for a row of options).
        up: String,
        /// The key that moves it down.
        down: String,
        /// The key that confirms the selection.
        confirm: String,
    },
}

/// One grammar rule for a dialog.
#[derive(Debug, Clone)]
pub struct QuestionRule {
    /// The rule's name, given with the question.
    pub name: String,
    /// What the dialog asks for.
    pub kind: Kind,
    /// The dialog's first row: the nearest row at or above the first option that matches.
    pub start: Regex,
    /// Rows inside the dialog that carry no text of its own (rules, frames): left out.
    pub skip: Option<Regex>,
    /// Stripped from the start of every dialog row (a frame's left side).
    pub margin: Option<Regex>,
    /// The row whose text (its first group, or the whole row) is the title; without it, the
    /// last text row above the options is.
    pub title: Option<Regex>,
    /// An option row: its `label` group is the option's label; an optional `number` group its
    /// number as shown, an optional `key` group its shortcut.
    pub option: Regex,
    /// An option row that is the selected one.
    pub selected: Option<Regex>,
    /// How an option is chosen.
    pub choose: Choose,
    /// Canonical answers (`allow`, `deny`, …) → the labels they mean.
    pub answers: Vec<(String, Regex)>,
    /// Whether the dialog takes words as well as options.
    pub free_text: bool,
    /// The fixtures that proved it.
    pub proved_by: Vec<String>,
}

/// One option of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    /// 1 for the first option shown.
    pub number: usize,
    /// Its label as shown.
    pub label: String,
    /// The canonical answers it stands for (`allow`, `deny`, …), from the grammar.
    pub answers: Vec<String>,
    /// The keys that choose it from the screen the question was read from; `None` where the
    /// screen does not show enough to know them (the arrows need a selection).
    pub keys: Option<Vec<InputStep>>,
    /// Whether it is the selected option.
    pub selected: bool,
}

/// A question read from a screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Question {
    /// The grammar rule that read it.
    pub rule: String,
    /// What it asks for.
    pub kind: Kind,
    /// Its title.
    pub title: String,
    /// Every text row of the dialog above its options, trimmed, in order.
    pub text: Vec<String>,
    /// Its options, in the order shown.
    pub options: Vec<Choice>,
    /// Whether it takes words as well as options.
    pub free_text: bool,
    /// The screen rows it spans (first, last).
    pub rows: (usize, usize),
}

impl Question {
    /// A stable fingerprint of what the question says (rule, title, text, labels), so a
    /// screen read later can be told to show the same question or another one.
    pub fn fingerprint(&self) -> String {
        // FNV-1a over the parts, each ended by a 0 byte so that moving text between parts
        // changes the fingerprint.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |part: &str| {
            for byte in part.bytes().chain(std::iter::once(0)) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        eat(&self.rule);
        eat(&self.title);
        for row in &self.text {
            eat(row);
        }
        for option in &self.options {
            eat(&option.label);
        }
        format!("{hash:016x}")
    }

    /// The option `answer` names: a canonical answer (`allow`), its number (`2`), or its
    /// label (case aside). `None` if none does, or if more than one option stands for it.
    pub fn option(&self, answer: &str) -> Option<&Choice> {
        if let Ok(number) = answer.parse::<usize>() {
            return self.options.iter().find(|o| o.number == number);
        }
        let by_answer: Vec<&Choice> = self
            .options
            .iter()
            .filter(|o| o.answers.iter().any(|a| a == answer))
            .collect();
        match by_answer.as_slice() {
            [one] => return Some(one),
            [] => {}
            _ => return None,
        }
        let wanted = answer.to_lowercase();
        self.options
            .iter()
            .find(|o| o.label.to_lowercase() == wanted)
    }
}

/// The question `screen` shows by the first of `rules` that reads one, if any.
pub fn read(rules: &[QuestionRule], screen: &Screen) -> Option<Question> {
    rules.iter().find_map(|rule| read_rule(rule, screen))
}

/// The question `rule` reads on `screen`: the lowest run of option rows, the dialog above it.
fn read_rule(rule: &QuestionRule, screen: &Screen) -> Option<Question> {
    let lines = &screen.lines;
    let strip = |line: &str| -> String {
        match &rule.margin {
            Some(margin) => margin.replace_all(line, "").into_owned(),
            None => line.to_string(),
        }
    };
    // The lowest option row, then the run of option rows it ends (blank rows between options
    // allowed, as some dialogs space them).
    let last = (0..lines.len())
        .rev()
        .find(|&row| rule.option.is_match(&strip(&lines[row])))?;
    let mut first = last;
    let mut row = last;
    while row > 0 {
        row -= 1;
        let text = strip(&lines[row]);
        if rule.option.is_match(&text) {
            first = row;
        } else if !text.trim().is_empty() {
            break;
        }
    }
    // The dialog's first row: the nearest `start` at or above the first option, at most a
    // screen's worth up (a dialog taller than the screen is not understood).
    let start = (0..=first)
        .rev()
        .find(|&row| rule.start.is_match(&strip(&lines[row])))?;
    let text: Vec<String> = (start..first)
        .map(|row| strip(&lines[row]))
        .filter(|line| !rule.skip.as_ref().is_some_and(|skip| skip.is_match(line)))
        .map(|line| line.trim().to_string())
        .filter(|line| !line.is_empty())
        .collect();
    let title = match &rule.title {
        Some(title) => text.iter().find_map(|line| {
            title.captures(line).map(|caps| {
                caps.get(1)
                    .or_else(|| caps.get(0))
                    .map_or(String::new(), |m| m.as_str().trim().to_string())
            })
        })?,
        None => text.last().cloned().unwrap_or_default(),
    };
    let mut options = Vec::new();
    let mut shortcuts = Vec::new();
    for line in lines.iter().take(last + 1).skip(first) {
        let line = strip(line);
        let Some(caps) = rule.option.captures(&line) else {
            continue;
        };
        let label = caps.name("label")?.as_str().trim().to_string();
        let number = match caps.name("number") {
            Some(shown) => shown.as_str().parse().ok()?,
            None => options.len() + 1,
        };
        shortcuts.push(caps.name("key").map(|key| key.as_str().to_string()));
        let answers = rule
            .answers
            .iter()
            .filter(|(_, pattern)| pattern.is_match(&label))
            .map(|(answer, _)| answer.clone())
            .collect();
        let selected = rule
            .selected
            .as_ref()
            .is_some_and(|selected| selected.is_match(&line));
        options.push(Choice {
            number,
            label,
            answers,
            keys: None,
            selected,
        });
    }
    let selection = options.iter().position(|o| o.selected);
    for (index, option) in options.iter_mut().enumerate() {
        option.keys = keys(
            &rule.choose,
            option.number,
            shortcuts[index].as_deref(),
            index,
            selection,
        );
    }
    Some(Question {
        rule: rule.name.clone(),
        kind: rule.kind,
        title,
        text,
        options,
        free_text: rule.free_text,
        rows: (start, last),
    })
}

/// The keys that choose the option at `index` (shown as `number`, with `shortcut`), the
/// selection being at `selection`.
fn keys(
    choose: &Choose,
    number: usize,
    shortcut: Option<&str>,
    index: usize,
    selection: Option<usize>,
) -> Option<Vec<InputStep>> {
    match choose {
        Choose::Number => Some(vec![InputStep::Text(number.to_string())]),
        Choose::Shortcut { names } => {
            let shortcut = shortcut?;
            Some(vec![
                match names.iter().find(|(shown, _)| shown == shortcut) {
                    Some((_, key)) => InputStep::Key(key.clone()),
                    None => InputStep::Text(shortcut.to_string()),
                },
            ])
        }
        Choose::Arrows { up, down, confirm } => {
            let from = selection?;
            let (key, moves) = if index >= from {
                (down, index - from)
            } else {
                (up, from - index)
            };
            let mut steps: Vec<InputStep> =
                std::iter::repeat_n(InputStep::Key(key.clone()), moves).collect();
            steps.push(InputStep::Key(confirm.clone()));
            Some(steps)
        }
    }
}
