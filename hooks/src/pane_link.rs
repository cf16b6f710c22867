//! What `belfry dispatch` does when it runs inside a belfry pane (`$BELFRY_SESSION` set):
//! forward the hook event to the daemon's bus, and at a turn boundary claim unread inbox
//! messages for the harness's next context, or, at a turn stop the dialect can continue, make
//! them the reason the agent continues its turn (spec §7.5, §8).
//!
//! A claim has two steps. Before the answer is written, dispatch *reserves* the messages whose
//! notices it will carry (the pane's DING worker holds them: no PTY input, no other hook); once
//! the answer is on stdout it *confirms* them, and they become hook-owned; if writing failed it
//! *releases* them. A dispatch killed in between (a harness's hook timeout) confirms nothing,
//! and the worker lets the reservation lapse. So only messages the harness really received
//! become hook-owned.
//!
//! Everything is best effort and bounded: a daemon that is down or slow never delays or changes
//! the dispatcher's answer beyond leaving the notices unclaimed (and a turn stop uncontinued:
//! without the worker there is no cap on continuations, so none is made).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use belfry_ding::{notice, DeliveryState, Inbox, MessageName, OwnershipStore, SessionName};
use belfry_proto::reply::Claimed;
use belfry_proto::request::{ClaimPurpose, ClaimStep, DingTurnBoundary, Hook, PromptOrigin};
use belfry_proto::{Op, Reply, Request};
use belfry_transport::client::{send_and_wait, Client};

use crate::dispatch::{
    read_hook_stdin, run_dispatch, run_dispatch_claiming, run_dispatch_without_input,
    stdin_deadline, DispatchOptions, DispatchOutput, DIALECTS_ENV, STDIN_CAP_BYTES,
};
use crate::native::Dialect;
use crate::outcome::Decision;

/// The pane this dispatcher runs in: the protocol's `BELFRY_*` contract, read from the
/// environment with [`PaneEnv::from_env`].
pub use belfry_proto::PaneEnv;

/// How long dispatch waits on the daemon at most.
const DAEMON_TIMEOUT: Duration = Duration::from_millis(500);

/// The first line of a continuation's reason: what the agent is asked to do before it stops.
pub const CONTINUATION_HEADER: &str =
    "New mail arrived for you while you worked. Before you stop, read it (belfry inbox read) and act on it:";

/// The stdin field that holds a prompt in the common hook shape (spec §8).
const COMMON_PROMPT_FIELD: &str = "prompt";

/// Writes the answer where the harness reads it; `Err` when it could not be written whole.
pub type Deliver<'a> = &'a mut dyn FnMut(&DispatchOutput) -> std::io::Result<()>;

/// One `belfry dispatch` run, in its one order (spec §7.5, §8): read the hook's stdin (capped
/// and with a deadline), run the handlers; when the event is this pane's turn boundary and the
/// answer can carry context to the harness, reserve the inbox notices that fit and add them to
/// the context, or, at a turn stop the dialect can continue, make them the continuation's
/// reason; `deliver` the answer; confirm the reservation if it was delivered and release it if
/// not; then forward the event to the daemon's bus.
///
/// The notices are reserved after the handlers have answered and only for an allow on an event
/// whose dialect renders context (or a continuation) in a form the harness accepts, and only
/// as many as its cap leaves room for: a message becomes hook-owned only when its notice is in
/// an answer the harness took. The event is forwarded last, so that the bus sees it only once
/// it has been answered. A hook whose input never arrived whole is not forwarded: there is no
/// event to report. Outside a pane (no `$BELFRY_SESSION`) only the handlers run.
/// `turn_boundary` is `--turn-boundary`.
pub fn run_hook(
    options: DispatchOptions,
    turn_boundary: bool,
    deliver: Deliver<'_>,
) -> DispatchOutput {
    let stdin = read_hook_stdin(std::io::stdin(), STDIN_CAP_BYTES, stdin_deadline());
    let pane = PaneEnv::from_env();
    let dialect = load_dialect(&options, &|name| std::env::var_os(name));
    let mut claim: Option<Reservation> = None;
    let continuable = dialect
        .as_ref()
        .filter(|dialect| dialect.continuation_capacity(&options.event).is_some());
    let output = match (&stdin, &pane, continuable) {
        (Ok(stdin), Some(pane), Some(dialect)) if takes_mail_at_stops(pane, turn_boundary) => {
            continue_turn(&options, dialect, stdin, pane, &mut claim)
        }
        (Ok(stdin), Some(pane), _) if is_turn_boundary(pane, &options.event, turn_boundary) => {
            run_dispatch_claiming(&options, stdin, &mut |room| {
                reserve_notices(pane, room, ClaimPurpose::Context, &mut claim)
            })
        }
        (Ok(stdin), _, _) => run_dispatch(&options, stdin),
        (Err(err), _, _) => run_dispatch_without_input(&options, err),
    };
    let delivered = deliver(&output).is_ok();
    if let Some(claim) = claim {
        claim.settle(delivered);
    }
    if let (Some(pane), Ok(stdin)) = (&pane, &stdin) {
        let prompt_field = match (&options.native, &dialect) {
            (None, _) => Some(COMMON_PROMPT_FIELD),
            (Some(_), Some(dialect)) => dialect.prompt_field(),
            (Some(_), None) => None,
        };
        forward_event(pane, &options.event, stdin, prompt_field);
    }
    output
}

