//! One test per GRO rule, named after the condition (kernel 6.18 behaviour).

use super::*;
use crate::build::{FrameSpec, TcpSpec};
use crate::wire::tcp::flags as tf;

const A: [u8; 4] = [10, 0, 0, 2];
const B: [u8; 4] = [10, 0, 0, 1];
const A6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const B6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const MSS: usize = 1400;

/// A segment of an IPv4 flow: seq = index × MSS, ID = 100 + index.
fn seg4(i: u32) -> FrameSpec {
    let mut s = FrameSpec::tcp4(A, B, TcpSpec::data(40000, 5201, 1000 + i * MSS as u32))
        .payload(vec![i as u8; MSS]);
    s.v4_mut().id = 100 + i as u16;
    s
}

fn seg6(i: u32) -> FrameSpec {
    FrameSpec::tcp6(A6, B6, TcpSpec::data(40000, 5201, 1000 + i * MSS as u32))
        .payload(vec![i as u8; MSS])
}

#[derive(Debug)]
struct Out {
    data: Vec<u8>,
    segments: u32,
    reason: FlushReason,
}

fn run_cfg(cfg: GroConfig, frames: &[Vec<u8>]) -> Vec<Out> {
    let mut e = GroEngine::new(cfg);
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        outs.push(Out {
            data: d.to_vec(|n| &frames[n as usize - 1]),
            segments: d.segments,
            reason: d.reason,
        })
    };
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link: LinkKind::Ethernet,
            timestamp_ns: i as u64 * 1000,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        };
        e.receive(input, &mut push);
    }
    e.finish(&mut push);
    outs
}

fn run(frames: &[Vec<u8>]) -> Vec<Out> {
    run_cfg(
        GroConfig {
            flush_timeout_ns: 10_000_000,
            ..GroConfig::default()
        },
        frames,
    )
}

fn build(specs: impl IntoIterator<Item = FrameSpec>) -> Vec<Vec<u8>> {
    specs.into_iter().map(|s| s.build()).collect()
}

fn shape(o: &[Out]) -> Vec<(u32, FlushReason)> {
    o.iter().map(|o| (o.segments, o.reason)).collect()
}

#[test]
fn in_order_full_segments_merge_into_one() {
    let o = run(&build((0..5).map(seg4)));
    assert_eq!(shape(&o), vec![(5, FlushReason::EndOfInput)]);
    let f = &o[0].data;
    assert_eq!(f.len(), 14 + 40 + 5 * MSS);
    let ip = crate::wire::ipv4::Ipv4::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.total_len() as usize, 40 + 5 * MSS);
    assert!(ip.header_checksum_ok());
    // TCP checksum field holds the pseudo-header sum (CHECKSUM_PARTIAL).
    let pseudo = crate::checksum::pseudo_ipv4(A, B, 6, (20 + 5 * MSS) as u32);
    assert_eq!(
        u16::from_be_bytes([f[50], f[51]]),
        crate::checksum::fold(pseudo)
    );
}

#[test]
fn single_held_segment_is_delivered_unchanged() {
    let frames = build([seg4(0)]);
    let o = run(&frames);
    assert_eq!(o[0].data, frames[0]);
    assert_eq!(o[0].segments, 1);
}

#[test]
fn short_tail_merges_and_ends_the_run() {
    let mut t = seg4(2);
    t.payload.truncate(700);
    let o = run(&build([seg4(0), seg4(1), t, seg4(3)]));
    assert_eq!(shape(&o)[0], (3, FlushReason::ShortSegment));
}

#[test]
fn short_segment_first_then_full_does_not_merge() {
    let mut s = seg4(0);
    s.payload.truncate(700);
    let mut n = seg4(1);
    n.tcp_mut().seq = 1700;
    let o = run(&build([s, n]));
    assert_eq!(
        shape(&o),
        vec![
            (1, FlushReason::SegmentLarger),
            (1, FlushReason::EndOfInput)
        ]
    );
}

#[test]
fn psh_merges_and_flushes_with_flag_on_the_head() {
    let mut p = seg4(2);
    p.tcp_mut().flags |= tf::PSH;
    let o = run(&build([seg4(0), seg4(1), p]));
    assert_eq!(shape(&o), vec![(3, FlushReason::PshFlag)]);
    assert_ne!(o[0].data[14 + 20 + 13] & tf::PSH, 0);
}

