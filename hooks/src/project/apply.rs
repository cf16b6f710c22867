//! `belfry hooks apply`: writes the plan target by target, after every check that must fail a
//! target has run (spec §9: an enforce hook on a non-exact cell, drift without --force).

use std::collections::BTreeMap;

use super::adapters::{AdapterData, Adapters, Render, TrustRule};
use super::plan::{plan, Plan, TargetPlan};
use super::state::{self, State, TargetState, TrustRecord};
use super::status::drift;
use super::{read_optional, remove_file, trust, write_file, Context, ProjectError};
use crate::canonical::{compile, Scope};

/// What one target came to in an apply or uninstall.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// Written (or already as planned).
    Settled,
    /// Refused before any write, or failed while writing.
    Failed(String),
}

/// Options of [`apply`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ApplyOptions {
    /// Overwrite managed artifacts that changed since the last apply.
    pub force: bool,
    /// Write the trust entries of exactly the entries written.
    pub trust: bool,
}

/// The outcome of an apply: per target, in plan order.
#[derive(Clone, Debug)]
pub struct ApplyReport {
    pub plan: Plan,
    pub settled: Vec<(String, Settlement)>,
}

impl ApplyReport {
    pub fn all_settled(&self) -> bool {
        self.settled
            .iter()
            .all(|(_, settlement)| *settlement == Settlement::Settled)
    }
}

/// Writes the plan, target by target. Every target that must fail fails before any write
/// (spec §9); a write that fails fails its target and the others still settle.
pub fn apply(context: &Context, options: ApplyOptions) -> Result<ApplyReport, ProjectError> {
    // One apply or uninstall of this project and scope at a time, from the reading of the
    // state and the live files to the writing of both.
    let lock = super::write::lock(context)?;
    let result = apply_locked(context, options, &lock);
    // An apply that wrote no state leaves no lock file either.
    lock.remove_if_unused(context);
    if result.is_err() && std::fs::symlink_metadata(context.state_path()).is_err() {
        super::remove_empty_dirs(&lock.created_dirs);
    }
    result
}

fn apply_locked(
    context: &Context,
    options: ApplyOptions,
    lock: &super::write::StateLock,
) -> Result<ApplyReport, ProjectError> {
    let plan = plan(context)?;
    let state_path = context.state_path();
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    // Only records that pass verification are carried over: a dropped one is never acted on.
    let previous = super::verify::load(context, &adapters)?
        .state
        .unwrap_or_default();
    let mut state = State {
        version: state::STATE_VERSION,
        scope: context.scope.as_str().to_string(),
        belfry_version: context.belfry_version.clone(),
        canonical_path: plan.canonical.path.display().to_string(),
        canonical_sha256: plan.canonical.sha256.clone(),
        project_dir: match context.scope {
            Scope::Project => context.project_dir.display().to_string(),
            Scope::User => String::new(),
        },
        created_dirs: previous
            .created_dirs
            .iter()
            .chain(&lock.created_dirs)
            .cloned()
            .collect(),
        targets: previous.targets.clone(),
    };
    let mut settled = Vec::new();
    for target in &plan.targets {
        let recorded = previous.targets.get(&target.target);
        let mut refusal = target.refusal.clone();
        if refusal.is_none() && !options.force {
            if let Some(recorded) = recorded {
                let drifted = drift(context, recorded, adapters.by_name.get(&target.target));
                if !drifted.is_empty() {
                    refusal = Some(format!(
                        "drift: {}; apply --force overwrites it",
                        drifted.join("; ")
                    ));
                }
            }
        }
        let outcome = match refusal {
            Some(reason) => Settlement::Failed(reason),
            None => {
                let data = adapters.by_name.get(&target.target);
                match write_target(context, target, data, recorded, options) {
                    Ok(target_state) => {
                        if target_state.is_empty() {
                            // Nothing of the target is left: the directories apply made for
                            // it go too, when nothing else is in them.
                            super::remove_empty_dirs(&target_state.created_dirs);
                            state.targets.remove(&target.target);
                        } else {
                            state.targets.insert(target.target.clone(), target_state);
                        }
                        Settlement::Settled
                    }
                    Err(reason) => Settlement::Failed(reason),
                }
            }
        };
        if let Settlement::Failed(reason) = &outcome {
            // A target that fails on its first apply is recorded too, with nothing managed,
            // so `status` says `failed` (and exits non-zero) instead of finding nothing.
            let data = adapters.by_name.get(&target.target);
            let entry = state
                .targets
                .entry(target.target.clone())
                .or_insert_with(|| TargetState {
                    adapter_data: data.map(|d| d.digest()).unwrap_or_default(),
                    harness_verified_with: target.verified_with.clone(),
                    harness_detected: target.detected.as_ref().map(|(v, _)| v.clone()),
                    ..TargetState::default()
                });
            entry.settlement = format!("failed: {reason}");
        }
        settled.push((target.target.clone(), outcome));
    }
    state
        .save(&state_path)
        .map_err(|reason| ProjectError::State {
            path: state_path.clone(),
            reason,
        })?;
    Ok(ApplyReport { plan, settled })
}

