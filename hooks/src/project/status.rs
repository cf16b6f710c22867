//! `belfry hooks status`, and the live reading apply and uninstall share: what became of each
//! recorded managed artifact (same, changed, gone) and whether the harness will run it.

use std::path::Path;

use super::adapters::{AdapterData, Adapters, EntryPoint, JsonDialect, Render};
use super::merge::{self, Created, Located, Merge, MergeError, PlacedGroup};
use super::state::{self, TargetState};
use super::{canonical_digest, folder_trust, jsonc, read_optional, trust, Context, ProjectError};
use crate::canonical::{compile, Scope};

/// What became of one recorded managed group in the live settings text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum GroupNow {
    /// Found with the digest apply recorded, of the shape this scope renders.
    Same(PlacedGroup),
    /// At its recorded place, still running this scope's command, but changed since apply.
    Changed(PlacedGroup),
    /// Not found as a belfry group, but something else sits at its recorded place with a
    /// different digest: edited so that it no longer calls belfry dispatch.
    Replaced,
    Gone,
}

/// The live state of each recorded group of a settings target. A group is looked up by what
/// apply wrote (its digest and this scope's shape, [`Merge::locate`]), not by its recorded
/// index alone, so a group the user added before it is not taken for it, and neither is a
/// user's own group that merely calls `belfry dispatch`.
pub(super) fn groups_now(
    context: &Context,
    settings: &state::SettingsRecord,
    data: Option<&AdapterData>,
    text: &str,
) -> Vec<(PlacedGroup, GroupNow)> {
    let (command_field, async_field) = match data.and_then(|d| d.render.as_ref()) {
        Some(Render::SettingsJson { fields, .. }) => {
            (fields.command.clone(), fields.async_field.clone())
        }
        _ => ("command".to_string(), None),
    };
    let target = data.map(|d| d.name.clone()).unwrap_or_default();
    let merge = Merge::new(
        Some(text),
        &settings.hooks_key,
        &target,
        &command_field,
        async_field.as_deref(),
        Created::default(),
    )
    .owning(&[], super::verify::shapes(context, data), false);
    let root = jsonc::parse(text).ok();
    let mut taken: Vec<PlacedGroup> = Vec::new();
    settings
        .groups
        .iter()
        .map(|recorded| {
            let now = match merge.locate(recorded, &taken) {
                Some(Located::Same(now)) => {
                    taken.push(now.clone());
                    GroupNow::Same(now)
                }
                Some(Located::Changed(now)) => {
                    taken.push(now.clone());
                    GroupNow::Changed(now)
                }
                None => {
                    let at_index = root
                        .as_ref()
                        .and_then(|root| root.member(&settings.hooks_key))
                        .and_then(|hooks| hooks.member(&recorded.native_event))
                        .and_then(|array| array.elements().get(recorded.index))
                        .and_then(|node| node.value(text));
                    match at_index {
                        Some(value) if canonical_digest(&value) != recorded.digest => {
                            GroupNow::Replaced
                        }
                        _ => GroupNow::Gone,
                    }
                }
            };
            (recorded.clone(), now)
        })
        .collect()
}

/// Drift: a managed artifact recorded by the last apply that no longer has its digest.
pub(super) fn drift(
    context: &Context,
    state: &TargetState,
    data: Option<&AdapterData>,
) -> Vec<String> {
    let mut drifted = Vec::new();
    for file in &state.files {
        match read_optional(Path::new(&file.path)) {
            Ok(Some(text)) if compile::sha256_hex(text.as_bytes()) != file.digest => {
                drifted.push(format!("{} changed since apply", file.path));
            }
            Ok(_) => {}
            Err(reason) => drifted.push(reason),
        }
    }
    if let Some(settings) = &state.settings {
        if let Ok(Some(text)) = read_optional(Path::new(&settings.path)) {
            for (recorded, now) in groups_now(context, settings, data, &text) {
                match now {
                    GroupNow::Changed(_) => drifted.push(format!(
                        "{}: the managed {} entry changed since apply",
                        settings.path, recorded.native_event
                    )),
                    GroupNow::Replaced => drifted.push(format!(
                        "{}: the managed {} entry was edited so that it no longer calls belfry dispatch",
                        settings.path, recorded.native_event
                    )),
                    GroupNow::Same(_) | GroupNow::Gone => {}
                }
            }
        }
    }
    drifted
}

