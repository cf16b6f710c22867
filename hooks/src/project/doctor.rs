//! The checks of `belfry doctor` that belong to the hook projection (spec §9): whether the
//! harness an adapter stands for answers with a version its matrix admits, and whether the
//! projected hooks are applied, intact and live for it — the same reading `belfry hooks
//! status` makes, with the harness's hook trust told apart from the other reasons a hook is
//! inert. The core's own checks (adapter, DING adapter executable, readiness) are
//! `belfry_mux::doctor`; the CLI prints both.

use super::adapters::Adapters;
use super::status::{target_status, trust_reasons, TargetStatus};
use super::{read_optional, Context, ProjectError};
use crate::canonical::{CanonicalError, Problem, Scope};

/// One thing missing for a pane, with what fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// A stable name of the check that failed (`harness-version`, `hooks-untrusted`, …).
    pub check: &'static str,
    /// What is missing, naming the thing.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
}

/// The argv that asks the harness of `adapter` its version: the matrix's `detect` argv, with
/// the agent's own program in its place when that program is the harness (same file name), so
/// a harness run by path is the one asked. `None` when the matrix says no way to ask.
pub fn version_argv(adapters: &Adapters, adapter: &str, program: &str) -> Option<Vec<String>> {
    let data = adapters.by_name.get(adapter)?;
    let (detect, args) = data.matrix.detect.split_first()?;
    let file_name = |name: &str| name.rsplit('/').next().unwrap_or(name).to_string();
    let asked = if file_name(program) == file_name(detect) {
        program.to_string()
    } else {
        detect.clone()
    };
    Some(std::iter::once(asked).chain(args.iter().cloned()).collect())
}

/// The harness answered no version, or one outside its matrix's admitted range.
pub fn version_finding(
    adapters: &Adapters,
    adapter: &str,
    asked: &[String],
    detected: Option<&str>,
) -> Option<Finding> {
    let data = adapters.by_name.get(adapter)?;
    let matrix = &data.matrix;
    let range = matrix.admitted.as_ref()?;
    let command = asked.join(" ");
    let pinned = matrix.verified_with.as_deref().unwrap_or(range.min());
    match detected {
        None => Some(Finding {
            check: "harness-missing",
            problem: format!(
                "{} did not answer `{command}` with a version, so it is not installed where \
                 the pane looks",
                matrix.harness
            ),
            fix: format!(
                "install {} {pinned} (admitted {}) on the pane's PATH",
                matrix.harness,
                range.describe()
            ),
        }),
        Some(version) if !range.admits(version) => Some(Finding {
            check: "harness-version",
            problem: format!(
                "{} {version} is outside the versions the {adapter} adapter admits ({})",
                matrix.harness,
                range.describe()
            ),
            fix: format!(
                "install {} {pinned}; another version's hooks and screens are unverified",
                matrix.harness
            ),
        }),
        Some(_) => None,
    }
}

/// The hook findings of `adapter` for a pane working in `project.project_dir`, read in the
/// project scope, then the user scope: not applied, gone, drifted, inert or untrusted. A scope
/// in which the hooks are installed and live is enough.
pub fn hooks_findings(project: &Context, user: &Context, adapter: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    for context in [project, user] {
        match scope_findings(context, adapter) {
            Ok(Some(found)) if found.is_empty() => return Vec::new(),
            Ok(Some(found)) => findings.extend(found),
            Ok(None) => {}
            Err(err) => findings.push(Finding {
                check: "hooks-state",
                problem: err.to_string(),
                fix: format!("fix or remove {}", context.state_path().display()),
            }),
        }
    }
    if findings.is_empty() {
        findings.push(not_applied(project, user, adapter));
    }
    findings
}

