//! spec §4: `peek` and the scrollback op read the screen and its history from the model.

use belfry_tests::Env;
use serde_json::{json, Value};

#[test]
fn peek_shows_the_screen_history_by_range_and_attributes() {
    let env = Env::new();
    env.spawn(
        "s",
        "10x40",
        &[
            "sh",
            "-c",
            "seq 1 100; printf '\\033[1;32mgreen\\033[0m'; sleep 600",
        ],
        Some("green"),
    );
    let screen = env.ok(&["peek", "s"]);
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(lines[0], "92");
    assert_eq!(lines[9], "green");

    let with_history = env.ok(&["peek", "s", "--scrollback", "5"]);
    let first: Vec<&str> = with_history.lines().take(6).collect();
    assert_eq!(first, vec!["87", "88", "89", "90", "91", "92"]);

    let ansi = env.ok(&["peek", "s", "--ansi"]);
    assert!(
        ansi.lines().nth(9).unwrap().contains("\u{1b}[0;1;32mgreen"),
        "{ansi:?}"
    );

    let json_out: Value =
        serde_json::from_str(&env.ok(&["peek", "s", "--json", "--cells"])).unwrap();
    assert_eq!(json_out["size"], json!({"rows": 10, "cols": 40}));
    assert_eq!(
        json_out["cursor"],
        json!({"row": 9, "col": 5, "visible": true})
    );
    let green_run = &json_out["cells"][9][0];
    assert_eq!(green_run["text"], "green");
    assert_eq!(green_run["bold"], true);
    assert_eq!(green_run["fg"], 2);

    // The scrollback op reads any range, numbered from the oldest line.
    let reply = env
        .conn()
        .request(json!({"op":"scrollback","session":"s","start":0,"count":3}));
    assert_eq!(reply["lines"], json!(["1", "2", "3"]));
    assert_eq!(reply["total"], 101);
}
