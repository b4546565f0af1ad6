//! The oracle against what the running kernel (6.18 here) was seen to do
//! (docs/lab.md, "What the tests reproduce"): each row is a train built here with correct
//! checksums and run through the live kernel's GRO. Needs root and
//! /dev/net/tun; fails (never skips) without them.

mod common;

use std::time::Duration;

use common::*;
use offload_lab::{GroKnobs, KernelGro, VxlanConf};

const SPORT: u16 = 40000;
const DPORT: u16 = 5001;

fn oracle(knobs: GroKnobs) -> KernelGro {
    require_root();
    KernelGro::new(knobs).expect("oracle setup")
}

/// A TCP/IPv4 train from the peer to the TAP: `ids.len()` segments of `mss`
/// bytes with the given IP IDs and DF bit.
fn tcp4_train(o: &KernelGro, ids: &[u16], df: bool, mss: usize) -> Vec<Vec<u8>> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let ip = V4::new(o.peer_ipv4(), o.tap_ipv4(), id, df);
            let t = Tcp {
                sport: SPORT,
                dport: DPORT,
                seq: 1_000_000 + (i * mss) as u32,
                ack: 1,
                flags: ACK,
            };
            tcp4(o.tap_mac(), o.peer_mac(), ip, t, &payload(i * mss, mss))
        })
        .collect()
}

fn tcp6_train(o: &KernelGro, n: usize, mss: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let t = Tcp {
                sport: SPORT,
                dport: DPORT,
                seq: 7_000_000 + (i * mss) as u32,
                ack: 1,
                flags: ACK,
            };
            tcp6(
                o.tap_mac(),
                o.peer_mac(),
                o.peer_ipv6(),
                o.tap_ipv6(),
                t,
                &payload(i * mss, mss),
            )
        })
        .collect()
}

/// Checks that the payloads of `out`, concatenated, are the train's stream.
fn assert_stream_intact(out: &[Vec<u8>], total: usize) {
    let mut stream = Vec::new();
    for f in out {
        stream.extend_from_slice(&f[parse(f, 0).payload_off..]);
    }
    assert_eq!(stream.len(), total, "payload bytes delivered");
    assert!(
        stream == payload(0, total),
        "payload bytes differ from the train's"
    );
}

/// IP IDs in the spirit of the write-up's 101, 105, 107, 300, 2, ...: no
/// two neighbours differ by exactly 1 and none repeats.
const IRREGULAR_IDS: [u16; 20] = [
    101, 105, 107, 300, 2, 9, 17, 40, 44, 60, 3, 999, 12, 500, 77, 79, 1000, 5, 6000, 8,
];

