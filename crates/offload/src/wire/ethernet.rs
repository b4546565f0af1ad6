//! Ethernet II with 802.1Q / 802.1ad (QinQ) tags.
//!
//! ```text
//!  0      6      12     14
//!  | dst  | src  | type | (TPID=0x8100/0x88a8/0x9100: TCI, type)* | payload
//! ```

use super::{be16, WireError};

/// Length of the untagged Ethernet header.
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TCI + inner EtherType).
pub const VLAN_TAG_LEN: usize = 4;
/// The most VLAN tags walked before giving up (a loop guard: real stacks use
/// at most two).
pub const MAX_VLAN_TAGS: usize = 8;

/// EtherType values the engine knows.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const TEB: u16 = 0x6558;
}

/// True for the TPIDs of 802.1Q and 802.1ad tags.
#[inline]
pub fn is_vlan_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD)
}

/// A read view of an Ethernet header.
#[derive(Debug, Clone, Copy)]
pub struct Ethernet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ethernet<T> {
    /// Checks that the 14-byte header is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let have = buf.as_ref().len();
        if have < HEADER_LEN {
            return Err(WireError::truncated("Ethernet", "header", HEADER_LEN, have));
        }
        Ok(Ethernet { buf })
    }

    pub fn dst(&self) -> [u8; 6] {
        self.buf.as_ref()[0..6].try_into().expect("checked length")
    }

    pub fn src(&self) -> [u8; 6] {
        self.buf.as_ref()[6..12].try_into().expect("checked length")
    }

    /// The outer EtherType (a TPID when the frame is tagged).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), 12)
    }

    /// Walks VLAN tags. Returns the VLAN IDs (outer first), the inner
    /// EtherType and the offset of the L3 header.
    pub fn walk_tags(&self) -> Result<Tags, WireError> {
        let b = self.buf.as_ref();
        let mut tags = Tags {
            vids: [0; MAX_VLAN_TAGS],
            count: 0,
            ethertype: self.ethertype(),
            l3_offset: HEADER_LEN,
        };
        while is_vlan_tpid(tags.ethertype) {
            if tags.count == MAX_VLAN_TAGS {
                return Err(WireError::invalid(
                    "802.1Q",
                    "tag count",
                    tags.count as u64 + 1,
                    "at most 8 stacked VLAN tags",
                ));
            }
            let at = tags.l3_offset;
            if b.len() < at + VLAN_TAG_LEN {
                return Err(
                    WireError::truncated("802.1Q", "tag", VLAN_TAG_LEN, b.len() - at).at(at - 2),
                );
            }
            tags.vids[tags.count] = be16(b, at) & 0x0fff;
            tags.count += 1;
            tags.ethertype = be16(b, at + 2);
            tags.l3_offset += VLAN_TAG_LEN;
        }
        Ok(tags)
    }
}

/// The VLAN tags of a frame and what follows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tags {
    pub vids: [u16; MAX_VLAN_TAGS],
    pub count: usize,
    pub ethertype: u16,
    pub l3_offset: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untagged_frame_reports_ipv4() {
        let mut f = [0u8; 20];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let t = Ethernet::new_checked(&f[..]).unwrap().walk_tags().unwrap();
        assert_eq!((t.count, t.ethertype, t.l3_offset), (0, 0x0800, 14));
    }

    #[test]
    fn qinq_frame_reports_both_vids() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x86, 0xdd]);
        let t = Ethernet::new_checked(&f[..]).unwrap().walk_tags().unwrap();
        assert_eq!(&t.vids[..t.count], &[100, 200]);
        assert_eq!((t.ethertype, t.l3_offset), (0x86dd, 22));
    }

    #[test]
    fn endless_tag_chain_is_an_error_not_a_loop() {
        let mut f = vec![0u8; 12];
        for _ in 0..20 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        let e = Ethernet::new_checked(&f[..])
            .unwrap()
            .walk_tags()
            .unwrap_err();
        assert_eq!(e.field, "tag count");
    }

    #[test]
    fn short_frame_is_truncated_error() {
        assert!(Ethernet::new_checked(&[0u8; 13][..]).is_err());
    }
}
