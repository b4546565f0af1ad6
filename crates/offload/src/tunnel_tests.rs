//! Tunnels and kernel profiles: one test per rule, and a GRO → GSO round
//! trip through each tunnel. The live-kernel checks of the same rules are
//! in `crates/offload-conformance` (selftest cases over IPIP, IPv6 in IPv6
//! and GRE; 6.1 and 6.12 in a VM).

use crate::build::{FrameSpec, L2Spec, TcpSpec};
use crate::checksum;
use crate::gro::*;
use crate::gso::{self, GsoParams};
use crate::link::LinkKind;
use crate::wire::tcp::flags as tf;

const A: [u8; 4] = [10, 0, 0, 2];
const B: [u8; 4] = [10, 0, 0, 1];
const OA: [u8; 4] = [192, 0, 2, 2];
const OB: [u8; 4] = [192, 0, 2, 1];
const MSS: usize = 1000;

/// Inner IPv4/TCP segment `i` (raw IP, DF, ID fixed 7).
fn inner(i: u32) -> FrameSpec {
    let mut s = FrameSpec::tcp4(A, B, TcpSpec::data(40000, 5201, 1000 + i * MSS as u32))
        .payload(vec![i as u8; MSS]);
    s.l2 = L2Spec::None;
    s.v4_mut().id = 7;
    s
}

/// An IPv4 header of protocol `proto` around `payload`.
fn outer4(payload: &[u8], proto: u8, id: u16, ttl: u8, df: bool) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6] = if df { 0x40 } else { 0 };
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&OA);
    h[16..20].copy_from_slice(&OB);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn eth(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// IPIP frame: inner segment `i`, outer ID `id`.
fn ipip(i: u32, id: u16, ttl: u8, df: bool) -> Vec<u8> {
    eth(&outer4(&inner(i).build(), 4, id, ttl, df))
}

/// GRE frame with `flags` (key 42 when K; checksum when C; sequence 9 when S).
fn gre(i: u32, flags: u16) -> Vec<u8> {
    let mut g = flags.to_be_bytes().to_vec();
    g.extend_from_slice(&0x0800u16.to_be_bytes());
    if flags & 0x8000 != 0 {
        g.extend_from_slice(&[0; 4]);
    }
    if flags & 0x2000 != 0 {
        g.extend_from_slice(&42u32.to_be_bytes());
    }
    if flags & 0x1000 != 0 {
        g.extend_from_slice(&9u32.to_be_bytes());
    }
    g.extend_from_slice(&inner(i).build());
    if flags & 0x8000 != 0 {
        let c = checksum::checksum(&g);
        g[4..6].copy_from_slice(&c.to_be_bytes());
    }
    eth(&outer4(&g, 47, 100 + i as u16, 64, false))
}

fn run(cfg: GroConfig, frames: &[Vec<u8>]) -> Vec<(Vec<u8>, u32, u32, u32, FlushReason)> {
    let mut e = GroEngine::new(cfg);
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        outs.push((
            d.to_vec(|n| &frames[n as usize - 1]),
            d.segments,
            d.gso_size,
            d.gso_type,
            d.reason,
        ))
    };
    for (i, f) in frames.iter().enumerate() {
        e.receive(
            Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64 * 1000,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            },
            &mut push,
        );
    }
    e.finish(&mut push);
    outs
}

fn cfg(kernel: KernelLine) -> GroConfig {
    GroConfig {
        flush_timeout_ns: 10_000_000,
        kernel,
        ..GroConfig::default()
    }
}

fn reasons(o: &[(Vec<u8>, u32, u32, u32, FlushReason)]) -> Vec<(u32, FlushReason)> {
    o.iter().map(|x| (x.1, x.4)).collect()
}

/// GRO of `frames` then GSO of the result gives `frames` back.
fn round_trip(frames: &[Vec<u8>]) {
    let o = run(cfg(KernelLine::V6_18), frames);
    assert_eq!(o.len(), 1, "{:?}", reasons(&o));
    let (data, segs, size, ty, _) = &o[0];
    assert_eq!(*segs as usize, frames.len());
    let mut back = Vec::new();
    gso::segment(
        LinkKind::Ethernet,
        data,
        &GsoParams::from_gso(*size, *ty),
        &[],
        &mut |s: &[u8]| back.push(s.to_vec()),
    )
    .unwrap();
    assert_eq!(back.len(), frames.len());
    for (i, (a, b)) in back.iter().zip(frames).enumerate() {
        assert_eq!(a, b, "segment {i}");
    }
}

