//! The program's output: the reader that applies it to the screen model in bounded turns and
//! hands it to attached clients, the query answers and program status it carries, the end of
//! synchronized updates the program left open, and the memory let go of once the pane is
//! quiet. A file of its own because it is the pane's one long-running loop and what feeds it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clients::ClientSlot;
use super::{Pane, PaneState};
use crate::screen::PenOnlyRun;
use crate::wire::{Frame, PenOnly};
use belfry_proto::event::Event;

/// The most output one turn of the reader applies to the screen model before it lets requests
/// and attach streams run (issue 13, target 4). The model takes ~10 ns a byte on an idle
/// machine, so 32 KiB is ~0.3 ms of waiting for a `peek` or `send` that arrives mid-turn (the
/// 256 KiB turns before cost ~2.5 ms); the extra yield and poll per turn cost a few µs. Lines
/// the model skips the grid for cost far less, and for them 32 KiB also beat 16 and 64 KiB
/// turns on attached throughput (`docs/performance.md`, section 1 of the analysis).
pub const OUTPUT_TURN: usize = 32 * 1024;

impl Pane {
    /// Reads and applies everything the master has for us. Runs until the pane host ends.
    ///
    /// Once the pane has been quiet for [`RELEASE_AFTER`] after output that scrolled, the memory
    /// the screen model needed only while output was arriving is freed (see
    /// [`Pane::release_spare_memory`]).
    pub async fn read_output(self: Arc<Self>) {
        let mut buf = vec![0u8; OUTPUT_TURN];
        // What the model read as plain or styled lines in a turn, for attached clients.
        let mut pen_only = PenOnlyRun::default();
        loop {
            let (spare, behind) = {
                let st = self.state.lock();
                let behind = st.clients.iter().any(ClientSlot::waited_for);
                (st.screen.has_spare_rows(), behind)
            };
            if behind {
                self.wait_for_slow_clients().await;
                continue;
            }
            let readable = if spare {
                match tokio::time::timeout(RELEASE_AFTER, self.master.readable()).await {
                    Ok(readable) => readable,
                    Err(_quiet) => {
                        self.release_spare_memory();
                        continue;
                    }
                }
            } else {
                self.master.readable().await
            };
            let mut guard = match readable {
                Ok(guard) => guard,
                Err(err) => {
                    tracing::error!("PTY master not readable: {err}");
                    return;
                }
            };
            // At most [`OUTPUT_TURN`] bytes per turn, so a request or an attach stream waits
            // behind at most that much screen-model work. A read returns what the terminal
            // layer holds at that moment (4 KiB at a time while a program prints fast), so a
            // turn reads again until it has its fill or nothing is left: attached clients are
            // then woken once per turn for everything it read, not once per 4 KiB. Each read
            // is applied to the model as it comes, so the program can refill the terminal
            // layer meanwhile. The model may hold back the last screenful of plain or styled
            // lines a read ends with (`Screen::apply_deferring`) for the next reads' lines to
            // scroll off without the grid, across turns: whoever reads the screen next (a
            // request, a redraw, the release of spare memory once the pane is quiet) gives it
            // to the grid first. So while a program prints without pause, only the screenful
            // in front of a reader goes through the grid, not the last one of every turn.
            let result = guard.try_io(|fd| {
                let mut st = self.state.lock();
                let mut answers = Vec::new();
                let mut total = 0;
                pen_only.clear();
                while total < OUTPUT_TURN {
                    match rustix::io::read(fd.get_ref(), &mut buf[total..OUTPUT_TURN]) {
                        Ok(0) => break,
                        Ok(n) => {
                            answers.append(&mut st.screen.apply_deferring(&buf[total..total + n]));
                            pen_only.applied(&st.screen, n);
                            total += n;
                        }
                        Err(rustix::io::Errno::INTR) => {}
                        // Nothing more right now (or an error): what this turn read is done;
                        // a turn that read nothing reports the error itself.
                        Err(_) if total > 0 => break,
                        Err(err) => return Err(std::io::Error::from(err)),
                    }
                }
                if total > 0 {
                    self.after_output(&mut st, &buf[..total], &pen_only, answers);
                }
                Ok(total)
            });
            match result {
                Ok(Ok(0)) => {
                    // EOF on a master only happens when no slave is open; ours stays open.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                // A turn done: the master may still be readable, and `readable()` would return
                // at once without ever giving the thread away, starving peek, send and attached
                // clients while a program prints non-stop. Yield to them first: the runtime
                // polls for I/O before it resumes a yielded task, so a request that arrived
                // during this turn is served before the next one.
                Ok(Ok(_)) => {
                    self.note_activity();
                    tokio::task::yield_now().await;
                }
                Err(_would_block) => {}
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(Err(err)) => {
                    tracing::error!("PTY read failed: {err}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// Output was read or a request answered: the program's pages are let go of once the pane
    /// host has been quiet for a moment ([`Pane::release_program_pages`]).
    pub fn note_activity(&self) {
        let now = self.born.elapsed().as_millis() as u64;
        self.activity_at.store(now, Ordering::Relaxed);
        // Only the first activity after a release wakes the releasing task: a flood's reader
        // turns cost a clock read and a store each, not a wake-up.
        if !self.release_armed.load(Ordering::Acquire)
            && !self.release_armed.swap(true, Ordering::AcqRel)
        {
            self.activity.notify_one();
        }
    }

    /// Lets go of the program's pages ([`crate::program_pages`]) once the pane host has been
    /// quiet for [`RELEASE_AFTER`] after start-up or any activity ([`Pane::note_activity`]),
    /// so an idle pane host's resident size is what it holds itself. Runs until the pane host
    /// ends; waits without waking up while nothing happens.
    pub async fn release_program_pages(self: Arc<Self>) {
        loop {
            self.activity.notified().await;
            loop {
                let now = self.born.elapsed().as_millis() as u64;
                let quiet = now.saturating_sub(self.activity_at.load(Ordering::Relaxed));
                let quiet = Duration::from_millis(quiet);
                if quiet >= RELEASE_AFTER {
                    break;
                }
                tokio::time::sleep(RELEASE_AFTER - quiet).await;
            }
            // Disarmed first: activity from here on wakes this task again (what it maps after
            // the release is let go of after its own quiet moment).
            self.release_armed.store(false, Ordering::Release);
            crate::program_pages::release();
        }
    }

    /// Frees the rows the screen model's grid allocated for history beyond the screen and
    /// hands the freed heap back to the system, so an idle pane host holds only its screen and
    /// its compact history.
    ///
    /// This runs once the pane has been quiet for [`RELEASE_AFTER`], as the release of the
    /// program's pages does ([`Pane::release_program_pages`]), and maps again the code it
    /// runs; so it counts as activity, and the program's pages are let go of after it, by that
    /// task, whose own way back to waiting maps little. Whichever of the two came second used
    /// to decide what an idle pane host kept mapped: in some runs about half of them kept
    /// ~0.6 MiB more of the program after output.
    fn release_spare_memory(&self) {
        let released = self.state.lock().screen.release_spare_rows();
        // Outside the state lock: trimming walks the whole heap.
        if released {
            trim_heap();
        }
        self.note_activity();
    }

    /// Output just applied to the model (a turn of the reader, or what a send drained): the
    /// revision, attached clients, query answers.
    /// `pen_only`: what the model read of `bytes` as whole plain or styled lines.
    fn after_output(
        &self,
        st: &mut PaneState,
        bytes: &[u8],
        pen_only: &PenOnlyRun,
        answers: Vec<Vec<u8>>,
    ) {
        st.bump(&self.revision_tx);
        self.take_program_status(st);
        if !st.clients.is_empty() {
            st.broadcast(&Frame::Data(
                Arc::from(bytes),
                PenOnly::of(pen_only.ranges()),
            ));
        }
        if st.screen.sync_deadline().is_some() {
            self.sync_pending.notify_one();
        }
        self.answer_when_detached(st, answers);
    }

    /// The OSC 7501 strings the output just applied held: the records they change, stamped
    /// with the revision the output moved the pane to, and a `program-status` event for each
    /// change.
    fn take_program_status(&self, st: &mut PaneState) {
        let found = st.screen.take_status();
        if found.is_empty() {
            return;
        }
        let now = unix_ms();
        let mut changes = Vec::new();
        for string in found {
            st.status
                .take(string, st.revision, &st.incarnation, now, &mut changes);
        }
        self.publish_status_changes(st.revision, changes);
    }

    pub(super) fn publish_status_changes(
        &self,
        revision: u64,
        changes: Vec<crate::program_status::Change>,
    ) {
        for change in changes {
            let _ = self.events.send(Event::ProgramStatus {
                session: self.spec.session.clone(),
                id: change.id,
                old: change.old,
                new: change.new,
                cause: change.cause,
                revision,
            });
        }
    }

    /// spec §4: while no writable client is attached the pane host answers queries itself;
    /// otherwise the attached terminals see the query and one of them answers (see
    /// [`Pane::client_input`]). Never both.
    ///
    /// The program status query (OSC 7501) is the exception: the pane host answers it always,
    /// since it keeps the records whatever terminal is attached, and an attached terminal's
    /// own answer is taken out of its input ([`Pane::client_input`]).
    fn answer_when_detached(&self, st: &mut PaneState, answers: Vec<Vec<u8>>) {
        let detached = st.writable_clients() == 0;
        let mut terminal_queries = false;
        for answer in answers {
            let ours = answer.starts_with(crate::program_status::ANSWER_PREFIX);
            terminal_queries |= !ours;
            if detached || ours {
                let _ = self.answers.send(answer);
            }
        }
        if terminal_queries {
            st.last_query = Some(Instant::now());
        }
    }

    /// Ends synchronized updates (`?2026h`) the program started and did not end in time.
    /// The model holds a frame's bytes back until its end; a program that never sends it
    /// (crashed mid-frame, or simply buggy) would otherwise freeze `peek`, `wait` and the
    /// redraw. When the emulator's deadline passes, the held bytes are applied, as a terminal
    /// does, and the revision moves because what the pane shows changed (spec §2). Runs until
    /// the pane host ends.
    pub async fn end_stalled_frames(self: Arc<Self>) {
        loop {
            let deadline = self.state.lock().screen.sync_deadline();
            match deadline {
                Some(deadline) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
                    let mut st = self.state.lock();
                    if let Some(answers) = st.screen.flush_expired_sync() {
                        st.bump(&self.revision_tx);
                        self.answer_when_detached(&mut st, answers);
                    }
                }
                None => self.sync_pending.notified().await,
            }
        }
    }

    /// Reads whatever output is pending in the PTY right now, under the state lock
    /// (spec §3 step 1). Bounded: a program that never stops writing cannot starve the send.
    ///
    /// "Pending" is whatever a non-blocking `read(2)` returns before `EAGAIN`, not what
    /// `FIONREAD` reports: `FIONREAD` counts only the line discipline's buffer, while bytes the
    /// program has finished writing can still sit in the tty flip buffer until a kernel worker
    /// moves them. A read on the master flushes that work first (Linux `n_tty_read` calls
    /// `tty_buffer_flush_work` before deciding there is no input), so only `EAGAIN` proves that
    /// nothing written so far is left unread.
    pub(super) fn drain_pending(&self, st: &mut PaneState) {
        let mut buf = [0u8; 16 * 1024];
        for _ in 0..64 {
            match rustix::io::read(self.master.get_ref(), &mut buf[..]) {
                Ok(0) => return,
                Ok(n) => {
                    let answers = st.screen.apply(&buf[..n]);
                    let mut pen_only = PenOnlyRun::default();
                    pen_only.applied(&st.screen, n);
                    self.after_output(st, &buf[..n], &pen_only, answers);
                }
                Err(rustix::io::Errno::INTR) => continue,
                // EAGAIN: nothing left. EIO: no slave is open (the child and all its
                // descendants are gone), so nothing can be pending either.
                Err(_) => return,
            }
        }
    }
}

/// How long a pane must be quiet before the screen model's spare rows are freed: long enough
/// that a program printing in bursts does not pay for allocating them again after every burst.
const RELEASE_AFTER: Duration = Duration::from_millis(200);

/// Returns the free pages of the heap to the system. glibc keeps freed memory in its arenas
/// (and only trims the top of the heap on its own), so the rows a scroll allocated would stay
/// resident after they are freed; `malloc_trim` releases every free page, wherever it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: `malloc_trim` only walks and trims glibc's own arenas, under their locks; it
    // touches no memory the program owns and is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// The wall clock in unix ms, for when a program status record entered its state.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
