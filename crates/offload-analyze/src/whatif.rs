//! The GRO what-if: what a receiver running a given kernel, with a given
//! `gro_max_size`, would have handed its stack for this capture.
//!
//! The engine ([`offload::GroEngine`]) runs with the profile's kernel
//! line (`GroConfig::kernel`, see [`config_for`]): every rule that changed
//! between 6.1, 6.12, 6.18 and 7.x (IP ID rules for DF=0 and fixed IDs,
//! outer IDs, CWR and AccECN, IPv4 BIG TCP, IPv6 BIG TCP without HBH) is
//! chosen per packet there, so the figures need no per-flow correction.
//! The 6.1, 6.12 and 6.18 lines are checked against live kernels; 7.x is
//! derived from the source and marked as such in every report.
//!
//! Tunnelled flows (VXLAN, Geneve, GRE, IP in IP): the engine runs the
//! tunnel's GRO itself (outer and inner headers, `vxlan_gro_receive`,
//! `geneve_gro_receive`, `gre_gro_receive`, `ipip_gro_receive`), so a
//! tunnel's figure is the engine's. Beside it, every tunnelled frame is also fed, with its outer
//! and inner IPv4 IDs made fixed (ID 0, DF set, header checksum redone), to
//! a second engine: the "healthy tunnel" figure, what the receiver would
//! hand its stack if no IP ID rule stood in the way. Only the IDs change,
//! so that figure can never be worse than the real one (tested), and the
//! gap between the two is what the IP ID rule costs.
//!
use crate::dissect;
use crate::figures::{FlowWhatIf, RunTotals};
use crate::key::FlowKey;
use offload::gro::FlushReason;
use offload::gro::KernelLine;
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
use rustc_hash::FxHashMap;
use std::fmt;

/// Which frame to cite for a flush: the segment that caused it when the
/// reason is about the incoming segment, else the last merged one.
fn culprit(d: &Delivered<'_>, current: Option<u64>) -> u64 {
    if d.reason.is_pass_through() {
        return d.first_frame;
    }
    match (current, d.reason) {
        (_, FlushReason::Timeout | FlushReason::EndOfInput) => d.last_frame,
        (_, FlushReason::ShortSegment | FlushReason::PshFlag | FlushReason::FinFlag) => {
            d.last_frame
        }
        (Some(c), _) => c,
        (None, _) => d.last_frame,
    }
}

/// Maps frame numbers to flow slots for recently seen frames, so that a
/// delivered packet is attributed without dissecting it again.
struct Ring {
    slots: Vec<(u64, u32)>,
}

const RING: usize = 1 << 16;

impl Ring {
    fn new() -> Ring {
        Ring {
            slots: vec![(u64::MAX, 0); RING],
        }
    }
    fn put(&mut self, frame: u64, slot: u32) {
        self.slots[frame as usize & (RING - 1)] = (frame, slot);
    }
    fn get(&self, frame: u64) -> Option<u32> {
        let (f, s) = self.slots[frame as usize & (RING - 1)];
        (f == frame).then_some(s)
    }
}

/// Per-flow accumulation of one worker.
#[derive(Debug, Clone)]
pub struct WorkerFlow {
    pub key: FlowKey,
    /// The last frame fed: the eviction order, as in the pass's flow table.
    pub last_frame: u64,
    /// Deliveries at the worker's first size, for the GRO view.
    pub gro: crate::series::Decimated<crate::series::GroPoint>,
    /// Indexed like the worker's sizes.
    pub plain: Vec<FlowWhatIf>,
    /// The same frames with fixed IPv4 IDs (tunnelled flows only): the
    /// healthy-tunnel figure.
    pub healthy: Vec<FlowWhatIf>,
}

