//! A userspace relay between two TUN devices in two network namespaces: a
//! VPN without the crypto. TCP between the namespaces goes through this
//! process, with offloads on (64 KiB super-packets read from one TUN,
//! segmented, coalesced again and written as super-packets to the other)
//! or off (one MTU-sized packet per read and per write). iperf3 measures
//! the throughput of each.
//!
//! ```text
//!   ns A: iperf3 -c ── ofl-ra 10.99.0.1/24 ─┐            ┌─ ofl-rb 10.99.0.2/24 ── iperf3 -s :ns B
//!                                           └─ this relay ┘
//! ```
//!
//! Run as root (it creates anonymous namespaces and TUN devices):
//!
//! ```text
//! cargo run --release -p offload-tun --example tun_relay -- --runs 3 --seconds 5
//! cargo run --release -p offload-tun --example tun_relay -- --mode on --verify
//! cargo run --release -p offload-tun --example tun_relay -- --mode all   # off, on, pass
//! cargo run --release -p offload-tun --example tun_relay -- --mode goal  # on vs pass
//! ```
//!
//! Modes are interleaved run by run (off on pass, pass on off, ...) and the
//! summary gives each relaying mode as a percentage of pass-through, run by
//! run and overall.
//!
//! Mode `pass` writes each packet on as read, vnet header included, with no
//! segmentation or GRO: the ceiling for a relay that need not see
//! wire-sized packets.
//!
//! Checksums: GRO verifies every checksum nobody vouched for, and none
//! twice: the segments' checksums the relay has just computed, completed
//! partial checksums and packets the kernel marked `DATA_VALID` go in with
//! `RxChecksum::Unnecessary`. `--verify` distrusts them all and verifies
//! every packet again (the cost of not passing verdicts).
//!
//! Zero-copy (the default): each super-packet read is segmented straight
//! into the coalescer's arena (`TunDevice::read_into`), GRO merges the
//! segments without copying their payloads, and each merged super-packet
//! is written with one `writev` of vnet header, head and payload ranges
//! (`Coalescer::push_staged`). `--copy` runs the copying path instead
//! (`read_packets_with_checksum` → `push_with_checksum` with
//! `zero_copy: false`), for comparison.
//!
//! Clean-up on every exit path: the namespaces are anonymous and held only
//! by fds of this process and of its iperf3 children; the children are
//! killed by a guard on return and on panic, by `PR_SET_PDEATHSIG` if this
//! process dies, and Ctrl-C (SIGINT/SIGTERM) only sets a flag that ends the
//! run through the normal return path. Nothing is named or mounted, so
//! nothing can be left behind.

use std::io::Read;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use offload_sys::rtnl::Rtnl;
use offload_sys::sysfs::write_sysctl;
use offload_sys::NetNs;
use offload_tun::{CoalesceStats, Coalescer, CoalescerOptions, Split, TunDevice, TunOptions};

/// Set by SIGINT/SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an
        // atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

type BoxErr = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Clone)]
struct Args {
    modes: Vec<Mode>,
    runs: u32,
    seconds: u32,
    verify: bool,
    copy: bool,
    iperf: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// vnet headers, every offload, GRO on the write side.
    On,
    /// No vnet header: MTU-sized packets both ways.
    Off,
    /// vnet headers, every offload, and each packet written on as read,
    /// header included: no segmentation, no GRO (the ceiling for a relay
    /// that does not need to see wire-sized packets).
    Pass,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::On => "on",
            Mode::Off => "off",
            Mode::Pass => "pass",
        }
    }
}

