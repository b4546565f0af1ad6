//! Where the headers of a packet are: the one offsets type of the engine.
//!
//! GRO records a [`Layout`] for each frame it classifies and each packet it
//! holds; GSO finds one for each super-packet it segments; `vnet` derives
//! `csum_start` and `hdr_len` from it. Offsets count from the start of the
//! frame (the link header).

use crate::wire::{IpVersion, Transport};

/// The headers of a TCP or UDP packet, possibly inside a tunnel.
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
    /// The tunnel's outer headers, if encapsulated (one level: the
    /// kernel's `encap_mark`).
    pub outer: Option<OuterLayout>,
}

/// How the inner packet is carried after the outer IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// UDP, VXLAN (8 bytes), inner Ethernet (`vxlan_gro_receive`).
    Vxlan,
    /// UDP, Geneve (`len` bytes, options included), then an inner
    /// Ethernet header when `eth` (protocol type `ETH_P_TEB`), else the
    /// inner IP header directly (`geneve_gro_receive`).
    Geneve {
        /// Header length, options included.
        len: u16,
        /// An inner Ethernet header follows.
        eth: bool,
    },
    /// GRE (`len` bytes: 4, plus 4 for each of checksum and key), then an
    /// inner Ethernet header when `eth` (gretap), else the inner IP header
    /// (`gre_gro_receive`, `net/ipv4/gre_offload.c`).
    Gre {
        /// Header length with its optional fields.
        len: u16,
        /// An inner Ethernet header follows (gretap).
        eth: bool,
    },
    /// The inner IP header right after the outer one: IPIP, SIT, IPv6 in
    /// IPv6, IPv4 in IPv6 (`ipip_gro_receive`, `sit_ip6ip6_gro_receive`,
    /// `ip4ip6_gro_receive`).
    IpInIp,
}

/// The outer headers of a tunnelled packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OuterLayout {
    /// The outer network header.
    pub l3_off: usize,
    /// Its version.
    pub ip: IpVersion,
    /// The header after the outer network header: the outer UDP header
    /// (VXLAN, Geneve), the GRE header, or the inner IP header (IP in IP).
    pub encap_off: usize,
    /// What starts at `encap_off`.
    pub encap: Encap,
}

impl OuterLayout {
    /// Offset of the outer UDP header of a UDP tunnel.
    #[inline]
    pub fn udp_off(&self) -> Option<usize> {
        matches!(self.encap, Encap::Vxlan | Encap::Geneve { .. }).then_some(self.encap_off)
    }

    /// Offset of the tunnel header after the outer UDP header (VXLAN,
    /// Geneve), or of the GRE header.
    #[inline]
    pub fn tunnel_header_off(&self) -> usize {
        match self.encap {
            Encap::Vxlan | Encap::Geneve { .. } => self.encap_off + crate::wire::udp::HEADER_LEN,
            Encap::Gre { .. } | Encap::IpInIp => self.encap_off,
        }
    }

    /// Offset of the VXLAN header.
    #[inline]
    pub fn vxlan_off(&self) -> usize {
        self.tunnel_header_off()
    }

    /// Offset of the inner Ethernet header, for tunnels that carry one.
    #[inline]
    pub fn inner_eth_off(&self) -> usize {
        let t = self.tunnel_header_off();
        match self.encap {
            Encap::Vxlan => t + crate::wire::vxlan::HEADER_LEN,
            Encap::Geneve { len, .. } | Encap::Gre { len, .. } => t + len as usize,
            Encap::IpInIp => t,
        }
    }

    /// Offset of the inner network header.
    #[inline]
    pub fn inner_l3_off(&self) -> usize {
        let eth = match self.encap {
            Encap::Vxlan => true,
            Encap::Geneve { eth, .. } | Encap::Gre { eth, .. } => eth,
            Encap::IpInIp => false,
        };
        self.inner_eth_off()
            + if eth {
                crate::wire::ethernet::HEADER_LEN
            } else {
                0
            }
    }

    /// The tunnel's bytes between the outer network header and the inner
    /// network header that GRO compares for "same flow" beyond the outer
    /// IP header: VXLAN header + inner Ethernet, Geneve header (options
    /// included, `memcmp` of `gh_len`) + inner Ethernet, GRE header
    /// (flags, protocol, key) + inner Ethernet. Empty for IP in IP.
    #[inline]
    pub fn key_range(&self) -> core::ops::Range<usize> {
        self.tunnel_header_off()..self.inner_l3_off()
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
