//! Conformance on three kernel lines: the host's (6.18) and Debian's
//! packaged 6.1 and 6.12, each booted in a throw-away QEMU guest by
//! `scripts/kernel-vm.sh` (docs/decisions/0072-vm-kernel-oracle.md).
//!
//! [`running_kernel_suite`] is the suite: seeded TCP trains through the
//! running kernel's GRO, **twice**, then through the engine with the
//! profile of the running kernel's line. The two kernel runs must agree
//! train for train before any comparison with the engine is trusted (the
//! trap of an emulated oracle: a tick inside a train adds flushes); a
//! train whose runs differ is run again, up to
//! `offload_conformance::AGREEMENT_RUNS` times, and judged on the answer
//! two runs agree on, or fails as unstable; then
//! the engine must agree with the kernel on every train, byte for byte.
//!
//! Then, with the same agreement rule and the GSO metadata compared too:
//! VLAN trains where the `8021q` module is loaded (the guests; the host's
//! 6.18 has no `CONFIG_VLAN_8021Q`), and the UDP and VXLAN trains of
//! `tests/kernel_udp.rs` (UDP to a `UDP_GRO` socket, forwarded, VXLAN
//! over IPv4 and IPv6, Geneve where the driver exists) and IP-tunnel
//! trains (IPIP/SIT over IPv4, IP in IPv6, GRE with every flag
//! combination GRO takes, gretap) on every line.
//!
//! `kernel_6_1_in_vm` and `kernel_6_12_in_vm` boot the guest and run the
//! same test binary's `running_kernel_suite` inside it; they fail (never
//! skip) when the guest cannot be booted. `OFFLOAD_LINE_TRAINS` sets the
//! trains per run (default 300).

