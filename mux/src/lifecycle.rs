//! Host lifecycle (spec §8): for a harness whose adapter declaration lists lifecycle events it
//! cannot fire itself (`host_lifecycle`), the daemon fires them through the same dispatcher the
//! harness's hooks call: session-start when the pane's program starts, session-end when it
//! exits. The declaration is data found by the adapter's name ([`crate::adapters`]); nothing here
//! knows a harness.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use belfry_proto::spec::LaunchSpec;
use belfry_proto::PaneEnv;

/// The part of an adapter's `declaration.json` the daemon needs. Named apart from the
/// `belfry.kdl` declarations of [`crate::declare`], which say what runs in a pane; this one says
/// what a harness is.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct AdapterDeclaration {
    /// Semantic events the harness fires natively (semantic → native event name).
    #[serde(default)]
    pub events: BTreeMap<String, String>,
    /// Semantic events the host fires for the harness.
    #[serde(default)]
    pub host_lifecycle: Vec<String>,
    /// The semantic event that is the harness's turn boundary (spec §7.5).
    #[serde(default)]
    pub turn_boundary: Option<String>,
    /// How the harness takes a charter (spec §11), if it does.
    #[serde(default)]
    pub charter: Option<CharterPlacement>,
    /// The hook events, besides the semantic `pre-compact`, by which the harness says it has
    /// compacted its context (spec §7.4: compaction invalidates the lease). A harness may
    /// report a compaction only as a `source` of another event, in words of its own; those
    /// words are data here so that the DING engine names none of them.
    #[serde(default)]
    pub compaction_events: Vec<HookSource>,
    /// When the harness starts accepting input (spec §10): a keystroke sent before then is
    /// lost, so DING holds its notices and `belfry doctor` reports the pane not ready.
    #[serde(default)]
    pub readiness: Option<Readiness>,
    /// What the harness needs on its command line and in its environment to behave under
    /// belfry, added to every pane of this adapter at launch (outside the generation, like a
    /// charter's flag).
    #[serde(default)]
    pub launch: Option<Launch>,
    /// How the harness runs a hook command: this argv with the command appended (for example
    /// a login shell, `["$SHELL", "-lc"]`, whose profile may reset `PATH`). `belfry doctor`
    /// checks that the projected hooks' `belfry` is found that way. `$SHELL` is the pane's.
    #[serde(default)]
    pub hook_shell: Vec<String>,
    /// The activity adapter this adapter ships (spec §7.4), which makes the rich DING policy
    /// the default for its panes where it can work.
    #[serde(default)]
    pub activity: Option<Activity>,
    /// How long a notice's transaction keeps the pane's input after its Enter (spec §7.3),
    /// for a harness that takes the Enter late and submits keys typed right after it too.
    #[serde(default)]
    pub notice_settle: Option<NoticeSettle>,
    /// Whether and how the harness reports its own state with OSC 7501 program status (issue
    /// 40), as checked against its released builds: `belfry doctor` can then say when a pane's
    /// harness should report and has not.
    #[serde(default)]
    pub program_status: Option<ProgramStatusDeclaration>,
    /// The session-start sources after which the harness waits for input once its ready
    /// screen shows (issue 40), which the activity adapter reads as idle on that screen: with
    /// neither this nor program status, mail under the rich policy waits for the first turn.
    #[serde(default)]
    pub fresh_start: Option<FreshStartDeclaration>,
}

/// See [`AdapterDeclaration::fresh_start`]; the activity adapter reads the same data.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FreshStartDeclaration {
    /// The `source` values of the session-start hook that count.
    pub sources: Vec<String>,
    /// How a prompt is given on the harness's command line (a launch with one has no
    /// `startup` fresh start); read by the activity adapter, kept here as it is.
    #[serde(default)]
    pub prompt_args: Option<serde_json::Value>,
    /// How it was proved, against which versions.
    pub why: String,
}

/// See [`AdapterDeclaration::program_status`]. Every field is data about one harness, checked
/// against the versions it names; the core reads it and names none of it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProgramStatusDeclaration {
    /// The harness versions checked, each with what was found (`emits` or not).
    pub checked: Vec<CheckedVersion>,
    /// Whether the harness reports only after the terminal answers the support query (a pane
    /// host answers it, so it reports in a belfry pane either way).
    pub needs_query: bool,
    /// The states it reports, and when.
    pub states: BTreeMap<String, String>,
    /// What each `blocked` kind it reports means for this harness.
    #[serde(default)]
    pub blocked_kinds: BTreeMap<String, String>,
    /// Where the facts come from.
    pub source: String,
}

