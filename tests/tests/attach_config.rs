//! Issue 46: the user's config file, `$XDG_CONFIG_HOME/belfry/config.kdl`, sets the attach
//! client's prefix, escape time, key bindings and the history a new pane keeps; the command
//! line and the environment win over it, and a bad file is named by line and column.

use belfry_tests::Env;

/// Writes the user's config of `env` (its `XDG_CONFIG_HOME`).
fn write_config(env: &Env, text: &str) -> std::path::PathBuf {
    let dir = env.path("xdg-config").join("belfry");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.kdl");
    std::fs::write(&path, text).unwrap();
    path
}

/// An outer pane running `belfry attach ARGS` (with `vars` before it), then how it ended.
fn attach_client(env: &Env, outer: &str, vars: &str, args: &str) {
    let script =
        format!("{vars} \"$BELFRY_BIN\" attach {args}; echo \"ATTACH-EXIT=$?\"; sleep 600");
    env.spawn(outer, "24x100", &["sh", "-c", &script], None);
}

fn screen(env: &Env, session: &str) -> String {
    env.lines(session).join("\n")
}

/// `prefix "C-a"` makes C-a the prefix: the attach line says so, C-a d detaches, and C-b is
/// the program's; `--detach-key` on the command line wins over the file.
#[test]
fn the_config_file_sets_the_prefix_and_the_command_line_wins() {
    let env = Env::new();
    write_config(
        &env,
        "hosts {\n  build \"me@build1\"\n}\nattach {\n  prefix \"C-a\"\n}\n",
    );
    env.ok(&["new", "inner", "--env", "PS1=inner$ ", "--", "sh", "-i"]);
    env.wait_screen("inner", "inner\\$");
    attach_client(&env, "outer", "", "inner");
    env.wait_screen("outer", "inner\\$");
    // The attach line is printed before the pane's redraw, which may already have pushed it
    // into the terminal's history: it is looked for there too, not on the screen alone.
    let shown = env.ok(&["peek", "outer", "--scrollback", "100"]);
    assert!(
        shown.contains("attached to inner: C-a d detaches"),
        "{shown}"
    );
    // C-b is no longer the prefix: `cat -v` shows it as typed.
    env.ok(&["send", "outer", "--text", "cat -v", "--key", "Enter"]);
    env.wait_screen("inner", "cat -v");
    std::thread::sleep(std::time::Duration::from_millis(300));
    env.ok(&[
        "send", "outer", "--key", "C-b", "--text", "x", "--key", "Enter",
    ]);
    env.wait_screen("inner", "\\^Bx");
    env.ok(&["send", "outer", "--key", "C-c"]);
    env.ok(&["send", "outer", "--key", "C-a", "--text", "d"]);
    env.wait_screen("outer", "ATTACH-EXIT=0");
    assert!(
        screen(&env, "outer").contains("[detached from inner]"),
        "{}",
        screen(&env, "outer")
    );

    attach_client(&env, "flagged", "", "--detach-key C-q inner");
    env.wait_screen("flagged", "inner\\$");
    // The attach line is above the pane's redraw, in the terminal's history.
    let shown = env.ok(&["peek", "flagged", "--scrollback", "100"]);
    assert!(shown.contains("attached to inner: C-q detaches"), "{shown}");
    env.ok(&["send", "flagged", "--key", "C-q"]);
    env.wait_screen("flagged", "ATTACH-EXIT=0");
}

/// `history-limit` is the history a pane started by `belfry new` keeps.
#[test]
fn the_config_file_sets_the_history_a_new_pane_keeps() {
    let env = Env::new();
    write_config(&env, "attach {\n  history-limit 50\n}\n");
    env.spawn(
        "short",
        "10x40",
        &["sh", "-c", "seq 1 500; echo DONE; sleep 600"],
        Some("DONE"),
    );
    let out = env.ok(&["peek", "short", "--scrollback", "100000"]);
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.len() <= 50 + 10 && lines.contains(&"500"),
        "{} lines kept: {out}",
        lines.len()
    );
    assert!(!lines.contains(&"400"), "line 400 was kept: {out}");
}

/// A bad file stops the attach with its place and the problem, exit 2; and
/// `BELFRY_ESCAPE_TIME_MS`, when set, is judged instead of the file's escape time (it wins; with
/// the detach key on the command line the file is not needed for that either).
#[test]
fn a_bad_config_file_is_named_by_line_and_column() {
    let env = Env::new();
    env.ok(&["new", "inner", "--", "sh", "-c", "sleep 600"]);
    // The clients' panes start before the file is broken (`belfry new` reads it too, for the
    // history limit, and would refuse to start them); each attaches once told to.
    let go = env.path("go");
    let wait = format!("until [ -e {} ]; do sleep 0.05; done;", go.display());
    attach_client(&env, "outer", &wait, "inner");
    attach_client(
        &env,
        "envwins",
        &format!("{wait} BELFRY_ESCAPE_TIME_MS=x"),
        "--detach-key C-q inner",
    );
    let path = write_config(&env, "attach {\n  escape-time \"soon\"\n}\n");
    std::fs::write(&go, "").unwrap();
    env.wait_screen("outer", "ATTACH-EXIT=2");
    let shown = screen(&env, "outer").replace('\n', "");
    assert!(
        shown.contains(&format!("{}:2:3", path.display())) && shown.contains("escape-time"),
        "{shown}"
    );
    env.wait_screen("envwins", "ATTACH-EXIT=2");
    let shown = screen(&env, "envwins").replace('\n', "");
    assert!(shown.contains("BELFRY_ESCAPE_TIME_MS=\"x\""), "{shown}");
}

/// `bind "KEY" "ACTION"` changes the keys after the prefix: a key bound to `detach` detaches,
/// one bound to `none` is swallowed as unbound, and `prefix ?` lists the table as it is; a bad
/// action stops the attach naming the file, line and column.
#[test]
fn bind_lines_in_the_config_file_change_the_keys_after_the_prefix() {
    let env = Env::new();
    let path = write_config(
        &env,
        "attach {\n  prefix \"C-a\"\n  bind \"x\" \"detach\"\n  bind \"[\" \"none\"\n}\n",
    );
    env.ok(&["new", "inner", "--env", "PS1=inner$ ", "--", "sh", "-i"]);
    env.wait_screen("inner", "inner\\$");
    attach_client(&env, "outer", "", "inner");
    env.wait_screen("outer", "inner\\$");
    env.ok(&["send", "outer", "--key", "C-a", "--text", "["]);
    env.wait_screen("outer", "C-a \\[ is not bound; C-a \\? lists the bindings");
    env.ok(&["send", "outer", "--key", "C-a", "--text", "?"]);
    env.wait_screen("outer", "C-a: d/x detach, \\] paste");
    assert!(
        !screen(&env, "outer").contains("[ history"),
        "{}",
        screen(&env, "outer")
    );
    env.ok(&["send", "outer", "--key", "C-a", "--text", "x"]);
    env.wait_screen("outer", "ATTACH-EXIT=0");
    assert!(screen(&env, "outer").contains("[detached from inner]"));

    // The file is read before anything else (a terminal on stdin among it).
    std::fs::write(&path, "attach {\n  bind \"v\" \"zoom\"\n}\n").unwrap();
    let out = env.run(&["attach", "inner"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2:3: `bind` unknown action \"zoom\"",
            path.display()
        )),
        "{err}"
    );
}
