//! `belfry events` with no pane name streams the daemon bus of every pane (lifecycle, exit),
//! not revisions: those come from one pane host, so `belfry events NAME` carries that pane's
//! revision events as well. The README says the same.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use belfry_tests::Env;
use serde_json::Value;

/// `belfry events ARGS --json`, its events arriving on a channel.
fn events(env: &Env, args: &[&str]) -> (Child, Receiver<Value>) {
    let mut all = vec!["events"];
    all.extend_from_slice(args);
    all.push("--json");
    let mut child = env.cmd(&all).stdout(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(event) = serde_json::from_str(&line) else {
                continue;
            };
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Every event that arrives within `window`.
fn collect(rx: &Receiver<Value>, window: Duration) -> Vec<Value> {
    let until = Instant::now() + window;
    let mut seen = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(event) => seen.push(event),
            Err(_) => break,
        }
    }
    seen
}

/// Repeats `act` until an event that `wanted` accepts arrives (the subscription is then in
/// place), at most 50 times; returns every event seen meanwhile.
fn until_seen(
    rx: &Receiver<Value>,
    mut act: impl FnMut(usize),
    wanted: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut seen = Vec::new();
    for attempt in 0..50 {
        act(attempt);
        seen.extend(collect(rx, Duration::from_millis(200)));
        if seen.iter().any(&wanted) {
            return seen;
        }
    }
    panic!("the event never arrived: {seen:?}");
}

#[test]
fn events_of_every_pane_carry_lifecycle_but_not_revisions_and_one_panes_carry_both() {
    let env = Env::new();
    env.spawn(
        "agent",
        "24x80",
        &["sh", "-c", "echo ready; sleep 600"],
        Some("ready"),
    );
    let (mut all, all_rx) = events(&env, &[]);
    let (mut one, one_rx) = events(&env, &["agent"]);

    // Every pane: a new pane's lifecycle arrives, and no revision ever does, though the
    // panes' output moves their revisions all the while (the pane echoes what is typed).
    let mut seen_all = until_seen(
        &all_rx,
        |attempt| {
            env.ok(&["new", &format!("probe{attempt}"), "--", "sleep", "600"]);
            env.ok(&["send", "agent", "--text", "x"]);
        },
        |e| e["event"] == "lifecycle" && e["what"] == "spawned",
    );
    env.ok(&["send", "agent", "--text", "typed"]);
    env.wait_screen("agent", "typed");
    seen_all.extend(collect(&all_rx, Duration::from_secs(1)));
    assert!(
        seen_all.iter().all(|e| e["event"] != "revision"),
        "{seen_all:?}"
    );

    // One pane: its revision events arrive.
    let seen_one = until_seen(
        &one_rx,
        |_| {
            env.ok(&["send", "agent", "--text", "y"]);
        },
        |e| e["event"] == "revision" && e["session"] == "agent",
    );
    assert!(
        seen_one.iter().all(|e| e["session"] == "agent"),
        "{seen_one:?}"
    );
    for child in [&mut all, &mut one] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A program that exits at once (`true`, `printf`, `exit 3`) ends before the daemon's monitor
/// of its pane host has subscribed; its exit is still an event on the bus, exactly once per
/// pane. Before, `belfry new X -- true` with `belfry events` running printed only `spawned`,
/// 5 times in 5.
#[test]
fn a_program_that_exits_at_once_is_an_exit_event_exactly_once() {
    let env = Env::new();
    let (mut all, rx) = events(&env, &[]);
    // The subscription is in place once a pane's `spawned` arrives.
    until_seen(
        &rx,
        |attempt| {
            let name = format!("probe{attempt}");
            env.run(&["new", &name, "--", "sleep", "600"]);
        },
        |event| event["what"] == "spawned",
    );
    let programs: [&[&str]; 3] = [&["true"], &["printf", "x"], &["sh", "-c", "exit 3"]];
    let count = 50;
    for index in 0..count {
        let name = format!("quick{index}");
        let mut args = vec!["new", name.as_str(), "--"];
        args.extend_from_slice(programs[index % programs.len()]);
        let output = env.run(&args);
        assert!(output.status.success(), "belfry new {name}: {output:?}");
    }
    let mut exits = std::collections::BTreeMap::<String, usize>::new();
    let until = Instant::now() + Duration::from_secs(30);
    while exits.len() < count && Instant::now() < until {
        for event in collect(&rx, Duration::from_millis(200)) {
            let session = event["session"].as_str().unwrap_or_default();
            if event["event"] == "exit" && session.starts_with("quick") {
                *exits.entry(session.to_string()).or_default() += 1;
            }
        }
    }
    // Late duplicates would arrive in the next moment.
    for event in collect(&rx, Duration::from_millis(500)) {
        let session = event["session"].as_str().unwrap_or_default();
        if event["event"] == "exit" && session.starts_with("quick") {
            *exits.entry(session.to_string()).or_default() += 1;
        }
    }
    let _ = all.kill();
    let _ = all.wait();
    let missing: Vec<String> = (0..count)
        .map(|index| format!("quick{index}"))
        .filter(|name| !exits.contains_key(name))
        .collect();
    assert!(missing.is_empty(), "no exit event for {missing:?}");
    let twice: Vec<(&String, &usize)> = exits.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "exit events more than once: {twice:?}");
}

