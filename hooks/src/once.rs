//! Read-once guards (issue 45 (e)): the one place that remembers which `once` hooks have
//! fired, and re-arms them when the model forgot.
//!
//! A hook declared `once "session"` or `once "context"` runs the first time its selector
//! matches; later matches skip it. The memory of what fired is a small JSON ledger on disk under
//! belfry's state directory (`$BELFRY_STATE`, else `$XDG_STATE_HOME/belfry`, else
//! `~/.local/state/belfry`), in `once/<key>.json`, so neither a daemon restart nor a new
//! dispatch process re-arms it. The key is the pane incarnation (`BELFRY_SESSION` and
//! `BELFRY_INCARNATION`) inside a belfry pane, else the harness's `session_id` from the hook's
//! stdin; with neither there is nothing to key on and a `once` hook runs every time (fail-open:
//! a guard that cannot remember must not go silent).
//!
//! Re-arming is decided from what dispatch sees, never from a harness's words in code:
//! - a `session_id` other than the one recorded is a new session: every guard re-arms;
//! - `pre-compact`, a `session-start` whose `source` is `clear`, and any (event, source) the
//!   dialect's adapter lists in `compaction_events` mean the context window was lost: the
//!   `context` guards re-arm, the `session` guards stay fired.
//!
//! Two dispatches at once (a harness running hooks in parallel) serialize on an exclusive
//! `flock` of `once/<key>.lock` for the read-modify-write, so a guard fires exactly once.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::canonical::Once;

/// The ledger name of the guard brief's delivery (re-told after every lost context).
pub const BRIEF_ENTRY: &str = "belfry:brief";
/// The ledger name of the project memory's delivery (once per session).
pub const MEMORY_ENTRY: &str = "belfry:memory";

/// The `source` word of a `session-start` that cleared the conversation: belfry's own word
/// (the `clear` op) that the shims and the common hook shape use too.
const CLEAR_SOURCE: &str = "clear";

/// A `once` declaration as the compiled hooks file carries it on a group.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnceSpec {
    /// `<scope>/<hook name>`: unique across the project and user files.
    pub name: String,
    #[serde(deserialize_with = "scope_word")]
    pub scope: Once,
}

fn scope_word<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Once, D::Error> {
    let text = String::deserialize(de)?;
    Once::parse(&text).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "once scope {text:?} is not one of: session, context"
        ))
    })
}

/// What one dispatch knows that decides re-arming.
#[derive(Clone, Debug, Default)]
pub struct Moment<'a> {
    pub event: &'a str,
    pub session_id: Option<&'a str>,
    pub source: Option<&'a str>,
    /// Whether the dialect's adapter declares this (event, source) a compaction.
    pub is_compaction: bool,
}

impl Moment<'_> {
    fn loses_context(&self) -> bool {
        self.is_compaction
            || self.event == "pre-compact"
            || (self.event == "session-start" && self.source == Some(CLEAR_SOURCE))
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Ledger {
    version: u32,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    session: BTreeSet<String>,
    #[serde(default)]
    context: BTreeSet<String>,
}

/// Why the ledger could not be used; dispatch notes it and runs the guard (fail-open).
#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    #[error("no key for read-once guards: not in a belfry pane and the hook's stdin has no session_id; the guard ran")]
    NoKey,
    #[error("read-once ledger {path}: {action}: {source}; the guard ran")]
    Io {
        path: PathBuf,
        action: &'static str,
        source: std::io::Error,
    },
}

/// The ledger's directory under the state directory, read through `env` like dispatch's other
/// settings so tests need not change the process's environment.
pub fn ledger_dir(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    let var = |name: &str| env(name).filter(|value| !value.is_empty());
    let state = match (var("BELFRY_STATE"), var("XDG_STATE_HOME"), var("HOME")) {
        (Some(state), _, _) => PathBuf::from(state),
        (None, Some(xdg), _) => PathBuf::from(xdg).join("belfry"),
        (None, None, home) => {
            PathBuf::from(home.unwrap_or_else(|| OsString::from("/"))).join(".local/state/belfry")
        }
    };
    state.join("once")
}

