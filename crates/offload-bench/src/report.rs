//! Result structures (serialised as the `--json` output and in the control
//! protocol), the host description every result carries, and the
//! netperf-style output selectors (`-O`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{CloseMode, Direction, TestKind};
use crate::cpu::{MachineCpu, ProcessCpu, UdpCounters};
use offload_report::stats::{PairedDifference, Summary};

/// Latency percentiles in microseconds, from an HDR histogram (3 significant
/// digits), per transaction, measured on the client.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Transactions in the histogram.
    pub count: u64,
}

impl LatencyUs {
    /// Reads the percentiles from a histogram of nanoseconds.
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(LatencyUs {
            min: us(h.min()),
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
            count: h.len(),
        })
    }
}

/// One network interface of a host, as rtnetlink (`RTM_GETLINK`) reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InterfaceInfo {
    /// Name.
    pub name: String,
    /// MTU.
    pub mtu: u64,
    /// Largest GSO super-packet the stack builds for this device (IPv6; BIG TCP).
    pub gso_max_size: Option<u64>,
    /// Largest GRO super-packet (IPv6; BIG TCP).
    pub gro_max_size: Option<u64>,
    /// Same for IPv4.
    pub gso_ipv4_max_size: Option<u64>,
    /// Same for IPv4.
    pub gro_ipv4_max_size: Option<u64>,
    /// Largest TSO super-packet the driver accepts (read-only).
    pub tso_max_size: Option<u64>,
    /// Link kind (`veth`, `vxlan`, ...), none for physical devices and `lo`.
    pub kind: Option<String>,
    /// The knobs `offload tune` sets, as read back where the device answers:
    /// `feature NAME` (`on`/`off`, the features the device lets change,
    /// ethtool's names), `ring rx` / `ring tx` (`ethtool -g`), `coalesce
    /// FIELD` (`ethtool -c`), and `sysfs REL` for `gro_flush_timeout`,
    /// `napi_defer_hard_irqs`, `threaded` and each queue's `rps_cpus`,
    /// `rps_flow_cnt` and `xps_cpus` (read through a sysfs of the
    /// namespace's own; left out where that cannot be mounted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
}

/// The host and namespace a side ran in: kernel, CPUs, offload sizes and the
/// sysctls that change the results.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostInfo {
    /// `uname -r`.
    pub kernel: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Relevant sysctls of the namespace (missing ones are left out).
    pub sysctls: BTreeMap<String, String>,
    /// Interfaces of the namespace (empty if rtnetlink cannot be read).
    pub interfaces: Vec<InterfaceInfo>,
}

/// Sysctls that change what a network benchmark measures.
pub const SYSCTLS: &[&str] = &[
    "net/core/busy_poll",
    "net/core/busy_read",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/rmem_default",
    "net/core/wmem_default",
    "net/core/netdev_max_backlog",
    "net/core/somaxconn",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_tw_reuse",
    "net/ipv4/tcp_autocorking",
    "net/ipv4/tcp_low_latency",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/udp_mem",
    "net/core/netdev_budget",
    "net/core/netdev_budget_usecs",
    "net/core/rps_sock_flow_entries",
    "net/ipv4/ip_forward",
];

impl HostInfo {
    /// Describes the calling thread's namespace (sysctls under /proc/sys/net
    /// and a netlink socket follow the thread's network namespace).
    pub fn collect() -> Self {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let mut sysctls = BTreeMap::new();
        for name in SYSCTLS {
            if let Ok(v) = std::fs::read_to_string(format!("/proc/sys/{name}")) {
                let v = v.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
                sysctls.insert(name.replace('/', "."), v);
            }
        }
        HostInfo {
            kernel,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            sysctls,
            interfaces: interfaces(),
        }
    }
}

