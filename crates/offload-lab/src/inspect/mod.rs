//! `offload inspect`: the offload state of the current network namespace
//! and host, and the findings that follow from it.
//!
//! Everything is read through interfaces, never by running `ip` or
//! `ethtool`: rtnetlink for link state and the size knobs ([`offload_sys::rtnl`]),
//! the ethtool ioctl for features, driver and channels ([`offload_sys::ethtool`]),
//! sysfs for per-queue RPS/XPS and NAPI knobs, procfs for sysctls, IRQ
//! affinity and `softnet_stat`, and BTF for the 6.8 cache-line groups.
//!
//! sysfs shows the devices of the namespace that mounted it, which is not
//! the caller's when it entered a namespace with `nsenter --net` (no
//! remount). [`inspect`] therefore mounts a *detached* sysfs of the calling
//! thread's namespace ([`offload_sys::sysfs::Sysfs::mount_here`]), falling back to
//! `/sys` when it may not mount.
//!
//! Findings ([`findings`](mod@findings)) are ranked as `offload analyze` ranks its own
//! (high, medium, info; then by device), each with evidence measured over a
//! window ([`counters`]) and a fix that works on that device kind in that
//! namespace; [`tune`] applies fixes and profiles and reverts them.

pub mod counters;
pub mod findings;
pub mod tune;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use offload::gro::KernelLine;
use serde::Serialize;

use offload_sys::error::Result;
use offload_sys::ethtool::{first_group, Ethtool, NtupleRule, Rings, Rss, ETHTOOL_GROUPS};
use offload_sys::qstats::QueueStats;
use offload_sys::rtnl::{LinkState, Rtnl};
use offload_sys::sysfs::Sysfs;

pub use counters::Window;
pub use findings::{findings, Change, Finding};

/// 64 KiB: the legacy GSO/GRO limit (`GSO_LEGACY_MAX_SIZE`, `GRO_LEGACY_MAX_SIZE`).
pub const LEGACY_MAX_SIZE: u32 = 65536;

/// An RX queue's steering knobs (`/sys/class/net/DEV/queues/rx-N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RxQueue {
    /// Queue number.
    pub index: u32,
    /// `rps_cpus` mask as the kernel prints it (hex, comma-separated words).
    pub rps_cpus: Option<String>,
    /// `rps_flow_cnt` (RFS flow table size).
    pub rps_flow_cnt: Option<u64>,
    /// The NAPI instance serving it (netdev `queue-get`, 6.8+), where the
    /// driver links one.
    pub napi_id: Option<u32>,
    /// The IRQ it is served from: the NAPI's IRQ (netdev `napi-get`), else
    /// the device IRQ whose name ends in this queue's number.
    pub irq: Option<u32>,
    /// The CPUs that IRQ runs on (effective affinity where the kernel has
    /// it, else `smp_affinity_list`).
    pub irq_cpus: Option<String>,
}

/// A TX queue's steering knob (`/sys/class/net/DEV/queues/tx-N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TxQueue {
    /// Queue number.
    pub index: u32,
    /// `xps_cpus` mask (absent on single-queue devices).
    pub xps_cpus: Option<String>,
}

/// Queue counts and per-queue steering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Queues {
    /// Real RX queues (`IFLA_NUM_RX_QUEUES`).
    pub rx: u32,
    /// Real TX queues (`IFLA_NUM_TX_QUEUES`).
    pub tx: u32,
    /// Channels as `ethtool -l` shows them, where the driver has them.
    pub channels: Option<ChannelCounts>,
    /// RX queue knobs.
    pub rx_queues: Vec<RxQueue>,
    /// TX queue knobs.
    pub tx_queues: Vec<TxQueue>,
}

/// `ethtool -l` counts, maxima and current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChannelCounts {
    /// Current RX-only channels.
    pub rx: u32,
    /// Current TX-only channels.
    pub tx: u32,
    /// Current other channels.
    pub other: u32,
    /// Current combined channels.
    pub combined: u32,
    /// Maximum RX-only channels.
    pub max_rx: u32,
    /// Maximum TX-only channels.
    pub max_tx: u32,
    /// Maximum other channels.
    pub max_other: u32,
    /// Maximum combined channels.
    pub max_combined: u32,
}

/// One interrupt of a device and where it may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Irq {
    /// IRQ number.
    pub irq: u32,
    /// Its name in `/proc/interrupts`.
    pub name: String,
    /// `/proc/irq/N/smp_affinity_list`.
    pub affinity: String,
    /// `/proc/irq/N/effective_affinity_list`, where the kernel has it.
    pub effective_affinity: Option<String>,
}

