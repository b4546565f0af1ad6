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
        "flow_id,file,protocol,src,sport,dst,dport,tunnel,packets,bytes,payload_bytes,start_s,duration_s,throughput_bps,observed_mss,retransmissions,out_of_order,above_mtu,above_mtu_interpretation,ip_id_pattern,df,outer_ip_id_pattern,outer_df,l4_checksum"
    )?;
    for s in sizes {
        write!(w, ",stack_packets_{s},merge_ratio_{s}")?;
    }
    writeln!(w)
}

/// One flow's row; what-if columns past `f.what_if` (an evicted flow has
/// none) are left empty, up to `sizes` of them.
pub fn write_flow_row<W: Write>(w: &mut W, f: &FlowReport, sizes: usize) -> io::Result<()> {
    {
        let tunnel = f
            .tunnel
            .as_ref()
            .map(|t| {
                format!(
                    "vxlan {}:{} -> {}:{} vni {}",
                    t.src, t.sport, t.dst, t.dport, t.vni
                )
            })
            .unwrap_or_default();
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
        for wi in &f.what_if {
            write!(w, ",{},{:.3}", wi.stack_packets, wi.merge_ratio)?;
        }
        for _ in f.what_if.len()..sizes {
            w.write_all(b",,")?;
        }
        writeln!(w)
    }
}
