//! Issue 39: nothing inside a project may make `belfry hooks` write or delete anything it
//! would not write itself. Every test runs the real `belfry` binary on real files in a
//! temporary HOME and config directory: a checkout that ships a hand-made install state
//! pointing at the user's own files (global settings, `~/.bash_logout`, `~/.ssh/authorized_keys`,
//! `~/.codex/config.toml`, an empty directory) leaves every one of them byte-identical through
//! `status`, `apply` and `uninstall`, and `status` names each rejected record; a user's own
//! `belfry dispatch` groups are never taken for belfry's, and the project and user scopes never
//! touch each other's groups, also when the project is HOME; a temporary name planted as a link
//! is never written through; a linked settings file is edited where it points and the link
//! kept (inside the project), refused when it leads out; and two applies at once leave intact
//! JSON.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use belfry_tests::belfry_bin;
use serde_json::{json, Value};

/// A temporary HOME (with its config directory) and a project, and `belfry hooks` run there.
struct Tree {
    _root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Tree {
    /// A project beside HOME.
    fn new() -> Tree {
        let root = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
        let base = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
        let home = base.join("home");
        let project = base.join("project");
        for dir in [&home, &project] {
            std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
        }
        Tree {
            _root: root,
            home,
            project,
        }
    }

    /// The project is HOME itself (a dotfiles checkout as the home directory).
    fn home_is_project() -> Tree {
        let tree = Tree::new();
        Tree {
            project: tree.home.clone(),
            ..tree
        }
    }

    fn write(&self, path: &Path, text: &str) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|err| panic!("{err}"));
        }
        std::fs::write(path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    }

    fn read(&self, path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(belfry_bin());
        command
            .arg("hooks")
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("CODEX_HOME", self.home.join(".codex"))
            .env(
                "PATH",
                belfry_tests::path_with(&belfry_tests::admitted_harnesses(
                    &self.home.join("../harnesses"),
                )),
            );
        command
    }

    fn hooks(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .unwrap_or_else(|err| panic!("belfry hooks: {err}"))
    }

    /// Runs `belfry hooks ARGS`, expecting `code`; returns stdout and stderr, paths redacted.
    fn expect(&self, args: &[&str], code: i32) -> String {
        let output = self.hooks(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            output.status.code(),
            Some(code),
            "belfry hooks {args:?}\n{text}"
        );
        self.redact(&text)
    }

    fn redact(&self, text: &str) -> String {
        text.replace(&self.project.display().to_string(), "[PROJECT]")
            .replace(&self.home.display().to_string(), "[HOME]")
    }

    /// Every file and directory under `base`, with its bytes (a link as its target), except
    /// `skip` and what is under it.
    fn snapshot(&self, base: &Path, skip: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        collect(base, skip, &mut files);
        files
    }
}

fn collect(dir: &Path, skip: &[PathBuf], files: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if skip.iter().any(|skipped| path.starts_with(skipped)) {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap_or_else(|err| panic!("{err}"));
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap_or_default();
            files.insert(path, format!("<link {}>", target.display()).into_bytes());
        } else if meta.is_dir() {
            files.insert(path.clone(), b"<dir>".to_vec());
            collect(&path, skip, files);
        } else {
            let mut bytes = std::fs::read(&path).unwrap_or_default();
            bytes.extend(format!("<mode {:o}>", meta.permissions().mode() & 0o7777).bytes());
            files.insert(path, bytes);
        }
    }
}

fn assert_same(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
    when: &str,
) {
    for (path, bytes) in before {
        assert_eq!(
            after
                .get(path)
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            Some(String::from_utf8_lossy(bytes).into_owned()),
            "{when}: {} changed",
            path.display()
        );
    }
    for path in after.keys() {
        assert!(
            before.contains_key(path),
            "{when}: {} appeared",
            path.display()
        );
    }
}

