//! GSO round trips: what GRO merges, GSO gives back byte for byte.

use super::*;
use crate::build::{vxlan_payload, FrameSpec, TcpSpec};
use crate::gro::{Delivered, GroConfig, GroEngine, Input};

fn gro(cfg: GroConfig, frames: &[Vec<u8>]) -> Vec<(Vec<u8>, u32, u32, u32)> {
    let mut e = GroEngine::new(cfg);
    let mut out = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        let packet = d.to_vec(|n| &frames[n as usize - 1]);
        out.push((packet, d.segments, d.gso_size, d.gso_type))
    };
    for (i, f) in frames.iter().enumerate() {
        e.receive(
            Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            },
            &mut push,
        );
    }
    e.finish(&mut push);
    out
}

fn gso_all(delivered: &[(Vec<u8>, u32, u32, u32)]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (data, segs, size, ty) in delivered {
        if *segs == 1 {
            out.push(data.clone());
            continue;
        }
        let params = GsoParams::from_gso(*size, *ty);
        let first = out.len();
        let n = segment(
            LinkKind::Ethernet,
            data,
            &params,
            &[4789],
            &mut |s: &[u8]| out.push(s.to_vec()),
        )
        .unwrap();
        assert_eq!(n as u32, *segs);
        // The arena path gives the same segments, back to back after
        // whatever the arena held, and leaves that untouched.
        let lay = layout(LinkKind::Ethernet, data, &[4789]).unwrap();
        let mut arena = vec![0xa5; 7];
        let mut ranges = Vec::new();
        let m =
            segment_layout_into(data, &lay, &params, &mut arena, &mut |r| ranges.push(r)).unwrap();
        assert_eq!(m, n);
        assert_eq!(&arena[..7], &[0xa5; 7]);
        assert_eq!(ranges.first().map(|r| r.start), Some(7));
        assert_eq!(ranges.last().map(|r| r.end), Some(arena.len()));
        let from_arena: Vec<Vec<u8>> = ranges.iter().map(|r| arena[r.clone()].to_vec()).collect();
        assert_eq!(
            from_arena,
            out[first..],
            "arena segments equal the copied ones"
        );
    }
    out
}

fn cfg(size: u32) -> GroConfig {
    GroConfig {
        gro_max_size: size,
        gro_ipv4_max_size: size,
        flush_timeout_ns: 1_000_000,
        ..Default::default()
    }
}

fn tcp_train(v6: bool, n: u32, mss: usize, tail: usize, fixed: bool) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = if i + 1 == n { tail } else { mss };
            let tcp = TcpSpec::data(1000, 2000, 7 + i * mss as u32).with_timestamps(1, 2);
            let mut s = if v6 {
                FrameSpec::tcp6([1; 16], [2; 16], tcp)
            } else {
                FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp)
            };
            if let crate::build::IpSpec::V4(v) = &mut s.ip {
                v.id = if fixed { 500 } else { 500 + i as u16 };
            }
            if i + 1 == n {
                s.tcp_mut().flags |= flags::PSH;
            }
            s.payload((0..len).map(|b| (b as u32 + i) as u8).collect())
                .build()
        })
        .collect()
}

#[test]
fn tcp4_round_trip_incrementing_and_fixed_ids() {
    for fixed in [false, true] {
        let train = tcp_train(false, 30, 1448, 100, fixed);
        let merged = gro(cfg(65536), &train);
        assert!(merged.len() < train.len());
        assert_eq!(gso_all(&merged), train, "fixed {fixed}");
    }
}

#[test]
fn tcp6_big_tcp_jumbo_round_trip() {
    let train = tcp_train(true, 120, 1428, 1428, false);
    let merged = gro(cfg(185_000), &train);
    assert_eq!(merged.len(), 1);
    assert_eq!(gso_all(&merged), train);
}

#[test]
fn tcp4_big_tcp_total_length_zero_round_trip() {
    let train = tcp_train(false, 100, 1448, 10, false);
    let merged = gro(cfg(185_000), &train);
    assert_eq!(merged.len(), 1);
    assert_eq!(gso_all(&merged), train);
}

#[test]
fn udp_uso_round_trip() {
    let train: Vec<Vec<u8>> = (0..10u16)
        .map(|i| {
            let mut s = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 999, 443).payload(
                (0..if i == 9 { 300 } else { 1200 })
                    .map(|b| (b + i as usize) as u8)
                    .collect(),
            );
            s.v4_mut().id = 40 + i;
            s.build()
        })
        .collect();
    let merged = gro(cfg(65536), &train);
    assert_eq!(merged.len(), 1);
    assert_eq!(gso_all(&merged), train);
}

