//! spec §5: "The redraw restores the primary screen under an alternate one, every mode that is
//! on (and only those), the scroll region and pending wrap." Checked end to end: `belfry
//! attach` runs inside a real tmux, a real terminal emulator with its own screens, modes and
//! scroll region, and after a re-attach what tmux holds is compared with the pane's model.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use belfry_tests::{eventually, wait_for_file, Env};

/// A tmux server of its own (unique `-L` socket), killed when the test ends, even by a panic.
struct Tmux {
    socket: String,
    vars: Vec<(String, String)>,
    /// The server's socket file, removed at the end in case the server leaves it behind.
    socket_path: String,
}

impl Tmux {
    /// Starts a detached 80x24 session (no status line) running `sh -c SCRIPT` with the test
    /// environment.
    fn start(env: &Env, name: &str, script: &str) -> Tmux {
        let conf = env.path("tmux.conf");
        std::fs::write(&conf, "set -g status off\n").expect("write tmux.conf");
        let mut tmux = Tmux {
            socket: format!("belfry-test-{}-{name}", std::process::id()),
            vars: env.vars(),
            socket_path: String::new(),
        };
        let conf = conf.display().to_string();
        let out = tmux.run_with_conf(
            &conf,
            &[
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "24",
                "-s",
                "t",
                "sh",
                "-c",
                script,
            ],
        );
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux.socket_path = tmux
            .run(&["display", "-p", "#{socket_path}"])
            .trim()
            .to_string();
        tmux
    }

