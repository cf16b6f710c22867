//! When a DING worker looks at its inbox, and what it sees there.
//!
//! The daemon has one inotify watcher ([`InboxWakeups`]) whose events become
//! [`DingMsg::InboxChanged`] for the worker whose inbox changed; a worker whose inbox is not
//! watched polls every [`POLL`], and a watched one still looks every [`SAFETY_POLL`] (inotify
//! is a wake-up, the inbox on disk the truth). A look lists the inbox (cached while it cannot
//! have changed), reconciles the ownership records with it, and opens an inbox that was
//! removed again once the removal has settled. A file of its own because the watcher, its
//! reading task and the listing cache are one concern apart from what is delivered.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use belfry_ding::inbox::{RefusedEntry, UnreadScan};
use belfry_ding::watch::{InboxWatch, InboxWatcher, ScanCache, Scanned};
use belfry_ding::{Inbox, MessageName};
use parking_lot::Mutex;
use tokio::io::unix::AsyncFd;

use super::transaction::UNRESOLVED_RECHECK;
use super::worker::Worker;
use super::{DingMsg, Workers};

/// How often a worker whose inbox is not watched (see [`InboxWakeups`]) looks at it without a
/// nudge: other tools may post without one.
const POLL: Duration = Duration::from_millis(200);

/// How often a worker whose inbox is watched looks at it anyway. inotify is only a wake-up and
/// the inbox on disk the truth (spec §7.1): this catches what no event announced (a dnd that
/// went stale, a filesystem whose changes inotify does not see) at a cost that is nothing at
/// idle.
const SAFETY_POLL: Duration = Duration::from_secs(5);

/// How long after a removal of the inbox was first seen the worker waits before it opens (and
/// makes) the inbox again: long enough for an `rm -r` of it to finish.
const REMOVAL_SETTLE: Duration = Duration::from_millis(500);

/// The daemon's one [`InboxWatcher`] and the task that turns its events into
/// [`DingMsg::InboxChanged`] for the worker whose inbox changed. It is made with the first
/// worker; a daemon that cannot make one (or whose watcher fails later) leaves its workers on
/// the [`POLL`] timer.
#[derive(Default)]
pub(super) struct InboxWakeups {
    watcher: std::sync::OnceLock<Option<Arc<InboxWatcher>>>,
    /// The session each watch descriptor belongs to.
    sessions: Arc<Mutex<HashMap<i32, String>>>,
    /// Set when reading the watcher failed: no wake-up comes any more.
    failed: Arc<std::sync::atomic::AtomicBool>,
}

/// A worker's watch on its inbox, removed when it is dropped.
pub(super) struct InboxRegistration {
    watcher: Arc<InboxWatcher>,
    watch: InboxWatch,
    sessions: Arc<Mutex<HashMap<i32, String>>>,
}

impl Drop for InboxRegistration {
    fn drop(&mut self) {
        let mut sessions = self.sessions.lock();
        for descriptor in self.watch.descriptors() {
            sessions.remove(descriptor);
        }
        self.watcher.unwatch(&self.watch);
    }
}

/// The watcher's descriptor, for [`AsyncFd`] (which wants an owner of a raw descriptor).
struct WatcherFd(Arc<InboxWatcher>);

impl std::os::fd::AsRawFd for WatcherFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

impl InboxWakeups {
    /// Watches `inbox` for its worker; `None` (and a log line) when it cannot be watched, and
    /// the worker then polls.
    fn watch(&self, inbox: &Inbox, workers: &Workers) -> Option<InboxRegistration> {
        let watcher = self.watcher(workers)?;
        if self.failed.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let session = inbox.session().to_string();
        match watcher.watch(inbox) {
            Ok(watch) => {
                let mut sessions = self.sessions.lock();
                for &descriptor in watch.descriptors() {
                    sessions.insert(descriptor, session.clone());
                }
                drop(sessions);
                Some(InboxRegistration {
                    watcher,
                    watch,
                    sessions: Arc::clone(&self.sessions),
                })
            }
            Err(err) => {
                tracing::warn!(
                    session,
                    "cannot watch the inbox ({err}); looking at it every {POLL:?} instead"
                );
                None
            }
        }
    }

