//! Findings: what a network engineer should know about the capture, in
//! plain language, each with its evidence and the fix, ranked by severity
//! and by how many extra packets the receiving stack pays for it.

use crate::dissect;
use crate::figures::FlowWhatIf;
use crate::flow::{BigPacketSide, FlowStats};
use crate::options::Options;
use crate::report::FlowReport;
use offload::gro::FlushReason;
use offload_report::{Evidence, Finding, FlowRef, Severity};

pub(crate) fn flow_ref(r: &FlowReport) -> FlowRef {
    FlowRef {
        id: r.id,
        description: r.description.clone(),
        protocol: r.protocol,
        src: r.src.clone(),
        dst: r.dst.clone(),
        sport: r.sport,
        dport: r.dport,
        tunnel: r.tunnel.as_ref().map(|t| t.label()),
        capture: Some(r.file.clone()),
    }
}

fn endpoint(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// An outer endpoint: with its port for UDP tunnels, the address alone
/// for GRE and IP in IP.
fn endpoint_opt(addr: &str, port: Option<u16>) -> String {
    match port {
        Some(p) => endpoint(addr, p),
        None => addr.to_string(),
    }
}

fn frames_list(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// The index of the size used for "today's" figures: the first size not
/// above 64 KiB, else the first.
pub fn base_index(sizes: &[u32]) -> usize {
    sizes.iter().position(|s| *s <= 65536).unwrap_or(0)
}

/// The index of the BIG TCP size compared with the base: the largest.
pub fn big_index(sizes: &[u32]) -> Option<usize> {
    let (i, s) = sizes.iter().enumerate().max_by_key(|(_, s)| **s)?;
    (*s > 65536).then_some(i)
}

struct Ctx<'a> {
    opts: &'a Options,
    file_name: &'a dyn Fn(usize) -> String,
    out: Vec<Finding>,
}

/// Findings whose rule depends on the kernel line: they carry it.
const KERNEL_DEPENDENT: [&str; 3] = ["ip-id-rule", "big-tcp-ipv6-tunnel", "big-tcp-gain"];

impl Ctx<'_> {
    /// Adds a finding (the shared [`Finding`]) and returns it for the
    /// citation. A cost of 0 extra packets is no cost: `extra_packets`
    /// stays null.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        severity: Severity,
        kind: &'static str,
        flow: Option<&FlowReport>,
        file: usize,
        title: String,
        detail: String,
        frames: Vec<u64>,
        counts: Vec<(&str, u64)>,
        fix: String,
        extra_packets: u64,
    ) -> &mut Finding {
        let mut f = Finding::new(severity, kind, title, detail)
            .with_evidence(Evidence {
                file: (self.file_name)(file),
                frames,
                counts: counts
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            })
            .with_fix(fix);
        if let Some(r) = flow {
            f = f.with_flow(flow_ref(r));
        }
        if extra_packets > 0 {
            f = f.with_extra_packets(extra_packets);
        }
        if KERNEL_DEPENDENT.contains(&kind) {
            f = f.with_kernel(self.opts.kernel.to_string());
        }
        self.out.push(f);
        self.out.last_mut().expect("just pushed")
    }
}

/// Computes the ranked findings. `adjusted[flow][size]` are the per-flow
/// what-if figures after the kernel profile.
pub fn find(
    flows: &[FlowStats],
    reports: &[FlowReport],
    adjusted: &[Vec<FlowWhatIf>],
    opts: &Options,
    file_name: &dyn Fn(usize) -> String,
) -> Vec<Finding> {
    let mut cx = Ctx {
        opts,
        file_name,
        out: Vec::new(),
    };
    let bi = base_index(&opts.gro_sizes);
    for ((f, r), adj) in flows.iter().zip(reports).zip(adjusted) {
        let Some(w) = adj.get(bi) else { continue };
        tunnel_findings(&mut cx, f, r, w);
        outer_keyed_tunnel(&mut cx, f, r, w, &f.healthy_what_if[bi]);
        plain_ip_id(&mut cx, f, r, w);
        checksum_findings(&mut cx, f, r, w);
        churn_findings(&mut cx, f, r, w);
        retrans_findings(&mut cx, f, r, w);
        above_mtu(&mut cx, f, r);
        table_full(&mut cx, f, r, w);
        cut_in_headers(&mut cx, f, r);
        options_cut(&mut cx, f, r);
        ipv6_tunnel_big_tcp(&mut cx, f, r, adj);
    }
    big_tcp(&mut cx, flows, reports, adjusted);
    let mut out = cx.out;
    offload_report::rank(&mut out);
    out
}

