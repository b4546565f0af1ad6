//! `offload bench server`: one process serves every test to many clients.
//!
//! Each control connection gets a thread; each test gets its own data
//! listener (TCP) or sockets (UDP) on an ephemeral port of the address the
//! client reached, a setup thread that accepts the flows, and worker threads.
//! A client that sends garbage, speaks another version or vanishes mid-test
//! gets an Error frame if it is still there, the server logs one line, tears
//! that test down and keeps serving.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{Direction, TestKind, TestSpec};
use crate::cpu::{self, ProcessCpu, UdpCounters};
use crate::engine::{self, RrParams, Slot, StopWhen};
use crate::error::BenchError;
use crate::proto::{self, ClientMsg, Mark, ProtoError, ServerMsg};
use crate::report::{
    FlowTcpInfo, HostInfo, ServerReport, ServerSettings, TcpInfoReport, WindowCounts,
};
use crate::sock;
use crate::sys;

/// Largest request or response the server allocates for rr tests.
pub const MAX_RR_MESSAGE: u32 = 64 << 20;

/// Counters of a running server, for its owner and for tests.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Control connections accepted.
    pub connections: AtomicU64,
    /// Tests that ran to their report.
    pub tests_completed: AtomicU64,
    /// Control connections that ended in an error.
    pub errors: AtomicU64,
    /// The most recent log lines (at most 1000).
    pub log: Mutex<Vec<String>>,
}

impl ServerStats {
    fn log(&self, echo: bool, line: String) {
        if echo {
            eprintln!("offload bench server: {line}");
        }
        if let Ok(mut log) = self.log.lock() {
            if log.len() >= 1000 {
                log.remove(0);
            }
            log.push(line);
        }
    }
}

/// One thing that happened in the server (`offload bench server --json`
/// prints one JSON line per event).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServerEvent {
    /// The control port is bound.
    Listening {
        /// The control address.
        addr: String,
    },
    /// A client opened a control connection.
    Connected {
        /// The client's address.
        peer: String,
    },
    /// A test was set up and its data sockets listen.
    TestStarted {
        /// The client's address.
        peer: String,
        /// The test.
        test: TestKind,
        /// Flows asked for.
        flows: u32,
        /// Server worker threads.
        threads: u32,
        /// Request (or write/datagram) size.
        request: u32,
        /// Response (or read) size.
        response: u32,
        /// Data ports.
        data_ports: Vec<u16>,
        /// Server engine.
        engine: String,
    },
    /// A test ended with its report sent.
    TestFinished {
        /// The client's address.
        peer: String,
        /// The test.
        test: TestKind,
        /// Transactions served (rr) or messages received, whole test.
        transactions: u64,
        /// Bytes received plus sent, whole test.
        bytes: u64,
        /// Datagrams received, whole test.
        packets: u64,
        /// Measurement window as the server timed it.
        window_seconds: f64,
        /// Data connections accepted.
        flows_accepted: u64,
        /// Worker errors.
        errors: Vec<String>,
    },
    /// A control connection ended in an error.
    Error {
        /// The client's address.
        peer: String,
        /// What went wrong.
        message: String,
    },
    /// A control connection ended normally.
    Disconnected {
        /// The client's address.
        peer: String,
    },
    /// The server stopped serving.
    Stopped,
}

/// Where server events go.
pub type EventSink = Arc<dyn Fn(&ServerEvent) + Send + Sync>;