use offload_conformance::generate::{tcp_train, Class};
use offload_conformance::{compare, engine_gro};
use offload_lab::oracle::{GroKnobs, KernelGro};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The running kernel's release (`uname -r`).
fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn running_kernel_suite() {
    let trains = env_u64("OFFLOAD_LINE_TRAINS", 300);
    let seed0 = env_u64("OFFLOAD_LINE_SEED", 9_000_000);
    let knobs = GroKnobs {
        flush_timeout: Duration::from_millis(400),
        ..GroKnobs::default()
    };
    let mut kernel = KernelGro::new(knobs).expect("the kernel oracle needs root and /dev/net/tun");
    let a = offload_conformance::oracle_addrs(&kernel);
    let set: Vec<_> = (0..trains)
        .map(|i| tcp_train(seed0 + i, &a, Class::ALL.get(i as usize).copied()))
        .collect();
    let start = Instant::now();
    let mut runs = [Vec::new(), Vec::new()];
    let mut unclean = 0;
    for run in &mut runs {
        for t in &set {
            let o = kernel.run_train_detailed(&t.frames).expect("oracle run");
            unclean += usize::from(!o.clean);
            run.push(o.frames);
        }
    }
    // A train whose two passes differ gets up to AGREEMENT_RUNS more runs;
    // it is judged on the answer two of them agree on, else it counts as
    // unstable (and fails the test).
    let differed = (0..set.len()).filter(|&i| runs[0][i] != runs[1][i]).count();
    let mut unstable = Vec::new();
    for i in 0..set.len() {
        if runs[0][i] != runs[1][i] {
            match offload_conformance::agreed_answer(&mut kernel, &set[i].frames) {
                Ok(o) => runs[0][i] = o.frames,
                Err(_) => unstable.push(i),
            }
        }
    }
    let rel = release();
    eprintln!(
        "kernel {rel}: {trains} trains run twice in {:.1} s, {differed} differ between the runs ({} without two agreeing runs of up to {}), {unclean} answers not provably clean",
        start.elapsed().as_secs_f64(),
        unstable.len(),
        offload_conformance::AGREEMENT_RUNS
    );
    for &i in unstable.iter().take(5) {
        let t = &set[i];
        eprintln!(
            "  unstable: seed {} class {}: {} vs {} frames",
            t.seed,
            t.class.name(),
            runs[0][i].len(),
            runs[1][i].len()
        );
    }
    assert!(
        unstable.is_empty(),
        "kernel {rel}: the oracle disagreed with itself on {} of {trains} trains",
        unstable.len()
    );
    let cfg = offload_conformance::running_config();
    let mut per_class: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    let mut failures = Vec::new();
    for (t, k) in set.iter().zip(&runs[0]) {
        let e = engine_gro(&cfg, &t.frames);
        let entry = per_class.entry(t.class.name()).or_default();
        entry.0 += 1;
        if let Some(diff) = compare(k, &e) {
            entry.1 += 1;
            failures.push(format!(
                "seed {} class {}: {}\n{diff}",
                t.seed,
                t.class.name(),
                t.notes
            ));
        }
    }
    // The kernel's own selftest cases, every family, through the same
    // oracle (set up with the GSO metadata capture for them).
    kernel.set_gso_meta(true).expect("PACKET_VNET_HDR capture");
    let cases = offload_conformance::selftest::all_cases(&a);
    for c in &cases {
        let entry = per_class.entry("selftest").or_default();
        entry.0 += 1;
        if let Some(diff) = offload_conformance::compare_case(&mut kernel, c) {
            entry.1 += 1;
            failures.push(format!("selftest {} {}:\n{diff}", c.family.name(), c.name));
        }
    }
    // Geneve: only where the kernel has the driver. The guests booted by
    // scripts/kernel-vm.sh must have it (OFFLOAD_IN_VM is set there); the
    // host's 6.18 build has no CONFIG_GENEVE.
    let in_vm = std::env::var_os("OFFLOAD_IN_VM").is_some();
    let geneve = kernel.set_knobs(GroKnobs {
        geneve_vni: Some(5),
        ..kernel.knobs().clone()
    });
    if in_vm {
        geneve.as_ref().expect("a Geneve device in the guest");
    }
    if geneve.is_ok() {
        let gcfg = cfg.clone().geneve_ports(vec![offload::wire::geneve::PORT]);
        use offload_conformance::selftest::{case, case_names, Family};
        for name in case_names(Family::Geneve) {
            let c = case(&a, Family::Geneve, name).expect("listed case");
            let entry = per_class.entry("selftest-geneve").or_default();
            entry.0 += 1;
            if let Some(diff) = offload_conformance::compare_case_with(&mut kernel, &c, &gcfg) {
                entry.1 += 1;
                failures.push(format!("selftest geneve {name}:\n{diff}"));
            }
        }
    }
    eprintln!(
        "geneve cases: {}",
        if geneve.is_ok() {
            "run"
        } else {
            "not run (no Geneve driver in this kernel)"
        }
    );
    // 802.1Q / 802.1ad: only where the 8021q module registered
    // `vlan_gro_receive` (net/8021q/vlan_core.c, vlan_offload_init). The
    // guests load it (scripts/kernel-vm.sh); the host's 6.18 build has no
    // CONFIG_VLAN_8021Q, and tests/kernel_tcp.rs checks that it passes
    // tagged frames untouched.
    let vlan = std::path::Path::new("/sys/module/8021q").exists();
    if in_vm {
        assert!(vlan, "the guest must have the 8021q module loaded");
    }
    let vlan_trains = if vlan {
        env_u64("OFFLOAD_LINE_VLAN_TRAINS", 96)
    } else {
        0
    };
    let mut vlan_unstable = 0;
    let (mut vlan_in, mut vlan_out) = (0usize, 0usize);
    if vlan {
        let vcfg = cfg.clone().vlan_gro(true);
        for i in 0..vlan_trains {
            let seed = seed0 + 500_000 + i;
            let (t, tags, frames) = vlan_train(seed, i, &a);
            // Through the kernel until two answers (bytes and GSO
            // metadata) agree, before the engine is judged.
            vlan_in += frames.len();
            let entry = per_class.entry("vlan").or_default();
            entry.0 += 1;
            let first = match offload_conformance::agreed_answer(&mut kernel, &frames) {
                Ok(o) => o,
                Err(counts) => {
                    vlan_unstable += 1;
                    entry.1 += 1;
                    failures.push(format!(
                        "vlan seed {seed} {tags}: the kernel disagreed with itself (frames per run: {counts:?})"
                    ));
                    continue;
                }
            };
            let m1 = offload_conformance::kernel_meta(&first);
            vlan_out += first.frames.len();
            let e = offload_conformance::engine_gro_meta(&vcfg, &frames);
            if let Some(diff) = offload_conformance::compare_with_meta(&first.frames, &m1, &e) {
                entry.1 += 1;
                failures.push(format!(
                    "vlan seed {seed} {tags} class {}: {}\n{diff}",
                    t.class.name(),
                    t.notes
                ));
            }
        }
    }
    eprintln!(
        "vlan trains: {}",
        if vlan {
            format!("{vlan_trains} trains, {vlan_unstable} without two agreeing kernel runs, {vlan_in} frames in, the kernel delivered {vlan_out}")
        } else {
            "not run (no 8021q module in this kernel)".to_string()
        }
    );
    // UDP (to a UDP_GRO socket, forwarded) and VXLAN (outer IPv4 and
    // IPv6): the trains of tests/kernel_udp.rs, on every line.
    let udp = udp_and_vxlan_trains(
        &mut kernel,
        &a,
        seed0,
        geneve.is_ok(),
        &mut per_class,
        &mut failures,
    );
    eprintln!(
        "udp/vxlan/geneve trains: {}, {} without two agreeing kernel runs, {} frames in, the kernel delivered {}",
        udp.trains, udp.unstable, udp.frames_in, udp.frames_out
    );
    assert!(
        udp.frames_out < udp.frames_in,
        "kernel {}: UDP/VXLAN GRO merged nothing; is the oracle set up?",
        release()
    );
    // IP in IP and GRE (every flag combination GRO takes, gretap).
    let tun = ip_tunnel_trains(&mut kernel, &a, seed0, &mut per_class, &mut failures);
    eprintln!(
        "ip-tunnel/gre trains: {}, {} without two agreeing kernel runs, {} frames in, the kernel delivered {}",
        tun.trains, tun.unstable, tun.frames_in, tun.frames_out
    );
    assert!(
        tun.frames_out < tun.frames_in,
        "kernel {}: IP-tunnel GRO merged nothing",
        release()
    );
    // BIG TCP through every tunnel, IPv4 and IPv6 outer: where the line
    // loses the merged packet, the engine must report exactly that loss.
    let big = big_tcp_tunnel_trains(&mut kernel, &a, &mut failures);
    eprintln!(
        "big-tcp tunnel trains: {}, {} without two agreeing kernel runs, {} frames in, the kernel delivered {}",
        big.trains, big.unstable, big.frames_in, big.frames_out
    );
    // Tagged frames that merely pass would make the VLAN trains vacuous.
    assert!(
        !vlan || vlan_out < vlan_in,
        "kernel {}: VLAN GRO merged nothing; is the 8021q module loaded?",
        release()
    );
    for (c, (n, bad)) in &per_class {
        if *bad > 0 {
            eprintln!("  {c:24} {n:4} trains, {bad} mismatches");
        }
    }
    for f in failures.iter().take(10) {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "kernel {rel} (profile {}): {} of {trains} trains and {} selftest cases differ from the engine",
        cfg.kernel,
        failures.len(),
        cases.len()
    );
    eprintln!(
        "kernel {rel} (profile {}): {trains} TCP trains, {} selftest cases, {vlan_trains} VLAN trains, {} UDP/VXLAN/Geneve trains and {} IP-tunnel/GRE trains agree with the engine",
        cfg.kernel,
        cases.len(),
        udp.trains,
        tun.trains
    );
}