/// A target's live state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetStatus {
    Installed,
    /// Managed artifacts changed since apply.
    Drifted(Vec<String>),
    /// Managed artifacts are gone.
    Missing(Vec<String>),
    /// Installed, but the harness will not run it.
    Inert(Vec<String>),
    /// The last apply failed for this target.
    Failed(String),
    /// Intact and live, but the harness version it runs under is not one the adapter's matrix
    /// admits, or no version was detected: nothing says its cells hold there (issue 41 item 6).
    Unverified(String),
}

/// Reads every recorded target back.
pub fn status(context: &Context) -> Result<Vec<(String, TargetStatus)>, ProjectError> {
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let Some(state) = super::verify::load(context, &adapters)?.state else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, target) in &state.targets {
        out.push((
            name.clone(),
            target_status(context, adapters.by_name.get(name), target),
        ));
    }
    Ok(out)
}

pub(super) fn target_status(
    context: &Context,
    data: Option<&AdapterData>,
    target: &TargetState,
) -> TargetStatus {
    if let Some(reason) = target.settlement.strip_prefix("failed: ") {
        return TargetStatus::Failed(reason.to_string());
    }
    let mut missing = Vec::new();
    for file in &target.files {
        if !Path::new(&file.path).exists() {
            missing.push(format!("{} is gone", file.path));
        }
    }
    let settings_text = match &target.settings {
        Some(settings) => match read_optional(Path::new(&settings.path)) {
            Ok(text) => text,
            // A file that cannot be read (a FIFO, a directory) holds no entry belfry can
            // vouch for: said as it is, never taken for a file that is gone.
            Err(reason) => return TargetStatus::Drifted(vec![reason]),
        },
        None => None,
    };
    if let Some(settings) = &target.settings {
        match &settings_text {
            None => missing.push(format!("{} is gone", settings.path)),
            Some(text) if merge::check(text, &settings.hooks_key).is_err() => {
                let problem = match merge::check(text, &settings.hooks_key) {
                    Err(MergeError::Syntax(err)) => format!(
                        "{err}: the file no longer parses, so no managed entry can be found in it"
                    ),
                    Err(err) => format!(" {err}"),
                    Ok(()) => String::new(),
                };
                return TargetStatus::Drifted(vec![format!("{}:{problem}", settings.path)]);
            }
            Some(text) => {
                for (recorded, now) in groups_now(context, settings, data, text) {
                    if now == GroupNow::Gone {
                        missing.push(format!(
                            "{}: the managed {} entry is gone",
                            settings.path, recorded.native_event
                        ));
                    }
                }
            }
        }
    }
    if !missing.is_empty() {
        return TargetStatus::Missing(missing);
    }
    let drifted = drift(context, target, data);
    if !drifted.is_empty() {
        return TargetStatus::Drifted(drifted);
    }
    let inert = data
        .map(|data| inert_reasons(context, data, target, settings_text.as_deref()))
        .unwrap_or_default();
    if !inert.is_empty() {
        return TargetStatus::Inert(inert);
    }
    if let Some(reason) = data.and_then(|data| unverified_reason(context, data, target)) {
        return TargetStatus::Unverified(reason);
    }
    TargetStatus::Installed
}

/// Why an intact projection is unverified: the harness version detected now (the one that
/// runs the hooks) is outside the matrix's admitted range, or none was detected. `None` when
/// the detected version is admitted, and for an adapter with no admitted range (apply never
/// writes one).
pub(super) fn unverified_reason(
    context: &Context,
    data: &AdapterData,
    target: &TargetState,
) -> Option<String> {
    let matrix = &data.matrix;
    let range = matrix.admitted.as_ref()?;
    let harness = &matrix.harness;
    let verified = matrix.verified_with.as_deref().unwrap_or(range.min());
    match context.harness_versions.get(&data.name) {
        Some(version) if range.admits(version) => None,
        Some(version) => Some(format!(
            "{harness} {version} runs here, outside the admitted range {} (verified with \
             {verified}), so what its hooks do is unverified; install {harness} {verified}, or \
             a belfry whose matrix admits {version}",
            range.describe()
        )),
        None => {
            let applied = target
                .harness_detected
                .as_deref()
                .map(|version| format!(" (apply saw {harness} {version})"))
                .unwrap_or_default();
            Some(format!(
                "no {harness} version was detected{applied}: `{}` answered none, or \
                 BELFRY_HOOKS_DETECT=0 skipped asking, so the version its hooks run under is \
                 unverified (admitted {}, verified with {verified})",
                matrix.detect.join(" "),
                range.describe()
            ))
        }
    }
}

