//! spec §9, live, per cell: with the projection `belfry hooks apply` writes, each real harness
//! calls `belfry dispatch` for every event its capability matrix (`adapters/<target>/matrix.json`)
//! calls exact, never for one it calls unsupported, and a lossy cell behaves as its loss says.
//!
//! Each test projects one `observe` hook per semantic event for one harness, sets
//! `$BELFRY_DISPATCH_LOG` so that dispatch logs every call it gets (docs/hooks.md, The dispatch
//! call log), and drives one scripted turn inside a loopback-only network namespace against the
//! project's model server: the prompt, a shell call the before-tool observer refuses, a shell
//! call that runs and that the after-tool observer refuses after the fact, a final answer, and
//! exit. A second short run sends a prompt the server fails with an API error (the
//! `stop-failure` cell: a call where it is exact, none where it is unsupported, and where it is
//! lossy what its loss says: Claude Code's is not awaited, so a call or, when `claude -p` exits
//! first, none; OpenCode's is observed from its event bus, a call); for
//! Claude Code two more drive a manual compaction (`/compact` on the session) and a subagent.
//! [`projection_live::assert_cells`] then holds the call log, the observers' log and the
//! requests the model saw to the matrix. An exact event the runs cannot drive (a compaction
//! elsewhere, a subagent, a notification) is printed as `not exercised: <harness> <version>
//! <cell>: <reason>`, never skipped silently; every message names the harness and its version.
//! The cells a one-shot run cannot reach are driven in an interactive session in a real
//! belfry pane (the live bench of `tests/src/live.rs`, the harness's offline profile
//! `adapters/<name>/live.json`): a permission dialog held open until the `notification` call
//! arrives (Claude Code, Gemini CLI), and `/compact` typed in the composer after one answered
//! turn (`pre-compact`: Codex, Pi, and OpenCode's lossy cell).
//! Last, for Claude Code and Gemini CLI, the harness's own switch turns the hooks off
//! (`disableAllHooks`, `hooksConfig.enabled: false`): `belfry hooks status` must say inert and
//! a full turn must not call dispatch once. (Codex's untrusted entries, the third inert state,
//! are proven the same way by `hooks_codex_trust_live.rs`.)
//!
//! Ignored by default: they need the harnesses `scripts/install-harnesses` puts in
//! `target/harnesses` (pins in `tests/harnesses.json`; or `$BELFRY_<NAME>_BIN`), the scripted
//! model server (`belfry-model-server` beside `belfry`, or `$BELFRY_MODEL_SERVER`) and `unshare
//! -n`. Run them with `cargo test -p belfry-tests --test hooks_cells_live -- --ignored
//! --test-threads=1 --nocapture`. Each fails with the reason when something is missing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use belfry_tests::bin_dir;
use belfry_tests::live::{Live, LiveOptions};
use belfry_tests::projection_live::{
    assert_cells, harness_bin, model_server, write, CellCheck, CellsRun, AFTER_WORD,
    BEFORE_REFUSAL, BLOCK_WORD, CELLS_PROMPT, FAIL_WORD,
};
use serde_json::Value;

const SUBAGENT_PROMPT: &str = "CELLS-SUBAGENT-GO";
const SUBAGENT_TASK: &str = "CELLS-SUBAGENT-TASK";
/// Codex 0.169.0 (and 0.171.0) offers its subagent tools only inside this tool group of the Responses
/// request (`{"type": "namespace", "name": "multi_agent_v1", "tools": [spawn_agent,
/// wait_agent, ...]}`, seen in the live request), with no feature flag set: a call must name
/// the group beside the tool.
const CODEX_AGENTS: &str = "multi_agent_v1";
/// The Codex subagent's task (the `message` of spawn_agent) and its answer, which reaches the
/// parent in wait_agent's result and in the `<subagent_notification>` user message after it.
const CODEX_SUBAGENT_TASK: &str = "CELLS-CODEX-SUBAGENT-TASK";
const CODEX_SUBAGENT_ANSWER: &str = "CELLS-CODEX-SUBAGENT-ANSWER";
/// The context the subagent-start observer gives the Codex subagent, the reason the
/// subagent-stop observer refuses its stops with (numbered, one refusal each), and the
/// subagent's answer to such a reason (which holds [`CODEX_SUBAGENT_ANSWER`], so the parent's
/// turn ends the same way).
const CODEX_SUBAGENT_CONTEXT: &str = "CELLS-SUBAGENT-CONTEXT for the subagent";
const CODEX_SUBAGENT_REFUSAL: &str = "CELLS-SUBAGENT-STOP-REFUSAL by the observer";
const CODEX_SUBAGENT_AGAIN: &str = "CELLS-CODEX-SUBAGENT-ANSWER-AGAIN";
/// How many stops in a row the observer refuses: more than the 8 at which Claude Code stops
/// honouring a Stop block (`claude:stop-block-capped`), to show the loss
/// `codex:subagent-stop-block-uncapped` (every block is honoured, none is capped).
const CODEX_SUBAGENT_REFUSALS: usize = 10;

