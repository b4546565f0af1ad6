//! VXLAN header (RFC 7348), as `vxlan_gro_receive` and
//! `vxlan_gro_prepare_receive` (`drivers/net/vxlan/vxlan_core.c`) read it.
//!
//! ```text
//!  0       8                               32
//!  | flags |          reserved (24)          |
//!  |            VNI (24)           | rsvd (8) |
//! ```
//! An inner Ethernet frame follows. GRO compares the whole 8-byte header
//! and the inner Ethernet header of held packets byte for byte.

use super::{be32, put32, WireError};

/// The UDP ports a Linux VXLAN device listens on unless told otherwise:
/// IANA's 4789 (RFC 7348; iproute2's `dstport 4789`) and 8472, the
/// kernel's own default when `ip link add ... type vxlan` names no port
/// (`vxlan_port` in `drivers/net/vxlan/vxlan_core.c`; iproute2 warns about
/// it). The GRO default and every command's `--vxlan-port` default.
pub const DEFAULT_PORTS: [u16; 2] = [4789, 8472];

/// Length of the header.
pub const HEADER_LEN: usize = 8;
/// The I flag: the VNI is valid.
pub const FLAG_VNI: u8 = 0x08;
/// The VXLAN header plus the inner Ethernet header: the bytes GRO compares
/// between a frame and a held packet (`vxlan_gro_receive`, `eth_gro_receive`).
pub const HEADER_AND_INNER_ETH_LEN: usize = HEADER_LEN + super::ethernet::HEADER_LEN;

/// Byte offsets and ranges of the header's fields.
pub mod field {
    use core::ops::Range;
    /// Flags ([`super::FLAG_VNI`]).
    pub const FLAGS: usize = 0;
    /// The VNI (high 24 bits) and a reserved byte.
    pub const VNI_WORD: Range<usize> = 4..8;
}

/// A view of a VXLAN header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Vxlan<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Vxlan<T> {
    /// Checks that the 8-byte header is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let have = buf.as_ref().len();
        if have < HEADER_LEN {
            return Err(WireError::truncated("VXLAN", "header", HEADER_LEN, have));
        }
        Ok(Vxlan { buf })
    }
    /// A view without checks.
    pub fn new_unchecked(buf: T) -> Self {
        Vxlan { buf }
    }
    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }
    /// The VXLAN network identifier.
    pub fn vni(&self) -> u32 {
        be32(self.buf.as_ref(), field::VNI_WORD.start) >> 8
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Vxlan<T> {
    /// Writes the I flag (and zero reserved bits) and `vni`.
    pub fn set_vni(&mut self, vni: u32) {
        let b = self.buf.as_mut();
        b[..field::VNI_WORD.start].copy_from_slice(&[FLAG_VNI, 0, 0, 0]);
        put32(b, field::VNI_WORD.start, vni << 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_then_parse_round_trips() {
        let mut h = [0xffu8; 8];
        Vxlan::new_unchecked(&mut h[..]).set_vni(0xabcdef);
        assert_eq!(h, [0x08, 0, 0, 0, 0xab, 0xcd, 0xef, 0]);
        let v = Vxlan::new_checked(&h[..]).unwrap();
        assert_eq!((v.flags(), v.vni()), (FLAG_VNI, 0xabcdef));
        assert!(Vxlan::new_checked(&h[..7]).is_err());
    }
}
