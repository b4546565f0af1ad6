//! IPv6 header view (RFC 8200) with extension headers and the Hop-by-Hop
//! Jumbo Payload option (RFC 2675) that Linux 5.19–6.19 inserts into BIG TCP
//! super-packets.
//!
//! ```text
//!  |ver| traffic class | flow label (20)           |
//!  |   payload length  | next header | hop limit   |
//!  |              source address (16)              |
//!  |           destination address (16)            |
//! ```

use super::{be16, be32, put16, WireError};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Longest extension-header chain the view walks (a loop guard).
pub const MAX_EXT_HEADERS: usize = 16;
/// Length of the Hop-by-Hop header Linux inserts to carry only the Jumbo
/// Payload option (`struct hop_jumbo_hdr`).
pub const JUMBO_HBH_LEN: usize = 8;

/// Next-header values (the same registry as [`crate::wire::ip_proto`]).
pub mod next_header {
    pub use crate::wire::ip_proto::{
        AH, DEST_OPTS, ESP, FRAGMENT, HOP_BY_HOP, ICMPV6, NONE, ROUTING, TCP, UDP,
    };
}

/// Jumbo Payload option type (`IPV6_TLV_JUMBO`).
pub const TLV_JUMBO: u8 = 0xc2;

/// Byte offsets and ranges of the fixed header's fields.
pub mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8), flow label (20).
    pub const VERSION_TC_FLOW: Range<usize> = 0..4;
    /// Payload length (0 with a Jumbo option or for BIG TCP).
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC: Range<usize> = 8..24;
    /// Destination address.
    pub const DST: Range<usize> = 24..40;
    /// Source and destination (the flow key's addresses).
    pub const ADDRS: Range<usize> = 8..40;
}

/// Masks of the first word ([`field::VERSION_TC_FLOW`]).
pub mod first_word {
    /// The version nibble.
    pub const VERSION: u32 = 0xf000_0000;
    /// The traffic class.
    pub const TRAFFIC_CLASS: u32 = 0x0ff0_0000;
    /// The flow label.
    pub const FLOW_LABEL: u32 = 0x000f_ffff;
}

/// Byte offsets of an extension header's common fields (RFC 8200 §4).
pub mod ext_field {
    /// Next header.
    pub const NEXT_HEADER: usize = 0;
    /// Length in 8-byte units, not counting the first 8.
    pub const LEN: usize = 1;
}

/// The source and destination addresses of the header in `b`.
#[inline]
pub fn addrs(b: &[u8]) -> (&[u8; 16], &[u8; 16]) {
    (
        b[field::SRC].try_into().expect("16-byte field"),
        b[field::DST].try_into().expect("16-byte field"),
    )
}

/// True for the extension headers Linux GRO and GSO skip
/// (`INET6_PROTO_GSO_EXTHDR`: Hop-by-Hop, Routing, Destination Options).
#[inline]
pub fn is_skipped_ext(next: u8) -> bool {
    matches!(
        next,
        next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS
    )
}

/// Where an extension-header walk stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtStop {
    /// At a header that is not a skipped extension header.
    Upper,
    /// The next extension header's first two bytes are missing.
    ShortHeader,
    /// The next extension header is longer (this many bytes) than what is left.
    ShortLength(usize),
    /// More extension headers than the walk's limit.
    TooMany,
}