/// A bound, not yet serving, server.
pub struct Server {
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
    echo: bool,
    events: Option<EventSink>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("echo", &self.echo)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl Server {
    /// Binds the control port.
    ///
    /// `[::]:PORT` serves IPv4 and IPv6 clients (IPV6_V6ONLY off); on a host
    /// without IPv6 it falls back to `0.0.0.0:PORT`.
    pub fn bind(addr: SocketAddr) -> Result<Self, BenchError> {
        sys::raise_fd_limit(1 << 20).ok();
        let listener = match sock::tcp_listen(addr, &Default::default(), 128) {
            Err(e)
                if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)
                    ) =>
            {
                let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr.port());
                sock::tcp_listen(v4, &Default::default(), 128)
            }
            other => other,
        }
        .map_err(|e| BenchError::io(format!("binding the control port {addr}"), e))?;
        Ok(Server {
            listener,
            stop: Arc::new(AtomicBool::new(false)),
            stats: Arc::new(ServerStats::default()),
            echo: true,
            events: None,
        })
    }

    /// Sends every event to `sink` (and no log lines to standard error).
    pub fn on_event(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self.echo = false;
        self
    }

    /// Whether log lines also go to standard error (default: yes).
    pub fn echo_log(mut self, echo: bool) -> Self {
        self.echo = echo;
        self
    }

    /// The bound control address.
    pub fn local_addr(&self) -> Result<SocketAddr, BenchError> {
        self.listener
            .local_addr()
            .map_err(|e| BenchError::io("reading the control address", e))
    }

    /// The server's counters and log.
    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// A flag that stops [`Server::serve`] within 100 ms when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serves until the stop flag is set.
    pub fn serve(self) -> Result<(), BenchError> {
        sock::set_recv_timeout(self.listener.as_raw_fd(), Duration::from_millis(100))
            .map_err(|e| BenchError::io("SO_RCVTIMEO on the control port", e))?;
        let emit = |e: &ServerEvent| {
            if let Some(sink) = &self.events {
                sink(e);
            }
        };
        emit(&ServerEvent::Listening {
            addr: self.local_addr()?.to_string(),
        });
        let mut clients: Vec<JoinHandle<()>> = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            clients.retain(|h| !h.is_finished());
            let (stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    continue
                }
                Err(e) => {
                    // EMFILE and friends: log, back off, keep serving.
                    self.stats.log(self.echo, format!("accept: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            // IPv4 clients of a dual-stack listener, as themselves.
            let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
            self.stats.connections.fetch_add(1, Ordering::Relaxed);
            let stats = self.stats.clone();
            let stop = self.stop.clone();
            let echo = self.echo;
            let events = self.events.clone();
            emit(&ServerEvent::Connected {
                peer: peer.to_string(),
            });
            let spawned = std::thread::Builder::new()
                .name("ofl-bench-ctl".into())
                .spawn(move || {
                    let emit = |e: ServerEvent| {
                        if let Some(sink) = &events {
                            sink(&e);
                        }
                    };
                    match handle_client(stream, &stop, &stats, &peer.to_string(), &emit) {
                        Ok(()) => emit(ServerEvent::Disconnected {
                            peer: peer.to_string(),
                        }),
                        Err(e) => {
                            stats.errors.fetch_add(1, Ordering::Relaxed);
                            stats.log(echo, format!("client {peer}: {e}"));
                            emit(ServerEvent::Error {
                                peer: peer.to_string(),
                                message: e.to_string(),
                            });
                        }
                    }
                });
            match spawned {
                Ok(h) => clients.push(h),
                Err(e) => self
                    .stats
                    .log(self.echo, format!("client {peer}: no thread: {e}")),
            }
        }
        for h in clients {
            let _ = h.join();
        }
        emit(&ServerEvent::Stopped);
        Ok(())
    }

    /// Serves on a background thread; the handle stops it when dropped.
    pub fn spawn(self) -> Result<ServerHandle, BenchError> {
        let addr = self.local_addr()?;
        let stop = self.stop.clone();
        let stats = self.stats.clone();
        let thread = std::thread::Builder::new()
            .name("ofl-bench-srv".into())
            .spawn(move || {
                let _ = self.serve();
            })
            .map_err(|e| BenchError::io("spawning the server thread", e))?;
        Ok(ServerHandle {
            addr,
            stop,
            stats,
            thread: Some(thread),
        })
    }
}

/// A server running on a background thread.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The control address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's counters and log.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Whether the serving thread is still running.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[error("{0}")]
    Proto(#[from] ProtoError),
    #[error("{0}")]
    Refused(String),
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Proto(ProtoError::Io(e))
    }
}

fn refuse(stream: &mut TcpStream, message: String) -> ClientError {
    let _ = proto::write_frame(
        stream,
        &ServerMsg::Error {
            message: message.clone(),
        },
    );
    ClientError::Refused(message)
}

