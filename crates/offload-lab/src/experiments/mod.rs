//! The experiments of `offload lab`: one module per experiment, each behind
//! the [`Experiment`] trait, and the runner they share.
//!
//! An experiment builds its topology in anonymous namespaces, sets its
//! knobs and reads them back, and measures its arms in pairs, interleaved
//! (A B, B A, A B...), so that drift of a shared machine hits both arms
//! alike. It returns an [`Outcome`]: the arms with every run kept, the
//! paired comparisons ([`paired`]), findings and details. [`run`] wraps
//! that into a [`Report`] which [`report`] renders as text, JSON and HTML.
//! Ctrl-C (the `cancel` flag) stops after the run in progress; the report
//! then holds the completed pairs only.

pub mod big_tcp;
pub mod btf;
pub mod guests;
// Unsafe code only for perf_event_open and socket options, each block
// with its SAFETY comment.
#[allow(unsafe_code)]
pub mod many_flows;
pub mod paired;
#[allow(unsafe_code)]
pub mod pingpong;
pub mod report;
pub mod udp_rx;
pub mod vxlan_ip_id;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::live::{DeviceCounters, GroCounts, TracepointIds};
use anyhow::{anyhow, bail, Context as _};
use offload_bench::{BenchResult, ClientConfig, Secret, Server, ServerOptions, TestKind};
use offload_report::Finding;
use offload_sys::NetNs;
use serde::Serialize;
use serde_json::Value;

pub use paired::Comparison;

/// One experiment: what it claims, where the claim comes from, what the
/// setup cannot reproduce, and how it runs.
pub trait Experiment: Sync {
    /// Command-line name (`big-tcp`).
    fn name(&self) -> &'static str;
    /// The published claim the experiment tests.
    fn claim(&self) -> &'static str;
    /// Where the claim was published.
    fn source(&self) -> &'static str;
    /// What veth and this machine cannot reproduce.
    fn limits(&self) -> &'static [&'static str];
    /// Builds the setup, runs the arms and returns what was measured.
    fn run(&self, ctx: &Context<'_>) -> anyhow::Result<Outcome>;
}

/// Every experiment, in `offload lab list` order.
pub fn all() -> [&'static dyn Experiment; 4] {
    [
        &big_tcp::BigTcp,
        &vxlan_ip_id::VxlanIpId,
        &udp_rx::UdpRx,
        &many_flows::ManyFlows,
    ]
}

/// The experiment named `name`.
pub fn find(name: &str) -> anyhow::Result<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name).ok_or_else(|| {
        anyhow!(
            "no scenario {name:?}; known: {}",
            all().map(|e| e.name()).join(", ")
        )
    })
}

/// Default pairs of runs per comparison (`--runs`).
pub const DEFAULT_RUNS: u32 = 3;
/// Default measured time of one run (`--duration`).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(3);
/// Warm-up before each measured run.
pub const WARMUP: Duration = Duration::from_secs(1);

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Measured time of each run.
    pub duration: Duration,
    /// Pairs of runs per comparison.
    pub runs: u32,
    /// many-flows: the flow counts (None: the experiment's default).
    pub flows: Option<Vec<u32>>,
    /// vxlan-ip-id: the guest kernels to boot (`--kernels`), resolved.
    pub guests: Option<guests::Guests>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            duration: DEFAULT_DURATION,
            runs: DEFAULT_RUNS,
            flows: None,
            guests: None,
        }
    }
}

/// What an experiment gets to run with.
#[derive(Debug)]
pub struct Context<'a> {
    /// The options.
    pub opts: &'a Options,
    /// Set by Ctrl-C: stop after the run in progress.
    pub cancel: &'a AtomicBool,
    /// Whether to print progress lines on stderr.
    pub progress: bool,
}

