//! `offload tune`: apply a finding's fix or a named profile, and revert it
//! exactly.
//!
//! Every knob is read and written through the kernel's own interfaces, so
//! the installed iproute2 and ethtool do not matter: rtnetlink for the
//! GRO/GSO size knobs ([`offload_sys::rtnl`]), the ethtool ioctls for features,
//! rings and coalescing ([`offload_sys::ethtool`]), a sysfs mounted for the target
//! namespace ([`offload_sys::sysfs::Sysfs`]) for per-device and per-queue knobs,
//! `/proc/sys` for sysctls and `/proc/irq` for IRQ affinity.
//!
//! Safety rules:
//! - nothing changes without `apply`; a [`Plan`] says what would;
//! - the target is a namespace (`--netns`); the host's own namespace, the
//!   host-only sysctls (which exist only in the initial namespace) and IRQ
//!   affinities need `host: true` (`--host`);
//! - before changing anything, the previous value of every knob goes to a
//!   state file created private (0600) and exclusive (`O_EXCL`,
//!   `O_NOFOLLOW`); [`revert`] puts every value back and removes it. A
//!   device's features are recorded whole (the requested state of each
//!   changeable feature), since switching one can switch others.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use offload_sys::error::{Error, Result};
use offload_sys::ethtool::Ethtool;
use offload_sys::rtnl::Rtnl;
use offload_sys::sysfs::Sysfs;

/// One knob `offload tune` can set, parsed from `--set KNOB=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Knob {
    /// `DEV:gro_max_size`, `DEV:gso_max_size`, `DEV:gro_ipv4_max_size`,
    /// `DEV:gso_ipv4_max_size` (rtnetlink).
    Link {
        /// Device.
        dev: String,
        /// Attribute name.
        attr: String,
    },
    /// `DEV:feature:NAME` = `on`/`off` (ethtool features, kernel names).
    Feature {
        /// Device.
        dev: String,
        /// Kernel feature name (`rx-gro`, `rx-udp-gro-forwarding`).
        name: String,
    },
    /// `DEV:sysfs:REL` under `/sys/class/net/DEV/` (`gro_flush_timeout`,
    /// `napi_defer_hard_irqs`, `queues/rx-0/rps_cpus`, ...).
    Sysfs {
        /// Device.
        dev: String,
        /// Path below the device's directory.
        rel: String,
    },
    /// `DEV:ring:rx` / `DEV:ring:tx` (`ethtool -G`).
    Ring {
        /// Device.
        dev: String,
        /// `rx` or `tx`.
        which: String,
    },
    /// `DEV:coalesce:FIELD` (`ethtool -C`, `ethtool -c`'s field names).
    Coalesce {
        /// Device.
        dev: String,
        /// Field, e.g. `rx-usecs`, `adaptive-rx`.
        field: String,
    },
    /// `sysctl:KEY` (dotted, e.g. `net.core.busy_read`).
    Sysctl {
        /// Dotted key.
        key: String,
    },
    /// `irq:N`: `/proc/irq/N/smp_affinity_list` (host only).
    Irq {
        /// IRQ number.
        irq: u32,
    },
}

const LINK_ATTRS: [&str; 4] = [
    "gso_max_size",
    "gro_max_size",
    "gso_ipv4_max_size",
    "gro_ipv4_max_size",
];

