//! The buffer of a held packet: headroom, the contiguous part, and (when
//! the engine runs zero-copy) the payload ranges left in later input
//! frames, like the kernel's `frags` / `frag_list`.

use core::ops::{Deref, DerefMut};

use crate::checksum;

/// Bytes kept free before a held packet, so that completion can insert the
/// 8-byte Hop-by-Hop Jumbo header (IPv6 BIG TCP, `ipv6_gro_complete`) by
/// moving the headers back instead of the payload forward.
pub(super) const HEADROOM: usize = 16;

/// A payload range of a delivered super-packet that stayed in its input
/// frame (zero-copy delivery, [`crate::GroEngine::set_zero_copy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frag {
    /// The frame's number, as given in [`crate::Input::frame`].
    pub frame: u64,
    /// Offset of the range in that frame.
    pub offset: u32,
    /// Length of the range.
    pub len: u32,
}

/// A held packet's bytes.
///
/// `buf` is initialised beyond the packet's end (`end`): it only grows,
/// so a merged payload is written straight into bytes that already exist
/// (no per-append capacity check of a `Vec`, and the fused
/// copy-and-checksum of [`PacketBuf::append_verified`] can write before it
/// knows whether the segment is accepted, then commit by moving `end`).
#[derive(Debug, Default)]
pub(crate) struct PacketBuf {
    buf: Vec<u8>,
    head: usize,
    end: usize,
    frags: Vec<Frag>,
    frag_bytes: usize,
}

/// The header copy of a zero-copy hold: a fixed size, at least the
/// longest plain TCP header (Ethernet + IPv6 + TCP with 40 option bytes:
/// 114), so that it compiles to a few vector moves.
const SMALL_COPY: usize = 128;

/// What a buffer grows to at least when it must grow: one legacy-sized
/// (64 KiB) super-packet with its headroom, so that a flow's merges never
/// reallocate below `GRO_LEGACY_MAX_SIZE`.
const FIRST_CAPACITY: usize = HEADROOM + 65_536 + 256;

impl PacketBuf {
    /// Makes `buf[..need]` exist (initialised), keeping its bytes.
    #[inline]
    fn room(&mut self, need: usize) {
        if self.buf.len() < need {
            self.grow(need);
        }
    }

    #[cold]
    fn grow(&mut self, need: usize) {
        let to = need.max(2 * self.buf.len()).max(FIRST_CAPACITY);
        self.buf.resize(to, 0);
    }

    /// Starts a packet with `frame`, recycling the allocations.
    pub(super) fn reset(&mut self, frame: &[u8]) {
        // The headroom's bytes are never read (only written by `insert`),
        // so a recycled buffer keeps them as they are.
        self.room(HEADROOM + frame.len());
        self.buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
        self.head = HEADROOM;
        self.end = HEADROOM + frame.len();
        self.frags.clear();
        self.frag_bytes = 0;
    }

    /// Starts a packet with `frame`'s first `header_end` bytes (at most
    /// the whole frame); the rest of the frame stays where it is, as the
    /// packet's first frag (frame number `frame_no`). Zero-copy holds:
    /// a new flow's head costs a header copy, not a payload copy.
    #[inline(always)]
    pub(super) fn reset_headers(&mut self, frame: &[u8], header_end: usize, frame_no: u64) {
        let hl = header_end.min(frame.len());
        match (
            frame.first_chunk::<SMALL_COPY>(),
            self.buf.get_mut(HEADROOM..HEADROOM + SMALL_COPY),
        ) {
            // One fixed-size copy (a few vector moves, no library call)
            // when the headers fit; the bytes past `hl` are not part of
            // the packet.
            (Some(src), Some(dst)) if hl <= SMALL_COPY => dst.copy_from_slice(src),
            _ => self.copy_headers(&frame[..hl]),
        }
        self.head = HEADROOM;
        self.end = HEADROOM + hl;
        self.frags.clear();
        self.frag_bytes = frame.len() - hl;
        if self.frag_bytes > 0 {
            self.frags.push(Frag {
                frame: frame_no,
                offset: hl as u32,
                len: self.frag_bytes as u32,
            });
        }
    }

    /// [`Self::reset_headers`]'s copy of long headers, a short frame, or
    /// into a buffer not grown yet.
    #[cold]
    fn copy_headers(&mut self, h: &[u8]) {
        self.room(HEADROOM + h.len().max(SMALL_COPY));
        self.buf[HEADROOM..HEADROOM + h.len()].copy_from_slice(h);
    }