    /// Whether wake-ups still come.
    fn working(&self) -> bool {
        !self.failed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The watcher, made (with its reading task) on first use.
    fn watcher(&self, workers: &Workers) -> Option<Arc<InboxWatcher>> {
        self.watcher
            .get_or_init(|| {
                let watcher = match InboxWatcher::new() {
                    Ok(watcher) => Arc::new(watcher),
                    Err(err) => {
                        tracing::warn!("no inbox watcher ({err}); DING workers poll instead");
                        return None;
                    }
                };
                // SAFETY: the descriptor is owned by the watcher, which `WatcherFd` keeps alive
                // (an `Arc`) for as long as the `AsyncFd` exists, and nothing closes or
                // replaces it meanwhile.
                let registered = unsafe {
                    AsyncFd::register_with_interest(
                        WatcherFd(Arc::clone(&watcher)),
                        tokio::io::Interest::READABLE,
                    )
                };
                let readable = match registered {
                    Ok(readable) => readable,
                    Err(err) => {
                        tracing::warn!(
                            "cannot wait on the inbox watcher ({err}); DING workers poll instead"
                        );
                        return None;
                    }
                };
                tokio::spawn(forward_wakes(
                    readable,
                    Arc::clone(&self.sessions),
                    Arc::clone(workers),
                    Arc::clone(&self.failed),
                ));
                Some(watcher)
            })
            .clone()
    }
}

/// Reads the watcher's events as they come and tells each worker whose inbox changed, once
/// per read however many events it had; after an overflow, every worker. A read that fails
/// ends the task and sets `failed`, and the workers poll from then on.
async fn forward_wakes(
    readable: AsyncFd<WatcherFd>,
    sessions: Arc<Mutex<HashMap<i32, String>>>,
    workers: Workers,
    failed: Arc<std::sync::atomic::AtomicBool>,
) {
    loop {
        let mut ready = match readable.readable().await {
            Ok(ready) => ready,
            Err(err) => {
                tracing::error!("inbox watcher failed ({err}); DING workers poll instead");
                break;
            }
        };
        let wakes = match readable.get_ref().0.read() {
            Ok(wakes) => wakes,
            Err(err) => {
                tracing::error!("inbox watcher failed ({err}); DING workers poll instead");
                break;
            }
        };
        if wakes.is_empty() {
            ready.clear_ready();
            continue;
        }
        let woken: HashSet<String> = if wakes.overflowed {
            tracing::warn!("inbox watcher lost events; every DING worker looks again");
            workers.lock().keys().cloned().collect()
        } else {
            let sessions = sessions.lock();
            wakes
                .changed
                .iter()
                .filter_map(|descriptor| sessions.get(descriptor).cloned())
                .collect()
        };
        let workers = workers.lock();
        for session in woken {
            if let Some(tx) = workers.get(&session) {
                let _ = tx.send(DingMsg::InboxChanged);
            }
        }
    }
    failed.store(true, std::sync::atomic::Ordering::Relaxed);
    // Wake every worker so each notices at once that it must poll.
    for tx in workers.lock().values() {
        let _ = tx.send(DingMsg::InboxChanged);
    }
}

/// The next safety poll: the next multiple of [`SAFETY_POLL`] since the daemon's first call.
/// Every watched worker looks at the same instants, so an idle daemon wakes once per period
/// for all its workers rather than once per worker.
fn next_safety_poll() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    let periods = epoch.elapsed().as_nanos() / SAFETY_POLL.as_nanos() + 1;
    u32::try_from(periods)
        .ok()
        .and_then(|periods| epoch.checked_add(SAFETY_POLL * periods))
        .unwrap_or_else(|| Instant::now() + SAFETY_POLL)
}

/// What a worker needs to have its inbox watched.
pub(super) struct Wake {
    pub(super) wakeups: Arc<InboxWakeups>,
    pub(super) workers: Workers,
}

impl Worker {
    /// Lists the inbox and releases the ownership of messages that are really gone (archived
    /// or deleted), returning the unread ones. A failed scan releases nothing: "cannot list"
    /// is not "archived", and dropping staged or delivered records then would announce every
    /// message again (spec §7.3). Refused but present files keep their records too. None are
    /// returned when the inbox cannot be listed (nothing is announced then). The inbox is
    /// listed again only when it may have changed (see [`ScanCache`]); one unchanged since its
    /// last listing has nothing new to log or release.
    pub(super) fn unread_reconciled(&mut self) -> Vec<MessageName> {
        self.reopen_removed_inbox();
        let scan = match self.scans.scan(&self.inbox) {
            Ok(Scanned::Unchanged(scan)) => return scan.unread.clone(),
            Ok(Scanned::Fresh(scan)) => scan.clone(),
            Err(err) => {
                tracing::warn!(session = self.info.session, "cannot list inbox: {err}");
                return Vec::new();
            }
        };
        self.reconcile_listing(scan)
    }

