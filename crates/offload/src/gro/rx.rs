//! The link and network layers of the receive path: `dev_gro_receive`,
//! `vlan_gro_receive`, `inet_gro_receive`, `ipv6_gro_receive`, and the
//! step through a tunnel header (its rules are `crate::tunnel`'s) that
//! leads back into them for the inner packet.
//!
//! Each layer either lets the frame pass untouched (the kernel's `goto out`
//! with `flush = 1` and no `pp`: the held packet of the flow is *not*
//! completed), or records what the next layer needs, including the L3
//! "flush" bit that forbids merging but still lets the transport layer find
//! and complete the held packet.

use super::{mac_len, FlushReason, GroEngine, Held, Input, Proto, Verdict};
use crate::layout::{Layout, OuterLayout};
use crate::link::{dissect_l2, L2Info};
use crate::tunnel::{self, UdpTunnel};
use crate::wire::ipv4::{self, Ipv4};
use crate::wire::ipv6::{self, next_header, Ipv6};
use crate::wire::{be16, be32, ip_proto, tcp, udp, IpVersion, Transport};

/// A frame as the transport layer sees it after L2 and L3.
#[derive(Debug, Clone, Copy)]
pub(super) struct Skb<'a> {
    pub input: &'a Input<'a>,
    pub l2: L2Info,
    pub mac_len: usize,
    /// Where the headers are (`l4_header_len` 0: the transport layer reads it).
    pub lay: Layout,
    /// `NAPI_GRO_CB(skb)->flush` as left by the network layer(s): an IP
    /// length that does not match the bytes (padding, truncation, length 0)
    /// or the reserved bit set.
    pub l3_flush: bool,
    /// `NAPI_GRO_CB(skb)->csum_cnt`: checksums still known good, outermost
    /// first ([`super::RxChecksum`]).
    pub csum_cnt: u16,
}

impl<'a> Skb<'a> {
    #[inline]
    pub(super) fn frame(&self) -> &'a [u8] {
        self.input.data
    }

    /// The statistics bucket of this frame.
    pub(super) fn proto(&self) -> Proto {
        Proto::of(self.lay.ip, Some(self.lay.l4_proto))
    }
}

/// The protocol after a network header that has a GRO handler
/// (`inet_offloads[]` / `inet6_offloads[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upper {
    /// TCP or UDP.
    L4(Transport),
    /// An IP header of this version: IPIP (4) and SIT (41) over IPv4,
    /// IPv4 in IPv6 (4) and IPv6 in IPv6 (41) (`ipip_offload`,
    /// `sit_offload`, `ip4ip6_offload`, `ip6ip6_offload`).
    Ip(IpVersion),
    /// GRE (47, `gre_offload`).
    Gre,
}

impl Upper {
    fn from_protocol(p: u8) -> Option<Upper> {
        match p {
            ip_proto::IPIP => Some(Upper::Ip(IpVersion::V4)),
            ip_proto::IPV6 => Some(Upper::Ip(IpVersion::V6)),
            ip_proto::GRE => Some(Upper::Gre),
            p => Transport::from_protocol(p).map(Upper::L4),
        }
    }

    /// The IP protocol number it was read from.
    fn protocol(self) -> u8 {
        match self {
            Upper::L4(t) => t.protocol(),
            Upper::Ip(IpVersion::V4) => ip_proto::IPIP,
            Upper::Ip(IpVersion::V6) => ip_proto::IPV6,
            Upper::Gre => ip_proto::GRE,
        }
    }

    /// The statistics bucket of a frame whose outermost header is `ip`.
    fn proto(self, ip: IpVersion) -> Proto {
        match self {
            Upper::L4(t) => Proto::of(ip, Some(t)),
            Upper::Ip(_) => Proto::IpInIp,
            Upper::Gre => Proto::Gre,
        }
    }
}

/// What the network layer found at an offset.
enum L3 {
    /// The frame passes: no GRO for it, held packets untouched.
    Pass(FlushReason, Proto),
    /// Continue at the next layer, which starts at `next_off`.
    Next {
        ip: IpVersion,
        next_off: usize,
        upper: Upper,
        flush: bool,
    },
}

