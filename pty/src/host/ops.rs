//! The pane host's request ops: each request a connection sends is answered here (snapshot,
//! scrollback, send and its transactions, resize, wait, …), and `subscribe`, the one op that
//! turns its connection into a stream of events. A file of its own because it is the protocol's
//! surface of the pane, apart from serving connections (`mod.rs`) and attach (`attach.rs`).

use std::time::{Duration, Instant};

use belfry_proto::event::Event;
use belfry_proto::reply::{self, ErrorBody};
use belfry_proto::request::{self as req, Op};
use belfry_proto::ErrorCode;
use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;

use crate::input::parse_steps;
use crate::pane::{Expect, SendOutcome, WaitFor, WriteError};
use crate::txn::{self, StartRefused, TxnEnd};
use crate::wire;
use belfry_proto::limits::MAX_WAIT_MS;
use belfry_proto::request::send_timeout;

use super::HostContext;

/// What a handler answers: the reply's body, or the error it carries.
type Answer = Result<Value, ErrorBody>;

/// A typed reply body as the value a reply carries.
fn body(fields: impl serde::Serialize) -> Answer {
    serde_json::to_value(fields)
        .map_err(|err| ErrorBody::new(ErrorCode::Internal, format!("cannot encode reply: {err}")))
}

/// Answers one request (every op except the streaming ones). `None` means "no reply: the
/// requester is gone".
pub(super) async fn handle(
    ctx: &HostContext,
    op: &Op,
    gone: &(dyn Fn() -> bool + Sync),
) -> Option<Answer> {
    ctx.pane.note_activity();
    let answer = match op {
        Op::Hello(hello) => match hello.negotiate() {
            Ok(version) => body(reply::Hello {
                version,
                role: "pane-host".into(),
                build: env!("CARGO_PKG_VERSION").into(),
                pid: None,
                session: Some(ctx.pane.spec().session.clone()),
            }),
            Err(message) => Err(ErrorBody::new(ErrorCode::UnsupportedVersion, message)),
        },
        Op::Info(_) => Ok(ctx.record_json()),
        Op::Snapshot(op) => snapshot(ctx, op).and_then(body),
        Op::Scrollback(op) => body(scrollback(ctx, op)),
        Op::Send(op) => send(ctx, op, gone).await?.and_then(body),
        Op::Txn(op) => txn_op(ctx, op).and_then(body),
        Op::Resize(op) => resize(ctx, op).and_then(body),
        Op::Clear(_) => body(reply::Cleared {
            revision: ctx.pane.clear(),
        }),
        Op::Restart(_) => match ctx.pane.restart().await {
            Ok(identity) => body(reply::Restarted { identity }),
            Err(err) => Err(ErrorBody::invalid(err.to_string())),
        },
        Op::Kill(_) => {
            // A kill whose requester has already gone (a daemon that gave up on a stopped pane
            // host, a killed CLI) is not carried out: nobody would learn of it, and the
            // stopping state below cannot be undone.
            if gone() {
                return None;
            }
            // Kill never waits for the input lock: a transaction in flight writes no further
            // byte, every later one is refused with nothing written, and the pane host stops
            // serving once the reply is out.
            ctx.pane.stop_input("kill");
            body(reply::Killed {
                killed: ctx.pane.spec().session.clone(),
            })
        }
        Op::Detach(_) => body(reply::Detached {
            detached: ctx.pane.detach_all(),
        }),
        Op::Wait(op) => wait(ctx, op).await.and_then(body),
        other => Err(ErrorBody::new(
            ErrorCode::UnknownOp,
            format!("unknown op {:?} for a pane host", other.name()),
        )),
    };
    Some(answer)
}

fn snapshot(ctx: &HostContext, op: &req::Snapshot) -> Result<reply::Screen, ErrorBody> {
    ctx.pane
        .screen(
            op.scrollback,
            op.ansi.unwrap_or(false),
            op.cells.unwrap_or(false),
        )
        .map_err(|err| ErrorBody::new(ErrorCode::Internal, err))
}

fn scrollback(ctx: &HostContext, op: &req::Scrollback) -> reply::History {
    let start = usize::try_from(op.start.unwrap_or(0)).unwrap_or(usize::MAX);
    let count = op.count.map_or(u32::MAX as usize, |n| {
        usize::try_from(n).unwrap_or(usize::MAX)
    });
    ctx.pane.history(start, count.min(100_000))
}

