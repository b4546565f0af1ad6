//! Fuzz target: `offload analyze`'s whole pass on a capture built from the
//! input (link type, cut frames and frames chosen by the fuzzer; see
//! `offload_fuzz::analyze_capture`). Any panic, hang or huge allocation is a
//! bug; the pass must read every frame of the well-formed capture.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offload_fuzz::analyze_capture(data));
