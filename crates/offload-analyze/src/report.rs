//! The report: the serialisable result of `offload analyze` (its JSON
//! schema is documented in `docs/analyze.md`). Types only; `assemble`
//! builds it from the pass, and the renderers (`text`, `html`, `export`,
//! `columnar`) read it.

use crate::dissect::{self, TunnelKind};
use crate::flow::{BigPacketSide, CsumCounts, FlowStats, HeaderTrack, OtherFlows, SeqPoint};
use offload::gro::IpIdPattern;
use serde::Serialize;

/// Version of the JSON layout; bumped on incompatible changes.
pub const SCHEMA: &str = "offload-analyze/2";

/// Everything `offload analyze` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub settings: Settings,
    pub inputs: Vec<InputReport>,
    /// The user stopped the run; figures cover what was read.
    pub interrupted: bool,
    pub flows: Vec<FlowReport>,
    /// Flows beyond `settings.max_flows`, evicted least recently active
    /// first and added up here (their packets are in `what_if` totals).
    pub other_flows: OtherFlows,
    pub findings: Vec<Finding>,
    pub what_if: Vec<WhatIfReport>,
    /// With several captures: the flows seen in more than one, compared
    /// capture by capture (the `hops` module).
    pub hops: Vec<HopReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    #[serde(serialize_with = "crate::kernel::serialize_line")]
    pub kernel: offload::gro::KernelLine,
    /// False: the profile's differences from 6.18 are derived from the
    /// kernel source, not compared with a running kernel.
    pub kernel_verified_live: bool,
    pub gro_max_sizes: Vec<u32>,
    pub mtu: u32,
    pub vxlan_ports: Vec<u16>,
    pub verify_checksums: bool,
    /// Flows kept in detail; see `other_flows`.
    pub max_flows: usize,
    /// The what-if's flush timeout (`--flush-timeout`).
    pub flush_timeout_ns: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct InputReport {
    pub path: String,
    pub frames: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub link_types: Vec<u32>,
    pub unsupported_link_frames: u64,
    pub unparsed_frames: u64,
    /// Frames without an IP packet analysis reads (unparsed and of an
    /// unsupported link type), by reason (`crate::link::Skip`: the header
    /// and field, or what the frame carries instead), each with the first
    /// such frame.
    pub link_skipped: std::collections::BTreeMap<String, SkipCount>,
    /// IP fragments: reassembled as tshark does for the flow figures
    /// (crate::frag), and what could not be.
    pub fragments: crate::frag::FragCounts,
    /// IPComp payloads: inflated as tshark does (crate::ipcomp), and
    /// those that could not be.
    pub ipcomp: crate::ipcomp::IpcompCounts,
    /// The file turned bad here; everything before was analysed.
    pub error: Option<String>,
    pub interrupted: bool,
    /// Checksums were left to the NIC in this capture (sender side or a
    /// virtual link); the what-if did not verify them.
    pub checksums_offloaded: bool,
    /// Frames whose captured length exceeded the file's snapshot length:
    /// read whole (as tshark does), unless `--strict`.
    pub frames_above_snaplen: u64,
    /// Frames whose timestamp lay outside the years 1677 to 2262 (a huge
    /// pcapng timestamp or `if_tsoffset`), read as the nearest time that
    /// range holds, and the first of them.
    pub timestamps_clamped: u64,
    pub first_timestamp_clamped_frame: Option<u64>,
    /// Frames timestamped earlier than the frame before them (the file
    /// is not in time order), and the first of them.
    pub timestamps_backwards: u64,
    pub first_timestamp_backwards_frame: Option<u64>,
    /// Frames cut short by the capture (header-only captures).
    #[serde(flatten)]
    pub snap: crate::figures::SnapCounts,
}

/// Frames skipped for one reason.
#[derive(Debug, Clone, Serialize)]
pub struct SkipCount {
    pub frames: u64,
    /// The first of them (1-based frame number in its file).
    pub first_frame: u64,
}

/// One network header's behaviour.
#[derive(Debug, Clone, Serialize)]
pub struct HeaderReport {
    #[serde(serialize_with = "crate::kernel::serialize_pattern")]
    pub ip_id_pattern: IpIdPattern,
    /// "set", "clear", "mixed" or "n/a" (IPv6).
    pub df: &'static str,
    /// ID steps that neither increment nor repeat (GRO's IP ID rule rejects them).
    pub ip_id_breaks: u64,
    pub ttl_changes: u64,
    pub tos_changes: u64,
    /// The last TTL (hop limit) and TOS (traffic class) seen.
    pub ttl: u8,
    pub tos: u8,
}

