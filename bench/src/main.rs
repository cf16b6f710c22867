//! `belfry-bench`: the small programs `bench/run.sh` drives. Each subcommand does one
//! timing-sensitive job and prints one JSON object on stdout; `bench/bench.py` turns them into
//! the results table. Nothing here is part of the test suite, and nothing touches the network.
//!
//! ```text
//! belfry-bench gen --kind plain|sgr --bytes N --out PATH
//! belfry-bench raw-pty [--rows R --cols C] -- CMD…          raw PTY reader (baseline)
//! belfry-bench relay [--rows R --cols C] [--model 1|2] -- CMD… the same, relayed through a 2nd PTY
//!                                                           (--model 1: and applied to the screen model;
//!                                                           2: on a second thread)
//! belfry-bench model --file PATH [--chunk N] [--rows R --cols C]  belfry's screen model alone
//! belfry-bench sink [--rows R --cols C] [--mark TEXT] -- CMD… a terminal that discards output
//!                                                           (--mark: and says when TEXT came)
//! belfry-bench attach-client --socket PATH [--rows R --cols C]
//! belfry-bench echo-latency --keys N [--warmup W] -- CMD…   key → echo through a client
//! belfry-bench frame-echo --socket SOCK --keys N [--warmup W]  the same, protocol client
//! belfry-bench sends --daemon SOCK --host SOCK [--relay SOCK] --session S --count N [--warmup W]
//!                    [--race 1]                              guarded sends (see cmd_sends)
//! belfry-bench socket-relay --listen SOCK --to SOCK [--secs S] a minimal byte relay (the floor)
//! belfry-bench times --spec FILE                            wall time per invocation
//! belfry-bench pace --file PATH [--rate B --chunk N]         pane program: prints at a steady rate
//! belfry-bench stamp-recv --log FILE [--bracketed 0|1]       pane program: timestamps input
//! belfry-bench bench-adapter LOG                             DING adapter: one lease per message
//! belfry-bench ding --mode aggressive|rich …                 DING latency driver (see ding.rs)
//! ```

mod ding;
mod gen;
mod pty;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Parsed `--flag value` options and the command after `--`.
struct Args {
    flags: Vec<(String, String)>,
    command: Vec<String>,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args> {
        let mut flags = Vec::new();
        let mut i = 0;
        while i < args.len() {
            if args[i] == "--" {
                return Ok(Args {
                    flags,
                    command: args[i + 1..].to_vec(),
                });
            }
            let Some(name) = args[i].strip_prefix("--") else {
                return Err(format!("unexpected argument {:?}", args[i]).into());
            };
            let value = args
                .get(i + 1)
                .ok_or_else(|| format!("--{name} needs a value"))?;
            flags.push((name.to_string(), value.clone()));
            i += 2;
        }
        Ok(Args {
            flags,
            command: Vec::new(),
        })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn req(&self, name: &str) -> Result<&str> {
        self.get(name)
            .ok_or_else(|| format!("missing --{name}").into())
    }

    fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} {v:?} is not a number").into()),
        }
    }

    fn command(&self) -> Result<&[String]> {
        if self.command.is_empty() {
            return Err("give the command after --".into());
        }
        Ok(&self.command)
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((sub, rest)) = argv.split_first() else {
        eprintln!("usage: belfry-bench SUBCOMMAND … (see bench/README.md)");
        std::process::exit(2);
    };
    // The adapter's arguments come from `belfry new --ding-adapter ARG`, so they are
    // positional rather than `--flag value`.
    let result = if sub == "bench-adapter" {
        ding::cmd_bench_adapter(rest)
    } else {
        Args::parse(rest).and_then(|args| dispatch(sub, &args))
    };
    match result {
        Ok(out) => println!("{out}"),
        Err(err) => {
            eprintln!("belfry-bench {sub}: {err}");
            std::process::exit(1);
        }
    }
}

fn dispatch(sub: &str, args: &Args) -> Result<Value> {
    match sub {
        "gen" => cmd_gen(args),
        "raw-pty" => cmd_raw_pty(args),
        "relay" => cmd_relay(args),
        "model" => cmd_model(args),
        "sink" => cmd_sink(args),
        "attach-client" => cmd_attach_client(args),
        "echo-latency" => cmd_echo_latency(args),
        "frame-echo" => cmd_frame_echo(args),
        "sends" => cmd_sends(args),
        "socket-relay" => cmd_socket_relay(args),
        "times" => cmd_times(args),
        "pace" => cmd_pace(args),
        "stamp-recv" => ding::cmd_stamp_recv(args),
        "ding" => ding::cmd_ding(args),
        other => Err(format!("unknown subcommand {other:?}").into()),
    }
}

fn size(args: &Args) -> Result<(u16, u16)> {
    Ok((args.num("rows", 24)?, args.num("cols", 80)?))
}

