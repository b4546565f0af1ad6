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

use super::rx::Skb;
use super::{FlushReason, Held, LossReason};
use crate::layout::Encap;
use crate::wire::ipv4::{Ipv4, DF};
use crate::wire::IpVersion;
use crate::wire::{be32, ipv6};
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

    /// IPv4 BIG TCP: GRO may build IPv4 packets above 64 KiB
    /// (`gro_ipv4_max_size`, `net/core/gro.c` `skb_gro_receive`, 6.3:
    /// "net: add support for ipv4 big tcp").
    #[inline]
    pub fn has_ipv4_big_tcp(self) -> bool {
        self.has_ipv4_max_size()
    }

    /// ≤ 6.9 tracks `NAPI_GRO_CB(skb)->is_atomic` (the DF bit of the
    /// innermost IPv4 header) for the `flush_id` rule
    /// (`net/ipv4/af_inet.c` `inet_gro_receive`, `tcp_gro_receive`).
    #[inline]
    pub(super) fn tracks_atomic(self) -> bool {
        self == KernelLine::V6_1
    }

    /// One `ip_fixedid` bit shared by the outer and the inner IPv4 header
    /// (6.10–6.17 `gro_receive_network_flush`, and the single
    /// `SKB_GSO_TCP_FIXEDID` bit of ≤ 6.17); 6.18 has one bit per header
    /// ("only merge packets with incrementing or fixed outer ids").
    #[inline]
    pub fn one_fixedid_bit(self) -> bool {
        self < KernelLine::V6_18
    }

    /// A fixed IPv4 ID merges only with DF set, and a tunnel's outer
    /// header with DF set is not checked at all (`inet_gro_flush` of
    /// 6.10–6.17 with `outer`; the `flush_id`/`is_atomic` rule of ≤ 6.9).
    /// From 6.18 a fixed or incrementing ID merges whatever DF says, outer
    /// header included.
    #[inline]
    pub fn fixed_id_needs_df(self) -> bool {
        self < KernelLine::V6_18
    }

    /// Whether GRO of this line merges a flow whose IPv4 ID (in one
    /// header: the only one, or a tunnel's `outer` or inner header) moves
    /// as `pattern`, with DF as `df_set`: the rule of `inet_gro_flush`
    /// (`include/net/gro.h`, 6.10+) and of `flush_id` (≤ 6.9), stated per
    /// pattern rather than per packet. The per-packet rule is what the
    /// engine applies; this is its summary for findings and advice.
    pub fn ip_ids_mergeable(self, pattern: IpIdPattern, df_set: bool, outer: bool) -> bool {
        match pattern {
            IpIdPattern::IncrementingPerFlow | IpIdPattern::NotApplicable => true,
            IpIdPattern::Fixed | IpIdPattern::FixedZero => !self.fixed_id_needs_df() || df_set,
            IpIdPattern::GlobalCounter | IpIdPattern::Random => {
                self.fixed_id_needs_df() && outer && df_set
            }
        }
    }

    /// BIG TCP through a tunnel with an IPv6 outer header is broken on
    /// this line: once GRO merges such a packet past 64 KiB of outer
    /// payload, `ipv6_gro_complete` (`net/ipv6/ip6_offload.c`, 5.19–6.19,
    /// 81fbc812132c "ipv6/gro: insert temporary HBH/jumbo header") inserts
    /// the Hop-by-Hop Jumbo header for the *outer* header but shifts the
    /// headers as if they ended at the innermost transport header, so the
    /// 8 bytes after the outer IPv6 header (the tunnel's own header, or
    /// the start of the inner IP header) are overwritten. The rest of the
    /// completion chain then parses garbage: the packet is dropped with a
    /// `WARN` (ip6ip6, ip4ip6, ip6gre, ip6gretap) or delivered mangled
    /// (VXLAN and Geneve over IPv6). 7.0 writes payload length 0 and no
    /// Hop-by-Hop header (81be30c1f5f2 "net/ipv6: Drop HBH for BIG TCP on
    /// RX side", the "BIG TCP without HBH in IPv6" series), so merged
    /// packets come out sound. The 6.1 and 6.12 lines never build such a
    /// packet ([`KernelLine::tunnel_big_tcp_stops_at_64k`]), so they lose
    /// nothing: of the lines modelled, 6.18 alone is affected (as 6.18.0–
    /// 6.18.46 are; by point release:
    /// [`KernelLine::release_breaks_big_tcp_over_ipv6_tunnels`]).
    /// Tunnels with an IPv4 outer header are not affected on any line.
    /// What each tunnel loses: [`KernelLine::ipv6_outer_tunnel_loss`].
    #[inline]
    pub fn breaks_big_tcp_over_ipv6_tunnels(self) -> bool {
        self.ipv6_jumbo_hbh() && !self.tunnel_big_tcp_stops_at_64k()
    }

    /// What a receiver on this line loses when GRO completes a TCP packet
    /// carried in tunnel `encap` over an IPv6 outer header whose outer
    /// payload exceeds 65,535 bytes, innermost IP version `inner`
    /// ([`KernelLine::breaks_big_tcp_over_ipv6_tunnels`]); `None` when it
    /// arrives sound (or, on 6.1, cannot be built).
    pub fn ipv6_outer_tunnel_loss(self, encap: Encap, inner: IpVersion) -> Option<LossReason> {
        let _ = inner; // the same on every line where it happens
        if !self.breaks_big_tcp_over_ipv6_tunnels() {
            return None;
        }
        Some(match encap {
            // `udp6_gro_complete` reads the VXLAN/Geneve header as the UDP
            // header: no tunnel socket matches its "ports", so
            // `udp_gro_complete_segment` delivers the packet as UDP GSO
            // with the Hop-by-Hop option where the UDP header was.
            Encap::Vxlan | Encap::Geneve { .. } => LossReason::Ipv6TunnelJumboMangled,
            // The GRE header, or the inner IP header, is overwritten; the
            // next `gro_complete` finds no offload for the garbage
            // protocol: `WARN_ON(!ops || !ops->callbacks.gro_complete)` in
            // `ipv6_gro_complete` / `inet_gro_complete`, and
            // `napi_gro_complete` frees the packet.
            Encap::IpInIp | Encap::Gre { .. } => LossReason::Ipv6TunnelJumboDropped,
        })
    }

    /// No tunnelled packet grows past 64 KiB on this line, whatever
    /// `gro_max_size` / `gro_ipv4_max_size` say: measured in the Debian
    /// 6.1.0-57 and 6.12.117 guests, where ipip, sit, ip4ip6, ip6ip6, GRE,
    /// gretap, ip6gre and VXLAN over IPv4 and IPv6 all stop below 64 KiB
    /// (64514 + 64514 + 11314 bytes for 100 × 1400 through ip6ip6), while
    /// the live 6.18.44 merges them all. On 5.19–6.2 `skb_gro_receive`
    /// (`net/core/gro.c`) allows more than 64 KiB only when `p->protocol`
    /// is IPv6 and `ipv6_hdr(p)->nexthdr` is TCP, which a tunnel's outer
    /// header is not. 6.3 (b1a78b9b9886 "net: add support for ipv4 big
    /// tcp") loosened that to `NAPI_GRO_CB(skb)->proto` and
    /// `p->encapsulation`, which a tunnel received from a NIC or TAP
    /// passes; the stable fix "net: gro: properly validate BIG TCP
    /// aggregation criteria" (6.1.185, 6.6.154, 6.12.106, 6.18.47; not
    /// needed from 7.0) tests `NAPI_GRO_CB(skb)->encap_mark` again, so
    /// tunnels stop at 64 KiB. The guests' 6.12.117 has it, the host's
    /// 6.18.44 does not: this line's profile is the 6.12.106+ rule, and
    /// releases of 6.3–6.12.105 behave like the 6.18 profile here
    /// ([`KernelLine::release_breaks_big_tcp_over_ipv6_tunnels`] tells by
    /// release).
    #[inline]
    pub fn tunnel_big_tcp_stops_at_64k(self) -> bool {
        self <= KernelLine::V6_12
    }

    /// Whether kernel `release` (`uname -r`) loses BIG TCP through tunnels
    /// with an IPv6 outer header ([`KernelLine::breaks_big_tcp_over_ipv6_tunnels`]),
    /// by its point release where the line's profile cannot tell: tunnels
    /// pass 64 KiB from 6.3 (b1a78b9b9886) until the stable fix "net: gro:
    /// properly validate BIG TCP aggregation criteria" (6.6.154, 6.12.106,
    /// 6.18.47; 6.3–6.5, 6.7–6.11, 6.13–6.17 and 6.19 never got it), and
    /// `ipv6_gro_complete` loses them until 7.0. `None` when the release
    /// cannot be read, or its point release is needed and missing.
    pub fn release_breaks_big_tcp_over_ipv6_tunnels(release: &str) -> Option<bool> {
        let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        let patch = parts.next().and_then(|p| p.parse::<u32>().ok());
        let fixed_from = |first: u32| patch.map(|p| p < first);
        match (major, minor) {
            (0..=5, _) | (6, 0..=2) => Some(false),
            (6, 6) => fixed_from(154),
            (6, 12) => fixed_from(106),
            (6, 18) => fixed_from(47),
            (6, _) => Some(true),
            _ => Some(false),
        }
    }
}

