//! The GRO table: at most [`MAX_GRO_SKBS`] held packets, laid out for the
//! cache (the way Linux 6.8 regrouped `struct net_device` and
//! `napi_struct` fields by use).
//!
//! Every frame is compared with every held packet, so what that comparison
//! reads sits together in one 64-byte line ([`Hot`]): the flow hash of each
//! slot (a frame whose hash differs is rejected with one `u32` compare, as
//! `gro_list_prepare` rejects by `skb_get_hash_raw` first), the age order
//! and the occupancy. Everything else about a held packet ([`Held`]: its
//! buffer, offsets, counters, frame numbers and timestamps) is read only
//! for the one slot whose hash matched, and lives apart in slots that never
//! move: completing the oldest packet or one in the middle shifts at most
//! seven order bytes, never a packet.
//!
//! Beside the slots sit the fast path's per-slot header templates and a
//! 256-byte hint table from a flow's ports to its slot (`fast.rs`,
//! decision 0076): a bulk flow's next segment finds its slot and is
//! checked against its head without hashing the flow or touching the other
//! slots.

use super::template::Template;
use super::{Held, MAX_GRO_SKBS};

/// The per-frame line: slot hashes, age order, occupancy.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub(super) struct Hot {
    /// Flow hash of each occupied slot, [`FREE`] for the others.
    hashes: [u32; MAX_GRO_SKBS],
    /// Occupied slots, oldest first (`order[..len]`).
    order: [u8; MAX_GRO_SKBS],
    /// Number of held packets.
    len: u8,
    /// Bit `i` set when slot `i` is occupied.
    used: u8,
}

const _: () = {
    assert!(core::mem::size_of::<Hot>() == 64);
    assert!(core::mem::offset_of!(Hot, hashes) == 0);
    assert!(core::mem::offset_of!(Hot, order) == 32);
    assert!(core::mem::offset_of!(Hot, len) == 40);
    assert!(core::mem::offset_of!(Hot, used) == 41);
    assert!(MAX_GRO_SKBS <= 8, "occupancy is a u8 bitmap");
};

/// Held packets in fixed slots, with their hot line.
#[derive(Debug)]
pub(super) struct Table {
    hot: Hot,
    /// Each slot's packet; valid while the slot's `used` bit is set.
    slots: [Held; MAX_GRO_SKBS],
    /// The fast path's header template of each slot (`fast.rs`); kept
    /// apart from `slots` so that holding and completing never move it.
    templates: [Template; MAX_GRO_SKBS],
    /// Which slot a flow used last, indexed by a hash of its ports and
    /// the end of its addresses ([`super::template::hint_index`]): a hint
    /// only, checked against the slot's template before use, so a stale
    /// or colliding entry costs a lookup, never a wrong answer.
    hints: [u8; HINTS],
}

/// The hash of a free slot in [`Hot::hashes`]: [`held_hash`] never
/// gives it.
const FREE: u32 = 0;

/// A flow hash as the table keeps it: never [`FREE`] (the lowest bit is
/// set), so that free slots need no occupancy test.
#[inline(always)]
pub(super) fn held_hash(h: u32) -> u32 {
    h | 1
}

/// Entries of the fast path's flow-to-slot hint table (one byte each).
pub(super) const HINTS: usize = 256;

/// A slot number.
pub(super) type Slot = usize;

