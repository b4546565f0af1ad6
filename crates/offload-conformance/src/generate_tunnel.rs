//! Seeded IP-tunnel trains: the inner TCP flows of a [`tcp_train`]
//! (IPv4 and IPv6, every inner class) carried by IP in IP (IPIP and SIT
//! over IPv4, IPv4 and IPv6 in IPv6) or by GRE over IPv4 (no option, key,
//! checksum, checksum and key; IP or Ethernet payload) or IPv6, with one outer
//! perturbation: IPv4 ID patterns and DF, TTL or hop limit, TOS or traffic
//! class, flow label, the GRE key.
//!
//! The encapsulation of each frame follows its inner packet: IPv4 inside
//! is protocol 4 (IPIP) or GRE protocol 0x0800, IPv6 inside is 41 (SIT)
//! or 0x86dd, so one train mixes IPIP and SIT flows as a host would.

use crate::generate::{tcp_train, Addrs, Class};
use crate::generate_udp::UdpTrain;
use offload::checksum;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The carrier of an IP-tunnel train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// IP in IPv4 (`ipip_gro_receive`, `sit_gro_receive`... as 4 or 41).
    IpInIpv4,
    /// IP in IPv6 (`ip4ip6_gro_receive`, `sit_ip6ip6_gro_receive`).
    IpInIpv6,
    /// GRE over IPv4 with these flags (0, key 0x2000, checksum 0x8000 or
    /// both); `teb`: the payload is an Ethernet frame (gretap).
    Gre { flags: u16, teb: bool },
    /// GRE over IPv6 (`gre_gro_receive` is registered for both:
    /// `gre_offload_init`), these flags, IP payload.
    Gre6 { flags: u16 },
}

impl Carrier {
    /// Every carrier the suite runs.
    pub const ALL: [Carrier; 9] = [
        Carrier::IpInIpv4,
        Carrier::IpInIpv6,
        Carrier::Gre {
            flags: 0,
            teb: false,
        },
        Carrier::Gre {
            flags: 0x2000,
            teb: false,
        },
        Carrier::Gre {
            flags: 0x8000,
            teb: false,
        },
        Carrier::Gre {
            flags: 0xa000,
            teb: false,
        },
        Carrier::Gre {
            flags: 0x2000,
            teb: true,
        },
        Carrier::Gre6 { flags: 0x2000 },
        Carrier::Gre6 { flags: 0xa000 },
    ];

    pub fn name(self) -> &'static str {
        match self {
            Carrier::IpInIpv4 => "ip-in-ipv4",
            Carrier::IpInIpv6 => "ip-in-ipv6",
            Carrier::Gre { teb: true, .. } => "gretap-key",
            Carrier::Gre { flags: 0, .. } => "gre",
            Carrier::Gre { flags: 0x2000, .. } => "gre-key",
            Carrier::Gre { flags: 0x8000, .. } => "gre-csum",
            Carrier::Gre { .. } => "gre-csum-key",
            Carrier::Gre6 { flags: 0x2000 } => "gre6-key",
            Carrier::Gre6 { .. } => "gre6-csum-key",
        }
    }
}

/// The outer perturbation of a train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outer {
    Clean,
    IdScrambledDf0,
    IdScrambledDf1,
    IdIncrementingDf0,
    IdFixed,
    TtlChange,
    TosChange,
    DfChange,
    FlowLabelChange,
    KeyChange,
    InnerPerturbed,
}

const OUTER: [(Outer, &str); 11] = [
    (Outer::Clean, "outer-clean"),
    (Outer::IdScrambledDf0, "outer-id-scrambled-df0"),
    (Outer::IdScrambledDf1, "outer-id-scrambled-df1"),
    (Outer::IdIncrementingDf0, "outer-id-incrementing-df0"),
    (Outer::IdFixed, "outer-id-fixed"),
    (Outer::TtlChange, "outer-ttl-change"),
    (Outer::TosChange, "outer-tos-change"),
    (Outer::DfChange, "outer-df-change"),
    (Outer::FlowLabelChange, "outer-flow-label-change"),
    (Outer::KeyChange, "gre-key-change"),
    (Outer::InnerPerturbed, "inner-perturbed"),
];

