//! Property tests of TCP segmentation against an independent statement of
//! what `tcp_gso_segment` + `inet_gso_segment` / `ipv6_gso_segment` emit
//! (`gro-gso-reference.md` §11.1), for any super-packet and any MSS:
//!
//! - `ceil(payload / mss)` segments whose payloads, in order, are the
//!   original payload, each at most `mss` bytes;
//! - every segment a valid packet: IPv4 total length and header checksum,
//!   IPv6 payload length (the BIG TCP Hop-by-Hop Jumbo header removed),
//!   TCP checksum over the pseudo-header;
//! - sequence `seq0 + i·mss`; IPv4 ID `id0 + i`, or `id0` with the fixed-ID
//!   flag; FIN/PSH only on the last segment, CWR only on the first unless
//!   AccECN; every other header byte copied.
//!
//! BIG TCP inputs (IPv4 total length 0, IPv6 Jumbo) are drawn too.

use offload::build::{FrameSpec, TcpSpec};
use offload::checksum;
use offload::gso::{segment_tcp, GsoParams};
use offload::wire::ipv4::Ipv4;
use offload::wire::ipv6::{Ipv6, TLV_JUMBO};
use offload::wire::tcp::{flags, Tcp};
use offload::LinkKind;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    v6: bool,
    /// IPv4 total length 0 / IPv6 Hop-by-Hop Jumbo header.
    big: bool,
    payload: usize,
    mss: u32,
    seq: u32,
    id: u16,
    tcp_flags: u8,
    timestamps: bool,
    fixed_id: bool,
    accecn: bool,
    seed: u8,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        prop_oneof![4 => Just(false), 1 => Just(true)],
        prop_oneof![1 => 0usize..2000, 3 => 2000usize..65_000],
        prop_oneof![1 => 1u32..100, 4 => 100u32..=9000],
        (any::<u32>(), any::<u16>()),
        // ACK plus any of CWR, ECE, PSH, FIN, URG.
        (0u8..32).prop_map(|b| {
            let mut f = flags::ACK;
            for (bit, flag) in [flags::CWR, flags::ECE, flags::PSH, flags::FIN, flags::URG]
                .into_iter()
                .enumerate()
            {
                if b & (1 << bit) != 0 {
                    f |= flag;
                }
            }
            f
        }),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<u8>()),
    )
        .prop_map(
            |(
                v6,
                big,
                payload,
                mss,
                (seq, id),
                tcp_flags,
                (timestamps, fixed_id, accecn, seed),
            )| {
                // BIG TCP: make the packet really larger than 64 KiB.
                let payload = if big { payload + 66_000 } else { payload };
                Case {
                    v6,
                    big,
                    payload,
                    mss,
                    seq,
                    id,
                    tcp_flags,
                    timestamps,
                    fixed_id,
                    accecn,
                    seed,
                }
            },
        )
}

impl Case {
    /// The super-packet, and the offset of its IP header (Ethernet: 14).
    fn frame(&self) -> Vec<u8> {
        let mut tcp = TcpSpec::data(40_000, 443, self.seq);
        tcp.flags = self.tcp_flags;
        if self.timestamps {
            tcp = tcp.with_timestamps(11, 22);
        }
        let payload: Vec<u8> = (0..self.payload)
            .map(|i| (i as u8).wrapping_mul(31) ^ self.seed)
            .collect();
        let tcp_len = 20 + if self.timestamps { 12 } else { 0 } + self.payload;
        if self.v6 {
            let mut s = FrameSpec::tcp6([0xfd; 16], [0xfe; 16], tcp).payload(payload);
            if self.big {
                let jumbo = (8 + tcp_len) as u32;
                let mut body = vec![TLV_JUMBO, 4];
                body.extend_from_slice(&jumbo.to_be_bytes());
                s.v6_mut().ext.push((0, body));
                s.v6_mut().payload_len_override = Some(0);
            }
            s.build()
        } else {
            let mut s = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp).payload(payload);
            s.v4_mut().id = self.id;
            if self.big {
                s.v4_mut().total_len_override = Some(0);
            }
            s.build()
        }
    }
}