#[test]
fn lone_psh_segment_is_never_held() {
    let mut p = seg4(0);
    p.tcp_mut().flags |= tf::PSH;
    let o = run(&build([p]));
    assert_eq!(shape(&o), vec![(1, FlushReason::PshAlone)]);
}

#[test]
fn syn_rst_urg_in_the_middle_flush_and_pass() {
    for flag in [tf::SYN, tf::RST, tf::URG] {
        let mut x = seg4(2);
        x.tcp_mut().flags |= flag;
        let o = run(&build([seg4(0), seg4(1), x, seg4(3), seg4(4)]));
        assert_eq!(
            shape(&o),
            vec![
                (2, FlushReason::TcpFlagsChanged),
                (1, FlushReason::ControlFlags),
                (2, FlushReason::EndOfInput)
            ],
            "flag {flag:#x}"
        );
    }
}

#[test]
fn pure_ack_flushes_and_passes() {
    let mut ack = seg4(2);
    ack.payload.clear();
    let o = run(&build([seg4(0), seg4(1), ack]));
    assert_eq!(
        shape(&o),
        vec![(2, FlushReason::NoPayload), (1, FlushReason::NoPayload)]
    );
}

#[test]
fn window_change_flushes_and_holds_new_head() {
    let mut w = seg4(2);
    w.tcp_mut().window = 1024;
    let o = run(&build([seg4(0), seg4(1), w, seg4(3)]));
    // seg 3 has the old window: it differs from the new head again.
    assert_eq!(
        shape(&o),
        vec![
            (2, FlushReason::WindowChanged),
            (1, FlushReason::WindowChanged),
            (1, FlushReason::EndOfInput)
        ]
    );
}

#[test]
fn ack_number_change_flushes() {
    let mut a = seg4(1);
    a.tcp_mut().ack = 99;
    let o = run(&build([seg4(0), a]));
    assert_eq!(o[0].reason, FlushReason::AckChanged);
}

#[test]
fn timestamp_change_flushes() {
    let ts = |i: u32, v: u32| {
        let mut s = seg4(i);
        s.tcp_mut().options = crate::build::timestamp_option(v, 7).to_vec();
        s
    };
    let o = run(&build([ts(0, 1), ts(1, 1), ts(2, 2), ts(3, 3)]));
    assert_eq!(
        shape(&o),
        vec![
            (2, FlushReason::TimestampChanged),
            (1, FlushReason::TimestampChanged),
            (1, FlushReason::EndOfInput)
        ]
    );
}

#[test]
fn option_set_change_flushes() {
    let mut o1 = seg4(1);
    o1.tcp_mut().options = vec![1, 1, 1, 1];
    let o = run(&build([seg4(0), o1]));
    assert_eq!(o[0].reason, FlushReason::HeaderLengthChanged);
    let mut a = seg4(0);
    a.tcp_mut().options = vec![1, 1, 1, 1];
    let mut b = seg4(1);
    b.tcp_mut().options = vec![1, 1, 1, 0];
    let o = run(&build([a, b]));
    assert_eq!(o[0].reason, FlushReason::OptionsChanged);
}

#[test]
fn sequence_gap_and_retransmission_flush() {
    let mut gap = seg4(2);
    gap.v4_mut().id = 101;
    let o = run(&build([seg4(0), gap]));
    assert_eq!(o[0].reason, FlushReason::SequenceGap);
    let mut again = seg4(1);
    again.v4_mut().id = 102;
    let o = run(&build([seg4(0), seg4(1), again]));
    assert_eq!(shape(&o)[0], (2, FlushReason::SequenceBehind));
}

#[test]
fn bad_tcp_checksum_passes_without_flushing_the_run() {
    let mut bad = seg4(2);
    bad.tcp_mut().corrupt_checksum = true;
    let o = run(&build([seg4(0), seg4(1), bad, seg4(2)]));
    // Worked example E: the bad segment overtakes the held run.
    assert_eq!(
        shape(&o),
        vec![(1, FlushReason::BadChecksum), (3, FlushReason::EndOfInput)]
    );
}

#[test]
fn checksum_check_can_be_disabled() {
    let mut bad = seg4(1);
    bad.tcp_mut().corrupt_checksum = true;
    let cfg = GroConfig {
        verify_checksums: false,
        flush_timeout_ns: 1_000_000,
        ..Default::default()
    };
    let o = run_cfg(cfg, &build([seg4(0), bad]));
    assert_eq!(shape(&o), vec![(2, FlushReason::EndOfInput)]);
}

