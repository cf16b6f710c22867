//! Input: the guarded write of spec §3 ([`Pane::send`]) and the unguarded writes of attached
//! keyboards and query answers, each one transaction under the input lock with a deadline and
//! an abort epoch. A file of its own because it is the pane's only path to the PTY's input, and
//! the ordering it keeps (compare and first byte under the state lock, no interleaving under
//! the input lock) is read best in one place.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::{lock_wait, Expect, Identity, Pane, PaneState};
use crate::input::{encode_paste, Step, DEFAULT_TIMEOUT_MS};
use crate::screen::Screen;

/// The outcome of a send. A conflict wrote zero bytes.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    Sent {
        revision: u64,
    },
    Conflict {
        actual: Identity,
        exited: bool,
    },
    /// The requester went away while the send waited for the input lock; nothing was written.
    Abandoned,
}

/// Why an input transaction ended early. Every variant but `InputBusy` may follow written
/// bytes; `written` says how many, so a caller never mistakes a partial write for none.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(
        "could not start within {} ms: the input lock stayed busy (another transaction or a \
         restart is still running); nothing was written",
        waited.as_millis()
    )]
    InputBusy { waited: Duration },
    #[error(
        "the program did not read its input within {} ms: {written} bytes written, stopped in \
         step {} of {steps}",
        timeout.as_millis(),
        step + 1
    )]
    TimedOut {
        written: usize,
        step: usize,
        steps: usize,
        timeout: Duration,
    },
    #[error("aborted by {by}: {written} bytes written, stopped in step {} of {steps}", step + 1)]
    Aborted {
        written: usize,
        step: usize,
        steps: usize,
        by: &'static str,
    },
    #[error("write to the PTY failed after {written} bytes: {source}")]
    Io {
        written: usize,
        source: std::io::Error,
    },
}

impl WriteError {
    /// How many bytes of the transaction reached the PTY before it ended.
    pub fn written(&self) -> usize {
        match self {
            WriteError::InputBusy { .. } => 0,
            WriteError::TimedOut { written, .. }
            | WriteError::Aborted { written, .. }
            | WriteError::Io { written, .. } => *written,
        }
    }
}

/// The refusal of a transaction that would start after the pane host began stopping its child:
/// nothing was written.
fn stopped(by: &'static str, steps: usize) -> WriteError {
    WriteError::Aborted {
        written: 0,
        step: 0,
        steps,
        by,
    }
}

/// What the compare of a send decided.
enum Start {
    /// A restart is replacing the child: wait for it, then compare again.
    Restarting,
    /// Zero bytes written.
    Conflict(SendOutcome),
    /// The transaction runs; the first step's bytes and how many of them the PTY took at once.
    Started(Transaction, Option<(Vec<u8>, usize)>),
}

/// The bookkeeping of one running transaction.
struct Transaction {
    written: usize,
    step: usize,
    steps: usize,
    write_timeout: Duration,
    /// When the writes must be done by; moved later by each delay step.
    deadline: tokio::time::Instant,
    /// The abort epoch when the transaction started.
    epoch: u64,
    abort: watch::Receiver<(u64, &'static str)>,
}

impl Transaction {
    fn timed_out(&self) -> WriteError {
        WriteError::TimedOut {
            written: self.written,
            step: self.step,
            steps: self.steps,
            timeout: self.write_timeout,
        }
    }

    fn aborted(&self) -> WriteError {
        WriteError::Aborted {
            written: self.written,
            step: self.step,
            steps: self.steps,
            by: self.abort.borrow().1,
        }
    }