/// The send op. `None` means "no reply: the requester is gone"; an error's code depends on how
/// the transaction failed.
async fn send(
    ctx: &HostContext,
    op: &req::Send,
    gone: &(dyn Fn() -> bool + Sync),
) -> Option<Result<reply::Sent, ErrorBody>> {
    let parsed = send_timeout(op).and_then(|timeout| {
        let steps = parse_steps(&op.input).map_err(|err| err.to_string())?;
        Ok((timeout, steps))
    });
    let (write_timeout, steps) = match parsed {
        Ok(parsed) => parsed,
        Err(message) => return Some(Err(ErrorBody::invalid(message))),
    };
    let expect = op.expect.clone().unwrap_or_default();
    let send = Send {
        expect: &expect,
        steps: &steps,
        write_timeout,
        announce: op.notice != Some(true),
    };
    if let Some(txn) = &op.txn {
        return send_in_transaction(ctx, txn, send, gone).await;
    }
    match ctx
        .pane
        .send(&expect, &steps, gone, write_timeout, send.announce)
        .await
    {
        Ok(SendOutcome::Abandoned) => None,
        Ok(SendOutcome::Sent { revision }) => Some(Ok(reply::Sent::Sent {
            revision,
            txn: None,
        })),
        Ok(SendOutcome::Conflict { actual, exited }) => Some(Ok(reply::Sent::Conflict {
            actual,
            exited,
            txn: None,
        })),
        Err(err) => Some(Err(write_error(&err))),
    }
}

/// The error of a transaction that ended early. It carries `written`, the bytes that reached
/// the PTY, so a caller never takes a partial write for "nothing written".
fn write_error(err: &WriteError) -> ErrorBody {
    let (code, message) = match err {
        WriteError::InputBusy { .. } | WriteError::TimedOut { .. } => {
            (ErrorCode::Timeout, format!("send timed out: {err}"))
        }
        WriteError::Aborted { .. } => (ErrorCode::Aborted, format!("send {err}")),
        WriteError::Io { .. } => (ErrorCode::Invalid, err.to_string()),
    };
    ErrorBody {
        code,
        message,
        written: Some(err.written() as u64),
    }
}

/// One guarded send's parsed request: what it expects, what it writes, and its write timeout.
#[derive(Clone, Copy)]
struct Send<'a> {
    expect: &'a Expect,
    steps: &'a [crate::input::Step],
    write_timeout: Duration,
    /// Whether the pane announces it as input from outside the program (every send but a
    /// DING notice, see [`crate::pane::Pane::send`]).
    announce: bool,
}

/// A send that carries a transaction id: the same guarded send, with its fate recorded in the
/// journal so that a later requester can learn whether it was ever written (see [`crate::txn`]).
///
/// The journal's gate runs where the pane checks for a departed requester: under the input
/// lock, after the wait and before the compare and the first byte. A transaction fenced by a
/// query while it waited is dropped there, exactly like one whose requester has gone.
async fn send_in_transaction(
    ctx: &HostContext,
    txn: &str,
    send: Send<'_>,
    gone: &(dyn Fn() -> bool + Sync),
) -> Option<Result<reply::Sent, ErrorBody>> {
    if let Err(message) = txn::validate_txn_id(txn) {
        return Some(Err(ErrorBody::invalid(message)));
    }
    if ctx.txns.is_known(txn) {
        return Some(Err(ErrorBody::invalid(format!(
            "transaction id {txn:?} was already used (or fenced by a txn query); nothing was written"
        ))));
    }
    let refused = parking_lot::Mutex::new(None);
    // The pane asks again after waiting out a restart; the journal entry is taken only once.
    let started = std::sync::atomic::AtomicBool::new(false);
    let gate = || {
        if gone() {
            return true;
        }
        if started.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        match ctx.txns.start(txn) {
            Ok(()) => {
                started.store(true, std::sync::atomic::Ordering::SeqCst);
                false
            }
            Err(reason) => {
                *refused.lock() = Some(reason);
                true
            }
        }
    };
    let outcome = ctx
        .pane
        .send(
            send.expect,
            send.steps,
            &gate,
            send.write_timeout,
            send.announce,
        )
        .await;
    let end = match &outcome {
        Ok(SendOutcome::Sent { .. }) => TxnEnd::Sent,
        Ok(SendOutcome::Conflict { .. } | SendOutcome::Abandoned) => TxnEnd::NotWritten,
        // A transaction that ended early says how many bytes reached the PTY: none means it
        // was never written, any means it may be on screen and must never be written again.
        Err(err) if err.written() == 0 => TxnEnd::NotWritten,
        Err(_) => TxnEnd::Failed,
    };
    ctx.txns.end(txn, end);
    let refused = *refused.lock();
    let named = txn;
    let txn = Some(txn.to_string());
    Some(match outcome {
        Ok(SendOutcome::Abandoned) => match refused {
            None => return None,
            Some(StartRefused::Fenced) => Err(ErrorBody::invalid(format!(
                "transaction {named:?} was fenced by a txn query while it waited; nothing was \
                 written"
            ))),
            Some(StartRefused::Reused) => Err(ErrorBody::invalid(format!(
                "transaction id {named:?} was already used; nothing was written"
            ))),
        },
        Ok(SendOutcome::Sent { revision }) => Ok(reply::Sent::Sent { revision, txn }),
        Ok(SendOutcome::Conflict { actual, exited }) => Ok(reply::Sent::Conflict {
            actual,
            exited,
            txn,
        }),
        Err(err) => Err(write_error(&err)),
    })
}

