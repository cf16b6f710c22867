//! `belfry logs [NAME] [--follow]`: the daemon's log (`daemon.log`) or a pane host's
//! (`pane-NAME.log`) from the log directory (`belfry_transport::paths::log_dir`), printed as it is,
//! and with `--follow` kept open like `tail -F`.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use belfry_proto::SessionName;
use belfry_transport::paths;
use belfry_transport::retry::Backoff;

use crate::cmd::NotFound;
use crate::exit::EXIT_OK;

/// How often `--follow` looks for new lines while the log is quiet: soon after a write, then
/// at most once a second.
const FOLLOW_FIRST_PAUSE: Duration = Duration::from_millis(50);
const FOLLOW_MAX_PAUSE: Duration = Duration::from_secs(1);

/// Prints the log of the pane `name`, or the daemon's without one; with `follow`, keeps
/// printing what is appended until the process is interrupted.
pub fn run(name: Option<&str>, follow: bool) -> Result<i32> {
    let dir = paths::log_dir();
    let path = match name {
        Some(name) => dir.join(format!("pane-{}.log", SessionName::parse(name)?)),
        None => dir.join("daemon.log"),
    };
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(missing(name, &path, &dir).into());
        }
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut offset = copy_to_stdout(&mut file, &path)?;
    if follow {
        follow_file(&path, file, &mut offset)?;
    }
    Ok(EXIT_OK)
}

/// The error for a log that is not there, saying where it was looked for and which pane logs
/// there are.
fn missing(name: Option<&str>, path: &Path, dir: &Path) -> NotFound {
    let Some(name) = name else {
        return NotFound(format!(
            "no daemon log at {} (the daemon has not logged with this log directory; \
             XDG_STATE_HOME moves it)",
            path.display()
        ));
    };
    let panes = pane_logs(dir);
    let known = if panes.is_empty() {
        "none".to_string()
    } else {
        panes.join(", ")
    };
    NotFound(format!(
        "no log for pane {name:?}: {} does not exist (pane logs there: {known})",
        path.display()
    ))
}

/// The names of the panes that have a log in `dir`, sorted.
fn pane_logs(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name().into_string().ok()?;
            Some(
                file.strip_prefix("pane-")?
                    .strip_suffix(".log")?
                    .to_string(),
            )
        })
        .collect();
    names.sort();
    names
}

/// Copies the rest of `file` to stdout and flushes it; returns how many bytes it copied.
fn copy_to_stdout(file: &mut File, path: &Path) -> Result<u64> {
    let mut out = std::io::stdout().lock();
    let copied =
        std::io::copy(file, &mut out).with_context(|| format!("cannot read {}", path.display()))?;
    out.flush()?;
    Ok(copied)
}

/// Prints what is appended to `path` from `offset` on, for as long as the process runs, as
/// `tail -F` does: a truncated log is read again from its start, and a log replaced by a new
/// file (another inode) is reopened. A pause never exceeds [`FOLLOW_MAX_PAUSE`]; the loop ends
/// only when the process is interrupted or its reader goes away (SIGPIPE).
fn follow_file(path: &Path, mut file: File, offset: &mut u64) -> Result<()> {
    let mut inode = file.metadata().map(|meta| meta.ino()).unwrap_or_default();
    let mut backoff = Backoff::doubling(FOLLOW_FIRST_PAUSE, FOLLOW_MAX_PAUSE);
    loop {
        let copied = copy_to_stdout(&mut file, path)?;
        if copied > 0 {
            *offset += copied;
            backoff.reset();
            continue;
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.ino() != inode => {
                if let Ok(reopened) = File::open(path) {
                    file = reopened;
                    inode = meta.ino();
                    *offset = 0;
                    continue;
                }
            }
            Ok(meta) if meta.len() < *offset => {
                file.seek(SeekFrom::Start(0))?;
                *offset = 0;
                continue;
            }
            // Unchanged, or gone for now (it may be created again): wait.
            _ => {}
        }
        std::thread::sleep(backoff.pause());
    }
}
