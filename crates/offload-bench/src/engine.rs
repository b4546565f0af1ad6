//! The data-path loops of both ends: request/response (blocking for one flow
//! per thread, edge-triggered epoll for many), connect/request/response,
//! TCP stream and UDP flood.
//!
//! Hot-path rule: per transaction, the only syscalls are the I/O itself (and
//! the epoll wait, shared by every transaction it reports); the clock is read
//! once per completed transaction (its end is the next one's start), and the
//! progress counter is a relaxed store to a cache line owned by the thread.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::config::{CloseMode, SocketKnobs};
use crate::proto::{JOIN_LEN, TCP_PREAMBLE_LEN, TOKEN_LEN, UDP_JOIN, UDP_JOIN_ACK};
use crate::sock;
use crate::sys;

/// A histogram of nanoseconds from 1 ns to 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts; a failure here is a
    // programming error, not bad input.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("constant histogram bounds")
}

/// Progress counters of one worker, on a cache line of their own so that
/// sampling them from the control thread does not slow the worker.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Slot {
    /// Transactions, writes or packets so far.
    pub txn: AtomicU64,
    /// Payload bytes so far.
    pub bytes: AtomicU64,
    /// Datagrams so far.
    pub packets: AtomicU64,
}

impl Slot {
    fn set(&self, txn: u64, bytes: u64, packets: u64) {
        self.txn.store(txn, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
        self.packets.store(packets, Ordering::Relaxed);
    }
}

/// Sums of all slots.
pub fn sum_slots(slots: &[Slot]) -> (u64, u64, u64) {
    slots.iter().fold((0, 0, 0), |a, s| {
        (
            a.0 + s.txn.load(Ordering::Relaxed),
            a.1 + s.bytes.load(Ordering::Relaxed),
            a.2 + s.packets.load(Ordering::Relaxed),
        )
    })
}

/// The shared clock edges of a run.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Start of the warm-up.
    pub start: Instant,
    /// Start of the measurement window.
    pub ws: Instant,
    /// End of the measurement window: workers stop here.
    pub we: Instant,
}

/// What a client worker measured.
#[derive(Debug)]
pub struct Outcome {
    /// Latency of every transaction completed in the window (ns).
    pub hist: Histogram<u64>,
    /// Transactions completed in the window.
    pub window_txn: u64,
    /// Transactions completed in the whole run.
    pub total_txn: u64,
    /// UDP transactions given up as lost.
    pub lost: u64,
    /// Failed sends (ENOBUFS, EAGAIN, ECONNREFUSED).
    pub send_errors: u64,
}

impl Outcome {
    /// An outcome with nothing counted.
    pub fn empty() -> Self {
        Outcome {
            hist: new_histogram(),
            window_txn: 0,
            total_txn: 0,
            lost: 0,
            send_errors: 0,
        }
    }

    #[inline]
    fn complete(&mut self, t0: Instant, t1: Instant, w: &Window, slot: &Slot) {
        self.total_txn += 1;
        if t1 >= w.ws && t1 < w.we {
            let ns = t1
                .saturating_duration_since(t0)
                .as_nanos()
                .min(u128::from(u64::MAX)) as u64;
            self.hist.saturating_record(ns.max(1));
            self.window_txn += 1;
        }
        slot.txn.store(self.total_txn, Ordering::Relaxed);
    }
}

