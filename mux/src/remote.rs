//! Reaching a belfry on another machine (spec §6.2): belfry adds no network protocol, no
//! listener and no authentication of its own. A remote daemon or pane host is reached by
//! running `ssh -T [-p PORT] DEST belfry proxy [--pane NAME]` and speaking the usual NDJSON
//! protocol (and, for attach, its binary frames) over that process's stdin and stdout; SSH
//! authenticates, encrypts and picks the user, and the far side's `belfry proxy` connects to
//! its own sockets with the same peer-uid rule as any local client.
//!
//! This module owns the ssh side of that: where a host is ([`Host`], `[user@]box[:port]`, and
//! the `hosts` aliases of the user's config, [`HostsConfig`]), how ssh is run ([`Ssh`]: the
//! `ssh` on `PATH` or an argv given by the user, never a shell on this side), the process at
//! the far end of the socket pair ([`SshChild`], ended and reaped when dropped), and what a
//! failed connection means in words ([`RemoteError`]: unreachable, no belfry installed there,
//! no answer within the connect timeout). Every wait has a deadline: the connection's hello
//! waits at most the connect timeout, and every later request its op's own deadline.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use belfry_proto::SessionName;
use belfry_transport::client::{Client, ClientError};

/// How long a connection may take, ssh's own connect and login included, unless told.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of ssh's stderr is kept to explain a failure: its last lines are what matter.
const STDERR_KEPT: usize = 16 * 1024;

