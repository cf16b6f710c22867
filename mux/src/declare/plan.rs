//! Reconciliation (spec §11): what `belfry up` and `belfry down` would do against the panes
//! that are running, computed without doing any of it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::Declarations;

/// A pane the daemon reports as running, as far as reconciliation needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningPane {
    /// The pane's session name.
    pub session: String,
    /// The generation it was launched with.
    pub generation: String,
    /// True if the program in it has exited (the pane host is still there).
    pub exited: bool,
}

/// What `belfry up` does for one declared agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// No pane by that name: launch it.
    Launch {
        /// The agent.
        name: String,
        /// The generation it will have.
        generation: String,
    },
    /// A live pane with the declared generation: adopt it, touch nothing.
    Adopt {
        /// The agent.
        name: String,
        /// Its generation, declared and running.
        generation: String,
    },
    /// A live pane whose declaration changed, without `--replace`: report, restart nothing.
    Drift {
        /// The agent.
        name: String,
        /// The generation the pane runs with.
        running_generation: String,
        /// The generation the file now declares.
        declared_generation: String,
    },
    /// Relaunch the pane with the declared spec.
    Replace {
        /// The agent.
        name: String,
        /// Why it is relaunched.
        reason: ReplaceReason,
        /// The generation the pane had.
        running_generation: String,
        /// The generation it will have.
        declared_generation: String,
    },
    /// An agent with an adapter whose harness program is not installed here: nothing is
    /// launched for it, and the other agents launch (a missing harness is a machine's state,
    /// not a mistake in the file).
    Skip {
        /// The agent.
        name: String,
        /// The harness program, as declared.
        program: String,
        /// The agent's adapter.
        adapter: String,
    },
}

/// Why a declared pane is relaunched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    /// Its program exited; relaunching restarts nothing that is live.
    Exited,
    /// It drifted and `--replace` was given.
    Drifted,
}

/// Whether `belfry up` relaunches panes whose declaration changed (`--replace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftPolicy {
    /// Report drift, restart nothing (the default).
    Report,
    /// Relaunch drifted panes.
    Replace,
}

impl Action {
    /// The agent the action is about.
    pub fn name(&self) -> &str {
        match self {
            Action::Launch { name, .. }
            | Action::Adopt { name, .. }
            | Action::Drift { name, .. }
            | Action::Replace { name, .. }
            | Action::Skip { name, .. } => name,
        }
    }
}

/// `sha256:` and the first 12 hex digits: enough to tell generations apart in a report.
fn short_generation(generation: &str) -> &str {
    let end = generation
        .char_indices()
        .nth("sha256:".len() + 12)
        .map_or(generation.len(), |(index, _)| index);
    &generation[..end]
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Launch { name, generation } => {
                write!(f, "launch  {name}: {}", short_generation(generation))
            }
            Action::Adopt { name, generation } => {
                write!(
                    f,
                    "adopt   {name}: running {}, unchanged",
                    short_generation(generation)
                )
            }
            Action::Drift {
                name,
                running_generation,
                declared_generation,
            } => write!(
                f,
                "drift   {name}: running {}, declared {}; left running \
                 (`belfry up --replace` relaunches it)",
                short_generation(running_generation),
                short_generation(declared_generation)
            ),
            Action::Replace {
                name,
                reason: ReplaceReason::Drifted,
                running_generation,
                declared_generation,
            } => write!(
                f,
                "replace {name}: declaration changed, {} -> {}",
                short_generation(running_generation),
                short_generation(declared_generation)
            ),
            Action::Replace {
                name,
                reason: ReplaceReason::Exited,
                declared_generation,
                ..
            } => write!(
                f,
                "replace {name}: program exited, relaunching {}",
                short_generation(declared_generation)
            ),
            Action::Skip {
                name,
                program,
                adapter,
            } => write!(
                f,
                "skip    {name}: its harness {program:?} (adapter {adapter}) is not installed \
                 here (not on PATH); install it and run `belfry up` again"
            ),
        }
    }
}

/// The human report of a plan: one line per action, each ending in a newline.
pub fn report(actions: &[Action]) -> String {
    actions.iter().map(|action| format!("{action}\n")).collect()
}

/// What `belfry up` does, one action per declared agent in file order (spec §11). Pure.
///
/// Not running: launch. Running with the declared generation: adopt. Running with another
/// generation: drift, unless `drift` is [`DriftPolicy::Replace`]. Exited (whatever its
/// generation): replace, since that restarts nothing live. Running panes that are not declared
/// are not `belfry up`'s business and get no action. If `running` names a session twice, the
/// first entry counts.
pub fn plan(decls: &Declarations, running: &[RunningPane], drift: DriftPolicy) -> Vec<Action> {
    let running = index_running(running);
    decls
        .agents
        .iter()
        .map(|agent| {
            let name = agent.name.clone();
            let declared_generation = agent.generation();
            let Some(pane) = running.get(agent.name.as_str()) else {
                return Action::Launch {
                    name,
                    generation: declared_generation,
                };
            };
            let running_generation = pane.generation.clone();
            if pane.exited {
                Action::Replace {
                    name,
                    reason: ReplaceReason::Exited,
                    running_generation,
                    declared_generation,
                }
            } else if running_generation == declared_generation {
                Action::Adopt {
                    name,
                    generation: declared_generation,
                }
            } else if drift == DriftPolicy::Replace {
                Action::Replace {
                    name,
                    reason: ReplaceReason::Drifted,
                    running_generation,
                    declared_generation,
                }
            } else {
                Action::Drift {
                    name,
                    running_generation,
                    declared_generation,
                }
            }
        })
        .collect()
}

/// What `belfry down` stops: the declared agents that have a pane, exited or not, in file
/// order. Undeclared panes are left alone. Pure.
pub fn plan_down(decls: &Declarations, running: &[RunningPane]) -> Vec<String> {
    let running = index_running(running);
    decls
        .agents
        .iter()
        .filter(|agent| running.contains_key(agent.name.as_str()))
        .map(|agent| agent.name.clone())
        .collect()
}

fn index_running(running: &[RunningPane]) -> BTreeMap<&str, &RunningPane> {
    let mut index = BTreeMap::new();
    for pane in running {
        index.entry(pane.session.as_str()).or_insert(pane);
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_generations_keep_twelve_digits() {
        assert_eq!(
            short_generation("sha256:0123456789abcdef"),
            "sha256:0123456789ab"
        );
        assert_eq!(short_generation("odd"), "odd");
    }
}