#[test]
fn ttl_change_flushes() {
    let mut t = seg4(1);
    t.v4_mut().ttl = 63;
    let o = run(&build([seg4(0), t]));
    assert_eq!(o[0].reason, FlushReason::TtlChanged);
}

#[test]
fn tos_change_flushes() {
    let mut t = seg4(1);
    t.v4_mut().tos = 0x02;
    let o = run(&build([seg4(0), t]));
    assert_eq!(o[0].reason, FlushReason::TosChanged);
}

#[test]
fn df_change_flushes() {
    let mut t = seg4(1);
    t.v4_mut().df = false;
    let o = run(&build([seg4(0), t]));
    assert_eq!(o[0].reason, FlushReason::DfChanged);
}

fn with_ids(ids: &[u16], df: bool) -> Vec<Vec<u8>> {
    build(ids.iter().enumerate().map(|(i, id)| {
        let mut s = seg4(i as u32);
        s.v4_mut().id = *id;
        s.v4_mut().df = df;
        s
    }))
}

#[test]
fn ip_id_incrementing_merges_with_or_without_df() {
    for df in [true, false] {
        let o = run(&with_ids(&[100, 101, 102, 103], df));
        assert_eq!(shape(&o), vec![(4, FlushReason::EndOfInput)]);
    }
}

#[test]
fn ip_id_fixed_merges_whatever_df_says_on_6_18() {
    for df in [true, false] {
        let o = run(&with_ids(&[777, 777, 777, 777], df));
        assert_eq!(shape(&o), vec![(4, FlushReason::EndOfInput)]);
    }
}

#[test]
fn ip_id_random_does_not_merge() {
    let o = run(&with_ids(&[101, 105, 107, 300, 2], false));
    assert!(o.iter().all(|o| o.segments == 1));
    assert_eq!(o[0].reason, FlushReason::IpIdMismatch);
}

#[test]
fn ip_id_two_incrementing_then_fixed_splits() {
    let o = run(&with_ids(&[8, 9, 9], true));
    assert_eq!(
        shape(&o),
        vec![(2, FlushReason::IpIdMismatch), (1, FlushReason::EndOfInput)]
    );
    let o = run(&with_ids(&[8, 8, 9], true));
    assert_eq!(
        shape(&o),
        vec![(2, FlushReason::IpIdMismatch), (1, FlushReason::EndOfInput)]
    );
}

#[test]
fn ip_id_wraps_modulo_2_16() {
    let o = run(&with_ids(&[65534, 65535, 0, 1], true));
    assert_eq!(shape(&o), vec![(4, FlushReason::EndOfInput)]);
}

#[test]
fn ip_options_pass_without_flushing() {
    let mut opt = seg4(1);
    opt.v4_mut().options = vec![1, 1, 1, 0];
    let o = run(&build([seg4(0), opt]));
    assert_eq!(
        shape(&o),
        vec![(1, FlushReason::IpOptions), (1, FlushReason::EndOfInput)]
    );
}

#[test]
fn ip_fragment_passes_without_flushing() {
    let mut fr = seg4(1);
    fr.v4_mut().frag_extra = crate::wire::ipv4::MF;
    let o = run(&build([seg4(0), fr]));
    assert_eq!(o[0].reason, FlushReason::Fragment);
}

#[test]
fn bad_ip_header_checksum_passes() {
    let mut b = seg4(1);
    b.v4_mut().corrupt_checksum = true;
    let o = run(&build([seg4(0), b]));
    assert_eq!(o[0].reason, FlushReason::BadIpChecksum);
}

#[test]
fn ethernet_padding_flushes_the_run_and_passes() {
    let mut ack = seg4(2);
    ack.payload.clear();
    ack.trailer = vec![0; 6];
    let o = run(&build([seg4(0), seg4(1), ack]));
    assert_eq!(
        shape(&o),
        vec![
            (2, FlushReason::IncomingLengthMismatch),
            (1, FlushReason::LengthMismatch)
        ]
    );
}

#[test]
fn size_limit_splits_at_gro_max_size() {
    // 20 + 20 + 46 × 1400 = 64440 < 65536; a 47th would be 65840.
    let o = run(&build((0..50).map(seg4)));
    assert_eq!(
        shape(&o),
        vec![(46, FlushReason::SizeLimit), (4, FlushReason::EndOfInput)]
    );
}