/// The headline: a tunnel whose IP IDs (outer, inner or both) stop GRO.
/// The cost is measured against the same frames with fixed IDs (the
/// healthy-tunnel run), so it never counts what IDs could not have caused.
fn tunnel_findings(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, w: &FlowWhatIf) {
    let (Some(t), Some(outer)) = (r.tunnel.as_ref(), f.outer.as_ref()) else {
        return;
    };
    // A tunnel the kernel's GRO does not open (GTP-U, GRE in UDP, AYIYA,
    // AH) has no healthy-tunnel figure: its IDs cost nothing GRO could
    // have merged (decision 0231).
    if !t.kernel_gro {
        return;
    }
    let profile = cx.opts.kernel;
    let outer_df = outer.df_set > outer.df_clear;
    let outer_bad = !profile.ip_ids_mergeable(outer.pattern(), outer_df, true);
    let inner_df = f.inner.df_set > f.inner.df_clear;
    let inner_bad = !f.key.v6 && !profile.ip_ids_mergeable(f.inner.pattern(), inner_df, false);
    if f.packets < 4 || !(outer_bad || inner_bad) {
        return;
    }
    // The healthy run must have seen every frame of the flow: a frame the
    // engine's walk cannot open as a tunnel it merges (GRE carrying a
    // protocol with no GRO offload, such as Aruba's 802.11: `gre_gro_receive`
    // finds no `gro_find_receive_by_type`; a frame cut inside its inner
    // headers) has no healthy version, and fixed IDs would not merge it.
    let healthy_run = &f.healthy_what_if[base_index(&cx.opts.gro_sizes)];
    if healthy_run.frames < w.frames || healthy_run.frames == 0 {
        return;
    }
    let healthy = healthy_run.packets.max(1);
    let now = w.packets.max(healthy);
    let factor = now as f64 / healthy as f64;
    if now < healthy + 4 || factor < 1.5 {
        // Too few mergeable packets in this direction for the rule to cost anything.
        return;
    }
    let describe = |h: &crate::flow::HeaderTrack, which: &str, df_set: bool| {
        let ex = &h.id_break_examples;
        let ids = ex
            .iter()
            .map(|x| x.1.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let frames: Vec<u64> = ex.iter().map(|x| x.0).collect();
        let text = format!(
            "{which} IPv4 {} and IP ID not incrementing ({}; frames {}: {ids})",
            if df_set { "DF=1" } else { "DF=0" },
            h.pattern().name(),
            frames_list(&frames),
        );
        (text, frames)
    };
    let mut causes = Vec::new();
    let mut frames = Vec::new();
    if outer_bad {
        let (text, fr) = describe(outer, "outer", outer_df);
        causes.push(text);
        frames.extend(fr);
    }
    if inner_bad {
        let (text, fr) = describe(&f.inner, "inner", inner_df);
        causes.push(text);
        frames.extend(fr);
    }
    frames.sort_unstable();
    frames.dedup();
    let which = match (outer_bad, inner_bad) {
        (true, true) => format!("outer and inner IP IDs {}", f.inner.pattern().name()),
        (true, false) => format!("outer IP ID {}", outer.pattern().name()),
        _ => format!("inner IP ID {}", f.inner.pattern().name()),
    };
    let mut fix = Vec::new();
    if outer_bad {
        fix.push(match profile {
            _ if profile.fixed_id_needs_df() => "set DF on the tunnel's outer header (`ip link set dev <vxlan> type vxlan df set`; GRE and IPIP: `pmtudisc`; or fix the middlebox that clears it): these kernels skip the outer ID check when DF is set; or make the endpoint increment the outer IP ID per packet",
            _ => "make the tunnel endpoint (or the middlebox rewriting it) increment the outer IP ID per packet, or keep it constant: kernel 6.18+ checks outer IDs whatever DF says and merges only incrementing or fixed IDs",
        });
    }
    if inner_bad {
        fix.push("make the inner sender increment the IP ID per segment (Linux does per socket) or set DF with a fixed ID; a NAT or middlebox inside the tunnel that randomises IDs must preserve them");
    }
    let outer_name = format!(
        "{} flow {} -> {}",
        t.kind.to_uppercase(),
        endpoint_opt(&t.src, t.sport),
        endpoint_opt(&t.dst, t.dport)
    );
    let id = match (t.vni, t.gre_key) {
        (Some(v), _) => format!("VNI {v}, "),
        (_, Some(k)) => format!("key {k}, "),
        _ => String::new(),
    };
    cx.push(
        Severity::High,
        "ip-id-rule",
        Some(r),
        f.file,
        format!("{outer_name}: GRO cannot merge ({which})"),
        format!(
            "{outer_name} ({id}inner {}): {}: the receiver's GRO (kernel {profile}) cannot merge, so its stack handles {:.0}x more packets ({now} instead of {healthy} with fixed IDs) for {} frames.",
            short_inner(r),
            causes.join("; "),
            factor,
            f.packets,
        ),
        frames,
        vec![
            ("frames", f.packets),
            ("outer_id_breaks", outer.id_breaks),
            ("inner_id_breaks", f.inner.id_breaks),
            ("stack_packets", now),
            ("healthy_tunnel_packets", healthy),
        ],
        fix.join("; "),
        now.saturating_sub(healthy),
    )
    .citation = Some(
        if outer_bad {
            FlushReason::OuterIpIdMismatch
        } else {
            FlushReason::IpIdMismatch
        }
        .citation()
        .to_string(),
    );
}

/// Frames the capture cut inside the headers GRO reads: the what-if
/// cannot judge them (it passes them up unmerged), so the flow's figures
/// and findings stand on the rest; the fix is a longer snapshot length.
fn cut_in_headers(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport) {
    let s = &f.snap;
    if s.cut_in_headers_frames == 0 {
        return;
    }
    let needed = s.snaplen_needed.unwrap_or(0);
    cx.push(
        Severity::Medium,
        "snaplen",
        Some(r),
        f.file,
        format!(
            "{}: capture cut {} frames inside their headers (snaplen {}, needs at least {needed})",
            r.description,
            s.cut_in_headers_frames,
            s.snaplen_seen.unwrap_or(0)
        ),
        format!(
            "{} of {} frames end before the headers GRO reads do (captured {} bytes, headers need at least {needed}): the what-if cannot judge them and passes them up unmerged, so this flow's GRO figures and findings are not those of the traffic.",
            s.cut_in_headers_frames,
            f.packets,
            s.snaplen_seen.unwrap_or(0)
        ),
        vec![],
        vec![
            ("cut_in_headers_frames", s.cut_in_headers_frames),
            ("snaplen_needed", needed as u64),
        ],
        format!("capture again with a snapshot length of at least {needed} bytes (`tcpdump -s {needed}`), or whole frames"),
        0,
    );
}

/// ACKs the capture cut inside their TCP options: GRO's figures stand
/// (it merges no segment without payload), but the SACK blocks and
/// D-SACKs that tell a loss from a needless resend were not captured, so
/// the peer's loss figures are not the traffic's. Info: nothing is lost by
/// it on the wire; the fix is a longer snapshot length.
fn options_cut(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport) {
    let s = &f.snap;
    if s.options_cut_frames == 0 {
        return;
    }
    let needed = s.snaplen_needed.unwrap_or(0);
    cx.push(
        Severity::Info,
        "snaplen",
        Some(r),
        f.file,
        format!(
            "{}: capture cut the TCP options of {} segments without payload (snaplen {}, needs at least {needed})",
            r.description,
            s.options_cut_frames,
            s.snaplen_seen.unwrap_or(0)
        ),
        format!(
            "{} of {} frames are ACKs whose TCP options end after the {} bytes captured: their SACK blocks, D-SACKs and timestamps are unread, so the peer's SACK figures and the split of its resends into losses and needless (spurious) ones are not those of the traffic. GRO's figures stand: it merges no segment without payload.",
            s.options_cut_frames,
            f.packets,
            s.snaplen_seen.unwrap_or(0)
        ),
        vec![],
        vec![
            ("options_cut_frames", s.options_cut_frames),
            ("snaplen_needed", needed as u64),
        ],
        format!("capture again with a snapshot length of at least {needed} bytes (`tcpdump -s {needed}`), or whole frames"),
        0,
    );
}

/// BIG TCP through a tunnel with an IPv6 outer header on a line that
/// loses what GRO merges past 64 KiB there (`KernelLine::
/// ipv6_outer_tunnel_loss`: 5.19-6.19): the flow, the size at which it
/// happens and what is lost.
fn ipv6_tunnel_big_tcp(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, adj: &[FlowWhatIf]) {
    use offload::gro::LossReason;
    let Some((i, w)) = adj
        .iter()
        .enumerate()
        .filter(|(_, w)| w.lost_packets > 0)
        .min_by_key(|(i, _)| cx.opts.gro_sizes[*i])
    else {
        return;
    };
    let line = cx.opts.kernel;
    let size = cx.opts.gro_sizes[i];
    let what = match w.loss {
        Some(LossReason::Ipv6TunnelJumboMangled) => "delivers them mangled (the Hop-by-Hop Jumbo header where the outer UDP header was: the stack drops them as UDP)",
        _ => "drops them with a kernel WARNING (the Hop-by-Hop Jumbo header overwrites the tunnel's header)",
    };
    let citation = w.loss.map(|l| l.citation()).unwrap_or_default();
    cx.push(
        Severity::High,
        "big-tcp-ipv6-tunnel",
        Some(r),
        f.file,
        format!("BIG TCP with an IPv6-outer tunnel on kernel {line}: merged packets past 64 KiB are dropped ({})", r.description),
        format!(
            "{}: with gro_max_size {size}, GRO merges {} packets of this flow ({} segments) past 64 KiB of outer IPv6 payload, and kernel {line} {what}: those segments never reach the application and are retransmitted ({citation}).",
            r.description, w.lost_packets, w.lost_segments,
        ),
        w.first(FlushReason::SizeLimit).into_iter().collect(),
        vec![
            ("gro_max_size", size as u64),
            ("lost_packets", w.lost_packets),
            ("lost_segments", w.lost_segments),
        ],
        "keep gro_max_size (and gso_max_size) at 65536 on the devices that carry or underlie this tunnel (`ip link set dev DEV gro_max_size 65536 gso_max_size 65536`), carry the tunnel over IPv4, or run a 7.0+ kernel".into(),
        w.lost_segments,
    )
    .citation = w.loss.map(|l| l.citation().to_string());
}

fn short_inner(r: &FlowReport) -> String {
    format!(
        "{} {} -> {}",
        r.protocol.to_uppercase(),
        endpoint(&r.src, r.sport),
        endpoint(&r.dst, r.dport)
    )
}

/// A tunnel analyze keys by its outer header (GRE, IPIP/SIT, Geneve: the
/// engine merges them, analyze's dissection stops at the outer header)
/// whose packets merge far better with mergeable IDs: the healthy-tunnel
/// run found it and gives the figure a healthy tunnel reaches.
fn outer_keyed_tunnel(
    cx: &mut Ctx<'_>,
    f: &FlowStats,
    r: &FlowReport,
    w: &FlowWhatIf,
    healthy: &FlowWhatIf,
) {
    if f.key.tunnel.is_some() || healthy.frames == 0 || f.packets < 4 {
        return;
    }
    let (now, healthy) = (w.packets, healthy.packets.max(1));
    let factor = now as f64 / healthy as f64;
    if now < healthy + 4 || factor < 1.5 {
        return;
    }
    let h = &f.inner;
    let ex = &h.id_break_examples;
    let frames: Vec<u64> = ex.iter().map(|x| x.0).collect();
    let ids = ex
        .iter()
        .map(|x| x.1.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let outer_ids = !f.key.v6;
    let cause = if outer_ids {
        format!(
            "outer IPv4 DF {} and IP ID {} (frames {}: {ids})",
            h.df(),
            h.pattern().name(),
            frames_list(&frames)
        )
    } else {
        "inner IPv4 IDs that do not increment".to_string()
    };
    cx.push(
        Severity::High,
        "ip-id-rule",
        Some(r),
        f.file,
        format!(
            "tunnel {}: GRO cannot merge ({})",
            r.description,
            if outer_ids {
                format!("outer IP ID {}", h.pattern().name())
            } else {
                "inner IP IDs".to_string()
            }
        ),
        format!(
            "tunnel {}: {cause}: the receiver's GRO (kernel {}) hands its stack {now} packets where the same frames with mergeable IDs give {healthy} ({factor:.0}x) for {} frames.",
            r.description, cx.opts.kernel, f.packets
        ),
        frames,
        vec![
            ("frames", f.packets),
            ("outer_id_breaks", h.id_breaks),
            ("stack_packets", now),
            ("healthy_tunnel_packets", healthy),
        ],
        "make the tunnel endpoint (or the middlebox rewriting it) increment the outer IP ID per packet or keep it fixed with DF set; kernel 6.18+ checks outer IDs whatever DF says".into(),
        now - healthy,
    )
    .citation = Some(
        if outer_ids {
            FlushReason::OuterIpIdMismatch
        } else {
            FlushReason::IpIdMismatch
        }
        .citation()
        .to_string(),
    );
}

fn plain_ip_id(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, w: &FlowWhatIf) {
    if f.key.tunnel.is_some() || f.key.v6 || f.healthy_what_if.iter().any(|h| h.frames > 0) {
        return;
    }
    let n = w.count(FlushReason::IpIdMismatch) + w.count(FlushReason::DfChanged);
    // A capture after GRO (or before TSO) holds super-packets whose ID is
    // their first segment's, so consecutive ones step by the previous one's
    // segment count. The what-if engine, fed those already-merged packets,
    // flushes at each such step (it expects +1 per held packet, as
    // `inet_gro_flush` in net/ipv4/af_inet.c, 6.10+, does), yet the wire
    // segments they were made of were one ID apart and merged: those
    // flushes are the capture point's, not the sender's IDs'. Only the
    // flushes beyond them count against the IP ID rule.
    let n = n.saturating_sub(f.inner.super_packet_id_steps);
    if n == 0 || (n as f64) < 0.05 * w.frames as f64 {
        return;
    }
    let pattern = f.inner.pattern();
    let ex = &f.inner.id_break_examples;
    let mut frames: Vec<u64> = ex.iter().map(|x| x.0).collect();
    if frames.is_empty() {
        frames.extend(w.first(FlushReason::IpIdMismatch));
    }
    let ids = ex
        .iter()
        .map(|x| x.1.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let df = f.inner.df();
    cx.push(
        Severity::High,
        "ip-id-rule",
        Some(r),
        f.file,
        format!("{}: IP ID rule stops GRO ({} IDs, DF {df})", r.description, pattern.name()),
        format!(
            "{}: IPv4 IDs are {} with DF {df} (frames {}{}): GRO (kernel {}) flushes at {n} of {} frames.",
            r.description,
            pattern.name(),
            frames_list(&frames),
            if ids.is_empty() { String::new() } else { format!(": {ids}") },
            cx.opts.kernel,
            w.frames
        ),
        frames,
        vec![("ip-id-mismatch", n), ("frames", w.frames)],
        "make the sender increment the IP ID per segment (Linux does per socket); a middlebox or NAT randomising IDs must preserve them, or set DF and keep IDs fixed".into(),
        n,
    )
    .citation = Some(FlushReason::IpIdMismatch.citation().to_string());
}

fn checksum_findings(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, w: &FlowWhatIf) {
    if let Some(g) = r.tunnel.as_ref().filter(|t| t.gre_checksum != "n/a") {
        let c = g.gre_checksum_counts;
        if c.bad > 0 {
            cx.push(
                Severity::High,
                "gre-checksum",
                Some(r),
                f.file,
                format!("{}: bad GRE checksums", r.description),
                format!(
                    "{} of {} checked GRE checksums do not verify (first at frame {}): GRO hands such packets up unmerged and the receiving tunnel drops them (`gre_parse_header`, net/ipv4/gre_demux.c).",
                    c.bad,
                    c.valid + c.bad,
                    f.first_bad_outer_csum.unwrap_or(0)
                ),
                f.first_bad_outer_csum.into_iter().collect(),
                vec![("bad", c.bad), ("valid", c.valid)],
                "find the hop that rewrites the GRE payload or outer headers without fixing the checksum; or configure the tunnel without checksums (`ip link ... type gre` without `csum`)".into(),
                c.bad,
            );
        }
    } else if r
        .tunnel
        .as_ref()
        .is_some_and(|t| t.outer_udp_checksum != "n/a")
    {
        let c = f.outer_csum;
        if c.bad > 0 {
            cx.push(
                Severity::High,
                "outer-udp-checksum",
                Some(r),
                f.file,
                format!("{}: bad outer UDP checksums", r.description),
                format!(
                    "{} of {} checked outer UDP checksums do not verify (first at frame {}): GRO hands such packets up unmerged and the stack drops them.",
                    c.bad,
                    c.valid + c.bad + c.offloaded,
                    f.first_bad_outer_csum.unwrap_or(0)
                ),
                f.first_bad_outer_csum.into_iter().collect(),
                vec![("bad", c.bad), ("valid", c.valid)],
                "find the hop that rewrites the outer headers without fixing the checksum (NAT, tunnel gateway); or send zero outer checksums (IPv4)".into(),
                c.bad,
            );
        } else if c.zero > 0 && (c.valid + c.offloaded) > 0 {
            cx.push(
                Severity::Medium,
                "outer-udp-checksum",
                Some(r),
                f.file,
                format!("{}: outer UDP checksum sometimes zero", r.description),
                format!(
                    "{} packets carry a zero outer UDP checksum and {} a real one: GRO treats them as different flows and never merges across the two.",
                    c.zero,
                    c.valid + c.offloaded
                ),
                vec![],
                vec![("zero", c.zero), ("non_zero", c.valid + c.offloaded)],
                "configure every tunnel endpoint the same way (`udpcsum` or `noudpcsum` on the vxlan device)".into(),
                0,
            );
        } else if c.zero > 0 && r.tunnel.as_ref().is_some_and(|t| t.src.contains(':')) {
            cx.push(
                Severity::High,
                "outer-udp-checksum",
                Some(r),
                f.file,
                format!("{}: zero outer UDP checksum over IPv6", r.description),
                format!("{} IPv6 packets carry a zero UDP checksum: receivers without `udp6zerocsumrx` drop them.", c.zero),
                vec![],
                vec![("zero", c.zero)],
                "enable `udp6zerocsumtx`/`udp6zerocsumrx` on both vxlan devices, or turn outer checksums on".into(),
                0,
            );
        }
    }
    let bad = w.count(FlushReason::BadChecksum).max(f.l4_csum.bad);
    // `--no-checksum-check`: the user says the NIC fills the checksums
    // (a sender's capture), so a bad one is no finding; the counts stay
    // in the flow's figures.
    if bad > 0 && cx.opts.verify_checksums {
        cx.push(
            Severity::High,
            "bad-checksum",
            Some(r),
            f.file,
            format!("{}: {} packets with a bad {} checksum", r.description, bad, r.protocol.to_uppercase()),
            format!(
                "{bad} packets do not verify (first at frame {}): GRO passes them up unmerged and TCP drops them, which then costs retransmissions.",
                f.first_bad_l4_csum.or(w.first(FlushReason::BadChecksum)).unwrap_or(0)
            ),
            f.first_bad_l4_csum.or(w.first(FlushReason::BadChecksum)).into_iter().collect(),
            vec![("bad", bad)],
            "if this capture was taken on the sender, the checksums are offloaded: rerun with --no-checksum-check; otherwise look for a corrupting hop (cable, NIC, middlebox)".into(),
            bad,
        );
    }
}

fn churn_findings(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, w: &FlowWhatIf) {
    let frames = w.frames.max(1);
    let significant = |n: u64| n >= 3 && n as f64 >= 0.02 * frames as f64;
    let win = w.count(FlushReason::WindowChanged);
    if significant(win) {
        cx.push(
            Severity::Medium,
            "window-churn",
            Some(r),
            f.file,
            format!("{}: TCP window changes end GRO runs", r.description),
            format!(
                "the advertised window changes {} times between data segments (first at frame {}); GRO ends a run at each change ({win} flushes).",
                f.tcp.as_ref().map_or(0, |t| t.window_changes),
                w.first(FlushReason::WindowChanged).unwrap_or(0)
            ),
            w.first(FlushReason::WindowChanged).into_iter().collect(),
            vec![("window-changed", win), ("frames", w.frames)],
            "the sender's own receive window moves as its application reads: expected with two-way traffic; otherwise look for a middlebox rewriting windows, or raise net.ipv4.tcp_rmem so the window stays at its clamp".into(),
            win,
        );
    }
    let opt = w.count(FlushReason::OptionsChanged) + w.count(FlushReason::HeaderLengthChanged);
    if significant(opt) {
        cx.push(
            Severity::Medium,
            "option-churn",
            Some(r),
            f.file,
            format!("{}: TCP options change between segments", r.description),
            format!(
                "TCP options other than the timestamp values (or the header length) change {opt} times (first at frame {}): GRO needs identical options.",
                w.first(FlushReason::OptionsChanged).or(w.first(FlushReason::HeaderLengthChanged)).unwrap_or(0)
            ),
            w.first(FlushReason::OptionsChanged)
                .into_iter()
                .chain(w.first(FlushReason::HeaderLengthChanged))
                .min()
                .into_iter()
                .collect(),
            vec![("options-changed", opt)],
            "SACK blocks during loss recovery cause this (fix the loss); otherwise a middlebox adds or strips options".into(),
            opt,
        );
    }
    let ttl = w.count(FlushReason::TtlChanged)
        + w.count(FlushReason::HopLimitChanged)
        + w.count(FlushReason::OuterTtlChanged);
    // A TCP sender with ECN on sends its retransmissions (and pure ACKs)
    // Not-ECT and new data ECT (RFC 3168 section 6.1.5; Linux's
    // tcp_ecn_send, net/ipv4/tcp_output.c): the ECN field then changes at
    // every retransmission, which ends a GRO run by its sequence number
    // all the same. With no CE mark and no DSCP change, those TOS flushes
    // are the retransmissions' (their finding), not a TOS policy's: an ECN
    // sender's capture (Linux 6.18) of a path that dropped 55 segments had
    // 86 TOS changes, 54 TOS flushes and a MEDIUM TTL/TOS finding whose
    // fix blamed CE marks or DSCP re-marking.
    let ecn_off_retransmissions = f.inner.dscp_changes == 0
        && f.tcp.as_ref().is_some_and(|t| t.retransmissions > 0)
        && f.analysis.as_deref().is_some_and(|d| d.ecn.ce_marked == 0);
    let inner_tos = if ecn_off_retransmissions {
        0
    } else {
        w.count(FlushReason::TosChanged)
    };
    let tos = inner_tos + w.count(FlushReason::OuterTosChanged);
    let outer_changes = f
        .outer
        .as_ref()
        .map_or(0, |o| o.ttl_changes + o.tos_changes);
    if significant(ttl + tos) || significant(outer_changes) {
        let first = w
            .first(FlushReason::TtlChanged)
            .or(w.first(FlushReason::HopLimitChanged))
            .or(w.first(FlushReason::TosChanged))
            .or(f.inner.first_ttl_change)
            .or(f.inner.first_tos_change);
        cx.push(
            Severity::Medium,
            "ttl-tos-churn",
            Some(r),
            f.file,
            format!("{}: TTL/TOS changes between packets", r.description),
            format!(
                "TTL or hop limit changes {} times and TOS/traffic class {} times{} (first at frame {}): GRO merges only packets with equal TTL and TOS ({} flushes).",
                f.inner.ttl_changes,
                f.inner.tos_changes,
                if outer_changes > 0 { format!(", outer header {outer_changes} times") } else { String::new() },
                first.unwrap_or(0),
                ttl + tos
            ),
            first.into_iter().collect(),
            vec![("ttl-changed", ttl), ("tos-changed", tos), ("outer_changes", outer_changes)],
            "TTL changes: packets of one flow take paths of different length (ECMP/LAG hashing per packet): hash per flow. TOS changes: ECN CE marks from a congested queue or a DSCP re-marking policy applied per packet: mark per flow".into(),
            ttl + tos,
        );
    }
}

fn retrans_findings(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, w: &FlowWhatIf) {
    let Some(t) = f.tcp.as_ref() else { return };
    let breaks = w.count(FlushReason::SequenceBehind) + w.count(FlushReason::SequenceGap);
    if t.retransmissions + t.out_of_order == 0 {
        return;
    }
    let share = (t.retransmissions + t.out_of_order) as f64 / t.data_segments.max(1) as f64;
    let frames: Vec<u64> = [t.first_retransmission, t.first_out_of_order]
        .into_iter()
        .flatten()
        .collect();
    cx.push(
        if share > 0.01 { Severity::Medium } else { Severity::Info },
        "retransmissions",
        Some(r),
        f.file,
        format!("{}: retransmissions break GRO runs", r.description),
        format!(
            "{} retransmitted and {} out-of-order segments of {} (first at frames {}): each ends a GRO run ({breaks} sequence flushes).",
            t.retransmissions,
            t.out_of_order,
            t.data_segments,
            frames_list(&frames)
        ),
        frames,
        vec![
            ("retransmissions", t.retransmissions),
            ("out_of_order", t.out_of_order),
            ("sequence_flushes", breaks),
        ],
        "find the loss or reordering: NIC ring overruns (`ethtool -S`: rx_missed/rx_dropped), a congested link, or per-packet load balancing on the path".into(),
        breaks,
    );
}

fn above_mtu(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport) {
    if f.above_mtu == 0 {
        return;
    }
    let side = f.big_packet_side();
    let what = match side {
        BigPacketSide::SenderTso => "captured on the sending host before TSO/GSO split them: the wire carried MSS-sized segments",
        BigPacketSide::ReceiverGro => "captured on the receiving host after GRO/LRO merged them (or delivered whole over a virtual link)",
        BigPacketSide::Unknown => "super-packets from TSO/GSO (sender side) or GRO/LRO (receiver side); the capture does not tell which",
    };
    let ids = match (r.above_mtu.segments_from_ip_id, f.id_inferred_mss) {
        (Some(s), Some(m)) => format!("; IP ID steps say about {s:.1} segments each, MSS {m}"),
        _ => String::new(),
    };
    cx.push(
        Severity::Info,
        "above-mtu",
        Some(r),
        f.file,
        format!("{}: {} packets above the {}-byte MTU", r.description, f.above_mtu, cx.opts.mtu),
        format!(
            "{} packets are larger than the path MTU (largest {} bytes of IP, first at frame {}{}): {what}{ids}. Not a fault: offloads are working at this capture point.",
            f.above_mtu,
            f.largest_ip,
            f.first_above_mtu.unwrap_or(0),
            if f.above_mtu_len_zero > 0 { format!(", {} with IP length 0: BIG TCP", f.above_mtu_len_zero) } else { String::new() },
        ),
        f.first_above_mtu.into_iter().collect(),
        vec![("above_mtu", f.above_mtu), ("length_zero", f.above_mtu_len_zero)],
        "nothing to fix; to see wire-sized packets capture on the peer, or turn the offload off while capturing (`ethtool -K <dev> tso off gso off` on the sender, `gro off` on the receiver)".into(),
        0,
    );
}

fn table_full(cx: &mut Ctx<'_>, f: &FlowStats, r: &FlowReport, w: &FlowWhatIf) {
    let n = w.count(FlushReason::TableFull);
    if n < 3 || (n as f64) < 0.02 * w.frames as f64 {
        return;
    }
    cx.push(
        Severity::Medium,
        "table-full",
        Some(r),
        f.file,
        format!("{}: evicted from a full GRO table", r.description),
        format!("{n} runs ended because more than 8 flows shared its GRO bucket (first at frame {}).", w.first(FlushReason::TableFull).unwrap_or(0)),
        w.first(FlushReason::TableFull).into_iter().collect(),
        vec![("table-full", n)],
        "spread flows over more receive queues (RSS, `ethtool -L <dev> combined N`) so each NAPI sees fewer concurrent flows".into(),
        n,
    );
}

/// The reason that ends most runs of super-packets (natural ends and
/// obstacles, not pass-through), for explaining a missing gain.
fn dominant_end(adjusted: &[Vec<FlowWhatIf>], i: usize) -> Option<&'static str> {
    let mut counts: Vec<(FlushReason, u64)> = Vec::new();
    for a in adjusted {
        for h in &a[i].reasons {
            if h.reason.is_pass_through() || h.reason == FlushReason::EndOfInput {
                continue;
            }
            match counts.iter_mut().find(|x| x.0 == h.reason) {
                Some(x) => x.1 += h.count,
                None => counts.push((h.reason, h.count)),
            }
        }
    }
    counts.into_iter().max_by_key(|x| x.1).map(|x| x.0.name())
}

fn big_tcp(
    cx: &mut Ctx<'_>,
    flows: &[FlowStats],
    reports: &[FlowReport],
    adjusted: &[Vec<FlowWhatIf>],
) {
    let sizes = &cx.opts.gro_sizes;
    let bi = base_index(sizes);
    let Some(gi) = big_index(sizes) else { return };
    if gi == bi {
        return;
    }
    let (mut before, mut after) = (0u64, 0u64);
    let mut best: Option<(usize, u64, u64)> = None;
    for (i, adj) in adjusted.iter().enumerate() {
        let (a, b) = (adj[bi].packets, adj[gi].packets);
        before += a;
        after += b;
        let gain = a.saturating_sub(b);
        if gain > 0 && best.is_none_or(|x| gain > x.1.saturating_sub(x.2)) {
            best = Some((i, a, b));
        }
    }
    let big = sizes[gi];
    let profile = cx.opts.kernel;
    let merged_any = adjusted
        .iter()
        .any(|a| a[bi].super_packets > 0 || a[gi].super_packets > 0);
    if before <= after && !merged_any {
        cx.push(
            Severity::Info,
            "big-tcp-gain",
            None,
            0,
            format!("BIG TCP (gro_max_size {big}): no verdict from this capture"),
            "GRO would merge nothing here at any size: the frames are cut short by the capture, are already super-packets (a capture on the sender before TSO, or on the receiver after GRO), or carry no payload. Judge BIG TCP on a capture of wire-sized segments, e.g. taken on the receiver with GRO off.".to_string(),
            vec![],
            vec![("packets_base", before), ("packets_big", after)],
            "capture wire-sized segments (receiver with `ethtool -K <dev> gro off`, full snap length) and run offload analyze on that".into(),
            0,
        );
        return;
    }
    if before <= after {
        let v4 = flows
            .iter()
            .any(|f| !f.key.v6 && f.key.proto == dissect::PROTO_TCP);
        let why = if v4 && !profile.has_ipv4_big_tcp() {
            " (kernel 6.1 has no IPv4 BIG TCP)"
        } else {
            ""
        };
        cx.push(
            Severity::Info,
            "big-tcp-gain",
            None,
            0,
            format!("BIG TCP (gro_max_size {big}) would change nothing here{why}"),
            format!(
                "the stack would see {before} packets at gro_max_size {} and {after} at {big}: GRO runs end before 64 KiB{}.",
                sizes[bi],
                dominant_end(adjusted, bi)
                    .map(|r| format!(", most often at `{r}`"))
                    .unwrap_or_default()
            ),
            vec![],
            vec![("packets_base", before), ("packets_big", after)],
            "a larger gro_max_size pays only when runs are longer than 64 KiB: when they end at `psh`, the sender's own GSO packets are 64 KiB, so raise gso_max_size on the sender as well (BIG TCP on both ends); fix any obstacle listed above first".into(),
            0,
        );
        return;
    }
    let pct = 100.0 * (before - after) as f64 / before as f64;
    let (flow, flow_txt, file) = match best {
        Some((i, a, b)) => (
            Some(&reports[i]),
            format!(
                "; most for {}: {a} -> {b} packets ({:.0}% fewer)",
                reports[i].description,
                100.0 * (a - b) as f64 / a.max(1) as f64
            ),
            flows[i].file,
        ),
        None => (None, String::new(), 0),
    };
    cx.push(
        Severity::Info,
        "big-tcp-gain",
        flow,
        file,
        match best {
            Some((i, a, b)) => format!(
                "BIG TCP (gro_max_size {big}) would cut the packets the stack handles for {} by {:.0}% ({a} -> {b}); {pct:.0}% over all flows",
                reports[i].description,
                100.0 * (a - b) as f64 / a.max(1) as f64
            ),
            None => format!("BIG TCP (gro_max_size {big}) would cut the packets the stack handles by {pct:.0}%"),
        },
        format!(
            "with gro_max_size {big} the receiving stack would handle {after} packets instead of {before} at {} (kernel {profile}){flow_txt}.",
            sizes[bi]
        ),
        flow.map(|r| vec![r.first_frame]).unwrap_or_default(),
        vec![("packets_base", before), ("packets_big", after)],
        format!("on both ends: `ip link set dev <dev> gro_max_size {big} gso_max_size {big}` (IPv6) and `gro_ipv4_max_size {big} gso_ipv4_max_size {big}` (IPv4, kernel 6.3+); the driver must allow tso_max_size above 64 KiB"),
        0,
    );
}
