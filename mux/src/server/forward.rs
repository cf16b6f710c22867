//! The pane ops (`Op::is_pane_op`: `send`, `wait`, `peek`, …): the daemon passes each to the
//! pane's host as the client wrote it and passes the reply back as it came, and abandons it as
//! soon as its requester hangs up (spec §3). A file of its own because these ops are not
//! answered by the daemon at all, only carried.

use std::time::Duration;

use belfry_proto::reply;
use belfry_proto::request::Op;
use belfry_proto::{ErrorCode, Request};
use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;

use super::{pane_for, Daemon};
use crate::registry;

/// Writes a reply line that is already serialised (a pane host's, passed on as it came).
pub(super) async fn write_line(writer: &mut OwnedWriteHalf, line: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    writer.write_all(line).await?;
    writer.flush().await
}

/// Resolves once the peer of `reader` has closed its connection entirely (not merely shut down
/// its writing side, as a client that sends one request and then half-closes does: it still
/// waits for the reply).
///
/// The common case costs nothing: with no further request pending, the read side becomes ready
/// exactly when the peer hangs up. A pipelined next request (left unread for the connection's
/// loop) or a half-close makes the read side stay ready, so the hang-up is then polled for.
pub(super) async fn requester_hung_up(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) {
    use tokio::io::AsyncBufReadExt;
    let _ = reader.fill_buf().await;
    loop {
        if peer_hung_up(reader.get_ref().as_ref()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True once the peer of `stream` has closed its end (POLLHUP: both directions are shut).
fn peer_hung_up(stream: &UnixStream) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(stream, PollFlags::empty())];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(n) if n > 0 => fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR),
        _ => false,
    }
}

/// Forwards a pane op (`Op::is_pane_op`) to the pane's host: `line` as the client wrote it
/// (`request` is its parse), and the pane host's reply line back as it came. The daemon's own
/// answer (the pane is unknown, its host failed, the request is invalid) is a reply value.
pub(super) async fn forward(
    daemon: &Daemon,
    request: &Request,
    line: &[u8],
) -> Result<Vec<u8>, Value> {
    if let Op::Send(send) = &request.op {
        // spec §3: a malformed bound (`timeout_ms` out of range) is refused here, before the
        // request leaves the daemon; a null guard never parsed at all.
        if let Err(message) = belfry_proto::request::send_timeout(send) {
            return Err(reply::error(&request.id, ErrorCode::Invalid, message));
        }
    }
    let entry = pane_for(daemon, request.op.session())
        .map_err(|err| reply::error_with(&request.id, err))?;
    registry::pane_forward(&entry.socket, request, line)
        .await
        .map_err(|err| reply::error(&request.id, err.code(), err.describe(&entry)))
}
