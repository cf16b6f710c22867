//! A message file's text, read, written back and read again: see
//! `belfry_ding::fuzzing::message_text`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_ding::fuzzing::message_text(data);
});