/// `inet_gro_receive` / `ipv6_gro_receive` early checks at `off`.
fn network_layer(f: &[u8], ethertype: u16, off: usize) -> L3 {
    match IpVersion::from_ethertype(ethertype) {
        Some(IpVersion::V4) => {
            if f.len() < off + ipv4::MIN_HEADER_LEN {
                return L3::Pass(FlushReason::Malformed, Proto::Other);
            }
            let ip = Ipv4::new_unchecked(&f[off..]);
            let Some(upper) = Upper::from_protocol(ip.protocol()) else {
                return L3::Pass(FlushReason::UnsupportedProtocol, Proto::Other);
            };
            let stat = upper.proto(IpVersion::V4);
            let ver_ihl = f[off + ipv4::field::VERSION_IHL];
            if ver_ihl != ipv4::VERSION_IHL_NO_OPTIONS {
                let reason = if ver_ihl >> 4 == 4 && ip.header_len() > ipv4::MIN_HEADER_LEN {
                    FlushReason::IpOptions
                } else {
                    FlushReason::Malformed
                };
                return L3::Pass(reason, stat);
            }
            let frag = ip.frag_word();
            if frag & (ipv4::MF | ipv4::OFFSET_MASK) != 0 {
                return L3::Pass(FlushReason::Fragment, stat);
            }
            if crate::checksum::checksum(&f[off..off + ipv4::MIN_HEADER_LEN]) != 0 {
                return L3::Pass(FlushReason::BadIpChecksum, stat);
            }
            // `(u16)((word0 ^ skb_gro_len) | (frag_off & ~IP_DF))`: only the
            // low 16 bits of the byte count are compared with the length.
            let avail = (f.len() - off) as u32;
            let flush = ((ip.total_len() as u32 ^ avail) & 0xffff) != 0 || frag & !ipv4::DF != 0;
            L3::Next {
                ip: IpVersion::V4,
                next_off: off + ipv4::MIN_HEADER_LEN,
                upper,
                flush,
            }
        }
        Some(IpVersion::V6) => {
            let hlen = off + ipv6::HEADER_LEN;
            if f.len() < hlen {
                return L3::Pass(FlushReason::Malformed, Proto::Other);
            }
            let ip = Ipv6::new_unchecked(&f[off..]);
            let flush = ip.payload_len() as usize != f.len() - hlen;
            // `ipv6_gro_pull_exthdrs`: skip Hop-by-Hop, Routing and
            // Destination Options (no count limit); stop at anything else
            // or at a header that does not fit.
            let chain = ipv6::walk_ext_headers(&f[off..], usize::MAX);
            let Some(upper) = Upper::from_protocol(chain.upper) else {
                let reason = match chain.upper {
                    next_header::FRAGMENT => FlushReason::Fragment,
                    p if ipv6::is_skipped_ext(p) => FlushReason::Malformed,
                    _ => FlushReason::UnsupportedProtocol,
                };
                return L3::Pass(reason, Proto::Other);
            };
            L3::Next {
                ip: IpVersion::V6,
                next_off: off + chain.upper_offset,
                upper,
                flush,
            }
        }
        None => L3::Pass(FlushReason::NotIp, Proto::Other),
    }
}

