//! Session context (issue 45 (d), (e), (h)): the one place where dispatch decides which
//! groups of the hooks file run (read-once guards) and what belfry itself tells the model once
//! (the guard brief, the project memory) or does at a turn stop (the memory append).
//!
//! Projection side: [`carriers`] gives, for one target, the hooks belfry adds to the plan so
//! that the harness calls dispatch where the session context can reach the model: a
//! `session-start` entry where the harness carries session-start context, else a
//! `prompt-submit` one (the first prompt), `pre-compact` (and `session-start`) entries that let
//! the ledger see a compaction for `once "context"` hooks, and a `turn-stop` entry for a memory
//! append. They
//! go through the same cells, files and install state as the user's hooks, and compile to
//! groups with no handlers and a `deliver` list.
//!
//! Dispatch side: [`run_groups`] claims the `once` groups and the deliveries in the ledger
//! (`crate::once`), runs the handlers of the groups that fire, then adds the brief and the
//! memory after their context. A delivery is claimed only when the answer will carry context
//! to the harness: never for a host-fired event (its output is discarded) nor on an event the
//! dialect carries no context on, so the one path that reaches the model is the one that
//! counts, and the host lifecycle and the harness's own events never deliver twice.

use std::collections::BTreeSet;
use std::ffi::OsString;

use serde_json::Value;

use crate::canonical::{CanonicalFile, CanonicalHook, Effect, HookId, Intent, Once, Selector};
use crate::handlers::{HandlerGroup, HooksFile};
use crate::memory::CompiledMemory;
use crate::once::{Moment, BRIEF_ENTRY, MEMORY_ENTRY};
use crate::outcome::{Decision, Outcome};
use crate::project::adapters::{AdapterData, Cell, Status};

/// The deliveries a carrier group may list.
pub const DELIVER_BRIEF: &str = "brief";
pub const DELIVER_MEMORY: &str = "memory";
pub const DELIVER_MEMORY_APPEND: &str = "memory-append";
/// A group that only makes the harness call dispatch on a lifecycle event, so the read-once
/// ledger sees the compaction or the new session that re-arms its guards.
pub const DELIVER_ONCE_RESET: &str = "once-reset";

/// The `source` the daemon's host lifecycle writes in its stdin (`mux/src/lifecycle.rs`): a
/// host-fired event's answer is discarded, so it delivers nothing.
pub const HOST_SOURCE: &str = "belfry-host";

/// The names of the carrier hooks in plans (`:` is not allowed in a file's hook names, so no
/// user hook can be mistaken for one).
pub const CONTEXT_CARRIER: &str = "belfry:session-context";
pub const APPEND_CARRIER: &str = "belfry:memory-append";
pub const RESET_CARRIER: &str = "belfry:once-reset";

/// Set in an agent's environment by `belfry up` when the guard brief is in the agent's charter
/// file (the harness's system prompt): dispatch then does not tell it again.
pub const BRIEF_IN_CHARTER_ENV: &str = "BELFRY_BRIEF_IN_CHARTER";

/// The handler timeout a carrier without a memory program declares.
const CARRIER_TIMEOUT_MS: u64 = 1_000;

/// What a carrier hook delivers, and the data it carries into the compiled file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionCarrier {
    pub deliver: Vec<&'static str>,
    pub brief: Option<String>,
    pub memory: Option<CompiledMemory>,
}

/// The event where session context reaches the model on this harness: `session-start` where
/// it carries context, else `prompt-submit` (the first prompt), else none.
pub fn context_event(adapter: &AdapterData) -> Option<&'static str> {
    ["session-start", "prompt-submit"]
        .into_iter()
        .find(|event| {
            adapter.matrix.cell(event).status != Status::Unsupported
                && adapter.matrix.cell(&format!("{event}.context")).status != Status::Unsupported
        })
}

/// The memory block as the compiled file carries it.
pub fn compiled_memory(canonical: &CanonicalFile) -> Option<CompiledMemory> {
    use crate::canonical::MemorySource;
    let memory = canonical.memory.as_ref()?;
    let (file, command) = match &memory.source {
        MemorySource::File(path) => (Some(path.clone()), None),
        MemorySource::Command(argv) => (None, Some(argv.clone())),
    };
    Some(CompiledMemory {
        file,
        command,
        append: memory.append.clone(),
    })
}