fn term_env() -> Vec<(String, String)> {
    vec![("TERM".into(), "xterm-256color".into())]
}

/// `gen`: one deterministic data file.
fn cmd_gen(args: &Args) -> Result<Value> {
    let kind = match args.req("kind")? {
        "plain" => gen::Kind::Plain,
        "sgr" => gen::Kind::Sgr,
        other => return Err(format!("--kind {other:?} is not plain or sgr").into()),
    };
    let bytes: u64 = args.num("bytes", 0)?;
    let out = PathBuf::from(args.req("out")?);
    let written = gen::generate(kind, bytes, &out)?;
    let data = std::fs::read(&out)?;
    let escapes = data.iter().filter(|&&c| c == 0x1b).count();
    let newlines = data.iter().filter(|&&c| c == b'\n').count();
    Ok(json!({"bytes": written, "escapes": escapes, "lines": newlines}))
}

/// `raw-pty`: the baseline. Runs CMD on a fresh PTY and reads the master into a 64 KiB buffer
/// until the output ends (EIO once the child and its slave descriptors are gone).
fn cmd_raw_pty(args: &Args) -> Result<Value> {
    let (rows, cols) = size(args)?;
    let limit = Duration::from_secs(args.num("timeout-s", 600)?);
    let start = Instant::now();
    let pair = pty::open(rows, cols)?;
    let mut child = pty::spawn(args.command()?, &pair.slave, &term_env())?;
    drop(pair.slave);
    let fd = pty::raw(&pair.master);
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    let mut timed_out = true;
    let deadline = start + limit;
    while Instant::now() < deadline {
        match pty::read_timeout(fd, &mut buf, Duration::from_secs(1))? {
            pty::Read::Data(n) => bytes += n as u64,
            pty::Read::End => {
                timed_out = false;
                break;
            }
            pty::Read::Timeout => {}
        }
    }
    let status = pty::reap(&mut child, Duration::from_secs(5));
    let seconds = start.elapsed().as_secs_f64();
    if timed_out {
        return Err(format!("output did not end within {} s", limit.as_secs()).into());
    }
    Ok(
        json!({"seconds": seconds, "bytes": bytes, "cpu_s": own_cpu_seconds(),
              "exit": status.and_then(|s| s.code())}),
    )
}

/// `relay`: the physical cost of an attached terminal with no model at all. Runs CMD on a
/// fresh PTY (the pane's), reads its master into a 64 KiB buffer and writes every chunk to the
/// slave of a second PTY in raw mode (the client's terminal, which `belfry attach` also puts
/// in raw mode), whose master a second thread reads and discards (the terminal emulator).
/// Every byte crosses two PTYs, as it does on the way through any attach client; nothing else
/// is done with it. Ends when the program's output has ended and the second PTY is drained.
fn cmd_relay(args: &Args) -> Result<Value> {
    let (rows, cols) = size(args)?;
    let limit = Duration::from_secs(args.num("timeout-s", 600)?);
    let start = Instant::now();
    let deadline = start + limit;
    let pane = pty::open(rows, cols)?;
    let term = pty::open(rows, cols)?;
    pty::make_raw(&term.slave)?;
    let mut child = pty::spawn(args.command()?, &pane.slave, &term_env())?;
    drop(pane.slave);
    let screen = term.master;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let fd = pty::raw(&screen);
        let mut buf = vec![0u8; 64 * 1024];
        let mut bytes = 0u64;
        while Instant::now() < deadline {
            match pty::read_timeout(fd, &mut buf, Duration::from_secs(1))? {
                pty::Read::Data(n) => bytes += n as u64,
                pty::Read::End => break,
                pty::Read::Timeout => {}
            }
        }
        Ok(bytes)
    });
    let from = pty::raw(&pane.master);
    let to = pty::raw(&term.slave);
    // `--model 1`: every chunk is also applied to belfry's screen model, after it is written
    // on, in this same thread: the least a server that keeps a model and writes the client's
    // terminal itself (tmux's shape) can cost. `--model 2`: the chunk is handed to a second
    // thread that applies it, so the write never waits for the model.
    let mode = args.num("model", 0u8)?;
    let mut model = match mode {
        1 => Some(belfry_pty::screen::Screen::new(rows, cols, 2000)),
        _ => None,
    };
    let (model_tx, model_thread) = if mode == 2 {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let thread = std::thread::spawn(move || {
            let mut screen = belfry_pty::screen::Screen::new(rows, cols, 2000);
            for chunk in rx {
                screen.apply(&chunk);
            }
            screen.history_len()
        });
        (Some(tx), Some(thread))
    } else {
        (None, None)
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut relayed = 0u64;
    let mut timed_out = true;
    while Instant::now() < deadline {
        match pty::read_timeout(from, &mut buf, Duration::from_secs(1))? {
            pty::Read::Data(n) => {
                pty::write_all(to, &buf[..n])?;
                if let Some(screen) = model.as_mut() {
                    screen.apply(&buf[..n]);
                }
                if let Some(tx) = &model_tx {
                    let _ = tx.send(buf[..n].to_vec());
                }
                relayed += n as u64;
            }
            pty::Read::End => {
                timed_out = false;
                break;
            }
            pty::Read::Timeout => {}
        }
    }
    // The model thread has applied everything once its channel closes.
    drop(model_tx);
    if let Some(thread) = model_thread {
        thread
            .join()
            .map_err(|_| "the relay's model thread panicked")?;
    }
    // The last slave descriptor closes: the reader drains what is left and then reads EIO.
    drop(term.slave);
    let received = reader
        .join()
        .map_err(|_| "the relay's reader thread panicked")??;
    let status = pty::reap(&mut child, Duration::from_secs(5));
    let seconds = start.elapsed().as_secs_f64();
    if timed_out {
        return Err(format!("output did not end within {} s", limit.as_secs()).into());
    }
    Ok(
        json!({"seconds": seconds, "bytes": received, "relayed": relayed,
              "cpu_s": own_cpu_seconds(), "exit": status.and_then(|s| s.code())}),
    )
}