/// The `--native` dialect, loaded as the dispatch itself loads it; `None` without `--native`
/// or when it cannot be loaded (the dispatch then answers with the error).
fn load_dialect(
    options: &DispatchOptions,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Option<Dialect> {
    let name = options.native.as_deref()?;
    let dir = options.dialects_dir.clone().or_else(|| {
        env(DIALECTS_ENV)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    });
    Dialect::load(name, dir.as_deref()).ok()
}

/// True if `event` is a turn boundary: `--turn-boundary` was given, or the event is listed in
/// `$BELFRY_TURN_BOUNDARY_EVENTS` of the pane this process runs in.
pub fn is_turn_boundary(pane: &PaneEnv, event: &str, flag: bool) -> bool {
    flag || pane.is_turn_boundary(event)
}

/// spec §7.5: a turn stop the dialect can continue is continued with the pane's mail only when
/// the pane takes turn-boundary delivery at all: `--turn-boundary`, or turn-boundary events
/// declared by its adapter (`$BELFRY_TURN_BOUNDARY_EVENTS`).
fn takes_mail_at_stops(pane: &PaneEnv, flag: bool) -> bool {
    flag || pane
        .turn_boundary_events
        .as_deref()
        .is_some_and(|events| !events.trim().is_empty())
}

/// A turn stop: the handlers run as ever; if they let the turn stop and unread mail nobody owns
/// fits in the reason the harness takes, the answer becomes the dialect's "continue, because"
/// form with the notices (after the handlers' own context) as the reason. The pane's DING
/// worker decides whether this continuation is allowed (its cap of consecutive continuations,
/// spec §7.5); when it is not, the turn stops and the mail waits for the next tier.
fn continue_turn(
    options: &DispatchOptions,
    dialect: &Dialect,
    stdin: &[u8],
    pane: &PaneEnv,
    claim: &mut Option<Reservation>,
) -> DispatchOutput {
    let output = run_dispatch(options, stdin);
    // A handler that refused the stop has continued the turn with its own reason.
    if output.outcome.decision != Decision::Allow {
        return output;
    }
    let Some(cap) = dialect.continuation_capacity(&options.event) else {
        return output;
    };
    let mut reason = CONTINUATION_HEADER.to_string();
    if !output.outcome.context.is_empty() {
        reason.push('\n');
        reason.push_str(&output.outcome.context);
    }
    let used = reason.encode_utf16().count() + 1;
    let lines = reserve_notices(
        pane,
        cap.saturating_sub(used),
        ClaimPurpose::Continuation,
        claim,
    );
    if lines.is_empty() {
        return output;
    }
    for line in &lines {
        reason.push('\n');
        reason.push_str(line);
    }
    let hook_event_name = serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|input| input.get("hook_event_name")?.as_str().map(str::to_string))
        .unwrap_or_default();
    match dialect.render_continuation(&options.event, &hook_event_name, &reason) {
        Some(rendered) => DispatchOutput {
            stdout: rendered.stdout,
            stderr: rendered.stderr,
            exit_code: rendered.exit_code,
            outcome: rendered.outcome,
        },
        None => {
            // Unreachable (the capacity came from the same entry), but an answer without the
            // notices must not keep them reserved.
            if let Some(claim) = claim.take() {
                claim.settle(false);
            }
            output
        }
    }
}

/// Asks the daemon at `socket` one typed op through belfry's one client, every step bounded by
/// [`DAEMON_TIMEOUT`]. The client checks that the server runs as our uid or root before it
/// writes anything (spec §6.1: the claimed messages go only to a daemon of this user) and tries
/// the connect once, so a stopped daemon with a full backlog never holds up the harness.
/// `None` when no daemon of ours answered.
fn ask<T: serde::de::DeserializeOwned>(socket: &Path, op: impl Into<Op>) -> Option<Reply<T>> {
    Client::connect_once(socket, DAEMON_TIMEOUT)
        .and_then(|mut client| client.call::<T>(op))
        .ok()
}

