//! [`FrameArena`]: the packets of a batch, back to back in one buffer the
//! caller owns, so that GRO's zero-copy delivery can refer to them.
//!
//! The read side segments each super-packet straight into the arena
//! (`offload::gso::segment_layout_into`: headers rewritten, payload copied
//! once, checksums computed on the way); a [`crate::Coalescer`] running
//! zero-copy then merges them without copying a payload again (the
//! engine's `Delivered::frags` name ranges of these frames) and writes each
//! super-packet with one `writev` of vnet header, rewritten headers and the
//! payload ranges, straight out of the arena. Per byte relayed, userspace
//! copies once (into the arena) instead of twice (into a segment buffer,
//! then into GRO's merged packet).
//!
//! Frames are numbered in arrival order; a frame stays until the arena is
//! cleared, which the coalescer does when nothing it holds refers to the
//! arena any more, or by completing what it holds once the arena exceeds
//! [`FrameArena::SOFT_LIMIT`] (memory stays bounded whatever the batch).

use core::ops::Range;

use offload::RxChecksum;

/// One frame of the arena.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Staged {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) csum: RxChecksum,
    /// For a segment of a super-packet kept in [`FrameArena::src`]: where
    /// its payload came from.
    pub(crate) src: Option<SrcMap>,
}

/// A segment's payload is a copy of `src[src_start..]` (as long as the
/// payload), which begins `seg_payload` bytes into the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SrcMap {
    pub(crate) seg_payload: usize,
    pub(crate) src_start: usize,
}

impl Staged {
    /// The frame at `bytes[range]` (appended there already, e.g. by
    /// `segment_layout_into`).
    pub(crate) fn new(range: Range<usize>, csum: RxChecksum, src: Option<SrcMap>) -> Self {
        Staged {
            start: range.start,
            len: range.len(),
            csum,
            src,
        }
    }
}

/// Frames of a batch, contiguous in one buffer (see the module doc).
#[derive(Debug)]
pub struct FrameArena {
    pub(crate) bytes: Vec<u8>,
    pub(crate) frames: Vec<Staged>,
    /// Number of `frames[0]` (frame numbers start at 1 and never repeat).
    pub(crate) base: u64,
    /// Frames already handed to GRO.
    pub(crate) pushed: usize,
    /// Super-packets as read (`TunDevice::read_into` reads them here),
    /// kept as long as their segments: a segment's payload is a copy of a
    /// range of its super-packet, and the payloads of consecutive segments
    /// are consecutive ranges there, so a merged super-packet's payload
    /// ranges join into one (`writev` of 3 parts instead of 46). Allocated
    /// on first use, [`FrameArena::SRC_CAP`] bytes; `src_used` of them hold
    /// super-packets.
    pub(crate) src: Vec<u8>,
    pub(crate) src_used: usize,
}

impl Default for FrameArena {
    fn default() -> Self {
        FrameArena {
            bytes: Vec::with_capacity(Self::SOFT_LIMIT + 70_000),
            frames: Vec::with_capacity(1024),
            base: 1,
            pushed: 0,
            src: Vec::new(),
            src_used: 0,
        }
    }
}

impl FrameArena {
    /// Bytes above which the coalescer completes what it holds and clears
    /// the arena after pushing a batch: 512 KiB, eight 64 KiB super-packets,
    /// small enough to stay in L2 on most machines.
    pub const SOFT_LIMIT: usize = 512 << 10;

    /// Room for super-packets as read: the segments of what fits here stay
    /// under [`FrameArena::SOFT_LIMIT`] plus one read's worth.
    pub const SRC_CAP: usize = (512 + 192) << 10;

    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a copy of `packet`, with what is known of its checksum.
    pub fn push(&mut self, packet: &[u8], csum: RxChecksum) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(packet);
        self.frames.push(Staged {
            start,
            len: packet.len(),
            csum,
            src: None,
        });
    }

    /// The free room of the super-packet area (allocating it on first use),
    /// when at least `need` bytes: the area and where the room starts.
    pub(crate) fn src_room(&mut self, need: usize) -> Option<usize> {
        if self.src.is_empty() {
            self.src = vec![0; Self::SRC_CAP];
        }
        (self.src.len() - self.src_used >= need).then_some(self.src_used)
    }

    /// The bytes of super-packet area a frag of frame `number` (`len`
    /// bytes from `offset` into the frame) is a copy of, when known.
    pub(crate) fn src_of(&self, number: u64, offset: usize, len: usize) -> Option<Range<usize>> {
        let i = usize::try_from(number.checked_sub(self.base)?).ok()?;
        let f = self.frames.get(i)?;
        let m = f.src?;
        let from_payload = offset.checked_sub(m.seg_payload)?;
        // Never past the segment (its payload is the copy).
        (offset + len <= f.len).then_some(())?;
        let start = m.src_start + from_payload;
        (start + len <= self.src_used).then_some(start..start + len)
    }

    /// Frames staged and not yet handed to GRO.
    pub fn staged(&self) -> usize {
        self.frames.len() - self.pushed
    }

    /// Frames in the arena (handed to GRO or not).
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when the arena holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Bytes in the arena.
    pub fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// The `i`th frame of the arena (0 = oldest) and its checksum verdict.
    pub fn frame(&self, i: usize) -> Option<(&[u8], RxChecksum)> {
        self.frames
            .get(i)
            .map(|f| (&self.bytes[f.start..f.start + f.len], f.csum))
    }

    /// The frame numbered `number` (as given to GRO), if still here.
    pub(crate) fn by_number(&self, number: u64) -> Option<&[u8]> {
        let i = usize::try_from(number.checked_sub(self.base)?).ok()?;
        let f = self.frames.get(i)?;
        Some(&self.bytes[f.start..f.start + f.len])
    }

    /// Forgets every frame (the buffer's capacity is kept); numbering goes on.
    pub fn clear(&mut self) {
        self.base += self.frames.len() as u64;
        self.frames.clear();
        self.bytes.clear();
        self.pushed = 0;
        self.src_used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_survive_clears_and_frames_read_back() {
        let mut a = FrameArena::new();
        a.push(&[1, 2, 3], RxChecksum::None);
        a.push(&[4, 5], RxChecksum::Unnecessary { level: 0 });
        assert_eq!(a.by_number(1), Some(&[1u8, 2, 3][..]));
        assert_eq!(a.by_number(2), Some(&[4u8, 5][..]));
        assert_eq!(a.by_number(0), None);
        assert_eq!(a.by_number(3), None);
        assert_eq!(a.staged(), 2);
        a.clear();
        assert!(a.is_empty());
        a.push(&[9], RxChecksum::None);
        assert_eq!(a.by_number(2), None, "cleared frames are gone");
        assert_eq!(a.by_number(3), Some(&[9u8][..]), "numbering goes on");
        assert_eq!(a.frame(0).map(|(b, _)| b.to_vec()), Some(vec![9]));
    }
}
