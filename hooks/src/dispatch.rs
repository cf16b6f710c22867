//! One dispatch run (spec §8): stdin → hooks file → handler chain → turn-boundary notices →
//! spool → stdout.
//!
//! Every step that can fail turns its error into an `allow` whose reason is the error (the
//! fail-open rule), so the run as a whole cannot fail: [`run_dispatch`] returns a
//! [`DispatchOutput`], never a `Result`. The only denies come from handlers (a refusal, a JSON
//! deny, or a fail-closed handler failing). One configuration error is not an allow: a
//! `--native` dialect that does not exist exits non-zero (see [`DIALECT_ERROR_EXIT_CODE`]).
//!
//! With `--native`, the dialect's tool map gives the hook's tool its canonical class, which
//! the group matchers select on and which handlers see as `belfry.tool_class` in their stdin.
//!
//! Every run, answered or failed open, is one line of the call log when one is asked for
//! ([`crate::call_log`]), written once the answer is decided.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

use serde_json::{Map, Value};

use crate::call_log::{call_log_path, log_call, CallFacts};
use crate::error::Error;
use crate::handlers::{resolve_hooks_file, HooksFile};
use crate::matcher::ToolRef;
use crate::native::Dialect;
use crate::outcome::Outcome;
use crate::spool::spool_append;

/// Names the hooks file when [`DispatchOptions::hooks_file`] is `None`.
pub const HOOKS_FILE_ENV: &str = "BELFRY_HOOKS_FILE";
/// Names the spool when [`DispatchOptions::spool_path`] is `None`: the pane's hook-context
/// spool of the `BELFRY_*` contract ([`belfry_proto::PaneEnv::hook_context`]).
pub const HOOK_CONTEXT_ENV: &str = belfry_proto::env::HOOK_CONTEXT;
/// Names the dialects directory when [`DispatchOptions::dialects_dir`] is `None`.
pub const DIALECTS_ENV: &str = "BELFRY_DIALECTS";

/// The most hook stdin a dispatch reads. A hook's JSON carries at most a tool's input and
/// output; anything larger is not a hook and must not exhaust memory in front of a tool call.
pub const STDIN_CAP_BYTES: usize = 32 << 20;

/// How long a dispatch waits for the harness to write its hook JSON and close stdin.
pub const STDIN_DEADLINE: Duration = Duration::from_secs(5);

/// Overrides [`STDIN_DEADLINE`] in milliseconds (for slow machines and for tests).
pub const STDIN_DEADLINE_ENV: &str = "BELFRY_DISPATCH_STDIN_TIMEOUT_MS";

/// The exit code of a dispatch whose `--native` dialect cannot be loaded. Not 0, because a
/// silent allow would hide that no guard can answer in that harness's form; not 2, which every
/// harness reads as a block, because a configuration error must not stop the agent (spec §8
/// fail-open). The harnesses the adapters describe show 1 as a hook error or a warning.
pub const DIALECT_ERROR_EXIT_CODE: i32 = 1;

/// The top-level member dispatch adds to the stdin its handlers receive.
pub const HANDLER_INPUT_MEMBER: &str = "belfry";

/// What `belfry dispatch` was asked to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DispatchOptions {
    /// The semantic event (`before-tool`, `prompt-submit`, …): selects the hooks-file section.
    pub event: String,
    /// `--hooks-file`; `None` falls back to `$BELFRY_HOOKS_FILE`, and if that is unset or
    /// empty there is nothing to run.
    pub hooks_file: Option<PathBuf>,
    /// `--spool`: also append the context to the spool.
    pub spool: bool,
    /// The spool; `None` falls back to `$BELFRY_HOOK_CONTEXT`.
    pub spool_path: Option<PathBuf>,
    /// `--native DIALECT`: render the outcome in that dialect instead of the neutral JSON.
    pub native: Option<String>,
    /// Where `<name>.json` dialects live; `None` falls back to `$BELFRY_DIALECTS`, then to the
    /// dialects built into the crate.
    pub dialects_dir: Option<PathBuf>,
    /// Context lines added after the handlers' context. Not added to a deny, nor where the
    /// dialect carries no context. Turn-boundary notices (spec §7.5) do not come this way but
    /// through [`run_dispatch_claiming`], so that only the notices the harness will receive
    /// are claimed.
    pub extra_context: Vec<String>,
    /// The call log to append this run's line to; `None` falls back to
    /// `$BELFRY_DISPATCH_LOG`, and if that is unset or empty nothing is logged.
    pub call_log: Option<PathBuf>,
}

