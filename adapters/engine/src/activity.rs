//! What the activity adapter says about a pane (spec §7.4): the turn state from the harness's
//! own lifecycle hooks as `belfry dispatch` forwards them, `child` from the pane's foreground
//! process group, and the composer from the screen, as one protocol v1 `activity` event.
//!
//! The screen never makes a pane idle: only the harness itself does, by a turn-stop hook or by
//! its own OSC 7501 program status (`idle`, for the current incarnation, in the snapshot the
//! event judges), and a prompt submit, a tool event, or a `working` or `blocked` status makes
//! it active again. Until the first such signal, and after the harness is restarted, the state
//! is `unknown`, so no fresh-idle lease can be granted on a guess. The screen may veto: a busy
//! row the grammar recognises makes the pane `active` whatever the harness said last.
//!
//! One more harness-authored signal may stand in for a turn-stop: a session start whose source
//! the adapter's declaration lists in `fresh_start` (a harness that takes input once its ready
//! screen shows after such a start, proved live). It is [`Turn::Fresh`], which is idle only
//! together with the declared ready screen and a provably empty composer ([`FreshStart`]), and
//! any later prompt submit, tool event or busy screen voids it like any idle.

use regex::Regex;
use serde_json::{json, Value};

use crate::classify::{Composer, EmptyBy, Verdict};
use crate::error::{Error, Result};

/// The turn state the hooks have shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// No hook has said yet (or the harness restarted since).
    Unknown,
    /// The last turn ended and no new one began.
    Idle,
    /// A turn is running.
    Active,
    /// The harness started a session with a source its adapter declares as "waits for input
    /// once the ready screen shows" (see [`FreshStart`]): idle on that screen with an empty
    /// composer, unknown otherwise.
    Fresh,
}

impl Turn {
    /// The state after the semantic hook event `hook` (spec §9's event names).
    pub fn after(self, hook: &str) -> Turn {
        match hook {
            // An interrupt ends the turn without a turn-stop (neither Claude Code nor Codex
            // fires one for a turn stopped by Escape), so it is the harness's own word that the
            // turn is over. The person who pressed it is there: the DING worker holds mail for
            // that (spec §7.4), as for their keystrokes.
            "turn-stop" | "interrupt" => Turn::Idle,
            "prompt-submit" | "before-tool" | "after-tool" | "pre-compact" | "subagent-start" => {
                Turn::Active
            }
            // A session starting or ending, or a turn ending in an error, says nothing
            // reliable about whether the harness now waits for input.
            "session-start" | "session-end" | "stop-failure" => Turn::Unknown,
            _ => self,
        }
    }
}

/// The session-start source of a program's own launch (spec §9's canonical word).
const STARTUP: &str = "startup";

/// An adapter's declared fresh-start signal: the `fresh_start` section of its
/// `declaration.json` (which session-start sources prove the harness waits for input once its
/// ready screen shows), with the declaration's `readiness.screen` pattern. Data about one
/// harness, checked live against the versions it names; nothing here names a harness.
#[derive(Debug, Clone)]
pub struct FreshStart {
    /// The session-start sources that count.
    pub sources: Vec<String>,
    /// The ready screen: matched against the screen's rows joined by newlines.
    pub ready: Regex,
    /// How a prompt is given on the harness's command line: a harness started with one runs
    /// that turn from its start, and its `startup` session start may reach belfry before the
    /// prompt's own submit does (Gemini CLI 0.61.0 with `-i`, live: 186 ms before), so then
    /// `startup` proves nothing.
    pub prompt_args: PromptArgs,
}

/// How a harness takes a prompt on its command line (`fresh_start.prompt_args`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptArgs {
    /// Flags whose presence (`-i`, or `-i=…`) gives a prompt.
    pub flags: Vec<String>,
    /// Flags that take the next argument as their value (which is then no prompt).
    pub value_flags: Vec<String>,
    /// Whether an argument that is no flag (nor a flag's value) is a prompt.
    pub positional: bool,
}