impl Table {
    pub(super) fn new() -> Self {
        Table {
            hot: Hot {
                hashes: [FREE; MAX_GRO_SKBS],
                order: [0; MAX_GRO_SKBS],
                len: 0,
                used: 0,
            },
            slots: Default::default(),
            templates: [Template::NONE; MAX_GRO_SKBS],
            hints: [0; HINTS],
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.hot.len as usize
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.hot.len == 0
    }

    /// The first held packet, oldest first, whose hash is `hash` and for
    /// which `same` holds.
    #[inline]
    pub(super) fn find(&self, hash: u32, mut same: impl FnMut(&Held) -> bool) -> Option<Slot> {
        let hot = &self.hot;
        for &s in &hot.order[..hot.len as usize] {
            let s = s as usize;
            if hot.hashes[s] == hash && same(&self.slots[s]) {
                return Some(s);
            }
        }
        None
    }

    /// True when a held packet has flow hash `hash` (a hash made by
    /// [`held_hash`]).
    #[inline]
    pub(super) fn holds_hash(&self, hash: u32) -> bool {
        debug_assert!(hash != FREE);
        // All eight hashes at once (two vector compares): a free slot's
        // hash is `FREE`, which no held hash equals.
        self.hot
            .hashes
            .iter()
            .fold(false, |any, &h| any | (h == hash))
    }

    /// The slot hinted for hint index `k`, if occupied.
    #[inline(always)]
    pub(super) fn hinted(&self, k: usize) -> Option<Slot> {
        let s = self.hints[k % HINTS] as Slot;
        (self.hot.used & (1 << s) != 0).then_some(s)
    }

    /// Hints slot `s` under both hint indices `k`.
    #[inline(always)]
    pub(super) fn hint(&mut self, k: (usize, usize), s: Slot) {
        self.hints[k.0 % HINTS] = s as u8;
        self.hints[k.1 % HINTS] = s as u8;
    }

    /// Hints slot `s` under index `k` only.
    #[inline(always)]
    pub(super) fn set_hint(&mut self, k: usize, s: Slot) {
        self.hints[k % HINTS] = s as u8;
    }

    /// [`Template::build_and_match`] for occupied slot `s`, building its template
    /// first if it is pending and the frame's flow tag and link are the
    /// head's.
    #[inline(always)]
    pub(super) fn matches(&mut self, s: Slot, f: &[u8], link: crate::LinkKind, tag: u64) -> bool {
        self.templates[s].build_and_match(&self.slots[s], f, link, tag)
    }

    /// The fast-path template of an occupied slot.
    #[inline(always)]
    pub(super) fn template(&self, s: Slot) -> &Template {
        &self.templates[s]
    }

    /// The fast-path template of an occupied slot, to fill.
    #[inline]
    pub(super) fn template_mut(&mut self, s: Slot) -> &mut Template {
        &mut self.templates[s]
    }

    #[inline]
    pub(super) fn get_mut(&mut self, s: Slot) -> &mut Held {
        debug_assert!(self.hot.used & (1 << s) != 0, "occupied slot");
        &mut self.slots[s]
    }

    #[inline]
    pub(super) fn get(&self, s: Slot) -> &Held {
        debug_assert!(self.hot.used & (1 << s) != 0, "occupied slot");
        &self.slots[s]
    }

    /// Takes held packet `s` out of the order and returns it: its slot
    /// keeps the packet (to complete and deliver in place) until the next
    /// [`Self::alloc`]. [`Self::get_mut`] refuses it from here on, since
    /// the slot is free.
    #[inline]
    pub(super) fn unlink(&mut self, s: Slot) -> &mut Held {
        debug_assert!(self.hot.used & (1 << s) != 0, "occupied slot");
        self.unlink_order(s);
        &mut self.slots[s]
    }

    #[inline(always)]
    fn unlink_order(&mut self, s: Slot) {
        let hot = &mut self.hot;
        hot.hashes[s] = FREE;
        hot.len -= 1;
        hot.used &= !(1 << s);
        if hot.order[0] as usize == s {
            // The oldest (a full table's eviction, a flush): the others
            // move down one byte.
            hot.order = (u64::from_le_bytes(hot.order) >> 8).to_le_bytes();
            return;
        }
        let len = hot.len as usize + 1;
        // The order is at most eight bytes: as one word, the slot's byte
        // found by a compare and the younger bytes shifted down over it.
        let order = u64::from_le_bytes(hot.order);
        let mut at = MAX_GRO_SKBS;
        for (i, &o) in hot.order[..len].iter().enumerate() {
            if o as usize == s {
                at = i;
                break;
            }
        }
        assert!(at < len, "slot in the order");
        let below = if at == 0 {
            0
        } else {
            order & (u64::MAX >> (64 - 8 * at))
        };
        let above = (order >> 8) & (u64::MAX << (8 * at));
        hot.order = (below | above).to_le_bytes();
    }

    /// The held packets, oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Held> + '_ {
        self.hot.order[..self.hot.len as usize]
            .iter()
            .map(|&s| &self.slots[s as usize])
    }

    /// The occupied slots, oldest first.
    pub(super) fn occupied(&self) -> impl Iterator<Item = Slot> + '_ {
        self.hot.order[..self.hot.len as usize]
            .iter()
            .map(|&s| s as Slot)
    }

    /// Makes this table hold what `o` holds, slot for slot, with `o`'s
    /// templates and hints ([`super::GroEngine::catch_up`]). Free slots
    /// keep their buffers.
    pub(super) fn copy_from(&mut self, o: &Table) {
        self.hot = o.hot;
        for s in o.occupied() {
            self.slots[s].copy_from(&o.slots[s]);
        }
        self.templates = o.templates;
        self.hints = o.hints;
    }

    /// The oldest held packet's slot.
    #[inline]
    pub(super) fn oldest(&self) -> Option<Slot> {
        (!self.is_empty()).then_some(self.hot.order[0] as Slot)
    }

    /// Takes a free slot for a packet held as the youngest, with flow
    /// hash `hash`; the table must have room. The caller fills the slot's
    /// [`Held`] in place (its buffer is the one the slot's last packet
    /// used: buffers never move between slots) and its template.
    #[inline(always)]
    pub(super) fn alloc(&mut self, hash: u32) -> Slot {
        debug_assert!(hash != FREE);
        let hot = &mut self.hot;
        let s = (!hot.used).trailing_zeros() as usize;
        debug_assert!(s < MAX_GRO_SKBS && (hot.len as usize) < MAX_GRO_SKBS);
        hot.hashes[s] = hash;
        hot.order[hot.len as usize] = s as u8;
        hot.len += 1;
        hot.used |= 1 << s;
        self.templates[s].clear();
        s
    }
}
