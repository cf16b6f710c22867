//! `belfry hooks plan`: every target's cells, files and diffs, computed from the canonical
//! file, the adapter data and the live files; nothing is written (spec §9).

use std::path::{Path, PathBuf};

use super::adapters::{AdapterData, Render, Status, TrustRule};
use super::merge::{Created, Merge, PlacedGroup, WantedGroup};
use super::state::TargetState;
use super::{read_optional, render, trust, Context, ProjectError};
use crate::canonical::{compile, CanonicalFile, CanonicalHook};

/// One file a target would change: its text before and after (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl FileChange {
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// A unified diff of the change (empty when nothing changes).
    pub fn diff(&self) -> String {
        if !self.changes() {
            return String::new();
        }
        let before = self.before.as_deref().unwrap_or("");
        let after = self.after.as_deref().unwrap_or("");
        let path = self.path.display().to_string();
        let old = if self.before.is_some() {
            path.clone()
        } else {
            "/dev/null".to_string()
        };
        let new = if self.after.is_some() {
            path
        } else {
            "/dev/null".to_string()
        };
        similar::TextDiff::from_lines(before, after)
            .unified_diff()
            .context_radius(3)
            .header(&old, &new)
            .to_string()
    }
}

/// One hook on one target, as the plan shows it.
#[derive(Clone, Debug)]
pub struct HookPlan {
    pub hook: String,
    pub event: String,
    pub intent: &'static str,
    pub status: Status,
    /// Every feature the hook needs, with its cell's description.
    pub cells: Vec<(String, String)>,
}

/// One target's plan.
#[derive(Clone, Debug)]
pub struct TargetPlan {
    pub target: String,
    pub harness: String,
    pub verified_with: Option<String>,
    pub admitted: Option<String>,
    /// The version the caller detected, and whether the matrix admits it.
    pub detected: Option<(String, bool)>,
    pub hooks: Vec<HookPlan>,
    /// Why this target fails before anything is written.
    pub refusal: Option<String>,
    pub files: Vec<FileChange>,
    /// Trust entries of the managed entries (for a harness with hash trust).
    pub trust: Vec<trust::TrustEntry>,
    /// Why the harness would not run the projected hooks after a plain `apply` (the live
    /// checks of `status`, run on the planned text): the plan never calls a hook active that
    /// the harness will skip.
    pub inert_after_apply: Vec<String>,
    /// The settings merge result apply records.
    pub(super) settings: Option<SettingsResult>,
}

#[derive(Clone, Debug)]
pub(super) struct SettingsResult {
    pub(super) path: PathBuf,
    pub(super) groups: Vec<PlacedGroup>,
    pub(super) created: Created,
    pub(super) delete_file: bool,
}

/// The whole plan.
#[derive(Clone, Debug)]
pub struct Plan {
    pub canonical: CanonicalFile,
    pub targets: Vec<TargetPlan>,
}

/// Computes the plan: reads, writes nothing.
pub fn plan(context: &Context) -> Result<Plan, ProjectError> {
    let (adapters, canonical) = super::load(context)?;
    let previous = super::verify::load(context, &adapters)?.state;
    let mut targets = Vec::new();
    for data in adapters.by_name.values() {
        let mut hooks: Vec<&CanonicalHook> = canonical
            .hooks
            .iter()
            .filter(|hook| hook.targets.contains(&data.name))
            .collect();
        // The guard brief and the project memory travel in hooks belfry adds (issue 45).
        let carriers = crate::session::carriers(&canonical, &hooks, data);
        hooks.extend(carriers.iter());
        let recorded = previous
            .as_ref()
            .and_then(|state| state.targets.get(&data.name));
        if hooks.is_empty() && recorded.is_none() {
            continue;
        }
        targets.push(plan_target(context, data, &hooks, recorded));
    }
    Ok(Plan { canonical, targets })
}

