//! Kernel conformance, TCP over IPv4 and IPv6: seeded random trains through
//! the live kernel's GRO (a TAP with NAPI in a private namespace) and
//! through the engine, compared flow by flow, byte for byte.
//!
//! Needs root and /dev/net/tun. It fails, never skips, where it cannot run.
//! `OFFLOAD_CONFORMANCE_TRAINS` sets the trains per size (default 1000, so
//! the two sizes give 2000 trains); `OFFLOAD_CONFORMANCE_SEED` the first seed.

use offload::GroConfig;
use offload_conformance::generate::{tcp_train, vlan_tagged, Addrs, Class};
use offload_conformance::{compare, compare_confirmed, engine_gro};
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
    offload_conformance::oracle_addrs(k)
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
    let cfg = GroConfig::default()
        .gro_max_size(size)
        .gro_ipv4_max_size(size)
        .flush_timeout_ns(10_000_000);
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
        let diff = compare_confirmed(&mut kernel, &train.frames, &k, &e);
        if let Some(diff) = diff {
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
#[ignore = "needs root: scripts/test.sh runs it"]
fn tcp_trains_match_the_kernel_at_gro_max_size_65536() {
    run_size(65536, env_u64("OFFLOAD_CONFORMANCE_SEED", 1));
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn tcp_trains_match_the_kernel_at_gro_max_size_185000() {
    run_size(185_000, env_u64("OFFLOAD_CONFORMANCE_SEED", 1) + 1_000_000);
}

/// The suite's own control: the oracle really merges, and the comparison
/// really tells a different answer apart (an engine that never holds
/// anything must disagree with the kernel on a clean train).
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
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
        &GroConfig::default().flush_timeout_ns(10_000_000),
        &train.frames,
    );
    assert_eq!(compare(&k, &good), None);
    let never_holds = engine_gro(&GroConfig::default().flush_timeout_ns(0), &train.frames);
    assert!(compare(&k, &never_holds).is_some());
}

/// 802.1Q and QinQ tagged TCP trains (in-band tags), with a tag change
/// inside some trains. The reference kernel is built without
/// CONFIG_VLAN_8021Q, so it has no `vlan_gro_receive`: tagged frames pass
/// GRO untouched, and the engine's default says the same.
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vlan_tagged_tcp_trains_match_the_kernel() {
    let n = env_u64("OFFLOAD_CONFORMANCE_TRAINS", 1000) / 4;
    for size in [65536u32, 185_000] {
        let knobs = GroKnobs {
            gro_max_size: size,
            gro_ipv4_max_size: size,
            flush_timeout: Duration::from_millis(20),
            ..GroKnobs::default()
        };
        let mut kernel =
            KernelGro::new(knobs).expect("the kernel oracle needs root and /dev/net/tun");
        let a = addrs(&kernel);
        let cfg = GroConfig::default()
            .gro_max_size(size)
            .gro_ipv4_max_size(size)
            .flush_timeout_ns(10_000_000);
        let mut failures = Vec::new();
        for seed in 0..n {
            let train = tcp_train(500_000 + seed, &a, None);
            let qinq = seed % 3 == 0;
            let change_at = if seed % 5 == 0 {
                train.frames.len() / 2
            } else {
                usize::MAX
            };
            let frames: Vec<Vec<u8>> = train
                .frames
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let vid = if i >= change_at { 101 } else { 100 };
                    if qinq {
                        vlan_tagged(f, &[(0x88a8, 7), (0x8100, vid)])
                    } else {
                        vlan_tagged(f, &[(0x8100, vid)])
                    }
                })
                .collect();
            let k = kernel.run_train(&frames).expect("oracle run");
            let e = engine_gro(&cfg, &frames);
            if let Some(diff) = compare_confirmed(&mut kernel, &frames, &k, &e) {
                failures.push(format!(
                    "vlan seed {} class {} size {size} qinq {qinq}: {}\n{diff}",
                    500_000 + seed,
                    train.class.name(),
                    train.notes
                ));
            }
        }
        for f in failures.iter().take(10) {
            eprintln!("{f}");
        }
        assert!(
            failures.is_empty(),
            "{} of {n} VLAN trains differ from the kernel at {size}",
            failures.len()
        );
    }
}
