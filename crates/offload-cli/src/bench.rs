//! `offload bench`: argument parsing and printing for the benchmark. The
//! measurement itself lives in the `offload-bench` crate; this module maps
//! options onto its `ClientConfig` and prints tables, JSON, `-O` columns and
//! `--output` rows.
//!
//! Each test has its own option set (`offload bench udp-stream --help`
//! lists only what applies to udp-stream); they all flatten into [`Flat`].

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, FromArgMatches};
use offload_bench::report::{
    canonical_selector, BenchResult, CompareReport, IntervalLine, RunsReport, Selected, SELECTORS,
};
use offload_bench::server::ServerEvent;
use offload_bench::{
    client, config, ClientConfig, CloseMode, Direction, Secret, Server, ServerLimits,
    ServerOptions, TestKind,
};
use offload_report::stats::{PairedDifference, Summary};

use offload_bench::output as bench_output;

/// The default control port.
const DEFAULT_PORT: u16 = offload_bench::server::DEFAULT_PORT;

/// Arguments of `offload bench`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_required = false)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    /// Compare results saved earlier with `--json` (one run or `--runs
    /// N`; `-` for standard input), e.g. one host before and after
    /// `offload tune --apply`: paired statistics of the figures, and every
    /// recorded host setting (sysctls, interface sizes, features, rings,
    /// coalescing, sysfs knobs) that differs.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"])]
    compare: Option<Vec<std::path::PathBuf>>,
    /// With --compare: the comparison as JSON.
    #[arg(long, requires = "compare")]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Serve every test to every client, until interrupted.
    Server(ServerArgs),
    /// TCP request/response on long-lived connections (netperf TCP_RR).
    TcpRr(TcpRrArgs),
    /// TCP connect, request, response and close per transaction (TCP_CRR).
    TcpCrr(TcpCrrArgs),
    /// TCP bulk transfer (--reverse: server to client), in bits per second.
    TcpStream(TcpStreamArgs),
    /// UDP request/response.
    UdpRr(UdpRrArgs),
    /// UDP flood: bits and packets per second at the receiver, with drops.
    UdpStream(UdpStreamArgs),
}

#[derive(Debug, Clone, clap::Args)]
struct ServerArgs {
    /// Control address, ADDR:PORT or [V6]:PORT; repeat for several (data
    /// sockets use ephemeral ports on the address each client reached).
    /// Default: 127.0.0.1:12867 and [::1]:12867, loopback only. An address
    /// beyond loopback ([::]:12867 serves every interface) needs
    /// --auth-file. See docs/bench.md, "Security".
    #[arg(long, value_parser = parse_listen, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,
    /// File holding the shared secret clients must prove they hold
    /// (challenge-response; the secret never crosses the wire). Default:
    /// the OFFLOAD_BENCH_SECRET environment variable, if set.
    #[arg(long, value_name = "FILE")]
    auth_file: Option<std::path::PathBuf>,
    /// Control connections at once [default: 32].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Tests at once [default: 4].
    #[arg(long, value_name = "N")]
    max_tests: Option<usize>,
    /// Server threads of all tests together [default: 64].
    #[arg(long, value_name = "N")]
    max_threads: Option<u32>,
    /// Flows of all tests together [default: 65536].
    #[arg(long, value_name = "N")]
    max_flows: Option<u32>,
    /// Estimated server memory of one test (K, M, G suffixes) [default: 256M].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_test_memory: Option<u32>,
    /// Estimated server memory of all tests together [default: 512M].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u32>,
    /// One JSON object per line and per event (listening, connected,
    /// test_started, test_finished, error, disconnected, stopped) on
    /// standard output.
    #[arg(long)]
    json: bool,
}

