//! `offload gso`: the super-packets of a capture segmented as GSO/TSO would.

use crate::{Control, Outcome, PROGRESS_EVERY};
use offload::gso::{layout, segment_layout, GsoParams, Layout};
use offload::LinkKind;
use offload_capture::{CaptureError, CaptureReader, CaptureWriter, FrameMeta};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

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
    k.push(lay.l4_proto);
    if lay.v6 {
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
        let id = (!lay.v6)
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
        let from_comment = frame.gso().map(|g| (g.gso_size, g.gso_type));
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
