//! spec §9, live: the projection `belfry hooks apply` writes for Qwen Code really runs, and
//! `belfry hooks plan`'s cells for it match what the real harness does. The real Qwen Code
//! 0.24.4 (`qwen -p`, OpenAI-compatible auth pointed at the server by `OPENAI_BASE_URL`) talks
//! to the project's scripted model server inside a loopback-only network namespace.
//!
//! - The guarded project (a force-push guard, a notes enricher): the guard's deny blocks the
//!   shell tool (the scripted command's side effect never happens, the model sees the refusal)
//!   and the enricher's context reaches the first request (and, `prompt-submit` being lossy,
//!   the request that carries the tool's result again). Then `belfry hooks uninstall` leaves
//!   the user's own `.qwen/settings.json` (with a comment, which Qwen Code reads, and the
//!   `$version` Qwen Code stamps into every settings file it reads) byte-identical to what it
//!   was before `apply`.
//! - Qwen Code alone stamps `"$version": 4` into a project settings file that has none: the
//!   one rewrite of a user's file that is the harness's, not belfry's.
//! - The cells: one observer per semantic event, held to `adapters/qwen/matrix.json` by
//!   dispatch's call log ([`projection_live::assert_cells`]); an `enforce` hook on
//!   `pre-compact`, whose deny cell is unsupported, is never projected: the settings file gets
//!   no `PreCompact` entry for it and the plan says why.
//!
//! Ignored by default: it needs Qwen Code at its pin (`tests/harnesses.json`, under
//! `$BELFRY_HARNESS_DIR` or `target/harnesses`, or `$BELFRY_QWEN_BIN`), the scripted model
//! server and `unshare -n`. Run it with `cargo test -p belfry-tests --test hooks_qwen_live --
//! --ignored --test-threads=1 --nocapture` (`BELFRY_HARNESS_DIR=DIR` before it when the
//! harnesses are installed elsewhere). It fails with the reason when something is missing; it
//! never skips.

use std::path::Path;
use std::process::Command;

use belfry_tests::belfry_bin;
use belfry_tests::projection_live::{
    self, assert_cells, harness_bin, model_server, write, CellCheck, CellsRun, OfflineRun,
    CELLS_PROMPT, FAIL_WORD,
};

/// The user's own project settings, there before belfry: a comment (Qwen Code strips them)
/// and a setting of theirs, which `uninstall` must give back byte for byte. It has the
/// `"$version": 4` Qwen Code 0.24.4 stamps into every settings file it loads without one (its
/// settings migration, which writes the file back), as any file Qwen Code has read carries.
const USER_SETTINGS: &str = "{\n  // the user's own setting, kept by belfry\n  \"model\": {\"name\": \"scripted-model\"},\n  \"$version\": 4\n}\n";

/// The same settings as Qwen Code has never read them: no `$version`.
const UNSTAMPED_SETTINGS: &str =
    "{\n  // the user's own setting, kept by belfry\n  \"model\": {\"name\": \"scripted-model\"}\n}\n";

/// The user settings every run seeds: OpenAI-compatible auth (so the environment's key, base
/// URL and model apply), no update check, no usage statistics or telemetry.
fn seed_home(home: &Path) {
    write(
        &home.join(".qwen/settings.json"),
        &serde_json::json!({
            "security": {"auth": {"selectedType": "openai"}},
            "general": {"enableAutoUpdate": false},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
        })
        .to_string(),
        false,
    );
}

/// The environment of a one-shot run; the base URL is set on the command line (`$PORT`).
fn qwen_env() -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_KEY", "belfry-live-key".into()),
        ("OPENAI_MODEL", "scripted-model".into()),
        ("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1".into()),
    ]
}

/// `qwen --yolo -p PROMPT` against the server on `$PORT`.
fn one_shot(qwen: &Path, prompt: &str) -> String {
    format!(
        "OPENAI_BASE_URL=http://127.0.0.1:$PORT/v1 timeout 150 {} --yolo -p '{prompt}'",
        qwen.display()
    )
}

fn qwen_bin() -> std::path::PathBuf {
    harness_bin("qwen", "BELFRY_QWEN_BIN", "node_modules/.bin/qwen")
}

