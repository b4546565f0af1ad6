//! Per-flow statistics, updated one frame at a time in constant memory.
//!
//! A flow is one direction of a TCP connection or UDP exchange, keyed by
//! the innermost 5-tuple and, for a tunnelled one, the tunnel's kind,
//! outer addresses and VNI or GRE key (`key`), so the inner flow and its
//! tunnel are one record. Every counter here is
//! a fixed-size field: a flow costs the same memory after ten packets and
//! after ten million. Series kept for graphs are decimated in place.

use crate::dissect::{self, CsumState, IpFields, Parsed, L4};
use serde::Serialize;

pub use crate::key::{FlowKey, TunnelKey};
pub use crate::series::{Decimated, Keep};
pub use crate::tcp::RttPoint;
use crate::tcp::{seq_lt, Segment, TcpDirection};
use offload::gro::IpIdPattern;

/// IP ID, DF, TTL and TOS behaviour of one header (outer or inner/only).
#[derive(Debug, Clone, Default)]
pub struct HeaderTrack {
    packets: u64,
    last: Option<(u64, u16, u32)>,
    last_ttl: u8,
    last_tos: u8,
    deltas: u64,
    all_zero: bool,
    same: u64,
    inc: u64,
    small: u64,
    other: u64,
    pub df_set: u64,
    pub df_clear: u64,
    pub ttl_changes: u64,
    pub tos_changes: u64,
    /// TOS changes in the DSCP bits (the others changed the ECN field
    /// only: a CE mark, or a sender's ECT left off its retransmissions).
    pub dscp_changes: u64,
    pub first_ttl_change: Option<u64>,
    pub first_tos_change: Option<u64>,
    /// `(frame, id)` around the first ID step that breaks the GRO rule
    /// (neither +segments nor unchanged).
    pub id_break_examples: Vec<(u64, u16)>,
    /// Consecutive ID steps that the 6.18 rule rejects (neither
    /// incrementing nor the same).
    pub id_breaks: u64,
    /// ID steps of more than one right after a packet above the MTU, within
    /// the segments it may stand for: the step a capture after GRO (or
    /// before TSO) shows between super-packets, whose ID is their first
    /// segment's. GRO never sees these steps (it sees the segments, one ID
    /// apart), so they say nothing against the sender's IDs.
    pub super_packet_id_steps: u64,
    /// Steps with an unchanged ID (fixed-ID).
    pub id_fixed_steps: u64,
    v6: bool,
}

/// Lower bound on a segment's payload, to bound how many segments a
/// super-packet may have stood for when judging its ID step.
const MIN_SEG: u32 = 64;

impl HeaderTrack {
    #[inline(always)]
    fn update(&mut self, ip: &IpFields, frame: u64, mtu: u32) {
        self.packets += 1;
        self.v6 = ip.v6;
        if ip.v6 {
            if self.packets > 1 {
                if ip.ttl != self.last_ttl {
                    self.ttl_changes += 1;
                    self.first_ttl_change.get_or_insert(frame);
                }
                if ip.tos != self.last_tos {
                    self.tos_changes += 1;
                    self.dscp_changes += u64::from((ip.tos ^ self.last_tos) >> 2 != 0);
                    self.first_tos_change.get_or_insert(frame);
                }
            }
            self.last_ttl = ip.ttl;
            self.last_tos = ip.tos;
            return;
        }
        if ip.df {
            self.df_set += 1;
        } else {
            self.df_clear += 1;
        }
        if let Some((pf, pid, plen)) = self.last {
            if ip.ttl != self.last_ttl {
                self.ttl_changes += 1;
                self.first_ttl_change.get_or_insert(frame);
            }
            if ip.tos != self.last_tos {
                self.tos_changes += 1;
                self.dscp_changes += u64::from((ip.tos ^ self.last_tos) >> 2 != 0);
                self.first_tos_change.get_or_insert(frame);
            }
            self.deltas += 1;
            let d = ip.id.wrapping_sub(pid) as u32;
            // A super-packet stands for several segments, each of which
            // took an ID: the next ID may be up to len/MIN_SEG further on.
            let max_segs = if plen > mtu {
                (plen / MIN_SEG).max(1)
            } else {
                1
            };
            let ok;
            if d == 0 {
                self.same += 1;
                self.id_fixed_steps += 1;
                ok = true;
            } else if d <= max_segs {
                self.inc += 1;
                if d > 1 {
                    self.super_packet_id_steps += 1;
                }
                ok = true;
            } else {
                if d < 1024 {
                    self.small += 1;
                } else {
                    self.other += 1;
                }
                ok = false;
            }
            if ip.id != 0 {
                self.all_zero = false;
            }
            if !ok {
                self.id_breaks += 1;
                if self.id_break_examples.is_empty() {
                    self.id_break_examples.push((pf, pid));
                }
            }
            if !self.id_break_examples.is_empty() && self.id_break_examples.len() < 4 {
                self.id_break_examples.push((frame, ip.id));
            }
        } else {
            self.all_zero = ip.id == 0;
        }
        self.last_ttl = ip.ttl;
        self.last_tos = ip.tos;
        self.last = Some((frame, ip.id, ip.ip_len));
    }

