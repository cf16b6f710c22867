//! Issue 10 item 1, live: two Codex panes (the version tests/harnesses.json pins) keep their
//! own identity. By default the Codex TUI runs its tools and hooks in one shared background
//! app-server, which keeps the environment of whichever process started it first — a tool in
//! one pane printed another, long killed pane's `BELFRY_SESSION`. The codex adapter's
//! declaration adds `--no-daemon` to every pane it launches (`launch.args`), so each pane's
//! process runs its own tools and hooks.
//!
//! Proven here, in a loopback-only namespace against the scripted model server: a first Codex
//! pane started *without* the adapter (so without `--no-daemon`) leaves the shared background
//! server running with its environment; then two panes declared with `--adapter codex` each
//! run a shell tool that writes the `BELFRY_SESSION` it sees, and each sees its own, not the
//! first pane's and not the other's. Tools and hooks run in the same process in Codex, so the
//! tool's environment is the hooks' environment.
//!
//! Gated like the other live tests: `#[ignore]`; it needs `scripts/install-harnesses codex`
//! and the privilege to make a network namespace. Run with
//! `cargo test -p belfry-tests --test codex_identity_live -- --ignored`.

use std::time::Duration;

use belfry_tests::eventually;
use belfry_tests::live::{Live, LiveOptions, Placeholders};
use serde_json::json;

const FIRST: &str = "codex";
const PANES: [&str; 2] = ["codex-a", "codex-b"];

/// Starts a second Codex pane of the same run, declared with the codex adapter.
fn start_declared_pane(live: &Live, session: &str) {
    let fill = Placeholders {
        bin: live.pin.executable().expect("the pinned codex"),
        home: live.home.clone(),
        work: live.work.clone(),
        base_url: live.server.base_url(),
    };
    let marker = live
        .env
        .dir
        .path()
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut args: Vec<String> = vec![
        "new".into(),
        session.into(),
        "--size".into(),
        "40x120".into(),
        "--cwd".into(),
        live.work.display().to_string(),
        "--adapter".into(),
        "codex".into(),
        "--env".into(),
        format!("BELFRY_LIVE_RUN={marker}"),
    ];
    for (key, value) in live.profile.env(&fill) {
        args.push("--env".into());
        args.push(format!("{key}={value}"));
    }
    args.push("--".into());
    args.extend(live.profile.argv(&fill, &[]));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = live.env.cmd(&refs);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key == "CI" || key == "CONTINUOUS_INTEGRATION" || key.starts_with("CI_") {
            cmd.env_remove(key.as_ref());
        }
    }
    let out = cmd.output().expect("belfry new");
    assert!(
        out.status.success(),
        "belfry new {session}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asks the pane `session` to run the tool that records the identity it sees in `file`.
fn record_identity(live: &mut Live, session: &str, done: &str) {
    live.session = session.to_string();
    live.wait_ready();
    let result = live.submit(&format!("WHOAMI-{session}-END please run the command"));
    assert_eq!(result["result"], "sent", "{session}: {result}");
    let finished = live.wait_approving(done, 90_000);
    assert!(
        finished.is_some(),
        "{session}: the tool turn never finished\nscreen:\n{}",
        live.screen()
    );
}

#[test]
#[ignore = "live: needs scripts/install-harnesses codex and a network namespace (run with --ignored)"]
fn two_codex_panes_each_run_tools_with_their_own_session() {
    let mut turns = vec![json!({"match": "WARMUP", "text": "WARMED-UP"})];
    for session in [FIRST].iter().chain(PANES.iter()) {
        turns.push(json!({
            "match": format!("WHOAMI-{session}-END"),
            "tool": {"command": format!("printf '%s' \"$BELFRY_SESSION\" > seen-by-{session}.txt")},
            "then": {"text": format!("RECORDED-{session}")}
        }));
    }
    let mut live = Live::start(
        FIRST,
        LiveOptions {
            script: json!({"turns": turns}),
            ..LiveOptions::default()
        },
    );
    // The first pane, without the adapter, starts the shared background server with its own
    // environment and runs a tool in it.
    record_identity(&mut live, FIRST, &format!("RECORDED-{FIRST}"));
    let first_seen =
        std::fs::read_to_string(live.work.join(format!("seen-by-{FIRST}.txt"))).unwrap_or_default();
    assert_eq!(first_seen, FIRST, "the first pane's own tool");

    for session in PANES {
        start_declared_pane(&live, session);
    }
    for session in PANES {
        let spec = live.env.ok(&["ls", "--json"]);
        assert!(spec.contains(session), "{spec}");
        record_identity(&mut live, session, &format!("RECORDED-{session}"));
    }
    live.session = FIRST.to_string();
    for session in PANES {
        let path = live.work.join(format!("seen-by-{session}.txt"));
        assert!(
            eventually(Duration::from_secs(5), || path.exists()),
            "{session}: the tool never wrote {}",
            path.display()
        );
        let seen = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            seen, session,
            "{session}: its tool ran with another pane's identity (BELFRY_SESSION={seen:?})"
        );
    }
    println!(
        "live codex identity: the first pane (no adapter) saw {first_seen:?}; {} each saw its \
         own BELFRY_SESSION; {} s in all",
        PANES.join(" and "),
        live.started.elapsed().as_secs()
    );
}
