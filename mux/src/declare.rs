//! Declarations: the `belfry.kdl` file of `belfry up` and `belfry down` (SPEC §11).
//!
//! A declaration file is KDL v2. It holds only `agent` nodes; each names one pane (its session)
//! and says what runs in it:
//!
//! ```kdl
//! agent "worker" {
//!     command "some-harness" "--flag"         // argv, run without a shell; required
//!     cwd "work/tree"                         // optional; default: the file's directory
//!     env { LOG_LEVEL "debug"; MODE "ci" }    // optional; one child node per variable
//!     size rows=40 cols=120                   // optional; default 24x80, each 1..=1000
//!     charter "charters/worker.md"            // optional; a file handed to the program
//!     adapter "provider-name"                 // optional; an opaque adapter name
//!     ding {                                  // optional; without it delivery is aggressive
//!         delivery "turn-boundary+fresh-idle"
//!         adapter { command "$BELFRY_ADAPTERS/belfry-adapter-x" "--arg" }
//!     }
//! }
//! ```
//!
//! The rules, each enforced with an error naming the file, line, column and problem:
//!
//! * Every node is known: a typo such as `comand` is an error (with a suggestion), never
//!   silently ignored. Each field appears at most once per block, agent names are unique and
//!   are valid session names (`[A-Za-z0-9._-]{1,64}`, SPEC §2).
//! * Every value is a string, except `size`'s integer properties. `command` has at least one
//!   argument and its first (the program) is not blank.
//! * `env` takes a block only: `env { KEY "value" }`. The one-line form `env "KEY" "value"` is
//!   rejected, so there is exactly one way to write a variable and a repeated key is an error.
//! * Relative `cwd` and `charter` paths are resolved against the declaration file's directory,
//!   lexically (no file is touched by [`parse_declarations`]); `~` is not expanded and is an
//!   error. An agent without `cwd` runs in the file's directory, so the same file gives the same
//!   panes whoever runs `belfry up` from wherever. [`load`] also resolves symbolic links in an
//!   existing `cwd`, exactly as `belfry new --cwd` does, so both name a directory the same way.
//! * `ding` holds `delivery` and `adapter { command … }` (SPEC §7.4). The token and the command
//!   are checked by [`DeliveryPolicy::from_token`]: an unknown token, or the rich token without
//!   a non-empty command, is an error. An adapter command without `delivery`, and a `ding`
//!   block without `delivery`, are errors too: the default aggressive policy runs no adapter,
//!   so the command would be silently ignored. Aggressive delivery is written by leaving the
//!   `ding` block out (or, equally, `delivery "aggressive"` without an adapter).
//!
//! * Limits, checked before the text is parsed (SPEC §12, see [`crate::kdl_depth`]): at most
//!   [`MAX_FILE_BYTES`] bytes, `{ … }` blocks and `/* … */` comments nested at most
//!   [`crate::kdl_depth::MAX_NESTING`] deep (slashdashed `/-` parts count: the parser reads
//!   them), and at most [`crate::kdl_depth::MAX_OPENERS`] `{` and `/*` in all.
//!
//! Nothing in a declaration is ever run by a shell, and nothing is expanded here: argv, `env`
//! values and the adapter command are kept exactly as written, so the generation depends only on
//! the file. The one expansion happens later, when the daemon's DING engine starts the adapter
//! sidecar: a leading `$BELFRY_ADAPTERS` in the adapter's program names the adapters directory
//! (see [`crate::ding`]), so a file can name an adapter executable without knowing where belfry
//! is installed. Any other `$NAME` reaches the program literally.
//!
//! # Generation
//!
//! [`AgentDecl::launch_spec`] lowers a declaration to the pane's [`LaunchSpec`], whose
//! [`LaunchSpec::generation`] hashes argv, cwd, declared env, DING policy and adapter command
//! (SPEC §2). So editing any of those reports drift, while `size`, `charter` and the agent-level
//! `adapter` name do not: a resize is not a different program, and the charter (its path and its
//! text) and the adapter name, which only says how the charter is handed over, are outside the
//! list SPEC §2 hashes. A charter edit therefore takes effect at the pane's next launch, not by
//! drift. For the same reason, the flag or variable that carries the charter at spawn must stay
//! out of the argv and env the pane hashes, or every pane with a charter would drift.
//!
//! Every declared agent lowers to an explicit policy token, because a pane without one was not
//! declared an agent and gets no automatic input (SPEC §7.3). An aggressive agent lowers to
//! `ding_policy: "aggressive"` and `adapter_command: None`, exactly like a pane made by
//! `belfry new --ding-delivery aggressive`, so the two have the same generation and `belfry up`
//! adopts such a pane; a plain `belfry new` pane, which gets no delivery, has another.
//!
//! # Reconciliation
//!
//! [`plan`] compares the declarations with the panes that are running and returns what
//! `belfry up` should do, one [`Action`] per declared agent, without doing any of it. A changed
//! declaration is reported as [`Action::Drift`] and never restarted unless `--replace` was
//! given; an exited declared pane is relaunched. [`plan_down`] lists what `belfry down` stops.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use belfry_ding::policy::DeliveryPolicy;
use belfry_pty::spec::{LaunchSpec, SizePolicy};

use crate::kdl_depth::{
    check_nesting, check_openers, Nesting, MAX_NESTING, MAX_OPENERS, PARSER_STACK_BYTES,
};
use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use serde::Serialize;

/// Rows of a pane whose declaration has no `size` (the same default as a spawn request).
pub const DEFAULT_ROWS: u16 = 24;

/// Columns of a pane whose declaration has no `size` (the same default as a spawn request).
pub const DEFAULT_COLS: u16 = 80;

/// The largest row or column count a declaration may ask for (the daemon's own limit).
pub const MAX_SIZE: u16 = 1000;

/// Scrollback lines of a declared pane: the pane host's default, as for `belfry new`.
pub const DEFAULT_SCROLLBACK: usize = 2000;

/// The largest declaration file read, in bytes. A file declaring a hundred agents is a few
/// tens of kilobytes; a larger one is not a declaration, and is refused before it is parsed.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Every agent a declaration file declares, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Declarations {
    /// The agents, in the order the file declares them; names are unique.
    pub agents: Vec<AgentDecl>,
    /// Where each agent's fields are written, by agent name, so that the checks made before a
    /// launch ([`crate::preflight`]) can name the file, line and column too.
    #[serde(skip)]
    pub(crate) places: BTreeMap<String, AgentPlaces>,
}

