//! The install state is input, not authority (issue 39): before `plan`, `apply`, `status`,
//! `uninstall` or `doctor` acts on a record, it must be one this belfry could have written for
//! this project and scope. A file record names a path the renderer derives (a compiled hooks
//! file, a generated file); a settings record names the target's own settings file and
//! `hooks` key, groups on the target's native events, and only what apply creates (the
//! `hooks` object, an event's array, and an emptied container's whitespace or comments); a
//! trust record is the exact table apply appends, keyed by this target's settings path; a
//! created directory lies between a derived path and the project, the config directory or
//! `HOME`. A record that fails is dropped, named in [`rejections`], and never acted on. A
//! state inside the project (where belfry kept it before) is never read, only reported.

use std::path::{Path, PathBuf};

use super::adapters::{AdapterData, Adapters, FolderTrust, Render, TrustRule};
use super::render::compiled_path;
use super::state::{State, TargetState};
use super::{jsonc, trust, Context, ProjectError};
use crate::canonical::Scope;

/// The verified install state of a context, and every record that was dropped.
#[derive(Debug, Default)]
pub struct Loaded {
    pub state: Option<State>,
    /// One line per dropped record: the state file, the record, and why.
    pub rejected: Vec<String>,
}

/// Reads this scope's install state and keeps only the records that pass verification.
pub fn load(context: &Context, adapters: &Adapters) -> Result<Loaded, ProjectError> {
    let path = context.state_path();
    let state = State::load(&path).map_err(|reason| ProjectError::State {
        path: path.clone(),
        reason,
    })?;
    let Some(state) = state else {
        return Ok(Loaded::default());
    };
    let (state, rejected) = verify(context, adapters, state, &path);
    Ok(Loaded {
        state: Some(state),
        rejected,
    })
}

/// Every record this scope's commands will not act on: those of its install state that fail
/// verification, and everything in an install state planted (or left by an earlier belfry)
/// inside the project.
pub fn rejections(context: &Context) -> Result<Vec<String>, ProjectError> {
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let mut rejected = load(context, &adapters)?.rejected;
    let Some(legacy) = context.legacy_state_path() else {
        return Ok(rejected);
    };
    if std::fs::symlink_metadata(&legacy).is_err() {
        return Ok(rejected);
    }
    rejected.push(format!(
        "{}: an install state inside the project is never read: belfry keeps it in {}, where a \
         checkout cannot plant one; nothing it records is acted on",
        legacy.display(),
        context.state_path().display()
    ));
    match State::load(&legacy) {
        Ok(Some(mut state)) => {
            // Its project is where it lies (earlier belfry did not record one); each record
            // is checked, so that every one is named with why it would be refused anyway.
            state.project_dir = context.project_dir.display().to_string();
            let (kept, reasons) = verify(context, &adapters, state, &legacy);
            rejected.extend(reasons);
            for name in kept.targets.keys() {
                rejected.push(format!(
                    "{}: targets.{name}: not acted on (it is inside the project)",
                    legacy.display()
                ));
            }
        }
        Ok(None) => {}
        Err(reason) => rejected.push(format!("{}: {reason}", legacy.display())),
    }
    Ok(rejected)
}

/// `state` with every record that fails verification dropped, and a line for each.
pub fn verify(
    context: &Context,
    adapters: &Adapters,
    mut state: State,
    path: &Path,
) -> (State, Vec<String>) {
    let mut rejected = Vec::new();
    let whole = if state.scope != context.scope.as_str() {
        Some(format!(
            "it is a {} state, read for the {} scope",
            state.scope, context.scope
        ))
    } else if context.scope == Scope::Project
        && Path::new(&state.project_dir) != context.project_dir
    {
        Some(format!(
            "it belongs to project {:?}, not {}",
            state.project_dir,
            context.project_dir.display()
        ))
    } else {
        None
    };
    if let Some(reason) = whole {
        for name in state.targets.keys() {
            rejected.push(format!(
                "{}: targets.{name}: {reason}; not acted on",
                path.display()
            ));
        }
        state.targets.clear();
        return (state, rejected);
    }
    // The directories of the state itself: only those between it and the config directory.
    let state_path = context.state_path();
    let allowed: Vec<&Path> = state_path
        .ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(&context.config_home))
        .collect();
    state.created_dirs.retain(|dir| {
        let ok = allowed.contains(&Path::new(dir));
        if !ok {
            rejected.push(format!(
                "{}: created_dirs {dir}: not a directory of belfry's state; not acted on",
                path.display()
            ));
        }
        ok
    });
    let names: Vec<String> = state.targets.keys().cloned().collect();
    for name in names {
        let Some(target) = state.targets.get_mut(&name) else {
            continue;
        };
        let mut reasons = Vec::new();
        if !verify_target(context, adapters, &name, target, &mut reasons) {
            state.targets.remove(&name);
        }
        rejected.extend(
            reasons
                .into_iter()
                .map(|reason| format!("{}: targets.{name}{reason}; not acted on", path.display())),
        );
    }
    (state, rejected)
}

