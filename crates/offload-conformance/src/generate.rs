//! Seeded generation of TCP trains that span the GRO rule space.
//!
//! A train is 1 to 4 interleaved flows (sometimes 9 to 12, to fill the GRO
//! bucket), IPv4 or IPv6, with one perturbation class applied to one
//! segment of one flow. Every class of the reference's outcome table
//! (`gro-gso-reference.md` §3.2, §4, §18) has a [`Class`] variant. The same
//! seed always gives the same train.

use offload::build::{timestamp_option, FrameSpec, TcpSpec};
use offload::wire::tcp::flags as tf;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Addresses the trains use: the oracle's TAP and its peer.
#[derive(Debug, Clone, Copy)]
pub struct Addrs {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub dst4: [u8; 4],
    pub src4: [u8; 4],
    pub dst6: [u8; 16],
    pub src6: [u8; 16],
}

macro_rules! classes {
    ($($name:ident => $label:literal,)*) => {
        /// The perturbation applied to a train.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Class { $($name,)* }
        impl Class {
            pub const ALL: &'static [Class] = &[$(Class::$name,)*];
            pub fn name(self) -> &'static str {
                match self { $(Class::$name => $label,)* }
            }
        }
    };
}

classes! {
    Clean => "clean",
    ShortTail => "short-tail",
    ShortMiddle => "short-middle",
    LargerAfterShort => "larger-after-short",
    Psh => "psh",
    Fin => "fin",
    Syn => "syn",
    Rst => "rst",
    Urg => "urg",
    PureAck => "pure-ack",
    Ece => "ece",
    Cwr => "cwr",
    CwrOnAll => "cwr-on-all",
    Window => "window",
    OptionsAdded => "options-added",
    TimestampChange => "timestamp-change",
    AckChange => "ack-change",
    SeqGap => "seq-gap",
    Retransmit => "retransmit",
    Reorder => "reorder",
    BadTcpChecksum => "bad-tcp-checksum",
    Ipv4Options => "ipv4-options",
    Ipv4Fragment => "ipv4-fragment",
    BadIpChecksum => "bad-ip-checksum",
    EthernetPadding => "ethernet-padding",
    LengthLies => "length-lies",
    ReservedBit => "reserved-bit",
    TtlChange => "ttl-change",
    TosChange => "tos-change",
    EcnChange => "ecn-change",
    DfChange => "df-change",
    IpIdFixed => "ip-id-fixed",
    IpIdRandom => "ip-id-random",
    IpIdDecrement => "ip-id-decrement",
    IpIdPlusTwo => "ip-id-plus-two",
    IpIdWrap => "ip-id-wrap",
    IpIdFixedThenStep => "ip-id-fixed-then-step",
    FlowLabelChange => "flow-label-change",
    HopLimitChange => "hop-limit-change",
    Ipv6DestOpts => "ipv6-dest-opts",
    Ipv6DestOptsDiffer => "ipv6-dest-opts-differ",
    Ipv6Fragment => "ipv6-fragment",
    MacChange => "mac-change",
    ManySegments => "many-segments",
    ManyFlows => "many-flows",
}

