//! The self-contained HTML report: one file, inline CSS and SVG, no
//! script and no network access, so it opens the same offline, in a mail
//! attachment or in a ticket. Graphs per flow, after the GRO
//! troubleshooting write-ups: a tcptrace-style time-sequence graph,
//! throughput over time and a packet-size scatter.

use crate::flow::SeqPoint;
use crate::report::{Analysis, FlowReport, Severity};
use crate::text::{fmt_bps, fmt_bytes};
use std::fmt::Write;

/// Flows that get graphs (the largest by bytes).
pub const GRAPHED_FLOWS: usize = 8;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 560.0;
const H: f64 = 220.0;
const ML: f64 = 64.0;
const MB: f64 = 34.0;
const MT: f64 = 10.0;
const MR: f64 = 12.0;

/// A "nice" tick step for a range.
fn step(range: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    }
}

fn fmt_tick(v: f64, step: f64) -> String {
    let a = v.abs();
    if step < 1.0 && step > 0.0 {
        // Enough decimals to tell neighbouring ticks apart.
        let d = (-step.log10().floor()) as usize;
        return format!("{v:.d$}");
    }
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

struct Plot {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    svg: String,
}

impl Plot {
    fn new(title: &str, xl: &str, yl: &str, x1: f64, y1: f64) -> Plot {
        let x1 = if x1 > 0.0 { x1 } else { 1.0 };
        let y1 = if y1 > 0.0 { y1 * 1.05 } else { 1.0 };
        let mut svg = String::new();
        let _ = write!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{}" viewBox="0 0 {W} {}" role="img" aria-label="{t}"><title>{t}</title><rect x="{ML}" y="{MT}" width="{}" height="{}" fill="#fbfbfd" stroke="#999"/>"##,
            H + 18.0,
            H + 18.0,
            W - ML - MR,
            H - MT - MB,
            t = esc(title)
        );
        let mut p = Plot {
            x0: 0.0,
            x1,
            y0: 0.0,
            y1,
            svg,
        };
        let (sx, sy) = (step(x1), step(y1));
        let mut v = 0.0;
        while v <= x1 * 1.0001 {
            let x = p.x(v);
            let _ = write!(
                p.svg,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" font-size="10" text-anchor="middle">{}</text>"##,
                MT,
                H - MB,
                H - MB + 13.0,
                fmt_tick(v, sx)
            );
            v += sx;
        }
        let mut v = 0.0;
        while v <= y1 * 1.0001 {
            let y = p.y(v);
            let _ = write!(
                p.svg,
                r##"<line x1="{ML}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
                W - MR,
                ML - 4.0,
                y + 3.0,
                fmt_tick(v, sy)
            );
            v += sy;
        }
        let _ = write!(
            p.svg,
            r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle">{}</text><text x="12" y="{:.1}" font-size="11" text-anchor="middle" transform="rotate(-90 12 {:.1})">{}</text>"##,
            ML + (W - ML - MR) / 2.0,
            H + 10.0,
            esc(xl),
            MT + (H - MT - MB) / 2.0,
            MT + (H - MT - MB) / 2.0,
            esc(yl)
        );
        p
    }

    fn x(&self, v: f64) -> f64 {
        ML + (v - self.x0) / (self.x1 - self.x0) * (W - ML - MR)
    }

    fn y(&self, v: f64) -> f64 {
        H - MB - (v - self.y0) / (self.y1 - self.y0) * (H - MT - MB)
    }

    fn finish(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

/// tcptrace-style: each segment is a vertical bar from its start to its
/// end sequence number; retransmissions in red.
fn time_sequence(pts: &[SeqPoint]) -> String {
    let tmax = pts.iter().map(|p| p.t).fold(0.0, f64::max);
    let smax = pts
        .iter()
        .map(|p| (p.seq + p.len as u64) as f64)
        .fold(0.0, f64::max);
    let mut p = Plot::new(
        "time-sequence graph",
        "time (s)",
        "sequence (bytes)",
        tmax,
        smax,
    );
    for q in pts {
        let x = p.x(q.t);
        let (ya, yb) = (p.y(q.seq as f64), p.y((q.seq + q.len as u64) as f64));
        let color = if q.retrans { "#d62728" } else { "#1f5fbf" };
        let _ = write!(
            p.svg,
            r##"<line x1="{x:.1}" y1="{ya:.1}" x2="{x:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.5"/>"##,
            yb.min(ya - 1.0)
        );
    }
    p.finish()
}

fn throughput(width_ns: u64, bins: &[u64]) -> String {
    let secs = width_ns as f64 / 1e9;
    let rates: Vec<f64> = bins
        .iter()
        .map(|b| *b as f64 * 8.0 / secs.max(1e-9))
        .collect();
    let tmax = bins.len() as f64 * secs;
    let rmax = rates.iter().cloned().fold(0.0, f64::max);
    let mut p = Plot::new(
        "throughput over time",
        "time (s)",
        "payload bit/s",
        tmax,
        rmax,
    );
    let mut path = String::new();
    for (i, r) in rates.iter().enumerate() {
        let (xa, xb, y) = (p.x(i as f64 * secs), p.x((i + 1) as f64 * secs), p.y(*r));
        let _ = write!(
            path,
            "{}{xa:.1},{y:.1} L{xb:.1},{y:.1} ",
            if i == 0 { "M" } else { "L" }
        );
    }
    let _ = write!(
        p.svg,
        r##"<path d="{path}" fill="none" stroke="#2ca02c" stroke-width="1.5"/>"##
    );
    p.finish()
}

fn size_scatter(pts: &[SeqPoint], mtu_payload: Option<u32>) -> String {
    let tmax = pts.iter().map(|p| p.t).fold(0.0, f64::max);
    let lmax = pts.iter().map(|p| p.len as f64).fold(0.0, f64::max);
    let lmax = lmax.max(mtu_payload.unwrap_or(0) as f64);
    let mut p = Plot::new("packet size", "time (s)", "payload (bytes)", tmax, lmax);
    if let Some(m) = mtu_payload {
        let y = p.y(m as f64);
        let _ = write!(
            p.svg,
            r##"<line x1="{ML}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ff7f0e" stroke-dasharray="4 3"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end" fill="#c05000">MSS {m}</text>"##,
            W - MR,
            W - MR - 2.0,
            y - 3.0
        );
    }
    for q in pts {
        let _ = write!(
            p.svg,
            r##"<circle cx="{:.1}" cy="{:.1}" r="1.8" fill="{}"/>"##,
            p.x(q.t),
            p.y(q.len as f64),
            if q.retrans { "#d62728" } else { "#6a3d9a" }
        );
    }
    p.finish()
}

fn flow_section(out: &mut String, f: &FlowReport, pts: &[SeqPoint], bins: &(u64, Vec<u64>)) {
    let _ = write!(
        out,
        r##"<section class="flow" id="flow-{}"><h3>#{} {}</h3><p class="meta">{} packets, {}, {:.3} s, {}{}</p><div class="plots">"##,
        f.id,
        f.id,
        esc(&f.description),
        f.packets,
        fmt_bytes(f.bytes),
        f.duration_s,
        fmt_bps(f.throughput_bps),
        f.observed_mss
            .map(|m| format!(", MSS {m}"))
            .unwrap_or_default()
    );
    if pts.is_empty() {
        out.push_str("<p>No payload-carrying packets to plot.</p>");
    } else {
        if f.protocol == "tcp" {
            out.push_str(&time_sequence(pts));
        }
        out.push_str(&throughput(bins.0.max(1), &bins.1));
        out.push_str(&size_scatter(pts, f.observed_mss));
    }
    out.push_str("</div></section>");
}

/// Renders the whole report.
pub fn render(a: &Analysis) -> String {
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
.plots{display:flex;flex-wrap:wrap;gap:8px}svg{background:#fff;border:1px solid #eee}
</style></head><body>"##);
    let frames: u64 = r.inputs.iter().map(|i| i.frames).sum();
    let _ = write!(
        o,
        "<h1>offload analyze</h1><p class=\"meta\">{} file(s): {}; {} frames; {} flows; kernel profile {}{}{}</p>",
        r.inputs.len(),
        r.inputs.iter().map(|i| esc(&i.path)).collect::<Vec<_>>().join(", "),
        frames,
        r.flows.len(),
        r.settings.kernel,
        if r.settings.kernel_verified_live { "" } else { " (derived from kernel source, not verified live)" },
        if r.interrupted { "; <b>interrupted</b>: partial figures" } else { "" }
    );
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
            .map(|fl| format!(" <a href=\"#flow-{}\">flow #{}</a>", fl.id, fl.id))
            .unwrap_or_default();
        let counts = f
            .evidence
            .counts
            .iter()
            .map(|(k, v)| format!("{}={v}", esc(k)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            o,
            "<div class=\"finding {cls}\"><div><span class=\"sev\">{sev}</span><b>{}. {}</b>{link}</div><div>{}</div><div class=\"ev\">evidence: frames [{}] of {}; {counts}</div><div class=\"fix\">fix: {}</div></div>",
            f.rank,
            esc(&f.title),
            esc(&f.detail),
            f.evidence.frames.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            esc(&f.evidence.file),
            esc(&f.fix)
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
            if w.derived { format!("<br><i>{}</i>", esc(&w.notes.join("; "))) } else { String::new() }
        );
    }
    o.push_str("</table>");
    o.push_str("<h2>Flows</h2><table><tr><th>#</th><th>flow</th><th>packets</th><th>bytes</th><th>throughput</th><th>MSS</th><th>retrans / ooo</th><th>above MTU</th><th>IP ID / DF</th><th>checksum</th><th>GRO stack packets</th></tr>");
    let mut order: Vec<usize> = (0..r.flows.len()).collect();
    order.sort_by(|x, y| r.flows[*y].bytes.cmp(&r.flows[*x].bytes));
    for &i in order.iter().take(500) {
        let f = &r.flows[i];
        let idp = match &f.tunnel {
            Some(t) => format!(
                "outer {} / {}<br>inner {} / {}",
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
            esc(&f.description),
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
    o.push_str("</table><h2>Graphs</h2>");
    for &i in order.iter().take(GRAPHED_FLOWS) {
        let empty = (0, Vec::new());
        flow_section(
            &mut o,
            &r.flows[i],
            a.series.get(i).map(Vec::as_slice).unwrap_or(&[]),
            a.bins.get(i).unwrap_or(&empty),
        );
    }
    o.push_str("<p class=\"meta\">Generated by offload analyze. Graph points are decimated to a fixed number per flow; retransmissions are always kept and drawn in red.</p></body></html>\n");
    o
}
