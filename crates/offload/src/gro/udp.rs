//! UDP GRO: `udp4_gro_receive` / `udp6_gro_receive` → `udp_gro_receive`,
//! either the tunnel path (a VXLAN socket on the destination port) or
//! `udp_gro_receive_segment` (a `UDP_GRO` socket, or
//! `rx-udp-gro-forwarding` with no socket) (`net/ipv4/udp_offload.c`).
//!
//! Segment rules: non-zero checksum; UDP length equal to the bytes present;
//! same ports; the 6.18 network checks; a datagram larger than the run's
//! first completes the run and starts a new one; a shorter one is merged
//! and ends the run; at most 64 datagrams; below 64 KiB in total.

use super::rx::Skb;
use super::tcp::l4_checksum_ok_at;
use super::{max_size, Delivered, FlushReason, GroEngine, Verdict, GRO_LEGACY_MAX_SIZE};
use crate::tunnel::{udp_tunnel_on, UdpTunnel};
use crate::wire::udp::{self, field};
use crate::wire::{be16, Transport};

/// `UDP_GRO_CNT_MAX`.
pub const UDP_GRO_CNT_MAX: u32 = 64;

impl GroEngine {
    /// Runs UDP GRO for a frame whose network layer accepted it.
    pub(super) fn udp_receive<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &Skb<'_>,
        out: &mut F,
    ) -> Verdict {
        let f = skb.frame();
        let uh = skb.lay.l4_off;
        if f.len() < uh + udp::HEADER_LEN {
            return Verdict::Pass(FlushReason::Malformed);
        }
        let check = be16(f, uh + field::CHECKSUM);
        // skb_gro_checksum_validate_zero_check: a zero checksum is not checked.
        if !skb.l3_flush
            && check != 0
            && self.needs_verify(skb)
            && !l4_checksum_ok_at(f, skb.lay.l3_off, uh, skb.lay.ip, Transport::Udp)
        {
            return Verdict::Pass(FlushReason::BadChecksum);
        }
        let dport = be16(f, uh + field::DST_PORT.start);
        if let Some(kind) = udp_tunnel_on(dport, &self.cfg.vxlan_ports, &self.cfg.geneve_ports) {
            // The tunnel path takes one level of encapsulation only.
            if skb.lay.outer.is_some() {
                return Verdict::Pass(FlushReason::NestedTunnel);
            }
            // VXLAN: the outer checksum used one known-good level (a zero
            // one too: `skb_gro_incr_csum_unnecessary` runs whenever
            // validation did not fail), unless the network layer had set
            // flush.
            let csum_cnt = if kind != UdpTunnel::Vxlan || skb.l3_flush {
                skb.csum_cnt
            } else {
                skb.csum_cnt.saturating_sub(1)
            };
            return self.udp_tunnel_receive(&Skb { csum_cnt, ..*skb }, kind, out);
        }
        if !self.cfg.udp.applies_to(dport) {
            return Verdict::Pass(FlushReason::UnsupportedProtocol);
        }
        self.udp_segment(skb, out)
    }

    /// `udp_gro_receive_segment`.
    fn udp_segment<F: FnMut(&Delivered<'_>)>(&mut self, skb: &Skb<'_>, out: &mut F) -> Verdict {
        let f = skb.frame();
        let uh = skb.lay.l4_off;
        if be16(f, uh + field::CHECKSUM) == 0 {
            return Verdict::Pass(FlushReason::UdpZeroChecksum);
        }
        let ulen = be16(f, uh + field::LENGTH.start) as usize;
        if ulen <= udp::HEADER_LEN || ulen != f.len() - uh {
            return Verdict::Pass(FlushReason::LengthMismatch);
        }
        let len = (ulen - udp::HEADER_LEN) as u32;
        let Some(idx) = self.lookup(skb) else {
            if skb.l3_flush {
                return Verdict::Pass(FlushReason::LengthMismatch);
            }
            self.hold(skb, len, uh + udp::HEADER_LEN, out);
            return Verdict::Consumed;
        };
        let held = self.held.get(idx);
        let p_ulen = be16(&held.data, held.lay.l4_off + field::LENGTH.start) as usize;
        let reason = if let Some(r) = self.cfg.kernel.network_flush(self.held.get_mut(idx), skb) {
            Some(r)
        } else if ulen > p_ulen {
            Some(FlushReason::DatagramLarger)
        } else if skb.l3_flush {
            Some(FlushReason::IncomingLengthMismatch)
        } else {
            let p = self.held.get(idx);
            let grown = p.skb_len() as u64 + len as u64;
            if grown >= max_size(&self.cfg, p.outer_protocol) as u64
                || grown >= GRO_LEGACY_MAX_SIZE as u64
            {
                Some(FlushReason::SizeLimit)
            } else {
                None
            }
        };
        if let Some(r) = reason {
            self.complete(idx, r, out);
            if skb.l3_flush {
                return Verdict::Pass(FlushReason::LengthMismatch);
            }
            self.hold(skb, len, uh + udp::HEADER_LEN, out);
            return Verdict::Consumed;
        }
        let zero_copy = self.zero_copy;
        let p = self.held.get_mut(idx);
        p.data
            .append(f, uh + udp::HEADER_LEN, skb.input.frame, zero_copy);
        p.count += 1;
        p.payload += len;
        p.last_frame = skb.input.frame;
        p.last_ts = skb.input.timestamp_ns;
        let end = if ulen != p_ulen {
            Some(FlushReason::ShortSegment)
        } else if p.count >= UDP_GRO_CNT_MAX {
            Some(FlushReason::SegmentCountLimit)
        } else {
            None
        };
        if let Some(r) = end {
            self.complete(idx, r, out);
        }
        Verdict::Consumed
    }
}
