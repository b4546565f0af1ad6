//! Capture-to-capture transforms: `offload gro` and `offload gso`.
//!
//! Both stream the input (constant memory), write every packet they can,
//! and stop cleanly on a bad frame or on cancellation: everything before
//! the bad frame is processed and written, the held packets are flushed,
//! and the error is returned beside the summary so that the caller can
//! report it and exit non-zero.

use offload::gro::{FlushReason, Proto};
use offload::gso::{layout, segment_layout, GsoParams, Layout};
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
use offload_capture::{CaptureError, CaptureReader, CaptureWriter, FrameMeta, LinkType};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Progress reporting and cancellation for long transforms.
pub struct Control<'a> {
    /// Called every few thousand frames with the input bytes consumed.
    pub on_progress: &'a mut dyn FnMut(u64),
    /// Set (e.g. by a Ctrl-C handler) to stop reading; what was read is
    /// still completed and written.
    pub cancel: &'a AtomicBool,
}

impl std::fmt::Debug for Control<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").finish_non_exhaustive()
    }
}

/// A transform's summary plus the input error that stopped it, if any.
#[derive(Debug)]
pub struct Outcome<S> {
    pub summary: S,
    /// The input turned out bad at some frame; everything before it was
    /// processed and written.
    pub input_error: Option<CaptureError>,
}

/// Per-protocol counts of a GRO run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProtoSummary {
    pub protocol: &'static str,
    pub frames_in: u64,
    pub packets_out: u64,
    /// frames in / packets out (1.0 = nothing merged).
    pub merge_ratio: f64,
}

/// One flush reason and how often it occurred.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReasonCount {
    pub reason: &'static str,
    pub count: u64,
    /// The packet never entered the GRO table (as opposed to a held packet being completed).
    pub pass_through: bool,
}

/// The configuration a GRO run used, echoed in reports.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GroSettings {
    pub gro_max_size: u32,
    pub gro_ipv4_max_size: u32,
    pub flush_timeout_ns: u64,
    pub checksum_check: bool,
    /// `all`, `off`, or the ports with a UDP_GRO socket.
    pub udp_gro: String,
    pub vxlan_ports: Vec<u16>,
    pub vlan_gro: bool,
}

/// What `offload gro` reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroSummary {
    pub input: String,
    pub output: String,
    pub settings: GroSettings,
    pub frames_in: u64,
    pub packets_out: u64,
    pub merge_ratio: f64,
    /// Super-packets (more than one segment) written.
    pub super_packets: u64,
    /// The largest packet written, in bytes.
    pub largest_packet: u64,
    pub protocols: Vec<ProtoSummary>,
    /// Non-zero reasons, most frequent first.
    pub flush_reasons: Vec<ReasonCount>,
    /// Frames of link types the engine does not dissect, copied unchanged.
    pub unsupported_link_frames: u64,
    /// The run was stopped by the user before the end of the input.
    pub interrupted: bool,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

const PROGRESS_EVERY: u64 = 4096;

/// The packet comment that carries a super-packet's GSO metadata.
pub fn gso_comment(gso_size: u32, segments: u32, gso_type: u32) -> String {
    format!("offload: gso_size={gso_size} gso_segs={segments} gso_type={gso_type:#x}")
}

/// Reads [`gso_comment`] back: `(gso_size, gso_type)`.
pub fn parse_gso_comment(comment: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(comment)
        .ok()?
        .strip_prefix("offload: ")?;
    let mut size = None;
    let mut ty = None;
    for part in text.split_whitespace() {
        if let Some(v) = part.strip_prefix("gso_size=") {
            size = v.parse().ok();
        } else if let Some(v) = part.strip_prefix("gso_type=0x") {
            ty = u32::from_str_radix(v, 16).ok();
        }
    }
    Some((size?, ty?))
}

/// Where GRO deliveries go: the output capture, plus counters.
struct GroSink {
    writer: CaptureWriter,
    error: Option<CaptureError>,
    super_packets: u64,
    largest: u64,
}

impl GroSink {
    fn write(&mut self, meta: &FrameMeta, data: &[u8]) {
        if self.error.is_none() {
            self.error = self.writer.write_frame(meta, data).err();
        }
    }

