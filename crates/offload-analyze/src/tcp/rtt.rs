//! Round-trip times as Wireshark's `tcp.analysis.ack_rtt` measures them:
//! every data segment (and SYN/FIN) waits in a queue; an ACK equal to a
//! waiting segment's end gives one sample, the time since that segment
//! (the oldest one with that end, so a retransmitted segment's sample runs
//! from its first transmission, as in Wireshark); segments the ACK covers
//! leave the queue. The queue is bounded like Wireshark's (10,000 segments
//! per direction); the statistics keep the first samples exactly and the
//! rest in a log-linear histogram (1/32 of an octave, under 2.2% error on
//! the median).

use crate::series::Keep;
use crate::tcp::{seq_gt, seq_le, seq_lt};
use serde::Serialize;
use std::collections::VecDeque;

/// A round-trip sample for the RTT graph.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RttPoint {
    /// Seconds since the data flow's first packet, at the ACK.
    pub t: f64,
    pub rtt_ms: f64,
    /// The ACK's frame and the acknowledged segment's frame.
    pub frame: u64,
    pub data_frame: u64,
}

impl Keep for RttPoint {
    fn keep(&self) -> bool {
        false
    }
}

/// Wireshark's bound on the segments it keeps awaiting an ACK.
pub const MAX_UNACKED: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Waiting {
    seq: u32,
    end: u32,
    ts: u64,
    frame: u64,
}

/// Segments sent and not yet acknowledged, in the order they were sent.
#[derive(Debug, Clone, Default)]
pub struct Unacked {
    q: VecDeque<Waiting>,
    /// The highest end queued, and whether a segment ending below it
    /// (a retransmission) waits behind later data: only then can an ACK
    /// match a segment past the front.
    max_end: u32,
    stragglers: bool,
    /// Whether a segment starting below the front's start was queued
    /// behind it (a retransmission reaching back further, or a gap
    /// filler at the receiver): only then is the lowest start not the
    /// front's.
    low_behind: bool,
}