fn parse_args() -> Result<Args, BoxErr> {
    let mut a = Args {
        modes: vec![Mode::Off, Mode::On],
        runs: 3,
        seconds: 5,
        verify: false,
        copy: false,
        iperf: "iperf3".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--mode" => {
                a.modes = match val()?.as_str() {
                    "on" => vec![Mode::On],
                    "off" => vec![Mode::Off],
                    "pass" => vec![Mode::Pass],
                    "all" => vec![Mode::Off, Mode::On, Mode::Pass],
                    "goal" => vec![Mode::On, Mode::Pass],
                    "both" => vec![Mode::Off, Mode::On],
                    m => return Err(format!("--mode {m}: on, off, pass, both, goal or all").into()),
                }
            }
            "--runs" => a.runs = val()?.parse()?,
            "--seconds" => a.seconds = val()?.parse()?,
            "--iperf" => a.iperf = val()?,
            "--verify" => a.verify = true,
            "--copy" => a.copy = true,
            "-h" | "--help" => {
                println!(
                    "tun_relay [--mode on|off|pass|both|goal|all] [--runs N] [--seconds S] [--verify] [--copy] [--iperf PATH]

iperf3 TCP between two namespaces through this process, relaying between two TUNs (root).
  --mode     on: super-packets segmented, coalesced again (GRO), written as super-packets
             off: no vnet header, MTU-sized packets; pass: super-packets written on as read
             both = off,on; goal = on,pass (on as a % of pass); all = off,on,pass
             (default both). Modes interleave run by run, the order reversed every other run.
  --runs     rounds of every mode (default 3); --seconds: iperf3 time per run (default 5)
  --verify   GRO verifies every checksum (default: only those nobody computed or vouched for)
  --copy     the copying path (default: zero-copy, segments in an arena, one writev each)
  --iperf    iperf3 binary (default iperf3)
Prints per run Gbit/s and the relay threads' CPU (user+system, and user alone) per GB received."
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

fn main() {
    install_signal_handlers();
    if let Err(e) = run() {
        eprintln!("tun_relay: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), BoxErr> {
    let args = parse_args()?;
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (namespaces and TUN devices)".into());
    }
    println!(
        "# tun_relay: iperf3 TCP, {} s per run, {} runs per mode, {} path, GRO verifies {}",
        args.seconds,
        args.runs,
        if args.copy { "copying" } else { "zero-copy" },
        if args.verify {
            "every checksum (--verify)"
        } else {
            "only checksums nobody computed or vouched for"
        }
    );
    // Runs interleave the modes (round r runs every mode once, the order
    // reversed every other round: off on pass, pass on off, ...), so a slow
    // period of a shared machine hits every mode alike and the ratio
    // between modes is taken within the same run.
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); args.modes.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); args.modes.len()];
    let mut user: Vec<Vec<f64>> = vec![Vec::new(); args.modes.len()];
    for r in 0..args.runs {
        let mut order: Vec<usize> = (0..args.modes.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let mode = args.modes[i];
            if STOP.load(Ordering::SeqCst) {
                return Err("interrupted".into());
            }
            // A run whose iperf3 produced no result (it happens rarely on a
            // loaded machine) is reported and tried again, twice at most.
            let mut attempt = 0;
            let res = loop {
                match one_run(mode, &args) {
                    Ok(r) => break r,
                    Err(e) if attempt < 2 && !STOP.load(Ordering::SeqCst) => {
                        eprintln!("mode {} run {}: {e}; retrying", mode.name(), r + 1);
                        attempt += 1;
                    }
                    Err(e) => return Err(e),
                }
            };
            println!(
                "mode {:<4} run {}: {:>7.2} Gbit/s, relay CPU {:.3} s/GB (user {:.3})  {}",
                mode.name(),
                r + 1,
                res.gbps,
                res.cpu_s_per_gb,
                res.user_s_per_gb,
                res.detail
            );
            rates[i].push(res.gbps);
            cpu[i].push(res.cpu_s_per_gb);
            user[i].push(res.user_s_per_gb);
        }
    }
    let mut medians = Vec::new();
    for (i, &mode) in args.modes.iter().enumerate() {
        let v = &rates[i];
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let med = median(v);
        medians.push(med);
        println!(
            "mode {:<4} summary: median {:.2} Gbit/s, mean {:.2}, min {:.2}, max {:.2}; relay CPU median {:.3} s/GB (user {:.3})",
            mode.name(),
            med,
            mean,
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
            median(&cpu[i]),
            median(&user[i])
        );
    }
    // The goal figure: each relaying mode as a fraction of pass-through,
    // run by run (the modes of one round ran back to back) and overall.
    if let Some(p) = args.modes.iter().position(|&m| m == Mode::Pass) {
        for (i, &mode) in args.modes.iter().enumerate() {
            if i == p {
                continue;
            }
            let per_run: Vec<f64> = rates[i]
                .iter()
                .zip(&rates[p])
                .map(|(a, b)| a / b.max(f64::MIN_POSITIVE))
                .collect();
            let list: Vec<String> = per_run
                .iter()
                .map(|x| format!("{:.0}%", x * 100.0))
                .collect();
            println!(
                "mode {:<4} / pass: {:.0}% (median of per-run ratios; runs: {}); ratio of medians {:.0}%; relay CPU per GB {:.2}x pass's",
                mode.name(),
                median(&per_run) * 100.0,
                list.join(", "),
                medians[i] / medians[p].max(f64::MIN_POSITIVE) * 100.0,
                median(&cpu[i]) / median(&cpu[p]).max(f64::MIN_POSITIVE)
            );
        }
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

struct RunResult {
    gbps: f64,
    /// CPU seconds of both relay threads per GB the server received: what
    /// the relay itself costs, steadier than Gbit/s on a shared machine.
    cpu_s_per_gb: f64,
    /// The user part of it: the relay's own code.
    user_s_per_gb: f64,
    detail: String,
}

/// Kills and reaps a child on every exit path.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops and joins the relay threads on every exit path.
struct RelayGuard {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Result<DirStats, String>>>,
}

impl RelayGuard {
    fn finish(mut self) -> Vec<Result<DirStats, String>> {
        self.stop.store(true, Ordering::SeqCst);
        self.threads
            .drain(..)
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("relay thread panicked".into()))
            })
            .collect()
    }
}

