//! What `belfry dispatch` does when it runs inside a belfry pane (`$BELFRY_SESSION` set):
//! forward the hook event to the daemon's bus, and at a turn boundary claim unread inbox
//! messages for the harness's next context (SPEC §7.5, §8).
//!
//! Both are best effort and bounded: a daemon that is down or slow never delays or changes the
//! dispatcher's answer beyond leaving the notices unclaimed.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use belfry_ding::{notice, Inbox, MessageName, OwnershipStore, SessionName};
use belfry_proto::reply::Claimed;
use belfry_proto::request::{DingTurnBoundary, Hook};
use belfry_proto::{Reply, Request};

use crate::dispatch::{
    read_hook_stdin, run_dispatch, run_dispatch_without_input, stdin_deadline, DispatchOptions,
    DispatchOutput, STDIN_CAP_BYTES,
};

/// The pane this dispatcher runs in: the protocol's `BELFRY_*` contract, read from the
/// environment with [`PaneEnv::from_env`].
pub use belfry_proto::PaneEnv;

/// How long dispatch waits on the daemon at most.
const DAEMON_TIMEOUT: Duration = Duration::from_millis(500);

/// One `belfry dispatch` run, in its one order (SPEC §7.5, §8): read the hook's stdin (capped
/// and with a deadline), claim the inbox notices when the event is this pane's turn boundary,
/// run the handlers with those notices as extra context, then forward the event to the
/// daemon's bus. The CLI writes the output and exits with its code.
///
/// The notices are claimed before the handlers run so that they join this answer's context;
/// the event is forwarded after, so that the bus sees it only once it has been answered. A hook
/// whose input never arrived whole is not forwarded: there is no event to report. Outside a
/// pane (no `$BELFRY_SESSION`) only the handlers run. `turn_boundary` is `--turn-boundary`.
pub fn run_hook(mut options: DispatchOptions, turn_boundary: bool) -> DispatchOutput {
    let stdin = read_hook_stdin(std::io::stdin(), STDIN_CAP_BYTES, stdin_deadline());
    let pane = PaneEnv::from_env();
    if let Some(pane) = &pane {
        if is_turn_boundary(&options.event, turn_boundary) {
            options.extra_context = turn_boundary_notices(pane);
        }
    }
    let output = match &stdin {
        Ok(stdin) => run_dispatch(&options, stdin),
        Err(err) => run_dispatch_without_input(&options, err),
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

/// True if the process serving a connected socket runs as our uid or root. SPEC §6.1: the
/// event and the claimed messages go only to a daemon of this user, never to a socket another
/// uid planted at `$BELFRY_SOCKET` (the core's `paths::check_server` makes the same check; this
/// crate does not depend on it).
fn server_is_ours(stream: &UnixStream) -> bool {
    let ours = rustix::process::getuid().as_raw();
    rustix::net::sockopt::socket_peercred(stream)
        .map(|cred| cred.uid.as_raw() == ours || cred.uid.is_root())
        .unwrap_or(false)
}

/// Connects without ever blocking: a daemon that is stopped while clients keep trying has a
/// full listen backlog, and a blocking connect(2) to it would wait with no deadline, holding
/// up the harness's tool call. A non-blocking connect fails at once instead (EAGAIN), which is
/// treated like no daemon at all.
fn connect_now(socket: &Path) -> Option<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let address = SocketAddrUnix::new(socket).ok()?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .ok()?;
    rustix::net::connect(&fd, &address).ok()?;
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false).ok()?;
    Some(stream)
}

/// Sends one request to the daemon at `socket` and, if `want_reply`, reads the reply line.
fn request(socket: &Path, request: &Request, want_reply: bool) -> Option<Value> {
    let stream = connect_now(socket)?;
    if !server_is_ours(&stream) {
        return None;
    }
    stream.set_read_timeout(Some(DAEMON_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(DAEMON_TIMEOUT)).ok()?;
    let mut writer = stream.try_clone().ok()?;
    writer.write_all(&request.to_line()).ok()?;
    if !want_reply {
        return None;
    }
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
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
    let _ = request(&pane.socket, &Request::new(0, hook), false);
}

/// At a turn boundary: the notices of unread messages the hook now owns. The daemon decides
/// which messages the hook may claim (none that DING already staged); if it cannot be reached,
/// every unread message the ownership file does not list is returned and nothing is marked.
pub fn turn_boundary_notices(pane: &PaneEnv) -> Vec<String> {
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
    let unread = inbox.list_unread().unwrap_or_default();
    if unread.is_empty() {
        return Vec::new();
    }
    let session = inbox.session().clone();
    // A protocol v1 turn-boundary event (SPEC §7.4), checked by the pane's DING worker.
    let event = json!({"v": 1, "kind": "turn-boundary", "session": pane.session,
        "incarnation": pane.incarnation.as_deref().unwrap_or_default(),
        "generation": pane.generation.as_deref().unwrap_or_default(),
        "sequence": belfry_ding::inbox::now_unix_ms(),
        "messages": unread.iter().map(MessageName::as_str).collect::<Vec<_>>()});
    let claim = Request::new(
        0,
        DingTurnBoundary {
            session: Some(session.clone()),
            event,
        },
    );
    let claimed: Vec<MessageName> = match request(&pane.socket, &claim, true) {
        Some(reply) => match Reply::<Claimed>::read(&reply) {
            Ok(Reply::Ok(claimed)) => claimed
                .hook_owned
                .iter()
                .filter_map(|name| MessageName::parse(name).ok())
                .collect(),
            // Refused, or not a reply: nothing is claimed.
            _ => Vec::new(),
        },
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
        .map(|name| {
            let front = inbox.read(name).map(|m| m.front_matter).unwrap_or_default();
            notice::notice_line(name, &front)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_daemon_with_a_full_backlog_never_blocks_dispatch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("full.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        // Fill the backlog of a listener that never accepts, as the clients of a stopped
        // daemon do; a further blocking connect(2) would wait with no deadline.
        let mut held = Vec::new();
        while let Some(stream) = connect_now(&path) {
            held.push(stream);
            assert!(held.len() < 100_000, "the backlog never filled");
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let asked = path.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let hello = Request::new(1, belfry_proto::request::Hello::default());
            let reply = request(&asked, &hello, true);
            let _ = tx.send((reply, started.elapsed()));
        });
        let (reply, took) = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("dispatch's daemon request blocked on a full backlog");
        assert!(reply.is_none(), "{reply:?}");
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
}
