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
pub use crate::layout::{Layout, OuterLayout};
use crate::link::{dissect_l2, LinkKind};
use crate::wire::ipv6::{self, Ipv6};
use crate::wire::tcp::{self, flags};
use crate::wire::{
    be16, be32, fill_l4_checksum, ipv4, put16, put32, udp, IpVersion, Transport, WireError,
};
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
    /// Keep CWR on every segment (`SKB_GSO_TCP_ACCECN`, 6.15+: 023af5a72ab1).
    pub accecn: bool,
}

impl GsoParams {
    /// Parameters for `mss` with no fixed IDs and classic ECN.
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

    /// These parameters as a kernel of `line` applies them to a packet
    /// (`tunnelled`: the layout has an outer header). Up to 6.17
    /// `inet_gso_segment` (`net/ipv4/af_inet.c`) knows one fixed-ID bit,
    /// `SKB_GSO_TCP_FIXEDID`, and applies it to the innermost IPv4 header
    /// only, so a tunnel's outer ID always increments; 6.18 split it into
    /// `SKB_GSO_TCP_FIXEDID` (outer, or the only header) and
    /// `SKB_GSO_TCP_FIXEDID_INNER`. `SKB_GSO_TCP_ACCECN` (CWR kept on every
    /// segment, `tcp_gso_segment` in `net/ipv4/tcp_offload.c`) exists only
    /// on the lines whose GRO sets it ([`KernelLine::marks_accecn`]).
    /// Every other GSO rule is the same on the four lines.
    ///
    /// [`KernelLine::marks_accecn`]: crate::gro::KernelLine::marks_accecn
    pub fn on_line(self, line: crate::gro::KernelLine, tunnelled: bool) -> Self {
        let one_fixedid_bit = line.one_fixedid_bit();
        GsoParams {
            fixed_id: self.fixed_id && !(one_fixedid_bit && tunnelled),
            fixed_id_inner: if one_fixedid_bit && tunnelled {
                self.fixed_id || self.fixed_id_inner
            } else {
                self.fixed_id_inner
            },
            accecn: self.accecn && line.marks_accecn(),
            ..self
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

/// The network layer at `l3` of a packet of type `et`.
#[derive(Debug, Clone, Copy)]
struct L3 {
    ip: IpVersion,
    l4_off: usize,
    proto: u8,
    end: usize,
    jumbo_hbh: bool,
}

/// Network layer at `l3`.
fn l3_layout(frame: &[u8], et: u16, l3: usize) -> Result<L3, GsoError> {
    match IpVersion::from_ethertype(et) {
        Some(IpVersion::V4) => {
            let ip = ipv4::Ipv4::new_checked(&frame[l3..]).map_err(|e| e.at(l3))?;
            let avail = frame.len() - l3;
            let len = ip.effective_len(avail).min(avail);
            Ok(L3 {
                ip: IpVersion::V4,
                l4_off: l3 + ip.header_len(),
                proto: ip.protocol(),
                end: l3 + len,
                jumbo_hbh: false,
            })
        }
        Some(IpVersion::V6) => {
            let ip = Ipv6::new_checked(&frame[l3..]).map_err(|e| e.at(l3))?;
            let chain = ip.walk_ext().map_err(|e| e.at(l3))?;
            let avail = frame.len() - l3 - ipv6::HEADER_LEN;
            let plen = match (ip.payload_len(), chain.jumbo) {
                (0, Some(j)) => (j as usize).min(avail),
                (0, None) => avail,
                (n, _) => (n as usize).min(avail),
            };
            // `ipv6_hopopt_jumbo_remove`: only the exact 8-byte HBH that
            // carries nothing but the Jumbo option, directly before TCP.
            let jumbo_hbh = ip.next_header() == ipv6::next_header::HOP_BY_HOP
                && ip.payload_len() == 0
                && ipv6::is_jumbo_hbh(&frame[l3 + ipv6::HEADER_LEN..]);
            Ok(L3 {
                ip: IpVersion::V6,
                l4_off: l3 + chain.upper_offset,
                proto: chain.upper,
                end: l3 + ipv6::HEADER_LEN + plen,
                jumbo_hbh,
            })
        }
        None => Err(GsoError::Unsupported("not IPv4 or IPv6")),
    }
}

/// UDP ports of tunnels the engine knows but does not segment: a
/// super-packet to one of them is refused (and so copied unchanged by
/// `offload gso`) rather than cut as plain UDP. VXLAN-GPE (4790),
/// MPLS over UDP (6635), GUE (5555 is not IANA-assigned; FOU/GUE have no
/// fixed port and are not listed).
pub const UNMODELLED_UDP_TUNNEL_PORTS: &[u16] = &[4790, 6635];

/// Finds the headers of a TCP or UDP super-packet, looking through one
/// tunnel: UDP to one of `vxlan_ports` (VXLAN), UDP to 6081 (Geneve,
/// `skb_udp_tunnel_segment`), GRE with or without key and checksum
/// (`gre_gso_segment`), and IP in IP (IPIP, SIT, IPv6 in IPv6, IPv4 in
/// IPv6: `ipip_gso_segment` / `sit_gso_segment` / `ip6ip6_gso_segment` /
/// `ip4ip6_gso_segment`). A tunnel it recognises but cannot segment
/// (GRE with a sequence number, a version other than 0, an unknown
/// payload; Geneve OAM; VXLAN-GPE, MPLS over UDP) is an error, never
/// plain UDP or IP.
pub fn layout(link: LinkKind, frame: &[u8], vxlan_ports: &[u16]) -> Result<Layout, GsoError> {
    let l2 = dissect_l2(link, frame)?;
    let outer_net = l3_layout(frame, l2.ethertype, l2.l3_offset)?;
    let mut net = outer_net;
    let mut l3_off = l2.l3_offset;
    let mut outer = None;
    if let Some((o, inner_type)) = tunnel_of(frame, l2.l3_offset, &outer_net, vxlan_ports)? {
        let inner_l3 = o.inner_l3_off();
        if frame.len() < inner_l3 {
            return Err(GsoError::Unsupported("tunnel header cut short"));
        }
        net = l3_layout(frame, inner_type, inner_l3)?;
        l3_off = inner_l3;
        outer = Some(o);
    }
    let l4_proto = Transport::from_protocol(net.proto).ok_or(if outer.is_some() {
        GsoError::Unsupported("tunnelled packet is not TCP or UDP")
    } else {
        GsoError::Unsupported("not TCP or UDP")
    })?;
    let l4 = &frame[net.l4_off..net.end.max(net.l4_off)];
    let l4_header_len = match l4_proto {
        Transport::Tcp => tcp::Tcp::new_checked(l4)
            .map_err(|e| e.at(net.l4_off))?
            .header_len(),
        Transport::Udp => {
            udp::Udp::new_checked(l4).map_err(|e| e.at(net.l4_off))?;
            udp::HEADER_LEN
        }
    };
    Ok(Layout {
        l3_off,
        ip: net.ip,
        l4_off: net.l4_off,
        l4_proto,
        l4_header_len,
        end: net.end,
        jumbo_hbh: net.jumbo_hbh,
        outer,
    })
}

/// The tunnel after the network header `net` at `l3`, if any, with the
/// EtherType of its inner network header: the tunnel's own rules
/// (`crate::tunnel`), after the header views' checks (which name the
/// field a cut-short header lacks).
fn tunnel_of(
    frame: &[u8],
    l3: usize,
    net: &L3,
    vxlan_ports: &[u16],
) -> Result<Option<(OuterLayout, u16)>, GsoError> {
    use crate::tunnel::{self, UdpTunnel};
    use crate::wire::{geneve::Geneve, gre::Gre};
    let at = net.l4_off;
    let refused = |r: tunnel::Refusal| GsoError::Unsupported(r.gso_message());
    match net.proto {
        crate::wire::ip_proto::UDP if frame.len() >= at + udp::HEADER_LEN => {
            let dport = be16(frame, at + udp::field::DST_PORT.start);
            let geneve_ports = [crate::wire::geneve::PORT];
            match tunnel::udp_tunnel_on(dport, vxlan_ports, &geneve_ports) {
                // A VXLAN port carrying something else is cut as UDP, as
                // before (the port may be in use by another protocol).
                Some(UdpTunnel::Vxlan) => {
                    Ok(tunnel::parse_udp(UdpTunnel::Vxlan, frame, l3, net.ip, at).ok())
                }
                Some(UdpTunnel::Geneve) => {
                    let gh = at + udp::HEADER_LEN;
                    Geneve::new_checked(&frame[gh.min(frame.len())..]).map_err(|e| e.at(gh))?;
                    tunnel::parse_udp(UdpTunnel::Geneve, frame, l3, net.ip, at)
                        .map(Some)
                        .map_err(refused)
                }
                None if UNMODELLED_UDP_TUNNEL_PORTS.contains(&dport) => Err(GsoError::Unsupported(
                    "a UDP tunnel the engine does not model",
                )),
                None => Ok(None),
            }
        }
        proto => {
            if proto == crate::wire::ip_proto::GRE {
                Gre::new_checked(&frame[at.min(frame.len())..]).map_err(|e| e.at(at))?;
            }
            tunnel::parse_ip(proto, frame, l3, net.ip, at, false)
                .transpose()
                .map_err(refused)
        }
    }
}

/// Finds the headers of a TCP super-packet (no tunnel).
pub fn tcp_layout(link: LinkKind, frame: &[u8]) -> Result<Layout, GsoError> {
    let lay = layout(link, frame, &[])?;
    if lay.l4_proto != Transport::Tcp {
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
    let mut seg = Vec::with_capacity(lay.payload_off() + params.mss as usize);
    segment_core(frame, lay, params, &mut seg, &mut |buf, start| {
        out(&buf[start..]);
        buf.truncate(start);
    })
}

/// [`segment_layout`] into a caller-owned arena: each segment is appended
/// to `arena`, back to back, and its byte range in `arena` goes to `out`.
/// Nothing is allocated per segment and the segments stay where they are
/// until the caller clears the arena, so that a consumer can keep borrowing
/// them (GRO's zero-copy delivery refers to their payloads; see
/// `offload_tun::FrameArena`). A packet that fits in one segment is copied
/// in unchanged, as [`segment_layout`] hands it on unchanged. On error the
/// arena holds the segments appended before it, if any (none: every
/// check comes before the first byte is written).
pub fn segment_layout_into(
    frame: &[u8],
    lay: &Layout,
    params: &GsoParams,
    arena: &mut Vec<u8>,
    out: &mut impl FnMut(core::ops::Range<usize>),
) -> Result<usize, GsoError> {
    // Room for every segment at once (one growth at most per ordinary
    // super-packet), bounded so that a hand-made layout cannot ask for more
    // than the segments could need; Vec's doubling does the rest.
    let payload = lay.end.min(frame.len()).saturating_sub(lay.payload_off());
    let segs = payload.div_ceil(params.mss.max(1) as usize).max(1);
    let need = segs.saturating_mul(lay.payload_off().min(frame.len()));
    arena.reserve(need.saturating_add(payload).min(1 << 22));
    segment_core(frame, lay, params, arena, &mut |buf, start| {
        out(start..buf.len())
    })
}

/// The segmentation both entry points share: each segment is built at the
/// end of `buf` (from `start`), then `emit(buf, start)` takes it (and may
/// truncate `buf` back to `start` to reuse the space).
fn segment_core(
    frame: &[u8],
    lay: &Layout,
    params: &GsoParams,
    buf: &mut Vec<u8>,
    emit: &mut dyn FnMut(&mut Vec<u8>, usize),
) -> Result<usize, GsoError> {
    if params.mss == 0 {
        return Err(GsoError::ZeroMss);
    }
    check_layout(frame, lay)?;
    let payload = &frame[lay.payload_off()..lay.end];
    if payload.len() <= params.mss as usize && !lay.jumbo_hbh {
        let start = buf.len();
        buf.extend_from_slice(frame);
        emit(buf, start);
        return Ok(1);
    }
    // Every segment is a plain (non-BIG) packet: its IP length field must
    // hold it. The kernel never builds such a gso_size; refuse rather than
    // write a wrapped length.
    let jumbo = if lay.jumbo_hbh {
        ipv6::JUMBO_HBH_LEN
    } else {
        0
    };
    let largest = lay.payload_off() - jumbo + params.mss as usize;
    // IPv4 counts its header, IPv6 does not; check every IP header.
    let too_big = |l3: usize, ip: IpVersion| {
        largest - l3
            > 65535
                + match ip {
                    IpVersion::V4 => 0,
                    IpVersion::V6 => ipv6::HEADER_LEN,
                }
    };
    if too_big(lay.l3_off, lay.ip) || lay.outer.is_some_and(|o| too_big(o.l3_off, o.ip)) {
        return Err(GsoError::Unsupported(
            "segment larger than an IP packet can say (mss too large)",
        ));
    }
    // Headers without the Jumbo HBH.
    let mut hdr = Vec::with_capacity(lay.payload_off());
    let l3 = lay.l3_off;
    let after_fixed = l3 + ipv6::HEADER_LEN;
    if lay.jumbo_hbh {
        hdr.extend_from_slice(&frame[..after_fixed]);
        hdr.extend_from_slice(&frame[after_fixed + ipv6::JUMBO_HBH_LEN..lay.payload_off()]);
        hdr[l3 + ipv6::field::NEXT_HEADER] = frame[after_fixed + ipv6::ext_field::NEXT_HEADER];
    } else {
        hdr.extend_from_slice(&frame[..lay.payload_off()]);
    }
    let l4 = lay.l4_off - jumbo;
    let is_tcp = lay.l4_proto == Transport::Tcp;
    let seq0 = if is_tcp {
        be32(&hdr, l4 + tcp::field::SEQ.start)
    } else {
        0
    };
    let ipv4_id = |l3: usize, ip: IpVersion| match ip {
        IpVersion::V4 => be16(&hdr, l3 + ipv4::field::IDENT.start),
        IpVersion::V6 => 0,
    };
    let id0 = ipv4_id(l3, lay.ip);
    let outer_id0 = lay.outer.map_or(0, |o| ipv4_id(o.l3_off, o.ip));
    let ip_sum = ipv4_fixed_sum(&hdr, l3, lay.ip);
    let l4_sum = l4_fixed_sum(&hdr, l3, l4, lay.ip, lay.l4_proto);
    let outer_ip_sum = lay.outer.and_then(|o| ipv4_fixed_sum(&hdr, o.l3_off, o.ip));
    let orig_flags = if is_tcp {
        hdr[l4 + tcp::field::FLAGS]
    } else {
        0
    };
    // Inner fixed-ID comes from the inner flag when tunnelled.
    let inner_fixed = if lay.outer.is_some() {
        params.fixed_id_inner
    } else {
        params.fixed_id
    };
    let mss = params.mss as usize;
    let n = payload.len().div_ceil(mss).max(1);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let start = buf.len();
        buf.extend_from_slice(&hdr);
        buf.extend_from_slice(chunk);
        let seg = &mut buf[start..];
        let seg_len = seg.len();
        // The TCP fields that differ per segment (their sum goes into the
        // checksum below without reading them back).
        let (mut seq, mut fl) = (0u32, 0u8);
        if is_tcp {
            fl = orig_flags;
            if i + 1 != n {
                fl &= !(flags::FIN | flags::PSH);
            }
            if i > 0 && !params.accecn {
                fl &= !flags::CWR;
            }
            seg[l4 + tcp::field::FLAGS] = fl;
            seq = seq0.wrapping_add((i * mss) as u32);
            put32(seg, l4 + tcp::field::SEQ.start, seq);
        } else {
            put16(seg, l4 + udp::field::LENGTH.start, (seg_len - l4) as u16);
        }
        let id = if inner_fixed {
            id0
        } else {
            id0.wrapping_add(i as u16)
        };
        fix_ip(seg, l3, lay.ip, id, ip_sum);
        match l4_sum {
            Some(fixed) => {
                let mut sum = checksum::sum_u32(fixed, (seg_len - l4) as u32);
                // TCP: sequence number and flags; UDP: the length field.
                sum = if is_tcp {
                    checksum::sum_u32(checksum::sum_u32(sum, seq), u32::from(fl))
                } else {
                    checksum::sum_u32(sum, (seg_len - l4) as u32)
                };
                // The payload from the input (the same bytes, not read
                // back from where they were just copied); it starts at an
                // even offset from the L4 header, so its words line up.
                let mut c = !checksum::fold(checksum::sum_bytes(sum, chunk));
                if !is_tcp && c == 0 {
                    c = 0xffff; // CSUM_MANGLED_0
                }
                put16(seg, l4 + lay.l4_proto.checksum_offset(), c);
            }
            None => fill_l4_checksum(seg, l3, l4, lay.ip, lay.l4_proto),
        }
        if let Some(o) = lay.outer {
            let id = if params.fixed_id {
                outer_id0
            } else {
                outer_id0.wrapping_add(i as u16)
            };
            fix_ip(seg, o.l3_off, o.ip, id, outer_ip_sum);
            crate::tunnel::fix_segment(seg, &o);
        }
        emit(buf, start);
    }
    Ok(n)
}

/// The invariants `segment_layout` slices by, checked so that a layout
/// built by hand (not by [`layout`]) is an error, never a panic: headers
/// in order and inside the frame, each IP header long enough for its
/// fixed part, a Jumbo HBH only on IPv6 and with room for it.
fn check_layout(frame: &[u8], lay: &Layout) -> Result<(), GsoError> {
    let bad = || Err(GsoError::Unsupported("inconsistent layout"));
    let min_ip = |ip: IpVersion| match ip {
        IpVersion::V4 => ipv4::MIN_HEADER_LEN,
        IpVersion::V6 => ipv6::HEADER_LEN,
    };
    let min_l4 = match lay.l4_proto {
        Transport::Tcp => tcp::MIN_HEADER_LEN,
        Transport::Udp => udp::HEADER_LEN,
    };
    let jumbo = if lay.jumbo_hbh {
        ipv6::JUMBO_HBH_LEN
    } else {
        0
    };
    if lay.l3_off + min_ip(lay.ip) + jumbo > lay.l4_off
        || lay.l4_header_len < min_l4
        || lay.payload_off() > lay.end
        || lay.end > frame.len()
        || (lay.jumbo_hbh && lay.ip != IpVersion::V6)
    {
        return bad();
    }
    if let Some(o) = lay.outer {
        let tunnel_end = o.inner_l3_off();
        if o.l3_off + min_ip(o.ip) > o.encap_off
            || o.tunnel_header_off() < o.encap_off
            || tunnel_end != lay.l3_off
            || !crate::tunnel::fixed_header_fits(&o)
        {
            return bad();
        }
    }
    Ok(())
}

/// The sum of the IPv4 header at `l3` of the segments' headers `hdr`
/// without the three fields that differ from segment to segment (total
/// length, ID, header checksum). Each segment's header checksum is then
/// `!fold(sum + length + id)`: the value `ip_send_check` computes over the
/// whole header (the same ones' complement sum, never 0 before the
/// complement as the version byte is not 0), without reading back bytes
/// just written, 45 times per 64 KiB super-packet. `None` for IPv6, and
/// for an IHL that is below 5 or runs past the headers (a hand-made
/// layout), where each header is summed whole as before.
fn ipv4_fixed_sum(hdr: &[u8], l3: usize, ip: IpVersion) -> Option<u64> {
    if ip != IpVersion::V4 {
        return None;
    }
    let hl = ipv4::Ipv4::new_unchecked(&hdr[l3..]).header_len();
    if hl < ipv4::MIN_HEADER_LEN || l3 + hl > hdr.len() {
        return None;
    }
    let mut h = [0u8; 60];
    let h = &mut h[..hl];
    h.copy_from_slice(&hdr[l3..l3 + hl]);
    for f in [
        ipv4::field::TOTAL_LEN,
        ipv4::field::IDENT,
        ipv4::field::CHECKSUM,
    ] {
        h[f].fill(0);
    }
    Some(checksum::sum_bytes(0, h))
}

/// The part of every segment's TCP or UDP checksum that all segments
/// share: the pseudo-header without its length, and the L4 header at `l4`
/// of the segments' headers `hdr` without the fields that differ (TCP
/// sequence number, flags and checksum; UDP length and checksum). A
/// segment's checksum is then this sum plus its length (twice for UDP:
/// pseudo-header and header), sequence number and flags, and its payload:
/// the value [`fill_l4_checksum`] computes from scratch over the segment,
/// as `tcp_gso_segment` / `__udp_gso_segment` leave it. `None` when the
/// L4 header is not what `hdr` ends with in whole 16-bit words (a
/// hand-made layout): each segment is then summed whole.
fn l4_fixed_sum(hdr: &[u8], l3: usize, l4: usize, ip: IpVersion, proto: Transport) -> Option<u64> {
    let hl = hdr.len().checked_sub(l4)?;
    let min = match proto {
        Transport::Tcp => tcp::MIN_HEADER_LEN,
        Transport::Udp => udp::HEADER_LEN,
    };
    if hl % 2 != 0 || !(min..=60).contains(&hl) {
        return None;
    }
    let mut h = [0u8; 60];
    let h = &mut h[..hl];
    h.copy_from_slice(&hdr[l4..]);
    match proto {
        Transport::Tcp => {
            h[tcp::field::SEQ].fill(0);
            h[tcp::field::FLAGS] = 0;
        }
        Transport::Udp => h[udp::field::LENGTH].fill(0),
    }
    let c = proto.checksum_offset();
    h[c..c + 2].fill(0);
    let pseudo = ip.pseudo_header(&hdr[l3..], proto.protocol(), 0);
    Some(checksum::sum_bytes(pseudo, h))
}

/// Sets the IP length of the header at `l3` to the rest of `seg` and, for
/// IPv4, the ID and a fresh header checksum (`ip_send_check`), from the
/// sum of the header's other fields when known ([`ipv4_fixed_sum`]).
fn fix_ip(seg: &mut [u8], l3: usize, ip: IpVersion, id: u16, fixed_sum: Option<u64>) {
    let len = seg.len();
    match ip {
        IpVersion::V6 => {
            let plen = (len - l3 - ipv6::HEADER_LEN) as u16;
            Ipv6::new_unchecked(&mut seg[l3..]).set_payload_len(plen);
        }
        IpVersion::V4 => {
            let total = (len - l3) as u16;
            let mut h = ipv4::Ipv4::new_unchecked(&mut seg[l3..]);
            h.set_total_len(total);
            h.set_ident(id);
            match fixed_sum {
                Some(sum) => {
                    let sum = checksum::sum_u32(sum, u32::from(total));
                    h.set_header_checksum(!checksum::fold(checksum::sum_u32(sum, u32::from(id))))
                }
                None => h.fill_header_checksum(),
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tunnel_tests;
