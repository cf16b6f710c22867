//! The daemon's event bus: publishing (with the recent past kept for `history`) and the
//! `subscribe` op, a stream of the bus's events and, with a session, its pane's revisions. A
//! file of its own because the bus is shared by every op family and its subscribers.
//!
//! The bus and its kept past carry typed [`Event`]s; each is turned into JSON once, where it
//! is written to a subscriber (through a JSON value, so its keys are in the order they always
//! were on the wire).

use std::sync::Arc;

use belfry_proto::event::{Event, Kept};
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

pub(super) fn publish(daemon: &Daemon, event: Event) {
    let mut history = daemon.history.lock();
    // Revisions come many a second from a busy pane and would push every other event out.
    if !matches!(event, Event::Revision { .. }) {
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
) -> (broadcast::Receiver<Event>, Vec<Kept>) {
    let history = daemon.history.lock();
    let bus = daemon.bus.subscribe();
    if op.history.is_none() && op.since_ms.is_none() {
        return (bus, Vec::new());
    }
    let most = op.history.map_or(usize::MAX, |n| n as usize);
    let since = op.since_ms.unwrap_or(0);
    let session = op.session.as_ref().map(|s| s.as_str());
    let mut past: Vec<Kept> = history
        .iter()
        .rev()
        .filter(|(at, event)| *at >= since && session.is_none_or(|s| event.session() == Some(s)))
        .take(most)
        .map(|(at, event)| Kept::at(event.clone(), *at))
        .collect();
    drop(history);
    past.reverse();
    (bus, past)
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
        if wire::write_json(&mut writer, &event.to_value())
            .await
            .is_err()
        {
            return;
        }
    }
    let mut sink = Vec::new();
    loop {
        let event = tokio::select! {
            event = bus.recv() => match event {
                Ok(event) => {
                    let matches = session.as_deref().is_none_or(|s| event.session() == Some(s));
                    // Revision events reach a session subscriber through its own pane stream.
                    let is_revision = matches!(event, Event::Revision { .. });
                    if !matches || (is_revision && session.is_some()) { continue; }
                    event
                }
                Err(broadcast::error::RecvError::Lagged(n)) => Event::Lagged { session: None, missed: n },
                Err(_) => return,
            },
            line = async {
                match &mut pane_lines {
                    Some((lines, _)) => lines.next_line().await,
                    None => std::future::pending().await,
                }
            } => match line {
                Ok(Some(line)) => match serde_json::from_str::<Event>(&line) {
                    // Exit and lifecycle already arrive through the bus.
                    Ok(event @ Event::Revision { .. }) => event,
                    _ => continue,
                },
                _ => { pane_lines = None; continue; }
            },
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut sink) => {
                match read { Ok(0) | Err(_) => return, Ok(_) => { sink.clear(); continue; } }
            }
        };
        if wire::write_json(&mut writer, &event.to_value())
            .await
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use belfry_proto::event::{Event, HookSeen, Kept, Lifecycle};
    use serde_json::Value;

    /// One event of each kind the bus carries, as the daemon publishes them.
    fn events() -> Vec<Event> {
        vec![
            Event::Revision {
                session: "w".into(),
                revision: 7,
            },
            Event::Exit {
                session: "w".into(),
                incarnation: "i".into(),
                revision: 9,
                code: None,
                signal: Some(1),
            },
            Event::Lifecycle(Lifecycle {
                pid: Some(41),
                incarnation: Some("i".into()),
                generation: Some("sha256:g".into()),
                ..Lifecycle::new("w", "spawned")
            }),
            Event::Hook(HookSeen {
                session: "w".into(),
                hook: "stop".into(),
                source: None,
                tool_name: Some("t".into()),
                hook_event_name: None,
                incarnation: Some("i".into()),
                prompt: None,
                notices: vec!["m1".into()],
            }),
            Event::Ding {
                session: "w".into(),
                what: "turn-boundary".into(),
                outcome: serde_json::json!({"hook_owned": ["m1"], "refused": []}),
            },
            Event::Lagged {
                session: None,
                missed: 3,
            },
        ]
    }

    /// The bus carried JSON values before it carried [`Event`]s, and the kept past was marked
    /// by inserting `history` and `at_ms` into each value: what a subscriber reads, live or
    /// kept, is the same bytes now.
    #[test]
    fn a_typed_bus_writes_the_bytes_the_value_bus_wrote() {
        for event in events() {
            let before = event.to_value();
            assert_eq!(
                serde_json::to_string(&event.to_value()).unwrap(),
                serde_json::to_string(&before).unwrap()
            );
            let mut kept_before = before.clone();
            if let Some(fields) = kept_before.as_object_mut() {
                fields.insert("history".into(), Value::Bool(true));
                fields.insert("at_ms".into(), Value::from(1_767_225_600_123_u64));
            }
            assert_eq!(
                serde_json::to_string(&Kept::at(event.clone(), 1_767_225_600_123).to_value())
                    .unwrap(),
                serde_json::to_string(&kept_before).unwrap(),
                "{event:?}"
            );
            // A session subscriber's filter and the history's revision rule read the same
            // fields the value bus read by key.
            assert_eq!(event.session(), before["session"].as_str());
            assert_eq!(event.kind(), before["event"]);
        }
    }
}
