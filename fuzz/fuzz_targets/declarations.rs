//! A `belfry.kdl` read and planned: see `belfry_mux::fuzzing::declarations`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_mux::fuzzing::declarations(data);
});
