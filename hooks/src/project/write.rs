//! How the projection writes (issue 39): every file through a temporary file with a unique
//! name, created `O_EXCL|O_NOFOLLOW` in the directory of the file it replaces and already
//! holding that file's mode before a byte of content goes in, then renamed over it; a
//! settings file that is a symbolic link is edited where the link points, and the link kept;
//! a path inside the project that resolves outside it is refused; and one `apply` or
//! `uninstall` at a time per project and scope, under an `flock` with a deadline.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Context, ProjectError};
use crate::canonical::Scope;

/// How long `apply` or `uninstall` waits for another one of the same project and scope.
pub const LOCK_DEADLINE: Duration = Duration::from_secs(20);

/// The file a write or removal of `path` really acts on: the file a final symbolic link
/// points to (so the link is kept), under the canonical form of its directory. A path inside
/// the project must stay inside it once links are followed, so that a checkout cannot point a
/// rendered path (a settings file, `.belfry/hooks`) at a file of the user's.
pub fn real_target(context: &Context, path: &Path) -> Result<PathBuf, String> {
    let link = std::fs::symlink_metadata(path)
        .ok()
        .filter(|meta| meta.file_type().is_symlink());
    let real = if link.is_some() {
        let real = std::fs::canonicalize(path).map_err(|err| {
            format!(
                "{} is a symbolic link whose target cannot be resolved ({err}); belfry does not \
                 create a file through a dangling link",
                path.display()
            )
        })?;
        if !std::fs::metadata(&real).is_ok_and(|meta| meta.is_file()) {
            return Err(format!(
                "{} is a symbolic link to {}, which is not a regular file",
                path.display(),
                real.display()
            ));
        }
        real
    } else {
        let Some(name) = path.file_name() else {
            return Err(format!("{} names no file", path.display()));
        };
        let parent = path.parent().unwrap_or(Path::new("/"));
        // The deepest ancestor that exists, canonical, with the missing part after it.
        let mut existing = parent.to_path_buf();
        let mut missing = Vec::new();
        while std::fs::symlink_metadata(&existing).is_err() {
            match (existing.file_name(), existing.parent()) {
                (Some(last), Some(up)) => {
                    missing.push(last.to_os_string());
                    existing = up.to_path_buf();
                }
                _ => break,
            }
        }
        // An ancestor that does not resolve (a dangling link) is one no file can be made in.
        let mut real = std::fs::canonicalize(&existing)
            .map_err(|err| format!("cannot create {}: {err}", existing.display()))?;
        for part in missing.into_iter().rev() {
            real.push(part);
        }
        real.push(name);
        real
    };
    let project = &context.project_dir;
    if context.scope == Scope::Project && path.starts_with(project) && !real.starts_with(project) {
        return Err(format!(
            "{} resolves to {}, outside the project {}: belfry writes a project's files only \
             inside it (a symbolic link in the checkout points out of it)",
            path.display(),
            real.display(),
            project.display()
        ));
    }
    Ok(real)
}

/// Writes a file of the projection, creating missing directories (recorded in
/// `created_dirs` so that uninstall can remove them when empty). The file keeps its mode; a
/// new one gets the usual `0666 & !umask`.
pub fn write_file(
    context: &Context,
    path: &Path,
    text: &str,
    created_dirs: &mut Vec<String>,
) -> Result<(), String> {
    let real = real_target(context, path)?;
    if let Some(parent) = path.parent() {
        let mut missing = Vec::new();
        let mut dir = parent;
        while std::fs::symlink_metadata(dir).is_err() {
            missing.push(dir.to_path_buf());
            match dir.parent() {
                Some(up) => dir = up,
                None => break,
            }
        }
        if let Some(real_parent) = real.parent() {
            std::fs::create_dir_all(real_parent)
                .map_err(|err| format!("cannot create {}: {err}", real_parent.display()))?;
        }
        for dir in missing.into_iter().rev() {
            let dir = dir.display().to_string();
            if !created_dirs.contains(&dir) {
                created_dirs.push(dir);
            }
        }
    }
    let mode = match std::fs::metadata(&real) {
        Ok(meta) => Some(meta.permissions().mode() & 0o7777),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(format!("cannot read {}: {err}", real.display())),
    };
    replace_file(&real, text.as_bytes(), mode)
}

/// Removes a file of the projection (a missing one is fine). A symbolic link is removed
/// itself, never the file it points to; a path inside the project that resolves outside it
/// is refused.
pub fn remove_file(context: &Context, path: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        // The directory must be where it says: `.belfry/hooks` a link to `~` is refused.
        let probe = parent.join(".belfry-probe");
        real_target(context, &probe)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("cannot remove {}: {err}", path.display())),
    }
}