    fn deliver(&mut self, d: &Delivered<'_>) {
        if d.segments > 1 {
            self.super_packets += 1;
        }
        self.largest = self.largest.max(d.data.len() as u64);
        let meta = FrameMeta::new(
            d.timestamp_ns as i64,
            LinkType(d.link.linktype()),
            d.data.len(),
        );
        if self.error.is_some() {
            return;
        }
        // pcapng keeps the GSO metadata (Wireshark shows it as a packet
        // comment) so that `offload gso` can undo the merge exactly.
        let comment = (d.segments > 1).then(|| gso_comment(d.gso_size, d.segments, d.gso_type));
        self.error = self
            .writer
            .write_frame_with_comment(&meta, d.data, comment.as_deref())
            .err();
    }
}

/// Runs `input` through GRO and writes the result to `output` (format from
/// its extension).
pub fn gro_capture(
    input: &Path,
    output: &Path,
    cfg: &GroConfig,
    ctl: &mut Control<'_>,
) -> Result<Outcome<GroSummary>, CaptureError> {
    let mut reader = CaptureReader::open(input)?;
    let mut out = GroSink {
        writer: CaptureWriter::create(output, None)?,
        error: None,
        super_packets: 0,
        largest: 0,
    };
    let mut engine = GroEngine::new(cfg.clone());
    let mut unsupported = 0u64;
    let mut input_error = None;
    let mut interrupted = false;
    let mut count = 0u64;
    loop {
        if ctl.cancel.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        count += 1;
        if count % PROGRESS_EVERY == 0 {
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
        let Some(link) = LinkKind::from_linktype(frame.link_type.0) else {
            unsupported += 1;
            // Frames the engine cannot read go through unchanged.
            out.write(&FrameMeta::from(&frame), frame.data);
            continue;
        };
        engine.receive(
            Input {
                data: frame.data,
                link,
                timestamp_ns: frame.timestamp_ns.max(0) as u64,
                frame: frame.number,
                orig_len: frame.orig_len,
            },
            &mut |d: &Delivered<'_>| out.deliver(d),
        );
        if out.error.is_some() {
            break;
        }
    }
    engine.finish(&mut |d: &Delivered<'_>| out.deliver(d));
    (ctl.on_progress)(reader.bytes_read());
    if let Some(e) = out.error {
        return Err(e);
    }
    out.writer.finish()?;
    let (super_packets, largest) = (out.super_packets, out.largest);

    let st = engine.stats();
    let protocols = Proto::ALL
        .iter()
        .enumerate()
        .filter(|(i, _)| st.proto_in[*i] > 0)
        .map(|(i, p)| ProtoSummary {
            protocol: p.name(),
            frames_in: st.proto_in[i],
            packets_out: st.proto_out[i],
            merge_ratio: ratio(st.proto_in[i], st.proto_out[i]),
        })
        .collect();
    let mut flush_reasons: Vec<ReasonCount> = FlushReason::ALL
        .iter()
        .filter(|r| st.reason_count(**r) > 0)
        .map(|r| ReasonCount {
            reason: r.name(),
            count: st.reason_count(*r),
            pass_through: r.is_pass_through(),
        })
        .collect();
    flush_reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(b.reason)));
    let frames_in = st.frames_in + unsupported;
    let packets_out = st.packets_out + unsupported;
    Ok(Outcome {
        summary: GroSummary {
            input: input.display().to_string(),
            output: output.display().to_string(),
            settings: GroSettings {
                gro_max_size: cfg.gro_max_size,
                gro_ipv4_max_size: cfg.gro_ipv4_max_size,
                flush_timeout_ns: cfg.flush_timeout_ns,
                checksum_check: cfg.verify_checksums,
                udp_gro: match &cfg.udp {
                    offload::gro::UdpGro::Off => "off".into(),
                    offload::gro::UdpGro::AllPorts => "all".into(),
                    offload::gro::UdpGro::Ports(p) => p
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                },
                vxlan_ports: cfg.vxlan_ports.clone(),
                vlan_gro: cfg.vlan_gro,
            },
            frames_in,
            packets_out,
            merge_ratio: ratio(frames_in, packets_out),
            super_packets,
            largest_packet: largest,
            protocols,
            flush_reasons,
            unsupported_link_frames: unsupported,
            interrupted,
        },
        input_error,
    })
}