/// Everything read about one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceState {
    /// Interface name.
    pub name: String,
    /// Interface index.
    pub ifindex: u32,
    /// rtnetlink kind (`veth`, `vxlan`, `tun`, ...); `None` for hardware.
    pub kind: Option<String>,
    /// Driver name from `ETHTOOL_GDRVINFO`.
    pub driver: Option<String>,
    /// Administratively up.
    pub up: bool,
    /// MTU.
    pub mtu: u32,
    /// Every ethtool feature, under the names `ethtool -k` prints (both the
    /// group names such as `generic-receive-offload` and the kernel's names
    /// such as `rx-gro`, `rx-udp-gro-forwarding`).
    pub features: BTreeMap<String, bool>,
    /// Features `ethtool -k` prints `[fixed]`: kernel names, and the
    /// group names that stand for a single feature (ethtool prints no
    /// `[fixed]` on a group of several).
    pub fixed_features: Vec<String>,
    /// Features whose requested state differs from the active one
    /// (`[requested on]` / `[requested off]`): the requested state. A
    /// macvlan's GRO reads `off [requested on]` when its lower device's
    /// GRO is off.
    pub requested: BTreeMap<String, bool>,
    /// `IFLA_GRO_MAX_SIZE`.
    pub gro_max_size: Option<u32>,
    /// `IFLA_GSO_MAX_SIZE`.
    pub gso_max_size: Option<u32>,
    /// `IFLA_GRO_IPV4_MAX_SIZE` (6.3+).
    pub gro_ipv4_max_size: Option<u32>,
    /// `IFLA_GSO_IPV4_MAX_SIZE` (6.3+).
    pub gso_ipv4_max_size: Option<u32>,
    /// `IFLA_TSO_MAX_SIZE` (6.0+): the most the driver accepts.
    pub tso_max_size: Option<u32>,
    /// `IFLA_TSO_MAX_SEGS` (6.0+).
    pub tso_max_segs: Option<u32>,
    /// Queue counts and steering.
    pub queues: Queues,
    /// `gro_flush_timeout` in ns.
    pub gro_flush_timeout: Option<u64>,
    /// `napi_defer_hard_irqs`.
    pub napi_defer_hard_irqs: Option<u64>,
    /// `threaded` NAPI (0 off, 1 on; 2 busy-poll on 6.17+).
    pub threaded: Option<u64>,
    /// The device's interrupts.
    pub irqs: Vec<Irq>,
    /// Root qdisc.
    pub qdisc: Option<String>,
    /// An XDP program is attached.
    pub xdp: bool,
    /// Has a bus device behind it (`/sys/class/net/DEV/device`): hardware
    /// or paravirtual NIC, as opposed to veth, bridges, tunnels.
    pub physical: bool,
    /// For a tunnel (VXLAN, ip6tnl, GRE), the underlay device named by
    /// `dev`.
    pub underlay: Option<String>,
    /// The lower device (`IFLA_LINK`) of a macvlan, ipvlan, VLAN or tunnel;
    /// a veth's peer.
    pub lower: Option<Lower>,
    /// A tunnel with an IPv6 outer header (ip6tnl, ip6gre, ip6gretap,
    /// VXLAN or Geneve with an IPv6 remote or local address).
    pub ipv6_outer_tunnel: bool,
    /// Ring sizes (`ethtool -g`), where the driver has them.
    pub rings: Option<Rings>,
    /// Interrupt coalescing (`ethtool -c`) by field, where the driver has it.
    pub coalesce: Option<BTreeMap<String, u32>>,
    /// RSS indirection table, key and hash function (`ethtool -x`).
    pub rss: Option<Rss>,
    /// ntuple rules (`ethtool -n`), where the driver has classification.
    pub ntuple_rules: Option<Vec<NtupleRule>>,
    /// Per-queue statistics (netdev `qstats-get`, scope queue), where the
    /// driver reports them.
    pub queue_stats: Option<Vec<QueueStats>>,
}

/// A device's lower device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lower {
    /// Its ifindex (in `netnsid`'s namespace when set, else this one).
    pub ifindex: u32,
    /// Its name, when it is in this namespace.
    pub name: Option<String>,
    /// The id of the namespace it lives in, when not this one.
    pub netnsid: Option<i32>,
}

/// One CPU's line of `/proc/net/softnet_stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct SoftnetCpu {
    /// CPU number (the last column on 5.10+, else the line number).
    pub cpu: u32,
    /// Packets processed by the backlog/NAPI of this CPU.
    pub processed: u64,
    /// Packets dropped because the backlog was over `netdev_max_backlog`.
    pub dropped: u64,
    /// `net_rx_action` ran out of budget or time with work left.
    pub time_squeeze: u64,
    /// RPS IPIs received.
    pub received_rps: u64,
    /// Flow-limit drops.
    pub flow_limit_count: u64,
}

