//! spec §11: `belfry up` launches what belfry.kdl declares, adopts what runs with the same
//! generation, reports drift without restarting anything unless --replace; `belfry down`.

use belfry_tests::{recorder_bin, Env};
use serde_json::Value;

fn write(env: &Env, text: &str) -> String {
    let path = env.path("belfry.kdl");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn panes(env: &Env) -> Vec<Value> {
    serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap()
}

#[test]
fn up_launches_adopts_reports_drift_and_replaces_only_when_asked() {
    let env = Env::new();
    let rec = recorder_bin().display().to_string();
    let file = write(&env, &format!("agent \"a\" {{\n  command \"{rec}\"\n}}\nagent \"b\" {{\n  command \"sleep\" \"600\"\n  size rows=30 cols=100\n}}\n"));
    let out = env.ok(&["up", &file]);
    assert_eq!(out.matches("launch").count(), 2, "{out}");
    let first = panes(&env);
    assert_eq!(first.len(), 2);
    assert_eq!(
        first.iter().find(|p| p["session"] == "b").unwrap()["size"]["rows"],
        30
    );

    // Same declarations: everything adopted, nothing restarted.
    let out = env.ok(&["up", &file]);
    assert_eq!(out.matches("adopt").count(), 2, "{out}");
    let second = panes(&env);
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a["child_pid"], b["child_pid"]);
    }

    // A changed command is drift: reported, not restarted.
    let file = write(&env, &format!("agent \"a\" {{\n  command \"{rec}\" \"--echo\"\n}}\nagent \"b\" {{\n  command \"sleep\" \"600\"\n  size rows=30 cols=100\n}}\n"));
    let out = env.ok(&["up", &file]);
    assert!(out.contains("drift"), "{out}");
    let third = panes(&env);
    let pid = |list: &[Value], name: &str| {
        list.iter().find(|p| p["session"] == name).unwrap()["child_pid"].clone()
    };
    assert_eq!(pid(&third, "a"), pid(&first, "a"), "drift must not restart");

    // --replace relaunches the drifted agent only.
    let out = env.ok(&["up", &file, "--replace"]);
    assert!(out.contains("replace"), "{out}");
    let fourth = panes(&env);
    assert_ne!(pid(&fourth, "a"), pid(&first, "a"));
    assert_eq!(pid(&fourth, "b"), pid(&first, "b"));
    let argv = fourth.iter().find(|p| p["session"] == "a").unwrap()["argv"].clone();
    assert_eq!(argv[1], "--echo");

    env.ok(&["down", &file]);
    assert!(panes(&env).is_empty());
}

#[test]
fn bad_declarations_name_line_and_column_and_change_nothing() {
    let env = Env::new();
    env.spawn("keep", "24x80", &["sleep", "600"], None);
    for (text, needle) in [
        ("agent \"a\" {\n  comand \"x\"\n}\n", ":2:3"),
        ("agent \"a\" {\n  command \"x\"\n  ding {\n    delivery \"whenever\"\n  }\n}\n", "whenever"),
        ("agent \"a\" {\n  command \"x\"\n  ding {\n    delivery \"turn-boundary+fresh-idle\"\n  }\n}\n", "adapter"),
        ("agent \"a\" {\n  command \"x\"\n", ":"),
        ("agent \"../x\" {\n  command \"x\"\n}\n", "../x"),
    ] {
        let file = write(&env, text);
        let out = env.run(&["up", &file]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(needle) && stderr.contains("belfry.kdl"), "{text}: {stderr}");
    }
    let list = panes(&env);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["session"], "keep");
}

