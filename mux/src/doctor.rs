//! The checks of `belfry doctor` that need only what the core knows about a pane: whether its
//! adapter exists, whether its DING adapter executable can be found, whether its program is on
//! `PATH`, whether the harness's own hook shell finds `belfry`, and whether it is ready for
//! input by its adapter's readiness rule (spec §10). The
//! hook-projection checks live beside the projection (`belfry_hooks::project::doctor`); the CLI
//! puts both together and prints them. Nothing here names a harness: every fact about one is
//! the adapter's data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::adapters::Adapters;
use crate::lifecycle::AdapterDeclaration;

/// One thing missing for a pane, with what fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// A stable name of the check that failed (`adapter-unknown`, `not-ready`, …).
    pub check: &'static str,
    /// What is missing, naming the thing.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
}

/// What a check needs to know about one pane or declared agent.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// The adapter the agent names, if any.
    pub adapter: Option<&'a str>,
    /// The program and its arguments.
    pub argv: &'a [String],
    /// The DING adapter command, unexpanded (`$BELFRY_ADAPTERS/…` kept).
    pub adapter_command: Option<&'a [String]>,
    /// The DING policy token (`aggressive`, `turn-boundary+fresh-idle`, …).
    pub ding_policy: Option<&'a str>,
    /// The environment the program runs with, which gives the `PATH` it is found on.
    pub env: &'a BTreeMap<String, String>,
    /// The working directory a relative program is found from.
    pub cwd: Option<&'a Path>,
}

/// The DING policy that needs an activity adapter (spec §7.4).
const RICH_POLICY: &str = "turn-boundary+fresh-idle";

/// Where `program` is found the way `execvp` finds it: a name with a slash is taken as a path
/// (from `cwd` when relative), any other name is looked for on `path`. Only an executable
/// regular file counts.
pub fn find_program(program: &str, path: Option<&str>, cwd: Option<&Path>) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.contains('/') {
        let candidate = match cwd {
            Some(cwd) if Path::new(program).is_relative() => cwd.join(program),
            _ => PathBuf::from(program),
        };
        return is_executable(&candidate).then_some(candidate);
    }
    path?
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The adapter's declaration when the adapter exists, else the finding that it does not.
pub fn adapter_declaration(adapters: &Adapters, name: &str) -> Result<AdapterDeclaration, Finding> {
    adapters
        .require(name)
        .and_then(|()| adapters.declaration(name))
        .map_err(|err| Finding {
            check: "adapter-unknown",
            problem: err.to_string(),
            fix: format!(
                "name one of the known adapters ({}) in the agent's `adapter`, or add \
             adapters/{name}/declaration.json",
                adapters.names().join(", ")
            ),
        })
}

/// The program the pane runs is not on its `PATH`.
pub fn program_finding(subject: &Subject<'_>) -> Option<Finding> {
    let program = subject.argv.first()?;
    let path = subject.env.get("PATH").map(String::as_str);
    if find_program(program, path, subject.cwd).is_some() {
        return None;
    }
    Some(Finding {
        check: "harness-missing",
        problem: format!(
            "the program {program:?} is not found (PATH={})",
            path.unwrap_or("<unset>")
        ),
        fix: format!(
            "install {program} or put the folder holding it on the pane's PATH, or give \
             `command` its full path"
        ),
    })
}

/// The DING adapter executable cannot be found, or the policy needs one and none is named.
pub fn adapter_command_finding(adapters: &Adapters, subject: &Subject<'_>) -> Option<Finding> {
    let Some(command) = subject.adapter_command.filter(|c| !c.is_empty()) else {
        return (subject.ding_policy == Some(RICH_POLICY)).then(|| Finding {
            check: "adapter-executable",
            problem: format!(
                "the DING policy {RICH_POLICY} needs an activity adapter, and none is named"
            ),
            fix: "add `adapter { command \"belfry-adapter\" \"--provider\" \"NAME\"; }` to the \
                  agent's `ding` block"
                .to_string(),
        });
    };
    let program = match adapters.program(&command[0]) {
        Ok(program) => program,
        Err(err) => {
            return Some(Finding {
                check: "adapter-executable",
                problem: err.to_string(),
                fix: "set BELFRY_ADAPTERS to the adapters folder, or give the adapter \
                      command an absolute path"
                    .to_string(),
            })
        }
    };
    let path = subject.env.get("PATH").map(String::as_str);
    if find_program(&program, path, subject.cwd).is_some() {
        return None;
    }
    Some(Finding {
        check: "adapter-executable",
        problem: format!(
            "the DING adapter executable {program:?} is not found, so no notice is delivered \
             under the {} policy",
            subject.ding_policy.unwrap_or("declared")
        ),
        fix: "install it (belfry-adapter is built with belfry), or correct the path in the \
              agent's `ding { adapter { command … } }`"
            .to_string(),
    })
}

