//! `offload gso`: the super-packets of a capture segmented as GSO/TSO would.

pub use crate::mss::MssSource;
use crate::mss::{tcp_mss_option, FlowEvidence};
use crate::{Control, Outcome, ReadOptions, DEFAULT_VXLAN_PORTS, PROGRESS_EVERY};
use offload::gro::KernelLine;
use offload::gso::{layout, segment_layout, GsoParams, Layout};
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
}

impl Default for GsoOptions {
    fn default() -> Self {
        GsoOptions {
            mss: None,
            mtu: 1500,
            vxlan_ports: DEFAULT_VXLAN_PORTS.to_vec(),
            read: ReadOptions::default(),
            kernel: KernelLine::default(),
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

/// What `offload gso` reports.
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
    /// Frames that could not be segmented (not TCP, unreadable) and were copied.
    pub copied_unchanged: u64,
    /// How the MSS was chosen, per super-packet.
    pub mss_sources: Vec<(MssSource, u64)>,
    /// How the MSS was chosen, per flow with super-packets.
    pub flow_sources: Vec<(MssSource, u64)>,
    /// The flows with the most super-packets (at most [`LISTED_FLOWS`]).
    pub flows: Vec<FlowMss>,
    /// Frames whose captured length exceeded the snapshot length (read
    /// whole unless strict), and the first of them.
    pub frames_above_snaplen: u64,
    pub first_above_snaplen: u64,
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
fn flow_of(link: LinkKind, f: &[u8], vxlan_ports: &[u16]) -> Option<(FlowKey, Layout)> {
    let lay = layout(link, f, vxlan_ports).ok()?;
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
    Some((key, lay))
}

/// The decision for one flow, made after the first pass.
#[derive(Debug, Clone, Copy)]
struct Decision {
    mss: Option<(u32, MssSource)>,
    fixed_id: bool,
}

/// First pass of `gso` without `--mss`: learns each flow's MSS.
fn learn_mss(
    input: &SpooledInput,
    opts: &GsoOptions,
) -> Result<HashMap<FlowKey, Decision>, CaptureError> {
    let mut reader = CaptureReader::open_as(input.path(), input.name().to_string())?;
    reader.set_snaplen_check(opts.read.strict);
    let mut flows: HashMap<FlowKey, FlowEvidence> = HashMap::new();
    while let Ok(Some(frame)) = reader.next_frame() {
        let Some(link) = LinkKind::from_linktype(frame.link_type.0) else {
            continue;
        };
        let Some((key, lay)) = flow_of(link, frame.data, &opts.vxlan_ports) else {
            continue;
        };
        let f = frame.data;
        let st = flows.entry(key).or_default();
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
    }
    Ok(flows
        .iter()
        .map(|(k, st)| {
            let peer = flows.get(&k.reverse()).and_then(|r| r.syn_mss);
            let d = Decision {
                mss: st.infer(peer),
                fixed_id: st.fixed_id(),
            };
            (*k, d)
        })
        .collect())
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
    // A pipe or FIFO is copied to a temporary file first (read once).
    let spooled = SpooledInput::new_cancellable(input, ctl.cancel)?;
    let learned = learn_mss(&spooled, opts)?;
    let mut reader = CaptureReader::open_as(spooled.path(), spooled.name().to_string())?;
    reader.set_snaplen_check(opts.read.strict);
    let mut writer = CaptureWriter::create(output, None)?;
    let mut frames_in = 0u64;
    let mut super_packets = 0u64;
    let mut copied = 0u64;
    let mut sources: HashMap<MssSource, u64> = HashMap::new();
    let mut per_flow: HashMap<FlowKey, (u32, MssSource, u64)> = HashMap::new();
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
        let from_meta = frame.gso();
        let flow = learned.get(&key);
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
            writer.write_frame(&meta, frame.data)?;
            continue;
        }
        super_packets += 1;
        *sources.entry(source).or_default() += 1;
        per_flow.entry(key).or_insert((mss, source, 0)).2 += 1;
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
    Ok(Outcome {
        summary: GsoSummary {
            input: spooled.name().to_string(),
            output: offload_capture::stdio::output_name(output),
            kernel: opts.kernel.name().to_string(),
            frames_in,
            frames_out: stats.frames,
            super_packets,
            copied_unchanged: copied,
            mss_sources,
            flow_sources,
            flows,
            frames_above_snaplen: reader.above_snaplen().0,
            first_above_snaplen: reader.above_snaplen().1,
            interrupted,
        },
        input_error,
    })
}