impl PromptArgs {
    /// Whether `args` (the program's arguments, without the program) give a prompt. After
    /// `--` every argument is positional.
    pub fn give_a_prompt(&self, args: &[String]) -> bool {
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            if arg == "--" {
                return self.positional && args.next().is_some();
            }
            let flag = arg.split_once('=').map_or(arg.as_str(), |(flag, _)| flag);
            if self.flags.iter().any(|f| f == flag) {
                return true;
            }
            if arg.starts_with('-') && arg.len() > 1 {
                if !arg.contains('=') && self.value_flags.iter().any(|f| f == arg) {
                    args.next();
                }
                continue;
            }
            if self.positional {
                return true;
            }
        }
        false
    }
}

impl FreshStart {
    /// Reads the signal from a declaration's text; `Ok(None)` when it declares none. A
    /// `fresh_start` without a readiness screen, or with sources that are not strings, is an
    /// error naming `origin`: a signal that cannot be checked must not be half-read.
    pub fn from_declaration(origin: &str, text: &str) -> Result<Option<FreshStart>> {
        let bad = |reason: String| Error::Grammar {
            origin: format!("{origin} (fresh_start)"),
            reason,
        };
        let value: Value =
            serde_json::from_str(text).map_err(|err| bad(format!("not JSON: {err}")))?;
        let Some(fresh) = value.get("fresh_start") else {
            return Ok(None);
        };
        let sources = fresh["sources"]
            .as_array()
            .filter(|sources| !sources.is_empty())
            .ok_or_else(|| bad("`sources` must be a non-empty list of strings".into()))?
            .iter()
            .map(|source| source.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| bad("`sources` must be a non-empty list of strings".into()))?;
        let pattern = value["readiness"]["screen"].as_str().ok_or_else(|| {
            bad("a fresh start needs the declaration's `readiness.screen` pattern".into())
        })?;
        let ready = Regex::new(pattern)
            .map_err(|err| bad(format!("readiness.screen {pattern:?}: {err}")))?;
        let strings = |key: &str| -> Result<Vec<String>> {
            match &fresh["prompt_args"][key] {
                Value::Null => Ok(Vec::new()),
                Value::Array(items) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(|| bad(format!("`prompt_args.{key}` must be a list of strings"))),
                _ => Err(bad(format!(
                    "`prompt_args.{key}` must be a list of strings"
                ))),
            }
        };
        let prompt_args = match &fresh["prompt_args"] {
            Value::Object(_) => PromptArgs {
                flags: strings("flags")?,
                value_flags: strings("value_flags")?,
                positional: fresh["prompt_args"]["positional"]
                    .as_bool()
                    .ok_or_else(|| bad("`prompt_args.positional` must be true or false".into()))?,
            },
            // A start on every launch needs to know which launches start a turn.
            _ if sources.iter().any(|source| source == STARTUP) => {
                return Err(bad(format!(
                    "a `{STARTUP}` fresh start needs `prompt_args`: how a prompt is given on \
                     the command line"
                )))
            }
            _ => PromptArgs::default(),
        };
        Ok(Some(FreshStart {
            sources,
            ready,
            prompt_args,
        }))
    }

    /// The sources that count for a program started with `args` (`None`: not known). A
    /// program started with a prompt, or whose arguments are not known, has no `startup`
    /// fresh start: its first turn may already run.
    pub fn sources_for(&self, args: Option<&[String]>) -> Vec<String> {
        let prompted = args.is_none_or(|args| self.prompt_args.give_a_prompt(args));
        self.sources
            .iter()
            .filter(|source| !(prompted && source.as_str() == STARTUP))
            .cloned()
            .collect()
    }

    /// Whether a session start with `source` is the declared signal.
    pub fn counts(&self, source: Option<&str>) -> bool {
        source.is_some_and(|source| self.sources.iter().any(|known| known == source))
    }

    /// What a [`Turn::Fresh`] is on this screen: idle only when the ready screen shows, the
    /// composer is provably empty and no busy row vetoes; unknown otherwise, with why.
    pub fn settle(&self, lines: &[String], verdict: &Verdict) -> (Turn, String) {
        let ready = self.ready.is_match(&lines.join("\n"));
        let empty = matches!(verdict.composer, Composer::Empty(_));
        match (ready, empty) {
            (true, true) => (
                Turn::Idle,
                "session started and its ready screen shows (declared fresh start)".into(),
            ),
            (false, _) => (
                Turn::Unknown,
                "session started; its ready screen does not show yet".into(),
            ),
            (true, false) => (
                Turn::Unknown,
                "session started; the composer is not provably empty".into(),
            ),
        }
    }
}