fn plan_target(
    context: &Context,
    data: &AdapterData,
    hooks: &[&CanonicalHook],
    recorded: Option<&TargetState>,
) -> TargetPlan {
    let mut projected: Vec<&CanonicalHook> = Vec::new();
    let mut hook_plans = Vec::new();
    let mut refusal = None;
    for hook in hooks {
        let cells = render::cells(hook, data);
        if refusal.is_none() {
            refusal = cells.enforce_refusal();
        }
        let status = cells.status();
        if status != Status::Unsupported {
            projected.push(hook);
        }
        hook_plans.push(HookPlan {
            hook: hook.id.to_string(),
            event: hook.event.clone(),
            intent: hook.intent.as_str(),
            status,
            cells: cells
                .cells
                .iter()
                .map(|(feature, cell)| (feature.clone(), cell.describe()))
                .collect(),
        });
    }
    let detected = context.harness_versions.get(&data.name).map(|version| {
        let admitted = data
            .matrix
            .admitted
            .as_ref()
            .is_some_and(|range| range.admits(version));
        (version.clone(), admitted)
    });
    let mut plan = TargetPlan {
        target: data.name.clone(),
        harness: data.matrix.harness.clone(),
        verified_with: data.matrix.verified_with.clone(),
        admitted: data.matrix.admitted.as_ref().map(|range| range.describe()),
        detected,
        hooks: hook_plans,
        refusal,
        files: Vec::new(),
        trust: Vec::new(),
        inert_after_apply: Vec::new(),
        settings: None,
    };
    if let Some((version, false)) = &plan.detected {
        if plan.refusal.is_none() && !hooks.is_empty() {
            plan.refusal = Some(format!(
                "{} {version} is outside the admitted range {}",
                data.matrix.harness,
                plan.admitted.as_deref().unwrap_or("(none: not admitted)")
            ));
        }
    }
    let Some(render) = &data.render else {
        if plan.refusal.is_none() && !hooks.is_empty() {
            plan.refusal = Some(format!(
                "{} cannot be projected: {}",
                data.matrix.harness,
                data.matrix.cell("before-tool").describe()
            ));
        }
        return plan;
    };
    if let Err(reason) = build_files(context, data, render, &projected, recorded, &mut plan) {
        if plan.refusal.is_none() {
            plan.refusal = Some(reason);
        }
    }
    if plan.refusal.is_none() && !projected.is_empty() {
        plan.inert_after_apply = predicted_inert(context, data, render, &plan);
    }
    plan
}

/// Plans one target's files: the compiled hooks files, then the harness's own file, generated
/// whole or merged into its settings. `Err` refuses the target, saying why.
fn build_files(
    context: &Context,
    data: &AdapterData,
    render: &Render,
    projected: &[&CanonicalHook],
    recorded: Option<&TargetState>,
    plan: &mut TargetPlan,
) -> Result<(), String> {
    let hooks_dir = context.hooks_dir();
    let Some(target_path) = context.target_path(render) else {
        return Err(format!(
            "the {} path of {} needs an environment variable that is not set",
            context.scope, data.name
        ));
    };
    // Nothing is planned through a link that leads out of the project.
    super::write::real_target(context, &target_path)?;
    plan_compiled_files(context, data, projected, &hooks_dir, plan)?;
    let before = read_optional(&target_path)?;
    match render {
        Render::GeneratedFile { .. } => {
            let after = if projected.is_empty() {
                None
            } else {
                render::generated_file(data, projected, &hooks_dir, &context.belfry_version)
            };
            if before.is_some() || after.is_some() {
                plan.files.push(FileChange {
                    path: target_path,
                    before,
                    after,
                });
            }
        }
        Render::SettingsJson {
            hooks_key,
            fields,
            trust: trust_rule,
            ..
        } => {
            let groups = render::settings_groups(render, &data.name, projected, &hooks_dir);
            if before.is_none() && groups.is_empty() {
                return Ok(());
            }
            let record = recorded.and_then(|state| state.settings.as_ref());
            let created = record
                .map(|settings| settings.created.clone())
                .unwrap_or_default();
            let owned = record
                .map(|settings| settings.groups.clone())
                .unwrap_or_default();
            // A recorded group the user edited is still this projection's: apply refuses the
            // drift without --force and replaces it in place with it.
            let mut merge = Merge::new(
                before.as_deref(),
                hooks_key,
                &data.name,
                &fields.command,
                fields.async_field.as_deref(),
                created,
            )
            .owning(&owned, super::verify::shapes(context, Some(data)), true);
            merge
                .set_groups(&groups)
                .map_err(|err| format!("{}: {err}", target_path.display()))?;
            let placed = merge
                .placed()
                .map_err(|err| format!("{}: {err}", target_path.display()))?;
            if let Some(rule) = trust_rule {
                plan_trust_entries(rule, &target_path, &placed, &groups, plan);
            }
            let delete_file = merge.is_created_and_empty();
            let after = if delete_file {
                None
            } else {
                Some(merge.text.clone())
            };
            plan.settings = Some(SettingsResult {
                path: target_path.clone(),
                groups: placed,
                created: merge.created.clone(),
                delete_file,
            });
            plan.files.push(FileChange {
                path: target_path,
                before,
                after,
            });
        }
    }
    Ok(())
}

