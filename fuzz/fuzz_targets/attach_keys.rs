//! Keystrokes as an attached client's terminal sends them, cut into reads any way: see
//! `belfry_cli::fuzzing::attach_keys`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_cli::fuzzing::attach_keys(data);
});
