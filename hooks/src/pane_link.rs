//! What `belfry dispatch` does when it runs inside a belfry pane (`$BELFRY_SESSION` set):
//! forward the hook event to the daemon's bus, and at a turn boundary claim unread inbox
//! messages for the harness's next context (spec §7.5, §8).
//!
//! Both are best effort and bounded: a daemon that is down or slow never delays or changes the
//! dispatcher's answer beyond leaving the notices unclaimed.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use belfry_ding::{notice, Inbox, MessageName, OwnershipStore, SessionName};
use belfry_proto::reply::Claimed;
use belfry_proto::request::{DingTurnBoundary, Hook};
use belfry_proto::{Op, Reply, Request};
use belfry_pty::client::{send_only, Client};

use crate::dispatch::{
    read_hook_stdin, run_dispatch, run_dispatch_claiming, run_dispatch_without_input,
    stdin_deadline, DispatchOptions, DispatchOutput, STDIN_CAP_BYTES,
};

/// The pane this dispatcher runs in: the protocol's `BELFRY_*` contract, read from the
/// environment with [`PaneEnv::from_env`].
pub use belfry_proto::PaneEnv;

/// How long dispatch waits on the daemon at most.
const DAEMON_TIMEOUT: Duration = Duration::from_millis(500);

/// One `belfry dispatch` run, in its one order (spec §7.5, §8): read the hook's stdin (capped
/// and with a deadline), run the handlers, then, when the event is this pane's turn boundary
/// and the answer can carry context to the harness, claim the inbox notices that fit and add
/// them to the context, then forward the event to the daemon's bus. The CLI writes the output
/// and exits with its code.
///
/// The notices are claimed after the handlers have answered and only through
/// [`run_dispatch_claiming`], which asks for them only for an allow on an event whose dialect
/// renders context in a form the harness accepts, and only for as many as its cap leaves room
/// for: a message becomes hook-owned only when its notice is in an answer the harness will
/// take. The event is forwarded last, so that the bus sees it only once it has been answered.
/// A hook whose input never arrived whole is not forwarded: there is no event to report.
/// Outside a pane (no `$BELFRY_SESSION`) only the handlers run. `turn_boundary` is
/// `--turn-boundary`.
pub fn run_hook(options: DispatchOptions, turn_boundary: bool) -> DispatchOutput {
    let stdin = read_hook_stdin(std::io::stdin(), STDIN_CAP_BYTES, stdin_deadline());
    let pane = PaneEnv::from_env();
    let boundary_pane = pane
        .as_ref()
        .filter(|_| is_turn_boundary(&options.event, turn_boundary));
    let output = match (&stdin, boundary_pane) {
        (Ok(stdin), Some(pane)) => run_dispatch_claiming(&options, stdin, &mut |room| {
            turn_boundary_notices(pane, room)
        }),
        (Ok(stdin), None) => run_dispatch(&options, stdin),
        (Err(err), _) => run_dispatch_without_input(&options, err),
    };
    if let (Some(pane), Ok(stdin)) = (&pane, &stdin) {
        forward_event(pane, &options.event, stdin);
    }
    output
}

/// True if `event` is a turn boundary: `--turn-boundary` was given, or the event is listed in
/// `$BELFRY_TURN_BOUNDARY_EVENTS` of the pane this process runs in.
pub fn is_turn_boundary(event: &str, flag: bool) -> bool {
    flag || PaneEnv::from_env().is_some_and(|pane| pane.is_turn_boundary(event))
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

/// Publishes the hook event on the daemon's bus (`hook` events), without waiting. A pane
/// whose `$BELFRY_SESSION` is not a session name has no bus to publish on: the daemon would
/// refuse the request, so it is not sent.
pub fn forward_event(pane: &PaneEnv, event: &str, stdin: &[u8]) {
    let Ok(session) = SessionName::parse(&pane.session) else {
        return;
    };
    // The harness's own JSON: only its string fields are carried over, as it gave them.
    let input: Value = serde_json::from_slice(stdin).unwrap_or(Value::Null);
    let field = |name: &str| input.get(name).and_then(Value::as_str).map(str::to_string);
    let hook = Hook {
        session: Some(session),
        hook: event.to_string(),
        source: field("source"),
        tool_name: field("tool_name"),
        hook_event_name: field("hook_event_name"),
        // Sent even when unknown (empty), as the bus has always carried it.
        incarnation: Some(pane.incarnation.clone().unwrap_or_default()),
    };
    // Fire and forget: the bus needs no answer, and a slow daemon must not hold up the hook.
    let _ = send_only(&pane.socket, &Request::new(0, hook), DAEMON_TIMEOUT);
}

/// At a turn boundary: the notices of unread messages the hook now owns, at most `room` UTF-16
/// code units of them joined by newlines (the room the harness's context cap leaves). Only the
/// messages whose notices fit are offered to the daemon, oldest first, so a message is never
/// claimed for a notice that would be cut. The daemon decides which of those the hook may claim
/// (none that DING already staged); if it cannot be reached, those the ownership file does not
/// list are returned and nothing is marked.
pub fn turn_boundary_notices(pane: &PaneEnv, room: usize) -> Vec<String> {
    let Some(inbox_dir) = &pane.inbox else {
        return Vec::new();
    };
    // <state>/inbox/<session>
    let Some(state_dir) = inbox_dir.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    // A hook only reads the inbox: one that does not exist has nothing to announce, and a
    // turn boundary must not create it.
    let Ok(inbox) = Inbox::open_existing(state_dir, &pane.session) else {
        return Vec::new();
    };
    let mut unread = inbox.list_unread().unwrap_or_default();
    // Messages the ownership file already lists (staged by DING, or owned by an earlier
    // boundary) cannot be granted again, so they take no room. The daemon still decides.
    if let Ok(store) = OwnershipStore::open(state_dir, inbox.session()) {
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
    let unread = offered;
    if unread.is_empty() {
        return Vec::new();
    }
    let session = inbox.session().clone();
    // A protocol v1 turn-boundary event (spec §7.4), checked by the pane's DING worker.
    let event = json!({"v": 1, "kind": "turn-boundary", "session": pane.session,
        "incarnation": pane.incarnation.as_deref().unwrap_or_default(),
        "generation": pane.generation.as_deref().unwrap_or_default(),
        "sequence": belfry_ding::inbox::now_unix_ms(),
        "messages": unread.iter().map(MessageName::as_str).collect::<Vec<_>>()});
    let claim = DingTurnBoundary {
        session: Some(session.clone()),
        event,
    };
    let claimed: Vec<MessageName> = match ask::<Claimed>(&pane.socket, claim) {
        Some(Reply::Ok(claimed)) => claimed
            .hook_owned
            .iter()
            .filter_map(|name| MessageName::parse(name).ok())
            .collect(),
        // Refused: nothing is claimed.
        Some(Reply::Err(_)) => Vec::new(),
        None => {
            // No daemon: tell the agent about what nobody owns, and claim nothing.
            match OwnershipStore::open(state_dir, &session) {
                Ok(store) => store.pending(&unread).into_iter().cloned().collect(),
                Err(_) => unread.clone(),
            }
        }
    };
    claimed
        .iter()
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
            let sent = send_only(&asked, &Request::new(1, Hello::default()), DAEMON_TIMEOUT);
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
