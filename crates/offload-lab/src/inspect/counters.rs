//! Counters read twice over a window, so findings speak in rates: softnet
//! drops and squeezes (`/proc/net/softnet_stat`), socket-layer drops
//! (`/proc/net/snmp`, `/proc/net/snmp6`, `/proc/net/netstat`), per-socket
//! UDP drops (`/proc/net/udp`, `/proc/net/udp6`, the `drops` column),
//! per-socket TCP drops (`sock_diag`'s `sk_drops`, `ss -tm`'s `d`:
//! [`offload_sys::sockdiag`]) and interrupt counts per CPU
//! (`/proc/interrupts`).
//!
//! Since-boot totals say what happened once, perhaps months ago; a rate
//! over a few seconds says what happens now. Findings use the window's
//! deltas, and the totals only when the caller asks for them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{read_softnet, SoftnetCpu};

/// The socket-layer counters read, as `Group.Name` (`Udp.RcvbufErrors`).
pub const SNMP_COUNTERS: &[&str] = &[
    "Udp.InDatagrams",
    "Udp.RcvbufErrors",
    "Udp.InErrors",
    "Udp.MemErrors",
    "Udp6.InDatagrams",
    "Udp6.RcvbufErrors",
    "Udp6.InErrors",
    "Udp6.MemErrors",
    "Tcp.InSegs",
    "Tcp.InErrs",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPZeroWindowDrop",
    "TcpExt.ListenDrops",
];

/// One reading of every counter.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    at: Option<Instant>,
    softnet: Vec<SoftnetCpu>,
    snmp: BTreeMap<String, u64>,
    /// (protocol, inode for UDP or cookie for TCP) -> (local address,
    /// drops).
    sockets: BTreeMap<(&'static str, u64), (String, u64)>,
    /// TCP socket cookie -> (remote address, listening, inode).
    tcp_peers: BTreeMap<u64, (String, bool, u64)>,
    /// IRQ -> per-CPU counts.
    irqs: BTreeMap<u32, Vec<u64>>,
}

/// What changed over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Window {
    /// Length of the window in seconds.
    pub seconds: f64,
    /// Softnet deltas per CPU.
    pub softnet: Vec<SoftnetCpu>,
    /// Socket-layer counter deltas (every counter of [`SNMP_COUNTERS`]
    /// this kernel has).
    pub snmp: BTreeMap<String, u64>,
    /// UDP and TCP sockets that dropped packets in the window.
    pub socket_drops: Vec<SocketDrops>,
    /// Interrupts per CPU in the window, by IRQ.
    pub irqs: BTreeMap<u32, Vec<u64>>,
}

/// A socket's drops over the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SocketDrops {
    /// `udp`, `udp6` or `tcp`.
    pub protocol: &'static str,
    /// Local address and port.
    pub local: String,
    /// A TCP socket's remote address and port (`None`: UDP, or a listener).
    pub remote: Option<String>,
    /// A listening TCP socket: its drops are accept-queue overflows.
    pub listening: bool,
    /// Socket inode (0 for a TCP socket without a file, e.g. `TIME_WAIT`).
    pub inode: u64,
    /// Drops in the window.
    pub drops: u64,
}

impl Window {
    /// `count / seconds`.
    pub fn rate(&self, count: u64) -> f64 {
        if self.seconds > 0.0 {
            count as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// A socket-layer counter's delta (0 when this kernel lacks it).
    pub fn snmp(&self, name: &str) -> u64 {
        self.snmp.get(name).copied().unwrap_or(0)
    }
}

impl Snapshot {
    /// Reads every counter now, in the calling thread's namespace.
    pub fn take() -> Snapshot {
        let mut snmp = BTreeMap::new();
        for file in ["/proc/net/snmp", "/proc/net/netstat"] {
            parse_snmp_pairs(
                &std::fs::read_to_string(file).unwrap_or_default(),
                &mut snmp,
            );
        }
        parse_snmp6(
            &std::fs::read_to_string("/proc/net/snmp6").unwrap_or_default(),
            &mut snmp,
        );
        snmp.retain(|k, _| SNMP_COUNTERS.contains(&k.as_str()));
        let mut sockets = BTreeMap::new();
        for (proto, file) in [("udp", "/proc/net/udp"), ("udp6", "/proc/net/udp6")] {
            parse_udp_sockets(
                proto,
                &std::fs::read_to_string(file).unwrap_or_default(),
                &mut sockets,
            );
        }
        // sock_diag answers for the calling thread's namespace; a failure
        // (no sock_diag module) leaves TCP sockets out, never the rest.
        let mut tcp_peers = BTreeMap::new();
        for t in offload_sys::sockdiag::tcp_socket_drops().unwrap_or_default() {
            sockets.insert(("tcp", t.cookie), (t.local.to_string(), u64::from(t.drops)));
            tcp_peers.insert(
                t.cookie,
                (t.remote.to_string(), t.listening, u64::from(t.inode)),
            );
        }
        Snapshot {
            at: Some(Instant::now()),
            softnet: read_softnet(),
            snmp,
            sockets,
            tcp_peers,
            irqs: parse_interrupts(
                &std::fs::read_to_string("/proc/interrupts").unwrap_or_default(),
            ),
        }
    }

    /// Time since this snapshot was taken.
    pub fn age(&self) -> Duration {
        self.at.map_or(Duration::ZERO, |a| a.elapsed())
    }

    /// The totals since boot, as a window of unknown length (seconds 0).
    pub fn totals(&self) -> Window {
        self.since(&Snapshot::default())
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &Snapshot) -> Window {
        let seconds = match (self.at, earlier.at) {
            (Some(a), Some(b)) => a.duration_since(b).as_secs_f64(),
            _ => 0.0,
        };
        Window {
            seconds,
            softnet: super::softnet_delta(&self.softnet, &earlier.softnet),
            snmp: self
                .snmp
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(earlier.snmp.get(k).copied().unwrap_or(0)),
                    )
                })
                .collect(),
            socket_drops: self
                .sockets
                .iter()
                .filter_map(|(key, (local, drops))| {
                    let before = earlier.sockets.get(key).map_or(0, |(_, d)| *d);
                    let d = drops.saturating_sub(before);
                    let peer = (key.0 == "tcp")
                        .then(|| self.tcp_peers.get(&key.1))
                        .flatten();
                    (d > 0).then(|| SocketDrops {
                        protocol: key.0,
                        local: local.clone(),
                        remote: peer.filter(|(_, l, _)| !l).map(|(r, _, _)| r.clone()),
                        listening: peer.is_some_and(|(_, l, _)| *l),
                        inode: peer.map_or(key.1, |(_, _, i)| *i),
                        drops: d,
                    })
                })
                .collect(),
            irqs: self
                .irqs
                .iter()
                .map(|(irq, counts)| {
                    let before = earlier.irqs.get(irq);
                    (
                        *irq,
                        counts
                            .iter()
                            .enumerate()
                            .map(|(i, c)| {
                                c.saturating_sub(
                                    before.and_then(|b| b.get(i)).copied().unwrap_or(0),
                                )
                            })
                            .collect(),
                    )
                })
                .collect(),
        }
    }
}

