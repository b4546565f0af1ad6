//! Every test type end to end on loopback (IPv4 and IPv6), bounded to about
//! 1.3 s each, with the sanity checks of `common::assert_sane`.

mod common;

use std::time::Duration;

use common::{assert_sane, serial, short};
use offload_bench::{client, CloseMode, Direction, Server, TestKind};

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

#[test]
fn tcp_rr_ipv6_whole_messages_of_80000_bytes() {
    let _g = serial();
    let s = server("[::1]:0");
    let mut c = short(TestKind::TcpRr, s.addr());
    c.spec.request = 80000;
    c.spec.response = 80000;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert!(r.settings.ipv6);
    assert_eq!(r.settings.write_size, 80000);
    assert_eq!(r.settings.nodelay, Some(false));
    assert!(r.gbit_per_sec > 0.0);
}

#[test]
fn tcp_crr_normal_and_reset_close() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    for close in [CloseMode::Normal, CloseMode::Reset] {
        let mut c = short(TestKind::TcpCrr, s.addr());
        c.spec.close = close;
        c.spec.flows = 2;
        c.threads = 2;
        c.spec.server_threads = 2;
        let r = client::run_once(&c, &mut |_| {}).unwrap();
        assert_sane(&r);
        assert_eq!(r.settings.close_mode, Some(close));
    }
}

#[test]
fn tcp_stream_both_directions() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    for dir in [Direction::ClientToServer, Direction::ServerToClient] {
        let mut c = short(TestKind::TcpStream, s.addr());
        c.spec.direction = dir;
        c.spec.flows = 2;
        c.threads = 1;
        let r = client::run_once(&c, &mut |_| {}).unwrap();
        assert_sane(&r);
        assert!(r.gbit_per_sec > 0.0);
        assert!(r.latency_us.is_none());
        // Receiver bytes never exceed sender bytes (consistent), and the
        // receiver saw data in the window.
        let received = match dir {
            Direction::ClientToServer => r.server.window.bytes,
            Direction::ServerToClient => r.server.bytes_total,
        };
        assert!(received > 0);
    }
}

#[test]
fn udp_rr_one_and_many_flows_with_batching() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let r = client::run_once(&short(TestKind::UdpRr, s.addr()), &mut |_| {}).unwrap();
    assert_sane(&r);
    let u = r.udp.clone().unwrap();
    assert!(u.received > 0 && u.received <= u.sent + 1);
    let mut c = short(TestKind::UdpRr, s.addr());
    c.spec.flows = 64;
    c.threads = 2;
    c.spec.server_threads = 2;
    c.spec.knobs.reuseport = true;
    c.spec.knobs.batch = 16;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert_eq!(r.settings.engine, "epoll");
    assert_eq!(r.settings.server_settings.udp_sockets, 2);
}

#[test]
fn udp_stream_reports_pps_and_drops_consistently() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::UdpStream, s.addr());
    c.spec.request = 32;
    c.spec.flows = 4;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    let u = r.udp.clone().unwrap();
    assert!(r.packets_per_sec > 0.0);
    assert_eq!(u.lost, u.sent - u.received);
    assert!(u.received > 0 && u.received <= u.sent);
    // Datagrams the receiver lost are either in the kernel's buffer-drop
    // counter of its namespace or were still in flight; the kernel can not
    // count fewer drops than... other tests share this namespace, so only
    // the direction of the inequality with our own loss is checked.
    assert!(u.kernel_rcvbuf_errors <= u.kernel_in_errors);
}

#[test]
fn udp_stream_with_reuseport_batch_gso_and_gro() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::UdpStream, s.addr());
    c.spec.flows = 8;
    c.threads = 1;
    c.spec.server_threads = 2;
    c.spec.knobs.reuseport = true;
    c.spec.knobs.batch = 32;
    c.spec.knobs.udp_gro = true;
    c.spec.knobs.udp_gso = Some(1000);
    c.spec.request = 1000;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert_eq!(r.settings.udp_gso, Some(1000));
    assert!(r.settings.udp_gro);
    // GSO sends 64 segments (the most the kernel takes) per call: packets
    // are counted per segment.
    let u = r.udp.clone().unwrap();
    assert_eq!(u.sent % 64, 0, "{u:?}");
}

#[test]
fn udp_stream_receivers_coalescing_read_everything_at_a_modest_rate() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::UdpStream, s.addr());
    c.spec.request = 32;
    c.spec.flows = 2;
    c.spec.server_threads = 2;
    c.spec.knobs.reuseport = true;
    c.spec.knobs.batch = 32;
    c.spec.knobs.rx_usecs = Some(50);
    // 20,000 datagrams/s: 50 us of sleep lets about one datagram per
    // socket queue up, a thousandth of what the default buffer holds.
    c.rate = Some(20_000.0);
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert_eq!(r.settings.rx_usecs, Some(50));
    let u = r.udp.clone().unwrap();
    // Nothing is lost to the sleep; a receiver descheduled for tens of
    // milliseconds on a loaded machine may still drop a few.
    assert!(u.received * 100 >= u.sent * 95, "{u:?}");
    assert!(u.sent > 10_000, "{u:?}");
}

#[test]
fn tcp_rr_1000_flows_over_epoll_reports_cpu_per_transaction() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, s.addr());
    c.spec.flows = 1000;
    c.threads = 2;
    c.spec.server_threads = 2;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert_eq!(r.settings.engine, "epoll");
    assert_eq!(r.server.flows_accepted, 1000);
    assert!(r.cpu_seconds_per_transaction > 0.0);
    assert!(r.cpu.client_seconds_per_transaction > 0.0);
}

