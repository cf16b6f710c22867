//! The one blocking client of belfry's sockets (the daemon's and the pane hosts'): connect
//! without ever blocking in `connect(2)`, check that the server runs as our uid (spec §6.1),
//! `hello`, then one request and one reply per call, typed ([`Client::call`]) or as JSON
//! ([`Client::request`]). The CLI (through `belfry_mux::client`, which adds starting the daemon
//! on demand), `belfry dispatch` and the benchmarks all use it.
//!
//! Every request has a deadline ([`crate::deadline::daemon_reply`], from its op, unless the
//! connection was opened with one of its own): a server that is stopped or hung gives
//! [`ClientError::Timeout`], naming its socket and pid, never a hang.
//!
//! The transport is a Unix stream either way: a connection to a socket ([`Client::connect`]),
//! or one end of a socket pair whose other end is a child process's stdin and stdout
//! ([`Client::over`]), which is how `belfry --host` speaks the same protocol through
//! `ssh … belfry proxy` (spec §6.2). A socket pair keeps the read and write deadlines of a
//! socket, which a pipe would not have.
//!
//! Version skew (spec §6.1): the hello's answer is kept, and an `unknown-op` reply to a
//! typed call is reworded to say which op the other side lacks and which build it runs, so a
//! client talking to an older daemon works for every op both know and says plainly what the
//! other one does not.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::Error as PtyError;

/// What went wrong talking to a belfry socket.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be connected to.
    #[error("cannot reach the belfry daemon at {path}: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// What `connect(2)` said.
        source: std::io::Error,
    },
    /// Reading or writing an open connection failed.
    #[error("connection to {path} failed: {source}")]
    Connection {
        /// The socket.
        path: PathBuf,
        /// What the read or write said.
        source: std::io::Error,
    },
    /// The peer closed the connection before it replied.
    #[error("{path} closed the connection without a reply")]
    Closed {
        /// The socket.
        path: PathBuf,
    },
    /// The peer's reply is not a JSON line, or not the reply the protocol says.
    #[error("reply from {path} is not JSON: {reason}")]
    BadReply {
        /// The socket.
        path: PathBuf,
        /// Why it did not parse.
        reason: String,
    },
    /// The peer did not answer within the request's deadline ([`crate::deadline`]).
    #[error(
        "{} did not answer {op:?} within {} s; it may be stopped or hung{}",
        describe_peer(path, *pid),
        after.as_secs(),
        pid.map(|pid| format!(" (`kill -CONT {pid}` resumes a stopped process)")).unwrap_or_default()
    )]
    Timeout {
        /// The socket.
        path: PathBuf,
        /// The pid serving it, if the socket's peer credentials named one.
        pid: Option<u32>,
        /// The request's op.
        op: String,
        /// The deadline that passed.
        after: Duration,
    },
    /// The socket is served by another uid (spec §6.1); nothing was written to it.
    #[error(transparent)]
    Untrusted(PtyError),
}

/// "the belfry process (pid N) serving PATH", for messages about an unresponsive peer.
fn describe_peer(path: &Path, pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("the belfry process (pid {pid}) serving {}", path.display()),
        None => format!("the belfry process serving {}", path.display()),
    }
}

use ClientError as Error;

/// Whatever must live as long as a connection made by [`Client::over`]: the child process at
/// the far end of the socket pair (an `ssh` client), ended when it is dropped.
pub type Keep = Box<dyn std::any::Any + Send>;

/// One connection to a belfry socket (the daemon's or a pane host's).
pub struct Client {
    /// The socket, or for a connection over a child process the name it is known by
    /// (`ssh:box`), named in every error.
    path: PathBuf,
    /// The pid that listens on `path` (from the socket's peer credentials), named in timeouts.
    peer_pid: Option<u32>,
    /// Overrides the per-op deadline of every request (see [`Client::connect_within`]).
    deadline: Option<Duration>,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// The server's answer to our hello: its build, named when it lacks an op.
    hello: Option<belfry_proto::reply::Hello>,
    /// Declared last so it is dropped last: the stream is closed first, and the far side sees
    /// end-of-file before its process is ended.
    keep: Option<Keep>,
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