/// Replaces `real` with `bytes` through a temporary file in its directory: a unique name,
/// `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted file or link at the name is never written through),
/// the final `mode` set on the descriptor before the content, then a rename. `None` keeps
/// the creation mode `0666 & !umask`.
pub fn replace_file(real: &Path, bytes: &[u8], mode: Option<u32>) -> Result<(), String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = real.parent().unwrap_or(Path::new("/"));
    let name = real
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    let mut attempt = 0;
    let (temp, mut file) = loop {
        let unique = format!(
            ".{name}.{}-{nanos:08x}-{}.belfry-tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let temp = dir.join(unique);
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode.unwrap_or(0o666))
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&temp);
        match opened {
            Ok(file) => break (temp, file),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                attempt += 1;
            }
            Err(err) => return Err(format!("cannot create {}: {err}", temp.display())),
        }
    };
    let written = (|| -> std::io::Result<()> {
        if let Some(mode) = mode {
            // The umask may have taken bits off the creation mode; the descriptor gets the
            // replaced file's exact mode before any content is in it.
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(())
    })();
    drop(file);
    let result = written
        .map_err(|err| format!("cannot write {}: {err}", temp.display()))
        .and_then(|()| {
            std::fs::rename(&temp, real)
                .map_err(|err| format!("cannot write {}: {err}", real.display()))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// One `apply` or `uninstall` of a project and scope at a time: an exclusive `flock` on
/// [`Context::lock_path`], held until the guard drops (the kernel releases it however the
/// process ends).
pub struct StateLock {
    file: File,
    path: PathBuf,
    /// The directories taking the lock had to create (recorded in the state, so the last
    /// uninstall removes them when empty).
    pub created_dirs: Vec<String>,
}

impl StateLock {
    /// Removes the lock file when no install state is left beside it, so that an uninstall
    /// leaves nothing of belfry behind. Safe while others wait: a waiter that gets the lock
    /// on the removed file sees it is no longer at the path and takes it again.
    pub fn remove_if_unused(&self, context: &Context) {
        if std::fs::symlink_metadata(context.state_path()).is_err() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Takes the lock, waiting at most [`LOCK_DEADLINE`] for another run to finish.
pub fn lock(context: &Context) -> Result<StateLock, ProjectError> {
    lock_within(context, LOCK_DEADLINE)
}

fn lock_within(context: &Context, wait: Duration) -> Result<StateLock, ProjectError> {
    let path = context.lock_path();
    let error = |reason: String| ProjectError::Lock {
        path: path.clone(),
        reason,
    };
    let mut created_dirs = Vec::new();
    if let Some(parent) = path.parent() {
        let mut dir = parent;
        while std::fs::symlink_metadata(dir).is_err() {
            created_dirs.push(dir.display().to_string());
            match dir.parent() {
                Some(up) => dir = up,
                None => break,
            }
        }
        std::fs::create_dir_all(parent)
            .map_err(|err| error(format!("cannot create {}: {err}", parent.display())))?;
    }
    let deadline = Instant::now() + wait;
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|err| error(format!("cannot open it: {err}")))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                // The lock counts only on the file still at the path: a finishing uninstall
                // may have removed the one this run waited on.
                let held = rustix::fs::fstat(&file).ok();
                let at_path = rustix::fs::stat(&path).ok();
                let same = match (held, at_path) {
                    (Some(held), Some(at_path)) => {
                        held.st_ino == at_path.st_ino && held.st_dev == at_path.st_dev
                    }
                    _ => false,
                };
                if same {
                    return Ok(StateLock {
                        file,
                        path: path.clone(),
                        created_dirs,
                    });
                }
            }
            Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(error(format!("cannot lock it: {err}"))),
        }
        if Instant::now() >= deadline {
            return Err(error(format!(
                "another `belfry hooks apply` or `uninstall` of this {} held it for {:.1} s; \
                 try again when it has finished",
                context.scope,
                wait.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock; said here so that the order is plain.
        let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn context(root: &Path) -> Context {
        Context {
            scope: Scope::Project,
            project_dir: root.join("project"),
            config_home: root.join("config"),
            env: BTreeMap::new(),
            belfry_version: "test".to_string(),
            harness_versions: BTreeMap::new(),
        }
    }

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|err| panic!("{err}"));
        (dir, root)
    }

    #[test]
    fn a_held_lock_makes_another_run_wait_then_fail_naming_it() {
        let (_dir, root) = root();
        let context = context(&root);
        let held = lock(&context).unwrap_or_else(|err| panic!("{err}"));
        let started = Instant::now();
        let second = lock_within(&context, Duration::from_millis(300));
        let waited = started.elapsed();
        let message = second.err().map(|err| err.to_string()).unwrap_or_default();
        assert!(
            message.contains(&context.lock_path().display().to_string()),
            "{message}"
        );
        assert!(message.contains("held it for 0.3 s"), "{message}");
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        drop(held);
        assert!(lock_within(&context, Duration::from_millis(300)).is_ok());
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_no_temporary_file_is_left() {
        let (_dir, root) = root();
        let file = root.join("settings.json");
        std::fs::write(&file, "{}").unwrap_or_else(|err| panic!("{err}"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|err| panic!("{err}"));
        replace_file(&file, b"{\"a\": 1}", Some(0o600)).unwrap_or_else(|err| panic!("{err}"));
        let mode = std::fs::metadata(&file).map(|m| m.permissions().mode() & 0o7777);
        assert_eq!(mode.ok(), Some(0o600));
        assert_eq!(
            std::fs::read_to_string(&file).ok().as_deref(),
            Some("{\"a\": 1}")
        );
        let names: Vec<String> = std::fs::read_dir(&root)
            .unwrap_or_else(|err| panic!("{err}"))
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["settings.json".to_string()]);
    }

    #[test]
    fn a_rendered_path_that_leads_out_of_the_project_is_refused() {
        let (_dir, root) = root();
        let context = context(&root);
        std::fs::create_dir_all(&context.project_dir).unwrap_or_else(|err| panic!("{err}"));
        std::fs::create_dir_all(root.join("elsewhere")).unwrap_or_else(|err| panic!("{err}"));
        std::os::unix::fs::symlink(root.join("elsewhere"), context.project_dir.join(".belfry"))
            .unwrap_or_else(|err| panic!("{err}"));
        let path = context.project_dir.join(".belfry/hooks/t.json");
        let refused = write_file(&context, &path, "{}", &mut Vec::new());
        assert!(
            refused
                .as_ref()
                .is_err_and(|err| err.contains("outside the project")),
            "{refused:?}"
        );
        assert!(!root.join("elsewhere/hooks").exists());
    }
}
