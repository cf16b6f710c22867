//! The canonical hook file (spec §9): the one place a user writes hooks.
//!
//! Two files, kept apart: the project's `belfry-hooks.kdl` and the user's
//! `$XDG_CONFIG_HOME/belfry/hooks.kdl`. A hook's identity is its name *and* the file it came
//! from ([`HookId`]), so a project hook and a user hook of one name are two hooks, and every
//! message about a hook can say which file to edit.
//!
//! ```kdl
//! hook "no-force-push" {
//!   event "before-tool"          // semantic event
//!   intent "enforce"             // observe | enrich | enforce
//!   select tool="shell"          // a tool class; or select native="ExactName" (one target)
//!   command "scripts/guard.sh"   // argv; more values are more args
//!   command-windows "scripts\\guard.cmd"
//!   timeout-ms 5000
//!   async #false
//!   failure "closed"             // open | closed
//!   effects "deny"               // what the hook may do: deny, context, rewrite
//!   targets "a" "b"              // explicit native targets (adapter names)
//! }
//! ```
//!
//! [`lower`] turns the KDL text into [`CanonicalFile`], checking every rule and naming the
//! file, line and column of each problem; [`compile`] turns the hooks of one target into the
//! JSON hooks file `belfry dispatch` reads (`crate::handlers`). Target names are opaque here:
//! the caller passes the names its adapter data knows, so this module names no harness.

pub mod compile;
mod error;
mod lower;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

pub use error::{CanonicalError, Location, Problem};

/// The semantic events a canonical hook may name (spec §9), in the order documents list them.
pub const SEMANTIC_EVENTS: &[&str] = &[
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

/// The events that carry a tool call, the only ones `select` applies to.
pub const TOOL_EVENTS: &[&str] = &["before-tool", "after-tool"];

/// Events at which a deny means something to the agent: the tool, the prompt, the end of the
/// turn (the agent goes on with the reason) or the compaction does not happen.
pub const DENY_EVENTS: &[&str] = &[
    "before-tool",
    "after-tool",
    "prompt-submit",
    "turn-stop",
    "subagent-stop",
    "pre-compact",
];

/// Events whose answer can add context for the model.
pub const CONTEXT_EVENTS: &[&str] = &[
    "session-start",
    "prompt-submit",
    "before-tool",
    "after-tool",
    "subagent-start",
];

/// The canonical tool classes a `select tool=` may name (spec §9).
pub const TOOL_CLASSES: &[&str] = &["shell", "edit", "read", "web", "mcp", "any"];

/// The largest `timeout-ms` (ten minutes), the same bound the hooks file has.
pub const MAX_TIMEOUT_MS: u64 = crate::handlers::MAX_TIMEOUT_MS;

/// A handler's timeout when the hook gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = crate::handlers::DEFAULT_TIMEOUT_MS;

/// Which of the two canonical files a hook came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `belfry-hooks.kdl` in the project directory.
    Project,
    /// `$XDG_CONFIG_HOME/belfry/hooks.kdl`.
    User,
}

impl Scope {
    /// The word used in messages, state files and the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name of the project's canonical file, in the project directory.
pub const PROJECT_FILE_NAME: &str = "belfry-hooks.kdl";

/// Where the canonical file of `scope` is: `project_dir/belfry-hooks.kdl`, or
/// `config_home/belfry/hooks.kdl` (`config_home` is `$XDG_CONFIG_HOME`, else `~/.config`).
pub fn canonical_path(scope: Scope, project_dir: &Path, config_home: &Path) -> PathBuf {
    match scope {
        Scope::Project => project_dir.join(PROJECT_FILE_NAME),
        Scope::User => config_home.join("belfry").join("hooks.kdl"),
    }
}

/// A hook's identity: which file, and its name in that file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HookId {
    pub scope: Scope,
    pub name: String,
}

impl fmt::Display for HookId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} hook {:?}", self.scope, self.name)
    }
}

/// What a hook is for (spec §9). Projection uses it to decide which cells must be exact: an
/// `enforce` hook on a target that cannot carry its deny exactly fails that target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Intent {
    Observe,
    Enrich,
    Enforce,
}

impl Intent {
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Observe => "observe",
            Intent::Enrich => "enrich",
            Intent::Enforce => "enforce",
        }
    }
}

/// What a hook's failure (crash, timeout, bad exit) means: as in the hooks file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Open,
    Closed,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Open => "open",
            Failure::Closed => "closed",
        }
    }
}

/// What a hook may do to the agent, declared so that projection can check each effect
/// against the target's capability matrix instead of guessing from the intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effect {
    /// Refuse the action (tool call, prompt, end of turn, compaction) with a reason.
    Deny,
    /// Add text the model sees.
    Context,
    /// Change the tool's input before it runs.
    Rewrite,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Deny => "deny",
            Effect::Context => "context",
            Effect::Rewrite => "rewrite",
        }
    }

    /// Parses an effect name.
    pub fn parse(text: &str) -> Option<Effect> {
        match text {
            "deny" => Some(Effect::Deny),
            "context" => Some(Effect::Context),
            "rewrite" => Some(Effect::Rewrite),
            _ => None,
        }
    }
}

