//! Typed, zero-copy views over packet bytes, one module per header.
//!
//! Each view wraps any `T: AsRef<[u8]>` (read) or `AsMut<[u8]>` (write) and
//! has a checked constructor (`new_checked`) that verifies the *header* is
//! present. Views never require the payload to be complete: captures are
//! often cut by a snap length, and BIG TCP / TSO frames carry an IPv4 total
//! length of 0 or an IPv6 payload length of 0 with a Jumbo option. Accessors
//! report what the header says; the GRO and GSO layers relate it to the
//! bytes actually present.
//!
//! Every module also names its fields: `field::X` is the byte offset (or
//! range) of field X from the start of that header. The views, the GRO and
//! GSO layers and the packet builder all read and write through these names,
//! so a header's layout is written down once.
//!
//! ```text
//!  link (Ethernet / 802.1Q / QinQ / SLL / SLL2 / raw)
//!   └─ IPv4 (options) | IPv6 (extension headers, Hop-by-Hop Jumbo)
//!       └─ TCP (options) | UDP ─ VXLAN ─ inner Ethernet ...
//! ```

pub mod ethernet;
pub mod geneve;
pub mod gre;
pub mod ipv4;
pub mod ipv6;
pub mod sll;
pub mod tcp;
pub mod udp;
pub mod vxlan;

/// IP protocol numbers (the IPv4 `protocol` field and the IPv6 next-header
/// values share one IANA registry).
pub mod ip_proto {
    /// IPv6 Hop-by-Hop Options.
    pub const HOP_BY_HOP: u8 = 0;
    /// IPv4-in-IP (IPIP).
    pub const IPIP: u8 = 4;
    /// Transmission Control Protocol.
    pub const TCP: u8 = 6;
    /// User Datagram Protocol.
    pub const UDP: u8 = 17;
    /// IPv6-in-IP (SIT).
    pub const IPV6: u8 = 41;
    /// IPv6 Routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Generic Routing Encapsulation.
    pub const GRE: u8 = 47;
    /// Encapsulating Security Payload.
    pub const ESP: u8 = 50;
    /// Authentication Header.
    pub const AH: u8 = 51;
    /// ICMP for IPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 No Next Header.
    pub const NONE: u8 = 59;
    /// IPv6 Destination Options.
    pub const DEST_OPTS: u8 = 60;
}

/// The version of an IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpVersion {
    /// IPv4 (RFC 791).
    V4,
    /// IPv6 (RFC 8200).
    V6,
}

impl IpVersion {
    /// The pseudo-header sum for a transport segment of `l4_len` bytes under
    /// the IP header of this version at the start of `ip_header` (its
    /// addresses are read). Here rather than in `checksum`, so that the
    /// checksum arithmetic stays a leaf that the views build on.
    #[inline]
    pub fn pseudo_header(self, ip_header: &[u8], proto: u8, l4_len: u32) -> u64 {
        match self {
            IpVersion::V4 => {
                let (src, dst) = ipv4::addrs(ip_header);
                crate::checksum::pseudo_ipv4(src, dst, proto, l4_len)
            }
            IpVersion::V6 => {
                let (src, dst) = ipv6::addrs(ip_header);
                crate::checksum::pseudo_ipv6(src, dst, proto, l4_len)
            }
        }
    }

    /// The version from an EtherType, if it names IPv4 or IPv6.
    #[inline]
    pub fn from_ethertype(et: u16) -> Option<Self> {
        match et {
            ethernet::ethertype::IPV4 => Some(IpVersion::V4),
            ethernet::ethertype::IPV6 => Some(IpVersion::V6),
            _ => None,
        }
    }

    /// The EtherType that carries this version.
    #[inline]
    pub fn ethertype(self) -> u16 {
        match self {
            IpVersion::V4 => ethernet::ethertype::IPV4,
            IpVersion::V6 => ethernet::ethertype::IPV6,
        }
    }

    /// True for IPv6.
    #[inline]
    pub fn is_v6(self) -> bool {
        self == IpVersion::V6
    }

