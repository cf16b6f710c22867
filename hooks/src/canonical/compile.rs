//! Compiling canonical hooks into the JSON hooks file `belfry dispatch` reads (spec §8,
//! format in `crate::handlers`).
//!
//! One compiled file per target and per wait mode: a native entry names the file of its own
//! target (`--hooks-file`), so a hook that targets one harness never runs under another, and
//! a hook selected by a native tool name is only in its one target's file. Each canonical
//! hook becomes one group whose matcher is its selector ([`super::Selector::matcher`]).
//! The file is written for the platform `belfry hooks` runs on: `command-windows` replaces
//! `command` on Windows, since the hooks file holds one argv per handler.

use std::path::Path;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::CanonicalHook;

/// Which argv of a hook to compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    Unix,
    Windows,
}

impl Platform {
    /// The platform this binary was built for.
    pub fn current() -> Platform {
        if cfg!(windows) {
            Platform::Windows
        } else {
            Platform::Unix
        }
    }
}

/// The hooks-file JSON for `hooks` (already filtered to one target and wait mode), in order.
pub fn hooks_file(hooks: &[&CanonicalHook], platform: Platform) -> Value {
    hooks_file_at(hooks, platform, Path::new(""))
}

/// [`hooks_file`], with a relative program path (`scripts/guard.sh`, one with a `/` but not
/// absolute) made absolute against `base_dir`, the canonical file's directory: dispatch runs
/// in whatever directory the harness runs hooks in, and a guard must not stop being found
/// (and so stop denying) because the agent started in a subdirectory. A bare name (`guard`)
/// is left for `PATH`.
pub fn hooks_file_at(hooks: &[&CanonicalHook], platform: Platform, base_dir: &Path) -> Value {
    let mut events: Map<String, Value> = Map::new();
    let mut file = Map::new();
    for hook in hooks {
        if let Some(carrier) = &hook.session {
            crate::session::compile_carrier(carrier, &mut file);
            push_group(
                &mut events,
                &hook.event,
                json!({ "matcher": "*", "handlers": [], "deliver": carrier.deliver }),
            );
            continue;
        }
        let argv = match (platform, &hook.command_windows) {
            (Platform::Windows, Some(windows)) => windows,
            _ => &hook.command,
        };
        let mut argv = argv.clone();
        if let Some(program) = argv.first_mut() {
            let path = Path::new(program.as_str());
            let has_separator = program.contains('/') || program.contains('\\');
            if has_separator && path.is_relative() && !base_dir.as_os_str().is_empty() {
                *program = base_dir.join(path).display().to_string();
            }
        }
        let mut group = json!({
            "matcher": hook.selector.matcher(),
            "handlers": [{
                "argv": argv,
                "timeout_ms": hook.timeout_ms,
                "intent": hook.intent.as_str(),
                "failure": hook.failure.as_str(),
            }],
        });
        if let (Some(once), Value::Object(members)) = (hook.once, &mut group) {
            members.insert(
                "once".to_owned(),
                json!({ "name": format!("{}/{}", hook.id.scope, hook.id.name), "scope": once.as_str() }),
            );
        }
        push_group(&mut events, &hook.event, group);
    }
    file.insert(
        "version".to_owned(),
        json!(crate::handlers::HOOKS_FILE_VERSION),
    );
    file.insert("events".to_owned(), Value::Object(events));
    Value::Object(file)
}

fn push_group(events: &mut Map<String, Value>, event: &str, group: Value) {
    let groups = events
        .entry(event.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(groups) = groups {
        groups.push(group);
    }
}

/// Pretty JSON with a final newline: the bytes written and digested.
pub fn to_file_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(7 + digest.len() * 2);
    hex.push_str("sha256:");
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}