/// Reads the counters, waits `window` (stopping early when `cancel` is
/// set), reads them again.
pub fn measure(window: Duration, cancel: &std::sync::atomic::AtomicBool) -> Window {
    let first = Snapshot::take();
    let end = Instant::now() + window;
    while Instant::now() < end && !cancel.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    Snapshot::take().since(&first)
}

/// `/proc/net/snmp` and `/proc/net/netstat`: pairs of lines, a header
/// (`Udp: InDatagrams NoPorts ...`) and its values.
pub fn parse_snmp_pairs(text: &str, out: &mut BTreeMap<String, u64>) {
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [head, values] = pair else { continue };
        let (Some((group, names)), Some((group2, nums))) =
            (head.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if group != group2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(nums.split_whitespace()) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{group}.{n}"), v);
            }
        }
    }
}

/// `/proc/net/snmp6`: `Udp6RcvbufErrors  12` lines, stored as
/// `Udp6.RcvbufErrors`.
pub fn parse_snmp6(text: &str, out: &mut BTreeMap<String, u64>) {
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(name), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        if let (Some(rest), Ok(v)) = (name.strip_prefix("Udp6"), v.parse::<u64>()) {
            out.insert(format!("Udp6.{rest}"), v);
        }
    }
}

/// `/proc/net/udp{,6}`: the local address (hex), the inode (column 10) and
/// the drops (last column) of every socket.
pub fn parse_udp_sockets(
    proto: &'static str,
    text: &str,
    out: &mut BTreeMap<(&'static str, u64), (String, u64)>,
) {
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 13 {
            continue;
        }
        let (Ok(inode), Ok(drops)) = (cols[9].parse::<u64>(), cols[cols.len() - 1].parse::<u64>())
        else {
            continue;
        };
        out.insert((proto, inode), (decode_proc_addr(cols[1]), drops));
    }
}

/// `0100007F:0035` -> `127.0.0.1:53`; IPv6 addresses are four
/// native-endian 32-bit words.
fn decode_proc_addr(s: &str) -> String {
    let Some((addr, port)) = s.split_once(':') else {
        return s.to_string();
    };
    let port = u16::from_str_radix(port, 16).unwrap_or(0);
    let words: Vec<u32> = (0..addr.len() / 8)
        .filter_map(|i| u32::from_str_radix(&addr[i * 8..i * 8 + 8], 16).ok())
        .collect();
    match words.len() {
        1 => format!(
            "{}:{port}",
            std::net::Ipv4Addr::from(words[0].swap_bytes().to_be_bytes())
        ),
        4 => {
            let mut b = [0u8; 16];
            for (i, w) in words.iter().enumerate() {
                b[i * 4..i * 4 + 4].copy_from_slice(&w.swap_bytes().to_be_bytes());
            }
            format!("[{}]:{port}", std::net::Ipv6Addr::from(b))
        }
        _ => s.to_string(),
    }
}

/// `/proc/interrupts`: per-CPU counts of every numbered IRQ.
pub fn parse_interrupts(text: &str) -> BTreeMap<u32, Vec<u64>> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(num) = num.trim().parse::<u32>() else {
            continue;
        };
        let counts: Vec<u64> = rest
            .split_whitespace()
            .take(cpus)
            .map_while(|c| c.parse().ok())
            .collect();
        out.insert(num, counts);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_pairs_and_sockets_parse() {
        let mut m = BTreeMap::new();
        parse_snmp_pairs(
            "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 0 7 3 5\n",
            &mut m,
        );
        assert_eq!(m["Udp.RcvbufErrors"], 5);
        assert_eq!(m["Udp.InErrors"], 7);
        parse_snmp6(
            "Udp6InErrors                    4\nUdp6RcvbufErrors 2\n",
            &mut m,
        );
        assert_eq!(m["Udp6.RcvbufErrors"], 2);
        let mut s = BTreeMap::new();
        parse_udp_sockets(
            "udp",
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
             12: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17\n",
            &mut s,
        );
        assert_eq!(s[&("udp", 4242)], ("127.0.0.1:8080".to_string(), 17));
        let irq = parse_interrupts("     CPU0 CPU1\n 38: 5 7 PCI-MSIX x\nNMI: 1 2 Non\n");
        assert_eq!(irq[&38], vec![5, 7]);
        assert_eq!(irq.len(), 1);
    }
}