    /// The last TTL (hop limit) seen.
    pub fn ttl(&self) -> u8 {
        self.last_ttl
    }

    /// The last TOS (traffic class) seen.
    pub fn tos(&self) -> u8 {
        self.last_tos
    }

    pub fn pattern(&self) -> IpIdPattern {
        if self.v6 || self.deltas < 2 {
            return IpIdPattern::NotApplicable;
        }
        let n = self.deltas as f64;
        if self.all_zero {
            IpIdPattern::FixedZero
        } else if self.same as f64 >= 0.9 * n {
            IpIdPattern::Fixed
        } else if self.inc as f64 >= 0.9 * n {
            IpIdPattern::IncrementingPerFlow
        } else if (self.inc + self.small) as f64 >= 0.9 * n {
            IpIdPattern::GlobalCounter
        } else {
            IpIdPattern::Random
        }
    }

    /// DF as a word: "set", "clear" or "mixed".
    pub fn df(&self) -> &'static str {
        match (self.df_set, self.df_clear) {
            (_, 0) if self.v6 => "n/a",
            (0, 0) => "n/a",
            (_, 0) => "set",
            (0, _) => "clear",
            _ => "mixed",
        }
    }
}

/// Counts of checksum states.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct CsumCounts {
    pub valid: u64,
    pub zero: u64,
    pub offloaded: u64,
    pub bad: u64,
    pub unknown: u64,
}

impl CsumCounts {
    fn add(&mut self, s: CsumState) {
        match s {
            CsumState::Valid => self.valid += 1,
            CsumState::Zero => self.zero += 1,
            CsumState::Offloaded => self.offloaded += 1,
            CsumState::Bad => self.bad += 1,
            CsumState::Unknown => self.unknown += 1,
        }
    }

    /// The dominant state as a word.
    pub fn summary(&self) -> &'static str {
        let v = [
            (self.valid, "valid"),
            (self.zero, "zero"),
            (self.offloaded, "offloaded"),
            (self.bad, "bad"),
            (self.unknown, "unknown"),
        ];
        let nonzero = v.iter().filter(|(n, _)| *n > 0).count();
        if nonzero == 0 {
            "n/a"
        } else if nonzero > 1 {
            "mixed"
        } else {
            v.iter().find(|(n, _)| *n > 0).map(|x| x.1).unwrap_or("n/a")
        }
    }
}

/// A point of the time-sequence / size graphs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeqPoint {
    /// Seconds since the flow's first packet.
    pub t: f64,
    /// Relative sequence number (TCP) or byte count (UDP).
    pub seq: u64,
    /// Payload bytes.
    pub len: u32,
    /// Sent again (lost before or after the capture point, or spurious).
    pub retrans: bool,
    /// A late original (reordered before the capture point).
    pub ooo: bool,
    pub frame: u64,
    /// The sequence analysis' flags (`tcp::sequence::flag`).
    pub flags: u32,
    /// Bytes in flight after it (0: unknown).
    pub in_flight: u32,
}

/// One ACK this flow sent (for the peer's time-sequence graph), raw
/// sequence-space values: the report maps them onto the peer's ISN.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AckPoint {
    /// Seconds since this flow's first packet.
    pub t: f64,
    pub ack: u32,
    /// Right edge of the advertised window: ack + window in bytes.
    pub win_edge: u32,
    /// The advertised window in bytes (scaled when the scale is known).
    pub window: u32,
    pub window_scale_known: bool,
    pub frame: u64,
    pub sack: [(u32, u32); 3],
    pub nsack: u8,
    /// Same ACK, same window, no data: a duplicate ACK.
    pub dup: bool,
    /// Zero receive window.
    pub zero_window: bool,
}

impl Keep for SeqPoint {
    fn keep(&self) -> bool {
        self.retrans || self.ooo
    }
}

impl Keep for AckPoint {
    fn keep(&self) -> bool {
        self.dup || self.zero_window || self.nsack > 0
    }
}