/// Request/response parameters of a worker.
#[derive(Debug, Clone)]
pub struct RrParams {
    /// Request bytes.
    pub request: usize,
    /// Response bytes.
    pub response: usize,
    /// Per-flow interval of the fixed-rate mode.
    pub rate_interval: Option<Duration>,
    /// UDP loss timeout.
    pub udp_timeout: Duration,
    /// TCP: requests in flight per connection (1: strict request/response).
    pub burst: usize,
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn errmsg(what: &str, e: io::Error) -> String {
    format!("{what}: {e}")
}

/// Writes all of `buf` on a blocking socket, in as few calls as the kernel
/// allows (one for a whole message when the send buffer has room).
fn write_all_fd(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match sys::send(fd, buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills `buf` from a blocking socket with a receive timeout. Returns
/// Ok(false) on a clean end: EOF before the first byte, or `stop` set while
/// idle. A timeout past `deadline` is an error.
fn read_full(
    fd: RawFd,
    buf: &mut [u8],
    stop: Option<&AtomicBool>,
    deadline: Option<Instant>,
) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match sys::recv(fd, &mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed mid-message",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if got == 0 && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                    return Ok(false);
                }
                if deadline.is_some_and(|d| Instant::now() > d) {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no response from the peer",
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Reads into `buf` from a blocking socket with a receive timeout until at
/// least `min` bytes arrived, taking what else came with them (at most
/// `buf.len()`). Ok(None) on an end before `min` bytes or `stop` set; a
/// timeout past `deadline` is an error.
fn read_at_least(
    fd: RawFd,
    buf: &mut [u8],
    min: usize,
    stop: &AtomicBool,
    deadline: Instant,
) -> io::Result<Option<usize>> {
    let mut got = 0;
    while got < min {
        match sys::recv(fd, &mut buf[got..]) {
            Ok(0) => return Ok(None),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(None);
                }
                if Instant::now() > deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no token from the peer",
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(got))
}

/// How long a client waits past the window's end for a response before it
/// calls the peer dead.
const GRACE: Duration = Duration::from_secs(5);

/// Client request/response on one blocking socket (TCP or connected UDP).
pub fn client_rr_blocking(
    fd: RawFd,
    udp: bool,
    p: &RrParams,
    w: &Window,
    slot: &Slot,
) -> Result<Outcome, String> {
    // A receive timeout makes every blocking wait arm a kernel timer, which
    // costs measurably per transaction: TCP waits without one (a dead peer
    // is reported by EOF/RST, a silent one by the client's watchdog, which
    // shuts the socket down); UDP needs one to detect loss.
    let timeout = if udp { p.udp_timeout } else { Duration::ZERO };
    sock::set_recv_timeout(fd, timeout).map_err(|e| errmsg("setting SO_RCVTIMEO", e))?;
    let req = vec![0x5au8; p.request];
    let mut resp = vec![0u8; if udp { 65536 } else { p.response }];
    let mut out = Outcome::empty();
    let deadline = w.we + GRACE;
    let mut t0 = Instant::now();
    let mut intended = t0;
    loop {
        if p.rate_interval.is_some() {
            if t0 < intended {
                std::thread::sleep(intended - t0);
            }
            // Coordinated omission: latency counts from when the request
            // should have left, even if an earlier slow response delayed it.
            t0 = intended;
        }
        if udp {
            if let Err(e) = sys::send(fd, &req) {
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::ECONNREFUSED)
                ) {
                    return Err(errmsg("udp send", e));
                }
                out.send_errors += 1;
            }
            match sys::recv(fd, &mut resp) {
                Ok(_) => {}
                Err(e) if is_timeout(&e) || e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                    out.lost += 1;
                    let now = Instant::now();
                    if now >= w.we {
                        break;
                    }
                    if let Some(iv) = p.rate_interval {
                        intended += iv;
                    }
                    t0 = now;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(errmsg("udp recv", e)),
            }
        } else {
            write_all_fd(fd, &req).map_err(|e| errmsg("sending request", e))?;
            match read_full(fd, &mut resp, None, Some(deadline)) {
                Ok(true) => {}
                Ok(false) => return Err("the server closed the data connection".into()),
                Err(e) => return Err(errmsg("reading response", e)),
            }
        }
        let t1 = Instant::now();
        out.complete(t0, t1, w, slot);
        if t1 >= w.we {
            break;
        }
        if let Some(iv) = p.rate_interval {
            intended += iv;
        }
        t0 = t1;
    }
    Ok(out)
}

struct ClientConn {
    sent: usize,
    got: usize,
    t0: Instant,
    /// Whether a transaction is in flight on this socket.
    busy: bool,
}

/// Client request/response over many non-blocking sockets with
/// edge-triggered epoll: each socket has at most one transaction in
/// flight. With `in_flight` = Some(k), at most k transactions are
/// outstanding at once and the sockets take turns (a completed one goes to
/// the back of the line, the longest idle one sends next), so that every
/// flow is used while the latency measures the stack rather than a queue
/// of thousands of requests; None: every socket always has one.
pub fn client_rr_epoll(
    fds: &[RawFd],
    udp: bool,
    p: &RrParams,
    in_flight: Option<usize>,
    w: &Window,
    slot: &Slot,
) -> Result<Outcome, String> {
    let ep = sys::Epoll::new().map_err(|e| errmsg("epoll_create", e))?;
    let flags = if udp {
        sys::EPOLLIN | sys::EPOLLET
    } else {
        sys::EPOLLIN | sys::EPOLLOUT | sys::EPOLLET
    };
    for (i, &fd) in fds.iter().enumerate() {
        ep.add(fd, flags, i as u64)
            .map_err(|e| errmsg("epoll_ctl", e))?;
    }
    let req = vec![0x5au8; p.request];
    let mut scratch = vec![0u8; if udp { 65536 } else { p.response.min(1 << 20) }];
    let mut out = Outcome::empty();
    let now = Instant::now();
    let mut conns: Vec<ClientConn> = fds
        .iter()
        .map(|_| ClientConn {
            sent: 0,
            got: 0,
            t0: now,
            busy: false,
        })
        .collect();
    let window = in_flight.map_or(fds.len(), |k| k.clamp(1, fds.len().max(1)));
    // Sockets without a transaction, in the order they next send.
    let mut idle: std::collections::VecDeque<usize> = (window..fds.len()).collect();
    // Returns whether the whole request is out.
    let send_req = |fd: RawFd, c: &mut ClientConn, out: &mut Outcome| -> Result<bool, String> {
        while c.sent < req.len() {
            match sys::send(fd, &req[c.sent..]) {
                Ok(n) => c.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if udp
                        && matches!(
                            e.raw_os_error(),
                            Some(libc::ENOBUFS) | Some(libc::ECONNREFUSED)
                        ) =>
                {
                    // Counted; the loss timer will resend.
                    out.send_errors += 1;
                    c.sent = req.len();
                }
                Err(e) => return Err(errmsg("sending request", e)),
            }
        }
        Ok(true)
    };
    for (i, c) in conns.iter_mut().enumerate().take(window) {
        c.busy = true;
        send_req(fds[i], c, &mut out)?;
    }
    let mut events = sys::event_buffer(1024);
    let mut last_scan = now;
    let deadline = w.we + GRACE;
    'outer: loop {
        let n = ep
            .wait(&mut events, 10)
            .map_err(|e| errmsg("epoll_wait", e))?;
        let mut last_clock = None;
        for ev in &events[..n] {
            let i = sys::event_token(ev) as usize;
            let Some(c) = conns.get_mut(i) else { continue };
            if !c.busy {
                continue;
            }
            let fd = fds[i];
            if c.sent < req.len() && !send_req(fd, c, &mut out)? {
                continue;
            }
            loop {
                let want = if udp {
                    scratch.len()
                } else {
                    (p.response - c.got).min(scratch.len())
                };
                match sys::recv(fd, &mut scratch[..want]) {
                    Ok(0) if !udp => return Err("the server closed a data connection".into()),
                    Ok(k) => {
                        c.got += k;
                        if udp || c.got >= p.response {
                            let t1 = Instant::now();
                            last_clock = Some(t1);
                            out.complete(c.t0, t1, w, slot);
                            if t1 >= w.we {
                                break 'outer;
                            }
                            c.got = 0;
                            c.sent = 0;
                            // The next request goes out on this socket, or
                            // on the longest idle one when flows take turns.
                            let next = match idle.pop_front() {
                                Some(j) => {
                                    c.busy = false;
                                    idle.push_back(i);
                                    j
                                }
                                None => i,
                            };
                            let n = &mut conns[next];
                            n.busy = true;
                            n.t0 = t1;
                            send_req(fds[next], n, &mut out)?;
                            // Edge-triggered: the next response is a new
                            // edge, so do not spend a read on EAGAIN here.
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if udp && e.raw_os_error() == Some(libc::ECONNREFUSED) => break,
                    Err(e) => return Err(errmsg("reading response", e)),
                }
            }
        }
        let now = match last_clock {
            Some(t) => t,
            None => Instant::now(),
        };
        if now >= w.we {
            if !udp && now > deadline {
                return Err("no response from the server".into());
            }
            break;
        }
        if udp && now.duration_since(last_scan) >= Duration::from_millis(20) {
            last_scan = now;
            for (i, c) in conns.iter_mut().enumerate() {
                if c.busy && now.duration_since(c.t0) >= p.udp_timeout {
                    out.lost += 1;
                    c.t0 = now;
                    c.sent = 0;
                    send_req(fds[i], c, &mut out)?;
                }
            }
        }
    }
    Ok(out)
}

struct BurstConn {
    /// Send times of the requests in flight, oldest first.
    in_flight: std::collections::VecDeque<Instant>,
    /// Request bytes queued but not yet written.
    unsent: usize,
    /// Bytes of the oldest response received so far.
    got: usize,
}

/// Client tcp-rr with `p.burst` requests in flight on every connection
/// (non-blocking sockets, edge-triggered epoll). Responses come back in
/// order on a TCP connection, so each completes the oldest request; its
/// latency counts from when that request was queued.
pub fn client_rr_burst(
    fds: &[RawFd],
    p: &RrParams,
    w: &Window,
    slot: &Slot,
) -> Result<Outcome, String> {
    let ep = sys::Epoll::new().map_err(|e| errmsg("epoll_create", e))?;
    for (i, &fd) in fds.iter().enumerate() {
        ep.add(fd, sys::EPOLLIN | sys::EPOLLOUT | sys::EPOLLET, i as u64)
            .map_err(|e| errmsg("epoll_ctl", e))?;
    }
    let burst = p.burst.max(1);
    // Requests are all alike, so any slice of this buffer is a valid tail.
    let reqs = vec![0x5au8; (p.request * burst).min(4 << 20).max(p.request)];
    let mut scratch = vec![0u8; (p.response * burst).clamp(1, 1 << 20)];
    let mut out = Outcome::empty();
    let now = Instant::now();
    let mut conns: Vec<BurstConn> = fds
        .iter()
        .map(|_| BurstConn {
            in_flight: std::iter::repeat_n(now, burst).collect(),
            unsent: p.request * burst,
            got: 0,
        })
        .collect();
    let flush = |fd: RawFd, c: &mut BurstConn| -> Result<(), String> {
        while c.unsent > 0 {
            match sys::send(fd, &reqs[..c.unsent.min(reqs.len())]) {
                Ok(n) => c.unsent -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(errmsg("sending request", e)),
            }
        }
        Ok(())
    };
    for (i, c) in conns.iter_mut().enumerate() {
        flush(fds[i], c)?;
    }
    let mut events = sys::event_buffer(1024);
    'outer: loop {
        let n = ep
            .wait(&mut events, 10)
            .map_err(|e| errmsg("epoll_wait", e))?;
        for ev in &events[..n] {
            let i = sys::event_token(ev) as usize;
            let Some(c) = conns.get_mut(i) else { continue };
            let fd = fds[i];
            flush(fd, c)?;
            loop {
                match sys::recv(fd, &mut scratch) {
                    Ok(0) => return Err("the server closed a data connection".into()),
                    Ok(mut k) => {
                        let mut t1 = None;
                        while k > 0 {
                            let take = k.min(p.response - c.got);
                            c.got += take;
                            k -= take;
                            if c.got == p.response {
                                c.got = 0;
                                let t = *t1.get_or_insert_with(Instant::now);
                                let t0 = c.in_flight.pop_front().unwrap_or(t);
                                out.complete(t0, t, w, slot);
                                c.in_flight.push_back(t);
                                c.unsent += p.request;
                            }
                        }
                        if let Some(t) = t1 {
                            if t >= w.we {
                                break 'outer;
                            }
                            flush(fd, c)?;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(errmsg("reading response", e)),
                }
            }
        }
        if Instant::now() >= w.we {
            break;
        }
    }
    Ok(out)
}

/// Client tcp-crr: connect, request, response, close, per transaction.
pub fn client_crr(
    addr: SocketAddr,
    knobs: &SocketKnobs,
    close: CloseMode,
    token: &[u8; TOKEN_LEN],
    p: &RrParams,
    w: &Window,
    slot: &Slot,
) -> Result<Outcome, String> {
    // The connection's preamble and the request in one send.
    let mut req = crate::proto::tcp_preamble(token).to_vec();
    req.resize(TCP_PREAMBLE_LEN + p.request, 0x5a);
    let mut resp = vec![0u8; p.response];
    let mut out = Outcome::empty();
    let mut t0 = Instant::now();
    loop {
        let stream = sock::tcp_connect(addr, knobs).map_err(|e| errmsg("connect", e))?;
        let fd = stream.as_raw_fd();
        write_all_fd(fd, &req).map_err(|e| errmsg("sending request", e))?;
        match read_full(fd, &mut resp, None, None) {
            Ok(true) => {}
            Ok(false) => return Err("the server closed the connection before responding".into()),
            Err(e) => return Err(errmsg("reading response", e)),
        }
        if close == CloseMode::Reset {
            sock::set_linger_zero(&stream).map_err(|e| errmsg("SO_LINGER", e))?;
        }
        drop(stream);
        let t1 = Instant::now();
        out.complete(t0, t1, w, slot);
        if t1 >= w.we {
            break;
        }
        t0 = t1;
    }
    Ok(out)
}

/// Server request/response on one blocking TCP connection.
pub fn server_rr_blocking(
    stream: &TcpStream,
    p: &RrParams,
    stop: &AtomicBool,
    slot: &Slot,
) -> Result<(), String> {
    let fd = stream.as_raw_fd();
    // No receive timeout (it would arm a timer per wait, see
    // client_rr_blocking): the server stops this worker by shutting the
    // socket down, which ends the blocking read.
    sock::set_recv_timeout(fd, Duration::ZERO).map_err(|e| errmsg("SO_RCVTIMEO", e))?;
    let mut req = vec![0u8; p.request];
    let resp = vec![0xa5u8; p.response];
    let mut total = 0u64;
    loop {
        match read_full(fd, &mut req, Some(stop), None) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if stop.load(Ordering::Relaxed) => {
                let _ = e;
                return Ok(());
            }
            Err(e) => return Err(errmsg("reading request", e)),
        }
        match write_all_fd(fd, &resp) {
            Ok(()) => {}
            // The client stops at the end of its window without waiting for
            // the last responses: a reset then is the normal end.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPIPE) | Some(libc::ECONNRESET)) => {
                return Ok(())
            }
            Err(e) => return Err(errmsg("sending response", e)),
        }
        total += 1;
        slot.txn.store(total, Ordering::Relaxed);
    }
}

struct ServerConn {
    got: usize,
    sending: Option<usize>,
    open: bool,
}

/// Server request/response over many non-blocking TCP connections.
pub fn server_rr_epoll(
    streams: &[std::sync::Arc<TcpStream>],
    p: &RrParams,
    stop: &AtomicBool,
    slot: &Slot,
) -> Result<(), String> {
    let ep = sys::Epoll::new().map_err(|e| errmsg("epoll_create", e))?;
    for (i, s) in streams.iter().enumerate() {
        s.set_nonblocking(true)
            .map_err(|e| errmsg("O_NONBLOCK", e))?;
        ep.add(
            s.as_raw_fd(),
            sys::EPOLLIN | sys::EPOLLOUT | sys::EPOLLET,
            i as u64,
        )
        .map_err(|e| errmsg("epoll_ctl", e))?;
    }
    let mut req = vec![0u8; p.request.min(1 << 20)];
    let resp = vec![0xa5u8; p.response];
    let mut conns: Vec<ServerConn> = streams
        .iter()
        .map(|_| ServerConn {
            got: 0,
            sending: None,
            open: true,
        })
        .collect();
    let mut live = conns.len();
    let mut total = 0u64;
    let mut events = sys::event_buffer(1024);
    while live > 0 && !stop.load(Ordering::Relaxed) {
        let n = ep
            .wait(&mut events, 100)
            .map_err(|e| errmsg("epoll_wait", e))?;
        for ev in &events[..n] {
            let i = sys::event_token(ev) as usize;
            let Some(c) = conns.get_mut(i) else { continue };
            if !c.open {
                continue;
            }
            let fd = streams[i].as_raw_fd();
            loop {
                if let Some(off) = c.sending {
                    match sys::send(fd, &resp[off..]) {
                        Ok(k) if off + k == resp.len() => {
                            c.sending = None;
                            total += 1;
                            slot.txn.store(total, Ordering::Relaxed);
                            // Strict request/response: the next request is
                            // a new edge. With a burst, more requests may
                            // already wait in the buffer: read on.
                            if p.burst <= 1 {
                                break;
                            }
                        }
                        Ok(k) => c.sending = Some(off + k),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            c.open = false;
                            live -= 1;
                            break;
                        }
                    }
                } else {
                    let want = (p.request - c.got).min(req.len());
                    match sys::recv(fd, &mut req[..want]) {
                        Ok(0) => {
                            c.open = false;
                            live -= 1;
                            break;
                        }
                        Ok(k) => {
                            c.got += k;
                            if c.got >= p.request {
                                c.got = 0;
                                c.sending = Some(0);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            c.open = false;
                            live -= 1;
                            break;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Which sources a udp-rr server answers: only those that sent a join
/// datagram carrying the test's token (which only the control client
/// learnt). A join is answered with an acknowledgement of the same size,
/// so nothing a stranger sends is reflected or amplified; every other
/// datagram from a source that has not joined is dropped and counted.
#[derive(Debug)]
pub struct UdpGate {
    token: [u8; TOKEN_LEN],
    joined: RwLock<HashSet<SocketAddr>>,
    strays: AtomicU64,
}

/// What to do with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateVerdict {
    /// A request from a joined source: answer it.
    Answer,
    /// A valid join: acknowledge it (the source is now joined).
    Join,
    /// Anything else: drop it.
    Drop,
}

impl UdpGate {
    /// A gate for this token, nobody joined yet.
    pub fn new(token: [u8; TOKEN_LEN]) -> Self {
        UdpGate {
            token,
            joined: RwLock::new(HashSet::new()),
            strays: AtomicU64::new(0),
        }
    }

    /// Datagrams dropped so far.
    pub fn strays(&self) -> u64 {
        self.strays.load(Ordering::Relaxed)
    }

    /// The acknowledgement of a join.
    pub fn ack(&self) -> [u8; JOIN_LEN] {
        let mut a = [0u8; JOIN_LEN];
        a[..4].copy_from_slice(&UDP_JOIN_ACK);
        a[4..].copy_from_slice(&self.token);
        a
    }

    /// Judges one datagram. `seen` is the calling worker's own copy of the
    /// joined set, so a request from a known source takes no lock.
    pub fn judge(
        &self,
        seen: &mut HashSet<SocketAddr>,
        data: &[u8],
        from: SocketAddr,
    ) -> GateVerdict {
        if data.len() == JOIN_LEN && data[..4] == UDP_JOIN {
            if crate::proto::same_bytes(&data[4..], &self.token) {
                if let Ok(mut j) = self.joined.write() {
                    j.insert(from);
                }
                seen.insert(from);
                return GateVerdict::Join;
            }
            self.strays.fetch_add(1, Ordering::Relaxed);
            return GateVerdict::Drop;
        }
        if seen.contains(&from) {
            return GateVerdict::Answer;
        }
        if self.joined.read().is_ok_and(|j| j.contains(&from)) {
            seen.insert(from);
            return GateVerdict::Answer;
        }
        self.strays.fetch_add(1, Ordering::Relaxed);
        GateVerdict::Drop
    }
}

/// Server UDP request/response: answers every datagram from a source that
/// joined through `gate` with a response (recvmmsg/sendmmsg when `batch`
/// > 1), acknowledges joins, drops the rest.
pub fn server_udp_rr(
    sock: &UdpSocket,
    p: &RrParams,
    batch: usize,
    gate: &UdpGate,
    stop: &AtomicBool,
    slot: &Slot,
) -> Result<(), String> {
    let fd = sock.as_raw_fd();
    sock::set_recv_timeout(fd, Duration::from_millis(100)).map_err(|e| errmsg("SO_RCVTIMEO", e))?;
    let resp = vec![0xa5u8; p.response];
    let ack = gate.ack();
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut rb = sys::RecvBatch::new(batch, 65536);
    let mut buf = vec![0u8; 65536];
    let mut answer: Vec<usize> = Vec::with_capacity(batch);
    while !stop.load(Ordering::Relaxed) {
        if batch > 1 {
            match rb.recv(fd) {
                Ok(n) => {
                    answer.clear();
                    for i in 0..n {
                        let Some(from) = rb.source(i) else { continue };
                        match gate.judge(&mut seen, rb.data(i), from) {
                            GateVerdict::Answer => answer.push(i),
                            GateVerdict::Join => {
                                let _ = sock.send_to(&ack, from);
                            }
                            GateVerdict::Drop => {}
                        }
                    }
                    if !answer.is_empty() {
                        let sent = sys::send_replies(fd, &rb, &answer, &resp).unwrap_or(0);
                        total += sent as u64;
                    }
                }
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(errmsg("recvmmsg", e)),
            }
        } else {
            match sock.recv_from(&mut buf) {
                Ok((len, from)) => match gate.judge(&mut seen, &buf[..len.min(buf.len())], from) {
                    GateVerdict::Answer => {
                        if sock.send_to(&resp, from).is_ok() {
                            total += 1;
                        }
                    }
                    GateVerdict::Join => {
                        let _ = sock.send_to(&ack, from);
                    }
                    GateVerdict::Drop => {}
                },
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(errmsg("recvfrom", e)),
            }
        }
        slot.txn.store(total, Ordering::Relaxed);
        slot.packets.store(total, Ordering::Relaxed);
    }
    Ok(())
}

/// Client side of a udp-rr join: sends the token on a connected socket
/// until the server answers (its acknowledgement, or any datagram: the
/// server sends nothing to a source that has not joined), then drains what
/// else arrived. Waits 50 ms, then twice as long each time, about 6 s in all.
pub fn udp_join(sock: &UdpSocket, token: &[u8; TOKEN_LEN]) -> io::Result<()> {
    let mut join = [0u8; JOIN_LEN];
    join[..4].copy_from_slice(&UDP_JOIN);
    join[4..].copy_from_slice(token);
    let mut buf = [0u8; 64];
    let mut wait = Duration::from_millis(50);
    for _ in 0..7 {
        sock.send(&join)?;
        sock.set_read_timeout(Some(wait))?;
        match sock.recv(&mut buf) {
            Ok(_) => {
                // Acks of earlier joins still queued would otherwise be read
                // as responses.
                sock.set_nonblocking(true)?;
                while sock.recv(&mut buf).is_ok() {}
                sock.set_nonblocking(false)?;
                sock.set_read_timeout(None)?;
                return Ok(());
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        wait *= 2;
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "the server did not answer the flow's join datagram",
    ))
}

/// How long a data connection has to present its test's token after the
/// server accepted it; an honest client sends it right after connecting.
pub const TOKEN_DEADLINE: Duration = Duration::from_secs(2);

/// How long a tcp-crr worker waits for the token of a connection the
/// kernel passed on without data: with TCP_DEFER_ACCEPT an honest
/// connection is accepted with its preamble and request already there, so
/// one that has nothing after the defer period is a stray, and may hold a
/// worker this long at most.
pub const CRR_SILENT_DEADLINE: Duration = Duration::from_millis(200);

/// Server tcp-crr: accept, read the preamble and the request, respond,
/// wait for the client's close. Several workers share one listener (with
/// TCP_DEFER_ACCEPT, so a connection that sends nothing reaches no worker
/// for the defer period). Connections from another address than `client`,
/// or without `token` first, are closed unanswered; returns how many were.
pub fn server_crr(
    listener: &TcpListener,
    knobs: &SocketKnobs,
    p: &RrParams,
    client: IpAddr,
    token: &[u8; TOKEN_LEN],
    stop: &AtomicBool,
    slot: &Slot,
) -> Result<u64, String> {
    sock::set_recv_timeout(listener.as_raw_fd(), Duration::from_millis(100))
        .map_err(|e| errmsg("SO_RCVTIMEO", e))?;
    let mut req = vec![0u8; TCP_PREAMBLE_LEN + p.request];
    let resp = vec![0xa5u8; p.response];
    let mut total = 0u64;
    let mut one = [0u8; 1];
    let mut strays = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept() {
            Ok((s, from)) if from.ip().to_canonical() == client => s,
            Ok(_) => {
                strays += 1;
                continue;
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(errmsg("accept", e)),
        };
        let fd = stream.as_raw_fd();
        // The preamble first, within a deadline: a connection that presents
        // no token is closed before it costs a response or option calls.
        // (Accepted sockets inherit the listener's SO_RCVTIMEO, so the
        // deadline is checked every 100 ms at most.)
        let silent = !sys::readable_now(fd);
        let deadline = Instant::now()
            + if silent {
                CRR_SILENT_DEADLINE
            } else {
                TOKEN_DEADLINE
            };
        // Usually one recv brings the preamble and the whole request.
        let got = match read_at_least(fd, &mut req, TCP_PREAMBLE_LEN, stop, deadline) {
            Ok(Some(n)) if crate::proto::is_tcp_preamble(&req[..TCP_PREAMBLE_LEN], token) => n,
            Ok(Some(_)) | Err(_) => {
                strays += 1;
                continue;
            }
            Ok(None) => continue,
        };
        if knobs.nodelay || knobs.busy_poll_us.is_some() {
            sock::apply_tcp(&stream, knobs).map_err(|e| errmsg("socket options", e))?;
        }
        if got < req.len() {
            match read_full(fd, &mut req[got..], Some(stop), None) {
                Ok(true) => {}
                Ok(false) | Err(_) => continue,
            }
        }
        if write_all_fd(fd, &resp).is_err() {
            continue;
        }
        total += 1;
        slot.txn.store(total, Ordering::Relaxed);
        // Wait for the client's FIN (or RST) so the close is the client's.
        let _ = read_full(fd, &mut one, Some(stop), None);
    }
    Ok(strays)
}

/// When a stream loop stops.
#[derive(Debug, Clone, Copy)]
pub enum StopWhen<'a> {
    /// At this instant (client side).
    Deadline(Instant),
    /// When this flag is set (server side).
    Flag(&'a AtomicBool),
}

impl StopWhen<'_> {
    fn reached(&self) -> bool {
        match self {
            StopWhen::Deadline(d) => Instant::now() >= *d,
            StopWhen::Flag(f) => f.load(Ordering::Relaxed),
        }
    }
}

/// TCP stream over one blocking socket (one flow per thread): the iperf3
/// model, one `send` or `recv` per message and no readiness calls. Ends at
/// the deadline or flag, at EOF, or when the peer resets (the normal end of
/// a sender whose receiver's window is over). A stop shuts the socket down,
/// which ends a blocked call.
pub fn stream_blocking(
    fd: RawFd,
    send: bool,
    size: usize,
    until: StopWhen<'_>,
    slot: &Slot,
) -> Result<(), String> {
    sock::set_recv_timeout(fd, Duration::ZERO).map_err(|e| errmsg("SO_RCVTIMEO", e))?;
    let mut buf = vec![0x5au8; size.max(1)];
    let (mut calls, mut bytes) = (0u64, 0u64);
    while !until.reached() {
        let r = if send {
            sys::send(fd, &buf)
        } else {
            sys::recv(fd, &mut buf)
        };
        match r {
            Ok(0) if !send => break,
            Ok(k) => {
                calls += 1;
                bytes += k as u64;
                slot.set(calls, bytes, 0);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// TCP stream sender over non-blocking sockets.
pub fn stream_send(
    fds: &[RawFd],
    write_size: usize,
    until: StopWhen<'_>,
    slot: &Slot,
) -> Result<(), String> {
    let ep = sys::Epoll::new().map_err(|e| errmsg("epoll_create", e))?;
    for (i, &fd) in fds.iter().enumerate() {
        ep.add(fd, sys::EPOLLOUT | sys::EPOLLET, i as u64)
            .map_err(|e| errmsg("epoll_ctl", e))?;
    }
    let buf = vec![0x5au8; write_size];
    let mut open = vec![true; fds.len()];
    let mut live = fds.len();
    let (mut writes, mut bytes) = (0u64, 0u64);
    let mut events = sys::event_buffer(256);
    while live > 0 && !until.reached() {
        let n = ep
            .wait(&mut events, 100)
            .map_err(|e| errmsg("epoll_wait", e))?;
        for ev in &events[..n] {
            let i = sys::event_token(ev) as usize;
            if !open.get(i).copied().unwrap_or(false) {
                continue;
            }
            loop {
                match sys::send(fds[i], &buf) {
                    Ok(k) => {
                        writes += 1;
                        bytes += k as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        // The receiver closed: the normal end for a server
                        // sending to a client whose window is over.
                        open[i] = false;
                        live -= 1;
                        break;
                    }
                }
            }
        }
        slot.set(writes, bytes, 0);
    }
    Ok(())
}

/// TCP stream receiver over non-blocking sockets.
pub fn stream_recv(
    fds: &[RawFd],
    read_size: usize,
    until: StopWhen<'_>,
    slot: &Slot,
) -> Result<(), String> {
    let ep = sys::Epoll::new().map_err(|e| errmsg("epoll_create", e))?;
    for (i, &fd) in fds.iter().enumerate() {
        ep.add(fd, sys::EPOLLIN | sys::EPOLLET, i as u64)
            .map_err(|e| errmsg("epoll_ctl", e))?;
    }
    let mut buf = vec![0u8; read_size.max(1)];
    let mut open = vec![true; fds.len()];
    let mut live = fds.len();
    let (mut reads, mut bytes) = (0u64, 0u64);
    let mut events = sys::event_buffer(256);
    while live > 0 && !until.reached() {
        let n = ep
            .wait(&mut events, 100)
            .map_err(|e| errmsg("epoll_wait", e))?;
        for ev in &events[..n] {
            let i = sys::event_token(ev) as usize;
            if !open.get(i).copied().unwrap_or(false) {
                continue;
            }
            loop {
                match sys::recv(fds[i], &mut buf) {
                    Ok(0) => {
                        open[i] = false;
                        live -= 1;
                        break;
                    }
                    Ok(k) => {
                        reads += 1;
                        bytes += k as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        open[i] = false;
                        live -= 1;
                        break;
                    }
                }
            }
        }
        slot.set(reads, bytes, 0);
    }
    Ok(())
}

/// UDP flood sender parameters.
#[derive(Debug, Clone)]
pub struct UdpSendParams {
    /// Datagram payload bytes (the segment size with GSO).
    pub datagram: usize,
    /// Datagrams per send call (more than one with UDP GSO).
    pub segments: usize,
    /// Messages per sendmmsg call.
    pub batch: usize,
    /// Packets per second for this worker (None: as fast as possible).
    pub rate: Option<f64>,
}

/// UDP flood: sends datagrams round-robin over connected sockets until the
/// window's end.
pub fn udp_stream_send(
    socks: &[UdpSocket],
    p: &UdpSendParams,
    w: &Window,
    slot: &Slot,
) -> Result<Outcome, String> {
    let payload = vec![0x5au8; p.datagram * p.segments.max(1)];
    let mut out = Outcome::empty();
    let (mut packets, mut bytes) = (0u64, 0u64);
    let mut refused = 0u64;
    let mut i = 0;
    loop {
        let fd = socks[i].as_raw_fd();
        i = (i + 1) % socks.len();
        let res = if p.batch > 1 {
            sys::send_copies(fd, &payload, p.batch)
        } else {
            sys::send(fd, &payload).map(|_| 1)
        };
        match res {
            Ok(msgs) => {
                packets += (msgs * p.segments) as u64;
                bytes += (msgs * payload.len()) as u64;
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)) => {
                out.send_errors += 1
            }
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                // An ICMP port-unreachable from an earlier datagram: the
                // receiver is gone. A few can happen at teardown.
                out.send_errors += 1;
                refused += 1;
                if refused > 1000 {
                    return Err("the server's UDP port refuses datagrams".into());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(errmsg("udp send", e)),
        }
        slot.set(packets, bytes, packets);
        let now = Instant::now();
        if now >= w.we {
            break;
        }
        if let Some(rate) = p.rate {
            let due = w.start + Duration::from_secs_f64(packets as f64 / rate);
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    }
    out.total_txn = packets;
    Ok(out)
}

/// UDP flood receiver: counts datagrams (GRO super-packets as their
/// segments) until `stop` is set and the socket has been idle 100 ms.
/// With `coalesce`, a read that leaves the socket empty (fewer messages
/// than the batch) is followed by a sleep of that length: the datagrams
/// arriving meanwhile find no reader waiting on the socket, so the sending
/// side's `sock_def_readable` wakes nobody (on loopback that wakeup, an
/// inter-processor interrupt, was a quarter of the sending CPU's time).
///
/// Only datagrams from `client_ip` (the control client's address, as the
/// TCP data connections require) are counted; the others are strays, whose
/// number is returned, so a third party cannot inflate the test's figures.
pub fn udp_stream_recv(
    sock: &UdpSocket,
    batch: usize,
    buf_size: usize,
    coalesce: Option<Duration>,
    client_ip: std::net::IpAddr,
    stop: &AtomicBool,
    slot: &Slot,
) -> Result<u64, String> {
    let fd = sock.as_raw_fd();
    sock::set_recv_timeout(fd, Duration::from_millis(100)).map_err(|e| errmsg("SO_RCVTIMEO", e))?;
    let mut rb = sys::RecvBatch::new(batch, buf_size);
    let (mut packets, mut bytes, mut calls, mut strays) = (0u64, 0u64, 0u64, 0u64);
    let mut stop_seen: Option<Instant> = None;
    loop {
        match rb.recv(fd) {
            Ok(n) => {
                calls += 1;
                for m in 0..n {
                    if rb.source(m).map(|a| a.ip().to_canonical()) != Some(client_ip) {
                        strays += 1;
                        continue;
                    }
                    let len = rb.len(m);
                    bytes += len as u64;
                    packets += match rb.gro_size(m) {
                        Some(seg) => len.div_ceil(seg).max(1) as u64,
                        None => 1,
                    };
                }
                slot.set(packets, bytes, packets);
                if let Some(pause) = coalesce.filter(|_| n < batch) {
                    std::thread::sleep(pause);
                }
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            Err(e) => return Err(errmsg("recvmmsg", e)),
        }
        // Drain what is in flight after the stop, but not forever.
        if calls % 256 == 0 && stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            match stop_seen {
                None => stop_seen = Some(now),
                Some(t) if now.duration_since(t) > Duration::from_secs(1) => break,
                Some(_) => {}
            }
        }
    }
    Ok(strays)
}

/// `--null`: the measurement loop with no I/O; what it costs per
/// transaction is the tool's own overhead.
pub fn client_null(w: &Window, slot: &Slot) -> Outcome {
    let mut out = Outcome::empty();
    let mut t0 = Instant::now();
    loop {
        let t1 = Instant::now();
        out.complete(t0, t1, w, slot);
        if t1 >= w.we {
            break;
        }
        t0 = t1;
    }
    out
}
