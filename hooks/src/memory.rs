//! Project memory (issue 45 (h)): a file or a command named by the canonical file's `memory`
//! block, whose content dispatch tells the model once per session, and a turn-stop program
//! whose output dispatch appends to the file once per turn.
//!
//! Delivery goes through the same ledger as read-once guards (`crate::once`, the entry
//! [`crate::once::MEMORY_ENTRY`], scope session), so the first dispatch that can carry context
//! in a session delivers it and every later one, whichever path it came by, does not.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::process::{run, ProcessEnd};

/// The most memory told to the model (64 KiB): the memory is a page of notes; more is cut,
/// ending in a line that says so.
pub const MAX_MEMORY_BYTES: usize = 64 << 10;

/// How long the memory command and the append program may run.
pub const MEMORY_TIMEOUT: Duration = Duration::from_secs(10);

/// The `memory` block as the compiled hooks file carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompiledMemory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<Vec<String>>,
}

impl CompiledMemory {
    /// Exactly one source; `append` only with a file; no empty program.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.file, &self.command) {
            (Some(_), None) | (None, Some(_)) => {}
            _ => return Err("give exactly one of file and command".to_owned()),
        }
        for argv in [&self.command, &self.append].into_iter().flatten() {
            if argv.first().is_none_or(|program| program.is_empty()) {
                return Err("a program is empty".to_owned());
            }
        }
        if self.append.is_some() && self.file.is_none() {
            return Err("append needs a file memory".to_owned());
        }
        Ok(())
    }

    /// The text told to the model: a header naming where it came from, then the memory. An
    /// empty memory is `None`: nothing to tell.
    pub fn context(&self) -> Result<Option<String>, String> {
        let (label, mut bytes) = match (&self.file, &self.command) {
            (Some(path), _) => (path.display().to_string(), read_capped(path)?),
            (None, Some(argv)) => (argv.join(" "), run_capped(argv, Arc::from(&b""[..]))?),
            (None, None) => return Ok(None),
        };
        let cut = bytes.len() > MAX_MEMORY_BYTES;
        bytes.truncate(MAX_MEMORY_BYTES);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end();
        if text.trim().is_empty() {
            return Ok(None);
        }
        let mut block = format!("Project memory ({label}):\n{text}");
        if cut {
            block.push_str(&format!("\n[memory cut at {MAX_MEMORY_BYTES} bytes]"));
        }
        Ok(Some(block))
    }

    /// At a turn stop: runs `append` with the hook's stdin and appends its output (trailing
    /// whitespace trimmed, one newline added) to the memory file under an exclusive `flock`,
    /// so two turn stops never interleave. Empty output appends nothing. Returns the bytes
    /// appended.
    pub fn append_turn(&self, stdin: &[u8]) -> Result<usize, String> {
        let (Some(path), Some(argv)) = (&self.file, &self.append) else {
            return Ok(0);
        };
        let output = run_capped(argv, Arc::from(stdin))?;
        let text = String::from_utf8_lossy(&output);
        let text = text.trim_end();
        if text.is_empty() {
            return Ok(0);
        }
        append_line(path, text).map_err(|err| format!("cannot append to {}: {err}", path.display()))
    }
}

fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    let file = File::open(path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_MEMORY_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    Ok(bytes)
}

fn run_capped(argv: &[String], stdin: Arc<[u8]>) -> Result<Vec<u8>, String> {
    let name = argv.join(" ");
    match run(argv, stdin, &[], MEMORY_TIMEOUT) {
        ProcessEnd::Finished { status, stdout, .. } if status.success() => Ok(stdout),
        ProcessEnd::Finished { status, stderr, .. } => Err(format!(
            "memory program {name} failed ({status}): {}",
            String::from_utf8_lossy(&stderr).trim()
        )),
        ProcessEnd::TimedOut { .. } => Err(format!(
            "memory program {name} ran past {} s and was killed",
            MEMORY_TIMEOUT.as_secs()
        )),
        ProcessEnd::SpawnFailed(err) | ProcessEnd::WaitFailed(err) => {
            Err(format!("memory program {name} could not run: {err}"))
        }
    }
}

fn append_line(path: &Path, text: &str) -> std::io::Result<usize> {
    let fd = rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut file = File::from(fd);
    loop {
        match rustix::fs::flock(&file, FlockOperation::LockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(errno) => return Err(errno.into()),
        }
    }
    let line = format!("{text}\n");
    file.write_all(line.as_bytes())?;
    Ok(line.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_memory(path: &Path, append: Option<Vec<String>>) -> CompiledMemory {
        CompiledMemory {
            file: Some(path.to_path_buf()),
            command: None,
            append,
        }
    }

    #[test]
    fn the_memory_file_is_told_with_its_name_and_an_empty_one_is_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("NOTES.md");
        let _ = std::fs::write(&path, "tests run with make check\n\n");
        let memory = file_memory(&path, None);
        let told = memory.context();
        assert_eq!(
            told,
            Ok(Some(format!(
                "Project memory ({}):\ntests run with make check",
                path.display()
            )))
        );
        let _ = std::fs::write(&path, " \n");
        assert_eq!(memory.context(), Ok(None));
        let missing = file_memory(&dir.path().join("absent.md"), None).context();
        assert!(
            missing.as_ref().is_err_and(|e| e.contains("absent.md")),
            "{missing:?}"
        );
    }

    #[test]
    fn a_command_memory_is_its_output() {
        let memory = CompiledMemory {
            file: None,
            command: Some(vec!["printf".into(), "from a command".into()]),
            append: None,
        };
        assert_eq!(
            memory.context(),
            Ok(Some(
                "Project memory (printf from a command):\nfrom a command".into()
            ))
        );
    }

    #[test]
    fn a_turn_stop_append_lands_once_per_call_and_empty_output_appends_nothing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("NOTES.md");
        let _ = std::fs::write(&path, "first\n");
        let append = vec!["sh".into(), "-c".into(), "echo turn ended".into()];
        let memory = file_memory(&path, Some(append));
        assert_eq!(memory.append_turn(b"{}"), Ok(11));
        assert_eq!(memory.append_turn(b"{}"), Ok(11));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text, "first\nturn ended\nturn ended\n");
        let quiet = file_memory(&path, Some(vec!["true".into()]));
        assert_eq!(quiet.append_turn(b"{}"), Ok(0));
    }

    #[test]
    fn a_memory_needs_exactly_one_source() {
        let both = CompiledMemory {
            file: Some("/n".into()),
            command: Some(vec!["x".into()]),
            append: None,
        };
        assert!(both.validate().is_err());
        let append_to_command = CompiledMemory {
            file: None,
            command: Some(vec!["x".into()]),
            append: Some(vec!["y".into()]),
        };
        assert!(append_to_command.validate().is_err());
    }
}