/// Runs one or more GRO sizes over a stream of frames and attributes every
/// delivered packet to its flow.
#[derive(Debug)]
pub struct WhatIfWorker {
    pub sizes: Vec<u32>,
    engines: Vec<GroEngine>,
    healthy_engines: Vec<GroEngine>,
    /// Scratch copy of the frame being normalised for the healthy engines.
    healthy_buf: Vec<u8>,
    /// Judge frames cut after their headers from headers and wire length
    /// (`TruncatedFrames::Headers`) instead of passing them up unmerged.
    header_only: bool,
    /// Scratch: a header-only frame at its wire length.
    pad_buf: Vec<u8>,
    index: FxHashMap<FlowKey, u32>,
    /// The previous frame's flow and slot (runs of one flow skip the hash).
    last: Option<(FlowKey, u32)>,
    pub flows: Vec<WorkerFlow>,
    pub totals: Vec<RunTotals>,
    ring: RingBox,
    vxlan_ports: Vec<u16>,
    scratch: Vec<Pending>,
    /// At most this many flows: the same cap and eviction order as the
    /// pass's flow table, so both keep the same flows.
    cap: usize,
}

/// A ring slot whose flow was evicted: its deliveries count in the totals
/// only.
const EVICTED: u32 = u32::MAX;

struct RingBox(Ring);

impl fmt::Debug for RingBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ring")
    }
}

/// The engine configuration for a size under a profile.
pub fn config_for(
    size: u32,
    line: KernelLine,
    verify_checksums: bool,
    vxlan_ports: &[u16],
    flush_timeout_ns: u64,
) -> GroConfig {
    GroConfig::for_kernel(line)
        .flush_timeout_ns(flush_timeout_ns)
        .gro_max_size(size)
        .gro_ipv4_max_size(if line.has_ipv4_big_tcp() {
            size
        } else {
            size.min(offload::gro::GRO_LEGACY_MAX_SIZE)
        })
        .verify_checksums(verify_checksums)
        .vxlan_ports(vxlan_ports.to_vec())
}

