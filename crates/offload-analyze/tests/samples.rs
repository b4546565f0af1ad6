//! `offload analyze` on the bundled samples (samples/*.pcapng, made by
//! scripts/make-samples.sh from real kernel traffic in namespaces): each
//! sample must be explained the way its scenario was set up.

use offload_analyze::flow::BigPacketSide;
use offload_analyze::{analyze, Analysis, Options};
use offload_capture::Control;
use offload_report::Severity;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
}

fn run(names: &[&str]) -> Analysis {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let paths: Vec<PathBuf> = names.iter().map(|n| sample(n)).collect();
    analyze(&paths, &Options::default(), &mut ctl).unwrap()
}

/// The flow carrying most payload.
fn main_flow(a: &Analysis) -> &offload_analyze::report::FlowReport {
    a.report
        .flows
        .iter()
        .max_by_key(|f| f.payload_bytes)
        .unwrap()
}

#[test]
fn broken_vxlan_flow_is_the_headline_with_cause_and_frames() {
    let a = run(&["vxlan-broken.pcapng"]);
    let top = &a.report.findings[0];
    assert_eq!(top.kind, "ip-id-rule");
    assert_eq!(top.severity, Severity::High);
    let flow = top.flow.as_ref().unwrap();
    let tunnel = flow.tunnel.as_deref().unwrap();
    assert!(tunnel.starts_with("vxlan 10.77.0.1:"), "{tunnel}");
    assert!(tunnel.contains("-> 10.77.0.2:4789 vni 42"), "{tunnel}");
    assert!(
        top.detail
            .contains("outer IPv4 DF=0 and IP ID not incrementing"),
        "{}",
        top.detail
    );
    assert!(top.evidence.as_ref().unwrap().frames.len() >= 3);
    let f = &a.report.flows[flow.id];
    let w = &f.what_if[0];
    // Nothing merges; a healthy tunnel would merge more than ten to one.
    assert_eq!(w.stack_packets, w.frames);
    assert!(w.healthy_tunnel_packets.unwrap() * 10 < w.frames);
    assert!(w.reasons.iter().any(|r| r.reason == "outer-ip-id-mismatch"));
}

#[test]
fn bigtcp_gain_is_named() {
    let a = run(&["bigtcp.pcapng"]);
    let g = a
        .report
        .findings
        .iter()
        .find(|f| f.kind == "big-tcp-gain")
        .unwrap();
    assert!(g.title.contains("would cut"), "{}", g.title);
    assert!(g.title.contains("[fd77::1]"), "{}", g.title);
    let f = main_flow(&a);
    assert!(f.what_if[1].stack_packets < f.what_if[0].stack_packets);
    assert!(f.what_if[0]
        .reasons
        .iter()
        .any(|r| r.reason == "size-limit"));
}

#[test]
fn tso_sender_and_gro_receiver_are_told_apart() {
    let a = run(&["tso-sender.pcapng"]);
    assert_eq!(
        main_flow(&a).above_mtu.interpretation,
        BigPacketSide::SenderTso
    );
    let a = run(&["gro-receiver.pcapng"]);
    assert_eq!(
        main_flow(&a).above_mtu.interpretation,
        BigPacketSide::ReceiverGro
    );
    let a = run(&["bigtcp-sender.pcapng"]);
    let f = main_flow(&a);
    assert_eq!(f.above_mtu.interpretation, BigPacketSide::SenderTso);
    assert!(f.above_mtu.largest_ip_len > 65535);
    assert!(f.above_mtu.length_field_zero > 0);
}

#[test]
fn healthy_flow_has_no_problem_and_merges() {
    let a = run(&["healthy-tcp.pcapng"]);
    assert!(a
        .report
        .findings
        .iter()
        .all(|f| f.severity == Severity::Info));
    let f = main_flow(&a);
    assert_eq!(f.retransmissions, 0);
    assert_eq!(f.above_mtu.packets, 0);
    assert_eq!(f.l4_checksum, "offloaded");
    assert!(
        f.what_if[0].merge_ratio > 10.0,
        "{}",
        f.what_if[0].merge_ratio
    );
    assert!(a.report.inputs[0].checksums_offloaded);
}

#[test]
fn html_report_of_the_samples_is_self_contained_with_graph_data() {
    let a = run(&["healthy-tcp.pcapng", "vxlan-broken.pcapng"]);
    let html = offload_analyze::html::render_with(&a, "offload analyze x.pcap --html r.html");
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Nothing fetched from the network: no URL, no external script or style.
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(!html.contains("<script src") && !html.contains("<link"));
    assert!(html.contains("offload analyze x.pcap --html r.html"));
    assert!(html.contains(env!("CARGO_PKG_VERSION")));
    // One data block per graphed flow, with segments and ACKs.
    let blocks = html.matches("class=\"graph-data\"").count();
    assert!(blocks >= 2, "{blocks}");
    assert!(html.contains("\"ack\":"));
    assert!(html.contains("\"segments\":"));
    assert!(html.contains("GRO cannot merge"));
}

/// A capture taken after the receiver's GRO, at full snap length, made by
/// Linux 6.18 in two namespaces (sender `va`: TSO/GSO off; receiver `vb`:
/// GRO on, `gro_max_size 8000` to keep the file small; `tcpdump -i any -s 0
/// -c 80` in the receiver's namespace during `offload bench tcp-stream`).
/// Each super-packet's IPv4 ID is its first segment's, so consecutive IDs
/// step by the previous packet's segment count (57859, 57864, ...): the
/// sender's IDs are healthy and the packets are already merged, so no IP ID
/// finding may blame them (it did, as in `offload inspect --sample`).
#[test]
fn capture_after_gro_does_not_blame_the_ip_id_rule() {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/veth-gro-receiver-full.pcap");
    let a = analyze(&[path], &Options::default(), &mut ctl).unwrap();
    let f = main_flow(&a);
    assert_eq!(f.above_mtu.interpretation, BigPacketSide::ReceiverGro);
    assert!(f.above_mtu.packets > 40, "{}", f.above_mtu.packets);
    let kinds: Vec<_> = a
        .report
        .findings
        .iter()
        .map(|x| (x.kind, &x.title))
        .collect();
    assert!(
        a.report.findings.iter().all(|x| x.kind != "ip-id-rule"),
        "{kinds:?}"
    );
    assert!(
        a.report.findings.iter().any(|x| x.kind == "above-mtu"),
        "{kinds:?}"
    );
}
