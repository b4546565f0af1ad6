//! Per-flow TCP_INFO, requests in flight (--burst), several listeners, the
//! `--output` rows and the figures' invariants, end to end on loopback.

mod common;

use common::{assert_sane, serial, short};
use offload_bench::output::RowWriter;
use offload_bench::{client, Server, TestKind};

fn server(addr: &str) -> offload_bench::ServerHandle {
    Server::bind(addr.parse().unwrap())
        .unwrap()
        .echo_log(false)
        .spawn()
        .unwrap()
}

#[test]
fn tcp_info_of_every_flow_is_in_the_json() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let mut c = short(TestKind::TcpRr, s.addr());
    c.spec.flows = 8;
    c.threads = 2;
    c.spec.server_threads = 2;
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    assert_sane(&r);
    let t = r.tcp_info.as_ref().expect("TCP_INFO summary");
    assert_eq!(t.flows, 8);
    assert_eq!(t.per_flow.len(), 8);
    let flows: Vec<u32> = t.per_flow.iter().map(|f| f.flow).collect();
    assert_eq!(flows, (0..8).collect::<Vec<_>>());
    assert!(t
        .per_flow
        .iter()
        .all(|f| f.rtt_us > 0 && f.cwnd > 0 && f.local_port > 0));
    assert!(t.rtt_us.min <= t.rtt_us.median && t.rtt_us.median <= t.rtt_us.p99);
    let json = serde_json::to_value(&r).unwrap();
    let first = &json["tcp_info"]["per_flow"][0];
    for key in [
        "rtt_us",
        "rttvar_us",
        "cwnd",
        "retransmits",
        "delivery_rate_bps",
    ] {
        assert!(first.get(key).is_some(), "per_flow lacks {key}: {first}");
        assert!(json["tcp_info"].get(key).is_some(), "summary lacks {key}");
    }
    for key in ["min", "median", "p99"] {
        assert!(json["tcp_info"]["rtt_us"][key].is_number(), "{key}");
    }
    // The server's side of the same flows, joined on the ports.
    let st = r.server.tcp_info.as_ref().expect("server TCP_INFO summary");
    assert_eq!(st.flows, 8);
    let server_peers: std::collections::BTreeSet<u16> =
        st.per_flow.iter().filter_map(|f| f.peer_port).collect();
    let client_ports: std::collections::BTreeSet<u16> =
        t.per_flow.iter().map(|f| f.local_port).collect();
    assert_eq!(server_peers, client_ports);
    let client_peers: std::collections::BTreeSet<u16> =
        t.per_flow.iter().filter_map(|f| f.peer_port).collect();
    let server_ports: std::collections::BTreeSet<u16> =
        st.per_flow.iter().map(|f| f.local_port).collect();
    assert_eq!(client_peers, server_ports);
    assert!(st.per_flow.iter().all(|f| f.cwnd > 0));
    assert!(json["server"]["tcp_info"]["per_flow"][0]["rtt_us"].is_number());
}

#[test]
fn burst_keeps_requests_in_flight_and_counts_agree() {
    let _g = serial();
    let s = server("[::1]:0");
    for flows in [1u32, 3] {
        let mut c = short(TestKind::TcpRr, s.addr());
        c.spec.flows = flows;
        c.spec.burst = 16;
        let r = client::run_once(&c, &mut |_| {}).unwrap();
        assert_sane(&r);
        assert_eq!(r.settings.burst, 16);
        // Up to flows * burst transactions may be in flight at the end.
        let extra = r.counts.server_total - r.counts.client_total;
        assert!(extra <= u64::from(flows) * 16, "{:?}", r.counts);
        assert!(r.transactions_per_sec > 0.0);
    }
}