/// The pane is not ready for input by its adapter's readiness rule: `age_ms` since its
/// program started, `screen` its lines joined by newlines.
pub fn readiness_finding(
    declaration: &AdapterDeclaration,
    age_ms: u64,
    screen: &str,
) -> Option<Finding> {
    let rule = declaration.readiness.as_ref()?;
    let reason = rule.not_ready(age_ms, screen)?;
    Some(Finding {
        check: "not-ready",
        problem: format!("the harness does not accept input yet: {reason}"),
        fix: "wait until it is ready (DING holds its notices until then); if it never gets \
              there, `belfry peek` shows what it is waiting for"
            .to_string(),
    })
}

/// How long after its program started a ready pane whose harness reports its own state must
/// have said something: the harnesses checked report at start-up, within a second or two of
/// drawing their composer.
pub const PROGRAM_STATUS_GRACE_MS: u64 = 10_000;

/// Whether the declaration says harness `version` reports program status (OSC 7501): the
/// checked version at or below it, nearest, emits. A version older than every checked one
/// is not judged (`None`), and the version may carry words after it (`1.6.0 (package)`).
pub fn declared_to_report(declaration: &AdapterDeclaration, version: &str) -> Option<bool> {
    let status = declaration.program_status.as_ref()?;
    let wanted = version_parts(version)?;
    status
        .checked
        .iter()
        .filter_map(|checked| Some((version_parts(&checked.version)?, checked.emits)))
        .filter(|(parts, _)| *parts <= wanted)
        .max_by(|(a, _), (b, _)| a.cmp(b))
        .map(|(_, emits)| emits)
}

/// The numbers of the first dotted version in `text` (`2.1.337` of `2.1.337 (Some Harness)`).
fn version_parts(text: &str) -> Option<Vec<u64>> {
    let word = text
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|word| word.contains('.') && word.starts_with(|c: char| c.is_ascii_digit()))?;
    word.split('.')
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().ok())
        .collect()
}

/// A pane whose harness version the adapter declares to report its own state (issue 40), that
/// is ready for input and has run `age_ms` (at least [`PROGRAM_STATUS_GRACE_MS`]), and whose
/// program has reported nothing: `belfry top` shows no state for it and DING has no veto from
/// it. `status` is the pane's snapshot; only records of `incarnation`, its program now, count.
pub fn program_status_finding(
    declaration: &AdapterDeclaration,
    session: &str,
    adapter: &str,
    version: &str,
    age_ms: u64,
    status: &belfry_proto::program_status::ProgramStatus,
    incarnation: &str,
) -> Option<Finding> {
    let declared = declaration.program_status.as_ref()?;
    if declared_to_report(declaration, version) != Some(true) || age_ms < PROGRAM_STATUS_GRACE_MS {
        return None;
    }
    if status
        .records
        .iter()
        .any(|record| record.incarnation == incarnation)
    {
        return None;
    }
    let fix = if declared.needs_query && status.queries == 0 {
        format!(
            "it reports only once the terminal answers its status query, and this pane host \
             has answered none: a pane host from before program status answers none, so \
             restart the pane under this belfry (`belfry restart {session}`)"
        )
    } else {
        format!(
            "it was started with its reports turned off, or through a program that drops them: \
             compare its environment and command line with what the adapter's declaration \
             says of it ({}), then `belfry restart {session}`",
            declared.source
        )
    };
    Some(Finding {
        check: "program-status-silent",
        problem: format!(
            "the harness, version {version}, reports its own state (OSC 7501 program status, \
             per adapter {adapter:?}'s declaration), and this pane, ready and {} s old, has no report from \
             its program (the pane host answered {} status queries): `belfry top` shows no \
             state for it and DING has no working or blocked from it to hold on",
            age_ms / 1000,
            status.queries
        ),
        fix,
    })
}

