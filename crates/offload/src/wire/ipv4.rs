//! IPv4 header view (RFC 791), options allowed, total length 0 accepted.
//!
//! ```text
//!  0       4       8              16      19             31
//!  |ver|ihl|  tos  |          total length               |
//!  |      identification      |flags|  fragment offset   |
//!  |  ttl  | protocol |          header checksum         |
//!  |                 source address                      |
//!  |               destination address                   |
//! ```
//! A total length of 0 is how Linux represents IPv4 BIG TCP super-packets
//! (`iph_set_totlen`, 6.3+): the real length is the buffer's.

use super::{be16, put16, WireError};
use crate::checksum;
use core::ops::Range;

/// Length of a header without options (IHL 5).
pub const MIN_HEADER_LEN: usize = 20;
/// The first byte of a header without options: version 4, IHL 5. GRO takes
/// only this (`inet_gro_receive`: `*(u8 *)iph != 0x45`).
pub const VERSION_IHL_NO_OPTIONS: u8 = 0x45;
/// Don't Fragment, in the flags/fragment-offset word.
pub const DF: u16 = 0x4000;
/// More Fragments.
pub const MF: u16 = 0x2000;
/// The reserved ("evil") bit.
pub const RESERVED: u16 = 0x8000;
/// The fragment offset, in 8-byte units.
pub const OFFSET_MASK: u16 = 0x1fff;

/// Byte offsets (single bytes) and ranges of the header's fields.
pub mod field {
    use core::ops::Range;
    /// Version (high nibble) and IHL (low nibble, in 4-byte words).
    pub const VERSION_IHL: usize = 0;
    /// Type of service: DSCP and ECN.
    pub const TOS: usize = 1;
    /// Total length, header included (0 for BIG TCP).
    pub const TOTAL_LEN: Range<usize> = 2..4;
    /// Identification.
    pub const IDENT: Range<usize> = 4..6;
    /// Flags and fragment offset.
    pub const FRAG: Range<usize> = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload ([`crate::wire::ip_proto`]).
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Range<usize> = 10..12;
    /// Source address.
    pub const SRC: Range<usize> = 12..16;
    /// Destination address.
    pub const DST: Range<usize> = 16..20;
    /// Source and destination: the pseudo-header's and the flow key's addresses.
    pub const ADDRS: Range<usize> = 12..20;
}

/// The source and destination addresses of the header in `b`.
#[inline]
pub fn addrs(b: &[u8]) -> ([u8; 4], [u8; 4]) {
    (addr(b, field::SRC), addr(b, field::DST))
}

#[inline]
fn addr(b: &[u8], r: Range<usize>) -> [u8; 4] {
    b[r].try_into().expect("4-byte field")
}