/// What the program's own status (OSC 7501) says of its turn, in one snapshot: the record the
/// pane is shown by (the most urgent) among those the current incarnation reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramView {
    /// `idle`, `working`, `blocked`, `done` or `error`, as reported.
    pub state: String,
    /// With `blocked`: what it waits for, when said.
    pub kind: Option<String>,
    /// When the record entered its state (unix ms): a new value is a new statement.
    pub since: u64,
}

impl ProgramView {
    /// The shown record of `incarnation` in a snapshot's `program_status`, if it reported one.
    pub fn from_snapshot(snapshot: &Value, incarnation: &str) -> Option<ProgramView> {
        let urgency = |state: &str| match state {
            "blocked" => 4,
            "error" => 3,
            "working" => 2,
            "done" => 1,
            _ => 0,
        };
        snapshot["program_status"]["records"]
            .as_array()?
            .iter()
            .filter(|record| record["incarnation"].as_str() == Some(incarnation))
            .filter_map(|record| {
                Some((
                    urgency(record["state"].as_str()?),
                    record["revision"].as_u64().unwrap_or(0),
                    ProgramView {
                        state: record["state"].as_str()?.to_string(),
                        kind: record["kind"].as_str().map(str::to_string),
                        since: record["since"].as_u64().unwrap_or(0),
                    },
                ))
            })
            .max_by_key(|(urgency, revision, _)| (*urgency, *revision))
            .map(|(_, _, view)| view)
    }

    /// Whether it says the program is busy (`working`, or `blocked` on a person).
    pub fn busy(&self) -> bool {
        self.state == "working" || self.state == "blocked"
    }

    /// The status in words, for an event's reason.
    pub fn words(&self) -> String {
        match &self.kind {
            Some(kind) => format!("{} ({kind})", self.state),
            None => self.state.clone(),
        }
    }
}

/// The turn state from both harness-authored sources: hooks as `belfry dispatch` forwards them,
/// and the program status each snapshot carries. Each new statement is stamped with the look
/// (one batch of events and its snapshot) it was first seen in; the later one wins, and
/// statements first seen in the same look resolve to busy.
#[derive(Debug, Clone, Default)]
pub struct TurnSources {
    look: u64,
    hook: Option<(Turn, u64)>,
    program: Option<(ProgramView, u64)>,
    /// The session-start sources the adapter declares a fresh start (none: no such signal).
    fresh_sources: Vec<String>,
}

impl TurnSources {
    /// Nothing known: a new incarnation has said nothing yet.
    pub fn new() -> TurnSources {
        TurnSources::default()
    }

    /// Starts the next look (a batch of events and the snapshot that answers it).
    pub fn next_look(&mut self) {
        self.look += 1;
    }

    /// Nothing known, with the session-start sources the adapter declares a fresh start.
    pub fn with_fresh_start(sources: &[String]) -> TurnSources {
        TurnSources {
            fresh_sources: sources.to_vec(),
            ..TurnSources::default()
        }
    }

    /// A hook of the current incarnation.
    pub fn hook(&mut self, hook: &str) {
        self.hook_with_source(hook, None);
    }

    /// A hook of the current incarnation with its `source` field. A session start with a
    /// declared source is a fresh start, unless a turn was seen running in this incarnation
    /// and has not ended: a harness started with a prompt may submit it before its session
    /// start arrives, and then the start says nothing about that turn.
    pub fn hook_with_source(&mut self, hook: &str, source: Option<&str>) {
        let before = self.hook.map_or(Turn::Unknown, |(turn, _)| turn);
        let declared = source.is_some_and(|source| self.fresh_sources.iter().any(|s| s == source));
        let after = if hook == "session-start" && declared && before != Turn::Active {
            Turn::Fresh
        } else {
            before.after(hook)
        };
        // Every turn-start hook is a new statement, even in a turn already seen active.
        if self.hook.is_none() || after != before || after == Turn::Active {
            self.hook = Some((after, self.look));
        }
    }

