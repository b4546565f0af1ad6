//! GSO through tunnels: Geneve with options, and tunnels the engine does
//! not model (refused, so that `offload gso` copies them unchanged).

use super::*;
use crate::build::{FrameSpec, TcpSpec};

/// Ethernet / IPv4 / UDP to `dport` / `tunnel` header / inner Ethernet /
/// IPv4 / TCP with `payload` bytes: a sender-side super-packet (lengths
/// covering everything, checksums left to the segmentation).
fn udp_tunnel(dport: u16, tunnel: &[u8], payload: usize) -> Vec<u8> {
    let inner = FrameSpec::tcp4([10, 0, 0, 2], [10, 0, 0, 1], TcpSpec::data(1, 2, 1000))
        .payload((0..payload).map(|i| i as u8).collect())
        .build();
    let mut udp = vec![0u8; 8];
    udp[0..2].copy_from_slice(&5555u16.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(tunnel);
    udp.extend_from_slice(&inner);
    let ul = udp.len() as u16;
    udp[4..6].copy_from_slice(&ul.to_be_bytes());
    let mut outer = FrameSpec::udp4([192, 0, 2, 2], [192, 0, 2, 1], 5555, dport);
    outer.l2 = FrameSpec::tcp4([0; 4], [0; 4], TcpSpec::data(0, 0, 0)).l2;
    let mut f = outer.build();
    // Replace the built UDP part by ours and fix the IPv4 header.
    f.truncate(14 + 20);
    f.extend_from_slice(&udp);
    let tot = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = crate::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

fn geneve_header() -> Vec<u8> {
    // Version 0, 8 bytes of options, protocol TEB, VNI 0x1389, one option.
    vec![
        0x02, 0x00, 0x65, 0x58, 0x00, 0x13, 0x89, 0x00, 0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe,
        0xef,
    ]
}

#[test]
fn geneve_with_options_is_cut_inside() {
    let f = udp_tunnel(6081, &geneve_header(), 3500);
    let lay = layout(LinkKind::Ethernet, &f, &[]).unwrap();
    let o = lay.outer.expect("Geneve seen");
    assert!(matches!(
        o.encap,
        crate::layout::Encap::Geneve { len: 16, eth: true }
    ));
    let mut segs = Vec::new();
    let n = segment(
        LinkKind::Ethernet,
        &f,
        &GsoParams::new(1000),
        &[],
        &mut |s: &[u8]| segs.push(s.to_vec()),
    )
    .unwrap();
    assert_eq!(n, 4);
    let mut payload = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        // Outer IPv4 length and checksum, outer UDP length.
        assert_eq!(u16::from_be_bytes([s[16], s[17]]) as usize, s.len() - 14);
        assert_eq!(crate::checksum::checksum(&s[14..34]), 0);
        assert_eq!(u16::from_be_bytes([s[38], s[39]]) as usize, s.len() - 34);
        // The Geneve header, options included, is copied.
        assert_eq!(&s[42..58], &geneve_header()[..]);
        // Inner IPv4 and TCP are valid, sequence advances by the MSS.
        let il3 = 58 + 14;
        assert_eq!(crate::checksum::checksum(&s[il3..il3 + 20]), 0);
        let seq = u32::from_be_bytes(s[il3 + 24..il3 + 28].try_into().unwrap());
        assert_eq!(seq, 1000 + 1000 * i as u32);
        let pseudo = crate::checksum::pseudo_ipv4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            6,
            (s.len() - il3 - 20) as u32,
        );
        assert!(crate::checksum::verify(pseudo, &s[il3 + 20..]));
        payload.extend_from_slice(&s[il3 + 40..]);
    }
    assert_eq!(payload, (0..3500).map(|i| i as u8).collect::<Vec<_>>());
}

#[test]
fn unmodelled_tunnels_are_refused_not_cut_as_udp() {
    // VXLAN-GPE (4790) is a tunnel the engine does not segment.
    let f = udp_tunnel(4790, &[0x0c, 0, 0, 3, 0, 0, 1, 0], 3000);
    assert!(matches!(
        layout(LinkKind::Ethernet, &f, &[]),
        Err(GsoError::Unsupported(_))
    ));
    // Geneve OAM packets are control traffic: refused.
    let mut g = geneve_header();
    g[1] |= 0x80;
    let f = udp_tunnel(6081, &g, 3000);
    assert!(layout(LinkKind::Ethernet, &f, &[]).is_err());
    // A plain UDP super-packet to another port is still USO.
    let f = udp_tunnel(9999, &[], 3000);
    let lay = layout(LinkKind::Ethernet, &f, &[]).unwrap();
    assert!(lay.outer.is_none());
}

/// A hand-built layout cannot make `segment_layout`
/// panic, whatever its offsets say.
#[test]
fn hand_built_layouts_never_panic() {
    let f = udp_tunnel(6081, &geneve_header(), 3000);
    let good = layout(LinkKind::Ethernet, &f, &[]).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    for _ in 0..20_000 {
        let mut l = good;
        let n = f.len() + 80;
        match next(8) {
            0 => l.l3_off = next(n),
            1 => l.l4_off = next(n),
            2 => l.l4_header_len = next(200),
            3 => l.end = next(n),
            4 => l.jumbo_hbh = !l.jumbo_hbh,
            5 => l.ip = IpVersion::V6,
            6 => {
                if let Some(o) = l.outer.as_mut() {
                    o.l3_off = next(n);
                    o.encap_off = next(n);
                }
            }
            _ => l.l4_proto = Transport::Udp,
        }
        let mss = 1 + next(4000) as u32;
        let _ = segment_layout(
            &f[..next(f.len() + 1)],
            &l,
            &GsoParams::new(mss),
            &mut |_| {},
        );
    }
}