fn handle_client(
    mut stream: TcpStream,
    stop: &AtomicBool,
    stats: &ServerStats,
    peer: &str,
    emit: &dyn Fn(ServerEvent),
) -> Result<(), ClientError> {
    stream.set_nodelay(true).ok();
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let hello: ClientMsg = match proto::read_frame(&mut stream) {
        Ok(m) => m,
        Err(ProtoError::Closed) => return Err(ProtoError::Closed.into()),
        Err(e) => return Err(refuse(&mut stream, format!("bad hello: {e}"))),
    };
    if let Err(e) = proto::check_hello(&hello) {
        return Err(refuse(&mut stream, e.to_string()));
    }
    proto::write_frame(
        &mut stream,
        &ServerMsg::Welcome {
            version: proto::PROTOCOL_VERSION,
            host: HostInfo::collect(),
        },
    )?;
    // A dual-stack control socket sees IPv4 clients as ::ffff:a.b.c.d: the
    // data sockets then bind the plain IPv4 address, as they would behind
    // an IPv4 control socket.
    let local_ip = stream.local_addr()?.ip().to_canonical();
    loop {
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let msg: ClientMsg = match proto::read_frame(&mut stream) {
            Ok(m) => m,
            Err(ProtoError::Closed) => return Ok(()),
            Err(e @ ProtoError::Io(_)) => return Err(e.into()),
            Err(e) => return Err(refuse(&mut stream, format!("bad frame: {e}"))),
        };
        match msg {
            ClientMsg::Bye => return Ok(()),
            ClientMsg::Start { spec } => {
                if stop.load(Ordering::Relaxed) {
                    return Err(refuse(&mut stream, "the server is stopping".into()));
                }
                if let Err(why) = check_spec(&spec) {
                    return Err(refuse(&mut stream, why));
                }
                let mut test = match ServerTest::start(spec, local_ip) {
                    Ok(t) => t,
                    Err(e) => return Err(refuse(&mut stream, format!("setting up: {e}"))),
                };
                proto::write_frame(
                    &mut stream,
                    &ServerMsg::Ready {
                        data_port: test.data_port,
                        data_ports: test.data_ports.clone(),
                        settings: test.settings.clone(),
                    },
                )?;
                emit(ServerEvent::TestStarted {
                    peer: peer.into(),
                    test: test.spec.kind,
                    flows: test.spec.flows,
                    threads: test.settings.threads,
                    request: test.spec.request,
                    response: test.spec.response,
                    data_ports: test.data_ports.clone(),
                    engine: test.settings.engine.clone(),
                });
                let report = run_test(&mut stream, &mut test)?;
                stats.tests_completed.fetch_add(1, Ordering::Relaxed);
                emit(ServerEvent::TestFinished {
                    peer: peer.into(),
                    test: test.spec.kind,
                    transactions: report.transactions_total,
                    bytes: report.bytes_total,
                    packets: report.packets_total,
                    window_seconds: report.window.seconds,
                    flows_accepted: report.flows_accepted,
                    errors: report.errors,
                });
            }
            other => {
                return Err(refuse(
                    &mut stream,
                    format!("expected start or bye, got {}", proto::msg_name(&other)),
                ))
            }
        }
    }
}

/// Checks what a client asks for, before anything is allocated.
fn check_spec(s: &TestSpec) -> Result<(), String> {
    if s.flows == 0 || s.flows > 1_000_000 {
        return Err(format!("flows {} is outside 1..=1000000", s.flows));
    }
    if s.server_threads == 0 || s.server_threads > 1024 {
        return Err(format!(
            "server threads {} is outside 1..=1024",
            s.server_threads
        ));
    }
    let max = if s.kind.is_udp() {
        65536
    } else {
        MAX_RR_MESSAGE
    };
    if s.request == 0 || s.response == 0 || s.request > max || s.response > max {
        return Err(format!(
            "message sizes {}/{} are outside 1..={max}",
            s.request, s.response
        ));
    }
    if s.knobs.batch == 0 || s.knobs.batch > 1024 {
        return Err(format!("batch {} is outside 1..=1024", s.knobs.batch));
    }
    if !(s.expected_seconds.is_finite()
        && s.expected_seconds >= 0.0
        && s.expected_seconds < 86400.0)
    {
        return Err("expected duration is not a number of seconds below a day".into());
    }
    if let Some(p) = &s.server_pin {
        if p.is_empty() || p.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
            return Err("server pin list is empty or names a cpu beyond CPU_SETSIZE".into());
        }
    }
    Ok(())
}