/// Plans the compiled hooks files: one per wait mode that has hooks, none for a mode that has
/// none (an earlier one is removed).
fn plan_compiled_files(
    context: &Context,
    data: &AdapterData,
    projected: &[&CanonicalHook],
    hooks_dir: &Path,
    plan: &mut TargetPlan,
) -> Result<(), String> {
    let canonical_path = context.canonical_path();
    let base_dir = canonical_path.parent().unwrap_or(&context.project_dir);
    for is_async in [false, true] {
        let path = render::compiled_path(hooks_dir, &data.name, is_async);
        super::write::real_target(context, &path)?;
        let selected: Vec<&CanonicalHook> = projected
            .iter()
            .copied()
            .filter(|hook| hook.is_async == is_async)
            .collect();
        let after = (!selected.is_empty()).then(|| {
            String::from_utf8_lossy(&compile::to_file_bytes(&compile::hooks_file_at(
                &selected,
                compile::Platform::current(),
                base_dir,
            )))
            .into_owned()
        });
        let before = read_optional(&path)?;
        if before.is_some() || after.is_some() {
            plan.files.push(FileChange {
                path,
                before,
                after,
            });
        }
    }
    Ok(())
}

/// Plans the trust file's entries for the groups placed in the settings file at `target_path`:
/// one for each placed group the trust rule has an entry for.
fn plan_trust_entries(
    rule: &TrustRule,
    target_path: &Path,
    placed: &[PlacedGroup],
    groups: &[WantedGroup],
    plan: &mut TargetPlan,
) {
    let path_text = target_path.display().to_string();
    for found in placed {
        let group = groups
            .iter()
            .find(|g| g.native_event == found.native_event && g.is_async == found.is_async);
        if let Some(group) = group {
            if let Some(entry) = trust::entry(
                rule,
                &path_text,
                &found.native_event,
                found.index,
                &group.value,
            ) {
                plan.trust.push(entry);
            }
        }
    }
}

/// The inert reasons `status` would give right after this plan is applied without `--trust`.
fn predicted_inert(
    context: &Context,
    data: &AdapterData,
    render: &Render,
    plan: &TargetPlan,
) -> Vec<String> {
    if let Render::GeneratedFile { .. } = render {
        // No settings to merge: only the harness's folder trust can keep the file unloaded.
        return super::status::inert_reasons(context, data, &TargetState::default(), None);
    }
    let (Some(settings), Render::SettingsJson { hooks_key, .. }) = (&plan.settings, render) else {
        return Vec::new();
    };
    let after = plan
        .files
        .iter()
        .find(|file| file.path == settings.path)
        .and_then(|file| file.after.clone());
    let target = TargetState {
        settings: Some(super::state::SettingsRecord {
            path: settings.path.display().to_string(),
            hooks_key: hooks_key.clone(),
            groups: settings.groups.clone(),
            created: settings.created.clone(),
        }),
        ..TargetState::default()
    };
    super::status::inert_reasons(context, data, &target, after.as_deref())
}

/// spec §9 and §11: why an agent whose harness is `target` may not depend on the canonical hook
/// `name` of `context`'s scope, if it may not. An agent depends on a hook to have it enforced,
/// so the hook must exist, target the harness, and, when its intent is `enforce`, be exact
/// there: an enforce hook the harness would carry lossily (or not at all) is no guard, and
/// `belfry up` refuses to launch the agent rather than run it unguarded. `Ok(None)`: it may.
pub fn dependency_refusal(
    context: &Context,
    target: &str,
    name: &str,
) -> Result<Option<String>, ProjectError> {
    let (adapters, canonical) = super::load(context)?;
    let path = context.canonical_path();
    let Some(hook) = canonical.hooks.iter().find(|hook| hook.id.name == name) else {
        return Ok(Some(format!(
            "{} declares no hook named {name:?}",
            path.display()
        )));
    };
    if !hook.targets.iter().any(|t| t == target) {
        return Ok(Some(format!(
            "{} does not target {target:?} (its targets: {})",
            hook.id,
            hook.targets.join(", ")
        )));
    }
    let Some(data) = adapters.by_name.get(target) else {
        return Ok(Some(format!("there is no adapter named {target:?}")));
    };
    Ok(render::cells(hook, data).enforce_refusal())
}
