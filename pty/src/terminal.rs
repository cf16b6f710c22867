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

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use crate::restore::Outer;
use crate::wire::PenOnly;

/// How long the pane host waits for the descriptor after agreeing to take it, and the client for
/// room to send it.
pub const HANDOVER_DEADLINE: Duration = Duration::from_secs(10);

/// How long a flush waits for the terminal to take what was queued before it (a terminal that
/// takes nothing is given up on).
const FLUSH_WAIT: Duration = Duration::from_secs(1);

/// The pane host's side of the hand-over: the client's terminal, received on `stream` within
/// [`HANDOVER_DEADLINE`], and the thread that writes it for client `client`; with `keyboard`,
/// the client's keyboard too, sent beside it (see [`Keyboard`]). `buffered` is whether the
/// connection's reader already holds bytes the client sent after its request: the client
/// sends nothing before its terminal, so the descriptors they carried are lost.
pub async fn take(
    stream: &UnixStream,
    buffered: bool,
    client: u64,
    keyboard: bool,
) -> std::io::Result<(TerminalWriter, Option<OwnedFd>)> {
    use std::io::{Error, ErrorKind};
    if buffered {
        return Err(Error::new(
            ErrorKind::InvalidData,
            "the client sent bytes before its terminal",
        ));
    }
    let count = if keyboard { 2 } else { 1 };
    match tokio::time::timeout(HANDOVER_DEADLINE, receive(stream, count)).await {
        Ok(fds) => {
            let mut fds = fds?.into_iter();
            let (Some(terminal), keyboard) = (fds.next(), fds.next()) else {
                return Err(Error::new(ErrorKind::InvalidData, "no terminal"));
            };
            Ok((TerminalWriter::start(terminal, client)?, keyboard))
        }
        Err(_) => Err(Error::new(
            ErrorKind::TimedOut,
            format!("no terminal within {} s", HANDOVER_DEADLINE.as_secs()),
        )),
    }
}

/// Receives the `count` descriptors the client sends with one byte; an error names what came
/// instead. Each must be a terminal: the pane host writes and reads nothing else.
async fn receive(stream: &UnixStream, count: usize) -> std::io::Result<Vec<OwnedFd>> {
    let fds = crate::fdpass::receive(stream, count, "terminal byte").await?;
    if !fds.iter().all(rustix::termios::isatty) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a descriptor the client sent is not a terminal",
        ));
    }
    Ok(fds)
}

/// The attach client's keyboard, read by the pane host while the client lets it (issue 13,
/// key echo): a keystroke then reaches the pane without crossing the client. Only reads that
/// can hold nothing of the client's own go to the pane from here: a read with the client's
/// prefix byte or an escape (which may be the prefix in an extended keyboard encoding, the
/// start of a sequence cut between reads, or a terminal's answer) is given back whole, and
/// the pane host reads no more until the client says so. The client filters those keys
/// exactly as the ones it reads itself, so bindings, views and the detach key stay its own.
pub struct Keyboard {
    fd: tokio::io::unix::AsyncFd<OwnedFd>,
    prefix: u8,
    buf: Box<[u8; 4096]>,
}

/// One read of a [`Keyboard`].
#[derive(Debug, PartialEq, Eq)]
pub enum KeyRead {
    /// Keystrokes for the pane: no prefix byte, no escape.
    Pane(Vec<u8>),
    /// Keystrokes for the client.
    Client(Vec<u8>),
    /// The keyboard gives no more input (the terminal went away), or cannot be read.
    Gone,
}

impl Keyboard {
    /// Must run inside the runtime (the descriptor is registered with its reactor).
    pub fn new(fd: OwnedFd, prefix: u8) -> std::io::Result<Keyboard> {
        use rustix::fs::OFlags;
        // The client opened it non-blocking; a descriptor that is not would stall the runtime.
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        if !flags.contains(OFlags::NONBLOCK) {
            rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
        }
        let fd = register_reader(fd)?;
        Ok(Keyboard {
            fd,
            prefix,
            buf: Box::new([0; 4096]),
        })
    }

    /// The next read of the keyboard. Cancel-safe: the read happens only after readiness,
    /// inside one poll.
    pub async fn read(&mut self) -> KeyRead {
        match read_ready(&self.fd, &mut self.buf[..]).await {
            Some(n) => classify(&self.buf[..n], self.prefix),
            None => KeyRead::Gone,
        }
    }
}

