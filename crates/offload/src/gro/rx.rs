//! The link and network layers of the receive path: `dev_gro_receive`,
//! `vlan_gro_receive`, `inet_gro_receive`, `ipv6_gro_receive`, and the
//! UDP tunnel layers (`udp_gro_receive` → `vxlan_gro_receive` →
//! `eth_gro_receive`) that lead back into them for the inner packet.
//!
//! Each layer either lets the frame pass untouched (the kernel's `goto out`
//! with `flush = 1` and no `pp`: the held packet of the flow is *not*
//! completed), or records what the next layer needs, including the L3
//! "flush" bit that forbids merging but still lets the transport layer find
//! and complete the held packet.

use super::{mac_len, FlushReason, GroEngine, Held, Input, Proto, Verdict};
use crate::link::{dissect_l2, L2Info};
use crate::wire::ethernet::ethertype;
use crate::wire::ipv6::next_header;
use crate::wire::{be16, be32, ipv4};

pub(super) const TCP: u8 = 6;
pub(super) const UDP: u8 = 17;
/// VXLAN header (8) + inner Ethernet header (14).
pub(super) const VXLAN_AND_INNER_ETH: usize = 8 + 14;

/// The outer headers of a VXLAN-encapsulated frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outer {
    pub l3_off: usize,
    pub v6: bool,
    /// Offset of the outer UDP header; VXLAN follows at +8, the inner
    /// Ethernet header at +16.
    pub udp_off: usize,
}

/// A frame as the transport layer sees it after L2 and L3.
#[derive(Debug, Clone, Copy)]
pub(super) struct Skb<'a> {
    pub input: &'a Input<'a>,
    pub l2: L2Info,
    pub mac_len: usize,
    /// Tunnel headers, when the frame is VXLAN-encapsulated.
    pub outer: Option<Outer>,
    /// The innermost network header.
    pub l3_off: usize,
    pub v6: bool,
    /// The innermost transport header.
    pub l4_off: usize,
    /// `NAPI_GRO_CB(skb)->flush` as left by the network layer(s): an IP
    /// length that does not match the bytes (padding, truncation, length 0)
    /// or the reserved bit set.
    pub l3_flush: bool,
}

impl<'a> Skb<'a> {
    #[inline]
    pub fn frame(&self) -> &'a [u8] {
        self.input.data
    }

    /// The statistics bucket of this frame.
    pub fn proto(&self, l4: u8) -> Proto {
        match (l4, self.v6) {
            (TCP, false) => Proto::Tcp4,
            (TCP, true) => Proto::Tcp6,
            (UDP, false) => Proto::Udp4,
            (UDP, true) => Proto::Udp6,
            _ => Proto::Other,
        }
    }
}

/// What the network layer found at an offset.
enum L3 {
    /// The frame passes: no GRO for it, held packets untouched.
    Pass(FlushReason, Proto),
    /// Continue at the transport layer.
    Next {
        v6: bool,
        l4_off: usize,
        proto: u8,
        flush: bool,
    },
}

