//! BIG TCP through tunnels with an IPv6 outer header: on kernel lines
//! 6.3-6.19 (`KernelLine::ipv6_outer_tunnel_loss`) a packet GRO merges
//! past 64 KiB there is lost (dropped with a WARN for IP in IP, mangled for
//! VXLAN). analyze names each such flow; 7.x, 64 KiB and IPv4-outer
//! tunnels raise nothing.

use offload::build::{vxlan_payload, FrameSpec, TcpSpec};
use offload::gro::KernelLine;
use offload_analyze::{analyze, Analysis, Options};
use offload_capture::{CaptureWriter, Control, FrameMeta, LinkType};
use std::path::Path;
use std::sync::atomic::AtomicBool;

const TITLE: &str = "BIG TCP with an IPv6-outer tunnel on kernel";

fn a6(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = last;
    a
}

/// One inner TCP/IPv6 segment (an Ethernet frame).
fn inner(i: u32) -> Vec<u8> {
    FrameSpec::tcp6(a6(1), a6(2), TcpSpec::data(40000, 5201, 1 + i * 1400))
        .payload(vec![9; 1400])
        .build()
}

fn vxlan6(i: u32) -> Vec<u8> {
    FrameSpec::udp6(a6(0x11), a6(0x12), 50000, 4789)
        .payload(vxlan_payload(42, &inner(i)))
        .build()
}

fn vxlan4(i: u32) -> Vec<u8> {
    FrameSpec::udp4([192, 168, 7, 1], [192, 168, 7, 2], 50000, 4789)
        .payload(vxlan_payload(42, &inner(i)))
        .build()
}

/// ip6ip6: Ethernet, outer IPv6 (next header 41), the inner IPv6 packet.
fn ip6ip6(i: u32) -> Vec<u8> {
    let inner = inner(i);
    let pkt = &inner[14..];
    let mut f = inner[..12].to_vec();
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(pkt.len() as u16).to_be_bytes());
    f.extend_from_slice(&[41, 64]);
    f.extend_from_slice(&a6(0x21));
    f.extend_from_slice(&a6(0x22));
    f.extend_from_slice(pkt);
    f
}

fn run(frames: impl Fn(u32) -> Vec<u8>, kernel: KernelLine) -> Analysis {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.pcap");
    write(&p, (0..150).map(frames));
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let opts = Options {
        kernel,
        ..Options::default()
    };
    analyze(&[p], &opts, &mut ctl).unwrap()
}

fn write(path: &Path, frames: impl Iterator<Item = Vec<u8>>) {
    let mut w = CaptureWriter::create(path, None).unwrap();
    for (i, f) in frames.enumerate() {
        let meta = FrameMeta::new(1_000_000 + i as i64 * 1000, LinkType(1), f.len());
        w.write_frame(&meta, &f).unwrap();
    }
    w.finish().unwrap();
}

/// The engine alone on the same frames, configured as the what-if
/// configures it: its own count of lost packets and segments.
fn engine_losses(frames: fn(u32) -> Vec<u8>, line: KernelLine, size: u32) -> (u64, u64) {
    let opts = Options::default();
    let mut e = offload::GroEngine::new(offload_analyze::whatif::config_for(
        size,
        line,
        opts.verify_checksums,
        &opts.vxlan_ports,
        opts.flush_timeout_ns,
    ));
    for i in 0..150u32 {
        let f = frames(i);
        let input = offload::Input {
            data: &f,
            link: offload::LinkKind::Ethernet,
            timestamp_ns: 1_000_000 + u64::from(i) * 1000,
            frame: u64::from(i) + 1,
            orig_len: f.len() as u32,
        };
        e.receive(input, &mut |_| {});
    }
    e.finish(&mut |_| {});
    (e.stats().lost_packets, e.stats().lost_segments)
}

fn named(a: &Analysis) -> Vec<&offload_report::Finding> {
    a.report
        .findings
        .iter()
        .filter(|f| f.kind == "big-tcp-ipv6-tunnel")
        .collect()
}

#[test]
fn vxlan_and_ip6ip6_over_ipv6_with_big_tcp_are_named_on_affected_lines() {
    for (name, frames) in [
        ("vxlan6", vxlan6 as fn(u32) -> Vec<u8>),
        ("ip6ip6", ip6ip6 as fn(u32) -> Vec<u8>),
    ] {
        // The affected lines, as the engine's KernelLine says (6.18; 6.1
        // and 6.12 stop every tunnel at 64 KiB, 7.x completes soundly).
        for line in KernelLine::ALL {
            let a = run(frames, line);
            if !line.breaks_big_tcp_over_ipv6_tunnels() {
                assert!(named(&a).is_empty(), "{name} on {line}");
                continue;
            }
            let f = named(&a);
            assert_eq!(f.len(), 1, "{name} on {line}: {:#?}", a.report.findings);
            let f = f[0];
            assert!(
                f.title.starts_with(&format!(
                    "{TITLE} {line}: merged packets past 64 KiB are dropped"
                )),
                "{}",
                f.title
            );
            assert_eq!(f.severity, offload_report::Severity::High);
            let flow = &a.report.flows[f.flow.as_ref().unwrap().id];
            // The figures behind it: at 185000 packets past 64 KiB are
            // lost, at 65536 nothing is.
            assert_eq!(flow.what_if[0].lost_segments, 0, "{name} {line}");
            assert!(flow.what_if[1].lost_packets > 0, "{name} {line}");
            let reason = flow.what_if[1].loss_reason.unwrap();
            let want = if name == "vxlan6" {
                "ipv6-tunnel-jumbo-mangled"
            } else {
                "ipv6-tunnel-jumbo-dropped"
            };
            assert_eq!(reason, want);
            assert!(f.detail.contains("gro_max_size 185000"), "{}", f.detail);
            // The what-if reads the engine's verdict (`Delivered::lost`):
            // per flow and over the run, its lost packets and segments are
            // the engine's own count on the same frames, and the finding's
            // cost is those segments.
            let w = &a.report.what_if[1];
            let engine = engine_losses(frames, line, 185000);
            assert!(engine.1 > 0, "{name} {line}");
            assert_eq!((w.lost_packets, w.lost_segments), engine, "{name} {line}");
            assert_eq!(
                (flow.what_if[1].lost_packets, flow.what_if[1].lost_segments),
                engine,
                "{name} {line}"
            );
            assert_eq!(w.loss_reason, Some(want));
            let text = offload_analyze::text::render(&a.report, 10);
            assert!(
                text.contains(&format!(
                    "kernel {line} loses {} of these packets ({} segments): {want}",
                    engine.0, engine.1
                )),
                "{text}"
            );
            assert_eq!(f.extra_packets, Some(engine.1));
            assert_eq!(engine_losses(frames, line, 65536), (0, 0));
        }
        assert!(KernelLine::V6_18.breaks_big_tcp_over_ipv6_tunnels());
    }
}

#[test]
fn ipv4_outer_tunnels_and_64k_raise_nothing() {
    let a = run(vxlan4, KernelLine::V6_18);
    assert!(named(&a).is_empty());
    assert!(a
        .report
        .flows
        .iter()
        .all(|f| f.what_if[1].lost_packets == 0));
    assert_eq!(a.report.what_if[1].lost_segments, 0);
    // The same IPv6 train at 64 KiB only.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.pcap");
    write(&p, (0..150).map(vxlan6));
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let opts = Options {
        gro_sizes: vec![65536],
        ..Options::default()
    };
    let a = analyze(&[p], &opts, &mut ctl).unwrap();
    assert!(named(&a).is_empty());
}
