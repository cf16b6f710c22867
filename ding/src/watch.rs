//! Knowing when an inbox may have changed, and listing it only then.
//!
//! Two parts, used together by the daemon's DING workers:
//!
//! - [`InboxWatcher`]: one inotify instance for the whole daemon, watching the session's
//!   directory, `new/` and `archive/` of every inbox a worker serves. A post made by any tool
//!   (a plain rename into `new/`, no nudge) wakes the worker at once instead of at its next
//!   poll. inotify is only a wake-up: the inbox on disk stays the truth (spec §7.1), the
//!   worker lists it to learn what changed, and a worker without a watch (the per-user limit
//!   of watches was reached, `/proc` is missing) or one whose events were lost (the queue
//!   overflowed) still finds every post by listing on a timer.
//! - [`ScanCache`]: an agent that leaves its mail unread keeps hundreds of messages in its
//!   inbox, and listing them means a `stat` of every message in `new/` and `archive/` each
//!   time: with two agents and 900 unread messages each, a 200 ms poll spent about 9% of a core
//!   finding out that nothing changed. The cache keeps the last listing and lists again only
//!   when the directories' stamps ([`Inbox::stamp`]) say something may have changed, when the
//!   holder says so ([`ScanCache::forget`], on a wake-up), and in any case after its full
//!   rescan period, which bounds what a change no stamp shows (a second hard link made to a
//!   message, a clock set back) can go unseen.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant, SystemTime};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::inbox::{Inbox, InboxStamp, UnreadScan};

/// How far a directory's times must lie behind the moment a stamp was taken before an equal
/// stamp is trusted. Linux stamps directories from a clock that advances once per kernel tick
/// (at most 10 ms); a second covers that with room, and filesystems with coarser times are
/// covered by [`FULL_RESCAN`].
pub const SETTLE_MARGIN: Duration = Duration::from_secs(1);

/// The longest a listing is reused, changed stamps or not, by a holder that lists on a timer
/// alone ([`ScanCache::default`]).
pub const FULL_RESCAN: Duration = Duration::from_secs(5);

/// The longest a listing is reused by a holder whose inbox is watched
/// ([`ScanCache::watched`]). Every post, archive and removal wakes such a holder, which then
/// forgets its listing; what this period bounds is the one change neither a stamp nor inotify
/// shows: a second hard link made to a message from outside the inbox changes only the
/// message's link count, and the kernel reports that to watches on the file, not on its
/// directory. Such a message is refused when it is read, and stops being listed within this
/// period. It is long because a full listing of an inbox holding a thousand messages costs two
/// thousand `stat`s, and a daemon serving a hundred such inboxes must cost nothing at idle.
pub const WATCHED_FULL_RESCAN: Duration = Duration::from_secs(5 * 60);

/// What [`ScanCache::scan`] gave.
#[derive(Debug)]
pub enum Scanned<'a> {
    /// The inbox was listed just now.
    Fresh(&'a UnreadScan),
    /// The inbox cannot have changed since it was last listed; this is that listing.
    Unchanged(&'a UnreadScan),
}

impl<'a> Scanned<'a> {
    /// The listing, fresh or not.
    pub fn scan(&self) -> &'a UnreadScan {
        match self {
            Scanned::Fresh(scan) | Scanned::Unchanged(scan) => scan,
        }
    }
}

/// The last listing of one inbox, with the stamp taken just before it.
#[derive(Debug)]
pub struct ScanCache {
    last: Option<Last>,
    full_rescan: Duration,
}

impl Default for ScanCache {
    /// A cache for an inbox that is only listed on a timer: listings are reused for at most
    /// [`FULL_RESCAN`].
    fn default() -> Self {
        ScanCache {
            last: None,
            full_rescan: FULL_RESCAN,
        }
    }
}

#[derive(Debug)]
struct Last {
    stamp: InboxStamp,
    stamped_at: SystemTime,
    listed_at: Instant,
    scan: UnreadScan,
}

impl ScanCache {
    /// A cache for an inbox an [`InboxWatcher`] watches: its holder calls
    /// [`ScanCache::forget`] on every wake-up, and listings are reused for at most
    /// [`WATCHED_FULL_RESCAN`].
    pub fn watched() -> Self {
        ScanCache {
            last: None,
            full_rescan: WATCHED_FULL_RESCAN,
        }
    }