/// Options of `offload gso`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsoOptions {
    /// Segment size for every super-packet; `None` = per flow, as observed.
    pub mss: Option<u32>,
    /// The link MTU: packets whose IP length exceeds it are super-packets.
    pub mtu: u32,
    /// UDP ports whose datagrams are VXLAN (segmented as tunnels).
    pub vxlan_ports: Vec<u16>,
}

impl Default for GsoOptions {
    fn default() -> Self {
        GsoOptions {
            mss: None,
            mtu: 1500,
            vxlan_ports: vec![offload::gro::DEFAULT_VXLAN_PORT],
        }
    }
}

/// Where the MSS of a super-packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MssSource {
    /// `--mss`.
    Given,
    /// The GSO metadata `offload gro` stored with the packet (pcapng comment).
    Metadata,
    /// IPv4 ID steps between consecutive super-packets of the flow gave the
    /// segment count, and the payload divided evenly.
    IpIdSteps,
    /// The largest single-segment payload of the flow.
    ObservedSegment,
    /// Neither: MTU minus the headers.
    Mtu,
}

/// What `offload gso` reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GsoSummary {
    pub input: String,
    pub output: String,
    pub frames_in: u64,
    pub frames_out: u64,
    /// Input packets larger than one segment that were split.
    pub super_packets: u64,
    /// Frames that could not be segmented (not TCP, unreadable) and were copied.
    pub copied_unchanged: u64,
    /// How the MSS was chosen, per super-packet.
    pub mss_sources: Vec<(MssSource, u64)>,
    pub interrupted: bool,
}

/// A flow key for MSS inference: the innermost addresses and ports.
fn flow_of(link: LinkKind, f: &[u8], vxlan_ports: &[u16]) -> Option<(Vec<u8>, Layout)> {
    let lay = layout(link, f, vxlan_ports).ok()?;
    let mut k = Vec::with_capacity(48);
    k.push(lay.l4_proto.protocol());
    if lay.is_v6() {
        k.extend_from_slice(&f[lay.l3_off + 8..lay.l3_off + 40]);
    } else {
        k.extend_from_slice(&f[lay.l3_off + 12..lay.l3_off + 20]);
    }
    k.extend_from_slice(&f[lay.l4_off..lay.l4_off + 4]);
    Some((k, lay))
}

#[derive(Debug, Default)]
struct FlowMss {
    largest_single: u32,
    /// Counts of exact `payload / segments` values from IP ID steps.
    id_candidates: HashMap<u32, u32>,
    /// The previous super-packet's (IP ID, payload), waiting for the next ID.
    pending: Option<(u16, u32)>,
    /// The previous packet's IPv4 ID, and how often consecutive packets of
    /// the flow had equal (fixed) or different IDs.
    last_id: Option<u16>,
    same_id: u32,
    other_id: u32,
}

impl FlowMss {
    fn best(&self) -> Option<(u32, MssSource)> {
        if let Some((mss, _)) = self.id_candidates.iter().max_by_key(|(m, n)| (**n, **m)) {
            return Some((*mss, MssSource::IpIdSteps));
        }
        (self.largest_single > 0).then_some((self.largest_single, MssSource::ObservedSegment))
    }
}

/// First pass of `gso` without `--mss`: learns each flow's MSS.
fn learn_mss(input: &Path, opts: &GsoOptions) -> Result<HashMap<Vec<u8>, FlowMss>, CaptureError> {
    let mtu = opts.mtu;
    let mut reader = CaptureReader::open(input)?;
    let mut flows: HashMap<Vec<u8>, FlowMss> = HashMap::new();
    while let Ok(Some(frame)) = reader.next_frame() {
        let Some(link) = LinkKind::from_linktype(frame.link_type.0) else {
            continue;
        };
        let Some((key, lay)) = flow_of(link, frame.data, &opts.vxlan_ports) else {
            continue;
        };
        let payload = lay.payload_len() as u32;
        let first_l3 = lay.outer.map(|o| o.l3_off).unwrap_or(lay.l3_off);
        let ip_len = (frame.data.len() - first_l3) as u32;
        let st = flows.entry(key).or_default();
        let id = (!lay.is_v6())
            .then(|| u16::from_be_bytes([frame.data[lay.l3_off + 4], frame.data[lay.l3_off + 5]]));
        if let (Some(last), Some(id)) = (st.last_id, id) {
            if last == id {
                st.same_id += 1;
            } else {
                st.other_id += 1;
            }
        }
        st.last_id = id;
        if let (Some((prev_id, prev_payload)), Some(id)) = (st.pending.take(), id) {
            let segs = id.wrapping_sub(prev_id) as u32;
            if segs > 1 && prev_payload % segs == 0 {
                *st.id_candidates.entry(prev_payload / segs).or_default() += 1;
            }
        }
        if ip_len <= mtu {
            st.largest_single = st.largest_single.max(payload);
        } else if let Some(id) = id {
            st.pending = Some((id, payload));
        }
    }
    Ok(flows)
}