impl Context<'_> {
    /// Whether Ctrl-C was pressed.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Prints a progress line (stderr).
    pub fn say(&self, line: &str) {
        if self.progress {
            eprintln!("{line}");
        }
    }

    /// Prints the figures of one run (stderr).
    pub fn log_run(&self, arm: &str, i: u32, f: &RunFigures) {
        if !self.progress {
            return;
        }
        let mut parts = vec![format!("  {arm:<16} run {}", i + 1)];
        for m in METRICS {
            if let Some(v) = f.get(m.key) {
                parts.push(format!("{} {v:.1}", m.short));
            }
        }
        eprintln!("{}", parts.join("  "));
    }
}

/// A metric: its JSON key, its column heading, and its unit in words.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Key in JSON (`p50_us`).
    pub key: &'static str,
    /// Column heading (`p50 us`).
    pub short: &'static str,
    /// What it is.
    pub meaning: &'static str,
}

/// Every metric an arm's run can carry, in table order.
pub const METRICS: &[Metric] = &[
    Metric { key: "transactions_per_sec", short: "trans/s", meaning: "transactions per second" },
    Metric { key: "min_us", short: "min us", meaning: "lowest round trip of the run, microseconds" },
    Metric { key: "p50_us", short: "p50 us", meaning: "median latency, microseconds" },
    Metric { key: "p90_us", short: "p90 us", meaning: "90th percentile latency, microseconds" },
    Metric { key: "p99_us", short: "p99 us", meaning: "99th percentile latency, microseconds" },
    Metric { key: "cpu_us_per_transaction", short: "cpu us/tr", meaning: "machine busy CPU-microseconds per transaction (/proc/stat, all CPUs)" },
    Metric { key: "thread_cpu_us_per_transaction", short: "thr us/tr", meaning: "CPU-microseconds of the client and server threads per transaction" },
    Metric { key: "stack_packets_per_transaction", short: "stack pk/tr", meaning: "packets entering the stack (net:netif_receive_skb) per transaction" },
    Metric { key: "gro_merge_ratio", short: "gro ratio", meaning: "packets into GRO per packet into the stack" },
    Metric { key: "super_packet_bytes", short: "super B", meaning: "mean bytes of the packets GRO handed to the stack" },
    Metric { key: "over_64k_share", short: ">64K %", meaning: "percent of the stack packets longer than 65535 bytes" },
    Metric { key: "gbit_per_sec", short: "Gbit/s", meaning: "payload Gbit/s" },
    Metric { key: "packets_per_sec", short: "packets/s", meaning: "datagrams received per second" },
    Metric { key: "drops_per_sec", short: "drops/s", meaning: "datagrams the kernel dropped per second (Udp InErrors of the receiving namespace + veth drops), over the whole run" },
    Metric { key: "cache_misses_per_transaction", short: "miss/tr", meaning: "hardware cache misses per transaction (perf)" },
];

/// Figures of one run of one arm.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunFigures {
    /// Every figure measured in this run, by [`Metric::key`].
    #[serde(flatten)]
    pub values: BTreeMap<String, f64>,
    /// Facts of the run that are not figures (GRO size buckets...).
    #[serde(flatten)]
    pub facts: BTreeMap<String, Value>,
}

impl RunFigures {
    /// The value of `key`, if measured.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values.get(key).copied()
    }

    /// Sets `key` when `v` is a finite number.
    pub fn set(&mut self, key: &str, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.values.insert(key.to_string(), v);
        }
    }

    /// Whether the run is left out of every comparison ([`LEFT_OUT`]).
    pub fn left_out(&self) -> bool {
        self.facts.contains_key(LEFT_OUT)
    }
}

/// The fact (its value: why) of a run that completed no transaction in
/// its measured window. Its rate stays 0, it has no per-transaction
/// figure (offload-bench divides by the transactions and reports 0 CPU
/// per transaction when there were none, which a comparison would read
/// as -100%), every pair holding it is left out of the comparisons
/// ([`paired::Comparison::of`]), and the report carries a finding
/// ([`left_out_findings`]).
pub const LEFT_OUT: &str = "left_out_of_comparisons";