/// User + system CPU time of this process so far (children excluded).
fn own_cpu_seconds() -> f64 {
    // SAFETY: `usage` is a valid, writable rusage for the call.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// `model`: belfry's screen model (24x80 unless `--rows`/`--cols` say otherwise, 2000 lines
/// of history) fed the file as the pane
/// host's reader feeds it while a program prints without pause: reads of `--chunk` bytes
/// (default 4096, what the terminal layer hands out at a time), each applied as it comes
/// and allowed to hold back a tail for the next (nobody reads the screen meanwhile), with
/// `\n` turned into `\r\n` as the PTY's output processing would; at the end the screen is
/// brought up to date, as the first reader would. No PTY, no process hops: the cost of
/// keeping the model current.
fn cmd_model(args: &Args) -> Result<Value> {
    let data = std::fs::read(args.req("file")?)?;
    let mut bytes = Vec::with_capacity(data.len() + data.len() / 16);
    for &b in &data {
        if b == b'\n' {
            bytes.push(b'\r');
        }
        bytes.push(b);
    }
    drop(data);
    let (rows, cols): (u16, u16) = (args.num("rows", 24)?, args.num("cols", 80)?);
    if rows == 0 || cols == 0 {
        return Err("--rows and --cols must be at least 1".into());
    }
    let mut screen = belfry_pty::screen::Screen::new(rows, cols, 2000);
    let cpu0 = own_cpu_seconds();
    let start = Instant::now();
    let mut answers = 0usize;
    let chunk: usize = args.num("chunk", 4096)?;
    if chunk == 0 {
        return Err("--chunk must be at least 1".into());
    }
    for read in bytes.chunks(chunk) {
        answers += screen.apply_deferring(read).len();
    }
    screen.end_turn();
    let seconds = start.elapsed().as_secs_f64();
    Ok(
        json!({"seconds": seconds, "cpu_s": own_cpu_seconds() - cpu0, "bytes": bytes.len(), "chunk": chunk,
              "rows": rows, "cols": cols, "history": screen.history_len(), "answers": answers}),
    )
}

/// `sink`: a terminal whose screen is /dev/null. Runs CMD (an attach client) on a PTY and
/// discards its output until CMD ends or this process gets SIGTERM.
fn cmd_sink(args: &Args) -> Result<Value> {
    pty::install_stop_handler();
    let (rows, cols) = size(args)?;
    let limit = Duration::from_secs(args.num("timeout-s", 3600)?);
    let mut mark = args.get("mark").map(|m| Mark::new(m.as_bytes()));
    let pair = pty::open(rows, cols)?;
    let mut child = pty::spawn(args.command()?, &pair.slave, &term_env())?;
    drop(pair.slave);
    let fd = pty::raw(&pair.master);
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !pty::stopped() {
        match pty::read_timeout(fd, &mut buf, Duration::from_millis(100))? {
            pty::Read::Data(n) => {
                bytes += n as u64;
                if let Some(mark) = mark.as_mut() {
                    mark.scan(&buf[..n]);
                }
            }
            pty::Read::End => break,
            pty::Read::Timeout => {}
        }
    }
    // Closing the master hangs the client up (SIGHUP), as closing a terminal window would.
    drop(pair.master);
    let status = pty::reap(&mut child, Duration::from_secs(3));
    let mark_ns = mark.and_then(|m| m.seen_ns);
    Ok(json!({"bytes": bytes, "exit": status.and_then(|s| s.code()), "mark_ns": mark_ns}))
}

/// The first time a text came through a stream read in pieces: `CLOCK_MONOTONIC` in
/// nanoseconds (the clock of Python's `time.monotonic_ns`), taken right after the read that
/// completed it.
struct Mark {
    /// The text, its searcher built once: the sink runs beside what it measures, and reads a
    /// flood a few KiB at a time.
    finder: memchr::memmem::Finder<'static>,
    /// The last bytes read, fewer than the text: where a text cut between reads begins.
    tail: Vec<u8>,
    seen_ns: Option<u64>,
}

impl Mark {
    fn new(text: &[u8]) -> Mark {
        Mark {
            finder: memchr::memmem::Finder::new(text).into_owned(),
            tail: Vec::new(),
            seen_ns: None,
        }
    }

    fn scan(&mut self, read: &[u8]) {
        let len = self.finder.needle().len();
        if self.seen_ns.is_some() || len == 0 {
            return;
        }
        let keep = len - 1;
        // The tail joined to the read's first bytes finds a text cut between reads; the read
        // itself is searched where it lies.
        let head = &read[..read.len().min(keep)];
        let mut joined = std::mem::take(&mut self.tail);
        joined.extend_from_slice(head);
        if self.finder.find(&joined).is_some() || self.finder.find(read).is_some() {
            self.seen_ns = Some(ding::mono_ns());
            return;
        }
        // The new tail: the read's last bytes, or all of a short read after the old tail's.
        if read.len() >= keep {
            joined.clear();
            joined.extend_from_slice(&read[read.len() - keep..]);
        } else {
            let extra = joined.len().saturating_sub(keep);
            joined.drain(..extra);
        }
        self.tail = joined;
    }
}

fn write_line(stream: &mut UnixStream, value: &Value) -> Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    Ok(())
}

