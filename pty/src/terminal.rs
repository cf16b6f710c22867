//! The attach client's terminal, handed to the pane host (issue 13, target 2).
//!
//! A local `belfry attach` client sends its terminal's descriptor over the attach connection
//! (`SCM_RIGHTS`, with one byte) once the pane host agreed to take it. From then on the pane
//! host writes the redraw and the pane's output to that terminal itself, from a thread of its
//! own ([`TerminalWriter`]), so the bytes cross one process instead of two and the write never
//! waits for the screen model (which runs on the pane host's main thread) nor the model for
//! the write. The client keeps reading keystrokes and sends them as before; the attach
//! connection carries only control frames towards it.
//!
//! The writer records what the bytes it wrote turned on in the terminal ([`Outer`]), and hands
//! the undo bytes back when the client leaves or the program ends, so the client restores the
//! terminal as it did when it wrote the output itself.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use crate::restore::Outer;

/// How long the pane host waits for the descriptor after agreeing to take it, and the client for
/// room to send it.
pub const HANDOVER_DEADLINE: Duration = Duration::from_secs(10);

/// How long a flush waits for the terminal to take what was queued before it (a terminal that
/// takes nothing is given up on).
const FLUSH_WAIT: Duration = Duration::from_secs(1);

/// The pane host's side of the hand-over: the client's terminal, received on `stream` within
/// [`HANDOVER_DEADLINE`], and the thread that writes it for client `client`. `buffered` is
/// whether the connection's reader already holds bytes the client sent after its request: the
/// client sends nothing before its terminal, so the descriptor they carried is lost.
pub async fn take(
    stream: &UnixStream,
    buffered: bool,
    client: u64,
) -> std::io::Result<TerminalWriter> {
    use std::io::{Error, ErrorKind};
    if buffered {
        return Err(Error::new(
            ErrorKind::InvalidData,
            "the client sent bytes before its terminal",
        ));
    }
    match tokio::time::timeout(HANDOVER_DEADLINE, receive(stream)).await {
        Ok(fd) => TerminalWriter::start(fd?, client),
        Err(_) => Err(Error::new(
            ErrorKind::TimedOut,
            format!("no terminal within {} s", HANDOVER_DEADLINE.as_secs()),
        )),
    }
}

/// Receives the descriptor the client sends with one byte; an error names what came instead.
/// The descriptor must be a terminal: the pane host writes nothing anywhere else.
async fn receive(stream: &UnixStream) -> std::io::Result<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    loop {
        stream.readable().await?;
        let got = stream.try_io(tokio::io::Interest::READABLE, || {
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
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
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the client closed the connection before it sent its terminal",
                ))
            }
            Ok((_, mut fds)) => {
                if fds.len() != 1 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "the client sent {} descriptors with its terminal byte, not one",
                            fds.len()
                        ),
                    ));
                }
                let fd = fds.remove(0);
                if !rustix::termios::isatty(&fd) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "the descriptor the client sent is not a terminal",
                    ));
                }
                return Ok(fd);
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(err) => return Err(err),
        }
    }
}

/// Sends `fd` over `stream` with one byte: the client's side of [`receive`]. Blocking.
pub fn send(stream: impl AsFd, fd: impl AsFd) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let fds = [fd.as_fd()];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for the descriptor"));
    }
    loop {
        match rustix::net::sendmsg(
            &stream,
            &[std::io::IoSlice::new(b"T")],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        ) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(std::io::ErrorKind::WriteZero.into()),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                // A fresh connection's buffer is empty; wait for room all the same, within
                // the pane host's own deadline for the descriptor.
                let mut fds = [rustix::event::PollFd::new(
                    &stream,
                    rustix::event::PollFlags::OUT,
                )];
                let timeout = rustix::event::Timespec {
                    tv_sec: HANDOVER_DEADLINE.as_secs() as i64,
                    tv_nsec: 0,
                };
                if rustix::event::poll(&mut fds, Some(&timeout))? == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the pane host took nothing on the attach connection",
                    ));
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// What the writer thread is asked to do, in order.
enum Job {
    /// Write these chunks.
    Write(Vec<Arc<[u8]>>),
    /// Answer once everything before has been written.
    Flush(oneshot::Sender<()>),
}

