//! Fuzz target: the bench server's control-protocol decoder on a byte
//! stream as a client would send it, and what the server does with each
//! decoded frame before it allocates (spec checks, costing, the budget),
//! plus the udp-rr join gate on the same bytes as datagrams. Invariants in
//! `offload_fuzz::bench_control`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offload_fuzz::bench_control(data));
