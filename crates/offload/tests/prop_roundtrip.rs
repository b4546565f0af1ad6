//! Property tests of the GRO ↔ GSO reversibility rule
//! (`gro-gso-reference.md` §12, `Documentation/networking/segmentation-offloads.rst`).
//!
//! A random TCP train that obeys the rule (equal-size segments with an
//! optional shorter tail, identical headers except length, checksum,
//! sequence and IPv4 ID, the ID either incrementing or fixed, PSH/FIN only
//! on the last segment) is coalesced by [`GroEngine`] and every delivered
//! super-packet is segmented again with the parameters GRO reported:
//!
//! - `gso(gro(train)) == train`, byte for byte, frame for frame;
//! - GRO merged as much as the kernel would (only the size limit cuts a run);
//! - `gro(gso(p)) == p` for every super-packet `p` GRO built.
//!
//! Link layers (Ethernet, 802.1Q with VLAN GRO on, raw IP, Linux SLL),
//! IPv4/IPv6, timestamps, sequence and ID wrap-around and BIG TCP sizes are
//! all drawn at random.

use offload::build::{FrameSpec, L2Spec, TcpSpec};
use offload::gro::gso_type;
use offload::gso::{segment_tcp, GsoParams};
use offload::wire::tcp::flags;
use offload::{Delivered, FlushReason, GroConfig, GroEngine, Input, LinkKind};
use proptest::prelude::*;

/// How the frames of a train are framed at the link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Ethernet,
    /// One 802.1Q tag with this TCI (the engine's VLAN GRO is turned on).
    Vlan(u16),
    /// No link header; the engine is told `RawIp` or the version-specific kind.
    Raw {
        version_specific: bool,
    },
    /// Linux cooked capture v1, packet type HOST.
    Sll,
}

impl Link {
    fn kind(self, v6: bool) -> LinkKind {
        match self {
            Link::Ethernet | Link::Vlan(_) => LinkKind::Ethernet,
            Link::Raw {
                version_specific: false,
            } => LinkKind::RawIp,
            Link::Raw {
                version_specific: true,
            } => {
                if v6 {
                    LinkKind::Ipv6
                } else {
                    LinkKind::Ipv4
                }
            }
            Link::Sll => LinkKind::LinuxSll,
        }
    }
}

/// A TCP train that GRO may coalesce completely (§12).
#[derive(Debug, Clone)]
struct Train {
    link: Link,
    v6: bool,
    timestamps: Option<(u32, u32)>,
    mss: usize,
    /// Full-size segments before the optional tail.
    full: usize,
    /// Payload of a last, shorter segment.
    tail: Option<usize>,
    seq0: u32,
    ack: u32,
    window: u16,
    id0: u16,
    fixed_id: bool,
    df: bool,
    ttl: u8,
    tos: u8,
    /// ECE on every segment (allowed: the flag word stays equal).
    ece: bool,
    /// PSH and/or FIN on the last segment only.
    last_flags: u8,
    /// CWR on the first segment only. Reversible however GRO treats it
    /// (6.18 delivers it alone; older kernels let it head a run and GSO
    /// restores CWR on the first segment only).
    cwr_first: bool,
    sport: u16,
    dport: u16,
    /// Seed of the payload bytes.
    seed: u64,
    /// `gro_max_size` / `gro_ipv4_max_size` (BIG TCP above 65536).
    max_size: u32,
    /// IPv6 only: a Destination Options header (PadN) before TCP. Only
    /// drawn without BIG TCP: see `big_tcp_ipv6_with_dest_opts_round_trip`.
    dest_opts: bool,
}

impl Train {
    fn segments(&self) -> usize {
        self.full + usize::from(self.tail.is_some())
    }

    fn config(&self) -> GroConfig {
        GroConfig::default()
            .gro_max_size(self.max_size)
            .gro_ipv4_max_size(self.max_size)
            // Far longer than the train: only the rules cut runs.
            .flush_timeout_ns(u64::MAX / 4)
            .vlan_gro(matches!(self.link, Link::Vlan(_)))
    }