#[test]
#[ignore = "live: needs Claude Code, belfry-model-server and a network namespace"]
fn claude_calls_dispatch_for_every_exact_cell() {
    let claude = harness_bin(
        "claude",
        "BELFRY_CLAUDE_BIN",
        "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    );
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "claude");
    // Strict JSON (Claude Code reads nothing from a settings file with a comment); the shell
    // tool allowed, so that only belfry's hooks decide.
    write(
        &run.project.join(".claude/settings.json"),
        "{\n  \"permissions\": {\"allow\": [\"Bash\"]}\n}\n",
        false,
    );
    // Onboarding done, the workspace trusted, the key approved: the dialogs whose default is No.
    let key = "sk-ant-belfry-live-0123456789abcdefghij";
    write(
        &run.home.join(".claude.json"),
        &serde_json::json!({
            "hasCompletedOnboarding": true,
            "projects": { run.project.display().to_string(): { "hasTrustDialogAccepted": true } },
            "customApiKeyResponses": { "approved": [&key[key.len() - 20..]], "rejected": [] },
        })
        .to_string(),
        false,
    );
    // A subagent: the model calls Claude Code's Agent tool (not in the background), the
    // subagent answers its task, and the main agent finishes.
    run.script_turns(vec![
        serde_json::json!({
            "match": SUBAGENT_PROMPT,
            "tool": { "name": "Agent", "input": {
                "description": "cells subagent", "prompt": SUBAGENT_TASK,
                "subagent_type": "general-purpose", "run_in_background": false,
            } },
            "then": { "text": "CELLS-SUBAGENT-DONE" },
        }),
        serde_json::json!({ "match": SUBAGENT_TASK, "text": "CELLS-SUBAGENT-ANSWER" }),
    ]);
    run.apply(&[], &[]);
    let env = [
        ("ANTHROPIC_API_KEY", key.to_string()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
    ];
    let claude_p = |prompt: &str, extra: &str| {
        run.run(
            &model_server(),
            "",
            &format!(
                "ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT timeout 120 {} -p '{prompt}' --allowedTools Bash {extra}",
                claude.display()
            ),
            &env,
        )
    };
    // A slash command whose text holds an inline shell command: Claude Code runs it while it
    // expands the command, outside any tool call, so PreToolUse never sees it; 2.1.337's
    // PreSkillShellCommand does, and the projection's before-tool entry is there too. The
    // command names the word the before-tool observer refuses.
    let skill_marker = run.project.join("skill-marker");
    write(
        &run.project.join(".claude/commands/cells-skill.md"),
        &format!(
            "---\nallowed-tools: Bash(touch:*)\ndescription: cells skill\n---\nStatus: !`touch {} && echo {BLOCK_WORD}`\n",
            skill_marker.display()
        ),
        false,
    );
    let output = claude_p(CELLS_PROMPT, "");
    let skill = claude_p("/cells-skill", "");
    // The cells one turn cannot reach, each in a short run of its own: a manual compaction of
    // that session (`/compact` with --continue), a turn the server fails with an API error, and
    // a turn that runs a subagent.
    let compacted = claude_p("/compact", "--continue");
    let failed = claude_p(FAIL_WORD, "");
    let delegated = claude_p(SUBAGENT_PROMPT, "");
    let label = &run.label;
    run.assert_failed_turn(&failed);
    for (what, run_output) in [("/compact", &compacted), ("the subagent turn", &delegated)] {
        println!(
            "{label}: {what}: exit {:?}: {}",
            run_output.status.code(),
            String::from_utf8_lossy(&run_output.stdout).trim()
        );
    }
    let compactions = run.observed("pre-compact");
    assert!(
        compactions.iter().any(|input| input["trigger"] == "manual"),
        "{label}: /compact did not call pre-compact with trigger manual: {compactions:?}\n{}",
        run.evidence()
    );
    assert!(
        String::from_utf8_lossy(&delegated.stdout).contains("CELLS-SUBAGENT-DONE"),
        "{label}: the subagent turn did not finish: {}\n{}",
        String::from_utf8_lossy(&delegated.stdout),
        run.evidence()
    );
    // claude:stop-failure-not-awaited: Claude Code starts its StopFailure hooks without
    // waiting for them, and `claude -p` exits right after the failed turn, so the call arrives
    // only when the hook ran first (it usually does, ~10 ms before SessionEnd; a CI run under
    // load saw the harness exit without it).
    let failure_calls = run.calls("stop-failure");
    let stop_failure = if failure_calls.is_empty() {
        CellCheck::NotExercised(
            "claude -p exited before its StopFailure hook ran, as the loss says",
        )
    } else {
        assert!(
            failure_calls
                .iter()
                .all(|call| call["hook_event_name"] == "StopFailure"),
            "{label}: stop-failure calls not from StopFailure: {failure_calls:?}\n{}",
            run.evidence()
        );
        for input in run.observed("stop-failure") {
            assert!(
                input["hook_event_name"] == "StopFailure" && input.get("error").is_some(),
                "{label}: the StopFailure input names no error: {input}\n{}",
                run.evidence()
            );
        }
        CellCheck::Checked(
            "fired for the failed turn, with its error (not awaited; this run's hook ran before the harness exited)",
        )
    };
    // before-tool.deny is exact on the skill's shell command too: it never ran, dispatch was
    // called from PreSkillShellCommand and refused it, and the model read the reason in the
    // expanded command.
    let skill_calls: Vec<Value> = run
        .calls("before-tool")
        .into_iter()
        .filter(|call| call["hook_event_name"] == "PreSkillShellCommand")
        .collect();
    assert!(
        !skill_marker.exists(),
        "{label}: the slash command's shell command ran past the before-tool guard\n{}",
        run.evidence()
    );
    assert!(
        skill_calls
            .iter()
            .any(|call| call["decision"] == "deny" && call["tool_class"] == "shell"),
        "{label}: no PreSkillShellCommand call was refused as a shell call: {skill_calls:?}\n{}\n{}",
        String::from_utf8_lossy(&skill.stdout),
        run.evidence()
    );
    assert!(
        run.model_saw(&format!("[not run: blocked by hook: {BEFORE_REFUSAL}]")),
        "{label}: the model never read the refusal of the slash command's shell command\n{}",
        run.evidence()
    );
    println!(
        "cells: {label}: before-tool.deny exact on a slash command's inline shell command: dispatch called {}x from PreSkillShellCommand, the command never ran, the model read \"[not run: blocked by hook: …]\"",
        skill_calls.len()
    );
    assert_cells(
        &run,
        &output,
        &[
            (
                "notification",
                CellCheck::NotExercised(
                    "claude -p never prompts (a tool outside the allowed list is refused without asking); driven in a pane instead by claude_notifies_on_a_permission_prompt_in_a_pane",
                ),
            ),
            (
                "interrupt",
                CellCheck::NotExercised(
                    "claude -p is never interrupted; driven in a pane instead by claude_dispatches_interrupt_on_escape_in_a_pane",
                ),
            ),
            ("stop-failure", stop_failure),
        ],
    );
    // Inert: disableAllHooks in the local settings switches every hook off.
    write(
        &run.project.join(".claude/settings.local.json"),
        "{\"disableAllHooks\": true}\n",
        false,
    );
    run.assert_inert("disableAllHooks is set", &[], || claude_p(CELLS_PROMPT, ""));
}

#[test]
#[ignore = "live: needs Codex, belfry-model-server and a network namespace"]
fn codex_calls_dispatch_for_every_exact_cell() {
    let codex = harness_bin(
        "codex",
        "BELFRY_CODEX_BIN",
        "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    );
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "codex");
    let codex_home = run.home.join(".codex");
    // The provider on the local server (its port filled in once the server listens), and the
    // project trusted, so that Codex loads the project's .codex/ layer at all.
    write(
        &codex_home.join("config.toml"),
        &format!(
            "model = \"scripted-model\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\n\
             [model_providers.mock]\nname = \"Scripted model\"\nbase_url = \"http://127.0.0.1:PORT/v1\"\n\
             env_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
             [analytics]\nenabled = false\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            run.project.display()
        ),
        false,
    );
    // A subagent: the model calls spawn_agent (in Codex's agents tool group) with a task the
    // subagent's own first request carries, which the script answers; then wait_agent on the
    // id spawn_agent returned (taken from its result), which returns once the subagent's turn
    // completed. Codex then sends the parent the subagent's final status as a user message
    // (`<subagent_notification>`, holding the answer) after wait_agent's result, in the same
    // request, so the script answers that message, and the tool result's `then` too, with
    // the parent's last word.
    run.script_turns(vec![
        serde_json::json!({
            "match": SUBAGENT_PROMPT,
            "tool": { "namespace": CODEX_AGENTS, "name": "spawn_agent",
                "input": { "message": CODEX_SUBAGENT_TASK } },
            "then": {
                "tool": { "namespace": CODEX_AGENTS, "name": "wait_agent",
                    "input": { "targets": [{ "$result": "/agent_id" }], "timeout_ms": 60000 } },
                "then": { "text": "CELLS-SUBAGENT-DONE" },
            },
        }),
        serde_json::json!({ "match": CODEX_SUBAGENT_TASK, "text": CODEX_SUBAGENT_ANSWER }),
        serde_json::json!({ "match": "CELLS-SUBAGENT-STOP-REFUSAL", "text": CODEX_SUBAGENT_AGAIN }),
        serde_json::json!({ "match": CODEX_SUBAGENT_ANSWER, "text": "CELLS-SUBAGENT-DONE" }),
    ]);
    // Codex runs only the hooks it trusts: --trust writes the entries' trusted hashes.
    run.apply(&["--trust"], &[("CODEX_HOME", &codex_home)]);
    let output = run.run(
        &model_server(),
        &format!(
            "sed -i \"s/127.0.0.1:PORT/127.0.0.1:$PORT/\" {}",
            codex_home.join("config.toml").display()
        ),
        &format!(
            "timeout 120 {} exec --dangerously-bypass-approvals-and-sandbox '{CELLS_PROMPT}'",
            codex.display()
        ),
        &[
            ("CODEX_HOME", codex_home.display().to_string()),
            ("MOCK_API_KEY", "belfry-live-key".into()),
        ],
    );
    // A turn the server fails with an API error: stop-failure is unsupported, so no call.
    let failed = run.run(
        &model_server(),
        &format!(
            "sed -i \"s/127.0.0.1:[0-9]*\\//127.0.0.1:$PORT\\//\" {}",
            codex_home.join("config.toml").display()
        ),
        &format!(
            "timeout 120 {} exec --dangerously-bypass-approvals-and-sandbox '{FAIL_WORD}'",
            codex.display()
        ),
        &[
            ("CODEX_HOME", codex_home.display().to_string()),
            ("MOCK_API_KEY", "belfry-live-key".into()),
        ],
    );
    // The subagent turn, with the subagent-start observer giving context and the
    // subagent-stop observer refusing the subagent's first stops.
    write(&run.subagent_context, CODEX_SUBAGENT_CONTEXT, false);
    let refusals: String = (1..=CODEX_SUBAGENT_REFUSALS)
        .map(|n| format!("{CODEX_SUBAGENT_REFUSAL} #{n}\n"))
        .collect();
    write(&run.subagent_refusal, &refusals, false);
    let delegated = run.run(
        &model_server(),
        &format!(
            "sed -i \"s/127.0.0.1:[0-9]*\\//127.0.0.1:$PORT\\//\" {}",
            codex_home.join("config.toml").display()
        ),
        &format!(
            "timeout 120 {} exec --dangerously-bypass-approvals-and-sandbox '{SUBAGENT_PROMPT}'",
            codex.display()
        ),
        &[
            ("CODEX_HOME", codex_home.display().to_string()),
            ("MOCK_API_KEY", "belfry-live-key".into()),
        ],
    );
    let label = &run.label;
    run.assert_failed_turn(&failed);
    println!(
        "{label}: the subagent turn: exit {:?}: {}",
        delegated.status.code(),
        String::from_utf8_lossy(&delegated.stdout).trim()
    );
    assert!(
        String::from_utf8_lossy(&delegated.stdout).contains("CELLS-SUBAGENT-DONE"),
        "{label}: the subagent turn did not finish: {}{}\n{}",
        String::from_utf8_lossy(&delegated.stdout),
        String::from_utf8_lossy(&delegated.stderr),
        run.evidence()
    );
    let subagent_cells = codex_subagent_cells(&run);
    // codex:session-start-at-first-prompt: in `codex exec` the launch and the first prompt
    // are one moment, so the run can only show that the event fires, and no later than the
    // prompt.
    let started = run.calls("session-start");
    let prompted = run.calls("prompt-submit");
    assert!(
        !started.is_empty() && !prompted.is_empty(),
        "{label}: session-start or prompt-submit never reached dispatch\n{}",
        run.evidence()
    );
    assert!(
        started[0]["ms"].as_u64() <= prompted[0]["ms"].as_u64(),
        "{label}: session-start came after the first prompt-submit\n{}",
        run.evidence()
    );
    // codex:after-tool-response-string: the observer's stdin holds the response as a string.
    let after = run.observed("after-tool");
    assert!(
        !after.is_empty() && after.iter().all(|input| input["tool_response"].is_string()),
        "{label}: after-tool did not run with a string tool_response: {after:?}"
    );
    let ended = run.calls("session-end").len();
    let session_end = if ended == 0 {
        CellCheck::NotExercised(
            "codex exec ended without stopping a background app-server, so SessionEnd never fired, as the loss says",
        )
    } else {
        CellCheck::Checked("fired when codex exec shut down")
    };
    assert_cells(
        &run,
        &output,
        &[
            (
                "session-start",
                CellCheck::Checked("fired, no later than the first prompt-submit"),
            ),
            ("session-end", session_end),
            (
                "after-tool",
                CellCheck::Checked("fired with tool_response a string"),
            ),
            (
                "pre-compact",
                CellCheck::NotExercised(
                    "a one-shot codex exec turn never compacts; driven in a pane instead by codex_calls_pre_compact_for_compact_in_a_pane",
                ),
            ),
            (
                "interrupt",
                CellCheck::NotExercised(
                    "a one-shot codex exec turn is never interrupted; driven in a pane instead by codex_dispatches_interrupt_on_escape_in_a_pane",
                ),
            ),
        ],
    );
    for line in subagent_cells {
        println!("  {line}");
    }
}

/// The Codex subagent run's context and deny cells, held to the matrix: the subagent's own
/// first request must carry the subagent-start observer's context (`subagent-start.context`
/// exact), and each of the observer's [`CODEX_SUBAGENT_REFUSALS`] refusals of the subagent's
/// stop must reach dispatch as a deny that Codex answers by continuing that subagent with the
/// reason, every one of them, with `stop_hook_active` set after the first
/// (`subagent-stop.deny` lossy: no cap on repeats); then the stop is allowed and the parent's
/// wait ends with the last answer. A matrix that says otherwise fails here until this check is
/// taught its new status. Returns the summary lines.
fn codex_subagent_cells(run: &CellsRun) -> Vec<String> {
    let label = &run.label;
    let matrix = belfry_tests::projection_live::matrix(&run.target);
    let cell = |name: &str| matrix["cells"][name].clone();
    let (context, deny) = (cell("subagent-start.context"), cell("subagent-stop.deny"));
    assert!(
        context["status"] == "exact"
            && deny["status"] == "lossy"
            && deny["key"] == "codex:subagent-stop-block-uncapped",
        "{label}: the matrix calls subagent-start.context {} and subagent-stop.deny {} ({}); this run checks exact and lossy codex:subagent-stop-block-uncapped",
        context["status"],
        deny["status"],
        deny["key"]
    );
    let started = run.observed("subagent-start");
    assert!(
        started.len() == 1 && started[0]["agent_id"].is_string(),
        "{label}: one subagent was spawned, but subagent-start ran {}x (or without an agent_id): {started:?}",
        started.len()
    );
    let agent = started[0]["agent_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The subagent's requests: those carrying its task but not the parent's prompt (it
    // starts with only its task; the parent's requests hold the spawn_agent call).
    let bodies = run.request_bodies();
    let subagent: Vec<&String> = bodies
        .iter()
        .filter(|body| body.contains(CODEX_SUBAGENT_TASK) && !body.contains(SUBAGENT_PROMPT))
        .collect();
    assert!(
        subagent
            .first()
            .is_some_and(|body| body.contains(CODEX_SUBAGENT_CONTEXT)),
        "{label}: subagent-start.context is exact, but the subagent's first request lacks the observer's context ({} subagent requests)\n{}",
        subagent.len(),
        run.evidence()
    );
    let stops = run.calls("subagent-stop");
    let decisions: Vec<&str> = stops
        .iter()
        .map(|call| call["decision"].as_str().unwrap_or("?"))
        .collect();
    let mut expected = vec!["deny"; CODEX_SUBAGENT_REFUSALS];
    expected.push("allow");
    assert_eq!(
        decisions,
        expected,
        "{label}: the observer refused the subagent's first {CODEX_SUBAGENT_REFUSALS} stops, then allowed; dispatch answered otherwise\n{}",
        run.evidence()
    );
    let stopped = run.observed("subagent-stop");
    assert!(
        stopped.iter().all(|input| input["agent_id"] == agent.as_str())
            && stopped
                .iter()
                .enumerate()
                .all(|(n, input)| input["stop_hook_active"] == (n > 0)),
        "{label}: subagent-stop ran for another agent than {agent}, or stop_hook_active was not set exactly after the first block: {stopped:?}"
    );
    // Each refusal came back to the model as the subagent's continuation: the request after
    // refusal #n holds its reason (the numbers tell them apart).
    for n in 1..=CODEX_SUBAGENT_REFUSALS {
        let reason = format!("{CODEX_SUBAGENT_REFUSAL} #{n}<");
        assert!(
            subagent.iter().any(|body| body.contains(&reason)),
            "{label}: subagent-stop.deny is lossy (no cap), but no request of the subagent held refusal #{n} of {CODEX_SUBAGENT_REFUSALS}: Codex stopped honouring the blocks\n{}",
            run.evidence()
        );
    }
    assert!(
        bodies
            .iter()
            .any(|body| body.contains(SUBAGENT_PROMPT) && body.contains(CODEX_SUBAGENT_AGAIN)),
        "{label}: the parent's wait did not end with the answer the subagent gave after the refusals\n{}",
        run.evidence()
    );
    vec![
        format!(
            "subagent-start.context exact: the subagent's first request held the observer's context (agent_type {})",
            started[0]["agent_type"]
        ),
        format!(
            "subagent-stop.deny lossy ({}): {CODEX_SUBAGENT_REFUSALS} refusals in a row each continued the subagent with the reason ({} subagent requests), then the stop was allowed",
            deny["loss"],
            subagent.len()
        ),
    ]
}

#[test]
#[ignore = "live: needs Gemini CLI, belfry-model-server and a network namespace"]
fn gemini_calls_dispatch_for_every_exact_cell() {
    let gemini = harness_bin("gemini", "BELFRY_GEMINI_BIN", "node_modules/.bin/gemini");
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "gemini");
    // API-key auth (so the base URL applies), no update check or telemetry, the folder trusted.
    write(
        &run.home.join(".gemini/settings.json"),
        &serde_json::json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "ide": {"enabled": false, "hasSeenNudge": true},
        })
        .to_string(),
        false,
    );
    write(
        &run.home.join(".gemini/trustedFolders.json"),
        &serde_json::json!({ run.project.display().to_string(): "TRUST_FOLDER" }).to_string(),
        false,
    );
    run.apply(&[], &[]);
    let output = run.run(
        &model_server(),
        "",
        &format!(
            "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:$PORT timeout 120 {} --yolo -p '{CELLS_PROMPT}'",
            gemini.display()
        ),
        &[("GEMINI_API_KEY", "belfry-live-key".into())],
    );
    // A turn the server fails with an API error: stop-failure is unsupported, so no call.
    let failed = run.run(
        &model_server(),
        "",
        &format!(
            "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:$PORT timeout 120 {} --yolo -p '{FAIL_WORD}'",
            gemini.display()
        ),
        &[("GEMINI_API_KEY", "belfry-live-key".into())],
    );
    run.assert_failed_turn(&failed);
    let ended = run.calls("session-end").len();
    let session_end = if ended == 0 {
        CellCheck::NotExercised(
            "the CLI exited without waiting for the SessionEnd hook, as the loss says",
        )
    } else {
        CellCheck::Checked("fired at exit (not awaited; this run's hook finished first)")
    };
    // gemini:pre-compact-fires-without-compaction: PreCompress (trigger auto) comes before
    // every model request's compression check, so this short turn, which compresses nothing,
    // calls it all the same.
    let label = &run.label;
    let compress = run.observed("pre-compact");
    assert!(
        !compress.is_empty() && compress.iter().all(|input| input["trigger"] == "auto"),
        "{label}: pre-compact did not fire with trigger auto in a turn that compressed nothing: {compress:?}\n{}",
        run.evidence()
    );
    let compress_note = format!(
        "fired {}x with trigger auto in a turn that compressed nothing",
        compress.len()
    );
    assert_cells(
        &run,
        &output,
        &[
            ("session-end", session_end),
            ("pre-compact", CellCheck::Checked(&compress_note)),
            (
                "notification",
                CellCheck::NotExercised(
                    "with --yolo no tool asks for permission; driven in a pane instead by gemini_notifies_on_a_permission_prompt_in_a_pane",
                ),
            ),
        ],
    );
    // Inert: hooksConfig.enabled false in the user's settings switches every hook off.
    let settings_path = run.home.join(".gemini/settings.json");
    let mut settings: Value = std::fs::read_to_string(&settings_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{}", settings_path.display()));
    settings["hooksConfig"] = serde_json::json!({"enabled": false});
    write(&settings_path, &settings.to_string(), false);
    run.assert_inert("hooksConfig.enabled is false", &[], || {
        run.run(
            &model_server(),
            "",
            &format!(
                "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:$PORT timeout 120 {} --yolo -p '{CELLS_PROMPT}'",
                gemini.display()
            ),
            &[("GEMINI_API_KEY", "belfry-live-key".into())],
        )
    });
}