fn sha256(bytes: &[u8]) -> String {
    let output = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(bytes)?;
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

/// The user's hooks: a turn-stop observer for Claude Code, alone in its `Stop` array.
const USER_HOOKS: &str =
    "hook \"stop-note\" { event \"turn-stop\"; intent \"observe\"; command \"note\"; targets \"claude\" }\n";

/// The project's hooks: a prompt hook for Claude Code and Codex.
const PROJECT_HOOKS: &str =
    "hook \"notes\" { event \"prompt-submit\"; command \"add-notes\"; targets \"claude\" \"codex\" }\n";

const CODEX_CONFIG: &str =
    "model = \"gpt\"\napproval_policy = \"untrusted\"\nsandbox_mode = \"read-only\"\n";

/// The install state a hostile checkout ships, every record pointing at a file of the user's.
fn planted_state(tree: &Tree) -> Value {
    let home = tree.home.display().to_string();
    let logout = tree.read(&tree.home.join(".bash_logout"));
    json!({
        "version": 1,
        "scope": "project",
        "belfry_version": "0.1.0",
        "canonical_path": tree.project.join("belfry-hooks.kdl").display().to_string(),
        "canonical_sha256": sha256(b"x"),
        "targets": {
            "claude": {
                "adapter_data": sha256(b"x"),
                "harness_verified_with": null,
                "harness_detected": null,
                "settlement": "settled",
                "files": [{"path": format!("{home}/.bash_logout"), "digest": sha256(logout.as_bytes())}],
                "settings": {
                    "path": format!("{home}/.claude/settings.json"),
                    "hooks_key": "hooks",
                    "groups": [],
                    "created": {
                        "file": false,
                        "members": [],
                        "interiors": [[["hooks", "Stop"],
                            "{\"hooks\": [{\"type\": \"command\", \"command\": \"touch /tmp/PWNED\"}]}"]]
                    }
                },
                "trust": [{
                    "file": format!("{home}/.ssh/authorized_keys"),
                    "key": "k", "hash": sha256(b"k"),
                    "appended": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEY me@laptop\n",
                    "created_file": false
                }],
                "created_dirs": [format!("{home}/empty")]
            },
            "codex": {
                "adapter_data": sha256(b"x"),
                "harness_verified_with": null,
                "harness_detected": null,
                "settlement": "settled",
                "files": [],
                "settings": null,
                "trust": [{
                    "file": format!("{home}/.codex/config.toml"),
                    "key": "k", "hash": sha256(b"k"),
                    "appended": "approval_policy = \"untrusted\"\nsandbox_mode = \"read-only\"\n",
                    "created_file": false
                }],
                "created_dirs": []
            }
        }
    })
}

#[test]
fn a_planted_install_state_is_never_acted_on() {
    let tree = Tree::new();
    // The user's own files, and a user-scope projection installed before.
    tree.write(&tree.home.join(".config/belfry/hooks.kdl"), USER_HOOKS);
    tree.write(&tree.home.join(".bash_logout"), "clear\n");
    tree.write(
        &tree.home.join(".ssh/authorized_keys"),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEY me@laptop\n",
    );
    tree.write(&tree.home.join(".codex/config.toml"), CODEX_CONFIG);
    std::fs::create_dir_all(tree.home.join("empty")).unwrap_or_else(|err| panic!("{err}"));
    tree.expect(&["--user", "apply"], 0);
    let global = tree.read(&tree.home.join(".claude/settings.json"));
    assert!(global.contains("--native claude"), "{global}");
    // The checkout: its hooks and a hand-made install state.
    tree.write(&tree.project.join("belfry-hooks.kdl"), PROJECT_HOOKS);
    let planted = serde_json::to_string_pretty(&planted_state(&tree)).unwrap_or_default();
    let planted_path = tree.project.join(".belfry/hooks-state.json");
    tree.write(&planted_path, &planted);
    // Everything outside the project's rendered paths (and belfry's own record of this
    // project's install, which apply writes) must stay byte-identical.
    let installs = tree.home.join(".config/belfry/installs");
    let before = tree.snapshot(&tree.home, std::slice::from_ref(&installs));

    let status = tree.expect(&["status"], 2);
    for named in [
        "rejected: [PROJECT]/.belfry/hooks-state.json: an install state inside the project is never read",
        "targets.claude.files [HOME]/.bash_logout: not a file belfry renders for claude in this project",
        "targets.claude.settings [HOME]/.claude/settings.json: not the settings file belfry renders for claude in this project ([PROJECT]/.claude/settings.json)",
        "targets.claude.trust [HOME]/.ssh/authorized_keys",
        "targets.claude.created_dirs [HOME]/empty: not a directory apply creates for claude",
        "targets.codex.trust [HOME]/.codex/config.toml \"k\"",
    ] {
        assert!(status.contains(named), "status does not name {named:?}:\n{status}");
    }
    assert_same(
        &before,
        &tree.snapshot(&tree.home, std::slice::from_ref(&installs)),
        "status",
    );

    let applied = tree.expect(&["apply"], 0);
    assert!(applied.contains("claude: settled"), "{applied}");
    assert!(applied.contains("rejected: "), "{applied}");
    assert_same(
        &before,
        &tree.snapshot(&tree.home, std::slice::from_ref(&installs)),
        "apply",
    );
    assert!(tree.project.join(".claude/settings.json").exists());

    tree.expect(&["status"], 2);
    let removed = tree.expect(&["uninstall"], 0);
    assert!(removed.contains("claude: removed"), "{removed}");
    assert_same(&before, &tree.snapshot(&tree.home, &[]), "uninstall");
    assert!(!tree.project.join(".claude").exists());
    assert_eq!(
        tree.read(&planted_path),
        planted,
        "the planted file itself was touched"
    );
    // The user-scope projection is still whole: installed, and it uninstalls to nothing.
    let user = tree.expect(&["--user", "status"], 0);
    assert!(user.contains("claude: installed"), "{user}");
    assert!(!tree
        .read(&tree.home.join(".claude/settings.json"))
        .contains("PWNED"));
}

#[test]
fn a_state_under_the_config_directory_is_verified_too() {
    // The same records, written where belfry keeps the state itself (a dotfiles checkout
    // that is also the config directory could ship one there): still never acted on.
    let tree = Tree::new();
    tree.write(&tree.home.join(".bash_logout"), "clear\n");
    tree.write(
        &tree.home.join(".ssh/authorized_keys"),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEY me@laptop\n",
    );
    tree.write(&tree.home.join(".codex/config.toml"), CODEX_CONFIG);
    tree.write(&tree.project.join("belfry-hooks.kdl"), PROJECT_HOOKS);
    tree.expect(&["apply"], 0);
    let installs = tree.home.join(".config/belfry/installs");
    let state_path = std::fs::read_dir(&installs)
        .unwrap_or_else(|err| panic!("{err}"))
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "json"))
        .unwrap_or_else(|| panic!("no state in {}", installs.display()));
    let mut state = planted_state(&tree);
    state["project_dir"] = json!(tree.project.display().to_string());
    tree.write(&state_path, &state.to_string());
    let before = tree.snapshot(&tree.home, std::slice::from_ref(&installs));
    let status = tree.expect(&["status"], 2);
    assert!(
        status.contains("targets.claude.files [HOME]/.bash_logout: not a file belfry renders for claude in this project; not acted on"),
        "{status}"
    );
    tree.expect(&["uninstall"], 0);
    tree.expect(&["apply"], 0);
    tree.expect(&["uninstall"], 0);
    assert_same(
        &before,
        &tree.snapshot(&tree.home, std::slice::from_ref(&installs)),
        "uninstall",
    );
}