/// The links of the calling thread's namespace, over rtnetlink (offload-sys's
/// implementation, shared with `offload inspect`), with the knobs `offload
/// tune` sets, read back over the ethtool ioctls and sysfs.
fn interfaces() -> Vec<InterfaceInfo> {
    let Ok(links) = offload_sys::rtnl::Rtnl::open().and_then(|mut r| r.links()) else {
        return Vec::new();
    };
    let ethtool = offload_sys::ethtool::Ethtool::open().ok();
    // /sys shows the devices of the namespace that mounted it: a detached
    // sysfs of this thread's namespace reads the right ones (root only).
    let sysfs = offload_sys::sysfs::Sysfs::mount_here().ok();
    links
        .into_iter()
        .map(|l| {
            let knobs = device_knobs(&l.name, ethtool.as_ref(), sysfs.as_ref());
            InterfaceInfo {
                name: l.name,
                mtu: u64::from(l.mtu),
                gso_max_size: l.gso_max_size.map(u64::from),
                gro_max_size: l.gro_max_size.map(u64::from),
                gso_ipv4_max_size: l.gso_ipv4_max_size.map(u64::from),
                gro_ipv4_max_size: l.gro_ipv4_max_size.map(u64::from),
                tso_max_size: l.tso_max_size.map(u64::from),
                kind: l.kind,
                knobs,
            }
        })
        .collect()
}

/// Per-device sysfs knobs that `offload tune` sets.
const DEVICE_SYSFS: [&str; 3] = ["gro_flush_timeout", "napi_defer_hard_irqs", "threaded"];

/// Most queues of one direction whose sysfs knobs are recorded.
const MAX_QUEUES_RECORDED: usize = 256;

/// What [`InterfaceInfo::knobs`] holds for one device; whatever the device
/// or this process cannot read is left out.
fn device_knobs(
    dev: &str,
    ethtool: Option<&offload_sys::ethtool::Ethtool>,
    sysfs: Option<&offload_sys::sysfs::Sysfs>,
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let on_off = |b: bool| if b { "on" } else { "off" }.to_string();
    if let Some(e) = ethtool {
        for f in e.features(dev).unwrap_or_default() {
            if !f.fixed() && !f.name.is_empty() {
                m.insert(format!("feature {}", f.name), on_off(f.active));
            }
        }
        if let Ok(r) = e.rings(dev) {
            m.insert("ring rx".into(), r.rx.to_string());
            m.insert("ring tx".into(), r.tx.to_string());
        }
        for (k, v) in e.coalesce(dev).unwrap_or_default() {
            m.insert(format!("coalesce {k}"), v.to_string());
        }
    }
    if let Some(s) = sysfs {
        let base = format!("class/net/{dev}");
        for rel in DEVICE_SYSFS {
            if let Ok(v) = s.read(&format!("{base}/{rel}")) {
                m.insert(format!("sysfs {rel}"), v.trim().to_string());
            }
        }
        let mut queues = s.list(&format!("{base}/queues")).unwrap_or_default();
        queues.sort();
        let (mut rx, mut tx) = (0, 0);
        for q in queues {
            let (count, files): (&mut usize, &[&str]) = if q.starts_with("rx-") {
                (&mut rx, &["rps_cpus", "rps_flow_cnt"])
            } else if q.starts_with("tx-") {
                (&mut tx, &["xps_cpus"])
            } else {
                continue;
            };
            *count += 1;
            if *count > MAX_QUEUES_RECORDED {
                continue;
            }
            for f in files {
                if let Ok(v) = s.read(&format!("{base}/queues/{q}/{f}")) {
                    m.insert(format!("sysfs queues/{q}/{f}"), v.trim().to_string());
                }
            }
        }
    }
    m
}

/// What the server applied when it set a test up.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerSettings {
    /// Worker threads.
    pub threads: u32,
    /// `blocking` (one flow per thread) or `epoll`.
    pub engine: String,
    /// UDP receiving sockets (one per thread with reuseport).
    pub udp_sockets: u32,
    /// Whether each worker held its flows in a descriptor table of its own
    /// (RLIMIT_NOFILE could not be raised for all of them in one).
    #[serde(default)]
    pub per_thread_fd_tables: bool,
}

/// Counters over the measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct WindowCounts {
    /// Transactions (rr), writes (tcp-stream) or packets (udp-stream).
    pub transactions: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Datagrams (UDP; GRO super-packets counted as their segments).
    pub packets: u64,
    /// Window length as this side measured it.
    pub seconds: f64,
}

