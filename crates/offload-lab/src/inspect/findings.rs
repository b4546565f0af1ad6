//! What an expert raises from an inspection, ranked by impact.
//!
//! Every finding carries the evidence it rests on, measured over the
//! inspection's window where a counter is involved (rates, never a
//! since-boot total unless asked), and a fix that works where it is
//! printed:
//! - on the device that owns the setting: a macvlan, ipvlan or VLAN
//!   follows its lower device's GRO, LRO and UDP GRO forwarding, so those
//!   fixes name the lower device;
//! - in the namespace that owns it: `net.core` knobs such as
//!   `netdev_max_backlog` exist only in the initial namespace, so inside
//!   another one the fix says to run it in the host namespace;
//! - with commands this host has: BIG TCP's IPv4 knobs need iproute2 6.3,
//!   so fixes that touch them are `offload tune` commands, which speak
//!   netlink themselves.
//!
//! Each fix is also a list of [`Change`]s that `offload tune --fix` applies.

use std::fmt::Write as _;

use serde::Serialize;

use super::counters::Window;
use super::{mask_is_zero, DeviceState, HostState, SoftnetCpu, LEGACY_MAX_SIZE};

use offload_report::Severity;

/// One knob a fix sets, in `offload tune --set` syntax (see
/// `tune::Knob`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The knob, e.g. `eth0:gro_max_size`, `eth0:feature:rx-gro`,
    /// `sysctl:net.core.netdev_max_backlog`.
    pub knob: String,
    /// The value to set.
    pub value: String,
    /// The knob belongs to the host (initial namespace or IRQs): `offload
    /// tune` needs `--host` for it.
    pub host: bool,
}

/// One finding about the host or a device: the project's shared
/// [`offload_report::Finding`] and the knobs that fix it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The finding, as every command reports one.
    #[serde(flatten)]
    pub finding: offload_report::Finding,
    /// The fix as knobs for `offload tune --fix KIND` (empty when nothing
    /// can be set).
    pub changes: Vec<Change>,
}

impl std::ops::Deref for Finding {
    type Target = offload_report::Finding;
    fn deref(&self) -> &offload_report::Finding {
        &self.finding
    }
}

/// A finding as the rules build it, before ranking.
#[derive(Debug, Clone, PartialEq)]
struct Draft {
    rank: usize,
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
    /// The exact command(s) that fix it, runnable where inspect ran (or,
    /// for host-only knobs inside a namespace, said to be for the host
    /// namespace).
    pub fix: String,
    /// The same fix as knobs for `offload tune --fix KIND` (empty when
    /// nothing can be set).
    pub changes: Vec<Change>,
    /// Kernel versions the rule holds for, when it depends on them.
    pub kernel: Option<&'static str>,
}

impl Draft {
    fn into_finding(self) -> Finding {
        let mut f = offload_report::Finding::new(self.severity, self.kind, self.title, self.detail)
            .with_fix(self.fix);
        if let Some(d) = self.device {
            f = f.with_device(d);
        }
        if let Some(k) = self.kernel {
            f = f.with_kernel(k);
        }
        Finding {
            finding: f,
            changes: self.changes,
        }
    }
}

/// Context shared by the rules.
struct Ctx<'a> {
    devices: &'a [DeviceState],
    host: &'a HostState,
    window: &'a Window,
    forwarding: bool,
}

impl Ctx<'_> {
    /// The `offload tune` command that applies `changes` here.
    fn tune_command(&self, changes: &[Change]) -> String {
        let host = changes.iter().any(|c| c.host) || self.host.host_namespace;
        let mut s = String::from("offload tune --apply");
        if host {
            s.push_str(" --host");
        }
        for c in changes {
            let _ = write!(s, " --set {}={}", c.knob, c.value);
        }
        s
    }

    /// A sysctl fix: `sysctl -w` where the knob lives in this namespace;
    /// for a host-only knob inside another namespace, the same command said
    /// to be for the host namespace.
    fn sysctl_fix(&self, pairs: &[(&str, String)]) -> (String, Vec<Change>) {
        let cmd = format!(
            "sysctl -w {}",
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let host_only = pairs
            .iter()
            .any(|(k, _)| self.host.host_only_sysctls.iter().any(|h| h == k));
        let changes: Vec<Change> = pairs
            .iter()
            .map(|(k, v)| Change {
                knob: format!("sysctl:{k}"),
                value: v.clone(),
                host: self.host.host_only_sysctls.iter().any(|h| h == k)
                    || self.host.host_namespace,
            })
            .collect();
        let fix = if host_only && !self.host.host_namespace {
            format!(
                "in the host namespace (these knobs exist only there, not in this namespace): {cmd}"
            )
        } else {
            cmd
        };
        (fix, changes)
    }

    /// The device that owns `d`'s GRO/LRO/UDP-GRO-forwarding state: its
    /// lower device for a macvlan, ipvlan or VLAN (their features follow
    /// the lower device's: `macvlan_fix_features`, `ipvlan_fix_features`,
    /// `vlan_dev_fix_features`), else itself.
    fn feature_owner<'b>(&'b self, d: &'b DeviceState) -> FeatureOwner<'b> {
        let follows = matches!(
            d.kind.as_deref(),
            Some("macvlan" | "macvtap" | "ipvlan" | "ipvtap" | "vlan")
        );
        match (&d.lower, follows) {
            (Some(l), true) => match &l.name {
                Some(n) => FeatureOwner::Lower(n.as_str()),
                None => FeatureOwner::LowerElsewhere(l.ifindex, l.netnsid),
            },
            _ => FeatureOwner::Itself,
        }
    }

    /// Fix for "feature `name` should be `on` on `d`".
    fn feature_fix(
        &self,
        d: &DeviceState,
        feature: &str,
        ethtool_word: &str,
        on: bool,
    ) -> (String, Vec<Change>) {
        let word = if on { "on" } else { "off" };
        let own = Change {
            knob: format!("{}:feature:{feature}", d.name),
            value: word.into(),
            host: self.host.host_namespace,
        };
        match self.feature_owner(d) {
            FeatureOwner::Itself => (
                format!("ethtool -K {} {ethtool_word} {word}", d.name),
                vec![own],
            ),
            FeatureOwner::Lower(lower) => {
                let mut changes = vec![Change {
                    knob: format!("{lower}:feature:{feature}"),
                    value: word.into(),
                    host: self.host.host_namespace,
                }];
                let mut fix = format!(
                    "ethtool -K {lower} {ethtool_word} {word} (the lower device: {} follows it)",
                    d.name
                );
                // The device's own request too, when it asked otherwise.
                let requested = d
                    .requested
                    .get(feature)
                    .copied()
                    .unwrap_or_else(|| d.features.get(feature).copied().unwrap_or(false));
                if requested != on {
                    changes.push(own);
                    let _ = write!(fix, "; then ethtool -K {} {ethtool_word} {word}", d.name);
                }
                (fix, changes)
            }
            FeatureOwner::LowerElsewhere(ifindex, nsid) => (
                format!(
                    "on the lower device of {} (ifindex {ifindex}{}), in its namespace: ethtool -K <lower> {ethtool_word} {word}",
                    d.name,
                    nsid.map(|n| format!(" in the namespace with nsid {n}")).unwrap_or_default()
                ),
                Vec::new(),
            ),
        }
    }
}

