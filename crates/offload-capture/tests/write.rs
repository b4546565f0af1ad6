//! Writer round trips: what is written reads back identical.

mod common;

use common::*;
use offload_capture::{
    CaptureFormat, CaptureReader, CaptureWriter, ErrorKind, FrameMeta, InterfaceDesc, LinkType,
    Oversize, MAX_FRAME_LEN, WIRESHARK_MAX_CAPLEN,
};

/// Frames with sizes from tiny to BIG TCP, nanosecond timestamps, one truncated.
fn sample() -> Vec<(FrameMeta, Vec<u8>)> {
    let mut v = Vec::new();
    for (i, n) in [
        74usize, 1514, 9014, 65535, 65536, 200_000, 262_144, 524_294, 80,
    ]
    .iter()
    .enumerate()
    {
        let d = eth_ipv6_tcp(*n, i as u32);
        let meta = FrameMeta::new(
            1_700_000_000_123_456_789 + i as i64 * 1_001,
            LinkType::ETHERNET,
            d.len(),
        );
        v.push((meta, d));
    }
    // A snaplen-truncated frame: 96 bytes kept of 1514.
    let d = eth_ipv6_tcp(1514, 99)[..96].to_vec();
    v.push((
        FrameMeta {
            orig_len: 1514,
            ..FrameMeta::new(1_800_000_000_000_000_001, LinkType::ETHERNET, 96)
        },
        d,
    ));
    v
}

fn check_read_back(path: &std::path::Path, want: &[(FrameMeta, Vec<u8>)]) -> CaptureReader {
    let mut r = CaptureReader::open(path).unwrap();
    let (frames, err) = read_all(&mut r);
    assert!(err.is_none(), "{}", err.unwrap());
    assert_eq!(frames.len(), want.len());
    for (f, (m, d)) in frames.iter().zip(want) {
        assert_eq!(f.timestamp_ns, m.timestamp_ns, "frame {}", f.number);
        assert_eq!(f.orig_len, m.orig_len, "frame {}", f.number);
        assert_eq!(f.link_type, m.link_type, "frame {}", f.number);
        assert!(f.data == *d, "frame {} bytes differ", f.number);
    }
    r
}

#[test]
fn pcap_and_pcapng_round_trip_losslessly_with_big_frames() {
    let want = sample();
    for name in ["rt.pcap", "rt.pcapng", "rt.cap"] {
        let t = TempFile::new(name);
        let mut w = CaptureWriter::create(&t.0, None).unwrap();
        for (m, d) in &want {
            w.write_frame(m, d).unwrap();
        }
        let stats = w.finish().unwrap();
        assert_eq!(stats.frames, want.len() as u64);
        assert_eq!(stats.max_caplen, 524_294);
        assert_eq!(
            (stats.over_wireshark_limit, stats.first_over_wireshark_limit),
            (1, Some(8))
        );
        assert_eq!(stats.bytes, std::fs::metadata(&t.0).unwrap().len());
        let r = check_read_back(&t.0, &want);
        let fmt = if name.ends_with("ng") {
            CaptureFormat::PcapNg
        } else {
            CaptureFormat::Pcap
        };
        assert_eq!(r.format(), fmt);
        // pcap: the header's snapshot length was patched to the largest frame;
        // pcapng: the interface says 0, "no limit".
        let want_snap = if fmt == CaptureFormat::Pcap {
            524_294
        } else {
            0
        };
        assert_eq!(r.interfaces()[0].snaplen, want_snap);
    }
}

#[test]
fn pcap_snaplen_is_the_wireshark_default_when_frames_fit() {
    let t = TempFile::new("small.pcap");
    let mut w = CaptureWriter::create(&t.0, None).unwrap();
    w.write_frame(&FrameMeta::new(1, LinkType::RAW, 28), &ipv4_udp(28))
        .unwrap();
    w.finish().unwrap();
    let r = CaptureReader::open(&t.0).unwrap();
    assert_eq!(r.interfaces()[0].snaplen, WIRESHARK_MAX_CAPLEN);
    assert_eq!(r.interfaces()[0].link_type, LinkType::RAW);
}

#[test]
fn streams_announce_the_maximum_snaplen_and_read_back() {
    let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w =
        CaptureWriter::from_writer(Shared(buf.clone()), "out", CaptureFormat::Pcap).unwrap();
    let d = eth_ipv6_tcp(300_000, 1);
    w.write_frame(&FrameMeta::new(5, LinkType::ETHERNET, d.len()), &d)
        .unwrap();
    w.finish().unwrap();
    let bytes = buf.lock().unwrap().clone();
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(bytes), "out").unwrap();
    assert_eq!(r.interfaces()[0].snaplen, MAX_FRAME_LEN);
    assert_eq!(r.next_frame().unwrap().unwrap().data, &d[..]);
}