/// `txn`: what became of a transaction (`state`: never-written, running, written, unknown),
/// fencing one that has not started; with `"settle": true`, forget an ended one whose outcome
/// the requester has recorded.
fn txn_op(ctx: &HostContext, op: &req::Txn) -> Result<reply::TxnState, ErrorBody> {
    txn::validate_txn_id(&op.txn).map_err(ErrorBody::invalid)?;
    let me = format!("{}-{}", std::process::id(), ctx.started_at);
    if op.host.as_deref().is_some_and(|host| host != me) {
        // The socket path was bound again: the transaction went to an earlier pane host,
        // whose journal died with it. Nothing here may fence, settle or vouch for it.
        let settle = op.settle.unwrap_or(false);
        return Ok(reply::TxnState {
            txn: op.txn.clone(),
            state: (!settle).then(|| txn::TxnState::Unknown.as_str().to_string()),
            settled: settle.then_some(false),
        });
    }
    if op.settle.unwrap_or(false) {
        return Ok(reply::TxnState {
            txn: op.txn.clone(),
            state: None,
            settled: Some(ctx.txns.settle(&op.txn)),
        });
    }
    Ok(reply::TxnState {
        txn: op.txn.clone(),
        state: Some(ctx.txns.query(&op.txn).as_str().to_string()),
        settled: None,
    })
}

fn resize(ctx: &HostContext, op: &req::Resize) -> Result<reply::Resized, ErrorBody> {
    let size = belfry_proto::Size::new(op.rows, op.cols)
        .map_err(|err| ErrorBody::invalid(err.to_string()))?;
    let revision = ctx
        .pane
        .resize(size.rows(), size.cols())
        .map_err(|err| ErrorBody::invalid(err.to_string()))?;
    Ok(reply::Resized { revision, size })
}

