//! IPv4 and IPv6 fragments put back together for the flow statistics and
//! the TCP analysis, as tshark reassembles them (`ip.defragment` and
//! `ipv6.defragment`, both on by default): the datagram counts once, in
//! the frame whose fragment completed it, with that frame's time and
//! length; a fragment held for a datagram that never completes counts in
//! no flow (tshark shows it as IP without TCP). The GRO what-if is not
//! fed from here: it gets every fragment as captured, and passes each up
//! unmerged as the kernel does (`inet_gro_receive`, net/ipv4/af_inet.c:
//! the MF and offset bits fall in the word whose difference flushes;
//! `ipv6_gro_receive`, net/ipv6/ip6_offload.c: no offload is registered
//! for NEXTHDR_FRAGMENT). Decision 0251.
//!
//! Bounded like the kernel's own reassembly (net/ipv4/inet_fragment.c):
//! at most [`MAX_DATAGRAMS`] datagrams and [`MAX_BYTES`] fragment bytes
//! held, each for at most [`TIMEOUT_NS`] of capture time (Linux's
//! `ipfrag_time` default). Past a bound the oldest datagram is given up
//! and counted (`FragCounts::given_up`); a fragment the capture cut short
//! cannot be reassembled and is counted too.
//!
//! The key is the one RFC 791 and RFC 8200 define: addresses, protocol
//! (IPv4) and identification. A datagram is whole when its fragments
//! cover 0 to the end the last fragment names without a hole; an
//! overlapping fragment's bytes are written over the earlier ones.

use crate::dissect::IpFields;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Datagrams held at once.
pub const MAX_DATAGRAMS: usize = 4096;
/// Fragment payload bytes held at once.
pub const MAX_BYTES: usize = 16 << 20;
/// How long (capture time) a datagram waits for its fragments.
pub const TIMEOUT_NS: u64 = 30_000_000_000;

/// IPv6's Fragment header (RFC 8200 4.5).
const NEXTHDR_FRAGMENT: u8 = 44;

/// What reassembly did in one input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FragCounts {
    /// Frames that were fragments.
    pub fragments: u64,
    /// Datagrams put back together (each counts once in its flow).
    pub reassembled: u64,
    /// Datagrams given up: incomplete at the end of the file, past
    /// `TIMEOUT_NS`, or evicted past `MAX_DATAGRAMS`/`MAX_BYTES`.
    pub given_up: u64,
    /// Fragment frames of the datagrams given up.
    pub given_up_fragments: u64,
    /// Fragments the capture cut short (no reassembly possible).
    pub cut_fragments: u64,
    /// A snapshot length that keeps every one of those fragments whole
    /// (reassembly needs their payload, not just their headers): a
    /// header-only capture of fragmented traffic loses what the
    /// reassembled packets would show; null when none was cut.
    pub snaplen_needed_for_fragments: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    id: u32,
    proto: u8,
}

#[derive(Debug)]
struct Datagram {
    first_ns: u64,
    /// The IP header for the datagram: IPv4's first-fragment header, or a
    /// 40-byte IPv6 header; empty until the first fragment arrives.
    header: Vec<u8>,
    /// The upper-layer protocol (IPv6: the Fragment header's next header).
    proto: u8,
    /// The fragmentable part, as far as known.
    data: Vec<u8>,
    /// Byte ranges received, in arrival order.
    have: Vec<(u32, u32)>,
    /// The end of the datagram, once the last fragment (MF clear) came.
    end: Option<u32>,
    frames: u64,
}

/// A fragment read from a frame.
struct Fragment<'a> {
    key: Key,
    offset: u32,
    more: bool,
    /// The upper-layer protocol (IPv6: next header after the Fragment header).
    proto: u8,
    payload: &'a [u8],
    /// IPv4's header (with options), for the datagram's header.
    v4_header: &'a [u8],
}

/// Reassembly state of one input.
#[derive(Debug, Default)]
pub struct Reassembly {
    held: FxHashMap<Key, Datagram>,
    bytes: usize,
    /// No datagram held expires before this time (0: look).
    next_expiry: u64,
    pub counts: FragCounts,
}

