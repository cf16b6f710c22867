//! spec §9: `belfry hooks` projects one canonical hook file into each harness's native config,
//! honestly. Every test runs the real `belfry` binary on real files in a temporary project and
//! home: golden files of every rendered native file and of `hooks plan`; an enforce hook on a
//! lossy cell fails its target before anything is written; a plan writes nothing; unmanaged
//! entries and JSONC comments survive apply and uninstall byte for byte; drift is refused
//! without --force; a partial failure says which targets settled; uninstall after a harness
//! directory was removed; the Windows command rendering Codex's entries claim; trust entries
//! and the inert states read from live files.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use belfry_tests::belfry_bin;
use serde_json::Value;

/// A temporary project and home, and `belfry hooks` run in them.
struct Tree {
    _root: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        Tree::named("project")
    }

    fn named(project_name: &str) -> Tree {
        let root = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
        let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
        let project = base.join(project_name);
        let home = base.join("home");
        for dir in [&project, &home] {
            std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
        }
        Tree {
            _root: root,
            project,
            home,
        }
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.project.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|err| panic!("{err}"));
        }
        std::fs::write(&path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    }

    fn read(&self, relative: &str) -> String {
        let path = self.project.join(relative);
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    fn hooks(&self, args: &[&str]) -> Output {
        Command::new(belfry_bin())
            .arg("hooks")
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("CODEX_HOME", self.home.join(".codex"))
            .env("PATH", self.path_with_harnesses())
            .output()
            .unwrap_or_else(|err| panic!("belfry hooks: {err}"))
    }

    /// A `PATH` on which every harness answers the version its matrix was verified with.
    fn path_with_harnesses(&self) -> String {
        belfry_tests::path_with(&belfry_tests::admitted_harnesses(
            &self.home.join("../harnesses"),
        ))
    }

    /// Runs `belfry hooks ARGS`, expecting `code`; returns stdout with paths redacted.
    fn expect(&self, args: &[&str], code: i32) -> String {
        let output = self.hooks(args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(code),
            "belfry hooks {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        self.redact(&format!("{stdout}{stderr}"))
    }

    fn redact(&self, text: &str) -> String {
        text.replace(&self.project.display().to_string(), "[PROJECT]")
            .replace(&self.home.display().to_string(), "[HOME]")
    }

    /// The project's install state: the one file in the user's belfry `installs/` directory
    /// (never inside the project, issue 39).
    fn state(&self) -> String {
        let dir = self.home.join(".config/belfry/installs");
        let states: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        assert_eq!(states.len(), 1, "{states:?}");
        assert!(!self.project.join(".belfry/hooks-state.json").exists());
        std::fs::read_to_string(&states[0]).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Every file under the project and home, with its bytes.
    fn snapshot_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        for base in [&self.project, &self.home] {
            collect(base, &mut files);
        }
        files
    }
}

fn collect(dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.insert(path.clone(), b"<dir>".to_vec());
            collect(&path, files);
        } else if let Ok(bytes) = std::fs::read(&path) {
            files.insert(path, bytes);
        }
    }
}

/// One hook per kind of projection: a guard on the shell tool for the harnesses whose
/// before-tool deny is exact, an enricher for three settings-file harnesses, an async
/// observer, and a hook with a Windows argv.
const CANONICAL: &str = r#"// The project's hooks.
hook "no-force-push" {
  event "before-tool"
  intent "enforce"
  select tool="shell"
  command "scripts/guard.sh" "--strict"
  timeout-ms 5000
  failure "closed"
  targets "claude" "gemini" "opencode" "pi"
}
hook "repo-notes" {
  event "prompt-submit"
  command "add-notes"
  targets "claude" "codex" "gemini" "opencode" "pi"
}
hook "audit" {
  event "after-tool"
  intent "observe"
  command "audit-log"
  async #true
  targets "claude" "codex"
}
hook "stop-check" {
  event "turn-stop"
  intent "observe"
  command "scripts/stop.sh"
  command-windows "scripts\\stop.cmd"
  targets "codex"
}
"#;

const CLAUDE_SETTINGS: &str = r#"// Team settings: keep this comment.
{
  "model": "some-model", /* and this one */
  "permissions": { "allow": ["Bash(ls:*)"] },
  "hooks": {
    "PreToolUse": [
      // the user's own guard
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "my-guard", "timeout": 3 } ] },
    ],
  },
}
"#;

/// The same user settings as strict JSON, which is all Claude Code 2.1.328 reads.
const CLAUDE_SETTINGS_STRICT: &str = r#"{
  "model": "some-model",
  "permissions": { "allow": ["Bash(ls:*)"] },
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "my-guard", "timeout": 3 } ] }
    ]
  }
}
"#;

const CODEX_HOOKS: &str = r#"{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          { "type": "command", "command": "notify-me", "timeout": 5 }
        ]
      }
    ]
  }
}
"#;

const GEMINI_SETTINGS: &str = "{\n  // gemini user settings\n  \"theme\": \"dark\"\n}\n";

fn full_tree() -> Tree {
    let tree = Tree::new();
    tree.write("belfry-hooks.kdl", CANONICAL);
    tree.write(".claude/settings.json", CLAUDE_SETTINGS);
    tree.write(".codex/hooks.json", CODEX_HOOKS);
    tree.write(".gemini/settings.json", GEMINI_SETTINGS);
    trust_claude_workspace(&tree, &tree.project);
    tree
}

/// Records the accepted workspace-trust dialog Claude Code keeps in `~/.claude.json`.
fn trust_claude_workspace(tree: &Tree, folder: &Path) {
    let config = serde_json::json!({
        "hasCompletedOnboarding": true,
        "projects": { folder.display().to_string(): { "hasTrustDialogAccepted": true } },
    });
    std::fs::write(tree.home.join(".claude.json"), config.to_string())
        .unwrap_or_else(|err| panic!("{err}"));
}

#[test]
fn golden_plan() {
    let tree = full_tree();
    let plan = tree.expect(&["plan"], 0);
    // A trust hash covers the entry's command, which names this run's temporary path; the
    // hashes are checked in `codex_trust_is_written_only_with_trust_and_status_reads_it`.
    let plan: Vec<String> = plan
        .lines()
        .map(|line| match line.split_once(" = sha256:") {
            Some((entry, rest)) if line.trim_start().starts_with("trust entry ") => {
                format!("{entry} = sha256:[HASH]{}", &rest[rest.len().min(64)..])
            }
            _ => line.to_string(),
        })
        .collect();
    insta::assert_snapshot!("plan", plan.join("\n"));
}

