//! `offload analyze`: argument parsing and printing only; the analysis is
//! `offload_analyze::analyze`.

use crate::capture_opts::{parse_gro_size, parse_mtu, CaptureOpts, DEFAULT_MTU};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use offload::gro::KernelLine;
use offload_analyze::Options;
use offload_capture::Control;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// The bundled sample captures (made by scripts/make-samples.sh from real
/// kernel traffic), analysed when no file is given.
const SAMPLES: &[(&str, &[u8])] = &[
    (
        "healthy-tcp.pcapng",
        include_bytes!("../../../samples/healthy-tcp.pcapng"),
    ),
    (
        "tso-sender.pcapng",
        include_bytes!("../../../samples/tso-sender.pcapng"),
    ),
    (
        "gro-receiver.pcapng",
        include_bytes!("../../../samples/gro-receiver.pcapng"),
    ),
    (
        "vxlan-broken.pcapng",
        include_bytes!("../../../samples/vxlan-broken.pcapng"),
    ),
    (
        "bigtcp-sender.pcapng",
        include_bytes!("../../../samples/bigtcp-sender.pcapng"),
    ),
    (
        "bigtcp.pcapng",
        include_bytes!("../../../samples/bigtcp.pcapng"),
    ),
];

/// Arguments of `offload analyze`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Captures (pcap or pcapng, any mix); none = the bundled samples.
    pub files: Vec<PathBuf>,
    /// gro_max_size values to simulate (comma-separated or repeated).
    #[arg(long = "gro-max-size", value_delimiter = ',', value_parser = parse_gro_size)]
    pub gro_max_size: Vec<u32>,
    /// Kernel line whose GRO rules the what-if runs: 6.1, 6.12, 6.18 or 7.x (default: the running kernel's line, else 6.18).
    #[arg(long, value_parser = offload_analyze::kernel::parse_line)]
    pub kernel: Option<KernelLine>,
    /// Path MTU in IP bytes: larger packets are super-packets (TSO/GRO).
    #[arg(long, default_value_t = DEFAULT_MTU, value_parser = parse_mtu)]
    pub mtu: u32,
    /// The what-if's flush timeout: a gap in the capture this long ends a GRO run (50us: a NIC's interrupt moderation; a receiver's gro_flush_timeout when it sets one, e.g. 1ms).
    #[arg(long, default_value = "50us", value_parser = crate::duration::parse)]
    pub flush_timeout: std::time::Duration,
    #[command(flatten)]
    pub capture: CaptureOpts,
    /// Do not let the GRO what-if verify TCP/UDP checksums (sender-side captures with checksum offload).
    #[arg(long)]
    pub no_checksum_check: bool,
    /// Frames the capture cut short after their headers (`tcpdump -s N`):
    /// `headers` judges them from their headers and wire length, checksums
    /// taken as valid (the figures of the whole capture); `unmerged` passes
    /// them up unmerged.
    #[arg(long, value_enum, default_value = "headers", value_name = "HOW")]
    pub truncated_frames: TruncatedArg,
    /// Print the report as JSON (schema in docs/analyze.md) instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Write a self-contained HTML report (graphs, findings, what-if table).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write flows.csv and packets.csv into this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write flows.parquet, flow_what_if.parquet, findings.parquet and
    /// packets.parquet into this directory (for DuckDB, Spark, Trino).
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,
    /// Flows listed in the terminal summary.
    #[arg(long, default_value_t = 10)]
    pub flows: usize,
    /// Flows kept in detail; past it the least recently active are folded
    /// into an "other flows" total (with --csv their rows still go to
    /// flows.csv, streamed as they are evicted). Bounds memory: about 6 KB
    /// per flow at the peak.
    #[arg(long, default_value_t = offload_analyze::options::DEFAULT_MAX_FLOWS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_flows: usize,
    /// Worker threads (0 = one per core, one file per thread; N also splits
    /// a lone capture over N threads: shorter wall time, about 1.5x the CPU).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// `--truncated-frames`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum TruncatedArg {
    Headers,
    Unmerged,
}

/// The embedded samples, unpacked into a private temporary directory
/// (removed on every exit path: `offload_capture::tempfiles`).
struct SampleDir(offload_capture::tempfiles::PrivateDir);

impl SampleDir {
    fn create() -> anyhow::Result<(SampleDir, Vec<PathBuf>)> {
        let dir = offload_capture::tempfiles::PrivateDir::new("samples")
            .context("creating a private temporary directory for the bundled samples")?;
        let mut paths = Vec::new();
        for (name, bytes) in SAMPLES {
            let (p, mut f) = dir
                .create_file(name)
                .with_context(|| format!("creating {}", dir.path().join(name).display()))?;
            f.write_all(bytes)
                .with_context(|| format!("writing {}", p.display()))?;
            paths.push(p);
        }
        Ok((SampleDir(dir), paths))
    }
}