impl Knob {
    /// Parses the `--set` syntax (without `=VALUE`).
    pub fn parse(s: &str) -> Result<Knob> {
        let bad = |why: &str| Error::Sys {
            op: format!("knob {s:?}: {why}"),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        };
        if let Some(key) = s.strip_prefix("sysctl:") {
            if key.is_empty()
                || key.contains("..")
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            {
                return Err(bad("not a sysctl key"));
            }
            return Ok(Knob::Sysctl { key: key.into() });
        }
        if let Some(n) = s.strip_prefix("irq:") {
            return n
                .parse()
                .map(|irq| Knob::Irq { irq })
                .map_err(|_| bad("not an IRQ number"));
        }
        let (dev, rest) = s
            .split_once(':')
            .ok_or_else(|| bad("expected DEV:KNOB, sysctl:KEY or irq:N"))?;
        offload_sys::rtnl::check_ifname(dev)?;
        let dev = dev.to_string();
        if LINK_ATTRS.contains(&rest) {
            return Ok(Knob::Link {
                dev,
                attr: rest.into(),
            });
        }
        let (what, arg) = rest
            .split_once(':')
            .ok_or_else(|| bad("unknown device knob"))?;
        let clean = |a: &str| {
            !a.is_empty()
                && !a.contains("..")
                && !a.starts_with('/')
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/_-.".contains(c))
        };
        if !clean(arg) {
            return Err(bad("bad name"));
        }
        Ok(match what {
            "feature" => Knob::Feature {
                dev,
                name: arg.into(),
            },
            "sysfs" => Knob::Sysfs {
                dev,
                rel: arg.into(),
            },
            "ring" if arg == "rx" || arg == "tx" => Knob::Ring {
                dev,
                which: arg.into(),
            },
            "coalesce" if offload_sys::ethtool::COALESCE_FIELDS.contains(&arg) => Knob::Coalesce {
                dev,
                field: arg.into(),
            },
            _ => return Err(bad("unknown device knob")),
        })
    }

    /// The `--set` spelling.
    pub fn spec(&self) -> String {
        match self {
            Knob::Link { dev, attr } => format!("{dev}:{attr}"),
            Knob::Feature { dev, name } => format!("{dev}:feature:{name}"),
            Knob::Sysfs { dev, rel } => format!("{dev}:sysfs:{rel}"),
            Knob::Ring { dev, which } => format!("{dev}:ring:{which}"),
            Knob::Coalesce { dev, field } => format!("{dev}:coalesce:{field}"),
            Knob::Sysctl { key } => format!("sysctl:{key}"),
            Knob::Irq { irq } => format!("irq:{irq}"),
        }
    }

    /// Whether the knob belongs to the host rather than a namespace: IRQ
    /// affinity, and sysctls this namespace does not have.
    fn host_only(&self, ns: &Target) -> bool {
        match self {
            Knob::Irq { .. } => true,
            Knob::Sysctl { key } => ns
                .run(|| Ok(offload_sys::sysfs::read_sysctl(&key.replace('.', "/")).is_err()))
                .unwrap_or(true),
            _ => false,
        }
    }
}

/// Where the knobs are.
#[derive(Debug)]
pub struct Target {
    /// `None`: the caller's own namespace.
    ns: Option<std::fs::File>,
    /// How the user named it (`host`, a netns name, a path).
    pub name: String,
}

impl Target {
    /// The namespace `--netns NAME` names: `/run/netns/NAME` (as `ip netns`
    /// makes them), or a path such as `/proc/PID/ns/net`.
    pub fn netns(name: &str) -> Result<Target> {
        let path = if name.contains('/') {
            PathBuf::from(name)
        } else {
            if name.is_empty() || name.starts_with('.') {
                return Err(Error::NoDevice(name.into()));
            }
            Path::new("/run/netns").join(name)
        };
        let f = std::fs::File::open(&path)
            .map_err(|e| Error::sys(format!("open network namespace {}", path.display()), e))?;
        Ok(Target {
            ns: Some(f),
            name: name.into(),
        })
    }

    /// The caller's own namespace.
    pub fn current() -> Target {
        Target {
            ns: None,
            name: "current".into(),
        }
    }

