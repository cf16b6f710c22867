//! spec §9, live: the projection `belfry hooks apply` writes for Gemini CLI really runs. The
//! real Gemini CLI 0.61.0 (`gemini -p`, API-key auth pointed at the server by
//! `GOOGLE_GEMINI_BASE_URL`) talks to the project's scripted model server inside a
//! loopback-only network namespace, in a folder it trusts. An enrich hook's context reaches
//! the model: a request the server sees carries it. An enforce hook's deny blocks the shell
//! tool: the scripted command's side effect never happens, and a later request carries the
//! refusal.
//!
//! Ignored by default: it needs the installed harness, the scripted model server
//! (`belfry-model-server`, built with the workspace binaries by the live-harness work), and the
//! Gemini dialect of `belfry dispatch --native`. Run it with `cargo test -p belfry-tests --test
//! hooks_gemini_live -- --ignored`, with Gemini CLI at `$BELFRY_GEMINI_BIN` or installed under
//! `target/harnesses/gemini-0.61.0`, and the server at `$BELFRY_MODEL_SERVER` or beside
//! `belfry`. It fails with the reason when something is missing; it never skips. (Run on
//! 2026-12-01 with the three branches' binaries: passed.)

use std::path::PathBuf;
use std::process::Command;

use belfry_tests::bin_dir;
use belfry_tests::projection_live::{self, found, target_dir};

const GEMINI_VERSION: &str = "0.61.0";

#[test]
#[ignore = "live: needs Gemini CLI 0.61.0, belfry-model-server, the gemini dialect and a network namespace"]
fn gemini_runs_the_projection_a_deny_blocks_and_a_context_arrives() {
    let gemini = found(
        "BELFRY_GEMINI_BIN",
        target_dir().join(format!(
            "harnesses/gemini-{GEMINI_VERSION}/node_modules/.bin/gemini"
        )),
        "Gemini CLI",
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
    for dir in [home.join(".gemini"), project.join("scripts")] {
        std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
    }
    let write = |path: PathBuf, text: &str, executable: bool| {
        std::fs::write(&path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        if executable {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        }
    };
    projection_live::guarded_project(&project, "gemini", "REPO-NOTE-9090");
    // API-key auth (so the base URL applies), no update check or telemetry, the folder trusted.
    write(
        home.join(".gemini/settings.json"),
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
        home.join(".gemini/trustedFolders.json"),
        &serde_json::json!({ project.display().to_string(): "TRUST_FOLDER" }).to_string(),
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
         GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:$PORT timeout 120 {gemini} --yolo -p 'please push it now'\n\
         STATUS=$?\n\
         kill $SERVER\n\
         exit $STATUS\n",
        server = server.display(),
        script = base.join("script.json").display(),
        requests = requests.display(),
        port = base.join("port").display(),
        gemini = gemini.display(),
    );
    let output = Command::new("unshare")
        .args(["-n", "sh", "-c", &runner])
        .current_dir(&project)
        .env("PATH", path)
        .env("HOME", &home)
        .env("GEMINI_API_KEY", "belfry-live-key")
        .output()
        .unwrap_or_else(|err| panic!("unshare -n: {err} (no network namespace here?)"));
    projection_live::assert_guarded_run(
        &format!("Gemini CLI {GEMINI_VERSION}"),
        &output,
        &marker,
        &requests,
        "REPO-NOTE-9090",
    );
}
