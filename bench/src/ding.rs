//! DING latency (spec §13: "post → notice written (aggressive); lease → guarded send (rich)").
//!
//! Three programs, all timestamping with `CLOCK_MONOTONIC`, which every process on the machine
//! shares, so a time taken in one can be subtracted from a time taken in another:
//!
//! - `stamp-recv --log FILE`: the pane's program. Puts its terminal in raw mode (no echo, no
//!   line buffering, so it prints nothing and the pane's revision moves only with input), turns
//!   bracketed paste on as agent TUIs do, and appends one line per `read` to FILE:
//!   `<monotonic ns> <realtime ns> <hex bytes>`.
//! - `bench-adapter LOG`: a protocol v1 activity adapter, run by the daemon as the pane's
//!   sidecar. For each unread message it has not announced yet it reads the pane's revision
//!   (`info` on `$BELFRY_PANE_SOCKET`), writes one `activity` event (idle, composer empty,
//!   `validForMs` 5000, that revision), and appends `<name> <seen ns> <written ns> <revision>
//!   <sequence>` to LOG. One event per message: one lease authorizes one send (spec §7.4).
//! - `ding --state DIR --daemon SOCK [--cli S --cli-log F] [--direct S --direct-log F]
//!   [--rich S --rich-log F --adapter-log F] …`: the driver. Each named pane is a lane: `cli`
//!   and `direct` are panes without a ding block (aggressive), posted to with
//!   `belfry inbox post` and by hand + `ding.nudge`; `rich` is a `turn-boundary+fresh-idle`
//!   pane whose adapter is `bench-adapter`. A lane posts one message, reads its receiver's log
//!   for the notice's first bytes and its Enter, archives the message, and posts the next.
//!   After the rich pane's Enter the driver reports its turn's end (a `turn-stop` hook, as the
//!   harness's stop hook would), without which DING holds the next notice as `submitted`.
//!   The lanes take turns in time slots (`--slot-ms`, default 200: lane k posts at
//!   k·200 ms + m·600 ms), so every measured window (a few ms after a post) falls while the
//!   other panes sit in their 500 ms pause; `--slot-ms 0` runs one message at a time
//!   instead. Then the `direct` pane gets `--poll-count` messages without a nudge.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gen::Rng;
use crate::{pty, Args, Conn, Result};

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` in nanoseconds: comparable between processes on this machine.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn real_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    text.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => {
                Some(((*hi as char).to_digit(16)? * 16 + (*lo as char).to_digit(16)?) as u8)
            }
            _ => None,
        })
        .collect()
}

// ---- stamp-recv ------------------------------------------------------------------------

/// `stamp-recv`: records every burst of bytes the pane's terminal delivers.
pub fn cmd_stamp_recv(args: &Args) -> Result<Value> {
    pty::install_stop_handler();
    let bracketed = args.num("bracketed", 1u8)? != 0;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(args.req("log")?)?;
    // SAFETY: termios calls on fd 0 with valid, writable termios structs.
    let saved = unsafe {
        let mut saved: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(0, &mut saved) != 0 {
            return Err(format!(
                "stdin is not a terminal: {}",
                std::io::Error::last_os_error()
            )
            .into());
        }
        let mut raw = saved;
        libc::cfmakeraw(&mut raw);
        if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        saved
    };
    let mut out = std::io::stdout();
    if bracketed {
        out.write_all(b"\x1b[?2004h")?;
    }
    out.write_all(b"stamp-recv READY\r\n")?;
    out.flush()?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut bursts = 0u64;
    while !pty::stopped() {
        match pty::read_timeout(0, &mut buf, Duration::from_millis(500))? {
            pty::Read::Data(0) | pty::Read::Timeout => {}
            pty::Read::Data(n) => {
                let (mono, real) = (mono_ns(), real_ns());
                // One write per burst, so a reader never sees half a line for long.
                log.write_all(format!("{mono} {real} {}\n", hex(&buf[..n])).as_bytes())?;
                bursts += 1;
            }
            pty::Read::End => break,
        }
    }
    // SAFETY: restores the settings read above on the same descriptor.
    unsafe { libc::tcsetattr(0, libc::TCSANOW, &saved) };
    Ok(json!({"bursts": bursts}))
}

// ---- bench-adapter ---------------------------------------------------------------------

fn env(name: &str) -> Result<String> {
    std::env::var(name).map_err(|_| format!("${name} is not set (run me as a DING adapter)").into())
}

/// The pane's revision now, from the pane host (`info`, a fresh connection through belfry's
/// one client).
fn pane_revision(socket: &str) -> Result<u64> {
    let mut client = belfry_transport::client::Client::connect_within(
        Path::new(socket),
        Duration::from_secs(5),
    )?;
    let reply = client.request(serde_json::json!({"op": "info"}))?;
    reply["revision"]
        .as_u64()
        .ok_or_else(|| format!("info without revision: {reply}").into())
}

fn unread_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(".md"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// An inotify descriptor watching `dir` for names arriving and leaving.
fn watch(dir: &Path) -> Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: plain libc calls; the descriptor is owned as soon as it exists and `path` is a
    // NUL-terminated string that outlives the call.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_MOVED_FROM | libc::IN_DELETE;
        if libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(fd)
    }
}

/// `bench-adapter LOG`: one fresh `activity` lease per unread message (see the module doc).
/// A message still unread 3 s after its event (a conflict, a lost notice) is announced again.
pub fn cmd_bench_adapter(rest: &[String]) -> Result<Value> {
    pty::install_stop_handler();
    let [log_path] = rest else {
        return Err("usage: belfry-bench bench-adapter LOG".into());
    };
    let session = env("BELFRY_SESSION")?;
    let incarnation = env("BELFRY_INCARNATION")?;
    let generation = env("BELFRY_GENERATION")?;
    let pane_socket = env("BELFRY_PANE_SOCKET")?;
    let new_dir = PathBuf::from(env("BELFRY_STATE")?)
        .join("inbox")
        .join(&session)
        .join("new");
    std::fs::create_dir_all(&new_dir)?;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log_path)?;
    let inotify = watch(&new_dir)?;
    let mut announced: HashMap<String, u64> = HashMap::new();
    let mut sequence = 0u64;
    let mut out = std::io::stdout().lock();
    let mut events = [0u8; 4096];
    while !pty::stopped() {
        let unread = unread_names(&new_dir);
        announced.retain(|name, _| unread.contains(name));
        let now = mono_ns();
        let due = unread.iter().find(|name| {
            announced
                .get(*name)
                .is_none_or(|&at| now.saturating_sub(at) > 3_000_000_000)
        });
        if let Some(name) = due {
            let seen = mono_ns();
            let revision = pane_revision(&pane_socket)?;
            sequence += 1;
            let event = json!({"v": 1, "kind": "activity", "session": session,
                               "incarnation": incarnation, "generation": generation,
                               "sequence": sequence, "state": "idle", "composer": "empty",
                               "validForMs": 5000, "revision": revision});
            out.write_all(format!("{event}\n").as_bytes())?;
            out.flush()?;
            let written = mono_ns();
            log.write_all(format!("{name} {seen} {written} {revision} {sequence}\n").as_bytes())?;
            announced.insert(name.clone(), written);
            continue;
        }
        // Wait for the directory to change (or 100 ms, to re-check and to see the stop flag).
        match pty::read_timeout(inotify.as_raw_fd(), &mut events, Duration::from_millis(100)) {
            Ok(_) => {
                while let Ok(pty::Read::Data(n)) =
                    pty::read_timeout(inotify.as_raw_fd(), &mut events, Duration::ZERO)
                {
                    if n == 0 {
                        break;
                    }
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(json!({"events": sequence}))
}

// ---- the driver ------------------------------------------------------------------------

/// Follows a file that another process appends lines to.
struct Tail {
    file: File,
    partial: Vec<u8>,
}

impl Tail {
    /// Opens `path` (waiting up to 10 s for it to appear) positioned at its current end.
    fn open(path: &Path) -> Result<Tail> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let file = loop {
            match File::open(path) {
                Ok(file) => break file,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(err) => return Err(format!("{}: {err}", path.display()).into()),
            }
        };
        let mut tail = Tail {
            file,
            partial: Vec::new(),
        };
        tail.lines()?;
        Ok(tail)
    }

    /// The complete lines appended since the last call.
    fn lines(&mut self) -> Result<Vec<String>> {
        let mut chunk = Vec::new();
        self.file.read_to_end(&mut chunk)?;
        self.partial.extend_from_slice(&chunk);
        let mut out = Vec::new();
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            out.push(String::from_utf8_lossy(&line[..end]).into_owned());
        }
        Ok(out)
    }
}

/// One `read` of the receiver.
struct Burst {
    mono: u64,
    bytes: Vec<u8>,
}

fn parse_burst(line: &str) -> Result<Burst> {
    let mut parts = line.split(' ');
    let mono = parts.next().and_then(|v| v.parse().ok());
    let _real = parts.next();
    let bytes = parts.next().and_then(unhex);
    match (mono, bytes) {
        (Some(mono), Some(bytes)) => Ok(Burst { mono, bytes }),
        _ => Err(format!("bad receiver log line {line:?}").into()),
    }
}

/// The message's id as the notice shows it (`<unix-ms>-<rand6>.md` → `rand6`).
fn message_id(name: &str) -> Result<&str> {
    name.strip_suffix(".md")
        .and_then(|n| n.rsplit('-').next())
        .filter(|id| id.len() == 6)
        .ok_or_else(|| format!("not a message name: {name:?}").into())
}

struct Inbox {
    dir: PathBuf,
    rng: Rng,
    last_ms: u64,
}

impl Inbox {
    /// spec §7.1 done by hand: write `tmp/<unix-ms>-<rand6>.md`, fsync it, rename it into
    /// `new/`, fsync `new/`. Returns the name.
    fn post(&mut self, subject: &str) -> Result<String> {
        let now_ms = real_ns() / 1_000_000;
        let ms = now_ms.max(self.last_ms + 1);
        self.last_ms = ms;
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let rand6: String = (0..6)
            .map(|_| ALPHABET[self.rng.below(ALPHABET.len() as u64) as usize] as char)
            .collect();
        let name = format!("{ms}-{rand6}.md");
        let text = format!("---\nfrom: bench\nsubject: {subject}\n---\nbenchmark message\n");
        let tmp = self.dir.join("tmp").join(&name);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, self.dir.join("new").join(&name))?;
        File::open(self.dir.join("new"))?.sync_all()?;
        Ok(name)
    }

    /// What `belfry inbox read` does to the file once the agent has read it: `new/` →
    /// `archive/`.
    fn archive(&self, name: &str) -> Result<()> {
        std::fs::rename(
            self.dir.join("new").join(name),
            self.dir.join("archive").join(name),
        )?;
        Ok(())
    }
}

/// The samples of one way of posting.
#[derive(Default)]
struct Series {
    /// post start (or, rich, the adapter's event written) → first notice byte in the pane
    to_first: Vec<u64>,
    /// the post itself: the CLI process (spawn → exit), or the direct write
    post: Vec<u64>,
    /// `ding.nudge` round trip (direct + nudge only)
    nudge: Vec<u64>,
    /// nudge reply → first notice byte (direct + nudge only): the daemon's and pane host's part
    after_nudge: Vec<u64>,
    /// rich: post start → the adapter's event written
    to_event: Vec<u64>,
    /// first notice byte → Enter
    to_enter: Vec<u64>,
    lost: usize,
    /// notices whose text did not name the message they were timed for
    mismatched: usize,
    /// rich: messages the adapter announced more than once (it retries after 3 s)
    announced_again: usize,
}

impl Series {
    fn json(&self) -> Value {
        json!({"to_first_ns": self.to_first, "post_ns": self.post, "nudge_ns": self.nudge,
               "after_nudge_ns": self.after_nudge, "to_event_ns": self.to_event,
               "to_enter_ns": self.to_enter, "lost": self.lost, "mismatched": self.mismatched,
               "announced_again": self.announced_again})
    }
}

/// A durable replace of a small file, as `ding/src/durable.rs` `atomic_replace` does when the
/// worker stages a notice: write a temporary file, fsync, rename, fsync the directory.
fn durable_replace_cost(dir: &Path, runs: usize) -> Result<Vec<u64>> {
    std::fs::create_dir_all(dir)?;
    let bytes = vec![b'x'; 300];
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = mono_ns();
        let tmp = dir.join(".state.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, dir.join("state.json"))?;
        File::open(dir)?.sync_all()?;
        samples.push(mono_ns() - start);
    }
    std::fs::remove_dir_all(dir)?;
    Ok(samples)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `belfry inbox post` (aggressive pane)
    Cli,
    /// the file written by hand, then `ding.nudge` (aggressive pane)
    Direct,
    /// the file written by hand, no nudge: found by the worker's poll (aggressive pane)
    Poll,
    /// the file written by hand, no nudge: the bench adapter's event wakes the worker
    Rich,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cli => "cli",
            Kind::Direct => "direct",
            Kind::Poll => "poll",
            Kind::Rich => "rich",
        }
    }
}

/// A message posted and not finished yet.
struct InFlight {
    name: String,
    id: String,
    timed: bool,
    start: u64,
    posted: u64,
    nudged: u64,
    first: Option<u64>,
    text: Vec<u8>,
    deadline: Instant,
}

/// One pane and the way its messages are posted.
struct Lane {
    kind: Kind,
    session: String,
    inbox: Inbox,
    recv: Tail,
    /// rich: the bench adapter's log, and the events read from it (name → (seen, written))
    events: Option<Tail>,
    announced: HashMap<String, Vec<(u64, u64)>>,
    total: usize,
    warmup: usize,
    posted: usize,
    next_at: Instant,
    in_flight: Option<InFlight>,
    extra_bursts: usize,
}

/// Messages a lane may lose (no notice in time) before the section stops with an error.
const MAX_LOST: usize = 10;

struct Driver {
    belfry: String,
    body: PathBuf,
    daemon: Conn,
    first_timeout: Duration,
    series: HashMap<&'static str, Series>,
}

impl Driver {
    /// One request to the daemon; a refusal is an error naming the op.
    fn ask(&mut self, request: Value) -> Result<Value> {
        let reply = self.daemon.call(&request)?;
        if reply["ok"] != true {
            return Err(format!("{} refused: {reply}", request["op"]).into());
        }
        Ok(reply)
    }

    fn nudge(&mut self, session: &str) -> Result<()> {
        self.ask(json!({"id": 1, "op": "ding.nudge", "session": session}))?;
        Ok(())
    }

    /// Tells the daemon the rich pane's turn ended, as the harness's stop hook does through
    /// `belfry dispatch`: a notice's Enter starts a turn, and DING holds the next notice
    /// (`submitted`) until that turn is seen to end (spec §7.4), or for 10 s when nothing
    /// says so. The pane's program takes a notice at once, so its turn ends with the Enter.
    fn turn_stop(&mut self, session: &str) -> Result<()> {
        self.ask(json!({"id": 1, "op": "hook", "session": session, "hook": "turn-stop"}))?;
        Ok(())
    }

    /// Posts the lane's next message.
    fn post(&mut self, lane: &mut Lane) -> Result<()> {
        // Anything the pane got since the last notice is not ours.
        lane.extra_bursts += lane.recv.lines()?.len();
        let subject = format!("bench {} {}", lane.kind.name(), lane.posted);
        let start = mono_ns();
        let (name, posted, nudged) = match lane.kind {
            Kind::Cli => {
                let out = Command::new(&self.belfry)
                    .args([
                        "inbox",
                        "post",
                        &lane.session,
                        "--from",
                        "bench",
                        "--subject",
                    ])
                    .arg(&subject)
                    .arg(&self.body)
                    .stdin(Stdio::null())
                    .stderr(Stdio::inherit())
                    .output()?;
                let end = mono_ns();
                if !out.status.success() {
                    return Err(format!("belfry inbox post failed: {}", out.status).into());
                }
                (String::from_utf8(out.stdout)?.trim().to_string(), end, end)
            }
            kind => {
                let name = lane.inbox.post(&subject)?;
                let posted = mono_ns();
                if kind == Kind::Direct {
                    self.nudge(&lane.session)?;
                }
                (name, posted, mono_ns())
            }
        };
        lane.in_flight = Some(InFlight {
            id: message_id(&name)?.to_string(),
            name,
            timed: lane.posted >= lane.warmup,
            start,
            posted,
            nudged,
            first: None,
            text: Vec::new(),
            deadline: Instant::now() + self.first_timeout,
        });
        lane.posted += 1;
        Ok(())
    }

    /// Reads what the lane's pane received. True when its message is finished: the Enter
    /// arrived (its samples are recorded), or it timed out (lost). Either way the message is
    /// archived, as the agent reading it would, and the worker nudged, as the CLI does after an
    /// archive, so the worker forgets it now and not during the next measurement.
    fn check(&mut self, lane: &mut Lane) -> Result<bool> {
        let Some(msg) = lane.in_flight.as_mut() else {
            return Ok(false);
        };
        let mut enter = None;
        for line in lane.recv.lines()? {
            let burst = parse_burst(&line)?;
            if enter.is_some() {
                lane.extra_bursts += 1;
                continue;
            }
            if msg.first.is_none() {
                msg.first = Some(burst.mono);
                // The Enter follows 500 ms after the paste.
                msg.deadline = Instant::now() + Duration::from_secs(5);
            }
            msg.text.extend_from_slice(&burst.bytes);
            if burst.bytes.contains(&b'\r') {
                enter = Some(burst.mono);
            }
        }
        if enter.is_none() && Instant::now() < msg.deadline {
            return Ok(false);
        }
        let msg = lane.in_flight.take().ok_or("no message in flight")?;
        let series = self.series.entry(lane.kind.name()).or_default();
        let mut event_written = None;
        if let Some(events) = lane.events.as_mut() {
            for line in events.lines()? {
                match line.split(' ').collect::<Vec<_>>()[..] {
                    [name, seen, written, ..] => lane
                        .announced
                        .entry(name.to_string())
                        .or_default()
                        .push((seen.parse()?, written.parse()?)),
                    _ => return Err(format!("bad adapter log line {line:?}").into()),
                }
            }
            let ours = lane.announced.remove(&msg.name).unwrap_or_default();
            if ours.len() > 1 {
                series.announced_again += 1;
            }
            // The lease that sent the notice: the last event written before its first byte.
            let first = msg.first.unwrap_or(u64::MAX);
            event_written = ours.iter().rev().map(|e| e.1).find(|&w| w <= first);
        }
        match (msg.first, enter) {
            (Some(first), Some(enter)) => {
                let needle = format!("[id:{}]", msg.id);
                if !String::from_utf8_lossy(&msg.text).contains(&needle) {
                    series.mismatched += 1;
                }
                if lane.kind == Kind::Rich && event_written.is_none() {
                    series.lost += 1;
                } else if msg.timed {
                    match event_written {
                        Some(written) => {
                            series.to_first.push(first.saturating_sub(written));
                            series.to_event.push(written.saturating_sub(msg.start));
                        }
                        None => {
                            series.to_first.push(first.saturating_sub(msg.start));
                            series.post.push(msg.posted - msg.start);
                        }
                    }
                    if lane.kind == Kind::Direct {
                        series.nudge.push(msg.nudged - msg.posted);
                        series.after_nudge.push(first.saturating_sub(msg.nudged));
                    }
                    series.to_enter.push(enter.saturating_sub(first));
                }
            }
            _ => series.lost += 1,
        }
        if series.lost > MAX_LOST {
            // A section that loses messages measures nothing; say why at once rather than
            // wait out every message's timeout (a rich pane held as `submitted` once took
            // over an hour this way).
            let status = self
                .daemon
                .call(&json!({"id": 1, "op": "ding.status", "session": lane.session}))?;
            return Err(format!(
                "ding {}: {} messages got no notice within their timeout; stopping. The \
                 worker's state: {status}",
                lane.kind.name(),
                series.lost
            )
            .into());
        }
        lane.inbox.archive(&msg.name)?;
        if lane.kind == Kind::Rich && enter.is_some() {
            self.turn_stop(&lane.session)?;
        }
        self.nudge(&lane.session)?;
        Ok(true)
    }

    /// Runs the lanes until each has posted its messages. `slot`: lane k posts at
    /// `t0 + k·slot + m·lanes·slot` (the first such time once its previous message is
    /// finished), so the panes take turns and no measurement overlaps another pane's work.
    /// `None`: one message at a time, round-robin, each after `gap` plus a random wait of up
    /// to `jitter`.
    fn run(
        &mut self,
        lanes: &mut [Lane],
        slot: Option<Duration>,
        gap: Duration,
        jitter: Duration,
        rng: &mut Rng,
    ) -> Result<()> {
        let t0 = Instant::now() + Duration::from_millis(50);
        let period = slot.map(|s| s * lanes.len() as u32);
        for (k, lane) in lanes.iter_mut().enumerate() {
            lane.next_at = t0 + slot.unwrap_or_default() * k as u32;
        }
        let mut turn = 0usize;
        loop {
            let mut busy = false;
            for k in 0..lanes.len() {
                let lane = &mut lanes[k];
                if lane.in_flight.is_some() {
                    busy = true;
                    if self.check(lane)? {
                        let now = Instant::now();
                        match (slot, period) {
                            (Some(_), Some(period)) => {
                                while lane.next_at < now + gap {
                                    lane.next_at += period;
                                }
                            }
                            _ => {
                                turn = (k + 1) % lanes.len();
                                let wait = jitter.as_micros() as u64;
                                let extra = if wait > 0 { rng.below(wait) } else { 0 };
                                lanes[turn].next_at = now + gap + Duration::from_micros(extra);
                            }
                        }
                    }
                } else if lane.posted < lane.total {
                    busy = true;
                    let my_turn = slot.is_some() || turn == k;
                    if my_turn && Instant::now() >= lane.next_at {
                        self.post(lane)?;
                    }
                } else if slot.is_none() && turn == k {
                    // This lane is done: pass the turn on.
                    turn = (k + 1) % lanes.len();
                    lanes[turn].next_at = Instant::now() + gap;
                }
            }
            if !busy {
                return Ok(());
            }
            // Polling only delays the driver; the times are the receiver's and the adapter's.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// `ding`: the driver (see the module doc and bench/README.md).
pub fn cmd_ding(args: &Args) -> Result<Value> {
    let state = PathBuf::from(args.req("state")?);
    let count: usize = args.num("count", 1000)?;
    let poll_count: usize = args.num("poll-count", 100)?;
    let warmup: usize = args.num("warmup", 5)?;
    let slot_ms: u64 = args.num("slot-ms", 200)?;
    let gap = Duration::from_millis(args.num("gap-ms", 10)?);
    let mut rng = Rng::new(real_ns() ^ u64::from(std::process::id()));
    let body = state.join("bench-ding-body.md");
    std::fs::write(&body, b"benchmark message\n")?;
    let mut driver = Driver {
        belfry: args.get("belfry").unwrap_or("belfry").to_string(),
        body,
        daemon: Conn::open(args.req("daemon")?)?,
        first_timeout: Duration::from_secs(args.num("timeout-s", 10)?),
        series: HashMap::new(),
    };
    let durable_replace = durable_replace_cost(&state.join("bench-fsync"), 200)?;
    let mut lanes = Vec::new();
    for (kind, flag) in [
        (Kind::Cli, "cli"),
        (Kind::Direct, "direct"),
        (Kind::Rich, "rich"),
    ] {
        let Some(session) = args.get(flag) else {
            continue;
        };
        let dir = state.join("inbox").join(session);
        for sub in ["tmp", "new", "archive"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let events = match kind {
            Kind::Rich => Some(Tail::open(Path::new(args.req("adapter-log")?))?),
            _ => None,
        };
        lanes.push(Lane {
            kind,
            session: session.to_string(),
            inbox: Inbox {
                dir,
                rng: Rng::new(rng.next()),
                last_ms: 0,
            },
            recv: Tail::open(Path::new(args.req(&format!("{flag}-log"))?))?,
            events,
            announced: HashMap::new(),
            total: count + warmup,
            warmup,
            posted: 0,
            next_at: Instant::now(),
            in_flight: None,
            extra_bursts: 0,
        });
    }
    if lanes.is_empty() {
        return Err("name at least one of --cli, --direct, --rich".into());
    }
    let slot = (slot_ms > 0).then(|| Duration::from_millis(slot_ms));
    driver.run(&mut lanes, slot, gap, Duration::ZERO, &mut rng)?;
    let mut extra: HashMap<&str, usize> = lanes
        .iter()
        .map(|l| (l.kind.name(), l.extra_bursts))
        .collect();
    // Then the direct pane without the nudge, one message at a time. The worker's 200 ms poll
    // timer restarts whenever it wakes (the nudge after each archive), so a random wait before
    // each post samples every phase of it.
    if let Some(lane) = lanes.iter_mut().find(|l| l.kind == Kind::Direct) {
        if poll_count > 0 {
            lane.kind = Kind::Poll;
            lane.total = poll_count + warmup;
            lane.posted = 0;
            lane.extra_bursts = 0;
            driver.run(
                std::slice::from_mut(lane),
                None,
                gap,
                Duration::from_millis(200),
                &mut rng,
            )?;
            extra.insert("poll", lane.extra_bursts);
        }
    }
    let series: serde_json::Map<String, Value> = driver
        .series
        .iter()
        .map(|(k, s)| (k.to_string(), s.json()))
        .collect();
    Ok(json!({"series": series, "extra_bursts": extra,
              "durable_replace_ns": durable_replace,
              "slot_ms": slot_ms, "warmup": warmup}))
}
