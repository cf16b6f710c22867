//! How long each request may take before its caller gives up.
//!
//! Nothing in belfry waits forever on another process: a stopped (`SIGSTOP`) or hung daemon or
//! pane host must turn into a clear error, never a hang. There are two hops, and each has its own
//! deadline, computed from the request itself so every caller of an op agrees on it:
//!
//! - the daemon waits [`pane_reply`] for a pane host's reply to a request it forwards or makes;
//! - a client (the CLI) waits [`daemon_reply`] for the daemon's reply, which is always longer
//!   than what the daemon itself may spend (by [`CLIENT_MARGIN`]), so a slow pane host is reported
//!   by the daemon, naming the pane host, rather than by the client as a silent daemon.

use std::time::Duration;

use belfry_proto::limits::{
    DEFAULT_SEND_TIMEOUT_MS as DEFAULT_TIMEOUT_MS, DEFAULT_WAIT_MS, MAX_DELAY_TOTAL_MS,
    MAX_SEND_TIMEOUT_MS as MAX_TIMEOUT_MS,
};
use belfry_proto::request::{self, InputStep, Op};

/// How long a quick op (info, snapshot, resize, …) may take at a pane host.
pub const PANE_QUICK: Duration = Duration::from_secs(5);

/// How much longer a client waits than the daemon may spend on the same request.
pub const CLIENT_MARGIN: Duration = Duration::from_secs(5);

/// How long a client waits for an op the daemon answers itself (hello, list, attach, …).
pub const DAEMON_QUICK: Duration = Duration::from_secs(10);

/// How long the daemon's own DING worker may take to answer (`ding.status`, turn boundaries).
pub const DING_WORKER: Duration = Duration::from_secs(10);

/// How long a `kill` may take at the daemon: the pane host's reply, then up to 4 s for it to
/// exit (docs/protocol.md, "kill").
pub const KILL: Duration = Duration::from_secs(10);

/// How long a `spawn` may take at the daemon: a pane host has 15 s to announce itself, then two
/// probes of 2 s each.
pub const SPAWN: Duration = Duration::from_secs(25);

/// The sum of a send's own `delay_ms` steps, capped at the per-request limit (a request over the
/// limit is refused at once, so the cap never shortens a valid send).
fn own_delays(send: &request::Send) -> Duration {
    let total = send
        .input
        .iter()
        .filter_map(|step| match step {
            InputStep::DelayMs(ms) => Some(*ms),
            _ => None,
        })
        .fold(0u64, u64::saturating_add);
    Duration::from_millis(total.min(MAX_DELAY_TOTAL_MS))
}

/// A `send` request's own write timeout (`timeout_ms`, as the pane host applies it).
fn send_timeout(send: &request::Send) -> Duration {
    let ms = send.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    Duration::from_millis(ms.min(MAX_TIMEOUT_MS))
}

/// How long the daemon waits for a pane host's reply to `op`.
///
/// A `send` may wait for the input lock (at most `lock_wait` of its write timeout, spec §3),
/// then runs its own delays, and its writes may wait up to its write timeout for the program
/// to read; the pane host answers `timeout` itself when that runs out, so the daemon waits
/// longer than all of it. A `wait` lasts its own `timeout_ms`. A `restart` stops the old child
/// (SIGKILL after 1.5 s) before starting the new.
pub fn pane_reply(op: &Op) -> Duration {
    match op {
        Op::Send(send) => {
            let timeout = send_timeout(send);
            PANE_QUICK + lock_wait(timeout) + timeout + own_delays(send)
        }
        Op::Wait(wait) => PANE_QUICK.saturating_add(Duration::from_millis(
            wait.timeout_ms.unwrap_or(DEFAULT_WAIT_MS),
        )),
        Op::Restart(_) => PANE_QUICK * 2,
        _ => PANE_QUICK,
    }
}

/// How long a client waits for the daemon's reply to `op`.
pub fn daemon_reply(op: &Op) -> Duration {
    let own = match op {
        Op::Spawn(_) => SPAWN,
        Op::Kill(_) | Op::Shutdown(_) => KILL,
        Op::DingStatus(_) | Op::DingTurnBoundary(_) => DING_WORKER,
        Op::Hello(_)
        | Op::List(_)
        | Op::Attach(_)
        | Op::Subscribe(_)
        | Op::DingNudge(_)
        | Op::Hook(_) => return DAEMON_QUICK,
        _ => pane_reply(op),
    };
    own.saturating_add(CLIENT_MARGIN)
}

/// How long a transaction may wait for the input lock: its own write timeout plus the longest
/// delay another request may hold the lock for, so a transaction queued behind one that is
/// legitimately pausing does not give up, while one stuck behind a dead program does.
pub fn lock_wait(write_timeout: Duration) -> Duration {
    write_timeout + Duration::from_millis(MAX_DELAY_TOTAL_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn op(request: Value) -> Op {
        belfry_proto::Request::from_value(&request)
            .unwrap_or_else(|bad| panic!("{request}: {}", bad.message))
            .op
    }

    #[test]
    fn the_client_always_waits_longer_than_the_daemon_may_spend() {
        let requests = [
            json!({"op": "send", "input": [{"delay_ms": 2000}, {"delay_ms": 2000}]}),
            json!({"op": "send", "input": [{"delay_ms": u64::MAX}]}),
            json!({"op": "wait", "timeout_ms": 300}),
            json!({"op": "wait", "timeout_ms": u64::MAX}),
            json!({"op": "snapshot"}),
            json!({"op": "restart"}),
        ];
        for request in requests.map(op) {
            assert!(
                daemon_reply(&request) > pane_reply(&request),
                "{request:?}: client {:?} vs daemon {:?}",
                daemon_reply(&request),
                pane_reply(&request)
            );
        }
        assert!(daemon_reply(&op(json!({"op": "spawn", "session": "s", "argv": ["x"]}))) > SPAWN);
        assert!(daemon_reply(&op(json!({"op": "kill"}))) > KILL);
    }

    #[test]
    fn a_send_waits_for_one_transaction_ahead_plus_its_own_delays() {
        let quick = pane_reply(&op(json!({"op": "send", "input": [{"text": "x"}]})));
        let slow = pane_reply(&op(
            json!({"op": "send", "input": [{"delay_ms": 1500}, {"text": "x"}]}),
        ));
        let default = Duration::from_millis(DEFAULT_TIMEOUT_MS);
        assert_eq!(quick, PANE_QUICK + lock_wait(default) + default);
        assert_eq!(slow, quick + Duration::from_millis(1500));
        // The pane host answers a send's own timeout itself: the daemon waits longer.
        let long = pane_reply(&op(
            json!({"op": "send", "timeout_ms": 60_000, "input": [{"text": "x"}]}),
        ));
        let sixty = Duration::from_secs(60);
        assert!(long > lock_wait(sixty) + sixty, "{long:?}");
    }
}