#[test]
fn ipv4_big_tcp_writes_total_length_zero() {
    let cfg = GroConfig {
        gro_ipv4_max_size: 185_000,
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    let o = run_cfg(cfg, &build((0..100).map(seg4)));
    assert_eq!(o[0].segments, 100);
    let f = &o[0].data;
    let ip = crate::wire::ipv4::Ipv4::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.total_len(), 0);
    assert!(ip.header_checksum_ok());
}

#[test]
fn ipv6_merges_and_sets_payload_length() {
    let o = run(&build((0..3).map(seg6)));
    assert_eq!(o[0].segments, 3);
    let ip = crate::wire::ipv6::Ipv6::new_checked(&o[0].data[14..]).unwrap();
    assert_eq!(ip.payload_len() as usize, 20 + 3 * MSS);
}

#[test]
fn ipv6_130_segments_at_65536_split_64400_64400_53200() {
    let specs = (0..130).map(|i| {
        let mut s = seg6(i);
        s.tcp_mut().seq = 1000 + i * 1400;
        s
    });
    let o = run(&build(specs));
    let payloads: Vec<usize> = o.iter().map(|o| o.data.len() - 14 - 40 - 20).collect();
    assert_eq!(payloads, vec![64400, 64400, 53200]);
}

#[test]
fn ipv6_big_tcp_inserts_hop_by_hop_jumbo() {
    let cfg = GroConfig {
        gro_max_size: 185_000,
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    let o = run_cfg(cfg, &build((0..130).map(seg6)));
    assert_eq!(o.len(), 1);
    let f = &o[0].data;
    assert_eq!(f.len(), 14 + 40 + 8 + 20 + 130 * MSS);
    let ip = crate::wire::ipv6::Ipv6::new_checked(&f[14..]).unwrap();
    assert_eq!((ip.payload_len(), ip.next_header()), (0, 0));
    let chain = ip.walk_ext().unwrap();
    assert_eq!(chain.jumbo, Some((8 + 20 + 130 * MSS) as u32));
    assert_eq!(chain.upper, 6);
}

#[test]
fn ipv6_hop_limit_and_traffic_class_changes_flush() {
    let mut h = seg6(1);
    h.v6_mut().hop_limit = 1;
    assert_eq!(
        run(&build([seg6(0), h]))[0].reason,
        FlushReason::HopLimitChanged
    );
    let mut t = seg6(1);
    t.v6_mut().traffic_class = 4;
    assert_eq!(run(&build([seg6(0), t]))[0].reason, FlushReason::TosChanged);
}

#[test]
fn ipv6_flow_label_change_is_a_different_flow() {
    let mut l = seg6(1);
    l.v6_mut().flow_label = 5;
    let o = run(&build([seg6(0), l]));
    assert_eq!(
        shape(&o),
        vec![(1, FlushReason::EndOfInput), (1, FlushReason::EndOfInput)]
    );
}

#[test]
fn ipv6_same_dest_options_merge_different_do_not() {
    let dst = |i: u32, b: u8| {
        let mut s = seg6(i);
        s.v6_mut().ext.push((60, vec![1, 4, b, 0, 0, 0]));
        s
    };
    assert_eq!(run(&build([dst(0, 0), dst(1, 0)]))[0].segments, 2);
    let o = run(&build([dst(0, 0), dst(1, 1)]));
    assert_eq!(o.len(), 2);
    assert!(o.iter().all(|o| o.reason == FlushReason::EndOfInput));
}

#[test]
fn ipv6_fragment_header_passes() {
    let mut f = seg6(1);
    f.v6_mut().ext.push((44, vec![0, 0, 0, 0, 0, 0]));
    let o = run(&build([seg6(0), f]));
    assert_eq!(o[0].reason, FlushReason::Fragment);
}

#[test]
fn cwr_segment_never_merges() {
    let mut c = seg4(1);
    c.tcp_mut().flags |= tf::CWR;
    let o = run(&build([seg4(0), c, seg4(2)]));
    assert_eq!(o[0].reason, FlushReason::CwrSet);
    assert!(o.iter().all(|o| o.segments == 1));
}

#[test]
fn ninth_flow_evicts_the_oldest_held_packet() {
    let flows: Vec<FrameSpec> = (0..9)
        .map(|f| {
            let mut s = seg4(0);
            s.tcp_mut().sport = 30000 + f;
            s
        })
        .collect();
    let o = run(&build(flows));
    assert_eq!(o[0].reason, FlushReason::TableFull);
    assert_eq!(&o[0].data[34..36], &30000u16.to_be_bytes());
    assert_eq!(o.len(), 9);
}

#[test]
fn idle_gap_longer_than_timeout_flushes_everything() {
    let frames = build([seg4(0), seg4(1)]);
    let mut e = GroEngine::new(GroConfig {
        flush_timeout_ns: 1_000,
        ..Default::default()
    });
    let mut reasons = Vec::new();
    let mut push = |d: &Delivered<'_>| reasons.push(d.reason);
    for (i, f) in frames.iter().enumerate() {
        e.receive(
            Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64 * 5_000,
                frame: 1,
                orig_len: f.len() as u32,
            },
            &mut push,
        );
    }
    e.finish(&mut push);
    assert_eq!(reasons, vec![FlushReason::Timeout, FlushReason::EndOfInput]);
}

