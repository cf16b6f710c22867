//! Whether each canonical hook's program can start: `belfry hooks plan`, `apply` and `status`
//! say so for one that cannot, since the harness would then run a handler that fails every
//! time, and a fail-closed guard that fails refuses every call it selects. Nothing is refused
//! for it: the program may be installed later, or exist only where the harness runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use belfry_hooks::canonical::{CanonicalFile, Failure};

/// One warning line per hook whose program is missing or not executable, in file order.
pub(crate) fn missing_handlers(canonical: &CanonicalFile) -> Vec<String> {
    // A relative program with a `/` is resolved against the file's canonical directory, as
    // the compiled hooks file resolves it (docs/hooks.md, "The canonical hook file").
    let dir = std::fs::canonicalize(&canonical.path)
        .ok()
        .and_then(|real| real.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let search_path = std::env::var_os("PATH").unwrap_or_default();
    let mut lines = Vec::new();
    for hook in &canonical.hooks {
        let Some(program) = hook.command.first() else {
            continue;
        };
        let problem = if program.contains('/') {
            let path = dir.join(program);
            why_not_runnable(&path).map(|why| format!("{} {why}", path.display()))
        } else {
            let found = std::env::split_paths(&search_path)
                .any(|entry| why_not_runnable(&entry.join(program)).is_none());
            (!found).then(|| format!("{program} is not found on PATH"))
        };
        let Some(problem) = problem else {
            continue;
        };
        let consequence = if hook.failure == Failure::Closed {
            "it cannot start, and it fails closed: every call it selects is refused"
        } else {
            "it cannot start: each call notes the failure and goes on"
        };
        lines.push(format!(
            "warning: {} ({}): its program {problem}; {consequence} (fix: put the program \
             there, or change `command`)",
            hook.id, hook.at
        ));
    }
    lines
}

/// Why `path` cannot be started, or `None` when it is an executable file.
fn why_not_runnable(path: &PathBuf) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Some("is not a file"),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => Some("is not executable"),
        Ok(_) => None,
        Err(_) => Some("does not exist"),
    }
}