#[test]
fn tcp_rr_10000_flows() {
    let _g = serial();
    // 10 000 sockets on each end: the server gets a process of its own,
    // since both ends in one process exceed the open-file limit.
    let s = common::ChildServer::start("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, s.addr);
    c.spec.flows = 10000;
    c.threads = 2;
    c.spec.server_threads = 2;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert_eq!(r.server.flows_accepted, 10000);
    assert!(r.cpu_seconds_per_transaction > 0.0);
}

#[test]
fn fixed_rate_never_runs_ahead_of_its_schedule() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, s.addr());
    c.rate = Some(2000.0);
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    // Paced from the start: at most rate x (warm-up + window) in total.
    let budget = 2000.0 * (c.warmup + c.duration).as_secs_f64() + 2.0;
    assert!(
        (r.counts.client_total as f64) <= budget,
        "{} > {budget}",
        r.counts.client_total
    );
    assert_eq!(r.settings.rate, Some(2000.0));
}

#[test]
fn null_mode_measures_the_tool_alone() {
    let _g = serial();
    let mut c = short(TestKind::TcpRr, "127.0.0.1:9".parse().unwrap());
    c.null = true;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    assert_eq!(r.settings.engine, "null");
    // Without I/O the loop is far faster than any network round trip.
    assert!(r.latency_us.unwrap().p50 < 5.0);
}

#[test]
fn runs_and_compare_summarise_across_runs() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, s.addr());
    c.warmup = Duration::from_millis(100);
    c.duration = Duration::from_millis(600);
    let runs = client::run_many(&c, 3, &mut |_| {}).unwrap();
    assert_eq!(runs.runs.len(), 3);
    let sum = runs.transactions_per_sec_summary.unwrap();
    assert!(sum.ci95_low <= sum.mean && sum.mean <= sum.ci95_high);
    assert!(sum.min <= runs.transactions_per_sec && runs.transactions_per_sec <= sum.max);
    let mut b = c.clone();
    b.spec.request = 1000;
    let cmp = client::compare(&c, &b, "", "--request 1000", 2, &mut |_| {}).unwrap();
    assert_eq!(cmp.a_runs.len(), 2);
    assert_eq!(cmp.b_runs.len(), 2);
    assert!(cmp.b_runs.iter().all(|r| r.settings.request == 1000));
    let d = cmp.transactions_per_sec.unwrap();
    assert_eq!(d.difference.n, 2);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn knobs_are_applied_and_read_back() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, s.addr());
    c.spec.knobs.nodelay = true;
    c.spec.knobs.busy_poll_us = Some(20);
    c.spec.knobs.sndbuf = Some(256 * 1024);
    c.spec.knobs.rcvbuf = Some(256 * 1024);
    let cpus = offload_bench::sys::get_affinity().unwrap();
    let (cc, sc) = (cpus[0], *cpus.last().unwrap());
    c.pin = Some(vec![cc]);
    c.spec.server_pin = Some(vec![sc]);
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    let st = &r.settings;
    assert_eq!(st.nodelay, Some(true));
    assert_eq!(r.server.nodelay, Some(true));
    // The kernel doubles the requested SO_SNDBUF/SO_RCVBUF after capping it
    // at wmem_max/rmem_max (212992 by default), so at least 256 KiB results.
    assert!(st.sndbuf.unwrap() >= 256 * 1024, "{:?}", st.sndbuf);
    assert!(st.rcvbuf.unwrap() >= 256 * 1024, "{:?}", st.rcvbuf);
    assert_eq!(st.busy_poll_us, Some(20));
    assert_eq!(st.client_pin_used, vec![vec![cc]]);
    assert_eq!(st.server_pin_used, vec![vec![sc]]);
}

/// With a fixed rate, a stalled response must not hide the requests that
/// should have been sent meanwhile (coordinated omission): their latencies
/// count from the intended send times, so one 100 ms stall at 1000/s shows
/// up as dozens of slow transactions, not one.
#[test]
fn fixed_rate_latency_counts_from_the_intended_send_time() {
    use offload_bench::engine::{client_rr_blocking, RrParams, Slot, Window};
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    let _g = serial();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut b = [0u8; 1];
        let mut n = 0u32;
        while s.read_exact(&mut b).is_ok() {
            n += 1;
            if n == 100 {
                std::thread::sleep(Duration::from_millis(100));
            }
            if s.write_all(&b).is_err() {
                break;
            }
        }
    });
    let stream = std::net::TcpStream::connect(addr).unwrap();
    let p = RrParams {
        request: 1,
        response: 1,
        rate_interval: Some(Duration::from_millis(1)),
        udp_timeout: Duration::from_millis(200),
        burst: 1,
    };
    let start = Instant::now();
    let w = Window {
        start,
        ws: start,
        we: start + Duration::from_millis(600),
    };
    let out = client_rr_blocking(stream.as_raw_fd(), false, &p, &w, &Slot::default()).unwrap();
    drop(stream);
    server.join().unwrap();
    let slow = out.hist.count_between(10_000_000, u64::MAX);
    assert!(
        slow >= 20,
        "only {slow} transactions above 10 ms: the stall was omitted"
    );
    assert!(
        out.hist.max() >= 90_000_000,
        "the stalled transaction itself: {}",
        out.hist.max()
    );
}