#[test]
fn truncated_capture_frame_passes_untouched() {
    let f = seg4(0).build();
    let mut e = GroEngine::new(GroConfig::default());
    let mut reasons = Vec::new();
    e.receive(
        Input {
            data: &f[..60],
            link: LinkKind::Ethernet,
            timestamp_ns: 0,
            frame: 1,
            orig_len: f.len() as u32,
        },
        &mut |d: &Delivered<'_>| reasons.push(d.reason),
    );
    assert_eq!(reasons, vec![FlushReason::CaptureTruncated]);
}

#[test]
fn interleaved_flows_merge_independently() {
    let mut frames = Vec::new();
    for i in 0..4 {
        frames.push(seg4(i));
        let mut s = seg6(i);
        s.tcp_mut().sport = 1;
        frames.push(s);
    }
    let o = run(&build(frames));
    assert_eq!(
        shape(&o),
        vec![(4, FlushReason::EndOfInput), (4, FlushReason::EndOfInput)]
    );
}

// ---- UDP ----

fn udp4(i: u16, len: usize) -> FrameSpec {
    let mut s = FrameSpec::udp4(A, B, 5000, 443).payload(vec![i as u8; len]);
    s.v4_mut().id = 300 + i;
    s
}

#[test]
fn udp_same_size_datagrams_merge_and_lengths_are_rewritten() {
    let o = run(&build((0..5).map(|i| udp4(i, 1200))));
    assert_eq!(shape(&o), vec![(5, FlushReason::EndOfInput)]);
    let f = &o[0].data;
    let udp = crate::wire::udp::Udp::new_checked(&f[34..]).unwrap();
    assert_eq!(udp.length() as usize, 8 + 5 * 1200);
    let pseudo = crate::checksum::pseudo_ipv4(A, B, 17, (8 + 5 * 1200) as u32);
    assert_eq!(udp.checksum(), crate::checksum::fold(pseudo));
}

#[test]
fn udp_shorter_datagram_is_merged_and_ends_the_run() {
    let o = run(&build([
        udp4(0, 1200),
        udp4(1, 1200),
        udp4(2, 100),
        udp4(3, 1200),
    ]));
    assert_eq!(
        shape(&o),
        vec![(3, FlushReason::ShortSegment), (1, FlushReason::EndOfInput)]
    );
}

#[test]
fn udp_larger_datagram_completes_the_run_and_starts_another() {
    let o = run(&build([
        udp4(0, 500),
        udp4(1, 500),
        udp4(2, 900),
        udp4(3, 900),
    ]));
    assert_eq!(
        shape(&o),
        vec![
            (2, FlushReason::DatagramLarger),
            (2, FlushReason::EndOfInput)
        ]
    );
}

#[test]
fn udp_zero_checksum_passes_without_flushing() {
    let mut z = udp4(9, 1200);
    z.udp_mut().zero_checksum = true;
    let o = run(&build([udp4(0, 1200), z, udp4(1, 1200)]));
    assert_eq!(o[0].reason, FlushReason::UdpZeroChecksum);
    assert_eq!(o[1].segments, 2);
}

#[test]
fn udp_64_datagram_limit() {
    let o = run(&build((0..70).map(|i| udp4(i, 100))));
    assert_eq!(
        shape(&o),
        vec![
            (64, FlushReason::SegmentCountLimit),
            (6, FlushReason::EndOfInput)
        ]
    );
}