/// One finding per arm with runs that completed no transaction.
pub fn left_out_findings(arms: &[Arm]) -> Vec<Finding> {
    arms.iter()
        .filter_map(|a| {
            let idle: Vec<String> = a
                .runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.left_out())
                .map(|(i, _)| (i + 1).to_string())
                .collect();
            (!idle.is_empty()).then(|| {
                Finding::new(
                    offload_report::Severity::Medium,
                    "lab-run-without-transactions",
                    format!(
                        "{}: {} of {} runs completed no transaction (run {})",
                        a.name,
                        idle.len(),
                        a.runs.len(),
                        idle.join(", ")
                    ),
                    "such a run keeps its rate of 0 transactions/s but has no latency, CPU or \
                     stack figure per transaction, and every pair holding it is left out of the \
                     comparisons; the progress lines and the notes from offload-bench show \
                     what the run met (open files, ports, a starved machine)",
                )
            })
        })
        .collect()
}

/// One arm: its settings as read back and its runs.
#[derive(Debug, Clone, Default)]
pub struct Arm {
    /// Name.
    pub name: String,
    /// Which table of the report it belongs to (udp-rx has two).
    pub group: &'static str,
    /// Settings as read back from the kernel.
    pub settings: BTreeMap<String, Value>,
    /// The runs, in order.
    pub runs: Vec<RunFigures>,
}

impl Arm {
    /// An arm of the report's only table.
    pub fn new(name: &str) -> Self {
        Arm {
            name: name.into(),
            ..Arm::default()
        }
    }

    /// An arm of table `group`.
    pub fn in_group(name: &str, group: &'static str) -> Self {
        Arm {
            name: name.into(),
            group,
            ..Arm::default()
        }
    }

    /// The values of `metric` over the runs that measured it.
    pub fn values(&self, metric: &str) -> Vec<f64> {
        self.runs.iter().filter_map(|r| r.get(metric)).collect()
    }

    /// Mean of `metric` over the runs.
    pub fn mean(&self, metric: &str) -> Option<f64> {
        let v = self.values(metric);
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// A block of the text report: a heading and its lines (already words,
/// never JSON).
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// Lines.
    pub lines: Vec<String>,
}

/// Everything an experiment measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The arms.
    pub arms: Vec<Arm>,
    /// Paired comparisons (only those with two pairs or more).
    pub comparisons: Vec<Comparison>,
    /// Findings.
    pub findings: Vec<Finding>,
    /// Text blocks for people.
    pub sections: Vec<Section>,
    /// The same facts for programs.
    pub details: BTreeMap<String, Value>,
    /// Whether Ctrl-C cut the run short.
    pub interrupted: bool,
}

/// One arm as reported: means and the runs.
#[derive(Debug, Clone, Serialize)]
pub struct ArmReport {
    /// Name.
    pub name: String,
    /// Table.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub group: &'static str,
    /// Settings read back.
    pub settings: BTreeMap<String, Value>,
    /// Mean of each metric over the runs.
    pub means: BTreeMap<String, f64>,
    /// Every run.
    pub runs: Vec<RunFigures>,
}

/// The report of one `offload lab run`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Experiment name.
    pub scenario: &'static str,
    /// Its claim.
    pub claim: &'static str,
    /// Its source.
    pub source: &'static str,
    /// The arms.
    pub arms: Vec<ArmReport>,
    /// Paired comparisons.
    pub comparison: Vec<Comparison>,
    /// Findings, ranked.
    pub findings: Vec<Finding>,
    /// What the setup cannot reproduce.
    pub limits: &'static [&'static str],
    /// Facts beyond the arms' figures.
    pub details: BTreeMap<String, Value>,
    /// The same facts as words.
    pub sections: Vec<Section>,
    /// Runs per arm (the most any arm completed).
    pub runs_per_arm: usize,
    /// Measured seconds of each run.
    pub run_seconds: f64,
    /// Wall time of the whole experiment.
    pub elapsed_seconds: f64,
    /// Whether Ctrl-C cut it short.
    pub interrupted: bool,
}