/// Throughput bins whose width doubles to stay within a fixed count.
#[derive(Debug, Clone, Default)]
pub struct Bins {
    /// `FIRST_BIN_NS << shift` once the first packet came, else 0.
    pub width_ns: u64,
    /// How many times the width doubled: the bin index is
    /// `rel_ns / FIRST_BIN_NS >> shift` (equal to `rel_ns / width_ns`,
    /// without a 64-bit division per packet).
    shift: u32,
    pub bytes: Vec<u64>,
}

const BINS: usize = 200;
/// The first bin width: 100 us; doubles as needed.
const FIRST_BIN_NS: u64 = 100_000;

impl Bins {
    fn add(&mut self, rel_ns: u64, bytes: u64) {
        if self.width_ns == 0 {
            self.width_ns = FIRST_BIN_NS;
        }
        // floor(floor(x / a) / 2^k) == floor(x / (a * 2^k)); the division
        // by a constant compiles to a multiply.
        let units = rel_ns / FIRST_BIN_NS;
        let mut i = (units >> self.shift) as usize;
        while i >= BINS {
            let merged: Vec<u64> = self.bytes.chunks(2).map(|c| c.iter().sum()).collect();
            self.bytes = merged;
            self.width_ns *= 2;
            self.shift += 1;
            i = (units >> self.shift) as usize;
        }
        if self.bytes.len() <= i {
            self.bytes.resize(i + 1, 0);
        }
        self.bytes[i] += bytes;
    }
}

/// Sequence-space bookkeeping of one TCP direction for the GRO view
/// (window and option churn); the sequence analysis proper (loss,
/// reordering, windows, RTT) is [`crate::tcp`].
#[derive(Debug, Clone, Default)]
pub struct TcpTrack {
    started: bool,
    /// The first sequence number seen (relative sequence numbers start here).
    pub isn: u32,
    /// Segments sent again (lost before or after the capture point, or
    /// spurious), as [`crate::tcp`] tells them.
    pub retransmissions: u64,
    /// Late originals (reordered before the capture point).
    pub out_of_order: u64,
    pub first_retransmission: Option<u64>,
    pub first_out_of_order: Option<u64>,
    pub data_segments: u64,
    last_window: Option<u16>,
    last_opt: Option<u32>,
    pub window_changes: u64,
    pub first_window_change: Option<u64>,
    pub option_changes: u64,
    pub first_option_change: Option<u64>,
    pub syn_mss: Option<u16>,
    pub psh: u64,
    pub cwr: u64,
}

impl TcpTrack {
    /// Returns the relative sequence number.
    fn update(&mut self, t: &dissect::TcpFields, payload: u32, frame: u64) -> u64 {
        if t.flags & 0x02 != 0 {
            self.syn_mss = t.mss_opt.or(self.syn_mss);
        }
        if !self.started {
            self.started = true;
            self.isn = t.seq;
            if payload > 0 {
                self.data_segments += 1;
            }
            return 0;
        }
        let rel = t.seq.wrapping_sub(self.isn) as u64;
        if payload == 0 {
            return rel;
        }
        self.data_segments += 1;
        if t.flags & 0x08 != 0 {
            self.psh += 1;
        }
        if t.flags & 0x80 != 0 {
            self.cwr += 1;
        }
        if let Some(w) = self.last_window {
            if w != t.window {
                self.window_changes += 1;
                self.first_window_change.get_or_insert(frame);
            }
        }
        self.last_window = Some(t.window);
        if let Some(o) = self.last_opt {
            if o != t.opt_sig {
                self.option_changes += 1;
                self.first_option_change.get_or_insert(frame);
            }
        }
        self.last_opt = Some(t.opt_sig);
        rel
    }

    /// Counts a segment the sequence analysis flagged.
    fn note(&mut self, flags: u32, frame: u64) {
        use crate::tcp::sequence::flag;
        if flags & flag::RESENT != 0 {
            self.retransmissions += 1;
            self.first_retransmission.get_or_insert(frame);
        }
        if flags & flag::REORDER_BEFORE != 0 {
            self.out_of_order += 1;
            self.first_out_of_order.get_or_insert(frame);
        }
    }
}

/// A log2 histogram of nanosecond gaps: a median in constant memory.
#[derive(Debug, Clone, Copy)]
pub struct LogHist {
    buckets: [u32; 64],
    n: u32,
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist {
            buckets: [0; 64],
            n: 0,
        }
    }
}

impl LogHist {
    fn add(&mut self, ns: u64) {
        let b = (64 - ns.leading_zeros()) as usize;
        self.buckets[b.min(63)] += 1;
        self.n += 1;
    }

