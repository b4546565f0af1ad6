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

    /// The kernel oracle's knobs for this tunnel's BIG TCP trains:
    /// `gro_max_size` = `gro_ipv4_max_size` = 185000, a flush timeout
    /// longer than any train, and the VXLAN device (port 4789, VNI 42,
    /// over IPv6 for [`BigTcpTunnel::Vxlan6`]) where the tunnel needs one.
    pub fn oracle_knobs(self) -> offload_lab::oracle::GroKnobs {
        offload_lab::oracle::GroKnobs {
            gro_max_size: 185_000,
            gro_ipv4_max_size: 185_000,
            flush_timeout: std::time::Duration::from_millis(400),
            vxlan: self.vxlan().then_some(offload_lab::oracle::VxlanConf {
                vni: 42,
                port: 4789,
            }),
            vxlan_ipv6: self == BigTcpTunnel::Vxlan6,
            ..offload_lab::oracle::GroKnobs::default()
        }
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

/// The shape of one inner TCP flow of a BIG TCP train: how many segments
/// of how many payload bytes, and after which segments the sender set PSH
/// (which completes the merge, `tcp_gro_receive`). Each shape puts merges
/// on a different side of a limit the kernel applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BigTcpShape {
    /// Name in reports.
    pub name: &'static str,
    pub segments: u32,
    pub mss: usize,
    /// PSH every this many segments (and on the last).
    pub psh_every: u32,
    /// When set, the last segment is shortened so that the whole flow,
    /// merged, has exactly this many bytes after the outer IP header.
    pub outer_payload: Option<usize>,
}

impl BigTcpShape {
    /// 100 x 1400: one merge of 140,000 bytes (past 64 KiB, below 185000).
    pub const ONE_BIG: BigTcpShape = BigTcpShape {
        name: "100x1400",
        segments: 100,
        mss: 1400,
        psh_every: 1000,
        outer_payload: None,
    };
    /// The shapes the suite runs on every line:
    /// - `ONE_BIG`;
    /// - 200 x 1400: the first merge stops at `gro_max_size` 185000
    ///   (`skb_gro_receive`, 132 segments), the second (68) passes 64 KiB;
    /// - 45 segments merging to an outer payload of exactly 65,535 bytes:
    ///   past `GRO_LEGACY_MAX_SIZE` counted from the outer IP header (only
    ///   BIG TCP merges it), yet the outer IPv6 payload length still fits
    ///   16 bits, so `ipv6_gro_complete` inserts no jumbo header: sound on
    ///   every line;
    /// - the same to 65,536 bytes: one byte more, the first size 6.18
    ///   loses through an IPv6-outer tunnel;
    /// - 48 x 1360, PSH every 24: merges below 64 KiB only.
    pub const ALL: [BigTcpShape; 5] = [
        BigTcpShape::ONE_BIG,
        BigTcpShape {
            name: "200x1400",
            segments: 200,
            mss: 1400,
            psh_every: 1000,
            outer_payload: None,
        },
        BigTcpShape {
            name: "outer-payload-65535",
            segments: 45,
            mss: 1460,
            psh_every: 1000,
            outer_payload: Some(65_535),
        },
        BigTcpShape {
            name: "outer-payload-65536",
            segments: 45,
            mss: 1460,
            psh_every: 1000,
            outer_payload: Some(65_536),
        },
        BigTcpShape {
            name: "48x1360/24",
            segments: 48,
            mss: 1360,
            psh_every: 24,
            outer_payload: None,
        },
    ];
}

