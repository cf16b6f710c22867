//! Durable per-message delivery state for one session: who owns each unread message's notice.
//!
//! | state        | meaning                                                                  |
//! |--------------|--------------------------------------------------------------------------|
//! | `pending`    | unread and unowned: DING may announce it (not stored; it is the default) |
//! | `staged`     | DING owns its notice; recorded *before* the paste, never pasted again    |
//! | `hook-owned` | a turn-boundary hook put it in the harness's next context; no PTY input  |
//! | `delivered`  | the adapter's `accepted` receipt proved the staged notice arrived        |
//!
//! Hold reasons are not stored: a pending message is "held" because of the lease machine's
//! current state, which the status view combines at display time.
//!
//! The state lives in `<state>/ding/<session>/ownership.json`, rewritten atomically (temporary
//! file, fsync, rename, directory fsync) by every change, so `kill -9` at any moment leaves the
//! old or the new state (spec §12). Every change that gives DING a right to paste is durable
//! before the method returns (spec §7.3: ownership is recorded before the transaction starts).
//!
//! ## The file is derived state
//!
//! Deleting the file loses no message: the inbox is the authority (spec §7.1), and an unread
//! message without a record is simply pending. The price is that a notice already pasted may be
//! announced again. The engine bounds that price by treating whatever is pending when it opens
//! the store as the start-up backlog and announcing it with **one** recovery notice
//! ([`crate::notice::recovery_notice`]), staged as a whole before it is sent, never with
//! per-message notices. A missing file thus costs at most one extra line, once; treating every
//! unread message as owned instead would risk a message nobody ever announces, which is worse.
//! [`OwnershipStore::origin`] tells the engine which case it is in, for its log.
//!
//! A corrupt file is an error, never a panic and never a reason to touch the inbox. The engine
//! may [`quarantine`] it (rename it aside, keeping it for inspection) and continue as with a
//! missing file.
//!
//! ## Staged notices whose send outcome was never learned
//!
//! A notice is staged with the transaction id of the send that carries it
//! ([`OwnershipStore::stage_transaction`]). When the engine learns that the send was written,
//! it clears the id ([`OwnershipStore::confirm_written`]); when it learns that nothing was
//! written (a conflict), it releases the notice. A daemon that dies in between leaves the id
//! behind, and the next daemon asks the pane host what became of that transaction: a notice
//! certainly never written is released ([`OwnershipStore::release_unsent`]) and announced
//! again, once; one that may have been written stays staged and is never pasted again. A staged
//! record without an id (a send confirmed written, or a record from an older build) stays
//! staged: it stays unread in the inbox, where `belfry inbox ls` and the next turn-boundary hook
//! still show it.
//!
//! ## Staged notices whose program is gone
//!
//! A notice is owed to a running program, not to a pane name. Each staged record keeps the
//! incarnation its send was addressed to, and a send that stopped part-way (a restart aborted
//! it after the paste, before its Enter) is recorded as cut off
//! ([`OwnershipStore::confirm_cut_off`]). When the program that may have seen such a paste is
//! gone (its pane host was killed, or it was restarted), nobody is left who read the notice,
//! and [`OwnershipStore::requeue`] makes the message pending again, for the next incarnation,
//! with a note of why ([`OwnershipStore::sent_again_because`]) that `ding status` shows until
//! the message is archived. A notice written to its end stays staged: its program had the
//! Enter.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::durable::{BoundedRead, PrivateDir};
use crate::error::{Error, Result};
use crate::names::{MessageName, SessionName};
use crate::protocol::ReceiptState;

/// The state file's name inside `<state>/ding/<session>/`.
pub const OWNERSHIP_FILE: &str = "ownership.json";

/// The state file format this build reads and writes.
const STATE_VERSION: u64 = 1;

/// A state file holds one short record per unread message; 16 MiB is far past any real inbox.
const MAX_STATE_BYTES: u64 = 16 * 1024 * 1024;

/// The delivery state of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryState {
    /// Unread and unowned.
    Pending,
    /// DING owns the notice; it was (or is being) pasted once.
    Staged,
    /// A turn-boundary hook owns it.
    HookOwned,
    /// An `accepted` receipt proved the notice arrived.
    Delivered,
}

