//! `offload inspect`: the offload state of the current network namespace
//! and host, and the findings that follow from it.
//!
//! Everything is read through interfaces, never by running `ip` or
//! `ethtool`: rtnetlink for link state and the size knobs ([`crate::rtnl`]),
//! the ethtool ioctl for features, driver and channels ([`crate::ethtool`]),
//! sysfs for per-queue RPS/XPS and NAPI knobs, procfs for sysctls, IRQ
//! affinity and `softnet_stat`, and BTF for the 6.8 cache-line groups.
//!
//! sysfs shows the devices of the namespace that mounted it, which is not
//! the caller's when it entered a namespace with `nsenter --net` (no
//! remount). [`inspect`] therefore mounts a *detached* sysfs of the calling
//! thread's namespace ([`crate::sysfs::Sysfs::mount_here`]), falling back to
//! `/sys` when it may not mount.
//!
//! Findings are ranked as `offload analyze` ranks its own (high, medium,
//! info; then by device), each with evidence in its detail and the exact
//! command that fixes it. Rules that depend on the kernel version say which
//! versions they hold for.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::error::Result;
use crate::ethtool::Ethtool;
use crate::rtnl::{LinkState, Rtnl};
use crate::sysfs::Sysfs;

/// 64 KiB: the legacy GSO/GRO limit (`GSO_LEGACY_MAX_SIZE`, `GRO_LEGACY_MAX_SIZE`).
pub const LEGACY_MAX_SIZE: u32 = 65536;

/// How bad a finding is; the order is the ranking (as in `offload analyze`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Costs throughput or drops packets now.
    High,
    /// A real loss of offload or a setting that cannot do what it says.
    Medium,
    /// Worth knowing; no loss proven.
    Info,
}

impl Severity {
    /// Lower-case name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Info => "info",
        }
    }
}

/// One finding about the host or a device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Position in the ranking, from 1.
    pub rank: usize,
    /// How bad it is.
    pub severity: Severity,
    /// Stable machine name, e.g. `gro-off`, `big-tcp-half-done`.
    pub kind: &'static str,
    /// The device it is about (`None` for host-wide findings).
    pub device: Option<String>,
    /// One line.
    pub title: String,
    /// The evidence: the values read and why they matter.
    pub detail: String,
    /// The exact command that fixes it.
    pub fix: String,
    /// Kernel versions the rule holds for, when it depends on them.
    pub kernel: Option<&'static str>,
}

/// An RX queue's steering knobs (`/sys/class/net/DEV/queues/rx-N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RxQueue {
    /// Queue number.
    pub index: u32,
    /// `rps_cpus` mask as the kernel prints it (hex, comma-separated words).
    pub rps_cpus: Option<String>,
    /// `rps_flow_cnt` (RFS flow table size).
    pub rps_flow_cnt: Option<u64>,
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

/// `ethtool -l` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChannelCounts {
    /// Current RX-only channels.
    pub rx: u32,
    /// Current TX-only channels.
    pub tx: u32,
    /// Current combined channels.
    pub combined: u32,
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
    /// Features the device will not let change (`[fixed]` in `ethtool -k`).
    pub fixed_features: Vec<String>,
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
    /// For a VXLAN device, the underlay device named by `dev`.
    pub underlay: Option<String>,
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
    /// The engine's kernel profile this kernel maps to (`6.1`, `6.6`,
    /// `6.18`, `7.x`).
    pub profile: &'static str,
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
}

/// The result of [`inspect`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    /// The devices, in ifindex order.
    pub devices: Vec<DeviceState>,
    /// Host-wide state.
    pub host: HostState,
    /// Ranked findings.
    pub findings: Vec<Finding>,
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

