//! Hook trust kept by a harness in a TOML file (spec §9: a hook the harness will skip is
//! inert, never reported active). The rule is data ([`TrustRule`]): one table per entry key
//! `"<settings path>:<event label>:<group index>:<handler index>"` holding the entry's hash,
//! `sha256:` of the canonical JSON (keys sorted, compact) of `{event_name, matcher?,
//! hooks: [the handler, with the rule's omitted fields left out]}`.
//!
//! The file is read and edited with `toml_edit`, which keeps every byte it is not asked to
//! change: comments, spacing, key order, quoting. An entry is found however the user wrote
//! its tables (`[a.b."k"]`, `[a.b]` with `"k" = { … }`, `a = { b = { … } }`), a new one goes
//! into the tables already there (inline where they are inline), and uninstall takes out
//! exactly the entries apply wrote, by key and hash. A file whose lines end in CRLF keeps
//! CRLF on the lines belfry adds.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toml_edit::{DocumentMut, InlineTable, Item, Table, TableLike};

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

/// The file's text as a TOML document, or why it is not one.
pub fn parse(text: &str) -> Result<DocumentMut, String> {
    text.parse::<DocumentMut>()
        .map_err(|err| format!("not valid TOML: {}", err.to_string().trim_end()))
}

/// The segments of a rule's dotted table name (`hooks.state`).
fn segments(table: &str) -> Vec<&str> {
    table.split('.').filter(|part| !part.is_empty()).collect()
}

/// The table (header or inline) at `path` under `root`.
fn table_at<'a>(root: &'a dyn TableLike, path: &[&str]) -> Option<&'a dyn TableLike> {
    let mut table = root;
    for key in path {
        table = table.get(key)?.as_table_like()?;
    }
    Some(table)
}

fn table_at_mut<'a>(root: &'a mut dyn TableLike, path: &[&str]) -> Option<&'a mut dyn TableLike> {
    let mut table = root;
    for key in path {
        table = table.get_mut(key)?.as_table_like_mut()?;
    }
    Some(table)
}

/// The string `field` of the table `key` under the dotted `table`, if the document holds it.
fn field_of<'a>(doc: &'a DocumentMut, table: &str, key: &str, field: &str) -> Option<&'a str> {
    let mut path = segments(table);
    path.push(key);
    table_at(doc.as_table(), &path)?.get(field)?.as_str()
}

/// The hash the file holds for `key`, if any.
pub fn recorded_hash(rule: &TrustRule, text: &str, key: &str) -> Option<String> {
    let doc = parse(text).ok()?;
    field_of(&doc, &rule.table, key, &rule.field).map(str::to_string)
}

/// Whether a `[table."<key>"]` with `field = "<value>"` exists (the project-trust check).
pub fn table_field_equals(text: &str, table: &str, key: &str, field: &str, value: &str) -> bool {
    parse(text)
        .ok()
        .is_some_and(|doc| field_of(&doc, table, key, field) == Some(value))
}

/// The record of one entry apply wrote, kept in the install state: the entry as the TOML
/// text of its own table, from which uninstall reads back the key and the hash.
pub fn entry_text(rule: &TrustRule, entry: &TrustEntry) -> String {
    let mut path: Vec<String> = segments(&rule.table).into_iter().map(toml_key).collect();
    path.push(toml_key(&entry.key));
    format!(
        "\n[{}]\n{} = {}\n",
        path.join("."),
        toml_key(&rule.field),
        toml_edit::Value::from(entry.hash.as_str())
    )
}

/// A key as TOML writes it: bare where it can be, quoted otherwise.
fn toml_key(text: &str) -> String {
    toml_edit::Key::new(text).display_repr().into_owned()
}

