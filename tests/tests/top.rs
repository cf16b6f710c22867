//! `belfry top` through a real terminal: the view runs inside a belfry pane (a real PTY), so
//! the test types its keys and reads its screen. The slow tick is set to ten minutes, so
//! everything the view shows after its first frame came from the daemon's event stream.

use belfry_tests::Env;

/// Starts pane `outer` running `belfry top`, followed by a report of how it ended and whether
/// it left the terminal in canonical (cooked) mode.
fn top_in_a_pane(env: &Env, outer: &str) {
    let script = "\"$BELFRY_BIN\" top --interval-ms 600000; echo \"TOP-EXIT=$?\"; \
         if stty -a | grep -q -- '-icanon'; then echo TTY-RAW; else echo TTY-COOKED; fi; sleep 600";
    env.spawn(outer, "24x150", &["sh", "-c", script], None);
}

fn screen_text(env: &Env, session: &str) -> String {
    env.lines(session).join("\n")
}

/// An arrow key whose `ESC [` and `B` reach the view 5 ms apart (as ssh or a slow terminal
/// may deliver it) moves the selection; read as a lone Escape, it would end the view.
#[test]
fn an_arrow_key_cut_across_reads_moves_the_selection_and_the_view_stays() {
    let env = Env::new();
    env.spawn("first", "10x60", &["sleep", "600"], None);
    top_in_a_pane(&env, "watch");
    env.wait_screen("watch", "belfry top +2 pane");
    env.wait_screen("watch", "> first ");
    env.type_cut_arrow("watch", "B");
    env.wait_screen("watch", "> watch ");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let text = screen_text(&env, "watch");
    assert!(!text.contains("TOP-EXIT"), "the view ended:\n{text}");
    assert!(text.contains("> watch "), "{text}");
}

/// `/` filters the list by name: the selection and Enter act on the panes listed; a paste is
/// text for the filter, never keys that quit or attach; Escape shows every pane again.
#[test]
fn a_filter_lists_the_panes_whose_names_hold_it() {
    let env = Env::new();
    for name in ["api-worker", "db-worker", "reviewer"] {
        env.spawn(name, "10x60", &["sleep", "600"], None);
    }
    top_in_a_pane(&env, "watch");
    env.wait_screen("watch", "belfry top +4 pane");
    env.wait_screen("watch", "> api-worker ");
    env.ok(&["send", "watch", "--text", "/WORK"]);
    env.wait_screen("watch", "/WORK .* 2 of 4 pane");
    env.ok(&["send", "watch", "--key", "Enter", "--text", "j"]);
    env.wait_screen("watch", "filter \"WORK\": 2 of 4 pane");
    env.wait_screen("watch", "> db-worker ");
    let text = screen_text(&env, "watch");
    assert!(
        !text.contains("reviewer") && !text.contains("  watch "),
        "{text}"
    );
    // Escape drops the filter; a paste holding `q` and a line break starts a new one.
    env.ok(&["send", "watch", "--key", "Escape"]);
    env.wait_screen("watch", "  reviewer ");
    env.ok(&["send", "watch", "--text", "\u{1b}[200~rev\rq\u{1b}[201~"]);
    env.wait_screen("watch", "/revq .* 0 of 4 pane");
    env.wait_screen("watch", "no pane's name holds \"revq\"");
    env.ok(&["send", "watch", "--key", "BSpace", "--key", "Enter"]);
    env.wait_screen("watch", "> reviewer ");
    let text = screen_text(&env, "watch");
    assert!(!text.contains("TOP-EXIT"), "the view ended:\n{text}");
    assert!(!text.contains("db-worker"), "{text}");
}

/// `K` and `R` end a pane or restart its program, each only after `y`: any other key leaves
/// the pane as it is.
#[test]
fn kill_and_restart_from_the_view_ask_first() {
    let env = Env::new();
    env.spawn("keeper", "10x60", &["sleep", "600"], None);
    env.spawn("victim", "10x60", &["sleep", "600"], None);
    let incarnation = env.snapshot("keeper")["incarnation"].clone();
    top_in_a_pane(&env, "watch");
    env.wait_screen("watch", "belfry top +3 pane");
    env.wait_screen("watch", "> keeper ");
    env.ok(&["send", "watch", "--text", "jK"]);
    env.wait_screen(
        "watch",
        "kill victim, its program and its pane host\\? y kills it",
    );
    env.ok(&["send", "watch", "--text", "n"]);
    env.wait_screen("watch", "victim left as it is");
    assert!(
        env.run(&["peek", "victim"]).status.success(),
        "victim was killed after n"
    );
    env.ok(&["send", "watch", "--text", "Ky"]);
    env.wait_screen("watch", "killed victim");
    env.wait_screen("watch", "belfry top +2 pane");
    let out = env.run(&["peek", "victim"]);
    assert!(!out.status.success(), "victim is still there: {out:?}");
    // The selection is on keeper again (victim went): restart it.
    env.ok(&["send", "watch", "--text", "gR"]);
    env.wait_screen("watch", "restart keeper's program\\? y restarts it");
    env.ok(&["send", "watch", "--text", "y"]);
    env.wait_screen("watch", "restarted keeper: incarnation");
    assert_ne!(env.snapshot("keeper")["incarnation"], incarnation);
    let text = screen_text(&env, "watch");
    assert!(!text.contains("TOP-EXIT"), "the view ended:\n{text}");
}

