//! Measures the oracle: mean and percentiles of one `run_train` of a
//! 20-segment TCP/IPv4 train, with how many runs needed a replay.
//!
//! `cargo run -p offload-lab --release --example oracle_timing [TRAINS] [FLUSH_TIMEOUT_MS] [meta]`
//! (`meta`: also collect GSO metadata through the second capture socket)
//! (root and /dev/net/tun needed).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use offload_lab::{GroKnobs, KernelGro};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let trains: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(500);
    let ft_ms: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(20);
    let meta = args.next().is_some_and(|a| a == "meta");
    require_root();
    let setup = Instant::now();
    let mut o = KernelGro::new(GroKnobs {
        flush_timeout: Duration::from_millis(ft_ms),
        ..GroKnobs::default()
    })?;
    o.set_gso_meta(meta)?;
    let setup = setup.elapsed();
    let train: Vec<Vec<u8>> = (0..20)
        .map(|i| {
            let ip = V4::new(o.peer_ipv4(), o.tap_ipv4(), 100 + i as u16, true);
            let t = Tcp {
                sport: 40000,
                dport: 5001,
                seq: 1 + 1400 * i as u32,
                ack: 1,
                flags: ACK,
            };
            tcp4(o.tap_mac(), o.peer_mac(), ip, t, &payload(1400 * i, 1400))
        })
        .collect();
    let mut times = Vec::with_capacity(trains);
    let (mut replays, mut unclean, mut wrong) = (0, 0, 0);
    let all = Instant::now();
    for _ in 0..trains {
        let t = Instant::now();
        let r = o.run_train_detailed(&train)?;
        times.push(t.elapsed());
        replays += r.attempts - 1;
        unclean += usize::from(!r.clean);
        wrong += usize::from(r.frames.len() != 1);
    }
    let total = all.elapsed();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!("oracle setup: {:.1} ms", setup.as_secs_f64() * 1e3);
    println!(
        "{trains} trains of 20 x 1400 B, gro_flush_timeout {ft_ms} ms, gso metadata {meta}, jiffy {:?}",
        o.jiffy()
    );
    println!(
        "run_train: mean {:.2} ms, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        total.as_secs_f64() * 1e3 / trains as f64,
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.9).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        pct(1.0).as_secs_f64() * 1e3,
    );
    println!(
        "replays: {replays}, answers not from a clean run: {unclean}, answers != 1 frame: {wrong}"
    );
    Ok(())
}