/// Registers `fd` (non-blocking) with the runtime for reading: a keyboard, read by the pane
/// host ([`Keyboard`]) or by the attach client. Must run inside the runtime.
pub fn register_reader(fd: OwnedFd) -> std::io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: `fd` is an `OwnedFd` moved into the `AsyncFd`, so the descriptor stays open and
    // refers to the same file for as long as the registration lives.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|err| std::io::Error::other(err.to_string()))
}

/// One read of `fd` into `buf` once it is readable: the byte count, or `None` at its end or
/// when it cannot be read. Cancel-safe: the read happens only after readiness, inside one poll.
pub async fn read_ready(fd: &tokio::io::unix::AsyncFd<OwnedFd>, buf: &mut [u8]) -> Option<usize> {
    loop {
        let mut ready = fd.readable().await.ok()?;
        match ready.try_io(|fd| rustix::io::read(fd.get_ref(), &mut *buf).map_err(Into::into)) {
            Ok(Ok(0)) => return None,
            Ok(Ok(n)) => return Some(n),
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => return None,
            Err(_would_block) => {}
        }
    }
}

/// Whose keystrokes `keys` are: the client's if they hold its `prefix` byte or an escape.
fn classify(keys: &[u8], prefix: u8) -> KeyRead {
    if keys.iter().any(|&b| b == prefix || b == 0x1b) {
        KeyRead::Client(keys.to_vec())
    } else {
        KeyRead::Pane(keys.to_vec())
    }
}

/// Sends `fds` (the terminal, and the keyboard if the pane host takes it) over `stream` with
/// one byte: the client's side of [`receive`]. Blocking.
pub fn send(stream: impl AsFd, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    crate::fdpass::send_blocking(stream, b'T', fds, HANDOVER_DEADLINE)
}

/// Output for a client's terminal: the bytes, and the ranges of them the screen model read as
/// whole plain or styled lines (see [`PenOnly`]).
pub type Chunk = (Arc<[u8]>, PenOnly);

/// What the writer thread is asked to do, in order.
enum Job {
    /// Write these chunks, unless they were dropped ([`TerminalWriter::drop_unwritten`]) after
    /// this generation was queued.
    Write(Vec<Chunk>, u64),
    /// Answer once everything before has been written.
    Flush(oneshot::Sender<()>),
}

/// A thread writing to one client's terminal. Dropping it stops the thread after the write in
/// progress (a terminal that takes nothing is given up within [`STOP_POLL`]).
pub struct TerminalWriter {
    jobs: mpsc::Sender<Job>,
    /// The terminal, shared with the thread: a small write when the thread has nothing to do
    /// is made at once by the caller ([`TerminalWriter::write`]).
    fd: Arc<OwnedFd>,
    /// Write jobs queued or in progress on the thread; the caller writes itself only at 0,
    /// so the two never write at once and the bytes stay in order.
    pending: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// What the written bytes turned on in the terminal, shared with the thread.
    outer: Arc<parking_lot::Mutex<Outer>>,
    /// Set when the terminal failed (hung up, closed).
    failed: Arc<AtomicBool>,
    /// How far behind the terminal is, shared with the thread ([`Backlog`]).
    backlog: Arc<Backlog>,
    client: u64,
}

/// The output handed to the writer thread that the terminal has not taken yet, and how much
/// it has taken. A terminal behind a slow link takes output at its link's pace; the attach
/// task measures how far behind it is by these (the output left in the pane's queue behind
/// it is what a redraw replaces).
pub struct Backlog {
    /// Bytes queued for the thread or in its write, not yet taken by the terminal.
    bytes: AtomicUsize,
    /// Every byte the terminal has taken.
    taken: AtomicU64,
    /// When a write first found the terminal full since [`Backlog::full_since`] was last
    /// cleared, and what it had taken then.
    full: parking_lot::Mutex<Option<(std::time::Instant, u64)>>,
    /// Notified when the thread finishes a write or takes a step in one.
    progress: tokio::sync::Notify,
    /// Bumped by [`TerminalWriter::drop_unwritten`]: writes queued under an older generation
    /// are not written, and the one in progress stops.
    generation: AtomicU64,
}

