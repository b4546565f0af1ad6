//! A userspace middle hop between two TUN devices, built on offload-tun,
//! that can damage outer IPv4 headers the way a broken tunnel hop does.
//!
//! Linux never clears DF and randomises the IP ID of a packet it forwards,
//! but middleboxes and some VPN and cloud paths do, and then GRO at the
//! receiver stops merging: since the IP ID rule applies to outer headers
//! too (`inet_gro_receive`, `net/ipv4/af_inet.c`), a packet without DF must
//! carry the previous ID + 1 to be merged (6.x), and a random ID flushes.
//! The relay makes that story reproducible: in [`Mode::Scramble`] every
//! IPv4 packet going left to right gets DF cleared and a pseudo-random ID
//! (its header checksum fixed); in [`Mode::Forward`] packets pass unchanged.
//!
//! Reading uses `offload_tun::TunDevice::read_packets`, which splits the
//! kernel's GSO super-packets into wire packets with the engine's GSO, so
//! the relay sees (and damages) exactly what a hop on the wire would.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use offload_tun::{TunDevice, TunOptions};

use offload_sys::error::{Error, Result};
use offload_sys::netns::NetNs;

/// What the relay does to left-to-right IPv4 packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Forward unchanged.
    Forward = 0,
    /// Clear DF and randomise the IP ID.
    Scramble = 1,
    /// Set DF and randomise the IP ID (what a 6.1 receiver accepted).
    ScrambleKeepDf = 2,
}

/// Counters of a running relay.
#[derive(Debug, Default)]
pub struct RelayStats {
    /// Packets carried left to right.
    pub forward: AtomicU64,
    /// Packets carried right to left.
    pub backward: AtomicU64,
    /// Packets whose header was changed.
    pub rewritten: AtomicU64,
    /// Errors (read, split or write), counted, not fatal.
    pub errors: AtomicU64,
}

/// A running relay; stops and joins its threads when dropped.
#[derive(Debug)]
pub struct Relay {
    mode: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    stats: Arc<RelayStats>,
    threads: Vec<JoinHandle<()>>,
}

fn tun_err(e: offload_tun::TunError) -> Error {
    Error::sys("offload-tun", std::io::Error::other(e.to_string()))
}

impl Relay {
    /// Opens TUN `left` in `left_ns` and `right` in `right_ns` and starts
    /// relaying between them.
    pub fn start(left_ns: &NetNs, left: &str, right_ns: &NetNs, right: &str) -> Result<Self> {
        let open = |ns: &NetNs, name: &str| -> Result<(TunDevice, TunDevice)> {
            let name = name.to_string();
            ns.run(move || {
                let dev = TunDevice::open(&name, TunOptions::default()).map_err(tun_err)?;
                let dup = dev.try_clone().map_err(tun_err)?;
                Ok((dev, dup))
            })
        };
        let (l_read, l_write) = open(left_ns, left)?;
        let (r_read, r_write) = open(right_ns, right)?;
        let mode = Arc::new(AtomicU8::new(Mode::Forward as u8));
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(RelayStats::default());
        let mut threads = Vec::new();
        for (name, from, to, forward) in [
            ("ofl-relay-fwd", l_read, r_write, true),
            ("ofl-relay-back", r_read, l_write, false),
        ] {
            let (mode, stop, stats) = (mode.clone(), stop.clone(), stats.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || pump(from, to, forward, &mode, &stop, &stats))
                    .map_err(|e| Error::sys("spawn relay thread", e))?,
            );
        }
        Ok(Relay {
            mode,
            stop,
            stats,
            threads,
        })
    }

    /// Switches what the relay does from now on.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// The counters.
    pub fn stats(&self) -> &RelayStats {
        &self.stats
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn pump(
    mut from: TunDevice,
    to: TunDevice,
    forward: bool,
    mode: &AtomicU8,
    stop: &AtomicBool,
    stats: &RelayStats,
) {
    let mut rng = XorShift::seeded();
    let mut scratch = Vec::with_capacity(65536);
    while !stop.load(Ordering::Relaxed) {
        match from.wait_readable(Some(Duration::from_millis(100))) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        }
        let m = if forward {
            mode.load(Ordering::Relaxed)
        } else {
            Mode::Forward as u8
        };
        let r = from.read_packets(&mut |pkt: &[u8]| {
            scratch.clear();
            scratch.extend_from_slice(pkt);
            if m != Mode::Forward as u8
                && rewrite_ipv4(
                    &mut scratch,
                    m == Mode::ScrambleKeepDf as u8,
                    rng.next() as u16,
                )
            {
                stats.rewritten.fetch_add(1, Ordering::Relaxed);
            }
            if to.write_packet(None, &scratch).is_err() {
                stats.errors.fetch_add(1, Ordering::Relaxed);
            } else if forward {
                stats.forward.fetch_add(1, Ordering::Relaxed);
            } else {
                stats.backward.fetch_add(1, Ordering::Relaxed);
            }
        });
        if r.is_err() {
            stats.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Sets the IPv4 ID to `id`, DF to `df`, and fixes the header checksum.
/// Returns `false` (packet untouched) for anything but a whole IPv4 header.
pub fn rewrite_ipv4(p: &mut [u8], df: bool, id: u16) -> bool {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return false;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    if ihl < 20 || p.len() < ihl {
        return false;
    }
    p[4..6].copy_from_slice(&id.to_be_bytes());
    if df {
        p[6] |= 0x40;
    } else {
        p[6] &= !0x40;
    }
    p[10] = 0;
    p[11] = 0;
    let sum = offload::checksum::checksum(&p[..ihl]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    true
}

/// A small PRNG: IDs only need to be unpredictable to GRO, not secure.
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9_7f4a_7c15, |d| d.as_nanos() as u64);
        XorShift(t | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_keeps_a_valid_header_checksum() {
        let mut p = vec![
            0x45, 0, 0, 28, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0,
            0, 0, 0, 0, 0,
        ];
        assert!(rewrite_ipv4(&mut p, false, 0xbeef));
        assert_eq!(&p[4..6], &[0xbe, 0xef]);
        assert_eq!(p[6] & 0x40, 0, "DF cleared");
        assert_eq!(
            offload::checksum::checksum(&p[..20]),
            0,
            "header checksum verifies"
        );
        assert!(rewrite_ipv4(&mut p, true, 1));
        assert_eq!(p[6] & 0x40, 0x40, "DF set");
        assert!(!rewrite_ipv4(&mut [0x60; 40], false, 1), "IPv6 untouched");
    }
}