/// At a turn boundary: given the room left for context (UTF-16 code units, `usize::MAX` for no
/// cap), claims the notices that fit and returns their lines. It is asked only when the answer
/// is an allow whose context the harness accepts on this event.
pub type ClaimNotices<'a> = &'a mut dyn FnMut(usize) -> Vec<String>;

/// What the CLI writes and exits with.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "the output must be written to stdout/stderr and the process must exit with exit_code"]
pub struct DispatchOutput {
    /// Bytes for standard output: the neutral JSON object and a newline, or the dialect's.
    pub stdout: Vec<u8>,
    /// Bytes for standard error: empty in neutral mode; in native mode whatever the dialect puts
    /// there (and the error, if the dialect itself could not be loaded).
    pub stderr: Vec<u8>,
    /// The process exit code: 0 in neutral mode; the dialect's in native mode.
    pub exit_code: i32,
    /// The decision as delivered, for logging and the daemon's hook events.
    pub outcome: Outcome,
}

/// Runs one dispatch. Never panics and never fails: every internal error is an `allow` with the
/// error in the reason (spec §8 fail-open).
pub fn run_dispatch(opts: &DispatchOptions, stdin: &[u8]) -> DispatchOutput {
    run_dispatch_with_env(opts, Ok(stdin), &|name| std::env::var_os(name), None)
}

/// [`run_dispatch`] at a turn boundary (spec §7.5): once the handlers have answered, `claim`
/// is asked for the inbox notices that fit in what the harness will take, and their lines join
/// the context. It is not asked at all for a deny, or for an event on which the dialect carries
/// no context, so a message is never claimed for an answer that cannot deliver its notice.
pub fn run_dispatch_claiming(
    opts: &DispatchOptions,
    stdin: &[u8],
    claim: ClaimNotices<'_>,
) -> DispatchOutput {
    run_dispatch_with_env(opts, Ok(stdin), &|name| std::env::var_os(name), Some(claim))
}

/// The dispatch of a hook whose stdin could not be read ([`read_hook_stdin`] failed): no
/// handler runs and the answer is the fail-open `allow` with `error` as its reason, rendered
/// in the dialect when one was asked for, like every other answer.
pub fn run_dispatch_without_input(opts: &DispatchOptions, error: &Error) -> DispatchOutput {
    run_dispatch_with_env(opts, Err(error), &|name| std::env::var_os(name), None)
}