/// Where one agent's launch-relevant fields are in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentPlaces {
    /// The `agent` node.
    pub agent: Location,
    /// The program: the first argument of `command`.
    pub program: Location,
    /// The value of `cwd`, if the agent has one (else the agent runs in the file's directory).
    pub cwd: Option<Location>,
    /// The value of `charter`, if any.
    pub charter: Option<Location>,
}

impl Declarations {
    /// The agent declared under `name`, if any.
    pub fn get(&self, name: &str) -> Option<&AgentDecl> {
        self.agents.iter().find(|agent| agent.name == name)
    }
}

/// One `agent "name" { … }` node, validated and with its paths resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentDecl {
    /// The pane's session name.
    pub name: String,
    /// The program and its arguments, as written.
    pub argv: Vec<String>,
    /// The working directory: the declared `cwd` resolved against the file's directory, or the
    /// file's directory itself. `None` only when the file was given as a bare relative name
    /// with no directory (see [`parse_declarations`]).
    pub cwd: Option<PathBuf>,
    /// Declared environment; part of the generation.
    pub env: BTreeMap<String, String>,
    /// Initial rows, 1..=1000.
    pub rows: u16,
    /// Initial columns, 1..=1000.
    pub cols: u16,
    /// The charter file, resolved against the file's directory; not part of the generation.
    pub charter: Option<PathBuf>,
    /// The adapter's name, opaque to the core: the spec's `adapter`, which finds the adapter's
    /// declaration. Not part of the generation.
    pub adapter: Option<String>,
    /// The DING delivery policy: [`DeliveryPolicy::Aggressive`] when there is no `ding` block.
    pub ding: DeliveryPolicy,
}

impl AgentDecl {
    /// The launch spec of this agent's pane (SPEC §2).
    ///
    /// `ding_policy` is always set: a declared agent is an agent (SPEC §7.3), and an aggressive
    /// one has the token `aggressive` and no adapter command, like a pane from
    /// `belfry new --ding-delivery aggressive`. The adapter command is kept
    /// unexpanded so that the generation does not depend on where adapters are installed.
    /// `base_env` is left empty for the caller to fill with its own environment: it is not
    /// part of the generation.
    pub fn launch_spec(&self) -> LaunchSpec {
        let ding_policy = Some(self.ding.token().to_owned());
        LaunchSpec {
            session: self.name.clone(),
            argv: self.argv.clone(),
            cwd: self
                .cwd
                .as_ref()
                .map(|cwd| cwd.to_string_lossy().into_owned()),
            env: self.env.clone(),
            base_env: BTreeMap::new(),
            ding_policy,
            adapter_command: self.ding.adapter_command().map(<[String]>::to_vec),
            rows: self.rows,
            cols: self.cols,
            size_policy: SizePolicy::default(),
            adapter: self.adapter.clone(),
            extra_args: Vec::new(),
            extra_env: BTreeMap::new(),
            scrollback: DEFAULT_SCROLLBACK,
        }
    }

    /// The generation of this declaration: `sha256:<hex>` of its launch spec.
    pub fn generation(&self) -> String {
        self.launch_spec().generation()
    }
}

/// A place in a declaration file. Lines and columns count from 1; columns count characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file, as it was named to [`load`] or [`parse_declarations`].
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// Why a declaration file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum DeclareError {
    /// The file could not be read (or is not UTF-8).
    #[error("cannot read declarations {}: {source}", file.display())]
    Read {
        /// The file, as named.
        file: PathBuf,
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// The text is not KDL v2.
    #[error("{at}: not valid KDL v2: {message}")]
    Syntax {
        /// Where the first syntax error is.
        at: Location,
        /// The parser's message, with its help if it had one.
        message: String,
    },
    /// The text is KDL but not a valid declaration.
    #[error("{at}: {problem}")]
    Invalid {
        /// The node or value at fault.
        at: Location,
        /// What is wrong with it (boxed: it is the largest part of the error).
        problem: Box<Problem>,
    },
}

impl DeclareError {
    /// Where in the file the error is, if it is about the file's text.
    pub fn location(&self) -> Option<&Location> {
        match self {
            DeclareError::Read { .. } => None,
            DeclareError::Syntax { at, .. } | DeclareError::Invalid { at, .. } => Some(at),
        }
    }

