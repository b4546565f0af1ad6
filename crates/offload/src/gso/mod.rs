//! Generic Segmentation Offload: split a super-packet into wire-sized
//! packets the way `skb_segment` with `tcp_gso_segment` or
//! `__udp_gso_segment`, `inet_gso_segment` or `ipv6_gso_segment`, and
//! `skb_udp_tunnel_segment` for VXLAN do it.
//!
//! Per TCP segment: all headers copied; IPv4 total length and a freshly
//! computed header checksum, ID = first ID + i unless the fixed-ID flag of
//! that header is set (`SKB_GSO_TCP_FIXEDID`, `..._INNER`); IPv6 payload
//! length (a Hop-by-Hop Jumbo header is removed first,
//! `ipv6_hopopt_jumbo_remove`); sequence advanced by `mss`, FIN and PSH
//! only on the last segment, CWR only on the first (unless
//! `SKB_GSO_TCP_ACCECN`), full checksum.
//!
//! Per UDP datagram (USO, `SKB_GSO_UDP_L4`): UDP length `8 + mss` (the last
//! takes the rest), full checksum with a computed 0 sent as 0xFFFF, IPv4 ID
//! incrementing.
//!
//! VXLAN: the inner packet is segmented as above, then each segment gets a
//! copy of the outer headers with the outer IPv4 length, checksum and ID
//! (first + i, or fixed), the outer UDP length, and an outer UDP checksum
//! computed in full when the super-packet's was non-zero
//! (`SKB_GSO_UDP_TUNNEL_CSUM`), left 0 otherwise.

use crate::checksum;
use crate::link::{dissect_l2, LinkKind};
use crate::wire::ethernet::ethertype;
use crate::wire::ipv6::{next_header, TLV_JUMBO};
use crate::wire::tcp::flags;
use crate::wire::{be16, be32, put16, put32, WireError};
use core::fmt;

/// How to segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GsoParams {
    /// Payload bytes per segment (`gso_size`).
    pub mss: u32,
    /// Keep the IPv4 ID of the outer (or only) header fixed (`SKB_GSO_TCP_FIXEDID`).
    pub fixed_id: bool,
    /// Keep the inner IPv4 ID fixed (`SKB_GSO_TCP_FIXEDID_INNER`).
    pub fixed_id_inner: bool,
    /// Keep CWR on every segment (`SKB_GSO_TCP_ACCECN`, 7.0+).
    pub accecn: bool,
}

impl GsoParams {
    pub fn new(mss: u32) -> Self {
        GsoParams {
            mss,
            fixed_id: false,
            fixed_id_inner: false,
            accecn: false,
        }
    }

    /// Parameters from a GRO delivery's (or a virtio_net_hdr's) `gso_size` and `SKB_GSO_*` bits.
    pub fn from_gso(gso_size: u32, gso_type: u32) -> Self {
        use crate::gro::gso_type as g;
        GsoParams {
            mss: gso_size,
            fixed_id: gso_type & g::TCP_FIXEDID != 0,
            fixed_id_inner: gso_type & g::TCP_FIXEDID_INNER != 0,
            accecn: gso_type & g::TCP_ACCECN != 0,
        }
    }
}

/// Why a frame could not be segmented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GsoError {
    /// A header could not be read.
    Wire(WireError),
    /// Not TCP or UDP over IPv4/IPv6 (optionally in VXLAN).
    Unsupported(&'static str),
    /// `mss` is 0.
    ZeroMss,
}

impl fmt::Display for GsoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GsoError::Wire(e) => write!(f, "{e}"),
            GsoError::Unsupported(what) => write!(f, "cannot segment: {what}"),
            GsoError::ZeroMss => f.write_str("cannot segment with an MSS of 0"),
        }
    }
}

impl std::error::Error for GsoError {}

impl From<WireError> for GsoError {
    fn from(e: WireError) -> Self {
        GsoError::Wire(e)
    }
}