fn read_json_line<R: BufRead>(reader: &mut R) -> Result<Value> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err("connection closed".into());
    }
    Ok(serde_json::from_str(&line)?)
}

/// `attach-client`: a minimal attach client speaking the pane host's framed protocol (hello,
/// attach, then frames of 1 type byte + u32 BE length + payload), discarding the output. It
/// ends when the pane exits, the stream closes, or on SIGTERM.
fn cmd_attach_client(args: &Args) -> Result<Value> {
    pty::install_stop_handler();
    let (rows, cols) = size(args)?;
    // Its own socket code, not belfry's client: the frames that follow the attach reply are
    // read through one 256 KiB buffer from the first byte, as a real attach client would.
    let mut stream = UnixStream::connect(args.req("socket")?)?;
    let mut reader = BufReader::with_capacity(256 * 1024, stream.try_clone()?);
    write_line(
        &mut stream,
        &json!({"id": 0, "op": "hello", "versions": [1]}),
    )?;
    let hello = read_json_line(&mut reader)?;
    write_line(
        &mut stream,
        &json!({"id": 1, "op": "attach", "rows": rows, "cols": cols}),
    )?;
    let reply = read_json_line(&mut reader)?;
    if hello["ok"] != true || reply["ok"] != true {
        return Err(format!("attach refused: {hello} {reply}").into());
    }
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut bytes = 0u64;
    let mut frames = 0u64;
    // Full redraws: the first frame, then one per resynchronisation of a lagging client.
    let mut redraws = 0u64;
    let mut payload = vec![0u8; 64 * 1024];
    let mut ended = "eof";
    // Bounded by the stop signal and by a generous wall-clock limit.
    let deadline = Instant::now() + Duration::from_secs(args.num("timeout-s", 3600)?);
    'frames: while Instant::now() < deadline {
        let mut header = [0u8; 5];
        match read_exact_or_stop(&mut reader, &mut header)? {
            Some(()) => {}
            None => break,
        }
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if payload.len() < len {
            payload.resize(len, 0);
        }
        if read_exact_or_stop(&mut reader, &mut payload[..len])?.is_none() {
            break;
        }
        frames += 1;
        match header[0] {
            1 => {
                bytes += len as u64;
                if is_redraw(&payload[..len]) {
                    redraws += 1;
                }
            }
            2 => {
                let control: Value = serde_json::from_slice(&payload[..len])?;
                if control.get("exited").is_some() || control.get("detach").is_some() {
                    ended = "control";
                    break 'frames;
                }
            }
            other => return Err(format!("unknown frame type {other}").into()),
        }
    }
    if pty::stopped() {
        ended = "signal";
    }
    Ok(json!({"bytes": bytes, "frames": frames, "redraws": redraws, "ended": ended}))
}

/// True for a pane host's full-screen redraw (pty/src/screen/render.rs `redraw`): it starts with
/// `REDRAW_START`.
fn is_redraw(payload: &[u8]) -> bool {
    payload.starts_with(belfry_pty::screen::REDRAW_START)
}

