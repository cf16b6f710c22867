//! Declarations: the `belfry.kdl` file of `belfry up` and `belfry down` (spec §11).
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
//!     history lines=5000 bytes=8388608        // optional; default 2000 lines, 4 MiB
//!     charter "charters/worker.md"            // optional; a file handed to the program
//!     adapter "provider-name"                 // optional; an opaque adapter name
//!     host "build1"                           // optional; a `hosts` alias or [user@]box[:port]
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
//!   are valid session names (`[A-Za-z0-9._-]{1,64}`, spec §2).
//! * Every value is a string, except the integer properties of `size` and `history`
//!   (`lines` 0..=1 000 000, `bytes` 0..=1 GiB: the scrollback's line cap and byte cap). `command` has at least one
//!   argument and its first (the program) is not blank.
//! * `env` takes a block only: `env { KEY "value" }`. The one-line form `env "KEY" "value"` is
//!   rejected, so there is exactly one way to write a variable and a repeated key is an error.
//! * Relative `cwd` and `charter` paths are resolved against the declaration file's directory,
//!   lexically (no file is touched by [`parse_declarations`]); `~` is not expanded and is an
//!   error. An agent without `cwd` runs in the file's directory, so the same file gives the same
//!   panes whoever runs `belfry up` from wherever. [`load`] also resolves symbolic links in an
//!   existing `cwd`, exactly as `belfry new --cwd` does, so both name a directory the same way.
//! * `ding` holds `delivery` and `adapter { command … }` (spec §7.4). The token and the command
//!   are checked by [`DeliveryPolicy::from_token`]: an unknown token, or the rich token without
//!   a non-empty command, is an error. An adapter command without `delivery`, and a `ding`
//!   block without `delivery`, are errors too: the default aggressive policy runs no adapter,
//!   so the command would be silently ignored. Aggressive delivery is written by leaving the
//!   `ding` block out (or, equally, `delivery "aggressive"` without an adapter).
//!
//! * Limits, checked before the text is parsed (spec §12, see [`crate::kdl_depth`]): at most
//!   [`MAX_FILE_BYTES`] bytes, `{ … }` blocks and `/* … */` comments nested at most
//!   [`crate::kdl_depth::MAX_NESTING`] deep (slashdashed `/-` parts count: the parser reads
//!   them), and at most [`crate::kdl_depth::MAX_OPENERS`] `{` and `/*` in all.
//!
//! Nothing in a declaration is ever run by a shell, and nothing is expanded here: argv, `env`
//! values and the adapter command are kept exactly as written, so the generation depends only on
//! the file. The one expansion happens later, when the daemon's DING engine starts the adapter
//! sidecar: a leading `$BELFRY_ADAPTERS` in the adapter's program names the adapters directory
//! (found by [`crate::adapters`]), so a file can name an adapter executable without knowing where belfry
//! is installed. Any other `$NAME` reaches the program literally.
//!
//! # Generation
//!
//! [`AgentDecl::launch_spec`] lowers a declaration to the pane's [`LaunchSpec`], whose
//! [`LaunchSpec::generation`] hashes argv, cwd, declared env, DING policy and adapter command
//! (spec §2). So editing any of those reports drift, while `size`, `charter` and the agent-level
//! `adapter` name do not: a resize is not a different program, and the charter (its path and its
//! text) and the adapter name, which only says how the charter is handed over, are outside the
//! list spec §2 hashes. A charter edit therefore takes effect at the pane's next launch, not by
//! drift. For the same reason, the flag or variable that carries the charter at spawn must stay
//! out of the argv and env the pane hashes, or every pane with a charter would drift.
//!
//! Every declared agent lowers to an explicit policy token, because a pane without one was not
//! declared an agent and gets no automatic input (spec §7.3). An aggressive agent lowers to
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
//! [`up`] and [`down`] do it: the CLI only parses its arguments, calls them and prints.
//!
//! # Layout
//!
//! This module holds the typed declarations and the public face; `lower` turns a KDL document
//! into them, `plan` compares them with the running panes, `apply` carries a plan out through
//! a daemon client ([`up`], [`down`]), and `error` says what is wrong with a file that is
//! valid KDL.

mod apply;
mod error;
mod lower;
mod plan;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use belfry_ding::policy::DeliveryPolicy;
use belfry_proto::spec::{LaunchSpec, SizePolicy};
use serde::Serialize;

pub use apply::{down, dry_run, running_panes, up, Applied};
pub use error::Problem;
pub use lower::edit_distance;

use crate::Error;
pub use plan::{plan, plan_down, report, Action, DriftPolicy, ReplaceReason, RunningPane};

use lower::Lowering;

/// A pane's size when `size` is not given, and the largest dimension: the protocol's.
pub const DEFAULT_ROWS: u16 = belfry_proto::limits::DEFAULT_SIZE.rows();
/// See [`DEFAULT_ROWS`].
pub const DEFAULT_COLS: u16 = belfry_proto::limits::DEFAULT_SIZE.cols();
/// See [`DEFAULT_ROWS`].
pub const MAX_SIZE: u16 = belfry_proto::limits::MAX_DIMENSION;

