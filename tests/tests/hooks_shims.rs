//! spec §10: the generated OpenCode plugin and Pi extension do nothing but call
//! `belfry dispatch --native opencode|pi` and translate its answer. Each test applies a real
//! canonical file with the real `belfry`, loads the generated file the way its harness does
//! (Node's ESM loader for the plugin; Pi's own TypeScript loader, jiti, for the extension),
//! and calls its handlers with the harness's hook shapes: the guard's refusal throws / blocks,
//! an allowed call passes, and the enricher's context lands where the matrix says.
//!
//! The answers come from the opencode and pi dialects of `belfry dispatch --native`. The
//! plugin test needs `node`; the extension test needs Pi 0.73.1 installed (it loads the file
//! with Pi's own loader), so it is ignored by default: `scripts/install-harnesses pi`, then
//! `cargo test -p belfry-tests --test hooks_shims -- --ignored` (or `$BELFRY_JITI` naming
//! jiti's `lib/jiti.mjs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use belfry_tests::{belfry_bin, bin_dir};

const CANONICAL: &str = r#"
hook "no-force-push" { event "before-tool"; intent "enforce"; select tool="shell"; command "scripts/guard.sh"; failure "closed"; targets "opencode" "pi" }
hook "notes" { event "prompt-submit"; command "scripts/notes.sh"; targets "opencode" "pi" }
hook "after" { event "after-tool"; command "scripts/notes.sh"; targets "opencode" "pi" }
"#;

const GUARD: &str = "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in *force*) echo \"force push refused by guard\" >&2; exit 2;; esac\nexit 0\n";
const NOTES: &str = "#!/bin/sh\ncat >/dev/null\necho \"repo note: run tests with nice\"\n";

struct Project {
    _root: tempfile::TempDir,
    dir: PathBuf,
}

