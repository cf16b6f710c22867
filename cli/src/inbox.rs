//! `belfry inbox …` and `belfry presence`: the inbox is files on disk (spec §7.1), so these
//! work with or without a daemon; afterwards the daemon (if running) is nudged to look.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde_json::json;

use belfry_ding::presence::{Presence, PresenceState};
use belfry_ding::{FrontMatter, Inbox, MessageName};
use belfry_mux::client::{Client, ClientError};
use belfry_proto::reply::Nudged;
use belfry_proto::request::DingNudge;
use belfry_proto::SessionName;
use belfry_transport::paths;

use crate::exit::EXIT_OK;

/// `belfry inbox …`: parsed by clap and run by [`run`].
///
/// One rule for the session (the pane whose inbox it is): a positional argument, first after
/// the subcommand, optional, defaulting to `$BELFRY_SESSION` inside a pane. `post` is the one
/// command where it is required, since it names the recipient. `read` and `archive` also take
/// a message NAME after it; a lone argument ending in `.md` is that NAME. The older
/// `--session S` spelling still works where it existed (`read`, `archive`, `presence`), so
/// scripts written for it keep working; with it, a lone argument is the NAME, as it was.
#[derive(clap::Subcommand, Debug)]
pub enum InboxCommand {
    /// Post a message (body from FILE, or stdin with - or no FILE).
    Post {
        /// The pane to post to (required: the recipient).
        session: String,
        /// Who the message is from (shown in the notice).
        // Values may start with a dash (a subject such as "-x" is text, not a flag).
        #[arg(long, allow_hyphen_values = true)]
        from: Option<String>,
        /// The message's subject (shown in the notice).
        #[arg(long, allow_hyphen_values = true)]
        subject: Option<String>,
        /// The file holding the message body (default, or -: stdin).
        file: Option<PathBuf>,
        /// Print the posted message's session and name as JSON.
        #[arg(long)]
        json: bool,
        /// Post even when no pane, inbox or declared agent (./belfry.kdl) has this name: the
        /// message waits for a pane that will start under it. Without it such a name is
        /// refused as a likely typo.
        #[arg(long)]
        create: bool,
    },
    /// List unread messages, oldest first.
    Ls {
        /// The pane whose inbox to list (default: $BELFRY_SESSION).
        session: Option<String>,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a message and archive it (the oldest unread one if NAME is omitted).
    Read {
        /// The pane whose inbox to read (default: $BELFRY_SESSION); a lone NAME (ending in .md)
        /// reads that message of this pane's inbox.
        #[arg(value_name = "SESSION")]
        first: Option<String>,
        /// The message to read (`<unix-ms>-<rand6>.md`; default: the oldest unread one).
        #[arg(value_name = "NAME")]
        second: Option<String>,
        /// The pane whose inbox to read (the older spelling of SESSION).
        #[arg(long = "session", value_name = "SESSION")]
        session_flag: Option<String>,
        /// Print the message as JSON.
        #[arg(long, conflicts_with = "raw")]
        json: bool,
        /// Print the body's bytes as written, escape sequences included (by default control
        /// characters are shown as `\u{1b}`-style escapes, so a message cannot drive the
        /// terminal that reads it).
        #[arg(long)]
        raw: bool,
    },
    /// Archive a message without printing it.
    Archive {
        /// The pane whose inbox holds the message (default: $BELFRY_SESSION); a lone NAME
        /// (ending in .md) is a message of this pane's inbox.
        #[arg(value_name = "SESSION")]
        first: String,
        /// The message to archive (`<unix-ms>-<rand6>.md`).
        #[arg(value_name = "NAME")]
        second: Option<String>,
        /// The pane whose inbox holds the message (the older spelling of SESSION).
        #[arg(long = "session", value_name = "SESSION")]
        session_flag: Option<String>,
    },
}

/// The session of a command that also takes `--session`: the positional one or the flag's,
/// never two different ones, then `$BELFRY_SESSION`.
pub(crate) fn one_session(positional: Option<String>, flag: Option<String>) -> Result<String> {
    match (positional, flag) {
        (Some(positional), Some(flag)) if positional != flag => Err(anyhow!(
            "the session is given twice ({positional:?} and --session {flag:?}): give it once"
        )),
        (positional, flag) => session_or_env(positional.or(flag)),
    }
}

/// The session and message name of `read` and `archive` (`[SESSION] [NAME]`). One argument is
/// the NAME when `--session` is given (the older spelling, `read NAME --session S`) or when it
/// ends in `.md`, as every message name does; otherwise it is the SESSION.
fn session_and_name(
    first: Option<String>,
    second: Option<String>,
    flag: Option<String>,
) -> Result<(String, Option<String>)> {
    let (positional, name) = match (first, second) {
        (Some(session), Some(name)) => (Some(session), Some(name)),
        (Some(one), None) if flag.is_some() || one.ends_with(".md") => (None, Some(one)),
        (one, _) => (one, None),
    };
    Ok((one_session(positional, flag)?, name))
}

fn session_or_env(session: Option<String>) -> Result<String> {
    session
        .or_else(|| {
            std::env::var(belfry_proto::env::SESSION)
                .ok()
                .filter(|s| !s.is_empty())
        })
        .ok_or_else(|| {
            anyhow!("no session: name one or run inside a belfry pane ($BELFRY_SESSION)")
        })
}

/// Opens (creating it if needed) the inbox of `session`, for commands that write to it.
fn open(session: &str) -> Result<Inbox> {
    Ok(Inbox::open(&paths::state_dir(), session)?)
}

/// How long a nudge may delay its command: the nudge is only a hint.
const NUDGE_DEADLINE: Duration = Duration::from_secs(1);

/// Opens the inbox of `session` for commands that only read or move messages: an unknown
/// session is an error and nothing is created (spec §12: bad input has no side effects).
fn open_existing(session: &str) -> Result<Inbox> {
    Ok(Inbox::open_existing(&paths::state_dir(), session)?)
}

/// Unread messages, telling stderr about every entry of `new/` that has a message name but is
/// not a message file (a link, a hard-linked file), so that a missing message is explained.
fn unread(inbox: &Inbox) -> Result<Vec<MessageName>> {
    let scan = inbox.scan_unread()?;
    for refused in &scan.refused {
        eprintln!(
            "belfry: skipping {}: {}",
            refused.path.display(),
            refused.reason
        );
    }
    Ok(scan.unread)
}

/// Tells a running daemon to look at the inbox now. A daemon that is not running will find the
/// message when it starts: the inbox is the authority, not the nudge. A daemon that does not
/// answer (stopped, hung) costs at most [`NUDGE_DEADLINE`] and a note on stderr; the command
/// itself has already succeeded on disk.
fn nudge(session: &str) {
    // The inbox was opened under this name, so it is one; a daemon has no worker for any other.
    let Ok(session) = SessionName::parse(session) else {
        return;
    };
    let answered = Client::connect_within(&paths::daemon_socket(), NUDGE_DEADLINE)
        .and_then(|mut client| client.call::<Nudged>(DingNudge::of(session)));
    if let Err(err @ ClientError::Timeout { .. }) = answered {
        eprintln!("belfry: note: {err}; the inbox on disk is up to date and the daemon reads it when it looks again");
    }
}

/// Whether `session` is a recipient `inbox post` knows: a pane has run under it (every pane
/// gets its inbox when it starts, so an inbox there is the cheap proof, and a posted-to name
/// has one too), a pane record names it, or ./belfry.kdl declares it. Otherwise the post is
/// refused (exit 1) naming the near names there are: a misspelt recipient used to get an
/// inbox of its own, where nobody would ever read the message.
fn known_recipient(session: &str) -> Result<()> {
    let state = paths::state_dir();
    match Inbox::open_existing(&state, session) {
        Ok(_) => return Ok(()),
        Err(belfry_ding::Error::NoInbox { .. }) => {}
        Err(err) => return Err(err.into()),
    }
    let runtime = paths::runtime_dir();
    if paths::pane_record(&runtime, session).exists() {
        return Ok(());
    }
    let declared: Vec<String> = belfry_mux::declare::load(std::path::Path::new("belfry.kdl"))
        .map(|decls| decls.agents.into_iter().map(|agent| agent.name).collect())
        .unwrap_or_default();
    if declared.iter().any(|name| name == session) {
        return Ok(());
    }
    let mut known = declared;
    for dir in [state.join("inbox"), paths::panes_dir(&runtime)] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            known.extend(entries.flatten().filter_map(|entry| {
                let name = entry.file_name().to_str()?.to_string();
                Some(name.strip_suffix(".json").unwrap_or(&name).to_string())
            }));
        }
    }
    known.retain(|name| SessionName::parse(name).is_ok());
    known.sort();
    known.dedup();
    let near = near_names(session, &known);
    let hint = match near.as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean {one}?)"),
        many => format!(" (did you mean one of {}?)", many.join(", ")),
    };
    Err(crate::cmd::NotFound(format!(
        "no pane, inbox or declared agent is named {session}{hint}: nothing was posted; \
         `belfry inbox post {session} --create …` posts it anyway, for a pane that will start \
         under that name"
    ))
    .into())
}