/// Writes one target's projection: its files, then its settings record, the trust file's
/// entries and the folder trust; returns what the state records of it.
fn write_target(
    context: &Context,
    target: &TargetPlan,
    data: Option<&AdapterData>,
    recorded: Option<&TargetState>,
    options: ApplyOptions,
) -> Result<TargetState, String> {
    let mut created_dirs = recorded.map(|r| r.created_dirs.clone()).unwrap_or_default();
    let files = write_files(context, target, &mut created_dirs)?;
    let settings = target
        .settings
        .as_ref()
        .map(|settings| state::SettingsRecord {
            path: settings.path.display().to_string(),
            hooks_key: match data.and_then(|d| d.render.as_ref()) {
                Some(Render::SettingsJson { hooks_key, .. }) => hooks_key.clone(),
                _ => String::new(),
            },
            groups: settings.groups.clone(),
            created: settings.created.clone(),
        });
    let settings = settings.filter(|s| {
        !(s.groups.is_empty() && target.settings.as_ref().is_some_and(|r| r.delete_file))
    });
    let mut trust_records: Vec<TrustRecord> = recorded.map(|r| r.trust.clone()).unwrap_or_default();
    let rule = data.and_then(|d| match &d.render {
        Some(Render::SettingsJson {
            trust: Some(rule), ..
        }) => Some(rule),
        _ => None,
    });
    if let Some(rule) = rule {
        let defaults = data.map(|d| d.render_defaults()).unwrap_or_default();
        write_trust_file(
            context,
            target,
            rule,
            &defaults,
            options,
            &mut trust_records,
            &mut created_dirs,
        )?;
    }
    // The folder trust the harness asks for before it loads the project's hooks: `--trust`
    // records the project the way the harness records the user's own decision. A record of an
    // earlier apply stays until uninstall.
    let folder_rule = data
        .and_then(|d| d.render.as_ref())
        .and_then(|render| render.folder_trust())
        .and_then(|rule| rule.write.as_ref().map(|how| (rule, how)));
    if let (Some((rule, how)), true, Scope::Project) = (folder_rule, options.trust, context.scope) {
        let recorded = trust_records.iter().any(|record| record.folder.is_some());
        if !recorded {
            let defaults = data.map(|d| d.render_defaults()).unwrap_or_default();
            if let Some(record) =
                super::folder_trust::write(context, rule, how, &defaults, &mut created_dirs)?
            {
                trust_records.push(record);
            }
        }
    }
    Ok(TargetState {
        adapter_data: data.map(|d| d.digest()).unwrap_or_default(),
        harness_verified_with: target.verified_with.clone(),
        harness_detected: target.detected.as_ref().map(|(version, _)| version.clone()),
        settlement: "settled".to_string(),
        files,
        settings,
        trust: trust_records,
        created_dirs,
    })
}

/// Writes the target's files (or removes the ones it no longer has) and returns the records of
/// the files it owns; the settings file is recorded apart, by the entries it holds.
fn write_files(
    context: &Context,
    target: &TargetPlan,
    created_dirs: &mut Vec<String>,
) -> Result<Vec<state::FileRecord>, String> {
    let mut files = Vec::new();
    for change in &target.files {
        let is_settings = target
            .settings
            .as_ref()
            .is_some_and(|settings| settings.path == change.path);
        match &change.after {
            Some(text) => {
                if change.changes() {
                    write_file(context, &change.path, text, created_dirs)?;
                }
                if !is_settings {
                    files.push(state::FileRecord {
                        path: change.path.display().to_string(),
                        digest: compile::sha256_hex(text.as_bytes()),
                    });
                }
            }
            None => remove_file(context, &change.path)?,
        }
    }
    Ok(files)
}

/// Brings the trust file up to date with the entries the target wants: the entries this
/// projection appended before and no longer wants come out, and with `--trust` the missing
/// ones are appended; `trust_records` is kept in step.
fn write_trust_file(
    context: &Context,
    target: &TargetPlan,
    rule: &TrustRule,
    defaults: &BTreeMap<String, String>,
    options: ApplyOptions,
    trust_records: &mut Vec<TrustRecord>,
    created_dirs: &mut Vec<String>,
) -> Result<(), String> {
    let trust_file = context.expand(&rule.file, defaults).ok_or_else(|| {
        format!(
            "the trust file {} needs a variable that is not set",
            rule.file
        )
    })?;
    let original = read_optional(&trust_file)?;
    let file_existed = original.is_some();
    let text = original.clone().unwrap_or_default();
    // Entries this projection wrote before and no longer wants come out first.
    let stale: Vec<String> = trust_records
        .iter()
        .filter(|record| {
            !target
                .trust
                .iter()
                .any(|entry| entry.key == record.key && entry.hash == record.hash)
        })
        .map(|record| record.appended.clone())
        .collect();
    let mut text = trust::remove_appended(&text, &stale);
    trust_records.retain(|record| {
        target
            .trust
            .iter()
            .any(|entry| entry.key == record.key && entry.hash == record.hash)
    });
    if options.trust {
        let missing: Vec<trust::TrustEntry> = target
            .trust
            .iter()
            .filter(|entry| !trust_records.iter().any(|record| record.key == entry.key))
            .cloned()
            .collect();
        let (new_text, appended) = trust::write_entries(rule, &text, &missing);
        text = new_text;
        for (entry, appended) in missing.iter().zip(appended) {
            trust_records.push(TrustRecord {
                file: trust_file.display().to_string(),
                key: entry.key.clone(),
                hash: entry.hash.clone(),
                appended,
                created_file: !file_existed
                    || trust_records.iter().any(|record| record.created_file),
                folder: None,
            });
        }
    }
    if text != original.unwrap_or_default() {
        write_file(context, &trust_file, &text, created_dirs)?;
    }
    Ok(())
}
