//! Every test type end to end on loopback (IPv4 and IPv6), bounded to about
//! 1.3 s each, with the sanity checks of `common::assert_sane`.

mod common;

use std::time::Duration;

use common::{assert_sane, serial, short};
use offload_bench::{client, Direction, Server, TestKind};

fn server(addr: &str) -> offload_bench::ServerHandle {
    Server::bind(addr.parse().unwrap())
        .unwrap()
        .echo_log(false)
        .spawn()
        .unwrap()
}

#[test]
fn tcp_rr_one_flow() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut lines = Vec::new();
    let mut c = short(TestKind::TcpRr, s.addr());
    c.interval = Some(Duration::from_millis(250));
    let r = client::run_once(&c, &mut |l| lines.push(*l)).unwrap();
    assert_sane(&r);
    assert_eq!(r.settings.engine, "blocking");
    assert!(lines.len() >= 4, "{lines:?}");
    assert!(lines.iter().any(|l| l.warmup) && lines.iter().any(|l| !l.warmup));
    assert_eq!(r.server.flows_accepted, 1);
    assert!(r.server.errors.is_empty(), "{:?}", r.server.errors);
}
