//! Subcommands and how their results are printed.
//!
//! Every request is a typed op of `belfry_proto` and every reply is read into the body type of
//! that op ([`Client::call`]), so a field the daemon renamed or dropped is an error naming it,
//! never a silent `null`. `--json` output prints those bodies through a JSON value: the same
//! fields in the same (sorted) order as the daemon's own reply.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use belfry_mux::client::{Client, ClientError};
use belfry_mux::Error as MuxError;
use belfry_proto::limits::{
    MAX_DELAY_STEP_MS, MAX_DELAY_TOTAL_MS, MAX_DIMENSION, MAX_SEND_TIMEOUT_MS, MAX_WAIT_MS,
    MIN_DIMENSION,
};
use belfry_proto::program_status::ProgramState;
use belfry_proto::reply::{
    self as body, AttachTarget, Cleared, Detached, DingState, Killed, Listing, PaneRecord, Resized,
    Restarted, Screen, Sent, Subscribed, Waited,
};
use belfry_proto::request as op;
use belfry_proto::{ErrorBody, ErrorCode, Event, Expect, Op, SessionName, Size};
use belfry_transport::paths;

use crate::attach::{self, DetachKey, Endpoint};
use crate::direct;
use crate::exit::{EXIT_CONFLICT, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, EXIT_TIMEOUT};
use crate::remote::{self, Place};

#[derive(Parser, Debug)]
#[command(
    name = "belfry",
    // The usage lines say `belfry` even when the process is `belfry-host`, the build the long
    // commands re-exec into (`belfry run --help` said `Usage: belfry-host run …`).
    bin_name = "belfry",
    version,
    about = "A terminal multiplexer for AI coding agents",
    after_help = "Exit codes: 0 ok, 1 not found, 2 error, 3 guarded-send conflict, 4 wait timed out."
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

// The options before the subcommand, a type of their own so that `parse_hot` can give a
// command line of one hot subcommand the same root without the rest of the tree.
#[derive(clap::Args, Debug)]
struct GlobalArgs {
    /// Run the command on another machine, through `ssh -T [-p PORT] DEST belfry proxy`
    /// ([user@]box[:port], or a `hosts` alias of the user config). A pane address HOST:NAME
    /// picks the host of that one command.
    #[arg(long, env = "BELFRY_HOST", value_name = "HOST")]
    host: Option<String>,
    /// The ssh command for --host and HOST:NAME, as words (not run by a shell), for example
    /// "ssh -F ~/.ssh/belfry_config" (default: ssh, from PATH, with ~/.ssh/config).
    #[arg(long, value_name = "COMMAND")]
    ssh_command: Option<String>,
    /// How long reaching another machine may take, ssh's connect and login included, in
    /// seconds (default 10).
    #[arg(long, value_name = "SECS")]
    connect_timeout: Option<f64>,
}

