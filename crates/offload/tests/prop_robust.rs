//! Property tests: nothing in the engine panics on hostile input.
//!
//! Captures are untrusted: a frame may be any bytes, cut anywhere, with
//! length fields that lie. These tests feed the GRO engine (every
//! [`LinkKind`], several configurations), `gso::segment_tcp`,
//! [`link::dissect_l2`] and every wire view with arbitrary bytes and with
//! valid frames that were then damaged, and check the invariants that must
//! survive any input: each frame is delivered exactly once (alone or inside
//! a super-packet), nothing stays held after `finish`, the statistics agree
//! with the deliveries, and segmentation reports what it emitted.

use offload::build::{vxlan_payload, FrameSpec, L2Spec, TcpSpec};
use offload::gro::UdpGro;
use offload::gso::{layout, segment, segment_tcp, tcp_layout, GsoParams};
use offload::link::{self, LinkKind};
use offload::wire::{ethernet, ipv4, ipv6, sll, tcp, udp};
use offload::{Delivered, GroConfig, GroEngine, Input};
use proptest::prelude::*;

const LINKS: [LinkKind; 6] = [
    LinkKind::Ethernet,
    LinkKind::RawIp,
    LinkKind::Ipv4,
    LinkKind::Ipv6,
    LinkKind::LinuxSll,
    LinkKind::LinuxSll2,
];

fn link_strategy() -> impl Strategy<Value = LinkKind> {
    proptest::sample::select(LINKS.to_vec())
}

fn config_strategy() -> impl Strategy<Value = GroConfig> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0u64), Just(50_000u64), Just(u64::MAX / 4)],
        prop_oneof![
            Just(65_536u32),
            Just(185_000u32),
            Just(offload::gro::GRO_MAX_SIZE)
        ],
        prop_oneof![
            Just(UdpGro::Off),
            Just(UdpGro::AllPorts),
            Just(UdpGro::Ports(vec![443, 4789]))
        ],
    )
        .prop_map(|(verify, vlan, timeout, size, udp)| {
            GroConfig::default()
                .gro_max_size(size)
                .gro_ipv4_max_size(size)
                .flush_timeout_ns(timeout)
                .verify_checksums(verify)
                .udp(udp)
                .vlan_gro(vlan)
        })
}

/// One frame for the engine: bytes, link, and how much the capture cut.
#[derive(Debug, Clone)]
struct Frame {
    data: Vec<u8>,
    link: LinkKind,
    cut: u16,
    gap_ns: u32,
}

/// Runs `frames` through a fresh engine, with zero-copy delivery (the
/// default) and with contiguous copies, and checks the invariants that hold
/// for any input. Also segments every delivery, which must not panic either.
fn run_engine(cfg: GroConfig, frames: &[Frame]) -> Result<(), TestCaseError> {
    run_engine_delivering(cfg.clone(), frames, true)?;
    run_engine_delivering(cfg, frames, false)
}