/// The server's side of a result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerReport {
    /// Transactions served (rr) or messages received over the whole test.
    pub transactions_total: u64,
    /// Bytes received plus sent over the whole test.
    pub bytes_total: u64,
    /// Datagrams received over the whole test.
    pub packets_total: u64,
    /// Counters over the measurement window.
    pub window: WindowCounts,
    /// CPU of the server's threads over the window.
    pub cpu: ProcessCpu,
    /// UDP counters of the server's namespace over the whole test.
    pub udp: Option<UdpCounters>,
    /// Effective SO_SNDBUF of a data socket.
    pub sndbuf: Option<u32>,
    /// Effective SO_RCVBUF of a data socket.
    pub rcvbuf: Option<u32>,
    /// Effective TCP_NODELAY of a data socket.
    pub nodelay: Option<bool>,
    /// CPUs each worker was allowed on, as the kernel reported after pinning.
    pub pin_used: Vec<Vec<usize>>,
    /// Data connections accepted.
    pub flows_accepted: u64,
    /// Worker errors (a client that vanished, a reset), one line each.
    pub errors: Vec<String>,
    /// TCP_INFO of the server's side of every flow, read when its worker
    /// stops (just after the window); `per_flow` rows join the client's on
    /// `peer_port` = the client's `local_port`.
    /// (Boxed: the control protocol's messages stay small.)
    #[serde(default)]
    pub tcp_info: Option<Box<TcpInfoReport>>,
}

/// The effective settings of a run: what was asked, and what the kernel did.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Settings {
    /// Test name.
    pub test: String,
    /// Server control address.
    pub server: String,
    /// IPv6 data path.
    pub ipv6: bool,
    /// Flows.
    pub flows: u32,
    /// Client threads.
    pub threads: u32,
    /// Server threads.
    pub server_threads: u32,
    /// Request bytes (rr) or write / datagram size (stream).
    pub request: u32,
    /// Response bytes (rr) or read size (stream).
    pub response: u32,
    /// Bytes per write call: whole messages (rr) or the write size (stream).
    pub write_size: u32,
    /// Stream direction.
    pub direction: Option<Direction>,
    /// tcp-crr close mode.
    pub close_mode: Option<CloseMode>,
    /// TCP_NODELAY on the client's data sockets, as read back.
    pub nodelay: Option<bool>,
    /// Effective SO_SNDBUF of a client data socket, as read back.
    pub sndbuf: Option<u32>,
    /// Effective SO_RCVBUF of a client data socket, as read back.
    pub rcvbuf: Option<u32>,
    /// Requested SO_SNDBUF.
    pub sndbuf_requested: Option<u32>,
    /// Requested SO_RCVBUF.
    pub rcvbuf_requested: Option<u32>,
    /// SO_BUSY_POLL microseconds.
    pub busy_poll_us: Option<u32>,
    /// SO_REUSEPORT receivers.
    pub reuseport: bool,
    /// Messages per recvmmsg/sendmmsg.
    pub batch: u32,
    /// UDP_SEGMENT size.
    pub udp_gso: Option<u16>,
    /// UDP_GRO.
    pub udp_gro: bool,
    /// udp-stream receivers' coalescing sleep (`--rx-usecs`).
    pub rx_usecs: Option<u32>,
    /// Fixed rate, if any.
    pub rate: Option<f64>,
    /// `--null`: no I/O.
    pub null: bool,
    /// Client engine: `blocking`, `epoll` or `null`.
    pub engine: String,
    /// Server settings.
    pub server_settings: ServerSettings,
    /// CPUs each client worker was allowed on after pinning.
    pub client_pin_used: Vec<Vec<usize>>,
    /// CPUs each server worker was allowed on after pinning.
    pub server_pin_used: Vec<Vec<usize>>,
    /// Warm-up seconds (excluded).
    pub warmup_seconds: f64,
    /// Measurement window seconds, as configured.
    pub duration_seconds: f64,
    /// The client's host and namespace.
    pub client_host: HostInfo,
    /// The server's host and namespace.
    pub server_host: HostInfo,
    /// TCP data listeners of the server (flow i uses listener i % n).
    #[serde(default)]
    pub listeners: u32,
    /// tcp-rr requests in flight per connection.
    #[serde(default)]
    pub burst: u32,
    /// What the run changed to fit the machine (threads added for the
    /// open-file limit, extra listeners for the ephemeral ports).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// CPU over the measurement window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuReport {
    /// Window length in seconds, as the client measured it.
    pub window_seconds: f64,
    /// Whole machine (/proc/stat), all CPUs; includes softirq.
    pub machine: MachineCpu,
    /// Machine busy CPU-seconds over the window.
    pub machine_busy_seconds: f64,
    /// Machine utilisation in percent of all CPUs: busy / (busy + idle) of
    /// the same /proc/stat window, so never above 100.
    pub machine_utilization_percent: f64,
    /// The client's threads, in percent of all CPUs over that window.
    #[serde(default)]
    pub client_percent: f64,
    /// The server's threads, in percent of all CPUs over that window (when
    /// the server runs on this machine, as on loopback and in namespaces).
    #[serde(default)]
    pub server_percent: f64,
    /// The rest of the machine's busy time (softirq and irq work outside
    /// the benchmark's threads, other processes), so that client + server +
    /// other = machine.
    #[serde(default)]
    pub other_percent: f64,
    /// The client's threads.
    pub client: ProcessCpu,
    /// The server's threads.
    pub server: ProcessCpu,
    /// Client thread CPU-seconds per transaction.
    pub client_seconds_per_transaction: f64,
    /// Server thread CPU-seconds per transaction.
    pub server_seconds_per_transaction: f64,
}