/// The subcommand's name in an argv (without the program), past the global options, for
/// `main` to set up signals before anything is parsed.
pub fn subcommand_name(mut args: impl Iterator<Item = String>) -> String {
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--host" | "--ssh-command" | "--connect-timeout" => {
                args.next();
            }
            flag if flag.starts_with("--host=")
                || flag.starts_with("--ssh-command=")
                || flag.starts_with("--connect-timeout=") => {}
            other => return other.to_owned(),
        }
    }
    String::new()
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the control-plane daemon in the foreground.
    Server,
    /// Bridge stdin and stdout to this machine's daemon (started on demand) or, with --pane,
    /// to a pane host: the far end of `belfry --host`, run by ssh. Bytes pass unchanged.
    Proxy {
        /// Bridge to this pane's host instead of the daemon (for attach).
        #[arg(long, value_name = "NAME")]
        pane: Option<String>,
    },
    /// Serve one pane (started by the daemon; not for direct use).
    #[command(hide = true)]
    PaneHost {
        /// The runtime directory the pane's socket and record go in.
        #[arg(long)]
        runtime: PathBuf,
        /// The daemon's socket, told to the pane's program as $BELFRY_SOCKET.
        #[arg(long)]
        daemon_socket: PathBuf,
        /// The durable state directory (the pane's inbox is under it).
        #[arg(long)]
        state: PathBuf,
    },
    /// Start a new pane running CMD (detached).
    New(NewArgs),
    /// Start a pane running CMD (default: $SHELL) and attach to it; if NAME exists, attach
    /// (restarting its program if it exited).
    Run(RunArgs),
    /// List panes (HOSTPID is the pane host's process id, PID the program's).
    Ls {
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        /// Keep a live, full-screen view of every pane open (the same view as `belfry top`).
        #[arg(long)]
        watch: bool,
        /// Also list the panes of every host of the user config's `hosts`, each under its
        /// alias; a host that cannot be reached gets an error line of its own.
        #[arg(long, conflicts_with = "watch")]
        all_hosts: bool,
        /// With --watch: how often ages, rates and mail are asked again, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 1_000, requires = "watch")]
        interval_ms: u64,
    },
    /// A live, full-screen view of every pane: state, revision rate, mail, last event.
    Top {
        /// How often ages, rates and mail are asked again, in milliseconds (events redraw
        /// the view at once).
        #[arg(long, value_name = "MS", default_value_t = 1_000)]
        interval_ms: u64,
    },
    /// Attach this terminal to a pane.
    Attach {
        /// The pane to attach to; without one, the only pane there is to attach to (one that
        /// is not this terminal's own), or with several the pane chooser first.
        name: Option<String>,
        /// Watch only: keystrokes are not sent.
        #[arg(long)]
        read_only: bool,
        /// The key that detaches: a prefix and a key ("C-b d") or one key ("C-q"); the prefix
        /// also leads the other bindings (inside tmux, whose prefix is C-b too: "C-a d").
        /// Default: the config file's, else "C-b d".
        #[arg(long, env = "BELFRY_DETACH")]
        detach_key: Option<String>,
    },
    /// Detach every client attached to a pane.
    Detach {
        /// The pane whose clients to detach.
        name: String,
    },
    /// End a pane (its program and its pane host).
    Kill {
        /// The pane to end.
        name: String,
    },
    /// Restart a pane's program (a new incarnation; the revision continues).
    Restart {
        /// The pane whose program to restart.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Resize a pane to ROWSxCOLS.
    Resize {
        /// The pane to resize.
        name: String,
        /// The new size, ROWSxCOLS (each 1..=1000).
        #[arg(allow_hyphen_values = true)]
        size: String,
    },
    /// Clear a pane's screen model and history.
    Clear {
        /// The pane whose screen to clear.
        name: String,
    },
    /// Send input, optionally guarded by the revision you saw (compare-and-send).
    Send(SendArgs),
    /// Print a pane's screen.
    Peek(PeekArgs),
    /// Wait for a revision, an exit, a screen regex or quiet (every condition given must hold).
    Wait(WaitArgs),
    /// Stream events: every pane's lifecycle and exit events, or one pane's with its revisions.
    ///
    /// It starts with the recent past: the last 10 events the daemon kept (it keeps its last
    /// 1000, revisions aside, in memory: a restarted daemon starts with none), each with the
    /// time it happened and, with --json, `"history": true` and `"at_ms"`; then it streams live,
    /// with no event missed or shown twice between the two.
    Events {
        /// Only this pane's events, with its revision events (which no all-pane stream carries).
        name: Option<String>,
        /// Print each event as one JSON line.
        #[arg(long)]
        json: bool,
        /// Start with up to N past events the daemon kept (default 10; 0: live events only).
        #[arg(long, value_name = "N")]
        history: Option<u32>,
        /// Start with every kept event of the last DURATION instead (90s, 5m, 2h, 1d); with
        /// --history too, at most N of them.
        #[arg(long, value_name = "DURATION", value_parser = parse_since)]
        since: Option<u64>,
    },
    /// Stop the daemon; panes keep running unless --kill-panes.
    Shutdown {
        /// Also end every pane (its program and its pane host).
        #[arg(long)]
        kill_panes: bool,
    },
    /// The one hook dispatcher every harness's hooks call (reads the hook JSON on stdin).
    Dispatch(DispatchArgs),
    /// Canonical hooks (belfry-hooks.kdl) projected into each harness's native config.
    Hooks {
        #[command(flatten)]
        scope: crate::hooks::ScopeArgs,
        #[command(subcommand)]
        action: crate::hooks::HooksCommand,
    },
    /// The context spool written by `dispatch --spool`.
    Spool {
        #[command(subcommand)]
        action: SpoolAction,
    },
    /// The durable per-agent inbox (SESSION defaults to $BELFRY_SESSION).
    Inbox(InboxArgs),
    /// Declare this agent busy, available or dnd (a fresh dnd defers DING delivery).
    Presence {
        /// busy, available or dnd.
        state: String,
        /// The pane whose presence to set (default: $BELFRY_SESSION).
        session: Option<String>,
        /// The pane whose presence to set (the older spelling of SESSION).
        #[arg(long = "session", value_name = "SESSION")]
        session_flag: Option<String>,
    },
    /// DING delivery state.
    Ding {
        #[command(subcommand)]
        action: DingAction,
    },
    /// Say what is missing for each pane, one line per finding with its fix
    ///
    /// Checks each pane (or each agent of belfry.kdl when no pane runs): its program and the
    /// harness version its adapter admits, its hooks (applied, intact, live, trusted), its
    /// adapter and DING adapter executable, and whether it is ready for input. Exit 0 when
    /// nothing is missing, 1 when something is.
    Doctor(crate::doctor::DoctorArgs),
    /// Launch what belfry.kdl declares: start missing agents, adopt running ones, report drift.
    Up {
        /// The declarations file (default: ./belfry.kdl).
        file: Option<PathBuf>,
        /// Relaunch agents whose declaration changed (drifted).
        #[arg(long)]
        replace: bool,
        /// Print what was done as JSON.
        #[arg(long)]
        json: bool,
        /// Check the file as `belfry up` would (every agent's cwd, program, charter and
        /// hooks) and say what would launch; no daemon is asked and nothing is launched.
        #[arg(long, conflicts_with = "replace")]
        dry_run: bool,
    },
    /// Stop the agents belfry.kdl declares.
    Down {
        /// The declarations file (default: ./belfry.kdl).
        file: Option<PathBuf>,
    },
    /// Print the daemon's log, or the pane host's log of NAME (from the log directory).
    Logs {
        /// The pane whose pane host's log to print (default: the daemon's log).
        name: Option<String>,
        /// Keep printing what is appended, like `tail -f`, until interrupted.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Print shell completions (bash, zsh and fish also complete live pane names).
    Completions {
        /// The shell to complete for: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the live pane names when the word after WORDS is a pane name (exit 0), else exit
    /// 1 (the completion scripts ask it on each TAB).
    #[command(hide = true)]
    CompletePanes {
        /// The command line's words after `belfry`, before the one being completed.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Print the man page (roff), or with --dir write one page per subcommand.
    Man {
        /// Write belfry.1 and a belfry-SUBCOMMAND.1 page for every subcommand (the pages the
        /// main page's `belfry-*(1)` references name) into DIR, creating it.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct DispatchArgs {
    /// The semantic event (before-tool, after-tool, session-start, …).
    #[arg(long)]
    event: String,
    /// Also append the context to $BELFRY_HOOK_CONTEXT.
    #[arg(long)]
    spool: bool,
    /// Answer in a harness's native output contract (an adapter's dialect).
    #[arg(long, value_name = "DIALECT")]
    native: Option<String>,
    /// The compiled hooks file (default: $BELFRY_HOOKS_FILE).
    #[arg(long, value_name = "PATH")]
    hooks_file: Option<PathBuf>,
    /// Where dialect files live (default: $BELFRY_DIALECTS, then the built-in ones).
    #[arg(long, value_name = "DIR")]
    dialects: Option<PathBuf>,
    /// This event is the harness's turn boundary: add unread inbox notices to the context.
    #[arg(long)]
    turn_boundary: bool,
}

#[derive(Subcommand, Debug)]
enum DingAction {
    /// Policy, adapter, lease, every unread message with its state, counters.
    Status {
        /// The pane whose DING state to show (default: $BELFRY_SESSION).
        session: Option<String>,
        /// Print the state as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum SpoolAction {
    /// Print and empty the spool as one "Platform guidance:" block (nothing if empty).
    Drain {
        /// The spool file (default: $BELFRY_HOOK_CONTEXT).
        #[arg(long, value_name = "PATH")]
        path: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct NewArgs {
    /// The new pane's name.
    name: String,
    /// The program's working directory (default: this one).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Declared environment (part of the pane's generation). Repeatable.
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Initial size ROWSxCOLS (default: this terminal's size, else 24x80).
    #[arg(long, value_name = "ROWSxCOLS", allow_hyphen_values = true)]
    size: Option<String>,
    /// Which attached client sets the size: latest or smallest.
    #[arg(long, default_value = "latest")]
    size_policy: String,
    /// Print the new pane as JSON.
    #[arg(long)]
    json: bool,
    /// The adapter (a directory under $BELFRY_ADAPTERS) that describes this harness.
    #[arg(long, value_name = "NAME")]
    adapter: Option<String>,
    /// Declares the pane an agent with this DING delivery policy: aggressive or
    /// turn-boundary+fresh-idle. Without it (and without --adapter) nothing is ever typed
    /// into the pane: its mail stays in the inbox. --adapter alone means aggressive.
    #[arg(long, value_name = "TOKEN")]
    ding_delivery: Option<String>,
    /// The DING adapter command (argv, repeat for each argument).
    #[arg(long = "ding-adapter", value_name = "ARG", allow_hyphen_values = true)]
    ding_adapter: Vec<String>,
    /// The program and its arguments, after `--` (`belfry new NAME -- CMD ARG…`). Required
    /// by `new`; `run` without it starts $SHELL (else sh), and ignores it, saying so, when
    /// NAME exists.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    new: NewArgs,
    /// The key that detaches: a prefix and a key ("C-b d") or one key ("C-q"); the prefix
    /// also leads the other bindings (inside tmux, whose prefix is C-b too: "C-a d").
    /// Default: the config file's, else "C-b d".
    #[arg(long, env = "BELFRY_DETACH")]
    detach_key: Option<String>,
}

// No doc comment: the subcommand's about is the variant's.
#[derive(clap::Args, Debug)]
struct InboxArgs {
    #[command(subcommand)]
    action: crate::inbox::InboxCommand,
}

// No doc comment: the subcommand's about is the variant's.
#[derive(clap::Args, Debug)]
struct WaitArgs {
    /// The pane to wait on.
    name: String,
    /// Until the revision is at least N.
    #[arg(long, value_name = "N")]
    revision: Option<u64>,
    /// Until the pane's program exits.
    #[arg(long)]
    exit: bool,
    /// Until the screen matches this regular expression.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_screen_regex)]
    regex: Option<String>,
    /// Until the revision has not changed for MS milliseconds (at most 86400000, a day).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(..=MAX_WAIT_MS))]
    quiet_ms: Option<u64>,
    /// Until the program reports this state (OSC 7501), as `belfry ls` shows it.
    #[arg(long, value_name = "STATE", value_parser = ["idle", "working", "blocked", "done", "error"])]
    status: Option<String>,
    /// Give up after MS milliseconds (at most 86400000, a day).
    #[arg(long, value_name = "MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(..=MAX_WAIT_MS))]
    timeout_ms: u64,
    /// Print the pane's state as JSON when the wait ends.
    #[arg(long)]
    json: bool,
}

// No doc comment: the subcommand's about is the variant's.
#[derive(clap::Args, Debug)]
struct PeekArgs {
    /// The pane whose screen to print.
    name: String,
    /// Rows with SGR attributes.
    #[arg(long)]
    ansi: bool,
    /// Print the snapshot as JSON, with the `expect` token `send --expect` takes.
    #[arg(long)]
    json: bool,
    /// Also print the last N lines of history.
    #[arg(long, value_name = "N")]
    scrollback: Option<u64>,
    /// Include per-cell runs in --json output.
    #[arg(long)]
    cells: bool,
}

#[derive(clap::Args, Debug)]
struct SendArgs {
    /// The pane to send to.
    name: String,
    /// Send only if the pane is still exactly as a `peek --json` saw it: pass that output's
    /// `expect` token (revision, incarnation and generation in one opaque string).
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["expect_revision", "expect_incarnation", "expect_generation"])]
    expect: Option<String>,
    /// Send only if the pane is still at revision N, the `revision` of `peek --json` or `ls`.
    /// A revision is a 16-digit number: a pane host starts it at the wall clock in
    /// microseconds since 1970 (so a pane made again under the same name never repeats a
    /// revision of the old one) and it goes up by at least one on every output, input, resize
    /// and restart.
    #[arg(long, value_name = "N")]
    expect_revision: Option<u64>,
    /// Send only if the pane's program is still incarnation I (new at every start).
    #[arg(long, value_name = "I")]
    expect_incarnation: Option<String>,
    /// Send only if the pane's launch spec is still generation G.
    #[arg(long, value_name = "G")]
    expect_generation: Option<String>,
    /// Paste TEXT (bracketed if the program enabled it). Steps run in the order given.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    paste: Vec<String>,
    /// Type TEXT raw.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    text: Vec<String>,
    /// Press a named key (Enter, Tab, Escape, C-c, Up, F1, …).
    #[arg(long, value_name = "KEY")]
    key: Vec<String>,
    /// Pause with the input lock held (at most 2000 ms each, 5000 in all).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(..=MAX_DELAY_STEP_MS))]
    delay_ms: Vec<u64>,
    /// Give up when the program has not read the input within MS ms in total (1..=60000,
    /// default 5000); the error says how many bytes were written.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=MAX_SEND_TIMEOUT_MS))]
    timeout_ms: Option<u64>,
    /// Print the send's result as JSON.
    #[arg(long)]
    json: bool,
}

/// Parses arguments, runs the command and returns the exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (cli, matches) = match parse_hot(&args) {
        Some(parsed) => parsed,
        None => {
            let matches = match Cli::command().try_get_matches_from(&args) {
                Ok(matches) => matches,
                Err(err) => with_program_tip(err, &args).exit(),
            };
            match Cli::from_arg_matches(&matches) {
                Ok(cli) => (cli, matches),
                Err(err) => err.exit(),
            }
        }
    };
    match run(cli, &matches) {
        Ok(code) => code,
        Err(err) => {
            if let Some(not_found) = err.downcast_ref::<NotFound>() {
                eprintln!("belfry: {}", not_found.0);
                return EXIT_NOT_FOUND;
            }
            eprintln!("belfry: {}", without_repeats(&err));
            EXIT_ERROR
        }
    }
}

/// A parse error of `belfry new NAME CMD …` or `belfry run NAME CMD …`, the program given
/// without `--`, with a tip that says where it goes: clap alone says only that `CMD` is an
/// unexpected argument.
fn with_program_tip(mut err: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let sub = subcommand_name(words.iter().cloned());
    if sub != "new" && sub != "run" {
        return err;
    }
    let Some(ContextValue::String(unexpected)) = err.get(ContextKind::InvalidArg).cloned() else {
        return err;
    };
    // Only a bare word is a program given without `--`; a mistyped `--flag` is clap's to
    // explain.
    if unexpected.starts_with('-') || words.iter().any(|word| word == "--") {
        return err;
    }
    let Some(at) = words.iter().position(|word| *word == unexpected) else {
        return err;
    };
    let quoted: Vec<String> = words.iter().map(|word| shell_word(word)).collect();
    let (before, program) = quoted.split_at(at);
    let tip = format!(
        "the program goes after `--`: belfry {} -- {}",
        before.join(" "),
        program.join(" ")
    );
    err.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    err
}

/// `word` as a POSIX shell reads it back: as it is when it has nothing a shell would treat
/// specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Adds a subcommand's arguments to its command (`clap::Args::augment_args`).
type Augment = fn(clap::Command) -> clap::Command;

/// The subcommands that hooks, agents and supervisors run many times a minute: `dispatch`
/// (every hook of every harness), `peek`, `send`, `wait` and `inbox` (DING mail: `post`,
/// `read`, `archive`).
const HOT: [(&str, Augment); 5] = [
    ("dispatch", <DispatchArgs as clap::Args>::augment_args),
    ("peek", <PeekArgs as clap::Args>::augment_args),
    ("send", <SendArgs as clap::Args>::augment_args),
    ("wait", <WaitArgs as clap::Args>::augment_args),
    ("inbox", <InboxArgs as clap::Args>::augment_args),
];

/// A command line of one hot subcommand, given first (`belfry peek NAME …`), parsed by a root
/// that has the root's options and that subcommand alone. Building every subcommand's
/// arguments is a third of a millisecond and 80 page faults of the CLI's start (measured in
/// `docs/performance.md`, 3b), as much as the rest of a `peek`'s work in the CLI.
///
/// `None` for anything else, and for a line this root does not accept as a whole: `--help`,
/// a mistake, anything the whole tree must say or explain. That line is then parsed by the
/// whole tree, which prints what it prints today, so this root never prints or decides
/// anything the whole tree would not. The arguments are the same types, so a line it accepts
/// parses to the same values (`hot_lines_parse_as_the_whole_tree_parses_them`).
fn parse_hot(args: &[std::ffi::OsString]) -> Option<(Cli, ArgMatches)> {
    let first = args.get(1)?.to_str()?;
    let (name, augment) = HOT.into_iter().find(|(name, _)| *name == first)?;
    let root = <GlobalArgs as clap::Args>::augment_args(clap::Command::new("belfry"))
        .subcommand(augment(clap::Command::new(name)))
        .subcommand_required(true);
    let matches = root.try_get_matches_from(args).ok()?;
    let cli = Cli::from_arg_matches(&matches).ok()?;
    Some((cli, matches))
}

/// An error and its causes, `message: cause: cause`, leaving out a cause whose words the
/// message already carries: many errors end with their source's text (`cannot read
/// declarations belfry.kdl: No such file or directory (os error 2)`), and saying it twice
/// reads as two failures.
fn without_repeats(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// An error that maps to exit code 1.
#[derive(Debug)]
pub(crate) struct NotFound(pub(crate) String);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

pub(crate) fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("cannot find the belfry executable")
}

/// The name of the executable the daemon and the pane hosts run when it is installed beside
/// `belfry`.
const HOST_EXE: &str = "belfry-host";

/// The executable that runs the daemon and the pane hosts: [`HOST_EXE`] beside this one when
/// it is there, else this one. `scripts/install --static` builds `belfry` as a fixed-address executable,
/// which starts each command sooner (no relocations to apply), and `belfry-host` from the same
/// source as a position-independent one, so the long-running processes that read terminal
/// output and socket input keep address-space randomisation (docs/decisions.md).
pub(crate) fn host_exe() -> Result<PathBuf> {
    let exe = exe()?;
    Ok(paths::runnable_beside(&exe, HOST_EXE).unwrap_or(exe))
}

/// Replaces this process with [`HOST_EXE`] beside it, with the same arguments and environment,
/// when there is one; returns when there is not, or when the exec failed (this executable does
/// the same work). For the subcommands that stay up reading terminal output or another
/// machine's bytes, so that they too run position-independent.
pub fn become_host_exe() {
    use std::os::unix::process::CommandExt;
    if let Some(host) = exe()
        .ok()
        .and_then(|exe| paths::runnable_beside(&exe, HOST_EXE))
    {
        // `exec` returns only when it failed.
        let _ = std::process::Command::new(&host)
            .args(std::env::args_os().skip(1))
            .exec();
    }
}

/// Connects to the daemon, starting it if needed. The runtime directory is checked first
/// (created 0700, or refused when another uid owns it or it is open to others, spec §6.1), and
/// the client checks the server's uid on the socket itself.
pub(crate) fn daemon() -> Result<Client> {
    paths::private_runtime_dir()?;
    Ok(belfry_mux::client::connect_or_start(
        &paths::daemon_socket(),
        &host_exe()?,
    )?)
}

/// Sends a typed op and reads its reply body; an error reply becomes an error (not-found →
/// exit 1).
pub(crate) fn ask<T: DeserializeOwned>(client: &mut Client, op: impl Into<Op>) -> Result<T> {
    client.call(op)?.into_result().map_err(refusal)
}

/// Like [`ask`], for a command that prints the whole reply: the body with the reply's `id`
/// and `ok`, as the daemon sent them.
fn ask_whole<T: Serialize + DeserializeOwned>(
    client: &mut Client,
    op: impl Into<Op>,
) -> Result<(Value, T)> {
    let (id, reply) = client.call_numbered(op)?;
    let body = reply.into_result().map_err(refusal)?;
    Ok((body::ok(&Value::from(id), &body), body))
}

/// The error a refused request is: not-found maps to exit 1, anything else to exit 2.
pub(crate) fn refusal(err: ErrorBody) -> anyhow::Error {
    if err.code == ErrorCode::NotFound {
        NotFound(err.message).into()
    } else {
        anyhow!("{}", err.message)
    }
}

/// Prints `value` as pretty JSON. It goes through a JSON value first, so the keys are in the
/// same (sorted) order whatever type holds them.
fn print_json(value: &impl Serialize) {
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    );
}

fn run(cli: Cli, matches: &ArgMatches) -> Result<i32> {
    // The processes that serve this machine never go elsewhere: a `BELFRY_HOST` in their
    // environment is not for them, and `--host` on their command line is a mistake.
    let local_only = match &cli.command {
        Command::Server => Some("server"),
        Command::PaneHost { .. } => Some("pane-host"),
        Command::Proxy { .. } => Some("proxy"),
        Command::Dispatch(_) => Some("dispatch"),
        Command::Hooks { .. } => Some("hooks"),
        Command::Doctor(_) => Some("doctor"),
        Command::Spool { .. } => Some("spool"),
        Command::Completions { .. } => Some("completions"),
        Command::CompletePanes { .. } => Some("complete-panes"),
        Command::Man { .. } => Some("man"),
        _ => None,
    };
    if let Some(name) = local_only {
        if matches.value_source("host") == Some(clap::parser::ValueSource::CommandLine) {
            bail!("--host does not apply to `belfry {name}`: it works on this machine only");
        }
    }
    crate::remote::init(
        cli.global.host.clone().filter(|_| local_only.is_none()),
        cli.global.ssh_command.as_deref(),
        cli.global.connect_timeout,
    )?;
    match cli.command {
        Command::Proxy { pane } => crate::proxy::run(pane.as_deref()),
        Command::Server => {
            crate::logging::init_logging("daemon.log");
            let config = belfry_mux::server::DaemonConfig {
                runtime: paths::runtime_dir(),
                socket: paths::daemon_socket(),
                state_dir: paths::state_dir(),
                exe: host_exe()?,
                log_dir: paths::log_dir(),
            };
            belfry_mux::server::run(config)?;
            Ok(EXIT_OK)
        }
        Command::PaneHost {
            runtime,
            daemon_socket,
            state,
        } => {
            crate::pane_host::serve(runtime, daemon_socket, state).map_err(|err| anyhow!(err))?;
            Ok(EXIT_OK)
        }
        Command::New(args) => {
            if args.command.is_empty() {
                bail!(
                    "`belfry new {}` needs the program to run, after `--`: `belfry new {} -- \
                     CMD ARG…` (`belfry run {}` starts your shell and attaches)",
                    args.name,
                    args.name,
                    args.name
                );
            }
            new_pane(&args, None)
        }
        Command::Run(mut args) => {
            // `belfry run NAME` alone: the pane is attached to if it exists (the command is
            // never used then), else it runs the user's shell, as a terminal would.
            let given = !args.new.command.is_empty();
            if !given {
                args.new.command = vec![login_shell()];
            }
            let detach_key = attach::config::detach_key_spec(args.detach_key.as_deref())?;
            new_pane(&args.new, Some((&detach_key, given)))
        }
        Command::Ls {
            watch: true,
            interval_ms,
            ..
        }
        | Command::Top { interval_ms } => {
            if let Some(remote) = remote::default_place()?.remote() {
                bail!(
                    "the live view does not work over --host yet: `belfry --host {} ls` lists \
                     that machine's panes, and `ssh -t {} belfry top` shows its view",
                    remote.label,
                    remote.host
                );
            }
            crate::top::run(watch_interval(interval_ms)?)
        }
        Command::Ls {
            json, all_hosts, ..
        } => ls(json, all_hosts),
        Command::Attach {
            name,
            read_only,
            detach_key,
        } => match name {
            Some(name) => {
                let detach_key = attach::config::detach_key_spec(detach_key.as_deref())?;
                attach_cmd(&name, read_only, DetachKey::parse(&detach_key)?)
            }
            None => attach_unnamed(
                read_only,
                &attach::config::detach_key_spec(detach_key.as_deref())?,
            ),
        },
        Command::Detach { name } => {
            let (place, name) = remote::place_of(&name)?;
            simple(&place, op::Detach::of(name), |r: Detached| {
                format!("detached {} client(s)", r.detached)
            })
        }
        Command::Kill { name } => {
            let (place, name) = remote::place_of(&name)?;
            simple(&place, op::Kill::of(name), |r: Killed| {
                format!("killed {}", r.killed)
            })
        }
        Command::Restart { name, json } => {
            let (place, session) = remote::place_of(&name)?;
            let restarted: Restarted = ask(&mut place.daemon()?, op::Restart::of(session))?;
            if json {
                print_json(&restarted.identity);
            } else {
                println!(
                    "restarted {name}: incarnation {} revision {}",
                    restarted.identity.incarnation, restarted.identity.revision
                );
            }
            Ok(EXIT_OK)
        }
        Command::Resize { name, size } => {
            let size = parse_size(&size)?;
            let (place, name) = remote::place_of(&name)?;
            let resize = op::Resize {
                session: Some(name),
                rows: size.rows().into(),
                cols: size.cols().into(),
            };
            simple(&place, resize, |r: Resized| {
                format!("resized to {size} (revision {})", r.revision)
            })
        }
        Command::Clear { name } => {
            let (place, name) = remote::place_of(&name)?;
            simple(&place, op::Clear::of(name), |r: Cleared| {
                format!("cleared (revision {})", r.revision)
            })
        }
        Command::Send(args) => {
            let sub = matches
                .subcommand_matches("send")
                .ok_or_else(|| anyhow!("no send args"))?;
            send(&args, sub)
        }
        Command::Peek(PeekArgs {
            name,
            ansi,
            json,
            scrollback,
            cells,
        }) => peek(&name, ansi, json, scrollback, cells),
        Command::Wait(WaitArgs {
            name,
            revision,
            exit,
            regex,
            quiet_ms,
            status,
            timeout_ms,
            json,
        }) => {
            let args_name = name.clone();
            let (place, name) = remote::place_of(&name)?;
            let wait = op::Wait {
                session: Some(name),
                revision,
                exit: exit.then_some(true),
                regex,
                quiet_ms,
                // clap lets only the five words through.
                status: status.as_deref().and_then(ProgramState::parse),
                timeout_ms: Some(timeout_ms),
            };
            let waited: Waited = match place.daemon()?.call(wait)?.into_result() {
                Ok(waited) => waited,
                Err(err) => return wait_failed(&args_name, timeout_ms, json, err),
            };
            if json {
                print_json(&waited.state);
            } else {
                println!("revision {}", waited.state.revision);
            }
            Ok(EXIT_OK)
        }
        Command::Events {
            name,
            json,
            history,
            since,
        } => events(name, json, history, since),
        Command::Shutdown { kill_panes } => {
            let socket = paths::daemon_socket();
            let place = remote::default_place()?;
            let mut client = match &place {
                // Over ssh the far side's proxy starts a daemon to bridge to, and this stops it.
                Place::Remote(remote) => remote.daemon()?,
                Place::Local => match Client::connect(&socket) {
                    Ok(client) => client,
                    Err(ClientError::Connect { .. }) if kill_panes => {
                        return kill_panes_without_daemon(&socket);
                    }
                    Err(ClientError::Connect { .. }) => {
                        println!("no daemon running at {}", socket.display());
                        return Ok(EXIT_OK);
                    }
                    Err(err) => return Err(err.into()),
                },
            };
            let shutdown = op::Shutdown {
                kill_panes: Some(kill_panes),
            };
            let stopped: body::Shutdown = ask(&mut client, shutdown)?;
            if stopped.killed.is_empty() {
                println!("daemon stopped; the panes keep running");
            } else {
                println!("daemon stopped; ended panes: {}", stopped.killed.join(", "));
            }
            Ok(EXIT_OK)
        }
        Command::Dispatch(args) => Ok(dispatch(args)),
        Command::Hooks { scope, action } => crate::hooks::run(scope, action),
        Command::Spool {
            action: SpoolAction::Drain { path },
        } => {
            let path = match path {
                Some(path) => path,
                None => std::env::var_os(belfry_hooks::HOOK_CONTEXT_ENV)
                    .map(PathBuf::from)
                    .ok_or_else(|| {
                        anyhow!(
                            "no spool: give --path or set {}",
                            belfry_hooks::HOOK_CONTEXT_ENV
                        )
                    })?,
            };
            print!("{}", belfry_hooks::spool_drain(&path)?);
            Ok(EXIT_OK)
        }
        Command::Inbox(InboxArgs { action }) => match remote::inbox_elsewhere(&action)? {
            Some(code) => Ok(code),
            None => crate::inbox::run(action),
        },
        Command::Presence {
            state,
            session,
            session_flag,
        } => match remote::presence_elsewhere(&state, &session, &session_flag)? {
            Some(code) => Ok(code),
            None => crate::inbox::presence(&state, session, session_flag),
        },
        Command::Ding {
            action: DingAction::Status { session, json },
        } => {
            let (place, name) = remote::place_of(&crate::inbox::one_session(session, None)?)?;
            let socket = paths::daemon_socket();
            // DING state (policy, adapter, lease, holds) lives in the daemon alone, so with no
            // daemon there is nothing to show, and a read-only command does not start one
            // here (over ssh the far side's proxy bridges to its daemon, started on demand).
            let running = match &place {
                Place::Remote(remote) => Some(remote.daemon()?),
                Place::Local => {
                    paths::private_runtime_dir()?;
                    direct::running_daemon(&socket)?
                }
            };
            let Some(mut client) = running else {
                return Err(NotFound(format!(
                    "no daemon running at {}: DING status is kept by the daemon, and \
                     `belfry ding status` does not start one (`belfry inbox ls {name}` lists \
                     the mail without it)",
                    socket.display()
                ))
                .into());
            };
            let mut state: DingState = ask(&mut client, op::DingStatus::of(name.clone()))?;
            if matches!(place, Place::Local) {
                crate::doctor::explain_ding_status(name.as_str(), &mut state.status);
            }
            if json {
                print_json(&state.status);
            } else {
                for line in crate::human::ding_status_lines(&state, crate::human::now_unix_ms()) {
                    println!("{line}");
                }
            }
            Ok(EXIT_OK)
        }
        Command::Up {
            file,
            dry_run: true,
            ..
        } => up_dry_run(file),
        Command::Up {
            file,
            replace,
            json,
            ..
        } => up(file, replace, json),
        Command::Down { file } => down(file),
        Command::Doctor(args) => crate::doctor::run(args),
        Command::Logs { name, follow } => match remote::logs_elsewhere(name.as_deref(), follow)? {
            Some(code) => Ok(code),
            None => crate::logs::run(name.as_deref(), follow),
        },
        Command::Completions { shell } => {
            crate::completions::print(shell, Cli::command())?;
            Ok(EXIT_OK)
        }
        Command::CompletePanes { words } => {
            Ok(crate::completions::complete_panes(Cli::command(), &words))
        }
        Command::Man { dir: None } => {
            // As `man --dir` renders it: `belfry help` is clap's, with no page of its own, so
            // the page does not list it as a `belfry-help(1)` that cannot be found.
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command().disable_help_subcommand(true))
                .render(&mut page)?;
            page.extend_from_slice(MAN_FILES_AND_ENVIRONMENT.as_bytes());
            std::io::stdout().write_all(&page)?;
            Ok(EXIT_OK)
        }
        Command::Man { dir: Some(dir) } => man_pages(&dir),
    }
}

/// The main man page's FILES and ENVIRONMENT sections, which clap_mangen has no place for:
/// where the sockets, the state and the logs are, and which variables move them
/// (`belfry_transport::paths`, the one place that decides it).
const MAN_FILES_AND_ENVIRONMENT: &str = r#".SH FILES
.TP
\fIRUNTIME\fR/default.sock
The daemon's socket (\fIRUNTIME\fR is the runtime directory: $BELFRY_RUNTIME_DIR, else
$XDG_RUNTIME_DIR/belfry, else /tmp/belfry\-\fIUID\fR).
.TP
\fIRUNTIME\fR/panes/\fINAME\fR.sock, \fIRUNTIME\fR/panes/\fINAME\fR.json
Each pane host's socket and record.
.TP
\fISTATE\fR/inbox/\fINAME\fR/
A pane's durable inbox (new/, archive/), and \fISTATE\fR/ding/ the delivery state (\fISTATE\fR
is $BELFRY_STATE, else $XDG_STATE_HOME/belfry, else ~/.local/state/belfry).
.TP
$XDG_STATE_HOME/belfry/log/daemon.log, $XDG_STATE_HOME/belfry/log/pane\-\fINAME\fR.log
The daemon's log and each pane host's (default ~/.local/state/belfry/log/); \fBbelfry logs\fR
prints them.
.TP
$XDG_CONFIG_HOME/belfry/config.kdl
The user config (its \fBhosts\fR and \fBattach\fR sections: remote hosts; the prefix, escape time and history limit); default ~/.config/belfry/config.kdl.
.TP
\&./belfry.kdl, ./belfry\-hooks.kdl
The declarations of \fBbelfry up\fR and \fBdown\fR, and the canonical hooks of \fBbelfry hooks\fR.
.SH ENVIRONMENT
.TP
BELFRY_RUNTIME_DIR
The runtime directory (sockets and pane records).
.TP
BELFRY_SOCKET
The daemon's socket; set inside every pane.
.TP
BELFRY_STATE
The state directory (inboxes, delivery state).
.TP
XDG_RUNTIME_DIR, XDG_STATE_HOME, XDG_CONFIG_HOME
The defaults of the runtime directory, of the state directory and the logs, and of the user
config.
.TP
BELFRY_SESSION
Set inside every pane to its name: the default SESSION of \fBinbox\fR, \fBpresence\fR and
\fBding\fR.
.TP
BELFRY_HOST
The machine commands go to, as \-\-host.
.TP
BELFRY_ADAPTERS
A folder of adapters used instead of the built\-in ones.
.TP
BELFRY_HOOKS_FILE
The hooks file of \fBbelfry dispatch\fR when \-\-hooks\-file is not given.
.TP
BELFRY_ESCAPE_TIME_MS
How long \fBattach\fR waits for the rest of an escape sequence (0 to 5000, default 25).
.TP
BELFRY_DETACH
The detach key of \fBattach\fR and \fBrun\fR, as \-\-detach\-key (default "C\-b d"; inside tmux, "C\-a d").
"#;

