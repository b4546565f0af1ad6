//! `gro_complete` for a held packet of more than one segment: the network
//! layers' `inet_gro_complete` / `ipv6_gro_complete`, the UDP tunnel's
//! `udp4/6_gro_complete` + `udp_gro_complete`, and the transport's
//! `tcp4/6_gro_complete` or `udp_gro_complete_segment`, in kernel order
//! (outer headers first, with the lengths as they are at that moment).

use super::{gso_type, Held};
use crate::checksum;
use crate::wire::ipv4::Ipv4;
use crate::wire::ipv6::TLV_JUMBO;
use crate::wire::{be16, put16};

/// Rewrites lengths and checksums; returns the `SKB_GSO_*` bits.
pub(super) fn complete(p: &mut Held) -> u32 {
    let mut gso = 0;
    if let Some(mut o) = p.outer {
        let shift = complete_l3(p, o.l3_off, o.v6);
        o.udp_off += shift;
        p.l3_off += shift;
        p.l4_off += shift;
        let udp = o.udp_off;
        let len = p.data.len() - udp;
        if be16(&p.data, udp + 6) != 0 {
            let pseudo = pseudo_at(&p.data, o.l3_off, o.v6, 17, len as u32);
            put16(&mut p.data, udp + 6, checksum::fold(pseudo));
            gso |= gso_type::UDP_TUNNEL_CSUM;
        } else {
            gso |= gso_type::UDP_TUNNEL;
        }
        // `htons(skb->len - nhoff)`: above 64 KiB the field wraps.
        put16(&mut p.data, udp + 4, len as u16);
        p.outer = Some(o);
    }
    let shift = complete_l3(p, p.l3_off, p.v6);
    p.l4_off += shift;
    let l4 = p.l4_off;
    let len = (p.data.len() - l4) as u32;
    if p.l4_proto == 17 {
        if be16(&p.data, l4 + 6) != 0 {
            let pseudo = pseudo_at(&p.data, p.l3_off, p.v6, 17, len);
            put16(&mut p.data, l4 + 6, checksum::fold(pseudo));
        }
        put16(&mut p.data, l4 + 4, len as u16);
        return gso | gso_type::UDP_L4;
    }
    let pseudo = pseudo_at(&p.data, p.l3_off, p.v6, 6, len);
    put16(&mut p.data, l4 + 16, checksum::fold(pseudo));
    gso |= if p.v6 {
        gso_type::TCPV6
    } else {
        gso_type::TCPV4
    };
    if p.fixedid & 1 != 0 {
        gso |= gso_type::TCP_FIXEDID;
    }
    if p.fixedid & 2 != 0 {
        gso |= gso_type::TCP_FIXEDID_INNER;
    }
    if p.data[l4 + 13] & crate::wire::tcp::flags::CWR != 0 {
        gso |= gso_type::TCP_ACCECN;
    }
    gso
}

/// Sets the length of the IP header at `l3` to cover the rest of the
/// packet; returns how many bytes were inserted before `l3 + 40` (8 when
/// an IPv6 Jumbo Hop-by-Hop header was added).
fn complete_l3(p: &mut Held, l3: usize, v6: bool) -> usize {
    if v6 {
        let payload_len = p.data.len() - l3 - 40;
        if payload_len > 65535 {
            insert_jumbo_hbh(&mut p.data, l3, payload_len as u32);
            return 8;
        }
        put16(&mut p.data, l3 + 4, payload_len as u16);
        0
    } else {
        let tot = p.data.len() - l3;
        // `iph_set_totlen`: 0 above 64 KiB (BIG TCP), checksum patched
        // incrementally (`csum_replace2`).
        let field = if tot > 0xffff { 0 } else { tot as u16 };
        Ipv4::new_unchecked(&mut p.data[l3..]).set_total_len_incremental(field);
        0
    }
}

fn pseudo_at(data: &[u8], l3: usize, v6: bool, proto: u8, len: u32) -> u64 {
    let ip = &data[l3..];
    if v6 {
        checksum::pseudo_ipv6(
            ip[8..24].try_into().expect("held IPv6 header"),
            ip[24..40].try_into().expect("held IPv6 header"),
            proto,
            len,
        )
    } else {
        checksum::pseudo_ipv4(
            ip[12..16].try_into().expect("held IPv4 header"),
            ip[16..20].try_into().expect("held IPv4 header"),
            proto,
            len,
        )
    }
}

/// Inserts the 8-byte Hop-by-Hop Jumbo Payload header right after the
/// fixed IPv6 header at `l3` (5.19–6.19 `ipv6_gro_complete`).
fn insert_jumbo_hbh(data: &mut Vec<u8>, l3: usize, payload_len: u32) {
    let at = l3 + 40;
    let mut hbh = [0u8; 8];
    hbh[0] = data[l3 + 6];
    hbh[2] = TLV_JUMBO;
    hbh[3] = 4;
    hbh[4..8].copy_from_slice(&(payload_len + 8).to_be_bytes());
    data.splice(at..at, hbh);
    data[l3 + 6] = 0;
    put16(data, l3 + 4, 0);
}
