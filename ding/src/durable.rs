//! Filesystem helpers shared by the inbox, presence and ownership files: checked directory
//! handles, and every file operation relative to one.
//!
//! # Never through a link
//!
//! The state directory is the user's, but anything that can write into it (a synchronising
//! tool, a careless script, another agent) could plant a symbolic link there. Followed, a link
//! would make belfry list, read and paste a notice about, move, or chmod a file or directory
//! outside the inbox. So nothing here resolves a path below the state directory: each directory
//! is opened as a [`PrivateDir`] with `openat(O_NOFOLLOW | O_DIRECTORY)` relative to its already
//! checked parent, checked with `fstat` (a directory, owned by us), and every file is opened,
//! created, renamed or removed relative to that handle (`openat`, `renameat`, `unlinkat`). A link
//! in place of a directory is refused with an error naming it; a link or a file with more than
//! one hard link in place of a message is never read (a hard link is an outside file as much as
//! a symbolic link is; the inbox itself never makes one that outlives a rename).
//!
//! Modes are fixed only through the checked handle (`fchmod`), never by path, so a mode change
//! can only ever reach the directory that was just checked, not whatever a path resolves to a
//! moment later.
//!
//! # Durable writes
//!
//! Every durable write follows the same recipe: write a temporary file, fsync it, rename it over
//! the target, fsync the directory. A crash at any point leaves either the old file or the new
//! one, never a torn mix (spec §12: a torn write never leaves a partial file).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// Mode of every directory DING creates: other users cannot list or read an inbox (spec §12).
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;

/// Mode of every file DING creates.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;

/// What to do when a directory does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfMissing {
    /// Create it, mode 0700.
    Create,
    /// Report it as missing and create nothing.
    Leave,
}

/// An open, checked directory: not a symbolic link, a directory, owned by this user.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// What [`PrivateDir::read_file`] found.
pub(crate) enum BoundedRead {
    /// The file's bytes, at most the limit.
    Bytes(Vec<u8>),
    /// The file is larger than the limit; nothing was kept.
    TooLarge,
}

/// What kind of entry a directory holds under a name, looked at without following links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A regular file with exactly one hard link: the only kind DING reads as its own.
    File,
    /// A symbolic link.
    Link,
    /// A regular file with more than one hard link.
    HardLinked,
    /// Anything else: a directory, a FIFO, a device…
    NotAFile,
}

impl EntryKind {
    /// Why an entry of this kind is not read as a file of DING's; `None` for [`EntryKind::File`].
    pub(crate) fn refusal_reason(self) -> Option<&'static str> {
        match self {
            EntryKind::File => None,
            EntryKind::Link => Some(SYMLINK_REASON),
            EntryKind::HardLinked => Some(HARD_LINK_REASON),
            EntryKind::NotAFile => Some(NOT_A_FILE_REASON),
        }
    }
}

const SYMLINK_REASON: &str = "it is a symbolic link, and belfry never follows links here";
const HARD_LINK_REASON: &str =
    "it has more than one hard link, so it is also a file outside the inbox";
const NOT_A_FILE_REASON: &str = "it is not a regular file";