#[test]
fn truncate_mode_cuts_frames_and_keeps_their_length() {
    for name in ["cut.pcap", "cut.pcapng"] {
        let t = TempFile::new(name);
        let mut w = CaptureWriter::create(&t.0, None).unwrap();
        w.set_oversize(Oversize::Truncate(WIRESHARK_MAX_CAPLEN));
        let d = eth_ipv6_tcp(524_294, 1);
        w.write_frame(&FrameMeta::new(7, LinkType::ETHERNET, d.len()), &d)
            .unwrap();
        w.write_frame(&FrameMeta::new(8, LinkType::ETHERNET, 60), &d[..60])
            .unwrap();
        let s = w.finish().unwrap();
        assert_eq!(
            (s.truncated, s.over_wireshark_limit, s.max_caplen),
            (1, 0, WIRESHARK_MAX_CAPLEN)
        );
        let mut r = CaptureReader::open(&t.0).unwrap();
        assert_eq!(
            r.interfaces().first().map(|i| i.snaplen),
            if name.ends_with("ng") {
                None
            } else {
                Some(262_144)
            }
        );
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(
            (f.caplen(), f.orig_len, f.is_truncated()),
            (262_144, 524_294, true)
        );
        assert_eq!(f.data, &d[..262_144]);
        assert_eq!(r.interfaces()[0].snaplen, 262_144);
    }
}

#[test]
fn pcapng_writes_one_interface_per_link_type_or_the_declared_ones() {
    let t = TempFile::new("multi.pcapng");
    let mut w = CaptureWriter::create(&t.0, None).unwrap();
    let e = eth_ipv6_tcp(100, 1);
    let r4 = ipv4_udp(48);
    w.write_frame(&FrameMeta::new(1, LinkType::ETHERNET, 100), &e)
        .unwrap();
    w.write_frame(&FrameMeta::new(2, LinkType::RAW, 48), &r4)
        .unwrap();
    w.write_frame(&FrameMeta::new(3, LinkType::ETHERNET, 100), &e)
        .unwrap();
    // Two declared interfaces of the same link type stay distinct.
    let a = w
        .add_interface(&InterfaceDesc {
            link_type: LinkType::LINUX_SLL2,
            name: Some("a".into()),
        })
        .unwrap();
    let b = w
        .add_interface(&InterfaceDesc {
            link_type: LinkType::LINUX_SLL2,
            name: Some("b".into()),
        })
        .unwrap();
    assert_eq!((a, b), (2, 3));
    let meta = |ts, iface| FrameMeta {
        interface: Some(iface),
        ..FrameMeta::new(ts, LinkType::LINUX_SLL2, 20)
    };
    w.write_frame(&meta(4, b), &[1; 20]).unwrap();
    w.write_frame(&meta(5, a), &[2; 20]).unwrap();
    // Naming an interface with the wrong link type, or one never declared, is an error.
    let err = w
        .write_frame(
            &FrameMeta {
                interface: Some(a),
                ..FrameMeta::new(6, LinkType::RAW, 1)
            },
            &[0],
        )
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::LinkTypeMismatch { .. }),
        "{err}"
    );
    assert_eq!(err.frame, Some(6));
    let err = w
        .write_frame(
            &FrameMeta {
                interface: Some(9),
                ..FrameMeta::new(6, LinkType::RAW, 1)
            },
            &[0],
        )
        .unwrap_err();
    assert!(
        matches!(
            err.kind,
            ErrorKind::UnknownInterface {
                interface: 9,
                declared: 4
            }
        ),
        "{err}"
    );
    w.finish().unwrap();

    let mut r = CaptureReader::open(&t.0).unwrap();
    let (frames, err) = read_all(&mut r);
    assert!(err.is_none());
    let got: Vec<_> = frames
        .iter()
        .map(|f| (f.interface, f.link_type, f.timestamp_ns))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, LinkType::ETHERNET, 1),
            (1, LinkType::RAW, 2),
            (0, LinkType::ETHERNET, 3),
            (3, LinkType::LINUX_SLL2, 4),
            (2, LinkType::LINUX_SLL2, 5)
        ]
    );
    let names: Vec<_> = r.interfaces().iter().map(|i| i.name.clone()).collect();
    assert_eq!(names, vec![None, None, Some("a".into()), Some("b".into())]);
}

