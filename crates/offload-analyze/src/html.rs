//! The self-contained HTML report: one file with inline CSS, data and
//! script, no network access, so it opens the same offline, in a mail
//! attachment or in a ticket. Per flow, the graphs of Wireshark's TCP
//! Stream Graphs and tcptrace, drawn on canvases by the inline script:
//!
//! - time-sequence: data segments (retransmissions in red), the peer's ACK
//!   line, the receive-window edge, SACK blocks, duplicate-ACK and
//!   zero-window marks (an ACK-only direction plots its own ACK line);
//! - round-trip time: every ACK of a segment's end (as Wireshark's
//!   `tcp.analysis.ack_rtt`);
//! - the receive window the peer advertised and the bytes in flight;
//! - throughput per bin, the bin width in the title, with a moving average;
//! - the GRO view: segments per packet handed to the stack over time,
//!   coloured by flush reason.
//!
//! Every graph has a title, axis labels and a legend; drag to zoom (both
//! axes), wheel to zoom time, double-click to reset, hover for values.
//! Flows of one or two packets are folded into one line, not graphed.

use crate::report::{Analysis, FlowGraphs, FlowReport};
use crate::text::{fmt_bps, fmt_bytes};
use offload_report::Severity;
use std::fmt::Write;

pub use crate::report::{GRAPHED_FLOWS, NOISE_PACKETS};

use offload_report::html::escape as esc;

/// JSON text safe inside a `<script>` element.
fn script_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|_| "null".into())
        .replace("</", "<\\/")
}

fn flow_section(out: &mut String, f: &FlowReport, g: &FlowGraphs, gro_size: u32) {
    let _ = write!(
        out,
        r##"<section class="flow" id="flow-{}"><h3>#{} {}</h3><p class="meta">{} packets, {}, {:.3} s, {}{}{}</p><div class="plots" data-flow="{}"></div><script type="application/json" class="graph-data">{}</script></section>"##,
        f.id,
        f.id,
        esc(&f.description),
        f.packets,
        fmt_bytes(f.bytes),
        f.duration_s,
        fmt_bps(f.throughput_bps),
        f.observed_mss
            .map(|m| format!(", MSS {m}"))
            .unwrap_or_default(),
        if f.retransmissions > 0 {
            format!(", {} retransmissions", f.retransmissions)
        } else {
            String::new()
        },
        f.id,
        script_json(&serde_json::json!({
            "protocol": f.protocol,
            "graphs": g,
            "gro_max_size": gro_size,
        }))
    );
}

