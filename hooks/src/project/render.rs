//! What a target should hold: the cells each hook needs, the hooks that go to the target,
//! and the native entries or generated file that call `belfry dispatch` for them.
//!
//! Every native entry is `belfry dispatch --event <semantic> --native <target> --hooks-file
//! <path>`: `belfry` is resolved on `PATH` (no absolute build path), and the entry depends only
//! on the event, the target and the compiled file's path, so its bytes do not change across
//! installs or upgrades of belfry. That matters to a harness that trusts an entry by its hash
//! and position and silently disables it when either changes (spec §9).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::adapters::{AdapterData, Cell, HandlerFields, Render, Status, TimeoutUnit};
use super::merge::{GroupShape, WantedGroup};
use crate::canonical::compile::Platform;
use crate::canonical::{CanonicalHook, Intent};

/// How long dispatch may wait for stdin before it runs handlers (its own deadline).
const DISPATCH_STDIN_MS: u64 = 5_000;

/// One hook's cells on one target.
#[derive(Clone, Debug)]
pub struct HookCells<'h> {
    pub hook: &'h CanonicalHook,
    /// Feature name → cell, for every feature the hook needs.
    pub cells: Vec<(String, Cell)>,
}

impl HookCells<'_> {
    /// The worst cell's status: what the hook is, as a whole, on this target.
    pub fn status(&self) -> Status {
        self.cells
            .iter()
            .map(|(_, cell)| cell.status.clone())
            .max()
            .unwrap_or(Status::Exact)
    }

    /// Why an `enforce` hook cannot go to this target: its first non-exact cell.
    pub fn enforce_refusal(&self) -> Option<String> {
        if self.hook.intent != Intent::Enforce {
            return None;
        }
        self.cells
            .iter()
            .find(|(_, cell)| cell.status != Status::Exact)
            .map(|(feature, cell)| {
                format!(
                    "{} is intent \"enforce\" but its cell {feature} is {}",
                    self.hook.id,
                    cell.describe()
                )
            })
    }
}

/// The features a hook needs: its event, each effect at that event, async, a Windows argv.
pub fn features(hook: &CanonicalHook) -> Vec<String> {
    let mut features = vec![hook.event.clone()];
    for effect in &hook.effects {
        features.push(format!("{}.{}", hook.event, effect.as_str()));
    }
    if hook.is_async {
        features.push("async".to_string());
    }
    if hook.command_windows.is_some() {
        features.push("command-windows".to_string());
    }
    features
}

pub fn cells<'h>(hook: &'h CanonicalHook, adapter: &AdapterData) -> HookCells<'h> {
    let cells = features(hook)
        .into_iter()
        .map(|feature| {
            let cell = adapter.matrix.cell(&feature);
            (feature, cell)
        })
        .chain(crate::session::extra_cells(hook, adapter))
        .collect();
    HookCells { hook, cells }
}

/// Quotes a path for a POSIX shell when it holds anything but plain path characters.
pub fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'+' | b':' | b',')
        });
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Quotes a path for `cmd.exe` and PowerShell: double quotes when it holds a space.
pub fn windows_quote(text: &str) -> String {
    if text.contains([' ', '&', '(', ')', '^']) {
        format!("\"{text}\"")
    } else {
        text.to_string()
    }
}

/// The native command for `event` on `target`.
pub fn dispatch_command(
    event: &str,
    target: &str,
    hooks_file: &Path,
    platform: Platform,
) -> String {
    let path = hooks_file.display().to_string();
    let quoted = match platform {
        Platform::Unix => shell_quote(&path),
        Platform::Windows => windows_quote(&path),
    };
    format!("belfry dispatch --event {event} --native {target} --hooks-file {quoted}")
}

/// The native timeout for a group: every handler's timeout in turn, plus dispatch's own stdin
/// deadline, in the target's unit, at most what the harness allows for the event.
fn native_timeout(
    hooks: &[&CanonicalHook],
    event: &str,
    unit: TimeoutUnit,
    max_ms: &BTreeMap<String, u64>,
) -> u64 {
    let mut total: u64 = hooks.iter().map(|hook| hook.timeout_ms).sum::<u64>() + DISPATCH_STDIN_MS;
    if let Some(max) = max_ms.get(event) {
        total = total.min(*max);
    }
    match unit {
        TimeoutUnit::Milliseconds => total,
        TimeoutUnit::Seconds => total.div_ceil(1000),
    }
}

/// One handler entry of a settings target.
#[allow(clippy::too_many_arguments)]
fn handler(
    fixed: &Map<String, Value>,
    fields: &HandlerFields,
    command: String,
    command_windows: String,
    timeout: u64,
    is_async: bool,
    name: String,
) -> Value {
    let mut handler = fixed.clone();
    handler.insert(fields.command.clone(), Value::String(command));
    if let Some(field) = &fields.command_windows {
        handler.insert(field.clone(), Value::String(command_windows));
    }
    handler.insert(fields.timeout.clone(), json!(timeout));
    if let Some(field) = &fields.async_field {
        handler.insert(field.clone(), Value::Bool(is_async));
    }
    if let Some(field) = &fields.name {
        handler.insert(field.clone(), Value::String(name));
    }
    Value::Object(handler)
}

