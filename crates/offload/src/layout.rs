//! Where the headers of a packet are: the one offsets type of the engine.
//!
//! GRO records a [`Layout`] for each frame it classifies and each packet it
//! holds; GSO finds one for each super-packet it segments; `vnet` derives
//! `csum_start` and `hdr_len` from it. Offsets count from the start of the
//! frame (the link header).

use crate::wire::{IpVersion, Transport};

/// The headers of a TCP or UDP packet, possibly inside a VXLAN tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The innermost network header.
    pub l3_off: usize,
    /// Its version.
    pub ip: IpVersion,
    /// The innermost transport header.
    pub l4_off: usize,
    /// The innermost transport protocol.
    pub l4_proto: Transport,
    /// TCP header length, or 8 for UDP. GRO leaves it 0 until its transport
    /// layer has read the header.
    pub l4_header_len: usize,
    /// End of the (inner) IP packet: Ethernet padding excluded. GRO, which
    /// takes the frame as the packet, sets the frame's length.
    pub end: usize,
    /// An 8-byte Hop-by-Hop Jumbo header at `l3_off + 40` of the innermost
    /// IPv6 header, to drop.
    pub jumbo_hbh: bool,
    /// VXLAN outer headers, if encapsulated.
    pub outer: Option<OuterLayout>,
}

/// The outer headers of a VXLAN packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OuterLayout {
    /// The outer network header.
    pub l3_off: usize,
    /// Its version.
    pub ip: IpVersion,
    /// The outer UDP header; the VXLAN header follows it.
    pub udp_off: usize,
}

impl OuterLayout {
    /// Offset of the VXLAN header.
    #[inline]
    pub fn vxlan_off(&self) -> usize {
        self.udp_off + crate::wire::udp::HEADER_LEN
    }

    /// Offset of the inner Ethernet header.
    #[inline]
    pub fn inner_eth_off(&self) -> usize {
        self.vxlan_off() + crate::wire::vxlan::HEADER_LEN
    }
}

impl Layout {
    /// True when the innermost IP header is IPv6.
    #[inline]
    pub fn is_v6(&self) -> bool {
        self.ip.is_v6()
    }

    /// Transport payload bytes.
    pub fn payload_len(&self) -> usize {
        self.end.saturating_sub(self.l4_off + self.l4_header_len)
    }

    /// Offset of the transport payload.
    pub fn payload_off(&self) -> usize {
        self.l4_off + self.l4_header_len
    }

    /// The outermost IP header: the tunnel's, or the only one.
    #[inline]
    pub fn first_l3(&self) -> (usize, IpVersion) {
        match self.outer {
            Some(o) => (o.l3_off, o.ip),
            None => (self.l3_off, self.ip),
        }
    }
}
