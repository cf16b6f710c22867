//! The daemon's event bus: publishing (with the recent past kept for `history`) and the
//! `subscribe` op, a stream of the bus's events and, with a session, its pane's revisions. A
//! file of its own because the bus is shared by every op family and its subscribers.

use std::sync::Arc;

use belfry_proto::event::Event;
use belfry_proto::limits::EVENT_HISTORY;
use belfry_proto::reply;
use belfry_proto::request;
use belfry_proto::ErrorCode;
use belfry_transport::wire;
use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::broadcast;

use super::Daemon;
use crate::registry;

pub(super) fn publish(daemon: &Daemon, event: impl Into<BusEvent>) {
    let event = event.into().0;
    let mut history = daemon.history.lock();
    // Revisions come many a second from a busy pane and would push every other event out.
    if event.get("event").and_then(Value::as_str) != Some("revision") {
        if history.len() >= EVENT_HISTORY {
            history.pop_front();
        }
        history.push_back((unix_ms(), event.clone()));
    }
    let _ = daemon.bus.send(event);
}

/// The Unix time in ms (0 for a clock before 1970).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// A receiver of the bus and the kept events `op` asks for (its `history` and `since_ms`,
/// of its session when it names one), oldest first, each marked `history: true` with its
/// `at_ms`: taken under the history lock, so the receiver carries exactly what came after.
fn subscribe_with_history(
    daemon: &Daemon,
    op: &request::Subscribe,
) -> (broadcast::Receiver<Value>, Vec<Value>) {
    let history = daemon.history.lock();
    let bus = daemon.bus.subscribe();
    if op.history.is_none() && op.since_ms.is_none() {
        return (bus, Vec::new());
    }
    let most = op.history.map_or(usize::MAX, |n| n as usize);
    let since = op.since_ms.unwrap_or(0);
    let session = op.session.as_ref().map(|s| s.as_str());
    let mut past: Vec<Value> = history
        .iter()
        .rev()
        .filter(|(at, event)| {
            *at >= since
                && session.is_none_or(|s| event.get("session").and_then(Value::as_str) == Some(s))
        })
        .take(most)
        .map(|(at, event)| {
            let mut event = event.clone();
            if let Some(fields) = event.as_object_mut() {
                fields.insert("history".into(), Value::Bool(true));
                fields.insert("at_ms".into(), Value::from(*at));
            }
            event
        })
        .collect();
    drop(history);
    past.reverse();
    (bus, past)
}

/// An event as the bus carries it (JSON, as subscribers receive it).
pub(super) struct BusEvent(Value);

impl From<Event> for BusEvent {
    fn from(event: Event) -> BusEvent {
        BusEvent(event.to_value())
    }
}

impl From<Value> for BusEvent {
    fn from(event: Value) -> BusEvent {
        BusEvent(event)
    }
}

/// `subscribe`: the bus (lifecycle, exit, hook events), optionally filtered to one session;
/// with a session, also that pane's revision events.
pub(super) async fn subscribe(
    daemon: &Arc<Daemon>,
    id: &Value,
    op: &request::Subscribe,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) {
    let session = op.session.as_ref().map(|s| s.as_str().to_string());
    let (mut bus, past) = subscribe_with_history(daemon, op);
    let mut pane_lines = None;
    if let Some(session) = &session {
        let Some(entry) = daemon.registry.get(session) else {
            let reply = reply::error(
                id,
                ErrorCode::NotFound,
                format!("no pane named {session:?}"),
            );
            let _ = wire::write_json(&mut writer, &reply).await;
            return;
        };
        // The pane host's subscribe reply is awaited within the quick deadline: a stopped pane
        // host makes this an error naming it, not a hang.
        let subscribed = tokio::time::timeout(
            crate::deadline::PANE_QUICK,
            registry::subscribe(&entry.socket, true),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "pane host of {session:?} (pid {}) did not answer \"subscribe\" within {} s; it \
                 may be stopped or hung",
                entry.pid,
                crate::deadline::PANE_QUICK.as_secs()
            ))
        });
        match subscribed {
            Ok((lines, pane_writer)) => pane_lines = Some((lines, pane_writer)),
            Err(message) => {
                let _ = wire::write_json(
                    &mut writer,
                    &reply::error(id, ErrorCode::Unavailable, message),
                )
                .await;
                return;
            }
        }
    }
    let reply = reply::ok(
        id,
        &belfry_proto::reply::Subscribed {
            subscribed: true,
            session: session.clone(),
            identity: None,
        },
    );
    if wire::write_json(&mut writer, &reply).await.is_err() {
        return;
    }
    for event in &past {
        if wire::write_json(&mut writer, event).await.is_err() {
            return;
        }
    }
    let mut sink = Vec::new();
    loop {
        let event = tokio::select! {
            event = bus.recv() => match event {
                Ok(event) => {
                    let matches = session.as_deref().is_none_or(|s| event.get("session").and_then(Value::as_str) == Some(s));
                    // Revision events reach a session subscriber through its own pane stream.
                    let is_revision = event.get("event").and_then(Value::as_str) == Some("revision");
                    if !matches || (is_revision && session.is_some()) { continue; }
                    event
                }
                Err(broadcast::error::RecvError::Lagged(n)) => Event::Lagged { session: None, missed: n }.to_value(),
                Err(_) => return,
            },
            line = async {
                match &mut pane_lines {
                    Some((lines, _)) => lines.next_line().await,
                    None => std::future::pending().await,
                }
            } => match line {
                Ok(Some(line)) => match serde_json::from_str::<Value>(&line) {
                    // Exit and lifecycle already arrive through the bus.
                    Ok(event) if event.get("event").and_then(Value::as_str) == Some("revision") => event,
                    _ => continue,
                },
                _ => { pane_lines = None; continue; }
            },
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut sink) => {
                match read { Ok(0) | Err(_) => return, Ok(_) => { sink.clear(); continue; } }
            }
        };
        if wire::write_json(&mut writer, &event).await.is_err() {
            return;
        }
    }
}