/// The compiled hooks-file path of a target and wait mode.
pub fn compiled_path(hooks_dir: &Path, target: &str, is_async: bool) -> std::path::PathBuf {
    if is_async {
        hooks_dir.join(format!("{target}.async.json"))
    } else {
        hooks_dir.join(format!("{target}.json"))
    }
}

/// The managed groups of a settings target for the hooks that go to it (file order).
pub fn settings_groups(
    render: &Render,
    target: &str,
    hooks: &[&CanonicalHook],
    hooks_dir: &Path,
) -> Vec<WantedGroup> {
    let Render::SettingsJson {
        events,
        timeout_unit,
        max_timeout_ms,
        ..
    } = render
    else {
        return Vec::new();
    };
    let mut groups = Vec::new();
    for (semantic, natives) in events {
        for is_async in [false, true] {
            let selected: Vec<&CanonicalHook> = hooks
                .iter()
                .copied()
                .filter(|hook| &hook.event == semantic && hook.is_async == is_async)
                .collect();
            if selected.is_empty() {
                continue;
            }
            let timeout = native_timeout(&selected, semantic, *timeout_unit, max_timeout_ms);
            if let Some(value) = group_value(render, target, semantic, is_async, hooks_dir, timeout)
            {
                for native in natives.names() {
                    groups.push(WantedGroup {
                        native_event: native.clone(),
                        value: value.clone(),
                        is_async,
                    });
                }
            }
        }
    }
    groups
}

/// The group this renderer writes for `semantic` and a wait mode, with `timeout`.
fn group_value(
    render: &Render,
    target: &str,
    semantic: &str,
    is_async: bool,
    hooks_dir: &Path,
    timeout: u64,
) -> Option<Value> {
    let Render::SettingsJson {
        handler: fixed,
        fields,
        ..
    } = render
    else {
        return None;
    };
    let file = compiled_path(hooks_dir, target, is_async);
    Some(json!({
        "hooks": [handler(
            fixed,
            fields,
            dispatch_command(semantic, target, &file, Platform::Unix),
            dispatch_command(semantic, target, &file, Platform::Windows),
            timeout,
            is_async,
            format!("belfry-{semantic}"),
        )]
    }))
}

/// Every group this renderer can write into a settings target of the scope whose compiled
/// files are in `hooks_dir`, one per native event and wait mode, its timeout left open: the
/// only shapes a group must have to be this projection's (issue 39: ownership is never read
/// from a command that merely starts `belfry dispatch`).
pub fn group_shapes(render: &Render, target: &str, hooks_dir: &Path) -> Vec<GroupShape> {
    let Render::SettingsJson { events, fields, .. } = render else {
        return Vec::new();
    };
    let mut shapes = Vec::new();
    for (semantic, natives) in events {
        for is_async in [false, true] {
            let Some(value) = group_value(render, target, semantic, is_async, hooks_dir, 0) else {
                continue;
            };
            let file = compiled_path(hooks_dir, target, is_async);
            for native in natives.names() {
                shapes.push(GroupShape {
                    native_event: native.clone(),
                    is_async,
                    value: value.clone(),
                    timeout_field: Some(fields.timeout.clone()),
                    command: dispatch_command(semantic, target, &file, Platform::Unix),
                });
            }
        }
    }
    shapes
}

/// The generated shim file for a target: the template with its placeholders filled.
pub fn generated_file(
    adapter: &AdapterData,
    hooks: &[&CanonicalHook],
    hooks_dir: &Path,
    belfry_version: &str,
) -> Option<String> {
    let template = adapter.template.as_deref()?;
    let mut events: Vec<&str> = hooks.iter().map(|hook| hook.event.as_str()).collect();
    events.sort_unstable();
    events.dedup();
    let timeout: u64 = hooks.iter().map(|hook| hook.timeout_ms).sum::<u64>() + DISPATCH_STDIN_MS;
    let header = format!(
        "Generated by `belfry hooks apply` (belfry {belfry_version}, adapter data verified with {} {}). \
         Do not edit: edit the canonical hook file and apply again.",
        adapter.matrix.harness,
        adapter.matrix.verified_with.as_deref().unwrap_or("?"),
    );
    let hooks_file = compiled_path(hooks_dir, &adapter.name, false);
    Some(
        template
            .replace("{{GENERATED_HEADER}}", &header)
            .replace(
                "{{HOOKS_FILE_JSON}}",
                &serde_json::to_string(&hooks_file.display().to_string()).unwrap_or_default(),
            )
            .replace(
                "{{EVENTS_JSON}}",
                &serde_json::to_string(&events).unwrap_or_default(),
            )
            .replace("{{TIMEOUT_MS}}", &timeout.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_quote_paths_for_their_shell() {
        let unix = dispatch_command("before-tool", "t", Path::new("/a b/h.json"), Platform::Unix);
        assert_eq!(
            unix,
            "belfry dispatch --event before-tool --native t --hooks-file '/a b/h.json'"
        );
        let windows = dispatch_command(
            "before-tool",
            "t",
            Path::new(r"C:\a b\h.json"),
            Platform::Windows,
        );
        assert_eq!(
            windows,
            r#"belfry dispatch --event before-tool --native t --hooks-file "C:\a b\h.json""#
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
