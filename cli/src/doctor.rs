//! `belfry doctor [NAME…]`: what is missing for each pane (or, when no pane runs, each agent of
//! `belfry.kdl`) to work as its adapter says — one line per finding, each with its fix, or
//! `--json`. The checks are the libraries': `belfry_mux::doctor` (the adapter, the DING adapter
//! executable, the program on `PATH`, readiness) and `belfry_hooks::project::doctor` (the
//! harness's version, the projected hooks and their trust). This file gathers each pane's
//! facts from its pane host (no daemon is started for it), runs the checks and prints them.
//! Exit codes: 0 when nothing is missing, 1 when something is, 2 on an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::Serialize;

use belfry_hooks::canonical::Scope;
use belfry_hooks::project::adapters::Adapters as HookAdapters;
use belfry_hooks::project::doctor as hooks_doctor;
use belfry_mux::adapters::Adapters;
use belfry_mux::client::Client;
use belfry_mux::doctor::{self as mux_doctor, Subject};
use belfry_proto::program_status::ProgramStatus;
use belfry_proto::reply::{PaneRecord, Screen};
use belfry_proto::request as op;
use belfry_proto::spec::LaunchSpec;
use belfry_proto::SessionName;
use belfry_transport::deadline::PANE_QUICK;
use belfry_transport::paths;

use crate::cmd::NotFound;
use crate::exit::{EXIT_NOT_FOUND, EXIT_OK};

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// The panes (or declared agents) to check (default: every pane, or every agent of the
    /// declarations file when no pane runs).
    names: Vec<String>,
    /// The declarations file: without NAMEs, check its agents (each as its pane when one runs
    /// under its name); with NAMEs, the file read for the ones that do not run (default:
    /// ./belfry.kdl, read only when no pane runs).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

/// One finding as printed.
#[derive(Debug, Clone, Serialize)]
struct Line {
    check: &'static str,
    problem: String,
    fix: String,
}

/// One pane or declared agent and what is missing for it.
#[derive(Debug, Serialize)]
struct Report {
    name: String,
    /// `pane` for a running pane, `declared` for an agent of the declarations file.
    source: &'static str,
    adapter: Option<String>,
    findings: Vec<Line>,
}

/// What the checks read about one subject.
struct Facts {
    name: String,
    source: &'static str,
    /// The launch spec; `None` for a pane host that did not give one (a finding says so).
    spec: Option<LaunchSpec>,
    /// The pane as its pane host shows it, for a running pane that answered.
    running: Option<Running>,
    /// Findings made while gathering (a pane that did not answer, an exited program).
    early: Vec<Line>,
}

/// What a running pane's pane host showed of it.
struct Running {
    /// Since its program started.
    age_ms: u64,
    /// Its lines, joined by newlines.
    screen: String,
    /// Its program's own status reports (OSC 7501) at that snapshot, and the incarnation
    /// (program) the snapshot is of.
    status: ProgramStatus,
    incarnation: String,
}

/// Runs `belfry doctor`.
pub fn run(args: DoctorArgs) -> Result<i32> {
    let facts = gather(&args)?;
    let adapters = Adapters::of_this_binary();
    let hook_adapters = HookAdapters::embedded().map_err(anyhow::Error::msg)?;
    let reports: Vec<Report> = facts
        .into_iter()
        .map(|facts| check(&adapters, &hook_adapters, facts))
        .collect();
    let missing = reports.iter().any(|report| !report.findings.is_empty());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else if reports.is_empty() {
        println!("no panes run and no agent is declared: nothing to check");
    } else {
        print!("{}", render(&reports));
    }
    Ok(if missing { EXIT_NOT_FOUND } else { EXIT_OK })
}

/// The text output: a header per subject, then one line per finding with its fix.
fn render(reports: &[Report]) -> String {
    let mut out = String::new();
    for report in reports {
        let adapter = report
            .adapter
            .as_deref()
            .map(|a| format!(", adapter {a}"))
            .unwrap_or_default();
        if report.findings.is_empty() {
            out.push_str(&format!(
                "{} ({}{adapter}): ok\n",
                report.name, report.source
            ));
            continue;
        }
        out.push_str(&format!("{} ({}{adapter}):\n", report.name, report.source));
        for line in &report.findings {
            out.push_str(&format!(
                "  {}: {} — fix: {}\n",
                line.check, line.problem, line.fix
            ));
        }
    }
    out
}