/// How the IPv4 ID of one header moves from packet to packet within a
/// flow, as a capture shows it (the vocabulary of
/// [`KernelLine::ip_ids_mergeable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IpIdPattern {
    /// Each packet's ID is the previous one plus its segment count.
    IncrementingPerFlow,
    /// IDs go up by varying small steps: a counter shared with other flows.
    GlobalCounter,
    /// Always 0.
    FixedZero,
    /// Always the same non-zero value.
    Fixed,
    /// No order.
    Random,
    /// IPv6 (no ID), or too few packets to say.
    NotApplicable,
}

impl IpIdPattern {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            IpIdPattern::IncrementingPerFlow => "incrementing per flow",
            IpIdPattern::GlobalCounter => "global counter",
            IpIdPattern::FixedZero => "fixed zero",
            IpIdPattern::Fixed => "fixed",
            IpIdPattern::Random => "random",
            IpIdPattern::NotApplicable => "n/a",
        }
    }
}

/// The network-layer rules that differ per line, called by the full
/// path (`tcp.rs`, `udp.rs`) and the fast path (`fast.rs`).
impl KernelLine {
    /// `gro_receive_network_flush`: `inet_gro_flush` (6.18 IP-ID rules) or
    /// `ipv6_gro_flush` on the outer (or only) header, then on the inner
    /// header of an encapsulated packet.
    pub(super) fn network_flush(self, p: &mut Held, skb: &Skb<'_>) -> Option<FlushReason> {
        let f = skb.frame();
        let lay = &skb.lay;
        match self {
            KernelLine::V6_18 | KernelLine::V7 => {
                let (count, fixedid) = (p.count, &mut p.fixedid);
                if let Some(o) = lay.outer {
                    let r =
                        header_flush(&f[o.l3_off..], &p.data[o.l3_off..], o.ip, count, fixedid, 0);
                    if let Some(r) = r {
                        return Some(outer_reason(r));
                    }
                    return header_flush(
                        &f[lay.l3_off..],
                        &p.data[lay.l3_off..],
                        lay.ip,
                        count,
                        fixedid,
                        1,
                    );
                }
                header_flush(
                    &f[lay.l3_off..],
                    &p.data[lay.l3_off..],
                    lay.ip,
                    count,
                    fixedid,
                    0,
                )
            }
            KernelLine::V6_12 => {
                // `gro_receive_network_flush` of 6.10–6.17: outer header with
                // `outer = true`, then the inner one; one shared fixed-ID bit.
                let count = p.count;
                let one = |a: &[u8], b: &[u8], ip, fixedid: &mut u8, outer| match ip {
                    IpVersion::V4 => inet_flush_6_12(a, b, count, fixedid, outer),
                    IpVersion::V6 => ipv6_flush(a, b),
                };
                if let Some(o) = lay.outer {
                    let r = one(
                        &f[o.l3_off..],
                        &p.data[o.l3_off..],
                        o.ip,
                        &mut p.fixedid,
                        true,
                    );
                    if let Some(r) = r {
                        return Some(outer_reason(r));
                    }
                }
                one(
                    &f[lay.l3_off..],
                    &p.data[lay.l3_off..],
                    lay.ip,
                    &mut p.fixedid,
                    false,
                )
            }
            KernelLine::V6_1 => {
                // ≤ 6.9: TTL/TOS/DF and traffic class/hop limit of every
                // header (`NAPI_GRO_CB(p)->flush`), then the `flush_id` rule.
                let fixed = |a: &[u8], b: &[u8], ip| match ip {
                    IpVersion::V4 => ttl_tos_df(&Ipv4::new_unchecked(a), &Ipv4::new_unchecked(b)),
                    IpVersion::V6 => ipv6_flush(a, b),
                };
                let mut hdrs = Vec::with_capacity(2);
                if let Some(o) = lay.outer {
                    if let Some(r) = fixed(&f[o.l3_off..], &p.data[o.l3_off..], o.ip) {
                        return Some(outer_reason(r));
                    }
                    hdrs.push((o.l3_off, o.ip));
                }
                if let Some(r) = fixed(&f[lay.l3_off..], &p.data[lay.l3_off..], lay.ip) {
                    return Some(r);
                }
                hdrs.push((lay.l3_off, lay.ip));
                let data = std::mem::take(&mut p.data);
                let hs: Vec<Hdr<'_>> = hdrs
                    .iter()
                    .map(|&(at, ip)| Hdr {
                        skb: &f[at..],
                        p: &data[at..],
                        ip,
                    })
                    .collect();
                let r = ip_id_flush_6_1(p, &hs);
                drop(hs);
                p.data = data;
                r
            }
        }
    }