#[test]
#[ignore = "live: needs Qwen Code 0.24.4, belfry-model-server and a network namespace"]
fn qwen_runs_the_projection_a_deny_blocks_a_context_arrives_and_uninstall_restores() {
    let qwen = qwen_bin();
    let label = projection_live::harness_label("qwen");
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    let (home, project) = (base.join("home"), base.join("project"));
    let marker = base.join("pushed-marker");
    std::fs::create_dir_all(project.join(".git")).unwrap_or_else(|err| panic!("{err}"));
    seed_home(&home);
    let settings = project.join(".qwen/settings.json");
    write(&settings, USER_SETTINGS, false);
    projection_live::guarded_project(&project, "qwen", "REPO-NOTE-7171");
    projection_live::force_push_script(&base.join("script.json"), &marker);
    projection_live::apply(&project, &home);
    let projected = std::fs::read_to_string(&settings).unwrap_or_default();
    assert!(
        projected.contains("PreToolUse") && projected.contains("UserPromptSubmit"),
        "{label}: apply did not project both hooks: {projected}"
    );

    let requests = base.join("requests.ndjson");
    let output = projection_live::offline_run(
        &OfflineRun {
            server: &model_server(),
            base: &base,
            cwd: &project,
            home: &home,
            script: &base.join("script.json"),
            requests: &requests,
        },
        "",
        &one_shot(&qwen, "please push it now"),
        &qwen_env(),
    );
    projection_live::assert_guarded_run(&label, &output, &marker, &requests, "REPO-NOTE-7171");
    // qwen:prompt-submit-every-request: the request that carries the refused tool's result
    // has the enricher's context again, after the tool message.
    let log = std::fs::read_to_string(&requests).unwrap_or_default();
    let follow_up = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|request| request["kind"] == "tool-result")
        .unwrap_or_else(|| panic!("{label}: no request carried the tool's result: {log}"));
    assert!(
        follow_up["last_user_text"]
            .as_str()
            .is_some_and(|text| text.contains("REPO-NOTE-7171")),
        "{label}: prompt-submit is lossy (fired again for a tool's result), but the follow-up did not carry the context again: {follow_up}"
    );

    let uninstall = Command::new(belfry_bin())
        .args(["hooks", "uninstall"])
        .current_dir(&project)
        .env("HOME", &home)
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        uninstall.status.success(),
        "{label}: belfry hooks uninstall failed: {}{}",
        String::from_utf8_lossy(&uninstall.stdout),
        String::from_utf8_lossy(&uninstall.stderr)
    );
    let after = std::fs::read(&settings).unwrap_or_default();
    assert_eq!(
        after,
        USER_SETTINGS.as_bytes(),
        "{label}: uninstall did not give back the user's settings byte for byte: {}",
        String::from_utf8_lossy(&after)
    );
    println!(
        "{label}: the guard's deny blocked the shell tool, the enricher's context reached the first request (and the tool result's follow-up); uninstall restored .qwen/settings.json ({} bytes) byte-identical",
        after.len()
    );
}

/// Qwen Code 0.24.4 alone, no belfry anywhere, writes `"$version": 4` into a project settings
/// file that has none, the first time it loads it: the one change to a user's file that
/// `uninstall` cannot give back, and not belfry's (docs/hooks.md).
#[test]
#[ignore = "live: needs Qwen Code 0.24.4, belfry-model-server and a network namespace"]
fn qwen_alone_stamps_a_settings_version_into_an_unstamped_project_file() {
    let qwen = qwen_bin();
    let label = projection_live::harness_label("qwen");
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    let (home, project) = (base.join("home"), base.join("project"));
    std::fs::create_dir_all(project.join(".git")).unwrap_or_else(|err| panic!("{err}"));
    seed_home(&home);
    let settings = project.join(".qwen/settings.json");
    write(&settings, UNSTAMPED_SETTINGS, false);
    write(
        &base.join("script.json"),
        "{\"turns\": [], \"fallback\": {\"text\": \"PLAIN-ANSWER\"}}",
        false,
    );
    let output = projection_live::offline_run(
        &OfflineRun {
            server: &model_server(),
            base: &base,
            cwd: &project,
            home: &home,
            script: &base.join("script.json"),
            requests: &base.join("requests.ndjson"),
        },
        "",
        &one_shot(&qwen, "hello"),
        &qwen_env(),
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("PLAIN-ANSWER"),
        "{label}: the run did not answer: {output:?}"
    );
    let after = std::fs::read_to_string(&settings).unwrap_or_default();
    // The comment stays; every member is written again, pretty-printed, and `$version` added.
    let stamped = "{\n  // the user's own setting, kept by belfry\n  \"model\": {\n    \"name\": \"scripted-model\"\n  },\n  \"$version\": 4\n}\n";
    assert_eq!(
        after, stamped,
        "{label}: Qwen Code's own rewrite of an unstamped settings file is not the one documented"
    );
    println!("{label}: without belfry, qwen -p rewrote the project's unstamped .qwen/settings.json: \"$version\": 4 added, the comment kept, the members pretty-printed");
}