/// Sets each entry's hash in the file text, creating what is missing: the tables on the way
/// (of the kind, header or inline, of the table that holds them) and the entry's table.
/// Returns the new text and, for each entry written, its record ([`entry_text`]). A text that
/// is not TOML is left as it is, with nothing written: `status` names the problem.
pub fn write_entries(
    rule: &TrustRule,
    text: &str,
    entries: &[TrustEntry],
) -> (String, Vec<String>) {
    let Ok(mut doc) = parse(text) else {
        return (text.to_string(), Vec::new());
    };
    let path = segments(&rule.table);
    let mut written = Vec::new();
    for entry in entries {
        if set_entry(doc.as_table_mut(), &path, &rule.field, entry) {
            written.push(entry_text(rule, entry));
        }
    }
    let edited = with_line_endings_of(text, &doc.to_string());
    // What is written must read back: an edit `toml_edit` could not place validly is not
    // written at all, and `status` keeps saying the entries are untrusted.
    if parse(&edited).is_err() {
        return (text.to_string(), Vec::new());
    }
    (edited, written)
}

/// Sets `field` of the entry's table under `path`, creating the tables missing. False when
/// something on the way is not a table (a user's `state = 1`), which is left alone.
fn set_entry(root: &mut Table, path: &[&str], field: &str, entry: &TrustEntry) -> bool {
    let mut table: &mut dyn TableLike = root;
    let mut inline = false;
    let keys = path
        .iter()
        .copied()
        .chain(std::iter::once(entry.key.as_str()));
    for key in keys {
        if table.get(key).is_none() {
            table.insert(key, empty_table(inline || table.is_dotted()));
        }
        let Some(item) = table.get_mut(key) else {
            return false;
        };
        inline = inline || matches!(item, Item::Value(toml_edit::Value::InlineTable(_)));
        match item.as_table_like_mut() {
            Some(child) => table = child,
            None => return false,
        }
    }
    match table.get_mut(field) {
        Some(Item::Value(value)) => {
            // The old value's spacing and comment stay; only the string changes.
            let decor = value.decor().clone();
            *value = toml_edit::Value::from(entry.hash.as_str());
            *value.decor_mut() = decor;
        }
        _ => {
            table.insert(field, toml_edit::value(entry.hash.as_str()));
        }
    }
    true
}

/// A new empty table: inline inside an inline or dotted table (a header table cannot live
/// in the one and would split the other), else a header table that prints no header of its
/// own until it holds a value.
fn empty_table(inline: bool) -> Item {
    if inline {
        Item::Value(toml_edit::Value::InlineTable(InlineTable::new()))
    } else {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    }
}

/// Removes the entries apply wrote (their records, [`entry_text`]) where the file still holds
/// them with the hash written; then the tables they were in, where those are left empty and
/// print no header (created with the entry, or as implicit as it). A text that is not TOML
/// loses only records still found in it verbatim.
pub fn remove_appended(text: &str, appended: &[String]) -> String {
    let Ok(mut doc) = parse(text) else {
        let mut out = text.to_string();
        for addition in appended {
            if let Some(at) = out.rfind(addition.as_str()) {
                out.replace_range(at..at + addition.len(), "");
            }
        }
        return out;
    };
    let mut changed = false;
    for record in appended {
        let Some((path, field, hash)) = record_entry(record) else {
            continue;
        };
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let Some((key, parents)) = refs.split_last() else {
            continue;
        };
        let Some(parent) = table_at_mut(doc.as_table_mut(), parents) else {
            continue;
        };
        let holds = parent
            .get(key)
            .and_then(Item::as_table_like)
            .and_then(|entry| entry.get(&field))
            .and_then(Item::as_str)
            == Some(hash.as_str());
        if !holds {
            continue;
        }
        if let Some(entry) = parent.get_mut(key).and_then(Item::as_table_like_mut) {
            entry.remove(&field);
        }
        changed = true;
        // The entry's table, named by belfry's own key, goes with its hash unless it holds
        // something else too; then the tables above it that it leaves empty and headerless.
        let entry_now_empty = parent
            .get(key)
            .and_then(Item::as_table_like)
            .is_some_and(|entry| entry.is_empty());
        if entry_now_empty {
            parent.remove(key);
            prune_empty(doc.as_table_mut(), parents);
        }
    }
    if !changed {
        return text.to_string();
    }
    with_line_endings_of(text, &doc.to_string())
}

