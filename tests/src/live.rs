//! The live harness bench: real harnesses in real belfry panes, offline.
//!
//! A live test enters a loopback-only network namespace ([`enter_loopback_namespace`]), starts
//! the project's scripted model server on 127.0.0.1 ([`ModelServer`]), seeds a temporary home
//! from the harness's offline profile (`adapters/<name>/live.json`, [`Profile`]) and starts the
//! harness installed by `scripts/install-harnesses` at the version pinned in
//! `tests/harnesses.json` ([`Pin`]) in a belfry pane ([`Live`]). Everything a test starts runs
//! inside the namespace, so nothing can reach the network, and every process of the run carries
//! a marker variable, so the ones a harness leaves behind (a background server) are stopped by
//! their pids when the run ends.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{bin_dir, Env};

/// The workspace root (the tests crate's parent).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One harness pin from `tests/harnesses.json`. Its key names the install folder and the pane;
/// `adapter` (default: the key) the `adapters/` folder it drives and `profile` (default
/// `live.json`) the launch profile in it, so two majors of one harness (a package that moved)
/// are two pins of one adapter. `node` is the Node.js version a harness needs when the
/// machine's is too old (`scripts/install-harnesses` installs it beside the harness).
#[derive(Clone, Debug)]
pub struct Pin {
    pub name: String,
    pub adapter: String,
    pub profile: String,
    pub package: String,
    pub version: String,
    pub bin: String,
    pub node: Option<String>,
}

impl Pin {
    /// The pin named `name`; panics naming the file when it has none.
    pub fn load(name: &str) -> Pin {
        let path = workspace().join("tests/harnesses.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        let pins: Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{} is not JSON: {err}", path.display()));
        let pin = &pins[name];
        let field = |key: &str| {
            pin[key]
                .as_str()
                .unwrap_or_else(|| panic!("{}: {name}.{key} is missing", path.display()))
                .to_string()
        };
        let optional = |key: &str| pin[key].as_str().map(String::from);
        Pin {
            name: name.to_string(),
            adapter: optional("adapter").unwrap_or_else(|| name.to_string()),
            profile: optional("profile").unwrap_or_else(|| "live.json".to_string()),
            package: field("package"),
            version: field("version"),
            bin: field("bin"),
            node: optional("node"),
        }
    }

    /// Where `scripts/install-harnesses` put this harness.
    pub fn prefix(&self) -> PathBuf {
        let root = std::env::var_os("BELFRY_HARNESS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target/harnesses"));
        root.join(format!("{}-{}", self.name, self.version))
    }

    /// The installed executable, checked to be the pinned version; the error says how to
    /// install it.
    pub fn executable(&self) -> Result<PathBuf, String> {
        let prefix = self.prefix();
        // A harness with a Node.js of its own runs through the wrapper that puts it on PATH.
        let bin = match self.node {
            Some(_) => prefix.join("bin").join(&self.bin),
            None => prefix.join("node_modules/.bin").join(&self.bin),
        };
        let manifest = prefix
            .join("node_modules")
            .join(&self.package)
            .join("package.json");
        let installed = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|value| value["version"].as_str().map(String::from));
        match installed {
            Some(version) if version == self.version && bin.exists() => Ok(bin),
            Some(version) => Err(format!(
                "{} {} is installed in {}, not the pinned {}: run scripts/install-harnesses {}",
                self.package,
                version,
                prefix.display(),
                self.version,
                self.name
            )),
            None => Err(format!(
                "{}@{} is not installed in {}: run scripts/install-harnesses {} (it needs the npm registry)",
                self.package,
                self.version,
                prefix.display(),
                self.name
            )),
        }
    }
}

