//! spec §12: hostile or wrong input from the command line or a pane's spec is shown safely,
//! refused clearly, and leaves nothing behind. Real binary, real daemon, real pane hosts.

use std::collections::HashSet;
use std::io::Write;
use std::process::Stdio;

use belfry_tests::Env;

#[test]
fn ls_escapes_control_characters_and_newlines_in_argv() {
    let env = Env::new();
    // A title-setting OSC sequence, a newline, a bidi override: all only text in argv.
    let hostile = ["\u{1b}]2;pwned\u{7}", "two\nlines", "\u{202e}txt.exe"];
    // The hostile words are the script's positional parameters: never run, only listed.
    let mut args = vec!["new", "hostile", "--"];
    args.extend(["sh", "-c", "sleep 600", "sh"]);
    args.extend(hostile);
    env.ok(&args);
    let out = env.ok(&["ls"]);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(!out.contains('\u{202e}'), "{out:?}");
    assert_eq!(
        out.lines().count(),
        2,
        "one header and one pane line: {out:?}"
    );
    assert!(out.contains("\\u{1b}]2;pwned\\u{7}"), "{out:?}");
    assert!(out.contains("two\\nlines"), "{out:?}");
    assert!(out.contains("\\u{202e}txt.exe"), "{out:?}");
    // The JSON listing keeps argv exactly.
    let json = env.ok(&["ls", "--json"]);
    assert!(json.contains("two\\nlines"), "{json}");
}

#[test]
fn size_too_large_for_a_number_is_out_of_range_not_not_a_number() {
    let env = Env::new();
    for (size, expected) in [
        ("99999x99999", "rows 99999 is out of range (1..=1000)"),
        (
            "24x99999999999999999999",
            "cols 99999999999999999999 is out of range",
        ),
        ("0x80", "rows 0 is out of range"),
        ("2a4x80", "rows \"2a4\" is not a number"),
        ("-1x80", "rows \"-1\" is not a number"),
    ] {
        let out = env.run(&["new", "sized", "--size", size, "--", "true"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{size}: {stderr}");
        assert!(stderr.contains(expected), "{size}: {stderr}");
    }
}

#[test]
fn option_values_that_start_with_a_dash_are_accepted() {
    let env = Env::new();
    let out = env
        .cmd(&[
            "inbox",
            "post",
            "dash",
            "--subject",
            "-x",
            "--from",
            "-me",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(b"body\n")?;
            }
            child.wait_with_output()
        })
        .expect("run belfry inbox post");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing = env.ok(&["inbox", "ls", "dash", "--json"]);
    assert!(listing.contains("\"-x\""), "{listing}");
    assert!(listing.contains("\"-me\""), "{listing}");
}

#[test]
fn failed_spawn_leaves_no_pane_log() {
    let env = Env::new();
    let out = env.run(&["new", "doomed", "--", "/nonexistent/belfry-no-such-program"]);
    assert_ne!(out.status.code(), Some(0));
    let log_dir = env.path("xdg-state").join("belfry").join("log");
    let names: HashSet<String> = std::fs::read_dir(&log_dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(!names.contains("pane-doomed.log"), "{names:?}");
    assert!(env.ok(&["ls", "--json"]).trim() == "[]");
}

#[test]
fn concurrent_duplicate_spawns_answer_exactly_one_ok_and_the_rest_exists() {
    let env = Env::new();
    env.start_daemon();
    let socket = env.socket();
    let cwd = env.path("").display().to_string();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
    let racers: Vec<_> = (0..6)
        .map(|_| {
            let socket = socket.clone();
            let cwd = cwd.clone();
            let barrier = std::sync::Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut conn = belfry_tests::Conn::open(&socket).expect("connect");
                barrier.wait();
                conn.request(serde_json::json!({
                    "op": "spawn", "session": "twin", "argv": ["sleep", "600"],
                    "cwd": cwd, "rows": 24, "cols": 80,
                }))
            })
        })
        .collect();
    let replies: Vec<serde_json::Value> = racers
        .into_iter()
        .map(|racer| racer.join().expect("racer"))
        .collect();
    let ok = replies.iter().filter(|r| r["ok"] == true).count();
    let exists = replies
        .iter()
        .filter(|r| r["error"]["code"] == "exists")
        .count();
    assert_eq!((ok, exists), (1, 5), "{replies:#?}");
    let panes = env.ok(&["ls", "--json"]);
    assert_eq!(panes.matches("\"twin\"").count(), 1, "{panes}");
}

#[test]
fn a_wide_character_in_a_one_column_pane_leaves_its_screen_model_working() {
    // A pane one column wide (created so, or resized so by a client) printing a wide
    // character: the terminal core cannot place it in one column and panicked there, which
    // killed the thread that keeps the pane's screen: the pane host still answered, with a
    // screen that never changed again.
    let env = Env::new();
    env.ok(&[
        "new",
        "narrow",
        "--size",
        "4x1",
        "--",
        "sh",
        "-c",
        "printf '\\346\\274\\242'; sleep 2; printf '\\033[2J\\033[HZ'; exec sleep 60",
    ]);
    env.wait_screen("narrow", "漢");
    env.wait_screen("narrow", "Z");
    env.ok(&[
        "new",
        "wide",
        "--size",
        "4x10",
        "--",
        "sh",
        "-c",
        "sleep 1; printf '\\346\\274\\242'; sleep 2; printf AFTER; exec sleep 60",
    ]);
    env.ok(&["resize", "wide", "4x1"]);
    env.wait_screen("wide", "漢");
    env.ok(&["resize", "wide", "4x10"]);
    env.wait_screen("wide", "AFTER");
}
