//! Kernel conformance, UDP and VXLAN: seeded trains through the live
//! kernel's GRO and through the engine, compared flow by flow, byte for
//! byte. UDP with a `UDP_GRO` socket listening and in the forwarding case
//! (`rx-udp-gro-forwarding`); VXLAN with a vxlan device listening on 4789.
//! Needs root and /dev/net/tun; fails, never skips, where it cannot run.
//! `OFFLOAD_CONFORMANCE_UDP_TRAINS` sets the trains per case (default 300).

use offload_conformance::generate::Addrs;
use offload_conformance::generate_udp::{udp_train, vxlan_train, UdpTrain};
use offload_conformance::{compare_confirmed, engine_config, engine_gro};
use offload_lab::oracle::{GroKnobs, KernelGro, VxlanConf};
use std::collections::BTreeMap;
use std::time::Duration;

fn trains() -> u64 {
    std::env::var("OFFLOAD_CONFORMANCE_UDP_TRAINS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn addrs(k: &KernelGro) -> Addrs {
    offload_conformance::oracle_addrs(k)
}

fn run(name: &str, knobs: GroKnobs, make: impl Fn(u64, &Addrs) -> UdpTrain) {
    let mut kernel =
        KernelGro::new(knobs.clone()).expect("the kernel oracle needs root and /dev/net/tun");
    let a = addrs(&kernel);
    let cfg = engine_config(&knobs);
    let mut failures = Vec::new();
    let mut per_class: BTreeMap<&'static str, (u32, u32)> = BTreeMap::new();
    let n = trains();
    let (mut frames_in, mut kernel_out) = (0usize, 0usize);
    for seed in 1..=n {
        let t = make(seed, &a);
        let k = kernel.run_train(&t.frames).expect("oracle run");
        frames_in += t.frames.len();
        kernel_out += k.len();
        let e = engine_gro(&cfg, &t.frames);
        let entry = per_class.entry(t.class).or_default();
        entry.0 += 1;
        if let Some(diff) = compare_confirmed(&mut kernel, &t.frames, &k, &e) {
            entry.1 += 1;
            failures.push(format!(
                "{name} seed {seed} class {}: {}\n{diff}",
                t.class, t.notes
            ));
        }
    }
    eprintln!("{name}: {n} trains, {frames_in} frames in, kernel delivered {kernel_out}");
    // The suite is only meaningful if the kernel coalesced something.
    assert!(
        kernel_out < frames_in,
        "{name}: the kernel merged nothing; is the oracle set up?"
    );
    for (c, (n, bad)) in &per_class {
        eprintln!("  {c:28} {n:4} trains, {bad} mismatches");
    }
    for f in failures.iter().take(10) {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {n} trains differ from the kernel",
        failures.len()
    );
}

fn knobs(size: u32) -> GroKnobs {
    GroKnobs {
        gro_max_size: size,
        gro_ipv4_max_size: size,
        flush_timeout: Duration::from_millis(20),
        ..GroKnobs::default()
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn udp_trains_to_a_udp_gro_socket_match_the_kernel() {
    let k = GroKnobs {
        udp_gro_ports: vec![5555],
        ..knobs(65536)
    };
    run("udp socket", k, |seed, a| udp_train(seed, a, 5555, None));
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn udp_trains_forwarded_match_the_kernel() {
    let k = GroKnobs {
        udp_gro_forwarding: true,
        ..knobs(185_000)
    };
    run("udp forwarding", k, |seed, a| {
        udp_train(seed + 10_000, a, 6666, None)
    });
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_trains_match_the_kernel_at_65536() {
    let k = GroKnobs {
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        ..knobs(65536)
    };
    run("vxlan 65536", k, |seed, a| {
        vxlan_train(seed, a, 4789, 42, false)
    });
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_trains_match_the_kernel_at_185000() {
    let k = GroKnobs {
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        ..knobs(185_000)
    };
    run("vxlan 185000", k, |seed, a| {
        vxlan_train(seed + 20_000, a, 4789, 42, false)
    });
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_over_ipv6_trains_match_the_kernel() {
    let k = GroKnobs {
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        vxlan_ipv6: true,
        ..knobs(65536)
    };
    run("vxlan ipv6 outer", k, |seed, a| {
        vxlan_train(seed + 40_000, a, 4789, 42, true)
    });
}
