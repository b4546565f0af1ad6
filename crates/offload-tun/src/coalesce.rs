//! The write side: coalesce a batch of packets with the engine's GRO and
//! write super-packets with a `virtio_net_hdr`, so the kernel's stack sees
//! one 64 KiB packet instead of 45 MTU-sized ones.
//!
//! The engine's delivered super-packet is already what
//! `virtio_net_hdr_to_skb` wants (IP lengths of the whole, the
//! pseudo-header sum in the L4 checksum field), and
//! `VnetHdr::for_delivery` writes the matching header (`NEEDS_CSUM`,
//! `gso_type`, `gso_size`, `csum_start`/`csum_offset`). A packet that went
//! through GRO alone is written with an all-zero header, never with the
//! header of the packet before it.
//!
//! **Zero-copy** ([`CoalescerOptions::zero_copy`], on by default): packets
//! are staged in the coalescer's [`FrameArena`] (the read side segments
//! straight into it, [`crate::TunDevice::read_into`]), the engine merges
//! them without copying payloads (`GroEngine::set_zero_copy`: a held
//! packet is its first segment's headers, rewritten, plus [`Frag`] ranges
//! of every segment's payload, the first included), and the packet, a
//! super-packet or a single, goes out with one `writev` of vnet header,
//! headers and ranges
//! ([`PacketWriter::write_vectored`]). What the kernel receives is byte for
//! byte what the contiguous path writes (tests/kernel.rs compares the
//! kernel's own view of both). More than `IOV_MAX` parts (a 64 KiB packet
//! of segments under 64 bytes) are assembled into one buffer first.
//!
//! Some kernels refuse valid GSO writes: 6.6.44 and other July-2024 stables
//! return `EINVAL` when the last segment is shorter than the header length
//! derived from `csum_start` (e269d79c7d35, fixed by 89add40066f9;
//! tailscale#13041). On `EINVAL` for a GSO write the coalescer segments the
//! super-packet itself (`offload::gso`, full checksums) and writes the
//! segments, so no data is lost on such a kernel.

use std::io::{self, IoSlice};

use offload::gro::{Delivered, Frag, GroConfig, GroEngine, Input, RxChecksum, UdpGro};
use offload::gso::{segment, GsoParams};
use offload::vnet::VnetHdr;
use offload::LinkKind;

use crate::arena::FrameArena;
use crate::device::TunDevice;
use crate::error::{Result, TunError};

/// Where the coalescer writes: a [`TunDevice`], or a wrapper around one.
pub trait PacketWriter {
    /// True when packets may carry a vnet header (GSO writes possible).
    fn has_vnet_hdr(&self) -> bool;
    /// Writes one packet with an optional vnet header.
    fn write_packet(&mut self, vnet: Option<&VnetHdr>, packet: &[u8]) -> io::Result<()>;
    /// Writes one packet made of `parts`, in order (a zero-copy
    /// super-packet: head, then payload ranges). The default assembles the
    /// parts and calls [`PacketWriter::write_packet`]; a [`TunDevice`]
    /// writes them with one `writev`.
    fn write_vectored(&mut self, vnet: Option<&VnetHdr>, parts: &[IoSlice<'_>]) -> io::Result<()> {
        let mut packet = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
        for p in parts {
            packet.extend_from_slice(p);
        }
        self.write_packet(vnet, &packet)
    }
}

impl PacketWriter for TunDevice {
    fn has_vnet_hdr(&self) -> bool {
        self.vnet_hdr_len() != 0
    }

    fn write_packet(&mut self, vnet: Option<&VnetHdr>, packet: &[u8]) -> io::Result<()> {
        TunDevice::write_packet(self, vnet, packet)
    }

