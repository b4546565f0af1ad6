//! `offload inspect`: argument parsing and printing around
//! `offload_lab::inspect`, `offload_lab::live` and `offload_lab::sample`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use offload_lab::inspect::{self, Inspection};
use offload_lab::live::{self, LiveReport};
use offload_lab::sample::{self, SampleOptions, SampleReport};
use serde::Serialize;

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Devices to inspect (default: every device of the current namespace).
    pub devices: Vec<String>,
    /// JSON for programs instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also measure GRO for this long (e.g. 10s), per device by (namespace,
    /// ifindex): packets and bytes into and out of GRO, GRO's verdict per
    /// packet, the largest super-packet, packets that bypassed GRO; softnet
    /// deltas; one line a second.
    #[arg(long, value_parser = crate::duration::parse)]
    pub live: Option<Duration>,
    /// Also capture N packets after GRO and analyse which flows do not merge.
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
    /// Keep the sampled packets in this pcap.
    #[arg(long, value_name = "FILE", requires = "sample")]
    pub sample_pcap: Option<std::path::PathBuf>,
    /// Window over which drop and interrupt counters are measured: findings
    /// give rates over it.
    #[arg(long, value_parser = crate::duration::parse, default_value = "1s")]
    pub window: Duration,
    /// Also report since-boot totals of those counters, and findings on them.
    #[arg(long)]
    pub since_boot: bool,
    /// Print the --live figures as OpenMetrics text (for a scrape) on
    /// stdout, and nothing else.
    #[arg(long, requires = "live", conflicts_with = "json")]
    pub prometheus: bool,
    /// Also write the --live figures as OpenMetrics text to this file, for
    /// node_exporter's textfile collector (replaced atomically; `-`:
    /// standard output).
    #[arg(long, value_name = "PATH", requires = "live")]
    pub textfile: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    inspection: &'a Inspection,
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<&'a LiveReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample: Option<&'a SampleReport>,
}

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    // SIGINT, SIGTERM and SIGHUP stop the measurement (and remove the
    // sample's temporary pcap: offload_capture::tempfiles).
    let cancel = crate::capture::cancel_flag();
    // `--textfile -` is standard output: the metrics alone, as --prometheus.
    let textfile_stdout = args.textfile.as_deref() == Some(std::path::Path::new("-"));
    let prometheus = args.prometheus || textfile_stdout;
    if textfile_stdout && args.json {
        anyhow::bail!("--textfile - and --json both write to standard output: choose one");
    }
    let opts = inspect::InspectOptions {
        only: args.devices.clone(),
        window: args.window,
        since_boot: args.since_boot,
    };
    let ins = inspect::inspect(&opts, &cancel).context("inspect")?;
    // Devices measured live: the named ones, else every up device but lo.
    let watched: Vec<(String, u32)> = ins
        .devices
        .iter()
        .filter(|d| !args.devices.is_empty() || (d.up && d.name != "lo"))
        .map(|d| (d.name.clone(), d.ifindex))
        .collect();
    if !args.json && !prometheus {
        print!("{}", inspect::render_text(&ins));
    }
    let live = match args.live {
        Some(duration) => {
            let names: Vec<String> = watched.iter().map(|(n, _)| n.clone()).collect();
            if !args.json && !prometheus {
                println!();
                println!("live, {} s ({}):", duration.as_secs_f64(), names.join(", "));
            }
            let quiet = args.json || prometheus;
            let report = live::watch(&watched, duration, Duration::from_secs(1), &cancel, |iv| {
                if quiet {
                    return;
                }
                let mut line = format!("{:>5.1}s", iv.t);
                for d in &iv.devices {
                    line.push_str(&format!(
                        "  {}: gro {} -> {} ratio {} stack {}",
                        d.name,
                        d.counts.gro_in,
                        d.gro_out,
                        d.merge_ratio.map_or("-".into(), |r| format!("{r:.1}")),
                        d.counts.stack,
                    ));
                }
                line.push_str(&format!(
                    "  softnet +{} drop {} squeeze {}",
                    iv.softnet_processed, iv.softnet_dropped, iv.softnet_time_squeeze
                ));
                println!("{line}");
                let _ = std::io::stdout().flush();
            })
            .context("--live")?;
            if !quiet {
                println!(
                    "summary over {:.1} s{}:",
                    report.seconds,
                    if report.interrupted {
                        " (interrupted)"
                    } else {
                        ""
                    }
                );
                for d in &report.devices {
                    print!("{}", live::render_device(d));
                }
                for h in &report.hw_offload {
                    for (what, prefix) in [
                        ("hardware GRO", "rx-hw-gro-"),
                        ("hardware GSO", "tx-hw-gso-"),
                    ] {
                        let shown: Vec<String> = h
                            .counters
                            .iter()
                            .filter(|(k, _)| k.starts_with(prefix))
                            .map(|(k, v)| format!("{k} +{v}"))
                            .collect();
                        if shown.is_empty() {
                            println!(
                                "  {:<15} {what}: {}",
                                h.name,
                                h.note.as_deref().unwrap_or("not reported by this driver")
                            );
                        } else {
                            println!("  {:<15} {what}: {}", h.name, shown.join(", "));
                        }
                    }
                }
                for c in &report.softnet {
                    println!(
                        "  softnet cpu{}: +{} processed, +{} dropped, +{} time_squeeze",
                        c.cpu, c.processed, c.dropped, c.time_squeeze
                    );
                }
            }
            let metrics = live::openmetrics::render(&report);
            if let Some(path) = args.textfile.as_ref().filter(|_| !textfile_stdout) {
                live::openmetrics::write_textfile(path, &metrics).context("--textfile")?;
            }
            if prometheus {
                print!("{metrics}");
            }
            Some(report)
        }
        None => None,
    };
    let sample = match args.sample {
        Some(n) => {
            let opts = SampleOptions {
                count: n,
                timeout: args
                    .live
                    .unwrap_or(Duration::from_secs(10))
                    .max(Duration::from_secs(1)),
                keep: args.sample_pcap.clone(),
                profiles: Vec::new(),
            };
            let report = sample::sample(&watched, &opts, &cancel).context("--sample")?;
            if !args.json && !prometheus {
                println!();
                println!("sample: {} packets after GRO", report.frames);
                for (dev, s) in &report.devices {
                    println!(
                        "  {dev}: {} frames, {} super-packets carrying {} segments, {} single packets",
                        s.frames, s.super_packets, s.segments_in_super_packets, s.single_packets
                    );
                }
                // Super-packets above the MTU and BIG TCP verdicts describe a
                // post-GRO capture itself, not a flow that fails to merge.
                let shown: Vec<_> = report
                    .analysis
                    .findings
                    .iter()
                    .filter(|f| !matches!(f.kind, "above-mtu" | "big-tcp-gain"))
                    .collect();
                if shown.is_empty() {
                    println!("  analysis: no flow with a reason not to merge");
                }
                for f in shown {
                    println!(
                        "  [{:?}] {}{}",
                        f.severity,
                        f.title,
                        f.flow
                            .as_ref()
                            .map(|fl| format!(" ({})", fl.description))
                            .unwrap_or_default()
                    );
                    if let Some(fix) = &f.fix {
                        println!("      fix: {fix}");
                    }
                }
            }
            Some(report)
        }
        None => None,
    };
    if args.json {
        let out = Output {
            inspection: &ins,
            live: live.as_ref(),
            sample: sample.as_ref(),
        };
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &out)?;
        writeln!(stdout)?;
    }
    Ok(ExitCode::SUCCESS)
}