#[test]
fn ipip_merges_and_marks_ipxip4() {
    let frames: Vec<_> = (0..4).map(|i| ipip(i, 50 + i as u16, 64, false)).collect();
    let o = run(cfg(KernelLine::V6_18), &frames);
    assert_eq!(reasons(&o), vec![(4, FlushReason::EndOfInput)]);
    let ty = o[0].3;
    assert_ne!(ty & gso_type::IPXIP4, 0);
    assert_ne!(ty & gso_type::TCPV4, 0);
    // Inner IDs all 7: the inner header was marked fixed.
    assert_ne!(ty & gso_type::TCP_FIXEDID_INNER, 0);
    // Outer and inner lengths cover the merged packet.
    let f = &o[0].0;
    assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, f.len() - 14);
    assert_eq!(u16::from_be_bytes([f[36], f[37]]) as usize, f.len() - 34);
    assert_eq!(checksum::checksum(&f[14..34]), 0);
    assert_eq!(checksum::checksum(&f[34..54]), 0);
}

#[test]
fn ipip_round_trips_through_gso() {
    round_trip(
        &(0..5)
            .map(|i| ipip(i, 50 + i as u16, 64, false))
            .collect::<Vec<_>>(),
    );
}

#[test]
fn gre_round_trips_with_key_and_with_checksum() {
    round_trip(&(0..5).map(|i| gre(i, 0x2000)).collect::<Vec<_>>());
    // The GRE checksum of each segment is computed afresh by GSO; GRO
    // leaves the head's checksum field as it was, so compare everything
    // but that field.
    let frames: Vec<_> = (0..3).map(|i| gre(i, 0xa000)).collect();
    let o = run(cfg(KernelLine::V6_18), &frames);
    assert_eq!(o.len(), 1);
    assert_ne!(o[0].3 & gso_type::GRE_CSUM, 0);
}

#[test]
fn outer_header_changes_have_outer_reasons() {
    let base = ipip(0, 50, 64, false);
    for (second, want) in [
        (ipip(1, 90, 64, false), FlushReason::OuterIpIdMismatch),
        (ipip(1, 51, 63, false), FlushReason::OuterTtlChanged),
        (ipip(1, 51, 64, true), FlushReason::OuterDfChanged),
    ] {
        let o = run(cfg(KernelLine::V6_18), &[base.clone(), second]);
        assert_eq!(o[0].4, want);
    }
    let mut tos = ipip(1, 51, 64, false);
    tos[15] = 4;
    tos[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&tos[14..34]);
    tos[24..26].copy_from_slice(&c.to_be_bytes());
    let o = run(cfg(KernelLine::V6_18), &[base, tos]);
    assert_eq!(o[0].4, FlushReason::OuterTosChanged);
}

#[test]
fn tunnel_in_tunnel_passes_and_gre_sequence_numbers_pass() {
    let nested = eth(&outer4(
        &outer4(&inner(0).build(), 4, 1, 64, true),
        4,
        2,
        64,
        true,
    ));
    let o = run(cfg(KernelLine::V6_18), &[nested]);
    assert_eq!(reasons(&o), vec![(1, FlushReason::NestedTunnel)]);
    let o = run(cfg(KernelLine::V6_18), &[gre(0, 0x1000), gre(1, 0x1000)]);
    assert_eq!(
        reasons(&o),
        vec![
            (1, FlushReason::GreUnsupported),
            (1, FlushReason::GreUnsupported)
        ]
    );
}

#[test]
fn gre_key_is_part_of_the_flow() {
    let mut other = gre(1, 0x2000);
    other[14 + 20 + 7] = 43;
    let o = run(
        cfg(KernelLine::V6_18),
        &[gre(0, 0x2000), other, gre(1, 0x2000)],
    );
    // Two flows: key 42 (segments 0 and 1 merged), key 43 alone.
    assert_eq!(o.len(), 2);
    assert!(o.iter().any(|x| x.1 == 2));
}