pub(super) fn inert_reasons(
    context: &Context,
    data: &AdapterData,
    target: &TargetState,
    settings_text: Option<&str>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let defaults = data.render_defaults();
    if let Some(Render::GeneratedFile {
        entry_points,
        paths,
        ..
    }) = &data.render
    {
        let generated = Path::new(&paths.project).file_name();
        let files: Vec<&str> = target
            .files
            .iter()
            .map(|file| file.path.as_str())
            .filter(|path| generated.is_some() && Path::new(path).file_name() == generated)
            .collect();
        // A generated file has no settings of its own: it is inert where the harness version
        // cannot run it (an entry point it lacks) or its folder trust keeps it from loading.
        reasons.extend(missing_entry_points(context, data, &files, entry_points));
        reasons.extend(trust_reasons(context, data, target, settings_text));
        return reasons;
    }
    let Some(Render::SettingsJson {
        inert,
        folder_trust,
        project_flag,
        json,
        ..
    }) = &data.render
    else {
        return reasons;
    };
    if let (Some(settings), Some(text)) = (&target.settings, settings_text) {
        if let Err(problem) = readable_as(text, *json) {
            reasons.push(format!(
                "{}: the harness reads this file as {} and cannot read it ({problem}), so none of its hooks run; remove the comments or trailing commas",
                settings.path,
                match json {
                    JsonDialect::Strict => "strict JSON",
                    JsonDialect::Comments => "JSON with comments but no trailing commas",
                    JsonDialect::Jsonc => "JSON with comments",
                }
            ));
        }
    }
    // A folder trust `apply --trust` can write is the harness's trust: said by trust_reasons.
    if let (Some(rule), Scope::Project) = (
        folder_trust.as_ref().filter(|rule| rule.write.is_none()),
        context.scope,
    ) {
        reasons.extend(folder_reason(context, data, rule));
    }
    if let (Some(rule), Scope::Project) = (project_flag, context.scope) {
        match project_flag_set(context, rule, &defaults) {
            Ok(true) => {}
            Ok(false) => reasons.push(rule.reason.clone()),
            Err(reason) => reasons.push(reason),
        }
    }
    for rule in inert {
        let mut files: Vec<(String, Option<String>)> = Vec::new();
        if let Some(settings) = &target.settings {
            files.push((settings.path.clone(), settings_text.map(str::to_string)));
        }
        for extra in &rule.paths {
            if let Some(path) = context.expand(extra, &defaults) {
                match read_optional(&path) {
                    Ok(text) => files.push((path.display().to_string(), text)),
                    Err(reason) => reasons.push(reason),
                }
            }
        }
        for (path, text) in files {
            let value = text
                .as_deref()
                .and_then(|text| jsonc::parse(text).ok().and_then(|root| root.value(text)));
            if value.as_ref().and_then(|v| v.pointer(&rule.pointer)) == Some(&rule.equals) {
                reasons.push(format!("{}: {}", path, rule.reason));
            }
        }
    }
    reasons.extend(trust_reasons(context, data, target, settings_text));
    reasons
}

/// A generated file the detected harness version loads but does not run: it lacks that
/// version's entry point (a file an older belfry wrote for another major). The harness gives
/// no sign of it, so `status` must.
fn missing_entry_points(
    context: &Context,
    data: &AdapterData,
    files: &[&str],
    entry_points: &[EntryPoint],
) -> Vec<String> {
    let Some(version) = context.harness_versions.get(&data.name) else {
        return Vec::new();
    };
    let mut reasons = Vec::new();
    for entry in entry_points.iter().filter(|entry| entry.covers(version)) {
        for path in files {
            match read_optional(Path::new(path)) {
                Ok(Some(text)) if !text.contains(&entry.contains) => reasons.push(format!(
                    "{path}: {} {version} loads this file but runs none of its hooks: {}; `belfry \
                     hooks apply` rewrites it",
                    data.matrix.harness, entry.reason
                )),
                Ok(_) => {}
                Err(reason) => reasons.push(reason),
            }
        }
    }
    reasons
}