    fn frame(&self, i: usize) -> Vec<u8> {
        let last = i + 1 == self.segments();
        let len = if i < self.full {
            self.mss
        } else {
            self.tail.expect("index past the full segments")
        };
        let seq = self.seq0.wrapping_add((i * self.mss) as u32);
        let mut tcp = TcpSpec::data(self.sport, self.dport, seq);
        tcp.ack = self.ack;
        tcp.window = self.window;
        if self.ece {
            tcp.flags |= flags::ECE;
        }
        if last {
            tcp.flags |= self.last_flags;
        }
        if i == 0 && self.cwr_first {
            tcp.flags |= flags::CWR;
        }
        if let Some((tsval, tsecr)) = self.timestamps {
            tcp = tcp.with_timestamps(tsval, tsecr);
        }
        let mut spec = if self.v6 {
            let mut s = FrameSpec::tcp6(addr6(1), addr6(2), tcp);
            s.v6_mut().hop_limit = self.ttl;
            s.v6_mut().traffic_class = self.tos;
            if self.dest_opts {
                s.v6_mut().ext.push((60, vec![1, 4, 0, 0, 0, 0]));
            }
            s
        } else {
            let mut s = FrameSpec::tcp4([10, 1, 0, 1], [10, 1, 0, 2], tcp);
            let v4 = s.v4_mut();
            v4.ttl = self.ttl;
            v4.tos = self.tos;
            v4.df = self.df;
            v4.id = if self.fixed_id {
                self.id0
            } else {
                self.id0.wrapping_add(i as u16)
            };
            s
        };
        spec.payload = payload(self.seed, i, len);
        match self.link {
            Link::Ethernet => {}
            Link::Vlan(tci) => {
                if let L2Spec::Ethernet { vlans, .. } = &mut spec.l2 {
                    vlans.push((0x8100, tci));
                }
            }
            Link::Raw { .. } | Link::Sll => spec.l2 = L2Spec::None,
        }
        let ip = spec.build();
        if self.link == Link::Sll {
            let mut f = sll_header(if self.v6 { 0x86dd } else { 0x0800 }).to_vec();
            f.extend_from_slice(&ip);
            f
        } else {
            ip
        }
    }

    fn frames(&self) -> Vec<Vec<u8>> {
        (0..self.segments()).map(|i| self.frame(i)).collect()
    }
}

fn addr6(host: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = host;
    a
}

/// An SLL header as Linux writes it for a received Ethernet frame.
fn sll_header(protocol: u16) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[2..4].copy_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
    h[4..6].copy_from_slice(&6u16.to_be_bytes());
    h[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    h[14..16].copy_from_slice(&protocol.to_be_bytes());
    h
}

/// Deterministic payload bytes (xorshift), different for every segment, so
/// that a misplaced chunk shows up as a byte difference.
fn payload(seed: u64, index: usize, len: usize) -> Vec<u8> {
    let mut x = seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn train_strategy() -> impl Strategy<Value = Train> {
    let link = prop_oneof![
        3 => Just(Link::Ethernet),
        1 => (0u16..=0xffff).prop_map(Link::Vlan),
        1 => any::<bool>().prop_map(|v| Link::Raw { version_specific: v }),
        1 => Just(Link::Sll),
    ];
    let shape = (100usize..=1460, 1usize..=60, any::<bool>()).prop_flat_map(|(mss, full, t)| {
        let tail = if t {
            (1..mss).prop_map(Some).boxed()
        } else {
            Just(None).boxed()
        };
        (Just(mss), Just(full), tail)
    });
    let ip = (
        any::<bool>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        1u8..=255,
        any::<u8>(),
    );
    let tcp = (
        proptest::option::of(any::<(u32, u32)>()),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        (any::<bool>(), any::<bool>()),
        prop_oneof![
            Just(0),
            Just(flags::PSH),
            Just(flags::FIN),
            Just(flags::PSH | flags::FIN)
        ],
        any::<(u16, u16)>(),
    );
    let size = prop_oneof![
        4 => Just(65536u32),
        1 => Just(100_000u32),
        1 => Just(185_000u32),
    ];
    (link, shape, ip, tcp, (any::<u64>(), any::<bool>()), size).prop_map(
        |(
            link,
            (mss, full, tail),
            (v6, id0, fixed_id, df, ttl, tos),
            (timestamps, seq0, ack, window, (ece, cwr_first), last_flags, (sport, dport)),
            (seed, dest_opts),
            max_size,
        )| Train {
            link,
            v6,
            timestamps,
            mss,
            full,
            tail,
            seq0,
            ack,
            window,
            id0,
            fixed_id,
            df,
            ttl,
            tos,
            ece,
            last_flags,
            cwr_first,
            sport,
            dport,
            seed,
            max_size,
            dest_opts: dest_opts && max_size <= 65536,
        },
    )
}

/// One delivery, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    data: Vec<u8>,
    segments: u32,
    gso_size: u32,
    gso_type: u32,
    reason: FlushReason,
}

