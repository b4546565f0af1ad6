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
use crate::key::{FlowKey, SlotHint};
use offload::gro::FlushReason;
use offload::gro::KernelLine;
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
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
    /// Frames fed since the last `finish`: the same for every size, so
    /// counted once per frame and added to each size's `frames` by
    /// `finish`.
    frames: u64,
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
    engines: Sizes,
    healthy_engines: Sizes,
    /// Scratch copy of the frame being normalised for the healthy engines.
    healthy_buf: Vec<u8>,
    /// Judge frames cut after their headers from headers and wire length
    /// (`TruncatedFrames::Headers`) instead of passing them up unmerged.
    header_only: bool,
    /// Scratch: a header-only frame at its wire length.
    pad_buf: Vec<u8>,
    /// Frames fed since the last `finish` (each size's `frames_in` gets
    /// them there: every size sees every frame).
    frames_in: u64,
    index: crate::key::FlowMap<u32>,
    /// The last few frames' flows and slots, which skip the hash lookup.
    recent: crate::key::Recent,
    /// This worker's slot for each slot of the pass's flow table in the
    /// table's current epoch (`HINT_NONE` where not known yet): a frame
    /// whose flow the table just found needs no second key comparison
    /// ([`SlotHint`]). At most one entry per table slot, so bounded by
    /// the table's cap.
    by_hint: Vec<u32>,
    hint_epoch: u64,
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

/// A table slot whose worker slot is not known (`WhatIfWorker::by_hint`).
const HINT_NONE: u32 = u32::MAX;

struct RingBox(Ring);

impl fmt::Debug for RingBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ring")
    }
}

/// GRO engines that differ only in their size limits (`gro_max_size`,
/// `gro_ipv4_max_size`), one per what-if size, fed as one while their
/// sizes make no difference (decision 0230).
///
/// Every size rule compares a held packet's length plus the incoming
/// payload with a limit (`skb_gro_receive`, net/core/gro.c, 6.1-7.x;
/// `GroEngine::longest_held_len`). While the longest held packet plus the
/// incoming frame stays below the smallest limit, every engine would
/// decide every frame alike, so only the first is fed and its deliveries
/// stand for every size. When a merge could reach the smallest limit, the
/// others take the first engine's held packets and clock
/// (`GroEngine::catch_up`) and each is fed on its own, verifying its own
/// checksums, until all hold the same packets again
/// (`GroEngine::holds_same`).
#[derive(Debug)]
struct Sizes {
    engines: Vec<GroEngine>,
    /// The engines after the first are in its state and are not fed.
    synced: bool,
    /// The smallest limit: of every engine's `gro_max_size` and
    /// `gro_ipv4_max_size`, and 64 KiB (`GRO_LEGACY_MAX_SIZE`, the
    /// limit of UDP and of a tunnel's TCP on older lines).
    floor: usize,
    /// While `synced`: at least the first engine's
    /// `GroEngine::longest_held_len`. A frame of N bytes makes no held
    /// packet longer by more than N (a merge adds its payload, a new
    /// packet is the frame), and flushes only shorten, so the bound grows
    /// by each frame's length and the engine's walk over its held packets
    /// is needed only when the bound comes near `floor`.
    held_bound: usize,
}

impl Sizes {
    fn new(engines: Vec<GroEngine>) -> Sizes {
        let floor = engines
            .iter()
            .map(|e| {
                let c = e.config();
                c.gro_max_size.min(c.gro_ipv4_max_size)
            })
            .fold(offload::gro::GRO_LEGACY_MAX_SIZE, u32::min) as usize;
        Sizes {
            engines,
            synced: true,
            floor,
            held_bound: 0,
        }
    }

