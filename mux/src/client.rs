//! A small blocking client for the daemon socket, used by the CLI: connect (starting the
//! daemon on demand), `hello`, then one request and one reply per call.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use belfry_pty::wire::PROTOCOL_VERSION;

/// Errors talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the belfry daemon at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the belfry daemon ({exe}): {reason}")]
    Start { exe: PathBuf, reason: String },
    #[error("connection to {path} failed: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} closed the connection without a reply")]
    Closed { path: PathBuf },
    #[error("reply from {path} is not JSON: {reason}")]
    BadReply { path: PathBuf, reason: String },
    /// The socket is served by another uid (SPEC §6.1); nothing was written to it.
    #[error(transparent)]
    Untrusted(belfry_pty::Error),
}

/// One connection to a belfry socket (the daemon's or a pane host's).
pub struct Client {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl Client {
    /// Connects to `path` without starting anything, checks that the server runs as our uid
    /// (or root), then says hello.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        // Before the first byte: the hello and every later request may carry the caller's
        // environment, so a server of another uid must not see any of it.
        belfry_pty::paths::check_server(path, &stream).map_err(ClientError::Untrusted)?;
        let writer = stream.try_clone().map_err(|source| ClientError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut client = Client {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
        };
        let hello = client.request(json!({"op": "hello", "versions": [PROTOCOL_VERSION]}))?;
        if hello.get("ok") != Some(&Value::Bool(true)) {
            return Err(ClientError::BadReply {
                path: path.to_path_buf(),
                reason: format!("hello refused: {hello}"),
            });
        }
        Ok(client)
    }

    /// Connects to the daemon at `path`, starting `belfry server` if nothing answers there.
    ///
    /// A daemon that dies as we connect (its socket takes the connection and then closes it
    /// unanswered) is waited out and replaced like a missing one.
    pub fn connect_or_start(path: &Path, exe: &Path) -> Result<Client, ClientError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut started: Option<std::process::Child> = None;
        loop {
            match Client::connect(path) {
                Ok(client) => {
                    reap_in_background(started);
                    return Ok(client);
                }
                Err(err) if Instant::now() >= deadline => {
                    reap_in_background(started);
                    return Err(err);
                }
                Err(ClientError::Connect { .. }) if started.is_none() => {
                    started = Some(start_daemon(path, exe)?);
                }
                Err(
                    err @ (ClientError::Connect { .. }
                    | ClientError::Closed { .. }
                    | ClientError::Io { .. }),
                ) => {
                    // A daemon we started that has already exited failed to start (for
                    // example because another daemon holds its state directory): say so
                    // now rather than after the whole deadline.
                    if let Some(child) = &mut started {
                        if let Ok(Some(status)) = child.try_wait() {
                            if !status.success() {
                                return Err(ClientError::Start {
                                    exe: exe.to_path_buf(),
                                    reason: format!(
                                        "`belfry server` for {} exited at start ({status}); \
                                         the reason is at the end of {} (last error \
                                         connecting: {err})",
                                        path.display(),
                                        belfry_pty::paths::log_dir().join("daemon.log").display()
                                    ),
                                });
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(other) => {
                    reap_in_background(started);
                    return Err(other);
                }
            }
        }
    }

    /// Sends one request (an `id` is added) and reads its reply.
    pub fn request(&mut self, mut request: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        if let Value::Object(map) = &mut request {
            map.entry("id").or_insert(json!(id));
        }
        self.send_line(&request)?;
        self.read_reply()
    }

    /// Writes one JSON line.
    pub fn send_line(&mut self, value: &Value) -> Result<(), ClientError> {
        let mut line = value.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|source| ClientError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Reads one JSON line (a reply or a streamed event).
    pub fn read_reply(&mut self) -> Result<Value, ClientError> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(|source| ClientError::Io {
                path: self.path.clone(),
                source,
            })?;
        if n == 0 {
            return Err(ClientError::Closed {
                path: self.path.clone(),
            });
        }
        serde_json::from_str(&line).map_err(|err| ClientError::BadReply {
            path: self.path.clone(),
            reason: err.to_string(),
        })
    }

    /// Gives the raw stream back (for attach, which switches to frames).
    pub fn into_parts(self) -> (BufReader<UnixStream>, UnixStream) {
        (self.reader, self.writer)
    }
}

/// Starts `exe server` in its own session, detached from this terminal.
fn start_daemon(socket: &Path, exe: &Path) -> Result<std::process::Child, ClientError> {
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
    cmd.spawn().map_err(|err| ClientError::Start {
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