/// A settings file with two of the user's own `belfry dispatch` guards: one with a hooks file
/// of their own, one of exactly the shape a projection writes but never written by apply.
fn users_own_dispatch(tree: &Tree) -> String {
    let hooks_file = tree
        .project
        .join(".belfry/hooks/claude.json")
        .display()
        .to_string();
    format!(
        "{{\n  \"hooks\": {{\n    \"UserPromptSubmit\": [\n      {{ \"hooks\": [ {{ \"type\": \"command\", \"command\": \"belfry dispatch --event prompt-submit --native claude --hooks-file /home/me/MY-OWN-HOOKS.json\", \"timeout\": 5 }} ] }}\n    ],\n    \"Stop\": [\n      {{ \"hooks\": [ {{ \"async\": false, \"command\": \"belfry dispatch --event turn-stop --native claude --hooks-file {hooks_file}\", \"timeout\": 9, \"type\": \"command\" }} ] }}\n    ]\n  }}\n}}\n"
    )
}

#[test]
fn a_users_own_dispatch_groups_are_never_taken_for_belfrys() {
    let tree = Tree::new();
    let settings = tree.project.join(".claude/settings.json");
    let original = users_own_dispatch(&tree);
    tree.write(&settings, &original);
    tree.write(
        &tree.project.join("belfry-hooks.kdl"),
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" }\n",
    );
    tree.expect(&["apply"], 0);
    let applied = tree.read(&settings);
    assert!(
        applied.contains("MY-OWN-HOOKS.json"),
        "apply replaced the user's guard:\n{applied}"
    );
    assert!(
        applied.contains("--event turn-stop"),
        "apply deleted the user's group:\n{applied}"
    );
    assert_eq!(
        applied
            .matches("--event prompt-submit --native claude")
            .count(),
        2,
        "{applied}"
    );
    // A second apply and a status read it back the same.
    tree.expect(&["apply"], 0);
    assert_eq!(tree.read(&settings), applied);
    tree.expect(&["uninstall"], 0);
    assert_eq!(
        tree.read(&settings),
        original,
        "uninstall took the user's groups"
    );
}

