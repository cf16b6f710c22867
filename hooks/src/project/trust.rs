//! Hook trust kept by a harness in a TOML file (spec §9: a hook the harness will skip is
//! inert, never reported active). The rule is data ([`TrustRule`]): one table per entry key
//! `"<settings path>:<event label>:<group index>:<handler index>"` holding the entry's hash,
//! `sha256:` of the canonical JSON (keys sorted, compact) of `{event_name, matcher?,
//! hooks: [the handler, with the rule's omitted fields left out]}`.
//!
//! The file is edited as text: an entry apply writes is appended as its own table, and
//! uninstall removes exactly that text, so everything else in the file stays as it was.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::adapters::TrustRule;
use super::canonical_digest;

/// One trust entry for one managed handler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustEntry {
    pub key: String,
    pub hash: String,
}

/// The entry of handler 0 of the group at `index` of `native_event` in `settings_path`.
pub fn entry(
    rule: &TrustRule,
    settings_path: &str,
    native_event: &str,
    index: usize,
    group: &Value,
) -> Option<TrustEntry> {
    let label = rule.event_labels.get(native_event)?;
    let mut handler = group.pointer("/hooks/0")?.clone();
    if let Value::Object(map) = &mut handler {
        for field in &rule.hash_omit {
            map.remove(field);
        }
    }
    let mut identity = json!({ "event_name": label, "hooks": [handler] });
    if let (Some(matcher), Value::Object(map)) = (group.get("matcher"), &mut identity) {
        if !matcher.is_null() {
            map.insert("matcher".to_string(), matcher.clone());
        }
    }
    Some(TrustEntry {
        key: format!("{settings_path}:{label}:{index}:0"),
        hash: canonical_digest(&identity),
    })
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The table header of an entry.
fn header(rule: &TrustRule, key: &str) -> String {
    format!("[{}.{}]", rule.table, toml_string(key))
}

/// The text apply appends for an entry.
pub fn entry_text(rule: &TrustRule, entry: &TrustEntry) -> String {
    format!(
        "\n{}\n{} = {}\n",
        header(rule, &entry.key),
        rule.field,
        toml_string(&entry.hash)
    )
}

/// The hash the file holds for `key`, if any: the `field = "…"` line of the key's table.
pub fn recorded_hash(rule: &TrustRule, text: &str, key: &str) -> Option<String> {
    let wanted_basic = header(rule, key);
    let wanted_literal = format!("[{}.'{key}']", rule.table);
    let mut in_table = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_table = line == wanted_basic || line == wanted_literal;
            continue;
        }
        if in_table {
            if let Some((name, value)) = line.split_once('=') {
                if name.trim() == rule.field {
                    let value = value.trim();
                    return serde_json::from_str::<String>(value)
                        .ok()
                        .or_else(|| Some(value.trim_matches('\'').to_string()));
                }
            }
        }
    }
    None
}

/// Whether a `[table."<key>"]` with `field = "<value>"` exists (the project-trust check).
pub fn table_field_equals(text: &str, table: &str, key: &str, field: &str, value: &str) -> bool {
    let basic = format!("[{table}.{}]", toml_string(key));
    let literal = format!("[{table}.'{key}']");
    let mut in_table = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_table = line == basic || line == literal;
            continue;
        }
        if in_table {
            if let Some((name, found)) = line.split_once('=') {
                if name.trim() == field {
                    let found = found.trim().trim_matches(['"', '\'']);
                    return found == value;
                }
            }
        }
    }
    false
}

/// Appends `entries` to the file text, replacing the hash of an entry whose table is there.
/// Returns the new text and the texts appended (recorded for uninstall).
pub fn write_entries(
    rule: &TrustRule,
    text: &str,
    entries: &[TrustEntry],
) -> (String, Vec<String>) {
    let mut out = text.to_string();
    let mut appended = Vec::new();
    for entry in entries {
        if recorded_hash(rule, &out, &entry.key).is_some() {
            out = replace_hash(rule, &out, entry);
            continue;
        }
        let addition = entry_text(rule, entry);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&addition);
        appended.push(addition);
    }
    (out, appended)
}

fn replace_hash(rule: &TrustRule, text: &str, entry: &TrustEntry) -> String {
    let wanted = header(rule, &entry.key);
    let mut in_table = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_table = trimmed == wanted;
        } else if in_table
            && trimmed
                .split_once('=')
                .is_some_and(|(name, _)| name.trim() == rule.field)
        {
            let newline = if line.ends_with('\n') { "\n" } else { "" };
            out.push_str(&format!(
                "{} = {}{newline}",
                rule.field,
                toml_string(&entry.hash)
            ));
            continue;
        }
        out.push_str(line);
    }
    out
}

/// Removes texts apply appended, where they are still found verbatim.
pub fn remove_appended(text: &str, appended: &[String]) -> String {
    let mut out = text.to_string();
    for addition in appended {
        if let Some(at) = out.rfind(addition.as_str()) {
            out.replace_range(at..at + addition.len(), "");
        }
    }
    out
}
