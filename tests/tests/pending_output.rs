//! spec §3 step 1: before a guarded send compares, every byte the program has finished writing is
//! read into the model, including bytes still in the kernel's tty flip buffer, which `FIONREAD`
//! on the master does not count.

use std::time::{Duration, Instant};

use belfry_tests::{monotonic_ns, ticker_bin, Conn, Env};
use serde_json::json;

/// The highest tick whose line is complete on the snapshot's screen.
fn last_tick(snapshot: &serde_json::Value) -> Option<u64> {
    snapshot["lines"]
        .as_array()?
        .iter()
        .filter_map(|line| {
            let line = line.as_str()?.trim_end();
            let digits = line.strip_prefix("tick ")?.strip_suffix('.')?;
            (digits.len() == 12).then(|| digits.parse::<u64>().ok())?
        })
        .max()
}

/// The ticker stamps each tick with `CLOCK_MONOTONIC` after its `write(2)` returned. The sender
/// takes a snapshot (revision R, last tick L), reads the same clock (T), and sends a guarded,
/// empty transaction expecting R. If that send wins, the pane had no output beyond the snapshot
/// when it compared, so tick L+1 must not have been finished before T: a win with
/// `done(L+1) < T` compared against a revision missing output the program had already written.
///
/// 100,000 sends over a direct pane-host connection take about 30 s. Before the drain read until
/// `EAGAIN` (it trusted `FIONREAD == 0`), 150 to 520 of about 85,000 wins per run missed a tick.
#[test]
fn winning_sends_never_miss_output_finished_before_the_send() {
    const SENDS: u64 = 100_000;
    let env = Env::new();
    let done_path = env.path("ticks.done");
    let ticker = ticker_bin().display().to_string();
    let done_s = done_path.display().to_string();
    env.spawn(
        "ticker",
        "4x40",
        &[&ticker, "--done", &done_s, "--interval-us", "1000"],
        Some("tick"),
    );
    let mut conn = Conn::open(&env.pane_socket("ticker")).unwrap();
    let started = Instant::now();
    // (last tick in the snapshot, the sender's clock just before the send was issued)
    let mut wins: Vec<(u64, u64)> = Vec::new();
    let mut sends = 0u64;
    while sends < SENDS {
        let snapshot = conn.request(json!({"op":"snapshot"}));
        let Some(last) = last_tick(&snapshot) else {
            continue;
        };
        let revision = snapshot["revision"].as_u64().expect("revision");
        let issued_at = monotonic_ns();
        let reply = conn.request(json!({"op":"send","expect":{"revision":revision},"input":[]}));
        sends += 1;
        match reply["result"].as_str() {
            Some("sent") => wins.push((last, issued_at)),
            Some("conflict") => {}
            _ => panic!("send failed: {reply}"),
        }
    }
    let elapsed = started.elapsed();
    // Let the ticker stamp the ticks it is writing right now.
    std::thread::sleep(Duration::from_millis(100));
    let done = std::fs::read(&done_path).expect("ticker's done file");
    let done_at = |tick: u64| -> Option<u64> {
        let at = usize::try_from(tick * 8).ok()?;
        let bytes: [u8; 8] = done.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(bytes)).filter(|&ns| ns != 0)
    };
    let missed: Vec<(u64, u64, u64)> = wins
        .iter()
        .filter_map(|&(last, issued_at)| {
            let next_done = done_at(last + 1)?;
            (next_done < issued_at).then(|| (last, issued_at, issued_at - next_done))
        })
        .collect();
    eprintln!(
        "{sends} guarded sends in {elapsed:?}: {} won, {} conflicted, {} wins missed output",
        wins.len(),
        sends - wins.len() as u64,
        missed.len()
    );
    assert!(
        wins.len() as u64 > SENDS / 10,
        "too few winning sends ({}) for the check to mean anything",
        wins.len()
    );
    assert!(
        missed.is_empty(),
        "{} of {} winning sends compared against a revision missing a tick the program had \
         finished writing before the send was issued (first: last tick {}, tick {} done {} ns \
         before the send)",
        missed.len(),
        wins.len(),
        missed[0].0,
        missed[0].0 + 1,
        missed[0].2
    );
}