#[test]
fn golden_rendered_native_files() {
    let tree = full_tree();
    tree.expect(&["apply"], 0);
    for (name, path) in [
        ("claude_settings", ".claude/settings.json"),
        ("codex_hooks", ".codex/hooks.json"),
        ("gemini_settings", ".gemini/settings.json"),
        ("opencode_plugin", ".opencode/plugin/belfry.js"),
        ("pi_extension", ".pi/extensions/belfry.ts"),
        ("compiled_claude", ".belfry/hooks/claude.json"),
        ("compiled_claude_async", ".belfry/hooks/claude.async.json"),
    ] {
        insta::assert_snapshot!(name, tree.redact(&tree.read(path)));
    }
    // Every settings file the engine wrote is still a file its harness can read.
    for path in [
        ".claude/settings.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
    ] {
        let text = tree.read(path);
        assert!(is_jsonc(&text), "{path} is not JSON(C) any more:\n{text}");
    }
    // Each native entry calls belfry by name on PATH, never a build path.
    let claude = tree.read(".claude/settings.json");
    assert!(claude.contains(
        "\"command\": \"belfry dispatch --event before-tool --native claude --hooks-file "
    ));
    assert!(!claude.contains(&belfry_bin().display().to_string()));
}

#[test]
fn generated_files_say_they_are_generated_and_by_which_version() {
    let tree = full_tree();
    tree.expect(&["apply"], 0);
    for path in [".opencode/plugin/belfry.js", ".pi/extensions/belfry.ts"] {
        let first = tree
            .read(path)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(
            first.starts_with("// Generated by `belfry hooks apply` (belfry "),
            "{path}: {first}"
        );
        assert!(
            first.contains("adapter data verified with "),
            "{path}: {first}"
        );
    }
}

#[test]
fn entries_are_byte_stable_across_applies() {
    let tree = full_tree();
    tree.expect(&["apply"], 0);
    let first = tree.read(".codex/hooks.json");
    // A second apply, and an apply after the canonical file changed elsewhere, keep Codex's
    // entries byte for byte: Codex disables an entry whose command or position changed.
    tree.expect(&["apply"], 0);
    assert_eq!(tree.read(".codex/hooks.json"), first);
    let changed = CANONICAL.replace("add-notes", "add-more-notes");
    tree.write("belfry-hooks.kdl", &changed);
    tree.expect(&["apply"], 0);
    assert_eq!(tree.read(".codex/hooks.json"), first);
    assert!(tree
        .read(".belfry/hooks/codex.json")
        .contains("add-more-notes"));
}

#[test]
fn enforce_on_a_lossy_target_fails_before_anything_is_written() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"guard\" {\n  event \"before-tool\"\n  intent \"enforce\"\n  select tool=\"shell\"\n  command \"guard\"\n  targets \"claude\" \"codex\"\n}\n",
    );
    tree.write(".codex/hooks.json", CODEX_HOOKS);
    let before = tree.snapshot_files();
    let plan = tree.expect(&["plan"], 2);
    assert!(plan.contains("REFUSED, nothing is written for this target: project hook \"guard\" is intent \"enforce\" but its cell before-tool.deny is lossy"), "{plan}");
    let out = tree.expect(&["apply"], 2);
    assert!(out.contains("codex: FAILED: project hook \"guard\" is intent \"enforce\" but its cell before-tool.deny is lossy: no ask or defer; hooks run concurrently; output outside the strict schema fails open [codex:no-ask]"), "{out}");
    assert!(out.contains("claude: settled"), "{out}");
    assert!(out.contains("settled: claude"), "{out}");
    // The codex target's files are byte-identical and nothing of it was created.
    let after = tree.snapshot_files();
    for (path, bytes) in &before {
        assert_eq!(after.get(path), Some(bytes), "{}", path.display());
    }
    assert!(!tree.project.join(".belfry/hooks/codex.json").exists());
    let state: Value = serde_json::from_str(&tree.state()).unwrap_or(Value::Null);
    assert!(state.pointer("/targets/claude").is_some(), "{state}");
    // The failure is recorded, with nothing managed, so `status` says it (issue 41 item 6).
    assert!(
        state["targets"]["codex"]["settlement"]
            .as_str()
            .is_some_and(|s| s.starts_with("failed: project hook \"guard\" is intent \"enforce\"")),
        "{state}"
    );
    assert_eq!(
        state["targets"]["codex"]["files"],
        serde_json::json!([]),
        "{state}"
    );
    assert!(state["targets"]["codex"]["settings"].is_null(), "{state}");
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: inert: "), "{status}");
    assert!(
        status.contains("codex: failed: project hook \"guard\" is intent \"enforce\""),
        "{status}"
    );
}

#[test]
fn a_plan_writes_nothing() {
    let tree = full_tree();
    let before = tree.snapshot_files();
    tree.expect(&["plan"], 0);
    assert_eq!(tree.snapshot_files(), before);
    assert!(!tree.project.join(".belfry").exists());
}

#[test]
fn unmanaged_entries_and_comments_survive_apply_and_uninstall() {
    let tree = full_tree();
    let before = tree.snapshot_files();
    tree.expect(&["apply", "--trust"], 0);
    let claude = tree.read(".claude/settings.json");
    for kept in [
        "// Team settings: keep this comment.\n",
        "\"model\": \"some-model\", /* and this one */\n",
        "      // the user's own guard\n      { \"matcher\": \"Bash\", \"hooks\": [ { \"type\": \"command\", \"command\": \"my-guard\", \"timeout\": 3 } ] },",
    ] {
        assert!(claude.contains(kept), "lost {kept:?}:\n{claude}");
    }
    assert!(tree
        .read(".codex/hooks.json")
        .contains("\"command\": \"notify-me\""));
    let out = tree.expect(&["uninstall"], 0);
    assert!(out.contains("claude: removed"), "{out}");
    assert_eq!(
        tree.snapshot_files(),
        before,
        "uninstall left the tree different"
    );
}

#[test]
fn drift_is_refused_without_force() {
    let tree = full_tree();
    tree.write(".claude/settings.json", CLAUDE_SETTINGS_STRICT);
    tree.expect(&["apply"], 0);
    let edited = tree
        .read(".claude/settings.json")
        .replace("\"timeout\": 10,", "\"timeout\": 99,");
    assert!(
        edited.contains("\"timeout\": 99,"),
        "the managed entry has no timeout 10:\n{edited}"
    );
    tree.write(".claude/settings.json", &edited);
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: drifted: [PROJECT]/.claude/settings.json: the managed PreToolUse entry changed since apply"), "{status}");
    let out = tree.expect(&["apply"], 2);
    assert!(out.contains("claude: FAILED: drift: "), "{out}");
    assert!(out.contains("apply --force overwrites it"), "{out}");
    assert_eq!(
        tree.read(".claude/settings.json"),
        edited,
        "a refused apply wrote"
    );
    tree.expect(&["apply", "--force"], 0);
    assert!(!tree
        .read(".claude/settings.json")
        .contains("\"timeout\": 99,"));
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: installed"), "{status}");
}