    /// The validation problem, if the file is KDL but not a valid declaration.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            DeclareError::Invalid { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// What is wrong with a declaration that is valid KDL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A node this format does not have, such as the typo `comand`.
    #[error(
        "unknown node `{name}` in {block}{}; expected one of: {expected}",
        did_you_mean(suggestion)
    )]
    UnknownNode {
        /// The node's name.
        name: String,
        /// The block it is in (`the top level`, `agent "worker"`, `ding block`, …).
        block: String,
        /// The nodes that block accepts, comma-separated.
        expected: String,
        /// A known node name close to the unknown one.
        suggestion: Option<&'static str>,
    },
    /// A field given twice in one block.
    #[error("`{name}` is given twice in {block} (first on line {first_line}); keep one")]
    Repeated {
        /// The repeated node's name.
        name: String,
        /// The block both are in.
        block: String,
        /// The line of the first one.
        first_line: usize,
    },
    /// Two agents with one name.
    #[error(
        "agent {name:?} is declared twice (first on line {first_line}); \
         agent names are pane names and must be unique"
    )]
    DuplicateAgent {
        /// The name.
        name: String,
        /// The line of the first declaration.
        first_line: usize,
    },
    /// An agent name that is not a valid session name.
    #[error(
        "agent name {name:?} is invalid: use 1 to 64 characters of [A-Za-z0-9._-], \
         and not \".\" or \"..\""
    )]
    InvalidAgentName {
        /// The rejected name.
        name: String,
    },
    /// A node with the wrong number of arguments.
    #[error("`{node}` takes {expected}, found {found} argument(s): {example}")]
    Arity {
        /// The node.
        node: String,
        /// What it takes, in words.
        expected: &'static str,
        /// How many arguments it had.
        found: usize,
        /// How to write it.
        example: &'static str,
    },
    /// A value of the wrong type.
    #[error("{what} must be {expected}, found {found}")]
    WrongType {
        /// Which value (`argument 2 of \`command\``, `\`rows\` of \`size\``).
        what: String,
        /// The type it must have.
        expected: &'static str,
        /// The value found, as KDL.
        found: String,
    },
    /// A property (`key=value`) on a node that takes none, or an unknown one.
    #[error("`{node}` has no property `{key}`: {example}")]
    UnexpectedProperty {
        /// The node.
        node: String,
        /// The property's key.
        key: String,
        /// How to write the node.
        example: &'static str,
    },
    /// A `{ … }` block on a node that takes values only.
    #[error("`{node}` takes no block: {example}")]
    UnexpectedBlock {
        /// The node.
        node: String,
        /// How to write it.
        example: &'static str,
    },
    /// A node that needs a `{ … }` block has none.
    #[error("`{node}` needs a block: {example}")]
    MissingBlock {
        /// The node.
        node: String,
        /// How to write it.
        example: &'static str,
    },
    /// An agent without `command`.
    #[error("agent {agent:?} has no command: add `command \"PROGRAM\" \"ARG\"…` to its block")]
    MissingCommand {
        /// The agent's name.
        agent: String,
    },
    /// A string that must say something is empty or blank.
    #[error("{what} is empty: {example}")]
    Empty {
        /// Which value.
        what: String,
        /// How to write it.
        example: &'static str,
    },
    /// A string with a NUL character, which no argument, path or variable can carry.
    #[error(
        "{what} contains a NUL character, which no program argument, path or \
         environment value can hold"
    )]
    NulCharacter {
        /// Which value.
        what: String,
    },
    /// A `size` outside 1..=1000.
    #[error("size {key}={value} is out of range: rows and cols must be 1..=1000")]
    SizeOutOfRange {
        /// `rows` or `cols`.
        key: String,
        /// The value given.
        value: i128,
    },
    /// An `env` key that cannot be an environment variable name.
    #[error("environment variable name {key:?} is invalid: {reason}")]
    InvalidEnvKey {
        /// The key.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// A path starting with `~`, which is not expanded.
    #[error(
        "{node} path {path:?} starts with `~`, which belfry does not expand: \
         write the full path, or one relative to the declaration file"
    )]
    HomePath {
        /// The node (`cwd`, `charter`).
        node: String,
        /// The path as written.
        path: String,
    },
    /// A resolved path that is not UTF-8 (the file's own directory is not).
    #[error(
        "{node} path {path:?} is not valid UTF-8 once resolved against \
         the declaration file's directory"
    )]
    NonUtf8Path {
        /// The node (`cwd`, `charter`).
        node: String,
        /// The path, lossily shown.
        path: String,
    },
    /// The `ding` block's policy was refused by [`DeliveryPolicy::from_token`].
    #[error("{reason}")]
    Delivery {
        /// The policy's own message.
        reason: String,
    },
    /// A file larger than [`MAX_FILE_BYTES`], refused before it is parsed.
    #[error("the file is larger than {limit} bytes; a declaration file is far smaller")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Nesting deeper than [`crate::kdl_depth::MAX_NESTING`], refused before it is parsed
    /// because the parser's recursion would overflow the stack.
    #[error(
        "{what} nest deeper than {limit} levels here (a declaration needs at most 3); \
         remove the extra nesting, slashdashed (`/-`) parts included"
    )]
    TooDeep {
        /// What nests: "`{ … }` blocks" or "`/* … */` comments".
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// More than [`crate::kdl_depth::MAX_OPENERS`] `{` and `/*` in the file, strings and
    /// comments included: the bound that keeps any reading of the text from nesting deeper
    /// than the parser's stack holds.
    #[error(
        "the file holds more than {limit} `{{` and `/*` (counted everywhere, strings and \
         comments included); this is the one past the limit"
    )]
    TooManyOpeners {
        /// The limit.
        limit: usize,
    },
    /// The thread that parses the file could not be started.
    #[error("cannot start the declaration parser: {reason}")]
    ParserThread {
        /// What the system said.
        reason: String,
    },
    /// A `ding` block without `delivery`.
    #[error(
        "the ding block has no `delivery`: add `delivery \"turn-boundary+fresh-idle\"` \
         and an adapter, or remove the block for the default aggressive delivery"
    )]
    MissingDelivery,
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    match suggestion {
        Some(known) => format!(" (did you mean `{known}`?)"),
        None => String::new(),
    }
}

/// Reads and parses the declaration file at `path`.
///
/// Relative paths in the file are resolved against the directory of the file's canonical path,
/// and each `cwd` that exists is canonicalized, as `belfry new --cwd` does, so that a declared
/// pane and a `belfry new` pane in the same directory have the same generation. A `cwd` that
/// does not exist is kept as written: the daemon refuses it when the pane is launched, while
/// `belfry down` can still stop the running pane. Errors name the file as `path` gives it.
pub fn load(path: &Path) -> Result<Declarations, DeclareError> {
    let source = read_capped(path)?;
    let real_file = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let base_dir = real_file.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut declarations = Lowering::new(&source, path, base_dir).document()?;
    for agent in &mut declarations.agents {
        let canonical = agent
            .cwd
            .as_deref()
            .and_then(|cwd| std::fs::canonicalize(cwd).ok())
            .filter(|real| real.to_str().is_some());
        if let Some(real) = canonical {
            agent.cwd = Some(real);
        }
    }
    Ok(declarations)
}

/// Reads at most one byte more than [`MAX_FILE_BYTES`], so a huge file (or an endless one such
/// as a device) is never read whole; the lowering then refuses an oversize text with its
/// location.
fn read_capped(path: &Path) -> Result<String, DeclareError> {
    use std::io::Read;
    let read_error = |source| DeclareError::Read {
        file: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() > MAX_FILE_BYTES {
        // Cut mid-character, the tail is not UTF-8; it is refused for its size anyway.
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    String::from_utf8(bytes).map_err(|err| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the file is not UTF-8 ({err})"),
        ))
    })
}

