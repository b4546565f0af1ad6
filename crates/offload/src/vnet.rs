//! `virtio_net_hdr`: the offload metadata TUN/TAP (with `IFF_VNET_HDR`),
//! virtio-net and `PACKET_VNET_HDR` sockets put in front of each packet
//! (`include/uapi/linux/virtio_net.h`, `include/linux/virtio_net.h`).
//!
//! ```text
//!  0      1         2         4          6           8            10          12
//!  |flags |gso_type | hdr_len | gso_size | csum_start| csum_offset | num_buffers (v1)
//! ```
//!
//! Reading (kernel → user): [`VnetHdr::decode`], then [`plan`] checks the
//! header against the packet and says what to do: nothing, finish a
//! partial checksum, or segment. `hdr_len` from the kernel is a hint
//! (`skb_headlen`), not the header length: it is never trusted; header
//! lengths come from `csum_start` and the TCP data offset, as wireguard-go
//! learned the hard way.
//!
//! Writing (user → kernel): [`VnetHdr::for_delivery`] describes a GRO
//! super-packet exactly as the kernel's `virtio_net_hdr_to_skb` wants it:
//! `NEEDS_CSUM`, `csum_start` at the transport header, `csum_offset` 16 or
//! 6, the pseudo-header sum already in the checksum field (GRO completion
//! leaves it there), `gso_type` and `gso_size`.

use crate::gro::{gso_type as skb, Delivered};
use crate::gso::{layout, GsoParams, Layout};
use crate::link::LinkKind;
use crate::wire::{put16, tcp, IpVersion, Transport};
use core::fmt;

/// Length of the legacy header.
pub const HDR_LEN: usize = 10;
/// Length of `virtio_net_hdr_v1` (adds `num_buffers`).
pub const HDR_LEN_V1: usize = 12;

/// `flags` bits.
pub mod flags {
    /// The checksum is partial: finish it at `csum_start + csum_offset`.
    pub const NEEDS_CSUM: u8 = 1;
    /// The checksum was verified (receive side).
    pub const DATA_VALID: u8 = 2;
    /// `gso_size` carries RSC coalescing information.
    pub const RSC_INFO: u8 = 4;
    /// The outer UDP checksum of a tunnel is partial.
    pub const UDP_TUNNEL_CSUM: u8 = 8;
}

/// `gso_type` values.
pub mod gso {
    /// Not a GSO packet.
    pub const NONE: u8 = 0;
    /// TCP over IPv4.
    pub const TCPV4: u8 = 1;
    /// UDP fragmentation offload (UFO, obsolete).
    pub const UDP: u8 = 3;
    /// TCP over IPv6.
    pub const TCPV6: u8 = 4;
    /// UDP segmentation (USO).
    pub const UDP_L4: u8 = 5;
    /// UDP tunnel, outer IPv4.
    pub const UDP_TUNNEL_IPV4: u8 = 0x20;
    /// UDP tunnel, outer IPv6.
    pub const UDP_TUNNEL_IPV6: u8 = 0x40;
    /// ECN CWR set (flag bit).
    pub const ECN: u8 = 0x80;
}

/// `UDP_MAX_SEGMENTS`: the most datagrams one USO packet may carry.
pub const UDP_MAX_SEGMENTS: u32 = 64;

