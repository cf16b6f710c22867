//! `belfry hooks plan` keys each target by the harness version found on this machine (the
//! adapter's `detect` command). Harnesses differ in how they answer: one prints its version on
//! stderr, one takes seconds to load before it prints. The stand-in programs here print what
//! and where the real ones do (Pi 1.x: stderr; Gemini CLI 0.61.0: 6.4 s measured), and the
//! real `belfry` must detect both.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use belfry_tests::belfry_bin;

fn stand_in(bin: &Path, name: &str, script: &str) {
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap_or_else(|err| panic!("{err}"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|err| panic!("{err}"));
}

#[test]
fn a_harness_that_prints_its_version_on_stderr_or_slowly_is_detected() {
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
    let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    let (project, home, bin) = (base.join("project"), base.join("home"), base.join("bin"));
    for dir in [&project, &home, &bin] {
        std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
    }
    std::fs::write(
        project.join("belfry-hooks.kdl"),
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"pi\" \"gemini\" \"codex\" }\n",
    )
    .unwrap_or_else(|err| panic!("{err}"));
    stand_in(&bin, "pi", "echo '0.73.1' >&2");
    stand_in(&bin, "gemini", "sleep 6; echo '0.61.0'");
    stand_in(&bin, "codex", "sleep 6; echo 'codex-cli 0.169.0'");
    let start = Instant::now();
    let output = Command::new(belfry_bin())
        .args(["hooks", "plan"])
        .current_dir(&project)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("BELFRY_HOOKS_DETECT")
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    let took = start.elapsed();
    let plan = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{plan}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (target, version) in [("pi", "0.73.1"), ("gemini", "0.61.0"), ("codex", "0.169.0")] {
        let line = plan
            .lines()
            .find(|line| line.starts_with(&format!("target {target} (")))
            .unwrap_or_else(|| panic!("no target {target} in:\n{plan}"));
        assert!(
            line.contains(&format!("detected {version}, admitted")),
            "{target}: {line}"
        );
    }
    // Two 6 s harnesses asked one after the other would take 12 s.
    assert!(took < Duration::from_secs(11), "detection took {took:?}");
}
