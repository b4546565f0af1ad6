//! The kernel conformance suite's machinery: a seeded generator of packet
//! trains that spans the GRO rule space, and a per-flow, byte-for-byte
//! comparison of what the live kernel and the engine make of a train.
//!
//! The tests in `tests/` run each train through
//! [`offload_lab::oracle::KernelGro`] and through [`offload::GroEngine`]
//! configured alike; a mismatch prints the seed, the perturbation class,
//! and both answers, so it can be replayed and turned into a named test.
#![forbid(unsafe_code)]

pub mod generate;
pub mod generate_tunnel;
pub mod generate_udp;
pub mod selftest;

use offload::{Delivered, GroConfig, GroEngine};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The engine configuration that matches an oracle configured with
/// `knobs` (sizes, UDP GRO sockets or forwarding, VXLAN port).
pub fn engine_config(knobs: &offload_lab::oracle::GroKnobs) -> GroConfig {
    use offload::gro::UdpGro;
    GroConfig::for_kernel(running_line())
        .gro_max_size(knobs.gro_max_size)
        .gro_ipv4_max_size(knobs.gro_ipv4_max_size)
        .flush_timeout_ns(10_000_000)
        .verify_checksums(true)
        .udp(if knobs.udp_gro_forwarding {
            UdpGro::AllPorts
        } else if knobs.udp_gro_ports.is_empty() {
            UdpGro::Off
        } else {
            UdpGro::Ports(knobs.udp_gro_ports.clone())
        })
        .vxlan_ports(knobs.vxlan.map(|v| vec![v.port]).unwrap_or_default())
        .geneve_ports(
            knobs
                .geneve_vni
                .map(|_| vec![offload::wire::geneve::PORT])
                .unwrap_or_default(),
        )
        // The reference kernel has no VLAN GRO handler (CONFIG_VLAN_8021Q unset).
        .vlan_gro(false)
        // The live kernel's losses are what the comparison expects.
        .kernel_losses(true)
}

/// The addresses trains use to reach the oracle's TAP from its peer.
pub fn oracle_addrs(k: &offload_lab::oracle::KernelGro) -> generate::Addrs {
    generate::Addrs {
        dst_mac: k.tap_mac(),
        src_mac: k.peer_mac(),
        dst4: k.tap_ipv4().octets(),
        src4: k.peer_ipv4().octets(),
        dst6: k.tap_ipv6().octets(),
        src6: k.peer_ipv6().octets(),
    }
}

/// Runs a train through the engine: frames 1 µs apart, then end of input.
/// The packets are what the default (zero-copy) delivery gives, joined from
/// the train; the contiguous delivery must give the same bytes, so the
/// kernel judges both.
pub fn engine_gro(cfg: &GroConfig, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    engine_gro_meta(cfg, frames)
        .into_iter()
        .map(|(packet, _)| packet)
        .collect()
}

/// A coarse flow key for grouping delivered frames: MACs, addresses,
/// IPv6 flow label, ports. Frames it cannot read share one group.
pub fn flow_key(f: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(48);
    if f.len() < 14 {
        return k;
    }
    k.extend_from_slice(&f[..12]);
    let mut et = u16::from_be_bytes([f[12], f[13]]);
    let mut off = 14;
    while (et == 0x8100 || et == 0x88a8) && f.len() >= off + 4 {
        k.extend_from_slice(&f[off - 2..off + 2]);
        et = u16::from_be_bytes([f[off + 2], f[off + 3]]);
        off += 4;
    }
    let l4 = match et {
        0x0800 if f.len() >= off + 20 => {
            k.push(f[off + 9]);
            k.extend_from_slice(&f[off + 12..off + 20]);
            Some(off + (f[off] & 0x0f) as usize * 4)
        }
        0x86dd if f.len() >= off + 40 => {
            k.extend_from_slice(&f[off + 1..off + 4]);
            k.extend_from_slice(&f[off + 8..off + 40]);
            let mut nh = f[off + 6];
            let mut at = off + 40;
            while matches!(nh, 0 | 43 | 60 | 44) && f.len() >= at + 8 {
                let len = if nh == 44 {
                    8
                } else {
                    (f[at + 1] as usize + 1) * 8
                };
                nh = f[at];
                at += len;
            }
            k.push(nh);
            Some(at)
        }
        _ => None,
    };
    if let Some(l4) = l4 {
        if f.len() >= l4 + 4 {
            k.extend_from_slice(&f[l4..l4 + 4]);
        }
    }
    k
}

