//! Link-layer header types (the `LINKTYPE_*` registry shared by pcap and pcapng).
//!
//! A [`LinkType`] is a plain number: values this crate does not know are carried
//! through unchanged so that the caller (the engine) decides what to do with them.
//! The named constants are the ones the engine parses, plus a few that are common
//! enough to name in messages.

use std::fmt;

/// A `LINKTYPE_*` value as stored in a pcap file header or a pcapng Interface
/// Description Block. Unknown values are kept as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u32);

impl LinkType {
    /// `LINKTYPE_NULL` (0): BSD loopback, a 4-byte host-order address family
    /// before the IP header. Known, but the engine may not support it.
    pub const NULL: LinkType = LinkType(0);
    /// `LINKTYPE_ETHERNET` (1): Ethernet II / 802.3 header.
    pub const ETHERNET: LinkType = LinkType(1);
    /// `DLT_RAW` as written by some BSDs (12): raw IPv4 or IPv6, no link header.
    pub const RAW_BSD: LinkType = LinkType(12);
    /// `DLT_RAW` as written by OpenBSD (14): raw IPv4 or IPv6, no link header.
    pub const RAW_OPENBSD: LinkType = LinkType(14);
    /// `LINKTYPE_RAW` (101): raw IPv4 or IPv6, the version nibble tells which.
    pub const RAW: LinkType = LinkType(101);
    /// `LINKTYPE_LINUX_SLL` (113): Linux "cooked" capture header, version 1 (16 bytes).
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// `LINKTYPE_IPV4` (228): raw IPv4 only.
    pub const IPV4: LinkType = LinkType(228);
    /// `LINKTYPE_IPV6` (229): raw IPv6 only.
    pub const IPV6: LinkType = LinkType(229);
    /// `LINKTYPE_LINUX_SLL2` (276): Linux "cooked" capture header, version 2 (20 bytes).
    pub const LINUX_SLL2: LinkType = LinkType(276);

    /// True for every value that means "an IP packet with no link header,
    /// version taken from the first nibble": 101, and 12/14 which older BSD
    /// tools wrote for the same thing (Wireshark reads them so too).
    pub fn is_raw_ip(self) -> bool {
        matches!(
            self,
            LinkType::RAW | LinkType::RAW_BSD | LinkType::RAW_OPENBSD
        )
    }

    /// The registry name of the known types (`"ETHERNET"`, `"RAW"`, ...), `None` otherwise.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            LinkType::NULL => "NULL",
            LinkType::ETHERNET => "ETHERNET",
            LinkType::RAW_BSD | LinkType::RAW_OPENBSD | LinkType::RAW => "RAW",
            LinkType::LINUX_SLL => "LINUX_SLL",
            LinkType::IPV4 => "IPV4",
            LinkType::IPV6 => "IPV6",
            LinkType::LINUX_SLL2 => "LINUX_SLL2",
            _ => return None,
        })
    }
}

impl fmt::Display for LinkType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_aliases_are_raw_ip_and_others_are_not() {
        for lt in [LinkType::RAW, LinkType(12), LinkType(14)] {
            assert!(lt.is_raw_ip(), "{lt}");
        }
        for lt in [
            LinkType::ETHERNET,
            LinkType::IPV4,
            LinkType::IPV6,
            LinkType(13),
        ] {
            assert!(!lt.is_raw_ip(), "{lt}");
        }
    }

    #[test]
    fn display_names_known_and_keeps_unknown_numbers() {
        assert_eq!(LinkType::LINUX_SLL2.to_string(), "LINUX_SLL2 (276)");
        assert_eq!(LinkType(4242).to_string(), "4242");
        assert_eq!(LinkType(4242).name(), None);
    }
}
