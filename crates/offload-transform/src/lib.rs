//! offload-transform: capture-to-capture transforms, `offload gro` and
//! `offload gso`.
//!
//! Both stream the input (constant memory), write every packet they can,
//! and stop cleanly on a bad frame or on cancellation: everything before
//! the bad frame is processed and written, the held packets are flushed,
//! and the error is returned beside the summary so that the caller can
//! report it and exit non-zero.
//!
//! - [`gro`]: coalesce as the kernel's GRO would; super-packets carry their
//!   GSO metadata ([`offload_capture::GsoMeta`]) into pcapng.
//! - [`gso`]: segment super-packets as GSO/TSO would, with the MSS from the
//!   metadata, from `--mss`, or inferred per flow for bare captures.
#![deny(unsafe_code)]

pub mod csum;
pub mod gro;
pub mod gso;
pub mod mss;

pub use gro::{gro_capture, gro_capture_with, GroSettings, GroSummary, ProtoSummary, ReasonCount};
pub use gso::{
    gso_capture, CopiedReason, FlowMss, FlowTableSummary, GsoOptions, GsoSummary, DEFAULT_MAX_FLOWS,
};
pub use mss::MssSource;
use offload_capture::{CaptureError, Control};

/// Timestamps a transform could not keep exactly: input times outside the
/// nanosecond range a frame holds (years 1677 to 2262: a huge pcapng
/// timestamp or `if_tsoffset`), and output times the output format cannot
/// hold (before 1970; in pcap, from 2^32 s, 2106-02-07, on). Each is
/// written as the nearest time that can be, and counted here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TimestampsClamped {
    /// Input frames whose timestamp was clamped on reading.
    pub input: u64,
    /// Number of the first of them (0: none).
    pub first_input_frame: u64,
    /// Output frames whose timestamp was clamped on writing.
    pub output: u64,
    /// Number of the first of them (0: none).
    pub first_output_frame: u64,
}

impl TimestampsClamped {
    fn new(reader: &offload_capture::CaptureReader, out: &offload_capture::WriterStats) -> Self {
        TimestampsClamped {
            input: reader.timestamps_clamped().0,
            first_input_frame: reader.timestamps_clamped().1,
            output: out.timestamps_clamped,
            first_output_frame: out.first_timestamp_clamped.unwrap_or(0),
        }
    }
}

/// How the input is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Stop at a frame whose captured length exceeds the snapshot length
    /// (by default it is read whole and counted, as tshark does).
    pub strict: bool,
}

/// A transform's summary plus the input error that stopped it, if any.
#[derive(Debug)]
pub struct Outcome<S> {
    /// What the run did (also when it stopped early).
    pub summary: S,
    /// The input turned out bad at some frame; everything before it was
    /// processed and written.
    pub input_error: Option<CaptureError>,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// Frames between two progress reports.
const PROGRESS_EVERY: u64 = 4096;
