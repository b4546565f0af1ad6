//! "Same flow, next segment": the fast path of TCP GRO.
//!
//! In a bulk TCP flow almost every segment is the next one of the packet
//! held for its flow, and its headers differ from the held head's only in
//! the fields a sender changes per segment. The kernel's own rules say so:
//! `tcp_gro_receive` (`net/ipv4/tcp_offload.c`) merges only when the flag
//! word (but FIN and PSH), the ACK number, the window and every option
//! byte equal the head's; `inet_gro_flush` / `ipv6_gro_flush`
//! (`include/net/gro.h`) only when TTL, TOS, DF, or traffic class and hop
//! limit do; `gro_list_prepare` and the network layers' same-flow loops
//! only when the link header, the addresses and the ports do.
//!
//! So for each held plain TCP packet (no tunnel, no VLAN, no IPv4 options,
//! no IPv6 extension header) the engine keeps a [`Template`]: the head's
//! header bytes, link header to the last TCP option, with a mask of the
//! bytes that may differ (IPv4 total length, ID and header checksum, IPv6
//! payload length, TCP sequence number, checksum, and the FIN and PSH
//! bits). A frame whose masked header equals the template is by
//! construction of the same flow, with the same TTL, TOS, flags, ACK,
//! window and options; what is left is arithmetic on the varying fields:
//! the IP length matches the bytes, the IPv4 header checksum verifies, the
//! IPv4 ID follows the rule of the configured kernel line, the sequence
//! number is the expected one, the size stays under the limits, the TCP
//! checksum verifies when it must. If all of that holds the segment
//! merges, exactly as the full path would merge it (same state changes,
//! same delivery and reason when FIN, PSH or a short segment ends the
//! run). If anything does not hold, nothing has been changed and the frame
//! takes the full path, which finds the same held packet and names the
//! reason. The differential property test in `fast_tests.rs` runs both
//! paths over perturbed trains for every kernel line.

use super::rx::Skb;
use super::table::Slot;
use super::template::{flow_tag, hint_of};
use super::{mac_len, FlushReason, GroEngine, Input, Proto, RxChecksum};
use crate::checksum;
use crate::layout::Layout;
use crate::link::{L2Info, LinkKind};
use crate::wire::ethernet::{self, ethertype};
use crate::wire::tcp::{self, flags};
use crate::wire::Transport;
use crate::wire::{be16, be32, ipv4, ipv6, IpVersion};
/// Where the network and transport headers would be if `f` were a plain
/// TCP frame of link `link`: the layout the template of its flow has.
#[inline(always)]
fn plain_layout(f: &[u8], link: LinkKind) -> Option<(usize, IpVersion)> {
    let (l3, ip) = match link {
        LinkKind::Ethernet => {
            let et = be16(
                f.get(..ethernet::HEADER_LEN)?,
                ethernet::field::ETHERTYPE.start,
            );
            match et {
                ethertype::IPV4 => (ethernet::HEADER_LEN, IpVersion::V4),
                ethertype::IPV6 => (ethernet::HEADER_LEN, IpVersion::V6),
                _ => return None,
            }
        }
        LinkKind::RawIp | LinkKind::Ipv4 | LinkKind::Ipv6 => match (link, f.first()? >> 4) {
            (LinkKind::Ipv4, _) | (LinkKind::RawIp, 4) => (0, IpVersion::V4),
            (LinkKind::Ipv6, _) | (LinkKind::RawIp, 6) => (0, IpVersion::V6),
            _ => return None,
        },
        _ => return None,
    };
    Some((l3, ip))
}

