//! Issue 39 items 4 and 5: the native files `belfry hooks` reads and edits are read by
//! parsers made for them and only when they are regular files. Every test runs the real
//! `belfry` binaries (and, for `belfry new`, the real daemon) on real files in a temporary
//! home and project: a FIFO at a harness's settings file or its own state file, a duplicate
//! `hooks` key, and a Codex `config.toml` whose tables are inline and whose lines end in CRLF.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use belfry_tests::Env;

/// The observing hooks the rich policy's activity adapter reads: the example's own file.
const RICH_HOOKS: &str = include_str!("../../examples/claude/belfry-hooks.kdl");

/// Long enough for a debug build on a loaded machine; a read that blocks never ends.
const DEADLINE: Duration = Duration::from_secs(30);

/// An environment with a home of its own and a trusted project holding `RICH_HOOKS`,
/// applied.
fn applied_project() -> (Env, PathBuf, PathBuf) {
    let mut env = Env::new();
    let home = env.path("home");
    std::fs::create_dir_all(&home).expect("mkdir home");
    env.extra = vec![
        ("HOME".into(), home.display().to_string()),
        (
            "PATH".into(),
            belfry_tests::path_with(&belfry_tests::admitted_harnesses(&env.path("harnesses"))),
        ),
    ];
    let dir = env.path("project");
    std::fs::create_dir_all(&dir).expect("mkdir project");
    std::fs::write(dir.join("belfry-hooks.kdl"), RICH_HOOKS).expect("write hooks");
    let dir = dir.canonicalize().expect("canonical project path");
    std::fs::write(
        home.join(".claude.json"),
        serde_json::json!({"projects": {dir.display().to_string(): {"hasTrustDialogAccepted": true}}})
            .to_string(),
    )
    .expect("write ~/.claude.json");
    env.ok(&["hooks", "--dir", &dir.display().to_string(), "apply"]);
    (env, dir, home)
}