#[test]
#[ignore = "live: needs OpenCode, belfry-model-server and a network namespace"]
fn opencode_calls_dispatch_for_every_exact_cell() {
    opencode_cells("opencode");
}

/// The same cells on OpenCode 2.x (pin `opencode2`, profile `live-2.json`, `opencode run
/// --standalone`): the generated plugin's `setup(ctx)` registrations.
#[test]
#[ignore = "live: needs OpenCode 2.x, belfry-model-server and a network namespace"]
fn opencode2_calls_dispatch_for_every_exact_cell() {
    opencode_cells("opencode2");
}

/// Every cell of OpenCode's matrix, on the OpenCode the pin `key` names.
fn opencode_cells(key: &str) {
    let pin = belfry_tests::live::Pin::load(key);
    let opencode = match std::env::var_os("BELFRY_OPENCODE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => pin
            .executable()
            .unwrap_or_else(|reason| panic!("OpenCode {}: {reason}", pin.version)),
    };
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let mut run = CellsRun::new(root.path(), "opencode");
    run.label = format!("OpenCode {}", pin.version);
    // The pin's offline profile: the provider on the server (its port filled in once the
    // server listens) and, for 1.x, the plugin package stubs that spare a registry install.
    let profile_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../adapters/opencode")
        .join(&pin.profile);
    let profile: Value = std::fs::read_to_string(&profile_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{}", profile_path.display()));
    // 2.x runs a shared background service unless told to run a private server.
    let standalone = if profile["argv"].to_string().contains("--standalone") {
        " --standalone"
    } else {
        ""
    };
    let fill = |text: &str| {
        text.replace("{home}", &run.home.display().to_string())
            .replace("{work}", &run.project.display().to_string())
            .replace("{base_url}", "http://127.0.0.1:PORT")
    };
    for file in profile["files"].as_array().cloned().unwrap_or_default() {
        let path = PathBuf::from(fill(file["path"].as_str().unwrap_or_default()));
        write(&path, &fill(&file["json"].to_string()), false);
    }
    run.apply(&[], &[]);
    let env: Vec<(&str, String)> = profile["env"]
        .as_object()
        .map(|env| {
            env.iter()
                .map(|(name, value)| (name.as_str(), fill(value.as_str().unwrap_or_default())))
                .collect()
        })
        .unwrap_or_default();
    let output = run.run(
        &model_server(),
        &format!(
            "sed -i \"s/127.0.0.1:PORT/127.0.0.1:$PORT/\" {}",
            run.home.join(".config/opencode/opencode.json").display()
        ),
        &format!(
            "timeout 150 {}{standalone} run '{CELLS_PROMPT}'",
            opencode.display()
        ),
        &env,
    );
    // A turn the server fails with an API error, for stop-failure (observed from the
    // session.error bus event).
    let failed = run.run(
        &model_server(),
        &format!(
            "sed -i \"s/127.0.0.1:[0-9]*\\//127.0.0.1:$PORT\\//\" {}",
            run.home.join(".config/opencode/opencode.json").display()
        ),
        &format!(
            "timeout 150 {}{standalone} run '{FAIL_WORD}'",
            opencode.display()
        ),
        &env,
    );
    let label = &run.label;
    run.assert_failed_turn(&failed);
    assert!(
        !run.calls("stop-failure").is_empty(),
        "{label}: an API error did not reach dispatch as stop-failure (session.error)\n{}",
        run.evidence()
    );
    // opencode:session-start-observed: the session.created bus event, once the session exists.
    // OpenCode 2.x's `run` creates its session before the plugin's event subscription is
    // connected (2.2.5: no call in the run), so there the cell is not exercised by `run`; in a
    // pane the subscription sees session.created when the first prompt makes the session.
    let session_start = if pin.version.starts_with("1.") {
        assert!(
            !run.calls("session-start").is_empty(),
            "{label}: session-start (observed from session.created) never reached dispatch\n{}",
            run.evidence()
        );
        CellCheck::Checked("observed from session.created")
    } else {
        CellCheck::NotExercised(
            "OpenCode 2.x's run makes its session before the plugin's event subscription connects",
        )
    };
    // opencode:turn-stop-observed: the plugin does not wait for the session.idle call, so
    // `opencode run` may exit before it is made; either way is the loss as stated.
    let idle = run.calls("turn-stop").len();
    let turn_stop = if idle == 0 {
        CellCheck::NotExercised(
            "opencode run exited before the unawaited session.idle call reached dispatch, as the loss says",
        )
    } else {
        CellCheck::Checked("observed from its bus event")
    };
    assert_cells(
        &run,
        &output,
        &[
            ("session-start", session_start),
            ("turn-stop", turn_stop),
            (
                "stop-failure",
                CellCheck::Checked("observed from its bus event after an API error"),
            ),
            (
                "pre-compact",
                CellCheck::NotExercised(
                    "a one-shot opencode run never compacts; driven in a pane instead by opencode_calls_pre_compact_for_compact_in_a_pane",
                ),
            ),
        ],
    );
}

#[test]
#[ignore = "live: needs Pi, belfry-model-server and a network namespace"]
fn pi_calls_dispatch_for_every_exact_cell() {
    let pi = harness_bin("pi", "BELFRY_PI_BIN", "node_modules/.bin/pi");
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "pi");
    let agent_dir = run.home.join(".pi/agent");
    std::fs::create_dir_all(&agent_dir).unwrap_or_else(|err| panic!("{err}"));
    run.apply(&[], &[]);
    let pi_env = [
        ("PI_CODING_AGENT_DIR", agent_dir.display().to_string()),
        ("PI_OFFLINE", "1".into()),
        ("PI_SKIP_VERSION_CHECK", "1".into()),
        ("PI_TELEMETRY", "0".into()),
    ];
    let output = run.run(
        &model_server(),
        &format!(
            "printf '{{\"providers\":{{\"mock\":{{\"baseUrl\":\"http://127.0.0.1:%s/v1\",\"api\":\"openai-completions\",\"apiKey\":\"belfry-live-key\",\"models\":[{{\"id\":\"scripted-model\",\"name\":\"Scripted model\"}}]}}}}}}' $PORT > {}",
            agent_dir.join("models.json").display()
        ),
        &format!(
            "timeout 120 {} --offline --provider mock --model scripted-model -p '{CELLS_PROMPT}'",
            pi.display()
        ),
        &pi_env,
    );
    // A turn the server fails with an API error: stop-failure is unsupported, so no call.
    let failed = run.run(
        &model_server(),
        &format!(
            "sed -i \"s/127.0.0.1:[0-9]*\\//127.0.0.1:$PORT\\//\" {}",
            agent_dir.join("models.json").display()
        ),
        &format!(
            "timeout 120 {} --offline --provider mock --model scripted-model -p '{FAIL_WORD}'",
            pi.display()
        ),
        &pi_env,
    );
    let label = &run.label;
    run.assert_failed_turn(&failed);
    // pi:after-tool-not-on-block: tool_result fires for the call that ran, never for the one
    // the before-tool observer blocked.
    let after = run.observed("after-tool");
    let text: Vec<String> = after.iter().map(Value::to_string).collect();
    assert!(
        text.iter().any(|input| input.contains(AFTER_WORD)),
        "{label}: after-tool never fired for the call that ran: {text:?}"
    );
    assert!(
        !text.iter().any(|input| input.contains(BLOCK_WORD)),
        "{label}: after-tool fired for the blocked call, which the matrix says it does not: {text:?}"
    );
    assert_cells(
        &run,
        &output,
        &[
            (
                "after-tool",
                CellCheck::Checked("fired for the call that ran, not for the blocked one"),
            ),
            (
                "pre-compact",
                CellCheck::NotExercised(
                    "a one-shot turn this short never compacts, and pi -p sends /compact to the model as a plain prompt (tried live: the scripted fallback answered it); driven in a pane instead by pi_calls_pre_compact_for_compact_in_a_pane",
                ),
            ),
        ],
    );
}

