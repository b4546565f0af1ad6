//! Measuring GRO on a running host: per-device GRO counters, softnet
//! deltas, hardware GRO/GSO counters, and a post-GRO sample.
//!
//! [`watch`] counts per device identity (namespace, ifindex) with the BPF
//! programs of [`probe`]: packets and bytes into GRO, GRO's verdict on each,
//! packets and bytes into the stack, the largest on each side.
//!
//! The experiments keep a simpler counter, [`DeviceCounters`]: two
//! tracepoints of the `net` subsystem counted with
//! `perf_event_open(PERF_TYPE_TRACEPOINT)` under an ftrace filter
//! `name == "DEV"`:
//! - `net:napi_gro_receive_entry` fires for every packet handed to GRO
//!   (`napi_gro_receive`, `net/core/gro.c`);
//! - `net:netif_receive_skb` fires for every packet entering the stack
//!   (`__netif_receive_skb_core`, `net/core/dev.c`), merged or not.
//!
//! Device names are per namespace but tracepoints are global: a device of
//! the same name in another namespace counts too, which is why the lab
//! names its devices uniquely and why `inspect --live` does not use it.
//! The counting itself is offload-sys's ([`offload_sys::perf`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::inspect::{read_softnet, softnet_delta, SoftnetCpu};
use offload_sys::error::Result;
use offload_sys::qstats::{self, HwOffloadStats};

pub mod openmetrics;
pub mod probe;
pub use probe::{DeviceId, GroProbe, GroTotals};

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

/// One device's GRO figures over an interval or a whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveDevice {
    /// Device name (in its namespace).
    pub name: String,
    /// Inode number of its network namespace.
    pub netns: u64,
    /// Its ifindex there.
    pub ifindex: u32,
    /// The counters: packets and bytes into GRO, GRO's result per packet,
    /// packets and bytes into the stack, the largest packet on each side.
    #[serde(flatten)]
    pub counts: GroTotals,
    /// Packets out of GRO (`held + normal`).
    pub gro_out: u64,
    /// `gro_in / gro_out`: packets per super-packet (1 = GRO merges
    /// nothing); `None` when nothing went through GRO. Packets that
    /// reached the stack without GRO do not enter it.
    pub merge_ratio: Option<f64>,
    /// Packets into the stack that did not come out of GRO on this device
    /// (`netif_rx`, a veth without NAPI): `stack - gro_out`, at least 0.
    pub bypassed_gro: u64,
    /// `gro_in_bytes / gro_in`.
    pub gro_in_bytes_per_packet: Option<f64>,
    /// `stack_bytes / stack`.
    pub stack_bytes_per_packet: Option<f64>,
}

impl LiveDevice {
    fn new(name: &str, id: DeviceId, counts: GroTotals) -> Self {
        let per = |bytes: u64, packets: u64| (packets > 0).then(|| bytes as f64 / packets as f64);
        let gro_out = counts.gro_out();
        LiveDevice {
            name: name.to_string(),
            netns: id.netns,
            ifindex: id.ifindex,
            counts,
            gro_out,
            merge_ratio: (gro_out > 0).then(|| counts.gro_in as f64 / gro_out as f64),
            bypassed_gro: counts.stack.saturating_sub(gro_out),
            gro_in_bytes_per_packet: per(counts.gro_in_bytes, counts.gro_in),
            stack_bytes_per_packet: per(counts.stack_bytes, counts.stack),
        }
    }
}

/// One second (or interval) of a live run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveInterval {
    /// Seconds since the start, at the end of the interval.
    pub t: f64,
    /// Per device, over the interval (the largest sizes: since the start).
    pub devices: Vec<LiveDevice>,
    /// Softnet packets processed, all CPUs.
    pub softnet_processed: u64,
    /// Softnet drops, all CPUs.
    pub softnet_dropped: u64,
    /// Time squeezes, all CPUs.
    pub softnet_time_squeeze: u64,
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
fn read_hw(devices: &[(String, u32)]) -> std::result::Result<Vec<Option<HwOffloadStats>>, String> {
    let all = match qstats::read_all() {
        Ok(Some(all)) => all,
        Ok(None) => {
            return Err("this kernel has no netdev generic-netlink family (before 6.5)".into())
        }
        Err(e) => return Err(format!("netdev qstats-get: {e}")),
    };
    Ok(devices
        .iter()
        .map(|(_, index)| all.get(index).cloned())
        .collect())
}

