//! `belfry wait --regex`: the pattern is matched against the pane's visible lines joined with
//! `\n`, in the `regex` crate's syntax and meaning (docs/protocol.md), Unicode included: `\s`
//! takes the no-break space a harness draws after its prompt glyph (an adapter's readiness
//! rule depends on it), a Unicode class and case folding work, a pattern that is not a regex or
//! would compile past the size limit is refused naming why, and a pattern that never matches
//! ends at the timeout with the error saying so.

use belfry_tests::Env;

#[test]
fn a_screen_regex_matches_as_the_regex_crate_does_and_a_bad_one_is_refused() {
    let env = Env::new();
    env.ok(&[
        "new",
        "p",
        "--",
        "sh",
        "-c",
        // `»` and a no-break space, then a line with Greek letters.
        "printf '\\302\\273\\302\\240\\nDelta \\316\\264\\316\\265 42\\n'; exec sleep 100000",
    ]);
    let wait = |pattern: &str, timeout_ms: &str| {
        env.run(&["wait", "p", "--regex", pattern, "--timeout-ms", timeout_ms])
    };
    for pattern in [
        r"(?m)^»\s*$",
        r"(?i)DELTA \p{Greek}+ \d+",
        r"(?m)^\w+ \w+ 42$",
        r"(?i)ΔΕ",
    ] {
        let out = wait(pattern, "10000");
        assert!(
            out.status.success(),
            "{pattern:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    for (pattern, why) in [
        (r"\p{Nope}", "Unicode property not found"),
        ("(", "unclosed group"),
        ("(?:a{1000}){1000}", "exceeded"),
    ] {
        let out = wait(pattern, "10000");
        assert_eq!(out.status.code(), Some(2), "{pattern:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            // Named as the option given (the protocol's `field "regex"` is the daemon's word).
            stderr.contains("'--regex <REGEX>'")
                && stderr.contains("is not a regular expression")
                && stderr.contains(why),
            "{pattern:?}: {stderr}"
        );
    }

    let started = std::time::Instant::now();
    let out = wait("(?m)^never$", "300");
    assert_eq!(
        out.status.code(),
        Some(4),
        "a regex that never matches: the timeout's own exit code"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the wait outlived its timeout by far: {:?}",
        started.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wait timed out after 300 ms"), "{stderr}");
    // A line for a person, not the protocol's JSON.
    assert!(!stderr.contains('{'), "{stderr}");
}