fn run_test(stream: &mut TcpStream, test: &mut ServerTest) -> Result<ServerReport, ClientError> {
    let limit = Duration::from_secs_f64(test.spec.expected_seconds) + Duration::from_secs(30);
    stream.set_read_timeout(Some(limit))?;
    loop {
        let msg: ClientMsg = match proto::read_frame(stream) {
            Ok(m) => m,
            Err(ProtoError::Closed) => {
                return Err(ClientError::Refused("the client vanished mid-test".into()));
            }
            Err(e @ ProtoError::Io(_)) => return Err(e.into()),
            Err(e) => return Err(refuse(stream, format!("bad frame mid-test: {e}"))),
        };
        match msg {
            ClientMsg::Mark { mark } => {
                test.mark(mark);
                proto::write_frame(stream, &ServerMsg::Marked)?;
            }
            ClientMsg::Finish => {
                let report = test.finish();
                proto::write_frame(
                    stream,
                    &ServerMsg::Report {
                        report: report.clone(),
                    },
                )?;
                return Ok(report);
            }
            other => {
                return Err(refuse(
                    stream,
                    format!("expected mark or finish, got {}", proto::msg_name(&other)),
                ))
            }
        }
    }
}

struct Shared {
    slots: Vec<Slot>,
    tids: Mutex<Vec<i32>>,
    pins: Mutex<Vec<Vec<usize>>>,
    sockopts: Mutex<(Option<u32>, Option<u32>, Option<bool>)>,
    accepted: AtomicU64,
    stop: AtomicBool,
    errors: Mutex<Vec<String>>,
    /// Every accepted data connection, so that a stop can shut them down
    /// and wake workers blocked in recv (they wait without a timeout).
    conns: Mutex<Vec<Arc<TcpStream>>>,
    /// TCP_INFO of the server's side of every flow, added by each worker
    /// as it stops (only a worker can read sockets of its private table).
    tcp_infos: Mutex<Vec<FlowTcpInfo>>,
}

impl Shared {
    fn register_worker(&self, pin: Option<&[usize]>, index: usize) {
        if let Ok(mut t) = self.tids.lock() {
            t.push(sys::gettid());
        }
        if let Some(p) = pin {
            let cpu = p[index % p.len()];
            if let Err(e) = sys::set_affinity(&[cpu]) {
                self.error(format!("worker {index}: pinning to cpu {cpu}: {e}"));
            }
        }
        if let (Ok(mut pins), Ok(aff)) = (self.pins.lock(), sys::get_affinity()) {
            pins.push(aff);
        }
    }

    fn record_sockopts(&self, fd: std::os::fd::RawFd, tcp: bool) {
        if let Ok(mut s) = self.sockopts.lock() {
            if s.0.is_none() {
                *s = sock::read_back(fd, tcp);
            }
        }
    }

    fn error(&self, e: String) {
        if let Ok(mut v) = self.errors.lock() {
            if v.len() < 100 {
                v.push(e);
            }
        }
    }
}

struct Snapshot {
    at: Instant,
    counts: (u64, u64, u64),
    cpu: ProcessCpu,
}

struct ServerTest {
    spec: TestSpec,
    shared: Arc<Shared>,
    setup: Option<JoinHandle<()>>,
    data_port: u16,
    data_ports: Vec<u16>,
    settings: ServerSettings,
    udp_start: Option<UdpCounters>,
    start: Option<Snapshot>,
    end: Option<Snapshot>,
}

enum Data {
    Tcp(Vec<TcpListener>),
    Udp(Vec<UdpSocket>),
}

/// Most TCP data listeners one test may ask for.
pub const MAX_LISTENERS: u32 = 64;