/// `inet_gro_receive` / `ipv6_gro_receive` early checks at `off`.
fn network_layer(f: &[u8], ethertype: u16, off: usize) -> L3 {
    match ethertype {
        ethertype::IPV4 => {
            if f.len() < off + ipv4::MIN_HEADER_LEN {
                return L3::Pass(FlushReason::Malformed, Proto::Other);
            }
            let proto = f[off + 9];
            let stat = match proto {
                TCP => Proto::Tcp4,
                UDP => Proto::Udp4,
                _ => Proto::Other,
            };
            if proto != TCP && proto != UDP {
                return L3::Pass(FlushReason::UnsupportedProtocol, stat);
            }
            if f[off] != 0x45 {
                let reason = if f[off] >> 4 == 4 && f[off] & 0x0f > 5 {
                    FlushReason::IpOptions
                } else {
                    FlushReason::Malformed
                };
                return L3::Pass(reason, stat);
            }
            let frag = be16(f, off + 6);
            if frag & (ipv4::MF | ipv4::OFFSET_MASK) != 0 {
                return L3::Pass(FlushReason::Fragment, stat);
            }
            if crate::checksum::checksum(&f[off..off + ipv4::MIN_HEADER_LEN]) != 0 {
                return L3::Pass(FlushReason::BadIpChecksum, stat);
            }
            // `(u16)((word0 ^ skb_gro_len) | (frag_off & ~IP_DF))`: only the
            // low 16 bits of the byte count are compared with the length.
            let avail = (f.len() - off) as u32;
            let flush = ((be16(f, off + 2) as u32 ^ avail) & 0xffff) != 0 || frag & !ipv4::DF != 0;
            L3::Next {
                v6: false,
                l4_off: off + ipv4::MIN_HEADER_LEN,
                proto,
                flush,
            }
        }
        ethertype::IPV6 => {
            let hlen = off + 40;
            if f.len() < hlen {
                return L3::Pass(FlushReason::Malformed, Proto::Other);
            }
            let flush = be16(f, off + 4) as usize != f.len() - hlen;
            let mut proto = f[off + 6];
            let mut l4_off = hlen;
            if proto != TCP && proto != UDP {
                // `ipv6_gro_pull_exthdrs`: skip Hop-by-Hop, Routing and
                // Destination Options; stop at anything else or at a
                // header that does not fit.
                while matches!(
                    proto,
                    next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS
                ) {
                    if f.len() < l4_off + 2 {
                        break;
                    }
                    let len = (f[l4_off + 1] as usize + 1) * 8;
                    if f.len() < l4_off + len {
                        break;
                    }
                    proto = f[l4_off];
                    l4_off += len;
                }
            }
            let stat = match proto {
                TCP => Proto::Tcp6,
                UDP => Proto::Udp6,
                _ => Proto::Other,
            };
            if proto != TCP && proto != UDP {
                let reason = match proto {
                    next_header::FRAGMENT => FlushReason::Fragment,
                    next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS => {
                        FlushReason::Malformed
                    }
                    _ => FlushReason::UnsupportedProtocol,
                };
                return L3::Pass(reason, stat);
            }
            L3::Next {
                v6: true,
                l4_off,
                proto,
                flush,
            }
        }
        _ => L3::Pass(FlushReason::NotIp, Proto::Other),
    }
}

impl GroEngine {
    /// Classifies a frame and runs the protocol's GRO. Completed held
    /// packets are delivered through `out` before this returns.
    pub(super) fn classify<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
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
            if !vlan_tpids_offloaded(f, &l2) {
                return (Verdict::Pass(FlushReason::NotIp), Proto::Other);
            }
        }
        let (v6, l4_off, proto, flush) = match network_layer(f, l2.ethertype, l2.l3_offset) {
            L3::Pass(r, p) => return (Verdict::Pass(r), p),
            L3::Next {
                v6,
                l4_off,
                proto,
                flush,
            } => (v6, l4_off, proto, flush),
        };
        let skb = Skb {
            input,
            l2,
            mac_len: mac_len(input.link, &l2),
            outer: None,
            l3_off: l2.l3_offset,
            v6,
            l4_off,
            l3_flush: flush,
        };
        let mut stat = skb.proto(proto);
        if proto == UDP
            && f.len() >= l4_off + 4
            && self.cfg.vxlan_ports.contains(&be16(f, l4_off + 2))
        {
            stat = Proto::Vxlan;
        }
        if proto == TCP {
            return (self.tcp_receive(&skb, out), stat);
        }
        (self.udp_receive(&skb, out), stat)
    }

    /// `udp_gro_receive` on the tunnel path: VXLAN, inner Ethernet, inner
    /// IP, then the inner transport. `skb` describes the outer headers.
    pub(super) fn vxlan_receive<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        out: &mut F,
    ) -> Verdict {
        let f = skb.frame();
        let udp_off = skb.l4_off;
        let inner_eth = udp_off + 16;
        // vxlan_gro_prepare_receive / eth_gro_receive pull their headers.
        if f.len() < inner_eth + 14 {
            return Verdict::Pass(FlushReason::Malformed);
        }
        let inner_type = be16(f, inner_eth + 12);
        let (v6, l4_off, proto, flush) = match network_layer(f, inner_type, inner_eth + 14) {
            L3::Pass(r, _) => return Verdict::Pass(r),
            L3::Next {
                v6,
                l4_off,
                proto,
                flush,
            } => (v6, l4_off, proto, flush),
        };
        let inner = Skb {
            outer: Some(Outer {
                l3_off: skb.l3_off,
                v6: skb.v6,
                udp_off,
            }),
            l3_off: inner_eth + 14,
            v6,
            l4_off,
            l3_flush: skb.l3_flush || flush,
            ..*skb
        };
        if proto == TCP {
            self.tcp_receive(&inner, out)
        } else {
            self.udp_receive(&inner, out)
        }
    }

    /// The first held packet of the same flow: `gro_list_prepare` (link
    /// header), the network layers' same-flow loops, the tunnel layers'
    /// port/checksum/VNI/inner-Ethernet checks and the transport ports.
    pub(super) fn lookup(&self, skb: &Skb<'_>) -> Option<usize> {
        let f = skb.frame();
        self.held.iter().position(|p| same_flow(p, skb, f))
    }
}

