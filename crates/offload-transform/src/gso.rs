//! `offload gso`: the super-packets of a capture segmented as GSO/TSO would.

pub use crate::mss::MssSource;
use crate::mss::{tcp_mss_option, FlowEvidence};
use crate::{Control, Outcome, ReadOptions, PROGRESS_EVERY};
use offload::gro::KernelLine;
use offload::gso::{layout, segment_layout, GsoParams, Layout};
use offload::wire::vxlan;
use offload::wire::Transport;
use offload::LinkKind;
use offload_capture::{CaptureError, CaptureReader, CaptureWriter, FrameMeta, SpooledInput};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Options of `offload gso`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsoOptions {
    /// Segment size for every super-packet; `None` = from the GSO metadata,
    /// else per flow, inferred ([`crate::mss`]).
    pub mss: Option<u32>,
    /// The link MTU: packets whose IP length exceeds it are super-packets.
    pub mtu: u32,
    /// UDP ports whose datagrams are VXLAN (segmented as tunnels).
    pub vxlan_ports: Vec<u16>,
    /// How the input is read.
    pub read: ReadOptions,
    /// The kernel line whose GSO rules apply ([`GsoParams::on_line`]).
    pub kernel: KernelLine,
    /// Flow directions whose MSS evidence is kept at once (bounds memory:
    /// about 300 bytes each with the table's slack, at most about 900 for
    /// a direction with [`crate::mss::MAX_SIZES`] distinct super-packet
    /// lengths); see [`GsoSummary::flow_table`].
    pub max_flows: usize,
}

/// The default of [`GsoOptions::max_flows`] (2^18): the first pass then
/// stays under about 250 MB whatever the capture holds.
pub const DEFAULT_MAX_FLOWS: usize = 262_144;

impl Default for GsoOptions {
    fn default() -> Self {
        GsoOptions {
            mss: None,
            mtu: 1500,
            vxlan_ports: vxlan::DEFAULT_PORTS.to_vec(),
            read: ReadOptions::default(),
            kernel: KernelLine::default(),
            max_flows: DEFAULT_MAX_FLOWS,
        }
    }
}

/// How one flow's super-packets were cut.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowMss {
    /// `src:port > dst:port` (IPv6 addresses in brackets).
    pub flow: String,
    /// The segment size used.
    pub mss: u32,
    /// Where it came from.
    pub source: MssSource,
    /// Super-packets of the flow that were split.
    pub super_packets: u64,
}

/// Flows listed one by one in [`GsoSummary::flows`] (those with the most
/// super-packets); the per-source totals cover every flow.
pub const LISTED_FLOWS: usize = 64;

/// Frames written unchanged for one reason.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CopiedReason {
    /// Why (`not TCP or UDP`, `headers cut by the snapshot length`, ...).
    pub reason: String,
    pub frames: u64,
}

/// The bounded per-flow table: its cap and what happened past it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowTableSummary {
    /// The cap ([`GsoOptions::max_flows`], `--max-flows`): flow directions
    /// whose MSS evidence is held at once.
    pub max_flows: usize,
    /// The most directions held at once.
    pub peak_flows: usize,
    /// Directions forgotten to make room: none of their packets (nor their
    /// reverse's) was a super-packet until then. A forgotten direction
    /// that sends super-packets later is learned again from those.
    pub forgotten_flows: u64,
    /// Frames of directions not admitted because more than half the table
    /// held flows with super-packets: their super-packets are cut at the
    /// MTU-derived size (MSS source `mtu`) unless `--mss` or GSO metadata
    /// gives it.
    pub untracked_frames: u64,
    /// Super-packets of flows past the cap in the second pass: split and
    /// counted in the totals, not in `flow_sources` and `flows`.
    pub unlisted_super_packets: u64,
}

