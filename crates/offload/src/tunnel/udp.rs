//! The UDP layer of the UDP tunnels (VXLAN, Geneve), shared by both:
//! `udp_gro_receive`'s same-flow test, `udp_gro_complete` and
//! `__skb_udp_tunnel_segment` (`net/ipv4/udp_offload.c`, unchanged in
//! substance from 4.x to 7.x; the pseudo-header of the outer checksum
//! changed in 6.9, see `KernelLine::udp_tunnel_csum_from_inner_header`).

use super::{OuterGso, OuterLayout};
use crate::checksum;
use crate::wire::{be16, be32, fill_l4_checksum, put16, udp, IpVersion, Transport};

/// `udp_gro_receive`: the same ports, and both outer checksums zero or
/// both non-zero.
#[inline]
pub(super) fn same_flow(held: &[u8], f: &[u8], o: &OuterLayout) -> bool {
    let u = o.encap_off;
    let (x, y) = (&held[u..], &f[u..]);
    let csum = udp::field::CHECKSUM;
    be32(x, udp::field::PORTS.start) == be32(y, udp::field::PORTS.start)
        && (be16(x, csum) == 0) == (be16(y, csum) == 0)
}

/// `udp4/6_gro_complete` → `udp_gro_complete`: the outer UDP length
/// (`htons(skb->len - nhoff)`: above 64 KiB the field wraps) and, when the
/// checksum is not zero, its pseudo-header sum for the merged length.
pub(super) fn complete(
    data: &mut [u8],
    total_len: usize,
    o: &OuterLayout,
    inner_l3: usize,
    csum_from_inner: bool,
) -> OuterGso {
    let u = o.encap_off;
    let len = total_len - u;
    let csum = u + udp::field::CHECKSUM;
    let gso = if be16(data, csum) != 0 {
        let pseudo = if csum_from_inner {
            inner_as_outer_pseudo(data, inner_l3, o.ip, len as u32)
        } else {
            o.ip.pseudo_header(&data[o.l3_off..], Transport::Udp.protocol(), len as u32)
        };
        put16(data, csum, checksum::fold(pseudo));
        OuterGso::UdpTunnelCsum
    } else {
        OuterGso::UdpTunnel
    };
    put16(data, u + udp::field::LENGTH.start, len as u16);
    gso
}

/// The pseudo-header sum of a tunnel's outer UDP checksum as lines
/// before 6.9 compute it: the addresses are read at the innermost IP
/// header (`inner_l3`, still as the first segment had it: the inner
/// headers are completed after the outer ones) with the layout of the
/// outer header's version `outer_ip`. Bytes past the end of the packet
/// read as zero (a kernel would read whatever follows; no such packet
/// reaches here, an inner IPv4 header plus a TCP or UDP header is at
/// least 28 bytes and GRO holds only packets with payload).
fn inner_as_outer_pseudo(data: &[u8], inner_l3: usize, outer_ip: IpVersion, len: u32) -> u64 {
    let mut hdr = [0u8; 40];
    let avail = data.len().saturating_sub(inner_l3).min(hdr.len());
    hdr[..avail].copy_from_slice(&data[inner_l3..inner_l3 + avail]);
    outer_ip.pseudo_header(&hdr, Transport::Udp.protocol(), len)
}

/// `__skb_udp_tunnel_segment`: each segment's outer UDP length, and its
/// full checksum when the super-packet's was non-zero
/// (`SKB_GSO_UDP_TUNNEL_CSUM`).
pub(super) fn fix_segment(seg: &mut [u8], o: &OuterLayout) {
    let u = o.encap_off;
    put16(seg, u + udp::field::LENGTH.start, (seg.len() - u) as u16);
    if be16(seg, u + udp::field::CHECKSUM) != 0 {
        fill_l4_checksum(seg, o.l3_off, u, o.ip, Transport::Udp);
    }
}
