//! TCP GRO: `tcp4_gro_receive` / `tcp6_gro_receive` → `tcp_gro_receive`
//! and `tcp_gro_complete` (`net/ipv4/tcp_offload.c`,
//! `net/ipv6/tcpv6_offload.c`), with the network checks of
//! `gro_receive_network_flush` (`include/net/gro.h`, 6.18 IP-ID rules).

use super::rx::Skb;
use super::Delivered;
use super::{max_size, FlushReason, GroEngine, Held, Verdict};
use crate::checksum;
use crate::wire::ipv4::DF;
use crate::wire::tcp::flag_word as fw;
use crate::wire::{be16, be32, put32};

/// FIN and PSH may differ between merged segments (`~(TCP_FLAG_FIN | TCP_FLAG_PSH)`).
const FLAG_WORD_IGNORED: u32 = fw::FIN | fw::PSH;
/// Flags that end a run (`out_check_final`).
const FINAL_FLAGS: u32 = fw::URG | fw::PSH | fw::RST | fw::SYN | fw::FIN;

impl GroEngine {
    /// Runs TCP GRO for a frame whose network layer accepted it.
    pub(super) fn tcp_receive<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        out: &mut F,
    ) -> Verdict {
        let f = skb.frame();
        let th = skb.l4_off;
        // "Don't bother verifying checksum if we're going to flush anyway."
        if !skb.l3_flush && self.cfg.verify_checksums && !l4_checksum_ok(skb) {
            return Verdict::Pass(FlushReason::BadChecksum);
        }
        // tcp_gro_pull_header
        if f.len() < th + 20 {
            return Verdict::Pass(FlushReason::Malformed);
        }
        let thlen = (f[th + 12] >> 4) as usize * 4;
        if thlen < 20 || f.len() < th + thlen {
            return Verdict::Pass(FlushReason::Malformed);
        }
        let len = (f.len() - th - thlen) as u32;
        let flags = be32(f, th + 12);

        let found = self.lookup(skb);
        let Some(idx) = found else {
            return self.pass_or_hold(skb, len, flags, out);
        };

        let not_merged = self.tcp_flush_term(idx, skb, thlen, len, flags);
        match not_merged {
            None => {
                // skb_gro_receive succeeded.
                let p = &mut self.held[idx];
                p.data.extend_from_slice(&f[th + thlen..]);
                p.count += 1;
                p.payload += len;
                p.last_frame = skb.input.frame;
                p.last_ts = skb.input.timestamp_ns;
                let th2 = p.l4_off;
                let merged_flags = be32(&p.data, th2 + 12) | (flags & (fw::FIN | fw::PSH));
                put32(&mut p.data, th2 + 12, merged_flags);
                let end = if flags & fw::FIN != 0 {
                    Some(FlushReason::FinFlag)
                } else if flags & fw::PSH != 0 {
                    Some(FlushReason::PshFlag)
                } else if len < p.mss {
                    Some(FlushReason::ShortSegment)
                } else {
                    None
                };
                if let Some(r) = end {
                    let p = self.held.remove(idx);
                    self.complete(p, r, out);
                }
                Verdict::Consumed
            }
            Some(reason) => {
                // p is completed (pp = p), then skb passes or is held.
                let p = self.held.remove(idx);
                self.complete(p, reason, out);
                self.pass_or_hold(skb, len, flags, out)
            }
        }
    }

    /// An unmerged segment with no held packet left for its flow: `mss` is
    /// 1 (`out_check_final`), so an empty segment or a run-ending flag makes
    /// it pass, as does the L3 flush bit; anything else becomes a new head.
    fn pass_or_hold<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
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
        self.hold(skb, len, super::rx::TCP, out);
        Verdict::Consumed
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
        let th = skb.l4_off;
        let p = &mut self.held[idx];
        let th2 = p.l4_off;
        let pf = be32(&p.data, th2 + 12);
        if flags & fw::CWR != 0 {
            return Some(FlushReason::CwrSet);
        }
        let diff = (flags ^ pf) & !FLAG_WORD_IGNORED;
        if diff != 0 {
            return Some(if diff & fw::DATA_OFFSET != 0 {
                FlushReason::HeaderLengthChanged
            } else if diff & !fw::WINDOW != 0 {
                FlushReason::TcpFlagsChanged
            } else {
                FlushReason::WindowChanged
            });
        }
        if be32(f, th + 8) != be32(&p.data, th2 + 8) {
            return Some(FlushReason::AckChanged);
        }
        if f[th + 20..th + thlen] != p.data[th2 + 20..th2 + thlen] {
            return Some(options_reason(
                &f[th..th + thlen],
                &p.data[th2..th2 + thlen],
            ));
        }
        if let Some(r) = network_flush(p, skb) {
            return Some(r);
        }
        if len.wrapping_sub(1) >= p.mss {
            return Some(if len == 0 {
                FlushReason::NoPayload
            } else {
                FlushReason::SegmentLarger
            });
        }
        let expected = be32(&p.data, th2 + 4).wrapping_add(p.payload);
        let seq = be32(f, th + 4);
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
    let ta = crate::wire::tcp::Tcp::new_unchecked(a).timestamps();
    let tb = crate::wire::tcp::Tcp::new_unchecked(b).timestamps();
    if let (Some(_), Some(_)) = (ta, tb) {
        // Same layout apart from the 8 timestamp value bytes?
        let differing = a[20..].iter().zip(&b[20..]).filter(|(x, y)| x != y).count();
        if differing <= 8 {
            return FlushReason::TimestampChanged;
        }
    }
    FlushReason::OptionsChanged
}

