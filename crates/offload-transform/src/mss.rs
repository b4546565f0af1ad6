//! MSS inference for captures without GSO metadata (`offload gso` without
//! `--mss` on a bare receiver-side capture).
//!
//! A receiver's capture holds what GRO made of the wire: super-packets of
//! full-sized segments, the last one possibly shorter (GRO flushes on a
//! short segment: `tcp_gro_receive` in net/ipv4/tcp_offload.c, all kernels),
//! and single segments. To cut them back, each flow's segment size is taken
//! from the first source that holds, in this order:
//!
//! 1. [`MssSource::Syn`]: the MSS options of the handshake. The sender's
//!    segments carry `min(peer's MSS, own MSS) - option bytes` of payload
//!    (`tcp_current_mss` in net/ipv4/tcp_output.c). Accepted when at least
//!    half the flow's super-packets are whole multiples of it, or none is
//!    (a lower path MTU or `TCP_MAXSEG` would show in the payloads).
//! 2. [`MssSource::SuperPackets`]: the common divisor of the super-packets'
//!    payload lengths: the largest divisor shared by most of them (a short
//!    last segment makes a super-packet disagree, not the majority), at
//!    least as large as every single segment, and refined down to the largest
//!    single segment or the IP ID estimate when it divides it (a flow whose
//!    super-packets all hold an even segment count has twice the MSS as common
//!    divisor).
//! 3. [`MssSource::ObservedSegment`]: the largest single segment (at most the
//!    MTU) of the flow.
//! 4. [`MssSource::IpIdSteps`]: IPv4 ID steps between consecutive
//!    super-packets (the sender increments the ID per segment, GRO keeps the
//!    first: `inet_gro_receive` checks the step, net/ipv4/af_inet.c).
//! 5. [`MssSource::Mtu`]: the MTU minus the headers, last.
//!
//! Memory per flow is bounded: a histogram of at most [`MAX_SIZES`]
//! distinct payload lengths.

use serde::Serialize;
use std::collections::HashMap;

/// Where the MSS of a super-packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MssSource {
    /// `--mss`.
    Given,
    /// The GSO metadata `offload gro` stored with the packet (pcapng comment).
    Metadata,
    /// The MSS options of the flow's handshake, less the TCP option bytes.
    Syn,
    /// The common divisor of the flow's super-packet payload lengths.
    SuperPackets,
    /// The largest single-segment payload of the flow.
    ObservedSegment,
    /// IPv4 ID steps between consecutive super-packets of the flow gave the
    /// segment count, and the payload divided evenly.
    IpIdSteps,
    /// None of the above: MTU minus the headers.
    Mtu,
}

impl MssSource {
    /// The name used in summaries (`syn`, `super-packets`, ...).
    pub fn name(self) -> &'static str {
        match self {
            MssSource::Given => "given",
            MssSource::Metadata => "metadata",
            MssSource::Syn => "syn",
            MssSource::SuperPackets => "super-packets",
            MssSource::ObservedSegment => "observed-segment",
            MssSource::IpIdSteps => "ip-id-steps",
            MssSource::Mtu => "mtu",
        }
    }
}

/// Distinct super-packet payload lengths kept per flow.
pub const MAX_SIZES: usize = 32;

/// The fewest packets without PSH the PSH rule needs.
const MIN_UNPUSHED: u64 = 3;

/// The smallest segment size believed (RFC 9293's default MSS is 536; a
/// divisor below this is an artefact of a few unlucky lengths).
const MIN_MSS: u32 = 88;

/// The largest segment the payload-based sources believe: a 9216-byte
/// jumbo MTU (the common Ethernet NIC maximum) less 40 bytes of IPv4 and TCP
/// headers. Without it a flow whose only super-packet has a short tail would
/// be taken for one huge segment; larger segments (loopback's 65536 MTU)
/// still come from the SYN.
const MAX_INFERRED_MSS: u32 = 9216 - 40;

/// The largest IP packet GRO builds without BIG TCP: `gro_max_size` and
/// `gro_ipv4_max_size` default to 65536 and an IPv4 total length or IPv6
/// payload length field holds at most 65535 (`skb_gro_receive` in
/// net/core/gro.c checks `p->len + skb->len` against the limit; all kernels
/// since 5.19, 65536 before).
const GRO_LEGACY_MAX: u32 = 65535;

/// Packets one NAPI poll takes (`NAPI_POLL_WEIGHT`, 64 on all kernels).
const NAPI_WEIGHT: u32 = 64;

/// The fewest bytes of IP and TCP headers a segment carries (IPv4 without
/// options, TCP without options): the smallest that could still have fit.
const MIN_HEADERS: u32 = 40;

/// What the first pass learns about one direction of one flow.
#[derive(Debug, Default, Clone)]
pub struct FlowEvidence {
    /// MSS option of this direction's SYN (what this side can receive and,
    /// from its MTU, the most it sends).
    pub syn_mss: Option<u32>,
    /// TCP option bytes of the last data packet (12 with timestamps).
    pub option_len: u32,
    /// Largest payload of a packet no longer than the MTU.
    pub largest_single: u32,
    /// Payload lengths of packets above the MTU, with counts.
    sizes: Vec<(u32, u32)>,
    /// Counts of exact `payload / segments` values from IP ID steps.
    id_candidates: Vec<(u32, u32)>,
    /// The previous super-packet's (IP ID, payload), waiting for the next ID.
    pending: Option<(u16, u32)>,
    /// Distinct (payload, IPv4 ID step to the next packet) pairs of
    /// super-packets, with counts (at most [`MAX_SIZES`]).
    steps: Vec<(u32, u32, u32)>,
    /// The previous packet's IPv4 ID, and how often consecutive packets of
    /// the flow had equal (fixed) or different IDs.
    last_id: Option<u16>,
    same_id: u32,
    other_id: u32,
    /// Packets above the MTU.
    pub super_packets: u64,
    /// Payload lengths of TCP data packets without PSH or FIN, with counts.
    unpushed: Vec<(u32, u32)>,
    /// Payload lengths of TCP data packets with PSH, with counts.
    pushed: Vec<(u32, u32)>,
    /// The payload of a packet of the MTU `gso` assumes (`--mtu` less
    /// this flow's headers): the size it cuts at when inference gives none.
    mtu_payload: Option<u32>,
}

fn bump(list: &mut Vec<(u32, u32)>, value: u32) {
    if let Some(e) = list.iter_mut().find(|e| e.0 == value) {
        e.1 += 1;
    } else if list.len() < MAX_SIZES {
        list.push((value, 1));
    } else if let Some(e) = list.iter_mut().filter(|e| e.1 == 1).min_by_key(|e| e.0) {
        // Full: a new length replaces a length seen once, so that a flow
        // whose first packets were odd sizes still learns its bulk size.
        *e = (value, 1);
    }
}