#[test]
fn charter_reaches_the_program_as_the_adapter_declares() {
    let adapters = belfry_tests::fixture("adapters").display().to_string();
    let env = Env::with_vars(&[("BELFRY_ADAPTERS", &adapters)]);
    std::fs::write(env.path("charter.md"), "You are the release captain.\n").unwrap();
    let file = write(&env, concat!(
        "agent \"by-env\" {\n  command \"sh\" \"-c\" \"cat \\\"$FIXTURE_CHARTER\\\"; sleep 600\"\n",
        "  charter \"charter.md\"\n  adapter \"fixture-harness\"\n}\n",
        "agent \"by-flag\" {\n  command \"sh\" \"-c\" \"echo flag=$1; cat \\\"$2\\\"; sleep 600\" \"sh\"\n",
        "  charter \"charter.md\"\n  adapter \"fixture-flag-harness\"\n}\n",
    ));
    env.ok(&["up", &file]);
    env.wait_screen("by-env", "release captain");
    env.wait_screen("by-flag", "flag=--charter-file");
    env.wait_screen("by-flag", "release captain");
    // The charter is outside the generation: the same declarations are adopted, not drifted.
    let out = env.ok(&["up", &file]);
    assert_eq!(out.matches("adopt").count(), 2, "{out}");
    // A charter for a harness that declares no way to take it is refused, not dropped.
    let file = write(
        &env,
        "agent \"nope\" {\n  command \"true\"\n  charter \"charter.md\"\n}\n",
    );
    let out = env.run(&["up", &file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("charter needs an adapter"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kdl_nested_2000_deep_is_a_clean_error_with_file_line_column_not_an_abort() {
    let env = Env::new();
    let blocks = format!("{}{}", "x {".repeat(2000), "}".repeat(2000));
    for text in [
        format!("agent \"a\" {{\n  command \"true\"\n}}\n{blocks}\n"),
        format!("agent \"a\" {{\n  command \"true\"\n}}\n/-{blocks}\n"),
    ] {
        let file = write(&env, &text);
        let out = env.run(&["up", &file]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("{file}:4:")), "{stderr}");
        assert!(stderr.contains("nest deeper than"), "{stderr}");
    }
    assert!(panes(&env).is_empty(), "nothing may be launched");
}

#[test]
fn up_with_a_bad_later_agent_launches_nothing_and_names_file_line_column() {
    let env = Env::new();
    std::fs::create_dir(env.path("charters")).unwrap();
    let first = "agent \"first\" {\n  command \"sleep\" \"600\"\n}\n";
    for (second, at, needle) in [
        (
            "agent \"second\" {\n  command \"true\"\n  cwd \"no/such/dir\"\n}\n",
            ":6:7",
            "does not exist",
        ),
        (
            "agent \"second\" {\n  command \"no-such-program-belfry\"\n}\n",
            ":5:11",
            "is not found on PATH",
        ),
        (
            "agent \"second\" {\n  command \"./missing.sh\"\n}\n",
            ":5:11",
            "does not exist",
        ),
        (
            "agent \"second\" {\n  command \"true\"\n  charter \"missing.md\"\n  adapter \"x\"\n}\n",
            ":6:11",
            "charter",
        ),
        (
            "agent \"second\" {\n  command \"true\"\n  charter \"charters\"\n  adapter \"x\"\n}\n",
            ":6:11",
            "cannot be read",
        ),
    ] {
        let file = write(&env, &format!("{first}{second}"));
        let out = env.run(&["up", &file]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{second}: {stderr}");
        assert!(stderr.contains(&format!("{file}{at}")), "{second}: {stderr}");
        assert!(stderr.contains(needle), "{second}: {stderr}");
        assert!(stderr.contains("nothing was launched"), "{second}: {stderr}");
        assert!(panes(&env).is_empty(), "{second}: a pane was launched");
    }
}

#[test]
fn up_stops_the_panes_it_launched_when_the_daemon_refuses_a_later_one() {
    let env = Env::new();
    std::fs::write(env.path("charter.md"), "charter\n").unwrap();
    // The daemon alone knows that no adapter "no-such-adapter" exists.
    let file = write(
        &env,
        concat!(
            "agent \"first\" {\n  command \"sleep\" \"600\"\n}\n",
            "agent \"second\" {\n  command \"true\"\n  charter \"charter.md\"\n",
            "  adapter \"no-such-adapter\"\n}\n",
        ),
    );
    let out = env.run(&["up", &file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("stopped first"), "{stderr}");
    assert!(panes(&env).is_empty(), "{stderr}");
}

/// Issue 39: `up --dry-run` accepted `adapter "../../x"`, which real `up` refused only at
/// spawn, without the place in the file. Both now refuse it when the file is read, naming
/// `file:line:col` of the name, and nothing is launched (no daemon is even started).
#[test]
fn an_adapter_name_that_is_a_path_is_refused_at_its_place_by_up_and_dry_run() {
    let env = Env::new();
    for bad in ["../../x", "a/b", ".."] {
        let file = write(
            &env,
            &format!(
                "agent \"ok\" {{\n  command \"sleep\" \"600\"\n}}\nagent \"a\" {{\n  command \"sleep\" \"600\"\n  adapter \"{bad}\"\n}}\n"
            ),
        );
        for args in [vec!["up", &file, "--dry-run"], vec!["up", &file]] {
            let out = env.run(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("{file}:6:11: adapter name {bad:?} is invalid")),
                "{args:?}: {stderr}"
            );
        }
    }
    assert!(!env.socket().exists(), "a daemon was started");
}

/// Issue 45 (d): where a harness takes its rules through a charter and has no exact
/// session-start context (Pi), `belfry up` ends the charter with the guard brief and tells
/// dispatch so; where session-start context is exact (Claude Code), the charter is the user's
/// alone and dispatch tells the brief. The user's charter file is never changed.
#[test]
fn the_guard_brief_ends_the_charter_where_the_harness_takes_its_rules_that_way() {
    let env = Env::new();
    std::fs::write(env.path("charter.md"), "You are the release captain.\n").unwrap();
    std::fs::write(
        env.path("belfry-hooks.kdl"),
        "hook \"no-force-push\" { event \"before-tool\"; intent \"enforce\"; select tool=\"shell\"; \
         reason \"RULE-WHY-77 shared history\"; command \"guard\"; targets \"pi\" \"claude\" }\n",
    )
    .unwrap();
    let show =
        "echo flag=$1; cat \\\"$2\\\"; echo in-charter=${BELFRY_BRIEF_IN_CHARTER:-no}; sleep 600";
    let file = write(
        &env,
        &format!(
            "agent \"rules-pi\" {{\n  command \"sh\" \"-c\" \"{show}\" \"sh\"\n  charter \"charter.md\"\n  adapter \"pi\"\n}}\n\
             agent \"rules-claude\" {{\n  command \"sh\" \"-c\" \"{show}\" \"sh\"\n  charter \"charter.md\"\n  adapter \"claude\"\n}}\n"
        ),
    );
    env.ok(&["up", &file]);
    env.wait_screen("rules-pi", "flag=--append-system-prompt");
    env.wait_screen("rules-pi", "release captain");
    env.wait_screen(
        "rules-pi",
        "no-force-push: refuses shell commands. Why: RULE-WHY-77",
    );
    env.wait_screen("rules-pi", "in-charter=1");
    env.wait_screen("rules-claude", "in-charter=no");
    let claude = env.ok(&["peek", "rules-claude"]);
    assert!(claude.contains("release captain"), "{claude}");
    assert!(!claude.contains("Guards in force"), "{claude}");
    assert_eq!(
        std::fs::read_to_string(env.path("charter.md")).unwrap(),
        "You are the release captain.\n"
    );
}