#[test]
fn a_partial_failure_exits_non_zero_and_says_which_targets_settled() {
    let tree = Tree::new();
    tree.write("belfry-hooks.kdl", CANONICAL);
    // The gemini target's directory cannot be created: its name is a link into /proc/sys,
    // where no one can make a directory. (That holds for root too, unlike a directory
    // without write permission.)
    std::os::unix::fs::symlink("/proc/sys/belfry-no-such-dir", tree.project.join(".gemini"))
        .unwrap_or_else(|err| panic!("{err}"));
    let out = tree.expect(&["apply"], 2);
    assert!(
        out.contains("gemini: FAILED: cannot create [PROJECT]/.gemini: "),
        "{out}"
    );
    for settled in ["claude", "codex", "opencode", "pi"] {
        assert!(out.contains(&format!("{settled}: settled")), "{out}");
    }
    assert!(
        out.contains("settled: claude, codex, opencode, pi"),
        "{out}"
    );
    let state: Value = serde_json::from_str(&tree.state()).unwrap_or(Value::Null);
    for settled in ["claude", "codex", "opencode", "pi"] {
        assert_eq!(
            state.pointer(&format!("/targets/{settled}/settlement")),
            Some(&Value::String("settled".into())),
            "{state}"
        );
    }
    assert!(
        state["targets"]["gemini"]["settlement"]
            .as_str()
            .is_some_and(|s| s.starts_with("failed: cannot create ")),
        "{state}"
    );
    assert_eq!(
        state["targets"]["gemini"]["files"],
        serde_json::json!([]),
        "{state}"
    );
}

#[test]
fn uninstall_after_a_harness_directory_was_removed() {
    let tree = full_tree();
    let before = tree.snapshot_files();
    tree.expect(&["apply"], 0);
    std::fs::remove_dir_all(tree.project.join(".opencode")).unwrap_or_else(|err| panic!("{err}"));
    let status = tree.expect(&["status"], 2);
    assert!(
        status.contains("opencode: missing: [PROJECT]/.opencode/plugin/belfry.js is gone"),
        "{status}"
    );
    let out = tree.expect(&["uninstall"], 0);
    assert!(out.contains("opencode: removed"), "{out}");
    assert!(
        !tree.project.join(".opencode").exists(),
        "uninstall recreated the removed directory"
    );
    assert_eq!(tree.snapshot_files(), before);
}

#[test]
fn codex_entries_render_a_windows_command() {
    let tree = Tree::named("my project");
    tree.write("belfry-hooks.kdl", CANONICAL);
    tree.expect(&["apply"], 0);
    let hooks: Value = serde_json::from_str(&tree.read(".codex/hooks.json")).unwrap_or(Value::Null);
    let handler = hooks
        .pointer("/hooks/Stop/0/hooks/0")
        .cloned()
        .unwrap_or(Value::Null);
    let file = tree
        .project
        .join(".belfry/hooks/codex.json")
        .display()
        .to_string();
    assert_eq!(
        handler["command"],
        Value::String(format!(
            "belfry dispatch --event turn-stop --native codex --hooks-file '{file}'"
        ))
    );
    assert_eq!(
        handler["commandWindows"],
        Value::String(format!(
            "belfry dispatch --event turn-stop --native codex --hooks-file \"{file}\""
        ))
    );
    // The hook's own Windows argv is what a Windows build compiles; this one compiles the
    // Unix argv, made absolute against the canonical file's directory.
    let compiled = tree.read(".belfry/hooks/codex.json");
    let stop = tree.project.join("scripts/stop.sh").display().to_string();
    assert!(
        compiled.contains(&serde_json::to_string(&stop).unwrap_or_default()),
        "{compiled}"
    );
}

/// Codex cuts an Interrupt entry's timeout to 3 s before it hashes the entry for trust (live,
/// 0.169.0 and 0.171.0: `hooks/list` showed timeoutSec 3 and "modified" for an entry written
/// with timeout 15 and trusted by `apply --trust`). So belfry writes at most 3 s there, and the
/// hash it trusts is the hash Codex computes.
#[test]
fn codex_interrupt_entries_are_written_within_codex_s_3_s() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"stopped\" { event \"interrupt\"; intent \"observe\"; command \"s\"; timeout-ms 15000; targets \"codex\" }\n",
    );
    tree.expect(&["apply"], 0);
    let hooks: Value = serde_json::from_str(&tree.read(".codex/hooks.json")).unwrap_or(Value::Null);
    assert_eq!(
        hooks.pointer("/hooks/Interrupt/0/hooks/0/timeout"),
        Some(&Value::from(3)),
        "{hooks}"
    );
}

/// The canonical JSON text of a value (object keys sorted at every level, no whitespace),
/// written here independently of the crate's.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|key| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(key).unwrap_or_default(),
                        canonical(&map[*key])
                    )
                })
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

fn sha256(text: &str) -> String {
    let output = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(text.as_bytes())?;
            }
            child.wait_with_output()
        })
        .unwrap_or_else(|err| panic!("sha256sum: {err}"));
    let hex = String::from_utf8_lossy(&output.stdout);
    format!(
        "sha256:{}",
        hex.split_whitespace().next().unwrap_or_default()
    )
}