#[test]
fn pcap_refuses_a_second_link_type_and_clamps_timestamps() {
    let t = TempFile::new("one.pcap");
    let mut w = CaptureWriter::create(&t.0, None).unwrap();
    w.write_frame(&FrameMeta::new(1, LinkType::ETHERNET, 60), &[0; 60])
        .unwrap();
    let e = w
        .write_frame(&FrameMeta::new(2, LinkType::RAW, 20), &[0x45; 20])
        .unwrap_err();
    assert!(
        matches!(
            e.kind,
            ErrorKind::LinkTypeMismatch {
                file: LinkType::ETHERNET,
                frame: LinkType::RAW
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("frame 2"), "{e}");
    // Times pcap cannot hold are written as the nearest it can, and
    // counted: before 1970, and from 2^32 s (2106) on.
    w.write_frame(&FrameMeta::new(-1, LinkType::ETHERNET, 60), &[0; 60])
        .unwrap();
    w.write_frame(&FrameMeta::new(1 << 62, LinkType::ETHERNET, 60), &[0; 60])
        .unwrap();
    w.write_frame(
        &FrameMeta::new((1 << 32) * 1_000_000_000 - 1, LinkType::ETHERNET, 60),
        &[0; 60],
    )
    .unwrap();
    assert_eq!(w.stats().timestamps_clamped, 2);
    assert_eq!(w.stats().first_timestamp_clamped, Some(2));
    // ... but fits pcapng.
    let t2 = TempFile::new("far.pcapng");
    let mut w2 = CaptureWriter::create(&t2.0, None).unwrap();
    w2.write_frame(&FrameMeta::new(1 << 62, LinkType::ETHERNET, 60), &[0; 60])
        .unwrap();
    w2.finish().unwrap();
    let mut r = CaptureReader::open(&t2.0).unwrap();
    assert_eq!(r.next_frame().unwrap().unwrap().timestamp_ns, 1 << 62);
    w.finish().unwrap();
    let mut r = CaptureReader::open(&t.0).unwrap();
    let times: Vec<i64> =
        std::iter::from_fn(|| r.next_frame().unwrap().map(|f| f.timestamp_ns)).collect();
    let last_pcap_ns = (1i64 << 32) * 1_000_000_000 - 1;
    assert_eq!(times, [1, 0, last_pcap_ns, last_pcap_ns]);
}

#[test]
fn empty_outputs_are_valid_captures() {
    for name in ["none.pcap", "none.pcapng"] {
        let t = TempFile::new(name);
        CaptureWriter::create(&t.0, None).unwrap().finish().unwrap();
        let mut r = CaptureReader::open(&t.0).unwrap();
        assert!(r.next_frame().unwrap().is_none());
    }
}

#[test]
fn format_comes_from_the_extension_or_the_caller() {
    let t = TempFile::new("out.txt");
    let e = CaptureWriter::create(&t.0, None).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::UnknownExtension), "{e}");
    assert!(e.to_string().contains("out.txt"), "{e}");
    let w = CaptureWriter::create(&t.0, Some(CaptureFormat::PcapNg)).unwrap();
    assert_eq!(w.format(), CaptureFormat::PcapNg);
    w.finish().unwrap();
    assert_eq!(
        CaptureReader::open(&t.0).unwrap().format(),
        CaptureFormat::PcapNg
    );
}

#[test]
fn copying_a_multi_interface_pcapng_keeps_interfaces_and_times() {
    // Hand-built big-endian input with microsecond and 2^-20 s interfaces.
    let mut f = shb(true);
    f.extend(idb(true, 1, 0, &[]));
    f.extend(idb(true, 101, 0, &[(9, vec![0x80 | 20])]));
    f.extend(epb(true, 0, 1_000_001, 100, &eth_ipv6_tcp(100, 1)));
    f.extend(epb(true, 1, 1 << 20, 48, &ipv4_udp(48)));
    let input = TempFile::with("in.pcapng", &f);
    let out = TempFile::new("copy.pcapng");
    let mut r = CaptureReader::open(&input.0).unwrap();
    let mut w = CaptureWriter::create(&out.0, None).unwrap();
    while let Some(fr) = r.next_frame().unwrap() {
        w.write(&fr).unwrap();
    }
    w.finish().unwrap();
    let mut r2 = CaptureReader::open(&out.0).unwrap();
    let (frames, _) = read_all(&mut r2);
    let got: Vec<_> = frames
        .iter()
        .map(|f| (f.link_type, f.timestamp_ns, f.data.len()))
        .collect();
    assert_eq!(
        got,
        vec![
            (LinkType::ETHERNET, 1_000_001_000, 100),
            (LinkType::RAW, 1_000_000_000, 48)
        ]
    );
}