/// "2026-11-22 14:30 UTC" from the system clock.
/// The per-flow TCP figures, each of `--json`'s `flows[].tcp` (loss and
/// its location, ECN, RTT, window and zero window, bytes in flight, SACK,
/// Wireshark's flags, first frames): one row per TCP direction in the
/// flows table's order, one column per group. The cells are made from the
/// JSON record itself, so a figure added to `--json` appears here too
/// (docs/analyze.md, "Output"); each value carries its JSON path
/// (`data-k="loss.lost_before_capture"`) so a reader or a test can find it.
/// Wireshark's flags and the first frames list only those that occurred.
fn tcp_table(o: &mut String, r: &crate::report::Report, order: &[usize]) {
    let rows: Vec<(&FlowReport, serde_json::Value)> = order
        .iter()
        .take(500)
        .map(|&i| &r.flows[i])
        .filter_map(|f| Some((f, serde_json::to_value(f.tcp.as_ref()?).ok()?)))
        .collect();
    let Some(serde_json::Value::Object(first)) = rows.first().map(|(_, v)| v) else {
        return;
    };
    let mut groups: Vec<String> = first.keys().cloned().collect();
    groups.sort_by(|a, b| reading_order(a).cmp(&reading_order(b)));
    o.push_str("<h2>TCP analysis</h2><p class=\"hint\">Per direction, as in <code>--json</code> (<code>flows[].tcp</code>): loss and reordering by where they happened (before or after the capture point), ECN, round trips of the direction's data (ms), the receive window it advertised (bytes; zero window in seconds), SACK as it sent it, and Wireshark's expert flags with the first frame of each event.</p><table><tr><th>#</th><th>flow</th>");
    for g in &groups {
        let _ = write!(o, "<th>{}</th>", esc(&g.replace('_', " ")));
    }
    o.push_str("</tr>");
    for (f, v) in &rows {
        let _ = write!(
            o,
            "<tr data-flow=\"{}\"><td><a href=\"#flow-{}\">{}</a></td><td>{}</td>",
            f.id,
            f.id,
            f.id,
            esc(&f.description)
        );
        for g in &groups {
            let mut lines = Vec::new();
            let only_nonzero = g == "wireshark" || g == "first_frames";
            tcp_cell(&mut lines, g, "", &v[g.as_str()], only_nonzero);
            if lines.is_empty() {
                lines.push("none".into());
            }
            let _ = write!(o, "<td>{}</td>", lines.join("<br>"));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

/// Where a TCP figure's name goes in the table (the JSON's object keys come
/// sorted by name): the groups as an expert reads them, loss first, and
/// within a group from count to extremes; names not listed after them, by
/// name.
fn reading_order(k: &str) -> (usize, &str) {
    const ORDER: [&str; 34] = [
        "loss",
        "ecn",
        "rtt",
        "window",
        "bytes_in_flight_max",
        "sack",
        "wireshark",
        "first_frames",
        "peer_captured",
        "lost_before_capture",
        "lost_after_capture",
        "spurious",
        "reordered_before_capture",
        "reordered_after_capture",
        "gaps_open",
        "ce_marked",
        "ece",
        "cwr",
        "samples",
        "min_ms",
        "median_ms",
        "mean_ms",
        "max_ms",
        "scale",
        "state",
        "shift",
        "syn_window",
        "min",
        "max",
        "last",
        "zero_window_s",
        "zero_window_episodes",
        "acks_with_sack",
        "blocks",
    ];
    (ORDER.iter().position(|o| *o == k).unwrap_or(ORDER.len()), k)
}

/// The lines of one TCP group's cell: `label value`, the value marked with
/// its JSON path `path`; nested objects (the window scale) flattened.
fn tcp_cell(
    lines: &mut Vec<String>,
    path: &str,
    label: &str,
    v: &serde_json::Value,
    only_nonzero: bool,
) {
    use serde_json::Value;
    let text = match v {
        Value::Object(m) => {
            let mut keys: Vec<(&String, &Value)> = m.iter().collect();
            keys.sort_by(|a, b| reading_order(a.0).cmp(&reading_order(b.0)));
            for (k, x) in keys {
                let l = if label.is_empty() {
                    k.replace('_', " ")
                } else {
                    format!("{label} {}", k.replace('_', " "))
                };
                tcp_cell(lines, &format!("{path}.{k}"), &l, x, only_nonzero);
            }
            return;
        }
        Value::Null if only_nonzero => return,
        Value::Number(n) if only_nonzero && n.as_f64() == Some(0.0) => return,
        Value::Null => "-".to_string(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
        Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(0.0)),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let label = if label.is_empty() {
        String::new()
    } else {
        format!("{} ", esc(label))
    };
    lines.push(format!(
        "{label}<b data-k=\"{}\">{}</b>",
        esc(path),
        esc(&text)
    ));
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The chart code: canvas plots with zoom and hover, no dependencies.
const SCRIPT: &str = include_str!("html_charts.js");

/// Renders the whole report (the command line left out).
pub fn render(a: &Analysis) -> String {
    render_with(a, "")
}

/// Renders the whole report; `command` is the command line that made it.
pub fn render_with(a: &Analysis, command: &str) -> String {
    let r = &a.report;
    let mut o = String::with_capacity(256 * 1024);
    o.push_str(r##"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>offload analyze report</title><style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1200px;color:#1d1d22;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:18px 0 2px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e5e5ea;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f7}
td.n{text-align:right;font-variant-numeric:tabular-nums}.meta{color:#555;margin:0}
.finding{border-left:4px solid #999;padding:6px 12px;margin:10px 0;background:#fafafa}
.finding.high{border-color:#d62728;background:#fff5f5}.finding.medium{border-color:#ff9f1c;background:#fffaf0}.finding.info{border-color:#1f77b4}
.sev{font-weight:600;text-transform:uppercase;font-size:11px;margin-right:6px}.fix{color:#0b5d1e}.ev{color:#555;font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:10px}.chart{border:1px solid #e3e3e8;background:#fff;padding:4px 6px;position:relative}
.chart h4{margin:2px 0;font-size:13px}.chart canvas{display:block;cursor:crosshair}.legend{font-size:11px;color:#333}.legend span{margin-right:10px;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:10px;margin-right:3px;vertical-align:-1px}.tip{position:absolute;pointer-events:none;background:#222;color:#fff;font-size:11px;padding:3px 6px;border-radius:3px;display:none;white-space:pre;z-index:2}
.hint{color:#666;font-size:12px}
</style></head><body>"##);
    let frames: u64 = r.inputs.iter().map(|i| i.frames).sum();
    let _ = write!(
        o,
        "<h1>offload analyze report</h1><p class=\"meta\">offload {} &middot; generated {}{}</p><p class=\"meta\">{} file(s): {}; {} frames; {} flows; kernel profile {}{}{}</p>",
        env!("CARGO_PKG_VERSION"),
        utc_now(),
        if command.is_empty() { String::new() } else { format!(" &middot; <code>{}</code>", esc(command)) },
        r.inputs.len(),
        r.inputs.iter().map(|i| esc(&i.path)).collect::<Vec<_>>().join(", "),
        frames,
        r.flows.len() as u64 + r.other_flows.flows,
        r.settings.kernel,
        if r.settings.kernel_verified_live { "" } else { " (derived from kernel source, not verified live)" },
        if r.interrupted { "; <b>interrupted</b>: partial figures" } else { "" }
    );
    let multi_file = r.inputs.len() > 1;
    let _ = write!(o, "<h2>Findings ({})</h2>", r.findings.len());
    if r.findings.is_empty() {
        o.push_str("<p>Nothing in this capture stops GRO.</p>");
    }
    for f in &r.findings {
        let (cls, sev) = match f.severity {
            Severity::High => ("high", "high"),
            Severity::Medium => ("medium", "medium"),
            Severity::Info => ("info", "info"),
        };
        let link = f
            .flow
            .as_ref()
            .map(|fl| {
                let capture = match (&fl.capture, multi_file) {
                    (Some(c), true) => format!(" [{}]", esc(c)),
                    _ => String::new(),
                };
                format!(" <a href=\"#flow-{}\">flow #{}</a>{capture}", fl.id, fl.id)
            })
            .unwrap_or_default();
        let evidence = f
            .evidence
            .as_ref()
            .map(|e| {
                let counts = e
                    .counts
                    .iter()
                    .map(|(k, v)| format!("{}={v}", esc(k)))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!(
                    "<div class=\"ev\">evidence: frames [{}] of {}; {counts}</div>",
                    e.frames
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    esc(&e.file)
                )
            })
            .unwrap_or_default();
        let fix = f
            .fix
            .as_ref()
            .map(|x| format!("<div class=\"fix\">fix: {}</div>", esc(x)))
            .unwrap_or_default();
        let _ = write!(
            o,
            "<div class=\"finding {cls}\"><div><span class=\"sev\">{sev}</span><b>{}. {}</b>{link}</div><div>{}</div>{evidence}{fix}</div>",
            f.rank,
            esc(&f.title),
            esc(&f.detail),
        );
    }
    let _ = write!(o, "<h2>GRO what-if (kernel {})</h2><table><tr><th>gro_max_size</th><th>gro_ipv4_max_size</th><th>frames</th><th>stack packets</th><th>merge ratio</th><th>super-packets</th><th>largest</th><th>flush reasons (first example frames)</th></tr>", r.settings.kernel);
    for w in &r.what_if {
        let reasons = w
            .flush_reasons
            .iter()
            .take(8)
            .map(|x| {
                format!(
                    "{} {} ({})",
                    x.reason,
                    x.count,
                    x.examples
                        .iter()
                        .map(|e| e.frame.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = write!(
            o,
            "<tr><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{:.2}x</td><td class=n>{}</td><td class=n>{}</td><td>{reasons}{}</td></tr>",
            w.gro_max_size,
            w.gro_ipv4_max_size,
            w.frames_in,
            w.stack_packets,
            w.merge_ratio,
            w.super_packets,
            w.largest_packet,
            if w.notes.is_empty() { String::new() } else { format!("<br><i>{}</i>", esc(&w.notes.join("; "))) }
        );
    }
    o.push_str("</table>");
    if !r.hops.is_empty() {
        o.push_str("<h2>Which hop</h2><table><tr><th>flow</th><th>capture points (packets, GRO stack packets)</th><th>stops being mergeable at</th><th>what changed</th></tr>");
        for h in &r.hops {
            let pts = h
                .points
                .iter()
                .map(|p| {
                    format!(
                        "{}: {} -> {}{}",
                        esc(&p.capture),
                        p.packets,
                        p.stack_packets,
                        if p.mergeable { "" } else { " (not mergeable)" }
                    )
                })
                .collect::<Vec<_>>()
                .join("<br>");
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{pts}</td><td>{}</td><td>{}</td></tr>",
                esc(&h.flow),
                esc(h.first_unmergeable.as_deref().unwrap_or("-")),
                h.changes
                    .iter()
                    .map(|c| esc(c))
                    .collect::<Vec<_>>()
                    .join("<br>")
            );
        }
        o.push_str("</table>");
    }
    o.push_str("<h2>Flows</h2><table><tr><th>#</th><th>flow</th><th>packets</th><th>bytes</th><th>throughput</th><th>MSS</th><th>retrans / ooo</th><th>above MTU</th><th>IP ID / DF</th><th>checksum</th><th>GRO stack packets</th></tr>");
    let order = crate::report::flows_by_bytes(&r.flows, |f| (f.packets, f.bytes));
    for &i in order.iter().take(500) {
        let f = &r.flows[i];
        let idp = match &f.tunnel {
            Some(t) => format!(
                "outer ({}) {} / {}<br>inner {} / {}",
                t.kind,
                t.outer_ip.ip_id_pattern.name(),
                t.outer_ip.df,
                f.ip.ip_id_pattern.name(),
                f.ip.df
            ),
            None => format!("{} / {}", f.ip.ip_id_pattern.name(), f.ip.df),
        };
        let gro = f
            .what_if
            .iter()
            .map(|w| {
                format!(
                    "{}: {}{}",
                    w.gro_max_size,
                    w.stack_packets,
                    if w.estimated { " (est.)" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = write!(
            o,
            "<tr><td><a href=\"#flow-{}\">{}</a></td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{} / {}</td><td class=n>{}</td><td>{idp}</td><td>{}</td><td>{gro}</td></tr>",
            f.id,
            f.id,
            if r.inputs.len() > 1 {
                // Several captures: each flow is labelled with its capture.
                esc(&format!("[{}] {}", f.file, f.description))
            } else {
                esc(&f.description)
            },
            f.packets,
            fmt_bytes(f.bytes),
            fmt_bps(f.throughput_bps),
            f.observed_mss.map(|m| m.to_string()).unwrap_or_default(),
            f.retransmissions,
            f.out_of_order,
            f.above_mtu.packets,
            f.l4_checksum
        );
    }
    let noise: Vec<&FlowReport> = r
        .flows
        .iter()
        .filter(|f| f.packets <= NOISE_PACKETS)
        .collect();
    if !noise.is_empty() {
        let _ = write!(
            o,
            "<tr><td></td><td colspan=10><i>{} flows of 1-{NOISE_PACKETS} packets folded ({} packets, {})</i></td></tr>",
            noise.len(),
            noise.iter().map(|f| f.packets).sum::<u64>(),
            fmt_bytes(noise.iter().map(|f| f.bytes).sum())
        );
    }
    if r.other_flows.flows > 0 {
        let o2 = &r.other_flows;
        let _ = write!(
            o,
            "<tr><td></td><td colspan=10><i>{} other flows, least recently active, past --max-flows {} ({} packets, {})</i></td></tr>",
            o2.flows,
            r.settings.max_flows,
            o2.packets,
            fmt_bytes(o2.bytes)
        );
    }
    o.push_str("</table>");
    tcp_table(&mut o, r, &order);
    let _ = write!(
        o,
        "<h2>Graphs</h2><p class=\"hint\">The {} largest flows. Drag to zoom (both axes), wheel to zoom time, double-click to reset; hover a point for its values and frame number. Series are thinned to a fixed number of points per flow and each graph says how many it shows; retransmissions, duplicate ACKs, SACKs and zero windows are kept before other points, and thinned evenly (and counted) only when they alone exceed the cap.</p>",
        GRAPHED_FLOWS.min(order.len())
    );
    let gro_size = r.settings.gro_max_sizes.first().copied().unwrap_or(0);
    let empty = FlowGraphs::default();
    for &i in order.iter().take(GRAPHED_FLOWS) {
        flow_section(
            &mut o,
            &r.flows[i],
            a.graphs.get(i).unwrap_or(&empty),
            gro_size,
        );
    }
    let _ = write!(
        o,
        "<p class=\"meta\">Generated by offload {} (offload analyze){}. Self-contained: no network access.</p><script>{SCRIPT}</script></body></html>",
        env!("CARGO_PKG_VERSION"),
        if command.is_empty() { String::new() } else { format!(" with <code>{}</code>", esc(command)) }
    );
    o.push('\n');
    o
}