#[test]
fn codex_trust_is_written_only_with_trust_and_status_reads_it() {
    let tree = full_tree();
    tree.write(".claude/settings.json", CLAUDE_SETTINGS_STRICT);
    tree.expect(&["apply"], 0);
    let config = tree.home.join(".codex/config.toml");
    assert!(
        !config.exists(),
        "apply without --trust wrote trust entries"
    );
    let status = tree.expect(&["status"], 2);
    let hooks_json = tree.project.join(".codex/hooks.json").display().to_string();
    let redacted_hooks = tree.redact(&hooks_json);
    assert!(
        status.contains(&format!("UserPromptSubmit {redacted_hooks}:user_prompt_submit:0:0: untrusted — run codex and review hooks, or apply --trust")),
        "{status}"
    );
    tree.expect(&["apply", "--trust"], 0);
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    // The hash, computed here from the entry as written: the identity Codex hashes is
    // {event_name, hooks:[the handler without commandWindows]} as canonical JSON.
    let hooks: Value = serde_json::from_str(&tree.read(".codex/hooks.json")).unwrap_or(Value::Null);
    for (event, label, index) in [
        ("UserPromptSubmit", "user_prompt_submit", 0),
        ("PostToolUse", "post_tool_use", 0),
        ("Stop", "stop", 1),
    ] {
        let mut handler = hooks
            .pointer(&format!("/hooks/{event}/{index}/hooks/0"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Value::Object(map) = &mut handler {
            map.remove("commandWindows");
        }
        let identity = serde_json::json!({"event_name": label, "hooks": [handler]});
        let hash = sha256(&canonical(&identity));
        let table = format!(
            "[hooks.state.\"{hooks_json}:{label}:{index}:0\"]\ntrusted_hash = \"{hash}\"\n"
        );
        assert!(text.contains(&table), "missing {table}\nin\n{text}");
    }
    // The user's own Stop group (index 0) got no trust entry from belfry.
    assert!(!text.contains(&format!("{hooks_json}:stop:0:0")), "{text}");
    let status = tree.expect(&["status"], 2);
    assert!(
        status.contains("codex: inert: the project is not trusted by codex"),
        "{status}"
    );
    let trusted = format!(
        "{text}\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        tree.project.display()
    );
    std::fs::write(&config, &trusted).unwrap_or_else(|err| panic!("{err}"));
    trust_gemini_folder(&tree);
    let status = tree.expect(&["status"], 0);
    assert!(status.contains("codex: installed"), "{status}");
    // Uninstall takes out exactly the entries it wrote; the user's project trust stays.
    tree.expect(&["uninstall"], 0);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap_or_default(),
        format!(
            "\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            tree.project.display()
        )
    );
}

#[test]
fn hooks_disabled_by_the_harness_are_inert() {
    let tree = full_tree();
    tree.write(".claude/settings.json", CLAUDE_SETTINGS_STRICT);
    tree.expect(&["apply"], 0);
    let disabled = tree.read(".claude/settings.json").replacen(
        "{\n  \"model\"",
        "{\n  \"disableAllHooks\": true,\n  \"model\"",
        1,
    );
    tree.write(".claude/settings.json", &disabled);
    tree.write(
        ".gemini/settings.json",
        &tree.read(".gemini/settings.json").replacen(
            "\"theme\"",
            "\"hooksConfig\": {\"enabled\": false},\n  \"theme\"",
            1,
        ),
    );
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: inert: [PROJECT]/.claude/settings.json: disableAllHooks is set in this settings file"), "{status}");
    assert!(
        status.contains(
            "[PROJECT]/.gemini/settings.json: hooksConfig.enabled is false in this settings file"
        ),
        "{status}"
    );
}

#[test]
fn the_user_scope_projects_into_user_settings() {
    let tree = Tree::new();
    let user_file = tree.home.join(".config/belfry/hooks.kdl");
    std::fs::create_dir_all(user_file.parent().unwrap_or(Path::new("/")))
        .unwrap_or_else(|err| panic!("{err}"));
    std::fs::write(
        &user_file,
        "hook \"notes\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" \"codex\" }\n",
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let out = tree.expect(&["--user", "apply"], 0);
    assert!(out.contains("claude: settled"), "{out}");
    assert!(tree.home.join(".claude/settings.json").exists());
    assert!(tree.home.join(".codex/hooks.json").exists());
    assert!(tree.home.join(".config/belfry/hooks/claude.json").exists());
    assert!(!tree.project.join(".claude").exists());
    tree.expect(&["--user", "uninstall"], 0);
    assert!(!tree.home.join(".claude").exists());
}

#[test]
fn golden_matrix() {
    let tree = Tree::new();
    let matrix = tree.expect(&["matrix"], 0);
    assert!(matrix.contains("Antigravity CLI (antigravity): unsupported: not admitted — no build to verify [antigravity:not-admitted]"), "{matrix}");
    insta::assert_snapshot!("matrix", matrix);
}

#[test]
fn a_bad_canonical_file_is_an_error_with_its_place() {
    let tree = Tree::new();
    tree.write("belfry-hooks.kdl", "hook \"a\" {\n  event \"before-tool\"\n  command \"g\"\n  targets \"claude\" \"nobody\"\n}\n");
    let output = tree.hooks(&["plan"]);
    assert_ne!(output.status.code(), Some(0));
    let stderr = tree.redact(&String::from_utf8_lossy(&output.stderr));
    assert!(
        stderr.contains("[PROJECT]/belfry-hooks.kdl:4:20: target \"nobody\" is not a known adapter; known: antigravity, claude, codex, gemini, opencode, pi"),
        "{stderr}"
    );
}

const SEMANTIC_EVENTS: &[&str] = &[
    "session-start",
    "session-end",
    "prompt-submit",
    "before-tool",
    "after-tool",
    "turn-stop",
    "stop-failure",
    "pre-compact",
    "subagent-start",
    "subagent-stop",
    "notification",
    "interrupt",
];
const DENY_EVENTS: &[&str] = &[
    "before-tool",
    "after-tool",
    "prompt-submit",
    "turn-stop",
    "subagent-stop",
    "pre-compact",
];
const CONTEXT_EVENTS: &[&str] = &[
    "session-start",
    "prompt-submit",
    "before-tool",
    "after-tool",
    "subagent-start",
];

/// Whether text is JSON once `//` and `/* */` comments and trailing commas are removed (what
/// the harnesses' settings readers accept), checked by Python's JSON reader, independently of
/// belfry's.
fn is_jsonc(text: &str) -> bool {
    let script = r#"
import json, re, sys
text = sys.stdin.read()
out, i, n = [], 0, len(text)
while i < n:
    c = text[i]
    if c == '"':
        j = i + 1
        while j < n and text[j] != '"':
            j += 2 if text[j] == '\\' else 1
        out.append(text[i:j + 1]); i = j + 1
    elif text.startswith('//', i):
        while i < n and text[i] != '\n': i += 1
    elif text.startswith('/*', i):
        i = text.index('*/', i) + 2
    else:
        out.append(c); i += 1
json.loads(re.sub(r',(\s*[}\]])', r'\1', ''.join(out)))
"#;
    let mut child = match Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(err) => panic!("python3: {err}"),
    };
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(text.as_bytes());
    }
    child.wait().is_ok_and(|status| status.success())
}