    /// Appends a merged segment's payload: a copy, or a reference to
    /// `frame[offset..]` when zero-copy.
    #[inline(always)]
    pub(super) fn append(&mut self, frame: &[u8], offset: usize, frame_no: u64, zero_copy: bool) {
        let payload = &frame[offset..];
        if zero_copy {
            self.frags.push(Frag {
                frame: frame_no,
                offset: offset as u32,
                len: payload.len() as u32,
            });
            self.frag_bytes += payload.len();
        } else {
            let end = self.end + payload.len();
            self.room(end);
            self.buf[self.end..end].copy_from_slice(payload);
            self.end = end;
        }
    }

    /// Copies `payload` after the packet while adding it to the ones'
    /// complement sum `acc` (one pass, [`checksum::copy_and_sum`]), and
    /// keeps it only when the folded total is 0xffff (the segment's
    /// checksum verifies). Returns whether it was kept; when not, the
    /// packet is unchanged.
    #[inline]
    pub(super) fn append_verified(&mut self, payload: &[u8], acc: u64) -> bool {
        let end = self.end + payload.len();
        self.room(end);
        let sum = checksum::copy_and_sum(acc, payload, &mut self.buf[self.end..end]);
        let ok = checksum::fold(sum) == 0xffff;
        if ok {
            self.end = end;
        }
        ok
    }

    /// Makes this buffer hold `o`'s packet ([`super::GroEngine::catch_up`]):
    /// its contiguous bytes, plus the bytes a header window may read past
    /// them ([`Self::window`]), and its frags. Recycles the allocations.
    pub(super) fn copy_from(&mut self, o: &PacketBuf) {
        let to = (o.head + SMALL_COPY).max(o.end).min(o.buf.len());
        self.room(to);
        self.buf[o.head..to].copy_from_slice(&o.buf[o.head..to]);
        self.head = o.head;
        self.end = o.end;
        self.frags.clone_from(&o.frags);
        self.frag_bytes = o.frag_bytes;
    }

    /// The packet's length: contiguous part and frags (`skb->len` from the MAC header).
    #[inline]
    pub(super) fn total_len(&self) -> usize {
        self.end - self.head + self.frag_bytes
    }

    /// The ranges left in input frames.
    #[inline]
    pub(super) fn frags(&self) -> &[Frag] {
        &self.frags
    }

    /// Inserts `bytes` at `at` (within the contiguous part): the bytes
    /// before `at` move back into the headroom; the payload stays put.
    pub(super) fn insert(&mut self, at: usize, bytes: &[u8]) {
        let n = bytes.len();
        if self.head >= n {
            let old = self.head;
            self.buf.copy_within(old..old + at, old - n);
            self.head -= n;
            self.buf[old + at - n..old + at].copy_from_slice(bytes);
        } else {
            let at = self.head + at;
            self.buf.splice(at..at, bytes.iter().copied());
            self.end += n;
        }
    }
}

impl PacketBuf {
    /// The packet's first `N` bytes and, past its end, whatever the buffer
    /// holds there (initialised, not the packet's): for a compare under a
    /// mask that is zero past the packet's headers, which a header-only
    /// (zero-copy) packet can then give in one fixed-size read.
    #[inline]
    pub(super) fn window<const N: usize>(&self) -> Option<&[u8; N]> {
        self.buf.get(self.head..)?.first_chunk::<N>()
    }
}

impl Deref for PacketBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.buf[self.head..self.end]
    }
}

impl DerefMut for PacketBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.head..self.end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_uses_headroom_and_keeps_payload_in_place() {
        let mut b = PacketBuf::default();
        b.reset(&[1, 2, 3, 4, 5, 6]);
        let payload_addr = b[4..].as_ptr();
        b.insert(2, &[9, 9]);
        assert_eq!(&b[..], &[1, 2, 9, 9, 3, 4, 5, 6]);
        assert_eq!(b[6..].as_ptr(), payload_addr);
        b.insert(0, &[7; HEADROOM]);
        assert_eq!(b.len(), 8 + HEADROOM);
        assert_eq!(&b[HEADROOM..], &[1, 2, 9, 9, 3, 4, 5, 6]);
    }

    #[test]
    fn zero_copy_appends_record_ranges() {
        let mut b = PacketBuf::default();
        b.reset(&[0; 10]);
        b.append(&[5; 30], 20, 7, true);
        b.append(&[5; 30], 20, 8, false);
        assert_eq!(b.total_len(), 10 + 10 + 10);
        assert_eq!(
            b.frags(),
            &[Frag {
                frame: 7,
                offset: 20,
                len: 10
            }]
        );
    }
}
