//! `offload analyze` on synthetic captures built with the engine's frame
//! builder: each test builds a capture with one known property and checks
//! that the analysis reports exactly that property.

use offload::build::{FrameSpec, TcpSpec, UdpSpec};
use offload::gro::KernelLine;
use offload_analyze::{analyze, Analysis, Options};
use offload_capture::Control;
use offload_capture::{CaptureWriter, FrameMeta, LinkType};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

const A: [u8; 4] = [10, 0, 0, 2];
const B: [u8; 4] = [10, 0, 0, 1];

fn write(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = CaptureWriter::create(path, None).unwrap();
    for (ts, f) in frames {
        w.write_frame(&FrameMeta::new(*ts as i64, LinkType(1), f.len()), f)
            .unwrap();
    }
    w.finish().unwrap();
}

fn run(paths: &[PathBuf], opts: &Options) -> Analysis {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    analyze(paths, opts, &mut ctl).unwrap()
}

/// A TCP data segment of `len` bytes with the given IP ID and DF.
fn seg(seq: u32, len: usize, id: u16, df: bool) -> Vec<u8> {
    let mut s = FrameSpec::tcp4(A, B, TcpSpec::data(40000, 5201, seq)).payload(vec![7; len]);
    s.v4_mut().id = id;
    s.v4_mut().df = df;
    s.build()
}

/// A VXLAN frame: outer IPv4/UDP to 4789 carrying `inner` (an Ethernet frame).
fn vxlan(inner: &[u8], outer_id: u16, df: bool, sport: u16) -> Vec<u8> {
    let mut payload = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
    payload.extend_from_slice(inner);
    let mut s = FrameSpec::udp4([192, 168, 1, 2], [192, 168, 1, 1], sport, 4789).payload(payload);
    s.v4_mut().id = outer_id;
    s.v4_mut().df = df;
    if let offload::build::L4Spec::Udp(u) = &mut s.l4 {
        *u = UdpSpec {
            zero_checksum: true,
            ..u.clone()
        };
    }
    s.build()
}

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(name);
    (d, p)
}

