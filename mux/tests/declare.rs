//! Declarations of `belfry up` (spec §11): parsing, validation, generation and reconciliation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use belfry_ding::policy::DeliveryPolicy;
use belfry_mux::declare::{
    load, parse_declarations, plan, plan_down, report, Action, AgentDecl, Declarations,
    DriftPolicy, Problem, ReplaceReason, RunningPane,
};
use belfry_mux::Error;
use proptest::prelude::*;

const FULL: &str = include_str!("fixtures/declare/full.kdl");
const RICH: &str = "turn-boundary+fresh-idle";

fn file() -> &'static Path {
    Path::new("/proj/belfry.kdl")
}

fn parse(source: &str) -> Result<Declarations, Error> {
    parse_declarations(source, file())
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

#[test]
fn the_full_example_parses_field_by_field() {
    let declarations = parse(FULL).unwrap();
    let names: Vec<&str> = declarations
        .agents
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["worker", "reviewer", "absolute.cwd_1"]);

    let worker = declarations.get("worker").unwrap();
    assert_eq!(
        worker,
        &AgentDecl {
            name: "worker".into(),
            argv: strings(&["some-harness", "--flag", "two words"]),
            cwd: Some(PathBuf::from("/proj/work/tree")),
            env: BTreeMap::from([
                ("LOG_LEVEL".into(), "debug".into()),
                ("MODE".into(), "ci".into()),
                ("QUOTED.KEY".into(), String::new()),
            ]),
            rows: 40,
            cols: 120,
            scrollback: 5000,
            scrollback_bytes: 8 << 20,
            charter: Some(PathBuf::from("/proj/charters/worker.md")),
            adapter: Some("provider-name".into()),
            ding: DeliveryPolicy::Rich {
                adapter_command: strings(&["$BELFRY_ADAPTERS/belfry-adapter-x", "--arg"]),
            },
            ding_declared: true,
            hooks: Vec::new(),
            host: None,
        }
    );

    let reviewer = declarations.get("reviewer").unwrap();
    assert_eq!(reviewer.argv, ["other-harness"]);
    assert_eq!(reviewer.cwd, Some(PathBuf::from("/proj")), "default cwd");
    assert!(reviewer.env.is_empty());
    assert_eq!((reviewer.rows, reviewer.cols), (24, 80));
    assert_eq!(
        (reviewer.scrollback, reviewer.scrollback_bytes),
        (2000, 4 << 20),
        "default history caps"
    );
    assert_eq!(reviewer.charter, None);
    assert_eq!(reviewer.adapter, None);
    assert_eq!(reviewer.ding, DeliveryPolicy::Aggressive);

    let absolute = declarations.get("absolute.cwd_1").unwrap();
    assert_eq!(absolute.cwd, Some(PathBuf::from("/srv/checkout")));
    assert_eq!((absolute.rows, absolute.cols), (24, 200));
    assert!(
        declarations.get("disabled").is_none(),
        "slashdash comments out"
    );
}

#[test]
fn an_empty_file_declares_nothing() {
    assert_eq!(parse("// nothing yet\n").unwrap(), Declarations::default());
}

#[test]
fn a_bare_file_name_leaves_paths_relative() {
    let declarations = parse_declarations(
        "agent \"a\" { command \"x\" }\nagent \"b\" { command \"x\"; cwd \"sub/../dir\" }",
        Path::new("belfry.kdl"),
    )
    .unwrap();
    assert_eq!(declarations.agents[0].cwd, None);
    assert_eq!(declarations.agents[1].cwd, Some(PathBuf::from("dir")));
}

