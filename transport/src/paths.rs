//! Where belfry keeps its sockets, records, logs and state (spec §6.1).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The runtime directory: `$BELFRY_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/belfry`, else
/// `/tmp/belfry-$UID`.
pub fn runtime_dir() -> PathBuf {
    if let Some(dir) = non_empty_env("BELFRY_RUNTIME_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = non_empty_env("XDG_RUNTIME_DIR") {
        return Path::new(&dir).join("belfry");
    }
    PathBuf::from(format!(
        "/tmp/belfry-{}",
        rustix::process::getuid().as_raw()
    ))
}

/// The daemon socket: `$BELFRY_SOCKET`, else `<runtime>/default.sock`.
pub fn daemon_socket() -> PathBuf {
    match non_empty_env("BELFRY_SOCKET") {
        Some(path) => PathBuf::from(path),
        None => runtime_dir().join("default.sock"),
    }
}

/// The lock file beside a daemon socket (`default.sock.lock`): the daemon serving `socket` holds
/// an exclusive `flock` on it for its whole life, stopped or not, and the kernel releases it
/// however the daemon ends.
pub fn daemon_lock(socket: &Path) -> PathBuf {
    let mut name = socket
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    socket.with_file_name(name)
}

/// Durable state: `$BELFRY_STATE`, else `$XDG_STATE_HOME/belfry`, else `~/.local/state/belfry`.
pub fn state_dir() -> PathBuf {
    if let Some(dir) = non_empty_env("BELFRY_STATE") {
        return PathBuf::from(dir);
    }
    xdg_state_home().join("belfry")
}

/// Log files live under `$XDG_STATE_HOME/belfry/log/` (spec §6.1).
pub fn log_dir() -> PathBuf {
    xdg_state_home().join("belfry").join("log")
}

fn xdg_state_home() -> PathBuf {
    if let Some(dir) = non_empty_env("XDG_STATE_HOME") {
        return PathBuf::from(dir);
    }
    let home = non_empty_env("HOME").unwrap_or_else(|| "/".to_string());
    Path::new(&home).join(".local").join("state")
}

fn non_empty_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The executable file `name` in `exe`'s directory, when it is one and is not `exe` itself:
/// how `belfry` finds `belfry-host` and the daemon finds `belfry-pane`, installed beside them.
pub fn runnable_beside(exe: &Path, name: &str) -> Option<PathBuf> {
    let beside = exe.with_file_name(name);
    let runnable = std::fs::metadata(&beside)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
    (runnable && beside != exe).then_some(beside)
}

/// The directory holding every pane host's socket and record.
pub fn panes_dir(runtime: &Path) -> PathBuf {
    runtime.join("panes")
}

/// `<runtime>/panes/<session>.sock`.
pub fn pane_socket(runtime: &Path, session: &str) -> PathBuf {
    panes_dir(runtime).join(format!("{session}.sock"))
}

/// `<runtime>/panes/<session>.json`.
pub fn pane_record(runtime: &Path, session: &str) -> PathBuf {
    panes_dir(runtime).join(format!("{session}.json"))
}

