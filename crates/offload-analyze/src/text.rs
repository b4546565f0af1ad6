//! The terminal summary: findings first (what to do), then the what-if
//! table, then the busiest flows.

use crate::report::Report;
use offload_report::Severity;
use std::fmt::Write;

/// Human units for bits per second.
pub fn fmt_bps(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.1} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}

/// Human units for bytes.
pub fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b} B")
    }
}

/// Renders the summary. `max_flows` limits the flow table.
pub fn render(r: &Report, max_flows: usize) -> String {
    let mut s = String::new();
    let frames: u64 = r.inputs.iter().map(|i| i.frames).sum();
    let bytes: u64 = r.inputs.iter().map(|i| i.bytes).sum();
    let _ = writeln!(
        s,
        "offload analyze: {} file(s), {} frames, {}, {} flows; kernel profile {}{}",
        r.inputs.len(),
        frames,
        fmt_bytes(bytes),
        r.flows.len() as u64 + r.other_flows.flows,
        r.settings.kernel,
        if r.settings.kernel_verified_live {
            ""
        } else {
            " (derived from source, not verified live)"
        }
    );
    for i in &r.inputs {
        let _ = writeln!(
            s,
            "  {}: {} frames, {:.3} s{}{}{}{}",
            i.path,
            i.frames,
            i.duration_s,
            match i.first_timestamp_clamped_frame {
                Some(first) => format!(
                    ", {} timestamps outside 1677-2262 read as the nearest (first: frame {first})",
                    i.timestamps_clamped
                ),
                None => String::new(),
            },
            match i.first_timestamp_backwards_frame {
                Some(first) => format!(
                    ", {} frames timestamped before the frame they follow (first: frame {first})",
                    i.timestamps_backwards
                ),
                None => String::new(),
            },
            if i.interrupted { ", INTERRUPTED" } else { "" },
            i.error
                .as_ref()
                .map(|e| format!(", stopped at a bad frame: {e}"))
                .unwrap_or_default()
        );
        // Frames without IP, by reason (`--json`: inputs[].link_skipped).
        if !i.link_skipped.is_empty() {
            let why: Vec<String> = i
                .link_skipped
                .iter()
                .map(|(k, c)| format!("{} {k} (first: frame {})", c.frames, c.first_frame))
                .collect();
            let _ = writeln!(s, "    frames without IP: {}", why.join(", "));
        }
        let c = &i.ipcomp;
        if c.frames > 0 {
            let _ = writeln!(
                s,
                "    IPComp payloads: {}, {} inflated ({} cut at 65535 bytes), not: {} another algorithm, {} bad data, {} unreadable{}",
                c.frames,
                c.inflated,
                c.cut_at_bound,
                c.other_algorithm,
                c.bad_data,
                c.unreadable,
                c.first_noted
                    .map(|n| format!(" (first: frame {n})"))
                    .unwrap_or_default()
            );
        }
        let f = &i.fragments;
        if f.fragments > 0 {
            let _ = writeln!(
                s,
                "    IP fragments: {}, {} datagrams reassembled, {} given up ({} fragments), {} cut by the capture{}",
                f.fragments,
                f.reassembled,
                f.given_up,
                f.given_up_fragments,
                f.cut_fragments,
                f.snaplen_needed_for_fragments
                    .map(|n| format!(" (not reassembled: a snapshot length of {n} keeps them whole)"))
                    .unwrap_or_default()
            );
        }
    }
    if let Some(w) = r.what_if.first() {
        // Header-only captures: what the what-if did with the cut frames.
        for n in w
            .notes
            .iter()
            .filter(|n| n.contains("captured header-only") || n.contains("cut inside the headers"))
        {
            let _ = writeln!(s, "  note: {n}");
        }
    }
    if r.interrupted {
        let _ = writeln!(s, "  interrupted: the figures cover what was read so far");
    }
    let multi_file = r.inputs.len() > 1;
    let _ = writeln!(s, "\nFindings ({}):", r.findings.len());
    if r.findings.is_empty() {
        let _ = writeln!(s, "  none: nothing in this capture stops GRO");
    }
    for f in &r.findings {
        let sev = match f.severity {
            Severity::High => "HIGH",
            Severity::Medium => "MEDIUM",
            Severity::Info => "info",
        };
        // With several captures, the capture a finding's flow was read
        // from leads its line (as `[file]` leads the flow table's).
        let capture = match (&f.flow, multi_file) {
            (Some(fl), true) => fl
                .capture
                .as_ref()
                .map(|c| format!("[{c}] "))
                .unwrap_or_default(),
            _ => String::new(),
        };
        let _ = writeln!(s, "  {}. [{}] {capture}{}", f.rank, sev, f.title);
        let _ = writeln!(s, "     {}", f.detail);
        if let Some(e) = f
            .evidence
            .as_ref()
            .filter(|e| !e.frames.is_empty() && multi_file)
        {
            let _ = writeln!(s, "     evidence: {}", e.file);
        }
        if let Some(fix) = &f.fix {
            let _ = writeln!(s, "     fix: {fix}");
        }
    }
    let _ = writeln!(s, "\nGRO what-if (kernel {}):", r.settings.kernel);
    let _ = writeln!(
        s,
        "  {:>14} {:>10} {:>14} {:>8} {:>9}  top flush reasons",
        "gro_max_size", "frames", "stack packets", "ratio", "largest"
    );
    for w in &r.what_if {
        let top: Vec<String> = w
            .flush_reasons
            .iter()
            .take(4)
            .map(|x| {
                format!(
                    "{} {} (e.g. frame {})",
                    x.reason,
                    x.count,
                    x.examples.first().map_or(0, |e| e.frame)
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  {:>14} {:>10} {:>14} {:>7.2}x {:>9}  {}{}",
            w.gro_max_size,
            w.frames_in,
            w.stack_packets,
            w.merge_ratio,
            w.largest_packet,
            top.join(", "),
            if w.derived { " [derived]" } else { "" }
        );
        if w.lost_packets > 0 {
            let _ = writeln!(
                s,
                "  {:>14} kernel {} loses {} of these packets ({} segments): {}",
                "",
                w.kernel,
                w.lost_packets,
                w.lost_segments,
                w.loss_reason.unwrap_or("-")
            );
        }
    }
    if !r.hops.is_empty() {
        let _ = writeln!(
            s,
            "\nWhich hop ({} flows seen at more than one capture point, in the order given):",
            r.hops.len()
        );
        for h in &r.hops {
            let at = h
                .points
                .iter()
                .map(|p| {
                    format!(
                        "{} {} pkts -> {} ({})",
                        p.capture,
                        p.packets,
                        p.stack_packets,
                        if p.mergeable {
                            "mergeable"
                        } else {
                            "NOT mergeable"
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            let _ = writeln!(s, "  {}: {at}", h.flow);
            if let Some(c) = &h.first_unmergeable {
                let _ = writeln!(s, "     stops being mergeable at {c}");
            }
            for c in &h.changes {
                let _ = writeln!(s, "     {c}");
            }
        }
    }
    let mut order: Vec<usize> = (0..r.flows.len()).collect();
    order.sort_by(|a, b| r.flows[*b].bytes.cmp(&r.flows[*a].bytes));
    let _ = writeln!(
        s,
        "\nFlows (largest {} of {}):",
        max_flows.min(r.flows.len()),
        r.flows.len()
    );
    let o = &r.other_flows;
    if o.flows > 0 {
        let _ = writeln!(
            s,
            "  + {} other flows (least recently active, past --max-flows {}): {} pkts, {}, {} retrans",
            o.flows,
            r.settings.max_flows,
            o.packets,
            fmt_bytes(o.bytes),
            o.retransmissions
        );
    }
    for &i in order.iter().take(max_flows) {
        let f = &r.flows[i];
        if multi_file {
            // Several captures: each flow is labelled with its capture.
            let _ = writeln!(s, "  #{} [{}] {}", f.id, f.file, f.description);
        } else {
            let _ = writeln!(s, "  #{} {}", f.id, f.description);
        }
        let mut line = format!(
            "     {} pkts, {}, {:.3} s, {}",
            f.packets,
            fmt_bytes(f.bytes),
            f.duration_s,
            fmt_bps(f.throughput_bps)
        );
        if let Some(m) = f.observed_mss {
            let _ = write!(line, ", MSS {m}");
        }
        if f.retransmissions + f.out_of_order > 0 {
            let _ = write!(
                line,
                ", {} retrans, {} out-of-order",
                f.retransmissions, f.out_of_order
            );
        }
        if f.protocol != "other" && f.ip.df != "n/a" {
            let _ = write!(line, ", IP ID {} DF {}", f.ip.ip_id_pattern.name(), f.ip.df);
        }
        let _ = write!(line, ", checksum {}", f.l4_checksum);
        let _ = writeln!(s, "{line}");
        if let Some(t) = &f.tcp {
            let _ = writeln!(s, "     {}", tcp_line(t));
        }
        if let Some(t) = &f.tunnel {
            let mut outer = format!(
                "     outer ({}): IP ID {}, DF {}",
                t.label(),
                t.outer_ip.ip_id_pattern.name(),
                t.outer_ip.df
            );
            if t.sport.is_some() {
                let _ = write!(outer, ", UDP checksum {}", t.outer_udp_checksum);
            }
            if t.gre_checksum != "n/a" {
                let _ = write!(outer, ", GRE checksum {}", t.gre_checksum);
            }
            if t.sport_changes > 0 {
                let _ = write!(outer, ", source port changed {} times", t.sport_changes);
            }
            if !t.kernel_gro {
                // Decision 0231: the what-if is the outer packet's.
                let _ = write!(outer, ", GRO does not open it (what-if: outer packets)");
            }
            let _ = writeln!(s, "{outer}");
        }
        if f.above_mtu.packets > 0 {
            let _ = writeln!(
                s,
                "     {} above MTU (largest {}): {}",
                f.above_mtu.packets,
                f.above_mtu.largest_ip_len,
                match f.above_mtu.interpretation {
                    crate::flow::BigPacketSide::SenderTso => "TSO/GSO at the sender",
                    crate::flow::BigPacketSide::ReceiverGro => "GRO at the receiver",
                    crate::flow::BigPacketSide::Unknown => "TSO or GRO",
                }
            );
        }
        let wi: Vec<String> = f
            .what_if
            .iter()
            .map(|w| {
                format!(
                    "{}: {} -> {} ({:.1}x){}",
                    w.gro_max_size,
                    w.frames,
                    w.stack_packets,
                    w.merge_ratio,
                    if w.estimated { " est." } else { "" }
                )
            })
            .collect();
        let _ = writeln!(s, "     GRO {}", wi.join("; "));
    }
    s
}

/// One line of a flow's TCP analysis: RTT, window, loss and reordering.
fn tcp_line(t: &crate::tcp::report::TcpReport) -> String {
    use crate::tcp::scale::WindowScale;
    let rtt = match t.rtt.median_ms {
        Some(m) => format!("RTT median {m:.3} ms ({} samples)", t.rtt.samples),
        None => "no RTT sample".to_string(),
    };
    let scale = match t.window.scale {
        WindowScale::Shift(s) => format!("scale {s}"),
        WindowScale::NotUsed => "no scaling".to_string(),
        WindowScale::Unknown => "scale unknown (no handshake): raw".to_string(),
    };
    let l = &t.loss;
    let mut line = format!(
        "TCP: {rtt}; window {}..{} B ({scale})",
        t.window.min.unwrap_or(0),
        t.window.max
    );
    if l.lost_before_capture + l.lost_after_capture + l.spurious > 0 {
        let _ = write!(
            line,
            "; lost {} before / {} after the capture point, {} spurious",
            l.lost_before_capture, l.lost_after_capture, l.spurious
        );
    }
    if l.reordered_before_capture + l.reordered_after_capture > 0 {
        let _ = write!(
            line,
            "; reordered {} before / {} after",
            l.reordered_before_capture, l.reordered_after_capture
        );
    }
    if t.window.zero_window_episodes > 0 {
        let _ = write!(
            line,
            "; zero window {}x, {:.3} s",
            t.window.zero_window_episodes, t.window.zero_window_s
        );
    }
    line
}