#[test]
fn vxlan_round_trip_with_and_without_outer_checksum() {
    for csum in [false, true] {
        let train: Vec<Vec<u8>> = (0..12u32)
            .map(|i| {
                let mut inner = FrameSpec::tcp4(
                    [192, 168, 0, 2],
                    [192, 168, 0, 1],
                    TcpSpec::data(5, 6, 1 + i * 1350),
                )
                .payload(vec![i as u8; 1350]);
                inner.v4_mut().id = 9 + i as u16;
                let mut o = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 50000, 4789)
                    .payload(vxlan_payload(42, &inner.build()));
                o.v4_mut().id = 77 + i as u16;
                o.udp_mut().zero_checksum = !csum;
                o.build()
            })
            .collect();
        let merged = gro(cfg(65536), &train);
        assert_eq!(merged.len(), 1, "csum {csum}");
        assert_eq!(gso_all(&merged), train, "csum {csum}");
    }
}

#[test]
fn small_packet_passes_unchanged_and_zero_mss_is_an_error() {
    let f = tcp_train(false, 1, 100, 100, false).remove(0);
    let mut got = Vec::new();
    assert_eq!(
        segment_tcp(
            LinkKind::Ethernet,
            &f,
            &GsoParams::new(1448),
            &mut |s: &[u8]| got.push(s.to_vec())
        ),
        Ok(1)
    );
    assert_eq!(got, vec![f.clone()]);
    assert_eq!(
        segment_tcp(
            LinkKind::Ethernet,
            &f,
            &GsoParams::new(0),
            &mut |_s: &[u8]| {}
        ),
        Err(GsoError::ZeroMss)
    );
}

#[test]
fn ipv6_extension_headers_in_gso_split() {
    // A Destination Options header sits between IPv6 and TCP: every segment
    // keeps it, and the payload length counts it.
    let train: Vec<Vec<u8>> = (0..6u32)
        .map(|i| {
            let mut s = FrameSpec::tcp6([1; 16], [2; 16], TcpSpec::data(1, 2, 9 + i * 1000))
                .payload(vec![i as u8; 1000]);
            s.v6_mut().ext.push((60, vec![1, 4, 0, 0, 0, 0]));
            s.build()
        })
        .collect();
    let merged = gro(cfg(65536), &train);
    assert_eq!(merged.len(), 1);
    assert_eq!(gso_all(&merged), train);
}

#[test]
fn exact_multiple_udp_gso_keeps_the_last_datagram_length() {
    // The 7.0.0-7.1.4 GSO_PARTIAL bug left the wrong UDP length on an
    // exact-multiple last chunk; software USO must give 8 + mss on every one.
    let train: Vec<Vec<u8>> = (0..4u16)
        .map(|i| {
            let mut s = FrameSpec::udp6([1; 16], [2; 16], 7, 443).payload(vec![i as u8; 1000]);
            s.udp_mut().sport = 7;
            s.build()
        })
        .collect();
    let merged = gro(cfg(65536), &train);
    assert_eq!(merged.len(), 1);
    let back = gso_all(&merged);
    assert_eq!(back, train);
    for f in &back {
        assert_eq!(u16::from_be_bytes([f[14 + 40 + 4], f[14 + 40 + 5]]), 1008);
    }
}

/// Up to 6.17 the one fixed-ID bit applies to the innermost header only
/// (a tunnel's outer ID increments); 6.18 has a bit per header; ACCECN
/// exists only where GRO sets it.
#[test]
fn gso_params_per_kernel_line() {
    use crate::gro::KernelLine;
    let p = GsoParams {
        fixed_id: true,
        accecn: true,
        ..GsoParams::new(1448)
    };
    let old = p.on_line(KernelLine::V6_12, true);
    assert!(!old.fixed_id && old.fixed_id_inner && !old.accecn);
    let plain = p.on_line(KernelLine::V6_1, false);
    assert!(plain.fixed_id && !plain.fixed_id_inner);
    let new = p.on_line(KernelLine::V6_18, true);
    assert!(new.fixed_id && !new.fixed_id_inner && new.accecn);
    assert_eq!(p.on_line(KernelLine::V7, true), new);
}