/// `belfry man --dir DIR`: every page, named as the references between them name them
/// (`belfry-inbox-post.1` for `belfry-inbox-post(1)`); hidden subcommands get none.
fn man_pages(dir: &std::path::Path) -> Result<i32> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the man page directory {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
    let main_page = dir.join("belfry.1");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&main_page)
        .and_then(|mut file| file.write_all(MAN_FILES_AND_ENVIRONMENT.as_bytes()))
        .with_context(|| format!("cannot write {}", main_page.display()))?;
    let pages = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".1"))
        .count();
    println!(
        "{pages} man pages in {} (read one with `man -l {}/belfry.1`, or add the directory's \
         parent to MANPATH as man1/)",
        dir.display(),
        dir.display()
    );
    Ok(EXIT_OK)
}

/// `belfry dispatch`: fail-open by construction; whatever happens, one answer and exit 0
/// (or the native dialect's exit code).
fn dispatch(args: DispatchArgs) -> i32 {
    let options = belfry_hooks::DispatchOptions {
        event: args.event,
        hooks_file: args.hooks_file,
        spool: args.spool,
        spool_path: None,
        native: args.native,
        dialects_dir: args.dialects,
        extra_context: Vec::new(),
        // The call log is named by $BELFRY_DISPATCH_LOG only: a projected entry's command
        // must stay byte-stable, so no flag could be added to it.
        call_log: None,
    };
    // spec §7.5: the turn-boundary notices become hook-owned only if this write succeeds, so
    // the answer is written (and flushed) inside the run, which learns whether it was.
    let mut deliver = |output: &belfry_hooks::DispatchOutput| -> std::io::Result<()> {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&output.stdout)?;
        stdout.flush()?;
        let _ = std::io::stderr().write_all(&output.stderr);
        Ok(())
    };
    let output = belfry_hooks::run_hook(options, args.turn_boundary, &mut deliver);
    output.exit_code
}

