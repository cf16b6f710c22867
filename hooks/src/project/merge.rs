//! The merge engine for settings-file targets: puts belfry's managed hook groups into a
//! JSON(C) settings file and takes them out again, touching no other byte (spec §9).
//!
//! Each edit is a splice of the text at spans found by [`super::jsonc`], followed by a fresh
//! parse, so offsets are never stale. A group is belfry's only when the install record says
//! so ([`Merge::owning`]): the exact group apply wrote, found by its recorded digest, and of
//! the exact shape this scope renders ([`GroupShape`]), never because its command looks like
//! `belfry dispatch …`, so a user's own dispatch groups, and the other scope's, are never
//! taken for this projection's. What apply had to create to hold a group
//! (the file, the `hooks` object, an event's array) is recorded in [`Created`], with the text
//! an empty container held before, so that uninstall restores the file byte for byte.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::jsonc::{self, Node};

/// What one apply created in a settings file, so uninstall can take exactly that away.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// The file did not exist.
    #[serde(default)]
    pub file: bool,
    /// Member paths (`["hooks"]`, `["hooks", "PreToolUse"]`) that did not exist.
    #[serde(default)]
    pub members: Vec<Vec<String>>,
    /// For each container that was empty when a first entry went in: its path and the text
    /// between its brackets then (`""`, `" "`, a comment…).
    #[serde(default)]
    pub interiors: Vec<(Vec<String>, String)>,
}

/// One group belfry wants under `hooks_key.<event>`.
#[derive(Clone, Debug, PartialEq)]
pub struct WantedGroup {
    pub native_event: String,
    pub value: Value,
    /// Whether the group's handler is an async one (a second managed group per event).
    pub is_async: bool,
}

/// What was found of one managed group after a merge: where and its digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedGroup {
    pub native_event: String,
    pub index: usize,
    pub is_async: bool,
    /// `sha256:` of the group's canonical JSON.
    pub digest: String,
}

/// A settings file that cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeError {
    Syntax(jsonc::SyntaxError),
    NotAnObject {
        what: String,
    },
    /// A key on the way to the managed groups is written more than once. A JSON reader keeps
    /// only the last one, so an edit of the first would be one the harness never sees.
    DuplicateKey {
        path: String,
        count: usize,
    },
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MergeError::Syntax(err) => write!(f, "{err} (not valid JSON with comments)"),
            MergeError::NotAnObject { what } => write!(f, "{what} is not a JSON object"),
            MergeError::DuplicateKey { path, count } => write!(
                f,
                "the key `{path}` is written {count} times; a JSON reader keeps only the last, \
                 so belfry edits none of them: merge them into one"
            ),
        }
    }
}

/// A group this scope's renderer produces for one native event and wait mode, with its
/// handler's timeout (which follows the hooks) left open: a live group is this projection's
/// only when it has this exact shape.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupShape {
    pub native_event: String,
    pub is_async: bool,
    /// The rendered group, its handler's timeout set to 0.
    pub value: Value,
    /// The handler's timeout field, when it has one.
    pub timeout_field: Option<String>,
    /// The handler's command: what a group belfry wrote still runs after a user edited it.
    pub command: String,
}

impl GroupShape {
    /// Whether `group` is exactly the rendered group, with any whole-number timeout.
    pub fn matches(&self, group: &Value) -> bool {
        let mut group = group.clone();
        if let Some(field) = &self.timeout_field {
            let Some(handler) = group.pointer_mut("/hooks/0").and_then(Value::as_object_mut) else {
                return false;
            };
            if !handler.get(field).is_some_and(Value::is_u64) {
                return false;
            }
            handler.insert(field.clone(), Value::from(0u64));
        }
        group == self.value
    }

