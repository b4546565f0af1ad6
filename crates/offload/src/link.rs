//! Link layers the engine accepts, and how to find the network header.
//!
//! The engine is told the link type of each frame (from the capture's
//! interface). It maps pcap `LINKTYPE_*` numbers here so that the capture
//! crate and the engine stay independent.

use crate::wire::ethernet::{self, ethertype, Ethernet};
use crate::wire::sll;
use crate::wire::WireError;

/// A link layer the engine can dissect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// Ethernet II, possibly VLAN tagged (`LINKTYPE_ETHERNET` = 1).
    Ethernet,
    /// Raw IP, version from the first nibble (`LINKTYPE_RAW` = 101, DLT 12/14).
    RawIp,
    /// Raw IPv4 only (`LINKTYPE_IPV4` = 228).
    Ipv4,
    /// Raw IPv6 only (`LINKTYPE_IPV6` = 229).
    Ipv6,
    /// Linux cooked capture v1 (`LINKTYPE_LINUX_SLL` = 113).
    LinuxSll,
    /// Linux cooked capture v2 (`LINKTYPE_LINUX_SLL2` = 276).
    LinuxSll2,
    /// BSD loopback (`LINKTYPE_NULL` = 0, macOS and BSD `lo0`): a 4-byte
    /// address family in the byte order of the host that wrote the file.
    Null,
    /// OpenBSD loopback (`LINKTYPE_LOOP` = 108): the same header, the
    /// family in network byte order.
    Loop,
}

impl LinkKind {
    /// Maps a pcap/pcapng link type number; `None` for link types the engine
    /// does not dissect.
    pub fn from_linktype(linktype: u32) -> Option<Self> {
        Some(match linktype {
            1 => LinkKind::Ethernet,
            101 | 12 | 14 => LinkKind::RawIp,
            228 => LinkKind::Ipv4,
            229 => LinkKind::Ipv6,
            113 => LinkKind::LinuxSll,
            276 => LinkKind::LinuxSll2,
            0 => LinkKind::Null,
            108 => LinkKind::Loop,
            _ => return None,
        })
    }

    /// The pcap link type number written for this link kind.
    pub fn linktype(self) -> u32 {
        match self {
            LinkKind::Ethernet => 1,
            LinkKind::RawIp => 101,
            LinkKind::Ipv4 => 228,
            LinkKind::Ipv6 => 229,
            LinkKind::LinuxSll => 113,
            LinkKind::LinuxSll2 => 276,
            LinkKind::Null => 0,
            LinkKind::Loop => 108,
        }
    }
}

/// Where the network header of a frame starts and what the link says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Info {
    /// Offset of the L3 header.
    pub l3_offset: usize,
    /// The EtherType of the L3 header (after VLAN tags).
    pub ethertype: u16,
    /// The outer protocol as the kernel's `skb->protocol` would be: the
    /// first EtherType (a VLAN TPID for tagged frames). It selects between
    /// `gro_max_size` and `gro_ipv4_max_size` (`netif_get_gro_max_size`).
    pub outer_protocol: u16,
    /// Number of in-band VLAN tags.
    pub vlan_tags: u8,
    /// The link header bytes that make up the GRO flow key
    /// (`compare_ether_header` + VLAN headers), as a range of the frame.
    pub key_len: usize,
    /// The capture saw this frame leave the host (cooked captures only).
    pub outgoing: bool,
    /// Every in-band VLAN tag uses a TPID with a kernel GRO handler
    /// (802.1Q or 802.1ad: `vlan_gro_receive` is registered for those two
    /// only); true when there is no tag.
    pub vlan_tpids_offloaded: bool,
}

impl L2Info {
    fn from_tags(tags: &ethernet::Tags, outer_protocol: u16, outgoing: bool) -> Self {
        L2Info {
            l3_offset: tags.l3_offset,
            ethertype: tags.ethertype,
            outer_protocol,
            vlan_tags: tags.count as u8,
            key_len: tags.l3_offset,
            outgoing,
            vlan_tpids_offloaded: tags.tpids[..tags.count]
                .iter()
                .all(|&t| t == ethertype::VLAN || t == ethertype::QINQ),
        }
    }
}

/// The BSD loopback header: the address family, 4 bytes.
const LOOPBACK_HEADER_LEN: usize = 4;