    /// The median's bucket (a power of two of nanoseconds).
    pub fn median(&self) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let mut acc = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc * 2 >= self.n {
                return Some(1u64 << i);
            }
        }
        None
    }
}

/// Why the big packets of a flow are big.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BigPacketSide {
    /// Captured on the sending host before segmentation (TSO/GSO).
    SenderTso,
    /// Captured on the receiving host after coalescing (GRO/LRO), or
    /// delivered whole over a virtual link.
    ReceiverGro,
    /// No packet above the path MTU, or not enough evidence.
    Unknown,
}

/// Flows evicted from the table (least recently active first), added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OtherFlows {
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
    pub payload_bytes: u64,
    pub tcp_flows: u64,
    pub udp_flows: u64,
    pub retransmissions: u64,
}

impl OtherFlows {
    pub fn add(&mut self, f: &FlowStats) {
        self.flows += 1;
        self.packets += f.packets;
        self.bytes += f.bytes;
        self.payload_bytes += f.payload_bytes;
        match f.key.proto {
            dissect::PROTO_TCP => self.tcp_flows += 1,
            dissect::PROTO_UDP => self.udp_flows += 1,
            _ => {}
        }
        self.retransmissions += f.tcp.as_ref().map_or(0, |t| t.retransmissions);
    }

    pub fn merge(&mut self, o: &OtherFlows) {
        self.flows += o.flows;
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.payload_bytes += o.payload_bytes;
        self.tcp_flows += o.tcp_flows;
        self.udp_flows += o.udp_flows;
        self.retransmissions += o.retransmissions;
    }
}

/// Which of `last_frames` to evict when a table of flows is full: the
/// least recently active eighth (at least one). Linear time; a full table
/// evicts an eighth at once, so the cost per new flow stays constant.
pub fn eviction_set(last_frames: impl Iterator<Item = u64>) -> Vec<bool> {
    let mut order: Vec<(u64, u32)> = last_frames
        .enumerate()
        .map(|(i, f)| (f, i as u32))
        .collect();
    let n = order.len();
    let mut evict = vec![false; n];
    if n == 0 {
        return evict;
    }
    let k = (n / 8).max(1);
    order.select_nth_unstable(k - 1);
    for &(_, i) in &order[..k] {
        evict[i as usize] = true;
    }
    evict
}

/// Everything known about one flow.
#[derive(Debug, Clone)]
pub struct FlowStats {
    pub key: FlowKey,
    pub file: usize,
    pub packets: u64,
    /// Bytes on the wire (original lengths).
    pub bytes: u64,
    pub payload_bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub first_frame: u64,
    /// The last frame seen: the eviction order (least recently active first).
    pub last_frame: u64,
    /// Order of first appearance within its file (stable across evictions;
    /// the `flow_id` of packets.csv).
    pub serial: u64,
    pub largest_ip: u32,
    /// Largest payload of a packet within the path MTU.
    pub max_single_payload: u32,
    pub above_mtu: u64,
    pub first_above_mtu: Option<u64>,
    pub above_mtu_len_zero: u64,
    /// Segment counts inferred from IP ID steps after above-MTU packets.
    pub id_inferred_segments: u64,
    pub id_inferred_packets: u64,
    pub id_inferred_mss: Option<u32>,
    id_pending: Option<(u16, u32)>,
    /// Boxed: only tunnelled flows have one, and it is a sixth of a record.
    pub outer: Option<Box<HeaderTrack>>,
    /// The outer UDP ports (VXLAN, Geneve) of the direction's first frame;
    /// they are no part of the key.
    pub outer_ports: Option<(u16, u16)>,
    /// Times the outer UDP source port changed (a sender re-hashing its
    /// socket, `sk_rethink_txhash`, moves to another one).
    pub outer_sport_changes: u64,
    last_outer_sport: u16,
    pub inner: HeaderTrack,
    /// The outer UDP checksum (VXLAN, Geneve) or the GRE checksum (GRE
    /// with its C flag): one counter, a flow's tunnel being one kind.
    pub outer_csum: CsumCounts,
    pub l4_csum: CsumCounts,
    pub ip_csum_bad: u64,
    pub first_bad_outer_csum: Option<u64>,
    pub first_bad_l4_csum: Option<u64>,
    csum_checked: u64,
    pub tcp: Option<TcpTrack>,
    /// Cooked-capture direction votes (outgoing, incoming).
    pub dir_votes: (u64, u64),
    /// Timing votes for TSO vs GRO: min data→ACK and ACK→data gaps.
    /// (data→ACK, ACK→data). Boxed and made on first use: most flows
    /// never need them, and the two histograms are a third of a record.
    timing: Option<Box<[LogHist; 2]>>,
    pending_big: Option<(u32, u64)>,
    /// Recent big packets' sequence ranges, to see where ACKs land.
    big_ranges: [(u32, u32); 4],
    big_next: usize,
    /// ACKs from the peer landing inside a big packet (the peer saw it in
    /// pieces: the capture is before TSO) or exactly at its end.
    pub acks_inside_big: u64,
    pub acks_at_big_end: u64,
    last_ack_seen_ns: Option<u64>,
    /// The other direction of the connection (paired when the second
    /// direction's first packet arrives; tunnels by the inner 5-tuple).
    pub reverse: Option<usize>,
    pub series: Decimated<SeqPoint>,
    /// This flow's ACKs (TCP), for the peer's graph or its own ACK line.
    pub acks: Decimated<AckPoint>,
    /// The TCP sequence analysis of this direction (windows, RTT of its
    /// data, loss and reordering).
    pub analysis: Option<Box<TcpDirection>>,
    /// GRO deliveries at the first what-if size (filled from the worker).
    pub gro: Vec<crate::series::GroPoint>,
    pub bins: Bins,
    /// Per what-if size: stack packets etc. Filled by `whatif`.
    pub what_if: Vec<crate::figures::FlowWhatIf>,
    /// The same frames with fixed IPv4 IDs (tunnels only): a healthy tunnel.
    pub healthy_what_if: Vec<crate::figures::FlowWhatIf>,
    /// Frames the capture cut short, by where.
    pub snap: crate::figures::SnapCounts,
}

