//! Small filesystem helpers shared by the inbox, presence and ownership files.
//!
//! Every durable write here follows the same recipe: write a temporary file, fsync it, rename it
//! over the target, fsync the directory. A crash at any point leaves either the old file or the
//! new one, never a torn mix (SPEC §12: a torn write never leaves a partial file).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// Mode of every directory DING creates: other users cannot list or read an inbox (SPEC §12).
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;

/// Mode of every file DING creates.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) with mode 0700, and tightens it to 0700 if it already
/// existed with a wider mode.
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
        .map_err(|err| Error::io("create directory", dir, err))?;
    let metadata = fs::metadata(dir).map_err(|err| Error::io("inspect directory", dir, err))?;
    // The umask may have narrowed the mode further, which is fine; only a wider mode is fixed.
    if metadata.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(PRIVATE_DIR_MODE))
            .map_err(|err| Error::io("restrict permissions of", dir, err))?;
    }
    Ok(())
}

/// Makes the directory entries of `dir` (creations, renames, removals) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|err| Error::io("fsync directory", dir, err))
}

/// Creates `path` exclusively (it must not exist) with mode 0600, writes `bytes` and fsyncs it.
pub(crate) fn write_new_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Replaces `dir/file_name` with `bytes` atomically and durably.
///
/// The temporary file is `dir/.file_name.tmp`; a stale one left by a crash is overwritten.
pub(crate) fn atomic_replace(dir: &Path, file_name: &str, bytes: &[u8]) -> Result<()> {
    let target = dir.join(file_name);
    let temporary = dir.join(format!(".{file_name}.tmp"));
    match fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(Error::io("remove stale temporary file", &temporary, err)),
    }
    write_new_file(&temporary, bytes).map_err(|err| Error::io("write", &temporary, err))?;
    fs::rename(&temporary, &target).map_err(|err| Error::io("rename into place", &target, err))?;
    sync_dir(dir)
}

/// What [`read_bounded`] found.
pub(crate) enum BoundedRead {
    /// The file's bytes, at most the limit.
    Bytes(Vec<u8>),
    /// The file is larger than the limit; nothing was kept.
    TooLarge,
}

/// Reads a regular file of at most `limit` bytes without following a symlink at the last path
/// component.
///
/// Refusing symlinks means a file planted in an inbox cannot make belfry read (and paste a notice
/// about) some other file of the user's.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> io::Result<BoundedRead> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(BoundedRead::TooLarge);
    }
    Ok(BoundedRead::Bytes(bytes))
}

/// Renames `from` to `to`, failing with `AlreadyExists` instead of replacing an existing `to`.
///
/// A plain `rename(2)` silently replaces its target, which would let a new message overwrite an
/// unread one, or an archive overwrite a receipt. `renameat2(RENAME_NOREPLACE)` refuses; on a
/// filesystem that does not support the flag, `link(2)` (which also refuses an existing target)
/// followed by `unlink(2)` gives the same guarantee, at the cost of a moment in which both names
/// exist.
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(errno) if errno == Errno::INVAL || errno == Errno::NOSYS => {
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
        Err(errno) => Err(io::Error::from(errno)),
    }
}

/// Whether `path` is a regular file, without following a symlink at the last component.
pub(crate) fn is_regular_file(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(metadata) => Ok(metadata.is_file()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(Error::io("inspect", path, err)),
    }
}

/// Whether `path` exists, without following a symlink at the last component.
pub(crate) fn entry_exists(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(Error::io("inspect", path, err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_replace_overwrites_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        atomic_replace(dir.path(), "state.json", b"one").unwrap();
        atomic_replace(dir.path(), "state.json", b"two").unwrap();
        assert_eq!(fs::read(dir.path().join("state.json")).unwrap(), b"two");
        assert!(!dir.path().join(".state.json.tmp").exists());
        let mode = fs::metadata(dir.path().join("state.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, PRIVATE_FILE_MODE);
    }

    #[test]
    fn rename_no_replace_refuses_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        let to = dir.path().join("to");
        fs::write(&from, b"new").unwrap();
        fs::write(&to, b"old").unwrap();
        let err = rename_no_replace(&from, &to).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&to).unwrap(), b"old");
        fs::remove_file(&to).unwrap();
        rename_no_replace(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"new");
        assert!(!from.exists());
    }

    #[test]
    fn create_private_dir_tightens_a_wide_directory() {
        let dir = tempfile::tempdir().unwrap();
        let wide = dir.path().join("wide");
        fs::create_dir(&wide).unwrap();
        fs::set_permissions(&wide, fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&wide).unwrap();
        let mode = fs::metadata(&wide).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, PRIVATE_DIR_MODE);
    }

    #[test]
    fn read_bounded_refuses_symlinks_and_oversized_files() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"0123456789").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(read_bounded(&link, 100).is_err());
        assert!(matches!(
            read_bounded(&target, 5).unwrap(),
            BoundedRead::TooLarge
        ));
        match read_bounded(&target, 10).unwrap() {
            BoundedRead::Bytes(bytes) => assert_eq!(bytes, b"0123456789"),
            BoundedRead::TooLarge => panic!("a file at the limit is not too large"),
        }
    }
}