/// `gre_gro_receive` compares "the key" as the word after the base
/// header: with the checksum flag set that is the checksum, which differs
/// between segments of different lengths (valid inner headers fold to
/// their pseudo-header). A shorter segment then finds no held packet: a
/// payload-less FIN goes up first and alone, the held packet later (6.18
/// on the selftest cases over GRE with checksum and key).
#[test]
fn gre_checksum_and_key_compare_the_checksum_word() {
    let short = |flags: u16| {
        let mut s = inner(2);
        s.payload.truncate(MSS / 2);
        let mut g = flags.to_be_bytes().to_vec();
        g.extend_from_slice(&0x0800u16.to_be_bytes());
        g.extend_from_slice(&[0; 4]);
        if flags & 0x2000 != 0 {
            g.extend_from_slice(&42u32.to_be_bytes());
        }
        g.extend_from_slice(&s.build());
        let c = checksum::checksum(&g);
        g[4..6].copy_from_slice(&c.to_be_bytes());
        eth(&outer4(&g, 47, 102, 64, false))
    };
    let o = run(
        cfg(KernelLine::V6_18),
        &[gre(0, 0xa000), gre(1, 0xa000), short(0xa000)],
    );
    // Two flows: the short segment is held on its own (it has payload),
    // both complete at the end, oldest first.
    assert_eq!(o.iter().map(|x| x.1).collect::<Vec<_>>(), vec![2, 1]);
    assert!(o.iter().all(|x| x.4 == FlushReason::EndOfInput));
    // Checksum alone: nothing after the base header is compared, the
    // short segment is merged and ends the run.
    let o = run(
        cfg(KernelLine::V6_18),
        &[gre(0, 0x8000), gre(1, 0x8000), short(0x8000)],
    );
    assert_eq!(o.iter().map(|x| x.1).collect::<Vec<_>>(), vec![3]);
}

/// Plain IPv4 segments with DF clear and one fixed ID.
fn df0_fixed(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut s = inner(i);
            s.l2 = FrameSpec::tcp4(A, B, TcpSpec::data(1, 2, 3)).l2;
            s.v4_mut().df = false;
            s.build()
        })
        .collect()
}

#[test]
fn df0_fixed_ids_merge_on_6_18_only() {
    let f = df0_fixed(3);
    assert_eq!(
        reasons(&run(cfg(KernelLine::V6_18), &f)),
        vec![(3, FlushReason::EndOfInput)]
    );
    for line in [KernelLine::V6_1, KernelLine::V6_12] {
        let o = run(cfg(line), &f);
        assert_eq!(o.len(), 3, "{line}");
        assert_eq!(o[0].4, FlushReason::IpIdMismatch, "{line}");
    }
}

#[test]
fn cwr_head_merges_later_segments_before_6_18() {
    let frames: Vec<_> = (0..3)
        .map(|i| {
            let mut s = inner(i);
            s.l2 = FrameSpec::tcp4(A, B, TcpSpec::data(1, 2, 3)).l2;
            if i == 0 {
                s.tcp_mut().flags |= tf::CWR;
            }
            s.build()
        })
        .collect();
    // 6.12: CWR ignored in the flag word: one packet, SKB_GSO_TCP_ECN.
    let o = run(cfg(KernelLine::V6_12), &frames);
    assert_eq!(reasons(&o), vec![(3, FlushReason::EndOfInput)]);
    assert_ne!(o[0].3 & gso_type::TCP_ECN, 0);
    // 6.18: the CWR head is alone (flag words differ).
    let o = run(cfg(KernelLine::V6_18), &frames);
    assert_eq!(o[0].1, 1);
    assert_eq!(o[0].4, FlushReason::TcpFlagsChanged);
}

#[test]
fn cwr_does_not_flush_on_7x() {
    let frames: Vec<_> = (0..3)
        .map(|i| {
            let mut s = inner(i);
            s.l2 = FrameSpec::tcp4(A, B, TcpSpec::data(1, 2, 3)).l2;
            s.tcp_mut().flags |= tf::CWR;
            s.build()
        })
        .collect();
    let o = run(cfg(KernelLine::V7), &frames);
    assert_eq!(reasons(&o), vec![(3, FlushReason::EndOfInput)]);
    assert_ne!(o[0].3 & gso_type::TCP_ACCECN, 0);
    let o = run(cfg(KernelLine::V6_18), &frames);
    assert_eq!(o[0].4, FlushReason::CwrSet);
}