/// The part of [`inert_reasons`] that is the harness's hook trust: the project it does not
/// trust, and each managed entry it holds no hash for or a hash that no longer matches.
pub(super) fn trust_reasons(
    context: &Context,
    data: &AdapterData,
    target: &TargetState,
    settings_text: Option<&str>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if let (Some(rule), Scope::Project) = (
        data.render
            .as_ref()
            .and_then(Render::folder_trust)
            .filter(|rule| rule.write.is_some()),
        context.scope,
    ) {
        reasons.extend(folder_reason(context, data, rule));
    }
    let Some(Render::SettingsJson {
        trust: trust_rule,
        hooks_key,
        ..
    }) = &data.render
    else {
        return reasons;
    };
    let defaults = data.render_defaults();
    if let (Some(rule), Some(settings)) = (trust_rule, &target.settings) {
        let trust_file = context.expand(&rule.file, &defaults);
        let text = match trust_file.as_deref().map(read_optional) {
            Some(Err(reason)) => {
                reasons.push(reason);
                return reasons;
            }
            Some(Ok(text)) => text.unwrap_or_default(),
            None => String::new(),
        };
        if let (Err(problem), Some(path)) = (trust::parse(&text), &trust_file) {
            // No entry of a file that is not TOML can be trusted, nor written by apply.
            reasons.push(format!("{}: {problem}", path.display()));
            return reasons;
        }
        if let (Some(project_trust), Scope::Project) = (&rule.project_trust, context.scope) {
            let project = context.project_dir.display().to_string();
            if !trust::table_field_equals(
                &text,
                &project_trust.table,
                &project,
                &project_trust.field,
                &project_trust.equals,
            ) {
                reasons.push(project_trust.reason.clone());
            }
        }
        let text_now = settings_text.unwrap_or_default();
        let root = jsonc::parse(text_now).ok();
        for (_, now) in groups_now(context, settings, Some(data), text_now) {
            // Trust is keyed by position: the entry's current place is what the harness checks.
            let GroupNow::Same(placed) = now else {
                continue;
            };
            let value = root
                .as_ref()
                .and_then(|root| root.member(hooks_key))
                .and_then(|hooks| hooks.member(&placed.native_event))
                .and_then(|array| array.elements().get(placed.index))
                .and_then(|node| node.value(text_now));
            let Some(value) = value else { continue };
            let Some(entry) = trust::entry(
                rule,
                &settings.path,
                &placed.native_event,
                placed.index,
                &value,
            ) else {
                continue;
            };
            match trust::recorded_hash(rule, &text, &entry.key) {
                None => reasons.push(format!(
                    "{} {}: {}",
                    placed.native_event, entry.key, rule.untrusted
                )),
                Some(hash) if hash != entry.hash => reasons.push(format!(
                    "{} {}: {}",
                    placed.native_event, entry.key, rule.modified
                )),
                Some(_) => {}
            }
        }
    }
    reasons
}

/// Why the harness will not load the project's hooks for want of folder trust, if it will
/// not: only for a harness version that asks (`from_version`).
fn folder_reason(
    context: &Context,
    data: &AdapterData,
    rule: &super::adapters::FolderTrust,
) -> Option<String> {
    let version = context.harness_versions.get(&data.name).map(String::as_str);
    if !folder_trust::applies(rule, version) {
        return None;
    }
    match folder_trust::trusted(context, rule, &data.render_defaults()) {
        Ok(true) => None,
        Ok(false) => Some(rule.reason.clone()),
        Err(reason) => Some(reason),
    }
}

