//! `udp-rx`: the seed's two posts, packet rate and latency, on a veth pair
//! whose ends both have GRO on and TSO off, so that datagrams arrive
//! through the receiving veth's NAPI instance (`veth_skb_is_eligible_for_gro`,
//! drivers/net/veth.c) and sockets get a NAPI id that busy polling can
//! poll.
//!
//! Packet rate: 32-byte datagrams flooded by offload-bench's udp-stream,
//! arms adding one trick each (one receiver; pinned; `SO_REUSEPORT`
//! receivers, one per CPU; `recvmmsg` batches; `UDP_GRO` with a
//! `UDP_SEGMENT` sender, segmented at the client veth so that bursts reach
//! one NAPI poll), with the sizes of the packets the receiving veth hands
//! to the stack (`net:netif_receive_skb` by `len`) and the
//! receiving namespace's drop counters around every run (`Udp:
//! RcvbufErrors`/`InErrors` of /proc/net/snmp, the veth devices'
//! `rx_dropped`/`tx_dropped`). Latency: a UDP ping-pong ([`pingpong`]),
//! one datagram in flight, default, `SO_BUSY_POLL`, a `MSG_DONTWAIT` spin,
//! pinning, and all of them.
//!
//! [`pingpong`]: super::pingpong

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use crate::live::TracepointIds;
use offload_bench::TestKind;
use offload_sys::node::{Node, VethPair};

use offload_report::{Finding, Severity};

use super::paired::{compare_all, describe};
use super::pingpong::{self, Mode};
use super::{
    bench_in, bucket_names, counted, figures, interleave, settings, Arm, Context, Experiment,
    Outcome, RunFigures, Section, ServerInNs, SizeCounters, WARMUP,
};

/// The experiment.
#[derive(Debug)]
pub struct UdpRx;

const LIMITS: &[&str] = &[
    "veth has no RSS, no RX queues to place, no IRQs and no interrupt coalescing: the seed's RX-queue and IRQ placement cannot be reproduced; the receive softirq runs on the sender's CPU",
    "busy_read/busy_poll are host-wide sysctls the lab does not write: busy polling is set per socket (SO_BUSY_POLL with SO_PREFER_BUSY_POLL), which is what busy_read does for every socket",
    "on 2 vCPUs the sender, the receivers and every spinning thread compete for the same two CPUs",
    "figures come from a shared 2-vCPU VM: trust the paired difference, not the absolute numbers",
];

/// Where the seed's figures were read: each post, and the author's own
/// copy of its text (the figures below are quoted from the copies).
const SEED_RATE_SOURCE: &str = "Marek Majkowski, \"How to receive a million packets per second\", Cloudflare blog, 2015-06-16, https://blog.cloudflare.com/how-to-receive-a-million-packets/ (author's copy of the text: https://github.com/majek/idea/blob/master/site/042-million-packets/main.md): 32-byte UDP payloads between two hosts with two 6-core Xeons each (24 CPUs with HT) and a Solarflare 10G NIC with 11 RX queues; every receiver reads with recvmmsg (MSG_WAITFORONE)";
const SEED_LATENCY_SOURCE: &str = "Marek Majkowski, \"How to achieve low latency with 10Gbps Ethernet\", Cloudflare blog, 2015-06-30, https://blog.cloudflare.com/how-to-achieve-low-latency/ (author's copy of the text: https://github.com/majek/idea/blob/master/site/043-10m-packets/main.md): UDP echo of 32-byte payloads between two hosts (Solarflare and Intel 82599 10G NICs through a switch); each figure is one second's lowest round trip (min) and mean (avg), three seconds per setting";

