//! The child program's life: spawning it on the PTY (with the `TERM` it is given), watching it
//! end, stopping and restarting it, and the PTY's size and the model's clearing, which move the
//! revision as its output does. A file of its own because it is where a pane's incarnation
//! changes.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use super::clients::update_cropping;
use super::{default_signals, ExitStatus, Identity, Pane, PaneState};
use crate::retry::{poll_until, Backoff};
use crate::spec::new_incarnation;
use crate::wire::Frame;
use belfry_proto::event::{Event, Lifecycle};
use belfry_proto::Control;

impl Pane {
    pub(super) fn spawn_child(&self, incarnation: &str) -> crate::Result<tokio::process::Child> {
        let argv = &self.spec.argv;
        let Some(program) = argv.first() else {
            return Err(crate::Error::invalid(
                "empty command: give at least a program name",
            ));
        };
        let mut cmd = pty_process::Command::new(program)
            .args(&argv[1..])
            .args(&self.spec.extra_args);
        if !self.spec.base_env.is_empty() {
            cmd = cmd.env_clear().envs(&self.spec.base_env);
        }
        cmd = cmd
            .env(
                "TERM",
                pane_term(&self.spec.base_env, self.spec.term.as_deref()),
            )
            .envs(&self.spec.env)
            .envs(&self.spec.extra_env);
        for (key, value) in &self.child_env {
            cmd = cmd.env(key, value);
        }
        cmd = cmd
            .env(belfry_proto::env::INCARNATION, incarnation)
            .env(belfry_proto::env::GENERATION, &self.generation);
        if let Some(cwd) = &self.spec.cwd {
            cmd = cmd.current_dir(cwd);
        }
        // The program starts with every signal at its default action and none blocked,
        // whatever the process that started belfry ignored: a signal ignored before an exec
        // stays ignored after it (`nohup` ignores SIGHUP), and a pane program ignoring SIGHUP
        // would outlive the hang-up that ends a pane until the SIGKILL after the grace
        // period, as tmux's panes reset theirs.
        // SAFETY: `default_signals` runs in the child between fork and exec; it makes only
        // raw system calls (rt_sigaction, rt_sigprocmask), async-signal-safe, and allocates
        // nothing.
        let mut cmd = unsafe { cmd.pre_exec(default_signals) };
        // The pane host's own pty_process::Command is not kill_on_drop: the host decides.
        cmd.spawn_borrowed(&self.pts)
            .map_err(|err| crate::Error::Spawn {
                argv: argv.clone(),
                source: match err {
                    pty_process::Error::Io(io) => io,
                    other => std::io::Error::other(other.to_string()),
                },
            })
    }