#[test]
#[ignore = "live: needs Qwen Code 0.24.4, belfry-model-server and a network namespace"]
fn qwen_calls_dispatch_for_every_exact_cell() {
    let qwen = qwen_bin();
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "qwen");
    seed_home(&run.home);
    run.apply(&[], &[]);
    // An unsupported cell is never projected: an enforce hook on pre-compact, in a fresh
    // project (Qwen Code rewrites the settings files it reads, adding `$version`, so the
    // cells project is no clean slate after a run).
    let fresh_root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let project = &std::fs::canonicalize(fresh_root.path()).unwrap_or_else(|err| panic!("{err}"));
    write(
        &project.join("belfry-hooks.kdl"),
        "hook \"no-compact\" { event \"pre-compact\"; intent \"enforce\"; command \"scripts/observe.sh\" \"pre-compact\"; targets \"qwen\" }\n",
        false,
    );
    let plan = Command::new(belfry_bin())
        .args(["hooks", "plan"])
        .current_dir(project)
        .env("HOME", &run.home)
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    let plan_text = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(
        plan_text.contains("pre-compact.deny: unsupported"),
        "{}: the plan does not call pre-compact.deny unsupported: {plan_text}{}",
        run.label,
        String::from_utf8_lossy(&plan.stderr)
    );
    let _ = Command::new(belfry_bin())
        .args(["hooks", "apply"])
        .current_dir(project)
        .env("HOME", &run.home)
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    let settings = std::fs::read_to_string(project.join(".qwen/settings.json")).unwrap_or_default();
    assert!(
        !settings.contains("PreCompact"),
        "{}: the unsupported enforce hook was projected: {settings}",
        run.label
    );
    println!(
        "{}: an enforce hook on pre-compact (deny unsupported) is not projected",
        run.label
    );
    let env = qwen_env();
    let output = run.run(&model_server(), "", &one_shot(&qwen, CELLS_PROMPT), &env);
    let failed = run.run(&model_server(), "", &one_shot(&qwen, FAIL_WORD), &env);
    run.assert_failed_turn(&failed);
    let label = run.label.clone();
    // qwen:prompt-submit-every-request: the follow-ups that carry the tool results fire it
    // too, with an empty prompt and no submitted_prompt.
    let prompts = run.observed("prompt-submit");
    let follow_ups = prompts
        .iter()
        .filter(|input| input["prompt"] == "" && input.get("submitted_prompt").is_none())
        .count();
    assert!(
        follow_ups >= 1 && prompts.iter().any(|input| input["prompt"] == CELLS_PROMPT),
        "{label}: prompt-submit is lossy (fired for tool results too), but its inputs were {prompts:?}"
    );
    // qwen:session-end-interactive-only: qwen -p never fires SessionEnd.
    let ended = run.calls("session-end");
    assert!(
        ended.is_empty(),
        "{label}: session-end is lossy (interactive only), but qwen -p fired it: {ended:?}"
    );
    // qwen:stop-failure-not-awaited: the hook is started and not waited for.
    let stop_failure = if run.calls("stop-failure").is_empty() {
        CellCheck::NotExercised("qwen -p exited before its StopFailure hook ran, as the loss says")
    } else {
        CellCheck::Checked("fired for the failed turn (not awaited; this run's hook ran first)")
    };
    let prompt_note = format!(
        "fired {} times in two one-shot prompts, {follow_ups} of them for a tool result (empty prompt)",
        prompts.len()
    );
    assert_cells(
        &run,
        &output,
        &[
            ("prompt-submit", CellCheck::Checked(&prompt_note)),
            (
                "session-end",
                CellCheck::Checked("qwen -p ended without calling it, as the loss says"),
            ),
            ("stop-failure", stop_failure),
            (
                "pre-compact",
                CellCheck::NotExercised("a one-shot turn never compacts its context"),
            ),
            (
                "subagent-start",
                CellCheck::NotExercised("the scripted turn starts no subagent"),
            ),
            (
                "subagent-stop",
                CellCheck::NotExercised("the scripted turn starts no subagent"),
            ),
        ],
    );
}