#[test]
fn udp_stays_below_64k_even_with_big_gro_sizes() {
    let cfg = GroConfig {
        gro_ipv4_max_size: 185_000,
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    let o = run_cfg(cfg, &build((0..60).map(|i| udp4(i, 1400))));
    // 20 + 8 + 46 × 1400 = 64428; a 47th datagram would pass 65536.
    assert_eq!(o[0].segments, 46);
    assert_eq!(o[0].reason, FlushReason::SizeLimit);
}

#[test]
fn udp_ttl_change_flushes_regression_of_the_2024_fix() {
    let mut t = udp4(1, 1200);
    t.v4_mut().ttl = 1;
    let o = run(&build([udp4(0, 1200), t]));
    assert_eq!(o[0].reason, FlushReason::TtlChanged);
    assert!(o.iter().all(|o| o.segments == 1));
}

#[test]
fn udp_without_udp_gro_passes() {
    let cfg = GroConfig {
        udp: UdpGro::Off,
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    let o = run_cfg(cfg, &build((0..3).map(|i| udp4(i, 1200))));
    assert!(o
        .iter()
        .all(|o| o.reason == FlushReason::UnsupportedProtocol));
    let cfg = GroConfig {
        udp: UdpGro::Ports(vec![443]),
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    assert_eq!(
        run_cfg(cfg, &build((0..3).map(|i| udp4(i, 1200))))[0].segments,
        3
    );
}

#[test]
fn udp_padding_passes_without_flushing() {
    let mut p = udp4(1, 1200);
    p.trailer = vec![0; 4];
    let o = run(&build([udp4(0, 1200), p, udp4(2, 1200)]));
    assert_eq!(o[0].reason, FlushReason::LengthMismatch);
}

// ---- VXLAN ----

/// Inner TCP segment `i` of 1350 bytes in VXLAN (VNI 42) over IPv4 with
/// outer ID `outer_id` and DF `df`.
fn vxlan(i: u32, outer_id: u16, df: bool) -> FrameSpec {
    let mut inner = FrameSpec::tcp4(
        [192, 168, 0, 2],
        [192, 168, 0, 1],
        TcpSpec::data(33333, 80, 1 + i * 1350),
    )
    .payload(vec![i as u8; 1350]);
    inner.v4_mut().id = 7 + i as u16;
    let mut outer = FrameSpec::udp4(A, B, 40000 + 7, 4789)
        .payload(crate::build::vxlan_payload(42, &inner.build()));
    outer.v4_mut().id = outer_id;
    outer.v4_mut().df = df;
    outer.udp_mut().zero_checksum = true;
    outer
}

#[test]
fn vxlan_outer_df0_scrambled_ids_nothing_merges() {
    let ids = [101u16, 105, 107, 300, 2, 9, 77, 1000];
    let o = run(&build(
        ids.iter()
            .enumerate()
            .map(|(i, id)| vxlan(i as u32, *id, false)),
    ));
    assert_eq!(o.len(), 8);
    assert!(o.iter().all(|o| o.segments == 1));
    assert_eq!(o[0].reason, FlushReason::OuterIpIdMismatch);
}

#[test]
fn vxlan_outer_df0_incrementing_ids_merge() {
    let o = run(&build((0..20).map(|i| vxlan(i, 500 + i as u16, false))));
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].segments, 20);
    let f = &o[0].data;
    // Outer IPv4 total length and UDP length cover the whole super-packet.
    let ip = crate::wire::ipv4::Ipv4::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.total_len() as usize, f.len() - 14);
    assert!(ip.header_checksum_ok());
    assert_eq!(u16::from_be_bytes([f[38], f[39]]) as usize, f.len() - 34);
    // Inner IPv4 total length too.
    let inner = crate::wire::ipv4::Ipv4::new_checked(&f[14 + 20 + 8 + 8 + 14..]).unwrap();
    assert_eq!(inner.total_len() as usize, 20 + 20 + 20 * 1350);
}

