//! TCP GRO: `tcp4_gro_receive` / `tcp6_gro_receive` → `tcp_gro_receive`
//! and `tcp_gro_complete` (`net/ipv4/tcp_offload.c`,
//! `net/ipv6/tcpv6_offload.c`), with the network checks of
//! `gro_receive_network_flush` (`include/net/gro.h`, 6.18 IP-ID rules).

use super::rx::Skb;
use super::{gso_type, max_size, FlushReason, GroEngine, Held, Verdict, GRO_LEGACY_MAX_SIZE};
use super::{Delivered, MAX_GRO_SKBS};
use crate::checksum;
use crate::wire::ipv4::{Ipv4, DF};
use crate::wire::ipv6::TLV_JUMBO;
use crate::wire::tcp::flag_word as fw;
use crate::wire::{be16, be32, put16, put32};

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
            // No held packet: `mss` is 1, so only an empty segment or a
            // run-ending flag keeps the segment from being held.
            if len == 0 {
                return Verdict::Pass(FlushReason::NoPayload);
            }
            if let Some(r) = final_flag_reason(flags) {
                return Verdict::Pass(r);
            }
            if skb.l3_flush {
                return Verdict::Pass(FlushReason::LengthMismatch);
            }
            self.hold(skb, len, thlen, out);
            return Verdict::Consumed;
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
                if len == 0 {
                    return Verdict::Pass(FlushReason::NoPayload);
                }
                if let Some(r) = final_flag_reason(flags) {
                    return Verdict::Pass(r);
                }
                if skb.l3_flush {
                    return Verdict::Pass(FlushReason::LengthMismatch);
                }
                self.hold(skb, len, thlen, out);
                Verdict::Consumed
            }
        }
    }

    /// The first p in the bucket that is the same flow (`gro_list_prepare`,
    /// the L3 same-flow loop, `tcp_gro_lookup`).
    fn lookup(&self, skb: &Skb<'_>) -> Option<usize> {
        let f = skb.frame();
        self.held.iter().position(|p| {
            if p.link != skb.input.link
                || p.l2_key_len != skb.l2.key_len
                || p.data[..p.l2_key_len] != f[..skb.l2.key_len]
                || p.v6 != skb.v6
                || p.l3_off != skb.l3_off
            {
                return false;
            }
            let (a, b) = (&p.data[p.l3_off..], &f[skb.l3_off..]);
            let l3_same = if skb.v6 {
                let nlen = skb.l4_off - skb.l3_off;
                (be32(a, 0) ^ be32(b, 0)) & 0xF00F_FFFF == 0
                    && a[8..40] == b[8..40]
                    && a[6] == b[6]
                    && (nlen <= 40 || a.get(40..nlen) == Some(&b[40..nlen]))
            } else {
                a[9] == b[9] && a[12..20] == b[12..20]
            };
            l3_same && be32(&p.data, p.l4_off) == be32(f, skb.l4_off)
        })
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
        // always TCP and the packet is not encapsulated.
        let _ = GRO_LEGACY_MAX_SIZE;
        None
    }

    /// Holds `skb` as the head of a new run (after evicting the oldest
    /// packet if the bucket is full).
    fn hold<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        len: u32,
        _thlen: usize,
        out: &mut F,
    ) {
        if self.held.len() >= MAX_GRO_SKBS {
            let oldest = self.held.remove(0);
            self.complete(oldest, FlushReason::TableFull, out);
        }
        let mut data = self.take_buffer();
        data.extend_from_slice(skb.frame());
        let proto = if skb.v6 {
            super::Proto::Tcp6
        } else {
            super::Proto::Tcp4
        };
        self.held.push(Held {
            data,
            link: skb.input.link,
            l2_key_len: skb.l2.key_len,
            mac_len: skb.mac_len,
            outer_protocol: skb.l2.outer_protocol,
            l3_off: skb.l3_off,
            l4_off: skb.l4_off,
            v6: skb.v6,
            proto,
            count: 1,
            mss: len,
            fixedid: 0,
            payload: len,
            first_frame: skb.input.frame,
            last_frame: skb.input.frame,
            last_ts: skb.input.timestamp_ns,
        });
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

/// `gro_receive_network_flush` for a non-encapsulated packet:
/// `inet_gro_flush` (6.18 IP-ID rules) or `ipv6_gro_flush`.
fn network_flush(p: &mut Held, skb: &Skb<'_>) -> Option<FlushReason> {
    let (a, b) = (&skb.frame()[skb.l3_off..], &p.data[p.l3_off..]);
    let (count, fixedid) = (p.count, &mut p.fixedid);
    if skb.v6 {
        if (be32(a, 0) ^ be32(b, 0)) & 0x0FF0_0000 != 0 {
            return Some(FlushReason::TosChanged);
        }
        if a[7] != b[7] {
            return Some(FlushReason::HopLimitChanged);
        }
        return None;
    }
    inet_flush(a, b, count, fixedid, 0)
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
    let f = skb.frame();
    let seg = &f[skb.l4_off..];
    let ip = &f[skb.l3_off..];
    let pseudo = if skb.v6 {
        checksum::pseudo_ipv6(
            ip[8..24].try_into().expect("40-byte header checked"),
            ip[24..40].try_into().expect("40-byte header checked"),
            6,
            seg.len() as u32,
        )
    } else {
        checksum::pseudo_ipv4(
            ip[12..16].try_into().expect("20-byte header checked"),
            ip[16..20].try_into().expect("20-byte header checked"),
            6,
            seg.len() as u32,
        )
    };
    checksum::verify(pseudo, seg)
}

/// `inet_gro_complete`/`ipv6_gro_complete` + `tcp4/6_gro_complete`:
/// rewrites lengths (BIG TCP encodings above 64 KiB) and leaves the
/// pseudo-header sum in the TCP checksum field. Returns the `SKB_GSO_*` bits.
pub(super) fn complete(p: &mut Held) -> u32 {
    let mut gso = 0;
    if p.v6 {
        let payload_len = p.data.len() - p.l3_off - 40;
        if payload_len > 65535 {
            insert_jumbo_hbh(p, payload_len as u32);
        } else {
            put16(&mut p.data, p.l3_off + 4, payload_len as u16);
        }
        gso |= gso_type::TCPV6;
    } else {
        let tot = p.data.len() - p.l3_off;
        let field = if tot > 0xffff { 0 } else { tot as u16 };
        Ipv4::new_unchecked(&mut p.data[p.l3_off..]).set_total_len_incremental(field);
        gso |= gso_type::TCPV4;
        if p.fixedid & 1 != 0 {
            gso |= gso_type::TCP_FIXEDID;
        }
    }
    let tcp_len = (p.data.len() - p.l4_off) as u32;
    let ip = &p.data[p.l3_off..];
    let pseudo = if p.v6 {
        checksum::pseudo_ipv6(
            ip[8..24].try_into().expect("held IPv6 header"),
            ip[24..40].try_into().expect("held IPv6 header"),
            6,
            tcp_len,
        )
    } else {
        checksum::pseudo_ipv4(
            ip[12..16].try_into().expect("held IPv4 header"),
            ip[16..20].try_into().expect("held IPv4 header"),
            6,
            tcp_len,
        )
    };
    let l4 = p.l4_off;
    put16(&mut p.data, l4 + 16, checksum::fold(pseudo));
    if p.data[l4 + 13] & crate::wire::tcp::flags::CWR != 0 {
        gso |= gso_type::TCP_ACCECN;
    }
    gso
}

/// Inserts the 8-byte Hop-by-Hop Jumbo Payload header right after the
/// fixed IPv6 header (5.19–6.19 `ipv6_gro_complete`).
fn insert_jumbo_hbh(p: &mut Held, payload_len: u32) {
    let at = p.l3_off + 40;
    let first_next = p.data[p.l3_off + 6];
    let mut hbh = [0u8; 8];
    hbh[0] = first_next;
    hbh[1] = 0;
    hbh[2] = TLV_JUMBO;
    hbh[3] = 4;
    hbh[4..8].copy_from_slice(&(payload_len + 8).to_be_bytes());
    p.data.splice(at..at, hbh);
    p.data[p.l3_off + 6] = 0;
    put16(&mut p.data, p.l3_off + 4, 0);
    p.l4_off += 8;
}
