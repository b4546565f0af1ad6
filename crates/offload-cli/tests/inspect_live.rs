//! `offload inspect --live` against perf's own tracepoint counts over the
//! same window, per device, on traffic the kernel makes between anonymous
//! namespaces; and its OpenMetrics output read by the Prometheus project's
//! own parser. Needs root, `ip`, `perf` and Python's `prometheus_client`
//! (.ci/install).
//!
//! Tolerance: the traffic is bounded (a fixed number of bytes and
//! datagrams) and starts after every counter is attached and ends before
//! any window closes, so perf and inspect see the same packets; IPv6 is
//! off in every namespace (no neighbour discovery or MLD). What may still
//! differ is a stray ARP exchange: the sums may differ by at most 4
//! packets.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use offload_sys::NetNs;

mod common;

use common::netns::{command_in, veth_pair};
use common::{succeeded, BIN};

/// `prog args`, inside `ns` if one is given, else on the host.
fn command(ns: Option<&NetNs>, prog: &str, args: &[&str]) -> Command {
    match ns {
        Some(ns) => command_in(ns, prog, args),
        None => {
            let mut cmd = Command::new(prog);
            cmd.args(args);
            cmd
        }
    }
}

fn run(ns: &NetNs, prog: &str, args: &str) {
    let a: Vec<&str> = args.split_whitespace().collect();
    let out = command_in(ns, prog, &a)
        .output()
        .unwrap_or_else(|e| panic!("{prog} {args}: {e}"));
    succeeded(out, &format!("{prog} {args}"));
}

fn spawn(ns: Option<&NetNs>, prog: &str, args: &[&str]) -> Child {
    command(ns, prog, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{prog} {args:?}: {e}"))
}

fn finished(child: Child, what: &str) -> Output {
    succeeded(child.wait_with_output().unwrap(), what)
}

/// A namespace without IPv6 (no router solicitations, DAD or MLD packets
/// on its devices) and with lo up.
fn quiet_ns() -> NetNs {
    let ns = NetNs::new_anonymous().unwrap();
    ns.run(|| {
        for k in ["all", "default"] {
            std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1")
                .map_err(|e| offload_sys::Error::sys("disable_ipv6", e))?;
        }
        Ok(())
    })
    .unwrap();
    run(&ns, "ip", "link set lo up");
    ns
}

/// perf's counts of the GRO entry hooks and netif_receive_skb for device
/// name `dev`, from `perf stat -x,` output.
fn perf_counts(stderr: &str, dev: &str) -> (u64, u64) {
    let mut gro = 0;
    let mut stack = 0;
    for line in stderr.lines() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 3 {
            continue;
        }
        let n: u64 = f[0]
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("perf line {line:?}"));
        match f[2].trim() {
            "net:napi_gro_receive_entry" | "net:napi_gro_frags_entry" => gro += n,
            "net:netif_receive_skb" => stack += n,
            other => panic!("unexpected perf event {other:?} ({dev})"),
        }
    }
    (gro, stack)
}

fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn close(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= 4
}