impl Drop for RelayGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn namespace_with_tun(
    name: &str,
    addr: Ipv4Addr,
    opts: TunOptions,
) -> Result<(NetNs, TunDevice), BoxErr> {
    let ns = NetNs::new_anonymous()?;
    let dev = ns.run(|| {
        // No IPv6: no router solicitations or MLD reports through the relay.
        write_sysctl("net/ipv6/conf/all/disable_ipv6", "1")?;
        write_sysctl("net/ipv6/conf/default/disable_ipv6", "1")?;
        let dev = TunDevice::open(name, opts).map_err(|e| offload_sys::Error::Sys {
            op: e.to_string(),
            source: std::io::Error::other("TunDevice::open"),
        })?;
        let mut rtnl = Rtnl::open()?;
        let lo = rtnl.link_by_name("lo")?;
        rtnl.set_up(lo.index, true)?;
        let l = rtnl.link_by_name(name)?;
        rtnl.add_address(l.index, addr.into(), 24)?;
        rtnl.set_up(l.index, true)?;
        Ok(dev)
    })?;
    Ok((ns, dev))
}

/// Spawns `cmd` inside `ns`, killed if this process dies.
fn spawn_in(ns: &NetNs, cmd: &mut Command) -> Result<ChildGuard, BoxErr> {
    let fd = ns.as_fd().as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only
    // makes two system calls (setns, prctl), which are async-signal-safe;
    // `fd` stays open in the child because fork copies the fd table.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(ChildGuard(cmd.spawn()?))
}

#[derive(Debug, Default, Clone, Copy)]
struct DirStats {
    reads: u64,
    super_reads: u64,
    segments: u64,
    co: CoalesceStats,
    errors: u64,
    /// CPU time of the relay thread (user + system), the user part alone
    /// (the relay's own code: segmentation, GRO, building writes; system
    /// time is the kernel's TUN reads and writes and the receiving stack),
    /// and the wall time it ran.
    cpu_ns: u64,
    user_ns: u64,
    wall_ns: u64,
}

/// The calling thread's CPU time (user + system: the kernel work a read or
/// write does in this thread, softirq processing included, counts).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's user CPU time (`getrusage(RUSAGE_THREAD)`).
fn thread_user_ns() -> u64 {
    // SAFETY: a zeroed rusage is valid; getrusage writes one we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    ru.ru_utime.tv_sec as u64 * 1_000_000_000 + ru.ru_utime.tv_usec as u64 * 1000
}

