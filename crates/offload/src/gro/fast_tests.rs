//! The fast paths (`fast.rs`: the merge of the next segment, the hold of
//! a new flow's first) give exactly the full path's answers: both
//! run over the same perturbed trains, for every kernel line, checksum
//! mode, zero-copy setting and link, and every delivery (bytes, frags,
//! segments, GSO fields, reason, frame numbers) and every counter must be
//! equal.

use super::*;
use crate::build::{FrameSpec, TcpSpec};
use crate::wire::tcp::flags as tf;
use proptest::prelude::*;

/// One delivery, owned.
#[derive(Debug, PartialEq, Eq)]
struct Out {
    data: Vec<u8>,
    frags: Vec<Frag>,
    link: LinkKind,
    timestamp_ns: u64,
    segments: u32,
    gso_size: u32,
    gso_type: u32,
    reason: FlushReason,
    first_frame: u64,
    last_frame: u64,
    proto: Proto,
}

/// A change to one segment of a flow (each keeps checksums valid unless
/// it says otherwise).
#[derive(Debug, Clone)]
enum Mutation {
    None,
    Ttl(u8),
    Tos(u8),
    IdOffset(u16),
    FixedId,
    NoDf,
    Flags(u8),
    Window(u16),
    Ack(u32),
    SeqOffset(u32),
    TsVal(u32),
    Short(usize),
    Empty,
    Padding(usize),
    BadTcpChecksum,
    BadIpChecksum,
    TotalLen(u16),
    Truncated,
    FlowLabel(u32),
    /// XOR one byte of the frame (checksums left as they are).
    FlipByte(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        30 => Just(Mutation::None),
        1 => any::<u8>().prop_map(Mutation::Ttl),
        1 => any::<u8>().prop_map(Mutation::Tos),
        2 => prop_oneof![Just(0u16), Just(2), Just(0xffff), any::<u16>()].prop_map(Mutation::IdOffset),
        1 => Just(Mutation::FixedId),
        1 => Just(Mutation::NoDf),
        2 => prop_oneof![
            Just(tf::ACK | tf::PSH),
            Just(tf::ACK | tf::FIN),
            Just(tf::ACK | tf::CWR),
            Just(tf::ACK | tf::ECE),
            Just(tf::ACK | tf::URG),
            Just(tf::SYN),
            Just(tf::RST),
            Just(0u8),
        ]
        .prop_map(Mutation::Flags),
        1 => any::<u16>().prop_map(Mutation::Window),
        1 => any::<u32>().prop_map(Mutation::Ack),
        1 => prop_oneof![Just(1u32), Just(0u32.wrapping_sub(1400)), any::<u32>()].prop_map(Mutation::SeqOffset),
        1 => any::<u32>().prop_map(Mutation::TsVal),
        2 => (1usize..1400).prop_map(Mutation::Short),
        1 => Just(Mutation::Empty),
        1 => (1usize..8).prop_map(Mutation::Padding),
        1 => Just(Mutation::BadTcpChecksum),
        1 => Just(Mutation::BadIpChecksum),
        1 => any::<u16>().prop_map(Mutation::TotalLen),
        1 => Just(Mutation::Truncated),
        1 => (0u32..0x10_0000).prop_map(Mutation::FlowLabel),
        2 => (0usize..120, 1u8..=255).prop_map(|(at, x)| Mutation::FlipByte(at, x)),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    line: KernelLine,
    v6: bool,
    raw_ip: bool,
    flows: usize,
    fixed_id: bool,
    timestamps: bool,
    verify: bool,
    valid: bool,
    zero_copy: bool,
    max_size: u32,
    timeout0: bool,
    mss: usize,
    muts: Vec<(usize, Mutation)>,
}

impl Case {
    /// A clean train of `frames` frames (no mutation) on the default
    /// kernel line, timestamps on, checksums verified, MSS 1400.
    fn clean(v6: bool, flows: usize, zero_copy: bool, frames: usize) -> Case {
        Case {
            line: KernelLine::default(),
            v6,
            raw_ip: false,
            flows,
            fixed_id: false,
            timestamps: true,
            verify: true,
            valid: false,
            zero_copy,
            max_size: GRO_LEGACY_MAX_SIZE,
            timeout0: false,
            mss: 1400,
            muts: (0..frames).map(|i| (i, Mutation::None)).collect(),
        }
    }
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            prop::sample::select(KernelLine::ALL.to_vec()),
            any::<bool>(),
            prop::bool::weighted(0.2),
            // Up to 3 flows, or more flows than the table holds (every
            // new flow evicts the oldest: the "new flow" fast hold).
            prop_oneof![3 => 1usize..4, 1 => 9usize..13],
            prop::bool::weighted(0.3),
            any::<bool>(),
        ),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            prop_oneof![Just(GRO_LEGACY_MAX_SIZE), Just(6000u32), Just(GRO_MAX_SIZE)],
            prop::bool::weighted(0.1),
            prop_oneof![Just(1400usize), 1usize..1500],
        ),
        prop::collection::vec((0usize..16, mutation()), 10..80),
    )
        .prop_map(
            |(
                (line, v6, raw_ip, flows, fixed_id, timestamps),
                (verify, valid, zero_copy, max_size, timeout0, mss),
                muts,
            )| Case {
                line,
                v6,
                raw_ip,
                flows,
                fixed_id,
                timestamps,
                verify,
                valid,
                zero_copy,
                max_size,
                timeout0,
                mss,
                muts,
            },
        )
}