#[test]
fn load_resolves_paths_against_the_real_file_and_canonicalizes_cwd() {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap();
    std::fs::create_dir_all(root.join("project/tree")).unwrap();
    std::os::unix::fs::symlink(root.join("project/tree"), root.join("project/link")).unwrap();
    let file = root.join("project/belfry.kdl");
    std::fs::write(
        &file,
        "agent \"home\" { command \"x\" }\n\
         agent \"linked\" { command \"x\"; cwd \"link\"; charter \"c.md\" }\n\
         agent \"missing\" { command \"x\"; cwd \"not/there\" }\n",
    )
    .unwrap();
    let declarations = load(&file).unwrap();
    let cwd = |name: &str| declarations.get(name).unwrap().cwd.clone().unwrap();
    assert_eq!(cwd("home"), root.join("project"));
    assert_eq!(cwd("linked"), root.join("project/tree"), "symlink resolved");
    assert_eq!(
        cwd("missing"),
        root.join("project/not/there"),
        "kept as written"
    );
    assert_eq!(
        declarations.get("linked").unwrap().charter,
        Some(root.join("project/c.md")),
    );
}

#[test]
fn load_names_a_missing_file() {
    let err = load(Path::new("/nonexistent/belfry.kdl")).unwrap_err();
    assert!(matches!(err, Error::ReadDeclarations { .. }));
    assert!(
        err.to_string()
            .starts_with("cannot read declarations /nonexistent/belfry.kdl: "),
        "{err}"
    );
    assert_eq!(err.location(), None);
}

#[test]
fn load_reports_errors_under_the_name_it_was_given() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("belfry.kdl");
    std::fs::write(&file, "agent \"w\" {\n  comand \"x\"\n}\n").unwrap();
    let err = load(&file).unwrap_err();
    assert_eq!(err.location().unwrap().file, file);
    assert_eq!(
        (err.location().unwrap().line, err.location().unwrap().column),
        (2, 3)
    );
}

const INVALID: &str = include_str!("fixtures/declare/invalid.txt");