    /// Whether the target is the host's (initial) namespace, as far as can
    /// be seen ([`super::open_initial_net_ns`]).
    pub fn is_host_namespace(&self) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let ino = match &self.ns {
            Some(f) => f
                .metadata()
                .map_err(|e| Error::sys("fstat netns", e))?
                .ino(),
            None => std::fs::metadata("/proc/thread-self/ns/net")
                .map_err(|e| Error::sys("stat /proc/thread-self/ns/net", e))?
                .ino(),
        };
        let host = match super::open_initial_net_ns() {
            Some(f) => f
                .metadata()
                .map_err(|e| Error::sys("fstat netns", e))?
                .ino(),
            None => std::fs::metadata("/proc/self/ns/net")
                .map_err(|e| Error::sys("stat /proc/self/ns/net", e))?
                .ino(),
        };
        Ok(ino == host)
    }

    /// Runs `f` in the target namespace (on a helper thread when it is not
    /// the caller's).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
        match &self.ns {
            None => f(),
            Some(file) => std::thread::scope(|s| {
                s.spawn(|| {
                    rustix::thread::move_into_link_name_space(
                        std::os::fd::AsFd::as_fd(file),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .map_err(|e| Error::sys("setns(CLONE_NEWNET)", e.into()))?;
                    f()
                })
                .join()
                .map_err(|_| Error::ThreadPanicked("tune namespace thread".into()))?
            }),
        }
    }

    /// Runs `f` in the host's namespace (for host-only sysctls).
    fn run_host<R: Send>(&self, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
        match super::open_initial_net_ns() {
            None => f(),
            Some(file) => std::thread::scope(|s| {
                s.spawn(|| {
                    rustix::thread::move_into_link_name_space(
                        std::os::fd::AsFd::as_fd(&file),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .map_err(|e| Error::sys("setns(CLONE_NEWNET) host", e.into()))?;
                    f()
                })
                .join()
                .map_err(|_| Error::ThreadPanicked("tune host thread".into()))?
            }),
        }
    }
}

/// One change: a knob, its value now and the value wanted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The knob.
    pub knob: Knob,
    /// Its value before (as read).
    pub before: String,
    /// The value to set.
    pub after: String,
    /// Belongs to the host (needs `--host`).
    pub host: bool,
}

/// What `tune` would change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The target's name.
    pub target: String,
    /// The changes, in the order they are applied (knobs already at the
    /// wanted value are left out).
    pub steps: Vec<Step>,
    /// Knobs of a profile this device does not have, with why.
    pub skipped: Vec<String>,
}

/// The state file: the plan applied, and every device's feature requests
/// before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The target, as given.
    pub target: String,
    /// The steps applied, in order.
    pub steps: Vec<Step>,
    /// Per device touched through features: the requested state of every
    /// changeable feature before.
    pub features_before: BTreeMap<String, BTreeMap<String, bool>>,
}

/// Normalises a value for comparison: CPU masks and lists as CPU sets,
/// `on`/`off` as booleans, numbers as numbers.
fn same(knob: &Knob, a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    match knob {
        Knob::Sysfs { rel, .. } if rel.ends_with("_cpus") => {
            super::findings::mask_cpus(a) == super::findings::mask_cpus(b)
        }
        Knob::Irq { .. } => super::findings::cpu_list(a) == super::findings::cpu_list(b),
        Knob::Sysctl { .. } => {
            a.split_whitespace().collect::<Vec<_>>() == b.split_whitespace().collect::<Vec<_>>()
        }
        _ => a == b,
    }
}

/// Reads a knob's current value (in the thread's namespace; host-only
/// ones through `target`).
fn read(knob: &Knob) -> Result<String> {
    match knob {
        Knob::Link { dev, attr } => {
            let l = Rtnl::open()?.link_by_name(dev)?;
            let v = match attr.as_str() {
                "gso_max_size" => l.gso_max_size,
                "gro_max_size" => l.gro_max_size,
                "gso_ipv4_max_size" => l.gso_ipv4_max_size,
                _ => l.gro_ipv4_max_size,
            };
            v.map(|v| v.to_string()).ok_or_else(|| Error::NoFeature {
                dev: dev.clone(),
                feature: attr.clone(),
            })
        }
        Knob::Feature { dev, name } => {
            let f = Ethtool::open()?.features(dev)?;
            let f = f
                .iter()
                .find(|f| &f.name == name)
                .ok_or_else(|| Error::NoFeature {
                    dev: dev.clone(),
                    feature: name.clone(),
                })?;
            Ok(if f.active { "on" } else { "off" }.into())
        }
        Knob::Sysfs { dev, rel } => Sysfs::mount_here()?.net_attr(dev, rel),
        Knob::Ring { dev, which } => {
            let r = Ethtool::open()?.rings(dev)?;
            Ok(if which == "rx" { r.rx } else { r.tx }.to_string())
        }
        Knob::Coalesce { dev, field } => Ethtool::open()?
            .coalesce(dev)?
            .get(field)
            .map(|v| v.to_string())
            .ok_or_else(|| Error::NoFeature {
                dev: dev.clone(),
                feature: field.clone(),
            }),
        Knob::Sysctl { key } => offload_sys::sysfs::read_sysctl(&key.replace('.', "/")),
        Knob::Irq { irq } => std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list"))
            .map(|s| s.trim().to_string())
            .map_err(|e| Error::sys(format!("read /proc/irq/{irq}/smp_affinity_list"), e)),
    }
}