    /// Hooks were lost (the subscription lagged): what they said is unknown.
    pub fn hooks_lost(&mut self) {
        self.hook = Some((Turn::Unknown, self.look));
    }

    /// The program status a snapshot showed for the current incarnation (`None`: none).
    pub fn program(&mut self, view: Option<ProgramView>) {
        self.program = match (view, self.program.take()) {
            (None, _) => None,
            // The same statement (state, kind and since unchanged) keeps its look.
            (Some(view), Some((old, look))) if old == view => Some((old, look)),
            (Some(view), _) => Some((view, self.look)),
        };
    }

    /// The turn, and why in words. A busy program status wins over everything; a program's
    /// `idle` wins over hooks unless a hook showed a turn start after it (or in the same look);
    /// `done`, `error` or no status leave the hooks to say.
    pub fn turn(&self) -> (Turn, String) {
        let (hook, hook_look) = self.hook.unwrap_or((Turn::Unknown, 0));
        let hook_words = || format!("hooks: {hook:?}").to_lowercase();
        let Some((program, program_look)) = &self.program else {
            return (hook, hook_words());
        };
        let words = format!("program status {}", program.words());
        if program.busy() {
            return (Turn::Active, words);
        }
        if program.state != "idle" {
            return (hook, format!("{}; {words}", hook_words()));
        }
        if hook == Turn::Active && hook_look >= *program_look {
            return (Turn::Active, format!("{}; {words} before it", hook_words()));
        }
        (Turn::Idle, words)
    }
}

/// The pane identity and state a snapshot shows beside its screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneSeen {
    /// The pane's session name.
    pub session: String,
    /// The program incarnation.
    pub incarnation: String,
    /// The launch generation.
    pub generation: String,
    /// The snapshot's revision.
    pub revision: u64,
    /// Whether the program leads the foreground process group (false: a child runs there).
    pub program_in_foreground: bool,
}

impl PaneSeen {
    /// Reads the identity fields of a snapshot body.
    pub fn from_snapshot(snapshot: &Value) -> Option<PaneSeen> {
        Some(PaneSeen {
            session: snapshot["session"].as_str()?.to_string(),
            incarnation: snapshot["incarnation"].as_str()?.to_string(),
            generation: snapshot["generation"].as_str()?.to_string(),
            revision: snapshot["revision"].as_u64()?,
            // A snapshot without the field proves no child, and none is claimed.
            program_in_foreground: snapshot["foreground"]["is_leader"]
                .as_bool()
                .unwrap_or(true),
        })
    }
}

/// One protocol v1 `activity` event line (without the newline).
pub fn activity_event(
    pane: &PaneSeen,
    sequence: u64,
    turn: Turn,
    why: &str,
    verdict: &Verdict,
    valid_for_ms: u64,
) -> Value {
    let state = if !pane.program_in_foreground {
        "child"
    } else if verdict.busy.is_some() {
        // The veto: a busy row on the screen keeps the pane not idle, whatever the harness
        // said last. It never makes a pane idle.
        "active"
    } else {
        match turn {
            // A fresh start is idle only as `FreshStart::settle` judges it with the screen;
            // unjudged it proves nothing.
            Turn::Unknown | Turn::Fresh => "unknown",
            Turn::Idle => "idle",
            Turn::Active => "active",
        }
    };
    let (composer, reason) = match &verdict.composer {
        Composer::Empty(EmptyBy::Blank) => ("empty", "composer blank".to_string()),
        Composer::Empty(EmptyBy::Placeholder(index)) => {
            ("empty", format!("composer shows placeholder {index}"))
        }
        Composer::Nonempty => ("nonempty", "composer holds text".to_string()),
        Composer::Unknown(why) => ("unknown", why.to_string()),
    };
    json!({
        "v": 1,
        "kind": "activity",
        "session": pane.session,
        "incarnation": pane.incarnation,
        "generation": pane.generation,
        "sequence": sequence,
        "state": state,
        "composer": composer,
        "validForMs": valid_for_ms,
        "revision": pane.revision,
        "reason": match &verdict.busy {
            Some(rule) => format!("screen shows busy row {rule}; {why}; {reason}"),
            None => format!("turn {}; {why}; {reason}", format!("{turn:?}").to_lowercase()),
        },
    })
}