/// Reads a hook's stdin to its end, but never more than `cap` bytes and never for longer than
/// `deadline`.
///
/// spec §8: a harness that never closes the pipe, or sends without end, must not stall the
/// tool call behind the hook, so either is an error that the caller turns into fail-open with
/// [`run_dispatch_without_input`]. Each read waits in `poll(2)` for the time that is left, so
/// the deadline holds without a thread, and a writer that trickles bytes cannot extend it.
pub fn read_hook_stdin<R: Read + AsFd>(
    mut reader: R,
    cap: usize,
    deadline: Duration,
) -> Result<Vec<u8>, Error> {
    let until = Instant::now() + deadline;
    let not_closed = || Error::StdinNotClosed {
        waited_ms: deadline.as_millis(),
    };
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let remaining = until.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(not_closed());
        }
        let timeout = Timespec {
            tv_sec: remaining.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: remaining.subsec_nanos().into(),
        };
        let mut fds = [PollFd::new(&reader, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => return Err(not_closed()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(errno) => {
                return Err(Error::StdinRead {
                    source: errno.into(),
                })
            }
        }
        // Ready: this read returns data, or 0 at the end, without blocking.
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(read) => {
                bytes.extend_from_slice(&chunk[..read]);
                if bytes.len() > cap {
                    return Err(Error::StdinTooLarge { cap });
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(Error::StdinRead { source }),
        }
    }
}

/// The stdin deadline: [`STDIN_DEADLINE_ENV`] when it holds a positive number of
/// milliseconds, else [`STDIN_DEADLINE`].
pub fn stdin_deadline() -> Duration {
    std::env::var(STDIN_DEADLINE_ENV)
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(STDIN_DEADLINE, Duration::from_millis)
}

/// [`run_dispatch`] with the environment passed in, so tests need not change the process's.
pub(crate) fn run_dispatch_with_env(
    opts: &DispatchOptions,
    stdin: Result<&[u8], &Error>,
    env: &dyn Fn(&str) -> Option<OsString>,
    claim: Option<ClaimNotices<'_>>,
) -> DispatchOutput {
    // A panic is a bug, but a bug in the dispatcher must not block every tool call of the
    // harness, so it fails open like any other internal error.
    let (output, facts) = catch_unwind(AssertUnwindSafe(|| dispatch(opts, stdin, env, claim)))
        .unwrap_or_else(|_| {
            let output = neutral(Outcome::fail_open(
                &"internal error (panic); please report it with the hook input",
            ));
            (output, CallFacts::default())
        });
    if let Some(path) = call_log_path(opts, env) {
        log_call(&path, opts, &facts, &output);
    }
    output
}

fn dispatch(
    opts: &DispatchOptions,
    stdin: Result<&[u8], &Error>,
    env: &dyn Fn(&str) -> Option<OsString>,
    claim: Option<ClaimNotices<'_>>,
) -> (DispatchOutput, CallFacts) {
    // The dialect is loaded first: if it cannot be, no outcome could be delivered in the form
    // the harness reads, so nothing runs and the error goes to stderr with a non-zero exit.
    let dialect = match &opts.native {
        None => None,
        Some(name) => {
            let dir = opts
                .dialects_dir
                .clone()
                .or_else(|| env_path(env, DIALECTS_ENV));
            match Dialect::load(name, dir.as_deref()) {
                Ok(dialect) => Some(dialect),
                Err(err) => return (unrenderable(&err), CallFacts::default()),
            }
        }
    };
    let input = stdin.map(|bytes| (bytes, HookInput::parse(bytes)));
    let mut facts = CallFacts::default();
    let mut outcome = match &input {
        Ok((bytes, Ok(input))) => decide(opts, dialect.as_ref(), input, bytes, env, &mut facts),
        Ok((_, Err(err))) => Outcome::fail_open(err),
        Err(err) => Outcome::fail_open(err),
    };
    if outcome.decision == crate::Decision::Allow {
        add_context_lines(opts, dialect.as_ref(), claim, &mut outcome);
    }
    if opts.spool {
        spool_context(opts, env, &mut outcome);
    }
    let output = match dialect {
        None => neutral(outcome),
        Some(dialect) => {
            let hook_event_name = match &input {
                Ok((_, Ok(input))) => input.hook_event_name.as_str(),
                _ => "",
            };
            let rendered = dialect.render(&opts.event, hook_event_name, outcome);
            DispatchOutput {
                stdout: rendered.stdout,
                stderr: rendered.stderr,
                exit_code: rendered.exit_code,
                outcome: rendered.outcome,
            }
        }
    };
    (output, facts)
}

/// Adds [`DispatchOptions::extra_context`] and, at a turn boundary, the claimed notices to an
/// allow's context, but only where the harness takes context on this event (spec §7.5: a
/// message becomes hook-owned only when its notice is in an answer the harness accepts), and
/// only as many notices as the dialect's cap leaves room for.
fn add_context_lines(
    opts: &DispatchOptions,
    dialect: Option<&Dialect>,
    claim: Option<ClaimNotices<'_>>,
    outcome: &mut Outcome,
) {
    let capacity = match dialect {
        None => Some(usize::MAX),
        Some(dialect) => dialect.context_capacity(&opts.event),
    };
    let Some(capacity) = capacity else {
        return;
    };
    for line in &opts.extra_context {
        push_line(&mut outcome.context, line);
    }
    if let Some(claim) = claim {
        let used = outcome.context.encode_utf16().count();
        // A separating newline comes before the notices when there is context already.
        let room = capacity.saturating_sub(used + usize::from(used > 0));
        if room > 0 {
            for line in claim(room) {
                push_line(&mut outcome.context, &line);
            }
        }
    }
}

fn push_line(context: &mut String, line: &str) {
    if !context.is_empty() {
        context.push('\n');
    }
    context.push_str(line);
}

/// Loads the hooks file and runs the handlers that apply, noting in `facts` what the call
/// was about and how many handlers ran.
fn decide(
    opts: &DispatchOptions,
    dialect: Option<&Dialect>,
    input: &HookInput,
    stdin: &[u8],
    env: &dyn Fn(&str) -> Option<OsString>,
    facts: &mut CallFacts,
) -> Outcome {
    let native_name = input.tool_name.as_deref();
    // Without a dialect the stdin is already in the common shape, so its `tool_name` is the
    // class (spec §10); with one, the dialect's tool map says which class the native name is.
    let class = match dialect {
        None => native_name,
        Some(dialect) => native_name.and_then(|name| dialect.tool_class(name)),
    };
    facts.hook_event_name = Some(input.hook_event_name.clone()).filter(|name| !name.is_empty());
    facts.tool_name = input.tool_name.clone();
    facts.tool_class = class.map(str::to_string);
    if opts.event.is_empty() {
        return Outcome::fail_open(&"--event is empty; give a semantic event such as before-tool");
    }
    let Some(path) = resolve_hooks_file(opts.hooks_file.as_deref(), env(HOOKS_FILE_ENV)) else {
        return Outcome::allow_silently();
    };
    let hooks = match HooksFile::load(&path) {
        Ok(hooks) => hooks,
        Err(err) => return Outcome::fail_open(&err),
    };
    let tool = ToolRef { native_name, class };
    let groups: Vec<_> = hooks.groups_for(&opts.event, tool).collect();
    if groups.is_empty() {
        return Outcome::allow_silently();
    }
    let handler_stdin = with_tool_class(stdin, input, class);
    // Read-once guards, the guard brief and the project memory (issue 45): `session` decides
    // which groups fire and what belfry tells the model itself.
    let run = crate::session::GroupRun {
        event: &opts.event,
        session_id: input.session_id.as_deref(),
        source: input.source.as_deref(),
        is_compaction: dialect.is_some_and(|dialect| {
            dialect.is_compaction(&opts.event, input.source.as_deref().unwrap_or(""))
        }),
        carries_context: match dialect {
            None => true,
            Some(dialect) => dialect.context_capacity(&opts.event).is_some(),
        },
        stdin,
        handler_stdin: &handler_stdin,
        env,
    };
    let (outcome, ran) = crate::session::run_groups(&hooks, &groups, &run);
    facts.handlers = ran;
    outcome
}

/// The stdin handlers receive: the harness's bytes, untouched, with
/// `"belfry":{"tool_class":CLASS}` (`null` for a tool the map does not know) spliced in as the
/// first member when the hook names a tool. Splicing rather than re-serializing keeps unknown
/// fields, key order and number spelling as the harness wrote them. A stdin that already has a
/// top-level `belfry` member is passed on as it is: a second member of the name would be read
/// differently by different JSON parsers.
fn with_tool_class<'a>(
    stdin: &'a [u8],
    input: &HookInput,
    class: Option<&str>,
) -> std::borrow::Cow<'a, [u8]> {
    use std::borrow::Cow;
    if input.tool_name.is_none() || input.has_belfry_member {
        return Cow::Borrowed(stdin);
    }
    // The stdin parsed as one object, so its first non-whitespace byte is `{`.
    let Some(open) = stdin.iter().position(|b| *b == b'{') else {
        return Cow::Borrowed(stdin);
    };
    let empty = stdin[open + 1..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'}');
    let member = serde_json::json!({ "tool_class": class });
    let mut out = Vec::with_capacity(stdin.len() + 48);
    out.extend_from_slice(&stdin[..=open]);
    out.extend_from_slice(format!("\"{HANDLER_INPUT_MEMBER}\":{member}").as_bytes());
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(&stdin[open + 1..]);
    Cow::Owned(out)
}

