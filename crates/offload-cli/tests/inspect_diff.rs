//! `offload inspect --json` against the standard tools on every device kind
//! this kernel can create: `ethtool -k/-l/-g/-c/-x`, `ip -d -j link`, sysfs
//! (a sysfs mounted in a private mount namespace inside the test's network
//! namespace) and procfs. The devices live in an anonymous namespace the
//! kernel removes with the test process. Needs root, ethtool and iproute2.
//!
//! Deliberate differences: `ethtool -k` prints a group of one feature
//! (`generic-receive-offload`) without the kernel name (`rx-gro`); the
//! JSON has both. iproute2 6.1 prints no `gso_ipv4_max_size` /
//! `gro_ipv4_max_size`, so those are compared only where it prints them.

use std::collections::BTreeMap;
use std::process::Output;

mod common;

use common::netns::command_in;
use common::{succeeded, BIN};

use offload_sys::NetNs;

/// Runs `prog args` inside `ns`.
fn run_in(ns: &NetNs, prog: &str, args: &[&str]) -> Output {
    command_in(ns, prog, args)
        .output()
        .unwrap_or_else(|e| panic!("run {prog} {args:?}: {e}"))
}

fn ok(out: Output, what: &str) -> String {
    String::from_utf8_lossy(&succeeded(out, what).stdout).into_owned()
}

fn ip(ns: &NetNs, args: &str) -> bool {
    let a: Vec<&str> = args.split_whitespace().collect();
    run_in(ns, "ip", &a).status.success()
}

/// Parses `ethtool -k` output: name -> (on, fixed).
fn ethtool_k(text: &str) -> BTreeMap<String, (bool, bool)> {
    let mut out = BTreeMap::new();
    for line in text.lines().skip(1) {
        let line = line.trim_start_matches('\t');
        let Some((name, rest)) = line.split_once(": ") else {
            continue;
        };
        let on = rest.starts_with("on");
        out.insert(name.to_string(), (on, rest.contains("[fixed]")));
    }
    out
}

/// Parses the two sections of `ethtool -l` / `-g`: (maximums, current),
/// each label -> value (`n/a` as 0).
fn ethtool_sections(text: &str) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let (mut max, mut cur) = (BTreeMap::new(), BTreeMap::new());
    let mut in_max = true;
    for line in text.lines() {
        if line.starts_with("Pre-set maximums") {
            in_max = true;
            continue;
        }
        if line.starts_with("Current hardware settings") {
            in_max = false;
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let n = if v == "n/a" {
            0
        } else {
            v.parse().unwrap_or(u64::MAX)
        };
        if n != u64::MAX {
            if in_max { &mut max } else { &mut cur }.insert(k.trim().to_string(), n);
        }
    }
    (max, cur)
}