impl PrivateDir {
    /// Opens the state directory `path`, the root every other [`PrivateDir`] descends from.
    ///
    /// Its last component must not be a symbolic link; the directories above it are the user's
    /// choice of where the state lives and are resolved as usual. With [`IfMissing::Create`] it
    /// and its missing parents are created 0700; an existing state directory keeps its mode,
    /// because it is the user's. `Ok(None)` when it is missing and `missing` is `Leave`.
    pub(crate) fn open_root(path: &Path, missing: IfMissing) -> Result<Option<PrivateDir>> {
        let (parent, name) = match path.file_name() {
            Some(name) => (
                match path.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent,
                    _ => Path::new("."),
                },
                name,
            ),
            // `/`, or a path ending in `..`: no last component that could be a planted link.
            None => {
                let fd = open_dir_at(rustix::fs::CWD, path)
                    .map_err(|errno| Error::io("open directory", path, io::Error::from(errno)))?;
                return PrivateDir::checked(fd, path.to_path_buf(), Tighten::No).map(Some);
            }
        };
        if missing == IfMissing::Create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(PRIVATE_DIR_MODE)
                .create(parent)
                .map_err(|err| Error::io("create directory", parent, err))?;
        }
        // The parent is not checked (it is not ours to judge), only used to open the last
        // component relative to it, so that component cannot be swapped for a link in between.
        let parent_fd = match open_dir_at(rustix::fs::CWD, parent) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if missing == IfMissing::Leave => return Ok(None),
            Err(errno) => return Err(Error::io("open directory", parent, errno.into())),
        };
        open_child_at(
            parent_fd.as_fd(),
            name,
            path.to_path_buf(),
            missing,
            Tighten::No,
        )
    }

    /// Like [`PrivateDir::open_root`] with [`IfMissing::Create`].
    pub(crate) fn create_root(path: &Path) -> Result<PrivateDir> {
        PrivateDir::open_root(path, IfMissing::Create)?.ok_or_else(|| missing_after_create(path))
    }

    /// Opens the subdirectory `name`. With [`IfMissing::Create`] it is created 0700 if missing,
    /// and an existing one with a wider mode is tightened to 0700 through its checked handle;
    /// with [`IfMissing::Leave`] (a read that must have no side effects) nothing is changed.
    pub(crate) fn child(&self, name: &str, missing: IfMissing) -> Result<Option<PrivateDir>> {
        let tighten = match missing {
            IfMissing::Create => Tighten::Yes,
            IfMissing::Leave => Tighten::No,
        };
        open_child_at(
            self.fd.as_fd(),
            OsStr::new(name),
            self.entry(name),
            missing,
            tighten,
        )
    }

    /// Like [`PrivateDir::child`] with [`IfMissing::Create`].
    pub(crate) fn create_child(&self, name: &str) -> Result<PrivateDir> {
        self.child(name, IfMissing::Create)?
            .ok_or_else(|| missing_after_create(&self.entry(name)))
    }

    /// Checks an opened directory: a directory (the open already refused a link), owned by us.
    fn checked(fd: OwnedFd, path: PathBuf, tighten: Tighten) -> Result<PrivateDir> {
        let stat = rustix::fs::fstat(&fd)
            .map_err(|errno| Error::io("inspect directory", &path, errno.into()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            return Err(Error::RefusedPath {
                path,
                reason: "it is not a directory".to_owned(),
            });
        }
        let ours = rustix::process::geteuid().as_raw();
        if stat.st_uid != ours {
            // Another user's directory here could swap or read our messages.
            return Err(Error::RefusedPath {
                path,
                reason: format!("it is owned by uid {}, not by uid {ours}", stat.st_uid),
            });
        }
        // The umask may have narrowed the mode further, which is fine; only a wider one is fixed.
        if tighten == Tighten::Yes && stat.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(PRIVATE_DIR_MODE))
                .map_err(|errno| Error::io("restrict permissions of", &path, errno.into()))?;
        }
        Ok(PrivateDir { fd, path })
    }

    /// Whether the directory has been removed since it was opened (a removed directory has no
    /// links left), so a long-lived holder knows to open its path again.
    pub(crate) fn is_removed(&self) -> bool {
        rustix::fs::fstat(&self.fd).is_ok_and(|stat| stat.st_nlink == 0)
    }

    /// `fstat` of the directory itself: its identity and its modification and change times,
    /// which move whenever an entry is created, renamed or removed in it.
    pub(crate) fn stat(&self) -> Result<Stat> {
        rustix::fs::fstat(&self.fd)
            .map_err(|errno| Error::io("inspect directory", &self.path, errno.into()))
    }

    /// The directory's checked handle, for watching exactly the directory that was opened
    /// (see [`crate::watch::InboxWatcher`]).
    pub(crate) fn handle(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The directory's path, for messages and for callers that show it.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of entry `name`, for messages.
    pub(crate) fn entry(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.path.join(name.as_ref())
    }

    /// Makes the directory's entries (creations, renames, removals) durable.
    pub(crate) fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd)
            .map_err(|errno| Error::io("fsync directory", &self.path, errno.into()))
    }

    /// `lstat` of entry `name`; `None` if there is none.
    fn stat_entry(&self, name: impl AsRef<OsStr>) -> io::Result<Option<Stat>> {
        match rustix::fs::statat(&self.fd, name.as_ref(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(errno.into()),
        }
    }

    /// Whether entry `name` exists (of any kind), without following a link.
    pub(crate) fn exists(&self, name: &str) -> Result<bool> {
        self.stat_entry(name)
            .map(|stat| stat.is_some())
            .map_err(|err| Error::io("inspect", self.entry(name), err))
    }

    /// What entry `name` is; `None` if there is none.
    pub(crate) fn kind(&self, name: impl AsRef<OsStr>) -> Result<Option<EntryKind>> {
        let name = name.as_ref();
        let stat = self
            .stat_entry(name)
            .map_err(|err| Error::io("inspect", self.entry(name), err))?;
        Ok(stat.map(|stat| entry_kind(&stat)))
    }

    /// The names in the directory, without `.` and `..`. Nothing is opened or followed.
    pub(crate) fn list(&self) -> Result<Vec<Vec<u8>>> {
        let list_error = |errno: Errno| Error::io("list", &self.path, errno.into());
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.fd).map_err(list_error)? {
            let entry = entry.map_err(list_error)?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        Ok(names)
    }

    /// Reads file `name`, of at most `limit` bytes, if it is a regular file with one hard link.
    ///
    /// The file is opened with `O_NOFOLLOW` (a link fails to open) and checked with `fstat` on
    /// the opened file, so what is checked is what is read. `O_NONBLOCK` keeps a FIFO planted
    /// under the name from blocking the open.
    pub(crate) fn read_file(&self, name: &str, limit: u64) -> io::Result<BoundedRead> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(refusal(SYMLINK_REASON)),
            Err(errno) => return Err(errno.into()),
        };
        let stat = rustix::fs::fstat(&fd)?;
        if let Some(reason) = entry_kind(&stat).refusal_reason() {
            return Err(refusal(reason));
        }
        let mut bytes = Vec::new();
        File::from(fd)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Ok(BoundedRead::TooLarge);
        }
        Ok(BoundedRead::Bytes(bytes))
    }

    /// Creates file `name` exclusively (it must not exist, not even as a link) with mode 0600,
    /// writes `bytes` and fsyncs it.
    pub(crate) fn write_new_file(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            flags,
            Mode::from_raw_mode(PRIVATE_FILE_MODE),
        )?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()
    }

    /// Removes entry `name` (a file or a link, never what a link points to). A missing entry
    /// is not an error.
    pub(crate) fn remove(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, name.as_ref(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(errno) => Err(errno.into()),
        }
    }

    /// Renames `from` here to `to` in `to_dir` (which may be this directory), failing with
    /// `AlreadyExists` instead of replacing an existing entry.
    ///
    /// A plain `rename(2)` silently replaces its target, which would let a new message overwrite
    /// an unread one, or an archive overwrite a receipt. `renameat2(RENAME_NOREPLACE)` refuses; on
    /// a filesystem that does not support the flag, `linkat(2)` (which also refuses an existing
    /// target) followed by `unlinkat(2)` gives the same guarantee, at the cost of a moment in
    /// which both names exist (and the file has two links, so a listing then skips it).
    pub(crate) fn rename_no_replace(
        &self,
        from: &str,
        to_dir: &PrivateDir,
        to: &str,
    ) -> io::Result<()> {
        match rustix::fs::renameat_with(&self.fd, from, &to_dir.fd, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(errno) if errno == Errno::INVAL || errno == Errno::NOSYS => {
                rustix::fs::linkat(&self.fd, from, &to_dir.fd, to, AtFlags::empty())?;
                rustix::fs::unlinkat(&self.fd, from, AtFlags::empty())?;
                Ok(())
            }
            Err(errno) => Err(errno.into()),
        }
    }

    /// The last modification time of entry `name`, without following a link; `None` if it is
    /// a directory or gone.
    pub(crate) fn modified_non_dir(
        &self,
        name: &OsStr,
    ) -> io::Result<Option<std::time::SystemTime>> {
        let Some(stat) = self.stat_entry(name)? else {
            return Ok(None);
        };
        if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
            return Ok(None);
        }
        let seconds = u64::try_from(stat.st_mtime).unwrap_or(0);
        let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
        Ok(Some(
            std::time::UNIX_EPOCH + std::time::Duration::new(seconds, nanos),
        ))
    }

    /// Replaces file `name` with `bytes` atomically and durably.
    ///
    /// The temporary file is `.name.tmp`; a stale one left by a crash (or anything planted under
    /// that name: a link is removed, never followed) is replaced.
    pub(crate) fn atomic_replace(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let temporary = format!(".{name}.tmp");
        self.remove(&temporary)
            .map_err(|err| Error::io("remove stale temporary file", self.entry(&temporary), err))?;
        self.write_new_file(&temporary, bytes)
            .map_err(|err| Error::io("write", self.entry(&temporary), err))?;
        rustix::fs::renameat(&self.fd, temporary.as_str(), &self.fd, name)
            .map_err(|errno| Error::io("rename into place", self.entry(name), errno.into()))?;
        self.sync()
    }
}