/// The subjects: the named ones (a pane if one runs under the name, else the declared agent),
/// or every pane, or, when none runs, every declared agent.
fn gather(args: &DoctorArgs) -> Result<Vec<Facts>> {
    let runtime = paths::runtime_dir();
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from("belfry.kdl"));
    let declared = || -> Result<Option<belfry_mux::declare::Declarations>> {
        if args.file.is_none() && !file.exists() {
            return Ok(None);
        }
        Ok(Some(belfry_mux::declare::load(&file)?))
    };
    // `--file FILE` names what to check: the agents FILE declares, each as its pane when one
    // runs under its name, else as declared. Before, any running pane made doctor check the
    // panes and ignore FILE.
    if args.names.is_empty() && args.file.is_some() {
        let decls = declared()?.unwrap_or_default();
        return Ok(decls
            .agents
            .iter()
            .map(|agent| {
                if paths::pane_socket(&runtime, &agent.name).exists() {
                    pane_facts(&runtime, &agent.name, None)
                } else {
                    declared_facts(agent)
                }
            })
            .collect());
    }
    if args.names.is_empty() {
        let panes = crate::direct::list(&runtime);
        if !panes.is_empty() {
            return Ok(panes
                .iter()
                .map(|pane| pane_facts(&runtime, &pane.session, Some(pane)))
                .collect());
        }
        return Ok(declared()?
            .map(|decls| decls.agents.iter().map(declared_facts).collect())
            .unwrap_or_default());
    }
    let mut decls = None;
    let mut out = Vec::new();
    for name in &args.names {
        if paths::pane_socket(&runtime, name).exists() {
            out.push(pane_facts(&runtime, name, None));
            continue;
        }
        if decls.is_none() {
            decls = Some(declared()?.unwrap_or_default());
        }
        match decls.as_ref().and_then(|d| d.get(name)) {
            Some(agent) => out.push(declared_facts(agent)),
            None => {
                return Err(NotFound(format!(
                    "no pane named {name:?} runs and {} declares no agent of that name",
                    file.display()
                ))
                .into())
            }
        }
    }
    Ok(out)
}

/// A declared agent as it would launch: this process's environment with the declared one over
/// it, as `belfry up` launches it.
fn declared_facts(agent: &belfry_mux::declare::AgentDecl) -> Facts {
    let mut spec = agent.launch_spec();
    spec.base_env = std::env::vars().collect();
    Facts {
        name: agent.name.clone(),
        source: "declared",
        spec: Some(spec),
        running: None,
        early: Vec::new(),
    }
}

/// A running pane, asked its launch spec and screen by its pane host.
fn pane_facts(runtime: &Path, session: &str, listed: Option<&PaneRecord>) -> Facts {
    let unreachable = |why: String| Facts {
        name: session.to_string(),
        source: "pane",
        spec: None,
        running: None,
        early: vec![Line {
            check: "pane-unreachable",
            problem: format!("the pane host of {session:?} did not answer: {why}"),
            fix: format!("`belfry ls` shows its state; `belfry kill {session}` if it is stuck"),
        }],
    };
    if let Some(error) = listed.and_then(|pane| pane.error.clone()) {
        return unreachable(error);
    }
    let socket = paths::pane_socket(runtime, session);
    let record = Client::connect_within(&socket, PANE_QUICK)
        .map_err(anyhow::Error::from)
        .and_then(|mut client| {
            client
                .call::<PaneRecord>(op::Info::default())?
                .into_result()
                .map_err(crate::cmd::refusal)
        });
    let record = match record {
        Ok(record) => record,
        Err(err) => return unreachable(format!("{err:#}")),
    };
    let spec: LaunchSpec = match record.spec.clone().map(serde_json::from_value) {
        Some(Ok(spec)) => spec,
        Some(Err(err)) => return unreachable(format!("its launch spec does not parse: {err}")),
        None => return unreachable("it gave no launch spec".to_string()),
    };
    let mut early = Vec::new();
    if let Some(Some(status)) = &record.exited {
        let how = match (status.code, status.signal) {
            (Some(code), _) => format!("with code {code}"),
            (None, Some(signal)) => format!("on signal {signal}"),
            _ => "".to_string(),
        };
        early.push(Line {
            check: "program-exited",
            problem: format!("the pane's program exited {how}"),
            fix: format!("`belfry restart {session}` (`belfry peek {session}` shows why)"),
        });
    }
    let snapshot = snapshot(runtime, session).ok();
    let age_ms = record
        .started_at
        .map(|started| crate::human::now_unix_ms().saturating_sub(started))
        .unwrap_or(0);
    let running = Running {
        age_ms,
        screen: snapshot
            .as_ref()
            .map(|screen| screen.lines.join("\n"))
            .unwrap_or_default(),
        status: snapshot
            .as_ref()
            .map(|screen| screen.program_status.clone())
            .unwrap_or_default(),
        incarnation: snapshot
            .map(|screen| screen.incarnation)
            .or(record.incarnation)
            .unwrap_or_default(),
    };
    Facts {
        name: session.to_string(),
        source: "pane",
        spec: Some(spec),
        running: early.is_empty().then_some(running),
        early,
    }
}