/// Runs experiment `e` and builds its report.
pub fn run(
    e: &dyn Experiment,
    opts: &Options,
    cancel: &AtomicBool,
    progress: bool,
) -> anyhow::Result<Report> {
    if opts.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if opts.duration.is_zero() {
        bail!("--duration must be above zero");
    }
    let started = Instant::now();
    let ctx = Context {
        opts,
        cancel,
        progress,
    };
    ctx.say(&format!("offload lab run {}: {}", e.name(), e.claim()));
    let out = e
        .run(&ctx)
        .with_context(|| format!("lab scenario {}", e.name()))?;
    let arms: Vec<ArmReport> = out
        .arms
        .iter()
        .map(|a| ArmReport {
            name: a.name.clone(),
            group: a.group,
            settings: a.settings.clone(),
            means: METRICS
                .iter()
                .filter_map(|m| Some((m.key.to_string(), a.mean(m.key)?)))
                .collect(),
            runs: a.runs.clone(),
        })
        .collect();
    let mut findings = out.findings;
    findings.extend(left_out_findings(&out.arms));
    offload_report::rank(&mut findings);
    Ok(Report {
        scenario: e.name(),
        claim: e.claim(),
        source: e.source(),
        runs_per_arm: out.arms.iter().map(|a| a.runs.len()).max().unwrap_or(0),
        arms,
        comparison: out.comparisons,
        findings,
        limits: e.limits(),
        details: out.details,
        sections: out.sections,
        run_seconds: opts.duration.as_secs_f64(),
        elapsed_seconds: started.elapsed().as_secs_f64(),
        interrupted: out.interrupted || cancel.load(Ordering::Relaxed),
    })
}

/// Runs `arms` interleaved for `runs` pairs: pair i runs them in order when
/// i is even, reversed when odd. `run_arm(index, pair)` does one run.
/// Returns whether Ctrl-C stopped it; a pair cut short is dropped from
/// every arm, so the arms always hold the same completed pairs.
pub fn interleave(
    ctx: &Context<'_>,
    arms: &mut [Arm],
    mut run_arm: impl FnMut(usize, u32) -> anyhow::Result<RunFigures>,
) -> anyhow::Result<bool> {
    let n = arms.len();
    for i in 0..ctx.opts.runs {
        let order: Vec<usize> = if i % 2 == 0 {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let mut pair = Vec::with_capacity(n);
        for a in order {
            if ctx.cancelled() {
                return Ok(true);
            }
            let f = run_arm(a, i)?;
            ctx.log_run(&arms[a].name, i, &f);
            pair.push((a, f));
        }
        for (a, f) in pair {
            arms[a].runs.push(f);
        }
    }
    Ok(ctx.cancelled())
}

/// A bench server serving inside a namespace until dropped.
#[derive(Debug)]
pub struct ServerInNs {
    /// Its control address.
    pub addr: SocketAddr,
    /// A fresh secret per server: it listens beyond loopback (in the
    /// experiment's namespace), where the bench server requires one.
    secret: Secret,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<offload_sys::Result<()>>>,
}

impl ServerInNs {
    /// Starts a server on `ip` (port chosen by the kernel) inside `ns`.
    pub fn start(ns: &NetNs, ip: IpAddr) -> anyhow::Result<Self> {
        // The serving thread joins the namespace so that the data sockets
        // it creates for each test are there too, and takes a descriptor
        // table of its own before it binds, so that the flows it accepts do
        // not count against the table the in-process client fills.
        let (tx, rx) = std::sync::mpsc::channel();
        let secret = Secret::random()?;
        let opts = ServerOptions {
            secret: Some(secret.clone()),
            ..ServerOptions::default()
        };
        let thread = ns.spawn("ofl-lab-server", move || {
            let sys_err = |op: &str, e: std::io::Error| offload_sys::Error::Sys {
                op: op.into(),
                source: e,
            };
            let bound = offload_bench::sys::unshare_fd_table()
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    Server::bind_with(&[SocketAddr::new(ip, 0)], opts)
                        .map(|s| s.echo_log(false))
                        .map_err(|e| e.to_string())
                })
                .and_then(|s| {
                    let addr = s.local_addr().map_err(|e| e.to_string())?;
                    Ok((s, addr))
                });
            let server = match bound {
                Ok((server, addr)) => {
                    let _ = tx.send(Ok((addr, server.stop_flag())));
                    server
                }
                Err(e) => {
                    let _ = tx.send(Err(e.clone()));
                    return Err(sys_err("bench server", std::io::Error::other(e)));
                }
            };
            server
                .serve()
                .map_err(|e| sys_err("bench server", std::io::Error::other(e.to_string())))
        })?;
        let (addr, stop) = match rx.recv() {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                let _ = thread.join();
                bail!("bench server: {e}");
            }
            Err(_) => {
                let _ = thread.join();
                bail!("bench server thread ended before binding");
            }
        };
        Ok(ServerInNs {
            addr,
            secret,
            stop,
            thread: Some(thread),
        })
    }
}

