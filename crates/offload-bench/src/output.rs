//! `--output FILE`: one row per run, for fleets' regression tooling.
//!
//! Field names are those of k8s-netperf's indexed documents (`profile`,
//! `messageSize`, `parallelism`, `throughput`, `tputMetric`, `latency`,
//! `ltcyMetric`, `tcpRetransmits`, `udpLossPercent`, `samples`, `driver`,
//! `uuid`, `timestamp`, `hostNetwork`, `local`, `service`, `acrossAZ`), so that
//! dashboards and Elasticsearch/OpenSearch queries written for it read our
//! rows unchanged; the rest (latency percentiles, CPU, knobs, host) uses the
//! same camelCase. `.jsonl` files are appended to (one JSON object per line);
//! `.parquet` files are rewritten after each run with every row of the
//! invocation (Parquet cannot be appended to), so an interrupted series
//! still leaves a valid file. DuckDB reads both: see docs/bench.md.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::TestKind;
use crate::error::BenchError;
use crate::report::BenchResult;

/// One run, flattened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    /// One id per invocation (every run of a `--runs` or `--compare`).
    pub uuid: String,
    /// End of the run, RFC 3339 UTC.
    pub timestamp: String,
    /// Always `offload`.
    pub driver: String,
    /// netperf's test name: TCP_RR, TCP_CRR, TCP_STREAM, UDP_RR, UDP_STREAM.
    pub profile: String,
    /// Flows (k8s-netperf: concurrent clients).
    pub parallelism: u32,
    /// Measurement window, seconds.
    pub duration: f64,
    /// Runs in the invocation.
    pub samples: u32,
    /// This run's number (1-based).
    pub run: u32,
    /// Request bytes (rr) or write / datagram size (stream).
    pub message_size: u32,
    /// Response bytes (rr) or read size (stream).
    pub response_size: u32,
    /// Requests in flight per connection.
    pub burst: u32,
    /// OP/s for request/response, Mb/s for stream tests (k8s-netperf's
    /// units).
    pub throughput: f64,
    /// `OP/s` or `Mb/s`.
    pub tput_metric: String,
    /// P99 latency (k8s-netperf's `latency`), microseconds.
    pub latency: Option<f64>,
    /// `usec`.
    pub ltcy_metric: String,
    /// Latency percentiles, microseconds (rr tests).
    pub latency_min: Option<f64>,
    /// Median latency.
    pub latency_p50: Option<f64>,
    /// 90th percentile.
    pub latency_p90: Option<f64>,
    /// 99th percentile.
    pub latency_p99: Option<f64>,
    /// 99.9th percentile.
    pub latency_p999: Option<f64>,
    /// Largest.
    pub latency_max: Option<f64>,
    /// Retransmitted segments over every flow (TCP_INFO).
    pub tcp_retransmits: Option<f64>,
    /// Datagrams lost in percent of those sent (UDP).
    pub udp_loss_percent: Option<f64>,
    /// Transactions (or stream messages) per second.
    pub transactions_per_sec: f64,
    /// Payload bits per second.
    pub bits_per_sec: f64,
    /// Datagrams per second (UDP).
    pub packets_per_sec: f64,
    /// Machine CPU-microseconds per transaction.
    pub cpu_us_per_transaction: f64,
    /// Machine busy, percent of all CPUs.
    pub machine_cpu_percent: f64,
    /// Client threads, percent of all CPUs.
    pub client_cpu_percent: f64,
    /// Server threads, percent of all CPUs.
    pub server_cpu_percent: f64,
    /// Median smoothed RTT over flows (TCP_INFO), microseconds.
    pub rtt_p50_us: Option<f64>,
    /// 99th percentile over flows of the smoothed RTT, microseconds.
    pub rtt_p99_us: Option<f64>,
    /// The benchmark ran in the host's network namespace (no overlay).
    pub host_network: bool,
    /// The server's address is a loopback address.
    pub local: bool,
    /// Always false (no Kubernetes service in the path).
    pub service: bool,
    /// Always false.
    #[serde(rename = "acrossAZ")]
    pub across_az: bool,
    /// Client threads.
    pub threads: u32,
    /// Server threads.
    pub server_threads: u32,
    /// IPv6 data path.
    pub ipv6: bool,
    /// TCP_NODELAY as read back.
    pub nodelay: Option<bool>,
    /// SO_REUSEPORT receivers.
    pub reuseport: bool,
    /// Messages per recvmmsg/sendmmsg.
    pub batch: u32,
    /// UDP_GRO.
    pub udp_gro: bool,
    /// UDP_SEGMENT size.
    pub udp_gso: Option<u32>,
    /// SO_BUSY_POLL microseconds.
    pub busy_poll: Option<u32>,
    /// udp-stream receivers' coalescing sleep after a read that empties
    /// their socket (`--rx-usecs`), microseconds; null when off.
    pub rx_usecs: Option<u32>,
    /// Effective SO_SNDBUF of a client data socket, as read back (the
    /// kernel doubles what was asked).
    pub sndbuf: Option<u32>,
    /// Effective SO_RCVBUF of a client data socket, as read back.
    pub rcvbuf: Option<u32>,
    /// `--sndbuf` as asked; null when left to the kernel.
    pub sndbuf_requested: Option<u32>,
    /// `--rcvbuf` as asked.
    pub rcvbuf_requested: Option<u32>,
    /// Stream direction: `client-to-server` or `server-to-client`
    /// (`--reverse`); null for request/response.
    pub direction: Option<String>,
    /// tcp-crr close mode: `normal` or `reset`; null for other tests.
    pub close_mode: Option<String>,
    /// `--rate` (transactions or datagrams per second), null when as fast
    /// as possible.
    pub rate: Option<f64>,
    /// Warm-up seconds excluded from the figures.
    pub warmup: f64,
    /// Client engine: `blocking`, `epoll`, `sendmmsg`, `send` or `null`.
    pub engine: String,
    /// TCP data listeners of the server.
    pub listeners: u32,
    /// `--null`: the tool's own overhead, no I/O.
    pub no_io: bool,
    /// Client CPUs, as pinned (`0`, `0,1`), empty when not pinned.
    pub client_pin: String,
    /// Server CPUs, as pinned.
    pub server_pin: String,
    /// Client and server counts agree.
    pub consistent: bool,
    /// The client's kernel.
    pub kernel: String,
    /// The client's host name.
    pub hostname: String,
    /// Online CPUs of the client's host.
    pub cpus: u32,
}