/// The guard brief that belongs in a charter file for `target`, from the canonical file of
/// `context`'s scope: only where the harness has no exact session-start context (there the
/// charter, its system prompt, is the better place than the first prompt). `None` when the
/// file does not exist, names no enforce hook for the target, or the harness takes the brief
/// exactly at session start.
pub fn charter_brief(
    context: &crate::project::Context,
    target: &str,
) -> Result<Option<String>, crate::project::ProjectError> {
    let (adapters, canonical) = match crate::project::load(context) {
        Ok(loaded) => loaded,
        Err(crate::project::ProjectError::Canonical(err))
            if matches!(*err.problem, crate::canonical::Problem::NotFound) =>
        {
            return Ok(None)
        }
        Err(err) => return Err(err),
    };
    let Some(adapter) = adapters.by_name.get(target) else {
        return Ok(None);
    };
    let exact_at_start = adapter.matrix.cell("session-start").status == Status::Exact
        && adapter.matrix.cell("session-start.context").status == Status::Exact;
    if exact_at_start {
        return Ok(None);
    }
    let hooks: Vec<&CanonicalHook> = canonical
        .hooks
        .iter()
        .filter(|hook| hook.targets.iter().any(|t| t == target))
        .collect();
    Ok(crate::brief::render(&hooks))
}

/// The hooks belfry adds to one target's plan (see the module header).
pub fn carriers(
    canonical: &CanonicalFile,
    target_hooks: &[&CanonicalHook],
    adapter: &AdapterData,
) -> Vec<CanonicalHook> {
    // The memory goes to the targets the file's hooks name: a file that names no hook for a
    // harness says nothing about it.
    if target_hooks.is_empty() {
        return Vec::new();
    }
    let brief = crate::brief::render(target_hooks);
    let memory = compiled_memory(canonical);
    let carrier = |name: &str, event: &str, intent, effects: &[Effect], session: SessionCarrier| {
        CanonicalHook {
            id: HookId {
                scope: canonical.scope,
                name: name.to_owned(),
            },
            at: crate::canonical::Location {
                file: canonical.path.clone(),
                line: 1,
                column: 1,
            },
            event: event.to_owned(),
            intent,
            selector: Selector::Any,
            command: Vec::new(),
            command_windows: None,
            // Only a memory program can take long; a brief or a reset is a file read.
            timeout_ms: if session.memory.is_some() {
                crate::memory::MEMORY_TIMEOUT.as_millis() as u64
            } else {
                CARRIER_TIMEOUT_MS
            },
            is_async: false,
            failure: crate::canonical::Failure::Open,
            effects: effects.iter().copied().collect(),
            targets: vec![adapter.name.clone()],
            once: None,
            reason: None,
            session: Some(Box::new(session)),
        }
    };
    let mut hooks = Vec::new();
    let mut deliver = Vec::new();
    if brief.is_some() {
        deliver.push(DELIVER_BRIEF);
    }
    if memory.is_some() {
        deliver.push(DELIVER_MEMORY);
    }
    if !deliver.is_empty() {
        let event = context_event(adapter).unwrap_or("session-start");
        hooks.push(carrier(
            CONTEXT_CARRIER,
            event,
            Intent::Enrich,
            &[Effect::Context],
            SessionCarrier {
                deliver,
                brief: brief.clone(),
                memory: memory.clone(),
            },
        ));
    }
    // `once "context"` guards re-arm when the context is lost, which dispatch sees only if
    // the harness calls it then: at pre-compact, and at session-start (a clear, or a
    // compaction the adapter declares as a session-start source).
    if target_hooks
        .iter()
        .any(|hook| hook.once == Some(Once::Context))
    {
        let told_at_start = hooks.iter().any(|hook| hook.event == "session-start");
        for event in ["pre-compact", "session-start"] {
            if event == "session-start" && told_at_start {
                continue;
            }
            hooks.push(carrier(
                RESET_CARRIER,
                event,
                Intent::Observe,
                &[],
                SessionCarrier {
                    deliver: vec![DELIVER_ONCE_RESET],
                    brief: None,
                    memory: None,
                },
            ));
        }
    }
    if memory.as_ref().is_some_and(|m| m.append.is_some()) {
        hooks.push(carrier(
            APPEND_CARRIER,
            "turn-stop",
            Intent::Observe,
            &[],
            SessionCarrier {
                deliver: vec![DELIVER_MEMORY_APPEND],
                brief,
                memory,
            },
        ));
    }
    hooks
}