impl ServerInNs {
    /// A client configuration for this server, secret included.
    pub fn config(&self, kind: TestKind) -> ClientConfig {
        let mut c = ClientConfig::new(kind, self.addr);
        c.auth = Some(self.secret.clone());
        c
    }
}

impl Drop for ServerInNs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs one bench client inside `ns`.
pub fn bench_in(ns: &NetNs, cfg: &ClientConfig) -> anyhow::Result<BenchResult> {
    let cfg = cfg.clone();
    ns.run(move || Ok(offload_bench::run_once(&cfg, &mut |_| {})))?
        .map_err(|e| anyhow!("bench: {e}"))
}

/// Runs one bench client inside `ns` on a thread whose descriptor table is
/// its own, so that its flows do not count against the table the
/// in-process server fills.
pub fn bench_private_table(ns: &NetNs, cfg: &ClientConfig) -> anyhow::Result<BenchResult> {
    let cfg = cfg.clone();
    ns.run(move || {
        offload_bench::sys::unshare_fd_table().map_err(|e| offload_sys::Error::Sys {
            op: "unshare(CLONE_FILES)".into(),
            source: e,
        })?;
        Ok(offload_bench::run_once(&cfg, &mut |_| {}))
    })?
    .map_err(|e| anyhow!("bench: {e}"))
}

/// How long the watched devices must see no packet before a run counts as
/// over ([`counted`]).
pub const QUIET: Duration = Duration::from_millis(500);
/// The longest wait for that quiet.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// What a run's devices saw after the run's client had returned: a TCP
/// sender's unsent data drains after `close()`, and GRO holds merged
/// packets until its NAPI poll completes, which under load can be a
/// starved `ksoftirqd` later. Those packets are the run's own; counted
/// into the next arm they would be figures of the wrong knobs (a stream
/// arm at gro_max_size 185000 left packets above 64 KiB to the 65536 arm
/// after it).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct AfterRun {
    /// Packets that entered GRO or the stack after the client returned.
    pub packets: u64,
    /// Milliseconds until the devices were quiet for [`QUIET`].
    pub settled_ms: u64,
}

/// Counts GRO on `devices` around `f`, and after `f` until none of the
/// devices has seen a packet for [`QUIET`] ([`AfterRun`]): a run ends when
/// its traffic has, so that the next arm's knobs are set on quiet devices
/// and its counters see none of this run's packets.
pub fn counted<T>(
    ids: &TracepointIds,
    devices: &[String],
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<GroCounts>, AfterRun)> {
    let counters: Vec<DeviceCounters> = devices
        .iter()
        .map(|d| DeviceCounters::open(ids, d))
        .collect::<Result<_, _>>()
        .context("tracepoint counters")?;
    let t = f()?;
    let after = settle(&counters, devices)?;
    Ok((
        t,
        counters.iter().map(DeviceCounters::read).collect(),
        after,
    ))
}

