//! What the live tests of `belfry hooks` (`tests/tests/hooks_*_live.rs`) share: finding the
//! installed harness and the scripted model server, the guarded project every one of them
//! applies (a force-push guard and a notes enricher), the model's script that asks for the
//! forbidden command, and `belfry hooks apply` itself; and, for the per-cell proof
//! (`tests/tests/hooks_cells_live.rs`), the project with one observer per semantic event, the
//! run inside a loopback-only network namespace, and the verdict that holds each harness to
//! its capability matrix (`adapters/<target>/matrix.json`) through dispatch's own call log.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::belfry_bin;

/// `$variable`, else `default`; fails the test, naming both, when nothing is there.
pub fn found(variable: &str, default: PathBuf, what: &str) -> PathBuf {
    let path = std::env::var(variable)
        .map(PathBuf::from)
        .unwrap_or(default);
    assert!(
        path.exists(),
        "{what} is not at {} (set {variable}): this live test cannot run here",
        path.display()
    );
    path
}

/// Cargo's target directory (where `scripts/install-harnesses` puts the harnesses).
pub fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Writes `text` to `path` (making its directory), executable when asked.
pub fn write(path: &Path, text: &str, executable: bool) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|err| panic!("{err}"));
    }
    std::fs::write(path, text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    if executable {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
    }
}

/// The canonical hooks of the project every projection live test applies, for `target`: an
/// enforce guard that refuses a force push before the shell tool runs it (exit 2 and the
/// reason), and an enricher whose context, `note`, must reach the model.
pub fn guarded_project(project: &Path, target: &str, note: &str) {
    write(
        &project.join("scripts/guard.sh"),
        "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in *--force*) echo \"force push refused by the belfry guard\" >&2; exit 2;; esac\nexit 0\n",
        true,
    );
    write(
        &project.join("scripts/notes.sh"),
        &format!("#!/bin/sh\ncat >/dev/null\necho \"{note}: run the tests with nice\"\n"),
        true,
    );
    write(
        &project.join("belfry-hooks.kdl"),
        &format!(
            "hook \"no-force-push\" {{ event \"before-tool\"; intent \"enforce\"; select tool=\"shell\"; command \"scripts/guard.sh\"; failure \"closed\"; targets \"{target}\" }}\n\
             hook \"notes\" {{ event \"prompt-submit\"; command \"scripts/notes.sh\"; targets \"{target}\" }}\n"
        ),
        false,
    );
}

/// The model's script: a prompt with "push it" gets one shell call that would touch `marker`
/// and force-push, then a text answer; anything else the fallback.
pub fn force_push_script(path: &Path, marker: &Path) {
    write(
        path,
        &serde_json::json!({
            "turns": [{
                "match": "push it",
                "tool": { "command": format!("touch {} && echo git push --force origin main", marker.display()) },
                "then": { "text": "DONE-AFTER-TOOL" },
            }],
            "fallback": { "text": "FALLBACK" },
        })
        .to_string(),
        false,
    );
}

/// `belfry hooks apply` in `project`, with `home` as `HOME`; fails the test if it fails.
pub fn apply(project: &Path, home: &Path) {
    let apply = Command::new(belfry_bin())
        .args(["hooks", "apply"])
        .current_dir(project)
        .env("HOME", home)
        .env("BELFRY_HOOKS_DETECT", "0")
        .output()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stdout)
    );
}

/// The verdict every guarded run must reach, for the harness named `label`: it ended well and
/// answered after the tool; the refused command's side effect (`marker`) never happened; the
/// first request the model server logged (`requests`) carried the enricher's `note`; and some
/// request carried the guard's refusal.
pub fn assert_guarded_run(
    label: &str,
    output: &std::process::Output,
    marker: &Path,
    requests: &Path,
    note: &str,
) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{label}: {stdout}\n{stderr}");
    assert!(
        stdout.contains("DONE-AFTER-TOOL"),
        "{label}: {stdout}\n{stderr}"
    );
    assert!(
        !marker.exists(),
        "{label} ran the force push the guard refused"
    );
    let log = std::fs::read_to_string(requests).unwrap_or_default();
    let bodies: Vec<String> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|request| request["body"].to_string())
        .collect();
    assert!(
        bodies.first().is_some_and(|body| body.contains(note)),
        "{label}: the enrich hook's context did not reach the model: {log}"
    );
    assert!(
        bodies
            .iter()
            .any(|body| body.contains("force push refused by the belfry guard")),
        "{label}: the model never saw the refusal: {log}"
    );
}

