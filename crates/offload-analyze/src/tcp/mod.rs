//! TCP sequence analysis at the level of Wireshark's "TCP analysis" and
//! tcptrace, per flow direction, one segment at a time in bounded memory.
//!
//! - [`scale`]: the receive window by the handshake rules of RFC 7323
//!   (windows in SYNs never scaled; a scale only when both SYNs carried the
//!   option; unknown without the handshake, and said so).
//! - [`sequence`]: the per-direction state machine. Its flags follow the
//!   definitions of Wireshark's `tcp_analyze_sequence_number`
//!   (epan/dissectors/packet-tcp.c) in the same order of checks, so that
//!   the counts can be compared with `tshark`'s `tcp.analysis.*` fields;
//!   on top of them it tells loss from reordering and where each happened
//!   relative to the capture point (docs/analyze.md, "TCP analysis").
//! - [`rtt`]: segments awaiting their ACK (an RTT sample for every ACK that
//!   acknowledges a segment's end, as `tcp.analysis.ack_rtt`) and the
//!   bounded statistics of the samples.
//! - [`report`]: the per-flow figures in `--json`. The findings they give
//!   (a receiver that stops reading, loss with its location, reordering)
//!   are the sibling module `tcp_findings`'s.
//!
//! Nothing here depends on the rest of the crate but the bounded series
//! (`series`): the flow statistics call in, the report reads out.

pub mod report;
pub mod rtt;
pub mod scale;
pub mod sequence;

pub use rtt::RttPoint;
pub use sequence::{Outcome, TcpDirection};

/// TCP header flag bits.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
/// ECN-Echo and Congestion Window Reduced (RFC 3168 section 6.1).
pub const ECE: u8 = 0x40;
pub const CWR: u8 = 0x80;
/// The IP header's ECN codepoint "Congestion Experienced" (RFC 3168
/// section 5).
pub const ECN_CE: u8 = 3;

/// One segment as the analysis reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Segment {
    /// Frame number in its capture file.
    pub frame: u64,
    /// Capture timestamp, ns.
    pub ts: u64,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// Payload bytes (from the IP length: right on header-only captures).
    pub len: u32,
    /// The IP header's ECN field (the low two bits of the IPv4 TOS or
    /// IPv6 traffic class; of the inner header in a tunnel).
    pub ecn: u8,
    /// The window field as sent (unscaled).
    pub window: u16,
    /// The window-scale option (SYN segments; [`scale::WSCALE_CUT`] when
    /// the capture cut the options before one was found).
    pub wscale: Option<u8>,
    /// The SACK-permitted option (SYN segments).
    pub sack_perm: bool,
    /// The first three SACK blocks and how many of them are set
    /// (`dissect::TcpFields::sack`).
    pub sack: [(u32, u32); 3],
    pub nsack: u8,
    /// How many blocks the SACK option holds in all (those whose left
    /// edge was captured; `nsack` counts only whole ones).
    pub sack_blocks: u8,
    /// IPv4 identification (None for IPv6).
    pub ip_id: Option<u16>,
    /// TCP timestamp value.
    pub tsval: Option<u32>,
    /// tshark shows no analysis of this segment
    /// (`dissect::TcpFields::tshark_stops`): its flags and RTT sample are
    /// not counted; the analysis still runs on it.
    pub tshark_stops: bool,
}

/// Sequence-space comparisons (RFC 1982 serial arithmetic on 32 bits).
#[inline]
pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[inline]
pub fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[inline]
pub fn seq_le(a: u32, b: u32) -> bool {
    !seq_gt(a, b)
}
