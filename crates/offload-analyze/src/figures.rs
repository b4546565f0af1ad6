//! The what-if's figures: what GRO did to one flow, and to a whole run, at
//! one `gro_max_size`. Plain data shared by the engine driver (`whatif`),
//! the pass and the report; no logic beyond adding figures up.

use crate::dissect::Snap;
use offload::gro::FlushReason;
use serde::Serialize;

/// How much of the frames (of a flow, or of a file) the capture kept,
/// where it cut them short (`tcpdump -s N`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SnapCounts {
    /// Frames cut after every header GRO reads: the what-if decided from
    /// their headers and wire length (`orig_len`), their checksums taken
    /// as valid.
    pub header_only_frames: u64,
    /// Frames cut inside a header GRO reads: the what-if passes them up
    /// unmerged (`capture-truncated`).
    pub cut_in_headers_frames: u64,
    /// Of `header_only_frames`, segments without payload (ACKs) cut inside
    /// their TCP options: the what-if judges them (GRO merges no such
    /// segment), but their SACK
    /// blocks, D-SACKs and timestamps are lost to the TCP analysis.
    pub options_cut_frames: u64,
    /// A snapshot length that keeps every header of the frames of both
    /// counts above (a lower bound when a later header was missing too);
    /// null when none was cut there.
    pub snaplen_needed: Option<u32>,
    /// The largest captured length among cut frames: the capture's
    /// snapshot length as the frames show it; null when nothing was cut.
    pub snaplen_seen: Option<u32>,
}

impl SnapCounts {
    /// Counts one frame of `captured` bytes.
    pub fn add(&mut self, snap: Snap, captured: usize) {
        let captured = captured.min(u32::MAX as usize) as u32;
        match snap {
            Snap::Whole => return,
            Snap::HeadersOnly => self.header_only_frames += 1,
            Snap::CutInHeaders { needed } => {
                self.cut_in_headers_frames += 1;
                self.snaplen_needed = Some(self.snaplen_needed.unwrap_or(0).max(needed));
            }
            Snap::OptionsCut { needed } => {
                // Judged from headers as those of the count above.
                self.header_only_frames += 1;
                self.options_cut_frames += 1;
                self.snaplen_needed = Some(self.snaplen_needed.unwrap_or(0).max(needed));
            }
        }
        self.snaplen_seen = Some(self.snaplen_seen.unwrap_or(0).max(captured));
    }

    pub fn merge(&mut self, o: &SnapCounts) {
        self.header_only_frames += o.header_only_frames;
        self.cut_in_headers_frames += o.cut_in_headers_frames;
        self.options_cut_frames += o.options_cut_frames;
        self.snaplen_needed = self.snaplen_needed.max(o.snaplen_needed);
        self.snaplen_seen = self.snaplen_seen.max(o.snaplen_seen);
    }
}

/// One reason's count within a flow, with the first frame it hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReasonHit {
    pub reason: FlushReason,
    pub count: u64,
    pub first_frame: u64,
}

/// What GRO did to one flow at one size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowWhatIf {
    /// Packets the stack sees.
    pub packets: u64,
    /// Of those, super-packets (more than one segment).
    pub super_packets: u64,
    /// Frames fed.
    pub frames: u64,
    pub largest: u32,
    /// Sparse reason counts: a flow meets few reasons.
    pub reasons: Vec<ReasonHit>,
    /// Merged packets the kernel line loses after GRO built them (BIG TCP
    /// over an IPv6-outer tunnel, `KernelLine::ipv6_outer_tunnel_loss`),
    /// their segments, and why.
    pub lost_packets: u64,
    pub lost_segments: u64,
    pub loss: Option<offload::gro::LossReason>,
}

impl FlowWhatIf {
    pub(crate) fn hit(&mut self, reason: FlushReason, frame: u64) {
        match self.reasons.iter_mut().find(|h| h.reason == reason) {
            Some(h) => h.count += 1,
            None => self.reasons.push(ReasonHit {
                reason,
                count: 1,
                first_frame: frame,
            }),
        }
    }

    pub fn count(&self, r: FlushReason) -> u64 {
        self.reasons
            .iter()
            .find(|h| h.reason == r)
            .map_or(0, |h| h.count)
    }

    pub fn first(&self, r: FlushReason) -> Option<u64> {
        self.reasons
            .iter()
            .find(|h| h.reason == r)
            .map(|h| h.first_frame)
    }

    pub fn merge(&mut self, o: &FlowWhatIf) {
        self.packets += o.packets;
        self.super_packets += o.super_packets;
        self.frames += o.frames;
        self.largest = self.largest.max(o.largest);
        self.lost_packets += o.lost_packets;
        self.lost_segments += o.lost_segments;
        self.loss = self.loss.or(o.loss);
        for h in &o.reasons {
            match self.reasons.iter_mut().find(|x| x.reason == h.reason) {
                Some(x) => {
                    x.count += h.count;
                    x.first_frame = x.first_frame.min(h.first_frame);
                }
                None => self.reasons.push(*h),
            }
        }
    }
}

/// A reason's count and its first example `(file, frame)`s.
pub type ReasonExamples = (FlushReason, u64, Vec<(usize, u64)>);

/// Global figures of one size's run.
#[derive(Debug, Clone, Default)]
pub struct RunTotals {
    pub frames_in: u64,
    pub packets_out: u64,
    pub super_packets: u64,
    pub largest: u32,
    /// Per reason: count and the first three example `(file, frame)`s.
    pub reasons: Vec<ReasonExamples>,
    /// Merged packets the kernel line loses (the engine's
    /// `Delivered::lost`), their segments, and the first reason.
    pub lost_packets: u64,
    pub lost_segments: u64,
    pub loss: Option<offload::gro::LossReason>,
    /// The input file these figures come from (for examples).
    pub(crate) file: usize,
}

impl RunTotals {
    pub(crate) fn hit(&mut self, r: FlushReason, frame: u64) {
        match self.reasons.iter_mut().find(|x| x.0 == r) {
            Some(x) => {
                x.1 += 1;
                if x.2.len() < 3 {
                    x.2.push((self.file, frame));
                }
            }
            None => self.reasons.push((r, 1, vec![(self.file, frame)])),
        }
    }

    pub fn merge(&mut self, o: &RunTotals) {
        self.frames_in += o.frames_in;
        self.packets_out += o.packets_out;
        self.super_packets += o.super_packets;
        self.largest = self.largest.max(o.largest);
        self.lost_packets += o.lost_packets;
        self.lost_segments += o.lost_segments;
        self.loss = self.loss.or(o.loss);
        for (r, n, ex) in &o.reasons {
            match self.reasons.iter_mut().find(|x| x.0 == *r) {
                Some(x) => {
                    x.1 += n;
                    for e in ex {
                        if x.2.len() < 3 {
                            x.2.push(*e);
                        }
                    }
                }
                None => self.reasons.push((*r, *n, ex.clone())),
            }
        }
    }
}