    /// Whether `group`'s only handler still runs this shape's exact command (a managed group
    /// the user edited, which is drift).
    pub fn runs_command(&self, group: &Value, command_field: &str) -> bool {
        group
            .get("hooks")
            .and_then(Value::as_array)
            .is_some_and(|handlers| {
                handlers.len() == 1
                    && handlers[0].get(command_field).and_then(Value::as_str)
                        == Some(self.command.as_str())
            })
    }
}

/// Where a recorded group is in the live text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// The recorded digest, of the rendered shape.
    Same(PlacedGroup),
    /// At its recorded place, still running this scope's command, but edited.
    Changed(PlacedGroup),
}

/// Whether belfry can read and edit the managed groups of `text`: it parses, it is an object,
/// and neither `hooks_key` nor an event under it is written twice.
pub fn check(text: &str, hooks_key: &str) -> Result<(), MergeError> {
    checked_root(text, hooks_key).map(|_| ())
}

fn checked_root(text: &str, hooks_key: &str) -> Result<Node, MergeError> {
    let root = jsonc::parse(text).map_err(MergeError::Syntax)?;
    if !root.is_object() {
        return Err(MergeError::NotAnObject {
            what: "the file".to_string(),
        });
    }
    let count = root.member_count(hooks_key);
    if count > 1 {
        return Err(MergeError::DuplicateKey {
            path: hooks_key.to_string(),
            count,
        });
    }
    if let Some(jsonc::Kind::Object(events)) = root.member(hooks_key).map(|hooks| &hooks.kind) {
        // Events are few; a quadratic count over them is a handful of comparisons.
        for (event, _) in events {
            let count = events.iter().filter(|(name, _)| name == event).count();
            if count > 1 {
                return Err(MergeError::DuplicateKey {
                    path: format!("{hooks_key}.{event}"),
                    count,
                });
            }
        }
    }
    Ok(root)
}

/// The editing context: one settings file's text.
pub struct Merge<'a> {
    pub text: String,
    pub hooks_key: &'a str,
    pub target: &'a str,
    pub command_field: &'a str,
    pub async_field: Option<&'a str>,
    pub created: Created,
    /// The groups of this projection, where they are now: what [`Merge::owning`] found of the
    /// install record, then kept up to date through every edit.
    pub owned: Vec<PlacedGroup>,
    /// What this scope renders, per native event and wait mode.
    pub shapes: Vec<GroupShape>,
    /// The last text read and its tree: one edit asks for the tree several times, and a
    /// large file (hundreds of kilobytes of permissions) is read once per change, not once
    /// per question. Keyed by the text itself, so a change made through `text` is seen.
    parsed: std::cell::RefCell<Option<(String, std::rc::Rc<Node>)>>,
}