/// Waits until `counters` stop moving for [`QUIET`]; an error after
/// [`SETTLE_LIMIT`] (nothing but the lab sends on its devices).
fn settle(counters: &[DeviceCounters], devices: &[String]) -> anyhow::Result<AfterRun> {
    let total = || -> u64 {
        counters
            .iter()
            .map(|c| {
                let n = c.read();
                n.gro_in + n.stack
            })
            .sum()
    };
    let start = Instant::now();
    let first = total();
    let (mut last, mut changed) = (first, start);
    loop {
        std::thread::sleep(Duration::from_millis(25));
        let now = Instant::now();
        let n = total();
        if n != last {
            (last, changed) = (n, now);
        } else if now - changed >= QUIET {
            return Ok(AfterRun {
                packets: last - first,
                settled_ms: (changed - start).as_millis() as u64,
            });
        }
        if now - start > SETTLE_LIMIT {
            bail!(
                "traffic on {} did not stop within {} s after the run",
                devices.join(", "),
                SETTLE_LIMIT.as_secs()
            );
        }
    }
}

/// The figures of a bench result, with the GRO counts of the devices
/// watched around it (`merge_device`: whose merge ratio to report).
pub fn figures(r: &BenchResult, counts: &[GroCounts], merge_device: Option<usize>) -> RunFigures {
    let mut f = RunFigures::default();
    let stack: u64 = counts.iter().map(|c| c.stack).sum();
    let transactions = r.counts.client_total.max(1);
    let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
    if r.test.is_rr() && r.counts.client_window == 0 {
        f.set("transactions_per_sec", Some(0.0));
        f.facts.insert(
            LEFT_OUT.into(),
            Value::from("no transaction completed in the measured window"),
        );
    } else if r.test.is_rr() {
        f.set("transactions_per_sec", Some(r.transactions_per_sec));
        f.set("p50_us", finite(r.select("p50_us")));
        f.set("p90_us", finite(r.select("p90_us")));
        f.set("p99_us", finite(r.select("p99_us")));
        f.set(
            "stack_packets_per_transaction",
            (stack > 0).then(|| stack as f64 / transactions as f64),
        );
        f.set(
            "cpu_us_per_transaction",
            finite(r.select("cpu_us_per_transaction")),
        );
        f.set(
            "thread_cpu_us_per_transaction",
            Some(
                (r.cpu.client_seconds_per_transaction + r.cpu.server_seconds_per_transaction) * 1e6,
            ),
        );
    }
    f.set(
        "gro_merge_ratio",
        merge_device
            .and_then(|i| counts.get(i))
            .and_then(GroCounts::merge_ratio),
    );
    f.set("gbit_per_sec", Some(r.gbit_per_sec));
    if r.test.is_udp() && !r.test.is_rr() {
        f.set("packets_per_sec", Some(r.packets_per_sec));
    }
    f
}

/// Names of the size buckets of `edges` (`lo+1-hi`, upper edges inclusive).
pub fn bucket_names(edges: &[u64]) -> Vec<String> {
    let mut lo = 0;
    edges
        .iter()
        .map(|&hi| {
            let n = format!("{}-{}", lo + 1, hi);
            lo = hi;
            n
        })
        .collect()
}

/// The packets one device hands to the stack, counted by size: one
/// `net:netif_receive_skb` counter per bucket, filtered on the device name
/// and `len` (`skb->len`: the IP packet, no Ethernet header), buckets
/// `(previous edge, edge]`. What GRO produced, as the kernel reports it.
#[derive(Debug)]
pub struct SizeCounters {
    buckets: Vec<offload_sys::perf::TracepointCounter>,
}

impl SizeCounters {
    /// Opens the counters of `dev` for the buckets of `edges`.
    pub fn open(ids: &TracepointIds, dev: &str, edges: &[u64]) -> anyhow::Result<Self> {
        let mut lo = 0;
        let mut buckets = Vec::new();
        for &hi in edges {
            buckets.push(offload_sys::perf::TracepointCounter::open(
                ids.receive_skb,
                &format!("name == \"{dev}\" && len > {lo} && len <= {hi}"),
            )?);
            lo = hi;
        }
        Ok(SizeCounters { buckets })
    }

    /// The counts so far, one per bucket.
    pub fn read(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(offload_sys::perf::TracepointCounter::read)
            .collect()
    }
}