/// Creates `dir` (and missing parents) 0700, or checks that an existing one is ours and 0700.
///
/// spec §6.1: directories are 0700. An existing directory owned by another uid, or open to
/// anyone else, is refused and never re-moded: another user who created it first (for example
/// `/tmp/belfry-$UID` when no runtime directory is set) could otherwise plant a socket there
/// and collect every request, environment and secrets included. Only a directory this call has
/// just created is chmod-ed, so that a restrictive umask cannot leave it unusable.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|source| Error::Path {
                what: "cannot create directory",
                path: parent.to_path_buf(),
                source,
            })?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            return std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
                |source| Error::Path {
                    what: "cannot chmod 0700",
                    path: dir.to_path_buf(),
                    source,
                },
            )
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(Error::Path {
                what: "cannot create directory",
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    check_private_dir(dir)
}

/// Refuses an existing directory that is not a directory owned by us with mode 0700. A symbolic
/// link is followed only when we own the link itself: whoever owns it can re-point it.
fn check_private_dir(dir: &Path) -> Result<()> {
    let unsafe_dir = |reason: String| Error::UnsafeDir {
        path: dir.to_path_buf(),
        reason,
    };
    let stat = |follow: bool| {
        let meta = if follow {
            std::fs::metadata(dir)
        } else {
            std::fs::symlink_metadata(dir)
        };
        meta.map_err(|source| Error::Path {
            what: "cannot stat directory",
            path: dir.to_path_buf(),
            source,
        })
    };
    let uid = rustix::process::getuid().as_raw();
    let link = stat(false)?;
    if link.file_type().is_symlink() && link.uid() != uid {
        return Err(unsafe_dir(format!(
            "it is a symbolic link owned by uid {}, not by uid {uid}",
            link.uid()
        )));
    }
    let meta = stat(true)?;
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory".into()));
    }
    if meta.uid() != uid {
        return Err(unsafe_dir(format!(
            "it is owned by uid {}, not by uid {uid}; remove it or choose another directory \
             (BELFRY_RUNTIME_DIR)",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o777;
    if mode != 0o700 {
        return Err(unsafe_dir(format!(
            "its mode is {mode:o}, not 700; belfry does not change the mode of a directory it \
             did not create (chmod 700 it if it is yours)"
        )));
    }
    Ok(())
}

/// Creates the state directory `dir` (0700, with missing parents) if it is missing and opens
/// it without following a symbolic link at its last component; refuses it when that is a link,
/// not a directory, or not owned by us. The daemon takes its lock through the handle, so no
/// file of it is ever written through a link.
///
/// `BELFRY_STATE` pointing at a link would otherwise have the daemon create, lock and write its
/// pid through it, wherever it leads; the DING workers under it refuse the link (they never
/// follow one in the state directory), so the daemon would run with no mail delivered. Like
/// them, an existing state directory keeps its mode: it is the user's. The directories above
/// the last component are the user's choice of where the state lives and are resolved as usual.
pub fn open_state_dir(dir: &Path) -> Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let unsafe_dir = |reason: String| Error::UnsafeDir {
        path: dir.to_path_buf(),
        reason,
    };
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(unsafe_dir(
                "it is a symbolic link, and belfry never follows a link for its state \
                 directory; point BELFRY_STATE at the directory itself"
                    .into(),
            ))
        }
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| Error::Path {
                    what: "cannot create state directory",
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        Err(source) => {
            return Err(Error::Path {
                what: "cannot stat state directory",
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    // O_NOFOLLOW closes the race with a link swapped in after the check above: the open itself
    // refuses a link (ELOOP).
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        rustix::io::Errno::LOOP => unsafe_dir("it is a symbolic link".into()),
        rustix::io::Errno::NOTDIR => unsafe_dir("it is not a directory".into()),
        errno => Error::Path {
            what: "cannot open state directory",
            path: dir.to_path_buf(),
            source: errno.into(),
        },
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|errno| Error::Path {
        what: "cannot stat state directory",
        path: dir.to_path_buf(),
        source: errno.into(),
    })?;
    let uid = rustix::process::getuid().as_raw();
    if stat.st_uid != uid {
        return Err(unsafe_dir(format!(
            "it is owned by uid {}, not by uid {uid}; choose another directory (BELFRY_STATE)",
            stat.st_uid
        )));
    }
    Ok(fd)
}

/// The runtime directory, created 0700 if absent and refused if it exists but is not ours or
/// not 0700 (see [`ensure_private_dir`]). Every client checks it before it connects to a socket
/// inside it.
pub fn private_runtime_dir() -> Result<PathBuf> {
    let dir = runtime_dir();
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Sets a freshly bound socket to 0600.
/// Whether something may still be serving the Unix socket at `path`.
///
/// Only a connect refused (`ECONNREFUSED`: no listener) or a missing path (`ENOENT`) proves
/// the socket stale. A full listen backlog (`EAGAIN`, a stopped or overloaded pane host keeps
/// its listener) or any other failure may hide a live server, so it counts as served: its
/// socket must never be unlinked and taken over. The connect is non-blocking, so a full
/// backlog answers at once instead of blocking.
pub async fn socket_may_be_served(path: &Path) -> bool {
    match tokio::net::UnixStream::connect(path).await {
        Ok(_) => true,
        Err(err) => !matches!(
            err.kind(),
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
        ),
    }
}

pub fn make_socket_private(path: &Path) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        Error::Path {
            what: "cannot chmod 0600",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Validates a session name with the protocol's one validator (spec §2).
pub fn validate_session_name(name: &str) -> Result<()> {
    belfry_proto::SessionName::parse(name)?;
    Ok(())
}

/// True if the connecting peer may be served: the same uid as this process, or root.
///
/// spec §6.1: every connection's peer uid is checked, on the daemon and on every pane host.
pub fn peer_allowed(stream: &tokio::net::UnixStream) -> std::result::Result<(), String> {
    let ours = rustix::process::getuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == ours || cred.uid() == 0 => Ok(()),
        Ok(cred) => Err(format!(
            "connection from uid {} refused: this socket serves only uid {ours}",
            cred.uid()
        )),
        Err(err) => Err(format!("cannot read peer credentials: {err}")),
    }
}

/// Checks the process serving a socket we just connected to, before anything is written to it:
/// it must run as our uid or as root, or it is refused with an error naming the socket and the
/// uid that owns it.
///
/// spec §6.1: the peer check runs in both directions. A server checks its clients; every
/// client (the CLI to the daemon and to pane hosts, the daemon to pane hosts) checks its
/// server, because a socket path proves nothing about who listens on it. On Linux the
/// client's `SO_PEERCRED` names the process that called `listen(2)`.
pub fn check_server(path: &Path, socket: impl std::os::fd::AsFd) -> Result<()> {
    let cred = rustix::net::sockopt::socket_peercred(socket).map_err(|err| Error::Path {
        what: "cannot read the credentials of the server at",
        path: path.to_path_buf(),
        source: err.into(),
    })?;
    let ours = rustix::process::getuid().as_raw();
    let theirs = cred.uid.as_raw();
    if theirs == ours || theirs == 0 {
        return Ok(());
    }
    Err(Error::UntrustedServer {
        path: path.to_path_buf(),
        uid: theirs,
        ours,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names() {
        for good in ["a", "worker-1", "A.b_c", &"x".repeat(64)] {
            assert!(validate_session_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(65), "é"] {
            assert!(validate_session_name(bad).is_err(), "{bad}");
        }
    }
}
