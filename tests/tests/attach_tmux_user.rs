//! Issue 46, what a tmux user reached for, checked in a real terminal (tmux as the outer
//! terminal, its screen, history and paste buffers read with capture-pane, display and
//! show-buffer): the status line under the pane (drawn on the last row with the pane's name and
//! the clock, the pane given the rows above it and painted from its model, the outer terminal's
//! history left alone while the pane prints, `prefix S` giving the row back), and copy mode
//! (a selection in the history view copied to the outer terminal's clipboard through OSC 52
//! and pasted back with `prefix ]`).

use std::process::{Command, Output};
use std::time::Duration;

use belfry_tests::{eventually, Env};

/// A tmux server of its own at 80x24 with no status line of its own, running `script`.
struct Tmux {
    socket: String,
    vars: Vec<(String, String)>,
}

impl Tmux {
    fn start(env: &Env, name: &str, script: &str) -> Tmux {
        let conf = env.path("tmux.conf");
        // The clipboard is on, so an OSC 52 from the client sets a tmux paste buffer.
        std::fs::write(&conf, "set -g status off\nset -s set-clipboard on\n")
            .expect("write tmux.conf");
        let tmux = Tmux {
            socket: format!("belfry-test-{}-{name}", std::process::id()),
            vars: env.vars(),
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

    /// The 24 rows of the outer terminal, trailing blanks cut.
    fn lines(&self) -> Vec<String> {
        self.run(&["capture-pane", "-p", "-t", "t"])
            .lines()
            .map(|l| l.trim_end().to_string())
            .chain(std::iter::repeat(String::new()))
            .take(24)
            .collect()
    }

    fn history_size(&self) -> u64 {
        let out = self.run(&["display", "-p", "-t", "t", "#{history_size}"]);
        out.trim().parse().expect("tmux prints a number")
    }

    /// Types `bytes` into the outer terminal as they are.
    fn bytes(&self, bytes: &[u8]) {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut args = vec!["send-keys", "-t", "t", "-H"];
        args.extend(hex.iter().map(String::as_str));
        self.run(&args);
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run_with_conf("/dev/null", &["kill-server"]);
    }
}

/// Whether `line` is the status line of pane `name`: its name first, a clock last.
fn is_status_line(line: &str, name: &str) -> bool {
    let clock = line.len() >= 5 && {
        let tail = &line.as_bytes()[line.len() - 5..];
        tail[2] == b':'
            && tail
                .iter()
                .enumerate()
                .all(|(i, b)| i == 2 || b.is_ascii_digit())
    };
    line.starts_with(&format!("[{name}]")) && clock
}

/// `status on` in the config: the last row is the status line (the pane's name, its state, the
/// clock), the pane has 23 rows, its screen is the rows above the line cell for cell, a pane
/// printing 300 lines adds nothing to the outer terminal's history and leaves the line in
/// place; `C-b S` gives the row back to the pane and `C-b d` leaves no status line behind.
#[test]
fn the_status_line_takes_the_last_row_and_the_pane_the_rows_above_it() {
    let env = Env::new();
    let dir = env.path("xdg-config").join("belfry");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.kdl"), "attach {\n  status on\n}\n").unwrap();
    env.ok(&["new", "inner", "--env", "PS1=inner$ ", "--", "sh", "-i"]);
    env.wait_screen("inner", "inner\\$");
    let tmux = Tmux::start(
        &env,
        "status",
        "\"$BELFRY_BIN\" attach inner; echo \"ATTACH-EXIT=$?\"; sleep 600",
    );
    assert!(
        eventually(Duration::from_secs(10), || is_status_line(
            &tmux.lines()[23],
            "inner"
        )),
        "no status line on the last row: {:#?}",
        tmux.lines()
    );
    assert!(tmux.lines()[23].contains("running"), "{:#?}", tmux.lines());
    // The pane was given the rows above the line.
    tmux.keys(&["stty size", "Enter"]);
    env.wait_screen("inner", "(?m)^23 80$");
    // The pane prints more than a screen: the outer terminal's history stays as it was, the
    // rows above the line are the pane's screen and the line stays.
    std::thread::sleep(Duration::from_millis(500));
    let before = tmux.history_size();
    tmux.keys(&["seq 1 300; echo SEQ-DONE", "Enter"]);
    env.wait_screen("inner", "(?m)^SEQ-DONE");
    let same = || {
        let model: Vec<String> = env
            .lines("inner")
            .iter()
            .map(|l| l.trim_end().to_string())
            .collect();
        tmux.lines()[..23] == model[..23]
    };
    assert!(
        eventually(Duration::from_secs(5), same),
        "the rows above the line are not the pane's screen: {:#?} against {:#?}",
        tmux.lines(),
        env.lines("inner")
    );
    let grown = tmux.history_size() - before;
    assert_eq!(
        grown, 0,
        "the outer terminal's history grew by {grown} lines"
    );
    assert!(
        is_status_line(&tmux.lines()[23], "inner"),
        "{:#?}",
        tmux.lines()
    );
    // C-b S: the line goes and the pane has every row again.
    tmux.keys(&["C-b", "S"]);
    tmux.keys(&["clear; stty size", "Enter"]);
    env.wait_screen("inner", "(?m)^24 80$");
    assert!(
        eventually(Duration::from_secs(5), || !tmux
            .lines()
            .iter()
            .any(|line| is_status_line(line, "inner"))),
        "the status line stayed: {:#?}",
        tmux.lines()
    );
    // On again, then detach: the line is erased on the way out.
    tmux.keys(&["C-b", "S"]);
    assert!(
        eventually(Duration::from_secs(10), || is_status_line(
            &tmux.lines()[23],
            "inner"
        )),
        "no status line after C-b S: {:#?}",
        tmux.lines()
    );
    tmux.keys(&["C-b", "d"]);
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.contains("ATTACH-EXIT=0"))),
        "{:#?}",
        tmux.lines()
    );
    assert!(
        !tmux
            .lines()
            .iter()
            .any(|line| is_status_line(line, "inner")),
        "the status line outlived the client: {:#?}",
        tmux.lines()
    );
}