/// A thread writing to one client's terminal. Dropping it stops the thread after the write in
/// progress (a terminal that takes nothing is given up within [`STOP_POLL`]).
pub struct TerminalWriter {
    jobs: mpsc::Sender<Job>,
    stop: Arc<AtomicBool>,
    /// What the written bytes turned on in the terminal, shared with the thread.
    outer: Arc<parking_lot::Mutex<Outer>>,
    /// Set by the thread when the terminal failed (hung up, closed).
    failed: Arc<AtomicBool>,
}

/// How often a writer waiting for a full terminal checks whether it should stop.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Batches queued for the thread before the attach task waits (its own queue, in the pane,
/// then fills, and the client is resynchronised with a redraw when it catches up).
const JOBS: usize = 4;

impl TerminalWriter {
    /// Starts the thread that writes to `fd`.
    pub fn start(fd: OwnedFd, client: u64) -> std::io::Result<TerminalWriter> {
        let (jobs, mut rx) = mpsc::channel::<Job>(JOBS);
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicBool::new(false));
        let outer = Arc::new(parking_lot::Mutex::new(Outer::default()));
        let (thread_stop, thread_failed, thread_outer) =
            (Arc::clone(&stop), Arc::clone(&failed), Arc::clone(&outer));
        std::thread::Builder::new()
            .name(format!("terminal-{client}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                while let Some(job) = rx.blocking_recv() {
                    match job {
                        Job::Write(chunks) => {
                            // Nothing is written once the client has left or the terminal
                            // failed.
                            if thread_failed.load(Ordering::Relaxed)
                                || thread_stop.load(Ordering::Relaxed)
                            {
                                continue;
                            }
                            match write_all(&fd, &chunks, &thread_stop) {
                                Ok(()) => {
                                    let mut outer = thread_outer.lock();
                                    for chunk in &chunks {
                                        outer.observe(chunk);
                                    }
                                }
                                Err(err) => {
                                    if !thread_stop.load(Ordering::Relaxed) {
                                        tracing::info!(
                                            "attach client {client}: its terminal took no more \
                                             output: {err}"
                                        );
                                    }
                                    thread_failed.store(true, Ordering::Relaxed);
                                }
                            }
                        }
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(TerminalWriter {
            jobs,
            stop,
            outer,
            failed,
        })
    }

    /// Queues `chunks` for the terminal; waits only while the thread's queue is full. An error
    /// when the thread has ended.
    pub async fn write(&self, chunks: Vec<Arc<[u8]>>) -> Result<(), ()> {
        if self.failed.load(Ordering::Relaxed) {
            return Err(());
        }
        self.jobs.send(Job::Write(chunks)).await.map_err(|_| ())
    }

    /// Waits until everything queued so far has been written (or given up), at most
    /// [`FLUSH_WAIT`].
    pub async fn flush(&self) {
        let flushed = async {
            let (done, wait) = oneshot::channel();
            if self.jobs.send(Job::Flush(done)).await.is_ok() {
                let _ = wait.await;
            }
        };
        let _ = tokio::time::timeout(FLUSH_WAIT, flushed).await;
    }

    /// Flushes, then the bytes that undo what was written, as the `restore` control carries
    /// them. The record starts again empty: the client writes them.
    pub async fn undo(&self) -> String {
        self.flush().await;
        let mut outer = self.outer.lock();
        let undo = crate::restore::undo(&outer.modes());
        *outer = Outer::default();
        String::from_utf8_lossy(&undo).into_owned()
    }
}

impl Drop for TerminalWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Writes every chunk, waiting for room when the terminal is full, until `stop`.
fn write_all(fd: &OwnedFd, chunks: &[Arc<[u8]>], stop: &AtomicBool) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> = chunks
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| std::io::IoSlice::new(c))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match rustix::io::writev(fd, rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => std::io::IoSlice::advance_slices(&mut rest, n),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => loop {
                if stop.load(Ordering::Relaxed) {
                    return Err(std::io::Error::other("the client left"));
                }
                let mut fds = [rustix::event::PollFd::new(
                    fd,
                    rustix::event::PollFlags::OUT,
                )];
                let timeout = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: STOP_POLL.as_nanos() as i64,
                };
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(0) | Err(rustix::io::Errno::INTR) => {}
                    Ok(_) => break,
                    Err(err) => return Err(err.into()),
                }
            },
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}
