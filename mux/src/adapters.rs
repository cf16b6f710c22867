//! Where adapter data comes from (spec §10): one lookup for everything that reads an adapter,
//! the declarations the daemon loads by name and the `$BELFRY_ADAPTERS/…` programs of a DING
//! adapter command.
//!
//! The adapters directory is `$BELFRY_ADAPTERS`, else `adapters/` of the source tree the binary
//! was built in (`target/<profile>/belfry` → `../../adapters`), else
//! `<prefix>/share/belfry/adapters` beside an installed binary. When none of them exists, the
//! declarations embedded at build time (`mux/build.rs`) are used, so an installed binary knows
//! the adapters it was built with. A directory, when found, wins whole: a user or a test
//! overrides the built-in data by pointing `$BELFRY_ADAPTERS` at a folder of their own.

use std::path::{Path, PathBuf};

use crate::lifecycle::AdapterDeclaration;
use crate::Error;

include!(concat!(env!("OUT_DIR"), "/embedded_adapters.rs"));

/// The prefix of a DING adapter program that names the adapters directory.
pub const ADAPTERS_VAR: &str = "$BELFRY_ADAPTERS";

/// Where this process reads adapter data from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adapters {
    /// An adapters directory on disk, one folder per adapter.
    Dir(PathBuf),
    /// The declarations embedded in the binary at build time (no directory was found).
    Embedded,
}

impl Adapters {
    /// The adapters of the binary `exe`: the first directory of the lookup order that exists
    /// (`$BELFRY_ADAPTERS` is taken as given), else the embedded table.
    pub fn locate(exe: &Path) -> Adapters {
        if let Some(dir) = std::env::var_os("BELFRY_ADAPTERS").filter(|d| !d.is_empty()) {
            return Adapters::Dir(PathBuf::from(dir));
        }
        let Some(bin) = exe.parent() else {
            return Adapters::Embedded;
        };
        [
            bin.join("../../adapters"),
            bin.join("../share/belfry/adapters"),
        ]
        .into_iter()
        .find(|dir| dir.is_dir())
        .map_or(Adapters::Embedded, Adapters::Dir)
    }

    /// The adapters of the running binary (see [`Adapters::locate`]); a binary that cannot
    /// find its own path uses `$BELFRY_ADAPTERS` or the embedded table.
    pub fn of_this_binary() -> Adapters {
        Adapters::locate(&std::env::current_exe().unwrap_or_default())
    }

    /// The names of every adapter there is, sorted: the folders holding a `declaration.json`,
    /// or the embedded table's entries.
    pub fn names(&self) -> Vec<String> {
        match self {
            Adapters::Dir(dir) => {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    return Vec::new();
                };
                let mut names: Vec<String> = entries
                    .flatten()
                    .filter(|entry| entry.path().join("declaration.json").is_file())
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .collect();
                names.sort();
                names
            }
            Adapters::Embedded => EMBEDDED.iter().map(|(name, _)| name.to_string()).collect(),
        }
    }

    /// Whether an adapter called `name` exists here.
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Adapters::Dir(dir) => dir.join(name).join("declaration.json").is_file(),
            Adapters::Embedded => EMBEDDED.iter().any(|(known, _)| *known == name),
        }
    }

    /// Checks that `name` is an adapter there is, naming the ones that exist when it is not.
    pub fn require(&self, name: &str) -> Result<(), Error> {
        if self.contains(name) {
            return Ok(());
        }
        Err(Error::UnknownAdapter {
            name: name.to_string(),
            place: self.to_string(),
            known: self.names(),
        })
    }

    /// Loads the declaration of the adapter `name` (`<dir>/<name>/declaration.json`, or its
    /// embedded copy).
    pub fn declaration(&self, name: &str) -> Result<AdapterDeclaration, Error> {
        match self {
            Adapters::Dir(dir) => load(dir, name),
            Adapters::Embedded => {
                let Some((_, text)) = EMBEDDED.iter().find(|(known, _)| *known == name) else {
                    return Err(Error::UnknownAdapter {
                        name: name.to_string(),
                        place: self.to_string(),
                        known: self.names(),
                    });
                };
                serde_json::from_str(text).map_err(|err| Error::InvalidAdapterDeclaration {
                    path: PathBuf::from(format!("(built in) {name}/declaration.json")),
                    reason: err.to_string(),
                })
            }
        }
    }

    /// A DING adapter command's program with a leading `$BELFRY_ADAPTERS` replaced by the
    /// adapters directory; nothing else is expanded and no shell is involved (spec §12). An
    /// executable cannot be embedded in the binary, so with only the embedded table such a
    /// program is an error naming the fix, never a literal `$BELFRY_ADAPTERS/…` path to run.
    pub fn program(&self, program: &str) -> Result<String, Error> {
        let Some(rest) = program.strip_prefix(ADAPTERS_VAR) else {
            return Ok(program.to_string());
        };
        match self {
            Adapters::Dir(dir) => Ok(format!("{}{rest}", dir.display())),
            Adapters::Embedded => Err(Error::EmbeddedAdapterProgram {
                program: program.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for Adapters {
    /// Where the adapters were looked for, as an error message names it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Adapters::Dir(dir) => write!(f, "{}", dir.display()),
            Adapters::Embedded => f.write_str("the adapters built into this binary"),
        }
    }
}

/// Loads `<adapters>/<name>/declaration.json`.
pub fn load(adapters: &Path, name: &str) -> Result<AdapterDeclaration, Error> {
    let path = adapters.join(name).join("declaration.json");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(source) => return Err(Error::ReadAdapterDeclaration { path, source }),
    };
    serde_json::from_slice(&bytes).map_err(|err| Error::InvalidAdapterDeclaration {
        path,
        reason: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_declaration_parses() {
        assert!(!EMBEDDED.is_empty(), "the build embedded no adapters");
        for (name, _) in EMBEDDED {
            Adapters::Embedded
                .declaration(name)
                .unwrap_or_else(|err| panic!("{name}: {err}"));
        }
    }

    #[test]
    fn an_unknown_embedded_adapter_names_the_known_ones() {
        let err = Adapters::Embedded.require("no-such-adapter").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"no-such-adapter\""), "{text}");
        for (name, _) in EMBEDDED {
            assert!(text.contains(name), "{text}");
        }
    }

    #[test]
    fn an_embedded_adapter_program_is_refused_and_a_plain_one_is_kept() {
        let err = Adapters::Embedded
            .program("$BELFRY_ADAPTERS/x/run")
            .unwrap_err();
        assert!(err.to_string().contains("BELFRY_ADAPTERS"), "{err}");
        assert_eq!(
            Adapters::Embedded.program("/bin/adapter").ok().as_deref(),
            Some("/bin/adapter")
        );
        assert_eq!(
            Adapters::Dir("/a".into())
                .program("$BELFRY_ADAPTERS/x/run")
                .ok()
                .as_deref(),
            Some("/a/x/run")
        );
    }
}
