//! Listing an inbox only when it may have changed.
//!
//! The daemon's DING worker looks at its agent's inbox every few hundred milliseconds, and an
//! agent that leaves its mail unread keeps hundreds of messages there. Listing them means a
//! `stat` of every message in `new/` and `archive/` each time: with two agents and 900 unread
//! messages each, about 9% of a core spent finding out that nothing changed. A
//! [`ScanCache`] keeps the last listing and lists again only when the directories' stamps
//! ([`Inbox::stamp`]) say something may have changed, and in any case every
//! [`FULL_RESCAN`], which bounds what a change no stamp shows (a second hard link made to a
//! message, a clock set back) can go unseen.

use std::time::{Duration, Instant, SystemTime};

use crate::error::Result;
use crate::inbox::{Inbox, InboxStamp, UnreadScan};

/// How far a directory's times must lie behind the moment a stamp was taken before an equal
/// stamp is trusted. Linux stamps directories from a clock that advances once per kernel tick
/// (at most 10 ms); a second covers that with room, and filesystems with coarser times are
/// covered by [`FULL_RESCAN`].
pub const SETTLE_MARGIN: Duration = Duration::from_secs(1);

/// The longest a listing is reused, changed stamps or not.
pub const FULL_RESCAN: Duration = Duration::from_secs(5);

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
#[derive(Debug, Default)]
pub struct ScanCache {
    last: Option<Last>,
}

#[derive(Debug)]
struct Last {
    stamp: InboxStamp,
    stamped_at: SystemTime,
    listed_at: Instant,
    scan: UnreadScan,
}

impl ScanCache {
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
                && last.listed_at.elapsed() < FULL_RESCAN
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
