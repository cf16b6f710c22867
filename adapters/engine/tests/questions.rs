//! The operator questions read from the real dialogs captured from each pinned harness
//! (`adapters/<name>/fixtures/screens*/`): the kind, the title and every option with the keys
//! that choose it, as the harness showed them; and no question on any screen that shows no
//! dialog (idle, a draft, a turn streaming, a tool running, an interrupted turn, an API error).

use belfry_adapter_engine::question::Kind;
use belfry_adapter_engine::{embedded, Question};
use belfry_proto::request::InputStep;
use serde_json::Value;

mod common;
use common::{adapters_dir, captured, fixture, split};

/// The question `key`'s fixture `state` reads as (a key as `common::captured` takes it).
fn question(key: &str, state: &str) -> Option<Question> {
    let grammar = embedded::grammar(split(key).0).unwrap();
    grammar.question(&fixture(key, state))
}

fn text(s: &str) -> InputStep {
    InputStep::Text(s.to_string())
}

fn key(s: &str) -> InputStep {
    InputStep::Key(s.to_string())
}

/// The labels, canonical answers and keys of `question`'s options.
fn options(question: &Question) -> Vec<(String, Vec<String>, Option<Vec<InputStep>>)> {
    question
        .options
        .iter()
        .map(|o| (o.label.clone(), o.answers.clone(), o.keys.clone()))
        .collect()
}