impl ServerTest {
    fn start(spec: TestSpec, ip: IpAddr) -> Result<Self, io::Error> {
        let threads = spec.server_threads as usize;
        let shared = Arc::new(Shared {
            slots: (0..threads).map(|_| Slot::default()).collect(),
            tids: Mutex::new(Vec::new()),
            pins: Mutex::new(Vec::new()),
            sockopts: Mutex::new((None, None, None)),
            accepted: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
            conns: Mutex::new(Vec::new()),
            tcp_infos: Mutex::new(Vec::new()),
        });
        let any = SocketAddr::new(ip, 0);
        let holds_flows = matches!(spec.kind, TestKind::TcpRr | TestKind::TcpStream);
        let split = if holds_flows {
            sys::plan_descriptors(u64::from(spec.flows), threads as u64, "server")
                .map_err(io::Error::other)?
        } else {
            false
        };
        let (data, port, udp_sockets, ports) = if spec.kind.is_udp() {
            let n = if spec.knobs.reuseport { threads } else { 1 };
            let first = sock::udp_bind(any, &spec.knobs, spec.knobs.reuseport)?;
            let port = first.local_addr()?.port();
            let mut socks = vec![first];
            for _ in 1..n {
                socks.push(sock::udp_bind(
                    SocketAddr::new(ip, port),
                    &spec.knobs,
                    true,
                )?);
            }
            (Data::Udp(socks), port, n as u32, Vec::new())
        } else {
            let n = if spec.kind == TestKind::TcpCrr {
                1
            } else {
                spec.listeners.clamp(1, MAX_LISTENERS)
            };
            let backlog = spec.flows.min(65535) as i32;
            let mut listeners = Vec::new();
            let mut ports = Vec::new();
            for _ in 0..n {
                let l = sock::tcp_listen(any, &spec.knobs, backlog)?;
                ports.push(l.local_addr()?.port());
                listeners.push(l);
            }
            (Data::Tcp(listeners), ports[0], 0, ports)
        };
        let one_per_thread = spec.flows as usize <= threads;
        let engine = match spec.kind {
            TestKind::TcpRr | TestKind::TcpStream if one_per_thread => "blocking",
            TestKind::TcpCrr | TestKind::UdpRr => "blocking",
            TestKind::UdpStream if spec.knobs.batch > 1 => "recvmmsg",
            TestKind::UdpStream => "recvmsg",
            _ => "epoll",
        };
        let settings = ServerSettings {
            threads: threads as u32,
            engine: engine.into(),
            udp_sockets,
            per_thread_fd_tables: split,
        };
        let udp_start = if spec.kind.is_udp() {
            cpu::udp_counters().ok()
        } else {
            None
        };
        let sh = shared.clone();
        let sp = spec.clone();
        let setup = std::thread::Builder::new()
            .name("ofl-bench-setup".into())
            .spawn(move || setup_and_run(sp, data, sh, split))?;
        Ok(ServerTest {
            spec,
            shared,
            setup: Some(setup),
            data_port: port,
            data_ports: ports,
            settings,
            udp_start,
            start: None,
            end: None,
        })
    }

    fn snapshot(&self) -> Snapshot {
        let tids = self
            .shared
            .tids
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        Snapshot {
            at: Instant::now(),
            counts: engine::sum_slots(&self.shared.slots),
            cpu: cpu::threads_cpu(&tids),
        }
    }

    fn mark(&mut self, mark: Mark) {
        let snap = self.snapshot();
        match mark {
            Mark::WindowStart => self.start = Some(snap),
            Mark::WindowEnd => self.end = Some(snap),
        }
    }