/// Two devices of one name in two namespaces: `B` receives a TCP stream
/// its veth merges (sender TSO off, BIG TCP sizes on the receiver), `C`
/// receives UDP datagrams from `D` on a veth without GRO. `inspect --live` in each
/// namespace must count only its own device, and their sum must be what
/// perf counts for the name over the same window.
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn live_matches_perf_per_device_identity() {
    let pid = std::process::id();
    let dev = format!("olv{pid}");
    let (a, b, c) = (quiet_ns(), quiet_ns(), quiet_ns());
    // A -> B: the stream.
    veth_pair(&a, &format!("olva{pid}"), &b, &dev);
    run(&a, "ip", &format!("addr add 10.79.0.1/24 dev olva{pid}"));
    run(&a, "ip", &format!("link set olva{pid} up"));
    run(&a, "ethtool", &format!("-K olva{pid} tso off"));
    // The sender's software GSO builds bursts of up to gso_max_size: BIG
    // TCP on both ends, so one NAPI poll can merge past 64 KiB.
    a.run(|| {
        let mut rtnl = offload_sys::rtnl::Rtnl::open()?;
        let i = rtnl.link_by_name(&format!("olva{pid}"))?.index;
        rtnl.set_gso_max_size(i, 185_000)?;
        rtnl.set_gso_ipv4_max_size(i, 185_000)
    })
    .unwrap();
    run(&b, "ip", &format!("addr add 10.79.0.2/24 dev {dev}"));
    // iproute2 6.1 has no gro_ipv4_max_size keyword: rtnetlink directly.
    b.run(|| {
        let mut rtnl = offload_sys::rtnl::Rtnl::open()?;
        let i = rtnl.link_by_name(&dev)?.index;
        rtnl.set_gro_max_size(i, 185_000)?;
        rtnl.set_gro_ipv4_max_size(i, 185_000)
    })
    .unwrap();
    run(&b, "ip", &format!("link set {dev} up"));
    run(&b, "ethtool", &format!("-K {dev} gro on"));
    // D -> C: the same name, its own traffic, no GRO (a veth without NAPI
    // hands packets to netif_rx: they bypass GRO).
    let d = quiet_ns();
    veth_pair(&d, &format!("olvd{pid}"), &c, &dev);
    run(&d, "ip", &format!("addr add 10.80.0.2/24 dev olvd{pid}"));
    run(&d, "ip", &format!("link set olvd{pid} up"));
    run(&c, "ip", &format!("addr add 10.80.0.1/24 dev {dev}"));
    run(&c, "ip", &format!("link set {dev} up"));

    let exe = BIN;
    let filter = format!("name == \"{dev}\"");
    let perf = spawn(
        None,
        "perf",
        &[
            "stat",
            "-a",
            "-x,",
            "-e",
            "net:napi_gro_receive_entry",
            "--filter",
            &filter,
            "-e",
            "net:napi_gro_frags_entry",
            "--filter",
            &filter,
            "-e",
            "net:netif_receive_skb",
            "--filter",
            &filter,
            "--",
            "sleep",
            "7",
        ],
    );
    let live_b = spawn(Some(&b), exe, &["inspect", "--json", "--live", "5s", &dev]);
    let live_c = spawn(Some(&c), exe, &["inspect", "--json", "--live", "5s", &dev]);
    // Everything attached (inspect's own window of 1 s comes first).
    std::thread::sleep(Duration::from_millis(2500));

    // Bounded traffic: 16 MiB over TCP from A to B, 500 datagrams in C.
    let listener = b
        .run(|| {
            std::net::TcpListener::bind("10.79.0.2:5201")
                .map_err(|e| offload_sys::Error::sys("bind", e))
        })
        .unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let (mut s, _) = listener.accept().unwrap();
        let mut total = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    a.run(|| {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect("10.79.0.2:5201")
            .map_err(|e| offload_sys::Error::sys("connect", e))?;
        let buf = vec![7u8; 1 << 16];
        for _ in 0..256 {
            s.write_all(&buf)
                .map_err(|e| offload_sys::Error::sys("write", e))?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(reader.join().unwrap(), 16 << 20);
    let rx = c
        .run(|| {
            std::net::UdpSocket::bind("10.80.0.1:9000")
                .map_err(|e| offload_sys::Error::sys("bind", e))
        })
        .unwrap();
    d.run(|| {
        let tx = std::net::UdpSocket::bind("10.80.0.2:0")
            .map_err(|e| offload_sys::Error::sys("bind", e))?;
        rx.set_read_timeout(Some(Duration::from_secs(2))).ok();
        let mut got = 0;
        let mut buf = [0u8; 2048];
        for _ in 0..500 {
            tx.send_to(&[1u8; 1000], "10.80.0.1:9000")
                .map_err(|e| offload_sys::Error::sys("send", e))?;
            if rx.recv(&mut buf).is_ok() {
                got += 1;
            }
        }
        assert_eq!(got, 500, "datagrams through the veth in C");
        Ok(())
    })
    .unwrap();

    let vb: serde_json::Value =
        serde_json::from_slice(&finished(live_b, "inspect in B").stdout).unwrap();
    let vc: serde_json::Value =
        serde_json::from_slice(&finished(live_c, "inspect in C").stdout).unwrap();
    let perf = finished(perf, "perf stat");
    let (perf_gro, perf_stack) = perf_counts(&String::from_utf8_lossy(&perf.stderr), &dev);
    let db = &vb["live"]["devices"][0];
    let dc = &vc["live"]["devices"][0];
    eprintln!("perf: gro {perf_gro} stack {perf_stack}\nB: {db}\nC: {dc}");
    assert_eq!(db["name"], dev.as_str());
    assert_eq!(dc["name"], dev.as_str());
    assert_ne!(db["netns"], dc["netns"], "two namespaces");

    // The stream: every segment went through GRO in B, merged.
    let segments = (16u64 << 20) / 1448;
    assert!(u(db, "gro_in") >= segments, "B saw the whole stream: {db}");
    assert!(u(db, "merged") > u(db, "gro_in") / 2, "{db}");
    assert!(db["merge_ratio"].as_f64().unwrap() > 2.0, "{db}");
    // Every packet into the stack in B came out of GRO; GRO's verdicts
    // account for every packet in.
    assert!(close(u(db, "gro_out"), u(db, "stack")), "{db}");
    assert_eq!(
        u(db, "bypassed_gro"),
        u(db, "stack") - u(db, "gro_out").min(u(db, "stack"))
    );
    assert!(close(
        u(db, "merged") + u(db, "held") + u(db, "normal") + u(db, "consumed"),
        u(db, "gro_in")
    ));
    // Sizes: MTU-sized packets in, super-packets out; gro_max_size 185000
    // lets one pass 64 KiB (BIG TCP).
    assert_eq!(u(db, "gro_in_largest"), 1500, "{db}");
    assert!(
        db["stack_bytes_per_packet"].as_f64().unwrap() > 3000.0,
        "{db}"
    );
    assert!(
        u(db, "stack_largest") > 65536,
        "BIG TCP super-packets: {db}"
    );

    // C: its own 500 datagrams (and an ARP exchange), none through GRO,
    // and no merge ratio made of them.
    assert_eq!(u(dc, "gro_in"), 0, "{dc}");
    assert!(u(dc, "stack") >= 500 && u(dc, "stack") <= 504, "{dc}");
    assert!(dc["merge_ratio"].is_null(), "{dc}");
    assert_eq!(u(dc, "bypassed_gro"), u(dc, "stack"));
    assert!(u(dc, "stack_largest") >= 1028, "{dc}");

    // perf counts the name in every namespace: it sees both devices.
    assert!(
        close(perf_gro, u(db, "gro_in") + u(dc, "gro_in")),
        "GRO entries: perf {perf_gro}, inspect {} + {}",
        u(db, "gro_in"),
        u(dc, "gro_in")
    );
    assert!(
        close(perf_stack, u(db, "stack") + u(dc, "stack")),
        "netif_receive_skb: perf {perf_stack}, inspect {} + {}",
        u(db, "stack"),
        u(dc, "stack")
    );
}

/// Parses OpenMetrics text with the Prometheus project's Python parser
/// (`prometheus_client.openmetrics.parser`, which insists on `# EOF`,
/// escaped label values, one TYPE per family, samples named after their
/// family) and returns {family: {"type", "help", "samples": [[labels, value]]}}.
fn parse_openmetrics(text: &str) -> serde_json::Value {
    use std::io::Write;
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {"type": f.type, "help": f.documentation,
                   "samples": [[s.labels, s.value] for s in f.samples]}
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = finished(child, "prometheus_client's OpenMetrics parser");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `--prometheus` prints OpenMetrics and `--textfile` writes the same text
/// for node_exporter, atomically, leaving nothing else in the directory;
/// a device name with a quote and a backslash survives as a label value.
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn prometheus_and_textfile_output_parse_as_openmetrics() {
    let pid = std::process::id();
    let odd = format!("o\"\\{}", pid % 100_000);
    let plain = format!("opm{pid}");
    let ns = quiet_ns();
    run(&ns, "ip", &format!("link add {odd} type veth peer {plain}"));
    run(&ns, "ip", &format!("link set {odd} up"));
    run(&ns, "ip", &format!("link set {plain} up"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offload.prom");
    std::fs::write(&path, "stale\n").unwrap();
    let exe = BIN;
    let out = finished(
        spawn(
            Some(&ns),
            exe,
            &[
                "inspect",
                "--live",
                "1s",
                "--prometheus",
                "--textfile",
                path.to_str().unwrap(),
                &odd,
                &plain,
            ],
        ),
        "inspect --prometheus",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let file = std::fs::read_to_string(&path).unwrap();
    assert_eq!(file, text, "the textfile holds what was printed");
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("offload.prom")]);

    // `--textfile -` is standard output: the metrics alone.
    let out = finished(
        spawn(
            Some(&ns),
            exe,
            &["inspect", "--live", "1s", "--textfile", "-", &plain],
        ),
        "inspect --textfile -",
    );
    let dash = String::from_utf8(out.stdout).unwrap();
    assert!(
        dash.starts_with("# TYPE ") && dash.ends_with("# EOF\n"),
        "{dash}"
    );
    parse_openmetrics(&dash);

    let v = parse_openmetrics(&text);
    for family in [
        "offload_gro_window_seconds",
        "offload_gro_in_packets_per_second",
        "offload_gro_out_packets_per_second",
        "offload_gro_result_packets_per_second",
        "offload_gro_stack_packets_per_second",
        "offload_gro_bypassed_packets_per_second",
        "offload_gro_largest_stack_packet_bytes",
    ] {
        assert_eq!(v[family]["type"], "gauge", "{family}: {v}");
        assert!(!v[family]["help"].as_str().unwrap().is_empty());
    }
    let window = v["offload_gro_window_seconds"]["samples"][0][1]
        .as_f64()
        .unwrap();
    assert!((0.9..5.0).contains(&window), "{window}");
    let devices: std::collections::BTreeSet<String> = v["offload_gro_in_packets_per_second"]
        ["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[0]["device"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(devices, [odd.clone(), plain.clone()].into_iter().collect());
    // Four GRO results per device, each labelled.
    let results = v["offload_gro_result_packets_per_second"]["samples"]
        .as_array()
        .unwrap();
    assert_eq!(results.len(), 8);
    assert!(results.iter().all(|s| s[0]["result"].is_string()
        && s[0]["netns"].as_str().unwrap().parse::<u64>().is_ok()
        && s[0]["ifindex"].as_str().unwrap().parse::<u32>().is_ok()));
    // No GRO traffic on idle devices: no merge ratio sample, not a 0.
    assert!(v["offload_gro_merge_ratio"]["samples"]
        .as_array()
        .is_none_or(|s| s.is_empty()));
}
