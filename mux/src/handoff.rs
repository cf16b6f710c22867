//! `bind`: the daemon hands a client's connection to the pane's host (issue 13, target 3).
//!
//! Forwarding costs every request a second process hop (two more socket traversals and two
//! more wake-ups); a client that talks to one pane for a long time (a supervisor guarding its
//! sends, a remote proxy) can instead ask the daemon once to hand its connection over. The
//! daemon opens a connection of its own to the pane host, asks it to `adopt`, and on its
//! agreement sends the client's descriptor (`SCM_RIGHTS`, one byte); the pane host answers the
//! client's `bind` on the client's connection and serves it from then on, as if the client had
//! connected to its socket. The daemon closes its copy without shutting the connection down.
//!
//! Until the pane host says it holds the connection, nothing has been written to it but by the
//! daemon, so every failure up to then leaves the client with the daemon: its `bind` is
//! answered with the error and the connection serves on. Only a pane host that took the
//! descriptor and then went silent leaves it unknown who holds the connection; the daemon then
//! answers with the error and shuts the connection down, so that it is never served twice.

use std::os::fd::AsFd;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use belfry_proto::reply::{self, error_code};
use belfry_proto::{request, ErrorCode, Request};
use belfry_transport::wire;

use crate::registry::{self, PaneEntry, PaneError};

/// How long a hand-over may take in all: the pane host answers between two turns of output,
/// within milliseconds; a stopped one is given up on well inside the client's deadline for
/// `bind`.
const DEADLINE: Duration = Duration::from_secs(3);

/// What became of a client's connection after its `bind`.
pub enum Bound {
    /// The pane host serves it now; the daemon no longer holds it.
    Handed,
    /// It is still the daemon's: the reply to write to it, and the connection to serve on.
    Kept(BufReader<OwnedReadHalf>, OwnedWriteHalf, Value),
    /// Given up on (the pane host took it and went silent): answered and shut down.
    Ended,
}

/// Why a hand-over did not happen.
enum Failure {
    /// The connection is still only the daemon's: the reply's code and message.
    Before(ErrorCode, String),
    /// The pane host may hold the connection too.
    After(String),
}

/// Hands the client's connection (`reader`, `writer`) to `entry`'s pane host, for the `bind`
/// with `id`.
pub async fn bind(
    entry: &PaneEntry,
    id: &Value,
    reader: BufReader<OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
) -> Bound {
    if !reader.buffer().is_empty() {
        // Requests the daemon already read would be lost to the pane host: they are served
        // here instead, and the bind is refused in their favour.
        let message = format!(
            "bind must be the last request sent before its answer; {} bytes followed it, so \
             the daemon keeps serving this connection",
            reader.buffer().len()
        );
        return Bound::Kept(
            reader,
            writer,
            reply::error(id, ErrorCode::Invalid, message),
        );
    }
    let client: &tokio::net::UnixStream = reader.get_ref().as_ref();
    match hand(entry, id, client.as_fd()).await {
        Ok(()) => {
            tracing::info!(
                session = entry.session,
                "connection handed to the pane host"
            );
            // Closes the daemon's descriptor only: the pane host's serves on.
            writer.forget();
            drop(reader);
            Bound::Handed
        }
        Err(Failure::Before(code, message)) => {
            Bound::Kept(reader, writer, reply::error(id, code, message))
        }
        Err(Failure::After(message)) => {
            tracing::warn!(session = entry.session, "bind given up: {message}");
            let reply = reply::error(id, ErrorCode::Timeout, message);
            let _ = tokio::time::timeout(DEADLINE, wire::write_json(&mut writer, &reply)).await;
            let _ = rustix::net::shutdown(client, rustix::net::Shutdown::Both);
            Bound::Ended
        }
    }
}

/// The daemon's side of `adopt` on a connection of its own to the pane host, within
/// [`DEADLINE`] in all.
async fn hand(
    entry: &PaneEntry,
    id: &Value,
    client: std::os::fd::BorrowedFd<'_>,
) -> Result<(), Failure> {
    let mut sent = false;
    match tokio::time::timeout(DEADLINE, steps(entry, id, client, &mut sent)).await {
        Ok(outcome) => outcome,
        // Silence after the descriptor went leaves the connection in two hands.
        Err(_) if sent => Err(Failure::After(timed_out().describe(entry))),
        Err(_) => Err(Failure::Before(
            ErrorCode::Timeout,
            timed_out().describe(entry),
        )),
    }
}

/// The steps of [`hand`]; `sent` is set once the descriptor has gone to the pane host.
async fn steps(
    entry: &PaneEntry,
    id: &Value,
    client: std::os::fd::BorrowedFd<'_>,
    sent: &mut bool,
) -> Result<(), Failure> {
    let failed = |err: PaneError| Failure::Before(err.code(), err.describe(entry));
    let stream = registry::connect(&entry.socket).await.map_err(failed)?;
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let adopt = Request::new(
        1,
        request::Adopt {
            bind_id: id.clone(),
        },
    );
    let mut line = adopt.to_value().to_string().into_bytes();
    line.push(b'\n');
    writer
        .write_all(&line)
        .await
        .map_err(|err| failed(PaneError::Failed(err.to_string())))?;
    answer(&mut reader, "ready", entry).await?;
    belfry_transport::fdpass::send(writer.as_ref(), b'C', &[client])
        .await
        .map_err(|err| failed(PaneError::Failed(err.to_string())))?;
    *sent = true;
    // The pane host writes nothing to the client's connection before it says `adopted`: an
    // answer that is an error, or the end of the connection, leaves the client the daemon's.
    answer(&mut reader, "adopted", entry).await
}

/// Reads the pane host's answer to `adopt` that carries `field`: an error answer or a broken
/// connection is the failure it names.
async fn answer(
    reader: &mut BufReader<OwnedReadHalf>,
    field: &str,
    entry: &PaneEntry,
) -> Result<(), Failure> {
    let line = match wire::read_line(reader).await {
        Ok(wire::Line::Text(line)) => line,
        Ok(_) | Err(_) => {
            let err = PaneError::Failed(format!(
                "pane host at {} closed the connection during the hand-over",
                entry.socket.display()
            ));
            return Err(Failure::Before(err.code(), err.describe(entry)));
        }
    };
    let reply: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
    if reply.get(field) == Some(&Value::Bool(true)) {
        return Ok(());
    }
    let code = error_code(&reply).unwrap_or(ErrorCode::Unavailable);
    let said = reply
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| json!(reply).to_string());
    Err(Failure::Before(
        code,
        format!(
            "pane host of {:?} (pid {}) did not take the connection: {said}",
            entry.session, entry.pid
        ),
    ))
}

/// The hand-over passed [`DEADLINE`].
fn timed_out() -> PaneError {
    PaneError::TimedOut {
        op: "adopt".into(),
        after: DEADLINE,
    }
}
