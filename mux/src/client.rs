//! The CLI's client of the daemon: [`belfry_transport::client::Client`], the one blocking client of
//! belfry's sockets, plus [`connect_or_start`], which starts `belfry server` when nothing
//! answers at the daemon's socket.

use std::path::Path;
use std::time::{Duration, Instant};

pub use belfry_transport::client::{Client, ClientError};
use belfry_transport::retry::Backoff;

use crate::Error;

/// Connects to the daemon at `path`, starting `belfry server` if nothing answers there.
///
/// A daemon that dies as we connect (its socket takes the connection and then closes it
/// unanswered) is waited out and replaced like a missing one.
pub fn connect_or_start(path: &Path, exe: &Path) -> Result<Client, Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut started: Option<std::process::Child> = None;
    let mut retry = Backoff::constant(Duration::from_millis(5));
    loop {
        match Client::connect(path).map_err(Error::from) {
            Ok(client) => {
                reap_in_background(started);
                return Ok(client);
            }
            Err(err) if Instant::now() >= deadline => {
                reap_in_background(started);
                return Err(err);
            }
            Err(Error::Client(ClientError::Connect { .. })) if started.is_none() => {
                started = Some(start_daemon(path, exe)?);
            }
            Err(
                err @ Error::Client(
                    ClientError::Connect { .. }
                    | ClientError::Closed { .. }
                    | ClientError::Connection { .. },
                ),
            ) => {
                // A daemon we started that has already exited failed to start (for
                // example because another daemon holds its state directory): say so
                // now rather than after the whole deadline.
                if let Some(child) = &mut started {
                    if let Ok(Some(status)) = child.try_wait() {
                        if !status.success() {
                            return Err(Error::Start {
                                exe: exe.to_path_buf(),
                                reason: format!(
                                    "`belfry server` for {} exited at start ({status}); \
                                     the reason is at the end of {} (last error \
                                     connecting: {err})",
                                    path.display(),
                                    belfry_transport::paths::log_dir()
                                        .join("daemon.log")
                                        .display()
                                ),
                            });
                        }
                    }
                }
                std::thread::sleep(retry.pause());
            }
            Err(other) => {
                reap_in_background(started);
                return Err(other);
            }
        }
    }
}

/// Starts `exe server` in its own session, detached from this terminal.
fn start_daemon(socket: &Path, exe: &Path) -> Result<std::process::Child, Error> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("server")
        .env("BELFRY_SOCKET", socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid() is async-signal-safe and touches no memory of the parent; it only puts
    // the daemon in a session of its own so the caller's terminal hangup does not reach it.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
    cmd.spawn().map_err(|err| Error::Start {
        exe: exe.to_path_buf(),
        reason: err.to_string(),
    })
}

/// The daemon runs on; a short-lived reaper thread collects it if it exits at once (for
/// example because another daemon won the race for the socket).
fn reap_in_background(child: Option<std::process::Child>) {
    if let Some(mut child) = child {
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
}
