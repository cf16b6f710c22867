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
//!
//! The same generated extension runs on Pi 1.6.0 (`@earendil-works/pi-coding-agent`, pin
//! `pi1`), which loads a project's `.pi/extensions` only once the project is trusted: after
//! `belfry hooks apply --trust` it blocks and carries the context exactly as on 0.73.1;
//! after a plain `apply` it is inert (the forbidden command runs), `hooks status` says why, and
//! `uninstall` leaves the user's trust file byte for byte as it was.

use std::process::Command;

use belfry_tests::bin_dir;
use belfry_tests::projection_live::{self, found};

/// One guarded `pi -p` run of the pin `pin` in a fresh project: `apply` with `apply_args`
/// first, `seed` planted in the agent directory's trust.json beforehand when given. Returns
/// the run's output, the marker path, the requests log, the base directory and the status
/// output after the run.
struct Run {
    output: std::process::Output,
    marker: std::path::PathBuf,
    requests: std::path::PathBuf,
    home: std::path::PathBuf,
    project: std::path::PathBuf,
    _root: tempfile::TempDir,
}

fn guarded_run(pin: &str, apply_args: &[&str], seed: Option<&str>) -> Run {
    let variable = if pin == "pi" {
        "BELFRY_PI_BIN"
    } else {
        "BELFRY_PI1_BIN"
    };
    let pi = projection_live::harness_bin(pin, variable, "node_modules/.bin/pi");
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
    if let Some(seed) = seed {
        std::fs::write(home.join(".pi/agent/trust.json"), seed)
            .unwrap_or_else(|err| panic!("{err}"));
    }
    projection_live::guarded_project(&project, "pi", "REPO-NOTE-3141");
    projection_live::force_push_script(&base.join("script.json"), &marker);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let apply = Command::new(belfry_tests::belfry_bin())
        .args(["hooks", "apply"])
        .args(apply_args)
        .current_dir(&project)
        .env("HOME", &home)
        .env("PI_CODING_AGENT_DIR", home.join(".pi/agent"))
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        apply.status.success(),
        "{}{}",
        String::from_utf8_lossy(&apply.stdout),
        String::from_utf8_lossy(&apply.stderr)
    );

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
    Run {
        output,
        marker,
        requests,
        home,
        project,
        _root: root,
    }
}

/// `belfry hooks <args>` in the run's project with the pin `pin`'s `pi` first on PATH (so
/// detection finds its version): the output and the exit code.
fn hooks(run: &Run, args: &[&str], pin: &str) -> (String, i32) {
    let variable = if pin == "pi" {
        "BELFRY_PI_BIN"
    } else {
        "BELFRY_PI1_BIN"
    };
    let pi = projection_live::harness_bin(pin, variable, "node_modules/.bin/pi");
    let path = format!(
        "{}:{}:{}",
        pi.parent()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(belfry_tests::belfry_bin())
        .arg("hooks")
        .args(args)
        .current_dir(&run.project)
        .env("PATH", path)
        .env("HOME", &run.home)
        .env("PI_CODING_AGENT_DIR", run.home.join(".pi/agent"))
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    (
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
#[ignore = "live: needs Pi 0.73.1, belfry-model-server and a network namespace"]
fn pi_runs_the_generated_extension_a_deny_blocks_and_a_context_arrives() {
    let run = guarded_run("pi", &[], None);
    projection_live::assert_guarded_run(
        "Pi 0.73.1",
        &run.output,
        &run.marker,
        &run.requests,
        "REPO-NOTE-3141",
    );
}

#[test]
#[ignore = "live: needs Pi 1.6.0, belfry-model-server and a network namespace"]
fn pi1_runs_the_same_extension_once_apply_trust_trusts_the_project_and_uninstall_restores_the_trust_file(
) {
    // The user's own trust decisions, in Pi's format, before belfry touches the file.
    let seed = "{\n  \"/elsewhere\": false,\n  \"/mine\": true\n}\n";
    let run = guarded_run("pi1", &["--trust"], Some(seed));
    projection_live::assert_guarded_run(
        "Pi 1.6.0",
        &run.output,
        &run.marker,
        &run.requests,
        "REPO-NOTE-3141",
    );
    let trust_file = run.home.join(".pi/agent/trust.json");
    let written = std::fs::read_to_string(&trust_file).unwrap_or_else(|err| panic!("{err}"));
    assert!(
        written.contains(&format!("\"{}\": true", run.project.display())),
        "apply --trust did not record the project: {written}"
    );
    let (status, code) = hooks(&run, &["status"], "pi1");
    assert_eq!(code, 0, "status after apply --trust: {status}");
    assert!(!status.contains("not trusted"), "{status}");
    let (out, code) = hooks(&run, &["uninstall"], "pi1");
    assert_eq!(code, 0, "uninstall: {out}");
    assert_eq!(
        std::fs::read_to_string(&trust_file).unwrap_or_else(|err| panic!("{err}")),
        seed,
        "uninstall left the user's trust file changed"
    );
    eprintln!("live Pi 1.6.0: trusted by apply --trust, deny blocked, context arrived, trust.json restored byte for byte");
}

#[test]
#[ignore = "live: needs Pi 1.6.0, belfry-model-server and a network namespace"]
fn pi1_leaves_an_untrusted_projection_inert_and_status_says_so() {
    let run = guarded_run("pi1", &[], None);
    // Pi loaded no extension: the guard never ran, so the forbidden command's side effect
    // happened.
    assert!(
        run.marker.exists(),
        "the untrusted extension blocked the command: Pi 1.6.0 loaded it\n{}",
        String::from_utf8_lossy(&run.output.stdout)
    );
    let (status, code) = hooks(&run, &["status"], "pi1");
    assert_ne!(code, 0, "status of an inert projection exits 0: {status}");
    assert!(status.contains("not trusted by Pi"), "{status}");
    // Pi 0.73.1 asks no trust: the same projection is not inert for it.
    let (status, _) = hooks(&run, &["status"], "pi");
    assert!(!status.contains("not trusted"), "{status}");
    eprintln!("live Pi 1.6.0: untrusted projection inert (the command ran), status: {status}");
}
