//! Bounded series for graphs: a fixed-capacity list of points that halves
//! its resolution when full, keeping the rare points (retransmissions,
//! duplicate ACKs, GRO flushes with an obstacle) as long as it can.

use offload::gro::FlushReason;
use serde::Serialize;

/// Which points a full series keeps when it thins out.
pub trait Keep {
    /// Rare points (retransmissions, duplicate ACKs...) survive thinning.
    fn keep(&self) -> bool;
}

/// A fixed-capacity series that halves its resolution when full. Rare
/// points survive thinning until they alone fill it; then they are thinned
/// evenly too, and `rare_dropped` says how many went.
#[derive(Debug, Clone)]
pub struct Decimated<T> {
    pub points: Vec<T>,
    /// Keep one point in `stride` (a power of two).
    stride: u64,
    /// Points pushed in all.
    pub seen: u64,
    /// Rare points pushed, and how many of them thinning dropped.
    pub rare_seen: u64,
    pub rare_dropped: u64,
}

impl<T> Default for Decimated<T> {
    fn default() -> Self {
        Decimated {
            points: Vec::new(),
            stride: 1,
            seen: 0,
            rare_seen: 0,
            rare_dropped: 0,
        }
    }
}

/// Points per series at most.
pub const SERIES_CAP: usize = 1500;

impl<T: Keep> Decimated<T> {
    pub fn push(&mut self, p: T) {
        self.push_with(p.keep(), || p);
    }

    /// Keeps `p`, a point thinning did not skip, halving the series first
    /// when it is full.
    fn store(&mut self, p: T) {
        if self.points.len() >= SERIES_CAP {
            let mut i = 0;
            self.points.retain(|q| {
                i += 1;
                i % 2 == 0 || q.keep()
            });
            self.stride *= 2;
            if self.points.len() >= SERIES_CAP {
                // Only rare points left: every other one goes, evenly
                // over time (not the oldest half), and is counted.
                let before = self.points.len();
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 0
                });
                self.rare_dropped += (before - self.points.len()) as u64;
            }
        }
        self.points.push(p);
    }

    /// [`Self::push`] for a point built only when kept: `rare` must be
    /// what the point's [`Keep::keep`] will say. Most points of a long
    /// flow are thinned out; they cost a count and a test, not the
    /// building of a point.
    #[inline(always)]
    pub fn push_with(&mut self, rare: bool, make: impl FnOnce() -> T) {
        self.seen += 1;
        self.rare_seen += rare as u64;
        // `stride` is a power of two: a mask, not a division per point.
        if self.seen & (self.stride - 1) != 0 && !rare {
            return;
        }
        let p = make();
        debug_assert_eq!(p.keep(), rare);
        self.store(p);
    }

    /// What the graph shows of what was pushed.
    pub fn shown(&self) -> Shown {
        Shown {
            seen: self.seen,
            shown: self.points.len() as u64,
            rare_seen: self.rare_seen,
            rare_dropped: self.rare_dropped,
        }
    }
}

/// How much of a series a graph shows: said on the graph, never silent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Shown {
    pub seen: u64,
    pub shown: u64,
    /// Rare points (retransmissions, duplicate ACKs, SACKs, zero windows).
    pub rare_seen: u64,
    pub rare_dropped: u64,
}

/// One packet GRO handed the stack, for the GRO view.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroPoint {
    /// Capture timestamp of the delivery, ns.
    #[serde(skip)]
    pub t_ns: u64,
    /// Seconds since the flow's first packet (filled by the report).
    pub t: f64,
    pub segments: u32,
    #[serde(serialize_with = "reason_name")]
    pub reason: FlushReason,
}

fn reason_name<S: serde::Serializer>(r: &FlushReason, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.name())
}

impl Keep for GroPoint {
    fn keep(&self) -> bool {
        self.reason.is_obstacle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct P(u64, bool);
    impl Keep for P {
        fn keep(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn a_series_stays_bounded_and_keeps_rare_points() {
        let mut d = Decimated::default();
        for i in 0..100_000u64 {
            d.push(P(i, i == 77_777));
        }
        assert!(d.points.len() <= SERIES_CAP);
        assert!(d.points.iter().any(|p| p.1 && p.0 == 77_777));
        // Thinned evenly: the last point is recent.
        assert!(d.points.last().unwrap().0 > 90_000);
        assert_eq!(d.shown().rare_dropped, 0);
    }

    #[test]
    fn rare_points_past_the_cap_are_thinned_evenly_and_counted() {
        let mut d = Decimated::default();
        for i in 0..1501u64 {
            d.push(P(i, true));
        }
        let s = d.shown();
        assert_eq!(s.rare_seen, 1501);
        assert_eq!(s.shown + s.rare_dropped, 1501);
        // Both halves of the time range keep points.
        assert!(d.points.iter().any(|p| p.0 < 700));
        assert!(d.points.iter().any(|p| p.0 > 800));
    }
}
