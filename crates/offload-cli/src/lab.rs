//! `offload lab list` and `offload lab run NAME`: one-command experiments.
//!
//! The topologies, the knobs, the live GRO counters, the sample and the TUN
//! relay come from offload-lab; the traffic comes from offload-bench's
//! library. The runner that joins them lives here because offload-bench
//! itself builds on offload-lab's netlink code, so offload-lab cannot depend
//! on offload-bench (docs/decisions/0023-inspect-and-lab.md).
//!
//! Every scenario runs its arms in pairs, interleaved (A B, B A, A B...),
//! so that drift of a shared machine hits both arms alike, and reports each
//! arm's mean with the paired difference and its 95% confidence interval.
//! Everything it builds lives in anonymous namespaces: Ctrl-C stops after
//! the current run, prints what was measured, and the kernel removes the
//! namespaces with their devices and sysctls when the process exits.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use offload_bench::{BenchResult, ClientConfig, Secret, Server, ServerOptions, TestKind};
use offload_lab::live::{DeviceCounters, GroCounts, TracepointIds};
use offload_lab::relay::{Mode, Relay};
use offload_lab::sample::{self, SampleOptions};
use offload_lab::topo::{VethPair, VxlanPath};
use offload_lab::NetNs;
use offload_report::html::escape as html_escape;
use offload_report::stats::{mean_ci95, paired_difference, t_interval95, PairedDifference};
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// The scenarios, with the claim each one tests.
    List {
        /// JSON for programs.
        #[arg(long)]
        json: bool,
    },
    /// Run one scenario (see `offload lab list`).
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario name: big-tcp, vxlan-ip-id, udp-rx, many-flows.
    pub name: String,
    /// JSON for programs.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Measured time of each run (after a 1 s warm-up).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "3s")]
    pub duration: Duration,
    /// Pairs of runs per comparison (each arm runs this many times).
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// many-flows only: the flow counts of the curve, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,10,100,1000,10000,30000"
    )]
    pub flows: Vec<u32>,
}

/// A scenario's description.
struct Scenario {
    name: &'static str,
    claim: &'static str,
    source: &'static str,
    limits: &'static [&'static str],
}