/// Host-wide state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostState {
    /// `uname -r`.
    pub kernel: String,
    /// The engine's kernel line whose rules this kernel follows
    /// ([`offload::gro::KernelLine::from_release`]: `6.1`, `6.12`, `6.18`,
    /// `7.x`); `None` for a release older than 4.x or unreadable.
    #[serde(serialize_with = "serialize_kernel_line")]
    pub kernel_line: Option<KernelLine>,
    /// Online CPUs.
    pub cpus: usize,
    /// The sysctls that matter to receive, as read (`None`: absent).
    pub sysctls: BTreeMap<String, Option<String>>,
    /// `/proc/net/softnet_stat`.
    pub softnet: Vec<SoftnetCpu>,
    /// The kernel's BTF carries `__cacheline_group_begin__*` markers: it has
    /// the 6.8 networking cache-line reorganisation. `None`: no BTF.
    pub cacheline_groups: Option<bool>,
    /// Whether sysfs was read through a private mount of this namespace
    /// (`true`) or through `/sys`.
    pub private_sysfs: bool,
    /// This is the host's (initial) network namespace, as far as can be
    /// seen: no ancestor process is in another one.
    pub host_namespace: bool,
    /// sysctls that exist only in the initial namespace and were read from
    /// there (`net.core.netdev_max_backlog`, ...): settable only from the
    /// host namespace.
    pub host_only_sysctls: Vec<String>,
}

/// The result of [`inspect`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    /// The devices, in ifindex order.
    pub devices: Vec<DeviceState>,
    /// Host-wide state.
    pub host: HostState,
    /// Counter deltas over the measuring window (rates are these over
    /// `window.seconds`).
    pub window: Window,
    /// The same counters since boot, when asked for (`--since-boot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_boot: Option<Window>,
    /// Ranked findings.
    pub findings: Vec<Finding>,
}

/// How [`inspect`] measures.
#[derive(Debug, Clone, PartialEq)]
pub struct InspectOptions {
    /// Devices to report (every device when empty).
    pub only: Vec<String>,
    /// The window over which counters are measured.
    pub window: std::time::Duration,
    /// Also report since-boot totals, and raise findings on them.
    pub since_boot: bool,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions {
            only: Vec::new(),
            window: std::time::Duration::from_secs(1),
            since_boot: false,
        }
    }
}

/// sysctls read into [`HostState::sysctls`].
pub const HOST_SYSCTLS: &[&str] = &[
    "net/core/busy_read",
    "net/core/busy_poll",
    "net/core/netdev_budget",
    "net/core/netdev_budget_usecs",
    "net/core/netdev_max_backlog",
    "net/core/dev_weight",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/rmem_default",
    "net/core/wmem_default",
    "net/core/rps_sock_flow_entries",
    "net/core/somaxconn",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/udp_mem",
    "net/ipv4/ip_forward",
    "net/ipv6/conf/all/forwarding",
];

/// Where sysfs is read from.
enum SysRoot {
    Private(Sysfs),
    Host,
}

impl SysRoot {
    fn open() -> SysRoot {
        match Sysfs::mount_here() {
            Ok(s) => SysRoot::Private(s),
            Err(_) => SysRoot::Host,
        }
    }

    fn read(&self, rel: &str) -> Option<String> {
        match self {
            SysRoot::Private(s) => s.read(rel).ok(),
            SysRoot::Host => std::fs::read_to_string(format!("/sys/{rel}"))
                .ok()
                .map(|s| s.trim().to_string()),
        }
    }

    fn exists(&self, rel: &str) -> bool {
        match self {
            SysRoot::Private(s) => s.exists(rel),
            SysRoot::Host => std::path::Path::new(&format!("/sys/{rel}")).exists(),
        }
    }

    fn list(&self, rel: &str) -> Vec<String> {
        let names = match self {
            SysRoot::Private(s) => s.list(rel).unwrap_or_default(),
            SysRoot::Host => std::fs::read_dir(format!("/sys/{rel}"))
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
        };
        let mut names = names;
        names.sort();
        names
    }

    fn link_target(&self, rel: &str) -> Option<String> {
        match self {
            SysRoot::Private(s) => s.read_link(rel),
            SysRoot::Host => std::fs::read_link(format!("/sys/{rel}"))
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
        }
    }
}

