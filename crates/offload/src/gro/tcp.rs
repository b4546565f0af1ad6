//! TCP GRO: `tcp4_gro_receive` / `tcp6_gro_receive` → `tcp_gro_receive`
//! and `tcp_gro_complete` (`net/ipv4/tcp_offload.c`,
//! `net/ipv6/tcpv6_offload.c`), with the network checks of
//! `gro_receive_network_flush` (`include/net/gro.h`, 6.18 IP-ID rules).

use super::rx::Skb;
use super::Delivered;
use super::{max_size, FlushReason, GroEngine, Verdict};
use crate::checksum;

use crate::wire::tcp::{self, flag_word as fw};
use crate::wire::{be32, put32};
use crate::wire::{IpVersion, Transport};

/// FIN and PSH may differ between merged segments (`~(TCP_FLAG_FIN | TCP_FLAG_PSH)`).
const FLAG_WORD_IGNORED: u32 = fw::FIN | fw::PSH;
/// Flags that end a run (`out_check_final`).
pub(super) const FINAL_FLAGS: u32 = fw::URG | fw::PSH | fw::RST | fw::SYN | fw::FIN;

impl GroEngine {
    /// Runs TCP GRO for a frame whose network layer accepted it.
    pub(super) fn tcp_receive<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        out: &mut F,
    ) -> Verdict {
        let f = skb.frame();
        let th = skb.lay.l4_off;
        // "Don't bother verifying checksum if we're going to flush anyway."
        if !skb.l3_flush && self.needs_verify(skb) && !l4_checksum_ok(skb) {
            return Verdict::Pass(FlushReason::BadChecksum);
        }
        // tcp_gro_pull_header
        if f.len() < th + tcp::MIN_HEADER_LEN {
            return Verdict::Pass(FlushReason::Malformed);
        }
        let thlen = tcp::header_len(&f[th..]);
        if thlen < tcp::MIN_HEADER_LEN || f.len() < th + thlen {
            return Verdict::Pass(FlushReason::Malformed);
        }
        let len = (f.len() - th - thlen) as u32;
        let flags = be32(f, th + tcp::field::FLAG_WORD.start);

        let (found, hash) = self.lookup_hashed(skb);
        let Some(idx) = found else {
            return self.pass_or_hold(skb, hash, thlen, len, flags, out);
        };

        let not_merged = self.tcp_flush_term(idx, skb, thlen, len, flags);
        match not_merged {
            None => {
                // skb_gro_receive succeeded.
                self.merge_tcp(idx, f, th + thlen, skb.input, len, flags, out);
                Verdict::Consumed
            }
            Some(reason) => {
                // p is completed (pp = p), then skb passes or is held.
                self.complete(idx, reason, out);
                self.pass_or_hold(skb, hash, thlen, len, flags, out)
            }
        }
    }

    /// `skb_gro_receive` for a segment that merges into held packet `idx`:
    /// its payload (from `payload_off` in `f`) is appended, FIN and PSH
    /// carried onto the head's flag word (`flags`: the segment's), and a
    /// FIN, a PSH or a segment shorter than `gso_size` ends the run.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn merge_tcp<F: FnMut(&Delivered<'_>)>(
        &mut self,
        idx: usize,
        f: &[u8],
        payload_off: usize,
        input: &super::Input<'_>,
        len: u32,
        flags: u32,
        out: &mut F,
    ) {
        let zero_copy = self.zero_copy;
        let p = self.held.get_mut(idx);
        p.data.append(f, payload_off, input.frame, zero_copy);
        self.merged_tcp(idx, input, len, flags, out);
    }

    /// The bookkeeping of [`Self::merge_tcp`] once the payload is
    /// appended (the fast path appends it itself, fused with the checksum).
    #[inline(always)]
    pub(super) fn merged_tcp<F: FnMut(&Delivered<'_>)>(
        &mut self,
        idx: usize,
        input: &super::Input<'_>,
        len: u32,
        flags: u32,
        out: &mut F,
    ) {
        let p = self.held.get_mut(idx);
        p.count += 1;
        p.payload += len;
        p.last_frame = input.frame;
        p.last_ts = input.timestamp_ns;
        let end = if flags & (fw::FIN | fw::PSH) != 0 {
            let word = p.lay.l4_off + tcp::field::FLAG_WORD.start;
            let merged_flags = be32(&p.data, word) | (flags & (fw::FIN | fw::PSH));
            put32(&mut p.data, word, merged_flags);
            Some(if flags & fw::FIN != 0 {
                FlushReason::FinFlag
            } else {
                FlushReason::PshFlag
            })
        } else if len < p.mss {
            Some(FlushReason::ShortSegment)
        } else {
            None
        };
        if let Some(r) = end {
            self.complete(idx, r, out);
        }
    }

    /// True when the transport checksum must be verified in software: the
    /// configuration asks for it and no known-good level is left.
    #[inline]
    pub(super) fn needs_verify(&self, skb: &Skb<'_>) -> bool {
        self.cfg.verify_checksums && skb.csum_cnt == 0
    }

    /// An unmerged segment with no held packet left for its flow: `mss` is
    /// 1 (`out_check_final`), so an empty segment or a run-ending flag makes
    /// it pass, as does the L3 flush bit; anything else becomes a new head.
    pub(super) fn pass_or_hold<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        hash: u32,
        thlen: usize,
        len: u32,
        flags: u32,
        out: &mut F,
    ) -> Verdict {
        if len == 0 {
            return Verdict::Pass(FlushReason::NoPayload);
        }
        if let Some(r) = final_flag_reason(flags) {
            return Verdict::Pass(r);
        }
        if skb.l3_flush {
            return Verdict::Pass(FlushReason::LengthMismatch);
        }
        self.hold_tcp(skb, hash, thlen, len, out);
        Verdict::Consumed
    }

    /// Holds TCP segment `skb` (flow hash `hash`, header length `thlen`,
    /// `len` payload bytes) as the head of a new run, with the fast path's
    /// template and hints for a plain shape. Both paths hold through here.
    #[inline(always)]
    pub(super) fn hold_tcp<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        hash: u32,
        thlen: usize,
        len: u32,
        out: &mut F,
    ) {
        let lay = &skb.lay;
        // A hold that evicts the oldest packet means more flows than slots
        // (`gro_flush_oldest`, net/core/gro.c, every line): the new head is
        // unlikely to see its next segment before it is evicted in turn,
        // so its template is built only if it does (`Template::pend`).
        // Otherwise it is built now, where the frame's bytes are at hand.
        let evicts = self.held.len() >= super::MAX_GRO_SKBS;
        let slot = self.hold_hashed(skb, hash, len, lay.l4_off + thlen, out);
        if lay.outer.is_none() {
            let limit = max_size(&self.cfg, skb.l2.outer_protocol);
            let t = self.held.template_mut(slot);
            t.set_limit(limit);
            let hint = if evicts {
                Some(t.pend(skb.frame(), lay.l4_off, skb.input.link))
            } else {
                t.fill(
                    skb.frame(),
                    skb.input.link,
                    skb.l2.key_len,
                    lay.l3_off,
                    lay.l4_off,
                    lay.ip,
                    thlen,
                )
                .then(|| super::template::hint_of(t.tag()))
            };
            if let Some(hint) = hint {
                self.held.hint(hint, slot);
            }
        }
    }

    /// Evaluates `tcp_gro_receive`'s flush terms against held packet `idx`;
    /// `None` means the segment merges. The first term that fires names
    /// the reason (the kernel ORs them all; any one prevents the merge).
    fn tcp_flush_term(
        &mut self,
        idx: usize,
        skb: &Skb<'_>,
        thlen: usize,
        len: u32,
        flags: u32,
    ) -> Option<FlushReason> {
        let f = skb.frame();
        let th = skb.lay.l4_off;
        let line = self.cfg.kernel;
        let p = self.held.get_mut(idx);
        let th2 = p.lay.l4_off;
        let pf = be32(&p.data, th2 + tcp::field::FLAG_WORD.start);
        // `flush = flags & TCP_FLAG_CWR` (until 7.0).
        if line.cwr_flushes() && flags & fw::CWR != 0 {
            return Some(FlushReason::CwrSet);
        }
        // Before 6.18 the mask also left CWR out.
        let ignored = if line.cwr_ignored_in_flag_word() {
            FLAG_WORD_IGNORED | fw::CWR
        } else {
            FLAG_WORD_IGNORED
        };
        let diff = (flags ^ pf) & !ignored;
        if diff != 0 {
            return Some(if diff & fw::DATA_OFFSET != 0 {
                FlushReason::HeaderLengthChanged
            } else if diff & !fw::WINDOW != 0 {
                FlushReason::TcpFlagsChanged
            } else {
                FlushReason::WindowChanged
            });
        }
        let ack = tcp::field::ACK.start;
        if be32(f, th + ack) != be32(&p.data, th2 + ack) {
            return Some(FlushReason::AckChanged);
        }
        // Invariants the slicing below relies on:
        // `same_flow` only pairs packets whose header offsets are equal
        // (`th == th2`, and the network headers in `network_flush`), and
        // the flag-word check above has returned unless both TCP headers
        // have the same length, which the transport layer checked to be
        // present in `f`. `get` keeps a reordering of these checks (by a
        // profile) from turning into a panic: it would end the run instead.
        debug_assert_eq!(th, th2, "same_flow pairs equal offsets");
        let opts = tcp::field::OPTIONS;
        let (Some(mine), Some(held)) = (f.get(th..th + thlen), p.data.get(th2..th2 + thlen)) else {
            return Some(FlushReason::HeaderLengthChanged);
        };
        if !super::rx::bytes_eq(&mine[opts..], &held[opts..]) {
            return Some(options_reason(mine, held));
        }
        if let Some(r) = line.network_flush(p, skb) {
            return Some(r);
        }
        if len.wrapping_sub(1) >= p.mss {
            return Some(if len == 0 {
                FlushReason::NoPayload
            } else {
                FlushReason::SegmentLarger
            });
        }
        let seq_at = tcp::field::SEQ.start;
        let expected = be32(&p.data, th2 + seq_at).wrapping_add(p.payload);
        let seq = be32(f, th + seq_at);
        if seq != expected {
            return Some(if (seq.wrapping_sub(expected) as i32) < 0 {
                FlushReason::SequenceBehind
            } else {
                FlushReason::SequenceGap
            });
        }
        // skb_gro_receive
        if skb.l3_flush {
            return Some(FlushReason::IncomingLengthMismatch);
        }
        let grown = (p.skb_len() as u64) + len as u64;
        if grown >= max_size(&self.cfg, p.outer_protocol) as u64 {
            return Some(FlushReason::SizeLimit);
        }
        // Above 64 KiB only TCP may grow; the innermost protocol here is
        // TCP, and software GRO never marks p encapsulated while receiving.
        // Up to 6.12 no tunnel passes 64 KiB (measured in the 6.1 and 6.12
        // guests, `KernelLine::tunnel_big_tcp_stops_at_64k`); 5.19–6.2
        // also test `ipv6_hdr(p)->nexthdr`: a plain IPv6 packet with an
        // extension header stops there too.
        if grown >= super::GRO_LEGACY_MAX_SIZE as u64 {
            let line = self.cfg.kernel;
            if p.lay.outer.is_some() && line.tunnel_big_tcp_stops_at_64k() {
                return Some(FlushReason::SizeLimit);
            }
            if !line.has_ipv4_max_size()
                && p.lay.ip == IpVersion::V6
                && p.data[p.lay.l3_off + crate::wire::ipv6::field::NEXT_HEADER]
                    != crate::wire::ip_proto::TCP
            {
                return Some(FlushReason::SizeLimit);
            }
        }
        None
    }
}