const VETH_LIMITS: &[&str] = &[
    "veth has no RSS, no IRQs and no interrupt coalescing: IRQ affinity and ethtool -X/-N effects need real NICs",
    "NIC LRO and hardware GRO (rx-gro-hw) do not exist on veth",
    "driver tso_max_size limits: veth accepts 524280, real drivers often 65536",
    "figures come from a shared 2-vCPU VM: trust the paired difference, not the absolute numbers",
];

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "big-tcp",
        claim: "BIG TCP (gso/gro_max_size 185000) cuts the packets the stack handles per 80000-byte request/response and its latency",
        source: "Eric Dumazet, \"BIG TCP\", netdev 0x15 (2021) and LWN 884104: TCP_RR 80000/80000 with TCP_NODELAY",
        limits: VETH_LIMITS,
    },
    Scenario {
        name: "vxlan-ip-id",
        claim: "a tunnel hop that clears DF and randomises the outer IP ID stops GRO from merging VXLAN at the receiver (220 -> 140 Mbit/s)",
        source: "inet_gro_receive IP ID rule (net/ipv4/af_inet.c, 6.x); the VXLAN throughput report behind it",
        limits: &[
            "the broken hop is a userspace TUN relay (Linux never scrambles IDs itself), so absolute throughput is the relay's",
            "veth has no RSS, IRQs or NIC LRO; the receiver's GRO is veth's (sender TSO off), with gro_flush_timeout 1 ms so that GRO holds trains across the relay's one-packet writes as a NIC's ring would",
            "figures come from a shared 2-vCPU VM: trust the paired difference, not the absolute numbers",
        ],
    },
    Scenario {
        name: "udp-rx",
        claim: "for small-UDP receive rate, SO_REUSEPORT receivers pinned to CPUs, recvmmsg batches and busy polling each add packets per second",
        source: "Cloudflare, \"How to receive a million packets per second\" (2015); kernel busy_poll documentation",
        limits: VETH_LIMITS,
    },
    Scenario {
        name: "many-flows",
        claim: "CPU per transaction grows with the number of flows; the 6.8 cache-line reorganisation of TCP/netdev structures flattens the curve",
        source: "Coco Li, Eric Dumazet et al., \"net: group hot fields\" series, Linux 6.8 (up to 40% TCP_RR gain at 30k flows)",
        limits: VETH_LIMITS,
    },
];

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        LabCommand::List { json } => {
            if json {
                let list: Vec<Value> = SCENARIOS
                    .iter()
                    .map(|s| json!({"name": s.name, "claim": s.claim, "source": s.source}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for s in SCENARIOS {
                    println!(
                        "{:<12} {}\n{:<12} source: {}",
                        s.name, s.claim, "", s.source
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Run(args) => run_scenario(args),
    }
}

/// Figures of one run of one arm.
#[derive(Debug, Clone, Default, Serialize)]
struct RunFigures {
    transactions_per_sec: Option<f64>,
    p50_us: Option<f64>,
    p90_us: Option<f64>,
    p99_us: Option<f64>,
    cpu_us_per_transaction: Option<f64>,
    stack_packets_per_transaction: Option<f64>,
    gro_merge_ratio: Option<f64>,
    gbit_per_sec: Option<f64>,
    packets_per_sec: Option<f64>,
    drops: Option<f64>,
}

const METRICS: &[&str] = &[
    "transactions_per_sec",
    "p50_us",
    "p90_us",
    "p99_us",
    "cpu_us_per_transaction",
    "stack_packets_per_transaction",
    "gro_merge_ratio",
    "gbit_per_sec",
    "packets_per_sec",
    "drops",
];

impl RunFigures {
    fn get(&self, metric: &str) -> Option<f64> {
        match metric {
            "transactions_per_sec" => self.transactions_per_sec,
            "p50_us" => self.p50_us,
            "p90_us" => self.p90_us,
            "p99_us" => self.p99_us,
            "cpu_us_per_transaction" => self.cpu_us_per_transaction,
            "stack_packets_per_transaction" => self.stack_packets_per_transaction,
            "gro_merge_ratio" => self.gro_merge_ratio,
            "gbit_per_sec" => self.gbit_per_sec,
            "packets_per_sec" => self.packets_per_sec,
            "drops" => self.drops,
            _ => None,
        }
    }
}

/// One arm: its settings as read back and its runs.
#[derive(Debug, Clone, Default)]
struct Arm {
    name: String,
    settings: BTreeMap<String, Value>,
    runs: Vec<RunFigures>,
}

impl Arm {
    fn new(name: &str) -> Self {
        Arm {
            name: name.into(),
            ..Arm::default()
        }
    }

    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("settings".into(), json!(self.settings));
        for metric in METRICS {
            let v: Vec<f64> = self.runs.iter().filter_map(|r| r.get(metric)).collect();
            if !v.is_empty() {
                m.insert(
                    (*metric).into(),
                    json!(v.iter().sum::<f64>() / v.len() as f64),
                );
            }
        }
        m.insert("runs".into(), json!(self.runs));
        Value::Object(m)
    }

    fn mean(&self, metric: &str) -> Option<f64> {
        let v: Vec<f64> = self.runs.iter().filter_map(|r| r.get(metric)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// A lab finding.
#[derive(Debug, Clone, Serialize)]
struct LabFinding {
    severity: &'static str,
    title: String,
    detail: String,
    flow: Option<String>,
    fix: Option<String>,
}

/// Everything a run reports.
struct Outcome {
    arms: Vec<Arm>,
    comparisons: Vec<Value>,
    findings: Vec<LabFinding>,
    extra: BTreeMap<String, Value>,
    interrupted: bool,
}

fn cancelled(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}

fn run_scenario(args: RunArgs) -> anyhow::Result<ExitCode> {
    let scenario = SCENARIOS
        .iter()
        .find(|s| s.name == args.name)
        .ok_or_else(|| {
            anyhow!(
                "no scenario {:?}; known: {}",
                args.name,
                SCENARIOS
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    let started = Instant::now();
    let progress = !args.json;
    if progress {
        eprintln!("offload lab run {}: {}", scenario.name, scenario.claim);
    }
    let outcome = match scenario.name {
        "big-tcp" => big_tcp(&args, &cancel, progress),
        "vxlan-ip-id" => vxlan_ip_id(&args, &cancel, progress),
        "udp-rx" => udp_rx(&args, &cancel, progress),
        "many-flows" => many_flows(&args, &cancel, progress),
        _ => unreachable!("scenario list and dispatch agree"),
    }
    .with_context(|| format!("lab scenario {}", scenario.name))?;
    let report = json!({
        "scenario": scenario.name,
        "claim": scenario.claim,
        "source": scenario.source,
        "arms": outcome.arms.iter().map(Arm::to_json).collect::<Vec<_>>(),
        "comparison": outcome.comparisons,
        "findings": outcome.findings,
        "limits": scenario.limits,
        "details": outcome.extra,
        "runs_per_arm": outcome.arms.iter().map(|a| a.runs.len()).max().unwrap_or(0),
        "run_seconds": args.duration.as_secs_f64(),
        "elapsed_seconds": started.elapsed().as_secs_f64(),
        "interrupted": outcome.interrupted,
    });
    if let Some(path) = &args.html {
        std::fs::write(path, render_html(&report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        print!("{}", render_text(&report));
    }
    Ok(if outcome.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// A bench server serving inside a namespace until dropped.
struct ServerInNs {
    addr: SocketAddr,
    /// A fresh secret per server: it listens beyond loopback (in the
    /// experiment's namespace), where the bench server requires one.
    secret: Secret,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<offload_lab::Result<()>>>,
}

impl ServerInNs {
    fn start(ns: &NetNs, ip: IpAddr) -> anyhow::Result<Self> {
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
            let sys_err = |op: &str, e: std::io::Error| offload_lab::Error::Sys {
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
    fn config(&self, kind: TestKind) -> ClientConfig {
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
fn bench_in(ns: &NetNs, cfg: &ClientConfig) -> anyhow::Result<BenchResult> {
    let cfg = cfg.clone();
    ns.run(move || Ok(offload_bench::run_once(&cfg, &mut |_| {})))?
        .map_err(|e| anyhow!("bench: {e}"))
}

/// Runs one bench client inside `ns` on a thread whose descriptor table is
/// its own, so that its flows do not count against the table the
/// in-process server fills.
fn bench_private_table(ns: &NetNs, cfg: &ClientConfig) -> anyhow::Result<BenchResult> {
    let cfg = cfg.clone();
    ns.run(move || {
        offload_bench::sys::unshare_fd_table().map_err(|e| offload_lab::Error::Sys {
            op: "unshare(CLONE_FILES)".into(),
            source: e,
        })?;
        Ok(offload_bench::run_once(&cfg, &mut |_| {}))
    })?
    .map_err(|e| anyhow!("bench: {e}"))
}

/// Counts GRO on `devices` around `f`.
fn counted<T>(
    ids: &TracepointIds,
    devices: &[String],
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<GroCounts>)> {
    let counters: Vec<DeviceCounters> = devices
        .iter()
        .map(|d| DeviceCounters::open(ids, d))
        .collect::<Result<_, _>>()
        .context("tracepoint counters")?;
    let t = f()?;
    Ok((t, counters.iter().map(DeviceCounters::read).collect()))
}

fn figures(r: &BenchResult, counts: &[GroCounts], merge_device: Option<usize>) -> RunFigures {
    let stack: u64 = counts.iter().map(|c| c.stack).sum();
    let transactions = r.counts.client_total.max(1);
    RunFigures {
        transactions_per_sec: Some(r.transactions_per_sec),
        p50_us: finite(r.select("p50_us")),
        p90_us: finite(r.select("p90_us")),
        p99_us: finite(r.select("p99_us")),
        cpu_us_per_transaction: finite(r.select("cpu_us_per_transaction")),
        stack_packets_per_transaction: (r.test.is_rr() && stack > 0)
            .then(|| stack as f64 / transactions as f64),
        gro_merge_ratio: merge_device
            .and_then(|i| counts.get(i))
            .and_then(GroCounts::merge_ratio),
        gbit_per_sec: Some(r.gbit_per_sec),
        packets_per_sec: r.test.is_udp().then_some(r.packets_per_sec),
        drops: r
            .udp
            .as_ref()
            .map(|u| (u.lost.max(u.kernel_rcvbuf_errors)) as f64),
    }
}

fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

fn log_run(progress: bool, arm: &str, i: u32, f: &RunFigures) {
    if !progress {
        return;
    }
    let mut parts = vec![format!("  {arm:<12} run {}", i + 1)];
    let fmt = |name: &str, v: Option<f64>| v.map(|v| format!("{name} {v:.1}"));
    parts.extend(fmt("tps", f.transactions_per_sec));
    parts.extend(fmt("p50_us", f.p50_us));
    parts.extend(fmt("p99_us", f.p99_us));
    parts.extend(fmt("Gbit/s", f.gbit_per_sec));
    parts.extend(fmt("pps", f.packets_per_sec));
    parts.extend(fmt("stack_pkts/tx", f.stack_packets_per_transaction));
    parts.extend(fmt("gro_ratio", f.gro_merge_ratio));
    parts.extend(fmt("cpu_us/tx", f.cpu_us_per_transaction));
    eprintln!("{}", parts.join("  "));
}

/// The paired comparison of arm `b` against arm `a` on every metric both have.
fn compare(a: &Arm, b: &Arm) -> Value {
    let mut metrics = serde_json::Map::new();
    for metric in METRICS {
        let pairs: Vec<(f64, f64)> = a
            .runs
            .iter()
            .zip(&b.runs)
            .filter_map(|(x, y)| Some((x.get(metric)?, y.get(metric)?)))
            .collect();
        let (xa, xb): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        if xa.len() >= 2 {
            if let Some(d) = paired_difference(&xa, &xb) {
                metrics.insert((*metric).into(), paired_json(&d));
            }
        }
    }
    json!({"a": a.name, "b": b.name, "pairs": a.runs.len().min(b.runs.len()), "difference_b_minus_a": metrics})
}

fn paired_json(d: &PairedDifference) -> Value {
    // A plain t interval of the mean difference: offload-bench's summary
    // switches to a log-normal interval when every value is positive,
    // which suits rates but not differences that happen to share a sign.
    let (low, high) = t_interval95(d.difference.mean, d.difference.stddev, d.difference.n);
    let rel = |v: f64| {
        if d.a.mean != 0.0 {
            100.0 * v / d.a.mean
        } else {
            f64::NAN
        }
    };
    json!({
        "a_mean": d.a.mean,
        "b_mean": d.b.mean,
        "mean": d.difference.mean,
        "ci95": [low, high],
        "relative_percent": rel(d.difference.mean),
        "relative_ci95_percent": [rel(low), rel(high)],
        "significant": low > 0.0 || high < 0.0,
    })
}

/// Runs `arms` interleaved for `runs` pairs: pair i runs them in order when
/// i is even, reversed when odd. `run_arm(index, run)` does one run.
fn interleave(
    arms: &mut [Arm],
    runs: u32,
    cancel: &AtomicBool,
    progress: bool,
    mut run_arm: impl FnMut(usize, u32) -> anyhow::Result<RunFigures>,
) -> anyhow::Result<bool> {
    let n = arms.len();
    for i in 0..runs {
        let order: Vec<usize> = if i % 2 == 0 {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        for a in order {
            if cancelled(cancel) {
                return Ok(true);
            }
            let f = run_arm(a, i)?;
            log_run(progress, &arms[a].name, i, &f);
            arms[a].runs.push(f);
        }
    }
    Ok(cancelled(cancel))
}

fn knobs_json(m: &BTreeMap<String, u64>) -> Value {
    json!(m)
}

fn big_tcp(args: &RunArgs, cancel: &AtomicBool, progress: bool) -> anyhow::Result<Outcome> {
    const SIZE: u32 = 185_000;
    let mut pair = VethPair::new("b")?;
    let ids = TracepointIds::read()?;
    let server = ServerInNs::start(&pair.server.ns, VethPair::SERVER6.into())?;
    let mut cfg = server.config(TestKind::TcpRr);
    cfg.spec.request = 80_000;
    cfg.spec.response = 80_000;
    cfg.spec.knobs.nodelay = true;
    cfg.duration = args.duration;
    cfg.warmup = Duration::from_secs(1);
    let mut arms = vec![Arm::new("default"), Arm::new("big-tcp")];
    let sizes = [65_536u32, SIZE];
    let devices = vec![pair.client_dev.clone(), pair.server_dev.clone()];
    for (arm, size) in arms.iter_mut().zip(sizes) {
        // Read the knobs back once per arm for the report.
        let c = pair.client.set_big_tcp(&pair.client_dev, size)?;
        let s = pair.server.set_big_tcp(&pair.server_dev, size)?;
        arm.settings.insert("client".into(), knobs_json(&c));
        arm.settings.insert("server".into(), knobs_json(&s));
        arm.settings.insert(
            "test".into(),
            json!("tcp-rr 80000/80000 TCP_NODELAY over IPv6, 1 flow"),
        );
    }
    let (cdev, sdev) = (pair.client_dev.clone(), pair.server_dev.clone());
    let interrupted = interleave(&mut arms, args.runs, cancel, progress, |a, _| {
        pair.client.set_big_tcp(&cdev, sizes[a])?;
        pair.server.set_big_tcp(&sdev, sizes[a])?;
        let (r, counts) = counted(&ids, &devices, || bench_in(&pair.client.ns, &cfg))?;
        Ok(figures(&r, &counts, None))
    })?;
    drop(server);
    let mut findings = Vec::new();
    if let (Some(d), Some(b)) = (
        arms[0].mean("stack_packets_per_transaction"),
        arms[1].mean("stack_packets_per_transaction"),
    ) {
        findings.push(LabFinding {
            severity: if b < d { "info" } else { "medium" },
            title: if b < d {
                format!("BIG TCP cut stack packets per transaction from {d:.2} to {b:.2}")
            } else {
                format!("BIG TCP did not cut stack packets per transaction ({d:.2} -> {b:.2})")
            },
            detail: "packets entering the stack (net:netif_receive_skb) on both veth ends, per completed transaction; an 80000-byte message fits one BIG TCP packet but needs two 64 KiB ones".into(),
            flow: None,
            fix: (b < d).then(|| "ip link set dev DEV gso_max_size 185000 gro_max_size 185000 gso_ipv4_max_size 185000 gro_ipv4_max_size 185000 (IPv6 knobs first) on both ends".into()),
        });
    }
    let comparisons = vec![compare(&arms[0], &arms[1])];
    Ok(Outcome {
        arms,
        comparisons,
        findings,
        extra: BTreeMap::new(),
        interrupted,
    })
}

fn vxlan_ip_id(args: &RunArgs, cancel: &AtomicBool, progress: bool) -> anyhow::Result<Outcome> {
    let mut path = VxlanPath::new()?;
    let relay = Relay::start(&path.m1.ns, &path.m1_tun, &path.m2.ns, &path.m2_tun)?;
    path.attach_tuns()?;
    let ids = TracepointIds::read()?;
    let server = ServerInNs::start(&path.b.ns, VxlanPath::B_INNER.into())?;
    let mut cfg = server.config(TestKind::TcpStream);
    cfg.duration = args.duration;
    cfg.warmup = Duration::from_secs(1);
    let mut arms = vec![
        Arm::new("healthy"),
        Arm::new("scrambled"),
        Arm::new("random-id-df"),
    ];
    let modes = [Mode::Forward, Mode::Scramble, Mode::ScrambleKeepDf];
    for (arm, mode) in arms.iter_mut().zip(modes) {
        arm.settings.insert(
            "middle_hop".into(),
            json!(match mode {
                Mode::Forward => "forwards outer IPv4 headers unchanged (IDs increment, as the sender's GSO made them)",
                Mode::Scramble => "clears DF and writes a random outer IP ID into every A->B packet",
                Mode::ScrambleKeepDf => "sets DF and writes a random outer IP ID into every A->B packet (what 6.1 still merged)",
            }),
        );
        arm.settings.insert("receiver".into(), json!(path.b_dev));
        arm.settings.insert(
            "receiver_knobs".into(),
            knobs_json(&path.b.knobs(&path.b_dev)?),
        );
        arm.settings.insert(
            "receiver_gro".into(),
            json!(path.b.ethtool().feature(&path.b_dev, "rx-gro")?),
        );
        arm.settings.insert(
            "test".into(),
            json!("tcp-stream A -> B over VXLAN (vni 42, port 4789), 1 flow"),
        );
    }
    let devices = vec![path.b_dev.clone()];
    let a_ns = &path.a.ns;
    let interrupted = interleave(&mut arms, args.runs, cancel, progress, |a, _| {
        relay.set_mode(modes[a]);
        let (r, counts) = counted(&ids, &devices, || bench_in(a_ns, &cfg))?;
        Ok(figures(&r, &counts, Some(0)))
    })?;
    // A sample of what reaches B's stack while the hop scrambles: the
    // analysis names the flow and the rule that stops it merging.
    let mut findings = Vec::new();
    let mut extra = BTreeMap::new();
    if !interrupted {
        let b_index = path.b.index(&path.b_dev)?;
        let mut sample_cfg = cfg.clone();
        sample_cfg.duration = Duration::from_secs(2);
        let b_ns = &path.b.ns;
        let b_dev = path.b_dev.clone();
        let take = |mode: Mode, profiles: Vec<offload_analyze::KernelProfile>| {
            relay.set_mode(mode);
            let dev = b_dev.clone();
            std::thread::scope(|s| -> anyhow::Result<_> {
                let traffic = s.spawn(|| bench_in(a_ns, &sample_cfg));
                let never = AtomicBool::new(false);
                let rep = b_ns.run(|| {
                    sample::sample(
                        &[(dev, b_index)],
                        &SampleOptions {
                            count: 3000,
                            timeout: Duration::from_secs(3),
                            keep: None,
                            profiles,
                        },
                        &never,
                    )
                });
                let _ = traffic.join();
                Ok(rep?)
            })
        };
        let scrambled = take(Mode::Scramble, Vec::new())?;
        // Only findings about a flow: the sample is post-GRO, so verdicts
        // about BIG TCP from it would be about the capture, not the host.
        for f in scrambled
            .analysis
            .findings
            .iter()
            .filter(|f| f.flow.is_some())
        {
            findings.push(LabFinding {
                severity: match f.severity {
                    offload_analyze::report::Severity::High => "high",
                    offload_analyze::report::Severity::Medium => "medium",
                    offload_analyze::report::Severity::Info => "info",
                },
                title: f.title.clone(),
                detail: f.detail.clone(),
                flow: f.flow.as_ref().map(|fl| fl.description.clone()),
                fix: Some(f.fix.clone()),
            });
        }
        extra.insert(
            "sample_scrambled".into(),
            json!({"frames": scrambled.frames, "devices": scrambled.devices}),
        );
        let df = take(
            Mode::ScrambleKeepDf,
            vec![
                offload_analyze::KernelProfile::V6_1,
                offload_analyze::KernelProfile::V6_18,
            ],
        )?;
        extra.insert(
            "random_id_df_by_kernel".into(),
            json!({
                "note": "the random-id-df arm's post-GRO sample replayed through the engine: what GRO at 64 KiB would merge under each kernel line",
                "frames": df.frames,
                "what_if": df.what_if,
            }),
        );
        if let (Some(old), Some(new)) = (
            df.what_if.iter().find(|w| w.kernel == "6.1"),
            df.what_if.iter().find(|w| w.kernel == "6.18"),
        ) {
            findings.push(LabFinding {
                severity: "info",
                title: format!(
                    "with DF set and random outer IDs, 6.1 would merge {:.1}:1, 6.18 merges {:.1}:1",
                    old.merge_ratio, new.merge_ratio
                ),
                detail: "6.1 ignored the IP ID of DF-set (atomic) outer headers; 6.18 accepts only incrementing or fixed IDs whatever DF says, so a hop that randomises IDs breaks GRO after an upgrade even when it keeps DF".into(),
                flow: None,
                fix: Some("make the hop keep the IDs it received (or a fixed ID with DF set)".into()),
            });
        }
    }
    if let (Some(h), Some(s)) = (
        arms[0].mean("gro_merge_ratio"),
        arms[1].mean("gro_merge_ratio"),
    ) {
        findings.insert(
            0,
            LabFinding {
                severity: if h >= 5.0 * s { "high" } else { "info" },
                title: format!(
                    "receiver GRO merges {h:.1} packets per stack packet behind a healthy hop, {s:.1} behind the scrambling one"
                ),
                detail: format!(
                    "on {} (B's underlay, veth GRO): net:napi_gro_receive_entry / net:netif_receive_skb; outer headers without DF must carry consecutive IP IDs to merge (inet_gro_receive, 6.x)",
                    path.b_dev
                ),
                flow: Some(format!(
                    "{} -> {} udp/{} (VXLAN vni 42)",
                    VxlanPath::A_OUTER,
                    VxlanPath::B_OUTER,
                    VxlanPath::PORT
                )),
                fix: Some("fix the middle hop: keep DF, or keep the sender's IP IDs".into()),
            },
        );
    }
    extra.insert(
        "relay".into(),
        json!({
            "forwarded": relay.stats().forward.load(Ordering::Relaxed),
            "backward": relay.stats().backward.load(Ordering::Relaxed),
            "rewritten": relay.stats().rewritten.load(Ordering::Relaxed),
            "errors": relay.stats().errors.load(Ordering::Relaxed),
        }),
    );
    drop(server);
    drop(relay);
    let comparisons = vec![compare(&arms[0], &arms[1]), compare(&arms[0], &arms[2])];
    Ok(Outcome {
        arms,
        comparisons,
        findings,
        extra,
        interrupted,
    })
}

fn udp_rx(args: &RunArgs, cancel: &AtomicBool, progress: bool) -> anyhow::Result<Outcome> {
    let pair = VethPair::new("u")?;
    // GRO on the receiving veth gives it a NAPI instance (veth_napi_add),
    // and TSO off on the sending one makes veth_xmit use it
    // (veth_skb_is_eligible_for_gro): packets then arrive through NAPI,
    // sockets get a NAPI ID, and busy polling has something to poll.
    pair.server
        .features(&pair.server_dev, &[("rx-gro", true)])?;
    pair.client.tso_off(&pair.client_dev)?;
    let ids = TracepointIds::read()?;
    let server = ServerInNs::start(&pair.server.ns, VethPair::SERVER4.into())?;
    let cpus = offload_lab::live::online_cpus().len().max(1);
    let base = {
        let mut c = server.config(TestKind::UdpStream);
        c.spec.request = 32;
        c.duration = args.duration;
        c.warmup = Duration::from_secs(1);
        c
    };
    let mut configs = Vec::new();
    let mut arms = Vec::new();
    // one receiver
    configs.push(base.clone());
    arms.push(Arm::new("one-receiver"));
    // SO_REUSEPORT receivers, pinned
    let mut c = base.clone();
    c.spec.flows = cpus as u32;
    c.threads = 1;
    c.spec.server_threads = cpus as u32;
    c.spec.knobs.reuseport = true;
    c.spec.server_pin = Some((0..cpus).collect());
    configs.push(c.clone());
    arms.push(Arm::new("reuseport-pinned"));
    // plus recvmmsg batches
    c.spec.knobs.batch = 64;
    configs.push(c.clone());
    arms.push(Arm::new("plus-recvmmsg"));
    // plus busy polling
    c.spec.knobs.busy_poll_us = Some(50);
    configs.push(c.clone());
    arms.push(Arm::new("plus-busy-poll"));
    let gro = pair.server.ethtool().feature(&pair.server_dev, "rx-gro")?;
    for (arm, cfg) in arms.iter_mut().zip(&configs) {
        arm.settings
            .insert("receivers".into(), json!(cfg.spec.server_threads));
        arm.settings
            .insert("reuseport".into(), json!(cfg.spec.knobs.reuseport));
        arm.settings
            .insert("server_pin".into(), json!(cfg.spec.server_pin));
        arm.settings
            .insert("batch".into(), json!(cfg.spec.knobs.batch));
        arm.settings
            .insert("busy_poll_us".into(), json!(cfg.spec.knobs.busy_poll_us));
        arm.settings
            .insert("datagram_bytes".into(), json!(cfg.spec.request));
        arm.settings.insert("receiver_gro".into(), json!(gro));
        arm.settings.insert("sender_tso".into(), json!(false));
        arm.settings
            .insert("sender_sockets".into(), json!(cfg.spec.flows));
    }
    let devices = vec![pair.server_dev.clone()];
    let interrupted = interleave(&mut arms, args.runs, cancel, progress, |a, _| {
        let (r, counts) = counted(&ids, &devices, || bench_in(&pair.client.ns, &configs[a]))?;
        Ok(figures(&r, &counts, Some(0)))
    })?;
    drop(server);
    let comparisons = (1..arms.len())
        .map(|i| compare(&arms[i - 1], &arms[i]))
        .collect();
    let mut findings = Vec::new();
    let best = arms
        .iter()
        .filter_map(|a| Some((a.name.clone(), a.mean("packets_per_sec")?)))
        .max_by(|x, y| x.1.total_cmp(&y.1));
    if let Some((name, pps)) = best {
        findings.push(LabFinding {
            severity: "info",
            title: format!("highest receive rate: {name}, {pps:.0} packets/s"),
            detail: "32-byte datagrams over veth; on 2 vCPUs the sender competes with the receivers for the same CPUs".into(),
            flow: None,
            fix: None,
        });
    }
    Ok(Outcome {
        arms,
        comparisons,
        findings,
        extra: BTreeMap::new(),
        interrupted,
    })
}

fn many_flows(args: &RunArgs, cancel: &AtomicBool, progress: bool) -> anyhow::Result<Outcome> {
    let mut flow_levels = args.flows.clone();
    flow_levels.sort_unstable();
    flow_levels.dedup();
    if flow_levels.first() == Some(&0) || flow_levels.is_empty() {
        bail!("--flows takes flow counts of at least 1");
    }
    // Client and server share this process. Each side holds its flows in a
    // descriptor table of its own (ServerInNs and bench_private_table), and
    // past RLIMIT_NOFILE offload-bench gives each worker a table (its
    // decision 0034), so the hard limit bounds a worker's share, not the
    // curve.
    let fd_limit = offload_bench::sys::raise_fd_limit(1 << 20).unwrap_or(1024);
    let pair = VethPair::new("m")?;
    let ids = TracepointIds::read()?;
    let mut arms: Vec<Arm> = flow_levels
        .iter()
        .map(|f| {
            let mut a = Arm::new(&format!("{f}-flows"));
            a.settings.insert("flows".into(), json!(f));
            a.settings.insert("test".into(), json!("tcp-rr 1/1"));
            a
        })
        .collect();
    let devices = vec![pair.server_dev.clone(), pair.client_dev.clone()];
    // Flow counts run in rising order once per pass: the curve, not a
    // pairwise test, is the result; passes repeat it.
    let mut interrupted = false;
    let mut notes: Vec<String> = Vec::new();
    'outer: for pass in 0..args.runs.min(2) {
        for (i, flows) in flow_levels.iter().enumerate() {
            if cancelled(cancel) {
                interrupted = true;
                break 'outer;
            }
            // A fresh server per level: its thread's descriptor table then
            // holds no sockets of the previous level still being torn
            // down, which a worker's private copy would inherit.
            let server = ServerInNs::start(&pair.server.ns, VethPair::SERVER4.into())?;
            let mut cfg = server.config(TestKind::TcpRr);
            cfg.spec.flows = *flows;
            cfg.threads = (*flows).min(2);
            cfg.spec.server_threads = (*flows).min(2);
            cfg.duration = args.duration.min(Duration::from_secs(3));
            cfg.warmup = Duration::from_secs(1);
            let (r, counts) = counted(&ids, &devices, || {
                bench_private_table(&pair.client.ns, &cfg)
            })?;
            for note in &r.settings.notes {
                if !notes.contains(note) {
                    notes.push(note.clone());
                }
            }
            drop(server);
            let f = figures(&r, &counts, None);
            log_run(progress, &arms[i].name, pass, &f);
            arms[i].runs.push(f);
        }
    }
    let groups = offload_lab::inspect::btf_has_cacheline_groups();
    let mut extra = BTreeMap::new();
    extra.insert("cacheline_groups_6_8".into(), json!(groups));
    extra.insert("fd_limit".into(), json!(fd_limit));
    extra.insert("bench_notes".into(), json!(notes));
    let curve: Vec<Value> = arms
        .iter()
        .map(|a| {
            json!({"flows": a.settings["flows"], "cpu_us_per_transaction": a.mean("cpu_us_per_transaction"), "transactions_per_sec": a.mean("transactions_per_sec")})
        })
        .collect();
    extra.insert("curve".into(), json!(curve));
    let mut findings = Vec::new();
    if let (Some(one), Some(many)) = (
        arms.first().and_then(|a| a.mean("cpu_us_per_transaction")),
        arms.iter().rev().find_map(|a| {
            a.mean("cpu_us_per_transaction")
                .map(|v| (a.name.clone(), v))
        }),
    ) {
        findings.push(LabFinding {
            severity: "info",
            title: format!(
                "CPU per transaction: {one:.2} us at 1 flow, {:.2} us at {}",
                many.1, many.0
            ),
            detail: format!(
                "this kernel {} the 6.8 cache-line groups (BTF __cacheline_group_begin__*); compare with a pre-6.8 kernel to see their effect",
                match groups {
                    Some(true) => "has",
                    Some(false) => "lacks",
                    None => "may have (no BTF to tell)",
                }
            ),
            flow: None,
            fix: None,
        });
    }
    // Neighbouring flow counts compared as independent samples would need
    // pairing; the curve is reported instead.
    Ok(Outcome {
        arms,
        comparisons: Vec::new(),
        findings,
        extra,
        interrupted,
    })
}

fn fmt_num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
        None => "-".into(),
    }
}

fn render_text(r: &Value) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "scenario {}: {}\n",
        r["scenario"].as_str().unwrap_or(""),
        r["claim"].as_str().unwrap_or("")
    ));
    s.push_str(&format!(
        "source: {}\n\n",
        r["source"].as_str().unwrap_or("")
    ));
    let arms = r["arms"].as_array().cloned().unwrap_or_default();
    let shown: Vec<&str> = METRICS
        .iter()
        .copied()
        .filter(|m| arms.iter().any(|a| a.get(*m).is_some()))
        .collect();
    s.push_str(&format!("{:<18}", "arm"));
    for m in &shown {
        s.push_str(&format!(" {:>14}", short(m)));
    }
    s.push('\n');
    for a in &arms {
        s.push_str(&format!("{:<18}", a["name"].as_str().unwrap_or("")));
        for m in &shown {
            s.push_str(&format!(" {:>14}", fmt_num(&a[*m])));
        }
        s.push('\n');
    }
    for a in &arms {
        s.push_str(&format!(
            "  {} settings: {}\n",
            a["name"].as_str().unwrap_or(""),
            a["settings"]
        ));
    }
    if let Some(cmps) = r["comparison"].as_array() {
        for c in cmps {
            s.push_str(&format!(
                "\n{} - {} ({} pairs, 95% CI):\n",
                c["b"].as_str().unwrap_or(""),
                c["a"].as_str().unwrap_or(""),
                c["pairs"]
            ));
            if let Some(m) = c["difference_b_minus_a"].as_object() {
                for (k, d) in m {
                    s.push_str(&format!(
                        "  {:<30} {:>12} [{}, {}]  {:+.1}%{}\n",
                        k,
                        fmt_num(&d["mean"]),
                        fmt_num(&d["ci95"][0]),
                        fmt_num(&d["ci95"][1]),
                        d["relative_percent"].as_f64().unwrap_or(0.0),
                        if d["significant"] == true {
                            "  significant"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
    }
    if let Some(f) = r["findings"].as_array() {
        s.push_str("\nfindings:\n");
        for x in f {
            s.push_str(&format!(
                "  [{}] {}\n",
                x["severity"].as_str().unwrap_or(""),
                x["title"].as_str().unwrap_or("")
            ));
            if let Some(fl) = x["flow"].as_str() {
                s.push_str(&format!("      flow: {fl}\n"));
            }
            s.push_str(&format!("      {}\n", x["detail"].as_str().unwrap_or("")));
            if let Some(fix) = x["fix"].as_str() {
                s.push_str(&format!("      fix: {fix}\n"));
            }
        }
    }
    if let Some(d) = r["details"].as_object() {
        for (k, v) in d {
            s.push_str(&format!("\n{k}: {v}\n"));
        }
    }
    if let Some(l) = r["limits"].as_array() {
        s.push_str("\nwhat veth cannot reproduce:\n");
        for x in l {
            s.push_str(&format!("  - {}\n", x.as_str().unwrap_or("")));
        }
    }
    s.push_str(&format!(
        "\n{} runs per arm of {} s, {:.0} s in all{}\n",
        r["runs_per_arm"],
        r["run_seconds"],
        r["elapsed_seconds"].as_f64().unwrap_or(0.0),
        if r["interrupted"] == true {
            " (interrupted)"
        } else {
            ""
        }
    ));
    s
}

fn short(metric: &str) -> &str {
    match metric {
        "transactions_per_sec" => "trans/s",
        "cpu_us_per_transaction" => "cpu_us/trans",
        "stack_packets_per_transaction" => "stack_pkt/tr",
        "gro_merge_ratio" => "gro_ratio",
        "gbit_per_sec" => "Gbit/s",
        "packets_per_sec" => "packets/s",
        m => m,
    }
}

/// One arm's bar in a chart: the mean of a metric over its runs, the 95%
/// confidence interval (two runs or more) and the number of runs.
struct Bar {
    name: String,
    mean: f64,
    ci: Option<(f64, f64)>,
    n: usize,
}

/// Mean and 95% confidence interval of one metric over an arm's runs.
fn arm_interval(arm: &Value, metric: &str) -> Option<Bar> {
    let v: Vec<f64> = arm["runs"]
        .as_array()?
        .iter()
        .filter_map(|r| r[metric].as_f64())
        .collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let ci = (n >= 2).then(|| mean_ci95(&v)).flatten();
    Some(Bar {
        name: arm["name"].as_str().unwrap_or("").to_string(),
        mean,
        ci,
        n,
    })
}

/// One metric as an inline SVG bar chart: a bar per arm at its mean, a
/// whisker for its 95% CI over the runs.
fn svg_bars(metric: &str, rows: &[Bar]) -> String {
    const LABEL: f64 = 150.0;
    const PLOT: f64 = 420.0;
    const ROW: f64 = 26.0;
    let top = rows
        .iter()
        .map(|b| b.ci.map_or(b.mean, |c| c.1).max(b.mean))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let x = |v: f64| LABEL + (v.max(0.0) / top) * PLOT;
    let height = ROW * rows.len() as f64 + 24.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" role=\"img\" aria-label=\"{m}\">\
         <text x=\"0\" y=\"14\" font-size=\"13\" font-weight=\"bold\">{m}</text>",
        w = LABEL + PLOT + 110.0,
        m = html_escape(metric)
    );
    for (i, Bar { name, mean, ci, n }) in rows.iter().enumerate() {
        let y = 22.0 + ROW * i as f64;
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{ty}\" font-size=\"12\">{name}</text>\
             <rect x=\"{LABEL}\" y=\"{y}\" width=\"{bw:.1}\" height=\"{bh}\" fill=\"#4a7fb5\"/>",
            ty = y + 14.0,
            name = html_escape(name),
            bw = x(*mean) - LABEL,
            bh = ROW - 8.0
        ));
        if let Some((lo, hi)) = ci {
            let cy = y + (ROW - 8.0) / 2.0;
            svg.push_str(&format!(
                "<line x1=\"{a:.1}\" x2=\"{b:.1}\" y1=\"{cy}\" y2=\"{cy}\" stroke=\"#000\"/>\
                 <line x1=\"{a:.1}\" x2=\"{a:.1}\" y1=\"{t}\" y2=\"{u}\" stroke=\"#000\"/>\
                 <line x1=\"{b:.1}\" x2=\"{b:.1}\" y1=\"{t}\" y2=\"{u}\" stroke=\"#000\"/>",
                a = x(*lo),
                b = x(*hi),
                t = cy - 5.0,
                u = cy + 5.0
            ));
        }
        let label = match ci {
            Some((lo, hi)) => format!(
                "{} [{}, {}] n={n}",
                fmt_num(&json!(mean)),
                fmt_num(&json!(lo)),
                fmt_num(&json!(hi))
            ),
            None => format!("{} n={n}", fmt_num(&json!(mean))),
        };
        svg.push_str(&format!(
            "<text x=\"{tx:.1}\" y=\"{ty}\" font-size=\"11\">{label}</text>",
            tx = x(ci.map_or(*mean, |c| c.1).max(*mean)) + 4.0,
            ty = y + 14.0,
            label = html_escape(&label)
        ));
    }
    svg.push_str("</svg>");
    svg
}

/// A self-contained page: the claim, a bar chart per metric with per-arm
/// 95% CIs (inline SVG, nothing fetched), settings read back, limits, the
/// text report and the JSON.
fn render_html(r: &Value) -> String {
    let text = |k: &str| html_escape(r[k].as_str().unwrap_or(""));
    let arms = r["arms"].as_array().cloned().unwrap_or_default();
    let mut charts = String::new();
    for metric in METRICS {
        let rows: Vec<Bar> = arms
            .iter()
            .filter_map(|a| arm_interval(a, metric))
            .collect();
        if !rows.is_empty() {
            charts.push_str(&format!("<figure>{}</figure>", svg_bars(metric, &rows)));
        }
    }
    let mut settings = String::new();
    for a in &arms {
        settings.push_str(&format!(
            "<tr><td>{}</td><td><code>{}</code></td></tr>",
            html_escape(a["name"].as_str().unwrap_or("")),
            html_escape(&a["settings"].to_string())
        ));
    }
    let limits: String = r["limits"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|x| format!("<li>{}</li>", html_escape(x.as_str().unwrap_or(""))))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<!doctype html><html lang=en><meta charset=utf-8><title>offload lab {name}</title>\
         <style>body{{font-family:sans-serif;max-width:70em;margin:2em auto}}pre{{background:#f4f4f4;padding:1em;overflow:auto}}\
         td{{padding:.2em .6em;vertical-align:top}}figure{{margin:1em 0}}</style>\
         <h1>offload lab: {name}</h1><p><b>Claim:</b> {claim}</p><p><b>Source:</b> {source}</p>\
         <h2>Figures</h2><p>Bars: mean over each arm's runs; whiskers: 95% t interval over those runs \
         (paired differences are in the report below).</p>{charts}\
         <h2>Settings read back</h2><table>{settings}</table>\
         <h2>What this setup cannot reproduce</h2><ul>{limits}</ul>\
         <h2>Report</h2><pre>{report}</pre><h2>JSON</h2><pre>{json}</pre></html>",
        name = text("scenario"),
        claim = text("claim"),
        source = text("source"),
        report = html_escape(&render_text(r)),
        json = html_escape(&serde_json::to_string_pretty(r).unwrap_or_default())
    )
}