    fn run_with_conf(&self, conf: &str, args: &[&str]) -> Output {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket, "-f", conf]).args(args);
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd.output().expect("run tmux")
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.run_with_conf("/dev/null", args);
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What tmux shows, trailing blanks trimmed as in `peek`.
    fn lines(&self) -> Vec<String> {
        self.run(&["capture-pane", "-p", "-t", "t"])
            .lines()
            .map(|l| l.trim_end().to_string())
            .chain(std::iter::repeat(String::new()))
            .take(24)
            .collect()
    }

    /// tmux's own view of its pane's terminal state.
    fn state(&self) -> TerminalState {
        let out = self.run(&[
            "display",
            "-p",
            "-t",
            "t",
            "#{alternate_on} #{mouse_standard_flag} #{mouse_button_flag} #{mouse_all_flag} \
             #{mouse_sgr_flag} #{scroll_region_upper} #{scroll_region_lower} #{cursor_x} \
             #{cursor_y} #{mouse_any_flag}",
        ]);
        let n: Vec<u64> = out
            .split_whitespace()
            .map(|v| v.parse().expect("tmux prints numbers"))
            .collect();
        assert_eq!(n.len(), 10, "tmux display: {out:?}");
        TerminalState {
            alternate: n[0] == 1,
            any_mouse: n[9] == 1,
            mouse: (n[1] == 1, n[2] == 1, n[3] == 1, n[4] == 1),
            scroll_region: (n[5], n[6]),
            cursor: (n[8], n[7]),
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run_with_conf("/dev/null", &["kill-server"]);
        if !self.socket_path.is_empty() {
            let _ = std::fs::remove_file(&self.socket_path);
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct TerminalState {
    alternate: bool,
    /// Any mouse tracking mode on (tmux's `mouse_any_flag`).
    any_mouse: bool,
    /// `?1000`, `?1002`, `?1003`, `?1006`.
    mouse: (bool, bool, bool, bool),
    /// Zero-based top and bottom rows, both inclusive.
    scroll_region: (u64, u64),
    /// `(row, col)`, zero based. tmux reports a pending wrap as the column after the last.
    cursor: (u64, u64),
}

impl TerminalState {
    /// The cursor as the model reports it: a pending wrap stays in the last column.
    fn model_cursor(&self) -> (u64, u64) {
        (self.cursor.0, self.cursor.1.min(79))
    }
}

/// The pane's cursor `(row, col)` from its snapshot.
fn model_cursor(env: &Env, session: &str) -> (u64, u64) {
    let cursor = &env.snapshot(session)["cursor"];
    (
        cursor["row"].as_u64().expect("row"),
        cursor["col"].as_u64().expect("col"),
    )
}

/// Waits until tmux shows what the pane's model holds.
fn assert_tmux_shows_the_model(env: &Env, tmux: &Tmux, session: &str, when: &str) {
    let same = eventually(Duration::from_secs(10), || {
        tmux.lines() == env.lines(session)
            && tmux.state().model_cursor() == model_cursor(env, session)
    });
    assert!(
        same,
        "{when}: tmux shows\n{:#?}\ncursor {:?}\nbut the model holds\n{:#?}\ncursor {:?}",
        tmux.lines(),
        tmux.state().cursor,
        env.lines(session),
        model_cursor(env, session)
    );
}

#[test]
fn reattach_restores_primary_screen_mouse_mode_and_scroll_region_in_a_real_terminal() {
    let env = Env::new();
    let (more, quit, reattach) = (env.path("more"), env.path("quit"), env.path("reattach"));
    // A full-screen program: a primary screen with a prompt, then the alternate screen with a
    // header, a footer, a scroll region between them and button-event mouse tracking in SGR
    // encoding. On `more` it scrolls output through the region; on `quit` it leaves the
    // alternate screen as vim, less or htop do.
    let program = format!(
        r#"
import os, sys, time
def out(s):
    sys.stdout.write(s)
    sys.stdout.flush()
def wait(path):
    while not os.path.exists(path):
        time.sleep(0.05)
out("primary-1\r\nprimary-2 \x1b[1mbold\x1b[0m\r\n$ ")
out("\x1b[?1049h\x1b[H\x1b[2J\x1b[1;1HALT-HEADER\x1b[24;1HALT-FOOTER\x1b[2;23r")
out("\x1b[?1002h\x1b[?1006h\x1b[10;5HREADY")
wait({more:?})
out("\x1b[23;1H" + "".join("\r\nline-%d" % i for i in range(40)))
wait({quit:?})
out("\x1b[?1049l")
time.sleep(600)
"#,
        more = more.display().to_string(),
        quit = quit.display().to_string(),
    );
    let script_path = env.path("app.py");
    std::fs::write(&script_path, program).expect("write the program");
    env.spawn(
        "app",
        "24x80",
        &["python3", &script_path.display().to_string()],
        Some("READY"),
    );
    // Attach, detach, attach again: the second redraw is the one a user gets on re-attach.
    let attach = format!(
        "\"$BELFRY_BIN\" attach app; {}; \"$BELFRY_BIN\" attach app; sleep 600",
        wait_for_file(&reattach)
    );
    let tmux = Tmux::start(&env, "fidelity", &attach);
    assert_tmux_shows_the_model(&env, &tmux, "app", "first attach");
    env.ok(&["detach", "app"]);
    assert!(eventually(Duration::from_secs(5), || env.snapshot("app")
        ["clients"]
        == 0));
    std::fs::write(&reattach, "").expect("touch reattach");
    assert!(eventually(Duration::from_secs(5), || env.snapshot("app")
        ["clients"]
        == 1));
    assert_tmux_shows_the_model(&env, &tmux, "app", "re-attach");
    let state = tmux.state();
    assert_eq!(
        state,
        TerminalState {
            alternate: true,
            any_mouse: true,
            mouse: (false, true, false, true),
            scroll_region: (1, 22),
            cursor: (9, 9),
        },
        "tmux's terminal state after re-attach"
    );

    // Output scrolled through the region leaves the header and footer where they are.
    std::fs::write(&more, "").expect("touch more");
    env.wait_screen("app", "line-39");
    assert_tmux_shows_the_model(&env, &tmux, "app", "after scrolling in the region");
    let lines = tmux.lines();
    assert_eq!(
        (lines[0].as_str(), lines[23].as_str()),
        ("ALT-HEADER", "ALT-FOOTER")
    );

    // The program quits: tmux must show the pane's primary screen, not its own stale one.
    std::fs::write(&quit, "").expect("touch quit");
    assert!(eventually(Duration::from_secs(5), || env.snapshot("app")
        ["modes"]["alternate_screen"]
        == false));
    assert_tmux_shows_the_model(&env, &tmux, "app", "after leaving the alternate screen");
    assert_eq!(tmux.lines()[..3], ["primary-1", "primary-2 bold", "$"]);
    assert!(!tmux.state().alternate);
}

#[test]
fn reattach_keeps_the_pending_wrap_after_a_full_width_line_in_a_real_terminal() {
    let env = Env::new();
    let (next, reattach) = (env.path("next"), env.path("reattach"));
    // A line exactly as wide as the screen leaves the cursor in the last column with the wrap
    // pending: the next character belongs at the start of the next line.
    let program = format!(
        "printf 'top\\r\\n%080d' 0; {}; printf 'X'; sleep 600",
        wait_for_file(&next)
    );
    env.spawn("wrap", "24x80", &["sh", "-c", &program], Some("0{80}"));
    let attach = format!(
        "\"$BELFRY_BIN\" attach wrap; {}; \"$BELFRY_BIN\" attach wrap; sleep 600",
        wait_for_file(&reattach)
    );
    let tmux = Tmux::start(&env, "wrap", &attach);
    assert_tmux_shows_the_model(&env, &tmux, "wrap", "first attach");
    env.ok(&["detach", "wrap"]);
    assert!(eventually(Duration::from_secs(5), || env.snapshot("wrap")
        ["clients"]
        == 0));
    std::fs::write(&reattach, "").expect("touch reattach");
    assert!(eventually(Duration::from_secs(5), || env.snapshot("wrap")
        ["clients"]
        == 1));
    assert_tmux_shows_the_model(&env, &tmux, "wrap", "re-attach");
    // The redraw moves the cursor to the last column and then prints that column's character
    // again to set the pending wrap: between the two, tmux shows the model's lines with the
    // cursor at column 79, which the comparison above accepts (a pending wrap reads as the last
    // column). The pending wrap must follow.
    assert!(
        eventually(Duration::from_secs(5), || tmux.state().cursor == (1, 80)),
        "tmux has no pending wrap after re-attach: cursor {:?}",
        tmux.state().cursor
    );
    std::fs::write(&next, "").expect("touch next");
    env.wait_screen("wrap", "^top\n0{80}\nX");
    assert_tmux_shows_the_model(&env, &tmux, "wrap", "after the next character");
    assert_eq!(tmux.lines()[..3], ["top", &"0".repeat(80), "X"]);
}

impl Tmux {
    /// tmux's flags for every mode a detach must put back, labelled, for comparing whole.
    fn modes(&self) -> String {
        self.run(&[
            "display",
            "-p",
            "-t",
            "t",
            "alternate=#{alternate_on} cursor=#{cursor_flag} insert=#{insert_flag} \
             wrap=#{wrap_flag} region=#{scroll_region_upper},#{scroll_region_lower} \
             mouse=#{mouse_any_flag},#{mouse_standard_flag},#{mouse_button_flag},\
             #{mouse_all_flag},#{mouse_sgr_flag},#{mouse_utf8_flag} \
             keypad=#{keypad_cursor_flag},#{keypad_flag} origin=#{origin_flag}",
        ])
        .trim()
        .to_string()
    }
}

/// A program that prints a primary screen, waits for `go`, sends `modes` and `MODES-ON`, and
/// then sleeps.
fn modes_program(env: &Env, modes: &str) -> String {
    let go = env.path("go");
    let modes_path = env.path("modes");
    std::fs::write(&modes_path, modes).expect("write the modes");
    let program = format!(
        r#"
import os, sys, time
def out(s):
    sys.stdout.write(s)
    sys.stdout.flush()
out("line-1\r\nline-2\r\nline-3\r\n")
while not os.path.exists({go:?}):
    time.sleep(0.05)
out(open({modes:?}).read() + "MODES-ON")
time.sleep(600)
"#,
        go = go.display().to_string(),
        modes = modes_path.display().to_string(),
    );
    let path = env.path("modes.py");
    std::fs::write(&path, program).expect("write the program");
    path.display().to_string()
}

/// Attaches to `app` from a shell in tmux once `attach` exists; after the client ends the
/// shell prints `after: qqq`, which a DEC graphics character set left in G0 would draw as
/// line characters.
fn attach_once(env: &Env, name: &str) -> Tmux {
    let script = format!(
        "{}; \"$BELFRY_BIN\" attach app; echo 'after: qqq'; sleep 600",
        wait_for_file(&env.path("attach"))
    );
    Tmux::start(env, name, &script)
}

#[test]
fn detach_resets_exactly_the_modes_the_pane_turned_on_in_a_real_terminal() {
    let env = Env::new();
    // Everything a full-screen program may leave on: the alternate screen, a scroll region,
    // autowrap off, insert mode, DEC graphics in G0, modifyOtherKeys, a kitty keyboard push,
    // button mouse tracking in SGR, bracketed paste, focus events, application cursor keys
    // and keypad, a hidden bar cursor.
    let modes = "\x1b[?1049h\x1b[3;20r\x1b[?7l\x1b[4h\x1b(0\x1b[>4;2m\x1b[>1u\x1b[?1002h\
                 \x1b[?1006h\x1b[?2004h\x1b[?1004h\x1b[?1h\x1b=\x1b[?25l\x1b[5 q";
    let program = modes_program(&env, modes);
    env.spawn("app", "24x80", &["python3", &program], Some("line-3"));
    let tmux = attach_once(&env, "restore");
    let before = tmux.modes();
    std::fs::write(env.path("attach"), "").expect("touch attach");
    assert!(eventually(Duration::from_secs(5), || env.snapshot("app")
        ["clients"]
        == 1));
    std::fs::write(env.path("go"), "").expect("touch go");
    env.wait_screen("app", "MODES-ON");
    // The modes reached tmux: the pane really changed its outer terminal.
    assert!(
        eventually(Duration::from_secs(5), || {
            tmux.modes()
                == "alternate=1 cursor=0 insert=1 wrap=0 region=2,19 mouse=1,0,1,0,1,0 \
                keypad=1,1 origin=0"
        }),
        "tmux while attached: {}",
        tmux.modes()
    );
    env.ok(&["detach", "app"]);
    assert!(
        eventually(Duration::from_secs(5), || tmux
            .lines()
            .iter()
            .any(|line| line == "after: qqq")),
        "{:#?}",
        tmux.lines()
    );
    assert_eq!(tmux.modes(), before, "tmux's modes after detach");
    let lines = tmux.lines();
    assert!(
        lines.iter().any(|line| line == "[detached from app]"),
        "{lines:#?}"
    );
}

#[test]
fn detach_after_the_pane_left_the_alternate_screen_keeps_the_cursor_below_its_output() {
    let env = Env::new();
    // The program visits the alternate screen and comes back, as `less` does, then prints on.
    let program = modes_program(
        &env,
        "\x1b[?1049h\x1b[HFULL-SCREEN\x1b[?1049lafter-alt-1\r\nafter-alt-2\r\n",
    );
    env.spawn("app", "24x80", &["python3", &program], Some("line-3"));
    let tmux = attach_once(&env, "primary");
    let before = tmux.modes();
    std::fs::write(env.path("attach"), "").expect("touch attach");
    assert!(eventually(Duration::from_secs(5), || env.snapshot("app")
        ["clients"]
        == 1));
    std::fs::write(env.path("go"), "").expect("touch go");
    env.wait_screen("app", "MODES-ON");
    assert_tmux_shows_the_model(&env, &tmux, "app", "before detach");
    env.ok(&["detach", "app"]);
    assert!(
        eventually(Duration::from_secs(5), || tmux
            .lines()
            .iter()
            .any(|line| line == "after: qqq")),
        "{:#?}",
        tmux.lines()
    );
    // What the pane printed is still there, and the client's last words come after it.
    let lines = tmux.lines();
    let row = |text: &str| lines.iter().position(|line| line.starts_with(text));
    let detached = row("[detached from app]");
    assert!(
        row("after-alt-1").is_some() && row("after-alt-2") < detached,
        "{lines:#?}"
    );
    assert!(
        row("MODES-ON").is_some_and(|r| Some(r) < detached),
        "{lines:#?}"
    );
    assert_eq!(tmux.modes(), before, "tmux's modes after detach");
}

/// Types raw bytes into tmux's pane, as a terminal that encodes keys that way would send them.
fn type_bytes(tmux: &Tmux, bytes: &[u8]) {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut args = vec!["send-keys", "-t", "t", "-H"];
    args.extend(hex.iter().map(String::as_str));
    tmux.run(&args);
}

#[test]
fn the_detach_key_works_under_kitty_keyboard_and_modify_other_keys_in_a_real_terminal() {
    let env = Env::new();
    // The program asks for the kitty keyboard protocol and modifyOtherKeys, so the user's
    // terminal sends Ctrl-b as `ESC[98;5u` or `ESC[27;5;98~` rather than 0x02.
    env.spawn(
        "app",
        "24x80",
        &[
            "sh",
            "-c",
            "printf '\\033[>1u\\033[>4;2mKEYS-ON\\n'; sleep 600",
        ],
        Some("KEYS-ON"),
    );
    // The shell waits for Enter between the two attaches: the second one's redraw clears the
    // screen, and the first one's result must be read before it does.
    let script = "\"$BELFRY_BIN\" attach app; echo \"FIRST=$?\"; read again; \
                  \"$BELFRY_BIN\" attach app; echo \"SECOND=$?\"; sleep 600";
    let tmux = Tmux::start(&env, "keys", script);
    let shows = |text: &str| {
        eventually(Duration::from_secs(10), || {
            tmux.lines().iter().any(|line| line.contains(text))
        })
    };
    // kitty reporting every key sends `d` as `ESC[100u`; modifyOtherKeys sends it plain.
    for (encoding, prefix, then, done) in [
        ("kitty", &b"\x1b[98;5u"[..], &b"\x1b[100u"[..], "FIRST=0"),
        ("modifyOtherKeys", b"\x1b[27;5;98~", b"d", "SECOND=0"),
    ] {
        assert!(eventually(Duration::from_secs(5), || env.snapshot("app")
            ["clients"]
            == 1));
        assert!(shows("KEYS-ON"), "{encoding}: {:#?}", tmux.lines());
        type_bytes(&tmux, prefix);
        type_bytes(&tmux, then);
        assert!(shows(done), "{encoding}: {:#?}", tmux.lines());
        if done == "FIRST=0" {
            assert!(tmux
                .lines()
                .iter()
                .any(|line| line == "[detached from app]"));
            type_bytes(&tmux, b"\r");
        }
    }
    assert!(tmux
        .lines()
        .iter()
        .any(|line| line == "[detached from app]"));
}

#[test]
fn prefix_prefix_sends_the_prefix_and_an_unbound_key_is_swallowed_in_a_real_terminal() {
    let env = Env::new();
    let log = env.path("keys.log");
    let recorder = belfry_tests::recorder_bin().display().to_string();
    let log_arg = log.display().to_string();
    env.spawn(
        "app",
        "24x80",
        &[&recorder, "--log", &log_arg],
        Some("READY"),
    );
    let tmux = Tmux::start(&env, "prefix", "\"$BELFRY_BIN\" attach app; sleep 600");
    assert!(eventually(Duration::from_secs(10), || env.snapshot("app")
        ["clients"]
        == 1));
    let logged = || std::fs::read(&log).unwrap_or_default();
    // C-b C-b: the pane receives 0x02 once.
    type_bytes(&tmux, b"\x02\x02a");
    assert!(
        eventually(Duration::from_secs(10), || logged() == b"\x02a"),
        "after C-b C-b a: {:?}",
        logged()
    );
    // C-b x (unbound): nothing reaches the pane; a message on the last line says so.
    type_bytes(&tmux, b"\x02x");
    assert!(
        eventually(Duration::from_secs(10), || tmux.lines()[23]
            == "C-b x is not bound; C-b ? lists the bindings"),
        "{:#?}",
        tmux.lines()
    );
    // The next key reaches the pane, and the redraw it asks for paints the pane's line back.
    type_bytes(&tmux, b"z");
    assert!(
        eventually(Duration::from_secs(10), || logged() == b"\x02az"),
        "after C-b x z: {:?}",
        logged()
    );
    assert_tmux_shows_the_model(&env, &tmux, "app", "after the message");
    // C-b ? shows the bindings the same way.
    type_bytes(&tmux, b"\x02?");
    assert!(
        eventually(Duration::from_secs(10), || {
            // Wider than 80 columns: wrapped over the last two rows, at a blank (dropped).
            let lines = tmux.lines();
            format!("{} {}", lines[22], lines[23])
                == "C-b: d detach, [ history, ] paste, s panes, n next, p prev, S status, C-b send \
                    C-b, ? help"
        }),
        "{:#?}",
        tmux.lines()
    );
    assert_tmux_shows_the_model(&env, &tmux, "app", "after the message times out");
    assert_eq!(logged(), b"\x02az");
}

#[test]
fn two_writable_clients_answer_a_query_once_from_the_most_recently_active_one() {
    let env = Env::new();
    let log = env.path("answers.log");
    let recorder = belfry_tests::recorder_bin().display().to_string();
    let log_arg = log.display().to_string();
    env.spawn(
        "app",
        "24x80",
        &[&recorder, "--log", &log_arg, "--da1-on-q"],
        Some("READY"),
    );
    let script = "\"$BELFRY_BIN\" attach app; sleep 600";
    let first = Tmux::start(&env, "first", script);
    assert!(eventually(Duration::from_secs(10), || env.snapshot("app")
        ["clients"]
        == 1));
    let second = Tmux::start(&env, "second", script);
    assert!(eventually(Duration::from_secs(10), || env.snapshot("app")
        ["clients"]
        == 2));
    let logged = || String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    // Each `q` makes the program ask for the device attributes; both terminals (two tmux
    // servers) see the query and answer, and exactly one answer reaches the program.
    let answers = |log: &str| log.matches("\x1b[?").count();
    for (n, typist) in [(1, &second), (2, &first), (3, &first)] {
        type_bytes(typist, b"q");
        assert!(
            eventually(Duration::from_secs(10), || answers(&logged()) >= n),
            "answer {n}: {:?}",
            logged()
        );
        // A second answer, had it been let through, arrives within the same moments.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(answers(&logged()), n, "{:?}", logged());
    }
    assert_eq!(logged().matches('q').count(), 3, "{:?}", logged());
}

/// spec §5 and docs/attach.md: `prefix [` opens the pane's history (its model's scrollback,
/// not the outer terminal's), searched with `?`; `q` puts the pane back exactly; `prefix s`
/// chooses another pane (vim, in its alternate screen) and `prefix p` goes back; a detach and
/// a re-attach show the pane as its model holds it. Checked in a real tmux.
#[test]
fn history_view_pane_chooser_and_next_previous_in_a_real_terminal() {
    let env = Env::new();
    env.spawn(
        "one",
        "24x80",
        &["sh", "-c", "seq 1 300; echo ONE-READY; sleep 600"],
        Some("ONE-READY"),
    );
    let file = env.path("notes.txt");
    std::fs::write(&file, "first line of the file\nVIM-READY\n").expect("write the file");
    let vim = format!("exec vim -u NONE -N -n -i NONE '{}'", file.display());
    env.spawn("two", "24x80", &["sh", "-c", &vim], Some("VIM-READY"));
    let script = "\"$BELFRY_BIN\" attach one; echo \"EXIT=$?\"; read again; \
                  \"$BELFRY_BIN\" attach one; sleep 600";
    let tmux = Tmux::start(&env, "views", script);
    let clients = |session: &str| env.snapshot(session)["clients"].as_u64();
    assert!(eventually(Duration::from_secs(10), || clients("one") == Some(1)));
    assert_tmux_shows_the_model(&env, &tmux, "one", "attached");

    // History: it opens at the end, with a status line; `?150` finds that line, long
    // scrolled off the screen, and brings it to the top.
    type_bytes(&tmux, b"\x02[");
    assert!(
        eventually(Duration::from_secs(10), || tmux.lines()[23]
            .starts_with("[history] lines")),
        "{:#?}",
        tmux.lines()
    );
    let revision = env.snapshot("one")["revision"].clone();
    type_bytes(&tmux, b"?150\r");
    assert!(
        eventually(Duration::from_secs(10), || tmux.lines()[0] == "150"
            && tmux.lines()[1] == "151"),
        "after ?150: {:#?}",
        tmux.lines()
    );
    // `q` leaves; the view's keys never reached the pane.
    type_bytes(&tmux, b"q");
    assert_tmux_shows_the_model(&env, &tmux, "one", "after leaving the history view");
    // A key reaching the pane would be echoed by its terminal and move the revision.
    assert_eq!(
        env.snapshot("one")["revision"],
        revision,
        "a view key reached the pane"
    );

    // The chooser lists both panes, the current one marked; j and Enter switch to two.
    type_bytes(&tmux, b"\x02s");
    assert!(
        eventually(Duration::from_secs(10), || {
            let lines = tmux.lines();
            lines[0].starts_with("choose a pane")
                && lines[1].starts_with("* one")
                && lines[2].starts_with("  two")
        }),
        "{:#?}",
        tmux.lines()
    );
    // `/` filters by name: only two is left; Escape drops the filter, both are back.
    type_bytes(&tmux, b"/TW");
    assert!(
        eventually(Duration::from_secs(10), || {
            let lines = tmux.lines();
            lines[0].starts_with("filter: TW_  (1 of 2 panes") && lines[1].starts_with("  two")
        }),
        "{:#?}",
        tmux.lines()
    );
    type_bytes(&tmux, b"\x1b");
    assert!(
        eventually(Duration::from_secs(10), || {
            let lines = tmux.lines();
            lines[0].starts_with("choose a pane") && lines[2].starts_with("  two")
        }),
        "{:#?}",
        tmux.lines()
    );
    type_bytes(&tmux, b"j\r");
    assert!(
        eventually(Duration::from_secs(10), || clients("two") == Some(1)
            && clients("one") == Some(0)),
        "after choosing two: one has {:?} clients, two {:?}",
        clients("one"),
        clients("two")
    );
    assert_tmux_shows_the_model(&env, &tmux, "two", "after switching to vim");
    assert!(
        tmux.state().alternate,
        "vim's alternate screen: {:?}",
        tmux.state()
    );

    // prefix p goes back (round the end of the list: one is before two), and leaves vim's
    // alternate screen behind with its pane.
    type_bytes(&tmux, b"\x02p");
    assert!(
        eventually(Duration::from_secs(10), || clients("one") == Some(1)
            && clients("two") == Some(0)),
        "after prefix p: {:#?}",
        tmux.lines()
    );
    assert_tmux_shows_the_model(&env, &tmux, "one", "after prefix p");
    assert!(!tmux.state().alternate, "{:?}", tmux.state());

    // Detach, then re-attach: the pane as the model holds it.
    type_bytes(&tmux, b"\x02d");
    assert!(
        eventually(Duration::from_secs(10), || {
            let lines = tmux.lines();
            lines.iter().any(|l| l == "[detached from one]") && lines.iter().any(|l| l == "EXIT=0")
        }),
        "{:#?}",
        tmux.lines()
    );
    type_bytes(&tmux, b"\r");
    assert!(eventually(Duration::from_secs(10), || clients("one") == Some(1)));
    assert_tmux_shows_the_model(&env, &tmux, "one", "after re-attaching");
}

/// docs/attach.md (size policies): a client smaller than the pane (here a read-only watcher,
/// which never sizes the pane) is shown the part of the screen around the cursor, with a line
/// saying what is shown, and follows the pane's changes; nothing is drawn past its edges.
#[test]
fn a_client_smaller_than_the_pane_sees_the_part_around_the_cursor_in_a_real_terminal() {
    let env = Env::new();
    let go = env.path("go");
    let program = format!(
        "for i in $(seq -w 1 39); do printf 'row-%s %0110d\\n' $i 0; done; printf 'row-40 end'; \
         {}; printf '\\r\\nrow-41 after'; sleep 600",
        wait_for_file(&go)
    );
    env.spawn("big", "40x120", &["sh", "-c", &program], Some("row-40 end"));
    let tmux = Tmux::start(
        &env,
        "crop",
        "\"$BELFRY_BIN\" attach --read-only big; sleep 600",
    );
    let expected = |last: u64| -> Vec<String> {
        // 23 rows of the pane end at the cursor's row; the columns start at the left.
        let lines = env.lines("big");
        let last = usize::try_from(last).expect("row");
        let mut shown: Vec<String> = lines[last + 1 - 23..=last]
            .iter()
            .map(|line| {
                line.chars()
                    .take(80)
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect();
        shown.push(format!(
            "[pane 40x120, this terminal 24x80: rows {}-{} and columns 1-80 shown]",
            last + 1 - 22,
            last + 1
        ));
        shown
    };
    let cursor_row = |env: &Env| env.snapshot("big")["cursor"]["row"].as_u64().expect("row");
    assert!(
        eventually(Duration::from_secs(10), || tmux.lines()
            == expected(cursor_row(&env))),
        "tmux shows {:#?}\nexpected {:#?}",
        tmux.lines(),
        expected(cursor_row(&env))
    );
    assert_eq!(
        env.snapshot("big")["size"]["rows"],
        40,
        "the watcher resized the pane"
    );
    // New output scrolls the pane; the watcher follows it.
    std::fs::write(&go, "").expect("go");
    env.wait_screen("big", "row-41 after");
    assert!(
        eventually(Duration::from_secs(10), || tmux.lines()
            == expected(cursor_row(&env))),
        "after more output tmux shows {:#?}\nexpected {:#?}",
        tmux.lines(),
        expected(cursor_row(&env))
    );
    assert!(tmux.lines()[22].starts_with("row-41 after"));
}

/// docs/attach.md: a colour query the program makes while no client is attached is answered
/// with the last attached terminal's colours (learned from the client's own query on attach),
/// not a fixed black. The terminal is a real tmux whose window style sets the background.
#[test]
fn a_colour_query_while_detached_gets_the_last_attached_terminals_colour() {
    let env = Env::new();
    // Asks for the background (OSC 11, BEL-terminated: the answer is 24 bytes) once `go`
    // exists, and prints the answer without its control bytes.
    let query = |go: &Path| {
        format!(
            "{}; stty raw -echo; printf '\\033]11;?\\007'; ans=$(dd bs=1 count=24 2>/dev/null); \
             stty sane; printf 'BG:%s\\n' \"$(printf '%s' \"$ans\" | tr -d '\\033\\007')\"; \
             sleep 600",
            wait_for_file(go)
        )
    };
    // Never attached: the model's own default.
    let now = env.path("now");
    std::fs::write(&now, "").expect("touch now");
    env.spawn("never", "24x80", &["sh", "-c", &query(&now)], None);
    env.wait_screen("never", "BG:]11;rgb:0000/0000/0000");

    let go = env.path("go");
    env.spawn("app", "24x80", &["sh", "-c", &query(&go)], None);
    let attach = env.path("attach");
    let script = format!(
        "{}; \"$BELFRY_BIN\" attach app; sleep 600",
        wait_for_file(&attach)
    );
    let tmux = Tmux::start(&env, "colours", &script);
    tmux.run(&["set", "-g", "window-style", "bg=#282c34"]);
    std::fs::write(&attach, "").expect("touch attach");
    assert!(eventually(Duration::from_secs(10), || env.snapshot("app")
        ["clients"]
        == 1));
    // The client looks for its terminal's answer for 2 s after attaching (a local tmux
    // answers at once); only then does it leave.
    std::thread::sleep(Duration::from_millis(2500));
    env.ok(&["detach", "app"]);
    assert!(eventually(Duration::from_secs(10), || env.snapshot("app")
        ["clients"]
        == 0));
    std::fs::write(&go, "").expect("touch go");
    env.wait_screen("app", "BG:]11;rgb:2828/2c2c/3434");
}

impl Tmux {
    /// Whether any mouse tracking mode is on in tmux's pane.
    fn mouse_on(&self) -> bool {
        self.run(&["display", "-p", "-t", "t", "#{mouse_any_flag}"])
            .trim()
            .eq("1")
    }
}

/// Issue 46, defect 3: a watcher that becomes the smaller client while the program has mouse
/// tracking on is shown cropped redraws, not the program's output; the program turning the
/// mouse off must still turn it off in the watcher's terminal, or a click there types
/// `0;10;5M` into the shell.
#[test]
fn no_mouse_mode_survives_the_program_in_a_cropped_view() {
    let env = Env::new();
    let go = env.path("go");
    let program = format!(
        "printf '\\033[?1000h\\033[?1006h\\033[?1004hMOUSE-ON\\r\\n'; {}; \
         printf '\\033[?1000l\\033[?1006l\\033[?1004lMOUSE-OFF\\r\\n'; sleep 600",
        wait_for_file(&go)
    );
    env.spawn("app", "24x80", &["sh", "-c", &program], Some("MOUSE-ON"));
    let tmux = Tmux::start(
        &env,
        "cropmouse",
        "\"$BELFRY_BIN\" attach --read-only app; sleep 600",
    );
    assert!(
        eventually(Duration::from_secs(10), || tmux.mouse_on()),
        "the full view never turned the mouse on: {:#?}",
        tmux.lines()
    );
    // The watcher's terminal shrinks: it becomes the smaller client and is shown the
    // cropped view from now on.
    tmux.run(&["resize-window", "-t", "t", "-x", "70", "-y", "20"]);
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[pane 24x80, this terminal 20x70"))),
        "no cropped view: {:#?}",
        tmux.lines()
    );
    std::fs::write(&go, "").expect("touch go");
    env.wait_screen("app", "MOUSE-OFF");
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line == "MOUSE-OFF")),
        "the cropped view never showed the program's last output: {:#?}",
        tmux.lines()
    );
    assert!(
        eventually(Duration::from_secs(3), || !tmux.mouse_on()),
        "mouse tracking is still on in the watcher's terminal: {}",
        tmux.modes()
    );
}

impl Tmux {
    /// How many lines tmux's pane holds in its own history (scrolled off its screen).
    fn history_size(&self) -> u64 {
        let out = self.run(&["display", "-p", "-t", "t", "#{history_size}"]);
        out.trim().parse().expect("tmux prints a number")
    }

    /// tmux's pane title (what the program in it set last).
    fn title(&self) -> String {
        self.run(&["display", "-p", "-t", "t", "#{pane_title}"])
            .trim_end_matches('\n')
            .to_string()
    }
}

/// A pane that prints a numbered tick ten times a second, forever.
fn ticking(env: &Env, name: &str, size: &str) {
    env.spawn(
        name,
        size,
        &[
            "sh",
            "-c",
            "i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.1; done",
        ],
        Some("tick-3"),
    );
}

/// Issue 46, defect 2: a read-only watcher smaller than a pane ticking ten times a second is
/// redrawn after every tick; the redraws are painted in place, so the outer terminal's own
/// history does not grow (before: every frame's clear pushed a screen into it, 1,350 lines
/// in 5 s).
#[test]
fn a_cropped_view_leaves_the_outer_terminals_history_alone() {
    let env = Env::new();
    ticking(&env, "tick", "30x100");
    let tmux = Tmux::start(
        &env,
        "crophist",
        "\"$BELFRY_BIN\" attach --read-only tick; sleep 600",
    );
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[pane 30x100, this terminal 24x80"))),
        "no cropped view: {:#?}",
        tmux.lines()
    );
    // The redraw on attach may push what was there before; from here on nothing may.
    std::thread::sleep(Duration::from_millis(500));
    let before = tmux.history_size();
    let first = tmux.lines();
    std::thread::sleep(Duration::from_secs(3));
    assert_ne!(tmux.lines(), first, "the watcher did not follow the ticks");
    let grown = tmux.history_size() - before;
    assert_eq!(
        grown, 0,
        "the outer terminal's history grew by {grown} lines"
    );
}

/// Issue 46, defect 2: the history view and the pane chooser are drawn on the outer
/// terminal's alternate screen: paging the history view and moving in the chooser, over a
/// pane that keeps printing, add no line to the outer terminal's history (before: every
/// frame's clear pushed a screen into it), and leaving them gives the pane's screen back.
#[test]
fn the_history_view_and_the_chooser_leave_the_outer_terminals_history_alone() {
    let env = Env::new();
    env.spawn(
        "lines",
        "24x80",
        &["sh", "-c", "seq 1 500; echo LINES-READY; sleep 600"],
        Some("LINES-READY"),
    );
    ticking(&env, "other", "24x80");
    let tmux = Tmux::start(&env, "viewhist", "\"$BELFRY_BIN\" attach lines; sleep 600");
    assert_tmux_shows_the_model(&env, &tmux, "lines", "attached");
    let before = tmux.history_size();
    tmux.run(&["send-keys", "-t", "t", "C-b", "["]);
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[history] lines"))),
        "no history view: {:#?}",
        tmux.lines()
    );
    for _ in 0..10 {
        tmux.run(&["send-keys", "-t", "t", "PPage"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        eventually(Duration::from_secs(5), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[history] lines 250-272"))),
        "paging did not reach lines 250-272: {:#?}",
        tmux.lines()
    );
    assert_eq!(
        tmux.history_size() - before,
        0,
        "paging the history view pushed lines into the outer terminal's history"
    );
    tmux.run(&["send-keys", "-t", "t", "q"]);
    assert_tmux_shows_the_model(&env, &tmux, "lines", "after the history view");
    let before = tmux.history_size();
    tmux.run(&["send-keys", "-t", "t", "C-b", "s"]);
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("choose a pane"))),
        "no chooser: {:#?}",
        tmux.lines()
    );
    for key in ["Down", "Up", "Down", "Up"] {
        tmux.run(&["send-keys", "-t", "t", key]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        tmux.history_size() - before,
        0,
        "the chooser pushed lines into the outer terminal's history"
    );
    tmux.run(&["send-keys", "-t", "t", "Escape"]);
    assert_tmux_shows_the_model(&env, &tmux, "lines", "after the chooser");
}

/// Issue 46, defect 4: attaching to a pane that set no title and no cursor shape leaves the
/// outer terminal's title alone (before: the redraw set an empty one), a pane's own title is
/// shown while attached, and detach gives back the title the terminal had.
#[test]
fn attach_and_detach_leave_the_outer_terminals_title_as_it_was() {
    let env = Env::new();
    env.spawn(
        "plain",
        "24x80",
        &["sh", "-c", "echo PLAIN-READY; sleep 600"],
        Some("PLAIN-READY"),
    );
    env.spawn(
        "titled",
        "24x80",
        &[
            "sh",
            "-c",
            "printf '\\033]2;PANE-TITLE\\007'; echo TITLED-READY; sleep 600",
        ],
        Some("TITLED-READY"),
    );
    let second = env.path("second");
    let script = format!(
        "printf '\\033]2;USER-TITLE\\007'; \"$BELFRY_BIN\" attach plain; {}; \
         \"$BELFRY_BIN\" attach titled; echo BOTH-DONE; sleep 600",
        wait_for_file(&second)
    );
    let tmux = Tmux::start(&env, "title", &script);
    assert!(eventually(Duration::from_secs(10), || env
        .snapshot("plain")["clients"]
        == 1));
    assert_tmux_shows_the_model(&env, &tmux, "plain", "attached to plain");
    assert_eq!(
        tmux.title(),
        "USER-TITLE",
        "attaching to plain changed the title"
    );
    env.ok(&["detach", "plain"]);
    assert!(eventually(Duration::from_secs(10), || tmux
        .lines()
        .iter()
        .any(|line| line == "[detached from plain]")));
    assert_eq!(tmux.title(), "USER-TITLE", "after detaching from plain");
    std::fs::write(&second, "").expect("touch second");
    assert!(
        eventually(Duration::from_secs(10), || tmux.title() == "PANE-TITLE"),
        "the pane's own title is not shown while attached: {:?}",
        tmux.title()
    );
    env.ok(&["detach", "titled"]);
    assert!(eventually(Duration::from_secs(10), || tmux
        .lines()
        .iter()
        .any(|line| line == "BOTH-DONE")));
    assert_eq!(tmux.title(), "USER-TITLE", "after detaching from titled");
    assert!(
        !tmux.state().alternate,
        "detach left the alternate screen on"
    );
}

/// Issue 46, defect 6: a watcher shown the cropped view of a larger pane leaves no crop line
/// behind when it detaches (before: `[pane 30x100, this terminal 24x80: …]` stayed on the
/// last row under the shell's prompt).
#[test]
fn the_crop_line_goes_with_the_client() {
    let env = Env::new();
    ticking(&env, "tick", "30x100");
    let tmux = Tmux::start(
        &env,
        "cropgone",
        "\"$BELFRY_BIN\" attach --read-only tick; echo CLIENT-GONE; sleep 600",
    );
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[pane 30x100"))),
        "no cropped view: {:#?}",
        tmux.lines()
    );
    env.ok(&["detach", "tick"]);
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line == "CLIENT-GONE")),
        "{:#?}",
        tmux.lines()
    );
    let lines = tmux.lines();
    assert!(
        !lines.iter().any(|line| line.contains("[pane 30x100")),
        "the crop line stayed: {lines:#?}"
    );
}

