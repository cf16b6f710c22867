//! The pane host's transaction journal: what became of each send that carried a `txn` id.
//!
//! The daemon stages a notice durably *before* it sends it (spec §7.3), so when a daemon dies
//! with a send outstanding, the next daemon finds the notice staged and cannot tell on its own
//! whether a byte of it reached the pane. Only the pane host knows: a send queued behind
//! another transaction whose requester has gone is dropped before its first byte. So a send may
//! carry a client-chosen transaction id, and the pane host remembers what happened to it; the
//! next daemon asks (`op: "txn"`) and re-announces only a notice that was certainly never
//! written. A notice that may have been written is never pasted again.
//!
//! The journal is in memory: it describes the PTY this pane host owns, and when the pane host
//! dies that PTY and its program die with it. It is exact because the query *fences*: a
//! transaction the journal has not seen start, asked about, is recorded as never to be started,
//! and a send that reaches the input lock later with that id is dropped. Either the send starts
//! first (the answer is `running` or `written`) or the fence comes first (the send writes
//! nothing); there is no third order, because both take the journal's lock.
//!
//! The journal holds at most [`MAX_ENTRIES`] transactions. A requester that has durably
//! recorded an outcome tells the pane host to forget it (`settle`), so entries accumulate only
//! for requesters that died. If a transaction that started is ever evicted unsettled, the
//! journal can no longer prove that an id it does not know was never written, and answers
//! `unknown` (fail closed: the daemon leaves such a notice staged).

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

pub use belfry_proto::txn::{validate_txn_id, TxnState};

/// How many transactions the journal remembers.
pub const MAX_ENTRIES: usize = 4096;

/// What the journal knows about one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// Asked about before it started: it never will.
    Fenced,
    /// Ended before its first byte: a conflict, or its requester was gone.
    NotWritten,
    /// Past the compare and writing (or about to write) its first byte.
    Running,
    /// Written to its end.
    Sent,
    /// A write failed part-way: some bytes may have reached the program.
    Failed,
}

/// How a transaction ended, reported by the send path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnEnd {
    /// Zero bytes were written.
    NotWritten,
    /// The whole transaction was written.
    Sent,
    /// A write failed after the transaction started.
    Failed,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    order: VecDeque<String>,
    /// True once an entry that had started was evicted without being settled.
    lost_started: bool,
}

impl Inner {
    fn insert(&mut self, txn: &str, entry: Entry) {
        if self.entries.insert(txn.to_owned(), entry).is_none() {
            self.order.push_back(txn.to_owned());
        }
        while self.order.len() > MAX_ENTRIES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(Entry::Running | Entry::Sent | Entry::Failed) = self.entries.remove(&oldest)
            {
                self.lost_started = true;
            }
        }
    }
}

/// The journal of one pane host.
#[derive(Default)]
pub struct TxnJournal {
    inner: Mutex<Inner>,
}

/// Why [`TxnJournal::start`] refused a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartRefused {
    /// A query fenced it: it must never be written.
    Fenced,
    /// The id was used before.
    Reused,
}

impl TxnJournal {
    /// Whether a send may use this id: false if the journal already knows it.
    pub fn is_known(&self, txn: &str) -> bool {
        self.inner.lock().entries.contains_key(txn)
    }

    /// Marks the transaction as started, under the input lock and before its first byte.
    pub fn start(&self, txn: &str) -> Result<(), StartRefused> {
        let mut inner = self.inner.lock();
        match inner.entries.get(txn) {
            Some(Entry::Fenced) => Err(StartRefused::Fenced),
            Some(_) => Err(StartRefused::Reused),
            None => {
                inner.insert(txn, Entry::Running);
                Ok(())
            }
        }
    }