/// Drops the records of `target` that fail; `false` when the target as a whole fails.
///
/// In phases: the target's adapter and renderer, then each kind of record against what apply
/// writes for it (files, settings and hook trust or folder trust, created directories).
fn verify_target(
    context: &Context,
    adapters: &Adapters,
    name: &str,
    target: &mut TargetState,
    reasons: &mut Vec<String>,
) -> bool {
    let Some(data) = adapters.by_name.get(name) else {
        reasons.push(format!(": there is no adapter named {name:?}"));
        return false;
    };
    let Some(render) = &data.render else {
        reasons.push(format!(
            ": {} is not projected by a renderer",
            data.matrix.harness
        ));
        return false;
    };
    let target_path = context.target_path(render);
    let mut derived = verify_files(
        context,
        name,
        render,
        target_path.as_deref(),
        target,
        reasons,
    );
    let (settings_ok, trust_file) = match render {
        Render::SettingsJson {
            hooks_key,
            events,
            trust: rule,
            ..
        } => {
            if let Some(path) = &target_path {
                derived.push(path.clone());
            }
            let native: Vec<&String> = events.values().flat_map(|n| n.names()).collect();
            let settings_ok = verify_settings(
                context,
                name,
                hooks_key,
                &native,
                target_path.as_deref(),
                target,
                reasons,
            );
            let trust_file = rule
                .as_ref()
                .and_then(|rule| context.expand(&rule.file, &data.render_defaults()));
            verify_hook_trust(
                name,
                rule.as_ref(),
                trust_file.as_deref(),
                target_path.as_deref(),
                target,
                reasons,
            );
            (settings_ok, trust_file)
        }
        Render::GeneratedFile { folder_trust, .. } => {
            verify_folder_trust(context, data, name, folder_trust.as_ref(), target, reasons)
        }
    };
    if !settings_ok {
        target.settings = None;
    }
    derived.extend(trust_file);
    verify_created_dirs(context, name, &derived, target, reasons);
    true
}

/// Drops the file records that are not a file apply renders for the target, or whose digest
/// is not one; returns every path apply renders for it so far (the compiled hooks files and
/// a generated file).
fn verify_files(
    context: &Context,
    name: &str,
    render: &Render,
    target_path: Option<&Path>,
    target: &mut TargetState,
    reasons: &mut Vec<String>,
) -> Vec<PathBuf> {
    let hooks_dir = context.hooks_dir();
    let mut derived: Vec<PathBuf> = vec![
        compiled_path(&hooks_dir, name, false),
        compiled_path(&hooks_dir, name, true),
    ];
    if let (Render::GeneratedFile { .. }, Some(path)) = (render, target_path) {
        derived.push(path.to_path_buf());
    }
    target.files.retain(|file| {
        let ok = derived.iter().any(|path| Path::new(&file.path) == path);
        if !ok {
            reasons.push(format!(
                ".files {}: not a file belfry renders for {name} in this {}",
                file.path, context.scope
            ));
        } else if !is_digest(&file.digest) {
            reasons.push(format!(
                ".files {}: {:?} is not a digest",
                file.path, file.digest
            ));
        }
        ok && is_digest(&file.digest)
    });
    derived
}