fn hw_delta(
    devices: &[(String, u32)],
    before: &std::result::Result<Vec<Option<HwOffloadStats>>, String>,
    after: &std::result::Result<Vec<Option<HwOffloadStats>>, String>,
) -> Vec<LiveHwOffload> {
    devices
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
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
    /// Per device, over the whole run.
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

/// Counts GRO on `devices` (name, ifindex) of the calling thread's
/// network namespace for `duration`, by device identity ([`probe`]),
/// calling `on_interval` once per `interval`; stops early when `cancel` is
/// set.
pub fn watch(
    devices: &[(String, u32)],
    duration: Duration,
    interval: Duration,
    cancel: &std::sync::atomic::AtomicBool,
    mut on_interval: impl FnMut(&LiveInterval),
) -> Result<LiveReport> {
    let netns = probe::current_netns()?;
    let ids: Vec<DeviceId> = devices
        .iter()
        .map(|(_, ifindex)| DeviceId {
            netns,
            ifindex: *ifindex,
        })
        .collect();
    // No device to watch (all down): softnet deltas only, no probe.
    let gro = if ids.is_empty() {
        None
    } else {
        Some(GroProbe::attach(&ids)?)
    };
    let read = || gro.as_ref().map_or(Ok(Vec::new()), GroProbe::read);
    let hw0 = read_hw(devices);
    let start = Instant::now();
    let soft0 = read_softnet();
    let mut prev_soft = soft0.clone();
    let zero = vec![GroTotals::default(); devices.len()];
    let mut prev = zero.clone();
    let mut intervals = Vec::new();
    let mut interrupted = false;
    let mut next = start + interval;
    let figures = |now: &[GroTotals], before: &[GroTotals]| -> Vec<LiveDevice> {
        devices
            .iter()
            .zip(&ids)
            .zip(now.iter().zip(before))
            .map(|(((name, _), id), (n, b))| LiveDevice::new(name, *id, n.since(b)))
            .collect()
    };
    loop {
        let end = start + duration;
        let until = next.min(end);
        while Instant::now() < until {
            if cancel.load(std::sync::atomic::Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
        let counts = read()?;
        let soft = read_softnet();
        let sum = |f: fn(&SoftnetCpu) -> u64, a: &[SoftnetCpu], b: &[SoftnetCpu]| {
            a.iter()
                .map(f)
                .sum::<u64>()
                .saturating_sub(b.iter().map(f).sum::<u64>())
        };
        let iv = LiveInterval {
            t: start.elapsed().as_secs_f64(),
            devices: figures(&counts, &prev),
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
    let seconds = start.elapsed().as_secs_f64();
    let soft_end = read_softnet();
    Ok(LiveReport {
        seconds,
        devices: figures(&prev, &zero),
        softnet: softnet_delta(&soft_end, &soft0),
        intervals,
        hw_offload: hw_delta(devices, &hw0, &read_hw(devices)),
        interrupted,
    })
}

/// A device's summary lines for people: GRO in, GRO's results and out,
/// the stack, with bytes per packet and the largest packet on each side.
pub fn render_device(d: &LiveDevice) -> String {
    let c = &d.counts;
    let per = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    format!(
        "  {} (netns {}, ifindex {}):\n\
         \x20   into GRO   {:>10} packets, {:>6} B/packet, largest {}\n\
         \x20   out of GRO {:>10} packets, merge ratio {} ({} merged, {} held, {} passed up unmerged, {} consumed)\n\
         \x20   into stack {:>10} packets, {:>6} B/packet, largest {}{}\n",
        d.name,
        d.netns,
        d.ifindex,
        c.gro_in,
        per(d.gro_in_bytes_per_packet),
        c.gro_in_largest,
        d.gro_out,
        d.merge_ratio
            .map_or("- (no GRO traffic)".into(), |r| format!("{r:.2}")),
        c.merged,
        c.held,
        c.normal,
        c.consumed,
        c.stack,
        per(d.stack_bytes_per_packet),
        c.stack_largest,
        if d.bypassed_gro > 0 {
            format!(", {} of them bypassed GRO", d.bypassed_gro)
        } else {
            String::new()
        }
    )
}
