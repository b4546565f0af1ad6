//! `offload gro`: a capture through the engine's GRO, written back out.

use crate::csum::{frame_checksum, CsumState, PROBE_FRAMES};
use crate::{ratio, Control, Outcome, ReadOptions, PROGRESS_EVERY};
use offload::gro::{FlushReason, Proto};
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
use offload_capture::{CaptureError, CaptureReader, CaptureWriter, FrameMeta, GsoMeta, LinkType};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::Ordering;

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

/// Packets a kernel line loses for one reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LossCount {
    pub reason: &'static str,
    pub packets: u64,
    pub segments: u64,
    /// The kernel code that loses them.
    pub citation: &'static str,
}

/// The configuration a GRO run used, echoed in reports.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GroSettings {
    /// The kernel line whose GRO rules ran (`6.1`, `6.12`, `6.18`, `7.x`).
    pub kernel: String,
    pub gro_max_size: u32,
    pub gro_ipv4_max_size: u32,
    pub flush_timeout_ns: u64,
    /// Checksums were verified (off with `--no-checksum-check`, or when the
    /// capture's checksums were left to offload).
    pub checksum_check: bool,
    /// The capture's checksums were left to offload (CHECKSUM_PARTIAL), so
    /// they were not verified, as the kernel does not verify them.
    pub checksums_offloaded: bool,
    /// `all`, `off`, or the ports with a UDP_GRO socket.
    pub udp_gro: String,
    pub vxlan_ports: Vec<u16>,
    pub vlan_gro: bool,
    /// The kernel line's losses were reproduced (`--no-kernel-losses` off).
    pub kernel_losses: bool,
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
    /// Packets the kernel line loses (not written), per reason
    /// (`offload::gro::LossReason`), and their segments.
    pub lost: Vec<LossCount>,
    pub lost_segments: u64,
    /// Frames whose captured length exceeded the snapshot length (read
    /// whole unless `strict`), and the first of them.
    pub frames_above_snaplen: u64,
    pub first_above_snaplen: u64,
    /// Timestamps read or written as the nearest time that could be.
    pub timestamps_clamped: crate::TimestampsClamped,
    /// The run was stopped by the user before the end of the input.
    pub interrupted: bool,
}

/// Where GRO deliveries go: the output capture, plus counters.
struct GroSink {
    writer: CaptureWriter,
    error: Option<CaptureError>,
    super_packets: u64,
    largest: u64,
    lost: Vec<LossCount>,
}

impl GroSink {
    fn write(&mut self, meta: &FrameMeta, data: &[u8]) {
        if self.error.is_none() {
            self.error = self.writer.write_frame(meta, data).err();
        }
    }

    fn deliver(&mut self, d: &Delivered<'_>) {
        if let Some(r) = d.lost {
            // The receiver on this kernel line never gets it sound.
            match self.lost.iter_mut().find(|l| l.reason == r.name()) {
                Some(l) => {
                    l.packets += 1;
                    l.segments += u64::from(d.segments);
                }
                None => self.lost.push(LossCount {
                    reason: r.name(),
                    packets: 1,
                    segments: u64::from(d.segments),
                    citation: r.citation(),
                }),
            }
            return;
        }
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
        let gso = (d.segments > 1).then_some(GsoMeta {
            gso_size: d.gso_size,
            gso_segs: d.segments,
            gso_type: d.gso_type,
        });
        self.error = self
            .writer
            .write_frame_with_gso(&meta, d.data, gso.as_ref())
            .err();
    }
}

/// A frame read ahead while probing the checksums.
struct Held {
    meta: FrameMeta,
    number: u64,
    data: Vec<u8>,
}

/// Bytes of frames held while probing (the probe ends early at this size).
const PROBE_BYTES: usize = 32 << 20;

/// Runs `input` through GRO and writes the result to `output` (format from
/// its extension). The input is read once, front to back: pipes work.
pub fn gro_capture(
    input: &Path,
    output: &Path,
    cfg: &GroConfig,
    ctl: &mut Control<'_>,
) -> Result<Outcome<GroSummary>, CaptureError> {
    gro_capture_with(input, output, cfg, &ReadOptions::default(), ctl)
}