#[test]
fn cpu_parts_add_up_and_stay_under_100_percent() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let c = short(TestKind::TcpStream, s.addr());
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    let cpu = &r.cpu;
    assert!(cpu.machine_utilization_percent <= 100.0, "{cpu:?}");
    let sum = cpu.client_percent + cpu.server_percent + cpu.other_percent;
    assert!(
        sum >= cpu.machine_utilization_percent - 1e-6 && cpu.other_percent >= 0.0,
        "{cpu:?}"
    );
    // Stream tests: THROUGHPUT is 10^6 bits per second, as printed.
    assert_eq!(r.throughput_units, "10^6bits/s");
    assert!((r.select("THROUGHPUT").unwrap() - r.bits_per_sec / 1e6).abs() < 1e-6);
    assert!((r.gbit_per_sec * 1e9 - r.bits_per_sec).abs() < 1.0);
}

#[test]
fn udp_lost_selector_reads_the_printed_loss() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let c = short(TestKind::UdpStream, s.addr());
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    let u = r.udp.as_ref().unwrap();
    assert_eq!(r.select("LOST"), Some(u.lost as f64));
}

#[test]
fn output_rows_carry_k8s_netperf_names() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let dir = std::env::temp_dir().join(format!("ofl-rows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.jsonl");
    let mut w = RowWriter::open(&path).unwrap();
    w.set_samples(2);
    let c = short(TestKind::TcpRr, s.addr());
    for run in 1..=2 {
        let r = client::run_once(&c, &mut |_| {}).unwrap();
        w.write(&r, run).unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["profile"], "TCP_RR");
        assert_eq!(row["driver"], "offload");
        assert_eq!(row["parallelism"], 1);
        assert_eq!(row["messageSize"], 1);
        assert_eq!(row["samples"], 2);
        assert_eq!(row["run"], i as u64 + 1);
        assert_eq!(row["tputMetric"], "OP/s");
        assert!(row["throughput"].as_f64().unwrap() > 0.0);
        assert!(row["latencyP99"].as_f64().unwrap() > 0.0);
        assert_eq!(row["latency"], row["latencyP99"]);
    }
    assert_eq!(rows[0]["uuid"], rows[1]["uuid"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_rows_carry_every_knob_that_changes_results() {
    let _g = serial();
    let s = server("127.0.0.1:0");
    let dir = std::env::temp_dir().join(format!("ofl-knobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = short(TestKind::UdpStream, s.addr());
    c.spec.request = 32;
    c.spec.knobs.batch = 8;
    c.spec.knobs.rx_usecs = Some(30);
    c.spec.knobs.udp_gro = true;
    c.spec.knobs.sndbuf = Some(1 << 20);
    let r = client::run_once(&c, &mut |_| {}).unwrap();
    let mut names = vec!["runs.jsonl"];
    if cfg!(feature = "parquet") {
        names.push("runs.parquet");
    }
    for name in names {
        let path = dir.join(name);
        let mut w = RowWriter::open(&path).unwrap();
        w.write(&r, 1).unwrap();
        let rows = offload_bench::output::read_rows(&path).unwrap();
        assert_eq!(rows.len(), 1, "{name}");
        let row = &rows[0];
        let int = |k: &str| {
            row[k]
                .as_i64()
                .unwrap_or_else(|| panic!("{name}: {k} = {}", row[k]))
        };
        assert_eq!(row["profile"], "UDP_STREAM", "{name}");
        assert_eq!(int("rxUsecs"), 30, "{name}");
        assert_eq!(int("batch"), 8, "{name}");
        assert_eq!(row["udpGro"], true, "{name}");
        assert_eq!(int("sndbufRequested"), 1 << 20, "{name}");
        // The kernel doubles SO_SNDBUF for its bookkeeping.
        assert!(int("sndbuf") >= 1 << 20, "{name}: {row:?}");
        assert!(row["rcvbufRequested"].is_null(), "{name}");
        assert_eq!(row["engine"], "sendmmsg", "{name}");
        assert_eq!(row["warmup"].as_f64(), Some(0.3), "{name}");
        assert_eq!(row["noIo"], false, "{name}");
        assert!(row["rate"].is_null(), "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