/// The ledger key: the pane incarnation inside a pane, else the harness's session id.
pub fn ledger_key(
    env: &dyn Fn(&str) -> Option<OsString>,
    session_id: Option<&str>,
) -> Option<String> {
    let var = |name: &str| {
        env(name)
            .filter(|value| !value.is_empty())
            .map(|value| value.to_string_lossy().into_owned())
    };
    let pane = var(belfry_proto::env::SESSION).zip(var(belfry_proto::env::INCARNATION));
    match (pane, session_id) {
        (Some((session, incarnation)), _) => Some(format!("pane\n{session}\n{incarnation}")),
        (None, Some(id)) if !id.is_empty() => Some(format!("session\n{id}")),
        _ => None,
    }
}

/// Under the ledger's lock: re-arms what `moment` says the model forgot, then claims each of
/// `wanted` that has not fired, and returns the names claimed (the ones that fire now).
pub fn claim(
    dir: &Path,
    key: Option<&str>,
    moment: &Moment<'_>,
    wanted: &[(&str, Once)],
) -> Result<BTreeSet<String>, OnceError> {
    let key = key.ok_or(OnceError::NoKey)?;
    let io = |path: &Path, action: &'static str| {
        let path = path.to_path_buf();
        move |source: std::io::Error| OnceError::Io {
            path,
            action,
            source,
        }
    };
    create_private_dir(dir).map_err(io(dir, "create"))?;
    let stem = crate::canonical::compile::sha256_hex(key.as_bytes());
    let stem = stem.trim_start_matches("sha256:").get(..32).unwrap_or("x");
    let lock_path = dir.join(format!("{stem}.lock"));
    let lock = open_private(&lock_path, OFlags::empty()).map_err(io(&lock_path, "open"))?;
    loop {
        match rustix::fs::flock(&lock, FlockOperation::LockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(errno) => return Err(io(&lock_path, "flock")(errno.into())),
        }
    }
    let path = dir.join(format!("{stem}.json"));
    let mut ledger = read_ledger(&path).map_err(io(&path, "read"))?;
    let claimed = settle(&mut ledger, moment, wanted);
    write_ledger(dir, &path, &ledger).map_err(io(&path, "write"))?;
    // The lock is released when `lock` is dropped, after the new ledger is in place.
    drop(lock);
    Ok(claimed)
}

/// The ledger's rules, apart from the file: re-arm, then claim.
fn settle(ledger: &mut Ledger, moment: &Moment<'_>, wanted: &[(&str, Once)]) -> BTreeSet<String> {
    if let Some(id) = moment.session_id.filter(|id| !id.is_empty()) {
        if ledger.session_id.as_deref() != Some(id) {
            ledger.session.clear();
            ledger.context.clear();
            ledger.session_id = Some(id.to_owned());
        }
    }
    if moment.loses_context() {
        ledger.context.clear();
    }
    let mut claimed = BTreeSet::new();
    for (name, scope) in wanted {
        let fired = match scope {
            Once::Session => &mut ledger.session,
            Once::Context => &mut ledger.context,
        };
        if fired.insert((*name).to_owned()) {
            claimed.insert((*name).to_owned());
        }
    }
    ledger.version = 1;
    claimed
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn open_private(path: &Path, extra: OFlags) -> std::io::Result<File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | extra,
        Mode::from_raw_mode(0o600),
    )?;
    Ok(File::from(fd))
}

/// A missing or unreadable-as-JSON ledger is an empty one: the worst case is one guard firing
/// again, never a guard that stops firing for good.
fn read_ledger(path: &Path) -> std::io::Result<Ledger> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(file) => {
            file.take(1 << 20).read_to_end(&mut bytes)?;
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Ledger::default()),
        Err(err) => return Err(err),
    }
    Ok(serde_json::from_slice(&bytes).unwrap_or_default())
}

