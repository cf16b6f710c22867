//! The `spend` and `quota` sections of an adapter's declaration, parsed: which files, which
//! rows, which pointers (`docs/spend.md`, "The declaration").

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, Result};

/// One number's place in a row: a JSON pointer, or (for a fixed limit) a literal number.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Field {
    Pointer(String),
    Number(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Json,
    Jsonl,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Root {
    Home,
    Cwd,
    State,
}

/// The pointers of the token and cost numbers in one row.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Pointers {
    pub(super) input: Option<String>,
    pub(super) output: Option<String>,
    pub(super) cache_read: Option<String>,
    pub(super) cache_write: Option<String>,
    pub(super) cost_usd: Option<String>,
}

impl Pointers {
    pub(super) fn is_empty(&self) -> bool {
        self == &Pointers::default()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Window {
    pub(super) used: Field,
    pub(super) limit: Field,
    pub(super) unit: String,
    pub(super) resets_at: String,
}

/// One declared source: a file and how to read it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Source {
    pub(super) kind: Kind,
    pub(super) root: Root,
    pub(super) path: String,
    pub(super) first_row: Vec<(String, Value)>,
    pub(super) when: Vec<(String, Value)>,
    pub(super) unless: Vec<(String, Value)>,
    pub(super) present: Vec<String>,
    pub(super) dedupe: Option<String>,
    pub(super) per_turn: Pointers,
    pub(super) total: Pointers,
    pub(super) input_counts_cache: bool,
    pub(super) window: Option<Window>,
}

/// A parsed `spend` or `quota` section.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub(super) sources: Result<Vec<Source>, String>,
    pub(super) unsupported_fields: BTreeMap<String, String>,
}

impl Section {
    /// Parses the `spend` (`name = "spend"`) or `quota` section of an adapter's declaration.
    /// A declaration without the section reads as unsupported: the adapter has not said where
    /// the numbers are.
    pub fn from_declaration(
        adapter: &str,
        name: &'static str,
        declaration: &Value,
    ) -> Result<Section> {
        let bad = |problem: String| Error::MeterDeclaration {
            adapter: adapter.to_string(),
            section: name,
            problem,
        };
        let Some(section) = declaration.get(name) else {
            return Ok(Section {
                sources: Err(format!("adapter {adapter:?} declares no {name} section")),
                unsupported_fields: BTreeMap::new(),
            });
        };
        let unsupported_fields = match section.get("unsupported_fields") {
            None => BTreeMap::new(),
            Some(Value::Object(fields)) => fields
                .iter()
                .map(|(key, why)| match why.as_str() {
                    Some(why) => Ok((key.clone(), why.to_string())),
                    None => Err(bad(format!(
                        "unsupported_fields.{key} is not a reason text"
                    ))),
                })
                .collect::<Result<_>>()?,
            Some(other) => {
                return Err(bad(format!("unsupported_fields is not an object: {other}")))
            }
        };
        if let Some(reason) = section.get("unsupported") {
            let reason = reason
                .as_str()
                .ok_or_else(|| bad(format!("unsupported is not a reason text: {reason}")))?;
            return Ok(Section {
                sources: Err(reason.to_string()),
                unsupported_fields,
            });
        }
        let Some(Value::Array(items)) = section.get("sources") else {
            return Err(bad(
                "has neither `sources` (a list) nor `unsupported` (a reason)".into(),
            ));
        };
        let mut sources = Vec::new();
        let mut unreadable = None;
        for (index, item) in items.iter().enumerate() {
            match parse_source(item, name) {
                Ok(Some(source)) => sources.push(source),
                // A source of a kind this reader does not open (a database) is the reason the
                // section reads as unsupported when it is the only one.
                Ok(None) => {
                    unreadable = Some(
                        section
                            .get("unsupported_reason")
                            .and_then(Value::as_str)
                            .unwrap_or("its only source is of a kind the core reader does not open")
                            .to_string(),
                    )
                }
                Err(problem) => return Err(bad(format!("sources[{index}]: {problem}"))),
            }
        }
        let sources = match (sources.is_empty(), unreadable) {
            (true, Some(reason)) => Err(reason),
            (true, None) => return Err(bad("lists no source".into())),
            (false, _) => Ok(sources),
        };
        Ok(Section {
            sources,
            unsupported_fields,
        })
    }
}

