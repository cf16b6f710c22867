//! `--native DIALECT`: renders a neutral [`Outcome`] in a harness's own output contract.
//!
//! SPEC §8 and §10: the rendering logic lives here once; the literals (exit codes, field names,
//! which stream carries what, which events can block) are data that adapters ship as
//! `<dialects dir>/<name>.json`. The crate itself carries only the `test` dialect
//! (`hooks/dialects/test.json`), a made-up contract that uses every form.
//!
//! A dialect gives, for `allow` and for `deny`, an exit code and a template per stream:
//! `{"text": "..."}` writes the expanded string, `{"json": ...}` writes the JSON value with its
//! strings expanded. A string may use `$decision`, `$reason`, `$context`, `$event` (the
//! semantic event) and `$hook_event_name` (from the hook's stdin); `$$` is a literal `$`. A
//! JSON string that is exactly `$name?` is left out of its object or array when the value is
//! empty, so a context field can appear only when there is context. Per-event renderings
//! override the default one. A deny on an event the dialect does not list as blocking cannot
//! be enforced by that harness, so it is rendered as an allow whose reason says the deny was
//! degraded. `docs/hooks.md` is the full reference.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;
use crate::outcome::{Decision, Outcome};
use crate::permissions::{read_checked, AllowedOwners, CheckedReadError};

/// The only dialect format version this crate reads.
pub const DIALECT_VERSION: u32 = 1;

/// Dialects compiled into the crate, found when the dialects directory has no file of the name.
const BUILT_IN_DIALECTS: &[(&str, &str)] = &[("test", include_str!("../dialects/test.json"))];

/// The placeholders a template may use.
const PLACEHOLDERS: [&str; 5] = ["decision", "reason", "context", "event", "hook_event_name"];

/// A loaded and validated dialect.
#[derive(Clone, Debug)]
pub struct Dialect {
    name: String,
    description: String,
    blocking_events: BTreeSet<String>,
    default: DecisionRenderings,
    events: BTreeMap<String, EventRenderings>,
}

/// What a dialect wrote for one outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
    /// The outcome as the harness will see it: a deny the event cannot carry is an allow here.
    pub outcome: Outcome,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDialect {
    version: u32,
    #[serde(default)]
    description: String,
    blocking_events: Vec<String>,
    default: DecisionRenderings,
    #[serde(default)]
    events: BTreeMap<String, EventRenderings>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionRenderings {
    allow: Rendering,
    deny: Rendering,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventRenderings {
    #[serde(default)]
    allow: Option<Rendering>,
    #[serde(default)]
    deny: Option<Rendering>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rendering {
    #[serde(default)]
    exit_code: u8,
    #[serde(default)]
    stdout: Option<StreamTemplate>,
    #[serde(default)]
    stderr: Option<StreamTemplate>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum StreamTemplate {
    Text(String),
    Json(Value),
}

/// The values placeholders expand to.
struct Values<'a> {
    decision: &'a str,
    reason: &'a str,
    context: &'a str,
    event: &'a str,
    hook_event_name: &'a str,
}

impl Values<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        match name {
            "decision" => Some(self.decision),
            "reason" => Some(self.reason),
            "context" => Some(self.context),
            "event" => Some(self.event),
            "hook_event_name" => Some(self.hook_event_name),
            _ => None,
        }
    }
}

impl Dialect {
    /// Finds `<dialects_dir>/<name>.json`, else the built-in dialect of that name.
    pub fn load(name: &str, dialects_dir: Option<&Path>) -> Result<Dialect, Error> {
        validate_name(name)?;
        if let Some(dir) = dialects_dir {
            if let Some(bytes) = read_dialect_file(&dir.join(format!("{name}.json")))? {
                return Dialect::parse(name, &bytes);
            }
        }
        match BUILT_IN_DIALECTS
            .iter()
            .find(|(built_in, _)| *built_in == name)
        {
            Some((_, text)) => Dialect::parse(name, text.as_bytes()),
            None => Err(Error::DialectNotFound {
                name: name.to_string(),
                searched: match dialects_dir {
                    Some(dir) => dir.display().to_string(),
                    None => "no dialects directory (BELFRY_DIALECTS is unset)".to_string(),
                },
            }),
        }
    }

    /// Parses and validates dialect data; `name` only names it in errors.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Dialect, Error> {
        let invalid = |reason: String| Error::DialectInvalid {
            name: name.to_string(),
            reason,
        };
        let raw: RawDialect = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        if raw.version != DIALECT_VERSION {
            return Err(invalid(format!(
                "version {} is not supported (this belfry reads version {DIALECT_VERSION})",
                raw.version
            )));
        }
        if raw.blocking_events.iter().any(String::is_empty) {
            return Err(invalid(
                "blocking_events has an empty event name".to_string(),
            ));
        }
        validate_rendering("default.allow", &raw.default.allow).map_err(invalid)?;
        validate_rendering("default.deny", &raw.default.deny).map_err(invalid)?;
        for (event, renderings) in &raw.events {
            for (decision, rendering) in [("allow", &renderings.allow), ("deny", &renderings.deny)]
            {
                if let Some(rendering) = rendering {
                    validate_rendering(&format!("events.{event:?}.{decision}"), rendering)
                        .map_err(invalid)?;
                }
            }
        }
        Ok(Dialect {
            name: name.to_string(),
            description: raw.description,
            blocking_events: raw.blocking_events.into_iter().collect(),
            default: raw.default,
            events: raw.events,
        })
    }

    /// The dialect's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dialect's free-text description, for people and `belfry hooks` listings.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Whether a deny on `event` can be enforced by this harness.
    pub fn can_block(&self, event: &str) -> bool {
        self.blocking_events.contains(event)
    }

    /// Renders `outcome` for `event`. `hook_event_name` is the stdin's field of that name (empty
    /// when absent), for dialects that echo the harness's own event name.
    pub fn render(&self, event: &str, hook_event_name: &str, outcome: Outcome) -> NativeOutput {
        let outcome = self.degrade_unblockable_deny(event, outcome);
        let renderings = self.events.get(event);
        let rendering = match outcome.decision {
            Decision::Allow => renderings.and_then(|r| r.allow.as_ref()),
            Decision::Deny => renderings.and_then(|r| r.deny.as_ref()),
        }
        .unwrap_or(match outcome.decision {
            Decision::Allow => &self.default.allow,
            Decision::Deny => &self.default.deny,
        });
        let values = Values {
            decision: outcome.decision.as_str(),
            reason: &outcome.reason,
            context: &outcome.context,
            event,
            hook_event_name,
        };
        NativeOutput {
            stdout: render_stream(rendering.stdout.as_ref(), &values),
            stderr: render_stream(rendering.stderr.as_ref(), &values),
            exit_code: i32::from(rendering.exit_code),
            outcome,
        }
    }

    fn degrade_unblockable_deny(&self, event: &str, outcome: Outcome) -> Outcome {
        if outcome.decision == Decision::Allow || self.can_block(event) {
            return outcome;
        }
        Outcome {
            decision: Decision::Allow,
            reason: format!(
                "belfry dispatch: deny degraded to allow: dialect {:?} cannot block event {event:?} \
                 (denied because: {})",
                self.name, outcome.reason
            ),
            context: outcome.context,
        }
    }
}