/// Reads sysfs files of `dev` as this namespace's own sysfs shows them.
/// `mount`: mount a sysfs of `ns` first (a namespace the test made); the
/// host's own is `/sys` already.
fn sysfs_in(ns: &NetNs, dev: &str, rels: &[String], mount: bool) -> BTreeMap<String, String> {
    let script = format!(
        "{}for f in {}; do printf '%s=' \"$f\"; cat /sys/class/net/{dev}/$f 2>/dev/null || echo; done",
        if mount { "mount -t sysfs sysfs /sys && " } else { "" },
        rels.join(" ")
    );
    let text = ok(run_in(ns, "unshare", &["-m", "sh", "-c", &script]), "sysfs");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Compares one device of `inspect --json` with ethtool, ip and sysfs.
/// Returns the number of checks made.
fn compare(
    ns: &NetNs,
    dev: &serde_json::Value,
    link: &serde_json::Value,
    own_sysfs: bool,
) -> usize {
    let name = dev["name"].as_str().unwrap();
    let mut checks = 0;
    // ethtool -k: every line, group or feature, on/off and [fixed].
    let k = ethtool_k(&ok(run_in(ns, "ethtool", &["-k", name]), "ethtool -k"));
    assert!(k.len() > 10, "{name}: ethtool -k printed {k:?}");
    let fixed: Vec<&str> = dev["fixed_features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for (feature, (on, is_fixed)) in &k {
        assert_eq!(
            dev["features"][feature].as_bool(),
            Some(*on),
            "{name}: {feature} is {} in ethtool -k",
            if *on { "on" } else { "off" }
        );
        assert_eq!(
            fixed.contains(&feature.as_str()),
            *is_fixed,
            "{name}: {feature} [fixed] per ethtool -k"
        );
        checks += 2;
    }
    assert!(
        dev["features"].get("").is_none(),
        "{name}: a feature named \"\""
    );
    assert!(!fixed.contains(&""), "{name}: an empty fixed feature");
    // ethtool -l / -g: answered by both or by neither.
    for (flag, key) in [("-l", "channels"), ("-g", "rings")] {
        let out = run_in(ns, "ethtool", &[flag, name]);
        let ours = if key == "channels" {
            &dev["queues"]["channels"]
        } else {
            &dev["rings"]
        };
        if !out.status.success() {
            assert!(
                ours.is_null(),
                "{name}: ethtool {flag} fails, inspect has {ours}"
            );
            checks += 1;
            continue;
        }
        let (max, cur) = ethtool_sections(&String::from_utf8_lossy(&out.stdout));
        let pairs: &[(&str, &str, bool)] = if key == "channels" {
            &[
                ("RX", "max_rx", true),
                ("TX", "max_tx", true),
                ("Other", "max_other", true),
                ("Combined", "max_combined", true),
                ("RX", "rx", false),
                ("TX", "tx", false),
                ("Other", "other", false),
                ("Combined", "combined", false),
            ]
        } else {
            &[
                ("RX", "rx_max", true),
                ("RX Mini", "rx_mini_max", true),
                ("RX Jumbo", "rx_jumbo_max", true),
                ("TX", "tx_max", true),
                ("RX", "rx", false),
                ("RX Mini", "rx_mini", false),
                ("RX Jumbo", "rx_jumbo", false),
                ("TX", "tx", false),
            ]
        };
        for (label, field, from_max) in pairs {
            let theirs = if *from_max { &max } else { &cur }.get(*label).copied();
            if let Some(t) = theirs {
                assert_eq!(
                    u(&ours[field]),
                    t,
                    "{name}: ethtool {flag} {label} ({field})"
                );
                checks += 1;
            }
        }
    }
    // ethtool -c: the classic four and adaptive RX where printed.
    let out = run_in(ns, "ethtool", &["-c", name]);
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        for field in ["rx-usecs", "rx-frames", "tx-usecs", "tx-frames"] {
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{field}: ")))
                .map(str::trim);
            if let Some(v) = v.filter(|v| *v != "n/a") {
                assert_eq!(
                    u(&dev["coalesce"][field]).to_string(),
                    v,
                    "{name}: ethtool -c {field}"
                );
                checks += 1;
            }
        }
    } else {
        assert!(
            dev["coalesce"].is_null(),
            "{name}: ethtool -c fails, inspect has coalescing"
        );
        checks += 1;
    }
    // ethtool -x: the table entries where it prints them.
    let out = run_in(ns, "ethtool", &["-x", name]);
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let table: Vec<u64> = text
            .lines()
            .filter(|l| {
                l.trim_start()
                    .split(':')
                    .next()
                    .is_some_and(|n| n.trim().parse::<u64>().is_ok())
            })
            .flat_map(|l| {
                l.split_once(':')
                    .map(|(_, v)| {
                        v.split_whitespace()
                            .filter_map(|x| x.parse().ok())
                            .collect::<Vec<u64>>()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let ours: Vec<u64> = dev["rss"]["indirection"]
            .as_array()
            .map(|a| a.iter().map(u).collect())
            .unwrap_or_default();
        assert_eq!(ours, table, "{name}: ethtool -x indirection table");
        for h in ["toeplitz", "xor", "crc32"] {
            if let Some(l) = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{h}:")))
            {
                let on = l.contains(": on");
                let has = dev["rss"]["hash_functions"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == h));
                assert_eq!(has, on, "{name}: ethtool -x {h}");
                checks += 1;
            }
        }
        checks += 1;
    }
    // ip -d -j link.
    assert_eq!(u(&dev["ifindex"]), u(&link["ifindex"]), "{name}: ifindex");
    assert_eq!(u(&dev["mtu"]), u(&link["mtu"]), "{name}: mtu");
    for key in [
        "gso_max_size",
        "gro_max_size",
        "tso_max_size",
        "tso_max_segs",
        "gso_ipv4_max_size",
        "gro_ipv4_max_size",
    ] {
        if let Some(v) = link.get(key) {
            assert_eq!(u(&dev[key]), u(v), "{name}: {key} per ip -d -j link");
            checks += 1;
        }
    }
    assert_eq!(
        u(&dev["queues"]["rx"]),
        u(&link["num_rx_queues"]),
        "{name}: num_rx_queues"
    );
    assert_eq!(
        u(&dev["queues"]["tx"]),
        u(&link["num_tx_queues"]),
        "{name}: num_tx_queues"
    );
    assert_eq!(dev["qdisc"], link["qdisc"], "{name}: qdisc");
    let kind = &link["linkinfo"]["info_kind"];
    if !kind.is_null() {
        assert_eq!(&dev["kind"], kind, "{name}: kind");
    }
    if let Some(lower) = link.get("link").and_then(|l| l.as_str()) {
        assert_eq!(dev["lower"]["name"], lower, "{name}: lower device");
        checks += 1;
    }
    checks += 6;
    // sysfs, as this namespace's own sysfs shows it.
    let mut rels = vec![
        "gro_flush_timeout".to_string(),
        "napi_defer_hard_irqs".to_string(),
    ];
    for q in dev["queues"]["rx_queues"].as_array().unwrap() {
        let i = u(&q["index"]);
        rels.push(format!("queues/rx-{i}/rps_cpus"));
        rels.push(format!("queues/rx-{i}/rps_flow_cnt"));
    }
    let sys = sysfs_in(ns, name, &rels, own_sysfs);
    assert_eq!(
        sys["gro_flush_timeout"],
        u(&dev["gro_flush_timeout"]).to_string(),
        "{name}"
    );
    assert_eq!(
        sys["napi_defer_hard_irqs"],
        u(&dev["napi_defer_hard_irqs"]).to_string(),
        "{name}"
    );
    for q in dev["queues"]["rx_queues"].as_array().unwrap() {
        let i = u(&q["index"]);
        assert_eq!(
            Some(sys[&format!("queues/rx-{i}/rps_cpus")].as_str()),
            q["rps_cpus"].as_str(),
            "{name} rx-{i} rps_cpus"
        );
        assert_eq!(
            sys[&format!("queues/rx-{i}/rps_flow_cnt")],
            u(&q["rps_flow_cnt"]).to_string(),
            "{name} rx-{i} rps_flow_cnt"
        );
        checks += 2;
    }
    checks + 2
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn inspect_json_matches_ethtool_ip_sysfs_on_every_device_kind() {
    let ns = NetNs::new_anonymous().unwrap();
    // Devices of every kind this kernel has; the core kinds must exist.
    assert!(ip(&ns, "link add dv0 type veth peer dv1"));
    assert!(ip(&ns, "link set dv0 up"));
    assert!(ip(&ns, "addr add 10.99.0.1/24 dev dv0"));
    assert!(ip(&ns, "link add dbr0 type bridge"));
    assert!(ip(&ns, "link set dv1 master dbr0"));
    assert!(ip(
        &ns,
        "link add dvx0 type vxlan id 42 dstport 4789 local 10.99.0.1 dev dv0"
    ));
    assert!(ip(
        &ns,
        "link add dvx6 type vxlan id 43 dstport 4790 remote fd00::2 local fd00::1"
    ));
    assert!(ip(&ns, "link add dmv0 link dv0 type macvlan mode bridge"));
    assert!(ip(&ns, "tuntap add dev dtun0 mode tun"));
    assert!(ip(&ns, "tuntap add dev dtap0 mode tap"));
    let mut kinds = vec!["veth", "bridge", "vxlan", "macvlan", "tun", "lo"];
    for (cmd, kind) in [
        ("link add difb0 type ifb", "ifb"),
        ("link add ddum0 type dummy", "dummy"),
        ("link add dipv0 link dv0 type ipvlan", "ipvlan"),
        ("link add link dv0 name dvl0 type vlan id 7", "vlan"),
        ("link add dgnv0 type geneve id 5 remote 10.99.0.2", "geneve"),
    ] {
        if ip(&ns, cmd) {
            kinds.push(kind);
        }
    }
    // Mixed groups: TSO with one member off stays "on" for ethtool; GRO
    // on one veth end only; a size knob raised.
    ok(
        run_in(
            &ns,
            "ethtool",
            &["-K", "dv0", "tx-tcp-ecn-segmentation", "off"],
        ),
        "ethtool -K",
    );
    ok(
        run_in(&ns, "ethtool", &["-K", "dv1", "gro", "on"]),
        "ethtool -K",
    );
    assert!(ip(&ns, "link set dv1 gro_max_size 185000"));
    let out = ok(
        run_in(&ns, BIN, &["inspect", "--json", "--window", "0s"]),
        "offload inspect",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let links: serde_json::Value = serde_json::from_str(&ok(
        run_in(&ns, "ip", &["-d", "-j", "link", "show"]),
        "ip link",
    ))
    .unwrap();
    let devices = v["devices"].as_array().unwrap();
    let mut checks = 0;
    let mut seen_kinds = Vec::new();
    for link in links.as_array().unwrap() {
        let name = link["ifname"].as_str().unwrap();
        let dev = devices
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from inspect"));
        checks += compare(&ns, dev, link, true);
        let kind = if name == "lo" {
            "lo"
        } else {
            link["linkinfo"]["info_kind"].as_str().unwrap_or("-")
        };
        seen_kinds.push(kind.to_string());
    }
    for k in &kinds {
        assert!(
            seen_kinds.iter().any(|s| s == k),
            "kind {k} not compared: {seen_kinds:?}"
        );
    }
    // The groups ethtool's way, spelled out on the veth with one TSO
    // member off.
    let dv0 = devices.iter().find(|d| d["name"] == "dv0").unwrap();
    assert_eq!(dv0["features"]["tcp-segmentation-offload"], true);
    assert_eq!(dv0["features"]["tx-tcp-ecn-segmentation"], false);
    assert_eq!(
        dv0["lower"]["name"], "dv1",
        "a veth's IFLA_LINK is its peer"
    );
    // The IPv6-outer VXLAN is known as such.
    let dvx6 = devices.iter().find(|d| d["name"] == "dvx6").unwrap();
    assert_eq!(dvx6["ipv6_outer_tunnel"], true);
    let dvx0 = devices.iter().find(|d| d["name"] == "dvx0").unwrap();
    assert_eq!(dvx0["ipv6_outer_tunnel"], false);
    assert_eq!(dvx0["underlay"], "dv0");
    // procfs: the namespace's own forwarding sysctl.
    let fwd = ok(
        run_in(&ns, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "cat",
    );
    assert_eq!(v["host"]["sysctls"]["net.ipv4.ip_forward"], fwd.trim());
    eprintln!(
        "{checks} checks on {} devices of kinds {seen_kinds:?}",
        devices.len()
    );
    assert!(checks > 300, "{checks}");
}

/// The host's own NIC (read-only): rings, coalescing and RSS come from a
/// real driver here (virtio_net on the CI machine).
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn inspect_json_matches_ethtool_on_the_host_nics() {
    let host = NetNs::current_thread().unwrap();
    let out = ok(
        run_in(&host, BIN, &["inspect", "--json", "--window", "0s"]),
        "offload inspect",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let links: serde_json::Value = serde_json::from_str(&ok(
        run_in(&host, "ip", &["-d", "-j", "link", "show"]),
        "ip link",
    ))
    .unwrap();
    let mut physical = 0;
    for dev in v["devices"].as_array().unwrap() {
        if dev["physical"] != true {
            continue;
        }
        physical += 1;
        let link = links
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["ifname"] == dev["name"])
            .unwrap();
        compare(&host, dev, link, false);
        // Each RX queue names an IRQ that /proc/interrupts lists.
        let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap();
        for q in dev["queues"]["rx_queues"].as_array().unwrap() {
            if let Some(irq) = q["irq"].as_u64() {
                assert!(
                    interrupts
                        .lines()
                        .any(|l| l.trim_start().starts_with(&format!("{irq}:"))),
                    "irq {irq}"
                );
                let eff =
                    std::fs::read_to_string(format!("/proc/irq/{irq}/effective_affinity_list"))
                        .or_else(|_| {
                            std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list"))
                        })
                        .unwrap();
                assert_eq!(q["irq_cpus"], eff.trim());
            }
        }
    }
    assert!(physical > 0, "no NIC on this machine to compare");
}

/// Every value a tune touches, read with the standard tools: `ip -d -j
/// link`, `ethtool -k/-g/-c`, sysfs, and offload's own netlink reading
/// for the IPv4 size knobs iproute2 6.1 does not print.
fn snapshot(ns: &NetNs, devs: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let links: serde_json::Value = serde_json::from_str(&ok(
        run_in(ns, "ip", &["-d", "-j", "link", "show"]),
        "ip link",
    ))
    .unwrap();
    let ins: serde_json::Value = serde_json::from_str(&ok(
        run_in(ns, BIN, &["inspect", "--json", "--window", "0s"]),
        "inspect",
    ))
    .unwrap();
    for dev in devs {
        let link = links
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["ifname"] == *dev)
            .unwrap();
        for k in ["gso_max_size", "gro_max_size", "mtu"] {
            out.insert(format!("{dev} ip {k}"), link[k].to_string());
        }
        let d = ins["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == *dev)
            .unwrap();
        for k in ["gso_ipv4_max_size", "gro_ipv4_max_size"] {
            out.insert(format!("{dev} netlink {k}"), d[k].to_string());
        }
        for (f, v) in ethtool_k(&ok(run_in(ns, "ethtool", &["-k", dev]), "ethtool -k")) {
            out.insert(format!("{dev} ethtool -k {f}"), format!("{v:?}"));
        }
        for flag in ["-g", "-c"] {
            let o = run_in(ns, "ethtool", &[flag, dev]);
            out.insert(
                format!("{dev} ethtool {flag}"),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            );
        }
        let mut rels = vec![
            "gro_flush_timeout".to_string(),
            "napi_defer_hard_irqs".to_string(),
        ];
        for q in d["queues"]["rx_queues"].as_array().unwrap() {
            let i = u(&q["index"]);
            rels.push(format!("queues/rx-{i}/rps_cpus"));
            rels.push(format!("queues/rx-{i}/rps_flow_cnt"));
        }
        for (k, v) in sysfs_in(ns, dev, &rels, true) {
            out.insert(format!("{dev} sysfs {k}"), v);
        }
    }
    out
}

/// `offload tune` applies a profile or a finding's fix in a private
/// namespace on veth, bridge, vxlan and macvlan, and `--revert` leaves
/// every value as it was; the host namespace is refused without --host.
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn tune_apply_then_revert_restores_every_value() {
    let ns = NetNs::new_anonymous().unwrap();
    assert!(ip(&ns, "link add tv0 type veth peer tv1"));
    assert!(ip(&ns, "link set tv0 up"));
    assert!(ip(&ns, "link set tv1 up"));
    assert!(ip(&ns, "addr add 10.98.0.1/24 dev tv0"));
    assert!(ip(&ns, "link add tbr0 type bridge"));
    assert!(ip(
        &ns,
        "link add tvx0 type vxlan id 9 dstport 4789 local 10.98.0.1 dev tv0"
    ));
    assert!(ip(&ns, "link add tmv0 link tv0 type macvlan mode bridge"));
    // A half-done BIG TCP and a macvlan whose GRO follows its lower device.
    assert!(ip(&ns, "link set tv1 gso_max_size 185000"));
    ok(
        run_in(&ns, "ethtool", &["-K", "tv0", "gro", "off"]),
        "ethtool -K",
    );
    let devs = ["tv0", "tv1", "tbr0", "tvx0", "tmv0"];
    let before = snapshot(&ns, &devs);
    // State files in a private directory, removed on every exit path.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let offload = BIN;
    let mut changed_runs = 0;
    let runs: Vec<Vec<String>> = vec![
        vec![
            "--profile",
            "throughput",
            "--dev",
            "tv0",
            "--dev",
            "tv1",
            "--dev",
            "tvx0",
            "--dev",
            "tbr0",
        ],
        vec!["--profile", "latency", "--dev", "tv1"],
        vec!["--profile", "packet-rate", "--dev", "tv1"],
        vec!["--fix", "big-tcp-half-done"],
        vec!["--fix", "gro-off"],
        vec![
            "--set",
            "tmv0:sysfs:gro_flush_timeout=50000",
            "--set",
            "tv1:feature:rx-gro-list=on",
        ],
    ]
    .into_iter()
    .map(|r| r.into_iter().map(String::from).collect())
    .collect();
    for (i, run) in runs.iter().enumerate() {
        let state = dir
            .join(format!("state-{i}.json"))
            .to_string_lossy()
            .into_owned();
        let mut args: Vec<&str> = vec!["tune"];
        args.extend(run.iter().map(String::as_str));
        // Dry run: nothing changes.
        ok(run_in(&ns, offload, &args), "tune dry run");
        assert_eq!(
            snapshot(&ns, &devs),
            before,
            "a dry run changed something: {run:?}"
        );
        // Profiles touch host-only sysctls: refused without --host, and
        // nothing changed.
        let mut apply = args.clone();
        apply.extend(["--apply", "--state", &state]);
        let out = run_in(&ns, offload, &apply);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("--host"), "{run:?}: {err}");
            assert_eq!(
                snapshot(&ns, &devs),
                before,
                "a refused tune changed something"
            );
            // Without the host-only part: the device knobs alone.
            continue;
        }
        let after = snapshot(&ns, &devs);
        assert_ne!(after, before, "{run:?} changed nothing");
        changed_runs += 1;
        // The state file is private.
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&state).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        // A second apply over an unreverted state is refused.
        assert!(!run_in(&ns, offload, &apply).status.success());
        ok(
            run_in(&ns, offload, &["tune", "--revert", "--state", &state]),
            "tune --revert",
        );
        let back = snapshot(&ns, &devs);
        let diff: Vec<_> = before
            .iter()
            .filter(|(k, v)| back.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: was {v}, now {:?}", back.get(k)))
            .collect();
        assert!(diff.is_empty(), "{run:?} not reverted: {diff:#?}");
        assert!(!std::path::Path::new(&state).exists());
    }
    assert!(changed_runs >= 4, "{changed_runs}");
    // The fix of a macvlan's GRO went to its lower device and worked.
    let state = dir.join("gro.json").to_string_lossy().into_owned();
    ok(
        run_in(
            &ns,
            offload,
            &[
                "tune", "--fix", "gro-off", "--dev", "tmv0", "--apply", "--state", &state,
            ],
        ),
        "fix gro-off tmv0",
    );
    let k = ethtool_k(&ok(run_in(&ns, "ethtool", &["-k", "tmv0"]), "ethtool -k"));
    assert_eq!(k["generic-receive-offload"], (true, false));
    ok(
        run_in(&ns, offload, &["tune", "--revert", "--state", &state]),
        "revert",
    );
    assert_eq!(snapshot(&ns, &devs), before);
}