/// What `offload gso` reports. Every input frame is counted once:
/// `frames_in = super_packets + single_segments + copied_unchanged`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GsoSummary {
    pub input: String,
    pub output: String,
    /// The kernel line whose GSO rules were applied (`6.1`, `6.12`, `6.18`, `7.x`).
    pub kernel: String,
    pub frames_in: u64,
    pub frames_out: u64,
    /// Input packets larger than one segment that were split.
    pub super_packets: u64,
    /// The segments they were split into.
    pub segments_out: u64,
    /// Of the super-packets, those cut by the snapshot length (header-only
    /// captures): their segments carry the headers, the payload bytes that
    /// were captured, and their wire length as original length.
    pub header_only_super_packets: u64,
    /// Frames already one segment, written unchanged.
    pub single_segments: u64,
    /// Frames that could not be segmented, written unchanged (sum of
    /// `copied_reasons`).
    pub copied_unchanged: u64,
    /// Why, most frames first.
    pub copied_reasons: Vec<CopiedReason>,
    /// How the MSS was chosen, per super-packet.
    pub mss_sources: Vec<(MssSource, u64)>,
    /// How the MSS was chosen, per flow with super-packets.
    pub flow_sources: Vec<(MssSource, u64)>,
    /// The flows with the most super-packets (at most [`LISTED_FLOWS`]).
    pub flows: Vec<FlowMss>,
    /// The per-flow table's cap and what happened past it.
    pub flow_table: FlowTableSummary,
    /// Frames whose captured length exceeded the snapshot length (read
    /// whole unless strict), and the first of them.
    pub frames_above_snaplen: u64,
    pub first_above_snaplen: u64,
    /// Timestamps read or written as the nearest time that could be.
    pub timestamps_clamped: crate::TimestampsClamped,
    pub interrupted: bool,
}

/// One direction of a flow: the innermost addresses and ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    v6: bool,
    proto: u8,
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
}

impl FlowKey {
    fn reverse(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            ..*self
        }
    }
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addr = |a: &[u8; 16]| -> String {
            if self.v6 {
                format!("[{}]", std::net::Ipv6Addr::from(*a))
            } else {
                std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
            }
        };
        write!(
            f,
            "{}:{} > {}:{}",
            addr(&self.src),
            self.sport,
            addr(&self.dst),
            self.dport
        )
    }
}

/// A frame's flow and layout, when the engine can segment it.
fn flow_of(
    link: LinkKind,
    f: &[u8],
    vxlan_ports: &[u16],
) -> Result<(FlowKey, Layout), offload::gso::GsoError> {
    let lay = layout(link, f, vxlan_ports)?;
    let mut key = FlowKey {
        v6: lay.is_v6(),
        proto: lay.l4_proto.protocol(),
        src: [0; 16],
        dst: [0; 16],
        sport: u16::from_be_bytes([f[lay.l4_off], f[lay.l4_off + 1]]),
        dport: u16::from_be_bytes([f[lay.l4_off + 2], f[lay.l4_off + 3]]),
    };
    if lay.is_v6() {
        key.src.copy_from_slice(&f[lay.l3_off + 8..lay.l3_off + 24]);
        key.dst
            .copy_from_slice(&f[lay.l3_off + 24..lay.l3_off + 40]);
    } else {
        key.src[..4].copy_from_slice(&f[lay.l3_off + 12..lay.l3_off + 16]);
        key.dst[..4].copy_from_slice(&f[lay.l3_off + 16..lay.l3_off + 20]);
    }
    Ok((key, lay))
}

/// The decision for one flow, made after the first pass.
#[derive(Debug, Clone, Copy)]
struct Decision {
    mss: Option<(u32, MssSource)>,
    fixed_id: bool,
}

/// The largest original length a header-only frame may claim to be
/// rebuilt for segmentation: the largest frame the capture crate handles.
const MAX_WIRE_LEN: usize = offload_capture::MAX_FRAME_LEN as usize;

