//! The bench server under abuse, on loopback with real sockets: random
//! bytes, oversized and partial frames, idle and slow-drip connections,
//! abusive Start specs, clients that vanish mid-test, a third address
//! probing a test's data sockets, other processes of the client's own
//! address connecting to them without the test's token, silent data
//! connections, authentication, and a stop with clients still connected.
//! After each, an honest client completes a test; where the server runs
//! as its own process, its peak resident memory (VmHWM) stays far below
//! 1 GiB.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{assert_sane, serial, short, ChildServer};
use offload_bench::proto::{self, ClientMsg, ServerMsg, MAGIC, PROTOCOL_VERSION};
use offload_bench::server::ServerEvent;
use offload_bench::{
    client, BenchError, ClientConfig, Secret, Server, ServerHandle, ServerLimits, ServerOptions,
    TestKind,
};

/// The bound every test asserts on the server's peak memory: well under
/// the 1 GiB the server must stay below whatever clients send.
const RSS_BOUND: u64 = 400 << 20;

/// Asserts the peak memory bound and prints the figure (`--nocapture`).
fn assert_peak(s: &ChildServer, what: &str) {
    let peak = s.peak_rss();
    eprintln!("abuse: {what}: server peak RSS (VmHWM) {} KiB", peak / 1024);
    assert!(peak < RSS_BOUND, "{what}: peak RSS {peak} bytes");
}

fn honest(addr: SocketAddr) {
    honest_with(addr, None);
}

fn honest_with(addr: SocketAddr, secret: Option<Secret>) {
    let mut c = short(TestKind::TcpRr, addr);
    c.warmup = Duration::from_millis(100);
    c.duration = Duration::from_millis(500);
    c.auth = secret;
    let r = client::run_once(&c, &mut |_| {}).expect("an honest client completes a test");
    assert_sane(&r);
}

fn hello() -> Vec<u8> {
    frame(
        &serde_json::to_vec(&ClientMsg::Hello {
            magic: MAGIC.into(),
            version: PROTOCOL_VERSION,
        })
        .unwrap(),
    )
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads what the server sends until it closes; the frames must be
/// well-formed. Returns the error messages among them.
fn answers(s: &mut TcpStream) -> Vec<String> {
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let mut r = &all[..];
    let mut errors = Vec::new();
    while !r.is_empty() {
        let m: ServerMsg = proto::read_frame(&mut r).expect("a well-formed frame");
        if let ServerMsg::Error { message } = m {
            errors.push(message);
        }
    }
    errors
}

/// xorshift64*: deterministic bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_bytes_and_oversized_and_partial_frames_cost_little() {
    let _g = serial();
    let s = ChildServer::start("127.0.0.1:0");
    let mut rng = Rng(0x5ec_0b5e55ed);
    for _ in 0..100 {
        let mut c = connect(s.addr);
        let n = (rng.next() % 4096) as usize;
        let _ = c.write_all(&rng.bytes(n));
        let _ = c.shutdown(std::net::Shutdown::Write);
        let _ = answers(&mut c);
    }
    // Sixteen Hellos announcing 48 MiB, each with a first KiB sent and the
    // connection held open: refused on the length alone.
    let mut held = Vec::new();
    for _ in 0..16 {
        let mut c = connect(s.addr);
        c.write_all(&(48u32 << 20).to_be_bytes()).unwrap();
        let _ = c.write_all(&[b'{'; 1024]);
        let errors = answers(&mut c);
        assert!(
            errors.iter().any(|e| e.contains("above the limit of 4096")),
            "{errors:?}"
        );
        held.push(c);
    }
    // Just above the pre-handshake limit, complete: refused too.
    let mut c = connect(s.addr);
    let mut body = b"{\"type\":\"hello\",\"magic\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'x', 4097));
    body.extend_from_slice(b"\",\"version\":2}");
    c.write_all(&frame(&body)).unwrap();
    assert!(!answers(&mut c).is_empty());
    honest(s.addr);
    assert_peak(&s, "random bytes, oversized and partial frames");
}