/// `gro_receive_network_flush`: `inet_gro_flush` (6.18 IP-ID rules) or
/// `ipv6_gro_flush` on the outer (or only) header, then on the inner
/// header of an encapsulated packet.
pub(super) fn network_flush(p: &mut Held, skb: &Skb<'_>) -> Option<FlushReason> {
    let f = skb.frame();
    let (count, fixedid) = (p.count, &mut p.fixedid);
    if let Some(o) = skb.outer {
        let r = header_flush(&f[o.l3_off..], &p.data[o.l3_off..], o.v6, count, fixedid, 0);
        if let Some(r) = r {
            return Some(outer_reason(r));
        }
        return header_flush(
            &f[skb.l3_off..],
            &p.data[skb.l3_off..],
            skb.v6,
            count,
            fixedid,
            1,
        );
    }
    header_flush(
        &f[skb.l3_off..],
        &p.data[skb.l3_off..],
        skb.v6,
        count,
        fixedid,
        0,
    )
}

/// The outer-header variant of a network flush reason.
fn outer_reason(r: FlushReason) -> FlushReason {
    match r {
        FlushReason::IpIdMismatch => FlushReason::OuterIpIdMismatch,
        FlushReason::TtlChanged | FlushReason::HopLimitChanged => FlushReason::OuterTtlChanged,
        FlushReason::TosChanged => FlushReason::OuterTosChanged,
        FlushReason::DfChanged => FlushReason::OuterDfChanged,
        other => other,
    }
}

fn header_flush(
    a: &[u8],
    b: &[u8],
    v6: bool,
    count: u32,
    fixedid: &mut u8,
    inner: u8,
) -> Option<FlushReason> {
    if v6 {
        if (be32(a, 0) ^ be32(b, 0)) & 0x0FF0_0000 != 0 {
            return Some(FlushReason::TosChanged);
        }
        if a[7] != b[7] {
            return Some(FlushReason::HopLimitChanged);
        }
        return None;
    }
    inet_flush(a, b, count, fixedid, inner)
}

/// `inet_gro_flush(iph, iph2, p, inner)`: TTL, TOS and DF must match; the
/// ID must be the head's ID plus the segment count, or (6.18: whatever DF
/// says) fixed when the second segment had the head's ID.
pub(super) fn inet_flush(
    iph: &[u8],
    iph2: &[u8],
    count: u32,
    fixedid: &mut u8,
    inner: u8,
) -> Option<FlushReason> {
    if iph[8] != iph2[8] {
        return Some(FlushReason::TtlChanged);
    }
    if iph[1] != iph2[1] {
        return Some(FlushReason::TosChanged);
    }
    if (be16(iph, 6) ^ be16(iph2, 6)) & DF != 0 {
        return Some(FlushReason::DfChanged);
    }
    let offset = be16(iph, 4).wrapping_sub(be16(iph2, 4));
    let count = count as u16;
    if count == 1 && offset == 0 {
        *fixedid |= 1 << inner;
    }
    let fixed = *fixedid & (1 << inner) != 0;
    let want = if fixed { 0 } else { count };
    if offset != want {
        return Some(FlushReason::IpIdMismatch);
    }
    None
}

/// Software TCP checksum validation (`skb_gro_checksum_validate` with the
/// pseudo-header of the packet's own addresses).
fn l4_checksum_ok(skb: &Skb<'_>) -> bool {
    l4_checksum_ok_at(skb.frame(), skb.l3_off, skb.l4_off, skb.v6, 6)
}

/// Verifies the transport checksum of the segment at `l4` (to the end of
/// the frame) against the pseudo-header of the IP header at `l3`.
pub(super) fn l4_checksum_ok_at(f: &[u8], l3: usize, l4: usize, v6: bool, proto: u8) -> bool {
    let seg = &f[l4..];
    let ip = &f[l3..];
    let pseudo = if v6 {
        checksum::pseudo_ipv6(
            ip[8..24].try_into().expect("40-byte header checked"),
            ip[24..40].try_into().expect("40-byte header checked"),
            proto,
            seg.len() as u32,
        )
    } else {
        checksum::pseudo_ipv4(
            ip[12..16].try_into().expect("20-byte header checked"),
            ip[16..20].try_into().expect("20-byte header checked"),
            proto,
            seg.len() as u32,
        )
    };
    checksum::verify(pseudo, seg)
}