fn profile(kind: TestKind) -> &'static str {
    match kind {
        TestKind::TcpRr => "TCP_RR",
        TestKind::TcpCrr => "TCP_CRR",
        TestKind::TcpStream => "TCP_STREAM",
        TestKind::UdpRr => "UDP_RR",
        TestKind::UdpStream => "UDP_STREAM",
    }
}

/// Formats a Unix time as RFC 3339 UTC (`2026-11-22T14:05:09Z`).
pub fn rfc3339(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The serde name of a unit enum value (`server-to-client`).
fn name_of<T: Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
}

fn pins(p: &[Vec<usize>]) -> String {
    let mut cpus: Vec<usize> = p.iter().flatten().copied().collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl RunRow {
    /// The row of one run.
    pub fn new(r: &BenchResult, uuid: &str, run: u32, samples: u32) -> Self {
        let s = &r.settings;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let lat = |f: fn(&crate::report::LatencyUs) -> f64| r.latency_us.as_ref().map(f);
        let rr = r.test.is_rr();
        let all_pinned = |p: &[Vec<usize>]| {
            let cpus = r.settings.client_host.cpus.max(1);
            if p.iter().all(|c| c.len() >= cpus) {
                String::new()
            } else {
                pins(p)
            }
        };
        RunRow {
            uuid: uuid.into(),
            timestamp: rfc3339(now),
            driver: "offload".into(),
            profile: profile(r.test).into(),
            parallelism: s.flows,
            duration: s.duration_seconds,
            samples,
            run,
            message_size: s.request,
            response_size: s.response,
            burst: s.burst.max(1),
            throughput: if rr {
                r.transactions_per_sec
            } else {
                r.bits_per_sec / 1e6
            },
            tput_metric: if rr { "OP/s" } else { "Mb/s" }.into(),
            latency: lat(|l| l.p99),
            ltcy_metric: "usec".into(),
            latency_min: lat(|l| l.min),
            latency_p50: lat(|l| l.p50),
            latency_p90: lat(|l| l.p90),
            latency_p99: lat(|l| l.p99),
            latency_p999: lat(|l| l.p999),
            latency_max: lat(|l| l.max),
            tcp_retransmits: r.tcp_info.as_ref().map(|t| t.retransmits_total as f64),
            udp_loss_percent: r.udp.as_ref().map(|u| {
                if u.sent > 0 {
                    100.0 * u.lost as f64 / u.sent as f64
                } else {
                    0.0
                }
            }),
            transactions_per_sec: r.transactions_per_sec,
            bits_per_sec: r.bits_per_sec,
            packets_per_sec: r.packets_per_sec,
            cpu_us_per_transaction: r.cpu_seconds_per_transaction * 1e6,
            machine_cpu_percent: r.cpu.machine_utilization_percent,
            client_cpu_percent: r.cpu.client_percent,
            server_cpu_percent: r.cpu.server_percent,
            rtt_p50_us: r.tcp_info.as_ref().map(|t| t.rtt_us.median),
            rtt_p99_us: r.tcp_info.as_ref().map(|t| t.rtt_us.p99),
            host_network: true,
            local: s
                .server
                .parse::<std::net::SocketAddr>()
                .is_ok_and(|a| a.ip().is_loopback()),
            service: false,
            across_az: false,
            threads: s.threads,
            server_threads: s.server_threads,
            ipv6: s.ipv6,
            nodelay: s.nodelay,
            reuseport: s.reuseport,
            batch: s.batch,
            udp_gro: s.udp_gro,
            udp_gso: s.udp_gso.map(u32::from),
            busy_poll: s.busy_poll_us,
            rx_usecs: s.rx_usecs,
            sndbuf: s.sndbuf,
            rcvbuf: s.rcvbuf,
            sndbuf_requested: s.sndbuf_requested,
            rcvbuf_requested: s.rcvbuf_requested,
            direction: s.direction.and_then(|d| name_of(&d)),
            close_mode: s.close_mode.and_then(|c| name_of(&c)),
            rate: s.rate,
            warmup: s.warmup_seconds,
            engine: s.engine.clone(),
            listeners: s.listeners,
            no_io: s.null,
            client_pin: all_pinned(&s.client_pin_used),
            server_pin: all_pinned(&s.server_pin_used),
            consistent: r.counts.consistent,
            kernel: s.client_host.kernel.clone(),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            cpus: s.client_host.cpus as u32,
        }
    }
}

/// Writes run rows to a `.jsonl` or `.parquet` file.
#[derive(Debug)]
pub struct RowWriter {
    path: PathBuf,
    parquet: bool,
    uuid: String,
    rows: Vec<RunRow>,
    samples: u32,
}

impl RowWriter {
    /// Opens (creates) `path`; its extension picks the format.
    pub fn open(path: &Path) -> Result<Self, BenchError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        let parquet = match ext.as_deref() {
            Some("jsonl") | Some("ndjson") => false,
            Some("parquet") => true,
            _ => {
                return Err(BenchError::Config(format!(
                    "--output {}: the name must end in .jsonl or .parquet",
                    path.display()
                )))
            }
        };
        if parquet && !cfg!(feature = "parquet") {
            return Err(BenchError::Config(format!(
                "--output {}: this build has no Parquet support (cargo feature `parquet` of offload-bench)",
                path.display()
            )));
        }
        // Fail now, not after the first run, if the file cannot be written.
        let probe = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| BenchError::File {
                file: path.display().to_string(),
                source,
            })?;
        drop(probe);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Ok(RowWriter {
            path: path.to_path_buf(),
            parquet,
            uuid: format!("{:032x}", now ^ (u128::from(std::process::id()) << 96)),
            rows: Vec::new(),
            samples: 0,
        })
    }

    /// How many runs the invocation makes (the rows' `samples`).
    pub fn set_samples(&mut self, samples: u32) {
        self.samples = samples;
    }

    /// Writes the row of run `run`.
    pub fn write(&mut self, r: &BenchResult, run: u32) -> Result<(), BenchError> {
        let row = RunRow::new(r, &self.uuid, run, self.samples.max(run));
        let file_err = |source| BenchError::File {
            file: self.path.display().to_string(),
            source,
        };
        if self.parquet {
            self.rows.push(row);
            return write_parquet(&self.path, &self.rows);
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(file_err)?;
        let line = serde_json::to_string(&row).map_err(|e| BenchError::Parse {
            file: self.path.display().to_string(),
            what: e.to_string(),
        })?;
        writeln!(f, "{line}").map_err(file_err)
    }
}