/// Why mail to a rich-policy pane of `adapter` waits for the harness's first turn, if it does
/// (issue 40): its activity adapter learns that the harness waits for input only from a
/// turn-stop hook, its own program status (OSC 7501), or a session start the declaration lists
/// in `fresh_start`. Without the last two, a just-started, restarted or cleared agent holds
/// every message (`held:unknown`) until a person gives it a turn. `version` is the harness's,
/// when known: with none, a declaration that has any reporting version is not judged.
pub fn first_turn_wait(
    declaration: &AdapterDeclaration,
    adapter: &str,
    version: Option<&str>,
) -> Option<String> {
    if declaration.activity.is_none() || declaration.fresh_start.is_some() {
        return None;
    }
    let reports = match version {
        Some(version) => declared_to_report(declaration, version) == Some(true),
        None => declaration
            .program_status
            .as_ref()
            .is_some_and(|status| status.checked.iter().any(|checked| checked.emits)),
    };
    if reports {
        return None;
    }
    let harness = version.map_or("the harness".to_string(), |v| {
        format!("the harness, version {v},")
    });
    Some(format!(
        "{harness} reports no program status and adapter {adapter:?} declares no session start \
         that proves it waits for input, so under the rich policy a just-started, restarted or \
         cleared agent holds its mail (held: unknown) until its first turn ends"
    ))
}

/// A rich-policy pane whose mail waits for its first turn ([`first_turn_wait`]).
pub fn first_turn_finding(
    declaration: &AdapterDeclaration,
    session: &str,
    adapter: &str,
    version: Option<&str>,
    ding_policy: Option<&str>,
) -> Option<Finding> {
    if ding_policy != Some(RICH_POLICY) {
        return None;
    }
    let problem = first_turn_wait(declaration, adapter, version)?;
    Some(Finding {
        check: "mail-waits-first-turn",
        problem,
        fix: format!(
            "give the agent its first task yourself (type it, or put it on its command line), \
             after which mail flows at each turn's end; or deliver aggressively \
             (`belfry new --ding-delivery aggressive`), which types a notice into an empty \
             composer; `belfry ding status {session}` shows what is held"
        ),
    })
}