/// Runs `offload analyze`.
pub fn run(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    // Ctrl-C (or SIGTERM, SIGHUP) stops reading; what was found so far is
    // still printed, and temporary files are removed on every exit path.
    let cancel = crate::capture::cancel_flag();
    let (samples_dir, files) = if args.files.is_empty() {
        let (g, p) = SampleDir::create()?;
        if !args.json {
            eprintln!("offload analyze: no capture given, analysing the bundled samples");
        }
        (Some(g), p)
    } else {
        (None, args.files.clone())
    };
    // `-`, FIFOs and `<(...)` are read once, into a temporary copy that the
    // parallel jobs then read (removed on every exit path by Drop).
    let spooled = files
        .iter()
        .map(|p| offload_capture::SpooledInput::new_cancellable(p, &cancel))
        .collect::<Result<Vec<_>, _>>()?;
    let files: Vec<PathBuf> = spooled.iter().map(|s| s.path().to_path_buf()).collect();
    let rename = |text: &str| {
        spooled
            .iter()
            .fold(text.to_string(), |t, s| s.rename_in(&t))
    };
    let opts = Options {
        gro_sizes: if args.gro_max_size.is_empty() {
            offload_analyze::DEFAULT_GRO_SIZES.to_vec()
        } else {
            args.gro_max_size.clone()
        },
        kernel: args
            .kernel
            .unwrap_or_else(crate::capture::running_kernel_line),
        mtu: args.mtu,
        vxlan_ports: args.capture.vxlan_ports(),
        strict: args.capture.strict,
        verify_checksums: !args.no_checksum_check,
        threads: args.threads,
        packet_csv: args.csv.as_ref().map(|d| d.join("packets.csv")),
        parquet_dir: args.parquet.clone(),
        max_flows: args.max_flows,
        evicted_csv: args
            .csv
            .as_deref()
            .map(offload_analyze::export::evicted_path),
        truncated: match args.truncated_frames {
            TruncatedArg::Headers => offload_analyze::options::TruncatedFrames::Headers,
            TruncatedArg::Unmerged => offload_analyze::options::TruncatedFrames::Unmerged,
        },
        flush_timeout_ns: args.flush_timeout.as_nanos().min(u64::MAX as u128) as u64,
    };
    for d in [&args.csv, &args.parquet].into_iter().flatten() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let total: u64 = files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new(total);
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    } else {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden())
    };
    let mut on_progress = |b: u64| pb.set_position(b);
    let mut ctl = Control {
        on_progress: &mut on_progress,
        cancel: &cancel,
    };
    let mut analysis = offload_analyze::analyze(&files, &opts, &mut ctl)
        .map_err(|e| anyhow::anyhow!(rename(&e.to_string())))?;
    if spooled.iter().any(|s| s.is_copy()) {
        // Name the inputs as given (`stdin`, the FIFO), not their copies.
        analysis.report.rename_captures(&rename);
    }
    pb.finish_and_clear();
    if let Some(g) = &samples_dir {
        // Name the bundled samples, not their temporary copies.
        let dir = format!("{}/", g.0.path().display());
        analysis
            .report
            .rename_captures(&|s: &str| s.replace(&dir, "(bundled) samples/"));
    }
    let report = &analysis.report;
    if let Some(h) = &args.html {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        std::fs::write(h, offload_analyze::html::render_with(&analysis, &command))
            .with_context(|| format!("writing {}", h.display()))?;
    }
    if let Some(d) = &args.csv {
        offload_analyze::export::write_flows_csv(report, d)
            .with_context(|| format!("writing {}", d.join("flows.csv").display()))?;
    }
    if let Some(d) = &args.parquet {
        offload_analyze::columnar::write_tables(report, d)?;
    }
    // Buffered: stdout is line-buffered, and a pretty JSON report of many
    // flows has millions of lines (one write each otherwise).
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, report)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", offload_analyze::text::render(report, args.flows))?;
        if let Some(h) = &args.html {
            writeln!(out, "\nHTML report: {}", h.display())?;
        }
        if let Some(d) = &args.csv {
            writeln!(out, "CSV tables: {}", d.display())?;
        }
        if let Some(d) = &args.parquet {
            writeln!(out, "Parquet tables: {}", d.display())?;
        }
    }
    out.flush()?;
    let bad_input = report.inputs.iter().any(|i| i.error.is_some());
    if report.interrupted {
        eprintln!("offload analyze: interrupted; the report covers what was read");
        return Ok(ExitCode::from(130));
    }
    if bad_input {
        for i in report.inputs.iter().filter(|i| i.error.is_some()) {
            // The capture error names the file, frame and field already.
            eprintln!(
                "offload analyze: {}",
                i.error.as_deref().unwrap_or_default()
            );
        }
        return Ok(ExitCode::from(1));
    }
    for i in &report.inputs {
        crate::capture::warn_above_snaplen(&i.path, i.frames_above_snaplen, 0);
        crate::capture::warn_timestamps_clamped(
            &i.path,
            "",
            &offload_transform::TimestampsClamped {
                input: i.timestamps_clamped,
                first_input_frame: i.first_timestamp_clamped_frame.unwrap_or(0),
                ..Default::default()
            },
        );
    }
    for i in report
        .inputs
        .iter()
        .filter(|i| i.unsupported_link_frames > 0)
    {
        let types: Vec<String> = i
            .link_types
            .iter()
            .filter(|t| !offload_analyze::link::readable(**t))
            .map(|t| match offload_capture::LinkType(*t).name() {
                Some(n) => format!("{t} ({n})"),
                None => t.to_string(),
            })
            .collect();
        let first = i
            .link_skipped
            .iter()
            .filter(|(k, _)| k.starts_with("unsupported link type"))
            .map(|(_, c)| c.first_frame)
            .min()
            .unwrap_or(0);
        eprintln!(
            "offload analyze: {}: {} frames of link type {} not analysed, the first frame {first} \
             (supported: Ethernet, raw IP, IPv4, IPv6, Linux cooked v1/v2, BSD loopback, PPP, \
             PPPoE, Cisco HDLC, 802.11 with radiotap, Prism or AVS, FDDI, ARCnet, IPoIB, NFLOG, \
             pflog, enc, Juniper Ethernet, PPI)",
            i.path,
            i.unsupported_link_frames,
            types.join(", ")
        );
    }
    // A valid capture without frames is empty, not an error (as libpcap,
    // tshark, `offload gro` and `offload gso` read it): said, exit 0.
    for i in report.inputs.iter().filter(|i| i.frames == 0) {
        eprintln!("offload analyze: {}: no frames", i.path);
    }
    Ok(ExitCode::SUCCESS)
}