/// Scrollback lines of a declared pane without `history lines=N`: the pane host's default, as
/// for `belfry new`.
pub const DEFAULT_SCROLLBACK: usize = belfry_proto::limits::DEFAULT_SCROLLBACK as usize;
/// The most `history lines=N` may keep: the protocol's cap.
pub const MAX_SCROLLBACK: usize = belfry_proto::limits::MAX_SCROLLBACK as usize;
/// Scrollback bytes of a declared pane without `history bytes=N`: the pane host's default.
pub const DEFAULT_SCROLLBACK_BYTES: usize = belfry_proto::limits::DEFAULT_SCROLLBACK_BYTES as usize;
/// The most `history bytes=N` may be: the protocol's cap.
pub const MAX_SCROLLBACK_BYTES: usize = belfry_proto::limits::MAX_SCROLLBACK_BYTES as usize;

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

    /// The declarations split by the machine their agents run on (spec §6.2), this machine's
    /// (`None`) first, then each `host` in the order it first appears; each part keeps its
    /// agents in file order, so `belfry up` runs one plan per daemon.
    pub fn by_host(&self) -> Vec<(Option<String>, Declarations)> {
        let mut parts: Vec<(Option<String>, Declarations)> = vec![(None, Declarations::default())];
        for agent in &self.agents {
            let index = match parts.iter().position(|(host, _)| *host == agent.host) {
                Some(index) => index,
                None => {
                    parts.push((agent.host.clone(), Declarations::default()));
                    parts.len() - 1
                }
            };
            let part = &mut parts[index].1;
            part.agents.push(agent.clone());
            if let Some(places) = self.places.get(&agent.name) {
                part.places.insert(agent.name.clone(), places.clone());
            }
        }
        parts.retain(|(host, part)| host.is_some() || !part.agents.is_empty());
        parts
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
    /// Scrollback lines kept (`history lines=N`); not part of the generation.
    pub scrollback: usize,
    /// Scrollback bytes kept (`history bytes=N`); not part of the generation.
    pub scrollback_bytes: usize,
    /// The charter file, resolved against the file's directory; not part of the generation.
    pub charter: Option<PathBuf>,
    /// The adapter's name, opaque to the core: the spec's `adapter`, which finds the adapter's
    /// declaration. Not part of the generation.
    pub adapter: Option<String>,
    /// The DING delivery policy: [`DeliveryPolicy::Aggressive`] when there is no `ding` block.
    pub ding: DeliveryPolicy,
    /// Whether the agent has a `ding` block. Without one, `belfry up` may make the rich
    /// policy its default where the adapter's activity executable can work (the CLI decides,
    /// since it needs the hooks projection's state).
    #[serde(skip)]
    pub ding_declared: bool,
    /// The canonical hooks (`belfry-hooks.kdl`, by name) this agent must run under: `belfry
    /// up` refuses to launch it unless each targets its adapter's harness, exactly where the
    /// hook enforces (spec §9). Not part of the generation.
    pub hooks: Vec<String>,
    /// The machine the agent runs on (spec §6.2): a `hosts` alias of the user's config or
    /// `[user@]box[:port]`, reached through `ssh … belfry proxy`; `None` for this machine.
    /// Not part of the generation: where a pane runs is not what it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl AgentDecl {
    /// The launch spec of this agent's pane (spec §2).
    ///
    /// `ding_policy` is always set: a declared agent is an agent (spec §7.3), and an aggressive
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
            term: None,
            ding_policy,
            adapter_command: self.ding.adapter_command().map(<[String]>::to_vec),
            rows: self.rows,
            cols: self.cols,
            size_policy: SizePolicy::default(),
            adapter: self.adapter.clone(),
            extra_args: Vec::new(),
            extra_env: BTreeMap::new(),
            scrollback: self.scrollback,
            scrollback_bytes: self.scrollback_bytes,
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

/// Reads and parses the declaration file at `path`.
///
/// Relative paths in the file are resolved against the directory of the file's canonical path,
/// and each `cwd` that exists is canonicalized, as `belfry new --cwd` does, so that a declared
/// pane and a `belfry new` pane in the same directory have the same generation. A `cwd` that
/// does not exist is kept as written: the daemon refuses it when the pane is launched, while
/// `belfry down` can still stop the running pane. Errors name the file as `path` gives it.
pub fn load(path: &Path) -> Result<Declarations, Error> {
    let source = read_capped(path)?;
    let real_file = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let base_dir = real_file.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut declarations = Lowering::new(&source, path, base_dir).document()?;
    // A remote agent's directory is on the far machine: nothing of it is looked up here.
    for agent in declarations
        .agents
        .iter_mut()
        .filter(|agent| agent.host.is_none())
    {
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
fn read_capped(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let read_error = |source| Error::ReadDeclarations {
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
pub fn parse_declarations(source: &str, file: &Path) -> Result<Declarations, Error> {
    let base_dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    Lowering::new(source, file, base_dir).document()
}
