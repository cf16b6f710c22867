//! One request line on a socket, read and written back: see
//! `belfry_proto::fuzzing::request_line`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_proto::fuzzing::request_line(data);
});
