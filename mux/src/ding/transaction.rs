//! A DING notice from its text to its durable outcome (spec §7.3).
//!
//! A notice is built ([`Worker::next_notice`]), staged on disk with the id of the transaction
//! that carries it, sent as that guarded transaction, and its outcome recorded before the pane
//! host may forget it: written (staged for good), conflict or refused with nothing written
//! (pending again), cut off part-way (owed to the next program), or unknown. An unknown outcome
//! is asked of the pane host's journal, at the worker's start and every
//! [`UNRESOLVED_RECHECK`]; without proof that nothing was written, a notice is never pasted
//! twice. A file of its own because this is the one path that writes to a pane.

use std::time::{Duration, Instant};

use belfry_ding::notice::{notice_line, recovery_notice};
use belfry_ding::ownership::StageOutcome;
use belfry_ding::policy::{notice_transaction, Step};
use belfry_ding::MessageName;
use belfry_proto::reply::{Reply, Sent};
use belfry_proto::request::{self as req, InputStep};
use belfry_proto::txn::TxnState;
use belfry_proto::{ErrorCode, Expect, Request};
use belfry_transport::retry::Backoff;
use serde_json::Value;

use super::unix_ms;
use super::worker::Worker;
use crate::registry::{self, PaneError};

/// The deadline of one transaction query to the pane host.
const TXN_QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the worker waits for a transaction that is still being written to end (a notice
/// transaction takes about 500 ms; another client's may hold the input lock longer).
const TXN_RUNNING_WAIT: Duration = Duration::from_secs(10);

/// How often a live worker asks again about staged notices whose send it could not resolve.
pub(super) const UNRESOLVED_RECHECK: Duration = Duration::from_secs(2);

/// The default deadline of a notice send (queueing behind other transactions included);
/// `BELFRY_DING_SEND_TIMEOUT_MS` overrides it.
const NOTICE_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The deadline of a notice send: nothing waits forever (a stopped pane host would otherwise
/// hold the worker). A send past it is resolved through the pane host's journal like any send
/// whose reply was lost.
fn notice_send_timeout() -> Duration {
    std::env::var("BELFRY_DING_SEND_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(NOTICE_SEND_TIMEOUT, Duration::from_millis)
}

/// What the worker did with a staged notice whose send outcome it did not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolution {
    /// The pane host proved nothing was written: released, to be announced again.
    Released,
    /// It was (or may have been) written: staged for good.
    Written,
    /// No proof either way: left staged with its transaction, for a later daemon to ask.
    Unresolved,
}

impl Worker {
    /// Builds the notice for the next delivery: the first pass of a worker turns a backlog of
    /// several messages into one recovery notice (spec §7.2).
    pub(super) fn next_notice(&mut self, pending: &[MessageName]) -> (Vec<MessageName>, String) {
        let backlog = self.first_pass && pending.len() > 1;
        self.first_pass = false;
        if backlog {
            return (pending.to_vec(), recovery_notice(pending.len(), pending));
        }
        let name = pending[0].clone();
        let front = self
            .inbox
            .read(&name)
            .map(|m| m.front_matter)
            .unwrap_or_default();
        let line = notice_line(&name, &front);
        (vec![name], line)
    }

    /// A transaction id no other send to this pane host has used: this daemon's pid and
    /// start time (a later daemon differs in one or the other), a daemon-wide sequence number
    /// (so a restarted worker never reuses one), and, after a dot, the pane host it is sent
    /// to, whose journal alone can answer for it.
    fn next_txn(&self) -> String {
        static DAEMON_START_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let start = *DAEMON_START_MS.get_or_init(unix_ms);
        let sequence = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!(
            "ding-{}-{start}-{sequence}.{}",
            std::process::id(),
            self.info.pane_host
        )
    }

    /// Whether `txn` was sent to the pane host this worker talks to.
    fn sent_to_this_pane_host(&self, txn: &str) -> bool {
        txn.rsplit_once('.')
            .is_some_and(|(_, host)| host == self.info.pane_host)
    }

    /// Makes pending again every staged notice whose program is gone before it saw the
    /// notice whole, noting why for `ding status` (issue 39: such a notice stayed staged for
    /// good). Two cases: its send went to another pane host of this name, which is gone and
    /// its program with it, and nobody learned how the send ended; or its send was cut off
    /// part-way and the program it was addressed to has been replaced. A notice written to its
    /// end, or one whose program still runs, stays staged: never pasted twice to one program.
    pub(super) fn requeue_stranded(&mut self) {
        for notice in self.ownership.staged() {
            let why = match (&notice.txn, &notice.incarnation) {
                (Some(txn), _) if !self.sent_to_this_pane_host(txn) => format!(
                    "sent again: the pane host its notice went to is gone, with the program \
                     that may have seen part of it, and how the send ended was never learned \
                     (transaction {txn})"
                ),
                (_, Some(incarnation))
                    if notice.cut_off && *incarnation != self.info.incarnation =>
                {
                    format!(
                        "sent again: its notice was cut off part-way, and the program that saw \
                     the part (incarnation {incarnation}) is gone"
                    )
                }
                _ => continue,
            };
            match self
                .ownership
                .requeue(std::slice::from_ref(&notice.name), &why)
            {
                Ok(()) => tracing::info!(session = self.info.session, "{}: {why}", notice.name),
                Err(err) => tracing::error!(
                    session = self.info.session,
                    "cannot make {} pending again: {err}",
                    notice.name
                ),
            }
        }
    }

    /// Asks the pane host about every staged notice whose send outcome is not recorded.
    pub(super) async fn resolve_stranded(&mut self) {
        self.requeue_stranded();
        for (txn, names) in self.ownership.unresolved_transactions() {
            let resolution = self
                .resolve_transaction(&txn, &names, TXN_RUNNING_WAIT)
                .await;
            tracing::info!(
                session = self.info.session,
                "staged notice of transaction {txn} ({} message(s)): {resolution:?}",
                names.len()
            );
        }
    }

    /// Every [`UNRESOLVED_RECHECK`], asks once more about the staged notices sent to this
    /// pane host whose outcome is still unknown (a pane host that did not answer in time, a
    /// transaction that was still running), so a notice that turns out never written is not
    /// stranded until the next daemon.
    pub(super) async fn recheck_unresolved(&mut self) {
        if Instant::now() < self.next_recheck {
            return;
        }
        self.next_recheck = Instant::now() + UNRESOLVED_RECHECK;
        for (txn, names) in self.ownership.unresolved_transactions() {
            if self.sent_to_this_pane_host(&txn) {
                let resolution = self.resolve_transaction(&txn, &names, Duration::ZERO).await;
                if resolution != Resolution::Unresolved {
                    tracing::info!(
                        session = self.info.session,
                        "staged notice of transaction {txn}: {resolution:?}"
                    );
                }
            }
        }
    }

    /// Learns from the pane host what became of transaction `txn`, and records it: released
    /// only on proof that nothing was written (the query fences a send that has not started,
    /// so it never starts afterwards); a notice that may have been written is never pasted
    /// again. A transaction still running is asked about again for up to `running_wait`.
    async fn resolve_transaction(
        &mut self,
        txn: &str,
        names: &[MessageName],
        running_wait: Duration,
    ) -> Resolution {
        if !self.sent_to_this_pane_host(txn) {
            // The pane host it went to is gone, and with it the only record of whether a byte
            // reached its program: without proof, the notice stays staged.
            return Resolution::Unresolved;
        }
        let give_up = Instant::now() + running_wait;
        let mut retry = Backoff::constant(Duration::from_millis(50));
        loop {
            let state = self.query_transaction(txn).await;
            let resolution = match state {
                Some(TxnState::NeverWritten) => match self.ownership.release_unsent(names) {
                    Ok(()) => Resolution::Released,
                    Err(err) => {
                        tracing::error!(
                            session = self.info.session,
                            "cannot release notice: {err}"
                        );
                        Resolution::Unresolved
                    }
                },
                Some(TxnState::Written) => match self.ownership.confirm_written(names) {
                    Ok(()) => Resolution::Written,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot record notice: {err}");
                        Resolution::Unresolved
                    }
                },
                Some(TxnState::Running) if Instant::now() < give_up => {
                    retry.sleep().await;
                    continue;
                }
                Some(TxnState::Running | TxnState::Unknown) | None => Resolution::Unresolved,
            };
            if resolution != Resolution::Unresolved {
                self.settle_transaction(txn).await;
            }
            return resolution;
        }
    }

    async fn query_transaction(&self, txn: &str) -> Option<TxnState> {
        let request = Request::new(
            0,
            req::Txn {
                session: None,
                txn: txn.to_string(),
                settle: None,
                host: Some(self.info.pane_host.clone()),
            },
        );
        let reply = tokio::time::timeout(
            TXN_QUERY_TIMEOUT,
            registry::pane_ask::<belfry_proto::reply::TxnState>(&self.info.socket, &request),
        )
        .await;
        match reply {
            Ok(Ok(reply)) => {
                let state = reply.state.as_deref().and_then(TxnState::parse);
                if state.is_none() {
                    tracing::warn!(session = self.info.session, "txn {txn}: {reply:?}");
                }
                state
            }
            Ok(Err(err)) => {
                tracing::warn!(session = self.info.session, "txn {txn}: {err}");
                None
            }
            Err(_) => {
                tracing::warn!(session = self.info.session, "txn {txn}: no answer in time");
                None
            }
        }
    }

    /// Lets the pane host forget a transaction whose outcome is now durable here; best
    /// effort (a journal entry left behind only takes room).
    async fn settle_transaction(&self, txn: &str) {
        let request = Request::new(
            0,
            req::Txn {
                session: None,
                txn: txn.to_string(),
                settle: Some(true),
                host: Some(self.info.pane_host.clone()),
            },
        );
        let _ = tokio::time::timeout(
            TXN_QUERY_TIMEOUT,
            registry::pane_request(&self.info.socket, &request),
        )
        .await;
    }

    /// Stages the names durably, with the id of the transaction that carries the notice, then
    /// runs the notice transaction. Returns the send reply.
    ///
    /// Three phases, each a method: staging (nothing is sent unless the stage is durable),
    /// sending (a send that certainly never left releases the names at once), and recording
    /// what the reply proves about the bytes written.
    pub(super) async fn stage_and_send(
        &mut self,
        names: &[MessageName],
        notice: &str,
        expect: Option<Expect>,
    ) -> Option<Sent> {
        let txn = self.next_txn();
        // The revision the guarded send was judged at goes into the log line of a notice sent,
        // so what the program reported of itself then can be looked up (docs/evaluation.md).
        let judged_revision = expect.as_ref().and_then(|expect| expect.revision);
        if !self.stage_notice(names, &txn) {
            return None;
        }
        let reply = self.send_notice(names, notice, &txn, expect).await?;
        self.record_notice_outcome(names, notice, txn, judged_revision, reply)
            .await
    }

    /// Stages the names with the notice's transaction id and the incarnation it is addressed
    /// to, before any byte is sent (spec §7.3); false when nothing may be sent (a name is
    /// owned already, or the stage could not be made durable).
    fn stage_notice(&mut self, names: &[MessageName], txn: &str) -> bool {
        let incarnation = self.info.incarnation.clone();
        match self
            .ownership
            .stage_for(names, Some(txn), Some(&incarnation), unix_ms())
        {
            Ok(StageOutcome::Staged) => true,
            Ok(StageOutcome::AlreadyOwned { .. }) => false,
            Err(err) => {
                tracing::error!(session = self.info.session, "cannot stage notice: {err}");
                false
            }
        }
    }

    /// Sends the staged notice as transaction `txn` within the notice send deadline: the reply,
    /// or why none came. `None` when the request certainly never reached a pane host, after the
    /// names were released to be announced again.
    async fn send_notice(
        &mut self,
        names: &[MessageName],
        notice: &str,
        txn: &str,
        expect: Option<Expect>,
    ) -> Option<Result<Value, String>> {
        let request = Request::new(
            0,
            req::Send {
                session: None,
                expect,
                input: wire_steps(&notice_transaction(notice, self.info.notice_settle_ms)),
                txn: Some(txn.to_string()),
                // Marked as DING's own, so the pane host does not announce it as a person's
                // or a supervisor's input (`typed`), which would hold the next notice behind it.
                notice: Some(true),
                timeout_ms: None,
            },
        );
        match tokio::time::timeout(
            notice_send_timeout(),
            registry::pane_call(&self.info.socket, &request),
        )
        .await
        {
            Ok(Ok(reply)) => Some(Ok(reply)),
            Ok(Err(
                err @ (PaneError::Unreachable(_) | PaneError::Busy(_) | PaneError::Foreign(_)),
            )) => {
                // The request was never sent (no connection, or one refused before a byte was
                // written), so no pane host can have written the notice: it may be sent again.
                // A pane killed while its worker was busy leaves wake-ups queued that try it.
                tracing::warn!(session = self.info.session, "notice not sent: {err}");
                if let Err(err) = self.ownership.release_unsent(names) {
                    tracing::error!(session = self.info.session, "cannot release notice: {err}");
                }
                None
            }
            Ok(Err(err)) => Some(Err(err.to_string())),
            Err(_) => Some(Err("no reply before the notice send deadline".to_string())),
        }
    }

    /// Records what the reply to a notice's send proves (written, nothing written, cut off
    /// part-way, or unknown and asked of the pane host's journal), then lets the pane host
    /// forget the transaction once its outcome is durable here.
    async fn record_notice_outcome(
        &mut self,
        names: &[MessageName],
        notice: &str,
        txn: String,
        judged_revision: Option<u64>,
        reply: Result<Value, String>,
    ) -> Option<Sent> {
        let reply = reply.map(|reply| (Reply::<Sent>::read(&reply), reply));
        match reply {
            Ok((Ok(Reply::Ok(sent @ Sent::Sent { .. })), _)) => {
                self.counters.record_send();
                tracing::info!(
                    session = self.info.session,
                    judged_revision,
                    "notice sent: {notice}"
                );
                // Written: staged for good. Recorded before the pane host may forget it.
                match self.ownership.confirm_written(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot record notice: {err}")
                    }
                }
                Some(sent)
            }
            Ok((Ok(Reply::Ok(conflict @ Sent::Conflict { .. })), _)) => {
                // A conflict wrote zero bytes: the notice may be sent again later.
                self.counters.record_conflict();
                match self.ownership.release_unsent(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot release notice: {err}")
                    }
                }
                Some(conflict)
            }
            Ok((Ok(Reply::Err(err)), reply)) if err.written == Some(0) => {
                // The pane host itself says no byte of the transaction reached the PTY (a send
                // refused because it is stopping, or that never got the input lock): the
                // notice may be sent again. This is the journal's own answer, given in the
                // reply because a stopping pane host answers no later `txn` query.
                tracing::warn!(session = self.info.session, "notice not written: {reply}");
                if err.code == ErrorCode::Aborted {
                    self.input_ended = true;
                }
                match self.ownership.release_unsent(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot release notice: {err}")
                    }
                }
                None
            }
            Ok((Ok(Reply::Err(err)), reply)) if err.written.is_some_and(|written| written > 0) => {
                // The pane host says the transaction stopped part-way (a restart aborted it
                // after the paste, the program stopped reading): the program has part of the
                // notice and no Enter. It stays staged while that program runs, and is owed
                // to the next one if it goes (`Worker::requeue_stranded`).
                tracing::warn!(session = self.info.session, "notice cut off: {reply}");
                match self.ownership.confirm_cut_off(names) {
                    Ok(()) => self.settle_transaction(&txn).await,
                    Err(err) => {
                        tracing::error!(session = self.info.session, "cannot record notice: {err}")
                    }
                }
                None
            }
            Ok((_, reply)) => {
                // An error reply: refused before anything was written, or a write that failed
                // part-way. Only the pane host's journal can tell which.
                tracing::error!(session = self.info.session, "notice refused: {reply}");
                let resolution = self
                    .resolve_transaction(&txn, names, TXN_RUNNING_WAIT)
                    .await;
                tracing::info!(
                    session = self.info.session,
                    "refused notice: {resolution:?}"
                );
                None
            }
            Err(err) => {
                // Unknown whether bytes reached the pane: ask the pane host; without proof
                // that nothing was written, stay staged and never paste twice.
                let resolution = self
                    .resolve_transaction(&txn, names, TXN_RUNNING_WAIT)
                    .await;
                tracing::error!(
                    session = self.info.session,
                    "notice transport failed ({err}); {resolution:?}"
                );
                None
            }
        }
    }
}

/// A DING transaction's steps as the protocol's input steps.
fn wire_steps(steps: &[Step]) -> Vec<InputStep> {
    steps
        .iter()
        .map(|step| match step {
            Step::Paste(text) => InputStep::Paste(text.clone()),
            Step::DelayMs(ms) => InputStep::DelayMs(*ms),
            Step::Key(key) => InputStep::Key(key.clone()),
        })
        .collect()
}
