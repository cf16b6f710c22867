//! The repository stands alone (issue 12, item 5): no file refers to a file outside it (a
//! specification that is not in the repository, a shared folder beside it, a path of the machine
//! it was written on), and every citation of the contract names a section `docs/spec.md` has.
//!
//! Code comments cite `spec §N`; documents link `spec.md#sN`. Both are checked against
//! the `<a id="sN">` anchors of `docs/spec.md`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every text file of the repository, by its path relative to the root, leaving out build
/// output and hidden directories (`.git`).
fn text_files(root: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.push((relative, text));
            }
        }
    }
    found.sort();
    found
}

/// Whether `line` refers outside the repository: the old specification by its name (the
/// upper-case word, whether as its file name, before a section sign, or in a sentence), or the
/// shared folder beside the repository. The words are built so this file does not hold them.
fn refers_outside(line: &str) -> bool {
    let spec = ["SP", "EC"].concat();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let names_spec = line.match_indices(&spec).any(|(at, _)| {
        !word(line[..at].chars().next_back()) && !word(line[at + spec.len()..].chars().next())
    });
    names_spec || line.contains(&["../", "shared"].concat())
}

/// Whether `text` holds an absolute path into the work folder of the machine it was written on
/// (a path starting at that folder, not one that merely has a `work` component further in).
fn has_machine_path(text: &str) -> bool {
    let needle = ["/", "work/"].concat();
    text.match_indices(&needle).any(|(at, _)| {
        at == 0
            || text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || "\"'`=(:".contains(c))
    })
}

#[test]
fn no_file_refers_to_a_file_outside_the_repository() {
    let root = repository();
    let mut offending = Vec::new();
    for (path, text) in text_files(&root) {
        for (number, line) in text.lines().enumerate() {
            if refers_outside(line) {
                offending.push(format!("{path}:{}: {}", number + 1, line.trim()));
            }
        }
        if has_machine_path(&text) {
            offending.push(format!(
                "{path}: an absolute path of the machine it was written on"
            ));
        }
    }
    assert!(
        offending.is_empty(),
        "{} reference(s) to files outside the repository (cite `spec §N`, a section of docs/spec.md, instead):\n{}",
        offending.len(),
        offending.join("\n")
    );
}

/// The section anchors of `docs/spec.md` (`<a id="s7.4"></a>` gives `7.4`).
fn spec_sections(root: &Path) -> BTreeSet<String> {
    let spec = std::fs::read_to_string(root.join("docs/spec.md")).unwrap();
    spec.match_indices("<a id=\"s")
        .map(|(at, found)| {
            let rest = &spec[at + found.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

/// The section numbers after each `marker` in `text` (`spec §7.4` gives `7.4`).
fn cited_after(text: &str, marker: &str) -> Vec<String> {
    text.match_indices(marker)
        .map(|(at, _)| {
            let rest = &text[at + marker.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.').to_string()
        })
        // A marker followed by no number is this file's own text, not a citation.
        .filter(|section| !section.is_empty())
        .collect()
}

#[test]
fn every_citation_names_a_section_the_spec_has() {
    let root = repository();
    let sections = spec_sections(&root);
    assert!(
        sections.contains("7.4") && sections.contains("6.0"),
        "{sections:?}"
    );
    let mut broken = Vec::new();
    let mut citations = 0;
    for (path, text) in text_files(&root) {
        for marker in ["spec §", "spec.md#s"] {
            for section in cited_after(&text, marker) {
                citations += 1;
                if !sections.contains(&section) {
                    broken.push(format!("{path}: {marker}{section}"));
                }
            }
        }
    }
    assert!(citations > 100, "only {citations} citations found");
    assert!(
        broken.is_empty(),
        "citations of sections docs/spec.md does not have:\n{}",
        broken.join("\n")
    );
}
