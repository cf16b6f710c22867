//! Issue 10, the A/B evaluation: the same scripted workload run against a real harness twice,
//! once with the aggressive DING policy (the default for a declared agent: every unread message
//! is pasted and submitted at once) and once with the rich policy (`turn-boundary+fresh-idle`:
//! the turn-stop continuation tier, and guarded keystrokes only under the activity adapter's
//! idle lease with a provably empty composer), and the two arms compared on what reached the
//! model, the collisions with the simulated human, the model calls and the delivery latency.
//! `bench/ab.sh` runs it and writes the tables; `docs/evaluation.md` reports a run.
//!
//! Each arm is one real harness in one belfry pane inside a loopback-only network namespace
//! against the project's scripted model server (`tests/src/live.rs`). A seeded workload drives
//! it: a simulated human submits tasks whose turns have random lengths (a streamed answer, a
//! shell tool that sleeps, or a shell tool the harness asks permission for, which the human
//! approves after a reaction time), types drafts into the composer at random moments and
//! later either submits or erases them; meanwhile messages are posted to the pane's inbox at
//! random moments. Collisions are detected from what the model server saw and what the pane
//! shows, as the loop runs (see [`Collision`]), each kept with the screens around it.
//!
//! What differs between the harnesses (Claude Code, Codex, OpenCode, Pi) is data the driver
//! reads ([`Harness`]): the live profile's busy line, dialog rule and the permission split
//! that lets a plain `sleep` run while the dialog task's command asks (`tool_dialogs`), and
//! the hook dialect's turn-stop continuation. A harness with no permission prompt (Pi) runs
//! the dialog tasks as ordinary tool tasks, and its report says so.
//!
//! Gated (`#[ignore]`): it needs the harnesses `scripts/install-harnesses` installed and the
//! privilege to make a network namespace. Knobs: `AB_SEED` (default 20261201), `AB_MESSAGES`
//! (messages per arm, default 100), `AB_TASKS` (the tasks the human runs to the end in each
//! arm, default 30, also after the last post), `AB_ARMS` (`aggressive,rich`), `AB_OUT` (where the
//! results go, default the system temp dir), `AB_VERSION` (a harness version installed beside
//! the pin, instead of the pin).
//!
//! Issue 40: every notice DING typed is checked against what the program had last reported of
//! itself through OSC 7501 when its guarded send was judged ([`status_collisions`]); in the
//! rich arm one typed while the program reported `working` or `blocked` fails the run. Run one harness with
//! `cargo test -p belfry-tests --test ab_eval -- --ignored --nocapture ab_claude` (`ab_codex`,
//! `ab_opencode`, `ab_pi`).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use belfry_tests::bin_dir;
use belfry_tests::live::{Live, LiveOptions, Pin, Profile};
use serde_json::{json, Value};

/// The rich policy's token.
const RICH: &str = "turn-boundary+fresh-idle";
/// How often the driver looks at the pane and the model server's log.
const TICK: Duration = Duration::from_millis(250);
/// A task whose end tag has not shown this long after it was submitted is given up (stuck):
/// the longest task (a permission dialog with a 6 s reaction, then an answer) takes ~15 s.
const TASK_GIVE_UP_MS: u64 = 60_000;
/// How long after the model asks for a tool the human starts no draft, unless the permission
/// dialog has shown or the tool has run: the dialog of a loaded machine's harness opens within
/// it (Gemini CLI 0.61.0: the same 250 ms tick in the 100-message rerun).
const TOOL_DIALOG_MS: u64 = 2_000;
/// After the last post, the run ends once nothing has progressed (a message reaching the
/// model, a task ending or given up) for this long.
const DRAIN_IDLE_MS: u64 = 120_000;

/// A small seeded generator (splitmix64): the workload must be the same in both arms and in
/// every run with the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// What one task's turn does.
#[derive(Clone, Debug)]
enum Task {
    /// A streamed answer of `words` words, `delay_ms` apart.
    Text { words: u64, delay_ms: u64 },
    /// A shell tool that sleeps `secs` seconds (no permission asked), then an answer.
    Tool { secs: u64 },
    /// A shell tool the harness asks permission for, then an answer.
    Dialog,
}

/// A draft the human types at `at_ms` and, `hold_ms` later, submits or erases.
#[derive(Clone, Debug)]
struct Draft {
    at_ms: u64,
    hold_ms: u64,
    submit: bool,
}

/// The seeded workload of one run, the same for both arms.
struct Workload {
    tasks: Vec<Task>,
    /// How many of `tasks` the human runs, in order, in each arm: the arms do the same work,
    /// so their model calls differ only by what delivery costs.
    task_count: usize,
    /// When each message is posted, in ms from the arm's start.
    posts: Vec<u64>,
    drafts: Vec<Draft>,
    /// The human's pause between one task's end and the next task, per task.
    gaps: Vec<u64>,
    /// The human's reaction time to each dialog, per task.
    reactions: Vec<u64>,
}

/// How the human's drafts go: the evaluation's mix, or every draft submitted, and more often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DraftMode {
    /// One every 10–30 s, held 3–9 s, then submitted or erased (half each).
    Mixed,
    /// One every 4–10 s, held 1–4 s, always submitted (`AB_DRAFTS=submit`): the race of a
    /// human's Enter with a notice (issue 39 item 9) met as often as a short run allows.
    Submit,
}

impl Workload {
    fn new(seed: u64, messages: usize, task_count: usize, drafts_mode: DraftMode) -> Workload {
        let mut rng = Rng(seed);
        let mut posts = Vec::new();
        let mut at = 4_000;
        for _ in 0..messages {
            at += rng.range(2_000, 8_000);
            posts.push(at);
        }
        let end = at;
        let mut drafts = Vec::new();
        let mut at = rng.range(5_000, 15_000);
        while at < end {
            if drafts_mode == DraftMode::Submit {
                let hold_ms = rng.range(1_000, 4_000);
                drafts.push(Draft {
                    at_ms: at,
                    hold_ms,
                    submit: true,
                });
                at += hold_ms + rng.range(4_000, 10_000);
                continue;
            }
            let hold_ms = rng.range(3_000, 9_000);
            drafts.push(Draft {
                at_ms: at,
                hold_ms,
                submit: rng.next().is_multiple_of(2),
            });
            at += hold_ms + rng.range(10_000, 30_000);
        }
        let count = (messages * 2 + 20).max(task_count);
        let mut tasks = Vec::new();
        let mut gaps = Vec::new();
        let mut reactions = Vec::new();
        for _ in 0..count {
            tasks.push(match rng.range(0, 9) {
                0..=4 => Task::Text {
                    words: rng.range(6, 30),
                    delay_ms: rng.range(80, 250),
                },
                5..=7 => Task::Tool {
                    secs: rng.range(1, 5),
                },
                _ => Task::Dialog,
            });
            gaps.push(rng.range(500, 4_000));
            reactions.push(rng.range(1_500, 6_000));
        }
        Workload {
            tasks,
            task_count,
            posts,
            drafts,
            gaps,
            reactions,
        }
    }
}

/// What differs between the harnesses under test, read from the harness's live profile
/// (`adapters/<harness>/live.json`: `busy`, `dialog`, `tool_dialogs`) and its hook dialect
/// (`adapters/<harness>/dialect.json`: whether a turn stop can continue), so a new harness or
/// version is a data change.
struct Harness {
    name: &'static str,
    profile: Profile,
    /// Arguments added to the profile's command line (`tool_dialogs.args`).
    extra_args: Vec<String>,
    /// Environment added to the profile's (`tool_dialogs.env`).
    extra_env: Vec<(String, String)>,
    /// What the harness shows while a turn runs: what the simulated human watches.
    busy: regex::Regex,
    /// What a permission dialog looks like; `None` for a harness that asks no permission
    /// (Pi), whose dialog tasks are then ordinary tool tasks.
    dialog: Option<regex::Regex>,
    /// Whether the harness's turn stop can continue the turn with a reason (the dialect's
    /// `continue_events` has `turn-stop`): only then is a notice inside other text a
    /// continuation rather than the prompt-submit hook's context added to the prompt.
    continues_at_turn_stop: bool,
    /// Whether the prompt-submit hook's context lands inside the prompt's own message (the
    /// profile's `context_in_prompt`: OpenCode, Pi, Gemini CLI) rather than beside it.
    context_in_prompt: bool,
    /// The adapter the pin drives (`opencode` for the pin `opencode2`).
    adapter: String,
}