/// The extra cells a carrier shows in `hooks plan`: `guard-brief` and `memory`, each the cell
/// of the context it travels in, its loss saying how.
pub fn extra_cells(hook: &CanonicalHook, adapter: &AdapterData) -> Vec<(String, Cell)> {
    let Some(carrier) = &hook.session else {
        return Vec::new();
    };
    let mut cells = Vec::new();
    for (delivery, feature) in [(DELIVER_BRIEF, "guard-brief"), (DELIVER_MEMORY, "memory")] {
        if !carrier.deliver.contains(&delivery) {
            continue;
        }
        // The worse of the event's cell and its context cell: a context carried exactly on
        // an event that fires late (at the first prompt) arrives late.
        let event_cell = adapter.matrix.cell(&hook.event);
        let mut cell = adapter.matrix.cell(&format!("{}.context", hook.event));
        if event_cell.status > cell.status {
            cell = event_cell;
        }
        if hook.event == "prompt-submit" && cell.status == Status::Exact {
            cell.status = Status::Lossy;
        }
        if cell.status == Status::Lossy && hook.event == "prompt-submit" {
            let how = cell.loss.take().unwrap_or_default();
            cell.loss = Some(format!(
                "no session-start context: told with the first prompt{}",
                if how.is_empty() {
                    String::new()
                } else {
                    format!(" ({how})")
                }
            ));
        }
        cells.push((feature.to_owned(), cell));
    }
    cells
}

/// Adds a carrier's members to the compiled file: its group (no handlers, a `deliver` list)
/// and, once per file, the `brief` and `memory` it carries.
pub fn compile_carrier(carrier: &SessionCarrier, file: &mut serde_json::Map<String, Value>) {
    if let Some(brief) = &carrier.brief {
        file.insert("brief".to_owned(), Value::String(brief.clone()));
    }
    if let Some(memory) = &carrier.memory {
        if let Ok(value) = serde_json::to_value(memory) {
            file.insert("memory".to_owned(), value);
        }
    }
}

/// What dispatch knows when it runs the groups that select a hook.
pub struct GroupRun<'a> {
    pub event: &'a str,
    pub session_id: Option<&'a str>,
    pub source: Option<&'a str>,
    pub is_compaction: bool,
    /// Whether the answer carries context to the model on this event.
    pub carries_context: bool,
    pub stdin: &'a [u8],
    pub handler_stdin: &'a [u8],
    pub env: &'a dyn Fn(&str) -> Option<OsString>,
}

