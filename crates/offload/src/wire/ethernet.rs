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
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad (QinQ) service tag.
    pub const QINQ: u16 = 0x88a8;
    /// The pre-standard QinQ TPID.
    pub const QINQ_OLD: u16 = 0x9100;
    /// Transparent Ethernet bridging (Ethernet in GRE or Geneve).
    pub const TEB: u16 = 0x6558;
}

/// Byte offsets and ranges of the header's fields.
pub mod field {
    use core::ops::Range;
    /// Destination MAC.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType (a TPID when tagged).
    pub const ETHERTYPE: Range<usize> = 12..14;
}

/// Byte offsets of a VLAN tag's fields, from the end of its TPID.
pub mod vlan_field {
    use core::ops::Range;
    /// Priority, DEI and VLAN ID.
    pub const TCI: Range<usize> = 0..2;
    /// The EtherType (or next TPID) that follows.
    pub const ETHERTYPE: Range<usize> = 2..4;
}

/// The VLAN ID bits of a TCI.
pub const VID_MASK: u16 = 0x0fff;

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

    /// A view without checks; accessors may panic if the header is short.
    pub fn new_unchecked(buf: T) -> Self {
        Ethernet { buf }
    }

    /// Destination MAC.
    pub fn dst(&self) -> [u8; 6] {
        self.buf.as_ref()[field::DST]
            .try_into()
            .expect("checked length")
    }

    /// Source MAC.
    pub fn src(&self) -> [u8; 6] {
        self.buf.as_ref()[field::SRC]
            .try_into()
            .expect("checked length")
    }

    /// The outer EtherType (a TPID when the frame is tagged).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), field::ETHERTYPE.start)
    }

    /// Walks VLAN tags. Returns the VLAN IDs (outer first), the inner
    /// EtherType and the offset of the L3 header.
    pub fn walk_tags(&self) -> Result<Tags, WireError> {
        walk_vlan_tags(self.buf.as_ref(), self.ethertype(), HEADER_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ethernet<T> {
    /// Writes the destination MAC.
    pub fn set_dst(&mut self, a: [u8; 6]) {
        self.buf.as_mut()[field::DST].copy_from_slice(&a)
    }
    /// Writes the source MAC.
    pub fn set_src(&mut self, a: [u8; 6]) {
        self.buf.as_mut()[field::SRC].copy_from_slice(&a)
    }
    /// Writes the outer EtherType (or first TPID).
    pub fn set_ethertype(&mut self, t: u16) {
        super::put16(self.buf.as_mut(), field::ETHERTYPE.start, t)
    }
}

/// Writes one VLAN tag's TCI and the type that follows into the 4 bytes at
/// the start of `tag` (the TPID is the previous type field).
pub fn put_vlan_tag(tag: &mut [u8], tci: u16, next_type: u16) {
    super::put16(tag, vlan_field::TCI.start, tci);
    super::put16(tag, vlan_field::ETHERTYPE.start, next_type);
}

/// Walks the in-band VLAN tags of `frame`: `ethertype` is the type field
/// read so far and `at` where the next header starts. The one VLAN walk of
/// the engine (Ethernet and cooked captures).
pub fn walk_vlan_tags(frame: &[u8], ethertype: u16, at: usize) -> Result<Tags, WireError> {
    let mut tags = Tags {
        vids: [0; MAX_VLAN_TAGS],
        tpids: [0; MAX_VLAN_TAGS],
        count: 0,
        ethertype,
        l3_offset: at,
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
        if frame.len() < at + VLAN_TAG_LEN {
            return Err(WireError::truncated(
                "802.1Q",
                "tag",
                VLAN_TAG_LEN,
                frame.len().saturating_sub(at),
            )
            .at(at.saturating_sub(2)));
        }
        tags.tpids[tags.count] = tags.ethertype;
        tags.vids[tags.count] = be16(frame, at + vlan_field::TCI.start) & VID_MASK;
        tags.count += 1;
        tags.ethertype = be16(frame, at + vlan_field::ETHERTYPE.start);
        tags.l3_offset += VLAN_TAG_LEN;
    }
    Ok(tags)
}

/// The VLAN tags of a frame and what follows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tags {
    /// VLAN IDs, outer first; `count` are valid.
    pub vids: [u16; MAX_VLAN_TAGS],
    /// The TPID of each tag, outer first; `count` are valid.
    pub tpids: [u16; MAX_VLAN_TAGS],
    /// Number of tags.
    pub count: usize,
    /// The EtherType after the tags.
    pub ethertype: u16,
    /// Offset of the header after the tags.
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
