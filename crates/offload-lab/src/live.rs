//! Measuring GRO on a running host: tracepoint counters per device, softnet
//! deltas, and a post-GRO sample.
//!
//! Two tracepoints of the `net` subsystem tell how well GRO merges on a
//! device, with no kprobe and no BPF toolchain:
//! - `net:napi_gro_receive_entry` fires for every packet handed to GRO
//!   (`napi_gro_receive`, `net/core/gro.c`);
//! - `net:netif_receive_skb` fires for every packet entering the stack
//!   (`__netif_receive_skb_core`, `net/core/dev.c`), merged or not.
//!
//! Their ratio is the device's merge ratio. They are counted with
//! `perf_event_open(PERF_TYPE_TRACEPOINT)`, one counter per CPU, event and
//! device, each with an ftrace filter `name == "DEV"` so the kernel counts
//! only that device. Device names are per namespace but tracepoints are
//! global: a device of the same name in another namespace counts too (the
//! lab names its devices uniquely for that reason).
//!
//! The counting itself is offload-sys's ([`offload_sys::perf`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::inspect::{read_softnet, softnet_delta, SoftnetCpu};
use offload_sys::error::Result;
use offload_sys::qstats::{self, HwOffloadStats};

/// The tracepoints counted, in `events/net/` order.
pub const TRACEPOINTS: [&str; 2] = ["napi_gro_receive_entry", "netif_receive_skb"];

use offload_sys::perf::TracepointCounter;

/// Ids of the tracepoints in [`TRACEPOINTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracepointIds {
    /// `net:napi_gro_receive_entry`.
    pub gro_entry: u64,
    /// `net:netif_receive_skb`.
    pub receive_skb: u64,
}

impl TracepointIds {
    /// Reads the ids, mounting tracefs (detached) when it is not mounted.
    pub fn read() -> Result<Self> {
        let ids = offload_sys::perf::tracepoint_ids("net", &TRACEPOINTS)?;
        Ok(TracepointIds {
            gro_entry: ids[0],
            receive_skb: ids[1],
        })
    }
}

/// GRO counters of one device: packets into GRO, packets into the stack.
#[derive(Debug)]
pub struct DeviceCounters {
    name: String,
    gro_entry: TracepointCounter,
    receive_skb: TracepointCounter,
}
/// A snapshot of one device's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct GroCounts {
    /// Packets handed to GRO (`napi_gro_receive_entry`).
    pub gro_in: u64,
    /// Packets that entered the stack (`netif_receive_skb`).
    pub stack: u64,
}

impl GroCounts {
    /// Packets into GRO per packet into the stack (1 = no merging); `None`
    /// when nothing reached the stack.
    ///
    /// `None` as well when fewer packets entered GRO than reached the
    /// stack: the rest bypassed GRO (`netif_rx`, a veth without NAPI),
    /// and a ratio below 1 would describe that, not merging.
    pub fn merge_ratio(&self) -> Option<f64> {
        (self.stack > 0 && self.gro_in >= self.stack)
            .then(|| self.gro_in as f64 / self.stack as f64)
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &GroCounts) -> GroCounts {
        GroCounts {
            gro_in: self.gro_in.saturating_sub(earlier.gro_in),
            stack: self.stack.saturating_sub(earlier.stack),
        }
    }
}

impl DeviceCounters {
    /// Opens the counters of device `name` on every online CPU.
    pub fn open(ids: &TracepointIds, name: &str) -> Result<Self> {
        offload_sys::rtnl::check_ifname(name)?;
        let filter = format!("name == \"{name}\"");
        Ok(DeviceCounters {
            name: name.to_string(),
            gro_entry: TracepointCounter::open(ids.gro_entry, &filter)?,
            receive_skb: TracepointCounter::open(ids.receive_skb, &filter)?,
        })
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Totals since the counters were opened.
    pub fn read(&self) -> GroCounts {
        GroCounts {
            gro_in: self.gro_entry.read(),
            stack: self.receive_skb.read(),
        }
    }
}

/// One second (or interval) of a live run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveInterval {
    /// Seconds since the start, at the end of the interval.
    pub t: f64,
    /// Per device.
    pub devices: BTreeMap<String, GroCounts>,
    /// Softnet packets processed, all CPUs.
    pub softnet_processed: u64,
    /// Softnet drops, all CPUs.
    pub softnet_dropped: u64,
    /// Time squeezes, all CPUs.
    pub softnet_time_squeeze: u64,
}

/// Totals of one device over a live run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveDevice {
    /// Device name.
    pub name: String,
    /// Packets into GRO.
    pub gro_in: u64,
    /// Packets into the stack.
    pub stack: u64,
    /// `gro_in / stack`, when both are non-zero.
    pub merge_ratio: Option<f64>,
}

/// One device's hardware GRO/GSO counters over a live run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveHwOffload {
    /// Device name.
    pub name: String,
    /// Counter increases over the run, by netdev-spec name
    /// (`rx-hw-gro-packets`, `tx-hw-gso-wire-packets`, ...): only those
    /// the driver reports.
    pub counters: BTreeMap<String, u64>,
    /// `rx-hw-gro-wire-packets / rx-hw-gro-packets` over the run.
    pub hw_gro_ratio: Option<f64>,
    /// Why counters are missing: "not reported by this driver", or the
    /// kernel's lack of the netdev family or error.
    pub note: Option<String>,
}

