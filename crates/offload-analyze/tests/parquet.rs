//! Parquet output, in every build: the tables are read back with the
//! parquet crate (every packet, flow and finding, the columns the JSON
//! report has), and the example query of docs/analyze.md runs in DuckDB.

use offload_analyze::{analyze, Options};
use offload_capture::Control;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
}

fn run(dir: &Path, names: &[&str]) -> offload_analyze::Analysis {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let opts = Options {
        parquet_dir: Some(dir.to_path_buf()),
        ..Options::default()
    };
    let paths: Vec<PathBuf> = names.iter().map(|n| sample(n)).collect();
    let a = analyze(&paths, &opts, &mut ctl).unwrap();
    offload_analyze::columnar::write_tables(&a.report, dir).unwrap();
    a
}

/// One row: (column, value) pairs.
type Row = Vec<(String, Field)>;

/// Row count, column names and all rows of a Parquet file.
fn read(path: &Path) -> (i64, Vec<String>, Vec<Row>) {
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let md = r.metadata().file_metadata();
    let names = md
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let n = md.num_rows();
    let rows = r
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect();
    (n, names, rows)
}

fn get<'a>(row: &'a [(String, Field)], name: &str) -> &'a Field {
    &row.iter().find(|(k, _)| k == name).unwrap().1
}

#[test]
fn parquet_tables_hold_every_packet_flow_and_finding() {
    let d = tempfile::tempdir().unwrap();
    let a = run(d.path(), &["vxlan-broken.pcapng"]);
    let (packets, cols, _) = read(&d.path().join("packets.parquet"));
    let dissected = a.report.inputs[0].frames - a.report.inputs[0].unparsed_frames;
    assert_eq!(packets as u64, dissected);
    assert!(cols.contains(&"outer_ip_id".to_string()));
    assert!(cols.contains(&"captured_len".to_string()));

    let (n, cols, rows) = read(&d.path().join("flows.parquet"));
    assert_eq!(n as usize, a.report.flows.len());
    for c in [
        "id",
        "file",
        "stack_packets_185000",
        "merge_ratio_65536",
        "above_mtu_packets",
        "tunnel_outer_ip_df",
        "ip_ip_id_pattern",
    ] {
        assert!(cols.contains(&c.to_string()), "{c} not in {cols:?}");
    }
    for (f, row) in a.report.flows.iter().zip(&rows) {
        assert_eq!(get(row, "id"), &Field::Long(f.id as i64));
        assert_eq!(get(row, "packets"), &Field::Long(f.packets as i64));
        assert_eq!(
            get(row, "stack_packets_65536"),
            &Field::Long(f.what_if[0].stack_packets as i64)
        );
    }

    let (n, cols, rows) = read(&d.path().join("flow_what_if.parquet"));
    let sizes = a.report.settings.gro_max_sizes.len();
    assert_eq!(n as usize, a.report.flows.len() * sizes);
    assert!(cols.contains(&"healthy_tunnel_packets".to_string()));
    let tunnel = a.report.flows.iter().find(|f| f.tunnel.is_some()).unwrap();
    let row = rows
        .iter()
        .find(|r| {
            get(r, "flow_id") == &Field::Long(tunnel.id as i64)
                && get(r, "gro_max_size") == &Field::Long(65536)
        })
        .unwrap();
    assert_eq!(
        get(row, "healthy_tunnel_packets"),
        &Field::Long(tunnel.what_if[0].healthy_tunnel_packets.unwrap() as i64)
    );

    let (n, cols, rows) = read(&d.path().join("findings.parquet"));
    assert_eq!(n as usize, a.report.findings.len());
    assert!(cols.contains(&"flow_id".to_string()), "{cols:?}");
    assert_eq!(get(&rows[0], "severity"), &Field::Str("high".into()));
    assert_eq!(get(&rows[0], "kind"), &Field::Str("ip-id-rule".into()));
}