/// Asks `op` of the daemon at `place` and prints one line describing its answer.
fn simple<T: DeserializeOwned>(
    place: &Place,
    op: impl Into<Op>,
    describe: impl Fn(T) -> String,
) -> Result<i32> {
    let answer: T = ask(&mut place.daemon()?, op)?;
    println!("{}", describe(answer));
    Ok(EXIT_OK)
}

/// The live view's slow tick: at least 100 ms, so a typo cannot make it ask the daemon for
/// everything in a busy loop.
fn watch_interval(interval_ms: u64) -> Result<std::time::Duration> {
    if interval_ms < 100 {
        bail!("--interval-ms {interval_ms} is too short: give 100 or more");
    }
    Ok(std::time::Duration::from_millis(interval_ms))
}

/// A `ROWSxCOLS` argument, each side within the protocol's pane size range.
fn parse_size(size: &str) -> Result<Size> {
    let (rows, cols) = size
        .split_once(['x', 'X'])
        .ok_or_else(|| anyhow!("size {size:?} is not ROWSxCOLS (for example 24x80)"))?;
    let (rows, cols) = (
        size_part(size, "rows", rows)?,
        size_part(size, "cols", cols)?,
    );
    Ok(Size::new(rows, cols)?)
}

/// One side of a size: digits only, then 1..=1000. A number too large for any integer type is
/// still a number, and is said to be out of range, not "not a number". The message names the
/// side, which [`Size::new`]'s does not.
fn size_part(size: &str, what: &str, text: &str) -> Result<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        bail!("size {size:?}: {what} {text:?} is not a number");
    }
    let range = u64::from(MIN_DIMENSION)..=u64::from(MAX_DIMENSION);
    match text.parse::<u64>() {
        Ok(value) if range.contains(&value) => Ok(value),
        _ => bail!(
            "size {size:?}: {what} {text} is out of range ({MIN_DIMENSION}..={MAX_DIMENSION})"
        ),
    }
}

/// Starts a pane; with `attach_with` (a detach key, and whether a command was given) attaches
/// to it after, as `belfry run` does.
fn new_pane(args: &NewArgs, attach_with: Option<(&str, bool)>) -> Result<i32> {
    let (place, name) = remote::place_of(&args.name)?;
    // A bad detach key is refused before the pane is started.
    if let Some((detach_key, _)) = attach_with {
        DetachKey::parse(detach_key)?;
    }
    let mut env = BTreeMap::new();
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {kv:?} is not K=V"))?;
        if k.is_empty() {
            bail!("--env {kv:?} has an empty name");
        }
        env.insert(k.to_string(), v.to_string());
    }
    // The terminal's own size is passed on as it is (0x0 taken as 24x80): the daemon judges it
    // like any other.
    let (rows, cols) = match &args.size {
        Some(size) => parse_size(size)?.pair(),
        None => attach::terminal_size().unwrap_or((24, 80)),
    };
    let cwd = match (&place, &args.cwd) {
        // A remote pane's directory is on that machine: `--cwd` goes there as written (its
        // daemon refuses one that is not a directory), and without it the pane starts where
        // the far daemon runs, not in this machine's current directory.
        (Place::Remote(_), Some(cwd)) => Some(
            cwd.to_str()
                .ok_or_else(|| anyhow!("--cwd {}: the path is not UTF-8", cwd.display()))?
                .to_string(),
        ),
        (Place::Remote(_), None) => None,
        (Place::Local, cwd) => Some(local_cwd(cwd.as_deref())?),
    };
    let size_policy = match args.size_policy.as_str() {
        "latest" => op::SizePolicy::Latest,
        "smallest" => op::SizePolicy::Smallest,
        other => bail!("size_policy {other:?} is not latest or smallest"),
    };
    let adapter =
        match &args.adapter {
            Some(adapter) => Some(SessionName::parse(adapter).map_err(|_| {
                anyhow!("adapter name {adapter:?} must match [A-Za-z0-9._-]{{1,64}}")
            })?),
            None => None,
        };
    // An adapter that exists nowhere is refused here, before any pane starts, rather than
    // found missing by the daemon later (in its log only). The lookup is the daemon's own;
    // a remote daemon has its own adapters and judges the name itself.
    if let (Some(adapter), Place::Local) = (&adapter, &place) {
        belfry_mux::adapters::Adapters::of_this_binary().require(adapter.as_str())?;
    }
    // This machine's environment (its PATH, HOME, …) means nothing on another one: a remote
    // pane starts from the far daemon's, as a pane started there would.
    let base_env: BTreeMap<String, String> = match place {
        Place::Local => std::env::vars().collect(),
        Place::Remote(_) => BTreeMap::new(),
    };
    let mut ding_policy = args.ding_delivery.clone();
    let mut adapter_command = (!args.ding_adapter.is_empty()).then(|| args.ding_adapter.clone());
    if let (Some(adapter), Place::Local, None, None) =
        (&adapter, &place, &ding_policy, &adapter_command)
    {
        let dir = PathBuf::from(cwd.clone().unwrap_or_default());
        let mut pane_env = base_env.clone();
        pane_env.extend(env.clone());
        if let Some(command) = default_policy(&args.name, adapter.as_str(), &dir, &pane_env) {
            ding_policy = Some(belfry_ding::policy::RICH_POLICY_TOKEN.to_string());
            adapter_command = Some(command);
        }
    }
    // A remote pane gets this terminal's type, as a local one gets it from `base_env`.
    let term = match place {
        Place::Local => None,
        Place::Remote(_) => std::env::var("TERM").ok(),
    };
    // The user's config may set how much history a new pane keeps.
    let scrollback = attach::config::AttachConfig::load()?.history_limit;
    let spawn = op::Spawn {
        cwd,
        env,
        base_env,
        term,
        scrollback,
        rows: Some(rows.into()),
        cols: Some(cols.into()),
        size_policy: Some(size_policy),
        ding_policy,
        adapter_command,
        adapter,
        ..op::Spawn::new(name, args.command.clone())
    };
    let mut client = place.daemon()?;
    let (id, reply) = client.call_numbered(spawn)?;
    drop(client);
    let pane: PaneRecord = match reply.into_result() {
        Ok(pane) => pane,
        Err(err) if err.code == ErrorCode::Exists => {
            return pane_exists(&args.name, &err, attach_with);
        }
        Err(err) => return Err(refusal(err)),
    };
    let whole = body::ok(&Value::from(id), &pane);
    if args.json {
        print_json(&whole);
    } else if attach_with.is_none() {
        println!(
            "{}: pid {} incarnation {} revision {}",
            args.name,
            pane.child_pid
                .map_or_else(|| "-".into(), |pid| pid.to_string()),
            pane.incarnation.as_deref().unwrap_or("-"),
            pane.revision.map_or_else(|| "-".into(), |r| r.to_string())
        );
    }
    if let Some((detach_key, _)) = attach_with {
        return attach_cmd(&args.name, false, DetachKey::parse(detach_key)?);
    }
    Ok(EXIT_OK)
}