    fn write_vectored(&mut self, vnet: Option<&VnetHdr>, parts: &[IoSlice<'_>]) -> io::Result<()> {
        TunDevice::write_vectored(self, vnet, parts)
    }
}

/// Knobs of a [`Coalescer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalescerOptions {
    /// Run GRO (on a writer with vnet headers). Off: one write per packet.
    pub gro: bool,
    /// Verify TCP/UDP checksums before merging, as the kernel's GRO does
    /// for a device without a hardware verdict. The kernel trusts the
    /// `NEEDS_CSUM` of a super-packet and recomputes the checksum, so
    /// merging a corrupted packet would hide the corruption; turn it off
    /// only for packets whose checksums this process computed itself.
    pub verify_checksums: bool,
    /// Coalesce UDP datagrams into USO super-packets (`GSO_UDP_L4`).
    pub udp: bool,
    /// Merge without copying payloads and write super-packets with one
    /// vectored write out of the [`FrameArena`] (see the module doc). Off:
    /// GRO copies each merged payload into the super-packet, which is
    /// written contiguous; same bytes on the wire.
    pub zero_copy: bool,
    /// Believe the checksum verdicts given with packets
    /// ([`Coalescer::push_with_checksum`], the read side's verdicts in the
    /// arena). Off: every packet is verified as if nothing were known
    /// (when [`CoalescerOptions::verify_checksums`] is on).
    pub trust_verdicts: bool,
}

impl Default for CoalescerOptions {
    fn default() -> Self {
        CoalescerOptions {
            gro: true,
            verify_checksums: true,
            udp: true,
            zero_copy: true,
            trust_verdicts: true,
        }
    }
}

/// Counters of a [`Coalescer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoalesceStats {
    /// Packets given to [`Coalescer::push`].
    pub packets_in: u64,
    /// Successful writes (super-packets, single packets and fallback segments).
    pub writes: u64,
    /// Super-packets written with a GSO header.
    pub super_packets: u64,
    /// Packets merged into those super-packets.
    pub merged_packets: u64,
    /// GSO writes the kernel refused with `EINVAL`.
    pub gso_rejected: u64,
    /// Segments written instead of refused (or unrepresentable) super-packets.
    pub fallback_segments: u64,
    /// Super-packets delivered zero-copy (head plus payload ranges borrowed
    /// from the arena) and written with one vectored write; past `IOV_MAX`
    /// ranges such a packet is assembled first, and still counted here.
    pub vectored_writes: u64,
    /// Parts (head and payload ranges, vnet header not counted) of those
    /// vectored writes: 2 per super-packet when its payload went out as
    /// one range of the super-packet it was read as.
    pub parts_written: u64,
}

/// GRO in front of a TUN/TAP writer.
#[derive(Debug)]
pub struct Coalescer {
    engine: GroEngine,
    link: LinkKind,
    opts: CoalescerOptions,
    stats: CoalesceStats,
    frame: u64,
    arena: FrameArena,
    /// A packet assembled for the rare writes that need it contiguous.
    scratch: Vec<u8>,
}

impl Coalescer {
    /// A coalescer for packets of link type `link` (`RawIp` for TUN).
    pub fn new(link: LinkKind, opts: CoalescerOptions) -> Self {
        // TUN's tso_max_size is 64 KiB: no BIG TCP through a TUN write
        // (the default sizes).
        let cfg = GroConfig::default()
            // Batches are flushed explicitly; time plays no part.
            .flush_timeout_ns(u64::MAX)
            .verify_checksums(opts.verify_checksums)
            .udp(if opts.udp {
                UdpGro::AllPorts
            } else {
                UdpGro::Off
            })
            // Tunnel GSO needs the 24-byte header (6.17+), not spoken here.
            .vxlan_ports(Vec::new())
            // A relay forwards what it merged: never mimic a kernel's loss.
            .kernel_losses(false);
        let mut engine = GroEngine::new(cfg);
        engine.set_zero_copy(opts.zero_copy);
        Coalescer {
            engine,
            link,
            opts,
            stats: CoalesceStats::default(),
            frame: 0,
            arena: FrameArena::new(),
            scratch: Vec::new(),
        }
    }

    /// A coalescer matching `dev`'s link type.
    pub fn for_device(dev: &TunDevice, opts: CoalescerOptions) -> Self {
        Self::new(dev.link(), opts)
    }

    /// The counters so far.
    pub fn stats(&self) -> &CoalesceStats {
        &self.stats
    }

    /// Packets held, waiting for [`Coalescer::flush`].
    pub fn held(&self) -> usize {
        self.engine.held_count()
    }

    /// Adds one packet to the batch. Packets GRO completes on the way are
    /// written at once, in the kernel's order. A failed write does not stop
    /// the others; the first failure is returned. Nothing is known of the
    /// packet's checksum: GRO verifies it when
    /// [`CoalescerOptions::verify_checksums`] is on.
    pub fn push<W: PacketWriter>(&mut self, packet: &[u8], w: &mut W) -> Result<()> {
        self.push_with_checksum(packet, RxChecksum::None, w)
    }

