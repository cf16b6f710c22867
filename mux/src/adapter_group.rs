//! The adapter sidecar as a process group: everything an adapter starts ends with it.
//!
//! An adapter (spec §7.4, §10) is a program of someone else's, and may start children of its
//! own (a shell pipeline, a watcher). Killing only the adapter left those running after the
//! pane was killed, after the adapter was restarted and after the daemon was gone. So the
//! adapter is started as the leader of a process group of its own, and the group is what ends:
//!
//! * when the worker stops it (the pane was killed or restarted, the daemon shut down) or the
//!   adapter exits and is replaced, [`AdapterGroup`] kills the whole group before it reaps the
//!   leader. The unreaped leader keeps its pid, which is the group id, reserved, so the kill
//!   cannot reach a group that merely reuses the number;
//! * when the daemon is killed outright (`kill -9`), no code of it runs. `PR_SET_PDEATHSIG`
//!   ends the adapter itself; its children are ended by the next daemon, which, before it
//!   adopts any pane, reads the record each group left (`<runtime>/panes/<session>.adapter-group`)
//!   and kills the group — but only if a live member still carries the adapter's
//!   `BELFRY_SESSION` and `BELFRY_INCARNATION` in its environment. A group id alone could by
//!   then name an unrelated group; a member with that environment cannot be unrelated. A child
//!   that cleared its environment is not found this way, which is the limit of the sweep.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};

/// The file name suffix of a group record in the panes directory.
const RECORD_SUFFIX: &str = ".adapter-group";

/// A running adapter and its process group. Dropping it kills the group.
pub struct AdapterGroup {
    child: Child,
    /// The group id: the adapter's pid (it leads the group). `None` if the pid was unknown.
    pgid: Option<Pid>,
    record: PathBuf,
}

/// Who an adapter group belongs to: written to its record, matched against the environment
/// of its members by the next daemon's sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOwner {
    pub session: String,
    pub incarnation: String,
}

impl AdapterGroup {
    /// Starts `command` as the leader of a new process group and records the group in
    /// `panes_dir`. The command must set `BELFRY_SESSION` and `BELFRY_INCARNATION` to
    /// `owner`'s, as the sweep recognises the group by them.
    pub fn spawn(
        command: &mut Command,
        panes_dir: &Path,
        owner: &GroupOwner,
    ) -> std::io::Result<AdapterGroup> {
        let child = command.process_group(0).spawn()?;
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(Pid::from_raw);
        let record = panes_dir.join(format!("{}{RECORD_SUFFIX}", owner.session));
        if let Some(pgid) = pgid {
            // A record that cannot be written costs only the kill -9 sweep; the adapter runs.
            let text = format!(
                "{}\n{}\n{}\n",
                pgid.as_raw_nonzero(),
                owner.session,
                owner.incarnation
            );
            if let Err(err) = std::fs::write(&record, text) {
                tracing::warn!(
                    session = owner.session,
                    "cannot record the adapter's process group: {err}"
                );
            }
        }
        Ok(AdapterGroup {
            child,
            pgid,
            record,
        })
    }

    /// The adapter process itself.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// After the adapter has ended (its stdout closed): kills what is left of its group, then
    /// reaps the adapter and returns how it ended.
    pub async fn end(&mut self) -> Option<ExitStatus> {
        self.kill_group();
        self.child.wait().await.ok()
    }

    fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already empty) is the only expected error.
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
    }
}

impl Drop for AdapterGroup {
    fn drop(&mut self) {
        // Before the child is dropped: its kill-on-drop lets tokio reap it, and the group is
        // killed while the leader's pid still reserves the group id.
        self.kill_group();
        let _ = std::fs::remove_file(&self.record);
    }
}

/// The next daemon's sweep, run before it adopts any pane: kills every recorded adapter group
/// whose live members still carry their adapter's identity, and removes every record.
pub fn sweep_leftover_groups(panes_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(panes_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_record = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.ends_with(RECORD_SUFFIX));
        if !is_record {
            continue;
        }
        if let Some((pgid, owner)) = read_record(&path) {
            if group_has_member_of(pgid, &owner) {
                tracing::info!(
                    session = owner.session,
                    pgid = pgid.as_raw_nonzero().get(),
                    "ending the adapter group a killed daemon left behind"
                );
                let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}

fn read_record(path: &Path) -> Option<(Pid, GroupOwner)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let pgid = Pid::from_raw(lines.next()?.trim().parse::<i32>().ok()?)?;
    let session = lines.next()?.to_string();
    let incarnation = lines.next()?.to_string();
    Some((
        pgid,
        GroupOwner {
            session,
            incarnation,
        },
    ))
}

/// True if a live process in group `pgid` has `owner`'s session and incarnation in its
/// environment (`/proc/<pid>/stat` field 5 is the group id).
fn group_has_member_of(pgid: Pid, owner: &GroupOwner) -> bool {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    let session = format!("BELFRY_SESSION={}", owner.session);
    let incarnation = format!("BELFRY_INCARNATION={}", owner.incarnation);
    processes.flatten().any(|process| {
        let dir = process.path();
        let in_group = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|stat| process_group_of(&stat))
            == Some(pgid.as_raw_nonzero().get());
        in_group
            && std::fs::read(dir.join("environ")).is_ok_and(|environ| {
                let has = |wanted: &str| {
                    environ
                        .split(|&byte| byte == 0)
                        .any(|variable| variable == wanted.as_bytes())
                };
                has(&session) && has(&incarnation)
            })
    })
}

/// The process group id from a `/proc/<pid>/stat` line: `pid (comm) state ppid pgrp …`, where
/// `comm` may hold spaces and parentheses, so fields are counted after the last `)`.
fn process_group_of(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_group_is_read_after_the_command_name() {
        assert_eq!(
            process_group_of("42 (a) b (c)) S 1 4242 4242 0 -1"),
            Some(4242)
        );
        assert_eq!(process_group_of("garbage"), None);
    }

    #[test]
    fn own_group_is_found_only_with_the_owner_environment() {
        let me = rustix::process::getpgrp();
        let stranger = GroupOwner {
            session: "belfry-no-such-session".to_string(),
            incarnation: "none".to_string(),
        };
        assert!(!group_has_member_of(me, &stranger));
    }
}
