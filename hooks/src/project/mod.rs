//! `belfry hooks`: the canonical hook file projected into each harness's native config, with
//! an honest account of what each harness will do (spec §9).
//!
//! The lifecycle is four calls on one [`Context`] (which scope, which directories, which
//! environment), one module each: [`plan()`] (`plan.rs`) computes every target's cells, files
//! and diffs and writes nothing; [`apply()`] (`apply.rs`) writes what the plan says, target by
//! target, after checking every target that must fail (an `enforce` hook on a non-exact cell,
//! drift without `force`) before any write; [`status()`] (`status.rs`) reads the live files
//! back and says installed / drifted / missing / inert; and [`uninstall()`] (`uninstall.rs`)
//! removes only what the install state records. The state lives in the user's belfry
//! directory, keyed by the project's canonical path ([`Context::state_path`], [`state::State`]),
//! where a checkout cannot plant it, and every record is verified against what the renderer
//! derives for the project and scope before anything acts on it ([`verify`]); a record that
//! fails is reported and never acted on. Writes go through [`write`]: a unique temporary file
//! created with its final mode, and one `apply`/`uninstall` at a time per project and scope.
//! [`doctor`] reads the same state for `belfry doctor`: per adapter,
//! whether its harness is admitted and its hooks are applied, intact, live and trusted.
//!
//! Provider knowledge arrives as data ([`adapters`]): the matrix says what each semantic
//! feature is on a harness, the renderer's shape says where the native file is and how an
//! entry looks. [`render`] builds the entries, [`merge`] edits settings files byte-exactly
//! with the spans [`jsonc`] finds, and [`trust`] handles a harness's hash-based hook trust.
//! This file holds what they share: the context, canonical JSON digests and file writes.

pub mod adapters;
mod apply;
pub mod doctor;
pub mod folder_trust;
pub mod jsonc;
pub mod merge;
mod plan;
pub mod render;
pub mod state;
mod status;
pub mod trust;
mod uninstall;
pub mod verify;
pub mod write;

pub use apply::{apply, ApplyOptions, ApplyReport, Settlement};
pub use plan::{dependency_refusal, plan, FileChange, HookPlan, Plan, TargetPlan};
pub use status::{status, TargetStatus};
pub use uninstall::uninstall;
pub use verify::rejections;
use write::{remove_file, write_file};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{self, compile, CanonicalFile, Scope};
use adapters::{AdapterData, Adapters, Render};

/// `sha256:` of a value's canonical JSON: object keys sorted at every level, no whitespace.
pub fn canonical_digest(value: &Value) -> String {
    compile::sha256_hex(canonical_json(value).as_bytes())
}

/// A value's canonical JSON text (keys sorted, compact), independent of map ordering.
pub fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|key| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(key).unwrap_or_default(),
                        canonical_json(&map[key])
                    )
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", items.join(","))
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Where a projection runs: the scope, its directories and the environment it expands.
#[derive(Clone, Debug)]
pub struct Context {
    pub scope: Scope,
    /// The project directory (canonical), the base of project-scope paths.
    pub project_dir: PathBuf,
    /// `$XDG_CONFIG_HOME` (else `~/.config`): where the user's canonical file and state live.
    pub config_home: PathBuf,
    /// Environment for `$VAR` in the adapters' user-scope paths.
    pub env: BTreeMap<String, String>,
    /// The belfry version written into generated files and the state.
    pub belfry_version: String,
    /// Harness versions detected by the caller (adapter name → version).
    pub harness_versions: BTreeMap<String, String>,
}

impl Context {
    /// The canonical file of this scope.
    pub fn canonical_path(&self) -> PathBuf {
        canonical::canonical_path(self.scope, &self.project_dir, &self.config_home)
    }

    /// Where the compiled hooks files live: `.belfry/` in the project, or
    /// `$XDG_CONFIG_HOME/belfry/` for the user.
    pub fn state_dir(&self) -> PathBuf {
        match self.scope {
            Scope::Project => self.project_dir.join(".belfry"),
            Scope::User => self.config_home.join("belfry"),
        }
    }

    pub fn hooks_dir(&self) -> PathBuf {
        self.state_dir().join("hooks")
    }

    /// The install state: `$XDG_CONFIG_HOME/belfry/installs/<key>.json` for a project, where
    /// `<key>` is the start of the sha256 of its canonical path, and
    /// `$XDG_CONFIG_HOME/belfry/hooks-state.json` for the user. Never inside the project: a
    /// checkout that ships a state file would otherwise say what belfry removes.
    pub fn state_path(&self) -> PathBuf {
        match self.scope {
            Scope::Project => {
                let digest = compile::sha256_hex(self.project_dir.as_os_str().as_encoded_bytes());
                let key = digest.trim_start_matches("sha256:");
                self.config_home
                    .join("belfry")
                    .join("installs")
                    .join(format!("{}.json", &key[..32.min(key.len())]))
            }
            Scope::User => self.config_home.join("belfry").join("hooks-state.json"),
        }
    }

