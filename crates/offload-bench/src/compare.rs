//! Comparing two sets of runs: the paired statistics of their figures, and
//! what differed in the state of the hosts they ran on.
//!
//! `offload bench tcp-rr --compare 'A' 'B'` runs A and B interleaved;
//! `offload bench --compare A.json B.json` compares results saved earlier
//! (`--json` of one run or of `--runs N`), typically one host before and
//! after `offload tune --apply`. Either way the report carries, beside the
//! figures, every recorded piece of host state that differs between A and
//! B: kernel, CPUs, sysctls, and per interface its sizes, features, rings,
//! coalescing and sysfs knobs ([`crate::report::HostInfo`]).

use std::collections::BTreeMap;
use std::path::Path;

use offload_report::stats;

use crate::error::BenchError;
use crate::report::{BenchResult, CompareReport, HostInfo, RunsReport, Settings, StateDifference};

/// Paired differences of finished A and B runs (pair i = A's and B's run
/// i), and the differences of state between A's first run and B's.
pub fn compare_results(
    a_options: &str,
    b_options: &str,
    a_runs: Vec<BenchResult>,
    b_runs: Vec<BenchResult>,
) -> CompareReport {
    let f = |v: &[BenchResult], g: fn(&BenchResult) -> Option<f64>| -> Option<Vec<f64>> {
        v.iter().map(g).collect()
    };
    let pd = |g: fn(&BenchResult) -> Option<f64>| match (f(&a_runs, g), f(&b_runs, g)) {
        (Some(x), Some(y)) => stats::paired_difference(&x, &y),
        _ => None,
    };
    let state_differences = match (a_runs.first(), b_runs.first()) {
        (Some(a), Some(b)) => state_differences(&a.settings, &b.settings),
        _ => Vec::new(),
    };
    CompareReport {
        a_options: a_options.into(),
        b_options: b_options.into(),
        transactions_per_sec: pd(|r| Some(r.transactions_per_sec)),
        cpu_seconds_per_transaction: pd(|r| Some(r.cpu_seconds_per_transaction)),
        p99_us: pd(|r| r.latency_us.map(|l| l.p99)),
        mbit_per_sec: pd(|r| (!r.test.is_rr()).then_some(r.bits_per_sec / 1e6)),
        state_differences,
        notes: Vec::new(),
        a_runs,
        b_runs,
    }
}

/// Compares results saved earlier: `a` and `b` are the runs of two files
/// (see [`read_results`]). They must be of the same test; where one has
/// more runs than the other, the extra runs are left out of the pairs
/// (and the report's notes say so).
pub fn compare_saved(
    a_name: &str,
    a: Vec<BenchResult>,
    b_name: &str,
    b: Vec<BenchResult>,
) -> Result<CompareReport, BenchError> {
    let test = |v: &[BenchResult]| v.first().map(|r| r.test);
    if test(&a) != test(&b) {
        return Err(BenchError::Config(format!(
            "{a_name} holds {} results and {b_name} {}: only runs of the same test compare",
            test(&a).map_or("no", |t| t.name()),
            test(&b).map_or("no", |t| t.name()),
        )));
    }
    let (mut a, mut b) = (a, b);
    let n = a.len().min(b.len());
    let mut notes = Vec::new();
    if a.len() != b.len() {
        notes.push(format!(
            "{a_name} has {} runs and {b_name} {}: the first {n} of each are paired",
            a.len(),
            b.len()
        ));
        a.truncate(n);
        b.truncate(n);
    }
    notes.push(format!(
        "runs of {a_name} all came before or after those of {b_name}, not interleaved: \
         a drift of the machine between them is part of the difference"
    ));
    let mut report = compare_results(a_name, b_name, a, b);
    report.notes = notes;
    Ok(report)
}

/// Reads the results of one `offload bench ... --json` output: one run (a
/// result object) or `--runs N` (a summary with its `runs`); JSON Lines of
/// result objects too. `-` is standard input.
pub fn read_results(path: &Path) -> Result<Vec<BenchResult>, BenchError> {
    let shown = path.display().to_string();
    let text = if shown == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|source| BenchError::File {
        file: shown.clone(),
        source,
    })?;
    parse_results(&text).map_err(|what| BenchError::Parse { file: shown, what })
}

/// Parses the text of [`read_results`].
pub fn parse_results(text: &str) -> Result<Vec<BenchResult>, String> {
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        // JSON Lines: one result per line.
        Err(whole) => {
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if lines.len() < 2 {
                return Err(format!("not JSON: {whole}"));
            }
            return lines
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    serde_json::from_str::<BenchResult>(l)
                        .map_err(|e| format!("line {}: not a bench result: {e}", i + 1))
                })
                .collect();
        }
    };
    if value.get("a_runs").is_some() {
        return Err("a --compare report holds two sets of runs: compare files of one set each (--json of a run or of --runs N)".into());
    }
    if value.get("runs").is_some() {
        let r: RunsReport =
            serde_json::from_value(value).map_err(|e| format!("not a --runs summary: {e}"))?;
        if r.runs.is_empty() {
            return Err("a --runs summary without runs".into());
        }
        return Ok(r.runs);
    }
    serde_json::from_value::<BenchResult>(value)
        .map(|r| vec![r])
        .map_err(|e| format!("not the --json output of offload bench: {e}"))
}

