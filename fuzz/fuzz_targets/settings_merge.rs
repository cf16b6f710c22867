//! A harness's settings file (JSON with comments), read and merged as `belfry hooks apply`
//! merges it: see `belfry_hooks::fuzzing::settings_merge`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_hooks::fuzzing::settings_merge(data);
});
