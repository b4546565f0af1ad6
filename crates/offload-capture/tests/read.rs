//! Reading hand-built pcap and pcapng files in both byte orders.

mod common;

use common::*;
use offload_capture::{CaptureFormat, CaptureReader, LinkType, TsResolution};

fn both_ways(bytes: &[u8], name: &str) -> Vec<Owned> {
    // As a file (size known) and as a stream (size unknown): same frames, no error.
    let t = TempFile::with(name, bytes);
    let mut r = CaptureReader::open(&t.0).expect("open");
    let (file_frames, err) = read_all(&mut r);
    assert!(err.is_none(), "{}", err.unwrap());
    assert_eq!(r.bytes_read(), bytes.len() as u64);
    let (stream_frames, err) = read_bytes_as_stream(bytes, name).expect("stream open");
    assert!(err.is_none(), "{}", err.unwrap());
    assert_eq!(file_frames, stream_frames);
    file_frames
}

#[test]
fn pcap_micro_and_nano_in_both_byte_orders() {
    for be in [false, true] {
        for nanos in [false, true] {
            let mut f = pcap_header(be, nanos, 65535, 1);
            let a = frame_bytes(60, 1);
            let b = frame_bytes(1514, 2);
            f.extend(pcap_record(be, 1_700_000_000, 123_456, 60, 60, &a));
            f.extend(pcap_record(be, 1_700_000_001, 999_999, 1514, 1514, &b));
            let frames = both_ways(&f, "t.pcap");
            assert_eq!(frames.len(), 2, "be={be} nanos={nanos}");
            let unit = if nanos { 1 } else { 1000 };
            assert_eq!(
                frames[0].timestamp_ns,
                1_700_000_000_000_000_000 + 123_456 * unit
            );
            assert_eq!(
                frames[1].timestamp_ns,
                1_700_000_001_000_000_000 + 999_999 * unit
            );
            assert_eq!(frames[0].data, a);
            assert_eq!(frames[1].data, b);
            assert_eq!((frames[0].number, frames[1].number), (1, 2));
            assert_eq!(frames[1].link_type, LinkType::ETHERNET);
        }
    }
}

#[test]
fn pcap_header_facts_are_exposed() {
    let mut f = pcap_header(true, true, 262144, 113);
    f.extend(pcap_record(true, 1, 2, 4, 4, &[1, 2, 3, 4]));
    let t = TempFile::with("facts.pcap", &f);
    let r = CaptureReader::open(&t.0).unwrap();
    assert_eq!(r.format(), CaptureFormat::Pcap);
    assert_eq!(r.interfaces().len(), 1);
    let i = &r.interfaces()[0];
    assert_eq!(
        (i.link_type, i.snaplen, i.ts_resolution),
        (LinkType::LINUX_SLL, 262144, TsResolution::NANO)
    );
    assert_eq!(r.file_len(), Some(f.len() as u64));
}

#[test]
fn pcap_fcs_bits_are_split_from_the_link_type() {
    // 0x1 in bits 28..31 with the F bit (26): 2 bytes of FCS (the field counts 16-bit words).
    let mut f = pcap_header(false, false, 0, 1 | (1 << 26) | (1 << 28));
    f.extend(pcap_record(false, 1, 0, 4, 4, &[9; 4]));
    let (frames, err) = read_bytes_as_stream(&f, "fcs.pcap").unwrap();
    assert!(err.is_none());
    assert_eq!(frames[0].link_type, LinkType::ETHERNET);
    let r = CaptureReader::from_reader(std::io::Cursor::new(f), "fcs.pcap").unwrap();
    assert_eq!(r.interfaces()[0].fcs_len, Some(2));
}

#[test]
fn pcap_unknown_link_types_pass_through_as_numbers() {
    let mut f = pcap_header(false, false, 0, 4242);
    f.extend(pcap_record(false, 1, 0, 3, 3, &[1, 2, 3]));
    let frames = both_ways(&f, "lt.pcap");
    assert_eq!(frames[0].link_type, LinkType(4242));
}

#[test]
fn snaplen_truncated_frames_report_caplen_below_orig_len() {
    let data = frame_bytes(96, 3);
    let mut f = pcap_header(false, true, 96, 1);
    f.extend(pcap_record(false, 5, 0, 96, 1514, &data));
    let t = TempFile::with("trunc.pcap", &f);
    let mut r = CaptureReader::open(&t.0).unwrap();
    let fr = r.next_frame().unwrap().unwrap();
    assert_eq!((fr.caplen(), fr.orig_len), (96, 1514));
    assert!(fr.is_truncated());
    assert_eq!(fr.data, &data[..]);
}