#[test]
fn idle_connections_neither_pile_up_threads_nor_keep_a_client_out() {
    let _g = serial();
    let s = ChildServer::start("127.0.0.1:0");
    let threads_before = s.status_field("Threads");
    // 300 connections that never send a byte, held open.
    let idle: Vec<TcpStream> = (0..300).map(|_| connect(s.addr)).collect();
    // The server keeps a bounded number of them (it evicts the oldest when
    // newer ones arrive); an honest client gets through meanwhile.
    honest(s.addr);
    let threads = s.status_field("Threads");
    eprintln!(
        "abuse: 300 idle connections: server threads {threads_before} before, {threads} after"
    );
    let limits = ServerLimits::default();
    assert!(
        threads <= threads_before + (limits.max_connections + limits.max_handshaking) as u64 + 4,
        "{threads} threads with 300 idle connections (was {threads_before})"
    );
    // Every idle connection is closed by the server, at the latest at its
    // handshake deadline.
    for mut c in idle {
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).ok();
    }
    honest(s.addr);
    assert_peak(&s, "300 idle connections");
}

#[test]
fn a_slow_drip_hello_is_dropped_at_the_handshake_deadline() {
    let _g = serial();
    let s = ChildServer::start("127.0.0.1:0");
    let deadline = ServerLimits::default().handshake_timeout;
    let bytes = hello();
    let mut c = connect(s.addr);
    let start = Instant::now();
    // One byte every 500 ms: the whole Hello would take over 20 s, each
    // byte far inside any per-read timeout.
    let mut sent = 0;
    for b in &bytes {
        if c.write_all(&[*b]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(500));
        if start.elapsed() > deadline * 3 {
            break;
        }
    }
    assert!(
        sent < bytes.len(),
        "the server let a {}-byte Hello drip in over {:?}",
        bytes.len(),
        start.elapsed()
    );
    let errors = answers(&mut c);
    assert!(
        errors.iter().any(|e| e.contains("no complete hello")),
        "{errors:?}"
    );
    honest(s.addr);
    assert_peak(&s, "slow drip");
}

fn start_raw(addr: SocketAddr, spec_json: serde_json::Value) -> (TcpStream, ServerMsg) {
    let mut c = connect(addr);
    c.write_all(&hello()).unwrap();
    let _: ServerMsg = proto::read_frame(&mut c).unwrap();
    let start = serde_json::json!({"type": "start", "spec": spec_json});
    c.write_all(&frame(&serde_json::to_vec(&start).unwrap()))
        .unwrap();
    let answer = proto::read_frame(&mut c).unwrap();
    (c, answer)
}

fn spec_json(kind: TestKind, edit: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let mut c = ClientConfig::new(kind, "127.0.0.1:1".parse().unwrap());
    c.validate().unwrap();
    let mut v = serde_json::to_value(&c.spec).unwrap();
    edit(&mut v);
    v
}

#[test]
fn abusive_start_specs_are_refused_before_anything_is_allocated() {
    let _g = serial();
    let s = ChildServer::start("127.0.0.1:0");
    let abusive = [
        // The two of record: 2.93 GB and 23.8 GB before.
        spec_json(TestKind::TcpCrr, |v| {
            v["server_threads"] = 64.into();
            v["response"] = (64u32 << 20).into();
        }),
        spec_json(TestKind::TcpRr, |v| {
            v["flows"] = 1_000_000.into();
            v["server_threads"] = 1024.into();
        }),
        spec_json(TestKind::TcpRr, |v| {
            v["flows"] = 1_000_000.into();
        }),
        spec_json(TestKind::TcpStream, |v| {
            v["server_threads"] = 16.into();
            v["request"] = (64u32 << 20).into();
        }),
        spec_json(TestKind::UdpRr, |v| {
            v["server_threads"] = 64.into();
            v["knobs"]["batch"] = 1024.into();
        }),
        spec_json(TestKind::TcpRr, |v| {
            v["expected_seconds"] = 80000.0.into();
        }),
        spec_json(TestKind::TcpRr, |v| {
            v["server_threads"] = u64::from(u32::MAX).into();
        }),
    ];
    for spec in abusive {
        let (_c, answer) = start_raw(s.addr, spec.clone());
        match answer {
            ServerMsg::Error { message } => assert!(
                message.contains("limit") || message.contains("outside"),
                "{spec}: {message}"
            ),
            other => panic!("{spec}: expected a refusal, got {other:?}"),
        }
    }
    honest(s.addr);
    assert_peak(&s, "abusive Start specs");
}