fn project() -> Project {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let dir = std::fs::canonicalize(root.path()).unwrap_or_else(|err| panic!("{err}"));
    std::fs::create_dir_all(dir.join("scripts")).unwrap_or_else(|err| panic!("{err}"));
    for (name, text) in [("guard.sh", GUARD), ("notes.sh", NOTES)] {
        let path = dir.join("scripts").join(name);
        std::fs::write(&path, text).unwrap_or_else(|err| panic!("{err}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|err| panic!("{err}"));
    }
    std::fs::write(dir.join("belfry-hooks.kdl"), CANONICAL).unwrap_or_else(|err| panic!("{err}"));
    let output = Command::new(belfry_bin())
        .args(["hooks", "apply"])
        .current_dir(&dir)
        .env("HOME", &dir)
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    Project { _root: root, dir }
}

/// Runs a Node ES module with the built `belfry` first on `PATH`; returns its stdout.
fn node(project: &Path, script: &str) -> String {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let file = project.join("check.mjs");
    std::fs::write(&file, script).unwrap_or_else(|err| panic!("{err}"));
    let output = Command::new("node")
        .arg(&file)
        .current_dir(project)
        .env("PATH", path)
        // The read-once ledger (issue 45) lives in the test's own state directory.
        .env("BELFRY_STATE", project.join("state"))
        .output()
        .unwrap_or_else(|err| panic!("node is needed for this test: {err}"));
    assert!(
        output.status.success(),
        "node: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_opencode_plugin_blocks_and_adds_context_through_dispatch() {
    let project = project();
    let plugin = project.dir.join(".opencode/plugin/belfry.js");
    let module = project.dir.join("plugin.mjs");
    std::fs::copy(&plugin, &module).unwrap_or_else(|err| panic!("{err}"));
    let out = node(
        &project.dir,
        &format!(
            r#"const plugin = (await import({module:?})).default;
const hooks = await plugin.server({{ directory: {dir:?} }});
let blocked = "not blocked";
try {{ await hooks["tool.execute.before"]({{ tool: "bash", sessionID: "s", callID: "c" }}, {{ args: {{ command: "git push --force" }} }}); }}
catch (e) {{ blocked = e.message; }}
console.log("force: " + blocked);
let ls = "ran";
try {{ await hooks["tool.execute.before"]({{ tool: "bash", sessionID: "s", callID: "c" }}, {{ args: {{ command: "ls" }} }}); }} catch (e) {{ ls = "blocked"; }}
console.log("ls: " + ls);
const out = {{ title: "", output: "file1", metadata: {{}} }};
await hooks["tool.execute.after"]({{ tool: "bash", sessionID: "s", callID: "c", args: {{}} }}, out);
console.log("after: " + JSON.stringify(out.output));
const msg = {{ message: {{}}, parts: [{{ id: "prt_1", type: "text", text: "hello" }}] }};
await hooks["chat.message"]({{ sessionID: "s" }}, msg);
console.log("parts: " + JSON.stringify(msg.parts.map((p) => p.text)));
const next = {{ message: {{}}, parts: [{{ id: "prt_2", type: "text", text: "again" }}] }};
await hooks["chat.message"]({{ sessionID: "s" }}, next);
console.log("next: " + JSON.stringify(next.parts.map((p) => p.text)));
"#,
            module = module.display().to_string(),
            dir = project.dir.display().to_string(),
        ),
    );
    assert!(
        out.contains("force: force push refused by guard\n"),
        "{out}"
    );
    assert!(out.contains("ls: ran\n"), "{out}");
    assert!(
        out.contains("after: \"file1\\n\\nrepo note: run tests with nice\"\n"),
        "{out}"
    );
    // The first prompt also carries the guard brief (OpenCode has no session-start context);
    // the next prompt of the session does not (issue 45).
    assert!(
        out.contains(
            "parts: [\"hello\",\"repo note: run tests with nice\\nGuards in force here (belfry hooks): \
             these actions are refused; do not attempt them.\\n- no-force-push: refuses shell commands\"]\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("next: [\"again\",\"repo note: run tests with nice\"]\n"),
        "{out}"
    );
}

/// The same plugin file under OpenCode 2.x's API: its default export's `id` and `setup(ctx)`,
/// called with a context that records what it registers; each hook then gets the one mutable
/// event 2.x passes (shapes read from 2.2.5: `{tool, sessionID, input}`, after a tool
/// `{status, result: {output, content}}`, a prompt `{sessionID, prompt: {text}}`).
#[test]
fn the_opencode_plugin_registers_its_2x_hooks_and_they_block_and_add_context() {
    let project = project();
    let plugin = project.dir.join(".opencode/plugin/belfry.js");
    let module = project.dir.join("plugin.mjs");
    std::fs::copy(&plugin, &module).unwrap_or_else(|err| panic!("{err}"));
    let out = node(
        &project.dir,
        &format!(
            r#"const plugin = (await import({module:?})).default;
const hooks = {{}};
const ctx = {{
  location: {{ directory: {dir:?} }},
  tool: {{ hook: async (name, fn) => {{ hooks["tool." + name] = fn; }} }},
  session: {{ hook: async (name, fn) => {{ hooks["session." + name] = fn; }} }},
  event: {{ subscribe: () => ({{ [Symbol.asyncIterator]: () => ({{ next: () => new Promise(() => {{}}) }}) }}) }},
}};
await plugin.setup(ctx);
console.log("id: " + plugin.id + "; hooks: " + Object.keys(hooks).sort().join(","));
let blocked = "not blocked";
try {{ await hooks["tool.execute.before"]({{ tool: "shell", sessionID: "s", input: {{ command: "git push --force" }} }}); }}
catch (e) {{ blocked = e.message; }}
console.log("force: " + blocked);
let ls = "ran";
try {{ await hooks["tool.execute.before"]({{ tool: "shell", sessionID: "s", input: {{ command: "ls" }} }}); }} catch (e) {{ ls = "blocked"; }}
console.log("ls: " + ls);
const after = {{ tool: "shell", sessionID: "s", input: {{}}, status: "completed", result: {{ output: "file1", content: [{{ type: "text", text: "file1" }}] }} }};
await hooks["tool.execute.after"](after);
console.log("after: " + JSON.stringify(after.result));
const prompt = {{ sessionID: "s", prompt: {{ text: "hello" }}, delivery: "steer" }};
await hooks["session.prompt"](prompt);
console.log("prompt: " + JSON.stringify(prompt.prompt.text));
process.exit(0);
"#,
            module = module.display().to_string(),
            dir = project.dir.display().to_string(),
        ),
    );
    assert!(
        out.contains(
            "id: belfry; hooks: session.compaction,session.prompt,tool.execute.after,tool.execute.before\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("force: force push refused by guard\n"),
        "{out}"
    );
    assert!(out.contains("ls: ran\n"), "{out}");
    assert!(
        out.contains(
            "after: {\"output\":\"file1\\n\\nrepo note: run tests with nice\",\"content\":[{\"type\":\"text\",\"text\":\"file1\"},{\"type\":\"text\",\"text\":\"repo note: run tests with nice\"}]}\n"
        ),
        "{out}"
    );
    // The first prompt of the session carries the guard brief too (issue 45).
    assert!(
        out.contains(
            "prompt: \"hello\\n\\nrepo note: run tests with nice\\nGuards in force here (belfry hooks): \
             these actions are refused; do not attempt them.\\n- no-force-push: refuses shell commands\"\n"
        ),
        "{out}"
    );
}

fn jiti() -> PathBuf {
    if let Ok(path) = std::env::var("BELFRY_JITI") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("harnesses/pi-0.73.1/node_modules/jiti/lib/jiti.mjs");
    assert!(
        path.exists(),
        "Pi 0.73.1's jiti is not at {} (install Pi there or set BELFRY_JITI)",
        path.display()
    );
    path
}

/// Pi's own package entry beside its jiti: Pi's loader gives an extension the package it runs
/// as `@mariozechner/pi-coding-agent` (a jiti alias, the same for Pi 1.x), which the generated
/// extension imports its `VERSION` from; this stands in for that loader.
fn pi_index(jiti: &Path) -> PathBuf {
    let node_modules = jiti
        .ancestors()
        .nth(3)
        .unwrap_or_else(|| panic!("{} is not node_modules/jiti/lib/jiti.mjs", jiti.display()));
    node_modules.join("@mariozechner/pi-coding-agent/dist/index.js")
}

#[test]
#[ignore = "needs Pi 0.73.1 installed (its TypeScript loader, jiti)"]
fn the_pi_extension_blocks_and_adds_context_through_dispatch() {
    let project = project();
    let extension = project.dir.join(".pi/extensions/belfry.ts");
    let out = node(
        &project.dir,
        &format!(
            r#"import {{ createJiti }} from {jiti:?};
const mod = await createJiti(import.meta.url, {{ alias: {{ "@mariozechner/pi-coding-agent": {pi:?} }} }}).import({extension:?});
const on = {{}};
(mod.default ?? mod)({{ on: (name, fn) => {{ on[name] = fn; }} }});
const ctx = {{ cwd: {dir:?} }};
console.log("force: " + JSON.stringify(await on.tool_call({{ toolName: "bash", toolCallId: "1", input: {{ command: "git push --force" }} }}, ctx)));
console.log("ls: " + JSON.stringify(await on.tool_call({{ toolName: "bash", toolCallId: "2", input: {{ command: "ls" }} }}, ctx)));
console.log("result: " + JSON.stringify(await on.tool_result({{ toolName: "bash", toolCallId: "2", input: {{}}, content: [{{ type: "text", text: "file1" }}], isError: false }}, ctx)));
console.log("input: " + JSON.stringify(await on.input({{ text: "hello" }}, ctx)));
"#,
            jiti = jiti().display().to_string(),
            pi = pi_index(&jiti()).display().to_string(),
            extension = extension.display().to_string(),
            dir = project.dir.display().to_string(),
        ),
    );
    assert!(
        out.contains("force: {\"block\":true,\"reason\":\"force push refused by guard\"}\n"),
        "{out}"
    );
    assert!(out.contains("ls: undefined\n"), "{out}");
    assert!(
        out.contains("{\"type\":\"text\",\"text\":\"repo note: run tests with nice\"}]}"),
        "{out}"
    );
    // The first prompt also carries the guard brief: Pi has no session-start context (issue 45).
    assert!(
        out.contains(
            "input: {\"action\":\"transform\",\"text\":\"hello\\n\\nrepo note: run tests with nice\\n\
             Guards in force here (belfry hooks): these actions are refused; do not attempt them.\\n\
             - no-force-push: refuses shell commands\"}\n"
        ),
        "{out}"
    );
}
