//! The hooks file: its JSON schema, loading, validation and the security check.
//!
//! The file is compiled from the canonical hook file by `belfry hooks` (spec §9) and read by
//! every dispatch, so it is plain JSON with a version number and nothing to evaluate:
//!
//! ```json
//! {"version": 1,
//!  "events": {"before-tool": [{"matcher": "shell|edit",
//!                              "handlers": [{"argv": ["/usr/local/bin/guard", "--strict"],
//!                                            "timeout_ms": 5000,
//!                                            "intent": "enforce",
//!                                            "failure": "closed"}]}]}}
//! ```
//!
//! Unknown fields are errors, not ignored: a misspelt `"failure"` must not silently turn a
//! fail-closed guard into a fail-open one. `docs/hooks.md` is the full reference.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Error;
use crate::matcher::{Matcher, ToolRef};
use crate::permissions::{read_checked, AllowedOwners, CheckedReadError};

/// The only hooks-file format version this crate reads.
pub const HOOKS_FILE_VERSION: u32 = 1;

/// A handler's timeout when the file gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// The longest timeout a handler may ask for (ten minutes); a longer one is a typo.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// What a handler is for (spec §9). Dispatch runs every intent the same way, so that an explicit
/// refusal is always a deny (spec §8); `belfry hooks` uses the intent to decide which native
/// projections must be exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Intent {
    Observe,
    #[default]
    Enrich,
    Enforce,
}

/// What a handler's crash, timeout, spawn failure or unexpected exit code means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureMode {
    /// The failure is noted in the reason and the chain goes on (spec §8 fail-open).
    #[default]
    Open,
    /// The failure is a deny: the guard could not vouch for the action.
    Closed,
}

/// One program to run for a hook.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handler {
    /// Program and arguments, executed directly: no shell interprets them (spec §12).
    pub argv: Vec<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub intent: Intent,
    #[serde(default)]
    pub failure: FailureMode,
}

impl Handler {
    /// The argv as one line, for reasons and notes.
    pub fn display_name(&self) -> String {
        self.argv.join(" ")
    }
}

/// Handlers that run, in order, for hooks whose tool name the matcher selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerGroup {
    pub matcher: Matcher,
    pub handlers: Vec<Handler>,
    /// A read-once guard's declaration (`crate::once`); `None` runs on every match.
    pub once: Option<crate::once::OnceSpec>,
    /// What belfry itself delivers when this group selects a hook (`crate::session`): a group
    /// `belfry hooks` adds with no handlers.
    pub deliver: Vec<String>,
}

