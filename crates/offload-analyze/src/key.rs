//! The identity of a flow: one direction of a TCP connection or UDP
//! exchange, keyed by the innermost 5-tuple and, for a tunnelled one, the
//! tunnel's kind, outer addresses and identifier (VNI or GRE key): the
//! inner connection and its tunnel are one key.
//!
//! The outer UDP ports of VXLAN and Geneve are no part of the key: each
//! direction picks its own source port from a hash of the inner flow
//! (`udp_flow_src_port`, include/net/udp.h), and a sender that re-hashes
//! its socket (`sk_rethink_txhash`, on a retransmission timeout or a
//! duplicate of received data) moves to another one mid-connection.
//! Wireshark follows the inner connection across both (its conversation
//! is the inner 5-tuple); so does the analysis. Unlike Wireshark, the
//! same inner 5-tuple in two tunnels (two VNIs, two GRE keys, two pairs
//! of endpoints) is two connections, not one whose sequence numbers
//! jump: docs/decisions/0205-tunnelled-flow-keys.md.

use crate::dissect::{self, Parsed, TunnelKind};

/// The identity of a flow (one direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    pub tunnel: Option<TunnelKey>,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub v6: bool,
}

/// The outer identity of a tunnelled flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TunnelKey {
    pub kind: TunnelKind,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    /// The VNI (VXLAN, Geneve) or the GRE key, when the header has one.
    pub id: Option<u32>,
    pub v6: bool,
}

/// The hasher of every table keyed by a [`FlowKey`] (or by any other
/// field a capture sets): SipHash-1-3 under a key drawn at random per
/// table (`std::hash::RandomState`). A capture is untrusted input: with an
/// unkeyed hash, a file can make every flow collide, and each lookup then
/// walks all flows held (30,000 crafted IPv6 flows took 11 s instead of
/// 0.5 s). docs/decisions/0247-keyed-flow-hashing.md.
pub type KeyedState = std::hash::RandomState;

/// A map from flow keys, hashed with [`KeyedState`].
pub type FlowMap<V> = std::collections::HashMap<FlowKey, V, KeyedState>;

/// Hashed as machine words, every bit of every field fed in on its own:
/// a key-independent fold before the hasher (two address halves XORed
/// into one word) would let a file choose addresses that collide under
/// every key.
impl std::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let word =
            |a: &[u8; 16], i: usize| u64::from_ne_bytes(a[i..i + 8].try_into().unwrap_or_default());
        h.write_u64(word(&self.src, 0));
        h.write_u64(word(&self.src, 8));
        h.write_u64(word(&self.dst, 0));
        h.write_u64(word(&self.dst, 8));
        h.write_u64(
            (self.sport as u64) << 32
                | (self.dport as u64) << 16
                | (self.proto as u64) << 8
                | self.v6 as u64,
        );
        if let Some(t) = &self.tunnel {
            h.write_u64(word(&t.src, 0));
            h.write_u64(word(&t.src, 8));
            h.write_u64(word(&t.dst, 0));
            h.write_u64(word(&t.dst, 8));
            h.write_u64(
                (t.id.unwrap_or(0) as u64) << 32
                    | (t.id.is_some() as u64) << 16
                    | (t.kind as u64) << 8
                    | t.v6 as u64,
            );
        }
    }
}

/// The flows of the last few frames and their slots in a table, so that
/// most frames find their flow without hashing its key: a capture
/// interleaves a handful of busy directions (a bulk transfer's data and
/// its ACKs, two transfers at once), and one remembered flow misses on one
/// frame in five of such a capture (docs/performance.md). The most recent
/// is looked at first. A table clears it whenever slots move (eviction).
#[derive(Debug, Clone, Default)]
pub struct Recent {
    entries: [Option<(FlowKey, u32)>; RECENT],
}

const RECENT: usize = 4;

impl Recent {
    /// The slot of `key`, if it is one of the recent flows.
    #[inline]
    pub fn get(&mut self, key: &FlowKey) -> Option<u32> {
        if let Some((k, s)) = &self.entries[0] {
            if k == key {
                return Some(*s);
            }
        }
        for j in 1..RECENT {
            match &self.entries[j] {
                Some((k, s)) if k == key => {
                    let s = *s;
                    self.entries.swap(0, j);
                    return Some(s);
                }
                Some(_) => {}
                None => break,
            }
        }
        None
    }

    /// Remembers `key` at `slot` as the most recent, forgetting the oldest.
    pub fn put(&mut self, key: FlowKey, slot: u32) {
        self.entries.rotate_right(1);
        self.entries[0] = Some((key, slot));
    }

    /// The slot of the flow found or put last: the previous frame's.
    #[inline]
    pub fn latest(&self) -> Option<u32> {
        self.entries[0].map(|(_, s)| s)
    }

    /// Forgets every flow (the table's slots moved).
    pub fn clear(&mut self) {
        self.entries = Default::default();
    }
}

/// Where a frame's flow sits in the pass's flow table
/// (`analysis::FlowTable`), handed to the what-if worker so that a frame's
/// flow is looked up once, not once per table. A table slot holds the same
/// key until the table evicts, which starts a new `epoch`; the worker
/// remembers its own slot for each table slot of the current epoch
/// (`whatif::WhatIfWorker`). Given only when the table was updated with
/// the frame's own key (not a reassembled datagram's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHint {
    pub slot: u32,
    pub epoch: u64,
}

impl FlowKey {
    pub fn of(p: &Parsed) -> FlowKey {
        FlowKey {
            tunnel: p.tunnel.map(|t| TunnelKey {
                kind: t.kind,
                src: t.ip.src,
                dst: t.ip.dst,
                id: t.id,
                v6: t.ip.v6,
            }),
            src: p.ip.src,
            dst: p.ip.dst,
            sport: p.sport,
            dport: p.dport,
            proto: p.ip.proto,
            v6: p.ip.v6,
        }
    }