pub(super) fn parse_source(item: &Value, section: &str) -> Result<Option<Source>, String> {
    let text = |key: &str| -> Result<Option<String>, String> {
        match item.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(format!("{key} is not a string: {other}")),
        }
    };
    let kind = match text("kind")?.as_deref() {
        Some("json") => Kind::Json,
        Some("jsonl") => Kind::Jsonl,
        Some("sqlite") => return Ok(None),
        Some(other) => return Err(format!("kind {other:?} is not json, jsonl or sqlite")),
        None => return Err("has no kind".into()),
    };
    let root = match text("root")?.as_deref() {
        Some("home") => Root::Home,
        Some("cwd") => Root::Cwd,
        Some("state") => Root::State,
        other => return Err(format!("root {other:?} is not home, cwd or state")),
    };
    let path = text("path")?.ok_or("has no path")?;
    if path.starts_with('/') || path.split('/').any(|part| part == "..") {
        return Err(format!(
            "path {path:?} must stay under its root (relative, no `..`)"
        ));
    }
    let rows = item.get("rows").cloned().unwrap_or(Value::Null);
    let pairs = |value: Option<&Value>, what: &str| -> Result<Vec<(String, Value)>, String> {
        match value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(map)) => {
                Ok(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
            Some(other) => Err(format!(
                "{what} is not an object of pointer: value: {other}"
            )),
        }
    };
    let present = match rows.get("present") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(String::from)
                    .ok_or(format!("rows.present has a non-pointer {item}"))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("rows.present is not a list: {other}")),
    };
    let dedupe = match rows.get("dedupe") {
        None | Some(Value::Null) => None,
        Some(Value::String(pointer)) => Some(pointer.clone()),
        Some(other) => return Err(format!("rows.dedupe is not a pointer: {other}")),
    };
    let source = Source {
        kind,
        root,
        path,
        first_row: pairs(item.get("first_row"), "first_row")?,
        when: pairs(rows.get("where"), "rows.where")?,
        unless: pairs(rows.get("unless"), "rows.unless")?,
        present,
        dedupe,
        per_turn: parse_pointers(item.get("per_turn"), "per_turn")?,
        total: parse_pointers(item.get("total"), "total")?,
        input_counts_cache: item
            .get("input_counts_cache")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        window: match item.get("window") {
            None | Some(Value::Null) => None,
            Some(window) => Some(parse_window(window)?),
        },
    };
    let wants = if section == "quota" {
        source.window.is_some()
    } else {
        !source.per_turn.is_empty() || !source.total.is_empty()
    };
    if !wants {
        return Err(format!(
            "names no number to read (a {section} source needs {})",
            if section == "quota" {
                "a window"
            } else {
                "per_turn or total pointers"
            }
        ));
    }
    Ok(Some(source))
}

pub(super) fn parse_pointers(value: Option<&Value>, what: &str) -> Result<Pointers, String> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(Pointers::default());
    };
    let Value::Object(map) = value else {
        return Err(format!("{what} is not an object"));
    };
    let mut pointers = Pointers::default();
    for (key, pointer) in map {
        let pointer = pointer
            .as_str()
            .filter(|pointer| pointer.starts_with('/'))
            .ok_or(format!("{what}.{key} is not a JSON pointer: {pointer}"))?
            .to_string();
        let slot = match key.as_str() {
            "input" => &mut pointers.input,
            "output" => &mut pointers.output,
            "cache_read" => &mut pointers.cache_read,
            "cache_write" => &mut pointers.cache_write,
            "cost_usd" => &mut pointers.cost_usd,
            other => {
                return Err(format!(
                    "{what}.{other} is not a number this reader knows (input, output, cache_read, cache_write, cost_usd)"
                ))
            }
        };
        *slot = Some(pointer);
    }
    Ok(pointers)
}

pub(super) fn parse_window(value: &Value) -> Result<Window, String> {
    let field = |key: &str| -> Result<Field, String> {
        match value.get(key) {
            Some(Value::String(pointer)) if pointer.starts_with('/') => {
                Ok(Field::Pointer(pointer.clone()))
            }
            Some(Value::Number(number)) => number
                .as_f64()
                .map(Field::Number)
                .ok_or(format!("window.{key} is not a number")),
            other => Err(format!(
                "window.{key} is neither a JSON pointer nor a number: {other:?}"
            )),
        }
    };
    let resets_at = match field("resets_at")? {
        Field::Pointer(pointer) => pointer,
        Field::Number(_) => {
            return Err("window.resets_at must be a pointer (a fixed time resets once)".into())
        }
    };
    Ok(Window {
        used: field("used")?,
        limit: field("limit")?,
        unit: value
            .get("unit")
            .and_then(Value::as_str)
            .ok_or("window.unit is not a text")?
            .to_string(),
        resets_at,
    })
}