/// Moves packets from `src` to `dst` until `stop`: one batch is everything
/// readable right now (up to 64 reads), coalesced and flushed together.
fn relay(
    mut src: TunDevice,
    mut dst: TunDevice,
    verify: bool,
    copy: bool,
    pass: bool,
    stop: Arc<AtomicBool>,
) -> Result<DirStats, String> {
    src.set_nonblocking(true).map_err(|e| e.to_string())?;
    // Verification stays on: what is not vouched for is verified;
    // `--verify` distrusts every verdict. `--copy`: the copying path
    // (segments to a scratch buffer, GRO merging by copy, contiguous
    // writes) instead of the zero-copy one (segments into the coalescer's
    // arena, merged without copying, written with one writev each).
    let opts = CoalescerOptions {
        trust_verdicts: !verify,
        zero_copy: !copy,
        ..CoalescerOptions::default()
    };
    let mut co = Coalescer::for_device(&dst, opts);
    let mut st = DirStats::default();
    let (wall0, cpu0, user0) = (Instant::now(), thread_cpu_ns(), thread_user_ns());
    while !stop.load(Ordering::Relaxed) && !STOP.load(Ordering::Relaxed) {
        if !src
            .wait_readable(Some(Duration::from_millis(50)))
            .map_err(|e| e.to_string())?
        {
            continue;
        }
        if pass {
            pass_through(&mut src, &dst, &mut st);
            continue;
        }
        for _ in 0..64 {
            let r = if copy {
                let mut errors = 0;
                let r = src.read_packets_with_checksum(&mut |p: &[u8], csum| {
                    st.segments += 1;
                    if co.push_with_checksum(p, csum, &mut dst).is_err() {
                        errors += 1;
                    }
                });
                st.errors += errors;
                r
            } else {
                let before = co.arena_mut().len();
                let r = src.read_into(co.arena_mut());
                st.segments += (co.arena_mut().len() - before) as u64;
                if co.push_staged(&mut dst).is_err() {
                    st.errors += 1;
                }
                r
            };
            match r {
                Ok(None) => break,
                Ok(Some(split)) => {
                    st.reads += 1;
                    if matches!(split, Split::Segmented(_)) {
                        st.super_reads += 1;
                    }
                }
                Err(e) => {
                    eprintln!("relay {}: {e}", src.name());
                    st.errors += 1;
                }
            }
        }
        if co.flush(&mut dst).is_err() {
            st.errors += 1;
        }
    }
    if !pass {
        st.co = *co.stats();
    }
    st.cpu_ns = thread_cpu_ns() - cpu0;
    st.user_ns = thread_user_ns().saturating_sub(user0);
    st.wall_ns = wall0.elapsed().as_nanos() as u64;
    Ok(st)
}

/// Mode pass: up to 64 packets written on exactly as read, header included
/// (a kernel → user header is a valid user → kernel one).
fn pass_through(src: &mut TunDevice, dst: &TunDevice, st: &mut DirStats) {
    for _ in 0..64 {
        match src.read_raw() {
            Ok(None) => break,
            Ok(Some(raw)) => {
                st.reads += 1;
                if raw.vnet.is_some_and(|h| h.gso_type != 0) {
                    st.super_reads += 1;
                    st.co.super_packets += 1;
                }
                match dst.write_packet(raw.vnet.as_ref(), raw.packet) {
                    Ok(()) => st.co.writes += 1,
                    Err(_) => st.errors += 1,
                }
            }
            Err(e) => {
                eprintln!("relay {}: {e}", src.name());
                st.errors += 1;
            }
        }
    }
}