    /// Length of the fixed header (IPv4 without options).
    #[inline]
    pub fn min_header_len(self) -> usize {
        match self {
            IpVersion::V4 => ipv4::MIN_HEADER_LEN,
            IpVersion::V6 => ipv6::HEADER_LEN,
        }
    }
}

/// The transport protocols the engine coalesces and segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// TCP (protocol 6).
    Tcp,
    /// UDP (protocol 17).
    Udp,
}

impl Transport {
    /// The transport for an IP protocol number, if the engine handles it.
    #[inline]
    pub fn from_protocol(p: u8) -> Option<Self> {
        match p {
            ip_proto::TCP => Some(Transport::Tcp),
            ip_proto::UDP => Some(Transport::Udp),
            _ => None,
        }
    }

    /// The IP protocol number.
    #[inline]
    pub fn protocol(self) -> u8 {
        match self {
            Transport::Tcp => ip_proto::TCP,
            Transport::Udp => ip_proto::UDP,
        }
    }

    /// Offset of the checksum field in the transport header.
    #[inline]
    pub fn checksum_offset(self) -> usize {
        match self {
            Transport::Tcp => tcp::field::CHECKSUM,
            Transport::Udp => udp::field::CHECKSUM,
        }
    }
}

use core::fmt;

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The header being read, e.g. `"IPv4"`.
    pub header: &'static str,
    /// The field that is short or inconsistent, e.g. `"ihl"`.
    pub field: &'static str,
    /// Byte offset of the header within the buffer handed to the view.
    pub offset: usize,
    /// What was wrong.
    pub kind: WireErrorKind,
}

/// The kind of a [`WireError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireErrorKind {
    /// The buffer ends before the field does.
    Truncated {
        /// Bytes the field needs.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// The field holds a value the header cannot have.
    Invalid {
        /// The value read.
        found: u64,
        /// What the header allows.
        expected: &'static str,
    },
}

impl WireError {
    pub(crate) fn truncated(
        header: &'static str,
        field: &'static str,
        need: usize,
        have: usize,
    ) -> Self {
        WireError {
            header,
            field,
            offset: 0,
            kind: WireErrorKind::Truncated { need, have },
        }
    }

    pub(crate) fn invalid(
        header: &'static str,
        field: &'static str,
        found: u64,
        expected: &'static str,
    ) -> Self {
        WireError {
            header,
            field,
            offset: 0,
            kind: WireErrorKind::Invalid { found, expected },
        }
    }

    /// The same error, with its offset moved by `base` (for nested headers).
    pub fn at(mut self, base: usize) -> Self {
        self.offset += base;
        self
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WireErrorKind::Truncated { need, have } => write!(
                f,
                "{} header at byte {}: field {} needs {} bytes, only {} present",
                self.header, self.offset, self.field, need, have
            ),
            WireErrorKind::Invalid { found, expected } => write!(
                f,
                "{} header at byte {}: field {} = {} (expected {})",
                self.header, self.offset, self.field, found, expected
            ),
        }
    }
}

impl std::error::Error for WireError {}

// The byte-order helpers are on every per-packet path: always inlined, one
// bounds check per field.

#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(b[at..at + 2].try_into().expect("2-byte field"))
}

#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4-byte field"))
}

#[inline(always)]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Computes a TCP or UDP checksum from scratch (UDP: 0 goes out as 0xFFFF).
pub(crate) fn fill_l4_checksum(
    seg: &mut [u8],
    l3: usize,
    l4: usize,
    ip: IpVersion,
    proto: Transport,
) {
    let field = l4 + proto.checksum_offset();
    put16(seg, field, 0);
    let len = (seg.len() - l4) as u32;
    let pseudo = ip.pseudo_header(&seg[l3..], proto.protocol(), len);
    let mut c = !crate::checksum::fold(crate::checksum::sum_bytes(pseudo, &seg[l4..]));
    if proto == Transport::Udp && c == 0 {
        c = 0xffff; // CSUM_MANGLED_0
    }
    put16(seg, field, c);
}