impl WhatIfWorker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        file: usize,
        sizes: Vec<u32>,
        line: KernelLine,
        verify_checksums: bool,
        vxlan_ports: Vec<u16>,
        max_flows: usize,
        header_only: bool,
        flush_timeout_ns: u64,
    ) -> Self {
        // Only the first engine verifies checksums; the others are told the
        // verdict (see `feed`): verifying costs a pass over every payload.
        let mk = || {
            sizes
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut e = GroEngine::new(config_for(
                        *s,
                        line,
                        verify_checksums && i == 0,
                        &vxlan_ports,
                        flush_timeout_ns,
                    ));
                    // The what-if counts packets and reads only their
                    // headers: merged payloads stay in the capture's
                    // frames (never read back), so no payload is copied.
                    // Zero-copy is the engine's default; it is set here
                    // because this code relies on it.
                    e.set_zero_copy(true);
                    e
                })
                .collect::<Vec<_>>()
        };
        WhatIfWorker {
            engines: mk(),
            healthy_engines: mk(),
            healthy_buf: Vec::new(),
            header_only,
            pad_buf: Vec::new(),
            totals: vec![
                RunTotals {
                    file,
                    ..Default::default()
                };
                sizes.len()
            ],
            sizes,
            index: FxHashMap::default(),
            last: None,
            flows: Vec::new(),
            ring: RingBox(Ring::new()),
            vxlan_ports,
            scratch: Vec::new(),
            cap: max_flows.max(1),
        }
    }

    /// Evicts the least recently active flows (see `flow::eviction_set`);
    /// ring entries of evicted flows point nowhere, the others follow their
    /// flow's new slot.
    fn evict(&mut self) {
        self.last = None;
        let evict = crate::flow::eviction_set(self.flows.iter().map(|f| f.last_frame));
        let mut map = vec![EVICTED; evict.len()];
        let mut kept = 0u32;
        for (i, m) in map.iter_mut().enumerate() {
            if !evict[i] {
                *m = kept;
                kept += 1;
            }
        }
        let mut i = 0;
        self.flows.retain(|_| {
            i += 1;
            !evict[i - 1]
        });
        self.index.retain(|_, v| {
            *v = map[*v as usize];
            *v != EVICTED
        });
        for (f, s) in &mut self.ring.0.slots {
            if *f != u64::MAX && *s != EVICTED {
                *s = map[*s as usize];
            }
        }
    }

    fn slot_of(&mut self, key: FlowKey, frame: u64) -> u32 {
        if let Some((k, s)) = self.last {
            if k == key {
                self.flows[s as usize].last_frame = frame;
                return s;
            }
        }
        let s = self.lookup(key, frame);
        self.last = Some((key, s));
        s
    }

    fn lookup(&mut self, key: FlowKey, frame: u64) -> u32 {
        let n = self.sizes.len();
        if self.flows.len() >= self.cap && !self.index.contains_key(&key) {
            self.evict();
        }
        let flows = &mut self.flows;
        let s = *self.index.entry(key).or_insert_with(|| {
            flows.push(WorkerFlow {
                key,
                last_frame: frame,
                gro: Default::default(),
                plain: vec![FlowWhatIf::default(); n],
                healthy: vec![FlowWhatIf::default(); n],
            });
            (flows.len() - 1) as u32
        });
        self.flows[s as usize].last_frame = frame;
        s
    }

    /// Feeds one frame; `parsed` is its dissection and flow key, if any.
    ///
    /// A frame the capture cut short after its headers (`tcpdump -s N`,
    /// [`dissect::Snap::HeadersOnly`]) is fed at its wire length
    /// (`orig_len`), the missing payload as filler, with its checksums
    /// marked as verified (`CHECKSUM_UNNECESSARY`): GRO decides on headers
    /// and lengths, and reads payload bytes only to verify checksums, which
    /// the capture cannot show. So the figures are those of the whole
    /// capture whenever its checksums were valid. A frame cut inside its
    /// headers goes in as it is, and the engine passes it up unmerged
    /// (`capture-truncated`).
    pub fn feed(&mut self, input: Input<'_>, parsed: Option<(&dissect::Parsed, FlowKey)>) {
        let mut pad_buf = std::mem::take(&mut self.pad_buf);
        let mut csum = offload::RxChecksum::None;
        let input = if self.header_only
            && (input.data.len() as u64) < input.orig_len as u64
            && dissect::snap(input.link, input.data, input.orig_len, &self.vxlan_ports)
                == dissect::Snap::HeadersOnly
        {
            pad_buf.clear();
            pad_buf.extend_from_slice(input.data);
            pad_buf.resize(input.orig_len as usize, 0);
            // Every checksum level a tunnel can have (outer UDP or GRE,
            // inner transport), as a NIC that verified them says.
            csum = offload::RxChecksum::Unnecessary { level: 2 };
            Input {
                data: &pad_buf,
                ..input
            }
        } else {
            input
        };
        self.feed_checked(input, parsed, csum);
        self.pad_buf = pad_buf;
    }

    fn feed_checked(
        &mut self,
        input: Input<'_>,
        parsed: Option<(&dissect::Parsed, FlowKey)>,
        csum: offload::RxChecksum,
    ) {
        let slot = parsed.map(|(_, key)| self.slot_of(key, input.frame));
        let parsed = parsed.map(|(p, _)| p);
        if let Some(s) = slot {
            self.ring.0.put(input.frame, s);
        }
        let mut healthy_buf = std::mem::take(&mut self.healthy_buf);
        let healthy_frame = match parsed.filter(|p| may_be_tunnel(p)) {
            Some(_) => {
                healthy_buf.clear();
                healthy_buf.extend_from_slice(input.data);
                healthy_tunnel(&mut healthy_buf, input.link, &self.vxlan_ports)
                    .then_some(healthy_buf.as_slice())
            }
            None => None,
        };
        let mut pending = std::mem::take(&mut self.scratch);
        for t in &mut self.totals {
            t.frames_in += 1;
        }
        let WhatIfWorker {
            engines,
            healthy_engines,
            ring,
            flows,
            ..
        } = self;
        // A frame the first engine rejected for its checksum passes up
        // unmerged without touching any held packet (`tcp_gro_receive`,
        // `udp_gro_receive`): the other engines are not fed it and get the
        // same delivery, so that the checksum is verified once per frame.
        let (mut bad, mut bad_healthy) = (false, false);
        for (i, engine) in engines.iter_mut().enumerate() {
            if let Some(s) = slot {
                flows[s as usize].plain[i].frames += 1;
            }
            if i > 0 && bad {
                pending.push(Pending::bad_checksum(
                    i,
                    false,
                    slot,
                    input.frame,
                    input.data.len(),
                    input.timestamp_ns,
                ));
            } else {
                engine.receive_with_checksum(input, csum, &mut |d: &Delivered<'_>| {
                    pending.push(Pending::of(d, i, false, Some(input.frame), &ring.0));
                });
                if i == 0 {
                    bad = pending
                        .iter()
                        .any(|p| p.is_bad_checksum_of(input.frame, false));
                }
            }
            if let Some(healthy) = healthy_frame {
                if let Some(s) = slot {
                    flows[s as usize].healthy[i].frames += 1;
                }
                if i > 0 && bad_healthy {
                    pending.push(Pending::bad_checksum(
                        i,
                        true,
                        slot,
                        input.frame,
                        healthy.len(),
                        input.timestamp_ns,
                    ));
                    continue;
                }
                let inp = Input {
                    data: healthy,
                    ..input
                };
                healthy_engines[i].receive_with_checksum(inp, csum, &mut |d: &Delivered<'_>| {
                    pending.push(Pending::of(d, i, true, Some(input.frame), &ring.0));
                });
                if i == 0 {
                    bad_healthy = pending
                        .iter()
                        .any(|p| p.is_bad_checksum_of(input.frame, true));
                }
            }
        }
        self.healthy_buf = healthy_buf;
        self.account(&mut pending);
        self.scratch = pending;
    }

    /// Attributes deliveries to flows and totals.
    fn account(&mut self, pending: &mut Vec<Pending>) {
        for p in pending.drain(..) {
            // A packet whose first frame left the ring is looked up by its
            // headers; an evicted flow's packet counts in the totals only.
            let slot = match (p.slot, p.miss) {
                (Some(EVICTED), _) => None,
                (Some(s), _) => Some(s),
                (None, Some((data, link))) => {
                    dissect::parse(link, &data, data.len() as u32, &self.vxlan_ports)
                        .and_then(|x| self.index.get(&FlowKey::of(&x)).copied())
                }
                (None, None) => None,
            };
            if !p.healthy {
                let t = &mut self.totals[p.i];
                t.packets_out += 1;
                if p.loss.is_some() {
                    t.lost_packets += 1;
                    t.lost_segments += p.segs as u64;
                    t.loss = t.loss.or(p.loss);
                }
                if p.segs > 1 {
                    t.super_packets += 1;
                }
                t.largest = t.largest.max(p.len);
                t.hit(p.reason, p.frame);
            }
            if let Some(s) = slot {
                let f = &mut self.flows[s as usize];
                let w = if p.healthy {
                    &mut f.healthy[p.i]
                } else {
                    &mut f.plain[p.i]
                };
                w.packets += 1;
                if p.segs > 1 {
                    w.super_packets += 1;
                }
                w.largest = w.largest.max(p.len);
                w.hit(p.reason, p.frame);
                if p.loss.is_some() {
                    w.lost_packets += 1;
                    w.lost_segments += p.segs as u64;
                    w.loss = w.loss.or(p.loss);
                }
                if p.i == 0 && !p.healthy {
                    f.gro.push(crate::series::GroPoint {
                        t_ns: p.ts,
                        t: 0.0,
                        segments: p.segs,
                        reason: p.reason,
                    });
                }
            }
        }
    }

    /// Completes everything held, at the end of one input file (frame
    /// numbers restart with the next file).
    pub fn finish(&mut self) {
        let mut pending: Vec<Pending> = Vec::new();
        let WhatIfWorker {
            engines,
            healthy_engines,
            ring,
            ..
        } = self;
        for (i, (e, ie)) in engines
            .iter_mut()
            .zip(healthy_engines.iter_mut())
            .enumerate()
        {
            e.finish(&mut |d: &Delivered<'_>| {
                pending.push(Pending::of(d, i, false, None, &ring.0))
            });
            ie.finish(&mut |d: &Delivered<'_>| {
                pending.push(Pending::of(d, i, true, None, &ring.0))
            });
        }
        self.account(&mut pending);
        self.ring = RingBox(Ring::new());
    }
}