/// Count cross-check between client, server and histogram.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Client transactions completed in the window.
    pub client_window: u64,
    /// Client transactions completed in the whole test (warm-up included).
    pub client_total: u64,
    /// Entries in the latency histogram (equals client_window for rr).
    pub histogram: u64,
    /// Server transactions in the window (sampled at the marks).
    pub server_window: u64,
    /// Server transactions in the whole test.
    pub server_total: u64,
    /// Transactions the client counted as lost (UDP).
    pub lost: u64,
    /// Whether the totals agree within the transactions that can be in
    /// flight (one per flow) and the window counts within 10%.
    pub consistent: bool,
    /// Why not, when not.
    pub note: Option<String>,
}

/// UDP figures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpReport {
    /// Datagrams the client sent over the whole test (segments with GSO).
    pub sent: u64,
    /// Datagrams the server received over the whole test.
    pub received: u64,
    /// sent - received.
    pub lost: u64,
    /// Receive-buffer drops of the receiving namespace (kernel counter).
    pub kernel_rcvbuf_errors: u64,
    /// All receive errors of the receiving namespace (kernel counter).
    pub kernel_in_errors: u64,
    /// Send calls that failed with ENOBUFS/EAGAIN on the client.
    pub send_errors: u64,
}

/// One per-interval line (like iperf3's).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IntervalLine {
    /// Run number (1-based) within `--runs` or `--compare`; 1 for one run.
    #[serde(default)]
    pub run: u32,
    /// Seconds since the start of the warm-up, at the end of the interval.
    pub at_seconds: f64,
    /// Whether the interval is (partly) in the warm-up.
    pub warmup: bool,
    /// Client transactions per second in the interval.
    pub transactions_per_sec: f64,
    /// Client Gbit/s in the interval (payload, both directions).
    pub gbit_per_sec: f64,
}

