//! What is wrong with a declaration file that is valid KDL: the [`Problem`] carried by
//! [`crate::Error::InvalidDeclaration`], which also names the file, line and column. (The
//! file's read and syntax errors are [`crate::Error::ReadDeclarations`] and
//! [`crate::Error::KdlSyntax`].)

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
    /// An `adapter` that is not a name of the adapters directory.
    #[error(
        "adapter name {name:?} is invalid: an adapter is a directory of the adapters \
         directory, named with 1 to 64 characters of [A-Za-z0-9._-], and not \".\" or \"..\""
    )]
    InvalidAdapterName {
        /// The rejected name.
        name: String,
    },
    /// A `host` that is neither an alias nor `[user@]box[:port]`.
    #[error("{reason}: give a `hosts` alias of the user config, or [user@]box[:port]")]
    InvalidHost {
        /// What is wrong with it.
        reason: String,
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
    /// A `history` cap outside its range.
    #[error("history {key}={value} is out of range: {key} must be 0..={max}")]
    HistoryOutOfRange {
        /// `lines` or `bytes`.
        key: String,
        /// The value given.
        value: i128,
        /// The largest value allowed.
        max: usize,
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
    /// The `ding` block's policy was refused by [`belfry_ding::policy::DeliveryPolicy::from_token`].
    #[error("{reason}")]
    Delivery {
        /// The policy's own message.
        reason: String,
    },
    /// A file larger than [`super::MAX_FILE_BYTES`], refused before it is parsed.
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