/// The cases of `invalid.txt`: `(line, column, text the message must contain, source)`.
fn invalid_cases() -> Vec<(usize, usize, &'static str, String)> {
    let mut cases: Vec<(usize, usize, &'static str, String)> = Vec::new();
    for line in INVALID.lines() {
        if let Some(header) = line.strip_prefix("=== ") {
            let (position, expected) = header.split_once(' ').unwrap();
            let (line, column) = position.split_once(':').unwrap();
            cases.push((
                line.parse().unwrap(),
                column.parse().unwrap(),
                expected,
                String::new(),
            ));
        } else if !line.starts_with("# ") && !line.is_empty() {
            let source = &mut cases.last_mut().unwrap().3;
            source.push_str(line);
            source.push('\n');
        }
    }
    cases
}

#[test]
fn each_invalid_declaration_names_file_line_column_and_problem() {
    let cases = invalid_cases();
    assert!(cases.len() >= 70, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (line, column, expected, source) in &cases {
        let outcome = parse(source);
        let Err(err) = outcome else {
            failures.push(format!("{source:?}: accepted as {outcome:?}"));
            continue;
        };
        let message = err.to_string();
        let prefix = format!("/proj/belfry.kdl:{line}:{column}: ");
        if !message.starts_with(&prefix) || !message.contains(expected) {
            failures.push(format!(
                "{source:?}\n   want {prefix}…{expected}…\n    got {message}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn validation_errors_carry_a_structured_problem() {
    let err = parse("agent \"w\" {\n  comand \"x\"\n}").unwrap_err();
    let location = err.location().unwrap();
    assert_eq!((location.line, location.column), (2, 3));
    assert_eq!(
        err.problem(),
        Some(&Problem::UnknownNode {
            name: "comand".into(),
            block: "agent \"w\"".into(),
            expected: "command, cwd, env, size, history, charter, adapter, ding, hooks, host"
                .into(),
            suggestion: Some("command"),
        })
    );
    let syntax = parse("agent {").unwrap_err();
    assert!(matches!(syntax, Error::KdlSyntax { .. }), "{syntax:?}");
    assert_eq!(syntax.problem(), None);
}

// Generation (spec §2, §7.4).

const BASE: &str = r#"
agent "worker" {
    command "some-harness" "--flag"
    cwd "/srv/tree"
    env { MODE "ci"; LOG_LEVEL "debug" }
    size rows=40 cols=120
    charter "charter.md"
    adapter "provider-name"
    ding {
        delivery "turn-boundary+fresh-idle"
        adapter { command "$BELFRY_ADAPTERS/belfry-adapter-x" "--arg" }
    }
}
"#;

fn generation_of(source: &str) -> String {
    let declarations = parse(source).unwrap();
    declarations.agents[0].generation()
}

#[test]
fn generation_changes_exactly_with_argv_cwd_env_policy_and_adapter_command() {
    let base = generation_of(BASE);
    assert!(
        base.starts_with("sha256:") && base.len() == 7 + 64,
        "{base}"
    );
    assert_eq!(base, generation_of(BASE), "stable across parses");

    let same = [
        ("size", BASE.replace("rows=40 cols=120", "rows=50 cols=100")),
        ("no size", BASE.replace("size rows=40 cols=120", "")),
        ("charter", BASE.replace("charter.md", "other-charter.md")),
        ("no charter", BASE.replace("charter \"charter.md\"", "")),
        (
            "adapter name",
            BASE.replace("provider-name", "another-name"),
        ),
        ("agent name", BASE.replace("\"worker\"", "\"renamed\"")),
        (
            "env order",
            BASE.replace(
                "MODE \"ci\"; LOG_LEVEL \"debug\"",
                "LOG_LEVEL \"debug\"; MODE \"ci\"",
            ),
        ),
        (
            "cwd spelling",
            BASE.replace("/srv/tree", "/srv/./other/../tree/"),
        ),
        (
            "layout",
            BASE.replace("\n    ", "\n\t")
                .replace("}\n", "} // comment\n"),
        ),
    ];
    for (what, source) in same {
        assert_eq!(
            generation_of(&source),
            base,
            "{what} must not change the generation"
        );
    }

    let aggressive = BASE.replace(
        "ding {\n        delivery \"turn-boundary+fresh-idle\"\n        \
         adapter { command \"$BELFRY_ADAPTERS/belfry-adapter-x\" \"--arg\" }\n    }",
        "",
    );
    let changed = [
        ("argv value", BASE.replace("\"--flag\"", "\"--other\"")),
        ("argv length", BASE.replace("\"--flag\"", "\"--flag\" \"\"")),
        (
            "program",
            BASE.replace("\"some-harness\"", "\"some-harness2\""),
        ),
        ("cwd", BASE.replace("/srv/tree", "/srv/other")),
        ("no cwd", BASE.replace("cwd \"/srv/tree\"", "")),
        ("env value", BASE.replace("\"ci\"", "\"dev\"")),
        ("env key", BASE.replace("MODE", "MODE2")),
        (
            "env added",
            BASE.replace("MODE \"ci\"", "MODE \"ci\"; EXTRA \"\""),
        ),
        (
            "no env",
            BASE.replace("env { MODE \"ci\"; LOG_LEVEL \"debug\" }", ""),
        ),
        ("aggressive", aggressive.clone()),
        (
            "adapter program",
            BASE.replace("belfry-adapter-x", "belfry-adapter-y"),
        ),
        (
            "adapter args",
            BASE.replace("\"--arg\" }", "\"--arg\" \"--more\" }"),
        ),
        ("adapter args removed", BASE.replace(" \"--arg\" }", " }")),
    ];
    let mut seen = BTreeMap::from([(base.clone(), "base")]);
    for (what, source) in &changed {
        let generation = generation_of(source);
        if let Some(other) = seen.insert(generation, what) {
            panic!("{what} has the same generation as {other}");
        }
    }
    assert!(parse(&aggressive).unwrap().agents[0].ding == DeliveryPolicy::Aggressive);
}

#[test]
fn launch_spec_sets_the_policy_token_of_every_declared_agent() {
    let rich = parse(BASE).unwrap().agents[0].launch_spec();
    assert_eq!(rich.session, "worker");
    assert_eq!(rich.argv, ["some-harness", "--flag"]);
    assert_eq!(rich.cwd.as_deref(), Some("/srv/tree"));
    assert_eq!(rich.env.len(), 2);
    assert!(rich.base_env.is_empty());
    assert_eq!(rich.ding_policy.as_deref(), Some(RICH));
    assert_eq!(
        rich.adapter_command,
        Some(strings(&["$BELFRY_ADAPTERS/belfry-adapter-x", "--arg"])),
        "kept unexpanded"
    );
    assert_eq!((rich.rows, rich.cols), (40, 120));
    assert_eq!(rich.adapter.as_deref(), Some("provider-name"));
    assert_eq!(rich.generation(), generation_of(BASE));

    // spec §7.3: a declared agent is an agent; without a ding block it is aggressive.
    let plain = parse("agent \"w\" { command \"x\" }").unwrap().agents[0].launch_spec();
    assert_eq!(plain.ding_policy.as_deref(), Some("aggressive"));
    assert_eq!(plain.adapter_command, None);
    assert_eq!((plain.rows, plain.cols), (24, 80));
    assert_eq!(plain.adapter, None);
}

/// A declared aggressive agent is the same pane as `belfry new --ding-delivery aggressive` with
/// the same argv, cwd and env (the CLI sends exactly these fields), and every declared spec
/// survives the spawn request. A plain `belfry new`, which is not an agent (spec §7.3), is not.
#[test]
fn declared_specs_match_spawn_requests_and_belfry_new() {
    let temp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(temp.path()).unwrap();
    let file = dir.join("belfry.kdl");
    std::fs::write(&file, BASE.replace("/srv/tree", ".")).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .and_then(|mut handle| {
            std::io::Write::write_all(
                &mut handle,
                b"agent \"plain\" { command \"some-harness\" \"--flag\"; env { MODE \"ci\" } }\n",
            )
        })
        .unwrap();
    let declarations = load(&file).unwrap();

    for agent in &declarations.agents {
        let request = serde_json::to_value(agent.launch_spec()).unwrap();
        let spec = belfry_mux::server::spec_from_request(&spawn_of(&request)).unwrap();
        assert_eq!(spec, agent.launch_spec(), "{}", agent.name);
        assert_eq!(spec.generation(), agent.generation(), "{}", agent.name);
    }

    let mut belfry_new = serde_json::json!({
        "op": "spawn", "session": "plain", "argv": ["some-harness", "--flag"],
        "cwd": dir, "env": {"MODE": "ci"}, "base_env": {"PATH": "/bin"},
        "rows": 33, "cols": 99, "size_policy": "latest",
    });
    let not_an_agent = belfry_mux::server::spec_from_request(&spawn_of(&belfry_new)).unwrap();
    assert_ne!(
        not_an_agent.generation(),
        declarations.get("plain").unwrap().generation()
    );
    belfry_new["ding_policy"] = serde_json::json!("aggressive");
    let spec = belfry_mux::server::spec_from_request(&spawn_of(&belfry_new)).unwrap();
    assert_eq!(
        spec.generation(),
        declarations.get("plain").unwrap().generation()
    );
}

// Reconciliation (spec §11).

fn declarations_for_plan() -> Declarations {
    parse(
        "agent \"new\" { command \"a\" }\n\
         agent \"same\" { command \"b\" }\n\
         agent \"edited\" { command \"c\" \"--changed\" }\n\
         agent \"exited\" { command \"d\" }\n\
         agent \"exited-edited\" { command \"e\" }\n",
    )
    .unwrap()
}

fn generation(declarations: &Declarations, name: &str) -> String {
    declarations.get(name).unwrap().generation()
}

fn running_for_plan(declarations: &Declarations) -> Vec<RunningPane> {
    let pane = |session: &str, generation: String, exited: bool| RunningPane {
        session: session.into(),
        generation,
        exited,
    };
    let old = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    vec![
        pane("same", generation(declarations, "same"), false),
        pane("edited", old.into(), false),
        pane("exited", generation(declarations, "exited"), true),
        pane("exited-edited", old.into(), true),
        pane("undeclared", old.into(), false),
        // A second entry for a session never overrides the first.
        pane("same", old.into(), false),
    ]
}

#[test]
fn plan_launches_adopts_reports_drift_and_relaunches_exited_panes() {
    let declarations = declarations_for_plan();
    let running = running_for_plan(&declarations);
    let old = running[1].generation.clone();
    let g = |name| generation(&declarations, name);

    let reported = plan(&declarations, &running, DriftPolicy::Report);
    let replaced = plan(&declarations, &running, DriftPolicy::Replace);
    let expected_common = |edited: Action| {
        vec![
            Action::Launch {
                name: "new".into(),
                generation: g("new"),
            },
            Action::Adopt {
                name: "same".into(),
                generation: g("same"),
            },
            edited,
            Action::Replace {
                name: "exited".into(),
                reason: ReplaceReason::Exited,
                running_generation: g("exited"),
                declared_generation: g("exited"),
            },
            Action::Replace {
                name: "exited-edited".into(),
                reason: ReplaceReason::Exited,
                running_generation: old.clone(),
                declared_generation: g("exited-edited"),
            },
        ]
    };
    assert_eq!(
        reported,
        expected_common(Action::Drift {
            name: "edited".into(),
            running_generation: old.clone(),
            declared_generation: g("edited"),
        })
    );
    assert_eq!(
        replaced,
        expected_common(Action::Replace {
            name: "edited".into(),
            reason: ReplaceReason::Drifted,
            running_generation: old.clone(),
            declared_generation: g("edited"),
        })
    );
    let names: Vec<&str> = reported.iter().map(Action::name).collect();
    assert_eq!(names, ["new", "same", "edited", "exited", "exited-edited"]);
}

#[test]
fn plan_with_nothing_running_launches_everything_and_never_drifts() {
    let declarations = declarations_for_plan();
    for drift in [DriftPolicy::Report, DriftPolicy::Replace] {
        let actions = plan(&declarations, &[], drift);
        assert!(actions.iter().all(|a| matches!(a, Action::Launch { .. })));
        assert_eq!(actions.len(), declarations.agents.len());
    }
}

#[test]
fn plan_down_lists_declared_panes_that_exist() {
    let declarations = declarations_for_plan();
    let running = running_for_plan(&declarations);
    assert_eq!(
        plan_down(&declarations, &running),
        ["same", "edited", "exited", "exited-edited"]
    );
    assert!(plan_down(&declarations, &[]).is_empty());
    assert!(plan_down(&Declarations::default(), &running).is_empty());
}

#[test]
fn the_plan_report_reads_one_line_per_agent() {
    let declarations = declarations_for_plan();
    let running = running_for_plan(&declarations);
    let mut text = report(&plan(&declarations, &running, DriftPolicy::Report));
    text.push_str("-- with --replace\n");
    text.push_str(&report(&plan(
        &declarations,
        &running,
        DriftPolicy::Replace,
    )));
    // Snapshots live beside the other declaration fixtures.
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("fixtures/declare");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        insta::assert_snapshot!("plan_report", text);
        insta::assert_json_snapshot!(
            "plan_json",
            plan(&declarations, &running, DriftPolicy::Report)
        );
    });
}

// Property tests: the parser never panics, and what a file says is what it gets.

/// A KDL v2 quoted string: everything outside printable ASCII as a `\u{…}` escape, so that
/// no generated character can end the string or the line.
fn quote(text: &str) -> String {
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(character);
            }
            ' ' | '!'..='~' => quoted.push(character),
            other => quoted.push_str(&format!("\\u{{{:x}}}", u32::from(other))),
        }
    }
    quoted.push('"');
    quoted
}

/// Fragments of declarations, so that random sequences reach deep into the lowering.
#[test]
fn nesting_2000_deep_is_refused_with_file_line_column_even_when_slashdashed() {
    let blocks = format!("{}{}", "x {".repeat(2000), "}".repeat(2000));
    let comments = format!("{}{}", "/*".repeat(2000), "*/".repeat(2000));
    for (source, what) in [
        (blocks.clone(), "blocks"),
        (
            format!("agent \"a\" {{\n  command \"x\"\n}}\n/-{blocks}\n"),
            "blocks",
        ),
        (format!("// header\n/- {comments}\n"), "comments"),
    ] {
        let err = parse(&source).expect_err("deep nesting parsed");
        let Some(Problem::TooDeep { limit, .. }) = err.problem() else {
            panic!("not refused for its depth: {err}");
        };
        assert_eq!(*limit, belfry_mux::kdl_depth::MAX_NESTING);
        let message = err.to_string();
        assert!(message.starts_with("/proj/belfry.kdl:"), "{message}");
        assert!(message.contains(what), "{message}");
        let location = err.location().expect("a location");
        assert!(location.line >= 1 && location.column > 1, "{message}");
    }
}

#[test]
fn nesting_at_the_limit_reaches_the_parser_and_parses() {
    let depth = belfry_mux::kdl_depth::MAX_NESTING;
    let source = format!(
        "/-x {{{}{}\nagent \"a\" {{ command \"x\" }}\n",
        "x {".repeat(depth - 1),
        "}".repeat(depth)
    );
    let declarations = parse(&source).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(declarations.agents.len(), 1);
}

#[test]
fn text_that_hides_braces_from_the_depth_scan_still_never_aborts() {
    // Each hides braces behind a string or comment the parser may reject and then read as
    // code. 2000 of them stay under the opener bound and reach the parser, which must have
    // the stack for them; 3000 are refused by that bound. Either way this test must not abort.
    for braces in ["x {".repeat(2000), "x {".repeat(3000)] {
        for source in [
            format!("a \"\\q{braces}\""),
            format!("a \"\u{202e}{braces}\""),
            format!("a \"\"\"{braces}\n\"\"\""),
            format!("a r\"{braces}"),
            format!("a #\"{braces}"),
            format!("a \"\"\"\n{braces}"),
            format!("a \"\\\"{braces}"),
            format!("/* {braces}"),
            format!("a // {braces}"),
            format!("a \"x\"#\"{braces}"),
        ] {
            let err = parse(&source).expect_err("hidden braces parsed");
            assert!(err.location().is_some(), "{err}");
        }
    }
}

#[test]
fn oversize_file_is_refused_before_parsing_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("belfry.kdl");
    let line = "// padding padding padding padding padding padding padding padding\n";
    let text = line.repeat(belfry_mux::declare::MAX_FILE_BYTES / line.len() + 2);
    std::fs::write(&path, &text).unwrap();
    let err = load(&path).expect_err("an oversize file loaded");
    assert!(
        matches!(err.problem(), Some(Problem::TooLarge { .. })),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("{}:", path.display())),
        "{err}"
    );
}