impl GroEngine {
    /// The fast paths of a plain TCP frame (the shapes a [`Template`]
    /// serves): merged into the held packet of its flow when it is that
    /// packet's next segment ([`Self::fast_merge`]), or held as the head
    /// of a new run when no held packet can be of its flow
    /// ([`Self::fast_hold`]). Returns false, having changed nothing, when
    /// the frame needs the full path, which then names the reason. The
    /// frame's layout is read once for both.
    #[inline]
    pub(super) fn fast_receive<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        csum: RxChecksum,
        out: &mut F,
    ) -> bool {
        if !self.fast_path {
            return false;
        }
        let f = input.data;
        if (f.len() as u64) < input.orig_len as u64 {
            return false;
        }
        let verify = self.cfg.verify_checksums && csum.csum_cnt() == 0;
        if verify || !self.zero_copy {
            // The payload will be read (checksum, copy).
            prefetch_frame(f);
        }
        let Some((l3, ip)) = plain_layout(f, input.link) else {
            return false;
        };
        let Some(l4) = plain_tcp_offset(f, l3, ip) else {
            return false;
        };
        // The slot this flow's segment went to last, found without hashing
        // the whole flow key (a hint table indexed by the ports and address
        // ends). A full template match means the same flow, and a flow has
        // at most one held packet, so this is the slot the full path's
        // lookup would find; a held packet of the flow that fails the
        // merge's checks goes to the full path, which names the reason.
        // No match (a new flow, a rare collision): the hold path, which
        // hashes the flow once and checks it against every held packet.
        let tag = flow_tag(f, l4);
        let hint = hint_of(tag);
        let link = input.link;
        if !self.held.is_empty() {
            // Hints are written when a flow is held (both indices) and
            // repaired here, never on a plain merge: rewriting both on
            // every merge made two flows whose indices cross (one's first
            // is the other's second) take each other's first index back
            // and forth, a failed first probe on every frame of both
            // (IPv6 tcp6-8 of benches/gro-peers: flows 2/3 and 6/7, 1.12x
            // the one-flow time). A flow found under its second index
            // takes its first back unless a held flow hashes first there,
            // so every flow settles at one probe or, sharing a first index,
            // at two.
            let slot = match self.held.hinted(hint.0) {
                Some(s) if self.held.matches(s, f, link, tag) => Some(s),
                first => match self.held.hinted(hint.1) {
                    Some(s) if self.held.matches(s, f, link, tag) => {
                        if first.is_none_or(|o| !self.held.template(o).hints_first_at(hint.0)) {
                            self.held.set_hint(hint.0, s);
                        }
                        #[cfg(test)]
                        {
                            self.second_probes += 1;
                        }
                        Some(s)
                    }
                    _ => None,
                },
            };
            if let Some(slot) = slot {
                return self.fast_merge(input, verify, csum.csum_cnt(), slot, l3, ip, l4, out);
            }
        }
        self.fast_hold(input, verify, csum.csum_cnt(), l3, ip, l4, out)
    }

    /// Merges `input` into held packet `slot`, whose template it matches,
    /// when it is that packet's next segment and nothing about it needs
    /// the full path (or, when the merge would pass the size limit,
    /// completes the held packet and holds `input`, as the full path
    /// does); returns false, having changed nothing, otherwise.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn fast_merge<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        verify: bool,
        csum_cnt: u16,
        slot: Slot,
        l3: usize,
        ip: IpVersion,
        l4: usize,
        out: &mut F,
    ) -> bool {
        let f = input.data;
        let t = self.held.template_mut(slot);
        let (ip_sum, pseudo) = t.sums();
        let (hl, seq0, limit) = (t.hl as usize, t.seq, t.limit);
        let line = self.cfg.kernel;
        let p = self.held.get(slot);
        // Lengths: the IP header says exactly what the frame holds (else
        // the network layer's flush bit), a payload of 1..=mss bytes.
        let len = f.len() - hl;
        let (mut fixedid, mut atomic) = (p.fixedid, p.atomic);
        match ip {
            IpVersion::V4 => {
                let h = &f[l3..l4];
                let tot = be16(h, ipv4::field::TOTAL_LEN.start);
                if tot as usize != f.len() - l3 {
                    return false;
                }
                let id = be16(h, ipv4::field::IDENT.start);
                let check = be16(h, ipv4::field::CHECKSUM.start);
                let sum =
                    checksum::sum_u16(checksum::sum_u16(checksum::sum_u16(ip_sum, tot), id), check);
                if checksum::fold(sum) != 0xffff {
                    return false;
                }
                let head_id = be16(
                    &self.held.template(slot).head.0,
                    l3 + ipv4::field::IDENT.start,
                );
                let df = be16(h, ipv4::field::FRAG.start) & ipv4::DF != 0;
                let offset = id.wrapping_sub(head_id);
                match line.ip_id_rule(offset, p.count as u16, df, fixedid, atomic) {
                    Some((fx, at)) => (fixedid, atomic) = (fx, at),
                    None => return false,
                }
            }
            IpVersion::V6 => {
                let plen = be16(f, l3 + ipv6::field::PAYLOAD_LEN.start);
                if plen as usize != f.len() - l4 {
                    return false;
                }
            }
        }
        if len == 0 || len > p.mss as usize {
            return false;
        }
        let len = len as u32;
        let tflags = f[l4 + tcp::field::FLAGS];
        if tflags & flags::CWR != 0 && line.cwr_flushes() {
            return false;
        }
        if be32(f, l4 + tcp::field::SEQ.start) != seq0.wrapping_add(p.payload) {
            return false;
        }
        if p.skb_len() as u64 + len as u64 >= limit as u64 {
            // `skb_gro_receive` refuses it (`-E2BIG`): every other term of
            // `tcp_gro_receive` passed, so the full path completes the held
            // packet, with the IP-ID state the network checks left, and
            // holds the segment as a new head (`tcp_receive` verifies the
            // checksum first: a bad one passes, completing nothing). Every
            // 64 KiB run of a bulk flow ends here.
            if verify
                && !checksum::verify(checksum::sum_u32(pseudo, (f.len() - l4) as u32), &f[l4..])
            {
                return false;
            }
            let p = self.held.get_mut(slot);
            p.fixedid = fixedid;
            p.atomic = atomic;
            self.complete(slot, FlushReason::SizeLimit, out);
            // A frame the fast hold declines (another held flow with the
            // same hash) takes the full path, which finds no held packet
            // of its flow, as it would have after completing this one.
            return self.fast_hold(input, false, csum_cnt, l3, ip, l4, out);
        }
        let zero_copy = self.zero_copy;
        let p = self.held.get_mut(slot);
        if verify {
            let seg = &f[l4..];
            let acc = checksum::sum_u32(pseudo, seg.len() as u32);
            if zero_copy {
                if !checksum::verify(acc, seg) {
                    return false;
                }
                p.data.append(f, hl, input.frame, true);
            } else {
                // The TCP header's sum, then the payload summed while it
                // is copied after the held packet (kept only if the
                // checksum verifies): the payload is read once.
                let acc = checksum::sum_bytes_scalar(acc, &f[l4..hl]);
                if !p.data.append_verified(&f[hl..], acc) {
                    return false;
                }
            }
        } else {
            p.data.append(f, hl, input.frame, zero_copy);
        }
        // The full path's merge, with its state changes.
        self.stats.proto_in[match ip {
            IpVersion::V4 => Proto::Tcp4,
            IpVersion::V6 => Proto::Tcp6,
        } as usize] += 1;
        p.fixedid = fixedid;
        p.atomic = atomic;
        let word = (tflags as u32) << 16;
        self.merged_tcp(slot, input, len, word, out);
        #[cfg(test)]
        {
            self.fast_merges += 1;
        }
        true
    }

    /// "New flow, plain TCP": holds `input` as the head of a new run when
    /// it is a plain TCP segment (the shapes the template serves) that the
    /// full path would hold, and no held packet can be of its flow (no
    /// held packet has its flow hash); returns false, having changed
    /// nothing, otherwise. The full path's checks for such a frame are all
    /// conjunctions (`inet_gro_receive` / `ipv6_gro_receive`'s early
    /// checks, the TCP checksum and header, `out_check_final`'s flags and
    /// length), so testing them here in another order and holding through
    /// the same [`Self::hold_tcp`] gives the same state; any frame that
    /// would pass or meet a held packet goes to the full path, which names
    /// the reason. Every receive batch starts each bulk flow this way, and
    /// with more flows than slots every frame does (each evicting the
    /// oldest held packet, `gro_flush_oldest`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn fast_hold<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        verify: bool,
        csum_cnt: u16,
        l3: usize,
        ip: IpVersion,
        l4: usize,
        out: &mut F,
    ) -> bool {
        let f = input.data;
        match ip {
            IpVersion::V4 => {
                let Some(h) = f[l3..].first_chunk::<{ ipv4::MIN_HEADER_LEN }>() else {
                    return false;
                };
                // No options, TCP, not a fragment and no reserved bit (else
                // the flush bit), the length exactly the bytes, a good
                // header checksum.
                if h[ipv4::field::VERSION_IHL] != ipv4::VERSION_IHL_NO_OPTIONS
                    || h[ipv4::field::PROTOCOL] != crate::wire::ip_proto::TCP
                    || be16(h, ipv4::field::FRAG.start) & !ipv4::DF != 0
                    || be16(h, ipv4::field::TOTAL_LEN.start) as usize != f.len() - l3
                    || !ipv4_header_checksum_ok(h)
                {
                    return false;
                }
            }
            IpVersion::V6 => {
                // TCP right after the fixed header, the length exactly the bytes.
                if f[l3 + ipv6::field::NEXT_HEADER] != crate::wire::ip_proto::TCP
                    || be16(f, l3 + ipv6::field::PAYLOAD_LEN.start) as usize != f.len() - l4
                {
                    return false;
                }
            }
        }
        let thlen = tcp::header_len(&f[l4..]);
        if thlen < tcp::MIN_HEADER_LEN || f.len() < l4 + thlen {
            return false;
        }
        let len = (f.len() - l4 - thlen) as u32;
        let flags = be32(f, l4 + tcp::field::FLAG_WORD.start);
        if len == 0 || flags & super::tcp::FINAL_FLAGS != 0 {
            return false;
        }
        // What `dissect_l2` says of a frame of these layouts (untagged
        // Ethernet with an IP EtherType, or raw IP): the link header is
        // the whole flow key.
        let et = ip.ethertype();
        let l2 = L2Info {
            l3_offset: l3,
            ethertype: et,
            outer_protocol: et,
            vlan_tags: 0,
            key_len: l3,
            outgoing: false,
            vlan_tpids_offloaded: true,
        };
        let hash = super::rx::flow_hash_parts(f, input.link, l2.key_len, l3, l4, ip, None);
        if self.held.holds_hash(hash) {
            return false;
        }
        if verify {
            let seg = &f[l4..];
            let pseudo = ip.pseudo_header(&f[l3..], crate::wire::ip_proto::TCP, seg.len() as u32);
            if !checksum::verify(pseudo, seg) {
                return false;
            }
        }
        let skb = Skb {
            input,
            l2,
            mac_len: mac_len(input.link, &l2),
            lay: Layout {
                l3_off: l3,
                ip,
                l4_off: l4,
                l4_proto: Transport::Tcp,
                l4_header_len: 0,
                end: f.len(),
                jumbo_hbh: false,
                outer: None,
            },
            l3_flush: false,
            csum_cnt,
        };
        self.stats.proto_in[Proto::of(ip, Some(Transport::Tcp)) as usize] += 1;
        self.hold_tcp(&skb, hash, thlen, len, out);
        #[cfg(test)]
        {
            self.fast_holds += 1;
        }
        true
    }
}