/// How long the harness's hook shell may take to say where `belfry` is.
const HOOK_SHELL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// The projected hooks call `belfry` by name; a harness that runs hook commands through a
/// shell of its own (`hook_shell`, for example a login shell whose profile resets `PATH`) must
/// find it there too, or every hook fails and the harness reports nothing to belfry. Asked the
/// way the harness would ask, with the pane's environment and a deadline.
pub fn hook_shell_finding(
    declaration: &AdapterDeclaration,
    subject: &Subject<'_>,
) -> Option<Finding> {
    let shell = &declaration.hook_shell;
    let (program, args) = shell.split_first()?;
    let expand = |word: &str| match word {
        "$SHELL" => subject
            .env
            .get("SHELL")
            .cloned()
            .unwrap_or_else(|| "/bin/sh".to_string()),
        other => other.to_string(),
    };
    let program = expand(program);
    let mut command = std::process::Command::new(&program);
    command
        .args(args.iter().map(|arg| expand(arg)))
        .arg("command -v belfry")
        .env_clear()
        .envs(subject.env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(cwd) = subject.cwd {
        command.current_dir(cwd);
    }
    let shown = std::iter::once(program.clone())
        .chain(args.iter().map(|arg| expand(arg)))
        .collect::<Vec<_>>()
        .join(" ");
    let found = run_with_deadline(command, HOOK_SHELL_DEADLINE);
    match found {
        Some(path) if !path.trim().is_empty() => None,
        _ => Some(Finding {
            check: "hooks-no-belfry",
            problem: format!(
                "the harness runs hook commands as `{shown} COMMAND`, and that shell does not \
                 find `belfry`, so every projected hook fails and no hook event reaches belfry"
            ),
            fix: "install belfry where that shell's PATH finds it (scripts/install, and its \
                  bin folder on the login profile's PATH)"
                .to_string(),
        }),
    }
}

/// The stdout of `command` when it exits within `deadline`; `None` when it cannot start or
/// runs past the deadline (then it is killed).
fn run_with_deadline(
    mut command: std::process::Command,
    deadline: std::time::Duration,
) -> Option<String> {
    let mut child = command.spawn().ok()?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let output = child.wait_with_output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::Readiness;

    fn declaration(screen: Option<&str>, after_ms: u64) -> AdapterDeclaration {
        AdapterDeclaration {
            readiness: Some(Readiness {
                screen: screen.map(str::to_string),
                after_ms,
                why: "test".to_string(),
            }),
            ..AdapterDeclaration::default()
        }
    }

    fn reporting(checked: &[(&str, bool)], needs_query: bool) -> AdapterDeclaration {
        use crate::lifecycle::{CheckedVersion, ProgramStatusDeclaration};
        AdapterDeclaration {
            program_status: Some(ProgramStatusDeclaration {
                checked: checked
                    .iter()
                    .map(|(version, emits)| CheckedVersion {
                        version: version.to_string(),
                        emits: *emits,
                    })
                    .collect(),
                needs_query,
                states: BTreeMap::new(),
                blocked_kinds: BTreeMap::new(),
                source: "its docs".to_string(),
            }),
            ..AdapterDeclaration::default()
        }
    }

    fn rich(declaration: AdapterDeclaration, fresh: bool) -> AdapterDeclaration {
        use crate::lifecycle::{Activity, FreshStartDeclaration};
        AdapterDeclaration {
            activity: Some(Activity {
                command: vec!["belfry-adapter".into()],
                needs_hooks: vec!["turn-stop".into()],
                why: "test".into(),
            }),
            fresh_start: fresh.then(|| FreshStartDeclaration {
                sources: vec!["startup".into()],
                prompt_args: None,
                why: "test".into(),
            }),
            ..declaration
        }
    }

    /// Issue 40: mail waits for the first turn only where the rich policy runs and the harness
    /// has neither program status nor a declared fresh start; it is named, with the fix.
    #[test]
    fn a_rich_pane_without_program_status_or_a_fresh_start_is_named_as_waiting_for_its_first_turn()
    {
        let silent = rich(AdapterDeclaration::default(), false);
        let finding = first_turn_finding(&silent, "w", "x", Some("1.0.0"), Some(RICH_POLICY))
            .expect("a finding");
        assert_eq!(finding.check, "mail-waits-first-turn");
        assert!(
            finding.problem.contains("version 1.0.0"),
            "{}",
            finding.problem
        );
        assert!(
            finding.fix.contains("belfry ding status w"),
            "{}",
            finding.fix
        );
        assert!(first_turn_finding(&silent, "w", "x", None, Some("aggressive")).is_none());
        assert!(first_turn_wait(&silent, "x", None).is_some());
        // A declared fresh start, or a reporting version, proves the wait ends without a turn.
        assert!(first_turn_wait(&rich(AdapterDeclaration::default(), true), "x", None).is_none());
        let split = rich(reporting(&[("0.9.0", false), ("1.6.0", true)], true), false);
        assert!(first_turn_wait(&split, "x", Some("1.6.0")).is_none());
        assert!(first_turn_wait(&split, "x", Some("0.9.1")).is_some());
        assert!(
            first_turn_wait(&split, "x", None).is_none(),
            "not judged without a version"
        );
        // No activity adapter: the rich policy is not this adapter's to default to.
        assert!(first_turn_wait(&AdapterDeclaration::default(), "x", None).is_none());
    }

    /// Every built-in adapter whose default is rich is covered: it reports program status or
    /// declares a fresh start (the live proofs: tests/tests/program_status_live.rs,
    /// pi_status_live.rs, fresh_mail_live.rs).
    #[test]
    fn no_built_in_rich_adapter_leaves_mail_waiting_for_the_first_turn() {
        let adapters = Adapters::Embedded;
        for name in adapters.names() {
            let declaration = adapters.declaration(&name).expect("a built-in declaration");
            assert_eq!(first_turn_wait(&declaration, &name, None), None, "{name}");
        }
    }

    #[test]
    fn the_nearest_checked_version_at_or_below_says_whether_a_version_reports() {
        let d = reporting(&[("0.73.1", false), ("1.6.0 (a package)", true)], true);
        assert_eq!(declared_to_report(&d, "1.6.0"), Some(true));
        assert_eq!(declared_to_report(&d, "harness 1.10.2 (build)"), Some(true));
        assert_eq!(declared_to_report(&d, "1.5.9"), Some(false));
        assert_eq!(declared_to_report(&d, "0.73.1"), Some(false));
        assert_eq!(declared_to_report(&d, "0.60.0"), None);
        assert_eq!(declared_to_report(&d, "no version"), None);
        assert_eq!(
            declared_to_report(&AdapterDeclaration::default(), "1.6.0"),
            None
        );
    }

    #[test]
    fn a_ready_pane_of_a_reporting_version_with_no_record_of_its_program_is_found() {
        use belfry_proto::program_status::ProgramStatus;
        let d = reporting(&[("2.1.0", true)], true);
        let silent = ProgramStatus::default();
        let grace = PROGRAM_STATUS_GRACE_MS;
        let finding = program_status_finding(&d, "w", "a", "2.1.5", grace, &silent, "i1")
            .expect("a silent pane is found");
        assert_eq!(finding.check, "program-status-silent");
        assert!(finding.fix.contains("answered none"), "{finding:?}");
        assert!(finding.fix.contains("belfry restart w"), "{finding:?}");
        // Too young, or a version not declared to report: nothing to say.
        assert_eq!(
            program_status_finding(&d, "w", "a", "2.1.5", grace - 1, &silent, "i1"),
            None
        );
        assert_eq!(
            program_status_finding(&d, "w", "a", "2.0.9", grace, &silent, "i1"),
            None
        );
        // A query answered: the fix is about the harness's own setting, quoting the source.
        let asked = ProgramStatus {
            queries: 1,
            ..ProgramStatus::default()
        };
        let finding = program_status_finding(&d, "w", "a", "2.1.5", grace, &asked, "i1")
            .expect("still silent");
        assert!(finding.fix.contains("its docs"), "{finding:?}");
    }

    #[test]
    fn readiness_needs_the_screen_and_the_delay() {
        let rule = declaration(Some("(?m)^> $"), 500);
        assert!(readiness_finding(&rule, 100, "> ").is_some());
        assert!(readiness_finding(&rule, 900, "loading").is_some());
        assert_eq!(readiness_finding(&rule, 900, "banner\n> "), None);
        assert_eq!(
            readiness_finding(&AdapterDeclaration::default(), 0, ""),
            None
        );
    }

    /// Every built-in adapter's rule judges its harness's real idle screens (the fixtures
    /// captured from the pinned version) ready, and a blank start-up screen not ready. Both
    /// idle screens: DING checks the rule when mail first waits, which is often after the
    /// human's first turn, so a rule that holds only on the first screen (a placeholder that
    /// never comes back) would hold every notice for good.
    #[test]
    fn every_readiness_rule_matches_its_harness_real_idle_screen() {
        let adapters = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
        let mut checked = 0;
        for name in Adapters::Embedded.names() {
            let declaration = Adapters::Embedded.declaration(&name).expect("declaration");
            if declaration.readiness.is_none() {
                continue;
            }
            for state in ["idle-empty", "idle-answered"] {
                let path = adapters
                    .join(&name)
                    .join(format!("fixtures/screens/{state}.json"));
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
                let fixture: serde_json::Value = serde_json::from_str(&text).expect("fixture JSON");
                let lines: Vec<&str> = fixture["peek"]["lines"]
                    .as_array()
                    .expect("peek.lines")
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .collect();
                assert_eq!(
                    readiness_finding(&declaration, u64::MAX, &lines.join("\n")),
                    None,
                    "{name}: its {state} screen is judged not ready"
                );
            }
            assert!(
                readiness_finding(&declaration, u64::MAX, "\n\n").is_some(),
                "{name}: a blank screen is judged ready"
            );
            checked += 1;
        }
        assert!(checked > 0, "no built-in adapter has a readiness rule");
    }

    #[test]
    fn a_readiness_pattern_that_does_not_compile_is_never_ready() {
        let rule = declaration(Some("(unclosed"), 0);
        let finding = readiness_finding(&rule, 10_000, "(unclosed").expect("a finding");
        assert!(finding.problem.contains("does not compile"), "{finding:?}");
    }

    #[test]
    fn programs_are_found_on_path_or_by_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("tool");
        std::fs::write(&program, "#!/bin/sh\n").expect("write");
        let path = dir.path().display().to_string();
        assert_eq!(
            find_program("tool", Some(&path), None),
            None,
            "not executable"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(
            find_program("tool", Some(&path), None),
            Some(program.clone())
        );
        assert_eq!(
            find_program("./tool", None, Some(dir.path())),
            Some(dir.path().join("./tool"))
        );
        assert_eq!(find_program("tool", Some("/nonexistent"), None), None);
    }
}