/// Reads exactly `buf.len()` bytes, retrying read timeouts until the stop flag is set.
/// `None` on EOF or stop.
fn read_exact_or_stop<R: Read>(reader: &mut R, buf: &mut [u8]) -> Result<Option<()>> {
    let mut filled = 0;
    while filled < buf.len() {
        if pty::stopped() {
            return Ok(None);
        }
        match reader.read(&mut buf[filled..]) {
            Ok(0) => return Ok(None),
            Ok(n) => filled += n,
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(Some(()))
}

/// `echo-latency`: CMD is an attach client (of a pane whose program echoes every byte, e.g.
/// `stty raw -echo; cat`) running on a PTY we own. For each key: write one byte to our master
/// (the client's keyboard) and time until that byte comes back out of the master (the
/// client's screen). Colour queries in the client's start are answered, as a terminal does.
/// Every 40 keys a carriage return (not timed) keeps the cursor on one line,
/// so the screen never scrolls and each echo is one character.
fn cmd_echo_latency(args: &Args) -> Result<Value> {
    let (rows, cols) = size(args)?;
    let keys: usize = args.num("keys", 1000)?;
    let warmup: usize = args.num("warmup", 50)?;
    let gap = Duration::from_micros(args.num("gap-us", 2000)?);
    let pair = pty::open(rows, cols)?;
    let mut child = pty::spawn(args.command()?, &pair.slave, &term_env())?;
    drop(pair.slave);
    let fd = pty::raw(&pair.master);
    let mut buf = vec![0u8; 64 * 1024];
    // The client's first redraw. A terminal answers a client's colour queries (OSC 10 and
    // 11, foreground and background) at once; so does this one, as a real terminal would.
    let mut startup = 0;
    let mut seen = Vec::new();
    let mut answered = [false, false];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match pty::read_timeout(fd, &mut buf, Duration::from_millis(500))? {
            pty::Read::Data(n) => {
                startup += n;
                seen.extend_from_slice(&buf[..n]);
                for (at, (query, answer)) in [
                    (&b"\x1b]10;?"[..], &b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"[..]),
                    (b"\x1b]11;?", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),
                ]
                .iter()
                .enumerate()
                {
                    if !answered[at] && seen.windows(query.len()).any(|w| w == *query) {
                        pty::write_all(fd, answer)?;
                        answered[at] = true;
                    }
                }
            }
            pty::Read::End | pty::Read::Timeout => break,
        }
    }
    // Letters that are not the final byte of the escape sequences a redraw typically uses.
    const ALPHABET: &[u8] = b"aeiovwxyz";
    let mut samples = Vec::with_capacity(keys);
    let mut timeouts = 0usize;
    let mut extra_bytes = 0usize;
    for i in 0..warmup + keys {
        if i % 40 == 39 {
            pty::write_all(fd, b"\r")?;
            std::thread::sleep(Duration::from_millis(20));
            extra_bytes += pty::drain(fd, &mut buf)?;
        }
        let key = ALPHABET[i % ALPHABET.len()];
        extra_bytes += pty::drain(fd, &mut buf)?;
        let start = Instant::now();
        pty::write_all(fd, &[key])?;
        let deadline = start + Duration::from_secs(2);
        let mut seen = false;
        while !seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match pty::read_timeout(fd, &mut buf, left)? {
                pty::Read::Data(n) => seen = buf[..n].contains(&key),
                pty::Read::End => return Err("the client ended during the test".into()),
                pty::Read::Timeout => break,
            }
        }
        let elapsed = start.elapsed();
        if !seen {
            timeouts += 1;
        } else if i >= warmup {
            samples.push(elapsed.as_nanos() as u64);
        }
        std::thread::sleep(gap);
    }
    drop(pair.master);
    pty::reap(&mut child, Duration::from_secs(3));
    Ok(
        json!({"samples_ns": samples, "timeouts": timeouts, "startup_bytes": startup,
              "extra_bytes": extra_bytes}),
    )
}

/// `frame-echo`: the key-echo test without an attach client process: this program attaches to
/// the pane host socket itself, sends each key as a data frame and times until a data frame
/// containing it comes back. The difference to `echo-latency` through `belfry attach` is the
/// client's share.
fn cmd_frame_echo(args: &Args) -> Result<Value> {
    let (rows, cols) = size(args)?;
    let keys: usize = args.num("keys", 1000)?;
    let warmup: usize = args.num("warmup", 50)?;
    let gap = Duration::from_micros(args.num("gap-us", 2000)?);
    let mut stream = UnixStream::connect(args.req("socket")?)?;
    let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
    write_line(
        &mut stream,
        &json!({"id": 0, "op": "hello", "versions": [1]}),
    )?;
    let hello = read_json_line(&mut reader)?;
    write_line(
        &mut stream,
        &json!({"id": 1, "op": "attach", "rows": rows, "cols": cols}),
    )?;
    let reply = read_json_line(&mut reader)?;
    if hello["ok"] != true || reply["ok"] != true {
        return Err(format!("attach refused: {hello} {reply}").into());
    }
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let read_frame = |reader: &mut BufReader<UnixStream>| -> Result<(u8, Vec<u8>)> {
        let mut header = [0u8; 5];
        reader.read_exact(&mut header)?;
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut payload = vec![0u8; len];
        reader.read_exact(&mut payload)?;
        Ok((header[0], payload))
    };
    // The first frame is the redraw.
    read_frame(&mut reader)?;
    let frame = |bytes: &[u8]| {
        let mut out = vec![1u8];
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(bytes);
        out
    };
    const ALPHABET: &[u8] = b"aeiovwxyz";
    let mut samples = Vec::with_capacity(keys);
    let mut timeouts = 0usize;
    for i in 0..warmup + keys {
        if i % 40 == 39 {
            stream.write_all(&frame(b"\r"))?;
            // The echoed carriage return.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                let (kind, payload) = read_frame(&mut reader)?;
                if kind == 1 && payload.contains(&b'\r') {
                    break;
                }
            }
        }
        let key = ALPHABET[i % ALPHABET.len()];
        let start = Instant::now();
        stream.write_all(&frame(&[key]))?;
        let deadline = start + Duration::from_secs(2);
        let mut seen = false;
        while !seen && Instant::now() < deadline {
            match read_frame(&mut reader) {
                Ok((1, payload)) => seen = payload.contains(&key),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let elapsed = start.elapsed();
        if !seen {
            timeouts += 1;
        } else if i >= warmup {
            samples.push(elapsed.as_nanos() as u64);
        }
        std::thread::sleep(gap);
    }
    let _ = stream.write_all(&{
        let body = serde_json::to_vec(&json!({"detach": true}))?;
        let mut out = vec![2u8];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    });
    Ok(json!({"samples_ns": samples, "timeouts": timeouts}))
}

/// A kept-open connection through belfry's one client (the CLI's): hello at open, then one
/// request and one reply per call, each within its op's deadline.
struct Conn(belfry_transport::client::Client);

impl Conn {
    fn open(path: &str) -> Result<Conn> {
        Ok(Conn(belfry_transport::client::Client::connect(
            std::path::Path::new(path),
        )?))
    }

    fn call(&mut self, request: &Value) -> Result<Value> {
        Ok(self.0.request(request.clone())?)
    }
}

/// `sends`: guarded sends to one pane, round-robin over a connection to the daemon, one to
/// the pane host, one to the daemon that it handed to the pane host (`bind`) and, with
/// `--relay`, one through [`cmd_socket_relay`], each kept open. Times each
/// request from write to reply.
///
/// Without `--race`, each send expects the revision the previous reply reported, so on a quiet
/// pane every one succeeds and the samples are round trips of the whole guarded send. With
/// `--race 1` (for a pane that prints all the time), each attempt is a `snapshot` and then a
/// send guarded by the snapshot's revision, both on the same path, the way an agent reads the
/// screen and then answers it: the send wins if no output moved the pane in between, and the
/// result is each path's win rate.
fn cmd_sends(args: &Args) -> Result<Value> {
    let session = args.req("session")?;
    let count: usize = args.num("count", 2000)?;
    let warmup: usize = args.num("warmup", 100)?;
    let race = args.num::<u8>("race", 0)? == 1;
    // `bound`: a connection to the daemon that asked it to hand the connection to the pane
    // host (`bind`), so its requests reach the pane host with no daemon in between.
    let mut bound = Conn::open(args.req("daemon")?)?;
    let reply = bound.call(&json!({"id": 1, "op": "bind", "session": session}))?;
    if reply["role"] != "pane-host" {
        return Err(format!("bind was not handed to the pane host: {reply}").into());
    }
    let mut targets = vec![
        ("daemon", Conn::open(args.req("daemon")?)?),
        ("host", Conn::open(args.req("host")?)?),
        ("bound", bound),
    ];
    if let Some(relay) = args.get("relay") {
        targets.push(("relay", Conn::open(relay)?));
    }
    let snapshot = targets[0]
        .1
        .call(&json!({"id": 1, "op": "snapshot", "session": session}))?;
    let mut revision = snapshot["revision"]
        .as_u64()
        .ok_or_else(|| format!("snapshot has no revision: {snapshot}"))?;
    let mut samples: Vec<Vec<u64>> = targets.iter().map(|_| Vec::with_capacity(count)).collect();
    let mut wins = vec![0usize; targets.len()];
    let mut attempts = vec![0usize; targets.len()];
    let mut conflicts = 0usize;
    let mut id = 10u64;
    for i in 0..targets.len() * (warmup + count) {
        let which = i % targets.len();
        let counted = i / targets.len() >= warmup;
        let conn = &mut targets[which].1;
        if race {
            id += 1;
            let seen = conn.call(&json!({"id": id, "op": "snapshot", "session": session}))?;
            revision = seen["revision"]
                .as_u64()
                .ok_or_else(|| format!("snapshot has no revision: {seen}"))?;
        }
        id += 1;
        let request = json!({"id": id, "op": "send", "session": session,
                             "expect": {"revision": revision}, "input": [{"text": "x"}]});
        let start = Instant::now();
        let reply = conn.call(&request)?;
        let elapsed = start.elapsed();
        if reply["ok"] != true {
            return Err(format!("send failed: {reply}").into());
        }
        if counted {
            attempts[which] += 1;
        }
        match reply["result"].as_str() {
            Some("sent") => {
                revision = reply["revision"].as_u64().ok_or("sent without revision")?;
                if counted {
                    wins[which] += 1;
                    samples[which].push(elapsed.as_nanos() as u64);
                }
            }
            Some("conflict") => {
                // Something else moved the pane: read the revision fresh and go on.
                conflicts += 1;
                revision = reply["actual"]["revision"]
                    .as_u64()
                    .ok_or("conflict without revision")?;
            }
            _ => return Err(format!("unexpected send reply: {reply}").into()),
        }
    }
    let mut out = serde_json::Map::new();
    for (k, (name, _)) in targets.iter().enumerate() {
        out.insert(name.to_string(), json!(samples[k]));
        out.insert(
            format!("{name}_wins"),
            json!({"wins": wins[k], "attempts": attempts[k]}),
        );
    }
    out.insert("conflicts".into(), json!(conflicts));
    out.insert("final_revision".into(), json!(revision));
    Ok(Value::Object(out))
}

/// `socket-relay`: listens on `--listen` and relays each connection's bytes to a new connection to
/// `--to` and back, one thread per direction, parsing nothing. It is the least a second
/// process between a client and a pane host can cost (two more socket traversals and two more
/// wake-ups per round trip), the floor for the daemon's forwarding. Serves until `--secs`
/// (default 600) have passed, then exits; prints `{"ready": true}` once listening.
fn cmd_socket_relay(args: &Args) -> Result<Value> {
    use std::os::unix::net::UnixListener;
    let listen = args.req("listen")?;
    let to = args.req("to")?.to_string();
    let secs: u64 = args.num("secs", 600)?;
    let listener = UnixListener::bind(listen)?;
    println!("{}", json!({"ready": true}));
    std::io::stdout().flush()?;
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        std::process::exit(0);
    });
    for client in listener.incoming() {
        let client = client?;
        let upstream = UnixStream::connect(&to)?;
        for (mut from, mut into) in [
            (client.try_clone()?, upstream.try_clone()?),
            (upstream, client),
        ] {
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match from.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if into.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = into.shutdown(std::net::Shutdown::Write);
            });
        }
    }
    Ok(json!({"done": true}))
}