/// `wait`: until every given condition holds (revision reached, exited, screen regex, quiet for
/// N ms), or the timeout (default 30 s) passes.
async fn wait(ctx: &HostContext, op: &req::Wait) -> Result<reply::Waited, ErrorBody> {
    let parsed = (|| -> Result<_, String> {
        let regex = match &op.regex {
            Some(pattern) => Some(
                crate::screen_regex::ScreenRegex::new(pattern)
                    .map_err(|err| format!("field \"regex\" is not a valid regex: {err}"))?,
            ),
            None => None,
        };
        let quiet = wait_ms(op.quiet_ms, "quiet_ms")?.map(Duration::from_millis);
        let timeout = Duration::from_millis(
            wait_ms(op.timeout_ms, "timeout_ms")?.unwrap_or(belfry_proto::limits::DEFAULT_WAIT_MS),
        );
        let exit = op.exit.unwrap_or(false);
        if op.revision.is_none()
            && !exit
            && regex.is_none()
            && quiet.is_none()
            && op.status.is_none()
        {
            return Err(
                "wait needs at least one of revision, exit, regex, quiet_ms, status".into(),
            );
        }
        Ok((op.revision, exit, regex, quiet, timeout))
    })();
    let (revision, exit, mut regex, quiet, timeout) = parsed.map_err(ErrorBody::invalid)?;
    let status = op.status;
    // Both durations are at most MAX_WAIT_MS, so this and `last_change + q` below cannot
    // overflow; the checked add keeps even a clock near its end from panicking.
    let Some(deadline) = Instant::now().checked_add(timeout) else {
        return Err(ErrorBody::invalid(format!(
            "field \"timeout_ms\" {} is too far in the future",
            timeout.as_millis()
        )));
    };
    let mut changes = ctx.pane.watch_revision();
    loop {
        let (met, quiet_until, identity) = ctx.pane.wait_check(&mut WaitFor {
            revision,
            exit,
            status,
            regex: regex.as_mut(),
            quiet,
        });
        if met {
            return Ok(reply::Waited {
                result: "matched".into(),
                state: identity,
            });
        }
        let now = Instant::now();
        if now >= deadline {
            let state = serde_json::to_string(&identity).unwrap_or_default();
            return Err(ErrorBody::new(
                ErrorCode::Timeout,
                format!(
                    "wait timed out after {} ms; state {state}",
                    timeout.as_millis()
                ),
            ));
        }
        let wake_at = quiet_until.map_or(deadline, |q| q.max(now).min(deadline));
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake_at)) => {}
        }
    }
}

/// A `wait` duration field in ms: absent, or 0..=[`MAX_WAIT_MS`].
fn wait_ms(ms: Option<u64>, field: &str) -> Result<Option<u64>, String> {
    match ms {
        Some(ms) if ms > MAX_WAIT_MS => Err(format!(
            "field \"{field}\" is {ms} ms, above the maximum of {MAX_WAIT_MS} ms (24 hours)"
        )),
        ms => Ok(ms),
    }
}

/// `subscribe`: a stream of events — revision (coalesced to the latest), exit and lifecycle —
/// until the client closes the connection.
pub(super) async fn subscribe(
    ctx: &HostContext,
    id: &Value,
    op: &req::Subscribe,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let revisions = op.revisions.unwrap_or(true);
    let mut events = ctx.pane.subscribe_events();
    let mut changes = ctx.pane.watch_revision();
    // Read after the broadcast is subscribed to: an exit that happens in between is both here
    // and on the broadcast, and the broadcast's copy is skipped by its incarnation below.
    let exit_so_far = if op.exit_so_far == Some(true) {
        ctx.pane.exit_event()
    } else {
        None
    };
    let reply = reply::ok(
        id,
        &reply::Subscribed {
            subscribed: true,
            session: None,
            identity: Some(ctx.pane.identity()),
        },
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        return;
    }
    let session = ctx.pane.spec().session.clone();
    let told_exit = match &exit_so_far {
        Some(event @ Event::Exit { incarnation, .. }) => {
            if wire::write_json(&mut writer, &event.to_value())
                .await
                .is_err()
            {
                return;
            }
            Some(incarnation.clone())
        }
        _ => None,
    };
    let mut sink = Vec::new();
    loop {
        let event = tokio::select! {
            changed = changes.changed(), if revisions => {
                if changed.is_err() { return; }
                let revision = *changes.borrow_and_update();
                Event::Revision { session: session.clone(), revision }
            }
            event = events.recv() => match event {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    Event::Lagged { session: Some(session.clone()), missed: n }
                }
                Err(_) => return,
            },
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut sink) => {
                // The subscriber speaks no more requests; EOF ends the stream.
                match read { Ok(0) | Err(_) => return, Ok(_) => { sink.clear(); continue; } }
            }
        };
        if let (Event::Exit { incarnation, .. }, Some(told)) = (&event, &told_exit) {
            if incarnation == told {
                // Sent first already: every exit is told once.
                continue;
            }
        }
        if wire::write_json(&mut writer, &event.to_value())
            .await
            .is_err()
        {
            return;
        }
        if revisions {
            // Coalesce bursts: at most one revision event per millisecond per subscriber.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}
