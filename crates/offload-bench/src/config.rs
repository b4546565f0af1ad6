//! Test configuration: the test kinds, the socket knobs, the part sent to the
//! server ([`TestSpec`]) and the client's whole configuration
//! ([`ClientConfig`]). Validation happens here, once, so the engines can trust
//! their inputs.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;

/// The test to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    /// TCP request/response on long-lived connections (netperf TCP_RR).
    TcpRr,
    /// TCP connect, request, response, close per transaction (TCP_CRR).
    TcpCrr,
    /// TCP bulk transfer (TCP_STREAM / TCP_MAERTS).
    TcpStream,
    /// UDP request/response.
    UdpRr,
    /// UDP flood, packets per second at the receiver.
    UdpStream,
}

impl TestKind {
    /// The command-line name (`tcp-rr`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TestKind::TcpRr => "tcp-rr",
            TestKind::TcpCrr => "tcp-crr",
            TestKind::TcpStream => "tcp-stream",
            TestKind::UdpRr => "udp-rr",
            TestKind::UdpStream => "udp-stream",
        }
    }

    /// Whether the test is request/response (has latency percentiles).
    pub fn is_rr(self) -> bool {
        matches!(self, TestKind::TcpRr | TestKind::TcpCrr | TestKind::UdpRr)
    }

    /// Whether the data path is UDP.
    pub fn is_udp(self) -> bool {
        matches!(self, TestKind::UdpRr | TestKind::UdpStream)
    }
}

/// Direction of a stream test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// The client sends, the server receives (TCP_STREAM).
    #[default]
    ClientToServer,
    /// The server sends, the client receives (TCP_MAERTS, iperf3 -R).
    ServerToClient,
}

/// How tcp-crr closes its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CloseMode {
    /// close(): FIN handshake; the client keeps TIME_WAIT entries.
    #[default]
    Normal,
    /// SO_LINGER 0: the client sends RST, leaving no TIME_WAIT.
    Reset,
}

/// Socket options applied on both ends of the data path.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SocketKnobs {
    /// TCP_NODELAY on every TCP data socket.
    pub nodelay: bool,
    /// SO_SNDBUF in bytes (kernel doubles it); None keeps autotuning.
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes; None keeps autotuning.
    pub rcvbuf: Option<u32>,
    /// SO_BUSY_POLL microseconds plus SO_PREFER_BUSY_POLL.
    pub busy_poll_us: Option<u32>,
    /// UDP receivers: one SO_REUSEPORT socket per server thread.
    pub reuseport: bool,
    /// UDP: messages per recvmmsg/sendmmsg call (1 = plain recv/send).
    pub batch: u32,
    /// UDP: UDP_SEGMENT segment size; each send carries many segments.
    pub udp_gso: Option<u16>,
    /// UDP: UDP_GRO on the receiving sockets.
    pub udp_gro: bool,
    /// udp-stream: after a read that drains its socket, a receiver sleeps
    /// this many microseconds before reading again, so that datagrams
    /// queue up and are read in batches (ethtool's rx-usecs, in software).
    /// A receiver asleep outside the socket's wait queue is not woken: the
    /// sender no longer pays a wakeup per datagram.
    #[serde(default)]
    pub rx_usecs: Option<u32>,
}

/// What the client asks the server to run (sent in the control protocol).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Test kind.
    pub kind: TestKind,
    /// Data connections (TCP) or sockets (UDP) the client opens.
    pub flows: u32,
    /// Server worker threads.
    pub server_threads: u32,
    /// Request size in bytes (rr), or write/datagram size (stream).
    pub request: u32,
    /// Response size in bytes (rr), or read size (stream).
    pub response: u32,
    /// Stream direction.
    pub direction: Direction,
    /// tcp-crr close mode.
    pub close: CloseMode,
    /// Socket options for both ends.
    pub knobs: SocketKnobs,
    /// CPUs the server's workers are pinned to (worker i to cpus[i % n]).
    pub server_pin: Option<Vec<usize>>,
    /// Warm-up plus measurement time, so the server can bound its waits.
    pub expected_seconds: f64,
    /// TCP data listeners the server opens; flow i connects to listener
    /// i % n. One source address reaches one listener through at most the
    /// client's ephemeral port range (28,232 ports by default), so 30,000
    /// flows need two.
    #[serde(default = "one")]
    pub listeners: u32,
    /// tcp-rr: requests in flight per connection (netperf's burst, neper's
    /// pipelining); 1 is strict request/response.
    #[serde(default = "one")]
    pub burst: u32,
}

