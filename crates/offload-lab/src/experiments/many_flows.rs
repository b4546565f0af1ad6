//! `many-flows`: the CPU cost of a transaction as the number of flows
//! grows, the curve the 6.8 cache-line reorganisation flattened.
//!
//! TCP_RR 1/1 over a veth pair at 1000, 5000, 10000, 20000 and 30000 flows
//! (`--flows`), each level an arm, the levels interleaved and repeated
//! (`--runs`) so that each level is compared with the first one pair by
//! pair. Outstanding transactions are bounded ([`IN_FLIGHT`] per client
//! thread, the flows taking turns: offload-bench's `in_flight`), so every
//! flow's socket is used while the latency measures the stack and not a
//! queue of 30000 requests. CPU per transaction is in the seed's unit,
//! CPU-seconds, for the machine (/proc/stat) and for the benchmark's
//! threads.
//!
//! One kernel cannot show the before/after of 6.8; what this kernel can
//! show is read from it: the fast-path cache-line groups of `tcp_sock`,
//! `net_device`, `netns_ipv4` and `sock` from its BTF ([`super::btf`]), and
//! hardware cache misses per transaction where perf exposes them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::bail;
use serde_json::json;

use crate::live::TracepointIds;
use offload_bench::TestKind;
use offload_sys::node::VethPair;

use offload_report::{Finding, Severity};

use super::paired::{compare_all, describe};
use super::{
    bench_private_table, btf, counted, figures, interleave, settings, Arm, Context, Experiment,
    Outcome, Section, ServerInNs, WARMUP,
};

/// The flow counts of the seed's curve.
pub const DEFAULT_FLOWS: [u32; 5] = [1000, 5000, 10000, 20000, 30000];
/// Transactions outstanding per client thread.
pub const IN_FLIGHT: u32 = 4;
/// Client threads (and server threads).
pub const THREADS: u32 = 2;

/// The experiment.
#[derive(Debug)]
pub struct ManyFlows;

const LIMITS: &[&str] = &[
    "one kernel: the seed compares kernels before and after 6.8; here the report shows which cache-line groups this kernel has, not their effect",
    "veth and a 2-vCPU VM: no NIC, no RSS, and the L2/L3 caches are shared with every other process of the host",
    "figures come from a shared 2-vCPU VM: trust the paired difference, not the absolute numbers",
];

/// Hardware cache-miss counters on every CPU, or why there are none.
struct CacheMisses {
    fds: Vec<OwnedFd>,
}

impl CacheMisses {
    /// `perf_event_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES)`
    /// on every online CPU.
    fn open() -> Result<Self, String> {
        let mut fds = Vec::new();
        for cpu in offload_sys::perf::online_cpus() {
            // struct perf_event_attr, 136 bytes: type 0 (HARDWARE), size,
            // config 3 (CACHE_MISSES); everything else zero: count,
            // enabled at once.
            let mut attr = [0u64; 17];
            attr[0] = 136u64 << 32;
            attr[1] = 3;
            // SAFETY: perf_event_open reads 136 bytes of attr from a live
            // array of that size; the other arguments are integers.
            let raw = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    attr.as_ptr(),
                    -1 as libc::pid_t,
                    cpu as libc::c_int,
                    -1 as libc::c_int,
                    8 as libc::c_ulong, // PERF_FLAG_FD_CLOEXEC
                )
            };
            if raw < 0 {
                return Err(format!(
                    "perf_event_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, cpu {cpu}): {}",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: a fresh fd from the kernel, owned once.
            fds.push(unsafe { OwnedFd::from_raw_fd(raw as i32) });
        }
        Ok(CacheMisses { fds })
    }

    fn read(&self) -> u64 {
        self.fds
            .iter()
            .map(|fd| {
                let mut v = [0u8; 8];
                // SAFETY: read(2) of at most 8 bytes into a live array.
                let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
                if n == 8 {
                    u64::from_ne_bytes(v)
                } else {
                    0
                }
            })
            .sum()
    }
}

impl Experiment for ManyFlows {
    fn name(&self) -> &'static str {
        "many-flows"
    }

