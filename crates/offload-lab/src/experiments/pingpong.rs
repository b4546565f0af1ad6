//! A UDP ping-pong between two namespaces, one datagram in flight, for
//! the latency half of `udp-rx`: the receive-side latency tricks of the
//! seed, each switchable on both ends.
//!
//! - busy polling: `SO_BUSY_POLL` (per socket, what `net.core.busy_read`
//!   sets for every socket; that sysctl is host-wide and the lab writes
//!   nothing of the host) plus `SO_PREFER_BUSY_POLL`: a blocking receive
//!   polls the device's NAPI instance itself before it sleeps
//!   (`sk_busy_loop`, include/net/busy_poll.h);
//! - spinning: `recv(MSG_DONTWAIT)` in a loop instead of sleeping in the
//!   socket's wait queue, so no wakeup is paid;
//! - pinning: the client's thread on one CPU, the echo's on another.
//!
//! Latency is the client's send-to-receive time of each exchange after a
//! warm-up, every sample kept in memory (at most a few hundred thousand)
//! and sorted for the percentiles. CPU is each thread's own
//! (`CLOCK_THREAD_CPUTIME_ID`).

use std::net::UdpSocket;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use offload_sys::NetNs;
use serde::Serialize;

/// What each end does to receive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Mode {
    /// `SO_BUSY_POLL` microseconds (with `SO_PREFER_BUSY_POLL`).
    pub busy_poll_us: Option<u32>,
    /// Spin on `recv(MSG_DONTWAIT)`.
    pub spin: bool,
    /// Pin the client to `cpus[0]` and the echo to `cpus[1 % n]`.
    pub pin: bool,
}

/// What one ping-pong run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Exchanges completed in the window.
    pub exchanges: u64,
    /// Exchanges per second.
    pub per_sec: f64,
    /// Lowest round trip, microseconds (the seed's statistic).
    pub min_us: f64,
    /// Median round trip, microseconds.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Client plus echo thread CPU-microseconds per exchange.
    pub thread_cpu_us_per_exchange: f64,
    /// Requests without an answer within 100 ms.
    pub lost: u64,
    /// `SO_INCOMING_NAPI_ID` of the client's socket after the run (0: the
    /// packets did not come through NAPI, busy polling has nothing to poll).
    pub client_napi_id: u32,
    /// The same for the echo's socket.
    pub server_napi_id: u32,
    /// `SO_BUSY_POLL` as read back from the client's socket.
    pub busy_poll_read_back: u32,
}

fn udp_socket(ns: &NetNs, ip: IpAddr) -> anyhow::Result<UdpSocket> {
    Ok(ns.run(move || {
        UdpSocket::bind(SocketAddr::new(ip, 0)).map_err(|e| offload_sys::Error::Sys {
            op: format!("bind UDP {ip}"),
            source: e,
        })
    })?)
}

fn setsockopt_u32(fd: &UdpSocket, level: i32, opt: i32, v: u32) -> anyhow::Result<()> {
    let v = v as libc::c_int;
    // SAFETY: setsockopt reads an int from a live local.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        bail!("setsockopt({opt}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn getsockopt_u32(fd: &UdpSocket, level: i32, opt: i32) -> u32 {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into a live local.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        0
    } else {
        v as u32
    }
}

/// `SO_PREFER_BUSY_POLL` (include/uapi/asm-generic/socket.h, 5.11).
const SO_PREFER_BUSY_POLL: i32 = 69;