#[test]
fn pcapng_interfaces_with_own_link_type_resolution_and_offset() {
    for be in [false, true] {
        let mut f = shb(be);
        // if0: Ethernet, default microseconds.
        f.extend(idb(be, 1, 0, &[(2, b"eth0".to_vec())]));
        // if1: raw IP, nanoseconds, offset +100 s.
        f.extend(idb(
            be,
            101,
            65535,
            &[
                (9, vec![9]),
                (
                    14,
                    if be {
                        100u64.to_be_bytes()
                    } else {
                        100u64.to_le_bytes()
                    }
                    .to_vec(),
                ),
            ],
        ));
        // if2: SLL2, 2^-20 s units (binary resolution).
        f.extend(idb(be, 276, 0, &[(9, vec![0x80 | 20])]));
        // if3: IPv6, milliseconds.
        f.extend(idb(be, 229, 0, &[(9, vec![3])]));
        let d: Vec<Vec<u8>> = (0..4).map(|i| frame_bytes(50 + i, i as u8)).collect();
        f.extend(epb(be, 0, 1_500_000, 50, &d[0]));
        f.extend(epb(be, 1, 7, 51, &d[1]));
        f.extend(epb(be, 2, (3 << 20) + (1 << 19), 52, &d[2]));
        f.extend(epb(be, 3, 1234, 53, &d[3]));
        let frames = both_ways(&f, "ifs.pcapng");
        assert_eq!(frames.len(), 4);
        let want = [
            (0, LinkType::ETHERNET, 1_500_000_000i64),
            (1, LinkType::RAW, 100_000_000_007),
            (2, LinkType::LINUX_SLL2, 3_500_000_000),
            (3, LinkType::IPV6, 1_234_000_000),
        ];
        for (fr, (iface, lt, ts)) in frames.iter().zip(want) {
            assert_eq!(
                (fr.interface, fr.link_type, fr.timestamp_ns),
                (iface, lt, ts),
                "be={be}"
            );
            assert_eq!(fr.data, d[iface as usize]);
        }
        let r = CaptureReader::from_reader(std::io::Cursor::new(f), "x").unwrap();
        assert_eq!(r.format(), CaptureFormat::PcapNg);
    }
}

#[test]
fn pcapng_idb_metadata_is_exposed() {
    let mut f = shb(false);
    f.extend(idb(
        false,
        1,
        1500,
        &[(2, b"veth0".to_vec()), (9, vec![9]), (13, vec![4])],
    ));
    f.extend(epb(false, 0, 1, 4, &[1, 2, 3, 4]));
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(f), "m").unwrap();
    r.next_frame().unwrap().unwrap();
    let i = &r.interfaces()[0];
    assert_eq!(i.name.as_deref(), Some("veth0"));
    assert_eq!(
        (i.snaplen, i.ts_resolution, i.fcs_len, i.section),
        (1500, TsResolution::NANO, Some(4), 0)
    );
}

#[test]
fn pcapng_sections_of_both_byte_orders_number_interfaces_globally() {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, &[]));
    f.extend(epb(false, 0, 1, 3, &[1, 2, 3]));
    // Second section, big-endian, its own interface 0 (a raw-IP one).
    f.extend(shb(true));
    f.extend(idb(true, 228, 0, &[(9, vec![9])]));
    f.extend(epb(true, 0, 42, 4, &[4, 5, 6, 7]));
    // Third section, little-endian again.
    f.extend(shb(false));
    f.extend(idb(false, 113, 0, &[]));
    f.extend(epb(false, 0, 2, 1, &[8]));
    let frames = both_ways(&f, "sections.pcapng");
    let got: Vec<_> = frames
        .iter()
        .map(|f| (f.number, f.interface, f.link_type, f.timestamp_ns))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, 0, LinkType::ETHERNET, 1000),
            (2, 1, LinkType::IPV4, 42),
            (3, 2, LinkType::LINUX_SLL, 2000)
        ]
    );
    let r = CaptureReader::from_reader(std::io::Cursor::new(f), "s").unwrap();
    drop(r);
}