    /// The inbox's unread messages: the last listing when the inbox cannot have changed since,
    /// a new one otherwise. An inbox that cannot be looked at is an error, and the next call
    /// lists it again.
    pub fn scan(&mut self, inbox: &Inbox) -> Result<Scanned<'_>> {
        let stamped_at = SystemTime::now();
        let stamp = match inbox.stamp() {
            Ok(stamp) => stamp,
            Err(err) => {
                self.last = None;
                return Err(err);
            }
        };
        let reusable = self.last.as_ref().is_some_and(|last| {
            last.stamp == stamp
                && last.stamp.settled_before(last.stamped_at, SETTLE_MARGIN)
                && last.listed_at.elapsed() < self.full_rescan
        });
        let last = match self.last.take() {
            Some(last) if reusable => last,
            _ => Last {
                stamp,
                stamped_at,
                listed_at: Instant::now(),
                scan: inbox.scan_unread()?,
            },
        };
        let last = self.last.insert(last);
        Ok(if reusable {
            Scanned::Unchanged(&last.scan)
        } else {
            Scanned::Fresh(&last.scan)
        })
    }

    /// Forgets the last listing, so the next [`ScanCache::scan`] lists the inbox again (after
    /// acting on a listing failed, say, so that the next look acts on it again).
    pub fn forget(&mut self) {
        self.last = None;
    }
}

/// Which of an inbox's directories a watch is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchedDir {
    /// `<state>/inbox/<session>`: `presence.json` is replaced there, and `new/` or `archive/`
    /// removed.
    Session,
    /// `new/`: posts arrive, messages leave when archived.
    New,
    /// `archive/`: messages arrive when archived (each a receipt).
    Archive,
}

impl WatchedDir {
    /// The events that may change what the worker would do: an entry made, written, renamed
    /// or removed, and the directory's own removal or move, after which the holder opens the
    /// inbox again.
    fn events(self) -> WatchFlags {
        let entries = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        match self {
            WatchedDir::Session | WatchedDir::New => entries | WatchFlags::CLOSE_WRITE,
            WatchedDir::Archive => entries,
        }
    }
}

/// The watches on one inbox's directories, as [`InboxWatcher::watch`] added them. Pass it to
/// [`InboxWatcher::unwatch`] when the inbox is no longer served.
#[derive(Debug, Default)]
pub struct InboxWatch {
    descriptors: Vec<i32>,
}

impl InboxWatch {
    /// The watch descriptors, which [`Wakes::changed`] reports.
    pub fn descriptors(&self) -> &[i32] {
        &self.descriptors
    }
}

/// What one [`InboxWatcher::read`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Wakes {
    /// The watch descriptors that saw an event, each once, in the order first seen.
    pub changed: Vec<i32>,
    /// The kernel's event queue overflowed: events were lost, any inbox may have changed.
    pub overflowed: bool,
}

impl Wakes {
    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && !self.overflowed
    }
}

/// One inotify instance watching many inboxes (see the module doc).
///
/// One instance serves every inbox because the number of inotify instances per user is small
/// (128 by default on Linux), while watches are plentiful; an instance per pane would run out
/// at a few dozen panes beside other programs' instances.
#[derive(Debug)]
pub struct InboxWatcher {
    fd: OwnedFd,
}

/// Room for at least a few hundred events per read.
const READ_BUFFER: usize = 16 * 1024;

