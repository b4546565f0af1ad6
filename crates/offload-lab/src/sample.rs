//! `--sample N`: capture packets after GRO and let the analysis say which
//! flows do not merge and why.
//!
//! Packet taps run after GRO, so what an `AF_PACKET` socket receives is
//! what the stack gets: super-packets where GRO merged, wire packets where
//! it did not. Two sockets per device:
//! - one with `PACKET_VNET_HDR`, for each super-packet's `gso_size` and
//!   `gso_type` (the kernel refuses that socket frames whose GSO type has no
//!   virtio equivalent, e.g. merged VXLAN on some kernels, so it only
//!   counts);
//! - one plain, whose frames are written to a pcap and run through
//!   `offload analyze`'s library. The wire packets of a flow that does not
//!   merge are exactly the input its findings need (IP ID rule, option or
//!   window churn, checksums...).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use offload_capture::{CaptureFormat, CaptureWriter, FrameMeta, LinkType};
use serde::Serialize;

use offload_sys::error::{Error, Result};
use offload_sys::packet::{CaptureOptions, PacketSocket};

/// Options of [`sample`].
#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// Frames to capture (all devices together).
    pub count: usize,
    /// Give up after this long.
    pub timeout: Duration,
    /// Where to keep the pcap; `None`: a temporary file, removed after.
    pub keep: Option<PathBuf>,
    /// Also replay the sample through the engine under these kernel
    /// profiles (what another kernel line would have merged).
    pub profiles: Vec<offload::gro::KernelLine>,
}

/// What GRO at 64 KiB would make of the sample under one kernel profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileWhatIf {
    /// Kernel profile (`6.1`, `6.6`, `6.18`, `7.x`).
    pub kernel: &'static str,
    /// Frames in.
    pub frames_in: u64,
    /// Packets the stack would see.
    pub stack_packets: u64,
    /// `frames_in / stack_packets`.
    pub merge_ratio: f64,
}

/// GSO facts of the super-packets seen, per device.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeviceSample {
    /// Frames captured (plain socket).
    pub frames: u64,
    /// Frames with a GSO type (vnet socket).
    pub super_packets: u64,
    /// Frames without one (vnet socket).
    pub single_packets: u64,
    /// Sum of `len / gso_size` over super-packets: segments they carry.
    pub segments_in_super_packets: u64,
    /// Most common `gso_size` values and their counts.
    pub gso_sizes: BTreeMap<u16, u64>,
}

/// The result of [`sample`].
#[derive(Debug, Clone, Serialize)]
pub struct SampleReport {
    /// Frames captured.
    pub frames: u64,
    /// Per device.
    pub devices: BTreeMap<String, DeviceSample>,
    /// `offload analyze` of the captured frames.
    pub analysis: offload_analyze::Report,
    /// The pcap, when kept.
    pub pcap: Option<String>,
    /// The sample replayed under [`SampleOptions::profiles`].
    pub what_if: Vec<ProfileWhatIf>,
}

