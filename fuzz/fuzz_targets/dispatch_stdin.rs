//! A hook's stdin, dispatched for one event in one dialect: see
//! `belfry_hooks::fuzzing::dispatch_stdin`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_hooks::fuzzing::dispatch_stdin(data);
});