/// The matrices cover every feature a canonical hook can need, and each settings renderer's
/// event names agree with the adapter's declaration.
#[test]
fn matrices_are_complete_and_renderers_agree_with_declarations() {
    let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    for entry in std::fs::read_dir(&adapters_dir)
        .unwrap_or_else(|err| panic!("{err}"))
        .flatten()
    {
        let matrix_path = entry.path().join("matrix.json");
        let Ok(text) = std::fs::read_to_string(&matrix_path) else {
            continue;
        };
        let matrix: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if matrix.get("not_admitted").is_some_and(|v| !v.is_null()) {
            continue;
        }
        let cells = matrix["cells"].as_object().cloned().unwrap_or_default();
        for event in SEMANTIC_EVENTS {
            assert!(
                cells.contains_key(*event),
                "{}: no cell {event}",
                matrix_path.display()
            );
            if DENY_EVENTS.contains(event) {
                assert!(
                    cells.contains_key(&format!("{event}.deny")),
                    "{}: no {event}.deny",
                    matrix_path.display()
                );
            }
            if CONTEXT_EVENTS.contains(event) {
                assert!(
                    cells.contains_key(&format!("{event}.context")),
                    "{}: no {event}.context",
                    matrix_path.display()
                );
            }
        }
        let render: Value = std::fs::read_to_string(entry.path().join("render.json"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null);
        let declaration: Value = std::fs::read_to_string(entry.path().join("declaration.json"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null);
        if let Some(events) = render.get("events").and_then(Value::as_object) {
            for (semantic, native) in events {
                // A semantic event projected to several native events (a shell guard that
                // must also run where the harness runs shell commands outside its tool calls)
                // lists them; the first is the one the declaration names.
                let primary = native
                    .as_array()
                    .and_then(|list| list.first())
                    .unwrap_or(native);
                assert_eq!(
                    declaration["events"].get(semantic).unwrap_or(&Value::Null),
                    primary,
                    "{}: render event {semantic}",
                    entry.path().display()
                );
                assert_ne!(
                    cells.get(semantic).and_then(|c| c["status"].as_str()),
                    Some("unsupported"),
                    "{}: renders {semantic}, which its matrix calls unsupported",
                    entry.path().display()
                );
            }
            for (semantic, cell) in &cells {
                if semantic.contains('.') || !SEMANTIC_EVENTS.contains(&semantic.as_str()) {
                    continue;
                }
                if cell["status"] != "unsupported" {
                    assert!(
                        events.contains_key(semantic),
                        "{}: {semantic} is not unsupported but is not rendered",
                        entry.path().display()
                    );
                }
            }
        }
    }
}

/// The trust hash recipe against the real Codex: `adapters/codex/fixtures/trust/` holds a
/// `hooks.json` belfry wrote and what Codex 0.169.0's own `hooks/list` reported for it (the
/// hash it computes and "trusted" for the entries `apply --trust` wrote). The recipe, written
/// here independently, gives Codex's hashes from the file; `codex_trust_is_written_only_with_
/// trust_and_status_reads_it` shows belfry writes the recipe's hashes.
#[test]
fn the_trust_hash_recipe_matches_the_real_codex() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/codex/fixtures/trust");
    let read = |name: &str| -> Value {
        std::fs::read_to_string(dir.join(name))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| panic!("fixture {name}"))
    };
    let hooks = read("hooks.json");
    let capture = read("hooks-list-0.169.0.json");
    let labels = [
        ("pre_tool_use", "PreToolUse"),
        ("user_prompt_submit", "UserPromptSubmit"),
    ];
    let listed = capture
        .pointer("/hooks_list_result/data/0/hooks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed.len(), 2, "{capture}");
    for entry in listed {
        let key = entry["key"].as_str().unwrap_or_default();
        let mut parts = key.rsplitn(4, ':');
        let (handler, group, label) = (parts.next(), parts.next(), parts.next());
        assert_eq!(handler, Some("0"), "{key}");
        let event = labels
            .iter()
            .find(|(l, _)| Some(*l) == label)
            .map(|(_, event)| *event)
            .unwrap_or_else(|| panic!("{key}"));
        let mut handler = hooks
            .pointer(&format!("/hooks/{event}/{}/hooks/0", group.unwrap_or("?")))
            .cloned()
            .unwrap_or(Value::Null);
        if let Value::Object(map) = &mut handler {
            map.remove("commandWindows");
        }
        let identity = serde_json::json!({"event_name": label, "hooks": [handler]});
        assert_eq!(
            Value::String(sha256(&canonical(&identity))),
            entry["currentHash"],
            "{key}"
        );
        assert_eq!(entry["trustStatus"], "trusted", "{key}");
        let written = capture["config_toml_written_by_belfry"]
            .as_str()
            .unwrap_or_default();
        assert!(
            written.contains(&format!(
                "trusted_hash = \"{}\"",
                entry["currentHash"].as_str().unwrap_or("?")
            )),
            "{written}"
        );
    }
}

#[test]
fn a_missing_canonical_file_says_what_to_do() {
    let tree = Tree::new();
    let output = tree.hooks(&["plan"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = tree.redact(&String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        stderr.trim_end(),
        "belfry: [PROJECT]/belfry-hooks.kdl:1:1: there is no hook file here: write one (docs/hooks.md, \"The canonical hook file\"); to remove what an earlier apply installed, run `belfry hooks uninstall`"
    );
}

#[test]
fn a_group_the_user_adds_before_a_managed_one_is_not_taken_for_it() {
    let tree = full_tree();
    tree.write(".claude/settings.json", CLAUDE_SETTINGS_STRICT);
    tree.expect(&["apply", "--trust"], 0);
    let user_group =
        "{ \"hooks\": [ { \"type\": \"command\", \"command\": \"user-late\" } ] },\n      ";
    for (path, event) in [
        (".claude/settings.json", "\"UserPromptSubmit\": [\n      "),
        (".codex/hooks.json", "\"UserPromptSubmit\": [\n      "),
    ] {
        let text = tree.read(path);
        assert!(text.contains(event), "{path}:\n{text}");
        tree.write(
            path,
            &text.replacen(event, &format!("{event}{user_group}"), 1),
        );
    }
    let with_user_groups = tree.read(".claude/settings.json");
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: installed"), "{status}");
    // Codex keys trust by position: the moved entry is honestly reported untrusted.
    let moved = format!(
        "{}:user_prompt_submit:1:0: untrusted",
        tree.redact(&tree.project.join(".codex/hooks.json").display().to_string())
    );
    assert!(status.contains(&moved), "{status}");
    tree.expect(&["apply"], 0);
    assert_eq!(
        tree.read(".claude/settings.json"),
        with_user_groups,
        "apply moved or duplicated a group"
    );
    tree.expect(&["uninstall"], 0);
    for path in [".claude/settings.json", ".codex/hooks.json"] {
        let text = tree.read(path);
        assert!(
            text.contains("user-late"),
            "{path} lost the user's group:\n{text}"
        );
        assert!(
            !text.contains("belfry dispatch"),
            "{path} kept a managed group:\n{text}"
        );
    }
}

fn trust_gemini_folder(tree: &Tree) {
    let file = tree.home.join(".gemini/trustedFolders.json");
    std::fs::create_dir_all(tree.home.join(".gemini")).unwrap_or_else(|err| panic!("{err}"));
    let folders = serde_json::json!({ tree.project.display().to_string(): "TRUST_FOLDER" });
    std::fs::write(&file, folders.to_string()).unwrap_or_else(|err| panic!("{err}"));
}

/// Gemini CLI 0.61.0 loads a project's settings, hooks included, only in a folder the user
/// trusts (`~/.gemini/trustedFolders.json`, longest match; folder trust is on by default):
/// until then its projected hooks are inert.
#[test]
fn gemini_hooks_in_an_untrusted_folder_are_inert() {
    let tree = full_tree();
    tree.expect(&["apply"], 0);
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("gemini: inert: the project folder is not trusted by gemini (~/.gemini/trustedFolders.json), so it registers no settings hooks there — trust the folder in gemini\n"), "{status}");
    // A parent trusted with TRUST_PARENT trusts its siblings, this project among them.
    let sibling = tree
        .project
        .parent()
        .unwrap_or(Path::new("/"))
        .join("sibling");
    std::fs::create_dir_all(tree.home.join(".gemini")).unwrap_or_else(|err| panic!("{err}"));
    let folders = serde_json::json!({ sibling.display().to_string(): "TRUST_PARENT" });
    std::fs::write(
        tree.home.join(".gemini/trustedFolders.json"),
        folders.to_string(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("gemini: installed"), "{status}");
    // A longer DO_NOT_TRUST rule for the project wins.
    let folders = serde_json::json!({
        sibling.display().to_string(): "TRUST_PARENT",
        tree.project.display().to_string(): "DO_NOT_TRUST",
    });
    std::fs::write(
        tree.home.join(".gemini/trustedFolders.json"),
        folders.to_string(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let status = tree.expect(&["status"], 2);
    assert!(
        status.contains("gemini: inert: the project folder is not trusted"),
        "{status}"
    );
}

/// Claude Code 2.1.328 runs an untrusted workspace with hooks off; trust is the accepted
/// dialog in `~/.claude.json`, for the folder or an ancestor.
#[test]
fn claude_hooks_in_an_untrusted_workspace_are_inert() {
    let tree = Tree::new();
    tree.write(".claude/settings.json", CLAUDE_SETTINGS_STRICT);
    tree.write("belfry-hooks.kdl", CANONICAL);
    tree.expect(&["apply"], 0);
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: inert: the workspace trust dialog was not accepted for this folder (~/.claude.json projects.<dir>.hasTrustDialogAccepted), so hooks stay off — run claude here once and accept it\n"), "{status}");
    trust_claude_workspace(&tree, tree.project.parent().unwrap_or(Path::new("/")));
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: installed"), "{status}");
}

/// The commented example in `examples/` is a valid canonical file whose plan refuses nothing.
#[test]
fn the_example_hook_file_plans_cleanly() {
    let tree = Tree::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/belfry-hooks.kdl");
    let text = std::fs::read_to_string(&example)
        .unwrap_or_else(|err| panic!("{}: {err}", example.display()));
    tree.write("belfry-hooks.kdl", &text);
    let plan = tree.expect(&["plan"], 0);
    assert!(!plan.contains("REFUSED"), "{plan}");
    for target in ["claude", "codex", "gemini", "opencode", "pi"] {
        assert!(plan.contains(&format!("\ntarget {target} (")), "{plan}");
    }
}

/// belfry keeps what the user wrote, comments included, but says when the harness cannot
/// read the file at all: Claude Code 2.1.328 reads settings as strict JSON (a comment made a
/// live run report "Invalid or malformed JSON" and load none of its hooks), Gemini CLI 0.61.0
/// strips comments but not trailing commas.
#[test]
fn a_settings_file_the_harness_cannot_read_is_inert() {
    let tree = full_tree();
    let plan = tree.expect(&["plan"], 0);
    assert!(plan.contains("after apply, the harness will skip it: [PROJECT]/.claude/settings.json: the harness reads this file as strict JSON and cannot read it"), "{plan}");
    tree.expect(&["apply"], 0);
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("claude: inert: [PROJECT]/.claude/settings.json: the harness reads this file as strict JSON and cannot read it (expected value at line 1 column 1), so none of its hooks run; remove the comments or trailing commas"), "{status}");
    // Gemini: the comment is fine, a trailing comma is not.
    trust_gemini_folder(&tree);
    assert!(!tree.expect(&["status"], 2).contains("gemini: inert"));
    let text = tree.read(".gemini/settings.json");
    let body = text.trim_end();
    let last = body.rfind('}').unwrap_or(body.len());
    let trailing = format!("{},\n}}\n", body[..last].trim_end());
    tree.write(".gemini/settings.json", &trailing);
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("gemini: inert: [PROJECT]/.gemini/settings.json: the harness reads this file as JSON with comments but no trailing commas and cannot read it"), "{status}");
    // The same content as strict JSON is installed.
    tree.write(".claude/settings.json", CLAUDE_SETTINGS_STRICT);
    tree.expect(&["apply", "--force"], 0);
    assert!(tree.expect(&["status"], 2).contains("claude: installed"));
}

#[test]
fn a_settings_file_that_no_longer_parses_is_reported_drifted() {
    let tree = full_tree();
    tree.expect(&["apply"], 0);
    let broken = tree.read(".gemini/settings.json").replacen(
        "\"theme\": \"dark\"",
        "\"theme\": \"dark\",",
        1,
    );
    tree.write(".gemini/settings.json", &broken);
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("gemini: drifted: [PROJECT]/.gemini/settings.json:3:19: Unexpected token in object: the file no longer parses"), "{status}");
    let out = tree.expect(&["apply"], 2);
    assert!(out.contains("gemini: FAILED: [PROJECT]/.gemini/settings.json: 3:19: Unexpected token in object (not valid JSON with comments)"), "{out}");
}

/// The plan is keyed by the harness version found on this machine (`<harness> --version`):
/// a version outside the matrix's admitted range fails its target before anything is
/// written. The stand-in programs only print a version, as the real ones do.
#[test]
fn a_detected_harness_outside_the_admitted_range_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"codex\" \"gemini\" }\n",
    );
    let bin = tree.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap_or_else(|err| panic!("{err}"));
    for (name, version) in [("codex", "codex-cli 0.172.0"), ("gemini", "0.61.0")] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho '{version}'\n"))
            .unwrap_or_else(|err| panic!("{err}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|err| panic!("{err}"));
    }
    let output = Command::new(belfry_bin())
        .args(["hooks", "plan"])
        .current_dir(&tree.project)
        .env("HOME", &tree.home)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    let plan = tree.redact(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(output.status.code(), Some(2), "{plan}");
    assert!(plan.contains("target codex (Codex, matrix verified with 0.171.0, admits >=0.169.0 <0.172.0; detected 0.172.0, NOT admitted)"), "{plan}");
    assert!(plan.contains("REFUSED, nothing is written for this target: Codex 0.172.0 is outside the admitted range >=0.169.0 <0.172.0"), "{plan}");
    assert!(plan.contains("target gemini (Gemini CLI, matrix verified with 0.61.0, admits >=0.61.0 <0.62.0; detected 0.61.0, admitted)"), "{plan}");
}

/// A target all of whose hooks left the canonical file is taken out by the next apply, its
/// directories too, and drops out of the state.
#[test]
fn a_target_no_hook_names_any_more_is_removed_by_apply() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" \"pi\" }\n",
    );
    tree.expect(&["apply"], 0);
    assert!(tree.project.join(".claude/settings.json").exists());
    tree.write(
        "belfry-hooks.kdl",
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"pi\" }\n",
    );
    let plan = tree.expect(&["plan"], 0);
    assert!(
        plan.contains("file [PROJECT]/.claude/settings.json (removed)"),
        "{plan}"
    );
    tree.expect(&["apply"], 0);
    assert!(
        !tree.project.join(".claude").exists(),
        "the emptied .claude/ was left behind"
    );
    assert!(!tree.project.join(".belfry/hooks/claude.json").exists());
    let state: Value = serde_json::from_str(&tree.state()).unwrap_or(Value::Null);
    assert!(state.pointer("/targets/claude").is_none(), "{state}");
    assert!(state.pointer("/targets/pi").is_some(), "{state}");
}