/// The names within two edits of `name` (case ignored), nearest first.
fn near_names(name: &str, known: &[String]) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut near: Vec<(usize, &String)> = known
        .iter()
        .map(|candidate| {
            (
                belfry_mux::declare::edit_distance(&lower, &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|(distance, _)| *distance <= 2)
        .collect();
    near.sort();
    near.into_iter()
        .take(3)
        .map(|(_, candidate)| candidate.clone())
        .collect()
}

fn parse_name(name: &str) -> Result<MessageName> {
    Ok(MessageName::parse(name)?)
}

/// Runs one `belfry inbox` subcommand on this machine's inboxes.
pub fn run(command: InboxCommand) -> Result<i32> {
    match command {
        InboxCommand::Post {
            session,
            from,
            subject,
            file,
            json,
            create,
        } => post(session, from, subject, file, json, create),
        InboxCommand::Ls { session, json } => ls(session, json),
        InboxCommand::Read {
            first,
            second,
            session_flag,
            json,
            raw,
        } => read(first, second, session_flag, json, raw),
        InboxCommand::Archive {
            first,
            second,
            session_flag,
        } => archive(first, second, session_flag),
    }
}

/// `belfry inbox post`: checks the recipient (unless `--create`), reads the body (FILE or
/// stdin), posts it, says its name, then nudges the pane.
fn post(
    session: String,
    from: Option<String>,
    subject: Option<String>,
    file: Option<PathBuf>,
    json: bool,
    create: bool,
) -> Result<i32> {
    if !create {
        known_recipient(&session)?;
    }
    let inbox = open(&session)?;
    let mut body = String::new();
    match file.as_deref() {
        Some(path) if path.as_os_str() != "-" => {
            body = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read message file {}", path.display()))?;
        }
        _ => {
            if std::io::stdin().is_terminal() {
                // Reading a terminal waits for the person at it: say for what, or the
                // command looks hung.
                eprintln!(
                    "belfry: type the message to {session}, then Ctrl-D on a line of \
                     its own to post it (Ctrl-C: post nothing); or give FILE"
                );
            }
            std::io::stdin()
                .read_to_string(&mut body)
                .context("cannot read the message from stdin")?;
        }
    }
    let front = FrontMatter {
        from,
        subject,
        ..FrontMatter::default()
    };
    let name = inbox.post(&front, &body)?;
    // The message is durable now: say so before the (best-effort) nudge.
    if json {
        println!("{}", json!({"session": session, "name": name.as_str()}));
    } else {
        println!("{}", name.as_str());
    }
    nudge(&session);
    Ok(EXIT_OK)
}

/// `belfry inbox ls`: the unread messages of an inbox, which listing never creates.
fn ls(session: Option<String>, json: bool) -> Result<i32> {
    let session = session_or_env(session)?;
    // An inbox nothing was ever posted to has no unread message; listing it must not
    // create it.
    let (inbox, unread) = match Inbox::open_existing(&paths::state_dir(), &session) {
        Ok(inbox) => {
            let unread = unread(&inbox)?;
            (Some(inbox), unread)
        }
        Err(belfry_ding::Error::NoInbox { .. }) => (None, Vec::new()),
        Err(err) => return Err(err.into()),
    };
    let front_matter = |name: &MessageName| {
        inbox
            .as_ref()
            .and_then(|inbox| inbox.read(name).ok())
            .map(|message| message.front_matter)
            .unwrap_or_default()
    };
    if json {
        let list: Vec<_> = unread
            .iter()
            .map(|name| {
                let front = front_matter(name);
                json!({"name": name.as_str(), "from": front.from, "subject": front.subject})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        let now = crate::human::now_unix_ms();
        for name in &unread {
            let front = front_matter(name);
            println!(
                "{}  {}  (from {}, {})",
                name.as_str(),
                belfry_ding::notice::display_subject(&front),
                belfry_ding::notice::display_sender(&front),
                written(name, now)
            );
        }
    }
    Ok(EXIT_OK)
}

/// `belfry inbox read`: prints the first unread (or the named) message, escaped unless
/// `--raw`, then archives it and nudges the pane.
fn read(
    first: Option<String>,
    second: Option<String>,
    session_flag: Option<String>,
    json: bool,
    raw: bool,
) -> Result<i32> {
    let (session, name) = session_and_name(first, second, session_flag)?;
    let inbox = open_existing(&session)?;
    let name = match name {
        Some(name) => parse_name(&name)?,
        None => unread(&inbox)?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("inbox of {session:?} has no unread message"))?,
    };
    let message = inbox.read(&name)?;
    if json {
        println!(
            "{}",
            json!({"name": name.as_str(), "from": message.front_matter.from,
                   "subject": message.front_matter.subject, "body": message.body})
        );
    } else {
        println!(
            "From: {}",
            belfry_ding::notice::display_sender(&message.front_matter)
        );
        println!(
            "Subject: {}",
            belfry_ding::notice::display_subject(&message.front_matter)
        );
        println!("Date: {}", written(&name, crate::human::now_unix_ms()));
        println!("Id: {}\n", name.id());
        let body = if raw {
            message.body
        } else {
            escape_body(&message.body)
        };
        print!("{body}");
        if !body.ends_with('\n') {
            println!();
        }
    }
    inbox.archive(&name)?;
    nudge(&session);
    Ok(EXIT_OK)
}

/// `belfry inbox archive`: archives the named message without printing it.
fn archive(first: String, second: Option<String>, session_flag: Option<String>) -> Result<i32> {
    let (session, name) = session_and_name(Some(first), second, session_flag)?;
    let name = name.ok_or_else(|| {
        anyhow!("no message named: give NAME (`belfry inbox archive [SESSION] NAME`)")
    })?;
    let inbox = open_existing(&session)?;
    let name = parse_name(&name)?;
    inbox.archive(&name)?;
    nudge(&session);
    println!("archived {}", name.as_str());
    Ok(EXIT_OK)
}

/// A message body made safe to print on a terminal: every control character but a newline
/// and a tab (and a carriage return just before a newline) is shown as `\u{…}` instead of
/// acting, as are the bidirectional controls that reorder text, so a sender's `ESC ] 0 ;`
/// title, SGR colours or `ESC ] 52 ;` clipboard write reach the reader as text. Everything
/// else, backslashes and emoji joiners included, is left as written. This is done whether or
/// not stdout is a terminal: most often it is a pipe to a harness's tool call or a pager whose
/// output ends on a terminal anyway (see docs/decisions.md); `--raw` keeps the bytes.
fn escape_body(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => out.push(c),
            c if c.is_control() || is_bidi_control(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// The embedding, override and isolate controls, which make text read in another order than
/// it is written (the "Trojan Source" characters).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// When a message was written, as a person reads it (`14:02:11 (3 s ago)`): its name starts
/// with the Unix ms it was written at.
fn written(name: &MessageName, now_ms: u64) -> String {
    name.as_str()
        .split('-')
        .next()
        .and_then(|ms| ms.parse::<u64>().ok())
        .map_or_else(
            || "at an unknown time".to_string(),
            |ms| crate::human::when(ms, now_ms),
        )
}

pub fn presence(state: &str, session: Option<String>, flag: Option<String>) -> Result<i32> {
    let session = one_session(session, flag)?;
    let state: PresenceState = state.parse()?;
    let inbox = open(&session)?;
    Presence {
        state,
        since_unix_ms: belfry_ding::inbox::now_unix_ms(),
    }
    .store(&inbox)?;
    nudge(&session);
    println!("{session}: {}", state.as_str());
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::escape_body;

    #[test]
    fn a_body_keeps_its_lines_and_tabs_and_shows_every_other_control_as_an_escape() {
        assert_eq!(
            escape_body("a\tb\r\nc\n\u{1b}]0;x\u{7}\u{1b}[31m\u{9b}2J\rd\u{7f}\u{202e}e \\ \u{1f468}\u{200d}\u{1f469}"),
            "a\tb\r\nc\n\\u{1b}]0;x\\u{7}\\u{1b}[31m\\u{9b}2J\\u{d}d\\u{7f}\\u{202e}e \\ \u{1f468}\u{200d}\u{1f469}"
        );
    }
}
