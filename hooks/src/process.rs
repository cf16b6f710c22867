//! Runs one handler program with a deadline and collects what it said.
//!
//! The handler is started from its argv (no shell, spec §12) in a process group of its own, so
//! a timeout can kill it together with anything it started. Four short-lived threads do the
//! blocking work: one writes the hook JSON to the child's stdin (a child that never reads must
//! not stall us on a full pipe), two drain stdout and stderr, one waits for the exit. The
//! calling thread only waits on a channel with the deadline as its timeout, so a fast handler
//! costs no polling delay.
//!
//! The exit waiter uses `waitid(WNOWAIT)`: it learns that the child exited without reaping it.
//! An unreaped child keeps its pid, and with it the process-group id, reserved, so killing the
//! group can never hit an unrelated process that reused the number. The child is reaped last,
//! after every kill.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

/// At most this much of each output stream is kept; the rest is read and dropped so the child
/// never blocks on a full pipe.
pub(crate) const OUTPUT_CAP_BYTES: usize = 1 << 20;

/// After a kill, how long to wait for the pipes to report what was already written.
const AFTER_KILL_GRACE: Duration = Duration::from_millis(200);

/// How a handler process ended.
#[derive(Debug)]
pub(crate) enum ProcessEnd {
    /// It exited or was killed by a signal before its deadline.
    Finished {
        status: ExitStatus,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// It was still running at its deadline; its process group was killed.
    TimedOut { stderr: Vec<u8> },
    /// It could not be started.
    SpawnFailed(std::io::Error),
    /// It exited, but its exit status could not be read.
    WaitFailed(std::io::Error),
}

enum ChildEvent {
    Exited,
    Output(Stream, Vec<u8>),
    Closed(Stream),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// Runs `argv` with `stdin` on its standard input and `env` added to its environment, and
/// waits at most `timeout` for it.
pub(crate) fn run(
    argv: &[String],
    stdin: Arc<[u8]>,
    env: &[(&str, &str)],
    timeout: Duration,
) -> ProcessEnd {
    let Some((program, args)) = argv.split_first() else {
        return ProcessEnd::SpawnFailed(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    let deadline = Instant::now() + timeout;
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return ProcessEnd::SpawnFailed(err),
    };
    let events = start_helper_threads(&mut child, stdin);
    collect(child, &events, deadline)
}

fn start_helper_threads(child: &mut Child, stdin: Arc<[u8]>) -> Receiver<ChildEvent> {
    let (sender, receiver) = mpsc::channel();
    if let Some(mut pipe) = child.stdin.take() {
        // A handler that exits without reading its input makes this write fail with EPIPE;
        // that is its right, not an error.
        thread::spawn(move || {
            let _ = pipe.write_all(&stdin);
        });
    }
    if let Some(pipe) = child.stdout.take() {
        spawn_reader(pipe, Stream::Stdout, sender.clone());
    }
    if let Some(pipe) = child.stderr.take() {
        spawn_reader(pipe, Stream::Stderr, sender.clone());
    }
    let pid = Pid::from_child(child);
    thread::spawn(move || {
        wait_for_exit_without_reaping(pid);
        let _ = sender.send(ChildEvent::Exited);
    });
    receiver
}

/// Forwards output as it arrives, so that what a handler wrote before a kill is not lost with
/// a reader still blocked on a pipe that something else holds open.
fn spawn_reader<R: Read + Send + 'static>(mut pipe: R, stream: Stream, sender: Sender<ChildEvent>) {
    thread::spawn(move || {
        let mut chunk = vec![0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => {
                    if sender
                        .send(ChildEvent::Output(stream, chunk[..read].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = sender.send(ChildEvent::Closed(stream));
    });
}

fn wait_for_exit_without_reaping(pid: Pid) {
    loop {
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            _ => return,
        }
    }
}

#[derive(Default)]
struct Collected {
    exited: bool,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    stdout_closed: bool,
    stderr_closed: bool,
}

impl Collected {
    fn take(&mut self, event: ChildEvent) {
        match event {
            ChildEvent::Exited => self.exited = true,
            ChildEvent::Output(stream, bytes) => {
                let kept = match stream {
                    Stream::Stdout => &mut self.stdout,
                    Stream::Stderr => &mut self.stderr,
                };
                let room = OUTPUT_CAP_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            ChildEvent::Closed(Stream::Stdout) => self.stdout_closed = true,
            ChildEvent::Closed(Stream::Stderr) => self.stderr_closed = true,
        }
    }

    fn complete(&self) -> bool {
        self.exited && self.stdout_closed && self.stderr_closed
    }

    /// Receives events until all have arrived or `until` passes; true when complete.
    fn receive_until(&mut self, events: &Receiver<ChildEvent>, until: Instant) -> bool {
        while !self.complete() {
            let remaining = until.saturating_duration_since(Instant::now());
            match events.recv_timeout(remaining) {
                Ok(event) => self.take(event),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    return false
                }
            }
        }
        true
    }
}

fn collect(mut child: Child, events: &Receiver<ChildEvent>, deadline: Instant) -> ProcessEnd {
    let mut collected = Collected::default();
    let complete = collected.receive_until(events, deadline);
    let exited_in_time = collected.exited;
    if !complete {
        // Either the handler is still running, or it exited and something it started still
        // holds its stdout or stderr open. Both end here: the group goes, whatever it holds.
        kill_group(&child);
        collected.receive_until(events, Instant::now() + AFTER_KILL_GRACE);
    }
    // Reaping comes after every kill (see the module comment).
    let status = child.wait();
    if !exited_in_time {
        return ProcessEnd::TimedOut {
            stderr: collected.stderr,
        };
    }
    match status {
        Ok(status) => ProcessEnd::Finished {
            status,
            stdout: collected.stdout,
            stderr: collected.stderr,
        },
        Err(err) => ProcessEnd::WaitFailed(err),
    }
}

fn kill_group(child: &Child) {
    // spec §8: a timed-out handler is killed with everything it started. ESRCH (the group is
    // already gone) is the only expected error and needs no handling.
    let _ = rustix::process::kill_process_group(Pid::from_child(child), Signal::KILL);
}