/// Groups frames by flow, keeping their order within each flow.
pub fn by_flow(frames: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Vec<&[u8]>> {
    let mut m: BTreeMap<Vec<u8>, Vec<&[u8]>> = BTreeMap::new();
    for f in frames {
        m.entry(flow_key(f)).or_default().push(f);
    }
    m
}

/// Compares kernel and engine output flow by flow. `None` when they agree;
/// otherwise a report of the first difference in each disagreeing flow.
pub fn compare(kernel: &[Vec<u8>], engine: &[Vec<u8>]) -> Option<String> {
    let k = by_flow(kernel);
    let e = by_flow(engine);
    let mut report = String::new();
    let keys: std::collections::BTreeSet<_> = k.keys().chain(e.keys()).collect();
    for key in keys {
        let kf = k.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let ef = e.get(key).map(Vec::as_slice).unwrap_or(&[]);
        if kf == ef {
            continue;
        }
        let _ = writeln!(
            report,
            "flow {}: kernel {} frames {:?}, engine {} frames {:?}",
            hex(key),
            kf.len(),
            kf.iter().map(|f| f.len()).collect::<Vec<_>>(),
            ef.len(),
            ef.iter().map(|f| f.len()).collect::<Vec<_>>()
        );
        for (i, (a, b)) in kf.iter().zip(ef).enumerate() {
            if a != b {
                let at = a
                    .iter()
                    .zip(b.iter())
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()));
                let lo = at.saturating_sub(8);
                let _ = writeln!(
                    report,
                    "  frame {i}: first difference at byte {at}: kernel {} / engine {}",
                    hex(&a[lo..(at + 8).min(a.len())]),
                    hex(&b[lo..(at + 8).min(b.len())])
                );
                break;
            }
        }
    }
    if report.is_empty() {
        None
    } else {
        Some(report)
    }
}

/// Lower-case hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `virtio_net_hdr` GSO fields the kernel would report for an engine
/// delivery: `(gso_type, gso_size)`, `VIRTIO_NET_HDR_GSO_*` numbering
/// (`virtio_net_hdr_from_skb`, `include/linux/virtio_net.h`): TCPv4 1,
/// TCPv6 4, UDP_L4 5, ECN 0x80 when the packet carries `SKB_GSO_TCP_ECN`;
/// `(0, 0)` for a packet GRO did not merge.
pub fn engine_meta(d: &Delivered<'_>) -> (u8, u16) {
    use offload::gro::gso_type as skb;
    if d.segments <= 1 {
        return (0, 0);
    }
    let base = if d.gso_type & skb::UDP_L4 != 0 {
        5
    } else if d.gso_type & skb::TCPV6 != 0 {
        4
    } else {
        1
    };
    let ecn = if d.gso_type & skb::TCP_ECN != 0 {
        0x80
    } else {
        0
    };
    (base | ecn, d.gso_size.min(u32::from(u16::MAX)) as u16)
}

/// A train through the engine, with each delivery's GSO metadata (see
/// [`engine_gro`]).
pub fn engine_gro_meta(cfg: &GroConfig, frames: &[Vec<u8>]) -> Vec<(Vec<u8>, (u8, u16))> {
    let zero_copy = engine_run(cfg, frames, true);
    let copied = engine_run(cfg, frames, false);
    assert!(
        zero_copy == copied,
        "zero-copy and contiguous deliveries differ on a train of {} frames",
        frames.len()
    );
    zero_copy
}