/// Builds the train: each entry is the next segment of flow `n % flows`,
/// changed by its mutation. Returns (frame bytes, orig_len).
fn train(c: &Case) -> Vec<(Vec<u8>, u32)> {
    let mut seq = vec![1000u32; c.flows];
    let mut id = vec![7u16; c.flows];
    let mut frames = Vec::new();
    for (n, (pick, m)) in c.muts.iter().enumerate() {
        let flow = pick % c.flows;
        let mut len = c.mss;
        match m {
            Mutation::Short(l) => len = (*l).min(c.mss),
            Mutation::Empty => len = 0,
            _ => {}
        }
        let mut tcp = TcpSpec::data(40000 + flow as u16, 5201, seq[flow]);
        if c.timestamps {
            tcp = tcp.with_timestamps(500, 900);
        }
        let payload = vec![(n * 7) as u8; len];
        let mut s = if c.v6 {
            let mut a = [0u8; 16];
            a[0] = 0xfd;
            a[15] = 1 + flow as u8;
            let mut b = a;
            b[15] = 200;
            FrameSpec::tcp6(a, b, tcp)
        } else {
            let mut s = FrameSpec::tcp4([10, 0, 0, 1 + flow as u8], [10, 0, 0, 200], tcp);
            s.v4_mut().id = if c.fixed_id { 0 } else { id[flow] };
            s
        }
        .payload(payload);
        seq[flow] = seq[flow].wrapping_add(len as u32);
        id[flow] = id[flow].wrapping_add(1);
        let mut truncated = false;
        let mut flip = None;
        match m {
            Mutation::Ttl(t) if !c.v6 => s.v4_mut().ttl = *t,
            Mutation::Ttl(t) => s.v6_mut().hop_limit = *t,
            Mutation::Tos(t) if !c.v6 => s.v4_mut().tos = *t,
            Mutation::Tos(t) => s.v6_mut().traffic_class = *t,
            Mutation::IdOffset(o) if !c.v6 => {
                let v = s.v4_mut();
                v.id = v.id.wrapping_add(*o)
            }
            Mutation::FixedId if !c.v6 => s.v4_mut().id = 7,
            Mutation::NoDf if !c.v6 => s.v4_mut().df = false,
            Mutation::Flags(f) => s.tcp_mut().flags = *f,
            Mutation::Window(w) => s.tcp_mut().window = *w,
            Mutation::Ack(a) => s.tcp_mut().ack = *a,
            Mutation::SeqOffset(o) => {
                let t = s.tcp_mut();
                t.seq = t.seq.wrapping_add(*o)
            }
            Mutation::TsVal(v) if c.timestamps => {
                let o = crate::build::timestamp_option(*v, 900);
                s.tcp_mut().options = o.to_vec();
            }
            Mutation::Padding(p) => s.trailer = vec![0; *p],
            Mutation::BadTcpChecksum => s.tcp_mut().corrupt_checksum = true,
            Mutation::BadIpChecksum if !c.v6 => s.v4_mut().corrupt_checksum = true,
            Mutation::TotalLen(l) if !c.v6 => s.v4_mut().total_len_override = Some(*l),
            Mutation::TotalLen(l) => s.v6_mut().payload_len_override = Some(*l),
            Mutation::Truncated => truncated = true,
            Mutation::FlowLabel(l) if c.v6 => s.v6_mut().flow_label = *l,
            Mutation::FlipByte(at, x) => flip = Some((*at, *x)),
            _ => {}
        }
        let mut f = s.build();
        if c.raw_ip {
            f.drain(..crate::wire::ethernet::HEADER_LEN);
        }
        if let Some((at, x)) = flip {
            let at = at % f.len();
            f[at] ^= x;
        }
        let orig = f.len() as u32 + truncated as u32;
        frames.push((f, orig));
    }
    frames
}

