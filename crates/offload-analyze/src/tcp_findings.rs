//! Findings from the TCP analysis: a receiver that stops reading (zero
//! window), loss with where it happened, and reordering. They join the GRO
//! findings in one ranking (severity, then the extra packets they cost).

use crate::findings::flow_ref;
use crate::flow::FlowStats;
use crate::report::FlowReport;
use crate::tcp::TcpDirection;
use offload_report::{Evidence, Finding, Severity};

/// Loss or reordering on this share of the data segments or more is medium.
const MEDIUM_SHARE: f64 = 0.01;
/// A zero window held this long in all (or this share of the flow) is medium.
const MEDIUM_STALL_S: f64 = 0.2;
const MEDIUM_STALL_SHARE: f64 = 0.05;

fn frames(v: &[Option<u64>]) -> Vec<u64> {
    let mut f: Vec<u64> = v.iter().flatten().copied().collect();
    f.sort_unstable();
    f.dedup();
    f
}

fn list(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// Adds the TCP findings of every flow to `out` and ranks them all.
pub fn add(
    out: &mut Vec<Finding>,
    flows: &[FlowStats],
    reports: &[FlowReport],
    file_name: &dyn Fn(usize) -> String,
) {
    for (f, r) in flows.iter().zip(reports) {
        let Some(d) = f.analysis.as_deref() else {
            continue;
        };
        let data = f.tcp.as_ref().map_or(0, |t| t.data_segments);
        zero_window(out, f, r, d, file_name);
        loss(out, f, r, d, data, file_name);
        reordering(out, f, r, d, data, file_name);
    }
    offload_report::rank(out);
}

fn zero_window(
    out: &mut Vec<Finding>,
    f: &FlowStats,
    r: &FlowReport,
    d: &TcpDirection,
    file_name: &dyn Fn(usize) -> String,
) {
    if d.zero_window_episodes == 0 {
        return;
    }
    let stall = d.zero_window_total_ns() as f64 / 1e9;
    let dur = f.duration_ns() as f64 / 1e9;
    let medium = stall >= MEDIUM_STALL_S || (dur > 0.0 && stall / dur >= MEDIUM_STALL_SHARE);
    let ev = frames(&[d.first.zero_window]);
    out.push(Finding {
        rank: 0,
        severity: if medium { Severity::Medium } else { Severity::Info },
        kind: "zero-window",
        flow: Some(flow_ref(r)),
        title: format!(
            "{} stopped reading: its receive window fell to zero {} time(s), {:.3} s in all",
            r.src, d.zero_window_episodes, stall
        ),
        detail: format!(
            "{} advertised a zero window on {} segments (first at frame {}), so its peer could not send for {:.3} s of the flow's {:.3} s ({} zero-window probes answered). The network is not the bottleneck here: the receiving application is.",
            r.description,
            d.ws.zero_windows,
            list(&ev),
            stall,
            dur,
            d.ws.zero_window_probe_acks
        ),
        evidence: Some(Evidence {
            file: file_name(f.file),
            frames: ev,
            counts: vec![
                ("zero_windows".into(), d.ws.zero_windows),
                ("zero_window_episodes".into(), d.zero_window_episodes),
                ("zero_window_probe_acks".into(), d.ws.zero_window_probe_acks),
                ("stall_ms".into(), (stall * 1e3) as u64),
            ],
        }),
        fix: Some(format!(
            "make the application on {} read faster or sooner (a blocked or starved reader thread; `ss -tmi` shows its Recv-Q), or give it a larger receive buffer (net.ipv4.tcp_rmem, SO_RCVBUF)",
            r.src
        )),
        extra_packets: None,
        device: None,
        kernel: None,
        citation: None,
    });
}

fn loss(
    out: &mut Vec<Finding>,
    f: &FlowStats,
    r: &FlowReport,
    d: &TcpDirection,
    data: u64,
    file_name: &dyn Fn(usize) -> String,
) {
    let l = &d.loss;
    let lost = l.lost_before_capture + l.lost_after_capture;
    if lost == 0 {
        return;
    }
    let share = lost as f64 / data.max(1) as f64;
    let place = match (l.lost_before_capture > 0, l.lost_after_capture > 0) {
        (true, false) => "before the capture point",
        (false, true) => "after the capture point",
        _ => "on both sides of the capture point",
    };
    let ev = frames(&[d.first.lost_before_capture, d.first.lost_after_capture]);
    let mut fix = Vec::new();
    if l.lost_before_capture > 0 {
        fix.push("before the capture point (between the sender and here): the sender's qdisc and NIC (`tc -s qdisc`, `ethtool -S`: tx drops), then each hop up to the capture point".to_string());
    }
    if l.lost_after_capture > 0 {
        fix.push("after the capture point (between here and the receiver): the receiver's NIC ring (`ethtool -S`: rx_missed_errors, rx_fifo_errors; `ethtool -G` to grow it), its backlog (`nstat TcpExtTCPBacklogDrop`), or a congested link downstream".to_string());
    }
    out.push(Finding {
        rank: 0,
        severity: if share >= MEDIUM_SHARE {
            Severity::Medium
        } else {
            Severity::Info
        },
        kind: "loss",
        flow: Some(flow_ref(r)),
        title: format!(
            "{}: {lost} segments lost {place} ({:.2}% of {data})",
            r.description,
            share * 100.0
        ),
        detail: format!(
            "{} retransmissions filled gaps in the capture (the originals never reached the capture point; first at frame {}), {} resent segments the capture had seen (lost after it; first at frame {}); {} spurious retransmissions (already acknowledged, or reported in a D-SACK) are not counted as loss.",
            l.lost_before_capture,
            d.first.lost_before_capture.map_or("-".into(), |v| v.to_string()),
            l.lost_after_capture,
            d.first.lost_after_capture.map_or("-".into(), |v| v.to_string()),
            l.spurious
        ),
        evidence: Some(Evidence {
            file: file_name(f.file),
            frames: ev,
            counts: vec![
                ("lost_before_capture".into(), l.lost_before_capture),
                ("lost_after_capture".into(), l.lost_after_capture),
                ("spurious".into(), l.spurious),
                ("data_segments".into(), data),
            ],
        }),
        fix: Some(format!("look for the drop {}", fix.join("; and "))),
        extra_packets: None,
        device: None,
        kernel: None,
        citation: None,
    });
}

fn reordering(
    out: &mut Vec<Finding>,
    f: &FlowStats,
    r: &FlowReport,
    d: &TcpDirection,
    data: u64,
    file_name: &dyn Fn(usize) -> String,
) {
    let l = &d.loss;
    let n = l.reordered_before_capture + l.reordered_after_capture;
    if n == 0 {
        return;
    }
    let share = n as f64 / data.max(1) as f64;
    let place = match (
        l.reordered_before_capture > 0,
        l.reordered_after_capture > 0,
    ) {
        (true, false) => "before the capture point",
        (false, true) => "after the capture point",
        _ => "on both sides of the capture point",
    };
    let ev = frames(&[
        d.first.reordered_before_capture,
        d.first.reordered_after_capture,
    ]);
    out.push(Finding {
        rank: 0,
        severity: if share >= MEDIUM_SHARE {
            Severity::Medium
        } else {
            Severity::Info
        },
        kind: "reordering",
        flow: Some(flow_ref(r)),
        title: format!(
            "{}: {n} segments reordered {place} ({:.2}% of {data})",
            r.description,
            share * 100.0
        ),
        detail: format!(
            "{} segments reached the capture point after later ones and were originals, not retransmissions (older IP ID or timestamp; first at frame {}); {} times the receiver reported a hole the capture did not have and then acknowledged it without a retransmission (first at frame {}). Reordering ends GRO runs and can trigger spurious retransmissions.",
            l.reordered_before_capture,
            d.first.reordered_before_capture.map_or("-".into(), |v| v.to_string()),
            l.reordered_after_capture,
            d.first.reordered_after_capture.map_or("-".into(), |v| v.to_string()),
        ),
        evidence: Some(Evidence {
            file: file_name(f.file),
            frames: ev,
            counts: vec![
                ("reordered_before_capture".into(), l.reordered_before_capture),
                ("reordered_after_capture".into(), l.reordered_after_capture),
                ("data_segments".into(), data),
            ],
        }),
        fix: Some("find the path that reorders: per-packet load balancing (ECMP or LAG hashing per packet, not per flow), multi-queue links without flow steering (RPS/RFS, XPS), or a hop that resequences".into()),
        extra_packets: None,
        device: None,
        kernel: None,
        citation: None,
    });
}