/// The prompt of an interactive cells turn in a pane, and the model's answer after the tool.
const PANE_PROMPT: &str = "CELLS-PANE-GO please run it";
const PANE_DONE: &str = "CELLS-PANE-DONE";

/// An interactive session of `name` in a real belfry pane (tests/src/live.rs: its offline
/// profile, a loopback-only namespace, the model server with `script`) in `run`'s project and
/// home, with the projection `prepare` applies in place before the harness starts, `belfry`
/// first on the pane's `PATH` and dispatch's call log on.
fn pane(run: &CellsRun, name: &str, script: Value, prepare: &dyn Fn()) -> Live {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Live::start(
        name,
        LiveOptions {
            script,
            extra_env: vec![
                ("PATH".into(), path),
                (
                    "BELFRY_DISPATCH_LOG".into(),
                    run.calls.display().to_string(),
                ),
                (
                    "XDG_CONFIG_HOME".into(),
                    run.home.join(".config").display().to_string(),
                ),
            ],
            work: Some(run.project.clone()),
            home: Some(run.home.clone()),
            prepare: Some(prepare),
            ..LiveOptions::default()
        },
    )
}

/// The script of the permission turn: [`PANE_PROMPT`] gets one shell call (which the
/// harness asks permission for), then [`PANE_DONE`].
fn permission_script(run: &CellsRun) -> Value {
    serde_json::json!({
        "turns": [{
            "match": "CELLS-PANE-GO",
            "tool": { "command": format!("touch {} && echo CELLS-PANE-RAN", run.ran_marker.display()) },
            "then": { "text": PANE_DONE },
        }],
        "fallback": { "text": "FALLBACK" },
    })
}

