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

/// Hashed as a few machine words (the derived hash feeds every field and
/// array length separately; flow lookups run several times per frame).
/// Equal keys hash equally: every field goes in.
impl std::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let words = |a: &[u8; 16]| {
            let (x, y) = a.split_at(8);
            (
                u64::from_ne_bytes(x.try_into().unwrap_or_default()),
                u64::from_ne_bytes(y.try_into().unwrap_or_default()),
            )
        };
        let (s0, s1) = words(&self.src);
        let (d0, d1) = words(&self.dst);
        h.write_u64(s0 ^ s1.rotate_left(32));
        h.write_u64(d0 ^ d1.rotate_left(32));
        h.write_u64(
            (self.sport as u64) << 32
                | (self.dport as u64) << 16
                | (self.proto as u64) << 8
                | self.v6 as u64,
        );
        if let Some(t) = &self.tunnel {
            let (s0, s1) = words(&t.src);
            let (d0, d1) = words(&t.dst);
            h.write_u64(s0 ^ s1.rotate_left(32) ^ d0.rotate_left(16) ^ d1.rotate_left(48));
            h.write_u64(
                (t.id.unwrap_or(0) as u64) << 32
                    | (t.id.is_some() as u64) << 16
                    | (t.kind as u64) << 8
                    | t.v6 as u64,
            );
        }
    }
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
