//! The durable per-session inbox, the authority for DING (spec §7.1).
//!
//! ```text
//! <state>/inbox/<session>/
//!     tmp/       messages being written; never listed
//!     new/       unread messages, FIFO by file name
//!     archive/   read messages; each name here is a durable receipt
//!     presence.json   (see crate::presence)
//! ```
//!
//! A post writes `tmp/<name>`, fsyncs it, renames it into `new/` and fsyncs `new/`, so a crash
//! leaves either a whole message in `new/` or a leftover in `tmp/` that nothing lists and
//! [`Inbox::reconcile`] eventually removes. Archiving renames `new/<name>` to `archive/<name>`.
//! Because an archived name is a receipt, a copy of it that shows up in `new/` again (restored
//! from a backup, re-posted by a synchronising tool) is not listed, and `reconcile` removes it.
//!
//! Every name that reaches the filesystem is a validated [`SessionName`] or [`MessageName`], and
//! nothing below the state directory is resolved by path: the inbox holds checked handles of its
//! directories and works relative to them (see `durable`), so a symbolic link planted as a
//! message, as `new/`, `tmp/` or `archive/`, as the session's directory or as `inbox/` is never
//! followed. A planted directory link is refused with an error naming it; a planted message link,
//! or a message file with a second hard link, is not listed, not read and not moved.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::durable::{BoundedRead, EntryKind, IfMissing, PrivateDir};
use crate::error::{Error, Result};
use crate::message::{self, FrontMatter, Message, MessageStatus};
use crate::names::{MessageName, SessionName};
use crate::watch::WatchedDir;

/// The largest message file the inbox writes or reads, 8 MiB. Messages are for agents to read
/// into a context window, so anything larger is a mistake, and the bound keeps a stray huge file
/// from exhausting the daemon's memory.
pub const MAX_MESSAGE_BYTES: u64 = 8 * 1024 * 1024;

/// How old a leftover in `tmp/` must be before [`Inbox::reconcile`] removes it. A post keeps its
/// temporary file for milliseconds; an hour leaves room for a writer on a badly stalled disk.
pub const DEFAULT_TMP_MAX_AGE: Duration = Duration::from_secs(60 * 60);

/// How many fresh names a post tries before giving up. A collision needs the same millisecond
/// and the same six random characters, so a second attempt is already a rarity.
const NAME_ATTEMPTS: u32 = 16;

const TMP: &str = "tmp";
const NEW: &str = "new";
const ARCHIVE: &str = "archive";

/// One session's inbox.
#[derive(Clone, Debug)]
pub struct Inbox {
    session: SessionName,
    dirs: Arc<InboxDirs>,
}

/// The checked handles of one inbox's directories, opened once and shared by clones.
///
/// `tmp/` is checked when the inbox is opened but not kept open: only a post and
/// [`Inbox::reconcile`] use it, and the daemon keeps one inbox open for every pane, so each
/// handle kept is a descriptor a pane costs the daemon (see `belfry_mux::descriptors`).
#[derive(Debug)]
struct InboxDirs {
    session: PrivateDir,
    new: PrivateDir,
    archive: PrivateDir,
}

/// What [`Inbox::archive`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveOutcome {
    /// The message moved from `new/` to `archive/`.
    Archived,
    /// The message was already archived; a leftover copy in `new/`, if any, was removed.
    AlreadyArchived,
}

/// What [`Inbox::reconcile`] cleaned up, for the caller to log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Copies in `new/` of already archived messages, now removed.
    pub removed_duplicates: Vec<MessageName>,
    /// Stale leftovers in `tmp/`, now removed.
    pub removed_temporary: Vec<String>,
    /// Entries in `new/` that are not message files; they are never opened and left alone.
    pub foreign_entries: Vec<String>,
}

/// An entry of `new/` that has a message name but is not listed, and why: a symbolic link, a
/// file with more than one hard link, a directory… It is never opened, moved or removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefusedEntry {
    /// Its path.
    pub path: PathBuf,
    /// Why it is not a message.
    pub reason: &'static str,
}

/// What [`Inbox::scan_unread`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnreadScan {
    /// The unread messages, oldest first.
    pub unread: Vec<MessageName>,
    /// Entries with message names that are not messages, for the caller to log.
    pub refused: Vec<RefusedEntry>,
    /// The names of the refused entries that are not archived, sorted: still present, only
    /// not listed right now (a hard link from a backup, say). Ownership of these must be kept
    /// (spec §7.3): releasing it would announce the message again once it is listed again.
    pub held: Vec<MessageName>,
}