#[test]
fn project_and_user_scope_never_touch_each_others_groups_even_when_the_project_is_home() {
    let tree = Tree::home_is_project();
    let settings = tree.home.join(".claude/settings.json");
    let original = "{\n  \"model\": \"m\"\n}\n";
    tree.write(&settings, original);
    tree.write(
        &tree.home.join(".config/belfry/hooks.kdl"),
        "hook \"u\" { event \"prompt-submit\"; command \"u\"; targets \"claude\" }\n",
    );
    tree.write(
        &tree.project.join("belfry-hooks.kdl"),
        "hook \"p\" { event \"prompt-submit\"; command \"p\"; targets \"claude\" }\n",
    );
    tree.expect(&["--user", "apply"], 0);
    let user_only = tree.read(&settings);
    tree.expect(&["apply"], 0);
    let both = tree.read(&settings);
    assert_eq!(both.matches("belfry dispatch").count(), 2, "{both}");
    let user = tree.expect(&["--user", "status"], 0);
    assert!(user.contains("claude: installed"), "{user}");
    // Applying each scope again moves nothing of the other's.
    tree.expect(&["--user", "apply"], 0);
    tree.expect(&["apply"], 0);
    assert_eq!(tree.read(&settings), both);
    tree.expect(&["uninstall"], 0);
    assert_eq!(
        tree.read(&settings),
        user_only,
        "the project uninstall touched the user's group"
    );
    let user = tree.expect(&["--user", "status"], 0);
    assert!(user.contains("claude: installed"), "{user}");
    tree.expect(&["--user", "uninstall"], 0);
    assert_eq!(tree.read(&settings), original);
}

#[test]
fn a_temporary_name_planted_as_a_link_is_never_written_through() {
    let tree = Tree::new();
    let victim = tree.home.join("victim");
    tree.write(&victim, "the user's file\n");
    tree.write(
        &tree.project.join(".claude/settings.json"),
        "{\n  \"model\": \"m\"\n}\n",
    );
    tree.write(
        &tree.project.join("belfry-hooks.kdl"),
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" }\n",
    );
    // The names belfry used to write through before renaming.
    for name in [
        ".claude/.settings.json.belfry-tmp",
        ".belfry/hooks/.claude.json.belfry-tmp",
    ] {
        let link = tree.project.join(name);
        std::fs::create_dir_all(link.parent().unwrap_or(Path::new("/")))
            .unwrap_or_else(|err| panic!("{err}"));
        std::os::unix::fs::symlink(&victim, &link).unwrap_or_else(|err| panic!("{err}"));
    }
    tree.expect(&["apply"], 0);
    assert_eq!(tree.read(&victim), "the user's file\n");
    assert!(tree
        .read(&tree.project.join(".claude/settings.json"))
        .contains("belfry dispatch"));
    // No temporary file is left beside the files written.
    for dir in [".claude", ".belfry/hooks"] {
        let left: Vec<String> = std::fs::read_dir(tree.project.join(dir))
            .unwrap_or_else(|err| panic!("{err}"))
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains("belfry-tmp") && !name.ends_with(".json.belfry-tmp"))
            .collect();
        assert!(left.is_empty(), "{dir}: {left:?}");
    }
}