fn run_engine_delivering(
    cfg: GroConfig,
    frames: &[Frame],
    zero_copy: bool,
) -> Result<(), TestCaseError> {
    let mut engine = GroEngine::new(cfg);
    engine.set_zero_copy(zero_copy);
    let mut segments = 0u64;
    let mut deliveries = 0u64;
    let mut bad: Option<String> = None;
    let mut ts = 0u64;
    {
        let mut out = |d: &Delivered<'_>| {
            deliveries += 1;
            segments += u64::from(d.segments);
            if d.segments == 0 || (d.segments == 1) != (d.gso_size == 0) {
                bad.get_or_insert(format!(
                    "delivery with {} segments and gso_size {}",
                    d.segments, d.gso_size
                ));
            }
            if d.first_frame > d.last_frame {
                bad.get_or_insert(format!(
                    "first frame {} after last frame {}",
                    d.first_frame, d.last_frame
                ));
            }
            if d.segments > 1 {
                // Whatever GRO built, GSO splits back into as many
                // segments: every merged segment but the last carried
                // exactly `gso_size` bytes (a shorter one ends the run).
                let p = GsoParams::from_gso(d.gso_size, d.gso_type);
                let packet = d.to_vec(|n| &frames[n as usize - 1].data);
                match segment(d.link, &packet, &p, &[4789], &mut |_s: &[u8]| {}) {
                    Ok(n) if n == d.segments as usize => {}
                    r => {
                        bad.get_or_insert(format!(
                            "GRO built {} segments (gso_size {}, type {:#x}, {} bytes), GSO gave {r:?}",
                            d.segments,
                            d.gso_size,
                            d.gso_type,
                            packet.len()
                        ));
                    }
                }
            }
        };
        for (i, f) in frames.iter().enumerate() {
            ts += u64::from(f.gap_ns);
            let input = Input {
                data: &f.data,
                link: f.link,
                timestamp_ns: ts,
                frame: i as u64 + 1,
                orig_len: f.data.len() as u32 + u32::from(f.cut),
            };
            engine.receive(input, &mut out);
        }
        engine.finish(&mut out);
    }
    if let Some(b) = bad {
        return Err(TestCaseError::fail(b));
    }
    prop_assert_eq!(segments, frames.len() as u64, "frames in != segments out");
    prop_assert_eq!(engine.held_count(), 0);
    let stats = engine.stats();
    prop_assert_eq!(stats.frames_in, frames.len() as u64);
    prop_assert_eq!(stats.packets_out, deliveries);
    prop_assert_eq!(stats.reasons.iter().sum::<u64>(), deliveries);
    Ok(())
}

// ---- valid frames to damage ----

/// A valid frame of one of the kinds the engine coalesces, with the offsets
/// of its length-bearing fields.
#[derive(Debug, Clone)]
struct Valid {
    data: Vec<u8>,
    /// Offsets of 16-bit length fields (IPv4 total length, IPv6 payload
    /// length, UDP length, for outer and inner headers).
    len_fields: Vec<usize>,
    /// Offsets of header-length nibbles/bytes (IPv4 IHL, TCP data offset).
    hdr_len_bytes: Vec<usize>,
}

fn valid_strategy() -> impl Strategy<Value = Valid> {
    (
        0u8..7,
        0usize..1500,
        any::<u32>(),
        any::<u16>(),
        any::<bool>(),
    )
        .prop_map(|(kind, len, seq, id, ts)| valid_frame(kind, len, seq, id, ts, 0))
}

/// Segment `i` of a flow of kind `kind` (0/1: TCP/IPv4 plain/VLAN, 2:
/// TCP/IPv6, 3/4: UDP/IPv4/IPv6, 5/6: VXLAN with inner TCP/IPv4/IPv6):
/// consecutive sequence numbers and IPv4 IDs, so that GRO merges the
/// undamaged ones.
fn valid_frame(kind: u8, len: usize, seq0: u32, id0: u16, ts: bool, i: usize) -> Valid {
    let seq = seq0.wrapping_add((i * len) as u32);
    let id = id0.wrapping_add(i as u16);
    let tcp = || {
        let t = TcpSpec::data(40000, 443, seq);
        if ts {
            t.with_timestamps(seq0 ^ 7, 9)
        } else {
            t
        }
    };
    let pl = vec![i as u8; len];
    match kind {
        0 | 1 => {
            // TCP/IPv4, optionally VLAN-tagged.
            let mut s = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp()).payload(pl);
            s.v4_mut().id = id;
            let mut l3 = 14;
            if kind == 1 {
                if let L2Spec::Ethernet { vlans, .. } = &mut s.l2 {
                    vlans.push((0x8100, 5));
                }
                l3 += 4;
            }
            Valid {
                data: s.build(),
                len_fields: vec![l3 + 2],
                hdr_len_bytes: vec![l3, l3 + 20 + 12],
            }
        }
        2 => {
            let s = FrameSpec::tcp6([1; 16], [2; 16], tcp()).payload(pl);
            Valid {
                data: s.build(),
                len_fields: vec![14 + 4],
                hdr_len_bytes: vec![14 + 6, 14 + 40 + 12],
            }
        }
        3 => {
            let mut s = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 5000, 443).payload(pl);
            s.v4_mut().id = id;
            Valid {
                data: s.build(),
                len_fields: vec![14 + 2, 34 + 4],
                hdr_len_bytes: vec![14],
            }
        }
        4 => {
            let s = FrameSpec::udp6([1; 16], [2; 16], 5000, 443).payload(pl);
            Valid {
                data: s.build(),
                len_fields: vec![14 + 4, 54 + 4],
                hdr_len_bytes: vec![14 + 6],
            }
        }
        _ => {
            // VXLAN over IPv4 with an inner TCP/IPv4 or TCP/IPv6 frame.
            let inner = if kind == 5 {
                let mut s = FrameSpec::tcp4([192, 168, 0, 1], [192, 168, 0, 2], tcp()).payload(pl);
                s.v4_mut().id = id.wrapping_add(3);
                s.build()
            } else {
                FrameSpec::tcp6([3; 16], [4; 16], tcp()).payload(pl).build()
            };
            let mut outer = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 50000, 4789)
                .payload(vxlan_payload(42, &inner));
            outer.v4_mut().id = id;
            outer.udp_mut().zero_checksum = true;
            // Outer IPv4 at 14, UDP at 34, VXLAN at 42, inner Ethernet at 50, inner IP at 64.
            let inner_len = if kind == 5 { 64 + 2 } else { 64 + 4 };
            Valid {
                data: outer.build(),
                len_fields: vec![14 + 2, 34 + 4, inner_len],
                hdr_len_bytes: vec![14, 64],
            }
        }
    }
}

