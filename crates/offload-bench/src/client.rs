//! The client: negotiates a test with the server, opens the flows, releases
//! every worker at once, samples CPU and counters at the edges of the
//! measurement window (telling the server to do the same), and assembles the
//! result. Also repeated runs and interleaved A/B comparisons.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::auth::{self, Secret};
use crate::config::{ClientConfig, Direction, TestKind};
use crate::cpu::{self, MachineCpu, ProcessCpu};
use crate::engine::{self, Outcome, RrParams, Slot, StopWhen, UdpSendParams, Window};
use crate::error::BenchError;
use crate::proto::{self, ClientMsg, Mark, ProtoError, ServerMsg};
use crate::report::{
    BenchResult, CompareReport, Counts, CpuReport, FlowTcpInfo, HostInfo, IntervalLine, LatencyUs,
    RunsReport, ServerReport, ServerSettings, Settings, TcpInfoReport, UdpReport,
};
use crate::sock;
use crate::sys;
use offload_report::stats;

/// A callback for per-interval lines.
pub type IntervalFn<'a> = &'a mut dyn FnMut(&IntervalLine);

struct Control {
    stream: TcpStream,
    peer: String,
}

impl Control {
    fn connect(addr: SocketAddr, read_timeout: Duration) -> Result<Self, BenchError> {
        let peer = addr.to_string();
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| BenchError::io(format!("connecting to the server {peer}"), e))?;
        stream.set_nodelay(true).ok();
        let setup = |s: &TcpStream| -> std::io::Result<()> {
            s.set_read_timeout(Some(read_timeout))?;
            s.set_write_timeout(Some(Duration::from_secs(10)))
        };
        setup(&stream).map_err(|e| BenchError::io("control socket timeouts", e))?;
        Ok(Control { stream, peer })
    }

    fn err(&self, source: ProtoError) -> BenchError {
        BenchError::Control {
            peer: self.peer.clone(),
            source,
        }
    }

    fn send(&mut self, msg: &ClientMsg) -> Result<(), BenchError> {
        proto::write_frame(&mut self.stream, msg).map_err(|e| self.err(e))
    }

    fn recv(&mut self, expected: &'static str) -> Result<ServerMsg, BenchError> {
        match proto::read_frame::<_, ServerMsg>(&mut self.stream) {
            Ok(ServerMsg::Error { message }) => Err(BenchError::Server {
                peer: self.peer.clone(),
                message,
            }),
            Ok(m) => Ok(m),
            Err(ProtoError::Closed) => Err(self.err(ProtoError::Unexpected {
                expected,
                got: "end of connection (the server went away)".into(),
            })),
            Err(e) => Err(self.err(e)),
        }
    }

    fn unexpected(&self, expected: &'static str, got: &ServerMsg) -> BenchError {
        self.err(ProtoError::Unexpected {
            expected,
            got: format!("{got:?}").chars().take(80).collect(),
        })
    }
}

/// Hello, and the challenge of a server that requires authentication;
/// returns what the server tells of its host.
fn handshake(ctl: &mut Control, secret: Option<&Secret>) -> Result<HostInfo, BenchError> {
    ctl.send(&ClientMsg::Hello {
        magic: proto::MAGIC.into(),
        version: proto::PROTOCOL_VERSION,
    })?;
    let (host, proof, nonces) = match ctl.recv("welcome or challenge")? {
        ServerMsg::Welcome { host, proof, .. } => (host, proof, None),
        ServerMsg::Challenge { nonce } => {
            let Some(secret) = secret else {
                return Err(BenchError::Server {
                    peer: ctl.peer.clone(),
                    message: format!(
                        "this server requires authentication: give its shared secret with \
                         --auth-file FILE or {}",
                        auth::SECRET_ENV
                    ),
                });
            };
            let server_nonce = auth::unhex(&nonce)
                .filter(|n| n.len() == auth::NONCE_LEN)
                .ok_or_else(|| {
                    ctl.err(ProtoError::Unexpected {
                        expected: "a 32-byte hex nonce",
                        got: nonce.chars().take(80).collect(),
                    })
                })?;
            let client_nonce = auth::random_bytes::<{ auth::NONCE_LEN }>()?;
            ctl.send(&ClientMsg::Auth {
                nonce: auth::hex(&client_nonce),
                mac: secret.client_mac(&server_nonce, &client_nonce),
            })?;
            match ctl.recv("welcome")? {
                ServerMsg::Welcome { host, proof, .. } => {
                    (host, proof, Some((server_nonce, client_nonce)))
                }
                other => return Err(ctl.unexpected("welcome", &other)),
            }
        }
        other => return Err(ctl.unexpected("welcome", &other)),
    };
    if let Some(secret) = secret {
        let proven = match (&nonces, &proof) {
            (Some((s, c)), Some(p)) => secret.check_server_proof(s, c, p),
            _ => false,
        };
        if !proven {
            return Err(BenchError::Server {
                peer: ctl.peer.clone(),
                message: if nonces.is_none() {
                    "the server does not authenticate (it was started without a secret), \
                     but this client was given one: refusing to run a test against it"
                        .into()
                } else {
                    "the server could not prove it holds the shared secret".into()
                },
            });
        }
    }
    Ok(host)
}

/// What a worker reports after setting up its flows.
struct Setup {
    worker: usize,
    /// The worker's flow sockets, for the watchdog's shutdown.
    fds: Vec<RawFd>,
    tid: i32,
    pin_used: Vec<usize>,
    sockopts: (Option<u32>, Option<u32>, Option<bool>),
    result: Result<(), String>,
}