/// Submits [`PANE_PROMPT`] in `live`, leaves the permission dialog open until the
/// notification reaches dispatch (20 s at most: Claude Code 2.1.328 sends its
/// `permission_prompt` notice only after the dialog has waited 6 s unanswered, its binary's
/// timer), then approves it and waits for [`PANE_DONE`]. Returns how many dialogs were
/// approved and how long after the dialog opened the notification came. Fails with the screen
/// when the dialog never opens or the turn never finishes.
fn permission_turn(live: &Live, run: &CellsRun) -> (usize, Duration) {
    let label = &run.label;
    live.wait_ready();
    live.submit(PANE_PROMPT);
    let dialog = live
        .profile
        .dialog_regex()
        .unwrap_or_else(|| panic!("{label}: the live profile names no permission dialog"));
    assert!(
        live.wait(&dialog, None, 60_000),
        "{label}: the shell call never opened a permission dialog\nscreen:\n{}\n{}",
        live.screen(),
        run.evidence()
    );
    let opened = Instant::now();
    let deadline = opened + Duration::from_secs(20);
    while Instant::now() < deadline && run.calls("notification").is_empty() {
        std::thread::sleep(Duration::from_millis(200));
    }
    let waited = opened.elapsed();
    let approved = live.wait_approving(PANE_DONE, 120_000);
    let approved = approved.unwrap_or_else(|| {
        panic!(
            "{label}: the permission turn never finished\nscreen:\n{}\n{}",
            live.screen(),
            run.evidence()
        )
    });
    assert!(
        approved >= 1 && run.ran_marker.exists(),
        "{label}: the shell call ran without a permission dialog ({approved} approved), so no notification was due\n{}",
        run.evidence()
    );
    (approved, waited)
}