/// Walks the extension headers after the fixed IPv6 header at the start of
/// `ip` (which must hold at least [`HEADER_LEN`] bytes), skipping at most
/// `max` of them. [`ExtChain::upper`] and [`ExtChain::upper_offset`] say
/// where the walk stopped, [`ExtChain::stop`] why. The only walk of the
/// engine: the view ([`Ipv6::walk_ext`]), GRO (`ipv6_gro_pull_exthdrs`,
/// which has no limit) and GSO use it.
pub fn walk_ext_headers(ip: &[u8], max: usize) -> ExtChain {
    let mut chain = ExtChain {
        upper: ip[field::NEXT_HEADER],
        upper_offset: HEADER_LEN,
        count: 0,
        jumbo: None,
        stop: ExtStop::Upper,
    };
    while is_skipped_ext(chain.upper) {
        if chain.count == max {
            chain.stop = ExtStop::TooMany;
            break;
        }
        let at = chain.upper_offset;
        if ip.len() < at + 2 {
            chain.stop = ExtStop::ShortHeader;
            break;
        }
        let len = (ip[at + ext_field::LEN] as usize + 1) * 8;
        if ip.len() < at + len {
            chain.stop = ExtStop::ShortLength(len);
            break;
        }
        if chain.upper == next_header::HOP_BY_HOP && chain.count == 0 {
            chain.jumbo = jumbo_option(&ip[at..at + len]);
        }
        chain.upper = ip[at + ext_field::NEXT_HEADER];
        chain.upper_offset += len;
        chain.count += 1;
    }
    chain
}

/// A view of an IPv6 fixed header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv6<T> {
    /// Checks version 6 and that the fixed header is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::truncated("IPv6", "header", HEADER_LEN, b.len()));
        }
        if b[0] >> 4 != 6 {
            return Err(WireError::invalid(
                "IPv6",
                "version",
                (b[0] >> 4) as u64,
                "6",
            ));
        }
        Ok(Ipv6 { buf })
    }
    /// A view without checks; accessors may panic if the header is short.
    pub fn new_unchecked(buf: T) -> Self {
        Ipv6 { buf }
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Version, traffic class and flow label word.
    pub fn first_word(&self) -> u32 {
        be32(self.b(), field::VERSION_TC_FLOW.start)
    }
    /// Traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        ((self.first_word() & first_word::TRAFFIC_CLASS) >> 20) as u8
    }
    /// Flow label.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & first_word::FLOW_LABEL
    }
    /// Payload length field.
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), field::PAYLOAD_LEN.start)
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> [u8; 16] {
        *addrs(self.b()).0
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> [u8; 16] {
        *addrs(self.b()).1
    }

    /// Walks the extension headers that Linux GRO/GSO skips
    /// (`INET6_PROTO_GSO_EXTHDR`: Hop-by-Hop, Routing, Destination Options)
    /// and reports where the upper layer starts; a chain cut short or longer
    /// than [`MAX_EXT_HEADERS`] is an error.
    pub fn walk_ext(&self) -> Result<ExtChain, WireError> {
        let b = self.b();
        let chain = walk_ext_headers(b, MAX_EXT_HEADERS);
        let at = chain.upper_offset;
        match chain.stop {
            ExtStop::Upper => Ok(chain),
            ExtStop::TooMany => Err(WireError::invalid(
                "IPv6",
                "extension header count",
                chain.count as u64 + 1,
                "at most 16",
            )),
            ExtStop::ShortHeader => {
                Err(
                    WireError::truncated("IPv6 extension", "header", 2, b.len() - at.min(b.len()))
                        .at(at),
                )
            }
            ExtStop::ShortLength(len) => {
                Err(WireError::truncated("IPv6 extension", "length", len, b.len() - at).at(at))
            }
        }
    }
}

/// The result of walking IPv6 extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtChain {
    /// The first header that is not a skippable extension header.
    pub upper: u8,
    /// Its offset from the start of the IPv6 header.
    pub upper_offset: usize,
    /// How many extension headers were skipped.
    pub count: usize,
    /// The Jumbo Payload length, if the first header is a Hop-by-Hop header carrying one.
    pub jumbo: Option<u32>,
    /// Why the walk stopped.
    pub stop: ExtStop,
}

/// Finds a Jumbo Payload option in a Hop-by-Hop header.
fn jumbo_option(hbh: &[u8]) -> Option<u32> {
    let mut i = 2;
    while i < hbh.len() {
        match hbh[i] {
            0 => i += 1, // Pad1
            kind => {
                let len = *hbh.get(i + 1)? as usize;
                if kind == TLV_JUMBO && len == 4 && i + 6 <= hbh.len() {
                    return Some(be32(hbh, i + 2));
                }
                i += 2 + len;
            }
        }
    }
    None
}