struct CpuSnap {
    at: Instant,
    machine: MachineCpu,
    threads: ProcessCpu,
    counts: (u64, u64, u64),
}

fn snap(tids: &[i32], slots: &[Slot]) -> Result<CpuSnap, BenchError> {
    Ok(CpuSnap {
        at: Instant::now(),
        machine: cpu::machine_cpu()?,
        threads: cpu::threads_cpu(tids),
        counts: engine::sum_slots(slots),
    })
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

enum Flows {
    None,
    Tcp(Vec<TcpStream>),
    Udp(Vec<UdpSocket>),
}

impl Flows {
    fn fds(&self) -> Vec<RawFd> {
        match self {
            Flows::None => Vec::new(),
            Flows::Tcp(v) => v.iter().map(|s| s.as_raw_fd()).collect(),
            Flows::Udp(v) => v.iter().map(|s| s.as_raw_fd()).collect(),
        }
    }
}

/// Opens flows `first..first + n`; TCP flow i connects to listener
/// i % listeners (the server's data ports).
fn open_flows(
    cfg: &ClientConfig,
    data: &[SocketAddr],
    first: usize,
    n: usize,
    token: &[u8; proto::TOKEN_LEN],
) -> Result<Flows, String> {
    let knobs = &cfg.spec.knobs;
    match cfg.spec.kind {
        TestKind::TcpCrr => Ok(Flows::None),
        TestKind::TcpRr | TestKind::TcpStream => (first..first + n)
            .map(|i| {
                let to = data[i % data.len()];
                let s = sock::tcp_connect(to, knobs).map_err(|e| {
                    let hint = match e.raw_os_error() {
                        Some(libc::EMFILE) | Some(libc::ENFILE) => {
                            " (open-file limit: see RLIMIT_NOFILE)"
                        }
                        Some(libc::EADDRNOTAVAIL) => {
                            " (ephemeral ports exhausted: see net.ipv4.ip_local_port_range)"
                        }
                        _ => "",
                    };
                    format!("connecting flow {} to {to}: {e}{hint}", i + 1)
                })?;
                // The server counts the connection as a flow of this test
                // only once it has read the token.
                std::io::Write::write_all(&mut &s, &proto::tcp_preamble(token)).map_err(|e| {
                    format!("flow {} presenting the test's token to {to}: {e}", i + 1)
                })?;
                Ok(s)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Flows::Tcp),
        TestKind::UdpRr | TestKind::UdpStream => (first..first + n)
            .map(|i| {
                let to = data[0];
                let s =
                    sock::udp_connect(to, knobs).map_err(|e| format!("udp socket to {to}: {e}"))?;
                // udp-rr: the server answers only flows that joined.
                if cfg.spec.kind == TestKind::UdpRr {
                    engine::udp_join(&s, token)
                        .map_err(|e| format!("flow {} joining the test at {to}: {e}", i + 1))?;
                }
                Ok(s)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Flows::Udp),
    }
}

fn run_worker(
    cfg: &ClientConfig,
    data: SocketAddr,
    token: &[u8; proto::TOKEN_LEN],
    private_fds: bool,
    flows: &Flows,
    w: &Window,
    slot: &Slot,
) -> Result<Outcome, String> {
    let spec = &cfg.spec;
    let n_flows = match flows {
        Flows::Tcp(v) => v.len(),
        Flows::Udp(v) => v.len(),
        Flows::None => 1,
    };
    let rr = RrParams {
        request: spec.request as usize,
        response: spec.response as usize,
        rate_interval: cfg
            .rate
            .map(|r| Duration::from_secs_f64(f64::from(spec.flows) / r)),
        udp_timeout: cfg.udp_timeout,
        burst: spec.burst.max(1) as usize,
    };
    let fds = flows.fds();
    let set_nb = |fds: &[RawFd]| -> Result<(), String> {
        for &fd in fds {
            sys::set_nonblocking(fd).map_err(|e| format!("O_NONBLOCK: {e}"))?;
        }
        Ok(())
    };
    match spec.kind {
        TestKind::TcpCrr => engine::client_crr(data, &spec.knobs, spec.close, token, &rr, w, slot),
        TestKind::TcpRr if rr.burst > 1 => {
            set_nb(&fds)?;
            engine::client_rr_burst(&fds, &rr, w, slot)
        }
        TestKind::TcpRr | TestKind::UdpRr if n_flows == 1 && !private_fds => {
            engine::client_rr_blocking(fds[0], spec.kind == TestKind::UdpRr, &rr, w, slot)
        }
        TestKind::TcpRr | TestKind::UdpRr => {
            set_nb(&fds)?;
            engine::client_rr_epoll(
                &fds,
                spec.kind == TestKind::UdpRr,
                &rr,
                cfg.in_flight.map(|k| k as usize),
                w,
                slot,
            )
        }
        TestKind::TcpStream if fds.len() == 1 && !private_fds => {
            let send = spec.direction == Direction::ClientToServer;
            let size = if send { spec.request } else { spec.response } as usize;
            engine::stream_blocking(fds[0], send, size, StopWhen::Deadline(w.we), slot)?;
            let mut o = Outcome::empty();
            o.total_txn = slot.txn.load(Ordering::Relaxed);
            Ok(o)
        }
        TestKind::TcpStream => {
            set_nb(&fds)?;
            match spec.direction {
                Direction::ClientToServer => engine::stream_send(
                    &fds,
                    spec.request as usize,
                    StopWhen::Deadline(w.we),
                    slot,
                )?,
                Direction::ServerToClient => engine::stream_recv(
                    &fds,
                    spec.response as usize,
                    StopWhen::Deadline(w.we),
                    slot,
                )?,
            }
            let mut o = Outcome::empty();
            o.total_txn = slot.txn.load(Ordering::Relaxed);
            Ok(o)
        }
        TestKind::UdpStream => {
            let Flows::Udp(socks) = flows else {
                return Err("udp-stream without UDP sockets".into());
            };
            let datagram = spec.request as usize;
            let segments = if spec.knobs.udp_gso.is_some() {
                (65507 / datagram).clamp(1, 64)
            } else {
                1
            };
            let p = UdpSendParams {
                datagram,
                segments,
                batch: spec.knobs.batch as usize,
                rate: cfg.rate.map(|r| r / f64::from(cfg.threads)),
            };
            engine::udp_stream_send(socks, &p, w, slot)
        }
    }
}

/// Runs one test against a server and returns its result.
pub fn run_once(
    cfg: &ClientConfig,
    on_interval: IntervalFn<'_>,
) -> Result<BenchResult, BenchError> {
    let mut cfg = cfg.clone();
    cfg.validate()?;
    if cfg.null {
        return run_null(&cfg, on_interval);
    }
    let (notes, private_fds) = plan_flows(&mut cfg)?;
    let expected = cfg.warmup + cfg.duration;
    let mut ctl = Control::connect(cfg.server, expected + Duration::from_secs(60))?;
    let server_host = handshake(&mut ctl, cfg.auth.as_ref())?;
    let client_host = HostInfo::collect();
    ctl.send(&ClientMsg::Start {
        spec: cfg.spec.clone(),
    })?;
    let (data_ports, server_settings, token) = match ctl.recv("ready")? {
        ServerMsg::Ready {
            data_port,
            data_ports,
            settings,
            token,
        } => {
            let ports = if data_ports.is_empty() {
                vec![data_port]
            } else {
                data_ports
            };
            (ports, settings, token)
        }
        other => return Err(ctl.unexpected("ready", &other)),
    };
    // Every data connection presents the test's token (and each udp-rr
    // flow joins with it): without it the server serves nothing.
    let token: [u8; proto::TOKEN_LEN] = match token {
        None => {
            return Err(ctl.err(ProtoError::Unexpected {
                expected: "the test's token in ready",
                got: "none".into(),
            }))
        }
        Some(t) => crate::auth::unhex(&t)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                ctl.err(ProtoError::Unexpected {
                    expected: "a 16-byte hex token",
                    got: t.chars().take(40).collect(),
                })
            })?,
    };
    let data_addrs: Arc<Vec<SocketAddr>> = Arc::new(
        data_ports
            .iter()
            .map(|&p| SocketAddr::new(cfg.server.ip(), p))
            .collect(),
    );
    let data = data_addrs[0];
    let threads = cfg.threads as usize;
    let slots: Arc<Vec<Slot>> = Arc::new((0..threads).map(|_| Slot::default()).collect());
    let timing: Arc<OnceLock<Option<Window>>> = Arc::new(OnceLock::new());
    let barrier = Arc::new(Barrier::new(threads + 1));
    // Workers wait here after their loop so that their threads still exist
    // (and their CPU time can be read) when the window's end is sampled.
    let done = Arc::new(Barrier::new(threads + 1));
    let finished = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<Setup>();
    let mut handles = Vec::with_capacity(threads);
    let cfg_arc = Arc::new(cfg.clone());
    for i in 0..threads {
        let flows = cfg.spec.flows as usize;
        let n = flows / threads + usize::from(i < flows % threads);
        let first = (0..i)
            .map(|j| flows / threads + usize::from(j < flows % threads))
            .sum::<usize>();
        let data_addrs = data_addrs.clone();
        let (cfg, slots, timing, barrier, tx, done) = (
            cfg_arc.clone(),
            slots.clone(),
            timing.clone(),
            barrier.clone(),
            tx.clone(),
            done.clone(),
        );
        let finished = finished.clone();
        let h = std::thread::Builder::new()
            .name(format!("ofl-bench-c{i}"))
            .spawn(move || -> Result<(Outcome, Vec<FlowTcpInfo>), String> {
                let mut result = Ok(());
                if let Some(p) = &cfg.pin {
                    let cpu = p[i % p.len()];
                    if let Err(e) = sys::set_affinity(&[cpu]) {
                        result = Err(format!("pinning to cpu {cpu}: {e}"));
                    }
                }
                if private_fds && result.is_ok() {
                    if let Err(e) = sys::unshare_fd_table() {
                        result = Err(format!("unshare(CLONE_FILES): {e}"));
                    }
                }
                let flows = match result
                    .clone()
                    .and_then(|()| open_flows(&cfg, &data_addrs, first, n, &token))
                {
                    Ok(f) => f,
                    Err(e) => {
                        result = Err(e);
                        Flows::None
                    }
                };
                let fds = flows.fds();
                let is_tcp = matches!(flows, Flows::Tcp(_));
                let sockopts = fds
                    .first()
                    .map(|&fd| sock::read_back(fd, is_tcp))
                    .unwrap_or_default();
                let _ = tx.send(Setup {
                    worker: i,
                    // Numbers of a private table mean nothing to the
                    // watchdog's thread: the engines then never block.
                    fds: if private_fds { Vec::new() } else { fds.clone() },
                    tid: sys::gettid(),
                    pin_used: sys::get_affinity().unwrap_or_default(),
                    sockopts,
                    result: result.clone(),
                });
                barrier.wait();
                let w = match (result, timing.get().copied().flatten()) {
                    (Ok(()), Some(w)) => w,
                    (Err(e), _) => return Err(e),
                    (Ok(()), None) => return Err("aborted before the start".into()),
                };
                let result = run_worker(&cfg, data, &token, private_fds, &flows, &w, &slots[i]);
                // TCP_INFO at the window's end, before the flows close.
                let info = match &flows {
                    Flows::Tcp(v) => v
                        .iter()
                        .enumerate()
                        .filter_map(|(j, s)| {
                            let raw = sys::tcp_info(s.as_raw_fd()).ok()?;
                            let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
                            let mut f = FlowTcpInfo::from_raw((first + j) as u32, port, &raw);
                            f.peer_port = s.peer_addr().ok().map(|a| a.port());
                            Some(f)
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                finished.fetch_add(1, Ordering::Relaxed);
                done.wait();
                result.map(|o| (o, info))
            })
            .map_err(|e| BenchError::io("spawning a client worker", e))?;
        handles.push(h);
    }
    drop(tx);
    let mut setups: Vec<Setup> = Vec::with_capacity(threads);
    let setup_limit = Duration::from_secs(60) + Duration::from_millis(u64::from(cfg.spec.flows));
    let mut first_err = None;
    for _ in 0..threads {
        match rx.recv_timeout(setup_limit) {
            Ok(s) => {
                if let (Err(e), None) = (&s.result, &first_err) {
                    first_err = Some(BenchError::Worker {
                        worker: s.worker,
                        message: e.clone(),
                    });
                }
                setups.push(s);
            }
            Err(_) => {
                first_err.get_or_insert(BenchError::Config(
                    "client workers did not set up in time".into(),
                ));
                break;
            }
        }
    }
    if let Some(e) = first_err {
        let _ = timing.set(None);
        if setups.len() == threads {
            barrier.wait();
            for h in handles {
                let _ = h.join();
            }
        }
        let _ = ctl.send(&ClientMsg::Finish);
        return Err(e);
    }
    setups.sort_by_key(|s| s.worker);
    let tids: Vec<i32> = setups.iter().map(|s| s.tid).collect();
    let start = Instant::now();
    let w = Window {
        start,
        ws: start + cfg.warmup,
        we: start + cfg.warmup + cfg.duration,
    };
    let _ = timing.set(Some(w));
    barrier.wait();

    let mut intervals = Vec::new();
    let sampled = sample_window(
        &cfg,
        &w,
        &tids,
        &slots,
        &mut ctl,
        &mut intervals,
        on_interval,
    );
    // Watchdog: TCP workers block in recv without a timeout (a timeout
    // would cost a kernel timer per transaction). A peer that stops
    // answering without closing would hold them forever, so past a grace
    // period, or at once if the control connection failed, their sockets
    // are shut down, which ends the blocking calls with an error.
    let limit = w.we + Duration::from_secs(10);
    while finished.load(Ordering::Relaxed) < threads {
        if sampled.is_err() || Instant::now() > limit {
            for s in &setups {
                for &fd in &s.fds {
                    let _ = sys::shutdown(fd);
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done.wait();
    let (s0, s1) = match sampled {
        Ok(x) => x,
        Err(e) => {
            for h in handles {
                let _ = h.join();
            }
            return Err(e);
        }
    };
    let mut outcomes = Vec::with_capacity(threads);
    let mut tcp_flows = Vec::new();
    let mut worker_err = None;
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok((o, info))) => {
                outcomes.push(o);
                tcp_flows.extend(info);
            }
            Ok(Err(message)) => {
                worker_err.get_or_insert(BenchError::Worker { worker: i, message });
            }
            Err(_) => {
                worker_err.get_or_insert(BenchError::Worker {
                    worker: i,
                    message: "panicked".into(),
                });
            }
        }
    }
    ctl.send(&ClientMsg::Finish)?;
    let report = match ctl.recv("report")? {
        ServerMsg::Report { report } => report,
        other => return Err(ctl.unexpected("report", &other)),
    };
    let _ = ctl.send(&ClientMsg::Bye);
    if let Some(e) = worker_err {
        return Err(e);
    }
    let final_counts = engine::sum_slots(&slots);
    let ctx = Compose {
        cfg: &cfg,
        w,
        s0,
        s1,
        outcomes,
        report,
        setups,
        final_counts,
        client_host,
        server_host,
        server_settings,
        intervals,
        engine: engine_name(&cfg),
        tcp_flows,
        notes,
    };
    Ok(compose(ctx))
}

/// Fits a run to the machine before anything is opened: raises
/// RLIMIT_NOFILE for the flows (or, where it cannot be raised, gives each
/// worker a descriptor table of its own, adding workers until each share
/// fits), and asks the server for enough listeners that the client's
/// ephemeral ports suffice. Returns notes for the user and whether workers
/// use private descriptor tables.
fn plan_flows(cfg: &mut ClientConfig) -> Result<(Vec<String>, bool), BenchError> {
    let mut notes = Vec::new();
    let kind = cfg.spec.kind;
    if kind == TestKind::TcpCrr {
        return Ok((notes, false));
    }
    let flows = u64::from(cfg.spec.flows);
    let private = match sys::plan_descriptors(flows, u64::from(cfg.threads), "client") {
        Ok(p) => p,
        Err(why) => {
            let soft = sys::fd_limits().map(|l| l.0).unwrap_or(1024);
            let per = soft.saturating_sub(sys::FD_MARGIN).max(1);
            let threads = flows.div_ceil(per);
            if threads > 1024 {
                return Err(BenchError::Config(why));
            }
            notes.push(format!(
                "{flows} flows do not fit the open-file limit ({soft}, which this process \
                 cannot raise) in one descriptor table: running {threads} client threads \
                 (asked {}), each holding its flows in a table of its own",
                cfg.threads
            ));
            cfg.threads = threads as u32;
            cfg.spec.server_threads = cfg.spec.server_threads.max(threads as u32);
            sys::plan_descriptors(flows, threads, "client").map_err(BenchError::Config)?
        }
    };
    if private && notes.is_empty() {
        let soft = sys::fd_limits().map(|l| l.0).unwrap_or(0);
        notes.push(format!(
            "the open-file limit ({soft}) cannot be raised for {flows} flows: each client \
             thread holds its flows in a descriptor table of its own"
        ));
    }
    if matches!(kind, TestKind::TcpRr | TestKind::TcpStream) {
        let ports = local_port_range().unwrap_or(28_232);
        let per_listener = (ports * 9 / 10).max(1);
        cfg.spec.listeners = cfg
            .spec
            .flows
            .div_ceil(per_listener)
            .clamp(1, crate::server::MAX_LISTENERS);
        if cfg.spec.listeners > 1 {
            notes.push(format!(
                "{flows} flows from one address exceed the {ports} ephemeral ports of \
                 net.ipv4.ip_local_port_range towards one port: the server listens on {} ports",
                cfg.spec.listeners
            ));
        }
    }
    Ok((notes, private))
}

/// Size of the calling thread's namespace's ephemeral port range.
fn local_port_range() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_ascii_whitespace().map(|v| v.parse::<u32>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (hi >= lo).then(|| hi - lo + 1)
}

fn engine_name(cfg: &ClientConfig) -> String {
    let one = cfg.spec.flows == cfg.threads;
    match cfg.spec.kind {
        _ if cfg.null => "null",
        TestKind::TcpCrr => "blocking",
        TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpStream if one => "blocking",
        TestKind::UdpStream if cfg.spec.knobs.batch > 1 => "sendmmsg",
        TestKind::UdpStream => "send",
        _ => "epoll",
    }
    .into()
}

/// Sleeps through the run, sampling at the window's edges and at every
/// interval tick.
fn sample_window(
    cfg: &ClientConfig,
    w: &Window,
    tids: &[i32],
    slots: &[Slot],
    ctl: &mut Control,
    intervals: &mut Vec<IntervalLine>,
    on_interval: IntervalFn<'_>,
) -> Result<(CpuSnap, CpuSnap), BenchError> {
    let mut s0 = None;
    let mut s1 = None;
    let tick = cfg.interval.filter(|t| !t.is_zero());
    let mut next_tick = tick.map(|t| w.start + t);
    let mut last = (w.start, (0u64, 0u64, 0u64));
    let msg_bytes = f64::from(cfg.spec.request) + f64::from(cfg.spec.response);
    loop {
        let mut target = None::<Instant>;
        let mut consider = |t: Instant| target = Some(target.map_or(t, |x: Instant| x.min(t)));
        if s0.is_none() {
            consider(w.ws);
        }
        if s1.is_none() {
            consider(w.we);
        }
        if let Some(t) = next_tick {
            consider(t);
        }
        let Some(t) = target else { break };
        sleep_until(t);
        let now = Instant::now();
        if s0.is_none() && now >= w.ws {
            s0 = Some(snap(tids, slots)?);
            ctl.send(&ClientMsg::Mark {
                mark: Mark::WindowStart,
            })?;
            expect_marked(ctl)?;
        }
        if s1.is_none() && now >= w.we {
            s1 = Some(snap(tids, slots)?);
            ctl.send(&ClientMsg::Mark {
                mark: Mark::WindowEnd,
            })?;
            expect_marked(ctl)?;
        }
        if let (Some(nt), Some(tk)) = (next_tick, tick) {
            if now >= nt {
                let c = engine::sum_slots(slots);
                let dt = now.duration_since(last.0).as_secs_f64().max(1e-9);
                let dtx = c.0.saturating_sub(last.1 .0) as f64;
                let bytes = if cfg.spec.kind.is_rr() {
                    dtx * msg_bytes
                } else {
                    c.1.saturating_sub(last.1 .1) as f64
                };
                let line = IntervalLine {
                    run: 1,
                    at_seconds: now.duration_since(w.start).as_secs_f64(),
                    warmup: last.0 < w.ws,
                    transactions_per_sec: dtx / dt,
                    gbit_per_sec: bytes * 8.0 / dt / 1e9,
                };
                on_interval(&line);
                intervals.push(line);
                last = (now, c);
                let next = nt + tk;
                next_tick = (next <= w.we + Duration::from_millis(1)).then_some(next);
            }
        }
    }
    match (s0, s1) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(BenchError::Config(
            "the measurement window was not sampled".into(),
        )),
    }
}

fn expect_marked(ctl: &mut Control) -> Result<(), BenchError> {
    match ctl.recv("marked")? {
        ServerMsg::Marked => Ok(()),
        other => Err(ctl.unexpected("marked", &other)),
    }
}

struct Compose<'a> {
    cfg: &'a ClientConfig,
    w: Window,
    s0: CpuSnap,
    s1: CpuSnap,
    outcomes: Vec<Outcome>,
    report: ServerReport,
    setups: Vec<Setup>,
    final_counts: (u64, u64, u64),
    client_host: HostInfo,
    server_host: HostInfo,
    server_settings: ServerSettings,
    intervals: Vec<IntervalLine>,
    engine: String,
    tcp_flows: Vec<FlowTcpInfo>,
    notes: Vec<String>,
}

fn compose(c: Compose<'_>) -> BenchResult {
    let cfg = c.cfg;
    let spec = &cfg.spec;
    let window_s = c.w.we.duration_since(c.w.ws).as_secs_f64();
    let machine = c.s1.machine.since(&c.s0.machine);
    let busy = machine.busy();
    let client_cpu = c.s1.threads.since(&c.s0.threads);
    let mut hist = engine::new_histogram();
    let (mut cw, mut ct, mut lost, mut send_errors) = (0u64, 0u64, 0u64, 0u64);
    for o in &c.outcomes {
        let _ = hist.add(&o.hist);
        cw += o.window_txn;
        ct += o.total_txn;
        lost += o.lost;
        send_errors += o.send_errors;
    }
    let r = &c.report;
    let client_window_s = c.s1.at.duration_since(c.s0.at).as_secs_f64().max(1e-9);
    let server_window_s = r.window.seconds.max(1e-9);
    let msg_bytes = f64::from(spec.request) + f64::from(spec.response);
    let (tps, gbit, pps, latency) = match spec.kind {
        TestKind::TcpRr | TestKind::TcpCrr | TestKind::UdpRr => {
            let tps = cw as f64 / window_s;
            let pps = if spec.kind == TestKind::UdpRr {
                2.0 * tps
            } else {
                0.0
            };
            (
                tps,
                tps * msg_bytes * 8.0 / 1e9,
                pps,
                LatencyUs::from_histogram(&hist),
            )
        }
        TestKind::TcpStream => {
            let bps = match spec.direction {
                Direction::ClientToServer => r.window.bytes as f64 / server_window_s,
                Direction::ServerToClient => {
                    c.s1.counts.1.saturating_sub(c.s0.counts.1) as f64 / client_window_s
                }
            };
            (
                bps / f64::from(spec.request.max(1)),
                bps * 8.0 / 1e9,
                0.0,
                None,
            )
        }
        TestKind::UdpStream => {
            let pps = r.window.packets as f64 / server_window_s;
            let gbit = r.window.bytes as f64 * 8.0 / server_window_s / 1e9;
            (pps, gbit, pps, None)
        }
    };
    let txns = tps * window_s;
    let per = |x: f64| if txns > 0.0 { x / txns } else { 0.0 };
    // Every percentage divides by the CPU time of the same /proc/stat
    // window (busy + idle over all CPUs), never by a wall-clock length
    // sampled at another instant: the parts add up and stay under 100%.
    let all_cpu_s = busy + machine.idle;
    let pct = |x: f64| {
        if all_cpu_s > 0.0 {
            (100.0 * x / all_cpu_s).clamp(0.0, 100.0)
        } else {
            0.0
        }
    };
    let machine_pct = pct(busy);
    let client_pct = pct(client_cpu.total);
    let server_pct = pct(c.report.cpu.total);
    let cpu = CpuReport {
        window_seconds: window_s,
        machine,
        machine_busy_seconds: busy,
        machine_utilization_percent: machine_pct,
        client_percent: client_pct,
        server_percent: server_pct,
        other_percent: (machine_pct - client_pct - server_pct).max(0.0),
        client: client_cpu,
        server: r.cpu,
        client_seconds_per_transaction: per(client_cpu.total),
        server_seconds_per_transaction: per(r.cpu.total),
    };
    // Transactions that can be in flight when the client stops: one per
    // flow, or the burst.
    let flows = u64::from(spec.flows) * u64::from(spec.burst.max(1));
    let (consistent, note) = match spec.kind {
        TestKind::TcpRr | TestKind::TcpCrr => {
            if r.transactions_total < ct {
                (
                    false,
                    Some(format!(
                        "server served {} < client completed {ct}",
                        r.transactions_total
                    )),
                )
            } else if r.transactions_total - ct > flows {
                (
                    false,
                    Some(format!(
                        "server served {} > client {ct} + {flows} in flight",
                        r.transactions_total
                    )),
                )
            } else {
                window_check(cw, r.window.transactions, flows)
            }
        }
        TestKind::UdpRr => {
            if r.transactions_total + lost < ct {
                (
                    false,
                    Some(format!(
                        "server answered {} < client completed {ct} - lost {lost}",
                        r.transactions_total
                    )),
                )
            } else {
                (true, None)
            }
        }
        TestKind::TcpStream => {
            let (sent, received) = match spec.direction {
                Direction::ClientToServer => (c.final_counts.1, r.bytes_total),
                Direction::ServerToClient => (r.bytes_total, c.final_counts.1),
            };
            if received > sent {
                (
                    false,
                    Some(format!("received {received} bytes > sent {sent}")),
                )
            } else {
                (true, None)
            }
        }
        TestKind::UdpStream => {
            if r.packets_total > c.final_counts.2 {
                (
                    false,
                    Some(format!(
                        "received {} > sent {} datagrams",
                        r.packets_total, c.final_counts.2
                    )),
                )
            } else {
                (true, None)
            }
        }
    };
    let counts = Counts {
        client_window: if spec.kind.is_rr() {
            cw
        } else {
            c.s1.counts.0.saturating_sub(c.s0.counts.0)
        },
        client_total: if spec.kind.is_rr() {
            ct
        } else {
            c.final_counts.0
        },
        histogram: hist.len(),
        server_window: r.window.transactions,
        server_total: r.transactions_total,
        lost,
        consistent,
        note,
    };
    let udp = spec.kind.is_udp().then(|| {
        let (sent, received) = if spec.kind == TestKind::UdpStream {
            (c.final_counts.2, r.packets_total)
        } else {
            (ct + lost, r.transactions_total)
        };
        let k = r.udp.unwrap_or_default();
        UdpReport {
            sent,
            received,
            lost: sent.saturating_sub(received),
            kernel_rcvbuf_errors: k.rcvbuf_errors,
            kernel_in_errors: k.in_errors,
            send_errors,
        }
    });
    let first = c.setups.first();
    let settings = Settings {
        test: spec.kind.name().into(),
        server: cfg.server.to_string(),
        ipv6: cfg.server.is_ipv6(),
        flows: spec.flows,
        threads: cfg.threads,
        server_threads: spec.server_threads,
        request: spec.request,
        response: spec.response,
        write_size: spec.request,
        direction: (spec.kind == TestKind::TcpStream).then_some(spec.direction),
        close_mode: (spec.kind == TestKind::TcpCrr).then_some(spec.close),
        nodelay: first.and_then(|s| s.sockopts.2),
        sndbuf: first.and_then(|s| s.sockopts.0),
        rcvbuf: first.and_then(|s| s.sockopts.1),
        sndbuf_requested: spec.knobs.sndbuf,
        rcvbuf_requested: spec.knobs.rcvbuf,
        busy_poll_us: spec.knobs.busy_poll_us,
        reuseport: spec.knobs.reuseport,
        batch: spec.knobs.batch,
        udp_gso: spec.knobs.udp_gso,
        udp_gro: spec.knobs.udp_gro,
        rx_usecs: spec.knobs.rx_usecs,
        rate: cfg.rate,
        null: cfg.null,
        engine: c.engine,
        server_settings: c.server_settings,
        client_pin_used: c.setups.iter().map(|s| s.pin_used.clone()).collect(),
        server_pin_used: r.pin_used.clone(),
        warmup_seconds: cfg.warmup.as_secs_f64(),
        duration_seconds: cfg.duration.as_secs_f64(),
        client_host: c.client_host,
        server_host: c.server_host,
        listeners: spec.listeners,
        burst: spec.burst,
        notes: c.notes,
    };
    let (throughput, throughput_units) = if spec.kind.is_rr() {
        (tps, "Trans/s")
    } else {
        (gbit * 1e3, "10^6bits/s")
    };
    BenchResult {
        test: spec.kind,
        throughput,
        throughput_units: throughput_units.into(),
        bits_per_sec: gbit * 1e9,
        transactions_per_sec: tps,
        gbit_per_sec: gbit,
        packets_per_sec: pps,
        latency_us: latency,
        cpu_seconds_per_transaction: per(busy),
        cpu,
        counts,
        udp,
        server: c.report,
        settings,
        intervals: c.intervals,
        tcp_info: TcpInfoReport::from_flows(c.tcp_flows),
    }
}

fn window_check(client: u64, server: u64, flows: u64) -> (bool, Option<String>) {
    let tol = client / 10 + flows + 10;
    if client.abs_diff(server) > tol {
        (
            false,
            Some(format!(
                "window counts differ: client {client}, server {server}"
            )),
        )
    } else {
        (true, None)
    }
}

/// `--null`: runs the measurement loop with no I/O and no server.
fn run_null(cfg: &ClientConfig, on_interval: IntervalFn<'_>) -> Result<BenchResult, BenchError> {
    let threads = cfg.threads as usize;
    let slots: Arc<Vec<Slot>> = Arc::new((0..threads).map(|_| Slot::default()).collect());
    let start = Instant::now() + Duration::from_millis(20);
    let w = Window {
        start,
        ws: start + cfg.warmup,
        we: start + cfg.warmup + cfg.duration,
    };
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    let done = Arc::new(Barrier::new(threads + 1));
    for i in 0..threads {
        let (slots, tx, pin, done) = (slots.clone(), tx.clone(), cfg.pin.clone(), done.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("ofl-bench-n{i}"))
                .spawn(move || {
                    if let Some(p) = &pin {
                        let _ = sys::set_affinity(&[p[i % p.len()]]);
                    }
                    let _ = tx.send((i, sys::gettid(), sys::get_affinity().unwrap_or_default()));
                    sleep_until(w.start);
                    let out = engine::client_null(&w, &slots[i]);
                    done.wait();
                    out
                })
                .map_err(|e| BenchError::io("spawning a worker", e))?,
        );
    }
    drop(tx);
    // Exactly one message per worker: the workers keep their senders alive
    // until the end barrier, so the channel would never close.
    let mut setups: Vec<(usize, i32, Vec<usize>)> = rx.iter().take(threads).collect();
    setups.sort();
    let tids: Vec<i32> = setups.iter().map(|s| s.1).collect();
    sleep_until(w.ws);
    let s0 = snap(&tids, &slots)?;
    let mut intervals = Vec::new();
    if let Some(t) = cfg.interval.filter(|t| !t.is_zero()) {
        let mut last = (s0.at, s0.counts.0);
        let mut next = w.ws + t;
        while next <= w.we {
            sleep_until(next);
            let c = engine::sum_slots(&slots).0;
            let dt = next.duration_since(last.0).as_secs_f64();
            let line = IntervalLine {
                run: 1,
                at_seconds: next.duration_since(w.start).as_secs_f64(),
                warmup: false,
                transactions_per_sec: c.saturating_sub(last.1) as f64 / dt,
                gbit_per_sec: 0.0,
            };
            on_interval(&line);
            intervals.push(line);
            last = (next, c);
            next += t;
        }
    }
    sleep_until(w.we);
    let s1 = snap(&tids, &slots);
    done.wait();
    let s1 = s1?;
    let mut outcomes = Vec::new();
    for h in handles {
        outcomes.push(h.join().map_err(|_| BenchError::Worker {
            worker: 0,
            message: "panicked".into(),
        })?);
    }
    let final_counts = engine::sum_slots(&slots);
    let total: u64 = outcomes.iter().map(|o| o.total_txn).sum();
    let report = ServerReport {
        transactions_total: total,
        ..ServerReport::default()
    };
    let setups = setups
        .into_iter()
        .map(|(worker, tid, pin_used)| Setup {
            worker,
            fds: Vec::new(),
            tid,
            pin_used,
            sockopts: (None, None, None),
            result: Ok(()),
        })
        .collect();
    let mut result = compose(Compose {
        cfg,
        w,
        s0,
        s1,
        outcomes,
        report,
        setups,
        final_counts,
        client_host: HostInfo::collect(),
        server_host: HostInfo::default(),
        server_settings: ServerSettings::default(),
        intervals,
        engine: "null".into(),
        tcp_flows: Vec::new(),
        notes: Vec::new(),
    });
    // There is no server: the cross-check compares the client with itself.
    result.counts.server_window = result.counts.client_window;
    result.counts.consistent = true;
    result.counts.note = Some("null mode: no server, no I/O".into());
    Ok(result)
}

/// Runs the test `runs` times and summarises across runs.
pub fn run_many(
    cfg: &ClientConfig,
    runs: u32,
    on_interval: IntervalFn<'_>,
) -> Result<RunsReport, BenchError> {
    let mut results = Vec::new();
    for _ in 0..runs.max(1) {
        results.push(run_once(cfg, on_interval)?);
    }
    Ok(summarize_runs(results))
}

fn median(v: &[f64]) -> f64 {
    stats::summarize(v).map(|s| s.median).unwrap_or(0.0)
}

/// Summarises finished runs (the first run's settings are kept).
pub fn summarize_runs(runs: Vec<BenchResult>) -> RunsReport {
    let tps: Vec<f64> = runs.iter().map(|r| r.transactions_per_sec).collect();
    let cpt: Vec<f64> = runs.iter().map(|r| r.cpu_seconds_per_transaction).collect();
    let lats: Vec<LatencyUs> = runs.iter().filter_map(|r| r.latency_us).collect();
    let p99: Vec<f64> = lats.iter().map(|l| l.p99).collect();
    let latency_us = (!lats.is_empty() && lats.len() == runs.len()).then(|| {
        let m = |f: fn(&LatencyUs) -> f64| median(&lats.iter().map(f).collect::<Vec<_>>());
        LatencyUs {
            min: m(|l| l.min),
            p50: m(|l| l.p50),
            p90: m(|l| l.p90),
            p99: m(|l| l.p99),
            p999: m(|l| l.p999),
            max: m(|l| l.max),
            mean: m(|l| l.mean),
            count: lats.iter().map(|l| l.count).sum(),
        }
    });
    RunsReport {
        transactions_per_sec: median(&tps),
        latency_us,
        cpu_seconds_per_transaction: median(&cpt),
        settings: runs.first().map(|r| r.settings.clone()).unwrap_or_default(),
        transactions_per_sec_summary: stats::summarize(&tps),
        cpu_seconds_per_transaction_summary: stats::summarize(&cpt),
        p99_us_summary: if p99.len() == runs.len() {
            stats::summarize(&p99)
        } else {
            None
        },
        runs,
    }
}

/// Runs A and B interleaved, `pairs` times (order A,B then B,A, alternating,
/// so a slow drift of the machine does not favour either), and reports the
/// paired differences B - A.
pub fn compare(
    a: &ClientConfig,
    b: &ClientConfig,
    a_options: &str,
    b_options: &str,
    pairs: u32,
    on_interval: IntervalFn<'_>,
) -> Result<CompareReport, BenchError> {
    let pairs = pairs.max(2);
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for i in 0..pairs {
        if i % 2 == 0 {
            ra.push(run_once(a, on_interval)?);
            rb.push(run_once(b, on_interval)?);
        } else {
            rb.push(run_once(b, on_interval)?);
            ra.push(run_once(a, on_interval)?);
        }
    }
    Ok(crate::compare::compare_results(
        a_options, b_options, ra, rb,
    ))
}