/// Writes a knob (in the thread's namespace).
fn write(knob: &Knob, value: &str) -> Result<()> {
    let num = |v: &str| -> Result<u32> {
        v.trim().parse().map_err(|_| Error::Sys {
            op: format!("{}: {v:?} is not a number", knob.spec()),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })
    };
    match knob {
        Knob::Link { dev, attr } => {
            let mut rtnl = Rtnl::open()?;
            let i = rtnl.link_by_name(dev)?.index;
            let v = num(value)?;
            match attr.as_str() {
                "gso_max_size" => rtnl.set_gso_max_size(i, v),
                "gro_max_size" => rtnl.set_gro_max_size(i, v),
                "gso_ipv4_max_size" => rtnl.set_gso_ipv4_max_size(i, v),
                _ => rtnl.set_gro_ipv4_max_size(i, v),
            }
        }
        Knob::Feature { dev, name } => {
            let on = match value {
                "on" => true,
                "off" => false,
                _ => {
                    return Err(Error::Sys {
                        op: format!("{}: {value:?} is not on/off", knob.spec()),
                        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
                    })
                }
            };
            Ethtool::open()?.set_feature(dev, name, on)
        }
        Knob::Sysfs { dev, rel } => {
            let s = Sysfs::mount_here()?;
            offload_sys::rtnl::check_ifname(dev)?;
            s.write(&format!("class/net/{dev}/{rel}"), value)
        }
        Knob::Ring { dev, which } => {
            let e = Ethtool::open()?;
            let r = e.rings(dev)?;
            let v = num(value)?;
            if which == "rx" {
                e.set_rings(dev, v, r.tx)
            } else {
                e.set_rings(dev, r.rx, v)
            }
        }
        Knob::Coalesce { dev, field } => Ethtool::open()?.set_coalesce(dev, field, num(value)?),
        Knob::Sysctl { key } => offload_sys::sysfs::write_sysctl(&key.replace('.', "/"), value),
        Knob::Irq { irq } => std::fs::write(format!("/proc/irq/{irq}/smp_affinity_list"), value)
            .map_err(|e| {
                Error::sys(
                    format!("write {value:?} to /proc/irq/{irq}/smp_affinity_list"),
                    e,
                )
            }),
    }
}

/// Runs a read or write in the right place: host-only knobs in the host's
/// namespace, the rest in the target's.
fn at<R: Send>(target: &Target, host: bool, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    if host {
        target.run_host(f)
    } else {
        target.run(f)
    }
}

/// The named profiles.
pub const PROFILES: [&str; 3] = ["throughput", "latency", "packet-rate"];