fn one() -> u32 {
    1
}

/// The client's whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The server's control address.
    pub server: SocketAddr,
    /// What runs on the data path.
    pub spec: TestSpec,
    /// Client worker threads (flows are spread over them).
    pub threads: u32,
    /// Length of the measurement window.
    pub duration: Duration,
    /// Time before the window, excluded from every figure.
    pub warmup: Duration,
    /// CPUs the client's workers are pinned to (worker i to cpus[i % n]).
    pub pin: Option<Vec<usize>>,
    /// Fixed rate in transactions (rr) or packets (udp-stream) per second,
    /// over all flows; rr latencies then count from the intended send time
    /// (coordinated omission corrected). None: as fast as possible.
    pub rate: Option<f64>,
    /// Measure the tool's own per-transaction cost: no I/O, no server.
    pub null: bool,
    /// Period of the interval lines (None: none).
    pub interval: Option<Duration>,
    /// A UDP transaction with no response after this long counts as lost.
    pub udp_timeout: Duration,
    /// tcp-rr/udp-rr over many flows: at most this many transactions
    /// outstanding per client thread, the flows taking turns, so that
    /// latency measures the stack and not a queue (None: one in flight on
    /// every flow).
    pub in_flight: Option<u32>,
    /// The shared secret of a server that requires authentication (see
    /// [`crate::auth`]); with one, the client also requires the server to
    /// prove it holds the same secret.
    pub auth: Option<crate::auth::Secret>,
}

impl ClientConfig {
    /// A configuration with the defaults of the command line.
    pub fn new(kind: TestKind, server: SocketAddr) -> Self {
        let (request, response) = match kind {
            TestKind::TcpStream => (128 * 1024, 128 * 1024),
            TestKind::UdpStream => (32, 65536),
            _ => (1, 1),
        };
        ClientConfig {
            server,
            spec: TestSpec {
                kind,
                flows: 1,
                server_threads: 1,
                request,
                response,
                direction: Direction::ClientToServer,
                close: CloseMode::Normal,
                knobs: SocketKnobs {
                    batch: 1,
                    ..SocketKnobs::default()
                },
                server_pin: None,
                expected_seconds: 3.0,
                listeners: 1,
                burst: 1,
            },
            threads: 1,
            duration: Duration::from_secs(2),
            warmup: Duration::from_secs(1),
            pin: None,
            rate: None,
            null: false,
            interval: None,
            udp_timeout: Duration::from_millis(200),
            in_flight: None,
            auth: None,
        }
    }