impl HeaderReport {
    pub(crate) fn of(h: &HeaderTrack) -> Self {
        HeaderReport {
            ip_id_pattern: h.pattern(),
            df: h.df(),
            ip_id_breaks: h.id_breaks,
            ttl_changes: h.ttl_changes,
            tos_changes: h.tos_changes,
            ttl: h.ttl(),
            tos: h.tos(),
        }
    }
}

/// The outer side of a tunnelled flow.
#[derive(Debug, Clone, Serialize)]
pub struct TunnelReport {
    /// "vxlan", "geneve", "gre", "gretap", "ipip", "sit", "ip6ip6",
    /// "ipip6", "gtp", "gre-in-udp", "ayiya", "teredo" or "ah"
    /// (`dissect::TunnelKind`).
    pub kind: &'static str,
    pub src: String,
    pub dst: String,
    /// Outer UDP ports of the direction's first frame (VXLAN, Geneve,
    /// GTP-U, GRE in UDP, AYIYA); null for GRE, IP in IP and AH.
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// Times the outer UDP source port changed within the direction.
    pub sport_changes: u64,
    /// The VNI (VXLAN, Geneve); null for the others.
    pub vni: Option<u32>,
    /// The GRE key (GRE, gretap, GRE in UDP); null without one.
    pub gre_key: Option<u32>,
    /// The GTP-U tunnel endpoint identifier; null for the others.
    pub teid: Option<u32>,
    /// The AH security parameter index (AH tunnel mode); null for the
    /// others.
    pub spi: Option<u32>,
    /// The IPComp compression parameter index (IPComp tunnel mode without
    /// AH); null for the others.
    pub cpi: Option<u32>,
    /// The kernel's GRO opens this tunnel by default
    /// (`dissect::TunnelKind::kernel_gro`): false for GTP-U, GRE in UDP,
    /// AYIYA, Teredo, AH and IPComp, whose frames the what-if passes up as
    /// the outer packet the kernel sees (decisions 0231, 0232).
    pub kernel_gro: bool,
    pub outer_ip: HeaderReport,
    /// The outer UDP checksum (the UDP tunnels): "n/a" for the others.
    pub outer_udp_checksum: &'static str,
    pub outer_udp_checksum_counts: CsumCounts,
    /// The GRE checksum (GRE and gretap with the C flag): "n/a" without.
    pub gre_checksum: &'static str,
    pub gre_checksum_counts: CsumCounts,
}

impl TunnelReport {
    /// The tunnel in a few words: "vxlan 192.168.0.1:50000 ->
    /// 192.168.0.2:4789 vni 42", "gre 192.168.0.1 -> 192.168.0.2 key 7",
    /// "sit 192.168.0.1 -> 192.168.0.2".
    pub fn label(&self) -> String {
        let end = |addr: &str, port: Option<u16>| match port {
            Some(p) if addr.contains(':') => format!("[{addr}]:{p}"),
            Some(p) => format!("{addr}:{p}"),
            None => addr.to_string(),
        };
        let mut s = format!(
            "{} {} -> {}",
            self.kind,
            end(&self.src, self.sport),
            end(&self.dst, self.dport)
        );
        if let Some(v) = self.vni {
            s.push_str(&format!(" vni {v}"));
        }
        if let Some(k) = self.gre_key {
            s.push_str(&format!(" key {k}"));
        }
        if let Some(k) = self.teid {
            s.push_str(&format!(" teid {k}"));
        }
        if let Some(k) = self.spi {
            s.push_str(&format!(" spi {k}"));
        }
        s
    }
}

