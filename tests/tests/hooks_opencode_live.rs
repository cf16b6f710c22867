//! spec §9, live: the plugin `belfry hooks apply` generates for OpenCode really runs. The real
//! OpenCode 1.18.33 (`opencode run`) loads `.opencode/plugin/belfry.js` by itself and talks to
//! the project's scripted model server inside a loopback-only network namespace, set up from
//! the adapter's own offline profile (`adapters/opencode/live.json`). An enforce hook's deny
//! blocks the bash tool: the scripted command's side effect never happens, and a later request
//! carries the refusal. An enrich hook's context, added as a text part of the user's message,
//! reaches the model.
//!
//! Ignored by default: it needs the installed harness (`scripts/install-harnesses opencode`, or
//! `$BELFRY_OPENCODE_BIN`) and the scripted model server (`belfry-model-server` beside
//! `belfry`, or `$BELFRY_MODEL_SERVER`). Run it with `cargo test -p belfry-tests --test
//! hooks_opencode_live -- --ignored`. It fails with the reason when something is missing; it
//! never skips. (Run on 2026-12-01: passed.)

use std::path::{Path, PathBuf};
use std::process::Command;

use belfry_tests::projection_live::{self, found};
use belfry_tests::{belfry_bin, bin_dir};
use serde_json::Value;

/// Runs the generated plugin in the OpenCode a pin names (`opencode`: 1.x, `opencode2`: 2.x),
/// set up from that pin's offline profile, and proves a deny blocks and a context arrives.
fn the_generated_plugin_blocks_and_adds_context(key: &str) {
    let pin = belfry_tests::live::Pin::load(key);
    let version = pin.version.clone();
    let opencode = match std::env::var_os("BELFRY_OPENCODE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => pin
            .executable()
            .unwrap_or_else(|reason| panic!("OpenCode {version}: cannot run: {reason}")),
    };
    let server = found(
        "BELFRY_MODEL_SERVER",
        bin_dir().join("belfry-model-server"),
        "the scripted model server",
    );
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    let (home, project) = (base.join("home"), base.join("project"));
    let marker = base.join("pushed-marker");
    let write = |path: &Path, text: &str, executable: bool| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|err| panic!("{err}"));
        }
        std::fs::write(path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        if executable {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
        }
    };
    // The adapter's offline profile: the provider on the server (its port filled in once the
    // server listens) and the plugin package stubs that spare a registry install.
    let profile_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../adapters/opencode")
        .join(&pin.profile);
    let profile: Value = std::fs::read_to_string(&profile_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{}", profile_path.display()));
    let fill = |text: &str| {
        text.replace("{home}", &home.display().to_string())
            .replace("{work}", &project.display().to_string())
            .replace("{base_url}", "http://127.0.0.1:PORT")
    };
    for file in profile["files"].as_array().cloned().unwrap_or_default() {
        let path = PathBuf::from(fill(file["path"].as_str().unwrap_or_default()));
        write(&path, &fill(&file["json"].to_string()), false);
    }
    projection_live::guarded_project(&project, "opencode", "REPO-NOTE-2718");
    projection_live::force_push_script(&base.join("script.json"), &marker);
    let apply = Command::new(belfry_bin())
        .args(["hooks", "apply"])
        .current_dir(&project)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stdout)
    );
    assert!(project.join(".opencode/plugin/belfry.js").exists());

    // 2.x runs a shared background service unless told to run a private server.
    let standalone = if profile["argv"].to_string().contains("--standalone") {
        "--standalone"
    } else {
        ""
    };
    let requests = base.join("requests.ndjson");
    let port = base.join("port");
    let runner = format!(
        "ip link set lo up\n\
         {server} --script {script} --log {requests} > {port} 2>/dev/null &\n\
         SERVER=$!\n\
         for i in $(seq 1 100); do [ -s {port} ] && break; sleep 0.1; done\n\
         PORT=$(head -1 {port} | tr -dc 0-9)\n\
         sed -i \"s/127.0.0.1:PORT/127.0.0.1:$PORT/\" {config}\n\
         timeout 150 {opencode} run {standalone} 'please push it now'\n\
         STATUS=$?\n\
         kill $SERVER\n\
         exit $STATUS\n",
        server = server.display(),
        script = base.join("script.json").display(),
        requests = requests.display(),
        port = port.display(),
        config = home.join(".config/opencode/opencode.json").display(),
        opencode = opencode.display(),
        standalone = standalone,
    );
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("unshare");
    command
        .args(["-n", "sh", "-c", &runner])
        .current_dir(&project)
        .env("PATH", path);
    for (name, value) in profile["env"].as_object().cloned().unwrap_or_default() {
        command.env(name, fill(value.as_str().unwrap_or_default()));
    }
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("unshare -n: {err} (no network namespace here?)"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("DONE-AFTER-TOOL"),
        "OpenCode {version}: {stdout}\n{stderr}"
    );
    assert!(
        !marker.exists(),
        "OpenCode {version} ran the force push the guard refused\nstdout: {stdout}\nstderr: {stderr}"
    );
    let log = std::fs::read_to_string(&requests).unwrap_or_default();
    assert!(
        log.contains("force push refused by the belfry guard"),
        "OpenCode {version}: the model never saw the refusal: {log}"
    );
    assert!(
        log.contains("REPO-NOTE-2718"),
        "OpenCode {version}: the enrich hook's context did not reach the model"
    );
}

#[test]
#[ignore = "live: needs OpenCode 1.18.33, belfry-model-server and a network namespace"]
fn opencode_runs_the_generated_plugin_a_deny_blocks_and_a_context_arrives() {
    the_generated_plugin_blocks_and_adds_context("opencode");
}

#[test]
#[ignore = "live: needs OpenCode 2.2.5, belfry-model-server and a network namespace"]
fn opencode2_runs_the_generated_plugin_a_deny_blocks_and_a_context_arrives() {
    the_generated_plugin_blocks_and_adds_context("opencode2");
}