impl<'a> Merge<'a> {
    /// Starts from the file's text, or an empty object for a file that does not exist.
    pub fn new(
        existing: Option<&str>,
        hooks_key: &'a str,
        target: &'a str,
        command_field: &'a str,
        async_field: Option<&'a str>,
        created: Created,
    ) -> Merge<'a> {
        let mut created = created;
        let text = match existing {
            Some(text) => text.to_string(),
            None => {
                created.file = true;
                "{}\n".to_string()
            }
        };
        Merge {
            text,
            hooks_key,
            target,
            command_field,
            async_field,
            created,
            owned: Vec::new(),
            shapes: Vec::new(),
            parsed: std::cell::RefCell::new(None),
        }
    }

    /// This projection's groups are the recorded ones found in the text ([`Merge::locate`]),
    /// same or (with `take_changed`, for an apply or uninstall with `--force`) changed; a
    /// recorded group not found is no longer this projection's.
    pub fn owning(
        mut self,
        recorded: &[PlacedGroup],
        shapes: Vec<GroupShape>,
        take_changed: bool,
    ) -> Merge<'a> {
        self.shapes = shapes;
        let mut owned: Vec<PlacedGroup> = Vec::new();
        for group in recorded {
            let found = match self.locate(group, &owned) {
                Some(Located::Same(found)) => Some(found),
                Some(Located::Changed(found)) if take_changed => Some(found),
                _ => None,
            };
            owned.extend(found);
        }
        self.owned = owned;
        self
    }

    /// Where the recorded `group` is: an element of its event's array with its digest and of
    /// the shape this scope renders (at its recorded index if it is there, else the last
    /// one), or else the element at its recorded index when that still runs this scope's
    /// command. Elements in `taken` are never found again.
    pub fn locate(&self, group: &PlacedGroup, taken: &[PlacedGroup]) -> Option<Located> {
        let shape = self.shapes.iter().find(|shape| {
            shape.native_event == group.native_event && shape.is_async == group.is_async
        })?;
        let root = self.root().ok()?;
        let array = root
            .member(self.hooks_key)?
            .member(&group.native_event)?
            .clone();
        let values: Vec<Option<Value>> = array
            .elements()
            .iter()
            .map(|element| element.value(&self.text))
            .collect();
        let free = |index: usize| {
            !taken
                .iter()
                .any(|t| t.native_event == group.native_event && t.index == index)
        };
        let same = |index: usize| {
            values[index].as_ref().is_some_and(|value| {
                super::canonical_digest(value) == group.digest && shape.matches(value)
            }) && free(index)
        };
        let placed = |index: usize, value: &Value| PlacedGroup {
            native_event: group.native_event.clone(),
            index,
            is_async: group.is_async,
            digest: super::canonical_digest(value),
        };
        let at = if group.index < values.len() && same(group.index) {
            Some(group.index)
        } else {
            (0..values.len()).rev().find(|index| same(*index))
        };
        if let Some(index) = at {
            let value = values[index].clone()?;
            return Some(Located::Same(placed(index, &value)));
        }
        let value = values.get(group.index)?.clone()?;
        (free(group.index) && shape.runs_command(&value, self.command_field))
            .then(|| Located::Changed(placed(group.index, &value)))
    }

    fn root(&self) -> Result<std::rc::Rc<Node>, MergeError> {
        if let Some((text, root)) = self.parsed.borrow().as_ref() {
            if *text == self.text {
                return Ok(root.clone());
            }
        }
        let root = std::rc::Rc::new(checked_root(&self.text, self.hooks_key)?);
        *self.parsed.borrow_mut() = Some((self.text.clone(), root.clone()));
        Ok(root)
    }

    /// The node at a member path.
    fn node_at(&self, path: &[String]) -> Result<Option<Node>, MergeError> {
        let root = self.root()?;
        let mut node: &Node = &root;
        for key in path {
            match node.member(key) {
                Some(child) => node = child,
                None => return Ok(None),
            }
        }
        Ok(Some(node.clone()))
    }

    /// This projection's groups, where they are now, in file order.
    pub fn placed(&self) -> Result<Vec<PlacedGroup>, MergeError> {
        let root = self.root()?;
        let events: Vec<String> = match root.member(self.hooks_key).map(|hooks| &hooks.kind) {
            Some(jsonc::Kind::Object(members)) => {
                members.iter().map(|(event, _)| event.clone()).collect()
            }
            _ => Vec::new(),
        };
        let mut placed = self.owned.clone();
        placed.sort_by_key(|group| {
            (
                events
                    .iter()
                    .position(|event| *event == group.native_event)
                    .unwrap_or(usize::MAX),
                group.index,
            )
        });
        Ok(placed)
    }

    /// Makes this projection's groups exactly `wanted`: an owned group is replaced in place
    /// (its position kept, which keeps a harness's positional trust keys), a new one is
    /// appended to its event's array, and an owned group no longer wanted is removed. No
    /// group the projection does not own is touched.
    pub fn set_groups(&mut self, wanted: &[WantedGroup]) -> Result<(), MergeError> {
        for group in wanted {
            self.put_group(group)?;
        }
        loop {
            let stale = self.owned.iter().find(|found| {
                !wanted.iter().any(|group| {
                    group.native_event == found.native_event && group.is_async == found.is_async
                })
            });
            let Some(stale) = stale.cloned() else {
                break;
            };
            let path = vec![self.hooks_key.to_string(), stale.native_event.clone()];
            self.remove_element(&path, stale.index)?;
            self.owned.retain(|owned| {
                !(owned.native_event == stale.native_event && owned.index == stale.index)
            });
            for owned in &mut self.owned {
                if owned.native_event == stale.native_event && owned.index > stale.index {
                    owned.index -= 1;
                }
            }
        }
        self.drop_empty_created()?;
        Ok(())
    }

    fn put_group(&mut self, group: &WantedGroup) -> Result<(), MergeError> {
        let hooks_path = vec![self.hooks_key.to_string()];
        if self.node_at(&hooks_path)?.is_none() {
            self.insert_member(&[], self.hooks_key, "{}")?;
        }
        let event_path = vec![self.hooks_key.to_string(), group.native_event.clone()];
        if self.node_at(&event_path)?.is_none() {
            self.insert_member(&hooks_path, &group.native_event, "[]")?;
        }
        let digest = super::canonical_digest(&group.value);
        let existing = self.owned.iter().position(|found| {
            found.native_event == group.native_event && found.is_async == group.is_async
        });
        match existing {
            Some(at) => {
                let index = self.owned[at].index;
                if self.owned[at].digest != digest {
                    self.replace_element(&event_path, index, &group.value)?;
                }
                self.owned[at].digest = digest;
            }
            None => {
                let index = self.container(&event_path)?.elements().len();
                self.append_element(&event_path, &group.value)?;
                self.owned.push(PlacedGroup {
                    native_event: group.native_event.clone(),
                    index,
                    is_async: group.is_async,
                    digest,
                });
            }
        }
        Ok(())
    }

    /// Removes members and restores interiors that this projection created and that hold
    /// nothing any more, innermost first; and marks the file for deletion when it is back to
    /// the empty object it was created as.
    fn drop_empty_created(&mut self) -> Result<(), MergeError> {
        let mut members = self.created.members.clone();
        members.sort_by_key(|path| std::cmp::Reverse(path.len()));
        for path in members {
            let Some(node) = self.node_at(&path)? else {
                self.created.members.retain(|p| p != &path);
                continue;
            };
            let empty = match &node.kind {
                jsonc::Kind::Object(members) => members.is_empty(),
                jsonc::Kind::Array(elements) => elements.is_empty(),
                jsonc::Kind::Scalar => false,
            };
            if empty {
                let (parent, key) = path.split_at(path.len() - 1);
                self.remove_member(parent, &key[0])?;
                self.created.members.retain(|p| p != &path);
                self.created.interiors.retain(|(p, _)| p != &path);
            }
        }
        Ok(())
    }

    /// Whether the file is the empty object apply created, so uninstall may delete it.
    pub fn is_created_and_empty(&self) -> bool {
        self.created.file && self.text.trim() == "{}"
    }

    fn indent_unit(&self) -> String {
        for line in self.text.lines() {
            let indent: String = line
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect();
            if !indent.is_empty() && line.trim_start().starts_with(['"', '{', '[', '}', ']']) {
                return indent;
            }
        }
        "  ".to_string()
    }

    /// The line ending of the lines an edit adds: CRLF when every line of the file ends so
    /// (a file written on Windows keeps its line endings), LF otherwise.
    fn newline(&self) -> &'static str {
        let lines = self.text.matches('\n').count();
        if lines > 0 && self.text.matches("\r\n").count() == lines {
            "\r\n"
        } else {
            "\n"
        }
    }

    /// The leading whitespace of the line where `offset` is.
    fn line_indent(&self, offset: usize) -> String {
        let line_start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        self.text[line_start..]
            .chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .collect()
    }

    fn render(&self, value: &Value, indent: &str) -> String {
        let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
        let unit = self.indent_unit();
        let mut out = String::new();
        for (number, line) in pretty.lines().enumerate() {
            if number > 0 {
                out.push_str(self.newline());
                out.push_str(indent);
            }
            let spaces = line.len() - line.trim_start().len();
            out.push_str(&unit.repeat(spaces / 2));
            out.push_str(line.trim_start());
        }
        out
    }

    fn splice(&mut self, start: usize, end: usize, with: &str) {
        self.text.replace_range(start..end, with);
    }

    fn container(&self, path: &[String]) -> Result<Node, MergeError> {
        match self.node_at(path)? {
            Some(node) => Ok(node),
            None => Err(MergeError::NotAnObject {
                what: format!("`{}`", path.join(".")),
            }),
        }
    }

    /// Inserts `"key": raw` as the last member of the object at `path`.
    fn insert_member(&mut self, path: &[String], key: &str, raw: &str) -> Result<(), MergeError> {
        let object = self.container(path)?;
        let jsonc::Kind::Object(members) = &object.kind else {
            return Err(MergeError::NotAnObject {
                what: if path.is_empty() {
                    "the file".to_string()
                } else {
                    format!("`{}`", path.join("."))
                },
            });
        };
        let outer = self.line_indent(object.start);
        let inner = format!("{outer}{}", self.indent_unit());
        let member = format!("{}: {raw}", serde_json::to_string(key).unwrap_or_default());
        match members.last() {
            Some((_, last)) => {
                let at = last.end;
                let nl = self.newline();
                self.splice(at, at, &format!(",{nl}{inner}{member}"));
            }
            None => {
                let interior = self.text[object.start + 1..object.end - 1].to_string();
                self.created.interiors.push((path.to_vec(), interior));
                self.splice(
                    object.start + 1,
                    object.end - 1,
                    &format!("{nl}{inner}{member}{nl}{outer}", nl = self.newline()),
                );
            }
        }
        let mut member_path = path.to_vec();
        member_path.push(key.to_string());
        self.created.members.push(member_path);
        Ok(())
    }

    fn append_element(&mut self, path: &[String], value: &Value) -> Result<(), MergeError> {
        let array = self.container(path)?;
        let outer = self.line_indent(array.start);
        let inner = format!("{outer}{}", self.indent_unit());
        let rendered = self.render(value, &inner);
        match array.elements().last() {
            Some(last) => {
                let at = last.end;
                let nl = self.newline();
                self.splice(at, at, &format!(",{nl}{inner}{rendered}"));
            }
            None => {
                let interior = self.text[array.start + 1..array.end - 1].to_string();
                self.created.interiors.push((path.to_vec(), interior));
                self.splice(
                    array.start + 1,
                    array.end - 1,
                    &format!("{nl}{inner}{rendered}{nl}{outer}", nl = self.newline()),
                );
            }
        }
        Ok(())
    }

    fn replace_element(
        &mut self,
        path: &[String],
        index: usize,
        value: &Value,
    ) -> Result<(), MergeError> {
        let array = self.container(path)?;
        let Some(element) = array.elements().get(index).cloned() else {
            return Ok(());
        };
        let indent = self.line_indent(element.start);
        let rendered = self.render(value, &indent);
        self.splice(element.start, element.end, &rendered);
        Ok(())
    }

    /// Removes element `index` of the array at `path` with the separator that joined it.
    fn remove_element(&mut self, path: &[String], index: usize) -> Result<(), MergeError> {
        let array = self.container(path)?;
        let elements = array.elements();
        let spans: Vec<(usize, usize)> = elements.iter().map(|e| (e.start, e.end)).collect();
        self.remove_span(path, array.start, array.end, &spans, index);
        Ok(())
    }

    fn remove_member(&mut self, path: &[String], key: &str) -> Result<(), MergeError> {
        let object = self.container(path)?;
        let jsonc::Kind::Object(members) = &object.kind else {
            return Ok(());
        };
        let Some(index) = members.iter().position(|(name, _)| name == key) else {
            return Ok(());
        };
        // A member's span starts at its key, where the parser says the member starts.
        let spans: Vec<(usize, usize)> = members
            .iter()
            .map(|(_, value)| (value.member_start, value.end))
            .collect();
        self.remove_span(path, object.start, object.end, &spans, index);
        Ok(())
    }

    /// Removes item `index` of a container whose items span `spans`: with the separator
    /// before it, or the one after it for a first item; the only item restores the
    /// container's recorded interior (or leaves it empty).
    fn remove_span(
        &mut self,
        path: &[String],
        start: usize,
        end: usize,
        spans: &[(usize, usize)],
        index: usize,
    ) {
        if spans.len() == 1 {
            let interior = self
                .created
                .interiors
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, text)| text.clone())
                .unwrap_or_default();
            self.created.interiors.retain(|(p, _)| p != path);
            self.splice(start + 1, end - 1, &interior);
        } else if index > 0 {
            self.splice(spans[index - 1].1, spans[index].1, "");
        } else {
            self.splice(spans[0].0, spans[1].0, "");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(command: &str) -> WantedGroup {
        WantedGroup {
            native_event: "Ev".into(),
            value: json!({"hooks": [{"type": "command", "command": command}]}),
            is_async: false,
        }
    }

    const COMMAND: &str = "belfry dispatch --event e --native t --hooks-file /x";

    /// The shapes of `group(COMMAND)` on `events`.
    fn shapes(events: &[&str]) -> Vec<GroupShape> {
        events
            .iter()
            .map(|event| GroupShape {
                native_event: event.to_string(),
                is_async: false,
                value: group(COMMAND).value,
                timeout_field: None,
                command: COMMAND.to_string(),
            })
            .collect()
    }

    #[test]
    fn a_users_own_dispatch_group_is_never_taken_for_belfrys() {
        // The user's guard calls belfry dispatch with a hooks file of their own; one group of
        // this projection's exact shape that the record does not name is the user's too.
        let mine = "{\"hooks\": {\"Ev\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"belfry dispatch --event e --native t --hooks-file /home/me/MY-OWN-HOOKS.json\"}]}, {\"hooks\": [{\"type\": \"command\", \"command\": \"belfry dispatch --event e --native t --hooks-file /x\"}]}]}}";
        let mut merge = Merge::new(
            Some(mine),
            "hooks",
            "t",
            "command",
            None,
            Created::default(),
        )
        .owning(&[], shapes(&["Ev"]), true);
        merge
            .set_groups(&[group(COMMAND)])
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(
            merge.text.starts_with(&mine[..mine.len() - 3]),
            "{}",
            merge.text
        );
        assert_eq!(merge.owned.len(), 1);
        assert_eq!(merge.owned[0].index, 2);
        let mut undo = Merge::new(
            Some(&merge.text),
            "hooks",
            "t",
            "command",
            None,
            merge.created.clone(),
        )
        .owning(&merge.owned, shapes(&["Ev"]), false);
        undo.set_groups(&[]).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(undo.text, mine);
    }

    #[test]
    fn apply_then_uninstall_restores_every_byte() {
        let originals = [
            "{}\n",
            "{ }",
            "// c\n{\n  \"a\": 1, // keep\n}\n",
            "{\n  \"hooks\": {\n    \"Ev\": [\n      {\"hooks\": [{\"command\": \"mine\"}]}\n    ]\n  }\n}\n",
            "{\n\t\"hooks\": { /* empty */ }\n}\n",
            "{\"hooks\":{\"Ev\":[]}}",
        ];
        for original in originals {
            let mut merge = Merge::new(
                Some(original),
                "hooks",
                "t",
                "command",
                None,
                Created::default(),
            );
            merge
                .set_groups(&[group(COMMAND)])
                .unwrap_or_else(|err| panic!("{original}: {err}"));
            assert!(jsonc::parse(&merge.text).is_ok(), "{}", merge.text);
            assert_eq!(
                merge.placed().map(|p| p.len()).ok(),
                Some(1),
                "{}",
                merge.text
            );
            let created = merge.created.clone();
            let applied = merge.text.clone();
            let mut undo = Merge::new(Some(&applied), "hooks", "t", "command", None, created)
                .owning(&merge.owned, shapes(&["Ev"]), false);
            undo.set_groups(&[]).unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(undo.text, original, "applied:\n{applied}");
        }
    }

    #[test]
    fn a_managed_group_is_replaced_in_place() {
        let text = "{\"hooks\": {\"Ev\": [{\"hooks\": [{\"command\": \"mine\"}]}]}}";
        let mut merge = Merge::new(
            Some(text),
            "hooks",
            "t",
            "command",
            None,
            Created::default(),
        );
        merge
            .set_groups(&[group(COMMAND)])
            .unwrap_or_else(|err| panic!("{err}"));
        let user_after = merge.text.clone();
        merge
            .set_groups(&[WantedGroup {
                value: json!({"hooks": [{"type": "command", "command": COMMAND, "timeout": 9}]}),
                ..group(COMMAND)
            }])
            .unwrap_or_else(|err| panic!("{err}"));
        let placed = merge.placed().unwrap_or_default();
        assert_eq!(placed.len(), 1);
        assert_eq!(placed[0].index, 1);
        assert!(merge.text.contains("\"timeout\": 9"), "{}", merge.text);
        assert!(
            user_after.starts_with("{\"hooks\": {\"Ev\": [{\"hooks\": [{\"command\": \"mine\"}]},")
        );
    }

    /// Issue 39: a JSON reader keeps the last of two equal keys, so belfry's groups edited
    /// into the first `hooks` (or the first of two equal events) would never run while
    /// status said installed. Such a file is refused, naming the key, and left as it is.
    #[test]
    fn a_duplicate_hooks_key_or_event_is_refused_and_the_file_left_alone() {
        for (text, key) in [
            (
                "{\"hooks\": {}, \"a\": 1, \"hooks\": {\"Ev\": []}}",
                "hooks",
            ),
            ("{\"hooks\": {\"Ev\": [], \"Ev\": []}}", "hooks.Ev"),
        ] {
            let mut merge = Merge::new(
                Some(text),
                "hooks",
                "t",
                "command",
                None,
                Created::default(),
            );
            let err = merge
                .set_groups(&[group(COMMAND)])
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                err,
                Some(format!(
                    "the key `{key}` is written 2 times; a JSON reader keeps only the last, so \
                     belfry edits none of them: merge them into one"
                ))
            );
            assert_eq!(merge.text, text);
            assert!(check(text, "hooks").is_err());
        }
        // Equal keys elsewhere are the user's business.
        assert!(check("{\"a\": 1, \"a\": 2, \"hooks\": {}}", "hooks").is_ok());
    }

    /// Issue 39: every edit keeps the file's line endings. The lines apply adds to a file
    /// whose lines end in CRLF end in CRLF, and uninstall gives back every byte.
    #[test]
    fn a_crlf_settings_file_keeps_crlf_on_every_line_apply_adds() {
        for original in [
            "{\r\n  \"a\": 1\r\n}\r\n",
            "// c\r\n{\r\n  \"hooks\": {\r\n    \"Ev\": [\r\n      {\"hooks\": [{\"command\": \"mine\"}]}\r\n    ]\r\n  }\r\n}\r\n",
            "{\r\n  \"hooks\": {}\r\n}\r\n",
        ] {
            let mut merge = Merge::new(
                Some(original),
                "hooks",
                "t",
                "command",
                None,
                Created::default(),
            )
            .owning(&[], shapes(&["Ev"]), false);
            merge
                .set_groups(&[group(COMMAND)])
                .unwrap_or_else(|err| panic!("{err}"));
            let applied = merge.text.clone();
            assert_eq!(
                applied.matches('\n').count(),
                applied.matches("\r\n").count(),
                "a bare LF in {applied:?}"
            );
            assert_eq!(merge.placed().map(|p| p.len()).ok(), Some(1));
            let mut undo = Merge::new(
                Some(&applied),
                "hooks",
                "t",
                "command",
                None,
                merge.created.clone(),
            )
            .owning(&merge.owned, shapes(&["Ev"]), false);
            undo.set_groups(&[]).unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(undo.text, original, "applied:\n{applied:?}");
        }
    }

    mod roundtrip {
        use super::*;
        use proptest::prelude::*;

        /// A settings document: unrelated scalars, maybe a `hooks` object with user groups.
        fn document() -> impl Strategy<Value = Value> {
            let scalar = prop_oneof![
                any::<bool>().prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                "[a-z ]{0,6}".prop_map(Value::from),
            ];
            let user_group = "[a-z]{1,5}"
                .prop_map(|command| json!({"hooks": [{"type": "command", "command": command}]}));
            let events = proptest::collection::btree_map(
                prop_oneof![Just("Ev".to_string()), Just("Other".to_string())],
                proptest::collection::vec(user_group, 0..3),
                0..3,
            );
            (
                proptest::collection::btree_map("[a-g]{1,3}", scalar, 0..4),
                proptest::option::of(events),
            )
                .prop_map(|(fields, hooks)| {
                    let mut map: serde_json::Map<String, Value> =
                        fields.into_iter().filter(|(k, _)| k != "hooks").collect();
                    if let Some(events) = hooks {
                        let events: serde_json::Map<String, Value> = events
                            .into_iter()
                            .map(|(event, groups)| (event, Value::Array(groups)))
                            .collect();
                        map.insert("hooks".into(), Value::Object(events));
                    }
                    Value::Object(map)
                })
        }

        /// The document as a user might have written it: compact or pretty, with comments.
        fn text(value: &Value, pretty: bool, comment: bool) -> String {
            let body = if pretty {
                serde_json::to_string_pretty(value).unwrap_or_default()
            } else {
                serde_json::to_string(value).unwrap_or_default()
            };
            if comment {
                format!("// settings\n{}\n", body.replacen('{', "{ /* kept */", 1))
            } else {
                body
            }
        }

        proptest! {
            #[test]
            fn apply_then_uninstall_is_the_identity(
                value in document(),
                pretty in any::<bool>(),
                comment in any::<bool>(),
                events in proptest::collection::btree_set(prop_oneof![Just("Ev"), Just("New")], 1..3),
            ) {
                let original = text(&value, pretty, comment);
                let wanted: Vec<WantedGroup> = events
                    .iter()
                    .map(|event| WantedGroup { native_event: event.to_string(), ..group(COMMAND) })
                    .collect();
                let mut merge = Merge::new(Some(&original), "hooks", "t", "command", None, Created::default());
                prop_assert!(merge.set_groups(&wanted).is_ok());
                let applied = merge.text.clone();
                let root = jsonc::parse(&applied);
                prop_assert!(root.is_ok(), "{}", applied);
                prop_assert_eq!(merge.placed().map(|p| p.len()).unwrap_or(0), wanted.len());
                // Every unrelated value is still there, unchanged.
                let now = root.ok().and_then(|root| root.value(&applied)).unwrap_or(Value::Null);
                if let Value::Object(map) = &value {
                    for (key, field) in map {
                        if key != "hooks" {
                            prop_assert_eq!(now.get(key), Some(field));
                        }
                    }
                }
                let mut undo = Merge::new(Some(&applied), "hooks", "t", "command", None, merge.created.clone())
                    .owning(&merge.owned, shapes(&["Ev", "New"]), false);
                prop_assert!(undo.set_groups(&[]).is_ok());
                prop_assert_eq!(undo.text, original);
            }
        }
    }
}
