//! `belfry wait --regex`: the pattern is matched against the pane's visible lines joined with
//! `\n`, in the syntax docs/protocol.md gives (the `regex` crate's, with ASCII classes and ASCII
//! case folding): a literal outside ASCII matches as itself, `(?m)` anchors lines, `(?i)` folds
//! ASCII case; a Unicode class is refused by name, and a pattern that never matches ends at the
//! timeout with the error saying so.

use belfry_tests::Env;

#[test]
fn a_screen_regex_matches_as_documented_and_a_unicode_class_is_refused() {
    let env = Env::new();
    env.ok(&[
        "new",
        "p",
        "--",
        "sh",
        "-c",
        "printf '\\342\\235\\257 ready\\nDelta 42\\n'; exec sleep 100000",
    ]);
    let wait = |pattern: &str, timeout_ms: &str| {
        env.run(&["wait", "p", "--regex", pattern, "--timeout-ms", timeout_ms])
    };
    for pattern in [
        "(?m)^❯ ready$",
        "(?i)delta \\d+",
        "(?m)^\\w+ 42$",
        "❯.*\\n.*42",
    ] {
        let out = wait(pattern, "10000");
        assert!(
            out.status.success(),
            "{pattern:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let out = wait("\\p{Greek}", "10000");
    assert_eq!(out.status.code(), Some(2), "a Unicode class");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "field \"regex\" is not a valid regex: Unicode character classes are not supported"
        ),
        "{stderr}"
    );

    let started = std::time::Instant::now();
    let out = wait("(?m)^never$", "300");
    assert_eq!(out.status.code(), Some(2), "a regex that never matches");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the wait outlived its timeout by far: {:?}",
        started.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wait timed out after 300 ms"), "{stderr}");
}