/// One clean inner TCP flow of `shape` (DF, incrementing IDs, PSH as the
/// shape says) in `tunnel`: the BIG TCP case of `gro_max_size` 185000.
/// Outer IPv4 headers have DF and incrementing IDs.
pub fn big_tcp_train(
    a: &Addrs,
    tunnel: BigTcpTunnel,
    inner_v6: bool,
    shape: BigTcpShape,
) -> UdpTrain {
    use offload::build::{FrameSpec, L2Spec, TcpSpec};
    const IN4: ([u8; 4], [u8; 4]) = ([10, 48, 0, 2], [10, 48, 0, 1]);
    const IN6: ([u8; 16], [u8; 16]) = (
        [0xfd, 0x48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        [0xfd, 0x48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    );
    let BigTcpShape {
        segments,
        mss,
        psh_every,
        outer_payload,
        ..
    } = shape;
    let segment = |i: u32, seq: u32, len: usize| {
        let mut tcp = TcpSpec::data(40100, 5201, seq);
        if i + 1 == segments || (i + 1).is_multiple_of(psh_every) {
            tcp.flags |= offload::wire::tcp::flags::PSH;
        }
        let mut s = if inner_v6 {
            FrameSpec::tcp6(IN6.0, IN6.1, tcp)
        } else {
            let mut s = FrameSpec::tcp4(IN4.0, IN4.1, tcp);
            s.v4_mut().id = 1000 + i as u16;
            s
        }
        .payload(vec![(i % 251) as u8; len]);
        if let L2Spec::Ethernet { src, dst, .. } = &mut s.l2 {
            *src = [0x02, 0x48, 0, 0, 0, 2];
            *dst = [0x02, 0x48, 0, 0, 0, 1];
        }
        s.build()
    };
    // The last segment's length: what the headers after the outer IP
    // header (measured on an empty segment) leave of `outer_payload`.
    let last = outer_payload.map(|target| {
        let empty = &wrap_in_tunnel(a, tunnel, &[segment(0, 1, 0)])[0];
        let headers = empty.len() - 14 - if tunnel.outer_v6() { 40 } else { 20 };
        target - headers - (segments as usize - 1) * mss
    });
    let mut seq = 1u32;
    let inner: Vec<Vec<u8>> = (0..segments)
        .map(|i| {
            let len = match last {
                Some(l) if i + 1 == segments => l,
                _ => mss,
            };
            let f = segment(i, seq, len);
            seq += len as u32;
            f
        })
        .collect();
    UdpTrain {
        seed: 0,
        class: tunnel.name(inner_v6),
        frames: wrap_in_tunnel(a, tunnel, &inner),
        notes: format!(
            "{} BIG TCP: {} ({segments} x {mss}, PSH every {psh_every})",
            tunnel.name(inner_v6),
            shape.name
        ),
    }
}

/// `inner` (Ethernet frames carrying IPv4 or IPv6, e.g. a capture of a
/// kernel's TCP connection) carried in `tunnel` from `a`'s source to its
/// destination, as a tunnel endpoint sends them: VXLAN (VNI 42, port
/// 4789, one UDP source port, outer UDP checksum) and gretap keep the
/// inner Ethernet header, the others carry the IP packet (IPIP/SIT or
/// ip4ip6/ip6ip6 by the inner version; GRE with key 42). Outer IPv4
/// headers have DF and IDs counting up from 500, one per frame.
pub fn wrap_in_tunnel(a: &Addrs, tunnel: BigTcpTunnel, inner: &[Vec<u8>]) -> Vec<Vec<u8>> {
    use offload::build::{vxlan_payload, FrameSpec, L2Spec};
    let teb = matches!(tunnel, BigTcpTunnel::Gretap4) || tunnel.vxlan();
    inner
        .iter()
        .enumerate()
        .map(|(i, eth)| {
            let inner_v6 = eth.get(12..14) == Some(&[0x86, 0xdd][..]);
            let id = 500u16.wrapping_add(i as u16);
            match tunnel {
                BigTcpTunnel::Vxlan4 | BigTcpTunnel::Vxlan6 => {
                    let mut o = if tunnel.outer_v6() {
                        FrameSpec::udp6(a.src6, a.dst6, 50123, 4789)
                    } else {
                        FrameSpec::udp4(a.src4, a.dst4, 50123, 4789)
                    }
                    .payload(vxlan_payload(42, eth));
                    if let L2Spec::Ethernet { src, dst, .. } = &mut o.l2 {
                        *src = a.src_mac;
                        *dst = a.dst_mac;
                    }
                    if let offload::build::IpSpec::V4(v) = &mut o.ip {
                        v.df = true;
                        v.id = id;
                    }
                    o.build()
                }
                _ => {
                    let (payload, proto) = match tunnel {
                        BigTcpTunnel::IpInIpv4 | BigTcpTunnel::IpInIpv6 => {
                            (eth[14..].to_vec(), if inner_v6 { 41 } else { 4 })
                        }
                        // `gre` strips the Ethernet header unless `teb`.
                        _ => (gre(0x2000, teb, inner_v6, 42, eth), 47),
                    };
                    outer_ip(a, tunnel.outer_v6(), proto, id, &payload)
                }
            }
        })
        .collect()
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