/// The reason a segment cannot be held when no run exists (`final` flags).
fn final_flag_reason(flags: u32) -> Option<FlushReason> {
    if flags & FINAL_FLAGS == 0 {
        return None;
    }
    Some(if flags & (fw::SYN | fw::RST | fw::URG) != 0 {
        FlushReason::ControlFlags
    } else if flags & fw::FIN != 0 {
        FlushReason::FinAlone
    } else {
        FlushReason::PshAlone
    })
}

/// Distinguishes a timestamp-only change from other option changes.
fn options_reason(a: &[u8], b: &[u8]) -> FlushReason {
    let ta = tcp::Tcp::new_unchecked(a).timestamps();
    let tb = tcp::Tcp::new_unchecked(b).timestamps();
    if let (Some(_), Some(_)) = (ta, tb) {
        // Same layout apart from the 8 timestamp value bytes?
        let opts = tcp::field::OPTIONS;
        let differing = a[opts..]
            .iter()
            .zip(&b[opts..])
            .filter(|(x, y)| x != y)
            .count();
        if differing <= 8 {
            return FlushReason::TimestampChanged;
        }
    }
    FlushReason::OptionsChanged
}

/// Software TCP checksum validation (`skb_gro_checksum_validate` with the
/// pseudo-header of the packet's own addresses).
fn l4_checksum_ok(skb: &Skb<'_>) -> bool {
    l4_checksum_ok_at(
        skb.frame(),
        skb.lay.l3_off,
        skb.lay.l4_off,
        skb.lay.ip,
        Transport::Tcp,
    )
}

/// Verifies the transport checksum of the segment at `l4` (to the end of
/// the frame) against the pseudo-header of the IP header at `l3`.
pub(super) fn l4_checksum_ok_at(
    f: &[u8],
    l3: usize,
    l4: usize,
    ip: IpVersion,
    proto: Transport,
) -> bool {
    let seg = &f[l4..];
    let pseudo = ip.pseudo_header(&f[l3..], proto.protocol(), seg.len() as u32);
    checksum::verify(pseudo, seg)
}