fn incrementing(start: u16, n: usize) -> Vec<u16> {
    (0..n).map(|i| start.wrapping_add(i as u16)).collect()
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv4_df1_incrementing_id_merges_into_one() {
    let mut o = oracle(GroKnobs::default());
    let train = tcp4_train(&o, &incrementing(100, 20), true, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![28000]);
    let p = parse(&out[0], 0);
    assert_eq!(
        p.ip_len,
        20 + 20 + 28000,
        "IPv4 total length of the merged packet"
    );
    // The merged packet keeps the first segment's IP ID and sequence number.
    assert_eq!(&out[0][14 + 4..14 + 6], &100u16.to_be_bytes());
    assert_eq!(
        &out[0][p.l4_off + 4..p.l4_off + 8],
        &1_000_000u32.to_be_bytes()
    );
    assert_stream_intact(&out, 28000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv4_df0_irregular_id_is_not_merged() {
    let mut o = oracle(GroKnobs::default());
    let ids = IRREGULAR_IDS;
    let train = tcp4_train(&o, &ids, false, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![1400; 20]);
    assert_eq!(out, train, "unmerged frames come out unchanged");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv4_df0_incrementing_id_merges_into_one() {
    let mut o = oracle(GroKnobs::default());
    let train = tcp4_train(&o, &incrementing(100, 20), false, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![28000]);
    assert_stream_intact(&out, 28000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv6_130_segments_split_at_gro_max_size_65536() {
    let mut o = oracle(GroKnobs::default());
    let train = tcp6_train(&o, 130, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![64400, 64400, 53200]);
    for f in &out {
        let p = parse(f, 0);
        assert_eq!(p.hbh_len, 0, "no jumbo header below 64 KiB");
        assert_eq!(usize::from(p.ip_len), f.len() - 14 - 40);
    }
    assert_stream_intact(&out, 182000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv6_130_segments_become_one_big_tcp_packet_at_gro_max_size_185000() {
    let mut o = oracle(GroKnobs {
        gro_max_size: 185000,
        ..GroKnobs::default()
    });
    let train = tcp6_train(&o, 130, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![182000]);
    let p = parse(&out[0], 0);
    assert_eq!(p.ip_len, 0, "IPv6 payload length of a jumbogram");
    assert_eq!(p.hbh_len, 8, "8-byte Hop-by-Hop header");
    assert_eq!(out[0][14 + 6], 0, "IPv6 next header = Hop-by-Hop");
    assert_eq!(p.jumbo, Some(8 + 20 + 182000), "Jumbo Payload length");
    let pseudo = pseudo_sum_v6(o.peer_ipv6(), o.tap_ipv6(), 6, 20 + 182000);
    assert_eq!(&out[0][p.l4_off + 16..p.l4_off + 18], &pseudo.to_be_bytes());
    assert_stream_intact(&out, 182000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv4_big_tcp_at_gro_ipv4_max_size_185000_has_total_length_0() {
    let mut o = oracle(GroKnobs {
        gro_max_size: 185000,
        gro_ipv4_max_size: 185000,
        ..GroKnobs::default()
    });
    let train = tcp4_train(&o, &incrementing(1, 130), true, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![182000]);
    assert_eq!(
        parse(&out[0], 0).ip_len,
        0,
        "IPv4 total length of a BIG TCP packet"
    );
    assert_stream_intact(&out, 182000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn ipv4_ip_id_rules_of_6_18() {
    let mut o = oracle(GroKnobs::default());
    let random = [
        0x1a2b, 0x9c01, 0x0042, 0x7fff, 0x3333, 0xe001, 0x0101, 0x5a5a, 0xbeef, 0x2024,
    ];
    let cases: [(&str, Vec<u16>, bool, usize); 6] = [
        ("DF=0, fixed ID 0", vec![0; 10], false, 1),
        ("DF=0, fixed ID 777", vec![777; 10], false, 1),
        ("DF=1, random ID", random.to_vec(), true, 10),
        ("DF=1, fixed ID", vec![4242; 10], true, 1),
        (
            "DF=1, decrementing ID",
            (0..10).map(|i| 500 - i).collect(),
            true,
            10,
        ),
        (
            "DF=0, ID +2 each",
            (0..10).map(|i| 100 + 2 * i).collect(),
            false,
            10,
        ),
    ];
    for (name, ids, df, frames) in cases {
        let train = tcp4_train(&o, &ids, df, 1000);
        let out = o.run_train(&train).unwrap();
        assert_eq!(
            out.len(),
            frames,
            "{name}: frames out, sizes {:?}",
            payload_sizes(&out)
        );
        assert_stream_intact(&out, 10_000);
    }
}

fn vxlan_train(o: &KernelGro, outer_ids: &[u16]) -> Vec<Vec<u8>> {
    let inner_dst = [0x02, 0x6f, 0x66, 0x6c, 0x10, 0x01];
    let inner_src = [0x02, 0x6f, 0x66, 0x6c, 0x10, 0x02];
    let (isrc, idst) = ("10.9.0.2".parse().unwrap(), "10.9.0.1".parse().unwrap());
    outer_ids
        .iter()
        .enumerate()
        .map(|(i, &oid)| {
            let inner_ip = V4::new(isrc, idst, 3000 + i as u16, true);
            let t = Tcp {
                sport: SPORT,
                dport: DPORT,
                seq: 50_000 + (i * 1350) as u32,
                ack: 1,
                flags: ACK,
            };
            let inner = tcp4(inner_dst, inner_src, inner_ip, t, &payload(i * 1350, 1350));
            let outer = V4::new(o.peer_ipv4(), o.tap_ipv4(), oid, false);
            vxlan4(o.tap_mac(), o.peer_mac(), outer, 49152, 4789, 42, &inner)
        })
        .collect()
}

/// Offset of the inner Ethernet header in an outer IPv4/UDP/VXLAN frame.
const INNER: usize = 14 + 20 + 8 + 8;

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_outer_df0_incrementing_id_merges_inner_tcp() {
    let mut o = oracle(GroKnobs {
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        ..GroKnobs::default()
    });
    let train = vxlan_train(&o, &incrementing(100, 20));
    let out = o.run_train(&train).unwrap();
    assert_eq!(out.len(), 1, "one super-packet");
    let p = parse(&out[0], INNER);
    assert_eq!(out[0].len() - p.payload_off, 27000, "inner payload");
    let mut stream = out[0][p.payload_off..].to_vec();
    stream.truncate(27000);
    assert!(stream == payload(0, 27000));
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_outer_df0_irregular_id_is_not_merged() {
    let mut o = oracle(GroKnobs {
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        ..GroKnobs::default()
    });
    let ids = IRREGULAR_IDS;
    let train = vxlan_train(&o, &ids);
    let out = o.run_train(&train).unwrap();
    assert_eq!(out.len(), 20, "nothing merged");
    assert_eq!(out, train);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_without_a_listening_device_is_plain_udp() {
    // Control for the two VXLAN rows: with no VXLAN socket on 4789, GRO does
    // not look inside, and plain UDP without UDP_GRO is not coalesced.
    let mut o = oracle(GroKnobs::default());
    let train = vxlan_train(&o, &incrementing(100, 20));
    let out = o.run_train(&train).unwrap();
    assert_eq!(out.len(), 20);
}

fn udp_train(o: &KernelGro, dport: u16, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let ip = V4::new(o.peer_ipv4(), o.tap_ipv4(), 200 + i as u16, true);
            udp4(
                o.tap_mac(),
                o.peer_mac(),
                ip,
                33333,
                dport,
                &payload(i * len, len),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn udp_gro_socket_coalesces_datagrams_and_only_on_its_port() {
    let mut o = oracle(GroKnobs {
        udp_gro_ports: vec![9000],
        ..GroKnobs::default()
    });
    let out = o.run_train(&udp_train(&o, 9000, 10, 1000)).unwrap();
    assert_eq!(
        out.len(),
        1,
        "datagrams to the UDP_GRO socket are coalesced"
    );
    let p = parse(&out[0], 0);
    assert_eq!(p.proto, 17);
    assert_eq!(out[0].len() - p.payload_off, 10_000);
    assert_eq!(usize::from(p.ip_len), 20 + 8 + 10_000);
    let out = o.run_train(&udp_train(&o, 9001, 10, 1000)).unwrap();
    assert_eq!(out.len(), 10, "no UDP_GRO socket on 9001: not coalesced");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn udp_gro_forwarding_feature_coalesces_without_a_socket() {
    let mut o = oracle(GroKnobs {
        udp_gro_forwarding: true,
        ..GroKnobs::default()
    });
    let out = o.run_train(&udp_train(&o, 9100, 10, 1000)).unwrap();
    assert_eq!(out.len(), 1, "rx-udp-gro-forwarding coalesces plain UDP");
    o.set_knobs(GroKnobs::default()).unwrap();
    let out = o.run_train(&udp_train(&o, 9100, 10, 1000)).unwrap();
    assert_eq!(out.len(), 10, "feature off again: not coalesced");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn set_knobs_changes_sizes_between_trains() {
    let mut o = oracle(GroKnobs::default());
    let train = tcp6_train(&o, 130, 1400);
    assert_eq!(o.run_train(&train).unwrap().len(), 3);
    o.set_gro_sizes(185000, 65536).unwrap();
    assert_eq!(o.run_train(&train).unwrap().len(), 1);
    o.set_gro_sizes(30000, 30000).unwrap();
    let sizes = payload_sizes(&o.run_train(&train).unwrap());
    // 60 + n × 1400 must stay below 30000: 21 segments per packet.
    assert_eq!(sizes[0], 21 * 1400);
    assert_eq!(sizes.iter().sum::<usize>(), 182000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn flush_timeout_zero_merges_nothing_across_writes() {
    // Without gro_flush_timeout every write is its own NAPI poll and GRO
    // flushes after each packet.
    let mut o = oracle(GroKnobs {
        flush_timeout: Duration::ZERO,
        ..GroKnobs::default()
    });
    let train = tcp4_train(&o, &incrementing(100, 20), true, 1400);
    assert_eq!(o.run_train(&train).unwrap().len(), 20);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn bad_tcp_checksum_is_never_merged() {
    let mut o = oracle(GroKnobs::default());
    let mut train = tcp4_train(&o, &incrementing(100, 20), true, 1400);
    let last = train[10].len() - 1;
    train[10][last] ^= 0xff; // payload corrupted, checksum now wrong
    let out = o.run_train(&train).unwrap();
    // The bad segment bypasses GRO at once and leaves the held packet alone;
    // the next segment then no longer continues it (sequence gap) and
    // flushes it.
    assert_eq!(payload_sizes(&out), vec![1400, 14000, 12600]);
    assert_eq!(out[0], train[10], "the bad segment is delivered unchanged");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn short_frame_is_rejected_with_its_index() {
    let mut o = oracle(GroKnobs::default());
    let err = o.run_train(&[vec![0; 60], vec![0; 10]]).unwrap_err();
    assert!(
        matches!(err, offload_sys::Error::BadFrame { index: 1, .. }),
        "{err}"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn clean_runs_need_no_replay() {
    let mut o = oracle(GroKnobs::default());
    let train = tcp4_train(&o, &incrementing(100, 20), true, 1400);
    let r = o.run_train_detailed(&train).unwrap();
    assert_eq!(r.frames.len(), 1);
    assert!(r.attempts >= 1 && r.attempts <= offload_lab::oracle::MAX_ATTEMPTS);
    // A one-frame answer is final whatever the run looked like.
    assert_eq!(r.attempts, 1);
}

/// In-band VLAN GRO (`vlan_gro_receive`) exists only when the kernel has
/// 802.1Q support (`CONFIG_VLAN_8021Q`), which also creates /proc/net/vlan.
/// This machine's 6.18 build has it off, so tagged trains pass GRO untouched.
fn kernel_has_vlan_gro() -> bool {
    std::path::Path::new("/proc/net/vlan").exists()
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vlan_tagged_train_comes_back_with_its_tags() {
    let mut o = oracle(GroKnobs::default());
    let tagged: Vec<Vec<u8>> = tcp4_train(&o, &incrementing(100, 20), true, 1400)
        .iter()
        .map(|f| with_vlan(f, 100))
        .collect();
    let out = o.run_train(&tagged).unwrap();
    if kernel_has_vlan_gro() {
        assert_eq!(payload_sizes(&out), vec![28000]);
        assert_eq!(&out[0][12..16], &[0x81, 0x00, 0x00, 100]);
        assert_stream_intact(&out, 28000);
    } else {
        // The stack moved each tag into skb metadata before the capture
        // tap; the oracle put it back, so the frames are byte-identical.
        assert_eq!(
            out, tagged,
            "CONFIG_VLAN_8021Q off: no VLAN GRO, tags restored"
        );
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn frames_larger_than_the_mtu_are_accepted_and_merged() {
    // A TAP does not check the MTU on receive: 8000-byte segments (jumbo
    // frames from a peer with a larger MTU) go through GRO like any other.
    let mut o = oracle(GroKnobs::default());
    let train = tcp4_train(&o, &incrementing(1, 4), true, 8000);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![32000]);
    assert_stream_intact(&out, 32000);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn the_oracle_can_live_in_a_static_shared_by_tests() {
    // A conformance suite keeps one oracle per test binary behind a Mutex.
    fn assert_send<T: Send>() {}
    assert_send::<KernelGro>();
    static SHARED: std::sync::OnceLock<std::sync::Mutex<KernelGro>> = std::sync::OnceLock::new();
    let o = SHARED.get_or_init(|| std::sync::Mutex::new(oracle(GroKnobs::default())));
    let mut o = o.lock().unwrap();
    let train = tcp4_train(&o, &incrementing(100, 5), true, 1000);
    assert_eq!(o.run_train(&train).unwrap().len(), 1);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn gso_metadata_describes_super_packets() {
    let mut o = oracle(GroKnobs {
        gro_max_size: 185000,
        udp_gro_ports: vec![9000],
        ..GroKnobs::default()
    });
    o.set_gso_meta(true).unwrap();

    let r = o
        .run_train_detailed(&tcp4_train(&o, &incrementing(100, 20), true, 1400))
        .unwrap();
    assert_eq!(r.frames.len(), 1);
    let h = r.gso[0].expect("metadata of the TCPv4 super-packet");
    assert_eq!(
        (h.gso_type, h.gso_size),
        (1, 1400),
        "VIRTIO_NET_HDR_GSO_TCPV4, mss"
    );

    let r = o.run_train_detailed(&tcp6_train(&o, 130, 1400)).unwrap();
    assert_eq!(r.frames.len(), 1);
    let h = r.gso[0].expect("metadata of the IPv6 BIG TCP packet");
    assert_eq!(
        (h.gso_type, h.gso_size),
        (4, 1400),
        "VIRTIO_NET_HDR_GSO_TCPV6, mss"
    );

    let r = o
        .run_train_detailed(&udp_train(&o, 9000, 10, 1000))
        .unwrap();
    assert_eq!(r.frames.len(), 1);
    let h = r.gso[0].expect("metadata of the UDP super-packet");
    assert_eq!(
        (h.gso_type, h.gso_size),
        (5, 1000),
        "VIRTIO_NET_HDR_GSO_UDP_L4"
    );

    let train = tcp4_train(&o, &IRREGULAR_IDS[..5], false, 1400);
    let r = o.run_train_detailed(&train).unwrap();
    assert_eq!(r.frames, train);
    assert!(r
        .gso
        .iter()
        .all(|h| h.is_some_and(|h| h.gso_type == 0 && h.gso_size == 0)));

    o.set_gso_meta(false).unwrap();
    assert!(o.run_train_detailed(&train).unwrap().gso.is_empty());
}

/// The number of packets the kernel makes of `train`, as the first answer
/// two runs agree on (at most 4 runs), as `offload_conformance::agreed_answer`
/// judges the conformance trains. Once in a full `scripts/test.sh` run (23
/// oracle tests in parallel on 2 CPUs, VXLAN sockets appearing and going in
/// other namespaces) one VXLAN train of this test came out as 2 packets
/// instead of 1 from a run the oracle judged clean; it did not repeat in 65
/// runs alone or beside CPU hogs.
fn agreed_len(o: &mut KernelGro, train: &[Vec<u8>]) -> usize {
    let mut seen = Vec::new();
    for _ in 0..4 {
        let n = o.run_train(train).unwrap().len();
        if seen.contains(&n) {
            return n;
        }
        seen.push(n);
    }
    panic!("no two kernel runs of the train agree: {seen:?} packets");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn set_knobs_adds_and_removes_vxlan_and_udp_gro_sockets() {
    let mut o = oracle(GroKnobs::default());
    let vx = vxlan_train(&o, &incrementing(100, 20));
    let udp = udp_train(&o, 9000, 10, 1000);
    assert_eq!(agreed_len(&mut o, &vx), 20);
    assert_eq!(agreed_len(&mut o, &udp), 10);
    let with = GroKnobs {
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        udp_gro_ports: vec![9000, 9001],
        ..GroKnobs::default()
    };
    o.set_knobs(with.clone()).unwrap();
    assert_eq!(o.knobs(), &with);
    assert_eq!(agreed_len(&mut o, &vx), 1);
    assert_eq!(agreed_len(&mut o, &udp), 1);
    // GRO looks inside VXLAN whenever a VXLAN socket listens on the port;
    // the VNI is only a flow key, so a device with another VNI (7) still
    // makes the VNI-42 train merge.
    o.set_knobs(GroKnobs {
        vxlan: Some(VxlanConf { vni: 7, port: 4789 }),
        ..with.clone()
    })
    .unwrap();
    assert_eq!(agreed_len(&mut o, &vx), 1);
    o.set_knobs(GroKnobs::default()).unwrap();
    assert_eq!(o.knobs(), &GroKnobs::default());
    assert_eq!(agreed_len(&mut o, &vx), 20);
    assert_eq!(agreed_len(&mut o, &udp), 10);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn gro_list_keeps_segments_so_the_head_checksum_survives() {
    // With rx-gro-list and no local socket on the port, TCP takes the
    // fraglist path (tcp4_check_fraglist_gro): the captured packet has the
    // same length and payload, but the TCP checksum is the head segment's
    // own instead of the pseudo-header sum normal GRO writes.
    let mut o = oracle(GroKnobs {
        gro_list: true,
        ..GroKnobs::default()
    });
    let train = tcp4_train(&o, &incrementing(100, 20), true, 1400);
    let out = o.run_train(&train).unwrap();
    assert_eq!(payload_sizes(&out), vec![28000]);
    assert_stream_intact(&out, 28000);
    assert_eq!(
        &out[0][50..52],
        &train[0][50..52],
        "head segment's TCP checksum"
    );
    // Plain UDP without any socket is coalesced too (fraglist UDP GRO).
    let out = o.run_train(&udp_train(&o, 9100, 10, 1000)).unwrap();
    assert_eq!(payload_sizes(&out), vec![10_000]);
}
