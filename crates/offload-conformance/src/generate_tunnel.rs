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

/// The tunnels of the BIG TCP trains ([`big_tcp_train`]): every kind the
/// engine coalesces, over an IPv4 and an IPv6 outer header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BigTcpTunnel {
    /// IPIP (inner IPv4) or SIT (inner IPv6) over IPv4.
    IpInIpv4,
    /// IPv4 or IPv6 in IPv6 (ip4ip6, ip6ip6).
    IpInIpv6,
    /// GRE with a key over IPv4.
    Gre4,
    /// gretap with a key over IPv4.
    Gretap4,
    /// GRE with a key over IPv6 (ip6gre).
    Gre6,
    /// VXLAN (port 4789, VNI 42) over IPv4.
    Vxlan4,
    /// VXLAN over IPv6.
    Vxlan6,
}

impl BigTcpTunnel {
    /// Every kind.
    pub const ALL: [BigTcpTunnel; 7] = [
        BigTcpTunnel::IpInIpv4,
        BigTcpTunnel::IpInIpv6,
        BigTcpTunnel::Gre4,
        BigTcpTunnel::Gretap4,
        BigTcpTunnel::Gre6,
        BigTcpTunnel::Vxlan4,
        BigTcpTunnel::Vxlan6,
    ];

    /// The outer header is IPv6.
    pub fn outer_v6(self) -> bool {
        matches!(
            self,
            BigTcpTunnel::IpInIpv6 | BigTcpTunnel::Gre6 | BigTcpTunnel::Vxlan6
        )
    }

    /// A VXLAN device must listen for the train.
    pub fn vxlan(self) -> bool {
        matches!(self, BigTcpTunnel::Vxlan4 | BigTcpTunnel::Vxlan6)
    }

    pub fn name(self, inner_v6: bool) -> &'static str {
        match (self, inner_v6) {
            (BigTcpTunnel::IpInIpv4, false) => "ipip",
            (BigTcpTunnel::IpInIpv4, true) => "sit",
            (BigTcpTunnel::IpInIpv6, false) => "ip4ip6",
            (BigTcpTunnel::IpInIpv6, true) => "ip6ip6",
            (BigTcpTunnel::Gre4, false) => "gre-ipv4-in",
            (BigTcpTunnel::Gre4, true) => "gre-ipv6-in",
            (BigTcpTunnel::Gretap4, false) => "gretap-ipv4-in",
            (BigTcpTunnel::Gretap4, true) => "gretap-ipv6-in",
            (BigTcpTunnel::Gre6, false) => "ip6gre-ipv4-in",
            (BigTcpTunnel::Gre6, true) => "ip6gre-ipv6-in",
            (BigTcpTunnel::Vxlan4, false) => "vxlan4-ipv4-in",
            (BigTcpTunnel::Vxlan4, true) => "vxlan4-ipv6-in",
            (BigTcpTunnel::Vxlan6, false) => "vxlan6-ipv4-in",
            (BigTcpTunnel::Vxlan6, true) => "vxlan6-ipv6-in",
        }
    }
}

/// One clean inner TCP flow of `segments` segments of `mss` bytes (DF,
/// incrementing IDs, a PSH on the last) in `tunnel`: with `mss` 1400 and
/// 100 segments a merge passes 64 KiB, the BIG TCP case of
/// `gro_max_size` 185000. Outer IPv4 headers have DF and incrementing IDs.
pub fn big_tcp_train(
    a: &Addrs,
    tunnel: BigTcpTunnel,
    inner_v6: bool,
    segments: u32,
    mss: usize,
) -> UdpTrain {
    use offload::build::{vxlan_payload, FrameSpec, L2Spec, TcpSpec};
    const IN4: ([u8; 4], [u8; 4]) = ([10, 48, 0, 2], [10, 48, 0, 1]);
    const IN6: ([u8; 16], [u8; 16]) = (
        [0xfd, 0x48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        [0xfd, 0x48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    );
    let mut frames = Vec::with_capacity(segments as usize);
    for i in 0..segments {
        let mut tcp = TcpSpec::data(40100, 5201, 1 + i * mss as u32);
        if i + 1 == segments {
            tcp.flags |= offload::wire::tcp::flags::PSH;
        }
        let mut s = if inner_v6 {
            FrameSpec::tcp6(IN6.0, IN6.1, tcp)
        } else {
            let mut s = FrameSpec::tcp4(IN4.0, IN4.1, tcp);
            s.v4_mut().id = 1000 + i as u16;
            s
        }
        .payload(vec![(i % 251) as u8; mss]);
        // The inner Ethernet header of VXLAN and gretap; none otherwise.
        let teb = matches!(tunnel, BigTcpTunnel::Gretap4) || tunnel.vxlan();
        if let L2Spec::Ethernet { src, dst, .. } = &mut s.l2 {
            *src = [0x02, 0x48, 0, 0, 0, 2];
            *dst = [0x02, 0x48, 0, 0, 0, 1];
        }
        if !teb {
            s.l2 = L2Spec::None;
        }
        let inner = s.build();
        let frame = match tunnel {
            BigTcpTunnel::Vxlan4 | BigTcpTunnel::Vxlan6 => {
                let mut o = if tunnel.outer_v6() {
                    FrameSpec::udp6(a.src6, a.dst6, 50123, 4789)
                } else {
                    FrameSpec::udp4(a.src4, a.dst4, 50123, 4789)
                }
                .payload(vxlan_payload(42, &inner));
                if let L2Spec::Ethernet { src, dst, .. } = &mut o.l2 {
                    *src = a.src_mac;
                    *dst = a.dst_mac;
                }
                if let offload::build::IpSpec::V4(v) = &mut o.ip {
                    v.df = true;
                    v.id = 500 + i as u16;
                }
                o.build()
            }
            _ => {
                let (payload, proto) = match tunnel {
                    BigTcpTunnel::IpInIpv4 | BigTcpTunnel::IpInIpv6 => {
                        (inner, if inner_v6 { 41 } else { 4 })
                    }
                    _ => {
                        let eth = if teb {
                            inner
                        } else {
                            // `gre` takes an Ethernet frame and strips it.
                            let mut f = vec![0u8; 12];
                            f.extend_from_slice(if inner_v6 {
                                &[0x86, 0xdd]
                            } else {
                                &[0x08, 0x00]
                            });
                            f.extend_from_slice(&inner);
                            f
                        };
                        (gre(0x2000, teb, inner_v6, 42, &eth), 47)
                    }
                };
                outer_ip(a, tunnel.outer_v6(), proto, 500 + i as u16, &payload)
            }
        };
        frames.push(frame);
    }
    UdpTrain {
        seed: 0,
        class: tunnel.name(inner_v6),
        frames,
        notes: format!("{} BIG TCP: {segments} x {mss}", tunnel.name(inner_v6)),
    }
}

/// Ethernet and an outer IP header (IPv4: DF, ID `id`) of protocol
/// `proto` around `payload`.
fn outer_ip(a: &Addrs, v6: bool, proto: u8, id: u16, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(14 + 40 + payload.len());
    frame.extend_from_slice(&a.dst_mac);
    frame.extend_from_slice(&a.src_mac);
    if v6 {
        frame.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        frame.extend_from_slice(&[proto, 64]);
        frame.extend_from_slice(&a.src6);
        frame.extend_from_slice(&a.dst6);
    } else {
        frame.extend_from_slice(&[0x08, 0x00]);
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        h[6] = 0x40;
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&a.src4);
        h[16..20].copy_from_slice(&a.dst4);
        let c = checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        frame.extend_from_slice(&h);
    }
    frame.extend_from_slice(payload);
    frame
}