/// A loaded and validated hooks file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HooksFile {
    /// Semantic event name (`before-tool`, …) to its groups, in file order.
    pub events: BTreeMap<String, Vec<HandlerGroup>>,
    /// The guard brief `belfry hooks` rendered for this target (`crate::brief`), told to the
    /// model as session-start context.
    pub brief: Option<String>,
    /// The project memory (`crate::memory`).
    pub memory: Option<crate::memory::CompiledMemory>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHooksFile {
    version: u32,
    #[serde(default)]
    events: BTreeMap<String, Vec<RawGroup>>,
    #[serde(default)]
    brief: Option<String>,
    #[serde(default)]
    memory: Option<crate::memory::CompiledMemory>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    #[serde(default)]
    matcher: Option<String>,
    handlers: Vec<Handler>,
    #[serde(default)]
    once: Option<crate::once::OnceSpec>,
    #[serde(default)]
    deliver: Vec<String>,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

impl HooksFile {
    /// Opens, checks and parses a hooks file. The ownership and mode check runs on the opened
    /// file before a byte is parsed: an insecure file is not run (spec §8).
    pub fn load(path: &Path) -> Result<HooksFile, Error> {
        let bytes = match read_checked(path, AllowedOwners::UserOrRoot) {
            Ok(bytes) => bytes,
            Err(CheckedReadError::Io(source)) => {
                return Err(Error::HooksFileRead {
                    path: path.to_path_buf(),
                    source,
                })
            }
            Err(CheckedReadError::Insecure(insecure)) => {
                return Err(Error::HooksFileInsecure {
                    path: path.to_path_buf(),
                    problem: insecure.problem,
                    fix: insecure.fix,
                })
            }
        };
        HooksFile::parse(path, &bytes)
    }

    /// Parses and validates hooks-file bytes; `path` only names the file in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<HooksFile, Error> {
        let invalid = |reason: String| Error::HooksFileInvalid {
            path: path.to_path_buf(),
            reason,
        };
        let mut raw: RawHooksFile =
            serde_json::from_slice(bytes).map_err(|err| invalid(err.to_string()))?;
        if raw.version != HOOKS_FILE_VERSION {
            return Err(invalid(format!(
                "version {} is not supported (this belfry reads version {HOOKS_FILE_VERSION})",
                raw.version
            )));
        }
        let mut events = BTreeMap::new();
        for (event, raw_groups) in std::mem::take(&mut raw.events) {
            let groups = validate_groups(&event, raw_groups).map_err(invalid)?;
            events.insert(event, groups);
        }
        if let Some(memory) = &raw.memory {
            memory
                .validate()
                .map_err(|reason| invalid(format!("memory: {reason}")))?;
        }
        Ok(HooksFile {
            events,
            brief: raw.brief.filter(|brief| !brief.trim().is_empty()),
            memory: raw.memory,
        })
    }

    /// The groups that select a hook about `tool` at `event`, in file order.
    pub fn groups_for<'a>(
        &'a self,
        event: &str,
        tool: ToolRef<'a>,
    ) -> impl Iterator<Item = &'a HandlerGroup> + 'a {
        self.events
            .get(event)
            .into_iter()
            .flatten()
            .filter(move |group| group.matcher.matches(tool))
    }

    /// The handlers to run for `event` and a hook about `tool`, in file order.
    pub fn handlers_for<'a>(
        &'a self,
        event: &str,
        tool: ToolRef<'a>,
    ) -> impl Iterator<Item = &'a Handler> + 'a {
        self.events
            .get(event)
            .into_iter()
            .flatten()
            .filter(move |group| group.matcher.matches(tool))
            .flat_map(|group| group.handlers.iter())
    }
}

fn validate_groups(event: &str, raw_groups: Vec<RawGroup>) -> Result<Vec<HandlerGroup>, String> {
    if event.is_empty() {
        return Err("an event name is empty".to_string());
    }
    let mut groups = Vec::with_capacity(raw_groups.len());
    for (group_index, raw) in raw_groups.into_iter().enumerate() {
        let at = format!("events.{event:?}[{group_index}]");
        let matcher = Matcher::parse(raw.matcher.as_deref().unwrap_or(""))
            .map_err(|err| format!("{at}.matcher: {err}"))?;
        for (handler_index, handler) in raw.handlers.iter().enumerate() {
            validate_handler(handler)
                .map_err(|reason| format!("{at}.handlers[{handler_index}]: {reason}"))?;
        }
        if let Some(once) = &raw.once {
            if once.name.is_empty() {
                return Err(format!("{at}.once.name is empty"));
            }
        }
        for what in &raw.deliver {
            let known = [
                crate::session::DELIVER_BRIEF,
                crate::session::DELIVER_MEMORY,
                crate::session::DELIVER_MEMORY_APPEND,
                crate::session::DELIVER_ONCE_RESET,
            ];
            if !known.contains(&what.as_str()) {
                return Err(format!(
                    "{at}.deliver: {what:?} is not one of: {}",
                    known.join(", ")
                ));
            }
        }
        groups.push(HandlerGroup {
            matcher,
            handlers: raw.handlers,
            once: raw.once,
            deliver: raw.deliver,
        });
    }
    Ok(groups)
}

fn validate_handler(handler: &Handler) -> Result<(), String> {
    match handler.argv.first() {
        None => return Err("argv is empty; give the program and its arguments".to_string()),
        Some(program) if program.is_empty() => {
            return Err("argv[0] is empty; give the program to run".to_string())
        }
        Some(_) => {}
    }
    if handler.argv.iter().any(|arg| arg.contains('\0')) {
        return Err("an argv element contains a NUL byte".to_string());
    }
    if handler.timeout_ms == 0 || handler.timeout_ms > MAX_TIMEOUT_MS {
        return Err(format!(
            "timeout_ms {} is out of range 1..={MAX_TIMEOUT_MS}",
            handler.timeout_ms
        ));
    }
    Ok(())
}

