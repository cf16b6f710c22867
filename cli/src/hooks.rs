//! `belfry hooks plan|apply|status|uninstall|matrix`: argument parsing and output for the
//! projection lifecycle of `belfry_hooks::project` (spec §9). Exit codes: 0 when every
//! target settled (or, for `status`, is installed), 2 otherwise, with each target's outcome
//! printed so a partial failure says which targets settled.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result};

use belfry_hooks::canonical::Scope;
use belfry_hooks::project::adapters::{Adapters, Status};
use belfry_hooks::project::{
    self, ApplyOptions, Context, Plan, Settlement, TargetPlan, TargetStatus,
};

use crate::exit::{EXIT_ERROR, EXIT_OK};

/// Where and for whom: shared by every `belfry hooks` subcommand.
#[derive(clap::Args, Debug)]
pub struct ScopeArgs {
    /// The project directory (default: the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    dir: Option<PathBuf>,
    /// Project the user's hook file ($XDG_CONFIG_HOME/belfry/hooks.kdl) into the harnesses'
    /// user-level settings, instead of the project's belfry-hooks.kdl.
    #[arg(long, global = true)]
    user: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum HooksCommand {
    /// Every target path, a unified diff, and every cell with its reason; writes nothing.
    Plan,
    /// Write the native projections.
    Apply {
        /// Overwrite managed entries that changed since the last apply.
        #[arg(long)]
        force: bool,
        /// Also write the trust entries of exactly the entries written, for a harness that
        /// runs a hook only once it is trusted.
        #[arg(long)]
        trust: bool,
    },
    /// Installed, drifted, missing or inert per target, read from the live files.
    Status,
    /// Remove only the managed artifacts the install state records.
    Uninstall {
        /// Remove managed artifacts even when they changed since apply.
        #[arg(long)]
        force: bool,
    },
    /// The full capability matrix: harness, admitted versions, feature by feature.
    Matrix,
}

/// Runs one `belfry hooks` command.
pub fn run(scope: ScopeArgs, command: HooksCommand) -> Result<i32> {
    if let HooksCommand::Matrix = command {
        return matrix();
    }
    let context = context(&scope)?;
    match command {
        HooksCommand::Plan => {
            let plan = project::plan(&context)?;
            print!("{}", render_plan(&plan));
            warn_missing_handlers(&plan);
            let refused = plan.targets.iter().any(|target| target.refusal.is_some());
            Ok(if refused { EXIT_ERROR } else { EXIT_OK })
        }
        HooksCommand::Apply { force, trust } => {
            print_rejections(&context)?;
            let report = project::apply(&context, ApplyOptions { force, trust })?;
            warn_missing_handlers(&report.plan);
            for (target, settlement) in &report.settled {
                match settlement {
                    // The files the target's plan wrote, so the user knows what changed where.
                    Settlement::Settled => {
                        println!("{target}: settled{}", written_files(&report.plan, target))
                    }
                    Settlement::Failed(reason) => println!("{target}: FAILED: {reason}"),
                }
            }
            let settled: Vec<&str> = report
                .settled
                .iter()
                .filter(|(_, s)| *s == Settlement::Settled)
                .map(|(t, _)| t.as_str())
                .collect();
            if report.all_settled() {
                Ok(EXIT_OK)
            } else {
                eprintln!(
                    "belfry hooks apply: not every target settled; settled: {}",
                    if settled.is_empty() {
                        "none".to_string()
                    } else {
                        settled.join(", ")
                    }
                );
                Ok(EXIT_ERROR)
            }
        }
        HooksCommand::Status => {
            // A record belfry will not act on is named, and makes the status not clean.
            let rejected = print_rejections(&context)?;
            // The hook file as it is now: a handler that cannot start is said here too.
            if let Ok(plan) = project::plan(&context) {
                warn_missing_handlers(&plan);
            }
            let statuses = project::status(&context)?;
            if statuses.is_empty() {
                println!(
                    "no projection installed ({})",
                    context.state_path().display()
                );
                return Ok(if rejected { EXIT_ERROR } else { EXIT_OK });
            }
            let mut all_installed = !rejected;
            for (target, status) in statuses {
                let line = match status {
                    TargetStatus::Installed => "installed".to_string(),
                    TargetStatus::Drifted(why) => format!("drifted: {}", why.join("; ")),
                    TargetStatus::Missing(why) => format!("missing: {}", why.join("; ")),
                    TargetStatus::Inert(why) => format!("inert: {}", why.join("; ")),
                    TargetStatus::Failed(why) => format!("failed: {why}"),
                    TargetStatus::Unverified(why) => format!("unverified: {why}"),
                };
                all_installed &= line == "installed";
                println!("{target}: {line}");
            }
            Ok(if all_installed { EXIT_OK } else { EXIT_ERROR })
        }
        HooksCommand::Uninstall { force } => {
            print_rejections(&context)?;
            let report = project::uninstall(&context, force)?;
            if report.is_empty() {
                println!("nothing to uninstall ({})", context.state_path().display());
            }
            let mut ok = true;
            for (target, settlement) in report {
                match settlement {
                    Settlement::Settled => println!("{target}: removed"),
                    Settlement::Failed(reason) => {
                        ok = false;
                        println!("{target}: FAILED: {reason}");
                    }
                }
            }
            Ok(if ok { EXIT_OK } else { EXIT_ERROR })
        }
        HooksCommand::Matrix => matrix(),
    }
}

/// spec §9 and §11: `belfry up` refuses, before anything launches, an agent of `decls` that
/// names a canonical hook it must run under which its harness would not run as written: one
/// missing, not targeting the agent's adapter, or enforcing lossily there. The hooks are looked
/// for in `dir`'s `belfry-hooks.kdl` (the declaration file's directory), then the user's.
pub(crate) fn refuse_unguarded_agents(
    decls: &belfry_mux::declare::Declarations,
    file: &std::path::Path,
) -> Result<()> {
    let dependent: Vec<_> = decls
        .agents
        .iter()
        .filter(|a| !a.hooks.is_empty())
        .collect();
    if dependent.is_empty() {
        return Ok(());
    }
    let dir = match file.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let mut problems = Vec::new();
    for agent in dependent {
        let Some(target) = &agent.adapter else {
            problems.push(format!(
                "agent {:?} names hooks but no adapter: the adapter says which harness they are \
                 projected to",
                agent.name
            ));
            continue;
        };
        for name in &agent.hooks {
            let mut reasons = Vec::new();
            let mut allowed = false;
            for user in [false, true] {
                let context = context_undetected(&ScopeArgs {
                    dir: Some(dir.clone()),
                    user,
                })?;
                match belfry_hooks::project::dependency_refusal(&context, target, name) {
                    Ok(None) => {
                        allowed = true;
                        break;
                    }
                    Ok(Some(reason)) => reasons.push(reason),
                    Err(err) => reasons.push(err.to_string()),
                }
            }
            if !allowed {
                problems.push(format!(
                    "agent {:?} must run under hook {name:?} on {target}, but {}",
                    agent.name,
                    reasons.join("; and ")
                ));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "{}: nothing was launched:\n  {}",
        file.display(),
        problems.join("\n  ")
    )
}

/// Prints every install-state record this scope's commands will not act on (issue 39: a
/// planted or foreign record is reported, never acted on); whether there was one.
fn print_rejections(context: &Context) -> Result<bool> {
    let rejected = project::rejections(context)?;
    for line in &rejected {
        println!("rejected: {line}");
    }
    Ok(!rejected.is_empty())
}

fn context(scope: &ScopeArgs) -> Result<Context> {
    let mut context = context_undetected(scope)?;
    let adapters = Adapters::embedded().map_err(anyhow::Error::msg)?;
    context.harness_versions = detect_versions(&adapters);
    Ok(context)
}

/// The context without asking each harness its version (which `plan` and `status` show, and
/// a dependency check does not need).
fn context_undetected(scope: &ScopeArgs) -> Result<Context> {
    let dir = match &scope.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let scope = if scope.user {
        Scope::User
    } else {
        Scope::Project
    };
    context_in(&dir, scope, std::env::vars().collect())
}

/// The context of project `dir` (or the user scope) as a process with environment `env` sees
/// it: `belfry doctor` reads a pane's hooks with the pane's own environment.
pub(crate) fn context_in(
    dir: &std::path::Path,
    scope: Scope,
    env: BTreeMap<String, String>,
) -> Result<Context> {
    let project_dir = std::fs::canonicalize(dir)
        .with_context(|| format!("project directory {}", dir.display()))?;
    let config_home = match env.get("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env.get("HOME").cloned().unwrap_or_default()).join(".config"),
    };
    Ok(Context {
        scope,
        project_dir,
        config_home,
        env,
        belfry_version: env!("CARGO_PKG_VERSION").to_string(),
        harness_versions: BTreeMap::new(),
    })
}

/// The version each adapter's harness reports on this machine (`matrix.json` `detect`), all
/// asked at once, each with a deadline. `BELFRY_HOOKS_DETECT=0` skips it.
fn detect_versions(adapters: &Adapters) -> BTreeMap<String, String> {
    if std::env::var("BELFRY_HOOKS_DETECT").is_ok_and(|v| v == "0") {
        return BTreeMap::new();
    }
    let commands = adapters
        .by_name
        .iter()
        .map(|(name, data)| {
            let detect = crate::harness_version::Detect {
                argv: data.matrix.detect.clone(),
                packages: data.matrix.detect_packages.clone(),
            };
            (name.clone(), detect)
        })
        .collect();
    crate::harness_version::detect_all(&commands, crate::harness_version::VERSION_DEADLINE)
}

/// The plan as printed: per target its harness and versions, each hook with every cell, the
/// files with a unified diff, and the refusal if the target fails.
/// Prints a warning for each hook of the plan's file whose program cannot start.
fn warn_missing_handlers(plan: &Plan) {
    for line in crate::hook_programs::missing_handlers(&plan.canonical) {
        eprintln!("{line}");
    }
}

/// `: wrote A, B` for the files `target`'s plan changes, or nothing when it changes none.
fn written_files(plan: &Plan, target: &str) -> String {
    let written: Vec<String> = plan
        .targets
        .iter()
        .filter(|planned| planned.target == target)
        .flat_map(|planned| planned.files.iter())
        .filter(|file| file.changes())
        .map(|file| file.path.display().to_string())
        .collect();
    if written.is_empty() {
        " (nothing to change)".to_string()
    } else {
        format!(": wrote {}", written.join(", "))
    }
}

pub fn render_plan(plan: &Plan) -> String {
    let mut out = format!(
        "{} hook file {} ({})\n",
        plan.canonical.scope,
        plan.canonical.path.display(),
        plan.canonical.sha256
    );
    if plan.targets.is_empty() {
        out.push_str("no hook names a target; nothing to project\n");
    }
    for target in &plan.targets {
        out.push_str(&render_target(target));
    }
    out
}

fn render_target(target: &TargetPlan) -> String {
    let mut out = format!("\ntarget {} ({}", target.target, target.harness);
    match (&target.verified_with, &target.admitted) {
        (Some(verified), Some(admitted)) => out.push_str(&format!(
            ", matrix verified with {verified}, admits {admitted}"
        )),
        _ => out.push_str(", not admitted"),
    }
    match &target.detected {
        Some((version, true)) => out.push_str(&format!("; detected {version}, admitted)\n")),
        Some((version, false)) => out.push_str(&format!("; detected {version}, NOT admitted)\n")),
        None => out.push_str("; not detected on this machine)\n"),
    }
    for hook in &target.hooks {
        let projected = if hook.status == Status::Unsupported {
            " — not projected"
        } else {
            ""
        };
        out.push_str(&format!(
            "  {} ({} {}): {}{projected}\n",
            hook.hook,
            hook.event,
            hook.intent,
            hook.status.as_str()
        ));
        for (feature, cell) in &hook.cells {
            out.push_str(&format!("    {feature}: {cell}\n"));
        }
    }
    for reason in &target.inert_after_apply {
        out.push_str(&format!(
            "  after apply, the harness will skip it: {reason}\n"
        ));
    }
    if let Some(refusal) = &target.refusal {
        out.push_str(&format!(
            "  REFUSED, nothing is written for this target: {refusal}\n"
        ));
    }
    for file in &target.files {
        let what = match (&file.before, &file.after) {
            (None, Some(_)) => "created",
            (Some(_), None) => "removed",
            _ if file.changes() => "changed",
            _ => "unchanged",
        };
        out.push_str(&format!("  file {} ({what})\n", file.path.display()));
    }
    for entry in &target.trust {
        out.push_str(&format!(
            "  trust entry {} = {} (written with --trust)\n",
            entry.key, entry.hash
        ));
    }
    for file in &target.files {
        let diff = file.diff();
        if !diff.is_empty() {
            out.push_str(&diff);
            if !diff.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

fn matrix() -> Result<i32> {
    let adapters = Adapters::embedded().map_err(anyhow::Error::msg)?;
    print!("{}", render_matrix(&adapters));
    Ok(EXIT_OK)
}

/// The matrix as printed by `belfry hooks matrix`.
pub fn render_matrix(adapters: &Adapters) -> String {
    let mut out = String::new();
    for data in adapters.by_name.values() {
        let matrix = &data.matrix;
        out.push_str(&format!("{} ({})", matrix.harness, data.name));
        match (&matrix.admitted, &matrix.not_admitted) {
            (_, Some(not_admitted)) => out.push_str(&format!(
                ": unsupported: {} [{}]\n",
                not_admitted.reason, not_admitted.key
            )),
            (Some(range), None) => out.push_str(&format!(
                ": admits {}, verified with {}\n",
                range.describe(),
                matrix.verified_with.as_deref().unwrap_or("?")
            )),
            (None, None) => out.push_str(": no admitted versions\n"),
        }
        for (feature, cell) in &matrix.cells {
            out.push_str(&format!("  {feature}: {}\n", cell.describe()));
        }
        out.push('\n');
    }
    out
}

/// spec §7.4, and the A/B evaluation (`docs/evaluation.md`): the DING policy of a pane
/// declared with `adapter` and no policy of its own, whose program runs in `dir` with `env`.
/// The rich policy, with the adapter's activity executable, when the adapter ships one
/// (`activity` in its declaration) and belfry's hooks are applied for the harness there (in
/// the project or the user scope), installed as applied, and project each event the activity
/// adapter needs exactly; otherwise `Err`, and the pane keeps the aggressive default:
/// `Err(None)` when the adapter ships no activity executable, `Err(Some(reason))` when it
/// does but it cannot work here. The hooks are what tell the activity adapter that a turn ended: without them it
/// would hold every notice for good.
pub(crate) fn rich_default(
    adapter: &str,
    dir: &std::path::Path,
    env: &BTreeMap<String, String>,
) -> std::result::Result<Vec<String>, Option<String>> {
    let declaration = belfry_mux::adapters::Adapters::of_this_binary()
        .declaration(adapter)
        .map_err(|err| Some(err.to_string()))?;
    let Some(activity) = declaration.activity else {
        return Err(None);
    };
    let cannot = |reason: String| Some(format!("{reason}; {}", activity.why));
    let command = activity_command(&activity.command, env).map_err(cannot)?;
    let mut project =
        context_in(dir, Scope::Project, env.clone()).map_err(|e| cannot(format!("{e:#}")))?;
    let mut user =
        context_in(dir, Scope::User, env.clone()).map_err(|e| cannot(format!("{e:#}")))?;
    // The hooks are judged for the harness version the pane would run (issue 41 item 6): one
    // outside the admitted range, or none answering, leaves them unverified, and the rich
    // policy is not chosen on unverified hooks. The harness is asked only when some scope's
    // hooks are otherwise intact and live (read without a version, they are
    // `hooks-unverified`), so a pane with no hooks applied costs no `--version` run.
    let mut findings = belfry_hooks::project::doctor::hooks_findings(&project, &user, adapter);
    if findings.iter().any(|f| f.check == "hooks-unverified") {
        if let Some(version) = harness_version_in(adapter, env) {
            for context in [&mut project, &mut user] {
                context
                    .harness_versions
                    .insert(adapter.to_string(), version.clone());
            }
            findings = belfry_hooks::project::doctor::hooks_findings(&project, &user, adapter);
        }
    }
    if let Some(finding) = findings.first() {
        return Err(cannot(format!(
            "{} (fix: {})",
            finding.problem, finding.fix
        )));
    }
    let mut reasons = Vec::new();
    for context in [&project, &user] {
        match exact_events(context, adapter, &activity.needs_hooks) {
            Ok(()) => return Ok(command),
            Err(reason) => reasons.push(reason),
        }
    }
    Err(cannot(reasons.join("; and ")))
}

/// The version the harness of `adapter` answers when asked as its matrix says (`detect`),
/// found on the `PATH` of `env`, within the detection deadline; `None` when it is not there or
/// answers no version.
fn harness_version_in(adapter: &str, env: &BTreeMap<String, String>) -> Option<String> {
    let adapters = Adapters::embedded().ok()?;
    let matrix = &adapters.by_name.get(adapter)?.matrix;
    let (program, args) = matrix.detect.split_first()?;
    let found =
        belfry_mux::doctor::find_program(program, env.get("PATH").map(String::as_str), None)?;
    crate::harness_version::version_of(
        &found.display().to_string(),
        args,
        &matrix.detect_packages,
        crate::harness_version::VERSION_DEADLINE,
    )
}

/// Whether `context`'s canonical hook file projects each of `events` exactly onto `adapter`,
/// with nothing the harness would skip.
fn exact_events(
    context: &Context,
    adapter: &str,
    events: &[String],
) -> std::result::Result<(), String> {
    let file = context.canonical_path();
    let plan = project::plan(context).map_err(|err| format!("{}: {err}", file.display()))?;
    let Some(target) = plan.targets.iter().find(|t| t.target == adapter) else {
        return Err(format!("{} has no hook for {adapter}", file.display()));
    };
    if let Some(inert) = target.inert_after_apply.first() {
        return Err(format!(
            "{adapter} would run none of {}: {inert}",
            file.display()
        ));
    }
    let missing: Vec<&str> = events
        .iter()
        .filter(|event| {
            !target
                .hooks
                .iter()
                .any(|hook| &hook.event == *event && hook.status == Status::Exact)
        })
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} projects no exact {adapter} hook on {}",
            file.display(),
            missing.join(", ")
        ))
    }
}

/// The activity command with its program resolved: beside this binary first (where
/// `scripts/install` and a cargo build put `belfry-adapter`), then on the pane's `PATH`.
fn activity_command(
    command: &[String],
    env: &BTreeMap<String, String>,
) -> std::result::Result<Vec<String>, String> {
    let Some(program) = command.first() else {
        return Err("the adapter's activity command is empty".to_string());
    };
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(program)))
        .filter(|path| path.is_file());
    let found = beside.or_else(|| {
        belfry_mux::doctor::find_program(program, env.get("PATH").map(String::as_str), None)
    });
    match found {
        Some(path) => {
            let mut resolved = vec![path.display().to_string()];
            resolved.extend_from_slice(&command[1..]);
            Ok(resolved)
        }
        None => Err(format!(
            "the activity executable {program} is neither beside {} nor on PATH",
            std::env::current_exe()
                .map(|exe| exe.display().to_string())
                .unwrap_or_else(|_| "belfry".into())
        )),
    }
}