fn kdl_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "agent",
        "\"w\"",
        "\"v\"",
        "{",
        "}",
        ";",
        "\n",
        " ",
        "command",
        "\"x\"",
        "\"\"",
        "cwd",
        "\"~\"",
        "\"/a/../..\"",
        "env",
        "K",
        "\"A=B\"",
        "size",
        "rows=",
        "cols=",
        "0",
        "1000",
        "1001",
        "-1",
        "1.5",
        "#true",
        "#null",
        "charter",
        "adapter",
        "ding",
        "delivery",
        "\"turn-boundary+fresh-idle\"",
        "/-",
        "//",
        "/*",
        "*/",
        "\"",
        "é",
        "\\",
        "=",
        "(t)",
        "#\"raw\"#",
        "\"\"\"\n",
        "\r\n",
        "\u{feff}",
        "comand",
    ]);
    prop::collection::vec(token, 0..48).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics_the_parser(source in any::<String>()) {
        let _ = parse(&source);
    }

    #[test]
    fn declaration_like_text_never_panics_the_parser(source in kdl_soup()) {
        if let Err(err) = parse(&source) {
            let location = err.location().unwrap();
            prop_assert!(location.line >= 1 && location.column >= 1);
            prop_assert!(location.line <= source.split('\n').count());
        }
    }

    #[test]
    fn rendered_declarations_parse_back_unchanged(
        name in "[A-Za-z0-9._-]{1,64}".prop_filter("not . or ..", |n| n != "." && n != ".."),
        argv in prop::collection::vec("\\PC*", 0..4),
        program in "[a-z/][a-z0-9/._-]{0,16}",
        env in prop::collection::btree_map("[A-Za-z_][A-Za-z0-9_]{0,8}", "\\PC*", 0..4),
        size in prop::option::of((1u16..=1000, 1u16..=1000)),
        rich in prop::option::of(prop::collection::vec("\\PC*", 0..3)),
    ) {
        let mut source = format!("agent {} {{\n    command {}", quote(&name), quote(&program));
        for argument in &argv {
            source.push(' ');
            source.push_str(&quote(argument));
        }
        source.push_str("\n    env {\n");
        for (key, value) in &env {
            source.push_str(&format!("        {} {}\n", quote(key), quote(value)));
        }
        source.push_str("    }\n");
        if let Some((rows, cols)) = size {
            source.push_str(&format!("    size rows={rows} cols={cols}\n"));
        }
        if let Some(adapter_args) = &rich {
            source.push_str(&format!(
                "    ding {{ delivery {}; adapter {{ command \"belfry-adapter-x\"",
                quote(RICH)
            ));
            for argument in adapter_args {
                source.push(' ');
                source.push_str(&quote(argument));
            }
            source.push_str(" } }\n");
        }
        source.push_str("}\n");

        let declarations = parse(&source)
            .map_err(|err| TestCaseError::fail(format!("{err}\n{source}")))?;
        let agent = &declarations.agents[0];
        prop_assert_eq!(&agent.name, &name);
        prop_assert_eq!(&agent.argv[0], &program);
        prop_assert_eq!(&agent.argv[1..], &argv[..]);
        prop_assert_eq!(&agent.env, &env);
        prop_assert_eq!((agent.rows, agent.cols), size.unwrap_or((24, 80)));
        let expected_policy = match &rich {
            None => DeliveryPolicy::Aggressive,
            Some(adapter_args) => {
                let mut command = vec!["belfry-adapter-x".to_owned()];
                command.extend(adapter_args.iter().cloned());
                DeliveryPolicy::Rich { adapter_command: command }
            }
        };
        prop_assert_eq!(&agent.ding, &expected_policy);
    }
}

