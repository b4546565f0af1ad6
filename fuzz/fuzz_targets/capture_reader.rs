//! Fuzz target: the pcap/pcapng reader on arbitrary bytes.
//!
//! Feeds the input as a stream (size unknown); any panic, hang or huge
//! allocation is a bug. Invariants checked (in `offload_fuzz::capture_reader`,
//! shared with the stable replay driver): frame numbers increase, a frame's
//! interface exists, and error offsets stay within the input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offload_fuzz::capture_reader(data));
