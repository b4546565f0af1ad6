//! Fuzz target `gro_engine`: see `offload_fuzz::gro_engine` for the input format and the
//! invariants it checks.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offload_fuzz::gro_engine(data));
