//! Kernel profiles: the GRO rules that changed between the kernel lines
//! people run, each chosen per packet from [`GroConfig::kernel`].
//!
//! | rule | 6.1 (≤ 6.9) | 6.12 (6.10–6.17) | 6.18 | 7.x |
//! |---|---|---|---|---|
//! | IPv4 ID, DF=0 | incrementing | incrementing | incrementing or fixed | as 6.18 |
//! | IPv4 ID, DF=1 | incrementing or fixed | incrementing or fixed | incrementing or fixed | as 6.18 |
//! | outer IPv4 ID of a tunnel | DF=1: ignored; DF=0: must increment, ORed with the inner check | DF=1: ignored; DF=0: must increment (one fixed-ID bit shared with the inner header) | incrementing or fixed, checked whatever DF says (own bit) | as 6.18 |
//! | CWR in the flag-word comparison | ignored (`~(CWR\|FIN\|PSH)`) | ignored | compared (`~(FIN\|PSH)`) | compared |
//! | CWR on the incoming segment | completes the held packet | same | same | no effect |
//! | `SKB_GSO_*` of a packet with CWR | `TCP_ECN` | `TCP_ECN` | `TCP_ACCECN` | `TCP_ACCECN` |
//! | IPv6 above 64 KiB | Hop-by-Hop Jumbo header inserted | same | same | no Hop-by-Hop header |
//! | IPv4 size limit | `gro_max_size`, never above 64 KiB | `gro_ipv4_max_size` | same | same |
//!
//! Sources, per rule: `net/ipv4/af_inet.c` `inet_gro_receive` (≤ 6.9:
//! `flush_id`, `is_atomic`) and `net/ipv4/tcp_offload.c`
//! `tcp_gro_receive` (≤ 6.9: the `is_atomic` switch at the second
//! segment); `include/net/gro.h` `inet_gro_flush` and
//! `gro_receive_network_flush` (6.10–6.17: `bool outer`, one
//! `ip_fixedid` bit; 6.18: two bits, "only merge packets with incrementing
//! or fixed outer ids"); `tcp_gro_receive` / `tcp_gro_complete` (the CWR
//! mask and `SKB_GSO_TCP_ECN`, read in the 6.1.y and 6.12.y trees; 6.15:
//! "gro: prevent ACE field corruption & better AccECN handling",
//! 4e4f7cefb130, compares CWR in the flag word and marks
//! `SKB_GSO_TCP_ACCECN`, the bit `include/linux/skbuff.h` got from "gso:
//! AccECN support", 023af5a72ab1, in the same series, net-next March
//! 2025; so the 6.12 column is exact for 6.10–6.14 on these two rows, and
//! 6.15–6.17 kernels, mapped to it, follow the 6.18 column there; 7.0:
//! "gro: flushing when CWR is set negatively affects AccECN");
//! `net/ipv6/ip6_offload.c` `ipv6_gro_complete` (7.0: "BIG TCP without HBH
//! in IPv6"); `net/core/gro.c` `skb_gro_receive` (6.3: IPv4 BIG TCP,
//! `gro_ipv4_max_size`). The 6.1 and 6.12 columns are checked against
//! Debian's 6.1.192 and 6.12.117 kernels booted in a VM
//! (`crates/offload-conformance/tests/kernel_lines.rs`).
//!
//! [`GroConfig::kernel`]: super::GroConfig::kernel

use super::{FlushReason, Held};
use crate::wire::ipv4::{Ipv4, DF};
use crate::wire::IpVersion;
use core::fmt;

/// A Linux kernel line whose GRO the engine reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum KernelLine {
    /// 6.1 LTS, and the rules of every kernel up to 6.9.
    V6_1,
    /// 6.12 LTS: the rules of 6.10 to 6.17.
    V6_12,
    /// 6.18 LTS (and 6.19).
    #[default]
    V6_18,
    /// 7.0 and later.
    V7,
}

impl KernelLine {
    /// Every line, oldest first.
    pub const ALL: [KernelLine; 4] = [
        KernelLine::V6_1,
        KernelLine::V6_12,
        KernelLine::V6_18,
        KernelLine::V7,
    ];

