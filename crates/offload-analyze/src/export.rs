//! CSV rendering of the report: one row per flow (`flows.csv`). The
//! per-packet table is written during the pass by [`crate::packets`].

use crate::report::Report;
use std::io::{self, Write};
use std::path::Path;

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes `flows.csv` (and, when `packets` was collected during the pass,
/// nothing more: `packets.csv` is already there) into `dir`.
pub fn write_flows_csv(report: &Report, dir: &Path) -> io::Result<()> {
    let mut w = io::BufWriter::new(std::fs::File::create(dir.join("flows.csv"))?);
    let sizes = &report.settings.gro_max_sizes;
    write!(
        w,
        "flow_id,file,protocol,src,sport,dst,dport,tunnel,packets,bytes,payload_bytes,start_s,duration_s,throughput_bps,observed_mss,retransmissions,out_of_order,above_mtu,above_mtu_interpretation,ip_id_pattern,df,outer_ip_id_pattern,outer_df,l4_checksum"
    )?;
    for s in sizes {
        write!(w, ",stack_packets_{s},merge_ratio_{s}")?;
    }
    writeln!(w)?;
    for f in &report.flows {
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
        let pat = |p: crate::flow::IdPattern| p.name().to_string();
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
        writeln!(w)?;
    }
    w.flush()?;
    Ok(())
}