/// Whether the project's (or, if the rule says so, an ancestor's) entry has the flag.
fn project_flag_set(
    context: &Context,
    rule: &super::adapters::ProjectFlag,
    defaults: &std::collections::BTreeMap<String, String>,
) -> Result<bool, String> {
    let Some(value) = folder_trust::read_value(context.expand(&rule.file, defaults).as_deref())?
    else {
        return Ok(false);
    };
    let Some(map) = value
        .pointer(&rule.map_pointer)
        .and_then(|map| map.as_object())
    else {
        return Ok(false);
    };
    let mut folder = Some(context.project_dir.as_path());
    while let Some(dir) = folder {
        let key = dir.display().to_string();
        if map.get(&key).and_then(|entry| entry.get(&rule.field)) == Some(&rule.equals) {
            return Ok(true);
        }
        if !rule.ancestors {
            break;
        }
        folder = dir.parent();
    }
    Ok(false)
}

/// Whether a harness that reads JSON as `dialect` can read `text`.
fn readable_as(text: &str, dialect: JsonDialect) -> Result<(), String> {
    match dialect {
        JsonDialect::Strict => serde_json::from_str::<serde_json::Value>(text)
            .map(|_| ())
            .map_err(|err| err.to_string()),
        JsonDialect::Comments => jsonc::parse_value(text, jsonc::Leniency::CommentsOnly)
            .map(|_| ())
            .map_err(|err| err.to_string()),
        JsonDialect::Jsonc => jsonc::parse_value(text, jsonc::Leniency::CommentsAndTrailingCommas)
            .map(|_| ())
            .map_err(|err| err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A folder-trust rule of the kind a harness with trust off by default has: the trust file
    /// is read only when the settings file turns folder trust on.
    fn rule(enabled_by: bool) -> super::super::adapters::FolderTrust {
        let mut rule = serde_json::json!({
            "file": "$HOME/trust.json",
            "trusted": ["TRUST"],
            "reason": "not trusted",
        });
        if enabled_by {
            rule["enabled_by"] = serde_json::json!({
                "paths": ["$HOME/settings.json"],
                "pointer": "/trust/enabled",
                "equals": true,
                "reason": "folder trust is on",
            });
        }
        serde_json::from_value(rule).unwrap_or_else(|err| panic!("{err}"))
    }

    fn context(root: &Path) -> Context {
        Context {
            scope: Scope::Project,
            project_dir: root.join("project"),
            config_home: root.join("config"),
            env: BTreeMap::from([("HOME".to_string(), root.join("home").display().to_string())]),
            belfry_version: "test".to_string(),
            harness_versions: BTreeMap::new(),
        }
    }

    fn trusted(context: &Context, rule: &super::super::adapters::FolderTrust) -> bool {
        super::super::folder_trust::trusted(context, rule, &BTreeMap::new())
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// `enabled_by`: a folder is trusted unless a setting turns folder trust on; then only a
    /// trust entry trusts it.
    #[test]
    fn folder_trust_off_by_default_trusts_every_folder_until_a_setting_turns_it_on() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|err| panic!("{err}"));
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap_or_else(|err| panic!("{err}"));
        let context = context(&root);
        // Without enabled_by, no trust file means an untrusted folder.
        assert!(!trusted(&context, &rule(false)));
        // With it: no settings file, or the setting absent or off, trusts every folder.
        let off_by_default = rule(true);
        assert!(trusted(&context, &off_by_default), "no settings file");
        let settings = home.join("settings.json");
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).unwrap_or_else(|err| panic!("{err}"));
        };
        write(&settings, "{\"trust\": {\"enabled\": false}}");
        assert!(trusted(&context, &off_by_default), "the setting off");
        write(&settings, "{\"other\": 1}");
        assert!(trusted(&context, &off_by_default), "the setting absent");
        // Turned on, the trust file decides.
        write(&settings, "{\n  // on\n  \"trust\": {\"enabled\": true}\n}");
        assert!(!trusted(&context, &off_by_default), "on, no trust file");
        let trust = home.join("trust.json");
        write(&trust, "{\"/elsewhere\": \"TRUST\"}");
        assert!(
            !trusted(&context, &off_by_default),
            "on, another folder trusted"
        );
        let entry = serde_json::json!({ context.project_dir.display().to_string(): "TRUST" });
        write(&trust, &entry.to_string());
        assert!(trusted(&context, &off_by_default), "on, the folder trusted");
    }
}