/// Publishes the hook event on the daemon's bus (`hook` events) and gives it to the pane's DING
/// worker, waiting (within [`DAEMON_TIMEOUT`]) until the worker has applied it. A pane
/// whose `$BELFRY_SESSION` is not a session name has no bus to publish on: the daemon would
/// refuse the request, so it is not sent. At a prompt submit it also says who wrote the prompt
/// (in `prompt_field` of the stdin) and which staged notices it carries (see [`read_prompt`]).
pub fn forward_event(pane: &PaneEnv, event: &str, stdin: &[u8], prompt_field: Option<&str>) {
    let Ok(session) = SessionName::parse(&pane.session) else {
        return;
    };
    // The harness's own JSON: only its string fields are carried over, as it gave them.
    let input: Value = serde_json::from_slice(stdin).unwrap_or(Value::Null);
    let field = |name: &str| input.get(name).and_then(Value::as_str).map(str::to_string);
    let (prompt, notices) = match (event, prompt_field.and_then(&field)) {
        ("prompt-submit", Some(text)) => read_prompt(pane, &text),
        _ => (None, Vec::new()),
    };
    let hook = Hook {
        session: Some(session),
        hook: event.to_string(),
        source: field("source"),
        tool_name: field("tool_name"),
        hook_event_name: field("hook_event_name"),
        // Sent even when unknown (empty), as the bus has always carried it.
        incarnation: Some(pane.incarnation.clone().unwrap_or_default()),
        prompt,
        notices,
    };
    // The daemon answers once the pane's DING worker has applied the event, so a compaction or
    // a turn's start has ended the lease before the harness goes on with it; a slow daemon
    // holds the hook up no longer than DAEMON_TIMEOUT, and the event is applied when it gets
    // there.
    let _ = send_and_wait(&pane.socket, &Request::new(0, hook), DAEMON_TIMEOUT);
}

/// A submitted prompt, judged: `belfry` when it carries a DING notice (DING typed it, or a
/// continuation's reason became it), `user` otherwise (spec §7.5: the continuation cap resets
/// on a turn the user started); and the unread messages DING staged whose exact notice line it
/// carries, for the worker to record as `accepted` receipts (spec §7.4: only such proof marks a
/// staged notice delivered; without it the message stays `staged`).
fn read_prompt(pane: &PaneEnv, prompt: &str) -> (Option<PromptOrigin>, Vec<String>) {
    if !notice::carries_notice(prompt) {
        return (Some(PromptOrigin::User), Vec::new());
    }
    let mut carried = Vec::new();
    if let Some((state_dir, inbox)) = open_inbox(pane) {
        let unread = inbox.list_unread().unwrap_or_default();
        if let Ok(store) = OwnershipStore::open(&state_dir, inbox.session()) {
            for name in unread {
                if store.state_of(&name) != DeliveryState::Staged {
                    continue;
                }
                let front = inbox
                    .read(&name)
                    .map(|m| m.front_matter)
                    .unwrap_or_default();
                if prompt.contains(&notice::notice_line(&name, &front)) {
                    carried.push(name.as_str().to_string());
                }
            }
        }
    }
    (Some(PromptOrigin::Belfry), carried)
}

/// The pane's state directory and its existing inbox; `None` when it has none yet (a hook
/// only reads the inbox, and must not create it).
fn open_inbox(pane: &PaneEnv) -> Option<(PathBuf, Inbox)> {
    let inbox_dir = pane.inbox.as_ref()?;
    // <state>/inbox/<session>
    let state_dir = inbox_dir.parent().and_then(Path::parent)?;
    let inbox = Inbox::open_existing(state_dir, &pane.session).ok()?;
    Some((state_dir.to_path_buf(), inbox))
}

/// Messages this dispatch reserved with the pane's DING worker, to confirm once its answer is
/// written or release if it could not be.
pub struct Reservation {
    socket: PathBuf,
    session: SessionName,
    event: Value,
    claim: String,
    purpose: ClaimPurpose,
}

impl Reservation {
    /// Confirms (`delivered`) or releases the reservation. Bounded like every request to the
    /// daemon; one the daemon never hears of lapses there.
    pub fn settle(self, delivered: bool) {
        let step = if delivered {
            ClaimStep::Confirm
        } else {
            ClaimStep::Release
        };
        let settle = DingTurnBoundary {
            session: Some(self.session),
            event: self.event,
            step: Some(step),
            claim: Some(self.claim),
            purpose: Some(self.purpose),
        };
        let _ = ask::<Claimed>(&self.socket, settle);
    }
}