    fn stop_and_join(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Ok(conns) = self.shared.conns.lock() {
            for c in conns.iter() {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        }
        if let Some(h) = self.setup.take() {
            if h.join().is_err() {
                self.shared.error("a server worker panicked".into());
            }
        }
    }

    fn finish(&mut self) -> ServerReport {
        self.stop_and_join();
        let (txn, bytes, packets) = engine::sum_slots(&self.shared.slots);
        let window = match (&self.start, &self.end) {
            (Some(a), Some(b)) => WindowCounts {
                transactions: b.counts.0.saturating_sub(a.counts.0),
                bytes: b.counts.1.saturating_sub(a.counts.1),
                packets: b.counts.2.saturating_sub(a.counts.2),
                seconds: b.at.duration_since(a.at).as_secs_f64(),
            },
            _ => WindowCounts::default(),
        };
        let cpu = match (&self.start, &self.end) {
            (Some(a), Some(b)) => b.cpu.since(&a.cpu),
            _ => ProcessCpu::default(),
        };
        let udp = match (self.udp_start, cpu::udp_counters().ok()) {
            (Some(a), Some(b)) => Some(b.since(&a)),
            _ => None,
        };
        let (sndbuf, rcvbuf, nodelay) = self.shared.sockopts.lock().map(|s| *s).unwrap_or_default();
        let tcp_info = self.shared.tcp_infos.lock().ok().and_then(|mut v| {
            // Flow numbers on this side follow the clients' ports, which
            // is the order the client connected them in.
            let mut flows = std::mem::take(&mut *v);
            flows.sort_by_key(|f| f.peer_port);
            for (i, f) in flows.iter_mut().enumerate() {
                f.flow = i as u32;
            }
            TcpInfoReport::from_flows(flows).map(Box::new)
        });
        ServerReport {
            tcp_info,
            transactions_total: txn,
            bytes_total: bytes,
            packets_total: packets,
            window,
            cpu,
            udp,
            sndbuf,
            rcvbuf,
            nodelay,
            pin_used: self
                .shared
                .pins
                .lock()
                .map(|p| p.clone())
                .unwrap_or_default(),
            flows_accepted: self.shared.accepted.load(Ordering::Relaxed),
            errors: self
                .shared
                .errors
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
        }
    }
}

impl Drop for ServerTest {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn rr_params(spec: &TestSpec) -> RrParams {
    RrParams {
        request: spec.request as usize,
        response: spec.response as usize,
        rate_interval: None,
        udp_timeout: Duration::from_millis(200),
        burst: spec.burst.max(1) as usize,
    }
}

/// The body of one server worker.
type Job = Box<dyn FnOnce(&Shared, &Slot) -> Result<(), String> + Send>;

/// Accepts the flows (TCP), spawns the workers, waits for them.
fn setup_and_run(spec: TestSpec, data: Data, sh: Arc<Shared>, split: bool) {
    if let Ok(mut t) = sh.tids.lock() {
        t.push(sys::gettid());
    }
    let threads = spec.server_threads as usize;
    let pin = spec.server_pin.clone();
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let spawn = |i: usize, f: Job| {
        let sh = sh.clone();
        let pin = pin.clone();
        std::thread::Builder::new()
            .name(format!("ofl-bench-s{i}"))
            .spawn(move || {
                sh.register_worker(pin.as_deref(), i);
                if let Err(e) = f(&sh, &sh.slots[i]) {
                    sh.error(format!("worker {i}: {e}"));
                }
                // Stay alive until the test ends so that this thread's CPU
                // time can still be read when the window's end is sampled.
                while !sh.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
    };
    match data {
        Data::Udp(socks) => {
            let socks: Vec<Arc<UdpSocket>> = socks.into_iter().map(Arc::new).collect();
            if let Some(s) = socks.first() {
                sh.record_sockopts(s.as_raw_fd(), false);
            }
            for i in 0..threads {
                let s = socks[i % socks.len()].clone();
                let spec = spec.clone();
                let job: Job = Box::new(move |sh, slot| {
                    let batch = spec.knobs.batch as usize;
                    if spec.kind == TestKind::UdpRr {
                        engine::server_udp_rr(&s, &rr_params(&spec), batch, &sh.stop, slot)
                    } else {
                        let size = if spec.knobs.udp_gro {
                            65536
                        } else {
                            spec.response.max(spec.request) as usize
                        };
                        let coalesce = spec
                            .knobs
                            .rx_usecs
                            .map(|us| Duration::from_micros(us.into()));
                        engine::udp_stream_recv(&s, batch, size, coalesce, &sh.stop, slot)
                    }
                });
                match spawn(i, job) {
                    Ok(h) => workers.push(h),
                    Err(e) => sh.error(format!("spawning worker {i}: {e}")),
                }
            }
        }
        Data::Tcp(mut listeners) if spec.kind == TestKind::TcpCrr => {
            let listener = Arc::new(listeners.swap_remove(0));
            for i in 0..threads {
                let l = listener.clone();
                let spec = spec.clone();
                let job: Job = Box::new(move |sh, slot| {
                    engine::server_crr(&l, &spec.knobs, &rr_params(&spec), &sh.stop, slot)
                });
                match spawn(i, job) {
                    Ok(h) => workers.push(h),
                    Err(e) => sh.error(format!("spawning worker {i}: {e}")),
                }
            }
        }
        Data::Tcp(listeners) if split => {
            for l in &listeners {
                if let Err(e) = l.set_nonblocking(true) {
                    sh.error(format!("O_NONBLOCK on a listener: {e}"));
                    return;
                }
            }
            // Each worker gets a descriptor table of its own and accepts
            // its share of the flows there (see sys::plan_descriptors). The
            // listeners stay owned here: workers use their copies of the
            // same descriptor numbers, and never close them.
            let fds: Vec<RawFd> = listeners.iter().map(|l| l.as_raw_fd()).collect();
            let flows = spec.flows as usize;
            for i in 0..threads {
                let quota = flows / threads + usize::from(i < flows % threads);
                if quota == 0 {
                    continue;
                }
                let spec = spec.clone();
                let fds = fds.clone();
                let job: Job = Box::new(move |sh, slot| {
                    sys::unshare_fd_table().map_err(|e| format!("unshare(CLONE_FILES): {e}"))?;
                    let conns = accept_flows(&fds, quota, &spec, sh, false)?;
                    tcp_job(&spec, &conns, sh, slot, true)
                });
                match spawn(i, job) {
                    Ok(h) => workers.push(h),
                    Err(e) => sh.error(format!("spawning worker {i}: {e}")),
                }
            }
            for w in workers {
                if w.join().is_err() {
                    sh.error("a worker panicked".into());
                }
            }
            drop(listeners);
            return;
        }
        Data::Tcp(listeners) => {
            for l in &listeners {
                if let Err(e) = l.set_nonblocking(true) {
                    sh.error(format!("O_NONBLOCK on a listener: {e}"));
                    return;
                }
            }
            let fds: Vec<RawFd> = listeners.iter().map(|l| l.as_raw_fd()).collect();
            let conns = match accept_flows(&fds, spec.flows as usize, &spec, &sh, true) {
                Ok(c) => c,
                Err(e) => {
                    sh.error(e);
                    Vec::new()
                }
            };
            drop(listeners);
            let mut per_worker: Vec<Vec<Arc<TcpStream>>> =
                (0..threads).map(|_| Vec::new()).collect();
            for (n, c) in conns.into_iter().enumerate() {
                per_worker[n % threads].push(c);
            }
            for (i, conns) in per_worker.into_iter().enumerate() {
                if conns.is_empty() {
                    continue;
                }
                let spec = spec.clone();
                let job: Job = Box::new(move |sh, slot| tcp_job(&spec, &conns, sh, slot, false));
                match spawn(i, job) {
                    Ok(h) => workers.push(h),
                    Err(e) => sh.error(format!("spawning worker {i}: {e}")),
                }
            }
        }
    }
    for w in workers {
        if w.join().is_err() {
            sh.error("a worker panicked".into());
        }
    }
}

/// Accepts `quota` data connections from the listeners (descriptors of the
/// calling thread's table). `shared_table`: the connections are registered
/// so that a stop can shut them down from another thread; in a private
/// table their numbers mean nothing elsewhere, so they are not.
fn accept_flows(
    listeners: &[RawFd],
    quota: usize,
    spec: &TestSpec,
    sh: &Shared,
    shared_table: bool,
) -> Result<Vec<Arc<TcpStream>>, String> {
    let ep = sys::Epoll::new().map_err(|e| format!("epoll_create: {e}"))?;
    for (i, &fd) in listeners.iter().enumerate() {
        ep.add(fd, sys::EPOLLIN, i as u64)
            .map_err(|e| format!("epoll_ctl on a listener: {e}"))?;
    }
    let mut events = sys::event_buffer(64);
    let mut out = Vec::with_capacity(quota);
    while out.len() < quota && !sh.stop.load(Ordering::Relaxed) {
        let n = ep
            .wait(&mut events, 100)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..n] {
            let fd = listeners[sys::event_token(ev) as usize];
            while out.len() < quota {
                let s = match sys::accept_nonblocking(fd) {
                    Ok(s) => s,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::Interrupted
                                | io::ErrorKind::ConnectionAborted
                        ) =>
                    {
                        break
                    }
                    Err(e) => {
                        return Err(format!(
                            "accepting data connection {} of {quota}: {e}",
                            out.len() + 1
                        ))
                    }
                };
                if let Err(e) = sock::apply_tcp(&s, &spec.knobs) {
                    sh.error(format!("socket options: {e}"));
                }
                sh.record_sockopts(s.as_raw_fd(), true);
                let s = Arc::new(s);
                if shared_table {
                    if let Ok(mut all) = sh.conns.lock() {
                        all.push(s.clone());
                    }
                }
                out.push(s);
                sh.accepted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(out)
}

/// Runs a worker's TCP connections. `nonblocking_only`: never block in a
/// syscall (a stop cannot shut down sockets of a private table, so the
/// worker must see the flag within its poll interval).
fn tcp_job(
    spec: &TestSpec,
    conns: &[Arc<TcpStream>],
    sh: &Shared,
    slot: &Slot,
    nonblocking_only: bool,
) -> Result<(), String> {
    // Ports now, while every flow is connected (a peer that has closed by
    // the time TCP_INFO is read has no address any more).
    let ports: Vec<(u16, Option<u16>)> = conns
        .iter()
        .map(|c| {
            let local = c.local_addr().map(|a| a.port()).unwrap_or(0);
            (local, c.peer_addr().ok().map(|a| a.port()))
        })
        .collect();
    let result = tcp_engine(spec, conns, sh, slot, nonblocking_only);
    // The server's side of each flow, read as the worker stops: just after
    // the window (the client stops the test once it has read its own
    // side's), before the sockets close.
    let infos: Vec<FlowTcpInfo> = conns
        .iter()
        .zip(ports)
        .filter_map(|(c, (local, peer))| {
            let raw = sys::tcp_info(c.as_raw_fd()).ok()?;
            let mut f = FlowTcpInfo::from_raw(0, local, &raw);
            f.peer_port = peer;
            Some(f)
        })
        .collect();
    if let Ok(mut all) = sh.tcp_infos.lock() {
        all.extend(infos);
    }
    result
}

fn tcp_engine(
    spec: &TestSpec,
    conns: &[Arc<TcpStream>],
    sh: &Shared,
    slot: &Slot,
    nonblocking_only: bool,
) -> Result<(), String> {
    let fds: Vec<_> = conns.iter().map(|c| c.as_raw_fd()).collect();
    let one = conns.len() == 1 && !nonblocking_only;
    let set_nb = || -> Result<(), String> {
        for c in conns {
            c.set_nonblocking(true).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    match (spec.kind, spec.direction) {
        (TestKind::TcpStream, dir) if one => {
            let send = dir == Direction::ServerToClient;
            let size = if send { spec.request } else { spec.response };
            engine::stream_blocking(fds[0], send, size as usize, StopWhen::Flag(&sh.stop), slot)
        }
        (TestKind::TcpStream, Direction::ClientToServer) => {
            set_nb()?;
            engine::stream_recv(&fds, spec.response as usize, StopWhen::Flag(&sh.stop), slot)
        }
        (TestKind::TcpStream, Direction::ServerToClient) => {
            set_nb()?;
            engine::stream_send(&fds, spec.request as usize, StopWhen::Flag(&sh.stop), slot)
        }
        _ if one => engine::server_rr_blocking(&conns[0], &rr_params(spec), &sh.stop, slot),
        _ => engine::server_rr_epoll(conns, &rr_params(spec), &sh.stop, slot),
    }
}