#[test]
fn concurrent_tests_and_their_memory_are_capped_and_given_back() {
    let _g = serial();
    let limits = ServerLimits {
        max_tests: 2,
        ..ServerLimits::default()
    };
    let s = Server::bind_with(
        &["127.0.0.1:0".parse().unwrap()],
        ServerOptions {
            limits,
            secret: None,
        },
    )
    .unwrap()
    .echo_log(false)
    .spawn()
    .unwrap();
    // Two tests set up and held (no data connection yet), a third refused
    // with a message that says why.
    let spec = spec_json(TestKind::TcpRr, |_| {});
    let (a, ra) = start_raw(s.addr(), spec.clone());
    let (b, rb) = start_raw(s.addr(), spec.clone());
    assert!(matches!(ra, ServerMsg::Ready { .. }) && matches!(rb, ServerMsg::Ready { .. }));
    assert_eq!(s.usage().tests, 2);
    let (_c, rc) = start_raw(s.addr(), spec.clone());
    match rc {
        ServerMsg::Error { message } => {
            assert!(
                message.contains("busy") && message.contains("2 tests"),
                "{message}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Clients killed mid-test: their connections reset.
    for c in [a, b] {
        socket2::SockRef::from(&c)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(c);
    }
    // Eventually (generous for a loaded host).
    for _ in 0..3000 {
        if s.usage().tests == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.usage(), Default::default(), "resources given back");
    honest(s.addr());
}

/// A server whose events are kept, to learn a test's data ports.
fn server_with_events(secret: Option<Secret>) -> (ServerHandle, Arc<Mutex<Vec<ServerEvent>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let s = Server::bind_with(
        &["127.0.0.1:0".parse().unwrap()],
        ServerOptions {
            limits: ServerLimits::default(),
            secret,
        },
    )
    .unwrap()
    .on_event(Arc::new(move |e: &ServerEvent| {
        sink.lock().unwrap().push(e.clone())
    }))
    .spawn()
    .unwrap();
    (s, events)
}

fn data_ports(events: &Mutex<Vec<ServerEvent>>) -> Vec<u16> {
    for _ in 0..3000 {
        let found = events.lock().unwrap().iter().find_map(|e| match e {
            ServerEvent::TestStarted { data_ports, .. } => Some(data_ports.clone()),
            _ => None,
        });
        if let Some(p) = found {
            return p;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no test started");
}

/// Runs `kind` from an honest client while `probe` pokes the data port.
fn probe_during(
    kind: TestKind,
    probe: impl FnOnce(SocketAddr) + Send + 'static,
) -> (offload_bench::BenchResult, ServerHandle) {
    let (s, events) = server_with_events(None);
    let mut c = short(kind, s.addr());
    c.warmup = Duration::from_millis(500);
    c.duration = Duration::from_secs(2);
    let h = std::thread::spawn(move || client::run_once(&c, &mut |_| {}));
    let port = data_ports(&events)[0];
    probe(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    let r = h.join().unwrap().expect("the honest test completes");
    (r, s)
}

/// Sends `n` datagrams (1 byte, and forged joins) from `from` to `to`, in
/// bursts of 10 (so that a server thread the scheduler keeps waiting on a
/// loaded host finds them all in its receive buffer); returns the socket.
fn udp_probe_send(from: IpAddr, to: SocketAddr, n: usize) -> UdpSocket {
    let s = UdpSocket::bind(SocketAddr::new(from, 0)).unwrap();
    let mut forged = proto::UDP_JOIN.to_vec();
    forged.extend_from_slice(&[0u8; proto::TOKEN_LEN]);
    for i in 0..n {
        let _ = s.send_to(if i % 2 == 0 { b"x" } else { &forged[..] }, to);
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    s
}

/// Counts the bytes that reach a probe's socket within a second.
fn udp_probe_collect(s: &UdpSocket) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 65536];
    while let Ok((len, _)) = s.recv_from(&mut buf) {
        got += len;
    }
    got
}

#[test]
fn a_third_address_gets_nothing_from_a_udp_test() {
    let _g = serial();
    let got = Arc::new(Mutex::new((0usize, 0usize)));
    let g = got.clone();
    let (r, s) = probe_during(TestKind::UdpRr, move |to| {
        // Another address, and another socket of the client's address:
        // both send first (while the test surely runs), then listen.
        let other = udp_probe_send(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), to, 100);
        let same_ip = udp_probe_send(IpAddr::V4(Ipv4Addr::LOCALHOST), to, 100);
        *g.lock().unwrap() = (udp_probe_collect(&other), udp_probe_collect(&same_ip));
    });
    assert_sane(&r);
    assert_eq!(
        *got.lock().unwrap(),
        (0, 0),
        "bytes that reached the probes"
    );
    assert!(
        s.stats().strays.load(std::sync::atomic::Ordering::Relaxed) >= 200,
        "the probes' datagrams were counted as strays"
    );
}

#[test]
fn a_third_address_cannot_inflate_a_udp_stream_test() {
    let _g = serial();
    let (r, s) = probe_during(TestKind::UdpStream, |to| {
        // 1-byte datagrams from another address, sent while the test runs:
        // the server must count them as strays, not as the test's packets.
        let _ = udp_probe_send(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), to, 400);
    });
    assert_sane(&r);
    let udp = r.udp.as_ref().expect("a UDP test reports its datagrams");
    assert!(
        udp.received <= udp.sent,
        "the server counted {} datagrams of {} sent",
        udp.received,
        udp.sent
    );
    assert!(
        s.stats().strays.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the third address's datagrams were not counted as strays"
    );
}

#[test]
fn a_third_address_gets_nothing_from_tcp_data_ports() {
    let _g = serial();
    // Another address, and another process of the client's own address
    // (which has no token).
    for from in [Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::LOCALHOST] {
        for kind in [TestKind::TcpCrr, TestKind::TcpRr, TestKind::TcpStream] {
            let got = Arc::new(Mutex::new(None));
            let g = got.clone();
            let (r, _s) = probe_during(kind, move |to| {
                let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                sock.bind(&SocketAddr::new(IpAddr::V4(from), 0).into())
                    .unwrap();
                // Refused once the test has all its flows: nothing either.
                if sock.connect(&to.into()).is_err() {
                    *g.lock().unwrap() = Some(0);
                    return;
                }
                let mut c: TcpStream = sock.into();
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = c.write_all(&[0x5a; 64]);
                let mut buf = Vec::new();
                let _ = c.read_to_end(&mut buf);
                *g.lock().unwrap() = Some(buf.len());
            });
            assert_sane(&r);
            assert_eq!(
                *got.lock().unwrap(),
                Some(0),
                "{kind:?}: bytes to a connection from {from}"
            );
        }
    }
}

fn secret(text: &str) -> Secret {
    Secret::new(text.as_bytes().to_vec()).unwrap()
}

#[test]
fn beyond_loopback_the_server_refuses_to_start_without_a_secret() {
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let e = Server::bind(addr.parse().unwrap()).unwrap_err().to_string();
        assert!(
            e.contains("without authentication") && e.contains("--auth-file"),
            "{e}"
        );
    }
    let s = Server::bind_with(
        &["0.0.0.0:0".parse().unwrap()],
        ServerOptions {
            secret: Some(secret("a secret of some length")),
            ..Default::default()
        },
    );
    assert!(s.is_ok());
    // Loopback of either family needs none.
    Server::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    if let Ok(s) = Server::bind_loopback(0, ServerOptions::default()) {
        for a in s.local_addrs().unwrap() {
            assert!(a.ip().is_loopback(), "{a}");
        }
    }
}

#[test]
fn authentication_lets_only_holders_of_the_secret_in() {
    let _g = serial();
    let k = secret("correct horse battery staple");
    let (s, _) = server_with_events(Some(k.clone()));
    // No secret: a clear error, and the server said nothing of its host.
    let mut c = short(TestKind::TcpRr, s.addr());
    c.warmup = Duration::from_millis(100);
    c.duration = Duration::from_millis(300);
    let e = client::run_once(&c, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&e, BenchError::Server { message, .. } if message.contains("requires authentication")),
        "{e}"
    );
    let mut raw = connect(s.addr());
    raw.write_all(&hello()).unwrap();
    let mut first = [0u8; 4];
    raw.read_exact(&mut first).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(first) as usize];
    raw.read_exact(&mut body).unwrap();
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("challenge") && !text.contains("kernel"),
        "{text}"
    );
    // A wrong secret.
    c.auth = Some(secret("wrong horse battery staple"));
    let e = client::run_once(&c, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("authentication failed"), "{e}");
    // A replayed answer: a mac from another challenge.
    let nonce = [7u8; 32];
    let mac = k.client_mac(&[9u8; 32], &nonce);
    let auth =
        serde_json::json!({"type": "auth", "nonce": offload_bench::auth::hex(&nonce), "mac": mac});
    raw.write_all(&frame(&serde_json::to_vec(&auth).unwrap()))
        .unwrap();
    let errors = answers(&mut raw);
    assert!(
        errors.iter().any(|e| e.contains("authentication failed")),
        "{errors:?}"
    );
    // The right secret: the test runs and the host is described.
    c.auth = Some(k.clone());
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert!(!r.settings.server_host.kernel.is_empty());
    // A client with a secret refuses a server without one.
    let open = Server::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .echo_log(false)
        .spawn()
        .unwrap();
    let mut c2 = c.clone();
    c2.server = open.addr();
    let e = client::run_once(&c2, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("does not authenticate"), "{e}");
    honest_with(s.addr(), Some(k));
}