/// Parses declarations from `source`, as if read from `file`. Touches no file.
///
/// Relative paths are resolved lexically against `file`'s directory: give an absolute `file`
/// for absolute paths. With a bare name such as `belfry.kdl`, relative paths stay relative and
/// an agent without `cwd` has none (the daemon's own directory would be used), which is why
/// [`load`] always resolves the file first.
pub fn parse_declarations(source: &str, file: &Path) -> Result<Declarations, DeclareError> {
    let base_dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    Lowering::new(source, file, base_dir).document()
}

/// A pane the daemon reports as running, as far as reconciliation needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningPane {
    /// The pane's session name.
    pub session: String,
    /// The generation it was launched with.
    pub generation: String,
    /// True if the program in it has exited (the pane host is still there).
    pub exited: bool,
}

/// What `belfry up` does for one declared agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// No pane by that name: launch it.
    Launch {
        /// The agent.
        name: String,
        /// The generation it will have.
        generation: String,
    },
    /// A live pane with the declared generation: adopt it, touch nothing.
    Adopt {
        /// The agent.
        name: String,
        /// Its generation, declared and running.
        generation: String,
    },
    /// A live pane whose declaration changed, without `--replace`: report, restart nothing.
    Drift {
        /// The agent.
        name: String,
        /// The generation the pane runs with.
        running_generation: String,
        /// The generation the file now declares.
        declared_generation: String,
    },
    /// Relaunch the pane with the declared spec.
    Replace {
        /// The agent.
        name: String,
        /// Why it is relaunched.
        reason: ReplaceReason,
        /// The generation the pane had.
        running_generation: String,
        /// The generation it will have.
        declared_generation: String,
    },
}

/// Why a declared pane is relaunched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    /// Its program exited; relaunching restarts nothing that is live.
    Exited,
    /// It drifted and `--replace` was given.
    Drifted,
}

/// Whether `belfry up` relaunches panes whose declaration changed (`--replace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftPolicy {
    /// Report drift, restart nothing (the default).
    Report,
    /// Relaunch drifted panes.
    Replace,
}

impl Action {
    /// The agent the action is about.
    pub fn name(&self) -> &str {
        match self {
            Action::Launch { name, .. }
            | Action::Adopt { name, .. }
            | Action::Drift { name, .. }
            | Action::Replace { name, .. } => name,
        }
    }
}

/// `sha256:` and the first 12 hex digits: enough to tell generations apart in a report.
fn short_generation(generation: &str) -> &str {
    let end = generation
        .char_indices()
        .nth("sha256:".len() + 12)
        .map_or(generation.len(), |(index, _)| index);
    &generation[..end]
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Launch { name, generation } => {
                write!(f, "launch  {name}: {}", short_generation(generation))
            }
            Action::Adopt { name, generation } => {
                write!(
                    f,
                    "adopt   {name}: running {}, unchanged",
                    short_generation(generation)
                )
            }
            Action::Drift {
                name,
                running_generation,
                declared_generation,
            } => write!(
                f,
                "drift   {name}: running {}, declared {}; left running \
                 (`belfry up --replace` relaunches it)",
                short_generation(running_generation),
                short_generation(declared_generation)
            ),
            Action::Replace {
                name,
                reason: ReplaceReason::Drifted,
                running_generation,
                declared_generation,
            } => write!(
                f,
                "replace {name}: declaration changed, {} -> {}",
                short_generation(running_generation),
                short_generation(declared_generation)
            ),
            Action::Replace {
                name,
                reason: ReplaceReason::Exited,
                declared_generation,
                ..
            } => write!(
                f,
                "replace {name}: program exited, relaunching {}",
                short_generation(declared_generation)
            ),
        }
    }
}

/// The human report of a plan: one line per action, each ending in a newline.
pub fn report(actions: &[Action]) -> String {
    actions.iter().map(|action| format!("{action}\n")).collect()
}

/// What `belfry up` does, one action per declared agent in file order (SPEC §11). Pure.
///
/// Not running: launch. Running with the declared generation: adopt. Running with another
/// generation: drift, unless `drift` is [`DriftPolicy::Replace`]. Exited (whatever its
/// generation): replace, since that restarts nothing live. Running panes that are not declared
/// are not `belfry up`'s business and get no action. If `running` names a session twice, the
/// first entry counts.
pub fn plan(decls: &Declarations, running: &[RunningPane], drift: DriftPolicy) -> Vec<Action> {
    let running = index_running(running);
    decls
        .agents
        .iter()
        .map(|agent| {
            let name = agent.name.clone();
            let declared_generation = agent.generation();
            let Some(pane) = running.get(agent.name.as_str()) else {
                return Action::Launch {
                    name,
                    generation: declared_generation,
                };
            };
            let running_generation = pane.generation.clone();
            if pane.exited {
                Action::Replace {
                    name,
                    reason: ReplaceReason::Exited,
                    running_generation,
                    declared_generation,
                }
            } else if running_generation == declared_generation {
                Action::Adopt {
                    name,
                    generation: declared_generation,
                }
            } else if drift == DriftPolicy::Replace {
                Action::Replace {
                    name,
                    reason: ReplaceReason::Drifted,
                    running_generation,
                    declared_generation,
                }
            } else {
                Action::Drift {
                    name,
                    running_generation,
                    declared_generation,
                }
            }
        })
        .collect()
}

/// What `belfry down` stops: the declared agents that have a pane, exited or not, in file
/// order. Undeclared panes are left alone. Pure.
pub fn plan_down(decls: &Declarations, running: &[RunningPane]) -> Vec<String> {
    let running = index_running(running);
    decls
        .agents
        .iter()
        .filter(|agent| running.contains_key(agent.name.as_str()))
        .map(|agent| agent.name.clone())
        .collect()
}

fn index_running(running: &[RunningPane]) -> BTreeMap<&str, &RunningPane> {
    let mut index = BTreeMap::new();
    for pane in running {
        index.entry(pane.session.as_str()).or_insert(pane);
    }
    index
}

// Lowering: KDL document → declarations.

const TOP_LEVEL_NODES: &[&str] = &["agent"];
const AGENT_NODES: &[&str] = &[
    "command", "cwd", "env", "size", "charter", "adapter", "ding",
];
const DING_NODES: &[&str] = &["delivery", "adapter"];
const DING_ADAPTER_NODES: &[&str] = &["command"];

