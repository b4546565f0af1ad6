//! One direction's sequence analysis. [`analyze`] takes a segment of this
//! direction and the state of both directions, and returns the segment's
//! flags. The flags up to `WINDOW_FULL` are Wireshark's (`tcp.analysis.*`,
//! same definitions and order of checks as `tcp_analyze_sequence_number`
//! in epan/dissectors/packet-tcp.c; differences in docs/analyze.md); the
//! rest interpret them:
//!
//! - a segment behind the highest one seen either fills a gap (bytes the
//!   capture never saw) or repeats bytes it saw. Repeated bytes were sent
//!   again after passing the capture point: a loss after the capture point,
//!   or a spurious retransmission when the peer had acknowledged them
//!   already or reports them in a D-SACK (RFC 2883).
//! - a gap filler is a retransmission (the original was lost before the
//!   capture point) when it is newer than the segments around it: a higher
//!   IPv4 ID (Linux numbers each TCP socket's packets in order,
//!   net/ipv4/ip_output.c `ip_select_ident_segs`) or a higher TCP
//!   timestamp; an older one is an original overtaken on the way
//!   (reordering before the capture point). With neither told apart, the
//!   timing rule Wireshark uses decides.
//! - the peer's duplicate ACKs for bytes the capture saw in order mean they
//!   went missing after the capture point; if the ACK then moves past them
//!   without a retransmission, they were only late: reordering after the
//!   capture point.

use super::rtt::{RttPoint, RttStats, Unacked};
use super::scale::{on_syn, WindowScale};
use super::{seq_gt, seq_le, seq_lt, Segment, ACK, CWR, ECE, ECN_CE, FIN, RST, SYN};
use crate::series::Decimated;
use serde::Serialize;

/// The flags of one segment.
pub mod flag {
    /// `tcp.analysis.retransmission` (neither fast nor spurious).
    pub const RETRANSMISSION: u32 = 1 << 0;
    pub const FAST_RETRANSMISSION: u32 = 1 << 1;
    pub const SPURIOUS_RETRANSMISSION: u32 = 1 << 2;
    pub const OUT_OF_ORDER: u32 = 1 << 3;
    /// `tcp.analysis.lost_segment`: "previous segment not captured".
    pub const LOST_SEGMENT: u32 = 1 << 4;
    /// `tcp.analysis.ack_lost_segment`: "ACKed unseen segment".
    pub const ACKED_UNSEEN: u32 = 1 << 5;
    pub const DUPLICATE_ACK: u32 = 1 << 6;
    pub const ZERO_WINDOW: u32 = 1 << 7;
    pub const ZERO_WINDOW_PROBE: u32 = 1 << 8;
    pub const ZERO_WINDOW_PROBE_ACK: u32 = 1 << 9;
    pub const KEEP_ALIVE: u32 = 1 << 10;
    pub const KEEP_ALIVE_ACK: u32 = 1 << 11;
    pub const WINDOW_UPDATE: u32 = 1 << 12;
    pub const WINDOW_FULL: u32 = 1 << 13;
    /// Interpretation: a retransmission filling a gap (lost before the
    /// capture point).
    pub const LOSS_BEFORE: u32 = 1 << 14;
    /// Interpretation: bytes the capture saw, sent again.
    pub const LOSS_AFTER: u32 = 1 << 15;
    /// Interpretation: a late original filling a gap.
    pub const REORDER_BEFORE: u32 = 1 << 16;
    /// The ACK carries a D-SACK block.
    pub const DSACK: u32 = 1 << 17;
    /// Interpretation: bytes the peer had acknowledged, sent again.
    pub const RESENT_SPURIOUS: u32 = 1 << 18;
    /// Interpretation: any segment sent again.
    pub const RESENT: u32 = LOSS_BEFORE | LOSS_AFTER | RESENT_SPURIOUS;
    /// Any retransmission (Wireshark's filter `tcp.analysis.retransmission`
    /// matches all three).
    pub const ANY_RETRANSMISSION: u32 =
        RETRANSMISSION | FAST_RETRANSMISSION | SPURIOUS_RETRANSMISSION;
}

/// Counts of Wireshark's flags over one direction's segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WiresharkCounts {
    /// All kinds (plain, fast, spurious), as `tcp.analysis.retransmission`.
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub spurious_retransmissions: u64,
    pub out_of_order: u64,
    pub lost_segments: u64,
    pub acked_unseen_segments: u64,
    pub duplicate_acks: u64,
    pub zero_windows: u64,
    pub zero_window_probes: u64,
    pub zero_window_probe_acks: u64,
    pub keep_alives: u64,
    pub keep_alive_acks: u64,
    pub window_updates: u64,
    pub window_full: u64,
}

/// ECN (RFC 3168) as this direction's segments carried it, counted as
/// tshark counts frames with `ip.dsfield.ecn == 3` (or
/// `ipv6.tclass.ecn == 3`), `tcp.flags.ece == 1` and `tcp.flags.cwr == 1`:
/// SYNs included (an ECN setup SYN carries both flags, its SYN-ACK ECE).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EcnCounts {
    /// Segments a congested queue marked Congestion Experienced.
    pub ce_marked: u64,
    /// Segments with ECE: the receiver echoing a CE mark.
    pub ece: u64,
    /// Segments with CWR: the sender answering an echo.
    pub cwr: u64,
}

/// Loss and reordering, located relative to the capture point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LossCounts {
    /// Retransmissions that filled a gap in the capture: the original was
    /// lost between the sender and the capture point.
    pub lost_before_capture: u64,
    /// Bytes the capture saw, sent again: lost between the capture point
    /// and the receiver (spurious ones excluded).
    pub lost_after_capture: u64,
    /// Retransmissions of bytes the peer had acknowledged or reported in a
    /// D-SACK: nothing was lost.
    pub spurious: u64,
    /// Late originals that filled a gap: reordered before the capture point.
    pub reordered_before_capture: u64,
    /// Bytes the peer missed (duplicate ACKs) although the capture saw them
    /// in order, then acknowledged without a retransmission: reordered (or
    /// delayed) after the capture point.
    pub reordered_after_capture: u64,
    /// Gaps never filled in the capture (not captured, or lost before it
    /// and never resent within the capture).
    pub gaps_open: u64,
}

/// First frames of each kind, for evidence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FirstFrames {
    pub retransmission: Option<u64>,
    pub out_of_order: Option<u64>,
    pub lost_segment: Option<u64>,
    pub duplicate_ack: Option<u64>,
    pub zero_window: Option<u64>,
    pub window_full: Option<u64>,
    pub lost_before_capture: Option<u64>,
    pub lost_after_capture: Option<u64>,
    pub reordered_before_capture: Option<u64>,
    pub reordered_after_capture: Option<u64>,
}

/// What one segment was.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub flags: u32,
    /// Its advertised window in bytes (scaled when the scale is known).
    pub window: u32,
    /// Bytes in flight after it (data segments with a known peer ACK).
    pub in_flight: Option<u32>,
}

/// A run of duplicate ACKs from the peer for bytes the capture saw.
#[derive(Debug, Clone, Copy)]
struct Episode {
    at: u32,
    resent: bool,
}

/// Gaps in the sequence space the capture has not seen, oldest first.
///
/// At most [`Gaps::MAX`]; the oldest is forgotten when full (its filler
/// then counts as a repeat, `lost_after_capture`). A flow holds one gap per
/// loss in flight: one segment lost in 40 with 500 in flight (a loaded
/// veth path) leaves 12 open at once, so a handful is not enough. Kept on
/// the heap and grown on demand: a flow without loss allocates nothing.
#[derive(Debug, Clone, Default)]
struct Gaps {
    /// Each gap's bytes and when it opened (ns).
    g: Vec<(u32, u32, u64)>,
}

impl Gaps {
    /// Open gaps remembered per direction: 1 KiB at most.
    const MAX: usize = 64;

    fn add(&mut self, a: u32, b: u32, at_ns: u64) {
        if self.g.len() == Self::MAX {
            self.g.remove(0);
        }
        self.g.push((a, b, at_ns));
    }

    fn len(&self) -> usize {
        self.g.len()
    }

    fn contains(&self, s: u32) -> bool {
        self.g.iter().any(|&(a, b, _)| seq_le(a, s) && seq_lt(s, b))
    }

    /// Removes `[s, e)` from the gaps; when it overlapped one, the time the
    /// earliest of them opened.
    fn fill(&mut self, s: u32, e: u32) -> Option<u64> {
        let mut hit: Option<u64> = None;
        let mut i = 0;
        while i < self.g.len() {
            let (a, b, t) = self.g[i];
            if seq_le(e, a) || seq_le(b, s) {
                i += 1;
                continue;
            }
            hit = Some(hit.map_or(t, |h| h.min(t)));
            let left = seq_lt(a, s).then_some((a, s, t));
            let right = seq_lt(e, b).then_some((e, b, t));
            match (left, right) {
                (Some(l), Some(r)) => {
                    self.g[i] = l;
                    if self.g.len() < Self::MAX {
                        self.g.push(r);
                    }
                    i += 1;
                }
                (Some(x), None) | (None, Some(x)) => {
                    self.g[i] = x;
                    i += 1;
                }
                (None, None) => {
                    self.g.remove(i);
                }
            }
        }
        hit
    }
}

/// Wireshark's out-of-order window when the handshake gave no RTT.
const OOO_DEFAULT_NS: u64 = 3_000_000;
/// Wireshark's fast-retransmission window after the last duplicate ACK.
const FAST_RETRANS_NS: u64 = 20_000_000;

/// The ACKed-unseen mark in the peer's duplicate-ACK counter ([`acks_unseen`]):
/// tshark 4.0 stores -1 in the unsigned `dupacknum`, so a segment at the
/// peer's ACK number within 20 ms after such a mark is a fast
/// retransmission (`dupacknum >= 2` in tcp_analyze_sequence_number,
/// epan/dissectors/packet-tcp.c), as tshark flags it.
const UNSEEN_MARK: u32 = u32::MAX;

/// The latest runs of contiguous retransmissions of seen bytes, most
/// recently extended first, to find a resend again when a D-SACK reports
/// it received (spurious, not lost). A timeout's go-back-N resends a whole
/// flight, and after it Linux resends the segments it marked lost while
/// new data and single resends of other holes go out between them
/// (tcp_enter_loss then tcp_xmit_retransmit_queue, net/ipv4/tcp_output.c):
/// a hop stalled for 400 ms gave 100 resends, 89 of them D-SACKed a round
/// trip later, in runs broken by resends of two other holes. Runs are
/// kept apart so such a resend does not end the run it interrupts.
#[derive(Debug, Clone, Copy, Default)]
struct ResentRuns {
    runs: [ResentRun; 8],
}

/// One run: its sequence range, the segments resent in it (a segment
/// resent twice counts twice) and how many of them D-SACKs reported.
#[derive(Debug, Clone, Copy, Default)]
struct ResentRun {
    lo: u32,
    hi: u32,
    segments: u16,
    dsacked: u16,
}