/// Enters a network namespace of this test's own whose only interface is `lo`, up. Only the
/// calling thread moves (`unshare(CLONE_NEWNET)` acts on the calling thread), and every process
/// it starts afterwards is born inside: the daemon, the panes, the harness and the model server
/// all share it. Without the privilege to do that (not root), a test already run under
/// `scripts/netns-run` is accepted when the namespace it is in shows only `lo`. Returns how the
/// namespace was made; the error says why none could be.
pub fn enter_loopback_namespace() -> Result<&'static str, String> {
    // SAFETY: unshare(2) with CLONE_NEWNET changes only the calling thread's network
    // namespace; it touches no memory of this process.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    let how = if rc == 0 {
        let up = Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .output()
            .map_err(|err| format!("cannot run `ip link set lo up` (iproute2): {err}"))?;
        if !up.status.success() {
            return Err(format!(
                "`ip link set lo up` failed in the new namespace: {}",
                String::from_utf8_lossy(&up.stderr).trim()
            ));
        }
        "unshare(CLONE_NEWNET) on the test thread"
    } else if std::env::var("BELFRY_NETNS").as_deref() == Ok("loopback") {
        "the namespace scripts/netns-run made"
    } else {
        return Err(format!(
            "cannot make a network namespace ({}): run as root, or run the tests under scripts/netns-run",
            std::io::Error::last_os_error()
        ));
    };
    let links = links()?;
    if links != ["lo".to_string()] {
        return Err(format!(
            "the namespace ({how}) has interfaces {links:?}, not only lo"
        ));
    }
    Ok(how)
}

/// The interface names `ip -o link` lists, as a process started now sees them.
pub fn links() -> Result<Vec<String>, String> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .map_err(|err| format!("cannot run `ip -o link show`: {err}"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .collect())
}

/// The project's scripted model server, running on 127.0.0.1 with a script and a request log.
pub struct ModelServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl ModelServer {
    /// Starts the server in `dir` with `script` and waits (10 s at most) for it to print its
    /// port.
    pub fn start(dir: &Path, script: &Value) -> ModelServer {
        let script_path = dir.join("model-script.json");
        std::fs::write(&script_path, script.to_string()).expect("write the model script");
        let log = dir.join("model-requests.ndjson");
        let bin = bin_dir().join("belfry-model-server");
        assert!(
            bin.exists(),
            "{} does not exist: build the binaries first (cargo build --workspace --bins)",
            bin.display()
        );
        let mut child = Command::new(&bin)
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start belfry-model-server");
        let stdout = child.stdout.take().expect("piped stdout");
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = send.send(line);
        });
        let line = receive
            .recv_timeout(Duration::from_secs(10))
            .expect("the model server printed no port within 10 s");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the model server printed {line:?}, not a port"));
        ModelServer { child, port, log }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request logged so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The logged model turns (requests the script answered), in order.
    pub fn turns(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|request| request["kind"] == "turn" || request["kind"] == "tool-result")
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A harness's offline profile, `adapters/<name>/live.json`.
#[derive(Clone)]
pub struct Profile {
    pub name: String,
    pub raw: Value,
}

/// The values a profile's placeholders take in one run.
pub struct Placeholders {
    pub bin: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    pub base_url: String,
}

impl Placeholders {
    fn fill(&self, text: &str) -> String {
        text.replace("{bin}", &self.bin.display().to_string())
            .replace("{home}", &self.home.display().to_string())
            .replace("{work}", &self.work.display().to_string())
            .replace("{base_url}", &self.base_url)
    }