/// GRO of a train, delivered zero-copy (the default) and made contiguous
/// from the train; the contiguous-copy delivery must give the same bytes.
fn gro(cfg: GroConfig, link: LinkKind, frames: &[Vec<u8>]) -> Vec<Out> {
    let zero_copy = gro_delivering(cfg.clone(), link, frames, true);
    let copied = gro_delivering(cfg, link, frames, false);
    assert_eq!(zero_copy, copied, "zero-copy and copying deliveries differ");
    zero_copy
}

fn gro_delivering(cfg: GroConfig, link: LinkKind, frames: &[Vec<u8>], zero_copy: bool) -> Vec<Out> {
    let mut engine = GroEngine::new(cfg);
    engine.set_zero_copy(zero_copy);
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        outs.push(Out {
            data: d.to_vec(|n| &frames[n as usize - 1]),
            segments: d.segments,
            gso_size: d.gso_size,
            gso_type: d.gso_type,
            reason: d.reason,
        })
    };
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link,
            timestamp_ns: 1_000 * i as u64,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        };
        engine.receive(input, &mut push);
    }
    engine.finish(&mut push);
    assert_eq!(engine.held_count(), 0, "finish left packets held");
    outs
}

/// Segments one delivery the way a transmit path would (single-segment
/// deliveries go out as they are).
fn gso(link: LinkKind, o: &Out) -> Result<Vec<Vec<u8>>, String> {
    if o.segments <= 1 {
        return Ok(vec![o.data.clone()]);
    }
    let mut segs = Vec::new();
    let n = segment_tcp(
        link,
        &o.data,
        &GsoParams::from_gso(o.gso_size, o.gso_type),
        &mut |s: &[u8]| segs.push(s.to_vec()),
    )
    .map_err(|e| format!("segment_tcp failed on a GRO super-packet: {e}"))?;
    if n != segs.len() {
        return Err(format!(
            "segment_tcp returned {n} but emitted {}",
            segs.len()
        ));
    }
    Ok(segs)
}

/// Describes the first difference between two frame lists.
fn first_difference(got: &[Vec<u8>], want: &[Vec<u8>]) -> Option<String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            let at = g.iter().zip(w).position(|(a, b)| a != b);
            return Some(format!(
                "frame {i}: lengths {} vs {}, first differing byte {:?}",
                g.len(),
                w.len(),
                at.map(|a| (a, g[a], w[a]))
            ));
        }
    }
    (got.len() != want.len()).then(|| format!("{} frames out, {} in", got.len(), want.len()))
}