#[test]
fn a_secret_server_runs_udp_and_many_flows_for_its_client() {
    let _g = serial();
    let k = secret("sixteen-plus bytes of secret");
    let (s, _) = server_with_events(Some(k.clone()));
    let mut c = short(TestKind::UdpRr, s.addr());
    c.spec.flows = 4;
    c.threads = 2;
    c.spec.server_threads = 2;
    c.spec.knobs.batch = 8;
    c.auth = Some(k);
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
}

/// A test set up over a raw control connection (`flows` flows): the
/// control connection, the first data port and the token from Ready.
fn raw_test(
    addr: SocketAddr,
    kind: TestKind,
    flows: u32,
) -> (TcpStream, u16, [u8; proto::TOKEN_LEN]) {
    let (c, answer) = start_raw(
        addr,
        spec_json(kind, |v| {
            v["flows"] = flows.into();
            v["expected_seconds"] = 30.0.into();
            // A stream test sends to its flows: whoever holds one gets bytes.
            v["direction"] = "server-to-client".into();
        }),
    );
    match answer {
        ServerMsg::Ready {
            data_port, token, ..
        } => {
            let token = offload_bench::auth::unhex(&token.expect("every test has a token"))
                .and_then(|b| b.try_into().ok())
                .expect("a 16-byte token");
            (c, data_port, token)
        }
        other => panic!("expected ready, got {other:?}"),
    }
}