    /// Like [`Client::connect_within`], but the connect is tried once: a server whose listen
    /// backlog is full (stopped while clients kept trying) is a [`ClientError::Timeout`] at
    /// once. For callers that must never be held up by a stopped server, such as a harness's
    /// hook waiting on `belfry dispatch`.
    pub fn connect_once(path: &Path, deadline: Duration) -> Result<Client, Error> {
        Client::open_within(path, Some(deadline), Duration::ZERO, true)
    }

    fn open(path: &Path, deadline: Option<Duration>) -> Result<Client, Error> {
        Client::open_within(
            path,
            deadline,
            deadline.unwrap_or(crate::deadline::DAEMON_QUICK),
            true,
        )
    }

    /// Connects within `connect_within`, checks the server, and says hello if `hello`.
    fn open_within(
        path: &Path,
        deadline: Option<Duration>,
        connect_within: Duration,
        hello: bool,
    ) -> Result<Client, Error> {
        let stream = connect_socket(path, connect_within)?;
        // Before the first byte: the hello and every later request may carry the caller's
        // environment, so a server of another uid must not see any of it.
        crate::paths::check_server(path, &stream).map_err(Error::Untrusted)?;
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
            hello: None,
            keep: None,
        };
        if hello {
            client.say_hello(deadline)?;
        }
        Ok(client)
    }

    /// Connects to `path` and sends our hello and `request` in one write, then reads both
    /// answers: one round trip where a hello and a request take two, which counts when the
    /// server is a pane host busy with a program's output (it answers between two turns of
    /// output). The request reaches the server before our hello's answer is seen, so it is
    /// sent naming the protocol it is written in (`protocol`): a server that refuses our hello
    /// refuses the request too, instead of carrying it out. Every wait is within `deadline`.
    pub fn connect_and_ask(
        path: &Path,
        deadline: Duration,
        mut request: Value,
    ) -> Result<(Client, Value), Error> {
        let mut client = Client::open_within(path, Some(deadline), deadline, false)?;
        let hello_id = client.next_id;
        let id = hello_id + 1;
        client.next_id += 2;
        if let Value::Object(map) = &mut request {
            map.entry("id").or_insert(json!(id));
            map.insert("protocol".into(), json!(crate::wire::PROTOCOL_VERSION));
        }
        let op = request["op"].as_str().unwrap_or_default().to_string();
        let hello = belfry_proto::Request::new(hello_id, belfry_proto::request::Hello::ours());
        let until = Instant::now().checked_add(deadline);
        let mut lines = hello.to_value().to_string();
        lines.push('\n');
        lines.push_str(&request.to_string());
        client.send_line_raw(lines, until, &op, deadline)?;
        let reply = client.read_line(until, "hello", deadline)?;
        let reply = client.parse(&reply)?;
        client.take_hello(&reply)?;
        let line = client.read_line(until, &op, deadline)?;
        let reply = client.parse(&line)?;
        Ok((client, reply))
    }

    /// Speaks the protocol over `stream`, one end of a socket pair whose other end is the
    /// stdin and stdout of a process that bridges to a belfry socket (`ssh … belfry proxy`,
    /// spec §6.2). `name` stands for the socket in errors. The hello waits at most
    /// `hello_within` (the far side may first have to connect and log in); later requests
    /// have their op's deadline. There is no peer-uid check here: the stream is our own, and
    /// the process at its other end checks the socket it connects to. `keep` lives as long as
    /// the client and is dropped after the stream is closed.
    pub fn over(
        stream: UnixStream,
        name: impl Into<PathBuf>,
        hello_within: Duration,
        keep: Keep,
    ) -> Result<Client, Error> {
        let path = name.into();
        let writer = stream.try_clone().map_err(|source| Error::Connection {
            path: path.clone(),
            source,
        })?;
        let mut client = Client {
            path,
            peer_pid: None,
            deadline: None,
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
            hello: None,
            keep: Some(keep),
        };
        client.say_hello(Some(hello_within))?;
        Ok(client)
    }

    /// Sends our hello within `within` (or the hello's own deadline) and keeps the answer.
    fn say_hello(&mut self, within: Option<Duration>) -> Result<(), Error> {
        let id = self.next_id;
        self.next_id += 1;
        let request = belfry_proto::Request::new(id, belfry_proto::request::Hello::ours());
        let own = within.unwrap_or_else(|| crate::deadline::daemon_reply(&request.op));
        let reply = self.exchange(&request.to_value(), "hello", own)?;
        self.take_hello(&reply)
    }

    /// Keeps the server's answer to our hello, or the error it is.
    fn take_hello(&mut self, reply: &Value) -> Result<(), Error> {
        let reply =
            belfry_proto::Reply::<belfry_proto::reply::Hello>::read(reply).map_err(|err| {
                Error::BadReply {
                    path: self.path.clone(),
                    reason: format!("hello: {err}"),
                }
            })?;
        match reply {
            belfry_proto::Reply::Ok(hello) => {
                self.hello = Some(hello);
                Ok(())
            }
            belfry_proto::Reply::Err(err) => Err(Error::BadReply {
                path: self.path.clone(),
                reason: format!(
                    "hello refused: {err} (this belfry is {} and speaks protocol {}..={})",
                    env!("CARGO_PKG_VERSION"),
                    crate::wire::MIN_PROTOCOL_VERSION,
                    crate::wire::PROTOCOL_VERSION
                ),
            }),
        }
    }

    /// The server's answer to our hello (its role, build and protocol version).
    pub fn hello(&self) -> Option<&belfry_proto::reply::Hello> {
        self.hello.as_ref()
    }

    /// Takes what keeps the far side of a [`Client::over`] connection alive, for a caller
    /// that goes on with the raw stream ([`Client::into_parts`]) and must keep it running.
    pub fn take_keep(&mut self) -> Option<Keep> {
        self.keep.take()
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
        let own = belfry_proto::Request::from_value(&request).map_or(
            crate::deadline::DAEMON_QUICK + crate::deadline::CLIENT_MARGIN,
            |parsed| crate::deadline::daemon_reply(&parsed.op),
        );
        self.exchange(&request, &op, own)
    }

    /// Writes one request line and reads its reply within the connection's deadline, or
    /// `own` (the op's) when the connection has none.
    fn exchange(&mut self, request: &Value, op: &str, own: Duration) -> Result<Value, Error> {
        let within = self.deadline.unwrap_or(own);
        // A deadline too far away to represent (a `wait` with a huge timeout) is no deadline.
        let deadline = Instant::now().checked_add(within);
        self.send_line(request, deadline, op, within)?;
        let line = self.read_line(deadline, op, within)?;
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
        self.send_line_raw(value.to_string(), deadline, op, within)
    }

    /// Writes `line` and a newline before `deadline`, in one write.
    fn send_line_raw(
        &mut self,
        mut line: String,
        deadline: Option<Instant>,
        op: &str,
        within: Duration,
    ) -> Result<(), Error> {
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
    pub fn into_parts(mut self) -> (BufReader<UnixStream>, UnixStream) {
        let _ = self.writer.set_read_timeout(None);
        let _ = self.writer.set_write_timeout(None);
        // A caller that wanted the far side kept took it first ([`Client::take_keep`]).
        drop(self.keep.take());
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
    let attempt = || -> Option<Result<UnixStream, Error>> {
        let socket = match rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        ) {
            Ok(socket) => socket,
            Err(err) => return Some(Err(connect_error(err.into()))),
        };
        match rustix::net::connect(&socket, &address) {
            Ok(()) => {
                let stream = UnixStream::from(socket);
                Some(
                    stream
                        .set_nonblocking(false)
                        .map(|()| stream)
                        .map_err(connect_error),
                )
            }
            // A full backlog: tried again until the deadline.
            Err(rustix::io::Errno::AGAIN) => None,
            Err(err) => Some(Err(connect_error(err.into()))),
        }
    };
    let tick = crate::retry::Backoff::constant(Duration::from_millis(10));
    crate::retry::poll_until_blocking(within, tick, attempt).unwrap_or_else(|| {
        Err(Error::Timeout {
            path: path.to_path_buf(),
            pid: None,
            op: "connect".into(),
            after: within,
        })
    })
}