/// Reads the state of the devices named in `opts.only` (every device when
/// empty) and of the host, measures the counters over `opts.window`, and
/// derives the findings. Acts on the calling thread's network namespace.
pub fn inspect(
    opts: &InspectOptions,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<Inspection> {
    let only = &opts.only;
    let first = counters::Snapshot::take();
    let mut rtnl = Rtnl::open()?;
    let links = rtnl.links()?;
    for name in only {
        if !links.iter().any(|l| &l.name == name) {
            return Err(offload_sys::Error::NoDevice(name.clone()));
        }
    }
    let ethtool = Ethtool::open()?;
    let sys = SysRoot::open();
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let mut devices = Vec::new();
    for link in &links {
        if !only.is_empty() && !only.contains(&link.name) {
            continue;
        }
        devices.push(read_device(link, &links, &ethtool, &sys, &interrupts));
    }
    let host = read_host(matches!(sys, SysRoot::Private(_)));
    // The rest of the window, after the reading above used part of it.
    let started = std::time::Instant::now();
    let spent = first_age(&first);
    if let Some(rest) = opts.window.checked_sub(spent) {
        let end = started + rest;
        while std::time::Instant::now() < end && !cancel.load(std::sync::atomic::Ordering::Relaxed)
        {
            std::thread::sleep(
                (end - std::time::Instant::now()).min(std::time::Duration::from_millis(50)),
            );
        }
    }
    let last = counters::Snapshot::take();
    let window = last.since(&first);
    let since_boot = opts.since_boot.then(|| last.totals());
    let findings = findings::findings(&devices, &host, &window, since_boot.as_ref());
    Ok(Inspection {
        devices,
        host,
        window,
        since_boot,
        findings,
    })
}

fn first_age(s: &counters::Snapshot) -> std::time::Duration {
    s.age()
}

fn read_device(
    link: &LinkState,
    all: &[LinkState],
    ethtool: &Ethtool,
    sys: &SysRoot,
    interrupts: &str,
) -> DeviceState {
    let dev = &link.name;
    let (features, fixed, requested) = match ethtool.features(dev) {
        Ok(list) => feature_view(&list),
        Err(_) => Default::default(),
    };
    let base = format!("class/net/{dev}");
    let num = |attr: &str| -> Option<u64> { sys.read(&format!("{base}/{attr}"))?.parse().ok() };
    let rx_names: Vec<String> = sys
        .list(&format!("{base}/queues"))
        .into_iter()
        .filter(|n| n.starts_with("rx-"))
        .collect();
    let tx_names: Vec<String> = sys
        .list(&format!("{base}/queues"))
        .into_iter()
        .filter(|n| n.starts_with("tx-"))
        .collect();
    let mut rx_queues: Vec<RxQueue> = rx_names
        .iter()
        .filter_map(|n| {
            let index: u32 = n[3..].parse().ok()?;
            Some(RxQueue {
                index,
                rps_cpus: sys.read(&format!("{base}/queues/{n}/rps_cpus")),
                rps_flow_cnt: sys
                    .read(&format!("{base}/queues/{n}/rps_flow_cnt"))
                    .and_then(|v| v.parse().ok()),
                napi_id: None,
                irq: None,
                irq_cpus: None,
            })
        })
        .collect();
    rx_queues.sort_by_key(|q| q.index);
    let mut tx_queues: Vec<TxQueue> = tx_names
        .iter()
        .filter_map(|n| {
            let index: u32 = n[3..].parse().ok()?;
            Some(TxQueue {
                index,
                xps_cpus: sys.read(&format!("{base}/queues/{n}/xps_cpus")),
            })
        })
        .collect();
    tx_queues.sort_by_key(|q| q.index);
    let channels = ethtool.channels(dev).ok().map(|c| ChannelCounts {
        rx: c.rx,
        tx: c.tx,
        other: c.other,
        combined: c.combined,
        max_rx: c.max_rx,
        max_tx: c.max_tx,
        max_other: c.max_other,
        max_combined: c.max_combined,
    });
    let physical = sys.exists(&format!("{base}/device"));
    let irqs = if physical {
        device_irqs(dev, sys, &base, interrupts)
    } else {
        Vec::new()
    };
    queue_irqs(link.index, &mut rx_queues, &irqs);
    DeviceState {
        name: dev.clone(),
        ifindex: link.index,
        kind: link.kind.clone(),
        driver: ethtool.driver(dev).ok().filter(|d| !d.is_empty()),
        up: link.up,
        mtu: link.mtu,
        features,
        fixed_features: fixed,
        requested,
        gro_max_size: link.gro_max_size,
        gso_max_size: link.gso_max_size,
        gro_ipv4_max_size: link.gro_ipv4_max_size,
        gso_ipv4_max_size: link.gso_ipv4_max_size,
        tso_max_size: link.tso_max_size,
        tso_max_segs: link.tso_max_segs,
        queues: Queues {
            rx: link.rx_queues.unwrap_or(rx_queues.len() as u32),
            tx: link.tx_queues.unwrap_or(tx_queues.len() as u32),
            channels,
            rx_queues,
            tx_queues,
        },
        gro_flush_timeout: num("gro_flush_timeout"),
        napi_defer_hard_irqs: num("napi_defer_hard_irqs"),
        threaded: num("threaded"),
        irqs,
        qdisc: link.qdisc.clone(),
        xdp: link.xdp,
        physical,
        underlay: link
            .tunnel_link
            .and_then(|i| all.iter().find(|l| l.index == i))
            .map(|l| l.name.clone()),
        lower: link
            .link
            .filter(|&i| i != 0 && i != link.index)
            .map(|i| Lower {
                ifindex: i,
                name: if link.link_netnsid.is_none() {
                    all.iter().find(|l| l.index == i).map(|l| l.name.clone())
                } else {
                    None
                },
                netnsid: link.link_netnsid,
            }),
        ipv6_outer_tunnel: link.ipv6_outer,
        rings: ethtool.rings(dev).ok(),
        coalesce: ethtool.coalesce(dev).ok(),
        rss: ethtool.rss(dev).ok(),
        ntuple_rules: ethtool.ntuple_rules(dev).ok(),
        queue_stats: offload_sys::qstats::queue_stats(link.index)
            .ok()
            .flatten()
            .filter(|q| !q.is_empty()),
    }
}

/// The features as `ethtool -k` names them, its `[fixed]` set and the
/// requested states that differ from the active ones. Groups follow
/// ethtool's `dump_features` (netlink/features.c): each kernel feature
/// belongs to the first legacy flag whose pattern matches its name; a flag
/// matching one feature is printed under the flag's long name with that
/// feature's state and `[fixed]`; a flag matching several is printed "on"
/// when ANY of them is on, with no `[fixed]`, its members under their own
/// names. Features with no name (unused bits) are left out.
pub fn feature_view(
    list: &[offload_sys::ethtool::Feature],
) -> (BTreeMap<String, bool>, Vec<String>, BTreeMap<String, bool>) {
    let mut features = BTreeMap::new();
    let mut fixed = Vec::new();
    let mut requested = BTreeMap::new();
    for f in list.iter().filter(|f| !f.name.is_empty()) {
        features.insert(f.name.clone(), f.active);
        if f.fixed() {
            fixed.push(f.name.clone());
        } else if f.requested != f.active {
            requested.insert(f.name.clone(), f.requested);
        }
    }
    for (group, _) in ETHTOOL_GROUPS {
        // ethtool 6.x skips the UFO flag: no kernel with netlink has UFO.
        if *group == "udp-fragmentation-offload" {
            continue;
        }
        let members: Vec<&offload_sys::ethtool::Feature> = list
            .iter()
            .filter(|f| !f.name.is_empty())
            .filter(|f| first_group(&f.name) == Some(*group))
            .collect();
        features.insert((*group).to_string(), members.iter().any(|f| f.active));
        if let [only] = members.as_slice() {
            if only.fixed() {
                fixed.push((*group).to_string());
            } else if only.requested != only.active {
                requested.insert((*group).to_string(), only.requested);
            }
        }
    }
    fixed.sort();
    fixed.dedup();
    (features, fixed, requested)
}

/// Fills each RX queue's NAPI id and IRQ: from the netdev family where the
/// driver links queues to NAPIs and NAPIs to IRQs (6.8+), else from the
/// device IRQ whose name ends in `<sep>N` for queue N (`virtio2-input.0`,
/// `eth0-TxRx-3`, `mlx5_comp3`): names some drivers use, not a rule.
fn queue_irqs(ifindex: u32, rx: &mut [RxQueue], irqs: &[Irq]) {
    let queues = offload_sys::qstats::queue_napis(ifindex)
        .ok()
        .flatten()
        .unwrap_or_default();
    let napis = offload_sys::qstats::napis(ifindex)
        .ok()
        .flatten()
        .unwrap_or_default();
    for q in rx.iter_mut() {
        q.napi_id = queues
            .iter()
            .find(|n| n.kind == "rx" && n.id == q.index)
            .and_then(|n| n.napi_id);
        q.irq = q
            .napi_id
            .and_then(|id| napis.iter().find(|n| n.id == id))
            .and_then(|n| n.irq);
        if q.irq.is_none() {
            let by_name: Vec<&Irq> = irqs
                .iter()
                .filter(|i| {
                    let n = i.name.to_ascii_lowercase();
                    let number_at_end = n
                        .rsplit(|c: char| !c.is_ascii_digit())
                        .next()
                        .and_then(|d| d.parse::<u32>().ok());
                    number_at_end == Some(q.index)
                        && (n.contains("input")
                            || n.contains("rx")
                            || n.contains("txrx")
                            || n.contains("comp"))
                })
                .collect();
            if let [one] = by_name.as_slice() {
                q.irq = Some(one.irq);
            }
        }
        q.irq_cpus = q.irq.and_then(|n| {
            irqs.iter()
                .find(|i| i.irq == n)
                .map(|i| {
                    i.effective_affinity
                        .clone()
                        .unwrap_or_else(|| i.affinity.clone())
                })
                .or_else(|| {
                    std::fs::read_to_string(format!("/proc/irq/{n}/effective_affinity_list"))
                        .or_else(|_| {
                            std::fs::read_to_string(format!("/proc/irq/{n}/smp_affinity_list"))
                        })
                        .ok()
                        .map(|s| s.trim().to_string())
                })
        });
    }
}

/// The device's interrupts: MSI vectors of its bus device (or of the bus
/// device's parent, for virtio), plus `/proc/interrupts` lines naming it.
fn device_irqs(dev: &str, sys: &SysRoot, base: &str, interrupts: &str) -> Vec<Irq> {
    let mut numbers: Vec<u32> = Vec::new();
    for dir in [
        format!("{base}/device/msi_irqs"),
        format!("{base}/device/../msi_irqs"),
    ] {
        numbers.extend(sys.list(&dir).iter().filter_map(|n| n.parse::<u32>().ok()));
    }
    let bus_name = sys
        .link_target(&format!("{base}/device"))
        .and_then(|t| t.rsplit('/').next().map(str::to_string));
    let mut names = BTreeMap::new();
    for line in interrupts.lines().skip(1) {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(num) = num.trim().parse::<u32>() else {
            continue;
        };
        let name = rest.split_whitespace().last().unwrap_or("").to_string();
        let mentions = name.starts_with(dev)
            || bus_name
                .as_deref()
                .is_some_and(|b| !b.is_empty() && name.starts_with(b));
        if mentions && !numbers.contains(&num) {
            numbers.push(num);
        }
        names.insert(num, name);
    }
    numbers.sort_unstable();
    numbers.dedup();
    numbers
        .into_iter()
        .map(|irq| Irq {
            irq,
            name: names.get(&irq).cloned().unwrap_or_default(),
            affinity: std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            effective_affinity: std::fs::read_to_string(format!(
                "/proc/irq/{irq}/effective_affinity_list"
            ))
            .ok()
            .map(|s| s.trim().to_string()),
        })
        .collect()
}

/// A kernel line as JSON: its name (`"6.12"`), or null.
fn serialize_kernel_line<S: serde::Serializer>(
    line: &Option<KernelLine>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match line {
        Some(l) => s.serialize_str(l.name()),
        None => s.serialize_none(),
    }
}

/// Parses `/proc/net/softnet_stat` (hex columns; the CPU number is the 13th
/// column on 5.10+).
pub fn parse_softnet(text: &str) -> Vec<SoftnetCpu> {
    text.lines()
        .enumerate()
        .filter_map(|(line, l)| {
            let cols: Vec<u64> = l
                .split_whitespace()
                .map(|c| u64::from_str_radix(c, 16))
                .collect::<std::result::Result<_, _>>()
                .ok()?;
            let col = |i: usize| cols.get(i).copied().unwrap_or(0);
            Some(SoftnetCpu {
                cpu: cols.get(12).map_or(line as u32, |&c| c as u32),
                processed: col(0),
                dropped: col(1),
                time_squeeze: col(2),
                received_rps: col(9),
                flow_limit_count: col(10),
            })
        })
        .collect()
}

/// Reads `/proc/net/softnet_stat`.
pub fn read_softnet() -> Vec<SoftnetCpu> {
    parse_softnet(&std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default())
}

/// Per-CPU `after - before`.
pub fn softnet_delta(after: &[SoftnetCpu], before: &[SoftnetCpu]) -> Vec<SoftnetCpu> {
    after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.cpu == a.cpu)
                .copied()
                .unwrap_or_default();
            SoftnetCpu {
                cpu: a.cpu,
                processed: a.processed.saturating_sub(b.processed),
                dropped: a.dropped.saturating_sub(b.dropped),
                time_squeeze: a.time_squeeze.saturating_sub(b.time_squeeze),
                received_rps: a.received_rps.saturating_sub(b.received_rps),
                flow_limit_count: a.flow_limit_count.saturating_sub(b.flow_limit_count),
            }
        })
        .collect()
}

fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

fn read_host(private_sysfs: bool) -> HostState {
    let kernel = kernel_release();
    // Some net.core knobs (busy_read, netdev_budget, ...) exist only in the
    // initial namespace; inside another one they are read from there.
    let mut host_only_sysctls = Vec::new();
    let sysctls = HOST_SYSCTLS
        .iter()
        .map(|k| {
            let v = offload_sys::sysfs::read_sysctl(k).ok().or_else(|| {
                let v = read_sysctl_initial_ns(k);
                host_only_sysctls.push(k.replace('/', "."));
                v
            });
            (k.replace('/', "."), v.map(|v| v.replace('\t', " ")))
        })
        .collect();
    HostState {
        kernel_line: KernelLine::from_release(&kernel),
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        sysctls,
        softnet: read_softnet(),
        cacheline_groups: btf_has_cacheline_groups(),
        private_sysfs,
        host_namespace: open_initial_net_ns().is_none(),
        host_only_sysctls,
    }
}

/// Reads a sysctl as the initial network namespace sees it, from a helper
/// thread that joins it; `None` when no way in is open to us.
fn read_sysctl_initial_ns(key: &str) -> Option<String> {
    let ns = open_initial_net_ns()?;
    let key = key.to_string();
    std::thread::spawn(move || {
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&ns),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .ok()?;
        offload_sys::sysfs::read_sysctl(&key).ok()
    })
    .join()
    .ok()
    .flatten()
}