    /// The name users type (`--kernel 6.1`).
    pub fn name(self) -> &'static str {
        match self {
            KernelLine::V6_1 => "6.1",
            KernelLine::V6_12 => "6.12",
            KernelLine::V6_18 => "6.18",
            KernelLine::V7 => "7.x",
        }
    }

    /// Parses a line name: `6.1`, `6.12`, `6.18`, `7.x` (or `7`).
    pub fn parse(s: &str) -> Option<KernelLine> {
        match s.trim() {
            "6.1" => Some(KernelLine::V6_1),
            "6.12" => Some(KernelLine::V6_12),
            "6.18" => Some(KernelLine::V6_18),
            "7" | "7.x" => Some(KernelLine::V7),
            _ => None,
        }
    }

    /// The line whose rules a kernel release follows (`uname -r`, e.g.
    /// `6.1.0-56-amd64`, `6.12.117+deb12-amd64`, `7.0.3`): up to 6.9 the
    /// 6.1 rules, 6.10–6.17 the 6.12 rules, 6.18 and 6.19 the 6.18
    /// rules, 7 and later the 7.x rules. `None` if unreadable or older
    /// than 4.x.
    pub fn from_release(release: &str) -> Option<KernelLine> {
        let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        Some(match (major, minor) {
            (0..=3, _) => return None,
            (4 | 5, _) | (6, 0..=9) => KernelLine::V6_1,
            (6, 10..=17) => KernelLine::V6_12,
            (6, _) => KernelLine::V6_18,
            _ => KernelLine::V7,
        })
    }

    /// CWR on the incoming segment completes the held packet
    /// (`flush = flags & TCP_FLAG_CWR`, removed in 7.0).
    #[inline]
    pub(super) fn cwr_flushes(self) -> bool {
        self < KernelLine::V7
    }

    /// CWR is left out of the flag-word comparison
    /// (`~(TCP_FLAG_CWR | TCP_FLAG_FIN | TCP_FLAG_PSH)` before 6.15,
    /// 4e4f7cefb130; the 6.12 profile stands for 6.10–6.17).
    #[inline]
    pub(super) fn cwr_ignored_in_flag_word(self) -> bool {
        self < KernelLine::V6_18
    }

    /// `tcp_gro_complete` marks a packet with CWR `SKB_GSO_TCP_ECN`
    /// rather than `SKB_GSO_TCP_ACCECN` (before 6.15, 4e4f7cefb130).
    #[inline]
    pub(super) fn cwr_is_classic_ecn(self) -> bool {
        self < KernelLine::V6_18
    }

    /// GRO marks a packet with CWR `SKB_GSO_TCP_ACCECN`, so GSO of it
    /// keeps CWR on every segment (the lines where
    /// `cwr_is_classic_ecn` is false).
    #[inline]
    pub fn marks_accecn(self) -> bool {
        !self.cwr_is_classic_ecn()
    }

    /// `ipv6_gro_complete` inserts a Hop-by-Hop Jumbo header above 64 KiB
    /// (5.19–6.19; 7.0 writes payload length 0 alone).
    #[inline]
    pub(super) fn ipv6_jumbo_hbh(self) -> bool {
        self < KernelLine::V7
    }

    /// The outer UDP checksum of a UDP tunnel (VXLAN, Geneve) gets the
    /// pseudo-header of the addresses at `ip_hdr(skb)` / `ipv6_hdr(skb)`:
    /// `udp4_gro_complete` / `udp6_gro_complete`
    /// (`net/ipv4/udp_offload.c`, `net/ipv6/udp_offload.c`) read the
    /// network header, which `inet_gro_receive` / `ipv6_gro_receive` set
    /// last for the *innermost* IP header, through the outer header's
    /// layout. Fixed by 5ef31ea5d053 "net: gro: fix udp bad offset in
    /// socket lookup by adding {inner_}network_offset to napi_gro_cb" (net
    /// tree, May 2024: v6.9; backported to 6.6.y, not to 6.1.y), which reads
    /// `NAPI_GRO_CB(skb)->network_offsets[skb->encapsulation]`. Seen on
    /// Debian's 6.1.192 (the VM suite), not on 6.12.117. (6.6.y kernels,
    /// mapped to the 6.1 profile, have the fix: the profile is exact for
    /// 6.1.y here.)
    #[inline]
    pub(super) fn udp_tunnel_csum_from_inner_header(self) -> bool {
        self < KernelLine::V6_12
    }

    /// `gro_ipv4_max_size` exists (6.3); before it IPv4 is bound by
    /// `gro_max_size` and by 64 KiB.
    #[inline]
    pub(super) fn has_ipv4_max_size(self) -> bool {
        self > KernelLine::V6_1
    }
}