/// MSS candidates from `(length, count)` pairs, most frequent first: each
/// length, the common divisor of the most frequent ones so far (a flow
/// with super-packets of 33, 6 and 22 segments has no pairwise divisor of
/// one segment) and every pairwise common divisor.
fn divisor_candidates(top: &[(u32, u32)]) -> Vec<u32> {
    let mut candidates = Vec::new();
    let mut all = 0;
    for (i, a) in top.iter().enumerate() {
        candidates.push(a.0);
        all = gcd(all, a.0);
        candidates.push(all);
        for b in &top[i + 1..] {
            candidates.push(gcd(a.0, b.0));
        }
    }
    candidates
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The odds below which lengths a divisor makes whole are taken as
/// evidence for it rather than chance (1 in 1000).
const MAX_CHANCE: f64 = 1e-3;

/// The odds below which lengths another size makes whole overrule the
/// handshake's MSS (1 in 100,000): the SYN states the size, the lengths
/// only suggest one.
const MAX_SYN_CHANCE: f64 = 1e-5;

/// The fewest distinct lengths a size must make whole to be guessed
/// among sizes the lengths cannot tell apart.
const MIN_WHOLE_LENGTHS: usize = 3;

/// The fewest extra whole lengths that can make a divisor the segment.
const MIN_EXTRA_WHOLE: u32 = 2;

/// `ln P(X >= k)` for `X ~ Binomial(n, p)`, summed in log space (`n` is
/// at most [`MAX_SIZES`]).
fn ln_binomial_tail(n: u32, k: u32, p: f64) -> f64 {
    if k == 0 || p >= 1.0 {
        return 0.0;
    }
    if k > n || p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    let ln_choose = |i: u32| -> f64 {
        (0..i)
            .map(|j| (f64::from(n - j) / f64::from(j + 1)).ln())
            .sum()
    };
    let terms: Vec<f64> = (k..=n)
        .map(|i| ln_choose(i) + f64::from(i) * p.ln() + f64::from(n - i) * (1.0 - p).ln())
        .collect();
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    top + terms.iter().map(|t| (t - top).exp()).sum::<f64>().ln()
}

/// The divisors of the `candidates` too large to be a segment that are
/// themselves within `lo..=hi`: the segment sizes a length holds a whole
/// number of when no length or common divisor is one (a flow whose every
/// whole packet holds 10 segments of 5988 bytes has 59880 as its only
/// common divisor).
fn fractions(candidates: &[u32], lo: u32, hi: u32) -> Vec<u32> {
    let mut large: Vec<u32> = candidates.iter().copied().filter(|c| *c > hi).collect();
    large.sort_unstable();
    large.dedup();
    let mut out = Vec::new();
    for c in large {
        for k in c.div_ceil(hi).max(2)..=c / lo.max(1) {
            if c % k == 0 {
                out.push(c / k);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Among sizes the evidence supports equally, an even one: an MSS is the
/// MTU less 40 or 60 bytes of headers (`tcp_mtu_to_mss`,
/// net/ipv4/tcp_output.c) or a `TCP_MAXSEG` value, less option bytes that
/// come in multiples of 4 (RFC 9293 3.1), and MTUs in use are even (1500,
/// 9000, 1280, 1492, 1450): 59880 bytes are 10 segments of 5988 (MSS
/// option 6000) or 8 of 7485 (7497). `None` when more than one size of the
/// preferred parity is left.
fn only_even_or_only(candidates: &[u32]) -> Option<u32> {
    let even: Vec<u32> = candidates.iter().copied().filter(|c| c % 2 == 0).collect();
    match (even.as_slice(), candidates) {
        ([one], _) => Some(*one),
        ([], [one]) => Some(*one),
        _ => None,
    }
}

impl FlowEvidence {
    /// Notes a SYN's MSS option.
    pub fn note_syn(&mut self, mss: u32) {
        self.syn_mss = Some(mss);
    }

    /// Notes the payload a packet of the assumed MTU would carry with this
    /// flow's headers (the size `gso` falls back to, [`MssSource::Mtu`]).
    pub fn note_mtu_payload(&mut self, payload: u32) {
        self.mtu_payload = Some(payload);
    }

    /// Among whole fractions the lengths cannot tell apart (every packet
    /// pushed, IPv6: no ID steps), none when the MTU's size is one of them
    /// (the fallback cuts there anyway: all lengths even multiples of 1448
    /// are 2, 4 or 5 x 1448 as well), else the largest even one: an MSS
    /// is an even MTU less 40 or 60 bytes of headers, or a `TCP_MAXSEG`
    /// value, less options in multiples of 4 (see [`only_even_or_only`]),
    /// and the lengths' rule takes the largest explanation. 179640, 89820,
    /// 59880 and 29940 bytes with PSH are 30, 15, 10 and 5 x 5988 (MSS
    /// option 6000) as much as 36, 18, 12, 6 x 4990 or 24, 12, 8, 4 x 7485.
    /// Only when no packet lacks PSH (one that does holds whole segments
    /// and would have settled it) and it makes at least three distinct
    /// lengths whole: one 16360-byte packet is 2 x 8180 as much as 11 x
    /// 1460 + 300, and 44 and 22 x 1448 are 8 and 4 x 7964.
    fn largest_even_unless_mtu(&self, candidates: &[u32]) -> Option<u32> {
        if !self.unpushed.is_empty() || self.mtu_payload.is_some_and(|m| candidates.contains(&m)) {
            return None;
        }
        candidates
            .iter()
            .copied()
            .filter(|&c| {
                c % 2 == 0 && self.lengths().filter(|v| v % c == 0).count() >= MIN_WHOLE_LENGTHS
            })
            .max()
    }

    /// Notes a data packet: its payload, whether its IP length exceeds the
    /// MTU, its TCP option bytes and its IPv4 ID.
    pub fn note_data(&mut self, payload: u32, above_mtu: bool, option_len: u32, id: Option<u16>) {
        if let (Some(last), Some(id)) = (self.last_id, id) {
            if last == id {
                self.same_id += 1;
            } else {
                self.other_id += 1;
            }
        }
        self.last_id = id;
        if payload == 0 {
            return;
        }
        self.option_len = option_len;
        if let (Some((prev_id, prev_payload)), Some(id)) = (self.pending.take(), id) {
            let segs = id.wrapping_sub(prev_id) as u32;
            if segs > 1 && prev_payload % segs == 0 {
                bump(&mut self.id_candidates, prev_payload / segs);
            }
            if segs > 0 {
                if let Some(e) = self
                    .steps
                    .iter_mut()
                    .find(|e| (e.0, e.1) == (prev_payload, segs))
                {
                    e.2 += 1;
                } else if self.steps.len() < MAX_SIZES {
                    self.steps.push((prev_payload, segs, 1));
                }
            }
        }
        if above_mtu {
            self.super_packets += 1;
            bump(&mut self.sizes, payload);
            if let Some(id) = id {
                self.pending = Some((id, payload));
            }
        } else {
            self.largest_single = self.largest_single.max(payload);
        }
    }

    /// Notes the payload of a TCP data packet that carries neither PSH nor
    /// FIN. Linux sends a segment shorter than the MSS only at the end of
    /// what the application wrote, with PSH (`tcp_push` marks the last
    /// segment of a write, net/ipv4/tcp.c), and GRO ends a super-packet at
    /// such a segment and keeps its PSH (`tcp_gro_receive`,
    /// net/ipv4/tcp_offload.c): a packet without PSH, merged or not, holds
    /// whole segments only.
    pub fn note_unpushed(&mut self, payload: u32) {
        if payload > 0 {
            bump(&mut self.unpushed, payload);
        }
    }

    /// Notes the payload of a TCP data packet with PSH (the end of a write).
    pub fn note_pushed(&mut self, payload: u32) {
        if payload > 0 {
            bump(&mut self.pushed, payload);
        }
    }

    /// Packets that all hold an even segment count share twice the MSS
    /// (delayed ACKs clock segments out in pairs). The ends of writes tell
    /// them apart: with twice the MSS as divisor, pushed packets that hold
    /// an odd count of true segments leave exactly half of it over, which
    /// a true MSS leaves only for writes of one particular size (a forced
    /// push, `forced_push` in net/ipv4/tcp.c, marks a full segment in the
    /// middle of a long write: those are many). Halves `m` when at least
    /// three pushed packets of two or more lengths, and a tenth of those
    /// that `m` does not divide, leave exactly `m / 2`.
    fn halved_by_pushed(&self, m: u32) -> u32 {
        let half = m / 2;
        if !m.is_multiple_of(2) || half < MIN_MSS {
            return m;
        }
        let count = |pred: &dyn Fn(u32) -> bool| -> u64 {
            self.pushed
                .iter()
                .filter(|(v, _)| pred(*v))
                .map(|(_, n)| u64::from(*n))
                .sum()
        };
        let odd_halves = count(&|v| v >= half && v % m == half);
        let with_rest = count(&|v| v % m != 0);
        let distinct = self
            .pushed
            .iter()
            .filter(|(v, _)| *v >= half && v % m == half)
            .count();
        if odd_halves >= 3 && distinct >= 2 && 10 * odd_halves >= with_rest {
            half
        } else {
            m
        }
    }

    /// The segment size from packets without PSH: the largest divisor of
    /// nearly all (95%) of their payload lengths and no longer than nearly
    /// all of them. Candidates are the lengths,
    /// their pairwise common divisors and the common divisor of all of them
    /// (super-packets of 33, 6 and 22 segments share no pairwise divisor
    /// of one segment, all three do). Every count even is ambiguous with
    /// twice the MSS: a single full segment (count 1) settles it, and the
    /// IPv4 ID estimate refines it when it divides the result.
    fn unpushed_divisor(&self, fractions_too: bool) -> Option<u32> {
        let total: u64 = self.unpushed.iter().map(|(_, n)| u64::from(*n)).sum();
        // A segment the window cut short goes out without PSH too
        // (`tcp_mss_split_point`, net/ipv4/tcp_output.c): one or two such
        // packets are no evidence.
        if total < MIN_UNPUSHED {
            return None;
        }
        let mut top = self.unpushed.clone();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let candidates = divisor_candidates(&top);
        let believed = |c: &u32| {
            (MIN_MSS..=MAX_INFERRED_MSS).contains(c)
                && self.unpushed_fits(*c, true)
                && self.ids_fit(*c)
        };
        // When every common divisor is too large to be a segment (all
        // packets without PSH hold 12 segments, or 64 and 16), the segment
        // is a whole fraction of them: one that leaves no room for one
        // more in a full super-packet (see [`Self::common_divisor`]), then
        // the largest of those that divide (nearly) as many super-packets
        // as the best (pushed packets of 5, 19 and 32 segments of 1428
        // bytes tell 1428 from 7616 = 22848 / 3 when every packet without
        // PSH holds 16 or 64).
        let fallback = || {
            if !fractions_too {
                return None;
            }
            let mut lower = fractions(&candidates, MIN_MSS, MAX_INFERRED_MSS);
            lower.retain(believed);
            // The largest fraction, unless another explains the lengths
            // a thousand times less likely by chance
            // ([`Self::best_explained`]: 1428, not 7616 = 22848 / 3):
            // among many fractions one often fits a length or two more
            // by chance (6517, not 343 = 6517 / 19 and 21609 = 63 x 343;
            // 8704, not 1632 and 148512 = 91 x 1632); then a divisor
            // only beyond chance.
            self.no_room_for_another(&mut lower);
            let best = self.best_explained(&lower)?;
            let largest = lower.iter().copied().max()?;
            let far_better = self.ln_odds(best) < self.ln_odds(largest) + MAX_CHANCE.ln();
            let m = if far_better { best } else { largest };
            Some(self.finer_beyond_chance(m, &lower))
        };
        let mut m = candidates
            .iter()
            .copied()
            .filter(believed)
            .max()
            .or_else(fallback)?;
        if let Some(id) = self.id_estimate() {
            if id >= MIN_MSS && id < m && m % id == 0 {
                m = id;
            }
        }
        // Packets without PSH that all hold a multiple of the segment
        // (14, 15 and 16 x 5760 = 56, 60 and 64 x 1440) share it: its
        // divisors down to the largest single segment make pushed lengths
        // whole beyond chance.
        let lo = MIN_MSS.max(self.largest_single);
        let divisors: Vec<u32> = (2..=m / lo.max(1))
            .filter(|k| m % k == 0)
            .map(|k| m / k)
            .filter(|d| self.ids_fit(*d))
            .collect();
        m = self.finer_beyond_chance(m, &divisors);
        Some(self.halved_by_pushed(m))
    }

    /// True when the flow's packets keep one IPv4 ID (merged as
    /// SKB_GSO_TCP_FIXEDID): segments then keep the ID too.
    pub fn fixed_id(&self) -> bool {
        self.same_id > 0 && self.same_id > self.other_id
    }

    /// Super-packets whose payload `m` divides.
    fn support(&self, m: u32) -> u64 {
        self.sizes
            .iter()
            .filter(|(v, _)| v % m == 0)
            .map(|(_, n)| *n as u64)
            .sum()
    }

    /// True unless the packets without PSH (when there are enough to
    /// count: [`MIN_UNPUSHED`]) rule `m` out: 95% of them must hold whole
    /// segments of it (see [`Self::note_unpushed`]).
    fn whole_unpushed(&self, m: u32) -> bool {
        let total: u64 = self.unpushed.iter().map(|(_, n)| u64::from(*n)).sum();
        if total < MIN_UNPUSHED {
            // Too few to count, but one at least `m` long that `m` does
            // not divide, or two shorter ones, still rule it out (16385,
            // or 3277 and 6554, without PSH hold no 8192-byte segments).
            self.unpushed_whole_from(m)
        } else {
            self.unpushed_fits(m, false)
        }
    }

    /// True when `m` explains the packets without PSH: 95% of them are
    /// whole multiples of it, or all but one, which is no whole fraction
    /// of it either (a segment the window cut short goes out without PSH,
    /// `tcp_mss_split_point` in net/ipv4/tcp_output.c; a packet of half of
    /// `m` is evidence for half of it instead). With `none_shorter`,
    /// fewer than 1% of them (beyond that one) may be shorter than `m`: a
    /// packet without PSH holds at least one whole segment (a
    /// retransmission after a partial ACK can be shorter).
    fn unpushed_fits(&self, m: u32, none_shorter: bool) -> bool {
        let count = |pred: &dyn Fn(u32) -> bool| -> u64 {
            self.unpushed
                .iter()
                .filter(|(v, _)| pred(*v))
                .map(|(_, n)| u64::from(*n))
                .sum()
        };
        let total = count(&|_| true);
        let left_over = count(&|v| v % m != 0);
        let stray = left_over == 1 && count(&|v| v % m != 0 && !m.is_multiple_of(v)) == 1;
        let shorter = count(&|v| v < m && !(stray && v % m != 0));
        let whole = 20 * left_over <= total || stray;
        whole && (!none_shorter || 100 * shorter < total.max(100))
    }

    /// The IPv4 ID estimate when it is firm: found at least three times,
    /// for at least half the super-packets whose ID step divided them
    /// (other estimates come from steps that other packets of the socket
    /// widened), within the believed range and at least every single
    /// segment, and dividing every packet without PSH at least as long,
    /// however few (a write of 8192 bytes in 8 segments of 1037 divides by its ID
    /// step into 1024: with one size of write every pushed packet
    /// agrees, and only the packets without PSH tell). Linux numbers
    /// every segment of a connected socket (`ip_select_ident_segs`,
    /// include/net/ip.h, all kernels), so the step counts segments
    /// exactly where lengths leave a choice.
    fn firm_id_estimate(&self) -> Option<u32> {
        let (m, n) = self
            .id_candidates
            .iter()
            .copied()
            .max_by_key(|&(m, n)| (n, m))?;
        let all: u32 = self.id_candidates.iter().map(|(_, n)| n).sum();
        let firm = n >= 3
            && 2 * n >= all
            && (MIN_MSS..=MAX_INFERRED_MSS).contains(&m)
            && self.unpushed_whole_from(m)
            && self.ids_fit(m);
        firm.then_some(m)
    }

    /// True unless the IPv4 ID steps rule `m` out: a super-packet of `p`
    /// bytes followed by an ID `k` higher holds `k` segments, so
    /// `(k - 1) x m < p <= k x m`. The upper bound holds for every one
    /// (19703 bytes stepping by 19 are 19 x 1037, never segments of
    /// 1024; 122500 stepping by 14 no segments of 8572); the lower for
    /// 95% of them: another packet of the socket in between (a
    /// retransmission, an ACK) only widens a step.
    fn ids_fit(&self, m: u32) -> bool {
        let (m64, count) = (u64::from(m), |s: &(u32, u32, u32)| u64::from(s.2));
        let total: u64 = self.steps.iter().map(count).sum();
        let too_long = self
            .steps
            .iter()
            .any(|&(p, k, _)| u64::from(p) > u64::from(k) * m64);
        let too_short: u64 = self
            .steps
            .iter()
            .filter(|&&(p, k, _)| u64::from(p) <= u64::from(k - 1) * m64)
            .map(count)
            .sum();
        !too_long && 20 * too_short <= total
    }

    /// True when every IPv4 ID step agrees with `m` exactly (see
    /// [`Self::ids_fit`]); true without steps.
    fn ids_exact(&self, m: u32) -> bool {
        let m = u64::from(m);
        self.steps.iter().all(|&(p, k, _)| {
            let p = u64::from(p);
            u64::from(k - 1) * m < p && p <= u64::from(k) * m
        })
    }

    /// The segment sizes every IPv4 ID step allows, `lo..=hi`: a packet
    /// of `p` bytes the next ID follows by `k` holds `k` segments, so
    /// `p / k <= m < p / (k - 1)`. `None` without steps or when they
    /// disagree.
    fn id_range(&self) -> Option<(u32, u32)> {
        let mut lo = 1u32;
        let mut hi = u32::MAX;
        for &(p, k, _) in &self.steps {
            lo = lo.max(p.div_ceil(k));
            if k > 1 {
                hi = hi.min((p - 1) / (k - 1));
            }
        }
        (!self.steps.is_empty() && lo <= hi).then_some((lo, hi))
    }

    /// The last resort of an IPv4 flow: within the range the ID steps
    /// allow ([`Self::id_range`]), the largest whole fraction of the
    /// packets without PSH that holds them all, else the ID estimate if
    /// it lies within and divides every packet without PSH as long.
    fn id_bounded(&self) -> Option<u32> {
        let Some((lo, hi)) = self.id_range() else {
            return self.id_estimate().filter(|m| self.unpushed_whole_from(*m));
        };
        let lo = lo.max(MIN_MSS);
        let hi = hi.min(MAX_INFERRED_MSS);
        let mut fractions: Vec<u32> = Vec::new();
        for &(v, _) in &self.unpushed {
            for k in v.div_ceil(hi.max(1)).max(1)..=v / lo.max(1) {
                if v % k == 0 && (lo..=hi).contains(&(v / k)) {
                    fractions.push(v / k);
                }
            }
        }
        fractions
            .into_iter()
            .filter(|m| self.unpushed_whole_from(*m))
            .max()
            .or_else(|| {
                self.id_estimate()
                    .filter(|m| (lo..=hi).contains(m) && self.unpushed_whole_from(*m))
            })
            // The largest size the steps allow, as the lengths' rule takes
            // the largest explanation (16384, 32768 and 49152 bytes
            // stepping by 6, 12 and 17 are segments of 2892 to 2978).
            .or_else(|| (lo <= hi && self.unpushed_whole_from(hi)).then_some(hi))
    }

    /// True when `m` divides every packet without PSH at least `m` long,
    /// and no two shorter ones that `m` does not divide have the same
    /// length or one a whole multiple of the other (3277 twice, or 3277
    /// and 6554, without PSH rule out 8192). Other shorter ones are segments the window
    /// cut short, which go out without PSH (`tcp_mss_split_point`,
    /// net/ipv4/tcp_output.c; 2496 bytes beside segments of 5988).
    fn unpushed_whole_from(&self, m: u32) -> bool {
        let longer = self.unpushed.iter().any(|&(v, _)| v >= m && v % m != 0);
        let shorter: Vec<(u32, u32)> = self
            .unpushed
            .iter()
            .copied()
            .filter(|&(v, _)| v < m && v % m != 0)
            .collect();
        let related = shorter
            .iter()
            .any(|&(a, n)| n > 1 || shorter.iter().any(|&(b, _)| b > a && b.is_multiple_of(a)));
        !longer && !related
    }

    fn id_estimate(&self) -> Option<u32> {
        self.id_candidates
            .iter()
            .max_by_key(|(m, n)| (*n, *m))
            .map(|(m, _)| *m)
    }

    /// The payload length of the flow's full super-packets, if it has
    /// them: its most common super-packet length when that is at least half
    /// the 64 KiB GRO limit and a quarter of its super-packets (at least 3).
    /// Above 64 KiB (BIG TCP) only its segment count limits it (see
    /// [`Self::no_room_for_another`]).
    fn full_super_packet(&self) -> Option<u32> {
        let total: u32 = self.sizes.iter().map(|(_, n)| n).sum();
        let (len, count) = self
            .sizes
            .iter()
            .copied()
            .max_by_key(|&(len, count)| (count, len))?;
        let plausible = count >= 3 && 4 * count >= total && len >= GRO_LEGACY_MAX / 2;
        plausible.then_some(len)
    }

    /// Keeps the `candidates` that divide at least 95% as many super-packets
    /// as the best of them, or as many distinct super-packet lengths (none
    /// if none divides any). Lengths repeat: an application that writes
    /// one size ends its writes in one tail, and a small divisor of that
    /// tail (128 of 83584 = 9 x 8928 + 3232, ten times) divides more
    /// packets than the segment does, not more lengths.
    fn best_supported(&self, candidates: &mut Vec<u32>) {
        let lengths = |m: u32| self.sizes.iter().filter(|(v, _)| v % m == 0).count() as u64;
        let threshold = |f: &dyn Fn(u32) -> u64| {
            let best = candidates.iter().map(|c| f(*c)).max().unwrap_or(0);
            (best > 0).then(|| best - best / 20)
        };
        let packets = threshold(&|c| self.support(c));
        let distinct = threshold(&lengths);
        candidates.retain(|c| {
            packets.is_some_and(|t| self.support(*c) >= t)
                || distinct.is_some_and(|t| lengths(*c) >= t)
        });
    }

    /// The distinct super-packet payload lengths of the flow.
    fn lengths(&self) -> impl Iterator<Item = u32> + '_ {
        self.sizes.iter().map(|(v, _)| *v)
    }

    /// The factor the tails of segments of `m` share by the writes'
    /// doing, not the segment's: the power of two dividing all of the
    /// `lengths` (all of the flow's if there are none), as far as it
    /// divides `m`. Applications write powers of two (256 KiB), and each
    /// write ends a multiple of `gcd(m, write)` bytes past a segment
    /// boundary: with an 8928-byte MSS (32 x 279) every tail is a
    /// multiple of 32.
    fn lattice(&self, m: u32, lengths: impl Iterator<Item = u32>) -> u32 {
        let g = match lengths.fold(0, gcd) {
            0 => self.lengths().fold(0, gcd),
            g => g,
        };
        if g == 0 {
            1
        } else {
            gcd(m, 1 << g.trailing_zeros())
        }
    }

    /// The chance that a tail on the lattice `g` is a whole multiple of
    /// `d`: one multiple of `g` in `lcm(g, d) / g`. With 256 KiB writes
    /// and an 8928-byte MSS one tail in three is a multiple of 96.
    fn chance(g: u32, d: u32) -> f64 {
        f64::from(gcd(g, d)) / f64::from(d)
    }

    /// `ln` of the binomial odds that as many distinct super-packet
    /// lengths as `c` divides are multiples of it by chance (see
    /// [`Self::lattice`] and [`Self::chance`]).
    fn ln_odds(&self, c: u32) -> f64 {
        let n = self.sizes.len() as u32;
        let whole = self.lengths().filter(|v| v % c == 0).count() as u32;
        let g = self.lattice(c, self.lengths().filter(|v| v % c != 0));
        ln_binomial_tail(n, whole, Self::chance(g, c))
    }

    /// The candidate whose whole lengths are least likely by chance: the
    /// lowest binomial odds of as many distinct super-packet lengths
    /// being multiples of it (see [`Self::chance`]), ties to the larger.
    /// Distinct lengths, not packets: an application that writes one size
    /// ends its writes in one tail, and a small divisor of that tail (128
    /// of 83584 = 9 x 8928 + 3232, ten times) divides more packets than
    /// the segment does, not more lengths.
    fn best_explained(&self, candidates: &[u32]) -> Option<u32> {
        let odds = |c: u32| self.ln_odds(c);
        // Sizes that make the same lengths whole are one explanation: the
        // largest stands for it (48120 and 24060 are 6 and 3 x 8020 as
        // well as 8 and 4 x 6015).
        let whole_set = |c: u32| -> u64 {
            self.lengths()
                .enumerate()
                .filter(|(_, v)| v % c == 0)
                .fold(0, |set, (i, _)| set | 1 << i)
        };
        let mut sorted = candidates.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted.dedup();
        let mut seen: Vec<u64> = Vec::new();
        sorted
            .into_iter()
            .filter(|&c| {
                let set = whole_set(c);
                let new = !seen.contains(&set);
                seen.push(set);
                new
            })
            .map(|c| (odds(c), c))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, c)| c)
    }

    /// True when the lengths `syn` leaves a tail of that `m` makes whole
    /// are beyond chance ([`MAX_SYN_CHANCE`]), were `syn` the segment:
    /// its tails would then be multiples of the factor `g` they share
    /// with it, of which one in `lcm(g, m) / g` is a multiple of `m`.
    /// Writes of 32 KiB with a 5608-byte MSS leave tails that are
    /// multiples of 8, and three of them all multiples of 128 (odds 1 in
    /// 4096) do not overrule the handshake; lengths of 40 and 13 x 1388
    /// (a lower path MTU, tails of 1448 sharing 4 with it) do.
    fn tails_beyond_chance(&self, syn: u32, m: u32) -> bool {
        // A length that is a whole multiple of another one is no evidence
        // of its own (131072 after 65536, with 64 KiB writes: 16 x 4096
        // and never whole segments of a 4109-byte MSS).
        let all: Vec<u32> = self.lengths().filter(|v| v % syn != 0).collect();
        let tails = || {
            all.iter()
                .copied()
                .filter(|&v| !all.iter().any(|&u| u < v && v % u == 0))
        };
        let n = tails().count() as u32;
        let extra = tails().filter(|v| v % m == 0).count() as u32;
        let p = Self::chance(self.lattice(syn, tails()), m);
        ln_binomial_tail(n, extra, p) < MAX_SYN_CHANCE.ln()
    }

    /// The segment size among the `candidates` by the lengths: the best
    /// explained one ([`Self::best_explained`]), then its divisor beyond
    /// chance ([`Self::finer_beyond_chance`]).
    fn explained(&self, candidates: &[u32]) -> Option<u32> {
        let best = self.best_explained(candidates)?;
        Some(self.finer_beyond_chance(best, candidates))
    }

    /// `m`, or its largest divisor among the `candidates` that makes
    /// whole at least [`MIN_EXTRA_WHOLE`] of the lengths `m` leaves a tail
    /// of, when that many are beyond chance ([`MAX_CHANCE`]; see
    /// [`Self::chance`], over those tails), repeated from the divisor
    /// found. Super-packets of odd segment counts are tails of twice the
    /// MSS that the MSS makes whole; a divisor of an 8928-byte MSS makes
    /// whole the tails of writes that are a multiple of it.
    fn finer_beyond_chance(&self, mut m: u32, candidates: &[u32]) -> u32 {
        let mut finer: Vec<u32> = candidates.to_vec();
        finer.sort_unstable_by(|a, b| b.cmp(a));
        finer.dedup();
        // Each divisor tried is one more chance for a coincidence
        // (Bonferroni): 2448 and 3468 are multiples of 102, one of five
        // divisors of 2346 tried, at odds of 1 in 1700.
        let tried = finer
            .iter()
            .filter(|&&d| d < m && m.is_multiple_of(d))
            .count()
            .max(1) as f64;
        let threshold = (MAX_CHANCE / tried).ln();
        for d in finer {
            if d >= m || !m.is_multiple_of(d) {
                continue;
            }
            let tails = || self.lengths().filter(|v| v % m != 0);
            let n = tails().count() as u32;
            let extra = tails().filter(|v| v % d == 0).count() as u32;
            let p = Self::chance(self.lattice(m, tails()), d);
            if extra >= MIN_EXTRA_WHOLE && ln_binomial_tail(n, extra, p) < threshold {
                m = d;
            }
        }
        m
    }

    /// Keeps the `candidates` one more segment of which would not have fit
    /// into the flow's full super-packet, if it has one and any are left.
    fn no_room_for_another(&self, candidates: &mut Vec<u32>) {
        if let Some(full) = self.full_super_packet() {
            // A NAPI poll takes at most 64 packets (the weight veth and
            // most drivers register, `NAPI_POLL_WEIGHT` in
            // include/linux/netdevice.h) and flushes GRO at its end
            // (`napi_complete_done`, net/core/dev.c): 64 segments fill a
            // super-packet too (63232 = 64 x 988, 92160 = 64 x 1440).
            let fits_another = |c: &u32| {
                let by_count = full % c == 0 && full / c == NAPI_WEIGHT;
                let by_size = full > GRO_LEGACY_MAX
                    || full + c + MIN_HEADERS + self.option_len > GRO_LEGACY_MAX;
                !by_count && !by_size
            };
            if candidates.iter().any(|c| !fits_another(c)) {
                candidates.retain(|c| !fits_another(c));
            }
        }
    }

    /// The common divisor of most super-packets, at least the largest
    /// single segment. Candidates are the lengths, their pairwise common
    /// divisors and the common divisor of the most frequent ones (as in
    /// [`Self::unpushed_divisor`]: a flow whose every packet carries PSH,
    /// with super-packets of 33, 6 and 22 segments, has no pairwise divisor
    /// of one segment).
    fn common_divisor(&self) -> Option<u32> {
        // One super-packet is no evidence of its own divisor: its length
        // would be "one segment" of a packet the MTU says holds several
        // (Wireshark's ipv4_tcp_http_xml_tso.pcap: one 1976-byte TSO
        // payload, no handshake); the MTU's size decides then.
        if self.super_packets < 2 {
            return None;
        }
        let mut top = self.sizes.clone();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        top.truncate(12);
        let all = divisor_candidates(&top);
        let lo = MIN_MSS.max(self.largest_single);
        let in_range = |c: &u32| {
            (lo..=MAX_INFERRED_MSS).contains(c) && self.whole_unpushed(*c) && self.ids_fit(*c)
        };
        let mut candidates: Vec<u32> = all.iter().copied().filter(in_range).collect();
        // A merged packet without PSH holds whole segments: its fractions
        // are candidates too (15168 = 2 x 7584 when the lengths' common
        // divisors are 64 and 192, the factors of 32 KiB writes), when
        // that length was seen twice or there are enough packets without
        // PSH for the PSH rule ([`MIN_UNPUSHED`]): a segment the window
        // cut short goes out without PSH and GRO merges it, so one packet
        // of 16360 bytes is no evidence for 2 x 8180 against 11 x 1460 +
        // 300.
        let unpushed: u64 = self.unpushed.iter().map(|(_, n)| u64::from(*n)).sum();
        for &(v, n) in &self.unpushed {
            if (n >= 2 || unpushed >= MIN_UNPUSHED) && self.sizes.iter().any(|e| e.0 == v) {
                for k in 2..=v / lo.max(1) {
                    if v % k == 0 && in_range(&(v / k)) {
                        candidates.push(v / k);
                    }
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        if candidates.iter().any(|c| self.ids_exact(*c)) {
            candidates.retain(|c| self.ids_exact(*c));
        }
        // No length or common divisor that divides half the super-packets
        // is a segment (a short last one of a write, 4008 bytes, is a
        // length): whole fractions of them are the candidates if one
        // divides more, and the choice must then be unambiguous.
        let best_listed = candidates.iter().map(|c| self.support(*c)).max();
        let mut fallback = false;
        if best_listed.is_none_or(|b| 2 * b < self.super_packets) {
            let mut lower = fractions(&all, lo, MAX_INFERRED_MSS);
            lower.retain(in_range);
            let best_lower = lower.iter().map(|c| self.support(*c)).max();
            if best_lower > best_listed {
                candidates = lower;
                fallback = true;
            }
        }
        // A divisor of the MSS also divides every super-packet whose short
        // last segment happens to be a multiple of it, and tails are not
        // uniform (an application's writes repeat): a few of them can lift
        // a divisor past the threshold below. GRO's size limit rules such a
        // divisor out when the flow's most common super-packet is a full
        // one: one more segment of that size would have fit.
        self.no_room_for_another(&mut candidates);
        let mut m = if fallback {
            // The largest fraction nearly as well supported as the best.
            self.best_supported(&mut candidates);
            // Of fractions that all hold the packets without PSH whole
            // (61997 = 13 x 4769 = 19 x 3263) the largest, then a
            // divisor of it only beyond chance.
            // The even-size preference is for lengths that leave nothing
            // else to go by (every packet pushed, or fewer packets without
            // PSH than the PSH rule counts: one packet of 16360 bytes is
            // 2 x 8180 as much as 11 x 1460 + 300).
            let unpushed: u64 = self.unpushed.iter().map(|(_, n)| u64::from(*n)).sum();
            if unpushed < MIN_UNPUSHED {
                only_even_or_only(&candidates)
                    .or_else(|| self.largest_even_unless_mtu(&candidates))?
            } else {
                let largest = candidates.iter().copied().max()?;
                self.finer_beyond_chance(largest, &candidates)
            }
        } else {
            // A smaller divisor always divides at least as many lengths:
            // the size whose whole lengths chance explains least, then a
            // divisor of it only beyond chance.
            self.explained(&candidates)?
        };
        // Super-packets that all hold an even segment count share 2 x MSS:
        // a single segment or the IP ID estimate that divides it is the MSS.
        for finer in [Some(self.largest_single), self.id_estimate()]
            .into_iter()
            .flatten()
        {
            if finer >= MIN_MSS && finer < m && m % finer == 0 {
                m = finer;
            }
        }
        Some(m)
    }

    /// The flow's segment size and where it came from; `peer_syn_mss` is
    /// the MSS option of the other direction's SYN.
    pub fn infer(&self, peer_syn_mss: Option<u32>) -> Option<(u32, MssSource)> {
        let syn = match (peer_syn_mss, self.syn_mss) {
            (Some(p), Some(o)) => Some(p.min(o)),
            (p, o) => p.or(o),
        };
        let syn = syn
            .and_then(|m| m.checked_sub(self.option_len))
            .filter(|m| *m >= MIN_MSS);
        if let Some(syn) = syn {
            let total = self.super_packets.max(1);
            // Not checked against the largest packet within the MTU: with
            // an MSS well below the MTU, GRO merges packets that still fit
            // in it (2 x 988 + 324 = 2300 > 1500 does not, 988 + 324 does).
            if self.sizes.is_empty() || 2 * self.support(syn) >= total {
                return Some((syn, MssSource::Syn));
            }
        }
        let inferred = self.infer_from_packets();
        // Most super-packets end in a short last segment (writes smaller
        // than a super-packet, each pushed): the SYN's size still stands
        // unless the packets without PSH rule it out or the inferred size
        // divides more than twice as many merged packets (a lower path
        // MTU: 1388 divides them all, 1448 none).
        if let Some(syn) = syn {
            // (Packets of one segment support any size equal to theirs.)
            let merged = |m: u32| -> u64 {
                self.sizes
                    .iter()
                    .filter(|(v, _)| *v > m && v % m == 0)
                    .map(|(_, n)| u64::from(*n))
                    .sum()
            };
            // Only ever a smaller size: the sender never sends more than
            // the SYN allows (`tcp_current_mss`), and with one size of
            // write a multiple of the MSS (8 x 1024 = 8192) divides more
            // of the packets than a 1118-byte MSS does.
            let better = inferred.is_some_and(|(m, _)| {
                m < syn && merged(m) > 2 * merged(syn) && self.tails_beyond_chance(syn, m)
            });
            if !better && self.whole_unpushed(syn) {
                return Some((syn, MssSource::Syn));
            }
        }
        inferred
    }

    /// The flow's segment size from its packets alone (no SYN).
    fn infer_from_packets(&self) -> Option<(u32, MssSource)> {
        // Lengths and common divisors of packets without PSH first, then
        // firm IPv4 ID steps, then whole fractions of those lengths.
        if self.super_packets > 0 {
            if let Some(m) = self.unpushed_divisor(false) {
                return Some((m, MssSource::SuperPackets));
            }
        }
        if let Some(m) = self.firm_id_estimate() {
            return Some((m, MssSource::IpIdSteps));
        }
        if self.super_packets > 0 {
            if let Some(m) = self.unpushed_divisor(true) {
                return Some((m, MssSource::SuperPackets));
            }
        }
        if let Some(m) = self.common_divisor() {
            // Lengths that leave a choice the ID steps settle (8192,
            // 16384 and 40960 bytes stepping by 4, 7 and 17 are segments
            // of 2410 to 2559 bytes, not of 2560).
            if !self.ids_exact(m) {
                if let Some(i) = self.id_bounded() {
                    return Some((i, MssSource::IpIdSteps));
                }
            }
            return Some((m, MssSource::SuperPackets));
        }
        // A single segment is the MSS only if the packets without PSH
        // hold whole ones of it (782 bytes at the end of a write are no
        // segment of packets of 7410 without PSH) and the IDs agree.
        let single = self.largest_single;
        if (MIN_MSS..=MAX_INFERRED_MSS).contains(&single)
            && self.unpushed_whole_from(single)
            && self.ids_fit(single)
        {
            return Some((single, MssSource::ObservedSegment));
        }
        self.id_bounded().map(|m| (m, MssSource::IpIdSteps))
    }
}

/// The flows of a capture, by direction key.
pub type FlowTable<K> = HashMap<K, FlowEvidence>;

/// The MSS option (kind 2, length 4) of a TCP header's options, if any.
pub fn tcp_mss_option(options: &[u8]) -> Option<u32> {
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            0 => return None,
            1 => i += 1,
            kind => {
                let len = *options.get(i + 1)? as usize;
                if len < 2 || i + len > options.len() {
                    return None;
                }
                if kind == 2 && len == 4 {
                    return Some(u16::from_be_bytes([options[i + 2], options[i + 3]]) as u32);
                }
                i += len;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(sizes: &[(u32, u32)], single: u32) -> FlowEvidence {
        let mut f = FlowEvidence::default();
        for &(v, n) in sizes {
            for _ in 0..n {
                f.note_data(v, true, 12, None);
            }
        }
        if single > 0 {
            f.note_data(single, false, 12, None);
        }
        f
    }

    #[test]
    fn syn_mss_less_options_wins_when_the_payloads_agree() {
        let f = flow(&[(1448 * 44, 10), (1448 * 3 + 100, 1)], 0);
        assert_eq!(f.infer(Some(1460)), Some((1448, MssSource::Syn)));
        // The same flow at MTU 9000.
        let f = flow(&[(8948 * 7, 10)], 0);
        assert_eq!(f.infer(Some(8960)), Some((8948, MssSource::Syn)));
    }

    #[test]
    fn one_super_packet_is_no_evidence_of_its_own_size() {
        // Wireshark's ipv4_tcp_http_xml_tso.pcap: one pushed TSO packet of
        // 1976 bytes, no handshake: not "one segment of 1976".
        let f = flow(&[(1976, 1)], 0);
        assert_eq!(f.infer(None), None);
        // Two of them are evidence again (the same length twice: its own
        // size, a jumbo segment's, as before).
        let f = flow(&[(1976, 2)], 0);
        assert_eq!(f.infer(None), Some((1976, MssSource::SuperPackets)));
    }

    #[test]
    fn a_syn_the_payloads_contradict_is_not_used() {
        // The path clamped the MSS to 1388 (e.g. a tunnel's PMTU).
        let f = flow(&[(1388 * 40, 8), (1388 * 13, 3)], 1388);
        assert_eq!(f.infer(Some(1460)), Some((1388, MssSource::SuperPackets)));
    }

    #[test]
    fn common_divisor_ignores_short_tails_and_even_counts() {
        // Mostly full super-packets, a few with a short last segment.
        let f = flow(&[(8948 * 7, 20), (8948 * 3, 5), (8948 * 2 + 17, 2)], 0);
        assert_eq!(f.infer(None), Some((8948, MssSource::SuperPackets)));
        // Every super-packet holds an even count: the single segment decides.
        let f = flow(&[(1448 * 44, 20), (1448 * 6, 5), (1448 * 4, 3)], 1448);
        assert_eq!(f.infer(None), Some((1448, MssSource::SuperPackets)));
        // Without a single segment the even-count flow cannot be told apart
        // from 2 x MSS; the divisor is then the largest shared one.
        let f = flow(&[(1448 * 44, 20), (1448 * 6, 5), (1448 * 4, 3)], 0);
        assert_eq!(f.infer(None), Some((1448 * 2, MssSource::SuperPackets)));
        // Divisors above a jumbo segment are not believed.
        let f = flow(&[(1448 * 44, 20), (1448 * 22, 5)], 0);
        assert_eq!(f.infer(None), None);
    }

    #[test]
    fn tails_that_a_divisor_explains_do_not_shrink_the_mss() {
        // A real receiver capture (IPv6, MTU 1500, no SYN, no single
        // segment): two super-packets end in tails of 6 x 204 and 204 bytes
        // (1428 = 7 x 204), which lifted 204 past the 5% threshold.
        let f = flow(
            &[
                (5104, 3),
                (7140, 2),
                (14280, 1),
                (21420, 1),
                (27132, 1),
                (38732, 1),
                (45696, 2),
                (48552, 1),
                (51408, 2),
                (52632, 1),
                (53040, 1),
                (56512, 1),
                (64260, 15),
            ],
            0,
        );
        assert_eq!(f.infer(None), Some((1428, MssSource::SuperPackets)));
        // Another run: multiples of the MSS are not taken for it either.
        let f = flow(
            &[
                (5104, 3),
                (7140, 2),
                (13564, 1),
                (14280, 1),
                (21420, 1),
                (27132, 1),
                (44444, 1),
                (45696, 3),
                (55800, 1),
                (64260, 18),
            ],
            0,
        );
        assert_eq!(f.infer(None), Some((1428, MssSource::SuperPackets)));
        // A true 204-byte MSS whose full super-packets could not take one
        // more segment is still found.
        let f = flow(
            &[
                (204 * 320, 10),
                (204 * 101, 3),
                (204 * 57, 2),
                (204 * 13, 2),
            ],
            0,
        );
        assert_eq!(f.infer(None), Some((204, MssSource::SuperPackets)));
    }

    /// A flow as a receiver captures it: `(payload, PSH)` per packet.
    fn receiver_flow(packets: &[(u32, bool)]) -> FlowEvidence {
        let mut f = FlowEvidence::default();
        for &(len, push) in packets {
            f.note_data(len, len > 1500 - 52, 12, None);
            if push {
                f.note_pushed(len);
            } else {
                f.note_unpushed(len);
            }
        }
        f
    }

    #[test]
    fn unpushed_packets_hold_whole_segments() {
        // BIG TCP at MTU 9000: super-packets of 20, 7 and 3 segments of
        // 8948 without PSH, writes ending in short segments with PSH, among
        // them half-MSS singles (which once made 4474 the MSS).
        let mut p = Vec::new();
        for i in 0..30 {
            let tail = 1 + (i * 997) % 8947;
            p.extend([
                (8948 * 20, false),
                (8948 * 7, false),
                (8948 * 2 + tail, true),
            ]);
            p.extend([(8948 * 3, false), (8948 * 5, true)]);
        }
        p.extend([(4474, true), (8948 + 4474, true)]);
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((8948, MssSource::SuperPackets))
        );
        // MTU 1500, MSS 1440: even counts (delayed ACKs clock out pairs),
        // two writes that end in half a segment; one single full segment
        // decides.
        let mut p = Vec::new();
        for i in 0..30 {
            let tail = 1 + (i * 331) % 1439;
            p.extend([(1440 * 44, false), (1440 * 2, false), (tail, true)]);
            p.push((1440 * 4 + tail, true));
        }
        p.extend([(720, true), (1440 * 3 + 720, true), (1440, false)]);
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((1440, MssSource::SuperPackets))
        );
        // Super-packets of 33, 6 and 22 segments: no pairwise common
        // divisor is one segment, the three together are; with or without
        // PSH on every packet (no evidence for the PSH rule then).
        for psh in [false, true] {
            let p: Vec<(u32, bool)> = (0..20)
                .flat_map(|_| [(1448 * 33, psh), (1448 * 6, psh), (1448 * 22, psh)])
                .collect();
            assert_eq!(
                receiver_flow(&p).infer(None),
                Some((1448, MssSource::SuperPackets)),
                "PSH {psh}"
            );
        }
        // An MSS far below the MTU: merged packets within the MTU
        // (988 + 324 with PSH) do not hide it; 64 and 2 segments without.
        let mut p = Vec::new();
        for _ in 0..30 {
            p.extend([
                (988 * 64, false),
                (988 * 2, false),
                (988 + 324, true),
                (988 * 3, false),
            ]);
        }
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((988, MssSource::SuperPackets))
        );
        // A real receiver capture (IPv6, TCP_MAXSEG 1000, no SYN): every
        // packet without PSH holds an even count; writes ending in 5, 15
        // and 17 segments tell 988 from 1976.
        let counts = [
            (64, 35, false),
            (2, 34, true),
            (62, 3, false),
            (60, 3, false),
            (58, 2, false),
        ];
        let mut p: Vec<(u32, bool)> = Vec::new();
        for (k, n, push) in counts {
            p.extend(std::iter::repeat_n((988 * k, push), n));
        }
        p.extend([(1312, true); 6]);
        p.extend([
            (988 * 6, true),
            (988 * 4, true),
            (988 * 5, true),
            (988 * 5, true),
        ]);
        p.extend([
            (988 * 17, true),
            (988 * 15, true),
            (1144, true),
            (324, true),
        ]);
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((988, MssSource::SuperPackets))
        );
        // ... and the SYN's MSS is accepted for it.
        assert_eq!(
            receiver_flow(&p).infer(Some(1000)),
            Some((988, MssSource::Syn))
        );
    }

    #[test]
    fn one_window_limited_packet_without_psh_is_no_evidence() {
        // A real receiver capture (IPv6, MTU 9000, TCP_MAXSEG 1452): every
        // packet but one 160-byte one carries PSH.
        let mut p: Vec<(u32, bool)> = Vec::new();
        for k in [5, 5, 10, 15, 17, 31, 31, 34, 34, 34] {
            p.push((1440 * k, true));
        }
        p.extend(std::iter::repeat_n((1440 * 45, true), 40));
        p.extend([(33504, true), (1120, true), (64, true), (24160, true)]);
        p.extend([
            (2944, true),
            (2944, true),
            (8800, true),
            (8800, true),
            (160, false),
        ]);
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((1440, MssSource::SuperPackets))
        );
    }

    #[test]
    fn a_whole_fraction_of_the_full_super_packet_when_no_divisor_is_a_segment() {
        // A real receiver capture (IPv6, MTU 9000, TCP_MAXSEG 6000, no SYN,
        // 2026-11-26): PSH on every packet (forced pushes every 10
        // segments), 59880 = 10 x 5988 = 8 x 7485, tails of 3 x 5988 +
        // 4660 (a 256 KiB write). No pairwise divisor lies in range; the
        // fractions of 59880 that leave no room for one more segment under
        // 64 KiB are 5988 and 7485, and 5988 (MSS option 6000) is even.
        let mut p: Vec<(u32, bool)> = Vec::new();
        p.extend(std::iter::repeat_n((59880, true), 44));
        p.extend(std::iter::repeat_n((22624, true), 5));
        p.extend([(38424, true), (38424, true), (29940, true), (29940, true)]);
        p.extend([(56536, true), (54888, true), (4008, true)]);
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((5988, MssSource::SuperPackets))
        );
        // Without PSH on the whole packets, they hold whole segments: the
        // largest fraction that leaves no room for another is taken (both
        // explain every packet; the SYN or an IPv4 ID would settle it).
        let p: Vec<(u32, bool)> = p
            .into_iter()
            .map(|(len, _)| (len, len % 29940 != 0))
            .collect();
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((7485, MssSource::SuperPackets))
        );
        // 12 segments of 5141 (61692, also 53 x 1164): the fractions
        // that one more segment would fit beside are no candidates.
        let mut p: Vec<(u32, bool)> = Vec::new();
        for _ in 0..7 {
            p.extend([(61692, false), (10282, true)]);
        }
        p.push((15424, true));
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((5141, MssSource::SuperPackets))
        );
    }

    #[test]
    fn pushed_whole_packets_tell_the_segment_when_unpushed_counts_share_a_factor() {
        // A real receiver capture (IPv6, MTU 1500, BIG TCP at 185000, no
        // SYN, 2026-11-26): every packet without PSH holds 64 or 16
        // segments of 1428 (22848 / 3 = 7616 divides them too); pushed
        // packets of 5, 10, 15, 19, 32 and 48 segments divide by 1428
        // only.
        let counts: [(u32, usize, bool); 14] = [
            (1428, 7, true),
            (7140, 2, true),
            (14280, 1, true),
            (21420, 1, true),
            (22848, 2, false),
            (27132, 1, true),
            (45696, 3, true),
            (68544, 2, true),
            (75216, 1, true),
            (75684, 1, true),
            (77932, 6, true),
            (79360, 3, true),
            (91392, 2, true),
            (91392, 17, false),
        ];
        let mut p: Vec<(u32, bool)> = Vec::new();
        for (len, n, push) in counts {
            p.extend(std::iter::repeat_n((len, push), n));
        }
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((1428, MssSource::SuperPackets))
        );
    }

    #[test]
    fn a_repeated_tail_does_not_lift_a_small_divisor() {
        // A real receiver capture (IPv6, MTU 9000, BIG TCP at 185000, no
        // SYN, 2026-11-26): ten packets of 20 x 8928 and ten of 9 x 8928 +
        // 3232 (the same write size each time), all pushed; 128 divides
        // both, 8928 five distinct lengths.
        let counts: [(u32, usize, bool); 8] = [
            (8928, 1, false),
            (26784, 2, true),
            (53568, 1, true),
            (65728, 1, true),
            (80352, 1, true),
            (83584, 10, true),
            (116416, 1, true),
            (178560, 10, true),
        ];
        let mut p: Vec<(u32, bool)> = Vec::new();
        for (len, n, push) in counts {
            p.extend(std::iter::repeat_n((len, push), n));
        }
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((8928, MssSource::SuperPackets))
        );
    }

    /// `(payload, count, PSH)` rows as a receiver captured them.
    fn rows(rows: &[(u32, usize, bool)]) -> FlowEvidence {
        let mut p: Vec<(u32, bool)> = Vec::new();
        for &(len, n, push) in rows {
            p.extend(std::iter::repeat_n((len, push), n));
        }
        receiver_flow(&p)
    }

    #[test]
    fn real_flows_the_old_rule_missed_without_the_handshake() {
        // Receiver captures of scripts/gso-receiver-check.sh beside a
        // compile (2026-11-28), SYNs removed; each was cut at the size
        // in the comment by the rule before decision 0235.
        // IPv6, MTU 9000, default MSS, 256 KiB writes, all but one
        // pushed: tails are multiples of 32, and 96 made more lengths
        // whole than 8928 (was 96).
        let f = rows(&[
            (6464, 1, true),
            (8928, 1, false),
            (12992, 1, true),
            (26784, 2, true),
            (53568, 5, true),
            (80352, 1, true),
            (94144, 1, true),
            (97536, 1, true),
            (101440, 1, true),
            (108096, 1, true),
            (124800, 1, true),
            (133440, 1, true),
            (142656, 1, true),
            (160704, 1, true),
            (178560, 9, true),
        ]);
        assert_eq!(f.infer(None), Some((8928, MssSource::SuperPackets)));
        // IPv6, MTU 1500, TCP_MAXSEG 1000: 31 packets of 64 x 988
        // without PSH (a NAPI poll's 64 packets, not the 64 KiB limit:
        // one more segment would have fit), pushed ones of 5, 10, 15,
        // 42 and 59 segments (was 7904 and 1976).
        let f = rows(&[
            (324, 1, true),
            (1336, 1, true),
            (4940, 2, true),
            (9880, 1, true),
            (12844, 1, true),
            (14156, 8, true),
            (14820, 1, true),
            (16796, 1, true),
            (21736, 1, true),
            (28628, 1, true),
            (32604, 1, true),
            (32928, 1, true),
            (35568, 1, true),
            (39520, 1, true),
            (46436, 2, true),
            (53508, 1, true),
            (57304, 1, true),
            (58292, 8, true),
            (63232, 31, false),
        ]);
        assert_eq!(f.infer(None), Some((988, MssSource::SuperPackets)));
        let f = rows(&[
            (1976, 1, true),
            (4940, 2, true),
            (5912, 1, true),
            (9880, 1, true),
            (14820, 2, true),
            (19760, 1, true),
            (21736, 1, true),
            (22724, 1, true),
            (35568, 1, true),
            (41496, 2, true),
            (49848, 1, true),
            (51376, 1, true),
            (57304, 1, true),
            (58292, 11, true),
            (63232, 31, false),
        ]);
        assert_eq!(f.infer(None), Some((988, MssSource::SuperPackets)));
        // IPv6, MTU 9000, TCP_MAXSEG 1452, BIG TCP: without PSH 56, 60
        // and 64 segments, whose common divisor is 4 x 1440 (was 2880).
        let f = rows(&[
            (1280, 1, true),
            (1440, 2, true),
            (5760, 5, true),
            (6144, 1, true),
            (7200, 2, true),
            (8640, 1, true),
            (11520, 1, true),
            (14400, 1, true),
            (20416, 1, true),
            (21600, 1, true),
            (24480, 1, true),
            (44640, 2, true),
            (47712, 1, true),
            (48960, 2, true),
            (54336, 1, true),
            (57600, 1, true),
            (72000, 1, true),
            (77824, 3, true),
            (80640, 1, false),
            (86400, 1, false),
            (92160, 16, false),
            (92160, 6, true),
        ]);
        assert_eq!(f.infer(None), Some((1440, MssSource::SuperPackets)));
        // IPv6, MTU 9000, TCP_MAXSEG 6000: one segment the window cut
        // short (2496, without PSH, above the 1500-byte MTU gso assumes)
        // must not rule 5988 out.
        let f = rows(&[
            (2496, 1, false),
            (8728, 1, true),
            (11976, 1, true),
            (29940, 2, true),
            (51260, 1, true),
            (59880, 2, true),
            (81092, 1, true),
            (95808, 8, true),
            (98304, 4, true),
            (116416, 1, true),
            (133728, 1, true),
            (179640, 7, true),
        ]);
        assert_eq!(f.infer(None), Some((5988, MssSource::SuperPackets)));
        // ... and with the handshake it keeps its SYN's size.
        assert_eq!(f.infer(Some(6000)), Some((5988, MssSource::Syn)));
    }

    #[test]
    fn a_divisor_replaces_only_beyond_chance() {
        // Tails on a lattice of 32 (8928 = 32 x 279): one in three is a
        // multiple of 96, which is chance, not a segment.
        assert!(ln_binomial_tail(10, 4, 1.0 / 3.0) > MAX_CHANCE.ln());
        // Three of three tails whole for a divisor of 1 in 181 is not.
        assert!(ln_binomial_tail(3, 3, 8.0 / 1448.0) < MAX_CHANCE.ln());
        assert_eq!(ln_binomial_tail(5, 0, 0.5), 0.0);
        // P(X >= 1) for one trial is p.
        assert!((ln_binomial_tail(1, 1, 0.25) - 0.25f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn one_stray_packet_without_psh_does_not_hide_the_segment() {
        // A real receiver capture under CPU load (IPv6, MTU 9000,
        // TCP_MAXSEG 1452, no SYN, 2026-11-26): 14 packets of 64 x 1440
        // and one of 1440 without PSH, and one of 416 (the window cut
        // it) that no size divides along with them.
        let mut p: Vec<(u32, bool)> = vec![(416, false), (1440, false)];
        p.extend(std::iter::repeat_n((92160, false), 14));
        for k in [5, 10, 15, 16, 17, 19, 31, 34, 36, 39, 49, 54, 64] {
            p.push((1440 * k, true));
        }
        p.extend([(5952, true), (6144, true), (23104, true), (45056, true)]);
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((1440, MssSource::SuperPackets))
        );
        // One packet of half a segment is no stray: it halves.
        let mut p: Vec<(u32, bool)> = vec![(1448, false)];
        p.extend(std::iter::repeat_n((2896 * 20, false), 14));
        assert_eq!(
            receiver_flow(&p).infer(None),
            Some((1448, MssSource::SuperPackets))
        );
    }

    #[test]
    fn firm_ip_id_steps_beat_lengths_that_leave_a_choice() {
        // IPv4, 18 segments of 3463 bytes per packet without PSH (62334
        // is also 9 x 6926), IDs stepping by 18.
        let mut f = FlowEvidence::default();
        for k in 0..8u16 {
            f.note_data(62334, true, 0, Some(1000 + 18 * k));
            f.note_unpushed(62334);
        }
        f.note_data(3464, true, 0, Some(1000 + 18 * 8));
        f.note_pushed(3464);
        assert_eq!(f.infer(None).map(|(m, _)| m), Some(3463));
    }

    #[test]
    fn one_super_packet_with_a_short_tail_is_not_taken_for_a_segment() {
        assert_eq!(flow(&[(1460 * 11 + 300, 1)], 0).infer(None), None);
    }

    #[test]
    fn falls_back_to_single_segments_then_nothing() {
        let f = flow(&[], 1400);
        assert_eq!(f.infer(None), Some((1400, MssSource::ObservedSegment)));
        assert_eq!(flow(&[], 0).infer(None), None);
    }

    #[test]
    fn ip_id_steps_give_the_segment_count() {
        let mut f = FlowEvidence::default();
        // Super-packets of 5 x 1000 bytes, IDs stepping by 5.
        for k in 0..4u16 {
            f.note_data(5000, true, 0, Some(100 + 5 * k));
        }
        assert_eq!(f.id_estimate(), Some(1000));
        assert!(!f.fixed_id());
    }

    #[test]
    fn mss_option_parsing() {
        // NOP, NOP, timestamps (10), MSS 8960.
        let mut o = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        o.extend_from_slice(&[2, 4, 0x23, 0x00]);
        assert_eq!(tcp_mss_option(&o), Some(8960));
        assert_eq!(tcp_mss_option(&[2, 4, 5]), None);
        assert_eq!(tcp_mss_option(&[8, 0, 2, 4, 5, 180]), None);
        assert_eq!(tcp_mss_option(&[0, 2, 4, 5, 180]), None);
    }

    #[test]
    fn every_packet_pushed_takes_the_largest_even_fraction() {
        // A real receiver capture (IPv6, MTU 9000, TCP_MAXSEG 6000, 256 KiB
        // writes, 2026-11-28), SYNs removed, read with gso's default MTU
        // 1500: PSH on every packet, 30, 15, 10 and 5 segments of 5988
        // beside writes' tails (13 x 5988 + 4660 nine times). 4990, 5988
        // and 7485 make the same lengths whole; the MTU's 1428 is none of
        // them.
        let mut f = FlowEvidence::default();
        f.note_mtu_payload(1500 - 72);
        for (len, n) in [
            (6728u32, 1),
            (8484, 1),
            (29940, 2),
            (44080, 1),
            (59880, 1),
            (75776, 1),
            (82504, 9),
            (89820, 3),
            (116416, 1),
            (179640, 9),
        ] {
            for _ in 0..n {
                f.note_data(len, len > 1500 - 72, 12, None);
                f.note_pushed(len);
            }
        }
        assert_eq!(f.infer(None), Some((5988, MssSource::SuperPackets)));
        // Lengths that are all even multiples of the MTU's size: 2896 and
        // 7240 explain them as well, and the MTU's 1448 is kept.
        let mut f = FlowEvidence::default();
        f.note_mtu_payload(1448);
        for (k, n) in [(20u32, 9), (40, 3), (60, 2), (120, 5)] {
            for _ in 0..n {
                f.note_data(1448 * k, true, 12, None);
                f.note_pushed(1448 * k);
            }
        }
        assert_eq!(f.infer(None), None);
    }
}
