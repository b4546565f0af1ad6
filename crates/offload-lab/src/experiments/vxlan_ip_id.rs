//! `vxlan-ip-id`: a tunnel hop that clears DF and randomises the outer IP
//! ID stops the receiver's GRO from merging VXLAN.
//!
//! The topology is offload-lab's [`VxlanPath`]: A and B talk VXLAN over
//! two veth underlays joined by a userspace TUN relay in M1/M2 that can
//! damage outer headers ([`Mode`]). B's underlay veth is the GRO receiver
//! (M2 sends to it with TSO off, `gro_flush_timeout` 1 ms). Arms: healthy,
//! scrambled (DF cleared, random IDs), random-id-df (DF set, random IDs).
//! After the arms, a post-GRO sample of the scrambled hop goes through
//! `offload analyze`'s library, which names the flow and the rule. Then
//! each arm's wire frames, captured where M2 sends them to B, go through
//! the GRO of every kernel line at hand, in the same trains: the running
//! kernel's (the [`KernelGro`] oracle) and, with `--kernels`, Debian's 6.1
//! and 6.12 booted in QEMU guests ([`guests`]), labelled "measured"; the
//! engine's profiles of 6.1, 6.12 and 6.18 are shown beside them,
//! labelled "model" (the only figure for a line no guest ran).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use offload::gro::KernelLine;
use serde_json::{json, Value};

use crate::live::TracepointIds;
use crate::oracle::KernelGro;
use crate::relay::{Mode, Relay};
use crate::sample::{self, SampleOptions};
use crate::topo::VxlanPath;
use offload_bench::TestKind;
use offload_sys::packet::{CaptureOptions, PacketSocket, PACKET_OUTGOING};

use offload_report::{Finding, Severity};

