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

use super::profile::KernelLine;
use super::rx::flow_hash_parts;
use super::{max_size, GroEngine, Input, Proto, RxChecksum};
use crate::checksum;
use crate::link::LinkKind;
use crate::wire::ethernet::{self, ethertype};
use crate::wire::tcp::{self, flags};
use crate::wire::{be16, be32, ipv4, ipv6, IpVersion};

/// Longest header the template covers: 14 (Ethernet) + 40 (IPv6) + 60
/// (TCP with 40 option bytes) = 114, rounded to whole words.
pub(super) const MAX_HEADER: usize = 128;
const WORDS: usize = MAX_HEADER / 8;

/// The held head's headers, masked, for one table slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Template {
    /// Header bytes AND mask, as native-endian words.
    words: [u64; WORDS],
    /// 0xff for every byte that must be equal, 0 for those that may differ
    /// and for bytes past the header.
    mask: [u64; WORDS],
    /// Words compared (header length rounded up to 8 bytes); 0 when this
    /// slot has no template (tunnels, VLANs, options, UDP...).
    nwords: u8,
    /// Header length: link header + IP + TCP with options.
    hl: u8,
    /// The word holding the TCP ports (and the end of the addresses):
    /// compared alone first to reject another flow's template cheaply.
    key: u8,
    l3: u8,
    ip: IpVersion,
    link: LinkKind,
    /// IPv4: the ones' complement sum of the head's IP header without
    /// total length, ID and checksum (the three may differ).
    ip_sum: u64,
    /// The pseudo-header sum without the length: addresses and protocol.
    pseudo: u64,
    /// The head's sequence number.
    seq: u32,
}

impl Template {
    /// No template: the slot is served by the full path only.
    pub(super) const NONE: Template = Template {
        words: [0; WORDS],
        mask: [0; WORDS],
        nwords: 0,
        hl: 0,
        key: 0,
        l3: 0,
        ip: IpVersion::V4,
        link: LinkKind::Ethernet,
        ip_sum: 0,
        pseudo: 0,
        seq: 0,
    };

    /// True when the slot has a template (the fast path serves it).
    #[inline]
    pub(super) fn is_on(&self) -> bool {
        self.nwords != 0
    }

    /// Marks the slot as served by the full path only.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.nwords = 0;
    }

    /// The template of a TCP head just held (`f` its frame, `l3`/`l4` its
    /// network and transport offsets, `thlen` its TCP header length), if
    /// its shape is one the fast path serves.
    pub(super) fn build(
        f: &[u8],
        link: LinkKind,
        key_len: usize,
        l3: usize,
        l4: usize,
        ip: IpVersion,
        thlen: usize,
    ) -> Template {
        let hl = l4 + thlen;
        let plain = match link {
            LinkKind::Ethernet => l3 == ethernet::HEADER_LEN,
            LinkKind::RawIp | LinkKind::Ipv4 | LinkKind::Ipv6 => l3 == 0,
            _ => false,
        };
        let l4_expected = l3
            + match ip {
                IpVersion::V4 => ipv4::MIN_HEADER_LEN,
                IpVersion::V6 => ipv6::HEADER_LEN,
            };
        if !plain || key_len != l3 || l4 != l4_expected || hl > MAX_HEADER || f.len() < hl {
            return Template::NONE;
        }
        let mut bytes = [0u8; MAX_HEADER];
        let mut mask = [0u8; MAX_HEADER];
        bytes[..hl].copy_from_slice(&f[..hl]);
        mask[..hl].fill(0xff);
        let mut free = |r: core::ops::Range<usize>| mask[r].fill(0);
        let (ip_sum, pseudo) = match ip {
            IpVersion::V4 => {
                free(l3 + ipv4::field::TOTAL_LEN.start..l3 + ipv4::field::IDENT.end);
                free(l3 + ipv4::field::CHECKSUM.start..l3 + ipv4::field::CHECKSUM.end);
                let mut h = [0u8; ipv4::MIN_HEADER_LEN];
                h.copy_from_slice(&f[l3..l4]);
                h[ipv4::field::TOTAL_LEN.start..ipv4::field::IDENT.end].fill(0);
                h[ipv4::field::CHECKSUM].fill(0);
                let sum = checksum::sum_bytes_scalar(0, &h);
                (
                    sum,
                    ip.pseudo_header(&f[l3..], crate::wire::ip_proto::TCP, 0),
                )
            }
            IpVersion::V6 => {
                free(l3 + ipv6::field::PAYLOAD_LEN.start..l3 + ipv6::field::PAYLOAD_LEN.end);
                (0, ip.pseudo_header(&f[l3..], crate::wire::ip_proto::TCP, 0))
            }
        };
        free(l4 + tcp::field::SEQ.start..l4 + tcp::field::SEQ.end);
        free(l4 + tcp::field::CHECKSUM..l4 + tcp::field::CHECKSUM + 2);
        mask[l4 + tcp::field::FLAGS] = !(flags::FIN | flags::PSH);
        let nwords = hl.div_ceil(8);
        let mut t = Template {
            nwords: nwords as u8,
            hl: hl as u8,
            key: (l4 / 8) as u8,
            l3: l3 as u8,
            ip,
            link,
            ip_sum,
            pseudo,
            seq: be32(f, l4 + tcp::field::SEQ.start),
            ..Template::NONE
        };
        for i in 0..WORDS {
            let w = |b: &[u8; MAX_HEADER]| {
                u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"))
            };
            t.mask[i] = w(&mask);
            t.words[i] = w(&bytes) & t.mask[i];
        }
        t
    }

    /// True when the word holding the ports equals the template's: a
    /// cheap first test that tells flows apart.
    #[inline(always)]
    fn key_matches(&self, f: &[u8]) -> bool {
        let k = self.key as usize;
        if self.nwords == 0 {
            return false;
        }
        f.get(8 * k..8 * k + 8).is_some_and(|c| {
            u64::from_ne_bytes(c.try_into().expect("8 bytes")) & self.mask[k] == self.words[k]
        })
    }

    /// True when `f`'s header equals the template's wherever it must.
    #[inline(always)]
    fn matches(&self, f: &[u8]) -> bool {
        let n = self.nwords as usize;
        let Some(h) = f.get(..n * 8) else {
            return false;
        };
        let mut diff = 0u64;
        for ((c, w), m) in h.chunks_exact(8).zip(&self.words).zip(&self.mask) {
            let x = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
            diff |= (x & m) ^ w;
        }
        diff == 0
    }
}