impl Unacked {
    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Adds a segment `[seq, end)` sent at `ts` (dropped when full, as
    /// Wireshark does when it stops seeing ACKs).
    pub fn sent(&mut self, seq: u32, end: u32, ts: u64, frame: u64) {
        if self.q.len() < MAX_UNACKED {
            if let Some(f) = self.q.front() {
                if seq_lt(seq, f.seq) {
                    self.low_behind = true;
                }
            }
            if self.q.is_empty() {
                self.stragglers = false;
                self.low_behind = false;
                self.max_end = end;
            } else if seq_lt(end, self.max_end) {
                self.stragglers = true;
            } else {
                self.max_end = end;
            }
            self.q.push_back(Waiting {
                seq,
                end,
                ts,
                frame,
            });
        }
    }

    /// Applies a cumulative ACK: returns the sample `(rtt_ns, data frame)`
    /// when `ack` is the end of a waiting segment. Segments are sent in
    /// order except retransmissions, which wait behind later data and
    /// leave when they reach the front.
    #[inline(always)]
    pub fn acked(&mut self, ack: u32, ts: u64) -> Option<(u64, u64)> {
        // The ACKs of a one-way transfer's data segments find nothing
        // waiting: one test, no call.
        if self.q.is_empty() {
            return None;
        }
        self.acked_waiting(ack, ts)
    }

    fn acked_waiting(&mut self, ack: u32, ts: u64) -> Option<(u64, u64)> {
        let mut sample = None;
        // The front segments the ACK covers, counted and then dropped in
        // one step (their type has no destructor: `drain` only moves the
        // queue's head), rather than popped one at a time.
        let mut covered = 0;
        for w in self.q.iter() {
            if seq_gt(w.end, ack) {
                break;
            }
            if w.end == ack && sample.is_none() {
                sample = Some((ts.saturating_sub(w.ts), w.frame));
            }
            covered += 1;
        }
        self.q.drain(..covered);
        if let Some(w) = self.q.front_mut() {
            // Partly acknowledged: what is left starts at the ACK.
            if seq_gt(ack, w.seq) {
                w.seq = ack;
            }
        }
        if self.stragglers {
            self.acked_behind(ack, ts, &mut sample);
        }
        sample
    }

    /// The ACK's effect on segments waiting behind later data (a
    /// retransmission): Wireshark walks its whole list of unacknowledged
    /// segments (packet-tcp.c, `tcp_analyze_sequence_number`, "remove all
    /// segments this ACKs"), so every segment the ACK covers leaves,
    /// wherever it waits, and the oldest one ending exactly at the ACK
    /// gives the sample when the front gave none. Also works out again
    /// whether any segment still waits behind later data.
    fn acked_behind(&mut self, ack: u32, ts: u64, sample: &mut Option<(u64, u64)>) {
        let mut highest: Option<u32> = None;
        let mut behind = false;
        self.q.retain_mut(|w| {
            if seq_le(w.end, ack) {
                if sample.is_none() && w.end == ack {
                    *sample = Some((ts.saturating_sub(w.ts), w.frame));
                }
                return false;
            }
            if seq_gt(ack, w.seq) {
                w.seq = ack;
            }
            match highest {
                Some(h) if seq_lt(w.end, h) => behind = true,
                _ => highest = Some(w.end),
            }
            true
        });
        // The highest end now waiting is what a later segment is
        // compared with in `sent`: a segment ending below it waits behind.
        self.stragglers = behind;
        if let Some(h) = highest {
            self.max_end = h;
        }
    }

    /// The lowest sequence number still waiting.
    pub fn lowest(&self) -> Option<u32> {
        if !self.low_behind {
            return self.q.front().map(|w| w.seq);
        }
        self.q
            .iter()
            .map(|w| w.seq)
            .reduce(|a, b| if seq_lt(b, a) { b } else { a })
    }

    /// The bytes the waiting segments span, from the lowest start to the
    /// highest end: Wireshark's default bytes in flight before SACK
    /// (tcp_analyze_sequence_number in epan/dissectors/packet-tcp.c, 4.0:
    /// the `!tcp_bif_seq_based` walk over its list, whose partly
    /// acknowledged segments start at the ACK, as [`Unacked::acked`]
    /// leaves them). Bytes lost before the capture point were never
    /// queued, so they do not count; a needless retransmission below the
    /// peer's ACK waits until the peer's next ACK and counts until then,
    /// as in Wireshark.
    pub fn span(&self) -> Option<u32> {
        let low = self.lowest()?;
        Some(self.max_end.wrapping_sub(low))
    }

    /// Whether at least two waiting segments cover `seq`: the bytes were
    /// sent again while their first copy waited (a retransmission the
    /// capture saw).
    pub fn covered_twice(&self, seq: u32) -> bool {
        self.q
            .iter()
            .filter(|w| seq_le(w.seq, seq) && seq_lt(seq, w.end))
            .nth(1)
            .is_some()
    }

    /// Whether a waiting segment covers `seq`.
    pub fn covers(&self, seq: u32) -> bool {
        self.q
            .iter()
            .any(|w| seq_le(w.seq, seq) && seq_lt(seq, w.end))
    }
}

/// Samples kept exactly before the histogram takes over.
const EXACT: usize = 16;
/// Sub-buckets per power of two.
const SUB: u32 = 32;
const OCTAVES: u32 = 44;

/// Bounded RTT statistics: count, min, max, mean and a median within
/// 1/32 of an octave.
#[derive(Debug, Clone, Default)]
pub struct RttStats {
    pub samples: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    sum_ns: u128,
    exact: Vec<u64>,
    hist: Option<Box<[u32]>>,
}

fn bucket(ns: u64) -> usize {
    let ns = ns.max(1);
    let oct = 63 - ns.leading_zeros();
    let sub = if oct >= 5 {
        ((ns >> (oct - 5)) & (SUB as u64 - 1)) as u32
    } else {
        ((ns << (5 - oct)) & (SUB as u64 - 1)) as u32
    };
    (oct.min(OCTAVES - 1) * SUB + sub) as usize
}

/// The middle of a bucket, ns.
fn bucket_value(b: usize) -> u64 {
    let oct = b as u32 / SUB;
    let sub = b as u64 % SUB as u64;
    let lo = (1u64 << oct) + ((sub << oct) >> 5);
    let width = ((1u64 << oct) >> 5).max(1);
    lo + width / 2
}

impl RttStats {
    pub fn add(&mut self, ns: u64) {
        if self.samples == 0 || ns < self.min_ns {
            self.min_ns = ns;
        }
        self.max_ns = self.max_ns.max(ns);
        self.samples += 1;
        self.sum_ns += ns as u128;
        if self.hist.is_none() && self.exact.len() < EXACT {
            self.exact.push(ns);
            return;
        }
        let h = self.hist.get_or_insert_with(|| {
            let mut h = vec![0u32; (OCTAVES * SUB) as usize].into_boxed_slice();
            for &v in &self.exact {
                h[bucket(v)] += 1;
            }
            h
        });
        if self.exact.capacity() > 0 {
            self.exact = Vec::new();
        }
        h[bucket(ns)] += 1;
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.sum_ns as f64 / self.samples as f64)
    }

