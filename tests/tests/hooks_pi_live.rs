//! spec §9, live: the extension `belfry hooks apply` generates for Pi really runs. The real
//! Pi 0.73.1 (`pi -p`, offline, a custom Chat Completions provider on the server) finds
//! `.pi/extensions/belfry.ts` by itself and talks to the project's scripted model server inside
//! a loopback-only network namespace. An enrich hook's context reaches the model: a request
//! the server sees carries it. An enforce hook's deny blocks the shell tool: the scripted
//! command's side effect never happens, and a later request carries the refusal.
//!
//! Ignored by default: it needs the installed harness and the scripted model server
//! (`belfry-model-server`, built with the workspace binaries). Run it with `cargo test -p belfry-tests --test
//! hooks_pi_live -- --ignored`, with Pi at `$BELFRY_PI_BIN` or installed under
//! `target/harnesses/pi-0.73.1` (`scripts/install-harnesses pi`), and the server at
//! `$BELFRY_MODEL_SERVER` or beside `belfry`. It fails with the reason when something is
//! missing; it never skips. (Run on 2026-12-01: passed.)

use std::process::Command;

use belfry_tests::bin_dir;
use belfry_tests::projection_live::{self, found, target_dir};

const PI_VERSION: &str = "0.73.1";

#[test]
#[ignore = "live: needs Pi 0.73.1, belfry-model-server and a network namespace"]
fn pi_runs_the_generated_extension_a_deny_blocks_and_a_context_arrives() {
    let pi = found(
        "BELFRY_PI_BIN",
        target_dir().join(format!("harnesses/pi-{PI_VERSION}/node_modules/.bin/pi")),
        "Pi",
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
    for dir in [home.join(".pi/agent"), project.join("scripts")] {
        std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
    }
    projection_live::guarded_project(&project, "pi", "REPO-NOTE-3141");
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
         printf '{{\"providers\":{{\"mock\":{{\"baseUrl\":\"http://127.0.0.1:%s/v1\",\"api\":\"openai-completions\",\"apiKey\":\"belfry-live-key\",\"models\":[{{\"id\":\"scripted-model\",\"name\":\"Scripted model\"}}]}}}}}}' $PORT > {models}\n\
         timeout 120 {pi} --offline --provider mock --model scripted-model -p 'please push it now'\n\
         STATUS=$?\n\
         kill $SERVER\n\
         exit $STATUS\n",
        server = server.display(),
        script = base.join("script.json").display(),
        requests = requests.display(),
        port = base.join("port").display(),
        pi = pi.display(),
        models = home.join(".pi/agent/models.json").display(),
    );
    let output = Command::new("unshare")
        .args(["-n", "sh", "-c", &runner])
        .current_dir(&project)
        .env("PATH", path)
        .env("HOME", &home)
        .env("PI_CODING_AGENT_DIR", home.join(".pi/agent"))
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0")
        .output()
        .unwrap_or_else(|err| panic!("unshare -n: {err} (no network namespace here?)"));
    projection_live::assert_guarded_run(
        &format!("Pi {PI_VERSION}"),
        &output,
        &marker,
        &requests,
        "REPO-NOTE-3141",
    );
}