/// Whether the settings record (if any) is the settings file apply renders for the target,
/// with its hooks key and only groups on the target's native events; a reason when not.
fn verify_settings(
    context: &Context,
    name: &str,
    hooks_key: &str,
    native: &[&String],
    target_path: Option<&Path>,
    target: &TargetState,
    reasons: &mut Vec<String>,
) -> bool {
    match &target.settings {
        None => true,
        Some(settings) => {
            let problem = if target_path != Some(Path::new(&settings.path)) {
                Some(format!(
                    "not the settings file belfry renders for {name} in this {} ({})",
                    context.scope,
                    target_path
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "none".to_string())
                ))
            } else if settings.hooks_key != hooks_key {
                Some(format!(
                    "the hooks key {:?} is not {hooks_key:?}",
                    settings.hooks_key
                ))
            } else {
                settings_problem(settings, hooks_key, native)
            };
            if let Some(problem) = &problem {
                reasons.push(format!(".settings {}: {problem}", settings.path));
            }
            problem.is_none()
        }
    }
}

/// Drops the hook trust records that are not an entry apply appends to the target's trust
/// file (`trust_file`) for its settings file, and every one when the target has no hook trust.
fn verify_hook_trust(
    name: &str,
    rule: Option<&TrustRule>,
    trust_file: Option<&Path>,
    target_path: Option<&Path>,
    target: &mut TargetState,
    reasons: &mut Vec<String>,
) {
    if let Some(rule) = rule {
        let settings_path = target_path
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        target.trust.retain(|record| {
            let problem = if trust_file != Some(Path::new(&record.file)) {
                Some(format!(
                    "not the trust file of {name} ({})",
                    trust_file
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "none".to_string())
                ))
            } else if !trust_key_ok(&record.key, &settings_path, rule) {
                Some(format!(
                    "the key {:?} is not one of {settings_path}'s entries",
                    record.key
                ))
            } else if !is_digest(&record.hash) {
                Some(format!("{:?} is not a digest", record.hash))
            } else if record.appended
                != trust::entry_text(
                    rule,
                    &trust::TrustEntry {
                        key: record.key.clone(),
                        hash: record.hash.clone(),
                    },
                )
            {
                Some("the text it says apply appended is not the entry apply writes".to_string())
            } else {
                None
            };
            if let Some(problem) = &problem {
                reasons.push(format!(
                    ".trust {} {:?}: {problem}",
                    record.file, record.key
                ));
            }
            problem.is_none()
        });
    } else {
        for record in &target.trust {
            reasons.push(format!(
                ".trust {}: {name} has no hook trust to record",
                record.file
            ));
        }
        target.trust.clear();
    }
}

/// Drops the folder trust records of a generated-file target that are not the entry apply
/// writes for this project; returns whether the target has no settings record (it has no
/// settings file) and its folder trust file.
fn verify_folder_trust(
    context: &Context,
    data: &AdapterData,
    name: &str,
    folder_trust: Option<&FolderTrust>,
    target: &mut TargetState,
    reasons: &mut Vec<String>,
) -> (bool, Option<PathBuf>) {
    let ok = target.settings.is_none();
    if let Some(settings) = &target.settings {
        reasons.push(format!(
            ".settings {}: {name} has no settings file",
            settings.path
        ));
    }
    // Only the folder-trust entry apply writes for this project: its file, its key
    // (the project's canonical path) and the level the adapter writes.
    let rule = folder_trust.and_then(|rule| rule.write.as_ref().map(|how| (rule, how)));
    let trust_file = rule.and_then(|(rule, _)| context.expand(&rule.file, &data.render_defaults()));
    let project = context.project_dir.display().to_string();
    target.trust.retain(|record| {
        let problem = match (rule, &record.folder) {
            (None, _) => Some(format!("{name} has no folder trust to record")),
            (_, None) => Some(format!("{name} has no hook trust")),
            (Some(_), Some(_)) if context.scope != Scope::Project => {
                Some("folder trust is recorded for a project only".to_string())
            }
            (Some((_, how)), Some(folder)) => {
                if trust_file.as_deref() != Some(Path::new(&record.file)) {
                    Some(format!("not the trust file of {name}"))
                } else if record.key != project {
                    Some(format!("the key {:?} is not this project", record.key))
                } else if folder.value != how.value {
                    Some(format!("{} is not the level apply writes", folder.value))
                } else if !is_digest(&folder.digest_after) {
                    Some(format!("{:?} is not a digest", folder.digest_after))
                } else {
                    None
                }
            }
        };
        if let Some(problem) = &problem {
            reasons.push(format!(".trust {}: {problem}", record.file));
        }
        problem.is_none()
    });
    (ok, trust_file)
}