    /// Feeds `input` to every size; deliveries go to `pending`, tagged
    /// with their size index.
    #[inline(always)]
    fn receive(
        &mut self,
        input: Input<'_>,
        csum: offload::RxChecksum,
        healthy: bool,
        ring: &Ring,
        pending: &mut Vec<Pending>,
    ) {
        let n = self.engines.len();
        if n == 0 {
            return;
        }
        if self.synced && n > 1 && self.held_bound + input.data.len() >= self.floor {
            self.held_bound = self.engines[0].longest_held_len();
            if self.held_bound + input.data.len() >= self.floor {
                let (first, rest) = self.engines.split_at_mut(1);
                for e in rest {
                    e.catch_up(&first[0]);
                }
                self.synced = false;
            }
        }
        if self.synced {
            // Every engine would deliver what the first one does: its
            // deliveries stand for every size (`Pending::upto`).
            let last = n - 1;
            self.engines[0].receive_with_checksum(input, csum, &mut |d: &Delivered<'_>| {
                pending.push(Pending::of(d, 0, last, healthy, Some(input.frame), ring));
            });
            self.held_bound += input.data.len();
            return;
        }
        for (i, e) in self.engines.iter_mut().enumerate() {
            e.receive_with_checksum(input, csum, &mut |d: &Delivered<'_>| {
                pending.push(Pending::of(d, i, i, healthy, Some(input.frame), ring));
            });
        }
        let (first, rest) = self.engines.split_at(1);
        self.synced = rest.iter().all(|e| e.holds_same(&first[0]));
        if self.synced {
            self.held_bound = first[0].longest_held_len();
        }
    }

    /// Completes everything held (the end of one input file).
    fn finish(&mut self, healthy: bool, ring: &Ring, pending: &mut Vec<Pending>) {
        let n = self.engines.len();
        if self.synced && n > 0 {
            // As in `receive`: the first engine's deliveries stand for
            // every size.
            let last = n - 1;
            self.engines[0].finish(&mut |d: &Delivered<'_>| {
                pending.push(Pending::of(d, 0, last, healthy, None, ring))
            });
        } else {
            for (i, e) in self.engines.iter_mut().enumerate() {
                e.finish(&mut |d: &Delivered<'_>| {
                    pending.push(Pending::of(d, i, i, healthy, None, ring))
                });
            }
        }
        // Every engine is empty (or stands for one that is, `catch_up`
        // copies it before it is used): in the same state again.
        self.synced = true;
        self.held_bound = 0;
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
        // Every engine verifies checksums, but the engines after the
        // first are fed only while their sizes make a difference
        // (`Sizes`), so a payload is summed once almost always.
        let mk = || {
            Sizes::new(
                sizes
                    .iter()
                    .map(|s| {
                        let mut e = GroEngine::new(config_for(
                            *s,
                            line,
                            verify_checksums,
                            &vxlan_ports,
                            flush_timeout_ns,
                        ));
                        // The what-if counts packets and reads only their
                        // headers: merged payloads stay in the capture's
                        // frames (never read back), so no payload is
                        // copied. Zero-copy is the engine's default; it is
                        // set here because this code relies on it.
                        e.set_zero_copy(true);
                        e
                    })
                    .collect(),
            )
        };
        let engines = mk();
        WhatIfWorker {
            engines,
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
            frames_in: 0,
            index: Default::default(),
            recent: Default::default(),
            by_hint: Vec::new(),
            hint_epoch: 0,
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
        self.recent.clear();
        self.by_hint.clear();
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

    /// The slot of the frame's flow: from the table's slot when given
    /// (`hint`), else by the key.
    #[inline(always)]
    fn slot_hinted(&mut self, key: &FlowKey, frame: u64, hint: Option<SlotHint>) -> u32 {
        let Some(h) = hint else {
            return self.slot_of(key, frame);
        };
        if h.epoch != self.hint_epoch {
            // The table evicted: its slots hold other flows now.
            self.by_hint.clear();
            self.hint_epoch = h.epoch;
        }
        let at = h.slot as usize;
        if let Some(&s) = self.by_hint.get(at) {
            if s != HINT_NONE {
                self.flows[s as usize].last_frame = frame;
                return s;
            }
        }
        self.slot_hinted_miss(key, frame, at)
    }

    /// [`Self::slot_hinted`] for a table slot not seen in this epoch.
    #[cold]
    #[inline(never)]
    fn slot_hinted_miss(&mut self, key: &FlowKey, frame: u64, at: usize) -> u32 {
        // May evict, which forgets every remembered slot.
        let s = self.slot_of(key, frame);
        if self.by_hint.len() <= at {
            self.by_hint.resize(at + 1, HINT_NONE);
        }
        self.by_hint[at] = s;
        s
    }

    fn slot_of(&mut self, key: &FlowKey, frame: u64) -> u32 {
        if let Some(s) = self.recent.get(key) {
            self.flows[s as usize].last_frame = frame;
            return s;
        }
        let s = self.lookup(*key, frame);
        self.recent.put(*key, s);
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
                frames: 0,
                gro: Default::default(),
                plain: vec![FlowWhatIf::default(); n],
                healthy: vec![FlowWhatIf::default(); n],
            });
            (flows.len() - 1) as u32
        });
        self.flows[s as usize].last_frame = frame;
        s
    }

    /// Feeds one frame; `parsed` is its dissection and flow key, if any,
    /// and `hint` where the pass's flow table holds that key.
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
    #[inline(always)]
    pub fn feed(
        &mut self,
        input: Input<'_>,
        parsed: Option<(&dissect::Parsed, &FlowKey)>,
        hint: Option<SlotHint>,
    ) {
        if self.header_only
            && (input.data.len() as u64) < input.orig_len as u64
            && dissect::snap(input.link, input.data, input.orig_len, &self.vxlan_ports)
                .judged_from_headers()
        {
            self.feed_padded(input, parsed, hint);
        } else {
            self.feed_checked(input, parsed, hint, offload::RxChecksum::None);
        }
    }

    /// [`Self::feed`] for a frame cut after its headers: fed at its wire
    /// length, the missing payload as filler.
    #[cold]
    #[inline(never)]
    fn feed_padded(
        &mut self,
        input: Input<'_>,
        parsed: Option<(&dissect::Parsed, &FlowKey)>,
        hint: Option<SlotHint>,
    ) {
        {
            let mut pad_buf = std::mem::take(&mut self.pad_buf);
            pad_buf.clear();
            pad_buf.extend_from_slice(input.data);
            pad_buf.resize(input.orig_len as usize, 0);
            // Every checksum level a tunnel can have (outer UDP or GRE,
            // inner transport), as a NIC that verified them says.
            let csum = offload::RxChecksum::Unnecessary { level: 2 };
            let input = Input {
                data: &pad_buf,
                ..input
            };
            self.feed_checked(input, parsed, hint, csum);
            self.pad_buf = pad_buf;
        }
    }

    #[inline(always)]
    fn feed_checked(
        &mut self,
        input: Input<'_>,
        parsed: Option<(&dissect::Parsed, &FlowKey)>,
        hint: Option<SlotHint>,
        csum: offload::RxChecksum,
    ) {
        let slot = parsed.map(|(_, key)| self.slot_hinted(key, input.frame, hint));
        let parsed = parsed.map(|(p, _)| p);
        if let Some(s) = slot {
            self.ring.0.put(input.frame, s);
        }
        self.frames_in += 1;
        // The fields borrowed apart, so that the scratch buffers are used
        // where they are (no `mem::take` and put back every frame).
        let WhatIfWorker {
            engines,
            healthy_engines,
            healthy_buf,
            ring,
            flows,
            scratch: pending,
            vxlan_ports,
            ..
        } = self;
        let healthy_frame = match parsed.filter(|p| may_be_tunnel(p)) {
            Some(_) => {
                healthy_buf.clear();
                healthy_buf.extend_from_slice(input.data);
                healthy_tunnel(healthy_buf, input.link, vxlan_ports)
                    .then_some(healthy_buf.as_slice())
            }
            None => None,
        };
        if let Some(s) = slot {
            flows[s as usize].frames += 1;
        }
        engines.receive(input, csum, false, &ring.0, pending);
        if let Some(healthy) = healthy_frame {
            if let Some(s) = slot {
                for w in &mut flows[s as usize].healthy {
                    w.frames += 1;
                }
            }
            let inp = Input {
                data: healthy,
                ..input
            };
            healthy_engines.receive(inp, csum, true, &ring.0, pending);
        }
        // Per delivered packet, not per frame: most frames deliver nothing.
        if !pending.is_empty() {
            let mut pending = std::mem::take(&mut self.scratch);
            self.account(&mut pending);
            self.scratch = pending;
        }
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
                    // Read as the flow table read it: an IPComp payload's
                    // packet inside (crate::ipcomp).
                    crate::ipcomp::parse_inflated(link, &data, &self.vxlan_ports)
                        .and_then(|x| self.index.get(&FlowKey::of(&x)).copied())
                }
                (None, None) => None,
            };
            // The delivery of size index `p.i`, and of the sizes after it
            // up to `p.upto` when the engines were in step.
            for i in p.i..=p.upto {
                if !p.healthy {
                    let t = &mut self.totals[i];
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
                        &mut f.healthy[i]
                    } else {
                        &mut f.plain[i]
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
                }
            }
            if let Some(s) = slot {
                let f = &mut self.flows[s as usize];
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
        for t in &mut self.totals {
            t.frames_in += self.frames_in;
        }
        self.frames_in = 0;
        for f in &mut self.flows {
            for w in &mut f.plain {
                w.frames += f.frames;
            }
            f.frames = 0;
        }
        let mut pending: Vec<Pending> = Vec::new();
        self.engines.finish(false, &self.ring.0, &mut pending);
        self.healthy_engines
            .finish(true, &self.ring.0, &mut pending);
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
#[derive(Debug, Clone)]
struct Pending {
    i: usize,
    /// The last size index this delivery counts for: `i` itself, or the
    /// last size when the engines were in step (each would have
    /// delivered the same packet).
    upto: usize,
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
    /// The delivery `d` of the engine of size index `i`, counted for the
    /// sizes `i..=upto`.
    fn of(
        d: &Delivered<'_>,
        i: usize,
        upto: usize,
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
            upto,
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

#[cfg(test)]
mod tests {
    //! One engine for every size until a size could matter (decision 0230)
    //! must give exactly what every engine fed every frame gives.

    use super::*;
    use offload::build::{FrameSpec, TcpSpec};
    use proptest::prelude::*;

    /// One generated segment: flow, payload length, PSH, a sequence jump,
    /// a bad TCP checksum, the time since the previous frame.
    #[derive(Debug, Clone)]
    struct Seg {
        flow: u8,
        len: u16,
        psh: bool,
        jump: bool,
        bad: bool,
        gap_us: u32,
    }

    fn seg() -> impl Strategy<Value = Seg> {
        (
            0u8..4,
            prop_oneof![Just(1448u16), Just(8948u16), 1u16..9000, Just(0u16)],
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.03),
            prop::bool::weighted(0.02),
            prop_oneof![Just(1u32), 0u32..200, Just(20_000u32)],
        )
            .prop_map(|(flow, len, psh, jump, bad, gap_us)| Seg {
                flow,
                len,
                psh,
                jump,
                bad,
                gap_us,
            })
    }

    /// The frames: flows 0 and 1 IPv4, 2 and 3 IPv6 (each its own size
    /// limit), jumbo segments so that runs reach 64 KiB and 185,000 bytes.
    fn frames(segs: &[Seg]) -> Vec<(Vec<u8>, u64)> {
        let mut seq = [1u32; 4];
        let mut t = 1_000_000u64;
        segs.iter()
            .map(|s| {
                let f = s.flow as usize;
                if s.jump {
                    seq[f] = seq[f].wrapping_add(1448);
                }
                let mut tcp = TcpSpec::data(40000 + f as u16, 5201, seq[f]);
                if s.psh {
                    tcp.flags |= offload::wire::tcp::flags::PSH;
                }
                tcp.corrupt_checksum = s.bad;
                let mut spec = if f < 2 {
                    FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp)
                } else {
                    FrameSpec::tcp6([0xfd; 16], [0xfe; 16], tcp)
                };
                if f < 2 {
                    spec.v4_mut().df = true;
                    spec.v4_mut().id = (seq[f] / 7) as u16;
                }
                let frame = spec.payload(vec![f as u8; s.len as usize]).build();
                seq[f] = seq[f].wrapping_add(s.len as u32);
                t += s.gap_us as u64 * 1000;
                (frame, t)
            })
            .collect()
    }

    /// Per flow and per size, the figures, the totals, and whether the
    /// sizes after the first were ever fed on their own.
    fn run(
        frames: &[(Vec<u8>, u64)],
        sizes: &[u32],
        line: KernelLine,
    ) -> (Vec<Vec<FlowWhatIf>>, Vec<String>, bool) {
        let mut w = WhatIfWorker::new(
            0,
            sizes.to_vec(),
            line,
            true,
            vec![],
            1000,
            false,
            10_000_000,
        );
        let mut caught_up = false;
        for (n, (f, ts)) in frames.iter().enumerate() {
            let input = Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: *ts,
                frame: n as u64 + 1,
                orig_len: f.len() as u32,
            };
            let p = dissect::parse(LinkKind::Ethernet, f, f.len() as u32, &[]);
            let key = p.as_ref().map(FlowKey::of);
            w.feed(input, p.as_ref().zip(key.as_ref()), None);
            caught_up |= !w.engines.synced;
        }
        w.finish();
        let flows = w.flows.iter().map(|f| f.plain.clone()).collect();
        let totals = w.totals.iter().map(|t| format!("{t:?}")).collect();
        (flows, totals, caught_up)
    }

    /// The reference: one worker per size, each with one engine fed
    /// every frame, laid out like [`run`]'s answer.
    fn full_runs(
        frames: &[(Vec<u8>, u64)],
        sizes: &[u32],
        line: KernelLine,
    ) -> (Vec<Vec<FlowWhatIf>>, Vec<String>) {
        let mut flows: Vec<Vec<FlowWhatIf>> = Vec::new();
        let mut totals = Vec::new();
        for &size in sizes {
            let (f, t, caught_up) = run(frames, &[size], line);
            assert!(!caught_up, "one size never catches up");
            flows.resize(f.len(), Vec::new());
            for (all, one) in flows.iter_mut().zip(f) {
                all.extend(one);
            }
            totals.extend(t);
        }
        (flows, totals)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn one_engine_until_a_size_matters_equals_full_runs(
            segs in prop::collection::vec(seg(), 1..400),
            sizes in prop_oneof![
                Just(vec![65536u32, 185000]),
                Just(vec![185000u32, 65536, 131072]),
                Just(vec![32768u32, 65536]),
            ],
            line in prop_oneof![
                Just(KernelLine::V6_1),
                Just(KernelLine::V6_12),
                Just(KernelLine::V6_18),
            ],
        ) {
            let frames = frames(&segs);
            let (flows, totals, _) = run(&frames, &sizes, line);
            let (flows_all, totals_all) = full_runs(&frames, &sizes, line);
            prop_assert_eq!(flows, flows_all);
            prop_assert_eq!(totals, totals_all);
        }
    }

    /// The generator reaches the case the property is about: the other
    /// sizes catch up and their figures differ from the first's; a bad
    /// checksum while they run on their own, after a pause longer than
    /// the flush timeout, flushes every size's held packet.
    #[test]
    fn sizes_diverge_and_catch_up_in_a_long_jumbo_run() {
        let segs: Vec<Seg> = (0..120)
            .map(|i| Seg {
                flow: 2,
                len: 8948,
                psh: i == 119,
                jump: false,
                bad: i == 30,
                gap_us: if i == 30 { 20_000 } else { 1 },
            })
            .collect();
        let frames = frames(&segs);
        let sizes = [65536, 185000];
        let (flows, totals, caught_up) = run(&frames, &sizes, KernelLine::V6_18);
        assert!(caught_up);
        assert_ne!(flows[0][0].packets, flows[0][1].packets);
        for f in &flows[0] {
            assert_eq!(f.count(FlushReason::Timeout), 1);
            assert_eq!(f.count(FlushReason::BadChecksum), 1);
        }
        assert_eq!(
            (flows, totals),
            full_runs(&frames, &sizes, KernelLine::V6_18)
        );
    }
}