/// Options of every client test.
#[derive(Debug, Clone, clap::Args)]
struct CommonArgs {
    /// Server: ADDR, ADDR:PORT, [V6]:PORT, a bare IPv6 address or a name
    /// [default: 127.0.0.1, as netperf's localhost].
    #[arg(long, short = 'H', value_name = "ADDR[:PORT]")]
    host: Option<String>,
    /// Server control port, where --host names none (-p as in netperf
    /// and iperf3).
    #[arg(long, short = 'p', default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Flows: TCP connections or UDP sockets (30000 and more are fine).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Client threads; flows are spread over them.
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// Server threads (default: as many as client threads).
    #[arg(long)]
    server_threads: Option<u32>,
    /// Measurement window: seconds (5, 0.5) or with a unit (500ms, 2m).
    #[arg(long, value_parser = crate::duration::parse, default_value = "5")]
    duration: Duration,
    /// Warm-up before the window, excluded from every figure.
    #[arg(long, value_parser = crate::duration::parse, default_value = "1")]
    warmup: Duration,
    /// Repeat the test N times: median and 95% confidence interval.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Run 'OPTIONS A' and 'OPTIONS B' (added to the other options)
    /// interleaved, --pairs times, and report the paired difference B - A.
    #[arg(long, num_args = 2, allow_hyphen_values = true, value_names = ["OPTIONS_A", "OPTIONS_B"])]
    compare: Option<Vec<String>>,
    /// Pairs for --compare.
    #[arg(long, default_value_t = 5)]
    pairs: u32,
    /// Pin client worker i to the i-th CPU of this list (e.g. 0 or 0-3).
    #[arg(long)]
    pin: Option<String>,
    /// Pin server worker i to the i-th CPU of this list.
    #[arg(long)]
    server_pin: Option<String>,
    /// SO_BUSY_POLL microseconds (and SO_PREFER_BUSY_POLL) on both ends.
    #[arg(long, value_name = "USECS")]
    busy_poll: Option<u32>,
    /// SO_SNDBUF on both ends (bytes; K, M, G suffixes: 4M).
    #[arg(long, value_parser = parse_size)]
    sndbuf: Option<u32>,
    /// SO_RCVBUF on both ends (bytes; K, M, G suffixes).
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<u32>,
    /// Measure the tool's own per-transaction overhead (no I/O, no server).
    #[arg(long)]
    null: bool,
    /// Interval lines period: seconds or with a unit (0 for none).
    #[arg(long, value_parser = crate::duration::parse, default_value = "1")]
    interval: Duration,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Output selectors, comma-separated (netperf style), e.g.
    /// -O THROUGHPUT,P50_LATENCY,P99_LATENCY,SD; `-O help` lists them.
    #[arg(short = 'O', long = "select", value_name = "SELECTORS")]
    select: Option<String>,
    /// Append one row per run to FILE: .jsonl (JSON lines) or .parquet,
    /// with k8s-netperf's field names (profile, messageSize, parallelism,
    /// throughput, latency percentiles); see docs/bench.md.
    #[arg(long, value_name = "FILE")]
    output: Option<std::path::PathBuf>,
    /// No interval lines.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// File holding the server's shared secret, for a server started with
    /// --auth-file. Default: the OFFLOAD_BENCH_SECRET environment variable,
    /// if set.
    #[arg(long, value_name = "FILE")]
    auth_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
struct RrSizes {
    /// Request bytes (K, M, G suffixes: 64K).
    #[arg(long, value_parser = parse_size)]
    request: Option<u32>,
    /// Response bytes (K, M, G suffixes).
    #[arg(long, value_parser = parse_size)]
    response: Option<u32>,
}

#[derive(Debug, Clone, clap::Args)]
struct RateArg {
    /// Fixed rate, all flows together, per second (K, M suffixes: 10K);
    /// latencies then count from the intended send time.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
}

#[derive(Debug, Clone, clap::Args)]
struct UdpArgs {
    /// One SO_REUSEPORT receiving socket per server thread.
    #[arg(long)]
    reuseport: bool,
    /// Messages per recvmmsg/sendmmsg call.
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// UDP_GRO on the receiving sockets.
    #[arg(long)]
    udp_gro: bool,
}

#[derive(Debug, Clone, clap::Args)]
struct TcpRrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    sizes: RrSizes,
    #[command(flatten)]
    rate: RateArg,
    /// TCP_NODELAY on both ends.
    #[arg(long)]
    nodelay: bool,
    /// Requests in flight per connection (netperf's burst).
    #[arg(long, default_value_t = 1)]
    burst: u32,
}

#[derive(Debug, Clone, clap::Args)]
struct TcpCrrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    sizes: RrSizes,
    #[command(flatten)]
    rate: RateArg,
    /// TCP_NODELAY on both ends.
    #[arg(long)]
    nodelay: bool,
    /// Close with RST (SO_LINGER 0) instead of FIN.
    #[arg(long)]
    reset: bool,
}

#[derive(Debug, Clone, clap::Args)]
struct TcpStreamArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Bytes per write (K, M, G suffixes: 128K).
    #[arg(long, value_parser = parse_size)]
    request: Option<u32>,
    /// Bytes per read (K, M, G suffixes).
    #[arg(long, value_parser = parse_size)]
    response: Option<u32>,
    /// TCP_NODELAY on both ends.
    #[arg(long)]
    nodelay: bool,
    /// The server sends, the client receives (TCP_MAERTS, iperf3 -R).
    #[arg(long)]
    reverse: bool,
}

#[derive(Debug, Clone, clap::Args)]
struct UdpRrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    sizes: RrSizes,
    #[command(flatten)]
    rate: RateArg,
    #[command(flatten)]
    udp: UdpArgs,
    /// A transaction unanswered for this long is lost (seconds or 200ms).
    #[arg(long, value_parser = crate::duration::parse, default_value = "200ms")]
    udp_timeout: Duration,
}

#[derive(Debug, Clone, clap::Args)]
struct UdpStreamArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Datagram bytes (K suffix allowed; at most 65507).
    #[arg(long, value_parser = parse_size)]
    request: Option<u32>,
    #[command(flatten)]
    rate: RateArg,
    #[command(flatten)]
    udp: UdpArgs,
    /// UDP_SEGMENT (GSO) with this segment (datagram) size.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    udp_gso: Option<u32>,
    /// Receivers sleep this many microseconds after draining their socket,
    /// so datagrams are read in batches and the sender pays no wakeup per
    /// datagram (ethtool's rx-usecs, in software) [default: 50 with
    /// --batch above 1, else 0; 0 turns it off].
    #[arg(long, value_name = "USEC")]
    rx_usecs: Option<u32>,
}

/// Every test's options in one shape.
#[derive(Debug, Clone)]
struct Flat {
    common: CommonArgs,
    request: Option<u32>,
    response: Option<u32>,
    rate: Option<f64>,
    nodelay: bool,
    burst: u32,
    reset: bool,
    reverse: bool,
    reuseport: bool,
    batch: u32,
    udp_gro: bool,
    udp_gso: Option<u32>,
    rx_usecs: Option<u32>,
    udp_timeout: Duration,
}

impl Flat {
    fn new(common: CommonArgs) -> Self {
        Flat {
            common,
            request: None,
            response: None,
            rate: None,
            nodelay: false,
            burst: 1,
            reset: false,
            reverse: false,
            reuseport: false,
            batch: 1,
            udp_gro: false,
            udp_gso: None,
            rx_usecs: None,
            udp_timeout: Duration::from_millis(200),
        }
    }
}

/// A test's own option set.
trait TestOptions: Args + FromArgMatches {
    fn flat(self) -> Flat;
}

impl TestOptions for TcpRrArgs {
    fn flat(self) -> Flat {
        Flat {
            request: self.sizes.request,
            response: self.sizes.response,
            rate: self.rate.rate,
            nodelay: self.nodelay,
            burst: self.burst,
            ..Flat::new(self.common)
        }
    }
}