    /// Waits for the child to end and records it. Stale waits (after a restart) are ignored.
    pub async fn watch_child(
        self: Arc<Self>,
        mut child: tokio::process::Child,
        incarnation: String,
    ) {
        let status = child.wait().await;
        let exit = match status {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                ExitStatus {
                    code: status.code(),
                    signal: status.signal(),
                }
            }
            Err(err) => {
                tracing::error!("cannot wait for the child: {err}");
                ExitStatus {
                    code: None,
                    signal: None,
                }
            }
        };
        let event = {
            let mut st = self.state.lock();
            if st.incarnation != incarnation {
                return;
            }
            self.drain_pending(&mut st);
            st.exited = Some(exit);
            st.bump(&self.revision_tx);
            st.broadcast(&Frame::Control(Control::Exited(exit)));
            let mut ended = Vec::new();
            st.status.exited(&mut ended);
            let event = Event::exit(&self.spec.session, &incarnation, st.revision, exit);
            st.exit_event = Some(event.clone());
            (event, ended, st.revision)
        };
        let (event, ended, revision) = event;
        tracing::info!("child exited: {event:?}");
        let _ = self.events.send(event);
        self.publish_status_changes(revision, ended);
    }

    /// Ends the current child (SIGHUP to its process group, SIGKILL after a grace period).
    pub async fn stop_child(&self) {
        let pid = {
            let st = self.state.lock();
            if st.exited.is_some() {
                return;
            }
            st.child_pid
        };
        let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
            return;
        };
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::HUP);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::HUP);
        let exited = || self.state.lock().exited.map(|_| ());
        let tick = Backoff::constant(Duration::from_millis(10));
        if poll_until(Duration::from_millis(1500), tick.clone(), exited)
            .await
            .is_some()
        {
            return;
        }
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        let _ = poll_until(Duration::from_millis(2000), tick, exited).await;
    }

    /// Restarts the child: a new process, a new incarnation, the revision continuing.
    ///
    /// It never waits for the input lock: a transaction in flight (perhaps stuck on a program
    /// that stopped reading) is aborted, and transactions that start meanwhile wait for the
    /// restart to finish, so none straddles it. Input the old child never read is discarded
    /// before the new child starts, so it cannot receive bytes meant for its predecessor.
    pub async fn restart(self: &Arc<Self>) -> crate::Result<Identity> {
        let _one_at_a_time = self.restart_lock.lock().await;
        {
            let st = self.state.lock();
            self.restarting.send_replace(true);
            self.abort_locked(&st, "restart");
        }
        let started = self.replace_child().await;
        let identity = {
            let mut st = self.state.lock();
            self.restarting.send_replace(false);
            let (child, incarnation) = started?;
            st.incarnation = incarnation.clone();
            st.child_pid = child.id().unwrap_or(0);
            st.exited = None;
            st.exit_event = None;
            st.bump(&self.revision_tx);
            // A new program has reported nothing yet: what the old one said, even its `done`
            // or `error`, is not said of this one.
            let mut forgotten = Vec::new();
            st.status.restarted(&mut forgotten);
            let identity = self.identity_of(&st);
            tokio::spawn(Arc::clone(self).watch_child(child, incarnation));
            (identity, forgotten)
        };
        let (identity, forgotten) = identity;
        let _ = self.events.send(Event::Lifecycle(Lifecycle {
            incarnation: Some(identity.incarnation.clone()),
            revision: Some(identity.revision),
            ..Lifecycle::new(&self.spec.session, "restart")
        }));
        self.publish_status_changes(identity.revision, forgotten);
        Ok(identity)
    }

    /// Stops the current child, discards its unread input and starts the new one.
    async fn replace_child(&self) -> crate::Result<(tokio::process::Child, String)> {
        self.stop_child().await;
        // TCIFLUSH on the slave drops what was written to the PTY but not yet read by the old
        // child (an aborted paste, for example): its flip buffer and line discipline buffer.
        rustix::termios::tcflush(&self.pts, rustix::termios::QueueSelector::IFlush)
            .map_err(|err| crate::Error::Io(err.into()))?;
        let incarnation = new_incarnation();
        let child = self.spawn_child(&incarnation)?;
        Ok((child, incarnation))
    }

    /// Resizes the PTY and the model; the revision moves.
    pub fn resize(&self, rows: u16, cols: u16) -> crate::Result<u64> {
        let mut st = self.state.lock();
        self.resize_locked(&mut st, rows, cols)?;
        Ok(st.revision)
    }

    pub(super) fn resize_locked(
        &self,
        st: &mut PaneState,
        rows: u16,
        cols: u16,
    ) -> crate::Result<()> {
        belfry_proto::Size::new(u64::from(rows), u64::from(cols))
            .map_err(|err| crate::Error::invalid(err.to_string()))?;
        let winsize = rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(self.master.get_ref(), winsize)
            .map_err(|err| crate::Error::Io(err.into()))?;
        st.screen.resize(rows, cols);
        st.size = (rows, cols);
        st.bump(&self.revision_tx);
        update_cropping(st);
        Ok(())
    }

    /// Clears the screen model and its history; the revision moves.
    pub fn clear(&self) -> u64 {
        let mut st = self.state.lock();
        st.screen.clear();
        st.bump(&self.revision_tx);
        st.broadcast(&Frame::data(b"\x1b[H\x1b[2J\x1b[3J"));
        st.revision
    }

    /// The foreground process group of the PTY and whether it is the child itself.
    pub fn foreground(&self, child_pid: u32) -> Option<belfry_proto::reply::Foreground> {
        let pgid = rustix::termios::tcgetpgrp(self.master.get_ref().as_fd()).ok()?;
        let pgid = pgid.as_raw_nonzero().get();
        Some(belfry_proto::reply::Foreground {
            pgid,
            is_leader: pgid as u32 == child_pid,
        })
    }
}

/// The `TERM` the child starts with (before the declared `env`, which may override it): the
/// spawning client's own `TERM` when it names a terminal the screen model and the attach
/// redraw speak (the xterm, tmux and screen families), so the keys an attached terminal of that
/// kind sends (Home, End, function keys) are the ones the program's terminfo expects; else
/// `xterm-256color`, what the model emulates. A client on the Linux console or a terminal with
/// its own key encodings gets `xterm-256color` and may set `--env TERM=…` (docs/attach.md).
///
/// A pane started from another machine has no `base_env`; the client's `TERM` comes as `term`
/// instead (issue 46: such panes always got `xterm-256color`, so Home and End did nothing in
/// `less` in a remote pane started from tmux).
fn pane_term<'a>(
    base_env: &'a std::collections::BTreeMap<String, String>,
    term: Option<&'a str>,
) -> &'a str {
    match base_env.get("TERM").map(String::as_str).or(term) {
        Some(term)
            if ["xterm", "tmux", "screen"].iter().any(|family| {
                term.strip_prefix(family).is_some_and(|rest| {
                    rest.is_empty()
                        || (rest.starts_with(['-', '.'])
                            && rest
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-.+_".contains(&b)))
                })
            }) =>
        {
            term
        }
        _ => "xterm-256color",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panes_term_follows_the_clients_when_the_model_speaks_it() {
        let term = |value: Option<&str>| {
            let env = value
                .map(|v| [("TERM".to_string(), v.to_string())].into())
                .unwrap_or_default();
            pane_term(&env, None).to_string()
        };
        for kept in [
            "xterm",
            "xterm-256color",
            "xterm-kitty",
            "tmux-256color",
            "screen",
            "screen.xterm-256color",
        ] {
            assert_eq!(term(Some(kept)), kept);
        }
        for replaced in [
            None,
            Some("linux"),
            Some("dumb"),
            Some("vt100"),
            Some("xtermx"),
            Some(""),
        ] {
            assert_eq!(term(replaced), "xterm-256color", "{replaced:?}");
        }
    }
}