/// Why the rich DING policy would not be the default of the running pane `session` (its
/// adapter, working directory and program environment as its pane host has them), for `belfry
/// ding status` of a pane that delivers aggressively (issue 41 item 6); `None` when its adapter
/// ships no activity executable, the rich default would be chosen, or the pane cannot be asked.
fn rich_default_refusal(session: &str) -> Option<String> {
    const RICH_DEFAULT_ASK: std::time::Duration = std::time::Duration::from_millis(500);
    let runtime = paths::runtime_dir();
    let socket = paths::pane_socket(&runtime, session);
    // A decoration of `ding status`, never a wait: a pane host that does not answer at once
    // (stopped, busy) leaves the line out rather than holding the command up.
    let mut client = Client::connect_once(&socket, RICH_DEFAULT_ASK).ok()?;
    let record = client
        .call::<PaneRecord>(op::Info::default())
        .ok()?
        .into_result()
        .ok()?;
    let spec: LaunchSpec = serde_json::from_value(record.spec?).ok()?;
    let adapter = spec.adapter.clone()?;
    let dir = spec
        .cwd
        .as_ref()
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())?;
    crate::hooks::rich_default(&adapter, &dir, &program_env(&spec)).err()?
}

/// Why mail to a rich-policy pane of `adapter` waits for its first turn (issue 40), from the
/// adapter's declaration alone: `belfry new` asks before any harness version is known, so a
/// declaration with any reporting version is not judged here (`belfry doctor` judges it).
pub(crate) fn first_turn_note(adapter: &str) -> Option<String> {
    let declaration = Adapters::of_this_binary().declaration(adapter).ok()?;
    mux_doctor::first_turn_wait(&declaration, adapter, None)
}

/// Says once, on stderr, that mail to the new rich-policy agent `agent` waits for its first
/// turn, and why, when it does.
pub(crate) fn say_first_turn_wait(agent: &str, adapter: &str) {
    if let Some(why) = first_turn_note(adapter) {
        eprintln!(
            "belfry: {agent}: mail waits for its first turn: {why}; give it its first task \
             yourself (`belfry doctor` says more)"
        );
    }
}

/// What `belfry ding status` of a local pane adds to the daemon's answer: why the rich policy
/// is not the default of a pane that delivers aggressively (`rich_default`, issue 41 item 6, as
/// `belfry new` said when it started it), and why a rich-policy pane's mail waits for its first
/// turn (`first_turn`, issue 40).
pub(crate) fn explain_ding_status(session: &str, status: &mut serde_json::Value) {
    if status["policy"]["delivery"] == "aggressive" {
        if let (Some(why), Some(object)) = (rich_default_refusal(session), status.as_object_mut()) {
            object.insert(
                "rich_default".to_string(),
                serde_json::json!({"chosen": false, "why": why}),
            );
        }
    }
    first_turn_status(session, status);
}

