//! Which hop: the same traffic captured at several points (`offload
//! analyze a.pcap b.pcap c.pcap`, in path order). Flows are matched across
//! captures by their inner (or only) 5-tuple, which a hop that rewrites a
//! tunnel's outer header leaves alone; for each, what changed from one
//! capture point to the next (IP ID pattern, DF, TTL, TOS, checksums, MSS
//! and sizes, the GRO figure) and the first point where it stops being
//! mergeable: the hop before it did the damage.

use crate::report::{FlowReport, HopPoint, HopReport, InputReport};
use offload_report::{Evidence, Finding, Severity};

/// The inner (or only) 5-tuple: protocol, source, source port,
/// destination, destination port.
type ConnKey<'a> = (&'a str, &'a str, u16, &'a str, u16);

/// "TCP 10.0.0.2:33333 -> 10.0.0.1:80", an IPv6 address in brackets, as
/// `flows[].description` writes an endpoint (`dissect::fmt_endpoint`),
/// so a hop names its flow as the flows of each capture do (it wrote
/// "fd00:213::1:47472", neither the description nor readable).
fn conn_label(key: &ConnKey<'_>) -> String {
    let ep = |a: &str, p: u16| {
        if a.contains(':') {
            format!("[{a}]:{p}")
        } else {
            format!("{a}:{p}")
        }
    };
    format!(
        "{} {} -> {}",
        key.0.to_uppercase(),
        ep(key.1, key.2),
        ep(key.3, key.4)
    )
}

/// High findings that stop GRO for a flow.
const BLOCKING: [&str; 5] = [
    "ip-id-rule",
    "bad-checksum",
    "outer-udp-checksum",
    "gre-checksum",
    "big-tcp-ipv6-tunnel",
];

fn point(f: &FlowReport, findings: &[Finding]) -> HopPoint {
    let blocked_by: Vec<&'static str> = findings
        .iter()
        .filter(|x| {
            x.severity == Severity::High
                && BLOCKING.contains(&x.kind)
                && x.flow.as_ref().is_some_and(|r| r.id == f.id)
        })
        .map(|x| x.kind)
        .collect();
    let t = f.tunnel.as_ref();
    let w = f.what_if.first();
    HopPoint {
        capture: f.file.clone(),
        flow_id: f.id,
        packets: f.packets,
        ip_id_pattern: crate::kernel::pattern_key(f.ip.ip_id_pattern),
        df: f.ip.df,
        ttl: f.ip.ttl,
        tos: f.ip.tos,
        outer_ip_id_pattern: t.map(|t| crate::kernel::pattern_key(t.outer_ip.ip_id_pattern)),
        outer_df: t.map(|t| t.outer_ip.df),
        outer_ttl: t.map(|t| t.outer_ip.ttl),
        outer_tos: t.map(|t| t.outer_ip.tos),
        l4_checksum: f.l4_checksum,
        outer_udp_checksum: t.map(|t| t.outer_udp_checksum),
        observed_mss: f.observed_mss,
        largest_ip_len: f.above_mtu.largest_ip_len,
        stack_packets: w.map_or(0, |w| w.stack_packets),
        healthy_tunnel_packets: w.and_then(|w| w.healthy_tunnel_packets),
        mergeable: blocked_by.is_empty(),
        blocked_by,
    }
}

/// What differs between two points of one flow, in words.
fn differences(a: &HopPoint, b: &HopPoint) -> Vec<String> {
    let mut d = Vec::new();
    let mut cmp = |what: &str, x: String, y: String| {
        if x != y {
            d.push(format!("{what} {x} -> {y}"));
        }
    };
    let opt = |v: Option<&str>| v.unwrap_or("-").to_string();
    cmp(
        "outer IP ID",
        opt(a.outer_ip_id_pattern),
        opt(b.outer_ip_id_pattern),
    );
    cmp("outer DF", opt(a.outer_df), opt(b.outer_df));
    cmp("outer TTL", dash(a.outer_ttl), dash(b.outer_ttl));
    cmp("outer TOS", dash(a.outer_tos), dash(b.outer_tos));
    cmp(
        "outer UDP checksum",
        opt(a.outer_udp_checksum),
        opt(b.outer_udp_checksum),
    );
    cmp("IP ID", a.ip_id_pattern.into(), b.ip_id_pattern.into());
    cmp("DF", a.df.into(), b.df.into());
    cmp("TTL", a.ttl.to_string(), b.ttl.to_string());
    cmp("TOS", a.tos.to_string(), b.tos.to_string());
    cmp("checksum", a.l4_checksum.into(), b.l4_checksum.into());
    cmp("MSS", dash(a.observed_mss), dash(b.observed_mss));
    cmp(
        "largest IP packet",
        a.largest_ip_len.to_string(),
        b.largest_ip_len.to_string(),
    );
    cmp(
        "GRO stack packets",
        a.stack_packets.to_string(),
        b.stack_packets.to_string(),
    );
    cmp(
        "mergeable",
        if a.mergeable { "yes" } else { "no" }.into(),
        if b.mergeable { "yes" } else { "no" }.into(),
    );
    d
}

