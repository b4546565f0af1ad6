//! `vxlan-ip-id`: a tunnel hop that clears DF and randomises the outer IP
//! ID stops the receiver's GRO from merging VXLAN.
//!
//! The topology is offload-lab's [`VxlanPath`]: A and B talk VXLAN over
//! two veth underlays joined by a userspace TUN relay in M1/M2 that can
//! damage outer headers ([`Mode`]). B's underlay veth is the GRO receiver
//! (M2 sends to it with TSO off, `gro_flush_timeout` 1 ms). Arms: healthy,
//! scrambled (DF cleared, random IDs), random-id-df (DF set, random IDs).
//! After the arms, a post-GRO sample of the scrambled hop goes through
//! `offload analyze`'s library, which names the flow and the rule; a
//! sample of the random-id-df hop is replayed through the engine under the
//! 6.1 and 6.18 profiles (a model, labelled so).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::live::TracepointIds;
use crate::relay::{Mode, Relay};
use crate::sample::{self, SampleOptions};
use crate::topo::VxlanPath;
use offload_bench::TestKind;

use offload_report::{Finding, Severity};

use super::paired::{compare_all, describe};
use super::{
    bench_in, counted, figures, interleave, settings, Arm, Context, Experiment, Outcome, Section,
    ServerInNs, WARMUP,
};

/// The experiment.
#[derive(Debug)]
pub struct VxlanIpId;

const LIMITS: &[&str] = &[
    "the broken hop is a userspace TUN relay (Linux never scrambles IDs itself), so absolute throughput is the relay's",
    "veth has no RSS, IRQs or NIC LRO; the receiver's GRO is veth's (sender TSO off), with gro_flush_timeout 1 ms so that GRO holds trains across the relay's one-packet writes as a NIC's ring would",
    "figures come from a shared 2-vCPU VM: trust the paired difference, not the absolute numbers",
];

