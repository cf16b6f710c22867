//! spec §9, live: the entries `belfry hooks apply` writes for Codex are the ones the real
//! Codex pinned in `tests/harnesses.json` trusts. The test runs `codex app-server` (JSON-RPC on stdio) in a
//! loopback-only network namespace and asks `hooks/list` what it will run: with `--trust`
//! every managed entry is "trusted" under the hash belfry wrote; without it, "untrusted", which
//! is what `belfry hooks status` reports as inert.
//!
//! Ignored by default: it needs the installed harness. Run it with
//! `cargo test -p belfry-tests --test hooks_codex_trust_live -- --ignored`, with the Codex
//! binary at `$BELFRY_CODEX_BIN` or installed by `scripts/install-harnesses codex` (under
//! `$BELFRY_HARNESS_DIR`, default `target/harnesses`). Run on its
//! own, it fails with the reason when the binary or the namespace is missing, never skips.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use belfry_tests::belfry_bin;
use belfry_tests::projection_live::{harness_bin, pinned_version};
use serde_json::{json, Value};

/// The Codex version the test runs: the pin of `tests/harnesses.json`.
fn codex_version() -> String {
    pinned_version("codex")
}

fn codex_bin() -> PathBuf {
    harness_bin(
        "codex",
        "BELFRY_CODEX_BIN",
        "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    )
}

/// `hooks/list` for `project`, asked of `codex app-server` inside `unshare -n`.
fn hooks_list(codex: &Path, project: &Path, codex_home: &Path) -> Value {
    let mut child = Command::new("unshare")
        .arg("-n")
        .arg(codex)
        .arg("app-server")
        .current_dir(project)
        .env("CODEX_HOME", codex_home)
        .env("HOME", codex_home.parent().unwrap_or(codex_home))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|err| {
            panic!("unshare -n codex app-server: {err} (no network namespace here?)")
        });
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let (lines_tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = |value: Value| {
        let _ = writeln!(stdin, "{value}");
        let _ = stdin.flush();
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = |id: u64| -> Value {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!("codex app-server gave no answer to request {id} within 30 s")
            });
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                if value["id"] == json!(id) {
                    return value;
                }
            }
        }
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"clientInfo": {"name": "belfry-test", "version": "0"}}}));
    let init = answer(1);
    assert!(
        init["result"]["userAgent"]
            .as_str()
            .unwrap_or_default()
            .contains(&codex_version()),
        "{init}"
    );
    send(json!({"jsonrpc": "2.0", "method": "initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                "params": {"cwds": [project.display().to_string()]}}));
    let list = answer(2);
    let _ = child.kill();
    let _ = child.wait();
    list
}

#[test]
#[ignore = "live: needs the pinned Codex and a network namespace"]
fn codex_trusts_exactly_the_entries_apply_trust_wrote() {
    let version = codex_version();
    let codex = codex_bin();
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    let project = base.join("project");
    let codex_home = base.join("home/.codex");
    for dir in [project.join(".git"), codex_home.clone()] {
        std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{err}"));
    }
    std::fs::write(
        project.join("belfry-hooks.kdl"),
        "hook \"notes\" { event \"prompt-submit\"; command \"notes\"; targets \"codex\" }\n\
         hook \"watch\" { event \"before-tool\"; intent \"observe\"; select tool=\"shell\"; command \"w\"; targets \"codex\" }\n\
         hook \"stopped\" { event \"interrupt\"; intent \"observe\"; command \"s\"; targets \"codex\" }\n",
    )
    .unwrap_or_else(|err| panic!("{err}"));
    // The interrupt entry is the one whose trust is easiest to get wrong: Codex files it under
    // the label `interrupt` and hashes it with its timeout cut to 3 s (its longest), so an
    // entry written with a longer timeout reads "modified" however it was trusted.
    // The real Codex is the one `hooks` asks its version (the one the hooks run under), so
    // `status` can say `installed` only for an admitted version.
    let codex_dir = codex.parent().unwrap_or_else(|| Path::new("/"));
    let path = format!("{}:/usr/bin:/bin", codex_dir.display());
    let belfry = |args: &[&str]| {
        let output = Command::new(belfry_bin())
            .arg("hooks")
            .args(args)
            .current_dir(&project)
            .env("HOME", base.join("home"))
            .env("CODEX_HOME", &codex_home)
            .env("PATH", &path)
            .output()
            .unwrap_or_else(|err| panic!("{err}"));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    // The project must be trusted for Codex to load its .codex/ layer at all.
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            project.display()
        ),
    )
    .unwrap_or_else(|err| panic!("{err}"));

    assert!(belfry(&["apply"]).contains("codex: settled"));
    let untrusted = hooks_list(&codex, &project, &codex_home);
    let entries = untrusted["result"]["data"][0]["hooks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 3, "Codex {version} hooks/list: {untrusted}");
    for entry in &entries {
        assert_eq!(
            entry["trustStatus"], "untrusted",
            "Codex {version}: {entry}"
        );
    }
    let status = belfry(&["status"]);
    assert!(
        status.contains("untrusted — run codex and review hooks, or apply --trust"),
        "{status}"
    );

    assert!(belfry(&["apply", "--trust"]).contains("codex: settled"));
    let trusted = hooks_list(&codex, &project, &codex_home);
    let config = std::fs::read_to_string(codex_home.join("config.toml")).unwrap_or_default();
    let entries = trusted["result"]["data"][0]["hooks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 3, "Codex {version} hooks/list: {trusted}");
    for entry in &entries {
        assert_eq!(
            entry["trustStatus"], "trusted",
            "Codex {version}: {entry}\nconfig.toml:\n{config}"
        );
        let hash = entry["currentHash"].as_str().unwrap_or_default();
        assert!(
            config.contains(&format!("trusted_hash = \"{hash}\"")),
            "{config}"
        );
    }
    assert!(
        entries.iter().any(|entry| entry["key"]
            .as_str()
            .unwrap_or_default()
            .ends_with(".codex/hooks.json:interrupt:0:0")
            && entry["eventName"] == "interrupt"),
        "Codex {version} lists no interrupt entry under the label interrupt: {trusted}"
    );
    let status = belfry(&["status"]);
    assert!(status.contains("codex: installed"), "{status}");
}

/// `codex exec` against the scripted model server: with `apply --trust` the projected entries
/// run (the prompt-submit context reaches the model, the before-tool observer sees the shell
/// call with its class); with a plain `apply`, which `status` calls inert, Codex skips them
/// silently: no context, no call. Needs `belfry-model-server` too (`$BELFRY_MODEL_SERVER` or
/// beside `belfry`).
#[test]
#[ignore = "live: needs the pinned Codex, belfry-model-server and a network namespace"]
fn codex_exec_runs_trusted_entries_and_skips_untrusted_ones() {
    let version = codex_version();
    let codex = codex_bin();
    let server = std::env::var("BELFRY_MODEL_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|_| belfry_tests::bin_dir().join("belfry-model-server"));
    assert!(
        server.exists(),
        "the scripted model server is not at {}",
        server.display()
    );
    for trusted in [true, false] {
        let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
        let (project, codex_home) = (base.join("project"), base.join("home/.codex"));
        for dir in [
            project.join(".git"),
            project.join("scripts"),
            codex_home.clone(),
        ] {
            std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{err}"));
        }
        let calls = base.join("calls.ndjson");
        let scripts = [
            (
                "watch.sh",
                format!(
                    "#!/bin/sh\ncat >> {}\necho >> {}\n",
                    calls.display(),
                    calls.display()
                ),
            ),
            (
                "notes.sh",
                "#!/bin/sh\ncat >/dev/null\necho \"REPO-NOTE-5521: codex context\"\n".to_string(),
            ),
        ];
        for (name, text) in scripts {
            use std::os::unix::fs::PermissionsExt;
            let path = project.join("scripts").join(name);
            std::fs::write(&path, text).unwrap_or_else(|err| panic!("{err}"));
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        }
        std::fs::write(
            project.join("belfry-hooks.kdl"),
            "hook \"watch\" { event \"before-tool\"; intent \"observe\"; select tool=\"shell\"; command \"scripts/watch.sh\"; targets \"codex\" }\n\
             hook \"notes\" { event \"prompt-submit\"; command \"scripts/notes.sh\"; targets \"codex\" }\n",
        )
        .unwrap_or_else(|err| panic!("{err}"));
        std::fs::write(
            base.join("script.json"),
            r#"{"turns": [{"match": "run it", "tool": {"command": "touch ran-marker"}, "then": {"text": "DONE-AFTER-TOOL"}}], "fallback": {"text": "FALLBACK"}}"#,
        )
        .unwrap_or_else(|err| panic!("{err}"));
        // The provider on the local server; the port is filled in once the server listens.
        std::fs::write(
            codex_home.join("config.toml"),
            format!(
                "model = \"scripted-model\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\n\
                 [model_providers.mock]\nname = \"Scripted model\"\nbase_url = \"http://127.0.0.1:PORT/v1\"\n\
                 env_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
                 [analytics]\nenabled = false\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                project.display()
            ),
        )
        .unwrap_or_else(|err| panic!("{err}"));
        let mut apply = vec!["hooks", "apply"];
        if trusted {
            apply.push("--trust");
        }
        let output = Command::new(belfry_bin())
            .args(&apply)
            .current_dir(&project)
            .env("HOME", base.join("home"))
            .env("CODEX_HOME", &codex_home)
            .env("BELFRY_HOOKS_DETECT", "0")
            .output()
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let requests = base.join("requests.ndjson");
        let port = base.join("port");
        let runner = format!(
            "ip link set lo up\n\
             {server} --script {script} --log {requests} > {port} 2>/dev/null &\n\
             SERVER=$!\n\
             for i in $(seq 1 100); do [ -s {port} ] && break; sleep 0.1; done\n\
             PORT=$(head -1 {port} | tr -dc 0-9)\n\
             sed -i \"s/127.0.0.1:PORT/127.0.0.1:$PORT/\" {config}\n\
             timeout 120 {codex} exec --dangerously-bypass-approvals-and-sandbox 'please run it'\n\
             STATUS=$?\n\
             kill $SERVER\n\
             exit $STATUS\n",
            server = server.display(),
            script = base.join("script.json").display(),
            requests = requests.display(),
            port = port.display(),
            config = codex_home.join("config.toml").display(),
            codex = codex.display(),
        );
        let path = format!(
            "{}:{}",
            belfry_tests::bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = Command::new("unshare")
            .args(["-n", "sh", "-c", &runner])
            .current_dir(&project)
            .env("PATH", path)
            .env("HOME", base.join("home"))
            .env("CODEX_HOME", &codex_home)
            .env("MOCK_API_KEY", "belfry-live-key")
            .output()
            .unwrap_or_else(|err| panic!("unshare -n: {err}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains("DONE-AFTER-TOOL"),
            "Codex {version}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let log = std::fs::read_to_string(&requests).unwrap_or_default();
        let first = log.lines().next().unwrap_or_default();
        let watched = std::fs::read_to_string(&calls).unwrap_or_default();
        if trusted {
            assert!(
                first.contains("REPO-NOTE-5521"),
                "Codex {version}: the context did not reach the model: {first}"
            );
            assert!(
                watched.contains("\"tool_class\":\"shell\""),
                "Codex {version}: the before-tool hook did not run: {watched:?}"
            );
        } else {
            assert!(
                !log.contains("REPO-NOTE-5521"),
                "Codex {version} ran an untrusted entry"
            );
            assert!(
                watched.is_empty(),
                "Codex {version} ran an untrusted entry: {watched}"
            );
        }
    }
}
