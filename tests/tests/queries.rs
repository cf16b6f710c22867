//! spec §4: while detached, the pane host answers the program's terminal queries itself.

use belfry_tests::{recorder_bin, Env};

#[test]
fn cursor_position_query_answered_while_detached() {
    let env = Env::new();
    let rec = recorder_bin().display().to_string();
    env.spawn("probe", "24x80", &[&rec, "--cpr"], None);
    env.wait_screen("probe", "CPR:");
    let lines = env.lines("probe");
    assert!(lines[0].starts_with("CPR:ok ESC[1;1R"), "screen: {lines:?}");
}

#[test]
fn device_attributes_answered_while_detached() {
    let env = Env::new();
    // The shell asks for DA1 and reads the answer with a timeout in raw mode.
    let script = r#"stty raw -echo; printf '\033[c'; ans=$(dd bs=1 count=5 2>/dev/null); stty sane; printf 'DA:%s\n' "$(printf '%s' "$ans" | od -An -c | tr -d ' ')"; sleep 600"#;
    env.spawn("da", "24x80", &["sh", "-c", script], None);
    env.wait_screen("da", "DA:");
    let lines = env.lines("da");
    assert!(
        lines.iter().any(|l| l.contains("DA:033[?6c")),
        "screen: {lines:?}"
    );
}

/// spec §4: every query gets exactly one answer — from the pane host while detached, from the
/// attached terminal otherwise, never both.
#[test]
fn each_query_gets_exactly_one_answer_attached_or_detached() {
    use std::time::Duration;
    let env = Env::new();
    let log = env.path("inner.log");
    let log_s = log.display().to_string();
    let rec = recorder_bin().display().to_string();
    env.spawn(
        "inner",
        "24x80",
        &[&rec, "--log", &log_s, "--cpr-on-q"],
        Some("READY"),
    );
    let answers = || {
        String::from_utf8_lossy(&belfry_tests::read_or_empty(&log))
            .matches('R')
            .count()
    };

    // Detached: the pane host answers.
    env.ok(&["send", "inner", "--text", "q"]);
    assert!(belfry_tests::eventually(
        Duration::from_secs(5),
        || answers() == 1
    ));

    // Attached (a writable client, itself running in a pane whose host plays its terminal):
    // the client's terminal answers and the inner pane host stays silent.
    env.spawn(
        "outer",
        "24x80",
        &["sh", "-c", "\"$BELFRY_BIN\" attach inner; sleep 600"],
        None,
    );
    env.wait_screen("outer", "READY");
    env.ok(&["send", "outer", "--text", "q"]);
    assert!(belfry_tests::eventually(
        Duration::from_secs(5),
        || answers() == 2
    ));
    std::thread::sleep(Duration::from_millis(500));
    let got = String::from_utf8_lossy(&belfry_tests::read_or_empty(&log)).into_owned();
    assert_eq!(answers(), 2, "a query was answered twice: {got:?}");
    assert_eq!(got.matches('q').count(), 2, "{got:?}");
}

/// Issue #11 bug 12: XTVERSION, the kitty keyboard query and XTGETTCAP are answered while
/// detached, in the order they were asked, before the DA1 a program sends as a sentinel.
#[test]
fn xtversion_kitty_keyboard_and_xtgettcap_answered_while_detached() {
    let env = Env::new();
    let program = r#"
import os, sys, termios, tty
fd = sys.stdin.fileno()
tty.setraw(fd)
os.write(1, b"\x1b[>0q\x1b[?u\x1bP+q544e\x1b\\\x1b[c")
got = b""
while not got.endswith(b"\x1b[?6c"):
    got += os.read(fd, 1)
os.write(1, b"ANSWERS:" + got.replace(b"\x1b", b"ESC") + b"\r\n")
os.read(fd, 1)
"#;
    env.spawn("probe", "24x100", &["python3", "-c", program], None);
    env.wait_screen("probe", "ANSWERS:");
    let lines = env.lines("probe");
    let expected = format!(
        "ANSWERS:ESCP>|belfry {}ESC\\ESC[?0uESCP0+rESC\\ESC[?6c",
        env!("CARGO_PKG_VERSION")
    );
    assert!(lines.iter().any(|l| l == &expected), "screen: {lines:?}");
}
