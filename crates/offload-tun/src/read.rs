//! The read side, without I/O: what to do with one packet the kernel handed
//! to the device, given its `virtio_net_hdr`.
//!
//! `offload::vnet::plan` checks the header against the packet (the
//! kernel's `hdr_len` is ignored; header lengths come from `csum_start` and
//! the TCP data offset) and says: pass as is, finish a partial checksum, or
//! segment. Segmentation is `offload::gso::segment_layout`, the engine's
//! copy of `tcp_gso_segment`/`__udp_gso_segment`, which writes full
//! checksums into every segment: a reader of this crate never sees a
//! partial checksum.

use offload::gso::{segment_layout, segment_layout_into};
use offload::vnet::{complete_checksum, plan, Plan, VnetHdr};
use offload::{LinkKind, RxChecksum};

use crate::arena::{FrameArena, SrcMap, Staged};
use crate::error::{Result, TunError};

/// One packet as read from the device, before any processing.
#[derive(Debug)]
pub struct RawPacket<'a> {
    /// The decoded vnet header; `None` for a device without `IFF_VNET_HDR`.
    pub vnet: Option<VnetHdr>,
    /// The packet (IP header first for TUN, Ethernet for TAP).
    pub packet: &'a mut [u8],
}

/// What [`split_packet`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Handed out unchanged.
    AsIs,
    /// A partial checksum was completed (`NEEDS_CSUM` without GSO).
    ChecksumCompleted,
    /// A super-packet was cut into this many segments.
    Segmented(usize),
}

/// Turns one packet read with header `vnet` into wire-sized packets with
/// complete checksums, each handed to `out`. `dev` only names the device
/// in errors.
pub fn split_packet(
    dev: &str,
    vnet: Option<&VnetHdr>,
    link: LinkKind,
    packet: &mut [u8],
    out: &mut impl FnMut(&[u8]),
) -> Result<Split> {
    split_packet_with_checksum(dev, vnet, link, packet, &mut |p, _| out(p))
}

/// [`split_packet`], handing out with each packet what is known of its
/// TCP/UDP checksum, for [`crate::Coalescer::push_with_checksum`]: a
/// checksum this function computed (segmentation, a completed partial
/// checksum) or one the kernel vouched for (`DATA_VALID`) is
/// `RxChecksum::Unnecessary { level: 0 }`, so that GRO does not verify it
/// a second time; a packet the kernel said nothing about is
/// `RxChecksum::None`, as is every packet of a device without vnet headers.
pub fn split_packet_with_checksum(
    dev: &str,
    vnet: Option<&VnetHdr>,
    link: LinkKind,
    packet: &mut [u8],
    out: &mut impl FnMut(&[u8], RxChecksum),
) -> Result<Split> {
    let Some(hdr) = vnet else {
        out(packet, RxChecksum::None);
        return Ok(Split::AsIs);
    };
    // Computed here, by the engine's segmentation or completion: valid.
    let computed = RxChecksum::Unnecessary { level: 0 };
    let bad = |source| TunError::BadVnetHeader {
        dev: dev.to_string(),
        len: packet.len(),
        source,
    };
    match plan(hdr, link, packet).map_err(bad)? {
        Plan::AsIs => {
            // Nothing to compute: only the kernel's DATA_VALID vouches.
            let csum = if hdr.flags & offload::vnet::flags::DATA_VALID != 0 {
                computed
            } else {
                RxChecksum::None
            };
            out(packet, csum);
            Ok(Split::AsIs)
        }
        Plan::CompleteChecksum {
            csum_start,
            csum_offset,
        } => {
            complete_checksum(packet, csum_start, csum_offset).map_err(|source| {
                TunError::BadVnetHeader {
                    dev: dev.to_string(),
                    len: packet.len(),
                    source,
                }
            })?;
            out(packet, computed);
            Ok(Split::ChecksumCompleted)
        }
        Plan::Segment { params, layout } => {
            // The ECN bit of gso_type is SKB_GSO_TCP_ECN, which changes
            // nothing in segmentation (CWR stays on the first segment only).
            let n = segment_layout(packet, &layout, &params, &mut |seg: &[u8]| {
                out(seg, computed)
            })
            .map_err(|source| TunError::Segment {
                dev: dev.to_string(),
                len: packet.len(),
                source,
            })?;
            Ok(Split::Segmented(n))
        }
    }
}