/// How long an ssh that lost its connection gets to exit and say why before it is ended.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What went wrong reaching another machine.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A `--host` value (or an address's host part) that is not `[user@]box[:port]`.
    #[error("host {given:?} is not [user@]box[:port]: {reason}")]
    BadHost {
        /// The value as given.
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--ssh-command` that is not an argv.
    #[error("--ssh-command {given:?}: {reason}")]
    BadSshCommand {
        /// The value as given.
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The ssh program could not be started.
    #[error("cannot run {program:?} to reach {host}: {source}")]
    SshNotRun {
        /// The program (the first word of the ssh command).
        program: String,
        /// The host it was to reach.
        host: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// ssh itself failed (exit 255): no route, refused, unknown host key, authentication.
    #[error("cannot reach {host} over ssh: {reason}")]
    Unreachable {
        /// The host.
        host: String,
        /// ssh's own last words.
        reason: String,
    },
    /// The far side's shell found no `belfry` (exit 127, "command not found").
    #[error(
        "belfry is not installed on {host} (or not on the PATH of a non-interactive ssh \
         session there): install it, or put it on that PATH ({reason})"
    )]
    NotInstalled {
        /// The host.
        host: String,
        /// The far side's words.
        reason: String,
    },
    /// Nothing answered within the connect timeout (ssh still connecting or logging in, or a
    /// far side that never speaks).
    #[error(
        "{host} did not answer within {} s (ssh was still connecting or logging in{}); \
         check the host, or give a longer --connect-timeout",
        seconds(*after),
        stderr_note(reason)
    )]
    NoAnswer {
        /// The host.
        host: String,
        /// The connect timeout that passed.
        after: Duration,
        /// What ssh had said by then, if anything.
        reason: String,
    },
    /// ssh connected but the far side ended before belfry answered: the far belfry's own
    /// error, such as a daemon that cannot start there.
    #[error(
        "belfry on {host} ended before it answered ({status}){}",
        stderr_note(reason)
    )]
    Ended {
        /// The host.
        host: String,
        /// How ssh exited.
        status: String,
        /// The far side's last words.
        reason: String,
    },
    /// The user config naming hosts could not be read or is not valid.
    #[error("{0}")]
    Config(String),
}

/// `after` in seconds for a message: whole when it is within a twentieth of a second of
/// whole, else to a tenth (`10.092637359` is `10.1`).
fn seconds(after: Duration) -> String {
    let secs = after.as_secs_f64();
    if (secs - secs.round()).abs() < 0.05 {
        format!("{}", secs.round())
    } else {
        format!("{secs:.1}")
    }
}

fn stderr_note(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

/// An ssh destination: `[user@]box`, and a port when not ssh's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// What ssh is given as its destination (`user@box` or `box`; a `~/.ssh/config` alias
    /// works as it does for ssh).
    pub destination: String,
    /// `-p PORT`, when given.
    pub port: Option<u16>,
}

impl Host {
    /// Parses `[user@]box[:port]` against a strict grammar, before ssh or any shell sees it.
    ///
    /// The user and a box name are letters, digits, `.`, `-` and `_`, neither starting with
    /// `-` (ssh would read an option); a box may instead be an IPv6 address in brackets
    /// (`[::1]:2222`, `[fe80::1%eth0]`); the port is 1 to 65535 in decimal digits. Anything
    /// else is refused with the value named: ssh hands its destination to `ProxyCommand`,
    /// `Match exec` and `%h` expansions that a shell reads, so `a;touch x`, `$(x)`, a quote, a
    /// space or a newline must never reach it, whatever this side's argv quoting does.
    pub fn parse(given: &str) -> Result<Host, RemoteError> {
        let bad = |reason: String| RemoteError::BadHost {
            given: given.to_owned(),
            reason,
        };
        if given.is_empty() {
            return Err(bad("it is empty".to_owned()));
        }
        let (user, rest) = match given.split_once('@') {
            Some((user, rest)) => (Some(user), rest),
            None => (None, given),
        };
        if let Some(user) = user {
            check_word(user, "the user before '@'").map_err(bad)?;
        }
        let (name, port) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (inner, after) = bracketed
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address in '[' has no ']'".to_owned()))?;
            check_ipv6(inner).map_err(bad)?;
            let port = match after {
                "" => None,
                after => Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| bad("after ']' only :PORT may follow".to_owned()))?,
                ),
            };
            (inner, port)
        } else {
            let (name, port) = match rest.split_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (rest, None),
            };
            check_word(name, "the box name").map_err(bad)?;
            (name, port)
        };
        let port = match port {
            None => None,
            Some(port) => Some(parse_port(port).map_err(bad)?),
        };
        let destination = match user {
            Some(user) => format!("{user}@{name}"),
            None => name.to_owned(),
        };
        Ok(Host { destination, port })
    }
}

/// Checks a user or box name: one or more of `[A-Za-z0-9._-]`, not starting with `-`.
fn check_word(word: &str, what: &str) -> Result<(), String> {
    if word.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if let Some(c) = word.chars().find(|&c| !is_name_char(c)) {
        return Err(format!(
            "{what} holds {c:?}; only letters, digits, '.', '-' and '_' are allowed"
        ));
    }
    if word.starts_with('-') {
        return Err(format!(
            "{what} starts with '-', which ssh would read as an option"
        ));
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
}

/// Checks what is between the brackets: an IPv6 address, with an optional `%zone` of name
/// characters (a link-local address names its interface).
fn check_ipv6(inner: &str) -> Result<(), String> {
    let (address, zone) = match inner.split_once('%') {
        Some((address, zone)) => (address, Some(zone)),
        None => (inner, None),
    };
    if address.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(format!("{:?} in brackets is not an IPv6 address", address));
    }
    if let Some(zone) = zone {
        check_word(zone, "the IPv6 zone after '%'")?;
    }
    Ok(())
}

/// A port of decimal digits only (no sign, no spaces), 1 to 65535.
fn parse_port(port: &str) -> Result<u16, String> {
    let digits = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    match port.parse::<u16>() {
        Ok(number) if digits && number > 0 => Ok(number),
        _ => Err(format!("port {port:?} is not 1..=65535")),
    }
}

/// As it is given: `[user@]box[:port]`, an IPv6 box in brackets (`[::1]:2222`), so what is
/// shown reads back as the same host.
impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (user, name) = match self.destination.rsplit_once('@') {
            Some((user, name)) => (Some(user), name),
            None => (None, self.destination.as_str()),
        };
        if let Some(user) = user {
            write!(f, "{user}@")?;
        }
        if name.contains(':') {
            write!(f, "[{name}]")?;
        } else {
            f.write_str(name)?;
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// How ssh is run: the program and its own arguments, and the connect timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssh {
    /// The ssh command as an argv (`["ssh"]`, or `["ssh", "-F", "/x/config"]`).
    pub argv: Vec<String>,
    /// How long a connection may take to answer, ssh's connect and login included.
    pub connect_timeout: Duration,
}

impl Default for Ssh {
    fn default() -> Self {
        Ssh {
            argv: vec!["ssh".to_owned()],
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl Ssh {
    /// Splits `--ssh-command` into an argv the way a shell splits words (spaces, `'…'`,
    /// `"…"`, `\`), with nothing expanded and nothing run by a shell.
    pub fn parse_command(given: &str) -> Result<Vec<String>, RemoteError> {
        let bad = |reason: &str| RemoteError::BadSshCommand {
            given: given.to_owned(),
            reason: reason.to_owned(),
        };
        let mut words = Vec::new();
        let mut word: Option<String> = None;
        let mut chars = given.chars();
        while let Some(c) = chars.next() {
            match c {
                c if c.is_whitespace() => {
                    if let Some(done) = word.take() {
                        words.push(done);
                    }
                }
                '\'' => {
                    let current = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(c) => current.push(c),
                            None => return Err(bad("a ' is not closed")),
                        }
                    }
                }
                '"' => {
                    let current = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') => match chars.next() {
                                Some(c) => current.push(c),
                                None => return Err(bad("it ends with a \\")),
                            },
                            Some(c) => current.push(c),
                            None => return Err(bad("a \" is not closed")),
                        }
                    }
                }
                '\\' => match chars.next() {
                    Some(c) => word.get_or_insert_with(String::new).push(c),
                    None => return Err(bad("it ends with a \\")),
                },
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        words.extend(word);
        if words.is_empty() {
            return Err(bad("it names no program"));
        }
        Ok(words)
    }

    /// An ssh command with no program (an empty `argv` set by a caller) is refused before
    /// anything runs.
    fn check(&self) -> Result<(), RemoteError> {
        if self.argv.is_empty() {
            return Err(RemoteError::BadSshCommand {
                given: String::new(),
                reason: "it names no program".to_owned(),
            });
        }
        Ok(())
    }

    /// The full argv that runs `remote` (words, quoted here for the far side's shell, which
    /// ssh always hands its command to) on `host`.
    fn argv_for(&self, host: &Host, remote: &[&str]) -> Vec<String> {
        let mut argv = self.argv.clone();
        argv.push("-T".to_owned());
        // ssh never asks for anything (a password, a passphrase, a host key to confirm): it
        // has no terminal to ask on (`without_terminal`), and asking would only wait out the
        // connect timeout. It fails at once instead, saying why (issue 46: a password prompt
        // waited on the user's terminal until belfry killed ssh, echo left off). An
        // `-o BatchMode=no` in `--ssh-command` comes first and wins, as ssh takes an option's
        // first value.
        argv.push("-o".to_owned());
        argv.push("BatchMode=yes".to_owned());
        // ssh's own connect timeout covers the TCP connect; the hello's deadline covers the
        // rest (login, the far side starting). Whole seconds, at least one.
        let secs = self.connect_timeout.as_secs().max(1);
        argv.push("-o".to_owned());
        argv.push(format!("ConnectTimeout={secs}"));
        if let Some(port) = host.port {
            argv.push("-p".to_owned());
            argv.push(port.to_string());
        }
        // `--` so a destination can never be read as an option (it cannot start with '-'
        // anyway, see `Host::parse`).
        argv.push("--".to_owned());
        argv.push(host.destination.clone());
        argv.push(
            remote
                .iter()
                .map(|word| shell_quote(word))
                .collect::<Vec<_>>()
                .join(" "),
        );
        argv
    }
}

/// `word` quoted for the far side's login shell, which ssh hands the command to: whatever it
/// is, POSIX `sh`, bash, zsh or fish, the shell reads back `word` itself. A word of plainly
/// safe characters goes as it is; any other goes in single quotes, with each `'` and `\`
/// between them escaped by a backslash (fish reads `\\` inside single quotes as one
/// backslash, POSIX shells as two; outside quotes all read `\'` and `\\` alike). `=` is not
/// plainly safe: zsh expands a word that starts with it (`=ls` is `/usr/bin/ls`).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@,+%".contains(&b));
    if plain {
        return word.to_owned();
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    let mut open = false;
    for c in word.chars() {
        if matches!(c, '\'' | '\\') {
            if open {
                quoted.push('\'');
                open = false;
            }
            quoted.push('\\');
        } else if !open {
            quoted.push('\'');
            open = true;
        }
        quoted.push(c);
    }
    if open {
        quoted.push('\'');
    }
    if quoted.is_empty() {
        quoted.push_str("''");
    }
    quoted
}

/// Which socket the far side's `belfry proxy` bridges to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Far {
    /// The daemon's (started there on demand).
    Daemon,
    /// The pane host of this pane (for attach and its history view).
    Pane(SessionName),
}

