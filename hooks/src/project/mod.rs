//! `belfry hooks`: the canonical hook file projected into each harness's native config, with
//! an honest account of what each harness will do (SPEC §9).
//!
//! The lifecycle is four calls on one [`Context`] (which scope, which directories, which
//! environment): [`plan`] computes every target's cells, files and diffs and writes nothing;
//! [`apply`] writes what the plan says, target by target, after checking every target that
//! must fail (an `enforce` hook on a non-exact cell, drift without `force`) before any write;
//! [`status`] reads the live files back and says installed / drifted / missing / inert; and
//! [`uninstall`] removes only what the install state records. The state is
//! `.belfry/hooks-state.json` ([`state::State`]).
//!
//! Provider knowledge arrives as data ([`adapters`]): the matrix says what each semantic
//! feature is on a harness, the renderer's shape says where the native file is and how an
//! entry looks. [`render`] builds the entries, [`merge`] edits settings files byte-exactly
//! with the spans [`jsonc`] finds, and [`trust`] handles a harness's hash-based hook trust.

pub mod adapters;
pub mod jsonc;
pub mod merge;
pub mod render;
pub mod state;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{self, compile, CanonicalFile, CanonicalHook, Scope};
use adapters::{AdapterData, Adapters, Render, Status};
use merge::{Created, Merge, PlacedGroup};
use state::{State, TargetState, TrustRecord};

/// `sha256:` of a value's canonical JSON: object keys sorted at every level, no whitespace.
pub fn canonical_digest(value: &Value) -> String {
    compile::sha256_hex(canonical_json(value).as_bytes())
}

/// A value's canonical JSON text (keys sorted, compact), independent of map ordering.
pub fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|key| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(key).unwrap_or_default(),
                        canonical_json(&map[key])
                    )
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", items.join(","))
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Where a projection runs: the scope, its directories and the environment it expands.
#[derive(Clone, Debug)]
pub struct Context {
    pub scope: Scope,
    /// The project directory (canonical), the base of project-scope paths.
    pub project_dir: PathBuf,
    /// `$XDG_CONFIG_HOME` (else `~/.config`): where the user's canonical file and state live.
    pub config_home: PathBuf,
    /// Environment for `$VAR` in the adapters' user-scope paths.
    pub env: BTreeMap<String, String>,
    /// The belfry version written into generated files and the state.
    pub belfry_version: String,
    /// Harness versions detected by the caller (adapter name → version).
    pub harness_versions: BTreeMap<String, String>,
}

impl Context {
    /// The canonical file of this scope.
    pub fn canonical_path(&self) -> PathBuf {
        canonical::canonical_path(self.scope, &self.project_dir, &self.config_home)
    }

    /// Where state and compiled hooks files live: `.belfry/` in the project, or
    /// `$XDG_CONFIG_HOME/belfry/` for the user.
    pub fn state_dir(&self) -> PathBuf {
        match self.scope {
            Scope::Project => self.project_dir.join(".belfry"),
            Scope::User => self.config_home.join("belfry"),
        }
    }

    pub fn hooks_dir(&self) -> PathBuf {
        self.state_dir().join("hooks")
    }

    pub fn state_path(&self) -> PathBuf {
        self.state_dir().join("hooks-state.json")
    }

    /// Expands `$NAME` from the environment, then from `defaults`; a path that stays
    /// relative is taken from the project directory.
    pub fn expand(&self, template: &str, defaults: &BTreeMap<String, String>) -> Option<PathBuf> {
        let expanded = expand_vars(template, &self.env, defaults, 0)?;
        let path = PathBuf::from(expanded);
        Some(if path.is_absolute() {
            path
        } else {
            self.project_dir.join(path)
        })
    }

    /// The native file of a target in this scope.
    pub fn target_path(&self, render: &Render) -> Option<PathBuf> {
        let paths = render.paths();
        match self.scope {
            Scope::Project => Some(self.project_dir.join(&paths.project)),
            Scope::User => self.expand(&paths.user, &paths.defaults),
        }
    }
}

fn expand_vars(
    text: &str,
    env: &BTreeMap<String, String>,
    defaults: &BTreeMap<String, String>,
    depth: usize,
) -> Option<String> {
    if depth > 4 {
        return None;
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..len];
        let value = match env.get(name).filter(|value| !value.is_empty()) {
            Some(value) => value.clone(),
            None => expand_vars(defaults.get(name)?, env, defaults, depth + 1)?,
        };
        out.push_str(&value);
        rest = &after[len..];
    }
    out.push_str(rest);
    Some(out)
}

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
    /// Internal: the settings merge result to record.
    settings: Option<SettingsResult>,
}