impl TestOptions for TcpCrrArgs {
    fn flat(self) -> Flat {
        Flat {
            request: self.sizes.request,
            response: self.sizes.response,
            rate: self.rate.rate,
            nodelay: self.nodelay,
            reset: self.reset,
            ..Flat::new(self.common)
        }
    }
}

impl TestOptions for TcpStreamArgs {
    fn flat(self) -> Flat {
        Flat {
            request: self.request,
            response: self.response,
            nodelay: self.nodelay,
            reverse: self.reverse,
            ..Flat::new(self.common)
        }
    }
}

impl TestOptions for UdpRrArgs {
    fn flat(self) -> Flat {
        Flat {
            request: self.sizes.request,
            response: self.sizes.response,
            rate: self.rate.rate,
            reuseport: self.udp.reuseport,
            batch: self.udp.batch,
            udp_gro: self.udp.udp_gro,
            udp_timeout: self.udp_timeout,
            ..Flat::new(self.common)
        }
    }
}

impl TestOptions for UdpStreamArgs {
    fn flat(self) -> Flat {
        Flat {
            request: self.request,
            rate: self.rate.rate,
            reuseport: self.udp.reuseport,
            batch: self.udp.batch,
            udp_gro: self.udp.udp_gro,
            udp_gso: self.udp_gso,
            rx_usecs: self.rx_usecs,
            ..Flat::new(self.common)
        }
    }
}

/// Parses a test's options from tokens (later options override earlier
/// ones, which is what --compare relies on).
fn parse_tokens<T: TestOptions>(tokens: &[String]) -> anyhow::Result<Flat> {
    let cmd = T::augment_args(
        clap::Command::new("offload-bench-compare")
            .no_binary_name(true)
            .args_override_self(true),
    );
    let m = cmd.try_get_matches_from(tokens)?;
    Ok(T::from_arg_matches(&m)?.flat())
}

fn parse_for(kind: TestKind, tokens: &[String]) -> anyhow::Result<Flat> {
    match kind {
        TestKind::TcpRr => parse_tokens::<TcpRrArgs>(tokens),
        TestKind::TcpCrr => parse_tokens::<TcpCrrArgs>(tokens),
        TestKind::TcpStream => parse_tokens::<TcpStreamArgs>(tokens),
        TestKind::UdpRr => parse_tokens::<UdpRrArgs>(tokens),
        TestKind::UdpStream => parse_tokens::<UdpStreamArgs>(tokens),
    }
}

/// A size: bytes, or with K, M, G (powers of 1024, as netperf's -m 64K).
fn parse_size(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = [
        ("kib", 1u64 << 10),
        ("mib", 1 << 20),
        ("gib", 1 << 30),
        ("ki", 1 << 10),
        ("mi", 1 << 20),
        ("gi", 1 << 30),
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1 << 10),
        ("m", 1 << 20),
        ("g", 1 << 30),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suffix, m)| {
        lower
            .strip_suffix(suffix)
            .map(|n| (n.trim().to_string(), *m))
    })
    .unwrap_or((lower.clone(), 1));
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size (bytes, or a number with K, M or G)"))?;
    let bytes = value * mult as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes.fract() == 0.0) {
        return Err(format!("{text:?} is not a whole number of bytes"));
    }
    u32::try_from(bytes as u64).map_err(|_| format!("{text:?} is above 4G"))
}

/// A rate per second: a number, or with K, M, G (powers of 1000).
fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a rate (a number, or with K, M or G)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{text:?} must be above zero"));
    }
    Ok(v * mult)
}

/// ADDR:PORT or [V6]:PORT for --listen.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    parse_host(text, DEFAULT_PORT).map_err(|e| format!("{e:#}"))
}

/// --host: ADDR, ADDR:PORT, [V6], [V6]:PORT, a bare IPv6 address, NAME or
/// NAME:PORT; `default_port` where the text names none.
fn parse_host(text: &str, default_port: u16) -> anyhow::Result<SocketAddr> {
    let t = text.trim();
    let port_of = |p: &str| -> anyhow::Result<u16> {
        p.parse()
            .with_context(|| format!("{text:?}: port {p:?} is not a number 0..65535"))
    };
    if let Some(rest) = t.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .with_context(|| format!("{text:?}: '[' without ']'"))?;
        let ip: std::net::Ipv6Addr = addr
            .parse()
            .with_context(|| format!("{text:?}: {addr:?} is not an IPv6 address"))?;
        let port = match after {
            "" => default_port,
            p => port_of(
                p.strip_prefix(':')
                    .with_context(|| format!("{text:?}: expected ':PORT' after ']'"))?,
            )?,
        };
        return Ok(SocketAddr::new(IpAddr::V6(ip), port));
    }
    if let Ok(sa) = t.parse::<SocketAddr>() {
        return Ok(sa);
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    let (name, port) = match t.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') => (n, port_of(p)?),
        _ => (t, default_port),
    };
    (name, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {name}"))?
        .next()
        .with_context(|| format!("{name} has no address"))
}

/// What Ctrl-C prints: the runs finished so far and the interval lines of
/// the run under way.
#[derive(Default)]
struct Partial {
    kind: Option<TestKind>,
    json: bool,
    done: Vec<(String, BenchResult)>,
    current: Vec<IntervalLine>,
}