impl DeliveryState {
    /// `"pending"`, `"staged"`, `"hook-owned"` or `"delivered"`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Staged => "staged",
            DeliveryState::HookOwned => "hook-owned",
            DeliveryState::Delivered => "delivered",
        }
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Whether the store was read from disk or started empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOrigin {
    /// The state file existed and was read.
    Loaded,
    /// There was no state file: a first start, or it was deleted.
    Missing,
}

/// The result of [`OwnershipStore::stage`].
#[must_use = "paste the notice only if the messages were staged"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageOutcome {
    /// Every message is now durably staged; the notice may be pasted, once.
    Staged,
    /// Nothing was staged, because this message already has an owner.
    AlreadyOwned {
        /// The first message found owned.
        name: MessageName,
        /// Its state.
        state: DeliveryState,
    },
}

/// The result of [`OwnershipStore::record_receipt`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// The message is now delivered.
    Delivered,
    /// The receipt changes nothing: it is not `accepted`, or the message was already
    /// delivered. The message keeps this state.
    Unchanged(DeliveryState),
    /// An `accepted` receipt for a message DING never staged; ignored, worth a log line.
    NotStaged,
}

/// The result of [`OwnershipStore::record_turn_boundary`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnBoundaryOutcome {
    /// Messages that are now hook-owned (including ones that already were).
    pub hook_owned: Vec<MessageName>,
    /// Named messages that are not unread; ignored, for the caller to log (spec §7.4).
    pub not_unread: Vec<MessageName>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    state: DeliveryState,
    since_unix_ms: u64,
    /// The transaction of a staged notice's send, while its outcome is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    txn: Option<String>,
    /// The program incarnation a staged notice's send was addressed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    incarnation: Option<String>,
    /// The send stopped part-way: some of the notice was written, not all of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    cut_off: bool,
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u64,
    session: SessionName,
    messages: BTreeMap<MessageName, Record>,
    /// Why a message pending again was made so, while it is unread (see the module's text).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    sent_again: BTreeMap<MessageName, String>,
}

/// A staged notice as [`OwnershipStore::staged`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedNotice {
    /// The message.
    pub name: MessageName,
    /// Its send's transaction, while the outcome is not known.
    pub txn: Option<String>,
    /// The incarnation the send was addressed to, if recorded.
    pub incarnation: Option<String>,
    /// Whether the send stopped part-way.
    pub cut_off: bool,
}

/// The ownership records of one session.
#[derive(Debug)]
pub struct OwnershipStore {
    state_dir: PathBuf,
    path: PathBuf,
    session: SessionName,
    records: BTreeMap<MessageName, Record>,
    sent_again: BTreeMap<MessageName, String>,
    origin: StoreOrigin,
}

/// `<state>/ding/<session>`.
pub fn ownership_dir(state_dir: &Path, session: &SessionName) -> PathBuf {
    state_dir.join("ding").join(session.as_str())
}

/// Renames a corrupt state file to `ownership.json.corrupt-<unix-ms>` and returns the new path,
/// so the engine can start over without destroying the evidence.
pub fn quarantine(state_dir: &Path, session: &SessionName, now_unix_ms: u64) -> Result<PathBuf> {
    let dir = open_dir(state_dir, session)?;
    let aside = format!("{OWNERSHIP_FILE}.corrupt-{now_unix_ms}");
    dir.rename_no_replace(OWNERSHIP_FILE, &dir, &aside)
        .map_err(|err| {
            Error::io(
                "move aside corrupt state file",
                dir.entry(OWNERSHIP_FILE),
                err,
            )
        })?;
    dir.sync()?;
    Ok(dir.entry(aside))
}

/// Opens (creating, 0700) `<state>/ding/<session>`, each directory relative to the checked one
/// above it, so a link planted as `ding/` or as the session's directory is refused, never
/// followed (see `durable`).
fn open_dir(state_dir: &Path, session: &SessionName) -> Result<PrivateDir> {
    PrivateDir::create_root(state_dir)?
        .create_child("ding")?
        .create_child(session.as_str())
}