    fn io(&self, source: std::io::Error) -> WriteError {
        WriteError::Io {
            written: self.written,
            source,
        }
    }
}

/// Whether input could submit what the program's input line holds: it has an Enter (CR) or a
/// line feed in it.
pub(super) fn could_submit(bytes: &[u8]) -> bool {
    memchr::memchr2(b'\r', b'\n', bytes).is_some()
}

/// Whether a send step could submit (see [`could_submit`]); a key is judged by its bytes.
fn step_could_submit(step: &Step) -> bool {
    match step {
        Step::Raw(bytes) => could_submit(bytes),
        Step::Paste(text) => could_submit(text.as_bytes()),
        Step::Key(key) => could_submit(&key.encode(false)),
        Step::DelayMs(_) => false,
    }
}

impl Pane {
    /// The guarded write of spec §3: compare under the input lock, then either zero bytes and
    /// a conflict, or the whole transaction with no other input interleaved.
    ///
    /// Bounded: the wait for the input lock (and for a restart in progress) and the writes each
    /// have a deadline derived from `write_timeout` (see [`lock_wait`]), and a restart or kill
    /// aborts the transaction at once. On expiry or abort the error says how many bytes were
    /// written, and the input lock is released.
    ///
    /// With `announce`, a transaction that writes anything is announced as input from outside
    /// the program (the lifecycle event `typed`, see [`Pane::announce_typing`]) after its
    /// compare and before its first byte; the DING worker's own notices are not.
    pub async fn send(
        &self,
        expect: &Expect,
        steps: &[Step],
        requester_gone: &(dyn Fn() -> bool + Sync),
        write_timeout: Duration,
        announce: bool,
    ) -> Result<SendOutcome, WriteError> {
        let (_input, deadline) = self.take_input(write_timeout).await?;
        let (mut txn, first_write) = loop {
            // A request queued behind another transaction (or a restart) whose sender has
            // since gone (a killed daemon, a closed CLI) is dropped before a byte is written.
            if requester_gone() {
                return Ok(SendOutcome::Abandoned);
            }
            match self.compare_and_start(expect, steps, write_timeout, announce)? {
                Start::Restarting => self.wait_restart(deadline, write_timeout).await?,
                Start::Conflict(outcome) => return Ok(outcome),
                Start::Started(txn, first_write) => break (txn, first_write),
            }
        };
        let mut rest = steps;
        if let Some((bytes, written)) = first_write {
            self.write_bounded(&bytes[written..], &mut txn).await?;
            rest = &steps[1..];
            txn.step = 1;
        }
        for step in rest {
            match step {
                Step::DelayMs(ms) => self.delay(Duration::from_millis(*ms), &mut txn).await?,
                _ => {
                    let bytes = {
                        let st = self.state.lock();
                        encode_step(&st.screen, step)
                    };
                    self.write_bounded(&bytes, &mut txn).await?;
                }
            }
            txn.step += 1;
        }
        let revision = self.state.lock().revision;
        Ok(SendOutcome::Sent { revision })
    }

    /// spec §3 steps 1–3 and the start of step 4, all under the state lock: drain, compare,
    /// and on a match write the first step's bytes as far as the PTY takes them at once.
    fn compare_and_start(
        &self,
        expect: &Expect,
        steps: &[Step],
        write_timeout: Duration,
        announce: bool,
    ) -> Result<Start, WriteError> {
        let mut st = self.state.lock();
        // A kill publishes `stopping` under this lock, so a transaction queued behind the one
        // it aborted is refused here, before the compare and its first byte.
        if let Some(by) = st.stopping {
            return Err(stopped(by, steps.len()));
        }
        // A restart publishes `restarting` under this lock, so checking it here (not only
        // before taking the input lock) is what keeps a transaction from starting on a child
        // that is being stopped.
        if *self.restarting.borrow() {
            return Ok(Start::Restarting);
        }
        if reads_screen_first(expect, steps) {
            self.drain_pending(&mut st);
        }
        let actual = self.identity_of(&st);
        let exited = st.exited.is_some();
        if exited || !expect.is_met_by(&actual) {
            return Ok(Start::Conflict(SendOutcome::Conflict { actual, exited }));
        }
        // The transaction starts here: a restart or kill that comes later bumps the abort
        // epoch under this same lock, so it is always seen.
        let mut txn = self.begin(steps.len(), write_timeout);
        // Input from outside the program is announced before its first byte, as a person's
        // keystrokes are: a supervisor's draft and Enter start a turn the harness may not show
        // yet, exactly like a person's (spec §7.4). A conflict wrote nothing and says nothing.
        if announce && steps.iter().any(|step| !matches!(step, Step::DelayMs(_))) {
            self.announce_typing(&mut st, steps.iter().any(step_could_submit));
        }
        // The first bytes go out under the same lock as the compare, so nothing the program
        // prints can land between the two.
        let first_write = match steps.first() {
            Some(step @ (Step::Raw(_) | Step::Paste(_) | Step::Key(_))) => {
                let bytes = encode_step(&st.screen, step);
                let written = self.write_locked(&mut st, &bytes, &mut txn)?;
                Some((bytes, written))
            }
            _ => None,
        };
        Ok(Start::Started(txn, first_write))
    }

    /// Takes the input lock, waiting at most [`lock_wait`]`(write_timeout)`. Returns the guard
    /// and the deadline, which also bounds waiting out a restart in progress.
    async fn take_input(
        &self,
        write_timeout: Duration,
    ) -> Result<(tokio::sync::MutexGuard<'_, ()>, tokio::time::Instant), WriteError> {
        let waited = lock_wait(write_timeout);
        let deadline = tokio::time::Instant::now() + waited;
        let guard = tokio::time::timeout_at(deadline, self.input.lock())
            .await
            .map_err(|_| WriteError::InputBusy { waited })?;
        Ok((guard, deadline))
    }

