//! Builds the [`Report`] from the pass: per-flow figures under the kernel
//! profile (the engine ran that line's rules), the what-if totals, and
//! the findings.

use crate::analysis::PassResult;
use crate::figures::{FlowWhatIf, RunTotals};
use crate::flow::FlowStats;
use crate::options::Options;
use crate::report::*;
use offload::gro::FlushReason;

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

fn reasons_of(w: &FlowWhatIf) -> Vec<ReasonReport> {
    let mut v: Vec<ReasonReport> = w
        .reasons
        .iter()
        .map(|h| ReasonReport {
            reason: h.reason.name(),
            count: h.count,
            first_frame: h.first_frame,
        })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(b.reason)));
    v
}

/// A flow's figures at one size. The engine ran with the profile's own
/// kernel line (`whatif::config_for`): its IP ID, outer-ID, CWR and size
/// rules are chosen per packet there, so nothing is re-classified here.
/// The healthy-tunnel figure (outer IDs normalised) is attached to tunnels.
fn flow_what_if(f: &FlowStats, i: usize, size: u32) -> (FlowWhatIfReport, FlowWhatIf, i64) {
    let base = &f.what_if[i];
    let w = base.clone();
    let estimated = false;
    let healthy = match (f.key.tunnel, f.outer.as_ref()) {
        (Some(t), Some(_)) if t.kind.kernel_gro() => Some(f.healthy_what_if[i].packets),
        // Tunnels analyze keys by their outer header (GRE, IP in IP,
        // Geneve): the engine's walk found them, the healthy run has them.
        _ if f.healthy_what_if[i].frames > 0 => Some(f.healthy_what_if[i].packets),
        _ => None,
    };
    let delta = w.packets as i64 - base.packets as i64;
    (
        FlowWhatIfReport {
            gro_max_size: size,
            frames: w.frames,
            stack_packets: w.packets,
            super_packets: w.super_packets,
            merge_ratio: ratio(w.frames, w.packets),
            estimated,
            reasons: reasons_of(&w),
            healthy_tunnel_packets: healthy,
            lost_packets: w.lost_packets,
            lost_segments: w.lost_segments,
            loss_reason: w.loss.map(|l| l.name()),
        },
        w,
        delta,
    )
}

/// Builds the report (flows, what-if, findings) from the pass.
pub fn build(mut pass: PassResult, opts: &Options) -> Analysis {
    // The graphs first (of the flows the HTML draws), then every flow's
    // graph series go: nothing else reads them, and on a full table of
    // short flows they are a tenth of the memory at the report's peak.
    let mut graphs = vec![FlowGraphs::default(); pass.flows.len()];
    for i in crate::report::flows_by_bytes(&pass.flows, |f| (f.packets, f.bytes))
        .into_iter()
        .take(crate::report::GRAPHED_FLOWS)
    {
        graphs[i] = graphs_of(&pass.flows[i], &pass.flows);
    }
    for f in &mut pass.flows {
        f.drop_graph_series();
    }
    let files: Vec<String> = pass.files.iter().map(|f| f.path.clone()).collect();
    let file_name = |i: usize| files.get(i).cloned().unwrap_or_default();
    let inputs: Vec<InputReport> = pass
        .files
        .iter()
        .map(|f| InputReport {
            path: f.path.clone(),
            frames: f.frames,
            bytes: f.bytes,
            duration_s: match (f.first_ns, f.last_ns) {
                (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9,
                _ => 0.0,
            },
            link_types: f.link_types.clone(),
            unsupported_link_frames: f.unsupported_link,
            unparsed_frames: f.unparsed,
            link_skipped: f
                .link_skipped
                .iter()
                .map(|(why, frames, first)| {
                    (
                        why.to_string(),
                        crate::report::SkipCount {
                            frames: *frames,
                            first_frame: *first,
                        },
                    )
                })
                .collect(),
            fragments: f.fragments,
            ipcomp: f.ipcomp,
            error: f.error.clone(),
            interrupted: f.interrupted,
            checksums_offloaded: f.checksums_offloaded,
            frames_above_snaplen: f.above_snaplen,
            timestamps_clamped: f.timestamps_clamped,
            first_timestamp_clamped_frame: (f.timestamps_clamped > 0)
                .then_some(f.first_timestamp_clamped),
            timestamps_backwards: f.timestamps_backwards,
            first_timestamp_backwards_frame: (f.timestamps_backwards > 0)
                .then_some(f.first_timestamp_backwards),
            snap: f.snap,
        })
        .collect();
    let t0: Vec<u64> = pass.files.iter().map(|f| f.first_ns.unwrap_or(0)).collect();

    let mut flows = Vec::with_capacity(pass.flows.len());
    let mut adjusted: Vec<Vec<FlowWhatIf>> = Vec::with_capacity(pass.flows.len());
    let mut deltas = vec![(0i64, Vec::<(FlushReason, i64)>::new()); opts.gro_sizes.len()];
    for (id, f) in pass.flows.iter().enumerate() {
        let mut wi = Vec::new();
        let mut adj = Vec::new();
        for (i, &size) in opts.gro_sizes.iter().enumerate() {
            let (r, w, d) = flow_what_if(f, i, size);
            if d != 0 || w.reasons != f.what_if[i].reasons {
                deltas[i].0 += d;
                for h in &w.reasons {
                    let before = f.what_if[i].count(h.reason) as i64;
                    if h.count as i64 != before {
                        deltas[i].1.push((h.reason, h.count as i64 - before));
                    }
                }
                for h in &f.what_if[i].reasons {
                    if w.count(h.reason) == 0 {
                        deltas[i].1.push((h.reason, -(h.count as i64)));
                    }
                }
            }
            wi.push(r);
            adj.push(w);
        }
        adjusted.push(adj);
        flows.push(flow_report(
            id,
            f,
            &file_name(f.file),
            t0.get(f.file).copied().unwrap_or(0),
            wi,
            f.reverse.and_then(|r| pass.flows.get(r)),
        ));
    }

    let what_if = opts
        .gro_sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            what_if_report(
                i,
                size,
                opts,
                &pass.totals[i],
                &deltas[i],
                &file_name,
                &pass.files,
            )
        })
        .collect();
    let mut findings = crate::findings::find(&pass.flows, &flows, &adjusted, opts, &file_name);
    crate::tcp_findings::add(&mut findings, &pass.flows, &flows, &file_name);
    let hops = crate::hops::compare(&inputs, &flows, &mut findings);
    Analysis {
        report: Report {
            schema: SCHEMA,
            settings: Settings {
                kernel: opts.kernel,
                kernel_verified_live: crate::kernel::verified_live(opts.kernel),
                gro_max_sizes: opts.gro_sizes.clone(),
                mtu: opts.mtu,
                vxlan_ports: opts.vxlan_ports.clone(),
                verify_checksums: opts.verify_checksums,
                max_flows: opts.max_flows,
                flush_timeout_ns: opts.flush_timeout_ns,
            },
            inputs,
            interrupted: pass.interrupted,
            flows,
            other_flows: pass.other,
            findings,
            what_if,
            hops,
        },
        graphs,
    }
}