/// The ssh process at the far end of a socket pair. Dropping it gives ssh a moment to exit
/// on its own (its stdin has closed by then), then ends and reaps it.
pub struct SshChild {
    host: String,
    child: Child,
    stderr: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl SshChild {
    /// Waits at most `within` for ssh to exit, then says what the failure was, from its exit
    /// status and its last words on stderr. `timed_out` says the hello's deadline passed.
    fn diagnose(&mut self, within: Duration, timed_out: Option<Duration>) -> RemoteError {
        let deadline = Instant::now() + within;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => break None,
            }
        };
        if status.is_some() {
            // ssh has exited: its stderr is complete once the reader reaches end of file.
            if let Some(reader) = self.reader.take() {
                let _ = reader.join();
            }
        }
        let said = self.stderr_tail();
        let code = status.and_then(|status| status.code());
        let missing = code == Some(127)
            || said.contains("command not found")
            || said.contains("belfry: not found");
        if missing {
            return RemoteError::NotInstalled {
                host: self.host.clone(),
                reason: if said.is_empty() {
                    "exit status 127".to_owned()
                } else {
                    said
                },
            };
        }
        match (status, timed_out) {
            (Some(_), _) if code == Some(255) => RemoteError::Unreachable {
                host: self.host.clone(),
                reason: if said.is_empty() {
                    "ssh exited with status 255".to_owned()
                } else {
                    said
                },
            },
            (None, Some(after)) => RemoteError::NoAnswer {
                host: self.host.clone(),
                after,
                reason: said,
            },
            (Some(status), _) => RemoteError::Ended {
                host: self.host.clone(),
                status: status.to_string(),
                reason: said,
            },
            (None, None) => RemoteError::Ended {
                host: self.host.clone(),
                status: "ssh still running".to_owned(),
                reason: said,
            },
        }
    }

    /// The last non-empty lines ssh wrote to stderr, joined with "; ".
    fn stderr_tail(&self) -> String {
        let bytes = match self.stderr.lock() {
            Ok(bytes) => bytes.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let text = String::from_utf8_lossy(&bytes);
        // Control characters (a carriage return, a prompt's escape sequences) would garble
        // the message they end up in.
        let lines: Vec<String> = text
            .lines()
            .map(|line| line.chars().filter(|c| !c.is_control()).collect::<String>())
            .map(|line| line.trim().to_owned())
            .filter(|line| !line.is_empty())
            .collect();
        let tail = &lines[lines.len().saturating_sub(3)..];
        tail.join("; ")
    }

    /// What went wrong, for a caller whose own handshake over the stream failed (`attach`):
    /// `timed_out` when its deadline passed.
    pub fn failure(&mut self, timed_out: Option<Duration>) -> RemoteError {
        self.diagnose(EXIT_GRACE, timed_out)
    }
}