/// Where the headers of a super-packet are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The innermost network header.
    pub l3_off: usize,
    pub v6: bool,
    /// The innermost transport header.
    pub l4_off: usize,
    /// 6 (TCP) or 17 (UDP).
    pub l4_proto: u8,
    /// TCP header length, or 8 for UDP.
    pub l4_header_len: usize,
    /// End of the (inner) IP packet: Ethernet padding excluded.
    pub end: usize,
    /// An 8-byte Hop-by-Hop Jumbo header at `l3_off + 40` of the innermost
    /// IPv6 header, to drop.
    pub jumbo_hbh: bool,
    /// VXLAN outer headers, if encapsulated.
    pub outer: Option<OuterLayout>,
}

/// The outer headers of a VXLAN super-packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OuterLayout {
    pub l3_off: usize,
    pub v6: bool,
    pub udp_off: usize,
}

impl Layout {
    /// Transport payload bytes.
    pub fn payload_len(&self) -> usize {
        self.end.saturating_sub(self.l4_off + self.l4_header_len)
    }

    /// Offset of the transport payload.
    pub fn payload_off(&self) -> usize {
        self.l4_off + self.l4_header_len
    }
}

/// Network layer at `l3`: `(v6, l4_off, l4_proto, end, jumbo_hbh)`.
fn l3_layout(frame: &[u8], et: u16, l3: usize) -> Result<(bool, usize, u8, usize, bool), GsoError> {
    match et {
        ethertype::IPV4 => {
            let ip = crate::wire::ipv4::Ipv4::new_checked(&frame[l3..]).map_err(|e| e.at(l3))?;
            let avail = frame.len() - l3;
            let len = ip.effective_len(avail).min(avail);
            Ok((false, l3 + ip.header_len(), ip.protocol(), l3 + len, false))
        }
        ethertype::IPV6 => {
            let ip = crate::wire::ipv6::Ipv6::new_checked(&frame[l3..]).map_err(|e| e.at(l3))?;
            let chain = ip.walk_ext().map_err(|e| e.at(l3))?;
            let avail = frame.len() - l3 - 40;
            let plen = match (ip.payload_len(), chain.jumbo) {
                (0, Some(j)) => (j as usize).min(avail),
                (0, None) => avail,
                (n, _) => (n as usize).min(avail),
            };
            // `ipv6_hopopt_jumbo_remove`: only the exact 8-byte HBH that
            // carries nothing but the Jumbo option, directly before TCP.
            let jumbo = ip.next_header() == next_header::HOP_BY_HOP
                && ip.payload_len() == 0
                && frame.len() >= l3 + 48
                && frame[l3 + 40] == 6
                && frame[l3 + 41] == 0
                && frame[l3 + 42] == TLV_JUMBO
                && frame[l3 + 43] == 4;
            Ok((
                true,
                l3 + chain.upper_offset,
                chain.upper,
                l3 + 40 + plen,
                jumbo,
            ))
        }
        _ => Err(GsoError::Unsupported("not IPv4 or IPv6")),
    }
}

/// Finds the headers of a TCP or UDP super-packet; UDP to one of
/// `vxlan_ports` carrying Ethernet + IP is treated as VXLAN.
pub fn layout(link: LinkKind, frame: &[u8], vxlan_ports: &[u16]) -> Result<Layout, GsoError> {
    let l2 = dissect_l2(link, frame)?;
    let (v6, l4, proto, end, jumbo) = l3_layout(frame, l2.ethertype, l2.l3_offset)?;
    let mut lay = Layout {
        l3_off: l2.l3_offset,
        v6,
        l4_off: l4,
        l4_proto: proto,
        l4_header_len: 0,
        end,
        jumbo_hbh: jumbo,
        outer: None,
    };
    if proto == 17 && frame.len() >= l4 + 8 && vxlan_ports.contains(&be16(frame, l4 + 2)) {
        let inner_eth = l4 + 16;
        if frame.len() >= inner_eth + 14 {
            let et = be16(frame, inner_eth + 12);
            if let Ok((iv6, il4, iproto, iend, ijumbo)) = l3_layout(frame, et, inner_eth + 14) {
                lay = Layout {
                    l3_off: inner_eth + 14,
                    v6: iv6,
                    l4_off: il4,
                    l4_proto: iproto,
                    l4_header_len: 0,
                    end: iend,
                    jumbo_hbh: ijumbo,
                    outer: Some(OuterLayout {
                        l3_off: l2.l3_offset,
                        v6,
                        udp_off: l4,
                    }),
                };
            }
        }
    }
    lay.l4_header_len = match lay.l4_proto {
        6 => crate::wire::tcp::Tcp::new_checked(&frame[lay.l4_off..lay.end.max(lay.l4_off)])
            .map_err(|e| e.at(lay.l4_off))?
            .header_len(),
        17 => {
            crate::wire::udp::Udp::new_checked(&frame[lay.l4_off..lay.end.max(lay.l4_off)])
                .map_err(|e| e.at(lay.l4_off))?;
            8
        }
        _ => return Err(GsoError::Unsupported("not TCP or UDP")),
    };
    Ok(lay)
}

