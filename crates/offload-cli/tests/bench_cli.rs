//! `offload bench` as a user types it, through the built binary: size and
//! rate suffixes, bare seconds, `--host ADDR:PORT` and `[v6]:port`,
//! `bench server --json` events, per-test `--help`, Ctrl-C's partial
//! summary with exit status 130, and per-flow TCP_INFO in `--json` at
//! 30,000 flows. Loopback only; no figure is asserted against a time.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::netns::offload_in;
use common::{json_of, signal, succeeded, BIN};

/// A `bench server --json` on an ephemeral port; killed on drop.
struct Server {
    child: Child,
    addr: String,
    events: std::sync::mpsc::Receiver<Value>,
}

impl Server {
    fn start(listen: &str) -> Server {
        Self::start_with(&["--listen", listen])
    }

    fn start_with(args: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .args(["bench", "server", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn offload bench server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("server --json line is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a listening event");
        assert_eq!(first["event"], "listening", "{first}");
        assert!(first["time"].as_f64().unwrap() > 1.0e9, "{first}");
        let addr = first["addr"].as_str().unwrap().to_string();
        Server {
            child,
            addr,
            events: rx,
        }
    }

    /// Events seen so far, waiting until one named `until` arrives.
    fn events_until(&self, until: &str) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            if let Ok(v) = self.events.recv_timeout(Duration::from_millis(200)) {
                let done = v["event"] == until;
                seen.push(v);
                if done {
                    return seen;
                }
            }
        }
        panic!("no {until} event; saw {seen:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("bench")
        .args(args)
        .output()
        .expect("run offload bench")
}

/// `offload bench TEST ARGS... --duration 0.3 --warmup 0 --json`: a short
/// run whose report is read as JSON (the run must succeed).
fn short_json(test: &str, args: &[&str]) -> Value {
    let mut all = vec![test];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--duration", "0.3", "--warmup", "0", "--json"]);
    json_of(&bench(&all))
}

#[test]
fn sizes_take_suffixes_durations_bare_seconds_and_host_addr_port() {
    let srv = Server::start("127.0.0.1:0");
    let out = bench(&[
        "tcp-rr",
        "-H",
        &srv.addr,
        "--request",
        "1K",
        "--response",
        "2K",
        "--duration",
        "0.5",
        "--warmup",
        "0.2",
        "--json",
    ]);
    let j = json_of(&out);
    let s = &j["settings"];
    assert_eq!(s["request"], 1024, "{s}");
    assert_eq!(s["response"], 2048, "{s}");
    assert_eq!(s["duration_seconds"], 0.5, "{s}");
    assert_eq!(s["warmup_seconds"], 0.2, "{s}");
    assert_eq!(s["server"], srv.addr.as_str(), "{s}");
    assert!(j["transactions_per_sec"].as_f64().unwrap() > 0.0, "{j}");

    let out = bench(&[
        "tcp-stream",
        "-H",
        &srv.addr,
        "--request",
        "64K",
        "--sndbuf",
        "4M",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    let j = json_of(&out);
    assert_eq!(j["settings"]["request"], 65536, "{}", j["settings"]);
    assert_eq!(
        j["settings"]["sndbuf_requested"],
        4 << 20,
        "{}",
        j["settings"]
    );
    assert_eq!(j["throughput_units"], "10^6bits/s", "{j}");

    // A rate takes powers of 1000; a duration may carry a unit.
    let out = bench(&[
        "udp-rr",
        "-H",
        &srv.addr,
        "--rate",
        "2K",
        "--duration",
        "500ms",
        "--warmup",
        "0",
        "--json",
    ]);
    let j = json_of(&out);
    assert_eq!(j["settings"]["rate"], 2000.0, "{}", j["settings"]);
    assert_eq!(j["settings"]["duration_seconds"], 0.5, "{}", j["settings"]);

    // `-O` reads the figures the JSON holds.
    let out = bench(&[
        "tcp-rr",
        "-H",
        &srv.addr,
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "-O",
        "THROUGHPUT,THROUGHPUT_UNITS",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Trans/s"), "{text}");
}

#[test]
fn host_takes_bracketed_ipv6_with_a_port() {
    let srv = Server::start("[::1]:0");
    assert!(srv.addr.starts_with("[::1]:"), "{}", srv.addr);
    let j = short_json("tcp-rr", &["-H", &srv.addr]);
    assert_eq!(j["settings"]["ipv6"], true, "{}", j["settings"]);
    // The bare bracketed form with --port means the same place.
    let port = srv.addr.rsplit(':').next().unwrap();
    let out = bench(&[
        "tcp-rr",
        "-H",
        "[::1]",
        "--port",
        port,
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "--json",
    ]);
    assert_eq!(json_of(&out)["settings"]["ipv6"], true);
}

/// A secret file in a directory private to this test (0700), removed with
/// the returned guard on every exit path.
fn secret_file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(name);
    std::fs::write(&f, text).unwrap();
    (dir, f)
}

#[test]
fn beyond_loopback_the_server_needs_a_secret_and_clients_must_give_it() {
    let out = bench(&["server", "--listen", "0.0.0.0:0"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without authentication")
            && err.contains("--auth-file"),
        "{err}"
    );
    let (_dir, f) = secret_file("server-secret", "a secret of twenty bytes\n");
    let srv = Server::start_with(&["--listen", "0.0.0.0:0", "--auth-file", f.to_str().unwrap()]);
    let port = srv.addr.rsplit(':').next().unwrap().to_string();
    let host = format!("127.0.0.1:{port}");
    let out = bench(&["tcp-rr", "-H", &host, "--duration", "0.3", "--warmup", "0"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("requires authentication"), "{err}");
    let j = short_json("tcp-rr", &["-H", &host, "--auth-file", f.to_str().unwrap()]);
    assert!(j["transactions_per_sec"].as_f64().unwrap() > 0.0, "{j}");
    let out = Command::new(BIN)
        .args([
            "bench",
            "tcp-rr",
            "-H",
            &host,
            "--duration",
            "0.3",
            "--warmup",
            "0",
            "--json",
        ])
        .env("OFFLOAD_BENCH_SECRET", "a secret of twenty bytes")
        .output()
        .unwrap();
    assert!(json_of(&out)["transactions_per_sec"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_wildcard_v6_server_serves_ipv4_and_ipv6_clients() {
    // `[::]` serves every interface (with a secret: it is beyond loopback):
    // both families reach it, and IPv4 peers are named as IPv4 in its
    // events.
    let (_dir, f) = secret_file("wildcard-secret", "sixteen bytes or more");
    let f = f.to_str().unwrap();
    let srv = Server::start_with(&["--listen", "[::]:0", "--auth-file", f]);
    let port = srv.addr.rsplit(':').next().unwrap().to_string();
    for (host, v6) in [
        (format!("127.0.0.1:{port}"), false),
        (format!("[::1]:{port}"), true),
    ] {
        let j = short_json("udp-stream", &["-H", &host, "--auth-file", f]);
        assert_eq!(j["settings"]["ipv6"], v6, "{}", j["settings"]);
        assert!(j["packets_per_sec"].as_f64().unwrap() > 0.0, "{j}");
        let j = short_json("tcp-rr", &["-H", &host, "--auth-file", f]);
        assert!(j["transactions_per_sec"].as_f64().unwrap() > 0.0);
    }
    let events = srv.events_until("disconnected");
    let connected = events.iter().find(|e| e["event"] == "connected").unwrap();
    assert!(
        connected["peer"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"),
        "{connected}"
    );
}

#[test]
fn host_defaults_to_loopback_as_netperf_does() {
    let srv = Server::start("127.0.0.1:0");
    let port = srv.addr.rsplit(':').next().unwrap();
    let j = short_json("tcp-rr", &["--port", port]);
    assert_eq!(j["settings"]["ipv6"], false, "{}", j["settings"]);
    assert!(j["transactions_per_sec"].as_f64().unwrap() > 0.0, "{j}");
}

#[test]
fn server_json_prints_one_event_per_line_for_a_test() {
    let srv = Server::start("127.0.0.1:0");
    let out = bench(&[
        "tcp-rr",
        "-H",
        &srv.addr,
        "--flows",
        "3",
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = srv.events_until("disconnected");
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for want in ["connected", "test_started", "test_finished", "disconnected"] {
        assert!(names.contains(&want), "no {want} in {names:?}");
    }
    for e in &events {
        assert!(e["time"].as_f64().is_some(), "{e}");
    }
    let started = events
        .iter()
        .find(|e| e["event"] == "test_started")
        .unwrap();
    assert_eq!(started["test"], "tcp-rr", "{started}");
    assert_eq!(started["flows"], 3, "{started}");
    let finished = events
        .iter()
        .find(|e| e["event"] == "test_finished")
        .unwrap();
    assert_eq!(finished["flows_accepted"], 3, "{finished}");
    assert!(finished["transactions"].as_u64().unwrap() > 0, "{finished}");
}

#[test]
fn every_test_has_its_own_help_and_refuses_options_of_another() {
    let help = |test: &str| {
        let out = bench(&[test, "--help"]);
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let udp_stream = help("udp-stream");
    assert!(
        udp_stream.contains("--udp-gro") && udp_stream.contains("--udp-gso"),
        "{udp_stream}"
    );
    let tcp_rr = help("tcp-rr");
    assert!(tcp_rr.contains("--burst"), "{tcp_rr}");
    assert!(
        !tcp_rr.contains("--udp-gro") && !tcp_rr.contains("--reuseport"),
        "{tcp_rr}"
    );
    let tcp_crr = help("tcp-crr");
    assert!(
        tcp_crr.contains("--reset") && !tcp_crr.contains("--burst"),
        "{tcp_crr}"
    );

    let out = bench(&["tcp-rr", "-H", "127.0.0.1:1", "--udp-gro"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--udp-gro"));
}

fn interrupt_after_intervals(args: &[&str]) -> (Option<i32>, String) {
    let child = Command::new(BIN)
        .arg("bench")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for the warm-up and a few interval samples.
    std::thread::sleep(Duration::from_millis(2500));
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn ctrl_c_prints_the_partial_summary_and_exits_130() {
    let srv = Server::start("127.0.0.1:0");
    let args = [
        "tcp-rr",
        "-H",
        &srv.addr,
        "--duration",
        "60",
        "--warmup",
        "0.2",
        "--interval",
        "0.2",
    ];
    let (code, stdout) = interrupt_after_intervals(&[&args[..], &["--json"]].concat());
    assert_eq!(code, Some(130), "{stdout}");
    let last = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .expect("a JSON line");
    let j: Value = serde_json::from_str(last).unwrap();
    assert_eq!(j["interrupted"], true, "{j}");
    assert!(
        j["current_run"]["transactions_per_sec"].as_f64().unwrap() > 0.0,
        "{j}"
    );

    let (code, stdout) = interrupt_after_intervals(&args);
    assert_eq!(code, Some(130), "{stdout}");
    assert!(stdout.contains("interrupted: partial summary"), "{stdout}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn thirty_thousand_flows_report_tcp_info_per_flow_in_json() {
    let srv = Server::start("127.0.0.1:0");
    let out = bench(&[
        "tcp-rr",
        "-H",
        &srv.addr,
        "--flows",
        "30000",
        "--threads",
        "2",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--json",
    ]);
    let j = json_of(&out);
    assert_eq!(j["settings"]["flows"], 30000);
    assert_eq!(j["server"]["flows_accepted"], 30000, "{}", j["server"]);
    let ti = &j["tcp_info"];
    assert_eq!(ti["flows"], 30000);
    let per_flow = ti["per_flow"].as_array().unwrap();
    assert_eq!(per_flow.len(), 30000);
    let mut flows = std::collections::HashSet::new();
    for f in per_flow {
        for key in [
            "rtt_us",
            "rttvar_us",
            "cwnd",
            "retransmits",
            "delivery_rate_bps",
        ] {
            assert!(f[key].as_u64().is_some(), "{key} missing in {f}");
        }
        assert!(f["cwnd"].as_u64().unwrap() > 0, "{f}");
        assert!(f["local_port"].as_u64().unwrap() > 0, "{f}");
        flows.insert(f["flow"].as_u64().unwrap());
    }
    // One row per flow, not one flow repeated.
    assert_eq!(flows.len(), 30000);
    let rtt = &ti["rtt_us"];
    assert!(rtt["min"].as_f64().unwrap() <= rtt["median"].as_f64().unwrap());
    assert!(rtt["median"].as_f64().unwrap() <= rtt["p99"].as_f64().unwrap());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn compare_of_saved_results_shows_what_tune_changed_and_that_revert_restored_it() {
    let ns = offload_sys::NetNs::new_anonymous().unwrap();
    ns.run(|| {
        let mut r = offload_sys::rtnl::Rtnl::open()?;
        let lo = r.link_by_name("lo")?.index;
        r.set_up(lo, true)
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let mut server = offload_in(&ns, &["bench", "server", "--listen", "127.0.0.1:12867"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A run of two, saved as `--json` writes it.
    let save = |name: &str| {
        let out = succeeded(
            offload_in(
                &ns,
                &[
                    "bench",
                    "tcp-rr",
                    "--duration",
                    "0.3",
                    "--warmup",
                    "0",
                    "--runs",
                    "2",
                    "--json",
                    "-q",
                ],
            )
            .output()
            .unwrap(),
            "bench tcp-rr --runs 2",
        );
        std::fs::write(path(name), &out.stdout).unwrap();
    };
    // The server needs a moment to listen: the first client retries.
    let started = Instant::now();
    loop {
        let out = offload_in(
            &ns,
            &[
                "bench",
                "tcp-rr",
                "--duration",
                "0.1",
                "--warmup",
                "0",
                "-q",
            ],
        )
        .output()
        .unwrap();
        if out.status.success() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no server");
        std::thread::sleep(Duration::from_millis(100));
    }
    save("before.json");
    let state = path("tune.json");
    succeeded(
        offload_in(
            &ns,
            &[
                "tune",
                "--set",
                "lo:gro_max_size=131072",
                "--set",
                "sysctl:net.ipv4.tcp_autocorking=0",
                "--state",
                &state,
                "--apply",
            ],
        )
        .output()
        .unwrap(),
        "tune --apply",
    );
    save("after.json");
    succeeded(
        offload_in(&ns, &["tune", "--revert", "--state", &state])
            .output()
            .unwrap(),
        "tune --revert",
    );
    save("reverted.json");
    let _ = server.kill();
    let _ = server.wait();

    // The table names every change on both sides, beside the figures.
    let out = succeeded(
        bench(&["--compare", &path("before.json"), &path("after.json")]),
        "bench --compare",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for side in ["client", "server"] {
        for line in [
            format!("{side} lo gro_max_size"),
            format!("{side} sysctl net.ipv4.tcp_autocorking"),
        ] {
            assert!(text.contains(&line), "no {line:?} in\n{text}");
        }
    }
    assert!(
        text.contains("65536 -> 131072") && text.contains("1 -> 0"),
        "{text}"
    );
    assert!(
        text.contains("transactions/s") && text.contains("pairs: 2"),
        "{text}"
    );
    // The JSON has the same, with the paired statistics.
    let v = json_of(&bench(&[
        "--compare",
        &path("before.json"),
        &path("after.json"),
        "--json",
    ]));
    let diffs = v["state_differences"].as_array().unwrap();
    let whats: Vec<(&str, &str, &str, &str)> = diffs
        .iter()
        .map(|d| {
            (
                d["side"].as_str().unwrap(),
                d["what"].as_str().unwrap(),
                d["a"].as_str().unwrap(),
                d["b"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        whats,
        vec![
            ("client", "lo gro_max_size", "65536", "131072"),
            ("client", "sysctl net.ipv4.tcp_autocorking", "1", "0"),
            ("server", "lo gro_max_size", "65536", "131072"),
            ("server", "sysctl net.ipv4.tcp_autocorking", "1", "0"),
        ]
    );
    assert_eq!(v["a_runs"].as_array().unwrap().len(), 2);
    assert!(v["transactions_per_sec"]["a"]["mean"].as_f64().unwrap() > 0.0);
    // After --revert nothing recorded differs from before.
    let v = json_of(&bench(&[
        "--compare",
        &path("before.json"),
        &path("reverted.json"),
        "--json",
    ]));
    assert_eq!(v["state_differences"], serde_json::json!([]), "{v}");
    // A file that is not a result: an error naming it.
    std::fs::write(path("bad.json"), "{\"x\": 1}").unwrap();
    let out = bench(&["--compare", &path("bad.json"), &path("after.json")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("not the --json output"),
        "{err}"
    );
}