    /// [`Coalescer::push`] for a packet whose checksum the caller already
    /// knows (`RxChecksum::Unnecessary`: it computed it, or the kernel's
    /// `DATA_VALID` vouched for it; see
    /// [`crate::TunDevice::read_packets_with_checksum`]), so that GRO does
    /// not verify it a second time.
    pub fn push_with_checksum<W: PacketWriter>(
        &mut self,
        packet: &[u8],
        csum: RxChecksum,
        w: &mut W,
    ) -> Result<()> {
        if self.opts.zero_copy && self.opts.gro && w.has_vnet_hdr() {
            // GRO will refer to the payload: it must outlive this call.
            self.arena.push(packet, csum);
            return self.push_staged(w);
        }
        self.stats.packets_in += 1;
        if !self.opts.gro || !w.has_vnet_hdr() {
            return write_plain(packet, w, &mut self.stats);
        }
        self.frame += 1;
        let input = Input {
            data: packet,
            link: self.link,
            timestamp_ns: 0,
            frame: self.frame,
            orig_len: packet.len() as u32,
        };
        let csum = if self.opts.trust_verdicts {
            csum
        } else {
            RxChecksum::None
        };
        let mut first_err = None;
        let mut out = Out {
            arena: None,
            stats: &mut self.stats,
            scratch: &mut self.scratch,
        };
        self.engine
            .receive_with_checksum(input, csum, &mut |d: &Delivered<'_>| {
                if let Err(e) = out.deliver(d, w) {
                    first_err.get_or_insert(e);
                }
            });
        first_err.map_or(Ok(()), Err)
    }

    /// The arena packets are staged in before [`Coalescer::push_staged`]
    /// (e.g. by [`crate::TunDevice::read_into`]).
    pub fn arena_mut(&mut self) -> &mut FrameArena {
        &mut self.arena
    }

    /// Runs GRO over the packets staged in the arena since the last call,
    /// writing what completes on the way, in the kernel's order. The arena
    /// is cleared as soon as nothing held refers to it; past
    /// [`FrameArena::SOFT_LIMIT`] bytes the held packets are completed
    /// (as at the end of a batch) so that it can be. A failed write does
    /// not stop the others; the first failure is returned.
    pub fn push_staged<W: PacketWriter>(&mut self, w: &mut W) -> Result<()> {
        let (from, to) = (self.arena.pushed, self.arena.frames.len());
        self.stats.packets_in += (to - from) as u64;
        self.arena.pushed = to;
        let mut first_err = None;
        let arena = &self.arena;
        if !self.opts.gro || !w.has_vnet_hdr() {
            for f in &arena.frames[from..to] {
                let p = &arena.bytes[f.start..f.start + f.len];
                if let Err(e) = write_plain(p, w, &mut self.stats) {
                    first_err.get_or_insert(e);
                }
            }
        } else {
            let mut out = Out {
                arena: Some(arena),
                stats: &mut self.stats,
                scratch: &mut self.scratch,
            };
            for (i, f) in arena.frames[from..to].iter().enumerate() {
                let data = &arena.bytes[f.start..f.start + f.len];
                let input = Input {
                    data,
                    link: self.link,
                    timestamp_ns: 0,
                    frame: arena.base + (from + i) as u64,
                    orig_len: data.len() as u32,
                };
                let csum = if self.opts.trust_verdicts {
                    f.csum
                } else {
                    RxChecksum::None
                };
                self.engine
                    .receive_with_checksum(input, csum, &mut |d: &Delivered<'_>| {
                        if let Err(e) = out.deliver(d, w) {
                            first_err.get_or_insert(e);
                        }
                    });
            }
        }
        if !self.opts.zero_copy || self.engine.held_count() == 0 {
            self.arena.clear();
        } else if self.arena.bytes_len() > FrameArena::SOFT_LIMIT {
            if let Err(e) = self.complete_held(w) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Ends the batch: pushes what is staged and writes every held packet.
    pub fn flush<W: PacketWriter>(&mut self, w: &mut W) -> Result<()> {
        let staged = self.push_staged(w);
        let held = self.complete_held(w);
        staged.and(held)
    }

    /// Completes and writes every held packet, then clears the arena.
    fn complete_held<W: PacketWriter>(&mut self, w: &mut W) -> Result<()> {
        let mut first_err = None;
        let mut out = Out {
            arena: Some(&self.arena),
            stats: &mut self.stats,
            scratch: &mut self.scratch,
        };
        self.engine.finish(&mut |d: &Delivered<'_>| {
            if let Err(e) = out.deliver(d, w) {
                first_err.get_or_insert(e);
            }
        });
        self.arena.clear();
        first_err.map_or(Ok(()), Err)
    }

    /// Pushes a whole batch and flushes it.
    pub fn write_batch<'a, W: PacketWriter>(
        &mut self,
        packets: impl IntoIterator<Item = &'a [u8]>,
        w: &mut W,
    ) -> Result<()> {
        let mut first_err = None;
        for p in packets {
            if let Err(e) = self.push(p, w) {
                first_err.get_or_insert(e);
            }
        }
        if let Err(e) = self.flush(w) {
            first_err.get_or_insert(e);
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn write_plain<W: PacketWriter>(packet: &[u8], w: &mut W, stats: &mut CoalesceStats) -> Result<()> {
    w.write_packet(None, packet)
        .map_err(|e| TunError::os("write", "coalescer", e))?;
    stats.writes += 1;
    Ok(())
}

/// Where deliveries go: the counters, the arena zero-copy frags refer to,
/// and a buffer for the rare packet that must be assembled.
struct Out<'a> {
    arena: Option<&'a FrameArena>,
    stats: &'a mut CoalesceStats,
    scratch: &'a mut Vec<u8>,
}

/// The frame bytes a zero-copy frag refers to.
fn frag_bytes<'a>(arena: Option<&'a FrameArena>, f: &Frag) -> io::Result<&'a [u8]> {
    let at = f.offset as usize;
    arena
        .and_then(|a| a.by_number(f.frame))
        .and_then(|frame| frame.get(at..at + f.len as usize))
        .ok_or_else(|| io::Error::other("zero-copy frag refers to a frame no longer staged"))
}