/// Adds `first_turn` (`{"waits": true, "why": …}`) to a rich-policy pane's `ding status`
/// when its mail waits for the harness's first turn (issue 40), so that a message shown
/// `held:unknown` says why. A pane host that does not answer at once leaves it out.
fn first_turn_status(session: &str, status: &mut serde_json::Value) {
    if status["policy"]["delivery"] != belfry_ding::policy::RICH_POLICY_TOKEN {
        return;
    }
    const ASK: std::time::Duration = std::time::Duration::from_millis(500);
    let socket = paths::pane_socket(&paths::runtime_dir(), session);
    let Some(record) = Client::connect_once(&socket, ASK)
        .ok()
        .and_then(|mut client| client.call::<PaneRecord>(op::Info::default()).ok())
        .and_then(|reply| reply.into_result().ok())
    else {
        return;
    };
    let adapter = record
        .spec
        .and_then(|spec| serde_json::from_value::<LaunchSpec>(spec).ok())
        .and_then(|spec| spec.adapter);
    let (Some(why), Some(object)) = (
        adapter.as_deref().and_then(first_turn_note),
        status.as_object_mut(),
    ) else {
        return;
    };
    object.insert(
        "first_turn".to_string(),
        serde_json::json!({"waits": true, "why": why}),
    );
}

fn snapshot(runtime: &Path, session: &str) -> Result<Screen> {
    let name = SessionName::parse(session).context("session name")?;
    let request = op::Snapshot {
        session: Some(name.clone()),
        ..op::Snapshot::default()
    };
    crate::direct::snapshot(runtime, request, &name)
}

/// The environment the pane's program runs with (spec §2: the caller's, then the declared
/// variables, then the ones belfry adds).
fn program_env(spec: &LaunchSpec) -> BTreeMap<String, String> {
    let mut env = spec.base_env.clone();
    env.extend(spec.env.clone());
    env.extend(spec.extra_env.clone());
    // The pane host puts its own folder first on the program's PATH (so the program and the
    // hooks it runs reach the belfry that started the pane); a hook is judged with that PATH,
    // the one the harness passes on to it, not the spec's alone.
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.display().to_string()))
    {
        let rest = env.get("PATH").cloned().unwrap_or_default();
        let path = std::iter::once(dir.as_str())
            .chain(rest.split(':').filter(|e| !e.is_empty() && *e != dir))
            .collect::<Vec<_>>()
            .join(":");
        env.insert("PATH".to_string(), path);
    }
    env
}

fn check(adapters: &Adapters, hook_adapters: &HookAdapters, facts: Facts) -> Report {
    let Facts {
        name,
        source,
        spec,
        running,
        early,
    } = facts;
    let mut findings = early;
    let Some(spec) = spec else {
        return Report {
            name,
            source,
            adapter: None,
            findings,
        };
    };
    let env = program_env(&spec);
    let cwd = spec.cwd.as_ref().map(PathBuf::from);
    let subject = Subject {
        adapter: spec.adapter.as_deref(),
        argv: &spec.argv,
        adapter_command: spec.adapter_command.as_deref(),
        ding_policy: spec.ding_policy.as_deref(),
        env: &env,
        cwd: cwd.as_deref(),
    };
    let mut found = |finding: mux_doctor::Finding| {
        findings.push(Line {
            check: finding.check,
            problem: finding.problem,
            fix: finding.fix,
        })
    };
    let program_missing = mux_doctor::program_finding(&subject);
    let harness_absent = program_missing.is_some();
    if let Some(finding) = program_missing {
        found(finding);
    }
    if let Some(finding) = mux_doctor::adapter_command_finding(adapters, &subject) {
        found(finding);
    }
    let mut hook_lines = Vec::new();
    if let Some(adapter) = spec.adapter.as_deref() {
        match mux_doctor::adapter_declaration(adapters, adapter) {
            Err(finding) => found(finding),
            Ok(declaration) => {
                if let Some(finding) = mux_doctor::hook_shell_finding(&declaration, &subject) {
                    found(finding);
                }
                let not_ready = running.as_ref().and_then(|running| {
                    mux_doctor::readiness_finding(&declaration, running.age_ms, &running.screen)
                });
                let ready = not_ready.is_none();
                if let Some(finding) = not_ready {
                    found(finding);
                }
                let version;
                (hook_lines, version) = harness_findings(
                    hook_adapters,
                    adapter,
                    &subject,
                    harness_absent,
                    cwd.as_deref(),
                );
                // Issue 40: a harness version declared to report its own state that has said
                // nothing well after it became ready.
                if let (Some(running), Some(version), true) = (&running, &version, ready) {
                    if let Some(finding) = mux_doctor::program_status_finding(
                        &declaration,
                        &name,
                        adapter,
                        version,
                        running.age_ms,
                        &running.status,
                        &running.incarnation,
                    ) {
                        found(finding);
                    }
                }
                // Issue 40: a rich-policy pane whose harness says neither its state nor a
                // fresh start holds its mail until its first turn ends.
                if let Some(finding) = mux_doctor::first_turn_finding(
                    &declaration,
                    &name,
                    adapter,
                    version.as_deref(),
                    subject.ding_policy,
                ) {
                    found(finding);
                }
            }
        }
    }
    findings.extend(hook_lines);
    Report {
        name,
        source,
        adapter: spec.adapter.clone(),
        findings,
    }
}