/// Opens the network namespace of pid 1 or, where pid 1's is closed to us
/// (containers and sandboxes deny it even to root), that of our highest
/// readable ancestor: `ip netns exec`, `unshare -n` and `nsenter` all leave
/// the launching shell in the namespace the host's knobs live in. `None`
/// when only our own namespace is reachable.
pub fn open_initial_net_ns() -> Option<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let own = std::fs::metadata("/proc/self/ns/net").ok()?.ino();
    let mut chain = Vec::new();
    let mut pid = std::process::id();
    // Bounded: a pid chain cannot loop, but a racing exit could make
    // /proc lie for a moment.
    for _ in 0..64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: the fields
        // after the last ')' are "state ppid ...".
        let ppid: u32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        if ppid == 0 {
            break;
        }
        chain.push(ppid);
        pid = ppid;
    }
    let topmost_first = std::iter::once(1).chain(chain.into_iter().rev());
    // The topmost readable one stands for the host; if that is our own,
    // we are in the host's namespace already (or cannot see past ours).
    let top = topmost_first
        .filter_map(|pid| std::fs::File::open(format!("/proc/{pid}/ns/net")).ok())
        .next()?;
    (top.metadata().ok()?.ino() != own).then_some(top)
}

/// Looks for `__cacheline_group_begin__` in the kernel's BTF: present on
/// 6.8+ kernels (the struct reorganisation of net_device, tcp_sock, netns_ipv4).
pub fn btf_has_cacheline_groups() -> Option<bool> {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").ok()?;
    let needle = b"__cacheline_group_begin__";
    Some(btf.windows(needle.len()).any(|w| w == needle))
}