/// Opens (creating it first with [`IfMissing::Create`]) the directory `name` in `dir`, without
/// following a link, and checks it; `path` names it in errors.
fn open_child_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    path: PathBuf,
    missing: IfMissing,
    tighten: Tighten,
) -> Result<Option<PrivateDir>> {
    if missing == IfMissing::Create {
        match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(PRIVATE_DIR_MODE)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(errno) => return Err(Error::io("create directory", path, errno.into())),
        }
    }
    match open_dir_at(dir, name) {
        Ok(fd) => PrivateDir::checked(fd, path, tighten).map(Some),
        Err(Errno::NOENT) if missing == IfMissing::Leave => Ok(None),
        Err(Errno::LOOP | Errno::NOTDIR) => {
            // Say which: a planted link and a stray file need different fixes.
            let is_link = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink);
            let reason = if is_link {
                SYMLINK_REASON
            } else {
                "it is not a directory"
            };
            Err(Error::RefusedPath {
                path,
                reason: reason.to_owned(),
            })
        }
        Err(errno) => Err(Error::io("open directory", path, errno.into())),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tighten {
    Yes,
    No,
}

/// The error for a directory that vanished between its creation and its opening.
fn missing_after_create(path: &Path) -> Error {
    Error::io("create directory", path, io::ErrorKind::NotFound.into())
}

