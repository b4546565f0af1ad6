//! Fuzz target `gso_segment`: see `offload_fuzz::gso_segment` for the input format and the
//! invariants it checks.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offload_fuzz::gso_segment(data));
