//! `INVARIANTS.md` names, for every guarantee, the tests that prove it. This test keeps that
//! list honest: every `` `path/file.rs::name` `` reference must point at a file that exists and
//! defines `fn name(` (a plain `#[test]`, a `#[tokio::test]`, or a test inside `proptest!`).

use std::path::{Path, PathBuf};

/// Fewer references than this means the parser (or the file) broke, not that all is well.
const MIN_REFERENCES: usize = 20;

/// One `` `path.rs::name` `` reference found in the document.
#[derive(Debug, PartialEq, Eq)]
struct Reference {
    path: String,
    name: String,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the workspace")
        .to_path_buf()
}

/// Every inline code span of the form `some/path.rs::identifier`.
fn references(markdown: &str) -> Vec<Reference> {
    // Splitting on backticks puts the inside of every inline code span at an odd index.
    markdown
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(parse_reference)
        .collect()
}

fn parse_reference(span: &str) -> Option<Reference> {
    let (path, name) = span.split_once(".rs::")?;
    let path_ok = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'));
    let name_ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    (path_ok && name_ok).then(|| Reference {
        path: format!("{path}.rs"),
        name: name.to_string(),
    })
}

/// Why `reference` does not resolve under `root`, or `None` when it does.
fn problem(root: &Path, reference: &Reference) -> Option<String> {
    if reference.path.split('/').any(|part| part == "..") {
        return Some(format!("{}: path leaves the workspace", reference.path));
    }
    let file = root.join(&reference.path);
    let source = match std::fs::read_to_string(&file) {
        Ok(source) => source,
        Err(err) => {
            return Some(format!(
                "{}: cannot read {}: {err}",
                reference.path,
                file.display()
            ))
        }
    };
    let definition = format!("fn {}(", reference.name);
    if source.contains(&definition) || generated_by_a_macro(&source, &reference.name) {
        None
    } else {
        Some(format!(
            "{}::{}: no `{definition}` in {}",
            reference.path,
            reference.name,
            file.display()
        ))
    }
}

/// Whether `source` defines a test `name` through a `macro_rules!` whose body writes `fn $…(`,
/// invoked with `name` as a whole token followed by `:` or `=>` (as `round_trips! { name: T }`
/// or `invalid! { name => "…" }` do).
fn generated_by_a_macro(source: &str, name: &str) -> bool {
    if !(source.contains("macro_rules!") && source.contains("fn $")) {
        return false;
    }
    source.match_indices(name).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let after = source[at + name.len()..].trim_start();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && (after.starts_with(':') && !after.starts_with("::") || after.starts_with("=>"))
    })
}

/// Every unresolved reference in `markdown`, and how many references there were.
fn check(root: &Path, markdown: &str) -> (usize, Vec<String>) {
    let found = references(markdown);
    let problems = found.iter().filter_map(|r| problem(root, r)).collect();
    (found.len(), problems)
}

#[test]
fn every_invariant_names_an_existing_test() {
    let root = workspace_root();
    let path = root.join("INVARIANTS.md");
    let markdown = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let (count, problems) = check(&root, &markdown);
    assert!(
        count >= MIN_REFERENCES,
        "{} has only {count} test references (expected at least {MIN_REFERENCES})",
        path.display()
    );
    assert!(
        problems.is_empty(),
        "{} names tests that do not exist:\n{}",
        path.display(),
        problems.join("\n")
    );
}

#[test]
fn references_are_parsed_from_code_spans_only() {
    let text = "see `pty/src/input.rs::limits` and `tests/tests/x.rs::a_b1`, \
                not pty/src/input.rs::keys, `not a ref`, `a.rs::` or `b.rs::bad name`";
    assert_eq!(
        references(text),
        vec![
            Reference {
                path: "pty/src/input.rs".into(),
                name: "limits".into()
            },
            Reference {
                path: "tests/tests/x.rs".into(),
                name: "a_b1".into()
            },
        ]
    );
}

#[test]
fn a_missing_file_or_function_is_reported() {
    let root = workspace_root();
    let (count, problems) = check(
        &root,
        "`pty/src/input.rs::limits` `pty/src/input.rs::no_such_test_here` \
         `pty/src/no_such_file.rs::limits` `../outside.rs::x`",
    );
    assert_eq!(count, 4);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("no_such_test_here"), "{}", problems[0]);
    assert!(problems[1].contains("no_such_file.rs"), "{}", problems[1]);
    assert!(
        problems[2].contains("leaves the workspace"),
        "{}",
        problems[2]
    );
}

#[test]
fn a_test_a_macro_generates_counts_only_when_the_macro_is_invoked_with_its_name() {
    let root = workspace_root();
    let (count, problems) = check(
        &root,
        "`proto/src/wire_properties.rs::a_pane_record_round_trips` \
         `hooks/tests/projection_canonical.rs::bad_once` \
         `proto/src/wire_properties.rs::a_pane_record_round_trip`",
    );
    assert_eq!(count, 3);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("a_pane_record_round_trip:"),
        "{}",
        problems[0]
    );
}