/// Packets above the path MTU and what they mean.
#[derive(Debug, Clone, Serialize)]
pub struct AboveMtu {
    pub packets: u64,
    pub first_frame: Option<u64>,
    pub largest_ip_len: u32,
    /// With a zero IP length field (BIG TCP representation).
    pub length_field_zero: u64,
    /// "sender-tso", "receiver-gro" or "unknown".
    pub interpretation: BigPacketSide,
    /// Average segments per big packet, from IP ID steps (IPv4 only).
    pub segments_from_ip_id: Option<f64>,
    pub mss_from_ip_id: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReasonReport {
    pub reason: &'static str,
    pub count: u64,
    pub first_frame: u64,
}

/// GRO at one size, for one flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowWhatIfReport {
    pub gro_max_size: u32,
    pub frames: u64,
    /// Packets the receiving stack would handle.
    pub stack_packets: u64,
    pub super_packets: u64,
    pub merge_ratio: f64,
    /// From header analysis rather than the engine (tunnel without engine
    /// support, or a kernel profile other than 6.18).
    pub estimated: bool,
    pub reasons: Vec<ReasonReport>,
    /// What the same frames give with fixed outer and inner IPv4 IDs
    /// (tunnels only): the figure a healthy tunnel reaches. Never above
    /// `stack_packets`.
    pub healthy_tunnel_packets: Option<u64>,
    /// Merged packets the kernel line loses after GRO (BIG TCP over an
    /// IPv6-outer tunnel, 5.19-6.19), their segments, and the reason's name.
    pub lost_packets: u64,
    pub lost_segments: u64,
    pub loss_reason: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    pub id: usize,
    pub file: String,
    pub protocol: &'static str,
    pub src: String,
    pub dst: String,
    pub sport: u16,
    pub dport: u16,
    /// Human-readable one-liner naming addresses, ports and tunnel.
    pub description: String,
    pub tunnel: Option<TunnelReport>,
    pub packets: u64,
    pub bytes: u64,
    pub payload_bytes: u64,
    pub first_frame: u64,
    pub start_s: f64,
    pub duration_s: f64,
    pub throughput_bps: f64,
    pub observed_mss: Option<u32>,
    pub syn_mss: Option<u16>,
    pub retransmissions: u64,
    pub out_of_order: u64,
    pub window_changes: u64,
    pub option_changes: u64,
    pub above_mtu: AboveMtu,
    pub ip: HeaderReport,
    pub l4_checksum: &'static str,
    pub l4_checksum_counts: CsumCounts,
    pub ip_header_checksum_bad: u64,
    /// Frames of this flow cut short by the capture.
    #[serde(flatten)]
    pub snap: crate::figures::SnapCounts,
    pub what_if: Vec<FlowWhatIfReport>,
    /// TCP sequence analysis (windows, RTT, Wireshark's flags, loss and
    /// reordering with their location); null for other protocols.
    pub tcp: Option<crate::tcp::report::TcpReport>,
}

/// One flush reason over the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct ReasonTotal {
    pub reason: &'static str,
    pub count: u64,
    pub pass_through: bool,
    pub obstacle: bool,
    pub examples: Vec<FrameRef>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FrameRef {
    pub file: String,
    pub frame: u64,
}

/// GRO at one size over all inputs.
#[derive(Debug, Clone, Serialize)]
pub struct WhatIfReport {
    pub gro_max_size: u32,
    pub gro_ipv4_max_size: u32,
    #[serde(serialize_with = "crate::kernel::serialize_line")]
    pub kernel: offload::gro::KernelLine,
    /// Some figures come from the profile's post-classification or from
    /// tunnel header analysis, not from the engine alone.
    pub derived: bool,
    pub notes: Vec<String>,
    pub frames_in: u64,
    /// Packets the stack would see.
    pub stack_packets: u64,
    pub merge_ratio: f64,
    pub super_packets: u64,
    pub largest_packet: u32,
    pub flush_reasons: Vec<ReasonTotal>,
    /// Merged packets the kernel line loses after GRO (the engine's
    /// `Delivered::lost`: BIG TCP over an IPv6-outer tunnel, 5.19-6.19),
    /// counted in `stack_packets` too, their segments and the first
    /// reason's name.
    pub lost_packets: u64,
    pub lost_segments: u64,
    pub loss_reason: Option<&'static str>,
}

// Findings are the workspace's one `offload_report::Finding` (with its
// `Severity`, `FlowRef` and `Evidence`), shared with inspect and lab.
// Analyze fills `flow` (with `capture`, the file the flow was read from)
// and `evidence` (file, frames, counts) on every finding, `fix` on every
// finding, `extra_packets` when the finding is a measured cost, and
// `kernel` when the rule depends on the kernel line; `device` stays null.
use offload_report::Finding;

/// An ACK on the time-sequence axis of the flow it acknowledges.
#[derive(Debug, Clone, Serialize)]
pub struct AckView {
    pub t: f64,
    pub ack: i64,
    pub win: i64,
    pub sack: Vec<(i64, i64)>,
    pub dup: bool,
    pub zero_window: bool,
    pub frame: u64,
    /// The advertised window in bytes, and whether its scale is known.
    pub window: u32,
    pub window_scale_known: bool,
}