/// `belfry hooks ARGS` in `tree` with `env` over its home (and no harness stand-ins): the exit
/// code and stdout, paths redacted.
fn hooks_with(tree: &Tree, args: &[&str], env: &[(&str, String)]) -> (Option<i32>, String) {
    let mut command = Command::new(belfry_bin());
    command
        .arg("hooks")
        .args(args)
        .current_dir(&tree.project)
        .env("HOME", &tree.home)
        .env("XDG_CONFIG_HOME", tree.home.join(".config"))
        .env("CODEX_HOME", tree.home.join(".codex"));
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("belfry hooks: {err}"));
    (
        output.status.code(),
        tree.redact(&String::from_utf8_lossy(&output.stdout)),
    )
}

/// Issue 41 item 6: a projection applied where the harness version is not detected (here with
/// BELFRY_HOOKS_DETECT=0), or where a version outside the admitted range runs, is never
/// `installed` with exit 0: `status` says `unverified`, which version runs (or that none was
/// detected) and the admitted range, and exits 2. Only an admitted version is `installed`.
#[test]
fn a_projection_on_an_unadmitted_or_undetected_harness_is_unverified_never_installed() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"notes\" { event \"prompt-submit\"; command \"n\"; targets \"opencode\" }\n",
    );
    let off = [("BELFRY_HOOKS_DETECT", "0".to_string())];
    let (code, out) = hooks_with(&tree, &["apply"], &off);
    assert_eq!(code, Some(0), "{out}");
    let (code, status) = hooks_with(&tree, &["status"], &off);
    assert_eq!(code, Some(2), "{status}");
    assert!(
        status.contains("opencode: unverified: no OpenCode version was detected: `opencode --version` answered none, or BELFRY_HOOKS_DETECT=0 skipped asking, so the version its hooks run under is unverified (admitted >=1.18.33 <1.19.0 or >=2.2.5 <2.3.0, verified with 1.18.33)"),
        "{status}"
    );

    let newer = tree.home.join("../newer");
    std::fs::create_dir_all(&newer).unwrap_or_else(|err| panic!("{err}"));
    let opencode = newer.join("opencode");
    std::fs::write(&opencode, "#!/bin/sh\necho 1.19.0\n").unwrap_or_else(|err| panic!("{err}"));
    std::fs::set_permissions(&opencode, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|err| panic!("{err}"));
    let path = [("PATH", format!("{}:/usr/bin:/bin", newer.display()))];
    let (code, status) = hooks_with(&tree, &["status"], &path);
    assert_eq!(code, Some(2), "{status}");
    assert!(
        status.contains("opencode: unverified: OpenCode 1.19.0 runs here, outside the admitted range >=1.18.33 <1.19.0 or >=2.2.5 <2.3.0 (verified with 1.18.33)"),
        "{status}"
    );

    let status = tree.expect(&["status"], 0);
    // The hook's program `n` is not on PATH: status warns of it on a line of its own.
    assert_eq!(
        status.lines().next(),
        Some("opencode: installed"),
        "{status}"
    );
}