/// The identity and the times of `new/` and `archive/` at one moment (see [`Inbox::stamp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboxStamp {
    new: DirStamp,
    archive: DirStamp,
}

impl InboxStamp {
    /// Whether every time in the stamp is older than `at - margin`. A directory's times come
    /// from a clock that advances in steps (a kernel tick; whole seconds on some filesystems),
    /// so a change made in the same step as an earlier one can leave them unchanged. Once the
    /// times are more than one step older than the moment the stamp was taken, any later change
    /// must move them, and an equal stamp then proves nothing changed.
    pub fn settled_before(&self, at: SystemTime, margin: Duration) -> bool {
        let Some(limit) = at.checked_sub(margin) else {
            return false;
        };
        [self.new, self.archive]
            .iter()
            .all(|dir| dir.newest_time() < limit)
    }
}

/// One directory's device, inode, modification and change times (nanoseconds since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DirStamp {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl DirStamp {
    fn of(dir: &PrivateDir) -> Result<DirStamp> {
        let stat = dir.stat()?;
        let ns = |secs, nanos| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Ok(DirStamp {
            dev: stat.st_dev,
            ino: stat.st_ino,
            mtime_ns: ns(stat.st_mtime, stat.st_mtime_nsec),
            ctime_ns: ns(stat.st_ctime, stat.st_ctime_nsec),
        })
    }

    /// The later of the two times (the epoch for a time before it, the end of what a
    /// `SystemTime` holds here for one beyond).
    fn newest_time(&self) -> SystemTime {
        let newest = u64::try_from(self.mtime_ns.max(self.ctime_ns).max(0)).unwrap_or(u64::MAX);
        UNIX_EPOCH + Duration::from_nanos(newest)
    }
}

/// The entries of `new/`, sorted into what can be a message and what cannot.
struct NewScan {
    messages: Vec<MessageName>,
    refused: Vec<RefusedEntry>,
    /// The message names of `refused`.
    refused_names: Vec<MessageName>,
    foreign: Vec<String>,
}

/// The inbox directory of `session` under `state_dir`, without touching the filesystem.
pub fn inbox_dir(state_dir: &Path, session: &SessionName) -> PathBuf {
    state_dir.join("inbox").join(session.as_str())
}

impl Inbox {
    /// Opens (creating if needed, all 0700) the inbox of `session` under `state_dir`.
    pub fn open(state_dir: &Path, session: &str) -> Result<Inbox> {
        let session = SessionName::parse(session)?;
        Inbox::open_session(state_dir, session)
    }

    /// Like [`Inbox::open`], for an already validated session name.
    pub fn open_session(state_dir: &Path, session: SessionName) -> Result<Inbox> {
        Inbox::open_with(state_dir, session, IfMissing::Create)
    }

    /// Opens the inbox of `session` only if it exists, creating nothing: for commands that
    /// read or move messages, where an unknown session is a mistake, not a request
    /// (spec §12: bad input has no side effects). A missing `tmp/`, `new/` or `archive/` of an
    /// existing inbox is recreated.
    pub fn open_existing(state_dir: &Path, session: &str) -> Result<Inbox> {
        let session = SessionName::parse(session)?;
        Inbox::open_with(state_dir, session, IfMissing::Leave)
    }

    /// Opens the inbox's directories one below the other, each relative to the checked one
    /// above it; [`Error::NoInbox`] when one is missing and `missing` says to leave it so.
    fn open_with(state_dir: &Path, session: SessionName, missing: IfMissing) -> Result<Inbox> {
        let no_inbox = || Error::NoInbox {
            session: session.to_string(),
            path: inbox_dir(state_dir, &session),
        };
        let Some(state) = PrivateDir::open_root(state_dir, missing)? else {
            return Err(no_inbox());
        };
        let Some(root) = state.child("inbox", missing)? else {
            return Err(no_inbox());
        };
        let Some(dir) = root.child(session.as_str(), missing)? else {
            return Err(no_inbox());
        };
        // Made and checked now (a planted link is refused at open), then closed.
        dir.create_child(TMP)?;
        let dirs = InboxDirs {
            new: dir.create_child(NEW)?,
            archive: dir.create_child(ARCHIVE)?,
            session: dir,
        };
        Ok(Inbox {
            session,
            dirs: Arc::new(dirs),
        })
    }

    /// The session this inbox belongs to.
    pub fn session(&self) -> &SessionName {
        &self.session
    }

    /// `<state>/inbox/<session>`.
    pub fn dir(&self) -> &Path {
        self.dirs.session.path()
    }

