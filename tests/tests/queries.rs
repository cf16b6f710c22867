//! SPEC §4: while detached, the pane host answers the program's terminal queries itself.

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