proptest! {
    /// gso(gro(train)) == train, and GRO merged everything it could.
    #[test]
    fn gso_of_gro_is_the_train(t in train_strategy()) {
        let link = t.link.kind(t.v6);
        let frames = t.frames();
        let outs = gro(t.config(), link, &frames);

        let merged: u32 = outs.iter().map(|o| o.segments).sum();
        prop_assert_eq!(merged as usize, frames.len(), "segments delivered != frames in");
        // A CWR segment never merges on 6.18 (`flags & CWR` flushes it as
        // the incoming segment, and the AccECN flag-word mask no longer
        // ignores CWR when it heads the run): it goes up alone.
        let skip = usize::from(t.cwr_first && frames.len() > 1);
        if skip == 1 {
            prop_assert_eq!(outs[0].segments, 1, "a CWR segment merged");
        }
        // Otherwise only the size limit may cut a conforming train.
        for o in &outs[skip..outs.len() - 1] {
            prop_assert_eq!(o.reason, FlushReason::SizeLimit, "run cut early: {:?}", outs.iter().map(|o| (o.segments, o.reason)).collect::<Vec<_>>());
        }
        for o in &outs {
            if o.segments > 1 {
                prop_assert_eq!(o.gso_size as usize, t.mss);
                let family = if t.v6 { gso_type::TCPV6 } else { gso_type::TCPV4 };
                prop_assert!(o.gso_type & family != 0, "gso_type {:#x}", o.gso_type);
                let fixed = o.gso_type & gso_type::TCP_FIXEDID != 0;
                prop_assert_eq!(fixed, !t.v6 && t.fixed_id, "FIXEDID bit");
            }
        }

        let mut back = Vec::new();
        for o in &outs {
            back.extend(gso(link, o).map_err(TestCaseError::fail)?);
        }
        if let Some(diff) = first_difference(&back, &frames) {
            return Err(TestCaseError::fail(format!("gso(gro(train)) differs: {diff}")));
        }
    }

    /// gro(gso(p)) == p for every super-packet GRO builds.
    #[test]
    fn gro_of_gso_is_the_super_packet(t in train_strategy()) {
        let link = t.link.kind(t.v6);
        let outs = gro(t.config(), link, &t.frames());
        for p in outs.iter().filter(|o| o.segments > 1) {
            let segs = gso(link, p).map_err(TestCaseError::fail)?;
            prop_assert_eq!(segs.len() as u32, p.segments);
            let again = gro(t.config(), link, &segs);
            prop_assert_eq!(again.len(), 1, "re-coalesced into {} packets", again.len());
            let q = &again[0];
            prop_assert_eq!(
                (q.segments, q.gso_size, q.gso_type),
                (p.segments, p.gso_size, p.gso_type)
            );
            if q.data != p.data {
                let at = q.data.iter().zip(&p.data).position(|(a, b)| a != b);
                return Err(TestCaseError::fail(format!(
                    "gro(gso(p)) differs: lengths {} vs {}, first differing byte {:?}",
                    q.data.len(), p.data.len(), at
                )));
            }
        }
    }
}

/// Reversibility gap found by `gso_of_gro_is_the_train` (kept out of the
/// property by drawing Destination Options only without BIG TCP).
///
/// GRO builds an IPv6 super-packet above 64 KiB and inserts the Hop-by-Hop
/// Jumbo header in front of the Destination Options header
/// (`ipv6_gro_complete` does the same). GSO removes a Jumbo HBH only when
/// TCP follows it directly (`ipv6_has_hopopt_jumbo` checks
/// `jhdr->nexthdr == IPPROTO_TCP`), so every segment keeps an 8-byte HBH
/// whose Jumbo length is stale while its payload length is non-zero
/// (RFC 2675 says such a packet is dropped). By our reading of 6.18 the
/// kernel behaves exactly like the engine, so this may be a kernel gap
/// rather than an engine bug; a live-kernel check (offload-conformance)
/// should confirm it before anything changes. Until then this test pins the
/// behaviour as read from the kernel: each segment is its wire frame with
/// the 8-byte Hop-by-Hop header still in front of the Destination Options
/// (IPv6 next header 0, payload length 8 more), and nothing else differs.
#[test]
fn big_tcp_ipv6_with_dest_opts_keeps_the_jumbo_hop_by_hop() {
    let t = Train {
        link: Link::Ethernet,
        v6: true,
        timestamps: None,
        mss: 1400,
        full: 60,
        tail: None,
        seq0: 1,
        ack: 1,
        window: 512,
        id0: 0,
        fixed_id: false,
        df: true,
        ttl: 64,
        tos: 0,
        ece: false,
        last_flags: 0,
        cwr_first: false,
        sport: 40000,
        dport: 5201,
        seed: 7,
        max_size: 185_000,
        dest_opts: true,
    };
    let frames = t.frames();
    let outs = gro(t.config(), LinkKind::Ethernet, &frames);
    assert_eq!(outs.len(), 1, "one BIG TCP super-packet");
    let back = gso(LinkKind::Ethernet, &outs[0]).expect("segments");
    assert_eq!(back.len(), frames.len(), "one segment per wire frame");
    // Ethernet 14 + IPv6 40: the HBH sits at 54..62.
    const NEXT_HEADER: usize = 14 + 6;
    const PAYLOAD_LEN: usize = 14 + 4;
    const HBH: std::ops::Range<usize> = 54..62;
    for (i, (seg, wire)) in back.iter().zip(&frames).enumerate() {
        assert_eq!(seg.len(), wire.len() + 8, "segment {i}: 8 bytes of HBH");
        assert_eq!(seg[NEXT_HEADER], 0, "segment {i}: IPv6 next header is HBH");
        assert_eq!(
            seg[HBH.start], wire[NEXT_HEADER],
            "segment {i}: HBH next header"
        );
        let seg_plen = u16::from_be_bytes([seg[PAYLOAD_LEN], seg[PAYLOAD_LEN + 1]]);
        let wire_plen = u16::from_be_bytes([wire[PAYLOAD_LEN], wire[PAYLOAD_LEN + 1]]);
        assert_eq!(seg_plen, wire_plen + 8, "segment {i}: payload length");
        let mut without: Vec<u8> = [&seg[..HBH.start], &seg[HBH.end..]].concat();
        without[NEXT_HEADER] = wire[NEXT_HEADER];
        without[PAYLOAD_LEN..PAYLOAD_LEN + 2].copy_from_slice(&wire[PAYLOAD_LEN..PAYLOAD_LEN + 2]);
        assert_eq!(&without, wire, "segment {i}: the rest is the wire frame");
    }
}