#[test]
fn ipv6_big_tcp_has_no_hop_by_hop_header_on_7x() {
    const A6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    const B6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let frames: Vec<_> = (0..80u32)
        .map(|i| {
            FrameSpec::tcp6(A6, B6, TcpSpec::data(1, 2, 1 + i * MSS as u32))
                .payload(vec![1; MSS])
                .build()
        })
        .collect();
    for (line, hbh) in [(KernelLine::V6_18, true), (KernelLine::V7, false)] {
        let c = GroConfig {
            gro_max_size: 185_000,
            ..cfg(line)
        };
        let o = run(c, &frames);
        assert_eq!(o.len(), 1, "{line}");
        let f = &o[0].0;
        assert_eq!(&f[18..20], &[0, 0], "{line}: payload length 0");
        assert_eq!(f[20] == 0, hbh, "{line}: next header");
        assert_eq!(f.len(), 14 + 40 + 20 + 80 * MSS + if hbh { 8 } else { 0 });
    }
}

#[test]
fn ipv4_stays_below_64k_on_6_1_whatever_gro_ipv4_max_size_says() {
    let frames: Vec<_> = (0..80)
        .map(|i| {
            let mut s = inner(i);
            s.l2 = FrameSpec::tcp4(A, B, TcpSpec::data(1, 2, 3)).l2;
            s.v4_mut().id = 100 + i as u16;
            s.build()
        })
        .collect();
    let big = |line| GroConfig {
        gro_max_size: 185_000,
        gro_ipv4_max_size: 185_000,
        ..cfg(line)
    };
    assert_eq!(run(big(KernelLine::V6_12), &frames).len(), 1);
    let o = run(big(KernelLine::V6_1), &frames);
    assert_eq!(o[0].4, FlushReason::SizeLimit);
    assert!(o.iter().all(|x| x.0.len() <= 14 + 65535));
}

/// Ethernet / IPv4 / UDP 6081 / Geneve (`first_byte`, `flags`) / inner
/// Ethernet / IPv4 / TCP segment `i`.
fn geneve(i: u32, flags: u8) -> Vec<u8> {
    let mut inner_eth = vec![2, 0, 0, 0, 0, 0xa1, 2, 0, 0, 0, 0, 0xa2, 0x08, 0x00];
    inner_eth.extend_from_slice(&inner(i).build());
    let mut udp = vec![0xc0, 0x00, 0x17, 0xc1, 0, 0, 0, 0];
    udp.extend_from_slice(&[
        0x02, flags, 0x65, 0x58, 0, 0, 5, 0, 1, 2, 0x80, 1, 1, 2, 3, 4,
    ]);
    udp.extend_from_slice(&inner_eth);
    let ul = udp.len() as u16;
    udp[4..6].copy_from_slice(&ul.to_be_bytes());
    eth(&outer4(&udp, 17, 100 + i as u16, 64, false))
}

#[test]
fn geneve_merges_and_oam_passes() {
    let frames: Vec<_> = (0..3).map(|i| geneve(i, 0)).collect();
    let o = run(cfg(KernelLine::V6_18), &frames);
    assert_eq!(reasons(&o), vec![(3, FlushReason::EndOfInput)]);
    assert_ne!(o[0].3 & gso_type::UDP_TUNNEL, 0);
    let oam: Vec<_> = (0..2).map(|i| geneve(i, 0x80)).collect();
    let o = run(cfg(KernelLine::V6_18), &oam);
    assert_eq!(
        reasons(&o),
        vec![
            (1, FlushReason::GeneveUnsupported),
            (1, FlushReason::GeneveUnsupported)
        ]
    );
    // Without a Geneve socket the same frames are plain UDP.
    let c = GroConfig {
        geneve_ports: Vec::new(),
        udp: UdpGro::Off,
        ..cfg(KernelLine::V6_18)
    };
    let o = run(c, &frames);
    assert!(o.iter().all(|x| x.4 == FlushReason::UnsupportedProtocol));
}

#[test]
fn fin_ends_a_run_and_a_lone_fin_passes_and_arp_is_not_ip() {
    let mut fin = inner(1);
    fin.l2 = FrameSpec::tcp4(A, B, TcpSpec::data(1, 2, 3)).l2;
    fin.tcp_mut().flags |= tf::FIN;
    let mut first = inner(0);
    first.l2 = fin.l2.clone();
    let o = run(cfg(KernelLine::V6_18), &[first.build(), fin.build()]);
    assert_eq!(reasons(&o), vec![(2, FlushReason::FinFlag)]);
    let o = run(cfg(KernelLine::V6_18), &[fin.build()]);
    assert_eq!(reasons(&o), vec![(1, FlushReason::FinAlone)]);
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 2, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    let o = run(cfg(KernelLine::V6_18), &[arp]);
    assert_eq!(reasons(&o), vec![(1, FlushReason::NotIp)]);
}

