//! The command line's grammar: the clap types of every subcommand and its options, and
//! `subcommand_name`, which `main` reads before anything is parsed. A file of its own so the
//! commands' code reads as what they do, with the grammar (and its help-text test) in one place.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use belfry_proto::limits::{MAX_DELAY_STEP_MS, MAX_SEND_TIMEOUT_MS, MAX_WAIT_MS};

use super::events::parse_since;
use super::send::parse_screen_regex;

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
pub(super) struct Cli {
    #[command(flatten)]
    pub(super) global: GlobalArgs,
    #[command(subcommand)]
    pub(super) command: Command,
}

// The options before the subcommand, a type of their own so that `parse_hot` can give a
// command line of one hot subcommand the same root without the rest of the tree.
#[derive(clap::Args, Debug)]
pub(super) struct GlobalArgs {
    /// Run the command on another machine, through `ssh -T [-p PORT] DEST belfry proxy`
    /// ([user@]box[:port], or a `hosts` alias of the user config). A pane address HOST:NAME
    /// picks the host of that one command.
    #[arg(long, env = "BELFRY_HOST", value_name = "HOST")]
    pub(super) host: Option<String>,
    /// The ssh command for --host and HOST:NAME, as words (not run by a shell), for example
    /// "ssh -F ~/.ssh/belfry_config" (default: ssh, from PATH, with ~/.ssh/config).
    #[arg(long, value_name = "COMMAND")]
    pub(super) ssh_command: Option<String>,
    /// How long reaching another machine may take, ssh's connect and login included, in
    /// seconds (default 10).
    #[arg(long, value_name = "SECS")]
    pub(super) connect_timeout: Option<f64>,
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
pub(super) enum Command {
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
pub(super) struct DispatchArgs {
    /// The semantic event (before-tool, after-tool, session-start, …).
    #[arg(long)]
    pub(super) event: String,
    /// Also append the context to $BELFRY_HOOK_CONTEXT.
    #[arg(long)]
    pub(super) spool: bool,
    /// Answer in a harness's native output contract (an adapter's dialect).
    #[arg(long, value_name = "DIALECT")]
    pub(super) native: Option<String>,
    /// The compiled hooks file (default: $BELFRY_HOOKS_FILE).
    #[arg(long, value_name = "PATH")]
    pub(super) hooks_file: Option<PathBuf>,
    /// Where dialect files live (default: $BELFRY_DIALECTS, then the built-in ones).
    #[arg(long, value_name = "DIR")]
    pub(super) dialects: Option<PathBuf>,
    /// This event is the harness's turn boundary: add unread inbox notices to the context.
    #[arg(long)]
    pub(super) turn_boundary: bool,
}

#[derive(Subcommand, Debug)]
pub(super) enum DingAction {
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
pub(super) enum SpoolAction {
    /// Print and empty the spool as one "Platform guidance:" block (nothing if empty).
    Drain {
        /// The spool file (default: $BELFRY_HOOK_CONTEXT).
        #[arg(long, value_name = "PATH")]
        path: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
pub(super) struct NewArgs {
    /// The new pane's name.
    pub(super) name: String,
    /// The program's working directory (default: this one).
    #[arg(long)]
    pub(super) cwd: Option<PathBuf>,
    /// Declared environment (part of the pane's generation). Repeatable.
    #[arg(long = "env", value_name = "K=V")]
    pub(super) env: Vec<String>,
    /// Initial size ROWSxCOLS (default: this terminal's size, else 24x80).
    #[arg(long, value_name = "ROWSxCOLS", allow_hyphen_values = true)]
    pub(super) size: Option<String>,
    /// Which attached client sets the size: latest or smallest.
    #[arg(long, default_value = "latest")]
    pub(super) size_policy: String,
    /// Print the new pane as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// The adapter (a directory under $BELFRY_ADAPTERS) that describes this harness.
    #[arg(long, value_name = "NAME")]
    pub(super) adapter: Option<String>,
    /// Declares the pane an agent with this DING delivery policy: aggressive or
    /// turn-boundary+fresh-idle. Without it (and without --adapter) nothing is ever typed
    /// into the pane: its mail stays in the inbox. --adapter alone means aggressive.
    #[arg(long, value_name = "TOKEN")]
    pub(super) ding_delivery: Option<String>,
    /// The DING adapter command (argv, repeat for each argument).
    #[arg(long = "ding-adapter", value_name = "ARG", allow_hyphen_values = true)]
    pub(super) ding_adapter: Vec<String>,
    /// The program and its arguments, after `--` (`belfry new NAME -- CMD ARG…`). Required
    /// by `new`; `run` without it starts $SHELL (else sh), and ignores it, saying so, when
    /// NAME exists.
    #[arg(last = true, value_name = "CMD")]
    pub(super) command: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub(super) struct RunArgs {
    #[command(flatten)]
    pub(super) new: NewArgs,
    /// The key that detaches: a prefix and a key ("C-b d") or one key ("C-q"); the prefix
    /// also leads the other bindings (inside tmux, whose prefix is C-b too: "C-a d").
    /// Default: the config file's, else "C-b d".
    #[arg(long, env = "BELFRY_DETACH")]
    pub(super) detach_key: Option<String>,
}

// No doc comment: the subcommand's about is the variant's.
#[derive(clap::Args, Debug)]
pub(super) struct InboxArgs {
    #[command(subcommand)]
    pub(super) action: crate::inbox::InboxCommand,
}

// No doc comment: the subcommand's about is the variant's.
#[derive(clap::Args, Debug)]
pub(super) struct WaitArgs {
    /// The pane to wait on.
    pub(super) name: String,
    /// Until the revision is at least N.
    #[arg(long, value_name = "N")]
    pub(super) revision: Option<u64>,
    /// Until the pane's program exits.
    #[arg(long)]
    pub(super) exit: bool,
    /// Until the screen matches this regular expression.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_screen_regex)]
    pub(super) regex: Option<String>,
    /// Until the revision has not changed for MS milliseconds (at most 86400000, a day).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(..=MAX_WAIT_MS))]
    pub(super) quiet_ms: Option<u64>,
    /// Until the program reports this state (OSC 7501), as `belfry ls` shows it.
    #[arg(long, value_name = "STATE", value_parser = ["idle", "working", "blocked", "done", "error"])]
    pub(super) status: Option<String>,
    /// Give up after MS milliseconds (at most 86400000, a day).
    #[arg(long, value_name = "MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(..=MAX_WAIT_MS))]
    pub(super) timeout_ms: u64,
    /// Print the pane's state as JSON when the wait ends.
    #[arg(long)]
    pub(super) json: bool,
}

// No doc comment: the subcommand's about is the variant's.
#[derive(clap::Args, Debug)]
pub(super) struct PeekArgs {
    /// The pane whose screen to print.
    pub(super) name: String,
    /// Rows with SGR attributes.
    #[arg(long)]
    pub(super) ansi: bool,
    /// Print the snapshot as JSON, with the `expect` token `send --expect` takes.
    #[arg(long)]
    pub(super) json: bool,
    /// Also print the last N lines of history.
    #[arg(long, value_name = "N")]
    pub(super) scrollback: Option<u64>,
    /// Include per-cell runs in --json output.
    #[arg(long)]
    pub(super) cells: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct SendArgs {
    /// The pane to send to.
    pub(super) name: String,
    /// Send only if the pane is still exactly as a `peek --json` saw it: pass that output's
    /// `expect` token (revision, incarnation and generation in one opaque string).
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["expect_revision", "expect_incarnation", "expect_generation"])]
    pub(super) expect: Option<String>,
    /// Send only if the pane is still at revision N, the `revision` of `peek --json` or `ls`.
    /// A revision is a 16-digit number: a pane host starts it at the wall clock in
    /// microseconds since 1970 (so a pane made again under the same name never repeats a
    /// revision of the old one) and it goes up by at least one on every output, input, resize
    /// and restart.
    #[arg(long, value_name = "N")]
    pub(super) expect_revision: Option<u64>,
    /// Send only if the pane's program is still incarnation I (new at every start).
    #[arg(long, value_name = "I")]
    pub(super) expect_incarnation: Option<String>,
    /// Send only if the pane's launch spec is still generation G.
    #[arg(long, value_name = "G")]
    pub(super) expect_generation: Option<String>,
    /// Paste TEXT (bracketed if the program enabled it). Steps run in the order given.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub(super) paste: Vec<String>,
    /// Type TEXT raw.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub(super) text: Vec<String>,
    /// Press a named key (Enter, Tab, Escape, C-c, Up, F1, …).
    #[arg(long, value_name = "KEY")]
    pub(super) key: Vec<String>,
    /// Pause with the input lock held (at most 2000 ms each, 5000 in all).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(..=MAX_DELAY_STEP_MS))]
    pub(super) delay_ms: Vec<u64>,
    /// Give up when the program has not read the input within MS ms in total (1..=60000,
    /// default 5000); the error says how many bytes were written.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=MAX_SEND_TIMEOUT_MS))]
    pub(super) timeout_ms: Option<u64>,
    /// Print the send's result as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

impl Command {
    /// The name of a subcommand that serves this machine only: the processes that serve it
    /// never go elsewhere, so a `BELFRY_HOST` in their environment is not for them, and
    /// `--host` on their command line is a mistake.
    pub(super) fn local_only(&self) -> Option<&'static str> {
        match self {
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