/// The table path, field and hash of a record.
fn record_entry(record: &str) -> Option<(Vec<String>, String, String)> {
    let doc = record.parse::<DocumentMut>().ok()?;
    let mut path = Vec::new();
    let mut table: &dyn TableLike = doc.as_table();
    loop {
        let mut children = table.iter();
        let (key, item) = children.next()?;
        if children.next().is_some() {
            return None;
        }
        if let Some(hash) = item.as_str() {
            return Some((path, key.to_string(), hash.to_string()));
        }
        path.push(key.to_string());
        table = item.as_table_like()?;
    }
}

/// Removes, innermost first, the tables of `path` that hold nothing and show nothing: an
/// implicit header table, whose header is never printed. A table the user wrote, a header or
/// an inline `{}`, stays, empty or not.
fn prune_empty(root: &mut Table, path: &[&str]) {
    for depth in (1..=path.len()).rev() {
        let (parents, key) = (&path[..depth - 1], path[depth - 1]);
        let Some(parent) = table_at_mut(root, parents) else {
            return;
        };
        let removable = matches!(
            parent.get(key),
            Some(Item::Table(table)) if table.is_empty() && table.is_implicit()
        );
        if !removable {
            return;
        }
        parent.remove(key);
    }
}

/// `edited` with the line endings of `original`: when every line of the original ends in
/// CRLF, the lines an edit added (which `toml_edit` ends in LF) end in CRLF too.
fn with_line_endings_of(original: &str, edited: &str) -> String {
    let crlf = original.contains("\r\n")
        && original.matches('\n').count() == original.matches("\r\n").count();
    if !crlf {
        return edited.to_string();
    }
    let mut out = String::with_capacity(edited.len() + edited.len() / 32);
    let mut previous = '\0';
    for c in edited.chars() {
        if c == '\n' && previous != '\r' {
            out.push('\r');
        }
        out.push(c);
        previous = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> TrustRule {
        serde_json::from_value(json!({
            "file": "$X/config.toml",
            "table": "hooks.state",
            "field": "trusted_hash",
            "event_labels": {},
            "untrusted": "u",
            "modified": "m"
        }))
        .unwrap_or_else(|err| panic!("{err}"))
    }

    fn entry(key: &str, hash: &str) -> TrustEntry {
        TrustEntry {
            key: key.to_string(),
            hash: hash.to_string(),
        }
    }

    /// Writes one entry into `original`, checks the result reads and holds it, removes it
    /// again and returns (the text with the entry, the text after removal).
    fn round_trip(original: &str) -> (String, String) {
        let rule = rule();
        let wanted = entry("/p/.x/hooks.json:pre_tool_use:0:0", "sha256:new");
        let (written, records) = write_entries(&rule, original, std::slice::from_ref(&wanted));
        assert!(parse(&written).is_ok(), "invalid TOML written:\n{written}");
        assert_eq!(records.len(), 1, "{written}");
        assert_eq!(
            recorded_hash(&rule, &written, &wanted.key).as_deref(),
            Some("sha256:new"),
            "{written}"
        );
        let removed = remove_appended(&written, &records);
        assert!(parse(&removed).is_ok(), "invalid TOML left:\n{removed}");
        assert_eq!(recorded_hash(&rule, &removed, &wanted.key), None);
        (written, removed)
    }

    #[test]
    fn a_trust_entry_in_an_empty_or_unrelated_file_is_appended_and_taken_out_byte_for_byte() {
        for original in [
            "",
            "model = \"m\"\n",
            "# top\n[projects.\"/p\"]\ntrust_level = \"trusted\" # mine\n",
        ] {
            let (written, removed) = round_trip(original);
            assert!(written.starts_with(original), "{written:?}");
            assert_eq!(removed, original, "written:\n{written}");
        }
        // A last line without its newline gets one, as any TOML writer ends a line it
        // writes after it; the rest stays.
        let (_, removed) = round_trip("model = \"m\"");
        assert_eq!(removed, "model = \"m\"\n");
    }

    /// Issue 39: the line-based edit appended `[hooks.state."k"]` whatever the file held, and
    /// a table defined twice, or one under an inline table, is invalid TOML a harness refuses.
    #[test]
    fn a_trust_entry_goes_into_the_tables_already_there_and_the_toml_stays_valid() {
        let originals = [
            // The table exists, with a user's entry written inline in it.
            "[hooks.state]\n# mine\n\"/q:stop:0:0\" = { trusted_hash = \"sha256:q\" }\n\n[other]\na = 1\n",
            // The parent is inline.
            "hooks = { state = {} }\n",
            "hooks = { state = { \"/q:stop:0:0\" = { trusted_hash = \"sha256:q\" } } }\nz = 1\n",
            // Dotted keys define the tables.
            "hooks.state.\"/q:stop:0:0\".trusted_hash = \"sha256:q\"\n",
            "[hooks]\nstate.\"/q:stop:0:0\".trusted_hash = \"sha256:q\"\n",
            // The entry's table is there, without the field.
            "[hooks.state.\"/p/.x/hooks.json:pre_tool_use:0:0\"]\nnote = \"n\"\n",
        ];
        for original in originals {
            let (written, removed) = round_trip(original);
            // Every user's key is still there with its value.
            let before = parse(original)
                .map(|doc| doc.to_string())
                .unwrap_or_default();
            assert!(before == original, "toml_edit did not keep {original:?}");
            if original.contains("sha256:q") {
                assert_eq!(
                    recorded_hash(&rule(), &written, "/q:stop:0:0").as_deref(),
                    Some("sha256:q"),
                    "{written}"
                );
            }
            assert!(removed.contains("sha256:q") == original.contains("sha256:q"));
            // The user's own field and tables stay.
            assert!(!original.contains("note") || removed.contains("note = \"n\""));
            assert!(!original.contains("state = {}") || removed.contains("state = {"));
            assert_eq!(removed, original, "written:\n{written}");
        }
    }

    #[test]
    fn a_crlf_file_keeps_crlf_on_every_line_and_every_byte_it_had() {
        let original =
            "# c\r\nmodel = \"m\"\r\n\r\n[projects.\"/p\"]\r\ntrust_level = \"trusted\"\r\n";
        let (written, removed) = round_trip(original);
        assert!(written.starts_with(original), "{written:?}");
        assert_eq!(
            written.matches('\n').count(),
            written.matches("\r\n").count(),
            "a bare LF in {written:?}"
        );
        assert_eq!(removed, original);
    }

    #[test]
    fn a_hash_already_there_is_replaced_in_place_with_its_comment() {
        let rule = rule();
        let original = "[hooks.state.\"k\"]\ntrusted_hash = \"sha256:old\"  # reviewed\nx = 1\n";
        let (written, records) = write_entries(&rule, original, &[entry("k", "sha256:new")]);
        assert_eq!(
            written,
            "[hooks.state.\"k\"]\ntrusted_hash = \"sha256:new\"  # reviewed\nx = 1\n"
        );
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn a_file_that_is_not_toml_is_left_as_it_is() {
        let original = "[hooks\nbroken";
        let (written, records) = write_entries(&rule(), original, &[entry("k", "sha256:h")]);
        assert_eq!(written, original);
        assert!(records.is_empty());
        assert!(!table_field_equals(
            original,
            "projects",
            "/p",
            "trust_level",
            "trusted"
        ));
    }

    #[test]
    fn project_trust_is_read_however_the_table_is_written() {
        for text in [
            "[projects.\"/p\"]\ntrust_level = \"trusted\"\n",
            "[projects.'/p']\ntrust_level = 'trusted'\n",
            "projects = { \"/p\" = { trust_level = \"trusted\" } }\n",
            "[projects]\n\"/p\".trust_level = \"trusted\"\n",
        ] {
            assert!(
                table_field_equals(text, "projects", "/p", "trust_level", "trusted"),
                "{text}"
            );
        }
        assert!(!table_field_equals(
            "[projects.\"/p\"]\ntrust_level = \"untrusted\"\n",
            "projects",
            "/p",
            "trust_level",
            "trusted"
        ));
    }
}