/// A whole result: the JSON's top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Test name.
    pub test: TestKind,
    /// netperf's THROUGHPUT: transactions per second for request/response
    /// tests, 10^6 bits per second (payload, at the receiver) for stream
    /// tests; see `throughput_units`.
    pub throughput: f64,
    /// `Trans/s` or `10^6bits/s`.
    pub throughput_units: String,
    /// Payload bits per second (receiver side for stream tests, both
    /// directions for request/response).
    pub bits_per_sec: f64,
    /// Transactions per second (rr); for stream tests, messages per second
    /// (writes for tcp-stream, received datagrams for udp-stream).
    pub transactions_per_sec: f64,
    /// Payload Gbit/s over the window (receiver side for stream tests).
    pub gbit_per_sec: f64,
    /// Datagrams per second received (UDP tests), else 0.
    pub packets_per_sec: f64,
    /// Latency percentiles (rr tests).
    pub latency_us: Option<LatencyUs>,
    /// Machine busy CPU-seconds per transaction (user + system + irq +
    /// softirq of every CPU): the efficiency figure.
    pub cpu_seconds_per_transaction: f64,
    /// CPU details.
    pub cpu: CpuReport,
    /// Count cross-check.
    pub counts: Counts,
    /// UDP figures (UDP tests).
    pub udp: Option<UdpReport>,
    /// The server's report.
    pub server: ServerReport,
    /// Effective settings.
    pub settings: Settings,
    /// Per-interval lines.
    pub intervals: Vec<IntervalLine>,
    /// TCP_INFO of every client TCP flow at the window's end, summarized
    /// over flows (TCP tests with long-lived connections).
    pub tcp_info: Option<TcpInfoReport>,
}

/// TCP_INFO of one flow: of the client's socket, read at the end of the
/// measurement window, or (under `server.tcp_info`) of the server's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowTcpInfo {
    /// Flow number (0-based, in connection order).
    pub flow: u32,
    /// The local port of the flow's socket (the client's, or under
    /// `server.tcp_info` the server's data port).
    pub local_port: u16,
    /// The peer's port: joins a client row with the server row of the
    /// same flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_port: Option<u16>,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// RTT variance, microseconds.
    pub rttvar_us: u32,
    /// Smallest RTT seen, microseconds.
    pub min_rtt_us: Option<u32>,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Segments retransmitted over the connection's life.
    pub retransmits: u32,
    /// The kernel's delivery-rate estimate, bits per second.
    pub delivery_rate_bps: Option<u64>,
    /// Bytes the peer acknowledged.
    pub bytes_acked: Option<u64>,
    /// Bytes received.
    pub bytes_received: Option<u64>,
}

impl FlowTcpInfo {
    /// From the raw fields of `struct tcp_info`.
    pub fn from_raw(flow: u32, local_port: u16, r: &crate::sys::TcpInfoRaw) -> Self {
        FlowTcpInfo {
            flow,
            local_port,
            peer_port: None,
            rtt_us: r.rtt_us,
            rttvar_us: r.rttvar_us,
            min_rtt_us: r.min_rtt_us,
            cwnd: r.snd_cwnd,
            retransmits: r.total_retrans,
            delivery_rate_bps: r.delivery_rate.map(|b| b.saturating_mul(8)),
            bytes_acked: r.bytes_acked,
            bytes_received: r.bytes_received,
        }
    }
}

/// A figure's spread over flows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OverFlows {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl OverFlows {
    /// The spread of `values`; None when empty.
    pub fn of(mut values: Vec<f64>) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let rank = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Some(OverFlows {
            min: values[0],
            median,
            p99: rank(0.99),
            max: values[n - 1],
        })
    }
}

/// TCP_INFO over every client flow: min, median and p99 over flows, and
/// each flow's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpInfoReport {
    /// Flows read.
    pub flows: usize,
    /// Smoothed RTT, microseconds.
    pub rtt_us: OverFlows,
    /// RTT variance, microseconds.
    pub rttvar_us: OverFlows,
    /// Congestion window, segments.
    pub cwnd: OverFlows,
    /// Retransmitted segments per flow.
    pub retransmits: OverFlows,
    /// Retransmitted segments, all flows.
    pub retransmits_total: u64,
    /// Delivery rate, bits per second (kernels from 4.9).
    pub delivery_rate_bps: Option<OverFlows>,
    /// Every flow.
    pub per_flow: Vec<FlowTcpInfo>,
}

