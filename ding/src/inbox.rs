//! The durable per-session inbox, the authority for DING (SPEC §7.1).
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
//! files are opened without following symlinks, so nothing outside the inbox is ever opened.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::durable::{self, BoundedRead};
use crate::error::{Error, Result};
use crate::message::{self, FrontMatter, Message, MessageStatus};
use crate::names::{MessageName, SessionName};

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
    dir: PathBuf,
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
        durable::create_private_dir(&state_dir.join("inbox"))?;
        let dir = inbox_dir(state_dir, &session);
        durable::create_private_dir(&dir)?;
        for sub in [TMP, NEW, ARCHIVE] {
            durable::create_private_dir(&dir.join(sub))?;
        }
        Ok(Inbox { session, dir })
    }

    /// The session this inbox belongs to.
    pub fn session(&self) -> &SessionName {
        &self.session
    }

    /// `<state>/inbox/<session>`.
    pub fn dir(&self) -> &Path {
        &self.dir
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
        for _ in 0..NAME_ATTEMPTS {
            let name = MessageName::generate(unix_ms)?;
            if self.try_post_as(&name, text.as_bytes())? {
                return Ok(name);
            }
        }
        Err(Error::NameExhausted {
            session: self.session.to_string(),
            attempts: NAME_ATTEMPTS,
        })
    }

    /// Writes `text` as `name`; `Ok(false)` if the name is taken anywhere in the inbox.
    fn try_post_as(&self, name: &MessageName, text: &[u8]) -> Result<bool> {
        let archived = self.path(ARCHIVE, name);
        let unread = self.path(NEW, name);
        // A name that is already a receipt would be suppressed the moment it was posted.
        if durable::entry_exists(&archived)? || durable::entry_exists(&unread)? {
            return Ok(false);
        }
        let temporary = self.path(TMP, name);
        match durable::write_new_file(&temporary, text) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(err) => {
                remove_quietly(&temporary);
                return Err(Error::io("write", temporary, err));
            }
        }
        match durable::rename_no_replace(&temporary, &unread) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                remove_quietly(&temporary);
                return Ok(false);
            }
            Err(err) => {
                remove_quietly(&temporary);
                return Err(Error::io("move into new/", unread, err));
            }
        }
        durable::sync_dir(&self.dir.join(NEW))?;
        Ok(true)
    }

    /// Unread messages, oldest first. Copies of archived messages, temporary files and entries
    /// outside the name grammar are not listed.
    pub fn list_unread(&self) -> Result<Vec<MessageName>> {
        let (candidates, _) = self.scan_new()?;
        let mut names = Vec::with_capacity(candidates.len());
        for name in candidates {
            if !self.is_archived(&name)? {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Whether `name` is currently unread (a file in `new/`, and not archived).
    pub fn is_unread(&self, name: &MessageName) -> Result<bool> {
        Ok(durable::is_regular_file(&self.path(NEW, name))? && !self.is_archived(name)?)
    }

    /// Whether `name` has been archived.
    pub fn is_archived(&self, name: &MessageName) -> Result<bool> {
        durable::entry_exists(&self.path(ARCHIVE, name))
    }

    /// Reads a message, unread or archived. The archived copy wins if both exist, because the
    /// archive is the receipt.
    pub fn read(&self, name: &MessageName) -> Result<Message> {
        let (path, status) = if self.is_archived(name)? {
            (self.path(ARCHIVE, name), MessageStatus::Archived)
        } else {
            (self.path(NEW, name), MessageStatus::Unread)
        };
        let bytes = match durable::read_bounded(&path, MAX_MESSAGE_BYTES) {
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
            Err(err) => return Err(Error::io("read message", path, err)),
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

    /// Archives a message: `new/<name>` → `archive/<name>`, durably. Only a regular file is
    /// moved; anything else under that name in `new/` is not a message and is left alone.
    pub fn archive(&self, name: &MessageName) -> Result<ArchiveOutcome> {
        let unread = self.path(NEW, name);
        let archived = self.path(ARCHIVE, name);
        if !durable::is_regular_file(&unread)? {
            return if durable::entry_exists(&archived)? {
                Ok(ArchiveOutcome::AlreadyArchived)
            } else {
                Err(Error::MessageNotFound {
                    session: self.session.to_string(),
                    name: name.to_string(),
                })
            };
        }
        match durable::rename_no_replace(&unread, &archived) {
            Ok(()) => {
                durable::sync_dir(&self.dir.join(ARCHIVE))?;
                durable::sync_dir(&self.dir.join(NEW))?;
                Ok(ArchiveOutcome::Archived)
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                // The receipt already exists; the copy in new/ is a duplicate.
                self.remove_duplicate(name)?;
                durable::sync_dir(&self.dir.join(NEW))?;
                Ok(ArchiveOutcome::AlreadyArchived)
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // Someone else archived it between our check and our rename.
                if durable::entry_exists(&archived)? {
                    Ok(ArchiveOutcome::AlreadyArchived)
                } else {
                    Err(Error::MessageNotFound {
                        session: self.session.to_string(),
                        name: name.to_string(),
                    })
                }
            }
            Err(err) => Err(Error::io("archive", unread, err)),
        }
    }

    /// Removes copies of archived messages from `new/`, and leftovers in `tmp/` whose last
    /// modification is at least `tmp_max_age` before `now`. Run it at start-up and now and then.
    pub fn reconcile(&self, now: SystemTime, tmp_max_age: Duration) -> Result<ReconcileReport> {
        let (names, foreign_entries) = self.scan_new()?;
        let mut report = ReconcileReport {
            foreign_entries,
            ..ReconcileReport::default()
        };
        for name in names {
            if self.is_archived(&name)? {
                self.remove_duplicate(&name)?;
                report.removed_duplicates.push(name);
            }
        }
        if !report.removed_duplicates.is_empty() {
            durable::sync_dir(&self.dir.join(NEW))?;
        }
        report.removed_duplicates.sort();
        report.removed_temporary = self.remove_stale_temporaries(now, tmp_max_age)?;
        Ok(report)
    }

    fn remove_duplicate(&self, name: &MessageName) -> Result<()> {
        let duplicate = self.path(NEW, name);
        match fs::remove_file(&duplicate) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(Error::io("remove archived duplicate", duplicate, err)),
        }
    }

    fn remove_stale_temporaries(&self, now: SystemTime, max_age: Duration) -> Result<Vec<String>> {
        let tmp = self.dir.join(TMP);
        let mut removed = Vec::new();
        for entry in fs::read_dir(&tmp).map_err(|err| Error::io("list", &tmp, err))? {
            let entry = entry.map_err(|err| Error::io("list", &tmp, err))?;
            let path = entry.path();
            let Ok(metadata) = fs::symlink_metadata(&path) else {
                continue;
            };
            // tmp/ belongs to the inbox alone; only directories (which posts never make) stay.
            if metadata.is_dir() {
                continue;
            }
            let age = metadata
                .modified()
                .ok()
                .and_then(|modified| now.duration_since(modified).ok());
            if age.is_some_and(|age| age >= max_age) {
                match fs::remove_file(&path) {
                    Ok(()) => removed.push(lossy(entry.file_name())),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(Error::io("remove stale temporary file", path, err)),
                }
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// Regular files in `new/` with message names, and the names of everything else there.
    fn scan_new(&self) -> Result<(Vec<MessageName>, Vec<String>)> {
        let new = self.dir.join(NEW);
        let mut names = Vec::new();
        let mut foreign = Vec::new();
        for entry in fs::read_dir(&new).map_err(|err| Error::io("list", &new, err))? {
            let entry = entry.map_err(|err| Error::io("list", &new, err))?;
            let file_name = entry.file_name();
            let parsed = file_name
                .to_str()
                .and_then(|text| MessageName::parse(text).ok());
            let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
            match parsed {
                Some(name) if is_file => names.push(name),
                _ => foreign.push(lossy(file_name)),
            }
        }
        foreign.sort();
        Ok((names, foreign))
    }

    fn path(&self, sub: &str, name: &MessageName) -> PathBuf {
        self.dir.join(sub).join(name.as_str())
    }
}

fn remove_quietly(path: &Path) {
    // Best effort: the file is a leftover in tmp/ that reconcile removes anyway.
    let _ = fs::remove_file(path);
}

fn lossy(name: OsString) -> String {
    name.to_string_lossy().into_owned()
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