fn answers(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_permission_dialog_of_each_harness_reads_as_its_question_with_real_options() {
    let q = question("claude", "permission-dialog").expect("claude: a question");
    assert_eq!(q.kind, Kind::Permission);
    assert_eq!(q.title, "Do you want to proceed?");
    assert!(
        q.text
            .iter()
            .any(|row| row == "touch tool-started; sleep 6; echo slept"),
        "claude: the command is in the question's text: {:?}",
        q.text
    );
    let claude = options(&q);
    assert_eq!(claude.len(), 4, "{claude:?}");
    assert_eq!(
        claude[0],
        ("Yes".into(), answers(&["allow"]), Some(vec![text("1")]))
    );
    assert_eq!(claude[1].1, answers(&["allow-always"]));
    assert_eq!(
        claude[3],
        ("No".into(), answers(&["deny"]), Some(vec![text("4")]))
    );
    assert!(q.options[0].selected && !q.options[1].selected);

    let q = question("codex", "permission-dialog").expect("codex: a question");
    assert_eq!(q.title, "Would you like to run the following command?");
    let codex = options(&q);
    assert_eq!(codex.len(), 3, "{codex:?}");
    assert_eq!(
        codex[0],
        (
            "Yes, proceed".into(),
            answers(&["allow"]),
            Some(vec![text("y")])
        )
    );
    assert_eq!(codex[1].2, Some(vec![text("p")]));
    assert_eq!(
        codex[2],
        (
            "No, and tell Codex what to do differently".into(),
            answers(&["deny"]),
            Some(vec![key("Escape")])
        )
    );
    assert!(q
        .text
        .iter()
        .any(|row| row == "$ touch tool-started; sleep 6; echo slept"));

    let q = question("gemini", "permission-dialog").expect("gemini: a question");
    assert_eq!(q.title, "Allow execution of [Shell]?");
    let gemini = options(&q);
    assert_eq!(
        gemini,
        vec![
            (
                "Allow once".into(),
                answers(&["allow"]),
                Some(vec![text("1")])
            ),
            (
                "Allow for this session".into(),
                answers(&["allow-always"]),
                Some(vec![text("2")])
            ),
            (
                "No, suggest changes (esc)".into(),
                answers(&["deny"]),
                Some(vec![text("3")])
            ),
        ]
    );
    assert!(q.text[0].starts_with("? Shell"), "{:?}", q.text);

    let q = question("qwen", "permission-dialog").expect("qwen: a question");
    assert_eq!(q.title, "Allow execution of: 'touch, sleep'?");
    let qwen = options(&q);
    assert_eq!(qwen.len(), 3, "{qwen:?}");
    assert_eq!(
        qwen[0],
        (
            "Yes, allow once".into(),
            answers(&["allow"]),
            Some(vec![text("1")])
        )
    );
    assert_eq!(qwen[2].1, answers(&["deny"]));

    let q = question("pi@screens-1", "confirm-dialog").expect("pi: a question");
    assert_eq!(q.title, "Let the status test go on?");
    assert_eq!(q.text, vec!["Belfry confirm", "Let the status test go on?"]);
    assert_eq!(
        options(&q),
        vec![
            ("Yes".into(), answers(&["allow"]), Some(vec![key("Enter")])),
            (
                "No".into(),
                answers(&["deny"]),
                Some(vec![key("Down"), key("Enter")])
            ),
        ]
    );
}

#[test]
fn no_screen_without_a_dialog_reads_as_a_question() {
    for key in [
        "claude",
        "codex",
        "gemini",
        "qwen",
        "pi",
        "pi@screens-1",
        "opencode",
        "opencode@screens-2",
    ] {
        for state in captured(key) {
            let dialog = state.contains("dialog");
            let read = question(key, &state);
            if !dialog {
                assert_eq!(read, None, "{key} {state}: no dialog, no question");
            }
        }
    }
}

#[test]
fn an_answer_names_an_option_by_canonical_answer_number_or_label() {
    let q = question("claude", "permission-dialog").unwrap();
    assert_eq!(q.option("allow").map(|o| o.number), Some(1));
    assert_eq!(q.option("deny").map(|o| o.number), Some(4));
    assert_eq!(q.option("3").map(|o| o.number), Some(3));
    assert_eq!(q.option("yes").map(|o| o.number), Some(1));
    assert_eq!(q.option("maybe"), None);
    assert_eq!(q.option("9"), None);
}

#[test]
fn the_fingerprint_tells_one_question_from_another() {
    let claude = question("claude", "permission-dialog").unwrap();
    let again = question("claude", "permission-dialog").unwrap();
    assert_eq!(claude.fingerprint(), again.fingerprint());
    let mut other = claude.clone();
    other.text.push("rm -rf /".to_string());
    assert_ne!(claude.fingerprint(), other.fingerprint());
    let gemini = question("gemini", "permission-dialog").unwrap();
    assert_ne!(claude.fingerprint(), gemini.fingerprint());
}

#[test]
fn a_numbered_list_in_the_transcript_is_no_question_while_no_dialog_shows() {
    // Claude Code's idle screen with the model's answer rewritten as a numbered list under a
    // rule: option-shaped rows, but no dialog signature, so no question.
    let mut screen = fixture("claude", "idle-empty");
    let n = screen.lines.len();
    screen.lines[n / 2 - 1] = "─".repeat(40);
    screen.lines[n / 2] = "  1. Yes".to_string();
    screen.lines[n / 2 + 1] = "  2. No".to_string();
    screen.cells = None;
    let grammar = embedded::grammar("claude").unwrap();
    assert_eq!(grammar.question(&screen), None);
}

#[test]
fn a_bad_question_rule_is_refused_naming_the_field() {
    let base = std::fs::read_to_string(adapters_dir().join("claude/screen.json")).unwrap();
    let mut file: Value = serde_json::from_str(&base).unwrap();
    file["questions"][0]["option"] = Value::from("^(?P<number>\\d+)\\. (.+)$");
    let err = belfry_adapter_engine::Grammar::parse("test", &file.to_string()).unwrap_err();
    assert!(
        err.to_string()
            .contains("questions[permission-dialog].option has no (?P<label>"),
        "{err}"
    );
    let mut file: Value = serde_json::from_str(&base).unwrap();
    file["questions"][0]["choose"] = serde_json::json!({"by": "arrows", "up": "Up"});
    let err = belfry_adapter_engine::Grammar::parse("test", &file.to_string()).unwrap_err();
    assert!(
        err.to_string().contains("needs up, down and confirm"),
        "{err}"
    );
    let mut file: Value = serde_json::from_str(&base).unwrap();
    file["questions"][0]["kind"] = Value::from("login");
    let err = belfry_adapter_engine::Grammar::parse("test", &file.to_string()).unwrap_err();
    assert!(
        err.to_string().contains("\"login\" is none of permission"),
        "{err}"
    );
}