/// The program `belfry run NAME` starts without a command: the user's shell (`$SHELL`), else
/// `sh`.
fn login_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|shell| !shell.trim().is_empty())
        .unwrap_or_else(|| "sh".to_string())
}

/// The DING policy of an agent declared with `adapter` and none of its own (spec §7.4, §7.3):
/// the rich policy's activity command where it can work ([`crate::hooks::rich_default`]),
/// else `None`, the aggressive default. An adapter that ships an activity executable but
/// cannot use it here says why on stderr, with the fix.
pub(crate) fn default_policy(
    agent: &str,
    adapter: &str,
    dir: &std::path::Path,
    env: &BTreeMap<String, String>,
) -> Option<Vec<String>> {
    match crate::hooks::rich_default(adapter, dir, env) {
        Ok(command) => {
            crate::doctor::say_first_turn_wait(agent, adapter);
            Some(command)
        }
        Err(None) => None,
        Err(Some(reason)) => {
            eprintln!("belfry: {agent}: DING delivery stays aggressive: {reason}");
            None
        }
    }
}

/// A spawn of a name that is taken. `belfry run` attaches to the pane there, as tmux's
/// `new -A` does (its command and options are not applied to it), restarting its own program
/// first when that has exited; `belfry new` refuses, saying how to get to the pane.
fn pane_exists(name: &str, err: &ErrorBody, attach_with: Option<(&str, bool)>) -> Result<i32> {
    if let Some((detach_key, command_given)) = attach_with {
        let key = DetachKey::parse(detach_key)?;
        let (place, session) = remote::place_of(name)?;
        let snapshot = op::Snapshot {
            session: Some(session.clone()),
            ..op::Snapshot::default()
        };
        let screen: Screen = ask(&mut place.daemon()?, snapshot)?;
        let mut note = None;
        if let Some(status) = &screen.exited {
            let _: Restarted = ask(&mut place.daemon()?, op::Restart::of(session))?;
            let how = match (status.code, status.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                _ => "had exited".to_string(),
            };
            note = Some(format!(
                "{name}'s program {how}: restarted it (its own command, not the one given)"
            ));
        } else if command_given {
            // The pane runs its own program; the one given is not run, and saying so keeps a
            // changed command from looking applied (`belfry kill NAME` first starts it anew).
            note = Some(format!(
                "{name} exists: attached to it; the command given was not run (`belfry kill \
                 {name}` first to start it anew)"
            ));
        }
        let socket = attach_socket(name)?;
        return attach::run(
            Some((&socket, name)),
            false,
            key,
            &AttachPanes { place },
            note,
        );
    }
    bail!(
        "{}; `belfry attach {name}` attaches to it (`belfry run {name} -- CMD` attaches, or \
         starts it when it is gone)",
        err.message
    )
}

fn attach_cmd(name: &str, read_only: bool, key: DetachKey) -> Result<i32> {
    let socket = attach_socket(name)?;
    let (place, _) = remote::place_of(name)?;
    attach::run(
        Some((&socket, name)),
        read_only,
        key,
        &AttachPanes { place },
        None,
    )
}

/// `belfry attach` with no name: the only pane (of the `--host` machine, else this one) that
/// can be attached from here, leaving out the pane this terminal is and any that already
/// shows it. Several, on a terminal: the pane chooser first. None, or several with no
/// terminal: an error saying what there is and what to do.
fn attach_unnamed(read_only: bool, detach_key: &str) -> Result<i32> {
    let key = DetachKey::parse(detach_key)?;
    let place = remote::default_place()?;
    let local = place.remote().is_none();
    let panes = AttachPanes { place };
    // The names only: the chooser's unread counts would read every pane's inbox.
    let names: Vec<String> = panes
        .listing()?
        .into_iter()
        .map(|pane| pane.session)
        .filter(|name| !local || attach::refuse_cycle(name).is_ok())
        .collect();
    match names.as_slice() {
        [] => bail!("no pane to attach to; `belfry run NAME -- CMD` starts one and attaches to it"),
        [one] => attach_cmd(one, read_only, key),
        _ if rustix::termios::isatty(std::io::stdin()) => {
            attach::run(None, read_only, key, &panes, None)
        }
        several => bail!(
            "{} panes to attach to ({}): name one, `belfry attach NAME`",
            several.len(),
            several.join(", ")
        ),
    }
}

/// The pane host to attach to for `name` (an address: `NAME` or `HOST:NAME`), refusing a
/// pane that would show itself. Attach talks to the pane host directly, so a human stays
/// attached while the daemon restarts (spec §6.0). The daemon is asked only when the socket is
/// not where expected. A remote pane's host is reached through `belfry proxy --pane` there,
/// which does the same on its machine.
fn attach_socket(name: &str) -> Result<Endpoint> {
    let (place, session) = remote::place_of(name)?;
    if let Place::Remote(remote) = place {
        return Ok(Endpoint::Remote(remote, session));
    }
    let name = session.as_str();
    attach::refuse_cycle(name)?;
    let socket = paths::pane_socket(&paths::private_runtime_dir()?, name);
    if socket.exists() {
        return Ok(Endpoint::Socket(socket));
    }
    let attach = op::Attach {
        session: Some(session),
        ..op::Attach::default()
    };
    let target: AttachTarget = ask(&mut daemon()?, attach)?;
    Ok(Endpoint::Socket(PathBuf::from(target.socket)))
}

/// The panes an attached client can move to: the daemon's listing, or the pane hosts asked
/// directly when no daemon runs (moving between panes never starts one). For a remote pane,
/// the panes of its machine.
struct AttachPanes {
    place: Place,
}

impl AttachPanes {
    /// Every pane of the place, in name order: the daemon's listing, or the pane hosts asked
    /// directly when no daemon runs here.
    fn listing(&self) -> Result<Vec<PaneRecord>> {
        let socket = paths::daemon_socket();
        let mut panes = match self.place.remote() {
            Some(remote) => ask::<Listing>(&mut remote.daemon()?, op::List {})?.panes,
            None => match direct::running_daemon(&socket)? {
                Some(mut client) => ask::<Listing>(&mut client, op::List {})?.panes,
                None => direct::list(&paths::runtime_dir()),
            },
        };
        panes.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(panes)
    }
}

impl attach::Panes for AttachPanes {
    fn list(&self) -> Result<Vec<attach::PaneEntry>> {
        let remote = self.place.remote();
        let panes = self.listing()?;
        let state = paths::state_dir();
        Ok(panes
            .into_iter()
            .map(|pane| {
                // Another machine's inboxes are its files: not counted from here.
                let unread = match remote {
                    Some(_) => 0,
                    None => belfry_ding::Inbox::open_existing(&state, &pane.session)
                        .and_then(|inbox| inbox.list_unread())
                        .map(|unread| unread.len())
                        .unwrap_or(0),
                };
                attach::PaneEntry {
                    detail: chooser_detail(&pane, unread),
                    name: pane.session,
                }
            })
            .collect())
    }

    fn socket(&self, name: &str) -> Result<Endpoint> {
        match self.place.remote() {
            Some(remote) => Ok(Endpoint::Remote(
                Box::new(remote.clone()),
                SessionName::parse(name)?,
            )),
            None => attach_socket(name),
        }
    }
}