impl Drop for SshChild {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                _ => return,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs ssh in a session of its own, without a controlling terminal: it can neither prompt on
/// the user's terminal nor change its modes (a password prompt turns echo off, and an ssh ended
/// at the connect timeout left it off), whatever its options say.
fn without_terminal(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of this process; it runs in
    // the forked child before exec. It fails only in a process group leader, which a freshly
    // forked child is not.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Starts ssh running `belfry ARGS` on `host`, its stdin and stdout one end of a socket pair,
/// and returns the other end. Its stderr is kept (bounded) to explain a failure.
pub fn open(
    host: &Host,
    ssh: &Ssh,
    remote: &[&str],
) -> Result<(UnixStream, SshChild), RemoteError> {
    ssh.check()?;
    let argv = ssh.argv_for(host, remote);
    let (ours, theirs) = UnixStream::pair().map_err(|source| RemoteError::SshNotRun {
        program: argv[0].clone(),
        host: host.to_string(),
        source,
    })?;
    let not_run = |source| RemoteError::SshNotRun {
        program: argv[0].clone(),
        host: host.to_string(),
        source,
    };
    let stdin = theirs.try_clone().map_err(not_run)?;
    let mut command = Command::new(&argv[0]);
    without_terminal(&mut command);
    let mut child = command
        .args(&argv[1..])
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(stdin)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stderr(Stdio::piped())
        .spawn()
        .map_err(not_run)?;
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stderr.take().map(|mut pipe| {
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if let Ok(mut kept) = kept.lock() {
                            kept.extend_from_slice(&buf[..n]);
                            let over = kept.len().saturating_sub(STDERR_KEPT);
                            kept.drain(..over);
                        }
                    }
                }
            }
        })
    });
    Ok((
        ours,
        SshChild {
            host: host.to_string(),
            child,
            stderr,
            reader,
        },
    ))
}