/// What became of a frame.
#[derive(Debug)]
pub enum Outcome {
    /// Not a fragment: analyse the frame as it is.
    Whole,
    /// A fragment, held (or given up): nothing to analyse yet.
    Held,
    /// The fragment completed a datagram: the IP packet to analyse.
    Complete(Vec<u8>),
    /// An IPv4 first fragment whose bytes the capture does not hold
    /// whole (cut by the snap length, or a total length beyond the
    /// packet): never reassembled, so its transport header is read from
    /// the fragment as it is, as tshark does (packet-ip.c adds a fragment
    /// to reassembly only when `tvb_bytes_exist` for its whole payload,
    /// and dissects a first fragment it did not add as the transport).
    FirstUnheld,
}

/// True when `ip` (as `dissect` read it from `frame`) is a fragment.
#[inline]
pub fn is_fragment(frame: &[u8], ip: &IpFields) -> bool {
    if ip.v6 {
        ip.proto == NEXTHDR_FRAGMENT
    } else {
        frame
            .get(ip.off + 6..ip.off + 8)
            .is_some_and(|w| u16::from_be_bytes([w[0], w[1]]) & 0x3fff != 0)
    }
}

/// An IPv4 fragment at offset 0 (MF set).
fn first_v4_fragment(frame: &[u8], ip: &IpFields) -> bool {
    !ip.v6
        && frame
            .get(ip.off + 6..ip.off + 8)
            .is_some_and(|w| u16::from_be_bytes([w[0], w[1]]) & 0x1fff == 0)
}

/// An IPv4 total length beyond the bytes captured from the header on:
/// `dissect` cut `ip_len` to the packet ("IPv4 total length exceeds
/// packet length"), so the field is read again.
fn beyond_capture(frame: &[u8], ip: &IpFields) -> bool {
    !ip.v6
        && frame
            .get(ip.off + 2..ip.off + 4)
            .is_some_and(|w| ip.off + u16::from_be_bytes([w[0], w[1]]) as usize > frame.len())
}

fn read<'a>(frame: &'a [u8], ip: &IpFields) -> Option<Fragment<'a>> {
    let end = (ip.off + ip.ip_len as usize).min(frame.len());
    let mut key = Key {
        v6: ip.v6,
        src: ip.src,
        dst: ip.dst,
        id: 0,
        proto: 0,
    };
    if ip.v6 {
        let at = ip.off + ip.hdr_len;
        let h = frame.get(at..at + 8)?;
        let word = u16::from_be_bytes([h[2], h[3]]);
        key.id = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        Some(Fragment {
            key,
            offset: (word & 0xfff8) as u32,
            more: word & 1 != 0,
            proto: h[0],
            payload: frame.get(at + 8..end)?,
            v4_header: &[],
        })
    } else {
        let h = frame.get(ip.off..ip.off + ip.hdr_len)?;
        let word = u16::from_be_bytes([h[6], h[7]]);
        key.id = u16::from_be_bytes([h[4], h[5]]) as u32;
        key.proto = h[9];
        Some(Fragment {
            key,
            offset: (word & 0x1fff) as u32 * 8,
            more: word & 0x2000 != 0,
            proto: h[9],
            payload: frame.get(ip.off + ip.hdr_len..end)?,
            v4_header: h,
        })
    }
}

