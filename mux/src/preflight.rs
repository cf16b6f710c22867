//! The checks `belfry up` makes on every agent it is about to launch, before it launches any.
//!
//! spec §11: `belfry up` is all-or-nothing for the input it can check. Without these checks a
//! later agent whose `cwd` is missing or whose program does not exist failed at the daemon
//! after the agents before it were already running, and the daemon's error could not point at
//! the file. So, for every agent to be launched: its working directory exists and is a
//! directory, its program resolves (a path with a `/` names an executable file, relative to the
//! `cwd`; a bare name is found on the `PATH` the pane will have), and its charter file is
//! readable and has an adapter to hand it over. Every failure is reported, each with the file,
//! line and column of the value at fault; when there is any, nothing is launched.
//!
//! The charter is read here, once, and the text handed back, so the file checked is the file
//! sent. What only the daemon can know (a pane that appeared meanwhile, an adapter declaration
//! that takes no charter) is still refused by the daemon; `belfry up` then stops the panes it
//! launched in that run.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::declare::{AgentDecl, AgentPlaces, Declarations, Location};

/// The search path a program is looked up in when the pane's environment has no `PATH`: the
/// one `execvp` uses.
const DEFAULT_SEARCH_PATH: &str = "/bin:/usr/bin";

/// One agent, checked and ready to be sent to the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared<'a> {
    /// The declaration.
    pub agent: &'a AgentDecl,
    /// The charter's text, read during the check; `None` without a charter.
    pub charter_text: Option<String>,
}

/// Why a declared agent cannot be launched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchProblem {
    /// The working directory does not exist or is not a directory.
    #[error("agent {agent:?}: cwd {} {reason}", path.display())]
    Cwd {
        /// The agent.
        agent: String,
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The program is not an executable file, or is on no directory of the search path.
    #[error("agent {agent:?}: program {program:?} {reason}")]
    Program {
        /// The agent.
        agent: String,
        /// The program as written.
        program: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The charter file cannot be read.
    #[error("agent {agent:?}: charter {} cannot be read: {reason}", path.display())]
    Charter {
        /// The agent.
        agent: String,
        /// The file.
        path: PathBuf,
        /// What the read said.
        reason: String,
    },
    /// A charter without an adapter: nothing says how the harness takes it.
    #[error(
        "agent {agent:?}: a charter needs an adapter that says how the harness takes it \
         (adapter \"NAME\")"
    )]
    CharterWithoutAdapter {
        /// The agent.
        agent: String,
    },
}

/// A [`LaunchProblem`] and where it is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct LaunchError {
    /// The value at fault.
    pub at: Location,
    /// What is wrong.
    pub problem: LaunchProblem,
}

/// Checks every agent named in `names` (each declared in `decls`) and returns them in that
/// order, or every problem found. `base_env` is the environment the panes start from (the
/// caller's): with the agent's declared `env` over it, it gives the `PATH` programs are
/// looked up in.
pub fn prepare<'a>(
    decls: &'a Declarations,
    names: &[&str],
    base_env: &BTreeMap<String, String>,
) -> Result<Vec<Prepared<'a>>, Vec<LaunchError>> {
    let mut prepared = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        let (Some(agent), Some(places)) = (decls.get(name), decls.places.get(*name)) else {
            continue;
        };
        match prepare_agent(agent, places, base_env) {
            Ok(ready) => prepared.push(ready),
            Err(mut found) => errors.append(&mut found),
        }
    }
    if errors.is_empty() {
        Ok(prepared)
    } else {
        Err(errors)
    }
}

/// The harness program of `agent` when it is missing here: the agent has an adapter (so its
/// program is a harness, something installed or not), its program is a bare name, and no
/// directory of the `PATH` the pane will have holds it. `None` for anything else, whose
/// program [`prepare`] judges as usual: a path or a plain program that is not there is a
/// mistake in the file, not a harness this machine lacks.
pub fn missing_harness(agent: &AgentDecl, base_env: &BTreeMap<String, String>) -> Option<String> {
    if agent.adapter.is_none() || agent.host.is_some() {
        return None;
    }
    let program = agent.argv.first()?;
    if program.contains('/') {
        return None;
    }
    let search_path = agent
        .env
        .get("PATH")
        .or_else(|| base_env.get("PATH"))
        .map_or(DEFAULT_SEARCH_PATH, String::as_str);
    check_program(program, agent.cwd.as_deref(), search_path)
        .is_err()
        .then(|| program.clone())
}

