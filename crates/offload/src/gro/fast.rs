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
use super::rx::Skb;
use super::table::Slot;
use super::{mac_len, FlushReason, GroEngine, Input, Proto, RxChecksum};
use crate::checksum;
use crate::layout::Layout;
use crate::link::{L2Info, LinkKind};
use crate::wire::ethernet::{self, ethertype};
use crate::wire::tcp::{self, flags};
use crate::wire::Transport;
use crate::wire::{be16, be32, ipv4, ipv6, IpVersion};

/// Longest header the template covers: 14 (Ethernet) + 40 (IPv6) + 60
/// (TCP with 40 option bytes) = 114, rounded to whole words.
pub(super) const MAX_HEADER: usize = 128;
const WORDS: usize = MAX_HEADER / 8;

/// The first [`MAX_HEADER`] bytes of a held head, aligned for word loads.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
struct Head([u8; MAX_HEADER]);

impl Head {
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        u64::from_ne_bytes(self.0[8 * i..8 * i + 8].try_into().expect("8 bytes"))
    }
}

/// The held head's headers for one table slot, and what the fast merge
/// needs of them.
///
/// Filling it costs a 128-byte copy: the head's bytes are kept as they
/// are, and the compare mask (which bytes must be equal) is one of the
/// static [`MASKS`], chosen by layout and TCP header length. The ones'
/// complement sums the merge uses are computed at the first merge, so a
/// head that never merges (a new flow among thousands) pays nothing for
/// them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Template {
    /// The head's first [`MAX_HEADER`] bytes (zero past a shorter frame).
    head: Head,
    /// Index in [`MASKS`]; [`NO_MASK`] when this slot has no template
    /// (tunnels, VLANs, options, UDP...).
    mask: u8,
    /// Words compared for a frame shorter than [`MAX_HEADER`] (header
    /// length rounded up to 8 bytes).
    nwords: u8,
    /// Header length: link header + IP + TCP with options.
    hl: u8,
    l3: u8,
    ip: IpVersion,
    link: LinkKind,
    /// `ip_sum` and `pseudo` are computed.
    sums: bool,
    /// IPv4: the ones' complement sum of the head's IP header without
    /// total length, ID and checksum (the three may differ).
    ip_sum: u64,
    /// The pseudo-header sum without the length: addresses and protocol.
    pseudo: u64,
    /// The head's sequence number.
    seq: u32,
    /// The head's [`flow_tag`].
    tag: u64,
    /// The size limit of the held packet (`netif_get_gro_max_size`, set
    /// by [`Template::set_limit`]).
    limit: u32,
}

/// [`Template::mask`] of a slot without a template.
const NO_MASK: u8 = u8::MAX;

/// [`Template::mask`] of a slot whose template is still to be built from
/// its held packet's headers (at the first frame whose flow tag matches):
/// only `tag`, `link` and `limit` are set.
const PENDING: u8 = u8::MAX - 1;

impl Template {
    /// No template: the slot is served by the full path only.
    pub(super) const NONE: Template = Template {
        head: Head([0; MAX_HEADER]),
        mask: NO_MASK,
        nwords: 0,
        hl: 0,
        l3: 0,
        ip: IpVersion::V4,
        link: LinkKind::Ethernet,
        sums: false,
        ip_sum: 0,
        pseudo: 0,
        seq: 0,
        tag: 0,
        limit: 0,
    };