    /// What `new/` and `archive/` look like now, cheaply (two `fstat`s): equal stamps mean no
    /// entry was created, renamed or removed in either, within the limits that
    /// [`InboxStamp::settled_before`] states. [`crate::watch::ScanCache`] uses it to skip
    /// listing an inbox that has not changed.
    pub fn stamp(&self) -> Result<InboxStamp> {
        Ok(InboxStamp {
            new: DirStamp::of(&self.dirs.new)?,
            archive: DirStamp::of(&self.dirs.archive)?,
        })
    }

    /// Whether the inbox's directory, or one of `new/` and `archive/`, has been removed since
    /// the inbox was opened (`tmp/` is opened afresh by each post). The inbox works on the directories it opened, so a holder
    /// that lives long (the daemon's DING worker) opens the inbox again when this is true;
    /// otherwise it would keep watching a directory nobody can post to any more.
    pub fn is_removed(&self) -> bool {
        let InboxDirs {
            session,
            new,
            archive,
        } = &*self.dirs;
        [session, new, archive]
            .into_iter()
            .any(PrivateDir::is_removed)
    }

    /// The checked handle of `<state>/inbox/<session>`, for files kept beside the messages.
    pub(crate) fn session_dir(&self) -> &PrivateDir {
        &self.dirs.session
    }

    /// The session's directory, `new/` and `archive/`: the directories whose entries change
    /// when a message is posted or archived, or the presence is declared.
    pub(crate) fn watched_dirs(&self) -> [(WatchedDir, &PrivateDir); 3] {
        [
            (WatchedDir::Session, &self.dirs.session),
            (WatchedDir::New, &self.dirs.new),
            (WatchedDir::Archive, &self.dirs.archive),
        ]
    }

    /// Posts a message and returns its name once it is durably in `new/`.
    ///
    /// The name's timestamp is the current time, or one millisecond after the newest unread
    /// message if that is later, so that messages posted one after another are listed in the
    /// order they were posted even within one millisecond.
    pub fn post(&self, front_matter: &FrontMatter, body: &str) -> Result<MessageName> {
        let text = message::render(front_matter, body);
        if text.len() as u64 > MAX_MESSAGE_BYTES {
            return Err(Error::MessageTooLarge {
                session: self.session.to_string(),
                name: "(new message)".to_owned(),
                limit: MAX_MESSAGE_BYTES,
            });
        }
        let now_ms = now_unix_ms();
        let unix_ms = match self.list_unread()?.last().map(MessageName::unix_ms) {
            Some(newest) if newest >= now_ms => newest.saturating_add(1),
            _ => now_ms,
        };
        let tmp = self.dirs.session.create_child(TMP)?;
        for _ in 0..NAME_ATTEMPTS {
            let name = MessageName::generate(unix_ms)?;
            if self.try_post_as(&tmp, &name, text.as_bytes())? {
                return Ok(name);
            }
        }
        Err(Error::NameExhausted {
            session: self.session.to_string(),
            attempts: NAME_ATTEMPTS,
        })
    }