/// The harness's version and its hooks, for an adapter the projection knows; and the version
/// the pane's harness answered, if it did.
fn harness_findings(
    adapters: &HookAdapters,
    adapter: &str,
    subject: &Subject<'_>,
    harness_absent: bool,
    cwd: Option<&Path>,
) -> (Vec<Line>, Option<String>) {
    let mut lines = Vec::new();
    let mut push = |finding: hooks_doctor::Finding| {
        lines.push(Line {
            check: finding.check,
            problem: finding.problem,
            fix: finding.fix,
        })
    };
    let program = subject.argv.first().map(String::as_str).unwrap_or_default();
    // The version the hooks are judged against: the one the pane's harness answers.
    let mut detected_version = None;
    let mut version_reported = false;
    if let Some(asked) = hooks_doctor::version_argv(adapters, adapter, program) {
        let path = subject.env.get("PATH").map(String::as_str);
        let found = mux_doctor::find_program(&asked[0], path, cwd);
        let detected = found.as_ref().and_then(|found| {
            let packages = adapters
                .by_name
                .get(adapter)
                .map(|data| data.matrix.detect_packages.as_slice())
                .unwrap_or_default();
            crate::harness_version::version_of(
                &found.display().to_string(),
                &asked[1..],
                packages,
                crate::harness_version::VERSION_DEADLINE,
            )
        });
        // A program the pane runs that is not there was reported already; a harness asked by
        // another name (the agent runs it through a wrapper) is reported here.
        let already = harness_absent && found.is_none() && asked[0] == program;
        // An unanswered or unadmitted version is reported here once, with its fix; the
        // hooks' own `hooks-unverified` would only say it again.
        version_reported = true;
        if !already {
            if let Some(finding) =
                hooks_doctor::version_finding(adapters, adapter, &asked, detected.as_deref())
            {
                push(finding);
            }
        }
        detected_version = detected;
    }
    if adapters.by_name.contains_key(adapter) {
        let dir = cwd
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok());
        let contexts = dir.and_then(|dir| {
            let project = crate::hooks::context_in(&dir, Scope::Project, subject.env.clone());
            let user = crate::hooks::context_in(&dir, Scope::User, subject.env.clone());
            project.and_then(|p| user.map(|u| (p, u))).ok()
        });
        match contexts {
            Some((mut project, mut user)) => {
                if let Some(version) = &detected_version {
                    for context in [&mut project, &mut user] {
                        context
                            .harness_versions
                            .insert(adapter.to_string(), version.clone());
                    }
                }
                for finding in hooks_doctor::hooks_findings(&project, &user, adapter) {
                    if version_reported && finding.check == "hooks-unverified" {
                        continue;
                    }
                    push(finding);
                }
            }
            None => push(hooks_doctor::Finding {
                check: "hooks-state",
                problem: format!(
                    "the pane's working directory {} cannot be read",
                    cwd.map(|c| c.display().to_string()).unwrap_or_default()
                ),
                fix: "give the agent a `cwd` that exists".to_string(),
            }),
        }
    }
    (lines, detected_version)
}