fn prepare_agent<'a>(
    agent: &'a AgentDecl,
    places: &AgentPlaces,
    base_env: &BTreeMap<String, String>,
) -> Result<Prepared<'a>, Vec<LaunchError>> {
    let mut errors = Vec::new();
    let at = |place: &Option<Location>| place.clone().unwrap_or_else(|| places.agent.clone());
    // A remote agent's directory and program are on the far machine (spec §6.2): its daemon
    // refuses a cwd that is not a directory and its pane says a program it cannot start, so
    // nothing of them is judged by this machine's files.
    let remote = agent.host.is_some();
    let cwd_ok = match &agent.cwd {
        Some(_) if remote => false,
        Some(cwd) => match check_cwd(cwd) {
            Ok(()) => true,
            Err(reason) => {
                errors.push(LaunchError {
                    at: at(&places.cwd),
                    problem: LaunchProblem::Cwd {
                        agent: agent.name.clone(),
                        path: cwd.clone(),
                        reason,
                    },
                });
                false
            }
        },
        None => !remote,
    };
    // A relative program path is relative to the cwd; with the cwd missing it cannot be
    // judged, and the cwd error already says what to fix.
    if cwd_ok {
        let search_path = agent
            .env
            .get("PATH")
            .or_else(|| base_env.get("PATH"))
            .map_or(DEFAULT_SEARCH_PATH, String::as_str);
        let program = agent.argv.first().map_or("", String::as_str);
        if let Err(reason) = check_program(program, agent.cwd.as_deref(), search_path) {
            errors.push(LaunchError {
                at: places.program.clone(),
                problem: LaunchProblem::Program {
                    agent: agent.name.clone(),
                    program: program.to_owned(),
                    reason,
                },
            });
        }
    }
    let charter_text = match &agent.charter {
        None => None,
        Some(_) if agent.adapter.is_none() => {
            errors.push(LaunchError {
                at: at(&places.charter),
                problem: LaunchProblem::CharterWithoutAdapter {
                    agent: agent.name.clone(),
                },
            });
            None
        }
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(err) => {
                errors.push(LaunchError {
                    at: at(&places.charter),
                    problem: LaunchProblem::Charter {
                        agent: agent.name.clone(),
                        path: path.clone(),
                        reason: err.to_string(),
                    },
                });
                None
            }
        },
    };
    if errors.is_empty() {
        Ok(Prepared {
            agent,
            charter_text,
        })
    } else {
        Err(errors)
    }
}

fn check_cwd(cwd: &Path) -> Result<(), String> {
    match std::fs::metadata(cwd) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => Err("is not a directory".to_owned()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err("does not exist".to_owned()),
        Err(err) => Err(format!("cannot be used: {err}")),
    }
}

/// As `execvp` finds a program: a name with a `/` is a path (relative to `cwd`), any other
/// name is looked up in each directory of `search_path` in turn (an empty entry is `.`).
fn check_program(program: &str, cwd: Option<&Path>, search_path: &str) -> Result<(), String> {
    if program.contains('/') {
        let path = match cwd {
            Some(cwd) => cwd.join(program),
            None => PathBuf::from(program),
        };
        return executable(&path).map_err(|reason| format!("({}) {reason}", path.display()));
    }
    let found = std::env::split_paths(OsStr::new(search_path)).any(|dir| {
        let dir = if dir.as_os_str().is_empty() {
            cwd.map_or_else(|| PathBuf::from("."), Path::to_path_buf)
        } else {
            dir
        };
        executable(&dir.join(program)).is_ok()
    });
    if found {
        Ok(())
    } else {
        Err(format!(
            "is not found on PATH ({search_path}); give its full path or fix PATH"
        ))
    }
}

fn executable(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => Err("is not a file".to_owned()),
        Ok(metadata) if metadata.permissions().mode() & 0o111 == 0 => {
            Err("is not executable".to_owned())
        }
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err("does not exist".to_owned()),
        Err(err) => Err(format!("cannot be used: {err}")),
    }
}