/// A train through the engine (zero-copy, then contiguous: both must
/// agree): the packets a receiver gets, with their GSO metadata, the
/// segments inside them, and the loss reason and segment count of each
/// packet the kernel line loses (`GroConfig::kernel_losses`).
pub fn engine_gro_losses(
    cfg: &GroConfig,
    frames: &[Vec<u8>],
) -> (Vec<Delivery>, u32, Vec<(offload::gro::LossReason, u32)>) {
    let sound = engine_gro_meta(cfg, frames);
    let (mut lost, mut sound_segments) = (Vec::new(), 0);
    let mut e = GroEngine::new(cfg.clone());
    let mut push = |d: &Delivered<'_>| match d.lost {
        Some(r) => lost.push((r, d.segments)),
        None => sound_segments += d.segments,
    };
    offload_lab::oracle::engine_train(&mut e, frames, &mut push);
    (sound, sound_segments, lost)
}

/// A delivered packet, whole, with its `(gso_type, gso_size)` ([`engine_meta`]).
pub type Delivery = (Vec<u8>, (u8, u16));

/// One run of a train, zero-copy or contiguous, packets made whole.
fn engine_run(cfg: &GroConfig, frames: &[Vec<u8>], zero_copy: bool) -> Vec<(Vec<u8>, (u8, u16))> {
    let mut e = GroEngine::new(cfg.clone());
    e.set_zero_copy(zero_copy);
    let mut out = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        // A packet the kernel line loses never reaches the capture socket.
        if d.lost.is_none() {
            out.push((d.to_vec(|n| &frames[n as usize - 1]), engine_meta(d)));
        }
    };
    offload_lab::oracle::engine_train(&mut e, frames, &mut push);
    out
}

/// The line of the running kernel (`/proc/sys/kernel/osrelease`); 6.18
/// when it cannot be read.
pub fn running_line() -> offload::gro::KernelLine {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| offload::gro::KernelLine::from_release(&r))
        .unwrap_or_default()
}

/// The engine configuration matching an oracle with default knobs on the
/// running kernel: its kernel line's profile.
pub fn running_config() -> GroConfig {
    GroConfig::for_kernel(running_line())
        .flush_timeout_ns(10_000_000)
        // The oracle has no Geneve device unless a test makes one.
        .geneve_ports(Vec::new())
}

/// Runs a selftest case through the kernel (part by part: everything held
/// is flushed between parts, as the selftest's sleeps do), twice, and
/// through the engine; `None` when the two kernel runs agree with each
/// other and bytes and GSO metadata agree with the engine, else a report.
pub fn compare_case(
    kernel: &mut offload_lab::oracle::KernelGro,
    case: &selftest::Case,
) -> Option<String> {
    compare_case_with(kernel, case, &running_config())
}

/// [`compare_case`] with an explicit engine configuration.
pub fn compare_case_with(
    kernel: &mut offload_lab::oracle::KernelGro,
    case: &selftest::Case,
    cfg: &GroConfig,
) -> Option<String> {
    let mut k_frames = Vec::new();
    let mut k_meta = Vec::new();
    let mut e = Vec::new();
    for (i, part) in case.parts.iter().enumerate() {
        let o = match agreed_answer(kernel, part) {
            Ok(o) => o,
            Err(counts) => {
                return Some(format!(
                    "part {i}: the kernel disagreed with itself (frames per run: {counts:?})"
                ))
            }
        };
        k_meta.extend(kernel_meta(&o));
        k_frames.extend(o.frames);
        e.extend(engine_gro_meta(cfg, part));
    }
    compare_with_meta(&k_frames, &k_meta, &e)
}

/// One frame's GSO metadata as [`kernel_meta`] gives it: `(gso_type,
/// gso_size)`, `None` where the kernel gave none.
pub type GsoMeta = Option<(u8, u16)>;

/// Runs through the kernel per answer agreed on; see [`agreed_answer`].
pub const AGREEMENT_RUNS: usize = 4;

