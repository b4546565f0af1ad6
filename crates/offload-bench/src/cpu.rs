//! CPU and kernel-counter accounting from /proc: the machine's user, system,
//! irq and softirq time (/proc/stat), each benchmark thread's time
//! (/proc/self/task/TID/stat and schedstat) and the UDP drop counters of the
//! calling thread's network namespace (/proc/thread-self/net/snmp, snmp6).
//!
//! Snapshots are taken outside the hot path, at the edges of the measurement
//! window, and subtracted.

use serde::{Deserialize, Serialize};

use crate::error::BenchError;

/// Cumulative CPU time of the whole machine, in seconds, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineCpu {
    /// User plus nice time.
    pub user: f64,
    /// System time (not counting irq and softirq).
    pub system: f64,
    /// Hard interrupt time.
    pub irq: f64,
    /// Softirq time: where most of the network stack's receive work runs.
    pub softirq: f64,
    /// Idle plus iowait time.
    pub idle: f64,
    /// Stolen time (virtual machines).
    pub steal: f64,
    /// Number of CPUs counted.
    pub cpus: u32,
}

impl MachineCpu {
    /// Busy time: everything but idle.
    pub fn busy(&self) -> f64 {
        self.user + self.system + self.irq + self.softirq + self.steal
    }

    /// `self - earlier`, clamped at zero per field.
    pub fn since(&self, earlier: &MachineCpu) -> MachineCpu {
        MachineCpu {
            user: (self.user - earlier.user).max(0.0),
            system: (self.system - earlier.system).max(0.0),
            irq: (self.irq - earlier.irq).max(0.0),
            softirq: (self.softirq - earlier.softirq).max(0.0),
            idle: (self.idle - earlier.idle).max(0.0),
            steal: (self.steal - earlier.steal).max(0.0),
            cpus: self.cpus,
        }
    }
}

/// Reads the machine's CPU times from /proc/stat.
pub fn machine_cpu() -> Result<MachineCpu, BenchError> {
    let text = read("/proc/stat")?;
    parse_proc_stat(&text)
}

/// Parses the text of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Result<MachineCpu, BenchError> {
    let hz = crate::sys::clock_ticks() as f64;
    let mut cpus = 0u32;
    let mut total = None;
    for line in text.lines() {
        let mut parts = line.split_ascii_whitespace();
        let Some(name) = parts.next() else { continue };
        if name == "cpu" {
            let v: Vec<u64> = parts.map(|p| p.parse().unwrap_or(0)).collect();
            if v.len() < 8 {
                return Err(BenchError::Parse {
                    file: "/proc/stat".into(),
                    what: format!("cpu line has {} fields, expected at least 8", v.len()),
                });
            }
            let s = |x: u64| x as f64 / hz;
            total = Some(MachineCpu {
                user: s(v[0] + v[1]),
                system: s(v[2]),
                idle: s(v[3] + v[4]),
                irq: s(v[5]),
                softirq: s(v[6]),
                steal: s(v[7]),
                cpus: 0,
            });
        } else if name.starts_with("cpu") {
            cpus += 1;
        }
    }
    let mut m = total.ok_or_else(|| BenchError::Parse {
        file: "/proc/stat".into(),
        what: "no aggregate cpu line".into(),
    })?;
    m.cpus = cpus;
    Ok(m)
}

/// CPU time of a set of threads, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// User time (tick resolution).
    pub user: f64,
    /// System time (tick resolution).
    pub system: f64,
    /// Total run time from schedstat (nanosecond resolution).
    pub total: f64,
}

impl ProcessCpu {
    /// `self - earlier`, clamped at zero.
    pub fn since(&self, earlier: &ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            user: (self.user - earlier.user).max(0.0),
            system: (self.system - earlier.system).max(0.0),
            total: (self.total - earlier.total).max(0.0),
        }
    }
}

/// Sums the CPU time of the given threads of this process. A thread that has
/// already exited counts as zero (its time is lost, which is why the engines
/// keep their threads alive until the window's end has been sampled).
pub fn threads_cpu(tids: &[i32]) -> ProcessCpu {
    let hz = crate::sys::clock_ticks() as f64;
    let mut sum = ProcessCpu::default();
    for &tid in tids {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) {
            if let Some((u, s)) = parse_task_stat(&stat) {
                sum.user += u as f64 / hz;
                sum.system += s as f64 / hz;
            }
        }
        if let Ok(sched) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
            if let Some(ns) = sched
                .split_ascii_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
            {
                sum.total += ns as f64 / 1e9;
            }
        }
    }
    sum
}

/// utime and stime (fields 14 and 15) of a /proc/.../stat line; the command
/// name in parentheses may contain spaces, so fields count from the last ')'.
pub fn parse_task_stat(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}

/// The UDP counters (IPv4 plus IPv6) of the calling thread's namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpCounters {
    /// Datagrams delivered to sockets.
    pub in_datagrams: u64,
    /// Datagrams dropped on receive (includes the buffer errors).
    pub in_errors: u64,
    /// Datagrams dropped because a socket's receive buffer was full.
    pub rcvbuf_errors: u64,
    /// Datagrams dropped because no socket listened on the port.
    pub no_ports: u64,
}