/// A way to damage a valid frame.
#[derive(Debug, Clone)]
enum Mutation {
    /// XOR one byte (position taken modulo the length).
    Flip(usize, u8),
    /// Keep only this many bytes (modulo length + 1).
    Truncate(usize),
    /// Write a lie into one of the length fields.
    LenLie(usize, u16),
    /// Overwrite a header-length byte (IHL, data offset, next header).
    HdrLenLie(usize, u8),
    /// Append bytes (Ethernet padding, or garbage).
    Extend(Vec<u8>),
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 1u8..=255).prop_map(|(p, x)| Mutation::Flip(p, x)),
        2 => any::<usize>().prop_map(Mutation::Truncate),
        3 => (any::<usize>(), prop_oneof![Just(0u16), Just(1), Just(0xffff), any::<u16>()])
            .prop_map(|(i, v)| Mutation::LenLie(i, v)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::HdrLenLie(i, v)),
        1 => proptest::collection::vec(any::<u8>(), 1..40).prop_map(Mutation::Extend),
    ]
}

fn apply(v: &Valid, muts: &[Mutation]) -> Vec<u8> {
    let mut d = v.data.clone();
    for m in muts {
        match m {
            Mutation::Flip(p, x) if !d.is_empty() => {
                let at = p % d.len();
                d[at] ^= x;
            }
            Mutation::Flip(..) => {}
            Mutation::Truncate(n) => d.truncate(n % (d.len() + 1)),
            Mutation::LenLie(i, val) => {
                let at = v.len_fields[i % v.len_fields.len()];
                if at + 2 <= d.len() {
                    d[at..at + 2].copy_from_slice(&val.to_be_bytes());
                }
            }
            Mutation::HdrLenLie(i, val) => {
                let at = v.hdr_len_bytes[i % v.hdr_len_bytes.len()];
                if at < d.len() {
                    d[at] = *val;
                }
            }
            Mutation::Extend(b) => d.extend_from_slice(b),
        }
    }
    d
}