impl OwnershipStore {
    /// Opens the store of `session`, reading its state file if there is one.
    pub fn open(state_dir: &Path, session: &SessionName) -> Result<Self> {
        let dir = open_dir(state_dir, session)?;
        let path = dir.entry(OWNERSHIP_FILE);
        let corrupt = |reason: String| Error::CorruptOwnershipState {
            path: path.clone(),
            reason,
        };
        let bytes = match dir.read_file(OWNERSHIP_FILE, MAX_STATE_BYTES) {
            Ok(BoundedRead::Bytes(bytes)) => bytes,
            Ok(BoundedRead::TooLarge) => {
                return Err(corrupt(format!("larger than {MAX_STATE_BYTES} bytes")))
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Ok(OwnershipStore {
                    state_dir: state_dir.to_path_buf(),
                    path,
                    session: session.clone(),
                    records: BTreeMap::new(),
                    sent_again: BTreeMap::new(),
                    origin: StoreOrigin::Missing,
                })
            }
            Err(err) => return Err(Error::io("read DING ownership state", path, err)),
        };
        let file: StateFile =
            serde_json::from_slice(&bytes).map_err(|err| corrupt(err.to_string()))?;
        if file.version != STATE_VERSION {
            return Err(corrupt(format!(
                "format version {} is not supported (this build reads {STATE_VERSION})",
                file.version
            )));
        }
        if file.session != *session {
            return Err(corrupt(format!(
                "it belongs to session {:?}, not {:?}",
                file.session.as_str(),
                session.as_str()
            )));
        }
        let mut records = file.messages;
        records.retain(|_, record| record.state != DeliveryState::Pending);
        Ok(OwnershipStore {
            state_dir: state_dir.to_path_buf(),
            path,
            session: session.clone(),
            records,
            sent_again: file.sent_again,
            origin: StoreOrigin::Loaded,
        })
    }

    /// The state file's path.
    pub fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether the state file existed when the store was opened.
    pub fn origin(&self) -> StoreOrigin {
        self.origin
    }

    /// The state of one message; `Pending` when it has no record.
    pub fn state_of(&self, name: &MessageName) -> DeliveryState {
        self.records
            .get(name)
            .map_or(DeliveryState::Pending, |record| record.state)
    }