/// One flow's graph data: bounded series (see `series`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlowGraphs {
    /// Data segments (relative sequence numbers).
    pub seq: Vec<SeqPoint>,
    /// The peer's ACKs on this flow's sequence axis; for a flow that only
    /// acknowledges (no payload), its own ACKs relative to its first one.
    pub acks: Vec<AckView>,
    pub ack_only: bool,
    pub rtt: Vec<crate::flow::RttPoint>,
    pub bin_ns: u64,
    pub bins: Vec<u64>,
    pub gro: Vec<crate::series::GroPoint>,
    /// How much of each series the graphs show (data segments, ACKs, RTT).
    pub shown: [crate::series::Shown; 3],
}

/// Flows that get graphs (the largest by bytes, noise folded).
pub const GRAPHED_FLOWS: usize = 8;

/// Flows with at most this many packets are folded as noise.
pub const NOISE_PACKETS: u64 = 2;

/// The flows worth listing, largest by bytes first, noise folded: the
/// HTML's flow table, and its first [`GRAPHED_FLOWS`] get graphs.
/// `packets_bytes` gives a flow's packets and bytes (the same for a flow's
/// statistics and its report row).
pub fn flows_by_bytes<T>(flows: &[T], packets_bytes: impl Fn(&T) -> (u64, u64)) -> Vec<usize> {
    let mut order: Vec<(usize, u64)> = flows
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let (packets, bytes) = packets_bytes(f);
            (packets > NOISE_PACKETS).then_some((i, bytes))
        })
        .collect();
    order.sort_by_key(|x| std::cmp::Reverse(x.1));
    order.into_iter().map(|(i, _)| i).collect()
}

/// The report plus what the HTML needs but JSON does not carry.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub report: Report,
    /// Per flow (same order as `report.flows`): what the graphs draw,
    /// filled for the [`GRAPHED_FLOWS`] first of [`flows_by_bytes`] only
    /// (empty for the others: a hundred thousand flows' series would be a
    /// tenth of the memory of a run, for eight graphs).
    pub graphs: Vec<FlowGraphs>,
}

/// A flow's report row from its statistics; `t0` is its file's first
/// timestamp.
pub fn flow_report(
    id: usize,
    f: &FlowStats,
    file: &str,
    t0: u64,
    what_if: Vec<FlowWhatIfReport>,
    peer: Option<&FlowStats>,
) -> FlowReport {
    let k = &f.key;
    let tunnel = k.tunnel.map(|t| {
        let outer = f.outer.as_deref();
        let udp = t.kind.udp();
        TunnelReport {
            kind: t.kind.name(),
            src: dissect::fmt_addr(&t.src, t.v6),
            dst: dissect::fmt_addr(&t.dst, t.v6),
            sport: f.outer_ports.map(|p| p.0),
            dport: f.outer_ports.map(|p| p.1),
            sport_changes: f.outer_sport_changes,
            vni: t
                .id
                .filter(|_| matches!(t.kind, TunnelKind::Vxlan | TunnelKind::Geneve)),
            gre_key: t
                .id
                .filter(|_| t.kind.gre() || t.kind == TunnelKind::GreUdp),
            teid: t.id.filter(|_| t.kind == TunnelKind::Gtp),
            spi: t.id.filter(|_| t.kind == TunnelKind::Ah),
            cpi: t.id.filter(|_| t.kind == TunnelKind::IpComp),
            kernel_gro: t.kind.kernel_gro(),
            outer_ip: outer
                .map(HeaderReport::of)
                .unwrap_or_else(|| HeaderReport::of(&HeaderTrack::default())),
            outer_udp_checksum: if udp { f.outer_csum.summary() } else { "n/a" },
            outer_udp_checksum_counts: if udp {
                f.outer_csum
            } else {
                CsumCounts::default()
            },
            gre_checksum: if t.kind.gre() {
                f.outer_csum.summary()
            } else {
                "n/a"
            },
            gre_checksum_counts: if t.kind.gre() {
                f.outer_csum
            } else {
                CsumCounts::default()
            },
        }
    });
    let seg_avg = (f.id_inferred_packets > 0)
        .then(|| f.id_inferred_segments as f64 / f.id_inferred_packets as f64);
    let tcp = f.tcp.as_ref();
    FlowReport {
        id,
        file: file.to_string(),
        protocol: k.protocol_name(),
        src: dissect::fmt_addr(&k.src, k.v6),
        dst: dissect::fmt_addr(&k.dst, k.v6),
        sport: k.sport,
        dport: k.dport,
        description: k.describe(f.outer_ports),
        tunnel,
        packets: f.packets,
        bytes: f.bytes,
        payload_bytes: f.payload_bytes,
        first_frame: f.first_frame,
        start_s: f.first_ns.saturating_sub(t0) as f64 / 1e9,
        duration_s: f.duration_ns() as f64 / 1e9,
        throughput_bps: f.throughput_bps(),
        observed_mss: f.observed_mss(),
        syn_mss: tcp.and_then(|t| t.syn_mss),
        retransmissions: tcp.map_or(0, |t| t.retransmissions),
        out_of_order: tcp.map_or(0, |t| t.out_of_order),
        window_changes: tcp.map_or(0, |t| t.window_changes),
        option_changes: tcp.map_or(0, |t| t.option_changes),
        above_mtu: AboveMtu {
            packets: f.above_mtu,
            first_frame: f.first_above_mtu,
            largest_ip_len: f.largest_ip,
            length_field_zero: f.above_mtu_len_zero,
            interpretation: f.big_packet_side(),
            segments_from_ip_id: seg_avg,
            mss_from_ip_id: f.id_inferred_mss,
        },
        ip: HeaderReport::of(&f.inner),
        l4_checksum: f.l4_csum.summary(),
        l4_checksum_counts: f.l4_csum,
        ip_header_checksum_bad: f.ip_csum_bad,
        snap: f.snap,
        what_if,
        tcp: f
            .analysis
            .as_deref()
            .map(|d| crate::tcp::report::tcp_report(d, peer.and_then(|p| p.analysis.as_deref()))),
    }
}