#[test]
fn top_follows_a_new_pane_attaches_peeks_and_quits_restoring_the_terminal() {
    let env = Env::new();
    top_in_a_pane(&env, "watch");
    // Its first frame lists the one pane there is: its own.
    env.wait_screen("watch", "belfry top +1 pane");
    env.wait_screen("watch", "NAME +PROGRAM +STATE");
    assert_eq!(env.snapshot("watch")["modes"]["alternate_screen"], true);

    // A pane created now appears through the event stream (the tick is ten minutes away).
    env.ok(&[
        "new",
        "fresh",
        "--size",
        "10x60",
        "--env",
        "PS1=fresh-prompt$ ",
        "--",
        "sh",
        "-i",
    ]);
    env.wait_screen("watch", "belfry top +2 pane");
    env.wait_screen("watch", "  fresh +sh -i +running");
    // The selection stays on the pane it was on (the view's own); k moves it up to the new one.
    env.wait_screen("watch", "> watch ");
    env.ok(&["send", "watch", "--text", "k"]);
    env.wait_screen("watch", "> fresh +sh -i +running");

    // Enter attaches to the selected pane; detaching comes back to the view.
    env.ok(&["send", "watch", "--key", "Enter"]);
    env.wait_screen("watch", "fresh-prompt\\$");
    assert_eq!(env.snapshot("fresh")["clients"], 1);
    env.ok(&["send", "watch", "--key", "C-b", "--text", "d"]);
    env.wait_screen("watch", "back from fresh");
    env.wait_screen("watch", "> fresh ");

    // p shows the selected pane's screen over the list; any key goes back.
    env.ok(&["send", "watch", "--text", "p"]);
    env.wait_screen("watch", "peek fresh +revision");
    env.wait_screen("watch", "any key: back to the list");
    env.ok(&["send", "watch", "--text", "x"]);
    env.wait_screen("watch", "NAME +PROGRAM +STATE");

    // q ends the view: exit 0, cooked mode, the main screen and a visible cursor.
    env.ok(&["send", "watch", "--text", "q"]);
    env.wait_screen("watch", "TTY-(RAW|COOKED)");
    let text = screen_text(&env, "watch");
    assert!(text.contains("TOP-EXIT=0"), "{text}");
    assert!(
        text.contains("TTY-COOKED"),
        "terminal left in raw mode:\n{text}"
    );
    let watch = env.snapshot("watch");
    assert_eq!(watch["modes"]["alternate_screen"], false);
    assert_eq!(watch["cursor"]["visible"], true);
    assert!(
        env.snapshot("fresh")["exited"].is_null(),
        "the view must not end the panes it shows"
    );
}

#[test]
fn top_without_a_terminal_refuses_and_names_the_commands_for_programs() {
    let env = Env::new();
    let out = env.run(&["top"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    assert!(stderr.contains("belfry ls --json"), "{stderr}");
    let out = env.run(&["ls", "--watch", "--json"]);
    assert_eq!(out.status.code(), Some(2), "--watch and --json conflict");
}

#[test]
fn ls_watch_is_the_same_view_and_a_killed_pane_leaves_it() {
    let env = Env::new();
    env.spawn("doomed", "10x60", &["sh", "-c", "sleep 600"], None);
    let script = "\"$BELFRY_BIN\" ls --watch --interval-ms 600000; echo \"WATCH-EXIT=$?\"; \
         sleep 600";
    env.spawn("watch", "24x150", &["sh", "-c", script], None);
    env.wait_screen("watch", "belfry top +2 pane");
    env.wait_screen("watch", "doomed +sh -c sleep");
    // The kill's lifecycle event takes the pane off the view (the tick is ten minutes away).
    env.ok(&["kill", "doomed"]);
    env.wait_screen("watch", "belfry top +1 pane");
    assert!(!screen_text(&env, "watch").contains("doomed"));
    env.ok(&["send", "watch", "--text", "q"]);
    env.wait_screen("watch", "WATCH-EXIT=0");
}

/// Issue 40 item 4: the panes whose programs report through OSC 7501 that they wait for a
/// person (`blocked`) are listed first, with what they wait for and for how long; then the
/// one at work, then the idle one, then a pane that reports nothing — whatever their names'
/// order. The programs are shells that write one report each and sleep.
#[test]
fn top_lists_the_panes_that_need_a_person_first_with_what_they_wait_for() {
    let env = Env::new();
    let report =
        |body: &str| format!("printf '\\033]7501;{body}\\033\\\\'; echo REPORTED; sleep 600");
    for (name, body) in [
        ("a-idle", "state=idle:app=scripted"),
        ("b-working", "state=working:app=scripted"),
        ("c-question", "state=blocked:kind=question:app=scripted"),
        ("d-approve", "state=blocked:kind=permission:app=scripted"),
    ] {
        env.spawn(
            name,
            "10x60",
            &["sh", "-c", &report(body)],
            Some("REPORTED"),
        );
        // The first blocked pane entered its state first: it has waited longest.
        std::thread::sleep(std::time::Duration::from_millis(1_100));
    }
    env.spawn("e-plain", "10x60", &["sleep", "600"], None);
    top_in_a_pane(&env, "watch");
    env.wait_screen("watch", "belfry top +6 pane");
    env.wait_screen("watch", "d-approve .* needs you: permission [0-9]+ s");
    let text = screen_text(&env, "watch");
    let rows: Vec<&str> = text
        .lines()
        .filter_map(|line| line.get(2..)?.split_whitespace().next())
        .filter(|name| name.contains('-') || *name == "watch")
        .collect();
    assert_eq!(
        rows,
        [
            "c-question",
            "d-approve",
            "b-working",
            "a-idle",
            "e-plain",
            "watch"
        ],
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|line| line.get(2..).is_some_and(|l| l.starts_with(name)))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        row("c-question").contains(" needs you: question "),
        "{text}"
    );
    assert!(row("b-working").contains(" working "), "{text}");
    assert!(row("a-idle").contains(" idle "), "{text}");
    // The selection starts on the pane that has waited longest for a person.
    assert!(text.contains("> c-question "), "{text}");
}
