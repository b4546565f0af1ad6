//! The reader's single reusable input buffer.
//!
//! Records are parsed in place from one anonymous memory map: `fill(n)`
//! makes sure `n` bytes are available from the current position (moving
//! the unread tail to the front and reading more), `consume(n)` advances.
//! The buffer grows only when a record is larger than it, and only by
//! doubling while data actually arrives, so a lying length field never
//! makes us allocate more than about twice the bytes the file really has
//! (and never more than the caller's cap, checked before).
//!
//! A large file's buffer lies in one 2 MiB-aligned range advised
//! `MADV_HUGEPAGE` (decision 0233): the kernel's copy into it and our reads
//! from it then cross one huge page instead of 256 small ones. On this
//! project's VM (nested paging), `read(2)` of a 555 MB capture from tmpfs
//! into 1 MiB took 96-97 ms of CPU with 4 KiB pages and 81-83 ms with a
//! huge page (`perf stat -r 11`, docs/performance.md). Where transparent
//! huge pages are off the advice does nothing and the buffer is as before.

use memmap2::{Advice, MmapMut};
use std::io::{self, Read};

/// Default buffer size: large enough that `read` calls are amortised over many
/// records (one syscall per MiB), small enough to stay in L2/L3.
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 20;

/// The size and alignment of a transparent huge page on x86_64 and on
/// aarch64 with 4 KiB pages (`HPAGE_PMD_SIZE`); elsewhere the advice is
/// harmless.
const HUGE_PAGE: usize = 2 << 20;

pub(crate) struct ReadBuf {
    src: Box<dyn Read + Send>,
    /// The memory; the buffer is `mem[base..limit]`.
    mem: MmapMut,
    base: usize,
    limit: usize,
    start: usize,
    end: usize,
    /// File offset of `mem[start]`.
    offset: u64,
}

impl std::fmt::Debug for ReadBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadBuf")
            .field("capacity", &self.capacity())
            .field("buffered", &(self.end - self.start))
            .field("offset", &self.offset)
            .finish()
    }
}

impl ReadBuf {
    /// A buffer of `capacity` bytes (at least 64). With `huge`, the buffer
    /// is placed in a 2 MiB-aligned range advised `MADV_HUGEPAGE`: for large
    /// files only, since the first touch of such a page zeroes all 2 MiB.
    pub(crate) fn new(src: Box<dyn Read + Send>, capacity: usize, huge: bool) -> io::Result<Self> {
        let capacity = capacity.max(64);
        let (mem, base) = if huge && capacity <= HUGE_PAGE {
            // One whole aligned huge page always lies inside a map of two.
            let mem = MmapMut::map_anon(2 * HUGE_PAGE)?;
            let base = (mem.as_ptr() as usize).next_multiple_of(HUGE_PAGE) - mem.as_ptr() as usize;
            // Without transparent huge pages (EINVAL) the buffer is simply
            // made of small pages, as it would be without the advice.
            let _ = mem.advise_range(Advice::HugePage, base, HUGE_PAGE);
            (mem, base)
        } else {
            (MmapMut::map_anon(capacity)?, 0)
        };
        Ok(ReadBuf {
            src,
            mem,
            base,
            limit: base + capacity,
            start: base,
            end: base,
            offset: 0,
        })
    }

    /// The bytes the buffer holds at most (until a record makes it grow).
    fn capacity(&self) -> usize {
        self.limit - self.base
    }