    /// Records how a transaction ended. A transaction that never started (dropped before the
    /// gate) is recorded as not written, so a later query is answered from memory.
    pub fn end(&self, txn: &str, end: TxnEnd) {
        let mut inner = self.inner.lock();
        let entry = match end {
            TxnEnd::NotWritten => Entry::NotWritten,
            TxnEnd::Sent => Entry::Sent,
            TxnEnd::Failed => Entry::Failed,
        };
        match inner.entries.get(txn) {
            // A fence stands: nothing was written, and the id stays unusable.
            Some(Entry::Fenced) => {}
            _ => inner.insert(txn, entry),
        }
    }

    /// Answers a query, fencing a transaction that has not started.
    pub fn query(&self, txn: &str) -> TxnState {
        let mut inner = self.inner.lock();
        match inner.entries.get(txn).copied() {
            Some(Entry::Fenced | Entry::NotWritten) => TxnState::NeverWritten,
            Some(Entry::Running) => TxnState::Running,
            Some(Entry::Sent | Entry::Failed) => TxnState::Written,
            None if inner.lost_started => TxnState::Unknown,
            None => {
                inner.insert(txn, Entry::Fenced);
                TxnState::NeverWritten
            }
        }
    }

    /// Forgets an ended transaction whose outcome the requester has recorded. A running one
    /// is kept. A fenced one is kept too, so its id can never start.
    pub fn settle(&self, txn: &str) -> bool {
        let mut inner = self.inner.lock();
        match inner.entries.get(txn) {
            Some(Entry::NotWritten | Entry::Sent | Entry::Failed) => {
                inner.entries.remove(txn);
                inner.order.retain(|known| known != txn);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_before_the_start_fences_the_transaction() {
        let journal = TxnJournal::default();
        assert_eq!(journal.query("t1"), TxnState::NeverWritten);
        assert_eq!(journal.start("t1"), Err(StartRefused::Fenced));
        journal.end("t1", TxnEnd::NotWritten);
        assert_eq!(journal.query("t1"), TxnState::NeverWritten);
        assert!(!journal.settle("t1"), "a fence is never forgotten");
    }

    #[test]
    fn a_started_transaction_is_never_reported_unwritten() {
        let journal = TxnJournal::default();
        journal.start("t1").unwrap();
        assert_eq!(journal.query("t1"), TxnState::Running);
        journal.end("t1", TxnEnd::Sent);
        assert_eq!(journal.query("t1"), TxnState::Written);
        journal.start("t2").unwrap();
        journal.end("t2", TxnEnd::Failed);
        assert_eq!(journal.query("t2"), TxnState::Written);
        journal.start("t3").unwrap();
        journal.end("t3", TxnEnd::NotWritten);
        assert_eq!(journal.query("t3"), TxnState::NeverWritten);
        assert_eq!(journal.start("t1"), Err(StartRefused::Reused));
    }

    #[test]
    fn evicting_an_unsettled_started_transaction_makes_misses_unknown() {
        let journal = TxnJournal::default();
        journal.start("first").unwrap();
        journal.end("first", TxnEnd::Sent);
        for i in 0..MAX_ENTRIES {
            let txn = format!("n{i}");
            journal.start(&txn).unwrap();
            journal.end(&txn, TxnEnd::NotWritten);
        }
        assert_eq!(journal.query("first"), TxnState::Unknown);
        assert_eq!(journal.query("never-seen"), TxnState::Unknown);
    }

    #[test]
    fn settled_transactions_leave_room_without_losing_proof() {
        let journal = TxnJournal::default();
        for i in 0..MAX_ENTRIES * 2 {
            let txn = format!("s{i}");
            journal.start(&txn).unwrap();
            journal.end(&txn, TxnEnd::Sent);
            assert!(journal.settle(&txn));
        }
        assert_eq!(journal.query("never-seen"), TxnState::NeverWritten);
    }

    #[test]
    fn transaction_ids_are_validated() {
        assert!(validate_txn_id("1796014322714-ji180h.0").is_ok());
        for bad in ["", "a/b", "a b", &"x".repeat(65)] {
            let err = validate_txn_id(bad).unwrap_err();
            assert!(err.contains("must match"), "{err}");
        }
    }
}
