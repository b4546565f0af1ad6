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

/// Loss or reordering: events counted on either side of the capture point,
/// told as one finding per flow direction (the two kinds differ only in
/// their words, counts and fix).
struct TwoSided {
    kind: &'static str,
    /// "lost", "reordered".
    verb: &'static str,
    /// Events before and after the capture point, with the first frame of
    /// each.
    before: (u64, Option<u64>),
    after: (u64, Option<u64>),
    detail: String,
    /// Evidence counts beside the two sides' (named `<verb>_before_capture`
    /// and `<verb>_after_capture`) and the data segments.
    counts: Vec<(String, u64)>,
    fix: String,
}

fn two_sided(
    out: &mut Vec<Finding>,
    f: &FlowStats,
    r: &FlowReport,
    data: u64,
    file_name: &dyn Fn(usize) -> String,
    e: TwoSided,
) {
    let n = e.before.0 + e.after.0;
    if n == 0 {
        return;
    }
    let share = n as f64 / data.max(1) as f64;
    let place = match (e.before.0 > 0, e.after.0 > 0) {
        (true, false) => "before the capture point",
        (false, true) => "after the capture point",
        _ => "on both sides of the capture point",
    };
    let mut counts = vec![
        (format!("{}_before_capture", e.verb), e.before.0),
        (format!("{}_after_capture", e.verb), e.after.0),
    ];
    counts.extend(e.counts);
    counts.push(("data_segments".into(), data));
    out.push(Finding {
        rank: 0,
        severity: if share >= MEDIUM_SHARE {
            Severity::Medium
        } else {
            Severity::Info
        },
        kind: e.kind,
        flow: Some(flow_ref(r)),
        title: format!(
            "{}: {n} segments {} {place} ({:.2}% of {data})",
            r.description,
            e.verb,
            share * 100.0
        ),
        detail: e.detail,
        evidence: Some(Evidence {
            file: file_name(f.file),
            frames: frames(&[e.before.1, e.after.1]),
            counts,
        }),
        fix: Some(e.fix),
        extra_packets: None,
        device: None,
        kernel: None,
        citation: None,
    });
}

fn first_frame(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
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
    let mut fix = Vec::new();
    if l.lost_before_capture > 0 {
        fix.push("before the capture point (between the sender and here): the sender's qdisc and NIC (`tc -s qdisc`, `ethtool -S`: tx drops), then each hop up to the capture point");
    }
    if l.lost_after_capture > 0 {
        fix.push("after the capture point (between here and the receiver): the receiver's NIC ring (`ethtool -S`: rx_missed_errors, rx_fifo_errors; `ethtool -G` to grow it), its backlog (`nstat TcpExtTCPBacklogDrop`), or a congested link downstream");
    }
    let e = TwoSided {
        kind: "loss",
        verb: "lost",
        before: (l.lost_before_capture, d.first.lost_before_capture),
        after: (l.lost_after_capture, d.first.lost_after_capture),
        detail: format!(
            "{} retransmissions filled gaps in the capture (the originals never reached the capture point; first at frame {}), {} resent segments the capture had seen (lost after it; first at frame {}); {} spurious retransmissions (already acknowledged, or reported in a D-SACK) are not counted as loss.",
            l.lost_before_capture,
            first_frame(d.first.lost_before_capture),
            l.lost_after_capture,
            first_frame(d.first.lost_after_capture),
            l.spurious
        ),
        counts: vec![("spurious".into(), l.spurious)],
        fix: format!("look for the drop {}", fix.join("; and ")),
    };
    two_sided(out, f, r, data, file_name, e);
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
    let e = TwoSided {
        kind: "reordering",
        verb: "reordered",
        before: (l.reordered_before_capture, d.first.reordered_before_capture),
        after: (l.reordered_after_capture, d.first.reordered_after_capture),
        detail: format!(
            "{} segments reached the capture point after later ones and were originals, not retransmissions (older IP ID or timestamp; first at frame {}); {} times the receiver reported a hole the capture did not have and then acknowledged it without a retransmission (first at frame {}). Reordering ends GRO runs and can trigger spurious retransmissions.",
            l.reordered_before_capture,
            first_frame(d.first.reordered_before_capture),
            l.reordered_after_capture,
            first_frame(d.first.reordered_after_capture),
        ),
        counts: Vec::new(),
        fix: "find the path that reorders: per-packet load balancing (ECMP or LAG hashing per packet, not per flow), multi-queue links without flow steering (RPS/RFS, XPS), or a hop that resequences".into(),
    };
    two_sided(out, f, r, data, file_name, e);
}
