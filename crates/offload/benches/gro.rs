//! GRO throughput: nanoseconds per received frame.
//!
//! Frames are built once, outside the timed loop; each iteration runs a
//! fresh engine over the whole train and `finish`es it, so the figure
//! includes holding, merging, completing (header fix-up, checksums) and
//! delivering. Checksums are verified in software (the engine's default).
//! Flows are interleaved round-robin, the worst order for a table of
//! `MAX_GRO_SKBS` (8) held packets: beyond 8 flows every frame evicts the
//! oldest held packet. Reported as elements (frames) per second; ns/frame is
//! the inverse.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload::build::{vxlan_payload, FrameSpec, TcpSpec};
use offload::gro::UdpGro;
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind, RxChecksum};
use std::hint::black_box;
use std::time::Duration;

const MSS: usize = 1448;

/// Builds frame `i` of flow `f`.
type Maker = fn(usize, usize) -> Vec<u8>;

/// Addresses of flow `f` (up to 2^16 flows per port range).
fn v4(f: usize) -> ([u8; 4], [u8; 4], u16) {
    (
        [10, 1, (f >> 8) as u8, f as u8],
        [10, 2, 0, 1],
        10_000 + (f % 50_000) as u16,
    )
}

fn tcp4(f: usize, i: usize) -> Vec<u8> {
    let (src, dst, sport) = v4(f);
    let tcp = TcpSpec::data(sport, 5201, 1 + (i * MSS) as u32).with_timestamps(1000, 2000);
    let mut s = FrameSpec::tcp4(src, dst, tcp).payload(vec![(f ^ i) as u8; MSS]);
    s.v4_mut().id = i as u16;
    s.build()
}

fn tcp6(f: usize, i: usize) -> Vec<u8> {
    let mut src = [0u8; 16];
    src[0] = 0xfd;
    src[14] = (f >> 8) as u8;
    src[15] = f as u8;
    let mut dst = src;
    dst[1] = 2;
    let tcp = TcpSpec::data(10_000 + (f % 50_000) as u16, 5201, 1 + (i * MSS) as u32)
        .with_timestamps(1000, 2000);
    FrameSpec::tcp6(src, dst, tcp)
        .payload(vec![(f ^ i) as u8; MSS])
        .build()
}

fn udp4(f: usize, i: usize) -> Vec<u8> {
    let (src, dst, sport) = v4(f);
    let mut s = FrameSpec::udp4(src, dst, sport, 443).payload(vec![(f ^ i) as u8; 1200]);
    s.v4_mut().id = i as u16;
    s.build()
}

/// VXLAN (VNI 42, outer UDP checksum 0) carrying TCP/IPv4 segment `i` of
/// inner flow `f`; inner MSS 1398 so that the outer frame is 1514 bytes.
fn vxlan(f: usize, i: usize) -> Vec<u8> {
    let (src, dst, sport) = v4(f);
    let inner_mss = MSS - 50;
    let tcp = TcpSpec::data(sport, 80, 1 + (i * inner_mss) as u32);
    let mut inner =
        FrameSpec::tcp4([192, 168, 0, 2], [192, 168, 0, 1], tcp)
            .payload(vec![(f ^ i) as u8; inner_mss]);
    inner.v4_mut().id = i as u16;
    let mut outer =
        FrameSpec::udp4(src, dst, 40_000, 4789).payload(vxlan_payload(42, &inner.build()));
    outer.v4_mut().id = i as u16;
    outer.udp_mut().zero_checksum = true;
    outer.build()
}

/// `total` frames of `flows` flows, round-robin.
fn interleaved(flows: usize, total: usize, make: Maker) -> Vec<Vec<u8>> {
    (0..total).map(|n| make(n % flows, n / flows)).collect()
}

fn cfg() -> GroConfig {
    GroConfig::default().udp(UdpGro::AllPorts)
}

/// Runs one engine, with its default (zero-copy) delivery, over `frames`;
/// returns deliveries (kept alive by black_box).
fn run(cfg: &GroConfig, frames: &[Vec<u8>]) -> u64 {
    run_with(cfg, frames, RxChecksum::None, true)
}