/// A frame as long as it was on the wire: the captured bytes, and for a
/// frame cut by the snapshot length zeros in place of the payload bytes not
/// captured, so that the headers' lengths hold and the engine can cut it.
/// One reused buffer: memory stays bounded by the largest frame.
#[derive(Default)]
struct WireView {
    buf: Vec<u8>,
}

/// Why a frame was written unchanged, when it was not a super-packet.
type CopyReason = &'static str;

impl WireView {
    /// The frame's bytes at wire length and its layout, or why it cannot
    /// be segmented.
    fn parse<'a>(
        &'a mut self,
        frame: &'a offload_capture::Frame<'_>,
        vxlan_ports: &[u16],
    ) -> Result<(&'a [u8], FlowKey, Layout), CopyReason> {
        let link = LinkKind::from_linktype(frame.link_type.0).ok_or("link type not supported")?;
        let data: &[u8] = if frame.is_truncated() {
            let orig = frame.orig_len as usize;
            if orig > MAX_WIRE_LEN {
                return Err("cut by the snapshot length, original length above 16 MiB");
            }
            self.buf.clear();
            self.buf.extend_from_slice(frame.data);
            self.buf.resize(orig, 0);
            &self.buf
        } else {
            frame.data
        };
        let (key, lay) = flow_of(link, data, vxlan_ports).map_err(|e| match e {
            _ if frame.is_truncated() => "headers cut by the snapshot length",
            offload::gso::GsoError::Unsupported(what) => what,
            offload::gso::GsoError::Wire(_) => "headers malformed or cut short",
            offload::gso::GsoError::ZeroMss => "MSS 0",
        })?;
        // Zeros stand in for payload only: every header must be captured.
        if frame.is_truncated() && lay.payload_off() > frame.data.len() {
            return Err("headers cut by the snapshot length");
        }
        Ok((data, key, lay))
    }
}

/// The per-flow table of the first pass, bounded by `max_flows` entries
/// (flow directions). When it is full, the directions that hold no
/// super-packet (and whose reverse holds none, which may need their SYN's
/// MSS) are forgotten; if more than half the table still holds flows with
/// super-packets, new flows are no longer admitted and their frames
/// counted. A forgotten direction that sends a super-packet later starts
/// again from what comes after; an unadmitted one gets the MTU-derived
/// segment size in the second pass.
struct FlowTable {
    flows: HashMap<FlowKey, FlowEvidence>,
    max_flows: usize,
    saturated: bool,
    forgotten: u64,
    untracked_frames: u64,
    peak: usize,
}

impl FlowTable {
    fn new(max_flows: usize) -> FlowTable {
        FlowTable {
            flows: HashMap::new(),
            max_flows: max_flows.max(2),
            saturated: false,
            forgotten: 0,
            untracked_frames: 0,
            peak: 0,
        }
    }

    /// The evidence of `key`, admitting it when there is room.
    fn entry(&mut self, key: FlowKey) -> Option<&mut FlowEvidence> {
        if !self.flows.contains_key(&key) {
            if self.flows.len() >= self.max_flows && !self.saturated {
                self.sweep();
            }
            if self.saturated || self.flows.len() >= self.max_flows {
                self.untracked_frames += 1;
                return None;
            }
            self.peak = self.peak.max(self.flows.len() + 1);
        }
        Some(self.flows.entry(key).or_default())
    }

    /// Forgets the directions no super-packet depends on.
    fn sweep(&mut self) {
        let idle: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(k, st)| {
                st.super_packets == 0
                    && self
                        .flows
                        .get(&k.reverse())
                        .is_none_or(|r| r.super_packets == 0)
            })
            .map(|(k, _)| *k)
            .collect();
        self.forgotten += idle.len() as u64;
        for k in &idle {
            self.flows.remove(k);
        }
        if self.flows.len() > self.max_flows / 2 {
            self.saturated = true;
        }
    }
}

/// What the first pass learned.
struct Learned {
    /// Directions with super-packets, and how to cut them.
    decisions: HashMap<FlowKey, Decision>,
    peak: usize,
    forgotten: u64,
    untracked_frames: u64,
}