/// How often checksums are verified after a flow's first packets: they
/// cost a pass over the payload, and a flow's checksum state rarely changes.
const CSUM_ALWAYS: u64 = 64;
const CSUM_EVERY: u64 = 16;

impl FlowStats {
    pub fn new(key: FlowKey, file: usize, frame: u64, ts: u64, sizes: usize) -> FlowStats {
        FlowStats {
            key,
            file,
            packets: 0,
            bytes: 0,
            payload_bytes: 0,
            first_ns: ts,
            last_ns: ts,
            first_frame: frame,
            last_frame: frame,
            serial: 0,
            largest_ip: 0,
            max_single_payload: 0,
            above_mtu: 0,
            first_above_mtu: None,
            above_mtu_len_zero: 0,
            id_inferred_segments: 0,
            id_inferred_packets: 0,
            id_inferred_mss: None,
            id_pending: None,
            outer: key.tunnel.map(|_| Box::default()),
            outer_ports: None,
            outer_sport_changes: 0,
            last_outer_sport: 0,
            inner: HeaderTrack {
                all_zero: true,
                ..Default::default()
            },
            outer_csum: CsumCounts::default(),
            l4_csum: CsumCounts::default(),
            ip_csum_bad: 0,
            first_bad_outer_csum: None,
            first_bad_l4_csum: None,
            csum_checked: 0,
            tcp: (key.proto == dissect::PROTO_TCP).then(TcpTrack::default),
            dir_votes: (0, 0),
            timing: None,
            pending_big: None,
            big_ranges: [(0, 0); 4],
            big_next: 0,
            acks_inside_big: 0,
            acks_at_big_end: 0,
            last_ack_seen_ns: None,
            reverse: None,
            series: Decimated::default(),
            acks: Decimated::default(),
            analysis: (key.proto == dissect::PROTO_TCP).then(|| Box::new(TcpDirection::new(ts))),
            gro: Vec::new(),
            bins: Bins::default(),
            what_if: vec![crate::figures::FlowWhatIf::default(); sizes],
            healthy_what_if: vec![crate::figures::FlowWhatIf::default(); sizes],
            snap: Default::default(),
        }
    }