fn validate_name(name: &str) -> Result<(), Error> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidDialectName {
            name: name.to_string(),
        })
    }
}

/// Reads a dialect file after the same ownership check as a hooks file; `None` when absent.
fn read_dialect_file(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match read_checked(path, AllowedOwners::UserOrRoot) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(CheckedReadError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(CheckedReadError::Io(source)) => Err(Error::DialectRead {
            path: path.to_path_buf(),
            source,
        }),
        Err(CheckedReadError::Insecure(insecure)) => Err(Error::DialectInsecure {
            path: path.to_path_buf(),
            problem: insecure.problem,
            fix: insecure.fix,
        }),
    }
}

fn validate_rendering(at: &str, rendering: &Rendering) -> Result<(), String> {
    for (stream, template) in [("stdout", &rendering.stdout), ("stderr", &rendering.stderr)] {
        let result = match template {
            None => Ok(()),
            Some(StreamTemplate::Text(text)) => expand(text, &|_| Some("")).map(drop),
            Some(StreamTemplate::Json(value)) => validate_json_template(value),
        };
        result.map_err(|reason| format!("{at}.{stream}: {reason}"))?;
    }
    Ok(())
}

fn validate_json_template(value: &Value) -> Result<(), String> {
    match value {
        Value::String(text) => match optional_placeholder(text) {
            Some(name) if PLACEHOLDERS.contains(&name) => Ok(()),
            Some(name) => Err(unknown_placeholder(name)),
            None => expand(text, &|_| Some("")).map(drop),
        },
        Value::Array(items) => items.iter().try_for_each(validate_json_template),
        Value::Object(members) => members.values().try_for_each(validate_json_template),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

fn unknown_placeholder(name: &str) -> String {
    format!(
        "unknown placeholder ${name}; known: {}",
        PLACEHOLDERS.map(|known| format!("${known}")).join(", ")
    )
}

/// `$name?` as a whole string: the member is dropped when the value is empty.
fn optional_placeholder(text: &str) -> Option<&str> {
    let name = text.strip_prefix('$')?.strip_suffix('?')?;
    let is_identifier =
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    is_identifier.then_some(name)
}

/// Expands `$name` and `$$` in one pass, so a value that itself contains `$reason` is never
/// expanded again. `lookup` returns `None` for an unknown name, which is an error.
fn expand<'v>(template: &str, lookup: &dyn Fn(&str) -> Option<&'v str>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let name_len = after
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        let name = &after[..name_len];
        if name.is_empty() {
            return Err(
                "`$` is not followed by a placeholder name; write `$$` for a literal `$`"
                    .to_string(),
            );
        }
        let value = if PLACEHOLDERS.contains(&name) {
            lookup(name)
        } else {
            None
        };
        out.push_str(value.ok_or_else(|| unknown_placeholder(name))?);
        rest = &after[name_len..];
    }
    out.push_str(rest);
    Ok(out)
}

