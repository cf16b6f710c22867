//! Lowering: canonical KDL text to validated [`CanonicalHook`]s, naming the file, line and
//! column of each problem. The rules are in the [module header](super) and `docs/hooks.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

mod session;

use super::{
    CanonicalError, CanonicalHook, Effect, Failure, HookId, Intent, Location, Memory, Problem,
    Scope, Selector, CONTEXT_EVENTS, DEFAULT_TIMEOUT_MS, DENY_EVENTS, MAX_TIMEOUT_MS,
    SEMANTIC_EVENTS, TOOL_CLASSES, TOOL_EVENTS,
};

const HOOK_NODES: &[&str] = &[
    "event",
    "intent",
    "select",
    "command",
    "command-windows",
    "timeout-ms",
    "async",
    "failure",
    "effects",
    "targets",
    "once",
    "reason",
];

const HOOK_EXAMPLE: &str =
    "hook \"NAME\" { event \"before-tool\"; command \"PROGRAM\"; targets \"ADAPTER\" }";
const EVENT_EXAMPLE: &str = "event \"before-tool\"";
const INTENT_EXAMPLE: &str = "intent \"enforce\"";
const SELECT_EXAMPLE: &str = "select tool=\"shell\" (or select native=\"ExactToolName\")";
const COMMAND_EXAMPLE: &str = "command \"PROGRAM\" \"ARG\"…";
const TIMEOUT_EXAMPLE: &str = "timeout-ms 5000";
const ASYNC_EXAMPLE: &str = "async #false";
const FAILURE_EXAMPLE: &str = "failure \"closed\"";
const EFFECTS_EXAMPLE: &str = "effects \"deny\" \"context\"";
const TARGETS_EXAMPLE: &str = "targets \"ADAPTER\" \"ADAPTER\"…";

/// The most `{` and `/*` a canonical file may hold. The `kdl` parser recurses once per block
/// and nested comment, and a hook file needs two levels; this bound keeps the recursion far
/// from the parser thread's stack (spec §12: bad input gets an error, never a crash).
const MAX_OPENERS: usize = 256;

/// The stack of the parser thread: room for [`MAX_OPENERS`] levels many times over.
const PARSER_STACK_BYTES: usize = 8 << 20;

/// The hooks of a file, in order, and its `memory` block.
pub(super) type Lowered = (Vec<CanonicalHook>, Option<Memory>);

pub(super) struct Lowering<'a> {
    source: &'a str,
    file: &'a Path,
    scope: Scope,
    known_targets: &'a BTreeSet<String>,
    line_starts: Vec<usize>,
}

/// The nodes of one `hook` block, each with its node, before the cross-field rules.
#[derive(Default)]
struct Fields<'n> {
    nodes: BTreeMap<&'n str, &'n KdlNode>,
}