/// The seed's packet rate for each of our rate arms (its receiver output,
/// millions of packets per second, printed once a second).
const SEED_RATE: &[(&str, &str)] = &[
    ("bare", "one receiver, not pinned: \"between 197k and 350k pps\""),
    ("pinned", "sender and receiver pinned (taskset -c 1): 0.360-0.374M pps; two sender threads into one RX queue: 0.349-0.354M pps (that queue's CPU was saturated)"),
    ("reuseport", "4 SO_REUSEPORT receivers pinned to CPUs 1-4, traffic to 2 RX queues: 1.114-1.147M pps (one socket read by 2 threads: 0.461-0.495M pps)"),
    ("batched", "no figure: every receiver of the seed already reads with recvmmsg"),
    ("udp-gro", "no figure: UDP GRO came after the post (Linux 5.0)"),
];

/// The seed's further packet-rate figures, not tied to one of our arms.
const SEED_RATE_OTHER: &[&str] = &[
    "traffic to 2 RX queues, one pinned receiver: 0.609-0.657M pps",
    "receiver on the RX queue's CPU: up to ~430k pps; on its hyper-thread sibling: ~200k pps; on the other NUMA node: ~330k pps",
    "RX queues and receivers aligned on one NUMA node: 1.4M pps; receivers on the other NUMA node: at best 1M pps",
    "when the receiver could not keep up (3-4 RX queues): 437.0k/s packets received, 386.9k/s packet receive errors, RcvbufErrors 123.8k/s (netstat -s --udp)",
];

/// The seed's round trip for each of our latency arms.
const SEED_LATENCY: &[(&str, &str)] = &[
    ("pp-default", "naive: min 44.9-45.7 us, avg 57.2-61.9 us (15.5k-16.8k round trips/s)"),
    ("pp-busy-poll", "SO_BUSY_POLL 50 on both ends: min 36.6-37.3 us, avg 49.9-51.0 us (\"brings down the min latency by 7us\")"),
    ("pp-spin", "MSG_DONTWAIT spin on both ends: min 31.8-32.5 us, avg 37.4-40.4 us (\"the min time dropped by further 4us\" against SO_BUSY_POLL)"),
    ("pp-pinned", "no figure for pinning alone; the spin pinned (taskset -c 3): min 30.1-30.4 us, avg 35.9-36.5 us"),
    ("pp-all", "no run of all three; the pinned spin with XPS and RX-queue placement: min 28.4-29.2 us; with interrupt coalescing off as well (rx-usecs 0): min 25.7-25.8 us, avg 30.7-31.7 us"),
];

/// Upper edges (inclusive) of the size buckets of the receiving veth's
/// stack packets, bytes of `skb->len` at `netif_receive_skb` (IPv4 and UDP
/// headers, 28 bytes, plus the payload): one 32-byte datagram is 60 bytes,
/// a GRO super-packet of n of them 28 + 32 n (2-8, 9-16, 17-32, 33-64
/// datagrams; UDP GRO stops at 64 segments, UDP_GRO_CNT_MAX).
pub const UDP_SIZE_EDGES: [u64; 6] = [60, 284, 540, 1_052, 2_076, 65_535];

/// Kernel drop counters of one run.
#[derive(Debug, Clone, Copy, Default)]
struct Drops {
    rcvbuf_errors: u64,
    in_errors: u64,
    veth_dropped: u64,
}

fn veth_dropped(node: &Node, dev: &str) -> u64 {
    let dev = dev.to_string();
    node.ns
        .run(move || {
            let fs = offload_sys::sysfs::Sysfs::mount_here()?;
            let mut n = 0;
            for attr in ["statistics/rx_dropped", "statistics/tx_dropped"] {
                n += fs
                    .net_attr(&dev, attr)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0);
            }
            Ok(n)
        })
        .unwrap_or(0)
}

fn drop_counters(pair: &VethPair) -> Drops {
    let udp = pair
        .server
        .ns
        .run(|| Ok(offload_bench::cpu::udp_counters().ok()))
        .ok()
        .flatten()
        .unwrap_or_default();
    Drops {
        rcvbuf_errors: udp.rcvbuf_errors,
        in_errors: udp.in_errors,
        veth_dropped: veth_dropped(&pair.server, &pair.server_dev)
            + veth_dropped(&pair.client, &pair.client_dev),
    }
}

