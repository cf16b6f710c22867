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

use belfry_pty::input::{DEFAULT_TIMEOUT_MS, MAX_DELAY_TOTAL_MS, MAX_TIMEOUT_MS};
use belfry_pty::pane::lock_wait;
use serde_json::Value;

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

/// The op of a request object, or `""`.
fn op(request: &Value) -> &str {
    request
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The sum of a send's own `delay_ms` steps, capped at the per-request limit (a request over the
/// limit is refused at once, so the cap never shortens a valid send).
fn own_delays(request: &Value) -> Duration {
    let total: u64 = request
        .get("input")
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .filter_map(|step| step.get("delay_ms").and_then(Value::as_u64))
                .fold(0u64, u64::saturating_add)
        })
        .unwrap_or(0);
    Duration::from_millis(total.min(MAX_DELAY_TOTAL_MS))
}

/// A `send` request's own write timeout (`timeout_ms`, as the pane host applies it).
fn send_timeout(request: &Value) -> Duration {
    let ms = request
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    Duration::from_millis(ms.min(MAX_TIMEOUT_MS))
}

/// How long the daemon waits for a pane host's reply to `request`.
///
/// A `send` may wait for the input lock (at most `lock_wait` of its write timeout, SPEC §3),
/// then runs its own delays, and its writes may wait up to its write timeout for the program
/// to read; the pane host answers `timeout` itself when that runs out, so the daemon waits
/// longer than all of it. A `wait` lasts its own `timeout_ms`. A `restart` stops the old child
/// (SIGKILL after 1.5 s) before starting the new.
pub fn pane_reply(request: &Value) -> Duration {
    match op(request) {
        "send" => {
            let timeout = send_timeout(request);
            PANE_QUICK + lock_wait(timeout) + timeout + own_delays(request)
        }
        "wait" => PANE_QUICK.saturating_add(wait_timeout(request)),
        "restart" => PANE_QUICK * 2,
        _ => PANE_QUICK,
    }
}

/// A `wait` request's own timeout (default 30 s, as the pane host applies it).
fn wait_timeout(request: &Value) -> Duration {
    Duration::from_millis(
        request
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .unwrap_or(30_000),
    )
}

/// How long a client waits for the daemon's reply to `request`.
pub fn daemon_reply(request: &Value) -> Duration {
    let own = match op(request) {
        "spawn" => SPAWN,
        "kill" | "shutdown" => KILL,
        "ding.status" | "ding.turn-boundary" => DING_WORKER,
        "hello" | "list" | "attach" | "subscribe" | "ding.nudge" | "hook" => {
            return DAEMON_QUICK;
        }
        _ => pane_reply(request),
    };
    own.saturating_add(CLIENT_MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        for request in requests {
            assert!(
                daemon_reply(&request) > pane_reply(&request),
                "{request}: client {:?} vs daemon {:?}",
                daemon_reply(&request),
                pane_reply(&request)
            );
        }
        assert!(daemon_reply(&json!({"op": "spawn"})) > SPAWN);
        assert!(daemon_reply(&json!({"op": "kill"})) > KILL);
    }

    #[test]
    fn a_send_waits_for_one_transaction_ahead_plus_its_own_delays() {
        let quick = pane_reply(&json!({"op": "send", "input": [{"text": "x"}]}));
        let slow = pane_reply(&json!({"op": "send", "input": [{"delay_ms": 1500}, {"text": "x"}]}));
        let default = Duration::from_millis(DEFAULT_TIMEOUT_MS);
        assert_eq!(quick, PANE_QUICK + lock_wait(default) + default);
        assert_eq!(slow, quick + Duration::from_millis(1500));
        // The pane host answers a send's own timeout itself: the daemon waits longer.
        let long =
            pane_reply(&json!({"op": "send", "timeout_ms": 60_000, "input": [{"text": "x"}]}));
        let sixty = Duration::from_secs(60);
        assert!(long > lock_wait(sixty) + sixty, "{long:?}");
    }
}