/// Issue 46, defect 3, in belfry's own views: while the history view is open over a pane that
/// has mouse tracking on, the mouse is off in the outer terminal (a click would arrive as keys
/// the view cannot read), and leaving the view turns on again what the pane has.
#[test]
fn no_mouse_mode_is_on_while_a_view_is_open() {
    let env = Env::new();
    env.spawn(
        "app",
        "24x80",
        &[
            "sh",
            "-c",
            "printf '\\033[?1002h\\033[?1006hMOUSE-ON\\r\\n'; sleep 600",
        ],
        Some("MOUSE-ON"),
    );
    let tmux = Tmux::start(&env, "viewmouse", "\"$BELFRY_BIN\" attach app; sleep 600");
    assert!(
        eventually(Duration::from_secs(10), || tmux.mouse_on()),
        "the pane's mouse mode never reached tmux: {:#?}",
        tmux.lines()
    );
    tmux.run(&["send-keys", "-t", "t", "C-b", "["]);
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[history] lines"))),
        "no history view: {:#?}",
        tmux.lines()
    );
    assert!(
        !tmux.mouse_on(),
        "mouse tracking is on under the history view: {}",
        tmux.modes()
    );
    tmux.run(&["send-keys", "-t", "t", "q"]);
    assert_tmux_shows_the_model(&env, &tmux, "app", "after the history view");
    assert!(
        eventually(Duration::from_secs(5), || tmux.mouse_on()),
        "leaving the view did not give the pane its mouse mode back: {}",
        tmux.modes()
    );
}
