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

pub const HEADER_LEN: usize = 40;
/// Longest extension-header chain walked (a loop guard).
pub const MAX_EXT_HEADERS: usize = 16;

/// Next-header values.
pub mod next_header {
    pub const HOP_BY_HOP: u8 = 0;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NONE: u8 = 59;
    pub const DEST_OPTS: u8 = 60;
}

/// Jumbo Payload option type (`IPV6_TLV_JUMBO`).
pub const TLV_JUMBO: u8 = 0xc2;

/// A view of an IPv6 fixed header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv6<T> {
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
    pub fn new_unchecked(buf: T) -> Self {
        Ipv6 { buf }
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Version, traffic class and flow label word.
    pub fn first_word(&self) -> u32 {
        be32(self.b(), 0)
    }
    pub fn traffic_class(&self) -> u8 {
        ((self.first_word() >> 20) & 0xff) as u8
    }
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), 4)
    }
    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }
    pub fn src(&self) -> [u8; 16] {
        self.b()[8..24].try_into().expect("checked length")
    }
    pub fn dst(&self) -> [u8; 16] {
        self.b()[24..40].try_into().expect("checked length")
    }

    /// Walks the extension headers that Linux GRO/GSO skips
    /// (`INET6_PROTO_GSO_EXTHDR`: Hop-by-Hop, Routing, Destination Options)
    /// and reports where the upper layer starts.
    pub fn walk_ext(&self) -> Result<ExtChain, WireError> {
        let b = self.b();
        let mut chain = ExtChain {
            upper: self.next_header(),
            upper_offset: HEADER_LEN,
            count: 0,
            jumbo: None,
        };
        while matches!(
            chain.upper,
            next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS
        ) {
            if chain.count == MAX_EXT_HEADERS {
                return Err(WireError::invalid(
                    "IPv6",
                    "extension header count",
                    chain.count as u64 + 1,
                    "at most 16",
                ));
            }
            let at = chain.upper_offset;
            if b.len() < at + 2 {
                return Err(WireError::truncated(
                    "IPv6 extension",
                    "header",
                    2,
                    b.len() - at.min(b.len()),
                )
                .at(at));
            }
            let len = (b[at + 1] as usize + 1) * 8;
            if b.len() < at + len {
                return Err(
                    WireError::truncated("IPv6 extension", "length", len, b.len() - at).at(at),
                );
            }
            if chain.upper == next_header::HOP_BY_HOP && chain.count == 0 {
                chain.jumbo = jumbo_option(&b[at..at + len]);
            }
            chain.upper = b[at];
            chain.upper_offset += len;
            chain.count += 1;
        }
        Ok(chain)
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

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6<T> {
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v)
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buf.as_mut()[6] = v
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buf.as_mut()[7] = v
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