#[test]
fn pcapng_simple_and_obsolete_packet_blocks() {
    for be in [false, true] {
        let mut f = shb(be);
        f.extend(idb(be, 1, 64, &[]));
        let big = frame_bytes(100, 7);
        // SPB: caplen is min(orig_len, snaplen, block room): 100 bytes on the wire, snaplen 64.
        f.extend(spb(be, 100, &big[..64]));
        f.extend(pb(be, 0, 5_000_000, 10, &big[..10]));
        let frames = both_ways(&f, "spb.pcapng");
        assert_eq!(frames.len(), 2);
        assert_eq!(
            (frames[0].orig_len, frames[0].data.as_slice()),
            (100, &big[..64])
        );
        assert_eq!(frames[0].timestamp_ns, 0);
        assert_eq!(
            (
                frames[1].number,
                frames[1].timestamp_ns,
                frames[1].data.as_slice()
            ),
            (2, 5_000_000_000, &big[..10])
        );
    }
}

#[test]
fn pcapng_skips_unknown_blocks_and_numbers_frames_as_tshark() {
    // tshark 4.0.17 shows systemd journal (9) and custom (0xBAD, 0x40000BAD)
    // blocks as frames, and not statistics (5), name resolution (4), decryption
    // secrets (10) or unknown blocks.
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, &[]));
    f.extend(epb(false, 0, 1, 1, &[1]));
    f.extend(block(false, 9, b"MESSAGE=hi\n"));
    f.extend(block(false, 0x0BAD, &[0, 0, 0x30, 0x39, 1, 2]));
    f.extend(block(false, 5, &[0; 16]));
    f.extend(block(false, 4, &[0; 4]));
    f.extend(block(false, 10, &[0; 12]));
    f.extend(block(false, 0x4000_0BAD, &[0; 8]));
    f.extend(block(false, 0x1234_5678, &frame_bytes(3000, 1)));
    f.extend(epb(false, 0, 2, 1, &[2]));
    let frames = both_ways(&f, "skip.pcapng");
    let nums: Vec<_> = frames.iter().map(|f| (f.number, f.data[0])).collect();
    assert_eq!(nums, vec![(1, 1), (5, 2)]);
}

#[test]
fn frames_of_200000_bytes_and_larger_than_the_buffer() {
    let big = frame_bytes(200_000, 9);
    let huge = frame_bytes(524_294, 10); // BIG TCP 512 KiB IPv6 packet + Ethernet
    let over_buffer = frame_bytes(3 << 20, 11); // larger than the 1 MiB read buffer
    for be in [false, true] {
        let mut p = pcap_header(be, true, 0, 1);
        let mut n = shb(be);
        n.extend(idb(be, 1, 0, &[(9, vec![9])]));
        for (i, d) in [&big, &huge, &over_buffer, &big].iter().enumerate() {
            p.extend(pcap_record(
                be,
                i as u32,
                0,
                d.len() as u32,
                d.len() as u32,
                d,
            ));
            n.extend(epb(be, 0, i as u64, d.len() as u32, d));
        }
        for (bytes, name) in [(&p, "big.pcap"), (&n, "big.pcapng")] {
            let frames = both_ways(bytes, name);
            assert_eq!(frames.len(), 4);
            assert_eq!(frames[0].data, big);
            assert_eq!(frames[1].data, huge);
            assert_eq!(frames[2].data, over_buffer);
            assert_eq!(frames[3].data, big);
        }
    }
}

#[test]
fn empty_capture_with_only_a_header_has_no_frames() {
    let (frames, err) =
        read_bytes_as_stream(&pcap_header(false, false, 65535, 1), "e.pcap").unwrap();
    assert!(frames.is_empty() && err.is_none());
    let (frames, err) = read_bytes_as_stream(&shb(true), "e.pcapng").unwrap();
    assert!(frames.is_empty() && err.is_none());
}

#[test]
fn reader_is_fused_after_the_end() {
    let mut f = pcap_header(false, false, 0, 1);
    f.extend(pcap_record(false, 1, 0, 1, 1, &[1]));
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(f), "f").unwrap();
    assert!(r.next_frame().unwrap().is_some());
    assert!(r.next_frame().unwrap().is_none());
    assert!(r.next_frame().unwrap().is_none());
    assert_eq!(r.last_frame_number(), 1);
}