/// A decoded `virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*` bits ([`flags`]).
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*` value ([`gso`]).
    pub gso_type: u8,
    /// Header length hint (`skb_headlen` from the kernel; never trusted).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts (the transport header).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
    /// Present in headers of 12 bytes or more.
    pub num_buffers: Option<u16>,
}

/// What is wrong with a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VnetError {
    /// Fewer bytes than the header size.
    Short {
        /// Bytes the header needs.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// A `gso_type` the kernel rejects (`-EINVAL`).
    UnknownGsoType(u8),
    /// GSO type set with `gso_size` 0, or `GSO_BY_FRAGS` (0xFFFF).
    BadGsoSize(u16),
    /// `csum_start`/`csum_offset` outside the packet, or not where the
    /// transport header is.
    BadChecksumOffsets {
        /// `csum_start` as given.
        csum_start: u16,
        /// `csum_offset` as given.
        csum_offset: u16,
    },
    /// The packet does not match the GSO type (e.g. TCPV4 on an IPv6 packet).
    Mismatch(&'static str),
    /// More than `UDP_MAX_SEGMENTS` datagrams.
    TooManySegments(u32),
}

impl fmt::Display for VnetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VnetError::Short { need, have } => write!(f, "virtio_net_hdr needs {need} bytes, {have} present"),
            VnetError::UnknownGsoType(t) => write!(f, "virtio_net_hdr gso_type {t:#x} is not one the kernel accepts"),
            VnetError::BadGsoSize(s) => write!(f, "virtio_net_hdr gso_size {s} is invalid"),
            VnetError::BadChecksumOffsets { csum_start, csum_offset } => write!(
                f,
                "virtio_net_hdr csum_start {csum_start} / csum_offset {csum_offset} do not point at the transport checksum"
            ),
            VnetError::Mismatch(what) => write!(f, "virtio_net_hdr does not match the packet: {what}"),
            VnetError::TooManySegments(n) => write!(f, "{n} datagrams exceed UDP_MAX_SEGMENTS ({UDP_MAX_SEGMENTS})"),
        }
    }
}

impl std::error::Error for VnetError {}

impl VnetHdr {
    /// What this header says about the packet's checksums, for
    /// [`crate::GroEngine::receive_with_checksum`] (`virtio_net_hdr_to_skb`):
    /// `NEEDS_CSUM` (a partial checksum, `CHECKSUM_PARTIAL`: GRO validates
    /// nothing up to `csum_start`) and `DATA_VALID` (`CHECKSUM_UNNECESSARY`,
    /// level 0) both mean "do not verify"; otherwise nothing is known.
    pub fn rx_checksum(&self) -> crate::gro::RxChecksum {
        use crate::gro::RxChecksum;
        if self.flags & flags::NEEDS_CSUM != 0 {
            RxChecksum::Unnecessary { level: u8::MAX }
        } else if self.flags & flags::DATA_VALID != 0 {
            RxChecksum::Unnecessary { level: 0 }
        } else {
            RxChecksum::None
        }
    }

    /// Decodes a header of `size` bytes (10, 12 or more) at the start of
    /// `buf`, little-endian: v1 headers always are, and legacy headers are
    /// on the little-endian hosts this crate supports.
    pub fn decode(buf: &[u8], size: usize) -> Result<Self, VnetError> {
        if size < HDR_LEN || buf.len() < size {
            return Err(VnetError::Short {
                need: size.max(HDR_LEN),
                have: buf.len(),
            });
        }
        let le = |at: usize| u16::from_le_bytes([buf[at], buf[at + 1]]);
        Ok(VnetHdr {
            flags: buf[0],
            gso_type: buf[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
            num_buffers: (size >= HDR_LEN_V1).then(|| le(10)),
        })
    }

    /// Encodes into the first `out.len()` bytes (10, 12 or more; extra
    /// bytes are zeroed), little-endian.
    pub fn encode(&self, out: &mut [u8]) {
        out.fill(0);
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        if out.len() >= HDR_LEN_V1 {
            out[10..12].copy_from_slice(&self.num_buffers.unwrap_or(1).to_le_bytes());
        }
    }

    /// The header for writing a delivered packet to a TUN/TAP device. A
    /// super-packet gets NEEDS_CSUM and its GSO type; a single packet gets
    /// flags 0 (its checksum is final as received): never the header of a
    /// previous packet.
    pub fn for_delivery(d: &Delivered<'_>) -> Result<Self, VnetError> {
        if d.segments <= 1 {
            return Ok(VnetHdr::default());
        }
        let lay =
            layout(d.link, d.data, &[]).map_err(|_| VnetError::Mismatch("unreadable headers"))?;
        if d.gso_type & (skb::UDP_TUNNEL | skb::UDP_TUNNEL_CSUM) != 0 {
            return Err(VnetError::Mismatch(
                "tunnel GSO needs the 24-byte header (not supported)",
            ));
        }
        let gso_type = match (lay.l4_proto, lay.ip) {
            (Transport::Tcp, IpVersion::V4) => gso::TCPV4,
            (Transport::Tcp, IpVersion::V6) => gso::TCPV6,
            (Transport::Udp, _) => gso::UDP_L4,
        };
        let csum_offset = lay.l4_proto.checksum_offset() as u16;
        // Only TCP has the flag byte (a UDP packet's `data` may end with
        // its 8-byte header: zero-copy delivery).
        let cwr = lay.l4_proto == Transport::Tcp
            && d.data[lay.l4_off + tcp::field::FLAGS] & tcp::flags::CWR != 0;
        let ecn = if cwr { gso::ECN } else { 0 };
        Ok(VnetHdr {
            flags: flags::NEEDS_CSUM,
            gso_type: gso_type | ecn,
            hdr_len: lay.payload_off() as u16,
            gso_size: d.gso_size.min(u16::MAX as u32) as u16,
            csum_start: lay.l4_off as u16,
            csum_offset,
            num_buffers: None,
        })
    }
}

/// What a reader must do with a packet read from TUN/TAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: the packet is complete (checksum final or `DATA_VALID`).
    AsIs,
    /// Finish the checksum at `csum_start + csum_offset` (the field holds
    /// the pseudo-header sum): see [`complete_checksum`].
    CompleteChecksum {
        /// Where checksumming starts.
        csum_start: usize,
        /// Offset of the checksum field from `csum_start`.
        csum_offset: usize,
    },
    /// Segment with these parameters ([`crate::gso::segment_layout`]);
    /// every segment gets a full checksum.
    Segment {
        /// `gso_size` and the fixed-ID/ECN bits.
        params: GsoParams,
        /// Where the headers are.
        layout: Layout,
    },
}

/// Checks a kernel → user header against its packet (which starts at the
/// link header for a TAP, at the IP header for a TUN without PI) and says
/// what to do. `hdr_len` is ignored.
pub fn plan(hdr: &VnetHdr, link: LinkKind, packet: &[u8]) -> Result<Plan, VnetError> {
    let base = hdr.gso_type & !gso::ECN;
    let needs_csum = hdr.flags & flags::NEEDS_CSUM != 0;
    if needs_csum {
        let (s, o) = (hdr.csum_start as usize, hdr.csum_offset as usize);
        if s + o + 2 > packet.len() {
            return Err(VnetError::BadChecksumOffsets {
                csum_start: hdr.csum_start,
                csum_offset: hdr.csum_offset,
            });
        }
    }
    if base == gso::NONE {
        return Ok(if needs_csum {
            Plan::CompleteChecksum {
                csum_start: hdr.csum_start as usize,
                csum_offset: hdr.csum_offset as usize,
            }
        } else {
            Plan::AsIs
        });
    }
    if hdr.gso_size == 0 || hdr.gso_size == 0xffff {
        return Err(VnetError::BadGsoSize(hdr.gso_size));
    }
    let lay = layout(link, packet, &[]).map_err(|_| VnetError::Mismatch("unreadable headers"))?;
    let ok = match base {
        gso::TCPV4 => lay.l4_proto == Transport::Tcp && lay.ip == IpVersion::V4,
        gso::TCPV6 => lay.l4_proto == Transport::Tcp && lay.ip == IpVersion::V6,
        gso::UDP_L4 | gso::UDP => lay.l4_proto == Transport::Udp,
        other => return Err(VnetError::UnknownGsoType(other)),
    };
    if !ok {
        return Err(VnetError::Mismatch("gso_type does not match the transport"));
    }
    if needs_csum && hdr.csum_start as usize != lay.l4_off {
        // `tcp_gso_segment` refuses csum_start != transport header.
        return Err(VnetError::BadChecksumOffsets {
            csum_start: hdr.csum_start,
            csum_offset: hdr.csum_offset,
        });
    }
    if base == gso::UDP_L4 {
        let n = (lay.payload_len() as u32).div_ceil(hdr.gso_size as u32);
        if n > UDP_MAX_SEGMENTS {
            return Err(VnetError::TooManySegments(n));
        }
    }
    if lay.payload_len() <= hdr.gso_size as usize {
        // "If payload <= gso_size the packet is treated as non-GSO."
        return Ok(if needs_csum {
            Plan::CompleteChecksum {
                csum_start: hdr.csum_start as usize,
                csum_offset: hdr.csum_offset as usize,
            }
        } else {
            Plan::AsIs
        });
    }
    Ok(Plan::Segment {
        params: GsoParams::new(hdr.gso_size as u32),
        layout: lay,
    })
}

/// Finishes a partial checksum: the field at `start + offset` holds the
/// pseudo-header sum; the checksum covers `packet[start..]`.
pub fn complete_checksum(packet: &mut [u8], start: usize, offset: usize) -> Result<(), VnetError> {
    if start + offset + 2 > packet.len() {
        return Err(VnetError::BadChecksumOffsets {
            csum_start: start as u16,
            csum_offset: offset as u16,
        });
    }
    let sum = crate::checksum::sum_bytes(0, &packet[start..]);
    let mut c = !crate::checksum::fold(sum);
    if offset == 6 && c == 0 {
        c = 0xffff; // UDP
    }
    put16(packet, start + offset, c);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{FrameSpec, TcpSpec};
    use crate::gro::{GroConfig, GroEngine, Input};

    #[test]
    fn encode_decode_round_trip_v1() {
        let h = VnetHdr {
            flags: flags::NEEDS_CSUM,
            gso_type: gso::TCPV6 | gso::ECN,
            hdr_len: 86,
            gso_size: 1428,
            csum_start: 54,
            csum_offset: 16,
            num_buffers: Some(1),
        };
        let mut b = [0u8; HDR_LEN_V1];
        h.encode(&mut b);
        assert_eq!(VnetHdr::decode(&b, HDR_LEN_V1).unwrap(), h);
        assert!(VnetHdr::decode(&b[..9], HDR_LEN).is_err());
    }

    /// Zero-copy delivery: `data` is the headers only (a UDP packet's ends
    /// with its 8-byte header); the vnet header of the super-packet is the
    /// one of the copying delivery, never a read past `data`.
    #[test]
    fn zero_copy_super_packets_get_the_copying_header() {
        for udp in [false, true] {
            let frames: Vec<Vec<u8>> = (0..3u16)
                .map(|i| {
                    let mut s = if udp {
                        FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 4000, 5000)
                    } else {
                        FrameSpec::tcp4(
                            [10, 0, 0, 1],
                            [10, 0, 0, 2],
                            TcpSpec::data(1, 2, 100 + i as u32 * 1000),
                        )
                    }
                    .payload(vec![i as u8; 1000]);
                    s.v4_mut().id = i;
                    s.build()
                })
                .collect();
            let mut hdrs = Vec::new();
            for zero_copy in [false, true] {
                let mut e = GroEngine::new(GroConfig::default());
                e.set_zero_copy(zero_copy);
                let mut push = |d: &Delivered<'_>| {
                    assert_eq!(d.segments, 3);
                    hdrs.push(VnetHdr::for_delivery(d).unwrap());
                };
                for (i, f) in frames.iter().enumerate() {
                    let input = Input {
                        data: f,
                        link: LinkKind::Ethernet,
                        timestamp_ns: 0,
                        frame: i as u64 + 1,
                        orig_len: f.len() as u32,
                    };
                    e.receive(input, &mut push);
                }
                e.finish(&mut push);
            }
            assert_eq!(hdrs.len(), 2);
            assert_eq!(hdrs[0], hdrs[1], "udp {udp}");
            assert_ne!(hdrs[0].gso_type, 0);
        }
    }

    type Written = Vec<(Vec<u8>, VnetHdr)>;

    fn coalesced() -> (Vec<u8>, VnetHdr, Written) {
        // Three segments, a bad-checksum packet, then one more segment.
        let seg = |i: u32| {
            let mut s = FrameSpec::tcp4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                TcpSpec::data(1, 2, 100 + i * 1000),
            )
            .payload(vec![i as u8; 1000]);
            s.v4_mut().id = i as u16;
            s
        };
        let mut bad = seg(9);
        bad.tcp_mut().corrupt_checksum = true;
        let frames: Vec<Vec<u8>> = [seg(0), seg(1), seg(2), bad]
            .iter()
            .map(|s| s.build())
            .collect();
        let mut e = GroEngine::new(GroConfig {
            flush_timeout_ns: 1_000_000,
            ..Default::default()
        });
        let mut got = Vec::new();
        let mut push = |d: &Delivered<'_>| {
            let packet = d.to_vec(|n| &frames[n as usize - 1]);
            got.push((packet, VnetHdr::for_delivery(d).unwrap()))
        };
        for (i, f) in frames.iter().enumerate() {
            e.receive(
                Input {
                    data: f,
                    link: LinkKind::Ethernet,
                    timestamp_ns: 0,
                    frame: i as u64 + 1,
                    orig_len: f.len() as u32,
                },
                &mut push,
            );
        }
        e.finish(&mut push);
        let (sp, h) = got.iter().find(|(_, h)| h.gso_type != 0).cloned().unwrap();
        (sp, h, got)
    }

    #[test]
    fn super_packet_header_is_what_the_kernel_wants() {
        let (sp, h, _) = coalesced();
        assert_eq!(
            (h.flags, h.gso_type, h.gso_size, h.csum_start, h.csum_offset),
            (1, gso::TCPV4, 1000, 34, 16)
        );
        assert_eq!(h.hdr_len, 54);
        // The plan for reading it back is "segment at 1000".
        match plan(&h, LinkKind::Ethernet, &sp).unwrap() {
            Plan::Segment { params, .. } => assert_eq!(params.mss, 1000),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stale_vnet_header_after_bad_checksum() {
        // The packet GRO refused (bad checksum) must go out with its own,
        // empty header, not the super-packet's.
        let (_, _, all) = coalesced();
        let bad = all.iter().find(|(_, h)| h.gso_type == 0).unwrap();
        assert_eq!(bad.1, VnetHdr::default());
    }

    #[test]
    fn untrusted_hdr_len_is_ignored() {
        let (sp, mut h, _) = coalesced();
        h.hdr_len = 1200; // skb_headlen spanning into payload
        let Plan::Segment { layout, .. } = plan(&h, LinkKind::Ethernet, &sp).unwrap() else {
            panic!("expected a segment plan");
        };
        assert_eq!(layout.payload_off(), 54);
        h.hdr_len = 3; // too short to be true
        assert!(matches!(
            plan(&h, LinkKind::Ethernet, &sp),
            Ok(Plan::Segment { .. })
        ));
    }

    #[test]
    fn bad_headers_are_rejected() {
        let (sp, h, _) = coalesced();
        let mut x = h;
        x.gso_type = 0x11;
        assert_eq!(
            plan(&x, LinkKind::Ethernet, &sp),
            Err(VnetError::UnknownGsoType(0x11))
        );
        let mut x = h;
        x.gso_size = 0;
        assert_eq!(
            plan(&x, LinkKind::Ethernet, &sp),
            Err(VnetError::BadGsoSize(0))
        );
        let mut x = h;
        x.csum_start = 60000;
        assert!(matches!(
            plan(&x, LinkKind::Ethernet, &sp),
            Err(VnetError::BadChecksumOffsets { .. })
        ));
        let mut x = h;
        x.gso_type = gso::TCPV6;
        assert!(matches!(
            plan(&x, LinkKind::Ethernet, &sp),
            Err(VnetError::Mismatch(_))
        ));
    }

    #[test]
    fn partial_checksum_is_completed() {
        let mut f = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], TcpSpec::data(1, 2, 3))
            .payload(vec![5; 77])
            .build();
        let good = f.clone();
        let pseudo =
            crate::checksum::pseudo_ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, (f.len() - 34) as u32);
        f[50..52].copy_from_slice(&crate::checksum::fold(pseudo).to_be_bytes());
        complete_checksum(&mut f, 34, 16).unwrap();
        assert_eq!(f, good);
    }
}