/// The kernel's answer for `frames` once two of its runs agree, bytes and
/// GSO metadata (determinism first, decision 0072): runs the train up to
/// [`AGREEMENT_RUNS`] times and returns the first answer equal to an
/// earlier one. The oracle already retries runs that a jiffy boundary or
/// the flush timer may have cut; on a loaded machine an undetected
/// interruption still makes one run differ now and then, and a second,
/// agreeing pair says which answer is the kernel's rule rather than its
/// timing. `Err` holds each run's frame count when no two runs agreed.
pub fn agreed_answer(
    kernel: &mut offload_lab::oracle::KernelGro,
    frames: &[Vec<u8>],
) -> Result<offload_lab::oracle::TrainOutcome, Vec<usize>> {
    let mut seen: Vec<(offload_lab::oracle::TrainOutcome, Vec<GsoMeta>)> = Vec::new();
    for _ in 0..AGREEMENT_RUNS {
        let o = kernel.run_train_detailed(frames).expect("oracle run");
        let meta = kernel_meta(&o);
        if seen.iter().any(|(p, m)| p.frames == o.frames && *m == meta) {
            return Ok(o);
        }
        seen.push((o, meta));
    }
    Err(seen.iter().map(|(o, _)| o.frames.len()).collect())
}

/// [`compare`] of the kernel's first answer `first` for `frames` with the
/// engine's `engine`; where they differ, the kernel's answer is taken
/// again as [`agreed_answer`] takes it and compared with that. A loaded
/// machine can cut one run where the oracle cannot see it (decision 0072;
/// a CI trial saw three flows of one train each split in two, once in
/// 1,000 trains), while a rule the engine gets wrong differs on every run.
pub fn compare_confirmed(
    kernel: &mut offload_lab::oracle::KernelGro,
    frames: &[Vec<u8>],
    first: &[Vec<u8>],
    engine: &[Vec<u8>],
) -> Option<String> {
    compare(first, engine)?;
    match agreed_answer(kernel, frames) {
        Ok(agreed) => compare(&agreed.frames, engine),
        Err(counts) => Some(format!(
            "the kernel disagreed with itself (frames per run: {counts:?})"
        )),
    }
}

/// The kernel's GSO metadata of an oracle answer, one entry per frame,
/// `(gso_type, gso_size)` (`None` where the kernel gave none).
pub fn kernel_meta(o: &offload_lab::oracle::TrainOutcome) -> Vec<Option<(u8, u16)>> {
    o.gso
        .iter()
        .map(|m| m.map(|m| (m.gso_type, m.gso_size)))
        .chain(std::iter::repeat(None))
        .take(o.frames.len())
        .collect()
}

/// Compares the kernel's frames and GSO metadata (`k_meta[i]` belongs to
/// `k_frames[i]`) with the engine's deliveries: bytes flow by flow first,
/// then the metadata frame by frame in each flow's order. `None` when
/// they agree, else a report.
pub fn compare_with_meta(
    k_frames: &[Vec<u8>],
    k_meta: &[Option<(u8, u16)>],
    e: &[(Vec<u8>, (u8, u16))],
) -> Option<String> {
    let e_frames: Vec<Vec<u8>> = e.iter().map(|(f, _)| f.clone()).collect();
    let mut report = compare(k_frames, &e_frames).unwrap_or_default();
    if report.is_empty() {
        // Same frames per flow: compare the metadata frame by frame in
        // each flow's order.
        let mut km: BTreeMap<Vec<u8>, Vec<Option<(u8, u16)>>> = BTreeMap::new();
        for (f, m) in k_frames.iter().zip(k_meta) {
            km.entry(flow_key(f)).or_default().push(*m);
        }
        let mut em: BTreeMap<Vec<u8>, Vec<(u8, u16)>> = BTreeMap::new();
        for (f, m) in e {
            em.entry(flow_key(f)).or_default().push(*m);
        }
        for (key, ks) in &km {
            let es = em.get(key).map(Vec::as_slice).unwrap_or(&[]);
            for (i, (k, e)) in ks.iter().zip(es).enumerate() {
                if let Some(k) = k {
                    if k != e {
                        let _ = writeln!(
                            report,
                            "flow {} frame {i}: kernel gso_type {:#x} gso_size {}, engine gso_type {:#x} gso_size {}",
                            hex(key),
                            k.0,
                            k.1,
                            e.0,
                            e.1
                        );
                    }
                }
            }
        }
    }
    (!report.is_empty()).then_some(report)
}