impl Harness {
    fn of(name: &'static str) -> Harness {
        // A pin names the adapter it drives and its launch profile (`opencode2`: the
        // `opencode` adapter with `live-2.json`).
        let pin = Pin::load(name);
        let adapter = pin.adapter.clone();
        let profile = Profile::for_pin(&pin);
        let tool_dialogs = &profile.raw["tool_dialogs"];
        let extra_args = tool_dialogs["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        let extra_env = tool_dialogs["env"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
            .collect();
        let busy = profile.busy_regex().unwrap_or_else(|| {
            panic!("adapters/{name}/live.json has no busy.screen: the A/B human cannot tell a turn runs")
        });
        let busy = regex::Regex::new(&busy)
            .unwrap_or_else(|err| panic!("adapters/{name}/live.json busy.screen {busy:?}: {err}"));
        let dialog = profile.dialog_regex().map(|dialog| {
            regex::Regex::new(&dialog).unwrap_or_else(|err| {
                panic!("adapters/{name}/live.json dialog.screen {dialog:?}: {err}")
            })
        });
        let dialect_path = belfry_tests::live::workspace()
            .join("adapters")
            .join(&adapter)
            .join("dialect.json");
        let dialect: Value = std::fs::read_to_string(&dialect_path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| panic!("cannot read {} as JSON", dialect_path.display()));
        let continues_at_turn_stop = dialect["continue_events"]["turn-stop"].is_object();
        let context_in_prompt = profile.raw["context_in_prompt"]["value"].as_bool() == Some(true);
        Harness {
            name,
            adapter,
            profile,
            extra_args,
            extra_env,
            busy,
            dialog,
            continues_at_turn_stop,
            context_in_prompt,
        }
    }

    /// The scripted tool call of task `k`'s dialog task: its command prints `DIALOGRAN-k`, so
    /// the model server sees whether it ran. The profile's `tool_dialogs.dialog_tool` shapes
    /// it where a plain shell call would run without asking (Codex's escalation request); else
    /// it is a plain shell command, which the profile's `tool_dialogs` permission makes ask
    /// (Claude Code, OpenCode) or, for a harness with no dialog, simply runs.
    fn dialog_tool(&self, k: usize) -> Value {
        let command = format!("touch dialog-{k}.ran && echo DIALOGRAN-{k}");
        match self.profile.raw["tool_dialogs"].get("dialog_tool") {
            Some(template) => fill_command(template, &command),
            None => json!({"command": command}),
        }
    }
}

/// `template` with every `{command}` in its strings replaced by `command`.
fn fill_command(template: &Value, command: &str) -> Value {
    match template {
        Value::String(text) => Value::String(text.replace("{command}", command)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| fill_command(v, command)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| (key.clone(), fill_command(v, command)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn task_tag(k: usize) -> String {
    format!("TASK-{k:04}-GO")
}

fn end_tag(k: usize) -> String {
    format!("END-{k:04}-DONE")
}

fn draft_text(j: usize) -> String {
    format!("DRAFT-{j:03} a note the human is still writing")
}

/// The model server's script for the workload.
fn script(harness: &Harness, workload: &Workload) -> Value {
    let mut turns = Vec::new();
    for (k, task) in workload.tasks.iter().enumerate() {
        let end = end_tag(k);
        let turn = match task {
            Task::Text { words, delay_ms } => {
                let mut text: Vec<String> = (0..*words).map(|w| format!("word{w}")).collect();
                text.push(end);
                json!({"match": task_tag(k), "text": text.join(" "), "delay_ms": delay_ms})
            }
            Task::Tool { secs } => json!({"match": task_tag(k),
                "tool": {"command": format!("sleep {secs}")},
                "then": {"text": format!("slept {end}")}}),
            Task::Dialog => json!({"match": task_tag(k),
                "tool": harness.dialog_tool(k),
                "then": {"text": format!("ran {end}")}}),
        };
        turns.push(turn);
    }
    turns.push(json!({"match": "DRAFT-", "text": "DRAFT-SEEN"}));
    // The server answers the marker found latest in the last user message. Where the
    // prompt-submit context joins the prompt's own text, a notice turn would answer every task
    // prompt that carries mail as a notice and the task would never run, where a real model
    // would do the task and read the mail; there a notice alone gets the fallback.
    if !harness.context_in_prompt {
        turns.push(json!({"match": "[DING]", "text": "NOTICE-SEEN"}));
    }
    json!({"turns": turns, "fallback": {"text": "OK"}})
}

/// Whether the model server answered a turn with task `k`'s scripted turn (the script's turns
/// start with the tasks, in order, so task `k`'s is turn `k`): for a dialog task, whether the
/// model ever asked for the command the harness asks permission for.
fn model_asked_for_task(requests: &[Value], k: usize) -> bool {
    requests
        .iter()
        .any(|request| request["kind"] == "turn" && request["turn"].as_u64() == Some(k as u64))
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One posted message.
#[derive(Clone, Debug)]
struct Posted {
    id: String,
    posted_ms: u64,
    /// What the pane was doing when it was posted: idle, turn, tool or dialog.
    moment: &'static str,
    /// When the model server first saw its id, and in which kind of request.
    seen_ms: Option<u64>,
}

/// A collision: the notice did something to the human's work or to the agent's turn.
#[derive(Clone, Debug)]
struct Collision {
    kind: &'static str,
    detail: String,
    /// The screens the driver saw around it (the last one before and the one at detection).
    screens: Vec<String>,
}

/// The human's draft in progress.
struct ActiveDraft {
    j: usize,
    typed_ms: u64,
    decide_ms: u64,
    submit: bool,
}

/// What one arm measured.
struct ArmResult {
    arm: &'static str,
    /// The harness and the version the arm ran (`AB_VERSION` may name another than the pin).
    label: String,
    posted: Vec<Posted>,
    collisions: Vec<Collision>,
    /// Aborted turns that followed the human's own prompt (not a notice's): reported, not
    /// counted as collisions.
    human_aborts: Vec<String>,
    model_calls: usize,
    notice_calls: usize,
    auxiliary_calls: usize,
    tasks_done: usize,
    tasks_stuck: usize,
    dialogs_approved: usize,
    drafts_submitted: usize,
    drafts_erased: usize,
    /// Drafts the human submitted that reached the model in one request with a notice DING
    /// typed (see [`merged_draft`]).
    drafts_merged: usize,
    /// Notices DING typed (its guarded sends, from the daemon's log).
    notices_typed: usize,
    /// What the program reported of itself (OSC 7501) when each notice was typed.
    status_check: StatusCheck,
    tiers: BTreeMap<String, Vec<u64>>,
    seconds: u64,
    hold_reasons: BTreeMap<String, usize>,
}

fn id_of(name: &str) -> String {
    let name = name.trim();
    name[name.len() - 9..name.len() - 3].to_string()
}

/// The driver of one arm: the human, the poster and the live collision checks.
struct Driver<'a> {
    live: &'a Live,
    harness: &'a Harness,
    workload: &'a Workload,
    start: Instant,
    screens: VecDeque<String>,
    busy_seen_ms: u64,
    server_seen: usize,
    last_model_ms: u64,
    posted: Vec<Posted>,
    collisions: Vec<Collision>,
    human_aborts: Vec<String>,
    /// The current task, when its turn was submitted, and when the human approved its dialog.
    task: Option<(usize, u64)>,
    next_task: usize,
    next_task_ms: u64,
    dialog_seen_ms: Option<u64>,
    approved: BTreeMap<usize, u64>,
    ran: BTreeMap<usize, u64>,
    draft: Option<ActiveDraft>,
    next_draft: usize,
    submitted_drafts: BTreeMap<usize, u64>,
    flagged_drafts: Vec<usize>,
    /// Drafts found merged with a typed notice (see [`merged_draft`]), each reported once.
    merged_drafts: Vec<usize>,
    pending_cut: Option<u64>,
    /// When the model last answered with a tool call that no dialog or tool result has
    /// followed yet (unix ms): the moment a permission dialog may be about to open.
    tool_call_ms: Option<u64>,
    tasks_done: usize,
    tasks_stuck: usize,
    drafts_erased: usize,
}

impl<'a> Driver<'a> {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn screen(&self) -> String {
        self.screens.back().cloned().unwrap_or_default()
    }

    fn look(&mut self) {
        let out = self.live.env.run(&["peek", &self.live.session]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if self.harness.busy.is_match(&text) {
            self.busy_seen_ms = self.now();
        }
        self.screens.push_back(text);
        if self.screens.len() > 8 {
            self.screens.pop_front();
        }
    }

    /// Whether the screen shows `text`, also when the harness wrapped it across rows (OpenCode
    /// breaks a long answer inside a word: `END-0000-` on one row, `DONE` on the next).
    fn shows(&self, text: &str) -> bool {
        let compact = |s: &str| s.split_whitespace().collect::<String>();
        compact(&self.screen()).contains(&compact(text))
    }

    fn collide(&mut self, kind: &'static str, detail: String) {
        eprintln!("ab collision: {kind}: {detail}");
        let screens: Vec<String> = self.screens.iter().rev().take(2).rev().cloned().collect();
        self.collisions.push(Collision {
            kind,
            detail,
            screens,
        });
    }

    fn dialog_open(&self) -> bool {
        let screen = self.screen();
        self.harness
            .dialog
            .as_ref()
            .is_some_and(|dialog| dialog.is_match(&screen))
    }

    /// The human's view of idle: no dialog, nothing busy shown for 2 s, no model request in
    /// the last 2 s.
    fn human_idle(&self) -> bool {
        let now = self.now();
        !self.dialog_open()
            && now.saturating_sub(self.busy_seen_ms) >= 2_000
            && unix_ms().saturating_sub(self.last_model_ms) >= 2_000
    }

    /// The moment a message is posted at, as the workload categorises it.
    fn moment(&self) -> &'static str {
        if self.dialog_open() {
            return "dialog";
        }
        match self.task {
            Some((k, _)) => match self.workload.tasks[k] {
                Task::Tool { .. } | Task::Dialog
                    if self.ran.contains_key(&k) || self.tool_called(k) =>
                {
                    if self.ran.contains_key(&k) {
                        "turn"
                    } else {
                        "tool"
                    }
                }
                _ => "turn",
            },
            None if self.human_idle() => "idle",
            None => "turn",
        }
    }

    fn tool_called(&self, _k: usize) -> bool {
        // A tool call is under way once the task's turn request was answered with it and its
        // result has not come back: the screen's busy line shows then.
        self.harness.busy.is_match(&self.screen())
    }

    fn send(&self, steps: &[&str]) {
        let mut args = vec!["send", self.live.session.as_str()];
        args.extend_from_slice(steps);
        let out = self.live.env.run(&args);
        if !out.status.success() {
            eprintln!(
                "ab: the human's send {steps:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }

    fn post(&mut self, n: usize) {
        let body = self.live.work.join("../ab-body.md");
        let _ = std::fs::write(&body, "A message of the A/B workload; nothing to do.\n");
        let moment = self.moment();
        let posted_ms = unix_ms();
        let out = self.live.env.run(&[
            "inbox",
            "post",
            &self.live.session,
            "--from",
            "lead",
            "--subject",
            &format!("ab-{n:03}"),
            &body.display().to_string(),
        ]);
        let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success() && name.len() > 9,
            "inbox post failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.posted.push(Posted {
            id: id_of(&name),
            posted_ms,
            moment,
            seen_ms: None,
        });
    }

    /// Reads the requests the model server logged since the last look and checks each.
    fn read_server(&mut self) {
        let requests = self.live.server.requests();
        for request in requests.iter().skip(self.server_seen) {
            let kind = request["kind"].as_str().unwrap_or("");
            let at = request["unix_ms"].as_u64().unwrap_or(0);
            if kind == "stream-cut" {
                // Only a reply cut before its last piece is an aborted turn: Codex 0.169 often
                // closes the connection once it has the final event, before the chunked
                // body's terminator, which fails the terminator's write and nothing else.
                if request["pieces_written"].as_u64() < request["pieces"].as_u64() {
                    let cut = request["of_seq"].as_u64().unwrap_or(0);
                    // What cut the reply off is the prompt right after the cut request, which
                    // the server may log before the cut itself: a prompt submitted 0.2 s after
                    // a notice's (Codex, a person's steer) is logged before the notice turn's
                    // reply is found cut. Judged on that prompt, not on whatever comes next.
                    let next = requests.iter().find(|r| {
                        r["seq"].as_u64().is_some_and(|seq| seq > cut)
                            && (r["kind"] == "turn" || r["kind"] == "tool-result")
                    });
                    match next {
                        Some(next) => {
                            let text = next["last_user_text"].as_str().unwrap_or("").to_string();
                            self.judge_cut(cut, &text);
                        }
                        None => self.pending_cut = Some(cut),
                    }
                }
                continue;
            }
            if kind != "turn" && kind != "tool-result" {
                continue;
            }
            self.last_model_ms = at;
            let body = request["body"].to_string();
            for posted in self.posted.iter_mut() {
                if posted.seen_ms.is_none() && body.contains(&format!("[id:{}]", posted.id)) {
                    posted.seen_ms = Some(at);
                }
            }
            let text = request["last_user_text"].as_str().unwrap_or("").to_string();
            if let Some(cut) = self.pending_cut.take() {
                self.judge_cut(cut, &text);
            }
            if kind == "turn" {
                let k = request["turn"].as_u64().map(|k| k as usize);
                let tool_task = k.and_then(|k| self.workload.tasks.get(k));
                self.tool_call_ms =
                    matches!(tool_task, Some(Task::Tool { .. } | Task::Dialog)).then_some(at);
                self.check_prompt(&text);
                self.check_merged(&text, request["seq"].as_u64().unwrap_or(0));
            } else {
                self.tool_call_ms = None;
                for (k, task) in self.workload.tasks.iter().enumerate() {
                    if matches!(task, Task::Dialog)
                        && !self.ran.contains_key(&k)
                        && body.contains(&format!("DIALOGRAN-{k}"))
                    {
                        self.ran.insert(k, at);
                    }
                }
                // A harness with no permission dialog runs the dialog task's command as any
                // other tool: nothing to answer, so nothing a notice could answer.
                let unanswered: Vec<usize> = self
                    .ran
                    .keys()
                    .copied()
                    .filter(|k| self.harness.dialog.is_some() && !self.approved.contains_key(k))
                    .collect();
                for k in unanswered {
                    // Approved later by the human is impossible once it ran: mark it so it is
                    // reported once.
                    self.approved.insert(k, 0);
                    self.collide(
                        "dialog answered by a notice",
                        format!("the command of task {k}'s permission dialog ran (the model saw DIALOGRAN-{k}) before the human answered it"),
                    );
                }
            }
        }
        self.server_seen = requests.len();
    }

    /// The reply to request `cut` was cut off, and `text` is the prompt that followed it: a
    /// notice's prompt aborted the turn (a collision), a person's did (reported, not counted).
    fn judge_cut(&mut self, cut: u64, text: &str) {
        if text.contains("[DING]") && !text.contains("TASK-") && !text.contains("DRAFT-") {
            self.collide(
                "turn aborted by a notice",
                format!("the reply to request {cut} was cut off; the next prompt: {text:?}"),
            );
        } else {
            self.human_aborts.push(format!(
                "the reply to request {cut} was cut off; the next prompt: {text:?}"
            ));
        }
    }

    /// A human prompt (a task or a draft) that reached the model: corrupted when a notice is
    /// on the same line, submitted behind the human's back when the human never pressed Enter.
    fn check_prompt(&mut self, text: &str) {
        for line in text.lines() {
            if line.contains("[DING]") && (line.contains("DRAFT-") || line.contains("TASK-")) {
                self.collide(
                    "human text corrupted",
                    format!("one prompt line holds the human's text and a notice: {line:?}"),
                );
            }
        }
        let mut at = 0;
        while let Some(found) = text[at..].find("DRAFT-") {
            let start = at + found + 6;
            let digits: String = text[start..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            at = start;
            let Ok(j) = digits.parse::<usize>() else {
                continue;
            };
            if !self.submitted_drafts.contains_key(&j) && !self.flagged_drafts.contains(&j) {
                self.flagged_drafts.push(j);
                self.collide(
                    "draft submitted by a notice",
                    format!("draft {j} reached the model, but the human never submitted it"),
                );
            }
        }
    }

    /// A draft the human submitted, in one request with a notice DING typed (issue 39 item 9),
    /// found as the request arrives so that the screens around it are kept.
    fn check_merged(&mut self, text: &str, seq: u64) {
        if !text.contains("DRAFT-") || !text.contains("[id:") {
            return;
        }
        let typed = typed_notice_ids(&self.live.env.log_dir());
        let Some((j, id)) = merged_draft(text, &self.submitted_drafts, &typed) else {
            return;
        };
        if self.merged_drafts.contains(&j) {
            return;
        }
        self.merged_drafts.push(j);
        self.collide(
            "draft merged with a notice",
            format!(
                "draft {j}, which the human submitted, reached the model in request {seq} with \
                 the notice of message {id} that DING typed"
            ),
        );
    }

    /// The human: approves a dialog after a reaction time, types, submits and erases drafts,
    /// submits the next task when the agent is idle.
    fn human(&mut self, posting_done: bool) {
        let now = self.now();
        if self.dialog_open() {
            self.tool_call_ms = None;
            let seen = *self.dialog_seen_ms.get_or_insert(now);
            let k = self.task.map(|(k, _)| k);
            let reaction = k.map(|k| self.workload.reactions[k]).unwrap_or(2_000);
            if now >= seen + reaction {
                let keys = self.live.profile.dialog_approve_keys();
                let mut steps: Vec<&str> = Vec::new();
                for key in &keys {
                    steps.extend(["--key", key.as_str()]);
                }
                self.send(&steps);
                if let Some(k) = k {
                    self.approved.entry(k).or_insert_with(unix_ms);
                }
                self.dialog_seen_ms = None;
            }
            return;
        }
        self.dialog_seen_ms = None;
        if let Some((decide_ms, j, submit)) = self
            .draft
            .as_ref()
            .map(|d| (d.decide_ms, d.j, d.submit && !posting_done))
        {
            if now >= decide_ms {
                let text = draft_text(j);
                let present = self.shows(&text);
                if !present && !self.flagged_drafts.contains(&j) {
                    self.flagged_drafts.push(j);
                    self.collide(
                        "draft lost",
                        format!(
                            "draft {j} is no longer on the screen and the human did not submit it"
                        ),
                    );
                }
                if submit {
                    if !self.human_idle() && now < decide_ms + 60_000 {
                        return;
                    }
                    self.submitted_drafts.insert(j, unix_ms());
                    self.send(&["--key", "Enter"]);
                } else {
                    let mut steps = Vec::new();
                    for _ in 0..text.chars().count() + 2 {
                        steps.extend(["--key", "BSpace"]);
                    }
                    self.send(&steps);
                    self.drafts_erased += 1;
                }
                self.draft = None;
            }
            return;
        }
        // A permission dialog opens a moment after the model asks for a tool, and a draft typed
        // in that moment lands in the dialog, not the composer (Gemini CLI reads its digits as
        // the options: "DRAFT-013" chose "3. No, suggest changes" and cancelled the request),
        // which a human watching the screen would not do. So no new draft starts in the
        // TOOL_DIALOG_MS after a tool call until the dialog has shown or the tool has run.
        let dialog_may_open = self.harness.dialog.is_some()
            && self
                .tool_call_ms
                .is_some_and(|at| unix_ms() < at + TOOL_DIALOG_MS);
        if !posting_done && !dialog_may_open {
            if let Some(next) = self.workload.drafts.get(self.next_draft) {
                if now >= next.at_ms {
                    let j = self.next_draft;
                    self.next_draft += 1;
                    self.send(&["--text", &draft_text(j)]);
                    self.draft = Some(ActiveDraft {
                        j,
                        typed_ms: now,
                        decide_ms: now + next.hold_ms,
                        submit: next.submit,
                    });
                    return;
                }
            }
        }
        if let Some((k, started)) = self.task {
            if self.shows(&end_tag(k)) {
                self.task = None;
                self.tasks_done += 1;
                self.next_task_ms = now + self.workload.gaps[k];
            } else if now > started + TASK_GIVE_UP_MS {
                eprintln!(
                    "ab: task {k} did not end within {} s\n{}",
                    TASK_GIVE_UP_MS / 1000,
                    self.screen()
                );
                self.task = None;
                self.tasks_stuck += 1;
                self.next_task_ms = now + self.workload.gaps[k];
            }
            return;
        }
        // Tasks go on after the last post, until the pinned count is done in both arms.
        if now < self.next_task_ms || !self.human_idle() {
            return;
        }
        let k = self.next_task;
        if k >= self.workload.task_count {
            return;
        }
        self.next_task += 1;
        // The human submits as the profile says every harness takes a prompt: a bracketed
        // paste, a pause, Enter.
        let prompt = format!("{} please do the next step", task_tag(k));
        let pause = self.live.profile.submit_pause_ms().to_string();
        self.send(&["--paste", &prompt, "--delay-ms", &pause, "--key", "Enter"]);
        self.task = Some((k, now));
    }
}

/// Runs one arm; returns what it measured.
fn run_arm(harness: &Harness, workload: &Workload, arm: &'static str, out: &Path) -> ArmResult {
    let root = tempfile::Builder::new()
        .prefix(&format!("ab-{}-{arm}-", harness.name))
        .tempdir()
        .expect("temp dir");
    let work = root.path().join("work");
    let home = root.path().join("home");
    std::fs::create_dir_all(&work).expect("work");
    std::fs::create_dir_all(&home).expect("home");
    let calls = root.path().join("dispatch.ndjson");
    let mut new_args = vec!["--adapter".to_string(), harness.adapter.clone()];
    if arm == "rich" {
        let adapter = bin_dir().join("belfry-adapter");
        new_args.extend([
            "--ding-delivery".into(),
            RICH.into(),
            "--ding-adapter".into(),
            adapter.display().to_string(),
            "--ding-adapter=--provider".into(),
            "--ding-adapter".into(),
            harness.adapter.clone(),
        ]);
    }
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (work_c, home_c, name) = (work.clone(), home.clone(), harness.adapter.clone());
    let apply_hooks = move || {
        if arm != "rich" {
            return;
        }
        let kdl = belfry_tests::live::workspace()
            .join("examples")
            .join(&name)
            .join("belfry-hooks.kdl");
        std::fs::copy(&kdl, work_c.join("belfry-hooks.kdl")).expect("copy the hooks file");
        let apply = std::process::Command::new(belfry_tests::belfry_bin())
            .args(["hooks", "--dir"])
            .arg(&work_c)
            .args(["apply", "--trust"])
            .current_dir(&work_c)
            .env("HOME", &home_c)
            .env("CODEX_HOME", home_c.join(".codex"))
            .env("XDG_CONFIG_HOME", home_c.join(".config"))
            .env("BELFRY_HOOKS_DETECT", "0")
            .output()
            .expect("belfry hooks apply");
        assert!(
            apply.status.success(),
            "belfry hooks apply: {}{}",
            String::from_utf8_lossy(&apply.stdout),
            String::from_utf8_lossy(&apply.stderr)
        );
    };
    let live = Live::start(
        harness.name,
        LiveOptions {
            script: script(harness, workload),
            extra_args: harness.extra_args.clone(),
            extra_env: [
                ("PATH".to_string(), path),
                (
                    "BELFRY_DISPATCH_LOG".to_string(),
                    calls.display().to_string(),
                ),
            ]
            .into_iter()
            .chain(harness.extra_env.iter().cloned())
            .collect(),
            work: Some(work.clone()),
            home: Some(home.clone()),
            prepare: Some(&apply_hooks),
            new_args,
            version: std::env::var("AB_VERSION").ok().filter(|v| !v.is_empty()),
            ..LiveOptions::default()
        },
    );
    let label = live.label();
    // The program's own reports, from before it is ready: what it said when each notice was
    // typed is looked up in them once the arm is over (see `status_collisions`).
    let reports = StatusLog::follow(&live.env, &live.session);
    live.wait_ready();
    eprintln!("ab {label} {arm}: ready; {} messages", workload.posts.len());
    let mut driver = Driver {
        live: &live,
        harness,
        workload,
        start: Instant::now(),
        screens: VecDeque::new(),
        busy_seen_ms: 0,
        server_seen: 0,
        last_model_ms: 0,
        posted: Vec::new(),
        collisions: Vec::new(),
        human_aborts: Vec::new(),
        task: None,
        next_task: 0,
        next_task_ms: 0,
        dialog_seen_ms: None,
        approved: BTreeMap::new(),
        ran: BTreeMap::new(),
        draft: None,
        next_draft: 0,
        submitted_drafts: BTreeMap::new(),
        flagged_drafts: Vec::new(),
        merged_drafts: Vec::new(),
        pending_cut: None,
        tool_call_ms: None,
        tasks_done: 0,
        tasks_stuck: 0,
        drafts_erased: 0,
    };
    let mut next_post = 0;
    let mut progress = (0usize, 0usize);
    let mut last_progress_ms = 0u64;
    loop {
        driver.look();
        driver.read_server();
        let now = driver.now();
        while next_post < workload.posts.len() && workload.posts[next_post] <= now {
            driver.post(next_post);
            next_post += 1;
            if next_post.is_multiple_of(10) {
                eprintln!(
                    "ab {label} {arm}: {next_post} posted, {} seen by the model, {} collisions, {} s",
                    driver.posted.iter().filter(|p| p.seen_ms.is_some()).count(),
                    driver.collisions.len(),
                    now / 1000
                );
            }
        }
        let posting_done = next_post >= workload.posts.len();
        driver.human(posting_done);
        let seen = driver.posted.iter().filter(|p| p.seen_ms.is_some()).count();
        let now_progress = (seen, driver.tasks_done + driver.tasks_stuck);
        if now_progress != progress || !posting_done {
            progress = now_progress;
            last_progress_ms = now;
        }
        if posting_done {
            let all_seen = seen == driver.posted.len();
            let tasks_over = driver.next_task >= workload.task_count && driver.task.is_none();
            if (all_seen && tasks_over && driver.draft.is_none())
                || now > last_progress_ms + DRAIN_IDLE_MS
            {
                break;
            }
        }
        std::thread::sleep(TICK);
    }
    // Dialogs whose task ended without the command running and without the human answering:
    // a notice dismissed them. A dialog opens only once the model asks for the command; a task
    // whose prompt the model answered otherwise (the scripted model found a later marker in it)
    // never showed one, and is a stuck task, not a dialog a notice answered.
    let requests = live.server.requests();
    for (k, task) in workload.tasks.iter().enumerate().take(driver.next_task) {
        if matches!(task, Task::Dialog)
            && harness.dialog.is_some()
            && !driver.ran.contains_key(&k)
            && !driver.approved.contains_key(&k)
            && driver.task.map(|(t, _)| t) != Some(k)
        {
            if !model_asked_for_task(&requests, k) {
                eprintln!(
                    "ab: task {k}'s dialog never opened: the model never answered its prompt with the command"
                );
                continue;
            }
            driver.collide(
                "dialog answered by a notice",
                format!("task {k}'s permission dialog closed without the human and its command never ran"),
            );
        }
    }
    // Once more over every request, now that the daemon's log holds every notice it sent: a
    // notice logged a moment after the request that carried it is found here (without the
    // screens of its moment).
    for request in live.server.requests() {
        if request["kind"] == "turn" {
            let text = request["last_user_text"].as_str().unwrap_or("").to_string();
            driver.check_merged(&text, request["seq"].as_u64().unwrap_or(0));
        }
    }
    let typed = typed_notice_ids(&live.env.log_dir());
    let seconds = driver.start.elapsed().as_secs();
    let reports = reports.finish();
    let status_check = status_collisions(&typed_notices(&live.env.log_dir()), &reports);
    for (kind, detail) in &status_check.collisions {
        driver.collide(kind, detail.clone());
    }
    // Issue 40, for a harness that reports no program status: the hooks' own turn timeline.
    let (hook_checked, hook_collisions) =
        hook_turn_collisions(&typed_notices(&live.env.log_dir()), &calls);
    eprintln!(
        "ab {label} {arm}: {hook_checked} typed notices checked against the hooks' turns; {} typed into a turn the hooks showed running",
        hook_collisions.len()
    );
    for detail in hook_collisions {
        driver.collide("notice typed into a running turn (hooks)", detail);
    }
    let lost: Vec<String> = driver
        .posted
        .iter()
        .filter(|p| p.seen_ms.is_none())
        .map(|p| p.id.clone())
        .collect();
    for id in &lost {
        driver.collide(
            "notice lost",
            format!("message {id} never reached the model"),
        );
    }
    // The tier of each delivered message, from the request the model first saw its id in
    // (see `tier_of`).
    let mut tiers: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    for request in live.server.requests() {
        if request["kind"] != "turn" && request["kind"] != "tool-result" {
            continue;
        }
        let body = request["body"].to_string();
        let text = request["last_user_text"].as_str().unwrap_or("").trim();
        for posted in &driver.posted {
            let needle = format!("[id:{}]", posted.id);
            if first.contains_key(&posted.id) || !body.contains(&needle) {
                continue;
            }
            let tier = tier_of(arm, harness, text, &needle);
            first.insert(posted.id.clone(), tier.to_string());
        }
    }
    for posted in &driver.posted {
        let (Some(seen), Some(tier)) = (posted.seen_ms, first.get(&posted.id)) else {
            continue;
        };
        tiers
            .entry(tier.clone())
            .or_default()
            .push(seen.saturating_sub(posted.posted_ms));
    }
    let per_message: Vec<Value> = driver
        .posted
        .iter()
        .map(|p| {
            json!({"id": p.id, "posted_unix_ms": p.posted_ms, "moment": p.moment,
                "seen_unix_ms": p.seen_ms, "tier": first.get(&p.id)})
        })
        .collect();
    let requests = live.server.requests();
    let model_calls = requests
        .iter()
        .filter(|r| r["kind"] == "turn" || r["kind"] == "tool-result")
        .count();
    let notice_calls = requests
        .iter()
        .filter(|r| r["kind"] == "turn" || r["kind"] == "tool-result")
        .filter(|r| {
            r["last_user_text"]
                .as_str()
                .is_some_and(|t| t.contains("[DING]"))
        })
        .count();
    let auxiliary_calls = requests.iter().filter(|r| r["kind"] == "auxiliary").count();
    let status = live
        .env
        .run(&["ding", "status", &live.session, "--json"])
        .stdout;
    let status: Value = serde_json::from_slice(&status).unwrap_or(Value::Null);
    let mut hold_reasons = BTreeMap::new();
    for (key, value) in status["counters"].as_object().into_iter().flatten() {
        if let Some(n) = value.as_u64() {
            hold_reasons.insert(key.clone(), n as usize);
        }
    }
    let keep = out.join(format!("ab-{}-{arm}", harness.name));
    let _ = std::fs::create_dir_all(&keep);
    let _ = std::fs::copy(&live.server.log, keep.join("model-requests.ndjson"));
    let _ = std::fs::copy(&calls, keep.join("dispatch.ndjson"));
    let _ = std::fs::write(keep.join("ding-status.json"), status.to_string());
    let _ = std::fs::write(
        keep.join("program-status.json"),
        serde_json::to_string_pretty(&status_check.to_json()).unwrap_or_default(),
    );
    let _ = std::fs::write(
        keep.join("messages.json"),
        serde_json::to_string_pretty(&per_message).unwrap_or_default(),
    );
    let result = ArmResult {
        arm,
        label: label.clone(),
        posted: driver.posted.clone(),
        collisions: driver.collisions.clone(),
        human_aborts: driver.human_aborts.clone(),
        model_calls,
        notice_calls,
        auxiliary_calls,
        tasks_done: driver.tasks_done,
        tasks_stuck: driver.tasks_stuck,
        dialogs_approved: driver.approved.values().filter(|at| **at > 0).count(),
        drafts_submitted: driver.submitted_drafts.len(),
        drafts_erased: driver.drafts_erased,
        drafts_merged: driver.merged_drafts.len(),
        notices_typed: typed.len(),
        status_check,
        tiers,
        seconds,
        hold_reasons,
    };
    let _ = driver.draft.as_ref().map(|d| d.typed_ms);
    drop(driver);
    drop(live);
    result
}

/// The ids of the messages whose notice DING typed into the pane (its guarded sends): the
/// daemon logs each as `notice sent: <the notice>`. The notice of one message names its id;
/// a backlog's names every listed id.
fn typed_notice_ids(log_dir: &Path) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(log_dir) else {
        return ids;
    };
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for line in text.lines() {
            let Some(at) = line.find("notice sent: ") else {
                continue;
            };
            let mut rest = &line[at..];
            while let Some(found) = rest.find("[id:") {
                let id: String = rest[found + 4..]
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .collect();
                ids.insert(id);
                rest = &rest[found + 4..];
            }
        }
    }
    ids
}

/// The pane's own program status reports (OSC 7501) over an arm: the records the pane held
/// when the driver subscribed (`peek --json`), then every `program-status` event `belfry
/// events NAME --json` streamed.
struct StatusLog {
    child: std::process::Child,
    events: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    lagged: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Each record as the snapshot held it, as if its event: what came before the subscription.
    base: Vec<Value>,
}

/// What [`StatusLog::finish`] hands over: every change to the pane's records, in the order of
/// the revisions they arrived at, and how many events the subscriber missed.
struct Reports {
    changes: Vec<Value>,
    lagged: u64,
}

impl StatusLog {
    fn follow(env: &belfry_tests::Env, session: &str) -> StatusLog {
        use std::io::BufRead as _;
        let mut child = env
            .cmd(&["events", session, "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start belfry events");
        let stdout = child.stdout.take().expect("events stdout");
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lagged = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (events_w, lagged_w) = (events.clone(), lagged.clone());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                match event["event"].as_str() {
                    Some("program-status") => {
                        if let Ok(mut events) = events_w.lock() {
                            events.push(event);
                        }
                    }
                    Some("lagged") => {
                        let missed = event["missed"].as_u64().unwrap_or(1);
                        lagged_w.fetch_add(missed, std::sync::atomic::Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        });
        // Subscribed first, then the snapshot: a report in between is in both, and applying
        // it twice changes nothing.
        std::thread::sleep(Duration::from_millis(300));
        let snapshot: Value =
            serde_json::from_str(&env.ok(&["peek", session, "--json"])).unwrap_or(Value::Null);
        let base = snapshot["program_status"]["records"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|record| {
                json!({"id": record.get("id"), "new": record,
                    "revision": record["revision"], "cause": "snapshot"})
            })
            .collect();
        StatusLog {
            child,
            events,
            lagged,
            base,
        }
    }

    fn finish(mut self) -> Reports {
        // The last reports reach the stream within a moment of the pane's output.
        std::thread::sleep(Duration::from_millis(500));
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut changes = self.base;
        if let Ok(events) = self.events.lock() {
            changes.extend(events.iter().cloned());
        }
        // Stable: within one revision the stream's order stands.
        changes.sort_by_key(|change| change["revision"].as_u64().unwrap_or(0));
        Reports {
            changes,
            lagged: self.lagged.load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

/// One notice DING typed, from the daemon's log line `notice sent: …` and its
/// `judged_revision` field: the pane revision the guarded send was judged at. The pane host
/// writes a guarded send only while the pane is still at that revision, and every program
/// status report is output that moves it, so the records as of that revision are exactly what
/// the program had last reported when the notice's first byte went in.
struct TypedNotice {
    logged_at: String,
    judged_revision: Option<u64>,
    ids: Vec<String>,
}

/// The longest a notice's transaction takes from its first byte to the daemon's `notice sent`
/// line (paste, the harness's settle, Enter): a bound, so that a turn the hooks show running
/// this long before the line and not ended by it was running when the notice went in.
const NOTICE_SPAN_MS: u64 = 3_000;

/// Issue 40, for a harness that reports no program status: every notice typed while its own
/// hooks showed a turn running. A turn starts with a `prompt-submit` or tool hook and ends with
/// `turn-stop` (or `interrupt`), as the dispatch call log has them; a notice whose `notice sent`
/// line is at `t` went in at or after `t - NOTICE_SPAN_MS`, so a turn running at that moment
/// with no end up to `t` ran under it. Sound, not complete: a turn that began inside the span
/// is not judged (the lease ends at its prompt-submit, spec §7.4). Returns how many notices
/// were checked and the collisions.
fn hook_turn_collisions(typed: &[TypedNotice], calls: &Path) -> (usize, Vec<String>) {
    let hooks: Vec<(u64, String)> = std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|call| Some((call["ms"].as_u64()?, call["event"].as_str()?.to_string())))
        .collect();
    if hooks.is_empty() {
        return (0, Vec::new());
    }
    let starts = |event: &str| matches!(event, "prompt-submit" | "before-tool" | "after-tool");
    let ends = |event: &str| matches!(event, "turn-stop" | "interrupt");
    let mut checked = 0;
    let mut collisions = Vec::new();
    for notice in typed {
        let Some(sent) = belfry_tests::live::log_time_ms(&notice.logged_at) else {
            continue;
        };
        checked += 1;
        let probe = sent.saturating_sub(NOTICE_SPAN_MS);
        let last = hooks
            .iter()
            .filter(|(ms, event)| *ms <= probe && (starts(event) || ends(event)))
            .max_by_key(|(ms, _)| *ms);
        let ended = hooks
            .iter()
            .any(|(ms, event)| *ms > probe && *ms <= sent && ends(event));
        if let Some((at, event)) = last.filter(|(_, event)| starts(event) && !ended) {
            collisions.push(format!(
                "notice {:?} sent at {sent} ms: a turn ran from its {event} at {at} ms with no \
                 turn-stop before the notice",
                notice.ids
            ));
        }
    }
    (checked, collisions)
}

fn typed_notices(log_dir: &Path) -> Vec<TypedNotice> {
    let mut notices = Vec::new();
    let Ok(entries) = std::fs::read_dir(log_dir) else {
        return notices;
    };
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for line in text.lines() {
            let Some(at) = line.find("notice sent: ") else {
                continue;
            };
            let judged_revision = line.find("judged_revision=").and_then(|found| {
                line[found + 16..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .ok()
            });
            let mut ids = Vec::new();
            let mut rest = &line[at..];
            while let Some(found) = rest.find("[id:") {
                ids.push(
                    rest[found + 4..]
                        .chars()
                        .take_while(char::is_ascii_alphanumeric)
                        .collect(),
                );
                rest = &rest[found + 4..];
            }
            notices.push(TypedNotice {
                logged_at: line.split_whitespace().next().unwrap_or("").to_string(),
                judged_revision,
                ids,
            });
        }
    }
    notices
}

/// Every notice DING typed, checked against what the program had last reported of itself
/// then (issue 40: no notice is ever typed while it reports `working` or `blocked`).
#[derive(Clone, Debug, Default)]
struct StatusCheck {
    /// Program status changes seen over the arm (events and the first snapshot's records).
    reports: usize,
    /// How often each state was reported (`blocked:permission` with its kind).
    reported: BTreeMap<String, usize>,
    /// Events the subscriber missed: a check over a stream with gaps is not a proof.
    lagged: u64,
    /// Notices whose judged revision the log gave, and those it did not.
    checked: usize,
    unchecked: usize,
    /// The program's records when each checked notice was typed (`none` when it had
    /// reported nothing yet), counted.
    states_at_typing: BTreeMap<String, usize>,
    collisions: Vec<(&'static str, String)>,
    notices: Vec<Value>,
}

impl StatusCheck {
    fn to_json(&self) -> Value {
        json!({"reports": self.reports, "reported": self.reported, "lagged": self.lagged,
            "notices_checked": self.checked, "notices_unchecked": self.unchecked,
            "states_at_typing": self.states_at_typing,
            "typed_while_working_or_blocked": self.collisions.len(),
            "notices": self.notices})
    }
}

/// `state` or `state:kind` of one record.
fn record_words(record: &Value) -> String {
    match (record["state"].as_str(), record["kind"].as_str()) {
        (Some(state), Some(kind)) => format!("{state}:{kind}"),
        (Some(state), None) => state.to_string(),
        _ => "?".to_string(),
    }
}

fn status_collisions(typed: &[TypedNotice], reports: &Reports) -> StatusCheck {
    let mut check = StatusCheck {
        reports: reports.changes.len(),
        lagged: reports.lagged,
        ..StatusCheck::default()
    };
    for change in &reports.changes {
        if change["cause"] != "snapshot" && !change["new"].is_null() {
            *check
                .reported
                .entry(record_words(&change["new"]))
                .or_default() += 1;
        }
    }
    for notice in typed {
        let Some(revision) = notice.judged_revision else {
            check.unchecked += 1;
            continue;
        };
        check.checked += 1;
        // The records as of `revision`: every change that arrived at or before it, in order.
        let mut records: BTreeMap<String, Value> = BTreeMap::new();
        for change in &reports.changes {
            if change["revision"].as_u64().unwrap_or(0) > revision {
                break;
            }
            let id = change["id"].as_str().unwrap_or("").to_string();
            if change["new"].is_null() {
                records.remove(&id);
            } else {
                records.insert(id, change["new"].clone());
            }
        }
        let words: Vec<String> = records.values().map(record_words).collect();
        let said = if words.is_empty() {
            "none".to_string()
        } else {
            words.join(",")
        };
        *check.states_at_typing.entry(said.clone()).or_default() += 1;
        let busy = records
            .values()
            .any(|record| record["state"] == "working" || record["state"] == "blocked");
        if busy {
            check.collisions.push((
                "notice typed while the program reported working or blocked",
                format!(
                    "the notice of {:?} (logged {}) was typed at revision {revision}, when the \
                     program's last reports said {said}",
                    notice.ids, notice.logged_at
                ),
            ));
        }
        check
            .notices
            .push(json!({"ids": notice.ids, "logged_at": notice.logged_at,
            "judged_revision": revision, "program_status": said}));
    }
    check
}

/// The submitted draft a request's last user text carries together with a notice DING typed,
/// and that message's id. A notice the prompt-submit hook added to the draft's request as
/// context is delivery, not a merge: that message was never typed.
fn merged_draft(
    text: &str,
    submitted: &BTreeMap<usize, u64>,
    typed: &std::collections::BTreeSet<String>,
) -> Option<(usize, String)> {
    let j = *submitted
        .keys()
        .find(|j| text.contains(&format!("DRAFT-{j:03} ")))?;
    let id = typed
        .iter()
        .find(|id| text.contains(&format!("[id:{id}]")))?;
    Some((j, id.clone()))
}

/// The tier a message reached the model through, read from the request that first carried
/// its id (`needle`, `[id:xxxxxx]`) and that request's last user text:
/// - the notice on one line with the human's text (a task or a draft): pasted into it, a
///   collision, its own tier in either arm;
/// - in the aggressive arm anything else is the paste: that arm has no hooks;
/// - the first line of the text is the notice itself: typed, the rich policy's guarded idle
///   send (DING types one notice line per send);
/// - the notice further down the text: the turn stop's continuation reason for a harness
///   whose stop can continue ("Stop hook feedback" in Claude Code, a hook prompt in Codex),
///   otherwise the prompt-submit hook's context, which OpenCode adds as a text part of the
///   user's message and Pi appends to the prompt's text;
/// - the id outside the last user text: the prompt-submit hook's added context.
fn tier_of(arm: &str, harness: &Harness, text: &str, needle: &str) -> &'static str {
    let mut lines = text.lines();
    let first_line = lines.next().unwrap_or("");
    let notice_line = text.lines().find(|line| line.contains(needle));
    match notice_line {
        Some(line) if line.contains("TASK-") || line.contains("DRAFT-") => {
            "pasted into the human's text"
        }
        Some(_) if arm == "aggressive" && first_line.starts_with("[DING]") => "aggressive paste",
        // The aggressive arm applies no hooks: a paste the harness queued mid-turn and handed
        // over inside other text (Claude Code wraps it, "The user sent a new message while you
        // were working", into the next tool result).
        _ if arm == "aggressive" => "aggressive paste, queued mid-turn",
        Some(_) if first_line.starts_with("[DING]") && first_line.contains(needle) => {
            "guarded idle send"
        }
        // Where the context joins the prompt's own message (Gemini CLI) and the turn stop can
        // also continue, the continuation is a message of its own that begins with its reason,
        // while the context follows a prompt that begins with the human's text or a notice.
        Some(_)
            if harness.continues_at_turn_stop
                && !(harness.context_in_prompt
                    && ["TASK-", "DRAFT-", "[DING]"]
                        .iter()
                        .any(|start| first_line.starts_with(start))) =>
        {
            "turn-stop continuation"
        }
        _ => "prompt-submit context",
    }
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(values: &[u64], p: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn report(
    label: &str,
    seed: u64,
    messages: usize,
    tasks: usize,
    notes: &[String],
    arms: &[ArmResult],
) -> (String, Value) {
    let mut md =
        format!("### {label}: seed {seed}, {messages} messages and {tasks} tasks per arm\n\n");
    for note in notes {
        md.push_str(&format!("{note}\n\n"));
    }
    md.push_str(&format!(
        "\
         | arm | posted | reached the model | collisions | model calls | calls with a notice | calls per delivered message | tasks done (stuck) of {tasks} | dialogs approved by the human | drafts submitted / erased | drafts merged with a notice | notices typed | seconds |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    ));
    let mut json_arms = Vec::new();
    for arm in arms {
        let delivered = arm.posted.iter().filter(|p| p.seen_ms.is_some()).count();
        let per = if delivered > 0 {
            arm.model_calls as f64 / delivered as f64
        } else {
            0.0
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} ({}) | {} | {} / {} | {} | {} | {} |\n",
            arm.arm,
            arm.posted.len(),
            delivered,
            arm.collisions.len(),
            arm.model_calls,
            arm.notice_calls,
            per,
            arm.tasks_done,
            arm.tasks_stuck,
            arm.dialogs_approved,
            arm.drafts_submitted,
            arm.drafts_erased,
            arm.drafts_merged,
            arm.notices_typed,
            arm.seconds
        ));
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &arm.collisions {
            *kinds.entry(c.kind).or_default() += 1;
        }
        let mut moments: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &arm.posted {
            *moments.entry(p.moment).or_default() += 1;
        }
        json_arms.push(json!({
            "arm": arm.arm, "posted": arm.posted.len(), "delivered": delivered,
            "collisions": arm.collisions.len(), "collision_kinds": kinds,
            "moments": moments,
            "model_calls": arm.model_calls, "notice_calls": arm.notice_calls,
            "auxiliary_calls": arm.auxiliary_calls,
            "tasks_done": arm.tasks_done, "tasks_stuck": arm.tasks_stuck,
            "drafts_submitted": arm.drafts_submitted, "drafts_erased": arm.drafts_erased,
            "drafts_merged": arm.drafts_merged, "notices_typed": arm.notices_typed,
            "human_aborts": arm.human_aborts,
            "latency_ms": arm.tiers.iter().map(|(tier, v)| {
                let mut v = v.clone();
                v.sort_unstable();
                (tier.clone(), json!({"n": v.len(), "p50": percentile(&v, 50.0),
                    "p90": percentile(&v, 90.0), "max": v.last().copied().unwrap_or(0)}))
            }).collect::<BTreeMap<_, _>>(),
            "ding_counters": arm.hold_reasons,
            "program_status": {
                "reports": arm.status_check.reports,
                "reported": arm.status_check.reported,
                "lagged": arm.status_check.lagged,
                "notices_checked": arm.status_check.checked,
                "notices_unchecked": arm.status_check.unchecked,
                "states_at_typing": arm.status_check.states_at_typing,
                "typed_while_working_or_blocked": arm.status_check.collisions.len(),
            },
            "seconds": arm.seconds,
        }));
    }
    md.push_str("\nCollisions by kind, moments of the posts, delivery latency per tier (post → the model server sees the id):\n\n");
    for (arm, j) in arms.iter().zip(&json_arms) {
        md.push_str(&format!(
            "- {}: collisions {}; posted at {}; latency {}; human-caused aborts {}\n",
            arm.arm,
            j["collision_kinds"],
            j["moments"],
            j["latency_ms"],
            arm.human_aborts.len()
        ));
    }
    md.push_str("\nWhat the program reported of itself (OSC 7501) when DING typed each notice (the records as of the revision the guarded send was judged at):\n\n");
    for arm in arms {
        let check = &arm.status_check;
        md.push_str(&format!(
            "- {}: {} notices typed, {} checked ({} without a judged revision); typed while working or blocked: {}; the program's records then: {:?}; {} reports over the arm {:?}, {} events missed\n",
            arm.arm,
            arm.notices_typed,
            check.checked,
            check.unchecked,
            check.collisions.len(),
            check.states_at_typing,
            check.reports,
            check.reported,
            check.lagged
        ));
    }
    for arm in arms {
        for (n, c) in arm.collisions.iter().enumerate() {
            md.push_str(&format!(
                "\n#### {} collision {}: {}\n\n{}\n\n",
                arm.arm,
                n + 1,
                c.kind,
                c.detail
            ));
            for screen in &c.screens {
                md.push_str("```text\n");
                md.push_str(screen.trim_end());
                md.push_str("\n```\n");
            }
        }
    }
    (
        md,
        json!({"label": label, "seed": seed, "messages": messages, "tasks": tasks,
            "notes": notes, "arms": json_arms}),
    )
}

fn run_ab(name: &'static str) {
    let seed: u64 = std::env::var("AB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_201);
    let messages: usize = std::env::var("AB_MESSAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let tasks: usize = std::env::var("AB_TASKS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let arms_wanted = std::env::var("AB_ARMS").unwrap_or_else(|_| "aggressive,rich".into());
    let out = std::env::var_os("AB_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&out).expect("AB_OUT");
    let harness = Harness::of(name);
    let mut notes = Vec::new();
    if harness.dialog.is_none() {
        notes.push(format!(
            "No dialogs: {} has no permission prompt (adapters/{}/{} `no_dialog`); the workload's dialog tasks ran as ordinary tool tasks.",
            harness.profile.raw["harness"].as_str().unwrap_or(name),
            harness.adapter,
            Pin::load(name).profile
        ));
    }
    let drafts_mode = match std::env::var("AB_DRAFTS").as_deref() {
        Ok("submit") => DraftMode::Submit,
        Ok("mixed") | Err(_) => DraftMode::Mixed,
        Ok(other) => panic!("AB_DRAFTS={other:?}: expected mixed (the default) or submit"),
    };
    if drafts_mode == DraftMode::Submit {
        notes.push(
            "Drafts: `AB_DRAFTS=submit`, one every 4–10 s, held 1–4 s, every one submitted."
                .to_string(),
        );
    }
    let workload = Workload::new(seed, messages, tasks, drafts_mode);
    let mut results = Vec::new();
    let mut label = String::new();
    for arm in ["aggressive", "rich"] {
        if !arms_wanted.split(',').any(|a| a == arm) {
            continue;
        }
        let result = run_arm(&harness, &workload, arm, &out);
        label = result.label.clone();
        results.push(result);
        let (md, value) = report(&label, seed, messages, tasks, &notes, &results);
        std::fs::write(out.join(format!("ab-{name}.md")), &md).expect("write the report");
        std::fs::write(
            out.join(format!("ab-{name}.json")),
            serde_json::to_string_pretty(&value).expect("JSON"),
        )
        .expect("write the results");
    }
    let (md, _) = report(&label, seed, messages, tasks, &notes, &results);
    println!("{md}");
    for arm in &results {
        let delivered = arm.posted.iter().filter(|p| p.seen_ms.is_some()).count();
        assert!(
            delivered > 0,
            "{label} {}: no message reached the model",
            arm.arm
        );
    }
    // Issue 40: under the rich policy no notice is typed while the harness says its turn runs
    // or it waits for a person. The aggressive arm types regardless, by design.
    for arm in results.iter().filter(|arm| arm.arm == "rich") {
        let check = &arm.status_check;
        assert!(
            check.collisions.is_empty(),
            "{label} rich: {} notices typed while the program reported working or blocked: {:#?}",
            check.collisions.len(),
            check.collisions
        );
        assert_eq!(
            check.unchecked, 0,
            "{label} rich: notices without a judged revision in the daemon's log"
        );
        // A `working` report the subscriber missed would leave a notice typed under it
        // uncounted: the check holds only over a stream without gaps.
        assert_eq!(
            check.lagged, 0,
            "{label} rich: program status events missed, so a notice typed while the program \
             reported working could go uncounted"
        );
    }
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_claude() {
    run_ab("claude");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_codex() {
    run_ab("codex");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_opencode() {
    run_ab("opencode");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_opencode2() {
    run_ab("opencode2");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_pi() {
    run_ab("pi");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_gemini() {
    run_ab("gemini");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_pi1() {
    run_ab("pi1");
}

#[test]
#[ignore = "A/B evaluation: needs scripts/install-harnesses and a network namespace; bench/ab.sh runs it"]
fn ab_qwen() {
    run_ab("qwen");
}

/// A task prompt as Gemini CLI 0.61.0 sends it once its prompt-submit hook added mail: the
/// prompt, then the hook's context as a second text part of the same user message (the
/// bundle's `sendMessageStream` appends `<hook_context>…</hook_context>`; task 24's prompt, the
/// model server's request 169, in the 100-message A/B run), with the shell tool declared.
fn gemini_task_prompt_with_mail(k: usize) -> Value {
    json!({
        "contents": [{"role": "user", "parts": [
            {"text": format!("{} please do the next step", task_tag(k))},
            {"text": "<hook_context>[DING] new message: [id:gom15b] ab-099 (from lead); check your inbox</hook_context>"}
        ]}],
        "tools": [{"functionDeclarations": [{
            "name": "run_shell_command",
            "parametersJsonSchema": {"type": "object",
                "properties": {"command": {"type": "string"}}, "required": ["command"]}
        }]}]
    })
}

/// Posts `body` to the model server's Gemini `generateContent` and returns the answer's body;
/// every read has a 10 s deadline, so a silent server fails the test rather than hanging it.
fn post_gemini(server: &belfry_tests::live::ModelServer, body: &Value) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port))
        .expect("connect to the model server on 127.0.0.1");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read deadline");
    let payload = body.to_string();
    let head = format!(
        "POST /v1beta/models/scripted-model:generateContent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    stream
        .write_all(format!("{head}{payload}").as_bytes())
        .expect("send the request");
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&received).to_string();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or_else(|| panic!("the model server's answer has no length: {head}"));
            if rest.len() >= length {
                return rest.to_string();
            }
        }
        let read = stream
            .read(&mut buffer)
            .expect("read the model server's answer within 10 s");
        assert!(
            read > 0,
            "the model server closed the connection mid-answer"
        );
        received.extend_from_slice(&buffer[..read]);
    }
}

/// A workload of one task, a dialog task: what the 100-message run's task 24 was.
fn one_dialog_task() -> Workload {
    Workload {
        tasks: vec![Task::Dialog],
        task_count: 1,
        posts: Vec::new(),
        drafts: Vec::new(),
        gaps: vec![0],
        reactions: vec![0],
    }
}

/// Issue 41 item 5: the rich arm's one collision on Gemini CLI 0.61.0 was the script's, not
/// DING's. Gemini CLI puts the prompt-submit context in the prompt's own message, and with a
/// notice turn in the script the server answered task 24's prompt as the mail, so the model
/// never asked for the command and no dialog ever opened. Gemini's live profile now says the
/// context is in the prompt, and the script answers such a prompt as its task.
#[test]
fn a_gemini_task_prompt_carrying_mail_is_answered_as_its_task() {
    let harness = Harness::of("gemini");
    let dir = tempfile::tempdir().expect("temp dir");
    let server =
        belfry_tests::live::ModelServer::start(dir.path(), &script(&harness, &one_dialog_task()));
    let answer = post_gemini(&server, &gemini_task_prompt_with_mail(0));
    assert!(
        answer.contains("functionCall") && answer.contains("touch dialog-0.ran"),
        "the task prompt carrying mail was not answered with the task's command: {answer}"
    );
    assert!(
        !answer.contains("NOTICE-SEEN"),
        "answered as the mail: {answer}"
    );
    assert!(model_asked_for_task(&server.requests(), 0));
}

/// The run's collision detector counted task 24 as a dialog a notice answered, though its dialog
/// never opened: the model answered the task's prompt as the mail (script turn 221, the notice
/// turn) and never asked for the command. Such a task is stuck, not a dialog collision: the
/// detector now counts a dialog only where the model asked for the command.
#[test]
fn a_dialog_task_the_model_never_asked_for_is_not_a_dialog_collision() {
    // The script as the 100-message run had it: with the notice turn.
    let mut harness = Harness::of("gemini");
    harness.context_in_prompt = false;
    let dir = tempfile::tempdir().expect("temp dir");
    let server =
        belfry_tests::live::ModelServer::start(dir.path(), &script(&harness, &one_dialog_task()));
    let answer = post_gemini(&server, &gemini_task_prompt_with_mail(0));
    assert!(
        answer.contains("NOTICE-SEEN") && !answer.contains("functionCall"),
        "the run's script answered the task prompt as the mail there; here: {answer}"
    );
    assert!(
        !model_asked_for_task(&server.requests(), 0),
        "the detector would count a dialog that never opened: {:?}",
        server.requests()
    );
}

/// The hooks' turn timeline judges a notice typed into a turn that ran across its whole
/// transaction (the case seen live on Gemini CLI 0.61.0 started with `-i`), and not one typed
/// after the turn's turn-stop or whose own prompt-submit follows it.
#[test]
fn a_notice_typed_into_a_turn_the_hooks_show_running_is_a_collision() {
    let dir = tempfile::tempdir().expect("temp dir");
    let calls = dir.path().join("dispatch.ndjson");
    // 2026-12-08T01:31:00Z is 1796693460000 ms.
    let base: u64 = 1_796_693_460_000;
    let line = |ms: u64, event: &str| format!("{{\"ms\":{ms},\"event\":\"{event}\"}}\n");
    let log = [
        line(base, "session-start"),
        line(base + 200, "prompt-submit"),
        line(base + 15_000, "turn-stop"),
        line(base + 20_500, "prompt-submit"),
        line(base + 21_000, "turn-stop"),
    ]
    .concat();
    std::fs::write(&calls, log).expect("write the call log");
    let notice = |stamp: &str, id: &str| TypedNotice {
        logged_at: stamp.to_string(),
        judged_revision: Some(1),
        ids: vec![id.to_string()],
    };
    let typed = [
        // Sent 6.9 s into the first turn: a collision.
        notice("2026-12-08T01:31:07.100000Z", "into-turn"),
        // Sent 5 s after the turn's end, its own prompt-submit 0.2 s after: none.
        notice("2026-12-08T01:31:20.300000Z", "after-turn"),
        // Sent 2.5 s after a turn-stop that ended the turn inside the span: none.
        notice("2026-12-08T01:31:17.500000Z", "at-the-end"),
    ];
    let (checked, collisions) = hook_turn_collisions(&typed, &calls);
    assert_eq!(checked, 3);
    assert_eq!(collisions.len(), 1, "{collisions:#?}");
    assert!(collisions[0].contains("into-turn"), "{collisions:#?}");
    // No call log (the aggressive arm applies no hooks): nothing is judged.
    let (checked, collisions) = hook_turn_collisions(&typed, &dir.path().join("none"));
    assert_eq!((checked, collisions.len()), (0, 0));
}

/// A program on a real PTY that writes one OSC 7501 report a line (`st BODY` writes
/// `ESC ] 7501 ; BODY ST`) and then `DONE N`: the reports a harness makes of its turn.
const STATUS_PROGRAM: &str = r#"
import os, sys, tty
tty.setraw(0)
os.write(1, b"READY\r\n")
line = b""
n = 0
while True:
    c = os.read(0, 1)
    if not c: break
    if c not in b"\r\n":
        line += c
        continue
    if not line: continue
    cmd, _, arg = line.decode().partition(" ")
    line = b""
    n += 1
    if cmd == "st": os.write(1, b"\x1b]7501;" + arg.encode() + b"\x1b\\")
    os.write(1, b"DONE %d\r\n" % n)
"#;

/// Has the program of pane `name` write `report`, waits for it, and returns the revision its
/// record arrived at, as `peek --json` shows it.
fn report_status(env: &belfry_tests::Env, name: &str, done: usize, report: &str) -> u64 {
    env.ok(&[
        "send",
        name,
        "--text",
        &format!("st {report}"),
        "--key",
        "Enter",
    ]);
    env.wait_screen(name, &format!("DONE {done}\\b"));
    let screen: Value =
        serde_json::from_str(&env.ok(&["peek", name, "--json"])).expect("peek --json");
    screen["program_status"]["records"][0]["revision"]
        .as_u64()
        .expect("the report's record with its revision")
}

/// Issue 41's acceptance counts in the A/B's rich arm a notice typed while the harness
/// reported `working` or `blocked`; the live runs never typed one, so this shows the count
/// would catch one. A real pane's program reports `working`, `blocked` and `done` (OSC 7501),
/// followed the way an arm follows it (`belfry events`, then `peek --json`); notices are logged
/// as the daemon logs a notice sent (`notice sent: …` with `judged_revision`), judged at the
/// revision of each report. The ones judged under `working` and `blocked` are collisions, the
/// one under `done` is not, and one without a judged revision is counted as unchecked.
#[test]
fn a_notice_judged_while_the_program_reported_working_or_blocked_is_counted_as_a_collision() {
    let env = belfry_tests::Env::new();
    let script = env.path("status.py");
    std::fs::write(&script, STATUS_PROGRAM).expect("write the program");
    let script = script.display().to_string();
    env.spawn("agent", "24x100", &["python3", &script], Some("READY"));
    let log = StatusLog::follow(&env, "agent");
    let working = report_status(&env, "agent", 1, "state=working:app=agent");
    let blocked = report_status(&env, "agent", 2, "state=blocked:kind=permission:app=agent");
    let done = report_status(&env, "agent", 3, "state=done:app=agent");
    assert!(
        working < blocked && blocked < done,
        "each report moves the revision: {working}, {blocked}, {done}"
    );
    let reports = log.finish();
    let logs = env.path("daemon-log");
    std::fs::create_dir_all(&logs).expect("log dir");
    let line =
        |id: &str, revision: Option<u64>| {
            format!(
            "2026-12-08T01:00:00.000000Z  INFO belfry_mux::ding: notice sent: [DING] new message: \
             [id:{id}] ab-001 from ab-poster session=\"agent\"{}\n",
            revision.map(|r| format!(" judged_revision={r}")).unwrap_or_default()
        )
        };
    std::fs::write(
        logs.join("belfry-daemon.log"),
        [
            line("work01", Some(working)),
            line("block1", Some(blocked)),
            line("done01", Some(done)),
            line("nojudge", None),
        ]
        .concat(),
    )
    .expect("write the log");
    let check = status_collisions(&typed_notices(&logs), &reports);
    let flagged: Vec<&String> = check.collisions.iter().map(|(_, detail)| detail).collect();
    assert_eq!(check.lagged, 0, "no event missed");
    assert_eq!(
        flagged.len(),
        2,
        "the notices judged under working and blocked, and only those: {flagged:#?}"
    );
    assert!(
        flagged[0].contains("work01") && flagged[0].contains("said working"),
        "{flagged:#?}"
    );
    assert!(
        flagged[1].contains("block1") && flagged[1].contains("said blocked:permission"),
        "{flagged:#?}"
    );
    assert_eq!((check.checked, check.unchecked), (3, 1));
    assert_eq!(
        check.states_at_typing,
        BTreeMap::from([
            ("working".to_string(), 1),
            ("blocked:permission".to_string(), 1),
            ("done".to_string(), 1)
        ])
    );
}