/// What a family of trains ran: trains, trains whose two kernel runs
/// differed, frames in and frames the kernel delivered.
struct Tally {
    trains: u64,
    unstable: u64,
    frames_in: usize,
    frames_out: usize,
}

/// The UDP and VXLAN trains of `tests/kernel_udp.rs` through the running
/// kernel, each twice (bytes and GSO metadata must agree between the two
/// runs), then through the engine configured as the oracle
/// (`engine_config`, the running line's profile). Five cases, six with
/// Geneve trains where the kernel has the driver (the guests):
/// `OFFLOAD_LINE_UDP_TRAINS` trains each (default 60).
fn udp_and_vxlan_trains(
    kernel: &mut KernelGro,
    a: &offload_conformance::generate::Addrs,
    seed0: u64,
    with_geneve: bool,
    per_class: &mut BTreeMap<&'static str, (u32, u32)>,
    failures: &mut Vec<String>,
) -> Tally {
    use offload_conformance::generate_udp::{geneve_train, udp_train, vxlan_train, UdpTrain};
    use offload_lab::oracle::VxlanConf;
    let per_case = env_u64("OFFLOAD_LINE_UDP_TRAINS", 60);
    let base = |size: u32| GroKnobs {
        gro_max_size: size,
        gro_ipv4_max_size: size,
        flush_timeout: Duration::from_millis(400),
        ..GroKnobs::default()
    };
    let vxlan = Some(VxlanConf {
        vni: 42,
        port: 4789,
    });
    type Make = fn(u64, &offload_conformance::generate::Addrs) -> UdpTrain;
    let mut cases: Vec<(&'static str, GroKnobs, Make)> = vec![
        (
            "udp-socket",
            GroKnobs {
                udp_gro_ports: vec![5555],
                ..base(65536)
            },
            |seed, a| udp_train(seed, a, 5555, None),
        ),
        (
            "udp-forwarded",
            GroKnobs {
                udp_gro_forwarding: true,
                ..base(185_000)
            },
            |seed, a| udp_train(seed, a, 6666, None),
        ),
        (
            "vxlan-ipv4",
            GroKnobs {
                vxlan,
                ..base(65536)
            },
            |seed, a| vxlan_train(seed, a, 4789, 42, false),
        ),
        (
            "vxlan-ipv4-185000",
            GroKnobs {
                vxlan,
                ..base(185_000)
            },
            |seed, a| vxlan_train(seed, a, 4789, 42, false),
        ),
        (
            "vxlan-ipv6",
            GroKnobs {
                vxlan,
                vxlan_ipv6: true,
                ..base(65536)
            },
            |seed, a| vxlan_train(seed, a, 4789, 42, true),
        ),
    ];
    if with_geneve {
        cases.push((
            "geneve",
            GroKnobs {
                geneve_vni: Some(5),
                ..base(65536)
            },
            |seed, a| geneve_train(seed, a, offload::wire::geneve::PORT, 5),
        ));
    }
    let mut run = Tally {
        trains: 0,
        unstable: 0,
        frames_in: 0,
        frames_out: 0,
    };
    for (ci, (name, knobs, make)) in cases.into_iter().enumerate() {
        kernel.set_knobs(knobs.clone()).expect("oracle knobs");
        let cfg = offload_conformance::engine_config(&knobs);
        for i in 0..per_case {
            let seed = seed0 + 700_000 + ci as u64 * 10_000 + i;
            let t = make(seed, a);
            judge(kernel, &cfg, name, &t, &mut run, per_class, failures);
        }
    }
    run
}

