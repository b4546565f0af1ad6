//! The header template of a held plain TCP packet: the head's header
//! bytes with a mask of the bytes a sender may change per segment, and
//! the flow tag and hint the table indexes by. The fast path (`fast.rs`)
//! merges a frame whose masked header equals its flow's template; the
//! table (`table.rs`) keeps one template per slot. Kept apart from both so
//! that neither depends on the other's internals.

use super::Held;
use crate::checksum;
use crate::link::LinkKind;
use crate::wire::ethernet;
use crate::wire::tcp::{self, flags};
use crate::wire::{be32, IpVersion};
use crate::wire::{ipv4, ipv6};

/// Longest header the template covers: 14 (Ethernet) + 40 (IPv6) + 60
/// (TCP with 40 option bytes) = 114, rounded to whole words.
pub(super) const MAX_HEADER: usize = 128;
const WORDS: usize = MAX_HEADER / 8;

/// The first [`MAX_HEADER`] bytes of a held head, aligned for word loads.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub(super) struct Head(pub(super) [u8; MAX_HEADER]);

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
    pub(super) head: Head,
    /// Index in [`MASKS`]; [`NO_MASK`] when this slot has no template
    /// (tunnels, VLANs, options, UDP...).
    mask: u8,
    /// Words compared for a frame shorter than [`MAX_HEADER`] (header
    /// length rounded up to 8 bytes).
    nwords: u8,
    /// Header length: link header + IP + TCP with options.
    pub(super) hl: u8,
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
    pub(super) seq: u32,
    /// The head's [`flow_tag`].
    tag: u64,
    /// The size limit of the held packet (`netif_get_gro_max_size`, set
    /// by [`Template::set_limit`]).
    pub(super) limit: u32,
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
    pub(super) fn hints_first_at(&self, k: usize) -> bool {
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
    fn build(&mut self, p: &Held) {
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
    pub(super) fn build_and_match(&mut self, p: &Held, f: &[u8], link: LinkKind, tag: u64) -> bool {
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
    pub(super) fn sums(&mut self) -> (u64, u64) {
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
pub(super) fn flow_tag(f: &[u8], l4: usize) -> u64 {
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