impl InboxWatcher {
    /// A new, non-blocking inotify instance with no watches.
    pub fn new() -> Result<InboxWatcher> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .map_err(|errno| Error::io("create an inotify instance", "inotify", errno.into()))?;
        Ok(InboxWatcher { fd })
    }

    /// Watches the inbox's directories: the very directories the inbox opened, through their
    /// handles (`/proc/self/fd/N`), so a directory swapped in under the same path is not
    /// watched in its place. Either every directory is watched or none is.
    pub fn watch(&self, inbox: &Inbox) -> Result<InboxWatch> {
        let mut watch = InboxWatch::default();
        for (which, dir) in inbox.watched_dirs() {
            let handle = format!("/proc/self/fd/{}", dir.handle().as_raw_fd());
            match inotify::add_watch(&self.fd, handle.as_str(), which.events()) {
                Ok(descriptor) => watch.descriptors.push(descriptor),
                Err(errno) => {
                    self.unwatch(&watch);
                    return Err(Error::io("watch directory", dir.path(), errno.into()));
                }
            }
        }
        Ok(watch)
    }

    /// Removes an inbox's watches. A watch the kernel already dropped (its directory was
    /// removed) is no error.
    pub fn unwatch(&self, watch: &InboxWatch) {
        for &descriptor in &watch.descriptors {
            let _ = inotify::remove_watch(&self.fd, descriptor);
        }
    }

    /// Reads every event queued now, without blocking; nothing queued is an empty [`Wakes`].
    pub fn read(&self) -> Result<Wakes> {
        let mut buffer = [MaybeUninit::<u8>::uninit(); READ_BUFFER];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        let mut wakes = Wakes::default();
        loop {
            match reader.next() {
                Ok(event) => note_event(&mut wakes, event.wd(), event.events()),
                Err(Errno::AGAIN) => return Ok(wakes),
                Err(Errno::INTR) => continue,
                Err(errno) => {
                    return Err(Error::io("read inotify events", "inotify", errno.into()))
                }
            }
        }
    }
}

fn note_event(wakes: &mut Wakes, descriptor: i32, events: ReadFlags) {
    if events.contains(ReadFlags::QUEUE_OVERFLOW) {
        wakes.overflowed = true;
    } else if !wakes.changed.contains(&descriptor) {
        wakes.changed.push(descriptor);
    }
}

impl AsFd for InboxWatcher {
    /// The inotify descriptor, readable when events are queued (for an event loop to wait on).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::FrontMatter;

    fn post(inbox: &Inbox) -> crate::MessageName {
        inbox.post(&FrontMatter::default(), "body\n").unwrap()
    }

    fn is_fresh(scanned: &Scanned<'_>) -> bool {
        matches!(scanned, Scanned::Fresh(_))
    }

    /// Waits until the directories' times are older than the settle margin.
    fn settle() {
        std::thread::sleep(SETTLE_MARGIN + Duration::from_millis(100));
    }

    fn watched_inbox() -> (tempfile::TempDir, Inbox, InboxWatcher, InboxWatch) {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        let watcher = InboxWatcher::new().unwrap();
        let watch = watcher.watch(&inbox).unwrap();
        assert_eq!(watch.descriptors().len(), 3);
        (state, inbox, watcher, watch)
    }