/// A local pane's working directory: `--cwd`, else this one, with its links resolved as
/// `belfry.kdl` resolves an agent's.
fn local_cwd(cwd: Option<&std::path::Path>) -> Result<String> {
    let cwd = match cwd {
        Some(cwd) => cwd.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = std::fs::canonicalize(&cwd)
        .with_context(|| format!("--cwd {}: no such directory", cwd.display()))?;
    Ok(cwd
        .to_str()
        .ok_or_else(|| anyhow!("--cwd {}: the path is not UTF-8", cwd.display()))?
        .to_string())
}

/// A pane's line in the chooser after its name: its state, revision and unread mail.
fn chooser_detail(pane: &PaneRecord, unread: usize) -> String {
    let state = match (&pane.state, &pane.exited) {
        (Some(state), _) => state.clone(),
        (None, Some(Some(status))) => match (status.code, status.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            _ => "exited".to_string(),
        },
        (None, _) => "running".to_string(),
    };
    let mut detail = state;
    if let Some(revision) = pane.revision {
        detail.push_str(&format!(", revision {revision}"));
    }
    if unread > 0 {
        detail.push_str(&format!(", {unread} unread"));
    }
    detail
}

/// `belfry ls`: the daemon's listing, or with no daemon running the pane hosts asked directly
/// (marked as such on the first line, or on stderr with `--json` so the JSON stays the same
/// data); a read-only command never starts a daemon.
fn ls(json: bool, all_hosts: bool) -> Result<i32> {
    if all_hosts {
        return ls_all_hosts(json);
    }
    if let Place::Remote(remote) = remote::default_place()? {
        let panes = ask::<Listing>(&mut remote.daemon()?, op::List {})?.panes;
        return print_panes(&panes, json);
    }
    paths::private_runtime_dir()?;
    let socket = paths::daemon_socket();
    let panes = match direct::running_daemon(&socket)? {
        Some(mut client) => ask::<Listing>(&mut client, op::List {})?.panes,
        None => {
            let note = direct::no_daemon_note(&socket);
            if json {
                eprintln!("belfry: {note}");
            } else {
                println!("{note}");
            }
            direct::list(&paths::runtime_dir())
        }
    };
    print_panes(&panes, json)
}

/// Prints a listing: JSON, or the table.
fn print_panes(panes: &[PaneRecord], json: bool) -> Result<i32> {
    if json {
        print_json(&panes);
        return Ok(EXIT_OK);
    }
    if panes.is_empty() {
        println!("no panes");
        return Ok(EXIT_OK);
    }
    print!("{}", ls_table(panes, crate::human::now_unix_ms()));
    Ok(EXIT_OK)
}

/// `belfry ls --all-hosts`: this machine's panes (or the `--host` one's), then every host of
/// the user config's `hosts`, asked at once, one ssh connection each. A pane of a host is
/// named `HOST:NAME`, the address every command takes; a host that cannot be reached is one
/// line (or one `{"host", "error"}` object) saying why, and the others are still listed.
/// The exit code is 2 when any host failed, after everything was printed.
fn ls_all_hosts(json: bool) -> Result<i32> {
    let place = remote::default_place()?;
    // The `--host` machine is listed first, as "here"; a configured host that is the same
    // destination is not asked again (it would list every pane of it twice).
    let here_host = match &place {
        Place::Remote(remote) => Some(remote.host.clone()),
        Place::Local => None,
    };
    let hosts = remote::configured_hosts()?;
    let asked: Vec<_> = hosts
        .into_iter()
        .filter(|host| here_host.as_ref() != Some(&host.host))
        .map(|host| {
            std::thread::spawn(move || {
                let panes = host
                    .daemon()
                    .and_then(|mut client| Ok(ask::<Listing>(&mut client, op::List {})?.panes));
                (host.label, panes)
            })
        })
        .collect();
    let here = match place {
        Place::Remote(remote) => {
            let label = remote.label.clone();
            (
                Some(label),
                remote
                    .daemon()
                    .and_then(|mut client| Ok(ask::<Listing>(&mut client, op::List {})?.panes)),
            )
        }
        Place::Local => {
            paths::private_runtime_dir()?;
            let socket = paths::daemon_socket();
            let panes = match direct::running_daemon(&socket)? {
                Some(mut client) => ask::<Listing>(&mut client, op::List {})?.panes,
                None => direct::list(&paths::runtime_dir()),
            };
            (None, Ok(panes))
        }
    };
    let mut results = vec![here];
    for handle in asked {
        match handle.join() {
            Ok((label, panes)) => results.push((Some(label), panes)),
            Err(_) => bail!("listing a host failed unexpectedly"),
        }
    }
    let mut panes = Vec::new();
    let mut failures = Vec::new();
    for (label, listed) in results {
        match (label, listed) {
            (None, Ok(listed)) => panes.extend(listed),
            (Some(label), Ok(listed)) => panes.extend(listed.into_iter().map(|mut pane| {
                pane.session = format!("{label}:{}", pane.session);
                pane
            })),
            (label, Err(err)) => {
                failures.push((label.unwrap_or_else(|| "this machine".into()), err))
            }
        }
    }
    if json {
        let mut shown: Vec<Value> = panes
            .iter()
            .map(|pane| serde_json::to_value(pane).unwrap_or(Value::Null))
            .collect();
        for (host, err) in &failures {
            shown.push(json!({"host": host, "error": without_repeats(err)}));
        }
        print_json(&shown);
    } else {
        if panes.is_empty() {
            println!("no panes");
        } else {
            print!("{}", ls_table(&panes, crate::human::now_unix_ms()));
        }
        for (host, err) in &failures {
            println!("{host}: {}", without_repeats(err));
        }
    }
    Ok(if failures.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    })
}

/// `belfry shutdown --kill-panes` with no daemon running: the panes still run (each pane host
/// outlives the daemon), so each is ended through its own pane host, as the daemon would have
/// ended it. A pane host that does not answer is named, with what to do, and the exit is 2.
fn kill_panes_without_daemon(socket: &std::path::Path) -> Result<i32> {
    let runtime = paths::runtime_dir();
    let mut ended = Vec::new();
    let mut left = Vec::new();
    for pane in direct::list(&runtime) {
        if let Some(error) = &pane.error {
            left.push(format!("{}: {}", pane.session, escape_for_terminal(error)));
            continue;
        }
        let Ok(name) = SessionName::parse(&pane.session) else {
            continue;
        };
        match direct::kill(&runtime, &name) {
            Ok(true) => ended.push(pane.session.clone()),
            Ok(false) => left.push(format!("{}: its pane host did not answer", pane.session)),
            Err(err) => left.push(format!("{}: {}", pane.session, without_repeats(&err))),
        }
    }
    // A pane host answers its kill before it is gone: the command returns once each ended
    // one has taken its socket away (within a bound), so a `belfry ls` right after lists none.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ended
        .iter()
        .any(|name| paths::pane_socket(&runtime, name).exists())
        && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if ended.is_empty() && left.is_empty() {
        println!("no daemon running at {}; no panes", socket.display());
    } else if !ended.is_empty() {
        println!(
            "no daemon running at {}; ended panes through their pane hosts: {}",
            socket.display(),
            ended.join(", ")
        );
    }
    for line in &left {
        eprintln!("belfry: not ended: {line} (`belfry ls` shows it; `belfry kill NAME` retries)");
    }
    Ok(if left.is_empty() { EXIT_OK } else { EXIT_ERROR })
}

/// What `belfry wait` says when the wait was refused or ran out. Running out is not an error
/// of the command line: a line for a person ("wait timed out … with the conditions not met", the pane's
/// revision and whether its program runs), with `--json` the state as JSON on stdout, and exit
/// [`EXIT_TIMEOUT`]. Any other refusal is an error as usual.
fn wait_failed(name: &str, timeout_ms: u64, json_out: bool, err: ErrorBody) -> Result<i32> {
    // The pane host's timeout reply: "wait timed out after N ms; state {…}".
    let state = (err.code == ErrorCode::Timeout)
        .then(|| err.message.strip_prefix("wait timed out"))
        .flatten()
        .and_then(|rest| rest.split_once("; state "))
        .and_then(|(_, state)| serde_json::from_str::<body::WaitState>(state).ok());
    let Some(state) = state else {
        return Err(refusal(err));
    };
    if json_out {
        print_json(&json!({"result": "timeout", "state": state}));
    }
    let program = match state.exited {
        None => "its program runs".to_string(),
        Some(status) => match (status.code, status.signal) {
            (Some(code), _) => format!("its program exited with code {code}"),
            (None, Some(signal)) => format!("its program was killed by signal {signal}"),
            _ => "its program exited".to_string(),
        },
    };
    eprintln!(
        "belfry: {name}: wait timed out after {timeout_ms} ms (--timeout-ms) with the \
         conditions not met; now at revision {}, {program}",
        state.revision
    );
    Ok(EXIT_TIMEOUT)
}

/// The `belfry ls` table at `now_ms` (for the panes' ages): a heading, then one row a pane.
fn ls_table(panes: &[PaneRecord], now_ms: u64) -> String {
    let mut table = format!(
        "{:<20} {:>8} {:>8} {:>16} {:>9} {:>7}  {:<12} {:<26} {:>6}  COMMAND\n",
        "NAME", "HOSTPID", "PID", "REVISION", "SIZE", "CLIENTS", "STATE", "STATUS", "AGE"
    );
    for pane in panes {
        table.push_str(&ls_row(pane, now_ms));
        table.push('\n');
    }
    table
}

/// One row of `belfry ls`. A pane host that did not answer is listed by name and pid with its
/// state and the reason in place of the command. A field the pane host did not give is `-`.
fn ls_row(pane: &PaneRecord, now_ms: u64) -> String {
    let dash = || "-".to_string();
    if let Some(error) = &pane.error {
        return format!(
            "{:<20} {:>8} {:>8} {:>16} {:>9} {:>7}  {:<12} {:<26} {:>6}  ({})",
            pane.session,
            pane.pid,
            "-",
            "-",
            "-",
            "-",
            pane.state.as_deref().unwrap_or("error"),
            "-",
            "-",
            escape_for_terminal(error)
        );
    }
    let state = match pane.exited.flatten() {
        None => "running".to_string(),
        Some(exit) => match (exit.code, exit.signal) {
            (Some(code), _) => format!("exited {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "exited".to_string(),
        },
    };
    let argv = pane.argv.as_deref().unwrap_or_default().join(" ");
    let status = pane
        .program_status
        .as_ref()
        .map_or_else(dash, |record| crate::human::status_words(record, now_ms));
    format!(
        "{:<20} {:>8} {:>8} {:>16} {:>9} {:>7}  {:<12} {:<26} {:>6}  {}",
        pane.session,
        pane.pid,
        pane.child_pid.map_or_else(dash, |pid| pid.to_string()),
        pane.revision
            .map_or_else(dash, |revision| revision.to_string()),
        pane.size.map_or_else(dash, |size| size.to_string()),
        pane.clients
            .map_or_else(dash, |clients| clients.to_string()),
        state,
        status,
        pane.started_at
            .map_or_else(dash, |at| crate::human::coarse(now_ms.saturating_sub(at))),
        escape_for_terminal(&argv)
    )
}

/// Text from a pane's spec (its argv comes from whoever spawned it, or from a `belfry.kdl`)
/// made safe to print in a table on the user's terminal: control characters (an `ESC ] 2 ; …
/// BEL` title sequence, a newline that breaks the table) and the invisible characters that
/// reorder or hide text are shown as escapes instead of acting. A backslash is doubled, so the
/// escaped text reads back unambiguously.
pub(crate) fn escape_for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_invisible_format(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// Bidirectional controls and other zero-width format characters, which can make a command
/// look like another one.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}'
    )
}

fn send(args: &SendArgs, sub: &ArgMatches) -> Result<i32> {
    use belfry_proto::request::InputStep;
    // Steps run in the order they appear on the command line, whatever their kind.
    let mut steps: Vec<(usize, InputStep)> = Vec::new();
    let mut collect = |id: &str, make: &dyn Fn(&str) -> Result<InputStep>| -> Result<()> {
        if let (Some(indices), Some(values)) = (sub.indices_of(id), sub.get_raw(id)) {
            for (index, value) in indices.zip(values) {
                let value = value
                    .to_str()
                    .ok_or_else(|| anyhow!("--{id} is not UTF-8"))?;
                steps.push((index, make(value)?));
            }
        }
        Ok(())
    };
    collect("paste", &|v| Ok(InputStep::Paste(v.into())))?;
    collect("text", &|v| Ok(InputStep::Text(v.into())))?;
    collect("key", &|v| Ok(InputStep::Key(v.into())))?;
    collect("delay_ms", &|v| {
        let ms = v
            .parse::<u64>()
            .map_err(|_| anyhow!("--delay-ms {v:?} is not a number"))?;
        Ok(InputStep::DelayMs(ms))
    })?;
    steps.sort_by_key(|(index, _)| *index);
    if steps.is_empty() {
        bail!("nothing to send: give --paste, --text, --key or --delay-ms");
    }
    check_send_steps(steps.iter().map(|(_, step)| step))?;
    let (place, session) = remote::place_of(&args.name)?;
    let send = op::Send {
        session: Some(session.clone()),
        expect: send_expectation(args)?,
        input: steps.into_iter().map(|(_, step)| step).collect(),
        txn: None,
        notice: None,
        timeout_ms: args.timeout_ms,
    };
    // spec §6.2: over ssh the compare still happens in the pane host, so latency can only
    // make a conflict likelier, never a write against a screen the caller did not see.
    // Locally the send goes to the pane host itself when one answers at the pane's socket
    // (one round trip, no daemon in the path), else through the daemon.
    let quick = match &place {
        Place::Local => {
            paths::private_runtime_dir()?;
            direct::quick_send(&paths::runtime_dir(), &send, &session)?
        }
        Place::Remote(_) => None,
    };
    let (whole, sent): (Value, Sent) = match quick {
        Some(answer) => answer,
        None => ask_whole(&mut place.daemon()?, send)?,
    };
    let conflict = matches!(sent, Sent::Conflict { .. });
    if args.json {
        print_json(&whole);
    } else {
        match &sent {
            Sent::Conflict { actual, exited, .. } => eprintln!(
                "conflict: pane is at revision {} (incarnation {}){}; nothing was written",
                actual.revision,
                actual.incarnation,
                if *exited { ", exited" } else { "" }
            ),
            Sent::Sent { revision, .. } => println!("sent (revision {revision})"),
        }
    }
    Ok(if conflict { EXIT_CONFLICT } else { EXIT_OK })
}