/// spec §8 `--spool`: the context also goes to the spool. A failure is noted, never fatal.
fn spool_context(
    opts: &DispatchOptions,
    env: &dyn Fn(&str) -> Option<OsString>,
    outcome: &mut Outcome,
) {
    if outcome.context.is_empty() {
        return;
    }
    let path = opts
        .spool_path
        .clone()
        .or_else(|| env_path(env, HOOK_CONTEXT_ENV));
    let result = match path {
        Some(path) => spool_append(&path, &opts.event, &outcome.context),
        None => Err(Error::SpoolNotConfigured),
    };
    if let Err(err) = result {
        add_note(
            outcome,
            &format!("belfry dispatch: context not spooled: {err}"),
        );
    }
}

fn add_note(outcome: &mut Outcome, note: &str) {
    if !outcome.reason.is_empty() {
        outcome.reason.push('\n');
    }
    outcome.reason.push_str(note);
}

fn env_path(env: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Option<PathBuf> {
    env(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

fn neutral(outcome: Outcome) -> DispatchOutput {
    DispatchOutput {
        stdout: outcome.to_neutral_json_line(),
        stderr: Vec::new(),
        exit_code: 0,
        outcome,
    }
}

/// Native mode without a dialect: empty stdout, the error on stderr (naming the dialect and
/// the ones that exist) and [`DIALECT_ERROR_EXIT_CODE`]. No handler ran: there is no form in
/// which their answer could reach the harness.
fn unrenderable(err: &Error) -> DispatchOutput {
    let outcome = Outcome::fail_open(err);
    DispatchOutput {
        stdout: Vec::new(),
        stderr: format!("{}\n", outcome.reason).into_bytes(),
        exit_code: DIALECT_ERROR_EXIT_CODE,
        outcome,
    }
}

/// The fields of the common hook shape that dispatch itself reads. Everything else is only
/// passed on: handlers receive the original stdin bytes, not a re-serialization.
struct HookInput {
    tool_name: Option<String>,
    /// The harness's session, which keys and re-arms read-once guards (`crate::once`).
    session_id: Option<String>,
    /// Why a session started (`session-start`'s `source`), which may mean a compaction.
    source: Option<String>,
    hook_event_name: String,
    /// Whether the harness's object already has a top-level [`HANDLER_INPUT_MEMBER`].
    has_belfry_member: bool,
}

impl HookInput {
    fn parse(stdin: &[u8]) -> Result<HookInput, Error> {
        let object: Map<String, Value> =
            serde_json::from_slice(stdin).map_err(|err| Error::InvalidStdin {
                reason: err.to_string(),
            })?;
        let text = |field: &str| match object.get(field) {
            Some(Value::String(text)) => Some(text.clone()),
            _ => None,
        };
        Ok(HookInput {
            tool_name: text("tool_name"),
            session_id: text("session_id"),
            source: text("source"),
            hook_event_name: text("hook_event_name").unwrap_or_default(),
            has_belfry_member: object.contains_key(HANDLER_INPUT_MEMBER),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Decision;

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    fn options(event: &str) -> DispatchOptions {
        DispatchOptions {
            event: event.to_string(),
            ..DispatchOptions::default()
        }
    }

    #[test]
    fn no_hooks_file_anywhere_allows_with_empty_reason() {
        let output = run_dispatch_with_env(
            &options("before-tool"),
            Ok(br#"{"tool_name":"shell"}"#),
            &no_env,
            None,
        );
        assert_eq!(output.outcome, Outcome::allow_silently());
        assert_eq!(
            output.stdout,
            b"{\"decision\":\"allow\",\"reason\":\"\",\"context\":\"\"}\n"
        );
        assert_eq!(output.exit_code, 0);
    }

    #[test]
    fn hooks_file_env_is_the_fallback() {
        let env = |name: &str| {
            (name == HOOKS_FILE_ENV).then(|| OsString::from("/nonexistent/belfry/hooks.json"))
        };
        let output = run_dispatch_with_env(&options("before-tool"), Ok(b"{}"), &env, None);
        assert_eq!(output.outcome.decision, Decision::Allow);
        assert!(
            output
                .outcome
                .reason
                .contains("cannot read hooks file /nonexistent/belfry/hooks.json"),
            "{}",
            output.outcome.reason
        );
    }

    #[test]
    fn spool_without_path_is_noted_in_reason() {
        let mut outcome = Outcome {
            decision: Decision::Allow,
            reason: String::new(),
            context: "ctx".to_string(),
        };
        let opts = DispatchOptions {
            spool: true,
            ..options("before-tool")
        };
        spool_context(&opts, &no_env, &mut outcome);
        assert!(
            outcome.reason.contains("BELFRY_HOOK_CONTEXT"),
            "{}",
            outcome.reason
        );
        assert_eq!(outcome.context, "ctx");
    }

    #[test]
    fn hook_input_reads_only_string_fields() {
        let input = HookInput::parse(br#"{"tool_name":5,"hook_event_name":"X","other":[1]}"#);
        let Ok(input) = input else {
            panic!("an object with unknown fields was refused");
        };
        assert_eq!(input.tool_name, None);
        assert_eq!(input.hook_event_name, "X");
        for bad in [&b""[..], b"[]", b"{} {}", b"\"x\""] {
            assert!(HookInput::parse(bad).is_err(), "{bad:?}");
        }
    }
}