/// The words after `belfry` that make the far side bridge to `far`.
pub fn proxy_args(far: &Far) -> Vec<&str> {
    match far {
        Far::Daemon => vec!["belfry", "proxy"],
        Far::Pane(name) => vec!["belfry", "proxy", "--pane", name.as_str()],
    }
}

/// A client of the daemon (or a pane host) on `host`, through `ssh … belfry proxy`: the same
/// client, the same typed ops and the same per-op deadlines as a local one. A connection
/// that fails before belfry answers says why in words ([`RemoteError`]).
pub fn connect(host: &Host, ssh: &Ssh, far: &Far) -> Result<Client, crate::Error> {
    let (stream, mut child) = open(host, ssh, &proxy_args(far))?;
    let name = PathBuf::from(format!("ssh:{host}"));
    let started = Instant::now();
    // The client keeps the ssh child once the hello is answered; until then it is kept here,
    // where a failed hello needs it to say why.
    let slot = Arc::new(Mutex::new(None::<SshChild>));
    match Client::over(
        stream,
        &name,
        ssh.connect_timeout,
        Box::new(Arc::clone(&slot)),
    ) {
        Ok(client) => {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(child);
            }
            Ok(client)
        }
        Err(err) => {
            let timed_out = matches!(err, ClientError::Timeout { .. })
                .then(|| started.elapsed().max(ssh.connect_timeout));
            Err(child.diagnose(EXIT_GRACE, timed_out).into())
        }
    }
}

/// Runs `belfry ARGS` on `host` with this process's stdin, stdout and stderr, and returns its
/// exit code: for the commands that work on files of the far machine (its inboxes), which
/// belfry there does exactly as it does here. ssh's own failure and a missing belfry say so.
///
/// With `input`, that is the far command's stdin (a message body read here), written by a
/// thread so a far side that does not read it cannot block this one.
pub fn exec(
    host: &Host,
    ssh: &Ssh,
    args: &[&str],
    input: Option<&[u8]>,
) -> Result<i32, RemoteError> {
    ssh.check()?;
    let mut remote = vec!["belfry"];
    remote.extend_from_slice(args);
    let argv = ssh.argv_for(host, &remote);
    let mut command = Command::new(&argv[0]);
    without_terminal(&mut command);
    command.args(&argv[1..]).stderr(Stdio::piped());
    if input.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().map_err(|source| RemoteError::SshNotRun {
        program: argv[0].clone(),
        host: host.to_string(),
        source,
    })?;
    if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
        let input = input.to_vec();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(&input);
        });
    }
    // stderr is kept (its end, bounded) to explain a failure, and printed once the far
    // command has ended when it was not ssh's own failure.
    let mut said = Vec::new();
    if let Some(mut pipe) = child.stderr.take() {
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    said.extend_from_slice(&buf[..n]);
                    let over = said.len().saturating_sub(STDERR_KEPT);
                    said.drain(..over);
                }
            }
        }
    }
    let status = child.wait().map_err(|source| RemoteError::SshNotRun {
        program: argv[0].clone(),
        host: host.to_string(),
        source,
    })?;
    let text = String::from_utf8_lossy(&said).trim().to_owned();
    match status.code() {
        Some(127) => Err(RemoteError::NotInstalled {
            host: host.to_string(),
            reason: text,
        }),
        Some(255) => Err(RemoteError::Unreachable {
            host: host.to_string(),
            reason: text,
        }),
        Some(code) => {
            if !text.is_empty() {
                eprintln!("{text}");
            }
            Ok(code)
        }
        None => Err(RemoteError::Ended {
            host: host.to_string(),
            status: status.to_string(),
            reason: text,
        }),
    }
}

