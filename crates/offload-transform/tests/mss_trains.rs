//! Property tests of MSS inference on GRO trains made the way the kernel
//! makes them: a sender cuts each write into segments of the MSS, the last
//! one short and pushed (`tcp_push`, net/ipv4/tcp.c) unless the next write
//! fills it first, and pushes a full segment every so often mid-write
//! (`forced_push`); the receiver's GRO merges full segments until a short
//! or pushed one ends the packet, the next would reach the size limit
//! (`skb_gro_receive`, net/core/gro.c: 64 KiB, or `gro_max_size` with BIG
//! TCP) or the NAPI poll ends (`tcp_gro_receive`, net/ipv4/tcp_offload.c,
//! 6.1 to 6.18). The inferred MSS must be the true one, or cut the packets
//! into at most 2% more frames than the wire held. Half the flows write
//! one power of two at a time.

use offload_transform::mss::FlowEvidence;
use proptest::prelude::*;
use std::collections::HashSet;

/// One packet as the receiver's capture holds it.
#[derive(Debug, Clone)]
struct Packet {
    seq: u64,
    len: u32,
    push: bool,
    id: u16,
}

/// The shape of one generated flow.
#[derive(Debug, Clone)]
struct Train {
    mss: u32,
    option_len: u32,
    ipv6: bool,
    gro_limit: u32,
    writes: Vec<(u32, bool)>,
    forced_push_every: u32,
    napi_flush: Vec<bool>,
}

impl Train {
    fn headers(&self) -> u32 {
        (if self.ipv6 { 40 } else { 20 }) + 20 + self.option_len
    }

    /// The wire's segments: (seq, len, push).
    fn wire(&self) -> Vec<(u64, u32, bool)> {
        let mut out = Vec::new();
        let mut seq = 0u64;
        let mut pending = 0u64; // bytes written, not yet sent
        let mut since_push = 0;
        for (i, &(size, flush_tail)) in self.writes.iter().enumerate() {
            pending += u64::from(size);
            while pending >= u64::from(self.mss) {
                since_push += 1;
                let push = since_push >= self.forced_push_every;
                if push {
                    since_push = 0;
                }
                out.push((seq, self.mss, push));
                seq += u64::from(self.mss);
                pending -= u64::from(self.mss);
            }
            let last = i + 1 == self.writes.len();
            if pending > 0 && (flush_tail || last) {
                out.push((seq, pending as u32, true));
                seq += pending;
                pending = 0;
                since_push = 0;
            }
        }
        out
    }

    /// What GRO makes of the wire.
    fn gro(&self, wire: &[(u64, u32, bool)]) -> Vec<Packet> {
        let mut out: Vec<Packet> = Vec::new();
        let mut open = false;
        let hdr = self.headers();
        for (i, &(seq, len, push)) in wire.iter().enumerate() {
            let id = i as u16;
            let merge = open && {
                let p = out.last().unwrap();
                hdr + p.len + len < self.gro_limit
            };
            if merge {
                let p = out.last_mut().unwrap();
                p.len += len;
                p.push |= push;
            } else {
                out.push(Packet { seq, len, push, id });
            }
            let flush = self.napi_flush[i % self.napi_flush.len()];
            open = !(push || len < self.mss || flush);
        }
        out
    }
}

fn train() -> impl Strategy<Value = Train> {
    (
        536u32..=9000,
        prop::bool::ANY,
        prop::bool::ANY,
        prop::bool::ANY,
        prop::collection::vec((1u32..400_000, prop::bool::weighted(0.7)), 3..40),
        1u32..80,
        prop::collection::vec(prop::bool::weighted(0.05), 1..200),
        prop::option::weighted(0.5, 12u32..=18),
    )
        .prop_map(
            |(mss_option, timestamps, ipv6, big, writes, forced_push_every, napi_flush, pow2)| {
                let option_len = if timestamps { 12 } else { 0 };
                // Half the flows write one power of two at a time (4 KiB
                // to 256 KiB, as buffered writers do): their tails then
                // share the MSS's power-of-two factor, and a divisor of
                // the MSS makes many of them whole (96 of 8928 one in
                // three with 256 KiB writes).
                let writes = match pow2 {
                    Some(k) => writes.into_iter().map(|(_, f)| (1 << k, f)).collect(),
                    None => writes,
                };
                Train {
                    mss: mss_option - option_len,
                    option_len,
                    ipv6,
                    gro_limit: if big { 185_000 } else { 65_536 },
                    writes,
                    forced_push_every,
                    napi_flush,
                }
            },
        )
}

/// The MTU `offload gso` assumes without `--mtu`: packets no longer are
/// written unchanged.
const MTU: u32 = 1500;