    /// Writes `text` as `name`; `Ok(false)` if the name is taken anywhere in the inbox.
    fn try_post_as(&self, tmp: &PrivateDir, name: &MessageName, text: &[u8]) -> Result<bool> {
        let InboxDirs { new, archive, .. } = &*self.dirs;
        let name = name.as_str();
        // A name that is already a receipt would be suppressed the moment it was posted.
        if archive.exists(name)? || new.exists(name)? {
            return Ok(false);
        }
        match tmp.write_new_file(name, text) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(err) => {
                remove_quietly(tmp, name);
                return Err(Error::io("write", tmp.entry(name), err));
            }
        }
        match tmp.rename_no_replace(name, new, name) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                remove_quietly(tmp, name);
                return Ok(false);
            }
            Err(err) => {
                remove_quietly(tmp, name);
                return Err(Error::io("move into new/", new.entry(name), err));
            }
        }
        new.sync()?;
        Ok(true)
    }

    /// Unread messages, oldest first. Copies of archived messages, temporary files and entries
    /// that are not message files (outside the name grammar, links, hard-linked files) are not
    /// listed.
    pub fn list_unread(&self) -> Result<Vec<MessageName>> {
        Ok(self.scan_unread()?.unread)
    }

    /// Like [`Inbox::list_unread`], also returning the entries of `new/` that have a message
    /// name but were refused as messages, so that a caller can log why a file is not listed.
    pub fn scan_unread(&self) -> Result<UnreadScan> {
        let scan = self.scan_new()?;
        let mut unread = Vec::with_capacity(scan.messages.len());
        for name in scan.messages {
            if !self.is_archived(&name)? {
                unread.push(name);
            }
        }
        unread.sort();
        let mut held = Vec::with_capacity(scan.refused_names.len());
        for name in scan.refused_names {
            if !self.is_archived(&name)? {
                held.push(name);
            }
        }
        held.sort();
        Ok(UnreadScan {
            unread,
            refused: scan.refused,
            held,
        })
    }

    /// Whether `name` is currently unread (a message file in `new/`, and not archived).
    pub fn is_unread(&self, name: &MessageName) -> Result<bool> {
        Ok(self.dirs.new.kind(name.as_str())? == Some(EntryKind::File)
            && !self.is_archived(name)?)
    }

    /// Whether `name` has been archived.
    pub fn is_archived(&self, name: &MessageName) -> Result<bool> {
        self.dirs.archive.exists(name.as_str())
    }

    /// Reads a message, unread or archived. The archived copy wins if both exist, because the
    /// archive is the receipt. A link or a hard-linked file under the name is refused.
    pub fn read(&self, name: &MessageName) -> Result<Message> {
        let (dir, status) = if self.is_archived(name)? {
            (&self.dirs.archive, MessageStatus::Archived)
        } else {
            (&self.dirs.new, MessageStatus::Unread)
        };
        let bytes = match dir.read_file(name.as_str(), MAX_MESSAGE_BYTES) {
            Ok(BoundedRead::Bytes(bytes)) => bytes,
            Ok(BoundedRead::TooLarge) => {
                return Err(Error::MessageTooLarge {
                    session: self.session.to_string(),
                    name: name.to_string(),
                    limit: MAX_MESSAGE_BYTES,
                })
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(Error::MessageNotFound {
                    session: self.session.to_string(),
                    name: name.to_string(),
                })
            }
            Err(err) => return Err(Error::io("read message", dir.entry(name.as_str()), err)),
        };
        let text = String::from_utf8_lossy(&bytes);
        let (front_matter, body) = message::parse(&text);
        Ok(Message {
            name: name.clone(),
            status,
            front_matter,
            body: body.to_owned(),
        })
    }

    /// Archives a message: `new/<name>` → `archive/<name>`, durably. Only a message file (a
    /// regular file with one link) is moved; a link or another kind of entry under that name in
    /// `new/` is refused and left alone.
    pub fn archive(&self, name: &MessageName) -> Result<ArchiveOutcome> {
        let InboxDirs { new, archive, .. } = &*self.dirs;
        let file = name.as_str();
        match new.kind(file)? {
            Some(EntryKind::File) => {}
            // Already archived: whatever is left in new/ is not ours to touch.
            _ if archive.exists(file)? => return Ok(ArchiveOutcome::AlreadyArchived),
            // A planted link or a second link to an outside file is refused out loud: the user
            // asked for this name and deserves to know why it is not moved.
            Some(kind @ (EntryKind::Link | EntryKind::HardLinked)) => {
                return Err(Error::RefusedPath {
                    path: new.entry(file),
                    reason: format!(
                        "{}; it is not a message and was not archived",
                        kind.refusal_reason().unwrap_or_default()
                    ),
                })
            }
            // A directory or the like under a message name is simply not a message.
            Some(EntryKind::NotAFile) | None => {
                return Err(Error::MessageNotFound {
                    session: self.session.to_string(),
                    name: name.to_string(),
                })
            }
        }
        match new.rename_no_replace(file, archive, file) {
            Ok(()) => {
                archive.sync()?;
                new.sync()?;
                Ok(ArchiveOutcome::Archived)
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                // The receipt already exists; the copy in new/ is a duplicate.
                self.remove_duplicate(name)?;
                new.sync()?;
                Ok(ArchiveOutcome::AlreadyArchived)
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // Someone else archived it between our check and our rename.
                if archive.exists(file)? {
                    Ok(ArchiveOutcome::AlreadyArchived)
                } else {
                    Err(Error::MessageNotFound {
                        session: self.session.to_string(),
                        name: name.to_string(),
                    })
                }
            }
            Err(err) => Err(Error::io("archive", new.entry(file), err)),
        }
    }

    /// Removes copies of archived messages from `new/`, and leftovers in `tmp/` whose last
    /// modification is at least `tmp_max_age` before `now`. Run it at start-up and now and then.
    pub fn reconcile(&self, now: SystemTime, tmp_max_age: Duration) -> Result<ReconcileReport> {
        let scan = self.scan_new()?;
        let mut report = ReconcileReport {
            foreign_entries: scan.foreign,
            ..ReconcileReport::default()
        };
        for name in scan.messages {
            if self.is_archived(&name)? {
                self.remove_duplicate(&name)?;
                report.removed_duplicates.push(name);
            }
        }
        if !report.removed_duplicates.is_empty() {
            self.dirs.new.sync()?;
        }
        report.removed_duplicates.sort();
        report.removed_temporary = self.remove_stale_temporaries(now, tmp_max_age)?;
        Ok(report)
    }

    fn remove_duplicate(&self, name: &MessageName) -> Result<()> {
        let new = &self.dirs.new;
        new.remove(name.as_str())
            .map_err(|err| Error::io("remove archived duplicate", new.entry(name.as_str()), err))
    }

    fn remove_stale_temporaries(&self, now: SystemTime, max_age: Duration) -> Result<Vec<String>> {
        let tmp = self.dirs.session.create_child(TMP)?;
        let mut removed = Vec::new();
        for file_name in tmp.list()? {
            let file_name = OsStr::from_bytes(&file_name);
            // tmp/ belongs to the inbox alone; only directories (which posts never make) stay.
            // A link is removed as itself; what it points to is never touched.
            let Ok(Some(modified)) = tmp.modified_non_dir(file_name) else {
                continue;
            };
            let age = now.duration_since(modified).ok();
            if age.is_some_and(|age| age >= max_age) {
                tmp.remove(file_name).map_err(|err| {
                    Error::io("remove stale temporary file", tmp.entry(file_name), err)
                })?;
                removed.push(file_name.to_string_lossy().into_owned());
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// Sorts the entries of `new/`: message files with message names, entries with message
    /// names that are not message files (refused, with why), and everything else (foreign).
    fn scan_new(&self) -> Result<NewScan> {
        let new = &self.dirs.new;
        let mut scan = NewScan {
            messages: Vec::new(),
            refused: Vec::new(),
            refused_names: Vec::new(),
            foreign: Vec::new(),
        };
        for file_name in new.list()? {
            let parsed = std::str::from_utf8(&file_name)
                .ok()
                .and_then(|text| MessageName::parse(text).ok());
            let Some(name) = parsed else {
                scan.foreign
                    .push(String::from_utf8_lossy(&file_name).into_owned());
                continue;
            };
            match new.kind(name.as_str())? {
                Some(EntryKind::File) => scan.messages.push(name),
                Some(kind) => {
                    scan.foreign.push(name.to_string());
                    scan.refused.push(RefusedEntry {
                        path: new.entry(name.as_str()),
                        reason: kind.refusal_reason().unwrap_or_default(),
                    });
                    scan.refused_names.push(name);
                }
                // Gone between the listing and the look: nothing to list.
                None => {}
            }
        }
        scan.foreign.sort();
        scan.refused.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(scan)
    }
}

fn remove_quietly(dir: &PrivateDir, name: &str) {
    // Best effort: the file is a leftover in tmp/ that reconcile removes anyway.
    let _ = dir.remove(name);
}

/// Milliseconds since the Unix epoch; 0 if the clock is before 1970.
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn open_creates_private_directories() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        assert_eq!(inbox.dir(), state.path().join("inbox/worker"));
        for sub in ["", "tmp", "new", "archive"] {
            let mode = fs::metadata(inbox.dir().join(sub))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{sub} is private");
        }
    }

    #[test]
    fn open_rejects_bad_session_names_without_creating_anything() {
        let state = tempfile::tempdir().unwrap();
        for bad in ["..", "a/b", ""] {
            let err = Inbox::open(state.path(), bad).unwrap_err();
            assert!(matches!(err, Error::InvalidSessionName { .. }));
        }
        assert_eq!(fs::read_dir(state.path()).unwrap().count(), 0);
    }

    #[test]
    fn symlinks_in_new_are_not_listed_or_followed() {
        let state = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        let secret = state.path().join("secret");
        fs::write(&secret, "---\nsubject: secret\n---\n").unwrap();
        let name = MessageName::parse("1785070000000-abc123.md").unwrap();
        std::os::unix::fs::symlink(&secret, inbox.dir().join("new").join(name.as_str())).unwrap();
        assert!(inbox.list_unread().unwrap().is_empty());
        assert!(matches!(
            inbox.read(&name).unwrap_err(),
            Error::Io {
                action: "read message",
                ..
            }
        ));
    }
}
