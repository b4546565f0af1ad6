//! The GSO metadata of a super-packet, as `offload gro` stores it in pcapng.
//!
//! pcapng has no standard option for a packet's `gso_size`/`gso_type`
//! (`skb_shared_info`), and a custom option would need a Private Enterprise
//! Number we do not have. So the record travels as the packet comment
//! (`opt_comment`), which Wireshark shows and keeps on re-save:
//! `offload: gso_size=1448 gso_segs=44 gso_type=0x1`. Programs use the typed
//! [`GsoMeta`]; the text form is private to this module, and files written
//! by earlier versions (the same text) read back unchanged.

/// `skb_shinfo(skb)->gso_size / gso_segs / gso_type` of a super-packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GsoMeta {
    /// Payload bytes per segment (the MSS for TCP).
    pub gso_size: u32,
    /// Segment count (0 when the file did not say).
    pub gso_segs: u32,
    /// `SKB_GSO_*` bits (include/linux/skbuff.h).
    pub gso_type: u32,
}

const PREFIX: &str = "offload: ";

impl GsoMeta {
    /// The comment text stored in pcapng.
    pub fn to_comment(&self) -> String {
        format!(
            "{PREFIX}gso_size={} gso_segs={} gso_type={:#x}",
            self.gso_size, self.gso_segs, self.gso_type
        )
    }

    /// Reads a comment written by [`GsoMeta::to_comment`] (or by older
    /// versions of `offload gro`); `None` for any other comment.
    pub fn from_comment(comment: &[u8]) -> Option<GsoMeta> {
        let text = std::str::from_utf8(comment).ok()?.strip_prefix(PREFIX)?;
        let (mut size, mut segs, mut ty) = (None, None, None);
        for part in text.split_whitespace() {
            if let Some(v) = part.strip_prefix("gso_size=") {
                size = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("gso_segs=") {
                segs = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("gso_type=0x") {
                ty = u32::from_str_radix(v, 16).ok();
            }
        }
        let gso_size = size.filter(|s| *s > 0)?;
        Some(GsoMeta {
            gso_size,
            gso_segs: segs.unwrap_or(0),
            gso_type: ty?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_the_old_text() {
        let m = GsoMeta {
            gso_size: 8948,
            gso_segs: 7,
            gso_type: 0x11,
        };
        assert_eq!(GsoMeta::from_comment(m.to_comment().as_bytes()), Some(m));
        // Exactly what `offload gro` wrote before the typed record existed.
        assert_eq!(
            GsoMeta::from_comment(b"offload: gso_size=1448 gso_segs=44 gso_type=0x1"),
            Some(GsoMeta {
                gso_size: 1448,
                gso_segs: 44,
                gso_type: 1
            })
        );
        assert_eq!(GsoMeta::from_comment(b"gso_size=1448 gso_type=0x1"), None);
        assert_eq!(
            GsoMeta::from_comment(b"offload: gso_size=0 gso_type=0x1"),
            None
        );
        assert_eq!(GsoMeta::from_comment(b"offload: gso_size=1448"), None);
    }
}