/// Segments every super-packet of `input` and writes the result.
pub fn gso_capture(
    input: &Path,
    output: &Path,
    opts: &GsoOptions,
    ctl: &mut Control<'_>,
) -> Result<Outcome<GsoSummary>, CaptureError> {
    // The first pass learns each flow's MSS and IPv4 ID pattern (a file
    // is read twice; the flow table stays small).
    let learned = learn_mss(input, opts)?;
    let mut reader = CaptureReader::open(input)?;
    let mut writer = CaptureWriter::create(output, None)?;
    let mut frames_in = 0u64;
    let mut super_packets = 0u64;
    let mut copied = 0u64;
    let mut sources: HashMap<MssSource, u64> = HashMap::new();
    let mut input_error = None;
    let mut interrupted = false;
    loop {
        if ctl.cancel.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        if frames_in % PROGRESS_EVERY == 0 {
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
        let parsed = LinkKind::from_linktype(frame.link_type.0)
            .and_then(|link| flow_of(link, frame.data, &opts.vxlan_ports));
        let Some((key, lay)) = parsed.filter(|_| !frame.is_truncated()) else {
            copied += 1;
            writer.write_frame(&meta, frame.data)?;
            continue;
        };
        let first_l3 = lay.outer.map(|o| o.l3_off).unwrap_or(lay.l3_off);
        let hdrs = (lay.payload_off() - first_l3) as u32 - if lay.jumbo_hbh { 8 } else { 0 };
        let from_comment = frame.comment.and_then(parse_gso_comment);
        let flow = learned.get(&key);
        let (mss, source) = match (opts.mss, from_comment) {
            (Some(m), _) => (m, MssSource::Given),
            (None, Some((m, _))) => (m, MssSource::Metadata),
            (None, None) => flow
                .and_then(FlowMss::best)
                .unwrap_or((opts.mtu.saturating_sub(hdrs).max(1), MssSource::Mtu)),
        };
        let params = match from_comment {
            Some((m, ty)) => GsoParams {
                mss,
                ..GsoParams::from_gso(m, ty)
            },
            None => GsoParams {
                // A flow whose packets all carry one IPv4 ID was merged as
                // fixed-ID (SKB_GSO_TCP_FIXEDID): keep the ID on every segment.
                fixed_id: flow.is_some_and(|f| f.same_id > 0 && f.same_id > f.other_id),
                ..GsoParams::new(mss)
            },
        };
        if lay.payload_len() as u32 <= mss && !lay.jumbo_hbh {
            writer.write_frame(&meta, frame.data)?;
            continue;
        }
        super_packets += 1;
        *sources.entry(source).or_default() += 1;
        let mut werr = None;
        let res = segment_layout(frame.data, &lay, &params, &mut |seg: &[u8]| {
            if werr.is_none() {
                let m = FrameMeta::new(meta.timestamp_ns, meta.link_type, seg.len());
                werr = writer.write_frame(&m, seg).err();
            }
        });
        if let Some(e) = werr {
            return Err(e);
        }
        if res.is_err() {
            copied += 1;
            writer.write_frame(&meta, frame.data)?;
        }
    }
    (ctl.on_progress)(reader.bytes_read());
    let stats = writer.finish()?;
    let mut mss_sources: Vec<(MssSource, u64)> = sources.into_iter().collect();
    mss_sources.sort_by_key(|s| std::cmp::Reverse(s.1));
    Ok(Outcome {
        summary: GsoSummary {
            input: input.display().to_string(),
            output: output.display().to_string(),
            frames_in,
            frames_out: stats.frames,
            super_packets,
            copied_unchanged: copied,
            mss_sources,
            interrupted,
        },
        input_error,
    })
}
