//! GRE header view (RFC 2784 with the key and sequence extensions of
//! RFC 2890), as `gre_gro_receive` / `gre_gso_segment` read it
//! (`net/ipv4/gre_offload.c`).
//!
//! ```text
//!  0 1 2 3 4     12  15 16                             31
//!  |C|R|K|S|rsvd0| ver |           protocol type        |
//!  |      checksum (if C)       |    reserved1 (if C)    |
//!  |                   key (if K)                        |
//!  |             sequence number (if S)                  |
//! ```

use super::{be16, be32, WireError};

/// The fixed part: flags/version and protocol.
pub const BASE_LEN: usize = 4;

/// Flag bits of the first 16-bit word (`GRE_*`, `include/net/gre.h`).
pub mod flags {
    /// Checksum present.
    pub const CSUM: u16 = 0x8000;
    /// Routing present (RFC 1701; never offloaded).
    pub const ROUTING: u16 = 0x4000;
    /// Key present.
    pub const KEY: u16 = 0x2000;
    /// Sequence number present.
    pub const SEQ: u16 = 0x1000;
    /// Version bits.
    pub const VERSION: u16 = 0x0007;
}

/// A view of a GRE header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Gre<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Gre<T> {
    /// Checks that the base header and every optional field its flags
    /// announce are present, and version 0 (version 1 is PPTP's
    /// enhanced GRE, which no offload handles).
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < BASE_LEN {
            return Err(WireError::truncated("GRE", "header", BASE_LEN, b.len()));
        }
        let g = Gre { buf };
        let v = g.flags() & flags::VERSION;
        if v != 0 {
            return Err(WireError::invalid("GRE", "version", v as u64, "0"));
        }
        let need = g.header_len();
        let have = g.buf.as_ref().len();
        if have < need {
            return Err(WireError::truncated("GRE", "optional fields", need, have));
        }
        Ok(g)
    }

    /// A view without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buf: T) -> Self {
        Gre { buf }
    }

    /// The first 16-bit word: flags and version.
    pub fn flags(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    /// The EtherType of the payload (0x6558 for Ethernet: gretap).
    pub fn protocol(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    /// The C flag: a checksum field is present.
    pub fn has_checksum(&self) -> bool {
        self.flags() & flags::CSUM != 0
    }
    /// The K flag: a key field is present.
    pub fn has_key(&self) -> bool {
        self.flags() & flags::KEY != 0
    }
    /// The S flag: a sequence number field is present.
    pub fn has_seq(&self) -> bool {
        self.flags() & flags::SEQ != 0
    }
    /// Header length with the optional fields the flags announce
    /// (`gre_calc_hlen`; the routing field of RFC 1701 is not counted,
    /// as in the kernel).
    pub fn header_len(&self) -> usize {
        BASE_LEN
            + 4 * (usize::from(self.has_checksum())
                + usize::from(self.has_key())
                + usize::from(self.has_seq()))
    }
    /// The checksum field, if present.
    pub fn checksum(&self) -> Option<u16> {
        self.has_checksum().then(|| be16(self.buf.as_ref(), 4))
    }
    /// The key, if present.
    pub fn key(&self) -> Option<u32> {
        let at = BASE_LEN + 4 * usize::from(self.has_checksum());
        self.has_key().then(|| be32(self.buf.as_ref(), at))
    }
    /// The sequence number, if present.
    pub fn seq(&self) -> Option<u32> {
        let at = BASE_LEN + 4 * (usize::from(self.has_checksum()) + usize::from(self.has_key()));
        self.has_seq().then(|| be32(self.buf.as_ref(), at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_fields_follow_the_flags() {
        // C and K and S: checksum 0xabcd, key 42, seq 7, protocol IPv4.
        let h = [
            0xb0, 0x00, 0x08, 0x00, 0xab, 0xcd, 0, 0, 0, 0, 0, 42, 0, 0, 0, 7,
        ];
        let g = Gre::new_checked(&h[..]).unwrap();
        assert_eq!(g.header_len(), 16);
        assert_eq!(g.protocol(), 0x0800);
        assert_eq!(g.checksum(), Some(0xabcd));
        assert_eq!(g.key(), Some(42));
        assert_eq!(g.seq(), Some(7));
        assert!(Gre::new_checked(&h[..15]).is_err());
        // Key only.
        let k = [0x20, 0x00, 0x65, 0x58, 0, 0, 1, 0];
        let g = Gre::new_checked(&k[..]).unwrap();
        assert_eq!((g.header_len(), g.key(), g.seq()), (8, Some(256), None));
        // Version 1 (PPTP) is refused.
        assert!(Gre::new_checked(&[0x30, 0x01, 0x88, 0x0b, 0, 0, 0, 0][..]).is_err());
    }
}
