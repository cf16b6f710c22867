//! The pane host's screen model against the reference model (history in the core's grid),
//! on any output cut into any reads: see `belfry_pty::fuzzing::screen_against_core`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_pty::fuzzing::screen_against_core(data);
});