/// Writes one request to the server at `path` and waits within `within` for its answer,
/// without reading what it says: for a request whose effect must be in place before the caller
/// goes on. One connect attempt (a full backlog is a timeout at once), the peer-uid check before
/// the first byte, no hello.
pub fn send_and_wait(
    path: &Path,
    request: &belfry_proto::Request,
    within: Duration,
) -> Result<(), Error> {
    Client::open_within(path, Some(within), Duration::ZERO, false)?
        .request(request.to_value())
        .map(drop)
}

/// A socket timeout shows up as `WouldBlock` (EAGAIN) on Linux and `TimedOut` elsewhere.
fn is_timeout(err: &std::io::Error) -> bool {
    matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Typed calls: the request is one of the protocol's ops and the reply is read into the body
/// that op answers with, so no caller picks fields out of a JSON value.
impl Client {
    /// Sends `op` and reads its reply as `T`, within the op's deadline (as [`Client::request`]).
    /// An error reply is `Ok(Reply::Err(..))`: the server answered. A reply that is not what
    /// the protocol says `T` is gives [`ClientError::BadReply`], naming the field.
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
        self.next_id += 1;
        // The op is typed already: its deadline comes from it, not from parsing it back.
        let request = belfry_proto::Request::new(id, op);
        let own = crate::deadline::daemon_reply(&request.op);
        let reply = self.exchange(&request.to_value(), request.op.name(), own)?;
        let reply = belfry_proto::Reply::read(&reply).map_err(|err| Error::BadReply {
            path: self.path.clone(),
            reason: err.to_string(),
        })?;
        Ok((id, self.name_missing_op(request.op.name(), reply)))
    }

    /// An `unknown-op` answer to an op this build knows means the server is another build
    /// (spec §6.1, version skew): the message says which op it lacks, which build it runs and
    /// which this one is, instead of listing what it does know.
    fn name_missing_op<T>(
        &self,
        op: &str,
        reply: belfry_proto::Reply<T>,
    ) -> belfry_proto::Reply<T> {
        match reply {
            belfry_proto::Reply::Err(mut err) if err.code == belfry_proto::ErrorCode::UnknownOp => {
                let (role, build) = match &self.hello {
                    Some(hello) => (hello.role.as_str(), hello.build.as_str()),
                    None => ("server", "an unknown build"),
                };
                err.message = format!(
                    "the {role} at {} (belfry {build}) does not know the op {op:?}, which this \
                     belfry ({}) sends: run the same belfry version on both sides, or use a \
                     command that needs only what it knows ({})",
                    self.path.display(),
                    env!("CARGO_PKG_VERSION"),
                    err.message
                );
                belfry_proto::Reply::Err(err)
            }
            other => other,
        }
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

    #[test]
    fn an_op_the_other_side_lacks_is_named_with_both_builds() {
        use belfry_proto::reply::DingState;
        use belfry_proto::request::DingStatus;
        use belfry_proto::{Reply, SessionName};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sock");
        // An older daemon: it answers the hello with its build, and an op it does not know
        // with `unknown-op` listing what it does know.
        let server = scripted_server(
            &path,
            vec![json!({"ok": false, "error": {"code": "unknown-op",
                "message": "unknown op \"ding.status\" (known: hello, list)"}})],
        );
        let mut client = Client::connect(&path).unwrap();
        assert_eq!(client.hello().map(|hello| hello.build.as_str()), Some("t"));
        let reply = client
            .call::<DingState>(DingStatus::of(SessionName::parse("w").unwrap()))
            .unwrap();
        let Reply::Err(err) = reply else {
            panic!("an unknown op read as a body");
        };
        assert_eq!(err.code, belfry_proto::ErrorCode::UnknownOp);
        for part in [
            "the daemon at",
            "(belfry t) does not know the op \"ding.status\"",
            &format!("this belfry ({})", env!("CARGO_PKG_VERSION")),
            "known: hello, list",
        ] {
            assert!(
                err.message.contains(part),
                "{part:?} not in {}",
                err.message
            );
        }
        server.join().unwrap();
    }
}