/// `None` when nothing is recorded for `adapter` in this scope; else what is wrong with it.
fn scope_findings(context: &Context, adapter: &str) -> Result<Option<Vec<Finding>>, ProjectError> {
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    // Only verified records count: a planted one neither passes nor fails a pane.
    let state = super::verify::load(context, &adapters)?.state;
    let Some(target) = state.as_ref().and_then(|state| state.targets.get(adapter)) else {
        return Ok(None);
    };
    let data = adapters.by_name.get(adapter);
    let apply = apply_command(context);
    let findings = match target_status(context, data, target) {
        TargetStatus::Installed => Vec::new(),
        TargetStatus::Missing(why) => vec![Finding {
            check: "hooks-missing",
            problem: format!(
                "the {adapter} hooks applied earlier are gone: {}",
                why.join("; ")
            ),
            fix: format!("run `{apply}` again"),
        }],
        TargetStatus::Drifted(why) => vec![Finding {
            check: "hooks-drifted",
            problem: format!(
                "the {adapter} hooks changed since apply: {}",
                why.join("; ")
            ),
            fix: format!("review the change, then `{apply} --force` to restore them"),
        }],
        TargetStatus::Unverified(why) => vec![Finding {
            check: "hooks-unverified",
            problem: format!("the {adapter} hooks are installed, but {why}"),
            fix: format!(
                "run the harness version the {adapter} adapter admits, then `belfry hooks status`"
            ),
        }],
        TargetStatus::Failed(why) => vec![Finding {
            check: "hooks-failed",
            problem: format!("the last apply for {adapter} failed: {why}"),
            fix: format!("fix what it names and run `{apply}` again"),
        }],
        TargetStatus::Inert(why) => {
            let settings_text = target
                .settings
                .as_ref()
                .and_then(|settings| read_optional(std::path::Path::new(&settings.path)).ok())
                .flatten();
            let untrusted = data
                .map(|data| trust_reasons(context, data, target, settings_text.as_deref()))
                .unwrap_or_default();
            why.into_iter()
                .map(|reason| {
                    if untrusted.contains(&reason) {
                        Finding {
                            check: "hooks-untrusted",
                            problem: format!(
                                "the harness will not run the {adapter} hook it does not trust: \
                                 {reason}"
                            ),
                            fix: format!(
                                "`{apply} --trust` writes the trust of exactly the managed \
                                 entries, or review the hooks in the harness itself"
                            ),
                        }
                    } else {
                        Finding {
                            check: "hooks-inert",
                            problem: format!(
                                "the {adapter} hooks are installed but the harness will skip \
                                 them: {reason}"
                            ),
                            fix: "do what the reason says; `belfry hooks status` reads it again"
                                .to_string(),
                        }
                    }
                })
                .collect()
        }
    };
    Ok(Some(findings))
}

/// Nothing recorded in either scope: say whether a hook file targets the adapter (so apply
/// was not run) or none does (so the harness calls no `belfry dispatch` at all).
fn not_applied(project: &Context, user: &Context, adapter: &str) -> Finding {
    for context in [project, user] {
        match super::load(context) {
            Ok((_, canonical))
                if canonical
                    .hooks
                    .iter()
                    .any(|h| h.targets.iter().any(|t| t == adapter)) =>
            {
                return Finding {
                    check: "hooks-not-applied",
                    problem: format!(
                        "{} has hooks for {adapter}, but they were never applied",
                        context.canonical_path().display()
                    ),
                    fix: format!("run `{}`", apply_command(context)),
                };
            }
            Ok(_) => {}
            Err(ProjectError::Canonical(CanonicalError { problem, .. }))
                if matches!(*problem, Problem::NotFound) => {}
            Err(err) => {
                return Finding {
                    check: "hooks-not-applied",
                    problem: format!("the hook file cannot be read: {err}"),
                    fix: "fix the file, then run `belfry hooks apply`".to_string(),
                }
            }
        }
    }
    Finding {
        check: "hooks-not-applied",
        problem: format!(
            "no hook targets {adapter}, so the harness calls no `belfry dispatch`: no \
             turn-boundary delivery and no hook events for its activity adapter"
        ),
        fix: format!(
            "add {adapter:?} to a hook's `targets` in {} and run `{}`",
            project.canonical_path().display(),
            apply_command(project)
        ),
    }
}

/// The `belfry hooks apply` command line of a scope.
fn apply_command(context: &Context) -> String {
    match context.scope {
        Scope::Project => format!("belfry hooks --dir {} apply", context.project_dir.display()),
        Scope::User => "belfry hooks --user apply".to_string(),
    }
}
