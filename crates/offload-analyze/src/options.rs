//! What `offload analyze` computes: the options every stage reads.

use offload::gro::KernelLine;
use std::path::PathBuf;

/// Default what-if sizes: the legacy 64 KiB and a BIG TCP setting.
pub const DEFAULT_GRO_SIZES: [u32; 2] = [65536, 185000];

/// What the what-if does with a frame the capture cut short after its
/// headers (`tcpdump -s N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TruncatedFrames {
    /// Decide from its headers and wire length (`orig_len`), its
    /// checksums taken as valid, as the kernel takes verified ones: the
    /// figures of the whole capture when its checksums were valid.
    #[default]
    Headers,
    /// Pass it up unmerged (`capture-truncated`), as a receiver that
    /// could not read it would.
    Unmerged,
}

/// What to compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `gro_max_size` values to simulate, in order.
    pub gro_sizes: Vec<u32>,
    pub kernel: KernelLine,
    /// Path MTU in IP bytes: larger packets are super-packets.
    pub mtu: u32,
    /// UDP destination ports read as VXLAN.
    pub vxlan_ports: Vec<u16>,
    /// Let the engine verify TCP/UDP checksums (as the kernel does without
    /// a hardware verdict). Off for captures taken on a sender whose
    /// checksums are offloaded.
    pub verify_checksums: bool,
    /// Worker threads. 0: one per core, each file one job (no file is read
    /// twice). N: also splits a lone file over N jobs (statistics, what-if
    /// sizes), each reading it: shorter wall time, about 1.5x the CPU.
    pub threads: usize,
    /// `--strict`: a captured length above the snapshot length stops the
    /// read (by default such frames are read and counted, as tshark does).
    pub strict: bool,
    /// Write a per-packet CSV table here while reading.
    pub packet_csv: Option<PathBuf>,
    /// Write per-packet Parquet files into this directory while reading.
    pub parquet_dir: Option<PathBuf>,
    /// Flows kept in detail (over all inputs). Past it, the least recently
    /// active flows are folded into the report's `other_flows` total, so
    /// memory stays bounded whatever the flow count.
    pub max_flows: usize,
    /// Stream the rows of evicted flows (the `flows.csv` columns, what-if
    /// columns empty) to this file as they are evicted.
    pub evicted_csv: Option<PathBuf>,
    /// Frames cut after their headers: judged from them, or passed up.
    pub truncated: TruncatedFrames,
    /// The what-if's flush timeout: a held packet is completed when the
    /// capture shows this long without a frame of its run. The default
    /// (the engine's, 50 µs) stands for a NIC's interrupt moderation on a
    /// receiver without `gro_flush_timeout`; a receiver that sets
    /// `gro_flush_timeout` holds packets across polls for about that long.
    pub flush_timeout_ns: u64,
}

/// Default for [`Options::max_flows`]. A kept flow direction costs about
/// 6 KB at the run's peak (its statistics and TCP analysis, both what-if
/// sizes, then its report row beside them), so 50,000 stay near 300 MB
/// peak resident memory however many flows the capture holds
/// (docs/performance.md, "Memory against flow count").
pub const DEFAULT_MAX_FLOWS: usize = 50_000;

impl Default for Options {
    fn default() -> Self {
        Options {
            gro_sizes: DEFAULT_GRO_SIZES.to_vec(),
            kernel: KernelLine::V6_18,
            mtu: 1500,
            vxlan_ports: offload::wire::vxlan::DEFAULT_PORTS.to_vec(),
            verify_checksums: true,
            threads: 0,
            strict: false,
            packet_csv: None,
            parquet_dir: None,
            max_flows: DEFAULT_MAX_FLOWS,
            evicted_csv: None,
            truncated: TruncatedFrames::Headers,
            flush_timeout_ns: offload::gro::DEFAULT_FLUSH_TIMEOUT_NS,
        }
    }
}