    /// The lock file `apply` and `uninstall` hold for this project and scope.
    pub fn lock_path(&self) -> PathBuf {
        self.state_path().with_extension("lock")
    }

    /// Where belfry before issue 39 kept a project's install state: read only to report it,
    /// never acted on.
    pub fn legacy_state_path(&self) -> Option<PathBuf> {
        match self.scope {
            Scope::Project => Some(self.project_dir.join(".belfry").join("hooks-state.json")),
            Scope::User => None,
        }
    }

    /// Expands `$NAME` from the environment, then from `defaults`; a path that stays
    /// relative is taken from the project directory.
    pub fn expand(&self, template: &str, defaults: &BTreeMap<String, String>) -> Option<PathBuf> {
        let expanded = expand_vars(template, &self.env, defaults, 0)?;
        let path = PathBuf::from(expanded);
        Some(if path.is_absolute() {
            path
        } else {
            self.project_dir.join(path)
        })
    }

    /// The native file of a target in this scope.
    pub fn target_path(&self, render: &Render) -> Option<PathBuf> {
        let paths = render.paths();
        match self.scope {
            Scope::Project => Some(self.project_dir.join(&paths.project)),
            Scope::User => self.expand(&paths.user, &paths.defaults),
        }
    }
}

fn expand_vars(
    text: &str,
    env: &BTreeMap<String, String>,
    defaults: &BTreeMap<String, String>,
    depth: usize,
) -> Option<String> {
    if depth > 4 {
        return None;
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..len];
        let value = match env.get(name).filter(|value| !value.is_empty()) {
            Some(value) => value.clone(),
            None => expand_vars(defaults.get(name)?, env, defaults, depth + 1)?,
        };
        out.push_str(&value);
        rest = &after[len..];
    }
    out.push_str(rest);
    Some(out)
}

/// A problem that stops the lifecycle as a whole (not one target).
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error(transparent)]
    Canonical(#[from] canonical::CanonicalError),
    #[error("adapter data: {0}")]
    AdapterData(String),
    #[error("install state {path}: {reason}")]
    State { path: PathBuf, reason: String },
    #[error("lock {path}: {reason}")]
    Lock { path: PathBuf, reason: String },
}

/// Loads the adapters and the scope's canonical file.
pub fn load(context: &Context) -> Result<(Adapters, CanonicalFile), ProjectError> {
    let adapters = Adapters::embedded().map_err(ProjectError::AdapterData)?;
    let canonical = canonical::load(&context.canonical_path(), context.scope, &adapters.names())?;
    Ok((adapters, canonical))
}

/// A native or state file's text, `None` when there is none. Only a regular file is read
/// (after following a symlink): a FIFO there would block the read for good, and a device or
/// a directory is no settings file. The file is opened without blocking and its type checked
/// on the open descriptor, so what is read is what was checked.
fn read_optional(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let opened = std::fs::OpenOptions::new()
        .read(true)
        // Opening a FIFO for reading waits for a writer unless the open does not block.
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => {
            // A socket cannot be opened at all; say what it is rather than the errno alone.
            return Err(match std::fs::metadata(path) {
                Ok(meta) if !meta.is_file() => not_regular(path, &meta.file_type()),
                _ => format!("cannot read {}: {err}", path.display()),
            });
        }
    };
    let meta = file
        .metadata()
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta.file_type()));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    Ok(Some(text))
}

fn not_regular(path: &Path, kind: &std::fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    };
    format!(
        "cannot read {}: it is {what}, and belfry reads only a regular file there",
        path.display()
    )
}

/// Removes directories apply created, deepest first, each only when nothing else is in it and
/// it is a directory, not a symbolic link to one.
fn remove_empty_dirs(dirs: &[String]) {
    let mut dirs = dirs.to_vec();
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.len()));
    dirs.dedup();
    for dir in dirs {
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir());
        if is_dir {
            // A directory that holds anything is kept: remove_dir refuses it.
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

impl AdapterData {
    /// `sha256:` of the adapter's projection data, recorded as the adapter version.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(format!(
            "{:?}{:?}{:?}",
            self.matrix, self.render, self.template
        ));
        let digest = hasher.finalize();
        let mut hex = String::from("sha256:");
        for byte in digest {
            hex.push_str(&format!("{byte:02x}"));
        }
        hex
    }

    /// The defaults for `$VAR`s in this adapter's paths.
    pub fn render_defaults(&self) -> BTreeMap<String, String> {
        self.render
            .as_ref()
            .map(|render| render.paths().defaults.clone())
            .unwrap_or_default()
    }
}