/// Checks a send's steps as the pane host will check them, before anything is sent, so that
/// an error names the option the user gave (`--key "Foo": unknown key name …`) rather than
/// the request's fields (`input step 0`, `delay_ms`).
fn check_send_steps<'a>(
    steps: impl Iterator<Item = &'a belfry_proto::request::InputStep>,
) -> Result<()> {
    use belfry_proto::request::InputStep;
    let mut total_delay = 0u64;
    for step in steps {
        let (option, value) = match step {
            InputStep::Paste(_) => ("--paste", None),
            InputStep::Text(_) | InputStep::Bytes(_) => ("--text", None),
            InputStep::Key(name) => ("--key", Some(format!("{name:?}"))),
            InputStep::DelayMs(ms) => {
                total_delay = total_delay.saturating_add(*ms);
                ("--delay-ms", Some(ms.to_string()))
            }
        };
        if let Err(belfry_pty::Error::InvalidInput { reason }) =
            belfry_pty::input::parse_steps(std::slice::from_ref(step))
        {
            // The pane host numbers the steps of a request; here there is one, and its option.
            let reason = reason.strip_prefix("input step 0: ").unwrap_or(&reason);
            match value {
                Some(value) => bail!("{option} {value}: {reason}"),
                None => bail!("{option}: {reason}"),
            }
        }
    }
    if total_delay > MAX_DELAY_TOTAL_MS {
        bail!(
            "--delay-ms: the delays add up to {total_delay} ms, over the {MAX_DELAY_TOTAL_MS} ms \
             one send may pause in all"
        );
    }
    Ok(())
}

/// `--regex` of `belfry wait`: compiled as the pane host will compile it, so a pattern it
/// would refuse is named here, as the option the user gave.
fn parse_screen_regex(pattern: &str) -> std::result::Result<String, String> {
    belfry_pty::check_screen_regex(pattern)
        .map(|()| pattern.to_string())
        .map_err(|err| format!("{pattern:?} is not a regular expression: {err}"))
}

/// What the send expects of the pane (spec §3): the `--expect` token's identity, then any
/// `--expect-*` field over it; `None` for an unguarded send.
fn send_expectation(args: &SendArgs) -> Result<Option<Expect>> {
    let mut expect = Expect::default();
    if let Some(token) = &args.expect {
        let parsed = belfry_proto::expect_token::decode(token).map_err(|err| anyhow!(err))?;
        expect = Expect {
            incarnation: parsed.incarnation,
            generation: parsed.generation,
            revision: parsed.revision,
        };
    }
    if let Some(revision) = args.expect_revision {
        expect.revision = Some(revision);
    }
    if let Some(incarnation) = &args.expect_incarnation {
        expect.incarnation = Some(incarnation.clone());
    }
    if let Some(generation) = &args.expect_generation {
        expect.generation = Some(generation.clone());
    }
    Ok((!expect.is_empty()).then_some(expect))
}

fn peek(name: &str, ansi: bool, json: bool, scrollback: Option<u64>, cells: bool) -> Result<i32> {
    let (place, session) = remote::place_of(name)?;
    let snapshot = op::Snapshot {
        session: Some(session.clone()),
        cells: Some(cells),
        ansi: Some(ansi),
        scrollback,
    };
    let screen: Screen = match &place {
        Place::Remote(remote) => ask(&mut remote.daemon()?, snapshot)?,
        Place::Local => {
            paths::private_runtime_dir()?;
            let socket = paths::daemon_socket();
            let runtime = paths::runtime_dir();
            match direct::quick_snapshot(&runtime, &snapshot, &session)? {
                Some(screen) => {
                    if !direct::daemon_runs(&socket) {
                        eprintln!("belfry: {}", direct::no_daemon_note(&socket));
                    }
                    screen
                }
                None => match direct::running_daemon(&socket)? {
                    Some(mut client) => ask(&mut client, snapshot)?,
                    None => {
                        // On stderr, so the screen (or its JSON) on stdout is the same data
                        // either way.
                        eprintln!("belfry: {}", direct::no_daemon_note(&socket));
                        direct::snapshot(&runtime, snapshot, &session)?
                    }
                },
            }
        }
    };
    if json {
        // The snapshot as the pane host gave it, plus the token `belfry send --expect` takes
        // back: this snapshot's identity, whole.
        let mut shown = serde_json::to_value(&screen)?;
        shown["expect"] = Value::String(belfry_proto::expect_token::encode(&screen.identity()));
        print_json(&shown);
        return Ok(EXIT_OK);
    }
    // One write for the whole screen (and its history), not one per line: stdout's own
    // buffer flushes at every newline, which was 2001 system calls for 2000 lines of history.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    for line in screen.scrollback.iter().flatten() {
        writeln!(out, "{line}")?;
    }
    let lines = if ansi {
        screen.ansi.unwrap_or_default()
    } else {
        screen.lines
    };
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// `--since DURATION` of `belfry events`: how far back, in ms.
fn parse_since(text: &str) -> std::result::Result<u64, String> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale = match unit {
        "ms" => 1,
        "s" | "" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if scale > 0 => Ok(n.saturating_mul(scale)),
        _ => Err(format!(
            "{text:?} is not a duration: a whole number and a unit (90s, 5m, 2h, 1d)"
        )),
    }
}

fn events(
    name: Option<String>,
    json: bool,
    history: Option<u32>,
    since: Option<u64>,
) -> Result<i32> {
    // A subscription to one pane has always answered a name outside the grammar as it answers
    // any name no pane has: not found (exit 1). No pane can have such a name.
    let (place, session) = match name.as_deref() {
        Some(address) => {
            let (host, name) = match address.rsplit_once(':') {
                Some((host, name)) => (Some(host), name),
                None => (None, address),
            };
            let session = SessionName::parse(name)
                .map_err(|_| NotFound(format!("no pane named {name:?}")))?;
            let place = match host {
                Some(host) => remote::host_place(host)?,
                None => remote::default_place()?,
            };
            (place, Some(session))
        }
        None => (remote::default_place()?, None),
    };
    let mut client = place.daemon()?;
    let subscribe = op::Subscribe {
        session,
        revisions: None,
        exit_so_far: None,
        // With --since alone, every kept event of that time; with both, at most N of them.
        history: match (history, since) {
            (None, None) => Some(10),
            (history, _) => history,
        },
        since_ms: since.map(|ago| crate::human::now_unix_ms().saturating_sub(ago)),
    };
    let _: Subscribed = ask(&mut client, subscribe)?;
    loop {
        let event = client.read_event()?;
        let mut out = std::io::stdout().lock();
        if json {
            // As the daemon sent it, whatever this build knows of it.
            writeln!(out, "{event}")?;
        } else {
            writeln!(out, "{}", event_line(&event, crate::human::now_unix_ms()))?;
        }
        out.flush()?;
    }
}

/// One line of `belfry events`: when it arrived, the pane, the kind, and what happened in
/// words. An event this build does not know (from a newer daemon) is shown by its fields.
fn event_line(raw: &Value, now_ms: u64) -> String {
    // A kept event the daemon sent first says when it happened; a live one happens now.
    let at_ms = raw["at_ms"].as_u64().unwrap_or(now_ms);
    let mut raw = raw.clone();
    if let Some(fields) = raw.as_object_mut() {
        fields.remove("history");
        fields.remove("at_ms");
    }
    let raw = &raw;
    let (kind, session, words) = match belfry_proto::de::from_value::<Event>(raw) {
        Ok(event) => (
            event.kind().to_string(),
            event.session().map(str::to_string),
            crate::human::event_words(&event, crate::human::Detail::Full),
        ),
        Err(_) => (
            raw["event"].as_str().unwrap_or("?").to_string(),
            raw["session"].as_str().map(str::to_string),
            crate::human::fields_words(raw, &["event", "session"]),
        ),
    };
    format!(
        "{}  {:<20} {:<10} {}",
        crate::human::clock(at_ms, now_ms),
        escape_for_terminal(session.as_deref().unwrap_or("-")),
        escape_for_terminal(&kind),
        words
    )
}

/// The declarations of `belfry up` and `belfry down` (`command`): FILE, else ./belfry.kdl.
/// Without FILE and with no ./belfry.kdl the error says which directory was looked in and
/// how to name a file, rather than only that a file is missing.
fn declarations(file: Option<PathBuf>, command: &str) -> Result<belfry_mux::declare::Declarations> {
    let path = match file {
        Some(file) => file,
        None => {
            let path = PathBuf::from("belfry.kdl");
            if !path.exists() {
                let here = std::env::current_dir()
                    .map(|dir| dir.display().to_string())
                    .unwrap_or_else(|_| ".".to_string());
                bail!(
                    "`belfry {command}` with no FILE reads ./belfry.kdl, and {here} has none: \
                     name the declarations file (`belfry {command} FILE`), or run it where \
                     belfry.kdl is (the repository's examples/belfry.kdl is a commented one)"
                );
            }
            path
        }
    };
    Ok(belfry_mux::declare::load(&path)?)
}

/// `belfry up` (spec §11): planning and applying live in `belfry_mux::declare::up`; this
/// prints what it did, or why nothing (or only part) was done.
fn up(file: Option<PathBuf>, replace: bool, json_out: bool) -> Result<i32> {
    use belfry_mux::declare::{report, DriftPolicy};
    let path = file.clone().unwrap_or_else(|| PathBuf::from("belfry.kdl"));
    let mut all = declarations(file, if replace { "up --replace" } else { "up" })?;
    crate::hooks::refuse_unguarded_agents(&all, &path)?;
    default_policies(&mut all);
    let drift = if replace {
        DriftPolicy::Replace
    } else {
        DriftPolicy::Report
    };
    // One plan per machine (spec §6.2): this one's agents through the local daemon, each
    // `host`'s through its own. A remote pane starts from the far daemon's environment, not
    // this machine's.
    let mut actions = Vec::new();
    for (host, decls) in all.by_host() {
        let (mut client, base_env) = match host_or_default(host.as_deref())? {
            Place::Local => (daemon()?, std::env::vars().collect()),
            Place::Remote(remote) => (remote.daemon()?, BTreeMap::new()),
        };
        match belfry_mux::declare::up(&mut client, &decls, drift, &base_env) {
            Ok(applied) => actions.extend(applied.actions),
            Err(err) => return up_failed(err),
        }
    }
    if json_out {
        print_json(&json!(actions));
    } else {
        print!("{}", report(&actions));
    }
    Ok(EXIT_OK)
}

