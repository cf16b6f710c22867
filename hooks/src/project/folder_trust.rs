//! Folder trust kept by a harness in a JSON map of folder path → level (spec §9: a hook the
//! harness will skip is inert, never reported active). The rule is data ([`FolderTrust`]): the
//! longest folder that holds the project decides, a settings value may turn trust off or trust
//! what no entry decides, and a harness version before `from_version` never asks.
//!
//! `apply --trust` records the project's canonical path with the rule's level, the way the
//! harness records the user's own decision (keys sorted, two-space indent, a final newline),
//! under the harness's own lock directory, and remembers what was there before: uninstall puts
//! the file back byte for byte while it is as apply left it, and otherwise puts back only the
//! key's previous level, leaving every decision made since.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::adapters::{at_least, FolderTrust, FolderTrustWrite};
use super::state::{FolderRecord, TrustRecord};
use super::{read_optional, remove_file, write_file, Context};
use crate::canonical::compile;

/// How long apply waits for the harness to release its lock on the trust file.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Whether the rule applies to the harness version that runs here: a version before
/// `from_version` loads the project without asking. An undetected version is taken to ask
/// (the stricter reading: never report a hook active that may be skipped).
pub fn applies(rule: &FolderTrust, version: Option<&str>) -> bool {
    match (&rule.from_version, version) {
        (Some(from), Some(version)) => at_least(version, from).unwrap_or(true),
        _ => true,
    }
}

/// Whether the harness trusts the project folder: an environment override, folder trust
/// switched off in settings, the longest matching entry of its trust file, or the fallback
/// setting when no entry decides.
pub fn trusted(
    context: &Context,
    rule: &FolderTrust,
    defaults: &BTreeMap<String, String>,
) -> Result<bool, String> {
    if rule
        .env_trusted
        .iter()
        .any(|(name, value)| context.env.get(name) == Some(value))
    {
        return Ok(true);
    }
    if let Some(disabled) = &rule.disabled_by {
        if setting_equals(context, disabled, defaults)? {
            return Ok(true);
        }
    }
    // Where folder trust is off unless a setting turns it on, every folder is trusted until
    // one does (an absent setting included).
    if let Some(enabled) = &rule.enabled_by {
        if !setting_equals(context, enabled, defaults)? {
            return Ok(true);
        }
    }
    let folders = match read_value(context.expand(&rule.file, defaults).as_deref())? {
        Some(Value::Object(folders)) => folders,
        _ => Map::new(),
    };
    let mut best: Option<(usize, &Value)> = None;
    for (folder, level) in &folders {
        // A null level is no decision (the harness writes it to withdraw one).
        if level.is_null() {
            continue;
        }
        let path = Path::new(folder);
        let effective = if rule.parent.contains(level) {
            path.parent().unwrap_or(path)
        } else {
            path
        };
        if context.project_dir.starts_with(effective)
            && best.is_none_or(|(length, _)| folder.len() > length)
        {
            best = Some((folder.len(), level));
        }
    }
    match best {
        Some((_, level)) => Ok(rule.trusted.contains(level)),
        None => match &rule.fallback {
            Some(fallback) => setting_equals(context, fallback, defaults),
            None => Ok(false),
        },
    }
}