/// First pass of `gso`: learns each flow's MSS and IPv4 ID pattern.
fn learn_mss(input: &SpooledInput, opts: &GsoOptions) -> Result<Learned, CaptureError> {
    let mut reader = CaptureReader::open_as(input.path(), input.name().to_string())?;
    reader.set_snaplen_check(opts.read.strict);
    let mut table = FlowTable::new(opts.max_flows);
    let mut view = WireView::default();
    while let Ok(Some(frame)) = reader.next_frame() {
        let Ok((f, key, lay)) = view.parse(&frame, &opts.vxlan_ports) else {
            continue;
        };
        let Some(st) = table.entry(key) else {
            continue;
        };
        let tcp = lay.l4_proto == Transport::Tcp;
        let option_len = if tcp {
            lay.l4_header_len as u32 - 20
        } else {
            0
        };
        if tcp && f[lay.l4_off + 13] & 0x02 != 0 {
            let opts_end = (lay.l4_off + lay.l4_header_len).min(f.len());
            if let Some(m) = tcp_mss_option(&f[lay.l4_off + 20..opts_end]) {
                st.note_syn(m);
            }
        }
        let first_l3 = lay.outer.map(|o| o.l3_off).unwrap_or(lay.l3_off);
        let ip_len = (lay.end.max(first_l3) - first_l3) as u32;
        let id = (!lay.is_v6()).then(|| u16::from_be_bytes([f[lay.l3_off + 4], f[lay.l3_off + 5]]));
        st.note_data(lay.payload_len() as u32, ip_len > opts.mtu, option_len, id);
        let hdrs = (lay.payload_off() - first_l3) as u32 - if lay.jumbo_hbh { 8 } else { 0 };
        st.note_mtu_payload(opts.mtu.saturating_sub(hdrs).max(1));
        // PSH, FIN, SYN, RST, URG: a segment that may be short.
        if tcp {
            let flags = f[lay.l4_off + 13];
            if flags & 0x2f == 0 {
                st.note_unpushed(lay.payload_len() as u32);
            } else if flags & 0x27 == 0 {
                st.note_pushed(lay.payload_len() as u32);
            }
        }
    }
    let flows = &table.flows;
    let decisions = flows
        .iter()
        .filter(|(_, st)| st.super_packets > 0)
        .map(|(k, st)| {
            let peer = flows.get(&k.reverse()).and_then(|r| r.syn_mss);
            let d = Decision {
                mss: st.infer(peer),
                fixed_id: st.fixed_id(),
            };
            (*k, d)
        })
        .collect();
    Ok(Learned {
        decisions,
        peak: table.peak,
        forgotten: table.forgotten,
        untracked_frames: table.untracked_frames,
    })
}

