//! The locks that make a daemon the only one over its socket, its runtime directory and its
//! state directory. Each is an exclusive `flock` held for the daemon's life and released by
//! the kernel however it dies, so a `kill -9` never leaves a stale lock. A file of its own
//! because taking them is the one start-up step with its own failure modes (a held lock, a
//! lock file that is a link).

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use belfry_transport::retry::{poll_until, Backoff};

use crate::Error;

/// The lock file a daemon holds in its state and runtime directories.
pub(super) const DIR_LOCK: &str = "daemon.lock";

/// Opens (creating it if missing) the lock file at `path`.
pub(super) fn open_lock(path: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| Error::Io {
            what: "cannot open daemon lock",
            path: path.to_path_buf(),
            source,
        })
}

/// Opens (creating it if missing) the lock file `path` names inside the directory `dir` was
/// opened as, never through a link.
pub(super) fn open_lock_in(
    dir: &std::os::fd::OwnedFd,
    path: &Path,
) -> Result<std::fs::File, Error> {
    use rustix::fs::{Mode, OFlags};
    let name = path.file_name().unwrap_or_default();
    rustix::fs::openat(
        dir,
        name,
        OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map(std::fs::File::from)
    .map_err(|errno| Error::Io {
        what: "cannot open daemon lock",
        path: path.to_path_buf(),
        source: errno.into(),
    })
}

/// Takes an exclusive `flock` on `file` (the lock at `path`) and writes our pid into it.
/// `Ok(Err(holder))` when another process keeps it: `holder` names the pid written in the file.
///
/// A daemon that was just killed may still hold its locks for a moment while its last threads
/// exit, so a held lock is retried for 2 s before it counts as taken.
pub(super) async fn take_lock(
    file: std::fs::File,
    path: &Path,
) -> Result<Result<std::fs::File, String>, Error> {
    use std::io::Write as _;
    let locked = || {
        rustix::fs::flock(
            file.as_fd(),
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        )
        .ok()
    };
    let tick = Backoff::constant(Duration::from_millis(10));
    if poll_until(Duration::from_secs(2), tick, locked)
        .await
        .is_none()
    {
        // Read through the handle, not the path, which may name another file by now.
        let mut pid = String::new();
        let _ = std::io::Read::read_to_string(&mut &file, &mut pid);
        let holder = match pid.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "a process whose pid the lock does not record".to_string(),
        };
        return Ok(Err(holder));
    }
    let write_pid = || -> std::io::Result<()> {
        file.set_len(0)?;
        (&file).write_all(format!("{}\n", std::process::id()).as_bytes())
    };
    write_pid().map_err(|source| Error::Io {
        what: "cannot write the daemon pid into",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Ok(file))
}