impl TcpInfoReport {
    /// Summarizes the flows; None when there are none.
    pub fn from_flows(mut flows: Vec<FlowTcpInfo>) -> Option<Self> {
        flows.sort_by_key(|f| f.flow);
        let col = |f: fn(&FlowTcpInfo) -> f64| flows.iter().map(f).collect::<Vec<_>>();
        Some(TcpInfoReport {
            flows: flows.len(),
            rtt_us: OverFlows::of(col(|f| f64::from(f.rtt_us)))?,
            rttvar_us: OverFlows::of(col(|f| f64::from(f.rttvar_us)))?,
            cwnd: OverFlows::of(col(|f| f64::from(f.cwnd)))?,
            retransmits: OverFlows::of(col(|f| f64::from(f.retransmits)))?,
            retransmits_total: flows.iter().map(|f| u64::from(f.retransmits)).sum(),
            delivery_rate_bps: OverFlows::of(
                flows
                    .iter()
                    .filter_map(|f| f.delivery_rate_bps.map(|v| v as f64))
                    .collect(),
            ),
            per_flow: flows,
        })
    }
}

/// Output selectors for `-O`: (name, aliases, unit). Every selector reads
/// a figure that the human report prints, with the same value.
pub const SELECTORS: &[(&str, &[&str], &str)] = &[
    (
        "throughput",
        &["THROUGHPUT"],
        "trans/s (rr), 10^6bits/s (stream)",
    ),
    ("throughput_units", &["THROUGHPUT_UNITS"], "(text)"),
    (
        "transactions_per_sec",
        &["TRANSACTION_RATE", "TPS"],
        "trans/s (stream: messages/s)",
    ),
    ("bits_per_sec", &["BPS"], "bit/s"),
    ("mbit_per_sec", &["MBPS"], "10^6bits/s"),
    ("gbit_per_sec", &["GBPS", "THROUGHPUT_GBPS"], "Gbit/s"),
    ("packets_per_sec", &["PPS"], "packets/s"),
    ("min_us", &["MIN_LATENCY"], "us"),
    ("p50_us", &["P50_LATENCY"], "us"),
    ("p90_us", &["P90_LATENCY"], "us"),
    ("p99_us", &["P99_LATENCY"], "us"),
    ("p999_us", &["P999_LATENCY"], "us"),
    ("max_us", &["MAX_LATENCY"], "us"),
    ("mean_us", &["MEAN_LATENCY"], "us"),
    ("cpu_us_per_transaction", &["SD", "SERVICE_DEMAND"], "us"),
    ("cpu_seconds_per_transaction", &["CPU_PER_TRANSACTION"], "s"),
    ("client_cpu_us_per_transaction", &["LOCAL_SD"], "us"),
    ("server_cpu_us_per_transaction", &["REMOTE_SD"], "us"),
    ("machine_cpu_percent", &["CPU_UTIL"], "%"),
    ("client_cpu_percent", &["LOCAL_CPU_UTIL"], "%"),
    ("server_cpu_percent", &["REMOTE_CPU_UTIL"], "%"),
    ("softirq_seconds", &["SOFTIRQ"], "s"),
    ("client_transactions", &["CLIENT_TRANSACTIONS"], ""),
    ("server_transactions", &["SERVER_TRANSACTIONS"], ""),
    ("lost", &["LOST"], ""),
    ("udp_rcvbuf_errors", &["DROPS", "RCVBUF_ERRORS"], ""),
    ("rtt_p50_us", &["RTT_P50"], "us"),
    ("rtt_p99_us", &["RTT_P99"], "us"),
    ("retransmits", &["RETRANSMITS", "TCP_RETRANSMITS"], ""),
    ("flows", &["FLOWS"], ""),
    ("threads", &["THREADS"], ""),
    ("request_size", &["REQUEST_SIZE"], "bytes"),
    ("response_size", &["RESPONSE_SIZE"], "bytes"),
    ("burst", &["BURST"], ""),
    ("window_seconds", &["ELAPSED_TIME"], "s"),
];

