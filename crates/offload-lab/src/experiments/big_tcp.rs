//! `big-tcp`: BIG TCP as its author measured it, with the receiver's GRO
//! building the super-packets.
//!
//! Two namespaces over a veth pair. Each end has GRO on and TSO off, so
//! each end's sender segments in software and the other end's veth runs
//! NAPI GRO on the wire-sized segments: veth queues a packet to its
//! peer's NAPI ring only when the peer has NAPI (GRO on or an XDP program,
//! `veth_gro_requested` / `veth_napi_enable`) and the packet is eligible
//! (`veth_skb_is_eligible_for_gro`: the sending device has no TSO),
//! drivers/net/veth.c, 5.13 to 6.18. With TSO on, veth hands the sender's
//! GSO packet through unmerged and `gro_max_size` is never used.
//!
//! Arms: the four size knobs (`gso_max_size`, `gro_max_size`,
//! `gso_ipv4_max_size`, `gro_ipv4_max_size`) at 65536 or 185000 on both
//! ends, IPv6 knobs first (an IPv6 value <= 64 KiB overwrites the IPv4
//! knob, `netif_set_gso_max_size`), set over rtnetlink (iproute2 6.1 lacks
//! the IPv4 keywords) and read back before every run together with the GRO
//! and TSO state. Tests: TCP_RR 80000/80000 with TCP_NODELAY (the seed's),
//! and a TCP stream, each over IPv6 and over IPv4. The sizes GRO produced
//! come from the kernel: `net:netif_receive_skb` counted per size bucket
//! of `len` with ftrace filters on the receiving devices.

use serde_json::json;

use crate::live::TracepointIds;
use offload_bench::TestKind;
use offload_sys::node::{Node, VethPair};

use offload_report::{Finding, Severity};

use super::paired::{compare_all, describe};
use super::{
    bench_in, bucket_names, counted, figures, interleave, settings, Arm, Context, Experiment,
    Outcome, RunFigures, Section, ServerInNs, SizeCounters, WARMUP,
};

/// The BIG TCP size of the seed.
pub const BIG: u32 = 185_000;
/// The default size.
pub const DEFAULT: u32 = 65_536;

/// Upper edges (inclusive) of the size buckets of stack packets, bytes of
/// `skb->len` at `netif_receive_skb` (IP packet, no Ethernet header).
pub const SIZE_EDGES: [u64; 6] = [1_500, 16_384, 32_768, 65_535, 131_072, 262_144];

/// The experiment.
#[derive(Debug)]
pub struct BigTcp;

const LIMITS: &[&str] = &[
    "veth has no NIC: the sender segments in software (TSO off) so that the receiver's GRO has wire-sized segments to merge; on a NIC, TSO would do that for free, so the sender's CPU here includes segmentation in both arms",
    "veth has no RSS, no IRQs and no interrupt coalescing; driver tso_max_size limits (often 65536 on real NICs) do not apply (veth: 524280)",
    "figures come from a shared 2-vCPU VM: trust the paired difference, not the absolute numbers",
];

/// One arm's setup.
struct ArmSpec {
    name: String,
    group: &'static str,
    kind: TestKind,
    ipv6: bool,
    size: u32,
}

fn read_state(node: &mut Node, dev: &str) -> anyhow::Result<serde_json::Value> {
    let knobs = node.knobs(dev)?;
    let gro = node.ethtool().feature(dev, "rx-gro")?;
    let tso = node.tso(dev)?;
    Ok(json!({
        "device": dev,
        "gso_max_size": knobs.get("gso_max_size"),
        "gro_max_size": knobs.get("gro_max_size"),
        "gso_ipv4_max_size": knobs.get("gso_ipv4_max_size"),
        "gro_ipv4_max_size": knobs.get("gro_ipv4_max_size"),
        "generic-receive-offload": gro,
        "tcp-segmentation-offload": tso,
        "mtu": knobs.get("mtu"),
    }))
}