/// Renders an inspection as text for people.
pub fn render_text(ins: &Inspection) -> String {
    let mut s = String::new();
    let h = &ins.host;
    let _ = writeln!(
        s,
        "host: kernel {} (kernel line {}), {} CPUs, 6.8 cache-line groups: {}",
        h.kernel,
        h.kernel_line.map_or("unknown", KernelLine::name),
        h.cpus,
        match h.cacheline_groups {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown (no BTF)",
        }
    );
    let sc = |k: &str| {
        h.sysctls
            .get(k)
            .cloned()
            .flatten()
            .unwrap_or_else(|| "-".into())
    };
    let _ = writeln!(
        s,
        "      busy_read {} busy_poll {} netdev_budget {} budget_usecs {} max_backlog {} rmem_max {} wmem_max {} ip_forward {}",
        sc("net.core.busy_read"),
        sc("net.core.busy_poll"),
        sc("net.core.netdev_budget"),
        sc("net.core.netdev_budget_usecs"),
        sc("net.core.netdev_max_backlog"),
        sc("net.core.rmem_max"),
        sc("net.core.wmem_max"),
        sc("net.ipv4.ip_forward"),
    );
    let w = &ins.window;
    for c in &w.softnet {
        let _ = writeln!(
            s,
            "      softnet cpu{} over {:.1} s: +{} processed, +{} dropped, +{} time_squeeze, +{} rps",
            c.cpu, w.seconds, c.processed, c.dropped, c.time_squeeze, c.received_rps
        );
    }
    let snmp: Vec<String> = w
        .snmp
        .iter()
        .filter(|(k, v)| **v > 0 && !k.ends_with("InDatagrams") && k.as_str() != "Tcp.InSegs")
        .map(|(k, v)| format!("{k} +{v}"))
        .collect();
    if !snmp.is_empty() {
        let _ = writeln!(
            s,
            "      sockets over {:.1} s: {}",
            w.seconds,
            snmp.join(", ")
        );
    }
    if let Some(b) = &ins.since_boot {
        for c in &b.softnet {
            let _ = writeln!(
                s,
                "      softnet cpu{} since boot: {} processed, {} dropped, {} time_squeeze",
                c.cpu, c.processed, c.dropped, c.time_squeeze
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<15} {:<11} {:>5} {:>3} {:>3} {:>4} {:>3} {:>7} {:>7} {:>7} {:>7} {:>7} {:>5} {:>5}  qdisc",
        "device", "driver", "mtu", "up", "gro", "lro", "tso", "gro_max", "gro4", "gso_max", "gso4", "tso_max", "rxq", "txq"
    );
    let onoff = |d: &DeviceState, f: &str| match d.features.get(f) {
        Some(true) => "on",
        Some(false) => "off",
        None => "-",
    };
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    for d in &ins.devices {
        let _ = writeln!(
            s,
            "{:<15} {:<11} {:>5} {:>3} {:>3} {:>4} {:>3} {:>7} {:>7} {:>7} {:>7} {:>7} {:>5} {:>5}  {}",
            d.name,
            d.driver.as_deref().or(d.kind.as_deref()).unwrap_or("-"),
            d.mtu,
            if d.up { "up" } else { "dn" },
            onoff(d, "rx-gro"),
            onoff(d, "rx-lro"),
            onoff(d, "tcp-segmentation-offload"),
            opt(d.gro_max_size),
            opt(d.gro_ipv4_max_size),
            opt(d.gso_max_size),
            opt(d.gso_ipv4_max_size),
            opt(d.tso_max_size),
            d.queues.rx,
            d.queues.tx,
            d.qdisc.as_deref().unwrap_or("-"),
        );
        let mut extra = Vec::new();
        for f in ["rx-gro-list", "rx-udp-gro-forwarding", "rx-gro-hw"] {
            if d.features.get(f) == Some(&true) {
                extra.push(format!("{f} on"));
            }
        }
        if let Some(t) = d.gro_flush_timeout.filter(|&t| t > 0) {
            extra.push(format!("gro_flush_timeout {t}"));
        }
        if let Some(t) = d.napi_defer_hard_irqs.filter(|&t| t > 0) {
            extra.push(format!("napi_defer_hard_irqs {t}"));
        }
        if let Some(t) = d.threaded.filter(|&t| t > 0) {
            extra.push(format!("threaded {t}"));
        }
        let rps: Vec<String> = d
            .queues
            .rx_queues
            .iter()
            .filter(|q| q.rps_cpus.as_deref().is_some_and(|m| !mask_is_zero(m)))
            .map(|q| format!("rx-{} rps {}", q.index, q.rps_cpus.as_deref().unwrap_or("")))
            .collect();
        extra.extend(rps);
        if !d.irqs.is_empty() {
            extra.push(format!(
                "irqs {}",
                d.irqs
                    .iter()
                    .map(|i| format!(
                        "{}->{}",
                        i.irq,
                        i.effective_affinity.as_deref().unwrap_or(&i.affinity)
                    ))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        if d.xdp {
            extra.push("xdp".into());
        }
        if let Some(r) = &d.rings {
            extra.push(format!(
                "rings rx {}/{} tx {}/{}",
                r.rx, r.rx_max, r.tx, r.tx_max
            ));
        }
        if let Some(c) = &d.coalesce {
            let g = |k: &str| c.get(k).copied().unwrap_or(0);
            extra.push(format!(
                "coalesce rx-usecs {} rx-frames {} adaptive-rx {}",
                g("rx-usecs"),
                g("rx-frames"),
                if g("adaptive-rx") != 0 { "on" } else { "off" }
            ));
        }
        if let Some(r) = d
            .rss
            .as_ref()
            .filter(|r| !r.indirection.is_empty() || !r.hash_functions.is_empty())
        {
            extra.push(format!(
                "rss {} entries, hash {}",
                r.indirection.len(),
                r.hash_functions.join("/")
            ));
        }
        for q in d.queues.rx_queues.iter().filter(|q| q.irq.is_some()) {
            extra.push(format!(
                "rx-{} irq {} on cpu {}",
                q.index,
                q.irq.unwrap_or(0),
                q.irq_cpus.as_deref().unwrap_or("-")
            ));
        }
        if let Some(l) = &d.lower {
            extra.push(format!(
                "lower {}",
                l.name
                    .clone()
                    .unwrap_or_else(|| format!("ifindex {}", l.ifindex))
            ));
        }
        if let Some(u) = &d.underlay {
            extra.push(format!("underlay {u}"));
        }
        if !extra.is_empty() {
            let _ = writeln!(s, "{:<15} {}", "", extra.join(", "));
        }
    }
    let _ = writeln!(s);
    if ins.findings.is_empty() {
        let _ = writeln!(s, "findings: none");
    } else {
        let _ = writeln!(s, "findings:");
        for f in &ins.findings {
            let _ = writeln!(
                s,
                "{:>2}. [{}] {}{}",
                f.rank,
                f.severity.name(),
                f.title,
                f.kernel
                    .as_deref()
                    .map(|k| format!(" (kernel {k})"))
                    .unwrap_or_default()
            );
            let _ = writeln!(s, "    {}", f.detail);
            if let Some(fix) = &f.fix {
                let _ = writeln!(s, "    fix: {fix}");
            }
        }
    }
    s
}

/// A sysfs CPU mask with no CPU set (`0`, `00000000,00000000`).
pub fn mask_is_zero(mask: &str) -> bool {
    mask.chars().all(|c| c == '0' || c == ',')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softnet_lines_parse_with_cpu_column() {
        let text = "0000a000 00000002 00000003 00000000 00000000 00000000 00000000 00000000 00000000 00000004 00000000 00000000 00000001\n";
        let c = parse_softnet(text);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].cpu, 1);
        assert_eq!(c[0].processed, 0xa000);
        assert_eq!(c[0].dropped, 2);
        assert_eq!(c[0].time_squeeze, 3);
        assert_eq!(c[0].received_rps, 4);
    }

    fn feature(name: &str, active: bool, fixed: bool) -> offload_sys::ethtool::Feature {
        offload_sys::ethtool::Feature {
            name: name.into(),
            active,
            requested: active,
            changeable: !fixed,
            never_changed: false,
        }
    }

    /// ethtool's rule: a group of several features is on when any is on,
    /// never `[fixed]`; a group of one is that feature, `[fixed]` included;
    /// unnamed bits are left out.
    #[test]
    fn groups_follow_ethtool() {
        let list = vec![
            feature("tx-checksum-ipv4", false, true),
            feature("tx-checksum-ip-generic", true, false),
            feature("tx-tcp-segmentation", true, false),
            feature("tx-tcp-ecn-segmentation", false, false),
            feature("rx-gro", true, true),
            feature("", false, true),
        ];
        let (f, fixed, _) = feature_view(&list);
        assert!(f["tx-checksumming"]);
        assert!(f["tcp-segmentation-offload"]);
        assert!(f["generic-receive-offload"]);
        assert!(!f.contains_key(""));
        assert!(fixed.contains(&"generic-receive-offload".to_string()));
        assert!(fixed.contains(&"tx-checksum-ipv4".to_string()));
        assert!(!fixed.contains(&"tx-checksumming".to_string()));
        assert!(!fixed.iter().any(|n| n.is_empty()));
        assert_eq!(
            first_group("tx-tcp6-segmentation"),
            Some("tcp-segmentation-offload")
        );
        assert_eq!(
            first_group("tx-scatter-gather-fraglist"),
            Some("scatter-gather")
        );
        assert_eq!(first_group("rx-gro-list"), None);
    }
}