/// Issue 41 item 6: an apply whose only target fails (an enforce hook on a lossy cell) left a
/// state with no target, and `status` said "no projection installed" with exit 0. The failure
/// is recorded: `status` says `failed` with the reason and exits 2, as docs/hooks.md promises,
/// and `uninstall` takes the record out with nothing else to remove.
#[test]
fn a_failed_first_apply_is_reported_failed_by_status_with_a_non_zero_exit() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"guard\" { event \"before-tool\"; intent \"enforce\"; command \"g\"; targets \"codex\" }\n",
    );
    let before = tree.snapshot_files();
    let out = tree.expect(&["apply"], 2);
    assert!(out.contains("codex: FAILED: "), "{out}");
    let status = tree.expect(&["status"], 2);
    assert!(
        status.contains("codex: failed: project hook \"guard\" is intent \"enforce\" but its cell before-tool.deny is lossy"),
        "{status}"
    );
    let out = tree.expect(&["uninstall"], 0);
    assert!(out.contains("codex: removed"), "{out}");
    assert!(tree
        .expect(&["status"], 0)
        .contains("no projection installed"));
    let after = tree.snapshot_files();
    let project_files = |files: &BTreeMap<PathBuf, Vec<u8>>| -> Vec<PathBuf> {
        files
            .keys()
            .filter(|path| path.starts_with(&tree.project))
            .cloned()
            .collect()
    };
    assert_eq!(project_files(&after), project_files(&before));
}

/// Qwen Code 0.24.4's folder trust is off unless `security.folderTrust.enabled` turns it on in
/// `~/.qwen/settings.json`: its projected hooks are installed in any folder until then; with
/// it on they are inert in a folder `~/.qwen/trustedFolders.json` does not trust, and
/// `disableAllHooks` in the user's settings makes them inert too. `uninstall` gives the user's
/// project settings back byte for byte.
#[test]
fn qwen_hooks_are_inert_only_where_folder_trust_is_on_and_the_folder_untrusted() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"audit\" { event \"after-tool\"; intent \"observe\"; command \"sh\" \"-c\" \"true\"; targets \"qwen\" }\n",
    );
    let user = "{\n  // mine\n  \"model\": {\"name\": \"m\"},\n  \"$version\": 4\n}\n";
    tree.write(".qwen/settings.json", user);
    tree.expect(&["apply"], 0);
    let status = tree.expect(&["status"], 0);
    assert!(status.contains("qwen: installed"), "{status}");
    let qwen_home = tree.home.join(".qwen");
    std::fs::create_dir_all(&qwen_home).unwrap_or_else(|err| panic!("{err}"));
    let settings = qwen_home.join("settings.json");
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).unwrap_or_else(|err| panic!("{err}"));
    };
    write(
        &settings,
        "{\"security\": {\"folderTrust\": {\"enabled\": false}}}",
    );
    let status = tree.expect(&["status"], 0);
    assert!(status.contains("qwen: installed"), "{status}");
    write(
        &settings,
        "{\"security\": {\"folderTrust\": {\"enabled\": true}}}",
    );
    let status = tree.expect(&["status"], 2);
    assert!(status.contains("qwen: inert: folder trust is on (security.folderTrust.enabled) and the project folder is not trusted in ~/.qwen/trustedFolders.json, so qwen loads no project hooks there — trust the folder in qwen\n"), "{status}");
    let parent = tree.project.parent().unwrap_or(Path::new("/"));
    let sibling = parent.join("sibling");
    write(
        &qwen_home.join("trustedFolders.json"),
        &serde_json::json!({ sibling.display().to_string(): "TRUST_PARENT" }).to_string(),
    );
    let status = tree.expect(&["status"], 0);
    assert!(status.contains("qwen: installed"), "{status}");
    write(
        &settings,
        "{\"disableAllHooks\": true, \"security\": {\"folderTrust\": {\"enabled\": true}}}",
    );
    let status = tree.expect(&["status"], 2);
    assert!(
        status.contains(
            "qwen: inert: [HOME]/.qwen/settings.json: disableAllHooks is set in this settings file"
        ),
        "{status}"
    );
    tree.expect(&["uninstall"], 0);
    assert_eq!(tree.read(".qwen/settings.json"), user);
}