/// Ends a raw test: both marks, Finish, and the server's report.
fn finish_raw(mut c: TcpStream) -> offload_bench::report::ServerReport {
    for mark in [proto::Mark::WindowStart, proto::Mark::WindowEnd] {
        proto::write_frame(&mut c, &ClientMsg::Mark { mark }).unwrap();
        assert!(matches!(
            proto::read_frame(&mut c).unwrap(),
            ServerMsg::Marked
        ));
    }
    proto::write_frame(&mut c, &ClientMsg::Finish).unwrap();
    match proto::read_frame(&mut c).unwrap() {
        ServerMsg::Report { report } => report,
        other => panic!("expected a report, got {other:?}"),
    }
}

/// Reads what a connection gets until the server closes it (or resets
/// it); panics if it is still open after `wait`. Returns the bytes read.
fn bytes_until_closed(mut c: TcpStream, wait: Duration) -> usize {
    c.set_read_timeout(Some(wait)).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("the server kept a tokenless connection open for {wait:?} ({got} bytes)")
            }
            Err(_) => return got,
        }
    }
}

/// A data connection from 127.0.0.1 (the client's own address) that
/// sends `first` and then requests as an honest flow would.
fn same_host_connection(to: SocketAddr, first: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(10)).unwrap();
    if !first.is_empty() {
        c.write_all(first).unwrap();
    }
    c
}

