//! `offload bench server`: one process serves every test to many clients.
//!
//! Safe by default (docs/bench.md, "Security"): it listens on loopback
//! unless given addresses, and beyond loopback only with a shared secret
//! ([`crate::auth`]). Each control connection gets a thread, within
//! [`ServerLimits`]' caps on connections and on connections still
//! handshaking; over a cap a connection gets an Error frame and is closed
//! without a thread. The handshake has a deadline in total, not per read,
//! and its frames are at most [`proto::MAX_HELLO_FRAME`] bytes. Each test
//! reserves its memory, threads and flows from the server's [`Budget`]
//! before anything is allocated, then gets its own data listener (TCP) or
//! sockets (UDP) on an ephemeral port of the address the client reached, a
//! setup thread that accepts the flows, and worker threads. Data sockets
//! talk only to the client that asked: every test has a random token that
//! only its control client learns (in Ready); a TCP data connection from
//! another address, or one that does not send the token first within
//! [`engine::TOKEN_DEADLINE`], is closed unanswered and never becomes one
//! of the test's flows, and a udp-rr server answers only the source
//! addresses that joined with the token.
//! A client that sends garbage, speaks another version or vanishes mid-test
//! gets an Error frame if it is still there, the server logs one line, tears
//! that test down and keeps serving.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::auth::{self, Secret};
use crate::config::{Direction, TestKind, TestSpec};
use crate::cpu::{self, ProcessCpu, UdpCounters};
use crate::engine::{self, RrParams, Slot, StopWhen, UdpGate};
use crate::error::BenchError;
pub use crate::limits::ServerLimits;
use crate::limits::{Budget, Reservation};
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
    /// Control connections refused at accept (over a connection cap).
    pub refused: AtomicU64,
    /// Connections closed before completing their handshake because newer
    /// ones needed their place.
    pub evicted: AtomicU64,
    /// Data connections and datagrams from addresses other than the
    /// test's client, dropped unanswered.
    pub strays: AtomicU64,
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
        /// Data ports (TCP listeners, or the UDP port).
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
/// How a server is set up beyond its addresses.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// What the server allows.
    pub limits: ServerLimits,
    /// The shared secret clients must prove they hold; required to listen
    /// beyond loopback.
    pub secret: Option<Secret>,
}

/// The default control port.
pub const DEFAULT_PORT: u16 = 12867;

/// A bound, not yet serving, server.
pub struct Server {
    listeners: Vec<TcpListener>,
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
    echo: bool,
    events: Option<EventSink>,
    budget: Arc<Budget>,
    secret: Option<Secret>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listeners", &self.listeners)
            .field("echo", &self.echo)
            .field("events", &self.events.is_some())
            .field("limits", self.budget.limits())
            .field("secret", &self.secret)
            .finish()
    }
}

/// Whether `ip` is a loopback address (IPv4-mapped ones included).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

impl Server {
    /// Binds the control port on one address with the default options:
    /// a loopback address, since beyond loopback a secret is required (see
    /// [`Server::bind_with`]).
    pub fn bind(addr: SocketAddr) -> Result<Self, BenchError> {
        Self::bind_with(&[addr], ServerOptions::default())
    }