impl fmt::Display for KernelLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The IPv4 ID rule of 6.10–6.17 (`inet_gro_flush(iph, iph2, p, outer)`,
/// `include/net/gro.h`): TTL, TOS and DF must match; an outer header with
/// DF set is not checked further; otherwise the ID must be the head's
/// plus the segment count, or equal to the head's when the flow was
/// marked fixed-ID at its second segment, which needs DF. One
/// `ip_fixedid` bit serves outer and inner header alike.
pub(super) fn inet_flush_6_12(
    iph: &[u8],
    iph2: &[u8],
    count: u32,
    fixedid: &mut u8,
    outer: bool,
) -> Option<FlushReason> {
    let (a, b) = (Ipv4::new_unchecked(iph), Ipv4::new_unchecked(iph2));
    if let Some(r) = ttl_tos_df(&a, &b) {
        return Some(r);
    }
    let df = a.frag_word() & DF != 0;
    if outer && df {
        return None;
    }
    let offset = a.ident().wrapping_sub(b.ident());
    let count = count as u16;
    if count == 1 && df && offset == 0 {
        *fixedid |= 1;
    }
    let want = if *fixedid & 1 != 0 { 0 } else { count };
    (offset != want).then_some(FlushReason::IpIdMismatch)
}

/// TTL, TOS and DF of two IPv4 headers must match (all lines).
pub(super) fn ttl_tos_df(a: &Ipv4<&[u8]>, b: &Ipv4<&[u8]>) -> Option<FlushReason> {
    if a.ttl() != b.ttl() {
        return Some(FlushReason::TtlChanged);
    }
    if a.tos() != b.tos() {
        return Some(FlushReason::TosChanged);
    }
    if (a.frag_word() ^ b.frag_word()) & DF != 0 {
        return Some(FlushReason::DfChanged);
    }
    None
}

/// One IP header as the ≤ 6.9 ID rule sees it.
pub(super) struct Hdr<'a> {
    pub skb: &'a [u8],
    pub p: &'a [u8],
    pub ip: IpVersion,
}

/// The IP ID rule of ≤ 6.9 (`inet_gro_receive` computes
/// `NAPI_GRO_CB(p)->flush_id` header by header, outer first; an IPv6
/// header or an IPv4 header with DF lets the next header's value replace
/// it, one without DF ORs it in; `tcp_gro_receive` then lets a flow whose
/// head had DF (`is_atomic`) switch to incrementing IDs at its second
/// segment, and otherwise flushes on any non-zero `flush_id`). TTL, TOS
/// and DF of every IPv4 header, and the traffic class and hop limit of
/// every IPv6 header, are checked by the caller.
pub(super) fn ip_id_flush_6_1(p: &mut Held, hdrs: &[Hdr<'_>]) -> Option<FlushReason> {
    let count = p.count as u16;
    let mut skb_atomic = true;
    let mut flush_id: u16 = 0;
    // Which header the current flush_id value came from (for the reason).
    let mut from_outer = false;
    for (i, h) in hdrs.iter().enumerate() {
        let outer = i + 1 < hdrs.len();
        match h.ip {
            IpVersion::V6 => {
                if skb_atomic {
                    flush_id = 0;
                }
                skb_atomic = true;
            }
            IpVersion::V4 => {
                let (a, b) = (Ipv4::new_unchecked(h.skb), Ipv4::new_unchecked(h.p));
                let df = a.frag_word() & DF != 0;
                let mut id = a.ident().wrapping_sub(b.ident());
                if !p.atomic || !df {
                    id = if id ^ count != 0 { 0xffff } else { 0 };
                }
                if skb_atomic {
                    flush_id = id;
                    from_outer = outer && id != 0;
                } else {
                    from_outer |= outer && id != 0;
                    flush_id |= id;
                }
                skb_atomic = df;
            }
        }
    }
    if flush_id != 1 || count != 1 || !p.atomic {
        if flush_id != 0 {
            return Some(if from_outer {
                FlushReason::OuterIpIdMismatch
            } else {
                FlushReason::IpIdMismatch
            });
        }
    } else {
        p.atomic = false;
    }
    None
}

/// `NAPI_GRO_CB(skb)->is_atomic` after the network layers of a frame
/// (≤ 6.9): the DF bit of its innermost IPv4 header, true for IPv6.
pub(super) fn is_atomic(innermost: &[u8], ip: IpVersion) -> bool {
    match ip {
        IpVersion::V6 => true,
        IpVersion::V4 => Ipv4::new_unchecked(innermost).frag_word() & DF != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_map_to_lines() {
        for (r, l) in [
            ("6.1.0-56-amd64", KernelLine::V6_1),
            ("5.15.0-100-generic", KernelLine::V6_1),
            ("6.9.12", KernelLine::V6_1),
            ("6.10.1", KernelLine::V6_12),
            ("6.12.117+deb12-amd64", KernelLine::V6_12),
            ("6.17.0", KernelLine::V6_12),
            ("6.18.44-fc-v657", KernelLine::V6_18),
            ("6.19.3", KernelLine::V6_18),
            ("7.0.1", KernelLine::V7),
            ("7.2.0-rc1", KernelLine::V7),
        ] {
            assert_eq!(KernelLine::from_release(r), Some(l), "{r}");
        }
        assert_eq!(KernelLine::from_release("garbage"), None);
        assert_eq!(KernelLine::from_release("3.10.0"), None);
        for l in KernelLine::ALL {
            assert_eq!(KernelLine::parse(l.name()), Some(l));
        }
        assert_eq!(KernelLine::parse("6.6"), None);
    }
}
