//! A canonical hooks file (KDL), read and compiled as `belfry hooks` does: see
//! `belfry_hooks::fuzzing::canonical_file`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_hooks::fuzzing::canonical_file(data);
});