const L3: usize = 14;

proptest! {
    #[test]
    fn segments_are_valid_packets_that_add_up(c in case_strategy()) {
        let frame = c.frame();
        let mut p = GsoParams::new(c.mss);
        p.fixed_id = c.fixed_id;
        p.accecn = c.accecn;
        let mut segs: Vec<Vec<u8>> = Vec::new();
        let n = segment_tcp(LinkKind::Ethernet, &frame, &p, &mut |s: &[u8]| segs.push(s.to_vec()))
            .map_err(|e| TestCaseError::fail(format!("segment_tcp: {e}")))?;
        prop_assert_eq!(n, segs.len());

        let jumbo_len = if c.v6 && c.big { 8 } else { 0 };
        let l4_in = L3 + if c.v6 { 40 + jumbo_len } else { 20 };
        let thl = 20 + if c.timestamps { 12 } else { 0 };
        let payload = &frame[l4_in + thl..];
        let mss = c.mss as usize;
        if payload.len() <= mss && !(c.v6 && c.big) {
            // Nothing to split: the packet goes out as it is.
            prop_assert_eq!(n, 1);
            prop_assert!(segs[0] == frame);
            return Ok(());
        }
        prop_assert_eq!(n, payload.len().div_ceil(mss).max(1));

        let l4 = L3 + if c.v6 { 40 } else { 20 };
        let mut joined = Vec::with_capacity(payload.len());
        for (i, s) in segs.iter().enumerate() {
            let last = i + 1 == n;
            prop_assert!(s.len() >= l4 + thl);
            let body = &s[l4 + thl..];
            prop_assert!(body.len() <= mss, "segment {i}: {} > mss", body.len());
            prop_assert!(last || body.len() == mss, "segment {i} short");
            joined.extend_from_slice(body);
            // Link header and addresses copied.
            prop_assert!(s[..L3] == frame[..L3]);
            let pseudo = if c.v6 {
                let ip = Ipv6::new_checked(&s[L3..]).expect("IPv6 header");
                prop_assert_eq!(ip.next_header(), 6, "Jumbo HBH not removed");
                prop_assert_eq!(ip.payload_len() as usize, s.len() - L3 - 40);
                checksum::pseudo_ipv6(&ip.src(), &ip.dst(), 6, (s.len() - l4) as u32)
            } else {
                let ip = Ipv4::new_checked(&s[L3..]).expect("IPv4 header");
                prop_assert!(ip.header_checksum_ok(), "segment {i}: IPv4 header checksum");
                prop_assert_eq!(ip.total_len() as usize, s.len() - L3);
                let want_id = if c.fixed_id { c.id } else { c.id.wrapping_add(i as u16) };
                prop_assert_eq!(ip.ident(), want_id, "segment {}: IPv4 ID", i);
                checksum::pseudo_ipv4(ip.src(), ip.dst(), 6, (s.len() - l4) as u32)
            };
            prop_assert!(checksum::verify(pseudo, &s[l4..]), "segment {i}: TCP checksum");
            let t = Tcp::new_checked(&s[l4..]).expect("TCP header");
            prop_assert_eq!(t.seq(), c.seq.wrapping_add((i * mss) as u32));
            let mut want = c.tcp_flags;
            if !last {
                want &= !(flags::FIN | flags::PSH);
            }
            if i > 0 && !c.accecn {
                want &= !flags::CWR;
            }
            prop_assert_eq!(t.flags(), want, "segment {}: flags", i);
            // Ports, ack, window, urgent pointer, options: copied.
            let tin = Tcp::new_checked(&frame[l4_in..]).expect("TCP header");
            prop_assert_eq!(
                (t.port_word(), t.ack(), t.window(), t.urgent(), t.options()),
                (tin.port_word(), tin.ack(), tin.window(), tin.urgent(), tin.options())
            );
        }
        prop_assert!(joined == payload, "payload not preserved");
    }
}