#[derive(Clone, Debug)]
struct SettingsResult {
    path: PathBuf,
    groups: Vec<PlacedGroup>,
    created: Created,
    delete_file: bool,
}

/// The whole plan.
#[derive(Clone, Debug)]
pub struct Plan {
    pub canonical: CanonicalFile,
    pub targets: Vec<TargetPlan>,
}

/// A problem that stops the lifecycle as a whole (not one target).
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error(transparent)]
    Canonical(#[from] canonical::CanonicalError),
    #[error("adapter data: {0}")]
    AdapterData(String),
    #[error("install state {path}: {reason}")]
    State { path: PathBuf, reason: String },
}

/// Loads the adapters and the scope's canonical file.
pub fn load(context: &Context) -> Result<(Adapters, CanonicalFile), ProjectError> {
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let canonical = canonical::load(&context.canonical_path(), context.scope, &adapters.names())?;
    Ok((adapters, canonical))
}

/// Computes the plan: reads, writes nothing.
pub fn plan(context: &Context) -> Result<Plan, ProjectError> {
    let (adapters, canonical) = load(context)?;
    let previous = State::load(&context.state_path()).map_err(|reason| ProjectError::State {
        path: context.state_path(),
        reason,
    })?;
    let mut targets = Vec::new();
    for data in adapters.by_name.values() {
        let hooks: Vec<&CanonicalHook> = canonical
            .hooks
            .iter()
            .filter(|hook| hook.targets.contains(&data.name))
            .collect();
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
    plan
}

fn read_optional(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(format!("cannot read {}: {err}", path.display())),
    }
}