    /// Binds `127.0.0.1:PORT` and `[::1]:PORT` (the latter skipped on a host
    /// without IPv6): the default of `offload bench server`.
    pub fn bind_loopback(port: u16, opts: ServerOptions) -> Result<Self, BenchError> {
        let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let mut server = Self::bind_with(&[v4], opts)?;
        // Port 0: the IPv6 side takes the port the IPv4 side got.
        let port = server.local_addr()?.port();
        let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port);
        match sock::tcp_listen(v6, &Default::default(), 128) {
            Ok(l) => server.listeners.push(l),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)
                ) => {}
            Err(e) => return Err(BenchError::io(format!("binding the control port {v6}"), e)),
        }
        Ok(server)
    }

    /// Binds the control port on every address given.
    ///
    /// An address beyond loopback (`[::]`, `0.0.0.0` or a real interface's)
    /// needs `opts.secret`: the server refuses to start without one. `[::]`
    /// serves IPv4 and IPv6 clients (IPV6_V6ONLY off); on a host without
    /// IPv6 it falls back to `0.0.0.0`.
    pub fn bind_with(addrs: &[SocketAddr], opts: ServerOptions) -> Result<Self, BenchError> {
        if addrs.is_empty() {
            return Err(BenchError::Config("no address to listen on".into()));
        }
        if opts.secret.is_none() {
            if let Some(a) = addrs.iter().find(|a| !is_loopback(a.ip())) {
                return Err(BenchError::Config(format!(
                    "refusing to listen on {a} without authentication: beyond loopback the \
                     server needs a shared secret (--auth-file FILE or {}; the clients \
                     give the same one). Without a secret it listens on loopback only.",
                    auth::SECRET_ENV
                )));
            }
        }
        sys::raise_fd_limit(1 << 20).ok();
        let mut listeners = Vec::new();
        for &addr in addrs {
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
            listeners.push(listener);
        }
        Ok(Server {
            listeners,
            stop: Arc::new(AtomicBool::new(false)),
            stats: Arc::new(ServerStats::default()),
            echo: true,
            events: None,
            budget: Budget::new(opts.limits),
            secret: opts.secret,
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

    /// The (first) bound control address.
    pub fn local_addr(&self) -> Result<SocketAddr, BenchError> {
        self.listeners[0]
            .local_addr()
            .map_err(|e| BenchError::io("reading the control address", e))
    }

    /// Every bound control address.
    pub fn local_addrs(&self) -> Result<Vec<SocketAddr>, BenchError> {
        self.listeners
            .iter()
            .map(|l| {
                l.local_addr()
                    .map_err(|e| BenchError::io("reading the control address", e))
            })
            .collect()
    }

    /// The server's counters and log.
    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// The server's limits.
    pub fn limits(&self) -> &ServerLimits {
        self.budget.limits()
    }

    /// Whether clients must authenticate.
    pub fn requires_auth(&self) -> bool {
        self.secret.is_some()
    }

    /// A flag that stops [`Server::serve`] within 100 ms when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serves until the stop flag is set.
    pub fn serve(self) -> Result<(), BenchError> {
        let ep = sys::Epoll::new().map_err(|e| BenchError::io("epoll_create", e))?;
        for (i, l) in self.listeners.iter().enumerate() {
            l.set_nonblocking(true)
                .map_err(|e| BenchError::io("O_NONBLOCK on the control port", e))?;
            ep.add(l.as_raw_fd(), sys::EPOLLIN, i as u64)
                .map_err(|e| BenchError::io("epoll_ctl on the control port", e))?;
        }
        let emit = |e: &ServerEvent| {
            if let Some(sink) = &self.events {
                sink(e);
            }
        };
        for a in self.local_addrs()? {
            emit(&ServerEvent::Listening {
                addr: a.to_string(),
            });
        }
        let ctx = Arc::new(Ctx {
            stop: self.stop.clone(),
            stats: self.stats.clone(),
            echo: self.echo,
            events: self.events.clone(),
            budget: self.budget.clone(),
            secret: self.secret.clone(),
            connections: AtomicUsize::new(0),
            pending: Mutex::new(Handshakes::default()),
            released: Condvar::new(),
            next_id: AtomicU64::new(0),
        });
        let mut clients: Vec<JoinHandle<()>> = Vec::new();
        let mut events = sys::event_buffer(8);
        let mut last_refusal_log: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            clients.retain(|h| !h.is_finished());
            let n = match ep.wait(&mut events, 100) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(BenchError::io("epoll_wait on the control port", e)),
            };
            for ev in &events[..n] {
                let listener = &self.listeners[sys::event_token(ev) as usize];
                // A few per wake-up, so one busy listener cannot starve
                // the other or the stop flag.
                for _ in 0..64 {
                    if self.stop.load(Ordering::Relaxed) || !ctx.room_to_accept() {
                        break;
                    }
                    let (stream, peer) = match listener.accept() {
                        Ok(x) => x,
                        Err(e) if nothing_to_accept(&e) => break,
                        Err(e) => {
                            // EMFILE and friends: log, back off, keep serving.
                            self.stats.log(self.echo, format!("accept: {e}"));
                            std::thread::sleep(Duration::from_millis(50));
                            break;
                        }
                    };
                    // IPv4 clients of a dual-stack listener, as themselves.
                    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
                    self.stats.connections.fetch_add(1, Ordering::Relaxed);
                    let id = match ctx.admit(&stream) {
                        Ok(id) => id,
                        Err(why) => {
                            self.stats.refused.fetch_add(1, Ordering::Relaxed);
                            refuse_at_accept(stream, &why);
                            // One line a second at most: a flood must not
                            // become a flood of log lines.
                            if last_refusal_log
                                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
                            {
                                last_refusal_log = Some(Instant::now());
                                self.stats.log(
                                    self.echo,
                                    format!(
                                        "client {peer}: refused: {why} ({} refused so far)",
                                        self.stats.refused.load(Ordering::Relaxed)
                                    ),
                                );
                            }
                            continue;
                        }
                    };
                    emit(&ServerEvent::Connected {
                        peer: peer.to_string(),
                    });
                    let c = ctx.clone();
                    let spawned = std::thread::Builder::new()
                        .name("ofl-bench-ctl".into())
                        .stack_size(CONTROL_STACK)
                        .spawn(move || {
                            // Given back however the connection ends.
                            let _slot = Admitted { ctx: &c, id };
                            let emit = |e: ServerEvent| {
                                if let Some(sink) = &c.events {
                                    sink(&e);
                                }
                            };
                            match handle_client(stream, id, peer, &c, &emit) {
                                Ok(()) => emit(ServerEvent::Disconnected {
                                    peer: peer.to_string(),
                                }),
                                // Counted in stats.evicted; a flood of idle
                                // connections must not flood the log.
                                Err(ClientError::Evicted) => {}
                                Err(e) => {
                                    c.stats.errors.fetch_add(1, Ordering::Relaxed);
                                    c.stats.log(c.echo, format!("client {peer}: {e}"));
                                    emit(ServerEvent::Error {
                                        peer: peer.to_string(),
                                        message: e.to_string(),
                                    });
                                }
                            }
                        });
                    match spawned {
                        Ok(h) => clients.push(h),
                        Err(e) => {
                            ctx.release_unspawned(id);
                            self.stats
                                .log(self.echo, format!("client {peer}: no thread: {e}"))
                        }
                    }
                }
            }
        }
        // Stopping: end every connection's wait for a frame, so that
        // Ctrl-C ends running tests and their threads at once.
        ctx.shut_down_all();
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
        let budget = self.budget.clone();
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
            budget,
            thread: Some(thread),
        })
    }
}

