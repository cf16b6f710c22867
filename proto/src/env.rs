//! [`PaneEnv`]: the `BELFRY_*` environment a pane's program (and its hooks, and its lifecycle
//! commands) finds — written by the pane host and the daemon, read by `belfry dispatch` and the
//! CLI. The variable names are defined here and nowhere else.

use std::path::PathBuf;

/// The daemon's socket.
pub const SOCKET: &str = "BELFRY_SOCKET";
/// The pane's session name.
pub const SESSION: &str = "BELFRY_SESSION";
/// The pane's durable inbox directory.
pub const INBOX: &str = "BELFRY_INBOX";
/// The hook-context spool of the pane.
pub const HOOK_CONTEXT: &str = "BELFRY_HOOK_CONTEXT";
/// The program's incarnation.
pub const INCARNATION: &str = "BELFRY_INCARNATION";
/// The pane's generation.
pub const GENERATION: &str = "BELFRY_GENERATION";
/// The pane host's own socket (for DING adapters).
pub const PANE_SOCKET: &str = "BELFRY_PANE_SOCKET";
/// The durable state directory.
pub const STATE: &str = "BELFRY_STATE";
/// The hook events that are the harness's turn boundary, comma-separated (spec §7.5).
pub const TURN_BOUNDARY_EVENTS: &str = "BELFRY_TURN_BOUNDARY_EVENTS";

/// What a pane tells the processes it starts about itself. Only `session` and `socket` are
/// always there; the rest depend on who starts the process (the pane host for the program, the
/// daemon for lifecycle commands and DING adapters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaneEnv {
    /// The pane's session name.
    pub session: String,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The pane's inbox.
    pub inbox: Option<PathBuf>,
    /// The pane's hook-context spool.
    pub hook_context: Option<PathBuf>,
    /// The program's incarnation.
    pub incarnation: Option<String>,
    /// The pane's generation.
    pub generation: Option<String>,
    /// The pane host's socket.
    pub pane_socket: Option<PathBuf>,
    /// The durable state directory.
    pub state: Option<PathBuf>,
    /// The harness's turn-boundary events.
    pub turn_boundary_events: Option<String>,
}

impl PaneEnv {
    /// The variables to set, in a fixed order; absent fields are left out.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        [
            (SOCKET, Some(self.socket.display().to_string())),
            (SESSION, Some(self.session.clone())),
            (INBOX, path(&self.inbox)),
            (HOOK_CONTEXT, path(&self.hook_context)),
            (INCARNATION, self.incarnation.clone()),
            (GENERATION, self.generation.clone()),
            (PANE_SOCKET, path(&self.pane_socket)),
            (STATE, path(&self.state)),
            (TURN_BOUNDARY_EVENTS, self.turn_boundary_events.clone()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| (name, value)))
        .collect()
    }

    /// The pane this process runs in, read through `var`; `None` outside a belfry pane (no
    /// session or no socket). Empty values count as unset.
    pub fn read(var: impl Fn(&str) -> Option<String>) -> Option<PaneEnv> {
        let var = |name: &str| var(name).filter(|value| !value.is_empty());
        Some(PaneEnv {
            session: var(SESSION)?,
            socket: PathBuf::from(var(SOCKET)?),
            inbox: var(INBOX).map(PathBuf::from),
            hook_context: var(HOOK_CONTEXT).map(PathBuf::from),
            incarnation: var(INCARNATION),
            generation: var(GENERATION),
            pane_socket: var(PANE_SOCKET).map(PathBuf::from),
            state: var(STATE).map(PathBuf::from),
            turn_boundary_events: var(TURN_BOUNDARY_EVENTS),
        })
    }

    /// The pane this process runs in, from its environment.
    pub fn from_env() -> Option<PaneEnv> {
        PaneEnv::read(|name| std::env::var(name).ok())
    }

    /// True if `event` is one of the harness's turn-boundary events.
    pub fn is_turn_boundary(&self, event: &str) -> bool {
        self.turn_boundary_events
            .as_deref()
            .is_some_and(|list| list.split(',').any(|e| e.trim() == event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let env = PaneEnv {
            session: "w".into(),
            socket: "/run/d.sock".into(),
            inbox: Some("/s/inbox/w".into()),
            incarnation: Some("abc".into()),
            turn_boundary_events: Some("stop, idle".into()),
            ..PaneEnv::default()
        };
        let vars = env.vars();
        let read = PaneEnv::read(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        })
        .unwrap();
        assert_eq!(read, env);
        assert!(read.is_turn_boundary("idle"));
        assert!(!read.is_turn_boundary("start"));
        assert_eq!(PaneEnv::read(|_| None), None);
    }
}