#[cfg(not(feature = "parquet"))]
fn write_parquet(path: &Path, _rows: &[RunRow]) -> Result<(), BenchError> {
    Err(BenchError::Config(format!(
        "--output {}: this build has no Parquet support",
        path.display()
    )))
}

#[cfg(feature = "parquet")]
fn write_parquet(path: &Path, rows: &[RunRow]) -> Result<(), BenchError> {
    use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::fs::File;
    use std::sync::Arc;

    /// A column: its values (nulls left out) and definition levels.
    enum Col {
        F64(Vec<f64>, Vec<i16>),
        I64(Vec<i64>, Vec<i16>),
        Bool(Vec<bool>, Vec<i16>),
        Str(Vec<ByteArray>, Vec<i16>),
    }
    let perr = |e: parquet::errors::ParquetError| BenchError::Parse {
        file: path.display().to_string(),
        what: format!("writing Parquet: {e}"),
    };
    // Built from the JSON form of each row, so the Parquet columns are the
    // JSON fields, in order, with the same names and nulls.
    let values: Vec<serde_json::Map<String, serde_json::Value>> = rows
        .iter()
        .filter_map(|r| match serde_json::to_value(r) {
            Ok(serde_json::Value::Object(m)) => Some(m),
            _ => None,
        })
        .collect();
    let Some(first) = values.first() else {
        return Ok(());
    };
    let mut schema = String::from("message run {\n");
    let mut cols = Vec::new();
    for name in first.keys() {
        let sample = values
            .iter()
            .map(|m| &m[name])
            .find(|v| !v.is_null())
            .unwrap_or(&serde_json::Value::Null);
        let (ty, mut col) = match sample {
            serde_json::Value::Bool(_) => ("BOOLEAN", Col::Bool(Vec::new(), Vec::new())),
            serde_json::Value::String(_) => ("BINARY", Col::Str(Vec::new(), Vec::new())),
            serde_json::Value::Number(n) if n.is_f64() => {
                ("DOUBLE", Col::F64(Vec::new(), Vec::new()))
            }
            serde_json::Value::Number(_) => ("INT64", Col::I64(Vec::new(), Vec::new())),
            _ => ("DOUBLE", Col::F64(Vec::new(), Vec::new())),
        };
        let annotation = if ty == "BINARY" { " (STRING)" } else { "" };
        schema.push_str(&format!("  OPTIONAL {ty} {name}{annotation};\n"));
        for m in &values {
            let v = &m[name];
            match (&mut col, v) {
                (_, serde_json::Value::Null) => match &mut col {
                    Col::F64(_, d) | Col::I64(_, d) | Col::Bool(_, d) | Col::Str(_, d) => d.push(0),
                },
                (Col::F64(x, d), v) => {
                    x.push(v.as_f64().unwrap_or(f64::NAN));
                    d.push(1);
                }
                (Col::I64(x, d), v) => {
                    x.push(v.as_i64().unwrap_or(v.as_f64().unwrap_or(0.0) as i64));
                    d.push(1);
                }
                (Col::Bool(x, d), v) => {
                    x.push(v.as_bool().unwrap_or(false));
                    d.push(1);
                }
                (Col::Str(x, d), v) => {
                    x.push(ByteArray::from(
                        v.as_str().unwrap_or("").as_bytes().to_vec(),
                    ));
                    d.push(1);
                }
            }
        }
        cols.push(col);
    }
    schema.push('}');
    let schema = Arc::new(parse_message_type(&schema).map_err(perr)?);
    let tmp = path.with_extension("parquet.tmp");
    let file = File::create(&tmp).map_err(|source| BenchError::File {
        file: tmp.display().to_string(),
        source,
    })?;
    let mut w =
        SerializedFileWriter::new(file, schema, Arc::new(WriterProperties::builder().build()))
            .map_err(perr)?;
    let mut rg = w.next_row_group().map_err(perr)?;
    for c in &cols {
        let Some(mut cw) = rg.next_column().map_err(perr)? else {
            break;
        };
        match c {
            Col::F64(v, d) => cw.typed::<DoubleType>().write_batch(v, Some(d), None),
            Col::I64(v, d) => cw.typed::<Int64Type>().write_batch(v, Some(d), None),
            Col::Bool(v, d) => cw.typed::<BoolType>().write_batch(v, Some(d), None),
            Col::Str(v, d) => cw.typed::<ByteArrayType>().write_batch(v, Some(d), None),
        }
        .map_err(perr)?;
        cw.close().map_err(perr)?;
    }
    rg.close().map_err(perr)?;
    w.close().map_err(perr)?;
    std::fs::rename(&tmp, path).map_err(|source| BenchError::File {
        file: path.display().to_string(),
        source,
    })
}