/// The knobs of profile `name` for device `dev`, from published tuning
/// steps: the kernel's BIG TCP and GRO documentation
/// (Documentation/networking/ip-sysctl.rst, `gro_flush_timeout` and
/// `napi_defer_hard_irqs` in Documentation/networking/napi.rst),
/// Documentation/networking/scaling.rst for RPS/RFS, and the busy-polling
/// guidance of napi.rst.
fn profile(name: &str, dev: &str, cpus: usize, rx_queues: &[u32]) -> Result<Vec<(Knob, String)>> {
    let d = |k: &str| Knob::parse(&format!("{dev}:{k}"));
    let mut out = Vec::new();
    match name {
        "throughput" => {
            out.push((d("feature:rx-gro")?, "on".into()));
            for a in LINK_ATTRS {
                out.push((d(a)?, "185000".into()));
            }
            out.push((d("ring:rx")?, "max".into()));
            out.push((d("ring:tx")?, "max".into()));
            out.push((d("sysfs:gro_flush_timeout")?, "20000".into()));
            out.push((d("sysfs:napi_defer_hard_irqs")?, "1".into()));
        }
        "latency" => {
            out.push((d("sysfs:gro_flush_timeout")?, "0".into()));
            out.push((d("sysfs:napi_defer_hard_irqs")?, "0".into()));
            out.push((d("coalesce:adaptive-rx")?, "0".into()));
            out.push((d("coalesce:rx-usecs")?, "0".into()));
            out.push((Knob::parse("sysctl:net.core.busy_read")?, "50".into()));
            out.push((Knob::parse("sysctl:net.core.busy_poll")?, "50".into()));
        }
        "packet-rate" => {
            out.push((d("feature:rx-gro")?, "on".into()));
            out.push((d("ring:rx")?, "max".into()));
            let mask = {
                let n = cpus.clamp(1, 64);
                format!("{:x}", if n == 64 { u64::MAX } else { (1u64 << n) - 1 })
            };
            for q in rx_queues {
                out.push((d(&format!("sysfs:queues/rx-{q}/rps_cpus"))?, mask.clone()));
                out.push((
                    d(&format!("sysfs:queues/rx-{q}/rps_flow_cnt"))?,
                    "4096".into(),
                ));
            }
            out.push((
                Knob::parse("sysctl:net.core.rps_sock_flow_entries")?,
                "32768".into(),
            ));
            out.push((Knob::parse("sysctl:net.core.netdev_budget")?, "600".into()));
            out.push((
                Knob::parse("sysctl:net.core.netdev_max_backlog")?,
                "5000".into(),
            ));
        }
        _ => {
            return Err(Error::Sys {
                op: format!(
                    "profile {name:?}: known profiles are {}",
                    PROFILES.join(", ")
                ),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            })
        }
    }
    Ok(out)
}

/// Builds the plan for `sets` (explicit knobs) plus profile `profile` on
/// `devices`, reading each knob's current value in the target. Knobs
/// already at their value are left out; a profile's knobs a device does
/// not have are listed in `skipped`.
pub fn plan(
    target: &Target,
    sets: &[(Knob, String)],
    profile_name: Option<&str>,
    devices: &[String],
) -> Result<Plan> {
    let mut wanted: Vec<(Knob, String, bool)> = sets
        .iter()
        .map(|(k, v)| (k.clone(), v.clone(), true))
        .collect();
    if let Some(p) = profile_name {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for dev in devices {
            let dev2 = dev.clone();
            let queues: Vec<u32> = target.run(move || {
                let s = Sysfs::mount_here()?;
                offload_sys::rtnl::check_ifname(&dev2)?;
                Ok(s.list(&format!("class/net/{dev2}/queues"))
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|n| n.strip_prefix("rx-").and_then(|q| q.parse().ok()))
                    .collect())
            })?;
            for (k, v) in profile(p, dev, cpus, &queues)? {
                // Host sysctls once, not per device.
                if !wanted.iter().any(|(w, _, _)| *w == k) {
                    wanted.push((k, v, false));
                }
            }
        }
    }
    let mut steps = Vec::new();
    let mut skipped = Vec::new();
    let mut unchanged_ipv4 = Vec::new();
    for (knob, value, explicit) in wanted {
        let host = knob.host_only(target);
        let k2 = knob.clone();
        let before = match at(target, host, move || read(&k2)) {
            Ok(v) => v,
            Err(e) if !explicit => {
                skipped.push(format!("{}: {e}", knob.spec()));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut value = value;
        if value == "max" {
            if let Knob::Ring { dev, which } = &knob {
                let dev = dev.clone();
                let r = target.run(move || Ethtool::open()?.rings(&dev))?;
                value = if which == "rx" { r.rx_max } else { r.tx_max }.to_string();
            }
        }
        // A profile's size knobs stay within what the driver takes.
        if let (Knob::Link { dev, attr }, false) = (&knob, explicit) {
            let dev = dev.clone();
            let l = target.run(move || Rtnl::open()?.link_by_name(&dev))?;
            if attr.starts_with("gso") {
                if let (Some(tso), Ok(v)) = (l.tso_max_size, value.parse::<u32>()) {
                    value = v.min(tso).to_string();
                }
            }
            if attr.contains("ipv4") && l.gro_ipv4_max_size.is_none() {
                skipped.push(format!(
                    "{}: this kernel has no IPv4 BIG TCP knobs (6.3+)",
                    knob.spec()
                ));
                continue;
            }
        }
        if same(&knob, &before, &value) {
            if matches!(&knob, Knob::Link { attr, .. } if attr.contains("ipv4")) {
                unchanged_ipv4.push(Step {
                    knob,
                    before,
                    after: value,
                    host,
                });
            }
            continue;
        }
        steps.push(Step {
            knob,
            before,
            after: value,
            host,
        });
    }
    // An IPv4 size knob already at its value still needs its step when the
    // plan sets the same device's IPv6 knob: a value <= 64 KiB there
    // overwrites the IPv4 one (netif_set_gro_max_size, net/core/dev.c).
    for s in unchanged_ipv4 {
        let Knob::Link { dev, attr } = &s.knob else {
            continue;
        };
        let ipv6 = attr.replace("_ipv4", "");
        if steps
            .iter()
            .any(|t| matches!(&t.knob, Knob::Link { dev: d, attr: a } if d == dev && *a == ipv6))
        {
            steps.push(s);
        }
    }
    // IPv6 size knobs before IPv4 ones: a value <= 64 KiB on the IPv6 knob
    // overwrites the IPv4 one (netif_set_gso_max_size).
    steps.sort_by_key(|s| match &s.knob {
        Knob::Link { attr, .. } if attr.contains("ipv4") => 1,
        _ => 0,
    });
    Ok(Plan {
        target: target.name.clone(),
        steps,
        skipped,
    })
}

/// Refuses a plan that would change the host without `host`.
pub fn check_allowed(target: &Target, plan: &Plan, host: bool) -> Result<()> {
    if host {
        return Ok(());
    }
    let refuse = |what: String| Error::Sys {
        op: format!("{what}: nothing changed; add --host to change the host"),
        source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    };
    if let Some(s) = plan.steps.iter().find(|s| s.host) {
        return Err(refuse(format!(
            "{} belongs to the host (initial namespace or IRQs)",
            s.knob.spec()
        )));
    }
    if !plan.steps.is_empty() && target.is_host_namespace()? {
        return Err(refuse(format!(
            "the target ({}) is the host's own network namespace",
            target.name
        )));
    }
    Ok(())
}

/// Creates the state file: private, exclusive, never through a symlink.
fn create_state(path: &Path, state: &State) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::sys(format!("create {}", dir.display()), e))?;
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            Error::sys(
                format!(
                    "create state file {} (an earlier tune not reverted? run --revert first)",
                    path.display()
                ),
                e,
            )
        })?;
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| Error::sys("encode state", std::io::Error::other(e)))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::sys(format!("write state file {}", path.display()), e))
}