    fn claim(&self) -> &'static str {
        "CPU per transaction grows with the number of flows; the 6.8 cache-line reorganisation of TCP/netdev structures flattens the curve"
    }

    fn source(&self) -> &'static str {
        "Coco Li, Eric Dumazet et al., \"net: group hot fields\" series, Linux 6.8 (up to 40% TCP_RR gain at 30k flows)"
    }

    fn limits(&self) -> &'static [&'static str] {
        LIMITS
    }

    fn run(&self, ctx: &Context<'_>) -> anyhow::Result<Outcome> {
        let mut levels = ctx
            .opts
            .flows
            .clone()
            .unwrap_or_else(|| DEFAULT_FLOWS.to_vec());
        levels.sort_unstable();
        levels.dedup();
        if levels.is_empty() || levels[0] == 0 {
            bail!("--flows takes flow counts of at least 1");
        }
        // Client and server share this process. Each side holds its flows
        // in a descriptor table of its own (ServerInNs and
        // bench_private_table), and past RLIMIT_NOFILE offload-bench gives
        // each worker a table, so the hard limit bounds a worker's share,
        // not the curve.
        let fd_limit = offload_bench::sys::raise_fd_limit(1 << 20).unwrap_or(1024);
        let pair = VethPair::new("m")?;
        let ids = TracepointIds::read()?;
        let misses = CacheMisses::open();
        let mut arms: Vec<Arm> = levels
            .iter()
            .map(|f| {
                let mut a = Arm::new(&format!("{f}-flows"));
                a.settings = settings([
                    ("flows", json!(f)),
                    ("test", json!("tcp-rr 1/1")),
                    ("client_threads", json!(THREADS.min(*f))),
                    ("server_threads", json!(THREADS.min(*f))),
                    (
                        "in_flight",
                        json!(format!(
                            "at most {} per client thread, the flows taking turns",
                            IN_FLIGHT.min(*f)
                        )),
                    ),
                ]);
                a
            })
            .collect();
        let devices = vec![pair.server_dev.clone(), pair.client_dev.clone()];
        let mut notes: Vec<String> = Vec::new();
        let interrupted = interleave(ctx, &mut arms, |a, _| {
            let flows = levels[a];
            // A fresh server per run: its thread's descriptor table then
            // holds no sockets of the previous level still being torn
            // down, which a worker's private copy would inherit.
            let server = ServerInNs::start(&pair.server.ns, VethPair::SERVER4.into())?;
            let mut cfg = server.config(TestKind::TcpRr);
            cfg.spec.flows = flows;
            cfg.threads = THREADS.min(flows);
            cfg.spec.server_threads = THREADS.min(flows);
            cfg.in_flight = Some(IN_FLIGHT);
            cfg.duration = ctx.opts.duration;
            cfg.warmup = WARMUP;
            let before = misses.as_ref().ok().map(CacheMisses::read);
            // The misses are read when the client returns, before
            // `counted` waits for the closing flows to go quiet.
            let ((r, after), counts, after_run) = counted(&ids, &devices, || {
                let r = bench_private_table(&pair.client.ns, &cfg)?;
                Ok((r, misses.as_ref().ok().map(CacheMisses::read)))
            })?;
            for note in &r.settings.notes {
                if !notes.contains(note) {
                    notes.push(note.clone());
                }
            }
            drop(server);
            let mut f = figures(&r, &counts, None);
            f.facts.insert("after_run".into(), json!(after_run));
            if let (Some(b), Some(a), false) = (before, after, f.left_out()) {
                // Counted over the whole run, warm-up included.
                f.set(
                    "cache_misses_per_transaction",
                    Some(a.saturating_sub(b) as f64 / r.counts.client_total.max(1) as f64),
                );
            }
            Ok(f)
        })?;
        let comparisons = compare_all(&arms, &(1..arms.len()).map(|i| (0, i)).collect::<Vec<_>>());
        let mut curve_lines = Vec::new();
        let mut curve = Vec::new();
        for a in &arms {
            let idle = a.runs.iter().filter(|r| r.left_out()).count();
            let (Some(m), Some(t)) = (
                a.mean("cpu_us_per_transaction"),
                a.mean("thread_cpu_us_per_transaction"),
            ) else {
                if idle > 0 {
                    curve_lines.push(format!(
                        "{:>12}: no transaction completed in {idle} of {} runs",
                        a.name,
                        a.runs.len()
                    ));
                    curve.push(json!({
                        "flows": a.settings["flows"],
                        "transactions_per_sec": 0.0,
                        "runs_without_transactions": idle,
                    }));
                }
                continue;
            };
            curve_lines.push(format!(
                "{:>12}: {:.2e} CPU-s/transaction (machine), {:.2e} (benchmark threads), p50 {} us, p99 {} us, {} runs{}",
                a.name,
                m / 1e6,
                t / 1e6,
                a.mean("p50_us").map_or("-".into(), super::report::num),
                a.mean("p99_us").map_or("-".into(), super::report::num),
                a.runs.len() - idle,
                if idle > 0 {
                    format!(" ({idle} more without a transaction)")
                } else {
                    String::new()
                }
            ));
            curve.push(json!({
                "flows": a.settings["flows"],
                "cpu_seconds_per_transaction": m / 1e6,
                "thread_cpu_seconds_per_transaction": t / 1e6,
                "cpu_us_per_transaction": m,
                "transactions_per_sec": a.mean("transactions_per_sec"),
                "p50_us": a.mean("p50_us"),
                "p99_us": a.mean("p99_us"),
                "runs_without_transactions": idle,
            }));
        }
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string();
        let groups = btf::running_kernel();
        let mut btf_lines = Vec::new();
        match &groups {
            Ok(structs) => {
                let total: usize = structs.iter().map(|s| s.groups.len()).sum();
                btf_lines.push(format!(
                    "kernel {release}: {}",
                    if total > 0 {
                        "has the 6.8 fast-path cache-line groups (__cacheline_group_begin__* members in BTF)"
                    } else {
                        "has no __cacheline_group_begin__* members in BTF: a kernel before the 6.8 reorganisation"
                    }
                ));
                for s in structs {
                    let parts: Vec<String> = s
                        .groups
                        .iter()
                        .map(|g| {
                            format!(
                                "{} @{} {} B in {} line{}",
                                g.name,
                                g.offset,
                                g.bytes,
                                g.cache_lines,
                                if g.cache_lines == 1 { "" } else { "s" }
                            )
                        })
                        .collect();
                    btf_lines.push(format!(
                        "struct {} ({} bytes, {} cache lines): {}",
                        s.name,
                        s.size,
                        s.size.div_ceil(64),
                        if parts.is_empty() {
                            "no groups".into()
                        } else {
                            parts.join("; ")
                        }
                    ));
                }
            }
            Err(e) => btf_lines.push(format!("kernel {release}: BTF not readable ({e:#})")),
        }
        let miss_line = match &misses {
            Ok(_) => "hardware cache misses per transaction: counted with perf (PERF_COUNT_HW_CACHE_MISSES on every CPU, whole run, all processes of the machine)".to_string(),
            Err(e) => format!("hardware cache misses: this machine does not expose them ({e}); a virtual machine usually has no PMU, so the cache-line effect cannot be counted here"),
        };
        btf_lines.push(miss_line.clone());
        let mut findings = Vec::new();
        for c in &comparisons {
            if let Some(st) = c.get("cpu_us_per_transaction") {
                findings.push(Finding::new(
                    Severity::Info,
                    "many-flows-cpu",
                    format!(
                        "machine CPU per transaction at {} against {}: {}",
                        c.b,
                        c.a,
                        st.direction().unwrap_or("not shown to differ")
                    ),
                    describe(st, " us"),
                ));
            }
        }
        let mut details = std::collections::BTreeMap::new();
        details.insert("kernel".into(), json!(release));
        details.insert("curve".into(), json!(curve));
        details.insert(
            "cacheline_groups".into(),
            match &groups {
                Ok(g) => json!(g),
                Err(e) => json!({"error": format!("{e:#}")}),
            },
        );
        details.insert(
            "hardware_cache_misses".into(),
            match &misses {
                Ok(_) => json!({"available": true}),
                Err(e) => json!({"available": false, "why": e}),
            },
        );
        details.insert("fd_limit".into(), json!(fd_limit));
        details.insert("bench_notes".into(), json!(notes));
        Ok(Outcome {
            arms,
            comparisons,
            findings,
            sections: vec![
                Section {
                    title: "CPU per transaction against flows (the seed's unit)".into(),
                    lines: curve_lines,
                },
                Section {
                    title: "what this kernel can tell about cache lines".into(),
                    lines: btf_lines,
                },
                Section {
                    title: "notes from offload-bench".into(),
                    lines: notes_lines(&details),
                },
            ],
            details,
            interrupted,
        })
    }
}

fn notes_lines(details: &std::collections::BTreeMap<String, serde_json::Value>) -> Vec<String> {
    details
        .get("bench_notes")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