impl GroEngine {
    /// Classifies a frame and runs the protocol's GRO. Completed held
    /// packets are delivered through `out` before this returns.
    pub(super) fn classify<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        csum_cnt: u16,
        out: &mut F,
    ) -> (Verdict, Proto) {
        let f = input.data;
        if (f.len() as u64) < input.orig_len as u64 {
            return (
                Verdict::Pass(FlushReason::CaptureTruncated),
                guess_proto(input),
            );
        }
        let Ok(l2) = dissect_l2(input.link, f) else {
            return (Verdict::Pass(FlushReason::Malformed), Proto::Other);
        };
        if l2.outgoing {
            return (Verdict::Pass(FlushReason::Outgoing), guess_proto(input));
        }
        if l2.vlan_tags > 0 {
            if !self.cfg.vlan_gro {
                return (
                    Verdict::Pass(FlushReason::VlanNotOffloaded),
                    guess_proto(input),
                );
            }
            // Only 802.1Q and 802.1ad have a VLAN packet offload.
            if !l2.vlan_tpids_offloaded {
                return (Verdict::Pass(FlushReason::NotIp), Proto::Other);
            }
        }
        let (ip, next_off, upper, flush) = match network_layer(f, l2.ethertype, l2.l3_offset) {
            L3::Pass(r, p) => return (Verdict::Pass(r), p),
            L3::Next {
                ip,
                next_off,
                upper,
                flush,
            } => (ip, next_off, upper, flush),
        };
        let stat = upper.proto(ip);
        let skb = Skb {
            input,
            l2,
            mac_len: mac_len(input.link, &l2),
            lay: Layout {
                l3_off: l2.l3_offset,
                ip,
                l4_off: next_off,
                // Replaced by the inner transport for tunnels.
                l4_proto: match upper {
                    Upper::L4(t) => t,
                    _ => Transport::Udp,
                },
                l4_header_len: 0,
                end: f.len(),
                jumbo_hbh: false,
                outer: None,
            },
            l3_flush: flush,
            csum_cnt,
        };
        match upper {
            Upper::L4(Transport::Tcp) => (self.tcp_receive(&skb, out), stat),
            Upper::L4(Transport::Udp) => {
                let dport = f
                    .get(next_off + udp::field::DST_PORT.start..next_off + udp::field::DST_PORT.end)
                    .map(|_| be16(f, next_off + udp::field::DST_PORT.start));
                let tunnel = dport.and_then(|p| {
                    tunnel::udp_tunnel_on(p, &self.cfg.vxlan_ports, &self.cfg.geneve_ports)
                });
                let stat = match tunnel {
                    Some(UdpTunnel::Vxlan) => Proto::Vxlan,
                    Some(UdpTunnel::Geneve) => Proto::Geneve,
                    None => stat,
                };
                (self.udp_receive(&skb, out), stat)
            }
            Upper::Ip(_) | Upper::Gre => (self.ip_tunnel_receive(&skb, upper, out), stat),
        }
    }

    /// `udp_gro_receive` on the tunnel path: the UDP tunnel `kind`'s header
    /// (`vxlan_gro_receive`, `geneve_gro_receive`: its rules are in
    /// `crate::tunnel`), then the inner packet. `skb` describes the outer
    /// headers.
    pub(super) fn udp_tunnel_receive<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        kind: UdpTunnel,
        out: &mut F,
    ) -> Verdict {
        let parsed = tunnel::parse_udp(
            kind,
            skb.frame(),
            skb.lay.l3_off,
            skb.lay.ip,
            skb.lay.l4_off,
        );
        self.tunnel_receive(skb, parsed, out)
    }

    /// The tunnels after a network header (`ipip_gro_receive`,
    /// `sit_ip6ip6_gro_receive`, `ip4ip6_gro_receive`, `gre_gro_receive`:
    /// their rules are in `crate::tunnel`), then the inner packet. `skb`
    /// describes the outer header.
    fn ip_tunnel_receive<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        upper: Upper,
        out: &mut F,
    ) -> Verdict {
        let f = skb.frame();
        let (l3, ip) = (skb.lay.l3_off, skb.lay.ip);
        let proto = upper.protocol();
        let verify = !skb.l3_flush && self.cfg.verify_checksums;
        match tunnel::parse_ip(proto, f, l3, ip, skb.lay.l4_off, verify) {
            Some(parsed) => self.tunnel_receive(skb, parsed, out),
            None => Verdict::Pass(FlushReason::UnsupportedProtocol),
        }
    }

    /// A tunnel header read by its rules: the packet inside, or the
    /// refusal's flush reason.
    #[inline]
    fn tunnel_receive<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        parsed: Result<(OuterLayout, u16), tunnel::Refusal>,
        out: &mut F,
    ) -> Verdict {
        match parsed {
            Ok((outer, inner_type)) => self.tunnel_inner(skb, outer, inner_type, out),
            Err(r) => Verdict::Pass(FlushReason::of_tunnel(r)),
        }
    }

    /// The packet inside a tunnel: `eth_gro_receive` for tunnels that carry
    /// Ethernet (its header is compared in [`same_flow`]), then
    /// `inet_gro_receive` / `ipv6_gro_receive` and the transport with
    /// `encap_mark` set. A second tunnel inside passes (`encap_mark`).
    fn tunnel_inner<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        outer: OuterLayout,
        inner_type: u16,
        out: &mut F,
    ) -> Verdict {
        if skb.lay.outer.is_some() {
            return Verdict::Pass(FlushReason::NestedTunnel);
        }
        let f = skb.frame();
        let inner_l3 = outer.inner_l3_off();
        let (ip, l4_off, upper, flush) = match network_layer(f, inner_type, inner_l3) {
            L3::Pass(r, _) => return Verdict::Pass(r),
            L3::Next {
                ip,
                next_off,
                upper,
                flush,
            } => (ip, next_off, upper, flush),
        };
        let Upper::L4(proto) = upper else {
            return Verdict::Pass(FlushReason::NestedTunnel);
        };
        let inner = Skb {
            lay: Layout {
                l3_off: inner_l3,
                ip,
                l4_off,
                l4_proto: proto,
                outer: Some(outer),
                ..skb.lay
            },
            l3_flush: skb.l3_flush || flush,
            ..*skb
        };
        match proto {
            Transport::Tcp => self.tcp_receive(&inner, out),
            Transport::Udp => self.udp_receive(&inner, out),
        }
    }

    /// The first held packet of the same flow: `gro_list_prepare` (link
    /// header), the network layers' same-flow loops, the tunnel layers'
    /// port/checksum/VNI/inner-Ethernet checks and the transport ports.
    /// Held packets whose flow hash differs are rejected with one compare
    /// of the table's hot line; the full comparison runs for the others.
    pub(super) fn lookup(&self, skb: &Skb<'_>) -> Option<super::table::Slot> {
        self.lookup_hashed(skb).0
    }

    /// [`Self::lookup`], also returning the frame's flow hash, so that
    /// holding the frame next does not hash it again.
    #[inline]
    pub(super) fn lookup_hashed(&self, skb: &Skb<'_>) -> (Option<super::table::Slot>, u32) {
        let f = skb.frame();
        let hash = flow_hash(skb);
        (self.held.find(hash, |p| same_flow(p, skb, f)), hash)
    }
}

