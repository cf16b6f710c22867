//! Where belfry keeps its sockets, records, logs and state (SPEC §6.1).

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

/// Durable state: `$BELFRY_STATE`, else `$XDG_STATE_HOME/belfry`, else `~/.local/state/belfry`.
pub fn state_dir() -> PathBuf {
    if let Some(dir) = non_empty_env("BELFRY_STATE") {
        return PathBuf::from(dir);
    }
    xdg_state_home().join("belfry")
}

/// Log files live under `$XDG_STATE_HOME/belfry/log/` (SPEC §6.1).
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

/// Creates `dir` (and parents) and makes sure it is ours and 0700.
///
/// A directory owned by someone else is refused: another user could otherwise swap our sockets.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| Error::Path {
            what: "cannot create directory",
            path: dir.to_path_buf(),
            source,
        })?;
    let meta = std::fs::metadata(dir).map_err(|source| Error::Path {
        what: "cannot stat directory",
        path: dir.to_path_buf(),
        source,
    })?;
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return Err(Error::UnsafeRuntimeDir {
            path: dir.to_path_buf(),
            reason: format!("owned by uid {}, not by uid {uid}", meta.uid()),
        });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| Error::Path {
                what: "cannot chmod 0700",
                path: dir.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}

/// Sets a freshly bound socket to 0600.
pub fn make_socket_private(path: &Path) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        Error::Path {
            what: "cannot chmod 0600",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Validates a session name: `[A-Za-z0-9._-]{1,64}`, and not `.` or `..` (SPEC §2).
pub fn validate_session_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSessionName {
            name: name.to_string(),
        })
    }
}

/// True if the connecting peer may be served: the same uid as this process, or root.
///
/// SPEC §6.1: every connection's peer uid is checked, on the daemon and on every pane host.
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