impl Experiment for BigTcp {
    fn name(&self) -> &'static str {
        "big-tcp"
    }

    fn claim(&self) -> &'static str {
        "BIG TCP (gso/gro_max_size 185000) lets GRO build super-packets above 64 KiB, cutting the packets the stack handles per 80000-byte request/response, its latency and its CPU cost"
    }

    fn source(&self) -> &'static str {
        "Eric Dumazet, \"BIG TCP\", netdev 0x15 (2021) and LWN 884104: TCP_RR 80000/80000 with TCP_NODELAY, +50% transactions/s and -30% latency on a NIC with GRO"
    }

    fn limits(&self) -> &'static [&'static str] {
        LIMITS
    }

    fn run(&self, ctx: &Context<'_>) -> anyhow::Result<Outcome> {
        let mut pair = VethPair::new("b")?;
        for (node, dev) in [
            (&mut pair.client, pair.client_dev.clone()),
            (&mut pair.server, pair.server_dev.clone()),
        ] {
            node.features(&dev, &[("rx-gro", true)])?;
            node.tso_off(&dev)?;
        }
        let ids = TracepointIds::read()?;
        let server6 = ServerInNs::start(&pair.server.ns, VethPair::SERVER6.into())?;
        let server4 = ServerInNs::start(&pair.server.ns, VethPair::SERVER4.into())?;
        let rr = "tcp-rr 80000/80000";
        let stream = "tcp-stream";
        let mut specs = Vec::new();
        for (group, kind) in [(rr, TestKind::TcpRr), (stream, TestKind::TcpStream)] {
            for ipv6 in [true, false] {
                for size in [DEFAULT, BIG] {
                    let short = if group == rr { "rr" } else { "stream" };
                    specs.push(ArmSpec {
                        name: format!(
                            "{short}-{}-{}",
                            if ipv6 { "ipv6" } else { "ipv4" },
                            if size == BIG { "185000" } else { "65536" }
                        ),
                        group,
                        kind,
                        ipv6,
                        size,
                    });
                }
            }
        }
        let config = |s: &ArmSpec| {
            let server = if s.ipv6 { &server6 } else { &server4 };
            let mut cfg = server.config(s.kind);
            if s.kind == TestKind::TcpRr {
                cfg.spec.request = 80_000;
                cfg.spec.response = 80_000;
            }
            cfg.spec.knobs.nodelay = true;
            cfg.duration = ctx.opts.duration;
            cfg.warmup = WARMUP;
            cfg
        };
        let mut arms: Vec<Arm> = specs
            .iter()
            .map(|s| {
                let mut a = Arm::in_group(&s.name, s.group);
                a.settings = settings([
                    (
                        "test",
                        json!(if s.kind == TestKind::TcpRr {
                            "tcp-rr 80000/80000, TCP_NODELAY, 1 flow"
                        } else {
                            "tcp-stream client -> server, TCP_NODELAY, 1 flow"
                        }),
                    ),
                    ("family", json!(if s.ipv6 { "IPv6" } else { "IPv4" })),
                    ("size_knobs", json!(s.size)),
                ]);
                a
            })
            .collect();
        let (cdev, sdev) = (pair.client_dev.clone(), pair.server_dev.clone());
        let devices = vec![cdev.clone(), sdev.clone()];
        let names = bucket_names(&SIZE_EDGES);
        let interrupted = interleave(ctx, &mut arms, |a, _| {
            let s = &specs[a];
            pair.client.set_big_tcp(&cdev, s.size)?;
            pair.server.set_big_tcp(&sdev, s.size)?;
            // The state the run is measured under, read back now.
            let client_state = read_state(&mut pair.client, &cdev)?;
            let server_state = read_state(&mut pair.server, &sdev)?;
            let sizes: Vec<SizeCounters> = devices
                .iter()
                .map(|d| SizeCounters::open(&ids, d, &SIZE_EDGES))
                .collect::<anyhow::Result<_>>()?;
            let cfg = config(s);
            let mut at_return: Vec<Vec<u64>> = Vec::new();
            let (r, counts, after_run) = counted(&ids, &devices, || {
                let r = bench_in(&pair.client.ns, &cfg)?;
                at_return = sizes.iter().map(SizeCounters::read).collect();
                Ok(r)
            })?;
            let buckets: Vec<Vec<u64>> = sizes.iter().map(SizeCounters::read).collect();
            // What arrived after the client returned, by size: the packets
            // the wait in `counted` keeps out of the next arm's counters.
            let tail: Vec<u64> = (0..SIZE_EDGES.len())
                .map(|i| {
                    buckets.iter().map(|b| b[i]).sum::<u64>()
                        - at_return.iter().map(|b| b[i]).sum::<u64>()
                })
                .collect();
            // The server's device receives the data of a stream; in a
            // transaction both devices receive 80000 bytes.
            let mut f: RunFigures = figures(&r, &counts, Some(1));
            let total: u64 = buckets.iter().flatten().sum();
            let over: u64 = buckets.iter().map(|b| b[4] + b[5]).sum();
            f.set(
                "over_64k_share",
                (total > 0).then(|| 100.0 * over as f64 / total as f64),
            );
            if s.kind != TestKind::TcpRr {
                f.values.remove("transactions_per_sec");
            }
            f.facts.insert(
                "stack_packet_sizes".into(),
                json!({
                    cdev.clone(): names.iter().cloned().zip(buckets[0].iter().copied()).collect::<std::collections::BTreeMap<_, _>>(),
                    sdev.clone(): names.iter().cloned().zip(buckets[1].iter().copied()).collect::<std::collections::BTreeMap<_, _>>(),
                }),
            );
            f.facts.insert(
                "after_run".into(),
                json!({
                    "packets": after_run.packets,
                    "settled_ms": after_run.settled_ms,
                    "stack_packet_sizes": names.iter().cloned().zip(tail).collect::<std::collections::BTreeMap<_, _>>(),
                }),
            );
            f.facts.insert(
                "read_back".into(),
                json!({"client": client_state, "server": server_state}),
            );
            Ok(f)
        })?;
        drop(server6);
        drop(server4);
        for arm in arms.iter_mut() {
            if let Some(rb) = arm.runs.first().and_then(|r| r.facts.get("read_back")) {
                arm.settings.insert("client".into(), rb["client"].clone());
                arm.settings.insert("server".into(), rb["server"].clone());
            }
        }
        let comparisons = compare_all(&arms, &[(0, 1), (2, 3), (4, 5), (6, 7)]);
        let mut findings = Vec::new();
        let mut size_lines = Vec::new();
        for arm in &arms {
            let mut sum = vec![0u64; SIZE_EDGES.len()];
            for r in &arm.runs {
                if let Some(m) = r
                    .facts
                    .get("stack_packet_sizes")
                    .and_then(|v| v.as_object())
                {
                    for dev in m.values() {
                        for (i, n) in names.iter().enumerate() {
                            sum[i] += dev[n].as_u64().unwrap_or(0);
                        }
                    }
                }
            }
            let total: u64 = sum.iter().sum();
            if total == 0 {
                continue;
            }
            let parts: Vec<String> = names
                .iter()
                .zip(&sum)
                .filter(|(_, n)| **n > 0)
                .map(|(name, n)| format!("{name}: {:.1}%", 100.0 * *n as f64 / total as f64))
                .collect();
            size_lines.push(format!(
                "{:<22} {} stack packets; bytes {}",
                arm.name,
                total,
                parts.join(", ")
            ));
        }
        for c in &comparisons {
            let group = &arms.iter().find(|a| a.name == c.b).map_or("", |a| a.group);
            let mut lines = Vec::new();
            for (metric, unit, what) in [
                ("transactions_per_sec", "", "transactions/s"),
                ("p50_us", " us", "p50 latency"),
                ("p99_us", " us", "p99 latency"),
                ("cpu_us_per_transaction", " us", "CPU per transaction"),
                (
                    "stack_packets_per_transaction",
                    "",
                    "stack packets per transaction",
                ),
                ("gbit_per_sec", " Gbit/s", "throughput"),
                (
                    "over_64k_share",
                    " points",
                    "share of stack packets above 64 KiB",
                ),
            ] {
                if let Some(st) = c.get(metric) {
                    lines.push(format!("{what}: {}", describe(st, unit)));
                }
            }
            if !lines.is_empty() {
                findings.push(
                    Finding::new(
                        Severity::Info,
                        "big-tcp-paired",
                        format!("{} against {} ({group})", c.b, c.a),
                        lines.join("; "),
                    )
                    .with_citation("Eric Dumazet, BIG TCP, netdev 0x15"),
                );
            }
        }
        let big_shares: Vec<f64> = arms
            .iter()
            .zip(&specs)
            .filter(|(_, s)| s.size == BIG)
            .filter_map(|(a, _)| a.mean("over_64k_share"))
            .collect();
        if !big_shares.is_empty() && big_shares.iter().all(|v| *v == 0.0) {
            findings.push(Finding::new(
                Severity::Medium,
                "big-tcp-gro-not-above-64k",
                "GRO built no packet above 64 KiB in the 185000 arms",
                "netif_receive_skb saw no skb longer than 65535 bytes on either receiving veth: the knobs were set, but the receive path did not merge past 64 KiB",
            ));
        }
        Ok(Outcome {
            arms,
            comparisons,
            findings,
            sections: vec![Section {
                title: "sizes of the packets GRO handed to the stack (net:netif_receive_skb len, both receiving veths, all runs)".into(),
                lines: size_lines,
            }],
            details: [("size_bucket_edges".to_string(), json!(SIZE_EDGES))].into(),
            interrupted,
        })
    }
}