/// Written to a unique temporary file and renamed, so a reader never sees half a ledger.
fn write_ledger(dir: &Path, path: &Path, ledger: &Ledger) -> std::io::Result<()> {
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("ledger"),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&temp);
    let mut file = open_private(&temp, OFlags::EXCL | OFlags::TRUNC)?;
    let bytes = serde_json::to_vec(ledger).map_err(std::io::Error::other)?;
    file.write_all(&bytes)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(event: &'a str, session: &'a str, source: Option<&'a str>) -> Moment<'a> {
        Moment {
            event,
            session_id: Some(session),
            source,
            is_compaction: false,
        }
    }

    const BOTH: &[(&str, Once)] = &[("project/s", Once::Session), ("project/c", Once::Context)];

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    #[test]
    fn a_once_guard_fires_once_then_not_on_the_next_match() {
        let mut ledger = Ledger::default();
        let first = settle(&mut ledger, &at("before-tool", "s1", None), BOTH);
        assert_eq!(names(&first), ["project/c", "project/s"]);
        let second = settle(&mut ledger, &at("before-tool", "s1", None), BOTH);
        assert!(second.is_empty(), "{second:?}");
    }

    #[test]
    fn a_compaction_re_arms_context_guards_only() {
        let mut ledger = Ledger::default();
        settle(&mut ledger, &at("before-tool", "s1", None), BOTH);
        let after = settle(&mut ledger, &at("pre-compact", "s1", None), BOTH);
        assert_eq!(names(&after), ["project/c"]);
        let mut declared = at("session-start", "s1", Some("anything"));
        declared.is_compaction = true;
        assert_eq!(names(&settle(&mut ledger, &declared, BOTH)), ["project/c"]);
        let clear = at("session-start", "s1", Some("clear"));
        assert_eq!(names(&settle(&mut ledger, &clear, BOTH)), ["project/c"]);
        // A source no adapter declares a compaction re-arms nothing.
        let resume = at("session-start", "s1", Some("resume"));
        assert!(settle(&mut ledger, &resume, BOTH).is_empty());
    }

    #[test]
    fn a_new_session_re_arms_every_guard() {
        let mut ledger = Ledger::default();
        settle(&mut ledger, &at("before-tool", "s1", None), BOTH);
        let fresh = settle(&mut ledger, &at("before-tool", "s2", None), BOTH);
        assert_eq!(names(&fresh), ["project/c", "project/s"]);
    }

    #[test]
    fn the_ledger_on_disk_survives_a_new_process_and_a_bad_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let dir = dir.path().join("state/once");
        let moment = at("before-tool", "s1", None);
        let first = claim(&dir, Some("pane\na\n1"), &moment, BOTH);
        assert_eq!(first.map(|s| s.len()).ok(), Some(2));
        let again = claim(&dir, Some("pane\na\n1"), &moment, BOTH);
        assert_eq!(again.map(|s| s.len()).ok(), Some(0));
        let other_pane = claim(&dir, Some("pane\na\n2"), &moment, BOTH);
        assert_eq!(other_pane.map(|s| s.len()).ok(), Some(2));
        assert!(matches!(
            claim(&dir, None, &moment, BOTH),
            Err(OnceError::NoKey)
        ));
        let blocked = dir.join("file");
        let _ = std::fs::write(&blocked, b"");
        let err = claim(&blocked.join("under"), Some("k"), &moment, BOTH);
        assert!(matches!(err, Err(OnceError::Io { .. })), "{err:?}");
    }

    #[test]
    fn two_dispatches_at_once_fire_a_guard_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let dir = dir.path().to_path_buf();
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let moment = at("before-tool", "s1", None);
                    claim(&dir, Some("k"), &moment, &[("project/g", Once::Context)])
                        .map(|set| set.len())
                        .unwrap_or(usize::MAX)
                })
            })
            .collect();
        let fired: usize = threads
            .into_iter()
            .map(|t| t.join().unwrap_or(usize::MAX))
            .sum();
        assert_eq!(fired, 1);
    }

    #[test]
    fn the_key_is_the_pane_incarnation_else_the_session_id() {
        let pane = |name: &str| match name {
            "BELFRY_SESSION" => Some(OsString::from("p")),
            "BELFRY_INCARNATION" => Some(OsString::from("7")),
            _ => None,
        };
        assert_eq!(ledger_key(&pane, Some("x")).as_deref(), Some("pane\np\n7"));
        assert_eq!(
            ledger_key(&|_| None, Some("x")).as_deref(),
            Some("session\nx")
        );
        assert_eq!(ledger_key(&|_| None, None), None);
    }
}