/// Stack of a control-connection thread: it parses JSON frames of at most
/// 64 KiB and collects host details, nothing deep.
const CONTROL_STACK: usize = 512 << 10;

/// How long the accept loop waits at a time for an evicted connection's
/// thread to end before it checks the stop flag again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The control connections still in their handshake, oldest first, with a
/// handle to shut each down: when they fill their cap, a new connection
/// evicts the oldest, so idle connections cannot keep a client out.
#[derive(Default)]
struct Handshakes {
    queue: std::collections::VecDeque<(u64, TcpStream)>,
    /// Every admitted connection past its handshake, with a handle to shut
    /// it down when the server stops (its thread may wait for a frame for
    /// up to a test's length).
    established: std::collections::HashMap<u64, TcpStream>,
    /// Evicted connections whose threads still run (they count against
    /// the thread cap until they end).
    evicted: std::collections::HashSet<u64>,
}

/// What every control-connection thread shares.
struct Ctx {
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
    echo: bool,
    events: Option<EventSink>,
    budget: Arc<Budget>,
    secret: Option<Secret>,
    /// Control connections with a thread.
    connections: AtomicUsize,
    /// The connections still in their handshake, and the evicted ones
    /// whose threads have not ended yet.
    pending: Mutex<Handshakes>,
    /// Signalled (under `pending`'s lock) whenever a connection's thread
    /// ends, so the accept loop can wait for evicted connections to leave.
    released: Condvar,
    next_id: AtomicU64,
}

impl Ctx {
    /// The most control-connection threads at once: the connection cap,
    /// plus room for evicted connections whose threads have not ended yet.
    fn thread_cap(&self) -> usize {
        let l = self.budget.limits();
        l.max_connections + l.max_handshaking.max(1)
    }

    /// Whether the accept loop may take another connection now. While the
    /// threads are at their cap and some of them are evicted connections
    /// that have not ended yet (they end within a read once scheduled, but
    /// a loaded host may not run them at once), it waits up to
    /// [`ACCEPT_PAUSE`] for one to end; if none did, newcomers stay in the
    /// kernel's listen backlog until one does, rather than being refused
    /// as busy. Every connection that is accepted is then admitted or
    /// refused at once: the accept loop never waits on a connection.
    fn room_to_accept(&self) -> bool {
        let cap = self.thread_cap();
        let Ok(pending) = self.pending.lock() else {
            return true;
        };
        match self
            .released
            .wait_timeout_while(pending, ACCEPT_PAUSE, |p| {
                self.connections.load(Ordering::Acquire) >= cap && !p.evicted.is_empty()
            }) {
            Ok((_, waited)) => !waited.timed_out(),
            Err(_) => true,
        }
    }

    /// Counts a new connection in (evicting the oldest connection still in
    /// its handshake when those fill their cap, or when the connections
    /// do), or says why it cannot. Only the accept loop admits, after
    /// [`Ctx::room_to_accept`], so check-then-add cannot overshoot: the
    /// threads never exceed [`Ctx::thread_cap`].
    fn admit(&self, stream: &TcpStream) -> Result<u64, String> {
        let l = self.budget.limits();
        let handle = stream
            .try_clone()
            .map_err(|e| format!("the server is short of descriptors: {e}"))?;
        let mut pending = self.pending.lock().map_err(|_| "poisoned".to_string())?;
        let connections = self.connections.load(Ordering::Acquire);
        let busy = || {
            format!(
                "the server is busy: {} control connections at once is its limit",
                l.max_connections
            )
        };
        // At the thread cap with no evicted thread still running: every
        // one of them is a live connection.
        if connections >= self.thread_cap() {
            return Err(busy());
        }
        if connections >= l.max_connections || pending.queue.len() >= l.max_handshaking.max(1) {
            match pending.queue.pop_front() {
                Some((old, oldest)) => {
                    // Its thread's read ends at once; it counts until then.
                    let _ = oldest.shutdown(std::net::Shutdown::Both);
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                    pending.evicted.insert(old);
                }
                None => return Err(busy()),
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        pending.queue.push_back((id, handle));
        self.connections.fetch_add(1, Ordering::AcqRel);
        Ok(id)
    }

    /// The connection's handshake ended; false if it had been evicted.
    fn handshake_done(&self, id: u64) -> bool {
        let Ok(mut pending) = self.pending.lock() else {
            return true;
        };
        match pending.queue.iter().position(|(i, _)| *i == id) {
            Some(at) => {
                if let Some((_, handle)) = pending.queue.remove(at) {
                    pending.established.insert(id, handle);
                }
                true
            }
            None => false,
        }
    }

    fn release_unspawned(&self, id: u64) {
        self.handshake_done(id);
        if let Ok(mut pending) = self.pending.lock() {
            pending.established.remove(&id);
        }
        self.connections.fetch_sub(1, Ordering::AcqRel);
    }

    /// Shuts every control connection down, so that the threads waiting
    /// for their next frame (between tests, or mid-test for the client's
    /// marks) end now and tear their tests down.
    fn shut_down_all(&self) {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for s in pending
            .queue
            .iter()
            .map(|(_, s)| s)
            .chain(pending.established.values())
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A connection's place in the caps; given back when its thread ends,
/// however it ends (a panic included).
struct Admitted<'a> {
    ctx: &'a Ctx,
    id: u64,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        // Under the lock the accept loop waits with, so the wakeup cannot
        // fall between its check and its wait.
        let mut pending = self.ctx.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.queue.retain(|(i, _)| *i != self.id);
        pending.established.remove(&self.id);
        pending.evicted.remove(&self.id);
        self.ctx.connections.fetch_sub(1, Ordering::AcqRel);
        self.ctx.released.notify_all();
    }
}

/// An accept that found nothing to take, or a connection that was gone
/// before it could be taken: try again at the next wake-up.
fn nothing_to_accept(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
    )
}

/// Sends a refusal without blocking (it fits any socket buffer) and closes.
fn refuse_at_accept(stream: TcpStream, why: &str) {
    let mut frame = Vec::new();
    if proto::write_frame(
        &mut frame,
        &ServerMsg::Error {
            message: why.to_string(),
        },
    )
    .is_ok()
        && stream.set_nonblocking(true).is_ok()
    {
        let _ = (&stream).write(&frame);
    }
}

/// A server running on a background thread.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
    budget: Arc<Budget>,
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