impl Backlog {
    fn new() -> Backlog {
        Backlog {
            bytes: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
            full: parking_lot::Mutex::new(None),
            progress: tokio::sync::Notify::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// A write found the terminal full (it took part of it or nothing).
    fn found_full(&self) {
        let mut full = self.full.lock();
        if full.is_none() {
            *full = Some((
                std::time::Instant::now(),
                self.taken.load(Ordering::Acquire),
            ));
        }
    }

    /// When a write first found the terminal full since the last call, and what the terminal
    /// had taken then; the next write that finds it full starts again.
    pub fn full_since(&self, clear: bool) -> Option<(std::time::Instant, u64)> {
        let mut full = self.full.lock();
        if clear {
            full.take()
        } else {
            *full
        }
    }

    /// Waits until the thread has written more (or finished a write).
    pub async fn progressed(&self) {
        self.progress.notified().await;
    }

    fn dropped(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) != generation
    }
}

/// How often a writer waiting for a full terminal checks whether it should stop.
const STOP_POLL: Duration = Duration::from_millis(20);

/// The most a caller writes itself, when the thread is idle (a typed key's echo, a line, a
/// prompt's redraw); more goes to the thread, so a flood is written beside the model, not by
/// the model's own thread.
const DIRECT_MAX: usize = 16 * 1024;

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
        let fd = Arc::new(fd);
        let pending = Arc::new(AtomicUsize::new(0));
        let backlog = Arc::new(Backlog::new());
        let (thread_stop, thread_failed, thread_outer, thread_fd, thread_pending) = (
            Arc::clone(&stop),
            Arc::clone(&failed),
            Arc::clone(&outer),
            Arc::clone(&fd),
            Arc::clone(&pending),
        );
        let thread_backlog = Arc::clone(&backlog);
        std::thread::Builder::new()
            .name(format!("terminal-{client}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                while let Some(job) = rx.blocking_recv() {
                    match job {
                        Job::Write(chunks, generation) => {
                            // Nothing is written once the client has left, the terminal
                            // failed or the output was dropped for a redraw.
                            let total: usize = chunks.iter().map(|(c, _)| c.len()).sum();
                            if !thread_failed.load(Ordering::Relaxed)
                                && !thread_stop.load(Ordering::Relaxed)
                                && !thread_backlog.dropped(generation)
                            {
                                write_job(
                                    &thread_fd,
                                    &chunks,
                                    Cancel {
                                        stop: &thread_stop,
                                        backlog: &thread_backlog,
                                        generation,
                                    },
                                    &thread_failed,
                                    &thread_outer,
                                    client,
                                );
                            }
                            thread_backlog.bytes.fetch_sub(total, Ordering::AcqRel);
                            thread_backlog.progress.notify_one();
                            // After the record: a caller that sees 0 writes after all of it.
                            thread_pending.fetch_sub(1, Ordering::Release);
                        }
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(TerminalWriter {
            jobs,
            fd,
            pending,
            stop,
            outer,
            failed,
            backlog,
            client,
        })
    }

    /// Bytes handed to the thread that the terminal has not taken yet.
    pub fn unwritten(&self) -> usize {
        self.backlog.bytes.load(Ordering::Acquire)
    }

    /// Every byte the terminal has taken so far.
    pub fn taken(&self) -> u64 {
        self.backlog.taken.load(Ordering::Acquire)
    }

    /// What the thread has not written yet, to wait on ([`Backlog::progressed`]) apart from
    /// the writer.
    pub fn backlog(&self) -> Arc<Backlog> {
        Arc::clone(&self.backlog)
    }

    /// Drops what the thread has not written yet (the write in progress stops where it is):
    /// a redraw replaces it. A sequence cut in the middle is ended by the redraw's own first
    /// escape, which starts from a known state.
    pub fn drop_unwritten(&self) {
        self.backlog.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Writes `chunks` to the terminal: at once if they are small and the thread is idle
    /// (as much as the terminal takes without waiting), the rest by the thread; waits only
    /// while the thread's queue is full. An error when the terminal failed or the thread
    /// has ended.
    pub async fn write(&self, mut chunks: Vec<Chunk>) -> Result<(), ()> {
        if self.failed.load(Ordering::Relaxed) {
            return Err(());
        }
        let total: usize = chunks.iter().map(|(c, _)| c.len()).sum();
        if total <= DIRECT_MAX && self.pending.load(Ordering::Acquire) == 0 {
            match write_now(&self.fd, &chunks) {
                Ok(written) => {
                    self.backlog
                        .taken
                        .fetch_add(written as u64, Ordering::AcqRel);
                    let mut outer = self.outer.lock();
                    let mut left = written;
                    for (chunk, pen_only) in &chunks {
                        let part = left.min(chunk.len());
                        if part == chunk.len() {
                            outer.observe_output(chunk, pen_only.ranges());
                        } else {
                            // A range cut short may end inside a sequence: scanned.
                            outer.observe(&chunk[..part]);
                        }
                        left -= part;
                    }
                    drop(outer);
                    if written == total {
                        return Ok(());
                    }
                    self.backlog.found_full();
                    chunks = remainder(&chunks, written);
                }
                Err(err) => {
                    tracing::info!(
                        "attach client {}: its terminal took no more output: {err}",
                        self.client
                    );
                    self.failed.store(true, Ordering::Relaxed);
                    return Err(());
                }
            }
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        let total: usize = chunks.iter().map(|(c, _)| c.len()).sum();
        self.backlog.bytes.fetch_add(total, Ordering::AcqRel);
        let generation = self.backlog.generation.load(Ordering::Acquire);
        if self
            .jobs
            .send(Job::Write(chunks, generation))
            .await
            .is_err()
        {
            self.backlog.bytes.fetch_sub(total, Ordering::AcqRel);
            self.pending.fetch_sub(1, Ordering::Release);
            return Err(());
        }
        Ok(())
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

/// What ends a write of the thread before it is done: the client leaving, or its output
/// dropped for a redraw.
#[derive(Clone, Copy)]
struct Cancel<'a> {
    stop: &'a AtomicBool,
    backlog: &'a Backlog,
    generation: u64,
}

impl Cancel<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn cancelled(&self) -> bool {
        self.stopped() || self.backlog.dropped(self.generation)
    }
}

/// One job of the writer thread: writes `chunks` and records what they turned on; marks the
/// terminal failed when it takes no more. A job dropped for a redraw records what of it was
/// written.
fn write_job(
    fd: &OwnedFd,
    chunks: &[Chunk],
    cancel: Cancel<'_>,
    failed: &AtomicBool,
    outer: &parking_lot::Mutex<Outer>,
    client: u64,
) {
    match write_all(fd, chunks, cancel) {
        Ok(written) if written == chunks.iter().map(|(c, _)| c.len()).sum::<usize>() => {
            let mut outer = outer.lock();
            for (chunk, pen_only) in chunks {
                outer.observe_output(chunk, pen_only.ranges());
            }
        }
        Ok(mut written) => {
            // Dropped part-way: what was written is scanned.
            let mut outer = outer.lock();
            for (chunk, _) in chunks {
                let part = written.min(chunk.len());
                outer.observe(&chunk[..part]);
                written -= part;
            }
        }
        Err(err) => {
            if !cancel.stopped() {
                tracing::info!("attach client {client}: its terminal took no more output: {err}");
            }
            failed.store(true, Ordering::Relaxed);
        }
    }
}

/// Writes what the terminal takes of `chunks` without waiting: the byte count.
fn write_now(fd: &OwnedFd, chunks: &[Chunk]) -> std::io::Result<usize> {
    let mut slices = io_slices(chunks.iter().map(|(c, _)| &c[..]));
    writev_some(fd, &mut &mut slices[..])
}

/// The non-empty `parts` as the slices of one vectored write.
pub fn io_slices<'a>(parts: impl Iterator<Item = &'a [u8]>) -> Vec<std::io::IoSlice<'a>> {
    parts
        .filter(|p| !p.is_empty())
        .map(std::io::IoSlice::new)
        .collect()
}

/// Writes `rest` with `writev` until all of it is written or `fd` would block, advancing
/// `rest` past what was written: the byte count. An interrupted write is tried again.
pub fn writev_some(
    fd: impl AsFd,
    rest: &mut &mut [std::io::IoSlice<'_>],
) -> std::io::Result<usize> {
    let mut written = 0;
    while !rest.is_empty() {
        match rustix::io::writev(&fd, rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                written += n;
                std::io::IoSlice::advance_slices(rest, n);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => break,
            Err(err) => return Err(err.into()),
        }
    }
    Ok(written)
}

/// What is left of `chunks` after their first `written` bytes.
fn remainder(chunks: &[Chunk], mut written: usize) -> Vec<Chunk> {
    let mut rest = Vec::with_capacity(chunks.len());
    for (chunk, pen_only) in chunks {
        if written >= chunk.len() {
            written -= chunk.len();
        } else if written > 0 {
            rest.push((Arc::from(&chunk[written..]), pen_only.after(written)));
            written = 0;
        } else {
            rest.push((Arc::clone(chunk), pen_only.clone()));
        }
    }
    rest
}

/// Writes every chunk, waiting for room when the terminal is full, until the client leaves
/// (an error) or the output is dropped for a redraw: the bytes written. What the terminal
/// takes is taken off the backlog as it goes.
fn write_all(fd: &OwnedFd, chunks: &[Chunk], cancel: Cancel<'_>) -> std::io::Result<usize> {
    let mut written = 0;
    let result = write_all_counted(fd, chunks, cancel, &mut written);
    // The job's total is taken off the backlog by the caller: give back what was taken off
    // here as it went.
    cancel.backlog.bytes.fetch_add(written, Ordering::AcqRel);
    result.map(|()| written)
}

/// [`write_all`], counting the bytes written in `written` and taking them off the backlog as
/// the terminal takes them.
fn write_all_counted(
    fd: &OwnedFd,
    chunks: &[Chunk],
    cancel: Cancel<'_>,
    written: &mut usize,
) -> std::io::Result<()> {
    let mut slices = io_slices(chunks.iter().map(|(c, _)| &c[..]));
    let mut rest = &mut slices[..];
    loop {
        let n = writev_some(fd, &mut rest)?;
        *written += n;
        cancel.backlog.bytes.fetch_sub(n, Ordering::AcqRel);
        cancel.backlog.taken.fetch_add(n as u64, Ordering::AcqRel);
        if n > 0 {
            cancel.backlog.progress.notify_one();
        }
        if rest.is_empty() {
            return Ok(());
        }
        cancel.backlog.found_full();
        // The terminal is full: wait for room, checking every STOP_POLL whether to stop.
        loop {
            if cancel.stopped() {
                return Err(std::io::Error::other("the client left"));
            }
            if cancel.cancelled() {
                return Ok(());
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_of_a_partial_write_starts_at_the_first_byte_not_written() {
        let chunks: Vec<Chunk> = [&b"abc"[..], b"", b"defg"]
            .into_iter()
            .map(|c| (Arc::from(c), PenOnly::of(std::iter::once(1..c.len()))))
            .collect();
        let joined = |v: &[Chunk]| {
            v.iter()
                .flat_map(|(c, _)| c.iter().copied())
                .collect::<Vec<u8>>()
        };
        // The ranges the model reported (all of each chunk but its first byte) follow the
        // bytes: the same bytes of the stream after a cut.
        let claimed = |v: &[Chunk]| {
            let mut at = 0;
            let mut bytes = Vec::new();
            for (chunk, pen_only) in v {
                bytes.extend(pen_only.ranges().map(|r| (at + r.start, at + r.end)));
                at += chunk.len();
            }
            bytes
        };
        for written in 0..=7 {
            let rest = remainder(&chunks, written);
            assert_eq!(joined(&rest), b"abcdefg"[written..].to_vec(), "{written}");
            let expected: Vec<(usize, usize)> = [(1, 3), (4, 7)]
                .into_iter()
                .map(|(s, e): (usize, usize)| (s.max(written) - written, e.saturating_sub(written)))
                .filter(|(s, e)| s < e)
                .collect();
            assert_eq!(claimed(&rest), expected, "{written}");
        }
    }

    #[test]
    fn a_read_with_the_prefix_or_an_escape_is_the_clients() {
        let prefix = 0x02;
        for pane in [
            &b"hello"[..],
            b"a\r",
            b"\x7f\x03\x04",
            b"\xc3\xa9t\xc3\xa9",
            b"\x1c",
        ] {
            assert_eq!(
                classify(pane, prefix),
                KeyRead::Pane(pane.to_vec()),
                "{pane:?}"
            );
        }
        for client in [
            &b"\x02"[..],
            b"ab\x02d",
            b"\x1b",
            b"\x1b[A",
            b"x\x1b[98;5u",
            b"\x1b]11;rgb:0/0/0\x07",
        ] {
            assert_eq!(
                classify(client, prefix),
                KeyRead::Client(client.to_vec()),
                "{client:?}"
            );
        }
        // Another prefix: C-b is then the pane's.
        assert_eq!(classify(b"\x02", 0x11), KeyRead::Pane(vec![0x02]));
        assert_eq!(classify(b"\x11", 0x11), KeyRead::Client(vec![0x11]));
    }
}