enum FeatureOwner<'a> {
    Itself,
    Lower(&'a str),
    LowerElsewhere(u32, Option<i32>),
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

/// Derives the ranked findings from the state read and the counters over
/// the window; `since_boot` adds findings on since-boot totals (asked for
/// with `--since-boot`).
pub fn findings(
    devices: &[DeviceState],
    host: &HostState,
    window: &Window,
    since_boot: Option<&Window>,
) -> Vec<Finding> {
    let ctx = Ctx {
        devices,
        host,
        window,
        forwarding: sysctl_u64(host, "net.ipv4.ip_forward") == Some(1)
            || sysctl_u64(host, "net.ipv6.conf.all.forwarding") == Some(1),
    };
    let mut out: Vec<Draft> = Vec::new();
    for d in devices {
        gro_off(&ctx, d, &mut out);
        lro_forwarding(&ctx, d, &mut out);
        udp_gro_forwarding(&ctx, d, &mut out);
        big_tcp_half_done(&ctx, d, &mut out);
        big_tcp_ipv6_outer_tunnel(&ctx, d, &mut out);
        queues_and_spread(&ctx, d, &mut out);
        napi_knobs(&ctx, d, &mut out);
    }
    rfs(&ctx, &mut out);
    socket_drops(&ctx, &mut out);
    softnet(&ctx, window, false, &mut out);
    if let Some(totals) = since_boot {
        softnet(&ctx, totals, true, &mut out);
    }
    cpu_skew(&ctx, &mut out);
    busy_poll(&ctx, &mut out);
    let mut ranked: Vec<Finding> = out.into_iter().map(Draft::into_finding).collect();
    let mut plain: Vec<offload_report::Finding> =
        ranked.iter().map(|f| f.finding.clone()).collect();
    offload_report::rank(&mut plain);
    // Rules raise at most one finding per kind and device: that pair
    // carries the changes over the ranking.
    let mut out = Vec::with_capacity(plain.len());
    for f in plain {
        let i = ranked
            .iter()
            .position(|r| r.kind == f.kind && r.device == f.device)
            .unwrap_or(0);
        let r = ranked.swap_remove(i);
        out.push(Finding {
            finding: f,
            changes: r.changes,
        });
    }
    out
}

fn gro_off(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    if d.name == "lo" || d.features.get("rx-gro") != Some(&false) {
        return;
    }
    let fixed = d.fixed_features.iter().any(|f| f == "rx-gro");
    let (severity, fix, changes) = if fixed {
        (
            Severity::Info,
            format!(
                "none: the driver of {} does not let GRO be switched on",
                d.name
            ),
            Vec::new(),
        )
    } else {
        let (fix, changes) = ctx.feature_fix(d, "rx-gro", "gro", true);
        (Severity::Medium, fix, changes)
    };
    out.push(Draft {
        rank: 0,
        severity,
        kind: "gro-off",
        device: Some(d.name.clone()),
        title: format!("GRO is off on {}", d.name),
        detail: format!(
            "generic-receive-offload: off{} on {}: every packet it receives goes up the stack one by one, \
             so TCP and UDP receivers pay per-packet costs GRO would amortise{}",
            if d.requested.get("rx-gro") == Some(&true) {
                " [requested on]"
            } else {
                ""
            },
            d.name,
            if d.kind.as_deref() == Some("veth") {
                " (on veth, GRO also gives the device a NAPI instance, needed for busy polling and XDP-less GRO)"
            } else {
                ""
            }
        ),
        fix,
        changes,
        kernel: None,
    });
}

fn lro_forwarding(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    if !ctx.forwarding || d.features.get("rx-lro") != Some(&true) {
        return;
    }
    let (fix, changes) = ctx.feature_fix(d, "rx-lro", "lro", false);
    out.push(Draft {
        rank: 0,
        severity: Severity::High,
        kind: "lro-forwarding",
        device: Some(d.name.clone()),
        title: format!("LRO is on on {} while the host forwards", d.name),
        detail: format!(
            "large-receive-offload: on and ip_forward/forwarding = 1: LRO merges without keeping the \
             segment boundaries, so forwarded packets must be dropped or re-segmented (dev_disable_lro \
             normally turns it off when forwarding is enabled; {} kept it)",
            d.name
        ),
        fix,
        changes,
        kernel: None,
    });
}

fn udp_gro_forwarding(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    if !ctx.forwarding
        || d.name == "lo"
        || !d.up
        || d.kind.as_deref() == Some("bridge")
        || d.features.get("rx-udp-gro-forwarding") != Some(&false)
        || d.features.get("rx-gro") != Some(&true)
        || d.fixed_features
            .iter()
            .any(|f| f == "rx-udp-gro-forwarding")
    {
        return;
    }
    let underlay = ctx.devices.iter().any(|t| {
        matches!(t.kind.as_deref(), Some("vxlan" | "geneve" | "bareudp"))
            && t.underlay.as_deref() == Some(d.name.as_str())
    });
    let (fix, changes) = ctx.feature_fix(d, "rx-udp-gro-forwarding", "rx-udp-gro-forwarding", true);
    out.push(Draft {
        rank: 0,
        severity: Severity::Medium,
        kind: "udp-gro-forwarding-off",
        device: Some(d.name.clone()),
        title: format!("UDP GRO forwarding is off on {}, and this host forwards", d.name),
        detail: format!(
            "{} receives with GRO on but rx-udp-gro-forwarding off, and ip_forward/forwarding = 1: UDP \
             it forwards (VXLAN, Geneve, QUIC passing through this hop{}) is not aggregated, because \
             udp_gro_receive (net/ipv4/udp_offload.c) merges a datagram no local socket claims only \
             with NETIF_F_GRO_UDP_FWD (5.12+)",
            d.name,
            if underlay { "; it is also a tunnel underlay here" } else { "" }
        ),
        fix,
        changes,
        kernel: Some("5.12+"),
    });
}

/// BIG TCP set on some of the four size knobs but not all: the fix raises
/// the rest in one go (IPv6 knobs first: a value <= 64 KiB on an IPv6 knob
/// also overwrites its IPv4 twin, `netif_set_gso_max_size` /
/// `netif_set_gro_max_size`), GSO no higher than `tso_max_size` (the kernel
/// refuses more: `do_setlink`, "too big gso_max_size").
fn big_tcp_half_done(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    let (Some(gso), Some(gro)) = (d.gso_max_size, d.gro_max_size) else {
        return;
    };
    let big = |v: u32| v > LEGACY_MAX_SIZE;
    let knobs: Vec<(&'static str, u32, bool)> = [
        ("gso_max_size", Some(gso), true),
        ("gro_max_size", Some(gro), false),
        ("gso_ipv4_max_size", d.gso_ipv4_max_size, true),
        ("gro_ipv4_max_size", d.gro_ipv4_max_size, false),
    ]
    .into_iter()
    .filter_map(|(n, v, is_gso)| v.map(|v| (n, v, is_gso)))
    .collect();
    let target = knobs.iter().map(|k| k.1).max().unwrap_or(0);
    if !big(target) || ctx.devices.is_empty() {
        return;
    }
    // A tunnel over IPv6 has its own finding that says to keep 64 KiB.
    if d.ipv6_outer_tunnel {
        return;
    }
    let tso = d.tso_max_size.unwrap_or(u32::MAX);
    let mut low: Vec<(&'static str, u32, u32)> = Vec::new();
    let mut cannot = Vec::new();
    for (name, v, is_gso) in &knobs {
        if big(*v) {
            continue;
        }
        let want = if *is_gso { target.min(tso) } else { target };
        if big(want) {
            low.push((name, *v, want));
        } else {
            cannot.push(*name);
        }
    }
    if low.is_empty() && cannot.is_empty() {
        return;
    }
    let gso_big = big(gso) || d.gso_ipv4_max_size.is_some_and(big);
    let gro_big = big(gro) || d.gro_ipv4_max_size.is_some_and(big);
    // GSO raised without GRO: this host sends big packets it would not
    // build on receive, and forwarded traffic is cut to 64 KiB. GRO raised
    // alone is a receive-only setup: worth saying, not a loss.
    let severity = if gso_big && !gro_big {
        Severity::Medium
    } else {
        Severity::Info
    };
    let order = [
        "gso_max_size",
        "gro_max_size",
        "gso_ipv4_max_size",
        "gro_ipv4_max_size",
    ];
    low.sort_by_key(|(n, _, _)| order.iter().position(|o| o == n));
    let changes: Vec<Change> = low
        .iter()
        .map(|(n, _, want)| Change {
            knob: format!("{}:{n}", d.name),
            value: want.to_string(),
            host: ctx.host.host_namespace,
        })
        .collect();
    let ipv4 = low.iter().any(|(n, _, _)| n.contains("ipv4"));
    let fix = if changes.is_empty() {
        format!(
            "none on {}: tso_max_size {tso} keeps GSO at 64 KiB; set the GRO knobs back to 65536 or leave them",
            d.name
        )
    } else if ipv4 {
        // iproute2 before 6.3 has no gso_ipv4_max_size / gro_ipv4_max_size.
        ctx.tune_command(&changes)
    } else {
        format!(
            "ip link set dev {}{}",
            d.name,
            low.iter()
                .map(|(n, _, w)| format!(" {n} {w}"))
                .collect::<String>()
        )
    };
    out.push(Draft {
        rank: 0,
        severity,
        kind: "big-tcp-half-done",
        device: Some(d.name.clone()),
        title: format!(
            "BIG TCP half done on {}: {} at 64 KiB while another size knob is {target}",
            d.name,
            low.iter()
                .map(|(n, _, _)| *n)
                .chain(cannot.iter().copied())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        detail: format!(
            "{} has gso_max_size {gso}, gro_max_size {gro}, gso_ipv4_max_size {}, gro_ipv4_max_size {}, \
             tso_max_size {}: BIG TCP needs GSO on the sender and GRO on the receiver, for each family \
             (IPv6 6.0+, IPv4 6.3+); a knob left at 64 KiB caps that direction or family{}",
            d.name,
            d.gso_ipv4_max_size.map_or("-".into(), |v| v.to_string()),
            d.gro_ipv4_max_size.map_or("-".into(), |v| v.to_string()),
            d.tso_max_size.map_or("-".into(), |v| v.to_string()),
            if cannot.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} cannot go above tso_max_size {tso} (the kernel refuses it)",
                    cannot.join(", ")
                )
            }
        ),
        fix,
        changes,
        kernel: Some("6.0+ (IPv6), 6.3+ (IPv4)"),
    });
}

