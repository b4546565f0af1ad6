//! A live run as OpenMetrics text, for a Prometheus scrape or
//! node_exporter's textfile collector, so a fleet can watch GRO
//! effectiveness per device.
//!
//! The format is OpenMetrics 1.0 (the `application/openmetrics-text`
//! exposition of the Prometheus project, openmetrics.io): per family a
//! `# TYPE` and a `# HELP` line, then its samples, label values escaped
//! (`\\`, `\"`, `\n`), and `# EOF` last. A run measures a window, so
//! every figure is a gauge over that window (rates per second, ratios,
//! sizes), not a counter a scraper could mistake for a since-boot total.
//! Devices are labelled by name, namespace inode and ifindex: names repeat
//! across namespaces, identities do not.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::{LiveDevice, LiveReport};
use offload_sys::error::{Error, Result};

/// Escapes a label value (OpenMetrics: backslash, double quote, newline).
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn labels(d: &LiveDevice, extra: Option<(&str, &str)>) -> String {
    let mut s = format!(
        "device=\"{}\",netns=\"{}\",ifindex=\"{}\"",
        escape_label(&d.name),
        d.netns,
        d.ifindex
    );
    if let Some((k, v)) = extra {
        let _ = write!(s, ",{k}=\"{}\"", escape_label(v));
    }
    s
}

/// A float as OpenMetrics writes it (always with a decimal point or
/// exponent; never NaN here).
fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v:?}")
    } else {
        "0.0".to_string()
    }
}

/// The OpenMetrics text of a live run, ending in `# EOF`.
pub fn render(report: &LiveReport) -> String {
    let secs = report.seconds.max(f64::MIN_POSITIVE);
    let rate = |n: u64| n as f64 / secs;
    let mut out = String::new();
    let mut family = |name: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "# HELP {name} {help}");
        for (l, v) in samples {
            if l.is_empty() {
                let _ = writeln!(out, "{name} {}", number(v));
            } else {
                let _ = writeln!(out, "{name}{{{l}}} {}", number(v));
            }
        }
    };
    let per_dev = |f: &dyn Fn(&LiveDevice) -> Option<f64>| -> Vec<(String, f64)> {
        report
            .devices
            .iter()
            .filter_map(|d| f(d).map(|v| (labels(d, None), v)))
            .collect()
    };
    family(
        "offload_gro_window_seconds",
        "Length of the window the other offload_gro figures are measured over.",
        vec![(String::new(), report.seconds)],
    );
    family(
        "offload_gro_in_packets_per_second",
        "Packets handed to GRO per second (napi_gro_receive_entry, napi_gro_frags_entry).",
        per_dev(&|d| Some(rate(d.counts.gro_in))),
    );
    family(
        "offload_gro_out_packets_per_second",
        "Packets out of GRO per second (GRO_HELD plus GRO_NORMAL results).",
        per_dev(&|d| Some(rate(d.gro_out))),
    );
    let mut results = Vec::new();
    for d in &report.devices {
        for (what, n) in [
            ("merged", d.counts.merged),
            ("held", d.counts.held),
            ("normal", d.counts.normal),
            ("consumed", d.counts.consumed),
        ] {
            results.push((labels(d, Some(("result", what))), rate(n)));
        }
    }
    family(
        "offload_gro_result_packets_per_second",
        "GRO's result per packet per second: merged into a held packet, held (a new super-packet), normal (passed up unmerged), consumed.",
        results,
    );
    family(
        "offload_gro_merge_ratio",
        "Packets into GRO per packet out of GRO (1: GRO merges nothing); absent without GRO traffic.",
        per_dev(&|d| d.merge_ratio),
    );
    family(
        "offload_gro_stack_packets_per_second",
        "Packets entering the stack on the device per second (netif_receive_skb).",
        per_dev(&|d| Some(rate(d.counts.stack))),
    );
    family(
        "offload_gro_bypassed_packets_per_second",
        "Packets entering the stack per second that did not come out of GRO on the device.",
        per_dev(&|d| Some(rate(d.bypassed_gro))),
    );
    family(
        "offload_gro_in_bytes_per_packet",
        "Mean skb->len of packets into GRO; absent without them.",
        per_dev(&|d| d.gro_in_bytes_per_packet),
    );
    family(
        "offload_gro_stack_bytes_per_packet",
        "Mean skb->len of packets into the stack; absent without them.",
        per_dev(&|d| d.stack_bytes_per_packet),
    );
    family(
        "offload_gro_largest_stack_packet_bytes",
        "Largest packet into the stack in the window (a BIG TCP super-packet exceeds 65536).",
        per_dev(&|d| Some(d.counts.stack_largest as f64)),
    );
    out.push_str("# EOF\n");
    out
}

/// Writes `text` to `path` for node_exporter's textfile collector,
/// atomically: into a new file (`O_CREAT|O_EXCL|O_NOFOLLOW`) in a private
/// directory made next to `path` (same filesystem, a name without `.prom`,
/// so the collector never reads a half-written file), then `rename(2)`
/// over `path`. The directory is removed on every exit path
/// (offload_capture::tempfiles). The file is made readable by all (0644):
/// the collector may run as another user.
pub fn write_textfile(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display().to_string();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Err(Error::sys(
            format!("--textfile {shown}: not a file path"),
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    }
    let dir = offload_capture::tempfiles::PrivateDir::new_in(parent, "textfile")
        .map_err(|e| Error::sys(format!("--textfile {shown}: temporary directory"), e))?;
    let (tmp, mut file) = dir
        .create_file("metrics.prom")
        .map_err(|e| Error::sys(format!("--textfile {shown}: temporary file"), e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(0o644)))
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::sys(format!("write {}", tmp.display()), e))?;
    drop(file);
    std::fs::rename(&tmp, path)
        .map_err(|e| Error::sys(format!("rename {} to {shown}", tmp.display()), e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{DeviceId, GroTotals};

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
    }

    #[test]
    fn render_ends_in_eof_and_omits_undefined_ratios() {
        let counts = GroTotals {
            gro_in: 40,
            gro_in_bytes: 40 * 1514,
            held: 1,
            merged: 39,
            stack: 1,
            stack_bytes: 40 * 1448 + 52,
            stack_largest: 40 * 1448 + 52,
            ..GroTotals::default()
        };
        let idle = LiveDevice::new(
            "b\"q",
            DeviceId {
                netns: 7,
                ifindex: 3,
            },
            GroTotals::default(),
        );
        let busy = LiveDevice::new(
            "a",
            DeviceId {
                netns: 7,
                ifindex: 2,
            },
            counts,
        );
        let report = LiveReport {
            seconds: 2.0,
            devices: vec![busy, idle],
            softnet: Vec::new(),
            intervals: Vec::new(),
            hw_offload: Vec::new(),
            interrupted: false,
        };
        let text = render(&report);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("offload_gro_merge_ratio{device=\"a\",netns=\"7\",ifindex=\"2\"} 40.0\n")
        );
        assert!(!text.contains("offload_gro_merge_ratio{device=\"b"));
        assert!(text.contains("device=\"b\\\"q\""));
        assert!(text.contains(
            "offload_gro_in_packets_per_second{device=\"a\",netns=\"7\",ifindex=\"2\"} 20.0\n"
        ));
    }
}
