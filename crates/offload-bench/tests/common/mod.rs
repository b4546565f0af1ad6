//! Shared helpers of the integration tests: a serial lock (the tests measure
//! CPU, so they must not share the two cores with each other), short run
//! configurations and the sanity checks every result must pass.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use offload_bench::report::BenchResult;
use offload_bench::{ClientConfig, TestKind};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the measuring tests of one test binary.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A short configuration: 0.3 s warm-up, 1 s window.
pub fn short(kind: TestKind, server: SocketAddr) -> ClientConfig {
    let mut c = ClientConfig::new(kind, server);
    c.warmup = Duration::from_millis(300);
    c.duration = Duration::from_secs(1);
    c
}

/// Checks what must hold for every result.
pub fn assert_sane(r: &BenchResult) {
    let ctx = serde_json::to_string(&r.counts).unwrap();
    assert!(r.counts.consistent, "counts inconsistent: {ctx}");
    assert!(r.transactions_per_sec > 0.0, "no transactions: {ctx}");
    assert!(r.transactions_per_sec.is_finite());
    assert!(r.cpu.window_seconds > 0.1 && r.cpu.window_seconds < 10.0);
    // CPU figures are non-negative and plausible: no more than every CPU of
    // the machine for the whole window, and threads below their wall time.
    let cpus = f64::from(r.cpu.machine.cpus.max(1));
    assert!(r.cpu.machine_busy_seconds >= 0.0);
    assert!(
        r.cpu.machine_busy_seconds <= cpus * r.cpu.window_seconds * 1.1 + 0.05,
        "{:?}",
        r.cpu
    );
    assert!(r.cpu_seconds_per_transaction >= 0.0);
    for p in [r.cpu.client, r.cpu.server] {
        assert!(p.user >= 0.0 && p.system >= 0.0 && p.total >= 0.0);
    }
    let threads = f64::from(r.settings.threads + r.settings.server_threads + 2);
    assert!(
        r.cpu.client.total + r.cpu.server.total <= threads * r.cpu.window_seconds * 1.2 + 0.05,
        "{:?}",
        r.cpu
    );
    if r.test.is_rr() {
        let l = r.latency_us.expect("rr tests have latency");
        assert!(l.min > 0.0);
        assert!(
            l.min <= l.p50
                && l.p50 <= l.p90
                && l.p90 <= l.p99
                && l.p99 <= l.p999
                && l.p999 <= l.max,
            "{l:?}"
        );
        assert_eq!(l.count, r.counts.client_window);
        assert_eq!(r.counts.histogram, r.counts.client_window);
        let implied = r.counts.client_window as f64 / r.cpu.window_seconds;
        assert!((implied - r.transactions_per_sec).abs() < 1e-6 * implied.max(1.0));
        assert!(r.counts.client_total >= r.counts.client_window);
    }
    // Every result carries its effective settings.
    assert_eq!(r.settings.test, r.test.name());
    assert!(!r.settings.client_host.kernel.is_empty());
    assert!(!r.settings.server_host.kernel.is_empty() || r.settings.null);
    assert_eq!(
        r.settings.client_pin_used.len(),
        r.settings.threads as usize
    );
    // The JSON has the documented top-level keys.
    let v = serde_json::to_value(r).unwrap();
    for k in [
        "transactions_per_sec",
        "latency_us",
        "cpu_seconds_per_transaction",
        "settings",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
}

/// A server in a child process (its own open-file limit); killed on drop.
pub struct ChildServer {
    child: std::process::Child,
    /// The bound control address.
    pub addr: SocketAddr,
}

impl ChildServer {
    /// Starts `ofl-bench-server` on `addr`.
    pub fn start(addr: &str) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ofl-bench-server"))
            .arg(addr)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawning ofl-bench-server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().parse().expect("server address");
        ChildServer { child, addr }
    }
}

impl ChildServer {
    /// A /proc/PID/status field of the server process, in its unit (kB).
    pub fn status_field(&self, name: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{}/status", self.child.id()))
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory of the server process so far, in bytes.
    pub fn peak_rss(&self) -> u64 {
        self.status_field("VmHWM") * 1024
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