#[test]
fn short_tcp_header_is_malformed_and_outgoing_frames_pass() {
    // An IPv4 packet whose TCP header is cut to 10 bytes (lengths agree).
    let mut ip = inner(0).build();
    ip.truncate(30);
    ip[2..4].copy_from_slice(&30u16.to_be_bytes());
    ip[10..12].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let c = GroConfig {
        verify_checksums: false,
        ..cfg(KernelLine::V6_18)
    };
    let o = run(c, &[eth(&ip)]);
    assert_eq!(reasons(&o), vec![(1, FlushReason::Malformed)]);
    // Linux cooked capture (SLL), packet type 4: sent by this host.
    let mut sll = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 2, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&inner(0).build());
    let mut e = GroEngine::new(cfg(KernelLine::V6_18));
    let mut got = Vec::new();
    e.receive(
        Input {
            data: &sll,
            link: LinkKind::LinuxSll,
            timestamp_ns: 0,
            frame: 1,
            orig_len: sll.len() as u32,
        },
        &mut |d: &Delivered<'_>| got.push(d.reason),
    );
    assert_eq!(got, vec![FlushReason::Outgoing]);
}

/// Every reason is produced by at least one test: each variant must be
/// named in an assertion of this file or of `tests.rs` (a textual check:
/// a new reason without a test that expects it fails here).
#[test]
fn every_reason_has_a_producing_test() {
    let tests = [
        include_str!("gro/tests.rs"),
        include_str!("tunnel_tests.rs"),
    ]
    .concat();
    for r in FlushReason::ALL {
        let name = format!("FlushReason::{r:?}");
        let named = tests
            .match_indices(&name)
            .any(|(at, _)| !tests[at + name.len()..].starts_with(|c: char| c.is_alphanumeric()));
        assert!(named, "no test expects {name}");
    }
}

/// An IPv6 header (fd00::2 -> fd00::1) of next header `next` around `payload`.
fn outer6(payload: &[u8], next: u8) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    h[6] = next;
    h[7] = 64;
    h[8] = 0xfd;
    h[23] = 2;
    h[24] = 0xfd;
    h[39] = 1;
    h.extend_from_slice(payload);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
    f.extend_from_slice(&h);
    f
}

/// Inner IPv6/TCP segment `i` (raw IP).
fn inner6(i: u32) -> Vec<u8> {
    const A6: [u8; 16] = [0xfd, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    const B6: [u8; 16] = [0xfd, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let mut s = FrameSpec::tcp6(A6, B6, TcpSpec::data(40000, 5201, 1000 + i * MSS as u32))
        .payload(vec![i as u8; MSS]);
    s.l2 = L2Spec::None;
    s.build()
}

/// Runs `frames` and returns (segments, lost) per delivery and the stats.
fn run_lost(cfg: GroConfig, frames: &[Vec<u8>]) -> (Vec<(u32, Option<LossReason>)>, GroStats) {
    let mut e = GroEngine::new(cfg);
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| outs.push((d.segments, d.lost));
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link: LinkKind::Ethernet,
            timestamp_ns: i as u64 * 1000,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        };
        e.receive(input, &mut push);
    }
    e.finish(&mut push);
    (outs, e.stats().clone())
}