impl UdpCounters {
    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &UdpCounters) -> UdpCounters {
        UdpCounters {
            in_datagrams: self.in_datagrams.saturating_sub(earlier.in_datagrams),
            in_errors: self.in_errors.saturating_sub(earlier.in_errors),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(earlier.rcvbuf_errors),
            no_ports: self.no_ports.saturating_sub(earlier.no_ports),
        }
    }
}

/// Reads the UDP counters of the calling thread's network namespace.
pub fn udp_counters() -> Result<UdpCounters, BenchError> {
    let mut c = parse_snmp_udp(&read("/proc/thread-self/net/snmp")?)?;
    if let Ok(v6) = std::fs::read_to_string("/proc/thread-self/net/snmp6") {
        let six = parse_snmp6_udp(&v6);
        c.in_datagrams += six.in_datagrams;
        c.in_errors += six.in_errors;
        c.rcvbuf_errors += six.rcvbuf_errors;
        c.no_ports += six.no_ports;
    }
    Ok(c)
}

/// Parses the two `Udp:` lines (names, then values) of /proc/net/snmp.
pub fn parse_snmp_udp(text: &str) -> Result<UdpCounters, BenchError> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return Err(BenchError::Parse {
            file: "/proc/net/snmp".into(),
            what: "no Udp: header and value lines".into(),
        });
    };
    let mut c = UdpCounters::default();
    for (n, v) in names
        .split_ascii_whitespace()
        .zip(values.split_ascii_whitespace())
        .skip(1)
    {
        let v: u64 = v.parse().unwrap_or(0);
        match n {
            "InDatagrams" => c.in_datagrams = v,
            "InErrors" => c.in_errors = v,
            "RcvbufErrors" => c.rcvbuf_errors = v,
            "NoPorts" => c.no_ports = v,
            _ => {}
        }
    }
    Ok(c)
}

/// Parses the `Udp6*` lines of /proc/net/snmp6 (name value per line).
pub fn parse_snmp6_udp(text: &str) -> UdpCounters {
    let mut c = UdpCounters::default();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(n), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let v: u64 = v.parse().unwrap_or(0);
        match n {
            "Udp6InDatagrams" => c.in_datagrams = v,
            "Udp6InErrors" => c.in_errors = v,
            "Udp6RcvbufErrors" => c.rcvbuf_errors = v,
            "Udp6NoPorts" => c.no_ports = v,
            _ => {}
        }
    }
    c
}

fn read(path: &str) -> Result<String, BenchError> {
    std::fs::read_to_string(path).map_err(|source| BenchError::File {
        file: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_sums_user_and_nice_and_counts_cpus() {
        let text = "cpu  100 20 30 400 5 6 7 8 0 0\ncpu0 50 10 15 200 2 3 3 4 0 0\ncpu1 50 10 15 200 3 3 4 4 0 0\nintr 1\n";
        let m = parse_proc_stat(text).unwrap();
        let hz = crate::sys::clock_ticks() as f64;
        assert_eq!(m.cpus, 2);
        assert!((m.user - 120.0 / hz).abs() < 1e-9);
        assert!((m.softirq - 7.0 / hz).abs() < 1e-9);
        assert!((m.busy() - (120.0 + 30.0 + 6.0 + 7.0 + 8.0) / hz).abs() < 1e-9);
    }

    #[test]
    fn proc_stat_without_cpu_line_is_a_typed_error() {
        let err = parse_proc_stat("intr 1\n").unwrap_err();
        assert!(err.to_string().contains("/proc/stat"), "{err}");
        let err = parse_proc_stat("cpu 1 2\n").unwrap_err();
        assert!(err.to_string().contains("fields"), "{err}");
    }

    #[test]
    fn task_stat_with_spaces_in_the_name() {
        let line = "1234 (a b) c) S 1 1 1 0 -1 4194560 100 0 0 0 77 33 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_task_stat(line), Some((77, 33)));
        assert_eq!(parse_task_stat("garbage"), None);
    }

    #[test]
    fn snmp_udp_lines_are_read_by_name() {
        let text = "Ip: a b\nIp: 1 2\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 10 1 5 9 4 0\n";
        let c = parse_snmp_udp(text).unwrap();
        assert_eq!(
            c,
            UdpCounters {
                in_datagrams: 10,
                in_errors: 5,
                rcvbuf_errors: 4,
                no_ports: 1
            }
        );
        assert!(parse_snmp_udp("Ip: 1\n").is_err());
        let six = parse_snmp6_udp("Udp6InDatagrams 3\nUdp6RcvbufErrors 2\n");
        assert_eq!(six.in_datagrams, 3);
        assert_eq!(six.rcvbuf_errors, 2);
    }

    #[test]
    fn live_counters_are_readable_and_monotonic() {
        let a = machine_cpu().unwrap();
        let tid = crate::sys::gettid();
        // Spin 20 ms, then sleep: the scheduler folds a running thread's time
        // into schedstat at ticks and switches, so the sleep makes it visible.
        let spin = std::time::Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = machine_cpu().unwrap();
        let d = b.since(&a);
        assert!(d.busy() >= 0.0 && d.idle >= 0.0);
        assert!(a.cpus >= 1);
        let t = threads_cpu(&[tid]);
        assert!(t.total > 0.0, "this thread has run: {t:?}");
        udp_counters().unwrap();
    }
}
