//! The hook-context spool (spec §8 `--spool`): context that dispatch produced, kept until the
//! host can hand it to the model at the next prompt.
//!
//! The spool is a JSON-lines file, one `{"event":E,"text":T}` per line. Writers and the drainer
//! serialize on an exclusive `flock` of the file: a writer appends one whole line under the
//! lock; the drainer reads everything and truncates to zero under the same lock, so a line is
//! read exactly once and never torn. The file is created 0600 and must stay owned by the user
//! and unwritable by others (spec §12), because its text reaches the model. It is opened with
//! `O_NOFOLLOW`, so a symlink planted at the spool path cannot redirect the appends into
//! another file of the user's.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::permissions::{check_owner_and_mode, AllowedOwners};

/// The first line of a drained block.
pub const GUIDANCE_HEADER: &str = "Platform guidance:";

/// One spool line.
#[derive(Debug, Serialize, Deserialize)]
struct SpoolLine<'a> {
    event: std::borrow::Cow<'a, str>,
    text: std::borrow::Cow<'a, str>,
}

/// Appends `{"event":event,"text":text}` as one line, creating the spool (0600) if needed.
/// Empty text appends nothing.
pub fn spool_append(path: &Path, event: &str, text: &str) -> Result<(), Error> {
    if text.is_empty() {
        return Ok(());
    }
    let mut line = serde_json::to_vec(&SpoolLine {
        event: event.into(),
        text: text.into(),
    })
    .map_err(|err| io_error(path, "encode", std::io::Error::other(err)))?;
    line.push(b'\n');
    let flags =
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = open(path, flags, "open")?;
    check_secure(path, &file)?;
    lock_exclusive(path, &file)?;
    // The lock is released when `file` is closed at the end of this function.
    file.write_all(&line)
        .map_err(|err| io_error(path, "append", err))
}

/// Reads and empties the spool under its lock and returns one block: [`GUIDANCE_HEADER`] on its
/// own line, then each text in spool order, separated by a blank line, ending in a newline.
/// A missing or empty spool (or one holding only empty texts) gives an empty string. Lines
/// that are not spool lines (no belfry writer makes them) are dropped with the rest.
pub fn spool_drain(path: &Path) -> Result<String, Error> {
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = match open(path, flags, "open") {
        Ok(file) => file,
        Err(Error::SpoolIo { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(String::new())
        }
        Err(err) => return Err(err),
    };
    check_secure(path, &file)?;
    lock_exclusive(path, &file)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|err| io_error(path, "read", err))?;
    if !bytes.is_empty() {
        file.set_len(0)
            .map_err(|err| io_error(path, "truncate", err))?;
    }
    Ok(guidance_block(&bytes))
}

/// Formats spool bytes as the block [`spool_drain`] returns.
fn guidance_block(spool: &[u8]) -> String {
    let texts: Vec<String> = spool
        .split(|byte| *byte == b'\n')
        .filter_map(|line| serde_json::from_slice::<SpoolLine>(line).ok())
        .map(|line| line.text.trim_end().to_string())
        .filter(|text| !text.trim().is_empty())
        .collect();
    if texts.is_empty() {
        return String::new();
    }
    format!("{GUIDANCE_HEADER}\n{}\n", texts.join("\n\n"))
}

fn open(path: &Path, flags: OFlags, action: &'static str) -> Result<File, Error> {
    rustix::fs::open(path, flags, Mode::from_raw_mode(0o600))
        .map(File::from)
        .map_err(|errno| io_error(path, action, errno.into()))
}

fn check_secure(path: &Path, file: &File) -> Result<(), Error> {
    let metadata = file.metadata().map_err(|err| io_error(path, "stat", err))?;
    check_owner_and_mode(path, &metadata, AllowedOwners::UserOnly).map_err(|insecure| {
        Error::SpoolInsecure {
            path: path.to_path_buf(),
            problem: insecure.problem,
            fix: insecure.fix,
        }
    })
}

fn lock_exclusive(path: &Path, file: &File) -> Result<(), Error> {
    loop {
        match rustix::fs::flock(file, FlockOperation::LockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(errno) => return Err(io_error(path, "flock", errno.into())),
        }
    }
}

fn io_error(path: &Path, action: &'static str, source: std::io::Error) -> Error {
    Error::SpoolIo {
        path: path.to_path_buf(),
        action,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_joins_texts_as_paragraphs_and_skips_junk() {
        let spool = b"{\"event\":\"before-tool\",\"text\":\"one\\ntwo\\n\"}\n\
                      not a spool line\n\
                      {\"event\":\"after-tool\",\"text\":\"   \"}\n\
                      {\"event\":\"after-tool\",\"text\":\"three\"}\n";
        assert_eq!(
            guidance_block(spool),
            "Platform guidance:\none\ntwo\n\nthree\n"
        );
    }

    #[test]
    fn empty_spool_gives_empty_block() {
        assert_eq!(guidance_block(b""), "");
        assert_eq!(guidance_block(b"{\"event\":\"x\",\"text\":\"\"}\n"), "");
    }
}