    /// Adds one frame. `mtu` is the path MTU (IP bytes); `peer` is the
    /// other direction's sequence analysis, when the capture has it.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        p: &Parsed,
        frame: &[u8],
        number: u64,
        ts: u64,
        orig_len: u32,
        mtu: u32,
        peer: Option<&mut TcpDirection>,
    ) {
        self.packets += 1;
        self.bytes += orig_len as u64;
        self.payload_bytes += p.payload as u64;
        self.last_ns = self.last_ns.max(ts);
        self.last_frame = number;
        if let Some(o) = p.outgoing {
            if o {
                self.dir_votes.0 += 1;
            } else {
                self.dir_votes.1 += 1;
            }
        }
        let ip = &p.ip;
        self.largest_ip = self.largest_ip.max(ip.ip_len);
        // Above the MTU: judged on the outermost header, which is what
        // travelled on the link.
        let wire_ip = p.tunnel.as_ref().map_or(ip, |t| &t.ip);
        if wire_ip.ip_len > mtu {
            self.above_mtu += 1;
            self.first_above_mtu.get_or_insert(number);
            if wire_ip.len_zero {
                self.above_mtu_len_zero += 1;
            }
        } else {
            self.max_single_payload = self.max_single_payload.max(p.payload);
        }
        // Segment count from the ID step after a super-packet.
        if !wire_ip.v6 {
            if let Some((pid, pay)) = self.id_pending.take() {
                let segs = wire_ip.id.wrapping_sub(pid) as u32;
                if segs > 1 && pay % segs == 0 && pay / segs <= 65_000 && pay / segs >= MIN_SEG {
                    self.id_inferred_segments += segs as u64;
                    self.id_inferred_packets += 1;
                    self.id_inferred_mss = Some(pay / segs);
                }
            }
            if wire_ip.ip_len > mtu && p.payload > 0 {
                self.id_pending = Some((wire_ip.id, p.payload));
            }
        }
        self.inner.update(ip, number, mtu);
        let due = self.csum_due();
        let mut inner_state = None;
        if due {
            let s = match p.l4 {
                L4::Tcp(t) => dissect::l4_checksum(frame, ip, p.l4_off, t.checksum, false),
                L4::Udp { checksum, .. } => {
                    dissect::l4_checksum(frame, ip, p.l4_off, checksum, true)
                }
                L4::Other => CsumState::Unknown,
            };
            inner_state = Some(s);
            if !matches!(p.l4, L4::Other) {
                if s == CsumState::Bad {
                    self.first_bad_l4_csum.get_or_insert(number);
                }
                self.l4_csum.add(s);
            }
            if !ip.v6 {
                // The IPv4 header alone (IHL): an AH in transport mode
                // counts in `hdr_len` (crate::dissect).
                let ihl = frame.get(ip.off).map_or(0, |b| (b & 0x0f) as usize * 4);
                if let Some(h) = frame.get(ip.off..ip.off + ihl) {
                    if offload::checksum::checksum(h) != 0 {
                        self.ip_csum_bad += 1;
                    }
                }
            }
        }
        if let (Some(o), Some(t)) = (self.outer.as_mut(), p.tunnel.as_ref()) {
            o.update(&t.ip, number, mtu);
            if t.kind.udp() {
                self.note_outer_ports(t.sport, t.dport);
            }
            // IP in IP has no outer checksum; GRE one when its C flag is set.
            let udp = t.kind.udp();
            let gre = t.kind.gre() && dissect::gre_has_checksum(frame, t.udp_off);
            if udp && t.udp_checksum == 0 {
                self.outer_csum.add(CsumState::Zero);
            } else if due && (udp || gre) {
                // With the inner checksum left to the NIC, the outer one
                // was computed by local checksum offload over a payload
                // that is not final yet: it cannot be judged.
                let st = if inner_state == Some(CsumState::Offloaded) {
                    CsumState::Unknown
                } else if udp {
                    dissect::l4_checksum(frame, &t.ip, t.udp_off, t.udp_checksum, true)
                } else {
                    dissect::gre_checksum(frame, &t.ip, t.udp_off)
                };
                if st == CsumState::Bad {
                    self.first_bad_outer_csum.get_or_insert(number);
                }
                self.outer_csum.add(st);
            }
        }
        self.csum_checked += 1;
        let rel_ns = ts.saturating_sub(self.first_ns);
        self.bins.add(rel_ns, p.payload as u64);
        let (seq, outcome) = match (&mut self.tcp, &p.l4, self.analysis.as_mut()) {
            (Some(tr), L4::Tcp(t), Some(dir)) => {
                let rel = tr.update(t, p.payload, number);
                let seg = Segment {
                    frame: number,
                    ts,
                    seq: t.seq,
                    ack: t.ack,
                    flags: t.flags,
                    len: p.payload,
                    ecn: ip.tos & 3,
                    window: t.window,
                    wscale: t.wscale,
                    sack_perm: t.sack_perm,
                    sack: t.sack,
                    nsack: t.nsack,
                    sack_blocks: t.sack_blocks,
                    ip_id: (!ip.v6).then_some(ip.id),
                    tsval: t.tsval,
                    tshark_stops: t.tshark_stops,
                };
                let mut scratch;
                let peer = match peer {
                    Some(p) => p,
                    None => {
                        scratch = TcpDirection::default();
                        &mut scratch
                    }
                };
                let o = crate::tcp::sequence::analyze(dir, peer, &seg);
                tr.note(o.flags, number);
                if t.flags & 0x10 != 0 {
                    use crate::tcp::sequence::flag;
                    let dup = o.flags & flag::DUPLICATE_ACK != 0;
                    let zero_window = o.flags & flag::ZERO_WINDOW != 0;
                    let window_scale_known = dir.scale.known();
                    self.acks
                        .push_with(dup || zero_window || t.nsack > 0, || AckPoint {
                            t: rel_ns as f64 / 1e9,
                            ack: t.ack,
                            win_edge: t.ack.wrapping_add(o.window),
                            window: o.window,
                            window_scale_known,
                            frame: number,
                            sack: t.sack,
                            nsack: t.nsack,
                            dup,
                            zero_window,
                        });
                }
                (rel, Some(o))
            }
            _ => (self.payload_bytes - p.payload as u64, None),
        };
        if p.payload > 0 || self.tcp.is_none() {
            use crate::tcp::sequence::flag;
            let fl = outcome.map_or(0, |o| o.flags);
            let retrans = fl & flag::RESENT != 0;
            let ooo = fl & flag::REORDER_BEFORE != 0;
            self.series.push_with(retrans || ooo, || SeqPoint {
                t: rel_ns as f64 / 1e9,
                seq,
                len: p.payload,
                retrans,
                ooo,
                frame: number,
                flags: fl,
                in_flight: outcome.and_then(|o| o.in_flight).unwrap_or(0),
            });
        }
    }

    /// Frees what only the graphs read (series points, throughput bins,
    /// GRO deliveries, RTT points) and the sequence analysis' queue of
    /// unacknowledged segments, once the pass is over and the graphs are
    /// drawn. Counts (`seen`, `shown`) stay.
    pub fn drop_graph_series(&mut self) {
        self.series.points = Vec::new();
        self.acks.points = Vec::new();
        self.bins.bytes = Vec::new();
        self.gro = Vec::new();
        if let Some(d) = self.analysis.as_mut() {
            d.drop_graph_series();
        }
    }

    /// Notes a UDP tunnel's outer ports: the first pair, and each change
    /// of source port after it.
    fn note_outer_ports(&mut self, sport: u16, dport: u16) {
        if self.outer_ports.is_none() {
            self.outer_ports = Some((sport, dport));
        } else if sport != self.last_outer_sport {
            self.outer_sport_changes += 1;
        }
        self.last_outer_sport = sport;
    }

    fn csum_due(&self) -> bool {
        self.csum_checked < CSUM_ALWAYS || self.csum_checked.is_multiple_of(CSUM_EVERY)
    }

    /// TSO/GRO timing: a data packet of this flow at `ts` ending at `end`.
    pub fn note_data(&mut self, ts: u64, start: u32, end: u32, big: bool) {
        if big {
            self.big_ranges[self.big_next % 4] = (start, end);
            self.big_next += 1;
        }
        if let Some(a) = self.last_ack_seen_ns.take() {
            self.timing.get_or_insert_with(Default::default)[1].add(ts.saturating_sub(a));
        }
        if big && self.pending_big.is_none() {
            self.pending_big = Some((end, ts));
        }
    }

    /// TSO/GRO timing: the reverse direction acknowledged `ack` at `ts`.
    #[inline]
    pub fn note_ack(&mut self, ts: u64, ack: u32) {
        for &(a, b) in &self.big_ranges[..self.big_next.min(4)] {
            if ack == b {
                self.acks_at_big_end += 1;
                break;
            }
            if seq_lt(a, ack) && seq_lt(ack, b) {
                self.acks_inside_big += 1;
                break;
            }
        }
        if let Some((end, t0)) = self.pending_big {
            if !seq_lt(ack, end) {
                self.timing.get_or_insert_with(Default::default)[0].add(ts.saturating_sub(t0));
                self.pending_big = None;
            }
        }
        self.last_ack_seen_ns = Some(ts);
    }

    pub fn duration_ns(&self) -> u64 {
        self.last_ns - self.first_ns
    }

    /// Payload throughput in bits per second (0 for an instant flow).
    pub fn throughput_bps(&self) -> f64 {
        let d = self.duration_ns();
        if d == 0 {
            0.0
        } else {
            self.payload_bytes as f64 * 8.0 * 1e9 / d as f64
        }
    }

    /// The MSS: from the SYN option, else the largest single-segment payload.
    pub fn observed_mss(&self) -> Option<u32> {
        // Only TCP has segments; a UDP or ICMP payload size is not an MSS.
        self.tcp.as_ref()?;
        if self.max_single_payload > 0 {
            return Some(self.max_single_payload);
        }
        self.tcp.as_ref().and_then(|t| t.syn_mss).map(u32::from)
    }

    /// TSO at the sender or GRO at the receiver, for flows with big packets.
    pub fn big_packet_side(&self) -> BigPacketSide {
        if self.above_mtu == 0 {
            return BigPacketSide::Unknown;
        }
        let (out, inc) = self.dir_votes;
        if out > inc {
            return BigPacketSide::SenderTso;
        }
        if inc > out {
            return BigPacketSide::ReceiverGro;
        }
        // The receiver acknowledges what its stack saw: inside a big packet
        // means the peer got it in pieces, so the capture was taken before
        // segmentation (TSO/GSO at the sender).
        if self.acks_inside_big > 0 && self.acks_inside_big * 4 >= self.acks_at_big_end {
            return BigPacketSide::SenderTso;
        }
        if self.acks_at_big_end > 0 {
            return BigPacketSide::ReceiverGro;
        }
        // On the receiver the local stack acknowledges a super-packet within
        // microseconds while the next data waits a round trip; on the
        // sender it is the other way round.
        let (d2a, a2d) = match &self.timing {
            Some(t) => (t[0].median(), t[1].median()),
            None => (None, None),
        };
        match (d2a, a2d) {
            (Some(d2a), Some(a2d)) if d2a < a2d => BigPacketSide::ReceiverGro,
            (Some(d2a), Some(a2d)) if a2d < d2a => BigPacketSide::SenderTso,
            (Some(_), None) => BigPacketSide::ReceiverGro,
            (None, Some(_)) => BigPacketSide::SenderTso,
            _ => BigPacketSide::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(id: u16, df: bool) -> IpFields {
        IpFields {
            v6: false,
            src: [0; 16],
            dst: [0; 16],
            id,
            df,
            ttl: 64,
            tos: 0,
            ip_len: 1500,
            len_zero: false,
            off: 14,
            hdr_len: 20,
            proto: 6,
        }
    }

    fn pattern(ids: &[u16]) -> IpIdPattern {
        let mut h = HeaderTrack {
            all_zero: true,
            ..Default::default()
        };
        for (i, id) in ids.iter().enumerate() {
            h.update(&ip(*id, true), i as u64 + 1, 1500);
        }
        h.pattern()
    }

    #[test]
    fn ip_id_patterns() {
        assert_eq!(
            pattern(&[5, 6, 7, 8, 9, 10]),
            IpIdPattern::IncrementingPerFlow
        );
        assert_eq!(pattern(&[0, 0, 0, 0, 0]), IpIdPattern::FixedZero);
        assert_eq!(pattern(&[9, 9, 9, 9, 9]), IpIdPattern::Fixed);
        assert_eq!(pattern(&[5, 9, 12, 20, 21, 30]), IpIdPattern::GlobalCounter);
        assert_eq!(
            pattern(&[101, 40000, 7, 3000, 60000, 12]),
            IpIdPattern::Random
        );
        assert_eq!(pattern(&[1, 2]), IpIdPattern::NotApplicable);
    }

    #[test]
    fn id_break_examples_start_at_the_first_break() {
        let mut h = HeaderTrack::default();
        for (i, id) in [10u16, 11, 12, 500, 9, 77].iter().enumerate() {
            h.update(&ip(*id, false), i as u64 + 1, 1500);
        }
        assert_eq!(h.id_breaks, 3);
        assert_eq!(
            h.id_break_examples,
            vec![(3, 12), (4, 500), (5, 9), (6, 77)]
        );
        assert_eq!(h.df(), "clear");
    }

    #[test]
    fn decimated_series_stays_bounded_and_keeps_retransmissions() {
        let mut d = Decimated::default();
        for i in 0..100_000u64 {
            d.push(SeqPoint {
                t: i as f64,
                seq: i,
                len: 1,
                retrans: i == 77_777,
                ooo: false,
                frame: i,
                flags: 0,
                in_flight: 0,
            });
        }
        assert!(d.points.len() <= 1500);
        assert!(d.points.iter().any(|p| p.retrans));
        let mut b = Bins::default();
        b.add(0, 10);
        b.add(3_600_000_000_000, 5);
        assert!(b.bytes.len() <= BINS);
        assert_eq!(b.bytes.iter().sum::<u64>(), 15);
    }
}
