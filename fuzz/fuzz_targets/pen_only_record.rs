//! Output recorded as an attached client's terminal sees it, with and without the screen
//! model's plain-line ranges: see `belfry_pty::fuzzing::pen_only_record`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_pty::fuzzing::pen_only_record(data);
});
