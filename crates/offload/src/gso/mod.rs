//! Generic Segmentation Offload: split a super-packet into wire-sized
//! segments the way `skb_segment` + `tcp_gso_segment` + `inet_gso_segment`
//! / `ipv6_gso_segment` do it.
//!
//! Per segment: all headers copied; IPv4 total length and a freshly
//! computed header checksum, ID = first ID + i unless the fixed-ID flag
//! is set (`SKB_GSO_TCP_FIXEDID`); IPv6 payload length (a Hop-by-Hop Jumbo
//! header is removed first, `ipv6_hopopt_jumbo_remove`); TCP sequence
//! advanced by `mss` per segment, FIN and PSH only on the last segment,
//! CWR only on the first (unless `SKB_GSO_TCP_ACCECN`), full checksum.

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
    /// Keep the IPv4 ID of every segment equal to the first (`SKB_GSO_TCP_FIXEDID`).
    pub fixed_id: bool,
    /// Keep CWR on every segment (`SKB_GSO_TCP_ACCECN`, 7.0+).
    pub accecn: bool,
}

impl GsoParams {
    pub fn new(mss: u32) -> Self {
        GsoParams {
            mss,
            fixed_id: false,
            accecn: false,
        }
    }

    /// Parameters from a GRO delivery's `gso_size` and `gso_type`.
    pub fn from_gso(gso_size: u32, gso_type: u32) -> Self {
        use crate::gro::gso_type as g;
        GsoParams {
            mss: gso_size,
            fixed_id: gso_type & g::TCP_FIXEDID != 0,
            accecn: gso_type & g::TCP_ACCECN != 0,
        }
    }
}

/// Why a frame could not be segmented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GsoError {
    /// A header could not be read.
    Wire(WireError),
    /// Not TCP over IPv4/IPv6.
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

/// Where the headers of a TCP super-packet are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLayout {
    pub l3_off: usize,
    pub v6: bool,
    /// Offset of the TCP header in the frame as given.
    pub l4_off: usize,
    pub tcp_header_len: usize,
    /// End of the IP packet (Ethernet padding excluded).
    pub end: usize,
    /// A Hop-by-Hop Jumbo header (8 bytes at `l3_off + 40`) to drop.
    pub jumbo_hbh: bool,
}

impl TcpLayout {
    /// TCP payload bytes.
    pub fn payload_len(&self) -> usize {
        self.end - self.l4_off - self.tcp_header_len
    }
}

/// Finds the TCP headers of `frame`, honouring BIG TCP length encodings.
pub fn tcp_layout(link: LinkKind, frame: &[u8]) -> Result<TcpLayout, GsoError> {
    let l2 = dissect_l2(link, frame)?;
    let l3 = l2.l3_offset;
    let (v6, l4_off, end, jumbo_hbh) = match l2.ethertype {
        ethertype::IPV4 => {
            let ip = crate::wire::ipv4::Ipv4::new_checked(&frame[l3..]).map_err(|e| e.at(l3))?;
            if ip.protocol() != 6 {
                return Err(GsoError::Unsupported("not TCP"));
            }
            let avail = frame.len() - l3;
            let len = ip.effective_len(avail).min(avail);
            (false, l3 + ip.header_len(), l3 + len, false)
        }
        ethertype::IPV6 => {
            let ip = crate::wire::ipv6::Ipv6::new_checked(&frame[l3..]).map_err(|e| e.at(l3))?;
            let chain = ip.walk_ext().map_err(|e| e.at(l3))?;
            if chain.upper != 6 {
                return Err(GsoError::Unsupported("not TCP"));
            }
            let avail = frame.len() - l3 - 40;
            let plen = match (ip.payload_len(), chain.jumbo) {
                (0, Some(j)) => (j as usize).min(avail),
                (0, None) => avail,
                (n, _) => (n as usize).min(avail),
            };
            // `ipv6_hopopt_jumbo_remove`: only the exact 8-byte HBH that
            // carries nothing but the Jumbo option, directly before TCP.
            let jumbo_hbh = ip.next_header() == next_header::HOP_BY_HOP
                && ip.payload_len() == 0
                && frame.len() >= l3 + 48
                && frame[l3 + 40] == 6
                && frame[l3 + 41] == 0
                && frame[l3 + 42] == TLV_JUMBO
                && frame[l3 + 43] == 4;
            (true, l3 + chain.upper_offset, l3 + 40 + plen, jumbo_hbh)
        }
        _ => return Err(GsoError::Unsupported("not IPv4 or IPv6")),
    };
    let tcp = crate::wire::tcp::Tcp::new_checked(&frame[l4_off..end.max(l4_off)])
        .map_err(|e| e.at(l4_off))?;
    Ok(TcpLayout {
        l3_off: l3,
        v6,
        l4_off,
        tcp_header_len: tcp.header_len(),
        end,
        jumbo_hbh,
    })
}