    /// The median (exact up to 16 samples, then the bucket's middle).
    pub fn median_ns(&self) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        match &self.hist {
            None => {
                let mut v = self.exact.clone();
                v.sort_unstable();
                let n = v.len();
                Some(if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2
                })
            }
            Some(h) => {
                let half = self.samples.div_ceil(2);
                let mut acc = 0u64;
                for (i, c) in h.iter().enumerate() {
                    acc += *c as u64;
                    if acc >= half {
                        return Some(bucket_value(i).clamp(self.min_ns, self.max_ns));
                    }
                }
                Some(self.max_ns)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes in flight span the captured segments only: at a receiver,
    /// a segment lost before the capture point (1000..2000) never waits,
    /// so the span starts at the first captured one, until the gap
    /// filler (queued behind later data) reaches back to it; a partly
    /// acknowledged segment counts from the ACK, a needless resend below
    /// the ACK until the next one.
    #[test]
    fn the_span_starts_at_the_lowest_captured_segment() {
        let mut u = Unacked::default();
        u.sent(2000, 3000, 1, 1);
        u.sent(3000, 4000, 2, 2);
        assert_eq!(u.span(), Some(2000));
        u.sent(1000, 2000, 3, 3);
        assert_eq!(u.span(), Some(3000));
        u.acked(2000, 4);
        assert_eq!(u.span(), Some(2000));
        u.acked(2500, 5);
        assert_eq!(u.span(), Some(1500));
        // A needless resend below the ACK counts until the next ACK.
        u.sent(1000, 2000, 6, 6);
        assert_eq!(u.span(), Some(3000));
        u.acked(4000, 7);
        assert_eq!(u.span(), None);
    }

    #[test]
    fn every_ack_of_a_segment_end_is_a_sample_and_covered_segments_leave() {
        let mut u = Unacked::default();
        u.sent(0, 100, 1_000, 1);
        u.sent(100, 200, 2_000, 2);
        u.sent(200, 300, 3_000, 3);
        // A partial ACK: no sample, the first segment now starts at 50.
        assert_eq!(u.acked(50, 4_000), None);
        assert_eq!(u.lowest(), Some(50));
        assert_eq!(u.acked(200, 5_000), Some((3_000, 2)));
        assert_eq!(u.len(), 1);
        // Segment 100..200 retransmitted behind 200..300.
        u.sent(100, 200, 6_000, 4);
        assert_eq!(u.acked(300, 7_000), Some((4_000, 3)));
        assert!(u.is_empty());
    }

    #[test]
    fn an_ack_removes_a_covered_retransmission_waiting_behind_later_data() {
        // zeek's http/206_example_a.pcap, frames 556..569: a segment, its
        // later data, its retransmission; the ACK of its end samples the
        // original and the retransmission leaves with it, so a duplicate
        // of that ACK gives no second sample (tshark: none).
        let mut u = Unacked::default();
        u.sent(100, 200, 1_000, 1);
        u.sent(200, 300, 2_000, 2);
        u.sent(100, 200, 3_000, 3);
        assert_eq!(u.acked(200, 4_000), Some((3_000, 1)));
        assert_eq!(u.len(), 1);
        assert_eq!(u.acked(200, 5_000), None);
        assert_eq!(u.acked(300, 6_000), Some((4_000, 2)));
        assert!(u.is_empty());
    }

    #[test]
    fn the_median_is_exact_then_within_a_bucket() {
        let mut s = RttStats::default();
        for v in [5, 1, 3] {
            s.add(v * 1000);
        }
        assert_eq!(s.median_ns(), Some(3000));
        let mut s = RttStats::default();
        for i in 1..=10_001u64 {
            s.add(i * 1000);
        }
        let m = s.median_ns().unwrap() as f64;
        assert!((m - 5_001_000.0).abs() / 5_001_000.0 < 0.022, "{m}");
        assert_eq!(s.min_ns, 1000);
        assert_eq!(s.max_ns, 10_001_000);
        assert_eq!(s.samples, 10_001);
    }
}