const AGENT_EXAMPLE: &str = "agent \"NAME\" { command \"PROGRAM\" }";
const COMMAND_EXAMPLE: &str = "command \"PROGRAM\" \"ARG\"…";
const CWD_EXAMPLE: &str = "cwd \"PATH\"";
const ENV_EXAMPLE: &str = "env { KEY \"value\"; OTHER \"value\" }";
const ENV_VAR_EXAMPLE: &str = "KEY \"value\" inside `env { … }`";
const SIZE_EXAMPLE: &str = "size rows=40 cols=120";
const CHARTER_EXAMPLE: &str = "charter \"FILE.md\"";
const ADAPTER_NAME_EXAMPLE: &str =
    "adapter \"NAME\" (a DING adapter command goes in `ding { adapter { command \"PATH\" } }`)";
const DING_EXAMPLE: &str =
    "ding { delivery \"turn-boundary+fresh-idle\"; adapter { command \"PATH\" } }";
const DELIVERY_EXAMPLE: &str = "delivery \"turn-boundary+fresh-idle\"";
const DING_ADAPTER_EXAMPLE: &str = "adapter { command \"PATH\" \"ARG\"… }";

/// One pass over one file's text: knows how to turn byte offsets into locations.
struct Lowering<'a> {
    source: &'a str,
    file: &'a Path,
    base_dir: PathBuf,
    /// Byte offset of the start of each line, for [`Lowering::location`].
    line_starts: Vec<usize>,
}