    /// Marks the slot as served by the full path only.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.mask = NO_MASK;
    }

    /// Fills the template of a TCP head just held (`f` its frame,
    /// `l3`/`l4` its network and transport offsets, `thlen` its TCP header
    /// length) if its shape is one the fast path serves; else marks the
    /// slot as served by the full path. Returns whether it is on. Runs for
    /// every held packet.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn fill(
        &mut self,
        f: &[u8],
        link: LinkKind,
        key_len: usize,
        l3: usize,
        l4: usize,
        ip: IpVersion,
        thlen: usize,
    ) -> bool {
        let hl = l4 + thlen;
        let layout = match (link, l3) {
            (LinkKind::Ethernet, ethernet::HEADER_LEN) => 0,
            (LinkKind::RawIp | LinkKind::Ipv4 | LinkKind::Ipv6, 0) => 2,
            _ => usize::MAX,
        };
        if layout == usize::MAX
            || key_len != l3
            || l4 != l3 + ip.min_header_len()
            || !(tcp::MIN_HEADER_LEN..=TCP_MAX_HEADER_LEN).contains(&thlen)
            || !thlen.is_multiple_of(4)
            || hl > MAX_HEADER
            || f.len() < hl
        {
            self.mask = NO_MASK;
            return false;
        }
        if let Some(h) = f.first_chunk::<MAX_HEADER>() {
            self.head.0 = *h;
        } else {
            // A frame ending inside the last word: zero-padded.
            self.head.0 = [0; MAX_HEADER];
            self.head.0[..f.len()].copy_from_slice(f);
        }
        self.mask = mask_index(layout + ip.is_v6() as usize, thlen) as u8;
        self.nwords = hl.div_ceil(8) as u8;
        self.hl = hl as u8;
        self.l3 = l3 as u8;
        self.ip = ip;
        self.link = link;
        self.sums = false;
        self.seq = be32(f, l4 + tcp::field::SEQ.start);
        self.tag = flow_tag(f, l4);
        true
    }

    /// True when this slot's flow has `k` as its first hint index (a
    /// templated slot whose [`hint_of`] starts with `k`).
    #[inline(always)]
    fn hints_first_at(&self, k: usize) -> bool {
        self.mask != NO_MASK && hint_of(self.tag).0 == k
    }

    /// Marks the template of a TCP head just held (`f` its frame, `l4` its
    /// transport offset) as to be built at its flow's next frame, and
    /// returns its hint indices. Building it costs a 128-byte copy and a
    /// dozen checks that a head which never merges (a new flow among
    /// thousands, every frame of the 30 000-flow trains) need not pay: the
    /// held packet keeps the same header bytes until it is completed (a
    /// merge changes them only by OR-ing in FIN or PSH, `tcp_gro_receive`
    /// in net/ipv4/tcp_offload.c on every line, and either flag completes
    /// the packet), so the template built later is the one building it
    /// now would give.
    #[inline(always)]
    pub(super) fn pend(&mut self, f: &[u8], l4: usize, link: LinkKind) -> (usize, usize) {
        self.tag = flow_tag(f, l4);
        self.link = link;
        self.mask = PENDING;
        hint_of(self.tag)
    }

    /// Builds a [`Self::pend`]ing template from its held packet `p`; the
    /// slot goes to the full path only if its shape is not one the fast
    /// path serves.
    #[cold]
    #[inline(never)]
    fn build(&mut self, p: &super::Held) {
        let h: &[u8] = &p.data;
        let (l3, l4) = (p.lay.l3_off, p.lay.l4_off);
        let thlen = match h.get(l4..) {
            Some(t) if t.len() >= tcp::MIN_HEADER_LEN => tcp::header_len(t),
            _ => 0,
        };
        if l4 < 4 || h.len() < l4 + thlen.max(4) {
            self.mask = NO_MASK;
            return;
        }
        // The bytes past the headers are masked out of every compare, so
        // the buffer's bytes past a header-only packet do as well as zeros.
        let w = p.data.window::<MAX_HEADER>().map_or(h, |w| &w[..]);
        self.fill(w, p.link, p.l2_key_len, l3, l4, p.lay.ip, thlen);
    }

    /// True when frame `f` of link `link` and flow tag `tag` has this
    /// template's header wherever it must; a pending template is built
    /// from held packet `p` first, when the tag and link are the head's.
    /// `tag` is the frame's [`flow_tag`] (bytes the mask compares),
    /// checked first so that another flow's frame (a stale or colliding
    /// hint) is told apart with one compare.
    #[inline(always)]
    pub(super) fn build_and_match(
        &mut self,
        p: &super::Held,
        f: &[u8],
        link: LinkKind,
        tag: u64,
    ) -> bool {
        if self.tag != tag || self.link != link {
            return false;
        }
        if self.mask == PENDING {
            self.build(p);
        }
        self.matches_bytes(f)
    }

    /// The head's flow tag.
    #[inline(always)]
    pub(super) fn tag(&self) -> u64 {
        self.tag
    }

    /// Sets the held packet's size limit (`max_size` of its outer protocol).
    #[inline(always)]
    pub(super) fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// The ones' complement sums of the head's fixed fields (once per
    /// held packet, at its first merge).
    #[inline]
    fn sums(&mut self) -> (u64, u64) {
        if !self.sums {
            let h = &self.head.0[self.l3 as usize..];
            self.ip_sum = match self.ip {
                IpVersion::V4 => {
                    let mut acc =
                        checksum::sum_u32(0, be32(h, 0) & 0xff00_0000 | be32(h, 0) & 0x00ff_0000);
                    acc = checksum::sum_u32(acc, be32(h, 4) & 0x0000_ffff);
                    acc = checksum::sum_u32(acc, be32(h, 8) & 0xffff_0000);
                    acc = checksum::sum_u32(acc, be32(h, 12));
                    checksum::sum_u32(acc, be32(h, 16))
                }
                IpVersion::V6 => 0,
            };
            self.pseudo = self.ip.pseudo_header(h, crate::wire::ip_proto::TCP, 0);
            self.sums = true;
        }
        (self.ip_sum, self.pseudo)
    }

    /// True when `f`, a frame whose flow tag and link are the head's, has
    /// this template's header wherever it must: every masked byte equal
    /// (false for a slot with no template or a pending one). Equal masked
    /// bytes imply the same network layout (the ethertype or the IP
    /// version nibble is compared) and the same TCP header length (the
    /// data offset byte is compared). A frame of at least [`MAX_HEADER`]
    /// bytes (every data segment) is compared over all words at once, a
    /// loop of fixed length the compiler unrolls into vector compares; the
    /// mask is 0 past the header.
    #[inline(always)]
    fn matches_bytes(&self, f: &[u8]) -> bool {
        if self.mask >= PENDING {
            return false;
        }
        let mask = &MASKS[self.mask as usize];
        let mut diff = 0u64;
        if let Some(h) = f.first_chunk::<MAX_HEADER>() {
            for (i, m) in mask.iter().enumerate() {
                let x = u64::from_ne_bytes(h[8 * i..8 * i + 8].try_into().expect("8 bytes"));
                diff |= (x ^ self.head.word(i)) & m;
            }
            return diff == 0;
        }
        let n = self.nwords as usize;
        let Some(h) = f.get(..n * 8) else {
            return false;
        };
        for (i, (c, m)) in h.chunks_exact(8).zip(mask).enumerate() {
            let x = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
            diff |= (x ^ self.head.word(i)) & m;
        }
        diff == 0
    }
}