/// Finds the network header of `frame`.
pub fn dissect_l2(link: LinkKind, frame: &[u8]) -> Result<L2Info, WireError> {
    match link {
        LinkKind::Ethernet => {
            let eth = Ethernet::new_checked(frame)?;
            let et = eth.ethertype();
            if !ethernet::is_vlan_tpid(et) {
                // Untagged, nearly every frame: what `from_tags` gives for
                // no tag, without building the tag arrays (measured: the
                // walk was a tenth of `offload analyze`'s CPU).
                return Ok(L2Info {
                    l3_offset: ethernet::HEADER_LEN,
                    ethertype: et,
                    outer_protocol: et,
                    vlan_tags: 0,
                    key_len: ethernet::HEADER_LEN,
                    outgoing: false,
                    vlan_tpids_offloaded: true,
                });
            }
            let tags = eth.walk_tags()?;
            Ok(L2Info::from_tags(&tags, eth.ethertype(), false))
        }
        LinkKind::RawIp | LinkKind::Ipv4 | LinkKind::Ipv6 => {
            let version = frame.first().map(|b| b >> 4).unwrap_or(0);
            let et = match (link, version) {
                (LinkKind::Ipv4, _) | (LinkKind::RawIp, 4) => ethertype::IPV4,
                (LinkKind::Ipv6, _) | (LinkKind::RawIp, 6) => ethertype::IPV6,
                _ => 0,
            };
            Ok(L2Info {
                l3_offset: 0,
                ethertype: et,
                outer_protocol: et,
                vlan_tags: 0,
                key_len: 0,
                outgoing: false,
                vlan_tpids_offloaded: true,
            })
        }
        LinkKind::Null | LinkKind::Loop => {
            let h: [u8; 4] = frame
                .get(..LOOPBACK_HEADER_LEN)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| {
                    WireError::truncated("loopback", "family", LOOPBACK_HEADER_LEN, frame.len())
                })?;
            // LINKTYPE_NULL's family is in the writer's byte order: a
            // value with bits above the low 16 was written the other way
            // round (as libpcap and Wireshark tell it).
            let mut family = u32::from_be_bytes(h);
            if link == LinkKind::Null && family & 0xffff_0000 != 0 {
                family = family.swap_bytes();
            }
            // AF_INET is 2 everywhere; AF_INET6 is 24 (NetBSD, OpenBSD),
            // 28 (FreeBSD) or 30 (macOS).
            let et = match family {
                2 => ethertype::IPV4,
                24 | 28 | 30 => ethertype::IPV6,
                _ => 0,
            };
            Ok(L2Info {
                l3_offset: LOOPBACK_HEADER_LEN,
                ethertype: et,
                outer_protocol: et,
                vlan_tags: 0,
                key_len: LOOPBACK_HEADER_LEN,
                outgoing: false,
                vlan_tpids_offloaded: true,
            })
        }
        LinkKind::LinuxSll | LinkKind::LinuxSll2 => {
            let c = if link == LinkKind::LinuxSll {
                sll::parse_sll(frame)?
            } else {
                sll::parse_sll2(frame)?
            };
            // Cooked captures keep VLAN tags in-band only when the tag was
            // not offloaded; walk them like Ethernet does.
            let tags = ethernet::walk_vlan_tags(frame, c.protocol, c.header_len)?;
            Ok(L2Info::from_tags(
                &tags,
                c.protocol,
                c.pkttype == sll::pkttype::OUTGOING,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sll2_with_tag(tpid: u16) -> Vec<u8> {
        let mut f = vec![0u8; sll::SLL2_LEN];
        f[0..2].copy_from_slice(&tpid.to_be_bytes());
        // A link address whose last bytes look like a TPID: the walk must
        // read TPIDs from the type fields, not from before the tag.
        f[18..20].copy_from_slice(&ethertype::QINQ_OLD.to_be_bytes());
        f.extend_from_slice(&[0x00, 0x64, 0x08, 0x00]);
        f.extend_from_slice(&[0x45; 20]);
        f
    }

    #[test]
    fn cooked_vlan_tags_report_their_tpids() {
        let i = dissect_l2(LinkKind::LinuxSll2, &sll2_with_tag(ethertype::VLAN)).unwrap();
        assert_eq!(
            (i.vlan_tags, i.l3_offset, i.ethertype),
            (1, 24, ethertype::IPV4)
        );
        assert!(i.vlan_tpids_offloaded);
        let i = dissect_l2(LinkKind::LinuxSll2, &sll2_with_tag(ethertype::QINQ_OLD)).unwrap();
        assert!(!i.vlan_tpids_offloaded);
    }

    #[test]
    fn bsd_loopback_families_in_either_byte_order() {
        let mut f = vec![2, 0, 0, 0];
        f.extend_from_slice(&[0x45; 20]);
        let i = dissect_l2(LinkKind::Null, &f).unwrap();
        assert_eq!((i.l3_offset, i.ethertype), (4, ethertype::IPV4));
        f[..4].copy_from_slice(&[0, 0, 0, 30]);
        assert_eq!(
            dissect_l2(LinkKind::Null, &f).unwrap().ethertype,
            ethertype::IPV6
        );
        assert_eq!(
            dissect_l2(LinkKind::Loop, &f).unwrap().ethertype,
            ethertype::IPV6
        );
        f[..4].copy_from_slice(&[24, 0, 0, 0]);
        assert_eq!(
            dissect_l2(LinkKind::Null, &f).unwrap().ethertype,
            ethertype::IPV6
        );
        assert_eq!(dissect_l2(LinkKind::Loop, &f).unwrap().ethertype, 0);
        assert!(dissect_l2(LinkKind::Null, &f[..3]).is_err());
        assert_eq!(LinkKind::from_linktype(0), Some(LinkKind::Null));
        assert_eq!(LinkKind::Loop.linktype(), 108);
    }

    #[test]
    fn truncated_cooked_tag_is_an_error() {
        let f = sll2_with_tag(ethertype::VLAN);
        let e = dissect_l2(LinkKind::LinuxSll2, &f[..22]).unwrap_err();
        assert_eq!((e.header, e.field), ("802.1Q", "tag"));
    }
}