/// Runs `command` to its end within [`DEADLINE`], killing it and failing the test if it is
/// still running then.
fn finishes(what: &str, mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} still ran after {DEADLINE:?}: it hung");
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(err) => panic!("{what}: {err}"),
        }
    }
    child
        .wait_with_output()
        .unwrap_or_else(|err| panic!("{what}: {err}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap_or_else(|err| panic!("mkfifo: {err}"));
    assert!(status.success(), "mkfifo {}", path.display());
}

/// `hooks status`, `doctor`, `belfry new --adapter claude` and `hooks apply` with a FIFO at
/// `fifo`: each ends, and says the FIFO's path and what it is. Returns their outputs.
fn the_four_commands_name(env: &Env, dir: &Path, fifo: &Path, session: &str) -> Vec<String> {
    let dir_arg = dir.display().to_string();
    let declarations = dir.join("belfry.kdl");
    std::fs::write(
        &declarations,
        format!(r#"agent "{session}-declared" {{ command "sleep" "600"; adapter "claude"; cwd "{dir_arg}"; }}"#),
    )
    .expect("write belfry.kdl");
    // Apply last: a failed apply is what status would report after it.
    let runs: Vec<(&str, Command)> = vec![
        (
            "hooks status",
            env.cmd(&["hooks", "--dir", &dir_arg, "status"]),
        ),
        (
            "doctor",
            env.cmd(&[
                "doctor",
                "--file",
                &declarations.display().to_string(),
                &format!("{session}-declared"),
            ]),
        ),
        (
            "new --adapter claude",
            env.cmd(&[
                "new",
                session,
                "--adapter",
                "claude",
                "--cwd",
                &dir_arg,
                "--",
                "sleep",
                "600",
            ]),
        ),
        (
            "hooks apply",
            env.cmd(&["hooks", "--dir", &dir_arg, "apply"]),
        ),
    ];
    let mut outputs = Vec::new();
    for (what, command) in runs {
        let output = finishes(what, command);
        let said = text(&output);
        // Apply reads the harness's state file only to predict what `status` will say, and
        // writes nothing there: it must end, and says nothing of it (checked by the caller).
        if what != "hooks apply" {
            assert!(
                said.contains(&format!("cannot read {}: it is a FIFO", fifo.display())),
                "{what} did not name the FIFO:\n{said}"
            );
        }
        outputs.push(said);
    }
    outputs
}

/// Issue 39 item 5: opening a FIFO for reading waits for a writer that never comes, so a
/// FIFO at `.claude/settings.json` or at `~/.claude.json` hung `hooks apply`, `hooks status`,
/// `doctor` and `belfry new --adapter claude` for good. Only a regular file is read now:
/// each command ends at once and names the path and what it is.
#[test]
fn a_fifo_at_a_settings_file_or_the_harness_state_file_fails_promptly_naming_it() {
    let (env, dir, home) = applied_project();
    let settings = dir.join(".claude/settings.json");
    let kept = std::fs::read(&settings).expect("the applied settings file");

    mkfifo(&settings);
    let outputs = the_four_commands_name(&env, &dir, &settings, "one");
    assert!(outputs[0].contains("claude: drifted"), "{}", outputs[0]);
    assert!(
        outputs[2].contains("DING delivery stays aggressive"),
        "{}",
        outputs[2]
    );
    assert!(
        outputs[3].contains(&format!(
            "claude: FAILED: cannot read {}: it is a FIFO",
            settings.display()
        )),
        "{}",
        outputs[3]
    );
    // The FIFO is still a FIFO: nothing was written over it.
    let kind = std::fs::symlink_metadata(&settings)
        .expect("stat")
        .file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));

    std::fs::remove_file(&settings).expect("rm fifo");
    std::fs::write(&settings, &kept).expect("restore settings");
    // The failed apply is recorded; an apply on the restored file settles it again.
    env.ok(&["hooks", "--dir", &dir.display().to_string(), "apply"]);
    let state_file = home.join(".claude.json");
    mkfifo(&state_file);
    let outputs = the_four_commands_name(&env, &dir, &state_file, "two");
    assert!(outputs[0].contains("claude: inert"), "{}", outputs[0]);
    assert!(
        outputs[2].contains("DING delivery stays aggressive"),
        "{}",
        outputs[2]
    );
    assert!(outputs[3].contains("claude: settled"), "{}", outputs[3]);
    let plan = finishes(
        "hooks plan",
        env.cmd(&["hooks", "--dir", &dir.display().to_string(), "plan"]),
    );
    assert!(
        text(&plan).contains(&format!(
            "cannot read {}: it is a FIFO",
            state_file.display()
        )),
        "{}",
        text(&plan)
    );

    // Through a symlink, the file pointed at is what is checked.
    std::fs::remove_file(&state_file).expect("rm fifo");
    let target = env.path("elsewhere.fifo");
    mkfifo(&target);
    std::os::unix::fs::symlink(&target, &state_file).expect("symlink");
    let status = finishes(
        "hooks status",
        env.cmd(&["hooks", "--dir", &dir.display().to_string(), "status"]),
    );
    assert!(
        text(&status).contains(&format!(
            "cannot read {}: it is a FIFO",
            state_file.display()
        )),
        "{}",
        text(&status)
    );
}