fn same_flow(p: &Held, skb: &Skb<'_>, f: &[u8]) -> bool {
    if p.link != skb.input.link
        || p.l2_key_len != skb.l2.key_len
        || p.data[..p.l2_key_len] != f[..skb.l2.key_len]
        || p.outer != skb.outer
        || p.v6 != skb.v6
        || p.l3_off != skb.l3_off
        || p.l4_off != skb.l4_off
    {
        return false;
    }
    if let Some(o) = skb.outer {
        let nlen = o.udp_off - o.l3_off;
        if !same_l3(&p.data[o.l3_off..], &f[o.l3_off..], o.v6, nlen) {
            return false;
        }
        let (a, b) = (&p.data[o.udp_off..], &f[o.udp_off..]);
        // Ports, and both checksums zero or both non-zero.
        if be32(a, 0) != be32(b, 0) || (be16(a, 6) == 0) != (be16(b, 6) == 0) {
            return false;
        }
        let v = o.udp_off + 8;
        if p.data[v..v + VXLAN_AND_INNER_ETH] != f[v..v + VXLAN_AND_INNER_ETH] {
            return false;
        }
    }
    let nlen = skb.l4_off - skb.l3_off;
    same_l3(&p.data[skb.l3_off..], &f[skb.l3_off..], skb.v6, nlen)
        && be32(&p.data, p.l4_off) == be32(f, skb.l4_off)
}

/// The network layer's same-flow test for headers `a` (held) and `b`.
fn same_l3(a: &[u8], b: &[u8], v6: bool, nlen: usize) -> bool {
    if v6 {
        (be32(a, 0) ^ be32(b, 0)) & 0xF00F_FFFF == 0
            && a[8..40] == b[8..40]
            && a[6] == b[6]
            && (nlen <= 40 || a.get(40..nlen) == Some(&b[40..nlen]))
    } else {
        a[9] == b[9] && a[12..20] == b[12..20]
    }
}

/// True when every VLAN tag of the frame uses a TPID with a GRO handler.
fn vlan_tpids_offloaded(f: &[u8], l2: &L2Info) -> bool {
    let first = l2.l3_offset - 4 * l2.vlan_tags as usize - 2;
    (0..l2.vlan_tags as usize).all(|i| {
        let tpid = be16(f, first + 4 * i);
        tpid == ethertype::VLAN || tpid == ethertype::QINQ
    })
}

/// A best-effort transport guess for statistics of frames GRO skips.
fn guess_proto(input: &Input<'_>) -> Proto {
    let Ok(l2) = dissect_l2(input.link, input.data) else {
        return Proto::Other;
    };
    let f = input.data;
    match l2.ethertype {
        ethertype::IPV4 if f.len() > l2.l3_offset + 9 => match f[l2.l3_offset + 9] {
            TCP => Proto::Tcp4,
            UDP => Proto::Udp4,
            _ => Proto::Other,
        },
        ethertype::IPV6 if f.len() > l2.l3_offset + 6 => match f[l2.l3_offset + 6] {
            TCP => Proto::Tcp6,
            UDP => Proto::Udp6,
            _ => Proto::Other,
        },
        _ => Proto::Other,
    }
}