/// Bytes of the arena's super-packet area (a range `src_of` returned).
fn src_bytes(arena: Option<&FrameArena>, r: core::ops::Range<usize>) -> &[u8] {
    arena.map_or(&[], |a| &a.src[r])
}

/// Parts of one vectored write kept on the stack (head + 63 ranges: a
/// 64 KiB super-packet of 1448-byte segments has 45).
const PARTS_ON_STACK: usize = 64;

impl Out<'_> {
    /// Writes one GRO delivery: a super-packet with its header, falling
    /// back to its segments; a single packet with an all-zero header.
    fn deliver<W: PacketWriter>(&mut self, d: &Delivered<'_>, w: &mut W) -> Result<()> {
        if d.segments > 1 {
            if let Ok(hdr) = VnetHdr::for_delivery(d) {
                let written = if d.frags.is_empty() {
                    w.write_packet(Some(&hdr), d.data)
                } else {
                    self.write_frags(Some(&hdr), d, w)
                };
                match written {
                    Ok(()) => {
                        let s = &mut *self.stats;
                        s.writes += 1;
                        s.super_packets += 1;
                        s.merged_packets += u64::from(d.segments);
                        s.vectored_writes += u64::from(!d.frags.is_empty());
                        return Ok(());
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        self.stats.gso_rejected += 1
                    }
                    Err(e) => return Err(TunError::os("write", "coalescer", e)),
                }
            }
            return self.write_segments(d, w);
        }
        if d.frags.is_empty() {
            return write_plain(d.data, w, self.stats);
        }
        // A zero-copy single: the engine kept only its headers, its payload
        // is still in the frame it came in, and a packet of one segment is
        // delivered unchanged (`gro_complete` leaves it alone): the staged
        // frame is the packet, one plain write as for any single.
        let staged = self.arena.and_then(|a| a.by_number(d.first_frame));
        if let Some(frame) = staged.filter(|f| f.len() == d.len()) {
            return write_plain(frame, w, self.stats);
        }
        self.write_frags(None, d, w)
            .map_err(|e| TunError::os("write", "coalescer", e))?;
        self.stats.writes += 1;
        Ok(())
    }

    /// One vectored write of head and payload ranges (assembled first when
    /// there are more parts than `writev` takes), behind `hdr` (`None`: an
    /// all-zero vnet header, a packet that is not GSO).
    fn write_frags<W: PacketWriter>(
        &mut self,
        hdr: Option<&VnetHdr>,
        d: &Delivered<'_>,
        w: &mut W,
    ) -> io::Result<()> {
        let parts = d.frags.len() + 1;
        if parts >= offload_sys::tun::IOV_MAX {
            self.assemble(d)?;
            return w.write_packet(hdr, self.scratch);
        }
        let mut stack = [IoSlice::new(&[]); PARTS_ON_STACK];
        let mut heap = Vec::new();
        let iov: &mut [IoSlice<'_>] = if parts <= PARTS_ON_STACK {
            &mut stack[..parts]
        } else {
            heap.resize(parts, IoSlice::new(&[]));
            &mut heap
        };
        iov[0] = IoSlice::new(d.data);
        let mut n = 1;
        // Ranges that are consecutive bytes of a super-packet as read (the
        // payloads of its consecutive segments) go out as one part.
        let mut run: Option<core::ops::Range<usize>> = None;
        for f in d.frags {
            let src = self
                .arena
                .and_then(|a| a.src_of(f.frame, f.offset as usize, f.len as usize));
            match (src, &mut run) {
                (Some(r), Some(cur)) if cur.end == r.start => cur.end = r.end,
                (Some(r), _) => {
                    if let Some(cur) = run.replace(r) {
                        iov[n] = IoSlice::new(src_bytes(self.arena, cur));
                        n += 1;
                    }
                }
                (None, _) => {
                    if let Some(cur) = run.take() {
                        iov[n] = IoSlice::new(src_bytes(self.arena, cur));
                        n += 1;
                    }
                    iov[n] = IoSlice::new(frag_bytes(self.arena, f)?);
                    n += 1;
                }
            }
        }
        if let Some(cur) = run {
            iov[n] = IoSlice::new(src_bytes(self.arena, cur));
            n += 1;
        }
        self.stats.parts_written += n as u64;
        w.write_vectored(hdr, &iov[..n])
    }

    /// The whole packet of `d` into `scratch`.
    fn assemble(&mut self, d: &Delivered<'_>) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.extend_from_slice(d.data);
        for f in d.frags {
            self.scratch.extend_from_slice(frag_bytes(self.arena, f)?);
        }
        Ok(())
    }

    fn write_segments<W: PacketWriter>(&mut self, d: &Delivered<'_>, w: &mut W) -> Result<()> {
        let params = GsoParams::from_gso(d.gso_size, d.gso_type);
        let packet: &[u8] = if d.frags.is_empty() {
            d.data
        } else {
            self.assemble(d)
                .map_err(|e| TunError::os("write", "coalescer", e))?;
            self.scratch
        };
        let stats = &mut *self.stats;
        let mut first_err = None;
        segment(
            d.link,
            packet,
            &params,
            &[],
            &mut |seg: &[u8]| match w.write_packet(None, seg) {
                Ok(()) => {
                    stats.writes += 1;
                    stats.fallback_segments += 1;
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            },
        )
        .map_err(|source| TunError::Segment {
            dev: "coalescer".into(),
            len: packet.len(),
            source,
        })?;
        first_err.map_or(Ok(()), |e| Err(TunError::os("write", "coalescer", e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload::build::{FrameSpec, L2Spec, TcpSpec};
    use offload::vnet::{flags, gso};

    /// Records writes; refuses GSO writes with EINVAL when `refuse_gso`.
    #[derive(Default)]
    struct Recorder {
        refuse_gso: bool,
        writes: Vec<(Option<VnetHdr>, Vec<u8>)>,
        /// Parts of each vectored write.
        vectored: Vec<usize>,
    }

    impl PacketWriter for Recorder {
        fn has_vnet_hdr(&self) -> bool {
            true
        }
        fn write_packet(&mut self, vnet: Option<&VnetHdr>, packet: &[u8]) -> io::Result<()> {
            if self.refuse_gso && vnet.is_some_and(|v| v.gso_type != 0) {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            self.writes.push((vnet.copied(), packet.to_vec()));
            Ok(())
        }
        fn write_vectored(
            &mut self,
            vnet: Option<&VnetHdr>,
            parts: &[IoSlice<'_>],
        ) -> io::Result<()> {
            self.vectored.push(parts.len());
            let packet: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            self.write_packet(vnet, &packet)
        }
    }

    /// Segments of several flows (ports 1..=flows), interleaved in runs,
    /// with varying MSS, tails, an occasional PSH and a corrupted checksum:
    /// a deterministic xorshift stream.
    fn mixed_traffic(seed: u64, n: usize, flows: u16) -> Vec<(Vec<u8>, RxChecksum)> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seq = vec![1000u32; usize::from(flows) + 1];
        (0..n)
            .map(|i| {
                let flow = (next() % u64::from(flows)) as u16 + 1;
                let len = match next() % 8 {
                    0 => (next() % 1400) as usize,
                    1 => 536,
                    _ => 1400,
                };
                let mut s = FrameSpec::tcp4(
                    [10, 2, 0, 1],
                    [10, 2, 0, 2],
                    TcpSpec::data(flow, 80, seq[usize::from(flow)]),
                )
                .payload((0..len).map(|b| (b + i) as u8).collect());
                seq[usize::from(flow)] = seq[usize::from(flow)].wrapping_add(len as u32);
                s.l2 = L2Spec::None;
                s.v4_mut().id = i as u16;
                if next() % 16 == 0 {
                    s.tcp_mut().flags |= offload::wire::tcp::flags::PSH;
                }
                let mut p = s.build();
                let csum = match next() % 4 {
                    0 => RxChecksum::None,
                    _ => RxChecksum::Unnecessary { level: 0 },
                };
                if next() % 64 == 0 && p.len() > 45 {
                    p[44] ^= 0x5a; // checked only where no verdict vouches
                }
                (p, csum)
            })
            .collect()
    }

    fn run_batches(
        traffic: &[(Vec<u8>, RxChecksum)],
        batch: usize,
        opts: CoalescerOptions,
        refuse_gso: bool,
        staged: bool,
    ) -> (Recorder, CoalesceStats) {
        let mut w = Recorder {
            refuse_gso,
            ..Default::default()
        };
        let mut c = Coalescer::new(LinkKind::RawIp, opts);
        for chunk in traffic.chunks(batch) {
            for (p, csum) in chunk {
                if staged {
                    c.arena_mut().push(p, *csum);
                } else {
                    c.push_with_checksum(p, *csum, &mut w).unwrap();
                }
            }
            if staged {
                c.push_staged(&mut w).unwrap();
            }
            c.flush(&mut w).unwrap();
            assert_eq!(c.held(), 0);
            assert!(c.arena_mut().is_empty(), "a flush empties the arena");
        }
        let st = *c.stats();
        (w, st)
    }

    /// Zero-copy delivery writes exactly what the copying path writes, in
    /// the same order, with the same headers: many flows, odd sizes,
    /// verdicts and corrupted checksums, refused GSO writes (fallback
    /// segments assembled from the arena), pushed packet by packet or
    /// staged in the arena.
    #[test]
    fn zero_copy_writes_the_same_bytes_as_the_copying_path() {
        for seed in 1..=12u64 {
            let traffic = mixed_traffic(seed * 0x9e37_79b9, 300, 1 + (seed % 4) as u16);
            let batch = 1 + (seed as usize * 37) % 120;
            for refuse in [false, true] {
                let copy = CoalescerOptions {
                    zero_copy: false,
                    ..Default::default()
                };
                let (want, want_st) = run_batches(&traffic, batch, copy, refuse, false);
                assert!(want.vectored.is_empty());
                for staged in [false, true] {
                    let (got, got_st) =
                        run_batches(&traffic, batch, CoalescerOptions::default(), refuse, staged);
                    assert_eq!(got.writes, want.writes, "seed {seed} refuse {refuse}");
                    let CoalesceStats {
                        vectored_writes, ..
                    } = got_st;
                    assert_eq!(
                        CoalesceStats {
                            vectored_writes: 0,
                            parts_written: 0,
                            ..got_st
                        },
                        want_st
                    );
                    if !refuse {
                        assert_eq!(vectored_writes, got.vectored.len() as u64);
                        assert!(
                            got.vectored.iter().all(|&n| n > 1),
                            "head and ranges: {:?}",
                            got.vectored
                        );
                        assert!(vectored_writes > 0, "seed {seed}: nothing merged zero-copy");
                    }
                }
            }
        }
    }

    /// Super-packets read into the arena's super-packet area (as
    /// `TunDevice::read_into` does) go out as head + one payload range
    /// each, byte for byte what the copying path writes: two TSO reads of
    /// one flow (the second continuing the first), a third read that is
    /// not a super-packet.
    #[test]
    fn payload_ranges_of_a_super_packet_as_read_go_out_as_one() {
        use offload::checksum;
        let tso = |seq: u32, segs: usize, id: u16| {
            let mut s =
                FrameSpec::tcp4([10, 1, 0, 1], [10, 1, 0, 2], TcpSpec::data(1000, 2000, seq))
                    .payload((0..segs * 1448).map(|i| (i * 7) as u8).collect());
            s.l2 = L2Spec::None;
            s.v4_mut().id = id;
            let mut p = s.build();
            let pseudo =
                checksum::pseudo_ipv4([10, 1, 0, 1], [10, 1, 0, 2], 6, (p.len() - 20) as u32);
            p[36..38].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
            let hdr = VnetHdr {
                flags: flags::NEEDS_CSUM,
                gso_type: gso::TCPV4,
                hdr_len: 40,
                gso_size: 1448,
                csum_start: 20,
                csum_offset: 16,
                num_buffers: None,
            };
            (Some(hdr), p)
        };
        let mut small = FrameSpec::tcp4([10, 1, 0, 3], [10, 1, 0, 2], TcpSpec::data(1, 2, 3))
            .payload(vec![9; 100]);
        small.l2 = L2Spec::None;
        let reads = [
            tso(7, 20, 100),
            tso(7 + 20 * 1448, 25, 120),
            (None, small.build()),
        ];
        // Copying path: segments pushed one by one.
        let mut want = Recorder::default();
        let mut c = Coalescer::new(
            LinkKind::RawIp,
            CoalescerOptions {
                zero_copy: false,
                ..Default::default()
            },
        );
        for (vnet, p) in &reads {
            let mut p = p.clone();
            crate::read::split_packet_with_checksum(
                "t",
                vnet.as_ref(),
                LinkKind::RawIp,
                &mut p,
                &mut |s, cs| c.push_with_checksum(s, cs, &mut want).unwrap(),
            )
            .unwrap();
        }
        c.flush(&mut want).unwrap();
        // Zero-copy, each read kept in the super-packet area.
        let mut got = Recorder::default();
        let mut c = Coalescer::new(LinkKind::RawIp, CoalescerOptions::default());
        for (vnet, p) in &reads {
            let a = c.arena_mut();
            let at = a.src_room(p.len()).expect("room");
            a.src[at..at + p.len()].copy_from_slice(p);
            let (src, bytes, frames) = (&mut a.src, &mut a.bytes, &mut a.frames);
            let split = crate::read::split_into(
                "t",
                vnet.as_ref(),
                LinkKind::RawIp,
                &mut src[at..at + p.len()],
                bytes,
                frames,
                Some(at),
            )
            .unwrap();
            if matches!(split, crate::Split::Segmented(_)) {
                a.src_used = at + p.len();
            }
            c.push_staged(&mut got).unwrap();
        }
        c.flush(&mut got).unwrap();
        assert_eq!(got.writes, want.writes);
        assert_eq!(
            want.writes.len(),
            2,
            "one super-packet of 45 segments, one lone packet"
        );
        // Head (first segment) + one range for the other 44 segments,
        // which span both reads: two ranges, as the reads are not adjacent
        // in the area (the first read's headers lie between).
        assert_eq!(got.vectored, vec![3]);
        assert_eq!(c.stats().parts_written, 3);
    }

    /// `trust_verdicts: false` verifies every packet: the corrupted one
    /// stays out of the merge even with a verdict.
    #[test]
    fn distrusting_verdicts_verifies_again() {
        let mut segs = segments(3, 1000, 1000);
        segs[1][100] ^= 0xff;
        let opts = CoalescerOptions {
            trust_verdicts: false,
            ..Default::default()
        };
        let mut w = Recorder::default();
        let mut c = Coalescer::new(LinkKind::RawIp, opts);
        for s in &segs {
            c.arena_mut().push(s, RxChecksum::Unnecessary { level: 0 });
        }
        c.flush(&mut w).unwrap();
        assert!(w.writes.len() > 1, "the bad segment was merged");
    }

    /// A long single-flow stream staged without flushes: the arena stays
    /// bounded (held packets are completed past the soft limit) and the
    /// payload arrives whole and in order.
    #[test]
    fn arena_stays_bounded_without_flushes() {
        let segs = segments(2000, 1400, 1400);
        let mut w = Recorder::default();
        let mut c = Coalescer::new(LinkKind::RawIp, CoalescerOptions::default());
        let mut most = 0;
        for s in &segs {
            c.arena_mut().push(s, RxChecksum::Unnecessary { level: 0 });
            c.push_staged(&mut w).unwrap();
            most = most.max(c.arena_mut().bytes_len());
        }
        c.flush(&mut w).unwrap();
        assert!(
            most <= FrameArena::SOFT_LIMIT + 1500,
            "arena grew to {most}"
        );
        let payload: usize = w.writes.iter().map(|(_, p)| p.len() - 40).sum();
        assert_eq!(payload, 2000 * 1400);
        assert!(w.writes.len() < 2000 / 40, "{} writes", w.writes.len());
    }

    fn segments(n: u32, mss: usize, tail: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let len = if i + 1 == n { tail } else { mss };
                let mut s = FrameSpec::tcp4(
                    [10, 2, 0, 1],
                    [10, 2, 0, 2],
                    TcpSpec::data(1, 2, 1000 + i * mss as u32),
                )
                .payload(vec![i as u8; len]);
                s.l2 = L2Spec::None;
                s.v4_mut().id = i as u16;
                s.build()
            })
            .collect()
    }

    #[test]
    fn batch_becomes_one_super_packet_with_gso_header() {
        let segs = segments(5, 1000, 300);
        let mut w = Recorder::default();
        let mut c = Coalescer::new(LinkKind::RawIp, CoalescerOptions::default());
        c.write_batch(segs.iter().map(|s| s.as_slice()), &mut w)
            .unwrap();
        assert_eq!(w.writes.len(), 1);
        let (h, p) = &w.writes[0];
        let h = h.unwrap();
        assert_eq!(
            (h.flags, h.gso_type, h.gso_size, h.csum_start, h.csum_offset),
            (flags::NEEDS_CSUM, gso::TCPV4, 1000, 20, 16)
        );
        assert_eq!(p.len(), 40 + 4300);
        assert_eq!(c.stats().super_packets, 1);
        assert_eq!(c.stats().merged_packets, 5);
    }

    #[test]
    fn einval_on_gso_write_writes_the_segments() {
        let segs = segments(4, 1000, 7);
        let mut w = Recorder {
            refuse_gso: true,
            ..Default::default()
        };
        let mut c = Coalescer::new(LinkKind::RawIp, CoalescerOptions::default());
        c.write_batch(segs.iter().map(|s| s.as_slice()), &mut w)
            .unwrap();
        assert_eq!(c.stats().gso_rejected, 1);
        assert_eq!(c.stats().fallback_segments, 4);
        let written: Vec<Vec<u8>> = w.writes.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(
            written, segs,
            "GSO gives back the original segments byte for byte"
        );
        assert!(w.writes.iter().all(|(h, _)| h.is_none()));
    }

    #[test]
    fn verdict_skips_verification_and_none_still_verifies() {
        let mut segs = segments(3, 1000, 1000);
        // Corrupt the middle segment's payload: its TCP checksum is wrong.
        segs[1][100] ^= 0xff;
        let run = |csum: RxChecksum| {
            let mut w = Recorder::default();
            let mut c = Coalescer::new(LinkKind::RawIp, CoalescerOptions::default());
            for s in &segs {
                c.push_with_checksum(s, csum, &mut w).unwrap();
            }
            c.flush(&mut w).unwrap();
            w.writes.len()
        };
        // Unknown checksums are verified: the bad segment breaks the merge.
        assert!(run(RxChecksum::None) > 1);
        // A verdict is trusted, as the kernel trusts CHECKSUM_UNNECESSARY.
        assert_eq!(run(RxChecksum::Unnecessary { level: 0 }), 1);
    }

    #[test]
    fn gro_off_writes_packet_by_packet() {
        let segs = segments(3, 1000, 1000);
        let mut w = Recorder::default();
        let opts = CoalescerOptions {
            gro: false,
            ..Default::default()
        };
        let mut c = Coalescer::new(LinkKind::RawIp, opts);
        c.write_batch(segs.iter().map(|s| s.as_slice()), &mut w)
            .unwrap();
        assert_eq!(w.writes.len(), 3);
        assert_eq!(c.stats().super_packets, 0);
    }
}