/// True when the option-less IPv4 header `h` has a good header checksum
/// (its ten 16-bit words fold to 0xffff), summed inline.
#[inline(always)]
fn ipv4_header_checksum_ok(h: &[u8; ipv4::MIN_HEADER_LEN]) -> bool {
    let mut acc = 0u64;
    for w in h.chunks_exact(4) {
        acc += u32::from_be_bytes(w.try_into().expect("4 bytes")) as u64;
    }
    checksum::fold(acc) == 0xffff
}

/// Asks for every cache line of `f` ahead of use, so that the lines the
/// checksum reads come in from L2 while the headers are checked. Eight
/// lines per step at fixed offsets (each offset folds into the
/// instruction's address), then one line at a time: about 30 instructions
/// for a 1514-byte frame where a loop of one line per step took 66.
#[inline(always)]
fn prefetch_frame(f: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let base = f.as_ptr();
        let line = |at: usize| {
            debug_assert!(at < f.len());
            // SAFETY: a prefetch is a hint: it never faults and reads
            // nothing the program sees; every caller passes `at` inside
            // `f`, so the pointer stays within its allocation.
            #[allow(unsafe_code)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(base.add(at).cast::<i8>())
            };
        };
        let mut at = 2 * LINE;
        while at + 8 * LINE <= f.len() {
            for k in 0..8 {
                line(at + k * LINE);
            }
            at += 8 * LINE;
        }
        while at < f.len() {
            line(at);
            at += LINE;
        }
    }
}

/// Where the TCP header of a plain (option-less IPv4 or extension-less IPv6)
/// frame starts, if the frame holds at least a minimal TCP header there.
#[inline(always)]
fn plain_tcp_offset(f: &[u8], l3: usize, ip: IpVersion) -> Option<usize> {
    let l4 = l3
        + match ip {
            IpVersion::V4 => ipv4::MIN_HEADER_LEN,
            IpVersion::V6 => ipv6::HEADER_LEN,
        };
    (f.len() >= l4 + tcp::MIN_HEADER_LEN).then_some(l4)
}