impl Report {
    /// Rewrites every capture name in the report, wherever it appears:
    /// path fields and the texts that quote them (errors, notes, hop
    /// changes, findings). The CLI uses it to name stdin, a FIFO or a
    /// bundled sample instead of the temporary copy that was read.
    pub fn rename_captures(&mut self, rename: &dyn Fn(&str) -> String) {
        let fix = |s: &mut String| *s = rename(s);
        for i in &mut self.inputs {
            fix(&mut i.path);
            i.error.iter_mut().for_each(fix);
        }
        self.flows.iter_mut().for_each(|f| fix(&mut f.file));
        for f in &mut self.findings {
            fix(&mut f.title);
            fix(&mut f.detail);
            f.fix.iter_mut().for_each(fix);
            f.evidence.iter_mut().for_each(|e| fix(&mut e.file));
            f.flow
                .iter_mut()
                .filter_map(|fl| fl.capture.as_mut())
                .for_each(fix);
        }
        for h in &mut self.hops {
            h.points.iter_mut().for_each(|p| fix(&mut p.capture));
            h.changes.iter_mut().for_each(fix);
            h.first_unmergeable.iter_mut().for_each(fix);
        }
        for w in &mut self.what_if {
            w.notes.iter_mut().for_each(fix);
            for x in &mut w.flush_reasons {
                x.examples.iter_mut().for_each(|e| fix(&mut e.file));
            }
        }
    }
}

/// One flow at one capture point.
#[derive(Debug, Clone, Serialize)]
pub struct HopPoint {
    /// The capture (as given on the command line).
    pub capture: String,
    /// The flow's id in `flows[]`.
    pub flow_id: usize,
    pub packets: u64,
    pub ip_id_pattern: &'static str,
    pub df: &'static str,
    pub ttl: u8,
    pub tos: u8,
    pub outer_ip_id_pattern: Option<&'static str>,
    pub outer_df: Option<&'static str>,
    pub outer_ttl: Option<u8>,
    pub outer_tos: Option<u8>,
    pub l4_checksum: &'static str,
    pub outer_udp_checksum: Option<&'static str>,
    pub observed_mss: Option<u32>,
    pub largest_ip_len: u32,
    /// GRO at the first `--gro-max-size`.
    pub stack_packets: u64,
    pub healthy_tunnel_packets: Option<u64>,
    /// No high finding stops GRO for this flow here.
    pub mergeable: bool,
    /// The kinds of the high findings that stop it.
    pub blocked_by: Vec<&'static str>,
}

/// One flow across capture points.
#[derive(Debug, Clone, Serialize)]
pub struct HopReport {
    /// The inner (or only) connection, e.g. `TCP 10.0.0.1:4000 -> 10.0.0.2:5201`.
    pub flow: String,
    /// In the order the captures were given.
    pub points: Vec<HopPoint>,
    /// What changed between consecutive points:
    /// `"a.pcap -> b.pcap: outer DF set -> clear"`.
    pub changes: Vec<String>,
    /// The first capture where the flow is not mergeable, when an earlier
    /// one was.
    pub first_unmergeable: Option<String>,
}