/// One harness version checked for program status.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CheckedVersion {
    /// The version.
    pub version: String,
    /// Whether that version emits program status.
    pub emits: bool,
}

/// See [`AdapterDeclaration::notice_settle`].
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NoticeSettle {
    /// Milliseconds, at most the longest delay step a send takes.
    pub ms: u64,
    /// What was seen that needs it.
    pub why: String,
}

/// An adapter's activity executable: the command the rich policy runs beside the pane, and
/// the hook events it learns the harness's turns from. A pane declared with this adapter and
/// no DING policy of its own gets the rich policy when belfry's hooks are applied for the
/// harness in the pane's working directory and project each of `needs_hooks` exactly;
/// otherwise the aggressive one, because an activity adapter that never sees a turn end
/// holds every notice.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Activity {
    /// The adapter's argv (its program is looked up on the pane's `PATH` by the daemon).
    pub command: Vec<String>,
    /// The semantic hook events the adapter needs projected exactly.
    pub needs_hooks: Vec<String>,
    /// Why, quoted when the default falls back to the aggressive policy.
    pub why: String,
}

/// Arguments and environment an adapter adds to its harness's launch, with the reason.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// Appended to the pane's argv.
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the pane's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Why the harness needs them.
    pub why: String,
}

/// An adapter's readiness rule: the pane's program accepts input once it has run for
/// `after_ms` and, when `screen` is given, once that regular expression matches the screen
/// (its lines joined by newlines). Both are data because start-up screens change from one
/// release of a harness to the next.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Readiness {
    /// A regular expression that matches the screen once input is accepted.
    #[serde(default)]
    pub screen: Option<String>,
    /// The least time after the program starts before input is accepted, in milliseconds.
    #[serde(default)]
    pub after_ms: u64,
    /// What the rule stands for, quoted when a pane is not ready.
    pub why: String,
}

impl Readiness {
    /// Why a pane whose program has run for `age_ms` and shows `screen` is not ready yet, or
    /// `None` when it is. A `screen` pattern that does not compile is a reason too: a rule
    /// that cannot be checked never reports a pane ready.
    pub fn not_ready(&self, age_ms: u64, screen: &str) -> Option<String> {
        if age_ms < self.after_ms {
            return Some(format!(
                "it started {age_ms} ms ago and accepts input only after {} ms ({})",
                self.after_ms, self.why
            ));
        }
        let pattern = self.screen.as_deref()?;
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(screen) => None,
            Ok(_) => Some(format!(
                "its screen does not match the readiness pattern {pattern:?} yet ({})",
                self.why
            )),
            Err(err) => Some(format!(
                "the adapter's readiness pattern {pattern:?} does not compile: {err}"
            )),
        }
    }
}

/// A semantic hook event together with the value of its `source` field, as `belfry dispatch`
/// forwards them to the daemon (`{"op":"hook","hook":…,"source":…}`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HookSource {
    /// The semantic event (`session-start`, …).
    pub event: String,
    /// The harness's own word in the event's `source` field.
    pub source: String,
}

impl HookSource {
    /// Whether a forwarded hook event is this one.
    pub fn matches(&self, hook: &str, source: &str) -> bool {
        self.event == hook && self.source == source
    }
}

/// How a charter file reaches the program: a flag followed by the file's path, an
/// environment variable holding the path, or a file the program reads from its working
/// directory.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CharterPlacement {
    Flag(String),
    Env(String),
    File(String),
}

/// Fires one lifecycle event through `belfry dispatch`, in the pane's environment, and waits
/// for it (bounded). The dispatcher forwards it to the bus like any hook event.
pub async fn fire(exe: &Path, event: &str, spec: &LaunchSpec, pane_env: &PaneEnv) {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("dispatch").arg("--event").arg(event);
    if !spec.base_env.is_empty() {
        cmd.env_clear();
        cmd.envs(&spec.base_env);
    }
    cmd.envs(&spec.env);
    cmd.envs(pane_env.vars());
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let session = spec.session.as_str();
    let input = json!({"hook_event_name": event, "session_id": session,
        "cwd": spec.cwd, "transcript_path": null, "source": "belfry-host"});
    let Ok(mut child) = cmd.spawn() else {
        tracing::warn!(
            session,
            "cannot run dispatch for host lifecycle event {event}"
        );
        return;
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.to_string().as_bytes()).await;
    }
    match tokio::time::timeout(std::time::Duration::from_secs(30), child.wait()).await {
        Ok(_) => tracing::info!(session, "host fired {event}"),
        Err(_) => tracing::warn!(session, "host lifecycle {event} dispatch timed out"),
    }
}