/// `pace`: a pane program that prints without pause at a steady rate: the first MiB of
/// `--file`, over and over, `--chunk` bytes (4096) per write at `--rate` bytes a second (4 MiB),
/// on an absolute schedule. Every multiplexer keeps up with it, so each one's busy session
/// loads the machine alike, where `cat` in a loop prints as fast as each one reads and loads
/// it in proportion to how fast that is. Falling behind by more than 50 ms (a reader that
/// does not keep up) restarts the schedule rather than bursting. Runs until killed.
fn cmd_pace(args: &Args) -> Result<Value> {
    use std::os::fd::AsFd as _;
    let chunk: usize = args.num("chunk", 4096)?;
    let rate: u64 = args.num("rate", 4 << 20)?;
    if chunk == 0 || rate == 0 {
        return Err("--chunk and --rate must be more than 0".into());
    }
    let path = args.req("file")?;
    let mut data = Vec::new();
    std::fs::File::open(path)
        .map_err(|err| format!("--file {path}: {err}"))?
        .take(1 << 20)
        .read_to_end(&mut data)?;
    if data.len() < chunk {
        return Err(format!("--file {path} holds fewer than --chunk {chunk} bytes").into());
    }
    // The descriptor itself: the standard library's stdout would split every write at its
    // newlines.
    let mut out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let interval = Duration::from_secs_f64(chunk as f64 / rate as f64);
    let mut next = Instant::now();
    let mut at = 0;
    loop {
        if at + chunk > data.len() {
            at = 0;
        }
        out.write_all(&data[at..at + chunk])?;
        at += chunk;
        next += interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > Duration::from_millis(50) {
            next = now;
        }
    }
}

