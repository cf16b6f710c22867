//! `belfry doctor` against real panes (real pane hosts, the real daemon, real files): each
//! finding is named with its fix — a DING adapter executable that is not there, hooks never
//! applied, a Codex hook the harness does not trust (until `belfry hooks apply --trust`), a
//! harness not ready by its adapter's readiness rule, an unknown adapter, a harness version
//! outside the matrix — and the exit code says whether anything is missing.
//!
//! The harnesses are small real programs on the panes' PATH named like the harness (`codex`,
//! `claude`, `opencode`, `pi`): `--version` prints the version line the pinned harness prints,
//! anything else draws the line its adapter's readiness rule looks for and waits. The checks
//! read only the program's name, its version answer and its screen, so the installed harnesses
//! are not needed here. The shell a harness runs its hooks in is a small script too, one that
//! keeps the pane's PATH and one that resets it as a login profile may.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use belfry_tests::{eventually, Env};
use serde_json::Value;

/// The canonical hook file of the Codex project: one observer, projected to Codex only.
const CODEX_HOOKS: &str = r#"
hook "audit" {
  event "after-tool"
  intent "observe"
  command "audit-log"
  targets "codex"
}
"#;

/// Writes `bin/NAME`: `--version` prints `version`; otherwise it waits for `gate` (when given)
/// to exist, prints `screen` and sleeps.
fn fake_harness(env: &Env, name: &str, version: &str, screen: &str, gate: Option<&Path>) {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let wait = gate
        .map(|gate| format!("while [ ! -e '{}' ]; do sleep 0.1; done\n", gate.display()))
        .unwrap_or_default();
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\n\
         echo 'starting'\n{wait}printf '%s\\n' '{screen}'\nexec sleep 600\n"
    );
    let path = bin.join(name);
    std::fs::write(&path, script).expect("write fake harness");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// An environment whose PATH starts with the fake harnesses and whose harness homes are its own.
fn doctor_env() -> Env {
    let mut env = Env::new();
    let path = format!(
        "{}:{}:{}",
        env.path("bin").display(),
        belfry_tests::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = env.path("home");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir codex home");
    // The shell a harness runs its hook commands in (Codex: `$SHELL -c`): these keep the
    // pane's PATH, or reset it to the system's; the third resets it only as a login shell
    // (`-l`), as a login profile does (Debian's /etc/profile sets PATH outright).
    let keeping = shell(&env, "keeping-shell", "exec /bin/sh -c \"$2\"");
    shell(
        &env,
        "resetting-shell",
        "PATH=/usr/bin:/bin exec /bin/sh -c \"$2\"",
    );
    shell(
        &env,
        "login-resetting-shell",
        "case \"$1\" in -l*) PATH=/usr/bin:/bin ;; esac; exec /bin/sh -c \"$2\"",
    );
    env.extra = vec![
        ("SHELL".into(), keeping.display().to_string()),
        ("PATH".into(), path),
        ("HOME".into(), home.display().to_string()),
        (
            "CODEX_HOME".into(),
            home.join(".codex").display().to_string(),
        ),
        ("BELFRY_HOOKS_DETECT".into(), "0".into()),
    ];
    env
}

/// Writes `shells/NAME`, a shell taking `-lc COMMAND` that runs `body`.
fn shell(env: &Env, name: &str, body: &str) -> PathBuf {
    let dir = env.path("shells");
    std::fs::create_dir_all(&dir).expect("mkdir shells");
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write shell");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn project(env: &Env, name: &str) -> PathBuf {
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).expect("mkdir project");
    std::fs::canonicalize(&dir).expect("canonical project")
}

fn doctor(env: &Env, args: &[&str]) -> Output {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    env.run(&all)
}

/// `belfry doctor --json ARGS`: the exit code and the reports by name.
fn doctor_json(env: &Env, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = doctor(env, &all);
    let text = String::from_utf8_lossy(&out.stdout);
    let reports: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|err| {
        panic!(
            "doctor --json printed no JSON ({err}):\n{text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), reports)
}

fn report<'a>(reports: &'a [Value], name: &str) -> &'a Value {
    reports
        .iter()
        .find(|report| report["name"] == name)
        .unwrap_or_else(|| panic!("no report for {name}: {reports:#?}"))
}