fn what_if_report(
    i: usize,
    size: u32,
    opts: &Options,
    t: &RunTotals,
    delta: &(i64, Vec<(FlushReason, i64)>),
    file_name: &dyn Fn(usize) -> String,
    files: &[crate::analysis::FileFacts],
) -> WhatIfReport {
    let offloaded_files = files.iter().filter(|f| f.checksums_offloaded).count();
    let cfg = crate::whatif::config_for(
        size,
        opts.kernel,
        opts.verify_checksums,
        &opts.vxlan_ports,
        opts.flush_timeout_ns,
    );
    type Signed = (FlushReason, i64, Vec<(usize, u64)>);
    let mut counts: Vec<Signed> = t
        .reasons
        .iter()
        .map(|(r, n, ex)| (*r, *n as i64, ex.clone()))
        .collect();
    for (r, d) in &delta.1 {
        match counts.iter_mut().find(|x| x.0 == *r) {
            Some(x) => x.1 += d,
            None => counts.push((*r, *d, Vec::new())),
        }
    }
    let mut flush_reasons: Vec<ReasonTotal> = counts
        .into_iter()
        .filter(|x| x.1 > 0)
        .map(|(r, n, ex)| ReasonTotal {
            reason: r.name(),
            count: n as u64,
            pass_through: r.is_pass_through(),
            obstacle: r.is_obstacle(),
            examples: ex
                .into_iter()
                .map(|(f, frame)| FrameRef {
                    file: file_name(f),
                    frame,
                })
                .collect(),
        })
        .collect();
    flush_reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(b.reason)));
    let packets = (t.packets_out as i64 + delta.0).max(0) as u64;
    let mut notes = Vec::new();
    if !crate::kernel::verified_live(opts.kernel) {
        notes.push(format!(
            "kernel {} rules are derived from the kernel source, not verified against a live kernel",
            opts.kernel
        ));
    }
    if offloaded_files > 0 {
        notes.push(format!(
            "{offloaded_files} capture(s) carry offloaded checksums (CHECKSUM_PARTIAL): not verified, as the kernel trusts them"
        ));
    }
    if delta.0 != 0 || !delta.1.is_empty() {
        notes.push("some per-flow figures are estimates from header analysis (see flows[].what_if[].estimated)".into());
    }
    let _ = i;
    let derived = notes.iter().any(|n| !n.contains("offloaded checksums"));
    notes.extend(snap_notes(files, opts));
    WhatIfReport {
        gro_max_size: size,
        gro_ipv4_max_size: cfg.gro_ipv4_max_size,
        kernel: opts.kernel,
        derived,
        notes,
        frames_in: t.frames_in,
        stack_packets: packets,
        merge_ratio: ratio(t.frames_in, packets),
        super_packets: t.super_packets,
        largest_packet: t.largest,
        flush_reasons,
        lost_packets: t.lost_packets,
        lost_segments: t.lost_segments,
        loss_reason: t.loss.map(|l| l.name()),
    }
}