/// `times`: wall time of whole command invocations (fork/exec to exit), commands interleaved
/// so background load hits them alike, in a new order every round (a fixed-seed shuffle):
/// in a fixed order each command always ran right after the same one, and the first one after
/// the last, which in the dispatch section was a 30 ms Python start that left the caches cold
/// for it (0.25 ms at p50, every run). The spec file is
/// `{"runs": N, "warmup": W, "commands": [{"name", "argv", "stdin"?: PATH, "env"?: {…}}]}`.
fn cmd_times(args: &Args) -> Result<Value> {
    let spec: Value = serde_json::from_slice(&std::fs::read(args.req("spec")?)?)?;
    let runs = spec["runs"].as_u64().unwrap_or(200) as usize;
    let warmup = spec["warmup"].as_u64().unwrap_or(10) as usize;
    let commands = spec["commands"]
        .as_array()
        .ok_or("spec has no commands array")?;
    struct Cmd {
        name: String,
        argv: Vec<String>,
        stdin: Option<Vec<u8>>,
        env: Vec<(String, String)>,
    }
    let mut parsed = Vec::new();
    for c in commands {
        let argv: Vec<String> = c["argv"]
            .as_array()
            .ok_or("command without argv")?
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect();
        if argv.is_empty() {
            return Err("empty argv".into());
        }
        let stdin = match c["stdin"].as_str() {
            Some(path) => Some(std::fs::read(path)?),
            None => None,
        };
        let env = c["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        parsed.push(Cmd {
            name: c["name"].as_str().unwrap_or(&argv[0]).to_string(),
            argv,
            stdin,
            env,
        });
    }
    let mut samples: Vec<Vec<u64>> = vec![Vec::with_capacity(runs); parsed.len()];
    let mut failures = vec![0usize; parsed.len()];
    let mut first_output: Vec<Option<String>> = vec![None; parsed.len()];
    let mut rng = gen::Rng::new(0x5eed_0f71);
    let mut order: Vec<usize> = (0..parsed.len()).collect();
    for round in 0..warmup + runs {
        // Fisher-Yates.
        for k in (1..order.len()).rev() {
            order.swap(k, rng.below(k as u64 + 1) as usize);
        }
        for &i in &order {
            let c = &parsed[i];
            let mut cmd = Command::new(&c.argv[0]);
            cmd.args(&c.argv[1..])
                .stdin(if c.stdin.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            for (k, v) in &c.env {
                cmd.env(k, v);
            }
            let start = Instant::now();
            let mut child = cmd.spawn()?;
            if let Some(input) = &c.stdin {
                let mut stdin = child.stdin.take().ok_or("no stdin pipe")?;
                // Hook payloads are small: one write, then EOF.
                stdin.write_all(input)?;
            }
            let output = child.wait_with_output()?;
            let elapsed = start.elapsed();
            if !output.status.success() {
                failures[i] += 1;
            }
            if first_output[i].is_none() {
                let text = String::from_utf8_lossy(&output.stdout);
                first_output[i] = Some(text.chars().take(300).collect());
            }
            if round >= warmup {
                samples[i].push(elapsed.as_nanos() as u64);
            }
        }
    }
    let mut out = serde_json::Map::new();
    for (i, c) in parsed.iter().enumerate() {
        out.insert(
            c.name.clone(),
            json!({"samples_ns": samples[i], "failures": failures[i],
                   "first_stdout": first_output[i]}),
        );
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::Mark;

    #[test]
    fn a_mark_is_found_however_the_reads_cut_it_and_not_before_it_is_whole() {
        let stream = b"xxBENCH-DONEyy";
        for first in 0..=stream.len() {
            for second in first..=stream.len() {
                let mut mark = Mark::new(b"BENCH-DONE");
                let reads = [&stream[..first], &stream[first..second], &stream[second..]];
                let mut seen_after = None;
                for (i, read) in reads.iter().enumerate() {
                    mark.scan(read);
                    if mark.seen_ns.is_some() && seen_after.is_none() {
                        seen_after = Some(i);
                    }
                }
                // The read that brings the mark's last byte (index 11) is where it is seen.
                let last = if second >= 12 {
                    if first >= 12 {
                        0
                    } else {
                        1
                    }
                } else {
                    2
                };
                assert_eq!(seen_after, Some(last), "reads cut at {first} and {second}");
            }
        }
        let mut mark = Mark::new(b"BENCH-DONE");
        for read in [&b"BENCH-"[..], b"DON", b"x", b"E"] {
            mark.scan(read);
        }
        assert_eq!(mark.seen_ns, None, "a broken mark is not the mark");
    }
}
