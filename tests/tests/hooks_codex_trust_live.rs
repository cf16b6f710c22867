//! SPEC §9, live: the entries `belfry hooks apply` writes for Codex are the ones the real
//! Codex 0.169.0 trusts. The test runs `codex app-server` (JSON-RPC on stdio) in a
//! loopback-only network namespace and asks `hooks/list` what it will run: with `--trust`
//! every managed entry is "trusted" under the hash belfry wrote; without it, "untrusted", which
//! is what `belfry hooks status` reports as inert.
//!
//! Ignored by default: it needs the installed harness. Run it with
//! `cargo test -p belfry-tests --test hooks_codex_trust_live -- --ignored`, with the Codex
//! binary at `$BELFRY_CODEX_BIN` or installed under `target/harnesses/codex-0.169.0`
//! (`npm install --prefix target/harnesses/codex-0.169.0 @openai/codex@0.169.0`). Run on its
//! own, it fails with the reason when the binary or the namespace is missing, never skips.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use belfry_tests::belfry_bin;
use serde_json::{json, Value};

const CODEX_VERSION: &str = "0.169.0";

fn codex_bin() -> PathBuf {
    if let Ok(path) = std::env::var("BELFRY_CODEX_BIN") {
        return PathBuf::from(path);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let path = target.join(format!(
        "harnesses/codex-{CODEX_VERSION}/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    ));
    assert!(
        path.exists(),
        "Codex {CODEX_VERSION} is not installed at {} (set BELFRY_CODEX_BIN or install it): this live test cannot run here",
        path.display()
    );
    path
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
            .contains(CODEX_VERSION),
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
#[ignore = "live: needs the installed Codex 0.169.0 and a network namespace"]
fn codex_trusts_exactly_the_entries_apply_trust_wrote() {
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
         hook \"watch\" { event \"before-tool\"; intent \"observe\"; select tool=\"shell\"; command \"w\"; targets \"codex\" }\n",
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let belfry = |args: &[&str]| {
        let output = Command::new(belfry_bin())
            .arg("hooks")
            .args(args)
            .current_dir(&project)
            .env("HOME", base.join("home"))
            .env("CODEX_HOME", &codex_home)
            .env("BELFRY_HOOKS_DETECT", "0")
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
    assert_eq!(
        entries.len(),
        2,
        "Codex {CODEX_VERSION} hooks/list: {untrusted}"
    );
    for entry in &entries {
        assert_eq!(
            entry["trustStatus"], "untrusted",
            "Codex {CODEX_VERSION}: {entry}"
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
    assert_eq!(
        entries.len(),
        2,
        "Codex {CODEX_VERSION} hooks/list: {trusted}"
    );
    for entry in &entries {
        assert_eq!(
            entry["trustStatus"], "trusted",
            "Codex {CODEX_VERSION}: {entry}\nconfig.toml:\n{config}"
        );
        let hash = entry["currentHash"].as_str().unwrap_or_default();
        assert!(
            config.contains(&format!("trusted_hash = \"{hash}\"")),
            "{config}"
        );
    }
    let status = belfry(&["status"]);
    assert!(status.contains("codex: installed"), "{status}");
}