/// Copy mode: in the history view (`C-b [`) a search puts the cursor on a line, `v` starts
/// the selection and `$` `y` takes it to the line's end; the text reaches the outer terminal's
/// clipboard through OSC 52 (tmux's paste buffer, with `set-clipboard on`), and `C-b ]` types
/// it into the pane, between the bracketed paste markers once the program asked for them.
#[test]
fn a_selection_in_the_history_view_is_copied_through_osc_52_and_pasted_back() {
    let env = Env::new();
    env.ok(&["new", "inner", "--env", "PS1=inner$ ", "--", "sh", "-i"]);
    env.wait_screen("inner", "inner\\$");
    let tmux = Tmux::start(
        &env,
        "copy",
        "\"$BELFRY_BIN\" attach inner; echo \"ATTACH-EXIT=$?\"; sleep 600",
    );
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.contains("inner$"))),
        "{:#?}",
        tmux.lines()
    );
    tmux.keys(&["echo 'COPY-ME: caf\u{e9} 42'; seq 1 40", "Enter"]);
    env.wait_screen("inner", "(?m)^40$");
    // C-b [, search up for the line, select it to its end, copy.
    tmux.bytes(b"\x02[");
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[history]"))),
        "no history view: {:#?}",
        tmux.lines()
    );
    tmux.bytes(b"?COPY-ME\r");
    tmux.bytes(b"v$y");
    let buffer = || {
        let out = tmux.run_with_conf("/dev/null", &["show-buffer"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        eventually(Duration::from_secs(10), || buffer()
            == "COPY-ME: caf\u{e9} 42"),
        "tmux's buffer after the copy: {:?}",
        buffer()
    );
    // The view closed on the copy: the pane is back.
    assert!(
        eventually(Duration::from_secs(10), || !tmux
            .lines()
            .iter()
            .any(|line| line.starts_with("[history]"))),
        "{:#?}",
        tmux.lines()
    );
    // A program that asked for bracketed paste gets the text between the markers.
    tmux.keys(&["printf '\\033[?2004h'; cat -v", "Enter"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux.bytes(b"\x02]");
    tmux.keys(&["Enter"]);
    env.wait_screen(
        "inner",
        "\\^\\[\\[200~COPY-ME: caf(M-C\\)M-\\)|\u{e9}) 42\\^\\[\\[201~",
    );
}

/// Activity in the chooser: a pane that printed since this client last looked at it is marked
/// `#`; one that did nothing, and the pane attached to, are not.
#[test]
fn the_chooser_marks_a_pane_that_printed_since_the_client_last_looked() {
    let env = Env::new();
    for name in ["a", "b"] {
        env.ok(&[
            "new",
            name,
            "--env",
            &format!("PS1={name}$ "),
            "--",
            "sh",
            "-i",
        ]);
        env.wait_screen(name, &format!("{name}\\$"));
    }
    env.ok(&["new", "c", "--", "sh", "-c", "sleep 600"]);
    let tmux = Tmux::start(
        &env,
        "activity",
        "\"$BELFRY_BIN\" attach a; echo \"ATTACH-EXIT=$?\"; sleep 600",
    );
    let chooser_line = |name: &str| {
        tmux.lines().into_iter().find(|line| {
            line.get(2..)
                .is_some_and(|rest| rest.starts_with(&format!("{name} ")))
        })
    };
    let open_chooser = || {
        tmux.bytes(b"\x02s");
        assert!(
            eventually(Duration::from_secs(10), || chooser_line("c").is_some()),
            "no chooser: {:#?}",
            tmux.lines()
        );
    };
    assert!(
        eventually(Duration::from_secs(10), || tmux
            .lines()
            .iter()
            .any(|line| line.contains("a$"))),
        "{:#?}",
        tmux.lines()
    );
    // The first look: nothing to compare with, nothing marked.
    open_chooser();
    assert!(chooser_line("b").is_some_and(|line| line.starts_with("  b")));
    tmux.bytes(b"q");
    env.ok(&["send", "b", "--text", "echo moved", "--key", "Enter"]);
    env.wait_screen("b", "(?m)^moved$");
    open_chooser();
    assert!(
        chooser_line("b").is_some_and(|line| line.starts_with("# b")),
        "b printed and is not marked: {:#?}",
        tmux.lines()
    );
    assert!(chooser_line("c").is_some_and(|line| line.starts_with("  c")));
    assert!(chooser_line("a").is_some_and(|line| line.starts_with("* a")));
    tmux.bytes(b"q");
}