/// Drops the created directories that hold none of the paths apply renders for the target
/// (`derived`) or lie outside the roots apply creates directories under.
fn verify_created_dirs(
    context: &Context,
    name: &str,
    derived: &[PathBuf],
    target: &mut TargetState,
    reasons: &mut Vec<String>,
) {
    let mut roots = vec![context.config_home.clone()];
    if context.scope == Scope::Project {
        roots.push(context.project_dir.clone());
    }
    if let Some(home) = context.env.get("HOME").filter(|home| !home.is_empty()) {
        roots.push(PathBuf::from(home));
    }
    target.created_dirs.retain(|dir| {
        let dir_path = Path::new(dir);
        let holds = derived
            .iter()
            .any(|path| path.starts_with(dir_path) && path != dir_path);
        let below = roots
            .iter()
            .any(|root| dir_path.starts_with(root) && dir_path != root);
        if !(holds && below) {
            reasons.push(format!(
                ".created_dirs {dir}: not a directory apply creates for {name}"
            ));
        }
        holds && below
    });
}

/// What is wrong with a settings record whose path and key are right: a group on an event
/// the target does not have, or something recorded as created that apply never creates.
fn settings_problem(
    settings: &super::state::SettingsRecord,
    hooks_key: &str,
    native: &[&String],
) -> Option<String> {
    for group in &settings.groups {
        if !native.contains(&&group.native_event) {
            return Some(format!(
                "{:?} is not one of the target's events",
                group.native_event
            ));
        }
        if !is_digest(&group.digest) {
            return Some(format!("{:?} is not a digest", group.digest));
        }
    }
    let created_path_ok = |path: &[String]| match path {
        [key] => key == hooks_key,
        [key, event] => key == hooks_key && native.contains(&event),
        _ => false,
    };
    for path in &settings.created.members {
        if !created_path_ok(path) {
            return Some(format!(
                "apply never creates the member {:?}",
                path.join(".")
            ));
        }
    }
    for (path, interior) in &settings.created.interiors {
        if !(path.is_empty() || created_path_ok(path)) {
            return Some(format!(
                "apply never fills the container {:?}",
                path.join(".")
            ));
        }
        // What an empty container held: whitespace and comments, nothing a harness reads.
        let empty = jsonc::parse(&format!("[{interior}]"))
            .ok()
            .is_some_and(|node| node.elements().is_empty());
        if !empty {
            return Some(format!(
                "the text recorded for {:?} is not whitespace or comments",
                path.join(".")
            ));
        }
    }
    None
}

/// `<settings path>:<event label>:<group index>:0`, the key apply writes.
fn trust_key_ok(key: &str, settings_path: &str, rule: &super::adapters::TrustRule) -> bool {
    let Some(rest) = key
        .strip_prefix(settings_path)
        .and_then(|r| r.strip_prefix(':'))
    else {
        return false;
    };
    let mut parts = rest.split(':');
    let (Some(label), Some(index), Some("0"), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    rule.event_labels.values().any(|known| known == label)
        && !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
}

/// `sha256:` and 64 lowercase hex digits.
fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The ownership shapes of `target`'s settings groups in this scope.
pub fn shapes(
    context: &Context,
    data: Option<&super::adapters::AdapterData>,
) -> Vec<super::merge::GroupShape> {
    match data.and_then(|data| data.render.as_ref().map(|render| (data, render))) {
        Some((data, render)) => {
            super::render::group_shapes(render, &data.name, &context.hooks_dir())
        }
        None => Vec::new(),
    }
}
