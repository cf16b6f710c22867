//! `belfry man --dir` writes one page per subcommand, so every `belfry-*(1)` reference in the
//! pages names a page that exists; every subcommand's `--help` is snapshotted (no empty help
//! line: see also `cli/src/cmd/args.rs::every_option_and_argument_has_a_help_line`); and the
//! README's completion scripts load in bash.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use belfry_tests::{belfry_bin, Env};

/// The pages in `dir`, by file name.
fn pages(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".1"))
        .collect()
}

/// The `belfry-…(1)` references in a roff page, as page file names (`belfry-inbox-post.1`).
fn references(roff: &str) -> Vec<String> {
    let text = roff.replace("\\-", "-");
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("belfry-") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(tail.len());
        if tail[end..].starts_with("(1)") {
            found.push(format!("{}.1", &tail[..end]));
        }
        rest = &tail[end..];
    }
    found
}

#[test]
fn man_dir_writes_a_page_for_every_reference() {
    let env = Env::new();
    let dir = env.path("man/man1");
    let out = env.ok(&["man", "--dir", &dir.display().to_string()]);
    let pages = pages(&dir);
    assert!(
        out.starts_with(&format!("{} man pages in ", pages.len())),
        "{out}"
    );
    assert!(pages.contains("belfry.1"), "{pages:?}");
    assert!(pages.contains("belfry-top.1") && pages.contains("belfry-inbox-post.1"));
    assert!(
        !pages.contains("belfry-pane-host.1"),
        "a hidden command gets no page"
    );
    let mut checked = 0;
    for page in &pages {
        let roff = std::fs::read_to_string(dir.join(page)).unwrap();
        for reference in references(&roff) {
            assert!(
                pages.contains(&reference),
                "{page} refers to {reference}, which was not written: {pages:?}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= pages.len() - 1,
        "only {checked} references found"
    );
    // The main page is what `belfry man` prints.
    let main = env.ok(&["man"]);
    assert_eq!(main, std::fs::read_to_string(dir.join("belfry.1")).unwrap());

    // Each page is roff that groff formats without a warning, where groff is installed.
    let groff = Command::new("groff").arg("--version").output();
    if groff.is_ok_and(|out| out.status.success()) {
        for page in &pages {
            let out = Command::new("groff")
                .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
                .arg(dir.join(page))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stderr.is_empty(),
                "{page}: {stderr}"
            );
        }
    } else {
        eprintln!("groff is not installed: the pages' roff was not formatted");
    }
}

#[test]
fn every_subcommand_has_help_and_it_is_as_snapshotted() {
    let env = Env::new();
    let dir = env.path("man");
    env.ok(&["man", "--dir", &dir.display().to_string()]);
    // The page names are the subcommand paths: belfry-inbox-post.1 is `belfry inbox post`.
    let mut all = String::new();
    for page in pages(&dir) {
        let path: Vec<&str> = page.trim_end_matches(".1").split('-').skip(1).collect();
        let mut args = path.clone();
        args.push("--help");
        let help = env.ok(&args);
        assert!(
            !help.lines().any(|line| line.trim_end().ends_with("  ")),
            "belfry {}: a line ends in blanks where its help should be:\n{help}",
            path.join(" ")
        );
        all.push_str(&format!("==> belfry {} --help\n{help}\n", path.join(" ")));
    }
    insta::assert_snapshot!("help", all);
}

#[test]
fn bash_completion_script_loads_and_completes_subcommands() {
    let script = Command::new(belfry_bin())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(script.status.success());
    let env = Env::new();
    let file = env.path("belfry.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    // As the README installs it: the script is sourced and completes `belfry to<TAB>`.
    let check = format!(
        "source {}; complete -p belfry; COMP_WORDS=(belfry to); COMP_CWORD=1; \
         COMP_LINE='belfry to'; COMP_POINT=9; _belfry belfry to belfry; echo \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash").args(["-c", &check]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("-F _belfry belfry"), "{stdout}");
    assert!(
        stdout.lines().last().unwrap_or_default().contains("top"),
        "{stdout}"
    );
}
