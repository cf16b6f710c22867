//! Adapter data travels with the binary (spec §10). A binary with no adapters directory beside
//! it (an installed one) uses the declarations built into it; an adapter name that exists
//! nowhere is refused by `belfry new`/`run` before any pane starts, naming the ones there are;
//! and a DING adapter program under `$BELFRY_ADAPTERS`, which cannot be built in, is refused in
//! words instead of run as a literal path.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use belfry_tests::{belfry_bin, copy_executable, eventually, Env};
use serde_json::Value;

/// The adapters of this source tree, as the build embedded them: (name, declaration).
fn source_adapters() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    let mut found: Vec<(String, Value)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let text = std::fs::read_to_string(entry.path().join("declaration.json")).ok()?;
            let name = entry.file_name().into_string().ok()?;
            Some((name, serde_json::from_str(&text).unwrap()))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// A copy of `belfry` at `<env>/install/bin/belfry`, as `cargo install` leaves it: no
/// `../../adapters` and no `../share/belfry/adapters` beside it.
fn installed_binary(env: &Env) -> PathBuf {
    let bin = env.path("install/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("belfry");
    copy_executable(&belfry_bin(), &exe);
    exe
}

/// Runs the installed copy with the test's environment and no `$BELFRY_ADAPTERS`.
fn run_installed(env: &Env, exe: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env_remove("BELFRY_SOCKET")
        .env_remove("BELFRY_SESSION");
    for (key, value) in env.vars() {
        cmd.env(key, value);
    }
    cmd.env_remove("BELFRY_ADAPTERS");
    cmd.output().unwrap()
}

#[test]
fn an_unknown_adapter_is_refused_before_any_pane_starts_naming_the_ones_there_are() {
    let adapters = tempfile::tempdir().unwrap();
    for name in ["alpha", "beta"] {
        std::fs::create_dir(adapters.path().join(name)).unwrap();
        std::fs::write(adapters.path().join(name).join("declaration.json"), "{}").unwrap();
    }
    let dir = adapters.path().display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &dir)]);
    for command in ["new", "run"] {
        let out = env.run(&[command, "agent", "--adapter", "gamma", "--", "sleep", "600"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("no adapter named \"gamma\""), "{stderr}");
        assert!(stderr.contains(&dir), "{stderr}");
        assert!(stderr.contains("alpha, beta"), "{stderr}");
    }
    // Refused before the daemon was even asked: none was started, so no pane was.
    assert!(
        !env.socket().exists(),
        "a daemon was started for a refused pane"
    );
    env.ok(&["new", "agent", "--adapter", "beta", "--", "sleep", "600"]);
}

#[test]
fn an_installed_binary_knows_the_adapters_built_into_it() {
    let env = Env::new();
    let exe = installed_binary(&env);
    let known = source_adapters();
    assert!(!known.is_empty(), "the source tree has no adapters");

    let out = run_installed(&env, &exe, &["new", "x", "--adapter", "nope", "--", "true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("built into this binary"), "{stderr}");
    for (name, _) in &known {
        assert!(stderr.contains(name.as_str()), "{name} not named: {stderr}");
    }

    // The daemon reads the built-in declaration too: a charter is placed the way the
    // adapter's declaration says, which it refuses for an adapter it cannot read.
    let (adapter, _) = known
        .iter()
        .find(|(_, declaration)| declaration["charter"]["flag"].is_string())
        .expect("an adapter that takes its charter by a flag");
    std::fs::write(env.path("charter.md"), "be brief\n").unwrap();
    let file = env.path("belfry.kdl");
    std::fs::write(
        &file,
        format!(
            "agent \"agent\" {{\n  command \"sleep\" \"600\"\n  charter \"{}\"\n  adapter \"{adapter}\"\n}}\n",
            env.path("charter.md").display()
        ),
    )
    .unwrap();
    let out = run_installed(&env, &exe, &["up", &file.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let charter = env.runtime().join("run/agent/system-prompt.md");
    assert_eq!(std::fs::read_to_string(charter).unwrap(), "be brief\n");
}

#[test]
fn a_ding_adapter_program_under_belfry_adapters_is_refused_in_words_when_only_built_in() {
    let env = Env::new();
    let exe = installed_binary(&env);
    let out = run_installed(
        &env,
        &exe,
        &[
            "new",
            "agent",
            "--ding-delivery",
            "turn-boundary+fresh-idle",
            "--ding-adapter",
            "$BELFRY_ADAPTERS/some/adapter",
            "--",
            "sleep",
            "600",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = || {
        let out = run_installed(&env, &exe, &["ding", "status", "agent"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        eventually(Duration::from_secs(10), || status()
            .contains("set BELFRY_ADAPTERS to the folder holding it")),
        "{}",
        status()
    );
}