/// Segments a TCP super-packet. Each segment is passed to `out`. A packet
/// whose payload fits in one segment is passed through unchanged, as the
/// kernel sends it without segmenting. Returns the number of segments.
pub fn segment_tcp<F: FnMut(&[u8])>(
    link: LinkKind,
    frame: &[u8],
    params: &GsoParams,
    out: &mut F,
) -> Result<usize, GsoError> {
    if params.mss == 0 {
        return Err(GsoError::ZeroMss);
    }
    let lay = tcp_layout(link, frame)?;
    let payload = &frame[lay.l4_off + lay.tcp_header_len..lay.end];
    if payload.len() <= params.mss as usize {
        out(frame);
        return Ok(1);
    }
    // Headers without the Jumbo HBH.
    let mut hdr = Vec::with_capacity(lay.l4_off + lay.tcp_header_len);
    if lay.jumbo_hbh {
        hdr.extend_from_slice(&frame[..lay.l3_off + 40]);
        hdr.extend_from_slice(&frame[lay.l3_off + 48..lay.l4_off + lay.tcp_header_len]);
        hdr[lay.l3_off + 6] = frame[lay.l3_off + 40];
    } else {
        hdr.extend_from_slice(&frame[..lay.l4_off + lay.tcp_header_len]);
    }
    let l4 = if lay.jumbo_hbh {
        lay.l4_off - 8
    } else {
        lay.l4_off
    };
    let l3 = lay.l3_off;
    let seq0 = be32(&hdr, l4 + 4);
    let id0 = if lay.v6 { 0 } else { be16(&hdr, l3 + 4) };
    let orig_flags = hdr[l4 + 13];
    let mss = params.mss as usize;
    let n = payload.len().div_ceil(mss).max(1);
    let mut seg = Vec::with_capacity(hdr.len() + mss);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        seg.clear();
        seg.extend_from_slice(&hdr);
        seg.extend_from_slice(chunk);
        let last = i + 1 == n;
        let mut fl = orig_flags;
        if !last {
            fl &= !(flags::FIN | flags::PSH);
        }
        if i > 0 && !params.accecn {
            fl &= !flags::CWR;
        }
        seg[l4 + 13] = fl;
        put32(&mut seg, l4 + 4, seq0.wrapping_add((i * mss) as u32));
        let seg_len = seg.len();
        if lay.v6 {
            put16(&mut seg, l3 + 4, (seg_len - l3 - 40) as u16);
        } else {
            put16(&mut seg, l3 + 2, (seg_len - l3) as u16);
            let id = if params.fixed_id {
                id0
            } else {
                id0.wrapping_add(i as u16)
            };
            put16(&mut seg, l3 + 4, id);
            put16(&mut seg, l3 + 10, 0);
            let ihl = (seg[l3] & 0x0f) as usize * 4;
            let c = checksum::checksum(&seg[l3..l3 + ihl]);
            put16(&mut seg, l3 + 10, c);
        }
        fill_tcp_checksum(&mut seg, l3, l4, lay.v6);
        out(&seg);
    }
    Ok(n)
}

/// Computes a TCP checksum from scratch.
pub(crate) fn fill_tcp_checksum(seg: &mut [u8], l3: usize, l4: usize, v6: bool) {
    put16(seg, l4 + 16, 0);
    let len = (seg.len() - l4) as u32;
    let pseudo = if v6 {
        checksum::pseudo_ipv6(
            seg[l3 + 8..l3 + 24].try_into().expect("IPv6 header"),
            seg[l3 + 24..l3 + 40].try_into().expect("IPv6 header"),
            6,
            len,
        )
    } else {
        checksum::pseudo_ipv4(
            seg[l3 + 12..l3 + 16].try_into().expect("IPv4 header"),
            seg[l3 + 16..l3 + 20].try_into().expect("IPv4 header"),
            6,
            len,
        )
    };
    let c = !checksum::fold(checksum::sum_bytes(pseudo, &seg[l4..]));
    put16(seg, l4 + 16, c);
}