/// The hint-table index of a frame whose transport header is at `l4`: a
/// multiplicative hash of the ports and the last four address bytes
/// before them (the end of the destination address).
#[inline(always)]
pub(super) fn hint_index(f: &[u8], l4: usize) -> usize {
    let w = u64::from_ne_bytes(f[l4 - 4..l4 + 4].try_into().expect("8 bytes"));
    (w.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize
}

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

/// The IPv4 ID rule of `line` for a plain (untunnelled) header, as
/// `inet_gro_flush` (6.18, 7.x), the 6.10–6.17 `inet_gro_flush` and the
/// ≤ 6.9 `flush_id`/`is_atomic` rule (`profile.rs`) decide it when TTL,
/// TOS and DF already match: `Some((fixedid, atomic))`, the held packet's
/// new state, when the segment may merge; `None` when the full path would
/// flush.
#[inline(always)]
fn ip_id_rule(
    line: KernelLine,
    offset: u16,
    count: u16,
    df: bool,
    fixedid: u8,
    atomic: bool,
) -> Option<(u8, bool)> {
    match line {
        KernelLine::V6_18 | KernelLine::V7 | KernelLine::V6_12 => {
            let mut fx = fixedid;
            // 6.10–6.17 mark a fixed-ID flow only with DF.
            let may_fix = line != KernelLine::V6_12 || df;
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

impl GroEngine {
    /// Merges `input` into the held packet of its flow when it is that
    /// packet's next segment and nothing about it needs the full path;
    /// returns false, having changed nothing, otherwise.
    #[inline]
    pub(super) fn fast_merge<F: FnMut(&super::Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        csum: RxChecksum,
        out: &mut F,
    ) -> bool {
        if !self.fast_path || self.held.is_empty() {
            return false;
        }
        let f = input.data;
        if (f.len() as u64) < input.orig_len as u64 {
            return false;
        }
        let Some((l3, ip)) = plain_layout(f, input.link) else {
            return false;
        };
        let l4 = l3
            + match ip {
                IpVersion::V4 => ipv4::MIN_HEADER_LEN,
                IpVersion::V6 => ipv6::HEADER_LEN,
            };
        if f.len() < l4 + tcp::MIN_HEADER_LEN {
            return false;
        }
        // The slot this flow's segment went to last, found without hashing
        // (a hint table indexed by the ports), else the oldest slot with the
        // frame's flow hash. Either way a full template match means the
        // same flow, and a flow has at most one held packet, so this is the
        // slot the full path's lookup would find.
        let hint = hint_index(f, l4);
        let slot = match self.held.hinted(hint) {
            Some(s) if self.held.template(s).key_matches(f) => s,
            _ => {
                let hash = flow_hash_parts(f, input.link, l3, l3, l4, ip, None);
                let Some(slot) = self.held.first_with_hash(hash) else {
                    return false;
                };
                slot
            }
        };
        let t = self.held.template(slot);
        if t.nwords == 0 || t.link != input.link || t.l3 as usize != l3 || t.ip != ip {
            return false;
        }
        if !t.matches(f) {
            return false;
        }
        let hl = t.hl as usize;
        let (ip_sum, pseudo, seq0) = (t.ip_sum, t.pseudo, t.seq);
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
                let head_id = be16(&p.data, l3 + ipv4::field::IDENT.start);
                let df = be16(h, ipv4::field::FRAG.start) & ipv4::DF != 0;
                let offset = id.wrapping_sub(head_id);
                match ip_id_rule(line, offset, p.count as u16, df, fixedid, atomic) {
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
        if p.skb_len() as u64 + len as u64 >= max_size(&self.cfg, p.outer_protocol) as u64 {
            return false;
        }
        let verify = self.cfg.verify_checksums && csum.csum_cnt() == 0;
        if verify {
            let seg = &f[l4..];
            if !checksum::verify(checksum::sum_u32(pseudo, seg.len() as u32), seg) {
                return false;
            }
        }
        // The full path's merge, with its state changes.
        self.stats.proto_in[match ip {
            IpVersion::V4 => Proto::Tcp4,
            IpVersion::V6 => Proto::Tcp6,
        } as usize] += 1;
        let p = self.held.get_mut(slot);
        p.fixedid = fixedid;
        p.atomic = atomic;
        let word = (tflags as u32) << 16;
        self.held.hint(hint, slot);
        self.merge_tcp(slot, f, hl, input, len, word, out);
        true
    }
}