/// Runs the groups of `hooks` that select this hook: claims the `once` groups and deliveries,
/// runs the handlers of the groups that fire, then delivers. Returns the outcome and how many
/// handlers ran.
pub fn run_groups(
    hooks: &HooksFile,
    groups: &[&HandlerGroup],
    run: &GroupRun<'_>,
) -> (Outcome, usize) {
    let host_fired = run.source == Some(HOST_SOURCE);
    let delivers = |what: &str| groups.iter().any(|g| g.deliver.iter().any(|d| d == what));
    let mut wanted: Vec<(&str, Once)> = groups
        .iter()
        .filter_map(|g| g.once.as_ref().map(|once| (once.name.as_str(), once.scope)))
        .collect();
    let can_tell = run.carries_context && !host_fired;
    let in_charter = (run.env)(BRIEF_IN_CHARTER_ENV).is_some_and(|value| !value.is_empty());
    if can_tell && !in_charter && delivers(DELIVER_BRIEF) && hooks.brief.is_some() {
        wanted.push((BRIEF_ENTRY, Once::Context));
    }
    if can_tell && delivers(DELIVER_MEMORY) && hooks.memory.is_some() {
        wanted.push((MEMORY_ENTRY, Once::Session));
    }
    // Every dispatch that sees a lifecycle event settles the ledger, so a compaction re-arms
    // the guards even when no `once` group selects the compaction event itself.
    // Only a file that keeps anything in the ledger touches it.
    let keeps_state = hooks.events.values().flatten().any(|group| {
        group.once.is_some()
            || group
                .deliver
                .iter()
                .any(|d| d == DELIVER_BRIEF || d == DELIVER_MEMORY)
    });
    let rearms =
        keeps_state && (run.is_compaction || matches!(run.event, "pre-compact" | "session-start"));
    let mut notes = Vec::new();
    let claimed: BTreeSet<String> = if wanted.is_empty() && !rearms {
        BTreeSet::new()
    } else {
        let key = crate::once::ledger_key(run.env, run.session_id);
        let moment = Moment {
            event: run.event,
            session_id: run.session_id,
            source: run.source,
            is_compaction: run.is_compaction,
        };
        match crate::once::claim(
            &crate::once::ledger_dir(run.env),
            key.as_deref(),
            &moment,
            &wanted,
        ) {
            Ok(claimed) => claimed,
            // A re-arm alone that cannot be recorded changes no answer and says nothing; a
            // claim that cannot be recorded runs the guard and tells the context (fail-open).
            Err(_) if wanted.is_empty() => BTreeSet::new(),
            Err(err) => {
                notes.push(format!("belfry dispatch: {err}"));
                wanted.iter().map(|(name, _)| (*name).to_owned()).collect()
            }
        }
    };
    let fires = |group: &&&HandlerGroup| {
        group
            .once
            .as_ref()
            .is_none_or(|once| claimed.contains(&once.name))
    };
    let handlers: Vec<_> = groups
        .iter()
        .filter(fires)
        .flat_map(|group| group.handlers.iter())
        .collect();
    let count = handlers.len();
    let mut outcome = if handlers.is_empty() {
        Outcome::allow_silently()
    } else {
        crate::chain::run_chain(handlers.into_iter(), run.event, run.handler_stdin)
    };
    if outcome.decision == Decision::Allow {
        let mut told = Vec::new();
        if claimed.contains(BRIEF_ENTRY) {
            told.extend(hooks.brief.clone());
        }
        if claimed.contains(MEMORY_ENTRY) {
            match hooks.memory.as_ref().map(CompiledMemory::context) {
                Some(Ok(Some(text))) => told.push(text),
                Some(Err(err)) => notes.push(format!("belfry dispatch: memory not told: {err}")),
                _ => {}
            }
        }
        for text in told {
            if !outcome.context.is_empty() {
                outcome.context.push('\n');
            }
            outcome.context.push_str(&text);
        }
    }
    if delivers(DELIVER_MEMORY_APPEND) && !host_fired {
        if let Some(Err(err)) = hooks.memory.as_ref().map(|m| m.append_turn(run.stdin)) {
            notes.push(format!("belfry dispatch: memory not appended: {err}"));
        }
    }
    for note in notes {
        if !outcome.reason.is_empty() {
            outcome.reason.push('\n');
        }
        outcome.reason.push_str(&note);
    }
    (outcome, count)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::dispatch::{run_dispatch_with_env, DispatchOptions};

    struct Setup {
        _dir: tempfile::TempDir,
        root: PathBuf,
        hooks_file: PathBuf,
        log: PathBuf,
        notes: PathBuf,
    }

    /// A compiled hooks file as `belfry hooks apply` writes one: a `once "context"` guard that
    /// logs each run, a plain group, the carriers of a brief and a memory with an append.
    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = dir.path().to_path_buf();
        let log = root.join("fired.log");
        let notes = root.join("NOTES.md");
        let _ = std::fs::write(&notes, "build with make\n");
        let logger = |word: &str| {
            serde_json::json!(["sh", "-c", format!("echo {word} >> {}", log.display())])
        };
        let file = serde_json::json!({
            "version": 1,
            "brief": "Guards in force here (belfry hooks): these actions are refused; do not attempt them.\n- no-push: refuses shell commands",
            "memory": {"file": notes, "append": ["sh", "-c", "echo turn done"]},
            "events": {
                "before-tool": [
                    {"matcher": "edit", "handlers": [{"argv": logger("once")}],
                     "once": {"name": "project/read-docs", "scope": "context"}},
                    {"matcher": "edit", "handlers": [{"argv": logger("every")}]}
                ],
                "session-start": [{"matcher": "*", "handlers": [], "deliver": ["brief", "memory"]}],
                "pre-compact": [{"matcher": "*", "handlers": [], "deliver": ["once-reset"]}],
                "turn-stop": [{"matcher": "*", "handlers": [], "deliver": ["memory-append"]}]
            }
        });
        let hooks_file = root.join("hooks.json");
        let _ = std::fs::write(&hooks_file, serde_json::to_vec(&file).unwrap_or_default());
        Setup {
            _dir: dir,
            root,
            hooks_file,
            log,
            notes,
        }
    }

    fn dispatch(setup: &Setup, event: &str, stdin: &str) -> crate::Outcome {
        let opts = DispatchOptions {
            event: event.to_owned(),
            hooks_file: Some(setup.hooks_file.clone()),
            ..DispatchOptions::default()
        };
        let state = setup.root.join("state");
        let env =
            move |name: &str| (name == "BELFRY_STATE").then(|| state.clone().into_os_string());
        run_dispatch_with_env(&opts, Ok(stdin.as_bytes()), &env, None).outcome
    }

    /// A dispatch whose answer is not looked at beyond being an allow.
    fn fire(setup: &Setup, event: &str, stdin: &str) {
        let outcome = dispatch(setup, event, stdin);
        assert_eq!(outcome.decision, crate::Decision::Allow, "{outcome:?}");
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    const EDIT: &str = r#"{"session_id":"s1","tool_name":"edit"}"#;

    #[test]
    fn a_once_guard_fires_once_and_again_after_a_compaction_or_a_new_session() {
        let s = setup();
        fire(&s, "before-tool", EDIT);
        fire(&s, "before-tool", EDIT);
        assert_eq!(lines(&s.log), ["once", "every", "every"]);
        fire(&s, "pre-compact", r#"{"session_id":"s1"}"#);
        fire(&s, "before-tool", EDIT);
        assert_eq!(lines(&s.log)[3..], ["once", "every"]);
        fire(
            &s,
            "before-tool",
            r#"{"session_id":"s2","tool_name":"edit"}"#,
        );
        assert_eq!(lines(&s.log)[5..], ["once", "every"]);
        // A tool the selector does not pick never claims the guard.
        fire(
            &s,
            "before-tool",
            r#"{"session_id":"s3","tool_name":"shell"}"#,
        );
        fire(
            &s,
            "before-tool",
            r#"{"session_id":"s3","tool_name":"edit"}"#,
        );
        assert_eq!(lines(&s.log)[7..], ["once", "every"]);
    }

    #[test]
    fn the_brief_and_the_memory_are_told_once_and_the_brief_again_after_a_clear() {
        let s = setup();
        let host = dispatch(
            &s,
            "session-start",
            r#"{"session_id":"s1","source":"belfry-host"}"#,
        );
        assert_eq!(host.context, "", "a host-fired event's answer is discarded");
        let first = dispatch(&s, "session-start", r#"{"session_id":"s1"}"#);
        assert_eq!(first.context.matches("Guards in force here").count(), 1);
        assert_eq!(first.context.matches("build with make").count(), 1);
        assert!(first.context.contains("- no-push: refuses shell commands"));
        let again = dispatch(&s, "session-start", r#"{"session_id":"s1","source":"x"}"#);
        assert_eq!(again.context, "");
        let cleared = dispatch(
            &s,
            "session-start",
            r#"{"session_id":"s1","source":"clear"}"#,
        );
        assert_eq!(cleared.context.matches("Guards in force here").count(), 1);
        assert!(
            !cleared.context.contains("build with make"),
            "{}",
            cleared.context
        );
    }

    #[test]
    fn a_turn_stop_appends_to_the_memory_once_per_turn() {
        let s = setup();
        fire(&s, "turn-stop", r#"{"session_id":"s1"}"#);
        fire(&s, "turn-stop", r#"{"session_id":"s1"}"#);
        fire(
            &s,
            "turn-stop",
            r#"{"session_id":"s1","source":"belfry-host"}"#,
        );
        assert_eq!(
            lines(&s.notes),
            ["build with make", "turn done", "turn done"]
        );
    }

    #[test]
    fn a_file_without_once_or_session_context_never_touches_the_ledger() {
        let s = setup();
        let plain = serde_json::json!({"version": 1, "events": {"session-start": [
            {"handlers": [{"argv": ["sh", "-c", "echo started"]}]}
        ]}});
        let _ = std::fs::write(
            &s.hooks_file,
            serde_json::to_vec(&plain).unwrap_or_default(),
        );
        let outcome = dispatch(&s, "session-start", r#"{"source":"x"}"#);
        assert_eq!(outcome.reason, "", "no key needed, no note");
        assert_eq!(outcome.context, "started");
        assert!(!s.root.join("state").exists(), "the ledger was touched");
    }

    #[test]
    fn without_a_key_a_once_guard_runs_every_time_and_says_why() {
        let s = setup();
        let first = dispatch(&s, "before-tool", r#"{"tool_name":"edit"}"#);
        fire(&s, "before-tool", r#"{"tool_name":"edit"}"#);
        assert_eq!(lines(&s.log), ["once", "every", "once", "every"]);
        assert!(
            first.reason.contains("no key for read-once guards"),
            "{}",
            first.reason
        );
    }
}