/// A frame that may carry a tunnel the engine merges: VXLAN (as dissected),
/// IP in IP (IPIP, SIT, IPv6 in IPv6, IPv4 in IPv6), GRE, or UDP to the
/// Geneve port. Only these are walked for the healthy-tunnel run.
fn may_be_tunnel(p: &dissect::Parsed) -> bool {
    p.tunnel.is_some()
        || matches!(p.ip.proto, 4 | 41 | 47)
        || (p.ip.proto == dissect::PROTO_UDP && p.dport == offload::wire::geneve::PORT)
}

/// Rewrites a tunnelled frame, in place, into what a healthy tunnel would
/// have sent: the outer IPv4 header's ID made mergeable on every kernel
/// line (fixed at 0 with DF set: 6.18 merges fixed IDs, and 6.1-6.17 do not
/// check an outer ID under DF), the inner IPv4 ID likewise, each header
/// checksum redone. Everything else the rewrite touches stays consistent:
/// a valid IPv4 header always sums to 0xffff, so rewriting the inner one
/// leaves the one's-complement sum of the tunnel payload, and with it a
/// non-zero outer UDP or GRE checksum, valid; a zero outer UDP checksum
/// stays zero (none of the outer IPv4 fields changed enters the UDP
/// pseudo-header). Finds the headers with the engine's walk
/// (`offload::gso::layout`) for every tunnel kind it merges: VXLAN,
/// Geneve, GRE, IPIP/SIT/IP6IP6, IPv4 or IPv6 outer (an IPv6 outer header
/// has no ID: only the inner one changes). False when the frame is no
/// tunnel.
pub fn healthy_tunnel(frame: &mut [u8], link: offload::LinkKind, vxlan_ports: &[u16]) -> bool {
    let Ok(lay) = offload::gso::layout(link, frame, vxlan_ports) else {
        return false;
    };
    let Some(outer) = lay.outer else {
        return false;
    };
    if outer.ip == offload::wire::IpVersion::V4 {
        fix_ipv4_id(frame, outer.l3_off);
    }
    if lay.ip == offload::wire::IpVersion::V4 {
        fix_ipv4_id(frame, lay.l3_off);
    }
    true
}