fn run(c: &Case, frames: &[(Vec<u8>, u32)], fast: bool) -> (Vec<Out>, GroStats) {
    let cfg = GroConfig {
        kernel: c.line,
        verify_checksums: c.verify,
        gro_max_size: c.max_size,
        gro_ipv4_max_size: c.max_size,
        flush_timeout_ns: if c.timeout0 { 0 } else { 1_000_000 },
        ..GroConfig::default()
    };
    let csum = if c.valid {
        RxChecksum::Unnecessary { level: 0 }
    } else {
        RxChecksum::None
    };
    let mut e = GroEngine::new(cfg);
    e.set_zero_copy(c.zero_copy);
    e.set_fast_path(fast);
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        outs.push(Out {
            data: d.data.to_vec(),
            frags: d.frags.to_vec(),
            link: d.link,
            timestamp_ns: d.timestamp_ns,
            segments: d.segments,
            gso_size: d.gso_size,
            gso_type: d.gso_type,
            reason: d.reason,
            first_frame: d.first_frame,
            last_frame: d.last_frame,
            proto: d.proto,
        })
    };
    let link = if c.raw_ip {
        LinkKind::RawIp
    } else {
        LinkKind::Ethernet
    };
    for (i, (f, orig)) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link,
            timestamp_ns: i as u64 * 1000,
            frame: i as u64 + 1,
            orig_len: *orig,
        };
        e.receive_with_checksum(input, csum, &mut push);
    }
    e.finish(&mut push);
    let stats = e.stats().clone();
    (outs, stats)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn fast_path_answers_exactly_as_the_full_path(c in case()) {
        let frames = train(&c);
        let (fast, fast_stats) = run(&c, &frames, true);
        let (full, full_stats) = run(&c, &frames, false);
        prop_assert_eq!(fast, full);
        prop_assert_eq!(fast_stats, full_stats);
    }
}

/// The fast path is taken at all (else the test above compares the full
/// path with itself): a clean train merges with the full path never
/// asked about the segments after the head.
#[test]
fn clean_trains_merge_on_the_fast_path() {
    for v6 in [false, true] {
        for line in KernelLine::ALL {
            let c = Case {
                line,
                ..Case::clean(v6, 2, true, 40)
            };
            let frames = train(&c);
            let mut e = GroEngine::new(GroConfig {
                kernel: line,
                ..GroConfig::default()
            });
            for (i, (f, _)) in frames.iter().enumerate() {
                let input = Input {
                    data: f,
                    link: LinkKind::Ethernet,
                    timestamp_ns: i as u64,
                    frame: i as u64 + 1,
                    orig_len: f.len() as u32,
                };
                e.receive(input, &mut |_| {});
            }
            assert_eq!(e.fast_merges, 38, "v6 {v6} line {line}");
            assert_eq!(e.fast_holds, 2, "v6 {v6} line {line}");
        }
    }
}