/// Resolves a selector name or alias (case-insensitive) to its canonical name.
pub fn canonical_selector(name: &str) -> Option<&'static str> {
    let name = name.trim();
    SELECTORS
        .iter()
        .find(|(n, aliases, _)| {
            n.eq_ignore_ascii_case(name) || aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
        })
        .map(|(n, _, _)| *n)
}

/// A selected figure: a number, or text (units).
#[derive(Debug, Clone, PartialEq)]
pub enum Selected {
    /// A number.
    Number(f64),
    /// Text.
    Text(String),
}

impl BenchResult {
    /// The value of an output selector (see [`SELECTORS`]); NaN where the
    /// figure does not apply to the test.
    pub fn select(&self, name: &str) -> Option<f64> {
        match self.select_value(name)? {
            Selected::Number(v) => Some(v),
            Selected::Text(_) => Some(f64::NAN),
        }
    }

    /// The value of an output selector, text included.
    pub fn select_value(&self, name: &str) -> Option<Selected> {
        let l = self.latency_us;
        let lat = |f: fn(&LatencyUs) -> f64| l.as_ref().map(f).unwrap_or(f64::NAN);
        let tcp = |f: fn(&TcpInfoReport) -> f64| self.tcp_info.as_ref().map(f).unwrap_or(f64::NAN);
        let v = match canonical_selector(name)? {
            "throughput" => self.throughput,
            "throughput_units" => return Some(Selected::Text(self.throughput_units.clone())),
            "transactions_per_sec" => self.transactions_per_sec,
            "bits_per_sec" => self.bits_per_sec,
            "mbit_per_sec" => self.bits_per_sec / 1e6,
            "gbit_per_sec" => self.gbit_per_sec,
            "packets_per_sec" => self.packets_per_sec,
            "min_us" => lat(|l| l.min),
            "p50_us" => lat(|l| l.p50),
            "p90_us" => lat(|l| l.p90),
            "p99_us" => lat(|l| l.p99),
            "p999_us" => lat(|l| l.p999),
            "max_us" => lat(|l| l.max),
            "mean_us" => lat(|l| l.mean),
            "cpu_us_per_transaction" => self.cpu_seconds_per_transaction * 1e6,
            "cpu_seconds_per_transaction" => self.cpu_seconds_per_transaction,
            "client_cpu_us_per_transaction" => self.cpu.client_seconds_per_transaction * 1e6,
            "server_cpu_us_per_transaction" => self.cpu.server_seconds_per_transaction * 1e6,
            "machine_cpu_percent" => self.cpu.machine_utilization_percent,
            "client_cpu_percent" => self.cpu.client_percent,
            "server_cpu_percent" => self.cpu.server_percent,
            "softirq_seconds" => self.cpu.machine.softirq,
            "client_transactions" => self.counts.client_window as f64,
            "server_transactions" => self.counts.server_window as f64,
            // The figure the report prints: datagrams sent and not received
            // for UDP tests, unanswered transactions otherwise.
            "lost" => self
                .udp
                .as_ref()
                .map(|u| u.lost as f64)
                .unwrap_or(self.counts.lost as f64),
            "udp_rcvbuf_errors" => self
                .udp
                .as_ref()
                .map(|u| u.kernel_rcvbuf_errors as f64)
                .unwrap_or(f64::NAN),
            "rtt_p50_us" => tcp(|t| t.rtt_us.median),
            "rtt_p99_us" => tcp(|t| t.rtt_us.p99),
            "retransmits" => tcp(|t| t.retransmits_total as f64),
            "flows" => f64::from(self.settings.flows),
            "threads" => f64::from(self.settings.threads),
            "request_size" => f64::from(self.settings.request),
            "response_size" => f64::from(self.settings.response),
            "burst" => f64::from(self.settings.burst.max(1)),
            "window_seconds" => self.cpu.window_seconds,
            _ => return None,
        };
        Some(Selected::Number(v))
    }
}