    /// The other direction of the same conversation: both levels'
    /// addresses swapped, the tunnel's kind and identifier kept.
    pub fn reverse(&self) -> FlowKey {
        FlowKey {
            tunnel: self.tunnel.map(|t| TunnelKey {
                src: t.dst,
                dst: t.src,
                ..t
            }),
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
            v6: self.v6,
        }
    }

    /// The other direction of the same inner connection in the same
    /// tunnel direction: mirrored traffic (a switch's SPAN or ERSPAN
    /// session, a tap that tunnels what it sees) carries both directions
    /// from the mirror to the collector, so the outer addresses do not
    /// swap. tshark pairs them by the inner connection alone.
    pub fn mirrored(&self) -> Option<FlowKey> {
        let t = self.tunnel?;
        Some(FlowKey {
            tunnel: Some(t),
            ..self.reverse()
        })
    }

    /// The key without the tunnel's identifier: a GRE tunnel may send
    /// with one key and receive with another (`ip tunnel ... ikey K1 okey
    /// K2`), so a GRE direction whose exact reverse never came pairs by
    /// this key instead.
    pub fn without_tunnel_id(&self) -> FlowKey {
        FlowKey {
            tunnel: self.tunnel.map(|t| TunnelKey { id: None, ..t }),
            ..*self
        }
    }

    pub fn protocol_name(&self) -> &'static str {
        match self.proto {
            dissect::PROTO_TCP => "tcp",
            dissect::PROTO_UDP => "udp",
            _ => "other",
        }
    }

    /// "TCP 10.0.0.2:33333 -> 10.0.0.1:80"; a tunnelled flow names its
    /// tunnel first: "VXLAN 192.168.0.1:50000 -> 192.168.0.2:4789 (VNI
    /// 42), inner TCP ...", "GRE 192.168.0.1 -> 192.168.0.2 (key 7), inner
    /// ...". `outer_ports`: the outer UDP ports a UDP tunnel's direction
    /// used first (they are no part of the key).
    pub fn describe(&self, outer_ports: Option<(u16, u16)>) -> String {
        let inner = format!(
            "{} {} -> {}",
            self.protocol_name().to_uppercase(),
            dissect::fmt_endpoint(&self.src, self.v6, self.sport),
            dissect::fmt_endpoint(&self.dst, self.v6, self.dport)
        );
        let Some(t) = self.tunnel else {
            return inner;
        };
        let (src, dst) = match outer_ports.filter(|_| t.kind.udp()) {
            Some((sp, dp)) => (
                dissect::fmt_endpoint(&t.src, t.v6, sp),
                dissect::fmt_endpoint(&t.dst, t.v6, dp),
            ),
            None => (
                dissect::fmt_addr(&t.src, t.v6),
                dissect::fmt_addr(&t.dst, t.v6),
            ),
        };
        let id = match (t.kind.id_name(), t.id) {
            (Some(name), Some(id)) => format!(" ({name} {id})"),
            _ => String::new(),
        };
        format!(
            "{} {src} -> {dst}{id}, inner {inner}",
            t.kind.name().to_uppercase()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn v6(src: [u8; 16]) -> FlowKey {
        FlowKey {
            tunnel: None,
            src,
            dst: [0xfd; 16],
            sport: 40000,
            dport: 80,
            proto: dissect::PROTO_TCP,
            v6: true,
        }
    }

    /// IPv6 sources whose two address halves XOR (one rotated) to the same
    /// word: one hash value for all under the fold the key once had, so a
    /// capture of such flows made every lookup walk every flow.
    fn folded_alike(i: u64) -> [u8; 16] {
        const C: u64 = 0x0123_4567_89ab_cdef;
        let s0 = 0xfd00 | i << 16;
        let s1 = (s0 ^ C).rotate_right(32);
        let mut a = [0; 16];
        a[..8].copy_from_slice(&s0.to_ne_bytes());
        a[8..].copy_from_slice(&s1.to_ne_bytes());
        a
    }

    #[test]
    fn keys_built_to_collide_hash_apart() {
        let state = KeyedState::new();
        let hashes: std::collections::HashSet<u64> = (0..1000)
            .map(|i| state.hash_one(v6(folded_alike(i))))
            .collect();
        // 1000 distinct keys under a random 128-bit key: a repeat has
        // probability about 2^-44.
        assert_eq!(hashes.len(), 1000);
    }

    #[test]
    fn recent_flows_find_their_slots_until_cleared() {
        let mut r = Recent::default();
        let keys: Vec<FlowKey> = (0..6).map(|i| v6(folded_alike(i))).collect();
        assert_eq!(r.get(&keys[0]), None);
        for (i, k) in keys.iter().enumerate().take(4) {
            r.put(*k, i as u32);
        }
        for (i, k) in keys.iter().enumerate().take(4) {
            assert_eq!(r.get(k), Some(i as u32));
        }
        // A fifth flow takes the place of one of the four (the order is
        // by use only roughly: a hit swaps to the front); the most recent
        // hit (keys[3]) stays.
        r.put(keys[4], 4);
        assert_eq!(r.latest(), Some(4));
        assert_eq!(r.get(&keys[4]), Some(4));
        assert_eq!(r.get(&keys[3]), Some(3));
        assert_eq!(r.latest(), Some(3));
        assert_eq!(r.get(&keys[5]), None);
        let found = (0..4).filter(|&i| r.get(&keys[i]).is_some()).count();
        assert_eq!(found, 3);
        r.clear();
        assert!(keys.iter().all(|k| r.get(k).is_none()));
    }
}