    /// File offset of the first unconsumed byte.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The unconsumed bytes currently buffered.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        &self.mem[self.start..self.end]
    }

    /// Makes at least `n` bytes available unless the input ends first; returns
    /// how many are available (less than `n` only at end of input).
    #[inline]
    pub(crate) fn fill(&mut self, n: usize) -> io::Result<usize> {
        let have = self.end - self.start;
        if have >= n {
            return Ok(have);
        }
        self.fill_slow(n)
    }

    #[cold]
    fn fill_slow(&mut self, n: usize) -> io::Result<usize> {
        if self.limit - self.start < n {
            // Move the partial record to the front so the read can append to it.
            self.mem.copy_within(self.start..self.end, self.base);
            self.end -= self.start - self.base;
            self.start = self.base;
        }
        while self.end - self.start < n {
            if self.end == self.limit {
                // The record is larger than the buffer: grow, but at most double,
                // so memory follows the bytes that really arrive.
                self.grow(n.min(self.capacity().saturating_mul(2)))?;
            }
            match self.src.read(&mut self.mem[self.end..self.limit]) {
                Ok(0) => break,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start)
    }

    /// Moves the buffered bytes into a new map of `capacity` bytes (rare: a
    /// record larger than the buffer).
    fn grow(&mut self, capacity: usize) -> io::Result<()> {
        let held = self.end - self.start;
        let mut mem = MmapMut::map_anon(capacity.max(held))?;
        mem[..held].copy_from_slice(&self.mem[self.start..self.end]);
        self.mem = mem;
        self.base = 0;
        self.limit = capacity.max(held);
        self.start = 0;
        self.end = held;
        Ok(())
    }

    /// Advances past `n` buffered bytes (`n` must not exceed what `fill` returned).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.offset += n as u64;
    }

    /// Advances past `n` buffered bytes and returns them; they stay valid until
    /// the next `fill`.
    #[inline(always)]
    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        let s = self.start;
        let n = n.min(self.end - s);
        self.start += n;
        self.offset += n as u64;
        &self.mem[s..s + n]
    }

    /// Discards `n` bytes without buffering them all (for skipped blocks of any
    /// size); returns how many were discarded (less than `n` at end of input).
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<u64> {
        let mut left = n;
        loop {
            let have = (self.end - self.start) as u64;
            let take = have.min(left);
            self.consume(take as usize);
            left -= take;
            if left == 0 {
                return Ok(n);
            }
            let want = usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(self.capacity());
            if self.fill(want)? == 0 {
                return Ok(n - left);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `chunk` bytes per call, to exercise refills.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        chunk: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let k = out.len().min(self.chunk).min(self.data.len() - self.pos);
            out[..k].copy_from_slice(&self.data[self.pos..self.pos + k]);
            self.pos += k;
            Ok(k)
        }
    }

    fn trickle(len: usize, chunk: usize) -> ReadBuf {
        let data = (0..len).map(|i| i as u8).collect();
        ReadBuf::new(
            Box::new(Trickle {
                data,
                pos: 0,
                chunk,
            }),
            64,
            false,
        )
        .unwrap()
    }

    #[test]
    fn fill_across_small_reads_and_growth_keeps_bytes_in_order() {
        let mut b = trickle(1000, 7);
        assert!(b.fill(10).unwrap() >= 10);
        b.consume(10);
        // 300 > capacity 64: must grow and keep order.
        assert!(b.fill(300).unwrap() >= 300);
        let d = b.data();
        for (i, x) in d[..300].iter().enumerate() {
            assert_eq!(*x, (i + 10) as u8);
        }
        assert_eq!(b.offset(), 10);
    }

    #[test]
    fn fill_reports_short_at_end_and_skip_counts() {
        let mut b = trickle(100, 13);
        assert_eq!(b.fill(200).unwrap(), 100);
        assert_eq!(b.skip(30).unwrap(), 30);
        assert_eq!(b.offset(), 30);
        assert_eq!(b.skip(1000).unwrap(), 70);
        assert_eq!(b.offset(), 100);
        assert_eq!(b.fill(1).unwrap(), 0);
    }

    #[test]
    fn growth_is_bounded_by_the_data_that_arrives() {
        let mut b = trickle(100, 100);
        // A lying length of 1 GiB must not allocate 1 GiB.
        assert_eq!(b.fill(1 << 30).unwrap(), 100);
        assert!(b.capacity() <= 256, "buffer grew to {}", b.capacity());
    }

    #[test]
    fn huge_buffer_is_aligned_and_reads_across_refills_and_growth() {
        let len = 3 * DEFAULT_CAPACITY + 12_345;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let src = Trickle {
            data: data.clone(),
            pos: 0,
            chunk: 100_003,
        };
        let mut b = ReadBuf::new(Box::new(src), DEFAULT_CAPACITY, true).unwrap();
        assert_eq!((b.mem.as_ptr() as usize + b.base) % HUGE_PAGE, 0);
        assert_eq!(b.capacity(), DEFAULT_CAPACITY);
        let mut got = Vec::new();
        // Records of 1000 bytes, then one larger than the buffer (growth),
        // then the rest.
        while got.len() < DEFAULT_CAPACITY + 500 {
            assert!(b.fill(1000).unwrap() >= 1000);
            got.extend_from_slice(b.take(1000));
        }
        let big = DEFAULT_CAPACITY + 4321;
        assert!(b.fill(big).unwrap() >= big);
        got.extend_from_slice(b.take(big));
        assert!(b.capacity() >= big);
        loop {
            let have = b.fill(777).unwrap();
            if have == 0 {
                break;
            }
            got.extend_from_slice(b.take(have.min(777)));
        }
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes differ");
        assert_eq!(b.offset(), len as u64);
    }
}
