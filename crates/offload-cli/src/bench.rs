//! `offload bench`: argument parsing and printing for the benchmark. The
//! measurement itself lives in the `offload-bench` crate; this module maps
//! options onto its `ClientConfig` and prints tables, JSON or `-O` columns.

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use offload_bench::report::{
    canonical_selector, BenchResult, CompareReport, IntervalLine, RunsReport, SELECTORS,
};
use offload_bench::stats::{PairedDifference, Summary};
use offload_bench::{client, config, ClientConfig, CloseMode, Direction, Server, TestKind};

/// The default control port.
const DEFAULT_PORT: u16 = 12867;

/// Arguments of `offload bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Serve every test to every client, until interrupted.
    Server {
        /// Control address (data sockets use ephemeral ports on the address
        /// each client reached). Use [::]:12867 for IPv4 and IPv6.
        #[arg(long, default_value = "0.0.0.0:12867")]
        listen: SocketAddr,
    },
    /// TCP request/response on long-lived connections (netperf TCP_RR).
    TcpRr(TestArgs),
    /// TCP connect, request, response and close per transaction (TCP_CRR).
    TcpCrr(TestArgs),
    /// TCP bulk transfer (--reverse: server to client).
    TcpStream(TestArgs),
    /// UDP request/response.
    UdpRr(TestArgs),
    /// UDP flood: packets per second at the receiver, with drops.
    UdpStream(TestArgs),
}

#[derive(Debug, Clone, clap::Args)]
struct TestArgs {
    /// Server address (name or IP; IPv6 as ::1 or [::1]).
    #[arg(long, short = 'H')]
    host: Option<String>,
    /// Server control port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Request bytes (rr), write size (tcp-stream) or datagram size (udp-stream).
    #[arg(long)]
    request: Option<u32>,
    /// Response bytes (rr) or read size (stream).
    #[arg(long)]
    response: Option<u32>,
    /// Flows: TCP connections or UDP sockets.
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Client threads; flows are spread over them.
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// Server threads (default: as many as client threads).
    #[arg(long)]
    server_threads: Option<u32>,
    /// Measurement window (e.g. 10s, 500ms).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    duration: Duration,
    /// Warm-up before the window, excluded from every figure.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
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
    /// UDP: one SO_REUSEPORT receiving socket per server thread.
    #[arg(long)]
    reuseport: bool,
    /// UDP: messages per recvmmsg/sendmmsg.
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// udp-stream: UDP_SEGMENT with this segment (datagram) size.
    #[arg(long, value_name = "SIZE")]
    udp_gso: Option<u16>,
    /// UDP_GRO on the receiving sockets.
    #[arg(long)]
    udp_gro: bool,
    /// TCP_NODELAY on both ends.
    #[arg(long)]
    nodelay: bool,
    /// SO_SNDBUF bytes on both ends.
    #[arg(long)]
    sndbuf: Option<u32>,
    /// SO_RCVBUF bytes on both ends.
    #[arg(long)]
    rcvbuf: Option<u32>,
    /// tcp-stream: the server sends, the client receives.
    #[arg(long)]
    reverse: bool,
    /// tcp-crr: close with RST (SO_LINGER 0) instead of FIN.
    #[arg(long)]
    reset: bool,
    /// Fixed rate (transactions or packets per second, all flows); rr
    /// latencies then count from the intended send time.
    #[arg(long)]
    rate: Option<f64>,
    /// Measure the tool's own per-transaction overhead (no I/O, no server).
    #[arg(long)]
    null: bool,
    /// UDP rr: a transaction unanswered for this long is lost.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "200ms")]
    udp_timeout: Duration,
    /// Interval lines period (0 for none).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    interval: Duration,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Output selectors, comma-separated (netperf style), e.g.
    /// -O THROUGHPUT,P50_LATENCY,P99_LATENCY,SD; `-O help` lists them.
    #[arg(short = 'O', long = "output", value_name = "SELECTORS")]
    output: Option<String>,
    /// No interval lines.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// Re-parses a test's options with --compare's extra options appended.
#[derive(Debug, Parser)]
#[command(
    name = "offload-bench-compare",
    args_override_self = true,
    no_binary_name = true
)]
struct Reparse {
    #[command(flatten)]
    args: TestArgs,
}

