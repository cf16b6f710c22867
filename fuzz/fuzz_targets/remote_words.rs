//! Hosts, a `hosts` config, an ssh command and the words of a far command: see
//! `belfry_mux::fuzzing::remote_words`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_mux::fuzzing::remote_words(data);
});
