//! Finding a pane's usage file: the path pattern's placeholders, its wildcards, and the file's
//! first row and identity.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{matches_all, MAX_CANDIDATES};
use crate::error::{Error, Result};

/// The path pattern with the pane's placeholders filled: `{cwd}` (the absolute working
/// directory), `{cwd_sanitized}` (every character but an ASCII letter or digit made `-`),
/// `{cwd_trimmed}` (without its leading `/`, and `/`, `\` and `:` made `-`) and
/// `{cwd_basename}` (its last component).
pub(super) fn fill(pattern: &str, cwd: &Path) -> String {
    let cwd_text = cwd.to_string_lossy();
    let sanitized: String = cwd_text
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '-' })
        .collect();
    let trimmed: String = cwd_text
        .trim_start_matches('/')
        .chars()
        .map(|ch| {
            if matches!(ch, '/' | '\\' | ':') {
                '-'
            } else {
                ch
            }
        })
        .collect();
    let basename = cwd
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    pattern
        .replace("{cwd_sanitized}", &sanitized)
        .replace("{cwd_trimmed}", &trimmed)
        .replace("{cwd_basename}", &basename)
        .replace("{cwd}", &cwd_text)
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Every file under `root` that the `/`-separated `pattern` matches (`*` within a component).
pub(super) fn matching_files(root: &Path, pattern: &str) -> Result<Vec<PathBuf>> {
    let mut found = vec![root.to_path_buf()];
    for component in pattern.split('/').filter(|part| !part.is_empty()) {
        let mut next = Vec::new();
        for dir in &found {
            if !component.contains('*') {
                let path = dir.join(component);
                if path.exists() {
                    next.push(path);
                }
                continue;
            }
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) if err.kind() == std::io::ErrorKind::NotADirectory => continue,
                Err(err) => return Err(Error::io("list directory", dir, err)),
            };
            for entry in entries.flatten() {
                if wildcard(component, &entry.file_name().to_string_lossy()) {
                    next.push(entry.path());
                }
            }
            if next.len() > MAX_CANDIDATES {
                return Err(Error::MeterFile {
                    path: root.join(pattern),
                    line: None,
                    problem: format!("the pattern matches more than {MAX_CANDIDATES} files"),
                });
            }
        }
        found = next;
    }
    found.retain(|path| path.is_file());
    Ok(found)
}

pub(super) fn first_row_matches(
    path: &Path,
    pairs: &[(String, Value)],
    cwd: &Path,
) -> Result<bool> {
    let mut file = File::open(path).map_err(|err| Error::io("open", path, err))?;
    // The first row of a session file is its header; 1 MiB holds any header seen (the largest,
    // a header carrying the agent's instructions, is about 30 KB).
    let mut bytes = Vec::new();
    (&mut file)
        .take(1024 * 1024)
        .read_to_end(&mut bytes)
        .map_err(|err| Error::io("read", path, err))?;
    let Some(end) = bytes.iter().position(|byte| *byte == b'\n') else {
        return Ok(false);
    };
    let row: Value = serde_json::from_slice(&bytes[..end]).map_err(|err| Error::MeterFile {
        path: path.to_path_buf(),
        line: Some(1),
        problem: format!("is not a JSON line: {err}"),
    })?;
    Ok(matches_all(&row, pairs, cwd))
}

pub(super) fn file_identity(path: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta =
        std::fs::metadata(path).map_err(|err| Error::io("read the metadata of", path, err))?;
    Ok((meta.dev(), meta.ino()))
}