/// True when the 8 bytes at the start of `hbh` are the Hop-by-Hop header
/// Linux inserts for BIG TCP: nothing but the Jumbo option
/// (`ipv6_has_hopopt_jumbo`: next header TCP, length 0, option C2 of 4 bytes).
pub fn is_jumbo_hbh(hbh: &[u8]) -> bool {
    hbh.len() >= JUMBO_HBH_LEN
        && hbh[ext_field::NEXT_HEADER] == next_header::TCP
        && hbh[ext_field::LEN] == 0
        && hbh[2] == TLV_JUMBO
        && hbh[3] == 4
}

/// The Hop-by-Hop header carrying only a Jumbo Payload option of
/// `jumbo_len`, followed by `next` (`ipv6_gro_complete`, 5.19–6.19).
pub fn jumbo_hbh(next: u8, jumbo_len: u32) -> [u8; JUMBO_HBH_LEN] {
    let mut h = [0u8; JUMBO_HBH_LEN];
    h[ext_field::NEXT_HEADER] = next;
    h[2] = TLV_JUMBO;
    h[3] = 4;
    h[4..8].copy_from_slice(&jumbo_len.to_be_bytes());
    h
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6<T> {
    /// Writes version 6, the traffic class and the flow label.
    pub fn set_first_word(&mut self, traffic_class: u8, flow_label: u32) {
        let w =
            (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & first_word::FLOW_LABEL);
        super::put32(self.buf.as_mut(), field::VERSION_TC_FLOW.start, w)
    }
    /// Writes the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::PAYLOAD_LEN.start, v)
    }
    /// Writes the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buf.as_mut()[field::NEXT_HEADER] = v
    }
    /// Writes the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buf.as_mut()[field::HOP_LIMIT] = v
    }
    /// Writes the source address.
    pub fn set_src(&mut self, a: &[u8; 16]) {
        self.buf.as_mut()[field::SRC].copy_from_slice(a)
    }
    /// Writes the destination address.
    pub fn set_dst(&mut self, a: &[u8; 16]) {
        self.buf.as_mut()[field::DST].copy_from_slice(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(next: u8, plen: u16) -> Vec<u8> {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[1] = 0x01;
        h[2] = 0x23;
        h[3] = 0x45;
        h[4..6].copy_from_slice(&plen.to_be_bytes());
        h[6] = next;
        h[7] = 64;
        h
    }

    #[test]
    fn fields() {
        let h = header(6, 20);
        let v = Ipv6::new_checked(&h[..]).unwrap();
        assert_eq!(v.flow_label(), 0x12345);
        assert_eq!(
            (v.payload_len(), v.next_header(), v.hop_limit()),
            (20, 6, 64)
        );
        assert_eq!(v.walk_ext().unwrap().upper_offset, 40);
    }

    #[test]
    fn hop_by_hop_jumbo_is_found() {
        let mut h = header(0, 0);
        h.extend_from_slice(&[6, 0, TLV_JUMBO, 4, 0, 2, 0xcd, 0x68]);
        let c = Ipv6::new_checked(&h[..]).unwrap().walk_ext().unwrap();
        assert_eq!((c.upper, c.upper_offset, c.jumbo), (6, 48, Some(0x2cd68)));
    }

    #[test]
    fn truncated_and_looping_chains_are_errors() {
        let mut h = header(60, 0);
        h.extend_from_slice(&[6, 1, 0, 0]);
        assert!(Ipv6::new_checked(&h[..]).unwrap().walk_ext().is_err());
        let mut h = header(60, 0);
        for _ in 0..20 {
            h.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert!(Ipv6::new_checked(&h[..]).unwrap().walk_ext().is_err());
    }
}
