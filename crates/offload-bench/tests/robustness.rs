//! The server against bad clients: wrong versions, garbage, clients that
//! vanish mid-test, a protocol fuzz run; and the client against a server
//! that dies. After each, the server must still serve a real test.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{assert_sane, serial, short};
use offload_bench::proto::{self, ClientMsg, ServerMsg, MAGIC, PROTOCOL_VERSION};
use offload_bench::{client, BenchError, ClientConfig, Server, ServerHandle, TestKind};

fn server() -> ServerHandle {
    Server::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .echo_log(false)
        .spawn()
        .unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn hello(v: u32) -> ClientMsg {
    ClientMsg::Hello {
        magic: MAGIC.into(),
        version: v,
    }
}

fn still_serves(s: &ServerHandle) {
    let mut c = short(TestKind::TcpRr, s.addr());
    c.warmup = Duration::from_millis(100);
    c.duration = Duration::from_millis(500);
    let r = client::run_once(&c, &mut |_| {}).expect("the server still serves");
    assert_sane(&r);
}

/// Waits (bounded) until the server has logged `n` lines.
fn wait_log(s: &ServerHandle, n: usize) -> Vec<String> {
    for _ in 0..200 {
        let log = s.stats().log.lock().unwrap().clone();
        if log.len() >= n {
            return log;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    s.stats().log.lock().unwrap().clone()
}

#[test]
fn wrong_version_gets_a_clear_error_and_a_log_line() {
    let _g = serial();
    let s = server();
    let mut c = connect(s.addr());
    proto::write_frame(&mut c, &hello(PROTOCOL_VERSION + 1)).unwrap();
    match proto::read_frame::<_, ServerMsg>(&mut c).unwrap() {
        ServerMsg::Error { message } => assert!(
            message.contains(&format!("version {}", PROTOCOL_VERSION + 1)),
            "{message}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
    let log = wait_log(&s, 1);
    assert!(log.iter().any(|l| l.contains("version")), "{log:?}");
    still_serves(&s);
}

#[test]
fn garbage_is_refused_and_the_server_keeps_serving() {
    let _g = serial();
    let s = server();
    let mut c = connect(s.addr());
    c.write_all(&[0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o'])
        .unwrap();
    match proto::read_frame::<_, ServerMsg>(&mut c).unwrap() {
        ServerMsg::Error { message } => assert!(message.contains("bad hello"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
    // An HTTP request is not a frame either: refused, connection closed.
    let mut c = connect(s.addr());
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    still_serves(&s);
    assert!(s.stats().errors.load(std::sync::atomic::Ordering::Relaxed) >= 2);
}

#[test]
fn a_client_that_vanishes_mid_test_is_logged_and_cleaned_up() {
    let _g = serial();
    let s = server();
    let mut c = connect(s.addr());
    proto::write_frame(&mut c, &hello(PROTOCOL_VERSION)).unwrap();
    let _: ServerMsg = proto::read_frame(&mut c).unwrap();
    let mut cfg = ClientConfig::new(TestKind::TcpRr, s.addr());
    cfg.validate().unwrap();
    proto::write_frame(
        &mut c,
        &ClientMsg::Start {
            spec: cfg.spec.clone(),
        },
    )
    .unwrap();
    let (port, token) = match proto::read_frame::<_, ServerMsg>(&mut c).unwrap() {
        ServerMsg::Ready {
            data_port, token, ..
        } => (data_port, token.expect("a token")),
        other => panic!("expected ready, got {other:?}"),
    };
    let token: [u8; proto::TOKEN_LEN] = offload_bench::auth::unhex(&token)
        .and_then(|b| b.try_into().ok())
        .unwrap();
    let mut data = TcpStream::connect(SocketAddr::new(s.addr().ip(), port)).unwrap();
    data.write_all(&proto::tcp_preamble(&token)).unwrap();
    data.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    data.read_exact(&mut one).unwrap();
    drop(c);
    drop(data);
    let log = wait_log(&s, 1);
    assert!(log.iter().any(|l| l.contains("vanished")), "{log:?}");
    still_serves(&s);
}

#[test]
fn the_client_reports_a_server_that_dies_mid_test() {
    let _g = serial();
    let child = common::ChildServer::start("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, child.addr);
    c.warmup = Duration::from_millis(200);
    c.duration = Duration::from_secs(3);
    let h = std::thread::spawn(move || client::run_once(&c, &mut |_| {}));
    std::thread::sleep(Duration::from_millis(800));
    drop(child);
    let err = h.join().unwrap().expect_err("the server died");
    let text = err.to_string();
    assert!(
        matches!(err, BenchError::Worker { .. } | BenchError::Control { .. }),
        "{text}"
    );
    assert!(
        text.contains("server") || text.contains("closed") || text.contains("reset"),
        "{text}"
    );
}

#[test]
fn a_client_of_no_server_gets_a_clear_error() {
    let c = ClientConfig::new(TestKind::TcpRr, "127.0.0.1:1".parse().unwrap());
    let err = client::run_once(&c, &mut |_| {}).unwrap_err().to_string();
    assert!(
        err.contains("connecting to the server 127.0.0.1:1"),
        "{err}"
    );
}

/// xorshift64*: deterministic, so a failing case can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// One fuzz case: the bytes a hostile client sends after connecting.
fn fuzz_case(rng: &mut Rng, valid_start: &[u8]) -> Vec<u8> {
    let hello_ok = frame(&serde_json::to_vec(&hello(PROTOCOL_VERSION)).unwrap());
    match rng.below(8) {
        // Random bytes.
        0 => {
            let n = rng.below(64) as usize;
            rng.bytes(n)
        }
        // A plausible length with random content.
        1 => {
            let n = rng.below(200) as usize;
            frame(&rng.bytes(n))
        }
        // An absurd length.
        2 => {
            let mut v = (rng.next() as u32 | 0x8000_0000).to_be_bytes().to_vec();
            v.extend(rng.bytes(8));
            v
        }
        // A good hello, then a mutated start.
        3 => {
            let mut body = valid_start.to_vec();
            for _ in 0..=rng.below(4) {
                let i = rng.below(body.len() as u64) as usize;
                body[i] = rng.next() as u8;
            }
            [hello_ok, frame(&body)].concat()
        }
        // A good hello, then a start with extreme numbers.
        4 => {
            let mut v: serde_json::Value = serde_json::from_slice(valid_start).unwrap();
            let spec = &mut v["spec"];
            let extremes = [
                0u64,
                1,
                1024,
                1025,
                65536,
                1_000_001,
                u32::MAX as u64,
                u64::MAX,
            ];
            for key in ["flows", "server_threads", "request", "response"] {
                if rng.below(2) == 0 {
                    spec[key] = extremes[rng.below(extremes.len() as u64) as usize].into();
                }
            }
            if rng.below(2) == 0 {
                spec["knobs"]["batch"] = extremes[rng.below(extremes.len() as u64) as usize].into();
            }
            if rng.below(3) == 0 {
                spec["server_pin"] = serde_json::json!([rng.next() % 100_000]);
            }
            if rng.below(3) == 0 {
                spec["expected_seconds"] = serde_json::json!(-1.0);
            }
            [hello_ok, frame(&serde_json::to_vec(&v).unwrap())].concat()
        }
        // Frames out of order.
        5 => {
            let msgs = [
                ClientMsg::Finish,
                ClientMsg::Mark {
                    mark: proto::Mark::WindowEnd,
                },
                hello(PROTOCOL_VERSION),
                ClientMsg::Bye,
            ];
            let mut out = if rng.below(2) == 0 {
                hello_ok
            } else {
                Vec::new()
            };
            for _ in 0..=rng.below(3) {
                let m = &msgs[rng.below(msgs.len() as u64) as usize];
                out.extend(frame(&serde_json::to_vec(m).unwrap()));
            }
            out
        }
        // A good exchange cut at a random byte.
        6 => {
            let all = [hello_ok, frame(valid_start)].concat();
            let cut = rng.below(all.len() as u64) as usize;
            all[..cut].to_vec()
        }
        // Wrong magic or version.
        _ => {
            let m = ClientMsg::Hello {
                magic: String::from_utf8_lossy(&rng.bytes(8)).into_owned(),
                version: rng.next() as u32,
            };
            frame(&serde_json::to_vec(&m).unwrap())
        }
    }
}

#[test]
fn the_server_survives_a_protocol_fuzz_run() {
    let _g = serial();
    let s = server();
    let mut cfg = ClientConfig::new(TestKind::UdpRr, s.addr());
    cfg.validate().unwrap();
    let valid_start = serde_json::to_vec(&ClientMsg::Start {
        spec: cfg.spec.clone(),
    })
    .unwrap();
    let mut rng = Rng(0x0ff1_0ad0_be4c);
    const CASES: usize = 400;
    for case in 0..CASES {
        let bytes = fuzz_case(&mut rng, &valid_start);
        let mut c = connect(s.addr());
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let _ = c.write_all(&bytes);
        let _ = c.shutdown(std::net::Shutdown::Write);
        // Whatever the server answers must be well-formed frames.
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        let mut r = &answer[..];
        while !r.is_empty() {
            let m: Result<ServerMsg, _> = proto::read_frame(&mut r);
            assert!(m.is_ok(), "case {case}: malformed answer {answer:?}");
        }
        if case % 100 == 99 {
            assert!(s.is_running(), "case {case}: the server stopped");
            still_serves(&s);
        }
    }
    let st = s.stats();
    assert!(st.connections.load(std::sync::atomic::Ordering::Relaxed) >= CASES as u64);
    assert!(st.errors.load(std::sync::atomic::Ordering::Relaxed) > 0);
    still_serves(&s);
}