/// Compares the flows seen in more than one of `inputs` and adds a high
/// `hop` finding for each flow that stops being mergeable between two
/// capture points (the findings are then ranked again).
pub fn compare(
    inputs: &[InputReport],
    flows: &[FlowReport],
    findings: &mut Vec<Finding>,
) -> Vec<HopReport> {
    if inputs.len() < 2 {
        return Vec::new();
    }
    let order = |file: &str| {
        inputs
            .iter()
            .position(|i| i.path == file)
            .unwrap_or(usize::MAX)
    };
    // Group by the inner 5-tuple, in order of first appearance (a map
    // from key to group: captures with many flows each stay linear).
    // Only TCP and UDP: GRO merges nothing else, and what else two
    // captures share is mostly a host's own link-local chatter (neighbour
    // discovery, MLD reports), never the same traffic at two points.
    let mut groups: Vec<(ConnKey<'_>, Vec<&FlowReport>)> = Vec::new();
    let mut index: std::collections::HashMap<ConnKey<'_>, usize> = std::collections::HashMap::new();
    for f in flows.iter().filter(|f| matches!(f.protocol, "tcp" | "udp")) {
        let key = (f.protocol, f.src.as_str(), f.sport, f.dst.as_str(), f.dport);
        match index.get(&key) {
            Some(&g) => groups[g].1.push(f),
            None => {
                index.insert(key, groups.len());
                groups.push((key, vec![f]));
            }
        }
    }
    let mut hops = Vec::new();
    let mut added = Vec::new();
    for (key, mut group) in groups {
        group.sort_by_key(|f| (order(&f.file), std::cmp::Reverse(f.packets)));
        // One flow per capture: the busiest.
        group.dedup_by_key(|f| order(&f.file));
        if group.len() < 2 {
            continue;
        }
        let points: Vec<HopPoint> = group.iter().map(|f| point(f, findings)).collect();
        let mut changes = Vec::new();
        let mut first_unmergeable = None;
        for pair in points.windows(2) {
            let d = differences(&pair[0], &pair[1]);
            if !d.is_empty() {
                changes.push(format!(
                    "{} -> {}: {}",
                    pair[0].capture,
                    pair[1].capture,
                    d.join(", ")
                ));
            }
            if first_unmergeable.is_none() && pair[0].mergeable && !pair[1].mergeable {
                first_unmergeable = Some(pair[1].capture.clone());
                let f = group.iter().find(|f| f.file == pair[1].capture).unwrap();
                let flow = conn_label(&key);
                let mut finding = Finding::new(
                    Severity::High,
                    "hop",
                    format!(
                        "{flow}: mergeable at {} but not at {}: the hop between them breaks GRO",
                        pair[0].capture, pair[1].capture
                    ),
                    format!(
                        "{flow} is mergeable where {} captured it ({} stack packets) and not where {} did ({} stack packets, {}); between them: {}.",
                        pair[0].capture,
                        pair[0].stack_packets,
                        pair[1].capture,
                        pair[1].stack_packets,
                        pair[1].blocked_by.join(", "),
                        d.join(", ")
                    ),
                )
                .with_flow(crate::findings::flow_ref(f))
                .with_evidence(Evidence {
                    file: pair[1].capture.clone(),
                    frames: vec![f.first_frame],
                    counts: vec![
                        ("stack_packets_before".into(), pair[0].stack_packets),
                        ("stack_packets_after".into(), pair[1].stack_packets),
                    ],
                })
                .with_fix("look at the hop between these two capture points: what it changes (listed) is what stops GRO at the receiver");
                let extra = pair[1].stack_packets.saturating_sub(pair[0].stack_packets);
                if extra > 0 {
                    finding = finding.with_extra_packets(extra);
                }
                added.push(finding);
            }
        }
        hops.push(HopReport {
            flow: conn_label(&key),
            points,
            changes,
            first_unmergeable,
        });
    }
    // Flows that stop being mergeable first.
    hops.sort_by_key(|h: &HopReport| h.first_unmergeable.is_none());
    if !added.is_empty() {
        findings.extend(added);
        offload_report::rank(findings);
    }
    hops
}

/// A figure, or `-` where the capture point has none.
fn dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}