#[test]
fn another_process_on_the_clients_host_cannot_take_a_tcp_tests_flows() {
    let _g = serial();
    let (s, _) = server_with_events(None);
    for kind in [TestKind::TcpRr, TestKind::TcpStream, TestKind::TcpCrr] {
        let strays_before = s.stats().strays.load(std::sync::atomic::Ordering::Relaxed);
        let flows = if kind == TestKind::TcpCrr { 1 } else { 2 };
        let (ctl, port, token) = raw_test(s.addr(), kind, flows);
        let to = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        // Before the honest flows: what another process of the same host
        // could send. Requests without a token (the test's 1-byte request,
        // many times over), a preamble with the wrong token followed by
        // requests, and a connection that sends nothing.
        let mut wrong = proto::TCP_DATA_HELLO.to_vec();
        wrong.extend_from_slice(&[0xee; proto::TOKEN_LEN]);
        wrong.extend_from_slice(&[0x5a; 64]);
        let strangers = vec![
            same_host_connection(to, &[0x5a; 64]),
            same_host_connection(to, &wrong),
            same_host_connection(to, &[]),
        ];
        // The honest flows, with the token, after the strangers.
        let preamble = proto::tcp_preamble(&token);
        let mut served = 0u64;
        match kind {
            TestKind::TcpCrr => {
                for _ in 0..3 {
                    let mut c = same_host_connection(to, &[&preamble[..], &[0x5a]].concat());
                    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let mut one = [0u8; 1];
                    c.read_exact(&mut one)
                        .expect("an honest connection is served");
                    served += 1;
                }
            }
            TestKind::TcpRr => {
                let mut honest: Vec<TcpStream> = (0..flows)
                    .map(|_| same_host_connection(to, &preamble))
                    .collect();
                for c in &mut honest {
                    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    for _ in 0..5 {
                        c.write_all(&[0x5a]).unwrap();
                        let mut one = [0u8; 1];
                        c.read_exact(&mut one).expect("an honest flow is served");
                        served += 1;
                    }
                }
            }
            _ => {
                // tcp-stream from the server: each honest flow receives.
                let mut honest: Vec<TcpStream> = (0..flows)
                    .map(|_| same_host_connection(to, &preamble))
                    .collect();
                for c in &mut honest {
                    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let mut some = vec![0u8; 64 << 10];
                    c.read_exact(&mut some).expect("an honest flow is served");
                    served += 1;
                }
            }
        }
        // Every stranger is closed without a byte, the silent one within
        // the token deadline (plus, for tcp-crr, the kernel's defer period).
        for c in strangers {
            assert_eq!(
                bytes_until_closed(c, Duration::from_secs(15)),
                0,
                "{kind:?}: bytes to a connection without the token"
            );
        }
        let report = finish_raw(ctl);
        let strays = s.stats().strays.load(std::sync::atomic::Ordering::Relaxed) - strays_before;
        eprintln!(
            "abuse: {kind:?}: 3 tokenless connections from the client's address: \
             {strays} strays, {} flows accepted, {} transactions served",
            report.flows_accepted, report.transactions_total
        );
        assert_eq!(strays, 3, "{kind:?}: strays counted");
        match kind {
            TestKind::TcpCrr => assert_eq!(report.transactions_total, served),
            TestKind::TcpRr => {
                assert_eq!(report.flows_accepted, u64::from(flows));
                assert_eq!(report.transactions_total, served);
            }
            _ => {
                assert_eq!(report.flows_accepted, u64::from(flows));
                assert!(report.bytes_total >= served * (64 << 10));
            }
        }
    }
    honest(s.addr());
}

