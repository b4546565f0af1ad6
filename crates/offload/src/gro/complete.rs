//! `gro_complete` for a held packet of more than one segment: the network
//! layers' `inet_gro_complete` / `ipv6_gro_complete`, the tunnel's own
//! (`crate::tunnel`: `udp_gro_complete`, `gre_gro_complete`, ...), and
//! the transport's
//! `tcp4/6_gro_complete` or `udp_gro_complete_segment`, in kernel order
//! (outer headers first, with the lengths as they are at that moment).

use super::buf::PacketBuf;
use super::{gso_type, Held, KernelLine};
use crate::checksum;
use crate::tunnel::{self, OuterGso};
use crate::wire::ipv4::Ipv4;
use crate::wire::ipv6::{self, Ipv6};
use crate::wire::{be16, put16, tcp, udp, IpVersion, Transport};

/// Rewrites lengths and checksums; returns the `SKB_GSO_*` bits.
pub(super) fn complete(p: &mut Held, line: KernelLine) -> u32 {
    let mut gso = 0;
    if let Some(mut o) = p.lay.outer {
        let shift = complete_l3(p, o.l3_off, o.ip, line);
        o.encap_off += shift;
        p.lay.l3_off += shift;
        p.lay.l4_off += shift;
        // The tunnel's own `*_gro_complete` (`crate::tunnel`).
        let total = p.data.total_len();
        let inner_l3 = p.lay.l3_off;
        let csum_from_inner = line.udp_tunnel_csum_from_inner_header();
        gso |= match tunnel::complete(&mut p.data, total, &o, inner_l3, csum_from_inner) {
            OuterGso::UdpTunnel => gso_type::UDP_TUNNEL,
            OuterGso::UdpTunnelCsum => gso_type::UDP_TUNNEL_CSUM,
            OuterGso::Gre => gso_type::GRE,
            OuterGso::GreCsum => gso_type::GRE_CSUM,
            OuterGso::IpxIp4 => gso_type::IPXIP4,
            OuterGso::IpxIp6 => gso_type::IPXIP6,
        };
        p.lay.outer = Some(o);
    }
    let shift = complete_l3(p, p.lay.l3_off, p.lay.ip, line);
    p.lay.l4_off += shift;
    let (l3, l4, ip) = (p.lay.l3_off, p.lay.l4_off, p.lay.ip);
    let len = (p.data.total_len() - l4) as u32;
    if p.lay.l4_proto == Transport::Udp {
        let csum = l4 + udp::field::CHECKSUM;
        if be16(&p.data, csum) != 0 {
            let pseudo = pseudo_at(&p.data, l3, ip, Transport::Udp, len);
            put16(&mut p.data, csum, checksum::fold(pseudo));
        }
        put16(&mut p.data, l4 + udp::field::LENGTH.start, len as u16);
        return gso | gso_type::UDP_L4;
    }
    let pseudo = pseudo_at(&p.data, l3, ip, Transport::Tcp, len);
    put16(
        &mut p.data,
        l4 + tcp::field::CHECKSUM,
        checksum::fold(pseudo),
    );
    gso |= match ip {
        IpVersion::V4 => gso_type::TCPV4,
        IpVersion::V6 => gso_type::TCPV6,
    };
    if p.fixedid & 1 != 0 {
        gso |= gso_type::TCP_FIXEDID;
    }
    if p.fixedid & 2 != 0 {
        gso |= gso_type::TCP_FIXEDID_INNER;
    }
    if p.data[l4 + tcp::field::FLAGS] & tcp::flags::CWR != 0 {
        // `tcp_gro_complete`: classic ECN before 6.18, AccECN since.
        gso |= if line.cwr_is_classic_ecn() {
            gso_type::TCP_ECN
        } else {
            gso_type::TCP_ACCECN
        };
    }
    gso
}

/// Sets the length of the IP header at `l3` to cover the rest of the
/// packet; returns how many bytes were inserted before `l3 + 40` (8 when
/// an IPv6 Jumbo Hop-by-Hop header was added).
fn complete_l3(p: &mut Held, l3: usize, ip: IpVersion, line: KernelLine) -> usize {
    match ip {
        IpVersion::V6 => {
            let payload_len = p.data.total_len() - l3 - ipv6::HEADER_LEN;
            if payload_len > 65535 && !line.ipv6_jumbo_hbh() {
                // 7.0 `ipv6_gro_complete`: payload length 0, no HBH.
                Ipv6::new_unchecked(&mut p.data[l3..]).set_payload_len(0);
                return 0;
            }
            if payload_len > 65535 {
                insert_jumbo_hbh(&mut p.data, l3, payload_len as u32);
                return ipv6::JUMBO_HBH_LEN;
            }
            Ipv6::new_unchecked(&mut p.data[l3..]).set_payload_len(payload_len as u16);
            0
        }
        IpVersion::V4 => {
            let tot = p.data.total_len() - l3;
            // `iph_set_totlen`: 0 above 64 KiB (BIG TCP), checksum patched
            // incrementally (`csum_replace2`).
            let field = if tot > 0xffff { 0 } else { tot as u16 };
            Ipv4::new_unchecked(&mut p.data[l3..]).set_total_len_incremental(field);
            0
        }
    }
}

fn pseudo_at(data: &[u8], l3: usize, ip: IpVersion, proto: Transport, len: u32) -> u64 {
    ip.pseudo_header(&data[l3..], proto.protocol(), len)
}

/// Inserts the 8-byte Hop-by-Hop Jumbo Payload header right after the
/// fixed IPv6 header at `l3` (5.19–6.19 `ipv6_gro_complete`).
/// The headers before it move back into the buffer's headroom; the
/// payload does not move.
fn insert_jumbo_hbh(data: &mut PacketBuf, l3: usize, payload_len: u32) {
    let at = l3 + ipv6::HEADER_LEN;
    let next = data[l3 + ipv6::field::NEXT_HEADER];
    let hbh = ipv6::jumbo_hbh(next, payload_len + ipv6::JUMBO_HBH_LEN as u32);
    data.insert(at, &hbh);
    let mut h = Ipv6::new_unchecked(&mut data[l3..]);
    h.set_next_header(ipv6::next_header::HOP_BY_HOP);
    h.set_payload_len(0);
}