/// Whether any of the rule's settings files holds its value at its pointer.
fn setting_equals(
    context: &Context,
    rule: &super::adapters::InertRule,
    defaults: &BTreeMap<String, String>,
) -> Result<bool, String> {
    for extra in &rule.paths {
        let value = read_value(context.expand(extra, defaults).as_deref())?;
        if value.as_ref().and_then(|v| v.pointer(&rule.pointer)) == Some(&rule.equals) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The value of a JSON(C) file the harness reads, `None` when there is no such file or it
/// does not parse (the harness then reads nothing from it either); an error when it cannot be
/// read at all (a FIFO, a directory), naming it.
pub fn read_value(path: Option<&Path>) -> Result<Option<Value>, String> {
    let Some(path) = path else {
        return Ok(None);
    };
    Ok(read_optional(path)?.and_then(|text| {
        super::jsonc::parse_value(&text, super::jsonc::Leniency::CommentsAndTrailingCommas).ok()
    }))
}

/// The text the harness itself writes for `folders`: keys sorted, two-space indent, newline.
fn harness_text(folders: &Map<String, Value>) -> String {
    let sorted: BTreeMap<&String, &Value> = folders.iter().collect();
    let mut text = serde_json::to_string_pretty(&sorted).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

/// The harness's lock on its trust file, held while belfry reads and writes it.
struct Lock(Option<std::path::PathBuf>);

impl Lock {
    fn take(path: Option<std::path::PathBuf>) -> Result<Lock, String> {
        let Some(path) = path else {
            return Ok(Lock(None));
        };
        // No directory to lock in: the harness has never written there, and making one here
        // would leave it behind (write_file records the directories it creates for the file).
        if path.parent().is_some_and(|parent| !parent.is_dir()) {
            return Ok(Lock(None));
        }
        let start = Instant::now();
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Lock(Some(path))),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    if start.elapsed() >= LOCK_WAIT {
                        return Err(format!(
                            "{} is held (the harness is writing its trust file, or a lock \
                             was left behind): try again, or remove it if no harness runs",
                            path.display()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(err) => return Err(format!("cannot create {}: {err}", path.display())),
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_dir(path);
        }
    }
}

/// Records the project as trusted (apply `--trust`). `None` when the harness already trusts
/// it: nothing is written and nothing recorded.
pub fn write(
    context: &Context,
    rule: &FolderTrust,
    how: &FolderTrustWrite,
    defaults: &BTreeMap<String, String>,
    created_dirs: &mut Vec<String>,
) -> Result<Option<TrustRecord>, String> {
    let file = context.expand(&rule.file, defaults).ok_or_else(|| {
        format!(
            "the trust file {} needs a variable that is not set",
            rule.file
        )
    })?;
    let _lock = Lock::take(
        how.lock_dir
            .as_ref()
            .and_then(|dir| context.expand(dir, defaults)),
    )?;
    if trusted(context, rule, defaults)? {
        return Ok(None);
    }
    let before_text = read_optional(&file)?;
    let mut folders = match &before_text {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(folders)) => folders,
            Ok(_) => {
                return Err(format!(
                    "{}: not a JSON object of folder → trust, so no entry can be added",
                    file.display()
                ))
            }
            Err(err) => {
                return Err(format!(
                    "{}: not valid JSON ({err}), so no entry can be added",
                    file.display()
                ))
            }
        },
    };
    let key = context.project_dir.display().to_string();
    let before = folders.insert(key.clone(), how.value.clone());
    let text = harness_text(&folders);
    write_file(context, &file, &text, created_dirs)?;
    Ok(Some(TrustRecord {
        file: file.display().to_string(),
        key,
        hash: String::new(),
        appended: String::new(),
        created_file: before_text.is_none(),
        folder: Some(FolderRecord {
            value: how.value.clone(),
            before,
            text_before: before_text,
            digest_after: compile::sha256_hex(text.as_bytes()),
        }),
    }))
}

/// Takes out what [`write`] recorded: the whole file as it was while nothing else changed it,
/// else only the project's key back to its level before (a decision the user made since, a
/// different level at the key, stays).
pub fn undo(
    context: &Context,
    record: &TrustRecord,
    folder: &FolderRecord,
    lock_dir: Option<std::path::PathBuf>,
) -> Result<(), String> {
    let path = Path::new(&record.file);
    let _lock = Lock::take(lock_dir)?;
    let Some(text) = read_optional(path)? else {
        return Ok(());
    };
    let mut ignored = Vec::new();
    if compile::sha256_hex(text.as_bytes()) == folder.digest_after {
        return match &folder.text_before {
            Some(before) => write_file(context, path, before, &mut ignored),
            None => remove_file(context, path),
        };
    }
    let Ok(Value::Object(mut folders)) = serde_json::from_str::<Value>(&text) else {
        // Not JSON any more: the harness reads no decision from it; nothing of belfry's to
        // take out that can be found.
        return Ok(());
    };
    if folders.get(&record.key) != Some(&folder.value) {
        return Ok(());
    }
    match &folder.before {
        Some(level) => folders.insert(record.key.clone(), level.clone()),
        None => folders.remove(&record.key),
    };
    if folders.is_empty() && record.created_file {
        return remove_file(context, path);
    }
    write_file(context, path, &harness_text(&folders), &mut ignored)
}