/// `flows.csv` and `flows.parquet` carry each flow's TCP figures (window,
/// RTT, retransmissions, spurious ones, duplicate ACKs, SACK, zero window,
/// loss and reordering with their location) under the same column names,
/// with the values of `--json`.
#[test]
fn flows_csv_and_parquet_carry_the_tcp_figures() {
    let d = tempfile::tempdir().unwrap();
    let a = run(d.path(), &["healthy-tcp.pcapng"]);
    offload_analyze::export::write_flows_csv(&a.report, d.path()).unwrap();
    let csv = std::fs::read_to_string(d.path().join("flows.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let csv_rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(csv_rows.len(), a.report.flows.len());
    let (_, cols, pq_rows) = read(&d.path().join("flows.parquet"));
    let mut checked = 0;
    for (f, (csv_row, pq_row)) in a.report.flows.iter().zip(csv_rows.iter().zip(&pq_rows)) {
        // The JSON record, flattened as both tables name its columns.
        let json = serde_json::to_value(f).unwrap();
        for name in offload_analyze::export::TCP_COLUMNS {
            assert!(
                cols.contains(&name.to_string()),
                "{name} not in flows.parquet"
            );
            let i = header.iter().position(|h| *h == name).unwrap();
            let cell = csv_row[i];
            let path: Vec<&str> = name.strip_prefix("tcp_").unwrap().split('_').collect();
            // Walk the JSON: keys hold underscores themselves, so take the
            // longest key that matches at each level. A field the record
            // leaves out (the shift of an unknown scale) is NULL.
            const NULL: serde_json::Value = serde_json::Value::Null;
            let mut v = &json["tcp"];
            let mut k = 0;
            while k < path.len() {
                let found = (k + 1..=path.len()).rev().find_map(|e| {
                    let key = path[k..e].join("_");
                    v.get(&key).map(|x| (x, e))
                });
                let Some((next, used)) = found else {
                    v = &NULL;
                    break;
                };
                v = next;
                k = used;
            }
            let pq = get(pq_row, name);
            match v {
                serde_json::Value::Null => {
                    assert_eq!(cell, "", "{name}");
                    assert_eq!(pq, &Field::Null, "{name}");
                }
                serde_json::Value::Bool(b) => {
                    assert_eq!(cell, b.to_string(), "{name}");
                    assert_eq!(pq, &Field::Bool(*b), "{name}");
                }
                serde_json::Value::String(t) => {
                    assert_eq!(cell, t, "{name}");
                    assert_eq!(pq, &Field::Str(t.clone()), "{name}");
                }
                serde_json::Value::Number(n) if n.is_u64() => {
                    assert_eq!(cell, n.to_string(), "{name}");
                    assert_eq!(pq, &Field::Long(n.as_u64().unwrap() as i64), "{name}");
                }
                serde_json::Value::Number(n) => {
                    let x = n.as_f64().unwrap();
                    assert_eq!(cell.parse::<f64>().unwrap(), x, "{name}");
                    assert_eq!(pq, &Field::Double(x), "{name}");
                }
                other => panic!("{name}: {other}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
    // The bulk direction has round trips, a scaled window and its peer.
    let bulk = a
        .report
        .flows
        .iter()
        .max_by_key(|f| f.payload_bytes)
        .and_then(|f| f.tcp.as_ref())
        .unwrap();
    assert!(bulk.peer_captured && bulk.rtt.samples > 0 && bulk.window.max > 0);
}

/// The query of docs/analyze.md ("Querying many captures") in DuckDB:
/// the worst flows over several captures' tables.
#[test]
#[ignore = "needs DuckDB's Python package: .ci/install installs it; scripts/test.sh runs it"]
fn the_documented_duckdb_query_runs_over_several_captures() {
    let root = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    let mut tcp_flows = Vec::new();
    for name in ["vxlan-broken.pcapng", "healthy-tcp.pcapng"] {
        let d = root.path().join(name.trim_end_matches(".pcapng"));
        std::fs::create_dir(&d).unwrap();
        let a = run(&d, &[name]);
        for f in &a.report.flows {
            if let Some(t) = &f.tcp {
                tcp_flows.push((
                    f.description.clone(),
                    t.loss.lost_before_capture,
                    t.rtt
                        .median_ms
                        .map_or("None".to_string(), |m| m.to_string()),
                ));
            }
        }
        for f in &a.report.findings {
            if f.severity == offload_report::Severity::High {
                expected.push((f.kind.to_string(), f.extra_packets));
            }
        }
    }
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/analyze.md"),
    )
    .unwrap();
    // The query between the markers in the doc, run as written from the
    // folder that holds one sub-folder per capture.
    let q = doc
        .split("```sql\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("an sql block in docs/analyze.md");
    let script = "import duckdb, json, sys\nrows = duckdb.sql(sys.argv[1]).fetchall()\nprint(json.dumps([[str(c) for c in r] for r in rows]))\n";
    let out = std::process::Command::new("python3")
        .current_dir(root.path())
        .args(["-c", script, q])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!expected.is_empty());
    // The second query: every TCP flow of both captures, with its figures.
    let q2 = doc
        .split("```sql\n")
        .nth(2)
        .and_then(|s| s.split("```").next())
        .expect("a second sql block in docs/analyze.md");
    let out = std::process::Command::new("python3")
        .current_dir(root.path())
        .args(["-c", script, q2])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tcp_rows: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tcp_rows.len(), tcp_flows.len(), "{tcp_rows:?}");
    for (desc, lost, rtt) in &tcp_flows {
        assert!(
            tcp_rows
                .iter()
                .any(|r| &r[1] == desc && r[2] == lost.to_string() && &r[7] == rtt),
            "{desc} lost {lost} rtt {rtt} not in {tcp_rows:?}"
        );
    }
    // One row per high finding, with its kind and extra packets.
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for (kind, extra) in &expected {
        // A finding that costs nothing has a null extra_packets (Python's None).
        let extra = extra.map_or("None".to_string(), |v| v.to_string());
        assert!(
            rows.iter().any(|r| r.contains(kind) && r.contains(&extra)),
            "{kind} {extra} not in {rows:?}"
        );
    }
}
