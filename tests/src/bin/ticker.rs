//! `belfry-test-ticker`: prints a numbered tick line every `--interval-us` microseconds (default
//! 1000) and records, for each tick, the moment its `write(2)` returned.
//!
//! The moment is `CLOCK_MONOTONIC` in nanoseconds, the clock every process on the machine shares,
//! stored as a little-endian `u64` at offset `8 × n` of `--done FILE` for tick `n` (ticks count
//! from 1). A test can then tell, for any instant of its own, exactly which ticks the program had
//! finished writing by then. Tick lines are `tick NNNNNNNNNNNN.` so a line cut in the middle of a
//! chunk never parses as a complete tick. The terminal is put in raw mode and anything written to
//! the program is read and discarded, so input never blocks the pane.

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::time::Duration;

fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let Some(done_path) = value("--done") else {
        eprintln!("usage: belfry-test-ticker --done FILE [--interval-us N]");
        std::process::exit(2);
    };
    let interval = value("--interval-us")
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_millis(1), Duration::from_micros);
    let done = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&done_path)
        .unwrap_or_else(|err| {
            eprintln!("belfry-test-ticker: cannot open {done_path}: {err}");
            std::process::exit(2);
        });
    let stdin = std::io::stdin();
    if let Ok(mut termios) = rustix::termios::tcgetattr(&stdin) {
        termios.make_raw();
        let _ = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &termios);
    }
    std::thread::spawn(|| {
        let mut sink = [0u8; 4096];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    });
    let stdout = std::io::stdout();
    for n in 1u64.. {
        let line = format!("tick {n:012}.\r\n");
        let mut rest = line.as_bytes();
        while !rest.is_empty() {
            match rustix::io::write(&stdout, rest) {
                Ok(written) => rest = &rest[written..],
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
        // Taken after write(2) returned: by this instant the whole line is in the kernel.
        let stamp = monotonic_ns();
        if done.write_all_at(&stamp.to_le_bytes(), n * 8).is_err() {
            return;
        }
        std::thread::sleep(interval);
    }
}