/// One train through the kernel until two runs agree (bytes and GSO
/// metadata; `agreed_answer`) and through the engine with `cfg`; counts into
/// `run` and `per_class[name]`, reports into `failures`.
#[allow(clippy::too_many_arguments)]
fn judge(
    kernel: &mut KernelGro,
    cfg: &offload::GroConfig,
    name: &'static str,
    t: &offload_conformance::generate_udp::UdpTrain,
    run: &mut Tally,
    per_class: &mut BTreeMap<&'static str, (u32, u32)>,
    failures: &mut Vec<String>,
) {
    run.trains += 1;
    run.frames_in += t.frames.len();
    let entry = per_class.entry(name).or_default();
    entry.0 += 1;
    let first = match offload_conformance::agreed_answer(kernel, &t.frames) {
        Ok(o) => o,
        Err(counts) => {
            run.unstable += 1;
            entry.1 += 1;
            failures.push(format!(
                "{name} seed {} class {}: the kernel disagreed with itself (frames per run: {counts:?})",
                t.seed, t.class
            ));
            return;
        }
    };
    let m1 = offload_conformance::kernel_meta(&first);
    run.frames_out += first.frames.len();
    let e = offload_conformance::engine_gro_meta(cfg, &t.frames);
    if let Some(diff) = offload_conformance::compare_with_meta(&first.frames, &m1, &e) {
        entry.1 += 1;
        failures.push(format!(
            "{name} seed {} class {}: {}\n{diff}",
            t.seed, t.class, t.notes
        ));
    }
}