/// Opens a directory without following a link at its last component.
fn open_dir_at<Fd: AsFd, P: rustix::path::Arg>(
    dir: Fd,
    path: P,
) -> std::result::Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn entry_kind(stat: &Stat) -> EntryKind {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Symlink => EntryKind::Link,
        FileType::RegularFile if stat.st_nlink > 1 => EntryKind::HardLinked,
        FileType::RegularFile => EntryKind::File,
        _ => EntryKind::NotAFile,
    }
}

/// An error for a file that is refused rather than failed to open.
pub(crate) fn refusal(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("refused: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn root(dir: &Path) -> PrivateDir {
        PrivateDir::create_root(dir).unwrap()
    }

    #[test]
    fn atomic_replace_overwrites_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let private = root(dir.path());
        private.atomic_replace("state.json", b"one").unwrap();
        private.atomic_replace("state.json", b"two").unwrap();
        assert_eq!(fs::read(dir.path().join("state.json")).unwrap(), b"two");
        assert!(!dir.path().join(".state.json.tmp").exists());
        let mode = fs::metadata(dir.path().join("state.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, PRIVATE_FILE_MODE);
    }

    #[test]
    fn atomic_replace_removes_a_planted_temporary_link_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, b"keep").unwrap();
        let state = dir.path().join("state");
        let private = root(&state);
        std::os::unix::fs::symlink(&outside, state.join(".state.json.tmp")).unwrap();
        private.atomic_replace("state.json", b"new").unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
        assert_eq!(fs::read(state.join("state.json")).unwrap(), b"new");
    }

    #[test]
    fn rename_no_replace_refuses_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let private = root(dir.path());
        let from = private.create_child("from").unwrap();
        let to = private.create_child("to").unwrap();
        fs::write(dir.path().join("from/x"), b"new").unwrap();
        fs::write(dir.path().join("to/x"), b"old").unwrap();
        let err = from.rename_no_replace("x", &to, "x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(dir.path().join("to/x")).unwrap(), b"old");
        fs::remove_file(dir.path().join("to/x")).unwrap();
        from.rename_no_replace("x", &to, "x").unwrap();
        assert_eq!(fs::read(dir.path().join("to/x")).unwrap(), b"new");
        assert!(!dir.path().join("from/x").exists());
    }

    #[test]
    fn create_private_dir_tightens_a_wide_directory() {
        let dir = tempfile::tempdir().unwrap();
        let wide = dir.path().join("wide");
        fs::create_dir(&wide).unwrap();
        fs::set_permissions(&wide, fs::Permissions::from_mode(0o755)).unwrap();
        root(dir.path()).create_child("wide").unwrap();
        let mode = fs::metadata(&wide).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, PRIVATE_DIR_MODE);
    }

    #[test]
    fn a_linked_directory_is_refused_and_its_target_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o755)).unwrap();
        let state = dir.path().join("state");
        let private = root(&state);
        std::os::unix::fs::symlink(&outside, state.join("linked")).unwrap();
        let err = private.child("linked", IfMissing::Create).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&state.join("linked").display().to_string()),
            "{text}"
        );
        assert!(text.contains("symbolic link"), "{text}");
        let mode = fs::metadata(&outside).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "the link's target was chmod'ed");
    }

    #[test]
    fn a_missing_directory_is_not_created_when_asked_to_leave_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        assert!(PrivateDir::open_root(&state, IfMissing::Leave)
            .unwrap()
            .is_none());
        assert!(!state.exists());
        let private = root(&state);
        assert!(private.child("inbox", IfMissing::Leave).unwrap().is_none());
        assert!(!state.join("inbox").exists());
    }

    #[test]
    fn read_file_refuses_links_hard_links_and_oversized_files() {
        let dir = tempfile::tempdir().unwrap();
        let private = root(dir.path());
        let target = dir.path().join("target");
        fs::write(&target, b"0123456789").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
        let err = private.read_file("link", 100).err().unwrap();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(matches!(
            private.read_file("target", 5).unwrap(),
            BoundedRead::TooLarge
        ));
        match private.read_file("target", 10).unwrap() {
            BoundedRead::Bytes(bytes) => assert_eq!(bytes, b"0123456789"),
            BoundedRead::TooLarge => panic!("a file at the limit is not too large"),
        }
        fs::hard_link(&target, dir.path().join("hard")).unwrap();
        let err = private.read_file("hard", 100).err().unwrap();
        assert!(err.to_string().contains("hard link"), "{err}");
    }
}