    /// Waits until no restart is in progress, at most until `deadline`. A transaction never
    /// starts while the old child is being stopped, so none straddles a restart.
    async fn wait_restart(
        &self,
        deadline: tokio::time::Instant,
        write_timeout: Duration,
    ) -> Result<(), WriteError> {
        let busy = || WriteError::InputBusy {
            waited: lock_wait(write_timeout),
        };
        let mut restarting = self.restarting.subscribe();
        let done = tokio::time::timeout_at(deadline, restarting.wait_for(|busy| !*busy))
            .await
            .map(|waited| waited.is_ok());
        match done {
            Ok(true) => Ok(()),
            _ => Err(busy()),
        }
    }

    /// Starts a transaction's bookkeeping. Called under the state lock, after the checks that
    /// allow it to write.
    fn begin(&self, steps: usize, write_timeout: Duration) -> Transaction {
        let mut abort = self.abort.subscribe();
        let epoch = abort.borrow_and_update().0;
        Transaction {
            written: 0,
            step: 0,
            steps,
            write_timeout,
            deadline: tokio::time::Instant::now() + write_timeout,
            epoch,
            abort,
        }
    }

    /// True if a restart or kill began after the transaction of `epoch` started. Checked under
    /// the state lock before every write, because the abort is published under it.
    fn aborted_since(&self, epoch: u64) -> bool {
        self.abort.borrow().0 != epoch
    }

    /// Ends input for good, because the pane host is stopping its child (`kill`, SIGTERM): the
    /// transaction in flight writes no further byte, and every later one (queued sends,
    /// attached keystrokes, query answers) is refused with `written: 0` before its compare.
    pub fn stop_input(&self, by: &'static str) {
        let mut st = self.state.lock();
        st.stopping = Some(by);
        self.abort_locked(&st, by);
    }

    /// Ends every input transaction now: its next write is refused and its waits return at
    /// once. Restart and kill call it instead of waiting for the input lock. The caller holds
    /// the state lock (the guard proves it): publishing under that lock is what lets writers
    /// check it race-free before each write.
    pub(super) fn abort_locked(&self, _st: &PaneState, by: &'static str) {
        self.abort.send_modify(|(epoch, reason)| {
            *epoch += 1;
            *reason = by;
        });
    }

    /// A delay step: the input lock stays held; an abort ends it early. The write deadline
    /// moves by the delay, which is the transaction's own time, not the program's.
    async fn delay(&self, length: Duration, txn: &mut Transaction) -> Result<(), WriteError> {
        tokio::select! {
            () = tokio::time::sleep(length) => {}
            _ = txn.abort.changed() => return Err(txn.aborted()),
        }
        txn.deadline += length;
        Ok(())
    }

    /// Writes as much as the PTY takes without blocking; each successful write moves the
    /// revision. Every byte the PTY takes is counted in `txn.written` at once, so an error
    /// after a partial write reports the bytes that did reach the PTY, never zero (a caller
    /// treats zero as "never written" and may send it again).
    fn write_locked(
        &self,
        st: &mut PaneState,
        bytes: &[u8],
        txn: &mut Transaction,
    ) -> Result<usize, WriteError> {
        let mut written = 0;
        while written < bytes.len() {
            match rustix::io::write(self.master.get_ref(), &bytes[written..]) {
                Ok(n) => {
                    written += n;
                    txn.written += n;
                    st.bump(&self.revision_tx);
                }
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(txn.io(err.into())),
            }
        }
        Ok(written)
    }