#[test]
fn a_settings_file_keeps_its_mode_and_its_link() {
    let tree = Tree::new();
    tree.write(
        &tree.project.join("belfry-hooks.kdl"),
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" }\n",
    );
    // A dotfiles layout: the settings file is a link to a file elsewhere in the project.
    let real = tree.project.join("dotfiles/claude-settings.json");
    let original = "{\n  \"model\": \"m\"\n}\n";
    tree.write(&real, original);
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|err| panic!("{err}"));
    let link = tree.project.join(".claude/settings.json");
    std::fs::create_dir_all(tree.project.join(".claude")).unwrap_or_else(|err| panic!("{err}"));
    std::os::unix::fs::symlink("../dotfiles/claude-settings.json", &link)
        .unwrap_or_else(|err| panic!("{err}"));
    tree.expect(&["apply"], 0);
    let meta = std::fs::symlink_metadata(&link).unwrap_or_else(|err| panic!("{err}"));
    assert!(
        meta.file_type().is_symlink(),
        "the link was replaced by a file"
    );
    assert!(tree.read(&real).contains("belfry dispatch"));
    let mode = std::fs::metadata(&real)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600, "{mode:o}");
    tree.expect(&["status"], 2);
    tree.expect(&["uninstall"], 0);
    assert!(std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()));
    assert_eq!(tree.read(&real), original);
}

#[test]
fn a_settings_link_out_of_the_project_is_refused() {
    let tree = Tree::new();
    let global = tree.home.join(".claude/settings.json");
    tree.write(&global, "{\n  \"model\": \"m\"\n}\n");
    tree.write(
        &tree.project.join("belfry-hooks.kdl"),
        "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" \"pi\" }\n",
    );
    std::fs::create_dir_all(tree.project.join(".claude")).unwrap_or_else(|err| panic!("{err}"));
    std::os::unix::fs::symlink(&global, tree.project.join(".claude/settings.json"))
        .unwrap_or_else(|err| panic!("{err}"));
    let before = tree.snapshot(&tree.home, &[tree.home.join(".config")]);
    let out = tree.expect(&["apply"], 2);
    assert!(
        out.contains("claude: FAILED: [PROJECT]/.claude/settings.json resolves to [HOME]/.claude/settings.json, outside the project [PROJECT]"),
        "{out}"
    );
    assert!(out.contains("pi: settled"), "{out}");
    assert_same(
        &before,
        &tree.snapshot(&tree.home, &[tree.home.join(".config")]),
        "apply",
    );
}

#[test]
fn two_applies_at_once_leave_intact_json() {
    for round in 0..6 {
        let tree = Tree::new();
        let settings = tree.project.join(".claude/settings.json");
        let original = "{\n  \"model\": \"m\"\n}\n";
        tree.write(&settings, original);
        tree.write(
            &tree.project.join("belfry-hooks.kdl"),
            "hook \"n\" { event \"prompt-submit\"; command \"n\"; targets \"claude\" \"codex\" }\nhook \"s\" { event \"turn-stop\"; intent \"observe\"; command \"s\"; targets \"claude\" }\n",
        );
        let children: Vec<std::process::Child> = (0..2)
            .map(|_| {
                tree.command(&["apply"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|err| panic!("{err}"))
            })
            .collect();
        for child in children {
            let output = child
                .wait_with_output()
                .unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(
                output.status.code(),
                Some(0),
                "round {round}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let text = tree.read(&settings);
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("round {round}: not JSON ({err}):\n{text}"));
        assert!(
            !text.contains("[]"),
            "round {round}: an empty array left behind:\n{text}"
        );
        for event in ["UserPromptSubmit", "Stop"] {
            let groups = value
                .pointer(&format!("/hooks/{event}"))
                .and_then(Value::as_array)
                .map(Vec::len);
            assert_eq!(groups, Some(1), "round {round}: {event}:\n{text}");
        }
        let status = tree.hooks(&["status"]);
        let status = String::from_utf8_lossy(&status.stdout);
        assert!(
            !status.contains("drifted")
                && !status.contains("missing")
                && !status.contains("rejected"),
            "round {round}: {status}"
        );
        tree.expect(&["uninstall"], 0);
        assert_eq!(tree.read(&settings), original, "round {round}");
    }
}