/// The semantic events of the canonical hook file (docs/hooks.md), each a matrix cell.
pub const EVENTS: [&str; 12] = [
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

/// The text of the first scripted tool call, which the before-tool observer refuses.
pub const BLOCK_WORD: &str = "CELLS-BLOCK-ME";
/// The text of the second scripted tool call, which runs and which the after-tool observer
/// then refuses (a refusal after the fact: what the harness makes of it is the
/// `after-tool.deny` cell).
pub const AFTER_WORD: &str = "CELLS-RAN-THEN-FLAGGED";
/// The reasons the two refusals give, which the model server must (or must not) see.
pub const BEFORE_REFUSAL: &str = "CELLS-BEFORE-REFUSAL by the observer";
pub const AFTER_REFUSAL: &str = "CELLS-AFTER-REFUSAL by the observer";
/// A prompt holding this gets an API error (400) from the model server instead of an answer.
pub const FAIL_WORD: &str = "CELLS-FAIL-NOW";
/// The prompt of the cells run and the model's last answer.
pub const CELLS_PROMPT: &str = "please run the cells";
pub const CELLS_DONE: &str = "CELLS-DONE";

/// The harness's name and pinned version, e.g. `Claude Code 2.1.328`: the matrix's `harness`
/// and the version `tests/harnesses.json` pins (the one `scripts/install-harnesses` installs).
pub fn harness_label(target: &str) -> String {
    let pins = read_json(&repo_root().join("tests/harnesses.json"));
    let version = pins[target]["version"].as_str().unwrap_or("(no pin)");
    let matrix = matrix(&pin_adapter(target));
    let name = matrix["harness"].as_str().unwrap_or(target);
    format!("{name} {version}")
}

/// The pinned version of `target` in `tests/harnesses.json`.
pub fn pinned_version(target: &str) -> String {
    let pins = read_json(&repo_root().join("tests/harnesses.json"));
    pins[target]["version"]
        .as_str()
        .unwrap_or_else(|| panic!("tests/harnesses.json pins no version for {target}"))
        .to_string()
}

/// The adapter a pin drives: its `adapter` field, else the pin's own name (`pi1`, Pi 1.x's
/// pin, drives `adapters/pi`).
pub fn pin_adapter(target: &str) -> String {
    let pins = read_json(&repo_root().join("tests/harnesses.json"));
    pins[target]["adapter"]
        .as_str()
        .unwrap_or(target)
        .to_string()
}

/// `adapters/<target>/matrix.json`, as the repository holds it.
pub fn matrix(target: &str) -> Value {
    read_json(&repo_root().join(format!("adapters/{target}/matrix.json")))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// One cells run: a fresh project whose canonical file has one `observe` hook per semantic
/// event for one target, and the files the run leaves behind.
pub struct CellsRun {
    pub target: String,
    /// `<harness> <version>`, for every message.
    pub label: String,
    pub base: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
    /// Dispatch's own call log (`$BELFRY_DISPATCH_LOG`): one line per call the harness made.
    pub calls: PathBuf,
    /// The observers' log: `<event> <the hook's stdin on one line>` per handler run.
    pub observed: PathBuf,
    /// The model server's request log.
    pub requests: PathBuf,
    pub script: PathBuf,
    /// Touched by the first scripted command, which the before-tool observer refuses.
    pub blocked_marker: PathBuf,
    /// Touched by the second scripted command, which runs.
    pub ran_marker: PathBuf,
    /// While this file exists, the subagent-start observer prints its text: context for the
    /// subagent (a test that drives the `subagent-start.context` cell writes it).
    pub subagent_context: PathBuf,
    /// While this file has lines, the subagent-stop observer refuses with its first line as
    /// the reason and removes that line: one refusal per line (a test that drives the
    /// `subagent-stop.deny` cell writes it).
    pub subagent_refusal: PathBuf,
}

impl CellsRun {
    /// Writes the project: `scripts/observe.sh` (records its event and stdin; refuses a tool
    /// call holding [`BLOCK_WORD`] before it runs and one holding [`AFTER_WORD`] after it
    /// ran, by exit 2 with a reason, the refusal every handler may give; gives a subagent
    /// context or refuses its stop when the test arms [`CellsRun::subagent_context`] or
    /// [`CellsRun::subagent_refusal`]), the canonical
    /// file with one observer per event in [`EVENTS`] for `target`, and the model's script:
    /// [`CELLS_PROMPT`] gets the refused call, then the call that runs, then [`CELLS_DONE`].
    pub fn new(root: &Path, target: &str) -> CellsRun {
        let base = std::fs::canonicalize(root).unwrap_or_else(|err| panic!("{err}"));
        let project = base.join("project");
        let run = CellsRun {
            target: target.to_string(),
            label: harness_label(target),
            home: base.join("home"),
            calls: base.join("dispatch-calls.ndjson"),
            observed: base.join("observed.log"),
            requests: base.join("requests.ndjson"),
            script: base.join("script.json"),
            // In the project: a harness may refuse a command that writes outside it.
            blocked_marker: project.join("blocked-marker"),
            ran_marker: project.join("ran-marker"),
            subagent_context: base.join("subagent-context"),
            subagent_refusal: base.join("subagent-refusal"),
            project,
            base,
        };
        for dir in [run.home.clone(), run.project.join(".git")] {
            std::fs::create_dir_all(dir).unwrap_or_else(|err| panic!("{err}"));
        }
        write(
            &run.project.join("scripts/observe.sh"),
            &format!(
                "#!/bin/sh\n\
                 input=$(cat | tr '\\n' ' ')\n\
                 printf '%s %s\\n' \"$1\" \"$input\" >> {observed}\n\
                 case \"$1\" in\n\
                 subagent-start) [ -f {context} ] && cat {context};;\n\
                 subagent-stop) if [ -s {refusal} ]; then head -n 1 {refusal} >&2; sed -i 1d {refusal}; exit 2; fi;;\n\
                 esac\n\
                 case \"$1:$input\" in\n\
                 before-tool:*{BLOCK_WORD}*) echo '{BEFORE_REFUSAL}' >&2; exit 2;;\n\
                 after-tool:*{AFTER_WORD}*) echo '{AFTER_REFUSAL}' >&2; exit 2;;\n\
                 esac\n\
                 exit 0\n",
                observed = run.observed.display(),
                context = run.subagent_context.display(),
                refusal = run.subagent_refusal.display(),
            ),
            true,
        );
        let hooks: String = EVENTS
            .iter()
            .map(|event| {
                format!(
                    "hook \"observe-{event}\" {{ event \"{event}\"; intent \"observe\"; command \"scripts/observe.sh\" \"{event}\"; targets \"{target}\" }}\n"
                )
            })
            .collect();
        write(&run.project.join("belfry-hooks.kdl"), &hooks, false);
        run.script_turns(Vec::new());
        run
    }

    /// Writes the model's script: the cells turn (see [`CellsRun::new`]), a turn that fails
    /// with an API error for a prompt holding [`FAIL_WORD`] (for the `stop-failure` cell), and
    /// `extra` turns a harness's test adds.
    pub fn script_turns(&self, extra: Vec<Value>) {
        let mut turns = vec![
            serde_json::json!({
                "match": CELLS_PROMPT,
                "tool": { "command": format!("touch {} && echo {BLOCK_WORD}", self.blocked_marker.display()) },
                "then": {
                    "tool": { "command": format!("touch {} && echo {AFTER_WORD}", self.ran_marker.display()) },
                    "then": { "text": CELLS_DONE },
                },
            }),
            serde_json::json!({
                "match": FAIL_WORD,
                "error": { "status": 400, "message": "CELLS scripted API failure" },
            }),
        ];
        turns.extend(extra);
        write(
            &self.script,
            &serde_json::json!({ "turns": turns, "fallback": { "text": "FALLBACK" } }).to_string(),
            false,
        );
    }

    /// `belfry hooks apply` (and `extra` arguments) in the project with `env`; fails the test
    /// with apply's output if it fails, and returns that output.
    pub fn apply(&self, extra: &[&str], env: &[(&str, &Path)]) -> String {
        let mut command = Command::new(belfry_bin());
        command
            .args(["hooks", "apply"])
            .args(extra)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("BELFRY_HOOKS_DETECT", "0");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().unwrap_or_else(|err| panic!("{err}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{}: belfry hooks apply failed: {stdout}{}",
            self.label,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// Runs `harness` (a shell command line, which may use `$PORT`) in the project inside a
    /// loopback-only network namespace, after the model server listens and `prepare` (shell
    /// lines that may use `$PORT`) ran, with `belfry` first on `PATH`, `HOME` the run's home,
    /// `$BELFRY_DISPATCH_LOG` the call log, and `env` (see [`offline_run`]).
    pub fn run(
        &self,
        server: &Path,
        prepare: &str,
        harness: &str,
        env: &[(&str, String)],
    ) -> std::process::Output {
        let mut env = env.to_vec();
        env.push(("BELFRY_DISPATCH_LOG", self.calls.display().to_string()));
        offline_run(
            &OfflineRun {
                server,
                base: &self.base,
                cwd: &self.project,
                home: &self.home,
                script: &self.script,
                requests: &self.requests,
            },
            prepare,
            harness,
            &env,
        )
    }

    /// Dispatch's log lines for `event` from this target's projected entries.
    pub fn calls(&self, event: &str) -> Vec<Value> {
        ndjson(&self.calls)
            .into_iter()
            .filter(|call| call["event"] == event && call["native"] == self.target.as_str())
            .collect()
    }

    /// The stdin each observer of `event` received, parsed (`Null` where it was not JSON).
    pub fn observed(&self, event: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.observed).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .filter(|(name, _)| *name == event)
            .map(|(_, input)| serde_json::from_str(input).unwrap_or(Value::Null))
            .collect()
    }

    /// The bodies of every request the model server logged, as JSON text.
    pub fn request_bodies(&self) -> Vec<String> {
        ndjson(&self.requests)
            .into_iter()
            .map(|request| request["body"].to_string())
            .collect()
    }

    /// Whether any request the model saw holds `text`.
    pub fn model_saw(&self, text: &str) -> bool {
        self.request_bodies().iter().any(|body| body.contains(text))
    }

    /// `belfry hooks status` in the project with `env`, its stdout.
    pub fn status(&self, env: &[(&str, &Path)]) -> String {
        let mut command = Command::new(belfry_bin());
        command
            .args(["hooks", "status"])
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("BELFRY_HOOKS_DETECT", "0");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().unwrap_or_else(|err| panic!("{err}"));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The inert state (spec §9): once the harness's own setting switched its hooks off,
    /// `belfry hooks status` must say `inert` with `reason`, and a full cells turn
    /// (`run_turn`) must not call dispatch once. Run it after [`assert_cells`]: with the hooks
    /// off, the refused command runs.
    pub fn assert_inert(
        &self,
        reason: &str,
        status_env: &[(&str, &Path)],
        run_turn: impl FnOnce() -> std::process::Output,
    ) {
        let label = &self.label;
        let status = self.status(status_env);
        assert!(
            status.contains("inert") && status.contains(reason),
            "{label}: status does not report the hooks inert ({reason}): {status}"
        );
        let before = ndjson(&self.calls).len();
        let output = run_turn();
        assert!(
            String::from_utf8_lossy(&output.stdout).contains(CELLS_DONE),
            "{label}: the turn with the hooks off did not finish: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let after = ndjson(&self.calls).len();
        assert_eq!(
            before,
            after,
            "{label}: status says inert ({reason}), but the harness called dispatch\n{}",
            self.evidence()
        );
        println!(
            "inert: {label}: status says \"{}\"; a full turn called dispatch 0 times",
            status.trim()
        );
    }

    /// Prints how the run of a [`FAIL_WORD`] prompt ended and checks that the prompt reached
    /// the model server, so that the API error really happened.
    pub fn assert_failed_turn(&self, output: &std::process::Output) {
        println!(
            "{}: the turn the server failed: exit {:?}",
            self.label,
            output.status.code()
        );
        assert!(
            self.model_saw(FAIL_WORD),
            "{}: the failing prompt never reached the model server: {}{}",
            self.label,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Everything a failing assertion should show.
    pub fn evidence(&self) -> String {
        format!(
            "dispatch call log:\n{}\nobservers:\n{}",
            std::fs::read_to_string(&self.calls).unwrap_or_default(),
            std::fs::read_to_string(&self.observed).unwrap_or_default()
        )
    }
}

/// Where an offline harness run keeps its files: the scripted model server's binary, the
/// run's directory (its port file), the directory the harness runs in, its `HOME`, the
/// model's script and the server's request log.
pub struct OfflineRun<'a> {
    pub server: &'a Path,
    pub base: &'a Path,
    pub cwd: &'a Path,
    pub home: &'a Path,
    pub script: &'a Path,
    pub requests: &'a Path,
}

/// Runs `harness` (a shell command line, which may use `$PORT`) in `run.cwd` inside a
/// loopback-only network namespace (`unshare -n`), after the model server listens on
/// 127.0.0.1 and `prepare` (shell lines that may use `$PORT`) ran, with `belfry` first on
/// `PATH`, `HOME` set to `run.home`, and `env`. Returns the harness's exit and output.
pub fn offline_run(
    run: &OfflineRun,
    prepare: &str,
    harness: &str,
    env: &[(&str, String)],
) -> std::process::Output {
    let port = run.base.join("port");
    // A port file left by an earlier run of this project would be read before the new
    // server's redirection empties it (the redirection happens in the child, after the
    // fork), so it goes first.
    let runner = format!(
        "ip link set lo up\n\
             rm -f {port}\n\
             {server} --script {script} --log {requests} > {port} 2>/dev/null &\n\
             SERVER=$!\n\
             for i in $(seq 1 100); do [ -s {port} ] && break; sleep 0.1; done\n\
             PORT=$(head -1 {port} | tr -dc 0-9)\n\
             {prepare}\n\
             {harness}\n\
             STATUS=$?\n\
             kill $SERVER\n\
             exit $STATUS\n",
        server = run.server.display(),
        script = run.script.display(),
        requests = run.requests.display(),
        port = port.display(),
    );
    let path = format!(
        "{}:{}",
        crate::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("unshare");
    command
        .args(["-n", "sh", "-c", &runner])
        .current_dir(run.cwd)
        .env("PATH", path)
        .env("HOME", run.home)
        // A test run from inside a belfry pane must not hand the harness that pane's
        // identity or hooks file: the run's hooks are the ones it wrote.
        .env_remove("BELFRY_SESSION")
        .env_remove("BELFRY_HOOKS_FILE");
    for (name, value) in env {
        command.env(name, value);
    }
    command
        .output()
        .unwrap_or_else(|err| panic!("unshare -n: {err} (no network namespace here?)"))
}

/// The scripted model server (`belfry-model-server` beside `belfry`, or `$BELFRY_MODEL_SERVER`).
pub fn model_server() -> PathBuf {
    found(
        "BELFRY_MODEL_SERVER",
        crate::bin_dir().join("belfry-model-server"),
        "the scripted model server",
    )
}

/// The installed harness `target` at `relative` under the install directory
/// `scripts/install-harnesses` made for its pinned version (`$variable` overrides it).
pub fn harness_bin(target: &str, variable: &str, relative: &str) -> PathBuf {
    let version = pinned_version(target);
    // A pin with a Node.js of its own runs through the wrapper that puts it first on PATH
    // (`scripts/install-harnesses` writes it as bin/<bin>).
    let pins = read_json(&repo_root().join("tests/harnesses.json"));
    let wrapper;
    let relative = match (pins[target]["node"].as_str(), pins[target]["bin"].as_str()) {
        (Some(_), Some(bin)) => {
            wrapper = format!("bin/{bin}");
            wrapper.as_str()
        }
        _ => relative,
    };
    // The same folder `scripts/install-harnesses` and the pane tests (`live::Pin`) use.
    let root = std::env::var_os("BELFRY_HARNESS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("harnesses"));
    found(
        variable,
        root.join(format!("{target}-{version}/{relative}")),
        &format!("{target} {version}"),
    )
}

fn ndjson(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// How a cells test accounts for a cell it does not settle by the generic rule.
pub enum CellCheck<'a> {
    /// The run cannot drive the event; the reason is printed as `not exercised: …`.
    NotExercised(&'a str),
    /// A lossy cell the test checks itself, against its loss text; the note says what it
    /// checked and is printed.
    Checked(&'a str),
}

/// Holds one cells run to the target's matrix and prints its summary, every line naming the
/// harness and its version. For each semantic event: an `exact` cell must have made the
/// harness call `belfry dispatch` (the call log) and run the observer, unless `special` says it
/// is not exercised (printed, with the reason); an `unsupported` cell must not have made a
/// single call; a `lossy` cell must be in `special`, checked by the test or not exercised.
/// Then the deny cells the run drives: the refused call's side effect never happened and the
/// model saw the refusal (`before-tool.deny` exact or lossy); the flagged call did run, and
/// the model saw the after-the-fact refusal exactly when `after-tool.deny` is lossy (feedback)
/// and not when it is unsupported.
pub fn assert_cells(run: &CellsRun, output: &std::process::Output, special: &[(&str, CellCheck)]) {
    let label = &run.label;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains(CELLS_DONE),
        "{label}: the scripted turn did not finish (exit {:?}):\n{stdout}\n{stderr}\n{}",
        output.status.code(),
        run.evidence()
    );
    let matrix = matrix(&run.target);
    let cells = &matrix["cells"];
    let mut summary = Vec::new();
    for event in EVENTS {
        let cell = &cells[event];
        let status = cell["status"].as_str().unwrap_or("missing");
        let calls = run.calls(event);
        let found = special.iter().find(|(name, _)| *name == event);
        match (status, found) {
            ("exact", None) => {
                assert!(
                    !calls.is_empty(),
                    "{label}: the matrix calls {event} exact, but the harness never called belfry dispatch for it\n{}",
                    run.evidence()
                );
                assert!(
                    calls.iter().all(|call| call["handlers"] == 1),
                    "{label}: {event}: a call ran no observer: {calls:?}"
                );
                assert!(
                    !run.observed(event).is_empty(),
                    "{label}: {event}: dispatch was called but the observer never ran\n{}",
                    run.evidence()
                );
                summary.push(format!("{event} exact: dispatch called {}x", calls.len()));
            }
            ("unsupported", _) => {
                assert!(
                    calls.is_empty(),
                    "{label}: the matrix calls {event} unsupported ({}), but dispatch ran for it: {calls:?}",
                    cell["reason"]
                );
                summary.push(format!("{event} unsupported: no call"));
            }
            (_, Some((_, CellCheck::NotExercised(reason)))) => {
                println!(
                    "not exercised: {label} {event} ({status}): {reason} (calls seen: {})",
                    calls.len()
                );
                summary.push(format!("{event} {status}: not exercised"));
            }
            ("lossy", Some((_, CellCheck::Checked(note)))) => {
                summary.push(format!("{event} lossy ({}): {note}", cell["loss"]));
            }
            _ => panic!(
                "{label}: the matrix calls {event} {status} and the test has no rule for it; {}",
                run.evidence()
            ),
        }
    }
    summary.extend(assert_deny_cells(run, cells));
    println!("cells: {label}:");
    for line in &summary {
        println!("  {line}");
    }
}

/// The `before-tool.deny` and `after-tool.deny` cells of the run (see [`assert_cells`]).
fn assert_deny_cells(run: &CellsRun, cells: &Value) -> Vec<String> {
    let label = &run.label;
    let mut summary = Vec::new();
    let before = cells["before-tool.deny"]["status"].as_str().unwrap_or("");
    if before == "exact" || before == "lossy" {
        assert!(
            !run.blocked_marker.exists(),
            "{label}: before-tool.deny is {before}, but the refused command ran\n{}",
            run.evidence()
        );
        assert!(
            run.model_saw(BEFORE_REFUSAL),
            "{label}: before-tool.deny is {before}, but the model never saw the refusal\n{}",
            run.evidence()
        );
        summary.push(format!(
            "before-tool.deny {before}: the refused command never ran; the model saw the reason"
        ));
    }
    let after = &cells["after-tool.deny"];
    let status = after["status"].as_str().unwrap_or("");
    assert!(
        run.ran_marker.exists(),
        "{label}: the allowed command never ran\n{}",
        run.evidence()
    );
    // The observer refused after the tool ran; dispatch's answer (a deny, or the allow a
    // dialect that cannot block there degrades it to) names the reason either way.
    let refused_after = run.calls("after-tool").iter().any(|call| {
        call["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains(AFTER_REFUSAL))
    });
    let saw = run.model_saw(AFTER_REFUSAL);
    match status {
        "lossy" => {
            assert!(
                refused_after,
                "{label}: the after-tool observer's refusal never reached dispatch\n{}",
                run.evidence()
            );
            assert!(
                saw,
                "{label}: after-tool.deny is lossy ({}), but the model never saw the reason\n{}",
                after["loss"],
                run.evidence()
            );
            summary.push(format!(
                "after-tool.deny lossy ({}): the command ran and the model saw the reason",
                after["loss"]
            ));
        }
        "unsupported" => {
            assert!(
                !saw,
                "{label}: after-tool.deny is unsupported ({}), but the model saw the reason",
                after["reason"]
            );
            summary.push(format!(
                "after-tool.deny unsupported ({}): the command ran; {} and the model never saw the reason",
                after["reason"],
                if refused_after {
                    "the observer refused after it"
                } else {
                    "no after-tool call refused"
                }
            ));
        }
        other => summary.push(format!("after-tool.deny {other}: not driven by this run")),
    }
    summary
}
