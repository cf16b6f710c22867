//! Human output is for people and `--json` is for programs (issue 12, item 8): snapshots of
//! `belfry ls`, `ls --json` and `ding status` from a real daemon and pane, with the values that
//! differ from run to run (pids, revisions, identities, times, paths) replaced by placeholders
//! of the same width, so the layout itself is what the snapshot holds. No Unix milliseconds
//! and no JSON may appear in the human forms.

use belfry_tests::Env;
use serde_json::Value;

/// Replaces the JSON fields of `value` named in `keys` by `<key>`, at every depth.
fn normalize_json(value: &mut Value, keys: &[&str]) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if keys.contains(&key.as_str()) && !field.is_null() {
                    *field = Value::String(format!("<{key}>"));
                } else {
                    normalize_json(field, keys);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| normalize_json(item, keys)),
        _ => {}
    }
}

/// Replaces every clock time (`14:02:11`) by `<time>` and every age (`just now`, `3 s ago`)
/// by `<ago>`.
fn normalize_times(text: &str) -> String {
    let mut out = text.replace("just now", "<ago>");
    for seconds in (1..60).rev() {
        out = out.replace(&format!("{seconds} s ago"), "<ago>");
    }
    let bytes: Vec<char> = out.chars().collect();
    let mut result = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let is_clock = i + 8 <= bytes.len()
            && bytes[i..i + 8].iter().enumerate().all(|(at, c)| match at {
                2 | 5 => *c == ':',
                _ => c.is_ascii_digit(),
            });
        if is_clock {
            result.push_str("<time>");
            i += 8;
        } else {
            result.push(bytes[i]);
            i += 1;
        }
    }
    result
}

/// True if `text` holds a run of 13 digits or more: a Unix-ms time (or a raw revision) shown
/// as it is on the wire.
fn has_unix_ms(text: &str) -> bool {
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_digit() { run + 1 } else { 0 };
        if run >= 13 {
            return true;
        }
    }
    false
}

#[test]
fn ls_and_ls_json_show_the_same_pane_for_people_and_for_programs() {
    let env = Env::new();
    env.spawn(
        "agent",
        "24x80",
        &["sh", "-c", "echo ready; sleep 600"],
        Some("ready"),
    );
    let listing: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    let pane = &listing[0];
    let text = env.ok(&["ls"]);

    // The table, with the run's own values replaced at their column widths.
    let mut table = text.replace(
        &format!("{:>16}", pane["revision"].as_u64().unwrap()),
        &format!("{:>16}", "<revision>"),
    );
    table = table.replace(
        &format!("{:>8}", pane["pid"].as_u64().unwrap()),
        &format!("{:>8}", "<host>"),
    );
    table = table.replace(
        &format!("{:>8}", pane["child_pid"].as_u64().unwrap()),
        &format!("{:>8}", "<pid>"),
    );
    for seconds in 0..60 {
        table = table.replace(
            &format!("{:>6}", format!("{seconds} s")),
            &format!("{:>6}", "<age>"),
        );
    }
    insta::assert_snapshot!("ls", table);
    assert!(!text.contains("null") && !text.contains('{'), "{text}");

    let mut listing = listing;
    normalize_json(
        &mut listing,
        &[
            "pid",
            "child_pid",
            "incarnation",
            "generation",
            "revision",
            "started_at",
            "socket",
            "cwd",
            "build",
        ],
    );
    insta::assert_json_snapshot!("ls_json", listing);
}

#[test]
fn ding_status_says_times_in_words_and_json_keeps_them_for_programs() {
    let env = Env::new();
    env.spawn(
        "agent",
        "24x80",
        &["sh", "-c", "echo ready; sleep 600"],
        Some("ready"),
    );
    let posted = env.ok(&[
        "inbox",
        "post",
        "agent",
        "--from",
        "lead",
        "--subject",
        "fix the build",
        "/dev/null",
    ]);
    let name = posted.trim().to_string();
    env.ok(&["presence", "busy", "agent"]);

    let text = env.ok(&["ding", "status", "agent"]);
    assert!(!has_unix_ms(&text.replace(&name, "")), "{text}");
    assert!(!text.contains('{'), "{text}");
    let shown = normalize_times(&text.replace(&name, "<name>"));
    insta::assert_snapshot!("ding_status", shown);

    let mut status: Value =
        serde_json::from_str(&env.ok(&["ding", "status", "agent", "--json"])).unwrap();
    assert!(status["presence"]["since_unix_ms"].is_u64(), "{status}");
    assert_eq!(status["messages"][0]["name"], name.as_str(), "{status}");
    normalize_json(
        &mut status,
        &["since_unix_ms", "name", "received_at_unix_ms"],
    );
    insta::assert_json_snapshot!("ding_status_json", status);
}

#[test]
fn an_error_with_an_os_cause_says_it_once() {
    let env = Env::new();
    let out = env.run(&["up", &env.path("missing.kdl").display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("missing.kdl"), "{stderr}");
}

#[test]
fn inbox_listing_and_events_print_words_not_json_or_unix_ms() {
    let env = Env::new();
    let posted = env.ok(&[
        "inbox",
        "post",
        "agent",
        "--create",
        "--subject",
        "hello",
        "/dev/null",
    ]);
    let name = posted.trim();
    let listing = env.ok(&["inbox", "ls", "agent"]);
    assert!(listing.starts_with(name), "{listing}");
    assert!(!has_unix_ms(&listing.replace(name, "")), "{listing}");
    assert!(
        listing.contains("ago)") || listing.contains("just now)"),
        "{listing}"
    );

    // `shutdown` names what it ended in words.
    env.ok(&["new", "agent", "--", "sh", "-c", "sleep 600"]);
    let out = env.ok(&["shutdown", "--kill-panes"]);
    assert_eq!(out.trim(), "daemon stopped; ended panes: agent", "{out}");
}

#[test]
fn events_are_lines_of_words_with_a_clock_time() {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;
    let env = Env::new();
    env.spawn("first", "24x80", &["sh", "-c", "sleep 600"], None);
    let mut child = env
        .cmd(&["events"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The subscription may not be in place yet: new panes until one's spawn is seen.
    let mut seen = Vec::new();
    let spawned = (0..20).find_map(|attempt| {
        env.spawn(
            &format!("p{attempt}"),
            "24x80",
            &["sh", "-c", "sleep 600"],
            None,
        );
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            if line.contains("spawned") && !line.contains("first") {
                return Some(line);
            }
            seen.push(line);
        }
        None
    });
    let _ = child.kill();
    let _ = child.wait();
    // The pane spawned before `events` started is its recent past, shown the same way.
    let past = seen
        .first()
        .map(|line| normalize_times(line))
        .unwrap_or_default();
    assert!(
        past.starts_with("<time>  first") && past.contains(" lifecycle  spawned (pid "),
        "{seen:?}"
    );
    let line = spawned.unwrap_or_else(|| panic!("no spawned event: {seen:?}"));
    assert!(!line.contains('{') && !line.contains('"'), "{line}");
    let shown = normalize_times(&line);
    assert!(shown.starts_with("<time>  p"), "{line}");
    assert!(shown.contains(" lifecycle  spawned (pid "), "{line}");
}