/// The plain use of the public API (default configuration: checksums
/// verified in software; `receive` for every frame, `finish` per batch)
/// takes the fast path for every segment after a flow's head, copying or
/// zero-copy, one flow or eight interleaved, IPv4 and IPv6: what a user
/// writes from the module's example is what the benchmarks measure.
#[test]
fn plain_public_api_takes_the_fast_path() {
    for v6 in [false, true] {
        for flows in [1usize, 8] {
            for zero_copy in [false, true] {
                let c = Case::clean(v6, flows, zero_copy, 64);
                let frames = train(&c);
                let mut e = GroEngine::new(GroConfig::default());
                e.set_zero_copy(zero_copy);
                let mut delivered = 0;
                // Two receive batches, each ended by `finish`.
                for (b, batch) in frames.chunks(frames.len().div_ceil(2)).enumerate() {
                    for (i, (f, _)) in batch.iter().enumerate() {
                        let n = (b * 1000 + i) as u64;
                        let input = Input {
                            data: f,
                            link: LinkKind::Ethernet,
                            timestamp_ns: n,
                            frame: n + 1,
                            orig_len: f.len() as u32,
                        };
                        e.receive(input, &mut |_| delivered += 1);
                    }
                    e.finish(&mut |_| delivered += 1);
                }
                // Each batch starts every flow once, held by the fast path
                // too.
                let heads = 2 * flows.min(frames.len()) as u64;
                assert_eq!(
                    e.fast_merges,
                    frames.len() as u64 - heads,
                    "v6 {v6} flows {flows} zero-copy {zero_copy}"
                );
                assert_eq!(
                    e.fast_holds, heads,
                    "v6 {v6} flows {flows} zero-copy {zero_copy}"
                );
                assert_eq!(delivered as u64, heads);
            }
        }
    }
}

/// More flows than the table holds, round-robin (the 30 000-flow trains
/// of `benches/gro-peers`): nothing merges, and every frame is held by
/// the fast path (evicting the oldest held packet), copying or zero-copy,
/// through the plain public API. Zero-copy singles come as their headers
/// plus one frag, and are their frames byte for byte.
#[test]
fn many_flows_are_held_on_the_fast_path() {
    for v6 in [false, true] {
        for zero_copy in [false, true] {
            let c = Case::clean(v6, 100, zero_copy, 400);
            let frames = train(&c);
            let mut e = GroEngine::new(GroConfig::default());
            e.set_zero_copy(zero_copy);
            let mut got = Vec::new();
            let mut push = |d: &Delivered<'_>| {
                assert_eq!(d.segments, 1);
                assert_eq!(d.frags.len(), zero_copy as usize);
                let mut v = Vec::new();
                d.copy_to(|n| &frames[n as usize - 1].0[..], &mut v);
                got.push((d.first_frame, v, d.reason));
            };
            for (i, (f, _)) in frames.iter().enumerate() {
                let input = Input {
                    data: f,
                    link: LinkKind::Ethernet,
                    timestamp_ns: i as u64,
                    frame: i as u64 + 1,
                    orig_len: f.len() as u32,
                };
                e.receive(input, &mut push);
            }
            e.finish(&mut push);
            let what = format!("v6 {v6} zero-copy {zero_copy}");
            assert_eq!(e.fast_holds, frames.len() as u64, "{what}");
            assert_eq!(e.fast_merges, 0, "{what}");
            assert_eq!(got.len(), frames.len(), "{what}");
            for (k, (first, bytes, reason)) in got.iter().enumerate() {
                assert_eq!(*first, k as u64 + 1, "{what}: oldest first");
                assert_eq!(bytes, &frames[k].0, "{what}: frame {first} unchanged");
                let want = if k + MAX_GRO_SKBS < frames.len() {
                    FlushReason::TableFull
                } else {
                    FlushReason::EndOfInput
                };
                assert_eq!(*reason, want, "{what}");
            }
        }
    }
}