/// IP-in-IP and GRE trains (`generate_tunnel`): every carrier,
/// `OFFLOAD_LINE_TUNNEL_TRAINS` trains each (default 30), each judged by
/// [`judge`].
fn ip_tunnel_trains(
    kernel: &mut KernelGro,
    a: &offload_conformance::generate::Addrs,
    seed0: u64,
    per_class: &mut BTreeMap<&'static str, (u32, u32)>,
    failures: &mut Vec<String>,
) -> Tally {
    use offload_conformance::generate_tunnel::{ip_tunnel_train, Carrier};
    let per_carrier = env_u64("OFFLOAD_LINE_TUNNEL_TRAINS", 30);
    let knobs = GroKnobs {
        flush_timeout: Duration::from_millis(400),
        ..GroKnobs::default()
    };
    kernel.set_knobs(knobs.clone()).expect("oracle knobs");
    let cfg = offload_conformance::engine_config(&knobs);
    let mut run = Tally {
        trains: 0,
        unstable: 0,
        frames_in: 0,
        frames_out: 0,
    };
    for (ci, carrier) in Carrier::ALL.into_iter().enumerate() {
        let (in0, out0) = (run.frames_in, run.frames_out);
        for i in 0..per_carrier {
            let seed = seed0 + 800_000 + ci as u64 * 10_000 + i;
            let t = ip_tunnel_train(seed, a, carrier);
            judge(
                kernel,
                &cfg,
                carrier.name(),
                &t,
                &mut run,
                per_class,
                failures,
            );
        }
        // Every carrier must merge something, or its trains prove nothing.
        let (fin, fout) = (run.frames_in - in0, run.frames_out - out0);
        eprintln!(
            "  {:24} {fin:5} frames in, {fout:5} delivered",
            carrier.name()
        );
        assert!(
            per_carrier == 0 || fout < fin,
            "{}: the kernel merged nothing",
            carrier.name()
        );
    }
    run
}

/// BIG TCP trains (`gro_max_size` = `gro_ipv4_max_size` = 185000) through
/// every tunnel kind over IPv4 and IPv6, inner IPv4 and IPv6, in every
/// shape of `BigTcpShape::ALL` (one merge past 64 KiB; one stopped by
/// 185000 and one after it; merges ending exactly at an outer payload of
/// 65,535 and 65,536 bytes; merges below 64 KiB). The engine runs with the
/// line's losses modelled (`GroConfig::kernel_losses`): its deliveries that
/// are not lost must equal the kernel's sound frames byte for byte (GSO
/// metadata too); each delivery it marks `Ipv6TunnelJumboMangled` must be
/// one frame the kernel delivered with a Hop-by-Hop header where the outer
/// UDP header belongs; a delivery marked `Ipv6TunnelJumboDropped` has no
/// kernel frame at all. So a kernel that delivers a packet the engine calls
/// lost, or loses one the engine calls sound, fails the comparison; and
/// the segments the engine reports lost must be exactly the train's
/// segments missing from the kernel's sound frames.
fn big_tcp_tunnel_trains(
    kernel: &mut KernelGro,
    a: &offload_conformance::generate::Addrs,
    failures: &mut Vec<String>,
) -> Tally {
    use offload::gro::LossReason;
    use offload_conformance::generate_tunnel::{big_tcp_train, BigTcpShape, BigTcpTunnel};
    let mut run = Tally {
        trains: 0,
        unstable: 0,
        frames_in: 0,
        frames_out: 0,
    };
    let mut lost_seen = 0u32;
    for tunnel in BigTcpTunnel::ALL {
        let knobs = tunnel.oracle_knobs();
        kernel.set_knobs(knobs.clone()).expect("oracle knobs");
        let cfg = offload_conformance::engine_config(&knobs);
        for (inner_v6, shape) in [false, true]
            .into_iter()
            .flat_map(|v6| BigTcpShape::ALL.map(|s| (v6, s)))
        {
            let name = format!("{} {}", tunnel.name(inner_v6), shape.name);
            let t = big_tcp_train(a, tunnel, inner_v6, shape);
            run.trains += 1;
            run.frames_in += t.frames.len();
            let k = match offload_conformance::agreed_answer(kernel, &t.frames) {
                Ok(o) => o,
                Err(counts) => {
                    run.unstable += 1;
                    failures.push(format!(
                        "{name}: the kernel disagreed with itself (frames per run: {counts:?})"
                    ));
                    continue;
                }
            };
            run.frames_out += k.frames.len();
            let km = offload_conformance::kernel_meta(&k);
            // Frames the kernel mangled: an IPv6 outer header followed by
            // a Hop-by-Hop header, which no sound IPv6-outer tunnel packet
            // carries (the jumbo header of a sound one follows the inner
            // IPv6 header).
            let mangled = |f: &[u8]| {
                tunnel.outer_v6() && f.len() > 20 && f[12..14] == [0x86, 0xdd] && f[20] == 0
            };
            let (mut kf, mut kmeta, mut k_mangled) = (Vec::new(), Vec::new(), 0u32);
            for (f, m) in k.frames.iter().zip(&km) {
                if mangled(f) {
                    k_mangled += 1;
                } else {
                    kf.push(f.clone());
                    kmeta.push(*m);
                }
            }
            let (sound, sound_segments, lost) =
                offload_conformance::engine_gro_losses(&cfg, &t.frames);
            let e_mangled = lost
                .iter()
                .filter(|(l, _)| *l == LossReason::Ipv6TunnelJumboMangled)
                .count() as u32;
            lost_seen += lost.len() as u32;
            // Every segment of the train is in a sound delivery (byte-equal
            // to the kernel's, so the kernel delivered it) or a lost one:
            // the engine's lost segments are exactly the kernel's.
            let e_lost_segments: u32 = lost.iter().map(|(_, n)| n).sum();
            let conserved = sound_segments + e_lost_segments == t.frames.len() as u32;
            eprintln!(
                "  {name:40} kernel: {} frames ({k_mangled} mangled); engine: {} sound ({sound_segments} segments), lost {:?}",
                k.frames.len(),
                sound.len(),
                lost
            );
            if let Some(diff) = offload_conformance::compare_with_meta(&kf, &kmeta, &sound) {
                failures.push(format!("{name} BIG TCP: {}\n{diff}", t.notes));
            }
            if k_mangled != e_mangled {
                failures.push(format!(
                    "{name} BIG TCP: the kernel mangled {k_mangled} packets, the engine predicts {e_mangled}"
                ));
            }
            if !conserved {
                failures.push(format!(
                    "{name} BIG TCP: {} segments in, the engine delivered {sound_segments} and lost {e_lost_segments}",
                    t.frames.len()
                ));
            }
        }
    }
    // On the lines that break BIG TCP over IPv6-outer tunnels, the trains
    // must show it, or they prove nothing about the model.
    if offload_conformance::running_line().breaks_big_tcp_over_ipv6_tunnels() {
        assert!(
            lost_seen > 0,
            "no BIG TCP tunnel train was lost on a line that loses them"
        );
    }
    run
}