/// `belfry events` starts with the recent past: the last 10 events the daemon kept (each marked
/// `history` with the time it happened), oldest first, then the live stream, with no event
/// missed or shown twice between the two. `--history N` asks for another count (0: none) and
/// `--since` for a time instead. Before, it started blank.
#[test]
fn events_start_with_the_last_events_the_daemon_kept_then_stream_live() {
    let env = Env::new();
    let before_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for index in 0..12 {
        env.ok(&["new", &format!("old{index}"), "--", "sleep", "600"]);
    }
    let spawned_of = |events: &[Value]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["what"] == "spawned")
            .map(|e| e["session"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let old = |range: std::ops::Range<usize>| -> Vec<String> {
        range.map(|index| format!("old{index}")).collect()
    };

    // The default: the last 10, oldest first, each marked, with when it happened.
    let (mut watcher, rx) = events(&env, &[]);
    let past = collect(&rx, Duration::from_secs(2));
    assert_eq!(past.len(), 10, "{past:?}");
    assert_eq!(spawned_of(&past), old(2..12), "{past:?}");
    for event in &past {
        assert_eq!(event["history"], true, "{event}");
        let at = event["at_ms"].as_u64().expect("at_ms");
        assert!(at >= before_ms, "{event} happened before the test began");
    }
    // Then live: a new pane's spawn arrives once, not marked as the past.
    env.ok(&["new", "live", "--", "sleep", "600"]);
    let live = collect(&rx, Duration::from_secs(2));
    assert_eq!(spawned_of(&live), ["live"], "{live:?}");
    assert!(live.iter().all(|e| e.get("history").is_none()), "{live:?}");
    let _ = watcher.kill();
    let _ = watcher.wait();

    // --history 3: the last three; --history 0: nothing until something happens.
    let (mut three, rx) = events(&env, &["--history", "3"]);
    let past = collect(&rx, Duration::from_secs(2));
    let _ = three.kill();
    let _ = three.wait();
    assert_eq!(spawned_of(&past), ["old10", "old11", "live"], "{past:?}");
    let (mut none, rx) = events(&env, &["--history", "0"]);
    let past = collect(&rx, Duration::from_secs(2));
    let _ = none.kill();
    let _ = none.wait();
    assert!(past.is_empty(), "{past:?}");

    // --since: every kept event of that time (all 13 of this test), and of one pane with a name.
    let (mut hour, rx) = events(&env, &["--since", "1h"]);
    let past = collect(&rx, Duration::from_secs(2));
    let _ = hour.kill();
    let _ = hour.wait();
    let mut all = old(0..12);
    all.push("live".into());
    assert_eq!(spawned_of(&past), all, "{past:?}");
    let (mut one, rx) = events(&env, &["old5", "--since", "1h"]);
    let past = collect(&rx, Duration::from_secs(2));
    let _ = one.kill();
    let _ = one.wait();
    assert_eq!(spawned_of(&past), ["old5"], "{past:?}");

    // A duration it cannot read is named, with what it takes.
    let out = env.run(&["events", "--since", "soon"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("\"soon\" is not a duration"), "{said}");
}
