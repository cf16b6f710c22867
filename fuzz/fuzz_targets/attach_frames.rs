//! An attach stream read by both frame readers, cut into reads any way and with reads given
//! up half-way: see `belfry_pty::fuzzing::attach_frames`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_pty::fuzzing::attach_frames(data);
});
