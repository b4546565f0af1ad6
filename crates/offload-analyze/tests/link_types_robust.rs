//! Truncated and lying link headers never panic: for each link type
//! `crate::link` reads (and MPLS, PPPoE and LLC/SNAP inside Ethernet), a
//! valid frame carrying IPv4 or IPv6 TCP is cut anywhere and has bytes of
//! its link header overwritten with anything; the view, the dissection,
//! the snap-length classification and the skip reason must each return,
//! and a frame without a packet must have a reason that names a header
//! and a field (or what it carries instead).

use offload::build::{FrameSpec, TcpSpec};
use offload_analyze::dissect;
use offload_analyze::link::{self, linktype, Skip};
use proptest::prelude::*;

/// (link type, link header before an IPv4 packet, before an IPv6 packet).
fn heads() -> Vec<(u32, Vec<u8>, Vec<u8>)> {
    let wifi = |et: [u8; 2]| {
        let mut h = vec![0x88, 0x02, 0, 0];
        h.extend_from_slice(&[0; 18]);
        h.extend_from_slice(&[0x10, 0, 0, 0]);
        h.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, et[0], et[1]]);
        h
    };
    let macs = [2u8, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let both = |t: u32, f: &dyn Fn(bool) -> Vec<u8>| (t, f(false), f(true));
    let et = |v6: bool| if v6 { [0x86, 0xdd] } else { [0x08, 0x00] };
    let pp = |v6: bool| if v6 { [0x00, 0x57] } else { [0x00, 0x21] };
    vec![
        both(linktype::PPP, &|v6| [&[0xff, 0x03][..], &pp(v6)].concat()),
        both(linktype::PPP_HDLC, &|v6| {
            [&[0xff, 0x03][..], &pp(v6)].concat()
        }),
        both(linktype::PPP_PPPD, &|v6| {
            [&[0x01, 0x03][..], &pp(v6)].concat()
        }),
        both(linktype::PPP_ETHER, &|v6| {
            // The PPPoE length: PPP's 2 bytes and `packet(v6, 100)`.
            [&[0x11, 0, 0, 1, 0, if v6 { 162 } else { 142 }][..], &pp(v6)].concat()
        }),
        both(linktype::C_HDLC, &|v6| [&[0x0f, 0][..], &et(v6)].concat()),
        both(linktype::IEEE802_11, &|v6| wifi(et(v6))),
        both(linktype::IEEE802_11_RADIOTAP, &|v6| {
            [
                &[0, 0, 17, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10][..],
                &wifi(et(v6)),
            ]
            .concat()
        }),
        both(linktype::IEEE802_11_PRISM, &|v6| {
            let mut h = vec![0u8; 144];
            h[0] = 0x44;
            h[4] = 144;
            [h, wifi(et(v6))].concat()
        }),
        both(linktype::IEEE802_11_AVS, &|v6| {
            let mut h = vec![0u8; 64];
            h[..8].copy_from_slice(&[0x80, 0x21, 0x10, 0x01, 0, 0, 0, 64]);
            [h, wifi(et(v6))].concat()
        }),
        both(linktype::FDDI, &|v6| {
            [&[0x50][..], &macs, &[0xaa, 0xaa, 3, 0, 0, 0], &et(v6)].concat()
        }),
        both(linktype::ARCNET_BSD, &|v6| {
            if v6 {
                vec![1, 2, 0xc4, 0, 0, 0]
            } else {
                vec![1, 2, 240]
            }
        }),
        both(linktype::ARCNET_LINUX, &|v6| {
            vec![1, 2, 0, 0, if v6 { 0xc4 } else { 212 }, 0, 0, 0]
        }),
        both(linktype::IPOIB, &|v6| {
            [&[0u8; 40][..], &et(v6), &[0, 0]].concat()
        }),
        both(linktype::NFLOG, &|v6| {
            vec![
                if v6 { 10 } else { 2 },
                0,
                0,
                1,
                8,
                0,
                10,
                0,
                b'x',
                0,
                0,
                0,
                80,
                0,
                9,
                0,
            ]
        }),
        both(linktype::PFLOG, &|v6| {
            let mut h = vec![0u8; 64];
            h[0] = 61;
            h[1] = if v6 { 24 } else { 2 };
            h
        }),
        both(linktype::ENC, &|v6| {
            vec![0, 0, 0, if v6 { 24 } else { 2 }, 0, 0, 0, 1, 0, 0, 0, 0]
        }),
        both(1, &|_| {
            [&macs[..], &[0x88, 0x47, 0, 1, 0, 64, 0, 2, 1, 64]].concat()
        }),
        both(1, &|v6| {
            let len = if v6 { 162 } else { 142 };
            [&macs[..], &[0x88, 0x64, 0x11, 0, 0, 1, 0, len], &pp(v6)].concat()
        }),
        both(1, &|v6| {
            [&macs[..], &[0, 60, 0xaa, 0xaa, 3, 0, 0, 0], &et(v6)].concat()
        }),
        both(113, &|_| {
            let mut h = vec![0u8; 16];
            h[14..16].copy_from_slice(&[0x88, 0x47]);
            [h, vec![0, 1, 1, 64]].concat()
        }),
    ]
}

/// An IPv4 or IPv6 TCP packet with a payload of `len` bytes.
fn packet(v6: bool, len: usize) -> Vec<u8> {
    let tcp = TcpSpec::data(40000, 80, 1);
    let spec = if v6 {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        let mut b = a;
        b[15] = 2;
        FrameSpec::tcp6(a, b, tcp)
    } else {
        FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp)
    };
    spec.payload(vec![7u8; len]).build()[14..].to_vec()
}

/// Runs everything analysis does with a frame; returns whether a packet
/// was found (a frame without one must have a named reason).
fn read_all(lt: u32, frame: &[u8], orig_len: u32) -> bool {
    match link::view(lt, frame, orig_len) {
        Ok(v) => {
            let _ = dissect::snap(v.link, v.data, v.orig_len, &[4789]);
            match dissect::parse(v.link, v.data, v.orig_len, &[4789]) {
                Some(_) => true,
                None => {
                    let why = link::why_not_ip(v.link, v.data);
                    assert!(!why.to_string().is_empty());
                    false
                }
            }
        }
        Err(why) => {
            let s = why.to_string();
            assert!(
                matches!(
                    why,
                    Skip::Truncated { .. } | Skip::Invalid { .. } | Skip::NotIp(_)
                ),
                "{lt}: {s}"
            );
            assert!(s.split(' ').count() >= 2, "{lt}: {s}");
            false
        }
    }
}

#[test]
fn every_valid_frame_reads() {
    for (lt, h4, h6) in heads() {
        for (v6, h) in [(false, &h4), (true, &h6)] {
            let f = [h.clone(), packet(v6, 100)].concat();
            assert!(read_all(lt, &f, f.len() as u32), "{lt} v6={v6}: {h:02x?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn cut_and_lying_link_headers_never_panic(
        which in 0usize..40,
        cut in any::<prop::sample::Index>(),
        lies in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        len in 0usize..200,
    ) {
        let heads = heads();
        let (lt, h4, h6) = &heads[which % heads.len()];
        let v6 = which >= heads.len();
        let h = if v6 { h6 } else { h4 };
        let mut f = [h.clone(), packet(v6, len)].concat();
        for (at, b) in &lies {
            let i = at.index(h.len() + 4);
            if let Some(x) = f.get_mut(i) {
                *x = *b;
            }
        }
        let orig = f.len() as u32;
        let n = cut.index(f.len() + 1);
        read_all(*lt, &f[..n], orig);
        read_all(*lt, &f, orig);
    }
}
