//! `belfry-test-recorder`: a small terminal program for belfry's tests.
//!
//! It puts its terminal in raw mode and appends every byte it reads to `--log FILE`, so a test
//! can prove exactly which bytes reached the program (and that a conflict wrote none).
//! Options: `--bracketed` enables bracketed paste (DECSET 2004); `--echo` echoes what it reads;
//! `--noisy` prints a line every millisecond; `--cpr` asks for the cursor position at start-up
//! and prints whether an answer came within two seconds; `--alt` draws on the alternate screen;
//! `--exit-on-eot` exits when it reads C-d; `--print-on-resize` prints a line when the terminal
//! size changes; `--cpr-on-q` asks for the cursor position each time it reads `q`; `--da1-on-q`
//! asks for the device attributes (`ESC[c`) each time it reads `q`;
//! `--stall-while FILE` stops reading its input for as long as FILE exists (a program that
//! stops reading, so the PTY's input buffer fills and writes to it block); `--mark-start`
//! writes `RS recorder-start RS` to the log when it starts, so one log shared by several
//! programs in turn can be cut into what each read.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// What `--mark-start` writes to the log when the recorder starts (record separators around a
/// word no input contains).
const START_MARK: &[u8] = b"\x1erecorder-start\x1e";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let log_path = args
        .iter()
        .position(|a| a == "--log")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let stdin = std::io::stdin();
    if let Ok(mut termios) = rustix::termios::tcgetattr(&stdin) {
        termios.make_raw();
        let _ = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &termios);
    }
    let mut out = std::io::stdout();
    if flag("--cpr") {
        let _ = out.write_all(b"\x1b[6n");
        let _ = out.flush();
        let answer = read_answer(Duration::from_secs(2));
        let shown: String = answer
            .iter()
            .map(|&b| {
                if b == 0x1b {
                    "ESC".to_string()
                } else {
                    (b as char).to_string()
                }
            })
            .collect();
        let verdict = if answer.ends_with(b"R") && answer.starts_with(b"\x1b[") {
            "ok"
        } else {
            "none"
        };
        let _ = write!(out, "CPR:{verdict} {shown}\r\n");
    }
    if flag("--bracketed") {
        let _ = out.write_all(b"\x1b[?2004h");
    }
    if flag("--alt") {
        let _ = out.write_all(
            b"\x1b[?1049h\x1b[2J\x1b[3;5H\x1b[1;32mALT SCREEN\x1b[0m\x1b[5;1Hrow five\x1b[1;1H",
        );
    }
    let _ = out.write_all(b"READY\r\n");
    let _ = out.flush();
    if flag("--print-on-resize") {
        // Real program output caused by a resize, without touching the input stream.
        std::thread::spawn(|| {
            let size = || {
                rustix::termios::tcgetwinsize(std::io::stdout())
                    .map(|w| (w.ws_row, w.ws_col))
                    .ok()
            };
            let mut last = size();
            loop {
                std::thread::sleep(Duration::from_millis(5));
                let now = size();
                if now != last {
                    last = now;
                    let mut out = std::io::stdout();
                    let _ = write!(out, "resized\r\n");
                    let _ = out.flush();
                }
            }
        });
    }
    if flag("--noisy") {
        std::thread::spawn(|| {
            let mut out = std::io::stdout();
            let mut n: u64 = 0;
            loop {
                n += 1;
                if write!(out, "tick {n}\r\n")
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
    let mut log = log_path.map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("recorder: cannot open --log file")
    });
    if flag("--mark-start") {
        // One log may hold what several programs read (a pane made again after its pane host
        // was killed runs a new recorder on the same file): each start is marked, so a test
        // can tell which program read what.
        if let Some(log) = log.as_mut() {
            let _ = log.write_all(START_MARK);
        }
    }
    let echo = flag("--echo");
    let cpr_on_q = flag("--cpr-on-q");
    let da1_on_q = flag("--da1-on-q");
    let exit_on_eot = flag("--exit-on-eot");
    let stall_while = args
        .iter()
        .position(|a| a == "--stall-while")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let mut buf = [0u8; 65536];
    let mut stdin = stdin.lock();
    loop {
        while stall_while.as_ref().is_some_and(|path| path.exists()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if let Some(log) = log.as_mut() {
            let _ = log.write_all(&buf[..n]);
        }
        if echo {
            let _ = out.write_all(&buf[..n]);
            let _ = out.flush();
        }
        if cpr_on_q && buf[..n].contains(&b'q') {
            // Ask the terminal where the cursor is; the answer arrives as input (and is logged).
            let _ = out.write_all(b"\x1b[6n");
            let _ = out.flush();
        }
        if da1_on_q && buf[..n].contains(&b'q') {
            let _ = out.write_all(b"\x1b[c");
            let _ = out.flush();
        }
        if exit_on_eot && buf[..n].contains(&4) {
            return;
        }
    }
}

/// Reads a terminal answer (up to `R`) from stdin, giving up after `limit`.
fn read_answer(limit: Duration) -> Vec<u8> {
    let start = Instant::now();
    let mut answer = Vec::new();
    let stdin = std::io::stdin();
    while start.elapsed() < limit {
        let mut fds = [rustix::event::PollFd::new(
            &stdin,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        };
        if rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
            continue;
        }
        let mut byte = [0u8; 1];
        if rustix::io::read(&stdin, &mut byte).unwrap_or(0) == 0 {
            break;
        }
        answer.push(byte[0]);
        if byte[0] == b'R' {
            break;
        }
    }
    answer
}
