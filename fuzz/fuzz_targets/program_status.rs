//! OSC 7501 program status strings in a program's output, cut into reads any way, and the
//! records they leave: see `belfry_pty::fuzzing::program_status`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_pty::fuzzing::program_status(data);
});
