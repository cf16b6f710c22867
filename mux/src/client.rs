//! A small blocking client for the daemon socket, used by the CLI: connect (starting the
//! daemon on demand), `hello`, then one request and one reply per call.
//!
//! Every request has a deadline ([`crate::deadline::daemon_reply`], from its op): a daemon that
//! is stopped or hung gives [`Error::Timeout`], naming its socket and pid, never a hang.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use belfry_pty::wire::PROTOCOL_VERSION;

use crate::Error;

/// One connection to a belfry socket (the daemon's or a pane host's).
pub struct Client {
    path: PathBuf,
    /// The pid that listens on `path` (from the socket's peer credentials), named in timeouts.
    peer_pid: Option<u32>,
    /// Overrides the per-op deadline of every request (see [`Client::connect_within`]).
    deadline: Option<Duration>,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl Client {
    /// Connects to `path` without starting anything, checks that the server runs as our uid
    /// (or root), then says hello.
    pub fn connect(path: &Path) -> Result<Client, Error> {
        Client::open(path, None)
    }

    /// Like [`Client::connect`], but the hello and every request wait at most `deadline`
    /// (for best-effort requests, such as a nudge, that must not delay their caller).
    pub fn connect_within(path: &Path, deadline: Duration) -> Result<Client, Error> {
        Client::open(path, Some(deadline))
    }

    fn open(path: &Path, deadline: Option<Duration>) -> Result<Client, Error> {
        let stream = connect_socket(path, deadline.unwrap_or(crate::deadline::DAEMON_QUICK))?;
        // Before the first byte: the hello and every later request may carry the caller's
        // environment, so a server of another uid must not see any of it.
        belfry_pty::paths::check_server(path, &stream).map_err(Error::Untrusted)?;
        // The listener's credentials are recorded at connect time, so this works even while
        // the daemon is stopped and has not accepted the connection yet.
        let peer_pid = rustix::net::sockopt::socket_peercred(&stream)
            .ok()
            .map(|cred| cred.pid.as_raw_nonzero().get() as u32);
        let writer = stream.try_clone().map_err(|source| Error::Connection {
            path: path.to_path_buf(),
            source,
        })?;
        let mut client = Client {
            path: path.to_path_buf(),
            peer_pid,
            deadline,
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
        };
        let hello = client.request(json!({"op": "hello", "versions": [PROTOCOL_VERSION]}))?;
        if hello.get("ok") != Some(&Value::Bool(true)) {
            return Err(Error::BadReply {
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
    pub fn connect_or_start(path: &Path, exe: &Path) -> Result<Client, Error> {
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
                Err(Error::Connect { .. }) if started.is_none() => {
                    started = Some(start_daemon(path, exe)?);
                }
                Err(
                    err @ (Error::Connect { .. } | Error::Closed { .. } | Error::Connection { .. }),
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

    /// The pid serving this connection's socket, if the kernel told us.
    pub fn peer_pid(&self) -> Option<u32> {
        self.peer_pid
    }

    /// Sends one request (an `id` is added) and reads its reply, within the op's deadline
    /// ([`crate::deadline::daemon_reply`]).
    pub fn request(&mut self, mut request: Value) -> Result<Value, Error> {
        let id = self.next_id;
        self.next_id += 1;
        if let Value::Object(map) = &mut request {
            map.entry("id").or_insert(json!(id));
        }
        let op = request["op"].as_str().unwrap_or_default().to_string();
        // A request that does not parse is refused by the daemon at once.
        let within = self.deadline.unwrap_or_else(|| {
            belfry_proto::Request::from_value(&request).map_or(
                crate::deadline::DAEMON_QUICK + crate::deadline::CLIENT_MARGIN,
                |parsed| crate::deadline::daemon_reply(&parsed.op),
            )
        });
        // A deadline too far away to represent (a `wait` with a huge timeout) is no deadline.
        let deadline = Instant::now().checked_add(within);
        self.send_line(&request, deadline, &op, within)?;
        let line = self.read_line(deadline, &op, within)?;
        self.parse(&line)
    }

    /// Reads the next streamed event of a subscription. Events come whenever something happens,
    /// so there is no deadline here: the subscription's reply had one.
    pub fn read_event(&mut self) -> Result<Value, Error> {
        let line = self.read_line(None, "subscribe", Duration::ZERO)?;
        self.parse(&line)
    }

    fn parse(&self, line: &[u8]) -> Result<Value, Error> {
        serde_json::from_slice(line).map_err(|err| Error::BadReply {
            path: self.path.clone(),
            reason: err.to_string(),
        })
    }

    fn timeout(&self, op: &str, after: Duration) -> Error {
        Error::Timeout {
            path: self.path.clone(),
            pid: self.peer_pid,
            op: op.to_string(),
            after,
        }
    }

    fn io_error(&self, source: std::io::Error) -> Error {
        Error::Connection {
            path: self.path.clone(),
            source,
        }
    }

    /// Time left until `deadline`, or the timeout error once it has passed.
    fn left(
        &self,
        deadline: Option<Instant>,
        op: &str,
        within: Duration,
    ) -> Result<Option<Duration>, Error> {
        match deadline {
            None => Ok(None),
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Ok(Some(left)),
                _ => Err(self.timeout(op, within)),
            },
        }
    }

    /// Writes one JSON line before `deadline`.
    fn send_line(
        &mut self,
        value: &Value,
        deadline: Option<Instant>,
        op: &str,
        within: Duration,
    ) -> Result<(), Error> {
        let mut line = value.to_string();
        line.push('\n');
        let left = self.left(deadline, op, within)?;
        self.writer
            .set_write_timeout(left)
            .map_err(|err| self.io_error(err))?;
        match self.writer.write_all(line.as_bytes()) {
            Ok(()) => Ok(()),
            Err(err) if is_timeout(&err) => Err(self.timeout(op, within)),
            Err(err) => Err(self.io_error(err)),
        }
    }

    /// Reads one line before `deadline`. Each read gets only the time that is left, so a peer
    /// that trickles bytes cannot stretch the deadline.
    fn read_line(
        &mut self,
        deadline: Option<Instant>,
        op: &str,
        within: Duration,
    ) -> Result<Vec<u8>, Error> {
        let mut line = Vec::new();
        loop {
            let left = self.left(deadline, op, within)?;
            self.reader
                .get_ref()
                .set_read_timeout(left)
                .map_err(|err| self.io_error(err))?;
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) if is_timeout(&err) => return Err(self.timeout(op, within)),
                Err(err) => return Err(self.io_error(err)),
            };
            if available.is_empty() {
                return Err(Error::Closed {
                    path: self.path.clone(),
                });
            }
            match available.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    line.extend_from_slice(&available[..end]);
                    self.reader.consume(end + 1);
                    return Ok(line);
                }
                None => {
                    let n = available.len();
                    line.extend_from_slice(available);
                    self.reader.consume(n);
                }
            }
        }
    }

    /// Gives the raw stream back (for attach, which switches to frames), with no deadlines
    /// left on it: an attached pane may be quiet for hours.
    pub fn into_parts(self) -> (BufReader<UnixStream>, UnixStream) {
        let _ = self.writer.set_read_timeout(None);
        let _ = self.writer.set_write_timeout(None);
        (self.reader, self.writer)
    }
}

/// Connects to `path` within `within`.
///
/// A blocking connect(2) to a listener whose backlog is full (a daemon stopped for a long time
/// while clients kept trying) waits indefinitely; a non-blocking one fails with EAGAIN at once,
/// so it is retried until the deadline instead.
fn connect_socket(path: &Path, within: Duration) -> Result<UnixStream, Error> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let connect_error = |source: std::io::Error| Error::Connect {
        path: path.to_path_buf(),
        source,
    };
    let address = SocketAddrUnix::new(path).map_err(|err| connect_error(err.into()))?;
    let deadline = Instant::now().checked_add(within);
    loop {
        let socket = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|err| connect_error(err.into()))?;
        match rustix::net::connect(&socket, &address) {
            Ok(()) => {
                let stream = UnixStream::from(socket);
                stream.set_nonblocking(false).map_err(connect_error)?;
                return Ok(stream);
            }
            Err(rustix::io::Errno::AGAIN) => {
                if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                    return Err(Error::Timeout {
                        path: path.to_path_buf(),
                        pid: None,
                        op: "connect".into(),
                        after: within,
                    });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(err) => return Err(connect_error(err.into())),
        }
    }
}

/// A socket timeout shows up as `WouldBlock` (EAGAIN) on Linux and `TimedOut` elsewhere.
fn is_timeout(err: &std::io::Error) -> bool {
    matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
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

/// Typed calls: the request is one of the protocol's ops and the reply is read into the body
/// that op answers with, so no caller picks fields out of a JSON value.
impl Client {
    /// Sends `op` and reads its reply as `T`, within the op's deadline (as [`Client::request`]).
    /// An error reply is `Ok(Reply::Err(..))`: the server answered. A reply that is not what
    /// the protocol says `T` is gives [`Error::BadReply`], naming the field.
    pub fn call<T: serde::de::DeserializeOwned>(
        &mut self,
        op: impl Into<belfry_proto::Op>,
    ) -> Result<belfry_proto::Reply<T>, Error> {
        self.call_numbered(op).map(|(_, reply)| reply)
    }

    /// Like [`Client::call`], also giving the id the request carried (and its reply echoed),
    /// for a caller that shows the whole reply.
    pub fn call_numbered<T: serde::de::DeserializeOwned>(
        &mut self,
        op: impl Into<belfry_proto::Op>,
    ) -> Result<(u64, belfry_proto::Reply<T>), Error> {
        let id = self.next_id;
        let reply = self.request(belfry_proto::Request::new(id, op).to_value())?;
        let reply = belfry_proto::Reply::read(&reply).map_err(|err| Error::BadReply {
            path: self.path.clone(),
            reason: err.to_string(),
        })?;
        Ok((id, reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_that_never_answers_times_out_naming_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("silent.sock");
        // A real listening socket that never accepts: like a stopped daemon, the kernel takes
        // the connection and the hello, and nothing ever answers.
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let started = Instant::now();
        let err = match Client::connect_within(&path, Duration::from_millis(300)) {
            Ok(_) => panic!("a silent listener answered"),
            Err(err) => err,
        };
        assert!(started.elapsed() < Duration::from_secs(3), "{err}");
        let message = err.to_string();
        let pid = std::process::id();
        assert!(
            matches!(err, Error::Timeout { pid: Some(p), .. } if p == pid),
            "{message}"
        );
        assert!(message.contains(&format!("pid {pid}")), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("\"hello\""), "{message}");
    }

    #[test]
    fn a_listener_with_a_full_backlog_times_out_instead_of_blocking_connect() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // Fill the backlog of a listener that never accepts, as clients of a long-stopped
        // daemon do; a further blocking connect(2) would wait forever.
        let mut held = Vec::new();
        loop {
            match connect_socket(&path, Duration::ZERO) {
                Ok(stream) => held.push(stream),
                Err(Error::Timeout { .. }) => break,
                Err(err) => panic!("unexpected error filling the backlog: {err}"),
            }
            assert!(held.len() < 100_000, "the backlog never filled");
        }
        let started = Instant::now();
        let err = match Client::connect_within(&path, Duration::from_millis(300)) {
            Ok(_) => panic!("connected to a full backlog"),
            Err(err) => err,
        };
        assert!(started.elapsed() < Duration::from_secs(3), "{err}");
        let message = err.to_string();
        assert!(message.contains("\"connect\""), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
    }

    /// A server on `path` that answers the hello, then each later request with the next of
    /// `replies`, and hands back the requests it read.
    fn scripted_server(path: &Path, replies: Vec<Value>) -> std::thread::JoinHandle<Vec<Value>> {
        let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut seen = Vec::new();
            let hello = json!({"ok": true, "version": 1, "role": "daemon", "build": "t"});
            for reply in std::iter::once(hello).chain(replies) {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let request: Value = serde_json::from_str(&line).unwrap();
                let mut reply = reply;
                reply["id"] = request["id"].clone();
                writeln!(writer, "{reply}").unwrap();
                seen.push(request);
            }
            seen
        })
    }

    #[test]
    fn a_typed_call_sends_the_op_and_reads_its_body_or_names_the_bad_field() {
        use belfry_proto::reply::Killed;
        use belfry_proto::request::Kill;
        use belfry_proto::{Reply, SessionName};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let server = scripted_server(
            &path,
            vec![
                json!({"ok": true, "killed": "w"}),
                json!({"ok": false, "error": {"code": "not-found", "message": "no pane"}}),
                json!({"ok": true}),
            ],
        );
        let mut client = Client::connect(&path).unwrap();
        let kill = || Kill::of(SessionName::parse("w").unwrap());
        assert_eq!(
            client.call::<Killed>(kill()).unwrap(),
            Reply::Ok(Killed { killed: "w".into() })
        );
        let Reply::Err(err) = client.call::<Killed>(kill()).unwrap() else {
            panic!("an error reply read as a body");
        };
        assert_eq!(err.code, belfry_proto::ErrorCode::NotFound);
        let err = client.call::<Killed>(kill()).unwrap_err();
        assert!(matches!(err, Error::BadReply { .. }), "{err}");
        assert!(
            err.to_string().contains("missing field \"killed\""),
            "{err}"
        );
        let seen = server.join().unwrap();
        assert_eq!(seen[1], json!({"id": 2, "op": "kill", "session": "w"}));
        assert_eq!(seen[3]["id"], 4);
    }
}
