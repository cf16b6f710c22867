//! What is wrong with a canonical hook file: a [`Problem`] at a [`Location`]. Every message
//! reads `FILE:LINE:COL: problem`, so an editor can jump to it.

use std::fmt;
use std::path::PathBuf;

/// A place in a canonical file. Lines and columns count from 1; columns count characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// A canonical file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct CanonicalError {
    pub at: Location,
    /// Boxed: the error travels through every lowering step, the problem is rarely read.
    pub problem: Box<Problem>,
}

/// Why a canonical file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("cannot read the hook file: {reason}")]
    Read { reason: String },
    #[error("there is no hook file here: write one (docs/hooks.md, \"The canonical hook file\"); to remove what an earlier apply installed, run `belfry hooks uninstall`")]
    NotFound,
    #[error("the hook file is not UTF-8 ({reason})")]
    NotUtf8 { reason: String },
    #[error("the hook file is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the hook file nests `{{ … }}` blocks or `/* … */` comments too deeply (at most {limit} openers)")]
    TooDeep { limit: usize },
    #[error("not valid KDL v2: {message}")]
    Syntax { message: String },
    #[error("unknown node `{name}` in {block}; expected one of: {expected}")]
    UnknownNode {
        name: String,
        block: String,
        expected: String,
    },
    #[error("`{name}` is given twice in {block} (first on line {first_line}); keep one")]
    Repeated {
        name: String,
        block: String,
        first_line: usize,
    },
    #[error("hook {name:?} is defined twice in this file (first on line {first_line}); a hook's name is its identity")]
    DuplicateHook { name: String, first_line: usize },
    #[error("hook name {name:?} is invalid: use 1 to 64 characters of [A-Za-z0-9._-]")]
    InvalidHookName { name: String },
    #[error("hook {name:?} has no `{field}`: {example}")]
    Missing {
        name: String,
        field: &'static str,
        example: &'static str,
    },
    #[error("`{node}` takes {expected}: {example}")]
    Shape {
        node: String,
        expected: &'static str,
        example: &'static str,
    },
    #[error("{what} must be {expected}, found {found}")]
    WrongType {
        what: String,
        expected: &'static str,
        found: String,
    },
    #[error("`{node}` has no property `{key}`: {example}")]
    UnexpectedProperty {
        node: String,
        key: String,
        example: &'static str,
    },
    #[error("{what} {value:?} is not one of: {expected}")]
    NotOneOf {
        what: &'static str,
        value: String,
        expected: String,
    },
    #[error("{what} is empty")]
    Empty { what: String },
    #[error("{what} contains a NUL character")]
    Nul { what: String },
    #[error("timeout-ms {value} is out of range 1..={max}")]
    TimeoutRange { value: i128, max: u64 },
    #[error("`select` applies to tool events (before-tool, after-tool) only; event {event:?} has no tool to select")]
    SelectOnNonToolEvent { event: String },
    #[error(
        "`select native=` makes a hook target-specific: give exactly one target, found {found}"
    )]
    NativeNeedsOneTarget { found: usize },
    #[error("target {target:?} is given twice")]
    DuplicateTarget { target: String },
    #[error("target {target:?} is not a known adapter; known: {known}")]
    UnknownTarget { target: String, known: String },
    #[error("effect {effect:?} is given twice")]
    DuplicateEffect { effect: String },
    #[error("intent {intent:?} {rule}")]
    IntentEffects { intent: &'static str, rule: String },
    #[error("effect {effect:?} does not exist at event {event:?}; it does at: {events}")]
    EffectNotAtEvent {
        effect: &'static str,
        event: String,
        events: String,
    },
    #[error("effect \"rewrite\" is not carried by belfry dispatch yet (its answer has a decision, a reason and a context, no new tool input); remove it")]
    RewriteNotCarried,
    #[error("`memory` takes exactly one source, `file \"PATH\"` or `command \"PROGRAM\" …`: memory {{ file \"NOTES.md\" }}")]
    MemorySource,
    #[error(
        "`append` in `memory` needs a `file` memory to append to (a `command` memory has no file)"
    )]
    MemoryAppendNeedsFile,
    #[error("`async #true` is for intent \"observe\" only: a harness that does not wait for a hook never sees its deny or context")]
    AsyncNotObserve,
}