    /// What the running tests hold of the server's budget.
    pub fn usage(&self) -> crate::limits::Usage {
        self.budget.usage()
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
    #[error("evicted before completing its handshake")]
    Evicted,
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Proto(ProtoError::Io(e))
    }
}

/// The control stream with a deadline for the exchange under way: every
/// read and write gets only the time left, so a client that drips a byte
/// at a time cannot hold the connection past it.
struct Ctl {
    stream: TcpStream,
    until: Instant,
}

impl Ctl {
    fn deadline_in(&mut self, d: Duration) {
        self.until = Instant::now() + d;
    }

    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "deadline passed before the frame was complete",
            ))
        } else {
            Ok(left)
        }
    }
}

impl Read for Ctl {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

impl Write for Ctl {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_write_timeout(Some(left))?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Time the server gives itself to write one frame to a client.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);

fn send(ctl: &mut Ctl, msg: &ServerMsg) -> Result<(), ProtoError> {
    ctl.deadline_in(WRITE_DEADLINE);
    proto::write_frame(ctl, msg)
}

fn refuse(ctl: &mut Ctl, message: String) -> ClientError {
    ctl.deadline_in(Duration::from_secs(2));
    let _ = proto::write_frame(
        ctl,
        &ServerMsg::Error {
            message: message.clone(),
        },
    );
    ClientError::Refused(message)
}

/// Reads one frame of at most `max` bytes within the deadline already set.
fn recv(ctl: &mut Ctl, max: u32) -> Result<ClientMsg, ProtoError> {
    proto::read_frame_limited(ctl, max)
}

/// The handshake: Hello, and with a secret the challenge. Returns whether
/// the client is trusted with host details.
fn handshake(ctl: &mut Ctl, peer: SocketAddr, ctx: &Ctx) -> Result<bool, ClientError> {
    let limits = ctx.budget.limits();
    ctl.deadline_in(limits.handshake_timeout);
    let hello = match recv(ctl, proto::MAX_HELLO_FRAME) {
        Ok(m) => m,
        Err(ProtoError::Closed) => return Err(ProtoError::Closed.into()),
        Err(ProtoError::Io(e)) if is_timeout(&e) => {
            return Err(refuse(
                ctl,
                format!(
                    "no complete hello within {} s",
                    limits.handshake_timeout.as_secs_f64()
                ),
            ))
        }
        Err(e) => return Err(refuse(ctl, format!("bad hello: {e}"))),
    };
    if let Err(e) = proto::check_hello(&hello) {
        return Err(refuse(ctl, e.to_string()));
    }
    let Some(secret) = &ctx.secret else {
        // No secret: the server listens on loopback only, and a local
        // client may see the host (docs/bench.md, "Security").
        let trusted = is_loopback(peer.ip());
        let host = if trusted {
            HostInfo::collect()
        } else {
            HostInfo::default()
        };
        send(
            ctl,
            &ServerMsg::Welcome {
                version: proto::PROTOCOL_VERSION,
                host,
                proof: None,
            },
        )?;
        return Ok(trusted);
    };
    let server_nonce = auth::random_bytes::<{ auth::NONCE_LEN }>()
        .map_err(|e| ClientError::Refused(e.to_string()))?;
    // The challenge's write must not extend the handshake's deadline.
    let until = ctl.until;
    proto::write_frame(
        ctl,
        &ServerMsg::Challenge {
            nonce: auth::hex(&server_nonce),
        },
    )?;
    ctl.until = until;
    let (client_nonce, mac) = match recv(ctl, proto::MAX_HELLO_FRAME) {
        Ok(ClientMsg::Auth { nonce, mac }) => (nonce, mac),
        Ok(other) => {
            return Err(refuse(
                ctl,
                format!(
                    "this server requires authentication: expected auth, got {}",
                    proto::msg_name(&other)
                ),
            ))
        }
        Err(ProtoError::Closed) => return Err(ProtoError::Closed.into()),
        Err(e) => return Err(refuse(ctl, format!("bad auth frame: {e}"))),
    };
    let client_nonce = match auth::unhex(&client_nonce) {
        Some(n) if n.len() == auth::NONCE_LEN => n,
        _ => return Err(refuse(ctl, "authentication failed".into())),
    };
    if !secret.check_client_mac(&server_nonce, &client_nonce, &mac) {
        return Err(refuse(ctl, "authentication failed".into()));
    }
    send(
        ctl,
        &ServerMsg::Welcome {
            version: proto::PROTOCOL_VERSION,
            host: HostInfo::collect(),
            proof: Some(secret.server_proof(&server_nonce, &client_nonce)),
        },
    )?;
    Ok(true)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn handle_client(
    stream: TcpStream,
    id: u64,
    peer: SocketAddr,
    ctx: &Ctx,
    emit: &dyn Fn(ServerEvent),
) -> Result<(), ClientError> {
    stream.set_nodelay(true).ok();
    let mut ctl = Ctl {
        stream,
        until: Instant::now(),
    };
    let handshake = handshake(&mut ctl, peer, ctx);
    if !ctx.handshake_done(id) {
        return Err(ClientError::Evicted);
    }
    handshake?;
    // A dual-stack control socket sees IPv4 clients as ::ffff:a.b.c.d: the
    // data sockets then bind the plain IPv4 address, as they would behind
    // an IPv4 control socket.
    let local_ip = ctl.stream.local_addr()?.ip().to_canonical();
    let peer_name = peer.to_string();
    loop {
        ctl.deadline_in(ctx.budget.limits().idle_timeout);
        let msg = match recv(&mut ctl, proto::MAX_CLIENT_FRAME) {
            Ok(m) => m,
            Err(ProtoError::Closed) => return Ok(()),
            Err(e @ ProtoError::Io(_)) => return Err(e.into()),
            Err(e) => return Err(refuse(&mut ctl, format!("bad frame: {e}"))),
        };
        match msg {
            ClientMsg::Bye => return Ok(()),
            ClientMsg::Start { spec } => {
                if ctx.stop.load(Ordering::Relaxed) {
                    return Err(refuse(&mut ctl, "the server is stopping".into()));
                }
                if let Err(why) = check_spec(&spec) {
                    return Err(refuse(&mut ctl, why));
                }
                let reservation = match ctx.budget.reserve(&spec) {
                    Ok(r) => r,
                    Err(why) => return Err(refuse(&mut ctl, why)),
                };
                let mut test = match ServerTest::start(
                    spec,
                    local_ip,
                    peer.ip(),
                    reservation,
                    ctx.stats.clone(),
                ) {
                    Ok(t) => t,
                    Err(e) => return Err(refuse(&mut ctl, format!("setting up: {e}"))),
                };
                send(
                    &mut ctl,
                    &ServerMsg::Ready {
                        data_port: test.data_port,
                        data_ports: test.data_ports.clone(),
                        settings: test.settings.clone(),
                        token: Some(auth::hex(&test.token)),
                    },
                )?;
                emit(ServerEvent::TestStarted {
                    peer: peer_name.clone(),
                    test: test.spec.kind,
                    flows: test.spec.flows,
                    threads: test.settings.threads,
                    request: test.spec.request,
                    response: test.spec.response,
                    data_ports: if test.data_ports.is_empty() {
                        vec![test.data_port]
                    } else {
                        test.data_ports.clone()
                    },
                    engine: test.settings.engine.clone(),
                });
                let report = run_test(&mut ctl, &mut test)?;
                ctx.stats.tests_completed.fetch_add(1, Ordering::Relaxed);
                emit(ServerEvent::TestFinished {
                    peer: peer_name.clone(),
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
                    &mut ctl,
                    format!("expected start or bye, got {}", proto::msg_name(&other)),
                ))
            }
        }
    }
}

/// Checks that what a client asks for is well-formed, before anything is
/// allocated ([`Budget::reserve`] then checks that it fits this host).
pub fn check_spec(s: &TestSpec) -> Result<(), String> {
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
    if s.burst == 0 || s.burst > 65536 {
        return Err(format!("burst {} is outside 1..=65536", s.burst));
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

fn run_test(ctl: &mut Ctl, test: &mut ServerTest) -> Result<ServerReport, ClientError> {
    // The whole test, marks and finish included, within its expected
    // length plus a margin for setup and slow hosts.
    // (as long as the client waits for its flows to connect: a minute
    // plus a millisecond per flow).
    let limit = Duration::from_secs_f64(test.spec.expected_seconds)
        + Duration::from_secs(60)
        + Duration::from_millis(u64::from(test.spec.flows));
    let until = Instant::now() + limit;
    loop {
        ctl.until = until;
        let msg = match recv(ctl, proto::MAX_CLIENT_FRAME) {
            Ok(m) => m,
            Err(ProtoError::Closed) => {
                return Err(ClientError::Refused("the client vanished mid-test".into()));
            }
            Err(e @ ProtoError::Io(_)) => return Err(e.into()),
            Err(e) => return Err(refuse(ctl, format!("bad frame mid-test: {e}"))),
        };
        match msg {
            ClientMsg::Mark { mark } => {
                test.mark(mark);
                send(ctl, &ServerMsg::Marked)?;
            }
            ClientMsg::Finish => {
                let report = test.finish();
                send(
                    ctl,
                    &ServerMsg::Report {
                        report: report.clone(),
                    },
                )?;
                return Ok(report);
            }
            other => {
                return Err(refuse(
                    ctl,
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
    /// The control client's address: TCP data connections from any other
    /// are closed unanswered.
    client_ip: IpAddr,
    /// The test's token: a TCP data connection that does not send it first
    /// is closed unanswered.
    token: [u8; proto::TOKEN_LEN],
    /// udp-rr: the sources that joined with the test's token.
    gate: Option<Arc<UdpGate>>,
    /// The server's counters (strays).
    stats: Arc<ServerStats>,
}

impl Shared {
    /// A test's state before its workers start: `threads` slots, nothing
    /// accepted, the client's address and the test's token.
    fn new(
        threads: usize,
        client_ip: IpAddr,
        token: [u8; proto::TOKEN_LEN],
        gate: Option<Arc<UdpGate>>,
        stats: Arc<ServerStats>,
    ) -> Self {
        Shared {
            slots: (0..threads).map(|_| Slot::default()).collect(),
            tids: Mutex::new(Vec::new()),
            pins: Mutex::new(Vec::new()),
            sockopts: Mutex::new((None, None, None)),
            accepted: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
            conns: Mutex::new(Vec::new()),
            tcp_infos: Mutex::new(Vec::new()),
            client_ip: client_ip.to_canonical(),
            token,
            gate,
            stats,
        }
    }

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
    /// The token given to the client (TCP preambles, udp-rr joins).
    token: [u8; proto::TOKEN_LEN],
    /// What the test holds of the server's budget; given back on drop,
    /// after the workers are joined (fields drop after `Drop::drop`).
    _reservation: Reservation,
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
    fn start(
        spec: TestSpec,
        ip: IpAddr,
        client_ip: IpAddr,
        reservation: Reservation,
        stats: Arc<ServerStats>,
    ) -> Result<Self, io::Error> {
        let threads = spec.server_threads as usize;
        let token = auth::random_bytes::<{ proto::TOKEN_LEN }>()
            .map_err(|e| io::Error::other(e.to_string()))?;
        let gate = (spec.kind == TestKind::UdpRr).then(|| Arc::new(UdpGate::new(token)));
        let shared = Arc::new(Shared::new(threads, client_ip, token, gate, stats));
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
            // Room for the strays that may arrive with the flows, too.
            let backlog = (spec.flows as usize + MAX_UNPROVEN_FLOWS).min(65535) as i32;
            let mut listeners = Vec::new();
            let mut ports = Vec::new();
            for _ in 0..n {
                let l = sock::tcp_listen(any, &spec.knobs, backlog)?;
                if spec.kind == TestKind::TcpCrr {
                    // A connection that sends nothing reaches no worker
                    // (engine::server_crr) until the kernel gives up
                    // waiting for its data.
                    sock::set_defer_accept(&l, 1)?;
                }
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
            token,
            _reservation: reservation,
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
        if self.shared.stop.swap(true, Ordering::Relaxed) {
            return;
        }
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
        if let Some(g) = &self.shared.gate {
            self.shared
                .stats
                .strays
                .fetch_add(g.strays(), Ordering::Relaxed);
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
                    if let (TestKind::UdpRr, Some(gate)) = (spec.kind, &sh.gate) {
                        engine::server_udp_rr(&s, &rr_params(&spec), batch, gate, &sh.stop, slot)
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
                        engine::udp_stream_recv(
                            &s,
                            batch,
                            size,
                            coalesce,
                            sh.client_ip,
                            &sh.stop,
                            slot,
                        )
                        .map(|strays| {
                            sh.stats.strays.fetch_add(strays, Ordering::Relaxed);
                        })
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
                    let strays = engine::server_crr(
                        &l,
                        &spec.knobs,
                        &rr_params(&spec),
                        sh.client_ip,
                        &sh.token,
                        &sh.stop,
                        slot,
                    );
                    strays.map(|n| {
                        sh.stats.strays.fetch_add(n, Ordering::Relaxed);
                    })
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
            // The flows still to admit, claimed by whichever worker reads a
            // token: a worker whose share is full keeps the connections it
            // accepted and is still reading tokens from, and admits them
            // while the test lacks flows. Fixed shares closed such a
            // connection as a stray once its worker's share was full, and
            // the other worker then waited for a flow that never came
            // (many-flows: 29,999 of 30,000 accepted, no transaction).
            let left = Arc::new(AtomicUsize::new(flows));
            for i in 0..threads {
                let share = flows / threads + usize::from(i < flows % threads);
                if share == 0 {
                    continue;
                }
                // What this worker's table may hold: its share, and the
                // connections waiting for their token beside it (within
                // sys::FD_MARGIN, which plan_descriptors kept free).
                let holds = share + MAX_UNPROVEN_FLOWS;
                let spec = spec.clone();
                let fds = fds.clone();
                let left = left.clone();
                let job: Job = Box::new(move |sh, slot| {
                    sys::unshare_fd_table().map_err(|e| format!("unshare(CLONE_FILES): {e}"))?;
                    let conns =
                        accept_flows(&fds, Quota::Shared { holds, left: &left }, &spec, sh)?;
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
            let conns = match accept_flows(&fds, Quota::All(spec.flows as usize), &spec, &sh) {
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

/// Most accepted data connections one test's flow-accepting loop holds while
/// they have not yet presented their token; a newer one evicts the oldest,
/// so connections that stay silent can neither pile up descriptors nor
/// keep the client's flows out.
pub const MAX_UNPROVEN_FLOWS: usize = 64;

/// An accepted data connection that has not yet sent its whole preamble.
struct Unproven {
    stream: TcpStream,
    got: [u8; proto::TCP_PREAMBLE_LEN],
    len: usize,
    until: Instant,
    key: u64,
}

/// What reading a connection's preamble came to.
enum Preamble {
    /// The test's token: the connection is one of its flows.
    Proven,
    /// Not all of it yet.
    Partial,
    /// Something else, an end or an error: close it.
    Wrong,
}

impl Unproven {
    /// Reads what has arrived of the preamble, without waiting and without
    /// reading past it (what follows is the flow's data).
    fn advance(&mut self, token: &[u8; proto::TOKEN_LEN]) -> Preamble {
        let fd = self.stream.as_raw_fd();
        while self.len < self.got.len() {
            match sys::recv_nowait(fd, &mut self.got[self.len..]) {
                Ok(0) => return Preamble::Wrong,
                Ok(n) => self.len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Preamble::Partial,
                Err(_) => return Preamble::Wrong,
            }
        }
        if proto::is_tcp_preamble(&self.got, token) {
            Preamble::Proven
        } else {
            Preamble::Wrong
        }
    }
}

/// How many flows one accepting loop admits.
enum Quota<'a> {
    /// All of the test's flows, in the process's shared table: the
    /// connections are registered so that a stop can shut them down from
    /// another thread.
    All(usize),
    /// Flows claimed from `left`, which the workers with tables of their
    /// own share; the loop holds at most `holds` connections (admitted or
    /// waiting for their token). Their numbers mean nothing in another
    /// thread's table, so they are not registered.
    Shared { holds: usize, left: &'a AtomicUsize },
}

impl Quota<'_> {
    /// Whether the test has all its flows (from this loop's view).
    fn complete(&self, admitted: usize) -> bool {
        match self {
            Quota::All(n) => admitted >= *n,
            Quota::Shared { left, .. } => left.load(Ordering::Acquire) == 0,
        }
    }

    /// Whether another connection may be accepted beside `admitted` flows
    /// and `waiting` connections still reading their token.
    fn room(&self, admitted: usize, waiting: usize) -> bool {
        match self {
            Quota::All(n) => admitted < *n,
            Quota::Shared { holds, .. } => admitted + waiting < *holds,
        }
    }

    /// The most flows this loop can end up holding.
    fn holds(&self) -> usize {
        match self {
            Quota::All(n) => *n,
            Quota::Shared { holds, .. } => *holds,
        }
    }

    /// Takes one flow for a connection that proved its token, or says the
    /// test has all its flows.
    fn claim(&self, admitted: usize) -> bool {
        match self {
            Quota::All(n) => admitted < *n,
            Quota::Shared { left, .. } => left
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok(),
        }
    }
}

/// Accepts data connections from the listeners (descriptors of the
/// calling thread's table) until the test has its flows ([`Quota`]).
/// A connection counts as a flow only once it has
/// sent the test's token ([`proto::tcp_preamble`]); one from another
/// address, with another first 20 bytes, or without them within
/// [`engine::TOKEN_DEADLINE`] is closed unanswered and counted as a stray.
/// At most [`MAX_UNPROVEN_FLOWS`] wait for their token at a time: that, a
/// 20-byte buffer each and no thread is all a stranger's connection costs.
fn accept_flows(
    listeners: &[RawFd],
    quota: Quota<'_>,
    spec: &TestSpec,
    sh: &Shared,
) -> Result<Vec<Arc<TcpStream>>, String> {
    let shared_table = matches!(quota, Quota::All(_));
    let ep = sys::Epoll::new().map_err(|e| format!("epoll_create: {e}"))?;
    for (i, &fd) in listeners.iter().enumerate() {
        ep.add(fd, sys::EPOLLIN, i as u64)
            .map_err(|e| format!("epoll_ctl on a listener: {e}"))?;
    }
    // Tokens of waiting connections start above the listeners'.
    let first_key = listeners.len() as u64;
    let mut next_key = first_key;
    let mut waiting: std::collections::VecDeque<Unproven> = std::collections::VecDeque::new();
    let mut events = sys::event_buffer(64);
    let mut out = Vec::with_capacity(quota.holds());
    let stray = || {
        sh.stats.strays.fetch_add(1, Ordering::Relaxed);
    };
    let admit = |s: TcpStream, out: &mut Vec<Arc<TcpStream>>| {
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
    };
    while !quota.complete(out.len()) && !sh.stop.load(Ordering::Relaxed) {
        let n = ep
            .wait(&mut events, 100)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..n] {
            let key = sys::event_token(ev);
            if key >= first_key {
                // A waiting connection has more of its preamble.
                let Some(at) = waiting.iter().position(|w| w.key == key) else {
                    continue;
                };
                match waiting[at].advance(&sh.token) {
                    Preamble::Partial => {}
                    verdict => {
                        let w = waiting.remove(at).expect("position is in range");
                        let _ = ep.delete(w.stream.as_raw_fd());
                        if matches!(verdict, Preamble::Proven) && quota.claim(out.len()) {
                            admit(w.stream, &mut out);
                        } else {
                            stray();
                        }
                    }
                }
                continue;
            }
            let fd = listeners[key as usize];
            while quota.room(out.len(), waiting.len()) && !quota.complete(out.len()) {
                let s = match sys::accept_nonblocking(fd) {
                    Ok(s) => s,
                    Err(e) if nothing_to_accept(&e) => break,
                    Err(e) => {
                        return Err(format!(
                            "accepting data connection {} of {}: {e}",
                            out.len() + 1,
                            spec.flows
                        ))
                    }
                };
                // Only the client that asked: another address gets its
                // connection closed before a byte of payload.
                let from = s.peer_addr().map(|a| a.ip().to_canonical());
                if from.ok() != Some(sh.client_ip) {
                    stray();
                    continue;
                }
                let mut w = Unproven {
                    stream: s,
                    got: [0; proto::TCP_PREAMBLE_LEN],
                    len: 0,
                    until: Instant::now() + engine::TOKEN_DEADLINE,
                    key: next_key,
                };
                match w.advance(&sh.token) {
                    // The usual case: the preamble came with the handshake.
                    Preamble::Proven => {
                        if quota.claim(out.len()) {
                            admit(w.stream, &mut out)
                        } else {
                            stray()
                        }
                    }
                    Preamble::Wrong => stray(),
                    Preamble::Partial => {
                        if waiting.len() >= MAX_UNPROVEN_FLOWS {
                            if let Some(old) = waiting.pop_front() {
                                let _ = ep.delete(old.stream.as_raw_fd());
                                stray();
                            }
                        }
                        if ep.add(w.stream.as_raw_fd(), sys::EPOLLIN, next_key).is_ok() {
                            next_key += 1;
                            waiting.push_back(w);
                        } else {
                            stray();
                        }
                    }
                }
            }
        }
        // Oldest first: those past their deadline are at the front.
        let now = Instant::now();
        while waiting.front().is_some_and(|w| w.until <= now) {
            if let Some(old) = waiting.pop_front() {
                let _ = ep.delete(old.stream.as_raw_fd());
                stray();
            }
        }
    }
    // Still without their token when the flows were complete: closed here.
    for _ in waiting.drain(..) {
        stray();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    fn shared(token: [u8; proto::TOKEN_LEN]) -> Shared {
        let stats = Arc::new(ServerStats::default());
        Shared::new(0, IpAddr::V4(Ipv4Addr::LOCALHOST), token, None, stats)
    }

    /// Workers with tables of their own share the test's flows: one whose
    /// share is full keeps a connection still reading its token and admits
    /// it while the test lacks a flow. A fixed share of 1 closed A here as
    /// a stray once B filled it, and a second worker would have waited for
    /// A for ever (many-flows at 30,000 flows: 29,999 accepted, no
    /// transaction).
    #[test]
    fn a_worker_with_a_full_share_keeps_a_flow_still_reading_its_token() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let to = listener.local_addr().unwrap();
        let token = [7u8; proto::TOKEN_LEN];
        let sh = Arc::new(shared(token));
        let spec = ClientConfig::new(TestKind::TcpRr, to).spec;
        let left = Arc::new(AtomicUsize::new(2));
        let fd = listener.as_raw_fd();
        let worker = {
            let (sh, left) = (sh.clone(), left.clone());
            std::thread::spawn(move || {
                let quota = Quota::Shared {
                    holds: 1 + MAX_UNPROVEN_FLOWS,
                    left: &left,
                };
                accept_flows(&[fd], quota, &spec, &sh)
            })
        };
        let preamble = proto::tcp_preamble(&token);
        // A connects first and is slow with its token.
        let mut a = TcpStream::connect(to).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        // B fills the worker's share of 1.
        let mut b = TcpStream::connect(to).unwrap();
        b.write_all(&preamble).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        a.write_all(&preamble).unwrap();
        let flows = worker.join().unwrap().unwrap();
        assert_eq!(flows.len(), 2, "both flows admitted");
        assert_eq!(left.load(Ordering::Acquire), 0);
        assert_eq!(sh.accepted.load(Ordering::Relaxed), 2);
        assert_eq!(sh.stats.strays.load(Ordering::Relaxed), 0, "A not closed");
        // A is still open on the server's side: no end of stream.
        a.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut byte = [0u8; 1];
        assert!(
            a.read(&mut byte).is_err(),
            "A must not see its connection closed"
        );
        drop((flows, listener));
    }

    /// Once the test has its flows, a token read later claims none (its
    /// connection is a stray): the shared count never goes below zero.
    #[test]
    fn the_shared_count_admits_no_flow_past_the_tests_flows() {
        let q_left = AtomicUsize::new(1);
        let q = Quota::Shared {
            holds: 4,
            left: &q_left,
        };
        assert!(!q.complete(0));
        assert!(q.claim(0));
        assert!(q.complete(1));
        assert!(!q.claim(1));
        assert_eq!(q_left.load(Ordering::Acquire), 0);
        assert!(q.room(1, 2) && !q.room(2, 2));
        let all = Quota::All(2);
        assert!(all.claim(1) && !all.claim(2) && all.complete(2) && !all.complete(1));
    }
}
