//! Descriptors passed over a Unix stream socket: one byte carrying them as `SCM_RIGHTS`
//! ancillary data.
//!
//! Two hand-overs use it: an attach client gives the pane host its terminal (and keyboard)
//! ([`crate::terminal`]), and the daemon gives a pane host a client's connection that asked to
//! `bind` to that pane (`adopt`, see [`crate::host`]). In both the receiver agrees first and
//! the sender writes nothing between that agreement and the byte, so the receiver's buffered
//! reader holds nothing the descriptors came with: a plain `read` of the byte would close them.

use std::io::{Error, ErrorKind};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use tokio::net::UnixStream;

/// The most descriptors one hand-over carries.
const MAX_FDS: usize = 2;

/// Receives the `count` descriptors the peer sends with one byte (`what` names it in errors:
/// "terminal byte"). An error names what came instead: the connection's end, or another
/// number of descriptors. The caller checks what each descriptor is.
pub async fn receive(
    stream: &UnixStream,
    count: usize,
    what: &str,
) -> std::io::Result<Vec<OwnedFd>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    loop {
        stream.readable().await?;
        let got = stream.try_io(tokio::io::Interest::READABLE, || {
            // Room for one more than the most expected, so that too many is told apart from a
            // cut.
            let mut space =
                [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS + 1))];
            let mut ancillary = RecvAncillaryBuffer::new(&mut space);
            let mut byte = [0u8; 1];
            let msg = rustix::net::recvmsg(
                stream,
                &mut [std::io::IoSliceMut::new(&mut byte)],
                &mut ancillary,
                RecvFlags::CMSG_CLOEXEC,
            )?;
            let mut fds: Vec<OwnedFd> = Vec::new();
            for message in ancillary.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            Ok((msg.bytes, fds))
        });
        match got {
            Ok((0, _)) => {
                return Err(Error::new(
                    ErrorKind::UnexpectedEof,
                    format!("the peer closed the connection before it sent its {what}"),
                ))
            }
            Ok((_, fds)) if fds.len() != count => {
                return Err(Error::new(
                    ErrorKind::InvalidData,
                    format!(
                        "the peer sent {} descriptors with its {what}, not {count}",
                        fds.len()
                    ),
                ))
            }
            Ok((_, fds)) => return Ok(fds),
            Err(err) if err.kind() == ErrorKind::WouldBlock => continue,
            Err(err) => return Err(err),
        }
    }
}

/// Sends `fds` with the one byte `byte` over `stream`, waiting at most `within` for room.
/// Blocking: for a client that is not on a runtime.
pub fn send_blocking(
    stream: impl AsFd,
    byte: u8,
    fds: &[BorrowedFd<'_>],
    within: Duration,
) -> std::io::Result<()> {
    loop {
        match send_once(&stream, byte, fds) {
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                // A fresh connection's buffer is empty; wait for room all the same, within
                // the receiver's own deadline for the descriptor.
                let mut poll = [rustix::event::PollFd::new(
                    &stream,
                    rustix::event::PollFlags::OUT,
                )];
                let timeout = rustix::event::Timespec {
                    tv_sec: within.as_secs() as i64,
                    tv_nsec: within.subsec_nanos() as i64,
                };
                if rustix::event::poll(&mut poll, Some(&timeout))? == 0 {
                    return Err(Error::new(
                        ErrorKind::TimedOut,
                        format!(
                            "the peer took nothing on the connection for {} ms",
                            within.as_millis()
                        ),
                    ));
                }
            }
            other => return other,
        }
    }
}

/// [`send_blocking`] on a runtime: waits for room without holding the thread. The caller
/// bounds the wait.
pub async fn send(stream: &UnixStream, byte: u8, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    loop {
        stream.writable().await?;
        match stream.try_io(tokio::io::Interest::WRITABLE, || {
            send_once(stream, byte, fds)
        }) {
            Err(err) if err.kind() == ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

/// One `sendmsg` of the byte and the descriptors; `WouldBlock` when the socket has no room.
fn send_once(stream: &impl AsFd, byte: u8, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    if fds.len() > MAX_FDS {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{} descriptors in one hand-over, at most {MAX_FDS}",
                fds.len()
            ),
        ));
    }
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(Error::other("no room for the descriptors"));
    }
    loop {
        match rustix::net::sendmsg(
            stream,
            &[std::io::IoSlice::new(&[byte])],
            &mut ancillary,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        ) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(ErrorKind::WriteZero.into()),
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
}
