//! The reader's single reusable input buffer.
//!
//! Records are parsed in place from one `Vec<u8>`: `fill(n)` makes sure `n`
//! bytes are available from the current position (moving the unread tail to the
//! front and reading more), `consume(n)` advances. The buffer grows only when a
//! record is larger than it, and only by doubling while data actually arrives, so
//! a lying length field never makes us allocate more than about twice the bytes
//! the file really has (and never more than the caller's cap, checked before).

use std::io::{self, Read};

/// Default buffer size: large enough that `read` calls are amortised over many
/// records (one syscall per MiB), small enough to stay in L2/L3.
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 20;

pub(crate) struct ReadBuf {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
}

impl std::fmt::Debug for ReadBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadBuf")
            .field("capacity", &self.buf.len())
            .field("buffered", &(self.end - self.start))
            .field("offset", &self.offset)
            .finish()
    }
}

impl ReadBuf {
    pub(crate) fn new(src: Box<dyn Read + Send>, capacity: usize) -> Self {
        ReadBuf {
            src,
            buf: vec![0; capacity.max(64)],
            start: 0,
            end: 0,
            offset: 0,
        }
    }

    /// File offset of the first unconsumed byte.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The unconsumed bytes currently buffered.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
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
        if self.buf.len() - self.start < n {
            // Move the partial record to the front so the read can append to it.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < n {
            if self.end == self.buf.len() {
                // The record is larger than the buffer: grow, but at most double,
                // so memory follows the bytes that really arrive.
                let new_len = n.min(self.buf.len().saturating_mul(2));
                self.buf.resize(new_len, 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => break,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start)
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
        &self.buf[s..s + n]
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
                .min(self.buf.len());
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
        )
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
        assert!(b.buf.len() <= 256, "buffer grew to {}", b.buf.len());
    }
}