fn render_stream(template: Option<&StreamTemplate>, values: &Values) -> Vec<u8> {
    let lookup = |name: &str| values.get(name);
    match template {
        None => Vec::new(),
        Some(StreamTemplate::Text(text)) => {
            // Templates were validated at load, so expansion cannot fail here; the raw
            // template is a visible fallback rather than a panic.
            let mut rendered = expand(text, &lookup).unwrap_or_else(|_| text.clone());
            if !rendered.is_empty() && !rendered.ends_with('\n') {
                rendered.push('\n');
            }
            rendered.into_bytes()
        }
        Some(StreamTemplate::Json(value)) => match render_json(value, values) {
            None => Vec::new(),
            Some(rendered) => {
                let mut bytes = serde_json::to_vec(&rendered).unwrap_or_default();
                bytes.push(b'\n');
                bytes
            }
        },
    }
}

/// Expands a JSON template; `None` means "leave this member out".
fn render_json(value: &Value, values: &Values) -> Option<Value> {
    match value {
        Value::String(text) => {
            if let Some(name) = optional_placeholder(text) {
                let value = values.get(name).unwrap_or_default();
                return (!value.is_empty()).then(|| Value::String(value.to_string()));
            }
            let lookup = |name: &str| values.get(name);
            Some(Value::String(
                expand(text, &lookup).unwrap_or_else(|_| text.clone()),
            ))
        }
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .filter_map(|item| render_json(item, values))
                .collect(),
        )),
        Value::Object(members) => Some(Value::Object(
            members
                .iter()
                .filter_map(|(key, member)| Some((key.clone(), render_json(member, values)?)))
                .collect(),
        )),
        Value::Null | Value::Bool(_) | Value::Number(_) => Some(value.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(reason: &'a str, context: &'a str) -> Values<'a> {
        Values {
            decision: "deny",
            reason,
            context,
            event: "before-tool",
            hook_event_name: "BeforeThing",
        }
    }

    #[test]
    fn expansion_is_single_pass_and_escapes_dollar() {
        let values = values("says $context", "ctx");
        let lookup = |name: &str| values.get(name);
        assert_eq!(
            expand("[$decision] $reason / $$5 / $event", &lookup),
            Ok("[deny] says $context / $5 / before-tool".to_string())
        );
    }

    #[test]
    fn bad_templates_are_refused_at_load() {
        let cases = [
            (r#"{"text":"$nope"}"#, "unknown placeholder $nope"),
            (r#"{"text":"costs $5"}"#, "write `$$` for a literal `$`"),
            (r#"{"json":{"a":"$nope?"}}"#, "unknown placeholder $nope"),
            (r#"{"html":"x"}"#, "unknown variant `html`"),
        ];
        for (stdout, expected) in cases {
            let dialect = format!(
                r#"{{"version":1,"blocking_events":[],
                    "default":{{"allow":{{"stdout":{stdout}}},"deny":{{"exit_code":2}}}}}}"#
            );
            let message = Dialect::parse("x", dialect.as_bytes())
                .err()
                .map(|err| err.to_string())
                .unwrap_or_default();
            assert!(message.contains(expected), "{stdout}: {message}");
        }
    }

    #[test]
    fn optional_members_vanish_when_empty() {
        let template: Value =
            serde_json::json!({"a": "$context?", "b": ["$context?", "x"], "c": 1});
        assert_eq!(
            render_json(&template, &values("r", "")),
            Some(serde_json::json!({"b": ["x"], "c": 1}))
        );
        assert_eq!(
            render_json(&template, &values("r", "ctx")),
            Some(serde_json::json!({"a": "ctx", "b": ["ctx", "x"], "c": 1}))
        );
    }

    #[test]
    fn dialect_names_cannot_leave_the_directory() {
        for name in ["../test", "a/b", "", "Test", "x.json"] {
            assert!(
                matches!(
                    Dialect::load(name, None),
                    Err(Error::InvalidDialectName { .. })
                ),
                "{name:?}"
            );
        }
    }
}