/// Compares two short byte strings (header fields, a few tens of bytes)
/// 8 bytes at a time, inline, without a `memcmp` call: the XOR of every
/// word pair is OR-ed and tested once.
#[inline(always)]
pub(super) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    if n < 8 {
        return a == b;
    }
    let w = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let mut diff = 0u64;
    let mut at = 0;
    while at + 8 <= n {
        diff |= w(a, at) ^ w(b, at);
        at += 8;
    }
    // The tail as one overlapping word.
    diff |= w(a, n - 8) ^ w(b, n - 8);
    diff == 0
}

/// One word's term of the flow hash: the word, made position-dependent,
/// times an odd constant. Terms are independent of each other (added, not
/// chained), so the multiplies of a frame's words run in parallel.
#[inline(always)]
fn term(w: u64, i: u64) -> u64 {
    (w ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd)
}

/// Reads up to 8 bytes of `b` from `at` as a little-endian word (the hash
/// only needs equal bytes to give equal words).
#[inline(always)]
fn word(b: &[u8], at: usize, n: usize) -> u64 {
    if n == 8 {
        return u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    }
    if n == 4 {
        return u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as u64;
    }
    let mut w = [0u8; 8];
    w[..n].copy_from_slice(&b[at..at + n]);
    u64::from_le_bytes(w)
}

/// Hashes the bytes that [`same_flow`] requires to be equal: the link
/// header key, the offsets, the innermost addresses and ports, and for a
/// tunnel the outer addresses and UDP ports. Two frames of one
/// flow always hash alike, so comparing hashes first never hides a match
/// (`gro_list_prepare` compares `skb_get_hash_raw` first for the same reason).
#[inline]
pub(super) fn flow_hash(skb: &Skb<'_>) -> u32 {
    let lay = &skb.lay;
    flow_hash_parts(
        skb.frame(),
        skb.input.link,
        skb.l2.key_len,
        lay.l3_off,
        lay.l4_off,
        lay.ip,
        lay.outer,
    )
}

/// [`flow_hash`] from its parts (the fast path computes it before any
/// classification, for the layout a plain TCP frame has).
#[inline(always)]
pub(super) fn flow_hash_parts(
    f: &[u8],
    link: crate::link::LinkKind,
    key_len: usize,
    l3_off: usize,
    l4_off: usize,
    ip: IpVersion,
    outer: Option<OuterLayout>,
) -> u32 {
    let mut h = term(
        (link as u64) << 48 | (key_len as u64) << 32 | (l3_off as u64) << 16 | l4_off as u64,
        0,
    );
    let key = &f[..key_len];
    if key.len() >= 8 {
        let mut at = 0;
        while at + 8 <= key.len() {
            h = h.wrapping_add(term(word(key, at, 8), 1 + at as u64));
            at += 8;
        }
        // The tail as one overlapping word.
        h = h.wrapping_add(term(word(key, key.len() - 8, 8), 17));
    } else {
        h = h.wrapping_add(term(word(key, 0, key.len()), 1));
    }
    if let Some(o) = outer {
        h = addrs(h, f, o.l3_off, o.ip, 20);
        if let Some(u) = o.udp_off() {
            h = h.wrapping_add(term(word(f, u + udp::field::PORTS.start, 4), 24));
        }
    }
    h = addrs(h, f, l3_off, ip, 30);
    // The transport ports (`udp_gro_lookup`/`tcp_gro_lookup` compare them).
    if f.len() >= l4_off + 4 {
        h = h.wrapping_add(term(word(f, l4_off, 4), 40));
    }
    super::table::held_hash((h >> 32) as u32 ^ h as u32)
}