/// A generated train.
#[derive(Debug, Clone)]
pub struct Train {
    pub seed: u64,
    pub class: Class,
    pub frames: Vec<Vec<u8>>,
    /// A one-line description of the flows.
    pub notes: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum IdPattern {
    Increment,
    Fixed,
    Random,
    Decrement,
    PlusTwo,
}

/// One segment being planned: its spec plus whether seq/ID are pinned.
#[derive(Debug, Clone)]
struct Seg {
    spec: FrameSpec,
    /// The sequence number was set by the perturbation.
    seq_pinned: bool,
    /// The IP ID was set by the perturbation.
    id_pinned: bool,
}

struct Flow {
    segs: Vec<Seg>,
    v6: bool,
    id_pattern: IdPattern,
    id0: u16,
    seq0: u32,
}

/// Generates the train of `seed`, with `class` forced if given (otherwise
/// drawn from the seed).
pub fn tcp_train(seed: u64, addrs: &Addrs, class: Option<Class>) -> Train {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let class = class.unwrap_or_else(|| Class::ALL[rng.random_range(0..Class::ALL.len())]);
    let nflows = match class {
        Class::ManyFlows => rng.random_range(9..=12),
        _ => rng.random_range(1..=4),
    };
    let v6_class = matches!(
        class,
        Class::FlowLabelChange
            | Class::HopLimitChange
            | Class::Ipv6DestOpts
            | Class::Ipv6DestOptsDiffer
            | Class::Ipv6Fragment
    );
    let v4_class = matches!(
        class,
        Class::Ipv4Options
            | Class::Ipv4Fragment
            | Class::BadIpChecksum
            | Class::ReservedBit
            | Class::TtlChange
            | Class::DfChange
            | Class::IpIdFixed
            | Class::IpIdRandom
            | Class::IpIdDecrement
            | Class::IpIdPlusTwo
            | Class::IpIdWrap
            | Class::IpIdFixedThenStep
    );
    let mut flows = Vec::new();
    let mut notes = String::new();
    for fi in 0..nflows {
        let v6 = if fi == 0 && v6_class {
            true
        } else if fi == 0 && v4_class {
            false
        } else {
            rng.random_bool(0.5)
        };
        let ts = rng.random_bool(0.6);
        let hdr = if v6 { 40 } else { 20 } + 20 + if ts { 12 } else { 0 };
        let mss = *[536usize, 1000, 1200, 1400, 1448, 1460]
            .iter()
            .filter(|m| **m + hdr <= 1500)
            .nth(rng.random_range(0..4))
            .unwrap_or(&1000);
        let n = match class {
            Class::ManySegments if fi == 0 => rng.random_range(40..=140),
            _ => rng.random_range(2..=24),
        };
        let id_pattern = match (v6, class, fi) {
            (false, Class::IpIdFixed, 0) => IdPattern::Fixed,
            (false, Class::IpIdRandom, 0) => IdPattern::Random,
            (false, Class::IpIdDecrement, 0) => IdPattern::Decrement,
            (false, Class::IpIdPlusTwo, 0) => IdPattern::PlusTwo,
            _ => match rng.random_range(0..10) {
                0 => IdPattern::Fixed,
                _ => IdPattern::Increment,
            },
        };
        let df = !matches!(rng.random_range(0..5), 0);
        let id0 = if class == Class::IpIdWrap && fi == 0 {
            65535 - rng.random_range(0..3)
        } else {
            rng.random()
        };
        let seq0: u32 = rng.random();
        let sport = 20000 + fi as u16 * 7 + rng.random_range(0..5);
        let tsval: u32 = rng.random();
        let tsecr: u32 = rng.random();
        let ack: u32 = rng.random();
        let mut segs = Vec::with_capacity(n);
        for _ in 0..n {
            let mut tcp = TcpSpec::data(sport, 5201, 0);
            tcp.ack = ack;
            tcp.window = 502;
            if ts {
                tcp = tcp.with_timestamps(tsval, tsecr);
            }
            let mut spec = if v6 {
                FrameSpec::tcp6(addrs.src6, addrs.dst6, tcp)
            } else {
                let mut s = FrameSpec::tcp4(addrs.src4, addrs.dst4, tcp);
                s.v4_mut().df = df;
                s
            };
            if let offload::build::L2Spec::Ethernet { src, dst, .. } = &mut spec.l2 {
                *src = addrs.src_mac;
                *dst = addrs.dst_mac;
            }
            spec.payload = vec![0u8; mss];
            segs.push(Seg {
                spec,
                seq_pinned: false,
                id_pinned: false,
            });
        }
        if rng.random_bool(0.5) {
            let last = segs.last_mut().expect("n >= 2");
            last.spec.payload.truncate(rng.random_range(1..mss));
        }
        let _ = write!(
            notes,
            "[{} mss {} n {} ts {} id {:?} df {}] ",
            if v6 { "v6" } else { "v4" },
            mss,
            n,
            ts,
            id_pattern,
            df
        );
        flows.push(Flow {
            segs,
            v6,
            id_pattern,
            id0,
            seq0,
        });
    }

    perturb(&mut rng, class, &mut flows[0]);

    // Sequence numbers, IDs and payload bytes.
    for f in &mut flows {
        let mut seq = f.seq0;
        for (i, s) in f.segs.iter_mut().enumerate() {
            if !s.seq_pinned {
                s.spec.tcp_mut().seq = seq;
            }
            seq = s
                .spec
                .tcp_mut()
                .seq
                .wrapping_add(s.spec.payload.len() as u32);
            let this_seq = s.spec.tcp_mut().seq;
            for (j, b) in s.spec.payload.iter_mut().enumerate() {
                *b = (j as u32).wrapping_add(this_seq) as u8;
            }
            if !f.v6 && !s.id_pinned {
                let id = match f.id_pattern {
                    IdPattern::Increment => f.id0.wrapping_add(i as u16),
                    IdPattern::Fixed => f.id0,
                    IdPattern::Random => rng.random(),
                    IdPattern::Decrement => f.id0.wrapping_sub(i as u16),
                    IdPattern::PlusTwo => f.id0.wrapping_add(2 * i as u16),
                };
                s.spec.v4_mut().id = id;
            }
        }
    }

    // Interleave: each step takes the next segment of a random flow.
    let mut cursors = vec![0usize; flows.len()];
    let total: usize = flows.iter().map(|f| f.segs.len()).sum();
    let mut frames = Vec::with_capacity(total);
    let round_robin = rng.random_bool(0.5);
    let mut turn = 0;
    while frames.len() < total {
        let fi = if round_robin {
            turn = (turn + 1) % flows.len();
            turn
        } else {
            rng.random_range(0..flows.len())
        };
        if cursors[fi] < flows[fi].segs.len() {
            frames.push(flows[fi].segs[cursors[fi]].spec.build());
            cursors[fi] += 1;
        }
    }
    Train {
        seed,
        class,
        frames,
        notes,
    }
}

use std::fmt::Write as _;

/// Applies `class` to one flow.
fn perturb(rng: &mut ChaCha8Rng, class: Class, f: &mut Flow) {
    let n = f.segs.len();
    let k = rng.random_range(1..n);
    fn seg(f: &mut Flow, i: usize) -> &mut FrameSpec {
        &mut f.segs[i].spec
    }
    match class {
        Class::Clean | Class::ManySegments | Class::ManyFlows => {}
        Class::ShortTail => {
            let l = f.segs[n - 1].spec.payload.len();
            f.segs[n - 1]
                .spec
                .payload
                .truncate(rng.random_range(1..l.max(2)));
        }
        Class::ShortMiddle => {
            let l = f.segs[k].spec.payload.len();
            f.segs[k]
                .spec
                .payload
                .truncate(rng.random_range(1..l.max(2)));
        }
        Class::LargerAfterShort => {
            let l = f.segs[0].spec.payload.len();
            f.segs[0].spec.payload.truncate(l / 2);
        }
        Class::Psh => seg(f, k).tcp_mut().flags |= tf::PSH,
        Class::Fin => seg(f, k).tcp_mut().flags |= tf::FIN,
        Class::Syn => seg(f, k).tcp_mut().flags |= tf::SYN,
        Class::Rst => seg(f, k).tcp_mut().flags |= tf::RST,
        Class::Urg => {
            let t = seg(f, k).tcp_mut();
            t.flags |= tf::URG;
            t.urgent = 10;
        }
        Class::PureAck => f.segs[k].spec.payload.clear(),
        Class::Ece => seg(f, k).tcp_mut().flags |= tf::ECE,
        Class::Cwr => seg(f, k).tcp_mut().flags |= tf::CWR,
        Class::CwrOnAll => {
            for s in &mut f.segs {
                s.spec.tcp_mut().flags |= tf::CWR;
            }
        }
        Class::Window => seg(f, k).tcp_mut().window = 1024,
        Class::OptionsAdded => {
            let t = seg(f, k).tcp_mut();
            t.options.extend_from_slice(&[1, 1, 1, 1]);
        }
        Class::TimestampChange => {
            for s in &mut f.segs[k..] {
                let t = s.spec.tcp_mut();
                if t.options.len() == 12 {
                    let v = u32::from_be_bytes([
                        t.options[4],
                        t.options[5],
                        t.options[6],
                        t.options[7],
                    ]);
                    t.options = timestamp_option(v.wrapping_add(1), 0x0102_0304).to_vec();
                } else {
                    t.options = timestamp_option(7, 9).to_vec();
                }
            }
        }
        Class::AckChange => {
            for s in &mut f.segs[k..] {
                let t = s.spec.tcp_mut();
                t.ack = t.ack.wrapping_add(1448);
            }
        }
        Class::SeqGap => {
            // Remove segment k: the following segments keep their sequence numbers.
            f.segs.remove(k);
            let mut seq = f.seq0;
            for s in &mut f.segs {
                s.spec.tcp_mut().seq = seq;
                s.seq_pinned = true;
                seq = seq.wrapping_add(s.spec.payload.len() as u32);
            }
            let gap_len = f
                .segs
                .get(k.saturating_sub(1))
                .map(|s| s.spec.payload.len())
                .unwrap_or(100);
            let from = k.min(f.segs.len());
            for s in &mut f.segs[from..] {
                let t = s.spec.tcp_mut();
                t.seq = t.seq.wrapping_add(gap_len as u32);
            }
        }
        Class::Retransmit => {
            let mut dup = f.segs[k - 1].clone();
            dup.seq_pinned = false;
            f.segs.insert(k + 1, dup);
            // Pin sequence numbers so the duplicate repeats segment k-1's.
            let mut seq = f.seq0;
            for (i, s) in f.segs.iter_mut().enumerate() {
                if i == k + 1 {
                    s.seq_pinned = true;
                    continue;
                }
                s.spec.tcp_mut().seq = seq;
                s.seq_pinned = true;
                seq = seq.wrapping_add(s.spec.payload.len() as u32);
            }
            let prev = f.segs[k - 1].spec.tcp_mut().seq;
            f.segs[k + 1].spec.tcp_mut().seq = prev;
        }
        Class::Reorder => {
            let mut seq = f.seq0;
            for s in &mut f.segs {
                s.spec.tcp_mut().seq = seq;
                s.seq_pinned = true;
                seq = seq.wrapping_add(s.spec.payload.len() as u32);
            }
            if k + 1 < f.segs.len() {
                f.segs.swap(k, k + 1);
            } else {
                f.segs.swap(k - 1, k);
            }
        }
        Class::BadTcpChecksum => seg(f, k).tcp_mut().corrupt_checksum = true,
        Class::Ipv4Options => seg(f, k).v4_mut().options = vec![1, 1, 1, 0],
        Class::Ipv4Fragment => seg(f, k).v4_mut().frag_extra = offload::wire::ipv4::MF,
        Class::BadIpChecksum => seg(f, k).v4_mut().corrupt_checksum = true,
        Class::EthernetPadding => {
            let s = seg(f, k);
            s.payload.clear();
            s.trailer = vec![0; 6];
        }
        Class::LengthLies => {
            let s = seg(f, k);
            s.trailer = vec![0xee; rng.random_range(1..8)];
        }
        Class::ReservedBit => seg(f, k).v4_mut().frag_extra = offload::wire::ipv4::RESERVED,
        Class::TtlChange => seg(f, k).v4_mut().ttl = 63,
        Class::TosChange => match &mut seg(f, k).ip {
            offload::build::IpSpec::V4(v) => v.tos = 0x10,
            offload::build::IpSpec::V6(v) => v.traffic_class = 0x10,
        },
        Class::EcnChange => match &mut seg(f, k).ip {
            offload::build::IpSpec::V4(v) => v.tos = 0x03,
            offload::build::IpSpec::V6(v) => v.traffic_class = 0x03,
        },
        Class::DfChange => {
            let v = seg(f, k).v4_mut();
            v.df = !v.df;
        }
        Class::IpIdFixed
        | Class::IpIdRandom
        | Class::IpIdDecrement
        | Class::IpIdPlusTwo
        | Class::IpIdWrap => {}
        Class::IpIdFixedThenStep => {
            // 8, 8, 9 / 8, 9, 9 patterns of the selftest.
            f.id_pattern = IdPattern::Increment;
            let id0 = f.id0;
            let fixed_first = rng.random_bool(0.5);
            for (i, s) in f.segs.iter_mut().enumerate() {
                let id = if fixed_first {
                    if i < 2 {
                        id0
                    } else {
                        id0.wrapping_add(i as u16 - 1)
                    }
                } else if i < 2 {
                    id0.wrapping_add(i as u16)
                } else {
                    id0.wrapping_add(1)
                };
                s.spec.v4_mut().id = id;
                s.id_pinned = true;
            }
        }
        Class::FlowLabelChange => seg(f, k).v6_mut().flow_label = 0x12345,
        Class::HopLimitChange => seg(f, k).v6_mut().hop_limit = 1,
        Class::Ipv6DestOpts => {
            for s in &mut f.segs {
                s.spec.v6_mut().ext.push((60, vec![1, 4, 0, 0, 0, 0]));
            }
        }
        Class::Ipv6DestOptsDiffer => {
            for (i, s) in f.segs.iter_mut().enumerate() {
                let b = if i == k { 1 } else { 0 };
                s.spec.v6_mut().ext.push((60, vec![1, 4, b, 0, 0, 0]));
            }
        }
        Class::Ipv6Fragment => seg(f, k).v6_mut().ext.push((44, vec![0, 0, 0, 0, 0, 0])),
        Class::MacChange => {
            if let offload::build::L2Spec::Ethernet { src, .. } = &mut seg(f, k).l2 {
                src[5] ^= 0x40;
            }
        }
    }
}

/// `frame` with in-band VLAN tags `(tpid, tci)` inserted after the MAC
/// addresses, outermost first.
pub fn vlan_tagged(frame: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + 4 * tags.len());
    out.extend_from_slice(&frame[..12]);
    for (tpid, tci) in tags {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&tci.to_be_bytes());
    }
    out.extend_from_slice(&frame[12..]);
    out
}
