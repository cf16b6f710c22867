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
            "--create",
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

/// Issue 39: `belfry inbox read` printed a message body raw, so a sender's title, SGR colours
/// and OSC 52 clipboard write reached the reader's terminal. On a real terminal (a pty pair)
/// every escape of the body is shown as text, its lines and tabs kept; piped, the same; with
/// `--raw` the bytes are as written.
#[test]
fn inbox_read_shows_a_messages_escape_sequences_as_text_on_a_terminal() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let env = Env::new();
    let body = "line one\n\tindented\n\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{1b}[0m\n\
                \u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{9b}2J\rhidden\u{202e}gpj.exe\n";
    let post = |subject: &str| {
        let mut child = env
            .cmd(&[
                "inbox",
                "post",
                "agent",
                "--create",
                "--from",
                "\u{1b}]0;from\u{7}sender",
                "--subject",
                subject,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    };
    let read_on_a_terminal = |extra: &[&str]| -> Vec<u8> {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes the two descriptors it opens; no name, termios or size.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(opened, 0, "openpty");
        // SAFETY: both were just opened by openpty and are owned here alone.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut args = vec!["inbox", "read", "--session", "agent"];
        args.extend_from_slice(extra);
        let out = env
            .cmd(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(slave))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // The child has ended and our copy of the slave is gone: the master reads what it
        // printed, then EIO.
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: `master` is open and `buf` is writable for its length.
            let n = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            got.extend_from_slice(&buf[..n as usize]);
        }
        got
    };
    let escaped_lines = [
        "line one",
        "\tindented",
        "\\u{1b}]0;pwned\\u{7}\\u{1b}[31mred\\u{1b}[0m",
        "\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}\\u{9b}2J\\u{d}hidden\\u{202e}gpj.exe",
    ];
    let check_escaped = |out: &str| {
        for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!out.contains(c), "{c:?} reached the reader: {out:?}");
        }
        // The terminal's own line discipline turns each newline into CR LF.
        let body: Vec<&str> = out
            .lines()
            .map(|line| line.trim_end_matches('\r'))
            .skip_while(|line| !line.is_empty())
            .skip(1)
            .collect();
        assert_eq!(body, escaped_lines, "{out:?}");
        assert!(out.contains("From: ") && out.contains("sender"), "{out:?}");
    };

    post("\u{1b}[2Jsubject");
    let out = String::from_utf8(read_on_a_terminal(&[])).unwrap();
    check_escaped(&out);

    post("piped");
    let out = env.ok(&["inbox", "read", "--session", "agent"]);
    check_escaped(&out);

    post("raw");
    let out = read_on_a_terminal(&["--raw"]);
    let out = String::from_utf8(out).unwrap();
    for sequence in ["\u{1b}]52;c;cm0gLXJmIH4=\u{7}", "\u{1b}[31mred", "\u{9b}2J"] {
        assert!(out.contains(sequence), "--raw lost {sequence:?}: {out:?}");
    }
}