/// Hardware offload counters of `devices`, as `qstats-get` reports them.
fn read_hw(devices: &[String]) -> std::result::Result<Vec<Option<HwOffloadStats>>, String> {
    let all = match qstats::read_all() {
        Ok(Some(all)) => all,
        Ok(None) => {
            return Err("this kernel has no netdev generic-netlink family (before 6.5)".into())
        }
        Err(e) => return Err(format!("netdev qstats-get: {e}")),
    };
    Ok(devices
        .iter()
        .map(|d| {
            let index = std::fs::read_to_string(format!("/sys/class/net/{d}/ifindex"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())?;
            all.get(&index).cloned()
        })
        .collect())
}

fn hw_delta(
    devices: &[String],
    before: &std::result::Result<Vec<Option<HwOffloadStats>>, String>,
    after: &std::result::Result<Vec<Option<HwOffloadStats>>, String>,
) -> Vec<LiveHwOffload> {
    devices
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut out = LiveHwOffload {
                name: name.clone(),
                counters: BTreeMap::new(),
                hw_gro_ratio: None,
                note: None,
            };
            match (before, after) {
                (Err(e), _) | (_, Err(e)) => out.note = Some(e.clone()),
                (Ok(b), Ok(a)) => match (b.get(i).cloned().flatten(), a.get(i).cloned().flatten()) {
                    (Some(b), Some(a)) => {
                        let mut delta = HwOffloadStats {
                            qstats_supported: true,
                            ..Default::default()
                        };
                        for (k, v) in &a.counters {
                            let was = b.counters.get(k).copied().unwrap_or(0);
                            delta.counters.insert(k.clone(), v.saturating_sub(was));
                        }
                        out.hw_gro_ratio = delta.hw_gro_ratio();
                        if delta.counters.is_empty() {
                            out.note = Some("not reported by this driver (it reports queue statistics, but no hardware GRO/GSO counters)".into());
                        }
                        out.counters = delta.counters;
                    }
                    _ => {
                        out.note = Some(
                            "not reported by this driver (no netdev queue statistics)".into(),
                        )
                    }
                },
            }
            out
        })
        .collect()
}

/// The result of a live run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveReport {
    /// Seconds measured.
    pub seconds: f64,
    /// Per device.
    pub devices: Vec<LiveDevice>,
    /// Softnet deltas per CPU.
    pub softnet: Vec<SoftnetCpu>,
    /// Per interval.
    pub intervals: Vec<LiveInterval>,
    /// Hardware GRO/GSO counters over the run, per device, from the netdev
    /// family's queue statistics ([`offload_sys::qstats`]).
    pub hw_offload: Vec<LiveHwOffload>,
    /// Stopped early (Ctrl-C).
    pub interrupted: bool,
}

/// Counts GRO on `devices` for `duration`, calling `on_interval` once per
/// `interval`; stops early when `cancel` is set.
pub fn watch(
    devices: &[String],
    duration: Duration,
    interval: Duration,
    cancel: &std::sync::atomic::AtomicBool,
    mut on_interval: impl FnMut(&LiveInterval),
) -> Result<LiveReport> {
    let ids = TracepointIds::read()?;
    let counters: Vec<DeviceCounters> = devices
        .iter()
        .map(|d| DeviceCounters::open(&ids, d))
        .collect::<Result<_>>()?;
    let hw0 = read_hw(devices);
    let start = Instant::now();
    let soft0 = read_softnet();
    let mut prev_soft = soft0.clone();
    let mut prev: Vec<GroCounts> = counters.iter().map(DeviceCounters::read).collect();
    let mut intervals = Vec::new();
    let mut interrupted = false;
    let mut next = start + interval;
    loop {
        let now = Instant::now();
        let end = start + duration;
        let until = next.min(end);
        while Instant::now() < until {
            if cancel.load(std::sync::atomic::Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
        let _ = now;
        let counts: Vec<GroCounts> = counters.iter().map(DeviceCounters::read).collect();
        let soft = read_softnet();
        let sum = |f: fn(&SoftnetCpu) -> u64, a: &[SoftnetCpu], b: &[SoftnetCpu]| {
            a.iter()
                .map(f)
                .sum::<u64>()
                .saturating_sub(b.iter().map(f).sum::<u64>())
        };
        let iv = LiveInterval {
            t: start.elapsed().as_secs_f64(),
            devices: counters
                .iter()
                .zip(counts.iter().zip(&prev))
                .map(|(c, (now, before))| (c.name().to_string(), now.since(before)))
                .collect(),
            softnet_processed: sum(|c| c.processed, &soft, &prev_soft),
            softnet_dropped: sum(|c| c.dropped, &soft, &prev_soft),
            softnet_time_squeeze: sum(|c| c.time_squeeze, &soft, &prev_soft),
        };
        on_interval(&iv);
        intervals.push(iv);
        prev = counts;
        prev_soft = soft;
        next += interval;
        if interrupted || Instant::now() >= end {
            break;
        }
    }
    let totals: Vec<GroCounts> = counters.iter().map(DeviceCounters::read).collect();
    let soft_end = read_softnet();
    Ok(LiveReport {
        seconds: start.elapsed().as_secs_f64(),
        devices: counters
            .iter()
            .zip(totals)
            .map(|(c, t)| LiveDevice {
                name: c.name().to_string(),
                gro_in: t.gro_in,
                stack: t.stack,
                merge_ratio: t.merge_ratio(),
            })
            .collect(),
        softnet: softnet_delta(&soft_end, &soft0),
        intervals,
        hw_offload: hw_delta(devices, &hw0, &read_hw(devices)),
        interrupted,
    })
}
