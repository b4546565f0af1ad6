//! The link and network layers of the receive path: `dev_gro_receive`,
//! `vlan_gro_receive`, `inet_gro_receive` and `ipv6_gro_receive`.
//!
//! Each layer either lets the frame pass untouched (the kernel's `goto out`
//! with `flush = 1` and no `pp`: the held packet of the flow is *not*
//! completed), or records what the next layer needs, including the L3
//! "flush" bit that forbids merging but still lets the transport layer find
//! and complete the held packet.

use super::{mac_len, FlushReason, GroEngine, Input, Proto, Verdict};
use crate::link::{dissect_l2, L2Info};
use crate::wire::ethernet::ethertype;
use crate::wire::ipv6::next_header;
use crate::wire::{be16, ipv4};

/// A frame as the transport layer sees it after L2 and L3.
#[derive(Debug, Clone, Copy)]
pub(super) struct Skb<'a> {
    pub input: &'a Input<'a>,
    pub l2: L2Info,
    pub mac_len: usize,
    pub l3_off: usize,
    pub v6: bool,
    pub l4_off: usize,
    /// `NAPI_GRO_CB(skb)->flush` as left by the network layer: the IP
    /// length does not match the bytes (padding, truncation, length 0) or
    /// the reserved bit is set.
    pub l3_flush: bool,
}

impl<'a> Skb<'a> {
    #[inline]
    pub fn frame(&self) -> &'a [u8] {
        self.input.data
    }
}

const TCP: u8 = 6;

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
        // Only 802.1Q and 802.1ad have a VLAN packet offload.
        if l2.vlan_tags > 0 && !vlan_tpids_offloaded(f, &l2) {
            return (Verdict::Pass(FlushReason::NotIp), Proto::Other);
        }
        let mac_len = mac_len(input.link, &l2);
        match l2.ethertype {
            ethertype::IPV4 => self.ipv4(input, l2, mac_len, out),
            ethertype::IPV6 => self.ipv6(input, l2, mac_len, out),
            _ => (Verdict::Pass(FlushReason::NotIp), Proto::Other),
        }
    }

    /// `inet_gro_receive`.
    fn ipv4<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        l2: L2Info,
        mac_len: usize,
        out: &mut F,
    ) -> (Verdict, Proto) {
        let f = input.data;
        let off = l2.l3_offset;
        if f.len() < off + ipv4::MIN_HEADER_LEN {
            return (Verdict::Pass(FlushReason::Malformed), Proto::Other);
        }
        let proto = f[off + 9];
        let stat = match proto {
            TCP => Proto::Tcp4,
            17 => Proto::Udp4,
            _ => Proto::Other,
        };
        if proto != TCP {
            return (Verdict::Pass(FlushReason::UnsupportedProtocol), stat);
        }
        if f[off] != 0x45 {
            let reason = if f[off] >> 4 == 4 && f[off] & 0x0f > 5 {
                FlushReason::IpOptions
            } else {
                FlushReason::Malformed
            };
            return (Verdict::Pass(reason), stat);
        }
        let frag = be16(f, off + 6);
        if frag & (ipv4::MF | ipv4::OFFSET_MASK) != 0 {
            return (Verdict::Pass(FlushReason::Fragment), stat);
        }
        if crate::checksum::checksum(&f[off..off + ipv4::MIN_HEADER_LEN]) != 0 {
            return (Verdict::Pass(FlushReason::BadIpChecksum), stat);
        }
        // `(u16)((word0 ^ skb_gro_len) | (frag_off & ~IP_DF))`: only the low
        // 16 bits of the byte count are compared with the length field.
        let avail = (f.len() - off) as u32;
        let l3_flush = ((be16(f, off + 2) as u32 ^ avail) & 0xffff) != 0 || frag & !ipv4::DF != 0;
        let skb = Skb {
            input,
            l2,
            mac_len,
            l3_off: off,
            v6: false,
            l4_off: off + ipv4::MIN_HEADER_LEN,
            l3_flush,
        };
        (self.tcp_receive(&skb, out), stat)
    }

    /// `ipv6_gro_receive`.
    fn ipv6<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        l2: L2Info,
        mac_len: usize,
        out: &mut F,
    ) -> (Verdict, Proto) {
        let f = input.data;
        let off = l2.l3_offset;
        let hlen = off + 40;
        if f.len() < hlen {
            return (Verdict::Pass(FlushReason::Malformed), Proto::Other);
        }
        let l3_flush = be16(f, off + 4) as usize != f.len() - hlen;
        let mut proto = f[off + 6];
        let mut l4_off = hlen;
        if proto != TCP && proto != next_header::UDP {
            // `ipv6_gro_pull_exthdrs`: skip Hop-by-Hop, Routing and
            // Destination Options; stop (and pass) at anything else or at
            // a header that does not fit.
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
            17 => Proto::Udp6,
            _ => Proto::Other,
        };
        if proto != TCP {
            let reason = match proto {
                next_header::UDP => FlushReason::UnsupportedProtocol,
                next_header::FRAGMENT => FlushReason::Fragment,
                next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS => {
                    FlushReason::Malformed
                }
                _ => FlushReason::UnsupportedProtocol,
            };
            return (Verdict::Pass(reason), stat);
        }
        let skb = Skb {
            input,
            l2,
            mac_len,
            l3_off: off,
            v6: true,
            l4_off,
            l3_flush,
        };
        (self.tcp_receive(&skb, out), stat)
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
            17 => Proto::Udp4,
            _ => Proto::Other,
        },
        ethertype::IPV6 if f.len() > l2.l3_offset + 6 => match f[l2.l3_offset + 6] {
            TCP => Proto::Tcp6,
            17 => Proto::Udp6,
            _ => Proto::Other,
        },
        _ => Proto::Other,
    }
}