impl ResentRuns {
    /// Records a resend of `[seq, end)`: it extends the run it falls in or
    /// continues, or starts a new one in place of the least recently
    /// extended.
    fn push(&mut self, seq: u32, end: u32) {
        let extends = |r: &ResentRun| r.lo != r.hi && seq_le(r.lo, seq) && seq_le(seq, r.hi);
        let (at, run) = match self.runs.iter().position(extends) {
            Some(at) => {
                let mut run = self.runs[at];
                if seq_gt(end, run.hi) {
                    run.hi = end;
                }
                run.segments = run.segments.saturating_add(1);
                (at, run)
            }
            None => {
                let run = ResentRun {
                    lo: seq,
                    hi: end,
                    segments: 1,
                    dsacked: 0,
                };
                (self.runs.len() - 1, run)
            }
        };
        self.runs.copy_within(..at, 1);
        self.runs[0] = run;
    }

    /// A D-SACK for `[l, r)`: true when it reports a resend of a run not
    /// yet fully reported (at most once per segment resent).
    fn dsacked(&mut self, l: u32, r: u32) -> bool {
        let run = self.runs.iter_mut().find(|run| {
            run.lo != run.hi && seq_lt(run.lo, r) && seq_lt(l, run.hi) && run.dsacked < run.segments
        });
        match run {
            Some(run) => {
                run.dsacked += 1;
                true
            }
            None => false,
        }
    }

    /// Whether a run covers sequence number `at`.
    fn covers(&self, at: u32) -> bool {
        self.runs
            .iter()
            .any(|r| r.lo != r.hi && seq_le(r.lo, at) && seq_lt(at, r.hi))
    }
}

/// The analysis state of one direction.
/// The latest eight sequence ranges (start, end) of one kind of segment
/// (retransmissions, gap fillers), overwritten oldest first; an emptied
/// entry is (0, 0).
#[derive(Debug, Clone, Copy, Default)]
struct RecentRanges {
    ranges: [(u32, u32); 8],
    recorded: usize,
}

impl RecentRanges {
    fn push(&mut self, range: (u32, u32)) {
        self.ranges[self.recorded % 8] = range;
        self.recorded += 1;
    }

    fn any(&self, f: impl Fn((u32, u32)) -> bool) -> bool {
        self.ranges[..self.recorded.min(8)].iter().any(|&r| f(r))
    }
}

#[derive(Debug, Clone, Default)]
pub struct TcpDirection {
    /// This direction's flow began here (graph times are relative to it).
    first_ns: u64,
    last_ns: u64,
    /// A SYN of this direction was seen: whether the last was a SYN-ACK.
    pub syn: Option<bool>,
    /// The scale of this direction's windows (scale.rs).
    pub scale: WindowScale,
    /// Whether this direction's SYN permitted SACK (None: no SYN seen, or
    /// its options cut before the option was found).
    syn_sack_perm: Option<bool>,
    /// This direction sent SACK blocks in this connection.
    sack_seen: bool,
    syn_ns: Option<u64>,
    /// Handshake RTT (SYN to the ACK of the SYN-ACK), shared by both sides.
    first_rtt_ns: Option<u64>,
    /// The first sequence number seen (or the SYN's), for relative numbers.
    pub base: Option<u32>,
    /// Wireshark's `nextseq`, `maxseqtobeacked` and `lastack`, kept as it
    /// keeps them: zero is "not seen yet", whatever the segments said
    /// (`tcp_analyze_seq_flow_info_t` is zero-allocated, and every check
    /// of tcp_analyze_sequence_number in tshark 4.0 tests them for zero:
    /// a segment ending exactly at sequence number 0 leaves `nextseq`
    /// "unset", and an ACK field of 0 disables the spurious-retransmission
    /// test).
    nextseq: u32,
    nextseq_ns: u64,
    maxseqtobeacked: u32,
    lastack: u32,
    lastack_ns: u64,
    /// The last raw window field, and whether a SYN carried it (never
    /// scaled, RFC 7323 section 2.2).
    window: Option<u16>,
    window_of_syn: bool,
    /// Wireshark's `dupacknum`, a `guint32` (`tcp_analyze_seq_flow_info_t`
    /// in epan/dissectors/packet-tcp.h, 4.0): the ACKed-unseen mark stores
    /// -1 in it, which is [`UNSEEN_MARK`] (`u32::MAX`) and so passes the
    /// fast-retransmission test `dupacknum >= 2`.
    dupacknum: u32,
    last_flags: u32,
    valid_bif: bool,
    sack: [(u32, u32); 3],
    nsack: u8,
    unacked: Unacked,
    gaps: Gaps,
    /// Gaps left open by earlier connections on the same ports
    /// ([`TcpDirection::restart`]).
    gaps_open_before: u64,
    max_ip_id: Option<u16>,
    ids_move: bool,
    max_tsval: Option<u32>,
    episode: Option<Episode>,
    /// Retransmissions of seen bytes, to find them in a D-SACK.
    resent: ResentRuns,
    /// The latest segments that filled a gap in the capture.
    fillers: RecentRanges,
    zero_since: Option<u64>,
    pub zero_window_ns: u64,
    pub zero_window_episodes: u64,
    pub ws: WiresharkCounts,
    pub loss: LossCounts,
    pub ecn: EcnCounts,
    pub first: FirstFrames,
    /// Window statistics (bytes, after scaling): the SYN's own, then the
    /// other segments'.
    pub syn_window: Option<u32>,
    pub window_min: Option<u32>,
    pub window_max: u32,
    pub window_last: Option<u32>,
    pub in_flight_max: u32,
    pub acks_with_sack: u64,
    pub sack_blocks: u64,
    pub dsack: u64,
    /// RTT of this direction's data (from the peer's ACKs).
    pub rtt: RttStats,
    pub rtt_points: Decimated<RttPoint>,
}

fn first(slot: &mut Option<u64>, frame: u64) {
    slot.get_or_insert(frame);
}

impl TcpDirection {
    pub fn new(first_ns: u64) -> TcpDirection {
        TcpDirection {
            first_ns,
            ..Default::default()
        }
    }

    /// Relative sequence number of `seq` (Wireshark's: 0 at the SYN, 1 at
    /// the first byte seen without one).
    pub fn relative(&self, seq: u32) -> u32 {
        seq.wrapping_sub(self.base.unwrap_or(seq))
    }

    /// Frees the RTT points (graphs only) and the queue of segments
    /// awaiting their ACK, once the capture is read.
    pub fn drop_graph_series(&mut self) {
        self.rtt_points.points = Vec::new();
        self.unacked = Unacked::default();
    }

    /// Seconds of zero window, an unfinished one counted to the last packet.
    pub fn zero_window_total_ns(&self) -> u64 {
        self.zero_window_ns
            + self
                .zero_since
                .map_or(0, |t| self.last_ns.saturating_sub(t))
    }

    pub fn gaps_open(&self) -> u64 {
        self.gaps.len() as u64 + self.gaps_open_before
    }

    /// A new connection on the same addresses and ports (a SYN whose
    /// sequence number is not the first connection's: port reuse, as after
    /// TIME_WAIT): Wireshark starts a new stream there with fresh state
    /// ("TCP Port numbers reused", dissect_tcp in
    /// epan/dissectors/packet-tcp.c), so the sequence analysis starts over
    /// in both directions; the counts, windows and RTT statistics go on
    /// adding up, as the flow's figures are the sum of its connections.
    fn restart(&mut self) {
        let old = std::mem::take(self);
        *self = TcpDirection {
            first_ns: old.first_ns,
            last_ns: old.last_ns,
            gaps_open_before: old.gaps_open(),
            zero_since: old.zero_since,
            zero_window_ns: old.zero_window_ns,
            zero_window_episodes: old.zero_window_episodes,
            ws: old.ws,
            loss: old.loss,
            first: old.first,
            syn_window: old.syn_window,
            window_min: old.window_min,
            window_max: old.window_max,
            window_last: old.window_last,
            in_flight_max: old.in_flight_max,
            acks_with_sack: old.acks_with_sack,
            sack_blocks: old.sack_blocks,
            dsack: old.dsack,
            ecn: old.ecn,
            rtt: old.rtt,
            rtt_points: old.rtt_points,
            ..TcpDirection::default()
        };
    }

    #[inline(always)]
    fn count(&mut self, fl: u32, frame: u64) {
        // Nearly every segment of a healthy flow has no flag: one test.
        if fl != 0 {
            self.count_flags(fl, frame);
        }
    }

    fn count_flags(&mut self, fl: u32, frame: u64) {
        use flag::*;
        let w = &mut self.ws;
        if fl & ANY_RETRANSMISSION != 0 {
            w.retransmissions += 1;
            first(&mut self.first.retransmission, frame);
        }
        w.fast_retransmissions += (fl & FAST_RETRANSMISSION != 0) as u64;
        w.spurious_retransmissions += (fl & SPURIOUS_RETRANSMISSION != 0) as u64;
        if fl & OUT_OF_ORDER != 0 {
            w.out_of_order += 1;
            first(&mut self.first.out_of_order, frame);
        }
        if fl & LOST_SEGMENT != 0 {
            w.lost_segments += 1;
            first(&mut self.first.lost_segment, frame);
        }
        w.acked_unseen_segments += (fl & ACKED_UNSEEN != 0) as u64;
        if fl & DUPLICATE_ACK != 0 {
            w.duplicate_acks += 1;
            first(&mut self.first.duplicate_ack, frame);
        }
        if fl & ZERO_WINDOW != 0 {
            w.zero_windows += 1;
            first(&mut self.first.zero_window, frame);
        }
        w.zero_window_probes += (fl & ZERO_WINDOW_PROBE != 0) as u64;
        w.zero_window_probe_acks += (fl & ZERO_WINDOW_PROBE_ACK != 0) as u64;
        w.keep_alives += (fl & KEEP_ALIVE != 0) as u64;
        w.keep_alive_acks += (fl & KEEP_ALIVE_ACK != 0) as u64;
        w.window_updates += (fl & WINDOW_UPDATE != 0) as u64;
        if fl & WINDOW_FULL != 0 {
            w.window_full += 1;
            first(&mut self.first.window_full, frame);
        }
    }
}

// Steps [`analyze`] and its fast path [`in_order_data`] share: one
// place for each rule, so that the two cannot drift apart.

/// Window full: the segment ends exactly at the peer's advertised right
/// edge (`tcp.analysis.window_full`), known only with the peer's scale;
/// the edge a SYN-ACK advertised is its window unscaled (tshark 4.0 flags
/// the first flight that fills it: a jumbo-MTU capture, 7 segments of
/// 8,948 bytes ending at the SYN-ACK's 62,636).
#[inline(always)]
fn fills_window(rev: &TcpDirection, rev_scale: WindowScale, seq: u32, len: u32) -> bool {
    match (rev_scale.known(), rev.window) {
        (true, Some(w)) => {
            seq.wrapping_add(len)
                == rev
                    .lastack
                    .wrapping_add(rev_scale.apply(w, rev.window_of_syn))
        }
        _ => false,
    }
}