/// Runs `offload bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let (kind, t) = match args.command {
        BenchCommand::Server { listen } => return serve(listen),
        BenchCommand::TcpRr(t) => (TestKind::TcpRr, t),
        BenchCommand::TcpCrr(t) => (TestKind::TcpCrr, t),
        BenchCommand::TcpStream(t) => (TestKind::TcpStream, t),
        BenchCommand::UdpRr(t) => (TestKind::UdpRr, t),
        BenchCommand::UdpStream(t) => (TestKind::UdpStream, t),
    };
    if t.output
        .as_deref()
        .is_some_and(|o| o.eq_ignore_ascii_case("help"))
    {
        for (name, aliases, unit) in SELECTORS {
            println!("{name:32} {unit:15} {}", aliases.join(", "));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let selectors = parse_selectors(t.output.as_deref())?;
    let show_intervals = !(t.quiet || t.json || selectors.is_some());
    let mut print_line = |l: &IntervalLine| {
        if show_intervals {
            println!(
                "{:7.2}s {:>14.1} trans/s {:>9.3} Gbit/s{}",
                l.at_seconds,
                l.transactions_per_sec,
                l.gbit_per_sec,
                if l.warmup { "  (warm-up)" } else { "" }
            );
        }
    };
    if let Some(pair) = &t.compare {
        let (a_opts, b_opts) = (&pair[0], &pair[1]);
        let a = config_for(kind, &reparse_with(kind, a_opts)?)?;
        let b = config_for(kind, &reparse_with(kind, b_opts)?)?;
        let report = client::compare(&a, &b, a_opts, b_opts, t.pairs, &mut print_line)?;
        if t.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print_compare(&report);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = config_for(kind, &t)?;
    if t.runs > 1 {
        let report = client::run_many(&cfg, t.runs, &mut print_line)?;
        if t.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else if let Some(sel) = &selectors {
            print_selected(sel, &report.runs);
        } else {
            print_runs(&report);
        }
        return Ok(exit_for(&report.runs));
    }
    let result = client::run_once(&cfg, &mut print_line)?;
    if t.json {
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

fn serve(listen: SocketAddr) -> anyhow::Result<ExitCode> {
    let server = Server::bind(listen)?;
    eprintln!(
        "offload bench server: listening on {}",
        server.local_addr()?
    );
    server.serve()?;
    Ok(ExitCode::SUCCESS)
}

fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = h.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (h, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))
}

fn config_for(kind: TestKind, t: &TestArgs) -> anyhow::Result<ClientConfig> {
    let server = match (&t.host, t.null) {
        (Some(h), _) => resolve(h, t.port)?,
        (None, true) => SocketAddr::from(([127, 0, 0, 1], t.port)),
        (None, false) => bail!("--host ADDR is required (or --null)"),
    };
    let mut c = ClientConfig::new(kind, server);
    if let Some(r) = t.request {
        c.spec.request = r;
    }
    if let Some(r) = t.response {
        c.spec.response = r;
    }
    if let Some(g) = t.udp_gso {
        // With UDP GSO the datagram on the wire is the segment size.
        c.spec.request = u32::from(g);
    }
    c.spec.flows = t.flows;
    c.threads = if kind == TestKind::TcpCrr {
        t.flows.max(t.threads)
    } else {
        t.threads
    };
    c.spec.server_threads = t.server_threads.unwrap_or(c.threads);
    c.duration = t.duration;
    c.warmup = t.warmup;
    c.pin = t.pin.as_deref().map(config::parse_cpu_list).transpose()?;
    c.spec.server_pin = t
        .server_pin
        .as_deref()
        .map(config::parse_cpu_list)
        .transpose()?;
    c.spec.knobs.busy_poll_us = t.busy_poll;
    c.spec.knobs.reuseport = t.reuseport;
    c.spec.knobs.batch = t.batch;
    c.spec.knobs.udp_gso = t.udp_gso;
    c.spec.knobs.udp_gro = t.udp_gro;
    c.spec.knobs.nodelay = t.nodelay;
    c.spec.knobs.sndbuf = t.sndbuf;
    c.spec.knobs.rcvbuf = t.rcvbuf;
    c.spec.direction = if t.reverse {
        Direction::ServerToClient
    } else {
        Direction::ClientToServer
    };
    c.spec.close = if t.reset {
        CloseMode::Reset
    } else {
        CloseMode::Normal
    };
    c.rate = t.rate;
    c.null = t.null;
    c.udp_timeout = t.udp_timeout;
    c.interval = Some(t.interval).filter(|d| !d.is_zero());
    c.validate()?;
    Ok(c)
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

fn reparse_with(kind: TestKind, extra: &str) -> anyhow::Result<TestArgs> {
    let mut tokens = base_tokens(kind);
    tokens.extend(shell_words::split(extra).with_context(|| format!("splitting {extra:?}"))?);
    let r = Reparse::try_parse_from(&tokens).with_context(|| format!("options {extra:?}"))?;
    Ok(r.args)
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
            .map(|s| match r.select(s) {
                Some(v) if v.abs() >= 1e-3 || v == 0.0 => format!("{v:>16.3}"),
                Some(v) => format!("{v:>16.3e}"),
                None => format!("{:>16}", "-"),
            })
            .collect();
        println!("{}", row.join(" "));
    }
}

fn print_result(r: &BenchResult) {
    let s = &r.settings;
    println!();
    println!(
        "{} to {}: {} flow(s) over {} thread(s), request {} B, response {} B, {} engine, window {:.2} s",
        s.test, s.server, s.flows, s.threads, s.request, s.response, s.engine, r.cpu.window_seconds
    );
    println!("  transactions/s      {:>14.1}", r.transactions_per_sec);
    println!("  Gbit/s              {:>14.3}", r.gbit_per_sec);
    if r.packets_per_sec > 0.0 {
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
        "  CPU machine         {:.1}% of {} CPUs: user {:.3} s, system {:.3} s, softirq {:.3} s, irq {:.3} s",
        c.machine_utilization_percent, c.machine.cpus, c.machine.user, c.machine.system, c.machine.softirq, c.machine.irq
    );
    println!(
        "  CPU client threads  user {:.3} s, system {:.3} s, total {:.3} s",
        c.client.user, c.client.system, c.client.total
    );
    println!(
        "  CPU server threads  user {:.3} s, system {:.3} s, total {:.3} s",
        c.server.user, c.server.system, c.server.total
    );
    println!(
        "  CPU per transaction {:.3} us machine, {:.3} us client, {:.3} us server",
        r.cpu_seconds_per_transaction * 1e6,
        c.client_seconds_per_transaction * 1e6,
        c.server_seconds_per_transaction * 1e6
    );
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
        Some(s) => format!(
            "median {:.3}, mean {:.3}, 95% CI [{:.3}, {:.3}], n={}",
            s.median * scale,
            s.mean * scale,
            s.ci95_low * scale,
            s.ci95_high * scale,
            s.n
        ),
        None => "-".into(),
    }
}

fn print_runs(r: &RunsReport) {
    for (i, run) in r.runs.iter().enumerate() {
        println!(
            "run {:>3}: {:>12.1} trans/s, {:.3} us CPU/trans{}",
            i + 1,
            run.transactions_per_sec,
            run.cpu_seconds_per_transaction * 1e6,
            run.latency_us
                .map(|l| format!(", p99 {:.1} us", l.p99))
                .unwrap_or_default()
        );
    }
    println!(
        "transactions/s:    {}",
        fmt_summary(&r.transactions_per_sec_summary, 1.0)
    );
    println!(
        "CPU us/trans:      {}",
        fmt_summary(&r.cpu_seconds_per_transaction_summary, 1e6)
    );
    println!("p99 latency us:    {}", fmt_summary(&r.p99_us_summary, 1.0));
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

fn print_compare(r: &CompareReport) {
    println!(
        "A: {}\nB: {}\npairs: {}",
        r.a_options,
        r.b_options,
        r.a_runs.len()
    );
    fmt_diff("transactions/s", &r.transactions_per_sec, 1.0);
    fmt_diff("CPU us/trans", &r.cpu_seconds_per_transaction, 1e6);
    fmt_diff("p99 us", &r.p99_us, 1.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &str) -> TestArgs {
        let mut tokens = vec!["-H".to_string(), "127.0.0.1".to_string()];
        tokens.extend(shell_words::split(extra).unwrap());
        Reparse::try_parse_from(&tokens).unwrap().args
    }

    #[test]
    fn selectors_accept_netperf_names_and_reject_unknown_ones() {
        let s = parse_selectors(Some("THROUGHPUT, p99_us,SD"))
            .unwrap()
            .unwrap();
        assert_eq!(
            s,
            vec!["transactions_per_sec", "p99_us", "cpu_us_per_transaction"]
        );
        assert!(parse_selectors(Some("THROUGHPUT,bogus")).is_err());
        assert!(parse_selectors(None).unwrap().is_none());
    }

    #[test]
    fn options_map_onto_the_library_configuration() {
        let c = config_for(
            TestKind::UdpStream,
            &args("--udp-gso 1200 --udp-gro --reuseport --batch 8 --flows 4 --threads 2 --pin 0-1 --server-pin 1 --busy-poll 50"),
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

        let c = config_for(TestKind::TcpCrr, &args("--flows 3 --reset")).unwrap();
        assert_eq!(c.threads, 3);
        assert_eq!(c.spec.close, CloseMode::Reset);
        let c = config_for(TestKind::TcpStream, &args("--reverse --duration 2s")).unwrap();
        assert_eq!(c.spec.direction, Direction::ServerToClient);
        assert_eq!(c.duration, Duration::from_secs(2));
        assert!(config_for(TestKind::TcpRr, &args("--batch 0")).is_err());
    }

    #[test]
    fn later_options_override_earlier_ones_for_compare() {
        let t = args("--request 1 --request 80000 --nodelay");
        assert_eq!(t.request, Some(80000));
        assert!(t.nodelay);
    }

    #[test]
    fn hosts_resolve_with_or_without_brackets() {
        assert_eq!(resolve("::1", 5).unwrap(), "[::1]:5".parse().unwrap());
        assert_eq!(resolve("[::1]", 5).unwrap(), "[::1]:5".parse().unwrap());
        assert_eq!(
            resolve("127.0.0.1", 5).unwrap(),
            "127.0.0.1:5".parse().unwrap()
        );
    }
}