impl Partial {
    fn print(&self) {
        let kind = self.kind.unwrap_or(TestKind::TcpRr);
        let live: Vec<&IntervalLine> = self.current.iter().filter(|l| !l.warmup).collect();
        let mean = |f: fn(&IntervalLine) -> f64| {
            (!live.is_empty()).then(|| live.iter().map(|l| f(l)).sum::<f64>() / live.len() as f64)
        };
        if self.json {
            let runs: Vec<serde_json::Value> = self
                .done
                .iter()
                .map(|(label, r)| {
                    serde_json::json!({"run": label, "throughput": r.throughput,
                        "throughput_units": r.throughput_units,
                        "transactions_per_sec": r.transactions_per_sec,
                        "bits_per_sec": r.bits_per_sec,
                        "p99_us": r.latency_us.map(|l| l.p99)})
                })
                .collect();
            let v = serde_json::json!({
                "interrupted": true,
                "test": kind.name(),
                "completed_runs": runs,
                "current_run": {
                    "intervals": self.current.len(),
                    "transactions_per_sec": mean(|l| l.transactions_per_sec),
                    "gbit_per_sec": mean(|l| l.gbit_per_sec),
                },
            });
            println!("{v}");
            return;
        }
        println!();
        println!(
            "interrupted: partial summary ({} run(s) complete)",
            self.done.len()
        );
        for (label, r) in &self.done {
            println!("  run {label}: {}", headline(r));
        }
        if let (Some(tps), Some(g)) = (mean(|l| l.transactions_per_sec), mean(|l| l.gbit_per_sec)) {
            if kind.is_rr() {
                println!(
                    "  run under way: {tps:.1} trans/s over {} interval(s) of its window",
                    live.len()
                );
            } else {
                println!(
                    "  run under way: {:.1} Mbit/s over {} interval(s) of its window",
                    g * 1e3,
                    live.len()
                );
            }
        }
    }
}

