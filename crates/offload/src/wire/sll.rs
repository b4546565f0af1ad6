//! Linux "cooked" capture headers: SLL (link type 113) and SLL2 (276).
//!
//! ```text
//! SLL : pkttype(2) arphrd(2) addrlen(2) addr(8) protocol(2)            = 16
//! SLL2: protocol(2) reserved(2) ifindex(4) arphrd(2) pkttype(1) addrlen(1) addr(8) = 20
//! ```

use super::{be16, be32, WireError};

/// Length of an SLL header.
pub const SLL_LEN: usize = 16;
/// Length of an SLL2 header.
pub const SLL2_LEN: usize = 20;

/// `sll_pkttype` values (`include/uapi/linux/if_packet.h`).
pub mod pkttype {
    /// To this host.
    pub const HOST: u16 = 0;
    /// Broadcast.
    pub const BROADCAST: u16 = 1;
    /// Multicast.
    pub const MULTICAST: u16 = 2;
    /// To another host (promiscuous).
    pub const OTHERHOST: u16 = 3;
    /// Sent by this host.
    pub const OUTGOING: u16 = 4;
}

/// The fields of a cooked header that matter to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cooked {
    /// `sll_pkttype` ([`pkttype`]).
    pub pkttype: u16,
    /// `ARPHRD_*` device type.
    pub arphrd: u16,
    /// The EtherType of the payload.
    pub protocol: u16,
    /// Interface index (SLL2 only).
    pub ifindex: Option<u32>,
    /// Link-layer source address, zero padded to 8 bytes.
    pub addr: [u8; 8],
    /// Header length (16 or 20).
    pub header_len: usize,
}

/// Reads an SLL (v1) header.
pub fn parse_sll(b: &[u8]) -> Result<Cooked, WireError> {
    if b.len() < SLL_LEN {
        return Err(WireError::truncated("SLL", "header", SLL_LEN, b.len()));
    }
    Ok(Cooked {
        pkttype: be16(b, 0),
        arphrd: be16(b, 2),
        addr: b[6..14].try_into().expect("checked length"),
        protocol: be16(b, 14),
        ifindex: None,
        header_len: SLL_LEN,
    })
}

/// Reads an SLL2 header.
pub fn parse_sll2(b: &[u8]) -> Result<Cooked, WireError> {
    if b.len() < SLL2_LEN {
        return Err(WireError::truncated("SLL2", "header", SLL2_LEN, b.len()));
    }
    Ok(Cooked {
        protocol: be16(b, 0),
        ifindex: Some(be32(b, 4)),
        arphrd: be16(b, 8),
        pkttype: b[10] as u16,
        addr: b[12..20].try_into().expect("checked length"),
        header_len: SLL2_LEN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sll_fields() {
        let mut h = [0u8; 16];
        h[1] = 4; // outgoing
        h[3] = 1; // ARPHRD_ETHER
        h[5] = 6;
        h[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        h[14..16].copy_from_slice(&0x86ddu16.to_be_bytes());
        let c = parse_sll(&h).unwrap();
        assert_eq!(
            (c.pkttype, c.arphrd, c.protocol),
            (pkttype::OUTGOING, 1, 0x86dd)
        );
    }

    #[test]
    fn sll2_fields() {
        let mut h = [0u8; 20];
        h[0..2].copy_from_slice(&0x0800u16.to_be_bytes());
        h[4..8].copy_from_slice(&7u32.to_be_bytes());
        h[10] = 0;
        let c = parse_sll2(&h).unwrap();
        assert_eq!(
            (c.protocol, c.ifindex, c.pkttype),
            (0x0800, Some(7), pkttype::HOST)
        );
        assert!(parse_sll2(&h[..19]).is_err());
    }
}