/// A train of one flow (so that GRO merges), some frames damaged, with
/// occasionally a frame of another kind mixed in.
fn damaged_train() -> impl Strategy<Value = Vec<Frame>> {
    (
        0u8..7,
        1usize..1500,
        any::<u32>(),
        any::<u16>(),
        any::<bool>(),
        proptest::collection::vec(
            (
                proptest::option::weighted(
                    0.3,
                    proptest::collection::vec(mutation_strategy(), 1..3),
                ),
                proptest::option::weighted(0.1, valid_strategy()),
                0u16..3,
                prop_oneof![8 => Just(0u32), 1 => Just(1_000u32), 1 => Just(1_000_000u32)],
            ),
            1..24,
        ),
    )
        .prop_map(|(kind, len, seq, id, ts, items)| {
            items
                .into_iter()
                .enumerate()
                .map(|(i, (muts, other, cut, gap_ns))| {
                    let v = other.unwrap_or_else(|| valid_frame(kind, len, seq, id, ts, i));
                    Frame {
                        data: apply(&v, muts.as_deref().unwrap_or(&[])),
                        link: LinkKind::Ethernet,
                        cut: if cut == 2 { 100 } else { 0 },
                        gap_ns,
                    }
                })
                .collect()
        })
}

fn arbitrary_frames() -> impl Strategy<Value = Vec<Frame>> {
    proptest::collection::vec(
        (
            proptest::collection::vec(any::<u8>(), 0..200),
            link_strategy(),
            any::<u16>(),
            any::<u32>(),
        )
            .prop_map(|(data, link, cut, gap_ns)| Frame {
                data,
                link,
                cut: cut % 4,
                gap_ns: gap_ns % 100_000,
            }),
        1..16,
    )
}

/// Arbitrary bytes after a plausible link + IP prefix, so that the random
/// part lands in the deeper layers instead of failing the first check.
fn prefixed_frames() -> impl Strategy<Value = Vec<Frame>> {
    let prefix = prop_oneof![
        Just((LinkKind::Ethernet, vec![0u8; 12], vec![0x08, 0x00, 0x45])),
        Just((LinkKind::Ethernet, vec![0u8; 12], vec![0x86, 0xdd, 0x60])),
        Just((LinkKind::Ethernet, vec![0u8; 12], vec![0x81, 0x00])),
        Just((LinkKind::RawIp, vec![], vec![0x45])),
        Just((LinkKind::Ipv6, vec![], vec![0x60])),
        Just((LinkKind::LinuxSll, vec![0u8; 14], vec![0x08, 0x00, 0x45])),
        Just((LinkKind::LinuxSll2, vec![], vec![0x86, 0xdd])),
    ];
    proptest::collection::vec(
        (prefix, proptest::collection::vec(any::<u8>(), 0..160)).prop_map(
            |((link, a, b), rest)| {
                let mut data = a;
                data.extend_from_slice(&b);
                data.extend_from_slice(&rest);
                Frame {
                    data,
                    link,
                    cut: 0,
                    gap_ns: 10,
                }
            },
        ),
        1..16,
    )
}

/// Calls every accessor of every view that accepts `b`.
fn touch_views(b: &[u8]) {
    if let Ok(e) = ethernet::Ethernet::new_checked(b) {
        let _ = (e.dst(), e.src(), e.ethertype());
        let _ = e.walk_tags();
    }
    if let Ok(ip) = ipv4::Ipv4::new_checked(b) {
        let _ = (
            ip.header_len(),
            ip.tos(),
            ip.total_len(),
            ip.ident(),
            ip.frag_word(),
            ip.dont_fragment(),
            ip.is_fragment(),
            ip.ttl(),
            ip.protocol(),
            ip.header_checksum(),
            ip.src(),
            ip.dst(),
            ip.header_checksum_ok(),
            ip.effective_len(b.len()),
        );
        let mut copy = b.to_vec();
        let mut w = ipv4::Ipv4::new_checked(&mut copy[..]).expect("same bytes");
        w.set_total_len_incremental(0xffff);
        w.set_ident(1);
        w.set_ttl(0);
        w.fill_header_checksum();
        assert!(
            w.header_checksum_ok(),
            "fill_header_checksum left a bad checksum"
        );
    }
    if let Ok(ip) = ipv6::Ipv6::new_checked(b) {
        let _ = (
            ip.first_word(),
            ip.traffic_class(),
            ip.flow_label(),
            ip.payload_len(),
            ip.next_header(),
            ip.hop_limit(),
            ip.src(),
            ip.dst(),
        );
        if let Ok(chain) = ip.walk_ext() {
            assert!(
                chain.upper_offset <= b.len(),
                "extension chain past the end"
            );
        }
    }
    if let Ok(t) = tcp::Tcp::new_checked(b) {
        let _ = (
            t.src_port(),
            t.dst_port(),
            t.port_word(),
            t.seq(),
            t.ack(),
            t.flags(),
            t.flag_word(),
            t.window(),
            t.checksum(),
            t.urgent(),
            t.options(),
            t.timestamps(),
        );
        assert!(t.header_len() <= b.len());
    }
    if let Ok(u) = udp::Udp::new_checked(b) {
        let _ = (u.src_port(), u.dst_port(), u.length(), u.checksum());
    }
    let _ = sll::parse_sll(b);
    let _ = sll::parse_sll2(b);
    for l in LINKS {
        if let Ok(info) = link::dissect_l2(l, b) {
            assert!(info.l3_offset <= b.len(), "{l:?}: L3 offset past the end");
            assert!(info.key_len <= b.len());
        }
        let _ = tcp_layout(l, b);
        let _ = layout(l, b, &[4789]);
    }
}

