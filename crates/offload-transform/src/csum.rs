//! Captures whose TCP/UDP checksums were left to offload.
//!
//! A capture taken on a sending host, or on a virtual link that passes
//! packets with CHECKSUM_PARTIAL (veth, tap), holds in each checksum field
//! only the folded pseudo-header sum (`~csum_tcpudp_magic(.., 0)`, written by
//! `__tcp_v4_send_check` in net/ipv4/tcp_ipv4.c and its IPv6 and UDP
//! counterparts): the NIC was to finish it. Verified as on the wire, every
//! such segment would be "bad-checksum" and nothing would merge; the kernel
//! itself trusts these packets (`skb_csum_unnecessary` is true for
//! CHECKSUM_PARTIAL). So `offload gro`, like `offload analyze`, looks at the
//! first [`PROBE_FRAMES`] frames and turns verification off when it finds one.

use offload::checksum::{fold, pseudo_ipv4, pseudo_ipv6, sum_bytes};
use offload::gso::layout;
use offload::wire::Transport;
use offload::LinkKind;

/// Frames looked at to decide (the same number as `offload analyze`).
pub const PROBE_FRAMES: usize = 2000;

/// The checksum state of one frame's innermost TCP or UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsumState {
    /// The checksum verifies.
    Valid,
    /// The field holds the pseudo-header sum only: left to offload.
    Offloaded,
    /// Wrong (neither valid nor a pseudo-header sum).
    Bad,
    /// Not TCP/UDP, a zero UDP checksum, cut by the snaplen, or unreadable.
    Unknown,
}

/// The state of `frame`'s transport checksum; `vxlan_ports` as for GRO.
pub fn frame_checksum(link: LinkKind, frame: &[u8], vxlan_ports: &[u16]) -> CsumState {
    let Ok(lay) = layout(link, frame, vxlan_ports) else {
        return CsumState::Unknown;
    };
    let field_off = lay.l4_off
        + if lay.l4_proto == Transport::Tcp {
            16
        } else {
            6
        };
    let (Some(l4), Some(field)) = (
        frame.get(lay.l4_off..lay.end),
        frame.get(field_off..field_off + 2),
    ) else {
        return CsumState::Unknown;
    };
    let field = u16::from_be_bytes([field[0], field[1]]);
    if lay.l4_proto == Transport::Udp && field == 0 {
        return CsumState::Unknown;
    }
    let f = |o: usize, n: usize| frame.get(lay.l3_off + o..lay.l3_off + o + n);
    let pseudo = if lay.is_v6() {
        let (Some(s), Some(d)) = (f(8, 16), f(24, 16)) else {
            return CsumState::Unknown;
        };
        pseudo_ipv6(
            s.try_into().expect("16 bytes"),
            d.try_into().expect("16 bytes"),
            lay.l4_proto.protocol(),
            l4.len() as u32,
        )
    } else {
        let (Some(s), Some(d)) = (f(12, 4), f(16, 4)) else {
            return CsumState::Unknown;
        };
        pseudo_ipv4(
            s.try_into().expect("4 bytes"),
            d.try_into().expect("4 bytes"),
            lay.l4_proto.protocol(),
            l4.len() as u32,
        )
    };
    if fold(sum_bytes(pseudo, l4)) == 0xffff {
        return CsumState::Valid;
    }
    let p = fold(pseudo);
    if field == p || field == !p {
        CsumState::Offloaded
    } else {
        CsumState::Bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload::build::{FrameSpec, TcpSpec};

    #[test]
    fn valid_offloaded_and_bad_are_told_apart() {
        let mut f = FrameSpec::tcp4([10, 0, 0, 2], [10, 0, 0, 1], TcpSpec::data(1, 2, 3))
            .payload(vec![7; 100])
            .build();
        let eth = LinkKind::Ethernet;
        assert_eq!(frame_checksum(eth, &f, &[]), CsumState::Valid);
        // What a sender's capture holds: the pseudo-header sum.
        let p = fold(pseudo_ipv4([10, 0, 0, 2], [10, 0, 0, 1], 6, 120));
        f[14 + 20 + 16..14 + 20 + 18].copy_from_slice(&(!p).to_be_bytes());
        assert_eq!(frame_checksum(eth, &f, &[]), CsumState::Offloaded);
        f[14 + 20 + 16] ^= 0x55;
        assert_eq!(frame_checksum(eth, &f, &[]), CsumState::Bad);
        assert_eq!(frame_checksum(eth, &f[..30], &[]), CsumState::Unknown);
    }
}
