//! The per-flow TCP figures of `--json` (`flows[].tcp`), from the sequence
//! analysis of the flow's direction and of its peer.

use super::scale::WindowScale;
use super::sequence::{EcnCounts, FirstFrames, LossCounts, TcpDirection, WiresharkCounts};
use serde::Serialize;

/// The receive window this direction advertised.
#[derive(Debug, Clone, Serialize)]
pub struct WindowReport {
    /// `{"state": "shift", "shift": 7}`, `{"state": "not-used"}` or
    /// `{"state": "unknown"}` (no handshake: windows are the raw field).
    pub scale: WindowScale,
    /// The SYN's window (never scaled).
    pub syn_window: Option<u32>,
    /// Over the other segments, in bytes (scaled when the scale is known).
    pub min: Option<u32>,
    pub max: u32,
    pub last: Option<u32>,
    /// Seconds the window stayed at zero (the receiver stopped reading),
    /// and how many times it closed.
    pub zero_window_s: f64,
    pub zero_window_episodes: u64,
}

/// Round trips of this direction's data: every ACK of the peer that
/// acknowledges a segment's end (`tcp.analysis.ack_rtt`).
#[derive(Debug, Clone, Serialize)]
pub struct RttReport {
    pub samples: u64,
    pub min_ms: Option<f64>,
    pub median_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// SACK as this direction sent it (as the receiver of the peer's data).
#[derive(Debug, Clone, Serialize)]
pub struct SackReport {
    pub acks_with_sack: u64,
    pub blocks: u64,
    /// ACKs whose first block reports data received twice (RFC 2883).
    pub dsack: u64,
}

/// One direction's TCP analysis.
#[derive(Debug, Clone, Serialize)]
pub struct TcpReport {
    /// The other direction is in the capture (RTT, window-full, spurious
    /// retransmissions and the location of a loss need its ACKs).
    pub peer_captured: bool,
    pub window: WindowReport,
    pub rtt: RttReport,
    pub bytes_in_flight_max: u32,
    pub sack: SackReport,
    /// Wireshark's expert flags, counted over this direction's segments
    /// (compare with `tshark -Y tcp.analysis.<name>`).
    pub wireshark: WiresharkCounts,
    /// Loss and reordering with where they happened.
    pub loss: LossCounts,
    /// CE marks, ECE and CWR flags (RFC 3168).
    pub ecn: EcnCounts,
    pub first_frames: FirstFrames,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The report of direction `d`; `peer` is the other direction's state.
pub fn tcp_report(d: &TcpDirection, peer: Option<&TcpDirection>) -> TcpReport {
    let r = &d.rtt;
    let some = |v: u64| (r.samples > 0).then(|| ms(v));
    TcpReport {
        peer_captured: peer.is_some(),
        window: WindowReport {
            scale: d.scale,
            syn_window: d.syn_window,
            min: d.window_min,
            max: d.window_max,
            last: d.window_last,
            zero_window_s: d.zero_window_total_ns() as f64 / 1e9,
            zero_window_episodes: d.zero_window_episodes,
        },
        rtt: RttReport {
            samples: r.samples,
            min_ms: some(r.min_ns),
            median_ms: r.median_ns().map(ms),
            mean_ms: r.mean_ns().map(|v| v / 1e6),
            max_ms: some(r.max_ns),
        },
        bytes_in_flight_max: d.in_flight_max,
        sack: SackReport {
            acks_with_sack: d.acks_with_sack,
            blocks: d.sack_blocks,
            dsack: d.dsack,
        },
        wireshark: d.ws,
        loss: LossCounts {
            gaps_open: d.gaps_open(),
            ..d.loss
        },
        ecn: d.ecn,
        first_frames: d.first,
    }
}