use super::paired::{compare_all, describe};
use super::{
    bench_in, counted, figures, guests, interleave, settings, Arm, Context, Experiment, Outcome,
    Section, ServerInNs, WARMUP,
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
            let (r, counts, after_run) = counted(&ids, &devices, || bench_in(a_ns, &cfg))?;
            let mut f = figures(&r, &counts, Some(0));
            f.facts.insert("after_run".into(), json!(after_run));
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
            let kernels = kernel_lines(ctx, &path, &relay, &cfg, &modes, &arms)?;
            kernels.report(&mut sections, &mut details, &mut findings);
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

/// Wire frames of one arm captured per arm, in the oracle's addresses.
const WIRE_FRAMES: usize = 1024;
/// Frames skipped at the start of each capture (handshake, slow start).
const WIRE_SKIP: usize = 256;

/// The merge ratio of the same frames through each kernel line: measured
/// (the running kernel, and the guests' kernels when booted) and modelled
/// (the engine's profiles).
struct KernelLines {
    /// Arm names, in table order.
    arms: Vec<String>,
    /// Measured: (line, release, one replay per arm).
    measured: Vec<(String, String, Vec<guests::Replay>)>,
    /// Guest lines that were asked for but not measured, and why.
    missing: Vec<(String, String)>,
    /// Modelled: (line, one replay per arm).
    model: Vec<(&'static str, Vec<guests::Replay>)>,
}

/// Captures each arm's wire frames where they leave M2 for B, runs them
/// through the running kernel's GRO, the guests' and the engine's
/// profiles.
fn kernel_lines(
    ctx: &Context<'_>,
    path: &VxlanPath,
    relay: &Relay,
    cfg: &offload_bench::ClientConfig,
    modes: &[Mode],
    arms: &[Arm],
) -> anyhow::Result<KernelLines> {
    let m2_index = {
        let dev = path.m2_dev.clone();
        path.m2
            .ns
            .run(move || Ok(offload_sys::rtnl::Rtnl::open()?.link_by_name(&dev)?.index))?
    };
    let mut traffic_cfg = cfg.clone();
    traffic_cfg.duration = Duration::from_secs(2);
    let mut wire: Vec<Vec<Vec<u8>>> = Vec::new();
    for (arm, &mode) in arms.iter().zip(modes) {
        if ctx.cancelled() {
            break;
        }
        ctx.say(&format!(
            "  capturing {WIRE_FRAMES} wire frames of the {} arm where M2 sends them to B",
            arm.name
        ));
        relay.set_mode(mode);
        let frames = std::thread::scope(|s| -> anyhow::Result<_> {
            let traffic = s.spawn(|| bench_in(&path.a.ns, &traffic_cfg));
            let got = path.m2.ns.run(|| capture_wire(m2_index, ctx.cancel));
            let _ = traffic.join();
            Ok(got?)
        })?;
        wire.push(frames);
    }
    let names: Vec<String> = arms
        .iter()
        .take(wire.len())
        .map(|a| a.name.clone())
        .collect();
    let mut out = KernelLines {
        arms: names.clone(),
        measured: Vec::new(),
        missing: Vec::new(),
        model: Vec::new(),
    };
    for line in [KernelLine::V6_1, KernelLine::V6_12, KernelLine::V6_18] {
        out.model.push((
            line.name(),
            names
                .iter()
                .zip(&wire)
                .map(|(n, f)| guests::model_frames(line, n, f))
                .collect(),
        ));
    }
    if ctx.cancelled() {
        return Ok(out);
    }
    ctx.say("  the same frames through this kernel's GRO (TAP oracle)");
    let mut host = KernelGro::new(guests::replay_knobs())?;
    let mut here = Vec::new();
    for (n, f) in names.iter().zip(&wire) {
        here.push(guests::replay_frames(&mut host, n, f)?);
    }
    drop(host);
    let release = guests::running_release();
    let line = KernelLine::from_release(&release).map_or("this kernel", KernelLine::name);
    out.measured.push((line.to_string(), release, here));
    let Some(g) = &ctx.opts.guests else {
        return Ok(out);
    };
    let dir = guests::private_dir(g)?;
    let mut sweeper = guests::Sweeper::start(dir.path(), &g.share)?;
    let inputs: Vec<_> = names
        .iter()
        .zip(&wire)
        .map(|(n, f)| guests::write_frames(&dir, &format!("{n}.pcap"), f))
        .collect::<anyhow::Result<_>>()?;
    for line in &g.lines {
        if ctx.cancelled() {
            out.missing.push((line.clone(), "interrupted".into()));
            continue;
        }
        ctx.say(&format!(
            "  booting the {line} guest (QEMU, emulated CPU: about 25 s) to run the same frames through its GRO"
        ));
        match guests::run_guest(g, line, dir.path(), &inputs, ctx.cancel, &mut sweeper) {
            Ok(r) => {
                let mut files = r.files;
                files.sort_by_key(|f| names.iter().position(|n| *n == f.name));
                out.measured.push((line.clone(), r.release, files));
            }
            Err(e) if ctx.cancelled() => out.missing.push((line.clone(), format!("{e}"))),
            Err(e) => {
                return Err(e.context(format!(
                    "the {line} guest (--kernels none skips the guests)"
                )))
            }
        }
    }
    // Oldest first: the guests came after the running kernel.
    out.measured.sort_by_key(|(l, _, _)| {
        KernelLine::ALL
            .iter()
            .position(|k| k.name() == l)
            .unwrap_or(usize::MAX)
    });
    Ok(out)
}

/// [`WIRE_FRAMES`] VXLAN frames leaving M2's veth towards B (after
/// skipping [`WIRE_SKIP`]), readdressed for the oracle. Runs inside M2.
fn capture_wire(index: u32, cancel: &AtomicBool) -> offload_sys::Result<Vec<Vec<u8>>> {
    let mut sock = PacketSocket::open(
        index,
        CaptureOptions {
            ignore_outgoing: false,
            rcvbuf: 16 << 20,
            ..CaptureOptions::default()
        },
    )?;
    let start = std::time::Instant::now();
    let mut seen = 0usize;
    let mut out = Vec::with_capacity(WIRE_FRAMES);
    while out.len() < WIRE_FRAMES
        && start.elapsed() < Duration::from_secs(5)
        && !cancel.load(Ordering::Relaxed)
    {
        let Some(c) = sock.recv(Some(Duration::from_millis(100)))? else {
            continue;
        };
        let vxlan = c.frame.len() > 38
            && c.frame[12..14] == [0x08, 0x00]
            && c.frame[23] == 17
            && c.frame[36..38] == VxlanPath::PORT.to_be_bytes();
        if c.pkttype != PACKET_OUTGOING || !vxlan {
            continue;
        }
        seen += 1;
        if seen > WIRE_SKIP {
            if let Some(f) = guests::oracle_frame(c.frame) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

impl KernelLines {
    /// The table (sections), the figures (details) and the finding.
    fn report(
        &self,
        sections: &mut Vec<Section>,
        details: &mut BTreeMap<String, Value>,
        findings: &mut Vec<Finding>,
    ) {
        let ratio = |r: &guests::Replay| {
            r.merge_ratio()
                .map_or("-".to_string(), |v| format!("{v:.1}:1"))
        };
        let mut lines = vec![format!(
            "{} wire frames per arm, where M2 sends them to B, in trains of {} through a TAP's GRO (gro_max_size 65536, VXLAN device on port 4789)",
            self.measured
                .first()
                .and_then(|m| m.2.first())
                .map_or(0, |r| r.frames_in),
            guests::TRAIN_FRAMES
        )];
        let mut head = format!("{:<22}", "kernel");
        for a in &self.arms {
            head.push_str(&format!(" {a:>13}"));
        }
        lines.push(head);
        for (line, release, files) in &self.measured {
            let mut row = format!("{:<22}", format!("{line} measured"));
            for f in files {
                row.push_str(&format!(" {:>13}", ratio(f)));
            }
            row.push_str(&format!("  ({release})"));
            lines.push(row);
        }
        for (line, why) in &self.missing {
            lines.push(format!("{line} not measured: {why}"));
        }
        for (line, files) in &self.model {
            let mut row = format!("{:<22}", format!("{line} model"));
            for f in files {
                row.push_str(&format!(" {:>13}", ratio(f)));
            }
            lines.push(row);
        }
        if self.missing.is_empty()
            && !self
                .measured
                .iter()
                .any(|(l, _, _)| l == "6.1" || l == "6.12")
        {
            lines.push(
                "6.1 and 6.12 not measured: no guest kernel (scripts/kernel-vm.sh fetch all, then --kernels 6.1,6.12); their rows are the engine's model".into(),
            );
        }
        sections.push(Section {
            title:
                "merge ratio of the same frames per kernel line (packets into GRO per packet out)"
                    .into(),
            lines,
        });
        let entry = |files: &[guests::Replay]| -> Value {
            files
                .iter()
                .map(|f| {
                    (
                        f.name.clone(),
                        json!({
                            "frames_in": f.frames_in,
                            "frames_out": f.frames_out,
                            "merge_ratio": f.merge_ratio(),
                            "trains": f.trains,
                            "clean_trains": f.clean_trains,
                        }),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let mut per_line = serde_json::Map::new();
        for (line, release, files) in &self.measured {
            let mut v = entry(files);
            v["source"] = json!("measured");
            v["release"] = json!(release);
            per_line.insert(line.clone(), v);
        }
        let mut model = serde_json::Map::new();
        for (line, files) in &self.model {
            let mut v = entry(files);
            v["source"] = json!("model");
            model.insert(line.to_string(), v);
        }
        details.insert(
            "kernel_lines".into(),
            json!({
                "note": "the same wire frames of each arm through each kernel line's GRO, in trains of NAPI_POLL_WEIGHT frames; measured: that kernel ran them (the running one, or a QEMU guest of scripts/kernel-vm.sh); model: the engine's profile of that line",
                "train_frames": guests::TRAIN_FRAMES,
                "measured": per_line,
                "model": model,
                "not_measured": self.missing.iter().map(|(l, w)| json!({"line": l, "why": w})).collect::<Vec<_>>(),
            }),
        );
        // The random-id-df arm is the one the lines disagree on.
        let Some(i) = self.arms.iter().position(|a| a == "random-id-df") else {
            return;
        };
        let pick = |line: &str| -> Option<(f64, &'static str)> {
            if let Some((_, _, f)) = self.measured.iter().find(|(l, _, _)| l == line) {
                return Some((f.get(i)?.merge_ratio()?, "measured"));
            }
            let (_, f) = self.model.iter().find(|(l, _)| *l == line)?;
            Some((f.get(i)?.merge_ratio()?, "model"))
        };
        if let (Some((old, old_src)), Some((new, new_src))) = (pick("6.1"), pick("6.18")) {
            findings.push(
                Finding::new(
                    Severity::Info,
                    "vxlan-ip-id-kernels",
                    format!(
                        "with DF set and random outer IDs, 6.1 merges these frames {old:.1}:1 ({old_src}), 6.18 {new:.1}:1 ({new_src})"
                    ),
                    "6.1 ignored the IP ID of DF-set (atomic) outer headers; 6.18 accepts only incrementing or fixed IDs whatever DF says (inet_gro_receive, net/ipv4/af_inet.c), so a hop that randomises IDs breaks GRO after an upgrade even when it keeps DF",
                )
                .with_citation("inet_gro_receive, net/ipv4/af_inet.c")
                .with_fix("make the hop keep the IDs it received (or a fixed ID with DF set)"),
            );
        }
    }
}
