//! Seeded UDP and VXLAN trains.
//!
//! UDP trains: 1 to 4 flows of equal-size datagrams to one destination
//! port, with one perturbation. VXLAN trains: inner TCP flows (IPv4 or
//! IPv6) carried in VXLAN over outer IPv4 to the VXLAN port, with inner or
//! outer perturbations (outer IP ID patterns and DF, outer checksum zero or
//! not, VNI, outer TTL, inner TCP classes). Geneve trains: the same, with a
//! Geneve header carrying one option.

use crate::generate::{tcp_train, Addrs, Class};
use offload::build::{vxlan_payload, FrameSpec, IpSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;

macro_rules! classes {
    ($enum:ident, $($name:ident => $label:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $enum { $($name,)* }
        impl $enum {
            pub const ALL: &'static [$enum] = &[$($enum::$name,)*];
            pub fn name(self) -> &'static str {
                match self { $($enum::$name => $label,)* }
            }
        }
    };
}

classes! {
    UdpClass,
    Clean => "clean",
    ShortTail => "short-tail",
    ShortMiddle => "short-middle",
    LargerAfterShort => "larger-after-short",
    ZeroChecksum => "zero-checksum",
    BadChecksum => "bad-checksum",
    Padding => "padding",
    TtlChange => "ttl-change",
    TosChange => "tos-change",
    DfChange => "df-change",
    IpIdRandom => "ip-id-random",
    IpIdFixed => "ip-id-fixed",
    ManyDatagrams => "many-datagrams",
    LargeDatagrams => "large-datagrams",
    HopLimitChange => "hop-limit-change",
    FlowLabelChange => "flow-label-change",
    Fragment => "fragment",
}

/// A generated UDP or VXLAN train.
#[derive(Debug, Clone)]
pub struct UdpTrain {
    pub seed: u64,
    pub class: &'static str,
    pub frames: Vec<Vec<u8>>,
    pub notes: String,
}

fn set_macs(spec: &mut FrameSpec, a: &Addrs) {
    if let offload::build::L2Spec::Ethernet { src, dst, .. } = &mut spec.l2 {
        *src = a.src_mac;
        *dst = a.dst_mac;
    }
}

/// A UDP train to `dport`.
pub fn udp_train(seed: u64, a: &Addrs, dport: u16, class: Option<UdpClass>) -> UdpTrain {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let class = class.unwrap_or_else(|| UdpClass::ALL[rng.random_range(0..UdpClass::ALL.len())]);
    let nflows = rng.random_range(1..=4);
    let mut flows: Vec<Vec<FrameSpec>> = Vec::new();
    let mut notes = String::new();
    for fi in 0..nflows {
        let v6 = match class {
            UdpClass::HopLimitChange | UdpClass::FlowLabelChange if fi == 0 => true,
            UdpClass::TtlChange
            | UdpClass::DfChange
            | UdpClass::IpIdRandom
            | UdpClass::IpIdFixed
            | UdpClass::Fragment
                if fi == 0 =>
            {
                false
            }
            _ => rng.random_bool(0.5),
        };
        let size = match class {
            UdpClass::LargeDatagrams if fi == 0 => rng.random_range(1200..=1400),
            _ => *[64usize, 200, 512, 1000, 1200, 1400]
                .get(rng.random_range(0..6))
                .unwrap_or(&512),
        };
        let n = match class {
            UdpClass::ManyDatagrams | UdpClass::LargeDatagrams if fi == 0 => {
                rng.random_range(60..=80)
            }
            _ => rng.random_range(2..=20),
        };
        let sport = 30000 + fi as u16 * 3 + rng.random_range(0..3);
        let id0: u16 = rng.random();
        let df = rng.random_bool(0.7);
        let mut segs = Vec::new();
        for i in 0..n {
            let mut s = if v6 {
                FrameSpec::udp6(a.src6, a.dst6, sport, dport)
            } else {
                FrameSpec::udp4(a.src4, a.dst4, sport, dport)
            };
            set_macs(&mut s, a);
            if let IpSpec::V4(v) = &mut s.ip {
                v.id = id0.wrapping_add(i as u16);
                v.df = df;
            }
            s.payload = (0..size).map(|j| (i * 7 + j) as u8).collect();
            segs.push(s);
        }
        let _ = write!(
            notes,
            "[{} size {size} n {n}] ",
            if v6 { "v6" } else { "v4" }
        );
        flows.push(segs);
    }
    let f = &mut flows[0];
    let n = f.len();
    let k = rng.random_range(1..n);
    match class {
        UdpClass::Clean | UdpClass::ManyDatagrams | UdpClass::LargeDatagrams => {}
        UdpClass::ShortTail => {
            let l = f[n - 1].payload.len();
            f[n - 1].payload.truncate(rng.random_range(1..l.max(2)));
        }
        UdpClass::ShortMiddle => {
            let l = f[k].payload.len();
            f[k].payload.truncate(rng.random_range(1..l.max(2)));
        }
        UdpClass::LargerAfterShort => {
            let l = f[0].payload.len();
            f[0].payload.truncate((l / 2).max(1));
        }
        UdpClass::ZeroChecksum => f[k].udp_mut().zero_checksum = true,
        UdpClass::BadChecksum => f[k].udp_mut().corrupt_checksum = true,
        UdpClass::Padding => f[k].trailer = vec![0; rng.random_range(1..6)],
        UdpClass::TtlChange => f[k].v4_mut().ttl = 9,
        UdpClass::TosChange => match &mut f[k].ip {
            IpSpec::V4(v) => v.tos = 0x20,
            IpSpec::V6(v) => v.traffic_class = 0x20,
        },
        UdpClass::DfChange => {
            let v = f[k].v4_mut();
            v.df = !v.df;
        }
        UdpClass::IpIdRandom => {
            for s in f.iter_mut() {
                s.v4_mut().id = rng.random();
            }
        }
        UdpClass::IpIdFixed => {
            for s in f.iter_mut() {
                s.v4_mut().id = 4242;
            }
        }
        UdpClass::HopLimitChange => f[k].v6_mut().hop_limit = 3,
        UdpClass::FlowLabelChange => f[k].v6_mut().flow_label = 0xbeef,
        UdpClass::Fragment => f[k].v4_mut().frag_extra = offload::wire::ipv4::MF,
    }
    UdpTrain {
        seed,
        class: class.name(),
        frames: interleave(&mut rng, flows),
        notes,
    }
}

classes! {
    OuterClass,
    Clean => "outer-clean",
    IdScrambledDf0 => "outer-id-scrambled-df0",
    IdScrambledDf1 => "outer-id-scrambled-df1",
    IdIncrementingDf0 => "outer-id-incrementing-df0",
    IdFixed => "outer-id-fixed",
    ChecksumOn => "outer-checksum-on",
    ChecksumMixed => "outer-checksum-mixed",
    TtlChange => "outer-ttl-change",
    VniChange => "outer-vni-change",
    SportChange => "outer-sport-change",
    InnerPerturbed => "inner-perturbed",
}

/// A VXLAN train: inner TCP flows (a TCP train's frames) encapsulated to
/// the VXLAN `port` with VNI `vni`.
pub fn vxlan_train(seed: u64, a: &Addrs, port: u16, vni: u32, outer_v6: bool) -> UdpTrain {
    udp_tunnel_train(seed, 0x5678, a, port, vni, outer_v6, vxlan_payload)
}

/// The Geneve header of [`geneve_train`]'s packets: version 0, one 8-byte
/// option (class 0x0102, type 0x80, 4 bytes of data), Ethernet payload.
fn geneve_payload(vni: u32, inner_frame: &[u8]) -> Vec<u8> {
    let mut p = vec![0x02, 0x00, 0x65, 0x58];
    p.extend_from_slice(&(vni << 8).to_be_bytes());
    p.extend_from_slice(&[0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef]);
    p.extend_from_slice(inner_frame);
    p
}

/// A Geneve train: as [`vxlan_train`], with a Geneve header (one option)
/// instead of the VXLAN header, to `port` (6081 for the kernel's Geneve
/// device), outer IPv4.
pub fn geneve_train(seed: u64, a: &Addrs, port: u16, vni: u32) -> UdpTrain {
    udp_tunnel_train(seed, 0x6081, a, port, vni, false, geneve_payload)
}

/// Inner TCP flows in a UDP tunnel whose header `encap(vni, inner frame)`
/// builds, with one outer perturbation class (or an inner one). `salt`
/// keeps the outer choices of different tunnels apart for one seed.
fn udp_tunnel_train(
    seed: u64,
    salt: u64,
    a: &Addrs,
    port: u16,
    vni: u32,
    outer_v6: bool,
    encap: fn(u32, &[u8]) -> Vec<u8>,
) -> UdpTrain {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ salt);
    let oclass = OuterClass::ALL[rng.random_range(0..OuterClass::ALL.len())];
    let inner_class = if oclass == OuterClass::InnerPerturbed {
        // Inner classes that keep frames VXLAN-carriable.
        let c = Class::ALL[rng.random_range(0..Class::ALL.len())];
        if matches!(c, Class::MacChange | Class::ManyFlows) {
            Class::Clean
        } else {
            c
        }
    } else {
        Class::Clean
    };
    let inner_addrs = Addrs {
        dst_mac: [0x02, 0x42, 0, 0, 0, 1],
        src_mac: [0x02, 0x42, 0, 0, 0, 2],
        dst4: [10, 42, 0, 1],
        src4: [10, 42, 0, 2],
        dst6: [0xfd, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        src6: [0xfd, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    };
    let mut inner = tcp_train(seed, &inner_addrs, Some(inner_class));
    // Keep the outer packet within the TAP's 1500-byte MTU habit: inner
    // frames were built for 1500, the outer adds 50 bytes, which the TAP
    // accepts (no MTU check on write) and GRO does not care about.
    inner.frames.truncate(40);
    let n = inner.frames.len();
    let k = rng.random_range(0..n);
    let id0: u16 = rng.random();
    let df = !matches!(
        oclass,
        OuterClass::IdScrambledDf0 | OuterClass::IdIncrementingDf0
    );
    let csum_on = matches!(oclass, OuterClass::ChecksumOn) || rng.random_bool(0.2);
    let sport: u16 = rng.random_range(49152..65535);
    let mut frames = Vec::with_capacity(n);
    for (i, f) in inner.frames.iter().enumerate() {
        let mut this_vni = vni;
        if oclass == OuterClass::VniChange && i == k {
            this_vni = vni + 1;
        }
        let mut o = if outer_v6 {
            FrameSpec::udp6(a.src6, a.dst6, sport, port)
        } else {
            FrameSpec::udp4(a.src4, a.dst4, sport, port)
        }
        .payload(encap(this_vni, f));
        set_macs(&mut o, a);
        match &mut o.ip {
            IpSpec::V4(v) => {
                v.df = df;
                v.id = match oclass {
                    OuterClass::IdScrambledDf0 | OuterClass::IdScrambledDf1 => rng.random(),
                    OuterClass::IdFixed => id0,
                    _ => id0.wrapping_add(i as u16),
                };
                if oclass == OuterClass::TtlChange && i == k {
                    v.ttl = 17;
                }
            }
            IpSpec::V6(v) => {
                if oclass == OuterClass::TtlChange && i == k {
                    v.hop_limit = 17;
                }
            }
        }
        if oclass == OuterClass::SportChange && i == k {
            o.udp_mut().sport = sport ^ 1;
        }
        // IPv6 forbids a zero UDP checksum (RFC 8200): the kernel's VXLAN
        // always sends one over IPv6 unless udp6zerocsumtx is set.
        let on = match oclass {
            OuterClass::ChecksumMixed => i % 2 == 0,
            _ => csum_on || outer_v6,
        };
        o.udp_mut().zero_checksum = !on;
        frames.push(o.build());
    }
    UdpTrain {
        seed,
        class: if oclass == OuterClass::InnerPerturbed {
            inner_class.name()
        } else {
            oclass.name()
        },
        frames,
        notes: format!(
            "outer {} csum {} | inner {}",
            oclass.name(),
            csum_on,
            inner.notes
        ),
    }
}

fn interleave(rng: &mut ChaCha8Rng, flows: Vec<Vec<FrameSpec>>) -> Vec<Vec<u8>> {
    let total: usize = flows.iter().map(Vec::len).sum();
    let mut cursors = vec![0usize; flows.len()];
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        let fi = rng.random_range(0..flows.len());
        if cursors[fi] < flows[fi].len() {
            out.push(flows[fi][cursors[fi]].build());
            cursors[fi] += 1;
        }
    }
    out
}
