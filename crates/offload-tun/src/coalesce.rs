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
//! Some kernels refuse valid GSO writes: 6.6.44 and other July-2024 stables
//! return `EINVAL` when the last segment is shorter than the header length
//! derived from `csum_start` (e269d79c7d35, fixed by 89add40066f9;
//! tailscale#13041). On `EINVAL` for a GSO write the coalescer segments the
//! super-packet itself (`offload::gso`, full checksums) and writes the
//! segments, so no data is lost on such a kernel.

use std::io;

use offload::gro::{Delivered, GroConfig, GroEngine, Input, RxChecksum, UdpGro};
use offload::gso::{segment, GsoParams};
use offload::vnet::VnetHdr;
use offload::LinkKind;

use crate::device::TunDevice;
use crate::error::{Result, TunError};

/// Where the coalescer writes: a [`TunDevice`], or a wrapper around one.
pub trait PacketWriter {
    /// True when packets may carry a vnet header (GSO writes possible).
    fn has_vnet_hdr(&self) -> bool;
    /// Writes one packet with an optional vnet header.
    fn write_packet(&mut self, vnet: Option<&VnetHdr>, packet: &[u8]) -> io::Result<()>;
}

impl PacketWriter for TunDevice {
    fn has_vnet_hdr(&self) -> bool {
        self.vnet_hdr_len() != 0
    }

    fn write_packet(&mut self, vnet: Option<&VnetHdr>, packet: &[u8]) -> io::Result<()> {
        TunDevice::write_packet(self, vnet, packet)
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
}

impl Default for CoalescerOptions {
    fn default() -> Self {
        CoalescerOptions {
            gro: true,
            verify_checksums: true,
            udp: true,
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
}

/// GRO in front of a TUN/TAP writer.
#[derive(Debug)]
pub struct Coalescer {
    engine: GroEngine,
    link: LinkKind,
    opts: CoalescerOptions,
    stats: CoalesceStats,
    frame: u64,
}

impl Coalescer {
    /// A coalescer for packets of link type `link` (`RawIp` for TUN).
    pub fn new(link: LinkKind, opts: CoalescerOptions) -> Self {
        let cfg = GroConfig {
            // Batches are flushed explicitly; time plays no part.
            flush_timeout_ns: u64::MAX,
            verify_checksums: opts.verify_checksums,
            udp: if opts.udp {
                UdpGro::AllPorts
            } else {
                UdpGro::Off
            },
            // Tunnel GSO needs the 24-byte header (6.17+), not spoken here.
            vxlan_ports: Vec::new(),
            // TUN's tso_max_size is 64 KiB: no BIG TCP through a TUN write.
            ..GroConfig::default()
        };
        Coalescer {
            engine: GroEngine::new(cfg),
            link,
            opts,
            stats: CoalesceStats::default(),
            frame: 0,
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
        self.stats.packets_in += 1;
        if !self.opts.gro || !w.has_vnet_hdr() {
            return match w.write_packet(None, packet) {
                Ok(()) => {
                    self.stats.writes += 1;
                    Ok(())
                }
                Err(e) => Err(TunError::os("write", "coalescer", e)),
            };
        }
        self.frame += 1;
        let input = Input {
            data: packet,
            link: self.link,
            timestamp_ns: 0,
            frame: self.frame,
            orig_len: packet.len() as u32,
        };
        let mut first_err = None;
        let stats = &mut self.stats;
        self.engine
            .receive_with_checksum(input, csum, &mut |d: &Delivered<'_>| {
                if let Err(e) = deliver(d, w, stats) {
                    first_err.get_or_insert(e);
                }
            });
        first_err.map_or(Ok(()), Err)
    }

    /// Ends the batch: writes every held packet.
    pub fn flush<W: PacketWriter>(&mut self, w: &mut W) -> Result<()> {
        let mut first_err = None;
        let stats = &mut self.stats;
        self.engine.finish(&mut |d: &Delivered<'_>| {
            if let Err(e) = deliver(d, w, stats) {
                first_err.get_or_insert(e);
            }
        });
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

/// Writes one GRO delivery: a super-packet with its header, falling back to
/// its segments; a single packet with an all-zero header.
fn deliver<W: PacketWriter>(d: &Delivered<'_>, w: &mut W, stats: &mut CoalesceStats) -> Result<()> {
    if d.segments > 1 {
        if let Ok(hdr) = VnetHdr::for_delivery(d) {
            match w.write_packet(Some(&hdr), d.data) {
                Ok(()) => {
                    stats.writes += 1;
                    stats.super_packets += 1;
                    stats.merged_packets += u64::from(d.segments);
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => stats.gso_rejected += 1,
                Err(e) => return Err(TunError::os("write", "coalescer", e)),
            }
        }
        return write_segments(d, w, stats);
    }
    w.write_packet(None, d.data)
        .map_err(|e| TunError::os("write", "coalescer", e))?;
    stats.writes += 1;
    Ok(())
}

fn write_segments<W: PacketWriter>(
    d: &Delivered<'_>,
    w: &mut W,
    stats: &mut CoalesceStats,
) -> Result<()> {
    let params = GsoParams::from_gso(d.gso_size, d.gso_type);
    let mut first_err = None;
    segment(
        d.link,
        d.data,
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
        len: d.data.len(),
        source,
    })?;
    first_err.map_or(Ok(()), |e| Err(TunError::os("write", "coalescer", e)))
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
