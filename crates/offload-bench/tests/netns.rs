//! Every test type between two network namespaces joined by veth (server in
//! A, client in B), over IPv4 and IPv6; and the namespace guard's cleanup,
//! including after a panic. Needs root: fails loudly without it.

mod common;

use std::net::SocketAddr;

use common::{assert_sane, serial, short};
use offload_bench::netns::{NetnsPair, Side};
use offload_bench::report::BenchResult;
use offload_bench::{client, ClientConfig, Direction, Secret, Server, ServerOptions, TestKind};

fn run_between(
    pair: &NetnsPair,
    v6: bool,
    make: impl FnOnce(SocketAddr) -> ClientConfig,
) -> BenchResult {
    let ip = if v6 {
        NetnsPair::addr6(Side::A)
    } else {
        NetnsPair::addr4(Side::A)
    };
    // Beyond loopback the server requires a shared secret.
    let secret = Secret::random().unwrap();
    let opts = ServerOptions {
        secret: Some(secret.clone()),
        ..ServerOptions::default()
    };
    let server = pair
        .run_in(Side::A, move || {
            Server::bind_with(&[SocketAddr::new(ip, 0)], opts)
                .unwrap()
                .echo_log(false)
                .spawn()
                .unwrap()
        })
        .unwrap();
    let mut cfg = make(server.addr());
    cfg.auth = Some(secret);
    let r = pair
        .run_in(Side::B, move || client::run_once(&cfg, &mut |_| {}))
        .unwrap();
    drop(server);
    r.unwrap()
}

/// Gives both namespaces of a pair an id in ours (nsids vanish with the
/// namespace they name: the witness of teardown).
fn witness(pair: &NetnsPair) -> Vec<i32> {
    let mut rtnl = offload_sys::rtnl::Rtnl::open().unwrap();
    [Side::A, Side::B]
        .iter()
        .map(|&s| {
            let fd = pair.ns_fd(s).unwrap();
            rtnl.assign_nsid(std::os::fd::AsFd::as_fd(&fd), None)
                .unwrap();
            rtnl.nsid_of(std::os::fd::AsFd::as_fd(&fd))
                .unwrap()
                .unwrap()
        })
        .collect()
}

fn exists(id: i32) -> bool {
    // Teardown runs in the kernel's cleanup work: give it a moment.
    for _ in 0..200 {
        let ids = offload_sys::rtnl::Rtnl::open().unwrap().nsids().unwrap();
        if !ids.contains(&id) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn every_test_type_between_namespaces_over_ipv4() {
    let _g = serial();
    let pair = NetnsPair::create("v4").unwrap();
    // tcp-crr opens a connection per transaction; the client namespace may
    // reuse TIME_WAIT ports (the sysctl goes away with the namespace).
    pair.sysctl(Side::B, "net.ipv4.tcp_tw_reuse", "1").unwrap();
    for kind in [
        TestKind::TcpRr,
        TestKind::TcpCrr,
        TestKind::TcpStream,
        TestKind::UdpRr,
        TestKind::UdpStream,
    ] {
        let r = run_between(&pair, false, |a| short(kind, a));
        assert_sane(&r);
        // The server ran in the other namespace: its host description shows
        // the veth end there.
        assert!(
            r.settings
                .server_host
                .interfaces
                .iter()
                .any(|i| i.name == pair.dev(Side::A)),
            "{kind:?}"
        );
        assert!(
            r.settings
                .client_host
                .interfaces
                .iter()
                .any(|i| i.name == pair.dev(Side::B)),
            "{kind:?}"
        );
    }
    let r = run_between(&pair, false, |a| {
        let mut c = short(TestKind::TcpStream, a);
        c.spec.direction = Direction::ServerToClient;
        c
    });
    assert_sane(&r);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn tcp_rr_80000_over_ipv6_between_namespaces() {
    let _g = serial();
    let pair = NetnsPair::create("v6").unwrap();
    let r = run_between(&pair, true, |a| {
        let mut c = short(TestKind::TcpRr, a);
        c.spec.request = 80000;
        c.spec.response = 80000;
        c
    });
    assert_sane(&r);
    assert!(r.settings.ipv6);
    let l = r.latency_us.unwrap();
    assert!(l.min > 0.0 && l.p90 >= l.min && l.p99 >= l.p90);
    // The veth's offload sizes are part of the effective settings.
    let veth = r
        .settings
        .client_host
        .interfaces
        .iter()
        .find(|i| i.name == pair.dev(Side::B))
        .unwrap();
    assert!(veth.gso_max_size.is_some());
    assert!(r
        .settings
        .client_host
        .sysctls
        .contains_key("net.ipv4.tcp_rmem"));
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn udp_rr_many_flows_over_ipv6_between_namespaces() {
    let _g = serial();
    let pair = NetnsPair::create("u6").unwrap();
    let r = run_between(&pair, true, |a| {
        let mut c = short(TestKind::UdpRr, a);
        c.spec.flows = 16;
        c.threads = 2;
        c.spec.server_threads = 2;
        c.spec.knobs.reuseport = true;
        c
    });
    assert_sane(&r);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn namespaces_are_removed_on_drop_and_on_panic() {
    let _g = serial();
    let pair = NetnsPair::create("gone").unwrap();
    let ids = witness(&pair);
    let (a, b) = (ids[0], ids[1]);
    assert!(offload_sys::rtnl::Rtnl::open()
        .unwrap()
        .nsids()
        .unwrap()
        .contains(&a));
    drop(pair);
    assert!(!exists(a) && !exists(b));

    let names = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let pair = NetnsPair::create("panic").unwrap();
        let ids = witness(&pair);
        *names.lock().unwrap() = Some((ids[0], ids[1]));
        panic!("a test failing inside the namespaces");
    }));
    assert!(result.is_err());
    let (a, b) = (*names.lock().unwrap()).unwrap();
    assert!(!exists(a) && !exists(b), "namespaces left after a panic");
}