/// BIG TCP sizes on a device that carries or underlies a tunnel with an
/// IPv6 outer header.
fn big_tcp_ipv6_outer_tunnel(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    let big = |v: Option<u32>| v.is_some_and(|v| v > LEGACY_MAX_SIZE);
    if !big(d.gro_max_size) && !big(d.gso_max_size) {
        return;
    }
    let Some(line) = offload::gro::KernelLine::from_release(&ctx.host.kernel) else {
        return;
    };
    // By point release where it tells (the stable fix that stops tunnels
    // at 64 KiB), else by the line's profile.
    let affected =
        offload::gro::KernelLine::release_breaks_big_tcp_over_ipv6_tunnels(&ctx.host.kernel)
            .unwrap_or(line.breaks_big_tcp_over_ipv6_tunnels());
    if !affected {
        return;
    }
    let tunnels: Vec<&DeviceState> = ctx.devices.iter().filter(|t| t.ipv6_outer_tunnel).collect();
    let role = if d.ipv6_outer_tunnel {
        Some(format!("{} is a tunnel with an IPv6 outer header", d.name))
    } else {
        tunnels
            .iter()
            .find(|t| {
                t.underlay.as_deref() == Some(d.name.as_str())
                    || t.lower.as_ref().and_then(|l| l.name.as_deref()) == Some(d.name.as_str())
            })
            .map(|t| {
                format!(
                    "{} underlies {}, a tunnel with an IPv6 outer header",
                    d.name, t.name
                )
            })
    };
    let Some(role) = role else { return };
    let mut changes = Vec::new();
    let mut words = Vec::new();
    for (knob, v, v4knob, v4) in [
        (
            "gso_max_size",
            d.gso_max_size,
            "gso_ipv4_max_size",
            d.gso_ipv4_max_size,
        ),
        (
            "gro_max_size",
            d.gro_max_size,
            "gro_ipv4_max_size",
            d.gro_ipv4_max_size,
        ),
    ] {
        if big(v) {
            changes.push(Change {
                knob: format!("{}:{knob}", d.name),
                value: LEGACY_MAX_SIZE.to_string(),
                host: ctx.host.host_namespace,
            });
            words.push(format!("{knob} {LEGACY_MAX_SIZE}"));
            // 65536 on the IPv6 knob also resets the IPv4 one: put IPv4
            // BIG TCP back, which tunnels over IPv6 do not use.
            if let Some(v4) = v4.filter(|&v| v > LEGACY_MAX_SIZE) {
                changes.push(Change {
                    knob: format!("{}:{v4knob}", d.name),
                    value: v4.to_string(),
                    host: ctx.host.host_namespace,
                });
            }
        }
    }
    let ipv4 = changes.iter().any(|c| c.knob.contains("ipv4"));
    let fix = format!(
        "{} (keep 65536 on devices that carry IPv6-outer tunnels), or move the tunnel to an IPv4 underlay, \
         or run a kernel that stops or merges these tunnels correctly (6.18.47+, 6.12.106+, 7.0+)",
        if ipv4 {
            ctx.tune_command(&changes)
        } else {
            format!("ip link set dev {} {}", d.name, words.join(" "))
        }
    );
    out.push(Draft {
        rank: 0,
        severity: Severity::High,
        kind: "big-tcp-ipv6-outer-tunnel",
        device: Some(d.name.clone()),
        title: format!(
            "BIG TCP on {} with an IPv6-outer tunnel on kernel line {line}: merged packets past 64 KiB are lost",
            d.name
        ),
        detail: format!(
            "{role}, and {} has gro_max_size {} / gso_max_size {}: on kernel {} (line {line}) GRO of an \
             IPv6-outer tunnel (ip6ip6, ip4ip6, ip6gre, VXLAN/Geneve over IPv6) that merges past 64 KiB \
             inserts a jumbo Hop-by-Hop header in ipv6_gro_complete (net/ipv6/ip6_offload.c) over the \
             tunnel's own header: the packet is lost with a WARNING (ip6ip6, ip4ip6, ip6gre) or delivered \
             mangled (VXLAN, Geneve); 7.0 dropped the Hop-by-Hop header (81be30c1f5f2), and the stable fix \
             \"net: gro: properly validate BIG TCP aggregation criteria\" (6.6.154, 6.12.106, 6.18.47) stops \
             tunnels at 64 KiB",
            d.name,
            d.gro_max_size.map_or("-".into(), |v| v.to_string()),
            d.gso_max_size.map_or("-".into(), |v| v.to_string()),
            ctx.host.kernel,
        ),
        fix,
        changes,
        kernel: Some("6.3 to 6.19 without the stable fix (6.6.154, 6.12.106, 6.18.47): measured on 6.18.44; the 6.1.y and 6.12.117 guests stop tunnels at 64 KiB"),
    });
}

