//! spec §9, live: the projection `belfry hooks apply` writes for Claude Code really runs. The
//! real Claude Code 2.1.328 (`claude -p`) talks to the project's scripted model server inside a
//! loopback-only network namespace. An enrich hook's context reaches the model: the first
//! request the server sees carries it. An enforce hook's deny blocks the shell tool: the
//! scripted command's side effect never happens, and the next request carries the refusal.
//!
//! Ignored by default: it needs the installed harness, the scripted model server
//! (`belfry-model-server`, built with the workspace binaries by the live-harness work), and the
//! Claude dialect of `belfry dispatch --native`. Run it with `cargo test -p belfry-tests --test
//! hooks_claude_live -- --ignored`, with Claude Code at `$BELFRY_CLAUDE_BIN` or installed under
//! `target/harnesses/claude-2.1.328`, and the server at `$BELFRY_MODEL_SERVER` or beside
//! `belfry`. It fails with the reason when something is missing; it never skips. (Run on
//! 2026-12-01 with the three branches' binaries: passed.)

use std::path::PathBuf;
use std::process::Command;

use belfry_tests::bin_dir;
use belfry_tests::projection_live::{self, found, target_dir};

const CLAUDE_VERSION: &str = "2.1.337";

#[test]
#[ignore = "live: needs Claude Code 2.1.328, belfry-model-server, the claude dialect and a network namespace"]
fn claude_runs_the_projection_a_deny_blocks_and_a_context_arrives() {
    let claude = found(
        "BELFRY_CLAUDE_BIN",
        target_dir().join(format!(
            "harnesses/claude-{CLAUDE_VERSION}/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
        )),
        "Claude Code",
    );
    let server = found(
        "BELFRY_MODEL_SERVER",
        bin_dir().join("belfry-model-server"),
        "the scripted model server",
    );
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    let (home, project) = (base.join("home"), base.join("project"));
    let marker = base.join("pushed-marker");
    for dir in [
        home.clone(),
        project.join("scripts"),
        project.join(".claude"),
    ] {
        std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
    }
    let write = |path: PathBuf, text: &str, executable: bool| {
        std::fs::write(&path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        if executable {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        }
    };
    projection_live::guarded_project(&project, "claude", "REPO-NOTE-7731");
    // Strict JSON: Claude Code reads nothing from a settings file with a comment.
    write(
        project.join(".claude/settings.json"),
        "{\n  \"permissions\": {\"allow\": [\"Bash\"]}\n}\n",
        false,
    );
    // Onboarding done, the workspace trusted, the key approved: the dialogs whose default is No.
    let key = "sk-ant-belfry-live-0123456789abcdefghij";
    write(
        home.join(".claude.json"),
        &serde_json::json!({
            "hasCompletedOnboarding": true,
            "projects": { project.display().to_string(): { "hasTrustDialogAccepted": true } },
            "customApiKeyResponses": { "approved": [&key[key.len() - 20..]], "rejected": [] },
        })
        .to_string(),
        false,
    );
    projection_live::force_push_script(&base.join("script.json"), &marker);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    projection_live::apply(&project, &home);

    let requests = base.join("requests.ndjson");
    let runner = format!(
        "ip link set lo up\n\
         {server} --script {script} --log {requests} > {port} 2>/dev/null &\n\
         SERVER=$!\n\
         for i in $(seq 1 100); do [ -s {port} ] && break; sleep 0.1; done\n\
         PORT=$(head -1 {port} | tr -dc 0-9)\n\
         ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT timeout 120 {claude} -p 'please push it now' --allowedTools Bash\n\
         STATUS=$?\n\
         kill $SERVER\n\
         exit $STATUS\n",
        server = server.display(),
        script = base.join("script.json").display(),
        requests = requests.display(),
        port = base.join("port").display(),
        claude = claude.display(),
    );
    let output = Command::new("unshare")
        .args(["-n", "sh", "-c", &runner])
        .current_dir(&project)
        .env("PATH", path)
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", key)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .unwrap_or_else(|err| panic!("unshare -n: {err} (no network namespace here?)"));
    projection_live::assert_guarded_run(
        &format!("Claude Code {CLAUDE_VERSION}"),
        &output,
        &marker,
        &requests,
        "REPO-NOTE-7731",
    );
}