/// A flow's graph data; ACKs come from its reverse direction, mapped onto
/// this flow's sequence numbers and clock.
fn graphs_of(f: &FlowStats, all: &[FlowStats]) -> FlowGraphs {
    let max_seq = f
        .series
        .points
        .iter()
        .map(|p| p.seq + p.len as u64)
        .max()
        .unwrap_or(0);
    let view = |a: &crate::flow::AckPoint, base: u32, shift: f64| AckView {
        t: a.t + shift,
        ack: a.ack.wrapping_sub(base) as i64,
        win: a.win_edge.wrapping_sub(base) as i64,
        sack: a.sack[..a.nsack as usize]
            .iter()
            .map(|(l, r)| (l.wrapping_sub(base) as i64, r.wrapping_sub(base) as i64))
            .collect(),
        dup: a.dup,
        zero_window: a.zero_window,
        frame: a.frame,
        window: a.window,
        window_scale_known: a.window_scale_known,
    };
    let mut acks = Vec::new();
    let mut ack_only = false;
    if let (Some(t), Some(r)) = (f.tcp.as_ref(), f.reverse.and_then(|r| all.get(r))) {
        if f.payload_bytes > 0 {
            let shift = (r.first_ns as f64 - f.first_ns as f64) / 1e9;
            // ACKs far outside the data's range are from before the
            // capture's view of this flow (or garbage): left out.
            let limit = (max_seq + (1 << 30)) as i64;
            acks = r
                .acks
                .points
                .iter()
                .map(|a| view(a, t.isn, shift))
                .filter(|a| a.ack <= limit)
                .collect();
        }
    }
    if f.payload_bytes == 0 && !f.acks.points.is_empty() {
        ack_only = true;
        let base = f.acks.points[0].ack;
        acks = f.acks.points.iter().map(|a| view(a, base, 0.0)).collect();
    }
    FlowGraphs {
        seq: f.series.points.clone(),
        acks,
        ack_only,
        rtt: f
            .analysis
            .as_ref()
            .map(|d| d.rtt_points.points.clone())
            .unwrap_or_default(),
        bin_ns: f.bins.width_ns,
        bins: f.bins.bytes.clone(),
        gro: f.gro.clone(),
        shown: [
            f.series.shown(),
            f.reverse
                .and_then(|r| all.get(r))
                .filter(|_| !ack_only)
                .map_or(f.acks.shown(), |r| r.acks.shown()),
            f.analysis
                .as_ref()
                .map(|d| d.rtt_points.shown())
                .unwrap_or_default(),
        ],
    }
}

/// What the what-if did with frames the capture cut short, one note per
/// capture that has such frames (shown in every output).
pub fn snap_notes(files: &[crate::analysis::FileFacts], opts: &Options) -> Vec<String> {
    let mut notes = Vec::new();
    for f in files {
        let s = &f.snap;
        if s.header_only_frames > 0 {
            notes.push(match opts.truncated {
                crate::options::TruncatedFrames::Headers => format!(
                    "{}: {} frames captured header-only (snaplen {}): GRO decided from their headers and wire lengths, their checksums taken as valid, as the kernel takes verified ones (--truncated-frames unmerged passes them up unmerged)",
                    f.path,
                    s.header_only_frames,
                    s.snaplen_seen.unwrap_or(0)
                ),
                crate::options::TruncatedFrames::Unmerged => format!(
                    "{}: {} frames captured header-only (snaplen {}): passed up unmerged (--truncated-frames unmerged)",
                    f.path,
                    s.header_only_frames,
                    s.snaplen_seen.unwrap_or(0)
                ),
            });
        }
        if s.options_cut_frames > 0 {
            notes.push(format!(
                "{}: {} segments without payload cut inside their TCP options (snaplen {}): their SACK blocks and timestamps are unread, so SACK, D-SACK and loss-location figures are not the traffic's; a snaplen of at least {} keeps them",
                f.path,
                s.options_cut_frames,
                s.snaplen_seen.unwrap_or(0),
                s.snaplen_needed.unwrap_or(0)
            ));
        }
        if s.cut_in_headers_frames > 0 {
            notes.push(format!(
                "{}: {} frames cut inside the headers GRO reads (snaplen {}): passed up unmerged; a snaplen of at least {} keeps them",
                f.path,
                s.cut_in_headers_frames,
                s.snaplen_seen.unwrap_or(0),
                s.snaplen_needed.unwrap_or(0)
            ));
        }
    }
    notes
}