/// A train of inner TCP flows in `carrier`, outer addresses `a`.
pub fn ip_tunnel_train(seed: u64, a: &Addrs, carrier: Carrier) -> UdpTrain {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4747);
    let (outer, oname) = OUTER[rng.random_range(0..OUTER.len())];
    let inner_class = if outer == Outer::InnerPerturbed {
        Class::ALL[rng.random_range(0..Class::ALL.len())]
    } else {
        Class::Clean
    };
    let inner_addrs = Addrs {
        dst_mac: [0x02, 0x47, 0, 0, 0, 1],
        src_mac: [0x02, 0x47, 0, 0, 0, 2],
        dst4: [10, 47, 0, 1],
        src4: [10, 47, 0, 2],
        dst6: [0xfd, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        src6: [0xfd, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    };
    let mut inner = tcp_train(seed, &inner_addrs, Some(inner_class));
    inner.frames.truncate(40);
    let n = inner.frames.len();
    let k = rng.random_range(0..n);
    let id0: u16 = rng.random();
    let df = !matches!(outer, Outer::IdScrambledDf0 | Outer::IdIncrementingDf0);
    let mut frames = Vec::with_capacity(n);
    for (i, f) in inner.frames.iter().enumerate() {
        let changed = i == k;
        let inner_v6 = f.len() >= 14 && f[12..14] == [0x86, 0xdd];
        let (mut payload, proto) = match carrier {
            Carrier::IpInIpv4 | Carrier::IpInIpv6 => {
                (f[14..].to_vec(), if inner_v6 { 41 } else { 4 })
            }
            Carrier::Gre { flags, teb } => {
                let key = if outer == Outer::KeyChange && changed {
                    43
                } else {
                    42
                };
                (gre(flags, teb, inner_v6, key, f), 47)
            }
            Carrier::Gre6 { flags } => {
                let key = if outer == Outer::KeyChange && changed {
                    43
                } else {
                    42
                };
                (gre(flags, false, inner_v6, key, f), 47)
            }
        };
        let ttl = if outer == Outer::TtlChange && changed {
            17
        } else {
            64
        };
        let tos = if outer == Outer::TosChange && changed {
            0x20
        } else {
            0
        };
        let mut frame = Vec::with_capacity(14 + 40 + payload.len());
        frame.extend_from_slice(&a.dst_mac);
        frame.extend_from_slice(&a.src_mac);
        if matches!(carrier, Carrier::IpInIpv6 | Carrier::Gre6 { .. }) {
            frame.extend_from_slice(&[0x86, 0xdd]);
            let label: u32 = if outer == Outer::FlowLabelChange && changed {
                0xbeef
            } else {
                0x1234
            };
            let word = 0x6000_0000 | u32::from(tos) << 20 | label;
            frame.extend_from_slice(&word.to_be_bytes());
            frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            frame.extend_from_slice(&[proto, ttl]);
            frame.extend_from_slice(&a.src6);
            frame.extend_from_slice(&a.dst6);
        } else {
            frame.extend_from_slice(&[0x08, 0x00]);
            let id = match outer {
                Outer::IdScrambledDf0 | Outer::IdScrambledDf1 => rng.random(),
                Outer::IdFixed => id0,
                _ => id0.wrapping_add(i as u16),
            };
            let this_df = if outer == Outer::DfChange && changed {
                !df
            } else {
                df
            };
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = tos;
            h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
            h[4..6].copy_from_slice(&id.to_be_bytes());
            h[6] = if this_df { 0x40 } else { 0 };
            h[8] = ttl;
            h[9] = proto;
            h[12..16].copy_from_slice(&a.src4);
            h[16..20].copy_from_slice(&a.dst4);
            let c = checksum::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            frame.extend_from_slice(&h);
        }
        frame.append(&mut payload);
        frames.push(frame);
    }
    UdpTrain {
        seed,
        class: if outer == Outer::InnerPerturbed {
            inner_class.name()
        } else {
            oname
        },
        frames,
        notes: format!("{} outer {oname} | inner {}", carrier.name(), inner.notes),
    }
}

/// A GRE header (`flags`, key `key` when K, checksum when C) and its
/// payload: the inner Ethernet frame `f` for gretap, else its IP packet.
fn gre(flags: u16, teb: bool, inner_v6: bool, key: u32, f: &[u8]) -> Vec<u8> {
    let proto: u16 = if teb {
        0x6558
    } else if inner_v6 {
        0x86dd
    } else {
        0x0800
    };
    let mut g = flags.to_be_bytes().to_vec();
    g.extend_from_slice(&proto.to_be_bytes());
    if flags & 0x8000 != 0 {
        g.extend_from_slice(&[0; 4]);
    }
    if flags & 0x2000 != 0 {
        g.extend_from_slice(&key.to_be_bytes());
    }
    g.extend_from_slice(if teb { f } else { &f[14..] });
    if flags & 0x8000 != 0 {
        let c = checksum::checksum(&g);
        g[4..6].copy_from_slice(&c.to_be_bytes());
    }
    g
}
