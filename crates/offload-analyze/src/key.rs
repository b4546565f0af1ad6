//! The identity of a flow: one direction of a TCP connection or UDP
//! exchange, keyed by the innermost 5-tuple and, for VXLAN, the outer
//! addresses, ports and VNI (so the inner flow and its tunnel are one key).

use crate::dissect::{self, Parsed};

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
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub vni: u32,
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
                (t.vni as u64) << 32
                    | (t.sport as u64) << 16
                    | t.dport as u64 ^ (t.v6 as u64) << 63,
            );
        }
    }
}

impl FlowKey {
    pub fn of(p: &Parsed) -> FlowKey {
        FlowKey {
            tunnel: p.tunnel.map(|t| TunnelKey {
                src: t.ip.src,
                dst: t.ip.dst,
                sport: t.sport,
                dport: t.dport,
                vni: t.vni,
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

    /// The other direction of the same conversation.
    pub fn reverse(&self) -> FlowKey {
        FlowKey {
            tunnel: self.tunnel.map(|t| TunnelKey {
                src: t.dst,
                dst: t.src,
                // The reverse tunnel direction picks its own source port
                // (a hash of the inner flow): tunnelled flows pair by
                // `pairing_key` instead.
                sport: t.dport,
                dport: t.sport,
                vni: t.vni,
                v6: t.v6,
            }),
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
            v6: self.v6,
        }
    }

    /// The key without the tunnel's UDP ports: each direction of a
    /// tunnelled connection picks its own outer source port (a hash of the
    /// inner flow), so the two directions pair by the inner 5-tuple, the
    /// outer addresses and the VNI, as tshark pairs them.
    pub fn pairing_key(&self) -> FlowKey {
        FlowKey {
            tunnel: self.tunnel.map(|t| TunnelKey {
                sport: 0,
                dport: 0,
                ..t
            }),
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

    /// "10.0.0.2:33333 -> 10.0.0.1:80".
    pub fn describe(&self) -> String {
        let inner = format!(
            "{} {} -> {}",
            self.protocol_name().to_uppercase(),
            dissect::fmt_endpoint(&self.src, self.v6, self.sport),
            dissect::fmt_endpoint(&self.dst, self.v6, self.dport)
        );
        match self.tunnel {
            Some(t) => format!(
                "VXLAN {} -> {} (VNI {}), inner {}",
                dissect::fmt_endpoint(&t.src, t.v6, t.sport),
                dissect::fmt_endpoint(&t.dst, t.v6, t.dport),
                t.vni,
                inner
            ),
            None => inner,
        }
    }
}