/// Applies `plan` after recording every previous value in the state file
/// at `state_path`. On a failure, what was applied is put back and the
/// state file removed.
pub fn apply(target: &Target, plan: &Plan, state_path: &Path) -> Result<()> {
    let mut features_before = BTreeMap::new();
    for s in &plan.steps {
        if let Knob::Feature { dev, .. } = &s.knob {
            if !features_before.contains_key(dev) {
                let d = dev.clone();
                let list = target.run(move || Ethtool::open()?.features(&d))?;
                features_before.insert(
                    dev.clone(),
                    list.iter()
                        .filter(|f| !f.name.is_empty() && !f.fixed())
                        .map(|f| (f.name.clone(), f.requested))
                        .collect::<BTreeMap<_, _>>(),
                );
            }
        }
    }
    let state = State {
        target: plan.target.clone(),
        steps: plan.steps.clone(),
        features_before,
    };
    create_state(state_path, &state)?;
    for (i, s) in plan.steps.iter().enumerate() {
        let (k, v) = (s.knob.clone(), s.after.clone());
        let done = at(target, s.host, move || {
            write(&k, &v)?;
            let back = read(&k)?;
            if same(&k, &back, &v) {
                Ok(())
            } else {
                Err(Error::Sys {
                    op: format!("{}: wrote {v}, read back {back}", k.spec()),
                    source: std::io::Error::from(std::io::ErrorKind::InvalidData),
                })
            }
        });
        if let Err(e) = done {
            let partial = State {
                steps: plan.steps[..=i].to_vec(),
                ..state.clone()
            };
            let _ = restore(target, &partial);
            let _ = std::fs::remove_file(state_path);
            return Err(e);
        }
    }
    Ok(())
}