proptest! {
    /// Flows are independent while they fit in the GRO table (8 held
    /// packets): interleaving up to 8 conforming trains in any order gives,
    /// per flow, exactly the super-packets the flow gives alone.
    #[test]
    fn interleaved_flows_coalesce_independently(
        trains in proptest::collection::vec(train_strategy(), 2..=8),
        order_seed in any::<u64>(),
    ) {
        // One configuration for the shared engine: the first train's size
        // limit, VLAN GRO on (it changes nothing for untagged flows).
        let max_size = trains[0].max_size;
        let trains: Vec<Train> = trains
            .into_iter()
            .enumerate()
            .map(|(k, mut t)| {
                t.sport = 1000 + k as u16;
                t.max_size = max_size;
                t
            })
            .collect();
        let mut cfg = trains[0].config();
        cfg.vlan_gro = true;
        let alone: Vec<Vec<Out>> = trains
            .iter()
            .map(|t| gro(cfg.clone(), t.link.kind(t.v6), &t.frames()))
            .collect();

        // A random interleaving that keeps each flow's order.
        let mut pending: Vec<std::collections::VecDeque<Vec<u8>>> =
            trains.iter().map(|t| t.frames().into()).collect();
        let mut x = order_seed | 1;
        let mut mixed: Vec<(usize, Vec<u8>)> = Vec::new();
        while pending.iter().any(|p| !p.is_empty()) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let live: Vec<usize> = (0..pending.len()).filter(|&k| !pending[k].is_empty()).collect();
            let k = live[(x % live.len() as u64) as usize];
            let f = pending[k].pop_front().expect("non-empty");
            mixed.push((k, f));
        }

        // Feed the mixture; attribute each delivery to its flow by frame number.
        let mut engine = GroEngine::new(cfg);
        let mut got: Vec<Vec<Out>> = vec![Vec::new(); trains.len()];
        let flow_of: Vec<usize> = mixed.iter().map(|(k, _)| *k).collect();
        let mut push = |d: &Delivered<'_>| {
            got[flow_of[d.first_frame as usize - 1]].push(Out {
                data: d.to_vec(|n| &mixed[n as usize - 1].1),
                segments: d.segments,
                gso_size: d.gso_size,
                gso_type: d.gso_type,
                reason: d.reason,
            })
        };
        for (i, (k, f)) in mixed.iter().enumerate() {
            let t = &trains[*k];
            engine.receive(
                Input {
                    data: f,
                    link: t.link.kind(t.v6),
                    timestamp_ns: 1_000 * i as u64,
                    frame: i as u64 + 1,
                    orig_len: f.len() as u32,
                },
                &mut push,
            );
        }
        engine.finish(&mut push);

        for (k, (g, a)) in got.iter().zip(&alone).enumerate() {
            let shape = |o: &[Out]| o.iter().map(|o| (o.segments, o.data.len())).collect::<Vec<_>>();
            prop_assert_eq!(shape(g), shape(a), "flow {}: shapes differ", k);
            for (j, (x, y)) in g.iter().zip(a).enumerate() {
                prop_assert!(x.data == y.data, "flow {} packet {}: bytes differ", k, j);
                prop_assert_eq!((x.gso_size, x.gso_type), (y.gso_size, y.gso_type));
            }
        }
    }
}