/// Reads the state of the devices named in `only` (every device when
/// empty) and of the host, and derives the findings. Acts on the calling
/// thread's network namespace.
pub fn inspect(only: &[String]) -> Result<Inspection> {
    let mut rtnl = Rtnl::open()?;
    let links = rtnl.links()?;
    for name in only {
        if !links.iter().any(|l| &l.name == name) {
            return Err(crate::Error::NoDevice(name.clone()));
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
    let findings = findings(&devices, &host);
    Ok(Inspection {
        devices,
        host,
        findings,
    })
}

fn read_device(
    link: &LinkState,
    all: &[LinkState],
    ethtool: &Ethtool,
    sys: &SysRoot,
    interrupts: &str,
) -> DeviceState {
    let dev = &link.name;
    let mut features = BTreeMap::new();
    let mut fixed = Vec::new();
    if let Ok(list) = ethtool.features(dev) {
        for f in &list {
            features.insert(f.name.clone(), f.active);
            if !f.changeable {
                fixed.push(f.name.clone());
            }
        }
        for (group, members) in ETHTOOL_GROUPS {
            let present: Vec<bool> = list
                .iter()
                .filter(|f| members.contains(&f.name.as_str()))
                .map(|f| f.active)
                .collect();
            if !present.is_empty() {
                // ethtool prints a group "on" when every sub-feature the
                // device has is on.
                features.insert((*group).to_string(), present.iter().all(|&a| a));
            }
        }
    }
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
        combined: c.combined,
        max_combined: c.max_combined,
    });
    let physical = sys.exists(&format!("{base}/device"));
    let irqs = if physical {
        device_irqs(dev, sys, &base, interrupts)
    } else {
        Vec::new()
    };
    DeviceState {
        name: dev.clone(),
        ifindex: link.index,
        kind: link.kind.clone(),
        driver: ethtool.driver(dev).ok().filter(|d| !d.is_empty()),
        up: link.up,
        mtu: link.mtu,
        features,
        fixed_features: fixed,
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

/// `ethtool -k`'s group names and the kernel feature names each covers
/// (ethtool's `off_flag_def` table).
const ETHTOOL_GROUPS: &[(&str, &[&str])] = &[
    ("rx-checksumming", &["rx-checksum"]),
    (
        "tx-checksumming",
        &[
            "tx-checksum-ipv4",
            "tx-checksum-ip-generic",
            "tx-checksum-ipv6",
            "tx-checksum-fcoe-crc",
            "tx-checksum-sctp",
        ],
    ),
    (
        "scatter-gather",
        &["tx-scatter-gather", "tx-scatter-gather-fraglist"],
    ),
    (
        "tcp-segmentation-offload",
        &[
            "tx-tcp-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation",
        ],
    ),
    ("udp-fragmentation-offload", &["tx-udp-fragmentation"]),
    ("generic-segmentation-offload", &["tx-generic-segmentation"]),
    ("generic-receive-offload", &["rx-gro"]),
    ("large-receive-offload", &["rx-lro"]),
    ("rx-vlan-offload", &["rx-vlan-hw-parse"]),
    ("tx-vlan-offload", &["tx-vlan-hw-insert"]),
    ("ntuple-filters", &["rx-ntuple-filter"]),
    ("receive-hashing", &["rx-hashing"]),
];

/// Maps a kernel release (`6.18.44-...`) to the engine's kernel profile.
pub fn profile_for(release: &str) -> &'static str {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    match (major, minor) {
        (m, _) if m >= 7 => "7.x",
        (6, n) if n >= 18 => "6.18",
        (6, n) if n >= 6 => "6.6",
        _ => "6.1",
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
    let sysctls = HOST_SYSCTLS
        .iter()
        .map(|k| {
            let v = crate::sysfs::read_sysctl(k)
                .ok()
                .or_else(|| read_sysctl_initial_ns(k));
            (k.replace('/', "."), v.map(|v| v.replace('\t', " ")))
        })
        .collect();
    HostState {
        profile: profile_for(&kernel),
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        sysctls,
        softnet: read_softnet(),
        cacheline_groups: btf_has_cacheline_groups(),
        private_sysfs,
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
        crate::sysfs::read_sysctl(&key).ok()
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
fn open_initial_net_ns() -> Option<std::fs::File> {
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

fn sysctl_u64(host: &HostState, key: &str) -> Option<u64> {
    host.sysctls
        .get(key)?
        .as_deref()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Derives the ranked findings from the state read.
pub fn findings(devices: &[DeviceState], host: &HostState) -> Vec<Finding> {
    let mut out = Vec::new();
    let forwarding = sysctl_u64(host, "net.ipv4.ip_forward") == Some(1)
        || sysctl_u64(host, "net.ipv6.conf.all.forwarding") == Some(1);
    for d in devices {
        let loopback = d.name == "lo";
        let feature = |n: &str| d.features.get(n).copied();
        let fixed = |n: &str| d.fixed_features.iter().any(|f| f == n);
        // GRO off.
        if !loopback && feature("rx-gro") == Some(false) {
            let (severity, fix) = if fixed("rx-gro") {
                (
                    Severity::Info,
                    format!(
                        "none: the driver of {} does not let GRO be switched on",
                        d.name
                    ),
                )
            } else {
                (Severity::Medium, format!("ethtool -K {} gro on", d.name))
            };
            out.push(Finding {
                rank: 0,
                severity,
                kind: "gro-off",
                device: Some(d.name.clone()),
                title: format!("GRO is off on {}", d.name),
                detail: format!(
                    "generic-receive-offload: off on {}: every packet it receives goes up the stack one by one, \
                     so TCP and UDP receivers pay per-packet costs GRO would amortise{}",
                    d.name,
                    if d.kind.as_deref() == Some("veth") {
                        " (on veth, GRO also gives the device a NAPI instance, needed for busy polling and XDP-less GRO)"
                    } else {
                        ""
                    }
                ),
                fix,
                kernel: None,
            });
        }
        // LRO with forwarding.
        if forwarding && feature("rx-lro") == Some(true) {
            out.push(Finding {
                rank: 0,
                severity: Severity::High,
                kind: "lro-forwarding",
                device: Some(d.name.clone()),
                title: format!("LRO is on on {} while the host forwards", d.name),
                detail: format!(
                    "large-receive-offload: on and ip_forward/forwarding = 1: LRO merges without keeping the \
                     segment boundaries, so forwarded packets must be dropped or re-segmented (the kernel \
                     normally turns LRO off when forwarding is enabled; {} kept it)",
                    d.name
                ),
                fix: format!("ethtool -K {} lro off", d.name),
                kernel: None,
            });
        }
        big_tcp_findings(d, &mut out);
        // UDP GRO forwarding on a tunnel underlay.
        if forwarding {
            let is_underlay = devices.iter().any(|t| {
                matches!(t.kind.as_deref(), Some("vxlan") | Some("geneve"))
                    && t.underlay.as_deref() == Some(d.name.as_str())
            });
            if is_underlay && feature("rx-udp-gro-forwarding") == Some(false) {
                out.push(Finding {
                    rank: 0,
                    severity: Severity::Medium,
                    kind: "udp-gro-forwarding-off",
                    device: Some(d.name.clone()),
                    title: format!("UDP GRO forwarding is off on the tunnel underlay {}", d.name),
                    detail: format!(
                        "{} carries VXLAN/Geneve and the host forwards: without rx-udp-gro-forwarding, \
                         forwarded UDP tunnel traffic is not aggregated (udp_gro_receive needs it when no \
                         local socket claims the port; 5.12+)",
                        d.name
                    ),
                    fix: format!("ethtool -K {} rx-udp-gro-forwarding on", d.name),
                    kernel: Some("5.12+"),
                });
            }
        }
        // One RX queue on a multi-CPU host, no RPS.
        if d.physical && d.queues.rx == 1 && host.cpus > 1 {
            let rps_off = d
                .queues
                .rx_queues
                .iter()
                .all(|q| q.rps_cpus.as_deref().is_none_or(mask_is_zero));
            if rps_off {
                let mask = format!("{:x}", (1u128 << host.cpus.min(127)) - 1);
                out.push(Finding {
                    rank: 0,
                    severity: Severity::Medium,
                    kind: "single-queue-no-rps",
                    device: Some(d.name.clone()),
                    title: format!("{} has one RX queue for {} CPUs and no RPS", d.name, host.cpus),
                    detail: format!(
                        "all of {}'s receive processing (GRO included) runs on the one CPU that takes its \
                         interrupt; rps_cpus is 0 on rx-0",
                        d.name
                    ),
                    fix: format!("echo {mask} > /sys/class/net/{}/queues/rx-0/rps_cpus", d.name),
                    kernel: None,
                });
            }
        }
        // Every queue IRQ on one CPU.
        if d.irqs.len() > 1 && host.cpus > 1 {
            let eff: Vec<&str> = d
                .irqs
                .iter()
                .map(|i| i.effective_affinity.as_deref().unwrap_or(&i.affinity))
                .collect();
            if eff.iter().all(|a| *a == eff[0] && !a.contains([',', '-'])) && !eff[0].is_empty() {
                out.push(Finding {
                    rank: 0,
                    severity: Severity::Medium,
                    kind: "irqs-one-cpu",
                    device: Some(d.name.clone()),
                    title: format!("every IRQ of {} runs on CPU {}", d.name, eff[0]),
                    detail: format!(
                        "{} interrupts ({}) all have effective affinity {}: the queues cannot spread",
                        d.irqs.len(),
                        d.irqs.iter().map(|i| i.irq.to_string()).collect::<Vec<_>>().join(", "),
                        eff[0]
                    ),
                    fix: d
                        .irqs
                        .iter()
                        .enumerate()
                        .map(|(n, i)| {
                            format!("echo {} > /proc/irq/{}/smp_affinity_list", n % host.cpus, i.irq)
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                    kernel: None,
                });
            }
        }
    }
    softnet_findings(host, &mut out);
    busy_poll_findings(devices, host, &mut out);
    rank(&mut out);
    out
}

fn mask_is_zero(mask: &str) -> bool {
    mask.chars().all(|c| c == '0' || c == ',')
}

fn big_tcp_findings(d: &DeviceState, out: &mut Vec<Finding>) {
    let (Some(gso), Some(gro)) = (d.gso_max_size, d.gro_max_size) else {
        return;
    };
    let big = |v: u32| v > LEGACY_MAX_SIZE;
    if big(gso) != big(gro) {
        let (raised, low, low_knob) = if big(gso) {
            ("gso_max_size", gro, "gro_max_size")
        } else {
            ("gro_max_size", gso, "gso_max_size")
        };
        let target = gso.max(gro);
        // GSO raised without GRO: this host sends big packets it would not
        // build on receive, and forwarded traffic is cut to 64 KiB. GRO
        // raised alone is a receive-only setup: worth saying, not a loss.
        let severity = if big(gso) {
            Severity::Medium
        } else {
            Severity::Info
        };
        out.push(Finding {
            rank: 0,
            severity,
            kind: "big-tcp-half-done",
            device: Some(d.name.clone()),
            title: format!("BIG TCP half done on {}: {raised} raised, {low_knob} at {low}", d.name),
            detail: format!(
                "{} has gso_max_size {gso} and gro_max_size {gro}: BIG TCP needs both (the sender builds \
                 packets over 64 KiB only with gso_max_size, the receiver merges past 64 KiB only with \
                 gro_max_size); IPv6 6.0+, IPv4 6.3+",
                d.name
            ),
            fix: format!("ip link set dev {} {low_knob} {target}", d.name),
            kernel: Some("6.0+ (IPv6), 6.3+ (IPv4)"),
        });
    }
    for (v6, v4, v6k, v4k) in [
        (
            gso,
            d.gso_ipv4_max_size,
            "gso_max_size",
            "gso_ipv4_max_size",
        ),
        (
            gro,
            d.gro_ipv4_max_size,
            "gro_max_size",
            "gro_ipv4_max_size",
        ),
    ] {
        if let Some(v4) = v4 {
            if big(v6) && !big(v4) {
                out.push(Finding {
                    rank: 0,
                    severity: Severity::Info,
                    kind: "big-tcp-ipv4-knob",
                    device: Some(d.name.clone()),
                    title: format!("BIG TCP on {} for IPv6 only: {v4k} is {v4}", d.name),
                    detail: format!(
                        "{v6k} is {v6} but {v4k} is {v4}: IPv4 flows stay at 64 KiB. Setting {v6k} to a \
                         value <= 65536 also overwrites {v4k} (netif_set_gso/gro_max_size), so set the IPv6 \
                         knob first, then the IPv4 one (cilium#26336)"
                    ),
                    fix: format!("ip link set dev {} {v4k} {v6}", d.name),
                    kernel: Some("6.3+"),
                });
            }
        }
    }
    if let Some(tso) = d.tso_max_size {
        let wanted = gso.max(d.gso_ipv4_max_size.unwrap_or(0));
        if big(wanted) && tso <= LEGACY_MAX_SIZE {
            out.push(Finding {
                rank: 0,
                severity: Severity::Medium,
                kind: "big-tcp-tso-limit",
                device: Some(d.name.clone()),
                title: format!("gso_max_size {wanted} on {} cannot take effect: tso_max_size {tso}", d.name),
                detail: format!(
                    "the driver of {} caps TSO at {tso} bytes (tso_max_size), so the stack never builds \
                     packets above it whatever gso_max_size says",
                    d.name
                ),
                fix: format!(
                    "none on this device: BIG TCP needs a driver with tso_max_size > 65536; \
                     ip link set dev {} gso_max_size {tso} to make the setting honest",
                    d.name
                ),
                kernel: Some("6.0+"),
            });
        }
    }
}

fn softnet_findings(host: &HostState, out: &mut Vec<Finding>) {
    let dropped: u64 = host.softnet.iter().map(|c| c.dropped).sum();
    let squeezed: u64 = host.softnet.iter().map(|c| c.time_squeeze).sum();
    let processed: u64 = host.softnet.iter().map(|c| c.processed).sum();
    if dropped > 0 {
        let (backlog, note) = sysctl_or_default(host, "net.core.netdev_max_backlog", 1000);
        out.push(Finding {
            rank: 0,
            severity: Severity::High,
            kind: "softnet-drops",
            device: None,
            title: format!("{dropped} packets dropped at the backlog since boot"),
            detail: format!(
                "/proc/net/softnet_stat: {dropped} drops over {processed} packets ({}): the per-CPU \
                 backlog exceeded netdev_max_backlog = {backlog}{note}",
                per_cpu(host, |c| c.dropped)
            ),
            fix: format!("sysctl -w net.core.netdev_max_backlog={}", (backlog * 2).max(2000)),
            kernel: None,
        });
    }
    if squeezed > 0 {
        let (budget, budget_note) = sysctl_or_default(host, "net.core.netdev_budget", 300);
        let (usecs, usecs_note) = sysctl_or_default(host, "net.core.netdev_budget_usecs", 2000);
        out.push(Finding {
            rank: 0,
            severity: Severity::Info,
            kind: "softnet-time-squeeze",
            device: None,
            title: format!("net_rx_action ran out of budget {squeezed} times"),
            detail: format!(
                "/proc/net/softnet_stat time_squeeze {squeezed} ({}): softirq receive stopped with work \
                 left (netdev_budget = {budget}{budget_note}, netdev_budget_usecs = {usecs}{usecs_note}); \
                 the rest waits for the \
                 next softirq or ksoftirqd",
                per_cpu(host, |c| c.time_squeeze)
            ),
            fix: format!(
                "sysctl -w net.core.netdev_budget={} net.core.netdev_budget_usecs={}",
                budget * 2,
                usecs * 2
            ),
            kernel: None,
        });
    }
}

/// A host sysctl's value, or the kernel's default with a note saying so
/// when it could not be read (a namespace with no way to the host's).
fn sysctl_or_default(host: &HostState, key: &str, default: u64) -> (u64, &'static str) {
    match sysctl_u64(host, key) {
        Some(v) => (v, ""),
        None => (
            default,
            " (kernel default: not readable from this namespace)",
        ),
    }
}

fn per_cpu(host: &HostState, f: impl Fn(&SoftnetCpu) -> u64) -> String {
    let mut s = String::new();
    for c in &host.softnet {
        let v = f(c);
        if v > 0 {
            if !s.is_empty() {
                s.push_str(", ");
            }
            let _ = write!(s, "cpu{} {v}", c.cpu);
        }
    }
    s
}

fn busy_poll_findings(devices: &[DeviceState], host: &HostState, out: &mut Vec<Finding>) {
    let read = sysctl_u64(host, "net.core.busy_read").unwrap_or(0);
    let poll = sysctl_u64(host, "net.core.busy_poll").unwrap_or(0);
    if read == 0 && poll == 0 {
        return;
    }
    // A NAPI ID reaches a socket only from a device with NAPI: hardware
    // and paravirtual NICs, veth with GRO or XDP on the receiving end
    // (veth_napi_add in drivers/net/veth.c), TUN with IFF_NAPI.
    let napi_capable: Vec<&str> = devices
        .iter()
        .filter(|d| d.name != "lo" && d.up)
        .filter(|d| {
            d.physical
                || (d.kind.as_deref() == Some("veth")
                    && (d.xdp || d.features.get("rx-gro") == Some(&true)))
        })
        .map(|d| d.name.as_str())
        .collect();
    if napi_capable.is_empty() {
        out.push(Finding {
            rank: 0,
            severity: Severity::Medium,
            kind: "busy-poll-no-napi",
            device: None,
            title: "busy polling is set but no device here has a NAPI instance".into(),
            detail: format!(
                "net.core.busy_read = {read}, net.core.busy_poll = {poll}, but no up device of this \
                 namespace can give sockets a NAPI ID (veth needs GRO or XDP on the receiving end; \
                 with sender TSO on, veth skips GRO and SO_INCOMING_NAPI_ID stays 0): the sockets spin \
                 for nothing"
            ),
            fix: "sysctl -w net.core.busy_read=0 net.core.busy_poll=0 (or ethtool -K <veth> gro on on the receiving veth)".into(),
            kernel: None,
        });
    }
}

fn rank(out: &mut [Finding]) {
    out.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| a.device.cmp(&b.device))
            .then_with(|| a.kind.cmp(b.kind))
    });
    for (i, f) in out.iter_mut().enumerate() {
        f.rank = i + 1;
    }
}

/// Renders an inspection as text for people.
pub fn render_text(ins: &Inspection) -> String {
    let mut s = String::new();
    let h = &ins.host;
    let _ = writeln!(
        s,
        "host: kernel {} (engine profile {}), {} CPUs, 6.8 cache-line groups: {}",
        h.kernel,
        h.profile,
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
    for c in &h.softnet {
        let _ = writeln!(
            s,
            "      softnet cpu{}: processed {} dropped {} time_squeeze {} rps {}",
            c.cpu, c.processed, c.dropped, c.time_squeeze, c.received_rps
        );
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
                    .map(|k| format!(" (kernel {k})"))
                    .unwrap_or_default()
            );
            let _ = writeln!(s, "    {}", f.detail);
            let _ = writeln!(s, "    fix: {}", f.fix);
        }
    }
    s
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

    fn device(name: &str) -> DeviceState {
        DeviceState {
            name: name.into(),
            ifindex: 2,
            kind: None,
            driver: Some("mlx5_core".into()),
            up: true,
            mtu: 1500,
            features: [
                ("rx-gro", true),
                ("rx-lro", false),
                ("rx-udp-gro-forwarding", false),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            fixed_features: Vec::new(),
            gro_max_size: Some(65536),
            gso_max_size: Some(65536),
            gro_ipv4_max_size: Some(65536),
            gso_ipv4_max_size: Some(65536),
            tso_max_size: Some(524280),
            tso_max_segs: Some(65535),
            queues: Queues {
                rx: 4,
                tx: 4,
                ..Queues::default()
            },
            gro_flush_timeout: Some(0),
            napi_defer_hard_irqs: Some(0),
            threaded: Some(0),
            irqs: Vec::new(),
            qdisc: Some("mq".into()),
            xdp: false,
            physical: true,
            underlay: None,
        }
    }

    fn host(sysctls: &[(&str, &str)]) -> HostState {
        HostState {
            kernel: "6.18.0".into(),
            profile: "6.18",
            cpus: 4,
            sysctls: sysctls
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
            softnet: Vec::new(),
            cacheline_groups: Some(true),
            private_sysfs: true,
        }
    }

    fn kinds(f: &[Finding]) -> Vec<(&'static str, Option<String>, Severity)> {
        f.iter()
            .map(|f| (f.kind, f.device.clone(), f.severity))
            .collect()
    }

    #[test]
    fn a_healthy_nic_has_no_findings() {
        assert!(findings(&[device("eth0")], &host(&[])).is_empty());
    }

    #[test]
    fn lro_matters_only_when_forwarding() {
        let mut d = device("eth0");
        d.features.insert("rx-lro".into(), true);
        assert!(findings(std::slice::from_ref(&d), &host(&[])).is_empty());
        let f = findings(&[d], &host(&[("net.ipv4.ip_forward", "1")]));
        assert_eq!(
            kinds(&f),
            [("lro-forwarding", Some("eth0".into()), Severity::High)]
        );
        assert_eq!(f[0].fix, "ethtool -K eth0 lro off");
    }

    #[test]
    fn tunnel_underlay_needs_udp_gro_forwarding() {
        let eth = device("eth0");
        let mut vx = device("vxlan0");
        vx.kind = Some("vxlan".into());
        vx.physical = false;
        vx.underlay = Some("eth0".into());
        vx.features.insert("rx-udp-gro-forwarding".into(), true);
        let f = findings(&[eth, vx], &host(&[("net.ipv4.ip_forward", "1")]));
        assert_eq!(
            kinds(&f),
            [(
                "udp-gro-forwarding-off",
                Some("eth0".into()),
                Severity::Medium
            )]
        );
        assert_eq!(f[0].fix, "ethtool -K eth0 rx-udp-gro-forwarding on");
    }

    #[test]
    fn single_queue_without_rps_and_irqs_on_one_cpu() {
        let mut d = device("eth0");
        d.queues.rx = 1;
        d.queues.rx_queues = vec![RxQueue {
            index: 0,
            rps_cpus: Some("0".into()),
            rps_flow_cnt: Some(0),
        }];
        d.irqs = (40..43)
            .map(|irq| Irq {
                irq,
                name: format!("eth0-{irq}"),
                affinity: "0-3".into(),
                effective_affinity: Some("0".into()),
            })
            .collect();
        let f = findings(&[d.clone()], &host(&[]));
        assert_eq!(
            kinds(&f),
            [
                ("irqs-one-cpu", Some("eth0".into()), Severity::Medium),
                ("single-queue-no-rps", Some("eth0".into()), Severity::Medium),
            ]
        );
        assert_eq!(
            f[1].fix,
            "echo f > /sys/class/net/eth0/queues/rx-0/rps_cpus"
        );
        // RPS on: no single-queue finding.
        d.queues.rx_queues[0].rps_cpus = Some("e".into());
        assert!(!kinds(&findings(&[d], &host(&[])))
            .iter()
            .any(|k| k.0 == "single-queue-no-rps"));
    }

    #[test]
    fn big_tcp_rules() {
        let mut d = device("eth0");
        d.gso_max_size = Some(185000);
        d.tso_max_size = Some(65536);
        let f = findings(&[d.clone()], &host(&[]));
        let k = kinds(&f);
        assert!(
            k.contains(&("big-tcp-half-done", Some("eth0".into()), Severity::Medium)),
            "{k:?}"
        );
        assert!(
            k.contains(&("big-tcp-tso-limit", Some("eth0".into()), Severity::Medium)),
            "{k:?}"
        );
        assert!(
            k.contains(&("big-tcp-ipv4-knob", Some("eth0".into()), Severity::Info)),
            "{k:?}"
        );
        // Done right: both knobs, both families, a driver that allows it.
        d.gro_max_size = Some(185000);
        d.gso_ipv4_max_size = Some(185000);
        d.gro_ipv4_max_size = Some(185000);
        d.tso_max_size = Some(524280);
        assert!(findings(&[d], &host(&[])).is_empty());
    }

    #[test]
    fn busy_poll_without_napi_and_softnet_counters() {
        let mut v = device("veth0");
        v.kind = Some("veth".into());
        v.physical = false;
        v.features.insert("rx-gro".into(), false);
        let mut h = host(&[
            ("net.core.busy_read", "50"),
            ("net.core.netdev_max_backlog", "1000"),
        ]);
        h.softnet = vec![SoftnetCpu {
            cpu: 1,
            processed: 10,
            dropped: 3,
            time_squeeze: 2,
            ..SoftnetCpu::default()
        }];
        let f = findings(&[v], &h);
        let k: Vec<_> = kinds(&f).into_iter().map(|k| k.0).collect();
        assert_eq!(
            k,
            [
                "softnet-drops",
                "busy-poll-no-napi",
                "gro-off",
                "softnet-time-squeeze"
            ]
        );
        assert_eq!(f[0].fix, "sysctl -w net.core.netdev_max_backlog=2000");
        assert_eq!(f.iter().map(|f| f.rank).collect::<Vec<_>>(), [1, 2, 3, 4]);
    }

    #[test]
    fn releases_map_to_profiles() {
        assert_eq!(profile_for("6.1.0-28-amd64"), "6.1");
        assert_eq!(profile_for("6.12.9"), "6.6");
        assert_eq!(profile_for("6.18.44"), "6.18");
        assert_eq!(profile_for("7.0.1"), "7.x");
        assert_eq!(profile_for("5.15.0"), "6.1");
    }
}