/// Regression (engine, `gso::segment_layout`, fixed in e5b9c2d): an MSS so
/// large that a segment is longer than 65 535 bytes used to produce
/// segments whose IPv4 total length was silently truncated to 16 bits
/// (`(seg_len - l3) as u16`). With a BIG TCP IPv4 input (total length 0)
/// and `mss = 65535` — a value a `virtio_net_hdr` can carry — each segment
/// said 39 bytes long while carrying 65 575. Now: `GsoError`, or segments
/// whose length fields are true.
#[test]
fn oversized_mss_is_refused_or_lengths_are_true() {
    let mut s = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], TcpSpec::data(1, 2, 3))
        .payload(vec![0x42; 200_000]);
    s.v4_mut().total_len_override = Some(0);
    let frame = s.build();
    let mut lens = Vec::new();
    let r = segment_tcp(
        LinkKind::Ethernet,
        &frame,
        &GsoParams::new(65_535),
        &mut |seg: &[u8]| {
            let ip = Ipv4::new_checked(&seg[L3..]).expect("IPv4 header");
            lens.push((ip.total_len() as usize, seg.len() - L3));
        },
    );
    if r.is_ok() {
        for (said, real) in lens {
            assert_eq!(said, real, "IPv4 total length does not match the segment");
        }
    }
}

/// Bug (engine, `gso::segment_layout`, the size check added in e5b9c2d):
/// for VXLAN the limit is taken from the *inner* IP version (65 535 + 40
/// when the inner header is IPv6) but measured from the *outer* network
/// header. With an outer IPv4 header and an inner IPv6 packet, an MSS up to
/// 40 bytes below the limit passes the check while the outer IPv4 total
/// length (20 + 8 + 8 + 14 + 40 + 20 + mss) exceeds 65 535 and is written
/// truncated. Expected: `GsoError`, or true outer lengths.
#[test]
fn vxlan_outer_ipv4_inner_ipv6_oversized_mss_is_refused_or_lengths_are_true() {
    use offload::build::vxlan_payload;
    use offload::gso::segment;
    let mut inner = FrameSpec::tcp6([0xfd; 16], [0xfc; 16], TcpSpec::data(1, 2, 3))
        .payload(vec![0x42; 140_000]);
    inner.v6_mut().payload_len_override = Some(0);
    let mut outer = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 40_000, 4789)
        .payload(vxlan_payload(42, &inner.build()));
    outer.v4_mut().total_len_override = Some(0);
    outer.udp_mut().zero_checksum = true;
    let frame = outer.build();
    // Outer IPv4 + UDP + VXLAN + inner Ethernet + IPv6 + TCP = 110 bytes of
    // headers before the payload: 110 + 65 460 = 65 570 > 65 535.
    let mss = 65_460;
    let mut lens = Vec::new();
    let r = segment(
        LinkKind::Ethernet,
        &frame,
        &GsoParams::new(mss),
        &[4789],
        &mut |seg: &[u8]| {
            let ip = Ipv4::new_checked(&seg[L3..]).expect("outer IPv4 header");
            lens.push((ip.total_len() as usize, seg.len() - L3));
        },
    );
    if r.is_ok() {
        for (said, real) in lens {
            assert_eq!(
                said, real,
                "outer IPv4 total length does not match the segment"
            );
        }
    }
}