/// [`gro_capture`] with reading options.
pub fn gro_capture_with(
    input: &Path,
    output: &Path,
    cfg: &GroConfig,
    read: &ReadOptions,
    ctl: &mut Control<'_>,
) -> Result<Outcome<GroSummary>, CaptureError> {
    let mut reader = CaptureReader::open(input)?;
    reader.set_snaplen_check(read.strict);
    let mut input_error = None;
    let mut eof = false;
    // Read ahead until a checksum left to offload shows (or enough frames
    // say there is none), then run the engine with the right setting.
    let mut held: Vec<Held> = Vec::new();
    let mut held_bytes = 0usize;
    let mut offloaded = false;
    let mut interrupted = false;
    while cfg.verify_checksums
        && !offloaded
        && held.len() < PROBE_FRAMES
        && held_bytes < PROBE_BYTES
    {
        if ctl.cancel.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        match reader.next_frame() {
            Ok(Some(f)) => {
                if let Some(link) = LinkKind::from_linktype(f.link_type.0) {
                    offloaded =
                        frame_checksum(link, f.data, &cfg.vxlan_ports) == CsumState::Offloaded;
                }
                held_bytes += f.data.len();
                held.push(Held {
                    meta: FrameMeta::from(&f),
                    number: f.number,
                    data: f.data.to_vec(),
                });
            }
            Ok(None) => {
                eof = true;
                break;
            }
            Err(e) => {
                input_error = Some(e);
                break;
            }
        }
    }
    let mut run_cfg = cfg.clone();
    run_cfg.verify_checksums = cfg.verify_checksums && !offloaded;
    let mut out = GroSink {
        writer: CaptureWriter::create(output, None)?,
        error: None,
        super_packets: 0,
        largest: 0,
        lost: Vec::new(),
    };
    let mut engine = GroEngine::new(run_cfg.clone());
    // The reader hands out each frame in a buffer it reuses, so held
    // payloads cannot stay where they are: ask for contiguous packets.
    // Keeping frames instead would copy each one once too (into a frame
    // store rather than into its held packet), for no gain.
    engine.set_zero_copy(false);
    let mut unsupported = 0u64;
    let mut count = 0u64;
    let mut feed = |meta: &FrameMeta, number: u64, data: &[u8], out: &mut GroSink| {
        let Some(link) = LinkKind::from_linktype(meta.link_type.0) else {
            unsupported += 1;
            // Frames the engine cannot read go through unchanged.
            out.write(meta, data);
            return;
        };
        engine.receive(
            Input {
                data,
                link,
                timestamp_ns: meta.timestamp_ns.max(0) as u64,
                frame: number,
                orig_len: meta.orig_len,
            },
            &mut |d: &Delivered<'_>| out.deliver(d),
        );
    };
    for h in held.drain(..) {
        feed(&h.meta, h.number, &h.data, &mut out);
    }
    while !eof && !interrupted && input_error.is_none() && out.error.is_none() {
        if ctl.cancel.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        count += 1;
        if count.is_multiple_of(PROGRESS_EVERY) {
            (ctl.on_progress)(reader.bytes_read());
        }
        match reader.next_frame() {
            Ok(Some(f)) => feed(&FrameMeta::from(&f), f.number, f.data, &mut out),
            Ok(None) => break,
            Err(e) => input_error = Some(e),
        }
    }
    engine.finish(&mut |d: &Delivered<'_>| out.deliver(d));
    (ctl.on_progress)(reader.bytes_read());
    if let Some(e) = out.error {
        return Err(e);
    }
    let written = out.writer.finish()?;
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
            input: offload_capture::stdio::input_name(input),
            output: offload_capture::stdio::output_name(output),
            settings: GroSettings {
                kernel: cfg.kernel.name().to_string(),
                gro_max_size: cfg.gro_max_size,
                gro_ipv4_max_size: cfg.gro_ipv4_max_size,
                flush_timeout_ns: cfg.flush_timeout_ns,
                checksum_check: run_cfg.verify_checksums,
                checksums_offloaded: offloaded,
                udp_gro: cfg.udp.to_string(),
                vxlan_ports: cfg.vxlan_ports.clone(),
                vlan_gro: cfg.vlan_gro,
                kernel_losses: cfg.kernel_losses,
            },
            frames_in,
            packets_out,
            merge_ratio: ratio(frames_in, packets_out),
            super_packets,
            largest_packet: largest,
            protocols,
            flush_reasons,
            unsupported_link_frames: unsupported,
            lost_segments: st.lost_segments,
            lost: out.lost,
            frames_above_snaplen: reader.above_snaplen().0,
            first_above_snaplen: reader.above_snaplen().1,
            timestamps_clamped: crate::TimestampsClamped::new(&reader, &written),
            interrupted,
        },
        input_error,
    })
}
