//! `belfry hooks uninstall`: removes exactly the managed artifacts the install state records
//! (each record verified first, [`super::verify`]),
//! so everything else stays byte-identical (spec §9).

use std::path::Path;

use super::adapters::{AdapterData, Adapters, Render};
use super::apply::Settlement;
use super::merge::Merge;
use super::state::TargetState;
use super::status::drift;
use super::{read_optional, remove_file, trust, write_file, Context, ProjectError};

/// What uninstall did per target.
pub fn uninstall(
    context: &Context,
    force: bool,
) -> Result<Vec<(String, Settlement)>, ProjectError> {
    let state_path = context.state_path();
    if std::fs::symlink_metadata(&state_path).is_err() {
        // Nothing was installed: nothing to lock, nothing to create.
        return Ok(Vec::new());
    }
    let lock = super::write::lock(context)?;
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    // Only records that pass verification are acted on; the others stay unread.
    let Some(mut state) = super::verify::load(context, &adapters)?.state else {
        return Ok(Vec::new());
    };
    let mut report = Vec::new();
    // Directories any target's apply created: one target's may hold another's files, so
    // they are tried again once every target is out.
    let mut created_dirs: Vec<String> = state.created_dirs.clone();
    let names: Vec<String> = state.targets.keys().cloned().collect();
    for name in names {
        let Some(target) = state.targets.get(&name).cloned() else {
            continue;
        };
        let drifted = drift(context, &target, adapters.by_name.get(&name));
        if !drifted.is_empty() && !force {
            report.push((
                name,
                Settlement::Failed(format!(
                    "drift: {}; uninstall --force removes it anyway",
                    drifted.join("; ")
                )),
            ));
            continue;
        }
        match uninstall_target(context, &target, adapters.by_name.get(&name), force) {
            Ok(()) => {
                created_dirs.extend(target.created_dirs.iter().cloned());
                state.targets.remove(&name);
                report.push((name, Settlement::Settled));
            }
            Err(reason) => report.push((name, Settlement::Failed(reason))),
        }
    }
    if state.targets.is_empty() {
        if let Err(err) = std::fs::remove_file(&state_path) {
            if err.kind() != std::io::ErrorKind::NotFound {
                return Err(ProjectError::State {
                    path: state_path.clone(),
                    reason: format!("cannot remove it: {err}"),
                });
            }
        }
        lock.remove_if_unused(context);
        created_dirs.extend(lock.created_dirs.iter().cloned());
        super::remove_empty_dirs(&created_dirs);
    } else {
        state
            .save(&state_path)
            .map_err(|reason| ProjectError::State {
                path: state_path.clone(),
                reason,
            })?;
    }
    Ok(report)
}

fn uninstall_target(
    context: &Context,
    target: &TargetState,
    data: Option<&AdapterData>,
    force: bool,
) -> Result<(), String> {
    for file in &target.files {
        remove_file(context, Path::new(&file.path))?;
    }
    if let Some(settings) = &target.settings {
        let path = Path::new(&settings.path);
        if let Some(text) = read_optional(path)? {
            let (command_field, async_field) = match data.and_then(|d| d.render.as_ref()) {
                Some(Render::SettingsJson { fields, .. }) => {
                    (fields.command.clone(), fields.async_field.clone())
                }
                _ => ("command".to_string(), None),
            };
            let target_name = data.map(|d| d.name.clone()).unwrap_or_default();
            let mut merge = Merge::new(
                Some(&text),
                &settings.hooks_key,
                &target_name,
                &command_field,
                async_field.as_deref(),
                settings.created.clone(),
            )
            .owning(
                &settings.groups,
                super::verify::shapes(context, data),
                force,
            );
            merge
                .set_groups(&[])
                .map_err(|err| format!("{}: {err}", settings.path))?;
            if merge.is_created_and_empty() {
                remove_file(context, path)?;
            } else if merge.text != text {
                let mut ignored = Vec::new();
                write_file(context, path, &merge.text, &mut ignored)?;
            }
        }
    }
    for record in &target.trust {
        if let Some(folder) = &record.folder {
            let lock_dir = data
                .and_then(|d| d.render.as_ref())
                .and_then(Render::folder_trust)
                .and_then(|rule| rule.write.as_ref())
                .and_then(|how| how.lock_dir.as_ref())
                .and_then(|dir| {
                    context.expand(dir, &data.map(|d| d.render_defaults()).unwrap_or_default())
                });
            super::folder_trust::undo(context, record, folder, lock_dir)?;
            continue;
        }
        let path = Path::new(&record.file);
        if let Some(text) = read_optional(path)? {
            let new_text = trust::remove_appended(&text, std::slice::from_ref(&record.appended));
            if record.created_file && new_text.trim().is_empty() {
                remove_file(context, path)?;
            } else if new_text != text {
                let mut ignored = Vec::new();
                write_file(context, path, &new_text, &mut ignored)?;
            }
        }
    }
    super::remove_empty_dirs(&target.created_dirs);
    Ok(())
}