/// A settings map from pairs.
pub fn settings<const N: usize>(pairs: [(&str, Value); N]) -> BTreeMap<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_bench::report::{Counts, LatencyUs};

    /// A TCP_RR result of `done` transactions in a 1 s window costing
    /// `cpu_us` each (offload-bench reports 0 per transaction when none
    /// completed).
    fn rr(done: u64, cpu_us: f64) -> BenchResult {
        let latency = (done > 0).then_some(LatencyUs {
            min: 10.0,
            p50: 20.0,
            p90: 30.0,
            p99: 40.0,
            p999: 50.0,
            max: 60.0,
            mean: 21.0,
            count: done,
        });
        let cpu = offload_bench::report::CpuReport {
            client_seconds_per_transaction: cpu_us / 2e6,
            server_seconds_per_transaction: cpu_us / 2e6,
            ..Default::default()
        };
        BenchResult {
            test: TestKind::TcpRr,
            throughput: done as f64,
            throughput_units: "Trans/s".into(),
            bits_per_sec: 16.0 * done as f64,
            transactions_per_sec: done as f64,
            gbit_per_sec: 16e-9 * done as f64,
            packets_per_sec: 0.0,
            latency_us: latency,
            cpu_seconds_per_transaction: cpu_us / 1e6,
            cpu,
            counts: Counts {
                client_window: done,
                client_total: done,
                histogram: done,
                ..Counts::default()
            },
            udp: None,
            server: Default::default(),
            settings: Default::default(),
            intervals: Vec::new(),
            tcp_info: None,
        }
    }

    fn arm(name: &str, runs: &[(u64, f64)]) -> Arm {
        let mut a = Arm::new(name);
        a.runs = runs
            .iter()
            .map(|&(n, c)| figures(&rr(n, c), &[], None))
            .collect();
        a
    }

    /// A run that completed no transaction keeps its rate of 0, has no
    /// per-transaction figure, is left out of the comparison (no "CPU per
    /// transaction -100%") and gets a finding.
    #[test]
    fn a_run_without_transactions_is_left_out_and_found() {
        let none = figures(&rr(0, 0.0), &[], None);
        assert_eq!(none.get("transactions_per_sec"), Some(0.0));
        for m in [
            "cpu_us_per_transaction",
            "thread_cpu_us_per_transaction",
            "p50_us",
            "p99_us",
            "stack_packets_per_transaction",
        ] {
            assert_eq!(none.get(m), None, "{m}");
        }
        assert!(none.left_out());
        let some = figures(&rr(1000, 14.0), &[], None);
        assert!(!some.left_out());
        assert_eq!(some.get("cpu_us_per_transaction"), Some(14.0));

        let a = arm("1000-flows", &[(1000, 14.0), (1000, 15.0), (1000, 16.0)]);
        let b = arm("30000-flows", &[(900, 20.0), (0, 0.0), (800, 22.0)]);
        let c = Comparison::of(&a, &b).unwrap();
        assert_eq!(c.pairs, 2);
        assert_eq!(c.left_out_pairs, [1]);
        let cpu = c.get("cpu_us_per_transaction").unwrap();
        assert_eq!(cpu.pairs, 2);
        // Differences 20 - 14 and 22 - 16: mean +6, not -100%.
        assert!((cpu.mean - 6.0).abs() < 1e-9, "{cpu:?}");
        assert!(cpu.relative_percent > 0.0);
        let rate = c.get("transactions_per_sec").unwrap();
        assert_eq!(rate.pairs, 2, "the rate of the left-out pair too");
        // The arm's mean rate still counts the run's 0.
        assert!((b.mean("transactions_per_sec").unwrap() - 1700.0 / 3.0).abs() < 1e-9);

        let found = left_out_findings(&[a.clone(), b.clone()]);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].title.contains("30000-flows: 1 of 3 runs"),
            "{found:?}"
        );
        assert!(left_out_findings(std::slice::from_ref(&a)).is_empty());

        // Left out of a comparison, every pair: no interval remains.
        let only = arm("5000-flows", &[(1000, 15.0), (0, 0.0)]);
        assert!(Comparison::of(&a, &only).is_none());
    }
}