impl Reassembly {
    /// Takes the frame whose IP header `dissect` read as `ip`; `whole`
    /// says the capture kept the whole packet, `ts` is its time.
    pub fn push(&mut self, frame: &[u8], ip: &IpFields, whole: bool, ts: u64) -> Outcome {
        if !is_fragment(frame, ip) {
            return Outcome::Whole;
        }
        self.counts.fragments += 1;
        self.expire(ts);
        let Some(f) = read(frame, ip).filter(|_| whole && !beyond_capture(frame, ip)) else {
            self.counts.cut_fragments += 1;
            if !whole {
                // The fragment's end on the wire (its length field is cut
                // to the wire length by `dissect`).
                let end = (ip.off as u64 + ip.ip_len as u64).min(u32::MAX as u64) as u32;
                self.counts.snaplen_needed_for_fragments = Some(
                    self.counts
                        .snaplen_needed_for_fragments
                        .unwrap_or(0)
                        .max(end),
                );
            }
            return if first_v4_fragment(frame, ip) {
                Outcome::FirstUnheld
            } else {
                Outcome::Held
            };
        };
        let end = f.offset + f.payload.len() as u32;
        if end > 65_535 {
            // Past what a datagram can hold (the kernel's "oversized IP
            // packet"): given up at once.
            self.counts.given_up += 1;
            self.counts.given_up_fragments += 1;
            return Outcome::Held;
        }
        if self.held.is_empty() {
            self.next_expiry = ts.saturating_add(TIMEOUT_NS);
        }
        let d = self.held.entry(f.key).or_insert_with(|| Datagram {
            first_ns: ts,
            header: Vec::new(),
            proto: f.proto,
            data: Vec::new(),
            have: Vec::new(),
            end: None,
            frames: 0,
        });
        d.frames += 1;
        if d.data.len() < end as usize {
            self.bytes += end as usize - d.data.len();
            d.data.resize(end as usize, 0);
        }
        d.data[f.offset as usize..end as usize].copy_from_slice(f.payload);
        d.have.push((f.offset, end));
        if !f.more {
            d.end = Some(end);
        }
        if f.offset == 0 {
            d.proto = f.proto;
            d.header = if ip.v6 {
                frame[ip.off..ip.off + 40].to_vec()
            } else {
                f.v4_header.to_vec()
            };
        }
        let done = d
            .end
            .is_some_and(|e| !d.header.is_empty() && covered(&mut d.have, e));
        if done {
            let d = self.held.remove(&f.key).expect("held above");
            self.bytes -= d.data.len();
            self.counts.reassembled += 1;
            return Outcome::Complete(build(d, ip.v6));
        }
        while self.held.len() > MAX_DATAGRAMS || self.bytes > MAX_BYTES {
            self.give_up_oldest();
        }
        Outcome::Held
    }

    /// Gives up datagrams older than the timeout at time `now`.
    fn expire(&mut self, now: u64) {
        if self.held.is_empty() || now <= self.next_expiry {
            return;
        }
        let old: Vec<Key> = self
            .held
            .iter()
            .filter(|(_, d)| now.saturating_sub(d.first_ns) > TIMEOUT_NS)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            self.give_up(k);
        }
        // One look per timeout period, not per fragment.
        self.next_expiry = self
            .held
            .values()
            .map(|d| d.first_ns.saturating_add(TIMEOUT_NS))
            .min()
            .unwrap_or(0);
    }

    fn give_up_oldest(&mut self) {
        if let Some(k) = self
            .held
            .iter()
            .min_by_key(|(_, d)| d.first_ns)
            .map(|(k, _)| *k)
        {
            self.give_up(k);
        }
    }

    fn give_up(&mut self, k: Key) {
        if let Some(d) = self.held.remove(&k) {
            self.bytes -= d.data.len();
            self.counts.given_up += 1;
            self.counts.given_up_fragments += d.frames;
        }
    }

    /// The end of the input: what is still held is given up.
    pub fn finish(&mut self) {
        let keys: Vec<Key> = self.held.keys().copied().collect();
        for k in keys {
            self.give_up(k);
        }
    }
}

/// True when the ranges cover `0..end` without a hole (sorts them).
fn covered(have: &mut [(u32, u32)], end: u32) -> bool {
    have.sort_unstable();
    let mut reach = 0;
    for &(a, b) in have.iter() {
        if a > reach {
            return false;
        }
        reach = reach.max(b);
    }
    reach >= end
}

