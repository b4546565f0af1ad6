//! Kernel conformance, TCP over IPv4 and IPv6: seeded random trains through
//! the live kernel's GRO (a TAP with NAPI in a private namespace) and
//! through the engine, compared flow by flow, byte for byte.
//!
//! Needs root and /dev/net/tun. It fails, never skips, where it cannot run.
//! `OFFLOAD_CONFORMANCE_TRAINS` sets the trains per size (default 1000, so
//! the two sizes give 2000 trains); `OFFLOAD_CONFORMANCE_SEED` the first seed.

use offload::GroConfig;
use offload_conformance::generate::{tcp_train, Addrs, Class};
use offload_conformance::{compare, engine_gro};
use offload_lab::oracle::{GroKnobs, KernelGro};
use std::collections::BTreeMap;
use std::time::Duration;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn addrs(k: &KernelGro) -> Addrs {
    Addrs {
        dst_mac: k.tap_mac(),
        src_mac: k.peer_mac(),
        dst4: k.tap_ipv4().octets(),
        src4: k.peer_ipv4().octets(),
        dst6: k.tap_ipv6().octets(),
        src6: k.peer_ipv6().octets(),
    }
}

fn run_size(size: u32, seed_base: u64) {
    let trains = env_u64("OFFLOAD_CONFORMANCE_TRAINS", 1000);
    let knobs = GroKnobs {
        gro_max_size: size,
        gro_ipv4_max_size: size,
        flush_timeout: Duration::from_millis(20),
        ..GroKnobs::default()
    };
    let mut kernel = KernelGro::new(knobs).expect("the kernel oracle needs root and /dev/net/tun");
    let a = addrs(&kernel);
    let cfg = GroConfig {
        gro_max_size: size,
        gro_ipv4_max_size: size,
        flush_timeout_ns: 10_000_000,
        verify_checksums: true,
    };
    let mut failures = Vec::new();
    let mut per_class: BTreeMap<&'static str, (u32, u32)> = BTreeMap::new();
    for i in 0..trains {
        let seed = seed_base + i;
        // Cycle through every class first, then draw classes at random.
        let class = Class::ALL.get(i as usize).copied();
        let train = tcp_train(seed, &a, class);
        let k = kernel.run_train(&train.frames).expect("oracle run");
        let e = engine_gro(&cfg, &train.frames);
        let entry = per_class.entry(train.class.name()).or_default();
        entry.0 += 1;
        if let Some(diff) = compare(&k, &e) {
            entry.1 += 1;
            failures.push(format!(
                "seed {seed} class {} size {size}: {}\n{diff}",
                train.class.name(),
                train.notes
            ));
        }
    }
    eprintln!("gro size {size}: {trains} trains");
    for (c, (n, bad)) in &per_class {
        eprintln!("  {c:24} {n:4} trains, {bad} mismatches");
    }
    for f in failures.iter().take(20) {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {trains} trains differ from the kernel",
        failures.len()
    );
}

#[test]
fn tcp_trains_match_the_kernel_at_gro_max_size_65536() {
    run_size(65536, env_u64("OFFLOAD_CONFORMANCE_SEED", 1));
}

#[test]
fn tcp_trains_match_the_kernel_at_gro_max_size_185000() {
    run_size(185_000, env_u64("OFFLOAD_CONFORMANCE_SEED", 1) + 1_000_000);
}

/// The suite's own control: the oracle really merges, and the comparison
/// really tells a different answer apart (an engine that never holds
/// anything must disagree with the kernel on a clean train).
#[test]
fn oracle_merges_and_comparison_detects_a_wrong_engine() {
    let mut kernel = KernelGro::new(GroKnobs {
        flush_timeout: Duration::from_millis(20),
        ..GroKnobs::default()
    })
    .expect("the kernel oracle needs root and /dev/net/tun");
    let a = addrs(&kernel);
    let mut train = tcp_train(7, &a, Some(Class::Clean));
    train.frames.truncate(train.frames.len().min(12));
    let k = kernel.run_train(&train.frames).expect("oracle run");
    assert!(
        k.len() < train.frames.len(),
        "kernel merged nothing: {} -> {}",
        train.frames.len(),
        k.len()
    );
    let good = engine_gro(
        &GroConfig {
            flush_timeout_ns: 10_000_000,
            ..GroConfig::default()
        },
        &train.frames,
    );
    assert_eq!(compare(&k, &good), None);
    let never_holds = engine_gro(
        &GroConfig {
            flush_timeout_ns: 0,
            ..GroConfig::default()
        },
        &train.frames,
    );
    assert!(compare(&k, &never_holds).is_some());
}
