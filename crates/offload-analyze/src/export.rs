//! CSV rendering of the report: one row per flow (`flows.csv`). The
//! per-packet table is written during the pass by [`crate::packets`].

use crate::report::{FlowReport, Report};
use std::io::{self, Write};
use std::path::Path;

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes `flows.csv` into `dir`: the report's flows, then the rows of
/// flows evicted during the pass (streamed to `flows.csv.evicted` by the
/// pass; see `Options::evicted_csv`), which is then removed.
pub fn write_flows_csv(report: &Report, dir: &Path) -> io::Result<()> {
    let mut w = io::BufWriter::new(std::fs::File::create(dir.join("flows.csv"))?);
    let sizes = &report.settings.gro_max_sizes;
    write_flows_header(&mut w, sizes)?;
    for f in &report.flows {
        write_flow_row(&mut w, f, sizes.len())?;
    }
    let evicted = evicted_path(dir);
    if let Ok(mut e) = std::fs::File::open(&evicted) {
        io::copy(&mut e, &mut w)?;
        drop(e);
        std::fs::remove_file(&evicted)?;
    }
    w.flush()
}

/// Where the pass streams evicted flows' rows for `write_flows_csv`.
pub fn evicted_path(dir: &Path) -> std::path::PathBuf {
    dir.join("flows.csv.evicted")
}

/// The header line of `flows.csv`.
pub fn write_flows_header<W: Write>(w: &mut W, sizes: &[u32]) -> io::Result<()> {
    write!(
        w,
        "flow_id,file,protocol,src,sport,dst,dport,tunnel,packets,bytes,payload_bytes,start_s,duration_s,throughput_bps,observed_mss,retransmissions,out_of_order,above_mtu,above_mtu_interpretation,ip_id_pattern,df,outer_ip_id_pattern,outer_df,l4_checksum,{}",
        TCP_COLUMNS.join(",")
    )?;
    for s in sizes {
        write!(w, ",stack_packets_{s},merge_ratio_{s}")?;
    }
    writeln!(w)
}

/// The per-flow TCP figures of `flows.csv`: `flows[].tcp` of `--json`,
/// flattened with `_` under the same names as `flows.parquet`'s columns
/// (`tcp_window_scale_state` is `shift`, `not-used` or `unknown`: no
/// handshake, windows are the raw field), empty for other protocols.
pub const TCP_COLUMNS: [&str; 27] = [
    "tcp_peer_captured",
    "tcp_window_scale_state",
    "tcp_window_scale_shift",
    "tcp_window_min",
    "tcp_window_max",
    "tcp_window_zero_window_s",
    "tcp_window_zero_window_episodes",
    "tcp_wireshark_window_full",
    "tcp_rtt_samples",
    "tcp_rtt_min_ms",
    "tcp_rtt_median_ms",
    "tcp_rtt_max_ms",
    "tcp_bytes_in_flight_max",
    "tcp_wireshark_retransmissions",
    "tcp_wireshark_spurious_retransmissions",
    "tcp_wireshark_duplicate_acks",
    "tcp_sack_acks_with_sack",
    "tcp_sack_blocks",
    "tcp_sack_dsack",
    "tcp_loss_lost_before_capture",
    "tcp_loss_lost_after_capture",
    "tcp_loss_spurious",
    "tcp_loss_reordered_before_capture",
    "tcp_loss_reordered_after_capture",
    "tcp_ecn_ce_marked",
    "tcp_ecn_ece",
    "tcp_ecn_cwr",
];

/// The [`TCP_COLUMNS`] cells of one flow (all empty for a flow without
/// TCP analysis).
fn tcp_cells(t: Option<&crate::tcp::report::TcpReport>) -> Vec<String> {
    use crate::tcp::scale::WindowScale;
    let Some(t) = t else {
        return vec![String::new(); TCP_COLUMNS.len()];
    };
    let opt = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
    let ms = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let (state, shift) = match t.window.scale {
        WindowScale::Shift(s) => ("shift", s.to_string()),
        WindowScale::NotUsed => ("not-used", String::new()),
        WindowScale::Unknown => ("unknown", String::new()),
    };
    let (ws, l) = (&t.wireshark, &t.loss);
    vec![
        t.peer_captured.to_string(),
        state.into(),
        shift,
        opt(t.window.min),
        t.window.max.to_string(),
        t.window.zero_window_s.to_string(),
        t.window.zero_window_episodes.to_string(),
        ws.window_full.to_string(),
        t.rtt.samples.to_string(),
        ms(t.rtt.min_ms),
        ms(t.rtt.median_ms),
        ms(t.rtt.max_ms),
        t.bytes_in_flight_max.to_string(),
        ws.retransmissions.to_string(),
        ws.spurious_retransmissions.to_string(),
        ws.duplicate_acks.to_string(),
        t.sack.acks_with_sack.to_string(),
        t.sack.blocks.to_string(),
        t.sack.dsack.to_string(),
        l.lost_before_capture.to_string(),
        l.lost_after_capture.to_string(),
        l.spurious.to_string(),
        l.reordered_before_capture.to_string(),
        l.reordered_after_capture.to_string(),
        t.ecn.ce_marked.to_string(),
        t.ecn.ece.to_string(),
        t.ecn.cwr.to_string(),
    ]
}

/// One flow's row; what-if columns past `f.what_if` (an evicted flow has
/// none) are left empty, up to `sizes` of them.
pub fn write_flow_row<W: Write>(w: &mut W, f: &FlowReport, sizes: usize) -> io::Result<()> {
    {
        let tunnel = f.tunnel.as_ref().map(|t| t.label()).unwrap_or_default();
        let interp = serde_json::to_value(f.above_mtu.interpretation)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let pat = |p: offload::gro::IpIdPattern| p.name().to_string();
        write!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.0},{},{},{},{},{},{},{},{},{},{}",
            f.id,
            csv_field(&f.file),
            f.protocol,
            f.src,
            f.sport,
            f.dst,
            f.dport,
            csv_field(&tunnel),
            f.packets,
            f.bytes,
            f.payload_bytes,
            f.start_s,
            f.duration_s,
            f.throughput_bps,
            f.observed_mss.map(|m| m.to_string()).unwrap_or_default(),
            f.retransmissions,
            f.out_of_order,
            f.above_mtu.packets,
            interp,
            pat(f.ip.ip_id_pattern),
            f.ip.df,
            f.tunnel
                .as_ref()
                .map(|t| pat(t.outer_ip.ip_id_pattern))
                .unwrap_or_default(),
            f.tunnel.as_ref().map(|t| t.outer_ip.df).unwrap_or_default(),
            f.l4_checksum,
        )?;
        for c in tcp_cells(f.tcp.as_ref()) {
            write!(w, ",{c}")?;
        }
        for wi in &f.what_if {
            write!(w, ",{},{:.3}", wi.stack_packets, wi.merge_ratio)?;
        }
        for _ in f.what_if.len()..sizes {
            w.write_all(b",,")?;
        }
        writeln!(w)
    }
}