/// At a turn boundary: the notices of unread messages this dispatch now holds, at most `room`
/// UTF-16 code units of them joined by newlines (the room the harness's cap leaves). Only the
/// messages whose notices fit are offered to the daemon, oldest first, so a message is never
/// claimed for a notice that would be cut. The daemon decides which of those the hook may
/// reserve (none that DING already staged, none past the continuation cap) and `claim` gets the
/// reservation to settle. If it cannot be reached, a context claim returns those the ownership
/// file does not list and nothing is marked; a continuation returns nothing (no cap without it).
pub fn reserve_notices(
    pane: &PaneEnv,
    room: usize,
    purpose: ClaimPurpose,
    claim: &mut Option<Reservation>,
) -> Vec<String> {
    let Some((state_dir, inbox)) = open_inbox(pane) else {
        return Vec::new();
    };
    let mut unread = inbox.list_unread().unwrap_or_default();
    // Messages the ownership file already lists (staged by DING, or owned by an earlier
    // boundary) cannot be granted again, so they take no room. The daemon still decides.
    if let Ok(store) = OwnershipStore::open(&state_dir, inbox.session()) {
        unread = store.pending(&unread).into_iter().cloned().collect();
    }
    // The notice line of each message, and the messages whose lines fit in `room`.
    let mut lines = std::collections::HashMap::new();
    let mut used = 0usize;
    let mut offered = Vec::new();
    for name in unread {
        let front = inbox
            .read(&name)
            .map(|m| m.front_matter)
            .unwrap_or_default();
        let line = notice::notice_line(&name, &front);
        let cost = line.encode_utf16().count() + usize::from(used > 0);
        if used.saturating_add(cost) > room {
            break;
        }
        used += cost;
        lines.insert(name.clone(), line);
        offered.push(name);
    }
    if offered.is_empty() {
        return Vec::new();
    }
    let session = inbox.session().clone();
    // A protocol v1 turn-boundary event (spec §7.4), checked by the pane's DING worker.
    let event = json!({"v": 1, "kind": "turn-boundary", "session": pane.session,
        "incarnation": pane.incarnation.as_deref().unwrap_or_default(),
        "generation": pane.generation.as_deref().unwrap_or_default(),
        "sequence": belfry_ding::inbox::now_unix_ms(),
        "messages": offered.iter().map(MessageName::as_str).collect::<Vec<_>>()});
    let reserve = DingTurnBoundary {
        session: Some(session.clone()),
        event: event.clone(),
        step: Some(ClaimStep::Reserve),
        claim: None,
        purpose: Some(purpose),
    };
    let parse = |names: &[String]| -> Vec<MessageName> {
        names
            .iter()
            .filter_map(|name| MessageName::parse(name).ok())
            .collect()
    };
    let held: Vec<MessageName> = match ask::<Claimed>(&pane.socket, reserve) {
        Some(Reply::Ok(answer)) => match answer.claim {
            Some(id) if !answer.reserved.is_empty() => {
                let reserved = parse(&answer.reserved);
                let mut event = event;
                event["messages"] = json!(answer.reserved);
                *claim = Some(Reservation {
                    socket: pane.socket.clone(),
                    session: session.clone(),
                    event,
                    claim: id,
                    purpose,
                });
                reserved
            }
            // A daemon that does not know reservations owned them at once.
            _ => parse(&answer.hook_owned),
        },
        // Refused: nothing is claimed.
        Some(Reply::Err(_)) => Vec::new(),
        None if purpose == ClaimPurpose::Continuation => Vec::new(),
        None => {
            // No daemon: tell the agent about what nobody owns, and claim nothing.
            match OwnershipStore::open(&state_dir, &session) {
                Ok(store) => store.pending(&offered).into_iter().cloned().collect(),
                Err(_) => offered.clone(),
            }
        }
    };
    held.iter()
        .filter_map(|name| lines.get(name).cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use belfry_proto::request::Hello;
    use std::time::{Duration, Instant};

    /// One non-blocking connect, as a client of a stopped daemon makes: it fills the backlog.
    fn fill_one(path: &Path) -> std::io::Result<rustix::fd::OwnedFd> {
        use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
        let address = SocketAddrUnix::new(path)?;
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )?;
        rustix::net::connect(&fd, &address)?;
        Ok(fd)
    }

    #[test]
    fn a_daemon_with_a_full_backlog_never_blocks_dispatch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("full.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        // Fill the backlog of a listener that never accepts, as the clients of a stopped
        // daemon do; a further blocking connect(2) would wait with no deadline.
        let mut held = Vec::new();
        while let Ok(stream) = fill_one(&path) {
            held.push(stream);
            assert!(held.len() < 100_000, "the backlog never filled");
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let asked = path.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let reply = ask::<belfry_proto::reply::Hello>(&asked, Hello::default());
            let sent = send_and_wait(&asked, &Request::new(1, Hello::default()), DAEMON_TIMEOUT);
            let _ = tx.send((reply, sent.is_ok(), started.elapsed()));
        });
        let (reply, sent, took) = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("dispatch's daemon request blocked on a full backlog");
        assert!(reply.is_none(), "{reply:?}");
        assert!(!sent, "a request was written to a full backlog");
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
}