/// Two flows whose hint indices cross (the second index of one is the
/// first of the other, as flows 2 and 3 of `benches/gro-peers`' IPv6
/// 8-flow train do) settle at one probe each: the flow found under its
/// second index takes its first back once, and plain merges write no
/// hint that would take it away again. Before, both indices were
/// rewritten on every merge and one of the two flows needed a second
/// probe on every frame.
#[test]
fn flows_whose_hints_cross_settle_at_one_probe() {
    const L4: usize = crate::wire::ethernet::HEADER_LEN + crate::wire::ipv6::HEADER_LEN;
    let frame = |sport: u16, seq: u32| {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = 1;
        let mut b = a;
        b[15] = 2;
        let tcp = TcpSpec::data(sport, 5201, seq).with_timestamps(1, 2);
        FrameSpec::tcp6(a, b, tcp).payload(vec![7; 1000]).build()
    };
    let hints = |sport: u16| super::template::hint_index(&frame(sport, 1), L4);
    // A pair of source ports whose indices cross and share nothing else;
    // B is held after A, so B's second index takes A's first.
    let (a, b) = (1u16..4000)
        .flat_map(|a| (1u16..4000).map(move |b| (a, b)))
        .find(|&(a, b)| {
            let (ha, hb) = (hints(a), hints(b));
            hb.1 == ha.0 && ha.1 != hb.0 && ha.0 != ha.1 && hb.0 != hb.1 && ha.1 != hb.1
        })
        .expect("a crossing pair of ports");
    let mut e = GroEngine::new(GroConfig::default());
    e.set_zero_copy(true);
    let rounds = 20u32;
    for i in 0..rounds {
        for sport in [a, b] {
            let f = frame(sport, 1 + i * 1000);
            let input = Input {
                data: &f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            };
            e.receive(input, &mut |_| {});
        }
    }
    assert_eq!(e.fast_holds, 2);
    assert_eq!(e.fast_merges, 2 * (rounds as u64 - 1));
    // A's first merge finds its first index taken by B and takes it
    // back; nothing needs a second probe after that.
    assert_eq!(e.second_probes, 1, "ports {a} and {b}");
}

/// A head held by evicting the oldest packet (more flows than slots) gets
/// its template at its flow's next segment (`Template::pend`), which then
/// merges on the fast path; a head held without eviction gets it at once.
#[test]
fn a_head_that_evicts_gets_its_template_at_its_next_segment() {
    for zero_copy in [false, true] {
        let frame = |flow: u16, seq: u32| {
            let tcp = TcpSpec::data(30000 + flow, 5201, seq).with_timestamps(1, 2);
            FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp)
                .payload(vec![flow as u8; 1000])
                .build()
        };
        let mut e = GroEngine::new(GroConfig::default());
        e.set_zero_copy(zero_copy);
        let mut delivered = Vec::new();
        let mut n = 0u64;
        let mut feed = |e: &mut GroEngine, f: Vec<u8>| {
            n += 1;
            let input = Input {
                data: &f,
                link: LinkKind::Ethernet,
                timestamp_ns: n,
                frame: n,
                orig_len: f.len() as u32,
            };
            e.receive(input, &mut |d| delivered.push((d.segments, d.reason)));
        };
        // Flows 0..=8 once each: the ninth evicts flow 0.
        for flow in 0..=MAX_GRO_SKBS as u16 {
            feed(&mut e, frame(flow, 1));
        }
        assert_eq!(e.fast_holds, MAX_GRO_SKBS as u64 + 1);
        // Flow 8's next segments merge on the fast path; so do flow 7's
        // (held without eviction).
        let last = MAX_GRO_SKBS as u16;
        for (flow, seq) in [(last, 1001), (last, 2001), (7, 1001)] {
            feed(&mut e, frame(flow, seq));
        }
        assert_eq!(e.fast_merges, 3, "zero-copy {zero_copy}");
        e.finish(&mut |d| delivered.push((d.segments, d.reason)));
        assert_eq!(delivered[0], (1, FlushReason::TableFull));
        assert!(
            delivered.contains(&(3, FlushReason::EndOfInput)),
            "{delivered:?}"
        );
    }
}