    /// Every message with an owner, oldest first, with its state and when it got it.
    pub fn owned(&self) -> impl Iterator<Item = (&MessageName, DeliveryState, u64)> + '_ {
        self.records
            .iter()
            .map(|(name, record)| (name, record.state, record.since_unix_ms))
    }

    /// The messages of `unread` that have no owner, in the given (FIFO) order.
    pub fn pending<'a>(&self, unread: &'a [MessageName]) -> Vec<&'a MessageName> {
        unread
            .iter()
            .filter(|name| !self.records.contains_key(*name))
            .collect()
    }

    /// Stages `names` (one notice, or one recovery notice for a backlog), durably, before the
    /// notice is pasted. All or nothing: if any of them already has an owner nothing changes.
    ///
    /// spec §7.3: a notice is never pasted twice, so the engine pastes only on
    /// [`StageOutcome::Staged`], and only after this returned.
    pub fn stage(&mut self, names: &[MessageName], now_unix_ms: u64) -> Result<StageOutcome> {
        self.stage_transaction(names, None, now_unix_ms)
    }

    /// [`OwnershipStore::stage`], recording in the same durable write the id of the
    /// transaction that will carry the notice, so that a later daemon can ask the pane host
    /// whether it was ever written.
    pub fn stage_transaction(
        &mut self,
        names: &[MessageName],
        txn: Option<&str>,
        now_unix_ms: u64,
    ) -> Result<StageOutcome> {
        self.stage_for(names, txn, None, now_unix_ms)
    }

    /// [`OwnershipStore::stage_transaction`], recording too the incarnation the notice is
    /// addressed to, so that a notice its program never saw whole can be owed to the next one.
    pub fn stage_for(
        &mut self,
        names: &[MessageName],
        txn: Option<&str>,
        incarnation: Option<&str>,
        now_unix_ms: u64,
    ) -> Result<StageOutcome> {
        for name in names {
            if let Some(record) = self.records.get(name) {
                return Ok(StageOutcome::AlreadyOwned {
                    name: name.clone(),
                    state: record.state,
                });
            }
        }
        let before = self.records.clone();
        for name in names {
            self.set(name, DeliveryState::Staged, now_unix_ms);
            if let Some(record) = self.records.get_mut(name) {
                record.txn = txn.map(str::to_owned);
                record.incarnation = incarnation.map(str::to_owned);
            }
        }
        self.persist_if_changed(before)?;
        Ok(StageOutcome::Staged)
    }

    /// Every staged notice, oldest message first.
    pub fn staged(&self) -> Vec<StagedNotice> {
        self.records
            .iter()
            .filter(|(_, record)| record.state == DeliveryState::Staged)
            .map(|(name, record)| StagedNotice {
                name: name.clone(),
                txn: record.txn.clone(),
                incarnation: record.incarnation.clone(),
                cut_off: record.cut_off,
            })
            .collect()
    }

    /// Records that the send of these staged notices stopped part-way (some bytes written):
    /// their transaction id is dropped, and they stay staged while the program that may have
    /// seen the paste runs.
    pub fn confirm_cut_off(&mut self, names: &[MessageName]) -> Result<()> {
        let before = self.records.clone();
        for name in names {
            if let Some(record) = self.records.get_mut(name) {
                record.txn = None;
                record.cut_off = true;
            }
        }
        self.persist_if_changed(before)
    }

    /// Makes staged messages pending again because the program their notice was meant for is
    /// gone before it saw it whole, noting `why` for `ding status`. Other states are left alone.
    pub fn requeue(&mut self, names: &[MessageName], why: &str) -> Result<()> {
        let before = self.records.clone();
        let notes_before = self.sent_again.clone();
        for name in names {
            if self.state_of(name) == DeliveryState::Staged {
                self.records.remove(name);
                self.sent_again.insert(name.clone(), why.to_owned());
            }
        }
        if self.records == before {
            return Ok(());
        }
        let result = self.persist();
        if result.is_err() {
            self.records = before;
            self.sent_again = notes_before;
        }
        result
    }

    /// Why a message was made pending again after its notice's program went away, if it was.
    pub fn sent_again_because(&self, name: &MessageName) -> Option<&str> {
        self.sent_again.get(name).map(String::as_str)
    }

    /// The transactions of staged notices whose outcome is not known, each with its messages,
    /// oldest message first.
    pub fn unresolved_transactions(&self) -> Vec<(String, Vec<MessageName>)> {
        let mut by_txn: BTreeMap<&str, Vec<MessageName>> = BTreeMap::new();
        for (name, record) in &self.records {
            if let (DeliveryState::Staged, Some(txn)) = (record.state, &record.txn) {
                by_txn.entry(txn).or_default().push(name.clone());
            }
        }
        let mut list: Vec<(String, Vec<MessageName>)> = by_txn
            .into_iter()
            .map(|(txn, names)| (txn.to_owned(), names))
            .collect();
        list.sort_by(|a, b| a.1.first().cmp(&b.1.first()));
        list
    }

    /// Records that the send of these staged notices was written: their transaction id is
    /// dropped, and they stay staged for good (never pasted again).
    pub fn confirm_written(&mut self, names: &[MessageName]) -> Result<()> {
        let before = self.records.clone();
        for name in names {
            if let Some(record) = self.records.get_mut(name) {
                record.txn = None;
            }
        }
        self.persist_if_changed(before)
    }

    /// Returns staged messages to pending after a guarded send that wrote nothing (a conflict,
    /// spec §3: zero bytes written), so a later lease can announce them. Other states are left
    /// alone.
    pub fn release_unsent(&mut self, names: &[MessageName]) -> Result<()> {
        let before = self.records.clone();
        for name in names {
            if self.state_of(name) == DeliveryState::Staged {
                self.records.remove(name);
            }
        }
        self.persist_if_changed(before)
    }

    /// Applies an adapter receipt. spec §7.4: only `accepted` marks a staged notice delivered.
    /// A message hook-owned after its notice was staged counts as staged here.
    pub fn record_receipt(
        &mut self,
        name: &MessageName,
        receipt: ReceiptState,
        now_unix_ms: u64,
    ) -> Result<ReceiptOutcome> {
        let state = self.state_of(name);
        if receipt != ReceiptState::Accepted || state == DeliveryState::Delivered {
            return Ok(ReceiptOutcome::Unchanged(state));
        }
        if state == DeliveryState::Pending {
            return Ok(ReceiptOutcome::NotStaged);
        }
        let before = self.records.clone();
        self.set(name, DeliveryState::Delivered, now_unix_ms);
        self.persist_or_restore(before)?;
        Ok(ReceiptOutcome::Delivered)
    }

    /// Applies a turn-boundary event: the named messages that are in `unread` become hook-owned
    /// (a delivered one stays delivered); the others are returned as not unread.
    pub fn record_turn_boundary(
        &mut self,
        names: &[MessageName],
        unread: &[MessageName],
        now_unix_ms: u64,
    ) -> Result<TurnBoundaryOutcome> {
        let unread: BTreeSet<&MessageName> = unread.iter().collect();
        let before = self.records.clone();
        let mut outcome = TurnBoundaryOutcome::default();
        for name in names {
            if !unread.contains(name) {
                outcome.not_unread.push(name.clone());
                continue;
            }
            match self.state_of(name) {
                DeliveryState::Pending | DeliveryState::Staged => {
                    self.set(name, DeliveryState::HookOwned, now_unix_ms);
                    outcome.hook_owned.push(name.clone());
                }
                DeliveryState::HookOwned => outcome.hook_owned.push(name.clone()),
                DeliveryState::Delivered => {}
            }
        }
        self.persist_if_changed(before)?;
        Ok(outcome)
    }

    /// Drops the records of messages that are no longer unread (archived, or gone), and returns
    /// them. spec §7.4: archiving clears ownership; it is the only way a staged notice is
    /// released without delivery.
    pub fn reconcile(&mut self, unread: &[MessageName]) -> Result<Vec<MessageName>> {
        let unread: BTreeSet<&MessageName> = unread.iter().collect();
        // A note says why an unread message was told again; an archived one needs none.
        self.sent_again.retain(|name, _| unread.contains(name));
        let released: Vec<MessageName> = self
            .records
            .keys()
            .filter(|name| !unread.contains(name))
            .cloned()
            .collect();
        if released.is_empty() {
            return Ok(released);
        }
        let before = self.records.clone();
        for name in &released {
            self.records.remove(name);
        }
        self.persist_or_restore(before)?;
        Ok(released)
    }

    fn set(&mut self, name: &MessageName, state: DeliveryState, now_unix_ms: u64) {
        self.records.insert(
            name.clone(),
            Record {
                state,
                since_unix_ms: now_unix_ms,
                txn: None,
                incarnation: None,
                cut_off: false,
            },
        );
    }

    fn persist_if_changed(&mut self, before: BTreeMap<MessageName, Record>) -> Result<()> {
        if self.records == before {
            return Ok(());
        }
        self.persist_or_restore(before)
    }

    /// Writes the records; on failure puts `before` back, so memory never claims more than disk.
    fn persist_or_restore(&mut self, before: BTreeMap<MessageName, Record>) -> Result<()> {
        let result = self.persist();
        if result.is_err() {
            self.records = before;
        }
        result
    }

    fn persist(&self) -> Result<()> {
        let file = StateFile {
            version: STATE_VERSION,
            session: self.session.clone(),
            messages: self.records.clone(),
            sent_again: self.sent_again.clone(),
        };
        let mut bytes =
            serde_json::to_vec_pretty(&file).map_err(|err| Error::CorruptOwnershipState {
                path: self.path(),
                reason: err.to_string(),
            })?;
        bytes.push(b'\n');
        // The directories are opened again for every write: a write re-checks that no link was
        // planted since the store was opened, and a directory removed meanwhile is recreated
        // rather than written into after its removal.
        open_dir(&self.state_dir, &self.session)?.atomic_replace(OWNERSHIP_FILE, &bytes)
    }
}