    /// Writes all bytes, waiting for the PTY to drain when it is full, but never past the
    /// transaction's deadline and never after an abort. The caller holds the input lock.
    async fn write_bounded(
        &self,
        mut bytes: &[u8],
        txn: &mut Transaction,
    ) -> Result<(), WriteError> {
        while !bytes.is_empty() {
            let deadline = txn.deadline;
            let mut guard = tokio::select! {
                ready = self.master.writable() => ready.map_err(|err| txn.io(err))?,
                () = tokio::time::sleep_until(deadline) => return Err(txn.timed_out()),
                _ = txn.abort.changed() => return Err(txn.aborted()),
            };
            let epoch = txn.epoch;
            let result = guard.try_io(|fd| {
                let mut st = self.state.lock();
                if self.aborted_since(epoch) {
                    return Ok(None);
                }
                let n = rustix::io::write(fd.get_ref(), bytes).map_err(std::io::Error::from)?;
                st.bump(&self.revision_tx);
                Ok(Some(n))
            });
            match result {
                Ok(Ok(Some(n))) => {
                    txn.written += n;
                    bytes = &bytes[n..];
                }
                Ok(Ok(None)) => return Err(txn.aborted()),
                Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(Err(err)) => return Err(txn.io(err)),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// Writes unguarded input (attached keyboards, query answers) under the input lock, with
    /// the default deadline: a program that stops reading makes these bytes time out (and the
    /// caller drop them) instead of holding the lock.
    pub async fn write_input(&self, bytes: &[u8]) -> Result<(), WriteError> {
        let write_timeout = Duration::from_millis(DEFAULT_TIMEOUT_MS);
        let (_input, deadline) = self.take_input(write_timeout).await?;
        let mut txn = loop {
            {
                let st = self.state.lock();
                if let Some(by) = st.stopping {
                    return Err(stopped(by, 1));
                }
                if !*self.restarting.borrow() {
                    break self.begin(1, write_timeout);
                }
            }
            self.wait_restart(deadline, write_timeout).await?;
        };
        self.write_bounded(bytes, &mut txn).await
    }

    /// Writes the query answers the model produced while no writable client was attached.
    pub async fn answer_queries(self: Arc<Self>, mut answers: mpsc::UnboundedReceiver<Vec<u8>>) {
        while let Some(answer) = answers.recv().await {
            if let Err(err) = self.write_input(&answer).await {
                tracing::warn!("cannot answer a terminal query: {err}");
            }
        }
    }
}

/// Whether a send must read the output still pending on the PTY before it compares and writes.
///
/// A guarded send must (spec §3 step 1: the comparison is with everything the program printed
/// so far), and so must one whose steps are encoded from the screen's modes (a paste framed
/// iff bracketed paste is on, keys in application cursor mode), which output still pending
/// may change. An unguarded send of text and bytes compares nothing and writes the same bytes
/// whatever is pending, so it does not wait for that output to go through the screen model:
/// on a pane printing non-stop that can be hundreds of KiB (the kernel's PTY buffer).
fn reads_screen_first(expect: &Expect, steps: &[Step]) -> bool {
    !expect.is_empty()
        || steps
            .iter()
            .any(|step| matches!(step, Step::Paste(_) | Step::Key(_)))
}

fn encode_step(screen: &Screen, step: &Step) -> Vec<u8> {
    match step {
        Step::Raw(bytes) => bytes.clone(),
        Step::Paste(text) => encode_paste(text, screen.modes().bracketed_paste),
        Step::Key(key) => key.encode(screen.modes().application_cursor),
        Step::DelayMs(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unguarded_send_of_raw_bytes_skips_the_pending_output() {
        let raw = [Step::Raw(b"x".to_vec()), Step::DelayMs(10)];
        let unguarded = Expect::default();
        let guarded = Expect {
            revision: Some(7),
            ..Expect::default()
        };
        // spec §3 step 1: a compare-and-send always reads the pending output first.
        assert!(reads_screen_first(&guarded, &raw));
        assert!(reads_screen_first(&guarded, &[]));
        // Steps encoded from the screen's modes need them current, guarded or not.
        assert!(reads_screen_first(&unguarded, &[Step::Paste("p".into())]));
        assert!(reads_screen_first(
            &unguarded,
            &[Step::Raw(b"x".to_vec()), Step::Key(crate::input::Key::Up)]
        ));
        assert!(!reads_screen_first(&unguarded, &raw));
    }
}

#[cfg(test)]
mod submit_tests {
    use super::*;
    use crate::input::Key;

    #[test]
    fn only_input_with_an_enter_could_submit() {
        assert!(could_submit(b"draft\r"));
        assert!(could_submit(b"a\nb"));
        assert!(!could_submit(b"my draft"));
        assert!(!could_submit(b"\x7f\x7f\x1b[A"));
        assert!(step_could_submit(&Step::Key(Key::Enter)));
        assert!(step_could_submit(&Step::Key(Key::Ctrl(b'm'))));
        assert!(step_could_submit(&Step::Key(Key::Ctrl(b'j'))));
        assert!(!step_could_submit(&Step::Key(Key::Backspace)));
        assert!(!step_could_submit(&Step::Paste("no newline".into())));
        assert!(step_could_submit(&Step::Paste("two\nlines".into())));
        assert!(!step_could_submit(&Step::DelayMs(500)));
    }
}
