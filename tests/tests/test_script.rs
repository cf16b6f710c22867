//! Issue #7 item 20: `scripts/test` (the README's test command) runs every test binary even
//! after one fails, counts the tests of a binary that crashed as tests that did not run, and
//! exits non-zero. Proven on a small throwaway workspace built by the real script and cargo.

use std::path::Path;
use std::process::Command;

fn write(root: &Path, path: &str, text: &str) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().expect("file has a parent")).expect("mkdir");
    std::fs::write(file, text).expect("write");
}

#[test]
fn scripts_test_runs_every_binary_and_counts_tests_that_did_not_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/test");
    std::fs::create_dir_all(root.join("scripts")).expect("mkdir");
    std::fs::copy(&script, root.join("scripts/test")).expect("copy scripts/test");
    // scripts/test first checks the tools the suite needs with scripts/test-deps.
    std::fs::copy(
        script.with_file_name("test-deps"),
        root.join("scripts/test-deps"),
    )
    .expect("copy scripts/test-deps");
    write(
        root,
        "Cargo.toml",
        "[workspace]\nresolver = \"2\"\nmembers = [\"a\"]\n",
    );
    write(
        root,
        "a/Cargo.toml",
        "[package]\nname = \"a\"\nversion = \"0.0.0\"\nedition = \"2021\"\n",
    );
    // Unit tests: one passes, one fails (this binary fails first, in cargo's order).
    write(
        root,
        "a/src/lib.rs",
        "#[test]\nfn passes() {}\n#[test]\nfn fails() { panic!(\"on purpose\") }\n",
    );
    // A binary that dies: neither of its tests reports a result.
    write(
        root,
        "a/tests/crash.rs",
        "#[test]\nfn crashes() { std::process::abort() }\n\
         #[test]\nfn beside_the_crash() { std::thread::sleep(std::time::Duration::from_secs(2)) }\n",
    );
    // A binary after both: it runs although earlier binaries failed.
    write(
        root,
        "a/tests/later.rs",
        "#[test]\nfn later_passes() { std::fs::write(env!(\"CARGO_MANIFEST_DIR\").to_owned() + \"/../later-ran\", \"\").unwrap() }\n",
    );
    let out = Command::new("bash")
        .arg(root.join("scripts/test"))
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("run scripts/test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a failing suite must exit non-zero:\n{stdout}\n{stderr}"
    );
    assert!(
        root.join("later-ran").exists(),
        "the binary after the failures never ran:\n{stdout}"
    );
    assert!(
        stdout.contains("tests: 2 of 5 listed tests did not run"),
        "the crashed binary's tests are not counted:\n{stdout}\n{stderr}"
    );
    let closing = stdout.lines().last().unwrap_or("");
    assert_eq!(closing, "tests: 2 passed, 3 failed, 0 skipped", "{stdout}");
}