/// The rows of a `.jsonl` or `.parquet` file written by [`RowWriter`], as
/// JSON objects with the same field names (for checks and for tools that
/// compare runs).
pub fn read_rows(
    path: &Path,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, BenchError> {
    let file_err = |source| BenchError::File {
        file: path.display().to_string(),
        source,
    };
    let parse_err = |what: String| BenchError::Parse {
        file: path.display().to_string(),
        what,
    };
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
    {
        return read_parquet(path);
    }
    let text = std::fs::read_to_string(path).map_err(file_err)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| match serde_json::from_str(l) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            Ok(_) => Err(parse_err(format!("line {}: not a JSON object", i + 1))),
            Err(e) => Err(parse_err(format!("line {}: {e}", i + 1))),
        })
        .collect()
}

#[cfg(not(feature = "parquet"))]
fn read_parquet(
    path: &Path,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, BenchError> {
    Err(BenchError::Config(format!(
        "{}: this build has no Parquet support (cargo feature `parquet` of offload-bench)",
        path.display()
    )))
}

#[cfg(feature = "parquet")]
fn read_parquet(
    path: &Path,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, BenchError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    use serde_json::Value;
    let perr = |e: parquet::errors::ParquetError| BenchError::Parse {
        file: path.display().to_string(),
        what: format!("reading Parquet: {e}"),
    };
    let file = std::fs::File::open(path).map_err(|source| BenchError::File {
        file: path.display().to_string(),
        source,
    })?;
    let reader = SerializedFileReader::new(file).map_err(perr)?;
    let mut out = Vec::new();
    for row in reader.get_row_iter(None).map_err(perr)? {
        let row = row.map_err(perr)?;
        let mut m = serde_json::Map::new();
        for (name, field) in row.get_column_iter() {
            let v = match field {
                Field::Null => Value::Null,
                Field::Bool(b) => Value::Bool(*b),
                Field::Long(x) => Value::from(*x),
                Field::Int(x) => Value::from(*x),
                Field::Double(x) => Value::from(*x),
                Field::Str(x) => Value::from(x.as_str()),
                other => Value::from(other.to_string()),
            };
            m.insert(name.clone(), v);
        }
        out.push(m);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_of_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_356_309), "2026-11-22T14:05:09Z");
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn parquet_rows_read_back_with_their_names_and_nulls() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let dir = std::env::temp_dir().join(format!("ofl-pq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.parquet");
        let mut row = RunRow::new(&sample_result(), "u", 1, 2);
        row.latency = None;
        let rows = vec![row.clone(), RunRow { run: 2, ..row }];
        write_parquet(&path, &rows).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), 2);
        let names: Vec<String> = meta
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        for n in [
            "profile",
            "messageSize",
            "parallelism",
            "throughput",
            "latencyP99",
            "acrossAZ",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
        }
        let mut rows = reader.get_row_iter(None).unwrap();
        let first = rows.next().unwrap().unwrap().to_string();
        assert!(first.contains("profile: \"TCP_RR\""), "{first}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(feature = "parquet")]
    fn sample_result() -> BenchResult {
        BenchResult {
            test: TestKind::TcpRr,
            throughput: 10.0,
            throughput_units: "Trans/s".into(),
            bits_per_sec: 160.0,
            transactions_per_sec: 10.0,
            gbit_per_sec: 1.6e-7,
            packets_per_sec: 0.0,
            latency_us: None,
            cpu_seconds_per_transaction: 1e-5,
            cpu: Default::default(),
            counts: Default::default(),
            udp: None,
            server: Default::default(),
            settings: Default::default(),
            intervals: Vec::new(),
            tcp_info: None,
        }
    }

    #[test]
    fn output_names_must_say_the_format() {
        let dir = std::env::temp_dir().join(format!("ofl-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(RowWriter::open(&dir.join("x.csv")).is_err());
        assert!(RowWriter::open(&dir.join("x.jsonl")).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