/// One sysfs change per RX queue of `d`: `queues/rx-N/<file>` set to `value`.
fn rx_queue_changes(d: &DeviceState, file: &str, value: &str, host: bool) -> Vec<Change> {
    d.queues
        .rx_queues
        .iter()
        .map(|q| Change {
            knob: format!("{}:sysfs:queues/rx-{}/{file}", d.name, q.index),
            value: value.to_string(),
            host,
        })
        .collect()
}

/// Parses a CPU list (`0-3,6`) into CPU numbers.
pub fn cpu_list(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b.min(a + 4096));
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

/// CPUs set in a sysfs mask (`00000000,0000000f`).
pub fn mask_cpus(mask: &str) -> Vec<u32> {
    let hex: String = mask.chars().filter(|c| *c != ',').collect();
    let mut out = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let v = c.to_digit(16).unwrap_or(0);
        for b in 0..4 {
            if v & (1 << b) != 0 {
                out.push((i * 4 + b) as u32);
            }
        }
    }
    out
}

/// A hex mask of CPUs `0..n`, as sysfs takes it.
fn all_cpus_mask(n: usize) -> String {
    let n = n.clamp(1, 1024);
    let mut digits = Vec::new();
    let mut left = n;
    while left > 0 {
        let bits = left.min(4);
        digits.push(char::from_digit((1u32 << bits) - 1, 16).unwrap_or('f'));
        left -= bits;
    }
    digits.iter().rev().collect()
}