/// A view of an IPv4 header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4<T> {
    /// Checks version 4, IHL ≥ 5 and that the whole header (with options) is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(WireError::truncated(
                "IPv4",
                "header",
                MIN_HEADER_LEN,
                b.len(),
            ));
        }
        if b[0] >> 4 != 4 {
            return Err(WireError::invalid(
                "IPv4",
                "version",
                (b[0] >> 4) as u64,
                "4",
            ));
        }
        let ihl = ((b[0] & 0x0f) as usize) * 4;
        if ihl < MIN_HEADER_LEN {
            return Err(WireError::invalid(
                "IPv4",
                "ihl",
                (b[0] & 0x0f) as u64,
                "5 to 15",
            ));
        }
        if b.len() < ihl {
            return Err(WireError::truncated("IPv4", "options", ihl, b.len()));
        }
        Ok(Ipv4 { buf })
    }

    /// A view without checks; accessors may panic if the header is short.
    pub fn new_unchecked(buf: T) -> Self {
        Ipv4 { buf }
    }

    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        ((self.b()[field::VERSION_IHL] & 0x0f) as usize) * 4
    }
    /// Type of service (DSCP and ECN).
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }
    /// The total length field as written (0 for BIG TCP).
    pub fn total_len(&self) -> u16 {
        be16(self.b(), field::TOTAL_LEN.start)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.b(), field::IDENT.start)
    }
    /// Flags and fragment offset word.
    pub fn frag_word(&self) -> u16 {
        be16(self.b(), field::FRAG.start)
    }
    /// DF is set.
    pub fn dont_fragment(&self) -> bool {
        self.frag_word() & DF != 0
    }
    /// MF set or a non-zero offset (`ip_is_fragment`).
    pub fn is_fragment(&self) -> bool {
        self.frag_word() & (MF | OFFSET_MASK) != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    /// Payload protocol ([`crate::wire::ip_proto`]).
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }
    /// The header checksum field.
    pub fn header_checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM.start)
    }
    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        addr(self.b(), field::SRC)
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        addr(self.b(), field::DST)
    }
    /// True when the header checksum verifies.
    pub fn header_checksum_ok(&self) -> bool {
        checksum::checksum(&self.b()[..self.header_len()]) == 0
    }
    /// The IP packet length: the field, or `available` (bytes from the IP
    /// header to the end of the frame) when the field is 0 (BIG TCP / TSO).
    pub fn effective_len(&self, available: usize) -> usize {
        match self.total_len() {
            0 => available,
            n => n as usize,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4<T> {
    /// Writes the total length (checksum untouched).
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::TOTAL_LEN.start, v)
    }
    /// Writes the identification.
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::IDENT.start, v)
    }
    /// Writes the flags and fragment offset word.
    pub fn set_frag_word(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::FRAG.start, v)
    }
    /// Writes the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.buf.as_mut()[field::TTL] = v
    }
    /// Writes the type of service.
    pub fn set_tos(&mut self, v: u8) {
        self.buf.as_mut()[field::TOS] = v
    }
    /// Writes the header checksum field.
    pub fn set_header_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::CHECKSUM.start, v)
    }
    /// Writes version 4 and the header length in bytes (a multiple of 4, 20 to 60).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buf.as_mut()[field::VERSION_IHL] = 0x40 | (header_len / 4) as u8;
    }
    /// Writes the payload protocol.
    pub fn set_protocol(&mut self, v: u8) {
        self.buf.as_mut()[field::PROTOCOL] = v
    }
    /// Writes the source address.
    pub fn set_src(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[field::SRC].copy_from_slice(&a)
    }
    /// Writes the destination address.
    pub fn set_dst(&mut self, a: [u8; 4]) {
        self.buf.as_mut()[field::DST].copy_from_slice(&a)
    }
    /// Recomputes the header checksum from scratch (`ip_send_check`).
    pub fn fill_header_checksum(&mut self) {
        self.set_header_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buf.as_ref()[..hl]);
        self.set_header_checksum(c);
    }
    /// Sets the total length and patches the checksum incrementally, as
    /// `inet_gro_complete` does (`iph_set_totlen` + `csum_replace2`).
    pub fn set_total_len_incremental(&mut self, v: u16) {
        let old = self.total_len();
        let check = self.header_checksum();
        self.set_total_len(v);
        self.set_header_checksum(checksum::replace2(check, old, v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> [u8; 20] {
        let mut h = [
            0x45, 0, 0, 60, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn reads_every_field() {
        let h = header();
        let v = Ipv4::new_checked(&h[..]).unwrap();
        assert_eq!(v.header_len(), 20);
        assert_eq!(v.total_len(), 60);
        assert_eq!(v.ident(), 0x1234);
        assert!(v.dont_fragment());
        assert!(!v.is_fragment());
        assert_eq!((v.ttl(), v.protocol()), (64, 6));
        assert_eq!(v.src(), [10, 0, 0, 1]);
        assert!(v.header_checksum_ok());
    }

    #[test]
    fn total_length_zero_means_buffer_length() {
        let mut h = header();
        Ipv4::new_unchecked(&mut h[..]).set_total_len_incremental(0);
        let v = Ipv4::new_checked(&h[..]).unwrap();
        assert_eq!(v.effective_len(200_000), 200_000);
        assert!(v.header_checksum_ok());
    }

    #[test]
    fn rejects_bad_version_and_ihl() {
        let mut h = header();
        h[0] = 0x65;
        assert_eq!(Ipv4::new_checked(&h[..]).unwrap_err().field, "version");
        h[0] = 0x44;
        assert_eq!(Ipv4::new_checked(&h[..]).unwrap_err().field, "ihl");
        h[0] = 0x4f;
        assert_eq!(Ipv4::new_checked(&h[..]).unwrap_err().field, "options");
    }
}