/// Runs `offload bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let command = match (args.command, args.compare) {
        (Some(c), _) => c,
        (None, Some(files)) => return compare_files(&files[0], &files[1], args.json),
        (None, None) => {
            bail!("name a test (offload bench tcp-rr ...), `server`, or --compare A.json B.json")
        }
    };
    let (kind, t) = match command {
        BenchCommand::Server(s) => return serve(s),
        BenchCommand::TcpRr(t) => (TestKind::TcpRr, t.flat()),
        BenchCommand::TcpCrr(t) => (TestKind::TcpCrr, t.flat()),
        BenchCommand::TcpStream(t) => (TestKind::TcpStream, t.flat()),
        BenchCommand::UdpRr(t) => (TestKind::UdpRr, t.flat()),
        BenchCommand::UdpStream(t) => (TestKind::UdpStream, t.flat()),
    };
    let c = &t.common;
    if c.select
        .as_deref()
        .is_some_and(|o| o.eq_ignore_ascii_case("help"))
    {
        for (name, aliases, unit) in SELECTORS {
            println!("{name:32} {unit:36} {}", aliases.join(", "));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let selectors = parse_selectors(c.select.as_deref())?;
    let show_intervals = !(c.quiet || c.json || selectors.is_some());
    let partial = Arc::new(Mutex::new(Partial {
        kind: Some(kind),
        json: c.json,
        ..Partial::default()
    }));
    {
        let partial = partial.clone();
        // Ctrl-C: what was measured so far, then the shell's 130. Sockets
        // close with the process; bench on loopback or in the caller's
        // namespaces creates nothing else that needs removing.
        let _ = ctrlc::set_handler(move || {
            if let Ok(p) = partial.lock() {
                p.print();
            }
            std::process::exit(130);
        });
    }
    let mut output = match &c.output {
        Some(path) => Some(bench_output::RowWriter::open(path)?),
        None => None,
    };
    if let Some(w) = output.as_mut() {
        w.set_samples(if c.compare.is_some() {
            2 * c.pairs.max(2)
        } else {
            c.runs.max(1)
        });
    }
    let label = Arc::new(Mutex::new((1u32, String::new())));
    let mut print_line = {
        let partial = partial.clone();
        let label = label.clone();
        move |l: &IntervalLine| {
            let (run, tag) = label.lock().map(|g| g.clone()).unwrap_or_default();
            let mut l = *l;
            l.run = run;
            if let Ok(mut p) = partial.lock() {
                p.current.push(l);
            }
            if show_intervals {
                let figure = if kind.is_rr() {
                    format!(
                        "{:>14.1} trans/s {:>9.3} Gbit/s",
                        l.transactions_per_sec, l.gbit_per_sec
                    )
                } else {
                    format!(
                        "{:>12.1} Mbit/s {:>14.1} msg/s",
                        l.gbit_per_sec * 1e3,
                        l.transactions_per_sec
                    )
                };
                println!(
                    "run {run}{tag} {:7.2}s {figure}{}",
                    l.at_seconds,
                    if l.warmup { "  (warm-up)" } else { "" }
                );
            }
        }
    };
    let mut finish_run =
        |tag: String, mut r: BenchResult, run: u32| -> anyhow::Result<BenchResult> {
            for l in &mut r.intervals {
                l.run = run;
            }
            for note in &r.settings.notes {
                eprintln!("offload bench: note: {note}");
            }
            if let Some(w) = output.as_mut() {
                w.write(&r, run)?;
            }
            if let Ok(mut p) = partial.lock() {
                p.done.push((tag, r.clone()));
                p.current.clear();
            }
            Ok(r)
        };
    let set_label = |run: u32, tag: &str| {
        if let Ok(mut g) = label.lock() {
            *g = (run, tag.to_string());
        }
    };
    if let Some(pair) = &c.compare {
        let (a_opts, b_opts) = (&pair[0], &pair[1]);
        let a = config_for(kind, &reparse_with(kind, a_opts)?)?;
        let b = config_for(kind, &reparse_with(kind, b_opts)?)?;
        let pairs = c.pairs.max(2);
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        let mut run = 0;
        for i in 0..pairs {
            // A,B then B,A: a slow drift of the machine favours neither.
            let order = if i % 2 == 0 { ['A', 'B'] } else { ['B', 'A'] };
            for arm in order {
                run += 1;
                let tag = format!(" (pair {} {arm})", i + 1);
                set_label(run, &tag);
                let cfg = if arm == 'A' { &a } else { &b };
                let r = client::run_once(cfg, &mut print_line)?;
                let r = finish_run(format!("{run}{tag}"), r, run)?;
                if arm == 'A' {
                    ra.push(r);
                } else {
                    rb.push(r);
                }
            }
        }
        let report = offload_bench::compare::compare_results(a_opts, b_opts, ra, rb);
        if c.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print_compare(&report);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = config_for(kind, &t)?;
    let runs = c.runs.max(1);
    let mut results = Vec::new();
    for run in 1..=runs {
        let tag = if runs > 1 {
            format!("/{runs}")
        } else {
            String::new()
        };
        set_label(run, &tag);
        let r = client::run_once(&cfg, &mut print_line)?;
        results.push(finish_run(format!("{run}{tag}"), r, run)?);
    }
    if runs > 1 {
        let report = client::summarize_runs(results);
        if c.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else if let Some(sel) = &selectors {
            print_selected(sel, &report.runs);
        } else {
            print_runs(&report);
        }
        return Ok(exit_for(&report.runs));
    }
    let result = results.remove(0);
    if c.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else if let Some(sel) = &selectors {
        print_selected(sel, std::slice::from_ref(&result));
    } else {
        print_result(&result);
    }
    Ok(exit_for(std::slice::from_ref(&result)))
}

fn exit_for(results: &[BenchResult]) -> ExitCode {
    if results.iter().all(|r| r.counts.consistent) {
        ExitCode::SUCCESS
    } else {
        for r in results.iter().filter(|r| !r.counts.consistent) {
            eprintln!(
                "offload bench: warning: client and server counts disagree: {}",
                r.counts.note.as_deref().unwrap_or("?")
            );
        }
        ExitCode::from(1)
    }
}

fn serve(args: ServerArgs) -> anyhow::Result<ExitCode> {
    let mut limits = ServerLimits::default();
    let l = &mut limits;
    l.max_connections = args.max_connections.unwrap_or(l.max_connections);
    l.max_tests = args.max_tests.unwrap_or(l.max_tests);
    l.max_threads = args.max_threads.unwrap_or(l.max_threads);
    l.max_flows = args.max_flows.unwrap_or(l.max_flows);
    l.max_test_memory = args.max_test_memory.map_or(l.max_test_memory, u64::from);
    l.max_memory = args.max_memory.map_or(l.max_memory, u64::from);
    let opts = ServerOptions {
        limits,
        secret: Secret::from_file_or_env(args.auth_file.as_deref())?,
    };
    let mut server = if args.listen.is_empty() {
        Server::bind_loopback(offload_bench::server::DEFAULT_PORT, opts)?
    } else {
        Server::bind_with(&args.listen, opts)?
    };
    let stop = server.stop_flag();
    if args.json {
        server = server.on_event(Arc::new(|e: &ServerEvent| {
            let mut v = serde_json::to_value(e).unwrap_or_default();
            if let Some(obj) = v.as_object_mut() {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                obj.insert("time".into(), serde_json::json!(now));
            }
            // One line per event; a reader that went away is not an error
            // worth stopping the server for.
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{v}");
            let _ = out.flush();
        }));
    } else {
        let addrs: Vec<String> = server
            .local_addrs()?
            .iter()
            .map(|a| a.to_string())
            .collect();
        eprintln!(
            "offload bench server: listening on {}{}",
            addrs.join(" and "),
            if server.requires_auth() {
                " (clients must authenticate)"
            } else {
                " (loopback only, no authentication)"
            }
        );
    }
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (stop, interrupted) = (stop.clone(), interrupted.clone());
        let _ = ctrlc::set_handler(move || {
            interrupted.store(true, std::sync::atomic::Ordering::Relaxed);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    server.serve()?;
    Ok(if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// udp-stream receivers' coalescing sleep with --batch above 1 (µs).
const DEFAULT_RX_USECS: u32 = 50;

fn config_for(kind: TestKind, t: &Flat) -> anyhow::Result<ClientConfig> {
    let c = &t.common;
    let server = match &c.host {
        Some(h) => parse_host(h, c.port)?,
        // netperf's default host is localhost: a server started with
        // `offload bench server` on this machine is found without -H.
        None => SocketAddr::from(([127, 0, 0, 1], c.port)),
    };
    let mut cfg = ClientConfig::new(kind, server);
    cfg.auth = Secret::from_file_or_env(c.auth_file.as_deref())?;
    if let Some(r) = t.request {
        cfg.spec.request = r;
    }
    if let Some(r) = t.response {
        cfg.spec.response = r;
    }
    if let Some(g) = t.udp_gso {
        let g = u16::try_from(g).context("--udp-gso is above 65507")?;
        // With UDP GSO the datagram on the wire is the segment size.
        cfg.spec.request = u32::from(g);
        cfg.spec.knobs.udp_gso = Some(g);
    }
    cfg.spec.flows = c.flows;
    cfg.threads = if kind == TestKind::TcpCrr {
        c.flows.max(c.threads)
    } else {
        c.threads
    };
    cfg.spec.server_threads = c.server_threads.unwrap_or(cfg.threads);
    cfg.duration = c.duration;
    cfg.warmup = c.warmup;
    cfg.pin = c.pin.as_deref().map(config::parse_cpu_list).transpose()?;
    cfg.spec.server_pin = c
        .server_pin
        .as_deref()
        .map(config::parse_cpu_list)
        .transpose()?;
    cfg.spec.knobs.busy_poll_us = c.busy_poll;
    cfg.spec.knobs.reuseport = t.reuseport;
    cfg.spec.knobs.batch = t.batch;
    cfg.spec.knobs.udp_gro = t.udp_gro;
    // Batched udp-stream receivers coalesce by default, as NICs do (decision
    // 0035): a recvmmsg batch that returns one datagram is not a batch.
    cfg.spec.knobs.rx_usecs = match t.rx_usecs {
        Some(0) => None,
        // One datagram per read cannot tell an emptied socket from a full one.
        Some(_) if t.batch < 2 => bail!("--rx-usecs needs --batch above 1"),
        Some(us) => Some(us),
        None if kind == TestKind::UdpStream && t.batch > 1 => Some(DEFAULT_RX_USECS),
        None => None,
    };
    cfg.spec.knobs.nodelay = t.nodelay;
    cfg.spec.knobs.sndbuf = c.sndbuf;
    cfg.spec.knobs.rcvbuf = c.rcvbuf;
    cfg.spec.burst = t.burst;
    cfg.spec.direction = if t.reverse {
        Direction::ServerToClient
    } else {
        Direction::ClientToServer
    };
    cfg.spec.close = if t.reset {
        CloseMode::Reset
    } else {
        CloseMode::Normal
    };
    cfg.rate = t.rate;
    cfg.null = c.null;
    cfg.udp_timeout = t.udp_timeout;
    cfg.interval = Some(c.interval).filter(|d| !d.is_zero());
    cfg.validate()?;
    Ok(cfg)
}

/// The options after the test name on our command line, minus --compare.
fn base_tokens(kind: TestKind) -> Vec<String> {
    let all: Vec<String> = std::env::args().collect();
    let start = all
        .iter()
        .position(|a| a == kind.name())
        .map_or(all.len(), |i| i + 1);
    let mut out = Vec::new();
    let mut it = all[start..].iter();
    while let Some(a) = it.next() {
        if a == "--compare" {
            it.next();
            it.next();
        } else {
            out.push(a.clone());
        }
    }
    out
}

fn reparse_with(kind: TestKind, extra: &str) -> anyhow::Result<Flat> {
    let mut tokens = base_tokens(kind);
    tokens.extend(shell_words::split(extra).with_context(|| format!("splitting {extra:?}"))?);
    parse_for(kind, &tokens).with_context(|| format!("options {extra:?}"))
}

fn parse_selectors(text: Option<&str>) -> anyhow::Result<Option<Vec<&'static str>>> {
    let Some(text) = text else { return Ok(None) };
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match canonical_selector(name) {
            Some(c) => out.push(c),
            None => bail!("unknown output selector {name:?} (-O help lists them)"),
        }
    }
    Ok(Some(out))
}

fn print_selected(sel: &[&str], results: &[BenchResult]) {
    println!(
        "{}",
        sel.iter()
            .map(|s| format!("{s:>16}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for r in results {
        let row: Vec<String> = sel
            .iter()
            .map(|s| match r.select_value(s) {
                Some(Selected::Number(v)) if v.is_nan() => format!("{:>16}", "-"),
                Some(Selected::Number(v)) if v.abs() >= 1e-3 || v == 0.0 => format!("{v:>16.3}"),
                Some(Selected::Number(v)) => format!("{v:>16.3e}"),
                Some(Selected::Text(t)) => format!("{t:>16}"),
                None => format!("{:>16}", "-"),
            })
            .collect();
        println!("{}", row.join(" "));
    }
}

/// The run's main figure, in the units of its test.
fn headline(r: &BenchResult) -> String {
    if r.test.is_rr() {
        format!(
            "{:.1} trans/s{}",
            r.transactions_per_sec,
            r.latency_us
                .map(|l| format!(", p99 {:.1} us", l.p99))
                .unwrap_or_default()
        )
    } else {
        format!(
            "{:.1} Mbit/s ({:.3} Gbit/s)",
            r.bits_per_sec / 1e6,
            r.gbit_per_sec
        )
    }
}

fn print_result(r: &BenchResult) {
    let s = &r.settings;
    println!();
    println!(
        "{} to {}: {} flow(s) over {} thread(s), {} {} B, {} {} B{}, {} engine, window {:.2} s",
        s.test,
        s.server,
        s.flows,
        s.threads,
        if r.test.is_rr() { "request" } else { "write" },
        s.request,
        if r.test.is_rr() { "response" } else { "read" },
        s.response,
        if s.burst > 1 {
            format!(", burst {}", s.burst)
        } else {
            String::new()
        },
        s.engine,
        r.cpu.window_seconds
    );
    println!(
        "  throughput          {:>14.3} {}",
        r.throughput, r.throughput_units
    );
    if r.test.is_rr() {
        println!("  transactions/s      {:>14.1}", r.transactions_per_sec);
        println!("  Gbit/s              {:>14.3}", r.gbit_per_sec);
    } else {
        println!("  bits/s              {:>14.0}", r.bits_per_sec);
        println!("  Gbit/s              {:>14.3}", r.gbit_per_sec);
        println!(
            "  {}         {:>14.1}",
            if r.test == TestKind::UdpStream {
                "datagrams/s"
            } else {
                "writes/s   "
            },
            r.transactions_per_sec
        );
    }
    if r.packets_per_sec > 0.0 && r.test != TestKind::UdpStream {
        println!("  packets/s           {:>14.1}", r.packets_per_sec);
    }
    if let Some(l) = &r.latency_us {
        println!(
            "  latency us          min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
            l.min, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    let c = &r.cpu;
    println!(
        "  CPU                 machine {:.1}% of {} CPUs = client threads {:.1}% + server threads {:.1}% + other {:.1}%",
        c.machine_utilization_percent, c.machine.cpus, c.client_percent, c.server_percent, c.other_percent
    );
    println!(
        "  CPU machine         user {:.3} s, system {:.3} s, softirq {:.3} s, irq {:.3} s",
        c.machine.user, c.machine.system, c.machine.softirq, c.machine.irq
    );
    let unit = if r.test.is_rr() {
        "transaction"
    } else if r.test == TestKind::UdpStream {
        "datagram"
    } else {
        "write"
    };
    println!(
        "  CPU per {unit:11} {:.3} us machine, {:.3} us client, {:.3} us server",
        r.cpu_seconds_per_transaction * 1e6,
        c.client_seconds_per_transaction * 1e6,
        c.server_seconds_per_transaction * 1e6
    );
    if let Some(t) = &r.tcp_info {
        println!(
            "  TCP_INFO ({} flows)  rtt us min {:.0} median {:.0} p99 {:.0}; rttvar us median {:.0} p99 {:.0}; cwnd min {:.0} median {:.0} p99 {:.0}; retransmits {} (p99 per flow {:.0}){}",
            t.flows,
            t.rtt_us.min,
            t.rtt_us.median,
            t.rtt_us.p99,
            t.rttvar_us.median,
            t.rttvar_us.p99,
            t.cwnd.min,
            t.cwnd.median,
            t.cwnd.p99,
            t.retransmits_total,
            t.retransmits.p99,
            t.delivery_rate_bps
                .map(|d| format!("; delivery rate Mbit/s median {:.1} p99 {:.1}", d.median / 1e6, d.p99 / 1e6))
                .unwrap_or_default()
        );
    }
    if let Some(t) = &r.server.tcp_info {
        println!(
            "  TCP_INFO server     ({} flows) rtt us min {:.0} median {:.0} p99 {:.0}; cwnd median {:.0}; retransmits {}",
            t.flows, t.rtt_us.min, t.rtt_us.median, t.rtt_us.p99, t.cwnd.median, t.retransmits_total
        );
    }
    if let Some(u) = &r.udp {
        println!(
            "  UDP                 sent {}, received {}, lost {}, kernel rcvbuf drops {}, send errors {}",
            u.sent, u.received, u.lost, u.kernel_rcvbuf_errors, u.send_errors
        );
    }
    println!(
        "  counts              client {} (window) / {} (total), server {} / {}{}",
        r.counts.client_window,
        r.counts.client_total,
        r.counts.server_window,
        r.counts.server_total,
        if r.counts.consistent {
            ", consistent"
        } else {
            ", INCONSISTENT"
        }
    );
}

fn fmt_summary(s: &Option<Summary>, scale: f64) -> String {
    match s {
        Some(s) if s.n < 2 => format!("{:.3} (one run: no interval)", s.median * scale),
        Some(s) => {
            let (lo, hi) = (s.ci95_low * scale, s.ci95_high * scale);
            let center = s.median * scale;
            let wide = center != 0.0 && (hi - lo) / center.abs() > 0.5;
            format!(
                "median {:.3}, mean {:.3}, 95% CI [{lo:.3}, {hi:.3}], n={}{}",
                center,
                s.mean * scale,
                s.n,
                if wide {
                    "  (runs disagree: more runs or a quieter machine)"
                } else {
                    ""
                }
            )
        }
        None => "-".into(),
    }
}

fn print_runs(r: &RunsReport) {
    for (i, run) in r.runs.iter().enumerate() {
        println!(
            "run {:>3}/{}: {}, {:.3} us CPU per {}",
            i + 1,
            r.runs.len(),
            headline(run),
            run.cpu_seconds_per_transaction * 1e6,
            if run.test.is_rr() { "trans" } else { "message" }
        );
    }
    let rr = r.runs.first().is_none_or(|x| x.test.is_rr());
    if rr {
        println!(
            "transactions/s:    {}",
            fmt_summary(&r.transactions_per_sec_summary, 1.0)
        );
    } else {
        let mbit: Vec<f64> = r.runs.iter().map(|x| x.bits_per_sec / 1e6).collect();
        println!(
            "Mbit/s:            {}",
            fmt_summary(&offload_report::stats::summarize(&mbit), 1.0)
        );
    }
    println!(
        "CPU us/{}:      {}",
        if rr { "trans" } else { "msg  " },
        fmt_summary(&r.cpu_seconds_per_transaction_summary, 1e6)
    );
    if rr {
        println!("p99 latency us:    {}", fmt_summary(&r.p99_us_summary, 1.0));
    }
}

fn fmt_diff(name: &str, d: &Option<PairedDifference>, scale: f64) {
    if let Some(d) = d {
        println!(
            "{name:16} A {:.3}  B {:.3}  B-A {:+.3} ({:+.2}%, 95% CI [{:+.2}%, {:+.2}%]){}",
            d.a.mean * scale,
            d.b.mean * scale,
            d.difference.mean * scale,
            d.relative_percent,
            d.relative_ci95_percent.0,
            d.relative_ci95_percent.1,
            if d.significant {
                "  significant"
            } else {
                "  not significant"
            }
        );
    }
}

/// `offload bench --compare A.json B.json`.
fn compare_files(a: &std::path::Path, b: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let ra = offload_bench::compare::read_results(a)?;
    let rb = offload_bench::compare::read_results(b)?;
    let report = offload_bench::compare::compare_saved(
        &a.display().to_string(),
        ra,
        &b.display().to_string(),
        rb,
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_compare(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_compare(r: &CompareReport) {
    println!(
        "A: {}\nB: {}\npairs: {}",
        r.a_options,
        r.b_options,
        r.a_runs.len()
    );
    let rr = r.a_runs.first().is_none_or(|x| x.test.is_rr());
    if rr {
        fmt_diff("transactions/s", &r.transactions_per_sec, 1.0);
    } else {
        fmt_diff("Mbit/s", &r.mbit_per_sec, 1.0);
    }
    fmt_diff("CPU us/trans", &r.cpu_seconds_per_transaction, 1e6);
    fmt_diff("p99 us", &r.p99_us, 1.0);
    if r.state_differences.is_empty() {
        println!("recorded state: the same in A and B");
    } else {
        println!("recorded state that differs (A -> B):");
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let width = r
            .state_differences
            .iter()
            .map(|d| d.what.len())
            .max()
            .unwrap_or(0);
        for d in &r.state_differences {
            println!(
                "  {:6} {:width$}  {} -> {}",
                d.side,
                d.what,
                shown(&d.a),
                shown(&d.b)
            );
        }
    }
    for n in &r.notes {
        println!("note: {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kind: TestKind, extra: &str) -> Flat {
        let mut tokens = vec!["-H".to_string(), "127.0.0.1".to_string()];
        tokens.extend(shell_words::split(extra).unwrap());
        parse_for(kind, &tokens).unwrap()
    }

    #[test]
    fn selectors_accept_netperf_names_and_reject_unknown_ones() {
        let s = parse_selectors(Some("THROUGHPUT, p99_us,SD"))
            .unwrap()
            .unwrap();
        assert_eq!(s, vec!["throughput", "p99_us", "cpu_us_per_transaction"]);
        assert!(parse_selectors(Some("THROUGHPUT,bogus")).is_err());
        assert!(parse_selectors(None).unwrap().is_none());
    }

    #[test]
    fn options_map_onto_the_library_configuration() {
        let c = config_for(
            TestKind::UdpStream,
            &args(TestKind::UdpStream, "--udp-gso 1200 --udp-gro --reuseport --batch 8 --flows 4 --threads 2 --pin 0-1 --server-pin 1 --busy-poll 50"),
        )
        .unwrap();
        assert_eq!(c.spec.request, 1200);
        assert_eq!(c.spec.knobs.udp_gso, Some(1200));
        assert!(c.spec.knobs.udp_gro && c.spec.knobs.reuseport);
        assert_eq!(c.spec.knobs.batch, 8);
        assert_eq!((c.spec.flows, c.threads, c.spec.server_threads), (4, 2, 2));
        assert_eq!(c.pin, Some(vec![0, 1]));
        assert_eq!(c.spec.server_pin, Some(vec![1]));
        assert_eq!(c.spec.knobs.busy_poll_us, Some(50));
        // Batched udp-stream receivers coalesce unless told otherwise.
        assert_eq!(c.spec.knobs.rx_usecs, Some(DEFAULT_RX_USECS));
        let rx = |extra: &str| {
            config_for(TestKind::UdpStream, &args(TestKind::UdpStream, extra))
                .unwrap()
                .spec
                .knobs
                .rx_usecs
        };
        assert_eq!(rx("--batch 32 --rx-usecs 0"), None);
        assert_eq!(rx("--batch 32 --rx-usecs 20"), Some(20));
        assert_eq!(rx(""), None);
        assert!(config_for(
            TestKind::UdpStream,
            &args(TestKind::UdpStream, "--rx-usecs 50")
        )
        .is_err());

        let c = config_for(
            TestKind::TcpCrr,
            &args(TestKind::TcpCrr, "--flows 3 --reset"),
        )
        .unwrap();
        assert_eq!(c.threads, 3);
        assert_eq!(c.spec.close, CloseMode::Reset);
        let c = config_for(
            TestKind::TcpStream,
            &args(TestKind::TcpStream, "--reverse --duration 2"),
        )
        .unwrap();
        assert_eq!(c.spec.direction, Direction::ServerToClient);
        assert_eq!(c.duration, Duration::from_secs(2));
        assert!(config_for(TestKind::UdpRr, &args(TestKind::UdpRr, "--batch 0")).is_err());
        let c = config_for(TestKind::TcpRr, &args(TestKind::TcpRr, "--burst 8")).unwrap();
        assert_eq!(c.spec.burst, 8);
    }

    #[test]
    fn each_test_accepts_only_its_own_options() {
        let bad = |kind, extra: &str| {
            let mut tokens = vec!["-H".to_string(), "::1".to_string()];
            tokens.extend(shell_words::split(extra).unwrap());
            parse_for(kind, &tokens).is_err()
        };
        assert!(bad(TestKind::TcpRr, "--udp-gro"));
        assert!(bad(TestKind::TcpRr, "--reverse"));
        assert!(bad(TestKind::TcpStream, "--rate 10"));
        assert!(bad(TestKind::UdpStream, "--nodelay"));
        assert!(bad(TestKind::UdpRr, "--burst 2"));
        assert!(!bad(TestKind::UdpStream, "--udp-gso 1400 --udp-gro"));
    }

    #[test]
    fn sizes_rates_and_seconds_take_suffixes() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("4Mi"), Ok(4 << 20));
        assert_eq!(parse_size("16ki"), Ok(16 << 10));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert!(parse_size("8G").is_err());
        assert!(parse_size("x").is_err());
        assert_eq!(parse_rate("10K"), Ok(10_000.0));
        assert_eq!(parse_rate("2.5M"), Ok(2_500_000.0));
        assert!(parse_rate("0").is_err());
        assert_eq!(crate::duration::parse("5"), Ok(Duration::from_secs(5)));
        assert_eq!(
            crate::duration::parse("0.5"),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(
            crate::duration::parse("500ms"),
            Ok(Duration::from_millis(500))
        );
        assert!(crate::duration::parse("-1").is_err());
        let f = args(
            TestKind::TcpStream,
            "--request 64K --sndbuf 4M --duration 5",
        );
        assert_eq!(f.request, Some(65536));
        assert_eq!(f.common.sndbuf, Some(4 << 20));
        assert_eq!(f.common.duration, Duration::from_secs(5));
    }

    #[test]
    fn later_options_override_earlier_ones_for_compare() {
        let t = args(TestKind::TcpRr, "--request 1 --request 80000 --nodelay");
        assert_eq!(t.request, Some(80000));
        assert!(t.nodelay);
    }

    #[test]
    fn hosts_take_ports_and_brackets() {
        let p = |s| parse_host(s, 5).unwrap();
        assert_eq!(p("::1"), "[::1]:5".parse().unwrap());
        assert_eq!(p("[::1]"), "[::1]:5".parse().unwrap());
        assert_eq!(p("[::1]:12867"), "[::1]:12867".parse().unwrap());
        assert_eq!(p("127.0.0.1"), "127.0.0.1:5".parse().unwrap());
        assert_eq!(p("127.0.0.1:12867"), "127.0.0.1:12867".parse().unwrap());
        assert_eq!(p("localhost:7").port(), 7);
        assert!(parse_host("[::1", 5).is_err());
        assert!(parse_host("[::1]x", 5).is_err());
        assert!(parse_host("127.0.0.1:notaport", 5).is_err());
    }
}
