//! Property tests of the wire vocabulary: every request survives a trip through JSON, and no
//! line, however arbitrary, panics the parser. Each run draws fresh cases from a seed it
//! prints on failure, so a failure can be replayed with `BELFRY_PROTO_SEED`.

use arbitrary::{Arbitrary, Unstructured};
use serde_json::Value;

use crate::request::{Op, Request};

/// Cases per property.
const CASES: usize = 20_000;

/// A small xorshift generator: the cases need variety, not cryptographic quality. Seeded from
/// `BELFRY_PROTO_SEED` or the clock; the wire types' properties draw from it too.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn seeded() -> (Rng, u64) {
        let seed = std::env::var("BELFRY_PROTO_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        (Rng(seed), seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn every_request_round_trips_through_json() {
    let (mut rng, seed) = Rng::seeded();
    let mut made = 0;
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..CASES {
        let len = (rng.next() % 512) as usize;
        let bytes = rng.bytes(len);
        let mut u = Unstructured::new(&bytes);
        let (Ok(id), Ok(op)) = (u.arbitrary::<u32>(), Op::arbitrary(&mut u)) else {
            continue;
        };
        let request = Request::new(id, op);
        crate::fuzzing::assert_reads_back(&request, &format!("seed {seed}: "));
        names.insert(request.op.name());
        made += 1;
    }
    assert!(
        made > CASES / 2,
        "seed {seed}: only {made} requests were made"
    );
    assert_eq!(
        names.len(),
        Op::NAMES.len(),
        "seed {seed}: some ops were never drawn: {names:?}"
    );
}

/// Mutations of real request lines reach the field parsers, not only the JSON parser.
fn mutate(rng: &mut Rng, line: &mut Vec<u8>) {
    const PIECES: [&[u8]; 12] = [
        b"null",
        b"\"\"",
        b"-1",
        b"1e400",
        b"[]",
        b"{}",
        b"\"op\"",
        b"true",
        b"\\u0000",
        b"18446744073709551616",
        b",",
        b"\"session\":null",
    ];
    for _ in 0..=(rng.next() % 3) {
        if line.is_empty() {
            return;
        }
        let at = (rng.next() as usize) % line.len();
        match rng.next() % 3 {
            0 => {
                line.remove(at);
            }
            1 => line.insert(at, rng.next() as u8),
            _ => {
                let piece = PIECES[(rng.next() as usize) % PIECES.len()];
                line.splice(at..at, piece.iter().copied());
            }
        }
    }
}

#[test]
fn arbitrary_lines_never_panic_the_parser() {
    let (mut rng, seed) = Rng::seeded();
    let mut reached_fields = 0;
    for case in 0..CASES {
        let line = match case % 3 {
            0 => {
                let len = (rng.next() % 256) as usize;
                rng.bytes(len)
            }
            _ => {
                let bytes = rng.bytes(256);
                let mut u = Unstructured::new(&bytes);
                let Ok(op) = Op::arbitrary(&mut u) else {
                    continue;
                };
                let mut line = Request::new(case as u64, op).to_line();
                line.pop();
                mutate(&mut rng, &mut line);
                line
            }
        };
        let outcome = std::panic::catch_unwind(|| Request::parse(&line));
        let Ok(result) = outcome else {
            panic!(
                "seed {seed}: the parser panicked on {:?}",
                String::from_utf8_lossy(&line)
            );
        };
        if let Err(bad) = result {
            assert!(
                !bad.message.is_empty(),
                "seed {seed}: an error without a message"
            );
            if serde_json::from_slice::<Value>(&line).is_ok() {
                reached_fields += 1;
            }
        }
    }
    assert!(
        reached_fields > 100,
        "seed {seed}: only {reached_fields} bad lines got past the JSON parser"
    );
}