/// Every recorded piece of state that differs between two runs' settings:
/// each side's host (kernel, CPUs, sysctls, interfaces and their knobs) and
/// the test's own settings (sizes, flows, socket options...), leaving out
/// what differs from run to run by nature (addresses, pinning read back,
/// notes).
pub fn state_differences(a: &Settings, b: &Settings) -> Vec<StateDifference> {
    let mut out = Vec::new();
    for (side, ha, hb) in [
        ("client", &a.client_host, &b.client_host),
        ("server", &a.server_host, &b.server_host),
    ] {
        diff_maps(side, &host_state(ha), &host_state(hb), &mut out);
    }
    diff_maps("run", &run_state(a), &run_state(b), &mut out);
    out
}

fn diff_maps(
    side: &str,
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
    out: &mut Vec<StateDifference>,
) {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let (va, vb) = (a.get(k), b.get(k));
        if va != vb {
            out.push(StateDifference {
                side: side.into(),
                what: k.clone(),
                a: va.cloned(),
                b: vb.cloned(),
            });
        }
    }
}

/// A host's recorded state as `what -> value`.
fn host_state(h: &HostInfo) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if h.kernel.is_empty() && h.interfaces.is_empty() && h.sysctls.is_empty() {
        // Not described (a server that does not trust the client).
        return m;
    }
    m.insert("kernel".into(), h.kernel.clone());
    m.insert("cpus".into(), h.cpus.to_string());
    for (k, v) in &h.sysctls {
        m.insert(format!("sysctl {k}"), v.clone());
    }
    for i in &h.interfaces {
        let mut put = |what: &str, v: Option<String>| {
            if let Some(v) = v {
                m.insert(format!("{} {what}", i.name), v);
            }
        };
        put("mtu", Some(i.mtu.to_string()));
        put("gso_max_size", i.gso_max_size.map(|v| v.to_string()));
        put("gro_max_size", i.gro_max_size.map(|v| v.to_string()));
        put(
            "gso_ipv4_max_size",
            i.gso_ipv4_max_size.map(|v| v.to_string()),
        );
        put(
            "gro_ipv4_max_size",
            i.gro_ipv4_max_size.map(|v| v.to_string()),
        );
        put("tso_max_size", i.tso_max_size.map(|v| v.to_string()));
        for (k, v) in &i.knobs {
            put(k, Some(v.clone()));
        }
    }
    m
}

/// A run's own settings as `what -> value`: every scalar of [`Settings`]
/// but the hosts, the addresses, what was read back about pinning and the
/// notes, and the buffer sizes read back (the kernel's autotuning moves
/// them from run to run; the requested ones stay).
fn run_state(s: &Settings) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let Ok(serde_json::Value::Object(v)) = serde_json::to_value(s) else {
        return m;
    };
    for (k, v) in v {
        if matches!(
            k.as_str(),
            "client_host"
                | "server_host"
                | "server"
                | "client_pin_used"
                | "server_pin_used"
                | "notes"
                | "sndbuf"
                | "rcvbuf"
        ) {
            continue;
        }
        flatten(&k, &v, &mut m);
    }
    m
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::String(s) => {
            out.insert(prefix.into(), s.clone());
        }
        other => {
            out.insert(prefix.into(), other.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::InterfaceInfo;

    fn host(busy_poll: &str, gro: Option<u64>, rx_gro: &str) -> HostInfo {
        HostInfo {
            kernel: "6.1.0".into(),
            cpus: 2,
            sysctls: [("net.core.busy_poll".to_string(), busy_poll.to_string())].into(),
            interfaces: vec![InterfaceInfo {
                name: "veth0".into(),
                mtu: 1500,
                gro_max_size: gro,
                knobs: [("feature rx-gro".to_string(), rx_gro.to_string())].into(),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn differences_name_the_side_the_knob_and_both_values() {
        let mut a = Settings::default();
        let mut b = Settings::default();
        a.server_host = host("0", Some(65536), "on");
        b.server_host = host("50", None, "on");
        a.client_host = host("0", Some(65536), "on");
        b.client_host = host("0", Some(65536), "off");
        b.nodelay = Some(true);
        let d = state_differences(&a, &b);
        let got: Vec<(&str, &str, Option<&str>, Option<&str>)> = d
            .iter()
            .map(|d| {
                (
                    d.side.as_str(),
                    d.what.as_str(),
                    d.a.as_deref(),
                    d.b.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("client", "veth0 feature rx-gro", Some("on"), Some("off")),
                ("server", "sysctl net.core.busy_poll", Some("0"), Some("50")),
                ("server", "veth0 gro_max_size", Some("65536"), None),
                ("run", "nodelay", None, Some("true")),
            ]
        );
        assert!(state_differences(&a, &a).is_empty());
    }

    #[test]
    fn saved_results_parse_as_one_run_runs_or_lines_and_refuse_the_rest() {
        assert!(parse_results("{\"a_runs\": []}")
            .unwrap_err()
            .contains("--compare report"));
        assert!(parse_results("not json").unwrap_err().contains("not JSON"));
        assert!(parse_results("{\"x\": 1}")
            .unwrap_err()
            .contains("not the --json output"));
    }
}