impl<'a> Lowering<'a> {
    pub(super) fn new(
        source: &'a str,
        file: &'a Path,
        scope: Scope,
        known_targets: &'a BTreeSet<String>,
    ) -> Self {
        let line_starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(index, _)| index + 1))
            .collect();
        Lowering {
            source,
            file,
            scope,
            known_targets,
            line_starts,
        }
    }

    /// Checks the opener bound, then parses and lowers on a thread with a known stack; the
    /// document is dropped there too, since dropping it recurses as deeply as parsing it.
    pub(super) fn document(&self) -> Result<Lowered, CanonicalError> {
        if let Some(offset) = nth_opener(self.source, MAX_OPENERS + 1) {
            return Err(self.invalid(offset, Problem::TooDeep { limit: MAX_OPENERS }));
        }
        std::thread::scope(|scope| {
            let parser = std::thread::Builder::new()
                .name("belfry-hooks-kdl".to_owned())
                .stack_size(PARSER_STACK_BYTES)
                .spawn_scoped(scope, || self.lower());
            let failed = |reason: String| {
                self.invalid(
                    0,
                    Problem::Syntax {
                        message: format!("the parser thread failed: {reason}"),
                    },
                )
            };
            match parser {
                Ok(parser) => parser
                    .join()
                    .unwrap_or_else(|_| Err(failed("it panicked".to_owned()))),
                Err(err) => Err(failed(err.to_string())),
            }
        })
    }

    fn lower(&self) -> Result<Lowered, CanonicalError> {
        let document = self.parse_kdl()?;
        let mut hooks = Vec::new();
        let mut memory: Option<Memory> = None;
        let mut first_lines: BTreeMap<String, usize> = BTreeMap::new();
        for node in document.nodes() {
            if node.name().value() == "memory" {
                memory = Some(self.memory(node, memory.as_ref())?);
                continue;
            }
            if node.name().value() != "hook" {
                return Err(self.invalid(
                    node.span().offset(),
                    Problem::UnknownNode {
                        name: node.name().value().to_owned(),
                        block: "the top level".to_owned(),
                        expected: "hook, memory".to_owned(),
                    },
                ));
            }
            let (hook, name_entry) = self.hook(node)?;
            if let Some(&first_line) = first_lines.get(&hook.id.name) {
                return Err(self.invalid(
                    name_entry.span().offset(),
                    Problem::DuplicateHook {
                        name: hook.id.name,
                        first_line,
                    },
                ));
            }
            first_lines.insert(hook.id.name.clone(), hook.at.line);
            hooks.push(hook);
        }
        Ok((hooks, memory))
    }

    fn parse_kdl(&self) -> Result<KdlDocument, CanonicalError> {
        KdlDocument::parse_v2(self.source).map_err(|error| {
            let first = error
                .diagnostics
                .iter()
                .min_by_key(|diagnostic| diagnostic.span.offset());
            let (offset, message) = match first {
                Some(diagnostic) => {
                    let mut message = diagnostic.to_string();
                    if let Some(help) = &diagnostic.help {
                        message.push_str(&format!(" ({help})"));
                    }
                    (diagnostic.span.offset(), message)
                }
                None => (0, "the parser gave no reason".to_owned()),
            };
            self.invalid(offset, Problem::Syntax { message })
        })
    }

    fn hook<'n>(&self, node: &'n KdlNode) -> Result<(CanonicalHook, &'n KdlEntry), CanonicalError> {
        let (name, name_entry) = self.one_string(node, "hook", HOOK_EXAMPLE)?;
        if !valid_hook_name(&name) {
            return Err(self.invalid(
                name_entry.span().offset(),
                Problem::InvalidHookName { name },
            ));
        }
        let block = format!("hook {name:?}");
        let fields = self.fields(node, &block)?;
        let missing = |field: &'static str, example: &'static str| {
            self.invalid(
                node.span().offset(),
                Problem::Missing {
                    name: name.clone(),
                    field,
                    example,
                },
            )
        };

        let event_node = fields
            .get("event")
            .ok_or_else(|| missing("event", EVENT_EXAMPLE))?;
        let (event, event_entry) = self.one_string(event_node, "event", EVENT_EXAMPLE)?;
        self.one_of(&event, event_entry, "event", SEMANTIC_EVENTS)?;

        let intent = self.intent(&fields)?;

        let command_node = fields
            .get("command")
            .ok_or_else(|| missing("command", COMMAND_EXAMPLE))?;
        let command = self.argv(command_node, "command")?;
        let command_windows = match fields.get("command-windows") {
            None => None,
            Some(node) => Some(self.argv(node, "command-windows")?),
        };

        let timeout_ms = match fields.get("timeout-ms") {
            None => DEFAULT_TIMEOUT_MS,
            Some(node) => self.timeout(node)?,
        };
        let is_async = match fields.get("async") {
            None => false,
            Some(node) => self.boolean(node, "async", ASYNC_EXAMPLE)?,
        };
        let failure = self.failure(&fields)?;

        let targets_node = fields
            .get("targets")
            .ok_or_else(|| missing("targets", TARGETS_EXAMPLE))?;
        let targets = self.targets(targets_node)?;

        let selector = self.select(&fields, &event, targets.len())?;

        // An implied effect is checked at the `intent` node that implies it.
        let implied_at = fields.get("intent").copied().unwrap_or(node);
        let effects = self.effects(implied_at, fields.get("effects").copied(), intent, &event)?;
        if is_async && intent != Intent::Observe {
            let at = fields
                .get("async")
                .map_or(node.span().offset(), |async_node| {
                    async_node.span().offset()
                });
            return Err(self.invalid(at, Problem::AsyncNotObserve));
        }

        let (once, reason) = self.once_and_reason(&fields)?;
        let hook = CanonicalHook {
            id: HookId {
                scope: self.scope,
                name,
            },
            at: self.location(node.span().offset()),
            event,
            intent,
            selector,
            command,
            command_windows,
            timeout_ms,
            is_async,
            failure,
            effects,
            targets,
            once,
            reason,
            session: None,
        };
        Ok((hook, name_entry))
    }

    /// The `intent` field: how the hook's answer may act (`enrich` when absent).
    fn intent(&self, fields: &Fields<'_>) -> Result<Intent, CanonicalError> {
        Ok(match fields.get("intent") {
            None => Intent::Enrich,
            Some(node) => {
                let (text, entry) = self.one_string(node, "intent", INTENT_EXAMPLE)?;
                match text.as_str() {
                    "observe" => Intent::Observe,
                    "enrich" => Intent::Enrich,
                    "enforce" => Intent::Enforce,
                    _ => {
                        return Err(self.not_one_of(
                            entry,
                            "intent",
                            text,
                            &["observe", "enrich", "enforce"],
                        ))
                    }
                }
            }
        })
    }

    /// The `failure` field: what a failed hook means (`open` when absent).
    fn failure(&self, fields: &Fields<'_>) -> Result<Failure, CanonicalError> {
        Ok(match fields.get("failure") {
            None => Failure::Open,
            Some(node) => {
                let (text, entry) = self.one_string(node, "failure", FAILURE_EXAMPLE)?;
                match text.as_str() {
                    "open" => Failure::Open,
                    "closed" => Failure::Closed,
                    _ => return Err(self.not_one_of(entry, "failure", text, &["open", "closed"])),
                }
            }
        })
    }

    /// The `select` field: which tool calls the hook is for (any when absent). Only tool
    /// events select, and a native selector names one target's tools, so it needs exactly one.
    fn select(
        &self,
        fields: &Fields<'_>,
        event: &str,
        targets: usize,
    ) -> Result<Selector, CanonicalError> {
        Ok(match fields.get("select") {
            None => Selector::Any,
            Some(select) => {
                if !TOOL_EVENTS.contains(&event) {
                    return Err(self.invalid(
                        select.span().offset(),
                        Problem::SelectOnNonToolEvent {
                            event: event.to_owned(),
                        },
                    ));
                }
                let selector = self.selector(select)?;
                if matches!(selector, Selector::Native(_)) && targets != 1 {
                    return Err(self.invalid(
                        select.span().offset(),
                        Problem::NativeNeedsOneTarget { found: targets },
                    ));
                }
                selector
            }
        })
    }

    /// The children of a `hook` node by name, each known and given once.
    fn fields<'n>(&self, node: &'n KdlNode, block: &str) -> Result<Fields<'n>, CanonicalError> {
        let mut fields = Fields::default();
        let Some(children) = node.children() else {
            return Ok(fields);
        };
        for child in children.nodes() {
            let name = child.name().value();
            let Some(&known) = HOOK_NODES.iter().find(|known| **known == name) else {
                return Err(self.invalid(
                    child.span().offset(),
                    Problem::UnknownNode {
                        name: name.to_owned(),
                        block: block.to_owned(),
                        expected: HOOK_NODES.join(", "),
                    },
                ));
            };
            if let Some(first) = fields.nodes.get(known) {
                return Err(self.invalid(
                    child.span().offset(),
                    Problem::Repeated {
                        name: name.to_owned(),
                        block: block.to_owned(),
                        first_line: self.location(first.span().offset()).line,
                    },
                ));
            }
            fields.nodes.insert(known, child);
        }
        Ok(fields)
    }

    fn selector(&self, node: &KdlNode) -> Result<Selector, CanonicalError> {
        self.no_children(node, "select", SELECT_EXAMPLE)?;
        let entries = node.entries();
        let shape = || {
            self.invalid(
                node.span().offset(),
                Problem::Shape {
                    node: "select".to_owned(),
                    expected: "one property, tool= or native=",
                    example: SELECT_EXAMPLE,
                },
            )
        };
        let [entry] = entries else {
            return Err(shape());
        };
        let Some(key) = entry.name() else {
            return Err(shape());
        };
        let value = self.string_value(entry, &format!("`{}` of `select`", key.value()))?;
        match key.value() {
            "tool" => {
                let mut classes = Vec::new();
                for class in value.split('|').map(str::trim) {
                    if !TOOL_CLASSES.contains(&class) {
                        return Err(self.not_one_of(
                            entry,
                            "tool class",
                            class.to_owned(),
                            TOOL_CLASSES,
                        ));
                    }
                    if class == "any" {
                        return Ok(Selector::Any);
                    }
                    if !classes.iter().any(|known: &String| known == class) {
                        classes.push(class.to_owned());
                    }
                }
                Ok(Selector::Classes(classes))
            }
            "native" => {
                if value.trim().is_empty() || value.contains('|') {
                    return Err(self.invalid(
                        entry.span().offset(),
                        Problem::Empty {
                            what: "`native` of `select` (one exact tool name, no `|`)".to_owned(),
                        },
                    ));
                }
                Ok(Selector::Native(value))
            }
            other => Err(self.invalid(
                entry.span().offset(),
                Problem::UnexpectedProperty {
                    node: "select".to_owned(),
                    key: other.to_owned(),
                    example: SELECT_EXAMPLE,
                },
            )),
        }
    }

    fn effects(
        &self,
        implied_at: &KdlNode,
        node: Option<&KdlNode>,
        intent: Intent,
        event: &str,
    ) -> Result<BTreeSet<Effect>, CanonicalError> {
        let Some(node) = node else {
            // Without `effects`, an intent implies the one effect it is named for.
            let implied = match intent {
                Intent::Observe => None,
                Intent::Enrich => Some(Effect::Context),
                Intent::Enforce => Some(Effect::Deny),
            };
            let mut effects = BTreeSet::new();
            if let Some(effect) = implied {
                self.effect_at_event(implied_at, effect, event)?;
                effects.insert(effect);
            }
            return Ok(effects);
        };
        let mut effects = BTreeSet::new();
        for (text, entry) in self.strings(node, "effects", EFFECTS_EXAMPLE)? {
            let Some(effect) = Effect::parse(&text) else {
                return Err(self.not_one_of(
                    entry,
                    "effect",
                    text,
                    &["deny", "context", "rewrite"],
                ));
            };
            if !effects.insert(effect) {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::DuplicateEffect { effect: text },
                ));
            }
            if effect == Effect::Rewrite {
                return Err(self.invalid(entry.span().offset(), Problem::RewriteNotCarried));
            }
            self.effect_at_event(node, effect, event)?;
        }
        let rule = match intent {
            Intent::Observe if !effects.is_empty() => {
                Some("may have no effects: an observer neither denies nor adds context")
            }
            Intent::Enrich if effects.contains(&Effect::Deny) => {
                Some("may not deny: use intent \"enforce\" for a hook that refuses")
            }
            Intent::Enforce if !effects.contains(&Effect::Deny) => {
                Some("must list effect \"deny\": an enforcer's purpose is to refuse")
            }
            _ => None,
        };
        if let Some(rule) = rule {
            return Err(self.invalid(
                node.span().offset(),
                Problem::IntentEffects {
                    intent: intent.as_str(),
                    rule: rule.to_owned(),
                },
            ));
        }
        Ok(effects)
    }

    fn effect_at_event(
        &self,
        node: &KdlNode,
        effect: Effect,
        event: &str,
    ) -> Result<(), CanonicalError> {
        let events = match effect {
            Effect::Deny => DENY_EVENTS,
            Effect::Context => CONTEXT_EVENTS,
            Effect::Rewrite => &["before-tool"][..],
        };
        if events.contains(&event) {
            return Ok(());
        }
        Err(self.invalid(
            node.span().offset(),
            Problem::EffectNotAtEvent {
                effect: effect.as_str(),
                event: event.to_owned(),
                events: events.join(", "),
            },
        ))
    }

    fn targets(&self, node: &KdlNode) -> Result<Vec<String>, CanonicalError> {
        let strings = self.strings(node, "targets", TARGETS_EXAMPLE)?;
        if strings.is_empty() {
            return Err(self.invalid(
                node.span().offset(),
                Problem::Empty {
                    what: "`targets` (name at least one adapter)".to_owned(),
                },
            ));
        }
        let mut targets: Vec<String> = Vec::new();
        for (target, entry) in strings {
            if !self.known_targets.contains(&target) {
                let known: Vec<&str> = self.known_targets.iter().map(String::as_str).collect();
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::UnknownTarget {
                        target,
                        known: known.join(", "),
                    },
                ));
            }
            if targets.contains(&target) {
                return Err(
                    self.invalid(entry.span().offset(), Problem::DuplicateTarget { target })
                );
            }
            targets.push(target);
        }
        Ok(targets)
    }

    fn argv(&self, node: &KdlNode, name: &str) -> Result<Vec<String>, CanonicalError> {
        let strings = self.strings(node, name, COMMAND_EXAMPLE)?;
        match strings.first() {
            None => Err(self.invalid(
                node.span().offset(),
                Problem::Empty {
                    what: format!("`{name}` (give the program and its arguments)"),
                },
            )),
            Some((program, entry)) if program.trim().is_empty() => Err(self.invalid(
                entry.span().offset(),
                Problem::Empty {
                    what: format!("the program of `{name}`"),
                },
            )),
            Some(_) => Ok(strings.into_iter().map(|(value, _)| value).collect()),
        }
    }

    fn timeout(&self, node: &KdlNode) -> Result<u64, CanonicalError> {
        let entry = self.one_entry(node, "timeout-ms", TIMEOUT_EXAMPLE)?;
        let KdlValue::Integer(value) = entry.value() else {
            return Err(self.wrong_type(
                entry,
                "the value of `timeout-ms`",
                "an integer (milliseconds)",
            ));
        };
        match u64::try_from(*value) {
            Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(ms),
            _ => Err(self.invalid(
                entry.span().offset(),
                Problem::TimeoutRange {
                    value: *value,
                    max: MAX_TIMEOUT_MS,
                },
            )),
        }
    }

    fn boolean(
        &self,
        node: &KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<bool, CanonicalError> {
        let entry = self.one_entry(node, name, example)?;
        match entry.value() {
            KdlValue::Bool(value) => Ok(*value),
            _ => Err(self.wrong_type(entry, &format!("the value of `{name}`"), "#true or #false")),
        }
    }

    fn one_string<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(String, &'n KdlEntry), CanonicalError> {
        let entry = self.one_entry(node, name, example)?;
        let value = self.string_value(entry, &format!("the value of `{name}`"))?;
        if value.trim().is_empty() {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::Empty {
                    what: format!("the value of `{name}`"),
                },
            ));
        }
        Ok((value, entry))
    }

    /// The node's single positional argument; `hook` alone may (must) have children.
    fn one_entry<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<&'n KdlEntry, CanonicalError> {
        if name != "hook" {
            self.no_children(node, name, example)?;
        }
        self.no_properties(node, name, example)?;
        match node.entries() {
            [entry] => Ok(entry),
            _ => Err(self.invalid(
                node.span().offset(),
                Problem::Shape {
                    node: name.to_owned(),
                    expected: "exactly one value",
                    example,
                },
            )),
        }
    }

    fn strings<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<Vec<(String, &'n KdlEntry)>, CanonicalError> {
        self.no_children(node, name, example)?;
        self.no_properties(node, name, example)?;
        node.entries()
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                let value =
                    self.string_value(entry, &format!("argument {} of `{name}`", index + 1))?;
                Ok((value, entry))
            })
            .collect()
    }

    fn string_value(&self, entry: &KdlEntry, what: &str) -> Result<String, CanonicalError> {
        let KdlValue::String(value) = entry.value() else {
            return Err(self.wrong_type(entry, what, "a string"));
        };
        if value.contains('\0') {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::Nul {
                    what: what.to_owned(),
                },
            ));
        }
        Ok(value.clone())
    }

    fn no_children(
        &self,
        node: &KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(), CanonicalError> {
        match node.children() {
            Some(children) => Err(self.invalid(
                children.span().offset(),
                Problem::Shape {
                    node: name.to_owned(),
                    expected: "values, not a `{ … }` block",
                    example,
                },
            )),
            None => Ok(()),
        }
    }

    fn no_properties(
        &self,
        node: &KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(), CanonicalError> {
        match node.entries().iter().find(|entry| entry.name().is_some()) {
            Some(entry) => Err(self.invalid(
                entry.span().offset(),
                Problem::UnexpectedProperty {
                    node: name.to_owned(),
                    key: entry
                        .name()
                        .map(|key| key.value().to_owned())
                        .unwrap_or_default(),
                    example,
                },
            )),
            None => Ok(()),
        }
    }

    fn one_of(
        &self,
        value: &str,
        entry: &KdlEntry,
        what: &'static str,
        allowed: &[&str],
    ) -> Result<(), CanonicalError> {
        if allowed.contains(&value) {
            return Ok(());
        }
        Err(self.not_one_of(entry, what, value.to_owned(), allowed))
    }

    fn not_one_of(
        &self,
        entry: &KdlEntry,
        what: &'static str,
        value: String,
        allowed: &[&str],
    ) -> CanonicalError {
        self.invalid(
            entry.span().offset(),
            Problem::NotOneOf {
                what,
                value,
                expected: allowed.join(", "),
            },
        )
    }

    fn wrong_type(&self, entry: &KdlEntry, what: &str, expected: &'static str) -> CanonicalError {
        self.invalid(
            entry.span().offset(),
            Problem::WrongType {
                what: what.to_owned(),
                expected,
                found: match entry.value() {
                    KdlValue::String(text) => format!("{text:?}"),
                    other => other.to_string(),
                },
            },
        )
    }

    fn invalid(&self, offset: usize, problem: Problem) -> CanonicalError {
        CanonicalError {
            at: self.location(offset),
            problem: Box::new(problem),
        }
    }

    /// The line and column of a byte offset (kdl spans count bytes), clamped to the text.
    fn location(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self
            .line_starts
            .partition_point(|&line_start| line_start <= offset);
        let line_start = self.line_starts.get(line - 1).copied().unwrap_or(0);
        let column = self.source[line_start..offset].chars().count() + 1;
        Location {
            file: self.file.to_path_buf(),
            line,
            column,
        }
    }
}

impl<'n> Fields<'n> {
    fn get(&self, name: &str) -> Option<&&'n KdlNode> {
        self.nodes.get(name)
    }
}

/// A hook name is a file-name-safe word, so it can appear in state keys and messages as is.
fn valid_hook_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

/// The byte offset of the `n`-th `{` or `/*` in the text, counted everywhere (strings and
/// comments too): a crude bound no reading of the text can nest past.
fn nth_opener(source: &str, n: usize) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut seen = 0usize;
    for (at, byte) in bytes.iter().enumerate() {
        let opener = *byte == b'{' || (*byte == b'/' && bytes.get(at + 1) == Some(&b'*'));
        if opener {
            seen += 1;
            if seen == n {
                return Some(at);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_names_are_file_name_safe_words() {
        for good in ["a", "no-force-push", "v1.2_x"] {
            assert!(valid_hook_name(good), "{good}");
        }
        for bad in ["", "a b", "../x", "é", &"x".repeat(65)] {
            assert!(!valid_hook_name(bad), "{bad}");
        }
    }

    #[test]
    fn openers_are_counted_everywhere() {
        assert_eq!(nth_opener("a { b /* c */ \"{\" }", 3), Some(15));
        assert_eq!(nth_opener("a { }", 2), None);
    }
}