/// Frames that cutting `packets` above the MTU at `mss` makes and the wire
/// did not hold.
fn extra_frames(t: &Train, packets: &[Packet], wire: &[(u64, u32, bool)], mss: u32) -> usize {
    let truth: HashSet<(u64, u32)> = wire.iter().map(|&(s, l, _)| (s, l)).collect();
    let mut extra = 0;
    for p in packets {
        let cut = if t.headers() + p.len > MTU {
            mss
        } else {
            p.len
        };
        let mut off = 0;
        while off < p.len {
            let len = cut.min(p.len - off);
            if !truth.contains(&(p.seq + u64::from(off), len)) {
                extra += 1;
            }
            off += len;
        }
    }
    extra
}

/// The evidence `offload gso` gathers from the receiver's capture.
fn evidence(t: &Train, packets: &[Packet]) -> FlowEvidence {
    let mut f = FlowEvidence::default();
    let hdr = t.headers();
    f.note_mtu_payload(MTU - hdr);
    for p in packets {
        let id = (!t.ipv6).then_some(p.id);
        f.note_data(p.len, hdr + p.len > MTU, t.option_len, id);
        if p.push {
            f.note_pushed(p.len);
        } else {
            f.note_unpushed(p.len);
        }
    }
    f
}

/// Whether segments of `m` bytes explain the packets above the MTU by
/// the kernel's rules: a packet without PSH holds whole segments
/// (`tcp_gro_receive` ends a packet at a short or pushed segment), but for
/// one in 20, or one that is no whole fraction of `m` either (a segment
/// the window cut short goes out without PSH, `tcp_mss_split_point` in
/// net/ipv4/tcp_output.c: inference tolerates that many), and an IPv4 packet holds as many segments as the ID
/// advanced to the next one (`inet_gro_receive`, net/ipv4/af_inet.c,
/// merges only consecutive IDs).
fn explains(t: &Train, packets: &[Packet], m: u32) -> bool {
    let cut: Vec<(usize, &Packet)> = packets
        .iter()
        .enumerate()
        .filter(|(_, p)| t.headers() + p.len > MTU)
        .collect();
    let unpushed = cut.iter().filter(|(_, p)| !p.push).count();
    let broken: Vec<u32> = cut
        .iter()
        .filter(|(_, p)| !p.push && p.len % m != 0)
        .map(|(_, p)| p.len)
        .collect();
    let stray = matches!(broken.as_slice(), [one] if !m.is_multiple_of(*one));
    let ids = t.ipv6
        || cut.iter().all(|&(i, p)| {
            packets
                .get(i + 1)
                .is_none_or(|n| u32::from(n.id.wrapping_sub(p.id)) == p.len.div_ceil(m))
        });
    (20 * broken.len() <= unpushed || stray) && ids
}

/// Sizes from 88 bytes to a 9216-byte jumbo segment (what inference
/// believes) that explain the train and are larger than `m`.
fn larger_explanations(t: &Train, packets: &[Packet], m: u32) -> Vec<u32> {
    (m + 1..=9176)
        .filter(|&c| explains(t, packets, c))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The inferred MSS always explains the train; when no larger size
    /// does (the lengths, PSH flags and IDs identify it), it is the true
    /// one or cuts at most 2% extra frames.
    #[test]
    fn inferred_mss_reproduces_the_wire(t in train()) {
        let wire = t.wire();
        let packets = t.gro(&wire);
        // A flow long enough to say something: 100 segments on the wire,
        // 10 packets of several above the MTU (gso cuts only those).
        let cut = packets
            .iter()
            .filter(|p| p.len > t.mss && t.headers() + p.len > MTU)
            .count();
        prop_assume!(wire.len() >= 100 && cut >= 10);
        let f = evidence(&t, &packets);
        let mtu_fallback = MTU - t.headers();
        let identified = larger_explanations(&t, &packets, t.mss).is_empty();
        for syn in [None, Some(t.mss + t.option_len)] {
            let got = f.infer(syn);
            let mss = got.map_or(mtu_fallback, |(m, _)| m);
            let extra = extra_frames(&t, &packets, &wire, mss);
            let lengths: Vec<(u32, bool)> = packets.iter().map(|p| (p.len, p.push)).collect();
            if got.is_some() {
                prop_assert!(
                    explains(&t, &packets, mss) || extra * 50 <= wire.len(),
                    "true MSS {} inferred {:?} (SYN {:?}) explains not the packets {:?}",
                    t.mss, got, syn, lengths
                );
            }
            if identified || syn.is_some() {
                prop_assert!(
                    mss == t.mss || extra * 50 <= wire.len(),
                    "true MSS {} inferred {:?} (SYN {:?}): {} extra frames for {} on the wire; \
                     packets {:?}",
                    t.mss, got, syn, extra, wire.len(), lengths
                );
            }
        }
    }
}