/// The longest TCP header (data offset 15).
const TCP_MAX_HEADER_LEN: usize = 60;

/// TCP header lengths: 20 to 60 bytes in steps of 4.
const TCP_LENGTHS: usize = (TCP_MAX_HEADER_LEN - tcp::MIN_HEADER_LEN) / 4 + 1;

/// The index in [`MASKS`] of layout `layout` (0: Ethernet + IPv4, 1:
/// Ethernet + IPv6, 2: raw IPv4, 3: raw IPv6) with a TCP header of
/// `thlen` bytes.
#[inline(always)]
fn mask_index(layout: usize, thlen: usize) -> usize {
    layout * TCP_LENGTHS + (thlen - tcp::MIN_HEADER_LEN) / 4
}

/// The compare masks of the plain layouts (Ethernet or raw IP, IPv4 or
/// IPv6, each TCP header length): 0xff where the held head and the next
/// segment must be equal, 0 in the fields that may differ and past the
/// header.
static MASKS: [[u64; WORDS]; 4 * TCP_LENGTHS] = {
    let mut all = [[0u64; WORDS]; 4 * TCP_LENGTHS];
    let mut layout = 0;
    while layout < 4 {
        let l3 = if layout < 2 { ethernet::HEADER_LEN } else { 0 };
        let mut k = 0;
        while k < TCP_LENGTHS {
            all[layout * TCP_LENGTHS + k] =
                base_mask(l3, layout % 2 == 1, tcp::MIN_HEADER_LEN + 4 * k);
            k += 1;
        }
        layout += 1;
    }
    all
};

const fn base_mask(l3: usize, v6: bool, thlen: usize) -> [u64; WORDS] {
    let mut b = [0xffu8; MAX_HEADER];
    let l4 = if v6 {
        // Payload length.
        b[l3 + 4] = 0;
        b[l3 + 5] = 0;
        l3 + ipv6::HEADER_LEN
    } else {
        // Total length, ID, header checksum.
        let mut i = 2;
        while i < 6 {
            b[l3 + i] = 0;
            i += 1;
        }
        b[l3 + 10] = 0;
        b[l3 + 11] = 0;
        l3 + ipv4::MIN_HEADER_LEN
    };
    // Sequence number, checksum; FIN and PSH may differ.
    let mut i = 4;
    while i < 8 {
        b[l4 + i] = 0;
        i += 1;
    }
    b[l4 + 16] = 0;
    b[l4 + 17] = 0;
    b[l4 + 13] = !(flags::FIN | flags::PSH);
    // Nothing past the header is compared.
    let mut i = l4 + thlen;
    while i < MAX_HEADER {
        b[i] = 0;
        i += 1;
    }
    let mut w = [0u64; WORDS];
    let mut i = 0;
    while i < WORDS {
        let mut x = [0u8; 8];
        let mut j = 0;
        while j < 8 {
            x[j] = b[8 * i + j];
            j += 1;
        }
        w[i] = u64::from_ne_bytes(x);
        i += 1;
    }
    w
}

/// The flow tag of a frame whose transport header is at `l4`: the ports
/// and the last four address bytes before them (the end of the
/// destination address), 8 bytes every template compares.
#[inline(always)]
fn flow_tag(f: &[u8], l4: usize) -> u64 {
    u64::from_ne_bytes(f[l4 - 4..l4 + 4].try_into().expect("8 bytes"))
}

/// The two hint-table indices of flow tag `tag` ([`flow_tag`]): two bytes
/// of a multiplicative hash of it. A flow is hinted under both, so two
/// flows that collide on one index are still told apart by the other.
#[inline(always)]
pub(super) fn hint_of(tag: u64) -> (usize, usize) {
    let h = tag.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((h >> 56) as usize, (h >> 48) as u8 as usize)
}

/// The two hint-table indices of a frame whose transport header is at `l4`.
#[cfg(test)]
pub(super) fn hint_index(f: &[u8], l4: usize) -> (usize, usize) {
    hint_of(flow_tag(f, l4))
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