#[test]
fn healthy_flow_merges_and_big_tcp_gain_is_reported() {
    let (_d, p) = tmp("healthy.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..200u32)
        .map(|i| {
            (
                1_000_000 + i as u64 * 1000,
                seg(1000 + i * 1448, 1448, 100 + i as u16, true),
            )
        })
        .collect();
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    let r = &a.report;
    assert_eq!(r.flows.len(), 1);
    let f = &r.flows[0];
    assert_eq!(f.packets, 200);
    assert_eq!(f.observed_mss, Some(1448));
    assert_eq!(f.retransmissions, 0);
    assert_eq!(
        f.ip.ip_id_pattern,
        offload::gro::IpIdPattern::IncrementingPerFlow
    );
    assert_eq!(f.ip.df, "set");
    assert_eq!(f.l4_checksum, "valid");
    // 200 x 1448 bytes: 45 segments fit in 64 KiB, 127 in 185000.
    let w64 = &r.what_if[0];
    let wbig = &r.what_if[1];
    assert_eq!(w64.frames_in, 200);
    assert!(w64.stack_packets <= 5, "{}", w64.stack_packets);
    assert!(wbig.stack_packets < w64.stack_packets);
    assert!(r
        .findings
        .iter()
        .all(|f| f.severity != offload_report::Severity::High));
    let gain = r
        .findings
        .iter()
        .find(|f| f.kind == "big-tcp-gain")
        .expect("gain finding");
    assert!(gain.title.contains("185000"), "{}", gain.title);
    assert!(gain
        .flow
        .as_ref()
        .unwrap()
        .description
        .contains("10.0.0.2:40000"));
}

#[test]
fn broken_vxlan_tunnel_is_named_with_frames_and_cause() {
    let (_d, p) = tmp("vxlan.pcap");
    // Outer IDs jump around, DF clear: the 6.18 rule rejects every step.
    let ids = [101u16, 105, 107, 3000, 12, 999, 40000, 7, 5000, 300];
    let frames: Vec<(u64, Vec<u8>)> = (0..60u32)
        .map(|i| {
            let inner = seg(1 + i * 1398, 1398, i as u16, true);
            (
                5_000_000 + i as u64 * 2000,
                vxlan(
                    &inner,
                    ids[i as usize % ids.len()].wrapping_add(i as u16 * 17),
                    false,
                    33333,
                ),
            )
        })
        .collect();
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    let r = &a.report;
    assert_eq!(r.flows.len(), 1);
    let f = &r.flows[0];
    let t = f.tunnel.as_ref().expect("tunnel");
    assert_eq!(t.vni, Some(42));
    assert_eq!(t.outer_ip.df, "clear");
    assert_eq!(t.outer_ip.ip_id_pattern, offload::gro::IpIdPattern::Random);
    let top = &r.findings[0];
    assert_eq!(top.kind, "ip-id-rule");
    assert!(
        top.title.contains("192.168.1.2:33333 -> 192.168.1.1:4789"),
        "{}",
        top.title
    );
    assert!(top.detail.contains("DF=0"), "{}", top.detail);
    assert_eq!(top.evidence.as_ref().unwrap().frames[..3], [1, 2, 3]);
    assert!(
        top.detail.contains("frames 1, 2, 3, 4: 101, 122, 141"),
        "{}",
        top.detail
    );
    // The stack sees (nearly) every frame, a healthy tunnel would see few.
    let w = &f.what_if[0];
    assert!(w.stack_packets >= 55, "{}", w.stack_packets);
    assert!(w.healthy_tunnel_packets.unwrap() <= 3);
}

#[test]
fn fixed_outer_ids_merge_on_6_18_but_not_on_6_1() {
    let (_d, p) = tmp("fixed.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..40u32)
        .map(|i| {
            let inner = seg(1 + i * 1398, 1398, i as u16, true);
            (1_000_000 + i as u64 * 1000, vxlan(&inner, 0, false, 40001))
        })
        .collect();
    write(&p, &frames);
    let new = run(std::slice::from_ref(&p), &Options::default());
    assert!(new.report.findings.iter().all(|f| f.kind != "ip-id-rule"));
    let old = run(
        &[p],
        &Options {
            kernel: KernelLine::V6_1,
            ..Options::default()
        },
    );
    // 6.1 is checked against Debian's 6.1 booted in a VM (decision 0072).
    assert!(old.report.settings.kernel_verified_live);
    let top = &old.report.findings[0];
    assert_eq!(top.kind, "ip-id-rule");
    assert!(top.fix.as_deref().unwrap().contains("DF"), "{:?}", top.fix);
    assert!(
        old.report.flows[0].what_if[0].stack_packets > new.report.flows[0].what_if[0].stack_packets
    );
}

#[test]
fn retransmissions_and_out_of_order_are_told_apart() {
    let (_d, p) = tmp("loss.pcap");
    let mut frames = Vec::new();
    let mut t = 1_000_000u64;
    let mut push = |seq: u32, id: u16| {
        t += 1000;
        frames.push((t, seg(seq, 1000, id, true)));
    };
    for i in 0..10 {
        push(1 + i * 1000, i as u16);
    }
    // Segment 11 is late: 12 and 13 first, then 11 (out of order: it
    // keeps the older IP ID it was sent with).
    push(1 + 11 * 1000, 11);
    push(1 + 12 * 1000, 12);
    push(1 + 10 * 1000, 10);
    // A retransmission of segment 5 (a new ID): the capture saw the
    // original, so it was lost after the capture point.
    push(1 + 5 * 1000, 13);
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    let f = &a.report.flows[0];
    assert_eq!(f.out_of_order, 1);
    assert_eq!(f.retransmissions, 1);
    let t = f.tcp.as_ref().unwrap();
    assert_eq!(t.loss.reordered_before_capture, 1);
    assert_eq!(t.loss.lost_after_capture, 1);
    assert_eq!(t.loss.lost_before_capture, 0);
    // Wireshark's timing rule (within 3 ms of the highest segment, no
    // handshake RTT) calls both out-of-order.
    assert_eq!(t.wireshark.out_of_order, 2);
    assert_eq!(t.wireshark.lost_segments, 1);
    let fd = a
        .report
        .findings
        .iter()
        .find(|f| f.kind == "retransmissions")
        .unwrap();
    assert_eq!(fd.evidence.as_ref().unwrap().frames, vec![14, 13]);
}

#[test]
fn tso_sender_capture_is_recognised_from_id_steps_and_acks() {
    // Sender side: 10-segment super-packets leave, ACKs come back for
    // parts of them.
    let (_d, p) = tmp("tso.pcap");
    let mut frames = Vec::new();
    let mut t = 1_000_000u64;
    let mut id = 500u16;
    for k in 0..5u32 {
        let seq = 1 + k * 14480;
        frames.push((t, seg(seq, 14480, id, true)));
        id = id.wrapping_add(10);
        // The peer acknowledges every second wire segment: its ACKs land
        // inside the super-packet, which it never saw whole.
        for acked in [2896, 14480] {
            t += 100_000;
            let mut ack = FrameSpec::tcp4(B, A, TcpSpec::data(5201, 40000, 1));
            ack.tcp_mut().ack = seq + acked;
            frames.push((t, ack.build()));
        }
        t += 5_000;
    }
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    let f = a.report.flows.iter().find(|f| f.sport == 40000).unwrap();
    assert_eq!(f.above_mtu.packets, 5);
    assert_eq!(f.above_mtu.mss_from_ip_id, Some(1448));
    assert_eq!(f.above_mtu.segments_from_ip_id, Some(10.0));
    assert_eq!(
        f.above_mtu.interpretation,
        offload_analyze::flow::BigPacketSide::SenderTso
    );
}

#[test]
fn several_files_keep_their_own_frame_numbers_and_cancel_reports_partial() {
    let d = tempfile::tempdir().unwrap();
    let p1 = d.path().join("a.pcap");
    let p2 = d.path().join("b.pcapng");
    let f1: Vec<(u64, Vec<u8>)> = (0..30u32)
        .map(|i| (1_000 + i as u64, seg(1 + i * 100, 100, i as u16, true)))
        .collect();
    write(&p1, &f1);
    write(&p2, &f1[..10]);
    let a = run(&[p1.clone(), p2.clone()], &Options::default());
    assert_eq!(a.report.inputs.len(), 2);
    assert_eq!(a.report.inputs[0].frames, 30);
    assert_eq!(a.report.inputs[1].frames, 10);
    assert_eq!(a.report.flows.len(), 2);
    assert_eq!(a.report.what_if[0].frames_in, 40);
    // JSON has the documented top-level keys.
    let v = serde_json::to_value(&a.report).unwrap();
    for k in [
        "flows", "findings", "what_if", "schema", "inputs", "settings",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    // Cancelled before the first frame: an interrupted, empty report.
    let cancel = AtomicBool::new(true);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let big: Vec<(u64, Vec<u8>)> = (0..2000u32)
        .map(|i| (1_000 + i as u64, seg(1 + i * 100, 100, i as u16, true)))
        .collect();
    let p3 = d.path().join("c.pcap");
    write(&p3, &big);
    let r = analyze(&[p3], &Options::default(), &mut ctl).unwrap();
    assert!(r.report.interrupted);
    assert!(r.report.inputs[0].frames < 2000);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let e = analyze(
        &[PathBuf::from("/nonexistent/x.pcap")],
        &Options::default(),
        &mut ctl,
    )
    .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.pcap"), "{e}");
}

#[test]
fn gro_receiver_capture_is_recognised_from_aligned_acks() {
    // Receiver side: the local stack acknowledges each merged packet whole,
    // microseconds after it arrived.
    let (_d, p) = tmp("gro.pcap");
    let mut frames = Vec::new();
    let mut t = 1_000_000u64;
    for k in 0..5u32 {
        let seq = 1 + k * 14480;
        frames.push((t, seg(seq, 14480, 500 + 10 * k as u16, true)));
        let mut ack = FrameSpec::tcp4(B, A, TcpSpec::data(5201, 40000, 1));
        ack.tcp_mut().ack = seq + 14480;
        frames.push((t + 3_000, ack.build()));
        t += 150_000;
    }
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    let f = a.report.flows.iter().find(|f| f.sport == 40000).unwrap();
    assert_eq!(
        f.above_mtu.interpretation,
        offload_analyze::flow::BigPacketSide::ReceiverGro
    );
}

#[test]
fn a_bad_checksum_is_judged_the_same_for_every_size() {
    // Only the first engine verifies checksums; the others take its verdict.
    let (_d, p) = tmp("badsum.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..40u32)
        .map(|i| {
            let mut s = FrameSpec::tcp4(A, B, TcpSpec::data(40000, 5201, 1 + i * 1448))
                .payload(vec![7; 1448]);
            s.v4_mut().id = i as u16;
            s.tcp_mut().corrupt_checksum = i == 17;
            (1_000_000 + i as u64 * 1000, s.build())
        })
        .collect();
    write(&p, &frames);
    let both = run(std::slice::from_ref(&p), &Options::default());
    let alone = run(
        &[p],
        &Options {
            gro_sizes: vec![185000],
            ..Options::default()
        },
    );
    let (b, a) = (
        &both.report.flows[0].what_if[1],
        &alone.report.flows[0].what_if[0],
    );
    assert_eq!(b.stack_packets, a.stack_packets);
    let bad = |w: &offload_analyze::report::FlowWhatIfReport| {
        w.reasons
            .iter()
            .find(|r| r.reason == "bad-checksum")
            .map(|r| (r.count, r.first_frame))
    };
    assert_eq!(bad(b), Some((1, 18)));
    assert_eq!(bad(a), Some((1, 18)));
    assert_eq!(bad(&both.report.flows[0].what_if[0]), Some((1, 18)));
    let f = both
        .report
        .findings
        .iter()
        .find(|f| f.kind == "bad-checksum")
        .unwrap();
    assert_eq!(f.evidence.as_ref().unwrap().frames, vec![18]);
}

/// Runs a 60-segment flow where `tweak(i, spec)` perturbs segment `i`.
fn perturbed(name: &str, tweak: impl Fn(u32, &mut FrameSpec)) -> Analysis {
    let (_d, p) = tmp(name);
    let frames: Vec<(u64, Vec<u8>)> = (0..60u32)
        .map(|i| {
            let mut s = FrameSpec::tcp4(A, B, TcpSpec::data(40000, 5201, 1 + i * 1448))
                .payload(vec![7; 1448]);
            s.v4_mut().id = i as u16;
            tweak(i, &mut s);
            (1_000_000 + i as u64 * 1000, s.build())
        })
        .collect();
    write(&p, &frames);
    run(&[p], &Options::default())
}

fn finding<'a>(a: &'a Analysis, kind: &str) -> &'a offload_report::Finding {
    a.report
        .findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| {
            panic!(
                "no {kind} finding in {:?}",
                a.report.findings.iter().map(|f| f.kind).collect::<Vec<_>>()
            )
        })
}

#[test]
fn window_churn_is_a_finding_with_the_first_frame() {
    let a = perturbed("win.pcap", |i, s| s.tcp_mut().window = 512 + (i / 5) as u16);
    let f = finding(&a, "window-churn");
    assert_eq!(f.evidence.as_ref().unwrap().frames, vec![6]);
    assert!(f.detail.contains("window changes 11 times"), "{}", f.detail);
}

#[test]
fn ttl_and_tos_churn_is_a_finding() {
    let a = perturbed("ttl.pcap", |i, s| {
        s.v4_mut().ttl = if i % 4 == 0 { 63 } else { 64 };
    });
    let f = finding(&a, "ttl-tos-churn");
    assert_eq!(f.evidence.as_ref().unwrap().frames, vec![2]);
    assert!(f.fix.as_deref().unwrap().contains("ECMP"), "{:?}", f.fix);
}

#[test]
fn option_churn_is_a_finding() {
    let a = perturbed("opt.pcap", |i, s| {
        // A SACK block appearing and disappearing.
        if i % 6 == 3 {
            s.tcp_mut().options = vec![1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        }
    });
    let f = finding(&a, "option-churn");
    assert_eq!(f.evidence.as_ref().unwrap().frames, vec![4]);
}

#[test]
fn bad_outer_udp_checksums_are_a_finding() {
    let (_d, p) = tmp("outer.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..20u32)
        .map(|i| {
            let inner = seg(1 + i * 1398, 1398, i as u16, true);
            let mut payload = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
            payload.extend_from_slice(&inner);
            let mut s =
                FrameSpec::udp4([192, 168, 1, 2], [192, 168, 1, 1], 33333, 4789).payload(payload);
            s.v4_mut().id = i as u16;
            if let offload::build::L4Spec::Udp(u) = &mut s.l4 {
                u.corrupt_checksum = i >= 10;
            }
            (1_000_000 + i as u64 * 1000, s.build())
        })
        .collect();
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    let f = finding(&a, "outer-udp-checksum");
    assert_eq!(f.severity, offload_report::Severity::High);
    assert_eq!(f.evidence.as_ref().unwrap().frames, vec![11]);
    assert!(f.detail.starts_with("10 of 20"), "{}", f.detail);
}

#[test]
fn bad_gre_checksums_are_a_finding_and_the_connection_inside_is_analysed() {
    let (_d, p) = tmp("gre.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..20u32)
        .map(|i| {
            let inner = seg(1 + i * 1398, 1398, i as u16, true);
            // GRE with checksum and key 7, then the inner IPv4 packet.
            let mut gre = vec![0xa0, 0, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 7];
            gre.extend_from_slice(&inner[14..]);
            let c = offload::checksum::checksum(&gre);
            gre[4..6].copy_from_slice(&c.to_be_bytes());
            if i >= 12 {
                gre[4] ^= 0x55;
            }
            let mut s = FrameSpec::udp4([192, 168, 1, 2], [192, 168, 1, 1], 0, 0).payload(gre);
            s.l4 = offload::build::L4Spec::Other(47);
            s.v4_mut().id = i as u16;
            (1_000_000 + i as u64 * 1000, s.build())
        })
        .collect();
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    assert_eq!(a.report.flows.len(), 1);
    let fl = &a.report.flows[0];
    let t = fl.tunnel.as_ref().expect("a GRE tunnel");
    assert_eq!((t.kind, t.gre_key, t.vni), ("gre", Some(7), None));
    assert_eq!((t.gre_checksum, t.outer_udp_checksum), ("mixed", "n/a"));
    assert_eq!(
        (t.gre_checksum_counts.valid, t.gre_checksum_counts.bad),
        (12, 8)
    );
    assert_eq!((fl.sport, fl.dport, fl.packets), (40000, 5201, 20));
    assert!(fl
        .description
        .starts_with("GRE 192.168.1.2 -> 192.168.1.1 (key 7), inner TCP"));
    let f = finding(&a, "gre-checksum");
    assert_eq!(f.evidence.as_ref().unwrap().frames, vec![13]);
    assert!(f.detail.starts_with("8 of 20"), "{}", f.detail);
    assert!(a
        .report
        .findings
        .iter()
        .all(|f| f.kind != "outer-udp-checksum"));
}

/// Pseudo-random IDs (a multiplicative hash): no order GRO could accept.
fn random_id(i: u32, salt: u32) -> u16 {
    (i.wrapping_add(salt.wrapping_mul(7919))
        .wrapping_mul(2_654_435_761)
        >> 13) as u16
}

/// How a header numbers its IPv4 IDs.
#[derive(Debug, Clone, Copy)]
enum Ids {
    Incrementing,
    Fixed,
    Random,
    /// A counter shared with other traffic: steps of 1 to 5.
    Global,
}

fn id_of(mode: Ids, i: u32, salt: u32) -> u16 {
    match mode {
        Ids::Incrementing => (1000 + i) as u16,
        Ids::Fixed => 77,
        Ids::Random => random_id(i, salt),
        Ids::Global => (i * 3 + (random_id(i, salt) % 3) as u32) as u16,
    }
}

/// A plain TCP flow with random IDs and DF clear, interleaved with a VXLAN
/// flow whose outer and inner headers number IDs as given.
fn mixed_capture(kernel: KernelLine, inner: (Ids, bool), outer: (Ids, bool)) -> Analysis {
    let (_d, p) = tmp("mixed.pcap");
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    for i in 0..300u32 {
        frames.push((
            1_000_000 + i as u64 * 2000,
            seg(1 + i * 1448, 1448, random_id(i, 1), false),
        ));
        let mut s = FrameSpec::tcp4(
            [10, 1, 0, 2],
            [10, 1, 0, 1],
            TcpSpec::data(40001, 5202, 1 + i * 1398),
        )
        .payload(vec![9; 1398]);
        s.v4_mut().id = id_of(inner.0, i, 2);
        s.v4_mut().df = inner.1;
        frames.push((
            1_000_500 + i as u64 * 2000,
            vxlan(&s.build(), id_of(outer.0, i, 3), outer.1, 33333),
        ));
    }
    write(&p, &frames);
    run(
        &[p],
        &Options {
            kernel,
            ..Options::default()
        },
    )
}

fn named(a: &Analysis, needle: &str) -> bool {
    a.report.findings.iter().any(|f| {
        f.kind == "ip-id-rule"
            && f.flow
                .as_ref()
                .is_some_and(|r| r.description.contains(needle))
    })
}

#[test]
fn a_broken_tcp_flow_and_a_broken_tunnel_in_one_capture_are_both_named() {
    use Ids::*;
    for (inner, outer, tunnel_broken, cause) in [
        (
            (Random, false),
            (Random, false),
            true,
            "outer and inner IP IDs random",
        ),
        (
            (Incrementing, true),
            (Random, false),
            true,
            "outer IP ID random",
        ),
        (
            (Random, false),
            (Incrementing, false),
            true,
            "inner IP ID random",
        ),
        ((Incrementing, true), (Incrementing, false), false, ""),
        ((Incrementing, true), (Fixed, false), false, ""),
    ] {
        let a = mixed_capture(KernelLine::V6_18, inner, outer);
        let ctx = format!("inner {inner:?} outer {outer:?}: {:#?}", a.report.findings);
        assert!(named(&a, "TCP 10.0.0.2:40000"), "{ctx}");
        assert_eq!(named(&a, "VXLAN 192.168.1.2:33333"), tunnel_broken, "{ctx}");
        let tunnel = a.report.flows.iter().find(|f| f.tunnel.is_some()).unwrap();
        let w = &tunnel.what_if[0];
        // 300 segments of 1398 bytes merge into 7 packets at 64 KiB once
        // the IDs are fixed, whatever they were.
        assert_eq!(w.healthy_tunnel_packets, Some(7), "{ctx}");
        if tunnel_broken {
            assert_eq!(w.stack_packets, 300, "{ctx}");
            let f = a
                .report
                .findings
                .iter()
                .find(|f| f.title.contains("VXLAN"))
                .unwrap();
            assert!(f.title.ends_with(&format!("({cause})")), "{}", f.title);
            assert!(f.detail.contains("300 instead of 7"), "{}", f.detail);
            assert_eq!(f.extra_packets, Some(293));
        } else {
            assert_eq!(w.stack_packets, 7, "{ctx}");
        }
    }
}

#[test]
fn the_healthy_tunnel_figure_never_exceeds_the_actual_one() {
    use Ids::*;
    let modes = [Incrementing, Fixed, Random, Global];
    for profile in KernelLine::ALL {
        for oi in modes {
            for ii in modes {
                for (odf, idf) in [(false, false), (true, true), (false, true), (true, false)] {
                    let a = mixed_capture(profile, (ii, idf), (oi, odf));
                    for f in a.report.flows.iter().filter(|f| f.tunnel.is_some()) {
                        for w in &f.what_if {
                            let h = w.healthy_tunnel_packets.unwrap();
                            assert!(
                                h <= w.stack_packets,
                                "kernel {profile} outer {oi:?} DF {odf} inner {ii:?} DF {idf}: healthy {h} > actual {}",
                                w.stack_packets
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_flow_cap_evicts_the_least_recently_active_into_other_flows_and_streams_their_rows() {
    let (d, p) = tmp("many.pcap");
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut ts = 1_000_000u64;
    // One long flow stays active throughout; 500 two-segment flows pass by.
    let mut long_seq = 1u32;
    for i in 0..500u32 {
        for k in 0..2u32 {
            let mut s = FrameSpec::tcp4(
                [10, 9, (i >> 8) as u8, i as u8],
                B,
                TcpSpec::data(20000, 443, 1 + k * 100),
            )
            .payload(vec![1; 100]);
            s.v4_mut().id = k as u16;
            frames.push((ts, s.build()));
            ts += 1000;
        }
        frames.push((ts, seg(long_seq, 1448, i as u16, true)));
        long_seq += 1448;
        ts += 1000;
    }
    write(&p, &frames);
    let csv = d.path().join("csv");
    std::fs::create_dir_all(&csv).unwrap();
    let opts = Options {
        max_flows: 64,
        evicted_csv: Some(offload_analyze::export::evicted_path(&csv)),
        ..Options::default()
    };
    let a = run(std::slice::from_ref(&p), &opts);
    let uncapped = run(&[p], &Options::default());
    let r = &a.report;
    assert!(r.flows.len() <= 64, "{}", r.flows.len());
    assert_eq!(r.flows.len() as u64 + r.other_flows.flows, 501);
    let packets: u64 = r.flows.iter().map(|f| f.packets).sum::<u64>() + r.other_flows.packets;
    assert_eq!(packets, 1500);
    assert_eq!(r.what_if[0].frames_in, 1500);
    // The long flow was never the least recently active: kept whole, with
    // its what-if over all its frames.
    let long = r
        .flows
        .iter()
        .find(|f| f.dport == 5201)
        .expect("the long flow is kept");
    assert_eq!(long.packets, 500);
    assert_eq!(long.what_if[0].frames, 500);
    let long_uncapped = uncapped
        .report
        .flows
        .iter()
        .find(|f| f.dport == 5201)
        .unwrap();
    assert_eq!(
        long.what_if[0].stack_packets,
        long_uncapped.what_if[0].stack_packets
    );
    assert_eq!(
        r.what_if[0].stack_packets,
        uncapped.report.what_if[0].stack_packets
    );
    assert_eq!(uncapped.report.other_flows.flows, 0);
    // flows.csv lists every flow: kept ones, then the evicted ones' rows.
    offload_analyze::export::write_flows_csv(r, &csv).unwrap();
    let text = std::fs::read_to_string(csv.join("flows.csv")).unwrap();
    assert_eq!(text.lines().count(), 1 + 501);
    assert!(!offload_analyze::export::evicted_path(&csv).exists());
    let text_report = offload_analyze::text::render(r, 5);
    assert!(text_report.contains("other flows"), "{text_report}");
}

/// A flow seen after GRO: super-packets of 4 segments whose IDs step by 4
/// (each carries its first segment's ID) draw no IP ID finding; the same
/// super-packets among wire-sized segments with random IDs and DF clear
/// (a sender GRO cannot merge) still do.
#[test]
fn super_packet_id_steps_are_not_blamed_but_random_ids_beside_them_are() {
    let (_d, p) = tmp("after-gro.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..100u32)
        .map(|i| {
            (
                1_000_000 + i as u64 * 4000,
                seg(1 + i * 4 * 1448, 4 * 1448, (500 + 4 * i) as u16, true),
            )
        })
        .collect();
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    assert!(a.report.findings.iter().any(|f| f.kind == "above-mtu"));
    assert!(!named(&a, "40000"), "{:?}", a.report.findings);

    let (_d, p) = tmp("after-gro-random.pcap");
    let mut seq = 1;
    let frames: Vec<(u64, Vec<u8>)> = (0..200u32)
        .map(|i| {
            let len = if i % 10 == 0 { 4 * 1448 } else { 1448 };
            let f = seg(seq, len, random_id(i, 5), false);
            seq += len as u32;
            (1_000_000 + i as u64 * 1000, f)
        })
        .collect();
    write(&p, &frames);
    let a = run(&[p], &Options::default());
    assert!(a.report.findings.iter().any(|f| f.kind == "above-mtu"));
    assert!(named(&a, "40000"), "{:?}", a.report.findings);
}