/// Finds the headers of a TCP super-packet (no tunnel).
pub fn tcp_layout(link: LinkKind, frame: &[u8]) -> Result<Layout, GsoError> {
    let lay = layout(link, frame, &[])?;
    if lay.l4_proto != 6 {
        return Err(GsoError::Unsupported("not TCP"));
    }
    Ok(lay)
}

/// Segments a TCP super-packet (no tunnel). See [`segment`].
pub fn segment_tcp<F: FnMut(&[u8])>(
    link: LinkKind,
    frame: &[u8],
    params: &GsoParams,
    out: &mut F,
) -> Result<usize, GsoError> {
    let lay = tcp_layout(link, frame)?;
    segment_layout(frame, &lay, params, out)
}

/// Segments a TCP, UDP or VXLAN super-packet; each segment goes to `out`.
/// A packet whose payload fits in one segment is passed on unchanged, as
/// the kernel sends it without segmenting. Returns the number of segments.
pub fn segment<F: FnMut(&[u8])>(
    link: LinkKind,
    frame: &[u8],
    params: &GsoParams,
    vxlan_ports: &[u16],
    out: &mut F,
) -> Result<usize, GsoError> {
    let lay = layout(link, frame, vxlan_ports)?;
    segment_layout(frame, &lay, params, out)
}

