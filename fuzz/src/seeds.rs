//! Seed inputs for every target: valid frames and trains built with
//! `offload::build`, so that the fuzzers start from inputs that reach the
//! merge and segmentation code instead of failing the first header check.
//!
//! `cargo run --example seeds -- DIR` writes them to `DIR/<target>/`;
//! `scripts/fuzz-smoke.sh` does that before every run, so the seed corpus
//! is never stale and never committed.

use crate::encode_records;
use offload::build::{vxlan_payload, FrameSpec, L2Spec, TcpSpec};
use offload::gro::gso_type;
use offload::wire::tcp::flags;
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
use offload_capture::{CaptureFormat, CaptureWriter, FrameMeta, LinkType};
use std::path::Path;

/// A TCP segment `i` of a flow: 1000-byte payloads, incrementing IDs.
fn tcp_seg(v6: bool, i: u32, len: usize, fl: u8) -> FrameSpec {
    let mut t = TcpSpec::data(40000, 5201, 1000 + i * len as u32).with_timestamps(7, 9);
    t.flags |= fl;
    let mut s = if v6 {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        let mut b = a;
        a[15] = 1;
        b[15] = 2;
        FrameSpec::tcp6(a, b, t)
    } else {
        let mut s = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], t);
        s.v4_mut().id = 100 + i as u16;
        s
    };
    s.payload = vec![i as u8; len];
    s
}

fn udp_dgram(i: u16, len: usize) -> FrameSpec {
    let mut s = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 5000, 443).payload(vec![3; len]);
    s.v4_mut().id = 300 + i;
    s
}

fn vxlan(i: u32) -> FrameSpec {
    let inner = tcp_seg(false, i, 1000, 0).build();
    let mut s = FrameSpec::udp4([10, 9, 0, 1], [10, 9, 0, 2], 40007, 4789)
        .payload(vxlan_payload(42, &inner));
    s.v4_mut().id = 500 + i as u16;
    s.udp_mut().zero_checksum = true;
    s
}

/// Named trains of Ethernet frames.
pub fn trains() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let tcp4: Vec<_> = (0..6).map(|i| tcp_seg(false, i, 1000, 0).build()).collect();
    let tcp6: Vec<_> = (0..6).map(|i| tcp_seg(true, i, 1000, 0).build()).collect();
    let mut tail4 = tcp4.clone();
    tail4.push(tcp_seg(false, 6, 300, flags::PSH).build());
    let vlan: Vec<_> = (0..4)
        .map(|i| {
            let mut s = tcp_seg(false, i, 1000, 0);
            if let L2Spec::Ethernet { vlans, .. } = &mut s.l2 {
                vlans.push((0x8100, 7));
            }
            s.build()
        })
        .collect();
    let udp: Vec<_> = (0..5).map(|i| udp_dgram(i, 1200).build()).collect();
    let vx: Vec<_> = (0..5).map(|i| vxlan(i).build()).collect();
    // Two flows interleaved, one with a gap in sequence numbers.
    let mut mixed = Vec::new();
    for i in 0..4 {
        mixed.push(tcp_seg(false, i, 1000, 0).build());
        mixed.push(tcp_seg(true, i * 2, 1000, 0).build());
    }
    vec![
        ("tcp4", tcp4),
        ("tcp6", tcp6),
        ("tcp4_tail_psh", tail4),
        ("vlan", vlan),
        ("udp", udp),
        ("vxlan", vx),
        ("mixed", mixed),
    ]
}

/// Super-packets built by GRO from the trains, with their `gso_size` and
/// `gso_type`.
pub fn super_packets() -> Vec<(String, Vec<u8>, u32, u32)> {
    let mut out = Vec::new();
    for (name, frames) in trains() {
        let mut e = GroEngine::new(
            GroConfig::default()
                .flush_timeout_ns(u64::MAX / 4)
                .vlan_gro(true),
        );
        let mut n = 0;
        let mut push = |d: &Delivered<'_>| {
            if d.segments > 1 {
                out.push((
                    format!("{name}_{n}"),
                    d.to_vec(|k| &frames[k as usize - 1]),
                    d.gso_size,
                    d.gso_type,
                ));
                n += 1;
            }
        };
        for (i, f) in frames.iter().enumerate() {
            let input = Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            };
            e.receive(input, &mut push);
        }
        e.finish(&mut push);
    }
    out
}

/// Writes the seeds of every target under `dir/<target>/`.
pub fn write_all(dir: &Path) -> std::io::Result<usize> {
    let mut count = 0;
    let mut put = |target: &str, name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let d = dir.join(target);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join(name), bytes)?;
        count += 1;
        Ok(())
    };
    let trains = trains();
    for (name, frames) in &trains {
        // verify on/off × VLAN GRO on × long timeout; and timeout 0.
        for (tag, cfg) in [("v", (0x0f, 2)), ("nv", (0x0e, 2)), ("t0", (0x03, 2))] {
            let recs: Vec<_> = frames
                .iter()
                .map(|f| (LinkKind::Ethernet, 1u8, 0u8, f.as_slice()))
                .collect();
            put(
                "gro_engine",
                &format!("{name}_{tag}"),
                &encode_records(cfg, &recs),
            )?;
        }
        // The first frame expanded into 180 copies, checksums unverified:
        // BIG TCP sizes (limit 185 000) and, with a 9 000-byte limit, the
        // size check on a short input.
        let first = [(LinkKind::Ethernet, 1u8, 7u8, frames[0].as_slice())];
        put(
            "gro_engine",
            &format!("{name}_big"),
            &encode_records((0x2e, 2), &first),
        )?;
        put(
            "gro_engine",
            &format!("{name}_small"),
            &encode_records((0x0e, 0x5a), &first),
        )?;
        put("wire_parsers", name, &frames[0])?;
    }
    for (name, data, gso_size, gso_t) in super_packets() {
        let mut fl = 8u8; // VXLAN port on
        if gso_t & gso_type::TCP_FIXEDID != 0 {
            fl |= 1;
        }
        let mut input = vec![0u8];
        input.extend_from_slice(&(gso_size as u16).to_be_bytes());
        input.push(fl);
        input.extend_from_slice(&data);
        put("gso_segment", &name, &input)?;
        put("wire_parsers", &format!("super_{name}"), &data)?;
    }
    // Captures: one pcap and one pcapng of the TCP train.
    for (ext, fmt) in [
        ("pcap", CaptureFormat::Pcap),
        ("pcapng", CaptureFormat::PcapNg),
    ] {
        let tmp =
            std::env::temp_dir().join(format!("offload-fuzz-seed-{}.{ext}", std::process::id()));
        let mut w = CaptureWriter::create(&tmp, Some(fmt))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        for (i, f) in trains[0].1.iter().enumerate() {
            let meta = FrameMeta::new(1_000_000 * i as i64, LinkType::ETHERNET, f.len());
            w.write_frame(&meta, f)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        w.finish()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let bytes = std::fs::read(&tmp);
        std::fs::remove_file(&tmp)?;
        put("capture_reader", &format!("tcp4.{ext}"), &bytes?)?;
    }
    Ok(count)
}
