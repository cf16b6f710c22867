//! Lowering: a KDL v2 document to typed [`Declarations`], checking every rule of the format
//! (see the [module header](super)) and naming the file, line and column of each problem.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use belfry_ding::policy::DeliveryPolicy;
use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use super::{
    AgentDecl, AgentPlaces, Declarations, Error, Location, Problem, DEFAULT_COLS, DEFAULT_ROWS,
    DEFAULT_SCROLLBACK, DEFAULT_SCROLLBACK_BYTES, MAX_FILE_BYTES, MAX_SCROLLBACK,
    MAX_SCROLLBACK_BYTES, MAX_SIZE,
};
use crate::kdl_depth::{
    check_nesting, check_openers, Nesting, MAX_NESTING, MAX_OPENERS, PARSER_STACK_BYTES,
};

const TOP_LEVEL_NODES: &[&str] = &["agent"];
const AGENT_NODES: &[&str] = &[
    "command", "cwd", "env", "size", "history", "charter", "adapter", "ding", "hooks", "host",
];
const DING_NODES: &[&str] = &["delivery", "adapter"];
const DING_ADAPTER_NODES: &[&str] = &["command"];

const AGENT_EXAMPLE: &str = "agent \"NAME\" { command \"PROGRAM\" }";
const COMMAND_EXAMPLE: &str = "command \"PROGRAM\" \"ARG\"…";
const CWD_EXAMPLE: &str = "cwd \"PATH\"";
const ENV_EXAMPLE: &str = "env { KEY \"value\"; OTHER \"value\" }";
const ENV_VAR_EXAMPLE: &str = "KEY \"value\" inside `env { … }`";
const SIZE_EXAMPLE: &str = "size rows=40 cols=120";
const HISTORY_EXAMPLE: &str = "history lines=5000 bytes=8388608";
const CHARTER_EXAMPLE: &str = "charter \"FILE.md\"";
const HOOKS_EXAMPLE: &str = "hooks \"HOOK-NAME\" \"OTHER-HOOK\"";
const HOST_EXAMPLE: &str = "host \"ALIAS\" (or \"[user@]box[:port]\")";
const ADAPTER_NAME_EXAMPLE: &str =
    "adapter \"NAME\" (a DING adapter command goes in `ding { adapter { command \"PATH\" } }`)";
const DING_EXAMPLE: &str =
    "ding { delivery \"turn-boundary+fresh-idle\"; adapter { command \"PATH\" } }";
const DELIVERY_EXAMPLE: &str = "delivery \"turn-boundary+fresh-idle\"";
const DING_ADAPTER_EXAMPLE: &str = "adapter { command \"PATH\" \"ARG\"… }";