    /// `value` with every placeholder filled, in keys and strings alike.
    fn fill_json(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.fill(text)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.fill_json(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, v)| (self.fill(key), self.fill_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

impl Profile {
    pub fn load(name: &str) -> Profile {
        Profile::load_file(name, "live.json")
    }

    /// The launch profile a pin names (its adapter's `live.json` unless it names another).
    pub fn for_pin(pin: &Pin) -> Profile {
        Profile::load_file(&pin.adapter, &pin.profile)
    }

    fn load_file(name: &str, file: &str) -> Profile {
        let path = workspace().join("adapters").join(name).join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        let raw = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{} is not JSON: {err}", path.display()));
        Profile {
            name: name.to_string(),
            raw,
        }
    }

    /// "Claude Code 2.1.328": what every live result names.
    pub fn label(&self) -> String {
        format!(
            "{} {}",
            self.raw["harness"].as_str().unwrap_or(&self.name),
            self.raw["harness_version"].as_str().unwrap_or("?")
        )
    }

    fn strings(&self, key: &str, fill: &Placeholders) -> Vec<String> {
        self.raw[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| fill.fill(s))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The command line, with `extra` arguments appended.
    pub fn argv(&self, fill: &Placeholders, extra: &[String]) -> Vec<String> {
        let mut argv = self.strings("argv", fill);
        argv.extend(extra.iter().cloned());
        argv
    }

    pub fn env(&self, fill: &Placeholders) -> Vec<(String, String)> {
        self.raw["env"]
            .as_object()
            .map(|map| {
                map.iter()
                    .filter_map(|(key, value)| Some((key.clone(), fill.fill(value.as_str()?))))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Writes the profile's seed files (`json` values or `text`).
    pub fn seed(&self, fill: &Placeholders) {
        for file in self.raw["files"].as_array().into_iter().flatten() {
            let path = PathBuf::from(fill.fill(file["path"].as_str().expect("file path")));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("create a seed directory");
            }
            let text = match (&file["json"], file["text"].as_str()) {
                (Value::Null, Some(text)) => fill.fill(text),
                (json, _) => {
                    serde_json::to_string_pretty(&fill.fill_json(json)).expect("JSON") + "\n"
                }
            };
            std::fs::write(&path, text)
                .unwrap_or_else(|err| panic!("cannot seed {}: {err}", path.display()));
        }
    }

    pub fn ready_regex(&self) -> String {
        self.raw["ready"]["screen"]
            .as_str()
            .expect("live.json ready.screen")
            .to_string()
    }

    pub fn ready_quiet_ms(&self) -> u64 {
        self.raw["ready"]["quiet_ms"].as_u64().unwrap_or(500)
    }

    pub fn ready_timeout_ms(&self) -> u64 {
        self.raw["ready"]["timeout_ms"].as_u64().unwrap_or(60_000)
    }

    pub fn submit_pause_ms(&self) -> u64 {
        self.raw["submit"]["pause_ms"].as_u64().unwrap_or(200)
    }

    /// The regex that says a permission dialog is open, if the harness has one.
    pub fn dialog_regex(&self) -> Option<String> {
        self.raw["dialog"]["screen"].as_str().map(String::from)
    }

    /// The regex that says a turn is running (the busy line a human watches), if the profile
    /// names one: it differs per harness and version, so it is data, not a test's constant.
    pub fn busy_regex(&self) -> Option<String> {
        self.raw["busy"]["screen"].as_str().map(String::from)
    }

    pub fn dialog_approve_keys(&self) -> Vec<String> {
        self.raw["dialog"]["approve"]
            .as_array()
            .map(|keys| {
                keys.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_else(|| vec!["Enter".into()])
    }
}

/// One live run: a namespace, a model server, a seeded home and a harness in a belfry pane.
pub struct Live {
    pub env: Env,
    pub server: ModelServer,
    pub profile: Profile,
    pub pin: Pin,
    pub session: String,
    pub work: PathBuf,
    pub home: PathBuf,
    /// The value of `BELFRY_LIVE_RUN` every process of this run carries.
    marker: String,
    pub started: Instant,
}

/// How a live run starts.
pub struct LiveOptions<'a> {
    pub script: Value,
    /// Arguments appended to the profile's command line.
    pub extra_args: Vec<String>,
    /// Environment added to the profile's (placeholders filled).
    pub extra_env: Vec<(String, String)>,
    pub size: &'a str,
    /// The work directory and home to run in instead of fresh ones under the run's directory
    /// (a test that lays out a project first, as the per-cell runs do).
    pub work: Option<PathBuf>,
    pub home: Option<PathBuf>,
    /// Runs after the profile's files are seeded and before the harness starts: what must see
    /// the seeded home (`belfry hooks apply --trust` writes into the seeded Codex config).
    pub prepare: Option<&'a dyn Fn()>,
    /// `belfry new` flags added before the command (`--adapter NAME`, a `--ding-delivery`
    /// policy and its `--ding-adapter` argv: the A/B evaluation's two arms).
    pub new_args: Vec<String>,
    /// The harness version to run instead of the pinned one (installed beside it): a test
    /// that proves one behaviour on the pin and on the newest release runs one body twice.
    pub version: Option<String>,
}

impl Default for LiveOptions<'_> {
    fn default() -> Self {
        LiveOptions {
            script: json!({"turns": []}),
            extra_args: Vec::new(),
            extra_env: Vec::new(),
            size: "40x120",
            work: None,
            home: None,
            prepare: None,
            new_args: Vec::new(),
            version: None,
        }
    }
}

impl Live {
    /// Starts `name` (a pin, and the adapter folder and launch profile it names) in a pane
    /// inside a fresh loopback-only namespace. Panics with the reason when the harness is not
    /// installed or no namespace can be made: a live test never passes without running.
    pub fn start(name: &str, options: LiveOptions) -> Live {
        let mut pin = Pin::load(name);
        let mut profile = Profile::for_pin(&pin);
        if let Some(version) = &options.version {
            // The profile names the version every result is labelled with.
            pin.version = version.clone();
            profile.raw["harness_version"] = Value::String(version.clone());
        }
        assert_eq!(
            profile.raw["harness_version"].as_str(),
            Some(pin.version.as_str()),
            "adapters/{}/{} and tests/harnesses.json's {name} name different versions",
            pin.adapter,
            pin.profile
        );
        let label = profile.label();
        let bin = pin
            .executable()
            .unwrap_or_else(|reason| panic!("live {label}: cannot run: {reason}"));
        let how = enter_loopback_namespace()
            .unwrap_or_else(|reason| panic!("live {label}: cannot run offline here: {reason}"));
        eprintln!("live {label}: in a loopback-only namespace ({how})");
        let env = Env::new();
        let server = ModelServer::start(env.dir.path(), &options.script);
        let work = options.work.clone().unwrap_or_else(|| env.path("work"));
        let home = options.home.clone().unwrap_or_else(|| env.path("home"));
        std::fs::create_dir_all(&work).expect("work dir");
        std::fs::create_dir_all(&home).expect("home dir");
        let fill = Placeholders {
            bin,
            home: home.clone(),
            work: work.clone(),
            base_url: server.base_url(),
        };
        profile.seed(&fill);
        if let Some(prepare) = options.prepare {
            prepare();
        }
        let marker = env
            .dir
            .path()
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let session = name.to_string();
        let mut args: Vec<String> = vec![
            "new".into(),
            session.clone(),
            "--size".into(),
            options.size.into(),
            "--cwd".into(),
            work.display().to_string(),
            "--env".into(),
            format!("BELFRY_LIVE_RUN={marker}"),
        ];
        let extra_env = options
            .extra_env
            .iter()
            .map(|(key, value)| (key.clone(), fill.fill(value)));
        for (key, value) in profile.env(&fill).into_iter().chain(extra_env) {
            args.push("--env".into());
            args.push(format!("{key}={value}"));
        }
        args.extend(options.new_args.iter().cloned());
        args.push("--".into());
        args.extend(profile.argv(&fill, &options.extra_args));
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        // A harness in a user's pane does not run under CI. The pane's environment is the
        // spawning command's, and `.ci/run`'s `CI=true` there makes Gemini CLI take its
        // terminal for a pipe and refuse to start interactively.
        let mut spawn = env.cmd(&arg_refs);
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key == "CI" || key == "CONTINUOUS_INTEGRATION" || key.starts_with("CI_") {
                spawn.env_remove(key.as_ref());
            }
        }
        let out = spawn.output().expect("run belfry new");
        assert!(
            out.status.success(),
            "belfry new {session} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Live {
            env,
            server,
            profile,
            pin,
            session,
            work,
            home,
            marker,
            started,
        }
    }

    pub fn label(&self) -> String {
        self.profile.label()
    }

    /// Runs `belfry wait` on this pane; true when every condition held before the timeout.
    pub fn wait(&self, regex: &str, quiet_ms: Option<u64>, timeout_ms: u64) -> bool {
        let timeout = timeout_ms.to_string();
        let mut args = vec![
            "wait",
            self.session.as_str(),
            "--regex",
            regex,
            "--timeout-ms",
            &timeout,
        ];
        let quiet = quiet_ms.map(|ms| ms.to_string());
        if let Some(quiet) = &quiet {
            args.extend(["--quiet-ms", quiet.as_str()]);
        }
        self.env.run(&args).status.success()
    }

    /// The screen as plain lines, for failure messages.
    pub fn screen(&self) -> String {
        self.env.ok(&["peek", &self.session])
    }

    /// `belfry peek --json` of this pane.
    pub fn peek_json(&self) -> Value {
        let out = self.env.ok(&["peek", &self.session, "--json"]);
        serde_json::from_str(&out).expect("peek --json prints JSON")
    }

    /// `belfry peek --json --cells` of this pane: the rows, the cursor and every cell run with
    /// its attributes (a placeholder's dim text tells it from a typed draft).
    pub fn peek_cells(&self) -> Value {
        let out = self.env.ok(&["peek", &self.session, "--json", "--cells"]);
        serde_json::from_str(&out).expect("peek --json --cells prints JSON")
    }

    /// Waits for the profile's readiness rule; panics with the screen when it never holds.
    /// Returns how long the harness took to be ready, from the pane's start.
    pub fn wait_ready(&self) -> Duration {
        let ready = self.profile.ready_regex();
        let ok = self.wait(
            &ready,
            Some(self.profile.ready_quiet_ms()),
            self.profile.ready_timeout_ms(),
        );
        assert!(
            ok,
            "live {}: not ready within {} ms (readiness: screen matches {ready:?}, quiet {} ms)\nscreen:\n{}",
            self.label(),
            self.profile.ready_timeout_ms(),
            self.profile.ready_quiet_ms(),
            self.screen()
        );
        self.started.elapsed()
    }

    /// A guarded send of `steps` (send arguments after the pane name): read the `expect` token
    /// with `peek --json`, then send only if the pane is still as seen. Retried a few times on
    /// a conflict (exit 3: the screen moved between the read and the send). Returns the send's
    /// JSON result.
    pub fn guarded_send(&self, steps: &[&str]) -> Value {
        let mut last = String::new();
        for _ in 0..20 {
            let token = self.peek_json()["expect"]
                .as_str()
                .expect("peek --json has an expect token")
                .to_string();
            let mut args = vec!["send", self.session.as_str(), "--expect", token.as_str()];
            args.extend_from_slice(steps);
            args.push("--json");
            let out = self.env.run(&args);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() {
                return serde_json::from_str(&text).expect("send --json prints JSON");
            }
            last = format!(
                "exit {:?}: {text} {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            );
            if out.status.code() != Some(3) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "live {}: guarded send {steps:?} failed: {last}",
            self.label()
        );
    }

    /// Submits `text` as the profile says: a guarded bracketed paste, a pause, Enter.
    pub fn submit(&self, text: &str) -> Value {
        let pause = self.profile.submit_pause_ms().to_string();
        self.guarded_send(&["--paste", text, "--delay-ms", &pause, "--key", "Enter"])
    }

    /// Waits (up to `timeout_ms`) until the screen matches `regex`, approving on the way each
    /// permission dialog the profile's `dialog.screen` rule recognises, with its `approve`
    /// keys through a guarded send. Returns how many dialogs were approved, or `None` when the
    /// screen never matched.
    pub fn wait_approving(&self, regex: &str, timeout_ms: u64) -> Option<usize> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let dialog = self.profile.dialog_regex();
        let mut approved = 0;
        while Instant::now() < deadline {
            if self.wait(regex, None, 1) {
                return Some(approved);
            }
            if let Some(dialog) = &dialog {
                if self.wait(dialog, None, 1) {
                    // Approve only a dialog that has finished drawing (quiet 500 ms): Claude Code
                    // ignored an Enter sent the moment its dialog appeared (the approval took a
                    // second Enter 5 s later in most full runs).
                    self.wait(dialog, Some(500), 5_000);
                    let keys = self.profile.dialog_approve_keys();
                    let mut steps: Vec<&str> = Vec::new();
                    for key in &keys {
                        steps.extend(["--key", key.as_str()]);
                    }
                    self.guarded_send(&steps);
                    approved += 1;
                    // The dialog closes when the harness has read the keys; never approve the
                    // same one twice.
                    let closed = Instant::now() + Duration::from_secs(5);
                    while Instant::now() < closed && self.wait(dialog, None, 1) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }

    /// Stops every process of this run that is still alive (a harness's background server
    /// outlives its pane): found by the marker variable in their environment, killed by pid.
    fn kill_leftovers(&self) {
        let needle = format!("BELFRY_LIVE_RUN={}", self.marker);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<i32>().ok())
            else {
                continue;
            };
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let marked = environ
                .split(|byte| *byte == 0)
                .any(|var| var == needle.as_bytes());
            if marked {
                // SAFETY: kill(2) on a process of this run (it carries this run's marker); it
                // touches no memory.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- live {}: model server requests ({}) ---",
                self.label(),
                self.server.log.display()
            );
            for request in self.server.requests() {
                eprintln!(
                    "{} {} {} kind={} turn={} last_user_text={:?}",
                    request["seq"],
                    request["method"].as_str().unwrap_or(""),
                    request["path"].as_str().unwrap_or(""),
                    request["kind"].as_str().unwrap_or(""),
                    request["turn"],
                    request["last_user_text"]
                        .as_str()
                        .map(|text| text.chars().rev().take(120).collect::<String>())
                        .map(|text| text.chars().rev().collect::<String>())
                        .unwrap_or_default()
                );
            }
        }
        self.env.shutdown();
        self.kill_leftovers();
    }
}

/// Unix ms of a log line's RFC 3339 UTC time (`2026-12-08T01:10:57.029768Z`).
pub fn log_time_ms(stamp: &str) -> Option<u64> {
    let (date, time) = stamp.trim_end_matches('Z').split_once('T')?;
    let mut ymd = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut parts = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (parts.next()??, parts.next()??, parts.next()??);
    let micros: i64 = format!("{frac:0<6}")[..6].parse().ok()?;
    // Days from the civil date (proleptic Gregorian), Howard Hinnant's formula.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + micros / 1000;
    u64::try_from(ms).ok()
}

/// A project folder and a home for a live pane with the rich policy: the adapter's example
/// hooks file (`examples/<adapter>/belfry-hooks.kdl`) copied into `work`, and [`apply`]
/// (`RichProject::apply`) projecting it there with `--trust`, to run as
/// [`LiveOptions::prepare`] once the harness's home is laid out.
pub struct RichProject {
    _root: tempfile::TempDir,
    /// The canonical temporary folder that holds the others (logs go beside them).
    pub base: PathBuf,
    /// The project folder the pane starts in.
    pub work: PathBuf,
    /// The harness's home.
    pub home: PathBuf,
}

impl RichProject {
    /// A fresh project for `adapter`.
    pub fn new(adapter: &str) -> RichProject {
        let root = tempfile::tempdir().expect("temp dir");
        let base = std::fs::canonicalize(root.path()).expect("canonical temp dir");
        let (work, home) = (base.join("work"), base.join("home"));
        std::fs::create_dir_all(&work).expect("work");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::copy(
            workspace().join(format!("examples/{adapter}/belfry-hooks.kdl")),
            work.join("belfry-hooks.kdl"),
        )
        .expect("copy the hooks file");
        RichProject {
            _root: root,
            base,
            work,
            home,
        }
    }

    /// `belfry hooks apply --trust` in the project, with the project's home.
    pub fn apply(&self) -> impl Fn() + 'static {
        let (work, home) = (self.work.clone(), self.home.clone());
        move || {
            let out = Command::new(crate::belfry_bin())
                .args(["hooks", "--dir"])
                .arg(&work)
                .args(["apply", "--trust"])
                .current_dir(&work)
                .env("HOME", &home)
                .env("PI_CODING_AGENT_DIR", home.join(".pi/agent"))
                .env("BELFRY_HOOKS_DETECT", "0")
                .output()
                .expect("belfry hooks apply");
            assert!(
                out.status.success(),
                "belfry hooks apply --trust: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `PATH` with the workspace's binaries first, so a hook's `belfry` is this build's.
pub fn path_with_workspace_bins() -> String {
    format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