/// [`flow_hash_parts`]' terms of the addresses of the IP header at `l3`
/// (`i`: the first term's position).
#[inline(always)]
fn addrs(h: u64, f: &[u8], l3: usize, ip: IpVersion, i: u64) -> u64 {
    match ip {
        IpVersion::V4 => h.wrapping_add(term(word(f, l3 + ipv4::field::ADDRS.start, 8), i)),
        IpVersion::V6 => {
            let a = l3 + ipv6::field::ADDRS.start;
            h.wrapping_add(term(word(f, a, 8), i))
                .wrapping_add(term(word(f, a + 8, 8), i + 1))
                .wrapping_add(term(word(f, a + 16, 8), i + 2))
                .wrapping_add(term(word(f, a + 24, 8), i + 3))
        }
    }
}

/// Invariant (relied on by `tcp_flush_term` and `network_flush`, which
/// slice the held packet at the new frame's offsets): `true` only when
/// the link key, the tunnel layout and the network and transport header
/// offsets of `p` and `skb` are equal. Checked first, before any byte is
/// compared.
fn same_flow(p: &Held, skb: &Skb<'_>, f: &[u8]) -> bool {
    let (a, b) = (&p.lay, &skb.lay);
    if p.link != skb.input.link
        || p.l2_key_len != skb.l2.key_len
        || !bytes_eq(&p.data[..p.l2_key_len], &f[..skb.l2.key_len])
        || a.outer != b.outer
        || a.ip != b.ip
        || a.l3_off != b.l3_off
        || a.l4_off != b.l4_off
    {
        return false;
    }
    if let Some(o) = b.outer {
        let nlen = o.encap_off - o.l3_off;
        if !same_l3(&p.data[o.l3_off..], &f[o.l3_off..], o.ip, nlen) {
            return false;
        }
        if !tunnel::same_flow(&p.data, f, &o) {
            return false;
        }
    }
    let nlen = b.l4_off - b.l3_off;
    same_l3(&p.data[b.l3_off..], &f[b.l3_off..], b.ip, nlen)
        && be32(&p.data, a.l4_off + tcp::field::PORTS.start)
            == be32(f, b.l4_off + tcp::field::PORTS.start)
}

/// The network layer's same-flow test for headers `a` (held) and `b`
/// (`inet_gro_receive` / `ipv6_gro_receive`): IPv4 protocol and addresses;
/// IPv6 version, flow label, addresses, next header and the extension
/// headers (the traffic class is left to the flush checks).
fn same_l3(a: &[u8], b: &[u8], ip: IpVersion, nlen: usize) -> bool {
    match ip {
        IpVersion::V6 => {
            let mask = ipv6::first_word::VERSION | ipv6::first_word::FLOW_LABEL;
            (be32(a, 0) ^ be32(b, 0)) & mask == 0
                && bytes_eq(&a[ipv6::field::ADDRS], &b[ipv6::field::ADDRS])
                && a[ipv6::field::NEXT_HEADER] == b[ipv6::field::NEXT_HEADER]
                && (nlen <= ipv6::HEADER_LEN
                    || a.get(ipv6::HEADER_LEN..nlen)
                        .is_some_and(|x| bytes_eq(x, &b[ipv6::HEADER_LEN..nlen])))
        }
        IpVersion::V4 => {
            a[ipv4::field::PROTOCOL] == b[ipv4::field::PROTOCOL]
                && bytes_eq(&a[ipv4::field::ADDRS], &b[ipv4::field::ADDRS])
        }
    }
}

/// A best-effort transport guess for statistics of frames GRO skips.
fn guess_proto(input: &Input<'_>) -> Proto {
    let Ok(l2) = dissect_l2(input.link, input.data) else {
        return Proto::Other;
    };
    let f = input.data;
    let at = l2.l3_offset;
    match IpVersion::from_ethertype(l2.ethertype) {
        Some(IpVersion::V4) if f.len() > at + ipv4::field::PROTOCOL => Proto::of(
            IpVersion::V4,
            Transport::from_protocol(f[at + ipv4::field::PROTOCOL]),
        ),
        Some(IpVersion::V6) if f.len() > at + ipv6::field::NEXT_HEADER => Proto::of(
            IpVersion::V6,
            Transport::from_protocol(f[at + ipv6::field::NEXT_HEADER]),
        ),
        _ => Proto::Other,
    }
}