/// Up to 6.8 `udp4_gro_complete` sums the outer UDP pseudo-header over
/// the addresses of `ip_hdr(skb)`, the *inner* IPv4 header (observed on
/// Debian's 6.1.192); 6.12 uses the outer addresses
/// (`KernelLine::udp_tunnel_csum_from_inner_header`).
#[test]
fn vxlan_outer_udp_checksum_pseudo_header_per_line() {
    let frames = build((0..4).map(|i| {
        let mut f = vxlan(i, 500 + i as u16, true);
        f.udp_mut().zero_checksum = false;
        f
    }));
    for (line, src, dst) in [
        (KernelLine::V6_1, [192, 168, 0, 2], [192, 168, 0, 1]),
        (KernelLine::V6_12, A, B),
        (KernelLine::V6_18, A, B),
    ] {
        let o = run_cfg(
            GroConfig {
                flush_timeout_ns: 10_000_000,
                kernel: line,
                ..GroConfig::default()
            },
            &frames,
        );
        assert_eq!(o.len(), 1, "{line}");
        let f = &o[0].data;
        let udp_len = (f.len() - 34) as u32;
        let want = crate::checksum::fold(crate::checksum::pseudo_ipv4(src, dst, 17, udp_len));
        assert_eq!(u16::from_be_bytes([f[40], f[41]]), want, "{line}");
    }
}

#[test]
fn vxlan_different_vni_is_another_flow() {
    let a = vxlan(0, 1, true);
    let mut b = vxlan(1, 2, true);
    b.payload[6] = 43;
    b = b.clone().payload(b.payload.clone());
    let o = run(&build([a, b]));
    assert_eq!(o.len(), 2);
    assert!(o.iter().all(|o| o.reason == FlushReason::EndOfInput));
}

#[test]
fn vxlan_port_not_configured_is_plain_udp() {
    let cfg = GroConfig {
        vxlan_ports: vec![],
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    let o = run_cfg(cfg, &build((0..3).map(|i| vxlan(i, 10 + i as u16, true))));
    // Plain UDP GRO needs a non-zero checksum: these pass.
    assert!(o.iter().all(|o| o.reason == FlushReason::UdpZeroChecksum));
}

// ---- VLAN ----

fn tagged(i: u32, vid: u16) -> FrameSpec {
    let mut s = seg4(i);
    if let crate::build::L2Spec::Ethernet { vlans, .. } = &mut s.l2 {
        vlans.push((0x8100, vid));
    }
    s
}

#[test]
fn vlan_tagged_frames_pass_without_a_vlan_gro_handler() {
    let o = run(&build((0..3).map(|i| tagged(i, 100))));
    assert!(o
        .iter()
        .all(|o| o.reason == FlushReason::VlanNotOffloaded && o.segments == 1));
}

#[test]
fn vlan_tagged_frames_merge_per_vid_with_vlan_gro() {
    let cfg = GroConfig {
        vlan_gro: true,
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    };
    let o = run_cfg(
        cfg,
        &build([
            tagged(0, 100),
            tagged(1, 100),
            tagged(2, 100),
            tagged(3, 200),
        ]),
    );
    assert_eq!(
        shape(&o),
        vec![(3, FlushReason::EndOfInput), (1, FlushReason::EndOfInput)]
    );
    let ip = crate::wire::ipv4::Ipv4::new_checked(&o[0].data[18..]).unwrap();
    assert_eq!(ip.total_len() as usize, 40 + 3 * MSS);
}

#[test]
fn vxlan_frames_are_counted_as_vxlan() {
    let frames = build((0..3).map(|i| vxlan(i, 10 + i as u16, true)));
    let mut e = GroEngine::new(GroConfig {
        flush_timeout_ns: 10_000_000,
        ..Default::default()
    });
    for f in &frames {
        e.receive(
            Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: 0,
                frame: 1,
                orig_len: f.len() as u32,
            },
            &mut |_d: &Delivered<'_>| {},
        );
    }
    e.finish(&mut |_d: &Delivered<'_>| {});
    assert_eq!(e.stats().proto_in[Proto::Vxlan as usize], 3);
    assert_eq!(e.stats().proto_out[Proto::Vxlan as usize], 1);
}

#[test]
fn proto_all_is_indexed_by_discriminant() {
    for (i, p) in Proto::ALL.iter().enumerate() {
        assert_eq!(*p as usize, i, "{}", p.name());
    }
}

#[test]
fn non_ip_frames_are_counted_as_other() {
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let mut e = GroEngine::new(GroConfig::default());
    e.receive(
        Input {
            data: &arp,
            link: LinkKind::Ethernet,
            timestamp_ns: 0,
            frame: 1,
            orig_len: arp.len() as u32,
        },
        &mut |_d: &Delivered<'_>| {},
    );
    assert_eq!(e.stats().proto_in[Proto::Other as usize], 1);
    assert_eq!(e.stats().proto_out[Proto::Other as usize], 1);
}

fn run_csum(csum: RxChecksum, frames: &[Vec<u8>]) -> Vec<(u32, FlushReason)> {
    let mut e = GroEngine::new(GroConfig {
        flush_timeout_ns: 10_000_000,
        ..GroConfig::default()
    });
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| outs.push((d.segments, d.reason));
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link: LinkKind::Ethernet,
            timestamp_ns: i as u64 * 1000,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        };
        e.receive_with_checksum(input, csum, &mut push);
    }
    e.finish(&mut push);
    outs
}