fn checks(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .map(|findings| {
            findings
                .iter()
                .map(|f| f["check"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .and_then(|findings| findings.iter().find(|f| f["check"] == check))
        .unwrap_or_else(|| panic!("no {check} finding: {report:#}"))
}

#[test]
fn doctor_names_a_missing_adapter_executable_unapplied_hooks_and_an_untrusted_codex_hook() {
    let env = doctor_env();
    fake_harness(&env, "codex", "codex-cli 0.169.0", "› Ask Codex", None);
    fake_harness(&env, "claude", "2.1.337 (Claude Code)", "❯ ", None);
    let codex_project = project(&env, "codex-project");
    let claude_project = project(&env, "claude-project");
    std::fs::write(codex_project.join("belfry-hooks.kdl"), CODEX_HOOKS).expect("write hooks");
    let dir = codex_project.display().to_string();
    env.ok(&["hooks", "--dir", &dir, "apply"]);
    // Codex trusts the project folder (the user's decision, recorded in its config), so what
    // is left untrusted is the hook entry itself.
    std::fs::write(
        env.path("home/.codex/config.toml"),
        format!("[projects.\"{dir}\"]\ntrust_level = \"trusted\"\n"),
    )
    .expect("write codex config");
    env.ok(&[
        "new",
        "reviewer",
        "--cwd",
        &dir,
        "--adapter",
        "codex",
        "--ding-delivery",
        "turn-boundary+fresh-idle",
        "--ding-adapter",
        "/nonexistent/belfry-adapter-codex",
        "--",
        "codex",
    ]);
    env.ok(&[
        "new",
        "coder",
        "--cwd",
        &claude_project.display().to_string(),
        "--adapter",
        "claude",
        "--",
        "claude",
    ]);
    env.wait_screen("reviewer", "(?m)^› ");
    env.wait_screen("coder", "(?m)^❯");

    let (code, reports) = doctor_json(&env, &[]);
    assert_eq!(code, Some(1), "something is missing: {reports:#?}");
    let reviewer = report(&reports, "reviewer");
    assert_eq!(reviewer["source"], "pane");
    assert_eq!(
        checks(reviewer),
        ["adapter-executable", "hooks-untrusted"],
        "{reviewer:#}"
    );
    let missing = finding(reviewer, "adapter-executable");
    assert!(
        missing["problem"]
            .as_str()
            .is_some_and(|p| p.contains("/nonexistent/belfry-adapter-codex")),
        "{missing:#}"
    );
    let untrusted = finding(reviewer, "hooks-untrusted");
    let problem = untrusted["problem"].as_str().unwrap_or_default();
    assert!(
        problem.contains(&format!("{dir}/.codex/hooks.json:post_tool_use:0:0"))
            && problem.contains("untrusted — run codex and review hooks, or apply --trust"),
        "{untrusted:#}"
    );
    assert!(
        untrusted["fix"]
            .as_str()
            .is_some_and(|f| f.contains(&format!("belfry hooks --dir {dir} apply --trust"))),
        "{untrusted:#}"
    );
    let coder = report(&reports, "coder");
    assert_eq!(checks(coder), ["hooks-not-applied"], "{coder:#}");
    assert!(
        finding(coder, "hooks-not-applied")["problem"]
            .as_str()
            .is_some_and(|p| p.contains("no hook targets claude")),
        "{coder:#}"
    );

    // The text output: one line per finding, each with its fix.
    let out = doctor(&env, &["reviewer"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "reviewer (pane, adapter codex):", "{text}");
    assert!(
        lines[1].starts_with("  adapter-executable: ") && lines[1].contains(" — fix: "),
        "{text}"
    );
    assert!(
        lines[2].starts_with("  hooks-untrusted: ") && lines[2].contains(" — fix: "),
        "{text}"
    );

    // The fix named works: trusted, the hook is no longer a finding.
    env.ok(&["hooks", "--dir", &dir, "apply", "--trust"]);
    let (_, reports) = doctor_json(&env, &["reviewer"]);
    assert_eq!(
        checks(report(&reports, "reviewer")),
        ["adapter-executable"],
        "{reports:#?}"
    );
}

#[test]
fn doctor_reports_a_harness_not_ready_until_its_readiness_rule_matches() {
    let env = doctor_env();
    let gate = env.path("ready-now");
    fake_harness(
        &env,
        "opencode",
        "1.18.33",
        "  Ask anything...",
        Some(&gate),
    );
    let dir = project(&env, "project").display().to_string();
    env.ok(&[
        "new",
        "slow",
        "--cwd",
        &dir,
        "--adapter",
        "opencode",
        "--",
        "opencode",
    ]);
    env.wait_screen("slow", "starting");
    let (code, reports) = doctor_json(&env, &["slow"]);
    assert_eq!(code, Some(1));
    let slow = report(&reports, "slow");
    let not_ready = finding(slow, "not-ready");
    assert!(
        not_ready["problem"]
            .as_str()
            .is_some_and(|p| p.contains("\"Ask anything|▣|ctrl\\\\+p commands\"")
                && p.contains("A send before it is lost")),
        "{not_ready:#}"
    );

    std::fs::write(&gate, "").expect("open the gate");
    env.wait_screen("slow", "Ask anything");
    let ready = eventually(Duration::from_secs(5), || {
        let (_, reports) = doctor_json(&env, &["slow"]);
        !checks(report(&reports, "slow")).contains(&"not-ready".to_string())
    });
    assert!(ready, "still not ready once the composer is drawn");
}

#[test]
fn doctor_checks_declared_agents_when_no_pane_runs() {
    let env = doctor_env();
    fake_harness(&env, "pi", "0.60.0", "─", None);
    fake_harness(&env, "codex", "codex-cli 0.169.0", "› ", None);
    let dir = project(&env, "project");
    let file = dir.join("belfry.kdl");
    let resetting = env.path("shells/resetting-shell").display().to_string();
    std::fs::write(
        &file,
        format!(
            r#"
agent "shell" {{ command "sh"; }}
agent "old-pi" {{ command "pi"; adapter "pi"; }}
agent "absent" {{ command "gemini"; adapter "gemini"; }}
agent "typo" {{ command "sh"; adapter "no-such-adapter"; }}
agent "login-path" {{ command "codex"; adapter "codex"; env {{ SHELL "{resetting}"; }} }}
"#
        ),
    )
    .expect("write belfry.kdl");
    let file = file.display().to_string();

    let (code, reports) = doctor_json(&env, &["--file", &file]);
    assert_eq!(code, Some(1));
    assert_eq!(reports.len(), 5, "{reports:#?}");
    assert!(
        reports.iter().all(|r| r["source"] == "declared"),
        "{reports:#?}"
    );
    assert_eq!(checks(report(&reports, "shell")), Vec::<String>::new());
    let old = report(&reports, "old-pi");
    assert_eq!(
        checks(old),
        ["harness-version", "hooks-not-applied"],
        "{old:#}"
    );
    assert!(
        finding(old, "harness-version")["problem"]
            .as_str()
            .is_some_and(|p| p.contains("0.60.0") && p.contains(">=0.73.1 <1.7.0")),
        "{old:#}"
    );
    let absent = report(&reports, "absent");
    assert_eq!(checks(absent)[0], "harness-missing", "{absent:#}");
    assert!(
        finding(absent, "harness-missing")["problem"]
            .as_str()
            .is_some_and(|p| p.contains("\"gemini\" is not found")),
        "{absent:#}"
    );
    let typo = report(&reports, "typo");
    assert_eq!(checks(typo), ["adapter-unknown"], "{typo:#}");
    assert!(
        finding(typo, "adapter-unknown")["problem"]
            .as_str()
            .is_some_and(|p| p.contains("\"no-such-adapter\"")),
        "{typo:#}"
    );

    // Its hook shell resets PATH, so the projected hooks would not find belfry.
    let login = report(&reports, "login-path");
    assert_eq!(
        checks(login),
        ["hooks-no-belfry", "hooks-not-applied"],
        "{login:#}"
    );
    assert!(
        finding(login, "hooks-no-belfry")["problem"]
            .as_str()
            .is_some_and(|p| p.contains(&format!("`{resetting} -c COMMAND`"))),
        "{login:#}"
    );

    // An agent with nothing missing: exit 0, and the text says so.
    let out = doctor(&env, &["--file", &file, "shell"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "shell (declared): ok\n"
    );

    // A name that is neither a pane nor declared: not found, naming it.
    let out = doctor(&env, &["--file", &file, "nobody"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"nobody\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 41 item 6: `hooks-no-belfry` is judged the way Codex runs a hook. Codex 0.171.0 runs
/// it as the account's shell with `-c`, not as a login shell, with its own environment, whose
/// PATH has belfry's folder first (the pane host puts it there). So a login profile that
/// resets PATH, and a declared PATH without belfry's folder, lose nothing, and no finding is
/// made; a shell that resets PATH even with `-c` still loses belfry (the test above).
#[test]
fn a_codex_hook_is_judged_with_the_shell_and_path_codex_runs_it_with() {
    let env = doctor_env();
    fake_harness(&env, "codex", "codex-cli 0.171.0", "› ", None);
    let dir = project(&env, "project");
    let file = dir.join("belfry.kdl");
    let login_resetting = env
        .path("shells/login-resetting-shell")
        .display()
        .to_string();
    let fakes = env.path("bin").display().to_string();
    std::fs::write(
        &file,
        format!(
            r#"
agent "profile" {{ command "codex"; adapter "codex"; env {{ SHELL "{login_resetting}"; PATH "{fakes}:/usr/bin:/bin"; }} }}
"#
        ),
    )
    .expect("write belfry.kdl");
    let (_, reports) = doctor_json(&env, &["--file", &file.display().to_string()]);
    let profile = report(&reports, "profile");
    assert_eq!(checks(profile), ["hooks-not-applied"], "{profile:#}");
}

#[test]
fn doctor_file_checks_the_files_agents_while_an_other_pane_runs() {
    let env = doctor_env();
    // A pane the file does not declare runs: before, doctor then checked it and ignored FILE.
    env.spawn("bystander", "24x80", &["sleep", "600"], None);
    let dir = project(&env, "project");
    let file = dir.join("belfry.kdl");
    std::fs::write(
        &file,
        "agent \"shell\" { command \"sh\"; }\nagent \"absent\" { command \"gemini\"; adapter \"gemini\"; }\n",
    )
    .expect("write belfry.kdl");
    let file = file.display().to_string();
    let (code, reports) = doctor_json(&env, &["--file", &file]);
    assert_eq!(code, Some(1), "{reports:#?}");
    let names: Vec<&str> = reports
        .iter()
        .filter_map(|report| report["name"].as_str())
        .collect();
    assert_eq!(names, ["shell", "absent"], "{reports:#?}");
    assert!(
        reports.iter().all(|r| r["source"] == "declared"),
        "{reports:#?}"
    );
    assert_eq!(
        checks(report(&reports, "absent"))[0],
        "harness-missing",
        "{reports:#?}"
    );
    // An agent of the file that runs is checked as its pane.
    env.spawn("shell", "24x80", &["sh"], None);
    let (_, reports) = doctor_json(&env, &["--file", &file]);
    assert_eq!(report(&reports, "shell")["source"], "pane", "{reports:#?}");
    assert_eq!(
        report(&reports, "absent")["source"],
        "declared",
        "{reports:#?}"
    );
    assert_eq!(reports.len(), 2, "{reports:#?}");
    env.ok(&["shutdown", "--kill-panes"]);
}

/// Issue 41: a Pi 1.x pane whose project Pi does not trust (since Pi 0.79 a project's
/// `.pi/extensions` load only once it is) is named like Codex's untrusted hook: the check
/// `hooks-untrusted`, the reason Pi's trust store gives, and the fix `apply --trust`; once
/// that has run, the finding is gone. Pi's trust is a file in its agent directory, so the pane
/// runs a stand-in named `pi` that answers the version 1.6.0 and draws the editor's rule.
#[test]
fn doctor_names_a_pi_project_pi_does_not_trust_and_the_trust_fix() {
    let env = doctor_env();
    let rule = "─".repeat(40);
    fake_harness(&env, "pi", "1.6.0", &rule, None);
    let dir = project(&env, "pi-project");
    std::fs::write(
        dir.join("belfry-hooks.kdl"),
        include_str!("../../examples/pi/belfry-hooks.kdl"),
    )
    .expect("write hooks");
    let dir_text = dir.display().to_string();
    env.ok(&["hooks", "--dir", &dir_text, "apply"]);
    assert!(dir.join(".pi/extensions/belfry.ts").is_file());
    env.ok(&[
        "new",
        "pi-agent",
        "--cwd",
        &dir_text,
        "--adapter",
        "pi",
        "--",
        "pi",
    ]);
    env.wait_screen("pi-agent", "(?m)^─{20,}$");

    let (code, reports) = doctor_json(&env, &["pi-agent"]);
    assert_eq!(code, Some(1), "the projection is inert: {reports:#?}");
    let pane = report(&reports, "pi-agent");
    assert_eq!(checks(pane), ["hooks-untrusted"], "{pane:#}");
    let untrusted = finding(pane, "hooks-untrusted");
    assert!(
        untrusted["problem"]
            .as_str()
            .is_some_and(|p| p.contains("pi") && p.contains("not trusted by Pi")),
        "{untrusted:#}"
    );
    assert!(
        untrusted["fix"]
            .as_str()
            .is_some_and(|f| f.contains(&format!("belfry hooks --dir {dir_text} apply --trust"))),
        "{untrusted:#}"
    );

    // The fix named works: Pi's trust.json records the project, and doctor finds nothing.
    env.ok(&["hooks", "--dir", &dir_text, "apply", "--trust"]);
    let trust = std::fs::read_to_string(env.path("home/.pi/agent/trust.json"))
        .expect("apply --trust wrote Pi's trust.json");
    assert!(trust.contains(&dir_text), "{trust}");
    let (code, reports) = doctor_json(&env, &["pi-agent"]);
    assert_eq!(code, Some(0), "{reports:#?}");
    assert!(
        checks(report(&reports, "pi-agent")).is_empty(),
        "{reports:#?}"
    );
}

/// Issue 41 item 4: a declared Qwen Code agent is checked like the others: a version outside
/// the matrix and unapplied hooks are named; once applied at the verified version it is ok;
/// when the user turns Qwen Code's folder trust on (`security.folderTrust.enabled`, off by
/// default) the untrusted project's hooks are inert, until `~/.qwen/trustedFolders.json`
/// trusts the folder.
#[test]
fn doctor_checks_a_declared_qwen_agent_version_hooks_and_folder_trust() {
    let env = doctor_env();
    fake_harness(
        &env,
        "qwen",
        "0.23.1",
        "Type your message or @path/to/file",
        None,
    );
    let dir = project(&env, "qwen-project");
    std::fs::write(
        dir.join("belfry-hooks.kdl"),
        "hook \"audit\" { event \"after-tool\"; intent \"observe\"; command \"sh\" \"-c\" \"true\"; targets \"qwen\" }\n",
    )
    .expect("write hooks");
    let file = dir.join("belfry.kdl");
    std::fs::write(
        &file,
        "agent \"q\" { command \"qwen\"; adapter \"qwen\"; }\n",
    )
    .expect("write belfry.kdl");
    let file = file.display().to_string();
    let (code, reports) = doctor_json(&env, &["--file", &file, "q"]);
    assert_eq!(code, Some(1));
    let q = report(&reports, "q");
    assert_eq!(checks(q), ["harness-version", "hooks-not-applied"], "{q:#}");
    assert!(
        finding(q, "harness-version")["problem"]
            .as_str()
            .is_some_and(|p| p.contains("0.23.1") && p.contains(">=0.24.4 <0.25.0")),
        "{q:#}"
    );

    fake_harness(
        &env,
        "qwen",
        "0.24.4",
        "Type your message or @path/to/file",
        None,
    );
    env.ok(&["hooks", "--dir", &dir.display().to_string(), "apply"]);
    let (code, reports) = doctor_json(&env, &["--file", &file, "q"]);
    let q = report(&reports, "q");
    assert_eq!((code, checks(q)), (Some(0), Vec::<String>::new()), "{q:#}");

    let qwen_home = env.path("home/.qwen");
    std::fs::create_dir_all(&qwen_home).expect("mkdir qwen home");
    std::fs::write(
        qwen_home.join("settings.json"),
        "{\n  // folder trust turned on\n  \"security\": {\"folderTrust\": {\"enabled\": true}}\n}\n",
    )
    .expect("write qwen settings");
    let (code, reports) = doctor_json(&env, &["--file", &file, "q"]);
    let q = report(&reports, "q");
    assert_eq!(
        (code, checks(q)),
        (Some(1), vec!["hooks-inert".to_string()]),
        "{q:#}"
    );
    assert!(
        finding(q, "hooks-inert")["problem"]
            .as_str()
            .is_some_and(|p| p.contains("folder trust is on") && p.contains("trustedFolders.json")),
        "{q:#}"
    );

    let trusted = serde_json::json!({ dir.display().to_string(): "TRUST_FOLDER" });
    std::fs::write(qwen_home.join("trustedFolders.json"), trusted.to_string())
        .expect("write trusted folders");
    let (code, reports) = doctor_json(&env, &["--file", &file, "q"]);
    let q = report(&reports, "q");
    assert_eq!((code, checks(q)), (Some(0), Vec::<String>::new()), "{q:#}");
}

/// Writes `bin/NAME`, a harness that reports its own state: `--version` prints `version`;
/// otherwise it draws `screen` and, when its first argument is `report`, writes an OSC 7501
/// `idle` report, then sleeps.
fn reporting_harness(env: &Env, name: &str, version: &str, screen: &str) {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\n\
         printf '%s\\n' '{screen}'\n\
         if [ \"$1\" = report ]; then printf '\\033]7501;state=idle:app=fake\\033\\\\'; fi\n\
         exec sleep 600\n"
    );
    let path = bin.join(name);
    std::fs::write(&path, script).expect("write fake harness");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Issue 40 item 5: a pane whose harness version its adapter declares to report its own state
/// (adapters/claude/declaration.json `program_status`: 2.1.328 and 2.1.337 emit, and it asks
/// first) and that, ready for 10 s, has reported nothing is named, with the fix: here the pane
/// host answered no query, so the fix is about the query. A pane of the same version that
/// reported, or one younger than the grace, is not named.
#[test]
fn doctor_names_a_ready_pane_whose_harness_should_report_its_state_and_has_not() {
    let env = doctor_env();
    reporting_harness(&env, "claude", "2.1.337 (Claude Code)", "❯ ");
    let dir = project(&env, "project").display().to_string();
    for (name, arg) in [("silent", "quiet"), ("reporting", "report")] {
        env.ok(&[
            "new",
            name,
            "--cwd",
            &dir,
            "--adapter",
            "claude",
            "--",
            "claude",
            arg,
        ]);
        env.wait_screen(name, "❯");
    }
    let status_checks = |reports: &[Value], name: &str| {
        checks(report(reports, name)).contains(&"program-status-silent".to_string())
    };
    // Just started: not yet.
    let (_, reports) = doctor_json(&env, &["silent", "reporting"]);
    assert!(!status_checks(&reports, "silent"), "{reports:#?}");

    let mut last = Vec::new();
    let found = eventually(Duration::from_secs(20), || {
        last = doctor_json(&env, &["silent", "reporting"]).1;
        status_checks(&last, "silent")
    });
    assert!(found, "the silent pane was never named: {last:#?}");
    let silent = finding(report(&last, "silent"), "program-status-silent");
    assert!(
        silent["problem"]
            .as_str()
            .is_some_and(|p| p.contains("2.1.337") && p.contains("answered 0 status queries")),
        "{silent:#}"
    );
    assert!(
        silent["fix"]
            .as_str()
            .is_some_and(|f| f.contains("answered none") && f.contains("belfry restart silent")),
        "{silent:#}"
    );
    assert!(!status_checks(&last, "reporting"), "{last:#?}");
}

/// A harness version older than every version the declaration checked is not judged: nothing
/// says whether it reports.
#[test]
fn doctor_does_not_judge_a_harness_version_the_declaration_never_checked() {
    let env = doctor_env();
    reporting_harness(&env, "codex", "codex-cli 0.150.0", "› ");
    let dir = project(&env, "project").display().to_string();
    env.ok(&[
        "new",
        "old",
        "--cwd",
        &dir,
        "--adapter",
        "codex",
        "--",
        "codex",
        "quiet",
    ]);
    env.wait_screen("old", "›");
    std::thread::sleep(Duration::from_millis(10_500));
    let (_, reports) = doctor_json(&env, &["old"]);
    assert!(
        !checks(report(&reports, "old")).contains(&"program-status-silent".to_string()),
        "{reports:#?}"
    );
}

/// Issue 40: under the rich policy, a harness that reports no program status and whose adapter
/// declares no fresh start holds a just-started agent's mail until its first turn ends.
/// `belfry new` says so once, `belfry ding status` shows why next to what is held, and
/// `belfry doctor` names it (`mail-waits-first-turn`) with the fix. Here the adapters folder is
/// a copy whose gemini declaration has lost its `fresh_start`; with the real declaration (the
/// fresh start proved live in tests/tests/fresh_mail_live.rs) none of the three says it.
#[test]
fn a_rich_pane_whose_harness_proves_no_fresh_start_is_said_to_wait_for_its_first_turn() {
    let workspace = belfry_tests::live::workspace();
    for declared in [false, true] {
        let mut env = doctor_env();
        if !declared {
            let adapters = env.path("adapters");
            let copied = std::process::Command::new("cp")
                .arg("-r")
                .arg(workspace.join("adapters"))
                .arg(&adapters)
                .status()
                .expect("cp adapters");
            assert!(copied.success());
            let path = adapters.join("gemini/declaration.json");
            let mut declaration: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
            assert!(declaration
                .as_object_mut()
                .and_then(|d| d.remove("fresh_start"))
                .is_some());
            std::fs::write(&path, declaration.to_string()).expect("write declaration");
            env.extra
                .push(("BELFRY_ADAPTERS".into(), adapters.display().to_string()));
        }
        fake_harness(
            &env,
            "gemini",
            "0.61.0",
            "Type your message or @path/to/file",
            None,
        );
        let dir = project(&env, "project");
        std::fs::copy(
            workspace.join("examples/gemini/belfry-hooks.kdl"),
            dir.join("belfry-hooks.kdl"),
        )
        .expect("copy the hooks file");
        let dir = dir.display().to_string();
        // Gemini CLI registers project hooks only in a folder it trusts (the user's choice).
        let gemini_home = env.path("home/.gemini");
        std::fs::create_dir_all(&gemini_home).expect("mkdir gemini home");
        std::fs::write(
            gemini_home.join("trustedFolders.json"),
            serde_json::json!({ &dir: "TRUST_FOLDER" }).to_string(),
        )
        .expect("write trusted folders");
        env.ok(&["hooks", "--dir", &dir, "apply", "--trust"]);
        let new = env.run(&[
            "new",
            "w",
            "--cwd",
            &dir,
            "--adapter",
            "gemini",
            "--",
            "gemini",
        ]);
        assert!(new.status.success(), "{new:?}");
        let said = String::from_utf8_lossy(&new.stderr).into_owned();
        env.wait_screen("w", "Type your message");
        let status = env.ding_status("w");
        assert_eq!(
            status["policy"]["delivery"], "turn-boundary+fresh-idle",
            "{status:#}"
        );
        let (_, reports) = doctor_json(&env, &["w"]);
        let named = checks(report(&reports, "w")).contains(&"mail-waits-first-turn".to_string());
        if declared {
            assert!(!said.contains("first turn"), "{said}");
            assert!(status.get("first_turn").is_none(), "{status:#}");
            assert!(!named, "{reports:#?}");
            continue;
        }
        assert_eq!(
            said.matches("mail waits for its first turn").count(),
            1,
            "belfry new said it not exactly once: {said}"
        );
        assert!(said.contains("declares no session start"), "{said}");
        assert_eq!(status["first_turn"]["waits"], true, "{status:#}");
        assert!(
            status["first_turn"]["why"]
                .as_str()
                .is_some_and(|why| why.contains("held: unknown")),
            "{status:#}"
        );
        let human = env.run(&["ding", "status", "w"]);
        assert!(
            String::from_utf8_lossy(&human.stdout).contains("first turn: mail waits for it"),
            "{human:?}"
        );
        let finding = finding(report(&reports, "w"), "mail-waits-first-turn");
        assert!(
            finding["problem"]
                .as_str()
                .is_some_and(|p| p.contains("version 0.61.0")),
            "{finding:#}"
        );
        assert!(
            finding["fix"]
                .as_str()
                .is_some_and(|f| f.contains("belfry ding status w")),
            "{finding:#}"
        );
    }
}