impl Experiment for UdpRx {
    fn name(&self) -> &'static str {
        "udp-rx"
    }

    fn claim(&self) -> &'static str {
        "small-UDP receive: pinning, SO_REUSEPORT receivers, recvmmsg batches and UDP GRO each add packets per second; busy polling, spinning and pinning each cut the round-trip latency"
    }

    fn source(&self) -> &'static str {
        "Cloudflare (Marek Majkowski), \"How to receive a million packets per second\" and \"How to achieve low latency with 10Gbps Ethernet\" (2015); Documentation/networking/napi.rst (busy polling)"
    }

    fn limits(&self) -> &'static [&'static str] {
        LIMITS
    }

    fn run(&self, ctx: &Context<'_>) -> anyhow::Result<Outcome> {
        let pair = VethPair::new("u")?;
        for (node, dev) in [
            (&pair.client, &pair.client_dev),
            (&pair.server, &pair.server_dev),
        ] {
            node.features(dev, &[("rx-gro", true)])?;
            node.tso_off(dev)?;
        }
        // The udp-gro arm's sender hands UDP_SEGMENT super-packets to the
        // client veth; with tx-udp-segmentation off they are segmented
        // there (validate_xmit_skb), so the server veth's NAPI gets a burst
        // of wire-sized datagrams in one poll for its GRO to merge, as a
        // NIC's ring would, instead of one super-packet passed through.
        pair.client
            .features(&pair.client_dev, &[("tx-udp-segmentation", false)])?;
        let sender_uso = pair
            .client
            .ethtool()
            .feature(&pair.client_dev, "tx-udp-segmentation")?;
        let ids = TracepointIds::read()?;
        let server = ServerInNs::start(&pair.server.ns, VethPair::SERVER4.into())?;
        let cpus: Vec<usize> = offload_sys::perf::online_cpus()
            .into_iter()
            .map(|c| c as usize)
            .collect();
        let n_cpus = cpus.len().max(1) as u32;
        let rate = "packet rate: 32-byte UDP flood";
        let latency = "latency: UDP ping-pong, 32 bytes, one in flight";

        // Packet-rate arms, each adding one trick to the previous one.
        let base = {
            let mut c = server.config(TestKind::UdpStream);
            c.spec.request = 32;
            c.duration = ctx.opts.duration;
            c.warmup = WARMUP;
            c
        };
        let mut configs = Vec::new();
        let mut c = base.clone();
        configs.push(("bare", c.clone()));
        // The receiver on the last CPU, the sender on the first.
        c.spec.server_pin = Some(vec![*cpus.last().unwrap_or(&0)]);
        c.pin = Some(vec![cpus[0]]);
        configs.push(("pinned", c.clone()));
        c.spec.flows = n_cpus;
        c.spec.server_threads = n_cpus;
        c.spec.knobs.reuseport = true;
        c.spec.server_pin = Some(cpus.clone());
        c.pin = None;
        configs.push(("reuseport", c.clone()));
        c.spec.knobs.batch = 64;
        configs.push(("batched", c.clone()));
        // UDP_GRO on the receivers, and a sender whose sends carry 64
        // datagrams each (UDP_SEGMENT 32): udp_gro_receive_segment
        // (net/ipv4/udp_offload.c, 5.0+) merges only datagrams that reach
        // one NAPI poll together, which a one-datagram-per-send flood over
        // veth never does (each send's softirq polls its single datagram).
        c.spec.knobs.udp_gro = true;
        c.spec.knobs.udp_gso = Some(32);
        configs.push(("udp-gro", c.clone()));
        let n_rate = configs.len();

        // Latency arms.
        let busy = Some(50);
        let modes = [
            ("pp-default", Mode::default()),
            (
                "pp-busy-poll",
                Mode {
                    busy_poll_us: busy,
                    ..Mode::default()
                },
            ),
            (
                "pp-spin",
                Mode {
                    spin: true,
                    ..Mode::default()
                },
            ),
            (
                "pp-pinned",
                Mode {
                    pin: true,
                    ..Mode::default()
                },
            ),
            (
                "pp-all",
                Mode {
                    busy_poll_us: busy,
                    spin: true,
                    pin: true,
                },
            ),
        ];

        let gro = pair.server.ethtool().feature(&pair.server_dev, "rx-gro")?;
        let mut arms = Vec::new();
        for (name, cfg) in &configs {
            let mut a = Arm::in_group(name, rate);
            a.settings = settings([
                ("receivers", json!(cfg.spec.server_threads)),
                ("reuseport", json!(cfg.spec.knobs.reuseport)),
                ("receiver_cpus", json!(cfg.spec.server_pin)),
                ("sender_cpus", json!(cfg.pin)),
                ("batch", json!(cfg.spec.knobs.batch)),
                ("udp_gro", json!(cfg.spec.knobs.udp_gro)),
                ("sender_udp_segment", json!(cfg.spec.knobs.udp_gso)),
                ("sender_veth_tx_udp_segmentation", json!(sender_uso)),
                ("sender_sockets", json!(cfg.spec.flows)),
                ("receiver_veth_gro", json!(gro)),
            ]);
            arms.push(a);
        }
        for (name, m) in &modes {
            let mut a = Arm::in_group(name, latency);
            a.settings = settings([
                ("so_busy_poll_us", json!(m.busy_poll_us)),
                ("msg_dontwait_spin", json!(m.spin)),
                ("pinned", json!(m.pin)),
                ("receiver_veth_gro", json!(gro)),
            ]);
            arms.push(a);
        }
        let devices = vec![pair.server_dev.clone()];
        let interrupted = interleave(ctx, &mut arms, |a, _| {
            if a < n_rate {
                let before = drop_counters(&pair);
                let sizes = SizeCounters::open(&ids, &pair.server_dev, &UDP_SIZE_EDGES)?;
                let (r, counts, after_run) =
                    counted(&ids, &devices, || bench_in(&pair.client.ns, &configs[a].1))?;
                let buckets = sizes.read();
                let after = drop_counters(&pair);
                let mut f = figures(&r, &counts, Some(0));
                f.values.remove("transactions_per_sec");
                let window = r.cpu.window_seconds.max(1e-9);
                let d = Drops {
                    rcvbuf_errors: after.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
                    in_errors: after.in_errors.saturating_sub(before.in_errors),
                    veth_dropped: after.veth_dropped.saturating_sub(before.veth_dropped),
                };
                // Counted over the whole run (warm-up included), so per
                // second of the whole run.
                let whole = window + WARMUP.as_secs_f64();
                f.set(
                    "drops_per_sec",
                    Some((d.in_errors + d.veth_dropped) as f64 / whole),
                );
                f.facts.insert("after_run".into(), json!(after_run));
                f.facts.insert(
                    "stack_packet_sizes".into(),
                    json!(bucket_names(&UDP_SIZE_EDGES)
                        .into_iter()
                        .zip(buckets)
                        .collect::<BTreeMap<_, _>>()),
                );
                f.facts.insert(
                    "kernel_drops".into(),
                    json!({
                        "udp_rcvbuf_errors": d.rcvbuf_errors,
                        "udp_in_errors": d.in_errors,
                        "veth_dropped": d.veth_dropped,
                        "sent_not_received": r.udp.as_ref().map(|u| u.lost),
                    }),
                );
                Ok(f)
            } else {
                let (_, mode) = modes[a - n_rate];
                let o = pingpong::run(
                    &pair.client.ns,
                    VethPair::CLIENT4.into(),
                    &pair.server.ns,
                    VethPair::SERVER4.into(),
                    mode,
                    &cpus,
                    Duration::from_millis(500),
                    ctx.opts.duration,
                )?;
                let mut f = RunFigures::default();
                f.set("transactions_per_sec", Some(o.per_sec));
                f.set("min_us", Some(o.min_us));
                f.set("p50_us", Some(o.p50_us));
                f.set("p90_us", Some(o.p90_us));
                f.set("p99_us", Some(o.p99_us));
                f.set(
                    "thread_cpu_us_per_transaction",
                    Some(o.thread_cpu_us_per_exchange),
                );
                f.facts.insert(
                    "sockets".into(),
                    json!({
                        "client_napi_id": o.client_napi_id,
                        "server_napi_id": o.server_napi_id,
                        "so_busy_poll_read_back": o.busy_poll_read_back,
                        "lost": o.lost,
                    }),
                );
                Ok(f)
            }
        })?;
        drop(server);
        // Read-back facts of the first run into the settings.
        for arm in arms.iter_mut() {
            if let Some(s) = arm.runs.first().and_then(|r| r.facts.get("sockets")) {
                arm.settings.insert("sockets_read_back".into(), s.clone());
            }
        }
        let mut pairs: Vec<(usize, usize)> = (1..n_rate).map(|i| (i - 1, i)).collect();
        pairs.extend((n_rate + 1..arms.len()).map(|i| (n_rate, i)));
        let comparisons = compare_all(&arms, &pairs);
        let mut findings = Vec::new();
        for c in &comparisons {
            let (metric, unit, what) = if arms.iter().any(|a| a.name == c.b && a.group == latency) {
                ("p50_us", " us", "median round trip")
            } else {
                ("packets_per_sec", " packets/s", "receive rate")
            };
            if let Some(st) = c.get(metric) {
                let published = SEED_LATENCY
                    .iter()
                    .chain(SEED_RATE)
                    .find(|(arm, _)| *arm == c.b)
                    .map(|(_, p)| format!("; the seed: {p}"))
                    .unwrap_or_default();
                findings.push(Finding::new(
                    Severity::Info,
                    "udp-rx-paired",
                    format!(
                        "{} against {}: {what} {}",
                        c.b,
                        c.a,
                        st.direction().unwrap_or("not shown to differ")
                    ),
                    format!(
                        "{}{}{published}",
                        describe(st, unit),
                        c.get("min_us")
                            .filter(|_| metric == "p50_us")
                            .map(|m| format!("; lowest round trip: {}", describe(m, " us")))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
        // Each arm's figures beside the seed's (its statistic for latency
        // is the lowest round trip of a second; ours are per run).
        let mut beside = vec![SEED_RATE_SOURCE.to_string()];
        for (arm, seed) in SEED_RATE {
            let ours = arms
                .iter()
                .find(|a| a.name == *arm)
                .and_then(|a| a.mean("packets_per_sec"))
                .map_or("not measured".into(), |v| format!("{v:.0} packets/s"));
            beside.push(format!("{arm:<13} ours: {ours}"));
            beside.push(format!("{:<13} seed: {seed}", ""));
        }
        beside.extend(
            SEED_RATE_OTHER
                .iter()
                .map(|l| format!("{:<13} seed: {l}", "(other)")),
        );
        beside.push(SEED_LATENCY_SOURCE.to_string());
        for (arm, seed) in SEED_LATENCY {
            let ours = arms
                .iter()
                .find(|a| a.name == *arm)
                .and_then(|a| Some((a.mean("min_us")?, a.mean("p50_us")?)))
                .map_or("not measured".into(), |(min, p50)| {
                    format!("min {min:.1} us, p50 {p50:.1} us (means over runs)")
                });
            beside.push(format!("{arm:<13} ours: {ours}"));
            beside.push(format!("{:<13} seed: {seed}", ""));
        }
        let mut drop_lines = Vec::new();
        for a in arms.iter().filter(|a| a.group == rate) {
            let mut sum: BTreeMap<&str, u64> = BTreeMap::new();
            for r in &a.runs {
                if let Some(k) = r.facts.get("kernel_drops") {
                    for key in [
                        "udp_rcvbuf_errors",
                        "udp_in_errors",
                        "veth_dropped",
                        "sent_not_received",
                    ] {
                        *sum.entry(key).or_default() += k[key].as_u64().unwrap_or(0);
                    }
                }
            }
            if a.runs.is_empty() {
                continue;
            }
            drop_lines.push(format!(
                "{:<10} over {} runs: Udp RcvbufErrors {}, Udp InErrors {}, veth dropped {}, sent but not received {}",
                a.name,
                a.runs.len(),
                sum.get("udp_rcvbuf_errors").unwrap_or(&0),
                sum.get("udp_in_errors").unwrap_or(&0),
                sum.get("veth_dropped").unwrap_or(&0),
                sum.get("sent_not_received").unwrap_or(&0)
            ));
        }
        // What the receiving veth's GRO handed to the stack, by size.
        let names = bucket_names(&UDP_SIZE_EDGES);
        let mut size_lines = vec![format!(
            "{:<10} {}  (bytes of IP packet; one 32-byte datagram is 60)",
            "arm",
            names
                .iter()
                .map(|n| format!(" {n:>11}"))
                .collect::<String>()
        )];
        for a in arms
            .iter()
            .filter(|a| a.group == rate && !a.runs.is_empty())
        {
            let mut sum = vec![0u64; names.len()];
            for r in &a.runs {
                if let Some(m) = r.facts.get("stack_packet_sizes") {
                    for (i, n) in names.iter().enumerate() {
                        sum[i] += m[n].as_u64().unwrap_or(0);
                    }
                }
            }
            size_lines.push(format!(
                "{:<10} {}",
                a.name,
                sum.iter().map(|v| format!(" {v:>11}")).collect::<String>()
            ));
        }
        let mut napi_lines = Vec::new();
        for a in arms.iter().filter(|a| a.group == latency) {
            if let Some(s) = a.settings.get("sockets_read_back") {
                napi_lines.push(format!(
                    "{:<13} client NAPI id {}, echo NAPI id {}, SO_BUSY_POLL read back {} us",
                    a.name, s["client_napi_id"], s["server_napi_id"], s["so_busy_poll_read_back"]
                ));
            }
        }
        Ok(Outcome {
            arms,
            comparisons,
            findings,
            sections: vec![
                Section {
                    title: "kernel drop counters per arm (receiving namespace)".into(),
                    lines: drop_lines,
                },
                Section {
                    title: "packets the receiving veth handed to the stack, by size (net:netif_receive_skb, all runs)".into(),
                    lines: size_lines,
                },
                Section {
                    title: "sockets of the ping-pong as the kernel reports them".into(),
                    lines: napi_lines,
                },
                Section {
                    title: "ours beside the seed's published figures (other hardware: two hosts, 10G NICs, 24 CPUs each; compare directions, not values)".into(),
                    lines: beside,
                },
            ],
            details: [
                (
                    "seed_rate".to_string(),
                    json!({
                        "source": SEED_RATE_SOURCE,
                        "by_arm": SEED_RATE.iter().map(|(a, p)| (a.to_string(), p.to_string())).collect::<BTreeMap<_, _>>(),
                        "other": SEED_RATE_OTHER,
                    }),
                ),
                (
                    "seed_latency".to_string(),
                    json!({
                        "source": SEED_LATENCY_SOURCE,
                        "by_arm": SEED_LATENCY.iter().map(|(a, p)| (a.to_string(), p.to_string())).collect::<BTreeMap<_, _>>(),
                    }),
                ),
                ("stack_packet_size_edges".to_string(), json!(UDP_SIZE_EDGES)),
            ]
            .into(),
            interrupted,
        })
    }
}