/// One pass over one file's text: knows how to turn byte offsets into locations.
pub(super) struct Lowering<'a> {
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
    pub(super) fn new(source: &'a str, file: &'a Path, base_dir: PathBuf) -> Self {
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
    pub(super) fn document(&self) -> Result<Declarations, Error> {
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

    fn lower(&self) -> Result<Declarations, Error> {
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

    /// spec §12: input the parser cannot take safely is refused before it is parsed (see
    /// [`crate::kdl_depth`]: deep nesting overflows the parser's stack and aborts).
    fn check_limits(&self) -> Result<(), Error> {
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

    fn parse_kdl(&self) -> Result<KdlDocument, Error> {
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
            Error::KdlSyntax {
                at: self.location(offset),
                message,
            }
        })
    }

    fn agent<'n>(
        &self,
        node: &'n KdlNode,
    ) -> Result<(AgentDecl, &'n KdlEntry, AgentPlaces), Error> {
        let (name, name_entry) = self.single_string(node, "agent", AGENT_EXAMPLE)?;
        if belfry_transport::paths::validate_session_name(&name).is_err() {
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
            scrollback: DEFAULT_SCROLLBACK,
            scrollback_bytes: DEFAULT_SCROLLBACK_BYTES,
            charter: None,
            adapter: None,
            ding: DeliveryPolicy::Aggressive,
            ding_declared: false,
            hooks: Vec::new(),
            host: None,
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
                "history" => {
                    (agent.scrollback, agent.scrollback_bytes) = self.history(child)?;
                }
                "charter" => agent.charter = Some(self.path(child, "charter", CHARTER_EXAMPLE)?),
                "adapter" => {
                    let (adapter, entry) =
                        self.single_string(child, "adapter", ADAPTER_NAME_EXAMPLE)?;
                    self.no_block(child, "adapter", ADAPTER_NAME_EXAMPLE)?;
                    // The name becomes a directory under the adapters directory, so it is
                    // checked here, where the file's place can be named, and not first at
                    // spawn (after other agents were launched) or never (`--dry-run`).
                    if belfry_proto::SessionName::parse(&adapter).is_err() {
                        return Err(self.invalid(
                            entry.span().offset(),
                            Problem::InvalidAdapterName { name: adapter },
                        ));
                    }
                    agent.adapter = Some(adapter);
                }
                "host" => {
                    let (host, entry) = self.single_string(child, "host", HOST_EXAMPLE)?;
                    self.no_block(child, "host", HOST_EXAMPLE)?;
                    if let Err(err) = crate::remote::Host::parse(&host) {
                        return Err(self.invalid(
                            entry.span().offset(),
                            Problem::InvalidHost {
                                reason: err.to_string(),
                            },
                        ));
                    }
                    agent.host = Some(host);
                }
                "hooks" => {
                    agent.hooks = self
                        .strings(child, "hooks", HOOKS_EXAMPLE)?
                        .into_iter()
                        .map(|(name, _)| name)
                        .collect();
                }
                _ => {
                    agent.ding = self.ding(child)?;
                    agent.ding_declared = true;
                }
            }
        }
        // A remote agent's default directory is the far side's (the daemon there, started
        // in the ssh login's directory), not this file's, which that machine may not have.
        if agent.host.is_some() && places.cwd.is_none() {
            agent.cwd = None;
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
    fn command(&self, node: &KdlNode) -> Result<Vec<String>, Error> {
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

    fn env(&self, node: &KdlNode) -> Result<BTreeMap<String, String>, Error> {
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

    fn size(&self, node: &KdlNode) -> Result<(u16, u16), Error> {
        let [rows, cols] = self.two_properties(node, "size", ["rows", "cols"], SIZE_EXAMPLE)?;
        let rows = rows
            .map(|entry| self.size_value(entry, "rows"))
            .transpose()?;
        let cols = cols
            .map(|entry| self.size_value(entry, "cols"))
            .transpose()?;
        Ok((rows.unwrap_or(DEFAULT_ROWS), cols.unwrap_or(DEFAULT_COLS)))
    }

    /// `history lines=N bytes=N`: the scrollback's line cap and byte cap, each optional.
    fn history(&self, node: &KdlNode) -> Result<(usize, usize), Error> {
        let [lines, bytes] =
            self.two_properties(node, "history", ["lines", "bytes"], HISTORY_EXAMPLE)?;
        let cap = |entry: Option<&KdlEntry>, key: &str, max: usize, default: usize| {
            entry.map_or(Ok(default), |entry| {
                let value = self.integer(entry, key, "history")?;
                usize::try_from(value)
                    .ok()
                    .filter(|value| *value <= max)
                    .ok_or_else(|| {
                        self.invalid(
                            entry.span().offset(),
                            Problem::HistoryOutOfRange {
                                key: key.to_owned(),
                                value,
                                max,
                            },
                        )
                    })
            })
        };
        Ok((
            cap(lines, "lines", MAX_SCROLLBACK, DEFAULT_SCROLLBACK)?,
            cap(
                bytes,
                "bytes",
                MAX_SCROLLBACK_BYTES,
                DEFAULT_SCROLLBACK_BYTES,
            )?,
        ))
    }

    /// The entries of a node that takes the named properties `keys` (at least one, each at
    /// most once) and nothing else.
    fn two_properties<'n>(
        &self,
        node: &'n KdlNode,
        name: &str,
        keys: [&str; 2],
        example: &'static str,
    ) -> Result<[Option<&'n KdlEntry>; 2], Error> {
        // What the arity errors say the node takes, for each node that takes two properties.
        let (only, some) = match name {
            "size" => (
                "no positional arguments, only rows=N and cols=N",
                "rows=N, cols=N or both",
            ),
            _ => (
                "no positional arguments, only lines=N and bytes=N",
                "lines=N, bytes=N or both",
            ),
        };
        self.no_block(node, name, example)?;
        let mut found: [Option<&KdlEntry>; 2] = [None, None];
        for entry in node.entries() {
            let Some(key) = entry.name().map(|key| key.value()) else {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::Arity {
                        node: name.to_owned(),
                        expected: only,
                        found: node.entries().iter().filter(|e| e.name().is_none()).count(),
                        example,
                    },
                ));
            };
            let Some(slot) = keys.iter().position(|k| *k == key) else {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::UnexpectedProperty {
                        node: name.to_owned(),
                        key: key.to_owned(),
                        example,
                    },
                ));
            };
            if found[slot].is_some() {
                return Err(self.invalid(
                    entry.span().offset(),
                    Problem::Repeated {
                        name: format!("{key}="),
                        block: format!("`{name}`"),
                        first_line: self.line_of(node),
                    },
                ));
            }
            found[slot] = Some(entry);
        }
        if found.iter().all(Option::is_none) {
            return Err(self.invalid(
                node.span().offset(),
                Problem::Arity {
                    node: name.to_owned(),
                    expected: some,
                    found: 0,
                    example,
                },
            ));
        }
        Ok(found)
    }

    /// An integer property `key` of node `node`.
    fn integer(&self, entry: &KdlEntry, key: &str, node: &str) -> Result<i128, Error> {
        entry.value().as_integer().ok_or_else(|| {
            self.invalid(
                entry.span().offset(),
                Problem::WrongType {
                    what: format!("`{key}` of `{node}`"),
                    expected: "an integer",
                    found: entry.value().to_string(),
                },
            )
        })
    }

    fn size_value(&self, entry: &KdlEntry, key: &str) -> Result<u16, Error> {
        let value = self.integer(entry, key, "size")?;
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

    fn ding(&self, node: &KdlNode) -> Result<DeliveryPolicy, Error> {
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
    fn ding_adapter<'n>(&self, node: &'n KdlNode) -> Result<(Vec<String>, &'n KdlNode), Error> {
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

    /// spec §7.4: the token and command are validated by the policy itself; a block that
    /// would have no effect is refused rather than ignored.
    fn delivery_policy(&self, block: DingBlock<'_>) -> Result<DeliveryPolicy, Error> {
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
    fn path(&self, node: &KdlNode, name: &str, example: &'static str) -> Result<PathBuf, Error> {
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
    ) -> Result<Vec<(String, &'n KdlEntry)>, Error> {
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
    ) -> Result<(String, &'n KdlEntry), Error> {
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
    ) -> Result<(String, &'n KdlEntry), Error> {
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
    fn no_nul(&self, value: &str, entry: &KdlEntry, what: String) -> Result<String, Error> {
        if value.contains('\0') {
            return Err(self.invalid(entry.span().offset(), Problem::NulCharacter { what }));
        }
        Ok(value.to_owned())
    }

    fn no_values(&self, node: &KdlNode, name: &str, example: &'static str) -> Result<(), Error> {
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

    fn no_block(&self, node: &KdlNode, name: &str, example: &'static str) -> Result<(), Error> {
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
    ) -> Result<&'n KdlDocument, Error> {
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
    ) -> Result<(), Error> {
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
    fn expect_unique(&self, children: &KdlDocument, block: &str) -> Result<(), Error> {
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

    fn invalid(&self, offset: usize, problem: Problem) -> Error {
        Error::InvalidDeclaration {
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

/// Levenshtein distance over characters; names here are short. Also what the CLI's "did you
/// mean" for an inbox name measures by.
pub fn edit_distance(a: &str, b: &str) -> usize {
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
}