fn apply(fd: &UdpSocket, mode: &Mode) -> anyhow::Result<()> {
    if let Some(us) = mode.busy_poll_us {
        setsockopt_u32(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, us)?;
        setsockopt_u32(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, 1)?;
    }
    // A blocking receive wakes up every 100 ms to look at the stop flag
    // and to count a lost request; a spinning one never blocks.
    fd.set_read_timeout(Some(Duration::from_millis(100)))?;
    fd.set_nonblocking(mode.spin)?;
    Ok(())
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; sched_setaffinity reads it for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Receives one datagram into `buf` (spinning when the socket is
/// non-blocking); `Ok(None)` when nothing came within `patience`.
fn recv_one(
    fd: &UdpSocket,
    buf: &mut [u8],
    patience: Duration,
) -> anyhow::Result<Option<(usize, SocketAddr)>> {
    let start = Instant::now();
    loop {
        match fd.recv_from(buf) {
            Ok(v) => return Ok(Some(v)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if start.elapsed() >= patience {
                    return Ok(None);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(None),
            Err(e) => return Err(anyhow!("recv: {e}")),
        }
    }
}

/// Runs one ping-pong: the echo in `server_ns` on `server_ip`, the client
/// in `client_ns` on `client_ip`, both receiving as `mode` says; `warmup`
/// then `duration` measured. `cpus` are the CPUs pinning uses.
#[allow(clippy::too_many_arguments)]
pub fn run(
    client_ns: &NetNs,
    client_ip: IpAddr,
    server_ns: &NetNs,
    server_ip: IpAddr,
    mode: Mode,
    cpus: &[usize],
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Outcome> {
    let server = udp_socket(server_ns, server_ip)?;
    let client = udp_socket(client_ns, client_ip)?;
    apply(&server, &mode)?;
    apply(&client, &mode)?;
    client.connect(server.local_addr()?)?;
    let stop = Arc::new(AtomicBool::new(false));
    let cpu_a = cpus.first().copied().unwrap_or(0);
    let cpu_b = cpus.get(1).copied().unwrap_or(cpu_a);
    let echo = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("ofl-lab-echo".into())
            .spawn(move || -> anyhow::Result<(Duration, u32)> {
                if mode.pin {
                    pin_to(cpu_b);
                }
                let t0 = thread_cpu();
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let Some((n, from)) = recv_one(&server, &mut buf, Duration::from_millis(100))?
                    else {
                        continue;
                    };
                    // A reply the kernel refuses is a lost exchange for
                    // the client; the echo goes on.
                    let _ = server.send_to(&buf[..n], from);
                }
                let napi = getsockopt_u32(&server, libc::SOL_SOCKET, libc::SO_INCOMING_NAPI_ID);
                Ok((thread_cpu().saturating_sub(t0), napi))
            })?
    };
    let result = (|| -> anyhow::Result<_> {
        if mode.pin {
            pin_to(cpu_a);
        }
        let mut samples: Vec<u32> = Vec::with_capacity(1 << 18);
        let mut buf = [0u8; 2048];
        let payload = [0x5au8; 32];
        let mut lost = 0u64;
        let start = Instant::now();
        let measure_from = start + warmup;
        let end = measure_from + duration;
        let mut cpu0 = None;
        let mut window_start = None;
        loop {
            let t0 = Instant::now();
            if t0 >= end {
                break;
            }
            if cpu0.is_none() && t0 >= measure_from {
                cpu0 = Some(thread_cpu());
                window_start = Some(t0);
            }
            if client.send(&payload).is_err() {
                lost += 1;
                continue;
            }
            match recv_one(&client, &mut buf, Duration::from_millis(100))? {
                Some(_) => {
                    if t0 >= measure_from && samples.len() < (1 << 22) {
                        let ns = t0.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32;
                        samples.push(ns);
                    }
                }
                None => lost += 1,
            }
        }
        let cpu = cpu0.map_or(Duration::ZERO, |c| thread_cpu().saturating_sub(c));
        let window = window_start.map_or(duration, |w| w.elapsed());
        let napi = getsockopt_u32(&client, libc::SOL_SOCKET, libc::SO_INCOMING_NAPI_ID);
        let busy = getsockopt_u32(&client, libc::SOL_SOCKET, libc::SO_BUSY_POLL);
        Ok((samples, lost, cpu, window, napi, busy))
    })();
    stop.store(true, Ordering::Relaxed);
    let echo = echo.join().map_err(|_| anyhow!("echo thread panicked"))?;
    let (mut samples, lost, client_cpu, window, client_napi, busy) = result?;
    let (echo_cpu, server_napi) = echo?;
    if samples.is_empty() {
        bail!("no UDP exchange completed ({lost} lost)");
    }
    samples.sort_unstable();
    let pct = |p: f64| {
        let i = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
        f64::from(samples[i]) / 1000.0
    };
    let n = samples.len() as u64;
    // The echo's CPU covers warm-up too: scale it to the window's share.
    let total = warmup + window;
    let echo_window = echo_cpu.as_secs_f64() * window.as_secs_f64() / total.as_secs_f64();
    Ok(Outcome {
        exchanges: n,
        per_sec: n as f64 / window.as_secs_f64(),
        min_us: f64::from(samples[0]) / 1000.0,
        p50_us: pct(0.50),
        p90_us: pct(0.90),
        p99_us: pct(0.99),
        thread_cpu_us_per_exchange: (client_cpu.as_secs_f64() + echo_window) * 1e6 / n as f64,
        lost,
        client_napi_id: client_napi,
        server_napi_id: server_napi,
        busy_poll_read_back: busy,
    })
}