    /// Waits (at most 2 s) until the watcher has something to read, and reads it.
    fn next_wakes(watcher: &InboxWatcher) -> Wakes {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let wakes = watcher.read().unwrap();
            if !wakes.is_empty() || Instant::now() > deadline {
                return wakes;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_plain_rename_into_new_wakes_the_watcher() {
        let (state, inbox, watcher, watch) = watched_inbox();
        assert!(watcher.read().unwrap().is_empty());
        // Another tool's post: a file written elsewhere and renamed into `new/`, no nudge.
        let outside = state.path().join("1700000000000-abcdef.md");
        std::fs::write(&outside, "body\n").unwrap();
        std::fs::rename(&outside, inbox.dir().join("new/1700000000000-abcdef.md")).unwrap();
        let wakes = next_wakes(&watcher);
        assert_eq!(wakes.changed, vec![watch.descriptors()[1]]);
        assert!(!wakes.overflowed);
        assert!(watcher.read().unwrap().is_empty(), "one rename is one wake");
    }

    #[test]
    fn an_archive_and_a_presence_each_wake_the_watcher() {
        let (_state, inbox, watcher, watch) = watched_inbox();
        let name = post(&inbox);
        assert!(next_wakes(&watcher)
            .changed
            .contains(&watch.descriptors()[1]));
        inbox.archive(&name).unwrap();
        let wakes = next_wakes(&watcher);
        assert!(wakes.changed.contains(&watch.descriptors()[2]), "{wakes:?}");
        crate::presence::Presence {
            state: crate::presence::PresenceState::Dnd,
            since_unix_ms: 1,
        }
        .store(&inbox)
        .unwrap();
        assert!(next_wakes(&watcher)
            .changed
            .contains(&watch.descriptors()[0]));
    }

    #[test]
    fn an_unwatched_inbox_wakes_nobody() {
        let (_state, inbox, watcher, watch) = watched_inbox();
        watcher.unwatch(&watch);
        // The kernel says a removed watch is ignored; that is the last word from it.
        next_wakes(&watcher);
        post(&inbox);
        std::thread::sleep(Duration::from_millis(50));
        assert!(watcher.read().unwrap().is_empty());
    }

    #[test]
    fn a_full_event_queue_reports_an_overflow() {
        let (_state, inbox, watcher, _watch) = watched_inbox();
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(16384);
        // Each file made in `new/` queues a create and a close-write event.
        let new = inbox.dir().join("new");
        for i in 0..limit / 2 + 16 {
            std::fs::write(new.join(format!("junk-{i}")), "").unwrap();
        }
        let mut overflowed = false;
        while let Ok(wakes) = watcher.read() {
            if wakes.is_empty() {
                break;
            }
            overflowed |= wakes.overflowed;
        }
        assert!(overflowed, "{limit} queued events did not overflow");
    }

    #[test]
    fn a_post_right_after_a_listing_is_in_the_next_one() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        let mut cache = ScanCache::default();
        let mut posted = Vec::new();
        // Posts land within the same clock step as the listing before them, again and again.
        for _ in 0..200 {
            posted.push(post(&inbox));
            let scanned = cache.scan(&inbox).unwrap();
            assert_eq!(scanned.scan().unread, posted);
        }
    }

    #[test]
    fn a_settled_inbox_is_listed_once_and_any_post_or_archive_lists_it_again() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        let first = post(&inbox);
        settle();
        let mut cache = ScanCache::default();
        assert!(is_fresh(&cache.scan(&inbox).unwrap()));
        let again = cache.scan(&inbox).unwrap();
        assert!(
            !is_fresh(&again),
            "an unchanged settled inbox was listed again"
        );
        assert_eq!(again.scan().unread, vec![first.clone()]);

        let second = post(&inbox);
        let scanned = cache.scan(&inbox).unwrap();
        assert!(is_fresh(&scanned));
        assert_eq!(scanned.scan().unread, vec![first.clone(), second.clone()]);

        settle();
        assert!(is_fresh(&cache.scan(&inbox).unwrap()));
        assert!(!is_fresh(&cache.scan(&inbox).unwrap()));
        inbox.archive(&first).unwrap();
        let scanned = cache.scan(&inbox).unwrap();
        assert!(is_fresh(&scanned));
        assert_eq!(scanned.scan().unread, vec![second]);
    }

    #[test]
    fn a_change_no_stamp_shows_is_seen_within_the_full_rescan_period() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        let name = post(&inbox);
        settle();
        let mut cache = ScanCache::default();
        assert_eq!(
            cache.scan(&inbox).unwrap().scan().unread,
            vec![name.clone()]
        );
        // A second hard link, made from outside the inbox, changes the file, not `new/`.
        let outside = state.path().join("outside");
        std::fs::hard_link(inbox.dir().join("new").join(name.as_str()), &outside).unwrap();
        let started = Instant::now();
        loop {
            let scanned = cache.scan(&inbox).unwrap();
            if scanned.scan().unread.is_empty() {
                assert!(is_fresh(&scanned));
                assert_eq!(scanned.scan().held, vec![name]);
                break;
            }
            assert!(
                started.elapsed() < FULL_RESCAN + Duration::from_secs(1),
                "a hard-linked message was still listed as unread after {:?}",
                started.elapsed()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    #[test]
    fn an_inbox_removed_and_made_again_is_listed_afresh() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        post(&inbox);
        settle();
        let mut cache = ScanCache::default();
        cache.scan(&inbox).unwrap();
        assert!(!is_fresh(&cache.scan(&inbox).unwrap()));
        std::fs::remove_dir_all(inbox.dir()).unwrap();
        let reopened = Inbox::open(state.path(), "worker").unwrap();
        let name = post(&reopened);
        let scanned = cache.scan(&reopened).unwrap();
        assert!(is_fresh(&scanned));
        assert_eq!(scanned.scan().unread, vec![name]);
    }
}