/// Asserts that `event` reached dispatch in the pane run, with its observer, and prints it.
fn assert_pane_cell(run: &CellsRun, event: &str, how: &str) {
    let label = &run.label;
    let status = belfry_tests::projection_live::matrix(&run.target)["cells"][event]["status"]
        .as_str()
        .unwrap_or("missing")
        .to_string();
    let calls = run.calls(event);
    assert!(
        !calls.is_empty() && calls.iter().all(|call| call["handlers"] == 1),
        "{label}: the matrix calls {event} {status}, but {how} never called belfry dispatch for it (or ran no observer)\n{}",
        run.evidence()
    );
    assert!(
        !run.observed(event).is_empty(),
        "{label}: {event}: dispatch was called but the observer never ran\n{}",
        run.evidence()
    );
    println!(
        "cells (pane): {label}: {event} {status}: dispatch called {}x {how}",
        calls.len()
    );
}

#[test]
#[ignore = "live: needs Claude Code, belfry-model-server and a network namespace"]
fn claude_notifies_on_a_permission_prompt_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "claude");
    // No allow list: the profile's --permission-mode default asks before the shell call.
    let live = pane(&run, "claude", permission_script(&run), &|| {
        run.apply(&[], &[]);
    });
    let (approved, waited) = permission_turn(&live, &run);
    let notified = run.observed("notification");
    assert!(
        notified
            .iter()
            .any(|input| input["hook_event_name"] == "Notification"),
        "{}: no Notification input reached the observer: {notified:?}\n{}",
        run.label,
        run.evidence()
    );
    assert_pane_cell(
        &run,
        "notification",
        &format!(
            "{} ms after the permission dialog opened ({approved} approved), messages {:?}",
            waited.as_millis(),
            notified
                .iter()
                .map(|input| input["message"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        ),
    );
}

/// The prompt of the slow turn an interrupt stops, and the answer it streams (slowly).
const SLOW_PROMPT: &str = "CELLS-SLOW-GO";

/// The script of the slow turn: [`SLOW_PROMPT`] is answered with 200 pieces joined by
/// `joint`, one every 200 ms (40 s in all, far longer than a test waits for it).
fn slow_script(joint: &str) -> Value {
    let words: Vec<String> = (0..200).map(|n| format!("slow{n}")).collect();
    serde_json::json!({
        "turns": [{ "match": SLOW_PROMPT, "text": words.join(joint), "delay_ms": 200 }],
        "fallback": { "text": "FALLBACK" },
    })
}

/// Submits [`SLOW_PROMPT`] in `live`, waits until the screen matches `started` (the turn is
/// under way), presses Escape and waits (20 s at most) for dispatch to be called for
/// `interrupt`. Returns what the observer read; asserts no Stop fired for the stopped turn.
fn escape_a_slow_turn(run: &CellsRun, live: &Live, started: &str) -> Vec<Value> {
    let label = &run.label;
    live.wait_ready();
    live.submit(SLOW_PROMPT);
    assert!(
        live.wait(started, None, 60_000),
        "{label}: the slow turn never showed {started:?}\nscreen:\n{}",
        live.screen()
    );
    live.guarded_send(&["--key", "Escape"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && run.calls("interrupt").is_empty() {
        std::thread::sleep(Duration::from_millis(200));
    }
    let interrupted = run.observed("interrupt");
    assert!(
        interrupted
            .iter()
            .any(|input| input["hook_event_name"] == "Interrupt"),
        "{label}: no Interrupt reached the observer: {interrupted:?}\nscreen:\n{}\n{}",
        live.screen(),
        run.evidence()
    );
    assert!(
        run.calls("turn-stop").is_empty(),
        "{label}: the interrupted turn also fired Stop\n{}",
        run.evidence()
    );
    interrupted
}

/// interrupt (exact on Claude Code 2.1.337): Escape during a streaming turn ends it, and
/// Claude Code's Interrupt reaches dispatch as `interrupt`, saying a person stopped it.
#[test]
#[ignore = "live: needs Claude Code, belfry-model-server and a network namespace"]
fn claude_dispatches_interrupt_on_escape_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "claude");
    let live = pane(&run, "claude", slow_script(" "), &|| {
        run.apply(&[], &[]);
    });
    let label = &run.label;
    let busy = live
        .profile
        .busy_regex()
        .unwrap_or_else(|| panic!("{label}: the live profile names no busy screen"));
    let interrupted = escape_a_slow_turn(&run, &live, &busy);
    assert!(
        interrupted.iter().any(|input| input["source"] == "user"),
        "{label}: no Interrupt said the user stopped the turn: {interrupted:?}"
    );
    assert_pane_cell(
        &run,
        "interrupt",
        &format!(
            "after Escape in a streaming turn, inputs {:?}",
            interrupted
                .iter()
                .map(|input| format!(
                    "source {} reason {} via {}",
                    input["source"], input["reason"], input["via"]
                ))
                .collect::<Vec<_>>()
        ),
    );
}

/// interrupt (lossy on Codex 0.171.0, `codex:interrupt-no-source`): Escape during a
/// streaming turn in a belfry pane ends it, and Codex's Interrupt reaches dispatch as
/// `interrupt` with the turn it stopped, but nothing saying who stopped it. The entry runs
/// only because `apply --trust` wrote the hash Codex computes for it (its timeout cut to 3 s).
#[test]
#[ignore = "live: needs Codex, belfry-model-server and a network namespace"]
fn codex_dispatches_interrupt_on_escape_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "codex");
    let codex_home = run.home.join(".codex");
    // Codex draws a streamed answer a finished paragraph at a time, so each piece is one.
    let live = pane(&run, "codex", slow_script("\n\n"), &|| {
        run.apply(&["--trust"], &[("CODEX_HOME", &codex_home)]);
    });
    let label = &run.label;
    let interrupted = escape_a_slow_turn(&run, &live, "slow1");
    assert!(
        interrupted.iter().all(|input| input.get("source").is_none()
            && input["turn_id"].as_str().is_some_and(|id| !id.is_empty())),
        "{label}: the matrix says Codex's Interrupt names its turn and no source: {interrupted:?}"
    );
    assert_pane_cell(
        &run,
        "interrupt",
        &format!(
            "(lossy: no source) after Escape in a streaming turn, inputs {:?}",
            interrupted
                .iter()
                .map(|input| format!(
                    "turn_id {} permission_mode {}",
                    input["turn_id"], input["permission_mode"]
                ))
                .collect::<Vec<_>>()
        ),
    );
}