#[test]
fn silent_data_connections_cost_a_test_neither_threads_nor_its_flows() {
    let _g = serial();
    let s = ChildServer::start("127.0.0.1:0");
    let (ctl, port, token) = raw_test(s.addr, TestKind::TcpRr, 1);
    let to = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    // Let the test's setup thread start before counting.
    std::thread::sleep(Duration::from_millis(200));
    let threads_before = s.status_field("Threads");
    // 300 connections to the data port from the client's own address,
    // none sending a byte: at most 64 wait for their token at a time.
    let silent: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect_timeout(&to, Duration::from_secs(10)).ok())
        .collect();
    let threads = s.status_field("Threads");
    let fds = std::fs::read_dir(format!("/proc/{}/fd", s.pid()))
        .unwrap()
        .count();
    eprintln!(
        "abuse: {} silent data connections: server threads {threads_before} before, \
         {threads} after; {fds} descriptors open",
        silent.len()
    );
    assert_eq!(
        threads, threads_before,
        "a silent data connection cost a thread"
    );
    assert!(
        fds < 64 + 64,
        "{fds} descriptors open with {} silent connections",
        silent.len()
    );
    // The honest flow still becomes the test's flow and is served.
    let mut flow = same_host_connection(to, &proto::tcp_preamble(&token));
    flow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    for _ in 0..5 {
        flow.write_all(&[0x5a]).unwrap();
        let mut one = [0u8; 1];
        flow.read_exact(&mut one)
            .expect("the honest flow is served");
    }
    for c in silent {
        assert_eq!(bytes_until_closed(c, Duration::from_secs(15)), 0);
    }
    let report = finish_raw(ctl);
    assert_eq!(report.flows_accepted, 1);
    assert_eq!(report.transactions_total, 5);
    honest(s.addr);
    assert_peak(&s, "300 silent data connections");
}

#[test]
fn stopping_the_server_ends_running_tests_and_waiting_clients_at_once() {
    let _g = serial();
    let s = Server::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .echo_log(false)
        .spawn()
        .unwrap();
    // A test held mid-test (its client sends no mark: the server would
    // wait 90 s for one), with a flow served once...
    let (ctl, port, token) = raw_test(s.addr(), TestKind::TcpRr, 1);
    let mut flow = same_host_connection(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        &proto::tcp_preamble(&token),
    );
    flow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    flow.write_all(&[0x5a]).unwrap();
    let mut one = [0u8; 1];
    flow.read_exact(&mut one).unwrap();
    // ... and a client between tests (the server would wait 60 s for its
    // next frame).
    let mut idle = connect(s.addr());
    idle.write_all(&hello()).unwrap();
    assert!(matches!(
        proto::read_frame(&mut idle).unwrap(),
        ServerMsg::Welcome { .. }
    ));
    // Ctrl-C: the stop flag, then the handle joins the serving thread.
    let stopping = Instant::now();
    drop(s);
    let took = stopping.elapsed();
    eprintln!("abuse: stopping with a test mid-way and an idle client took {took:?}");
    let idle_timeout = ServerLimits::default().idle_timeout;
    assert!(
        took < idle_timeout,
        "the server waited {took:?} for its clients instead of ending their connections"
    );
    // Every connection, the test's flow included, was closed.
    for c in [ctl, idle, flow] {
        bytes_until_closed(c, Duration::from_secs(15));
    }
}