/// Issue 41: OpenCode 2.x loads a 1.x plugin from `.opencode/plugin/` and runs none of its
/// hooks, silently (live: the guarded force push ran). A projection an older belfry wrote (a
/// 1.x-only plugin, intact since that apply) is `inert` under a detected 2.x, naming why, and
/// `installed` under 1.x; the plugin this belfry writes runs under both, so it is `installed`
/// under 2.2.5 too.
#[test]
fn a_1x_opencode_plugin_under_a_detected_2x_is_inert() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"notes\" { event \"prompt-submit\"; command \"n\"; targets \"opencode\" }\n",
    );
    tree.expect(&["apply"], 0);
    let with_opencode = |version: &str| {
        let dir = tree.home.join(format!("../opencode-{version}"));
        std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{err}"));
        let program = dir.join("opencode");
        std::fs::write(&program, format!("#!/bin/sh\necho 'opencode v{version}'\n"))
            .unwrap_or_else(|err| panic!("{err}"));
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|err| panic!("{err}"));
        [("PATH", format!("{}:/usr/bin:/bin", dir.display()))]
    };
    let (code, status) = hooks_with(&tree, &["status"], &with_opencode("2.2.5"));
    assert_eq!(code, Some(0), "{status}");
    assert!(status.starts_with("opencode: installed"), "{status}");

    // What an older belfry wrote: a 1.x plugin only, and its digest in the install state.
    let plugin = tree.project.join(".opencode/plugin/belfry.js");
    let old = "export const BelfryHooks = async () => ({\n  \"tool.execute.before\": async () => {},\n});\n";
    std::fs::write(&plugin, old).unwrap_or_else(|err| panic!("{err}"));
    let sum = Command::new("sha256sum")
        .arg(&plugin)
        .output()
        .unwrap_or_else(|err| panic!("sha256sum: {err}"));
    let hex = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let states = tree.home.join(".config/belfry/installs");
    let state_path = std::fs::read_dir(&states)
        .unwrap_or_else(|err| panic!("{err}"))
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "json"))
        .unwrap_or_else(|| panic!("no install state in {}", states.display()));
    let mut state: Value = serde_json::from_str(&tree.state()).unwrap_or(Value::Null);
    let files = state
        .pointer_mut("/targets/opencode/files")
        .and_then(Value::as_array_mut)
        .unwrap_or_else(|| panic!("no opencode files in the state"));
    for file in files.iter_mut() {
        if file["path"]
            .as_str()
            .is_some_and(|path| path.ends_with("belfry.js"))
        {
            file["digest"] = Value::String(format!("sha256:{hex}"));
        }
    }
    std::fs::write(&state_path, state.to_string()).unwrap_or_else(|err| panic!("{err}"));

    let (code, status) = hooks_with(&tree, &["status"], &with_opencode("2.2.5"));
    assert_eq!(code, Some(2), "{status}");
    assert!(
        status.contains("opencode: inert: [PROJECT]/.opencode/plugin/belfry.js: OpenCode 2.2.5 loads this file but runs none of its hooks: OpenCode 2.x runs only a plugin whose default export has an id and setup(ctx)"),
        "{status}"
    );
    let (code, status) = hooks_with(&tree, &["status"], &with_opencode("1.18.33"));
    assert_eq!(code, Some(0), "{status}");
    assert!(status.starts_with("opencode: installed"), "{status}");
}

/// Issue 45: the plan says how the guard brief and the project memory arrive on each harness,
/// and an `enforce` hook is what puts a brief there at all.
#[test]
fn the_plan_says_how_the_brief_and_the_memory_arrive_on_each_harness() {
    let tree = Tree::new();
    tree.write(
        "belfry-hooks.kdl",
        "hook \"g\" { event \"before-tool\"; intent \"enforce\"; select tool=\"shell\"; reason \"why\"; command \"true\"; targets \"claude\" \"pi\" }\n\
         hook \"o\" { event \"before-tool\"; intent \"observe\"; once \"context\"; command \"true\"; targets \"claude\" \"codex\" \"gemini\" \"pi\" }\n\
         memory { file \"NOTES.md\"; append \"true\"; }\n",
    );
    let plan = tree.expect(&["plan"], 0);
    let section = |target: &str| -> String {
        let start = plan
            .find(&format!("target {target} "))
            .unwrap_or_else(|| panic!("no {target} in {plan}"));
        let rest = &plan[start + 7..];
        rest[..rest.find("\ntarget ").unwrap_or(rest.len())].to_owned()
    };
    let claude = section("claude");
    assert!(
        claude.contains("project hook \"belfry:session-context\" (session-start enrich): exact"),
        "{claude}"
    );
    assert!(
        claude.contains("    guard-brief: exact\n") && claude.contains("    memory: exact\n"),
        "{claude}"
    );
    assert!(
        claude.contains("project hook \"belfry:once-reset\" (pre-compact observe): exact"),
        "{claude}"
    );
    assert!(
        claude.contains("project hook \"belfry:memory-append\" (turn-stop observe): exact"),
        "{claude}"
    );
    let codex = section("codex");
    assert!(
        !codex.contains("guard-brief"),
        "no enforce hook targets codex: {codex}"
    );
    assert!(
        codex.contains("    memory: lossy: fires at the first prompt, not at launch [codex:session-start-at-first-prompt]"),
        "{codex}"
    );
    let gemini = section("gemini");
    assert!(
        gemini.contains("project hook \"belfry:once-reset\" (pre-compact observe): lossy"),
        "{gemini}"
    );
    let pi = section("pi");
    assert!(
        pi.contains("project hook \"belfry:session-context\" (prompt-submit enrich): lossy")
            && pi.contains(
                "    guard-brief: lossy: no session-start context: told with the first prompt"
            ),
        "{pi}"
    );
}