#[test]
fn preflight_looks_programs_up_on_the_pane_path_and_reports_every_problem() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("belfry-test-tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let source = format!(
        concat!(
            "agent \"declared-path\" {{\n  command \"belfry-test-tool\"\n",
            "  env {{ PATH \"{bin}\" }}\n}}\n",
            "agent \"base-path\" {{\n  command \"belfry-test-tool\"\n}}\n",
            "agent \"no-cwd\" {{\n  command \"true\"\n  cwd \"gone\"\n}}\n",
        ),
        bin = bin.display()
    );
    let path = dir.path().join("belfry.kdl");
    std::fs::write(&path, source).unwrap();
    let decls = load(&path).unwrap();
    let base_env = BTreeMap::from([("PATH".to_owned(), "/nonexistent".to_owned())]);
    let ready = belfry_mux::preflight::prepare(&decls, &["declared-path"], &base_env).unwrap();
    assert_eq!(ready.len(), 1);
    let errors = belfry_mux::preflight::prepare(
        &decls,
        &["declared-path", "base-path", "no-cwd"],
        &base_env,
    )
    .expect_err("two agents cannot launch");
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains(":6:11: agent \"base-path\": program \"belfry-test-tool\" is not found on PATH (/nonexistent)"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains(":10:7: agent \"no-cwd\": cwd ")
            && messages[1].ends_with("gone does not exist"),
        "{messages:?}"
    );
}

/// A spawn request as the daemon parses it off the wire.
fn spawn_of(request: &serde_json::Value) -> belfry_proto::request::Spawn {
    belfry_proto::de::from_value(request).unwrap_or_else(|err| panic!("{request}: {err}"))
}