/// Where the hooks file comes from: the explicit path, else `$BELFRY_HOOKS_FILE`. An empty
/// variable counts as unset.
pub(crate) fn resolve_hooks_file(
    explicit: Option<&Path>,
    env_value: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_path_buf());
    }
    env_value
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HooksFile, Error> {
        HooksFile::parse(Path::new("/t/hooks.json"), text.as_bytes())
    }

    #[test]
    fn defaults_fill_optional_handler_fields() {
        let file =
            parse(r#"{"version":1,"events":{"before-tool":[{"handlers":[{"argv":["g"]}]}]}}"#)
                .unwrap_or_else(|err| panic!("{err}"));
        let handler = &file.events["before-tool"][0].handlers[0];
        assert_eq!(handler.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(handler.intent, Intent::Enrich);
        assert_eq!(handler.failure, FailureMode::Open);
        assert_eq!(file.events["before-tool"][0].matcher, Matcher::All);
    }

    #[test]
    fn handlers_for_keeps_file_order_across_matching_groups() {
        let file = parse(
            r#"{"version":1,"events":{"before-tool":[
                {"matcher":"shell","handlers":[{"argv":["a"]},{"argv":["b"]}]},
                {"matcher":"edit","handlers":[{"argv":["c"]}]},
                {"matcher":"*","handlers":[{"argv":["d"]}]}]}}"#,
        )
        .unwrap_or_else(|err| panic!("{err}"));
        let names = |class: Option<&'static str>| -> Vec<String> {
            let tool = ToolRef {
                native_name: class,
                class,
            };
            file.handlers_for("before-tool", tool)
                .map(Handler::display_name)
                .collect()
        };
        assert_eq!(names(Some("shell")), ["a", "b", "d"]);
        assert_eq!(names(Some("edit")), ["c", "d"]);
        assert_eq!(names(None), ["d"]);
        let shell = ToolRef {
            native_name: Some("shell"),
            class: Some("shell"),
        };
        assert_eq!(file.handlers_for("after-tool", shell).count(), 0);
    }

    #[test]
    fn invalid_files_name_the_problem_and_where() {
        let cases = [
            (r#"{"version":2,"events":{}}"#, "version 2 is not supported"),
            (r#"{"events":{}}"#, "missing field `version`"),
            (
                r#"{"version":1,"events":{"x":[{"handlers":[{"argv":[]}]}]}}"#,
                "events.\"x\"[0].handlers[0]: argv is empty",
            ),
            (
                r#"{"version":1,"events":{"x":[{"handlers":[{"argv":["g"],"timeout_ms":0}]}]}}"#,
                "timeout_ms 0 is out of range",
            ),
            (
                r#"{"version":1,"events":{"x":[{"handlers":[{"argv":["g"],"failur":"closed"}]}]}}"#,
                "unknown field `failur`",
            ),
            (
                r#"{"version":1,"events":{"x":[{"handlers":[{"argv":["g"],"failure":"shut"}]}]}}"#,
                "unknown variant `shut`",
            ),
            (
                r#"{"version":1,"events":{"x":[{"matcher":"a||b","handlers":[]}]}}"#,
                "events.\"x\"[0].matcher",
            ),
            ("not json", "expected ident"),
        ];
        for (text, expected) in cases {
            let message = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(expected), "{text}: {message}");
            assert!(message.contains("/t/hooks.json"), "{text}: {message}");
        }
    }

    #[test]
    fn explicit_path_wins_and_empty_env_is_unset() {
        let explicit = Path::new("/a.json");
        assert_eq!(
            resolve_hooks_file(Some(explicit), Some("/b.json".into())),
            Some(PathBuf::from("/a.json"))
        );
        assert_eq!(
            resolve_hooks_file(None, Some("/b.json".into())),
            Some(PathBuf::from("/b.json"))
        );
        assert_eq!(resolve_hooks_file(None, Some("".into())), None);
        assert_eq!(resolve_hooks_file(None, None), None);
    }
}