/// [`run`] with the caller's checksum verdict, zero-copy or contiguous.
fn run_with(cfg: &GroConfig, frames: &[Vec<u8>], csum: RxChecksum, zero_copy: bool) -> u64 {
    let mut e = GroEngine::new(cfg.clone());
    e.set_zero_copy(zero_copy);
    let mut delivered = 0u64;
    let mut out = |d: &Delivered<'_>| {
        delivered += 1;
        black_box((d.data.len(), d.frags.len()));
    };
    for (i, f) in frames.iter().enumerate() {
        e.receive_with_checksum(
            Input {
                data: f,
                link: LinkKind::Ethernet,
                // 100 ns apart: well inside the 50 µs flush timeout.
                timestamp_ns: 100 * i as u64,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            },
            csum,
            &mut out,
        );
    }
    e.finish(&mut out);
    delivered
}

fn bench_flows(c: &mut Criterion) {
    let mut g = c.benchmark_group("gro");
    let cases: [(&str, usize, Maker); 9] = [
        ("tcp4", 1, tcp4),
        ("tcp4", 8, tcp4),
        ("tcp4", 1000, tcp4),
        ("tcp6", 1, tcp6),
        ("tcp6", 8, tcp6),
        ("udp4", 1, udp4),
        ("udp4", 8, udp4),
        ("vxlan", 1, vxlan),
        ("vxlan", 8, vxlan),
    ];
    let cfg = cfg();
    for (name, flows, make) in cases {
        let frames = interleaved(flows, 4096, make);
        // Outside the timing: the case really coalesces (≥ 10 frames per
        // delivery while the flows fit in the table).
        let delivered = run(&cfg, &frames);
        if flows <= 8 {
            assert!(
                delivered * 10 <= frames.len() as u64,
                "{name}/{flows}: {delivered} deliveries"
            );
        }
        g.throughput(Throughput::Elements(frames.len() as u64));
        g.bench_with_input(BenchmarkId::new(name, flows), &frames, |b, frames| {
            b.iter(|| run(&cfg, frames))
        });
    }
    // The cost of software checksum verification, on the simplest case.
    let no_csum = cfg.clone().verify_checksums(false);
    let frames = interleaved(1, 4096, tcp4);
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_with_input(
        BenchmarkId::new("tcp4-no-verify", 1),
        &frames,
        |b, frames| b.iter(|| run(&no_csum, frames)),
    );
    // Contiguous delivery (`set_zero_copy(false)`, each payload copied),
    // and zero-copy with the caller's "already verified" verdict (a vnet
    // header's DATA_VALID).
    let valid = RxChecksum::Unnecessary { level: 0 };
    for (name, make) in [("tcp4", tcp4 as Maker), ("tcp6", tcp6)] {
        for flows in [1usize, 8] {
            let frames = interleaved(flows, 4096, make);
            g.throughput(Throughput::Elements(frames.len() as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("{name}-copy"), flows),
                &frames,
                |b, frames| b.iter(|| run_with(&cfg, frames, RxChecksum::None, false)),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("{name}-valid"), flows),
                &frames,
                |b, frames| b.iter(|| run_with(&cfg, frames, valid, true)),
            );
        }
    }
    g.finish();
}

/// Frames per iteration of the flow-scaling group.
const SCALING_FRAMES: usize = 60_000;

fn bench_scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("gro-flow-scaling");
    g.sample_size(10);
    let cfg = cfg();
    for flows in [1usize, 10, 100, 1000, 10_000, 30_000] {
        // The same 60 000 frames (90 MB) for every flow count, so that only
        // the interleaving changes, not the memory footprint; 30 000 flows
        // get two segments each.
        let frames = interleaved(flows, SCALING_FRAMES, tcp4);
        g.throughput(Throughput::Elements(frames.len() as u64));
        g.bench_with_input(BenchmarkId::new("tcp4", flows), &frames, |b, frames| {
            b.iter(|| run(&cfg, frames))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_flows, bench_scaling
}
criterion_main!(benches);