/// Segments with a known layout.
pub fn segment_layout<F: FnMut(&[u8])>(
    frame: &[u8],
    lay: &Layout,
    params: &GsoParams,
    out: &mut F,
) -> Result<usize, GsoError> {
    if params.mss == 0 {
        return Err(GsoError::ZeroMss);
    }
    let payload = &frame[lay.payload_off()..lay.end];
    if payload.len() <= params.mss as usize && !lay.jumbo_hbh {
        out(frame);
        return Ok(1);
    }
    // Every segment is a plain (non-BIG) packet: its IP length field must
    // hold it. The kernel never builds such a gso_size; refuse rather than
    // write a wrapped length.
    let jumbo = if lay.jumbo_hbh { 8 } else { 0 };
    let largest = lay.payload_off() - jumbo + params.mss as usize;
    // IPv4 counts its header, IPv6 does not; check every IP header.
    let too_big = |l3: usize, v6: bool| largest - l3 > 65535 + if v6 { 40 } else { 0 };
    if too_big(lay.l3_off, lay.v6) || lay.outer.is_some_and(|o| too_big(o.l3_off, o.v6)) {
        return Err(GsoError::Unsupported(
            "segment larger than an IP packet can say (mss too large)",
        ));
    }
    // Headers without the Jumbo HBH.
    let mut hdr = Vec::with_capacity(lay.payload_off());
    let (l3, l4) = (lay.l3_off, lay.l4_off);
    if lay.jumbo_hbh {
        hdr.extend_from_slice(&frame[..l3 + 40]);
        hdr.extend_from_slice(&frame[l3 + 48..lay.payload_off()]);
        hdr[l3 + 6] = frame[l3 + 40];
    } else {
        hdr.extend_from_slice(&frame[..lay.payload_off()]);
    }
    let l4 = if lay.jumbo_hbh { l4 - 8 } else { l4 };
    let tcp = lay.l4_proto == 6;
    let seq0 = if tcp { be32(&hdr, l4 + 4) } else { 0 };
    let id0 = if lay.v6 { 0 } else { be16(&hdr, l3 + 4) };
    let outer_id0 = match lay.outer {
        Some(o) if !o.v6 => be16(&hdr, o.l3_off + 4),
        _ => 0,
    };
    let orig_flags = if tcp { hdr[l4 + 13] } else { 0 };
    // Inner fixed-ID comes from the inner flag when tunnelled.
    let inner_fixed = if lay.outer.is_some() {
        params.fixed_id_inner
    } else {
        params.fixed_id
    };
    let mss = params.mss as usize;
    let n = payload.len().div_ceil(mss).max(1);
    let mut seg = Vec::with_capacity(hdr.len() + mss);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        seg.clear();
        seg.extend_from_slice(&hdr);
        seg.extend_from_slice(chunk);
        let seg_len = seg.len();
        if tcp {
            let mut fl = orig_flags;
            if i + 1 != n {
                fl &= !(flags::FIN | flags::PSH);
            }
            if i > 0 && !params.accecn {
                fl &= !flags::CWR;
            }
            seg[l4 + 13] = fl;
            put32(&mut seg, l4 + 4, seq0.wrapping_add((i * mss) as u32));
        } else {
            put16(&mut seg, l4 + 4, (seg_len - l4) as u16);
        }
        fix_ip(
            &mut seg,
            l3,
            lay.v6,
            if inner_fixed {
                id0
            } else {
                id0.wrapping_add(i as u16)
            },
        );
        fill_l4_checksum(&mut seg, l3, l4, lay.v6, lay.l4_proto);
        if let Some(o) = lay.outer {
            let id = if params.fixed_id {
                outer_id0
            } else {
                outer_id0.wrapping_add(i as u16)
            };
            fix_ip(&mut seg, o.l3_off, o.v6, id);
            put16(&mut seg, o.udp_off + 4, (seg_len - o.udp_off) as u16);
            if be16(&seg, o.udp_off + 6) != 0 {
                fill_l4_checksum(&mut seg, o.l3_off, o.udp_off, o.v6, 17);
            }
        }
        out(&seg);
    }
    Ok(n)
}

/// Sets the IP length of the header at `l3` to the rest of `seg` and, for
/// IPv4, the ID and a fresh header checksum (`ip_send_check`).
fn fix_ip(seg: &mut [u8], l3: usize, v6: bool, id: u16) {
    let len = seg.len();
    if v6 {
        put16(seg, l3 + 4, (len - l3 - 40) as u16);
        return;
    }
    put16(seg, l3 + 2, (len - l3) as u16);
    put16(seg, l3 + 4, id);
    put16(seg, l3 + 10, 0);
    let ihl = (seg[l3] & 0x0f) as usize * 4;
    let c = checksum::checksum(&seg[l3..l3 + ihl]);
    put16(seg, l3 + 10, c);
}

/// Computes a TCP or UDP checksum from scratch (UDP: 0 goes out as 0xFFFF).
pub(crate) fn fill_l4_checksum(seg: &mut [u8], l3: usize, l4: usize, v6: bool, proto: u8) {
    let field = if proto == 6 { 16 } else { 6 };
    put16(seg, l4 + field, 0);
    let len = (seg.len() - l4) as u32;
    let pseudo = if v6 {
        checksum::pseudo_ipv6(
            seg[l3 + 8..l3 + 24].try_into().expect("IPv6 header"),
            seg[l3 + 24..l3 + 40].try_into().expect("IPv6 header"),
            proto,
            len,
        )
    } else {
        checksum::pseudo_ipv4(
            seg[l3 + 12..l3 + 16].try_into().expect("IPv4 header"),
            seg[l3 + 16..l3 + 20].try_into().expect("IPv4 header"),
            proto,
            len,
        )
    };
    let mut c = !checksum::fold(checksum::sum_bytes(pseudo, &seg[l4..]));
    if proto == 17 && c == 0 {
        c = 0xffff; // CSUM_MANGLED_0
    }
    put16(seg, l4 + field, c);
}

#[cfg(test)]
mod tests;