/// ACKed unseen segment: an ACK beyond the highest contiguous byte seen
/// from the peer, as tshark 4.0 (the one Debian 12 and this project's CI
/// ship) flags it (tcp_analyze_sequence_number, "ACKED LOST PACKET" in
/// epan/dissectors/packet-tcp.c): when the peer sent more since the mark,
/// the mark moves up to the peer's highest byte and the ACK is flagged;
/// when the mark is there already (the peer sends only pure ACKs), the
/// ACK is flagged only if the peer's duplicate-ACK counter is 0, and the
/// counter becomes -1 ([`UNSEEN_MARK`]): flagged once until the peer's own ACK number moves
/// (which resets the counter) or a duplicate ACK of the peer neutralises
/// the -1. Called after this direction's counter was reset.
#[inline(always)]
fn acks_unseen(rev: &mut TcpDirection, ack: u32) -> bool {
    if rev.maxseqtobeacked == 0 || !seq_gt(ack, rev.maxseqtobeacked) {
        return false;
    }
    if seq_lt(rev.maxseqtobeacked, rev.nextseq) {
        rev.maxseqtobeacked = rev.nextseq;
        true
    } else {
        let flagged = rev.dupacknum == 0;
        rev.dupacknum = UNSEEN_MARK;
        flagged
    }
}

/// Every byte up to `end` was acknowledged by the peer already (a
/// spurious retransmission when sent again).
#[inline(always)]
fn acked_already(rev: &TcpDirection, end: u32) -> bool {
    rev.lastack != 0 && seq_le(end, rev.lastack)
}

/// The segment's IPv4 ID as the sending socket's counter gave it, or None.
/// Linux sends an ID of 0 in a DF packet that no connected socket sends:
/// the SYN-ACK (ip_build_and_send_pkt, net/ipv4/ip_output.c, since
/// commit 970a5a3ea86d "ipv4: tcp: send zero IPID in SYNACK messages",
/// Linux 5.17, backported to stable kernels), a reset or a TIME_WAIT ACK
/// (ip_select_ident_segs, include/net/ip.h, without `sk`). Taken as the
/// counter's value, a 0 before a counter that starts at random (a 6.18
/// receiver: SYN-ACK 0x0000, its first ACK 0xd4e0) stands 0x8000 or more
/// ahead of half the IDs that follow, which then never read as newer:
/// copies of ACKs the network made were not recognised in half the runs
/// (36 to 59 false "reordered after the capture" on the edge test's
/// dup-acks capture). A genuine 0 of a counter passing it (one segment
/// in 65,536) is skipped too, which only costs that segment its ID.
#[inline(always)]
fn counter_ip_id(s: &Segment) -> Option<u16> {
    s.ip_id.filter(|&id| id != 0)
}

/// The same IPv4 ID as this direction's highest, on a sender whose IDs
/// move: a copy the network made of its last segment (a duplicated data
/// segment or ACK). Linux numbers every packet of a connected socket, a
/// resend too (`ip_select_ident_segs` in include/net/ip.h, 6.1 to 6.18), so
/// a sender never repeats an ID of its own.
#[inline(always)]
fn copied_by_network(fwd: &TcpDirection, s: &Segment) -> bool {
    fwd.ids_move && counter_ip_id(s).is_some() && s.ip_id == fwd.max_ip_id
}

/// The highest IPv4 ID and TCP timestamp seen in this direction, which
/// tell a retransmission from a reordered original.
#[inline(always)]
fn note_ip_id_and_tsval(fwd: &mut TcpDirection, s: &Segment) {
    if let Some(id) = counter_ip_id(s) {
        match fwd.max_ip_id {
            Some(m) if id != m => {
                fwd.ids_move = true;
                if (id.wrapping_sub(m) as i16) > 0 {
                    fwd.max_ip_id = Some(id);
                }
            }
            Some(_) => {}
            None => fwd.max_ip_id = Some(id),
        }
    }
    if let Some(t) = s.tsval {
        if fwd.max_tsval.is_none_or(|m| (t.wrapping_sub(m) as i32) > 0) {
            fwd.max_tsval = Some(t);
        }
    }
}

/// An ACK past the peer's open hole ends its episode; a hole nobody
/// resent was reordering after the capture point.
#[inline(always)]
fn close_episode(rev: &mut TcpDirection, ack: u32, frame: u64) {
    if let Some(e) = rev.episode {
        if seq_gt(ack, e.at) {
            if !e.resent {
                rev.loss.reordered_after_capture += 1;
                first(&mut rev.first.reordered_after_capture, frame);
            }
            rev.episode = None;
        }
    }
}

/// The peer's segments this ACK acknowledges leave the queue, one RTT
/// sample for the segment it acknowledges exactly. Wireshark walks the
/// queue with the acknowledgment field of every segment, ACK flag or not
/// (tcp_analyze_sequence_number, epan/dissectors/packet-tcp.c): a SYN
/// sent again after the SYN-ACK, its field zero, sits above the peer's
/// queue in sequence space and clears it without a sample. Wireshark
/// shows no `ack_rtt` when the ACK's timestamp equals the segment's
/// (`ta->ts` zero in tcp_print_sequence_number_analysis): coarse or
/// synthetic timestamps give no sample rather than a zero. A timestamp
/// that went backwards (tshark: a negative RTT) gives none.
#[inline(always)]
fn rtt_sample(rev: &mut TcpDirection, ack: u32, ts: u64, frame: u64) {
    if let Some((rtt, data_frame)) = rev.unacked.acked(ack, ts).filter(|s| s.0 > 0) {
        rev.rtt.add(rtt);
        rev.rtt_points.push(RttPoint {
            t: ts.saturating_sub(rev.first_ns) as f64 / 1e9,
            rtt_ms: rtt as f64 / 1e6,
            frame,
            data_frame,
        });
    }
}

/// Bytes in flight after a data segment (with `flags`), as tshark 4.0
/// computes `tcp.analysis.bytes_in_flight` by default
/// (tcp_analyze_sequence_number, epan/dissectors/packet-tcp.c): the span
/// of this direction's captured, unacknowledged segments
/// ([`super::rtt::Unacked::span`]; the segment itself is queued), less
/// every SACK block of the peer's last segment that tshark kept (the
/// first three, as the dissector keeps them), a D-SACK's too, in
/// 32-bit arithmetic; a figure outside 1..2^31 - 1 is none, and a
/// segment with SYN or FIN counts one byte less (its flag's virtual byte
/// is in the span).
#[inline(always)]
fn bytes_in_flight(fwd: &mut TcpDirection, rev: &TcpDirection, flags: u8) -> Option<u32> {
    let la = rev.lastack;
    if la == 0 {
        return None;
    }
    let mut f = fwd.unacked.span()?;
    for &(l, r) in &rev.sack[..rev.nsack as usize] {
        f = f.wrapping_sub(r.wrapping_sub(l));
    }
    if f > 0 && f < 2_000_000_000 {
        let f = if flags & (SYN | FIN) != 0 { f - 1 } else { f };
        fwd.in_flight_max = fwd.in_flight_max.max(f);
        Some(f)
    } else {
        None
    }
}

/// The common case, served by [`in_order_data`]: a data segment of more
/// than one byte, ACK set and no SYN, FIN, RST, ECE or CWR, no CE mark
/// (the full path counts ECN), a non-zero window, no
/// SACK blocks, starting exactly where this direction's bytes so far end,
/// with the handshake RTT settled (or no SYN seen).
#[inline(always)]
fn in_order(fwd: &TcpDirection, s: &Segment) -> bool {
    s.flags & (SYN | FIN | RST | ACK | ECE | CWR) == ACK
        && s.ecn != ECN_CE
        && s.len > 1
        && s.window != 0
        && s.sack_blocks == 0
        && !s.tshark_stops
        && fwd.nextseq == s.seq
        && fwd.nextseq != 0
        && fwd.base.is_some()
        && (fwd.first_rtt_ns.is_some() || fwd.syn_ns.is_none())
        && fast_path_on()
}

#[cfg(not(test))]
#[inline(always)]
fn fast_path_on() -> bool {
    true
}