#[test]
fn big_tcp_through_ipv6_outer_tunnels_is_lost_before_7x() {
    // 100 segments of 1000 bytes: one merge of about 100 KB of outer payload.
    let ip6ip6: Vec<_> = (0..100).map(|i| outer6(&inner6(i), 41)).collect();
    let ip4ip6: Vec<_> = (0..100).map(|i| outer6(&inner(i).build(), 4)).collect();
    let big = |line| GroConfig {
        gro_max_size: 185_000,
        gro_ipv4_max_size: 185_000,
        ..cfg(line)
    };
    for line in [KernelLine::V6_18] {
        for frames in [&ip6ip6, &ip4ip6] {
            let (o, st) = run_lost(big(line), frames);
            assert_eq!(
                o,
                vec![(100, Some(LossReason::Ipv6TunnelJumboDropped))],
                "{line}"
            );
            assert_eq!(
                (st.lost_packets, st.lost_segments, st.packets_out),
                (1, 100, 0)
            );
            // The working behaviour on request: the same merge, sound.
            let sound = GroConfig {
                kernel_losses: false,
                ..big(line)
            };
            assert_eq!(run_lost(sound, frames).0, vec![(100, None)], "{line}");
        }
    }
    // 7.x: payload length 0 and no Hop-by-Hop header, delivered sound.
    assert_eq!(run_lost(big(KernelLine::V7), &ip6ip6).0, vec![(100, None)]);
    // 6.1 (5.19-6.2): no tunnel passes 64 KiB (the outermost header's
    // next header must be TCP), so nothing is lost: size flushes instead.
    for frames in [&ip6ip6, &ip4ip6] {
        for line in [KernelLine::V6_1, KernelLine::V6_12] {
            let (o, st) = run_lost(big(line), frames);
            assert!(o.len() > 1 && o.iter().all(|x| x.1.is_none()), "{o:?}");
            assert_eq!(st.reason_count(FlushReason::SizeLimit), o.len() as u64 - 1);
        }
    }
    // Below 64 KiB of outer payload nothing is lost on any line.
    for line in KernelLine::ALL {
        let (o, _) = run_lost(big(line), &ip6ip6[..60]);
        assert_eq!(o, vec![(60, None)], "{line}");
    }
    // The default gro_max_size (64 KiB) never gets there.
    let (o, _) = run_lost(cfg(KernelLine::V6_18), &ip6ip6);
    assert!(o.iter().all(|x| x.1.is_none()));
}

#[test]
fn big_tcp_through_ipv4_outer_tunnels_is_sound() {
    let frames: Vec<_> = (0..100)
        .map(|i| ipip(i, 100 + i as u16, 64, false))
        .collect();
    let big = GroConfig {
        gro_max_size: 185_000,
        gro_ipv4_max_size: 185_000,
        ..cfg(KernelLine::V6_18)
    };
    assert_eq!(run_lost(big, &frames).0, vec![(100, None)]);
}

#[test]
fn handle_timeout_completes_only_what_is_older_than_the_flush_timeout() {
    let seg = |sport: u16, i: u32| {
        FrameSpec::tcp4(A, B, TcpSpec::data(sport, 5201, 1 + i * MSS as u32))
            .payload(vec![1; MSS])
            .build()
    };
    // Flow 1 held at t=0 (two segments), flow 2 at t=30 µs.
    let frames = [seg(1, 0), seg(1, 1), seg(2, 0)];
    let ts = [0u64, 10_000, 30_000];
    let mut e = GroEngine::new(GroConfig::default().flush_timeout_ns(50_000));
    let mut out = Vec::new();
    let mut push = |d: &Delivered<'_>| out.push((d.first_frame, d.segments, d.reason));
    assert_eq!(e.poll_timeout(), None);
    e.receive_batch(
        frames.iter().zip(ts).enumerate().map(|(i, (f, t))| Input {
            data: f,
            link: LinkKind::Ethernet,
            timestamp_ns: t,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        }),
        &mut push,
    );
    // The deadline is the oldest held packet's first frame plus the timeout.
    assert_eq!(e.poll_timeout(), Some(50_000));
    e.handle_timeout(49_999, &mut push);
    e.handle_timeout(60_000, &mut push);
    // Flow 2 (held at 30 µs) is not due yet.
    assert_eq!(e.poll_timeout(), Some(80_000));
    e.handle_timeout(80_000, &mut push);
    assert_eq!(
        out,
        vec![(1, 2, FlushReason::Timeout), (3, 1, FlushReason::Timeout)]
    );
}

#[test]
fn tunnels_stop_at_64k_up_to_6_12() {
    let frames: Vec<_> = (0..100)
        .map(|i| ipip(i, 100 + i as u16, 64, false))
        .collect();
    for line in [KernelLine::V6_1, KernelLine::V6_12] {
        let big = GroConfig {
            gro_max_size: 185_000,
            gro_ipv4_max_size: 185_000,
            ..cfg(line)
        };
        let o = run(big, &frames);
        assert!(o.len() > 1, "{line}");
        assert!(o.iter().all(|x| x.0.len() <= 14 + 65535), "{line}");
    }
}
