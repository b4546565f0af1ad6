//! Geneve header view (RFC 8926), as `geneve_gro_receive` reads it
//! (`drivers/net/geneve.c`): UDP port 6081, a variable-length header whose
//! options GRO compares byte for byte.
//!
//! ```text
//!  0   2       8 9 10        16                              31
//!  |Ver| optlen |O|C| rsvd   |          protocol type         |
//!  |          virtual network identifier (VNI)   |  reserved  |
//!  |                 options (optlen × 4 bytes)               |
//! ```

use super::{be16, be32, WireError};

/// The IANA Geneve port.
pub const PORT: u16 = 6081;
/// The fixed part of the header.
pub const BASE_LEN: usize = 8;
/// Protocol type of an Ethernet payload (`ETH_P_TEB`).
pub const PROTO_TEB: u16 = 0x6558;

/// A view of a Geneve header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Geneve<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Geneve<T> {
    /// Checks that the fixed header and the options it announces are
    /// present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < BASE_LEN {
            return Err(WireError::truncated("Geneve", "header", BASE_LEN, b.len()));
        }
        let g = Geneve { buf };
        let need = g.header_len();
        let have = g.buf.as_ref().len();
        if have < need {
            return Err(WireError::truncated("Geneve", "options", need, have));
        }
        Ok(g)
    }

    /// A view without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buf: T) -> Self {
        Geneve { buf }
    }

    /// Version (0 is the only one defined; GRO takes no other).
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[0] >> 6
    }
    /// Options length in bytes.
    pub fn options_len(&self) -> usize {
        (self.buf.as_ref()[0] & 0x3f) as usize * 4
    }
    /// Header length, options included (`geneve_hlen`).
    pub fn header_len(&self) -> usize {
        BASE_LEN + self.options_len()
    }
    /// The OAM bit: control traffic, never coalesced.
    pub fn oam(&self) -> bool {
        self.buf.as_ref()[1] & 0x80 != 0
    }
    /// The critical-options bit.
    pub fn critical(&self) -> bool {
        self.buf.as_ref()[1] & 0x40 != 0
    }
    /// Protocol type of the payload (an EtherType).
    pub fn protocol(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    /// Virtual network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        be32(self.buf.as_ref(), 4) >> 8
    }
    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buf.as_ref()[BASE_LEN..self.header_len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_options() {
        // Version 0, one 8-byte option, protocol TEB, VNI 0x123456.
        let h = [
            0x02, 0x00, 0x65, 0x58, 0x12, 0x34, 0x56, 0x00, 0x01, 0x02, 0x80, 0x01, 0xde, 0xad,
            0xbe, 0xef,
        ];
        let g = Geneve::new_checked(&h[..]).unwrap();
        assert_eq!(
            (g.version(), g.header_len(), g.protocol()),
            (0, 16, PROTO_TEB)
        );
        assert_eq!(g.vni(), 0x123456);
        assert!(!g.oam() && !g.critical());
        assert_eq!(g.options().len(), 8);
        assert!(Geneve::new_checked(&h[..12]).is_err());
    }
}