    /// Whether an unread message has no owner yet: [`Worker::pending`] without the copy of
    /// the unread names when the inbox is unchanged since its last listing (an agent busy for
    /// long keeps a thousand there, and every look of its worker would copy them all).
    pub(super) fn has_pending(&mut self) -> bool {
        self.reopen_removed_inbox();
        let scan = match self.scans.scan(&self.inbox) {
            Ok(Scanned::Unchanged(scan)) => {
                return !self.ownership.pending(&scan.unread).is_empty()
            }
            Ok(Scanned::Fresh(scan)) => scan.clone(),
            Err(err) => {
                tracing::warn!(session = self.info.session, "cannot list inbox: {err}");
                return false;
            }
        };
        let unread = self.reconcile_listing(scan);
        !self.ownership.pending(&unread).is_empty()
    }

    /// Logs and reconciles a fresh listing (see [`Worker::unread_reconciled`]); the unread
    /// messages.
    fn reconcile_listing(&mut self, scan: UnreadScan) -> Vec<MessageName> {
        self.log_refused(scan.refused);
        let mut present = scan.unread.clone();
        present.extend(scan.held);
        if let Err(err) = self.ownership.reconcile(&present) {
            tracing::warn!(
                session = self.info.session,
                "cannot reconcile ownership: {err}"
            );
            // Look again next time, and try again then.
            self.scans.forget();
        }
        scan.unread
    }

    /// Watches the inbox the worker has open (replacing any earlier watch), and lists it with
    /// the cache that fits: a watched inbox is listed afresh on every wake-up.
    pub(super) fn watch_inbox(&mut self) {
        self.watch = None;
        self.watch = self.wake.wakeups.watch(&self.inbox, &self.wake.workers);
        self.scans = if self.watch.is_some() {
            ScanCache::watched()
        } else {
            ScanCache::default()
        };
    }

    /// When the worker looks at the inbox anyway if no message came: at the next safety poll
    /// when wake-ups come, after the plain poll when they do not. While a staged notice's
    /// outcome is unknown it looks at least every [`UNRESOLVED_RECHECK`], to ask again.
    pub(super) fn look_again_at(&mut self) -> tokio::time::Instant {
        if self.watch.is_some() && !self.wake.wakeups.working() {
            self.watch_inbox();
        }
        let now = Instant::now();
        let look = if self.watch.is_some() {
            next_safety_poll()
        } else {
            now + POLL
        };
        let look = if self.ownership.unresolved_transactions().is_empty() {
            look
        } else {
            look.min(now + UNRESOLVED_RECHECK)
        };
        // A removed inbox is opened again once its removal has settled.
        let look = match self.removal_seen {
            Some(seen) => look.min(seen + REMOVAL_SETTLE),
            None => look,
        };
        tokio::time::Instant::from_std(look)
    }

    /// The inbox works on the directory handles it opened; after someone removed the inbox
    /// (and perhaps a post created it again), open it again by its path.
    ///
    /// Not at the first sign of the removal: `rm -r` takes the inbox's children first and its
    /// own directory last, and the first removal already wakes the worker (inotify). Making a
    /// directory again in between would make that `rm` fail with "Directory not empty", so the
    /// inbox is opened again (and made, if no post made it meanwhile) only once
    /// [`REMOVAL_SETTLE`] has passed since the removal was first seen.
    fn reopen_removed_inbox(&mut self) {
        if !self.inbox.is_removed() {
            self.removal_seen = None;
            return;
        }
        let seen = *self.removal_seen.get_or_insert_with(Instant::now);
        if seen.elapsed() < REMOVAL_SETTLE {
            return;
        }
        match Inbox::open_session(&self.state_dir, self.inbox.session().clone()) {
            Ok(inbox) => {
                self.removal_seen = None;
                tracing::info!(
                    session = self.info.session,
                    "inbox directory was removed; opened it again"
                );
                self.inbox = inbox;
                self.watch_inbox();
            }
            Err(err) => {
                tracing::warn!(session = self.info.session, "cannot reopen inbox: {err}");
            }
        }
    }

    /// Logs, once per entry, why a file with a message name in `new/` is not a message (a
    /// link, a hard-linked file): it is never read, noticed or moved, and the log says so.
    fn log_refused(&mut self, refused: Vec<RefusedEntry>) {
        self.refused_logged
            .retain(|path| refused.iter().any(|entry| entry.path == *path));
        for entry in refused {
            if self.refused_logged.insert(entry.path.clone()) {
                tracing::warn!(
                    session = self.info.session,
                    "skipping {}: {}",
                    entry.path.display(),
                    entry.reason
                );
            }
        }
    }

    /// Unread messages nobody owns yet and no dispatch holds, FIFO. Ownership of archived
    /// messages is released.
    pub(super) fn pending(&mut self) -> Vec<MessageName> {
        let unread = self.unread_reconciled();
        let held = self.turns.held();
        self.ownership
            .pending(&unread)
            .into_iter()
            .filter(|name| !held.contains(*name))
            .cloned()
            .collect()
    }
}