/// The default DING policy of each agent of this machine declared with an adapter and no
/// `ding` block ([`default_policy`]); the agents of another machine are that machine's to
/// judge, and keep the aggressive default.
fn default_policies(all: &mut belfry_mux::declare::Declarations) {
    let base_env: BTreeMap<String, String> = std::env::vars().collect();
    for agent in all.agents.iter_mut() {
        let Some(adapter) = agent.adapter.clone() else {
            continue;
        };
        // An agent whose harness is not installed is skipped by `up` with its own line; a
        // word about its hooks would only bury that.
        if belfry_mux::preflight::missing_harness(agent, &base_env).is_some() {
            continue;
        }
        if agent.ding_declared || agent.host.is_some() {
            continue;
        }
        let Some(dir) = agent.cwd.clone() else {
            continue;
        };
        let mut env = base_env.clone();
        env.extend(agent.env.clone());
        if let Some(adapter_command) = default_policy(&agent.name, &adapter, &dir, &env) {
            agent.ding = belfry_ding::DeliveryPolicy::Rich { adapter_command };
        }
    }
}

/// `belfry up --dry-run`: the checks of `belfry up` with nothing launched. An agent of another
/// machine is only listed: its files are that machine's to check.
fn up_dry_run(file: Option<PathBuf>) -> Result<i32> {
    let path = file.clone().unwrap_or_else(|| PathBuf::from("belfry.kdl"));
    let all = declarations(file, "up --dry-run")?;
    crate::hooks::refuse_unguarded_agents(&all, &path)?;
    for (host, decls) in all.by_host() {
        match host {
            None => match belfry_mux::declare::dry_run(&decls, &std::env::vars().collect()) {
                Ok(actions) => {
                    for action in actions {
                        match action {
                            belfry_mux::declare::Action::Skip { .. } => {
                                println!(
                                    "would {}",
                                    action.to_string().replacen("skip    ", "skip ", 1)
                                )
                            }
                            other => println!("would launch {}", other.name()),
                        }
                    }
                }
                Err(err) => return up_failed(err),
            },
            Some(host) => {
                for agent in &decls.agents {
                    println!("would launch {} on {host} (not checked here)", agent.name);
                }
            }
        }
    }
    Ok(EXIT_OK)
}

/// The place of a declared agent's `host`, or the command's own (`--host`) without one.
fn host_or_default(host: Option<&str>) -> Result<Place> {
    match host {
        Some(host) => remote::host_place(host),
        None => remote::default_place(),
    }
}

/// What `belfry up` says when one machine's plan fails: that plan's own undo (spec §11); the
/// machines done before it keep what they launched.
fn up_failed(err: MuxError) -> Result<i32> {
    match err {
        MuxError::Preflight(errors) => {
            for error in &errors {
                eprintln!("belfry: {error}");
            }
            eprintln!("belfry up: nothing was launched");
            Ok(EXIT_ERROR)
        }
        MuxError::Launch {
            agent,
            source,
            stopped,
        } => {
            eprintln!("belfry up: {agent}: {}", chain(&source));
            for (name, outcome) in &stopped {
                match outcome {
                    Ok(()) => eprintln!("belfry up: stopped {name}, launched by this run"),
                    Err(err) => eprintln!(
                        "belfry up: cannot stop {name}, launched by this run: {}",
                        chain(err)
                    ),
                }
            }
            if stopped.is_empty() {
                eprintln!("belfry up: nothing else was launched");
            }
            Ok(EXIT_ERROR)
        }
        err => Err(mux_error(err)),
    }
}

fn down(file: Option<PathBuf>) -> Result<i32> {
    let all = declarations(file, "down")?;
    for (host, decls) in all.by_host() {
        let place = host_or_default(host.as_deref())?;
        let mut client = place.daemon()?;
        let prefix = host.map(|host| format!("{host}:")).unwrap_or_default();
        belfry_mux::declare::down(&mut client, &decls, |name| {
            println!("stopped {prefix}{name}")
        })
        .map_err(mux_error)?;
    }
    Ok(EXIT_OK)
}

/// A daemon's `not-found` reply exits 1, like every other command's; anything else is an error.
fn mux_error(err: MuxError) -> anyhow::Error {
    match err {
        MuxError::Refused { code, message } if code == "not-found" => NotFound(message).into(),
        other => other.into(),
    }
}

/// An error and its causes, as `{:#}` shows an `anyhow::Error`: `message: cause: cause`.
/// As in [`without_repeats`], a cause the text already carries is left out.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let words = next.to_string();
        if !text.contains(&words) {
            text.push_str(&format!(": {words}"));
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod hot_tests {
    use super::{parse_hot, Cli, HOT};
    use clap::{CommandFactory, FromArgMatches};

    /// Lines of every hot subcommand, each with whether the whole tree accepts it: well-formed
    /// ones in each form an option takes, and mistakes, help and version requests, which must
    /// be left to the whole tree.
    const LINES: &[(bool, &[&str])] = &[
        (true, &["dispatch", "--event", "before-tool"]),
        (
            true,
            &[
                "dispatch",
                "--event=after-tool",
                "--spool",
                "--native",
                "d1",
            ],
        ),
        (
            true,
            &[
                "dispatch",
                "--event",
                "x",
                "--hooks-file",
                "/h.json",
                "--dialects",
                "/d",
            ],
        ),
        (true, &["dispatch", "--turn-boundary", "--event", "stop"]),
        (false, &["dispatch"]),
        (false, &["dispatch", "--event"]),
        (false, &["dispatch", "--event", "a", "--event", "b"]),
        (false, &["dispatch", "--event", "x", "--bogus"]),
        (false, &["dispatch", "--event", "x", "extra"]),
        (false, &["dispatch", "--help"]),
        (false, &["dispatch", "-h"]),
        (false, &["dispatch", "--version"]),
        (true, &["peek", "p1"]),
        (
            true,
            &[
                "peek",
                "p1",
                "--ansi",
                "--json",
                "--scrollback",
                "10",
                "--cells",
            ],
        ),
        (true, &["peek", "box:p1", "--scrollback=3"]),
        (true, &["peek", "--", "-p"]),
        (false, &["peek"]),
        (false, &["peek", "p1", "p2"]),
        (false, &["peek", "p1", "--scrollback", "-1"]),
        (false, &["peek", "p1", "--scrollback", "ten"]),
        (false, &["peek", "p1", "--json", "--json"]),
        (false, &["peek", "--help"]),
        (false, &["peek", "p1", "-V"]),
        (true, &["send", "p1", "--text", "hi"]),
        (true, &["send", "p1", "--text", "-x", "--paste", "--y"]),
        (
            true,
            &[
                "send",
                "p1",
                "--paste",
                "a",
                "--key",
                "Enter",
                "--delay-ms",
                "5",
                "--text",
                "b",
            ],
        ),
        (
            true,
            &[
                "send",
                "p1",
                "--expect-revision",
                "3",
                "--expect-incarnation",
                "i",
                "--expect-generation",
                "g",
                "--json",
                "--timeout-ms",
                "100",
            ],
        ),
        (true, &["send", "p1", "--expect", "tok", "--text", "x"]),
        (
            false,
            &["send", "p1", "--expect", "tok", "--expect-revision", "3"],
        ),
        (false, &["send", "p1", "--delay-ms", "soon"]),
        (false, &["send"]),
        (false, &["send", "p1", "--key"]),
        (false, &["send", "--help"]),
        (true, &["send", "help"]),
        (true, &["wait", "p1", "--quiet-ms", "200"]),
        (
            true,
            &["wait", "p1", "--regex", "-x", "--timeout-ms", "5", "--json"],
        ),
        (true, &["wait", "p1", "--exit", "--revision", "3"]),
        (false, &["wait"]),
        (false, &["wait", "p1", "--timeout-ms", "-1"]),
        (false, &["wait", "p1", "--regex"]),
        (false, &["wait", "--help"]),
        (
            true,
            &["inbox", "post", "p1", "--subject", "-hi", "--from", "me"],
        ),
        (true, &["inbox", "post", "p1", "note.md", "--json"]),
        (true, &["inbox", "read", "p1", "1-a.md"]),
        (true, &["inbox", "read", "--session", "p1", "--json"]),
        (true, &["inbox", "archive", "p1", "1-a.md"]),
        (true, &["inbox", "ls"]),
        (false, &["inbox"]),
        (false, &["inbox", "post"]),
        (false, &["inbox", "archive"]),
        (false, &["inbox", "frob"]),
        (false, &["inbox", "post", "p1", "--help"]),
        (false, &["inbox", "help", "post"]),
    ];

    fn line(words: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("belfry")
            .chain(words.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn hot_lines_parse_as_the_whole_tree_parses_them() {
        for (accepted, words) in LINES {
            let args = line(words);
            let whole = Cli::command()
                .try_get_matches_from(&args)
                .ok()
                .and_then(|m| Cli::from_arg_matches(&m).ok().map(|cli| (cli, m)));
            let hot = parse_hot(&args);
            match (whole, hot) {
                (Some((cli, matches)), Some((hot_cli, hot_matches))) => {
                    assert_eq!(format!("{hot_cli:?}"), format!("{cli:?}"), "{words:?}");
                    let (name, sub) = matches.subcommand().expect("a subcommand");
                    let (hot_name, hot_sub) = hot_matches.subcommand().expect("a subcommand");
                    assert_eq!(hot_name, name, "{words:?}");
                    assert_eq!(format!("{hot_sub:?}"), format!("{sub:?}"), "{words:?}");
                    assert_eq!(
                        hot_matches.value_source("host"),
                        matches.value_source("host"),
                        "{words:?}"
                    );
                    assert!(accepted, "{words:?}: the whole tree accepts it");
                }
                (None, None) => assert!(!accepted, "{words:?}: the whole tree refuses it"),
                (Some(_), None) => {
                    panic!("{words:?}: the whole tree parses it, the hot root does not")
                }
                (None, Some((cli, _))) => {
                    panic!("{words:?}: only the hot root accepts it, as {cli:?}")
                }
            }
        }
    }

    #[test]
    fn only_a_hot_subcommand_given_first_takes_the_hot_path() {
        for words in [
            &["ls"][..],
            &["--host", "h", "peek", "p1"],
            &["info", "p1"],
            &["--help"],
            &[],
        ] {
            assert!(parse_hot(&line(words)).is_none(), "{words:?}");
        }
        // Every hot name is a subcommand of the whole tree.
        let whole = Cli::command();
        for (name, _) in HOT {
            assert!(whole.find_subcommand(name).is_some(), "{name}");
        }
    }
}

#[cfg(test)]
mod help_tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option and argument of every subcommand, by its path (`belfry inbox read --json`),
    /// that has no help line.
    fn without_help(command: &clap::Command, path: &str, found: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin
                && arg
                    .get_help()
                    .is_none_or(|help| help.to_string().trim().is_empty())
            {
                let name = arg
                    .get_long()
                    .map(|long| format!("--{long}"))
                    .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
                found.push(format!("{path} {name}"));
            }
        }
        for sub in command.get_subcommands() {
            without_help(sub, &format!("{path} {}", sub.get_name()), found);
        }
    }

    #[test]
    fn every_option_and_argument_has_a_help_line() {
        let mut found = Vec::new();
        without_help(&Cli::command(), "belfry", &mut found);
        assert!(
            found.is_empty(),
            "{} without a help line, the first: {}\nall: {found:#?}",
            found.len(),
            found.first().map_or("", String::as_str)
        );
    }
}