/// Repeated runs of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunsReport {
    /// Median transactions per second (the headline figure).
    pub transactions_per_sec: f64,
    /// Median of each run's P50..P99.9 (rr tests).
    pub latency_us: Option<LatencyUs>,
    /// Median CPU-seconds per transaction.
    pub cpu_seconds_per_transaction: f64,
    /// Settings of the first run.
    pub settings: Settings,
    /// Across runs: transactions per second.
    pub transactions_per_sec_summary: Option<Summary>,
    /// Across runs: CPU-seconds per transaction.
    pub cpu_seconds_per_transaction_summary: Option<Summary>,
    /// Across runs: P99 latency.
    pub p99_us_summary: Option<Summary>,
    /// Every run.
    pub runs: Vec<BenchResult>,
}

/// One piece of recorded state that differs between A and B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateDifference {
    /// Where: `client`, `server` (their hosts), or `run` (the test's own
    /// settings).
    pub side: String,
    /// What, e.g. `sysctl net.core.busy_poll`, `lo gro_max_size`,
    /// `veth0 feature rx-gro`.
    pub what: String,
    /// A's value; none where A did not record it.
    pub a: Option<String>,
    /// B's value; none where B did not record it.
    pub b: Option<String>,
}

/// Interleaved A/B runs and their paired differences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Options of A, as given.
    pub a_options: String,
    /// Options of B, as given.
    pub b_options: String,
    /// B - A of transactions per second.
    pub transactions_per_sec: Option<PairedDifference>,
    /// B - A of CPU-seconds per transaction.
    pub cpu_seconds_per_transaction: Option<PairedDifference>,
    /// B - A of P99 latency (rr tests).
    pub p99_us: Option<PairedDifference>,
    /// B - A of 10^6 bits per second (stream tests).
    #[serde(default)]
    pub mbit_per_sec: Option<PairedDifference>,
    /// Recorded state that differs between A's first run and B's: each
    /// side's host (kernel, sysctls, interfaces and their knobs) and the
    /// test's settings.
    #[serde(default)]
    pub state_differences: Vec<StateDifference>,
    /// What to know when reading the comparison.
    #[serde(default)]
    pub notes: Vec<String>,
    /// A's runs, in order.
    pub a_runs: Vec<BenchResult>,
    /// B's runs, in order.
    pub b_runs: Vec<BenchResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_resolve_names_and_aliases() {
        assert_eq!(canonical_selector("THROUGHPUT"), Some("throughput"));
        assert_eq!(canonical_selector("tps"), Some("transactions_per_sec"));
        assert_eq!(canonical_selector("p99_latency"), Some("p99_us"));
        assert_eq!(canonical_selector("P99_us"), Some("p99_us"));
        assert_eq!(canonical_selector("nope"), None);
        // Every canonical name is handled by select().
        let h = {
            let mut h =
                hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
            h.record(1000).unwrap();
            h
        };
        let r = BenchResult {
            test: TestKind::TcpRr,
            throughput: 1.0,
            throughput_units: "Trans/s".into(),
            bits_per_sec: 16.0,
            transactions_per_sec: 1.0,
            gbit_per_sec: 0.0,
            packets_per_sec: 0.0,
            latency_us: LatencyUs::from_histogram(&h),
            cpu_seconds_per_transaction: 2e-6,
            cpu: CpuReport::default(),
            counts: Counts::default(),
            udp: None,
            server: ServerReport::default(),
            settings: Settings::default(),
            intervals: Vec::new(),
            tcp_info: None,
        };
        for (name, _, _) in SELECTORS {
            assert!(r.select(name).is_some(), "{name}");
        }
        assert_eq!(r.select("SD"), Some(2.0));
        assert_eq!(r.select("THROUGHPUT"), Some(1.0));
        assert_eq!(
            r.select_value("THROUGHPUT_UNITS"),
            Some(Selected::Text("Trans/s".into()))
        );
        assert_eq!(r.select("p50_us"), Some(1.0));
    }

    #[test]
    fn interfaces_come_from_rtnetlink() {
        let host = HostInfo::collect();
        let lo = host.interfaces.iter().find(|i| i.name == "lo");
        assert!(lo.is_some_and(|l| l.mtu > 0), "{:?}", host.interfaces);
    }
}