    /// Checks the values the engines rely on and fills derived fields.
    pub fn validate(&mut self) -> Result<(), BenchError> {
        let s = &mut self.spec;
        if s.flows == 0 || self.threads == 0 || s.server_threads == 0 {
            return Err(BenchError::Config(
                "--flows, --threads and server threads must be at least 1".into(),
            ));
        }
        if self.threads > s.flows {
            self.threads = s.flows;
        }
        // tcp-crr keeps one connection attempt in flight per thread.
        if s.kind == TestKind::TcpCrr {
            self.threads = s.flows;
        }
        if s.server_threads > s.flows && s.kind != TestKind::TcpCrr {
            s.server_threads = s.flows;
        }
        if s.flows > 1_000_000 {
            return Err(BenchError::Config(format!(
                "--flows {} is above 1000000",
                s.flows
            )));
        }
        if self.in_flight == Some(0) {
            return Err(BenchError::Config(
                "at least one transaction must be in flight".into(),
            ));
        }
        if self.threads > 1024 || s.server_threads > 1024 {
            return Err(BenchError::Config("at most 1024 threads".into()));
        }
        if s.request == 0 || s.response == 0 {
            return Err(BenchError::Config(
                "--request and --response must be at least 1 byte".into(),
            ));
        }
        let max_msg = if s.kind.is_udp() { 65507 } else { 1 << 30 };
        if s.request > max_msg || s.response > max_msg.max(65536) {
            return Err(BenchError::Config(format!(
                "message sizes above {max_msg} bytes are not possible for {}",
                s.kind.name()
            )));
        }
        if s.knobs.batch == 0 || s.knobs.batch > 1024 {
            return Err(BenchError::Config("--batch must be 1..=1024".into()));
        }
        if let Some(g) = s.knobs.udp_gso {
            if g == 0 || u32::from(g) > 65507 {
                return Err(BenchError::Config("--udp-gso must be 1..=65507".into()));
            }
            if s.kind != TestKind::UdpStream {
                return Err(BenchError::Config("--udp-gso applies to udp-stream".into()));
            }
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(BenchError::Config(
                    "--rate must be a positive number".into(),
                ));
            }
            if s.kind.is_rr() && s.flows != self.threads {
                return Err(BenchError::Config(
                    "--rate with request/response needs one flow per thread (--threads = --flows)"
                        .into(),
                ));
            }
        }
        if s.burst == 0 || s.burst > 65536 {
            return Err(BenchError::Config("--burst must be 1..=65536".into()));
        }
        if s.burst > 1 && s.kind != TestKind::TcpRr {
            return Err(BenchError::Config("--burst applies to tcp-rr".into()));
        }
        if s.burst > 1 && self.rate.is_some() {
            return Err(BenchError::Config(
                "--burst and --rate do not combine (a fixed rate paces one request at a time)"
                    .into(),
            ));
        }
        if self.duration.is_zero() {
            return Err(BenchError::Config("--duration must be above zero".into()));
        }
        s.expected_seconds = (self.warmup + self.duration).as_secs_f64();
        Ok(())
    }
}

/// Parses a CPU list such as `0-3,6,8-9`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, BenchError> {
    let bad = |why: &str| BenchError::Config(format!("cpu list {text:?}: {why}"));
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: usize = a.trim().parse().map_err(|_| bad("not a number"))?;
        let b: usize = b.trim().parse().map_err(|_| bad("not a number"))?;
        if b < a || b >= 4096 {
            return Err(bad("range is reversed or beyond cpu 4095"));
        }
        out.extend(a..=b);
    }
    if out.is_empty() {
        return Err(bad("empty"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges_and_reject_garbage() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("0-99999").is_err());
    }

    #[test]
    fn validation_clamps_threads_and_rejects_nonsense() {
        let mut c = ClientConfig::new(TestKind::TcpRr, "127.0.0.1:1".parse().unwrap());
        c.threads = 8;
        c.spec.flows = 2;
        c.spec.server_threads = 8;
        c.validate().unwrap();
        assert_eq!((c.threads, c.spec.server_threads), (2, 2));
        assert!((c.spec.expected_seconds - 3.0).abs() < 1e-9);

        let mut c = ClientConfig::new(TestKind::UdpRr, "127.0.0.1:1".parse().unwrap());
        c.spec.request = 70000;
        assert!(c.validate().is_err());
        let mut c = ClientConfig::new(TestKind::TcpRr, "127.0.0.1:1".parse().unwrap());
        c.spec.knobs.udp_gso = Some(1000);
        assert!(c.validate().is_err());
        let mut c = ClientConfig::new(TestKind::TcpRr, "127.0.0.1:1".parse().unwrap());
        c.spec.flows = 0;
        assert!(c.validate().is_err());
        let mut c = ClientConfig::new(TestKind::TcpRr, "127.0.0.1:1".parse().unwrap());
        c.spec.flows = 4;
        c.rate = Some(100.0);
        assert!(c.validate().is_err(), "rate needs one flow per thread");
        c.threads = 4;
        c.validate().unwrap();
        let mut c = ClientConfig::new(TestKind::TcpCrr, "127.0.0.1:1".parse().unwrap());
        c.spec.flows = 3;
        c.validate().unwrap();
        assert_eq!(c.threads, 3);
    }

    #[test]
    fn test_kinds_serialize_with_their_cli_names() {
        for k in [
            TestKind::TcpRr,
            TestKind::TcpCrr,
            TestKind::TcpStream,
            TestKind::UdpRr,
            TestKind::UdpStream,
        ] {
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.name())
            );
        }
    }
}