#[test]
fn checksum_unnecessary_is_not_verified_again() {
    let mut bad = seg4(1);
    bad.tcp_mut().corrupt_checksum = true;
    let frames = build([seg4(0), bad]);
    assert_eq!(
        run_csum(RxChecksum::None, &frames),
        vec![(1, FlushReason::BadChecksum), (1, FlushReason::EndOfInput)]
    );
    let valid = RxChecksum::Unnecessary { level: 0 };
    assert_eq!(run_csum(valid, &frames), vec![(2, FlushReason::EndOfInput)]);
}

#[test]
fn checksum_level_0_covers_only_the_outer_udp_of_a_tunnel() {
    // The outer UDP checksum is 0: it still uses the one known-good level
    // (`skb_gro_incr_csum_unnecessary`), so the inner TCP one is verified.
    let mut bad = vxlan(1, 1, true);
    let mut inner = FrameSpec::tcp4(
        [192, 168, 0, 2],
        [192, 168, 0, 1],
        TcpSpec::data(33333, 80, 1 + 1350),
    )
    .payload(vec![1; 1350]);
    inner.v4_mut().id = 8;
    inner.tcp_mut().corrupt_checksum = true;
    bad.payload = crate::build::vxlan_payload(42, &inner.build());
    let frames = build([vxlan(0, 0, true), bad]);
    assert_eq!(
        run_csum(RxChecksum::Unnecessary { level: 0 }, &frames),
        vec![(1, FlushReason::BadChecksum), (1, FlushReason::EndOfInput)]
    );
    assert_eq!(
        run_csum(RxChecksum::Unnecessary { level: 1 }, &frames),
        vec![(2, FlushReason::EndOfInput)]
    );
}

/// Runs a train twice, copying and zero-copy; returns both outputs with the
/// zero-copy packets made contiguous from the kept frames.
fn run_both(cfg: GroConfig, frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, usize) {
    let mut outs = [Vec::new(), Vec::new()];
    let mut frag_count = 0;
    for (k, zero_copy) in [false, true].into_iter().enumerate() {
        let mut e = GroEngine::new(cfg.clone());
        e.set_zero_copy(zero_copy);
        let out = &mut outs[k];
        let mut push = |d: &Delivered<'_>| {
            let mut v = Vec::new();
            d.copy_to(|n| &frames[n as usize - 1][..], &mut v);
            assert_eq!(v.len(), d.len());
            frag_count += d.frags.len();
            out.push(v);
        };
        for (i, f) in frames.iter().enumerate() {
            let input = Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64 * 1000,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            };
            e.receive(input, &mut push);
        }
        e.finish(&mut push);
    }
    let [a, b] = outs;
    (a, b, frag_count)
}

#[test]
fn zero_copy_delivers_the_same_bytes_as_copying() {
    let cfg = GroConfig {
        flush_timeout_ns: 10_000_000,
        gro_max_size: GRO_MAX_SIZE,
        ..GroConfig::default()
    };
    // TCP/IPv4, IPv6 BIG TCP (Hop-by-Hop inserted), UDP and VXLAN.
    let mut frames = build((0..50).map(seg4));
    frames.extend(build((0..120).map(seg6)));
    frames.extend(build((0..10).map(|i| udp4(i, 1000))));
    frames.extend(build((0..10).map(|i| vxlan(i, i as u16, true))));
    let (copied, zero, frags) = run_both(cfg, &frames);
    assert_eq!(copied, zero);
    assert!(frags > 150, "{frags} frags");
    assert!(copied.iter().any(|p| p.len() > 65_536), "a BIG TCP packet");
}