/// Which tool calls a hook applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// Every call (and every hook of a non-tool event).
    Any,
    /// Calls of these canonical classes (`shell`, `edit`, …), in the order written.
    Classes(Vec<String>),
    /// The escape hatch: one harness's exact tool name. The hook then has exactly one target.
    Native(String),
}

impl Selector {
    /// The compiled hooks-file matcher: the interface with dispatch is a `|` list of class
    /// names, `native:<ExactName>`, or `*`.
    pub fn matcher(&self) -> String {
        match self {
            Selector::Any => "*".to_string(),
            Selector::Classes(classes) => classes.join("|"),
            Selector::Native(name) => format!("native:{name}"),
        }
    }
}

/// One validated canonical hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalHook {
    pub id: HookId,
    /// Where its `hook` node starts, for messages.
    pub at: Location,
    pub event: String,
    pub intent: Intent,
    pub selector: Selector,
    /// The program and its arguments, run without a shell.
    pub command: Vec<String>,
    /// The argv to run on Windows, when it differs.
    pub command_windows: Option<Vec<String>>,
    pub timeout_ms: u64,
    /// Whether the harness may go on without waiting for the hook.
    pub is_async: bool,
    pub failure: Failure,
    pub effects: BTreeSet<Effect>,
    /// Adapter names, in the order written.
    pub targets: Vec<String>,
    /// `once "session"` / `once "context"`: the hook fires the first time its selector matches
    /// and is re-armed only when the model forgot (`crate::once`).
    pub once: Option<Once>,
    /// `reason "…"`: why the guard exists, for the guard brief (`crate::brief`).
    pub reason: Option<String>,
    /// Set only on the hooks belfry adds itself to carry session context (`crate::session`);
    /// never read from a file.
    pub session: Option<Box<crate::session::SessionCarrier>>,
}

/// How long a `once` hook stays fired: until a new session, or until the model's context
/// window is lost (a compaction, a clear, a new session).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Once {
    Session,
    Context,
}

impl Once {
    pub fn as_str(self) -> &'static str {
        match self {
            Once::Session => "session",
            Once::Context => "context",
        }
    }

    /// Parses the word of the canonical file and of the compiled hooks file.
    pub fn parse(text: &str) -> Option<Once> {
        match text {
            "session" => Some(Once::Session),
            "context" => Some(Once::Context),
            _ => None,
        }
    }
}

/// Where a project's memory comes from (`memory { file "NOTES.md" }` or `memory { command … }`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemorySource {
    /// A file, absolute once lowered (a relative path is resolved against the canonical file's
    /// directory).
    File(PathBuf),
    /// A program whose standard output is the memory, run without a shell.
    Command(Vec<String>),
}

/// The `memory` block: project memory injected once per session, appended at turn stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memory {
    pub at: Location,
    pub source: MemorySource,
    /// `append "PROGRAM" …`: run at every turn stop with the hook's stdin; its standard output
    /// is appended to the memory file (`file` memory only).
    pub append: Option<Vec<String>>,
}

/// One parsed canonical file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalFile {
    pub scope: Scope,
    pub path: PathBuf,
    /// The file's bytes' sha256, as `sha256:<hex>`, for the install state.
    pub sha256: String,
    pub hooks: Vec<CanonicalHook>,
    /// The `memory` block, when the file has one.
    pub memory: Option<Memory>,
}

/// The largest canonical file read (1 MiB): a hook file is a page of text, and a larger one
/// is refused before it is parsed.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Reads and parses the canonical file at `path`. `known_targets` are the adapter names a
/// `targets` entry may use.
pub fn load(
    path: &Path,
    scope: Scope,
    known_targets: &BTreeSet<String>,
) -> Result<CanonicalFile, CanonicalError> {
    use std::io::Read;
    let at_start = Location {
        file: path.to_path_buf(),
        line: 1,
        column: 1,
    };
    let read_error = |err: std::io::Error| CanonicalError {
        at: at_start.clone(),
        problem: Box::new(if err.kind() == std::io::ErrorKind::NotFound {
            Problem::NotFound
        } else {
            Problem::Read {
                reason: err.to_string(),
            }
        }),
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(CanonicalError {
            at: at_start,
            problem: Box::new(Problem::TooLarge {
                limit: MAX_FILE_BYTES,
            }),
        });
    }
    let text = String::from_utf8(bytes).map_err(|err| CanonicalError {
        at: at_start.clone(),
        problem: Box::new(Problem::NotUtf8 {
            reason: err.to_string(),
        }),
    })?;
    parse(&text, path, scope, known_targets)
}

/// Parses canonical text as if read from `path`. Touches no file.
pub fn parse(
    text: &str,
    path: &Path,
    scope: Scope,
    known_targets: &BTreeSet<String>,
) -> Result<CanonicalFile, CanonicalError> {
    let (hooks, memory) = lower::Lowering::new(text, path, scope, known_targets).document()?;
    Ok(CanonicalFile {
        scope,
        path: path.to_path_buf(),
        sha256: crate::canonical::compile::sha256_hex(text.as_bytes()),
        hooks,
        memory,
    })
}