impl Experiment for VxlanIpId {
    fn name(&self) -> &'static str {
        "vxlan-ip-id"
    }

    fn claim(&self) -> &'static str {
        "a tunnel hop that clears DF and randomises the outer IP ID stops GRO from merging VXLAN at the receiver (220 -> 140 Mbit/s)"
    }

    fn source(&self) -> &'static str {
        "inet_gro_receive IP ID rule (net/ipv4/af_inet.c, 6.x); the VXLAN throughput report behind it"
    }

    fn limits(&self) -> &'static [&'static str] {
        LIMITS
    }

    fn run(&self, ctx: &Context<'_>) -> anyhow::Result<Outcome> {
        let mut path = VxlanPath::new()?;
        let relay = Relay::start(&path.m1.ns, &path.m1_tun, &path.m2.ns, &path.m2_tun)?;
        path.attach_tuns()?;
        let ids = TracepointIds::read()?;
        let server = ServerInNs::start(&path.b.ns, VxlanPath::B_INNER.into())?;
        let mut cfg = server.config(TestKind::TcpStream);
        cfg.duration = ctx.opts.duration;
        cfg.warmup = WARMUP;
        let modes = [Mode::Forward, Mode::Scramble, Mode::ScrambleKeepDf];
        let mut arms: Vec<Arm> = ["healthy", "scrambled", "random-id-df"]
            .iter()
            .map(|n| Arm::new(n))
            .collect();
        for (arm, mode) in arms.iter_mut().zip(modes) {
            arm.settings = settings([
                (
                    "middle_hop",
                    json!(match mode {
                        Mode::Forward => "forwards outer IPv4 headers unchanged (IDs increment, as the sender's GSO made them)",
                        Mode::Scramble => "clears DF and writes a random outer IP ID into every A->B packet",
                        Mode::ScrambleKeepDf => "sets DF and writes a random outer IP ID into every A->B packet (what 6.1 still merged)",
                    }),
                ),
                ("receiver", json!(path.b_dev)),
                ("receiver_knobs", json!(path.b.knobs(&path.b_dev)?)),
                (
                    "receiver_gro",
                    json!(path.b.ethtool().feature(&path.b_dev, "rx-gro")?),
                ),
                (
                    "test",
                    json!("tcp-stream A -> B over VXLAN (vni 42, port 4789), 1 flow"),
                ),
            ]);
        }
        let devices = vec![path.b_dev.clone()];
        let a_ns = &path.a.ns;
        let interrupted = interleave(ctx, &mut arms, |a, _| {
            relay.set_mode(modes[a]);
            let (r, counts) = counted(&ids, &devices, || bench_in(a_ns, &cfg))?;
            let mut f = figures(&r, &counts, Some(0));
            f.values.remove("transactions_per_sec");
            Ok(f)
        })?;
        let mut findings = Vec::new();
        let mut sections = Vec::new();
        let mut details = BTreeMap::new();
        if !interrupted {
            let b_index = path.b.index(&path.b_dev)?;
            let mut sample_cfg = cfg.clone();
            sample_cfg.duration = Duration::from_secs(2);
            let b_ns = &path.b.ns;
            let b_dev = path.b_dev.clone();
            let take = |mode: Mode, profiles: Vec<offload::gro::KernelLine>| {
                relay.set_mode(mode);
                let dev = b_dev.clone();
                std::thread::scope(|s| -> anyhow::Result<_> {
                    let traffic = s.spawn(|| bench_in(a_ns, &sample_cfg));
                    let never = AtomicBool::new(false);
                    let rep = b_ns.run(|| {
                        sample::sample(
                            &[(dev, b_index)],
                            &SampleOptions {
                                count: 3000,
                                timeout: Duration::from_secs(3),
                                keep: None,
                                profiles,
                            },
                            &never,
                        )
                    });
                    let _ = traffic.join();
                    Ok(rep?)
                })
            };
            ctx.say("  sampling 3000 post-GRO frames behind the scrambling hop");
            let scrambled = take(Mode::Scramble, Vec::new())?;
            // Only findings about a flow: the sample is post-GRO, so verdicts
            // about BIG TCP from it would be about the capture, not the host.
            for f in scrambled
                .analysis
                .findings
                .iter()
                .filter(|f| f.flow.is_some())
            {
                // The analysis's finding as it is (one Finding type),
                // under this experiment's kind.
                let mut x = f.clone();
                x.kind = "vxlan-ip-id-analysis";
                x.rank = 0;
                findings.push(x);
            }
            let mut lines = Vec::new();
            for (dev, d) in &scrambled.devices {
                lines.push(format!(
                    "{dev}: {} frames, {} super-packets, {} single packets",
                    d.frames, d.super_packets, d.single_packets
                ));
            }
            sections.push(Section {
                title: "post-GRO sample behind the scrambling hop".into(),
                lines,
            });
            details.insert(
                "sample_scrambled".into(),
                json!({"frames": scrambled.frames, "devices": scrambled.devices}),
            );
            ctx.say("  sampling 3000 post-GRO frames behind the random-id-df hop");
            let df = take(
                Mode::ScrambleKeepDf,
                vec![
                    offload::gro::KernelLine::V6_1,
                    offload::gro::KernelLine::V6_18,
                ],
            )?;
            details.insert(
                "random_id_df_model".into(),
                json!({
                    "note": "model: the random-id-df arm's post-GRO sample replayed through the engine's kernel profiles (what GRO at 64 KiB would merge under each line), not a run of those kernels",
                    "frames": df.frames,
                    "what_if": df.what_if,
                }),
            );
            sections.push(Section {
                title: "random-id-df sample through the engine's kernel profiles (a model, not those kernels)".into(),
                lines: df
                    .what_if
                    .iter()
                    .map(|w| {
                        format!(
                            "{} profile: {} frames -> {} stack packets, {:.1}:1",
                            w.kernel, w.frames_in, w.stack_packets, w.merge_ratio
                        )
                    })
                    .collect(),
            });
            if let (Some(old), Some(new)) = (
                df.what_if.iter().find(|w| w.kernel == "6.1"),
                df.what_if.iter().find(|w| w.kernel == "6.18"),
            ) {
                findings.push(
                    Finding::new(
                        Severity::Info,
                        "vxlan-ip-id-model",
                        format!(
                            "model: with DF set and random outer IDs the engine's 6.1 profile merges this sample {:.1}:1, its 6.18 profile {:.1}:1",
                            old.merge_ratio, new.merge_ratio
                        ),
                        "6.1 ignored the IP ID of DF-set (atomic) outer headers; 6.18 accepts only incrementing or fixed IDs whatever DF says, so a hop that randomises IDs breaks GRO after an upgrade even when it keeps DF. The ratio depends on the sample (a model replay, not a 6.1 kernel)",
                    )
                    .with_fix("make the hop keep the IDs it received (or a fixed ID with DF set)"),
                );
            }
        }
        let comparisons = compare_all(&arms, &[(0, 1), (0, 2)]);
        if let (Some(h), Some(s)) = (
            arms[0].mean("gro_merge_ratio"),
            arms[1].mean("gro_merge_ratio"),
        ) {
            let shown = comparisons
                .first()
                .and_then(|c| c.get("gro_merge_ratio"))
                .map(|st| format!(" (paired: {})", describe(st, "")))
                .unwrap_or_default();
            findings.insert(
                0,
                Finding::new(
                    if h >= 5.0 * s { Severity::High } else { Severity::Info },
                    "vxlan-ip-id-merge",
                    format!(
                        "receiver GRO merges {h:.1} packets per stack packet behind a healthy hop, {s:.1} behind the scrambling one"
                    ),
                    format!(
                        "on {} (B's underlay, veth GRO): net:napi_gro_receive_entry / net:netif_receive_skb{shown}; outer headers without DF must carry consecutive IP IDs to merge; flow {} -> {} udp/{} (VXLAN vni 42)",
                        path.b_dev,
                        VxlanPath::A_OUTER,
                        VxlanPath::B_OUTER,
                        VxlanPath::PORT
                    ),
                )
                .with_device(path.b_dev.clone())
                .with_citation("inet_gro_receive, net/ipv4/af_inet.c")
                .with_fix("fix the middle hop: keep DF, or keep the sender's IP IDs"),
            );
        }
        let st = relay.stats();
        let (fw, bw, rw, er) = (
            st.forward.load(Ordering::Relaxed),
            st.backward.load(Ordering::Relaxed),
            st.rewritten.load(Ordering::Relaxed),
            st.errors.load(Ordering::Relaxed),
        );
        sections.push(Section {
            title: "middle hop (TUN relay)".into(),
            lines: vec![format!(
                "{fw} packets A->B, {bw} B->A, {rw} rewritten, {er} read/write errors (counted, not fatal)"
            )],
        });
        details.insert(
            "relay".into(),
            json!({"forwarded": fw, "backward": bw, "rewritten": rw, "errors": er}),
        );
        drop(server);
        drop(relay);
        Ok(Outcome {
            arms,
            comparisons,
            findings,
            sections,
            details,
            interrupted,
        })
    }
}
