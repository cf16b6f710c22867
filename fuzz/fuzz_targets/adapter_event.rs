//! One line of an adapter's event stream: see `belfry_ding::fuzzing::adapter_event`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    belfry_ding::fuzzing::adapter_event(data);
});