#[test]
#[ignore = "live: needs Gemini CLI, belfry-model-server and a network namespace"]
fn gemini_notifies_on_a_permission_prompt_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "gemini");
    // Without --yolo the shell tool asks before it runs.
    let live = pane(&run, "gemini", permission_script(&run), &|| {
        run.apply(&[], &[]);
    });
    let (approved, waited) = permission_turn(&live, &run);
    let notified = run.observed("notification");
    assert!(
        notified
            .iter()
            .any(|input| input["hook_event_name"] == "Notification"),
        "{}: no Notification input reached the observer: {notified:?}\n{}",
        run.label,
        run.evidence()
    );
    assert_pane_cell(
        &run,
        "notification",
        &format!(
            "{} ms after the permission dialog opened ({approved} approved), types {:?}",
            waited.as_millis(),
            notified
                .iter()
                .map(|input| input["notification_type"]
                    .as_str()
                    .unwrap_or("")
                    .to_string())
                .collect::<Vec<_>>()
        ),
    );
}

/// The prompt that gives an interactive session some history to compact, and its answer.
const HISTORY_PROMPT: &str = "CELLS-HISTORY please remember this";
const HISTORY_ANSWER: &str = "CELLS-HISTORY-ANSWER";

/// Gives `live` one answered turn of history, then types `/compact` in its composer (typed,
/// not pasted, so that the composer reads it as its slash command) and waits up to 90 s for
/// pre-compact to reach dispatch and for the compaction's own request (the summary, which the
/// server answers) to reach the model server. Returns the pre-compact observers'
/// inputs and the requests the compaction made (their kind, and whether they carry the history).
fn compact_turn(live: &Live, run: &CellsRun) -> (Vec<Value>, String) {
    let label = &run.label;
    live.wait_ready();
    live.submit(HISTORY_PROMPT);
    assert!(
        live.wait(HISTORY_ANSWER, None, 60_000),
        "{label}: the history turn never answered\nscreen:\n{}",
        live.screen()
    );
    live.wait(HISTORY_ANSWER, Some(1_000), 10_000);
    let before = live.server.requests().len();
    live.guarded_send(&["--text", "/compact", "--delay-ms", "500", "--key", "Enter"]);
    let summarised = || live.server.requests().len() > before;
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline && (run.calls("pre-compact").is_empty() || !summarised()) {
        std::thread::sleep(Duration::from_millis(250));
    }
    let compactions = run.observed("pre-compact");
    assert!(
        !compactions.is_empty(),
        "{label}: /compact in the composer never called pre-compact\nscreen:\n{}\n{}",
        live.screen(),
        run.evidence()
    );
    assert!(
        summarised(),
        "{label}: pre-compact fired, but the compaction sent the model server no request\nscreen:\n{}",
        live.screen()
    );
    let requests = live.server.requests()[before..]
        .iter()
        .map(|request| {
            let body = request["body"].to_string();
            format!(
                "{} (history prompt {}, answer {})",
                request["kind"].as_str().unwrap_or("?"),
                if body.contains("CELLS-HISTORY please") {
                    "in"
                } else {
                    "not in"
                },
                if body.contains(HISTORY_ANSWER) {
                    "in"
                } else {
                    "not in"
                },
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    (compactions, requests)
}

/// The script of the compaction runs: the history turn, then whatever the compaction request
/// asks, answered by the fallback (the summary).
fn history_script() -> Value {
    serde_json::json!({
        "turns": [{ "match": "CELLS-HISTORY", "text": HISTORY_ANSWER }],
        "fallback": { "text": "CELLS-SUMMARY of the conversation so far" },
    })
}

#[test]
#[ignore = "live: needs Codex, belfry-model-server and a network namespace"]
fn codex_calls_pre_compact_for_compact_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "codex");
    let codex_home = run.home.join(".codex");
    // --trust writes the entries' trusted hashes into the config the profile seeded.
    let live = pane(&run, "codex", history_script(), &|| {
        run.apply(&["--trust"], &[("CODEX_HOME", &codex_home)]);
    });
    let (compactions, requests) = compact_turn(&live, &run);
    assert!(
        compactions.iter().any(|input| input["trigger"] == "manual"),
        "{}: /compact called pre-compact, but not with trigger manual: {compactions:?}",
        run.label
    );
    assert_pane_cell(
        &run,
        "pre-compact",
        &format!(
            "for /compact typed in the composer (trigger manual; the compaction's requests: {requests})"
        ),
    );
}

#[test]
#[ignore = "live: needs Pi, belfry-model-server and a network namespace"]
fn pi_calls_pre_compact_for_compact_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "pi");
    let live = pane(&run, "pi", history_script(), &|| {
        run.apply(&[], &[]);
    });
    let (compactions, requests) = compact_turn(&live, &run);
    assert_pane_cell(
        &run,
        "pre-compact",
        &format!(
            "for /compact typed in the composer (the compaction's requests: {requests}; observer input {})",
            compactions[0].to_string().chars().take(160).collect::<String>()
        ),
    );
}

#[test]
#[ignore = "live: needs OpenCode, belfry-model-server and a network namespace"]
fn opencode_calls_pre_compact_for_compact_in_a_pane() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let run = CellsRun::new(root.path(), "opencode");
    let live = pane(&run, "opencode", history_script(), &|| {
        run.apply(&[], &[]);
    });
    let (_, requests) = compact_turn(&live, &run);
    // opencode:pre-compact-experimental: the generated plugin observes the compaction from
    // the experimental.session.compacting hook, which fired.
    assert_pane_cell(
        &run,
        "pre-compact",
        &format!(
            "(lossy: observed from experimental.session.compacting) for /compact typed in the composer (the compaction's requests: {requests})"
        ),
    );
}