#[cfg(test)]
thread_local! {
    /// Off in the test that compares the fast path with the full one.
    static FAST_PATH: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

#[cfg(test)]
fn fast_path_on() -> bool {
    FAST_PATH.with(|f| f.get())
}

/// [`analyze`] for a segment that meets [`in_order`]: the same steps in
/// the same order, without the checks that cannot fire for it (zero
/// window and its probes, lost segment, keep-alive, window update,
/// duplicate ACK, fast retransmission, out-of-order, retransmission,
/// gap filling, SACK and D-SACK; `tcp_analyze_sequence_number` in
/// epan/dissectors/packet-tcp.c tests each of them against a sequence
/// number behind or beyond the next expected one, a zero length or
/// window, or SYN/FIN/RST). What can still fire: window full, ACKed
/// unseen and spurious retransmission (bytes the peer acknowledged
/// already). Any change to [`analyze`]'s rules must keep the test
/// `in_order_fast_path_equals_the_full_analysis` green: it compares both
/// on random conversations, state and flags after every segment.
#[inline(always)]
fn in_order_data(fwd: &mut TcpDirection, rev: &mut TcpDirection, s: &Segment) -> Outcome {
    use flag::*;
    let (seq, ack, len, ts) = (s.seq, s.ack, s.len, s.ts);
    fwd.last_ns = fwd.last_ns.max(ts);
    let (scale, rev_scale) = (fwd.scale, rev.scale);
    let window = scale.apply(s.window, false);
    fwd.window_min = Some(fwd.window_min.map_or(window, |m| m.min(window)));
    fwd.window_max = fwd.window_max.max(window);
    fwd.window_last = Some(window);
    if rev.base.is_none() {
        rev.base = Some(ack.wrapping_sub(1));
    }
    rev.valid_bif = true;
    let mut fl = 0u32;
    if fills_window(rev, rev_scale, seq, len) {
        fl |= WINDOW_FULL;
    }
    if ack != fwd.lastack {
        fwd.dupacknum = 0;
    }
    if acks_unseen(rev, ack) {
        fl |= ACKED_UNSEEN;
    }
    let end = seq.wrapping_add(len);
    if acked_already(rev, end) {
        fl |= SPURIOUS_RETRANSMISSION;
    }
    note_ip_id_and_tsval(fwd, s);
    fwd.unacked.sent(seq, end, ts, s.frame);
    // `end` is beyond `seq` (a length of 2 to 2^31 - 1 bytes).
    fwd.nextseq = end;
    fwd.nextseq_ns = ts;
    if fwd.maxseqtobeacked == 0 || fwd.maxseqtobeacked == seq {
        fwd.maxseqtobeacked = fwd.nextseq;
    }
    fwd.window = Some(s.window);
    fwd.window_of_syn = false;
    fwd.lastack = ack;
    fwd.lastack_ns = ts;
    fwd.last_flags = fl;
    fwd.nsack = 0;
    fwd.sack = s.sack;
    if let Some(t0) = fwd.zero_since.take() {
        fwd.zero_window_ns += ts.saturating_sub(t0);
    }
    close_episode(rev, ack, s.frame);
    rtt_sample(rev, ack, ts, s.frame);
    let in_flight = if fwd.valid_bif {
        bytes_in_flight(fwd, rev, s.flags)
    } else {
        None
    };
    fwd.count(fl, s.frame);
    Outcome {
        flags: fl,
        window,
        in_flight,
    }
}

/// The other common case, served by [`advancing_ack_only`]: a pure ACK
/// (no payload; ACK set and no SYN, FIN, RST, ECE or CWR, no CE mark)
/// with a non-zero window
/// and no SACK blocks, at exactly this direction's next sequence number,
/// acknowledging something new (its ACK differs from the last one), with
/// the handshake RTT settled (or no SYN seen): a bulk receiver's ACKs.
#[inline(always)]
fn advancing_ack(fwd: &TcpDirection, s: &Segment) -> bool {
    s.flags & (SYN | FIN | RST | ACK | ECE | CWR) == ACK
        && s.ecn != ECN_CE
        && s.len == 0
        && s.window != 0
        && s.sack_blocks == 0
        && !s.tshark_stops
        && fwd.nextseq == s.seq
        && fwd.nextseq != 0
        && s.ack != fwd.lastack
        && fwd.base.is_some()
        && (fwd.first_rtt_ns.is_some() || fwd.syn_ns.is_none())
        && fast_path_on()
}

/// [`analyze`] for a segment that meets [`advancing_ack`]: the same steps
/// in the same order, without those that cannot fire for it. With no
/// payload, SYN or FIN nothing is queued and the next sequence number
/// stays; with the ACK moved, no check of `tcp_analyze_sequence_number`
/// (epan/dissectors/packet-tcp.c) that wants the same ACK fires (window
/// update, duplicate ACK and the probe and keep-alive ACKs); with the
/// sequence number the next expected and the window open, neither lost
/// segment, keep-alive nor zero window does. What can still fire: ACKed
/// unseen. The test `in_order_fast_path_equals_the_full_analysis` covers
/// this path too.
#[inline(always)]
fn advancing_ack_only(fwd: &mut TcpDirection, rev: &mut TcpDirection, s: &Segment) -> Outcome {
    use flag::*;
    let (seq, ack, ts) = (s.seq, s.ack, s.ts);
    fwd.last_ns = fwd.last_ns.max(ts);
    let scale = fwd.scale;
    let window = scale.apply(s.window, false);
    fwd.window_min = Some(fwd.window_min.map_or(window, |m| m.min(window)));
    fwd.window_max = fwd.window_max.max(window);
    fwd.window_last = Some(window);
    if rev.base.is_none() {
        rev.base = Some(ack.wrapping_sub(1));
    }
    rev.valid_bif = true;
    let mut fl = 0u32;
    fwd.dupacknum = 0;
    if acks_unseen(rev, ack) {
        fl |= ACKED_UNSEEN;
    }
    note_ip_id_and_tsval(fwd, s);
    if fwd.maxseqtobeacked == 0 || fwd.maxseqtobeacked == seq {
        fwd.maxseqtobeacked = fwd.nextseq;
    }
    fwd.window = Some(s.window);
    fwd.window_of_syn = false;
    fwd.lastack = ack;
    fwd.lastack_ns = ts;
    fwd.last_flags = fl;
    fwd.nsack = s.nsack;
    fwd.sack = s.sack;
    if let Some(t0) = fwd.zero_since.take() {
        fwd.zero_window_ns += ts.saturating_sub(t0);
    }
    close_episode(rev, ack, s.frame);
    rtt_sample(rev, ack, ts, s.frame);
    fwd.count(fl, s.frame);
    Outcome {
        flags: fl,
        window,
        in_flight: None,
    }
}

/// Analyses segment `s` of direction `fwd`; `rev` is the other direction
/// (a fresh state when the capture has none).
#[inline(always)]
pub fn analyze(fwd: &mut TcpDirection, rev: &mut TcpDirection, s: &Segment) -> Outcome {
    if in_order(fwd, s) {
        return in_order_data(fwd, rev, s);
    }
    if advancing_ack(fwd, s) {
        return advancing_ack_only(fwd, rev, s);
    }
    analyze_full(fwd, rev, s)
}

/// [`analyze`] for a segment neither fast path serves.
#[inline(never)]
fn analyze_full(fwd: &mut TcpDirection, rev: &mut TcpDirection, s: &Segment) -> Outcome {
    use flag::*;
    let (seq, ack, flags, len, ts) = (s.seq, s.ack, s.flags, s.len, s.ts);
    let syn = flags & SYN != 0;
    let ackf = flags & ACK != 0;
    let sfr = flags & (SYN | FIN | RST) != 0;
    if syn && !ackf {
        match fwd.base {
            Some(b) if b != seq => {
                fwd.restart();
                rev.restart();
            }
            // The same SYN again: a reset sent meanwhile may carry the
            // acknowledgment it answers as its sequence number (RFC 793
            // 3.4), which moved `nextseq` far ahead; Wireshark restores
            // it to `maxseqtobeacked` here (dissect_tcp in
            // epan/dissectors/packet-tcp.c), so the connection's data is
            // not all "retransmission" (Suricata's
            // tests/base64-decode-5885: 1 retransmission, not 5).
            Some(_) if fwd.maxseqtobeacked != 0 => fwd.nextseq = fwd.maxseqtobeacked,
            _ => {}
        }
    }
    // ECN marks and flags: segments with any take this path (the fast
    // paths' conditions exclude them).
    fwd.ecn.ce_marked += u64::from(s.ecn == ECN_CE);
    fwd.ecn.ece += u64::from(flags & ECE != 0);
    fwd.ecn.cwr += u64::from(flags & CWR != 0);
    fwd.last_ns = fwd.last_ns.max(ts);
    if syn {
        fwd.syn = Some(ackf);
        on_syn(&mut fwd.scale, &mut rev.scale, s.wscale, ackf);
        fwd.syn_sack_perm =
            (s.sack_perm || s.wscale != Some(super::scale::WSCALE_CUT)).then_some(s.sack_perm);
        if !ackf {
            // A SYN timestamped at the epoch itself gives no initial RTT:
            // Wireshark takes a zero `ts_mru_syn` for "no SYN seen"
            // (dissect_tcp in epan/dissectors/packet-tcp.c), so its
            // out-of-order window stays 3 ms (Wireshark's own
            // test/captures/tcp-badsegments.pcap starts at time 0).
            fwd.syn_ns = (ts != 0).then_some(ts);
        }
    } else if ackf && fwd.first_rtt_ns.is_none() && rev.syn == Some(true) {
        if let Some(t0) = fwd.syn_ns {
            let r = ts.saturating_sub(t0);
            fwd.first_rtt_ns = Some(r);
            rev.first_rtt_ns = Some(r);
        }
    }
    let (scale, rev_scale) = (fwd.scale, rev.scale);
    let window = scale.apply(s.window, syn);
    if syn {
        fwd.syn_window = Some(window);
    } else if flags & RST == 0 {
        fwd.window_min = Some(fwd.window_min.map_or(window, |m| m.min(window)));
        fwd.window_max = fwd.window_max.max(window);
        fwd.window_last = Some(window);
    }
    if fwd.base.is_none() {
        fwd.base = Some(if syn { seq } else { seq.wrapping_sub(1) });
    }
    if rev.base.is_none() && ackf {
        rev.base = Some(ack.wrapping_sub(1));
    }
    if ackf {
        rev.valid_bif = true;
    }
    let old_next = (fwd.nextseq != 0).then_some(fwd.nextseq);
    let mut fl = 0u32;
    'checks: {
        if len == 1 && seq == fwd.nextseq && rev.window == Some(0) {
            fl |= ZERO_WINDOW_PROBE;
            break 'checks;
        }
        if s.window == 0 && !sfr {
            fl |= ZERO_WINDOW;
        }
        if fwd.nextseq != 0 && seq_gt(seq, fwd.nextseq) && flags & RST == 0 {
            fl |= LOST_SEGMENT;
            fwd.valid_bif = false;
        }
        if len <= 1 && fwd.nextseq.wrapping_sub(1) == seq && !sfr {
            fl |= KEEP_ALIVE;
        }
        let same = len == 0 && seq == fwd.nextseq && ack == fwd.lastack && !sfr;
        if same && s.window != 0 && Some(s.window) != fwd.window {
            fl |= WINDOW_UPDATE;
        }
        if len > 0 && !sfr && fills_window(rev, rev_scale, seq, len) {
            fl |= WINDOW_FULL;
        }
        if same && s.window != 0 && Some(s.window) == fwd.window && rev.last_flags & KEEP_ALIVE != 0
        {
            fl |= KEEP_ALIVE_ACK;
            break 'checks;
        }
        if same && s.window == 0 && fwd.window == Some(0) && rev.last_flags & ZERO_WINDOW_PROBE != 0
        {
            fl |= ZERO_WINDOW_PROBE_ACK;
            break 'checks;
        }
        if same && s.window != 0 && Some(s.window) == fwd.window {
            // -1: the peer's ACKed-unseen mark ([`acks_unseen`]),
            // neutralised ("case -1" in tshark 4.0).
            fwd.dupacknum = if fwd.dupacknum == UNSEEN_MARK {
                1
            } else {
                fwd.dupacknum.wrapping_add(1)
            };
            fl |= DUPLICATE_ACK;
        }
    }
    if ack != fwd.lastack {
        fwd.dupacknum = 0;
    }
    // ACKed unseen segment (tshark 4.0's rule: [`acks_unseen`]).
    if ackf && acks_unseen(rev, ack) {
        fl |= ACKED_UNSEEN;
    }
    let synfin = (flags & (SYN | FIN) != 0) as u32;
    if (len > 0 || synfin > 0) && fl & KEEP_ALIVE == 0 {
        let mut not_advanced = fwd.nextseq != 0 && seq_lt(seq, fwd.nextseq);
        if len > 1 && fwd.nextseq.wrapping_sub(1) == seq {
            not_advanced = false;
        }
        let ooo_ns = fwd
            .first_rtt_ns
            .filter(|&r| r > 0)
            .unwrap_or(OOO_DEFAULT_NS);
        if len > 0 && acked_already(rev, seq.wrapping_add(len)) {
            fl |= SPURIOUS_RETRANSMISSION;
        } else if not_advanced
            && rev.dupacknum >= 2
            && rev.lastack == seq
            && ts.saturating_sub(rev.lastack_ns) < FAST_RETRANS_NS
        {
            fl |= FAST_RETRANSMISSION;
        } else if not_advanced
            && ts.saturating_sub(fwd.nextseq_ns) < ooo_ns
            && fwd.nextseq != seq.wrapping_add(len).wrapping_add(synfin)
        {
            fl |= OUT_OF_ORDER;
        } else if not_advanced {
            fl |= RETRANSMISSION;
        }
    }
    // A copy the network made of this direction's last segment: for data,
    // spurious, not lost; for an ACK, no new report from the peer's stack.
    let network_copy = copied_by_network(fwd, s);
    // Where the loss or reordering happened (data segments only).
    if len > 0 && fl & (KEEP_ALIVE | ZERO_WINDOW_PROBE) == 0 {
        let end = seq.wrapping_add(len);
        if fl & LOST_SEGMENT != 0 {
            if let Some(n) = old_next {
                fwd.gaps.add(n, seq, ts);
            }
        } else if old_next.is_some_and(|n| seq_lt(seq, n)) {
            if let Some(opened_ns) = fwd.gaps.fill(seq, end) {
                let newer_id = match (counter_ip_id(s), fwd.max_ip_id) {
                    (Some(i), Some(m)) if fwd.ids_move => {
                        let d = i.wrapping_sub(m) as i16;
                        (d != 0).then_some(d > 0)
                    }
                    _ => None,
                };
                let newer_ts = match (s.tsval, fwd.max_tsval) {
                    (Some(t), Some(m)) => {
                        let d = t.wrapping_sub(m) as i32;
                        (d != 0).then_some(d > 0)
                    }
                    _ => None,
                };
                // Neither tells (IPv6, or a timestamp of the same clock
                // tick: Linux's ticks are 1 ms, tcp_time_stamp_ts in
                // include/net/tcp.h): a retransmission comes only once
                // the sender heard of the gap, at least a round trip
                // after it opened (measured on veth: 271 us and more,
                // with a 54 us handshake), so a filler sooner than the
                // handshake's RTT was overtaken on the way (the hop's
                // reordering: 13 to 60 us). Without a handshake,
                // Wireshark's timing rule decides.
                let resent = newer_id.or(newer_ts).unwrap_or_else(|| {
                    match fwd.first_rtt_ns.filter(|&r| r > 0) {
                        Some(rtt) => ts.saturating_sub(opened_ns) >= rtt,
                        None => fl & OUT_OF_ORDER == 0,
                    }
                });
                fwd.fillers.push((seq, end));
                if resent {
                    fl |= LOSS_BEFORE;
                    fwd.loss.lost_before_capture += 1;
                    first(&mut fwd.first.lost_before_capture, s.frame);
                } else {
                    fl |= REORDER_BEFORE;
                    fwd.loss.reordered_before_capture += 1;
                    first(&mut fwd.first.reordered_before_capture, s.frame);
                }
            } else if fl & SPURIOUS_RETRANSMISSION != 0
                // A copy the network made: nothing was lost. The receiver's
                // D-SACK for it would not always tell: under load it
                // processes two copies in one pass and sends one D-SACK (a
                // CI trial: 50 for 54 copies).
                || network_copy
            {
                fl |= RESENT_SPURIOUS;
                fwd.loss.spurious += 1;
            } else {
                fl |= LOSS_AFTER;
                fwd.loss.lost_after_capture += 1;
                first(&mut fwd.first.lost_after_capture, s.frame);
                fwd.resent.push(seq, end);
                if let Some(e) = fwd.episode.as_mut() {
                    if seq_le(seq, e.at) && seq_lt(e.at, end) {
                        e.resent = true;
                    }
                }
            }
        }
    }
    note_ip_id_and_tsval(fwd, s);
    // Bookkeeping, as Wireshark's. A SYN or FIN counts its sequence number
    // only when the segment joins the queue of unacknowledged ones, which
    // holds at most TCP_MAX_UNACKED_SEGMENTS (10,000, packet-tcp.h): behind
    // a full queue (the peer's ACKs not captured) tshark 4.0 adds the
    // flag's byte nowhere, so the next segment is no retransmission.
    let queued = (len > 0 || synfin > 0) && fwd.unacked.len() < super::rtt::MAX_UNACKED;
    let nextseq = seq
        .wrapping_add(len)
        .wrapping_add(if queued { synfin } else { 0 });
    if queued {
        fwd.unacked.sent(seq, nextseq, ts, s.frame);
    }
    if fl & ZERO_WINDOW_PROBE == 0 {
        if fwd.nextseq == 0 || seq_gt(nextseq, fwd.nextseq) {
            fwd.nextseq = nextseq;
            fwd.nextseq_ns = ts;
        }
        if fwd.maxseqtobeacked == 0 || fwd.maxseqtobeacked == seq {
            fwd.maxseqtobeacked = fwd.nextseq;
        }
    }
    fwd.window = Some(s.window);
    fwd.window_of_syn = syn;
    fwd.lastack = ack;
    fwd.lastack_ns = ts;
    fwd.last_flags = fl;
    fwd.nsack = s.nsack;
    fwd.sack = s.sack;
    // Zero-window stalls (the receiver stopped reading).
    if !sfr {
        if s.window == 0 {
            if fwd.zero_since.is_none() {
                fwd.zero_since = Some(ts);
                fwd.zero_window_episodes += 1;
            }
        } else if let Some(t0) = fwd.zero_since.take() {
            fwd.zero_window_ns += ts.saturating_sub(t0);
        }
    }
    // Segments carrying SACK blocks, counted as tshark counts frames with
    // `tcp.options.sack_le` (whatever their flags): a block whose right
    // edge the capture cut counts here, though it is not read.
    if s.sack_blocks > 0 {
        fwd.sack_seen = true;
        fwd.acks_with_sack += 1;
        fwd.sack_blocks += s.sack_blocks as u64;
    }
    // This segment's ACK, for the peer's data.
    if ackf {
        if s.sack_blocks > 0 {
            // A first block whose right edge the capture cut: its left
            // edge below the ACK is a D-SACK (RFC 2883 section 4), and it
            // covers at least its first byte.
            let (l, r) = if s.nsack > 0 {
                s.sack[0]
            } else {
                (s.sack[0].0, s.sack[0].0.wrapping_add(1))
            };
            let dsack = if s.nsack > 0 {
                seq_le(r, ack) || (s.nsack > 1 && seq_le(s.sack[1].0, l) && seq_le(r, s.sack[1].1))
            } else {
                seq_lt(l, ack)
            };
            if dsack {
                fl |= DSACK;
                fwd.dsack += 1;
                // The receiver's D-SACKs come a round trip after the
                // resends, a timeout's whole flight of them (a loaded CI
                // run resent 98 segments for 25 drops).
                if rev.resent.dsacked(l, r) {
                    rev.loss.lost_after_capture = rev.loss.lost_after_capture.saturating_sub(1);
                    rev.loss.spurious += 1;
                }
            }
        }
        close_episode(rev, ack, s.frame);
        // A duplicate ACK, or any ACK whose SACK blocks lie above it: the
        // peer is missing the bytes at `ack` (Linux changes the window
        // while it holds out-of-order data, so not every such ACK is a
        // duplicate by Wireshark's rule). Not an ACK reporting a copy it
        // received (D-SACK: a duplicate ACK by Wireshark's rule, with
        // nothing missing), nor a copy of an ACK the network made.
        //
        // With SACK in use (both SYNs permitted it, or this direction has
        // sent SACK blocks), a receiver missing bytes names what it holds
        // beyond them in every ACK (RFC 2018 section 4; Linux adds the
        // blocks while it holds out-of-order data, tcp_established_options
        // in net/ipv4/tcp_output.c): a duplicate ACK without blocks then
        // reports no hole. It is a copy the network made, which without
        // an IPv4 ID nothing else tells (an IPv6 path copying one ACK in
        // 20: 30 to 70 false reorderings after the capture point, one per
        // copy, a MEDIUM finding).
        let sack_used =
            fwd.sack_seen || (fwd.syn_sack_perm == Some(true) && rev.syn_sack_perm == Some(true));
        let hole_reported = (fl & DUPLICATE_ACK != 0 && !sack_used)
            || ((s.sack_blocks > 0) && seq_gt(s.sack[0].0, ack));
        if hole_reported
            && fl & DSACK == 0
            && !network_copy
            && rev.episode.is_none()
            && rev.nextseq != 0
            && seq_lt(ack, rev.nextseq)
            && !rev.gaps.contains(ack)
        {
            // The hole may have been resent already: with several holes
            // open, the peer reports the next one only once the ACK has
            // passed the earlier one, and by then Linux has often resent
            // both (RACK, net/ipv4/tcp_recovery.c). Without this, each
            // such hole read as reordering after the capture point (a
            // sender-side capture of a path that only drops: 46
            // reorderings beside 53 losses).
            let covers = |(a, b): (u32, u32)| a != b && seq_le(a, ack) && seq_lt(ack, b);
            let resent = rev.resent.covers(ack)
                // Older resends (a loaded path holds a dozen holes at
                // once): the copy still waits beside its original.
                || rev.unacked.covered_twice(ack)
                // At the receiver, an ACK the stack sent before it took
                // the gap's filler can reach the capture point after the
                // filler (and after the next holes' fillers): the hole it
                // reports is already filled.
                || rev.fillers.any(covers);
            rev.episode = Some(Episode { at: ack, resent });
        }
    }
    // Every segment's acknowledgment field, ACK flag or not ([`rtt_sample`]).
    if s.tshark_stops {
        // Acknowledged all the same; tshark shows no sample, no bytes in
        // flight and no flag of it.
        rev.unacked.acked(ack, ts);
        return Outcome {
            flags: fl,
            window,
            in_flight: None,
        };
    }
    rtt_sample(rev, ack, ts, s.frame);
    let in_flight = if len > 0 && fwd.valid_bif && fwd.nextseq != 0 {
        bytes_in_flight(fwd, rev, s.flags)
    } else {
        None
    };
    fwd.count(fl, s.frame);
    Outcome {
        flags: fl,
        window,
        in_flight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::PSH;
    use proptest::prelude::*;

    /// A two-direction conversation: `a` sends data, `b` acknowledges.
    struct Conv {
        a: TcpDirection,
        b: TcpDirection,
        frame: u64,
        ts: u64,
        id: u16,
    }

    impl Conv {
        fn new() -> Conv {
            Conv {
                a: TcpDirection::new(0),
                b: TcpDirection::new(0),
                frame: 0,
                ts: 0,
                id: 100,
            }
        }

        fn seg(&mut self, from_a: bool, s: Segment) -> Outcome {
            self.frame += 1;
            self.ts += 100_000;
            let s = Segment {
                frame: self.frame,
                ts: self.ts,
                ..s
            };
            if from_a {
                analyze(&mut self.a, &mut self.b, &s)
            } else {
                analyze(&mut self.b, &mut self.a, &s)
            }
        }

        fn handshake(&mut self) {
            self.seg(true, syn(1000, 0, SYN, Some(7)));
            self.seg(false, syn(5000, 1001, SYN | ACK, Some(9)));
            self.seg(true, ack_seg(1001, 5001, 502));
        }

        /// Data of `a` at relative byte `rel` (1 = first), 1000 bytes,
        /// with IP ID `id` (None: the next one).
        fn data(&mut self, rel: u32, id: Option<u16>) -> Outcome {
            let id = id.unwrap_or_else(|| {
                self.id += 1;
                self.id
            });
            self.seg(
                true,
                Segment {
                    seq: 1000 + rel,
                    ack: 5001,
                    flags: ACK,
                    len: 1000,
                    window: 502,
                    ip_id: Some(id),
                    ..Default::default()
                },
            )
        }

        fn ack(&mut self, rel: u32, sack: Option<(u32, u32)>) -> Outcome {
            let mut s = ack_seg(5001, 1000 + rel, 300);
            if let Some((l, r)) = sack {
                s.sack[0] = (1000 + l, 1000 + r);
                s.nsack = 1;
                s.sack_blocks = 1;
            }
            self.seg(false, s)
        }
    }

    fn syn(seq: u32, ack: u32, flags: u8, ws: Option<u8>) -> Segment {
        Segment {
            seq,
            ack,
            flags,
            window: 64240,
            wscale: ws,
            ..Default::default()
        }
    }

    fn ack_seg(seq: u32, ack: u32, window: u16) -> Segment {
        Segment {
            seq,
            ack,
            flags: ACK,
            window,
            ..Default::default()
        }
    }

    #[test]
    fn windows_follow_the_handshake_and_every_segment_end_acked_is_an_rtt_sample() {
        let mut c = Conv::new();
        c.handshake();
        assert_eq!(c.a.syn_window, Some(64240));
        assert_eq!(c.b.syn_window, Some(64240));
        // b's later windows are scaled by b's own shift (9).
        for i in 0..4 {
            c.data(1 + i * 1000, None);
        }
        let o = c.ack(2001, None);
        assert_eq!(o.window, 300 << 9);
        c.ack(4001, None);
        assert_eq!(c.b.window_max, 300 << 9);
        assert_eq!(c.a.window_max, 502 << 7);
        // The SYN-ACK acknowledges the SYN, then two ACKs of segment ends;
        // the handshake's last ACK acknowledges the SYN-ACK.
        assert_eq!(c.a.rtt.samples, 3);
        assert_eq!(c.b.rtt.samples, 1);
        assert_eq!(c.a.ws, WiresharkCounts::default());
    }

    #[test]
    fn rules_public_captures_exercise_as_tshark_4_0_applies_them() {
        // A SYN sent again after the SYN-ACK (acknowledgment field zero)
        // clears b's waiting SYN-ACK: the handshake's ACK gives no sample.
        // (Sequence numbers above 2^31: zero lies beyond them.)
        let mut c = Conv::new();
        let isn = 3_000_000_000;
        c.seg(true, syn(1000, 0, SYN, Some(7)));
        c.seg(false, syn(isn, 1001, SYN | ACK, Some(9)));
        c.seg(true, syn(1000, 0, SYN, Some(7)));
        c.seg(true, ack_seg(1001, isn + 1, 502));
        assert_eq!(c.b.rtt.samples, 0);
        // Without the repeated SYN, the same handshake gives the sample.
        let mut c = Conv::new();
        c.seg(true, syn(1000, 0, SYN, Some(7)));
        c.seg(false, syn(isn, 1001, SYN | ACK, Some(9)));
        c.seg(true, ack_seg(1001, isn + 1, 502));
        assert_eq!(c.b.rtt.samples, 1);
        // An ACK with the segment's own timestamp is no sample.
        let mut c = Conv::new();
        c.handshake();
        c.data(1, None);
        c.ts -= 100_000;
        c.ack(1001, None);
        assert_eq!(c.a.rtt.samples, 1, "only the SYN's");
        // Two ACKs beyond a hole: one "ACKed unseen segment"; a later ACK
        // beyond all the peer was seen to send flags again.
        c.data(2001, None);
        c.ack(3001, None);
        let again = c.ack(3001, None);
        assert_eq!(c.b.ws.acked_unseen_segments, 1);
        assert_ne!(again.flags & flag::DUPLICATE_ACK, 0);
        c.data(3001, None);
        c.ack(5001, None);
        assert_eq!(c.b.ws.acked_unseen_segments, 2);
    }

    #[test]
    fn acks_beyond_a_silent_peer_are_flagged_once_until_its_ack_moves() {
        // tshark 4.0's "ACKED LOST PACKET" when the mark is already at the
        // peer's highest byte: flagged if the peer's duplicate-ACK counter
        // is 0, which then becomes -1.
        let mut c = Conv::new();
        c.handshake();
        c.data(1, None);
        let first = c.ack(3001, None);
        assert_ne!(first.flags & flag::ACKED_UNSEEN, 0);
        c.ack(3001, None);
        c.ack(4001, None);
        assert_eq!(c.b.ws.acked_unseen_segments, 1);
        // b sends data; a acknowledges it: a's ACK number moved, so the
        // next ACK beyond a's bytes is flagged again.
        let mut d = ack_seg(5001, 1000 + 4001, 300);
        d.len = 100;
        c.seg(false, d);
        c.seg(true, ack_seg(1000 + 1001, 5101, 502));
        c.ack(4001, None);
        assert_eq!(c.b.ws.acked_unseen_segments, 2);
    }

    #[test]
    fn a_new_syn_on_the_same_ports_starts_the_analysis_over() {
        // A second connection from the same client port after the first
        // closed (TIME_WAIT reuse): tshark starts a new stream at its SYN,
        // so neither its SYN nor the SYN-ACK is "previous segment not
        // captured" or "ACKed unseen segment"; the counts add up.
        let mut c = Conv::new();
        c.handshake();
        c.data(1, None);
        c.ack(1001, None);
        let syn2 = c.seg(true, syn(900_000, 0, SYN, Some(7)));
        let synack2 = c.seg(false, syn(700_000, 900_001, SYN | ACK, Some(9)));
        c.seg(true, ack_seg(900_001, 700_001, 502));
        assert_eq!(syn2.flags & (flag::LOST_SEGMENT | flag::ACKED_UNSEEN), 0);
        assert_eq!(synack2.flags & (flag::LOST_SEGMENT | flag::ACKED_UNSEEN), 0);
        assert_eq!(c.a.ws.lost_segments + c.b.ws.lost_segments, 0);
        assert_eq!(
            c.a.ws.acked_unseen_segments + c.b.ws.acked_unseen_segments,
            0
        );
        // The same SYN again is a retransmission of the new connection's.
        let again = c.seg(true, syn(900_000, 0, SYN, Some(7)));
        assert_ne!(again.flags & flag::ANY_RETRANSMISSION, 0);
        // The first connection's RTT sample is kept.
        assert!(c.a.rtt.samples >= 1);
    }

    #[test]
    fn a_syn_at_time_zero_gives_no_initial_rtt() {
        // Wireshark's test/captures/tcp-badsegments.pcap, frames 1-11, one
        // microsecond apart: with the SYN at time 0 tshark keeps its 3 ms
        // out-of-order window (no initial RTT), so frame 11 (sequence
        // number 65, 32 bytes, 2 us after the highest segment) is out of
        // order; 1 ns later the initial RTT is 2 us and it is a
        // retransmission.
        for (t0, want) in [(0, flag::OUT_OF_ORDER), (1, flag::RETRANSMISSION)] {
            let (mut a, mut b) = (TcpDirection::new(0), TcpDirection::new(0));
            let mut n = 0u64;
            let mut go = |from_a: bool, s: Segment| {
                n += 1;
                let s = Segment {
                    frame: n,
                    ts: t0 + (n - 1) * 1000,
                    ..s
                };
                if from_a {
                    analyze(&mut a, &mut b, &s)
                } else {
                    analyze(&mut b, &mut a, &s)
                }
            };
            let data = |rel: u32, len: u32| Segment {
                len,
                ..ack_seg(1000 + rel, 5001, 8192)
            };
            go(true, syn(1000, 0, SYN, None));
            go(false, syn(5000, 1001, SYN | ACK, None));
            go(true, ack_seg(1001, 5001, 8192));
            for (rel, len) in [(1, 16), (17, 16), (49, 16), (33, 16)] {
                go(true, data(rel, len));
            }
            go(false, ack_seg(5001, 1065, 8192));
            go(true, data(65, 16));
            go(true, data(65, 16));
            let o = go(true, data(65, 32));
            assert_eq!(
                o.flags & (flag::OUT_OF_ORDER | flag::RETRANSMISSION),
                want,
                "t0 {t0}"
            );
        }
    }

    #[test]
    fn a_syn_sent_again_after_a_reset_restores_the_next_sequence_number() {
        // Suricata's base64-decode-5885 input: a SYN, an ACK answering
        // something else (acknowledgment X), the client's reset with
        // sequence number X (RFC 793 3.4), the SYN again, the handshake
        // and data: only the SYN is a retransmission (tshark 4.0.17).
        let mut c = Conv::new();
        c.seg(true, syn(1000, 0, SYN, Some(7)));
        let x = 1000 + 860_578_523;
        c.seg(false, ack_seg(5000, x, 251));
        c.seg(
            true,
            Segment {
                seq: x,
                ack: x,
                flags: RST,
                ..Default::default()
            },
        );
        let again = c.seg(true, syn(1000, 0, SYN, Some(7)));
        assert_ne!(again.flags & flag::ANY_RETRANSMISSION, 0);
        c.seg(false, syn(7000, 1001, SYN | ACK, Some(9)));
        c.seg(true, ack_seg(1001, 7001, 502));
        let data = c.data(1, None);
        assert_eq!(data.flags & flag::ANY_RETRANSMISSION, 0);
        c.data(1001, None);
        assert_eq!(c.a.ws.retransmissions, 1);
    }

    #[test]
    fn a_resent_fin_acking_unseen_bytes_is_a_fast_retransmission() {
        // Zeek's tcp/reassembly.pcap, frames 6-8: the server's FIN, the
        // client's data, the same FIN again acknowledging beyond the
        // client's bytes. The ACKed-unseen mark leaves -1 in tshark 4.0's
        // unsigned `dupacknum` of the client, which passes `>= 2`: tshark
        // flags the FIN a fast retransmission (and a retransmission).
        let mut c = Conv::new();
        c.handshake();
        let fin = Segment {
            seq: 5001,
            ack: 1001,
            flags: ACK | FIN,
            window: 300,
            ..Default::default()
        };
        c.seg(false, fin);
        c.data(1, None);
        let again = c.seg(
            false,
            Segment {
                ack: 1000 + 3001,
                ..fin
            },
        );
        assert_ne!(again.flags & flag::ACKED_UNSEEN, 0);
        assert_ne!(
            again.flags & flag::FAST_RETRANSMISSION,
            0,
            "{:#x}",
            again.flags
        );
        assert_eq!(c.b.ws.fast_retransmissions, 1);
    }

    #[test]
    fn a_fin_behind_a_full_unacked_queue_counts_no_sequence_number() {
        // TCP_MAX_UNACKED_SEGMENTS: a FIN that does not join the queue
        // leaves nextseq where the data ended, so the same FIN again is
        // no retransmission; with room in the queue it is one.
        for (segments, resent) in [(10, 1), (super::super::rtt::MAX_UNACKED as u32, 0)] {
            let mut c = Conv::new();
            c.handshake();
            for i in 0..segments {
                c.data(1 + i * 1000, None);
            }
            let fin = Segment {
                flags: ACK | FIN,
                ..ack_seg(1001 + segments * 1000, 5001, 502)
            };
            c.seg(true, fin);
            c.seg(true, fin);
            assert_eq!(c.a.ws.retransmissions, resent, "{segments} segments");
        }
    }

    #[test]
    fn without_the_handshake_the_scale_is_unknown_and_windows_raw() {
        let mut c = Conv::new();
        c.data(1, None);
        let o = c.ack(1001, None);
        assert_eq!(o.window, 300);
        assert!(!c.b.scale.known());
        assert_eq!(c.b.scale, WindowScale::Unknown);
    }

    #[test]
    fn a_gap_filled_by_a_newer_segment_is_loss_before_the_capture_point() {
        let mut c = Conv::new();
        c.handshake();
        c.data(1, Some(1));
        // Segment 1001 (ID 2) never reaches the capture point.
        let o = c.data(2001, Some(3));
        assert!(o.flags & flag::LOST_SEGMENT != 0);
        c.ack(1001, None);
        c.ack(1001, Some((2001, 3001)));
        c.ack(1001, Some((2001, 3001)));
        let o = c.data(1001, Some(4));
        assert!(o.flags & flag::LOSS_BEFORE != 0, "{:b}", o.flags);
        assert!(o.flags & flag::FAST_RETRANSMISSION != 0);
        assert_eq!(c.a.loss.lost_before_capture, 1);
        assert_eq!(c.a.loss.reordered_before_capture, 0);
        assert_eq!(c.b.ws.duplicate_acks, 2);
        assert_eq!(c.b.acks_with_sack, 2);
    }

    /// One segment in 40 lost with 500 in flight leaves 12 gaps open at
    /// once (measured on a loaded veth path): every filler is still a loss
    /// before the capture point, none a repeat of bytes it saw.
    #[test]
    fn a_dozen_gaps_open_at_once_are_all_remembered() {
        let mut c = Conv::new();
        c.handshake();
        // Segments 0..480 of 1000 bytes, every 40th (from the 20th) lost.
        let lost: Vec<u32> = (0..12).map(|k| 20 + 40 * k).collect();
        for i in 0..480u32 {
            if !lost.contains(&i) {
                c.data(1 + i * 1000, None);
            }
        }
        assert_eq!(c.a.gaps_open(), 12);
        for &i in &lost {
            let o = c.data(1 + i * 1000, None);
            assert!(
                o.flags & flag::LOSS_BEFORE != 0,
                "segment {i}: {:b}",
                o.flags
            );
        }
        assert_eq!(c.a.loss.lost_before_capture, 12);
        assert_eq!(c.a.loss.lost_after_capture, 0);
        assert_eq!(c.a.gaps_open(), 0);
    }

    /// The SYN-ACK's window is its edge unscaled: a flight that ends there
    /// (before the peer's first ACK) fills the window.
    #[test]
    fn a_flight_filling_the_syn_acks_window_is_window_full() {
        let mut c = Conv::new();
        c.seg(true, syn(1000, 0, SYN, Some(7)));
        c.seg(false, syn(5000, 1001, SYN | ACK, Some(9)));
        let mut d = ack_seg(1001, 5001, 502);
        d.len = 64000;
        let o = c.seg(true, d);
        assert_eq!(o.flags & flag::WINDOW_FULL, 0);
        d.seq = 1001 + 64000;
        d.len = 240;
        let o = c.seg(true, d);
        assert_ne!(o.flags & flag::WINDOW_FULL, 0, "{:b}", o.flags);
    }

    /// Without IP ID or timestamps (IPv6 with tcp_timestamps=0), a gap
    /// filled sooner than the handshake's RTT (200 us here: a segment
    /// every 100 us) was reordering; one filled later, a retransmission.
    #[test]
    fn without_id_or_timestamp_the_fillers_delay_against_the_rtt_tells() {
        let mut c = Conv::new();
        c.handshake();
        let data = |c: &mut Conv, i: u32| {
            c.seg(
                true,
                Segment {
                    seq: 1001 + i * 1000,
                    ack: 5001,
                    flags: ACK,
                    len: 1000,
                    window: 502,
                    ..Default::default()
                },
            )
        };
        data(&mut c, 0);
        data(&mut c, 2);
        let early = data(&mut c, 1);
        assert_ne!(early.flags & flag::REORDER_BEFORE, 0, "{:b}", early.flags);
        for i in 4..8 {
            data(&mut c, i);
        }
        let late = data(&mut c, 3);
        assert_ne!(late.flags & flag::LOSS_BEFORE, 0, "{:b}", late.flags);
        assert_eq!(c.a.loss.reordered_before_capture, 1);
        assert_eq!(c.a.loss.lost_before_capture, 1);
    }

    #[test]
    fn a_gap_filled_by_an_older_segment_is_reordering_before_the_capture_point() {
        let mut c = Conv::new();
        c.handshake();
        c.data(1, Some(1));
        c.data(2001, Some(3));
        // Long after Wireshark's out-of-order window: it says retransmission.
        c.ts += 50_000_000;
        let o = c.data(1001, Some(2));
        assert!(o.flags & flag::REORDER_BEFORE != 0);
        assert!(o.flags & flag::RETRANSMISSION != 0);
        assert_eq!(c.a.loss.reordered_before_capture, 1);
        assert_eq!(c.a.loss.lost_before_capture, 0);
        assert_eq!(c.a.gaps_open(), 0);
    }

    #[test]
    fn resent_bytes_the_capture_saw_are_loss_after_it_unless_dsacked() {
        let mut c = Conv::new();
        c.handshake();
        for i in 0..3 {
            c.data(1 + i * 1000, None);
        }
        c.ack(1001, Some((2001, 3001)));
        c.ack(1001, Some((2001, 4001)));
        let o = c.data(1001, None);
        assert!(o.flags & flag::LOSS_AFTER != 0);
        assert_eq!(c.a.loss.lost_after_capture, 1);
        // The receiver had it after all: a D-SACK for 1001..2001.
        let o = c.ack(4001, Some((1001, 2001)));
        assert!(o.flags & flag::DSACK != 0);
        assert_eq!(c.a.loss.lost_after_capture, 0);
        assert_eq!(c.a.loss.spurious, 1);
        assert_eq!(c.b.dsack, 1);
    }

    /// A timeout's go-back-N: 20 segments resent in a row, 15 of them
    /// reported received by D-SACKs that arrive after all 20 resends
    /// (beyond the 8 recent resends kept one by one): 5 lost, 15
    /// spurious; D-SACKs for the run beyond the segments it resent count
    /// no more.
    #[test]
    fn dsacks_after_a_long_run_of_resends_are_spurious_not_lost() {
        let mut c = Conv::new();
        c.handshake();
        for i in 0..21 {
            c.data(1 + i * 1000, None);
        }
        c.ack(1001, Some((2001, 3001)));
        c.ack(1001, Some((2001, 3001)));
        for i in 1..21 {
            c.data(1 + i * 1000, None);
        }
        assert_eq!(c.a.loss.lost_after_capture, 20);
        for i in 1..16 {
            c.ack(21001, Some((1 + i * 1000, 1001 + i * 1000)));
        }
        assert_eq!(c.a.loss.lost_after_capture, 5);
        assert_eq!(c.a.loss.spurious, 15);
        for _ in 0..10 {
            c.ack(21001, Some((1001, 2001)));
        }
        assert_eq!(c.a.loss.lost_after_capture, 0);
        assert_eq!(c.a.loss.spurious, 20);
    }

    /// After a timeout Linux resends the flight it marked lost with resends
    /// of other holes between them: each run keeps its own count, so the
    /// D-SACKs for the whole flight still find their resends (a hop
    /// stalled 400 ms: 89 D-SACKs for 100 resends, of which the single
    /// run kept before found 8).
    #[test]
    fn dsacks_find_resends_of_runs_broken_by_other_holes() {
        let mut c = Conv::new();
        c.handshake();
        for i in 0..40 {
            c.data(1 + i * 1000, None);
        }
        c.ack(1001, Some((2001, 3001)));
        c.ack(1001, Some((2001, 3001)));
        for i in 10..30 {
            c.data(1 + i * 1000, None);
            if i % 5 == 0 {
                // Another hole's resend, between two of the run's.
                c.data(1 + 30_000 + (i / 5) * 1000, None);
            }
        }
        assert_eq!(c.a.loss.lost_after_capture, 24);
        for i in 10..30 {
            c.ack(40_001, Some((1 + i * 1000, 1001 + i * 1000)));
        }
        assert_eq!(c.a.loss.lost_after_capture, 4);
        assert_eq!(c.a.loss.spurious, 20);
        // The other holes' resends were reported nowhere: still lost.
        c.ack(40_001, Some((12_001, 13_001)));
        assert_eq!(c.a.loss.spurious, 20);
    }

    /// A data segment the network copied (the same IPv4 ID right after the
    /// original) is spurious, not lost, D-SACK or not; a resend (a new ID)
    /// is a loss after the capture point until a D-SACK says otherwise.
    #[test]
    fn a_copy_the_network_made_is_no_loss() {
        let mut c = Conv::new();
        c.handshake();
        for i in 0..4 {
            c.data(1 + i * 1000, None);
        }
        let last = c.id;
        let o = c.data(3001, Some(last));
        assert!(o.flags & flag::RESENT_SPURIOUS != 0);
        assert_eq!((c.a.loss.spurious, c.a.loss.lost_after_capture), (1, 0));
        let o = c.data(3001, None);
        assert!(o.flags & flag::LOSS_AFTER != 0);
        assert_eq!((c.a.loss.spurious, c.a.loss.lost_after_capture), (1, 1));
    }

    /// Two holes (bytes 1001 and 3001) both resent before the receiver
    /// reports the second (it reports one hole at a time): the second
    /// hole's episode opens already resent, so neither reads as
    /// reordering. Without SACK, a go-back-N resend of many segments
    /// covers the holes reported after it.
    #[test]
    fn a_hole_resent_before_it_is_reported_is_no_reordering() {
        for sack in [true, false] {
            let mut c = Conv::new();
            c.handshake();
            for i in 0..5 {
                c.data(1 + i * 1000, None);
            }
            let block = |l, r| sack.then_some((l, r));
            c.ack(1001, block(2001, 3001));
            c.ack(1001, block(2001, 3001));
            c.ack(1001, block(4001, 5001));
            c.data(1001, None);
            c.data(3001, None);
            if !sack {
                c.data(4001, None);
            }
            c.ack(3001, block(4001, 5001));
            c.ack(3001, block(4001, 5001));
            c.ack(6001, None);
            assert_eq!(c.a.loss.reordered_after_capture, 0, "sack {sack}");
            assert_eq!(c.a.loss.lost_after_capture, if sack { 2 } else { 3 });
        }
    }

    /// A copy of an ACK the network made (same IPv4 ID as the ACK before
    /// it) reports no hole, whatever the ID of the SYN-ACK: Linux sends
    /// that one with ID 0, 0x8000 or more from the counter its ACKs then
    /// take (a receiver's ACKs from 0xd4e0 were never "newer" than it).
    /// The same duplicate ACK with the next ID is the receiver's own
    /// report of a hole, and with no resend, reordering after the capture.
    #[test]
    fn a_copy_of_an_ack_with_its_ip_id_is_no_hole_after_a_zero_id_syn_ack() {
        for (start, copy) in [(0xd4e0u16, true), (0x1000, true), (0xd4e0, false)] {
            let mut c = Conv::new();
            c.seg(true, syn(1000, 0, SYN, Some(7)));
            let synack = Segment {
                ip_id: Some(0),
                ..syn(5000, 1001, SYN | ACK, Some(9))
            };
            c.seg(false, synack);
            c.seg(true, ack_seg(1001, 5001, 502));
            let mut id = start;
            let ack = |c: &mut Conv, rel: u32, id: u16| {
                c.seg(
                    false,
                    Segment {
                        ip_id: Some(id),
                        ..ack_seg(5001, 1000 + rel, 300)
                    },
                )
            };
            for i in 0..4 {
                c.data(1 + i * 1000, None);
            }
            ack(&mut c, 2001, id);
            id += 1;
            ack(&mut c, 3001, id);
            let o = ack(&mut c, 3001, if copy { id } else { id + 1 });
            assert_ne!(o.flags & flag::DUPLICATE_ACK, 0, "Wireshark's rule");
            id += 2;
            ack(&mut c, 5001, id);
            let what = format!("start {start:#x} copy {copy}");
            assert_eq!(c.a.loss.reordered_after_capture, u64::from(!copy), "{what}");
        }
    }

    /// ECN is counted on every segment as tshark counts its fields, in
    /// order or not: the setup SYN's ECE and CWR, the SYN-ACK's ECE, a
    /// CE mark on in-order data, the ECE echoing it and the CWR answer.
    #[test]
    fn ecn_marks_and_flags_are_counted_on_every_path() {
        let mut c = Conv::new();
        c.seg(true, syn(1000, 0, SYN | ECE | CWR, Some(7)));
        c.seg(false, syn(5000, 1001, SYN | ACK | ECE, Some(9)));
        c.seg(true, ack_seg(1001, 5001, 502));
        c.data(1, None);
        let ce = Segment {
            seq: 2001,
            ack: 5001,
            flags: ACK,
            len: 1000,
            window: 502,
            ecn: ECN_CE,
            ..Default::default()
        };
        c.seg(true, ce);
        c.seg(
            false,
            Segment {
                flags: ACK | ECE,
                ..ack_seg(5001, 3001, 300)
            },
        );
        c.seg(
            true,
            Segment {
                seq: 3001,
                flags: ACK | CWR,
                ecn: 2,
                ..ce
            },
        );
        c.ack(4001, None);
        let e = |ce_marked, ece, cwr| EcnCounts {
            ce_marked,
            ece,
            cwr,
        };
        assert_eq!(c.a.ecn, e(1, 1, 2));
        assert_eq!(c.b.ecn, e(0, 2, 0));
        // Unmarked data after the marks adds nothing.
        c.data(4001, None);
        assert_eq!(c.a.ecn, e(1, 1, 2));
    }

    /// Without IP IDs (IPv6), a duplicate ACK without SACK blocks on a
    /// connection whose SYNs both permitted SACK reports no hole (a copy
    /// the network made); without SACK it is the receiver's report of
    /// one, and with no resend, reordering after the capture point. With
    /// SACK, a hole is reported by blocks above the ACK.
    #[test]
    fn with_sack_in_use_a_duplicate_ack_without_blocks_reports_no_hole() {
        for (perm, blocks, reordered) in [(true, false, 0), (false, false, 1), (true, true, 1)] {
            let mut c = Conv::new();
            c.seg(
                true,
                Segment {
                    sack_perm: perm,
                    ..syn(1000, 0, SYN, Some(7))
                },
            );
            c.seg(
                false,
                Segment {
                    sack_perm: perm,
                    ..syn(5000, 1001, SYN | ACK, Some(9))
                },
            );
            c.seg(true, ack_seg(1001, 5001, 502));
            for i in 0..3 {
                c.data(1 + i * 1000, None);
            }
            c.ack(1001, None);
            c.ack(1001, blocks.then_some((2001, 3001)));
            c.ack(4001, None);
            let what = format!("perm {perm} blocks {blocks}");
            assert_eq!(c.a.loss.reordered_after_capture, reordered, "{what}");
        }
    }

    #[test]
    fn a_hole_the_receiver_reports_then_acknowledges_without_resend_is_reordering_after() {
        let mut c = Conv::new();
        c.handshake();
        for i in 0..3 {
            c.data(1 + i * 1000, None);
        }
        c.ack(1001, None);
        c.ack(1001, Some((2001, 3001)));
        c.ack(4001, None);
        assert_eq!(c.a.loss.reordered_after_capture, 1);
        assert_eq!(c.a.loss.lost_after_capture, 0);
    }

    #[test]
    fn zero_window_probes_and_stalls() {
        let mut c = Conv::new();
        c.handshake();
        c.data(1, None);
        let o = c.ack(1001, None);
        assert_eq!(o.flags & flag::ZERO_WINDOW, 0);
        let mut z = ack_seg(5001, 2001, 0);
        c.seg(false, z);
        // A one-byte probe at the next sequence number.
        let o = c.seg(
            true,
            Segment {
                seq: 2001,
                ack: 5001,
                flags: ACK,
                len: 1,
                window: 502,
                ..Default::default()
            },
        );
        assert!(o.flags & flag::ZERO_WINDOW_PROBE != 0);
        let o = c.seg(false, z);
        assert!(o.flags & flag::ZERO_WINDOW_PROBE_ACK != 0);
        z.window = 300;
        let o = c.seg(false, z);
        assert!(o.flags & flag::WINDOW_UPDATE != 0);
        assert_eq!(c.b.ws.zero_windows, 2);
        assert_eq!(c.b.zero_window_episodes, 1);
        assert_eq!(c.b.zero_window_total_ns(), 300_000);
    }

    /// One generated segment of a conversation (see
    /// `in_order_fast_path_equals_the_full_analysis`).
    #[derive(Debug, Clone)]
    struct Step {
        from_a: bool,
        /// 0: in order; 1: behind; 2: beyond; 3: one byte back.
        place: u8,
        shift: u32,
        len: u32,
        flags: u8,
        window: u16,
        /// How far the ACK is behind the peer's next byte (negative:
        /// ahead of it, acknowledging bytes the capture never saw).
        ack_back: i32,
        sack: Option<(u32, u32)>,
        id_step: i16,
        ts_step: i32,
        gap_ns: u64,
    }

    fn step() -> impl Strategy<Value = Step> {
        (
            (
                prop::bool::weighted(0.7),
                prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
                0u32..5000,
                prop_oneof![Just(1448u32), Just(0u32), Just(1u32), 0u32..3000],
                prop_oneof![
                    12 => Just(ACK),
                    2 => Just(ACK | PSH),
                    1 => Just(ACK | FIN),
                    1 => Just(SYN),
                    1 => Just(SYN | ACK),
                    1 => Just(ACK | RST),
                    1 => Just(0u8),
                ],
            ),
            (
                prop_oneof![6 => Just(502u16), 1 => Just(0u16), 2 => any::<u16>()],
                prop_oneof![4 => Just(0i32), 4 => 0i32..4000, 1 => -4000i32..0],
                prop::option::weighted(0.1, (0u32..6000, 0u32..6000)),
                prop_oneof![Just(1i16), Just(0i16), -3i16..5],
                prop_oneof![Just(0i32), Just(1i32), -2i32..3],
                prop_oneof![Just(100_000u64), 0u64..8_000_000],
            ),
        )
            .prop_map(
                |(
                    (from_a, place, shift, len, flags),
                    (window, ack_back, sack, id_step, ts_step, gap_ns),
                )| Step {
                    from_a,
                    place,
                    shift,
                    len,
                    flags,
                    window,
                    ack_back,
                    sack,
                    id_step,
                    ts_step,
                    gap_ns,
                },
            )
    }

    /// Runs a conversation through [`analyze`], fast path on or off: the
    /// flags of every segment and both directions' state after it.
    fn converse(steps: &[Step], fast: bool) -> Vec<String> {
        FAST_PATH.with(|f| f.set(fast));
        let (mut a, mut b) = (TcpDirection::new(0), TcpDirection::new(0));
        // What each side sent so far: next byte, IP ID, TCP timestamp.
        let mut next = [1000u32, 5000u32];
        let mut id = [100u16, 900u16];
        let mut tsval = [7u32, 70_000u32];
        let mut ts = 0u64;
        let mut out = Vec::new();
        for (n, st) in steps.iter().enumerate() {
            let (me, peer) = if st.from_a { (0, 1) } else { (1, 0) };
            let seq = match st.place {
                0 => next[me],
                1 => next[me].wrapping_sub(st.shift),
                2 => next[me].wrapping_add(st.shift),
                _ => next[me].wrapping_sub(1),
            };
            id[me] = id[me].wrapping_add(st.id_step as u16);
            tsval[me] = tsval[me].wrapping_add(st.ts_step as u32);
            ts += st.gap_ns;
            let mut seg = Segment {
                frame: n as u64 + 1,
                ts,
                seq,
                ack: next[peer].wrapping_sub(st.ack_back as u32),
                flags: st.flags,
                len: st.len,
                window: st.window,
                wscale: (st.flags & SYN != 0).then_some(7),
                ip_id: st.from_a.then_some(id[me]),
                tsval: Some(tsval[me]),
                ..Default::default()
            };
            if let Some((l, r)) = st.sack {
                seg.sack[0] = (next[peer].wrapping_sub(l), next[peer].wrapping_sub(r));
                seg.nsack = 1;
                seg.sack_blocks = 1;
            }
            let end = seq.wrapping_add(st.len);
            if seq_gt(end, next[me]) {
                next[me] = end;
            }
            let o = if st.from_a {
                analyze(&mut a, &mut b, &seg)
            } else {
                analyze(&mut b, &mut a, &seg)
            };
            out.push(format!("{o:?} {a:?} {b:?}"));
        }
        FAST_PATH.with(|f| f.set(true));
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn in_order_fast_path_equals_the_full_analysis(
            steps in prop::collection::vec(step(), 1..120),
        ) {
            let fast = converse(&steps, true);
            let full = converse(&steps, false);
            for (i, (x, y)) in fast.iter().zip(&full).enumerate() {
                prop_assert_eq!(x, y, "after segment {}", i + 1);
            }
        }
    }

    /// Window full on an in-order segment after an ACK of bytes never
    /// seen, fast path on and off (random conversations seldom end a
    /// segment exactly at the peer's window edge).
    #[test]
    fn window_full_in_order_on_both_paths() {
        let run = |fast: bool| {
            FAST_PATH.with(|f| f.set(fast));
            let mut c = Conv::new();
            c.handshake();
            c.data(1, None);
            // b acknowledges it with window 300 (scale 9: 153,600 bytes)
            // and acknowledges a byte of a that a never sent.
            let mut s = ack_seg(5001, 2001, 300);
            c.seg(false, s);
            let o1 = c.data(1001, None);
            s.ack = 1000 + 2001 + 1000 + 7;
            c.seg(false, s);
            let full = Segment {
                seq: 3001,
                ack: 5001,
                flags: ACK,
                len: 1000 + 2001 + 1000 + 7 + 153_600 - 3001,
                window: 502,
                ..Default::default()
            };
            assert!(in_order(&c.a, &full) == fast);
            let o2 = c.seg(true, full);
            FAST_PATH.with(|f| f.set(true));
            (o1.flags, o2.flags, format!("{:?} {:?}", c.a, c.b))
        };
        let (fast, slow) = (run(true), run(false));
        assert!(fast.1 & flag::WINDOW_FULL != 0, "{:#x}", fast.1);
        assert_eq!(fast, slow);
    }

    /// The generated conversations do take the fast path, and so does a
    /// plain bulk transfer after its handshake.
    #[test]
    fn bulk_data_takes_the_fast_path() {
        let mut c = Conv::new();
        c.handshake();
        for i in 0..3 {
            let s = Segment {
                seq: 1001 + 1000 * i,
                ack: 5001,
                flags: ACK,
                len: 1000,
                window: 502,
                ..Default::default()
            };
            assert!(in_order(&c.a, &s));
            c.data(1 + 1000 * i, None);
        }
    }
}