    /// The IPv4 ID rule of `line` for a plain (untunnelled) header, as
    /// `inet_gro_flush` (6.18, 7.x), the 6.10–6.17 `inet_gro_flush` and the
    /// ≤ 6.9 `flush_id`/`is_atomic` rule (`profile.rs`) decide it when TTL,
    /// TOS and DF already match: `Some((fixedid, atomic))`, the held packet's
    /// new state, when the segment may merge; `None` when the full path would
    /// flush.
    #[inline(always)]
    pub(super) fn ip_id_rule(
        self,
        offset: u16,
        count: u16,
        df: bool,
        fixedid: u8,
        atomic: bool,
    ) -> Option<(u8, bool)> {
        match self {
            KernelLine::V6_18 | KernelLine::V7 | KernelLine::V6_12 => {
                let mut fx = fixedid;
                // 6.10–6.17 mark a fixed-ID flow only with DF.
                let may_fix = self != KernelLine::V6_12 || df;
                if count == 1 && offset == 0 && may_fix {
                    fx |= 1;
                }
                let want = if fx & 1 != 0 { 0 } else { count };
                (offset == want).then_some((fx, atomic))
            }
            KernelLine::V6_1 => {
                if atomic && df {
                    match offset {
                        0 => Some((fixedid, atomic)),
                        1 if count == 1 => Some((fixedid, false)),
                        _ => None,
                    }
                } else {
                    (offset == count).then_some((fixedid, atomic))
                }
            }
        }
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

/// `ipv6_gro_flush`: traffic class (ECN included) and hop limit.
fn ipv6_flush(a: &[u8], b: &[u8]) -> Option<FlushReason> {
    let first = ipv6::field::VERSION_TC_FLOW.start;
    if (be32(a, first) ^ be32(b, first)) & ipv6::first_word::TRAFFIC_CLASS != 0 {
        return Some(FlushReason::TosChanged);
    }
    if a[ipv6::field::HOP_LIMIT] != b[ipv6::field::HOP_LIMIT] {
        return Some(FlushReason::HopLimitChanged);
    }
    None
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
    ip: IpVersion,
    count: u32,
    fixedid: &mut u8,
    inner: u8,
) -> Option<FlushReason> {
    match ip {
        IpVersion::V6 => {
            let first = ipv6::field::VERSION_TC_FLOW.start;
            if (be32(a, first) ^ be32(b, first)) & ipv6::first_word::TRAFFIC_CLASS != 0 {
                return Some(FlushReason::TosChanged);
            }
            if a[ipv6::field::HOP_LIMIT] != b[ipv6::field::HOP_LIMIT] {
                return Some(FlushReason::HopLimitChanged);
            }
            None
        }
        IpVersion::V4 => inet_flush(a, b, count, fixedid, inner),
    }
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
    let (a, b) = (Ipv4::new_unchecked(iph), Ipv4::new_unchecked(iph2));
    if a.ttl() != b.ttl() {
        return Some(FlushReason::TtlChanged);
    }
    if a.tos() != b.tos() {
        return Some(FlushReason::TosChanged);
    }
    if (a.frag_word() ^ b.frag_word()) & DF != 0 {
        return Some(FlushReason::DfChanged);
    }
    let offset = a.ident().wrapping_sub(b.ident());
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

    #[test]
    fn ipv6_outer_tunnel_big_tcp_per_line() {
        use IpVersion::{V4, V6};
        let gre = Encap::Gre { len: 4, eth: false };
        for l in KernelLine::ALL {
            let broken = l == KernelLine::V6_18;
            assert_eq!(l.breaks_big_tcp_over_ipv6_tunnels(), broken, "{l}");
        }
        assert_eq!(
            KernelLine::V7.ipv6_outer_tunnel_loss(Encap::IpInIp, V6),
            None
        );
        for l in [KernelLine::V6_18] {
            for inner in [V4, V6] {
                assert_eq!(
                    l.ipv6_outer_tunnel_loss(Encap::IpInIp, inner),
                    Some(LossReason::Ipv6TunnelJumboDropped)
                );
                assert_eq!(
                    l.ipv6_outer_tunnel_loss(gre, inner),
                    Some(LossReason::Ipv6TunnelJumboDropped)
                );
                assert_eq!(
                    l.ipv6_outer_tunnel_loss(Encap::Vxlan, inner),
                    Some(LossReason::Ipv6TunnelJumboMangled)
                );
            }
        }
        // 6.1 and 6.12: no tunnel passes 64 KiB, nothing is lost.
        for l in [KernelLine::V6_1, KernelLine::V6_12] {
            for encap in [Encap::IpInIp, Encap::Vxlan, gre] {
                for inner in [V4, V6] {
                    assert_eq!(l.ipv6_outer_tunnel_loss(encap, inner), None);
                }
            }
        }
    }

    #[test]
    fn big_tcp_tunnel_loss_by_release() {
        let f = KernelLine::release_breaks_big_tcp_over_ipv6_tunnels;
        for (r, want) in [
            ("5.15.0-100-generic", Some(false)),
            ("6.1.0-57-amd64", Some(false)),
            ("6.2.16", Some(false)),
            ("6.3.1", Some(true)),
            ("6.6.153", Some(true)),
            ("6.6.154", Some(false)),
            ("6.12.105", Some(true)),
            ("6.12.117+deb12-amd64", Some(false)),
            ("6.15.2", Some(true)),
            ("6.18.44-fc-v669", Some(true)),
            ("6.18.47", Some(false)),
            ("6.19.3", Some(true)),
            ("7.0.1", Some(false)),
            ("6.18", None),
            ("garbage", None),
        ] {
            assert_eq!(f(r), want, "{r}");
        }
        // The profiles: 6.12 is the 6.12.106+ rule, 6.18 the 6.18.0-46 one.
        assert_eq!(
            f("6.12.117").unwrap(),
            KernelLine::V6_12.breaks_big_tcp_over_ipv6_tunnels()
        );
        assert_eq!(
            f("6.18.44").unwrap(),
            KernelLine::V6_18.breaks_big_tcp_over_ipv6_tunnels()
        );
    }

    #[test]
    fn ip_id_patterns_per_line() {
        use IpIdPattern::*;
        for l in KernelLine::ALL {
            assert!(l.ip_ids_mergeable(IncrementingPerFlow, false, false));
            assert!(l.ip_ids_mergeable(Fixed, true, false));
            assert!(!l.ip_ids_mergeable(Random, false, false));
        }
        // A fixed ID without DF: only 6.18 and later.
        assert!(!KernelLine::V6_12.ip_ids_mergeable(FixedZero, false, false));
        assert!(KernelLine::V6_18.ip_ids_mergeable(FixedZero, false, false));
        // A random outer ID with DF: ignored before 6.18, fatal from 6.18.
        assert!(KernelLine::V6_1.ip_ids_mergeable(Random, true, true));
        assert!(!KernelLine::V6_18.ip_ids_mergeable(Random, true, true));
    }
}