/// The fields of one `ding` block, before the policy is checked.
struct DingBlock<'n> {
    node: &'n KdlNode,
    delivery: Option<(String, &'n KdlEntry)>,
    adapter_command: Option<(Vec<String>, &'n KdlNode)>,
}

impl<'a> Lowering<'a> {
    fn new(source: &'a str, file: &'a Path, base_dir: PathBuf) -> Self {
        let line_starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(index, _)| index + 1))
            .collect();
        Lowering {
            source,
            file,
            base_dir,
            line_starts,
        }
    }

    /// Checks the limits, then parses and lowers on a thread whose stack holds the deepest
    /// nesting the limits allow (see [`crate::kdl_depth`]); the document is also dropped
    /// there, since dropping it recurses as deeply as parsing it.
    fn document(&self) -> Result<Declarations, DeclareError> {
        self.check_limits()?;
        std::thread::scope(|scope| {
            let parser = std::thread::Builder::new()
                .name("belfry-declare".to_owned())
                .stack_size(PARSER_STACK_BYTES)
                .spawn_scoped(scope, || self.lower());
            match parser {
                Ok(parser) => parser.join().unwrap_or_else(|_| {
                    Err(self.invalid(
                        0,
                        Problem::ParserThread {
                            reason: "the parser panicked".to_owned(),
                        },
                    ))
                }),
                Err(err) => Err(self.invalid(
                    0,
                    Problem::ParserThread {
                        reason: err.to_string(),
                    },
                )),
            }
        })
    }

    fn lower(&self) -> Result<Declarations, DeclareError> {
        let document = self.parse_kdl()?;
        let mut agents: Vec<AgentDecl> = Vec::new();
        let mut first_lines: BTreeMap<String, usize> = BTreeMap::new();
        let mut all_places: BTreeMap<String, AgentPlaces> = BTreeMap::new();
        for node in document.nodes() {
            self.expect_known(node, "the top level", TOP_LEVEL_NODES)?;
            let (agent, name_entry, places) = self.agent(node)?;
            if let Some(&first_line) = first_lines.get(&agent.name) {
                return Err(self.invalid(
                    name_entry.span().offset(),
                    Problem::DuplicateAgent {
                        name: agent.name,
                        first_line,
                    },
                ));
            }
            first_lines.insert(agent.name.clone(), self.line_of(node));
            all_places.insert(agent.name.clone(), places);
            agents.push(agent);
        }
        Ok(Declarations {
            agents,
            places: all_places,
        })
    }

    /// SPEC §12: input the parser cannot take safely is refused before it is parsed (see
    /// [`crate::kdl_depth`]: deep nesting overflows the parser's stack and aborts).
    fn check_limits(&self) -> Result<(), DeclareError> {
        if self.source.len() > MAX_FILE_BYTES {
            return Err(self.invalid(
                MAX_FILE_BYTES,
                Problem::TooLarge {
                    limit: MAX_FILE_BYTES,
                },
            ));
        }
        check_nesting(self.source, MAX_NESTING).map_err(|deep| {
            let what = match deep.what {
                Nesting::Blocks => "`{ … }` blocks",
                Nesting::Comments => "`/* … */` comments",
            };
            self.invalid(
                deep.offset,
                Problem::TooDeep {
                    what,
                    limit: MAX_NESTING,
                },
            )
        })?;
        check_openers(self.source, MAX_OPENERS)
            .map_err(|offset| self.invalid(offset, Problem::TooManyOpeners { limit: MAX_OPENERS }))
    }

    fn parse_kdl(&self) -> Result<KdlDocument, DeclareError> {
        KdlDocument::parse_v2(self.source).map_err(|error| {
            let first = error
                .diagnostics
                .iter()
                .map(|diagnostic| {
                    let span = diagnostic.span;
                    let offset = diagnostic_offset(self.source, span.offset(), span.len());
                    (offset, diagnostic)
                })
                .min_by_key(|(offset, _)| *offset);
            let (offset, message) = match first {
                Some((offset, diagnostic)) => {
                    let mut message = diagnostic.to_string();
                    if let Some(help) = &diagnostic.help {
                        message.push_str(" (");
                        message.push_str(help);
                        message.push(')');
                    }
                    if error.diagnostics.len() > 1 {
                        message.push_str(&format!(
                            "; {} more error(s) after it",
                            error.diagnostics.len() - 1
                        ));
                    }
                    (offset, message)
                }
                None => (0, "the parser gave no reason".to_owned()),
            };
            DeclareError::Syntax {
                at: self.location(offset),
                message,
            }
        })
    }

    fn agent<'n>(
        &self,
        node: &'n KdlNode,
    ) -> Result<(AgentDecl, &'n KdlEntry, AgentPlaces), DeclareError> {
        let (name, name_entry) = self.single_string(node, "agent", AGENT_EXAMPLE)?;
        if belfry_pty::paths::validate_session_name(&name).is_err() {
            return Err(self.invalid(
                name_entry.span().offset(),
                Problem::InvalidAgentName { name },
            ));
        }
        let block_name = format!("agent {name:?}");
        let children = self.block(node, "agent", AGENT_EXAMPLE)?;
        self.expect_unique(children, &block_name)?;
        let mut agent = AgentDecl {
            name,
            argv: Vec::new(),
            cwd: self.default_cwd(),
            env: BTreeMap::new(),
            rows: DEFAULT_ROWS,
            cols: DEFAULT_COLS,
            charter: None,
            adapter: None,
            ding: DeliveryPolicy::Aggressive,
        };
        let mut places = AgentPlaces {
            agent: self.location(node.span().offset()),
            program: self.location(node.span().offset()),
            cwd: None,
            charter: None,
        };
        for child in children.nodes() {
            self.expect_known(child, &block_name, AGENT_NODES)?;
            // The first value of a node is what a launch check complains about.
            let value_at = self.location(
                child
                    .entries()
                    .first()
                    .map_or(child.span().offset(), |entry| entry.span().offset()),
            );
            match child.name().value() {
                "command" => places.program = value_at,
                "cwd" => places.cwd = Some(value_at),
                "charter" => places.charter = Some(value_at),
                _ => {}
            }
            match child.name().value() {
                "command" => agent.argv = self.command(child)?,
                "cwd" => agent.cwd = Some(self.path(child, "cwd", CWD_EXAMPLE)?),
                "env" => agent.env = self.env(child)?,
                "size" => (agent.rows, agent.cols) = self.size(child)?,
                "charter" => agent.charter = Some(self.path(child, "charter", CHARTER_EXAMPLE)?),
                "adapter" => {
                    let (adapter, _) =
                        self.single_string(child, "adapter", ADAPTER_NAME_EXAMPLE)?;
                    self.no_block(child, "adapter", ADAPTER_NAME_EXAMPLE)?;
                    agent.adapter = Some(adapter);
                }
                _ => agent.ding = self.ding(child)?,
            }
        }
        if agent.argv.is_empty() {
            return Err(self.invalid(
                node.span().offset(),
                Problem::MissingCommand { agent: agent.name },
            ));
        }
        Ok((agent, name_entry, places))
    }

    /// The agent's `command`: at least one string, the first not blank.
    fn command(&self, node: &KdlNode) -> Result<Vec<String>, DeclareError> {
        let argv = self.strings(node, "command", COMMAND_EXAMPLE)?;
        match argv.first() {
            None => Err(self.invalid(
                node.span().offset(),
                Problem::Arity {
                    node: "command".to_owned(),
                    expected: "at least one argument (the program)",
                    found: 0,
                    example: COMMAND_EXAMPLE,
                },
            )),
            Some((program, entry)) if program.trim().is_empty() => Err(self.invalid(
                entry.span().offset(),
                Problem::Empty {
                    what: "the program (first argument) of `command`".to_owned(),
                    example: COMMAND_EXAMPLE,
                },
            )),
            Some(_) => Ok(argv.into_iter().map(|(argument, _)| argument).collect()),
        }
    }

    fn env(&self, node: &KdlNode) -> Result<BTreeMap<String, String>, DeclareError> {
        self.no_values(node, "env", ENV_EXAMPLE)?;
        let children = self.block(node, "env", ENV_EXAMPLE)?;
        self.expect_unique(children, "the env block")?;
        let mut env = BTreeMap::new();
        for variable in children.nodes() {
            let key = variable.name().value();
            if let Some(reason) = env_key_problem(key) {
                return Err(self.invalid(
                    variable.span().offset(),
                    Problem::InvalidEnvKey {
                        key: key.to_owned(),
                        reason,
                    },
                ));
            }
            let (value, _) = self.value_string(variable, key, ENV_VAR_EXAMPLE)?;
            self.no_block(variable, key, ENV_VAR_EXAMPLE)?;
            env.insert(key.to_owned(), value);
        }
        Ok(env)
    }

    fn size(&self, node: &KdlNode) -> Result<(u16, u16), DeclareError> {
        self.no_block(node, "size", SIZE_EXAMPLE)?;
        let (mut rows, mut cols) = (None, None);
        for entry in node.entries() {
            let Some(key) = entry.name().map(|key| key.value()) else {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::Arity {
                        node: "size".to_owned(),
                        expected: "no positional arguments, only rows=N and cols=N",
                        found: node.entries().iter().filter(|e| e.name().is_none()).count(),
                        example: SIZE_EXAMPLE,
                    },
                ));
            };
            let slot = match key {
                "rows" => &mut rows,
                "cols" => &mut cols,
                _ => {
                    return Err(self.invalid(
                        entry.span().offset(),
                        Problem::UnexpectedProperty {
                            node: "size".to_owned(),
                            key: key.to_owned(),
                            example: SIZE_EXAMPLE,
                        },
                    ))
                }
            };
            if slot.is_some() {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::Repeated {
                        name: format!("{key}="),
                        block: "`size`".to_owned(),
                        first_line: self.line_of(node),
                    },
                ));
            }
            *slot = Some(self.size_value(entry, key)?);
        }
        if rows.is_none() && cols.is_none() {
            return Err(self.invalid(
                node.span().offset(),
                Problem::Arity {
                    node: "size".to_owned(),
                    expected: "rows=N, cols=N or both",
                    found: 0,
                    example: SIZE_EXAMPLE,
                },
            ));
        }
        Ok((rows.unwrap_or(DEFAULT_ROWS), cols.unwrap_or(DEFAULT_COLS)))
    }

    fn size_value(&self, entry: &KdlEntry, key: &str) -> Result<u16, DeclareError> {
        let Some(value) = entry.value().as_integer() else {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::WrongType {
                    what: format!("`{key}` of `size`"),
                    expected: "an integer",
                    found: entry.value().to_string(),
                },
            ));
        };
        match u16::try_from(value) {
            Ok(size) if (1..=MAX_SIZE).contains(&size) => Ok(size),
            _ => Err(self.invalid(
                entry.span().offset(),
                Problem::SizeOutOfRange {
                    key: key.to_owned(),
                    value,
                },
            )),
        }
    }

    fn ding(&self, node: &KdlNode) -> Result<DeliveryPolicy, DeclareError> {
        self.no_values(node, "ding", DING_EXAMPLE)?;
        let children = self.block(node, "ding", DING_EXAMPLE)?;
        self.expect_unique(children, "the ding block")?;
        let mut block = DingBlock {
            node,
            delivery: None,
            adapter_command: None,
        };
        for child in children.nodes() {
            self.expect_known(child, "the ding block", DING_NODES)?;
            if child.name().value() == "delivery" {
                let (token, entry) = self.single_string(child, "delivery", DELIVERY_EXAMPLE)?;
                self.no_block(child, "delivery", DELIVERY_EXAMPLE)?;
                block.delivery = Some((token, entry));
            } else {
                block.adapter_command = Some(self.ding_adapter(child)?);
            }
        }
        self.delivery_policy(block)
    }

    /// `adapter { command … }` inside `ding`. An empty command is left for
    /// [`DeliveryPolicy::from_token`] to refuse, so the message is the policy's own.
    fn ding_adapter<'n>(
        &self,
        node: &'n KdlNode,
    ) -> Result<(Vec<String>, &'n KdlNode), DeclareError> {
        self.no_values(node, "adapter", DING_ADAPTER_EXAMPLE)?;
        let children = self.block(node, "adapter", DING_ADAPTER_EXAMPLE)?;
        self.expect_unique(children, "the ding adapter block")?;
        let mut command = (Vec::new(), node);
        for child in children.nodes() {
            self.expect_known(child, "the ding adapter block", DING_ADAPTER_NODES)?;
            let argv = self.strings(child, "command", DING_ADAPTER_EXAMPLE)?;
            command = (
                argv.into_iter().map(|(argument, _)| argument).collect(),
                child,
            );
        }
        Ok(command)
    }

    /// SPEC §7.4: the token and command are validated by the policy itself; a block that
    /// would have no effect is refused rather than ignored.
    fn delivery_policy(&self, block: DingBlock<'_>) -> Result<DeliveryPolicy, DeclareError> {
        let Some((token, token_entry)) = block.delivery else {
            return Err(self.invalid(block.node.span().offset(), Problem::MissingDelivery));
        };
        let (command, command_node) = match block.adapter_command {
            Some((command, node)) => (command, Some(node)),
            None => (Vec::new(), None),
        };
        DeliveryPolicy::from_token(&token, command).map_err(|error| {
            let offset = match error {
                belfry_ding::Error::UnknownDeliveryPolicy { .. } => token_entry.span().offset(),
                _ => command_node.unwrap_or(block.node).span().offset(),
            };
            self.invalid(
                offset,
                Problem::Delivery {
                    reason: error.to_string(),
                },
            )
        })
    }

    /// A `cwd` or `charter` path, resolved against the file's directory.
    fn path(
        &self,
        node: &KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<PathBuf, DeclareError> {
        let (raw, entry) = self.single_string(node, name, example)?;
        self.no_block(node, name, example)?;
        if raw.starts_with('~') {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::HomePath {
                    node: name.to_owned(),
                    path: raw,
                },
            ));
        }
        let resolved = normalize(&self.base_dir.join(&raw));
        if resolved.to_str().is_none() {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::NonUtf8Path {
                    node: name.to_owned(),
                    path: resolved.to_string_lossy().into_owned(),
                },
            ));
        }
        Ok(resolved)
    }

    /// The file's directory, the working directory of an agent without `cwd`.
    fn default_cwd(&self) -> Option<PathBuf> {
        let dir = normalize(&self.base_dir);
        (!dir.as_os_str().is_empty() && dir.to_str().is_some()).then_some(dir)
    }

    // Shape checks shared by every node.

    /// Every entry is a positional string; returns them with their entries.
    fn strings<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<Vec<(String, &'n KdlEntry)>, DeclareError> {
        self.no_block(node, name, example)?;
        let mut strings = Vec::with_capacity(node.entries().len());
        for (index, entry) in node.entries().iter().enumerate() {
            if let Some(key) = entry.name() {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::UnexpectedProperty {
                        node: name.to_owned(),
                        key: key.value().to_owned(),
                        example,
                    },
                ));
            }
            let KdlValue::String(value) = entry.value() else {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::WrongType {
                        what: format!("argument {} of `{name}`", index + 1),
                        expected: "a string",
                        found: entry.value().to_string(),
                    },
                ));
            };
            let what = format!("argument {} of `{name}`", index + 1);
            strings.push((self.no_nul(value, entry, what)?, entry));
        }
        Ok(strings)
    }

    /// Exactly one positional string argument (blocks are checked by the caller).
    fn value_string<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(String, &'n KdlEntry), DeclareError> {
        let entries = node.entries();
        if let Some(entry) = entries.iter().find(|entry| entry.name().is_some()) {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::UnexpectedProperty {
                    node: name.to_owned(),
                    key: entry
                        .name()
                        .map(|key| key.value().to_owned())
                        .unwrap_or_default(),
                    example,
                },
            ));
        }
        let [entry] = entries else {
            return Err(self.invalid(
                entries
                    .get(1)
                    .map_or(node.span().offset(), |extra| extra.span().offset()),
                Problem::Arity {
                    node: name.to_owned(),
                    expected: "exactly one string",
                    found: entries.len(),
                    example,
                },
            ));
        };
        match entry.value() {
            KdlValue::String(value) => {
                let value = self.no_nul(value, entry, format!("the value of `{name}`"))?;
                Ok((value, entry))
            }
            other => Err(self.invalid(
                entry.span().offset(),
                Problem::WrongType {
                    what: format!("the value of `{name}`"),
                    expected: "a string",
                    found: other.to_string(),
                },
            )),
        }
    }

    /// Exactly one positional string that is not blank.
    fn single_string<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(String, &'n KdlEntry), DeclareError> {
        let (value, entry) = self.value_string(node, name, example)?;
        if value.trim().is_empty() {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::Empty {
                    what: format!("the value of `{name}`"),
                    example,
                },
            ));
        }
        Ok((value, entry))
    }

    /// `value`, owned, unless it holds a NUL character.
    fn no_nul(&self, value: &str, entry: &KdlEntry, what: String) -> Result<String, DeclareError> {
        if value.contains('\0') {
            return Err(self.invalid(entry.span().offset(), Problem::NulCharacter { what }));
        }
        Ok(value.to_owned())
    }

    fn no_values(
        &self,
        node: &KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(), DeclareError> {
        let Some(entry) = node.entries().first() else {
            return Ok(());
        };
        let problem = match entry.name() {
            Some(key) => Problem::UnexpectedProperty {
                node: name.to_owned(),
                key: key.value().to_owned(),
                example,
            },
            None => Problem::Arity {
                node: name.to_owned(),
                expected: "no arguments, only a block",
                found: node.entries().len(),
                example,
            },
        };
        Err(self.invalid(entry.span().offset(), problem))
    }

    fn no_block(
        &self,
        node: &KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<(), DeclareError> {
        if node.children().is_some() {
            return Err(self.invalid(
                node.span().offset(),
                Problem::UnexpectedBlock {
                    node: name.to_owned(),
                    example,
                },
            ));
        }
        Ok(())
    }

    fn block<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        example: &'static str,
    ) -> Result<&'n KdlDocument, DeclareError> {
        node.children().ok_or_else(|| {
            self.invalid(
                node.span().offset(),
                Problem::MissingBlock {
                    node: name.to_owned(),
                    example,
                },
            )
        })
    }

    fn expect_known(
        &self,
        node: &KdlNode,
        block: &str,
        known: &'static [&'static str],
    ) -> Result<(), DeclareError> {
        let name = node.name().value();
        if known.contains(&name) {
            return Ok(());
        }
        Err(self.invalid(
            node.span().offset(),
            Problem::UnknownNode {
                name: name.to_owned(),
                block: block.to_owned(),
                expected: known.join(", "),
                suggestion: closest(name, known),
            },
        ))
    }

    /// No node name appears twice among `children`.
    fn expect_unique(&self, children: &KdlDocument, block: &str) -> Result<(), DeclareError> {
        let mut first_lines: BTreeMap<&str, usize> = BTreeMap::new();
        for child in children.nodes() {
            let name = child.name().value();
            if let Some(&first_line) = first_lines.get(name) {
                return Err(self.invalid(
                    child.span().offset(),
                    Problem::Repeated {
                        name: name.to_owned(),
                        block: block.to_owned(),
                        first_line,
                    },
                ));
            }
            first_lines.insert(name, self.line_of(child));
        }
        Ok(())
    }

    // Locations.

    fn invalid(&self, offset: usize, problem: Problem) -> DeclareError {
        DeclareError::Invalid {
            at: self.location(offset),
            problem: Box::new(problem),
        }
    }

    fn line_of(&self, node: &KdlNode) -> usize {
        self.location(node.span().offset()).line
    }

    /// The line and column of a byte offset (kdl spans count bytes). An offset past the end
    /// is clamped to the end, and one inside a character to that character.
    fn location(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self
            .line_starts
            .partition_point(|&line_start| line_start <= offset);
        let line_start = self.line_starts.get(line - 1).copied().unwrap_or(0);
        let column = self.source[line_start..offset].chars().count() + 1;
        Location {
            file: self.file.to_path_buf(),
            line,
            column,
        }
    }
}