/// Segments every super-packet of `input` and writes the result.
pub fn gso_capture(
    input: &Path,
    output: &Path,
    opts: &GsoOptions,
    ctl: &mut Control<'_>,
) -> Result<Outcome<GsoSummary>, CaptureError> {
    // The first pass learns each flow's MSS and IPv4 ID pattern (a file
    // is read twice; the flow table is bounded by opts.max_flows).
    // A pipe or FIFO is copied to a temporary file first (read once).
    let spooled = SpooledInput::new_cancellable(input, ctl.cancel)?;
    let learned = learn_mss(&spooled, opts)?;
    let mut reader = CaptureReader::open_as(spooled.path(), spooled.name().to_string())?;
    reader.set_snaplen_check(opts.read.strict);
    let mut writer = CaptureWriter::create(output, None)?;
    let mut view = WireView::default();
    let mut frames_in = 0u64;
    let mut super_packets = 0u64;
    let mut segments_out = 0u64;
    let mut single = 0u64;
    let mut header_only = 0u64;
    let mut copied: HashMap<CopyReason, u64> = HashMap::new();
    let mut sources: HashMap<MssSource, u64> = HashMap::new();
    let mut per_flow: HashMap<FlowKey, (u32, MssSource, u64)> = HashMap::new();
    let mut flows_not_listed = 0u64;
    let mut input_error = None;
    let mut interrupted = false;
    loop {
        if ctl.cancel.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        if frames_in.is_multiple_of(PROGRESS_EVERY) {
            (ctl.on_progress)(reader.bytes_read());
        }
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                input_error = Some(e);
                break;
            }
        };
        frames_in += 1;
        let meta = FrameMeta::from(&frame);
        let (data, key, lay) = match view.parse(&frame, &opts.vxlan_ports) {
            Ok(p) => p,
            Err(reason) => {
                *copied.entry(reason).or_default() += 1;
                writer.write_frame(&meta, frame.data)?;
                continue;
            }
        };
        let first_l3 = lay.outer.map(|o| o.l3_off).unwrap_or(lay.l3_off);
        let hdrs = (lay.payload_off() - first_l3) as u32 - if lay.jumbo_hbh { 8 } else { 0 };
        let from_meta = frame.gso();
        let flow = learned.decisions.get(&key);
        let (mss, source) = match (opts.mss, from_meta) {
            (Some(m), _) => (m, MssSource::Given),
            (None, Some(g)) => (g.gso_size, MssSource::Metadata),
            (None, None) => flow
                .and_then(|d| d.mss)
                .unwrap_or((opts.mtu.saturating_sub(hdrs).max(1), MssSource::Mtu)),
        };
        let params = match from_meta {
            Some(g) => GsoParams {
                mss,
                ..GsoParams::from_gso(g.gso_size, g.gso_type)
            },
            None => GsoParams {
                // A flow whose packets all carry one IPv4 ID was merged as
                // fixed-ID (SKB_GSO_TCP_FIXEDID): keep the ID on every segment.
                fixed_id: flow.is_some_and(|d| d.fixed_id),
                ..GsoParams::new(mss)
            },
        }
        .on_line(opts.kernel, lay.outer.is_some());
        if lay.payload_len() as u32 <= mss && !lay.jumbo_hbh {
            single += 1;
            writer.write_frame(&meta, frame.data)?;
            continue;
        }
        // Payload bytes of the super-packet that were captured: a
        // header-only frame's segments keep only those (the first
        // segment's), with their wire length as original length.
        let captured_payload = frame.data.len().saturating_sub(lay.payload_off());
        let total_payload = lay.payload_len();
        let mut werr = None;
        let mut index = 0usize;
        let res = segment_layout(data, &lay, &params, &mut |seg: &[u8]| {
            let start = index * mss as usize;
            let seg_payload = (total_payload - start.min(total_payload)).min(mss as usize);
            let real = captured_payload.saturating_sub(start).min(seg_payload);
            let keep = seg.len() - seg_payload + real;
            index += 1;
            if werr.is_none() {
                let m = FrameMeta::new(meta.timestamp_ns, meta.link_type, seg.len());
                werr = writer.write_frame(&m, &seg[..keep]).err();
            }
        });
        if let Some(e) = werr {
            return Err(e);
        }
        match res {
            Ok(n) => {
                super_packets += 1;
                segments_out += n as u64;
                if frame.is_truncated() {
                    header_only += 1;
                }
                *sources.entry(source).or_default() += 1;
                let room = per_flow.len() < opts.max_flows;
                match per_flow.get_mut(&key) {
                    Some(e) => e.2 += 1,
                    None if room => {
                        per_flow.insert(key, (mss, source, 1));
                    }
                    None => flows_not_listed += 1,
                }
            }
            Err(e) => {
                let reason = match e {
                    offload::gso::GsoError::Unsupported(what) => what,
                    offload::gso::GsoError::Wire(_) => "headers malformed or cut short",
                    offload::gso::GsoError::ZeroMss => "MSS 0",
                };
                *copied.entry(reason).or_default() += 1;
                writer.write_frame(&meta, frame.data)?;
            }
        }
    }
    (ctl.on_progress)(reader.bytes_read());
    let stats = writer.finish()?;
    let mut mss_sources: Vec<(MssSource, u64)> = sources.into_iter().collect();
    mss_sources.sort_by_key(|s| (std::cmp::Reverse(s.1), s.0));
    let mut by_source: HashMap<MssSource, u64> = HashMap::new();
    for (_, source, _) in per_flow.values() {
        *by_source.entry(*source).or_default() += 1;
    }
    let mut flow_sources: Vec<(MssSource, u64)> = by_source.into_iter().collect();
    flow_sources.sort_by_key(|s| (std::cmp::Reverse(s.1), s.0));
    let mut flows: Vec<FlowMss> = per_flow
        .into_iter()
        .map(|(k, (mss, source, n))| FlowMss {
            flow: k.to_string(),
            mss,
            source,
            super_packets: n,
        })
        .collect();
    flows.sort_by(|a, b| {
        b.super_packets
            .cmp(&a.super_packets)
            .then(a.flow.cmp(&b.flow))
    });
    flows.truncate(LISTED_FLOWS);
    let mut copied_reasons: Vec<CopiedReason> = copied
        .into_iter()
        .map(|(reason, frames)| CopiedReason {
            reason: reason.to_string(),
            frames,
        })
        .collect();
    copied_reasons.sort_by(|a, b| b.frames.cmp(&a.frames).then(a.reason.cmp(&b.reason)));
    Ok(Outcome {
        summary: GsoSummary {
            input: spooled.name().to_string(),
            output: offload_capture::stdio::output_name(output),
            kernel: opts.kernel.name().to_string(),
            frames_in,
            frames_out: stats.frames,
            super_packets,
            segments_out,
            header_only_super_packets: header_only,
            single_segments: single,
            copied_unchanged: copied_reasons.iter().map(|r| r.frames).sum(),
            copied_reasons,
            mss_sources,
            flow_sources,
            flows,
            flow_table: FlowTableSummary {
                max_flows: opts.max_flows,
                peak_flows: learned.peak,
                forgotten_flows: learned.forgotten,
                untracked_frames: learned.untracked_frames,
                unlisted_super_packets: flows_not_listed,
            },
            frames_above_snaplen: reader.above_snaplen().0,
            first_above_snaplen: reader.above_snaplen().1,
            timestamps_clamped: crate::TimestampsClamped::new(&reader, &stats),
            interrupted,
        },
        input_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey {
            v6: false,
            proto: 6,
            src: [10; 16],
            dst: [11; 16],
            sport: n,
            dport: 80,
        }
    }

    #[test]
    fn flow_table_forgets_idle_flows_then_stops_admitting() {
        let mut t = FlowTable::new(4);
        // Four idle directions fill it; a fifth makes it forget them.
        for n in 0..4 {
            t.entry(key(n)).unwrap().note_data(100, false, 0, None);
        }
        t.entry(key(1).reverse())
            .unwrap()
            .note_data(60_000, true, 0, None);
        assert_eq!((t.forgotten, t.flows.len()), (4, 1));
        // An idle direction whose reverse has super-packets (its SYN's MSS
        // may be needed) is kept by the next sweep.
        t.entry(key(1)).unwrap().note_data(100, false, 0, None);
        for n in 10..12 {
            t.entry(key(n)).unwrap().note_data(60_000, true, 0, None);
        }
        assert_eq!(t.flows.len(), 4);
        // Full of flows that matter: the next is not admitted, and counted.
        assert!(t.entry(key(20)).is_none());
        assert!(t.saturated);
        assert_eq!(t.forgotten, 4);
        assert!(t.entry(key(21)).is_none());
        assert_eq!(t.untracked_frames, 2);
        // Known flows are still updated.
        assert!(t.entry(key(1)).is_some());
        assert_eq!(t.peak, 4);
    }
}