/// RX queues against CPUs, RPS, RSS and IRQ spread of a NIC.
fn queues_and_spread(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    let cpus = ctx.host.cpus;
    if !d.physical || cpus < 2 {
        return;
    }
    let rxq = d.queues.rx as usize;
    let rps_cover: std::collections::BTreeSet<u32> = d
        .queues
        .rx_queues
        .iter()
        .filter_map(|q| q.rps_cpus.as_deref())
        .flat_map(mask_cpus)
        .collect();
    let irq_cover: std::collections::BTreeSet<u32> = d
        .queues
        .rx_queues
        .iter()
        .filter_map(|q| q.irq_cpus.as_deref())
        .flat_map(cpu_list)
        .collect();
    if rxq < cpus && rps_cover.len() < cpus {
        let mask = all_cpus_mask(cpus);
        let changes = rx_queue_changes(d, "rps_cpus", &mask, ctx.host.host_namespace);
        let mut fix = d
            .queues
            .rx_queues
            .iter()
            .map(|q| {
                format!(
                    "echo {mask} > /sys/class/net/{}/queues/rx-{}/rps_cpus",
                    d.name, q.index
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        if let Some(ch) = d
            .queues
            .channels
            .filter(|c| c.max_combined > c.combined && c.combined > 0)
        {
            fix = format!(
                "ethtool -L {} combined {} (more queues, spread by RSS), or RPS: {fix}",
                d.name,
                ch.max_combined.min(cpus as u32)
            );
        }
        out.push(Draft {
            rank: 0,
            severity: Severity::Medium,
            kind: "rx-queues-fewer-than-cpus",
            device: Some(d.name.clone()),
            title: format!(
                "{} has {rxq} RX queue{} for {cpus} CPUs, and RPS covers {} of them",
                d.name,
                if rxq == 1 { "" } else { "s" },
                rps_cover.len()
            ),
            detail: format!(
                "receive processing of {} (GRO included) runs only on the CPUs its {rxq} queue IRQ{} land on \
                 ({}); RPS (rps_cpus) would hand packets on to the other CPUs",
                d.name,
                if rxq == 1 { "" } else { "s" },
                if irq_cover.is_empty() {
                    "unknown".to_string()
                } else {
                    irq_cover.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
                }
            ),
            fix,
            changes,
            kernel: None,
        });
    }
    // Every queue IRQ on one CPU.
    let eff: Vec<&str> = d
        .irqs
        .iter()
        .map(|i| i.effective_affinity.as_deref().unwrap_or(&i.affinity))
        .collect();
    let queue_irqs: Vec<u32> = d.queues.rx_queues.iter().filter_map(|q| q.irq).collect();
    if queue_irqs.len() > 1 && irq_cover.len() == 1 {
        let cpu = irq_cover.iter().next().copied().unwrap_or(0);
        let changes: Vec<Change> = queue_irqs
            .iter()
            .enumerate()
            .map(|(n, irq)| Change {
                knob: format!("irq:{irq}"),
                value: (n % cpus).to_string(),
                host: true,
            })
            .collect();
        out.push(Draft {
            rank: 0,
            severity: Severity::Medium,
            kind: "irqs-one-cpu",
            device: Some(d.name.clone()),
            title: format!("every RX queue IRQ of {} runs on CPU {cpu}", d.name),
            detail: format!(
                "{} RX queue interrupts ({}) all run on CPU {cpu}: the queues cannot spread",
                queue_irqs.len(),
                queue_irqs
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix: queue_irqs
                .iter()
                .enumerate()
                .map(|(n, irq)| format!("echo {} > /proc/irq/{irq}/smp_affinity_list", n % cpus))
                .collect::<Vec<_>>()
                .join("; "),
            changes,
            kernel: None,
        });
    } else if queue_irqs.len() > 1 {
        // Measured skew: the queue IRQs' interrupts over the window, by CPU.
        let mut per_cpu = vec![0u64; cpus];
        for irq in &queue_irqs {
            if let Some(counts) = ctx.window.irqs.get(irq) {
                for (c, n) in counts.iter().enumerate() {
                    if c < per_cpu.len() {
                        per_cpu[c] += n;
                    }
                }
            }
        }
        let total: u64 = per_cpu.iter().sum();
        let (top, max) = per_cpu
            .iter()
            .enumerate()
            .max_by_key(|(_, n)| **n)
            .map_or((0, 0), |(c, n)| (c, *n));
        if total >= 1000 && max as f64 > 0.75 * total as f64 {
            out.push(Draft {
                rank: 0,
                severity: Severity::Medium,
                kind: "irq-skew",
                device: Some(d.name.clone()),
                title: format!(
                    "{:.0} % of {}'s RX interrupts ran on CPU {top} over {:.1} s",
                    100.0 * max as f64 / total as f64,
                    d.name,
                    ctx.window.seconds
                ),
                detail: format!(
                    "RX queue IRQs {} took {total} interrupts in the window, {max} of them on CPU {top} \
                     (per CPU: {}): one CPU does most of the receive work",
                    queue_irqs.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
                    per_cpu.iter().enumerate().map(|(c, n)| format!("cpu{c} {n}")).collect::<Vec<_>>().join(", ")
                ),
                fix: format!(
                    "spread the affinities: {}; or check the RSS indirection table (ethtool -x {})",
                    queue_irqs
                        .iter()
                        .enumerate()
                        .map(|(n, irq)| format!("echo {} > /proc/irq/{irq}/smp_affinity_list", n % cpus))
                        .collect::<Vec<_>>()
                        .join("; "),
                    d.name
                ),
                changes: queue_irqs
                    .iter()
                    .enumerate()
                    .map(|(n, irq)| Change {
                        knob: format!("irq:{irq}"),
                        value: (n % cpus).to_string(),
                        host: true,
                    })
                    .collect(),
                kernel: None,
            });
        }
    }
    let _ = eff;
    // RSS: a table that leaves queues out or weights them unevenly.
    if let Some(rss) = d.rss.as_ref().filter(|r| !r.indirection.is_empty()) {
        let queues = rss_queue_count(d);
        if queues > 1 {
            let mut per_q = vec![0usize; queues];
            for &q in &rss.indirection {
                if (q as usize) < queues {
                    per_q[q as usize] += 1;
                }
            }
            let max = per_q.iter().copied().max().unwrap_or(0);
            let min = per_q.iter().copied().min().unwrap_or(0);
            if min == 0 || max > 2 * min {
                out.push(Draft {
                    rank: 0,
                    severity: Severity::Medium,
                    kind: "rss-skew",
                    device: Some(d.name.clone()),
                    title: format!(
                        "the RSS table of {} spreads flows unevenly over its {queues} queues",
                        d.name
                    ),
                    detail: format!(
                        "indirection table of {} entries: per queue {}",
                        rss.indirection.len(),
                        per_q
                            .iter()
                            .enumerate()
                            .map(|(q, n)| format!("rx-{q} {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    fix: format!("ethtool -X {} equal {queues}", d.name),
                    changes: Vec::new(),
                    kernel: None,
                });
            }
        }
    }
}

fn rss_queue_count(d: &DeviceState) -> usize {
    match d.queues.channels {
        Some(c) if c.combined + c.rx > 0 => (c.combined + c.rx) as usize,
        _ => d.queues.rx as usize,
    }
}

/// RFS needs both halves: the global socket flow table
/// (`net.core.rps_sock_flow_entries`) and per-queue flow counts
/// (`rps_flow_cnt`); either alone steers nothing (`get_rps_cpu`,
/// net/core/dev.c).
fn rfs(ctx: &Ctx, out: &mut Vec<Draft>) {
    let Some(entries) = sysctl_u64(ctx.host, "net.core.rps_sock_flow_entries") else {
        return;
    };
    let with_cnt: Vec<(&DeviceState, u64)> = ctx
        .devices
        .iter()
        .filter(|d| d.name != "lo")
        .filter_map(|d| {
            let n: u64 = d
                .queues
                .rx_queues
                .iter()
                .filter_map(|q| q.rps_flow_cnt)
                .sum();
            (n > 0).then_some((d, n))
        })
        .collect();
    if entries == 0 && !with_cnt.is_empty() {
        let want = with_cnt
            .iter()
            .map(|(_, n)| *n)
            .sum::<u64>()
            .next_power_of_two()
            .max(32768);
        let (fix, changes) =
            ctx.sysctl_fix(&[("net.core.rps_sock_flow_entries", want.to_string())]);
        out.push(Draft {
            rank: 0,
            severity: Severity::Medium,
            kind: "rfs-half-set",
            device: None,
            title: "RFS half set: rps_flow_cnt without rps_sock_flow_entries".into(),
            detail: format!(
                "{} set rps_flow_cnt, but net.core.rps_sock_flow_entries is 0: with no socket flow table \
                 RFS steers nothing (get_rps_cpu, net/core/dev.c)",
                with_cnt.iter().map(|(d, n)| format!("{} ({n})", d.name)).collect::<Vec<_>>().join(", ")
            ),
            fix,
            changes,
            kernel: None,
        });
    }
    if entries > 0 {
        let missing: Vec<&DeviceState> = ctx
            .devices
            .iter()
            .filter(|d| d.physical && d.up && !d.queues.rx_queues.is_empty())
            .filter(|d| {
                d.queues
                    .rx_queues
                    .iter()
                    .all(|q| q.rps_flow_cnt.unwrap_or(0) == 0)
            })
            .collect();
        for d in missing {
            let per = (entries / d.queues.rx_queues.len().max(1) as u64).max(1);
            let changes =
                rx_queue_changes(d, "rps_flow_cnt", &per.to_string(), ctx.host.host_namespace);
            out.push(Draft {
                rank: 0,
                severity: Severity::Medium,
                kind: "rfs-half-set",
                device: Some(d.name.clone()),
                title: format!("RFS half set: rps_sock_flow_entries {entries} but no rps_flow_cnt on {}", d.name),
                detail: format!(
                    "net.core.rps_sock_flow_entries is {entries}, but every RX queue of {} has rps_flow_cnt 0: \
                     its packets are never steered to the consuming CPU",
                    d.name
                ),
                fix: d
                    .queues
                    .rx_queues
                    .iter()
                    .map(|q| format!("echo {per} > /sys/class/net/{}/queues/rx-{}/rps_flow_cnt", d.name, q.index))
                    .collect::<Vec<_>>()
                    .join("; "),
                changes,
                kernel: None,
            });
        }
    }
}

/// Socket-layer drops over the window.
fn socket_drops(ctx: &Ctx, out: &mut Vec<Draft>) {
    let w = ctx.window;
    let rcvbuf = w.snmp("Udp.RcvbufErrors") + w.snmp("Udp6.RcvbufErrors");
    let inerr = w.snmp("Udp.InErrors") + w.snmp("Udp6.InErrors");
    let delivered = w.snmp("Udp.InDatagrams") + w.snmp("Udp6.InDatagrams");
    let sockets = |proto_prefix: &str| -> String {
        let mut v: Vec<_> = w
            .socket_drops
            .iter()
            .filter(|s| s.protocol.starts_with(proto_prefix))
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.drops));
        v.iter()
            .take(5)
            .map(|s| {
                format!(
                    "{} {} ({} drops, inode {})",
                    s.protocol, s.local, s.drops, s.inode
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    if rcvbuf > 0 {
        let rmem_max = sysctl_u64(ctx.host, "net.core.rmem_max").unwrap_or(212_992);
        let want = (rmem_max * 4).max(8 << 20);
        let (fix, changes) = ctx.sysctl_fix(&[
            ("net.core.rmem_max", want.to_string()),
            ("net.core.rmem_default", (want / 2).to_string()),
        ]);
        let per = sockets("udp");
        out.push(Draft {
            rank: 0,
            severity: Severity::High,
            kind: "udp-rcvbuf-drops",
            device: None,
            title: format!(
                "UDP sockets dropped {:.0} datagrams/s for a full receive buffer",
                w.rate(rcvbuf)
            ),
            detail: format!(
                "Udp/Udp6 RcvbufErrors +{rcvbuf} over {:.1} s against +{delivered} delivered: the application \
                 reads slower than datagrams arrive and its buffer (SO_RCVBUF, capped by net.core.rmem_max \
                 = {rmem_max}) overflows{}",
                w.seconds,
                if per.is_empty() { String::new() } else { format!("; sockets: {per}") }
            ),
            fix: format!(
                "{fix}, and have the application ask for a bigger SO_RCVBUF (or read faster: more sockets \
                 with SO_REUSEPORT, UDP GRO with UDP_GRO)"
            ),
            changes,
            kernel: None,
        });
    }
    if inerr > rcvbuf {
        out.push(Draft {
            rank: 0,
            severity: Severity::Medium,
            kind: "udp-in-errors",
            device: None,
            title: format!("{:.0} UDP datagrams/s failed on receive for reasons other than the buffer", w.rate(inerr - rcvbuf)),
            detail: format!(
                "Udp/Udp6 InErrors +{inerr} over {:.1} s, of which RcvbufErrors +{rcvbuf}: the rest are \
                 checksum errors or memory accounting (MemErrors +{})",
                w.seconds,
                w.snmp("Udp.MemErrors") + w.snmp("Udp6.MemErrors")
            ),
            fix: "check Udp InCsumErrors (bad checksums upstream) and net.ipv4.udp_mem".into(),
            changes: Vec::new(),
            kernel: None,
        });
    }
    // Per-socket TCP drops (sock_diag's sk_drops): listeners drop when
    // their accept queue is full (tcp_listendrop), others at receive.
    let tcp_sockets = |listening: bool| -> (u64, String) {
        let mut v: Vec<_> = w
            .socket_drops
            .iter()
            .filter(|s| s.protocol == "tcp" && s.listening == listening)
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.drops));
        let total = v.iter().map(|s| s.drops).sum();
        let shown = v
            .iter()
            .take(5)
            .map(|s| match &s.remote {
                Some(r) => format!("{} -> {} ({} drops)", r, s.local, s.drops),
                None => format!("{} ({} drops)", s.local, s.drops),
            })
            .collect::<Vec<_>>()
            .join("; ");
        (total, shown)
    };
    let (listen_drops, listeners) = tcp_sockets(true);
    if listen_drops > 0 {
        let somaxconn = sysctl_u64(ctx.host, "net.core.somaxconn").unwrap_or(4096);
        let (fix, changes) =
            ctx.sysctl_fix(&[("net.core.somaxconn", (somaxconn * 4).max(4096).to_string())]);
        out.push(Draft {
            rank: 0,
            severity: Severity::High,
            kind: "tcp-listen-drops",
            device: None,
            title: format!(
                "TCP listeners dropped {:.0} connection attempts/s for a full accept queue",
                w.rate(listen_drops)
            ),
            detail: format!(
                "sk_drops of listening sockets +{listen_drops} over {:.1} s (TcpExt ListenDrops +{}): the \
                 application accepts slower than connections complete, so SYNs and final ACKs are dropped \
                 (tcp_conn_request, tcp_v4_syn_recv_sock: tcp_listendrop) and clients wait for a \
                 retransmission (1 s or more); listen() backlogs are capped by net.core.somaxconn = \
                 {somaxconn}; listeners: {listeners}",
                w.seconds,
                w.snmp("TcpExt.ListenDrops"),
            ),
            fix: format!(
                "{fix}, and have the application pass a bigger backlog to listen() (or accept faster)"
            ),
            changes,
            kernel: None,
        });
    }
    let (socket_drops, receivers) = tcp_sockets(false);
    let tcp_drop = w.snmp("TcpExt.TCPRcvQDrop") + w.snmp("TcpExt.TCPBacklogDrop");
    if tcp_drop > 0 || socket_drops > 0 {
        let (fix, changes) = ctx.sysctl_fix(&[(
            "net.core.rmem_max",
            (sysctl_u64(ctx.host, "net.core.rmem_max").unwrap_or(212_992) * 4).to_string(),
        )]);
        out.push(Draft {
            rank: 0,
            severity: Severity::High,
            kind: "tcp-receive-drops",
            device: None,
            title: format!(
                "TCP dropped {:.0} segments/s at the socket",
                w.rate(tcp_drop.max(socket_drops))
            ),
            detail: format!(
                "TcpExt TCPRcvQDrop +{} and TCPBacklogDrop +{} over {:.1} s: segments arrived while the \
                 receive queue or the socket backlog was over its memory limit (tcp_rmem = {}){}",
                w.snmp("TcpExt.TCPRcvQDrop"),
                w.snmp("TcpExt.TCPBacklogDrop"),
                w.seconds,
                ctx.host
                    .sysctls
                    .get("net.ipv4.tcp_rmem")
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| "-".into()),
                if receivers.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; sockets (sk_drops, which also counts segments dropped for other reasons: \
                         out of window, bad checksum): {receivers}"
                    )
                }
            ),
            fix: format!("{fix}, and raise net.ipv4.tcp_rmem's maximum"),
            changes,
            kernel: None,
        });
    }
    let tcp_err = w.snmp("Tcp.InErrs");
    if tcp_err > 0 {
        out.push(Draft {
            rank: 0,
            severity: Severity::Info,
            kind: "tcp-in-errors",
            device: None,
            title: format!("{:.0} TCP segments/s arrived in error", w.rate(tcp_err)),
            detail: format!(
                "Tcp InErrs +{tcp_err} over {:.1} s (bad checksums, or segments dropped in TCP's own checks)",
                w.seconds
            ),
            fix: "check Tcp InCsumErrors and the path for corruption".into(),
            changes: Vec::new(),
            kernel: None,
        });
    }
}

fn per_cpu(softnet: &[SoftnetCpu], f: impl Fn(&SoftnetCpu) -> u64) -> String {
    softnet
        .iter()
        .filter(|c| f(c) > 0)
        .map(|c| format!("cpu{} {}", c.cpu, f(c)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Backlog drops and squeezes, over the window (or since boot, as info,
/// when asked).
fn softnet(ctx: &Ctx, w: &Window, totals: bool, out: &mut Vec<Draft>) {
    let dropped: u64 = w.softnet.iter().map(|c| c.dropped).sum();
    let squeezed: u64 = w.softnet.iter().map(|c| c.time_squeeze).sum();
    let processed: u64 = w.softnet.iter().map(|c| c.processed).sum();
    let over = if totals {
        "since boot".to_string()
    } else {
        format!("over {:.1} s", w.seconds)
    };
    if dropped > 0 {
        let backlog = sysctl_u64(ctx.host, "net.core.netdev_max_backlog").unwrap_or(1000);
        let (fix, changes) = ctx.sysctl_fix(&[(
            "net.core.netdev_max_backlog",
            (backlog * 2).max(2000).to_string(),
        )]);
        out.push(Draft {
            rank: 0,
            severity: if totals { Severity::Info } else { Severity::High },
            kind: if totals { "softnet-drops-since-boot" } else { "softnet-drops" },
            device: None,
            title: if totals {
                format!("{dropped} packets dropped at the backlog since boot, of {processed}")
            } else {
                format!("{:.0} packets/s dropped at the backlog", w.rate(dropped))
            },
            detail: format!(
                "/proc/net/softnet_stat: {dropped} drops of {processed} packets {over} ({}): the per-CPU \
                 backlog exceeded net.core.netdev_max_backlog = {backlog}",
                per_cpu(&w.softnet, |c| c.dropped)
            ),
            fix,
            changes,
            kernel: None,
        });
    }
    if squeezed > 0 && !totals {
        let budget = sysctl_u64(ctx.host, "net.core.netdev_budget").unwrap_or(300);
        let usecs = sysctl_u64(ctx.host, "net.core.netdev_budget_usecs").unwrap_or(2000);
        let (fix, changes) = ctx.sysctl_fix(&[
            ("net.core.netdev_budget", (budget * 2).to_string()),
            ("net.core.netdev_budget_usecs", (usecs * 2).to_string()),
        ]);
        out.push(Draft {
            rank: 0,
            severity: Severity::Info,
            kind: "softnet-time-squeeze",
            device: None,
            title: format!("net_rx_action ran out of budget {:.1} times/s", w.rate(squeezed)),
            detail: format!(
                "/proc/net/softnet_stat time_squeeze +{squeezed} {over} ({}): softirq receive stopped with \
                 work left (netdev_budget = {budget}, netdev_budget_usecs = {usecs}); the rest waits for the \
                 next softirq or ksoftirqd",
                per_cpu(&w.softnet, |c| c.time_squeeze)
            ),
            fix,
            changes,
            kernel: None,
        });
    }
}

/// Receive work measured over the window concentrated on one CPU of
/// several.
fn cpu_skew(ctx: &Ctx, out: &mut Vec<Draft>) {
    let w = ctx.window;
    if ctx.host.cpus < 2 || w.softnet.len() < 2 {
        return;
    }
    let total: u64 = w.softnet.iter().map(|c| c.processed).sum();
    let Some(top) = w.softnet.iter().max_by_key(|c| c.processed) else {
        return;
    };
    // Needs real traffic (10k packets/s) to say anything.
    if w.rate(total) < 10_000.0 || (top.processed as f64) < 0.9 * total as f64 {
        return;
    }
    out.push(Draft {
        rank: 0,
        severity: Severity::Medium,
        kind: "rx-cpu-skew",
        device: None,
        title: format!(
            "{:.0} % of receive processing ran on CPU {} over {:.1} s",
            100.0 * top.processed as f64 / total as f64,
            top.cpu,
            w.seconds
        ),
        detail: format!(
            "softnet processed per CPU in the window: {}: the other CPUs sit idle for receive; spread \
             with more RX queues (RSS), RPS, or IRQ affinity",
            per_cpu(&w.softnet, |c| c.processed)
        ),
        fix: "see the device findings (rx-queues-fewer-than-cpus, irq-skew, rss-skew), or set rps_cpus on the busy device's RX queues".into(),
        changes: Vec::new(),
        kernel: None,
    });
}

/// `gro_flush_timeout` and `napi_defer_hard_irqs`: deferral without a
/// timeout does nothing (`napi_complete_done` re-arms IRQs at once when
/// the timeout is 0, net/core/dev.c).
fn napi_knobs(ctx: &Ctx, d: &DeviceState, out: &mut Vec<Draft>) {
    let defer = d.napi_defer_hard_irqs.unwrap_or(0);
    let timeout = d.gro_flush_timeout.unwrap_or(0);
    if defer > 0 && timeout == 0 {
        let changes = vec![Change {
            knob: format!("{}:sysfs:gro_flush_timeout", d.name),
            value: "20000".into(),
            host: ctx.host.host_namespace,
        }];
        out.push(Draft {
            rank: 0,
            severity: Severity::Medium,
            kind: "napi-defer-without-timeout",
            device: Some(d.name.clone()),
            title: format!("napi_defer_hard_irqs {defer} on {} has no effect: gro_flush_timeout is 0", d.name),
            detail: format!(
                "{} defers {defer} hard IRQs, but napi_complete_done only defers when gro_flush_timeout is \
                 set: interrupts are re-armed at once",
                d.name
            ),
            fix: format!(
                "echo 20000 > /sys/class/net/{}/gro_flush_timeout (or echo 0 > .../napi_defer_hard_irqs)",
                d.name
            ),
            changes,
            kernel: Some("5.10+"),
        });
    } else if timeout > 0 {
        out.push(Draft {
            rank: 0,
            severity: Severity::Info,
            kind: "gro-flush-timeout",
            device: Some(d.name.clone()),
            title: format!("{} holds GRO packets up to {} us past each poll", d.name, timeout / 1000),
            detail: format!(
                "gro_flush_timeout {timeout} ns, napi_defer_hard_irqs {defer}: GRO keeps partial merges and \
                 (with deferral) polls from a timer instead of interrupts; more merging, more latency"
            ),
            fix: format!(
                "none for throughput; for latency: echo 0 > /sys/class/net/{}/gro_flush_timeout",
                d.name
            ),
            changes: Vec::new(),
            kernel: None,
        });
    }
}

fn busy_poll(ctx: &Ctx, out: &mut Vec<Draft>) {
    let read = sysctl_u64(ctx.host, "net.core.busy_read").unwrap_or(0);
    let poll = sysctl_u64(ctx.host, "net.core.busy_poll").unwrap_or(0);
    if read == 0 && poll == 0 {
        return;
    }
    // A NAPI ID reaches a socket only from a device with NAPI: hardware
    // and paravirtual NICs, veth with GRO or XDP on the receiving end
    // (veth_napi_add in drivers/net/veth.c), TUN with IFF_NAPI.
    let napi_capable = ctx
        .devices
        .iter()
        .filter(|d| d.name != "lo" && d.up)
        .any(|d| {
            d.physical
                || (d.kind.as_deref() == Some("veth")
                    && (d.xdp || d.features.get("rx-gro") == Some(&true)))
        });
    if !napi_capable {
        let (fix, changes) = ctx.sysctl_fix(&[
            ("net.core.busy_read", "0".into()),
            ("net.core.busy_poll", "0".into()),
        ]);
        out.push(Draft {
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
            fix: format!("{fix} (or switch GRO on on the receiving veth)"),
            changes,
            kernel: None,
        });
    } else if ctx
        .devices
        .iter()
        .filter(|d| d.physical && d.up)
        .all(|d| d.napi_defer_hard_irqs.unwrap_or(0) == 0)
    {
        out.push(Draft {
            rank: 0,
            severity: Severity::Info,
            kind: "busy-poll-with-irqs",
            device: None,
            title: format!("busy polling on (busy_read {read}, busy_poll {poll}) while interrupts stay armed"),
            detail: "sockets spin on the NAPI, but the device still raises an interrupt per batch and the \
                     softirq races the spinning thread for the same queue; with napi_defer_hard_irqs and \
                     gro_flush_timeout (or SO_PREFER_BUSY_POLL) the polling thread owns the queue"
                .into(),
            fix: "per NIC: echo 2 > /sys/class/net/DEV/napi_defer_hard_irqs; echo 200000 > /sys/class/net/DEV/gro_flush_timeout".into(),
            changes: Vec::new(),
            kernel: None,
        });
    }
}

/// `mask_is_zero`, for the rules here.
pub fn rps_off(mask: Option<&str>) -> bool {
    mask.is_none_or(mask_is_zero)
}