/// Puts every value of `state` back; returns the knobs that did not read
/// back as they were.
fn restore(target: &Target, state: &State) -> Result<Vec<String>> {
    // Features: the whole requested set of each device, at once.
    for (dev, before) in &state.features_before {
        let (d, b) = (dev.clone(), before.clone());
        target.run(move || {
            let e = Ethtool::open()?;
            let wanted: Vec<(String, bool)> = b.into_iter().collect();
            e.set_features(&d, &wanted).map(|_| ())
        })?;
    }
    // Then the rest, newest first; IPv6 size knobs are written before
    // IPv4 ones again by a final pass below.
    for s in state.steps.iter().rev() {
        if matches!(s.knob, Knob::Feature { .. }) {
            continue;
        }
        let (k, v) = (s.knob.clone(), s.before.clone());
        at(target, s.host, move || write(&k, &v))?;
    }
    let mut wrong = Vec::new();
    for pass in 0..2 {
        wrong.clear();
        let mut steps: Vec<&Step> = state.steps.iter().collect();
        steps.sort_by_key(|s| match &s.knob {
            Knob::Link { attr, .. } if attr.contains("ipv4") => 1,
            _ => 0,
        });
        for s in steps {
            let k = s.knob.clone();
            let now = at(target, s.host, move || read(&k))?;
            if !same(&s.knob, &now, &s.before) {
                if pass == 0 {
                    let (k, v) = (s.knob.clone(), s.before.clone());
                    at(target, s.host, move || write(&k, &v))?;
                }
                wrong.push(format!("{} is {now}, was {}", s.knob.spec(), s.before));
            }
        }
        if wrong.is_empty() {
            break;
        }
    }
    Ok(wrong)
}

/// Reverts what the state file at `state_path` recorded, then removes it.
/// Fails (keeping the file) when a value does not read back as it was.
pub fn revert(target: &Target, state_path: &Path) -> Result<State> {
    let meta = std::fs::symlink_metadata(state_path)
        .map_err(|e| Error::sys(format!("state file {}", state_path.display()), e))?;
    if !meta.file_type().is_file() {
        return Err(Error::sys(
            format!("state file {} is not a regular file", state_path.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    }
    let text = std::fs::read_to_string(state_path)
        .map_err(|e| Error::sys(format!("read state file {}", state_path.display()), e))?;
    let state: State = serde_json::from_str(&text).map_err(|e| {
        Error::sys(
            format!("state file {}: {e}", state_path.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidData),
        )
    })?;
    let wrong = restore(target, &state)?;
    if !wrong.is_empty() {
        return Err(Error::Sys {
            op: format!("revert left {}", wrong.join("; ")),
            source: std::io::Error::from(std::io::ErrorKind::InvalidData),
        });
    }
    std::fs::remove_file(state_path)
        .map_err(|e| Error::sys(format!("remove state file {}", state_path.display()), e))?;
    Ok(state)
}

/// The default state file of a target: `/run/offload/tune-NAME.json`.
pub fn default_state_path(target: &Target) -> PathBuf {
    let safe: String = target
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from(format!("/run/offload/tune-{safe}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_parse_and_print_back() {
        for s in [
            "eth0:gro_max_size",
            "eth0:feature:rx-gro",
            "eth0:sysfs:queues/rx-0/rps_cpus",
            "eth0:ring:rx",
            "eth0:coalesce:rx-usecs",
            "sysctl:net.core.busy_read",
            "irq:42",
        ] {
            assert_eq!(Knob::parse(s).unwrap().spec(), s);
        }
        for bad in [
            "eth0:sysfs:../../x",
            "eth0:sysfs:/etc/passwd",
            "sysctl:net/../x",
            "eth0:nope",
            "irq:x",
            "eth0:coalesce:bogus",
        ] {
            assert!(Knob::parse(bad).is_err(), "{bad}");
        }
        assert!(same(
            &Knob::parse("e:sysfs:queues/rx-0/rps_cpus").unwrap(),
            "00000003",
            "3"
        ));
        assert!(same(&Knob::parse("irq:1").unwrap(), "0-1", "0,1"));
    }
}