fn one_run(mode: Mode, args: &Args) -> Result<RunResult, BoxErr> {
    let opts = match mode {
        Mode::On | Mode::Pass => TunOptions::default(),
        Mode::Off => TunOptions::plain(),
    };
    let pass = mode == Mode::Pass;
    let (ns_a, tun_a) = namespace_with_tun("ofl-ra", Ipv4Addr::new(10, 99, 0, 1), opts)?;
    let (ns_b, tun_b) = namespace_with_tun("ofl-rb", Ipv4Addr::new(10, 99, 0, 2), opts)?;
    let offloads = format!("{}/{}", tun_a.offloads(), tun_b.offloads());
    let stop = Arc::new(AtomicBool::new(false));
    let mut guard = RelayGuard {
        stop: stop.clone(),
        threads: Vec::new(),
    };
    let (a2, b2) = (tun_a.try_clone()?, tun_b.try_clone()?);
    let (verify, copy) = (args.verify, args.copy);
    let s1 = stop.clone();
    guard.threads.push(
        std::thread::Builder::new()
            .name("ofl-relay-ab".into())
            .spawn(move || relay(tun_a, tun_b, verify, copy, pass, s1))?,
    );
    let s2 = stop.clone();
    guard.threads.push(
        std::thread::Builder::new()
            .name("ofl-relay-ba".into())
            .spawn(move || relay(b2, a2, verify, copy, pass, s2))?,
    );
    let _server = spawn_in(
        &ns_b,
        Command::new(&args.iperf)
            .args(["-s", "-1", "-B", "10.99.0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )?;
    // Give the server time to listen; the client retries a refused connect.
    let t0 = Instant::now();
    let out = loop {
        let mut client = spawn_in(
            &ns_a,
            Command::new(&args.iperf)
                .args(["-c", "10.99.0.2", "-J", "-t", &args.seconds.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )?;
        let mut stdout = client.0.stdout.take().ok_or("no iperf3 stdout")?;
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        // iperf3 ends on its own after `seconds`; on Ctrl-C the guards kill
        // it (and the server) on the way out.
        let status = loop {
            if STOP.load(Ordering::SeqCst) {
                return Err("interrupted".into());
            }
            if let Some(st) = client.0.try_wait()? {
                break st;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = reader.join().map_err(|_| "iperf3 reader panicked")?;
        // iperf3 -J reports a refused connect (server not listening yet)
        // in its JSON, not always in its exit status.
        if status.success() && !out.contains("\"error\"") {
            break out;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!("iperf3 client failed: {status}: {out}").into());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let bps =
        json_number_after(&out, "\"sum_received\"", "\"bits_per_second\"").ok_or_else(|| {
            let err = out
                .find("\"error\"")
                .map_or("", |i| &out[i..(i + 200).min(out.len())]);
            format!(
                "no sum_received.bits_per_second in iperf3 output ({} bytes) {err}",
                out.len()
            )
        })?;
    let retr = json_number_after(&out, "\"sum_sent\"", "\"retransmits\"").unwrap_or(0.0);
    let stats = guard.finish();
    let ab = stats[0].clone().map_err(|e| -> BoxErr { e.into() })?;
    let ba = stats[1].clone().map_err(|e| -> BoxErr { e.into() })?;
    let detail = format!(
        "[offloads {offloads}; A→B: {} reads ({} super-packets) → {} segments → {} writes ({} super-packets, {:.1} segments each); B→A: {} reads → {} writes; relay threads busy A→B {:.0}%, B→A {:.0}%; retransmits {retr}; errors {}]",
        ab.reads,
        ab.super_reads,
        ab.segments,
        ab.co.writes,
        ab.co.super_packets,
        ab.co.merged_packets as f64 / ab.co.super_packets.max(1) as f64,
        ba.reads,
        ba.co.writes,
        ab.cpu_ns as f64 / ab.wall_ns.max(1) as f64 * 100.0,
        ba.cpu_ns as f64 / ba.wall_ns.max(1) as f64 * 100.0,
        ab.errors + ba.errors,
    );
    let gbytes = bps / 8e9 * f64::from(args.seconds);
    Ok(RunResult {
        gbps: bps / 1e9,
        cpu_s_per_gb: (ab.cpu_ns + ba.cpu_ns) as f64 / 1e9 / gbytes.max(1e-9),
        user_s_per_gb: (ab.user_ns + ba.user_ns) as f64 / 1e9 / gbytes.max(1e-9),
        detail,
    })
}

/// The first number after `key` that follows `section` in iperf3's JSON
/// (enough for its fixed layout; no JSON dependency for one field).
fn json_number_after(json: &str, section: &str, key: &str) -> Option<f64> {
    let rest = &json[json.find(section)?..];
    let rest = &rest[rest.find(key)? + key.len()..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')
        })
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}