/// Cuts `d` into parts as a zero-copy GRO super-packet is: a header, then
/// ranges of varying size, one empty; `fine` cuts it into 100-byte ranges
/// (hundreds of parts: several vectored writes per record).
fn cut(d: &[u8], i: usize, fine: bool) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    let mut step = if fine { 100 } else { 54 + i * 13 };
    while at < d.len() {
        let end = (at + step).min(d.len());
        parts.push(&d[at..end]);
        if parts.len() == 2 {
            parts.push(&[]);
        }
        at = end;
        if !fine {
            step = step * 3 / 2 + 1;
        }
    }
    parts
}

/// The sample plus a 2 MiB frame (larger than the writer's buffer: written
/// past it in one `writev`).
fn sample_with_huge_frame() -> Vec<(FrameMeta, Vec<u8>)> {
    let mut frames = sample();
    let d = eth_ipv6_tcp(2 << 20, 7);
    frames.push((
        FrameMeta::new(1_900_000_000, LinkType::ETHERNET, d.len()),
        d,
    ));
    frames
}

/// A frame written as parts (a zero-copy GRO super-packet: headers, then
/// borrowed payload ranges) gives the same file, byte for byte, as the
/// frame written whole: pcap and pcapng, with and without truncation and
/// a comment, parts empty or split anywhere, few or hundreds of parts.
#[test]
fn frames_written_as_parts_equal_frames_written_whole() {
    let frames = sample_with_huge_frame();
    for ext in ["pcap", "pcapng"] {
        for oversize in [Oversize::Keep, Oversize::Truncate(1000)] {
            let whole = TempFile::new(&format!("whole.{ext}"));
            let split = TempFile::new(&format!("parts.{ext}"));
            let mut a = CaptureWriter::create(&whole.0, None).unwrap();
            let mut b = CaptureWriter::create(&split.0, None).unwrap();
            a.set_oversize(oversize);
            b.set_oversize(oversize);
            for (i, (m, d)) in frames.iter().enumerate() {
                let comment = (i % 3 == 0).then_some("gso_size=1448");
                a.write_frame_with_comment(m, d, comment).unwrap();
                b.write_frame_parts(m, &cut(d, i, i % 2 == 1), comment)
                    .unwrap();
            }
            let (sa, sb) = (a.finish().unwrap(), b.finish().unwrap());
            assert_eq!(sa, sb);
            let (fa, fb) = (
                std::fs::read(&whole.0).unwrap(),
                std::fs::read(&split.0).unwrap(),
            );
            assert!(fa == fb, "{ext} {oversize:?}: files differ");
            if oversize == Oversize::Keep {
                check_read_back(&split.0, &frames);
            }
        }
    }
}

/// A stream that takes at most 777 bytes per call (a pipe under pressure):
/// the vectored record writes resume mid-slice and lose nothing.
#[test]
fn parts_survive_short_writes_of_a_stream() {
    struct Short(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Short {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(777);
            self.0.lock().unwrap().extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let frames = sample_with_huge_frame();
    for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
        let (whole, split) = (
            std::sync::Arc::new(std::sync::Mutex::new(Vec::new())),
            std::sync::Arc::new(std::sync::Mutex::new(Vec::new())),
        );
        let mut a = CaptureWriter::from_writer(Short(whole.clone()), "whole", format).unwrap();
        let mut b = CaptureWriter::from_writer(Short(split.clone()), "split", format).unwrap();
        for (i, (m, d)) in frames.iter().enumerate() {
            let comment = (i % 2 == 0).then_some("gso_size=1448 gso_type=tcpv6");
            a.write_frame_with_comment(m, d, comment).unwrap();
            b.write_frame_parts(m, &cut(d, i, i % 3 == 0), comment)
                .unwrap();
        }
        assert_eq!(a.finish().unwrap(), b.finish().unwrap());
        let (wa, wb) = (whole.lock().unwrap().clone(), split.lock().unwrap().clone());
        assert!(wa == wb, "{format:?}: streams differ");
        let mut r = CaptureReader::from_reader(std::io::Cursor::new(wb), "split").unwrap();
        let (got, err) = read_all(&mut r);
        assert!(err.is_none(), "{}", err.unwrap());
        assert_eq!(got.len(), frames.len());
        for (f, (_, d)) in got.iter().zip(&frames) {
            assert!(f.data == *d, "{format:?} frame {} differs", f.number);
        }
    }
}