/// Where to point for a KDL diagnostic: its start, unless the span runs over several lines.
///
/// kdl 6.7 gives some errors inside a property value (`rows=1.`, `x=`) a span that starts at
/// the beginning of the document and ends where the parser gave up; pointing at line 1 would
/// send the user to the wrong place, so such a span is reported at its last character.
fn diagnostic_offset(source: &str, start: usize, len: usize) -> usize {
    let end = start.saturating_add(len);
    let covered = source.get(start..end).unwrap_or("");
    if covered.trim_end().contains('\n') {
        end.saturating_sub(1)
    } else {
        start
    }
}

/// `None` if `key` can name an environment variable, else why not.
fn env_key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        Some("it is empty")
    } else if key.contains('=') {
        Some("it contains `=`")
    } else if key.contains('\0') {
        Some("it contains a NUL character")
    } else {
        None
    }
}

/// The known name within two edits of `name`, for "did you mean".
fn closest(name: &str, known: &[&'static str]) -> Option<&'static str> {
    known
        .iter()
        .map(|candidate| (edit_distance(name, candidate), *candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over characters; names here are short.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, b_char) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(a_char != *b_char);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// `path` with `.` removed and `..` applied lexically, as a spawn request would see it.
fn normalize(path: &Path) -> PathBuf {
    let mut normalized = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let popped = matches!(
                    normalized.components().next_back(),
                    Some(Component::Normal(_))
                ) && normalized.pop();
                let at_root = matches!(
                    normalized.components().next_back(),
                    Some(Component::RootDir | Component::Prefix(_))
                );
                if !popped && !at_root {
                    normalized.push("..");
                }
            }
            other => normalized.push(other.as_os_str()),
        }
    }
    normalized
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_character_columns() {
        let lowering = Lowering::new("ab\né x\n", Path::new("f.kdl"), PathBuf::new());
        let at = |offset| {
            let location = lowering.location(offset);
            (location.line, location.column)
        };
        assert_eq!(at(0), (1, 1));
        assert_eq!(at(2), (1, 3));
        assert_eq!(at(3), (2, 1));
        // `x` is byte 6 but the third character of line 2.
        assert_eq!(at(6), (2, 3));
        // Inside `é` and past the end are clamped, never a panic.
        assert_eq!(at(4), (2, 1));
        assert_eq!(at(999), (3, 1));
    }

    #[test]
    fn paths_are_normalized_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../a")), PathBuf::from("/a"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalize(Path::new("")), PathBuf::new());
    }

    #[test]
    fn suggestions_are_close_known_names() {
        assert_eq!(closest("comand", AGENT_NODES), Some("command"));
        assert_eq!(closest("enviroment", AGENT_NODES), None);
        assert_eq!(closest("delivry", DING_NODES), Some("delivery"));
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn short_generations_keep_twelve_digits() {
        assert_eq!(
            short_generation("sha256:0123456789abcdef"),
            "sha256:0123456789ab"
        );
        assert_eq!(short_generation("odd"), "odd");
    }
}
