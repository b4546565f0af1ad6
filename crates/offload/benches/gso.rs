//! GSO throughput: nanoseconds per emitted segment.
//!
//! Each super-packet is built once, outside the timed loop, the way GRO
//! delivers it (real lengths, valid checksums); each iteration segments it
//! into MSS-sized packets with fresh IPv4 header checksums, IDs, sequence
//! numbers and full TCP/UDP checksums. Reported as elements (segments) per
//! second; ns/segment is the inverse.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload::build::{vxlan_payload, FrameSpec, TcpSpec};
use offload::gso::{segment, GsoParams};
use offload::LinkKind;
use std::hint::black_box;
use std::time::Duration;

const MSS: usize = 1448;

fn tcp_super(v6: bool, segs: usize) -> Vec<u8> {
    let tcp = TcpSpec::data(40_000, 5201, 1).with_timestamps(1000, 2000);
    let payload: Vec<u8> = (0..segs * MSS).map(|i| i as u8).collect();
    if v6 {
        FrameSpec::tcp6([0xfd; 16], [0xfe; 16], tcp)
            .payload(payload)
            .build()
    } else {
        FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp)
            .payload(payload)
            .build()
    }
}

fn udp_super(segs: usize) -> Vec<u8> {
    FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 5000, 443)
        .payload(vec![7; segs * MSS])
        .build()
}

fn vxlan_super(segs: usize) -> Vec<u8> {
    let inner_mss = MSS - 50;
    let tcp = TcpSpec::data(33_333, 80, 1);
    let inner = FrameSpec::tcp4([192, 168, 0, 2], [192, 168, 0, 1], tcp)
        .payload(vec![9; segs * inner_mss])
        .build();
    let mut outer = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 40_000, 4789)
        .payload(vxlan_payload(42, &inner));
    outer.udp_mut().zero_checksum = true;
    outer.build()
}

fn bench_gso(c: &mut Criterion) {
    let mut g = c.benchmark_group("gso");
    // 45 × 1448 = 65160 payload bytes: the largest 64 KiB super-packet.
    let cases: Vec<(&str, Vec<u8>, usize, usize)> = vec![
        ("tcp4-64k", tcp_super(false, 45), MSS, 45),
        ("tcp6-64k", tcp_super(true, 45), MSS, 45),
        ("udp4-64k", udp_super(45), MSS, 45),
        ("vxlan-tcp4-62k", vxlan_super(44), MSS - 50, 44),
    ];
    for (name, frame, mss, segs) in cases {
        let params = GsoParams::new(mss as u32);
        // Check once, outside the timing, that the case segments as meant.
        let n = segment(
            LinkKind::Ethernet,
            &frame,
            &params,
            &[4789],
            &mut |_s: &[u8]| {},
        )
        .expect("benchmark super-packet segments");
        assert_eq!(n, segs, "{name}");
        g.throughput(Throughput::Elements(segs as u64));
        g.bench_with_input(BenchmarkId::new(name, mss), &frame, |b, frame| {
            b.iter(|| {
                let mut bytes = 0usize;
                segment(
                    LinkKind::Ethernet,
                    frame,
                    &params,
                    &[4789],
                    &mut |s: &[u8]| bytes += black_box(s).len(),
                )
                .map(|n| (n, bytes))
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_gso
}
criterion_main!(benches);