/// The reassembled IP packet: the header with the length set and the
/// fragment fields cleared (IPv4) or the Fragment header's next header in
/// a plain 40-byte IPv6 header, then the data. IPv4's header checksum is
/// redone so the packet reads as a valid one.
fn build(d: Datagram, v6: bool) -> Vec<u8> {
    let mut p = d.header;
    let end = d.end.unwrap_or(d.data.len() as u32) as usize;
    if v6 {
        p[4..6].copy_from_slice(&(end as u16).to_be_bytes());
        p[6] = d.proto;
    } else {
        let total = (p.len() + end).min(65_535) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[6] &= 0x40; // keep DF, clear MF and the offset
        p[7] = 0;
        p[10] = 0;
        p[11] = 0;
        let c = offload::checksum::checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
    p.extend_from_slice(&d.data[..end]);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dissect::{parse, PROTO_TCP};
    use offload::LinkKind;

    /// An IPv4 fragment of `data` at `offset` (bytes, a multiple of 8).
    fn frag4(id: u16, offset: usize, more: bool, data: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p[2..4].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
        p[4..6].copy_from_slice(&id.to_be_bytes());
        let word = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
        p[6..8].copy_from_slice(&word.to_be_bytes());
        p.extend_from_slice(data);
        p
    }

    fn push(r: &mut Reassembly, p: &[u8], ts: u64) -> Option<Vec<u8>> {
        let ip = parse(LinkKind::Ipv4, p, p.len() as u32, &[]).unwrap().ip;
        match r.push(p, &ip, true, ts) {
            Outcome::Complete(v) => Some(v),
            _ => None,
        }
    }

    /// A TCP SYN in three 8-byte fragments (Suricata's
    /// tests/defrag/bug-6887-*): the first holds only 8 bytes of the TCP
    /// header, so it has no transport header to read; it must still go to
    /// reassembly (it was "truncated transport header" and the datagram
    /// was given up), as tshark reassembles it.
    #[test]
    fn a_first_fragment_shorter_than_its_tcp_header_is_reassembled() {
        let mut syn = vec![
            0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff,
        ];
        syn.extend_from_slice(&[0, 0, 0, 0, 2, 4, 5, 0xb4]);
        let mut r = Reassembly::default();
        let mut done = None;
        for (i, part) in syn.chunks(8).enumerate() {
            let mut f = frag4(7, i * 8, i < 2, part);
            f[9] = PROTO_TCP;
            let parsed = parse(LinkKind::Ipv4, &f, f.len() as u32, &[]);
            assert!(parsed.is_some(), "fragment {i} not parsed");
            done = push(&mut r, &f, i as u64).or(done);
        }
        let whole = done.expect("reassembled");
        let p = parse(LinkKind::Ipv4, &whole, whole.len() as u32, &[]).unwrap();
        assert_eq!((p.sport, p.dport, p.ip.proto), (12345, 80, PROTO_TCP));
        assert_eq!(r.counts.given_up, 0);
    }

    #[test]
    fn a_first_fragment_the_capture_does_not_hold_whole_is_read_as_it_is() {
        let udp = [0x30, 0x39, 0x00, 0x35, 0, 48, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let first = frag4(9, 0, true, &udp);
        let ip = |p: &[u8]| parse(LinkKind::Ipv4, p, 100, &[]).unwrap().ip;
        let mut r = Reassembly::default();
        // Cut by the snap length: the first fragment is analysed as it is,
        // a later one is not.
        assert!(matches!(
            r.push(&first[..30], &ip(&first[..30]), false, 1),
            Outcome::FirstUnheld
        ));
        let later = frag4(9, 16, false, &udp);
        assert!(matches!(
            r.push(&later[..30], &ip(&later[..30]), false, 2),
            Outcome::Held
        ));
        // A total length beyond the packet (the capture kept all of it).
        let mut lying = first.clone();
        lying[2..4].copy_from_slice(&60u16.to_be_bytes());
        assert!(matches!(
            r.push(&lying, &ip(&lying), true, 3),
            Outcome::FirstUnheld
        ));
        assert_eq!(r.counts.cut_fragments, 3);
        // Only the two the capture cut name a snapshot length: 36 bytes
        // keep both whole (the lying length is no capture's doing).
        assert_eq!(r.counts.snaplen_needed_for_fragments, Some(36));
        assert!(r.held.is_empty());
        // Whole, it is held for its datagram.
        assert!(matches!(
            r.push(&first, &ip(&first), true, 4),
            Outcome::Held
        ));
    }

    #[test]
    fn out_of_order_fragments_make_the_datagram_once() {
        // UDP header (length 8 + 40) and 40 bytes, in three fragments.
        let mut udp = vec![0x30, 0x39, 0x00, 0x35, 0, 48, 0, 0];
        udp.extend((0..40).map(|i| i as u8));
        let mut r = Reassembly::default();
        assert!(push(&mut r, &frag4(7, 40, false, &udp[40..]), 1).is_none());
        assert!(push(&mut r, &frag4(7, 0, true, &udp[..16]), 2).is_none());
        let whole = push(&mut r, &frag4(7, 16, true, &udp[16..40]), 3).expect("complete");
        let p = parse(LinkKind::Ipv4, &whole, whole.len() as u32, &[]).unwrap();
        assert_eq!((p.sport, p.dport, p.payload), (12345, 53, 40));
        assert_eq!(&whole[20..], &udp[..]);
        assert_eq!(
            (r.counts.fragments, r.counts.reassembled, r.held.len()),
            (3, 1, 0)
        );
        // The header checksum is valid.
        assert_eq!(
            offload::checksum::fold(offload::checksum::sum_bytes(0, &whole[..20])),
            0xffff
        );
    }

    proptest::proptest! {
        /// A datagram cut into fragments at any 8-byte boundaries, sent in
        /// any order with some sent twice, comes back byte for byte, once.
        #[test]
        fn any_fragmentation_in_any_order_reassembles_once(
            len in 9usize..3000,
            cuts in proptest::collection::vec(1usize..375, 0..12),
            order in proptest::collection::vec(proptest::prelude::any::<u32>(), 12),
            dup in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut at: Vec<usize> = cuts.iter().map(|c| c * 8).filter(|&c| c < len).collect();
            // At least two fragments (one alone is no fragment).
            at.extend([0, 8]);
            at.sort_unstable();
            at.dedup();
            let mut frags: Vec<Vec<u8>> = at
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let b = at.get(i + 1).copied().unwrap_or(len);
                    frag4(9, a, b < len, &data[a..b])
                })
                .collect();
            let d = frags[dup.index(frags.len())].clone();
            frags.push(d);
            let n = frags.len();
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by_key(|&i| order[i % order.len()].wrapping_mul(i as u32 + 1));
            let mut r = Reassembly::default();
            let mut out = Vec::new();
            for i in idx {
                if let Some(p) = push(&mut r, &frags[i], 1) {
                    out.push(p);
                }
            }
            // The duplicate may come after completion: a new datagram,
            // held, given up at the end.
            proptest::prop_assert_eq!(out.len(), 1);
            proptest::prop_assert_eq!(&out[0][20..], &data[..]);
            r.finish();
            proptest::prop_assert_eq!(r.counts.reassembled, 1);
            proptest::prop_assert_eq!(r.counts.fragments, n as u64);
        }
    }

    #[test]
    fn bounds_give_up_the_oldest() {
        let mut r = Reassembly::default();
        for id in 0..(MAX_DATAGRAMS as u16 + 10) {
            push(&mut r, &frag4(id, 0, true, &[0; 8]), 1);
        }
        assert_eq!(r.held.len(), MAX_DATAGRAMS);
        assert_eq!(r.counts.given_up, 10);
        // Past the timeout, everything held is given up.
        push(&mut r, &frag4(60000, 0, true, &[0; 8]), 2 + TIMEOUT_NS);
        assert_eq!(r.held.len(), 1);
        r.finish();
        assert_eq!(r.counts.given_up, MAX_DATAGRAMS as u64 + 11);
        assert_eq!(r.bytes, 0);
    }
}