/// The `i`-th VLAN train: a seeded TCP train (class cycling) with in-band
/// tags, by `i % 4`: one 802.1Q tag, one 802.1ad tag, QinQ (802.1ad outer,
/// 802.1Q inner), two 802.1Q tags. Every fifth train changes the
/// (innermost) VID half-way, which must split the flow
/// (`vlan_gro_receive` compares the whole 4-byte tag).
fn vlan_train(
    seed: u64,
    i: u64,
    a: &offload_conformance::generate::Addrs,
) -> (offload_conformance::generate::Train, String, Vec<Vec<u8>>) {
    use offload_conformance::generate::vlan_tagged;
    let t = tcp_train(
        seed,
        a,
        Class::ALL.get(i as usize % Class::ALL.len()).copied(),
    );
    let change_at = if i.is_multiple_of(5) {
        t.frames.len() / 2
    } else {
        usize::MAX
    };
    let kind = ["802.1Q", "802.1ad", "QinQ", "802.1Q-802.1Q"][(i % 4) as usize];
    let frames = t
        .frames
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let vid = if n >= change_at { 101 } else { 100 };
            let tags: &[(u16, u16)] = match i % 4 {
                0 => &[(0x8100, vid)],
                1 => &[(0x88a8, vid)],
                2 => &[(0x88a8, 7), (0x8100, vid)],
                _ => &[(0x8100, 7), (0x8100, vid)],
            };
            vlan_tagged(f, tags)
        })
        .collect();
    let desc = format!(
        "{kind}{}",
        if change_at == usize::MAX {
            ""
        } else {
            " vid-change"
        }
    );
    (t, desc, frames)
}

/// Boots `line` in a guest and runs [`running_kernel_suite`] there.
fn in_vm(line: &str) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::env::current_exe().expect("test binary path");
    let status = Command::new(root.join("scripts/kernel-vm.sh"))
        .args(["run", line])
        .arg(exe)
        .args([
            "--exact",
            "running_kernel_suite",
            "--include-ignored",
            "--nocapture",
        ])
        .status()
        .expect("run scripts/kernel-vm.sh (needs qemu-system-x86: .ci/install)");
    assert!(
        status.success(),
        "the {line} guest's suite failed: {status}"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn kernel_6_1_in_vm() {
    in_vm("6.1");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn kernel_6_12_in_vm() {
    in_vm("6.12");
}