/// [`split_packet_with_checksum`] into a [`FrameArena`]: the wire-sized
/// packets (with their checksum verdicts) are appended to `arena`, a
/// super-packet's segments built in place there by
/// `offload::gso::segment_layout_into` (no intermediate segment buffer), so
/// that a zero-copy [`crate::Coalescer`] can merge them without copying
/// their payloads again. The arena is unchanged on error.
pub fn split_packet_into(
    dev: &str,
    vnet: Option<&VnetHdr>,
    link: LinkKind,
    packet: &mut [u8],
    arena: &mut FrameArena,
) -> Result<Split> {
    split_into(
        dev,
        vnet,
        link,
        packet,
        &mut arena.bytes,
        &mut arena.frames,
        None,
    )
}

/// [`split_packet_into`] on the arena's parts; `src_base`: where `packet`
/// lies in the arena's super-packet area, if it does (each segment then
/// records where its payload came from, see `FrameArena::src`).
pub(crate) fn split_into(
    dev: &str,
    vnet: Option<&VnetHdr>,
    link: LinkKind,
    packet: &mut [u8],
    bytes: &mut Vec<u8>,
    frames: &mut Vec<Staged>,
    src_base: Option<usize>,
) -> Result<Split> {
    if let Some(hdr) = vnet {
        if let Ok(Plan::Segment { params, layout }) = plan(hdr, link, packet) {
            let computed = RxChecksum::Unnecessary { level: 0 };
            let (bytes0, frames0) = (bytes.len(), frames.len());
            // Segment i carries the headers (payload_off bytes, no Jumbo
            // HBH on a TUN) and then payload[i * mss..], copied verbatim.
            let payload_off = layout.payload_off();
            let mss = params.mss as usize;
            let src_base = src_base.filter(|_| !layout.jumbo_hbh);
            let mut i = 0;
            let r = segment_layout_into(packet, &layout, &params, bytes, &mut |r| {
                let src = src_base.map(|b| SrcMap {
                    seg_payload: payload_off,
                    src_start: b + payload_off + i * mss,
                });
                i += 1;
                frames.push(Staged::new(r, computed, src))
            });
            return match r {
                Ok(n) => Ok(Split::Segmented(n)),
                Err(source) => {
                    bytes.truncate(bytes0);
                    frames.truncate(frames0);
                    Err(TunError::Segment {
                        dev: dev.to_string(),
                        len: packet.len(),
                        source,
                    })
                }
            };
        }
    }
    // Everything else is one packet (or an error): copied in as it comes.
    split_packet_with_checksum(dev, vnet, link, packet, &mut |p, csum| {
        let start = bytes.len();
        bytes.extend_from_slice(p);
        frames.push(Staged::new(start..bytes.len(), csum, None));
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload::build::{FrameSpec, L2Spec, TcpSpec};
    use offload::checksum;
    use offload::vnet::{flags, gso};

    /// A TCP/IPv4 super-packet as the kernel hands it to a TUN with TSO:
    /// IPv4 length of the whole, pseudo-header sum in the checksum field.
    fn tso_packet(payload: usize, mss: u16) -> (VnetHdr, Vec<u8>) {
        let mut s = FrameSpec::tcp4([10, 1, 0, 1], [10, 1, 0, 2], TcpSpec::data(1000, 2000, 7))
            .payload((0..payload).map(|i| i as u8).collect());
        s.l2 = L2Spec::None;
        s.tcp_mut().flags |= offload::wire::tcp::flags::PSH;
        let mut p = s.build();
        let l4_len = (p.len() - 20) as u32;
        let pseudo = checksum::pseudo_ipv4([10, 1, 0, 1], [10, 1, 0, 2], 6, l4_len);
        p[36..38].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
        let hdr = VnetHdr {
            flags: flags::NEEDS_CSUM,
            gso_type: gso::TCPV4,
            hdr_len: 1500, // skb_headlen: a hint that spans into the payload
            gso_size: mss,
            csum_start: 20,
            csum_offset: 16,
            num_buffers: None,
        };
        (hdr, p)
    }

    fn tcp_ok(seg: &[u8]) -> bool {
        let pseudo = checksum::pseudo_ipv4(
            seg[12..16].try_into().unwrap(),
            seg[16..20].try_into().unwrap(),
            6,
            (seg.len() - 20) as u32,
        );
        checksum::verify(pseudo, &seg[20..]) && checksum::checksum(&seg[..20]) == 0
    }

    #[test]
    fn super_packet_is_segmented_with_full_checksums() {
        let (hdr, mut p) = tso_packet(3000, 1400);
        let mut segs = Vec::new();
        let r = split_packet(
            "t",
            Some(&hdr),
            LinkKind::RawIp,
            &mut p,
            &mut |s: &[u8]| segs.push(s.to_vec()),
        )
        .unwrap();
        assert_eq!(r, Split::Segmented(3));
        let lens: Vec<usize> = segs.iter().map(|s| s.len()).collect();
        assert_eq!(lens, vec![1440, 1440, 240]);
        let mut payload = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            assert!(tcp_ok(s), "segment {i} checksum");
            let psh = s[33] & offload::wire::tcp::flags::PSH != 0;
            assert_eq!(psh, i == 2, "PSH only on the last segment");
            assert_eq!(
                u16::from_be_bytes([s[4], s[5]]),
                i as u16,
                "IP ID increments"
            );
            payload.extend_from_slice(&s[40..]);
        }
        assert_eq!(payload, (0..3000).map(|i| i as u8).collect::<Vec<_>>());
    }

    #[test]
    fn needs_csum_without_gso_is_completed() {
        let (mut hdr, mut p) = tso_packet(500, 1400);
        hdr.gso_type = gso::NONE;
        hdr.gso_size = 0;
        assert!(!tcp_ok(&p));
        let mut got = Vec::new();
        let r = split_packet(
            "t",
            Some(&hdr),
            LinkKind::RawIp,
            &mut p,
            &mut |s: &[u8]| got.push(s.to_vec()),
        )
        .unwrap();
        assert_eq!(r, Split::ChecksumCompleted);
        assert!(tcp_ok(&got[0]));
    }

    #[test]
    fn header_that_does_not_fit_is_an_error_naming_the_device() {
        let (mut hdr, mut p) = tso_packet(3000, 1400);
        hdr.csum_start = 4000;
        let e = split_packet(
            "oflx",
            Some(&hdr),
            LinkKind::RawIp,
            &mut p,
            &mut |_: &[u8]| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("oflx"), "{e}");
    }

    #[test]
    fn verdicts_say_what_was_computed_or_vouched_for() {
        let verdicts = |hdr: Option<&VnetHdr>, p: &mut Vec<u8>| {
            let mut v = Vec::new();
            split_packet_with_checksum("t", hdr, LinkKind::RawIp, p, &mut |_, c| v.push(c))
                .unwrap();
            v
        };
        let valid = RxChecksum::Unnecessary { level: 0 };
        // Segmented: every segment's checksum was just computed.
        let (hdr, mut p) = tso_packet(3000, 1400);
        assert_eq!(verdicts(Some(&hdr), &mut p), vec![valid; 3]);
        // Partial checksum completed here.
        let (mut hdr, mut p) = tso_packet(500, 1400);
        hdr.gso_type = gso::NONE;
        hdr.gso_size = 0;
        assert_eq!(verdicts(Some(&hdr), &mut p), vec![valid]);
        // Complete packet: DATA_VALID vouches, no flag does not.
        let (_, p0) = tso_packet(100, 1400);
        let mut plain = VnetHdr::default();
        assert_eq!(
            verdicts(Some(&plain), &mut p0.clone()),
            vec![RxChecksum::None]
        );
        plain.flags = flags::DATA_VALID;
        assert_eq!(verdicts(Some(&plain), &mut p0.clone()), vec![valid]);
        assert_eq!(verdicts(None, &mut p0.clone()), vec![RxChecksum::None]);
    }

    /// The arena path hands out the same packets and verdicts as the
    /// copying one, after what the arena already held; a packet that cannot
    /// be split leaves the arena as it was.
    #[test]
    fn split_into_arena_equals_split_with_checksum() {
        let (hdr, p0) = tso_packet(7000, 1400);
        let (mut partial, p1) = tso_packet(500, 1400);
        partial.gso_type = gso::NONE;
        partial.gso_size = 0;
        let mut arena = FrameArena::new();
        arena.push(&[1, 2, 3], RxChecksum::None);
        for (h, p) in [(Some(&hdr), &p0), (Some(&partial), &p1), (None, &p0)] {
            let mut want = Vec::new();
            let ws =
                split_packet_with_checksum("t", h, LinkKind::RawIp, &mut p.clone(), &mut |s, c| {
                    want.push((s.to_vec(), c))
                })
                .unwrap();
            let before = arena.len();
            let gs =
                split_packet_into("t", h, LinkKind::RawIp, &mut p.clone(), &mut arena).unwrap();
            assert_eq!(gs, ws);
            let got: Vec<_> = (before..arena.len())
                .map(|i| arena.frame(i).map(|(b, c)| (b.to_vec(), c)).unwrap())
                .collect();
            assert_eq!(got, want);
        }
        let (len, bytes) = (arena.len(), arena.bytes_len());
        let mut bad = hdr;
        bad.csum_start = 4000;
        assert!(split_packet_into(
            "t",
            Some(&bad),
            LinkKind::RawIp,
            &mut p0.clone(),
            &mut arena
        )
        .is_err());
        assert_eq!((arena.len(), arena.bytes_len()), (len, bytes));
        assert_eq!(arena.frame(0).unwrap().0, &[1, 2, 3]);
    }

    #[test]
    fn no_vnet_header_means_as_is() {
        let (_, mut p) = tso_packet(100, 1400);
        let orig = p.clone();
        let mut got = Vec::new();
        let r = split_packet("t", None, LinkKind::RawIp, &mut p, &mut |s: &[u8]| {
            got.push(s.to_vec())
        })
        .unwrap();
        assert_eq!((r, got), (Split::AsIs, vec![orig]));
    }

    /// Mutated headers and packets (a deterministic xorshift stream) give
    /// errors, never panics: the kernel's header is untrusted input.
    #[test]
    fn mutated_headers_and_packets_never_panic() {
        let (hdr0, p0) = tso_packet(3000, 1400);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut h = hdr0;
            let mut hb = [0u8; 10];
            h.encode(&mut hb);
            for _ in 0..(next() % 3) {
                let i = (next() % 10) as usize;
                hb[i] = next() as u8;
            }
            h = VnetHdr::decode(&hb, 10).unwrap();
            let mut p = p0.clone();
            for _ in 0..(next() % 4) {
                let i = (next() % 60) as usize;
                p[i] = next() as u8;
            }
            let cut = (next() % (p.len() as u64 + 1)) as usize;
            if next() % 4 == 0 {
                p.truncate(cut);
            }
            let _ = split_packet(
                "fuzz",
                Some(&h),
                LinkKind::RawIp,
                &mut p,
                &mut |_: &[u8]| {},
            );
        }
    }
}