/// Issue 39 item 4: Claude Code reads the last of two `"hooks"` keys. An edit of the first
/// is one it never sees, so `status` saying `installed` for it would be a lie: apply
/// refuses the file, naming the key, and changes no byte of it; status says it drifted.
#[test]
fn a_duplicate_hooks_key_is_refused_and_status_never_says_installed() {
    let (env, dir, _home) = applied_project();
    let dir_arg = dir.display().to_string();
    let settings = dir.join(".claude/settings.json");
    let applied = std::fs::read_to_string(&settings).expect("settings");
    let status = env.run(&["hooks", "--dir", &dir_arg, "status"]);
    assert!(
        text(&status).contains("claude: installed"),
        "{}",
        text(&status)
    );

    // The user adds a second `hooks` object after belfry's.
    let end = applied.rfind('}').expect("a closing brace");
    let doubled = format!(
        "{},\n  \"hooks\": {{ \"Stop\": [] }}\n}}\n",
        applied[..end].trim_end()
    );
    std::fs::write(&settings, &doubled).expect("write");
    let status = env.run(&["hooks", "--dir", &dir_arg, "status"]);
    let said = text(&status);
    assert!(!said.contains("claude: installed"), "{said}");
    assert!(
        said.contains("claude: drifted")
            && said
                .contains("the key `hooks` is written 2 times; a JSON reader keeps only the last"),
        "{said}"
    );
    let apply = env.run(&["hooks", "--dir", &dir_arg, "apply", "--force"]);
    let said = text(&apply);
    assert!(
        said.contains("claude: FAILED") && said.contains("the key `hooks` is written 2 times"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        doubled
    );

    // The same for an event written twice under `hooks`, once the file is restored and
    // applied again (the failed apply is what status reports until then).
    std::fs::write(&settings, &applied).expect("write");
    env.ok(&["hooks", "--dir", &dir_arg, "apply"]);
    let twice = applied.replacen("\"hooks\": {", "\"hooks\": {\n    \"Stop\": [],", 1);
    std::fs::write(&settings, &twice).expect("write");
    let status = env.run(&["hooks", "--dir", &dir_arg, "status"]);
    assert!(
        text(&status).contains("the key `hooks.Stop` is written 2 times"),
        "{}",
        text(&status)
    );
}

/// Issue 39 item 4: Codex's `config.toml` trust was edited line by line: an entry table
/// appended after `hooks = { state = {} }` made the file invalid TOML (a table defined
/// twice), and the added lines ended in LF in a CRLF file. Edited by `toml_edit` now: the
/// entry goes into the inline table, the file stays TOML Codex reads (status finds the
/// hash through the same parser), every line keeps CRLF, and uninstall gives back every
/// byte.
#[test]
fn codex_trust_goes_into_an_inline_table_of_a_crlf_config_and_comes_out_byte_for_byte() {
    let root = tempfile::tempdir().expect("tempdir");
    let base = root.path().canonicalize().expect("canonical");
    let (project, home) = (base.join("project"), base.join("home"));
    std::fs::create_dir_all(project.join(".codex")).expect("mkdir");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir");
    std::fs::write(
        project.join("belfry-hooks.kdl"),
        "hook \"notes\" {\n  event \"prompt-submit\"\n  command \"add-notes\"\n  targets \"codex\"\n}\n",
    )
    .expect("write hooks");
    let config = home.join(".codex/config.toml");
    let original = format!(
        "# my codex config\r\nmodel = \"m\" # keep\r\nhooks = {{ state = {{}} }}\r\n\r\n[projects.\"{}\"]\r\ntrust_level = \"trusted\"\r\n",
        project.display()
    );
    std::fs::write(&config, &original).expect("write config");
    let hooks = |args: &[&str]| -> Output {
        let mut command = Command::new(belfry_tests::belfry_bin());
        command
            .arg("hooks")
            .args(args)
            .current_dir(&project)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("CODEX_HOME", home.join(".codex"))
            .env(
                "PATH",
                belfry_tests::path_with(&belfry_tests::admitted_harnesses(
                    &home.join("../harnesses"),
                )),
            );
        finishes(&format!("hooks {args:?}"), command)
    };
    let out = hooks(&["apply", "--trust"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let written = std::fs::read_to_string(&config).expect("config");
    assert_eq!(
        written.matches('\n').count(),
        written.matches("\r\n").count(),
        "a line lost its CRLF:\n{written:?}"
    );
    assert!(
        written.starts_with("# my codex config\r\nmodel = \"m\" # keep\r\nhooks = { state = { \""),
        "{written:?}"
    );
    assert!(
        written.ends_with(&format!(
            "\r\n\r\n[projects.\"{}\"]\r\ntrust_level = \"trusted\"\r\n",
            project.display()
        )),
        "{written:?}"
    );
    assert_eq!(written.matches("[hooks").count(), 0, "{written:?}");
    let status = hooks(&["status"]);
    assert!(
        text(&status).contains("codex: installed"),
        "{}\n{written}",
        text(&status)
    );
    let out = hooks(&["uninstall"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&config).expect("config"), original);
}