/// Makes the IPv4 header at `off` carry ID 0 with DF set and redoes its
/// checksum. A header that did not verify stays as it was: the engine
/// judges it.
fn fix_ipv4_id(frame: &mut [u8], off: usize) {
    let Some(&b0) = frame.get(off) else {
        return;
    };
    let ihl = (b0 & 0x0f) as usize * 4;
    let Some(h) = frame.get_mut(off..off + ihl) else {
        return;
    };
    if h.len() < 20 || offload::checksum::checksum(h) != 0 {
        return;
    }
    h[4] = 0;
    h[5] = 0;
    h[6] |= 0x40;
    h[10] = 0;
    h[11] = 0;
    let c = offload::checksum::checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

/// A delivery waiting to be attributed.
#[derive(Debug)]
struct Pending {
    i: usize,
    /// From the healthy-ID engines.
    healthy: bool,
    slot: Option<u32>,
    /// The packet's bytes when its first frame has left the ring.
    miss: Option<(Vec<u8>, LinkKind)>,
    reason: FlushReason,
    frame: u64,
    segs: u32,
    len: u32,
    /// Capture time of the delivery.
    ts: u64,
    /// The kernel line loses this merged packet.
    loss: Option<offload::gro::LossReason>,
}

impl Pending {
    fn bad_checksum(
        i: usize,
        healthy: bool,
        slot: Option<u32>,
        frame: u64,
        len: usize,
        ts: u64,
    ) -> Pending {
        Pending {
            i,
            healthy,
            slot,
            miss: None,
            reason: FlushReason::BadChecksum,
            frame,
            segs: 1,
            len: len as u32,
            ts,
            loss: None,
        }
    }

    fn is_bad_checksum_of(&self, frame: u64, healthy: bool) -> bool {
        self.i == 0
            && self.healthy == healthy
            && self.reason == FlushReason::BadChecksum
            && self.frame == frame
    }

    fn of(
        d: &Delivered<'_>,
        i: usize,
        healthy: bool,
        current: Option<u64>,
        ring: &Ring,
    ) -> Pending {
        let slot = ring.get(d.first_frame);
        // Zero-copy: `data` holds the packet's headers, `len()` counts
        // the whole packet.
        let len = d.len() as u32;
        Pending {
            i,
            healthy,
            slot,
            miss: slot.is_none().then(|| (d.data.to_vec(), d.link)),
            reason: d.reason,
            frame: culprit(d, current),
            segs: d.segments,
            len,
            ts: d.timestamp_ns,
            // The engine runs the kernel line with its losses on
            // (`GroConfig::kernel_losses`, the default): it says which
            // merged packets that line loses, and why.
            loss: d.lost,
        }
    }
}