fn build_files(
    context: &Context,
    data: &AdapterData,
    render: &Render,
    projected: &[&CanonicalHook],
    recorded: Option<&TargetState>,
    plan: &mut TargetPlan,
) -> Result<(), String> {
    let hooks_dir = context.hooks_dir();
    let canonical_path = context.canonical_path();
    let base_dir = canonical_path.parent().unwrap_or(&context.project_dir);
    let Some(target_path) = context.target_path(render) else {
        return Err(format!(
            "the {} path of {} needs an environment variable that is not set",
            context.scope, data.name
        ));
    };
    // The compiled hooks files: one per wait mode that has hooks.
    for is_async in [false, true] {
        let path = render::compiled_path(&hooks_dir, &data.name, is_async);
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
            let created = recorded
                .and_then(|state| state.settings.as_ref())
                .map(|settings| settings.created.clone())
                .unwrap_or_default();
            let mut merge = Merge::new(
                before.as_deref(),
                hooks_key,
                &data.name,
                &fields.command,
                fields.async_field.as_deref(),
                created,
            );
            merge
                .set_groups(&groups)
                .map_err(|err| format!("{}: {err}", target_path.display()))?;
            let placed = merge
                .placed()
                .map_err(|err| format!("{}: {err}", target_path.display()))?;
            if let Some(rule) = trust_rule {
                let path_text = target_path.display().to_string();
                for found in &placed {
                    let group = groups.iter().find(|g| {
                        g.native_event == found.native_event && g.is_async == found.is_async
                    });
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

/// What became of one recorded managed group in the live settings text.
#[derive(Clone, Debug, PartialEq, Eq)]
enum GroupNow {
    /// Found (by its belfry command, same wait mode) with the digest apply recorded.
    Same(PlacedGroup),
    /// Found, but changed since apply.
    Changed(PlacedGroup),
    /// Not found as a belfry group, but something else sits at its recorded place with a
    /// different digest: edited so that it no longer calls belfry dispatch.
    Replaced,
    Gone,
}

/// The live state of each recorded group of a settings target. A group is looked up by what
/// it is (a belfry group of that event and wait mode), not by its recorded index, so a group
/// the user added before it is not taken for it.
fn groups_now(
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
    );
    let placed = merge.placed().unwrap_or_default();
    let root = jsonc::parse(text).ok();
    settings
        .groups
        .iter()
        .map(|recorded| {
            let found = placed.iter().find(|now| {
                now.native_event == recorded.native_event && now.is_async == recorded.is_async
            });
            let now = match found {
                Some(now) if now.digest == recorded.digest => GroupNow::Same(now.clone()),
                Some(now) => GroupNow::Changed(now.clone()),
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
fn drift(state: &TargetState, data: Option<&AdapterData>) -> Vec<String> {
    let mut drifted = Vec::new();
    for file in &state.files {
        if let Ok(Some(text)) = read_optional(Path::new(&file.path)) {
            if compile::sha256_hex(text.as_bytes()) != file.digest {
                drifted.push(format!("{} changed since apply", file.path));
            }
        }
    }
    if let Some(settings) = &state.settings {
        if let Ok(Some(text)) = read_optional(Path::new(&settings.path)) {
            for (recorded, now) in groups_now(settings, data, &text) {
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

/// Writes the plan, target by target. Every target that must fail fails before any write
/// (SPEC §9); a write that fails fails its target and the others still settle.
pub fn apply(context: &Context, options: ApplyOptions) -> Result<ApplyReport, ProjectError> {
    let plan = plan(context)?;
    let state_path = context.state_path();
    let previous = State::load(&state_path)
        .map_err(|reason| ProjectError::State {
            path: state_path.clone(),
            reason,
        })?
        .unwrap_or_default();
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let mut state = State {
        version: state::STATE_VERSION,
        scope: context.scope.as_str().to_string(),
        belfry_version: context.belfry_version.clone(),
        canonical_path: plan.canonical.path.display().to_string(),
        canonical_sha256: plan.canonical.sha256.clone(),
        targets: previous.targets.clone(),
    };
    let mut settled = Vec::new();
    for target in &plan.targets {
        let recorded = previous.targets.get(&target.target);
        let mut refusal = target.refusal.clone();
        if refusal.is_none() && !options.force {
            if let Some(recorded) = recorded {
                let drifted = drift(recorded, adapters.by_name.get(&target.target));
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
            if let Some(entry) = state.targets.get_mut(&target.target) {
                entry.settlement = format!("failed: {reason}");
            }
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

fn write_target(
    context: &Context,
    target: &TargetPlan,
    data: Option<&AdapterData>,
    recorded: Option<&TargetState>,
    options: ApplyOptions,
) -> Result<TargetState, String> {
    let mut files = Vec::new();
    let mut created_dirs = recorded.map(|r| r.created_dirs.clone()).unwrap_or_default();
    for change in &target.files {
        let is_settings = target
            .settings
            .as_ref()
            .is_some_and(|settings| settings.path == change.path);
        match &change.after {
            Some(text) => {
                if change.changes() {
                    write_file(&change.path, text, &mut created_dirs)?;
                }
                if !is_settings {
                    files.push(state::FileRecord {
                        path: change.path.display().to_string(),
                        digest: compile::sha256_hex(text.as_bytes()),
                    });
                }
            }
            None => remove_file(&change.path)?,
        }
    }
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
        let trust_file = context
            .expand(
                &rule.file,
                &data.map(|d| d.render_defaults()).unwrap_or_default(),
            )
            .ok_or_else(|| {
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
                });
            }
        }
        if text != original.unwrap_or_default() {
            write_file(&trust_file, &text, &mut created_dirs)?;
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

/// Writes a file through a temporary file in its directory and a rename, creating missing
/// directories (recorded so that uninstall can remove them when empty).
fn write_file(path: &Path, text: &str, created_dirs: &mut Vec<String>) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        let mut missing = Vec::new();
        let mut dir = parent;
        while !dir.exists() {
            missing.push(dir.to_path_buf());
            match dir.parent() {
                Some(up) => dir = up,
                None => break,
            }
        }
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
        for dir in missing.into_iter().rev() {
            let dir = dir.display().to_string();
            if !created_dirs.contains(&dir) {
                created_dirs.push(dir);
            }
        }
    }
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{file_name}.belfry-tmp"));
    std::fs::write(&temp, text).map_err(|err| format!("cannot write {}: {err}", temp.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    std::fs::rename(&temp, path).map_err(|err| {
        let _ = std::fs::remove_file(&temp);
        format!("cannot write {}: {err}", path.display())
    })
}

fn remove_file(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("cannot remove {}: {err}", path.display())),
    }
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
}

/// Reads every recorded target back.
pub fn status(context: &Context) -> Result<Vec<(String, TargetStatus)>, ProjectError> {
    let state_path = context.state_path();
    let Some(state) = State::load(&state_path).map_err(|reason| ProjectError::State {
        path: state_path.clone(),
        reason,
    })?
    else {
        return Ok(Vec::new());
    };
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let mut out = Vec::new();
    for (name, target) in &state.targets {
        out.push((
            name.clone(),
            target_status(context, adapters.by_name.get(name), target),
        ));
    }
    Ok(out)
}

fn target_status(
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
    let settings_text = target
        .settings
        .as_ref()
        .and_then(|settings| read_optional(Path::new(&settings.path)).ok().flatten());
    if let Some(settings) = &target.settings {
        match &settings_text {
            None => missing.push(format!("{} is gone", settings.path)),
            Some(text) => {
                for (recorded, now) in groups_now(settings, data, text) {
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
    let drifted = drift(target, data);
    if !drifted.is_empty() {
        return TargetStatus::Drifted(drifted);
    }
    let inert = data
        .map(|data| inert_reasons(context, data, target, settings_text.as_deref()))
        .unwrap_or_default();
    if !inert.is_empty() {
        return TargetStatus::Inert(inert);
    }
    TargetStatus::Installed
}

fn inert_reasons(
    context: &Context,
    data: &AdapterData,
    target: &TargetState,
    settings_text: Option<&str>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let Some(Render::SettingsJson {
        inert,
        trust: trust_rule,
        hooks_key,
        ..
    }) = &data.render
    else {
        return reasons;
    };
    let defaults = data.render_defaults();
    for rule in inert {
        let mut files: Vec<(String, Option<String>)> = Vec::new();
        if let Some(settings) = &target.settings {
            files.push((settings.path.clone(), settings_text.map(str::to_string)));
        }
        for extra in &rule.paths {
            if let Some(path) = context.expand(extra, &defaults) {
                files.push((
                    path.display().to_string(),
                    read_optional(&path).ok().flatten(),
                ));
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
    if let (Some(rule), Some(settings)) = (trust_rule, &target.settings) {
        let trust_file = context.expand(&rule.file, &defaults);
        let text = trust_file
            .as_ref()
            .and_then(|path| read_optional(path).ok().flatten())
            .unwrap_or_default();
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
        for (_, now) in groups_now(settings, Some(data), text_now) {
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

/// What uninstall did per target.
pub fn uninstall(
    context: &Context,
    force: bool,
) -> Result<Vec<(String, Settlement)>, ProjectError> {
    let state_path = context.state_path();
    let Some(mut state) = State::load(&state_path).map_err(|reason| ProjectError::State {
        path: state_path.clone(),
        reason,
    })?
    else {
        return Ok(Vec::new());
    };
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let mut report = Vec::new();
    let names: Vec<String> = state.targets.keys().cloned().collect();
    for name in names {
        let Some(target) = state.targets.get(&name).cloned() else {
            continue;
        };
        let drifted = drift(&target, adapters.by_name.get(&name));
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
        match uninstall_target(&target, adapters.by_name.get(&name)) {
            Ok(()) => {
                state.targets.remove(&name);
                report.push((name, Settlement::Settled));
            }
            Err(reason) => report.push((name, Settlement::Failed(reason))),
        }
    }
    if state.targets.is_empty() {
        remove_file(&state_path).map_err(|reason| ProjectError::State {
            path: state_path.clone(),
            reason,
        })?;
        let _ = std::fs::remove_dir(context.hooks_dir());
        let _ = std::fs::remove_dir(context.state_dir());
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

fn uninstall_target(target: &TargetState, data: Option<&AdapterData>) -> Result<(), String> {
    for file in &target.files {
        remove_file(Path::new(&file.path))?;
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
            );
            merge
                .set_groups(&[])
                .map_err(|err| format!("{}: {err}", settings.path))?;
            if merge.is_created_and_empty() {
                remove_file(path)?;
            } else if merge.text != text {
                let mut ignored = Vec::new();
                write_file(path, &merge.text, &mut ignored)?;
            }
        }
    }
    for record in &target.trust {
        let path = Path::new(&record.file);
        if let Some(text) = read_optional(path)? {
            let new_text = trust::remove_appended(&text, std::slice::from_ref(&record.appended));
            if record.created_file && new_text.trim().is_empty() {
                remove_file(path)?;
            } else if new_text != text {
                let mut ignored = Vec::new();
                write_file(path, &new_text, &mut ignored)?;
            }
        }
    }
    // Directories apply created, deepest first, when nothing else is in them.
    let mut dirs = target.created_dirs.clone();
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.len()));
    for dir in dirs {
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(())
}

impl AdapterData {
    /// `sha256:` of the adapter's projection data, recorded as the adapter version.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(format!(
            "{:?}{:?}{:?}",
            self.matrix, self.render, self.template
        ));
        let digest = hasher.finalize();
        let mut hex = String::from("sha256:");
        for byte in digest {
            hex.push_str(&format!("{byte:02x}"));
        }
        hex
    }

    /// The defaults for `$VAR`s in this adapter's paths.
    pub fn render_defaults(&self) -> BTreeMap<String, String> {
        self.render
            .as_ref()
            .map(|render| render.paths().defaults.clone())
            .unwrap_or_default()
    }
}