/// Checks every segment of a TCP or UDP super-packet over IPv4 with this
/// header: the IPv4 header checksum is the from-scratch value
/// (`ip_send_check`), the TCP/UDP checksum verifies over the pseudo-header
/// (UDP: never 0, `CSUM_MANGLED_0`), and the payloads add up.
#[allow(clippy::too_many_arguments)]
fn check_ipv4_segments(
    udp: bool,
    src: [u8; 4],
    dst: [u8; 4],
    (tos, ttl, id, df): (u8, u8, u16, bool),
    options: &[u8],
    payload: &[u8],
    mss: u32,
    fixed_id: bool,
) -> Result<(), TestCaseError> {
    let mut s = if udp {
        FrameSpec::udp4(src, dst, 0xffff, 0xfffe)
    } else {
        let mut t = TcpSpec::data(0xffff, 0xffff, u32::MAX - 3);
        t.window = 0xffff;
        FrameSpec::tcp4(src, dst, t)
    }
    .payload(payload.to_vec());
    let v4 = s.v4_mut();
    (v4.tos, v4.ttl, v4.id, v4.df, v4.options) = (tos, ttl, id, df, options.to_vec());
    let frame = s.build();
    let params = GsoParams {
        fixed_id,
        ..GsoParams::new(mss)
    };
    let hl = 20 + options.len();
    let l4 = L3 + hl;
    let l4_hl = if udp { 8 } else { 20 };
    let mut got = Vec::new();
    let r = offload::gso::segment(
        LinkKind::Ethernet,
        &frame,
        &params,
        &[],
        &mut |seg: &[u8]| {
            got.push(seg.to_vec());
        },
    );
    prop_assert!(r.is_ok(), "{r:?}");
    prop_assert_eq!(got.len(), payload.len().div_ceil(mss as usize).max(1));
    let mut joined = Vec::new();
    for (i, seg) in got.iter().enumerate() {
        let mut h = seg[L3..l4].to_vec();
        let written = u16::from_be_bytes([h[10], h[11]]);
        h[10..12].fill(0);
        prop_assert_eq!(
            written,
            checksum::checksum(&h),
            "segment {}: IPv4 header",
            i
        );
        let ip = Ipv4::new_checked(&seg[L3..]).expect("IPv4 header");
        let proto = if udp { 17 } else { 6 };
        let pseudo = checksum::pseudo_ipv4(ip.src(), ip.dst(), proto, (seg.len() - l4) as u32);
        prop_assert!(
            checksum::verify(pseudo, &seg[l4..]),
            "segment {}: L4 checksum",
            i
        );
        if udp {
            prop_assert_ne!(u16::from_be_bytes([seg[l4 + 6], seg[l4 + 7]]), 0);
        }
        joined.extend_from_slice(&seg[l4 + l4_hl..]);
    }
    prop_assert!(joined == payload, "payloads do not add up");
    Ok(())
}

/// Headers whose every shared field is all ones (the ones' complement sums
/// of the fixed parts are then as large as they get): checksums still
/// equal the from-scratch ones.
#[test]
fn all_ones_headers_give_from_scratch_checksums() {
    let payload: Vec<u8> = vec![0xff; 10_000];
    for udp in [false, true] {
        for options in [vec![], vec![0xff; 40]] {
            for mss in [1, 7, 1448, 9000] {
                check_ipv4_segments(
                    udp,
                    [0xff; 4],
                    [0xff; 4],
                    (0xff, 0xff, 0xffff, true),
                    &options,
                    &payload,
                    mss,
                    false,
                )
                .unwrap();
            }
        }
    }
}

proptest! {
    /// Each segment's IPv4 header checksum and TCP/UDP checksum (computed
    /// from the sums of the fields all segments share plus what differs)
    /// equal the from-scratch values, for any addresses, TOS, TTL, DF, ID,
    /// IP options and payload.
    #[test]
    fn ipv4_tcp_and_udp_checksums_equal_the_from_scratch_sums(
        udp in any::<bool>(),
        src in any::<[u8; 4]>(),
        dst in any::<[u8; 4]>(),
        fields in (any::<u8>(), any::<u8>(), any::<u16>(), any::<bool>()),
        options in (0usize..=10).prop_flat_map(|w| proptest::collection::vec(any::<u8>(), w * 4)),
        payload in proptest::collection::vec(any::<u8>(), 1..12_000),
        mss in 1u32..3000,
        fixed_id in any::<bool>(),
    ) {
        check_ipv4_segments(udp, src, dst, fields, &options, &payload, mss, fixed_id)?;
    }
}