/// The `hosts` section of the user's config, `$XDG_CONFIG_HOME/belfry/config.kdl` (the
/// directory of the user's `hooks.kdl`): one alias a node, its value an ssh destination.
///
/// ```kdl
/// hosts {
///     build1 "ci@build1.example.com"
///     gpu "me@10.0.0.7:2222"
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostsConfig {
    /// Alias → host, in file order.
    pub hosts: Vec<(String, Host)>,
}

impl HostsConfig {
    /// The config file: `$XDG_CONFIG_HOME/belfry/config.kdl`, else `~/.config/belfry/config.kdl`.
    pub fn path() -> Option<PathBuf> {
        let home = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
        Some(home.join("belfry").join("config.kdl"))
    }

    /// Reads the user's config; a missing file has no hosts.
    pub fn load() -> Result<HostsConfig, RemoteError> {
        match HostsConfig::path() {
            Some(path) if path.exists() => HostsConfig::read(&path),
            _ => Ok(HostsConfig::default()),
        }
    }

    /// Reads `path`.
    pub fn read(path: &Path) -> Result<HostsConfig, RemoteError> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| RemoteError::Config(format!("cannot read {}: {err}", path.display())))?;
        HostsConfig::parse(&text, path)
    }

    /// Parses a config's text, as if read from `path`; errors name `path:line:col`.
    pub fn parse(text: &str, path: &Path) -> Result<HostsConfig, RemoteError> {
        if text.len() > 1 << 20 {
            return Err(RemoteError::Config(format!(
                "{}: the file is over 1 MiB; it is not a config",
                path.display()
            )));
        }
        let at = |offset: usize| {
            let offset = offset.min(text.len());
            let before = text.get(..offset).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            format!("{}:{line}:{column}", path.display())
        };
        crate::kdl_depth::check_nesting(text, crate::kdl_depth::MAX_NESTING)
            .map_err(|_| RemoteError::Config(format!("{}: nested too deeply", at(0))))?;
        let document = kdl::KdlDocument::parse_v2(text).map_err(|err| {
            let first = err.diagnostics.first();
            let offset = first.map_or(0, |d| d.span.offset());
            let message = first.map_or_else(|| "not valid KDL v2".to_owned(), ToString::to_string);
            RemoteError::Config(format!("{}: not valid KDL v2: {message}", at(offset)))
        })?;
        let mut config = HostsConfig::default();
        for node in document.nodes() {
            // The attach client's section (its keys, its escape time) is read by the client.
            if node.name().value() == "attach" {
                continue;
            }
            if node.name().value() != "hosts" {
                return Err(RemoteError::Config(format!(
                    "{}: unknown node {:?} (the config holds `hosts {{ ALIAS \"[user@]box[:port]\" }}` \
                     and `attach {{ … }}`)",
                    at(node.span().offset()),
                    node.name().value()
                )));
            }
            let Some(children) = node.children() else {
                return Err(RemoteError::Config(format!(
                    "{}: `hosts` takes a block: hosts {{ ALIAS \"[user@]box[:port]\" }}",
                    at(node.span().offset())
                )));
            };
            for alias in children.nodes() {
                let name = alias.name().value().to_owned();
                if SessionName::parse(&name).is_err() {
                    return Err(RemoteError::Config(format!(
                        "{}: host alias {name:?} must match [A-Za-z0-9._-]{{1,64}}",
                        at(alias.span().offset())
                    )));
                }
                if config.hosts.iter().any(|(known, _)| *known == name) {
                    return Err(RemoteError::Config(format!(
                        "{}: host alias {name:?} is given twice",
                        at(alias.span().offset())
                    )));
                }
                let value = match alias.entries() {
                    [entry] if entry.name().is_none() => entry.value().as_string(),
                    _ => None,
                };
                let Some(value) = value else {
                    return Err(RemoteError::Config(format!(
                        "{}: host alias {name:?} takes one string, its ssh destination: \
                         {name} \"[user@]box[:port]\"",
                        at(alias.span().offset())
                    )));
                };
                let host = Host::parse(value).map_err(|err| {
                    RemoteError::Config(format!("{}: {err}", at(alias.span().offset())))
                })?;
                config.hosts.push((name, host));
            }
        }
        Ok(config)
    }

    /// The host an alias names.
    pub fn get(&self, alias: &str) -> Option<&Host> {
        self.hosts
            .iter()
            .find(|(name, _)| name == alias)
            .map(|(_, host)| host)
    }

    /// `given` as an alias of this config, else as `[user@]box[:port]` itself.
    pub fn resolve(&self, given: &str) -> Result<Host, RemoteError> {
        match self.get(given) {
            Some(host) => Ok(host.clone()),
            None => Host::parse(given),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse_user_box_and_port() {
        let host = Host::parse("me@box.example:2222").unwrap();
        assert_eq!(host.destination, "me@box.example");
        assert_eq!(host.port, Some(2222));
        assert_eq!(Host::parse("box").unwrap().port, None);
        let v6 = Host::parse("[::1]:22").unwrap();
        assert_eq!((v6.destination.as_str(), v6.port), ("::1", Some(22)));
        for bad in [
            "",
            "-oProxyCommand=x",
            "box:0",
            "box:99999",
            "@box",
            "a b",
            "box:x",
        ] {
            let err = Host::parse(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    /// Issue 39: shell metacharacters in a host's box part reached ssh, which hands its
    /// destination to shells of its own (`ProxyCommand`, `Match exec`).
    #[test]
    fn a_host_outside_the_strict_grammar_is_refused_naming_it() {
        for bad in [
            "a;touch x",
            "box;touch x",
            "-oProxyCommand=touch x",
            "me@-oProxyCommand=x",
            "$(touch x)",
            "me@$(x)",
            "`x`",
            "a b",
            "box\nother",
            "box\n",
            "a|b",
            "a&b",
            "a>b",
            "'box'",
            "\"box\"",
            "me@you@box",
            "box:+22",
            "box:22x",
            "box: 22",
            "[::1;x]",
            "[::1%eth0;x]",
            "[not-v6]",
            "[::1]x",
            "bo\u{e9}x",
        ] {
            let err = Host::parse(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        for good in [
            "b-1.example_x",
            "u.s-e_r@10.0.0.1:65535",
            "[::ffff:1.2.3.4]",
        ] {
            assert!(Host::parse(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn the_ssh_command_is_split_like_words_and_never_expanded() {
        assert_eq!(
            Ssh::parse_command("ssh -F '/tmp/my dir/config' -o \"A=b c\" $HOME").unwrap(),
            ["ssh", "-F", "/tmp/my dir/config", "-o", "A=b c", "$HOME"]
        );
        assert!(Ssh::parse_command("ssh 'open").is_err());
        assert!(Ssh::parse_command("   ").is_err());
    }

    /// Words a shell would otherwise change: quotes, backslashes (which fish reads inside
    /// single quotes), a leading `=` (zsh's path expansion), globs, variables, a leading `~`,
    /// `!`, newlines and spaces, non-ASCII text, an option-like word and the empty word.
    const AWKWARD: [&str; 16] = [
        "it's",
        "a\\b",
        "a\\\\b",
        "end\\",
        "'",
        "=ls",
        "=urgent",
        "a=b",
        "*.rs",
        "$HOME ${PATH}",
        "~",
        "!x # not a comment",
        "two\nlines\ttab",
        "über 文字",
        "-n",
        "",
    ];

    /// Found while writing the `remote_words` fuzz target's oracle: an IPv6 box showed without
    /// its brackets (`::1:22`), which reads as no host at all.
    #[test]
    fn a_host_shows_as_it_reads_an_ipv6_box_in_brackets() {
        for given in [
            "me@[::1]:22",
            "[::1]",
            "[fe80::1%eth0]:2222",
            "u@box:7",
            "box",
        ] {
            let host = Host::parse(given).unwrap();
            assert_eq!(host.to_string(), given);
            assert_eq!(Host::parse(&host.to_string()).unwrap(), host);
        }
    }

    #[test]
    fn a_quoted_word_reads_back_as_itself() {
        let quoted: Vec<String> = AWKWARD.iter().map(|word| shell_quote(word)).collect();
        assert_eq!(Ssh::parse_command(&quoted.join(" ")).unwrap(), AWKWARD);
    }

    /// The far side's login shell may be any of these: each reads every quoted word back as
    /// itself (run here, each shell printing its arguments one per NUL-ended record).
    #[test]
    fn a_quoted_word_reaches_sh_bash_zsh_and_fish_as_itself() {
        let command = std::iter::once("printf '%s\\0'".to_owned())
            .chain(AWKWARD.iter().map(|word| shell_quote(word)))
            .collect::<Vec<_>>()
            .join(" ");
        for shell in ["sh", "bash", "zsh", "fish"] {
            let out = std::process::Command::new(shell)
                .args(["-c", &command])
                .env("HOME", "/nonexistent")
                .output()
                .unwrap_or_else(|err| {
                    panic!("{shell}: {err} (the test needs it: Debian's package {shell})")
                });
            assert!(out.status.success(), "{shell}: {out:?}");
            let read: Vec<&str> = std::str::from_utf8(&out.stdout)
                .unwrap()
                .split_terminator('\0')
                .collect();
            assert_eq!(read, AWKWARD, "{shell} read {command}");
        }
    }

    #[test]
    fn the_far_command_is_quoted_for_its_shell() {
        assert_eq!(shell_quote("worker.1"), "worker.1");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("a\\b"), "'a'\\\\'b'");
        assert_eq!(shell_quote("=ls"), "'=ls'");
        assert_eq!(shell_quote(""), "''");
        let ssh = Ssh::default();
        let argv = ssh.argv_for(&Host::parse("me@b:2").unwrap(), &["belfry", "proxy"]);
        assert_eq!(
            argv,
            [
                "ssh",
                "-T",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-p",
                "2",
                "--",
                "me@b",
                "belfry proxy"
            ]
        );
    }

    #[test]
    fn a_wait_is_told_in_whole_seconds_or_tenths() {
        assert_eq!(seconds(Duration::from_secs(10)), "10");
        assert_eq!(seconds(Duration::from_millis(2004)), "2");
        assert_eq!(seconds(Duration::from_nanos(10_092_637_359)), "10.1");
    }

    #[test]
    fn a_config_names_hosts_and_its_errors_name_the_place() {
        let path = Path::new("/c/config.kdl");
        let config =
            HostsConfig::parse("hosts {\n  box \"me@b:2222\"\n  gpu \"g\"\n}\n", path).unwrap();
        assert_eq!(config.get("box").unwrap().port, Some(2222));
        assert_eq!(config.resolve("gpu").unwrap().destination, "g");
        assert_eq!(config.resolve("other@x").unwrap().destination, "other@x");
        // The attach section beside it is the attach client's.
        let config = HostsConfig::parse(
            "attach {\n  prefix \"C-a\"\n}\nhosts {\n  box \"b\"\n}\n",
            path,
        )
        .unwrap();
        assert_eq!(config.resolve("box").unwrap().destination, "b");
        let err = HostsConfig::parse("hosts {\n  box 5\n}\n", path).unwrap_err();
        assert!(err.to_string().starts_with("/c/config.kdl:2:3:"), "{err}");
        let err = HostsConfig::parse("host {}\n", path).unwrap_err();
        assert!(err.to_string().contains("unknown node \"host\""), "{err}");
        let err = HostsConfig::parse("hosts {\n  b \"x:0\"\n}\n", path).unwrap_err();
        assert!(err.to_string().contains("/c/config.kdl:2:3"), "{err}");
    }
}