proptest! {
    #[test]
    fn engine_survives_arbitrary_bytes(cfg in config_strategy(), frames in arbitrary_frames()) {
        run_engine(cfg, &frames)?;
    }

    #[test]
    fn engine_survives_arbitrary_bytes_behind_valid_prefixes(
        cfg in config_strategy(),
        frames in prefixed_frames(),
    ) {
        run_engine(cfg, &frames)?;
    }

    #[test]
    fn engine_survives_damaged_trains(cfg in config_strategy(), frames in damaged_train()) {
        run_engine(cfg, &frames)?;
    }

    #[test]
    fn wire_views_and_dissect_survive_arbitrary_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        touch_views(&b);
    }

    #[test]
    fn wire_views_survive_damaged_frames(
        v in valid_strategy(),
        muts in proptest::collection::vec(mutation_strategy(), 0..4),
        skip in 0usize..80,
    ) {
        let d = apply(&v, &muts);
        // Every suffix is a header boundary for some view.
        touch_views(&d[skip.min(d.len())..]);
    }

    #[test]
    fn segment_tcp_survives_arbitrary_input(
        frames in prefixed_frames(),
        mss in prop_oneof![Just(0u32), 1u32..64, 64u32..2000, any::<u32>()],
        fixed in any::<bool>(),
        accecn in any::<bool>(),
    ) {
        let mut p = GsoParams::new(mss);
        p.fixed_id = fixed;
        p.fixed_id_inner = !fixed;
        p.accecn = accecn;
        for f in &frames {
            let mut emitted = 0usize;
            let r = segment_tcp(f.link, &f.data, &p, &mut |_s: &[u8]| emitted += 1);
            if let Ok(n) = r {
                prop_assert_eq!(n, emitted);
            }
            let mut emitted = 0usize;
            let r = segment(f.link, &f.data, &p, &[4789], &mut |_s: &[u8]| emitted += 1);
            if let Ok(n) = r {
                prop_assert_eq!(n, emitted);
            }
        }
    }

    #[test]
    fn segment_tcp_survives_damaged_frames(
        v in valid_strategy(),
        muts in proptest::collection::vec(mutation_strategy(), 0..4),
        mss in prop_oneof![Just(0u32), 1u32..64, 64u32..2000, any::<u32>()],
        fixed in any::<bool>(),
    ) {
        let d = apply(&v, &muts);
        let mut p = GsoParams::new(mss);
        p.fixed_id = fixed;
        p.fixed_id_inner = fixed;
        let mut emitted = 0usize;
        if let Ok(n) = segment_tcp(LinkKind::Ethernet, &d, &p, &mut |_s: &[u8]| emitted += 1) {
            prop_assert_eq!(n, emitted);
        }
        // The general entry point, which also takes UDP and VXLAN.
        let mut emitted = 0usize;
        if let Ok(n) = segment(LinkKind::Ethernet, &d, &p, &[4789], &mut |_s: &[u8]| emitted += 1) {
            prop_assert_eq!(n, emitted);
        }
    }
}