/// Captures `opts.count` frames after GRO on `devices` (name, ifindex) of
/// the calling thread's namespace, then analyses them.
pub fn sample(
    devices: &[(String, u32)],
    opts: &SampleOptions,
    cancel: &AtomicBool,
) -> Result<SampleReport> {
    let mut socks = Vec::new();
    for (name, index) in devices {
        let vnet = PacketSocket::open(
            *index,
            CaptureOptions {
                vnet_hdr: true,
                rcvbuf: 16 << 20,
                ..CaptureOptions::default()
            },
        )?;
        socks.push((name.clone(), vnet));
    }
    // Without --sample-pcap the packets go to a file in a private
    // temporary directory (offload_capture::tempfiles), removed when `_tmp`
    // is dropped, on every exit path.
    let io = |path: &std::path::Path| {
        let p = path.display().to_string();
        move |e: offload_capture::CaptureError| {
            Error::sys(format!("write {p}"), std::io::Error::other(e.to_string()))
        }
    };
    let (path, _tmp, mut writer) = match &opts.keep {
        Some(p) => (
            p.clone(),
            None,
            CaptureWriter::create(p, Some(CaptureFormat::Pcap)).map_err(io(p))?,
        ),
        None => {
            let dir = offload_capture::tempfiles::PrivateDir::new("sample")
                .map_err(|e| Error::sys("create a private temporary directory", e))?;
            let (p, f) = dir
                .create_file("sample.pcap")
                .map_err(|e| Error::sys("create the sample pcap", e))?;
            let w = CaptureWriter::from_writer(f, p.display().to_string(), CaptureFormat::Pcap)
                .map_err(io(&p))?;
            (p, Some(dir), w)
        }
    };
    let shown = path.display().to_string();
    let io = |e: offload_capture::CaptureError| {
        Error::sys(
            format!("write {shown}"),
            std::io::Error::other(e.to_string()),
        )
    };
    let mut per_dev: BTreeMap<String, DeviceSample> = BTreeMap::new();
    let start = Instant::now();
    let mut frames = 0u64;
    let result = (|| -> Result<()> {
        while (frames as usize) < opts.count
            && start.elapsed() < opts.timeout
            && !cancel.load(std::sync::atomic::Ordering::Relaxed)
        {
            let mut got = false;
            for (name, vnet) in socks.iter_mut() {
                let entry = per_dev.entry(name.clone()).or_default();
                // One socket is the source of both the counts and the
                // frames written, so they describe the same packets:
                // frames = super-packets + single packets.
                while (frames as usize) < opts.count {
                    let Some(c) = vnet.recv(None)? else { break };
                    got = true;
                    match c.vnet {
                        Some(h) if h.gso_type != 0 && h.gso_size > 0 => {
                            entry.super_packets += 1;
                            let payload = c.frame.len().saturating_sub(usize::from(h.hdr_len));
                            entry.segments_in_super_packets +=
                                payload.div_ceil(usize::from(h.gso_size)).max(1) as u64;
                            *entry.gso_sizes.entry(h.gso_size).or_default() += 1;
                        }
                        _ => entry.single_packets += 1,
                    }
                    let ts = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as i64);
                    writer
                        .write_frame(
                            &FrameMeta::new(ts, LinkType::ETHERNET, c.frame.len()),
                            c.frame,
                        )
                        .map_err(io)?;
                    entry.frames += 1;
                    frames += 1;
                }
            }
            if !got {
                if let Some((_, vnet)) = socks.first() {
                    vnet.wait_readable(Duration::from_millis(20))?;
                }
            }
        }
        Ok(())
    })();
    writer.finish().map_err(io)?;
    let run = |kernel: offload::gro::KernelLine| {
        let aopts = offload_analyze::Options {
            verify_checksums: false,
            threads: 1,
            kernel,
            ..offload_analyze::Options::default()
        };
        let never = AtomicBool::new(false);
        let mut progress = |_: u64| {};
        let mut ctl = offload_capture::Control {
            on_progress: &mut progress,
            cancel: &never,
        };
        offload_analyze::analyze(std::slice::from_ref(&path), &aopts, &mut ctl)
            .map_err(|e| Error::sys("analyze the sample", std::io::Error::other(e.to_string())))
    };
    let analysis = result.and_then(|()| run(offload::gro::KernelLine::V6_18));
    let mut what_if = Vec::new();
    if analysis.is_ok() {
        for &p in &opts.profiles {
            if let Some(w) = run(p)?.report.what_if.first() {
                what_if.push(ProfileWhatIf {
                    kernel: p.name(),
                    frames_in: w.frames_in,
                    stack_packets: w.stack_packets,
                    merge_ratio: w.merge_ratio,
                });
            }
        }
    }
    Ok(SampleReport {
        frames,
        devices: per_dev,
        analysis: analysis?.report,
        pcap: opts.keep.as_ref().map(|p| p.display().to_string()),
        what_if,
    })
}
