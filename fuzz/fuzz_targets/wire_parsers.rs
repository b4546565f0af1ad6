//! Fuzz target `wire_parsers`: see `offload_fuzz::wire_parsers` for the input format and the
//! invariants it checks.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offload_fuzz::wire_parsers(data));
